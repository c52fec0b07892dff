/* ls_inject: _inject (synthetic records into the running profile) and
 * _set_test_clock (a scripted profiler clock): how loopscope._replay turns a
 * recording back into a profile, and how the tests feed exact records.
 * Module functions: each returns NULL with an exception set on error. */
#ifndef LS_INJECT_H
#define LS_INJECT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* _inject and _set_test_clock, NULL-terminated, for PyModule_AddFunctions. */
extern PyMethodDef ls_inject_methods[];

#endif
