/* ls_handover: what a profile's start takes over from the profile before
 * it, decided once per start (issue 43).
 *
 * Back to back, the last profile's finish may still run on the worker when
 * the next start comes.  The PM sampler needs nothing from it (it runs for
 * the life of the process: ls_sampler).  Activity tracing continues the
 * kinds that finish left on, when both profiles trace through loopscope's
 * own callbacks; otherwise the start waits for that finish to turn them
 * off (before it takes the GIL back, ls_handover_should_wait), unless it
 * traces nothing and keeps the clock: a counters-only start needs nothing
 * of the kinds (alternating with traced profiles, it waited 1.2-1.5 ms for
 * the flush, H200 2026-11-29).  CUPTI's timestamp
 * source is registered again only when another tool changed it since (a
 * registration while PM sampling runs makes the samples in flight partial). */
#ifndef LS_HANDOVER_H
#define LS_HANDOVER_H

#include "ls_capture.h"

typedef struct {
    int finishes;           /* finishes in flight when the start looked */
    int continue_tracing;   /* try to continue the kinds the last finish left on */
    int keep_timestamps;    /* the registered timestamp source is loopscope's still */
} ls_handover;

/* Before the start, without the GIL: 1 when it must first wait for the
 * last finish to turn its kinds off: it traces and cannot continue them,
 * or it traces nothing but must register the timestamp source again
 * (ls_handover_needs_kinds_off).  `own_timestamps`: the option; `source`:
 * the timestamp source the last profile left (LS_TIMESTAMPS_*). */
int ls_handover_should_wait(int trace, int callbacks, int own_timestamps, int source);

/* 1 when a start that does not continue the kinds must wait for them off:
 * it traces (it sets them up anew), or it registers CUPTI's timestamp
 * source (which would move the clock under the finish's records).  A
 * counters-only start whose clock is kept goes on beside the finish. */
int ls_handover_needs_kinds_off(int trace, int own_timestamps, int keep_timestamps);

/* At the start (the one read of what is in flight): the plan for a
 * profile that traces (`trace`) with loopscope's callbacks (`callbacks`).
 * `source`: the timestamp source the last profile left (LS_TIMESTAMPS_*). */
ls_handover ls_handover_plan(int trace, int callbacks, int source);

#endif
