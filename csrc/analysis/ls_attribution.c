/* ls_attribution: see ls_attribution.h.
 *
 * One sweep over the range edges and the points in time order keeps, per
 * thread, the innermost open range; two max-heaps (lazy deletion) give the
 * innermost range and the open step that began last over all threads. */
#include "ls_attribution.h"

#include "ls_bulk.h"
#include "ls_ids.h"
#include "ls_names.h"
#include "ls_radix.h"

#include <stdlib.h>
#include <string.h>

/* Room for n items, at least one (malloc(0) may return NULL). */
static size_t room_for(size_t n) { return n ? n : 1; }

static int32_t valid_parent(const ls_records *r, size_t i)
{
    int32_t p = r->ranges.items[i].parent;
    return p >= 0 && (size_t)p < i ? p : -1; /* a parent began earlier: guards a cycle */
}

int ls_attribution_choose_steps(const ls_records *r, const uint32_t *chosen, size_t n,
                                ls_steps *out)
{
    memset(out, 0, sizeof *out);
    size_t nr = r->ranges.count;
    out->step_of = malloc(room_for(nr) * sizeof *out->step_of);
    out->chain_step = malloc(room_for(nr) * sizeof *out->chain_step);
    if (out->step_of == NULL || out->chain_step == NULL)
        return -1;
    for (size_t i = 0; i < nr; i++)
        out->step_of[i] = -1;
    if (chosen != NULL) {
        for (size_t k = 0; k < n; k++) {
            if (chosen[k] >= nr || out->step_of[chosen[k]] >= 0)
                return -2;
            out->step_of[chosen[k]] = (int32_t)k;
        }
        out->count = n;
    } else {
        for (size_t i = 0; i < nr; i++) {
            int32_t s = r->ranges.items[i].step_index;
            out->step_of[i] = s;
            if (s >= 0 && (size_t)s + 1 > out->count)
                out->count = (size_t)s + 1;
        }
    }
    out->range_of = malloc(room_for(out->count) * sizeof *out->range_of);
    if (out->range_of == NULL)
        return -1;
    for (size_t s = 0; s < out->count; s++)
        out->range_of[s] = UINT32_MAX; /* a live step index may be unused */
    for (size_t i = 0; i < nr; i++) {
        int32_t s = out->step_of[i];
        if (s >= 0 && out->range_of[s] == UINT32_MAX)
            out->range_of[s] = (uint32_t)i;
        else if (s >= 0)
            out->step_of[i] = -1; /* a repeated live index: the first range keeps it */
        int32_t p = valid_parent(r, i);
        out->chain_step[i] = out->step_of[i] >= 0 ? out->step_of[i]
                             : p >= 0             ? out->chain_step[p]
                                                  : -1;
    }
    return 0;
}

void ls_attribution_free_steps(ls_steps *s)
{
    free(s->range_of);
    free(s->step_of);
    free(s->chain_step);
    memset(s, 0, sizeof *s);
}

/* -- the sweep ----------------------------------------------------------- */

enum { EV_START = 0, EV_POINT = 1, EV_END = 2 };

typedef struct {
    uint64_t t;
    uint32_t kind;  /* at one time: starts, then points, then ends (ends inclusive) */
    uint32_t order; /* starts in begin order, ends innermost first */
    uint32_t index; /* range or point */
} ls_event;

static int compare_events(const void *pa, const void *pb)
{
    const ls_event *a = pa, *b = pb;
    if (a->t != b->t)
        return a->t < b->t ? -1 : 1;
    if (a->kind != b->kind)
        return a->kind < b->kind ? -1 : 1;
    return (a->order > b->order) - (a->order < b->order);
}

static void event_fields(const void *item, uint64_t out[3])
{
    const ls_event *ev = item;
    out[0] = ev->t;
    out[1] = ev->kind;
    out[2] = ev->order;
}

/* Sorts events by compare_events (ls_radix: nothing to do when in order
 * already, a few linear passes when not). */
static void sort_events(ls_event *events, size_t n)
{
    ls_radix_sort_items(events, sizeof *events, n, event_fields, compare_events);
}

/* A max-heap of ranges by (start, index): the one that began last on top. */
typedef struct {
    uint32_t *items;
    uint32_t *slot; /* thread slot of each entry */
    size_t count;
} ls_heap;

