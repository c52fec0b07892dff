/* ls_strtab: see ls_strtab.h. */
#include "ls_strtab.h"

#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t h, uint64_t w)
{
    h ^= w;
    h *= 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
}

/* Hashes the length and at most the first and the last 64 bytes, eight at
 * a time: kernel names run to kilobytes and are hashed once per event;
 * names that differ only in the middle still compare unequal (memcmp). */
static uint32_t hash_of(const char *text, size_t len)
{
    uint64_t h = mix(0x243F6A8885A308D3ull, len);
    size_t head = len < 64 ? len : 64;
    size_t i = 0;
    for (; i + 8 <= head; i += 8) {
        uint64_t w;
        memcpy(&w, text + i, 8);
        h = mix(h, w);
    }
    for (; i < head; i++)
        h = mix(h, (unsigned char)text[i]);
    if (len > 64) {
        size_t from = len - (len - 64 < 64 ? len - 64 : 64);
        for (i = from; i + 8 <= len; i += 8) {
            uint64_t w;
            memcpy(&w, text + i, 8);
            h = mix(h, w);
        }
        for (; i < len; i++)
            h = mix(h, (unsigned char)text[i]);
    }
    return (uint32_t)(h ^ (h >> 32));
}

static int rehash(ls_strtab *t, size_t slot_count)
{
    uint32_t *slots = calloc(slot_count, sizeof *slots);
    if (slots == NULL)
        return -1;
    for (size_t id = 0; id < t->count; id++) {
        size_t at = t->hashes[id] & (slot_count - 1);
        while (slots[at] != 0)
            at = (at + 1) & (slot_count - 1);
        slots[at] = (uint32_t)id + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->slot_count = slot_count;
    return 0;
}

static int grow_items(ls_strtab *t)
{
    size_t cap = t->capacity ? t->capacity * 2 : 256;
    uint64_t *offsets = realloc(t->offsets, cap * sizeof *offsets);
    if (offsets == NULL)
        return -1;
    t->offsets = offsets;
    uint32_t *lengths = realloc(t->lengths, cap * sizeof *lengths);
    if (lengths == NULL)
        return -1;
    t->lengths = lengths;
    uint32_t *hashes = realloc(t->hashes, cap * sizeof *hashes);
    if (hashes == NULL)
        return -1;
    t->hashes = hashes;
    t->capacity = cap;
    return 0;
}

uint32_t ls_strtab_intern(ls_strtab *t, const char *text, size_t len)
{
    if (len > UINT32_MAX - 1 || t->count >= UINT32_MAX - 1)
        return LS_STRTAB_NONE;
    uint32_t h = hash_of(text, len);
    if (t->slot_count) {
        size_t at = h & (t->slot_count - 1);
        while (t->slots[at] != 0) {
            uint32_t id = t->slots[at] - 1;
            if (t->hashes[id] == h && t->lengths[id] == len &&
                memcmp(t->arena + t->offsets[id], text, len) == 0)
                return id;
            at = (at + 1) & (t->slot_count - 1);
        }
    }
    if ((t->count + 1) * 2 > t->slot_count &&
        rehash(t, t->slot_count ? t->slot_count * 2 : 1024) != 0)
        return LS_STRTAB_NONE;
    if (t->count == t->capacity && grow_items(t) != 0)
        return LS_STRTAB_NONE;
    if (t->arena_used + len + 1 > t->arena_capacity) {
        size_t cap = t->arena_capacity ? t->arena_capacity : 65536;
        while (cap < t->arena_used + len + 1)
            cap *= 2;
        char *arena = realloc(t->arena, cap);
        if (arena == NULL)
            return LS_STRTAB_NONE;
        t->arena = arena;
        t->arena_capacity = cap;
    }
    uint32_t id = (uint32_t)t->count++;
    memcpy(t->arena + t->arena_used, text, len);
    t->arena[t->arena_used + len] = '\0';
    t->offsets[id] = t->arena_used;
    t->lengths[id] = (uint32_t)len;
    t->hashes[id] = h;
    t->arena_used += len + 1;
    size_t at = h & (t->slot_count - 1);
    while (t->slots[at] != 0)
        at = (at + 1) & (t->slot_count - 1);
    t->slots[at] = id + 1;
    return id;
}

const char *ls_strtab_text(const ls_strtab *t, uint32_t id, size_t *len)
{
    if (id >= t->count)
        return NULL;
    if (len != NULL)
        *len = t->lengths[id];
    return t->arena + t->offsets[id];
}

void ls_strtab_free(ls_strtab *t)
{
    free(t->slots);
    free(t->offsets);
    free(t->lengths);
    free(t->hashes);
    free(t->arena);
    memset(t, 0, sizeof *t);
}
