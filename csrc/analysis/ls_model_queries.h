/* ls_model_queries: a built model's busy intervals and gaps within a
 * window, per bin, and the longest gaps.  None can fail. */
#ifndef LS_MODEL_QUERIES_H
#define LS_MODEL_QUERIES_H

#include "ls_model.h"

#include <stddef.h>
#include <stdint.h>

/* Device index `device`'s merged busy intervals: as many as its gaps plus
 * one (none without ops); interval k runs from the end of its gap k - 1
 * (its first op's start for k = 0) to the start of its gap k (the latest
 * end of its ops for the last).  O(devices). */
size_t ls_model_busy_count(const ls_model *m, size_t device);
ls_busy_span ls_model_busy_span(const ls_model *m, size_t device, size_t k);

/* The merged busy intervals (ls_model_busy_span *first .. *last) and the gaps
 * (gaps[*first .. *last)) of device index `device` that meet the window
 * [start_ns, end_ns]: an interval [a, b] meets it when b >= start_ns and
 * a <= end_ns, so a gap that ends where the window starts is in it.
 * O(log n); device < m->device_count. */
void ls_model_busy_within(const ls_model *m, size_t device, uint64_t start_ns,
                          uint64_t end_ns, size_t *first, size_t *last);
void ls_model_gaps_within(const ls_model *m, size_t device, uint64_t start_ns, uint64_t end_ns,
                          size_t *first, size_t *last);

/* Busy time per bin: bins equal slices of [start_ns, end_ns) get the busy
 * time of device index `device` (or, with device < 0, of every device,
 * summed) that falls inside them.  out has room for `bins`.  O(bins +
 * log n + the intervals in the window). */
void ls_model_busy_bins(const ls_model *m, long device, uint64_t start_ns, uint64_t end_ns,
                        size_t bins, uint64_t *out);

/* Idle time per bin, as ls_model_busy_bins, of the gaps of class
 * min_class or above (of every device). */
void ls_model_gap_bins(const ls_model *m, int min_class, uint64_t start_ns, uint64_t end_ns,
                       size_t bins, uint64_t *out);

/* The indices of the `n` longest gaps (ties: the earlier first) into
 * out[0..return); out has room for n. */
size_t ls_model_worst_gaps(const ls_model *m, size_t n, uint32_t *out);

#endif
