/* ls_model_order: see ls_model_order.h (split out of ls_model.c, issue 29). */
#include "ls_model_order.h"

#include "ls_bulk.h"
#include "ls_radix.h"

#include <stdlib.h>
#include <string.h>

static int compare_keys(const void *pa, const void *pb)
{
    const ls_key *a = pa, *b = pb;
    if (a->k1 != b->k1)
        return a->k1 < b->k1 ? -1 : 1;
    if (a->k2 != b->k2)
        return a->k2 < b->k2 ? -1 : 1;
    if (a->k3 != b->k3)
        return a->k3 < b->k3 ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

static void key_fields(const void *item, uint64_t out[3])
{
    const ls_key *key = item;
    out[0] = key->k1;
    out[1] = key->k2;
    out[2] = key->k3;
}

/* Sorts keys by compare_keys (ls_radix: keys in order already, as records
 * mostly arrive, cost one check; 10M shuffled keys took ~2.5 s in qsort
 * and its merge buffer of 32 B a key). */
void ls_model_sort_keys(ls_key *keys, size_t n)
{
    ls_radix_sort_items(keys, sizeof *keys, n, key_fields, compare_keys);
}
/* An op of a run of ties by its end: (end, index). */
typedef struct {
    uint64_t end_ns;
    uint32_t index;
} ls_end_key;

static int compare_ends(const void *pa, const void *pb)
{
    const ls_end_key *a = pa, *b = pb;
    if (a->end_ns != b->end_ns)
        return a->end_ns < b->end_ns ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

/* Orders each run of equal packed[] (ops equal in key and start, in index
 * order: the radix sort is stable) by (end, index), completing ls_model_sort_ops'
 * order when the end did not fit the packed key (wide time spans): ~20 B
 * an op of scratch instead of ls_model_sort_keys' 32 B keys and their 24 B.
 * Returns 0, or -1 when memory ran out. */
static int order_by_end(const ls_op *ops, const uint64_t *packed, uint32_t *out, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && packed[j] == packed[i])
            j++;
        if (j - i > 1 && j - i <= 16) { /* a few: insertion sort, no memory */
            for (size_t k = i + 1; k < j; k++) {
                uint32_t held = out[k];
                ls_end_key key = {ops[held].end_ns, held};
                size_t at = k;
                for (; at > i; at--) {
                    ls_end_key before = {ops[out[at - 1]].end_ns, out[at - 1]};
                    if (compare_ends(&before, &key) <= 0)
                        break;
                    out[at] = out[at - 1];
                }
                out[at] = held;
            }
        } else if (j - i > 1) {
            ls_end_key *run = ls_bulk_malloc((j - i) * sizeof *run);
            if (run == NULL)
                return -1;
            for (size_t k = i; k < j; k++)
                run[k - i] = (ls_end_key){ops[out[k]].end_ns, out[k]};
            qsort(run, j - i, sizeof *run, compare_ends);
            for (size_t k = i; k < j; k++)
                out[k] = run[k - i].index;
            free(run);
        }
        i = j;
    }
    return 0;
}

/* Sorts op indices by (k1 of the op, start, end, index) into out: 0, or
 * -1 when memory ran out.  Ops in that order already need no sort; when
 * the three fields pack into 64 bits (ls_radix_packing: timestamps spanning
 * under 2^64 ns less the device and stream bits) a radix sort of 12 B an
 * op gives the order (its ties stay in index order); otherwise keys of
 * 32 B an op go through ls_model_sort_keys. */
int ls_model_sort_ops(const ls_records *r, int by_stream, uint32_t *out)
{
    size_t n = r->ops.count;
    const ls_op *ops = r->ops.items;
    size_t i = 1;
#define OP_KEY(op) (by_stream ? ((uint64_t)(op)->device_id << 32) | (op)->stream_id \
                              : (op)->device_id)
    for (; i < n; i++) {
        const ls_op *a = &ops[i - 1], *b = &ops[i];
        if (OP_KEY(a) != OP_KEY(b) ? OP_KEY(a) > OP_KEY(b)
            : a->start_ns != b->start_ns ? a->start_ns > b->start_ns
                                         : a->end_ns > b->end_ns)
            break;
    }
    for (size_t k = 0; k < n; k++)
        out[k] = (uint32_t)k;
    if (i >= n)
        return 0;
    uint64_t lo[3] = {OP_KEY(&ops[0]), ops[0].start_ns, ops[0].end_ns};
    uint64_t hi[3] = {lo[0], lo[1], lo[2]};
    for (i = 1; i < n; i++) {
        uint64_t k[3] = {OP_KEY(&ops[i]), ops[i].start_ns, ops[i].end_ns};
        for (int j = 0; j < 3; j++) {
            lo[j] = k[j] < lo[j] ? k[j] : lo[j];
            hi[j] = k[j] > hi[j] ? k[j] : hi[j];
        }
    }
    ls_radix_packing p = ls_radix_packing_of(lo, hi);
    if (p.fields >= 2) {
        uint64_t *packed = ls_bulk_malloc(n * sizeof *packed);
        int rc = -1;
        if (packed != NULL) {
            for (i = 0; i < n; i++)
                packed[i] = ls_radix_pack(&p, OP_KEY(&ops[i]), ops[i].start_ns, ops[i].end_ns);
            rc = ls_radix_sort(packed, out, n);
            if (rc == 0 && p.fields == 2) /* the end left out: ties on (key, start) */
                rc = order_by_end(ops, packed, out, n);
        }
        free(packed);
        if (rc == 0)
            return 0;
        for (size_t k = 0; k < n; k++) /* the radix sort leaves out as it was */
            out[k] = (uint32_t)k;
    }
    ls_key *keys = ls_bulk_malloc(n * sizeof *keys);
    if (keys == NULL)
        return -1;
    for (i = 0; i < n; i++)
        keys[i] = (ls_key){OP_KEY(&ops[i]), ops[i].start_ns, ops[i].end_ns, (uint32_t)i};
