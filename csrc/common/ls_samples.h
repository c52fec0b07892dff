/* ls_samples: PM samples onto time windows, in pure C.
 *
 * A window is a set of disjoint intervals: a step's or a range's whole span
 * (one interval), or the time the GPU was busy in it (the union of its ops).
 * Each metric's average over a window is weighted by how much of each sample
 * overlaps the window:  sum(v_i * overlap_i) / sum(overlap_i), samples whose
 * value is NaN (not collected) left out.  No allocation beyond the index. */
#ifndef LS_SAMPLES_H
#define LS_SAMPLES_H

#include "ls_records.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t start_ns, end_ns;
} ls_interval;

typedef struct {
    double value[LS_METRICS];         /* NaN when nothing covered the window */
    uint64_t covered_ns[LS_METRICS];  /* sample time inside the window, per metric */
    uint64_t samples;                 /* samples that overlap the window */
    uint64_t window_ns;               /* length of the window */
} ls_metric_avg;

/* Samples sorted by start, with the running maximum of their ends, so that
 * the first sample reaching past a time is found by binary search even if
 * samples overlap. */
typedef struct {
    const ls_sample *items;
    size_t count;
    uint64_t *max_end;
} ls_sample_index;

/* Sorts samples by (start, end) in place. */
void ls_samples_sort(ls_sample *samples, size_t n);

/* What ls_samples_settle did. */
typedef struct {
    size_t partial;     /* samples dropped for spanning more than `max_span` */
    size_t ended_before; /* samples dropped for ending by window_start_ns */
    int64_t delta_ns;   /* first kept sample's start minus started_ns */
    int outside;        /* the kept samples reach beyond the tolerance */
    uint64_t latest_ns; /* the latest end of a kept sample */
} ls_settle_result;

/* Checks decoded samples (sorted, already on the activity clock by their
 * run's offset) against a profile's span, in place.  A sample longer than
 * max_span_ns is partial (seen on an H200: the first sample after a start
 * can span from long before it), and so is one that starts at 0 (seen on
 * an H100): dropped, anywhere in the run.  So is one that ends by
 * window_start_ns (the profile's start; started_ns is when its sampling
 * began, if later): a start that waited for sampling's set-up moves past the
 * wait, and decodes during the wait gave its window samples of the wait
 * (H200 2026-11-29: 41 samples 160 ms before a start that waited for the
 * sampler's restart at a wider interval; judged, they made the profile
 * "outside" and cost it every sample).  The kept samples must lie within
 * [started_ns - tolerance_ns, stopped_ns + tolerance_ns]; if they reach
 * outside, `outside` is set and they are not moved: moving them "onto the
 * profile" pasted other times' samples over it (H100 2026-11-27: 165-216 ms;
 * H200 2026-11-29: 181 ms, SM and DRAM 0 on a busy loop; both likely the
 * wait's samples above).  A first sample that starts late is not outside:
 * samples lost to an overflow make exactly that.  Returns the new count. */
size_t ls_samples_settle(ls_sample *samples, size_t n, uint64_t max_span_ns,
                         uint64_t window_start_ns, uint64_t started_ns, uint64_t stopped_ns,
                         uint64_t tolerance_ns, ls_settle_result *out);

/* 1 when a sample overlaps a profile's window: it ends after the window's
 * start and starts before its stop (window_stop_ns 0: still open). */
int ls_sample_overlaps(uint64_t start_ns, uint64_t end_ns, uint64_t window_start_ns,
                       uint64_t window_stop_ns);

/* Sampling's clock less the activity clock, judged from the first complete
 * sample after sampling started at started_ns (activity clock): 0 when its
 * start lies within tolerance_ns of started_ns (one clock), else the
 * difference, by which every later sample of that run is moved.  (An H200,
 * 2026-11-29: PM samples 1.2-1.5 s behind CUPTI's timestamps; the first
 * complete sample begins within an interval of the start.) */
int64_t ls_sample_clock_offset(uint64_t first_start_ns, uint64_t started_ns,
                               uint64_t tolerance_ns);

/* Builds the index over sorted samples.  Returns 0, -1 when memory ran out. */
int ls_sample_index_build(ls_sample_index *index, const ls_sample *sorted, size_t n);
void ls_sample_index_free(ls_sample_index *index);

/* Averages over the window `intervals[0..m)` (sorted, disjoint), each value
 * weighted by the time its sample overlaps the window.  A value that is not
 * finite counts as not collected.  The average is a running mean, which
 * stays finite for any finite values (a sum of value x ns overflows for
 * values near DBL_MAX).  Never fails. */
void ls_samples_average(const ls_sample_index *index, const ls_interval *intervals, size_t m,
                        ls_metric_avg *out);

/* The metric's output name ("sm_active_pct", ...), NULL when out of range. */
const char *ls_metric_name(int metric);

/* The metric's id for an output name, -1 if unknown. */
int ls_metric_id(const char *name);

#endif
