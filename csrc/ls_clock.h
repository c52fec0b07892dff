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

/* CLOCK_MONOTONIC in ns, whatever the selected clock: for host costs and
 * deadlines, which must not follow the test clock or CUPTI. */
uint64_t ls_clock_monotonic_ns(void);

#endif
