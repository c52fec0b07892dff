/* ls_sampler: see ls_sampler.h.  Everything below the open call runs on the
 * worker thread (one task or tick at a time), so the state needs no lock of
 * its own.  The open call, on the profiling thread beside the worker (back
 * to back), touches only its own opening slot and atomics; the test hook
 * installs the fake source before any profile runs. */
#define _POSIX_C_SOURCE 200809L
#include "ls_sampler.h"

#include "ls_clock.h"
#include "ls_cuda.h"
#include "ls_cupti.h"
#include "ls_samples.h"
#include "ls_worker.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Samples reaching further than this outside the profile are taken to be
 * on another clock than the activity records (ls_samples_settle). */
#define LS_SAMPLE_CLOCK_TOLERANCE_NS 100000000ull
#define LS_SAMPLE_PARTIAL_FACTOR 10

/* What ls_sampler_open hands to the worker, one slot a start: back to back
 * a start may come while the last start's open task still waits behind a
 * finish (a long tail decode, or a finish waiting for the GPU), and need
 * not wait for it.  A slot is written only while its task is not queued or
 * running. */
#define LS_OPENINGS 4
typedef struct {
    ls_task task; /* first: the worker sees the slot as its task */
    ls_sampler_options options;
    void *context;
    uint64_t start_ns;
    uint64_t window;  /* its number (windows_posted) */
} ls_opening;

static ls_opening openings[LS_OPENINGS];
static unsigned next_opening; /* the opening thread's (with the GIL) */

static struct {
    ls_sampler_options options; /* of the current (or last) window */
    void *context;
    uint64_t window_start_ns;   /* profile clock */
    int opened;                 /* a window is open: its open task ran */
    int sampling;               /* the open task started (or found running) sampling */
    char reason[1024];          /* why not, when it failed */
    uint64_t setup_ns;          /* host time of the open task */
    uint64_t began_ns;          /* CUPTI clock when sampling began for the window */
    ls_sample_array samples;    /* decoded for the window */
    ls_sample_array carry;      /* decoded after the last window, for the next */
    uint64_t kept_running_for;  /* keep_running_ns of the last finish */
    uint64_t window;            /* its number (windows_posted) */
} s;

/* Back to back (issue 27): every start numbers its window (the count of
 * windows posted); a finish asks whether one was posted after its own (a
 * start that continues its sampler), and when none was, closes the count
 * while it stops sampling (a start then waits for that finish). */
#define LS_WINDOWS_CLOSED (1ull << 63)
static _Atomic uint64_t windows_posted;

/* The test source, and the figures it reports in place of CUPTI's. */
static struct {
    ls_sample *items;
    size_t count, next, per_tick;
    uint64_t interval_ns;
    uint64_t setup_ns; /* sampling begins this long after the window starts */
    int reused;        /* as a sampler set up by an earlier profile */
    uint64_t setup_sleep_ns; /* real host time the open task sleeps: a slow set-up */
    int no_context;    /* a profile's start finds no CUDA context */
    ls_pm_stats stats;
} fake;

int ls_sampler_is_fake(void) { return fake.items != NULL; }

/* 1 while a sampler is set up (enabled and configured) in this process:
 * written on the worker, read by the opening thread to decide whether to
 * wait for a set-up. */
static _Atomic int sampler_set_up;


static void discard(void)
{
    free(s.samples.items);
    memset(&s.samples, 0, sizeof s.samples);
}

/* The window's samples begin with those carried over from the finish of
 * the profile before that end after `start_ns` (decoded there while this
 * profile already ran). */
static void take_carry(uint64_t start_ns)
{
    discard();
    size_t kept = 0;
    for (size_t i = 0; i < s.carry.count; i++)
        if (s.carry.items[i].end_ns > start_ns)
            s.carry.items[kept++] = s.carry.items[i];
    s.carry.count = kept;
    s.samples = s.carry;
    memset(&s.carry, 0, sizeof s.carry);
}

/* Moves the samples that end after `stop_ns` from the window's to the
 * carry (the next profile's). */
static void carry_after(uint64_t stop_ns)
{
    free(s.carry.items);
    memset(&s.carry, 0, sizeof s.carry);
    size_t kept = 0;
    for (size_t i = 0; i < s.samples.count; i++) {
        const ls_sample *x = &s.samples.items[i];
        if (x->end_ns > stop_ns) {
            ls_sample *slot = ls_samples_append(&s.carry);
            if (slot != NULL)
                *slot = *x;
        }
        if (x->start_ns < stop_ns)
            s.samples.items[kept++] = *x;
    }
    s.samples.count = kept;
}

