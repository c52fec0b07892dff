/* ls_worker: see ls_worker.h. */
#define _POSIX_C_SOURCE 200809L
#include "ls_worker.h"

#include "ls_clock.h"
#include "ls_owncalls.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake; /* the thread waits on it; CLOCK_MONOTONIC */
    pthread_cond_t done; /* waiters wait on it */
    int exists;          /* a thread was made and not joined yet */
    int ended;           /* it left its loop */
    int ending;          /* shutdown asked */
    ls_task *head, *tail;
    ls_task *running;
    ls_tick_fn tick[LS_TICK_SLOTS];
    uint64_t period_ns[LS_TICK_SLOTS], next_tick_ns[LS_TICK_SLOTS];
    int ticking_now;     /* a tick runs, without the lock */
    ls_tick_fn when_idle;
    uint64_t idle_at_ns;
    uint64_t ticks;
    pthread_t thread;
    /* The sampler's tick runs on a thread of its own (the ticker): a PM
     * decode takes ~0.5-0.8 ms of host time for each ms the SMs were busy
     * since the last one (H200, 2026-11-29), and a finish or a start queued
     * behind it waited that long (15-32 ms). */
    pthread_cond_t ticker_wake; /* CLOCK_MONOTONIC */
    int ticker_exists, ticker_ended, ticker_ticking;
    pthread_t ticker;
} w = {.lock = PTHREAD_MUTEX_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int wake_ready;

static struct timespec at_ns(uint64_t t)
{
    return (struct timespec){(time_t)(t / 1000000000ull), (long)(t % 1000000000ull)};
}

/* A forked child has no worker thread: its queued and running tasks never
 * run there, so their waits must not hang. */
static void forget_in_child(void)
{
    pthread_mutex_init(&w.lock, NULL);
    pthread_cond_init(&w.done, NULL);
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) == 0) {
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&w.wake, &attr);
        pthread_cond_init(&w.ticker_wake, &attr);
        pthread_condattr_destroy(&attr);
    }
    w.ticker_exists = w.ticker_ended = w.ticker_ticking = 0;
    ls_task *lost[2] = {w.running, w.head};
    for (int k = 0; k < 2; k++)
        for (ls_task *t = lost[k]; t != NULL; t = k ? t->next : NULL) {
            t->failed = 1;
            t->state = LS_TASK_DONE;
            t->waiters = 0;
        }
    w.head = w.tail = w.running = NULL;
    w.exists = w.ended = w.ending = w.ticking_now = 0;
    for (int k = 0; k < LS_TICK_SLOTS; k++)
        w.tick[k] = NULL;
    w.when_idle = NULL;
}

/* The lock is held across fork(), so the child's copy of the queue is never
 * caught half-changed (a task taken off the queue but not yet marked
 * running was lost to the child, whose wait for it then never ended). */
static void lock_for_fork(void) { pthread_mutex_lock(&w.lock); }
static void unlock_after_fork(void) { pthread_mutex_unlock(&w.lock); }

static void init_once(void)
{
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) == 0) {
        if (pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0 &&
            pthread_cond_init(&w.wake, &attr) == 0 &&
            pthread_cond_init(&w.ticker_wake, &attr) == 0)
            wake_ready = 1;
        pthread_condattr_destroy(&attr);
    }
    pthread_atfork(lock_for_fork, unlock_after_fork, forget_in_child);
}

static int any_tick_locked(void)
{
    for (int k = 0; k < LS_TICK_SLOTS; k++)
        if (w.tick[k] != NULL)
            return 1;
    return 0;
}

/* Runs `task` outside the lock and marks it done (or disposes of it). */
static void run_task(ls_task *task)
{
    w.running = task;
    task->state = LS_TASK_RUNNING;
    pthread_mutex_unlock(&w.lock);
    task->run(task);
    pthread_mutex_lock(&w.lock);
    w.running = NULL;
    if (task->dispose != NULL) {
        ls_task_fn dispose = task->dispose;
        pthread_mutex_unlock(&w.lock);
        dispose(task);
        pthread_mutex_lock(&w.lock);
    } else {
        task->state = LS_TASK_DONE;
    }
    pthread_cond_broadcast(&w.done);
}

