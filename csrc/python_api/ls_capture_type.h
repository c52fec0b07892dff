/* ls_capture_type: the Capture type of loopscope._core: the records of one
 * finished profile, owned by a Python object; its analysed models (Model)
 * are made from it and cached on it.  The records sit in a capsule that the
 * Capture and its Models share, so a Model never holds its Capture: no
 * reference cycle, and a dropped Capture frees its records at once (or with
 * the last Model that outlived it).  loopscope's worker finishes the
 * records after the stop (ls_finish); the first look-up of anything on the
 * object waits for that. */
#ifndef LS_CAPTURE_TYPE_H
#define LS_CAPTURE_TYPE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "ls_session.h"

extern PyType_Spec ls_capture_type_spec;

struct ls_finish;

/* Takes ownership of the finish job `pending` (ls_finish.h; even on
 * failure; NULL makes an empty capture), whose capture it waits for the
 * first time anything of it is looked up; stop_cost_ns is the stop's host
 * time on the user's thread.  Returns a new reference or NULL with an
 * exception set. */
PyObject *ls_capture_new(PyTypeObject *type, struct ls_finish *pending, uint64_t stop_cost_ns);

/* A Capture of records that need no finish (read from a trace file): takes
 * ownership of *capture's records (even on failure).  Returns a new
 * reference or NULL with an exception set. */
PyObject *ls_capture_new_finished(PyTypeObject *type, ls_capture *capture);

/* 1 while the worker has not finished `capture` (a Capture), without
 * waiting; 0 once it has.  Never fails. */
int ls_capture_is_pending(PyObject *capture);

#endif
