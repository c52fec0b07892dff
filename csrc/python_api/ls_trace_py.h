/* ls_trace_py: the Python face of the trace readers (Kineto JSON, Nsight
 * Systems rows) that make a Capture from a trace file; see ls_trace_py.c.
 * Python-facing: each returns a new reference, or NULL with an exception
 * set. */
#ifndef LS_TRACE_PY_H
#define LS_TRACE_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

PyObject *ls_trace_reader_new(PyObject *module, PyObject *unused);
PyObject *ls_trace_feed(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *ls_trace_add(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *ls_trace_members(PyObject *module, PyObject *capsule);
PyObject *ls_trace_settle(PyObject *module, PyObject *args, PyObject *kwargs);
PyObject *ls_trace_ranges(PyObject *module, PyObject *capsule);
PyObject *ls_trace_stats(PyObject *module, PyObject *capsule);
PyObject *ls_trace_capture(PyObject *module, PyObject *args);

#endif
