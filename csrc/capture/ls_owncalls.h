/* ls_owncalls: CUDA calls loopscope's own threads make (the worker's
 * context sync at a profile's finish), told apart from the user's.
 *
 * A profile can start while the previous one still finishes on the worker
 * (issue 27), so the new profile's callbacks are on when the worker waits
 * for the GPU: that wait is no sync of the user's code.  The switchboard
 * skips calls from a marked thread and notes their correlation ids here;
 * the finish leaves the activity records of those calls (their
 * synchronization records) out of every window.
 *
 * Error contract: none can fail.  Safe from any thread and from inside
 * CUPTI callbacks (no lock, no allocation). */
#ifndef LS_OWNCALLS_H
#define LS_OWNCALLS_H

#include <stdint.h>

/* Marks the calling thread as loopscope's own, for its lifetime. */
void ls_owncalls_mark_thread(void);

/* 1 on a thread marked by ls_owncalls_mark_thread. */
int ls_owncalls_this_thread(void);

/* Notes the correlation id of a call made on a marked thread; the last
 * LS_OWNCALLS_KEPT are remembered. */
void ls_owncalls_note(uint32_t correlation_id);

/* 1 when `correlation_id` was noted (among the last LS_OWNCALLS_KEPT). */
int ls_owncalls_has(uint32_t correlation_id);

/* Forgets every noted id: after a test hook that noted synthetic ones
 * (a later injected record with the same id is no worker's call). */
void ls_owncalls_forget(void);

#define LS_OWNCALLS_KEPT 256

#endif
