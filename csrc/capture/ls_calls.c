/* ls_calls: see ls_calls.h. */
#include "ls_calls.h"

#include "ls_pystack.h"
#include "ls_slots.h"

#include <pthread.h>
#include <stdatomic.h>

/* 2K calls (600 KiB) a chunk, one up front; 2M calls at most. */
static ls_slots store = LS_SLOTS_INIT(ls_call, 11, 1, 1024);

/* Tokens carry the epoch of the store that issued them (high 32 bits) over
 * index + 1 (low 32 bits), so a token kept across a reset (strict mode's
 * noted wait, when a profile starts or stops) never names another call. */
static atomic_uint_fast32_t epoch;

static void next_epoch(void)
{
    uint_fast32_t next = (atomic_load(&epoch) + 1) & 0xffffffffu;
    atomic_store(&epoch, next ? next : 1);
}

int ls_calls_reset(void)
{
    ls_pystack_prepare(); /* the stacks these calls will read */
    next_epoch();
    return ls_slots_reset(&store);
}

uint64_t ls_calls_enter(uint32_t domain, uint32_t cbid, uint8_t role, uint32_t correlation_id,
                        uint64_t enter_ns, uint64_t launches_before)
{
    size_t index;
    ls_call *c = ls_slots_claim(&store, &index);
    if (c == NULL)
        return 0;
    c->enter_ns = enter_ns;
    c->thread_id = (uint64_t)pthread_self();
    c->launches_before = launches_before;
    c->correlation_id = correlation_id;
    c->cbid = cbid;
    c->domain = (uint8_t)domain;
    c->role = role;
    c->frame_count = (uint8_t)ls_pystack_capture(c->frames, LS_CALL_FRAMES);
    return ((uint64_t)atomic_load_explicit(&epoch, memory_order_relaxed) << 32) | (index + 1);
}

const ls_call *ls_calls_get(uint64_t token)
{
    uint64_t index = token & 0xffffffffu;
    if (index == 0 || (token >> 32) != atomic_load_explicit(&epoch, memory_order_relaxed) ||
        index > ls_slots_stored(&store))
        return NULL;
    return ls_slots_at(&store, (size_t)(index - 1));
}

const ls_call *ls_calls_exit(uint64_t token, uint64_t exit_ns)
{
    ls_call *c = (ls_call *)ls_calls_get(token);
    if (c != NULL)
        c->exit_ns = exit_ns > c->enter_ns ? exit_ns : c->enter_ns;
    return c;
}

int ls_calls_reserve(void) { return ls_slots_reserve(&store); }

uint64_t ls_calls_move_to(ls_call_array *out, uint64_t stop_ns)
{
    size_t n = ls_slots_stored(&store);
    uint64_t lost = ls_slots_dropped(&store);
    for (size_t i = 0; i < n; i++) {
        ls_call *c = ls_calls_append(out);
        if (c == NULL) {
            lost += n - i;
            break;
        }
        *c = *(const ls_call *)ls_slots_at(&store, i);
        if (c->exit_ns == 0)
            c->exit_ns = stop_ns > c->enter_ns ? stop_ns : c->enter_ns;
    }
    next_epoch();
    ls_slots_reset(&store);
    return lost;
}
