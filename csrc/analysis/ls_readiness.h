/* ls_readiness: per step, what a CUDA graph capture of the step would meet,
 * and how the steps that already replay graphs spend their host time, in
 * pure C over the records and the model's attribution.
 *
 * - Graph replays: cudaGraphLaunch calls (runtime API) of the step or, in
 *   a capture with none, cuGraphLaunch calls (driver API): the runtime's
 *   call makes a driver one inside it, so only one domain is counted.  A
 *   step (or capture) with no such call but replays traced whole (LS_OP_GRAPH
 *   ops, graph-level mode; their launch calls not recorded, or recorded with
 *   no call name) counts those replay ops instead.  The
 *   host time between replays: for each replay, the time from the end of
 *   the previous replay's launch call on the same thread to the start of
 *   its own (everything the host did in between), counted in the step of
 *   the later one.
 * - Memory calls a capture refuses: allocations and frees that are not
 *   stream ordered (cudaMalloc, cudaFree, cuMemAlloc, ...); a driver call
 *   inside a runtime one on the same thread is the same allocation and
 *   counts once.  Stream-ordered ones (cudaMallocAsync, cudaFreeAsync, ...)
 *   are counted apart: a capture takes them as graph memory nodes.
 * - Pageable host-to-device copies (a capture cannot copy from pageable
 *   memory), with the call that launched the first one where recorded, and
 *   the host time inside the calls that launched them (the copy blocks the
 *   host: a graph leaves that time in place until the memory is pinned).
 * - Launch calls (the whole capture only, not per step): the calls that put
 *   a kernel, copy or set on a stream (graph replays apart), runtime ones or,
 *   in a capture with none, driver ones (one domain, as for replays).  A
 *   capture whose launch calls far outnumber its GPU ops recorded a graph
 *   capture (launches into a capturing stream run nothing).
 * - A signature of the step's GPU work: a multiset hash over its ops of
 *   (kind, name, grid, block, registers, shared memory, bytes, copy kind),
 *   so two steps that run the same kernels with the same shapes, in any
 *   order, have the same signature, and a step whose kernel count or grid
 *   changes (dynamic shapes) has another.
 *
 * Cost: O((A + C + O) log (A + C)) for A API records, C calls, O ops. */
#ifndef LS_READINESS_H
#define LS_READINESS_H

#include "ls_records.h"

#include <stddef.h>
#include <stdint.h>

#define LS_READINESS_NONE (-1)

typedef struct {
    uint64_t graph_launches;     /* replays launched in the step */
    uint64_t replay_host_ns;     /* host time before those replays (see above) ... */
    uint64_t replay_pairs;       /* ... over this many of them (the first has no previous) */
    uint64_t memory_calls;       /* allocations and frees a capture refuses */
    int64_t first_memory_call;   /* index into records->calls, LS_READINESS_NONE */
    uint64_t stream_ordered;     /* stream-ordered allocations and frees */
    uint64_t pageable_copies;    /* pageable host-to-device copies */
    int64_t first_pageable_op;   /* index into records->ops, LS_READINESS_NONE */
    int64_t first_pageable_call; /* the call that launched it, LS_READINESS_NONE */
    uint64_t pageable_call_ns;   /* host time in the recorded calls that launched them */
    uint64_t ops;                /* GPU ops of the step */
    uint64_t replay_ops;         /* of them, whole graph replays (LS_OP_GRAPH) */
    uint64_t signature;          /* multiset hash of its ops (0 with no op) */
    uint64_t launch_calls;       /* total only: launch calls (graph replays apart) */
} ls_step_readiness;

typedef struct {
    ls_step_readiness *steps; /* per step number */
    size_t count;
    ls_step_readiness total;  /* the whole capture, inside steps or not */
} ls_readiness;

/* Builds the readiness of `step_count` steps.  op_step[i], call_step[i] and
 * api_step[i] give the step (-1 none) of op i, call i and API record i
 * (api_step is read for graph launches only).
 * 0, or -1 when memory ran out (out is then empty).  Free `out` with
 * ls_readiness_free. */
int ls_readiness_build(const ls_records *r, size_t step_count, const int32_t *op_step,
                       const int32_t *call_step, const int32_t *api_step, ls_readiness *out);

void ls_readiness_free(ls_readiness *x);

#endif
