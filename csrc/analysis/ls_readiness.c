/* ls_readiness: see ls_readiness.h. */
#include "ls_readiness.h"

#include "ls_cbids.h"
#include "ls_search.h"

#include <stdlib.h>
#include <string.h>

#define COPY_HTOD 1        /* CUPTI_ACTIVITY_MEMCPY_KIND_HTOD */
#define MEMORY_PAGEABLE 1  /* CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE */

/* A record on one thread's time line, sortable. */
typedef struct {
    uint64_t thread_id, start_ns, end_ns;
    uint32_t index;
} ls_timed;

static int compare_timed(const void *pa, const void *pb)
{
    const ls_timed *a = pa, *b = pb;
    if (a->thread_id != b->thread_id)
        return a->thread_id < b->thread_id ? -1 : 1;
    if (a->start_ns != b->start_ns)
        return a->start_ns < b->start_ns ? -1 : 1;
    if (a->end_ns != b->end_ns) /* the enclosing call first */
        return a->end_ns > b->end_ns ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

static ls_step_readiness *step_of(ls_readiness *x, int32_t s)
{
    return s >= 0 && (size_t)s < x->count ? &x->steps[s] : NULL;
}

/* splitmix64's finaliser: spreads every input bit over the output. */
static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static uint64_t op_hash(const ls_op *op)
{
    uint64_t h = mix(((uint64_t)op->name_id << 16) | ((uint64_t)op->kind << 8) | op->copy_kind);
    h = mix(h ^ (((uint64_t)op->grid_x << 32) | ((uint64_t)op->grid_y << 16) | op->grid_z));
    h = mix(h ^ (((uint64_t)op->block_x << 32) | ((uint64_t)op->block_y << 16) | op->block_z));
    h = mix(h ^ (((uint64_t)op->registers << 32) | op->shared_bytes));
    return mix(h ^ op->bytes);
}

/* Whether op_hash gives a and b the same value (the fields it reads). */
static int same_hash_inputs(const ls_op *a, const ls_op *b)
{
    return a->name_id == b->name_id && a->kind == b->kind && a->copy_kind == b->copy_kind &&
           a->bytes == b->bytes && ls_op_same_geometry(a, b);
}

/* Graph replays and the host time between them. */
static int count_replays(const ls_records *r, const int32_t *api_step, ls_readiness *x)
{
    size_t n = r->apis.count, runtime = 0, driver = 0;
    uint64_t calls[2] = {0, 0}; /* runtime, driver */
    uint8_t role = 0;
    for (size_t i = 0; i < n; i++) {
        const ls_api *a = &r->apis.items[i];
        if (i == 0 || a->cbid != a[-1].cbid || a->domain != a[-1].domain) /* calls repeat */
            role = ls_cbid_role_of_record(a->domain, a->cbid);
        if (role & LS_ROLE_GRAPH)
            *(a->domain ? &driver : &runtime) += 1;
        else if (role & LS_ROLE_LAUNCH)
            calls[a->domain != 0]++;
    }
    /* one domain: a driver call inside a runtime one is the same launch */
    x->total.launch_calls = calls[calls[0] > 0 ? 0 : 1];
    uint32_t domain = runtime > 0 ? 0 : 1;
    size_t m = runtime > 0 ? runtime : driver;
    ls_timed *launches = malloc((m ? m : 1) * sizeof *launches);
    if (launches == NULL)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < n && k < m; i++) {
        const ls_api *a = &r->apis.items[i];
        if (a->domain == domain && (ls_cbid_role_of_record(a->domain, a->cbid) & LS_ROLE_GRAPH))
            launches[k++] = (ls_timed){a->thread_id, a->start_ns, a->end_ns, (uint32_t)i};
    }
    qsort(launches, k, sizeof *launches, compare_timed);
    for (size_t i = 0; i < k; i++) {
        ls_step_readiness *s = step_of(x, api_step[launches[i].index]);
        x->total.graph_launches++;
        if (s != NULL)
            s->graph_launches++;
        if (i == 0 || launches[i - 1].thread_id != launches[i].thread_id)
            continue;
        uint64_t prev_end = launches[i - 1].end_ns, start = launches[i].start_ns;
        uint64_t host = start > prev_end ? start - prev_end : 0;
        x->total.replay_host_ns += host;
        x->total.replay_pairs++;
        if (s != NULL) {
            s->replay_host_ns += host;
            s->replay_pairs++;
        }
    }
    free(launches);
    return 0;
}

static void note_memory_call(ls_step_readiness *s, uint8_t role, uint32_t index)
{
    if (role & LS_ROLE_STREAM_ORDERED) {
        s->stream_ordered++;
        return;
    }
    if (s->memory_calls++ == 0)
        s->first_memory_call = index;
}

