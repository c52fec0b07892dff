/* ls_attribution: where on the host each piece of GPU work and each sync
 * belongs, in pure C: which ranges act as steps, the innermost range and
 * the step of a host point (the start of a launch call, of a sync), and
 * the groups that ranges of one name form over the steps.
 *
 * Steps: the live steps by default (ranges with step_index >= 0, numbered
 * by it), or a chosen list of ranges (`run --steps`, a trace file's
 * ProfilerStep#N), numbered 0, 1, ... in the order of the list.
 *
 * A host point (time t, thread T) belongs to the innermost range open on
 * thread T at t (a range [start, end] holds t when start <= t <= end: both
 * ends inclusive), and to the step among that range and its ancestors.
 * When T has no step open then (autograd's backward thread launches while
 * the main thread's step runs), its step is the step open at t on another
 * thread, the one that began last; when T has no range open at all, its
 * range is the innermost open on that step's thread (with no step open
 * anywhere: on the thread whose innermost open range began last).  A point
 * whose thread opened no range (thread 0: a record that does not say) gets
 * the same fallback, so on one thread it is plain time containment.
 *
 * Groups: a plain range's key is its name without the "<step name>/"
 * prefix of its step (found through its parents or, for a range with no
 * parent, the step open on another thread when it began); the plain
 * ranges of one key form a group, numbered in order of first use.  A
 * group's parent is the group of its first range's parent (-1 under a
 * step or at the top), its depth that parent's depth + 1.
 *
 * Cost: O(R log R + P) for R ranges and P points in time order (each
 * set of points out of it adds a radix sort of its own). */
#ifndef LS_ATTRIBUTION_H
#define LS_ATTRIBUTION_H

#include "ls_records.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    size_t count;          /* steps */
    uint32_t *range_of;    /* per step: its range */
    int32_t *step_of;      /* per range: its step, -1 when it is not a step */
    int32_t *chain_step;   /* per range: the step of itself or its nearest ancestor, -1 */
} ls_steps;

/* Chooses the steps: the live ones when `chosen` is NULL, else the ranges
 * chosen[0..n) in that order.  Returns 0; -1 when memory ran out; -2 when
 * a chosen index is past the ranges or repeated.  Free `out` with
 * ls_attribution_free_steps (also after a failure). */
int ls_attribution_choose_steps(const ls_records *r, const uint32_t *chosen, size_t n,
                                ls_steps *out);
void ls_attribution_free_steps(ls_steps *s);

/* Points on the host time line, as columns: point q is at time t[q] on
 * thread thread_id[q] (as the ranges' thread_id; 0 when unknown,
 * LS_NO_THREAD for a point that no thread made, so that only the fallback
 * applies), or no point at all when t[q] is LS_NO_POINT (an op with no
 * launch record).  Its range and step go to range_out[q] and step_out[q].
 * thread_id NULL: every point is LS_NO_THREAD's.
 * A set whose range_out is NULL asks for steps only; when no set asks for
 * ranges, the sweep leaves out the ranges of threads that open no step. */
#define LS_NO_THREAD UINT64_MAX
#define LS_NO_POINT UINT64_MAX
typedef struct {
    const uint64_t *t;
    const uint64_t *thread_id;
    size_t count;
    int32_t *range_out, *step_out;
} ls_point_set;

/* The innermost range (index, or -1) and the step (or -1) of each point
 * of sets[0..nsets) (see above; -1 and -1 where there is no point), in one
 * sweep.  Returns 0, or -1 when memory ran out. */
int ls_attribution_points(const ls_records *r, const ls_steps *steps, const ls_point_set *sets,
                          size_t nsets);

typedef struct {
    uint32_t first_range;  /* its first range; the key is that range's name from key_offset */
    uint32_t key_offset;
    int32_t parent;        /* group, -1 at the top or directly under a step */
    uint32_t depth;
    uint32_t count;        /* ranges (indexed by uint32: fewer than 2**32) */
    uint8_t step_prefixed; /* some range of the group had its step's name as prefix */
    uint64_t host_ns;      /* their host time, summed */
} ls_group;                /* 32 B: one a name at a million names */

typedef struct {
    ls_group *items;
    size_t count;
    int32_t *group_of;     /* per range: its group, -1 for a step */
} ls_groups;

/* The groups of the plain (non-step) ranges; names come from ls_names.
 * Returns 0, or -1 when memory ran out.  Free `out` with
 * ls_attribution_free_groups (also after a failure). */
int ls_attribution_groups(const ls_records *r, const ls_steps *steps, ls_groups *out);
void ls_attribution_free_groups(ls_groups *g);

#endif
