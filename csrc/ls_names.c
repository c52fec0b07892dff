/* ls_names: see ls_names.h.  Open addressing over a power-of-two table of
 * ids; the entries live in fixed chunks that never move, so a reader needs
 * no lock (an id is published with a release store of the count after its
 * entry is written).  Interning takes one mutex: the Python thread interns
 * range names while loopscope's worker thread interns kernel names. */
#define _POSIX_C_SOURCE 200809L
#include "ls_names.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *text;
    size_t len;
    uint64_t hash;
    void *nvtx_handle;
} ls_name;

#define LS_CHUNK_BITS 10
#define LS_CHUNK (1u << LS_CHUNK_BITS)
#define LS_MAX_CHUNKS 4096 /* 4M names */

static ls_name *chunks[LS_MAX_CHUNKS];
static atomic_uint_fast32_t name_count;
static uint32_t *slots; /* id + 1, 0 = empty; under lock */
static size_t slot_count;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* A child forked while another thread interned would find the lock taken. */
static void reset_lock_in_child(void) { pthread_mutex_init(&lock, NULL); }
static void init_once(void) { pthread_atfork(NULL, NULL, reset_lock_in_child); }

static ls_name *entry(uint32_t id) { return &chunks[id >> LS_CHUNK_BITS][id & (LS_CHUNK - 1)]; }

static uint64_t fnv1a(const char *text, size_t len)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)text[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static int rehash(size_t new_slot_count, uint32_t count)
{
    uint32_t *fresh = calloc(new_slot_count, sizeof *fresh);
    if (fresh == NULL)
        return -1;
    for (uint32_t id = 0; id < count; id++) {
        size_t i = entry(id)->hash & (new_slot_count - 1);
        while (fresh[i] != 0)
            i = (i + 1) & (new_slot_count - 1);
        fresh[i] = id + 1;
    }
    free(slots);
    slots = fresh;
    slot_count = new_slot_count;
    return 0;
}

static uint32_t intern_locked(const char *text, size_t len)
{
    uint64_t hash = fnv1a(text, len);
    uint32_t count = (uint32_t)atomic_load_explicit(&name_count, memory_order_relaxed);
    if (slot_count != 0) {
        size_t i = hash & (slot_count - 1);
        while (slots[i] != 0) {
            const ls_name *n = entry(slots[i] - 1);
            if (n->hash == hash && n->len == len && memcmp(n->text, text, len) == 0)
                return slots[i] - 1;
            i = (i + 1) & (slot_count - 1);
        }
    }
    if (count == (uint32_t)LS_MAX_CHUNKS * LS_CHUNK)
        return LS_NO_NAME;
    /* Keep the load factor under one half. */
    if ((size_t)(count + 1) * 2 > slot_count && rehash(slot_count ? slot_count * 2 : 64, count) != 0)
        return LS_NO_NAME;
    uint32_t chunk = count >> LS_CHUNK_BITS;
    if (chunks[chunk] == NULL && (chunks[chunk] = calloc(LS_CHUNK, sizeof(ls_name))) == NULL)
        return LS_NO_NAME;
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return LS_NO_NAME;
    memcpy(copy, text, len);
    copy[len] = '\0';
    uint32_t id = count;
    *entry(id) = (ls_name){copy, len, hash, NULL};
    size_t i = hash & (slot_count - 1);
    while (slots[i] != 0)
        i = (i + 1) & (slot_count - 1);
    slots[i] = id + 1;
    atomic_store_explicit(&name_count, count + 1, memory_order_release);
    return id;
}

uint32_t ls_names_intern(const char *text, size_t len)
{
    pthread_once(&once, init_once);
    pthread_mutex_lock(&lock);
    uint32_t id = intern_locked(text, len);
    pthread_mutex_unlock(&lock);
    return id;
}

static int known(uint32_t id)
{
    return id < (uint32_t)atomic_load_explicit(&name_count, memory_order_acquire);
}

const char *ls_names_text(uint32_t id) { return known(id) ? entry(id)->text : NULL; }

void *ls_names_nvtx_handle(uint32_t id) { return known(id) ? entry(id)->nvtx_handle : NULL; }

void ls_names_set_nvtx_handle(uint32_t id, void *handle)
{
    if (known(id))
        entry(id)->nvtx_handle = handle;
}

uint32_t ls_names_count(void) { return (uint32_t)atomic_load_explicit(&name_count, memory_order_acquire); }
