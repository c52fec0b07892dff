/* ls_syncs: which of the recorded blocking calls (ls_calls) made the host
 * wait for the GPU, grouped into syncs as a user sees them, in pure C.
 *
 * A call waited when its class always waits (stream, event, device sync,
 * free), when it is a synchronous copy with a host side, or when it is an
 * async copy whose activity record (same correlation id) says the host
 * memory is pageable.  Calls form one sync when they come from the same
 * thread and the same Python stack with no launch between them: `.item()`
 * is a copy plus a stream sync, one sync; `print(t)` of a CUDA tensor is
 * a dozen syncs with kernels between them.  Each sync gets the time the
 * host was blocked (the union of its calls); its step is left to the model
 * (ls_attribution, by the thread that waited). */
#ifndef LS_SYNCS_H
#define LS_SYNCS_H

#include "ls_records.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t start_ns, end_ns; /* first enter, last exit */
    uint64_t blocked_ns;       /* length of the union of its calls */
    uint64_t thread_id;
    uint32_t first_call;       /* index in records->calls; its stack is the sync's */
    uint32_t call_count;
    int32_t step;              /* set by ls_model (-1 here) */
    uint8_t wait_class;        /* ls_wait_class of the first call */
} ls_sync;

typedef struct {
    ls_sync *items;
    size_t count;
    int32_t *sync_of_call;   /* per call: index of its sync, -1 if it did not wait */
    uint64_t unknown_copies; /* async copies with no activity record: not counted */
} ls_syncs;

/* Builds the syncs of `r`.  0, or -1 when memory ran out (out is then
 * empty).  Always free `out` with ls_syncs_free. */
int ls_syncs_build(const ls_records *r, ls_syncs *out);

void ls_syncs_free(ls_syncs *w);

#endif
