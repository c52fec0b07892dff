/* ls_radix: the analysis's sorts of millions of records (ops by device or
 * stream and time, launch records by correlation id, host points by time)
 * as a least-significant-digit radix sort over 64-bit keys, so records out
 * of time order cost a few linear passes instead of a comparison sort.
 * Callers pack their keys (ls_radix_width) and carry each record's
 * position as the value; ties keep their given order. */
#ifndef LS_RADIX_H
#define LS_RADIX_H

#include <stddef.h>
#include <stdint.h>

/* The number of bits that the values lo..hi (lo <= hi) differ in, counted
 * from lo: 0 when equal, 64 at most. */
unsigned ls_radix_width(uint64_t lo, uint64_t hi);

/* How several unsigned fields pack into one 64-bit key that orders as
 * they do, most significant first: field j, less lo[j], in width[j] bits.
 * Only the first `fields` fields fit; keys sorted by the packed value are
 * in the fields' order up to ties among those left out. */
typedef struct {
    uint64_t lo[3];
    unsigned width[3], fields;
} ls_radix_packing;

/* The packing of three fields, each ranging over lo[j]..hi[j]. */
ls_radix_packing ls_radix_packing_of(const uint64_t lo[3], const uint64_t hi[3]);

/* The packed key of (k1, k2, k3), each within its range. */
uint64_t ls_radix_pack(const ls_radix_packing *p, uint64_t k1, uint64_t k2, uint64_t k3);

/* Sorts the n pairs (keys[i], values[i]) by key, ascending; pairs of
 * equal keys keep their given order (stable).  Byte digits in which all
 * keys agree cost no pass.  Returns 0, or -1 when memory for the second
 * buffer (12 bytes a pair) ran out, the pairs then untouched. */
int ls_radix_sort(uint64_t *keys, uint32_t *values, size_t n);

/* Reorders items[0..n) of `size` bytes (at most 64) in place so that the
 * new items[k] is the old items[perm[k]]; perm must be a permutation of
 * 0..n-1 and is overwritten (left as the identity). */
void ls_radix_permute(void *items, size_t size, uint32_t *perm, size_t n);

/* Sorts items[0..n) of `size` bytes (at most 64) by compare, which must
 * order them by the three fields `fields` reads from an item, then by
 * anything else.  Items in order already are left as they are; others
 * are radix sorted by as many fields as pack into 64 bits, and each run
 * that leaves tied goes through qsort: compare's order in a few linear
 * passes, 24 B an item of extra memory.  Out of memory: qsort alone.
 * Never fails. */
void ls_radix_sort_items(void *items, size_t size, size_t n,
                         void (*fields)(const void *item, uint64_t out[3]),
                         int (*compare)(const void *, const void *));

#endif