/* Hands over the next n synthetic samples as a decode would. */
static void fake_decode(size_t n)
{
    ls_pm_stats *st = &fake.stats;
    for (; n > 0 && fake.next < fake.count; n--, fake.next++) {
        ls_sample *slot = ls_samples_append(&s.samples);
        if (slot == NULL) {
            st->eval_errors++;
            continue;
        }
        *slot = fake.items[fake.next];
        st->samples++;
    }
    st->decodes++;
}

static void fake_start(void)
{
    ls_pm_stats *st = &fake.stats;
    memset(st, 0, sizeof *st);
    snprintf(st->chip, sizeof st->chip, "test source");
    snprintf(st->config_source, sizeof st->config_source, "test");
    st->time_trigger = 1;
    st->interval = fake.interval_ns;
    st->sampler_reused = st->config_reused = fake.reused;
    st->started_ns = s.window_start_ns + fake.setup_ns;
    for (size_t i = 0; i < fake.count; i++)
        for (int j = 0; j < LS_METRICS; j++)
            if (!isnan(fake.items[i].values[j]))
                st->collected[j] = 1;
}

static void keep_running_over(void);

/* After a finish: stops sampling if it still runs (the samples after the
 * window are decoded and dropped), and resets the counter data image (a
 * 2-14 MiB copy) for the next start.  The summary waits for neither. */
static _Atomic int stop_pending; /* a stop task is posted and not yet done */

int ls_sampler_stop_pending(void) { return atomic_load(&stop_pending); }

static void stop_task(ls_task *task)
{
    (void)task;
    if (ls_pm_running())
        ls_pm_stop(NULL); /* drained unevaluated; a failure is in the stats */
    ls_pm_reset();
    atomic_store(&stop_pending, 0);
}

static void open_task(ls_task *task)
{
    const ls_opening *opening = (const ls_opening *)task;
    uint64_t t0 = ls_clock_monotonic_ns();
    ls_worker_when_idle(NULL, 0); /* this profile holds the sampler */
    const ls_pm_options *was = &s.options.pm, *now = &opening->options.pm;
    int same_sampler = ls_pm_same_sampler(was, now);
    s.options = opening->options;
    s.context = opening->context;
    s.window_start_ns = opening->start_ns;
    s.window = opening->window;
    s.opened = 1;
    s.sampling = 0;
    take_carry(s.window_start_ns);
    s.reason[0] = '\0';
    if (fake.items != NULL) {
        if (fake.setup_sleep_ns > 0) {
            struct timespec pause = {(time_t)(fake.setup_sleep_ns / 1000000000ull),
                                     (long)(fake.setup_sleep_ns % 1000000000ull)};
            nanosleep(&pause, NULL);
        }
        fake_start();
        s.sampling = 1;
        s.began_ns = s.window_start_ns + fake.setup_ns;
    } else {
        if (s.context != NULL)
            ls_cuda_use_context(s.context);
        if (ls_pm_running() && !same_sampler) {
            ls_pm_stop(NULL); /* kept running with other options: nothing of it is kept */
            discard();
        }
        int continued = ls_pm_running();
        if (continued) {
            /* Kept running since the last profile: only its figures restart. */
            ls_pm_new_window();
            s.sampling = 1;
        } else {
            s.sampling = ls_pm_start(&s.options.pm, s.reason, sizeof s.reason) == 0;
        }
        ls_pm_evaluate_from(s.window_start_ns); /* what came before is the window's to drop */
        s.began_ns = 0;
        if (continued)
            s.began_ns = ls_pm_stats_now()->started_ns; /* it ran before this window began */
        else if (s.sampling && ls_cupti.GetTimestamp != NULL)
            ls_cupti.GetTimestamp(&s.began_ns);
        atomic_store(&sampler_set_up, s.sampling);
    }
    s.setup_ns = fake.items != NULL ? fake.setup_ns : ls_clock_monotonic_ns() - t0;
}

