/* ls_graphs: graph-level mode (issue 27), for the whole process.
 *
 * CUPTI's graph-level trace gives one record per CUDA-graph replay and
 * none per node: a graph loop pays ~2% for it, where per-kernel records
 * cost it 11-14% (GPU_FACTS.md).  But CUPTI crashes the process when it
 * replays, with the kind on, a graph exec instantiated while the kind was
 * off; and loopscope cannot see instantiations between profiles (it holds
 * no CUPTI subscription then, which torch.profiler needs).  So the kind is
 * turned on once, before the process has a CUDA context (no exec can exist
 * yet), and stays on: every exec is instantiated with it on.  Profiles then
 * trace each replay whole (LS_OP_GRAPH) and eager kernels one by one.
 * Between profiles the replays' records are thrown away (ls_activity). */
#ifndef LS_GRAPHS_H
#define LS_GRAPHS_H

#include <stddef.h>

/* Turns graph-level mode on.  0 (also when it already was), or -1 with a
 * sentence in `why`: no NVIDIA driver, a CUDA context already exists (or
 * the driver cannot tell), CUPTI cannot be loaded or refused the kind.
 * Call with no profile running. */
int ls_graphs_prepare(const char *const *cupti_paths, size_t n, char *why, size_t why_size);

/* 1 once graph-level mode is on in this process. */
int ls_graphs_prepared(void);

#endif
