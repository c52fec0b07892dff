/* ls_names: see ls_names.h.  Open addressing (linear probing, deletion by
 * backward shift) over a power-of-two table of ids; entries in one array
 * indexed by id, freed ids on a stack; text in arena chunks that count
 * their live names. */
#include "ls_names.h"

#include <stdlib.h>
#include <string.h>

#define LS_CHUNK_BYTES 65536u
#define LS_LONG_TEXT (LS_CHUNK_BYTES / 4) /* longer texts get a chunk of their own */
#define LS_MIN_ENTRIES 64u
#define LS_MIN_SLOTS 64u
#define LS_NO_CHUNK UINT32_MAX

typedef struct {
    uint64_t hash;
    char *text;
    uint32_t len;
    uint32_t refs; /* 0: a free id */
    uint32_t tag;  /* the last ls_name_refs list that took a reference */
    uint32_t chunk;
} ls_name;

typedef struct {
    char *base; /* NULL: a free chunk slot */
    size_t size, used;
    uint32_t live;
} ls_chunk;

static ls_name *names;
static uint32_t top;      /* every live id is below top */
static uint32_t capacity; /* entries allocated */
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
    size_t mask = slot_count - 1, i = names[id].hash & mask;
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
    for (uint32_t id = 0; id < top; id++)
        if (names[id].refs != 0)
            place(id);
    return 0;
}

static void unplace(uint32_t id)
{
    size_t mask = slot_count - 1, i = names[id].hash & mask;
    while (slots[i] != id + 1)
        i = (i + 1) & mask;
    /* Backward shift: pull later members of the probe run into the hole. */
    size_t hole = i;
    for (size_t j = (hole + 1) & mask; slots[j] != 0; j = (j + 1) & mask) {
        size_t home = names[slots[j] - 1].hash & mask;
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
        const ls_name *n = &names[slots[i] - 1];
        if (n->hash == hash && n->len == len && memcmp(n->text, text, len) == 0)
            return slots[i] - 1;
    }
    return LS_NO_NAME;
}

uint32_t ls_names_intern(const char *text, size_t len)
{
    uint64_t hash = fnv1a(text, len);
    uint32_t found = lookup(text, len, hash);
    if (found != LS_NO_NAME) {
        names[found].refs++;
        return found;
    }
    if (live >= LS_NO_NAME - 1 || len >= UINT32_MAX)
        return LS_NO_NAME;
    /* Keep the load factor under one half. */
    if ((size_t)(live + 1) * 2 > slot_count &&
        rehash(slot_count ? slot_count * 2 : LS_MIN_SLOTS) != 0)
        return LS_NO_NAME;
    uint32_t id;
    if (free_count == 0) {
        size_t cap = capacity;
        if (grow((void **)&names, &cap, (size_t)top + 1, sizeof *names, LS_MIN_ENTRIES) != 0)
            return LS_NO_NAME;
        capacity = (uint32_t)cap;
    }
    uint32_t chunk;
    char *copy = chunk_alloc(len + 1, &chunk);
    if (copy == NULL)
        return LS_NO_NAME;
    memcpy(copy, text, len);
    copy[len] = '\0';
    id = free_count ? free_ids[--free_count] : top++;
    names[id] = (ls_name){hash, copy, (uint32_t)len, 1, 0, chunk};
    if (++live > peak)
        peak = live;
    place(id);
    return id;
}

void ls_names_retain(uint32_t id)
{
    if (id < top && names[id].refs != 0)
        names[id].refs++;
}

/* Gives back what the table no longer needs once it has emptied out:
 * entries above the highest live id, and hash slots. */
static void shrink(void)
{
    peak = live;
    uint32_t old_top = top;
    while (top > 0 && names[top - 1].refs == 0)
        top--;
    if (top < old_top) { /* ids from top up are appended again, not reused */
        size_t kept = 0;
        for (size_t i = 0; i < free_count; i++)
            if (free_ids[i] < top)
                free_ids[kept++] = free_ids[i];
        free_count = kept;
    }
    if (capacity > LS_MIN_ENTRIES && (size_t)top * 4 < capacity) {
        uint32_t cap = top * 2 > LS_MIN_ENTRIES ? top * 2 : LS_MIN_ENTRIES;
        ls_name *smaller = realloc(names, cap * sizeof *names);
        if (smaller != NULL) {
            names = smaller;
            capacity = cap;
        }
        if (free_capacity > LS_MIN_ENTRIES && free_count * 4 < free_capacity) {
            size_t fcap = free_count * 2 > LS_MIN_ENTRIES ? free_count * 2 : LS_MIN_ENTRIES;
            uint32_t *fewer = realloc(free_ids, fcap * sizeof *free_ids);
            if (fewer != NULL) {
                free_ids = fewer;
                free_capacity = fcap;
            }
        }
    }
    if (slot_count > LS_MIN_SLOTS && (size_t)live * 8 < slot_count) {
        size_t n = LS_MIN_SLOTS;
        while (n < (size_t)live * 4)
            n *= 2;
        (void)rehash(n); /* on failure the bigger table stays: still correct */
    }
    if (live == 0) {
        free(names);
        free(free_ids);
        free(slots);
        names = NULL;
        free_ids = NULL;
        slots = NULL;
        top = capacity = 0;
        free_count = free_capacity = slot_count = 0;
    }
}