#undef OP_KEY
    ls_model_sort_keys(keys, n);
    for (i = 0; i < n; i++)
        out[i] = keys[i].index;
    free(keys);
    return 0;
}

static uint64_t stream_key(const ls_op *op)
{
    return ((uint64_t)op->device_id << 32) | op->stream_id;
}

static size_t stream_slot(const ls_stream_set *set, uint64_t key)
{
    uint64_t h = key * 0x9E3779B97F4A7C15ULL;
    size_t at = (size_t)(h >> 32) & set->slot_mask;
    while (set->slots[at] && set->keys[set->slots[at] - 1] != key)
        at = (at + 1) & set->slot_mask;
    return at;
}

/* slots[] of the stream `key`: 1 + its index into keys, 0 when absent. */
static uint32_t stream_index(ls_stream_set *set, uint64_t key)
{
    size_t m = (size_t)key % STREAM_MEMO;
    if (set->memo_slot[m] != 0 && set->memo_key[m] == key)
        return set->memo_slot[m];
    uint32_t found = set->slots[stream_slot(set, key)];
    set->memo_key[m] = key;
    set->memo_slot[m] = found;
    return found;
}

static int compare_u64(const void *pa, const void *pb)
{
    uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
    return (a > b) - (a < b);
}

void ls_model_stream_set_free(ls_stream_set *set)
{
    free(set->keys);
    free(set->slots);
    memset(set, 0, sizeof *set);
}

/* The distinct streams of the records, in (device, stream) order, with
 * each one's slot pointing at its place there: 0; 1 when there are more
 * than the table takes (set freed: sort instead); -1 when memory ran out. */
int ls_model_distinct_streams(const ls_records *r, ls_stream_set *set)
{
    const ls_op *ops = r->ops.items;
    memset(set, 0, sizeof *set);
    set->cap = STREAM_ORDER_MAX_STREAMS;
    set->slot_mask = 2 * (size_t)STREAM_ORDER_MAX_STREAMS - 1;
    set->keys = malloc(set->cap * sizeof *set->keys);
    set->slots = calloc(set->slot_mask + 1, sizeof *set->slots);
    if (set->keys == NULL || set->slots == NULL) {
        ls_model_stream_set_free(set);
        return -1;
    }
    for (size_t i = 0; i < r->ops.count; i++) {
        uint64_t key = stream_key(&ops[i]);
        if ((i > 0 && key == stream_key(&ops[i - 1])) || stream_index(set, key) != 0)
            continue;
        if (set->count == set->cap) {
            ls_model_stream_set_free(set);
            return 1;
        }
        set->keys[set->count++] = key;
        set->slots[stream_slot(set, key)] = (uint32_t)set->count;
    }
    qsort(set->keys, set->count, sizeof *set->keys, compare_u64);
    memset(set->slots, 0, (set->slot_mask + 1) * sizeof *set->slots);
    memset(set->memo_slot, 0, sizeof set->memo_slot);
    for (size_t k = 0; k < set->count; k++)
        set->slots[stream_slot(set, set->keys[k])] = (uint32_t)(k + 1);
    return 0;
}

/* The stream order (device, stream, start, end, index) from the device
 * order (device, start, end, index) in *order, which it replaces: a stable
 * partition by stream (the streams of `set`) keeps each stream's ops in the
 * order they had, so two passes replace a sort of every op again (each
 * op's stream looked up in both: no array of them written).  0, or -1
 * when memory ran out (*order kept). */
int ls_model_stream_order_from_device_order(const ls_records *r, ls_stream_set *set,
                                            uint32_t **order)
{
    size_t n = r->ops.count;
    const ls_op *ops = r->ops.items;
    const uint32_t *from = *order;
    size_t *first = calloc(set->count + 1, sizeof *first);
    uint32_t *by_stream = ls_bulk_malloc((n ? n : 1) * sizeof *by_stream);
    if (first == NULL || by_stream == NULL) {
        free(first);
        free(by_stream);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        first[stream_index(set, stream_key(&ops[from[i]]))]++; /* 1 + index: counts shifted */
    for (size_t k = 0; k < set->count; k++)
        first[k + 1] += first[k];
    for (size_t i = 0; i < n; i++)
        by_stream[first[stream_index(set, stream_key(&ops[from[i]])) - 1]++] = from[i];
    free(first);
    free(*order);
    *order = by_stream;
    return 0;
}
