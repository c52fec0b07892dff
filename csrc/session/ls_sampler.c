/* ls_sampler: see ls_sampler.h.
 *
 * Who touches what.  The window table and the sampler's state are under
 * `lock`: opens and closes come from the profiling thread (an open also
 * from CUDA's resource callback), frees and the set-up's outcome from the
 * worker.  A window's samples and costs belong to the decoding side: the
 * sampler's tick (on the worker's ticker thread), or the finish's tail
 * decode (on a thread beside the worker's finish task, while no tick runs); they are touched only
 * between a slot's open and its free, and an open finds them empty.  The
 * lock is never held across a CUPTI call: it orders before the worker's
 * own lock, never after. */
#define _POSIX_C_SOURCE 200809L
#include "ls_sampler.h"

#include "ls_clock.h"
#include "ls_cuda.h"
#include "ls_cupti.h"
#include "ls_samples.h"
#include "ls_worker.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Samples reaching further than this outside the profile are taken to be
 * on another clock than the activity records (ls_samples_settle). */
#define LS_SAMPLE_CLOCK_TOLERANCE_NS 100000000ull
#define LS_SAMPLE_PARTIAL_FACTOR 10

enum { LS_WINDOW_FREE = 0, LS_WINDOW_OPEN, LS_WINDOW_CLOSED };
enum { LS_STATE_OFF = 0, LS_STATE_STARTING, LS_STATE_RUNNING, LS_STATE_STOPPED };

typedef struct {
    /* under the lock */
    int state;                /* LS_WINDOW_* */
    uint64_t start_ns, stop_ns;
    int began;                /* sampling ran for it (from began_ns) */
    uint64_t began_ns;        /* CUPTI clock when sampling began (before start_ns when
                               * the sampler ran already) */
    int reused;               /* the sampler ran when it opened */
    int first_setup;          /* it waited for the process's first set-up */
    uint64_t setup_ns;        /* host time of the set-up it waited for */
    int failed;               /* that set-up failed: reason says why */
    char reason[1024];
    /* the decoding side's */
    ls_sample_array samples;
    ls_pm_cost cost;          /* decodes made while it was live */
    char error[1024];         /* the first decode failure while it was live, "" if none */
    int behind;               /* a tick while it was live fell behind the samples */
    int auto_interval;        /* it asked for the automatic interval */
    uint64_t serial;          /* which open it was (a freed slot is soon another's) */
    /* The first sample a decode gave it, and the window as that decode saw
     * it: said when the samples turn out outside the profile (H200
     * 2026-11-29: a start that waited 160 ms for a restart had got the last
     * profile's tail at its first start; ls_samples_settle drops those now). */
    uint64_t first_start_ns, first_end_ns, first_seen_start_ns;
    int64_t first_offset_ns;
    int first_by_tail;
} ls_window;

static struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;   /* a slot freed, a set-up ended */
    ls_window w[LS_SAMPLER_WINDOWS];
    int state;                /* LS_STATE_* */
    ls_sampler_options want;  /* what the next set-up starts */
    ls_sampler_options running; /* what runs */
    void *context;
    int setup_posted;         /* the set-up task is queued or running */
    int ever_ran;             /* sampling ran once in this process */
    uint64_t auto_interval_ns; /* the automatic interval now (0: not yet chosen) */
    int ticking_fast;         /* the sampler's tick runs at the decode period (windows live) */
    int fell_behind;          /* a tick fell behind since the last window was freed */
    uint64_t test_keep_running_ns, test_keep_ns; /* test hook: the idle times, 0: default */
    uint64_t test_wait_bound_ns;                 /* test hook: an open's wait, 0: default */
    uint64_t test_decode_ns;                     /* test hook: each test-source decode's cost */
    uint64_t test_overflows;                     /* test hook: each test-source decode's overflows */
    uint64_t test_tail_cap;                      /* test hook: the most samples a test tail reads */
    uint64_t started_ns;      /* CUPTI clock when sampling started */
} s = {.lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER};

/* Held by whoever calls into ls_pmsampling or touches a window's samples:
 * the worker's tick and tasks, the finish's tail (on a thread beside the
 * worker's finish task), a finish run on the profiling thread where no
 * worker runs.  Taken before `lock`, never after. */
static pthread_mutex_t decoding = PTHREAD_MUTEX_INITIALIZER;

/* Threads waiting for `decoding` other than the ticker (a finish's tail, a
 * set-up, a stop): a tick due meanwhile lets them go first.  The ticker
 * of a decoder that falls behind ticks back to back, and a mutex is not
 * fair: a finish waited for ever (H200 06:42Z, 20 us interval). */
static atomic_int decoding_waiters;

static void lock_decoding(void)
{
    atomic_fetch_add(&decoding_waiters, 1);
    pthread_mutex_lock(&decoding);
    atomic_fetch_sub(&decoding_waiters, 1);
}

/* Opens so far: a decode that saw fewer looks at the table again. */
static _Atomic uint64_t opens;

/* Two, used in turn: a set-up clears setup_posted before its task is
 * marked done, so the next may be posted while the last still ends. */
static ls_task setup_tasks[2];

/* The test source, and the figures it reports in place of CUPTI's. */
static struct {
    ls_sample *items;
    size_t count, next, per_tick;
    uint64_t interval_ns;
    uint64_t setup_ns;       /* sampling begins this long after the window starts */
    int reused;              /* as a sampler running since before any window */
    uint64_t setup_sleep_ns; /* real host time the set-up sleeps: a slow set-up */
    int no_context;          /* a profile's start finds no CUDA context */
    ls_pm_stats stats;
} fake;

int ls_sampler_is_fake(void) { return fake.items != NULL; }
int ls_sampler_fake_no_context(void) { return fake.items != NULL && fake.no_context; }

