/* ls_model: see ls_model.h.
 *
 * Two sorts of the ops (by device then time, by stream then time) and one
 * of the launch records; every projection (steps, ranges, groups) then
 * buckets ops and gaps by owner with a counting sort that keeps the device
 * order, so each owner's ops are swept in order without sorting again. */
#include "ls_model.h"

#include "ls_bulk.h"
#include "ls_cbids.h"
#include "ls_collectives.h"
#include "ls_names.h"
#include "ls_radix.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* An op with no launch record has no point to attribute. */
_Static_assert(LS_MODEL_NO_TIME == LS_NO_POINT, "op_launch_ns serves as a point column");

/* Room for n items, at least one (malloc(0) may return NULL). */
static size_t room_for(size_t n) { return n ? n : 1; }

const uint64_t ls_model_hist_edges_ns[LS_HIST_BINS] = {
    0, 1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000, 500000, 1000000, 10000000,
};

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
    return (a->index > b->index) - (a->index < b->index);
}

static void key_fields(const void *item, uint64_t out[3])
{
    const ls_key *key = item;
    out[0] = key->k1;
    out[1] = key->k2;
    out[2] = key->k3;
}

/* Sorts keys by compare_keys (ls_radix: keys in order already, as records
 * mostly arrive, cost one check; 10M shuffled keys took ~2.5 s in qsort
 * and its merge buffer of 32 B a key). */
static void sort_keys(ls_key *keys, size_t n)
{
    ls_radix_sort_items(keys, sizeof *keys, n, key_fields, compare_keys);
}

typedef struct {
    const ls_records *r;
    ls_model *m;
    uint64_t *sync_start;    /* sync records and syncs, by start time ... */
    uint64_t *sync_max_end;  /* ... with the running maximum of their ends */
    size_t sync_count;
    uint64_t *scratch;       /* room for one duration per gap */
    ls_sample_index samples; /* PM samples, when there are any */
    ls_interval *intervals;  /* room for one busy interval per op */
    size_t interval_count;   /* of the last sweep, on the sampled device */
} ls_ctx;

/* -- gaps --------------------------------------------------------------- */

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
    s->by_cause_ns[g->cause] += d;
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
static void gap_stats(const ls_ctx *c, const ls_gap *gaps, const uint32_t *idx, size_t n,
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

/* What one sweep also writes. */
typedef struct {
    ls_gap *gaps;          /* gaps appended here when not NULL ... */
    size_t *gap_count;     /* ... at gaps[*gap_count] */
    ls_gap_stats *stats;   /* and/or added to these statistics (gap_stats_add) */
    int sampled;           /* keep the sampled device's intervals in ctx->intervals */
} ls_sweep_out;

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
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (same_line(&ops[idx[mid]], first, by_stream))
                    lo = mid + 1;
                else
                    hi = mid;
            }
            return lo;
        }
        lo = probe + 1;
        step *= 2;
    }
    return lo;
}

/* Sweeps ops idx[0..n), sorted by (device, start, end), into one line
 * over their devices (busy time summed per device). */
