/* ls_analysis: see ls_analysis.h.  Every pass sorts small key arrays and
 * sweeps them once; cost is O(n log n) in the number of records. */
#include "ls_analysis.h"

#include <stdlib.h>
#include <string.h>

const uint64_t ls_hist_edges_ns[LS_HIST_BINS] = {
    0, 1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000, 500000, 1000000, 10000000,
};

#define LS_UNKNOWN UINT64_MAX
#define LS_NO_STREAM UINT32_MAX

/* A sortable key triple pointing at one record. */
typedef struct {
    uint64_t k1, k2, k3;
    uint32_t index;
} ls_key;

static int compare_keys(const void *pa, const void *pb)
{
    const ls_key *a = pa, *b = pb;
    if (a->k1 != b->k1)
        return a->k1 < b->k1 ? -1 : 1;
    if (a->k2 != b->k2)
        return a->k2 < b->k2 ? -1 : 1;
    if (a->k3 != b->k3)
        return a->k3 < b->k3 ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

static int compare_u64(const void *pa, const void *pb)
{
    uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
    return a < b ? -1 : a > b;
}

/* qsort, skipped when the keys are in order already: records read from a
 * trace file, or drained in time order, mostly are (one O(n) pass instead
 * of O(n log n) on millions of records). */
static void sort_keys(ls_key *keys, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        if (compare_keys(&keys[i - 1], &keys[i]) > 0) {
            qsort(keys, n, sizeof *keys, compare_keys);
            return;
        }
    }
}

/* The k-th smallest of a[0..n) (k < n), reordering a: quickselect with a
 * median-of-three pivot, O(n) on average; a full sort takes over if the
 * ranges stop shrinking (adversarial input). */
