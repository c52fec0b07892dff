/* ls_clock: the one clock for host ranges.  While CUPTI is active it is
 * CUPTI's own timestamp, so host ranges and GPU records share a time line;
 * without CUPTI it is CLOCK_MONOTONIC; in tests it is a scripted clock that
 * returns start, start + tick, start + 2 * tick, ... so answers are exact. */
#ifndef LS_CLOCK_H
#define LS_CLOCK_H

#include <stdint.h>

typedef enum { LS_CLOCK_MONOTONIC = 0, LS_CLOCK_CUPTI = 1, LS_CLOCK_TEST = 2 } ls_clock_mode;

/* Selects the source; LS_CLOCK_CUPTI requires ls_cupti_load() to have succeeded.
 * A test clock, once set, wins over the others until ls_clock_set_test(0, 0). */
void ls_clock_use(ls_clock_mode mode);

/* tick_ns == 0 turns the test clock off. */
void ls_clock_set_test(uint64_t start_ns, uint64_t tick_ns);

ls_clock_mode ls_clock_mode_now(void);

/* Current time in ns on the selected clock; never fails (0 if CUPTI errs). */
uint64_t ls_clock_now(void);

/* ls_clock_now, but a test clock is read without advancing it (for the
 * worker thread's test source, beside the scripted reads). */
uint64_t ls_clock_peek(void);

/* Under a test clock: its time moves on to t at least (the worker's test
 * source waiting for a time to pass, as a real finish waits for the GPU's
 * clock).  Otherwise nothing. */
void ls_clock_pass_test(uint64_t t);

/* CLOCK_MONOTONIC in ns, whatever the selected clock: for host costs and
 * deadlines, which must not follow the test clock or CUPTI. */
uint64_t ls_clock_monotonic_ns(void);

/* Makes CUPTI take its timestamps (activity records, cuptiGetTimestamp) from
 * CLOCK_REALTIME in ns, CUPTI's own default on Linux.  Another client can
 * have left its own source registered (torch.profiler's Kineto registers the
 * CPU's TSC, whose ticks are not ns: every time after it ran stretched
 * ~2x), so each profile registers this one before it enables any activity
 * kind.  Returns 0, 1 when this CUPTI has no such call (nothing changed),
 * -1 when CUPTI refused (the message in ls_cupti_error()).  Requires
 * ls_cupti_load(). */
int ls_clock_own_cupti_timestamps(void);

/* CLOCK_REALTIME in ns: the source ls_clock_own_cupti_timestamps registers. */
uint64_t ls_clock_realtime_ns(void);

/* The host clock that the selected clock's rate is checked against:
 * CLOCK_MONOTONIC under CUPTI; under the test clock its last value divided by
 * the scripted rate (ls_clock_set_test_rate), without advancing it.  0 when
 * the selected clock is CLOCK_MONOTONIC itself (nothing to check). */
uint64_t ls_clock_reference_ns(void);

/* Tests: the test clock runs `rate` times as fast as its reference (1.0 by
 * default; ls_clock_set_test resets it). */
void ls_clock_set_test_rate(double rate);

#endif
