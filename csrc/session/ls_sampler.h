/* ls_sampler: one PM sampler for the life of the process (issue 43), and
 * each profile a window on its stream of samples.
 *
 * The first profile that wants counters sets sampling up on loopscope's
 * worker (ls_worker; ~0.3-0.5 s on an H200 the first time in a process, the
 * config image then comes from the disk cache) and starts it.  From then on
 * sampling runs: no stop, no image reset and no start between profiles.  A
 * profile's start opens a window (a slot and a time stamp: no wait, no
 * task); the sampler's own tick on the worker decodes the hardware buffer
 * every decode period and evaluates only the samples that overlap a live
 * window (open, or closed with its finish still to come), appending each to
 * every window it overlaps: back to back, the sample across two profiles'
 * edge goes to both, and none is lost or doubled within one.  The rest are
 * let go unevaluated.  A profile's finish (ls_finish, on the worker) waits
 * until the GPU's clock passes its stop (two intervals), decodes that tail
 * once, and takes exactly the samples overlapping its window.
 *
 * Sampling ends at the process's exit, or, to give the CPU and the counters
 * back in a process that stopped profiling, keep_running_ns after the last
 * window (it is stopped: the next window costs one cuptiPmSamplingStart,
 * which its start waits for) and keep_ns after that (disabled: the counters
 * are free for other profilers; the next window sets it up again).
 *
 * A test source (ls_sampler_fake) stands in for CUPTI with synthetic
 * samples that keep coming across windows, so the windowing is tested
 * without a GPU. */
#ifndef LS_SAMPLER_H
#define LS_SAMPLER_H

#include "ls_pmsampling.h"
#include "ls_capture.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    ls_pm_options pm;          /* pm.interval_ns 0: the automatic interval (below) */
    uint64_t keep_running_ns;  /* sampling runs this long after the last window ... */
    uint64_t keep_ns;          /* ... and then stays enabled this long */
    int wait_for_start;        /* LS_SAMPLER_WAIT_*: when an open waits for the sampler */
    uint64_t wait_bound_ns;    /* and for how long at most */
} ls_sampler_options;

enum {
    LS_SAMPLER_WAIT_NEVER = 0,  /* the set-up runs on the worker while the profile runs */
    LS_SAMPLER_WAIT_ALWAYS = 1, /* every open that needs the worker waits for it */
    LS_SAMPLER_WAIT_SETUP = 2,  /* an open waits when sampling is not running (the first
                                 * profile of a process, or after an idle stop) */
};

/* What ls_sampler_open did.  LS_SAMPLER_WAITED_FOR_SLOT: every window slot
 * was held by a finish still to come (LS_SAMPLER_WINDOWS of them), and it
 * waited for one: the window begins after that wait. */
enum { LS_SAMPLER_NO_WAIT = 0, LS_SAMPLER_WAITED = 1, LS_SAMPLER_WAIT_TIMED_OUT = 2,
       LS_SAMPLER_WAITED_FOR_SLOT = 3 };

#define LS_SAMPLER_WINDOWS 8

/* DecodeData's host time follows the GPU's work, not the samples: ~0.5-0.8
 * ms for each ms the SMs were busy since the last call, plus ~1-3 ms a call,
 * whatever the interval (200-1000 us), and ~1 ms a call with the SMs idle
 * (H200, 2026-11-29, lifetime_sampler.py --variants decode_probe).  So while
 * windows are live the sampler's thread needs ~0.7-1 core of a busy GPU at
 * any period, and summary() waits for one call: the tail since the last
 * tick.  The automatic interval begins at LS_PM_AUTO_INTERVAL_NS and
 * doubles, up to LS_PM_AUTO_INTERVAL_MAX_NS, after a profile whose decodes
 * fell behind (two ticks in a row, each longer than 1.5 periods; the first
 * tick after an idle spell decodes its backlog and is not judged).  Between
 * profiles the tick slows to LS_PM_IDLE_DECODE_NS (samples are let go): its
 * backlog, at most that long, is decoded as soon as a window opens, beside
 * the loop.  A sampler that fell behind stops at once. */
#define LS_PM_AUTO_INTERVAL_NS 500000ull
#define LS_PM_AUTO_INTERVAL_MAX_NS 1000000ull
#define LS_PM_IDLE_DECODE_NS 20000000ull

