/* ls_radix: see ls_radix.h. */
#include "ls_radix.h"

#include "ls_bulk.h"

#include <stdlib.h>
#include <string.h>

enum { DIGITS = 8, BUCKETS = 256 };

unsigned ls_radix_width(uint64_t lo, uint64_t hi)
{
    uint64_t span = hi - lo;
    unsigned bits = 0;
    while (span != 0) {
        bits++;
        span >>= 1;
    }
    return bits;
}

ls_radix_packing ls_radix_packing_of(const uint64_t lo[3], const uint64_t hi[3])
{
    ls_radix_packing p = {{lo[0], lo[1], lo[2]}, {0, 0, 0}, 0};
    unsigned used = 0;
    for (int j = 0; j < 3; j++) {
        unsigned w = ls_radix_width(lo[j], hi[j]);
        if (used + w > 64)
            break;
        p.width[j] = w;
        used += w;
        p.fields++;
    }
    return p;
}

uint64_t ls_radix_pack(const ls_radix_packing *p, uint64_t k1, uint64_t k2, uint64_t k3)
{
    uint64_t k[3] = {k1, k2, k3}, out = 0;
    for (unsigned j = 0; j < p->fields; j++)
        if (p->width[j] > 0) /* a shift by 64 is undefined: only when out is still 0 */
            out = (p->width[j] < 64 ? out << p->width[j] : 0) | (k[j] - p->lo[j]);
    return out;
}

int ls_radix_sort(uint64_t *keys, uint32_t *values, size_t n)
{
    if (n < 2)
        return 0;
    /* One pass counts every digit; a digit whose keys all share one byte
     * is skipped (timestamps' high bytes, a lone device id). */
    size_t (*count)[BUCKETS] = calloc(DIGITS, sizeof *count);
    if (count == NULL)
        return -1;
    for (size_t i = 0; i < n; i++)
        for (unsigned d = 0; d < DIGITS; d++)
            count[d][(keys[i] >> (8 * d)) & 0xff]++;
    int passes = 0;
    for (unsigned d = 0; d < DIGITS; d++)
        passes += count[d][keys[0] >> (8 * d) & 0xff] != n;
    if (passes == 0) {
        free(count);
        return 0;
    }
    uint64_t *keys2 = ls_bulk_malloc(n * sizeof *keys2);
    uint32_t *values2 = ls_bulk_malloc(n * sizeof *values2);
    if (keys2 == NULL || values2 == NULL) {
        free(keys2);
        free(values2);
        free(count);
        return -1;
    }
    uint64_t *from_k = keys, *to_k = keys2;
    uint32_t *from_v = values, *to_v = values2;
    for (unsigned d = 0; d < DIGITS; d++) {
        unsigned shift = 8 * d;
        if (count[d][from_k[0] >> shift & 0xff] == n)
            continue;
        size_t at[BUCKETS], sum = 0;
        for (unsigned b = 0; b < BUCKETS; b++) {
            at[b] = sum;
            sum += count[d][b];
        }
        for (size_t i = 0; i < n; i++) {
            size_t slot = at[from_k[i] >> shift & 0xff]++;
            to_k[slot] = from_k[i];
            to_v[slot] = from_v[i];
        }
        uint64_t *tk = from_k;
        from_k = to_k;
        to_k = tk;
        uint32_t *tv = from_v;
        from_v = to_v;
        to_v = tv;
    }
    if (from_k != keys) { /* an odd number of passes: the result is in the second buffer */
        memcpy(keys, from_k, n * sizeof *keys);
        memcpy(values, from_v, n * sizeof *values);
    }
    free(keys2);
    free(values2);
    free(count);
    return 0;
}

void ls_radix_permute(void *items, size_t size, uint32_t *perm, size_t n)
{
    unsigned char held[64];
    unsigned char *base = items;
    for (size_t i = 0; i < n; i++) {
        if (perm[i] == i)
            continue;
        /* Follow the cycle through i: each slot takes its source's item. */
        memcpy(held, base + i * size, size);
        size_t j = i;
        for (;;) {
            size_t k = perm[j];
            perm[j] = (uint32_t)j;
            if (k == i) {
                memcpy(base + j * size, held, size);
                break;
            }
            memcpy(base + j * size, base + k * size, size);
            j = k;
        }
    }
}

void ls_radix_sort_items(void *items, size_t size, size_t n,
                         void (*fields)(const void *item, uint64_t out[3]),
                         int (*compare)(const void *, const void *))
{
    unsigned char *base = items;
    size_t i = 1;
    while (i < n && compare(base + (i - 1) * size, base + i * size) <= 0)
        i++;
    if (i >= n)
        return;
    uint64_t lo[3], hi[3], k[3];
    fields(base, lo);
    memcpy(hi, lo, sizeof hi);
    for (i = 1; i < n; i++) {
        fields(base + i * size, k);
        for (int j = 0; j < 3; j++) {
            lo[j] = k[j] < lo[j] ? k[j] : lo[j];
            hi[j] = k[j] > hi[j] ? k[j] : hi[j];
        }
    }
    ls_radix_packing p = ls_radix_packing_of(lo, hi);
    uint64_t *packed = n <= UINT32_MAX ? ls_bulk_malloc(n * sizeof *packed) : NULL;
    uint32_t *perm = packed != NULL ? ls_bulk_malloc(n * sizeof *perm) : NULL;
    if (perm == NULL) {
        free(packed);
        qsort(items, n, size, compare);
        return;
    }
    for (i = 0; i < n; i++) {
        fields(base + i * size, k);
        packed[i] = ls_radix_pack(&p, k[0], k[1], k[2]);
        perm[i] = (uint32_t)i;
    }
    if (ls_radix_sort(packed, perm, n) != 0) {
        free(packed);
        free(perm);
        qsort(items, n, size, compare);
        return;
    }
    ls_radix_permute(items, size, perm, n);
    free(perm);
    for (i = 0; i < n;) { /* the runs of one packed key: by the rest of the order */
        size_t j = i + 1;
        while (j < n && packed[j] == packed[i])
            j++;
        if (j - i > 1)
            qsort(base + i * size, j - i, size, compare);
        i = j;
    }
    free(packed);
}
