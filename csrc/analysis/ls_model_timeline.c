/* ls_model_timeline: see ls_model_timeline.h (split out of ls_model.c, issue 29). */
#include "ls_model_timeline.h"
#include "ls_search.h"

#include <string.h>

/* -- gaps --------------------------------------------------------------- */

static int sync_overlaps(const ls_ctx *c, uint64_t a, uint64_t b)
{
    /* Syncs starting before the gap ends; the latest end among them decides. */
    size_t lo = ls_lower_bound_u64(c->sync_start, c->sync_count, b);
    return lo > 0 && c->sync_max_end[lo - 1] > a;
}

/* A gap's cause.  The next op was queued before the GPU went idle: the host
 * did not hold it back, in a sync or not (a long cudaDeviceSynchronize over
 * a queue of kernels overlaps their ~1 us gaps without causing them):
 * `other`.  Else `sync` when a host sync overlapped the gap, `host` when the
 * launch came after the gap began, `other` with no launch record. */
static uint8_t cause_of(const ls_ctx *c, uint64_t gap_start, uint64_t gap_end, uint32_t next_op)
{
    uint64_t launch = c->m->op_launch_ns[next_op];
    if (launch != LS_MODEL_NO_TIME && launch < gap_start)
        return LS_CAUSE_OTHER;
    if (sync_overlaps(c, gap_start, gap_end))
        return LS_CAUSE_SYNC;
    return launch != LS_MODEL_NO_TIME ? LS_CAUSE_HOST : LS_CAUSE_OTHER;
}

static uint8_t class_of(ls_thresholds t, uint64_t ns)
{
    if (ns < t.normal_below_ns)
        return LS_CLASS_NORMAL;
    return ns > t.severe_above_ns ? LS_CLASS_SEVERE : LS_CLASS_WARNING;
}

static size_t hist_bin(uint64_t ns)
{
    size_t bin = LS_HIST_BINS - 1;
    while (bin > 0 && ns < ls_model_hist_edges_ns[bin])
        bin--;
    return bin;
}

/* The value of rank k (0-based) in v[0..n), which it partially orders:
 * afterwards v[0..k) <= v[k] <= v[k+1..n).  Quickselect, O(n) expected. */
static uint64_t select_rank(uint64_t *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    uint64_t seed = 0x9E3779B97F4A7C15ULL ^ n;
    while (lo < hi) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL; /* pivot: pseudo-random */
        uint64_t pivot = v[lo + (size_t)((seed >> 33) % (hi - lo + 1))];
        size_t i = lo, j = hi;
        while (i <= j) { /* Hoare partition: v[lo..j] <= pivot <= v[i..hi] */
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                uint64_t t = v[i];
                v[i] = v[j];
                v[j] = t;
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
            return v[k]; /* between the parts: equal to the pivot */
    }
    return v[k];
}

uint64_t ls_model_gap_waited(const ls_model *m, const ls_gap *g)
{
    uint64_t d = g->end_ns - g->start_ns;
    if (g->cause != LS_CAUSE_SYNC || m->gap_waited_ns == NULL)
        return d;
    uintptr_t at = (uintptr_t)g, first = (uintptr_t)m->gaps;
    if (at < first || at >= first + m->gap_count * sizeof *g) /* a stream's own gap */
        return d;
    return m->gap_waited_ns[(at - first) / sizeof *g];
}

/* Adds gap g to statistics s (zeroed when they start), its duration to
 * c->scratch[s->count]; gap_stats_finish then takes the percentiles. */
static void gap_stats_add(const ls_ctx *c, ls_gap_stats *s, const ls_gap *g)
{
    uint64_t d = g->end_ns - g->start_ns;
    c->scratch[s->count++] = d;
    s->total_ns += d;
    if (d > s->max_ns)
        s->max_ns = d;
    s->by_class[g->gap_class]++;
    s->by_cause[g->cause]++;
    if (g->cause == LS_CAUSE_SYNC) {
        uint64_t waited = ls_model_gap_waited(c->m, g);
        s->sync_overlap_ns += d;
        s->by_cause_ns[LS_CAUSE_SYNC] += waited;
        s->by_cause_ns[LS_CAUSE_HOST] += d - waited;
    } else {
        s->by_cause_ns[g->cause] += d;
    }
    s->histogram[hist_bin(d)]++;
}

static void gap_stats_finish(const ls_ctx *c, ls_gap_stats *s)
{
    size_t n = s->count;
    if (n == 0)
        return;
    /* Nearest rank: the smallest value with at least p% of the gaps at or below it. */
    size_t r99 = (n * 99 + 99) / 100 - 1, r50 = (n * 50 + 99) / 100 - 1;
    s->p99_ns = select_rank(c->scratch, n, r99);
    s->p50_ns = select_rank(c->scratch, r99 + 1, r50); /* what is left below rank 99 */
}

/* Statistics of the gaps gaps[idx[i]] (or gaps[i] when idx is NULL). */
void ls_model_gap_stats(const ls_ctx *c, const ls_gap *gaps, const uint32_t *idx, size_t n,
                        ls_gap_stats *s)
{
    memset(s, 0, sizeof *s);
    for (size_t i = 0; i < n; i++)
        gap_stats_add(c, s, &gaps[idx ? idx[i] : i]);
    gap_stats_finish(c, s);
}

