/* ls_launches: see ls_launches.h. */
#include "ls_launches.h"

#include "ls_slots.h"

#include <pthread.h>
#include <stdatomic.h>

typedef struct {
    uint64_t start_ns;
    uint64_t thread_id; /* pthread_self(): ties the launch to its thread's ranges */
    uint32_t correlation_id;
    uint32_t cbid;
    uint32_t domain;
    uint32_t reserved;
} ls_launch;

/* 64K launches (2 MiB) a chunk, 4 up front: room for 256K launches before
 * the first range exit grows it; 64M at most. */
static ls_slots store = LS_SLOTS_INIT(ls_launch, 16, 4, 1024);
static int keep_records;

/* Launch counts per thread: open addressing on the thread id, claimed with
 * a compare-and-swap; slot LS_THREADS is the shared overflow count. */
#define LS_THREADS 256
static struct {
    atomic_uint_fast64_t thread_id; /* 0: free */
    atomic_uint_fast64_t count;
} per_thread[LS_THREADS + 1];

static atomic_uint_fast64_t *count_of(uint64_t thread_id)
{
    uint64_t h = thread_id * 0x9E3779B97F4A7C15ULL;
    for (unsigned probe = 0; probe < LS_THREADS; probe++) {
        unsigned i = (unsigned)((h >> 56) + probe) % LS_THREADS;
        uint_fast64_t owner = atomic_load_explicit(&per_thread[i].thread_id, memory_order_acquire);
        if (owner == thread_id)
            return &per_thread[i].count;
        if (owner == 0) {
            uint_fast64_t expected = 0;
            if (atomic_compare_exchange_strong(&per_thread[i].thread_id, &expected, thread_id) ||
                expected == thread_id)
                return &per_thread[i].count;
        }
    }
    return &per_thread[LS_THREADS].count;
}

int ls_launches_reset(int keep)
{
    keep_records = keep;
    for (unsigned i = 0; i <= LS_THREADS; i++) {
        atomic_store(&per_thread[i].thread_id, 0);
        atomic_store(&per_thread[i].count, 0);
    }
    return ls_slots_reset(&store);
}

/* Kept across resets: it is a mark on CUPTI's one sequence of ids. */
static _Atomic uint32_t latest_id;

int ls_launch_id_later(uint32_t a, uint32_t b) { return (int32_t)(a - b) > 0; }

void ls_launch_id_raise(uint32_t *mark, uint32_t id)
{
    if (id != 0 && (*mark == 0 || ls_launch_id_later(id, *mark)))
        *mark = id;
}

uint32_t ls_launches_latest_id(void)
{
    return atomic_load_explicit(&latest_id, memory_order_acquire);
}

void ls_launches_record(uint32_t domain, uint32_t cbid, uint32_t correlation_id,
                        uint64_t start_ns)
{
    uint32_t seen = atomic_load_explicit(&latest_id, memory_order_relaxed);
    while (ls_launch_id_later(correlation_id, seen) &&
           !atomic_compare_exchange_weak_explicit(&latest_id, &seen, correlation_id,
                                                  memory_order_release, memory_order_relaxed))
        ; /* another thread's later id won: seen holds it now */
    uint64_t self = (uint64_t)pthread_self();
    atomic_fetch_add_explicit(count_of(self), 1, memory_order_relaxed);
    if (!keep_records)
        return;
    size_t index;
    ls_launch *l = ls_slots_claim(&store, &index);
    if (l == NULL)
        return;
    l->start_ns = start_ns;
    l->thread_id = self;
    l->correlation_id = correlation_id;
    l->cbid = cbid;
    l->domain = domain;
}

uint64_t ls_launches_seen_by(uint64_t thread_id)
{
    return atomic_load_explicit(count_of(thread_id), memory_order_relaxed);
}

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
        api->thread_id = l->thread_id;
        api->correlation_id = l->correlation_id;
        api->cbid = l->cbid;
        api->domain = l->domain;
    }
    ls_launches_reset(keep_records);
    return lost;
}
