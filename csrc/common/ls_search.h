/* ls_search: the one binary search of the C core.
 *
 * ls_partition_point(lo, hi, before, ctx) is the first i in [lo, hi) for
 * which before(i, ctx) is 0, or hi when there is none, given a before()
 * that holds on a prefix of the range and never after it (C++'s
 * std::partition_point).  The caller's predicate decides the bound and its
 * ties: "item i < v" gives the first item >= v (a lower bound), "item i <=
 * v" the first item > v (an upper bound).  Below it: that lower bound over
 * items sorted by a qsort comparison (ls_lower_bound), and the bounds over
 * sorted arrays of plain ids and times.
 *
 * Inline, with the predicate a static function of the caller, so the
 * compiler inlines it too: no call through a pointer at each step, as
 * bsearch() makes.  Pure C; cannot fail. */
#ifndef LS_SEARCH_H
#define LS_SEARCH_H

#include <stddef.h>
#include <stdint.h>

typedef int (*ls_before_fn)(size_t i, const void *ctx);

static inline size_t ls_partition_point(size_t lo, size_t hi, ls_before_fn before,
                                        const void *ctx)
{
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (before(mid, ctx))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The first of items[0..n) (each `size` bytes, sorted by `compare`, or
 * consistently with it) that compares >= *key, n when none. */
typedef struct {
    const char *items;
    size_t size;
    const void *key;
    int (*compare)(const void *, const void *);
} ls_compare_key;

static inline int ls_compares_below(size_t i, const void *ctx)
{
    const ls_compare_key *k = ctx;
    return k->compare(k->items + i * k->size, k->key) < 0;
}

static inline size_t ls_lower_bound(const void *items, size_t n, size_t size, const void *key,
                                    int (*compare)(const void *, const void *))
{
    return ls_partition_point(0, n, ls_compares_below,
                              &(ls_compare_key){items, size, key, compare});
}

/* The lower bounds (the first i in [0, n) with a[i] >= v) and an upper
 * bound (a[i] > v) over sorted arrays; n when none. */
typedef struct { const uint64_t *a; uint64_t v; } ls_key_u64;
typedef struct { const uint32_t *a; uint32_t v; } ls_key_u32;
typedef struct { const int64_t *a; int64_t v; } ls_key_i64;

static inline int ls_below_u64(size_t i, const void *key)
{
    const ls_key_u64 *k = key;
    return k->a[i] < k->v;
}

static inline int ls_below_u32(size_t i, const void *key)
{
    const ls_key_u32 *k = key;
    return k->a[i] < k->v;
}

static inline int ls_below_i64(size_t i, const void *key)
{
    const ls_key_i64 *k = key;
    return k->a[i] < k->v;
}

static inline int ls_not_above_u64(size_t i, const void *key)
{
    const ls_key_u64 *k = key;
    return k->a[i] <= k->v;
}

static inline size_t ls_lower_bound_u64(const uint64_t *a, size_t n, uint64_t v)
{
    return ls_partition_point(0, n, ls_below_u64, &(ls_key_u64){a, v});
}

static inline size_t ls_lower_bound_u32(const uint32_t *a, size_t n, uint32_t v)
{
    return ls_partition_point(0, n, ls_below_u32, &(ls_key_u32){a, v});
}

static inline size_t ls_upper_bound_u64(const uint64_t *a, size_t n, uint64_t v)
{
    return ls_partition_point(0, n, ls_not_above_u64, &(ls_key_u64){a, v});
}

static inline size_t ls_lower_bound_i64(const int64_t *a, size_t n, int64_t v)
{
    return ls_partition_point(0, n, ls_below_i64, &(ls_key_i64){a, v});
}

#endif
