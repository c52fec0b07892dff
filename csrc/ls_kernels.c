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

/* A kernel launch as a sort key: its name, then its shape. */
typedef struct {
    uint32_t name_id, grid_x, shared_bytes, index;
    uint16_t grid_y, grid_z, block_x, block_y, block_z, registers;
} ls_shape_key;

static int compare_shapes(const void *pa, const void *pb)
{
    const ls_shape_key *a = pa, *b = pb;
#define BY(f) \
    if (a->f != b->f) \
        return a->f < b->f ? -1 : 1;
    BY(name_id) BY(grid_x) BY(grid_y) BY(grid_z) BY(block_x) BY(block_y) BY(block_z)
    BY(registers) BY(shared_bytes) BY(index)
#undef BY
    return 0;
}

static int same_shape(const ls_shape_key *a, const ls_shape_key *b)
{
    return a->grid_x == b->grid_x && a->grid_y == b->grid_y && a->grid_z == b->grid_z &&
           a->block_x == b->block_x && a->block_y == b->block_y && a->block_z == b->block_z &&
           a->registers == b->registers && a->shared_bytes == b->shared_bytes;
}

static int compare_entries(const void *pa, const void *pb)
{
    const ls_kernel_entry *a = pa, *b = pb;
    if (a->total_ns != b->total_ns)
        return a->total_ns > b->total_ns ? -1 : 1;
    return (a->name_id > b->name_id) - (a->name_id < b->name_id);
}

int ls_kernels_table(const ls_records *r, const double *op_fill, ls_kernel_table *out)
{
    memset(out, 0, sizeof *out);
    size_t n = 0;
    for (size_t i = 0; i < r->ops.count; i++)
        n += r->ops.items[i].kind == LS_OP_KERNEL;
    ls_shape_key *keys = malloc((n ? n : 1) * sizeof *keys);
    out->items = malloc((n ? n : 1) * sizeof *out->items);
    if (keys == NULL || out->items == NULL) {
        free(keys);
        ls_kernels_free(out);
        return -1;
    }
    size_t k = 0;
    for (size_t i = 0; i < r->ops.count; i++) {
        const ls_op *op = &r->ops.items[i];
        if (op->kind == LS_OP_KERNEL)
            keys[k++] = (ls_shape_key){op->name_id, op->grid_x, op->shared_bytes, (uint32_t)i,
                                       op->grid_y, op->grid_z, op->block_x, op->block_y,
                                       op->block_z, op->registers};
    }
    /* in order already when every kernel has one name and shape (a sort of
     * 10M equal keys costs ~1 s; the check, a pass) */
    for (size_t i = 1; i < n; i++)
        if (compare_shapes(&keys[i - 1], &keys[i]) > 0) {
            qsort(keys, n, sizeof *keys, compare_shapes);
            break;
        }
    ls_kernel_entry *e = NULL;
    uint64_t run_ns = 0, run_count = 0; /* the current shape's */
    for (size_t i = 0; i < n; i++) {
        const ls_op *op = &r->ops.items[keys[i].index];
        uint64_t d = op->end_ns - op->start_ns;
        if (e == NULL || keys[i].name_id != e->name_id) {
            e = &out->items[out->count++];
            memset(e, 0, sizeof *e);
            e->name_id = keys[i].name_id;
        }
        if (i == 0 || keys[i].name_id != keys[i - 1].name_id || !same_shape(&keys[i], &keys[i - 1])) {
            e->shapes++;
            run_ns = run_count = 0;
        }
        run_ns += d;
        run_count++;
        if (run_ns > e->shape_ns || e->shape_count == 0) {
            e->shape_ns = run_ns;
            e->shape_count = run_count;
            e->shape = *op;
        }
        e->count++;
        e->total_ns += d;
        if (d > e->max_ns)
            e->max_ns = d;
        if (op_fill[keys[i].index] >= 0) {
            e->shaped_ns += d;
            e->filled_ns += (double)d * op_fill[keys[i].index];
        }
    }
    free(keys);
    qsort(out->items, out->count, sizeof *out->items, compare_entries);
    return 0;
}

void ls_kernels_free(ls_kernel_table *t)
{
    free(t->items);
    memset(t, 0, sizeof *t);
}
