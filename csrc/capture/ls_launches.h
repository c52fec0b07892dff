/* ls_launches: launch calls seen through CUPTI callbacks (API enter of the
 * launch, copy and memset calls of ls_cbids).
 *
 * Recording a few callback ids costs far less than runtime/driver activity
 * records for every API call (torch makes ~17 of them per kernel).  Storage
 * is an ls_slots store: lock-free, no allocation in the callback. */
#ifndef LS_LAUNCHES_H
#define LS_LAUNCHES_H

#include "ls_records.h"

#include <stddef.h>
#include <stdint.h>

/* Empties the store; `keep` 0 only counts launches (ls_launches_seen_by)
 * without storing them.  0, or -1 when out of memory.  Call with callbacks
 * disabled. */
int ls_launches_reset(int keep);

/* From a CUPTI callback (any thread): records one launch call.  Never
 * allocates, never blocks. */
void ls_launches_record(uint32_t domain, uint32_t cbid, uint32_t correlation_id,
                        uint64_t start_ns);

/* The latest correlation id of a launch call seen by any profile's
 * callbacks in this process (0: none; latest by ls_launch_id_later).
 * Correlation ids grow in the order
 * the calls were made, so a later record whose id is above the value read
 * at a moment was launched after that moment (or outside every profile:
 * no callbacks see the calls between profiles).  Lock-free. */
uint32_t ls_launches_latest_id(void);

/* 1 when correlation id a came after b.  The ids are 32 bits and wrap (a
 * long job's launches pass 2^32 in hours to days): serial-number order,
 * right while the two lie within 2^31 of each other.  A plain `>` would
 * leave the mark above at the top after the wrap, and every later launch
 * would look like an earlier profile's. */
int ls_launch_id_later(uint32_t a, uint32_t b);

/* Moves *mark (a launch id, 0: none yet) to `id` when `id` came later (0:
 * no id, left as it is).  Not atomic: for marks one thread owns. */
void ls_launch_id_raise(uint32_t *mark, uint32_t id);

/* Launch calls the thread `thread_id` made since the reset (stored or not):
 * lets a blocking call tell whether its thread launched anything between it
 * and the previous one.  Lock-free; threads beyond the table's room share
 * one overflow count (they can then split a sync, never merge two). */
uint64_t ls_launches_seen_by(uint64_t thread_id);

/* From a Python thread: grows the store ahead of need.  0, or -1 when out
 * of memory (later launches are then counted as dropped). */
int ls_launches_reserve(void);

/* With callbacks disabled: appends every recorded launch to `out` as an
 * API record (end_ns = start_ns) and returns how many were dropped. */
uint64_t ls_launches_move_to(ls_api_array *out);

#endif
