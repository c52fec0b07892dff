/* ls_worker: loopscope's own background threads.
 *
 * The worker does what must not cost the user's thread: the end of a
 * profile (ls_finish: waiting for the GPU, the last activity flush and
 * parse, the last PM decode), the PM sampler's set-up and start
 * (ls_sampler), and while a profile runs a periodic tick (draining activity
 * buffers).  Tasks run one at a time, in the order posted, before any tick.
 * The PM sampler's decodes tick on a second thread, the ticker (see
 * LS_TICK_SAMPLER).
 * One "when idle" call (the sampler's release) runs once nothing else has
 * happened for a while, or at shutdown; after it, with nothing left to do,
 * the thread ends (a later post makes a new one).
 *
 * The threads never touch Python (no GIL), block every signal (they stay
 * with Python's threads), and are forgotten in a forked child, whose waits
 * then return at once with the task marked failed.  Every function may be
 * called from any thread; those that wait must be called without the GIL. */
#ifndef LS_WORKER_H
#define LS_WORKER_H

#include <stddef.h>
#include <stdint.h>

typedef struct ls_task ls_task;
typedef void (*ls_task_fn)(ls_task *task);

/* Embed as the first member of a job; zero it before the first post. */
struct ls_task {
    ls_task_fn run;      /* on the worker (or on the poster, see ls_worker_post) */
    ls_task_fn dispose;  /* set by ls_worker_abandon: called instead of marking done */
    ls_task *next;       /* the worker's queue link */
    int state;           /* LS_TASK_*, under the worker's lock */
    int failed;          /* 1 when it never ran: the process forked meanwhile */
    int waiters;         /* threads inside ls_worker_wait */
};

enum { LS_TASK_NEW = 0, LS_TASK_QUEUED, LS_TASK_RUNNING, LS_TASK_DONE };

/* Queues `task` (making the thread if there is none).  Returns 0, or -1
 * with a sentence in `why` when no thread can be made: the caller then
 * runs the task itself. */
int ls_worker_post(ls_task *task, char *why, size_t why_size);

/* Marks the caller as about to wait for `task`: ls_worker_settle (and so
 * the freeing of the task) waits for it from now on.  Call it while the
 * task is surely alive (for a Python owner: before releasing the GIL). */
void ls_worker_hold(ls_task *task);

/* After ls_worker_hold: blocks until `task` is done (at once if it is),
 * then drops the hold. */
void ls_worker_wait(ls_task *task);

/* ls_worker_wait with a bound: returns 1 when `task` is done, 0 when
 * timeout_ns passed first; drops the hold either way (the task must stay
 * alive until it is done: a static task, or one settled later). */
int ls_worker_wait_for(ls_task *task, uint64_t timeout_ns);

/* 1 when `task` is done (ran, or failed). */
int ls_worker_done(ls_task *task);

/* Blocks until `task` is done and no thread waits on it any more: after
 * this the caller may free it. */
void ls_worker_settle(ls_task *task);

/* For a task nobody will wait for: returns 1 when it is done and unwaited
 * (free it now), else 0 and the worker calls dispose(task) when it is
 * done instead (from the worker thread). */
int ls_worker_abandon(ls_task *task, ls_task_fn dispose);

/* Blocks until no task is queued or running and the profile's tick is not
 * running;
 * returns 1 when it had to wait, 0 when the worker was idle already. */
int ls_worker_wait_idle(void);

/* Calls tick() every period_ns on the worker while set, at a fixed rate
 * (period_ns after the last tick began; at once when that has passed);
 * NULL stops it (a tick in progress finishes; ls_worker_wait_idle waits
 * for it). */
typedef void (*ls_tick_fn)(void);
void ls_worker_set_tick(ls_tick_fn tick, uint64_t period_ns);

/* Two independent ticks, each with one owner: the running profile's
 * (LS_TICK_PROFILE: activity drains; ls_worker_set_tick), on the worker
 * after queued tasks, and the PM sampler's (LS_TICK_SAMPLER: it decodes for
 * as long as sampling runs, between profiles too), on a thread of its own
 * (the ticker, made when the tick is set, ending when it is unset), so that
 * no finish or start waits behind a decode.  ls_worker_wait_idle does not
 * wait for the sampler's tick: ls_worker_wait_tick does. */
enum { LS_TICK_PROFILE = 0, LS_TICK_SAMPLER = 1, LS_TICK_SLOTS = 2 };
void ls_worker_set_tick_in(int slot, ls_tick_fn tick, uint64_t period_ns);

/* A set tick's new period; its next run at once (at_once) or a period from
 * now.  An unset tick stays unset (a tick re-timing itself cannot revive a
 * tick unset meanwhile). */
void ls_worker_retime_tick(int slot, uint64_t period_ns, int at_once);

/* Blocks until the slot's tick is not running (unset it first to keep it so). */
void ls_worker_wait_tick(int slot);

/* Calls fn() on the worker once, after_ns from now (queued tasks first),
 * or at shutdown; replaces an earlier one; NULL cancels.  After it runs,
 * with no task and no tick left, the thread ends. */
void ls_worker_when_idle(ls_tick_fn fn, uint64_t after_ns);

/* Runs every queued task and the when-idle call, ends the thread and joins
 * it; waits at most timeout_ns for that (then leaves the thread behind).
 * With no thread, runs the when-idle call here. */
void ls_worker_shutdown(uint64_t timeout_ns);

/* Profile ticks run since the last ls_worker_set_tick with a tick (for tests). */
uint64_t ls_worker_ticks(void);

/* "none", "ticking", "parked", "idle" (a when-idle call is due), "busy"
 * (a task queued or running) or "ended": for tests. */
const char *ls_worker_state(void);

#endif
