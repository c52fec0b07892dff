/* ls_call_dict: a recorded blocking call (ls_calls) as a Python dict, with
 * its Python stack read through the code table it points into. */
#ifndef LS_CALL_DICT_H
#define LS_CALL_DICT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "ls_records.h"

/* {api, driver, wait_class, enter_ns, exit_ns, thread_id, correlation_id,
 * launches_before, frames: [(file, function, first_line, line, end_line,
 * col, end_col, truth_test)]}, innermost frame first; file and function None
 * when the code table had no room; truth_test a bool (ls_frame).  A new reference, or NULL with an exception set. */
PyObject *ls_call_dict(const ls_call *call, const ls_code_table *codes);

/* The frames already made for the calls of one list: a call's stack is
 * mostly one of a few (a loop's sync sites), so each distinct frame becomes
 * one tuple, and each code's file and function one str, shared by every
 * call that has them (they are immutable: equal values either way). */
#define LS_CALL_KEYS 9  /* a call dict's keys */
#define LS_MEMO_NAMES 32 /* API and wait-class names kept */
typedef struct {
    const ls_code_table *codes;
    PyObject **texts;   /* [2 * code id]: file, [2 * code id + 1]: function; NULL until made */
    struct ls_frame_slot *slots; /* open addressing by frame bytes */
    size_t capacity, used;
    PyObject *keys[LS_CALL_KEYS]; /* the dicts' keys, interned (NULL: made per dict) */
    struct {
        const char *text; /* a name of the static tables, by address */
        PyObject *str;
    } names[LS_MEMO_NAMES];
    int name_count;
} ls_frame_memo;

/* Prepares an empty memo for frames read through `codes`. */
void ls_frame_memo_init(ls_frame_memo *memo, const ls_code_table *codes);

/* Releases what the memo holds (the lists made with it keep their own
 * references). */
void ls_frame_memo_clear(ls_frame_memo *memo);

/* ls_call_dict with frames taken from / added to `memo` (made with the
 * same code table).  A new reference, or NULL with an exception set. */
PyObject *ls_call_dict_memo(const ls_call *call, ls_frame_memo *memo);

#endif
