/* ls_clock: see ls_clock.h. */
#define _POSIX_C_SOURCE 200809L
#include "ls_clock.h"

#include "ls_cupti.h"

#include <time.h>

static ls_clock_mode base_mode = LS_CLOCK_MONOTONIC;
#include <stdatomic.h>

static _Atomic uint64_t test_next;
static uint64_t test_tick;
static double test_rate = 1.0;

void ls_clock_use(ls_clock_mode mode)
{
    if (mode != LS_CLOCK_TEST)
        base_mode = mode;
}

void ls_clock_set_test(uint64_t start_ns, uint64_t tick_ns)
{
    test_next = start_ns;
    test_tick = tick_ns;
    test_rate = 1.0;
}

void ls_clock_set_test_rate(double rate) { test_rate = rate > 0.0 ? rate : 1.0; }

uint64_t ls_clock_reference_ns(void)
{
    if (test_tick != 0)
        return (uint64_t)((double)test_next / test_rate);
    return base_mode == LS_CLOCK_CUPTI ? ls_clock_monotonic_ns() : 0;
}

static uint64_t CUPTIAPI realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t ls_clock_realtime_ns(void) { return realtime_ns(); }

int ls_clock_own_cupti_timestamps(void)
{
    if (ls_cupti.ActivityRegisterTimestampCallback == NULL)
        return 1;
    return LS_CUPTI_CHECK(ActivityRegisterTimestampCallback(realtime_ns)) == CUPTI_SUCCESS ? 0 : -1;
}

ls_clock_mode ls_clock_mode_now(void) { return test_tick ? LS_CLOCK_TEST : base_mode; }

uint64_t ls_clock_now(void)
{
    if (test_tick != 0)
        return atomic_fetch_add(&test_next, test_tick);
    if (base_mode == LS_CLOCK_CUPTI) {
        uint64_t t = 0;
        /* No check macro here: this runs on every range edge, and a failure
         * (which CUPTI does not document for this call) just yields 0. */
        ls_cupti.GetTimestamp(&t);
        return t;
    }
    return ls_clock_monotonic_ns();
}

void ls_clock_pass_test(uint64_t t)
{
    if (test_tick == 0)
        return;
    uint64_t now = atomic_load(&test_next);
    while (now < t && !atomic_compare_exchange_weak(&test_next, &now, t))
        ;
}

uint64_t ls_clock_peek(void)
{
    return test_tick != 0 ? atomic_load(&test_next) : ls_clock_now();
}

uint64_t ls_clock_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
