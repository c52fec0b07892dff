/* ls_slots: a lock-free, append-only store of fixed-size items for CUPTI
 * callbacks.  A callback claims a slot with one atomic add and never
 * allocates or blocks; chunks are added ahead of need from a Python thread
 * (ls_slots_reserve at range exits).  A claim with no room is counted as
 * dropped.  Used for launch calls (ls_launches) and blocking calls
 * (ls_calls). */
#ifndef LS_SLOTS_H
#define LS_SLOTS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define LS_SLOTS_MAX_CHUNKS 1024

typedef struct {
    size_t item_size;
    unsigned chunk_bits;  /* 2^chunk_bits items per chunk */
    size_t start_chunks;  /* allocated by ls_slots_reset */
    size_t max_chunks;    /* <= LS_SLOTS_MAX_CHUNKS */
    void *chunks[LS_SLOTS_MAX_CHUNKS];
    atomic_size_t chunk_count; /* chunks[0..chunk_count) are published */
    atomic_size_t next;        /* claims so far, including dropped ones */
    atomic_uint_fast64_t dropped;
} ls_slots;

#define LS_SLOTS_INIT(type, bits, start, max) \
    {.item_size = sizeof(type), .chunk_bits = (bits), .start_chunks = (start), .max_chunks = (max)}

/* Empties the store and makes sure start_chunks chunks exist (kept between
 * sessions).  0, or -1 when out of memory.  Call while no callback runs. */
int ls_slots_reset(ls_slots *s);

/* From any thread: a zeroed slot and its index, or NULL when full (counted). */
void *ls_slots_claim(ls_slots *s, size_t *index);

/* The slot of a claimed index. */
void *ls_slots_at(ls_slots *s, size_t index);

/* From a Python thread: publishes a new chunk when the last is half used.
 * 0, or -1 when out of memory (later claims are then dropped). */
int ls_slots_reserve(ls_slots *s);

/* With no callback running: how many slots hold items, and how many claims
 * were dropped. */
size_t ls_slots_stored(const ls_slots *s);
uint64_t ls_slots_dropped(const ls_slots *s);

#endif
