/* ls_analysis: launch-gap analysis over ls_records, in pure C.
 *
 * Per device, the busy intervals of every kernel, memcpy and memset on all
 * streams are merged; the idle intervals between them are the gaps.  The
 * same is done per stream.  Each gap gets a cause (host: the next op's
 * launch call began after the device went idle; sync: a host sync
 * overlapped the gap: a SYNCHRONIZATION record or a sync of ls_syncs; other), a class (normal / warning / severe) and the
 * step whose host range contains the launch call of the op that ends it.
 * Ranges (steps included) get the ops whose launch calls they contain, and
 * so do groups of ranges (one name over many steps), each op counted once.
 *
 * PM samples (when the records hold any) are averaged over two windows of
 * the whole profile and of every range, on the sampled device only:
 *   span: the GPU span of its ops [first start, last end]; a range with no op
 *         there (counters-only mode) uses its host span [start, end], the
 *         whole profile its own span [start_ns, stop_ns];
 *   busy: the union of the busy intervals of those ops (empty without ops). */
#ifndef LS_ANALYSIS_H
#define LS_ANALYSIS_H

#include "ls_records.h"
#include "ls_samples.h"
#include "ls_syncs.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t normal_below_ns; /* gaps shorter than this are NORMAL */
    uint64_t severe_above_ns; /* gaps longer than this are SEVERE, the rest WARNING */
} ls_thresholds;

enum { LS_CAUSE_HOST = 0, LS_CAUSE_SYNC = 1, LS_CAUSE_OTHER = 2, LS_CAUSE_COUNT = 3 };

#define LS_HIST_BINS 12
/* Lower edges of the gap histogram bins, in ns; the last bin is open-ended. */
extern const uint64_t ls_hist_edges_ns[LS_HIST_BINS];

typedef struct {
    uint64_t count, normal, warning, severe;
    uint64_t by_cause[LS_CAUSE_COUNT];
    uint64_t by_cause_ns[LS_CAUSE_COUNT]; /* idle time per cause */
    uint64_t total_ns, max_ns, p50_ns, p99_ns; /* nearest-rank percentiles */
    uint64_t histogram[LS_HIST_BINS];
} ls_gap_stats;

typedef struct {
    uint64_t start_ns, end_ns;
    uint32_t prev_op, next_op; /* indices into records->ops */
    uint32_t device_id;
    int32_t step;              /* step index of the op that ends the gap, -1 if none */
    uint8_t cause;
} ls_gap;

/* A time line: a device (stream_id == UINT32_MAX), one stream, or a range. */
typedef struct {
    uint32_t device_id, stream_id;
    uint64_t kernels, memcpys, memsets;
    uint64_t busy_ns;            /* length of the union of busy intervals */
    uint64_t first_ns, last_ns;  /* first op start, last op end; 0 when no op */
    ls_gap_stats gaps;
} ls_timeline;

typedef struct {
    ls_timeline total;   /* every device: busy summed, first/last overall */
    ls_timeline *devices;
    size_t device_count;
    ls_timeline *streams;
    size_t stream_count;
    ls_timeline *ranges; /* parallel to records->ranges */
    size_t range_count;
    ls_timeline *groups; /* one per range group (ls_analyze), else NULL */
    uint64_t *group_span_ns; /* per group: its ranges' first-to-last op spans, summed */
    size_t group_count;
    ls_gap *gaps;        /* device-wide gaps, by device then time */
    size_t gap_count;
    uint64_t ops_without_launch; /* no API record matched the op's correlation id */
    uint64_t ignored_records;    /* API/sync records after the profile stopped */
    ls_syncs syncs;              /* the host syncs found among the blocking calls */
    int has_samples;             /* the records hold PM samples */
    ls_metric_avg metrics_span, metrics_busy;  /* the whole profile */
    ls_metric_avg *range_span, *range_busy;    /* parallel to records->ranges, or NULL */
} ls_analysis;

/* Analyses `records`.  Returns 0, or -1 when memory ran out (out is then
 * empty).  Always free `out` with ls_analysis_free.  It also groups ranges:
 * group_of[i] is -1 or the group
 * (below group_count) of records->ranges.items[i].  out->groups[g] then
 * holds the ops and the gaps projected onto any range of group g, each
 * counted once, so its busy time is the union over the group's ranges
 * (nested or repeated ranges of one group do not count twice).  group_of
 * may be NULL (no groups).  Returns 0, or -1 when memory ran out. */
int ls_analyze(const ls_records *records, ls_thresholds thresholds, const int32_t *group_of,
               size_t group_count, ls_analysis *out);

void ls_analysis_free(ls_analysis *a);

#endif
