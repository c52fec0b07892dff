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
    PyTypeObject *step_type;
    PyTypeObject *stepper_type;
    PyTypeObject *site_type;
    PyTypeObject *call_range_type;
    PyObject *range_cache; /* dict: name -> Range, bounded (LS_RANGE_CACHE_MAX) */
} ls_module_state;

/* Distinct names loopscope.range() keeps an object for; past it the cache
 * starts over (objects the user holds live on), so it cannot grow forever. */
#define LS_RANGE_CACHE_MAX 4096

ls_module_state *ls_module_get_state(PyObject *module);

/* The state of the module that defined heap type `type`. */
ls_module_state *ls_module_state_of_type(PyTypeObject *type);

/* Checks a name given by the user: a non-empty str without NUL.  Sets
 * `text` and `len` to its UTF-8 (owned by the str) and returns 0, or returns -1
 * with TypeError/ValueError naming `what` and the problem. */
int ls_check_name(PyObject *name, const char *what, const char **text, Py_ssize_t *len);

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
PyObject *ls_range_new(PyTypeObject *type, PyObject *name);

/* Steps (ls_step_type.c).  ls_step_fixed: a step always named `name` with
 * index `index` (recordings replay so); a new reference or NULL with an
 * exception set.  ls_step_prefix: the name template id of the step open on
 * this thread (with `any_thread` and none here, of the step last opened on
 * any thread), LS_NO_NAME when none; its index and serial (new at each step
 * enter) go to *index and *serial.  Never fails. */
extern PyType_Spec ls_step_type_spec;
extern PyType_Spec ls_stepper_type_spec;
PyObject *ls_step_fixed(PyTypeObject *type, PyObject *name, int32_t index);
uint32_t ls_step_prefix(int any_thread, uint64_t *serial, int32_t *index);

/* Layer ranges (ls_site_type.c).  ls_call_range_type_spec's basicsize is set at
 * module exec (functools.partial's plus ls_call_range_fields_size()).
 * ls_call_range_new: a new reference or NULL with an exception set. */
extern PyType_Spec ls_site_type_spec;
extern PyType_Spec ls_call_range_type_spec;
size_t ls_call_range_fields_size(void);
PyObject *ls_call_range_new(PyTypeObject *type, PyObject *module, PyObject *site,
                            PyTypeObject *site_type);
uint64_t ls_site_mismatch_total(void);

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

#endif