static int live(const ls_window *w) { return w->state != LS_WINDOW_FREE; }

static int any_live_locked(void)
{
    for (int k = 0; k < LS_SAMPLER_WINDOWS; k++)
        if (live(&s.w[k]))
            return 1;
    return 0;
}

/* A child forked while the worker held the lock would find it held for
 * ever; the parent's windows and sampler are not the child's (CUDA cannot
 * be used after a fork). */
static void lock_for_fork(void) { pthread_mutex_lock(&s.lock); }
static void unlock_after_fork(void) { pthread_mutex_unlock(&s.lock); }
/* (`decoding` may be held across fork by a decode: the child makes it anew.) */
static void forget_in_child(void)
{
    pthread_mutex_init(&decoding, NULL);
    pthread_mutex_init(&s.lock, NULL);
    pthread_cond_init(&s.changed, NULL);
    for (int k = 0; k < LS_SAMPLER_WINDOWS; k++) {
        free(s.w[k].samples.items);
        memset(&s.w[k], 0, sizeof s.w[k]);
    }
    s.state = LS_STATE_OFF;
    s.setup_posted = 0;
    memset(setup_tasks, 0, sizeof setup_tasks);
}
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static void watch_forks(void) { pthread_atfork(lock_for_fork, unlock_after_fork, forget_in_child); }

/* ---- decoding, on the worker ------------------------------------------ */

/* The live windows as a decode sees them. */
typedef struct {
    int n;
    int slot[LS_SAMPLER_WINDOWS];
    uint64_t serial[LS_SAMPLER_WINDOWS];
    uint64_t start_ns[LS_SAMPLER_WINDOWS], stop_ns[LS_SAMPLER_WINDOWS]; /* stop 0: open */
    uint64_t opens;       /* `opens` when taken */
    uint64_t started_ns;  /* the sampler's start */
} ls_live;

static void take_live(ls_live *v)
{
    pthread_mutex_lock(&s.lock);
    v->n = 0;
    v->opens = atomic_load(&opens);
    v->started_ns = s.started_ns;
    for (int k = 0; k < LS_SAMPLER_WINDOWS; k++)
        if (live(&s.w[k])) {
            v->slot[v->n] = k;
            v->serial[v->n] = s.w[k].serial;
            v->start_ns[v->n] = s.w[k].start_ns;
            v->stop_ns[v->n] = s.w[k].state == LS_WINDOW_CLOSED ? s.w[k].stop_ns : 0;
            v->n++;
        }
    pthread_mutex_unlock(&s.lock);
}

/* Whether the window was live when v was taken (the same open, not its slot's next). */
static int was_live(const ls_live *v, uint64_t serial)
{
    for (int i = 0; i < v->n; i++)
        if (v->serial[i] == serial)
            return 1;
    return 0;
}

static int overlaps(const ls_live *v, int i, uint64_t start, uint64_t end)
{
    return ls_sample_overlaps(start, end, v->start_ns[i], v->stop_ns[i]);
}

/* Sampling's clock against the activity clock, for the run that started
 * last (the decoding side's): judged from its first complete sample. */
static struct {
    int known;
    int64_t offset_ns;    /* sampling's clock less the activity clock */
    uint64_t longest_ns;  /* a longer sample is partial (the first after a start) */
    int last_tick_fast;   /* the last tick served a window (see decode_for_windows) */
    uint64_t first_ns;    /* the run's first complete sample's start, as decoded (said
                           * when a window's samples lie outside it) */
} clock_of_run;

static void new_run(uint64_t interval_ns)
{
    clock_of_run.known = 0;
    clock_of_run.offset_ns = 0;
    clock_of_run.first_ns = 0;
    clock_of_run.last_tick_fast = 0;
    clock_of_run.longest_ns = (uint64_t)LS_SAMPLE_PARTIAL_FACTOR * (interval_ns ? interval_ns : 1);
}

/* 1 with a sample's times on the activity clock in *start, *end; 0 for a
 * sample no window can use (partial, or with no start). */
static int on_our_clock(const ls_live *v, uint64_t *start, uint64_t *end)
{
    if (*start == 0 || *end < *start || *end - *start > clock_of_run.longest_ns)
        return 0;
    if (!clock_of_run.known) {
        clock_of_run.offset_ns = ls_sample_clock_offset(*start, v->started_ns,
                                                        LS_SAMPLE_CLOCK_TOLERANCE_NS);
        clock_of_run.first_ns = *start;
        clock_of_run.known = 1;
    }
    *start -= (uint64_t)clock_of_run.offset_ns;
    *end -= (uint64_t)clock_of_run.offset_ns;
    return 1;
}

/* ls_pm_want_fn: a sample is evaluated when a live window holds it. */
static int wanted(uint64_t start, uint64_t end, void *arg)
{
    ls_live *v = (ls_live *)arg;
    if (atomic_load(&opens) != v->opens)
        take_live(v); /* a window opened while this decode ran */
    if (!on_our_clock(v, &start, &end))
        return 0;
    for (int i = 0; i < v->n; i++)
        if (overlaps(v, i, start, end))
            return 1;
    return 0;
}

static void add_cost(ls_pm_cost *to, const ls_pm_cost *c)
{
    to->decodes += c->decodes;
    to->decode_ns += c->decode_ns;
    to->decode_data_ns += c->decode_data_ns;
    to->evaluate_ns += c->evaluate_ns;
    to->evaluated += c->evaluated;
    to->skipped += c->skipped;
    to->overflows += c->overflows;
    to->counter_data_full += c->counter_data_full;
    to->eval_errors += c->eval_errors;
    to->restarts += c->restarts;
    to->reconfigures += c->reconfigures;
    to->short_of_until += c->short_of_until;
    if (c->reached_ns > to->reached_ns)
        to->reached_ns = c->reached_ns;
}

