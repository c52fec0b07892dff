/* ls_bulk: see ls_bulk.h. */
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE */
#include "ls_bulk.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define HUGE_PAGE ((uintptr_t)2 << 20)
/* Below this an array holds at most one whole huge page: not worth a
 * mapping split. */
#define BULK_MIN_BYTES ((size_t)8 << 20)

static void advise_huge_pages(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    if (p == NULL || bytes < BULK_MIN_BYTES)
        return;
    /* Only whole, aligned 2 MiB extents can be huge pages: the advice covers
     * those and nothing outside the allocation.  A refusal (no THP in this
     * kernel) leaves ordinary pages: nothing to report. */
    uintptr_t start = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    uintptr_t end = ((uintptr_t)p + bytes) & ~(HUGE_PAGE - 1);
    if (end > start)
        (void)madvise((void *)start, end - start, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}

void *ls_bulk_malloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    advise_huge_pages(p, bytes);
    return p;
}

void *ls_bulk_calloc(size_t count, size_t size)
{
    /* A fresh mapping is zero without being touched, so the advice after
     * calloc still comes before the first write; a reused heap block was
     * touched, and keeps its pages. */
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (p != NULL && size && count <= SIZE_MAX / size)
        advise_huge_pages(p, count * size);
    return p;
}
