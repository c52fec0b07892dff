/* ls_pycalls: the Python face of sync detection: blocking calls as dicts,
 * the strict-mode hooks behind loopscope.no_sync(), and the test hook that
 * drives the real switchboard with fake callback data. */
#include "ls_module.h"

#include "ls_calls.h"
#include "ls_cbids.h"
#include "ls_clock.h"
#include "ls_codes.h"
#include "ls_strict.h"
#include "ls_switchboard.h"

#include <pthread.h>
#include <string.h>

#define U64(v) PyLong_FromUnsignedLongLong((unsigned long long)(v))

static PyObject *text_or_none(const char *text)
{
    if (text == NULL)
        Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace");
}

/* (file, function, first_line, line, end_line, col, end_col); file and
 * function None when the code table had no room. */
static PyObject *frame_to_python(const ls_frame *f, const ls_code_table *codes)
{
    const ls_code_info *info = f->code < codes->count ? &codes->items[f->code] : NULL;
    return Py_BuildValue("(NNiiiii)", text_or_none(info ? info->filename : NULL),
                         text_or_none(info ? info->function : NULL),
                         info ? info->first_line : -1, f->line, f->end_line, f->col, f->end_col);
}

PyObject *ls_call_to_python(const ls_call *c, const ls_code_table *codes)
{
    PyObject *frames = PyList_New(c->frame_count);
    for (int i = 0; frames != NULL && i < c->frame_count; i++) {
        PyObject *f = frame_to_python(&c->frames[i], codes);
        if (f == NULL)
            Py_CLEAR(frames);
        else
            PyList_SET_ITEM(frames, i, f);
    }
    CUpti_CallbackDomain domain = c->domain ? CUPTI_CB_DOMAIN_DRIVER_API
                                            : CUPTI_CB_DOMAIN_RUNTIME_API;
    const char *api = ls_cbid_name(domain, c->cbid);
    return ls_dict_of(9, "api", api ? PyUnicode_FromString(api) : Py_NewRef(Py_None),
                      "driver", PyBool_FromLong(c->domain),
                      "wait_class", PyUnicode_FromString(ls_wait_class_name(LS_ROLE_WAIT_CLASS(c->role))),
                      "enter_ns", U64(c->enter_ns), "exit_ns", U64(c->exit_ns),
                      "thread_id", U64(c->thread_id), "correlation_id", U64(c->correlation_id),
                      "launches_before", U64(c->launches_before), "frames", frames);
}

/* _live_call(token) -> dict of a call of the running session (strict mode). */
PyObject *ls_live_call(PyObject *module, PyObject *token)
{
    (void)module;
    unsigned long long t = PyLong_AsUnsignedLongLong(token);
    if (t == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    const ls_call *c = ls_session_active() ? ls_calls_get(t) : NULL;
    if (c == NULL)
        Py_RETURN_NONE;
    ls_code_table view;
    ls_codes_view(&view);
    return ls_call_to_python(c, &view);
}

/* A noted wait as the handler sees it: the call's dict while its token is
 * live, else (its session ended) the API alone, with no frames and
 * "stale": True. */
static PyObject *describe_noted(const ls_strict_noted *n)
{
    const ls_call *c = ls_session_active() ? ls_calls_get(n->token) : NULL;
    PyObject *d;
    if (c != NULL) {
        ls_code_table view;
        ls_codes_view(&view);
        d = ls_call_to_python(c, &view);
    } else {
        ls_call bare;
        memset(&bare, 0, sizeof bare);
        bare.thread_id = n->thread_id;
        bare.cbid = n->cbid;
        bare.domain = n->domain;
        bare.role = n->role;
        ls_code_table none;
        memset(&none, 0, sizeof none);
        d = ls_call_to_python(&bare, &none);
    }
    if (d != NULL && PyDict_SetItemString(d, "stale", c == NULL ? Py_True : Py_False) != 0)
        Py_CLEAR(d);
    return d;
}

PyObject *ls_strict_arm_py(PyObject *module, PyObject *args)
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

PyObject *ls_strict_disarm_py(PyObject *module, PyObject *args)
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

PyObject *ls_strict_take_all_py(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    PyObject *list = PyList_New(0);
    if (list != NULL && ls_strict_take_all(append_noted, list) != 0)
        Py_CLEAR(list);
    return list;
}

/* The clock of a fake call: enter at the profile clock, exit `duration`
 * later.  Thread-local, because the fake call runs without the GIL. */
static _Thread_local uint64_t fake_enter_ns, fake_duration_ns;
static _Thread_local int fake_exited;

static uint64_t fake_now(void)
{
    uint64_t t = fake_exited ? fake_enter_ns + fake_duration_ns : fake_enter_ns;
    fake_exited = 1;
    return t;
}

typedef struct {
    CUpti_CallbackDomain domain;
    CUpti_CallbackId cbid;
    uint64_t duration_ns, token;
    uint32_t correlation_id;
    uintptr_t param;
} ls_fake_call;

/* Reads item `i` of a fake call as an int in [0, limit]; -1 with an
 * exception naming the call and the field. */
static int read_field(PyObject *t, Py_ssize_t item, Py_ssize_t call, const char *field,
                      unsigned long long limit, unsigned long long *out)
{
    PyObject *v = PyTuple_GET_ITEM(t, item);
    if (!PyLong_Check(v) || PyBool_Check(v)) {
        PyErr_Format(PyExc_TypeError, "loopscope._inject_calls: call %zd must be a tuple (api: "
                     "str, duration_ns: int[, correlation_id: int[, function_param: int]]): its "
                     "%s is a %.100s", call, field, Py_TYPE(v)->tp_name);
        return -1;
    }
    unsigned long long x = PyLong_AsUnsignedLongLong(v); /* raises past 64 bits or < 0 */
    if ((x == (unsigned long long)-1 && PyErr_Occurred()) || x > limit) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "loopscope._inject_calls: call %zd: %s (%R) out of range: "
                     "must be between 0 and %llu", call, field, v, limit);
        return -1;
    }
    *out = x;
    return 0;
}

