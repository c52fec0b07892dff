/* ls_rangestack: each thread's stack of open ranges.  An exit finds the
 * enter it closes by identity (the token of the object that entered), not
 * by position, so a stray exit closes nothing and exits out of order close
 * their own ranges.  The stack grows as deep as the ranges nest (amortised
 * growth, no fixed depth) and is freed when its thread ends.  Pure C: the
 * callers (ls_session) hold the GIL. */
#ifndef LS_RANGESTACK_H
#define LS_RANGESTACK_H

#include <stddef.h>
#include <stdint.h>

#define LS_OPEN_STEP 1u /* the range is a step */
#define LS_OPEN_NVTX 2u /* an NVTX range was pushed for it */

typedef struct {
    uint64_t owner;      /* token of the object that entered the range */
    int32_t record;      /* its index in the session's range records, -1 if none */
    uint32_t generation; /* session generation at the enter, 0 outside a session */
    uint32_t depth;      /* open ranges of the same generation below it */
    uint32_t flags;      /* LS_OPEN_* */
} ls_open_range;

/* Appends `entry` to the calling thread's stack.  Returns 0, or -1 when
 * memory ran out (nothing pushed). */
int ls_rangestack_push(const ls_open_range *entry);

/* The calling thread's innermost open range, NULL when none is open. */
const ls_open_range *ls_rangestack_top(void);

/* Position (0 = outermost) of the innermost entry of `owner` on the calling
 * thread, or -1 when `owner` has none open.  Looks from the top: the usual
 * exit is found at once. */
ptrdiff_t ls_rangestack_find(uint64_t owner);

/* Removes the entry at `position` (from ls_rangestack_find) and returns it;
 * the entries above it move down by one. */
ls_open_range ls_rangestack_remove(ptrdiff_t position);

/* Entries open on the calling thread. */
size_t ls_rangestack_size(void);

/* Steps of `generation` open on the calling thread. */
uint32_t ls_rangestack_open_steps(uint32_t generation);

#endif
