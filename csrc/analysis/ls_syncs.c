/* ls_syncs: see ls_syncs.h. */
#include "ls_search.h"
#include "ls_syncs.h"

#include "ls_cbids.h"

#include <stdlib.h>
#include <string.h>

#define MEMORY_PAGEABLE 1 /* CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE */

typedef struct {
    uint32_t correlation_id;
    uint32_t op;
} ls_corr_key;

static int compare_corr(const void *pa, const void *pb)
{
    const ls_corr_key *a = pa, *b = pb;
    return (a->correlation_id > b->correlation_id) - (a->correlation_id < b->correlation_id);
}

/* The memcpy op launched by `correlation_id`, or NULL. */
static const ls_op *find_copy(const ls_records *r, const ls_corr_key *keys, size_t n,
                              uint32_t correlation_id)
{
    ls_corr_key want = {correlation_id, 0};
    size_t lo = ls_lower_bound(keys, n, sizeof *keys, &want, compare_corr);
    return lo < n && keys[lo].correlation_id == correlation_id ? &r->ops.items[keys[lo].op]
                                                               : NULL;
}

/* 1 when a CUpti_ActivityMemcpyKind has a host side (HtoD, DtoH, HtoA,
 * AtoH, HtoH): ROCm traces name the side "Host", a memory kind unknown to
 * CUPTI, so host_memory alone misses their blocking copies. */
static int has_host_side(uint8_t copy_kind)
{
    return copy_kind == 1 || copy_kind == 2 || copy_kind == 3 || copy_kind == 4 ||
           copy_kind == 9;
}

/* 1 when the call made the host wait; counts async copies it cannot judge. */
static int waited(const ls_call *c, const ls_op *copy, uint64_t *unknown_copies)
{
    switch (LS_ROLE_WAIT_CLASS(c->role)) {
    case LS_WAIT_NONE:
        return 0;
    case LS_WAIT_COPY_ASYNC:
        if (copy == NULL) {
            (*unknown_copies)++;
            return 0;
        }
        return copy->host_memory == MEMORY_PAGEABLE;
    case LS_WAIT_COPY: /* device to device does not wait */
        return copy == NULL || copy->host_memory != 0 || has_host_side(copy->copy_kind);
    default:
        return 1;
    }
}

static const ls_call *sort_calls; /* qsort has no context argument */

static int compare_thread_time(const void *pa, const void *pb)
{
    const ls_call *a = &sort_calls[*(const uint32_t *)pa], *b = &sort_calls[*(const uint32_t *)pb];
    if (a->thread_id != b->thread_id)
        return a->thread_id < b->thread_id ? -1 : 1;
    if (a->enter_ns != b->enter_ns)
        return a->enter_ns < b->enter_ns ? -1 : 1;
    return (*(const uint32_t *)pa > *(const uint32_t *)pb) - (*(const uint32_t *)pa < *(const uint32_t *)pb);
}

static int same_stack(const ls_call *a, const ls_call *b)
{
    return a->frame_count == b->frame_count &&
           memcmp(a->frames, b->frames, a->frame_count * sizeof(ls_frame)) == 0;
}

/* `next` continues the sync whose latest call is `last`: same thread, same
 * stack, no launch of that thread in between (the only launch allowed is
 * `last`'s own), and either `next` runs inside `last` (the runtime's
 * cudaStreamSynchronize calls cuStreamSynchronize) or `last` is a copy and
 * `next` waits for it (torch's `.item()`: a copy, then a stream sync).  So
 * the copy of a second `.item()` starts a new sync, and so does each of
 * three `torch.cuda.synchronize()` in a row. */
static int continues(const ls_call *last, const ls_call *next)
{
    uint64_t expected = last->launches_before + ((last->role & LS_ROLE_LAUNCH) ? 1 : 0);
    int nested = next->enter_ns >= last->enter_ns && next->exit_ns <= last->exit_ns;
    ls_wait_class before = LS_ROLE_WAIT_CLASS(last->role);
    int after_copy = before == LS_WAIT_COPY || before == LS_WAIT_COPY_ASYNC;
    if (!nested && ((next->role & LS_ROLE_LAUNCH) || !after_copy))
        return 0;
    return last->thread_id == next->thread_id && next->launches_before == expected &&
           same_stack(last, next);
}

int ls_syncs_build(const ls_records *r, ls_syncs *out)
{
    memset(out, 0, sizeof *out);
    size_t n = r->calls.count;
    ls_corr_key *keys = malloc((r->ops.count ? r->ops.count : 1) * sizeof *keys);
    uint32_t *order = malloc((n ? n : 1) * sizeof *order);
    out->sync_of_call = malloc((n ? n : 1) * sizeof *out->sync_of_call);
    out->items = malloc((n ? n : 1) * sizeof *out->items);
    if (!keys || !order || !out->sync_of_call || !out->items) {
        free(keys);
        free(order);
        ls_syncs_free(out);
        return -1;
    }
    size_t copies = 0;
    for (size_t i = 0; n > 0 && i < r->ops.count; i++) /* no call: no copy to judge */
        if (r->ops.items[i].kind == LS_OP_MEMCPY)
            keys[copies++] = (ls_corr_key){r->ops.items[i].correlation_id, (uint32_t)i};
    qsort(keys, copies, sizeof *keys, compare_corr);

    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        const ls_call *c = &r->calls.items[i];
        out->sync_of_call[i] = -1;
        if (waited(c, find_copy(r, keys, copies, c->correlation_id), &out->unknown_copies))
            order[kept++] = (uint32_t)i;
    }
    sort_calls = r->calls.items;
    qsort(order, kept, sizeof *order, compare_thread_time);

    ls_sync *w = NULL;
    const ls_call *last = NULL;
    uint64_t covered_to = 0; /* end of the union so far */
    for (size_t k = 0; k < kept; k++) {
        const ls_call *c = &r->calls.items[order[k]];
        if (w == NULL || !continues(last, c)) {
            w = &out->items[out->count++];
            *w = (ls_sync){c->enter_ns, c->exit_ns, 0, c->thread_id, order[k], 0, -1,
                           LS_ROLE_WAIT_CLASS(c->role)};
            covered_to = c->enter_ns;
        }
        if (c->exit_ns > covered_to) {
            w->blocked_ns += c->exit_ns - (c->enter_ns > covered_to ? c->enter_ns : covered_to);
            covered_to = c->exit_ns;
        }
        if (c->exit_ns > w->end_ns)
            w->end_ns = c->exit_ns;
        w->call_count++;
        out->sync_of_call[order[k]] = (int32_t)(out->count - 1);
        last = c;
    }
    free(keys);
    free(order);
    return 0;
}

void ls_syncs_free(ls_syncs *w)
{
    free(w->items);
    free(w->sync_of_call);
    memset(w, 0, sizeof *w);
}
