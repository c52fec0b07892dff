/* ls_model_build: see ls_model_build.h (split out of ls_model.c, issue 29). */
#include "ls_model_build.h"

#include "ls_bulk.h"
#include "ls_model_ctx.h"
#include "ls_model_counters.h"
#include "ls_model_launches.h"
#include "ls_model_order.h"
#include "ls_model_projections.h"
#include "ls_model_timeline.h"

#include <stdlib.h>
#include <string.h>

int ls_model_build(const ls_records *r, const ls_model_options *o, ls_model *m)
{
    memset(m, 0, sizeof *m);
    m->thresholds = o->thresholds;
    ls_ctx c;
    ls_buckets step_ops = {0}; /* the steps' ops, read again by the ranges */
    memset(&c, 0, sizeof c);
    c.r = r;
    c.m = m;
    size_t n = r->ops.count;
    size_t room = room_for(n);
    uint32_t *by_device = ls_bulk_malloc(room * sizeof *by_device); /* then by stream */
    m->op_launch_ns = ls_bulk_malloc(room * sizeof *m->op_launch_ns);
    m->op_step = ls_bulk_malloc(room * sizeof *m->op_step);
    m->op_range = ls_bulk_malloc(room * sizeof *m->op_range);
    m->op_group = ls_bulk_malloc(room * sizeof *m->op_group);
    m->op_comm = ls_bulk_malloc(room);
    m->op_fill = ls_bulk_malloc(room * sizeof *m->op_fill);
    m->call_step = ls_bulk_malloc(room_for(r->calls.count) * sizeof *m->call_step);
    m->api_step = ls_bulk_malloc(room_for(r->apis.count) * sizeof *m->api_step);
    m->gaps = ls_bulk_malloc(room * sizeof *m->gaps);
    m->devices = ls_bulk_malloc(room * sizeof *m->devices);
    m->streams = ls_bulk_malloc(room * sizeof *m->streams);
    c.scratch = ls_bulk_malloc(room * sizeof *c.scratch);
    c.intervals = ls_bulk_malloc(room * sizeof *c.intervals);
    /* The launching thread of each op, read by the attribution only: it
     * lives in the scratch, whose pages the sweeps then reuse (fresh pages
     * cost a fault each: 80 MB of them at 10M ops). */
    uint64_t *launch_thread = c.scratch;
    int result = -1;
    if (!by_device ||
        !m->op_launch_ns || !m->op_step || !m->op_range || !m->op_group || !m->op_comm ||
        !m->op_fill || !m->call_step || !m->api_step ||
        !m->gaps || !m->devices || !m->streams || !c.scratch ||
        !c.intervals)
        goto done;
    m->has_samples = r->samples.count > 0;
    if (m->has_samples &&
        ls_sample_index_build(&c.samples, r->samples.items, r->samples.count) != 0)
        goto done;
    if (ls_model_fill_and_comm(&c) != 0 || ls_syncs_build(r, &m->syncs) != 0 ||
        ls_model_match_launches(&c, launch_thread) != 0 || ls_model_index_syncs(&c) != 0 ||
        ls_kernels_table(r, m->op_fill, &m->kernels) != 0)
        goto done;
    m->sync_gap_ns = ls_bulk_calloc(room_for(m->syncs.count), sizeof *m->sync_gap_ns);
    if (m->sync_gap_ns == NULL)
        goto done;
    int rc = ls_model_attribute(&c, o, launch_thread);
    if (rc != 0) {
        result = rc;
        goto done;
    }
    if (ls_readiness_build(r, m->steps.count, m->op_step, m->call_step, m->api_step,
                           &m->readiness) != 0)
        goto done;
    free(m->api_step); /* read by the readiness only: 4 B an API record given back */
    m->api_step = NULL;

    /* Devices: all streams of a device merged; the gaps are the model's. */
    if (ls_model_sort_ops(r, 0, by_device) != 0)
        goto done;
    c.interval_count = 0; /* the sampled device's busy intervals, for the run's window */
    m->device_count =
        ls_model_sweep_lines(&c, by_device, 0, m->devices, m->gaps, &m->gap_count, m->has_samples);
    /* scratch is reused by the steps' and groups' statistics: its pages
     * are already there (fresh ones cost a fault each, up to 80 MB of them
     * at 10M gaps). */
    if (m->has_samples)
        ls_model_average_window(&c, r->start_ns, r->stop_ns, &m->metrics);

    if (ls_model_sync_gaps(&c) != 0)
        goto done;

    if (ls_model_project_steps(&c, by_device, &step_ops) != 0 ||
        ls_model_project_ranges(&c, by_device, &step_ops) != 0)
        goto done;
    ls_model_free_buckets(&step_ops);

    /* Streams: each on its own, its gaps kept only as statistics (the
     * device order is not needed any more: its array takes the streams').
     * As many streams as devices: each device ran one (a loop on the
     * default or one side stream), and each stream's line is its device's,
     * copied (the keys in (device, stream) order follow the devices').
     * Otherwise the device order partitioned by stream, or with too many
     * streams for that, sorted. */
    ls_stream_set set;
    rc = ls_model_distinct_streams(r, &set);
    if (rc < 0)
        goto done;
    if (rc == 0 && set.count == m->device_count) {
        for (size_t d = 0; d < m->device_count; d++) {
            m->streams[d] = m->devices[d];
            m->streams[d].line.stream_id = (uint32_t)set.keys[d];
        }
        m->stream_count = m->device_count;
    } else {
        if (rc == 0 ? ls_model_stream_order_from_device_order(r, &set, &by_device) != 0
                    : ls_model_sort_ops(r, 1, by_device) != 0) {
            ls_model_stream_set_free(&set);
            goto done;
        }
        m->stream_count = ls_model_sweep_lines(&c, by_device, 1, m->streams, NULL, NULL, 0);
    }
    ls_model_stream_set_free(&set);

    /* The total: every device's line summed, every gap's statistics. */
    ls_line *t = &m->total.line;
    memset(&m->total, 0, sizeof m->total);
    t->device_id = t->stream_id = LS_MODEL_NO_ID;
    for (size_t d = 0; d < m->device_count; d++) {
        const ls_line *dev = &m->devices[d].line;
        t->kernels += dev->kernels;
        t->memcpys += dev->memcpys;
        t->memsets += dev->memsets;
        t->graphs += dev->graphs;
        t->graph_ns += dev->graph_ns;
        t->busy_ns += dev->busy_ns;
        t->replay_idle_ns += dev->replay_idle_ns;
        t->compute_ns += dev->compute_ns;
        t->comm_ns += dev->comm_ns;
        t->kernel_ns += dev->kernel_ns;
        t->shaped_ns += dev->shaped_ns;
        t->filled_ns += dev->filled_ns;
        if (t->first_ns == 0 || dev->first_ns < t->first_ns)
            t->first_ns = dev->first_ns;
        if (dev->last_ns > t->last_ns)
            t->last_ns = dev->last_ns;
    }
    if (m->device_count == 1) /* the same gaps in the same order */
        m->total.gaps = m->devices[0].gaps;
    else
        ls_model_gap_stats(&c, m->gaps, NULL, m->gap_count, &m->total.gaps);
    for (size_t d = 0; m->device_count > 1 && d < m->device_count; d++)
        m->total.gaps.merged += m->devices[d].gaps.merged;
    result = 0;
done:
    ls_model_free_buckets(&step_ops);
    free(by_device);
    free(c.scratch);
    free(c.sync_start);
    free(c.sync_max_end);
    free(c.intervals);
    ls_sample_index_free(&c.samples);
    if (result != 0)
        ls_model_free(m);
    return result;
}
