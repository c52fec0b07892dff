/* ls_pmdecoder: see ls_pmdecoder.h. */
#define _POSIX_C_SOURCE 200809L
#include "ls_pmdecoder.h"

#include "ls_clock.h"
#include "ls_pmsampling.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef enum {
    DECODING, /* decode once a period */
    PARKED,   /* wait for the next profile or for release_after */
    IDLE,     /* release sampling at release_at unless held first */
    ENDING,   /* leave */
} decoder_state;

static struct {
    int exists;           /* a thread was made and not joined yet */
    int ended;            /* it left its loop (under lock) */
    int busy;             /* it is decoding, without the lock */
    decoder_state state;  /* under lock */
    uint64_t period_ns;
    struct timespec release_at;
    uint64_t rounds;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;  /* the thread waits on it; CLOCK_MONOTONIC */
    pthread_cond_t done;  /* stop waits on it for busy == 0 */
    ls_sample_array samples; /* written by the thread only while DECODING */
} decoder = {.lock = PTHREAD_MUTEX_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int wake_ready;

static void after(uint64_t ns, struct timespec *at)
{
    uint64_t t = ls_clock_monotonic_ns() + ns;
    at->tv_sec = (time_t)(t / 1000000000ull);
    at->tv_nsec = (long)(t % 1000000000ull);
}

/* A forked child has no decoder thread; forget the parent's (its sampler
 * belongs to the parent's process, CUPTI refuses it and says so). */
static void forget_in_child(void)
{
    pthread_mutex_init(&decoder.lock, NULL);
    pthread_cond_init(&decoder.done, NULL);
    decoder.exists = decoder.ended = decoder.busy = 0;
    memset(&decoder.samples, 0, sizeof decoder.samples);
}

static void init_once(void)
{
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) == 0) {
        if (pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0 &&
            pthread_cond_init(&decoder.wake, &attr) == 0)
            wake_ready = 1;
        pthread_condattr_destroy(&attr);
    }
    pthread_atfork(NULL, NULL, forget_in_child);
}

static void *decoder_loop(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&decoder.lock);
    while (decoder.state != ENDING) {
        if (decoder.state == DECODING) {
            struct timespec at;
            after(decoder.period_ns, &at);
            int rc = 0;
            while (decoder.state == DECODING && rc != ETIMEDOUT)
                rc = pthread_cond_timedwait(&decoder.wake, &decoder.lock, &at);
            if (decoder.state != DECODING)
                continue;
            decoder.rounds++;
            decoder.busy = 1;
            pthread_mutex_unlock(&decoder.lock);
            ls_pm_decode(&decoder.samples); /* a failure is in the stats */
            pthread_mutex_lock(&decoder.lock);
            decoder.busy = 0;
            pthread_cond_broadcast(&decoder.done);
        } else if (decoder.state == PARKED) {
            pthread_cond_wait(&decoder.wake, &decoder.lock);
        } else { /* IDLE */
            int rc = pthread_cond_timedwait(&decoder.wake, &decoder.lock, &decoder.release_at);
            if (decoder.state == IDLE && rc == ETIMEDOUT) {
                ls_pm_release(); /* under the lock: a hold waits for it */
                decoder.state = ENDING;
            }
        }
    }
    decoder.ended = 1;
    pthread_mutex_unlock(&decoder.lock);
    return NULL;
}

static void join_if_ended(void)
{
    pthread_mutex_lock(&decoder.lock);
    int ended = decoder.exists && decoder.ended;
    pthread_mutex_unlock(&decoder.lock);
    if (ended) {
        pthread_join(decoder.thread, NULL);
        decoder.exists = decoder.ended = 0;
    }
}

void ls_pmdecoder_hold(void)
{
    pthread_mutex_lock(&decoder.lock);
    if (decoder.exists && !decoder.ended && decoder.state == IDLE) {
        decoder.state = PARKED;
        pthread_cond_signal(&decoder.wake);
    }
    pthread_mutex_unlock(&decoder.lock);
    join_if_ended(); /* it ended: it released sampling, a start sets it up anew */
}

