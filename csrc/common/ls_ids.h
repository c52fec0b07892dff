/* ls_ids: sorted sets of ids (thread ids, correlation ids, name ids), the
 * sort-and-look-up that the window filter, the thread widening, the range
 * attribution and the export's name table all need. */
#ifndef LS_IDS_H
#define LS_IDS_H

#include <stddef.h>
#include <stdint.h>

/* Sort ids[0..n) ascending and drop repeats; return the new count. */
size_t ls_ids_sort_unique_u64(uint64_t *ids, size_t n);
size_t ls_ids_sort_unique_u32(uint32_t *ids, size_t n);

/* The index of id in the sorted set[0..n) (the first, should it be there
 * more than once), or -1 when absent. */
ptrdiff_t ls_ids_find_u64(const uint64_t *set, size_t n, uint64_t id);
ptrdiff_t ls_ids_find_u32(const uint32_t *set, size_t n, uint32_t id);

#endif
