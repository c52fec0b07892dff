/* ls_model: the analysed model of one capture, in pure C.  Every view (the
 * summary, report, HTML, trace export, budgets, recordings) reads it; none
 * derives gaps, steps or attribution again.
 *
 * Gaps: per device, the busy intervals of every kernel, memcpy, memset and
 * graph replay on all streams are merged; the idle intervals between them
 * are the gaps.
 * The same is done per stream (statistics only).  Each gap has a class
 * (normal below normal_below_ns, severe above severe_above_ns, else
 * warning), a cause (sync: a host sync or sync record overlapped it; host:
 * the launch call of the op that ends it began after the device went idle;
 * other), and the step, range and stream of the op that ends it.  An idle
 * interval of at most records->merge_idle_upto_ns (a trace's timestamps
 * cannot tell it from none) is no gap: its busy intervals merge, and it is
 * counted as merged in the line's gap statistics.  Nor is the idle between
 * two ops of one launch call (one known correlation id: the nodes of a CUDA
 * graph's replay traced per kernel), and it is not busy either: mostly the
 * tracer's own timestamps, which a replay traced whole (LS_OP_GRAPH) does
 * not pay.  It is summed apart (replay_idle_ns) and left out of the time
 * line's busy share, so per-kernel and graph-level profiles of one loop
 * read one busy time, one set of gaps and one verdict (issue 39).
 *
 * Attribution (ls_attribution): each op belongs to the innermost range
 * open on the thread that made its launch call, and to that range's step
 * (or, with no step open on that thread, the step open on another thread);
 * each sync to the step of the thread that waited.  An op counts for its
 * range and every ancestor of it, for the group of each of them (once per
 * group), and for its step.  Ops with no matching launch call belong to
 * nothing.
 *
 * Kernel fill (ls_kernels): each line also sums the time of its kernels
 * (collectives left out: they wait for other ranks) whose fill is known
 * and that time weighted by the fill, so the share of the GPU a step's or
 * the loop's kernels could fill is filled / shaped.
 *
 * Graph replays (LS_OP_GRAPH, graph-level mode): GPU work like a kernel for
 * busy time, gaps, launches, steps, ranges and attribution, compute (never
 * a collective); not a kernel: counted apart (graphs, graph_ns), out of the
 * kernel counts, the kernel table and shaped/filled, but in kernel_ns, so
 * the share of kernel time whose fill is known shows the replays unknown.
 *
 * Busy time splits into compute and comm (collective kernels, see
 * ls_collectives): the union of the intervals of each class, so where
 * both ran at once the time counts in both.
 *
 * PM samples (when the records hold any) are averaged on the sampled
 * device over two windows of the whole profile, of each step, range and
 * group instance: span (the first to the last op of the window's ops
 * there, else its host span; the whole profile: [start_ns, stop_ns]) and
 * busy (the union of those ops; with no op there, estimated from the span
 * as value * 100 / GR active, percentages capped at 100).  A group's
 * figures are its ranges' averages, each weighted by the time its samples
 * covered.
 *
 * Cost: O(n log n) in the number of records.
 *
 * Built by ls_model_build (ls_model_build.h), read through the lines
 * below and the queries of ls_model_queries.h. */
#ifndef LS_MODEL_H
#define LS_MODEL_H

#include "ls_attribution.h"
#include "ls_kernels.h"
#include "ls_readiness.h"
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
enum { LS_CLASS_NORMAL = 0, LS_CLASS_WARNING = 1, LS_CLASS_SEVERE = 2, LS_CLASS_COUNT = 3 };

#define LS_HIST_BINS 12
/* Lower edges of the gap histogram bins, in ns; the last bin is open-ended. */
extern const uint64_t ls_model_hist_edges_ns[LS_HIST_BINS];

#define LS_MODEL_NO_TIME UINT64_MAX
#define LS_MODEL_NO_ID UINT32_MAX

typedef struct {
    uint64_t count, by_class[LS_CLASS_COUNT];
    uint64_t by_cause[LS_CAUSE_COUNT];
    uint64_t by_cause_ns[LS_CAUSE_COUNT]; /* idle time per cause; of a sync-caused gap only
                                             what the host still waited in its sync counts
                                             as sync, the rest (its own work before the
                                             next launch) as host (ls_model_sync_gaps) */
    uint64_t sync_overlap_ns;             /* the sync-caused gaps' idle time, whole */
    uint64_t total_ns, max_ns, p50_ns, p99_ns; /* nearest-rank percentiles */
    uint64_t histogram[LS_HIST_BINS];
    uint64_t merged; /* idle intervals of at most records->merge_idle_upto_ns, not
                        counted above: below the source's resolution */
} ls_gap_stats;

typedef struct {
    uint64_t start_ns, end_ns;
    uint32_t prev_op, next_op; /* indices into records->ops */
    uint32_t device_id;
    uint32_t stream_id;        /* of next_op */
    int32_t step;              /* of next_op, -1 if none */
    uint8_t cause, gap_class;
    uint8_t reserved[2];
} ls_gap;

