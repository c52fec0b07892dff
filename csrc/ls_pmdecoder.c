/* ls_pmdecoder: see ls_pmdecoder.h. */
#define _POSIX_C_SOURCE 200809L
#include "ls_pmdecoder.h"

#include "ls_pmsampling.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct {
    int running;
    int stopping;               /* under lock */
    uint64_t period_ns;
    uint64_t rounds;            /* written by the thread, read after the join */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;        /* on CLOCK_MONOTONIC */
    ls_sample_array samples;    /* written by the thread only, until joined */
} decoder = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void deadline_after(uint64_t ns, struct timespec *at)
{
    clock_gettime(CLOCK_MONOTONIC, at);
    uint64_t total = (uint64_t)at->tv_nsec + ns;
    at->tv_sec += (time_t)(total / 1000000000ull);
    at->tv_nsec = (long)(total % 1000000000ull);
}

static void *decode_loop(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&decoder.lock);
    while (!decoder.stopping) {
        struct timespec at;
        deadline_after(decoder.period_ns, &at);
        int rc = 0;
        while (!decoder.stopping && rc != ETIMEDOUT)
            rc = pthread_cond_timedwait(&decoder.wake, &decoder.lock, &at);
        if (decoder.stopping)
            break;
        decoder.rounds++;
        pthread_mutex_unlock(&decoder.lock);
        /* A failed decode is in the stats; the next period tries again. */
        ls_pm_decode(&decoder.samples);
        pthread_mutex_lock(&decoder.lock);
    }
    pthread_mutex_unlock(&decoder.lock);
    return NULL;
}

int ls_pmdecoder_start(uint64_t period_ns, char *why, size_t why_size)
{
    if (decoder.running) {
        snprintf(why, why_size, "the PM sample decoder is already running");
        return -1;
    }
    memset(&decoder.samples, 0, sizeof decoder.samples);
    decoder.period_ns = period_ns ? period_ns : 1;
    decoder.stopping = 0;
    decoder.rounds = 0;
    pthread_condattr_t attr;
    int rc = pthread_condattr_init(&attr);
    if (rc == 0)
        rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(&decoder.wake, &attr);
    pthread_condattr_destroy(&attr);
    if (rc != 0) {
        snprintf(why, why_size, "cannot set up the PM sample decoder: %s", strerror(rc));
        return -1;
    }
    /* The thread inherits this mask: every signal stays with Python's threads. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&decoder.thread, NULL, decode_loop, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        pthread_cond_destroy(&decoder.wake);
        snprintf(why, why_size, "cannot start the PM sample decoder thread: %s", strerror(rc));
        return -1;
    }
    decoder.running = 1;
    return 0;
}

uint64_t ls_pmdecoder_rounds(void)
{
    pthread_mutex_lock(&decoder.lock);
    uint64_t rounds = decoder.rounds;
    pthread_mutex_unlock(&decoder.lock);
    return rounds;
}

int ls_pmdecoder_stop(ls_sample_array *into, uint64_t *lost)
{
    *lost = 0;
    if (!decoder.running)
        return 0;
    pthread_mutex_lock(&decoder.lock);
    decoder.stopping = 1;
    pthread_cond_signal(&decoder.wake);
    pthread_mutex_unlock(&decoder.lock);
    pthread_join(decoder.thread, NULL);
    pthread_cond_destroy(&decoder.wake);
    decoder.running = 0;

    int result = 0;
    if (into->count == 0) { /* the usual case: hand the array over whole */
        free(into->items);
        *into = decoder.samples;
    } else {
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
    }
    memset(&decoder.samples, 0, sizeof decoder.samples);
    return result;
}