static void sweep_devices(ls_ctx *c, const uint32_t *idx, size_t n, ls_line *line,
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

/* -- launches and syncs -------------------------------------------------- */

/* The indices of n records by correlation id, ties in index order, into
 * *order; the uint32 id of record i is at records + offset + i * stride
 * bytes (a field of a record array, read in place); *order stays NULL
 * when they are in that order already.  0, or -1 when memory ran out. */
static int by_correlation(const void *records, size_t offset, size_t stride, size_t n,
                          uint32_t **order)
{
#define ID(i) (*(const uint32_t *)((const char *)records + offset + (size_t)(i) * stride))
    *order = NULL;
    size_t i = 1;
    while (i < n && ID(i - 1) <= ID(i))
        i++;
    if (i >= n)
        return 0;
    uint64_t *ids = ls_bulk_malloc(n * sizeof *ids);
    uint32_t *sorted = ls_bulk_malloc(n * sizeof *sorted);
    int rc = -1;
    if (ids != NULL && sorted != NULL) {
        for (i = 0; i < n; i++) {
            ids[i] = ID(i);
            sorted[i] = (uint32_t)i;
        }
        rc = ls_radix_sort(ids, sorted, n); /* stable: ties stay in index order */
    }
#undef ID
    free(ids);
    if (rc != 0) {
        free(sorted);
        return -1;
    }
    *order = sorted;
    return 0;
}

/* Whether API record a is a better launch of its op than record b (the
 * same correlation id): a runtime call before a driver call, then the
 * earliest, then the first recorded. */
static int better_launch(const ls_api *apis, uint32_t a, uint32_t b)
{
    if (apis[a].domain != apis[b].domain)
        return apis[a].domain < apis[b].domain;
    if (apis[a].start_ns != apis[b].start_ns)
        return apis[a].start_ns < apis[b].start_ns;
    return a < b;
}

/* The API records walked forward in correlation order (`order`, or record
 * order when NULL), each read once, by ops asking in that order too. */
typedef struct {
    const ls_records *r;
    const uint32_t *order;
    size_t at;           /* the next record not read */
    uint32_t last_id;    /* of the record read last */
    uint32_t id, best;   /* the last id asked and its launch, UINT32_MAX if none */
    int asked;           /* whether `id` was asked */
    int out_of_order;    /* record order, and a record's id went down */
    uint64_t after_stop; /* records read that began after the profile stopped */
} ls_launch_walk;

/* Whether an API record began after the profile stopped (not counted). */
static int after_stop(const ls_records *r, const ls_api *a)
{
    return r->stop_ns && a->start_ns > r->stop_ns;
}

/* The index of the next record, UINT32_MAX past the end. */
static uint32_t next_api(const ls_launch_walk *w)
{
    if (w->at >= w->r->apis.count)
        return UINT32_MAX;
    return w->order != NULL ? w->order[w->at] : (uint32_t)w->at;
}

/* Reads the next record k (from next_api). */
static void read_api(ls_launch_walk *w, uint32_t k)
{
    const ls_api *a = &w->r->apis.items[k];
    w->out_of_order |= a->correlation_id < w->last_id;
    w->last_id = a->correlation_id;
    w->after_stop += (uint64_t)after_stop(w->r, a);
    w->at++;
}

/* The launch record of correlation id `id`, at or above every id asked
 * before, or UINT32_MAX when none was kept. */
static uint32_t launch_of(ls_launch_walk *w, uint32_t id)
{
    if (w->asked && w->id == id) /* the kernels of one graph launch share it */
        return w->best;
    const ls_api *apis = w->r->apis.items;
    w->asked = 1;
    w->id = id;
    w->best = UINT32_MAX;
    /* Records below id launched nothing; those above it are the next ids'. */
    for (uint32_t k; (k = next_api(w)) != UINT32_MAX && apis[k].correlation_id <= id;) {
        read_api(w, k);
        if (apis[k].correlation_id < id || after_stop(w->r, &apis[k]))
            continue;
        if (w->best == UINT32_MAX || better_launch(apis, k, w->best))
            w->best = k;
    }
    return w->best;
}

/* Walks the ops (in `op_order`, or record order when NULL) and the API
 * records side by side, both by correlation id, into op_launch_ns and
 * launch_thread.  0; 1 when a walk in record order found the ops or the
 * records out of correlation order (nothing counted). */
static int walk_launches(ls_ctx *c, const uint32_t *op_order, const uint32_t *api_order,
                         uint64_t *launch_thread)
{
    const ls_records *r = c->r;
    ls_model *m = c->m;
    ls_launch_walk w = {r, api_order, 0, 0, 0, UINT32_MAX, 0, 0, 0};
    uint64_t without = 0;
    uint32_t last_op_id = 0;
    for (size_t k = 0; k < r->ops.count; k++) {
        size_t i = op_order != NULL ? op_order[k] : k;
        uint32_t id = r->ops.items[i].correlation_id;
        if (id < last_op_id)
            return 1;
        last_op_id = id;
        uint32_t api = launch_of(&w, id);
        if (w.out_of_order)
            return 1;
        if (api != UINT32_MAX) {
            m->op_launch_ns[i] = r->apis.items[api].start_ns;
            launch_thread[i] = r->apis.items[api].thread_id;
        } else {
            m->op_launch_ns[i] = LS_MODEL_NO_TIME;
            without++;
        }
    }
    for (uint32_t k; (k = next_api(&w)) != UINT32_MAX;) /* the rest: the count after the stop */
        read_api(&w, k);
    if (w.out_of_order)
        return 1;
    m->ops_without_launch += without;
    m->ignored_records += w.after_stop;
    return 0;
}

/* op_launch_ns and the launching thread of every op: the API record with
 * its correlation id (better_launch).  Live, the ops and the records come
 * in correlation order: one walk over both, no copy (at 10M launches a
 * sorted key array was 320 MB of fresh pages); otherwise their orders are
 * sorted first.  0, or -1 when memory ran out. */
static int match_launches(ls_ctx *c, uint64_t *launch_thread)
{
    const ls_records *r = c->r;
    if (walk_launches(c, NULL, NULL, launch_thread) == 0)
        return 0;
    uint32_t *op_order = NULL, *api_order = NULL;
    int result = -1;
    if (by_correlation(r->apis.items, offsetof(ls_api, correlation_id), sizeof(ls_api),
                       r->apis.count, &api_order) == 0 &&
        by_correlation(r->ops.items, offsetof(ls_op, correlation_id), sizeof(ls_op),
                       r->ops.count, &op_order) == 0)
        result = walk_launches(c, op_order, api_order, launch_thread); /* in order: 0 */
    free(op_order);
    free(api_order);
    return result;
}

/* Host waits, for gap causes: the sync records and the syncs, by start. */
static int index_syncs(ls_ctx *c)
{
    const ls_records *r = c->r;
    const ls_syncs *syncs = &c->m->syncs;
    size_t n = r->sync_records.count + syncs->count;
    ls_key *keys = ls_bulk_malloc(room_for(n) * sizeof *keys);
    c->sync_start = ls_bulk_malloc(room_for(n) * sizeof *c->sync_start);
    c->sync_max_end = ls_bulk_malloc(room_for(n) * sizeof *c->sync_max_end);
    if (keys == NULL || c->sync_start == NULL || c->sync_max_end == NULL) {
        free(keys);
        return -1;
    }
    size_t kept = 0;
    for (size_t i = 0; i < r->sync_records.count; i++) {
        const ls_sync_record *s = &r->sync_records.items[i];
        if (r->stop_ns && s->start_ns > r->stop_ns) {
            c->m->ignored_records++;
            continue;
        }
        keys[kept++] = (ls_key){s->start_ns, s->end_ns, 0, (uint32_t)i};
    }
    for (size_t i = 0; i < syncs->count; i++)
        keys[kept++] = (ls_key){syncs->items[i].start_ns, syncs->items[i].end_ns, 0, (uint32_t)i};
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

/* Ranges, steps and groups of every op and every sync (ls_attribution).
 * The ops' points are their launches, read in place (op_launch_ns and
 * launch_thread as columns, answers straight into op_range and op_step:
 * gathered, they were 36 B an op of fresh pages); the syncs', calls' and
 * graph launches' points are gathered apart, a second set of the sweep. */
static int attribute(ls_ctx *c, const ls_model_options *o, const uint64_t *launch_thread)
{
    const ls_records *r = c->r;
    ls_model *m = c->m;
    int rc = ls_attribution_choose_steps(r, o->step_ranges, o->step_range_count, &m->steps);
    if (rc != 0)
        return rc;
    size_t nops = r->ops.count, nsyncs = m->syncs.count, ncalls = r->calls.count;
    size_t n = nsyncs + ncalls + r->apis.count;
    uint64_t *point_t = ls_bulk_malloc(room_for(n) * sizeof *point_t);
    uint64_t *thread = ls_bulk_malloc(room_for(n) * sizeof *thread);
    /* a sync, nsyncs + call, or nsyncs + ncalls + API record */
    uint32_t *whose = ls_bulk_malloc(room_for(n) * sizeof *whose);
    int32_t *range = ls_bulk_malloc(room_for(n) * sizeof *range);
    int32_t *step = ls_bulk_malloc(room_for(n) * sizeof *step);
    int result = -1;
    if (!point_t || !thread || !whose || !range || !step)
        goto done;
    size_t q = 0;
    for (size_t k = 0; k < m->syncs.count; k++) {
        point_t[q] = m->syncs.items[k].start_ns;
        thread[q] = m->syncs.items[k].thread_id;
        whose[q++] = (uint32_t)k;
    }
    for (size_t k = 0; k < ncalls; k++) {
        m->call_step[k] = -1;
        point_t[q] = r->calls.items[k].enter_ns;
        thread[q] = r->calls.items[k].thread_id;
        whose[q++] = (uint32_t)(nsyncs + k);
    }
    uint8_t role = 0;
    for (size_t k = 0; k < r->apis.count; k++) { /* graph launches only: the others' ops say */
        const ls_api *a = &r->apis.items[k];
        if (k == 0 || a->cbid != a[-1].cbid || a->domain != a[-1].domain) /* calls repeat */
            role = ls_cbid_role_of_record(a->domain, a->cbid);
        if (!(role & LS_ROLE_GRAPH))
            continue;
        point_t[q] = a->start_ns;
        thread[q] = a->thread_id;
        whose[q++] = (uint32_t)(nsyncs + ncalls + k);
    }
    const ls_point_set sets[2] = {
        {m->op_launch_ns, launch_thread, nops, m->op_range, m->op_step},
        {point_t, thread, q, range, step},
    };
    if (ls_attribution_points(r, &m->steps, sets, 2) != 0 ||
        ls_attribution_groups(r, &m->steps, &m->groups) != 0)
        goto done;
    for (size_t i = 0; i < nops; i++)
        m->op_group[i] = m->op_range[i] >= 0 ? m->groups.group_of[m->op_range[i]] : -1;
    for (size_t k = 0; k < q; k++) {
        if (whose[k] < nsyncs)
            m->syncs.items[whose[k]].step = step[k];
        else if (whose[k] < nsyncs + ncalls)
            m->call_step[whose[k] - nsyncs] = step[k];
        else
            m->api_step[whose[k] - nsyncs - ncalls] = step[k];
    }
    result = 0;
done:
    free(point_t);
    free(thread);
    free(whose);
    free(range);
    free(step);
    return result;
}

/* Whether two ops launch the same shape on the same device (so have the
 * same fill). */
static int same_fill_inputs(const ls_op *a, const ls_op *b)
{
    return a->kind == b->kind && a->device_id == b->device_id && ls_op_same_geometry(a, b);
}

/* Each op's fill (from its device's facts) and whether it is a collective
 * kernel (judged once per name), in one pass over the records: the fill
 * of a launch shape the op before had too is not worked out again. */
static int fill_and_comm(ls_ctx *c)
{
    const ls_records *r = c->r;
    ls_model *m = c->m;
    size_t names = ls_names_id_bound();
    uint8_t *memo = malloc(room_for(names));
    if (memo == NULL)
        return -1;
    memset(memo, 2, names); /* 2: not judged yet */
    const ls_device_facts *device = NULL;
    uint32_t device_id = LS_MODEL_NO_ID;
    for (size_t i = 0; i < r->ops.count; i++) {
        const ls_op *op = &r->ops.items[i];
        uint32_t id = op->name_id;
        uint8_t comm = 0;
        if (op->kind == LS_OP_KERNEL && id < names) {
            if (memo[id] == 2)
                memo[id] = (uint8_t)ls_collectives_is_comm(ls_names_text(id));
            comm = memo[id];
        }
        m->op_comm[i] = comm;
        if (i > 0 && same_fill_inputs(op, op - 1)) {
            m->op_fill[i] = m->op_fill[i - 1];
            continue;
        }
        if (op->device_id != device_id) {
            device_id = op->device_id;
            device = ls_records_device(r, device_id);
        }
        m->op_fill[i] = ls_kernels_fill(op, device);
    }
    free(memo);
    return 0;
}

/* sync_gap_ns: each sync-caused gap's idle time goes to the sync that
 * overlapped it longest (see ls_model.h). */
static int sync_gaps(ls_ctx *c)
{
    ls_model *m = c->m;
    const ls_syncs *w = &m->syncs;
    size_t n = w->count;
    ls_key *keys = ls_bulk_malloc(room_for(n) * sizeof *keys);
    uint64_t *max_end = ls_bulk_malloc(room_for(n) * sizeof *max_end);
    if (keys == NULL || max_end == NULL) {
        free(keys);
        free(max_end);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        keys[i] = (ls_key){w->items[i].start_ns, w->items[i].end_ns, 0, (uint32_t)i};
    sort_keys(keys, n);
    for (size_t i = 0; i < n; i++)
        max_end[i] = i > 0 && max_end[i - 1] > keys[i].k2 ? max_end[i - 1] : keys[i].k2;
    for (size_t g = 0; n > 0 && g < m->gap_count; g++) { /* no sync: no gap to give one */
        const ls_gap *gap = &m->gaps[g];
        if (gap->cause != LS_CAUSE_SYNC)
            continue;
        size_t lo = 0, hi = n; /* syncs that began before the gap ended: keys[0..lo) */
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (keys[mid].k1 < gap->end_ns)
                lo = mid + 1;
            else
                hi = mid;
        }
        uint64_t best_overlap = 0;
        size_t best = n;
        for (size_t k = lo; k-- > 0 && max_end[k] > gap->start_ns;) {
            uint64_t a = keys[k].k1 > gap->start_ns ? keys[k].k1 : gap->start_ns;
            uint64_t b = keys[k].k2 < gap->end_ns ? keys[k].k2 : gap->end_ns;
            if (b > a && b - a >= best_overlap) { /* walking back: ties go to the earlier */
                best_overlap = b - a;
                best = k;
            }
        }
        if (best < n)
            m->sync_gap_ns[keys[best].index] += gap->end_ns - gap->start_ns;
    }
    free(keys);
    free(max_end);
    return 0;
}

/* -- PM samples ---------------------------------------------------------- */

static int is_pct(int metric)
{
    const char *name = ls_metric_name(metric);
    size_t len = strlen(name);
    return len > 4 && strcmp(name + len - 4, "_pct") == 0;
}

/* Span and busy averages of one window: the sampled device's busy
 * intervals of its last sweep (ctx->intervals) or, with none, the host
 * span [host_a, host_b]; busy estimated from GR active when unmeasured. */
static void average_window(const ls_ctx *c, uint64_t host_a, uint64_t host_b, ls_metrics *out)
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
static int fold_group_metrics(ls_model *m, size_t range_count)
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

/* -- projections --------------------------------------------------------- */

/* Counting sort of items into owners, keeping their order: for each item
 * k of order[0..n), owners_of(k) lists its owners; out gets the items
 * owner by owner, first[o]..first[o + 1] being owner o's. */
typedef struct {
    const uint32_t *items; /* NULL: the items 0, 1, 2, ... themselves (order was NULL) */
    uint32_t *owned;       /* the items when bucketing wrote them, else NULL */
    size_t *first;         /* owner_count + 2 */
} ls_buckets;

static void free_buckets(ls_buckets *b)
{
    free(b->owned);
    free(b->first);
    memset(b, 0, sizeof *b);
}

/* Whether the items, in order, already come owner by owner: each has at
 * most one owner, the owners never go down, and items with none lie only
 * before the first owned item or after the last (ops outside the steps,
 * before and after them).  Then each owner's items are a slice of the
 * order itself and no bucket needs writing (40 MB of fresh pages at 10M
 * ops, and a pass). */
typedef struct {
    int sliced;      /* so far, yes */
    int seen, ended; /* an owned item was seen; an item with none came after one */
    int32_t last;    /* the last owner seen */
    size_t lead;     /* items before the first owned one */
} ls_slices;

static void slices_note(ls_slices *t, size_t k, int32_t owner, size_t owner_count)
{
    if (owner_count > 1) {
        t->sliced = 0;
    } else if (owner_count == 0) {
        t->ended |= t->seen;
    } else {
        if (t->ended || (t->seen && owner < t->last))
            t->sliced = 0;
        if (!t->seen)
            t->lead = k;
        t->seen = 1;
        t->last = owner;
    }
}

/* Turns out->first[o + 2], owner o's count, into the start of owner o's
 * slice of the order: the order itself is the bucketed items. */
static void use_slices(const ls_slices *t, const uint32_t *order, size_t owners,
                       ls_buckets *out)
{
    out->first[0] = t->lead;
    for (size_t o = 0; o < owners; o++)
        out->first[o + 1] = out->first[o] + out->first[o + 2];
    out->items = order;
}

/* Turns out->first[o + 2], owner o's count, into where owner o's items go
 * (first[o + 1], moved to its end as items are placed). */
static int make_room(size_t owners, ls_buckets *out)
{
    for (size_t o = 2; o < owners + 2; o++)
        out->first[o] += out->first[o - 1];
    out->owned = ls_bulk_malloc(room_for(out->first[owners + 1]) * sizeof *out->owned);
    out->items = out->owned;
    return out->owned != NULL ? 0 : -1;
}

/* Buckets by a single owner per item: the int32 at owner + item * stride
 * bytes (< 0: none), so a field of a record array serves without a copy. */
static int bucket_single(const uint32_t *order, size_t n, const void *owner, size_t stride,
                         size_t owners, ls_buckets *out)
{
#define OWNER(item) (*(const int32_t *)((const char *)owner + (size_t)(item) * stride))
    out->first = ls_bulk_calloc(owners + 2, sizeof *out->first);
    if (out->first == NULL)
        return -1;
    ls_slices slices = {1, 0, 0, 0, 0};
    for (size_t k = 0; k < n; k++) {
        int32_t o = OWNER(order ? order[k] : k);
        int owned = o >= 0 && (size_t)o < owners;
        if (owned)
            out->first[o + 2]++;
        slices_note(&slices, k, o, (size_t)owned);
    }
    if (slices.sliced) {
        use_slices(&slices, order, owners, out);
        return 0;
    }
    if (make_room(owners, out) != 0)
        return -1;
    for (size_t k = 0; k < n; k++) {
        uint32_t item = order ? order[k] : (uint32_t)k;
        int32_t o = OWNER(item);
        if (o >= 0 && (size_t)o < owners)
            out->owned[out->first[o + 1]++] = item;
    }
#undef OWNER
    return 0;
}

/* Statistics of owner o's gaps (items of `b`, indices into the gaps). */
static void bucket_gap_stats(const ls_ctx *c, const ls_buckets *b, size_t o, ls_gap_stats *s)
{
    size_t n = b->first[o + 1] - b->first[o];
    if (b->items != NULL)
        gap_stats(c, c->m->gaps, b->items + b->first[o], n, s);
    else /* a slice of the gaps themselves */
        gap_stats(c, c->m->gaps + b->first[o], NULL, n, s);
}

/* The parent of range x, -1 at the top (a parent began earlier: guards a cycle). */
static int32_t chain_parent(const ls_range *ranges, int32_t x)
{
    int32_t p = ranges[x].parent;
    return p >= 0 && p < x ? p : -1;
}

/* Buckets items by every range in the chain of owner_range[item] (the
 * range and its ancestors) or, when group_of is not NULL, by the groups of
 * that chain (each group once per item: a group met again higher up the
 * chain is skipped by its stamp, the last item that counted it). */
static int bucket_chain(const ls_records *r, const uint32_t *order, size_t n,
                        const int32_t *owner_range, const int32_t *group_of, size_t owners,
                        ls_buckets *out)
{
    out->first = ls_bulk_calloc(owners + 2, sizeof *out->first);
    uint32_t *stamp = group_of ? malloc(room_for(owners) * sizeof *stamp) : NULL;
    if (out->first == NULL || (group_of && stamp == NULL)) {
        free(stamp);
        return -1;
    }
    const ls_range *ranges = r->ranges.items;
    ls_slices slices = {1, 0, 0, 0, 0};
    int result = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (stamp)
            memset(stamp, 0xFF, owners * sizeof *stamp);
        for (size_t k = 0; k < n; k++) {
            uint32_t item = order ? order[k] : (uint32_t)k;
            size_t counted = 0;
            int32_t first_owner = -1;
            for (int32_t x = owner_range[item]; x >= 0; x = chain_parent(ranges, x)) {
                int32_t o = group_of ? group_of[x] : x;
                if (o < 0 || (stamp && stamp[o] == (uint32_t)k))
                    continue;
                if (stamp)
                    stamp[o] = (uint32_t)k;
                if (pass == 1) {
                    out->owned[out->first[o + 1]++] = item;
                    continue;
                }
                out->first[o + 2]++;
                first_owner = counted++ == 0 ? o : first_owner;
            }
            if (pass == 0)
                slices_note(&slices, k, first_owner, counted);
        }
        if (pass == 0 && slices.sliced) {
            use_slices(&slices, order, owners, out);
            break;
        }
        if (pass == 0 && make_room(owners, out) != 0) {
            result = -1;
            break;
        }
    }
    free(stamp);
    return result;
}

/* Whether owner a of buckets x and owner b of buckets y hold the same
 * items in the same order. */
static int same_bucket(const ls_buckets *x, size_t a, const ls_buckets *y, size_t b)
{
    size_t n = x->first[a + 1] - x->first[a];
    if (n != y->first[b + 1] - y->first[b])
        return 0;
    const uint32_t *p = x->items + x->first[a], *q = y->items + y->first[b];
    return p == q || memcmp(p, q, n * sizeof *p) == 0;
}

/* Step lines and their gaps; the steps' ops, bucketed, are left in `ops`
 * for the ranges (free_buckets, also after a failure). */
static int project_steps(ls_ctx *c, const uint32_t *by_device, ls_buckets *ops)
{
    ls_model *m = c->m;
    const ls_records *r = c->r;
    size_t ns = m->steps.count, nops = r->ops.count;
    m->step_lines = ls_bulk_calloc(room_for(ns), sizeof *m->step_lines);
    m->step_syncs = ls_bulk_calloc(room_for(ns), sizeof *m->step_syncs);
    if (m->has_samples)
        m->step_metrics = ls_bulk_calloc(room_for(ns), sizeof *m->step_metrics);
    ls_buckets gaps = {0};
    int result = -1;
    if (!m->step_lines || !m->step_syncs || (m->has_samples && !m->step_metrics))
        goto done;
    if (bucket_single(by_device, nops, m->op_step, sizeof *m->op_step, ns, ops) != 0 ||
        bucket_single(NULL, m->gap_count, &m->gaps[0].step, sizeof *m->gaps, ns, &gaps) != 0)
        goto done;
    for (size_t s = 0; s < ns; s++) {
        ls_timeline *t = &m->step_lines[s];
        sweep_devices(c, ops->items + ops->first[s], ops->first[s + 1] - ops->first[s],
                      &t->line, &(ls_sweep_out){NULL, NULL, NULL, m->has_samples});
        bucket_gap_stats(c, &gaps, s, &t->gaps);
        if (m->has_samples && m->steps.range_of[s] != LS_MODEL_NO_ID) {
            const ls_range *range = &r->ranges.items[m->steps.range_of[s]];
            average_window(c, range->start_ns, range->end_ns, &m->step_metrics[s]);
        }
    }
    for (size_t k = 0; k < m->syncs.count; k++)
        if (m->syncs.items[k].step >= 0 && (size_t)m->syncs.items[k].step < ns)
            m->step_syncs[m->syncs.items[k].step]++;
    result = 0;
done:
    free_buckets(&gaps);
    return result;
}

/* Range and group lines.  A step's range mostly holds the step's ops
 * (step_ops, from project_steps) and no more: its line is the step's, not
 * swept again (a sweep of every op at 10M ops).  Only a range that holds
 * ops keeps a line (range_line_at; ls_model_range_line reads the others
 * as empty), and without ops no group keeps one either: 30M ranges of
 * which few launch anything write no 2.9 GB of empty lines. */
static int project_ranges(ls_ctx *c, const uint32_t *by_device, const ls_buckets *step_ops)
{
    ls_model *m = c->m;
    const ls_records *r = c->r;
    size_t nr = r->ranges.count, ng = m->groups.count, nops = r->ops.count;
    if (nops > 0) {
        m->range_line_at = ls_bulk_malloc(room_for(nr) * sizeof *m->range_line_at);
        m->group_lines = ls_bulk_calloc(room_for(ng), sizeof *m->group_lines);
        m->group_span_ns = ls_bulk_calloc(room_for(ng), sizeof *m->group_span_ns);
    }
    if (m->has_samples)
        m->range_metrics = ls_bulk_calloc(room_for(nr), sizeof *m->range_metrics);
    int32_t *gap_range = nops > 0 ? ls_bulk_malloc(room_for(m->gap_count) * sizeof *gap_range)
                                  : NULL;
    ls_buckets ops = {0}, group_ops = {0}, group_gaps = {0};
    int result = -1;
    if ((nops > 0 && (!m->range_line_at || !m->group_lines || !m->group_span_ns ||
                      !gap_range)) ||
        (m->has_samples && !m->range_metrics))
        goto done;
    if (nops > 0 && bucket_chain(r, by_device, nops, m->op_range, NULL, nr, &ops) != 0)
        goto done;
    size_t with_ops = 0;
    for (size_t i = 0; nops > 0 && i < nr; i++)
        with_ops += ops.first[i + 1] > ops.first[i];
    if (nops > 0 &&
        (m->range_lines = ls_bulk_calloc(room_for(with_ops), sizeof *m->range_lines)) == NULL)
        goto done;
    for (size_t i = 0, j = 0; i < nr; i++) {
        const ls_range *range = &r->ranges.items[i];
        if (nops == 0 || ops.first[i + 1] == ops.first[i]) {
            if (nops > 0)
                m->range_line_at[i] = LS_MODEL_NO_ID;
            c->interval_count = 0; /* an empty sweep's: no busy interval */
        } else {
            m->range_line_at[i] = (uint32_t)j;
            ls_line *line = &m->range_lines[j++];
            int32_t step = m->steps.step_of[i];
            if (!m->has_samples && step >= 0 && same_bucket(&ops, i, step_ops, (size_t)step))
                *line = m->step_lines[step].line; /* sampled: the sweep keeps intervals */
            else
                sweep_devices(c, ops.items + ops.first[i], ops.first[i + 1] - ops.first[i],
                              line, &(ls_sweep_out){NULL, NULL, NULL, m->has_samples});
            int32_t g = m->groups.group_of[i];
            if (g >= 0)
                m->group_span_ns[g] += line->last_ns - line->first_ns;
        }
        /* After the range's own sweep: its busy window is the intervals it kept. */
        if (m->has_samples)
            average_window(c, range->start_ns, range->end_ns, &m->range_metrics[i]);
    }
    free_buckets(&ops);
    /* No group (no range but steps): no op or gap to bucket by group. */
    for (size_t g = 0; nops > 0 && ng > 0 && g < m->gap_count; g++)
        gap_range[g] = m->op_range[m->gaps[g].next_op];
    if (nops > 0 && ng > 0 &&
        (bucket_chain(r, by_device, nops, m->op_range, m->groups.group_of, ng, &group_ops) != 0 ||
         bucket_chain(r, NULL, m->gap_count, gap_range, m->groups.group_of, ng, &group_gaps) != 0))
        goto done;
    for (size_t g = 0; nops > 0 && g < ng; g++) {
        ls_timeline *t = &m->group_lines[g];
        sweep_devices(c, group_ops.items + group_ops.first[g],
                      group_ops.first[g + 1] - group_ops.first[g], &t->line, NULL);
        bucket_gap_stats(c, &group_gaps, g, &t->gaps);
    }
    if (m->has_samples && fold_group_metrics(m, nr) != 0)
        goto done;
    result = 0;
done:
    free(gap_range);
    free_buckets(&ops);
    free_buckets(&group_ops);
    free_buckets(&group_gaps);
    return result;
}

/* A model without ops keeps no range or group line: these read as an
 * empty sweep's (no device, no stream). */
static const ls_timeline empty_timeline = {
    .line = {.device_id = LS_MODEL_NO_ID, .stream_id = LS_MODEL_NO_ID}};

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

/* -- the whole ---------------------------------------------------------- */

/* Sorts op indices by (k1 of the op, start, end, index) into out: 0, or
 * -1 when memory ran out.  Ops in that order already need no sort; when
 * the three fields pack into 64 bits (ls_radix_packing: timestamps spanning
 * under 2^64 ns less the device and stream bits) a radix sort of 12 B an
 * op gives the order (its ties stay in index order); otherwise keys of
 * 32 B an op go through sort_keys. */
/* An op of a run of ties by its end: (end, index). */
typedef struct {
    uint64_t end_ns;
    uint32_t index;
} ls_end_key;

static int compare_ends(const void *pa, const void *pb)
{
    const ls_end_key *a = pa, *b = pb;
    if (a->end_ns != b->end_ns)
        return a->end_ns < b->end_ns ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

/* Orders each run of equal packed[] (ops equal in key and start, in index
 * order: the radix sort is stable) by (end, index), completing sort_ops'
 * order when the end did not fit the packed key (wide time spans): ~20 B
 * an op of scratch instead of sort_keys' 32 B keys and their 24 B.
 * Returns 0, or -1 when memory ran out. */
static int order_by_end(const ls_op *ops, const uint64_t *packed, uint32_t *out, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && packed[j] == packed[i])
            j++;
        if (j - i > 1 && j - i <= 16) { /* a few: insertion sort, no memory */
            for (size_t k = i + 1; k < j; k++) {
                uint32_t held = out[k];
                ls_end_key key = {ops[held].end_ns, held};
                size_t at = k;
                for (; at > i; at--) {
                    ls_end_key before = {ops[out[at - 1]].end_ns, out[at - 1]};
                    if (compare_ends(&before, &key) <= 0)
                        break;
                    out[at] = out[at - 1];
                }
                out[at] = held;
            }
        } else if (j - i > 1) {
            ls_end_key *run = ls_bulk_malloc((j - i) * sizeof *run);
            if (run == NULL)
                return -1;
            for (size_t k = i; k < j; k++)
                run[k - i] = (ls_end_key){ops[out[k]].end_ns, out[k]};
            qsort(run, j - i, sizeof *run, compare_ends);
            for (size_t k = i; k < j; k++)
                out[k] = run[k - i].index;
            free(run);
        }
        i = j;
    }
    return 0;
}