int ls_sampler_open(const ls_sampler_options *o, uint64_t start_ns, void *context, char *note,
                    size_t note_size, int no_wait)
{
    int set_up = fake.items != NULL ? fake.reused : atomic_load(&sampler_set_up);
    int wait = !no_wait && (o->wait_for_start == LS_SAMPLER_WAIT_ALWAYS ||
                            (o->wait_for_start == LS_SAMPLER_WAIT_SETUP && !set_up));
    note[0] = '\0';
    /* Continuing: numbered after the window before, unless its finish
     * closed the count (it stops sampling: this window waits for it).
     * Numbered before any wait for a slot below, so that the finishes that
     * run meanwhile see this window coming and keep sampling for it. */
    int continuing = 0;
    uint64_t window = 0;
    if (!no_wait && o->continue_running) {
        uint64_t seen = atomic_load(&windows_posted);
        while (!(seen & LS_WINDOWS_CLOSED) && !continuing)
            if (atomic_compare_exchange_weak(&windows_posted, &seen, seen + 1)) {
                continuing = 1;
                window = seen + 1;
            }
    }
    /* This slot's last open task (LS_OPENINGS starts ago) may still wait
     * behind a finish: the slot is its until it ran. */
    ls_opening *opening = &openings[next_opening++ % LS_OPENINGS];
    int waited_for_worker = 0;
    if (!ls_worker_done(&opening->task) && opening->task.state != LS_TASK_NEW) {
        ls_worker_hold(&opening->task);
        ls_worker_wait(&opening->task);
        waited_for_worker = 1;
    }
    if (!continuing) {
        /* Sampling starts anew: not before the last finish, its stop and
         * the image reset are done (queued ahead, they would delay this
         * window's first sample), as before.  (From the resource callback,
         * no_wait, nothing is in flight: a first profile.) */
        if (!no_wait && ls_worker_wait_idle())
            waited_for_worker = 1;
        uint64_t seen = atomic_load(&windows_posted);
        do
            window = (seen & ~LS_WINDOWS_CLOSED) + 1;
        while (!atomic_compare_exchange_weak(&windows_posted, &seen, window));
        /* Sampling starts anew on the worker (the last finish closed the
         * count, or the sampler differs).  A start that waited for the
         * worker anyway also waits the ~0.6-1.3 ms of that start, so its
         * window begins with sampling (H100, 2026-11-28 00:58Z: a 3.7 ms
         * window of 24 in a row, begun 1.3 ms early, kept 25 of 37
         * samples).  One that did not wait leaves it beside the loop, as a
         * single profile always has: its coverage says so, and the enter
         * stays cheap. */
        if (waited_for_worker)
            wait = 1;
    }
    memset(opening, 0, sizeof *opening);
    opening->options = *o;
    opening->context = context;
    opening->start_ns = start_ns;
    opening->window = window;
    opening->task.run = open_task;
    /* A wait here is the worker's, not the profile's (H100, 24 profiles of
     * a 14 ms loop in a row: counted in the window, it grew to 28 ms while
     * the GPU's work stayed 13.7 ms): the window begins after it. */
    if (waited_for_worker)
        opening->start_ns = ls_clock_now();
    char no_thread[200];
    if (ls_worker_post(&opening->task, no_thread, sizeof no_thread) != 0) {
        snprintf(note, note_size, "%s: PM sampling was set up on the profiling thread and "
                 "samples are decoded at the profile's end only", no_thread);
        open_task(&opening->task);
        return wait ? LS_SAMPLER_WAITED
                    : waited_for_worker ? LS_SAMPLER_WAITED_FOR_WORKER : LS_SAMPLER_NO_WAIT;
    }
    if (!wait)
        return waited_for_worker ? LS_SAMPLER_WAITED_FOR_WORKER : LS_SAMPLER_NO_WAIT;
    ls_worker_hold(&opening->task);
    return ls_worker_wait_for(&opening->task, o->wait_bound_ns) ? LS_SAMPLER_WAITED
                                                                : LS_SAMPLER_WAIT_TIMED_OUT;
}

void ls_sampler_tick(void)
{
    if (!s.opened || !s.sampling)
        return;
    if (fake.items != NULL)
        fake_decode(fake.per_tick);
    else
        ls_pm_decode(&s.samples); /* a failure is in the stats */
}

/* Between profiles, while kept running: decode and drop. */
static void idle_tick(void)
{
    if (!ls_pm_running())
        return;
    ls_pm_decode(NULL);
}

static void keep_running_over(void)
{
    ls_worker_set_tick(NULL, 0);
    if (ls_pm_running())
        ls_pm_stop(NULL);
    ls_worker_when_idle(ls_sampler_release, s.options.keep_ns);
}

