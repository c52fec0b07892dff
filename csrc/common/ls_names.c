/* ls_names: see ls_names.h.  Open addressing (linear probing, deletion by
 * backward shift) over a power-of-two table of ids; entries in fixed chunks
 * indexed by id (a fixed directory of chunk pointers: an entry never
 * moves), freed ids on a stack; text in arena chunks that count their live
 * names.  Everything that changes is changed under `lock`; what the
 * lock-free readers look at (the directory, `top`, an entry's refs and tag)
 * is atomic, the rest of an entry is written before its id is handed out. */
#define _POSIX_C_SOURCE 200809L
#include "ls_names.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define LS_CHUNK_BYTES 65536u
#define LS_LONG_TEXT (LS_CHUNK_BYTES / 4) /* longer texts get a chunk of their own */
#define LS_MIN_ENTRIES 64u
#define LS_MIN_SLOTS 64u
#define LS_NO_CHUNK UINT32_MAX
#define LS_ENTRY_BITS 10u
#define LS_ENTRIES_PER_CHUNK (1u << LS_ENTRY_BITS)
#define LS_ENTRY_CHUNKS 65536u /* 64M names */

typedef struct {
    uint64_t hash;
    char *text; /* NULL: a free id */
    uint32_t len;
    uint32_t chunk;
    atomic_uint refs; /* 0: a free id */
    atomic_uint tag;  /* the last ls_name_refs list that took a reference */
} ls_name;

typedef struct {
    char *base; /* NULL: a free chunk slot */
    size_t size, used;
    uint32_t live;
} ls_chunk;

static _Atomic(ls_name *) entries[LS_ENTRY_CHUNKS];
static atomic_uint top;        /* every live id is below top */
static uint32_t entry_chunks;  /* chunks of entries allocated: [0, entry_chunks) */
static uint32_t live;
static uint32_t peak; /* live names at most since the table last gave room back */
static uint32_t *free_ids;
static size_t free_count, free_capacity;
static uint32_t *slots; /* id + 1, 0 = empty */
static size_t slot_count;
static ls_chunk *chunks;
static uint32_t chunk_count, chunk_capacity;
static uint32_t current_chunk = LS_NO_CHUNK;
static size_t chunk_bytes;
static uint32_t next_tag = 1;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t forks_once = PTHREAD_ONCE_INIT;

static void lock_for_fork(void) { pthread_mutex_lock(&lock); }
static void unlock_after_fork(void) { pthread_mutex_unlock(&lock); }
/* The child's only thread is the one that took the lock in the parent. */
static void reset_in_child(void) { pthread_mutex_init(&lock, NULL); }
static void register_fork_handlers(void)
{
    pthread_atfork(lock_for_fork, unlock_after_fork, reset_in_child);
}

void ls_names_watch_forks(void) { pthread_once(&forks_once, register_fork_handlers); }

static void enter(void)
{
    ls_names_watch_forks();
    pthread_mutex_lock(&lock);
}

static void leave(void) { pthread_mutex_unlock(&lock); }

/* The entry of `id`, which must be below top (under the lock). */
static ls_name *at(uint32_t id)
{
    ls_name *c = atomic_load_explicit(&entries[id >> LS_ENTRY_BITS], memory_order_relaxed);
    return &c[id & (LS_ENTRIES_PER_CHUNK - 1)];
}

static uint32_t refs_of(uint32_t id)
{
    return atomic_load_explicit(&at(id)->refs, memory_order_relaxed);
}

/* Counts change by read-modify-write only: a retain, or a release that is
 * not the last, runs without the lock (ls_names_retain, ls_names_release). */
static void add_ref(ls_name *n) { atomic_fetch_add_explicit(&n->refs, 1, memory_order_relaxed); }

/* The entry of a live id, without the lock; NULL for an unknown or free one. */
static ls_name *live_entry(uint32_t id)
{
    if (id >= atomic_load_explicit(&top, memory_order_acquire))
        return NULL;
    ls_name *c = atomic_load_explicit(&entries[id >> LS_ENTRY_BITS], memory_order_acquire);
    if (c == NULL)
        return NULL;
    ls_name *n = &c[id & (LS_ENTRIES_PER_CHUNK - 1)];
    return atomic_load_explicit(&n->refs, memory_order_relaxed) != 0 ? n : NULL;
}