/* The test source's decode: in order, at most `limit` samples, those that
 * ended by `now_ns`, evaluated (copied) only when a live window wants them. */
static void fake_decode(ls_sample_array *sink, ls_live *v, size_t limit, uint64_t now_ns,
                        ls_pm_cost *cost)
{
    memset(cost, 0, sizeof *cost);
    for (; limit > 0 && fake.next < fake.count; limit--, fake.next++) {
        const ls_sample *x = &fake.items[fake.next];
        if (x->end_ns > now_ns)
            break;
        if (!wanted(x->start_ns, x->end_ns, v)) {
            cost->skipped++;
            continue;
        }
        ls_sample *slot = ls_samples_append(sink);
        if (slot == NULL) {
            cost->eval_errors++;
            continue;
        }
        *slot = *x;
        cost->evaluated++;
    }
    cost->decodes = 1;
    cost->decode_ns = s.test_decode_ns; /* as slow as a test says (the ticks' own time aside) */
    cost->overflows = s.test_overflows; /* and as lossy */
    if (s.test_decode_ns > 0) { /* and as long, on the decoding thread */
        struct timespec pause = {(time_t)(s.test_decode_ns / 1000000000ull),
                                 (long)(s.test_decode_ns % 1000000000ull)};
        nanosleep(&pause, NULL);
    }
    ls_pm_stats *st = &fake.stats;
    st->decodes++;
    st->samples += cost->evaluated;
    st->skipped += cost->skipped;
}

/* Decodes what the sampler holds (no round past until_ns; 0: all) into
 * every live window the samples overlap.  The windows live at any moment
 * of the decode share its cost. */
static void decode_for_windows(uint64_t until_ns, uint64_t period_ns)
{
    ls_live v;
    take_live(&v);
    ls_sample_array got = {0};
    ls_pm_cost cost;
    if (fake.items != NULL) {
        uint64_t now = until_ns && until_ns < ls_clock_peek() ? until_ns : ls_clock_peek();
        size_t cap = until_ns && s.test_tail_cap ? (size_t)s.test_tail_cap : fake.count;
        fake_decode(&got, &v, until_ns ? cap : fake.per_tick, now, &cost);
        /* a tail that left samples it should have read: short, as at the cap */
        cost.short_of_until = until_ns != 0 && fake.next < fake.count &&
                              fake.items[fake.next].end_ns <= now;
    }
    else /* until_ns onto sampling's clock, where its rounds stop (a failure is in the stats) */
        ls_pm_decode(&got, wanted, &v,
                     until_ns ? until_ns + (uint64_t)clock_of_run.offset_ns : 0, &cost);
    ls_live began_with = v;
    take_live(&v); /* the windows opened meanwhile are the decode's too */
    /* Onto the activity clock (wanted() judged the run's offset). */
    size_t kept = 0;
    for (size_t j = 0; j < got.count; j++) {
        ls_sample x = got.items[j];
        if (x.start_ns == 0 || x.end_ns < x.start_ns ||
            x.end_ns - x.start_ns > clock_of_run.longest_ns)
            continue;
        x.start_ns -= (uint64_t)clock_of_run.offset_ns;
        x.end_ns -= (uint64_t)clock_of_run.offset_ns;
        got.items[kept++] = x;
    }
    got.count = kept;
    /* A failure belongs to the windows that were live for it. */
    const char *error = fake.items != NULL ? "" : ls_pm_stats_now()->error;
    for (int i = 0; error[0] != '\0' && i < v.n; i++) {
        ls_window *w = &s.w[v.slot[i]];
        if (w->error[0] == '\0')
            snprintf(w->error, sizeof w->error, "%s", error);
    }
    if (error[0] != '\0')
        ls_pm_clear_error();
    /* A tick that took longer than 1.5 periods is behind the samples, when
     * the tick before it served a window too: the first after an idle spell
     * decodes up to an idle period's backlog (H200 04:16Z, counting it
     * widened the interval and restarted samplers mid-run).  So is one that
     * found the hardware buffer overflowed: samples were lost (H200, 20 us:
     * the burst's last 9 ms gone, and no word of it). */
    int behind = period_ns != 0 && clock_of_run.last_tick_fast &&
                 (2 * cost.decode_ns > 3 * period_ns || cost.overflows > 0);
    if (until_ns == 0)
        clock_of_run.last_tick_fast = period_ns != 0;
    if (behind) {
        pthread_mutex_lock(&s.lock);
        s.fell_behind = 1;
        pthread_mutex_unlock(&s.lock);
    }
    uint64_t dropped = 0;
    for (int i = 0; i < v.n; i++) {
        ls_window *w = &s.w[v.slot[i]];
        add_cost(&w->cost, &cost);
        /* A slow tick is behind for the windows it began with: one opened
         * meanwhile (back to back, or in the slot just freed) shares its
         * samples, not the slowness of a decode that was mostly before it. */
        if (behind && was_live(&began_with, w->serial))
            w->behind = 1;
        for (size_t j = 0; j < got.count; j++) {
            const ls_sample *x = &got.items[j];
            if (!overlaps(&v, i, x->start_ns, x->end_ns))
                continue;
            if (w->samples.count == 0) {
                w->first_start_ns = x->start_ns;
                w->first_end_ns = x->end_ns;
                w->first_seen_start_ns = v.start_ns[i];
                w->first_offset_ns = clock_of_run.offset_ns;
                w->first_by_tail = until_ns != 0;
            }
            ls_sample *slot = ls_samples_append(&w->samples);
            if (slot != NULL)
                *slot = *x;
            else
                dropped++;
        }
        w->cost.eval_errors += dropped;
        dropped = 0;
    }
    free(got.items);
}

/* The sampler's tick (LS_TICK_SAMPLER), every decode period while sampling
 * runs, between profiles too. */