/* Sampling runs this long after the last window closed (a training script
 * that profiles every few hundred steps never stops it), then stays
 * enabled this long; the first open of a process waits at most this long
 * for the set-up (it took 0.39-0.5 s on H100s with a warm cache). */
#define LS_PM_KEEP_RUNNING_NS 1000000000ull
#define LS_PM_KEEP_NS 3000000000ull
#define LS_PM_WAIT_BOUND_NS 2000000000ull

/* 1 when the test source is installed (no driver or CUPTI needed then). */
int ls_sampler_is_fake(void);

/* At a profile's start: opens a window beginning at start_ns (profile
 * clock) and sets *window (-1 when none could be had: `note` says why).
 * When sampling does not run with these options, posts its set-up (start,
 * or restart) to the worker on the CUDA context `context` (NULL: none)
 * and waits for it as o->wait_for_start says, at most o->wait_bound_ns.
 * Where no worker thread can be made it sets up here and `note` says so.
 * With `no_wait` (inside a CUPTI callback) it never waits and never sets
 * up here.  Returns LS_SAMPLER_* (what it waited for). */
int ls_sampler_open(const ls_sampler_options *o, uint64_t start_ns, void *context, char *note,
                    size_t note_size, int no_wait, int *window);

/* After a start that waited: the window begins at start_ns instead. */
void ls_sampler_move_start(int window, uint64_t start_ns);

/* At a profile's stop: the window ends at stop_ns (its samples keep coming
 * until its finish). */
void ls_sampler_close(int window, uint64_t stop_ns);

/* On the worker, in the profile's finish: decodes the window's tail and
 * moves the samples overlapping [start_ns, stop_ns] into
 * c->records.samples, sorted and settled on the activity clock; fills
 * c->sampled, c->pm (the sampler's figures, its costs while the window was
 * live), c->metrics_reason and the clock figures; frees the slot.  window
 * -1: no window was opened (c->metrics_reason must say why). */
void ls_sampler_finish(int window, uint64_t start_ns, uint64_t stop_ns, ls_capture *c);

/* Stops and disables sampling, giving the counters back; waits for nothing
 * (call it on the worker, or where no worker runs).  Safe to repeat. */
void ls_sampler_release(void);

/* Test hook, with the GIL, no profile running and the worker idle:
 * installs synthetic samples (n == 0 removes them), a stream that runs
 * across windows.  Each tick of the sampler hands over at most `per_tick`
 * of them, and only those that ended by the profile clock's current time
 * (the test clock's, read without advancing it); a finish hands over all
 * that end by its stop plus two intervals of `interval_ns`.  Sampling
 * begins `setup_ns` after the window that set it up began, or was running
 * already when `reused`; the set-up sleeps setup_sleep_ns of real time (a
 * slow set-up, for the bounded wait); with `no_context` a profile's start
 * finds no CUDA context.  0, or -1 when out of memory. */
int ls_sampler_fake(const ls_sample *samples, size_t n, size_t per_tick, uint64_t interval_ns,
                    uint64_t setup_ns, int reused, uint64_t setup_sleep_ns, int no_context);

/* 1 when the test source stands for a process with no CUDA context yet at
 * a profile's start (it appears through the resource callback's test hook). */
int ls_sampler_fake_no_context(void);

/* Tests: "off", "starting", "running" or "stopped" (stopped after an idle
 * time, still enabled), and how many windows are live. */
const char *ls_sampler_state(int *live_windows);

/* Tests: the idle times and the open's wait bound in place of
 * LS_PM_KEEP_RUNNING_NS, LS_PM_KEEP_NS and LS_PM_WAIT_BOUND_NS (0: those),
 * and the host time and hardware-buffer overflows each decode of the test
 * source reports, and the most samples a finish's tail reads from it (0: all;
 * a tail that leaves some it should have read is short of its window's end,
 * as a real one at its round cap). */
void ls_sampler_set_keep(uint64_t keep_running_ns, uint64_t keep_ns, uint64_t wait_bound_ns,
                         uint64_t fake_decode_ns, uint64_t fake_overflows, uint64_t fake_tail_cap);

#endif