static uint64_t select_nth(uint64_t *a, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    for (int rounds = 0; lo < hi; rounds++) {
        if (rounds > 64) {
            qsort(a + lo, hi - lo + 1, sizeof *a, compare_u64);
            return a[k];
        }
        size_t mid = lo + (hi - lo) / 2;
        uint64_t x = a[lo], y = a[mid], z = a[hi];
        uint64_t pivot = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
        size_t i = lo, j = hi;
        while (i <= j) {
            while (a[i] < pivot)
                i++;
            while (a[j] > pivot)
                j--;
            if (i <= j) {
                uint64_t t = a[i];
                a[i] = a[j];
                a[j] = t;
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return a[k];
    }
    return a[k];
}

typedef struct {
    const ls_records *r;
    ls_thresholds t;
    uint64_t *launch_ns;      /* per op: start of its launch call, or LS_UNKNOWN */
    uint64_t *sync_start;     /* syncs by start time ... */
    uint64_t *sync_max_end;   /* ... and the running maximum of their ends */
    size_t sync_count;
    uint64_t *scratch;        /* room for one duration per gap */
    ls_sample_index samples;  /* PM samples, when there are any */
    ls_interval *intervals;   /* room for one busy interval per op */
} ls_ctx;

/* First index in sorted keys[0..n) whose k1 >= value. */
static size_t lower_bound_k1(const ls_key *keys, size_t n, uint64_t value)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (keys[mid].k1 < value)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* First index in sorted keys[0..n) whose k1 > value. */
static size_t upper_bound_k1(const ls_key *keys, size_t n, uint64_t value)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (keys[mid].k1 <= value)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int sync_overlaps(const ls_ctx *c, uint64_t a, uint64_t b)
{
    /* Syncs starting before the gap ends; the latest end among them decides. */
    size_t lo = 0, hi = c->sync_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->sync_start[mid] < b)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 && c->sync_max_end[lo - 1] > a;
}

static uint8_t cause_of(const ls_ctx *c, uint64_t gap_start, uint64_t gap_end, uint32_t next_op)
{
    if (sync_overlaps(c, gap_start, gap_end))
        return LS_CAUSE_SYNC;
    uint64_t launch = c->launch_ns[next_op];
    if (launch != LS_UNKNOWN && launch >= gap_start)
        return LS_CAUSE_HOST;
    return LS_CAUSE_OTHER;
}

static size_t hist_bin(uint64_t ns)
{
    size_t bin = LS_HIST_BINS - 1;
    while (bin > 0 && ns < ls_hist_edges_ns[bin])
        bin--;
    return bin;
}

/* Statistics of the gaps gaps[idx[i]] (or gaps[i] when idx is NULL). */
static void gap_stats(const ls_ctx *c, const ls_gap *gaps, const uint32_t *idx, size_t n,
                      ls_gap_stats *s)
{
    memset(s, 0, sizeof *s);
    for (size_t i = 0; i < n; i++) {
        const ls_gap *g = &gaps[idx ? idx[i] : i];
        uint64_t d = g->end_ns - g->start_ns;
        c->scratch[i] = d;
        s->total_ns += d;
        if (d > s->max_ns)
            s->max_ns = d;
        if (d < c->t.normal_below_ns)
            s->normal++;
        else if (d > c->t.severe_above_ns)
            s->severe++;
        else
            s->warning++;
        s->by_cause[g->cause]++;
        s->by_cause_ns[g->cause] += d;
        s->histogram[hist_bin(d)]++;
    }
    s->count = n;
    if (n == 0)
        return;
    /* Nearest rank: the smallest value with at least p% of the gaps at or below it. */
    s->p99_ns = select_nth(c->scratch, n, (n * 99 + 99) / 100 - 1);
    s->p50_ns = select_nth(c->scratch, n, (n * 50 + 99) / 100 - 1);
}

static void count_kind(ls_timeline *line, const ls_op *op)
{
    if (op->kind == LS_OP_KERNEL)
        line->kernels++;
    else if (op->kind == LS_OP_MEMCPY)
        line->memcpys++;
    else
        line->memsets++;
}

/* Sweeps keys sorted by (group, start, end): one timeline per group, its
 * busy time, and (when gaps != NULL) its gaps appended to gaps[*gap_count].
 * Returns the number of timelines written to lines. */
static size_t sweep(const ls_ctx *c, const ls_key *keys, size_t n, int by_stream,
                    ls_timeline *lines, ls_gap *gaps, size_t *gap_count)
{
    const ls_op *ops = c->r->ops.items;
    size_t line_count = 0;
    size_t i = 0;
    while (i < n) {
        uint64_t group = keys[i].k1;
        const ls_op *first = &ops[keys[i].index];
        ls_timeline *line = &lines[line_count++];
        memset(line, 0, sizeof *line);
        line->device_id = first->device_id;
        line->stream_id = by_stream ? first->stream_id : LS_NO_STREAM;
        line->first_ns = first->start_ns;
        uint64_t busy_start = first->start_ns, cur_end = first->end_ns;
        uint32_t prev = keys[i].index;
        size_t gap_begin = gaps ? *gap_count : 0;
        count_kind(line, first);
        for (i++; i < n && keys[i].k1 == group; i++) {
            const ls_op *op = &ops[keys[i].index];
            count_kind(line, op);
            if (op->start_ns > cur_end) {
                if (gaps) {
                    ls_gap *g = &gaps[(*gap_count)++];
                    g->start_ns = cur_end;
                    g->end_ns = op->start_ns;
                    g->prev_op = prev;
                    g->next_op = keys[i].index;
                    g->device_id = op->device_id;
                    g->step = -1;
                    g->cause = cause_of(c, cur_end, op->start_ns, keys[i].index);
                }
                line->busy_ns += cur_end - busy_start;
                busy_start = op->start_ns;
            }
            if (op->end_ns > cur_end) {
                cur_end = op->end_ns;
                prev = keys[i].index;
            }
        }
        line->busy_ns += cur_end - busy_start;
        line->last_ns = cur_end;
        if (gaps)
            gap_stats(c, gaps + gap_begin, NULL, *gap_count - gap_begin, &line->gaps);
    }
    return line_count;
}

/* launch_ns for every op: the start of the API record with its correlation
 * id (runtime preferred over driver when both exist). */
static int match_launches(ls_ctx *c, uint64_t *ops_without_launch, uint64_t *ignored)
{
    const ls_records *r = c->r;
    size_t n = r->apis.count;
    ls_key *by_corr = malloc((n ? n : 1) * sizeof *by_corr);
    if (by_corr == NULL)
        return -1;
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        const ls_api *a = &r->apis.items[i];
        if (r->stop_ns && a->start_ns > r->stop_ns) {
            (*ignored)++;
            continue;
        }
        by_corr[kept++] = (ls_key){a->correlation_id, a->domain, a->start_ns, (uint32_t)i};
    }
    sort_keys(by_corr, kept);
    for (size_t i = 0; i < r->ops.count; i++) {
        size_t at = lower_bound_k1(by_corr, kept, r->ops.items[i].correlation_id);
        if (at < kept && by_corr[at].k1 == r->ops.items[i].correlation_id) {
            c->launch_ns[i] = by_corr[at].k3;
        } else {
            c->launch_ns[i] = LS_UNKNOWN;
            (*ops_without_launch)++;
        }
    }
    free(by_corr);
    return 0;
}