static void sampler_tick(void)
{
    if (atomic_load(&decoding_waiters) > 0)
        return; /* they go first; the next tick comes a period on */
    pthread_mutex_lock(&decoding);
    pthread_mutex_lock(&s.lock);
    uint64_t period = s.running.pm.decode_period_ns;
    int fast = any_live_locked();
    int slow_down = !fast && s.ticking_fast;
    if (slow_down)
        s.ticking_fast = 0;
    pthread_mutex_unlock(&s.lock);
    decode_for_windows(0, fast ? period : 0);
    pthread_mutex_unlock(&decoding);
    /* No window: its samples are let go, with fewer calls (each costs ~1 ms
     * more than its data on an H200).  Unset meanwhile (a stop), it stays so. */
    if (slow_down)
        ls_worker_retime_tick(LS_TICK_SAMPLER,
                              period > LS_PM_IDLE_DECODE_NS ? period : LS_PM_IDLE_DECODE_NS, 0);
}

/* ---- the sampler's life, on the worker -------------------------------- */

static void sampler_idle(void);

static void fake_start(uint64_t started_ns)
{
    ls_pm_stats *st = &fake.stats;
    memset(st, 0, sizeof *st);
    snprintf(st->chip, sizeof st->chip, "test source");
    snprintf(st->config_source, sizeof st->config_source, "test");
    st->time_trigger = 1;
    st->interval = fake.interval_ns;
    st->started_ns = started_ns;
    for (size_t i = 0; i < fake.count; i++)
        for (int j = 0; j < LS_METRICS; j++)
            if (!isnan(fake.items[i].values[j]))
                st->collected[j] = 1;
}

/* The new run's start, before `decoding` is let go: the next decode (a
 * finish's tail on its own thread may be waiting for the lock) judges the
 * run's clock offset against it, and against the last run's start it
 * would take the gap between the runs for an offset of the clocks. */
static void set_started(uint64_t started_ns)
{
    pthread_mutex_lock(&s.lock);
    s.started_ns = started_ns;
    pthread_mutex_unlock(&s.lock);
}

/* Sets sampling up (or starts it again, or anew with other options). */
static void setup_run(ls_task *task)
{
    (void)task;
    pthread_mutex_lock(&s.lock);
    ls_sampler_options o = s.want;
    void *context = s.context;
    uint64_t first_start = UINT64_MAX; /* of the windows waiting for it */
    for (int k = 0; k < LS_SAMPLER_WINDOWS; k++)
        if (live(&s.w[k]) && !s.w[k].began && s.w[k].start_ns < first_start)
            first_start = s.w[k].start_ns;
    s.state = LS_STATE_STARTING;
    pthread_mutex_unlock(&s.lock);

    uint64_t t0 = ls_clock_monotonic_ns();
    char why[1024] = "";
    int ok = 1;
    uint64_t started = 0;
    if (fake.items != NULL) {
        if (fake.setup_sleep_ns > 0) {
            struct timespec pause = {(time_t)(fake.setup_sleep_ns / 1000000000ull),
                                     (long)(fake.setup_sleep_ns % 1000000000ull)};
            nanosleep(&pause, NULL);
        }
        started = (first_start == UINT64_MAX ? 0 : first_start) + fake.setup_ns;
        fake_start(started);
        fake.stats.interval = o.pm.interval_ns; /* as a real start with these options */
        lock_decoding();
        new_run(fake.interval_ns);
        set_started(started);
        pthread_mutex_unlock(&decoding);
    } else {
        if (context != NULL)
            ls_cuda_use_context(context);
        lock_decoding();
        if (ls_pm_running())
            ls_pm_stop(); /* running with other options: started anew */
        ok = ls_pm_start(&o.pm, why, sizeof why) == 0;
        new_run(o.pm.interval_ns);
        if (ok) {
            started = ls_pm_stats_now()->started_ns;
            set_started(started);
        } else {
            ls_pm_release(); /* a failed start leaves nothing worth keeping */
        }
        pthread_mutex_unlock(&decoding);
    }
    uint64_t setup_ns = fake.items != NULL ? fake.setup_ns : ls_clock_monotonic_ns() - t0;

    pthread_mutex_lock(&s.lock);
    s.setup_posted = 0;
    s.state = ok ? LS_STATE_RUNNING : LS_STATE_OFF;
    if (ok) {
        s.running = o; /* s.started_ns is set already (set_started) */
        s.ever_ran = 1;
    }
    for (int k = 0; k < LS_SAMPLER_WINDOWS; k++) {
        ls_window *w = &s.w[k];
        if (!live(w) || w->began || w->failed)
            continue;
        w->setup_ns = setup_ns;
        if (ok) {
            w->began = 1;
            w->began_ns = started;
        } else {
            w->failed = 1;
            snprintf(w->reason, sizeof w->reason, "%s", why[0] ? why : "PM sampling did not start");
        }
    }
    int idle = !any_live_locked();
    uint64_t keep_running_ns = s.test_keep_running_ns ? s.test_keep_running_ns : o.keep_running_ns;
    pthread_cond_broadcast(&s.changed);
    pthread_mutex_unlock(&s.lock);
    if (ok) {
        pthread_mutex_lock(&s.lock);
        s.ticking_fast = 1;
        pthread_mutex_unlock(&s.lock);
        ls_worker_set_tick_in(LS_TICK_SAMPLER, sampler_tick, o.pm.decode_period_ns);
    }
    if (idle)
        ls_worker_when_idle(sampler_idle, keep_running_ns);
}

/* keep_running_ns after the last window: stopped (its tick ends); keep_ns
 * after that: disabled.  A window opened meanwhile keeps it as it is. */