/* The ops of a device, a stream, a step, a range or a group. */
typedef struct {
    uint32_t device_id;            /* LS_MODEL_NO_ID when it spans devices */
    uint32_t stream_id;            /* LS_MODEL_NO_ID unless a stream's */
    uint64_t kernels, memcpys, memsets;
    uint64_t graphs;               /* whole CUDA-graph replays (LS_OP_GRAPH): no kernel */
    uint64_t graph_ns;             /* their durations, summed */
    uint64_t busy_ns;              /* the union of the ops' intervals (summed over devices) */
    uint64_t compute_ns, comm_ns;  /* the union of each class's intervals */
    uint64_t first_ns, last_ns;    /* first op start, last op end; 0 when no op */
    uint64_t replay_idle_ns;       /* idle between the nodes of one graph replay traced per
                                      kernel: neither busy nor a gap (summed over devices) */
    uint64_t kernel_ns;            /* its kernels' durations, collectives left out, and its
                                      graph replays' (kernels of no known shape), summed
                                      (overlaps count twice) */
    uint64_t shaped_ns;            /* time of those kernels whose fill is known (ls_kernels) */
    uint64_t filled_ns;            /* their durations, each times its fill (rounded) */
} ls_line;

typedef struct {
    ls_line line;
    ls_gap_stats gaps;
} ls_timeline;

enum { LS_BUSY_FROM_NONE = 0, LS_BUSY_FROM_OPS = 1, LS_BUSY_FROM_GR = 2 };

/* The PM figures of one window pair (see the header comment). */
typedef struct {
    ls_metric_avg span, busy;
    uint8_t busy_from; /* LS_BUSY_FROM_*: busy measured, estimated, or neither */
} ls_metrics;

/* A group's figures: per window (0 span, 1 busy) and metric, its ranges'
 * averages weighted by the time their samples covered (NaN when none). */
typedef struct {
    double value[2][LS_METRICS];
    uint64_t samples; /* span samples of its ranges, summed */
} ls_group_metrics;

typedef struct {
    uint64_t start_ns, end_ns;
} ls_busy_span;

typedef struct {
    ls_thresholds thresholds;
    const uint32_t *step_ranges; /* ranges acting as steps, in step order; NULL: the live steps */
    size_t step_range_count;
} ls_model_options;

typedef struct {
    ls_thresholds thresholds;
    /* per op, parallel to records->ops */
    uint64_t *op_launch_ns; /* start of its launch call, LS_MODEL_NO_TIME if none matched */
    int32_t *op_step;       /* -1 when none */
    int32_t *op_range;      /* innermost range, -1 when none */
    int32_t *op_group;      /* the group of that range, -1 when none (or a step) */
    uint8_t *op_comm;       /* 1 for a collective kernel */
    /* gaps, by device then time */
    ls_gap *gaps;
    size_t gap_count;
    /* No busy intervals are kept: a device's are the stretches between
     * its gaps (ls_model_busy_span), 16 B an op not written. */
    ls_timeline total;      /* every device: busy summed, first/last overall */
    ls_timeline *devices;
    size_t device_count;
    ls_timeline *streams;
    size_t stream_count;
    ls_steps steps;         /* which ranges are the steps */
    ls_timeline *step_lines; /* per step number (unused live numbers stay empty); NULL
                                without ops: ls_model_step_line reads them as empty */
    uint64_t *step_syncs;   /* per step: syncs that began in it */
    uint64_t *step_sync_blocked_ns; /* per step: the host's blocked time in them (their
                               ls_sync.blocked_ns summed, as the sync sites' blocked_ms) */
    ls_line *range_lines;   /* per range holding ops (ls_model_range_line) */
    uint32_t *range_line_at; /* per range: its line, LS_MODEL_NO_ID: none; NULL without ops */
    ls_groups groups;
    ls_timeline *group_lines; /* per group: its ops and gaps, each once; NULL without ops */
    uint64_t *group_span_ns;  /* per group: its ranges' first-to-last op spans, summed;
                                 NULL without ops */
    ls_syncs syncs;         /* the host syncs, each with its step */
    uint64_t *sync_gap_ns;  /* per sync: idle time of the gaps it overlapped most (of all
                               the syncs overlapping a sync-caused gap, the one overlapping
                               it longest, the earlier on a tie, gets that gap) */
    uint64_t *gap_waited_ns; /* per gap: of a sync-caused one, the idle charged to its sync
                                (no more than the host was blocked in it, less what its
                                earlier gaps took); NULL until ls_model_sync_gaps or
                                without a sync-caused gap */
    int32_t *call_step;     /* per call (records->calls): its step, -1 when none */
    int32_t *api_step;      /* per API record: its step, set for graph launches only (read
                               by the readiness only: NULL once the model is built) */
    double *op_fill;        /* per op: ls_kernels_fill, -1 unknown */
    ls_readiness readiness; /* per step: graph replays, memory calls, pageable copies,
                               signature (ls_readiness) */
    ls_kernel_table kernels; /* the kernels by name, longest total first */
    uint64_t ops_without_launch; /* no API record matched the op's correlation id */
    uint64_t ignored_records;    /* API records and sync records after the profile stopped */
    int has_samples;
    ls_metrics metrics;     /* the whole profile */
    ls_metrics *step_metrics, *range_metrics; /* NULL without samples */
    ls_group_metrics *group_metrics;          /* NULL without samples */
} ls_model;

void ls_model_free(ls_model *m);

/* Step s's line and gaps, range i's line, group g's line and gaps, group
 * g's summed spans: an empty line (no device, no stream, zeros) when the
 * model has no ops and so keeps none (a million host-only steps: no 313 MiB
 * of empty step lines).  Never NULL. */
const ls_timeline *ls_model_step_line(const ls_model *m, size_t s);
const ls_line *ls_model_range_line(const ls_model *m, size_t i);
const ls_timeline *ls_model_group_line(const ls_model *m, size_t g);
uint64_t ls_model_group_span_ns(const ls_model *m, size_t g);

#endif
