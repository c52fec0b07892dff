/* ls_model: see ls_model.h.  The model's own table, its line accessors and
 * its release; the build is ls_model_build.c, its parts ls_model_*.c. */
#include "ls_model.h"

#include <stdlib.h>
#include <string.h>

const uint64_t ls_model_hist_edges_ns[LS_HIST_BINS] = {
    0, 1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000, 500000, 1000000, 10000000,
};

/* A model without ops keeps no step, range or group line: these read as an
 * empty sweep's (no device, no stream). */
static const ls_timeline empty_timeline = {
    .line = {.device_id = LS_MODEL_NO_ID, .stream_id = LS_MODEL_NO_ID}};

const ls_timeline *ls_model_step_line(const ls_model *m, size_t s)
{
    return m->step_lines != NULL ? &m->step_lines[s] : &empty_timeline;
}

const ls_line *ls_model_range_line(const ls_model *m, size_t i)
{
    uint32_t at = m->range_line_at != NULL ? m->range_line_at[i] : LS_MODEL_NO_ID;
    return at != LS_MODEL_NO_ID ? &m->range_lines[at] : &empty_timeline.line;
}

const ls_timeline *ls_model_group_line(const ls_model *m, size_t g)
{
    return m->group_lines != NULL ? &m->group_lines[g] : &empty_timeline;
}

uint64_t ls_model_group_span_ns(const ls_model *m, size_t g)
{
    return m->group_span_ns != NULL ? m->group_span_ns[g] : 0;
}

void ls_model_free(ls_model *m)
{
    free(m->op_launch_ns);
    free(m->op_step);
    free(m->op_range);
    free(m->op_group);
    free(m->op_comm);
    free(m->op_fill);
    free(m->call_step);
    free(m->api_step);
    free(m->sync_gap_ns);
    free(m->gap_waited_ns);
    ls_readiness_free(&m->readiness);
    ls_kernels_free(&m->kernels);
    free(m->gaps);
    free(m->devices);
    free(m->streams);
    ls_attribution_free_steps(&m->steps);
    free(m->step_lines);
    free(m->step_syncs);
    free(m->step_sync_blocked_ns);
    free(m->range_lines);
    free(m->range_line_at);
    ls_attribution_free_groups(&m->groups);
    free(m->group_lines);
    free(m->group_span_ns);
    ls_syncs_free(&m->syncs);
    free(m->step_metrics);
    free(m->range_metrics);
    free(m->group_metrics);
    memset(m, 0, sizeof *m);
}
