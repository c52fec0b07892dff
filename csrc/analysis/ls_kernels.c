/* ls_kernels: see ls_kernels.h. */
#include "ls_kernels.h"

#include <stdlib.h>
#include <string.h>

#define WARP 32

double ls_kernels_fill(const ls_op *op, const ls_device_facts *device)
{
    if (op->kind != LS_OP_KERNEL || device == NULL || device->sm_count == 0 ||
        device->max_threads_per_sm == 0)
        return -1.0;
    uint64_t threads = (uint64_t)op->block_x * op->block_y * op->block_z;
    uint64_t blocks = (uint64_t)op->grid_x * op->grid_y * op->grid_z;
    if (threads == 0 || blocks == 0)
        return -1.0;
    uint64_t slot_threads = (threads + WARP - 1) / WARP * WARP; /* whole warps */
    uint64_t per_sm = device->max_threads_per_sm / slot_threads;
    if (device->max_blocks_per_sm && device->max_blocks_per_sm < per_sm)
        per_sm = device->max_blocks_per_sm;
    if (op->registers && device->registers_per_sm) {
        uint64_t by_registers = device->registers_per_sm / ((uint64_t)op->registers * slot_threads);
        if (by_registers < per_sm)
            per_sm = by_registers;
    }
    if (op->shared_bytes && device->shared_bytes_per_sm) {
        uint64_t by_shared = device->shared_bytes_per_sm / op->shared_bytes;
        if (by_shared < per_sm)
            per_sm = by_shared;
    }
    if (per_sm == 0)
        per_sm = 1; /* it ran, so at least one block fitted */
    uint64_t slots = per_sm * device->sm_count;
    return (double)(blocks < slots ? blocks : slots) / (double)slots;
}

/* -- the kernels by name --------------------------------------------------
 *
 * One pass over the records adds each kernel to its shape (name, grid,
 * block, registers, shared memory) in a hash table; the shapes, a few per
 * name in practice, are then sorted and folded into one entry per name.
 * No per-kernel key array is written: at 10M kernels the sort keys were
 * 320 MB of fresh pages, more time than the sort. */

/* A shape's launches; the shape itself is that of its first launch. */
typedef struct {
    const ls_op *first;         /* its first launch: the shape's key */
    uint32_t last_op;           /* its last launch's record index */
    uint64_t count, total_ns, max_ns, shaped_ns;
    uint64_t first_ns;          /* its earliest launch's start */
    double filled_ns;
} ls_shape_sum;

typedef struct {
    ls_shape_sum *items;
    size_t count, cap;
    uint32_t *slots; /* 1 + index into items, 0 empty; a power of two of them */
    size_t slot_mask;
} ls_shape_set;

static int same_shape(const ls_op *a, const ls_op *b)
{
    return a->name_id == b->name_id && ls_op_same_geometry(a, b);
}

static uint64_t shape_hash(const ls_op *op)
{
    uint64_t h = 0x9e3779b97f4a7c15u;
    const uint64_t parts[5] = {
        op->name_id, op->grid_x, ((uint64_t)op->grid_y << 32) | op->grid_z,
        ((uint64_t)op->block_x << 48) | ((uint64_t)op->block_y << 32) |
            ((uint64_t)op->block_z << 16) | op->registers,
        op->shared_bytes};
    for (int i = 0; i < 5; i++) {
        h ^= parts[i];
        h *= 0xff51afd7ed558ccdu;
        h ^= h >> 32;
    }
    return h;
}

static int shape_set_grow(ls_shape_set *set)
{
    size_t slots = set->slot_mask ? 2 * (set->slot_mask + 1) : 64;
    uint32_t *bigger = calloc(slots, sizeof *bigger);
    if (bigger == NULL)
        return -1;
    for (size_t k = 0; k < set->count; k++) {
        size_t at = shape_hash(set->items[k].first) & (slots - 1);
        while (bigger[at])
            at = (at + 1) & (slots - 1);
        bigger[at] = (uint32_t)(k + 1);
    }
    free(set->slots);
    set->slots = bigger;
    set->slot_mask = slots - 1;
    return 0;
}

/* The shape of ops[i], added when new; NULL when memory ran out. */
static ls_shape_sum *shape_of(ls_shape_set *set, const ls_op *ops, uint32_t i)
{
    if (2 * (set->count + 1) > set->slot_mask + 1 && shape_set_grow(set) != 0)
        return NULL;
    size_t at = shape_hash(&ops[i]) & set->slot_mask;
    for (; set->slots[at]; at = (at + 1) & set->slot_mask) {
        ls_shape_sum *sum = &set->items[set->slots[at] - 1];
        if (same_shape(sum->first, &ops[i]))
            return sum;
    }
    if (set->count == set->cap) {
        size_t cap = set->cap ? 2 * set->cap : 64;
        ls_shape_sum *bigger = realloc(set->items, cap * sizeof *bigger);
        if (bigger == NULL)
            return NULL;
        set->items = bigger;
        set->cap = cap;
    }
    ls_shape_sum *sum = &set->items[set->count++];
    memset(sum, 0, sizeof *sum);
    sum->first = &ops[i];
    sum->last_op = i;
    set->slots[at] = (uint32_t)set->count;
    return sum;
}

