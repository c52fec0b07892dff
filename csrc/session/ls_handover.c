/* ls_handover: see ls_handover.h. */
#include "ls_handover.h"

#include "ls_activity.h"
#include "ls_clock.h"
#include "ls_cupti.h"
#include "ls_finish.h"

/* Tracing can go on beside the last finish only with loopscope's own
 * callbacks (launch records from them, no API activity records: the
 * worker's own calls then stay out, ls_owncalls).  (driver_api matters
 * only where the callbacks are refused: ls_session's fallback.) */
static int may_continue(int trace, int callbacks) { return trace && callbacks; }


/* 1 when CUPTI's clock reads CLOCK_REALTIME in ns (loopscope's source, or
 * CUPTI's default, which is the same clock): nothing to register again.
 * Kineto's TSC source reads ~2x off, an unregistered one 0. */
static int cupti_clock_is_ours(void)
{
    if (ls_cupti.GetTimestamp == NULL)
        return 0;
    uint64_t before = ls_clock_realtime_ns(), t = 0;
    if (ls_cupti.GetTimestamp(&t) != CUPTI_SUCCESS)
        return 0;
    uint64_t after = ls_clock_realtime_ns();
    const uint64_t slack = 1000000ull; /* 1 ms */
    return t + slack >= before && t <= after + slack;
}

int ls_handover_needs_kinds_off(int trace, int own_timestamps, int keep_timestamps)
{
    return trace || !(own_timestamps && keep_timestamps);
}

int ls_handover_should_wait(int trace, int callbacks, int own_timestamps, int source)
{
    if (ls_finish_in_flight() == 0 || !ls_activity_tracing() || may_continue(trace, callbacks))
        return 0;
    /* trace first: the clock is read only for a counters-only start */
    return trace || ls_handover_needs_kinds_off(
                        trace, own_timestamps, source == LS_TIMESTAMPS_OWN && cupti_clock_is_ours());
}

ls_handover ls_handover_plan(int trace, int callbacks, int source)
{
    ls_handover plan;
    plan.finishes = ls_finish_in_flight();
    plan.continue_tracing = may_continue(trace, callbacks) && plan.finishes > 0;
    plan.keep_timestamps = source == LS_TIMESTAMPS_OWN && cupti_clock_is_ours();
    return plan;
}
