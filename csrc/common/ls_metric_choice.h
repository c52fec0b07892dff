/* ls_metric_choice: which PM metrics to sample when not all fit one pass of
 * the counters, in pure C over an oracle (CUPTI's host API on a GPU, a
 * recorded table of a chip in tests).
 *
 * The metrics come in order of importance.  The choice keeps the most
 * important set that fits: each metric, in order, is kept if it fits one
 * pass together with those already kept.  Subsets of a single-pass set are
 * single-pass, so this is the set whose importance vector is greatest: a
 * lesser metric is dropped before a more important one (the tensor pipe is
 * kept on GH100 by dropping PCIe and occupancy, not the other way round). */
#ifndef LS_METRIC_CHOICE_H
#define LS_METRIC_CHOICE_H

#include <stddef.h>

/* The oracle: 1 when the metrics with keep[i] != 0 (of n) fit one pass, 0
 * when they need more, -1 when it cannot tell (the choice then stops). */
typedef int (*ls_metric_fits)(const unsigned char *keep, size_t n, void *ctx);

/* Fills keep[0..n) (known[i] == 0: never kept, a name the chip lacks).
 * Asks the oracle for everything known first (one question when it all
 * fits), else once per known metric.  Returns the number kept (0 when none
 * fits), or -1 when the oracle failed (keep then holds what was settled). */
int ls_metric_choose(const unsigned char *known, size_t n, ls_metric_fits fits, void *ctx,
                     unsigned char *keep);

#endif
