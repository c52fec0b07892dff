/* ls_slots: see ls_slots.h. */
#include "ls_slots.h"

#include <stdlib.h>
#include <string.h>

static size_t chunk_items(const ls_slots *s) { return (size_t)1 << s->chunk_bits; }

static int add_chunk(ls_slots *s, size_t have)
{
    if (s->chunks[have] == NULL) {
        s->chunks[have] = malloc(chunk_items(s) * s->item_size);
        if (s->chunks[have] == NULL)
            return -1;
    }
    /* Publish the chunk only after its pointer is in place. */
    atomic_store_explicit(&s->chunk_count, have + 1, memory_order_release);
    return 0;
}

int ls_slots_reset(ls_slots *s)
{
    atomic_store(&s->next, 0);
    atomic_store(&s->dropped, 0);
    for (size_t have = atomic_load(&s->chunk_count); have < s->start_chunks; have++)
        if (add_chunk(s, have) != 0)
            return -1;
    return 0;
}

void *ls_slots_claim(ls_slots *s, size_t *index)
{
    size_t slot = atomic_fetch_add_explicit(&s->next, 1, memory_order_relaxed);
    if ((slot >> s->chunk_bits) >= atomic_load_explicit(&s->chunk_count, memory_order_acquire)) {
        atomic_fetch_add_explicit(&s->dropped, 1, memory_order_relaxed);
        return NULL;
    }
    void *item = ls_slots_at(s, slot);
    memset(item, 0, s->item_size);
    *index = slot;
    return item;
}

void *ls_slots_at(ls_slots *s, size_t index)
{
    char *chunk = s->chunks[index >> s->chunk_bits];
    return chunk + (index & (chunk_items(s) - 1)) * s->item_size;
}

int ls_slots_reserve(ls_slots *s)
{
    size_t have = atomic_load(&s->chunk_count);
    size_t used = atomic_load(&s->next);
    size_t max = s->max_chunks < LS_SLOTS_MAX_CHUNKS ? s->max_chunks : LS_SLOTS_MAX_CHUNKS;
    while (have < max && used + chunk_items(s) / 2 >= have * chunk_items(s)) {
        if (add_chunk(s, have) != 0)
            return -1;
        have++;
    }
    return 0;
}

size_t ls_slots_stored(const ls_slots *s)
{
    size_t used = atomic_load(&s->next);
    size_t room = atomic_load(&s->chunk_count) << s->chunk_bits;
    return used < room ? used : room;
}

uint64_t ls_slots_dropped(const ls_slots *s) { return atomic_load(&s->dropped); }
