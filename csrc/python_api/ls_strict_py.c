/* ls_strict_py: see ls_strict_py.h. */
#include "ls_strict_py.h"

#include "ls_call_dict.h"
#include "ls_calls.h"
#include "ls_pycodes.h"
#include "ls_pyvalues.h"
#include "ls_session.h"
#include "ls_strict.h"

#include <pthread.h>
#include <string.h>

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

/* How far strict mode looks back for the calls its thread made just before
 * a noted wait: the store slots read, the calls of that thread kept. */
#define BEFORE_SLOTS 256
#define BEFORE_CALLS 4

/* The calls the thread of `c` (token `token`) recorded just before it,
 * latest first: a new list.  _syncs names a wait that follows a copy of its
 * line by that copy, as the report does (Resolver.sync_site). */
static PyObject *calls_before(const ls_call *c, uint64_t token, const ls_code_table *view)
{
    PyObject *list = PyList_New(0);
    uint64_t index = token & 0xffffffffu;
    for (uint64_t k = 1; list != NULL && k < index && k <= BEFORE_SLOTS &&
                         PyList_GET_SIZE(list) < BEFORE_CALLS; k++) {
        const ls_call *b = ls_calls_get(token - k);
        if (b == NULL || b->thread_id != c->thread_id || b->enter_ns > c->enter_ns)
            continue;
        PyObject *d = ls_call_dict(b, view);
        if (d == NULL || PyList_Append(list, d) != 0)
            Py_CLEAR(list);
        Py_XDECREF(d);
    }
    return list;
}

/* A noted wait as the handler sees it: the call's dict while its token is
 * live, with "before" (calls_before), else (its session ended) the API
 * alone, with no frames, no calls before and "stale": True. */
static PyObject *describe_noted(const ls_strict_noted *n)
{
    const ls_call *c = ls_session_active() ? ls_calls_get(n->token) : NULL;
    PyObject *d;
    if (c != NULL) {
        ls_code_table view;
        ls_pycodes_view(&view);
        d = ls_call_dict(c, &view);
        PyObject *before = d != NULL ? calls_before(c, n->token, &view) : NULL;
        if (before == NULL || PyDict_SetItemString(d, "before", before) != 0)
            Py_CLEAR(d);
        Py_XDECREF(before);
    } else {
        ls_call bare;
        memset(&bare, 0, sizeof bare);
        bare.thread_id = n->thread_id;
        bare.cbid = n->cbid;
        bare.domain = n->domain;
        bare.role = n->role;
        ls_code_table none;
        memset(&none, 0, sizeof none);
        d = ls_call_dict(&bare, &none);
        PyObject *before = d != NULL ? PyList_New(0) : NULL;
        if (before == NULL || PyDict_SetItemString(d, "before", before) != 0)
            Py_CLEAR(d);
        Py_XDECREF(before);
    }
    if (d != NULL && PyDict_SetItemString(d, "stale", c == NULL ? Py_True : Py_False) != 0)
        Py_CLEAR(d);
    return d;
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
    if (ls_strict_arm(handler, on_main_thread, describe_noted) != 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *strict_disarm(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *thread = Py_None;
    if (!PyArg_ParseTuple(args, "|O:_strict_disarm", &thread))
        return NULL;
    uint64_t thread_id = (uint64_t)pthread_self();
    if (thread != Py_None) {
        thread_id = (uint64_t)PyLong_AsUnsignedLongLong(thread);
        if (thread_id == (uint64_t)-1 && PyErr_Occurred())
            return NULL;
    }
    ls_strict_noted noted;
    if (!ls_strict_disarm(thread_id, &noted))
        Py_RETURN_NONE;
    return describe_noted(&noted);
}

static int append_noted(const ls_strict_noted *noted, void *list)
{
    PyObject *d = describe_noted(noted);
    int rc = d != NULL ? PyList_Append((PyObject *)list, d) : -1;
    Py_XDECREF(d);
    return rc;
}

static PyObject *strict_take_all(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    PyObject *list = PyList_New(0);
    if (list != NULL && ls_strict_take_all(append_noted, list) != 0)
        Py_CLEAR(list);
    return list;
}

PyMethodDef ls_strict_py_methods[] = {
    {"_strict_arm", strict_arm, METH_VARARGS,
     "_strict_arm(handler, on_main_thread): strict mode on for this thread; on the main thread"
     " handler(call) runs with the GIL when control is back in Python after a wait (call: the"
     " dict of _live_call, with 'before': the calls its thread made just before it, latest"
     " first; 'stale': True, no frames and no calls before when its session has ended)."},
    {"_strict_disarm", strict_disarm, METH_VARARGS,
     "_strict_disarm(thread_id=None) -> the call of a wait noted but not handled, or None;"
     " disarms this thread (or thread_id, one that has ended)."},
    {"_strict_take_all", strict_take_all, METH_NOARGS,
     "_strict_take_all() -> the calls of the waits noted and not handled on every armed"
     " thread, which stay armed (before their session stops)."},
    {"_live_call", live_call, METH_O,
     "_live_call(token) -> dict of a blocking call of the running profile, or None."},
    {NULL, NULL, 0, NULL},
};
