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

/* Capture type (ls_capture_type.c): takes ownership of the finish job
 * (ls_finish.h; even on failure), whose capture it waits for the first time
 * anything of it is looked up; stop_cost_ns is the stop's host time on the
 * user's thread.  Returns a new reference or NULL with an exception set. */
struct ls_finish;
extern PyType_Spec ls_capture_type_spec;
PyObject *ls_capture_new(PyTypeObject *type, struct ls_finish *pending, uint64_t stop_cost_ns);

/* Test hook: _capture_pending(capture) -> bool, without waiting.
 * Python-facing. */
PyObject *ls_capture_pending_py(PyObject *module, PyObject *capture);

/* Test hooks over loopscope's worker, PM sampler and config cache
 * (ls_hooks.c): _fake_samples(samples, per_tick=1, interval_ns=100000),
 * _finish_delay(ns), _pmcache(op, ...).  Python-facing. */
PyObject *ls_fake_samples_py(PyObject *module, PyObject *args);
PyObject *ls_finish_delay_py(PyObject *module, PyObject *ns);
PyObject *ls_pmcache_py(PyObject *module, PyObject *args, PyObject *kwargs);

/* Test hook (ls_inject.c): _inject(kind, records).  Python-facing. */
PyObject *ls_inject(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* Test hook (ls_inject.c): _settle_samples(spans, max_span_ns, started_ns,
 * stopped_ns, tolerance_ns) -> (spans, partial, delta_ns, shift_ns), the
 * clock placement of decoded PM samples (ls_samples_settle) on (start, end)
 * pairs.  Python-facing. */
PyObject *ls_settle_samples_py(PyObject *module, PyObject *args);

#endif
