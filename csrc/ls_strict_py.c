/* ls_strict_py: see ls_strict_py.h. */
#include "ls_strict_py.h"

#include "ls_call_dict.h"
#include "ls_calls.h"
#include "ls_pycodes.h"
#include "ls_pyvalues.h"
#include "ls_session.h"
#include "ls_strict.h"

/* _live_call(token) -> dict of a call of the running session (strict mode). */
static PyObject *live_call(PyObject *module, PyObject *token)
{
    (void)module;
    unsigned long long t = PyLong_AsUnsignedLongLong(token);
    if (t == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    const ls_call *c = ls_session_active() ? ls_calls_get(t) : NULL;
    if (c == NULL)
        Py_RETURN_NONE;
    ls_code_table view;
    ls_pycodes_view(&view);
    return ls_call_dict(c, &view);
}

static PyObject *strict_arm(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *handler;
    int on_main_thread;
    if (!PyArg_ParseTuple(args, "Op:_strict_arm", &handler, &on_main_thread))
        return NULL;
    if (!PyCallable_Check(handler)) {
        PyErr_SetString(PyExc_TypeError, "_strict_arm: handler must be callable");
        return NULL;
    }
    if (ls_strict_arm(handler, on_main_thread) != 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *strict_disarm(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return ls_py_u64(ls_strict_disarm());
}

PyMethodDef ls_strict_py_methods[] = {
    {"_strict_arm", strict_arm, METH_VARARGS,
     "_strict_arm(handler, on_main_thread): strict mode on for this thread; handler(token)"
     " runs with the GIL when control is back in Python after a wait."},
    {"_strict_disarm", strict_disarm, METH_NOARGS,
     "_strict_disarm() -> token of a wait noted but not handled (0 if none)."},
    {"_live_call", live_call, METH_O,
     "_live_call(token) -> dict of a blocking call of the running profile, or None."},
    {NULL, NULL, 0, NULL},
};