/* Under the lock: runs the slot's tick (due at `now`) outside it, with
 * *running set meanwhile.  A fixed rate from the tick's start: one that
 * took longer than the period (a PM decode falling behind) is followed at
 * once, so the backlog never grows a period's idle time on top; a tick
 * that moved its own next run (re-timed, set again) keeps that. */
static void run_tick_locked(int slot, int *running, uint64_t now)
{
    ls_tick_fn tick = w.tick[slot];
    *running = 1;
    pthread_mutex_unlock(&w.lock);
    tick();
    pthread_mutex_lock(&w.lock);
    *running = 0;
    if (w.next_tick_ns[slot] <= now)
        w.next_tick_ns[slot] = now + w.period_ns[slot];
    pthread_cond_broadcast(&w.done);
}

static void *worker_loop(void *unused)
{
    (void)unused;
    ls_owncalls_mark_thread(); /* its CUDA calls are loopscope's, not the user's */
    pthread_mutex_lock(&w.lock);
    for (;;) {
        if (w.head != NULL) {
            ls_task *task = w.head;
            w.head = task->next;
            if (w.head == NULL)
                w.tail = NULL;
            task->next = NULL;
            run_task(task);
            continue;
        }
        uint64_t now = ls_clock_monotonic_ns();
        int due = -1;
        if (!w.ending && w.tick[LS_TICK_PROFILE] != NULL &&
            now >= w.next_tick_ns[LS_TICK_PROFILE])
            due = LS_TICK_PROFILE;
        if (due >= 0) {
            run_tick_locked(due, &w.ticking_now, now);
            w.ticks++;
            continue;
        }
        if (w.when_idle != NULL && (w.ending || now >= w.idle_at_ns)) {
            ls_tick_fn fn = w.when_idle;
            w.when_idle = NULL;
            pthread_mutex_unlock(&w.lock);
            fn();
            pthread_mutex_lock(&w.lock);
            if (w.head == NULL && w.tick[LS_TICK_PROFILE] == NULL && w.when_idle == NULL)
                break;
            continue;
        }
        if (w.ending)
            break;
        uint64_t until = UINT64_MAX;
        if (w.tick[LS_TICK_PROFILE] != NULL)
            until = w.next_tick_ns[LS_TICK_PROFILE];
        if (w.when_idle != NULL && w.idle_at_ns < until)
            until = w.idle_at_ns;
        if (until == UINT64_MAX) {
            pthread_cond_wait(&w.wake, &w.lock);
        } else {
            struct timespec at = at_ns(until);
            pthread_cond_timedwait(&w.wake, &w.lock, &at);
        }
    }
    w.ended = 1;
    pthread_cond_broadcast(&w.done);
    pthread_mutex_unlock(&w.lock);
    return NULL;
}

/* The sampler's tick (run_tick_locked's rate); the thread ends once the
 * tick is unset. */
static void *ticker_loop(void *unused)
{
    (void)unused;
    ls_owncalls_mark_thread();
    pthread_mutex_lock(&w.lock);
    while (!w.ending && w.tick[LS_TICK_SAMPLER] != NULL) {
        uint64_t now = ls_clock_monotonic_ns();
        if (now < w.next_tick_ns[LS_TICK_SAMPLER]) {
            struct timespec at = at_ns(w.next_tick_ns[LS_TICK_SAMPLER]);
            pthread_cond_timedwait(&w.ticker_wake, &w.lock, &at);
            continue;
        }
        run_tick_locked(LS_TICK_SAMPLER, &w.ticker_ticking, now);
    }
    w.ticker_ended = 1;
    pthread_cond_broadcast(&w.done);
    pthread_mutex_unlock(&w.lock);
    return NULL;
}

