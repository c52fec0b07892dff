/* ls_strict_py: the Python face of strict mode (loopscope.no_sync(), in
 * _strict.py): arm and disarm the per-thread watch, and read a call the
 * running session noted.  Module functions, added to loopscope._core from
 * ls_strict_py_methods; each returns NULL with an exception set on error. */
#ifndef LS_STRICT_PY_H
#define LS_STRICT_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* _strict_arm, _strict_disarm, _strict_take_all, _live_call; NULL-terminated. */
extern PyMethodDef ls_strict_py_methods[];

#endif
