/* ls_rangestack: see ls_rangestack.h.  A thread-local array, with a pthread
 * key whose destructor frees it when the thread ends. */
#include "ls_rangestack.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define LS_STACK_FIRST 32u

static _Thread_local ls_rangestack mine;

static pthread_key_t stack_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static int key_ready;

/* Runs on the ending thread: its stack goes, and a push after this (from
 * another key's destructor) would start a new one. */
static void free_stack(void *items)
{
    free(items);
    memset(&mine, 0, sizeof mine);
}

static void make_key(void) { key_ready = pthread_key_create(&stack_key, free_stack) == 0; }

static void count_step(ls_rangestack *s, const ls_open_range *e, int delta)
{
    if ((e->flags & LS_OPEN_STEP) && e->generation == s->steps_generation)
        s->open_steps += (uint32_t)delta;
}

ls_rangestack *ls_rangestack_mine(void) { return &mine; }

int ls_rangestack_push(ls_rangestack *s, const ls_open_range *entry)
{
    if (s->count == s->capacity) {
        size_t cap = s->capacity ? s->capacity * 2 : LS_STACK_FIRST;
        ls_open_range *bigger = realloc(s->items, cap * sizeof *bigger);
        if (bigger == NULL)
            return -1;
        if (bigger != s->items) {
            pthread_once(&key_once, make_key);
            if (key_ready)
                pthread_setspecific(stack_key, bigger); /* freed when the thread ends */
        }
        s->items = bigger;
        s->capacity = cap;
    }
    s->items[s->count++] = *entry;
    count_step(s, entry, 1);
    return 0;
}

ls_open_range ls_rangestack_remove(ls_rangestack *s, ptrdiff_t position)
{
    size_t at = (size_t)position;
    ls_open_range e = s->items[at];
    if (at + 1 < s->count) /* out of order: the rare case */
        memmove(&s->items[at], &s->items[at + 1], (s->count - at - 1) * sizeof e);
    s->count--;
    count_step(s, &e, -1);
    return e;
}

void ls_rangestack_set_flags(ls_rangestack *s, ptrdiff_t position, uint32_t flags)
{
    /* callers keep LS_OPEN_STEP as it was: open_steps counts the entries by it */
    s->items[(size_t)position].flags = flags;
}

void ls_rangestack_note_yielded(ls_rangestack *s, uint64_t owner) { s->yielded_owner = owner; }

int ls_rangestack_take_yielded(ls_rangestack *s, uint64_t owner)
{
    if (owner == 0 || s->yielded_owner != owner)
        return 0;
    s->yielded_owner = 0;
    return 1;
}

uint32_t ls_rangestack_open_steps(ls_rangestack *s, uint32_t generation)
{
    if (s->steps_generation != generation) {
        s->steps_generation = generation;
        s->open_steps = 0;
        for (size_t i = 0; i < s->count; i++)
            count_step(s, &s->items[i], 1);
    }
    return s->open_steps;
}
