/* ls_samples: see ls_samples.h. */
#include "ls_samples.h"
#include "ls_search.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const metric_names[LS_METRICS] = {
#define LS_METRIC_NAME(id, name, cupti, rate) name,
    LS_METRIC_TABLE(LS_METRIC_NAME)
#undef LS_METRIC_NAME
};

const char *ls_metric_name(int metric)
{
    return metric >= 0 && metric < LS_METRICS ? metric_names[metric] : NULL;
}

int ls_metric_id(const char *name)
{
    for (int i = 0; i < LS_METRICS; i++)
        if (strcmp(name, metric_names[i]) == 0)
            return i;
    return -1;
}

static int compare_samples(const void *pa, const void *pb)
{
    const ls_sample *a = pa, *b = pb;
    if (a->start_ns != b->start_ns)
        return a->start_ns < b->start_ns ? -1 : 1;
    return a->end_ns < b->end_ns ? -1 : a->end_ns > b->end_ns;
}

void ls_samples_sort(ls_sample *samples, size_t n)
{
    /* The sampler hands them over in time order: a pass finds that, where
     * qsort moved all 8,650 samples of GPT-2 generate(64) again. */
    size_t i = 1;
    while (i < n && compare_samples(&samples[i - 1], &samples[i]) <= 0)
        i++;
    if (i < n)
        qsort(samples, n, sizeof *samples, compare_samples);
}

size_t ls_samples_settle(ls_sample *samples, size_t n, uint64_t max_span_ns,
                         uint64_t window_start_ns, uint64_t started_ns, uint64_t stopped_ns,
                         uint64_t tolerance_ns, ls_settle_result *out)
{
    memset(out, 0, sizeof *out);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        /* A start of 0 is no time on any clock (seen on an H100 in a window
         * that continued a running sampler): kept, it would count as
         * "another clock" and shift every sample out of the window. */
        if (samples[i].start_ns == 0 || samples[i].end_ns - samples[i].start_ns > max_span_ns) {
            out->partial++;
            continue;
        }
        /* Over by the profile's start: a sample of the wait before it (see
         * ls_samples.h), no sign of another clock. */
        if (samples[i].end_ns <= window_start_ns) {
            out->ended_before++;
            continue;
        }
        samples[kept++] = samples[i];
    }
    if (kept == 0)
        return 0;
    out->delta_ns = (int64_t)(samples[0].start_ns - started_ns);
    uint64_t latest = 0;
    for (size_t i = 0; i < kept; i++)
        latest = samples[i].end_ns > latest ? samples[i].end_ns : latest;
    out->latest_ns = latest;
    int before = samples[0].start_ns + tolerance_ns < started_ns;
    int after = latest > stopped_ns + tolerance_ns;
    out->outside = before || after;
    return kept;
}

int ls_sample_overlaps(uint64_t start_ns, uint64_t end_ns, uint64_t window_start_ns,
                       uint64_t window_stop_ns)
{
    return end_ns > window_start_ns && (window_stop_ns == 0 || start_ns < window_stop_ns);
}

int64_t ls_sample_clock_offset(uint64_t first_start_ns, uint64_t started_ns,
                               uint64_t tolerance_ns)
{
    uint64_t apart = first_start_ns > started_ns ? first_start_ns - started_ns
                                                 : started_ns - first_start_ns;
    return apart <= tolerance_ns ? 0 : (int64_t)(first_start_ns - started_ns);
}

int ls_sample_index_build(ls_sample_index *index, const ls_sample *sorted, size_t n)
{
    index->items = sorted;
    index->count = n;
    index->max_end = malloc((n ? n : 1) * sizeof *index->max_end);
    if (index->max_end == NULL) {
        index->count = 0;
        return -1;
    }
    uint64_t max_end = 0;
    for (size_t i = 0; i < n; i++) {
        if (sorted[i].end_ns > max_end)
            max_end = sorted[i].end_ns;
        index->max_end[i] = max_end;
    }
    return 0;
}

void ls_sample_index_free(ls_sample_index *index)
{
    free(index->max_end);
    memset(index, 0, sizeof *index);
}

/* First sample in [lo, hi) whose running maximum end lies after `t`
 * (hi when none): a bisection. */
static size_t bisect_reaching_past(const ls_sample_index *index, uint64_t t, size_t lo,
                                   size_t hi)
{
    return lo + ls_upper_bound_u64(index->max_end + lo, hi - lo, t);
}

/* First sample whose running maximum end lies after `t`. */
static size_t first_reaching_past(const ls_sample_index *index, uint64_t t)
{
    return bisect_reaching_past(index, t, 0, index->count);
}

/* first_reaching_past(index, t) when the answer is known to be `lo` or
 * later (lo: the answer for an earlier t' <= t): gallops forward from lo,
 * then bisects, so a walk over windows in time order costs a few steps a
 * window instead of a bisection of every sample. */
static size_t first_reaching_past_from(const ls_sample_index *index, uint64_t t, size_t lo)
{
    size_t hi = lo, step = 1;
    while (hi < index->count && index->max_end[hi] <= t) {
        lo = hi + 1;
        hi = lo + step;
        step *= 2;
    }
    if (hi > index->count)
        hi = index->count;
    return bisect_reaching_past(index, t, lo, hi);
}

void ls_samples_average(const ls_sample_index *index, const ls_interval *intervals, size_t m,
                        ls_metric_avg *out)
{
    double mean[LS_METRICS] = {0};
    memset(out, 0, sizeof *out);
    /* A sample that overlaps several intervals counts once in `samples`
     * (exact for samples that do not overlap each other, as PM samples do not). */
    size_t next_uncounted = 0;
    size_t first = 0;     /* first_reaching_past(index, last_a) */
    uint64_t last_a = 0;  /* the latest window start searched from */
    for (size_t k = 0; k < m; k++) {
        uint64_t a = intervals[k].start_ns, b = intervals[k].end_ns;
        if (b <= a)
            continue;
        out->window_ns += b - a;
        /* windows in time order (busy intervals): search on from the last one */
        first = a >= last_a ? first_reaching_past_from(index, a, first) : first_reaching_past(index, a);
        last_a = a;
        for (size_t i = first;
             i < index->count && index->items[i].start_ns < b; i++) {
            const ls_sample *s = &index->items[i];
            uint64_t lo = s->start_ns > a ? s->start_ns : a;
            uint64_t hi = s->end_ns < b ? s->end_ns : b;
            if (hi <= lo)
                continue;
            if (i >= next_uncounted) {
                out->samples++;
                next_uncounted = i + 1;
            }
            uint64_t overlap = hi - lo;
            for (int j = 0; j < LS_METRICS; j++) {
                if (!isfinite(s->values[j]))
                    continue;
                out->covered_ns[j] += overlap;
                double share = (double)overlap / (double)out->covered_ns[j];
                mean[j] += (s->values[j] - mean[j]) * share;
            }
        }
    }
    for (int j = 0; j < LS_METRICS; j++)
        out->value[j] = out->covered_ns[j] ? mean[j] : NAN;
}