/* Host waits, for gap causes: the SYNCHRONIZATION activity records and the
 * syncs found among the blocking calls (ls_waits), by start time. */
static int index_syncs(ls_ctx *c, const ls_waits *waits, uint64_t *ignored)
{
    const ls_records *r = c->r;
    size_t n = r->syncs.count + waits->count;
    ls_key *keys = malloc((n ? n : 1) * sizeof *keys);
    c->sync_start = malloc((n ? n : 1) * sizeof *c->sync_start);
    c->sync_max_end = malloc((n ? n : 1) * sizeof *c->sync_max_end);
    if (keys == NULL || c->sync_start == NULL || c->sync_max_end == NULL) {
        free(keys);
        return -1;
    }
    size_t kept = 0;
    for (size_t i = 0; i < r->syncs.count; i++) {
        const ls_sync *s = &r->syncs.items[i];
        if (r->stop_ns && s->start_ns > r->stop_ns) {
            (*ignored)++;
            continue;
        }
        keys[kept++] = (ls_key){s->start_ns, s->end_ns, 0, (uint32_t)i};
    }
    for (size_t i = 0; i < waits->count; i++)
        keys[kept++] = (ls_key){waits->items[i].start_ns, waits->items[i].end_ns, 0, (uint32_t)i};
    sort_keys(keys, kept);
    uint64_t max_end = 0;
    for (size_t i = 0; i < kept; i++) {
        c->sync_start[i] = keys[i].k1;
        if (keys[i].k2 > max_end)
            max_end = keys[i].k2;
        c->sync_max_end[i] = max_end;
    }
    c->sync_count = kept;
    free(keys);
    return 0;
}

/* Adds per-device timelines lines[0..count) into one (cross-device) line. */
static void merge_lines(ls_timeline *line, const ls_timeline *lines, size_t count)
{
    for (size_t d = 0; d < count; d++) {
        line->kernels += lines[d].kernels;
        line->memcpys += lines[d].memcpys;
        line->memsets += lines[d].memsets;
        line->busy_ns += lines[d].busy_ns;
        if (line->first_ns == 0 || lines[d].first_ns < line->first_ns)
            line->first_ns = lines[d].first_ns;
        if (lines[d].last_ns > line->last_ns)
            line->last_ns = lines[d].last_ns;
    }
}

/* The ops picked[0..n).index as one line (zeroed by the caller): busy time
 * and counts per device, summed.  keys and lines need room for n items. */
static void ops_line(const ls_ctx *c, const ls_key *picked, size_t n, ls_key *keys,
                     ls_timeline *lines, ls_timeline *line)
{
    const ls_op *ops = c->r->ops.items;
    line->device_id = UINT32_MAX; /* a range may span devices */
    line->stream_id = LS_NO_STREAM;
    for (size_t i = 0; i < n; i++) {
        const ls_op *op = &ops[picked[i].index];
        keys[i] = (ls_key){op->device_id, op->start_ns, op->end_ns, picked[i].index};
    }
    sort_keys(keys, n);
    merge_lines(line, lines, sweep(c, keys, n, 0, lines, NULL, NULL));
}

/* Sorts pairs[0..n) by (group, item) and drops repeats; returns the new n. */
static size_t unique_pairs(ls_key *pairs, size_t n)
{
    sort_keys(pairs, n);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (kept == 0 || pairs[i].k1 != pairs[kept - 1].k1 || pairs[i].k2 != pairs[kept - 1].k2)
            pairs[kept++] = pairs[i];
    return kept;
}

/* The indexes ranges are projected through: items sorted by launch time (k1). */
typedef struct {
    const ls_key *ops;  /* ops by launch time */
    size_t op_count;
    const ls_key *gaps; /* gaps by the launch time of the op that ends them */
    size_t gap_count;
} ls_launch_index;