static int later(const ls_records *r, uint32_t a, uint32_t b)
{
    uint64_t sa = r->ranges.items[a].start_ns, sb = r->ranges.items[b].start_ns;
    return sa != sb ? sa > sb : a > b;
}

static void heap_push(ls_heap *h, const ls_records *r, uint32_t range, uint32_t slot)
{
    size_t i = h->count++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!later(r, range, h->items[up]))
            break;
        h->items[i] = h->items[up];
        h->slot[i] = h->slot[up];
        i = up;
    }
    h->items[i] = range;
    h->slot[i] = slot;
}

static void heap_pop(ls_heap *h, const ls_records *r)
{
    uint32_t range = h->items[--h->count], slot = h->slot[h->count];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= h->count)
            break;
        if (child + 1 < h->count && later(r, h->items[child + 1], h->items[child]))
            child++;
        if (!later(r, h->items[child], range))
            break;
        h->items[i] = h->items[child];
        h->slot[i] = h->slot[child];
        i = child;
    }
    h->items[i] = range;
    h->slot[i] = slot;
}

/* Slot of a thread id in the sorted unique threads[0..n), -1 if absent. */
static int32_t slot_of(const uint64_t *threads, size_t n, uint64_t thread_id)
{
    return (int32_t)ls_ids_find_u64(threads, n, thread_id);
}

typedef struct {
    const ls_records *r;
    const ls_steps *steps;
    int32_t *current;   /* per thread slot: innermost open range, -1 */
    ls_heap ranges;     /* candidates for "innermost open range that began last" */
    ls_heap open_steps; /* candidates for "open step that began last" */
    const uint64_t *threads; /* the ranges' threads, sorted: slot k is threads[k] */
    size_t thread_count;
    int has_asked;           /* whether a thread was asked: ... */
    uint64_t asked_thread;   /* ... the last one ... */
    int32_t asked_slot;      /* ... and its slot */
    int steps_only;          /* no set asks for ranges: only the threads of steps are swept */
} ls_sweep;

/* The innermost open range of a slot changed to `range` (-1: none). */
static void set_current(ls_sweep *s, uint32_t slot, int32_t range)
{
    s->current[slot] = range;
    if (range < 0)
        return;
    if (!s->steps_only)
        heap_push(&s->ranges, s->r, (uint32_t)range, slot);
    int32_t step = s->steps->chain_step[range];
    if (step >= 0)
        heap_push(&s->open_steps, s->r, s->steps->range_of[step], slot);
}

/* Top of a heap whose entry is still true, or -1 (stale entries dropped). */
static int32_t top_range(ls_sweep *s)
{
    while (s->ranges.count > 0) {
        uint32_t range = s->ranges.items[0], slot = s->ranges.slot[0];
        if (s->current[slot] == (int32_t)range)
            return (int32_t)range;
        heap_pop(&s->ranges, s->r);
    }
    return -1;
}

static int32_t top_step_range(ls_sweep *s, uint32_t *slot_out)
{
    while (s->open_steps.count > 0) {
        uint32_t range = s->open_steps.items[0], slot = s->open_steps.slot[0];
        int32_t cur = s->current[slot];
        if (cur >= 0 && s->steps->chain_step[cur] >= 0 &&
            s->steps->range_of[s->steps->chain_step[cur]] == range) {
            *slot_out = slot;
            return (int32_t)range;
        }
        heap_pop(&s->open_steps, s->r);
    }
    return -1;
}

/* -- the points ------------------------------------------------------------ */

/* One set's points in time order: the set itself when it is in order
 * already (launches mostly are: nothing copied), or its points' times
 * sorted with their indices (12 bytes a point and as much scratch).  The
 * next point, not taken yet, is kept at hand for the merge of the sets. */
typedef struct {
    const ls_point_set *set;
    uint64_t *t;      /* the sorted times, NULL when the set is in order */
    uint32_t *order;  /* ... and their points */
    size_t count;     /* positions to walk: the set's, or its points when sorted */
    size_t next;      /* the position of the next point */
    int has_next;     /* whether there is one ... */
    uint32_t q;       /* ... its index in the set ... */
    uint64_t at;      /* ... and its time */
} ls_point_walk;

