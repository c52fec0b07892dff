/* ls_module: the CPython face of the C core.  Shared by the files that
 * define its types and functions; the module itself is in ls_module.c. */
#ifndef LS_MODULE_H
#define LS_MODULE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "ls_session.h"

/* Per-module state (multi-phase init: one per module object). */
typedef struct {
    PyTypeObject *range_type;
    PyTypeObject *capture_type;
    PyObject *range_cache; /* dict: name -> Range, so a range name is interned once */
} ls_module_state;

ls_module_state *ls_module_get_state(PyObject *module);

/* Builds a dict from alternating (const char *key, PyObject *value) pairs,
 * stealing each value; a NULL value makes it fail (after releasing the rest)
 * and return NULL with the exception set. */
PyObject *ls_dict_of(int pairs, ...);

/* Syncs, Python side (ls_pycalls.c).  Python-facing functions: NULL with an
 * exception set on error. */
PyObject *ls_call_to_python(const ls_call *call, const ls_code_table *codes);
PyObject *ls_inject_calls(PyObject *module, PyObject *args, PyObject *kwargs);
PyObject *ls_strict_arm_py(PyObject *module, PyObject *args);
PyObject *ls_strict_disarm_py(PyObject *module, PyObject *unused);
PyObject *ls_live_call(PyObject *module, PyObject *token);

/* Range type (ls_range_type.c).  Returns a new reference or NULL with an
 * exception set. */
extern PyType_Spec ls_range_type_spec;
PyObject *ls_range_new(PyTypeObject *type, PyObject *name, int32_t step_index);

/* Capture type (ls_capture_type.c): takes ownership of *capture's records
 * (even on failure).  Returns a new reference or NULL with an exception set. */
extern PyType_Spec ls_capture_type_spec;
PyObject *ls_capture_new(PyTypeObject *type, ls_capture *capture);

/* Test hook (ls_inject.c): _inject(kind, records).  Python-facing. */
PyObject *ls_inject(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* Test hook (ls_inject.c): _settle_samples(spans, max_span_ns, started_ns,
 * stopped_ns, tolerance_ns) -> (spans, partial, delta_ns, shift_ns), the
 * clock placement of decoded PM samples (ls_samples_settle) on (start, end)
 * pairs.  Python-facing. */
PyObject *ls_settle_samples_py(PyObject *module, PyObject *args);

/* Trace readers (ls_trace_py.c): Kineto JSON and Nsight Systems rows into
 * a Capture.  Python-facing. */
PyObject *ls_trace_reader_new(PyObject *module, PyObject *unused);
PyObject *ls_trace_feed(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *ls_trace_add(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *ls_trace_members(PyObject *module, PyObject *capsule);
PyObject *ls_trace_settle(PyObject *module, PyObject *args);
PyObject *ls_trace_ranges(PyObject *module, PyObject *capsule);
PyObject *ls_trace_stats(PyObject *module, PyObject *capsule);
PyObject *ls_trace_capture(PyObject *module, PyObject *args);

#endif