/* -- sweeps ------------------------------------------------------------- */

static void count_kind(ls_line *line, const ls_op *op)
{
    if (op->kind == LS_OP_KERNEL) {
        line->kernels++;
    } else if (op->kind == LS_OP_MEMCPY) {
        line->memcpys++;
    } else if (op->kind == LS_OP_GRAPH) {
        line->graphs++;
        line->graph_ns += op->end_ns - op->start_ns;
    } else {
        line->memsets++;
    }
}

/* Sweeps ops idx[0..n) of one device and one line (sorted by start, then
 * end) into `line` (zeroed by the caller when it starts). */
/* How many ops ahead sweep_run asks for the per-op data it will read:
 * with records out of time order the index visits the op arrays at random
 * and every read would wait for memory; asked for this far ahead, ~16 reads
 * are in flight at once. */
#define SWEEP_AHEAD 16

static inline void prefetch(const void *at)
{
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(at);
#else
    (void)at;
#endif
}

/* Whether the idle between ops a (the one that reached the busy end) and b
 * lies inside one CUDA-graph replay traced node by node: both came from one
 * launch call (one correlation id, known; only a graph launch queues
 * several ops under one call).  That idle is no gap (no launch the user can
 * move) and not busy either: it is mostly the tracer's own timestamps
 * between nodes, which a replay traced whole (LS_OP_GRAPH) does not pay, so
 * the union of the nodes is what matches the whole replay's span (H200,
 * 2026-11-29: within 2% a step, the span ~5% over) (issue 39). */
static int one_replay(const ls_op *a, const ls_op *b)
{
    return a->correlation_id != 0 && a->correlation_id == b->correlation_id &&
           a->kind != LS_OP_GRAPH && b->kind != LS_OP_GRAPH;
}

static void sweep_run(ls_ctx *c, const uint32_t *idx, size_t n, ls_line *line,
                      const ls_sweep_out *out)
{
    const ls_op *ops = c->r->ops.items;
    const uint8_t *comm = c->m->op_comm;
    uint64_t busy_start = 0, cur_end = 0;
    uint64_t class_start[2] = {0, 0}, class_end[2] = {0, 0};
    int class_open[2] = {0, 0};
    uint32_t prev = 0;
    int keep = out && out->sampled && n > 0 && ops[idx[0]].device_id == c->r->sample_device;
    const double *fill = c->m->op_fill;
    const int32_t *step_of = c->m->op_step;
    const uint64_t *launch_ns = c->m->op_launch_ns;
    for (size_t i = 0; i < n; i++) {
        if (i + SWEEP_AHEAD < n) { /* the per-op data read below, of an op ahead */
            uint32_t ahead = idx[i + SWEEP_AHEAD];
            prefetch(&ops[ahead]);
            prefetch(&comm[ahead]);
            prefetch(&fill[ahead]);
            prefetch(&step_of[ahead]);
            prefetch(&launch_ns[ahead]);
        }
        const ls_op *op = &ops[idx[i]];
        count_kind(line, op);
        /* collectives wait for other ranks in a small grid: not a fill to judge */
        int judged = op->kind == LS_OP_KERNEL && !comm[idx[i]];
        /* a replay's kernels count as kernel time whose fill is unknown */
        if (judged || op->kind == LS_OP_GRAPH)
            line->kernel_ns += op->end_ns - op->start_ns;
        if (judged && fill[idx[i]] >= 0) {
            uint64_t d = op->end_ns - op->start_ns;
            line->shaped_ns += d;
            line->filled_ns += (uint64_t)((double)d * fill[idx[i]] + 0.5);
        }
        if (i == 0) {
            busy_start = op->start_ns;
            cur_end = op->end_ns;
            prev = idx[0];
            if (line->first_ns == 0 || op->start_ns < line->first_ns)
                line->first_ns = op->start_ns;
        } else if (op->start_ns > cur_end && one_replay(&ops[prev], op)) {
            /* inside one replay: the busy interval ends, no gap, not merged */
            if (keep)
                c->intervals[c->interval_count++] = (ls_interval){busy_start, cur_end};
            line->busy_ns += cur_end - busy_start;
            line->replay_idle_ns += op->start_ns - cur_end;
            busy_start = op->start_ns;
        } else if (op->start_ns > cur_end + c->r->merge_idle_upto_ns) {
            if (out && (out->gaps || out->stats)) {
                ls_gap g = {cur_end, op->start_ns, prev, idx[i], op->device_id,
                            op->stream_id, c->m->op_step[idx[i]],
                            cause_of(c, cur_end, op->start_ns, idx[i]),
                            class_of(c->m->thresholds, op->start_ns - cur_end), {0, 0}};
                if (out->gaps)
                    out->gaps[(*out->gap_count)++] = g;
                if (out->stats)
                    gap_stats_add(c, out->stats, &g);
            }
            if (keep)
                c->intervals[c->interval_count++] = (ls_interval){busy_start, cur_end};
            line->busy_ns += cur_end - busy_start;
            busy_start = op->start_ns;
        } else if (op->start_ns > cur_end && out && out->stats) {
            out->stats->merged++; /* below the resolution: the busy interval goes on */
        }
        if (op->end_ns > cur_end) {
            cur_end = op->end_ns;
            prev = idx[i];
        }
        int k = op->kind == LS_OP_KERNEL && comm[idx[i]];
        if (class_open[k] && op->start_ns <= class_end[k]) {
            if (op->end_ns > class_end[k])
                class_end[k] = op->end_ns;
        } else {
            uint64_t *sum = k ? &line->comm_ns : &line->compute_ns;
            if (class_open[k])
                *sum += class_end[k] - class_start[k];
            class_open[k] = 1;
            class_start[k] = op->start_ns;
            class_end[k] = op->end_ns;
        }
    }
    if (n == 0)
        return;
    if (keep)
        c->intervals[c->interval_count++] = (ls_interval){busy_start, cur_end};
    line->busy_ns += cur_end - busy_start;
    if (cur_end > line->last_ns)
        line->last_ns = cur_end;
    if (class_open[0])
        line->compute_ns += class_end[0] - class_start[0];
    if (class_open[1])
        line->comm_ns += class_end[1] - class_start[1];
}