/* Memory calls, a driver call inside a runtime one counted once. */
static int count_memory_calls(const ls_records *r, const int32_t *call_step, ls_readiness *x)
{
    size_t n = r->calls.count, m = 0;
    ls_timed *calls = malloc((n ? n : 1) * sizeof *calls);
    if (calls == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const ls_call *c = &r->calls.items[i];
        if (c->role & LS_ROLE_MEMORY)
            calls[m++] = (ls_timed){c->thread_id, c->enter_ns, c->exit_ns, (uint32_t)i};
    }
    qsort(calls, m, sizeof *calls, compare_timed);
    const ls_timed *outer = NULL;
    for (size_t i = 0; i < m; i++) {
        const ls_timed *c = &calls[i];
        if (outer != NULL && outer->thread_id == c->thread_id && c->end_ns <= outer->end_ns)
            continue; /* inside the previous one: the same allocation */
        outer = c;
        uint8_t role = r->calls.items[c->index].role;
        note_memory_call(&x->total, role, c->index);
        ls_step_readiness *s = step_of(x, call_step[c->index]);
        if (s != NULL)
            note_memory_call(s, role, c->index);
    }
    free(calls);
    return 0;
}

typedef struct {
    uint32_t correlation_id, call;
} ls_corr_call;

static int compare_corr(const void *pa, const void *pb)
{
    const ls_corr_call *a = pa, *b = pb;
    if (a->correlation_id != b->correlation_id)
        return a->correlation_id < b->correlation_id ? -1 : 1;
    return (a->call > b->call) - (a->call < b->call);
}

/* The first recorded call with this correlation id, or LS_READINESS_NONE. */
static int64_t call_of(const ls_corr_call *keys, size_t n, uint32_t correlation_id)
{
    ls_corr_call first = {correlation_id, 0}; /* calls are unsigned: no key sorts before it */
    size_t lo = ls_lower_bound(keys, n, sizeof *keys, &first, compare_corr);
    return lo < n && keys[lo].correlation_id == correlation_id ? (int64_t)keys[lo].call
                                                               : LS_READINESS_NONE;
}

static void note_op(ls_step_readiness *s, const ls_op *op, uint64_t hash, size_t index,
                    const ls_corr_call *keys, size_t nkeys, const ls_call *calls)
{
    s->ops++;
    s->replay_ops += op->kind == LS_OP_GRAPH;
    s->signature += hash;
    if (op->kind != LS_OP_MEMCPY || op->copy_kind != COPY_HTOD ||
        op->host_memory != MEMORY_PAGEABLE)
        return;
    int64_t call = call_of(keys, nkeys, op->correlation_id);
    if (s->pageable_copies++ == 0) {
        s->first_pageable_op = (int64_t)index;
        s->first_pageable_call = call;
    }
    if (call != LS_READINESS_NONE) {
        const ls_call *c = &calls[call];
        s->pageable_call_ns += c->exit_ns > c->enter_ns ? c->exit_ns - c->enter_ns : 0;
    }
}

static int scan_ops(const ls_records *r, const int32_t *op_step, ls_readiness *x)
{
    size_t n = r->calls.count;
    ls_corr_call *keys = malloc((n ? n : 1) * sizeof *keys);
    if (keys == NULL)
        return -1;
    for (size_t i = 0; i < n; i++)
        keys[i] = (ls_corr_call){r->calls.items[i].correlation_id, (uint32_t)i};
    qsort(keys, n, sizeof *keys, compare_corr);
    uint64_t hash = 0;
    for (size_t i = 0; i < r->ops.count; i++) {
        const ls_op *op = &r->ops.items[i];
        if (i == 0 || !same_hash_inputs(op, op - 1)) /* launches repeat their shape */
            hash = op_hash(op);
        note_op(&x->total, op, hash, i, keys, n, r->calls.items);
        ls_step_readiness *s = step_of(x, op_step[i]);
        if (s != NULL)
            note_op(s, op, hash, i, keys, n, r->calls.items);
    }
    free(keys);
    return 0;
}

static void reset(ls_step_readiness *s)
{
    memset(s, 0, sizeof *s);
    s->first_memory_call = s->first_pageable_op = s->first_pageable_call = LS_READINESS_NONE;
}

int ls_readiness_build(const ls_records *r, size_t step_count, const int32_t *op_step,
                       const int32_t *call_step, const int32_t *api_step, ls_readiness *out)
{
    memset(out, 0, sizeof *out);
    out->steps = malloc((step_count ? step_count : 1) * sizeof *out->steps);
    if (out->steps == NULL)
        return -1;
    out->count = step_count;
    for (size_t s = 0; s < step_count; s++)
        reset(&out->steps[s]);
    reset(&out->total);
    if (count_replays(r, api_step, out) != 0 || count_memory_calls(r, call_step, out) != 0 ||
        scan_ops(r, op_step, out) != 0) {
        ls_readiness_free(out);
        return -1;
    }
    /* Replays traced whole whose launch calls are not known as graph launches
     * (not recorded, or recorded with no call name): the replay ops say. */
    for (size_t s = 0; s < step_count; s++)
        if (out->steps[s].graph_launches == 0)
            out->steps[s].graph_launches = out->steps[s].replay_ops;
    if (out->total.graph_launches == 0)
        out->total.graph_launches = out->total.replay_ops;
    return 0;
}

void ls_readiness_free(ls_readiness *x)
{
    free(x->steps);
    memset(x, 0, sizeof *x);
}