static void no_answer(const ls_point_set *set, size_t q)
{
    if (set->range_out != NULL)
        set->range_out[q] = -1;
    set->step_out[q] = -1;
}

/* Finds the next point at or after position w->next; no-point entries
 * passed on the way are answered -1. */
static void point_walk_find(ls_point_walk *w)
{
    const ls_point_set *set = w->set;
    if (w->order == NULL)
        while (w->next < w->count && set->t[w->next] == LS_NO_POINT)
            no_answer(set, w->next++);
    w->has_next = w->next < w->count;
    if (!w->has_next)
        return;
    w->q = w->order != NULL ? w->order[w->next] : (uint32_t)w->next;
    w->at = w->order != NULL ? w->t[w->next] : set->t[w->next];
}

/* Readies the walk of a set.  0, or -1 when memory ran out. */
static int point_walk_start(const ls_point_set *set, ls_point_walk *w)
{
    memset(w, 0, sizeof *w);
    w->set = set;
    w->count = set->count;
    uint64_t last = 0;
    size_t q = 0;
    for (; q < set->count; q++) {
        if (set->t[q] == LS_NO_POINT)
            continue;
        if (set->t[q] < last)
            break;
        last = set->t[q];
    }
    if (q < set->count) {
        w->t = ls_bulk_malloc(set->count * sizeof *w->t);
        w->order = ls_bulk_malloc(set->count * sizeof *w->order);
        if (w->t == NULL || w->order == NULL)
            return -1;
        w->count = 0;
        for (q = 0; q < set->count; q++) {
            if (set->t[q] == LS_NO_POINT) {
                no_answer(set, q);
                continue;
            }
            w->t[w->count] = set->t[q];
            w->order[w->count++] = (uint32_t)q;
        }
        if (ls_radix_sort(w->t, w->order, w->count) != 0) /* stable: ties in index order */
            return -1;
    }
    point_walk_find(w);
    return 0;
}

static void point_walk_free(ls_point_walk *w)
{
    free(w->t);
    free(w->order);
}

/* A range event: the innermost open range of its thread changes. */
static void apply_event(ls_sweep *s, const ls_event *ev, const int32_t *slot, uint8_t *ended)
{
    if (ev->kind == EV_START) {
        set_current(s, (uint32_t)slot[ev->index], (int32_t)ev->index);
        return;
    }
    uint32_t i = ev->index, k = (uint32_t)slot[i];
    ended[i] = 1;
    if (s->current[k] != (int32_t)i)
        return; /* a later range of its thread is innermost already */
    int32_t up = valid_parent(s->r, i);
    while (up >= 0 && ended[up])
        up = valid_parent(s->r, (size_t)up);
    set_current(s, k, up);
}

/* The slot of a point's thread, -1 when it opened no range: the last
 * point's again, mostly (one thread launches most ops). */
static int32_t point_slot(ls_sweep *s, uint64_t thread)
{
    if (!s->has_asked || thread != s->asked_thread) {
        s->has_asked = 1;
        s->asked_thread = thread;
        s->asked_slot = thread == LS_NO_THREAD ? -1 : slot_of(s->threads, s->thread_count, thread);
    }
    return s->asked_slot;
}

/* The innermost range and the step of a point on `thread` now. */
static void answer_point(ls_sweep *s, uint64_t thread, int32_t *range_out, int32_t *step_out)
{
    const ls_steps *steps = s->steps;
    int32_t k = point_slot(s, thread);
    int32_t range = k >= 0 ? s->current[k] : -1;
    int32_t step = range >= 0 ? steps->chain_step[range] : -1;
    if (step < 0) {
        uint32_t step_slot = 0;
        int32_t step_range = top_step_range(s, &step_slot);
        if (step_range >= 0) {
            step = steps->step_of[step_range];
            if (range < 0)
                range = s->current[step_slot];
        }
    }
    if (range < 0 && !s->steps_only)
        range = top_range(s);
    *range_out = range;
    *step_out = step;
}

/* The walk whose next point comes first in time, or NULL when all are done. */
static ls_point_walk *earliest_walk(ls_point_walk *walks, size_t n)
{
    ls_point_walk *best = NULL;
    for (size_t k = 0; k < n; k++)
        if (walks[k].has_next && (best == NULL || walks[k].at < best->at))
            best = &walks[k];
    return best;
}

