/* ls_model_build: records to the analysed model (ls_model.h says what it
 * holds).  Two sorts of the ops (by device then time, by stream then time)
 * and one of the launch records; every projection (steps, ranges, groups)
 * then buckets ops and gaps by owner (ls_model_projections). */
#ifndef LS_MODEL_BUILD_H
#define LS_MODEL_BUILD_H

#include "ls_model.h"

/* Analyses `records` (names of ops and ranges come from ls_names).
 * Returns 0; -1 when memory ran out; -2 when options name a step range
 * past the ranges or twice.  Always free `out` with ls_model_free. */
int ls_model_build(const ls_records *records, const ls_model_options *options, ls_model *out);

#endif
