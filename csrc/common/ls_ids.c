/* ls_ids: see ls_ids.h. */
#include "ls_ids.h"
#include "ls_search.h"

#include <stdlib.h>
#include <string.h>

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int compare_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Sorts ids[0..n) of TYPE ascending: nothing to do when they are in order
 * already (a capture's thread ids, CUPTI's correlation ids, mostly), else a
 * least-significant-byte radix sort in which a byte all ids share costs no
 * pass (a few linear passes where qsort took ~0.5 ms for 36,000 ids); qsort
 * when the scratch buffer cannot be had.  The same order either way. */
#define LS_IDS_SORT(NAME, TYPE, COMPARE)                                          \
    static void NAME(TYPE *ids, size_t n)                                         \
    {                                                                             \
        size_t i = 1;                                                             \
        while (i < n && ids[i - 1] <= ids[i])                                     \
            i++;                                                                  \
        if (i >= n)                                                               \
            return;                                                               \
        TYPE *scratch = malloc(n * sizeof *scratch);                              \
        if (scratch == NULL) {                                                    \
            qsort(ids, n, sizeof *ids, COMPARE);                                  \
            return;                                                               \
        }                                                                         \
        TYPE *from = ids, *to = scratch;                                          \
        for (unsigned shift = 0; shift < 8 * sizeof(TYPE); shift += 8) {          \
            size_t count[256] = {0};                                              \
            for (size_t k = 0; k < n; k++)                                        \
                count[(from[k] >> shift) & 0xffu]++;                              \
            if (count[(from[0] >> shift) & 0xffu] == n)                           \
                continue; /* every id has this byte: already in its order */     \
            size_t at = 0;                                                        \
            for (unsigned b = 0; b < 256; b++) {                                  \
                size_t c = count[b];                                              \
                count[b] = at;                                                    \
                at += c;                                                          \
            }                                                                     \
            for (size_t k = 0; k < n; k++)                                        \
                to[count[(from[k] >> shift) & 0xffu]++] = from[k];                \
            TYPE *swap = from;                                                    \
            from = to;                                                            \
            to = swap;                                                            \
        }                                                                         \
        if (from != ids)                                                          \
            memcpy(ids, from, n * sizeof *ids);                                   \
        free(scratch);                                                            \
    }

LS_IDS_SORT(sort_u64, uint64_t, compare_u64)
LS_IDS_SORT(sort_u32, uint32_t, compare_u32)

size_t ls_ids_sort_unique_u64(uint64_t *ids, size_t n)
{
    if (n == 0)
        return 0;
    sort_u64(ids, n);
    size_t kept = 1;
    for (size_t i = 1; i < n; i++)
        if (ids[kept - 1] != ids[i])
            ids[kept++] = ids[i];
    return kept;
}

size_t ls_ids_sort_unique_u32(uint32_t *ids, size_t n)
{
    if (n == 0)
        return 0;
    sort_u32(ids, n);
    size_t kept = 1;
    for (size_t i = 1; i < n; i++)
        if (ids[kept - 1] != ids[i])
            ids[kept++] = ids[i];
    return kept;
}

/* The first index of id in the sorted set[0..n), or -1 (ls_search: a
 * bisection in line; bsearch called its comparison through a pointer each
 * step). */
ptrdiff_t ls_ids_find_u64(const uint64_t *set, size_t n, uint64_t id)
{
    size_t lo = ls_lower_bound_u64(set, n, id);
    return lo < n && set[lo] == id ? (ptrdiff_t)lo : -1;
}

ptrdiff_t ls_ids_find_u32(const uint32_t *set, size_t n, uint32_t id)
{
    size_t lo = ls_lower_bound_u32(set, n, id);
    return lo < n && set[lo] == id ? (ptrdiff_t)lo : -1;
}