static void sampler_idle(void)
{
    pthread_mutex_lock(&s.lock);
    if (any_live_locked() || s.setup_posted) {
        pthread_mutex_unlock(&s.lock);
        return; /* the last window's finish calls again */
    }
    int state = s.state;
    uint64_t keep_ns = s.test_keep_ns ? s.test_keep_ns : s.running.keep_ns;
    if (state == LS_STATE_RUNNING)
        s.state = LS_STATE_STOPPED;
    else if (state == LS_STATE_STOPPED)
        s.state = LS_STATE_OFF;
    pthread_mutex_unlock(&s.lock);
    if (state == LS_STATE_RUNNING) {
        ls_worker_set_tick_in(LS_TICK_SAMPLER, NULL, 0);
        lock_decoding();
        if (fake.items == NULL)
            ls_pm_stop();
        pthread_mutex_unlock(&decoding);
        ls_worker_when_idle(sampler_idle, keep_ns);
    } else if (state == LS_STATE_STOPPED && fake.items == NULL) {
        lock_decoding();
        ls_pm_release();
        pthread_mutex_unlock(&decoding);
    }
}

void ls_sampler_release(void)
{
    pthread_mutex_lock(&s.lock);
    s.state = LS_STATE_OFF;
    pthread_mutex_unlock(&s.lock);
    ls_worker_set_tick_in(LS_TICK_SAMPLER, NULL, 0);
    lock_decoding();
    if (fake.items == NULL)
        ls_pm_release();
    pthread_mutex_unlock(&decoding);
}

/* ---- windows, on the profiling thread --------------------------------- */

/* Under the lock: whether the running sampler serves options b. */
static int same_sampler_locked(const ls_sampler_options *b)
{
    if (fake.items != NULL) {
        /* The test source knows its interval only; installed as running,
         * it takes the first window's. */
        if (s.running.pm.interval_ns == 0)
            s.running.pm = b->pm;
        return s.running.pm.interval_ns == b->pm.interval_ns;
    }
    return ls_pm_same_sampler(&s.running.pm, &b->pm);
}

/* The counter data image's size in samples: every tick's samples in one
 * decode round, the slower idle tick's too (a round that fills the image
 * is followed by a reset and another round), at most 4096. */
static uint32_t image_samples(const ls_pm_options *pm)
{
    uint64_t interval = pm->interval_ns ? pm->interval_ns : 1;
    uint64_t busy = 4 * pm->decode_period_ns, idle = LS_PM_IDLE_DECODE_NS + LS_PM_IDLE_DECODE_NS / 4;
    uint64_t want = (busy > idle ? busy : idle) / interval;
    return (uint32_t)(want < 64 ? 64 : want > 4096 ? 4096 : want);
}

/* Waits on `changed` until pred() or the bound; 1 when pred() held. */
static int wait_locked(int (*pred)(int), int arg, uint64_t bound_ns)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now); /* `changed` runs on the default clock */
    uint64_t at = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec + bound_ns;
    struct timespec until = {(time_t)(at / 1000000000ull), (long)(at % 1000000000ull)};
    while (!pred(arg))
        if (pthread_cond_timedwait(&s.changed, &s.lock, &until) != 0)
            return pred(arg);
    return 1;
}

static int free_slot_locked(void)
{
    for (int k = 0; k < LS_SAMPLER_WINDOWS; k++)
        if (!live(&s.w[k]))
            return k;
    return -1;
}

static int has_free_slot(int unused) { (void)unused; return free_slot_locked() >= 0; }
static int set_up_for(int k) { return s.w[k].began || s.w[k].failed || !live(&s.w[k]); }

int ls_sampler_open(const ls_sampler_options *o, uint64_t start_ns, void *context, char *note,
                    size_t note_size, int no_wait, int *window)
{
    pthread_once(&fork_once, watch_forks);
    note[0] = '\0';
    *window = -1;
    int result = LS_SAMPLER_NO_WAIT;
    pthread_mutex_lock(&s.lock);
    uint64_t bound_ns = s.test_wait_bound_ns ? s.test_wait_bound_ns : o->wait_bound_ns;
    int k = free_slot_locked();
    if (k < 0 && !no_wait) {
        /* Every slot waits for a finish (a GPU far behind the host): the
         * window begins once one is free, after this wait. */
        if (wait_locked(has_free_slot, 0, bound_ns))
            k = free_slot_locked();
        result = LS_SAMPLER_WAITED_FOR_SLOT; /* the session moves the window's start */
    }
    if (k < 0) {
        pthread_mutex_unlock(&s.lock);
        snprintf(note, note_size, "no SM or DRAM for this profile: the %d profiles before it "
                 "still wait for their finish on loopscope's worker thread", LS_SAMPLER_WINDOWS);
        return result;
    }
    ls_window *w = &s.w[k];
    free(w->samples.items);
    memset(w, 0, sizeof *w);
    w->state = LS_WINDOW_OPEN;
    w->start_ns = start_ns;
    w->serial = atomic_fetch_add(&opens, 1) + 1;
    *window = k;
    ls_sampler_options chosen = *o;
    if (chosen.pm.interval_ns == 0) {
        w->auto_interval = 1;
        if (s.auto_interval_ns == 0)
            s.auto_interval_ns = LS_PM_AUTO_INTERVAL_NS;
        chosen.pm.interval_ns = s.auto_interval_ns;
    }
    if (chosen.pm.max_samples == 0)
        chosen.pm.max_samples = image_samples(&chosen.pm);
    o = &chosen;
    if (s.state == LS_STATE_RUNNING && same_sampler_locked(o)) {
        /* The common case, back to back or not: sampling runs. */
        w->began = 1;
        w->reused = 1;
        w->began_ns = s.started_ns;
        int speed_up = !s.ticking_fast;
        s.ticking_fast = 1;
        uint64_t period = s.running.pm.decode_period_ns;
        pthread_mutex_unlock(&s.lock);
        /* The idle spell's backlog is decoded now, beside the loop, not in
         * this window's finish. */
        if (speed_up)
            ls_worker_retime_tick(LS_TICK_SAMPLER, period, 1);
        return result;
    }
    /* Sampling must start (first use, after an idle stop, or other options). */
    w->first_setup = !s.ever_ran;
    int must_wait = !no_wait && (o->wait_for_start == LS_SAMPLER_WAIT_ALWAYS ||
                                 o->wait_for_start == LS_SAMPLER_WAIT_SETUP);
    s.want = *o;
    if (context != NULL)
        s.context = context;
    int post = !s.setup_posted;
    s.setup_posted = 1;
    pthread_mutex_unlock(&s.lock);
    if (post) {
        char no_thread[200];
        ls_task *task = &setup_tasks[ls_worker_done(&setup_tasks[0]) ? 0 : 1];
        memset(task, 0, sizeof *task);
        task->run = setup_run;
        if (ls_worker_post(task, no_thread, sizeof no_thread) != 0) {
            if (no_wait) {
                pthread_mutex_lock(&s.lock);
                s.setup_posted = 0;
                w->failed = 1;
                snprintf(w->reason, sizeof w->reason, "%s: PM sampling could not be set up",
                         no_thread);
                pthread_mutex_unlock(&s.lock);
                return result;
            }
            snprintf(note, note_size, "%s: PM sampling was set up on the profiling thread and "
                     "samples are decoded at the profile's end only", no_thread);
            setup_run(task);
            return LS_SAMPLER_WAITED;
        }
    }
    if (!must_wait)
        return result;
    pthread_mutex_lock(&s.lock);
    int done = wait_locked(set_up_for, k, bound_ns);
    pthread_mutex_unlock(&s.lock);
    return done ? LS_SAMPLER_WAITED : LS_SAMPLER_WAIT_TIMED_OUT;
}

