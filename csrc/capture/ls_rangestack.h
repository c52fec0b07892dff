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
#define LS_OPEN_ENDED 4u /* its end was marked before its exit (ls_session_mark_end) */

typedef struct {
    uint64_t owner;      /* token of the object that entered the range */
    int32_t record;      /* its index in the session's range records, -1 if none */
    uint32_t generation; /* session generation at the enter, 0 outside a session */
    uint32_t depth;      /* open ranges of the same generation below it */
    uint32_t flags;      /* LS_OPEN_* */
} ls_open_range;

/* One thread's stack.  The fields are read by the inline functions below;
 * only ls_rangestack.c changes them. */
typedef struct ls_rangestack {
    ls_open_range *items;
    size_t count, capacity;
    uint32_t steps_generation; /* open_steps counts the steps of this generation */
    uint32_t open_steps;
    uint64_t yielded_owner;    /* a marked step a new step ended (its exit closes nothing), 0: none */
} ls_rangestack;

/* The calling thread's stack; never NULL.  Fetch it once per edge: each
 * fetch is a thread-local lookup. */
ls_rangestack *ls_rangestack_mine(void);

/* Appends `entry`.  Returns 0, or -1 when memory ran out (nothing pushed). */
int ls_rangestack_push(ls_rangestack *s, const ls_open_range *entry);

/* Removes the entry at `position` (from ls_rangestack_find) and returns it;
 * the entries above it move down by one. */
ls_open_range ls_rangestack_remove(ls_rangestack *s, ptrdiff_t position);

/* Sets the flags of the entry at `position` (from ls_rangestack_find);
 * LS_OPEN_STEP must stay as it was (open_steps counts by it). */
void ls_rangestack_set_flags(ls_rangestack *s, ptrdiff_t position, uint32_t flags);

/* Notes that `owner`'s range was ended for it (ls_session_push): its own
 * exit later finds it gone.  One a thread: a later one replaces it. */
void ls_rangestack_note_yielded(ls_rangestack *s, uint64_t owner);

/* 1 when `owner` is the one noted (and forgets it), else 0. */
int ls_rangestack_take_yielded(ls_rangestack *s, uint64_t owner);

/* Steps of `generation` open. */
uint32_t ls_rangestack_open_steps(ls_rangestack *s, uint32_t generation);

/* The innermost open range, NULL when none is open. */
static inline const ls_open_range *ls_rangestack_top(const ls_rangestack *s)
{
    return s->count ? &s->items[s->count - 1] : NULL;
}

/* Position (0 = outermost) of the innermost entry of `owner`, or -1 when
 * `owner` has none open.  Looks from the top: the usual exit is found at
 * once. */
static inline ptrdiff_t ls_rangestack_find(const ls_rangestack *s, uint64_t owner)
{
    for (size_t i = s->count; i > 0; i--)
        if (s->items[i - 1].owner == owner)
            return (ptrdiff_t)(i - 1);
    return -1;
}

/* Entries open. */
static inline size_t ls_rangestack_size(const ls_rangestack *s) { return s->count; }

#endif