/* Groups of ranges: (group, op) and (group, gap) pairs from every grouped
 * range, made unique, so an op inside two ranges of one group counts once. */
static int project_groups(ls_ctx *c, ls_analysis *out, const ls_launch_index *x,
                          const int32_t *group_of, size_t group_count, ls_key *op_keys,
                          uint32_t *gap_idx, ls_timeline *lines)
{
    const ls_records *r = c->r;
    size_t op_pairs = 0, gap_pairs = 0;
    for (size_t ri = 0; ri < r->ranges.count; ri++) {
        if (group_of[ri] < 0 || (size_t)group_of[ri] >= group_count)
            continue;
        const ls_range *range = &r->ranges.items[ri];
        op_pairs += upper_bound_k1(x->ops, x->op_count, range->end_ns) -
                    lower_bound_k1(x->ops, x->op_count, range->start_ns);
        gap_pairs += upper_bound_k1(x->gaps, x->gap_count, range->end_ns) -
                     lower_bound_k1(x->gaps, x->gap_count, range->start_ns);
    }
    out->group_count = group_count;
    out->groups = calloc(group_count ? group_count : 1, sizeof *out->groups);
    out->group_span_ns = calloc(group_count ? group_count : 1, sizeof *out->group_span_ns);
    ls_key *ops_of = malloc((op_pairs ? op_pairs : 1) * sizeof *ops_of);
    ls_key *gaps_of = malloc((gap_pairs ? gap_pairs : 1) * sizeof *gaps_of);
    int result = -1;
    if (!out->groups || !out->group_span_ns || !ops_of || !gaps_of)
        goto done;
    size_t no = 0, ngp = 0;
    for (size_t ri = 0; ri < r->ranges.count; ri++) {
        if (group_of[ri] < 0 || (size_t)group_of[ri] >= group_count)
            continue;
        const ls_range *range = &r->ranges.items[ri];
        uint64_t g = (uint64_t)group_of[ri];
        out->group_span_ns[g] += out->ranges[ri].last_ns - out->ranges[ri].first_ns;
        size_t hi = upper_bound_k1(x->ops, x->op_count, range->end_ns);
        for (size_t i = lower_bound_k1(x->ops, x->op_count, range->start_ns); i < hi; i++)
            ops_of[no++] = (ls_key){g, x->ops[i].index, 0, x->ops[i].index};
        hi = upper_bound_k1(x->gaps, x->gap_count, range->end_ns);
        for (size_t i = lower_bound_k1(x->gaps, x->gap_count, range->start_ns); i < hi; i++)
            gaps_of[ngp++] = (ls_key){g, x->gaps[i].index, 0, x->gaps[i].index};
    }
    no = unique_pairs(ops_of, no);
    ngp = unique_pairs(gaps_of, ngp);
    size_t i = 0, j = 0;
    for (size_t g = 0; g < group_count; g++) {
        ls_timeline *line = &out->groups[g];
        size_t begin = i;
        while (i < no && ops_of[i].k1 == g)
            i++;
        ops_line(c, ops_of + begin, i - begin, op_keys, lines, line);
        size_t n = 0;
        for (; j < ngp && gaps_of[j].k1 == g; j++)
            gap_idx[n++] = gaps_of[j].index;
        gap_stats(c, out->gaps, gap_idx, n, &line->gaps);
    }
    result = 0;
done:
    free(ops_of);
    free(gaps_of);
    return result;
}

/* Merges the busy intervals of the ops keys[0..k) (sorted by device, start,
 * end) that ran on `device` into c->intervals; returns their number. */
static size_t busy_intervals(const ls_ctx *c, const ls_key *keys, size_t k, uint32_t device)
{
    const ls_op *ops = c->r->ops.items;
    size_t m = 0;
    for (size_t i = 0; i < k; i++) {
        const ls_op *op = &ops[keys[i].index];
        if (op->device_id != device)
            continue;
        if (m > 0 && op->start_ns <= c->intervals[m - 1].end_ns) {
            if (op->end_ns > c->intervals[m - 1].end_ns)
                c->intervals[m - 1].end_ns = op->end_ns;
        } else {
            c->intervals[m++] = (ls_interval){op->start_ns, op->end_ns};
        }
    }
    return m;
}