void ls_sampler_move_start(int window, uint64_t start_ns)
{
    if (window < 0 || window >= LS_SAMPLER_WINDOWS)
        return;
    pthread_mutex_lock(&s.lock);
    if (s.w[window].state == LS_WINDOW_OPEN)
        s.w[window].start_ns = start_ns;
    pthread_mutex_unlock(&s.lock);
}

void ls_sampler_close(int window, uint64_t stop_ns)
{
    if (window < 0 || window >= LS_SAMPLER_WINDOWS)
        return;
    pthread_mutex_lock(&s.lock);
    if (s.w[window].state == LS_WINDOW_OPEN) {
        s.w[window].state = LS_WINDOW_CLOSED;
        s.w[window].stop_ns = stop_ns;
    }
    pthread_mutex_unlock(&s.lock);
}

/* ---- the finish, on the worker ---------------------------------------- */

/* Waits until CUPTI's clock passes t, so the sample in progress at the
 * window's end is complete before the tail's decode (a deadline on the
 * GPU's clock: at most two intervals). */
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

/* Why no sample covers a window that ended before sampling began. */
static void late_start_reason(ls_capture *c, const ls_window *w, uint64_t start_ns,
                              uint64_t stop_ns)
{
    if (w->first_setup)
        snprintf(c->pm.error, sizeof c->pm.error,
                 "PM sampling was still being set up when the profile ended (the first use in "
                 "a process sets it up on loopscope's worker thread: %.0f ms here), so no "
                 "sample covers this profile; the next profiles reuse the set-up",
                 (double)w->setup_ns / 1e6);
    else
        snprintf(c->pm.error, sizeof c->pm.error,
                 "PM sampling began %.3f ms after the profile started, after its end (it "
                 "lasted %.3f ms): it was started again on loopscope's worker thread (it had "
                 "stopped after a while without a profile, or ran with other options), so no "
                 "sample covers a profile this short",
                 (double)(w->began_ns - start_ns) / 1e6, (double)(stop_ns - start_ns) / 1e6);
}

/* A window whose ticks fell behind: the automatic interval doubles for
 * the profiles after it (the next one restarts sampling), and the
 * capture says so; an interval the user chose stays, and it says that. */
static void widen_after(const ls_window *w, ls_capture *c)
{
    uint64_t was = c->pm.interval;
    pthread_mutex_lock(&s.lock);
    uint64_t now = s.auto_interval_ns;
    if (w->auto_interval && now == was && now < LS_PM_AUTO_INTERVAL_MAX_NS)
        s.auto_interval_ns = now = 2 * now < LS_PM_AUTO_INTERVAL_MAX_NS
                                       ? 2 * now : LS_PM_AUTO_INTERVAL_MAX_NS;
    pthread_mutex_unlock(&s.lock);
    if (!w->auto_interval)
        snprintf(c->interval_note, sizeof c->interval_note,
                 "decoding fell behind the samples at metrics_interval_us=%g (%.0f us of host "
                 "time a sample here): a wider interval, or the default, keeps pace",
                 (double)was / 1e3, c->pm.samples + c->pm.skipped
                     ? (double)c->pm.decode_ns / 1e3 / (double)(c->pm.samples + c->pm.skipped) : 0.0);
    else if (now != was)
        snprintf(c->interval_note, sizeof c->interval_note,
                 "decoding fell behind the samples at %g us (%.0f us of host time a sample "
                 "here): the next profiles sample every %g us",
                 (double)was / 1e3, c->pm.samples + c->pm.skipped
                     ? (double)c->pm.decode_ns / 1e3 / (double)(c->pm.samples + c->pm.skipped) : 0.0,
                 (double)now / 1e3);
    else
        snprintf(c->interval_note, sizeof c->interval_note,
                 "decoding fell behind the samples at %g us, the widest automatic interval",
                 (double)was / 1e3);
}

