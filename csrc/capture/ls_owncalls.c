/* ls_owncalls: see ls_owncalls.h. */
#include "ls_owncalls.h"

#include <stdatomic.h>

static _Thread_local int own_thread;
static _Atomic uint32_t noted[LS_OWNCALLS_KEPT];
static atomic_uint_fast32_t next_slot;

void ls_owncalls_mark_thread(void) { own_thread = 1; }

int ls_owncalls_this_thread(void) { return own_thread; }

void ls_owncalls_note(uint32_t correlation_id)
{
    if (correlation_id == 0)
        return; /* 0 is no id: never matched */
    uint32_t slot = (uint32_t)atomic_fetch_add(&next_slot, 1) % LS_OWNCALLS_KEPT;
    atomic_store(&noted[slot], correlation_id);
}

void ls_owncalls_forget(void)
{
    for (int i = 0; i < LS_OWNCALLS_KEPT; i++)
        atomic_store(&noted[i], 0);
    atomic_store(&next_slot, 0);
}

int ls_owncalls_has(uint32_t correlation_id)
{
    /* Nothing noted (the usual case: no start beside a finish): no scan
     * for each of a finish's sync records. */
    if (correlation_id == 0 || atomic_load(&next_slot) == 0)
        return 0;
    for (int i = 0; i < LS_OWNCALLS_KEPT; i++)
        if (atomic_load(&noted[i]) == correlation_id)
            return 1;
    return 0;
}
