/* ls_capture_type: the Capture type of loopscope._core: the records of one
 * finished profile, owned by a Python object; its analysed models (Model)
 * are made from it and cached on it. */
#ifndef LS_CAPTURE_TYPE_H
#define LS_CAPTURE_TYPE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "ls_session.h"

extern PyType_Spec ls_capture_type_spec;

/* Takes ownership of *capture's records (even on failure).  Returns a new
 * reference or NULL with an exception set. */
PyObject *ls_capture_new(PyTypeObject *type, ls_capture *capture);

#endif