/* Frees the slot; with no window left, the idle clock starts. */
static void free_window(int k)
{
    pthread_mutex_lock(&s.lock);
    ls_window *w = &s.w[k];
    free(w->samples.items);
    memset(&w->samples, 0, sizeof w->samples);
    w->state = LS_WINDOW_FREE;
    int idle = !any_live_locked() && !s.setup_posted;
    uint64_t keep_running_ns =
        s.test_keep_running_ns ? s.test_keep_running_ns : s.running.keep_running_ns;
    /* A sampler whose decodes fell behind would only fall further behind
     * with no window to serve (its hardware buffer overflows): it stops now. */
    if (idle && s.fell_behind)
        keep_running_ns = 0;
    if (idle)
        s.fell_behind = 0;
    pthread_cond_broadcast(&s.changed);
    pthread_mutex_unlock(&s.lock);
    if (idle)
        ls_worker_when_idle(sampler_idle, keep_running_ns);
}

static void window_figures(ls_capture *c, const ls_window *w)
{
    c->pm = fake.items != NULL ? fake.stats : *ls_pm_stats_now();
    ls_pm_stats *pm = &c->pm;
    pm->samples = w->cost.evaluated;
    pm->skipped = w->cost.skipped;
    pm->decodes = w->cost.decodes;
    pm->decode_ns = w->cost.decode_ns;
    pm->decode_data_ns = w->cost.decode_data_ns;
    pm->evaluate_ns = w->cost.evaluate_ns;
    pm->overflows = w->cost.overflows;
    pm->counter_data_full = w->cost.counter_data_full;
    pm->eval_errors = w->cost.eval_errors;
    pm->restarts = w->cost.restarts;
    pm->reconfigures = w->cost.reconfigures;
    pm->error[0] = '\0';
    pm->sampler_reused = w->reused;
    if (w->reused) {
        /* Its set-up was an earlier profile's. */
        memset(pm->phase_ns, 0, sizeof pm->phase_ns);
        pm->config_reused = 1;
        snprintf(pm->config_source, sizeof pm->config_source, "%s",
                 fake.items != NULL ? "test" : "reused");
        pm->cache_note[0] = '\0';
    }
}

void ls_sampler_finish(int window, uint64_t start_ns, uint64_t stop_ns, ls_capture *c)
{
    if (window < 0 || window >= LS_SAMPLER_WINDOWS) {
        c->sampled = 0;
        return;
    }
    ls_window *w = &s.w[window];
    pthread_mutex_lock(&s.lock);
    int began = w->began, failed = w->failed;
    int running = s.state == LS_STATE_RUNNING;
    uint64_t interval = s.running.pm.interval_ns;
    pthread_mutex_unlock(&s.lock);
    if (failed || !began) {
        snprintf(c->metrics_reason, sizeof c->metrics_reason, "%s",
                 failed ? w->reason
                        : "PM sampling was still being set up on loopscope's worker thread "
                          "when the profile was finished");
        c->sampled = 0;
        free_window(window);
        return;
    }
    lock_decoding();
    size_t before = w->samples.count;
    uint64_t t0 = ls_clock_monotonic_ns();
    uint64_t stopped = stop_ns;
    if (running) {
        /* The tail, decoded while sampling goes on: the sample in progress
         * at the window's end is complete once the GPU's clock has passed
         * it (two intervals: at most 0.2 ms by default). */
        uint64_t complete_ns = stop_ns + 2 * interval;
        if (fake.items == NULL)
            wait_for_cupti_clock(complete_ns);
        else
            ls_clock_pass_test(complete_ns); /* the test clock's time passes as the GPU's */
        uint64_t overflows = w->cost.overflows, short_of = w->cost.short_of_until;
        decode_for_windows(complete_ns, 0);
        /* The buffer overflowed since the last decode, which ran while this
         * window was live: its own samples were lost (H200, 20 us: one slow
         * tick, then the tail).  Or the tail stopped at its round cap short
         * of the window's end: the rest was never read (H200, 20 us, after
         * an idle spell's backlog: the burst's last 9.5 ms). */
        if (w->cost.overflows > overflows || w->cost.short_of_until > short_of)
            w->behind = 1;
        if (fake.items == NULL &&
            (ls_cupti.GetTimestamp == NULL || ls_cupti.GetTimestamp(&stopped) != CUPTI_SUCCESS))
            stopped = 0;
    }
    window_figures(c, w);
    if (w->behind)
        widen_after(w, c);
    if (w->error[0] != '\0')
        snprintf(c->pm.error, sizeof c->pm.error, "%s", w->error);
    c->pm.tail_samples = w->samples.count - before;
    c->pm.tail_decode_ns = ls_clock_monotonic_ns() - t0;
    c->pm.stop_ns = 0; /* sampling goes on: no stop is paid */
    c->pm.stopped_ns = stopped; /* the latest a decoded sample can end */
    c->sampled = 1;
    c->pm_setup_ns = w->setup_ns;
    c->pm_began_ns = w->began_ns;
    c->records.sample_device = (uint32_t)c->pm.device;
    ls_sample_array *a = &w->samples;
    ls_samples_sort(a->items, a->count);
    if (a->count > 0) {
        /* On the activity clock (the run's offset applied at decode) the
         * window's samples lie around its edges, one interval either side.
         * Reaching beyond the tolerance, they are not where the profile
         * was: left out, never moved onto it (ls_samples_settle). */
        uint64_t from = w->began_ns > start_ns ? w->began_ns : start_ns;
        ls_settle_result settled;
        uint64_t longest = (uint64_t)LS_SAMPLE_PARTIAL_FACTOR * (c->pm.interval ? c->pm.interval : 1);
        a->count = ls_samples_settle(a->items, a->count, longest, start_ns, from,
                                     stopped ? stopped : UINT64_MAX / 2,
                                     LS_SAMPLE_CLOCK_TOLERANCE_NS, &settled);
        c->pm.incomplete += settled.partial;
        c->samples_outside += settled.ended_before;
        c->sample_clock_delta_ns = settled.delta_ns;
        c->sample_clock_latest_ns = settled.latest_ns;
        if (settled.outside) {
            if (c->pm.error[0] == '\0')
                snprintf(c->pm.error, sizeof c->pm.error,
                         "the %zu PM sample%s decoded for this profile lay %.3f ms from its "
                         "start on the activity clock, beyond the %.0f ms a sample may: left "
                         "out, not moved onto it, so SM and DRAM are not given for it (the "
                         "first sample decoded for it: %+.3f..%+.3f ms, by %s, the window then "
                         "at %+.3f ms, the run's clock offset %.3f ms, sampling began %+.3f ms, "
                         "the run's first sample at %+.3f ms; %llu decodes evaluated %llu "
                         "samples and skipped %llu while it was live, reading to %+.3f ms, "
                         "%llu overflows, %llu restarts; the ticks gave it %zu; window %d of a "
                         "sampler %s)",
                         a->count, a->count == 1 ? "" : "s", (double)settled.delta_ns / 1e6,
                         (double)LS_SAMPLE_CLOCK_TOLERANCE_NS / 1e6,
                         ((double)w->first_start_ns - (double)start_ns) / 1e6,
                         ((double)w->first_end_ns - (double)start_ns) / 1e6,
                         w->first_by_tail ? "the finish's tail" : "a tick",
                         ((double)w->first_seen_start_ns - (double)start_ns) / 1e6,
                         (double)w->first_offset_ns / 1e6,
                         ((double)w->began_ns - (double)start_ns) / 1e6,
                         ((double)clock_of_run.first_ns - (double)start_ns) / 1e6,
                         (unsigned long long)w->cost.decodes,
                         (unsigned long long)w->cost.evaluated,
                         (unsigned long long)w->cost.skipped,
                         ((double)w->cost.reached_ns - (double)start_ns) / 1e6,
                         (unsigned long long)w->cost.overflows,
                         (unsigned long long)w->cost.restarts, before, window,
                         w->reused ? "running already" : "set up for it");
            c->samples_outside += a->count;
            a->count = 0;
        }
    }
    c->sample_clock_shift_ns = -clock_of_run.offset_ns; /* the run's, added at decode */
    c->samples_outside += keep_window(a, start_ns, stop_ns);
    if (w->began_ns > stop_ns && c->pm.error[0] == '\0')
        late_start_reason(c, w, start_ns, stop_ns);
    /* Hand the samples over: the capture's array takes the window's. */
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
    }
    pthread_mutex_unlock(&decoding);
    free_window(window);
}

