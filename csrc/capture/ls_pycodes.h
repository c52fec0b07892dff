/* ls_pycodes: the Python code objects seen in captured stacks, copied out as
 * plain UTF-8 strings (file name, qualified function name, first line) the
 * first time each is seen.  A stack then stays readable after its code
 * objects are gone, and nothing holds a reference to them.
 *
 * Filled from CUPTI callbacks on any thread, with or without the GIL: the
 * table and its string arena are allocated up front, a mutex guards them,
 * and a lookup never allocates.  It only reads immutable fields of code and
 * str objects that the caller's live frames keep alive.  A child forked
 * while a callback held the table finds it unlocked. */
#ifndef LS_PYCODES_H
#define LS_PYCODES_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "ls_records.h"

#include <stddef.h>
#include <stdint.h>

#define LS_NO_CODE UINT32_MAX

/* Empties the table and makes room for `max_codes` code objects and
 * `arena_bytes` of strings.  0, or -1 when out of memory.  Call while no
 * callback can run. */
int ls_pycodes_reset(size_t max_codes, size_t arena_bytes);

/* The id of `code` (a PyCodeObject the caller's frame keeps alive), adding
 * it on first sight; LS_NO_CODE when the table or arena is full (counted). */
uint32_t ls_pycodes_intern(PyCodeObject *code);

/* A borrowed view of the live table (for reading calls while a session
 * runs, with the GIL); valid until the next reset or take. */
void ls_pycodes_view(ls_code_table *view);

/* Copies the table's codes and strings into `out` (the caller frees them
 * with ls_records_clear; all NULL and the codes counted as refused when out
 * of memory); the table is empty and refuses codes until the next reset.
 * Call while no callback can run. */
void ls_pycodes_take(ls_code_table *out);

/* Code objects refused because the table was full. */
uint64_t ls_pycodes_refused(void);

#endif