static int sort_ops(const ls_records *r, int by_stream, uint32_t *out)
{
    size_t n = r->ops.count;
    const ls_op *ops = r->ops.items;
    size_t i = 1;
#define OP_KEY(op) (by_stream ? ((uint64_t)(op)->device_id << 32) | (op)->stream_id \
                              : (op)->device_id)
    for (; i < n; i++) {
        const ls_op *a = &ops[i - 1], *b = &ops[i];
        if (OP_KEY(a) != OP_KEY(b) ? OP_KEY(a) > OP_KEY(b)
            : a->start_ns != b->start_ns ? a->start_ns > b->start_ns
                                         : a->end_ns > b->end_ns)
            break;
    }
    for (size_t k = 0; k < n; k++)
        out[k] = (uint32_t)k;
    if (i >= n)
        return 0;
    uint64_t lo[3] = {OP_KEY(&ops[0]), ops[0].start_ns, ops[0].end_ns};
    uint64_t hi[3] = {lo[0], lo[1], lo[2]};
    for (i = 1; i < n; i++) {
        uint64_t k[3] = {OP_KEY(&ops[i]), ops[i].start_ns, ops[i].end_ns};
        for (int j = 0; j < 3; j++) {
            lo[j] = k[j] < lo[j] ? k[j] : lo[j];
            hi[j] = k[j] > hi[j] ? k[j] : hi[j];
        }
    }
    ls_radix_packing p = ls_radix_packing_of(lo, hi);
    if (p.fields >= 2) {
        uint64_t *packed = ls_bulk_malloc(n * sizeof *packed);
        int rc = -1;
        if (packed != NULL) {
            for (i = 0; i < n; i++)
                packed[i] = ls_radix_pack(&p, OP_KEY(&ops[i]), ops[i].start_ns, ops[i].end_ns);
            rc = ls_radix_sort(packed, out, n);
            if (rc == 0 && p.fields == 2) /* the end left out: ties on (key, start) */
                rc = order_by_end(ops, packed, out, n);
        }
        free(packed);
        if (rc == 0)
            return 0;
        for (size_t k = 0; k < n; k++) /* the radix sort leaves out as it was */
            out[k] = (uint32_t)k;
    }
    ls_key *keys = ls_bulk_malloc(n * sizeof *keys);
    if (keys == NULL)
        return -1;
    for (i = 0; i < n; i++)
        keys[i] = (ls_key){OP_KEY(&ops[i]), ops[i].start_ns, ops[i].end_ns, (uint32_t)i};