void ls_names_release(uint32_t id)
{
    if (id >= top || names[id].refs == 0 || --names[id].refs != 0)
        return;
    /* Should the free stack fail to grow, the id is just not reused. */
    if (grow((void **)&free_ids, &free_capacity, free_count + 1, sizeof *free_ids,
             LS_MIN_ENTRIES) == 0)
        free_ids[free_count++] = id;
    unplace(id);
    chunk_drop(names[id].chunk);
    names[id].text = NULL;
    names[id].tag = 0;
    live--;
    /* Amortised: a shrink costs O(peak) and follows peak * 3/4 releases. */
    if ((uint64_t)live * 4 < peak || live == 0)
        shrink();
}

int ls_names_hold(ls_name_refs *refs, uint32_t id)
{
    if (id >= top || names[id].refs == 0)
        return -1;
    if (refs->tag == 0) {
        refs->tag = next_tag++;
        if (next_tag == 0)
            next_tag = 1;
    }
    if (names[id].tag == refs->tag)
        return 0;
    if (grow((void **)&refs->ids, &refs->capacity, refs->count + 1, sizeof *refs->ids, 64) != 0)
        return -1;
    refs->ids[refs->count++] = id;
    names[id].refs++;
    names[id].tag = refs->tag;
    return 0;
}

uint32_t ls_names_intern_held(ls_name_refs *refs, const char *text, size_t len)
{
    uint32_t id = ls_names_intern(text, len);
    if (id == LS_NO_NAME)
        return LS_NO_NAME;
    int held = ls_names_hold(refs, id);
    ls_names_release(id);
    return held == 0 ? id : LS_NO_NAME;
}

void ls_names_release_all(ls_name_refs *refs)
{
    /* Newest first: names of one profile were interned together, so the
     * table can give their room back as it goes. */
    for (size_t i = refs->count; i > 0; i--)
        ls_names_release(refs->ids[i - 1]);
    free(refs->ids);
    memset(refs, 0, sizeof *refs);
}

const char *ls_names_text(uint32_t id)
{
    return id < top && names[id].refs != 0 ? names[id].text : NULL;
}

size_t ls_names_length(uint32_t id)
{
    return id < top && names[id].refs != 0 ? names[id].len : 0;
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

int ls_names_check(void)
{
    uint32_t counted = 0;
    for (uint32_t id = 0; id < top; id++) {
        if (names[id].refs == 0)
            continue;
        counted++;
        size_t mask = slot_count - 1, i = names[id].hash & mask;
        while (slots[i] != 0 && slots[i] != id + 1)
            i = (i + 1) & mask;
        if (slots[i] != id + 1 || ls_names_text(id) == NULL ||
            names[id].hash != fnv1a(names[id].text, names[id].len) ||
            lookup(names[id].text, names[id].len, names[id].hash) != id)
            return -1;
    }
    size_t used = 0;
    for (size_t i = 0; i < slot_count; i++) {
        if (slots[i] == 0)
            continue;
        used++;
        if (slots[i] - 1 >= top || names[slots[i] - 1].refs == 0)
            return -2;
    }
    if (counted != live || used != live)
        return -2;
    for (size_t i = 0; i < free_count; i++)
        if (free_ids[i] >= top || names[free_ids[i]].refs != 0)
            return -3;
    for (uint32_t c = 0; c < chunk_count; c++) {
        uint32_t in_chunk = 0;
        for (uint32_t id = 0; id < top; id++)
            in_chunk += names[id].refs != 0 && names[id].chunk == c;
        if (chunks[c].base != NULL && chunks[c].live != in_chunk)
            return -4;
    }
    return 0;
}

uint32_t ls_names_count(void) { return live; }

uint32_t ls_names_id_bound(void) { return top; }

size_t ls_names_bytes(void)
{
    return (size_t)capacity * sizeof *names + slot_count * sizeof *slots +
           free_capacity * sizeof *free_ids + (size_t)chunk_capacity * sizeof *chunks +
           chunk_bytes;
}
