/* ls_model_projections: see ls_model_projections.h (split out of ls_model.c, issue 29). */
#include "ls_model_projections.h"

#include "ls_bulk.h"
#include "ls_model_counters.h"
#include "ls_model_timeline.h"

#include <stdlib.h>
#include <string.h>

void ls_model_free_buckets(ls_buckets *b)
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
        ls_model_gap_stats(c, c->m->gaps, b->items + b->first[o], n, s);
    else /* a slice of the gaps themselves */
        ls_model_gap_stats(c, c->m->gaps + b->first[o], NULL, n, s);
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
 * for the ranges (ls_model_free_buckets, also after a failure). */
int ls_model_project_steps(ls_ctx *c, const uint32_t *by_device, ls_buckets *ops)
{
    ls_model *m = c->m;
    const ls_records *r = c->r;
    size_t ns = m->steps.count, nops = r->ops.count;
    /* Without ops every step line is an empty sweep's: none is kept
     * (ls_model_step_line), where a million steps would write 313 MiB. */
    int lines = nops > 0 || m->gap_count > 0;
    m->step_lines = lines ? ls_bulk_calloc(room_for(ns), sizeof *m->step_lines) : NULL;
    m->step_syncs = ls_bulk_calloc(room_for(ns), sizeof *m->step_syncs);
    m->step_sync_blocked_ns = ls_bulk_calloc(room_for(ns), sizeof *m->step_sync_blocked_ns);
    if (m->has_samples)
        m->step_metrics = ls_bulk_calloc(room_for(ns), sizeof *m->step_metrics);
    ls_buckets gaps = {0};
    int result = -1;
    if ((lines && !m->step_lines) || !m->step_syncs || !m->step_sync_blocked_ns ||
        (m->has_samples && !m->step_metrics))
        goto done;
    if (bucket_single(by_device, nops, m->op_step, sizeof *m->op_step, ns, ops) != 0 ||
        bucket_single(NULL, m->gap_count, &m->gaps[0].step, sizeof *m->gaps, ns, &gaps) != 0)
        goto done;
    for (size_t s = 0; s < ns; s++) {
        if (lines) {
            ls_timeline *t = &m->step_lines[s];
            ls_model_sweep_devices(c, ops->items + ops->first[s],
                                   ops->first[s + 1] - ops->first[s], &t->line,
                                   &(ls_sweep_out){NULL, NULL, NULL, m->has_samples});
            bucket_gap_stats(c, &gaps, s, &t->gaps);
        } else if (m->has_samples) {
            c->interval_count = 0; /* an empty sweep's: no busy interval to average over */
        }
        if (m->has_samples && m->steps.range_of[s] != LS_MODEL_NO_ID) {
            const ls_range *range = &r->ranges.items[m->steps.range_of[s]];
            ls_model_average_window(c, range->start_ns, range->end_ns, &m->step_metrics[s]);
        }
    }
    for (size_t k = 0; k < m->syncs.count; k++) {
        const ls_sync *x = &m->syncs.items[k];
        if (x->step >= 0 && (size_t)x->step < ns) {
            m->step_syncs[x->step]++;
            m->step_sync_blocked_ns[x->step] += x->blocked_ns;
        }
    }
    result = 0;
done:
    ls_model_free_buckets(&gaps);
    return result;
}

/* Range and group lines.  A step's range mostly holds the step's ops
 * (step_ops, from ls_model_project_steps) and no more: its line is the step's, not
 * swept again (a sweep of every op at 10M ops).  Only a range that holds
 * ops keeps a line (range_line_at; ls_model_range_line reads the others
 * as empty), and without ops no group keeps one either: 30M ranges of
 * which few launch anything write no 2.9 GB of empty lines. */
int ls_model_project_ranges(ls_ctx *c, const uint32_t *by_device, const ls_buckets *step_ops)
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
                ls_model_sweep_devices(c, ops.items + ops.first[i], ops.first[i + 1] - ops.first[i],
                                       line, &(ls_sweep_out){NULL, NULL, NULL, m->has_samples});
            int32_t g = m->groups.group_of[i];
            if (g >= 0)
                m->group_span_ns[g] += line->last_ns - line->first_ns;
        }
        /* After the range's own sweep: its busy window is the intervals it kept. */
        if (m->has_samples)
            ls_model_average_window(c, range->start_ns, range->end_ns, &m->range_metrics[i]);
    }
    ls_model_free_buckets(&ops);
    /* No group (no range but steps): no op or gap to bucket by group. */
    for (size_t g = 0; nops > 0 && ng > 0 && g < m->gap_count; g++)
        gap_range[g] = m->op_range[m->gaps[g].next_op];
    if (nops > 0 && ng > 0 &&
        (bucket_chain(r, by_device, nops, m->op_range, m->groups.group_of, ng, &group_ops) != 0 ||
         bucket_chain(r, NULL, m->gap_count, gap_range, m->groups.group_of, ng, &group_gaps) != 0))
        goto done;
    for (size_t g = 0; nops > 0 && g < ng; g++) {
        ls_timeline *t = &m->group_lines[g];
        ls_model_sweep_devices(c, group_ops.items + group_ops.first[g],
                               group_ops.first[g + 1] - group_ops.first[g], &t->line, NULL);
        bucket_gap_stats(c, &group_gaps, g, &t->gaps);
    }
    if (m->has_samples && ls_model_fold_group_metrics(m, nr) != 0)
        goto done;
    result = 0;
done:
    free(gap_range);
    ls_model_free_buckets(&ops);
    ls_model_free_buckets(&group_ops);
    ls_model_free_buckets(&group_gaps);
    return result;
}
