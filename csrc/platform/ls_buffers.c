/* ls_buffers: see ls_buffers.h. */
#include "ls_buffers.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define LS_BUFFER_ALIGN 8

typedef struct {
    uint8_t *buffer;
    size_t valid_size;
} ls_ready_buffer;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t buffer_bytes = 4u << 20;
static size_t max_buffers;
static size_t allocated;      /* buffers ever allocated (<= max_buffers) */
static uint8_t **free_list;   /* capacity max_buffers */
static size_t free_count;
static ls_ready_buffer *ready; /* capacity max_buffers */
static size_t ready_count;
static atomic_size_t ready_hint;
static atomic_uint_fast64_t refused;
static atomic_uint_fast64_t foreign;
static atomic_int zeroed; /* buffers are handed out all zeros */
static atomic_int holding; /* between profiles in graph-level mode: no new buffer */
static uint8_t **owned;    /* every buffer allocated, to tell a foreign one */

static void *alloc_buffer(void)
{
    /* calloc's alignment (16 on x86-64, 8 at least on every 64-bit ABI) is
     * what CUPTI asks for; fresh pages from it cost no clearing. */
    _Static_assert(_Alignof(max_align_t) >= LS_BUFFER_ALIGN, "calloc alignment");
    return calloc(1, buffer_bytes);
}

int ls_buffers_configure(size_t bytes, size_t preallocate, size_t cap, int zero)
{
    if (bytes < 4096 || cap == 0 || preallocate > cap)
        return -1;
    pthread_mutex_lock(&pool_lock);
    int result = 0;
    /* A pool already in use keeps its buffers: their size cannot change. */
    if (allocated == 0) {
        uint8_t **fl = malloc(cap * sizeof *fl);
        ls_ready_buffer *rd = malloc(cap * sizeof *rd);
        uint8_t **own = malloc(cap * sizeof *own);
        if (fl == NULL || rd == NULL || own == NULL) {
            free(fl);
            free(rd);
            free(own);
            result = -1;
            goto done;
        }
        free(free_list);
        free(ready);
        free(owned);
        free_list = fl;
        ready = rd;
        owned = own;
        buffer_bytes = bytes;
        max_buffers = cap;
    }
    while (allocated < preallocate && allocated < max_buffers) {
        uint8_t *b = alloc_buffer();
        if (b == NULL) {
            result = -1;
            break;
        }
        free_list[free_count++] = b;
        owned[allocated++] = b;
    }
    /* Buffers used while clearing was off may hold old records. */
    if (zero && !atomic_load(&zeroed))
        for (size_t i = 0; i < free_count; i++)
            memset(free_list[i], 0, buffer_bytes);
done:
    atomic_store(&refused, 0);
    atomic_store(&zeroed, zero);
    pthread_mutex_unlock(&pool_lock);
    return result;
}

void ls_buffers_request(uint8_t **buffer, size_t *size, size_t *max_records)
{
    uint8_t *b = NULL;
    pthread_mutex_lock(&pool_lock);
    if (free_count > 0) {
        b = free_list[--free_count];
    } else if (allocated < max_buffers && !atomic_load(&holding)) {
        /* The only allocation on CUPTI's side: CUPTI's designated moment to
         * allocate, rare (one buffer holds thousands of records), bounded. */
        b = alloc_buffer();
        if (b != NULL)
            owned[allocated++] = b;
    }
    pthread_mutex_unlock(&pool_lock);
    if (b == NULL)
        atomic_fetch_add(&refused, 1);
    *buffer = b;
    *size = b ? buffer_bytes : 0;
    *max_records = 0; /* as many as fit */
}

void ls_buffers_complete(uint8_t *buffer, size_t valid_size)
{
    if (buffer == NULL)
        return;
    pthread_mutex_lock(&pool_lock);
    /* A buffer another tool's callbacks handed CUPTI (torch.profiler's,
     * registered in between) may come back here once ours are registered
     * again: not ours to reuse or free; its records are not this window's. */
    size_t i = 0;
    while (i < allocated && owned[i] != buffer)
        i++;
    if (i == allocated) {
        atomic_fetch_add(&foreign, 1);
        pthread_mutex_unlock(&pool_lock);
        return;
    }
    /* ready has room for every buffer the pool owns, so this cannot overflow. */
    ready[ready_count++] = (ls_ready_buffer){buffer, valid_size};
    atomic_store(&ready_hint, ready_count);
    pthread_mutex_unlock(&pool_lock);
}

size_t ls_buffers_ready(void) { return atomic_load_explicit(&ready_hint, memory_order_relaxed); }

void ls_buffers_drain(ls_buffer_visitor visit, void *ctx)
{
    for (;;) {
        ls_ready_buffer item;
        pthread_mutex_lock(&pool_lock);
        if (ready_count == 0) {
            pthread_mutex_unlock(&pool_lock);
            return;
        }
        item = ready[0];
        memmove(ready, ready + 1, (ready_count - 1) * sizeof *ready);
        ready_count--;
        atomic_store(&ready_hint, ready_count);
        pthread_mutex_unlock(&pool_lock);

        /* Parse without the lock: CUPTI may complete another buffer meanwhile. */
        visit(item.buffer, item.valid_size, ctx);
        /* All of it: CUPTI may have written past the valid size (a record
         * begun but not finished); on this thread, not the launching one. */
        if (atomic_load(&zeroed))
            memset(item.buffer, 0, buffer_bytes);

        pthread_mutex_lock(&pool_lock);
        free_list[free_count++] = item.buffer;
        pthread_mutex_unlock(&pool_lock);
    }
}

uint64_t ls_buffers_refused(void) { return atomic_load(&refused); }

uint64_t ls_buffers_foreign(void) { return atomic_load(&foreign); }

void ls_buffers_hold(int on) { atomic_store(&holding, on ? 1 : 0); }

static void discard(uint8_t *buffer, size_t valid_size, void *ctx)
{
    (void)buffer;
    (void)valid_size;
    (void)ctx;
}

void ls_buffers_discard_ready(void) { ls_buffers_drain(discard, NULL); }

size_t ls_buffers_allocated_bytes(void)
{
    pthread_mutex_lock(&pool_lock);
    size_t bytes = allocated * buffer_bytes;
    pthread_mutex_unlock(&pool_lock);
    return bytes;
}