#undef OP_KEY
    sort_keys(keys, n);
    for (i = 0; i < n; i++)
        out[i] = keys[i].index;
    free(keys);
    return 0;
}

/* Streams in the model's order: distinct (device, stream) keys, found
 * through a small open-addressing table. */
enum { STREAM_ORDER_MAX_STREAMS = 1 << 16, STREAM_MEMO = 8 };

typedef struct {
    uint64_t *keys;   /* (device << 32) | stream, one per distinct stream */
    uint32_t *slots;  /* 1 + index into keys, 0 empty */
    size_t count, cap, slot_mask;
    /* The streams asked last, by their id's low bits: ops that take turns
     * on a few streams find theirs here, not in the table. */
    uint64_t memo_key[STREAM_MEMO];
    uint32_t memo_slot[STREAM_MEMO]; /* its slots[] value, 0: nothing kept */
} ls_stream_set;

static uint64_t stream_key(const ls_op *op)
{
    return ((uint64_t)op->device_id << 32) | op->stream_id;
}

static size_t stream_slot(const ls_stream_set *set, uint64_t key)
{
    uint64_t h = key * 0x9E3779B97F4A7C15ULL;
    size_t at = (size_t)(h >> 32) & set->slot_mask;
    while (set->slots[at] && set->keys[set->slots[at] - 1] != key)
        at = (at + 1) & set->slot_mask;
    return at;
}

