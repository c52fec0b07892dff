/* ls_rangestack: see ls_rangestack.h.  A thread-local array, with a pthread
 * key whose destructor frees it when the thread ends. */
#include "ls_rangestack.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define LS_STACK_FIRST 32u

static _Thread_local struct {
    ls_open_range *items;
    size_t count, capacity;
    uint32_t steps_generation; /* open_steps counts the steps of this generation */
    uint32_t open_steps;
} tls;

static pthread_key_t stack_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static int key_ready;

static void free_stack(void *items) { free(items); }

static void make_key(void) { key_ready = pthread_key_create(&stack_key, free_stack) == 0; }

static void count_step(const ls_open_range *e, int delta)
{
    if ((e->flags & LS_OPEN_STEP) && e->generation == tls.steps_generation)
        tls.open_steps += (uint32_t)delta;
}

int ls_rangestack_push(const ls_open_range *entry)
{
    if (tls.count == tls.capacity) {
        size_t cap = tls.capacity ? tls.capacity * 2 : LS_STACK_FIRST;
        ls_open_range *bigger = realloc(tls.items, cap * sizeof *bigger);
        if (bigger == NULL)
            return -1;
        if (tls.items == NULL) {
            pthread_once(&key_once, make_key);
            if (key_ready)
                pthread_setspecific(stack_key, bigger);
        } else if (key_ready && bigger != tls.items) {
            pthread_setspecific(stack_key, bigger);
        }
        tls.items = bigger;
        tls.capacity = cap;
    }
    tls.items[tls.count++] = *entry;
    count_step(entry, 1);
    return 0;
}

const ls_open_range *ls_rangestack_top(void)
{
    return tls.count ? &tls.items[tls.count - 1] : NULL;
}

ptrdiff_t ls_rangestack_find(uint64_t owner)
{
    for (size_t i = tls.count; i > 0; i--)
        if (tls.items[i - 1].owner == owner)
            return (ptrdiff_t)(i - 1);
    return -1;
}

ls_open_range ls_rangestack_remove(ptrdiff_t position)
{
    size_t at = (size_t)position;
    ls_open_range e = tls.items[at];
    memmove(&tls.items[at], &tls.items[at + 1], (tls.count - at - 1) * sizeof e);
    tls.count--;
    count_step(&e, -1);
    return e;
}

size_t ls_rangestack_size(void) { return tls.count; }

uint32_t ls_rangestack_open_steps(uint32_t generation)
{
    if (tls.steps_generation != generation) {
        tls.steps_generation = generation;
        tls.open_steps = 0;
        for (size_t i = 0; i < tls.count; i++)
            count_step(&tls.items[i], 1);
    }
    return tls.open_steps;
}