int ls_pmdecoder_start(uint64_t period_ns, char *why, size_t why_size)
{
    pthread_once(&once, init_once);
    if (!wake_ready) {
        snprintf(why, why_size, "cannot set up the PM sample decoder's condition variable");
        return -1;
    }
    join_if_ended();
    pthread_mutex_lock(&decoder.lock);
    memset(&decoder.samples, 0, sizeof decoder.samples);
    decoder.period_ns = period_ns ? period_ns : 1;
    decoder.rounds = 0;
    decoder.state = DECODING;
    if (decoder.exists) {
        pthread_cond_signal(&decoder.wake);
        pthread_mutex_unlock(&decoder.lock);
        return 0;
    }
    /* The thread inherits this mask: every signal stays with Python's threads. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&decoder.thread, NULL, decoder_loop, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    decoder.exists = rc == 0;
    decoder.ended = 0;
    pthread_mutex_unlock(&decoder.lock);
    if (rc != 0) {
        snprintf(why, why_size, "cannot start the PM sample decoder thread: %s", strerror(rc));
        return -1;
    }
    return 0;
}

int ls_pmdecoder_stop(ls_sample_array *into, uint64_t *lost)
{
    *lost = 0;
    pthread_mutex_lock(&decoder.lock);
    if (!decoder.exists || decoder.ended || decoder.state != DECODING) {
        pthread_mutex_unlock(&decoder.lock);
        return 0;
    }
    decoder.state = PARKED;
    pthread_cond_signal(&decoder.wake);
    while (decoder.busy)
        pthread_cond_wait(&decoder.done, &decoder.lock);
    pthread_mutex_unlock(&decoder.lock);

    int result = 0;
    for (size_t i = 0; i < decoder.samples.count; i++) {
        ls_sample *slot = ls_samples_append(into);
        if (slot == NULL) {
            *lost = decoder.samples.count - i;
            result = -1;
            break;
        }
        *slot = decoder.samples.items[i];
    }
    free(decoder.samples.items);
    memset(&decoder.samples, 0, sizeof decoder.samples);
    return result;
}

void ls_pmdecoder_release_after(uint64_t keep_ns)
{
    pthread_mutex_lock(&decoder.lock);
    if (decoder.exists && !decoder.ended) {
        decoder.state = IDLE;
        after(keep_ns, &decoder.release_at);
        pthread_cond_signal(&decoder.wake);
        pthread_mutex_unlock(&decoder.lock);
        return;
    }
    pthread_mutex_unlock(&decoder.lock);
    ls_pm_release();
}

void ls_pmdecoder_shutdown(void)
{
    pthread_mutex_lock(&decoder.lock);
    int running = decoder.exists && !decoder.ended;
    if (running) {
        decoder.state = ENDING;
        pthread_cond_signal(&decoder.wake);
    }
    pthread_mutex_unlock(&decoder.lock);
    if (decoder.exists) {
        pthread_join(decoder.thread, NULL);
        decoder.exists = decoder.ended = 0;
    }
    free(decoder.samples.items);
    memset(&decoder.samples, 0, sizeof decoder.samples);
    ls_pm_release();
}

uint64_t ls_pmdecoder_rounds(void)
{
    pthread_mutex_lock(&decoder.lock);
    uint64_t rounds = decoder.rounds;
    pthread_mutex_unlock(&decoder.lock);
    return rounds;
}

const char *ls_pmdecoder_state(void)
{
    static const char *const names[] = {"decoding", "parked", "idle", "ending"};
    pthread_mutex_lock(&decoder.lock);
    const char *name = !decoder.exists ? "none" : decoder.ended ? "ended" : names[decoder.state];
    pthread_mutex_unlock(&decoder.lock);
    return name;
}
