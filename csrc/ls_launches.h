/* ls_launches: launch calls seen through CUPTI callbacks (API enter of the
 * launch, copy and memset calls listed in ls_launch_cbids.c).
 *
 * Recording a few callback ids costs far less than runtime/driver activity
 * records for every API call (torch makes ~17 of them per kernel).  Storage
 * is chunked and lock-free: a callback claims a slot with one atomic add and
 * never allocates; new chunks are added on a Python thread (step exits)
 * before the last one fills.  A launch with no free slot is counted. */
#ifndef LS_LAUNCHES_H
#define LS_LAUNCHES_H

#include "ls_records.h"

#include <stdint.h>

/* Empties the store and makes sure one chunk exists.  0, or -1 when out of
 * memory.  Call with callbacks disabled. */
int ls_launches_reset(void);

/* From a CUPTI callback (any thread): records one launch call.  Never
 * allocates, never blocks. */
void ls_launches_record(uint32_t domain, uint32_t cbid, uint32_t correlation_id,
                        uint64_t start_ns);

/* From a Python thread: adds a chunk when the last one is half used, so
 * callbacks keep finding room.  0, or -1 when out of memory (the store is
 * then full later and launches are counted as dropped). */
int ls_launches_reserve(void);

/* With callbacks disabled: appends every recorded launch to `out` as an
 * API record (end_ns = start_ns) and returns how many were dropped. */
uint64_t ls_launches_move_to(ls_api_array *out);

#endif