void ls_sampler_release(void)
{
    atomic_store(&sampler_set_up, 0);
    if (ls_pm_running())
        ls_pm_stop(NULL);
    ls_pm_release();
}

/* Waits until CUPTI's clock passes t, so the sample in progress at the
 * window's end is complete before a decode that does not stop sampling. */
static void wait_for_cupti_clock(uint64_t t)
{
    for (int i = 0; i < 100; i++) {
        uint64_t now = 0;
        if (ls_cupti.GetTimestamp == NULL || ls_cupti.GetTimestamp(&now) != CUPTI_SUCCESS ||
            now >= t)
            return;
        uint64_t left = t - now;
        struct timespec pause = {(time_t)(left / 1000000000ull), (long)(left % 1000000000ull)};
        nanosleep(&pause, NULL);
    }
}

/* Samples overlapping [start_ns, stop_ns] stay; returns how many went. */
static size_t keep_window(ls_sample_array *a, uint64_t start_ns, uint64_t stop_ns)
{
    size_t kept = 0;
    for (size_t i = 0; i < a->count; i++)
        if (a->items[i].end_ns > start_ns && a->items[i].start_ns < stop_ns)
            a->items[kept++] = a->items[i];
    size_t gone = a->count - kept;
    a->count = kept;
    return gone;
}

/* Why no sample covers a window that ended before sampling began: the
 * sampler's first set-up in the process, or (set up already) a start on the
 * worker thread that came after a short profile's end. */
static void late_start_reason(ls_capture *c, uint64_t start_ns, uint64_t stop_ns)
{
    if (!c->pm.sampler_reused)
        snprintf(c->pm.error, sizeof c->pm.error,
                 "PM sampling was still being set up when the profile ended (the first use in "
                 "a process sets it up on loopscope's worker thread: %.0f ms here), so no "
                 "sample covers this profile; the next profiles reuse the set-up",
                 (double)s.setup_ns / 1e6);
    else
        snprintf(c->pm.error, sizeof c->pm.error,
                 "PM sampling began %.3f ms after the profile started, after its end (it "
                 "lasted %.3f ms): the sampler, set up by an earlier profile, is started on "
                 "loopscope's worker thread, so no sample covers a profile this short",
                 (double)(s.began_ns - start_ns) / 1e6, (double)(stop_ns - start_ns) / 1e6);
}

/* 1 when no start posted a window after this one: the count stays closed
 * until this finish ends (reopen_window); 0 when one did. */
static int close_window(void)
{
    uint64_t expected = s.window;
    return atomic_compare_exchange_strong(&windows_posted, &expected,
                                          s.window | LS_WINDOWS_CLOSED);
}

static void reopen_window(void)
{
    atomic_fetch_and(&windows_posted, ~LS_WINDOWS_CLOSED);
}

