/* ls_model_queries: see ls_model_queries.h (split out of ls_model.c, issue 29). */
#include "ls_model_queries.h"
#include "ls_search.h"

#include <string.h>

/* Start of bin k of `bins` equal slices of [start, end). */
static uint64_t bin_edge(uint64_t start, uint64_t end, size_t bins, size_t k)
{
    return start + (uint64_t)((unsigned __int128)(end - start) * k / bins);
}

/* Adds the part of [a, b) inside each bin of [start, end) to out. */
static void add_to_bins(uint64_t a, uint64_t b, uint64_t start, uint64_t end, size_t bins,
                        uint64_t *out)
{
    if (a < start)
        a = start;
    if (b > end)
        b = end;
    if (b <= a)
        return;
    size_t k = (size_t)((unsigned __int128)(a - start) * bins / (end - start));
    for (; a < b && k < bins; k++) {
        uint64_t edge = bin_edge(start, end, bins, k + 1);
        uint64_t upto = b < edge ? b : edge;
        if (upto > a) {
            out[k] += upto - a;
            a = upto;
        }
    }
}

/* Interval i of device `device`'s time-ordered, non-overlapping
 * intervals (its gaps or its busy stretches). */
typedef ls_busy_span (*ls_span_at)(const ls_model *m, size_t device, size_t i);

/* Of intervals lo..hi: *first is the first whose end is >= start, *last is
 * past the last whose start is <= end.  Two binary searches. */
typedef struct {
    const ls_model *m;
    size_t device;
    ls_span_at at;
    uint64_t t;
} ls_span_key;

static int ends_before(size_t i, const void *key)
{
    const ls_span_key *k = key;
    return k->at(k->m, k->device, i).end_ns < k->t;
}

static int starts_by(size_t i, const void *key)
{
    const ls_span_key *k = key;
    return k->at(k->m, k->device, i).start_ns <= k->t;
}

static void meeting(const ls_model *m, size_t device, ls_span_at at, size_t lo, size_t hi,
                    uint64_t start, uint64_t end, size_t *first, size_t *last)
{
    *first = ls_partition_point(lo, hi, ends_before, &(ls_span_key){m, device, at, start});
    *last = ls_partition_point(*first, hi, starts_by, &(ls_span_key){m, device, at, end});
}

static ls_busy_span gap_span(const ls_model *m, size_t device, size_t i)
{
    (void)device; /* i indexes all gaps */
    return (ls_busy_span){m->gaps[i].start_ns, m->gaps[i].end_ns};
}

/* Index of device d's first gap: a device's gaps follow those of the
 * devices before it. */
static size_t first_gap_of(const ls_model *m, size_t device)
{
    size_t first = 0;
    for (size_t d = 0; d < device; d++)
        first += m->devices[d].gaps.count;
    return first;
}

size_t ls_model_busy_count(const ls_model *m, size_t device)
{
    const ls_timeline *t = &m->devices[device];
    int has_ops = t->line.kernels + t->line.memcpys + t->line.memsets + t->line.graphs > 0;
    return has_ops ? t->gaps.count + 1 : 0;
}

ls_busy_span ls_model_busy_span(const ls_model *m, size_t device, size_t k)
{
    const ls_timeline *t = &m->devices[device];
    const ls_gap *gaps = m->gaps + first_gap_of(m, device);
    return (ls_busy_span){k == 0 ? t->line.first_ns : gaps[k - 1].end_ns,
                          k == t->gaps.count ? t->line.last_ns : gaps[k].start_ns};
}

void ls_model_busy_within(const ls_model *m, size_t device, uint64_t start_ns,
                          uint64_t end_ns, size_t *first, size_t *last)
{
    meeting(m, device, ls_model_busy_span, 0, ls_model_busy_count(m, device), start_ns, end_ns,
            first, last);
}

void ls_model_gaps_within(const ls_model *m, size_t device, uint64_t start_ns, uint64_t end_ns,
                          size_t *first, size_t *last)
{
    size_t lo = first_gap_of(m, device);
    meeting(m, device, gap_span, lo, lo + m->devices[device].gaps.count, start_ns, end_ns, first,
            last);
}

void ls_model_busy_bins(const ls_model *m, long device, uint64_t start_ns, uint64_t end_ns,
                        size_t bins, uint64_t *out)
{
    memset(out, 0, bins * sizeof *out);
    if (bins == 0 || end_ns <= start_ns)
        return;
    for (size_t d = 0; d < m->device_count; d++) {
        if (device >= 0 && (size_t)device != d)
            continue;
        size_t first, last;
        ls_model_busy_within(m, d, start_ns, end_ns, &first, &last);
        for (size_t k = first; k < last; k++) {
            ls_busy_span b = ls_model_busy_span(m, d, k);
            add_to_bins(b.start_ns, b.end_ns, start_ns, end_ns, bins, out);
        }
    }
}

void ls_model_gap_bins(const ls_model *m, int min_class, uint64_t start_ns, uint64_t end_ns,
                       size_t bins, uint64_t *out)
{
    memset(out, 0, bins * sizeof *out);
    if (bins == 0 || end_ns <= start_ns)
        return;
    for (size_t d = 0; d < m->device_count; d++) {
        size_t first, last;
        ls_model_gaps_within(m, d, start_ns, end_ns, &first, &last);
        for (size_t g = first; g < last; g++)
            if (m->gaps[g].gap_class >= min_class)
                add_to_bins(m->gaps[g].start_ns, m->gaps[g].end_ns, start_ns, end_ns, bins,
                            out);
    }
}

static int longer(const ls_gap *a, const ls_gap *b)
{
    uint64_t da = a->end_ns - a->start_ns, db = b->end_ns - b->start_ns;
    return da != db ? da > db : a->start_ns < b->start_ns;
}

size_t ls_model_worst_gaps(const ls_model *m, size_t n, uint32_t *out)
{
    size_t kept = 0; /* out[0..kept) longest first: O(gaps * n) for a small n */
    for (size_t g = 0; g < m->gap_count && n > 0; g++) {
        if (kept == n && !longer(&m->gaps[g], &m->gaps[out[n - 1]]))
            continue;
        size_t i = kept < n ? kept++ : n - 1;
        while (i > 0 && longer(&m->gaps[g], &m->gaps[out[i - 1]])) {
            out[i] = out[i - 1];
            i--;
        }
        out[i] = (uint32_t)g;
    }
    return kept;
}