/* Span and busy averages of the samples over one window: the ops keys[0..k)
 * or, when none ran on the sampled device, the host span [host_a, host_b]. */
static void average_window(const ls_ctx *c, const ls_key *keys, size_t k, uint64_t host_a,
                           uint64_t host_b, ls_metric_avg *span, ls_metric_avg *busy)
{
    size_t m = busy_intervals(c, keys, k, c->r->sample_device);
    ls_interval whole = {host_a, host_b};
    if (m > 0) {
        whole.start_ns = c->intervals[0].start_ns;
        whole.end_ns = c->intervals[m - 1].end_ns;
    }
    ls_samples_average(&c->samples, &whole, 1, span);
    ls_samples_average(&c->samples, c->intervals, m, busy);
}

/* Ops and gaps whose launch calls fall inside each range (and group). */
static int project_ranges(ls_ctx *c, ls_analysis *out, ls_key *op_keys, const int32_t *group_of,
                          size_t group_count)
{
    const ls_records *r = c->r;
    size_t nops = r->ops.count;
    out->range_count = r->ranges.count;
    out->ranges = calloc(r->ranges.count ? r->ranges.count : 1, sizeof *out->ranges);
    if (out->has_samples) {
        out->range_span = calloc(r->ranges.count ? r->ranges.count : 1, sizeof *out->range_span);
        out->range_busy = calloc(r->ranges.count ? r->ranges.count : 1, sizeof *out->range_busy);
        if (out->range_span == NULL || out->range_busy == NULL)
            return -1;
    }
    ls_key *by_launch = malloc((nops ? nops : 1) * sizeof *by_launch);
    ls_key *gaps_by_launch = malloc((out->gap_count ? out->gap_count : 1) * sizeof *gaps_by_launch);
    uint32_t *gap_idx = malloc((out->gap_count ? out->gap_count : 1) * sizeof *gap_idx);
    ls_timeline *lines = malloc((nops ? nops : 1) * sizeof *lines);
    int result = -1;
    if (!out->ranges || !by_launch || !gaps_by_launch || !gap_idx || !lines)
        goto done;
    size_t nl = 0;
    for (size_t i = 0; i < nops; i++)
        if (c->launch_ns[i] != LS_UNKNOWN)
            by_launch[nl++] = (ls_key){c->launch_ns[i], i, 0, (uint32_t)i};
    sort_keys(by_launch, nl);
    size_t ng = 0;
    for (size_t i = 0; i < out->gap_count; i++) {
        uint64_t launch = c->launch_ns[out->gaps[i].next_op];
        if (launch != LS_UNKNOWN)
            gaps_by_launch[ng++] = (ls_key){launch, i, 0, (uint32_t)i};
    }
    sort_keys(gaps_by_launch, ng);

    for (size_t ri = 0; ri < r->ranges.count; ri++) {
        const ls_range *range = &r->ranges.items[ri];
        size_t lo = lower_bound_k1(by_launch, nl, range->start_ns);
        size_t hi = upper_bound_k1(by_launch, nl, range->end_ns);
        ops_line(c, by_launch + lo, hi - lo, op_keys, lines, &out->ranges[ri]);
        size_t glo = lower_bound_k1(gaps_by_launch, ng, range->start_ns);
        size_t ghi = upper_bound_k1(gaps_by_launch, ng, range->end_ns);
        for (size_t i = glo; i < ghi; i++) {
            gap_idx[i - glo] = gaps_by_launch[i].index;
            if (range->step_index >= 0)
                out->gaps[gaps_by_launch[i].index].step = range->step_index;
        }
        gap_stats(c, out->gaps, gap_idx, ghi - glo, &out->ranges[ri].gaps);
        if (out->has_samples) /* ops_line left this range's ops sorted in op_keys */
            average_window(c, op_keys, hi - lo, range->start_ns, range->end_ns,
                           &out->range_span[ri], &out->range_busy[ri]);
    }
    if (group_of != NULL) {
        ls_launch_index x = {by_launch, nl, gaps_by_launch, ng};
        if (project_groups(c, out, &x, group_of, group_count, op_keys, gap_idx, lines) != 0)
            goto done;
    }
    result = 0;
done:
    free(by_launch);
    free(gaps_by_launch);
    free(gap_idx);
    free(lines);
    return result;
}

