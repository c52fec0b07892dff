/* ls_launches: see ls_launches.h. */
#include "ls_launches.h"

#include "ls_slots.h"

#include <stdatomic.h>

typedef struct {
    uint64_t start_ns;
    uint32_t correlation_id;
    uint32_t cbid;
    uint32_t domain;
    uint32_t reserved;
} ls_launch;

/* 64K launches (1.5 MiB) a chunk, 4 up front: room for 256K launches before
 * the first range exit grows it; 64M at most. */
static ls_slots store = LS_SLOTS_INIT(ls_launch, 16, 4, 1024);
static int keep_records;
static atomic_uint_fast64_t seen;

int ls_launches_reset(int keep)
{
    keep_records = keep;
    atomic_store(&seen, 0);
    return ls_slots_reset(&store);
}

void ls_launches_record(uint32_t domain, uint32_t cbid, uint32_t correlation_id,
                        uint64_t start_ns)
{
    atomic_fetch_add_explicit(&seen, 1, memory_order_relaxed);
    if (!keep_records)
        return;
    size_t index;
    ls_launch *l = ls_slots_claim(&store, &index);
    if (l == NULL)
        return;
    l->start_ns = start_ns;
    l->correlation_id = correlation_id;
    l->cbid = cbid;
    l->domain = domain;
}

uint64_t ls_launches_seen(void) { return atomic_load_explicit(&seen, memory_order_relaxed); }

int ls_launches_reserve(void) { return ls_slots_reserve(&store); }

uint64_t ls_launches_move_to(ls_api_array *out)
{
    size_t n = ls_slots_stored(&store);
    uint64_t lost = ls_slots_dropped(&store);
    for (size_t i = 0; i < n; i++) {
        const ls_launch *l = ls_slots_at(&store, i);
        ls_api *api = ls_apis_append(out);
        if (api == NULL) {
            lost += n - i;
            break;
        }
        api->start_ns = api->end_ns = l->start_ns;
        api->correlation_id = l->correlation_id;
        api->cbid = l->cbid;
        api->domain = l->domain;
    }
    ls_launches_reset(keep_records);
    return lost;
}
