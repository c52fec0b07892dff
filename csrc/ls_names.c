/* ls_names: see ls_names.h.  Open addressing over a power-of-two table of
 * ids; the strings live in one array of heap copies. */
#include "ls_names.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    char *text;
    size_t len;
    uint64_t hash;
    void *nvtx_handle;
} ls_name;

static ls_name *names;
static uint32_t name_count, name_capacity;
static uint32_t *slots; /* id + 1, 0 = empty */
static size_t slot_count;

static uint64_t fnv1a(const char *text, size_t len)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)text[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static int rehash(size_t new_slot_count)
{
    uint32_t *fresh = calloc(new_slot_count, sizeof *fresh);
    if (fresh == NULL)
        return -1;
    for (uint32_t id = 0; id < name_count; id++) {
        size_t i = names[id].hash & (new_slot_count - 1);
        while (fresh[i] != 0)
            i = (i + 1) & (new_slot_count - 1);
        fresh[i] = id + 1;
    }
    free(slots);
    slots = fresh;
    slot_count = new_slot_count;
    return 0;
}

uint32_t ls_names_intern(const char *text, size_t len)
{
    uint64_t hash = fnv1a(text, len);
    if (slot_count != 0) {
        size_t i = hash & (slot_count - 1);
        while (slots[i] != 0) {
            const ls_name *n = &names[slots[i] - 1];
            if (n->hash == hash && n->len == len && memcmp(n->text, text, len) == 0)
                return slots[i] - 1;
            i = (i + 1) & (slot_count - 1);
        }
    }
    if (name_count == LS_NO_NAME - 1)
        return LS_NO_NAME;
    /* Keep the load factor under one half. */
    if ((size_t)(name_count + 1) * 2 > slot_count &&
        rehash(slot_count ? slot_count * 2 : 64) != 0)
        return LS_NO_NAME;
    if (name_count == name_capacity) {
        uint32_t cap = name_capacity ? name_capacity * 2 : 64;
        ls_name *bigger = realloc(names, cap * sizeof *bigger);
        if (bigger == NULL)
            return LS_NO_NAME;
        names = bigger;
        name_capacity = cap;
    }
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return LS_NO_NAME;
    memcpy(copy, text, len);
    copy[len] = '\0';
    uint32_t id = name_count++;
    names[id] = (ls_name){copy, len, hash, NULL};
    size_t i = hash & (slot_count - 1);
    while (slots[i] != 0)
        i = (i + 1) & (slot_count - 1);
    slots[i] = id + 1;
    return id;
}

const char *ls_names_text(uint32_t id)
{
    return id < name_count ? names[id].text : NULL;
}

void *ls_names_nvtx_handle(uint32_t id)
{
    return id < name_count ? names[id].nvtx_handle : NULL;
}

void ls_names_set_nvtx_handle(uint32_t id, void *handle)
{
    if (id < name_count)
        names[id].nvtx_handle = handle;
}

uint32_t ls_names_count(void) { return name_count; }
