/* ls_test_hooks: the test hooks of loopscope._core, each named with a
 * leading underscore: _inject (synthetic records), _inject_calls (fake API
 * calls through the real switchboard), _set_test_clock (a scripted clock),
 * _decoder_probe / _decoder_state (loopscope's worker thread and its ticks),
 * _fake_samples (synthetic PM samples through the sampler), _finish_delay
 * and _capture_pending (the hand-over of a profile's finish), _pmcache (the
 * PM config cache files), _settle_samples (PM sample placement), _names
 * and _names_hammer (the name table) and _open_ranges (this thread's range
 * stack).  Module
 * functions: each returns NULL with an exception set on error. */
#ifndef LS_TEST_HOOKS_H
#define LS_TEST_HOOKS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* The hooks, NULL-terminated, for PyModule_AddFunctions. */
extern PyMethodDef ls_test_hook_methods[];

#endif
