/* ls_range_type: the Range context manager type of loopscope._core (a
 * plain named range, as loopscope.range(name) returns; steps are
 * ls_step_type's). */
#ifndef LS_RANGE_TYPE_H
#define LS_RANGE_TYPE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

extern PyType_Spec ls_range_type_spec;

/* A Range named `name` (checked by ls_check_name).  Returns a new reference
 * or NULL with an exception set. */
PyObject *ls_range_new(PyTypeObject *type, PyObject *name);

/* Checks a name given by the user: a non-empty str without NUL.  Sets
 * `text` and `len` to its UTF-8 (owned by the str) and returns 0, or returns
 * -1 with TypeError/ValueError naming `what` and the problem. */
int ls_check_name(PyObject *name, const char *what, const char **text, Py_ssize_t *len);

#endif
