/* ls_strtab: a private table of interned strings for one trace reader
 * (names of kernels, API calls, ranges, Python functions).  Unlike ls_names
 * (process-wide, for the life of the process) it is freed with its reader,
 * needs no GIL, and holds names that most traces never show a user. */
#ifndef LS_STRTAB_H
#define LS_STRTAB_H

#include <stddef.h>
#include <stdint.h>

#define LS_STRTAB_NONE UINT32_MAX

typedef struct {
    uint32_t *slots;   /* open addressing: id + 1, 0 empty */
    size_t slot_count; /* a power of two */
    uint64_t *offsets; /* per id: start in arena */
    uint32_t *lengths;
    uint32_t *hashes;
    size_t count, capacity;
    char *arena;
    size_t arena_used, arena_capacity;
} ls_strtab;

/* The id of text[0..len), adding it if new; LS_STRTAB_NONE when memory ran
 * out.  Ids are dense from 0. */
uint32_t ls_strtab_intern(ls_strtab *t, const char *text, size_t len);

/* The NUL-terminated text of id, and its length in *len (may be NULL). */
const char *ls_strtab_text(const ls_strtab *t, uint32_t id, size_t *len);

void ls_strtab_free(ls_strtab *t);

#endif
