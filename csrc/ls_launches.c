/* ls_launches: see ls_launches.h. */
#include "ls_launches.h"

#include <stdatomic.h>
#include <stdlib.h>

#define LS_CHUNK_BITS 16
#define LS_CHUNK_SIZE ((size_t)1 << LS_CHUNK_BITS) /* 64K launches, 1 MiB */
#define LS_MAX_CHUNKS 1024                          /* 64M launches at most */

typedef struct {
    uint64_t start_ns;
    uint32_t correlation_id;
    uint32_t cbid;
    uint32_t domain;
    uint32_t reserved;
} ls_launch;

static ls_launch *chunks[LS_MAX_CHUNKS];
static atomic_size_t chunk_count; /* chunks[0..chunk_count) are allocated */
static atomic_size_t next_slot;
static atomic_uint_fast64_t dropped;

#define LS_START_CHUNKS 4 /* room for 256K launches before the first step exit */

int ls_launches_reset(void)
{
    atomic_store(&next_slot, 0);
    atomic_store(&dropped, 0);
    size_t have = atomic_load(&chunk_count);
    for (; have < LS_START_CHUNKS; have++) {
        if (chunks[have] == NULL && (chunks[have] = malloc(LS_CHUNK_SIZE * sizeof(ls_launch))) == NULL)
            return -1;
        atomic_store_explicit(&chunk_count, have + 1, memory_order_release);
    }
    return 0;
}

void ls_launches_record(uint32_t domain, uint32_t cbid, uint32_t correlation_id,
                        uint64_t start_ns)
{
    size_t slot = atomic_fetch_add_explicit(&next_slot, 1, memory_order_relaxed);
    size_t chunk = slot >> LS_CHUNK_BITS;
    if (chunk >= atomic_load_explicit(&chunk_count, memory_order_acquire)) {
        atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
        return;
    }
    ls_launch *l = &chunks[chunk][slot & (LS_CHUNK_SIZE - 1)];
    l->start_ns = start_ns;
    l->correlation_id = correlation_id;
    l->cbid = cbid;
    l->domain = domain;
}

int ls_launches_reserve(void)
{
    size_t have = atomic_load(&chunk_count);
    size_t used = atomic_load(&next_slot);
    while (have < LS_MAX_CHUNKS && used + LS_CHUNK_SIZE / 2 >= have * LS_CHUNK_SIZE) {
        if (chunks[have] == NULL) {
            chunks[have] = malloc(LS_CHUNK_SIZE * sizeof(ls_launch));
            if (chunks[have] == NULL)
                return -1;
        }
        /* Publish the chunk only after its pointer is in place. */
        atomic_store_explicit(&chunk_count, ++have, memory_order_release);
    }
    return 0;
}

uint64_t ls_launches_move_to(ls_api_array *out)
{
    size_t used = atomic_load(&next_slot);
    size_t stored = atomic_load(&chunk_count) * LS_CHUNK_SIZE;
    size_t n = used < stored ? used : stored;
    uint64_t lost = atomic_load(&dropped);
    for (size_t i = 0; i < n; i++) {
        const ls_launch *l = &chunks[i >> LS_CHUNK_BITS][i & (LS_CHUNK_SIZE - 1)];
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
    atomic_store(&next_slot, 0);
    return lost;
}