/* Whether ops a and b share a device (and, by_stream, a stream). */
static int same_line(const ls_op *a, const ls_op *b, int by_stream)
{
    return a->device_id == b->device_id && (!by_stream || a->stream_id == b->stream_id);
}

typedef struct {
    const ls_op *ops;
    const uint32_t *idx;
    const ls_op *first;
    int by_stream;
} ls_run_key;

/* Ops idx[i] on the line of `first`. */
static int in_run(size_t i, const void *key)
{
    const ls_run_key *k = key;
    return same_line(&k->ops[k->idx[i]], k->first, k->by_stream);
}

/* The end of the run of ops on idx[i]'s device (and stream) in idx[i..n),
 * sorted by that key first: galloping then a binary search, so a run of
 * any length costs a few reads of the ops (a scan read each op of the run,
 * at random when the records came out of time order), a run of one two. */
static size_t run_end(const ls_op *ops, const uint32_t *idx, size_t i, size_t n, int by_stream)
{
    const ls_op *first = &ops[idx[i]];
    size_t lo = i + 1, step = 1; /* idx[i..lo) are in the run */
    while (lo < n && same_line(&ops[idx[lo]], first, by_stream)) {
        lo++;
        size_t probe = lo + step;
        if (probe >= n || !same_line(&ops[idx[probe]], first, by_stream)) {
            size_t hi = probe < n ? probe : n; /* the run ends in [lo, hi] */
            ls_run_key key = {ops, idx, first, by_stream};
            return ls_partition_point(lo, hi, in_run, &key);
        }
        lo = probe + 1;
        step *= 2;
    }
    return lo;
}

/* Sweeps ops idx[0..n), sorted by (device, start, end), into one line
 * over their devices (busy time summed per device). */
void ls_model_sweep_devices(ls_ctx *c, const uint32_t *idx, size_t n, ls_line *line,
                            const ls_sweep_out *out)
{
    const ls_op *ops = c->r->ops.items;
    memset(line, 0, sizeof *line);
    line->device_id = n > 0 ? ops[idx[0]].device_id : LS_MODEL_NO_ID;
    line->stream_id = LS_MODEL_NO_ID;
    c->interval_count = 0;
    size_t i = 0;
    while (i < n) {
        size_t j = run_end(ops, idx, i, n, 0);
        if (ops[idx[i]].device_id != line->device_id)
            line->device_id = LS_MODEL_NO_ID;
        sweep_run(c, idx + i, j - i, line, out);
        i = j;
    }
}

/* One timeline per run of equal key among sorted ops (devices or streams);
 * returns their number.  Device sweeps keep the gaps and busy intervals;
 * with gaps NULL (streams) only their statistics are kept, so no gap
 * array of the ops' size is written (400 MB at 10M ops). */
size_t ls_model_sweep_lines(ls_ctx *c, const uint32_t *order, int by_stream, ls_timeline *lines,
                            ls_gap *gaps, size_t *gap_count, int sampled)
{
    const ls_op *ops = c->r->ops.items;
    size_t n = c->r->ops.count, count = 0, i = 0;
    while (i < n) {
        const ls_op *first = &ops[order[i]];
        size_t j = run_end(ops, order, i, n, by_stream);
        ls_timeline *t = &lines[count];
        memset(t, 0, sizeof *t);
        t->line.device_id = first->device_id;
        t->line.stream_id = by_stream ? first->stream_id : LS_MODEL_NO_ID;
        /* the statistics taken as the gaps are found: no pass over them again */
        ls_sweep_out out = {gaps, gap_count, &t->gaps, sampled};
        sweep_run(c, order + i, j - i, &t->line, &out);
        gap_stats_finish(c, &t->gaps);
        count++;
        i = j;
    }
    return count;
}