void ls_sampler_finish(uint64_t start_ns, uint64_t stop_ns, ls_capture *c)
{
    if (!s.opened)
        return;
    s.opened = 0;
    if (!s.sampling) {
        snprintf(c->metrics_reason, sizeof c->metrics_reason, "%s",
                 s.reason[0] ? s.reason : "PM sampling did not start");
        c->sampled = 0;
        ls_pm_release(); /* a failed start leaves nothing worth keeping */
        return;
    }
    uint64_t keep_running = fake.items != NULL ? 0 : s.options.keep_running_ns;
    size_t decoded_before = s.samples.count;
    uint64_t tail_t0 = ls_clock_monotonic_ns();
    int next_window = 0;
    if (fake.items != NULL) {
        fake_decode(fake.count);
        next_window = !close_window();
        c->pm = fake.stats;
        c->pm.stopped_ns = stop_ns;
    } else {
        /* A profile started by now (back to back) keeps sampling running;
         * otherwise it stops before the last decode, as it always did.  With
         * a late hand-over the question is asked after the tail's decode: a
         * loop that ends in a synchronize reaches this finish before its
         * next start is posted, and the decode is what gives it the time. */
        int late = s.options.late_hand_over;
        next_window = late ? 0 : !close_window();
        if (late || next_window || keep_running > 0 || !s.options.stop_in_finish) {
            /* The tail, decoded while sampling goes on: the sample in
             * progress at the window's end is complete once the GPU's clock
             * has passed it (two intervals: at most 0.2 ms by default). */
            uint64_t complete_ns = stop_ns + 2 * s.options.pm.interval_ns;
            wait_for_cupti_clock(complete_ns);
            ls_pm_decode_until(&s.samples, complete_ns);
            if (late)
                next_window = !close_window();
            c->pm = *ls_pm_stats_now(); /* stopped_ns: the decode's end, the samples' bound */
        } else {
            if (ls_pm_stop(&s.samples) != 0 && c->stop_error[0] == '\0')
                snprintf(c->stop_error, sizeof c->stop_error, "PM sampling: %.1000s",
                         ls_pm_stats_now()->error);
            c->pm = *ls_pm_stats_now();
        }
    }
    c->pm.tail_samples = s.samples.count - decoded_before;
    if (next_window)
        carry_after(stop_ns); /* before the settling below drops them as late */
    c->pm.tail_decode_ns = ls_clock_monotonic_ns() - tail_t0;
    c->sampled = 1;
    c->pm_setup_ns = s.setup_ns;
    c->pm_began_ns = s.began_ns;
    c->records.sample_device = (uint32_t)c->pm.device;
    ls_sample_array *a = &s.samples;
    ls_samples_sort(a->items, a->count);
    if (a->count > 0 && c->pm.started_ns != 0) {
        ls_settle_result settled;
        uint64_t longest = (uint64_t)LS_SAMPLE_PARTIAL_FACTOR * (c->pm.interval ? c->pm.interval : 1);
        uint64_t started = c->pm.started_ns;
        a->count = ls_samples_settle(a->items, a->count, longest, started,
                                     c->pm.stopped_ns ? c->pm.stopped_ns : UINT64_MAX / 2,
                                     LS_SAMPLE_CLOCK_TOLERANCE_NS, &settled);
        c->pm.incomplete += settled.partial;
        c->sample_clock_delta_ns = settled.delta_ns;
        c->sample_clock_shift_ns = settled.shift_ns;
        c->sample_clock_latest_ns = settled.latest_ns;
    }
    c->samples_outside = keep_window(a, start_ns, stop_ns);
    if (s.began_ns > stop_ns && c->pm.error[0] == '\0')
        late_start_reason(c, start_ns, stop_ns);
    /* Hand the samples over: the capture's array takes the worker's. */
    ls_sample_array *into = &c->records.samples;
    if (into->count == 0) {
        free(into->items);
        *into = *a;
        memset(a, 0, sizeof *a);
    } else {
        for (size_t i = 0; i < a->count; i++) {
            ls_sample *slot = ls_samples_append(into);
            if (slot == NULL) {
                c->records.dropped_records += a->count - i;
                break;
            }
            *slot = a->items[i];
        }
        discard();
    }
    s.kept_running_for = keep_running;
    if (next_window)
        return; /* its open task follows on the worker and finds sampling on */
    /* The stop task and the release below are posted before the window
     * reopens: a start that waited for this finish finds them queued
     * ahead of its open task. */
    if (fake.items == NULL && keep_running == 0) {
        /* The stop and the image reset come after this finish, so the
         * summary waiting for it waits for neither; the next start (which
         * waits for the worker) finds sampling stopped and the image clean. */
        static ls_task after;
        memset(&after, 0, sizeof after);
        after.run = stop_task;
        atomic_store(&stop_pending, 1);
        char no_thread[64];
        if (ls_worker_post(&after, no_thread, sizeof no_thread) != 0)
            stop_task(&after);
    }
    if (keep_running > 0) {
        ls_worker_set_tick(idle_tick, s.options.pm.decode_period_ns);
        ls_worker_when_idle(keep_running_over, keep_running);
    } else {
        ls_worker_when_idle(ls_sampler_release, s.options.keep_ns);
    }
    reopen_window();
}

int ls_sampler_fake_no_context(void) { return fake.items != NULL && fake.no_context; }

int ls_sampler_fake(const ls_sample *samples, size_t n, size_t per_tick, uint64_t interval_ns,
                    uint64_t setup_ns, int reused, uint64_t setup_sleep_ns, int no_context)
{
    free(fake.items);
    memset(&fake, 0, sizeof fake);
    if (n == 0)
        return 0;
    fake.items = malloc(n * sizeof *fake.items);
    if (fake.items == NULL)
        return -1;
    memcpy(fake.items, samples, n * sizeof *samples);
    fake.count = n;
    fake.per_tick = per_tick;
    fake.interval_ns = interval_ns ? interval_ns : 1;
    fake.setup_ns = setup_ns;
    fake.reused = reused != 0;
    fake.setup_sleep_ns = setup_sleep_ns;
    fake.no_context = no_context != 0;
    return 0;
}
