/* ls_model_order: the orders in which the model sweeps the ops, by
 * (device or stream, start, end, index) through ls_radix, and the distinct
 * streams of the records.  Pure C; a function that allocates returns 0, or
 * -1 when memory ran out (what it was given stays valid). */
#ifndef LS_MODEL_ORDER_H
#define LS_MODEL_ORDER_H

#include "ls_records.h"

#include <stddef.h>
#include <stdint.h>

/* A sortable key triple pointing at one record. */
typedef struct {
    uint64_t k1, k2, k3;
    uint32_t index;
} ls_key;

/* Streams in the model's order: distinct (device, stream) keys, found
 * through a small open-addressing table. */
enum { STREAM_ORDER_MAX_STREAMS = 1 << 16, STREAM_MEMO = 8 };

typedef struct {
    uint64_t *keys;   /* (device << 32) | stream, one per distinct stream */
    uint32_t *slots;  /* 1 + index into keys, 0 empty */
    size_t count, cap, slot_mask;
    /* The streams asked last, by their id's low bits: ops that take turns
     * on a few streams find theirs here, not in the table. */
    uint64_t memo_key[STREAM_MEMO];
    uint32_t memo_slot[STREAM_MEMO]; /* its slots[] value, 0: nothing kept */
} ls_stream_set;

/* Sorts keys by compare_keys (ls_radix: keys in order already, as records
 * mostly arrive, cost one check; 10M shuffled keys took ~2.5 s in qsort
 * and its merge buffer of 32 B a key). */
void ls_model_sort_keys(ls_key *keys, size_t n);

/* Sorts op indices by (k1 of the op, start, end, index) into out: 0, or
 * -1 when memory ran out.  Ops in that order already need no sort; when
 * the three fields pack into 64 bits (ls_radix_packing: timestamps spanning
 * under 2^64 ns less the device and stream bits) a radix sort of 12 B an
 * op gives the order (its ties stay in index order); otherwise keys of
 * 32 B an op go through ls_model_sort_keys. */
int ls_model_sort_ops(const ls_records *r, int by_stream, uint32_t *out);

/* The distinct streams of the records, in (device, stream) order, with
 * each one's slot pointing at its place there: 0; 1 when there are more
 * than the table takes (set freed: sort instead); -1 when memory ran out. */
int ls_model_distinct_streams(const ls_records *r, ls_stream_set *set);

/* The stream order (device, stream, start, end, index) from the device
 * order (device, start, end, index) in *order, which it replaces: a stable
 * partition by stream (the streams of `set`) keeps each stream's ops in the
 * order they had, so two passes replace a sort of every op again (each
 * op's stream looked up in both: no array of them written).  0, or -1
 * when memory ran out (*order kept). */
int ls_model_stream_order_from_device_order(const ls_records *r, ls_stream_set *set,
                                            uint32_t **order);

void ls_model_stream_set_free(ls_stream_set *set);

#endif
