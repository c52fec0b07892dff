/* ls_model_ctx: the working state of one ls_model_build, shared by the
 * parts of the build (ls_model_order, ls_model_timeline, ls_model_launches,
 * ls_model_counters, ls_model_projections).  Types only. */
#ifndef LS_MODEL_CTX_H
#define LS_MODEL_CTX_H

#include "ls_model.h"
#include "ls_records.h"
#include "ls_samples.h"

#include <stddef.h>
#include <stdint.h>

/* Room for n items, at least one (malloc(0) may return NULL). */
static inline size_t room_for(size_t n) { return n ? n : 1; }

typedef struct {
    const ls_records *r;
    ls_model *m;
    uint64_t *sync_start;    /* sync records and syncs, by start time ... */
    uint64_t *sync_max_end;  /* ... with the running maximum of their ends */
    size_t sync_count;
    uint64_t *scratch;       /* room for one duration per gap */
    ls_sample_index samples; /* PM samples, when there are any */
    ls_interval *intervals;  /* room for one busy interval per op */
    size_t interval_count;   /* of the last sweep, on the sampled device */
} ls_ctx;

#endif
