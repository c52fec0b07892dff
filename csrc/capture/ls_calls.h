/* ls_calls: API calls that can make the host wait for the GPU (the wait
 * classes of ls_cbids), as the switchboard saw them: enter and exit time,
 * thread, and the Python stack of the caller.  Whether a call really waited
 * (an async copy only does with pageable host memory) and which calls form
 * one sync is decided later, by ls_syncs.  An ls_slots store: lock-free, no
 * allocation in the callback. */
#ifndef LS_CALLS_H
#define LS_CALLS_H

#include "ls_records.h"

#include <stddef.h>
#include <stdint.h>

/* Empties the store.  0, or -1 when out of memory.  Call with callbacks
 * disabled. */
int ls_calls_reset(void);

/* API enter, from a callback on any thread: stamps a new call and captures
 * the caller's Python stack.  Returns a token for ls_calls_exit (0 when the
 * store was full: the call is counted as dropped); a token is valid until
 * the next ls_calls_reset (or move_to), never for a later call. */
uint64_t ls_calls_enter(uint32_t domain, uint32_t cbid, uint8_t role, uint32_t correlation_id,
                        uint64_t enter_ns, uint64_t launches_before);

/* API exit of the call with this token (0 is ignored).  Returns the call,
 * or NULL. */
const ls_call *ls_calls_exit(uint64_t token, uint64_t exit_ns);

/* The call of a token, NULL for 0, a token past the store or one issued
 * before the last reset. */
const ls_call *ls_calls_get(uint64_t token);

/* From a Python thread: grows the store ahead of need (0, or -1 when out of
 * memory). */
int ls_calls_reserve(void);

/* With callbacks disabled: appends every call to `out` (a call that has not
 * returned gets exit_ns = stop_ns) and returns how many were dropped. */
uint64_t ls_calls_move_to(ls_call_array *out, uint64_t stop_ns);

#endif