int ls_attribution_points(const ls_records *r, const ls_steps *steps, const ls_point_set *sets,
                          size_t nsets)
{
    size_t total = 0;
    for (size_t k = 0; k < nsets; k++)
        total += sets[k].count;
    if (total == 0) /* nothing to place: a host-only profile of a million steps sweeps nothing */
        return 0;
    size_t nr = r->ranges.count;
    /* Only steps asked (the step of another thread's range): a range on a
     * thread that never opens a step cannot change the open step's answer
     * (its innermost range chains to no step), so its edges are not swept
     * (8 threads of ranges beside one thread of steps). */
    int steps_only = 1;
    for (size_t k = 0; k < nsets; k++)
        steps_only &= sets[k].range_out == NULL;
    uint64_t *threads = malloc(room_for(nr) * sizeof *threads);
    int32_t *slot = malloc(room_for(nr) * sizeof *slot);
    uint8_t *ended = calloc(room_for(nr), 1);
    ls_point_walk *walks = calloc(room_for(nsets), sizeof *walks);
    ls_event *events = NULL;
    ls_sweep s = {r, steps, NULL, {0}, {0}, NULL, 0, 0, 0, 0, steps_only};
    int result = -1;
    if (!threads || !slot || !ended || !walks)
        goto done;
    size_t nt = 0;
    for (size_t i = 0; i < nr; i++)
        if (!steps_only || steps->chain_step[i] >= 0)
            threads[nt++] = r->ranges.items[i].thread_id;
    nt = ls_ids_sort_unique_u64(threads, nt);
    size_t swept = 0; /* ranges whose edges are swept */
    for (size_t i = 0; i < nr; i++) {
        slot[i] = slot_of(threads, nt, r->ranges.items[i].thread_id);
        swept += slot[i] >= 0;
    }
    events = malloc(room_for(2 * swept) * sizeof *events);
    s.current = malloc(room_for(nt) * sizeof(int32_t));
    /* each range enters a heap on its start and once more per child's end */
    if (!steps_only) {
        s.ranges.items = malloc(room_for(2 * swept) * sizeof(uint32_t));
        s.ranges.slot = malloc(room_for(2 * swept) * sizeof(uint32_t));
    }
    s.open_steps.items = malloc(room_for(2 * swept) * sizeof(uint32_t));
    s.open_steps.slot = malloc(room_for(2 * swept) * sizeof(uint32_t));
    if (!events || !s.current || (!steps_only && (!s.ranges.items || !s.ranges.slot)) ||
        !s.open_steps.items || !s.open_steps.slot)
        goto done;
    for (size_t k = 0; k < nt; k++)
        s.current[k] = -1;
    s.threads = threads;
    s.thread_count = nt;

    size_t m = 0;
    for (size_t i = 0; i < nr; i++) {
        const ls_range *range = &r->ranges.items[i];
        if (slot[i] < 0)
            continue;
        events[m++] = (ls_event){range->start_ns, EV_START, (uint32_t)i, (uint32_t)i};
        events[m++] = (ls_event){range->end_ns, EV_END, UINT32_MAX - (uint32_t)i, (uint32_t)i};
    }
    /* The ranges' events and each set's points apart, each in time order,
     * then walked as one merged sequence: a point sees the events before
     * it in compare_events' order, as a sort of all of them would give,
     * without sorting millions of points again.  The points change
     * nothing, so their order among themselves does not matter, and the
     * events after the last point are not walked. */
    sort_events(events, m);
    for (size_t k = 0; k < nsets; k++)
        if (point_walk_start(&sets[k], &walks[k]) != 0)
            goto done;
    const ls_event *next_range = events, *ranges_end = events + m;
    const ls_event *seen = NULL; /* next_range at the last answer */
    uint64_t last_t = 0, last_thread = 0;
    int32_t last_range = -1, last_step = -1;
    for (ls_point_walk *w; (w = earliest_walk(walks, nsets)) != NULL; point_walk_find(w)) {
        w->next++; /* taken: point_walk_find then finds the one after */
        uint32_t q = w->q;
        uint64_t t = w->at;
        ls_event point = {t, EV_POINT, 0, 0};
        while (next_range < ranges_end && compare_events(next_range, &point) < 0)
            apply_event(&s, next_range++, slot, ended);
        uint64_t thread = w->set->thread_id != NULL ? w->set->thread_id[q] : LS_NO_THREAD;
        /* The same time and thread as the last point, nothing between
         * (the kernels of one graph launch): the same answer. */
        if (seen != next_range || t != last_t || thread != last_thread) {
            answer_point(&s, thread, &last_range, &last_step);
            seen = next_range;
            last_t = t;
            last_thread = thread;
        }
        if (w->set->range_out != NULL)
            w->set->range_out[q] = last_range;
        w->set->step_out[q] = last_step;
    }
    result = 0;
done:
    for (size_t k = 0; walks != NULL && k < nsets; k++)
        point_walk_free(&walks[k]);
    free(walks);
    free(events);
    free(threads);
    free(slot);
    free(ended);
    free(s.current);
    free(s.ranges.items);
    free(s.ranges.slot);
    free(s.open_steps.items);
    free(s.open_steps.slot);
    return result;
}

