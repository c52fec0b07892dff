/* ls_model_counters: PM samples onto the model's windows: the span and
 * busy averages of the whole profile and of each step, range and group
 * (ls_samples).  Pure C; ls_model_fold_group_metrics returns 0, or -1 when
 * memory ran out, the rest cannot fail. */
#ifndef LS_MODEL_COUNTERS_H
#define LS_MODEL_COUNTERS_H

#include "ls_model_ctx.h"

#include <stddef.h>
#include <stdint.h>

/* Span and busy averages of one window: the sampled device's busy
 * intervals of its last sweep (ctx->intervals) or, with none, the host
 * span [host_a, host_b]; busy estimated from GR active when unmeasured. */
void ls_model_average_window(const ls_ctx *c, uint64_t host_a, uint64_t host_b, ls_metrics *out);

/* Each group's figures: its ranges' averages, weighted by covered time. */
int ls_model_fold_group_metrics(ls_model *m, size_t range_count);

#endif
