/* ls_bulk: allocation of the analysis's large arrays (one item per op or
 * per record, millions of them), each written front to back once.
 *
 * Backed by 2 MiB pages where the kernel allows it (transparent huge
 * pages in "madvise" mode, the common default): one page fault per 2 MiB
 * instead of 512.  On the CPU machines here a 4 KiB fault cost 2.5-9 us
 * (0.64-1.9 s a GiB) and the 10M-kernel summary wrote ~1.8 GB of fresh
 * pages; a 2 MiB fault cost 0.21 s a GiB (benchmarks/RESULTS.md).
 * The memory is plain malloc memory: give it back with free().  Growing it
 * with realloc works but may copy (the advice splits the mapping). */
#ifndef LS_BULK_H
#define LS_BULK_H

#include <stddef.h>

/* malloc(bytes), advised for huge pages when it is large enough to hold
 * one; NULL when memory ran out. */
void *ls_bulk_malloc(size_t bytes);

/* calloc(count, size) with the same advice. */
void *ls_bulk_calloc(size_t count, size_t size);

#endif
