/* ls_model_timeline: the time line.  Ops swept into lines (busy time,
 * compute and comm, kernel fill), the gaps between them with their class
 * and cause, and the gaps' statistics (nearest-rank percentiles, the
 * histogram).  Pure C; none of these can fail: they write into room the
 * build allocated (ls_model_ctx). */
#ifndef LS_MODEL_TIMELINE_H
#define LS_MODEL_TIMELINE_H

#include "ls_model_ctx.h"

#include <stddef.h>
#include <stdint.h>

/* What one sweep also writes. */
typedef struct {
    ls_gap *gaps;          /* gaps appended here when not NULL ... */
    size_t *gap_count;     /* ... at gaps[*gap_count] */
    ls_gap_stats *stats;   /* and/or added to these statistics (gap_stats_add) */
    int sampled;           /* keep the sampled device's intervals in ctx->intervals */
} ls_sweep_out;

/* Of gap g's idle, what its sync charged as the host's wait (see
 * ls_model.h gap_waited_ns): the whole gap when no sync caused it, before
 * the charges are made, or for a gap that is not one of m->gaps. */
uint64_t ls_model_gap_waited(const ls_model *m, const ls_gap *g);

/* Statistics of the gaps gaps[idx[i]] (or gaps[i] when idx is NULL). */
void ls_model_gap_stats(const ls_ctx *c, const ls_gap *gaps, const uint32_t *idx, size_t n,
                        ls_gap_stats *s);

/* Sweeps ops idx[0..n), sorted by (device, start, end), into one line
 * over their devices (busy time summed per device). */
void ls_model_sweep_devices(ls_ctx *c, const uint32_t *idx, size_t n, ls_line *line,
                            const ls_sweep_out *out);

/* One timeline per run of equal key among sorted ops (devices or streams);
 * returns their number.  Device sweeps keep the gaps and busy intervals;
 * with gaps NULL (streams) only their statistics are kept, so no gap
 * array of the ops' size is written (400 MB at 10M ops). */
size_t ls_model_sweep_lines(ls_ctx *c, const uint32_t *order, int by_stream, ls_timeline *lines,
                            ls_gap *gaps, size_t *gap_count, int sampled);

#endif
