/* ls_finish: the end of a profile that does not need the user's thread,
 * run on loopscope's worker (ls_worker) after ls_session_stop has noted the
 * end time and turned the callbacks off:
 *   wait for the profile's GPU work (on the user's CUDA context), disable
 *   activity tracing, flush and parse the last buffers, stop PM sampling
 *   and take the window's samples (ls_sampler), then merge and filter the
 *   records: ops that ended before the start, and ops, API records and
 *   syncs of launches made after the stop, are left out (and counted);
 *   API records get their thread's whole id (ls_threads).
 *
 * A job is made at the profile's start (its activity records are parsed
 * into the job while the profile runs) and handed over at the stop; the
 * Python capture object owns it from then on, waits for it when a result
 * is first needed, and takes the finished capture out of it.  A job whose
 * owner goes away first is freed by the worker when done. */
#ifndef LS_FINISH_H
#define LS_FINISH_H

#include "ls_capture.h"

#include <stdint.h>

typedef struct ls_finish ls_finish;

typedef struct {
    int tracing;     /* activity tracing ran: wait for the GPU, stop it, parse the rest */
    int sampling;    /* a PM sampling window is open (ls_sampler) */
    void *context;   /* the CUDA context current on the stopping thread, or NULL */
    int defer;       /* 1: on the worker; 0: on the calling thread, now */
} ls_finish_plan;

/* A job for a profile starting now; NULL when out of memory. */
ls_finish *ls_finish_new(void);

/* Where the profile's activity records go while it runs. */
ls_records *ls_finish_sink(ls_finish *job);

/* With the GIL, once the profile has started: while it runs, the worker
 * drains its activity buffers into the job (tracing) every period_ns (the
 * PM sampler decodes on its own tick, ls_sampler). */
void ls_finish_begin(ls_finish *job, int tracing, uint64_t period_ns);

/* Frees a job that was never handed over (a start that failed). */
void ls_finish_discard(ls_finish *job);

/* At the stop, with the GIL: takes *capture over (the struct is zeroed)
 * and finishes it on the worker, or here when plan->defer is 0, when
 * nothing needs the worker, or when no worker thread can be made.  Never
 * fails. */
void ls_finish_hand_over(ls_finish *job, ls_capture *capture, const ls_finish_plan *plan);

/* Finishes handed to the worker and not yet done: a start that sees one
 * continues tracing beside it (ls_activity_continue) or waits for it. */
int ls_finish_in_flight(void);

/* Back to back: moves the records of `c` that began after its stop (and
 * were not launched inside its window) into `next`, the records of the
 * profile that continued tracing; the worker's own syncs go to neither.
 * Exposed for the test hooks. */
void ls_finish_move_after_stop(ls_capture *c, ls_records *next);

/* Keeps the records of `c`'s window only (its start and stop, and for ops
 * its earlier_launch_floor: what an earlier profile launched).  Exposed for
 * the test hooks. */
void ls_finish_filter_window(ls_capture *c);

/* In a forked child (no worker there): no finish is in flight. */
void ls_finish_forget_in_child(void);

/* 1 when the job is done. */
int ls_finish_done(ls_finish *job);

/* Marks the caller as about to wait for the job (with the GIL, before
 * releasing it), so the job is not freed under a waiting thread. */
void ls_finish_hold(ls_finish *job);

/* After ls_finish_hold: blocks until the job is done.  Call without the GIL. */
void ls_finish_wait(ls_finish *job);

/* With the GIL, after ls_finish_wait: moves the finished capture into *out
 * (wait_ns added to its finish_wait_ns) and frees the job. */
void ls_finish_take(ls_finish *job, ls_capture *out, uint64_t wait_ns);

/* With the GIL, for a job nobody will take: frees it now if it is done,
 * else lets the worker free it when it is. */
void ls_finish_abandon(ls_finish *job);

/* Test hook: every job waits delay_ns on the worker before its work, and
 * goes to the worker even when nothing needs it (0: off). */
void ls_finish_set_test_delay(uint64_t delay_ns);

#endif
