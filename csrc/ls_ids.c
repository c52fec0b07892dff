/* ls_ids: see ls_ids.h. */
#include "ls_ids.h"

#include <stdlib.h>

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

size_t ls_ids_sort_unique_u64(uint64_t *ids, size_t n)
{
    if (n == 0)
        return 0;
    qsort(ids, n, sizeof *ids, compare_u64);
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
    qsort(ids, n, sizeof *ids, compare_u32);
    size_t kept = 1;
    for (size_t i = 1; i < n; i++)
        if (ids[kept - 1] != ids[i])
            ids[kept++] = ids[i];
    return kept;
}

ptrdiff_t ls_ids_find_u64(const uint64_t *set, size_t n, uint64_t id)
{
    const uint64_t *hit = n ? bsearch(&id, set, n, sizeof id, compare_u64) : NULL;
    return hit != NULL ? hit - set : -1;
}

ptrdiff_t ls_ids_find_u32(const uint32_t *set, size_t n, uint32_t id)
{
    const uint32_t *hit = n ? bsearch(&id, set, n, sizeof id, compare_u32) : NULL;
    return hit != NULL ? hit - set : -1;
}