/* -- groups -------------------------------------------------------------- */

/* The groups' keys: open addressing over (text, length), a slot naming
 * its group (8 B a slot, the key's text and length per group).  A key's
 * text lies in the names table (held by the records) or, for a name made
 * from a step's template, in `made` (copied once per group, not per
 * range). */
typedef struct {
    uint32_t group; /* + 1; 0: empty */
    uint32_t hash;
} ls_key_slot;

typedef struct {
    ls_key_slot *slots;
    size_t mask, used;
    const char **text; /* per group */
    uint32_t *len;     /* per group */
    size_t capacity;   /* of text and len */
    char **made;
    size_t made_count;
} ls_key_table;

static uint32_t key_hash(const char *key, size_t len)
{
    uint64_t h = 1469598103934665603ULL ^ len;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)key[i];
        h *= 1099511628211ULL;
    }
    return (uint32_t)(h ^ (h >> 32));
}

/* The slot of the key, or the empty slot where it would go. */
static ls_key_slot *key_slot(const ls_key_table *t, const char *key, size_t len, uint32_t hash)
{
    for (size_t i = hash & t->mask;; i = (i + 1) & t->mask) {
        ls_key_slot *slot = &t->slots[i];
        if (slot->group == 0)
            return slot;
        uint32_t g = slot->group - 1;
        if (slot->hash == hash && t->len[g] == len && memcmp(t->text[g], key, len) == 0)
            return slot;
    }
}

/* Room for one more key (load under one half; its text and length too).
 * 0, or -1 when memory ran out. */
static int key_room(ls_key_table *t)
{
    if (t->used == t->capacity) {
        size_t cap = t->capacity ? t->capacity * 2 : 512;
        const char **text = realloc(t->text, cap * sizeof *text);
        if (text != NULL)
            t->text = text;
        uint32_t *len = text ? realloc(t->len, cap * sizeof *len) : NULL;
        if (len == NULL)
            return -1;
        t->len = len;
        t->capacity = cap;
    }
    if (t->slots != NULL && (t->used + 1) * 2 <= t->mask + 1)
        return 0;
    size_t count = t->slots ? (t->mask + 1) * 2 : 1024;
    ls_key_slot *fresh = calloc(count, sizeof *fresh);
    if (fresh == NULL)
        return -1;
    for (size_t i = 0; t->slots != NULL && i <= t->mask; i++) {
        if (t->slots[i].group == 0)
            continue;
        size_t at = t->slots[i].hash & (count - 1);
        while (fresh[at].group != 0)
            at = (at + 1) & (count - 1);
        fresh[at] = t->slots[i];
    }
    free(t->slots);
    t->slots = fresh;
    t->mask = count - 1;
    return 0;
}

