/* ls_model_projections: steps, ranges and groups as lines.  Ops and gaps
 * are bucketed by owner with a counting sort that keeps the device order,
 * so each owner's ops are swept in order without sorting again.  Pure C;
 * each returns 0, or -1 when memory ran out. */
#ifndef LS_MODEL_PROJECTIONS_H
#define LS_MODEL_PROJECTIONS_H

#include "ls_model_ctx.h"

#include <stddef.h>
#include <stdint.h>

/* Counting sort of items into owners, keeping their order: for each item
 * k of order[0..n), owners_of(k) lists its owners; out gets the items
 * owner by owner, first[o]..first[o + 1] being owner o's. */
typedef struct {
    const uint32_t *items; /* NULL: the items 0, 1, 2, ... themselves (order was NULL) */
    uint32_t *owned;       /* the items when bucketing wrote them, else NULL */
    size_t *first;         /* owner_count + 2 */
} ls_buckets;

void ls_model_free_buckets(ls_buckets *b);

/* Step lines and their gaps; the steps' ops, bucketed, are left in `ops`
 * for the ranges (ls_model_free_buckets, also after a failure). */
int ls_model_project_steps(ls_ctx *c, const uint32_t *by_device, ls_buckets *ops);

/* Range and group lines.  A step's range mostly holds the step's ops
 * (step_ops, from ls_model_project_steps) and no more: its line is the step's, not
 * swept again (a sweep of every op at 10M ops).  Only a range that holds
 * ops keeps a line (range_line_at; ls_model_range_line reads the others
 * as empty), and without ops no group keeps one either: 30M ranges of
 * which few launch anything write no 2.9 GB of empty lines. */
int ls_model_project_ranges(ls_ctx *c, const uint32_t *by_device, const ls_buckets *step_ops);

#endif
