/* ls_threads: see ls_threads.h. */
#include "ls_threads.h"

#include <stdint.h>
#include <stdlib.h>

#include "ls_ids.h"
#include "ls_search.h"

/* Whole ids ordered by their lower 32 bits (then by themselves). */
static int compare_low(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    uint32_t lx = (uint32_t)x, ly = (uint32_t)y;
    if (lx != ly)
        return lx < ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* The one id of by_low[0..n) whose lower 32 bits are `low`, 0 when none
 * or more than one. */
static uint64_t only_with_low(const uint64_t *by_low, size_t n, uint32_t low)
{
    uint64_t key = low; /* the least id with these lower bits */
    size_t lo = ls_lower_bound(by_low, n, sizeof *by_low, &key, compare_low);
    if (lo == n || (uint32_t)by_low[lo] != low)
        return 0;
    if (lo + 1 < n && (uint32_t)by_low[lo + 1] == low)
        return 0; /* two threads share those bits: which one is unknown */
    return by_low[lo];
}

long ls_threads_widen_api_ids(ls_records *r)
{
    size_t nr = r->ranges.count, nc = r->calls.count, na = r->apis.count;
    if (na == 0)
        return 0;
    size_t room = nr + nc + na;
    uint64_t *known = malloc((nr + nc + 1) * sizeof *known); /* ids ranges and calls use */
    uint64_t *whole = malloc(room * sizeof *whole);          /* ids wider than 32 bits */
    if (known == NULL || whole == NULL) {
        free(known);
        free(whole);
        return -1;
    }
    size_t nk = 0, nw = 0;
    for (size_t i = 0; i < nr; i++)
        known[nk++] = r->ranges.items[i].thread_id;
    for (size_t i = 0; i < nc; i++)
        known[nk++] = r->calls.items[i].thread_id;
    for (size_t i = 0; i < nk; i++)
        if (known[i] > UINT32_MAX)
            whole[nw++] = known[i];
    /* A thread's launches come in runs: each run adds its id once (the
     * sort below drops repeats anyway, but sorting 36,000 copies of one
     * id cost more than the rest of the finish's record work). */
    for (size_t i = 0; i < na; i++) {
        uint64_t id = r->apis.items[i].thread_id;
        if (id > UINT32_MAX && (i == 0 || id != r->apis.items[i - 1].thread_id))
            whole[nw++] = id;
    }
    nk = ls_ids_sort_unique_u64(known, nk);
    nw = ls_ids_sort_unique_u64(whole, nw);
    qsort(whole, nw, sizeof *whole, compare_low);
    long widened = 0;
    for (size_t i = 0; i < na; i++) {
        ls_api *a = &r->apis.items[i];
        if (a->thread_id == 0 || a->thread_id > UINT32_MAX || ls_ids_find_u64(known, nk, a->thread_id) >= 0)
            continue;
        uint64_t id = only_with_low(whole, nw, (uint32_t)a->thread_id);
        if (id != 0) {
            a->thread_id = id;
            widened++;
        }
    }
    free(known);
    free(whole);
    return widened;
}
