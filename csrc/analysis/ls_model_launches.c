/* ls_model_launches: see ls_model_launches.h (split out of ls_model.c, issue 29). */
#include "ls_model_launches.h"

#include "ls_bulk.h"
#include "ls_cbids.h"
#include "ls_collectives.h"
#include "ls_model_order.h"
#include "ls_names.h"
#include "ls_radix.h"
#include "ls_search.h"

#include <stdlib.h>
#include <string.h>

/* An op with no launch record has no point to attribute. */
_Static_assert(LS_MODEL_NO_TIME == LS_NO_POINT, "op_launch_ns serves as a point column");

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
int ls_model_match_launches(ls_ctx *c, uint64_t *launch_thread)
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
int ls_model_index_syncs(ls_ctx *c)
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
    ls_model_sort_keys(keys, kept);
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
int ls_model_attribute(ls_ctx *c, const ls_model_options *o, const uint64_t *launch_thread)
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
int ls_model_fill_and_comm(ls_ctx *c)
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

/* The device timeline of gap g (its device's, found from the last one
 * looked up: the gaps come device by device). */
static ls_timeline *device_of_gap(ls_model *m, const ls_gap *g, size_t *last)
{
    if (*last < m->device_count && m->devices[*last].line.device_id == g->device_id)
        return &m->devices[*last];
    for (size_t d = 0; d < m->device_count; d++)
        if (m->devices[d].line.device_id == g->device_id) {
            *last = d;
            return &m->devices[d];
        }
    return NULL;
}

/* Charges sync-caused gap g (its sync `k`) against what the host still
 * had of its wait (budget[k]): that much of the gap was the sync's, the
 * rest the host's own work before its next launch, which removing the
 * sync leaves in place (issue 39).  The device's statistics, made before
 * the charges, move that rest from sync to host. */
static void charge_gap(ls_model *m, size_t g, uint64_t *budget, size_t *last_device)
{
    const ls_gap *gap = &m->gaps[g];
    uint64_t d = gap->end_ns - gap->start_ns;
    uint64_t waited = d < *budget ? d : *budget;
    *budget -= waited;
    m->gap_waited_ns[g] = waited;
    ls_timeline *device = device_of_gap(m, gap, last_device);
    if (device != NULL && device->gaps.by_cause_ns[LS_CAUSE_SYNC] >= d - waited) {
        device->gaps.by_cause_ns[LS_CAUSE_SYNC] -= d - waited;
        device->gaps.by_cause_ns[LS_CAUSE_HOST] += d - waited;
    }
}

typedef struct {
    const ls_key *keys;
    uint64_t t;
} ls_start_key;

/* Syncs (keys by start time, k1) that began before `t`. */
static int starts_before(size_t i, const void *key)
{
    const ls_start_key *k = key;
    return k->keys[i].k1 < k->t;
}

/* sync_gap_ns: each sync-caused gap's idle time goes to the sync that
 * overlapped it longest (see ls_model.h); gap_waited_ns: the part of it
 * the host was still blocked for (charge_gap). */
int ls_model_sync_gaps(ls_ctx *c)
{
    ls_model *m = c->m;
    const ls_syncs *w = &m->syncs;
    size_t n = w->count;
    ls_key *keys = ls_bulk_malloc(room_for(n) * sizeof *keys);
    uint64_t *max_end = ls_bulk_malloc(room_for(n) * sizeof *max_end);
    uint64_t *budget = ls_bulk_malloc(room_for(n) * sizeof *budget);
    if (n > 0 && m->gap_count > 0)
        m->gap_waited_ns = ls_bulk_calloc(room_for(m->gap_count), sizeof *m->gap_waited_ns);
    if (keys == NULL || max_end == NULL || budget == NULL ||
        (n > 0 && m->gap_count > 0 && m->gap_waited_ns == NULL)) {
        free(keys);
        free(max_end);
        free(budget);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        budget[i] = w->items[i].blocked_ns;
    size_t last_device = 0;
    for (size_t i = 0; i < n; i++)
        keys[i] = (ls_key){w->items[i].start_ns, w->items[i].end_ns, 0, (uint32_t)i};
    ls_model_sort_keys(keys, n);
    for (size_t i = 0; i < n; i++)
        max_end[i] = i > 0 && max_end[i - 1] > keys[i].k2 ? max_end[i - 1] : keys[i].k2;
    for (size_t g = 0; n > 0 && g < m->gap_count; g++) { /* no sync: no gap to give one */
        const ls_gap *gap = &m->gaps[g];
        if (gap->cause != LS_CAUSE_SYNC)
            continue;
        /* syncs that began before the gap ended: keys[0..lo) */
        size_t lo = ls_partition_point(0, n, starts_before, &(ls_start_key){keys, gap->end_ns});
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
        if (best < n) {
            m->sync_gap_ns[keys[best].index] += gap->end_ns - gap->start_ns;
            charge_gap(m, g, &budget[keys[best].index], &last_device);
        } else if (m->gap_waited_ns != NULL) { /* no sync overlaps it after all: all the sync's */
            m->gap_waited_ns[g] = gap->end_ns - gap->start_ns;
        }
    }
    free(keys);
    free(max_end);
    free(budget);
    return 0;
}