/* slots[] of the stream `key`: 1 + its index into keys, 0 when absent. */
static uint32_t stream_index(ls_stream_set *set, uint64_t key)
{
    size_t m = (size_t)key % STREAM_MEMO;
    if (set->memo_slot[m] != 0 && set->memo_key[m] == key)
        return set->memo_slot[m];
    uint32_t found = set->slots[stream_slot(set, key)];
    set->memo_key[m] = key;
    set->memo_slot[m] = found;
    return found;
}

static int compare_u64(const void *pa, const void *pb)
{
    uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
    return (a > b) - (a < b);
}

static void stream_set_free(ls_stream_set *set)
{
    free(set->keys);
    free(set->slots);
    memset(set, 0, sizeof *set);
}

/* The distinct streams of the records, in (device, stream) order, with
 * each one's slot pointing at its place there: 0; 1 when there are more
 * than the table takes (set freed: sort instead); -1 when memory ran out. */
static int distinct_streams(const ls_records *r, ls_stream_set *set)
{
    const ls_op *ops = r->ops.items;
    memset(set, 0, sizeof *set);
    set->cap = STREAM_ORDER_MAX_STREAMS;
    set->slot_mask = 2 * (size_t)STREAM_ORDER_MAX_STREAMS - 1;
    set->keys = malloc(set->cap * sizeof *set->keys);
    set->slots = calloc(set->slot_mask + 1, sizeof *set->slots);
    if (set->keys == NULL || set->slots == NULL) {
        stream_set_free(set);
        return -1;
    }
    for (size_t i = 0; i < r->ops.count; i++) {
        uint64_t key = stream_key(&ops[i]);
        if ((i > 0 && key == stream_key(&ops[i - 1])) || stream_index(set, key) != 0)
            continue;
        if (set->count == set->cap) {
            stream_set_free(set);
            return 1;
        }
        set->keys[set->count++] = key;
        set->slots[stream_slot(set, key)] = (uint32_t)set->count;
    }
    qsort(set->keys, set->count, sizeof *set->keys, compare_u64);
    memset(set->slots, 0, (set->slot_mask + 1) * sizeof *set->slots);
    memset(set->memo_slot, 0, sizeof set->memo_slot);
    for (size_t k = 0; k < set->count; k++)
        set->slots[stream_slot(set, set->keys[k])] = (uint32_t)(k + 1);
    return 0;
}