static uint64_t fnv1a(const char *text, size_t len)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)text[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* Doubles *items to hold `needed` (amortised growth). */
static int grow(void **items, size_t *cap, size_t needed, size_t item_size, size_t first)
{
    if (needed <= *cap)
        return 0;
    size_t n = *cap ? *cap : first;
    while (n < needed)
        n *= 2;
    void *bigger = realloc(*items, n * item_size);
    if (bigger == NULL)
        return -1;
    *items = bigger;
    *cap = n;
    return 0;
}

static void place(uint32_t id)
{
    size_t mask = slot_count - 1, i = at(id)->hash & mask;
    while (slots[i] != 0)
        i = (i + 1) & mask;
    slots[i] = id + 1;
}

static int rehash(size_t new_slot_count)
{
    uint32_t *fresh = calloc(new_slot_count, sizeof *fresh);
    if (fresh == NULL)
        return -1;
    free(slots);
    slots = fresh;
    slot_count = new_slot_count;
    uint32_t end = atomic_load_explicit(&top, memory_order_relaxed);
    for (uint32_t id = 0; id < end; id++)
        if (refs_of(id) != 0)
            place(id);
    return 0;
}

static void unplace(uint32_t id)
{
    size_t mask = slot_count - 1, i = at(id)->hash & mask;
    while (slots[i] != id + 1)
        i = (i + 1) & mask;
    /* Backward shift: pull later members of the probe run into the hole. */
    size_t hole = i;
    for (size_t j = (hole + 1) & mask; slots[j] != 0; j = (j + 1) & mask) {
        size_t home = at(slots[j] - 1)->hash & mask;
        int movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
        if (movable) {
            slots[hole] = slots[j];
            hole = j;
        }
    }
    slots[hole] = 0;
}

/* Room for `size` bytes of text; the chunk it lies in goes to *chunk. */
static char *chunk_alloc(size_t size, uint32_t *chunk)
{
    if (size <= LS_LONG_TEXT && current_chunk != LS_NO_CHUNK) {
        ls_chunk *c = &chunks[current_chunk];
        if (c->size - c->used >= size) {
            char *p = c->base + c->used;
            c->used += size;
            c->live++;
            *chunk = current_chunk;
            return p;
        }
    }
    uint32_t slot = 0;
    while (slot < chunk_count && chunks[slot].base != NULL)
        slot++;
    if (slot == chunk_count) {
        size_t cap = chunk_capacity;
        if (grow((void **)&chunks, &cap, (size_t)chunk_count + 1, sizeof *chunks, 8) != 0)
            return NULL;
        chunk_capacity = (uint32_t)cap;
        chunk_count++;
    }
    size_t bytes = size <= LS_LONG_TEXT ? LS_CHUNK_BYTES : size;
    char *base = malloc(bytes);
    if (base == NULL)
        return NULL;
    chunks[slot] = (ls_chunk){base, bytes, size, 1};
    chunk_bytes += bytes;
    if (size <= LS_LONG_TEXT)
        current_chunk = slot;
    *chunk = slot;
    return base;
}

static void chunk_drop(uint32_t slot)
{
    ls_chunk *c = &chunks[slot];
    if (--c->live != 0)
        return;
    if (slot == current_chunk) {
        c->used = 0; /* keep the chunk being filled */
        return;
    }
    chunk_bytes -= c->size;
    free(c->base);
    c->base = NULL;
    while (chunk_count > 0 && chunks[chunk_count - 1].base == NULL)
        chunk_count--;
}

/* The id of `text`, LS_NO_NAME when it is not in the table. */
static uint32_t lookup(const char *text, size_t len, uint64_t hash)
{
    if (slot_count == 0)
        return LS_NO_NAME;
    size_t mask = slot_count - 1;
    for (size_t i = hash & mask; slots[i] != 0; i = (i + 1) & mask) {
        const ls_name *n = at(slots[i] - 1);
        if (n->hash == hash && n->len == len && memcmp(n->text, text, len) == 0)
            return slots[i] - 1;
    }
    return LS_NO_NAME;
}

/* Makes sure the entry of id `id` (a new top) exists. */
static int entry_room(uint32_t id)
{
    uint32_t chunk = id >> LS_ENTRY_BITS;
    if (chunk >= LS_ENTRY_CHUNKS)
        return -1;
    if (chunk < entry_chunks)
        return 0;
    ls_name *fresh = calloc(LS_ENTRIES_PER_CHUNK, sizeof *fresh);
    if (fresh == NULL)
        return -1;
    atomic_store_explicit(&entries[chunk], fresh, memory_order_release);
    entry_chunks = chunk + 1;
    return 0;
}

static uint32_t intern_locked(const char *text, size_t len)
{
    uint64_t hash = fnv1a(text, len);
    uint32_t found = lookup(text, len, hash);
    if (found != LS_NO_NAME) {
        add_ref(at(found));
        return found;
    }
    if (live >= LS_NO_NAME - 1 || len >= UINT32_MAX)
        return LS_NO_NAME;
    /* Keep the load factor under one half. */
    if ((size_t)(live + 1) * 2 > slot_count &&
        rehash(slot_count ? slot_count * 2 : LS_MIN_SLOTS) != 0)
        return LS_NO_NAME;
    uint32_t end = atomic_load_explicit(&top, memory_order_relaxed);
    if (free_count == 0 && entry_room(end) != 0)
        return LS_NO_NAME;
    uint32_t chunk;
    char *copy = chunk_alloc(len + 1, &chunk);
    if (copy == NULL)
        return LS_NO_NAME;
    memcpy(copy, text, len);
    copy[len] = '\0';
    uint32_t id = free_count ? free_ids[--free_count] : end;
    ls_name *n = at(id);
    n->hash = hash;
    n->text = copy;
    n->len = (uint32_t)len;
    n->chunk = chunk;
    atomic_store_explicit(&n->tag, 0, memory_order_relaxed);
    atomic_store_explicit(&n->refs, 1, memory_order_relaxed);
    if (id == end) /* published after the entry is whole */
        atomic_store_explicit(&top, end + 1, memory_order_release);
    if (++live > peak)
        peak = live;
    place(id);
    return id;
}

uint32_t ls_names_intern(const char *text, size_t len)
{
    enter();
    uint32_t id = intern_locked(text, len);
    leave();
    return id;
}

void ls_names_retain(uint32_t id)
{
    /* The caller holds the id: its count cannot reach 0 meanwhile. */
    ls_name *n = live_entry(id);
    if (n != NULL)
        add_ref(n);
}

/* Gives back what the table no longer needs once it has emptied out:
 * entries above the highest live id, and hash slots. */
static void shrink(void)
{
    peak = live;
    uint32_t old_top = atomic_load_explicit(&top, memory_order_relaxed), end = old_top;
    while (end > 0 && refs_of(end - 1) == 0)
        end--;
    if (end < old_top) { /* ids from end up are appended again, not reused */
        atomic_store_explicit(&top, end, memory_order_release);
        size_t kept = 0;
        for (size_t i = 0; i < free_count; i++)
            if (free_ids[i] < end)
                free_ids[kept++] = free_ids[i];
        free_count = kept;
        /* Chunks wholly above top: no live id lies there, so no reader
         * holding a reference looks there. */
        uint32_t needed = (end + LS_ENTRIES_PER_CHUNK - 1) >> LS_ENTRY_BITS;
        if (needed == 0 && live != 0)
            needed = 1;
        while (entry_chunks > needed) {
            entry_chunks--;
            ls_name *c = atomic_exchange(&entries[entry_chunks], NULL);
            free(c);
        }
    }
    if (free_capacity > LS_MIN_ENTRIES && free_count * 4 < free_capacity) {
        size_t fcap = free_count * 2 > LS_MIN_ENTRIES ? free_count * 2 : LS_MIN_ENTRIES;
        uint32_t *fewer = realloc(free_ids, fcap * sizeof *free_ids);
        if (fewer != NULL) {
            free_ids = fewer;
            free_capacity = fcap;
        }
    }
    if (slot_count > LS_MIN_SLOTS && (size_t)live * 8 < slot_count) {
        size_t n = LS_MIN_SLOTS;
        while (n < (size_t)live * 4)
            n *= 2;
        (void)rehash(n); /* on failure the bigger table stays: still correct */
    }
    if (live == 0) {
        free(free_ids);
        free(slots);
        free_ids = NULL;
        slots = NULL;
        free_count = free_capacity = slot_count = 0;
    }
}

static void release_locked(uint32_t id)
{
    if (id >= atomic_load_explicit(&top, memory_order_relaxed))
        return;
    ls_name *n = at(id);
    if (atomic_load_explicit(&n->refs, memory_order_relaxed) == 0 ||
        atomic_fetch_sub_explicit(&n->refs, 1, memory_order_relaxed) != 1)
        return;
    /* Should the free stack fail to grow, the id is just not reused. */
    if (grow((void **)&free_ids, &free_capacity, free_count + 1, sizeof *free_ids,
             LS_MIN_ENTRIES) == 0)
        free_ids[free_count++] = id;
    unplace(id);
    chunk_drop(n->chunk);
    n->text = NULL;
    atomic_store_explicit(&n->tag, 0, memory_order_relaxed);
    live--;
    /* Amortised: a shrink costs O(peak) and follows peak * 3/4 releases. */
    if ((uint64_t)live * 4 < peak || live == 0)
        shrink();
}

void ls_names_release(uint32_t id)
{
    ls_name *n = live_entry(id);
    if (n == NULL)
        return;
    /* Not the last reference: no lock (the caller's own keeps it above 0). */
    unsigned int refs = atomic_load_explicit(&n->refs, memory_order_relaxed);
    while (refs > 1)
        if (atomic_compare_exchange_weak_explicit(&n->refs, &refs, refs - 1,
                                                  memory_order_relaxed, memory_order_relaxed))
            return;
    enter();
    release_locked(id);
    leave();
}

static int hold_locked(ls_name_refs *refs, uint32_t id)
{
    if (id >= atomic_load_explicit(&top, memory_order_relaxed) || refs_of(id) == 0)
        return -1;
    if (refs->tag == 0) {
        refs->tag = next_tag++;
        if (next_tag == 0)
            next_tag = 1;
    }
    ls_name *n = at(id);
    if (atomic_load_explicit(&n->tag, memory_order_relaxed) == refs->tag)
        return 0;
    if (grow((void **)&refs->ids, &refs->capacity, refs->count + 1, sizeof *refs->ids, 64) != 0)
        return -1;
    refs->ids[refs->count++] = id;
    add_ref(n);
    atomic_store_explicit(&n->tag, refs->tag, memory_order_relaxed);
    return 0;
}

int ls_names_hold(ls_name_refs *refs, uint32_t id)
{
    /* The list took this id last: it holds it (a tag is set only by a hold
     * of its own list, and a name's tag is cleared only when it is freed,
     * which a list holding it prevents). */
    const ls_name *n = refs->tag != 0 ? live_entry(id) : NULL;
    if (n != NULL && atomic_load_explicit(&n->tag, memory_order_relaxed) == refs->tag)
        return 0;
    enter();
    int held = hold_locked(refs, id);
    leave();
    return held;
}

uint32_t ls_names_intern_held(ls_name_refs *refs, const char *text, size_t len)
{
    enter();
    uint32_t id = intern_locked(text, len);
    if (id != LS_NO_NAME) {
        int held = hold_locked(refs, id);
        release_locked(id);
        if (held != 0)
            id = LS_NO_NAME;
    }
    leave();
    return id;
}

int ls_names_adopt(ls_name_refs *into, ls_name_refs *from)
{
    if (from->count == 0)
        return 0;
    if (grow((void **)&into->ids, &into->capacity, into->count + from->count,
             sizeof *into->ids, 64) != 0)
        return -1;
    enter();
    if (into->tag == 0) {
        into->tag = next_tag++;
        if (next_tag == 0)
            next_tag = 1;
    }
    for (size_t i = 0; i < from->count; i++) {
        ls_name *n = at(from->ids[i]);
        if (atomic_load_explicit(&n->tag, memory_order_relaxed) == from->tag)
            atomic_store_explicit(&n->tag, into->tag, memory_order_relaxed);
        into->ids[into->count++] = from->ids[i];
    }
    leave();
    free(from->ids);
    memset(from, 0, sizeof *from);
    return 0;
}

void ls_names_release_all(ls_name_refs *refs)
{
    if (refs->count > 0) {
        enter();
        /* Newest first: names of one profile were interned together, so the
         * table can give their room back as it goes. */
        for (size_t i = refs->count; i > 0; i--)
            release_locked(refs->ids[i - 1]);
        leave();
    }
    free(refs->ids);
    memset(refs, 0, sizeof *refs);
}

const char *ls_names_text(uint32_t id)
{
    const ls_name *n = live_entry(id);
    return n != NULL ? n->text : NULL;
}

size_t ls_names_length(uint32_t id)
{
    const ls_name *n = live_entry(id);
    return n != NULL ? n->len : 0;
}

size_t ls_names_format(uint32_t id, int32_t index, char *out, size_t size)
{
    const char *text = ls_names_text(id);
    if (text == NULL)
        return SIZE_MAX;
    char digits[12];
    size_t ndigits = 0;
    uint32_t v = index < 0 ? 0u : (uint32_t)index;
    do {
        digits[ndigits++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    size_t total = 0;
    for (const char *p = text; *p != '\0';) {
        if (p[0] == '{' && p[1] == 'i' && p[2] == '}') {
            for (size_t k = ndigits; k > 0; k--, total++)
                if (total + 1 < size)
                    out[total] = digits[k - 1];
            p += 3;
        } else {
            if (total + 1 < size)
                out[total] = *p;
            total++;
            p++;
        }
    }
    out[total < size ? total : size - 1] = '\0';
    return total;
}

static int check_locked(void)
{
    uint32_t counted = 0, end = atomic_load_explicit(&top, memory_order_relaxed);
    if (end > entry_chunks * LS_ENTRIES_PER_CHUNK)
        return -1;
    for (uint32_t id = 0; id < end; id++) {
        if (refs_of(id) == 0) {
            if (at(id)->text != NULL)
                return -3;
            continue;
        }
        counted++;
        const ls_name *n = at(id);
        size_t mask = slot_count - 1, i = n->hash & mask;
        while (slots[i] != 0 && slots[i] != id + 1)
            i = (i + 1) & mask;
        if (slots[i] != id + 1 || n->text == NULL || n->hash != fnv1a(n->text, n->len) ||
            lookup(n->text, n->len, n->hash) != id)
            return -1;
    }
    size_t used = 0;
    for (size_t i = 0; i < slot_count; i++) {
        if (slots[i] == 0)
            continue;
        used++;
        if (slots[i] - 1 >= end || refs_of(slots[i] - 1) == 0)
            return -2;
    }
    if (counted != live || used != live)
        return -2;
    for (size_t i = 0; i < free_count; i++)
        if (free_ids[i] >= end || refs_of(free_ids[i]) != 0)
            return -3;
    for (uint32_t c = 0; c < chunk_count; c++) {
        uint32_t in_chunk = 0;
        for (uint32_t id = 0; id < end; id++)
            in_chunk += refs_of(id) != 0 && at(id)->chunk == c;
        if (chunks[c].base != NULL && chunks[c].live != in_chunk)
            return -4;
    }
    return 0;
}

int ls_names_check(void)
{
    enter();
    int result = check_locked();
    leave();
    return result;
}

uint32_t ls_names_count(void)
{
    enter();
    uint32_t count = live;
    leave();
    return count;
}

size_t ls_names_bytes(void)
{
    enter();
    size_t bytes = (size_t)entry_chunks * LS_ENTRIES_PER_CHUNK * sizeof(ls_name) +
                   slot_count * sizeof *slots + free_capacity * sizeof *free_ids +
                   (size_t)chunk_capacity * sizeof *chunks + chunk_bytes;
    leave();
    return bytes;
}

uint32_t ls_names_id_bound(void) { return atomic_load_explicit(&top, memory_order_acquire); }
