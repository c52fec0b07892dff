/* ls_model_launches: launches and syncs.  Each op's launch call (matched
 * by correlation id), its step, range and group (ls_attribution), its fill
 * and whether it is a collective; the host waits indexed by start for the
 * gaps' causes, and each sync-caused gap's idle time given to its sync.
 * Pure C; each returns 0, or -1 when memory ran out (ls_model_attribute
 * also -2, as ls_model_build says). */
#ifndef LS_MODEL_LAUNCHES_H
#define LS_MODEL_LAUNCHES_H

#include "ls_model_ctx.h"

#include <stddef.h>
#include <stdint.h>

/* op_launch_ns and the launching thread of every op: the API record with
 * its correlation id (better_launch).  Live, the ops and the records come
 * in correlation order: one walk over both, no copy (at 10M launches a
 * sorted key array was 320 MB of fresh pages); otherwise their orders are
 * sorted first.  0, or -1 when memory ran out. */
int ls_model_match_launches(ls_ctx *c, uint64_t *launch_thread);

/* Ranges, steps and groups of every op and every sync (ls_attribution).
 * The ops' points are their launches, read in place (op_launch_ns and
 * launch_thread as columns, answers straight into op_range and op_step:
 * gathered, they were 36 B an op of fresh pages); the syncs', calls' and
 * graph launches' points are gathered apart, a second set of the sweep. */
int ls_model_attribute(ls_ctx *c, const ls_model_options *o, const uint64_t *launch_thread);

/* Each op's fill (from its device's facts) and whether it is a collective
 * kernel (judged once per name), in one pass over the records: the fill
 * of a launch shape the op before had too is not worked out again. */
int ls_model_fill_and_comm(ls_ctx *c);

/* Host waits, for gap causes: the sync records and the syncs, by start. */
int ls_model_index_syncs(ls_ctx *c);

/* sync_gap_ns: each sync-caused gap's idle time goes to the sync that
 * overlapped it longest (see ls_model.h). */
int ls_model_sync_gaps(ls_ctx *c);

#endif
