/* ls_model_counters: see ls_model_counters.h (split out of ls_model.c, issue 29). */
#include "ls_model_counters.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int is_pct(int metric)
{
    const char *name = ls_metric_name(metric);
    size_t len = strlen(name);
    return len > 4 && strcmp(name + len - 4, "_pct") == 0;
}

/* Span and busy averages of one window: the sampled device's busy
 * intervals of its last sweep (ctx->intervals) or, with none, the host
 * span [host_a, host_b]; busy estimated from GR active when unmeasured. */
void ls_model_average_window(const ls_ctx *c, uint64_t host_a, uint64_t host_b, ls_metrics *out)
{
    size_t m = c->interval_count;
    ls_interval whole = {host_a, host_b};
    if (m > 0) {
        whole.start_ns = c->intervals[0].start_ns;
        whole.end_ns = c->intervals[m - 1].end_ns;
    }
    ls_samples_average(&c->samples, &whole, 1, &out->span);
    ls_samples_average(&c->samples, c->intervals, m, &out->busy);
    if (out->busy.samples > 0) {
        out->busy_from = LS_BUSY_FROM_OPS;
        return;
    }
    /* No op there (counters-only mode): busy = span * 100 / GR active. */
    double gr = out->span.value[LS_M_GR_ACTIVE];
    int usable = !isnan(gr) && gr != 0.0;
    out->busy_from = usable ? LS_BUSY_FROM_GR : LS_BUSY_FROM_NONE;
    out->busy = out->span;
    for (int j = 0; j < LS_METRICS; j++) {
        double v = out->span.value[j];
        if (isnan(v))
            continue;
        if (!usable) {
            out->busy.value[j] = NAN;
            continue;
        }
        double scaled = v * 100.0 / gr;
        out->busy.value[j] = is_pct(j) && scaled > 100.0 ? 100.0 : scaled;
    }
}

static uint64_t covered(const ls_metric_avg *a)
{
    uint64_t most = 0;
    for (int j = 0; j < LS_METRICS; j++)
        if (a->covered_ns[j] > most)
            most = a->covered_ns[j];
    return most;
}

/* Each group's figures: its ranges' averages, weighted by covered time. */
int ls_model_fold_group_metrics(ls_model *m, size_t range_count)
{
    size_t ng = m->groups.count;
    m->group_metrics = calloc(room_for(ng), sizeof *m->group_metrics);
    double *weight = calloc(room_for(ng) * 2 * LS_METRICS, sizeof *weight);
    if (m->group_metrics == NULL || weight == NULL) {
        free(weight);
        return -1;
    }
    for (size_t i = 0; i < range_count; i++) {
        int32_t g = m->groups.group_of[i];
        const ls_metrics *x = &m->range_metrics[i];
        if (g < 0 || x->span.samples == 0)
            continue;
        ls_group_metrics *gm = &m->group_metrics[g];
        gm->samples += x->span.samples;
        const ls_metric_avg *window[2] = {&x->span, &x->busy};
        uint64_t span_covered = covered(&x->span);
        for (int w = 0; w < 2; w++) {
            uint64_t by = covered(window[w]);
            double weight_ns = (double)(by ? by : span_covered);
            for (int j = 0; j < LS_METRICS; j++) {
                double v = window[w]->value[j];
                if (!isfinite(v))
                    continue;
                /* A running mean: no sum of value x ns to overflow. */
                double *total = &weight[((size_t)g * 2 + (size_t)w) * LS_METRICS + (size_t)j];
                *total += weight_ns;
                if (*total > 0)
                    gm->value[w][j] += (v - gm->value[w][j]) * (weight_ns / *total);
            }
        }
    }
    for (size_t g = 0; g < ng; g++)
        for (int w = 0; w < 2; w++)
            for (int j = 0; j < LS_METRICS; j++)
                if (!(weight[(g * 2 + (size_t)w) * LS_METRICS + (size_t)j] > 0))
                    m->group_metrics[g].value[w][j] = NAN;
    free(weight);
    return 0;
}
