/* ls_range_type: the Range context manager type of loopscope._core (a
 * step, or a plain named range). */
#ifndef LS_RANGE_TYPE_H
#define LS_RANGE_TYPE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

extern PyType_Spec ls_range_type_spec;

/* A Range named `name` (a non-empty str), a step when step_index >= 0.
 * Returns a new reference or NULL with an exception set. */
PyObject *ls_range_new(PyTypeObject *type, PyObject *name, int32_t step_index);

#endif