/* ---- tests ------------------------------------------------------------ */

void ls_sampler_set_keep(uint64_t keep_running_ns, uint64_t keep_ns, uint64_t wait_bound_ns,
                         uint64_t fake_decode_ns, uint64_t fake_overflows, uint64_t fake_tail_cap)
{
    pthread_mutex_lock(&s.lock);
    s.test_tail_cap = fake_tail_cap;
    s.test_decode_ns = fake_decode_ns;
    s.test_overflows = fake_overflows;
    s.test_keep_running_ns = keep_running_ns;
    s.test_keep_ns = keep_ns;
    s.test_wait_bound_ns = wait_bound_ns;
    pthread_mutex_unlock(&s.lock);
}

const char *ls_sampler_state(int *live_windows)
{
    static const char *const names[] = {"off", "starting", "running", "stopped"};
    pthread_mutex_lock(&s.lock);
    int n = 0;
    for (int k = 0; k < LS_SAMPLER_WINDOWS; k++)
        n += live(&s.w[k]);
    const char *name = names[s.state];
    pthread_mutex_unlock(&s.lock);
    if (live_windows != NULL)
        *live_windows = n;
    return name;
}

int ls_sampler_fake(const ls_sample *samples, size_t n, size_t per_tick, uint64_t interval_ns,
                    uint64_t setup_ns, int reused, uint64_t setup_sleep_ns, int no_context)
{
    ls_worker_set_tick_in(LS_TICK_SAMPLER, NULL, 0);
    ls_worker_wait_tick(LS_TICK_SAMPLER); /* its last decode reads the old source */
    ls_worker_when_idle(NULL, 0);
    int was_fake = fake.items != NULL;
    free(fake.items);
    memset(&fake, 0, sizeof fake);
    pthread_mutex_lock(&s.lock);
    for (int k = 0; k < LS_SAMPLER_WINDOWS; k++) {
        free(s.w[k].samples.items);
        memset(&s.w[k], 0, sizeof s.w[k]);
    }
    s.setup_posted = 0;
    s.ever_ran = reused != 0;
    s.auto_interval_ns = 0;
    s.ticking_fast = 0;
    /* A real sampler left running by an earlier profile stays as it is
     * for the fake's removal; the fake's own state goes with it. */
    if (was_fake || n > 0)
        s.state = LS_STATE_OFF;
    pthread_mutex_unlock(&s.lock);
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
    if (fake.reused) {
        /* Running since before any window, as a sampler an earlier profile
         * of the process set up. */
        fake_start(0);
        lock_decoding();
        new_run(fake.interval_ns);
        pthread_mutex_unlock(&decoding);
        pthread_mutex_lock(&s.lock);
        s.state = LS_STATE_RUNNING;
        s.started_ns = 0;
        memset(&s.running, 0, sizeof s.running);
        s.running.pm.interval_ns = 0; /* the first window's */
        s.running.keep_running_ns = 5000000000ull;
        s.running.keep_ns = 3000000000ull;
        pthread_mutex_unlock(&s.lock);
        ls_worker_set_tick_in(LS_TICK_SAMPLER, sampler_tick, 10000000ull);
    }
    return 0;
}
