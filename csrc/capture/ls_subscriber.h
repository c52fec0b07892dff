/* ls_subscriber: claims CUPTI for loopscope for the length of a profile.
 *
 * CUPTI allows one subscriber per process; Nsight Systems, Nsight Compute,
 * cuda-gdb and torch.profiler's Kineto take it too.  Subscribing first is how
 * loopscope learns that another tool owns CUPTI, before it could steal that
 * tool's activity buffers.  The callback registered here is
 * ls_switchboard_callback. */
#ifndef LS_SUBSCRIBER_H
#define LS_SUBSCRIBER_H

#include <cupti.h>
#include <stddef.h>
#include <stdint.h>

enum { LS_SUBSCRIBER_OK = 0, LS_SUBSCRIBER_ERROR = -1, LS_SUBSCRIBER_HELD = -2 };

/* Returns LS_SUBSCRIBER_OK when loopscope now owns CUPTI's callback slot.
 * Otherwise writes a plain sentence into `reason` (naming the other client
 * when CUPTI tells) and returns LS_SUBSCRIBER_HELD when another client holds
 * the slot, LS_SUBSCRIBER_ERROR when CUPTI failed for another reason. */
int ls_subscriber_claim(char *reason, size_t reason_size);

/* Enables the callbacks ls_subscriber_wants (ls_switchboard receives them).
 * 0, or -1 with a sentence in `reason` (what was enabled is disabled). */
int ls_subscriber_enable_callbacks(int waits, int launches, char *reason,
                                   size_t reason_size);

/* Whether a call of `role` (ls_cbids), in either API domain, gets a
 * callback: a launch call with `launches` (a profile that records them: a
 * traced one); with `waits`, a call that can wait for the GPU or allocate
 * memory (a copy among them is counted as a launch too). */
int ls_subscriber_wants(uint8_t role, int waits, int launches);

/* While the slot is held: calls on_context(context) when a CUDA context is
 * created (CUPTI's resource callback; on the creating thread, inside CUDA:
 * it must not wait or allocate).  0, or -1 when CUPTI refused. */
int ls_subscriber_watch_contexts(void (*on_context)(void *context));

/* Counts every CUDA graph exec instantiated from now on
 * (ls_switchboard_graph_execs_created) until the callbacks are disabled:
 * graph-level mode's per-kernel profiles (ls_activity) must know whether a
 * graph was made while the graph-level trace was off.  0, or -1. */
int ls_subscriber_watch_graph_execs(void);

/* Disables every callback of the table and the context watch (no-op when
 * none is enabled). */
void ls_subscriber_disable_callbacks(void);

/* Gives CUPTI back (no-op when not claimed). */
void ls_subscriber_release(void);

#endif
