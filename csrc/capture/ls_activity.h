/* ls_activity: CUPTI activity tracing into ls_records.
 *
 * Enables kernel (concurrent kind), memcpy, memset and synchronization
 * records (runtime/driver API records on request), collects the buffers
 * through ls_buffers, and parses them into compact records.  Start runs on
 * the profiling thread; drain and stop on loopscope's worker thread (one at
 * a time), which alone writes the sink until stop returns.  Requires
 * ls_cupti_load() first.
 *
 * Back to back (issue 27): a profile that starts while the previous one is
 * still finishing on the worker continues the kinds left enabled
 * (ls_activity_continue) instead of waiting for that finish; the finish's
 * stop then hands tracing over to the new sink in place of disabling it,
 * and moves the records that belong after its own window there. */
#ifndef LS_ACTIVITY_H
#define LS_ACTIVITY_H

#include "ls_records.h"

#include <stddef.h>

/* Which host API calls become activity records: none (launch calls come
 * from callbacks instead, see ls_launches), runtime, or runtime + driver. */
typedef enum { LS_API_RECORDS_NONE = 0, LS_API_RECORDS_RUNTIME = 1, LS_API_RECORDS_ALL = 2 } ls_api_records;

/* Starts tracing into `sink`.  With `zeroed_buffers` (the pool of
 * ls_buffers hands out cleared buffers), CUPTI is told not to clear each
 * new buffer itself, which it would do on the launching thread.  Returns 0,
 * or -1 with a sentence in `reason` (every kind already enabled is disabled
 * again). */
int ls_activity_start(ls_records *sink, ls_api_records api, int zeroed_buffers, char *reason,
                      size_t reason_size);

/* 1 when a start at now_ns (host clock) follows the last stop, begun at
 * stop_began_ns (0: none yet), by less than LS_ACTIVITY_BACK_TO_BACK_NS:
 * profiles back to back.  Such a profile's stop waits a short grace for
 * the next start to continue its kinds before it turns them off (a loop
 * that ends in a synchronize reaches the stop before its next start). */
#define LS_ACTIVITY_BACK_TO_BACK_NS 3000000ull
int ls_activity_back_to_back(uint64_t stop_began_ns, uint64_t now_ns);

/* At each start: whether a next start could continue this profile's kinds
 * (it traces with loopscope's callbacks).  Without it the stop never waits
 * the grace, and a stop already in its grace (the last profile's, on the
 * worker) ends it: this start will not continue them. */
void ls_activity_expect_next(int may_continue);

/* Parses every completed buffer into the sink.  Cheap when none is ready.
 * Returns 1 when it parsed at least one buffer. */
int ls_activity_drain(void);

/* 1 when at least one completed buffer waits to be drained. */
int ls_activity_pending(void);

/* Flushes every buffer, drains, adds CUPTI's dropped count to the sink, and
 * disables the kinds.  Returns 0, or -1 if a CUPTI call failed (the message is
 * in ls_cupti_error(); the records gathered so far stay valid).  When a
 * profile continued meanwhile (ls_activity_continue), the kinds stay
 * enabled and later drains go to its sink, which *next is set to (else
 * NULL); no forced flush is made then (it would return that profile's
 * running kernels as incomplete records, lost): completed buffers are
 * flushed until settled(ctx) says the stopping window has all its records,
 * for at most LS_ACTIVITY_SETTLE_NS. */
#define LS_ACTIVITY_SETTLE_NS 20000000ull
int ls_activity_stop(ls_records **next, int (*settled)(void *ctx), void *ctx);

/* For a start while a finish may still run: when the kinds are enabled
 * with the same `api` and `zeroed_buffers`, and no other profile continued
 * yet, `sink` becomes the sink that the finish's stop hands tracing to,
 * and 0 is returned; else -1 (start the usual way, after that finish). */
int ls_activity_continue(ls_records *sink, ls_api_records api, int zeroed_buffers);

/* 1 while kinds are enabled (a profile traces, or a finish has not yet
 * turned them off). */
int ls_activity_tracing(void);

/* Returns once no stop is turning the kinds off (a flush, ~1-2 ms): after
 * it, the kinds are either off or continuable. */
void ls_activity_wait_stopped(void);

/* Returns 1 once the kinds are off (the finish in flight turned them off),
 * 0 when bound_ns passed first.  A start waits for this, not for the whole
 * finish: its PM tail (~2-8 ms on an H200) is no part of the kinds. */
int ls_activity_wait_off(uint64_t bound_ns);

/* Graph-level mode (issue 27; the policy is ls_graphs'): registers the
 * buffer callbacks and turns CUPTI's graph-level trace on for the rest of
 * the process (never off: CUPTI crashes on replaying a graph exec that was
 * instantiated while the kind was off).  From then on every window (each
 * ls_activity_start) first throws away the replay records made since the
 * last one, and parses each replay as one LS_OP_GRAPH op; between windows
 * the buffer pool does not grow.  Returns 0, or -1 with CUPTI's error in
 * `reason`. */
int ls_activity_enable_graph_trace(int zeroed_buffers, char *reason, size_t reason_size);

/* 1 once the graph-level trace is on (ls_activity_enable_graph_trace). */
int ls_activity_graph_trace_on(void);

/* Per-kernel detail in a prepared process (profile(graph_kernels=True)):
 * turns the graph-level trace off for one profile, so each replay's
 * kernels are recorded one by one.  0, or -1 (not on, or CUPTI refused). */
int ls_activity_pause_graph_trace(void);

/* At that profile's stop, before the callbacks that count graph
 * instantiations are turned off: the trace on again (0), or, when CUPTI
 * refuses, graph-level mode ended for the process (-1). */
int ls_activity_resume_graph_trace(void);

/* Graph-level mode ends for the process (the trace off for good): a graph
 * exec was instantiated while the trace was off, and replaying it with the
 * trace on would crash CUPTI. */
void ls_activity_end_graph_trace(void);

/* In a forked child: the parent's tracing state is not the child's. */
void ls_activity_forget_in_child(void);

/* Parses one activity buffer into `sink` (exposed for the drain callback and
 * for tests that feed raw buffers). */
void ls_activity_parse(ls_records *sink, uint8_t *buffer, size_t valid_size);

#endif
