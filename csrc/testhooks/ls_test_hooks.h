/* ls_test_hooks: the test hooks of loopscope._core, each named with a
 * leading underscore, in a test build only (LOOPSCOPE_TEST_HOOKS=1 at build
 * time; loopscope._testhooks re-exports them): _inject_calls (fake API
 * calls through the real switchboard), _decoder_probe / _decoder_state /
 * _tick_starts (loopscope's worker thread and its ticks), _fake_samples
 * (synthetic PM samples through the sampler), _settle_samples (PM sample
 * placement), _split_after_stop (a finish's back-to-back split),
 * _finish_delay and _capture_pending (the hand-over of a profile's finish),
 * _pmcache and _pmavail (the PM caches' files), _fake_context_created,
 * _ids_sort_unique, _radix_order, _names and _names_hammer (the name table)
 * and _open_ranges (this thread's range stack).  _inject and
 * _set_test_clock are the product's (ls_inject).  Module functions: each
 * returns NULL with an exception set on error. */
#ifndef LS_TEST_HOOKS_H
#define LS_TEST_HOOKS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* The hooks, NULL-terminated, for PyModule_AddFunctions. */
extern PyMethodDef ls_test_hook_methods[];

#endif