/* Shapes by name, then grid, block, registers and shared memory: the order
 * that breaks a tie for a name's main shape. */
static int compare_shape_sums(const void *pa, const void *pb)
{
    const ls_op *a = ((const ls_shape_sum *)pa)->first;
    const ls_op *b = ((const ls_shape_sum *)pb)->first;
#define BY(f) \
    if (a->f != b->f) \
        return a->f < b->f ? -1 : 1;
    BY(name_id) BY(grid_x) BY(grid_y) BY(grid_z) BY(block_x) BY(block_y) BY(block_z)
    BY(registers) BY(shared_bytes)
#undef BY
    return 0;
}

/* The most time first; on a tie the earlier first launch, then the name
 * id.  Not the name id alone: ids follow the order names were first
 * interned, which depends on the records' order and on what other live
 * captures hold, so the same records could list their ties apart. */
static int compare_entries(const void *pa, const void *pb)
{
    const ls_kernel_entry *a = pa, *b = pb;
    if (a->total_ns != b->total_ns)
        return a->total_ns > b->total_ns ? -1 : 1;
    if (a->first_ns != b->first_ns)
        return a->first_ns < b->first_ns ? -1 : 1;
    return (a->name_id > b->name_id) - (a->name_id < b->name_id);
}

int ls_kernels_table(const ls_records *r, const double *op_fill, ls_kernel_table *out)
{
    memset(out, 0, sizeof *out);
    const ls_op *ops = r->ops.items;
    ls_shape_set set = {0};
    ls_shape_sum *sum = NULL; /* the previous kernel's: launches repeat their shape */
    int result = -1;
    for (size_t i = 0; i < r->ops.count; i++) {
        const ls_op *op = &ops[i];
        if (op->kind != LS_OP_KERNEL)
            continue;
        if (sum == NULL || !same_shape(&ops[sum->last_op], op)) {
            sum = shape_of(&set, ops, (uint32_t)i);
            if (sum == NULL)
                goto done;
        }
        uint64_t d = op->end_ns - op->start_ns;
        sum->last_op = (uint32_t)i;
        if (sum->count == 0 || op->start_ns < sum->first_ns)
            sum->first_ns = op->start_ns;
        sum->count++;
        sum->total_ns += d;
        if (d > sum->max_ns)
            sum->max_ns = d;
        if (op_fill[i] >= 0) {
            sum->shaped_ns += d;
            sum->filled_ns += (double)d * op_fill[i];
        }
    }
    /* The shapes are few (one per name and launch geometry), so this sort
     * and the names' array are small.  No kernel: no array (qsort wants one). */
    if (set.count > 1)
        qsort(set.items, set.count, sizeof *set.items, compare_shape_sums);
    out->items = malloc((set.count ? set.count : 1) * sizeof *out->items);
    if (out->items == NULL)
        goto done;
    ls_kernel_entry *e = NULL;
    for (size_t k = 0; k < set.count; k++) {
        const ls_shape_sum *s = &set.items[k];
        uint32_t name_id = s->first->name_id;
        if (e == NULL || name_id != e->name_id) {
            e = &out->items[out->count++];
            memset(e, 0, sizeof *e);
            e->name_id = name_id;
            e->first_ns = s->first_ns;
        }
        if (s->first_ns < e->first_ns)
            e->first_ns = s->first_ns;
        e->shapes++;
        e->count += s->count;
        e->total_ns += s->total_ns;
        if (s->max_ns > e->max_ns)
            e->max_ns = s->max_ns;
        e->shaped_ns += s->shaped_ns;
        e->filled_ns += s->filled_ns;
        /* The main shape: the most time, the first in shape order on a tie. */
        if (e->shapes == 1 || s->total_ns > e->shape_ns) {
            e->shape_ns = s->total_ns;
            e->shape_count = s->count;
            e->shape = ops[s->last_op];
        }
    }
    qsort(out->items, out->count, sizeof *out->items, compare_entries);
    result = 0;
done:
    free(set.items);
    free(set.slots);
    if (result != 0)
        ls_kernels_free(out);
    return result;
}

void ls_kernels_free(ls_kernel_table *t)
{
    free(t->items);
    memset(t, 0, sizeof *t);
}
