/* ls_kernels: how much of its GPU a kernel's launch can fill, and the
 * kernels by name (the time each name took and its launch shape), in pure
 * C over the records.
 *
 * Fill: the share of the device's block slots that the grid can occupy at
 * once.  A block of T threads takes ceil(T / 32) warps; an SM holds
 * L = min(max blocks per SM, max threads per SM / (warps x 32), registers
 * per SM / (registers per thread x warps x 32), shared memory per SM /
 * shared memory per block) such blocks (at least 1; a limit whose figure
 * is unknown is left out).  A grid of B blocks fills
 * min(B, SMs x L) / (SMs x L) of the device.  So a grid of fewer blocks
 * than the GPU can hold at once leaves SMs or their warp slots empty
 * however long it runs, while a big GEMM whose registers allow one block
 * per SM still fills every slot there is.  Register and shared-memory
 * allocation granularity is ignored: the figure is an upper bound, good to
 * a few percent. */
#ifndef LS_KERNELS_H
#define LS_KERNELS_H

#include "ls_records.h"

#include <stddef.h>
#include <stdint.h>

/* The fill of one op (0 < fill <= 1), or -1 when it is not a kernel, its
 * grid or block is unknown, or `device` is NULL or lacks the SM count or
 * threads per SM. */
double ls_kernels_fill(const ls_op *op, const ls_device_facts *device);

/* One kernel name: all its launches, and the launch shape (grid, block,
 * registers, shared memory) that took the most time. */
typedef struct {
    uint32_t name_id;        /* LS_NO_NAME (ls_names) when the records had none */
    uint32_t shapes;         /* distinct launch shapes */
    uint64_t count, total_ns, max_ns;
    uint64_t first_ns;       /* its earliest launch's start */
    uint64_t shaped_ns;      /* time of its launches whose fill is known */
    double filled_ns;        /* their durations, each times its fill */
    uint64_t shape_count, shape_ns; /* launches and time of the main shape */
    ls_op shape;             /* a launch of the main shape (geometry and device fields) */
} ls_kernel_entry;

typedef struct {
    ls_kernel_entry *items;  /* longest total time first; ties by the earlier first
                                launch, then by name id */
    size_t count;
} ls_kernel_table;

/* The kernels of `r` by name; op_fill[i] is op i's fill (ls_kernels_fill,
 * -1 unknown).  0, or -1 when memory ran out (out is then empty).  Free
 * `out` with ls_kernels_free. */
int ls_kernels_table(const ls_records *r, const double *op_fill, ls_kernel_table *out);

void ls_kernels_free(ls_kernel_table *t);

#endif