static void key_table_free(ls_key_table *t)
{
    for (size_t i = 0; i < t->made_count; i++)
        free(t->made[i]);
    free(t->made);
    free(t->text);
    free(t->len);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

static const char *name_of(const ls_range *range)
{
    const char *text = ls_names_text(range->name_id);
    return text ? text : "";
}

/* The name of step range `step` into *buf (grown as needed): its length,
 * SIZE_MAX when unknown or out of memory. */
static size_t step_name_of(const ls_range *step, char **buf, size_t *cap)
{
    size_t n = ls_range_name(step, *buf, *cap);
    if (n == SIZE_MAX || n < *cap)
        return n;
    char *bigger = realloc(*buf, n + 1);
    if (bigger == NULL)
        return SIZE_MAX;
    *buf = bigger;
    *cap = n + 1;
    return ls_range_name(step, *buf, *cap);
}

/* The context (step, -1) of every range: its own step, its parent's
 * context, or for a plain range with no parent the step open on another
 * thread when it began (the fallback of ls_attribution_points; its own
 * thread has no range open around it), asked in one sweep, and only when
 * there is a step to find (30M ranges of 8 threads without steps sweep
 * nothing).  0, or -1 when memory ran out. */
static int range_contexts(const ls_records *r, const ls_steps *steps, int32_t *context)
{
    size_t nr = r->ranges.count, na = 0;
    int any_step = 0;
    for (size_t s = 0; s < steps->count && !any_step; s++)
        any_step = steps->range_of[s] != UINT32_MAX;
    for (size_t i = 0; any_step && i < nr; i++)
        na += steps->step_of[i] < 0 && valid_parent(r, i) < 0;
    uint64_t *point_t = NULL;
    uint32_t *asked = NULL;
    int32_t *step_at = NULL;
    int result = -1;
    if (na > 0) {
        point_t = malloc(na * sizeof *point_t);
        asked = malloc(na * sizeof *asked);
        step_at = malloc(na * sizeof *step_at);
        if (!point_t || !asked || !step_at)
            goto done;
        na = 0;
        for (size_t i = 0; i < nr; i++) {
            if (steps->step_of[i] < 0 && valid_parent(r, i) < 0) {
                point_t[na] = r->ranges.items[i].start_ns;
                asked[na++] = (uint32_t)i;
            }
        }
        ls_point_set set = {point_t, NULL, na, NULL, step_at}; /* no thread's, steps only */
        if (ls_attribution_points(r, steps, &set, 1) != 0)
            goto done;
    }
    for (size_t a = 0, i = 0; i < nr; i++) {
        int32_t p = valid_parent(r, i);
        if (steps->step_of[i] >= 0)
            context[i] = steps->step_of[i];
        else if (p >= 0)
            context[i] = context[p];
        else
            context[i] = a < na && asked[a] == i ? step_at[a++] : -1;
    }
    result = 0;
done:
    free(point_t);
    free(asked);
    free(step_at);
    return result;
}

/* Appends a group (items grown as needed).  0, or -1 when memory ran out. */
static int add_group(ls_groups *out, size_t *capacity, ls_group group)
{
    if (out->count == *capacity) {
        size_t cap = *capacity ? *capacity * 2 : 64;
        ls_group *bigger = realloc(out->items, cap * sizeof *bigger);
        if (bigger == NULL)
            return -1;
        out->items = bigger;
        *capacity = cap;
    }
    out->items[out->count++] = group;
    return 0;
}

int ls_attribution_groups(const ls_records *r, const ls_steps *steps, ls_groups *out)
{
    memset(out, 0, sizeof *out);
    size_t nr = r->ranges.count, capacity = 0;
    out->group_of = malloc(room_for(nr) * sizeof *out->group_of);
    int32_t *context = malloc(room_for(nr) * sizeof *context); /* per range: its step, -1 */
    /* Per name id, the key offset and group (+ 1, 0: none) its last range
     * took: a range of the same name and offset is in that group, found
     * without hashing its text (30M ranges of a few names). */
    uint32_t id_bound = 0;
    for (size_t i = 0; i < nr; i++)
        if (r->ranges.items[i].name_id != LS_NO_NAME && r->ranges.items[i].name_id >= id_bound)
            id_bound = r->ranges.items[i].name_id + 1;
    uint32_t *memo_offset = malloc(room_for(id_bound) * sizeof *memo_offset);
    uint32_t *memo_group = calloc(room_for(id_bound), sizeof *memo_group);
    ls_key_table keys = {0};
    size_t made_cap = 64, step_cap = 64;
    char *made = malloc(made_cap); /* a name made from a step record's template */
    char *step_name = malloc(step_cap); /* a step's name, made from its template */
    int32_t named_context = -1;         /* the step whose name step_name holds */
    size_t sl = SIZE_MAX;
    int result = -1;
    if (!out->group_of || !context || !memo_offset || !memo_group || !made || !step_name ||
        range_contexts(r, steps, context) != 0)
        goto done;
    for (size_t i = 0; i < nr; i++) {
        out->group_of[i] = -1;
        if (steps->step_of[i] >= 0)
            continue;
        const ls_range *range = &r->ranges.items[i];
        /* A step record taken as a plain range here: its name made from
         * its template and index (ls_range_name). */
        const char *name = name_of(range);
        size_t len = strlen(name), offset = 0;
        int made_here = 0;
        if (range->step_index >= 0) {
            size_t n = step_name_of(range, &made, &made_cap);
            if (n != SIZE_MAX) {
                name = made;
                len = n;
                made_here = 1;
            }
        }
        if (context[i] >= 0) {
            /* A step's name is made from its template (ls_range_name). */
            if (context[i] != named_context) {
                const ls_range *step_range = &r->ranges.items[steps->range_of[context[i]]];
                sl = step_name_of(step_range, &step_name, &step_cap);
                named_context = context[i];
            }
            const char *step = step_name;
            const char *slash = memchr(name, '/', len);
            size_t hl = slash ? (size_t)(slash - name) : 0;
            if (sl == SIZE_MAX)
                offset = 0;
            else if (len > sl + 1 && memcmp(name, step, sl) == 0 && name[sl] == '/')
                offset = sl + 1;
            else if (slash && hl > 0 && hl + 1 < len && sl > hl && step[sl - hl - 1] == '_' &&
                     memcmp(step + sl - hl, name, hl) == 0)
                offset = hl + 1; /* seed style: "Step_3/Layer_0" under "Denoise_Step_3" */
        }
        uint32_t id = range->name_id;
        int memo = !made_here && id < id_bound;
        int32_t g;
        if (memo && memo_group[id] != 0 && memo_offset[id] == offset) {
            g = (int32_t)memo_group[id] - 1;
        } else {
            /* One group per key, numbered in order of first use. */
            uint32_t hash = key_hash(name + offset, len - offset);
            if (key_room(&keys) != 0)
                goto done;
            ls_key_slot *slot = key_slot(&keys, name + offset, len - offset, hash);
            if (slot->group == 0) {
                const char *key = name + offset;
                if (made_here) { /* the scratch is reused: the key keeps a copy */
                    char **more = realloc(keys.made, (keys.made_count + 1) * sizeof *more);
                    char *copy = more ? malloc(len - offset + 1) : NULL;
                    if (more != NULL)
                        keys.made = more;
                    if (copy == NULL)
                        goto done;
                    memcpy(copy, key, len - offset + 1);
                    keys.made[keys.made_count++] = copy;
                    key = copy;
                }
                int32_t p = valid_parent(r, i);
                int32_t parent = p >= 0 ? out->group_of[p] : -1; /* -1 under a step */
                if (add_group(out, &capacity, (ls_group){
                        .first_range = (uint32_t)i, .key_offset = (uint32_t)offset,
                        .parent = parent,
                        .depth = parent >= 0 ? out->items[parent].depth + 1 : 0}) != 0)
                    goto done;
                keys.text[keys.used] = key;
                keys.len[keys.used++] = (uint32_t)(len - offset);
                *slot = (ls_key_slot){(uint32_t)out->count, hash};
            }
            g = (int32_t)slot->group - 1;
            if (memo) {
                memo_offset[id] = (uint32_t)offset;
                memo_group[id] = (uint32_t)g + 1;
            }
        }
        out->group_of[i] = g;
        ls_group *group = &out->items[g];
        group->count++;
        group->host_ns += range->end_ns - range->start_ns;
        group->step_prefixed |= offset > 0;
    }
    if (out->count > 0 && out->count < capacity) { /* the doubling's slack back */
        ls_group *fitted = realloc(out->items, out->count * sizeof *fitted);
        if (fitted != NULL)
            out->items = fitted;
    }
    result = 0;
done:
    key_table_free(&keys);
    free(memo_offset);
    free(memo_group);
    free(made);
    free(step_name);
    free(context);
    return result;
}

void ls_attribution_free_groups(ls_groups *g)
{
    free(g->items);
    free(g->group_of);
    memset(g, 0, sizeof *g);
}