/* The stream order (device, stream, start, end, index) from the device
 * order (device, start, end, index) in *order, which it replaces: a stable
 * partition by stream (the streams of `set`) keeps each stream's ops in the
 * order they had, so two passes replace a sort of every op again (each
 * op's stream looked up in both: no array of them written).  0, or -1
 * when memory ran out (*order kept). */
static int stream_order_from_device_order(const ls_records *r, ls_stream_set *set,
                                          uint32_t **order)
{
    size_t n = r->ops.count;
    const ls_op *ops = r->ops.items;
    const uint32_t *from = *order;
    size_t *first = calloc(set->count + 1, sizeof *first);
    uint32_t *by_stream = ls_bulk_malloc((n ? n : 1) * sizeof *by_stream);
    if (first == NULL || by_stream == NULL) {
        free(first);
        free(by_stream);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        first[stream_index(set, stream_key(&ops[from[i]]))]++; /* 1 + index: counts shifted */
    for (size_t k = 0; k < set->count; k++)
        first[k + 1] += first[k];
    for (size_t i = 0; i < n; i++)
        by_stream[first[stream_index(set, stream_key(&ops[from[i]])) - 1]++] = from[i];
    free(first);
    free(*order);
    *order = by_stream;
    return 0;
}

/* One timeline per run of equal key among sorted ops (devices or streams);
 * returns their number.  Device sweeps keep the gaps and busy intervals;
 * with gaps NULL (streams) only their statistics are kept, so no gap
 * array of the ops' size is written (400 MB at 10M ops). */
static size_t sweep_lines(ls_ctx *c, const uint32_t *order, int by_stream, ls_timeline *lines,
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
    if (fill_and_comm(&c) != 0 || ls_syncs_build(r, &m->syncs) != 0 ||
        match_launches(&c, launch_thread) != 0 || index_syncs(&c) != 0 ||
        ls_kernels_table(r, m->op_fill, &m->kernels) != 0)
        goto done;
    m->sync_gap_ns = ls_bulk_calloc(room_for(m->syncs.count), sizeof *m->sync_gap_ns);
    if (m->sync_gap_ns == NULL)
        goto done;
    int rc = attribute(&c, o, launch_thread);
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
    if (sort_ops(r, 0, by_device) != 0)
        goto done;
    c.interval_count = 0; /* the sampled device's busy intervals, for the run's window */
    m->device_count =
        sweep_lines(&c, by_device, 0, m->devices, m->gaps, &m->gap_count, m->has_samples);
    /* scratch is reused by the steps' and groups' statistics: its pages
     * are already there (fresh ones cost a fault each, up to 80 MB of them
     * at 10M gaps). */
    if (m->has_samples)
        average_window(&c, r->start_ns, r->stop_ns, &m->metrics);

    if (sync_gaps(&c) != 0)
        goto done;

    if (project_steps(&c, by_device, &step_ops) != 0 ||
        project_ranges(&c, by_device, &step_ops) != 0)
        goto done;
    free_buckets(&step_ops);

    /* Streams: each on its own, its gaps kept only as statistics (the
     * device order is not needed any more: its array takes the streams').
     * As many streams as devices: each device ran one (a loop on the
     * default or one side stream), and each stream's line is its device's,
     * copied (the keys in (device, stream) order follow the devices').
     * Otherwise the device order partitioned by stream, or with too many
     * streams for that, sorted. */
    ls_stream_set set;
    rc = distinct_streams(r, &set);
    if (rc < 0)
        goto done;
    if (rc == 0 && set.count == m->device_count) {
        for (size_t d = 0; d < m->device_count; d++) {
            m->streams[d] = m->devices[d];
            m->streams[d].line.stream_id = (uint32_t)set.keys[d];
        }
        m->stream_count = m->device_count;
    } else {
        if (rc == 0 ? stream_order_from_device_order(r, &set, &by_device) != 0
                    : sort_ops(r, 1, by_device) != 0) {
            stream_set_free(&set);
            goto done;
        }
        m->stream_count = sweep_lines(&c, by_device, 1, m->streams, NULL, NULL, 0);
    }
    stream_set_free(&set);

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
        gap_stats(&c, m->gaps, NULL, m->gap_count, &m->total.gaps);
    for (size_t d = 0; m->device_count > 1 && d < m->device_count; d++)
        m->total.gaps.merged += m->devices[d].gaps.merged;
    result = 0;
done:
    free_buckets(&step_ops);
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
    ls_readiness_free(&m->readiness);
    ls_kernels_free(&m->kernels);
    free(m->gaps);
    free(m->devices);
    free(m->streams);
    ls_attribution_free_steps(&m->steps);
    free(m->step_lines);
    free(m->step_syncs);
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

/* -- queries ------------------------------------------------------------ */

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
static void meeting(const ls_model *m, size_t device, ls_span_at at, size_t lo, size_t hi,
                    uint64_t start, uint64_t end, size_t *first, size_t *last)
{
    size_t top = hi;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (at(m, device, mid).end_ns < start)
            lo = mid + 1;
        else
            hi = mid;
    }
    *first = lo;
    hi = top;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (at(m, device, mid).start_ns <= end)
            lo = mid + 1;
        else
            hi = mid;
    }
    *last = lo;
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
