/* ls_sampler: the PM sampler's life across profiles, run on loopscope's
 * worker thread (ls_worker), so the user's thread never waits for it.
 *
 * A profile opens a window at its start: the worker sets sampling up when
 * needed (the first use in a process takes ~0.3-0.5 s on an H200; the
 * config image comes from the disk cache after the first process) and
 * starts it.  Samples then cover the profile from the moment sampling runs;
 * the summary's coverage says how much, and a profile that ended before
 * the set-up did gets a sentence saying so.  While the profile runs, each
 * worker tick decodes what the hardware buffer holds (the ticks keep a
 * fixed rate, so a decoder that falls behind decodes back to back and the
 * stop finds only the last period's samples).  The profile's finish
 * (ls_finish, on the worker) waits until the GPU's clock passes the
 * window's end, decodes that tail while sampling goes on, and hands over
 * exactly the samples that overlap the profile's window, on the activity
 * clock; cuptiPmSamplingStop (and dropping what was sampled after the
 * window) follows as a task of its own, so summary() never waits for it.  Sampling stays enabled keep_ns after a profile (the next
 * one then costs one cuptiPmSamplingStart on the worker); with
 * keep_running_ns it even keeps running that long, the worker decoding and
 * dropping what it samples between profiles, so the next profile needs no
 * start at all.
 *
 * A test source (ls_sampler_fake) stands in for CUPTI with synthetic
 * samples, so the hand-over is tested without a GPU. */
#ifndef LS_SAMPLER_H
#define LS_SAMPLER_H

#include "ls_pmsampling.h"
#include "ls_capture.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    ls_pm_options pm;
    uint64_t keep_ns;          /* sampling stays enabled this long after a profile */
    uint64_t keep_running_ns;  /* ... and running this long (0: stopped at its finish) */
    int wait_for_start;        /* LS_SAMPLER_WAIT_*: when the opening thread waits for
                                * the set-up and start */
    uint64_t wait_bound_ns;    /* and for how long at most */
    int stop_in_finish;        /* 1: the finish stops sampling before its last decode (the
                                * old way); 0: it decodes up to the window's end while
                                * sampling runs on, and the stop follows the finish */
    int continue_running;      /* 1: a finish is in flight with a sampler of these options:
                                * this window continues its sampling (back to back) */
    int late_hand_over;        /* 1 (overlap): the finish decodes its tail with sampling on
                                * and only then decides whether a next window continues it,
                                * so a start posted during that decode (2-3 ms on an H100)
                                * needs no stop, start or image reset */
} ls_sampler_options;

enum {
    LS_SAMPLER_WAIT_NEVER = 0,  /* the set-up runs on the worker while the profile runs */
    LS_SAMPLER_WAIT_ALWAYS = 1, /* every open waits for its start */
    LS_SAMPLER_WAIT_SETUP = 2,  /* an open waits when the sampler must be set up (the first
                                 * profile of a process, or after the sampler was released) */
};

/* What ls_sampler_open did.  LS_SAMPLER_WAITED_FOR_WORKER: it did not wait
 * for its own set-up, but for the worker before posting it (a slot still
 * held by an open LS_OPENINGS starts ago, or the last finish's stop): the
 * window begins after that wait, never before (issue 27). */
enum { LS_SAMPLER_NO_WAIT = 0, LS_SAMPLER_WAITED = 1, LS_SAMPLER_WAIT_TIMED_OUT = 2,
       LS_SAMPLER_WAITED_FOR_WORKER = 3 };

/* 1 when the test source is installed (no driver or CUPTI needed then). */
int ls_sampler_is_fake(void);

/* With the GIL, at a profile's start: posts the set-up and start for a
 * window beginning at start_ns (profile clock; read again after a wait for
 * the worker, LS_SAMPLER_WAITED_FOR_WORKER) on the CUDA context
 * `context` (NULL: none).  Where no worker thread can be made it does them
 * here, and `note` says so (else it is made "").  Waits for them as
 * o->wait_for_start says, at most o->wait_bound_ns; returns
 * LS_SAMPLER_NO_WAIT, LS_SAMPLER_WAITED (done: sampling began, or failed
 * with its reason), LS_SAMPLER_WAIT_TIMED_OUT (it goes on on the worker) or
 * LS_SAMPLER_WAITED_FOR_WORKER.  Never waits with `no_wait` (inside a CUPTI callback). */
int ls_sampler_open(const ls_sampler_options *o, uint64_t start_ns, void *context, char *note,
                    size_t note_size, int no_wait);



/* On the worker, at each tick of a running profile: decodes what the
 * hardware buffer holds into the window's samples. */
void ls_sampler_tick(void);

/* On the worker, in the finish of the window opened last: stops (or, when
 * kept running, drains) sampling, and moves the samples overlapping
 * [start_ns, stop_ns] into c->records.samples, sorted and settled on the
 * activity clock; fills c->sampled, c->pm, c->metrics_reason and the clock
 * figures.  Then schedules the release (ls_worker_when_idle). */
void ls_sampler_finish(uint64_t start_ns, uint64_t stop_ns, ls_capture *c);

/* 1 while the stop that follows a finish (sampling's stop, the image
 * reset) is posted and not done: a start that will not continue the
 * sampler waits for it before its window begins (ls_session_should_wait),
 * or the window's first milliseconds go unsampled. */
int ls_sampler_stop_pending(void);

/* On the worker (or with no worker thread, anywhere): stops and disables
 * sampling, giving the counters back.  Safe to repeat. */
void ls_sampler_release(void);

/* Test hook, with the GIL and no profile running: installs synthetic
 * samples (n == 0 removes them).  Each tick of a profile hands over the
 * next `per_tick` of them (the finish hands over the rest), as decodes of
 * a sampler with interval `interval_ns` would; sampling begins `setup_ns`
 * after each window's start (its set-up time), as a sampler set up by an
 * earlier profile when `reused`; the open task sleeps setup_sleep_ns of
 * real time (a slow set-up, for the bounded wait); with `no_context` a
 * profile's start finds no CUDA context.  0, or -1 when out of memory. */
int ls_sampler_fake(const ls_sample *samples, size_t n, size_t per_tick, uint64_t interval_ns,
                    uint64_t setup_ns, int reused, uint64_t setup_sleep_ns, int no_context);

/* 1 when the test source stands for a process with no CUDA context yet at
 * a profile's start (it appears through the resource callback's test hook). */
int ls_sampler_fake_no_context(void);

#endif
