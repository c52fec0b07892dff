/* ls_module_state: the per-module state of loopscope._core (multi-phase
 * init: one per module object), shared by the module and its types. */
#ifndef LS_MODULE_STATE_H
#define LS_MODULE_STATE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef struct {
    PyTypeObject *range_type;
    PyTypeObject *capture_type;
    PyTypeObject *model_type;
    PyTypeObject *step_type;
    PyTypeObject *stepper_type;
    PyTypeObject *site_type;
    PyTypeObject *call_range_type;
    PyObject *range_cache; /* dict: name -> Range, bounded (LS_RANGE_CACHE_MAX) */
} ls_module_state;

/* Distinct names loopscope.range() keeps an object for; past it the cache
 * starts over (objects the user holds live on), so it cannot grow forever. */
#define LS_RANGE_CACHE_MAX 4096

static inline ls_module_state *ls_module_state_of(PyObject *module)
{
    return (ls_module_state *)PyModule_GetState(module);
}

/* The state of the module that made `type` (a type of this module); NULL
 * with an exception set when it has none. */
static inline ls_module_state *ls_module_state_of_type(PyTypeObject *type)
{
    PyObject *module = PyType_GetModule(type);
    return module == NULL ? NULL : ls_module_state_of(module);
}

#endif