static void sum_devices(ls_analysis *out, const ls_ctx *c)
{
    ls_timeline *t = &out->total;
    memset(t, 0, sizeof *t);
    t->device_id = UINT32_MAX;
    t->stream_id = LS_NO_STREAM;
    for (size_t d = 0; d < out->device_count; d++) {
        const ls_timeline *dev = &out->devices[d];
        t->kernels += dev->kernels;
        t->memcpys += dev->memcpys;
        t->memsets += dev->memsets;
        t->busy_ns += dev->busy_ns;
        if (t->first_ns == 0 || dev->first_ns < t->first_ns)
            t->first_ns = dev->first_ns;
        if (dev->last_ns > t->last_ns)
            t->last_ns = dev->last_ns;
    }
    gap_stats(c, out->gaps, NULL, out->gap_count, &t->gaps);
}

int ls_analyze(const ls_records *r, ls_thresholds t, const int32_t *group_of,
               size_t group_count, ls_analysis *out)
{
    memset(out, 0, sizeof *out);
    ls_ctx c;
    memset(&c, 0, sizeof c);
    c.r = r;
    c.t = t;
    size_t n = r->ops.count;
    size_t room = n ? n : 1;
    ls_key *keys = malloc(room * sizeof *keys);
    c.launch_ns = malloc(room * sizeof *c.launch_ns);
    c.scratch = malloc(room * sizeof *c.scratch);
    out->gaps = malloc(room * sizeof *out->gaps);
    out->devices = malloc(room * sizeof *out->devices);
    out->streams = malloc(room * sizeof *out->streams);
    ls_gap *stream_gaps = malloc(room * sizeof *stream_gaps);
    c.intervals = malloc(room * sizeof *c.intervals);
    int result = -1;
    if (!keys || !c.launch_ns || !c.scratch || !out->gaps || !out->devices || !out->streams ||
        !stream_gaps || !c.intervals)
        goto done;
    out->has_samples = r->samples.count > 0;
    if (out->has_samples &&
        ls_sample_index_build(&c.samples, r->samples.items, r->samples.count) != 0)
        goto done;
    if (ls_waits_build(r, &out->waits) != 0 ||
        match_launches(&c, &out->ops_without_launch, &out->ignored_records) != 0 ||
        index_syncs(&c, &out->waits, &out->ignored_records) != 0)
        goto done;

    /* Devices: all streams of a device merged. */
    for (size_t i = 0; i < n; i++) {
        const ls_op *op = &r->ops.items[i];
        keys[i] = (ls_key){op->device_id, op->start_ns, op->end_ns, (uint32_t)i};
    }
    sort_keys(keys, n);
    out->device_count = sweep(&c, keys, n, 0, out->devices, out->gaps, &out->gap_count);
    if (out->has_samples)
        average_window(&c, keys, n, r->start_ns, r->stop_ns, &out->metrics_span,
                       &out->metrics_busy);

    /* Streams: each stream on its own (its gaps are kept only as statistics). */
    for (size_t i = 0; i < n; i++) {
        const ls_op *op = &r->ops.items[i];
        keys[i] = (ls_key){((uint64_t)op->device_id << 32) | op->stream_id, op->start_ns,
                           op->end_ns, (uint32_t)i};
    }
    sort_keys(keys, n);
    size_t stream_gap_count = 0;
    out->stream_count = sweep(&c, keys, n, 1, out->streams, stream_gaps, &stream_gap_count);

    if (project_ranges(&c, out, keys, group_of, group_count) != 0)
        goto done;
    sum_devices(out, &c);
    result = 0;
done:
    free(keys);
    free(c.launch_ns);
    free(c.scratch);
    free(c.sync_start);
    free(c.sync_max_end);
    free(stream_gaps);
    free(c.intervals);
    ls_sample_index_free(&c.samples);
    if (result != 0)
        ls_analysis_free(out);
    return result;
}

void ls_analysis_free(ls_analysis *a)
{
    free(a->devices);
    free(a->streams);
    free(a->ranges);
    free(a->groups);
    free(a->group_span_ns);
    free(a->gaps);
    free(a->range_span);
    free(a->range_busy);
    ls_waits_free(&a->waits);
    memset(a, 0, sizeof *a);
}