/* Reads one (api, duration_ns[, correlation_id[, function_param]]) tuple. */
static int read_fake_call(PyObject *t, Py_ssize_t i, ls_fake_call *out)
{
    Py_ssize_t n = PyTuple_Check(t) ? PyTuple_GET_SIZE(t) : 0;
    if (n < 2 || n > 4 || !PyUnicode_Check(PyTuple_GET_ITEM(t, 0))) {
        PyErr_Format(PyExc_TypeError, "loopscope._inject_calls: call %zd must be a tuple "
                     "(api: str, duration_ns: int[, correlation_id: int[, function_param: int]]), "
                     "got %R", i, t);
        return -1;
    }
    unsigned long long duration = 0, correlation = 0, param = 1;
    if (read_field(t, 1, i, "duration_ns", INT64_MAX, &duration) ||
        (n > 2 && read_field(t, 2, i, "correlation_id", UINT32_MAX, &correlation)) ||
        (n > 3 && read_field(t, 3, i, "function_param", UINTPTR_MAX, &param)))
        return -1;
    const char *api = PyUnicode_AsUTF8(PyTuple_GET_ITEM(t, 0));
    if (api == NULL)
        return -1;
    if (ls_cbid_find(api, &out->domain, &out->cbid) != 0) {
        PyErr_Format(PyExc_ValueError, "loopscope._inject_calls: call %zd: %s is not an API call "
                     "loopscope listens to (see csrc/ls_cbids.c)", i, api);
        return -1;
    }
    out->duration_ns = duration;
    out->correlation_id = (uint32_t)correlation;
    out->param = (uintptr_t)param;
    out->token = 0;
    return 0;
}

/* Runs one fake call through the switchboard: enter, then exit. */
static void dispatch_fake(ls_fake_call *f)
{
    uint64_t correlation_data = 0;
    /* Every pointer-sized parameter slot holds `param`: the free of a NULL
     * pointer reads the first, a driver copy's host pointer the second. */
    uintptr_t params[8];
    for (int i = 0; i < 8; i++)
        params[i] = f->param;
    CUpti_CallbackData call;
    memset(&call, 0, sizeof call);
    call.correlationId = f->correlation_id;
    call.correlationData = &correlation_data;
    call.functionParams = params;
    fake_enter_ns = ls_clock_now();
    fake_duration_ns = f->duration_ns;
    fake_exited = 0;
    call.callbackSite = CUPTI_API_ENTER;
    ls_switchboard_dispatch(f->domain, f->cbid, &call, fake_now);
    call.callbackSite = CUPTI_API_EXIT;
    ls_switchboard_dispatch(f->domain, f->cbid, &call, fake_now);
    f->token = correlation_data;
}

/* _inject_calls(calls, release_gil=True): API calls seen by the real
 * switchboard, one after the other, from the calling thread and with its
 * real Python stack (no Python frame in between, as for a C extension). */
PyObject *ls_inject_calls(PyObject *module, PyObject *args, PyObject *kwargs)
{
    (void)module;
    static char *keywords[] = {"calls", "release_gil", NULL};
    PyObject *calls;
    int release_gil = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|p:_inject_calls", keywords, &calls,
                                     &release_gil))
        return NULL;
    if (!ls_session_active()) {
        PyErr_SetString(PyExc_RuntimeError, "loopscope._inject_calls: no profile is running "
                                            "(use it inside `with loopscope.profile():`)");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(calls, "loopscope._inject_calls: calls must be a sequence "
                                           "of tuples");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    ls_fake_call *fakes = PyMem_Calloc((size_t)(n ? n : 1), sizeof *fakes);
    if (fakes == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (read_fake_call(PySequence_Fast_GET_ITEM(seq, i), i, &fakes[i]) != 0) {
            PyMem_Free(fakes);
            Py_DECREF(seq);
            return NULL;
        }
    }
    Py_DECREF(seq);
    ls_session_mark_calls_injected();
    if (release_gil) {
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++)
            dispatch_fake(&fakes[i]);
        Py_END_ALLOW_THREADS
    } else {
        for (Py_ssize_t i = 0; i < n; i++)
            dispatch_fake(&fakes[i]);
    }
    PyObject *tokens = PyList_New(n);
    for (Py_ssize_t i = 0; tokens != NULL && i < n; i++) {
        PyObject *t = U64(fakes[i].token);
        if (t == NULL)
            Py_CLEAR(tokens);
        else
            PyList_SET_ITEM(tokens, i, t);
    }
    PyMem_Free(fakes);
    return tokens;
}
