/* ls_buffers: the bounded pool of CUPTI activity buffers.
 *
 * CUPTI asks for a buffer on its own thread and hands it back full on its own
 * thread.  Both callbacks only move pointers between lists under one mutex;
 * the records are parsed later, on loopscope's worker thread, by
 * ls_buffers_drain().
 * Buffers are fixed-size and 8-byte aligned.  The pool grows only inside
 * ls_buffers_request and only up to its cap; when the cap is reached CUPTI is
 * given no buffer, drops records, and counts them (reported, never silent). */
#ifndef LS_BUFFERS_H
#define LS_BUFFERS_H

#include <stddef.h>
#include <stdint.h>

/* Sets the pool's shape and allocates `preallocate` buffers up front.
 * With `zeroed`, every buffer handed to CUPTI is all zeros (new ones come
 * zeroed from calloc, drained ones are cleared whole by the drainer), so
 * CUPTI can be told not to clear each new buffer itself on the launching
 * thread (CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER).
 * Returns 0, or -1 when memory ran out.  Call with no session running. */
int ls_buffers_configure(size_t buffer_bytes, size_t preallocate, size_t max_buffers, int zeroed);

/* CUPTI's buffer-request callback (any thread). */
void ls_buffers_request(uint8_t **buffer, size_t *size, size_t *max_records);

/* CUPTI's buffer-completed callback (any thread). */
void ls_buffers_complete(uint8_t *buffer, size_t valid_size);

/* Number of completed buffers waiting to be drained (cheap, lock-free read). */
size_t ls_buffers_ready(void);

/* Calls visit(buffer, valid_size, ctx) for each completed buffer, oldest
 * first, then returns the buffers to the free list (cleared first when the
 * pool is zeroed).  One drainer at a time (loopscope's worker thread).
 * Never call it while holding a lock that CUPTI's callbacks might wait for. */
typedef void (*ls_buffer_visitor)(uint8_t *buffer, size_t valid_size, void *ctx);
void ls_buffers_drain(ls_buffer_visitor visit, void *ctx);

/* Requests refused because the pool was at its cap, since configure. */
uint64_t ls_buffers_refused(void);

/* Completed buffers that were not the pool's (another tool's, handed to
 * CUPTI while its callbacks were registered), left alone, since start. */
uint64_t ls_buffers_foreign(void);

/* With `on`, the pool allocates no new buffer (CUPTI then drops records):
 * between profiles in graph-level mode, where records still come but
 * belong to no window (ls_graphs). */
void ls_buffers_hold(int on);

/* Returns every completed buffer to the free list unread. */
void ls_buffers_discard_ready(void);

/* Bytes currently allocated by the pool. */
size_t ls_buffers_allocated_bytes(void);

#endif