/* Under the lock: joins a thread (the worker or the ticker) that ended,
 * outside the lock. */
static void join_ended_locked(int *exists, int *ended, pthread_t thread)
{
    if (*exists && *ended) {
        *exists = *ended = 0;
        pthread_mutex_unlock(&w.lock);
        pthread_join(thread, NULL);
        pthread_mutex_lock(&w.lock);
    }
}

static void join_ticker_locked(void)
{
    join_ended_locked(&w.ticker_exists, &w.ticker_ended, w.ticker);
}

/* Makes a thread that inherits a mask of every signal: they stay with
 * Python's threads.  pthread_create's result. */
static int create_masked(pthread_t *thread, void *(*fn)(void *))
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(thread, NULL, fn, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

/* Under the lock: makes the ticker if none runs (its tick is set). */
static int ensure_ticker_locked(void)
{
    pthread_once(&once, init_once);
    if (w.ticker_exists && !w.ticker_ended)
        return 0;
    join_ticker_locked();
    if (!wake_ready || w.ending || create_masked(&w.ticker, ticker_loop) != 0)
        return -1;
    w.ticker_exists = 1;
    w.ticker_ended = 0;
    return 0;
}

static void join_if_ended_locked(void)
{
    join_ended_locked(&w.exists, &w.ended, w.thread);
}

/* Under the lock: makes the thread if none runs.  0, or -1 with `why`. */
static int ensure_thread_locked(char *why, size_t why_size)
{
    pthread_once(&once, init_once);
    join_if_ended_locked();
    if (w.exists)
        return 0;
    if (!wake_ready) {
        snprintf(why, why_size, "cannot set up loopscope's worker thread (condition variable)");
        return -1;
    }
    w.ending = 0;
    int rc = create_masked(&w.thread, worker_loop);
    if (rc != 0) {
        snprintf(why, why_size, "cannot start loopscope's worker thread: %s", strerror(rc));
        return -1;
    }
    w.exists = 1;
    w.ended = 0;
    w.ticks = 0;
    return 0;
}

int ls_worker_post(ls_task *task, char *why, size_t why_size)
{
    pthread_mutex_lock(&w.lock);
    task->next = NULL;
    task->failed = 0;
    task->dispose = NULL;
    task->waiters = 0;
    if (ensure_thread_locked(why, why_size) != 0) {
        task->state = LS_TASK_NEW;
        pthread_mutex_unlock(&w.lock);
        return -1;
    }
    task->state = LS_TASK_QUEUED;
    if (w.tail != NULL)
        w.tail->next = task;
    else
        w.head = task;
    w.tail = task;
    pthread_cond_signal(&w.wake);
    pthread_mutex_unlock(&w.lock);
    return 0;
}

void ls_worker_hold(ls_task *task)
{
    pthread_mutex_lock(&w.lock);
    task->waiters++;
    pthread_mutex_unlock(&w.lock);
}

void ls_worker_wait(ls_task *task)
{
    pthread_mutex_lock(&w.lock);
    while (task->state != LS_TASK_DONE && task->state != LS_TASK_NEW)
        pthread_cond_wait(&w.done, &w.lock);
    task->waiters--;
    pthread_cond_broadcast(&w.done);
    pthread_mutex_unlock(&w.lock);
}

int ls_worker_wait_for(ls_task *task, uint64_t timeout_ns)
{
    /* w.done runs on CLOCK_REALTIME (the default): so does the deadline. */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t deadline = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec + timeout_ns;
    struct timespec until = at_ns(deadline);
    pthread_mutex_lock(&w.lock);
    int done = 1;
    while (task->state != LS_TASK_DONE && task->state != LS_TASK_NEW) {
        if (pthread_cond_timedwait(&w.done, &w.lock, &until) == ETIMEDOUT) {
            done = task->state == LS_TASK_DONE || task->state == LS_TASK_NEW;
            break;
        }
    }
    task->waiters--;
    pthread_cond_broadcast(&w.done);
    pthread_mutex_unlock(&w.lock);
    return done;
}

int ls_worker_done(ls_task *task)
{
    pthread_mutex_lock(&w.lock);
    int done = task->state == LS_TASK_DONE || task->state == LS_TASK_NEW;
    pthread_mutex_unlock(&w.lock);
    return done;
}

void ls_worker_settle(ls_task *task)
{
    pthread_mutex_lock(&w.lock);
    while ((task->state != LS_TASK_DONE && task->state != LS_TASK_NEW) || task->waiters > 0)
        pthread_cond_wait(&w.done, &w.lock);
    pthread_mutex_unlock(&w.lock);
}

int ls_worker_abandon(ls_task *task, ls_task_fn dispose)
{
    pthread_mutex_lock(&w.lock);
    int now = (task->state == LS_TASK_DONE || task->state == LS_TASK_NEW) && task->waiters == 0;
    if (!now)
        task->dispose = dispose;
    pthread_mutex_unlock(&w.lock);
    return now;
}

int ls_worker_wait_idle(void)
{
    int waited = 0;
    pthread_mutex_lock(&w.lock);
    while (w.head != NULL || w.running != NULL || w.ticking_now) {
        waited = 1;
        pthread_cond_wait(&w.done, &w.lock);
    }
    pthread_mutex_unlock(&w.lock);
    return waited;
}

void ls_worker_set_tick_in(int slot, ls_tick_fn tick, uint64_t period_ns)
{
    char why[128];
    if (slot < 0 || slot >= LS_TICK_SLOTS)
        return;
    pthread_mutex_lock(&w.lock);
    if (slot == LS_TICK_SAMPLER) {
        w.tick[slot] = tick;
        w.period_ns[slot] = period_ns ? period_ns : 1;
        w.next_tick_ns[slot] = ls_clock_monotonic_ns() + w.period_ns[slot];
        if (tick != NULL && ensure_ticker_locked() != 0)
            w.tick[slot] = NULL; /* no thread: no ticks; the finish decodes it all */
        else if (w.ticker_exists)
            pthread_cond_signal(&w.ticker_wake);
        pthread_mutex_unlock(&w.lock);
        return;
    }
    if (tick != NULL && ensure_thread_locked(why, sizeof why) != 0) {
        pthread_mutex_unlock(&w.lock); /* no thread: no ticks; the finish does it all */
        return;
    }
    w.tick[slot] = tick;
    if (tick != NULL)
        w.ticks = 0;
    w.period_ns[slot] = period_ns ? period_ns : 1;
    w.next_tick_ns[slot] = ls_clock_monotonic_ns() + w.period_ns[slot];
    if (w.exists)
        pthread_cond_signal(&w.wake);
    pthread_mutex_unlock(&w.lock);
}

void ls_worker_retime_tick(int slot, uint64_t period_ns, int at_once)
{
    if (slot < 0 || slot >= LS_TICK_SLOTS)
        return;
    pthread_mutex_lock(&w.lock);
    if (w.tick[slot] != NULL) {
        uint64_t now = ls_clock_monotonic_ns();
        w.period_ns[slot] = period_ns ? period_ns : 1;
        w.next_tick_ns[slot] = at_once ? now : now + w.period_ns[slot];
        pthread_cond_signal(slot == LS_TICK_SAMPLER ? &w.ticker_wake : &w.wake);
    }
    pthread_mutex_unlock(&w.lock);
}

void ls_worker_wait_tick(int slot)
{
    pthread_mutex_lock(&w.lock);
    while (slot == LS_TICK_SAMPLER ? w.ticker_ticking : w.ticking_now)
        pthread_cond_wait(&w.done, &w.lock);
    pthread_mutex_unlock(&w.lock);
}

void ls_worker_set_tick(ls_tick_fn tick, uint64_t period_ns)
{
    ls_worker_set_tick_in(LS_TICK_PROFILE, tick, period_ns);
}

void ls_worker_when_idle(ls_tick_fn fn, uint64_t after_ns)
{
    char why[128];
    pthread_mutex_lock(&w.lock);
    w.when_idle = fn;
    w.idle_at_ns = ls_clock_monotonic_ns() + after_ns;
    /* The worker may have ended while the ticker runs on: made again. */
    int alive = fn != NULL && !w.ending ? ensure_thread_locked(why, sizeof why) == 0
                                        : w.exists && !w.ended;
    if (alive)
        pthread_cond_signal(&w.wake);
    pthread_mutex_unlock(&w.lock);
    if (fn != NULL && !alive) {
        /* No thread to run it later: now, here (the sampler's release). */
        pthread_mutex_lock(&w.lock);
        w.when_idle = NULL;
        pthread_mutex_unlock(&w.lock);
        fn();
    }
}

void ls_worker_shutdown(uint64_t timeout_ns)
{
    uint64_t deadline = ls_clock_monotonic_ns() + timeout_ns;
    struct timespec at;
    clock_gettime(CLOCK_REALTIME, &at); /* `done` uses the default clock */
    at = at_ns((uint64_t)at.tv_sec * 1000000000ull + (uint64_t)at.tv_nsec + timeout_ns);
    pthread_mutex_lock(&w.lock);
    /* Nothing is made from here on (a post makes the worker anew).  The
     * ticker first: its tick unset, it ends after the decode in hand. */
    w.ending = 1;
    w.tick[LS_TICK_SAMPLER] = NULL;
    if (w.ticker_exists) {
        pthread_cond_signal(&w.ticker_wake);
        while (!w.ticker_ended && ls_clock_monotonic_ns() < deadline)
            if (pthread_cond_timedwait(&w.done, &w.lock, &at) == ETIMEDOUT)
                break;
        join_ticker_locked(); /* stuck in CUPTI: left behind, as the worker below */
    }
    join_if_ended_locked();
    if (!w.exists) {
        ls_tick_fn fn = w.when_idle;
        w.when_idle = NULL;
        pthread_mutex_unlock(&w.lock);
        if (fn != NULL)
            fn();
        pthread_mutex_lock(&w.lock);
        w.ending = 0; /* a later profile makes threads again */
        pthread_mutex_unlock(&w.lock);
        return;
    }
    for (int k = 0; k < LS_TICK_SLOTS; k++)
        w.tick[k] = NULL;
    pthread_cond_signal(&w.wake);
    while (!w.ended && ls_clock_monotonic_ns() < deadline)
        if (pthread_cond_timedwait(&w.done, &w.lock, &at) == ETIMEDOUT)
            break;
    if (w.ended) {
        pthread_t thread = w.thread;
        w.exists = w.ended = w.ending = 0;
        pthread_mutex_unlock(&w.lock);
        pthread_join(thread, NULL);
        return;
    }
    /* Stuck (a GPU that never finishes): leave it; the process is ending. */
    pthread_mutex_unlock(&w.lock);
}

uint64_t ls_worker_ticks(void)
{
    pthread_mutex_lock(&w.lock);
    uint64_t ticks = w.ticks;
    pthread_mutex_unlock(&w.lock);
    return ticks;
}

const char *ls_worker_state(void)
{
    pthread_mutex_lock(&w.lock);
    int alive = w.exists && !w.ended, ticker = w.ticker_exists && !w.ticker_ended;
    const char *name = alive && (w.head || w.running)  ? "busy"
                       : alive && any_tick_locked()    ? "ticking"
                       : !alive && ticker              ? "ticking" /* the sampler's, alone */
                       : alive && w.when_idle != NULL  ? "idle"
                       : alive                         ? "parked"
                       : w.exists                      ? "ended"
                                                       : "none";
    pthread_mutex_unlock(&w.lock);
    return name;
}
