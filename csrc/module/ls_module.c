/* ls_module: the loopscope._core extension module (multi-phase init, module
 * state, heap types), and its public functions: start, stop, ranges and
 * steps, the clock.  Strict mode's functions come from ls_strict_py, a
 * recording's replay (_inject, _set_test_clock) from ls_inject, the test
 * hooks from ls_test_hooks (in a test build only: LOOPSCOPE_TEST_HOOKS).  Python-facing functions return NULL with
 * an exception set on error; the capture path below them never raises. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "ls_capture_type.h"
#include "ls_clock.h"
#include "ls_cuda.h"
#include "ls_cupti.h"
#include "ls_demangle.h"
#include "ls_finish.h"
#include "ls_kineto.h"
#include "ls_model_type.h"
#include "ls_module_state.h"
#include "ls_pyvalues.h"
#include "ls_range_type.h"
#include "ls_rows.h"
#include "ls_sampler.h"
#include "ls_site_type.h"
#include "ls_step_type.h"
#include "ls_graphs.h"
#include "ls_inject.h"
#include "ls_session.h"
#include "ls_strict_py.h"
#ifdef LOOPSCOPE_TEST_HOOKS /* a test build only (setup.py) */
#include "ls_test_hooks.h"
#endif
#include "ls_trace_py.h"
#include "ls_worker.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct PyModuleDef ls_module_def;

/* The CUPTI library candidates of a `cupti_paths` argument (a sequence of
 * str; None or NULL: none) as C strings that live as long as *seq, which
 * the caller releases with the array.  NULL with an exception set. */
static const char **cupti_paths_of(PyObject *paths, PyObject **seq, Py_ssize_t *n)
{
    *seq = (paths != NULL && paths != Py_None)
               ? PySequence_Fast(paths, "cupti_paths must be a sequence of str")
               : PyTuple_New(0);
    if (*seq == NULL)
        return NULL;
    *n = PySequence_Fast_GET_SIZE(*seq);
    const char **candidates = calloc((size_t)(*n ? *n : 1), sizeof *candidates);
    if (candidates == NULL) {
        Py_CLEAR(*seq);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(*seq, i);
        candidates[i] = PyUnicode_Check(item) ? PyUnicode_AsUTF8(item) : NULL;
        if (candidates[i] == NULL) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "cupti_paths[%zd] must be a str", i);
            free(candidates);
            Py_CLEAR(*seq);
            return NULL;
        }
    }
    return candidates;
}

/* What start reads from its dict: the session's options, and the CUPTI
 * candidates, converted after (their strings live as long as the dict). */
typedef struct {
    ls_session_options session;
    PyObject *cupti_paths; /* borrowed from the dict */
} start_values;

typedef enum { OPT_BOOL, OPT_INT, OPT_SIZE, OPT_U64, OPT_TEXT, OPT_OBJECT } opt_type;

/* One key of start's dict and where its value goes.  OPT_BOOL and OPT_INT
 * fill an int, OPT_SIZE a size_t, OPT_U64 a uint64_t, OPT_TEXT (a str or
 * None: "") a char array of `size` bytes, OPT_OBJECT a borrowed PyObject *. */
typedef struct {
    const char *name;
    opt_type type;
    size_t offset, size;
} opt_field;

#define OPT(name, type, member) {name, type, offsetof(start_values, member), 0}

/* Every key start takes.  The defaults and ranges are Python's
 * (_options.CORE_START): this side has none, so a missing key is an error. */
static const opt_field start_fields[] = {
    OPT("trace", OPT_BOOL, session.trace),
    OPT("syncs", OPT_BOOL, session.syncs),
    OPT("driver_api", OPT_BOOL, session.driver_api),
    OPT("warm_up", OPT_INT, session.warm_up),
    OPT("callbacks", OPT_BOOL, session.callbacks),
    OPT("own_timestamps", OPT_BOOL, session.own_timestamps),
    OPT("graph_kernels", OPT_BOOL, session.graph_kernels),
    OPT("buffer_bytes", OPT_SIZE, session.buffer_bytes),
    OPT("max_buffers", OPT_SIZE, session.max_buffers),
    OPT("cupti_paths", OPT_OBJECT, cupti_paths),
    OPT("metrics", OPT_BOOL, session.metrics),
    OPT("metrics_device", OPT_INT, session.pm.device),
    OPT("metrics_interval_ns", OPT_U64, session.pm.interval_ns),
    OPT("metrics_buffer_bytes", OPT_SIZE, session.pm.hw_buffer_bytes),
    OPT("metrics_decode_ns", OPT_U64, session.pm.decode_period_ns),
    {"metrics_cache_dir", OPT_TEXT, offsetof(start_values, session.pm.cache_dir),
     sizeof((ls_session_options *)0)->pm.cache_dir},
    OPT("metrics_wait_for_start", OPT_INT, session.pm_wait_for_start),
};

/* Reads one value of start's dict into *out.  -1 with TypeError/ValueError
 * naming the key. */
static int read_option(const opt_field *f, PyObject *value, start_values *out)
{
    char *at = (char *)out + f->offset;
    switch (f->type) {
    case OPT_BOOL:
        if (!PyBool_Check(value))
            break;
        *(int *)at = value == Py_True;
        return 0;
    case OPT_INT: {
        if (!PyLong_Check(value))
            break;
        int overflow = 0;
        long v = PyLong_AsLongAndOverflow(value, &overflow);
        if (overflow != 0 || v < INT_MIN || v > INT_MAX) {
            PyErr_Format(PyExc_ValueError, "start: %s=%R does not fit a C int", f->name, value);
            return -1;
        }
        *(int *)at = (int)v;
        return 0;
    }
    case OPT_SIZE:
    case OPT_U64: {
        if (!PyLong_Check(value))
            break;
        unsigned long long v = PyLong_AsUnsignedLongLong(value);
        if (PyErr_Occurred() || (f->type == OPT_SIZE && v > SIZE_MAX)) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "start: %s=%R is not an unsigned 64-bit int",
                         f->name, value);
            return -1;
        }
        if (f->type == OPT_SIZE)
            *(size_t *)at = (size_t)v;
        else
            *(uint64_t *)at = v;
        return 0;
    }
    case OPT_TEXT: {
        if (value == Py_None) {
            at[0] = '\0';
            return 0;
        }
        if (!PyUnicode_Check(value))
            break;
        Py_ssize_t len = 0;
        const char *text = PyUnicode_AsUTF8AndSize(value, &len);
        if (text == NULL)
            return -1;
        if ((size_t)len >= f->size || strlen(text) != (size_t)len) {
            PyErr_Format(PyExc_ValueError, "start: %s is longer than %zu bytes or holds a NUL",
                         f->name, f->size - 1);
            return -1;
        }
        memcpy(at, text, (size_t)len + 1);
        return 0;
    }
    case OPT_OBJECT:
        *(PyObject **)at = value;
        return 0;
    }
    static const char *const wanted[] = {"a bool", "an int", "an int", "an int",
                                         "a str or None", ""};
    PyErr_Format(PyExc_TypeError, "start: %s must be %s, got %R", f->name, wanted[f->type],
                 value);
    return -1;
}

/* Fills *out from start's dict: every key of start_fields, no other.  -1
 * with TypeError naming a missing or unknown key, or read_option's error. */
static int read_start_values(PyObject *values, start_values *out)
{
    if (!PyDict_Check(values)) {
        PyErr_Format(PyExc_TypeError, "start(values) takes a dict of every option "
                     "(_options.core_start_values), got %R", values);
        return -1;
    }
    size_t count = sizeof start_fields / sizeof start_fields[0];
    for (size_t i = 0; i < count; i++) {
        PyObject *value = PyDict_GetItemString(values, start_fields[i].name);
        if (value == NULL) {
            PyErr_Format(PyExc_TypeError, "start: no value for %s (the C core has no "
                         "defaults: _options.CORE_START has them)", start_fields[i].name);
            return -1;
        }
        if (read_option(&start_fields[i], value, out) != 0)
            return -1;
    }
    if ((size_t)PyDict_GET_SIZE(values) == count)
        return 0;
    PyObject *key = NULL, *value = NULL;
    Py_ssize_t pos = 0;
    while (PyDict_Next(values, &pos, &key, &value)) {
        size_t i = 0;
        while (i < count && !(PyUnicode_Check(key) &&
                              PyUnicode_CompareWithASCIIString(key, start_fields[i].name) == 0))
            i++;
        if (i == count) {
            PyErr_Format(PyExc_TypeError, "start: unknown option %R", key);
            return -1;
        }
    }
    return 0;
}

/* start(values) -> dict: see the method table. */
static PyObject *core_start(PyObject *module, PyObject *values)
{
    (void)module;
    start_values in;
    memset(&in, 0, sizeof in);
    if (read_start_values(values, &in) != 0)
        return NULL;
    if (ls_session_active()) {
        PyErr_SetString(PyExc_RuntimeError,
                        "a loopscope profile is already running: profiles do not nest "
                        "(CUPTI has one owner per process); use loopscope.range() inside it");
        return NULL;
    }
    PyObject *seq = NULL;
    Py_ssize_t n = 0;
    const char **candidates = cupti_paths_of(in.cupti_paths, &seq, &n);
    if (candidates == NULL)
        return NULL;
    ls_session_options options = in.session; /* pm.max_samples 0: sized for a decode period */
    options.zeroed_buffers = 1; /* CUPTI's buffers handed over cleared (issue 11) */
    options.defer = 1;          /* the finish runs on the worker */
    options.cupti_paths = candidates;
    options.cupti_path_count = (size_t)n;
    ls_session_state state;
    uint64_t waited = 0;
    /* The last profile's finish may still run on the worker.  Back to back,
     * the start goes on beside it (issue 27); where it cannot, it waits for
     * it without the GIL (its time is reported as the start's "wait"). */
    if (ls_session_should_wait(&options)) {
        Py_BEGIN_ALLOW_THREADS
        waited = ls_session_wait_for_finish();
        Py_END_ALLOW_THREADS
    }
    int rc = ls_session_active() ? -2 : ls_session_start(&options, waited, &state);
    free(candidates);
    Py_DECREF(seq);
    if (rc == -2) {
        PyErr_SetString(PyExc_RuntimeError, "a loopscope profile was started by another "
                        "thread meanwhile: profiles do not nest");
        return NULL;
    }
    if (rc != 0)
        return PyErr_NoMemory();
    static const char *const clocks[] = {"monotonic", "cupti", "test"};
    return Py_BuildValue("{s:O,s:z,s:O,s:z,s:z,s:s,s:O,s:z}", "tracing",
                         state.tracing ? Py_True : Py_False, "reason",
                         state.reason[0] ? state.reason : NULL, "watching_syncs",
                         state.watching_syncs ? Py_True : Py_False, "syncs_reason",
                         state.syncs_reason[0] ? state.syncs_reason : NULL, "cupti_path",
                         ls_cupti_loaded() ? ls_cupti_path() : NULL, "clock",
                         clocks[ls_clock_mode_now()], "sampling",
                         state.sampling ? Py_True : Py_False, "metrics_reason",
                         state.metrics_reason[0] ? state.metrics_reason : NULL);
}

static PyObject *core_stop(PyObject *module, PyObject *unused)
{
    (void)unused;
    ls_finish *pending = NULL;
    uint64_t cost_ns = 0;
    if (ls_session_stop(&pending, &cost_ns) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "no loopscope profile is running");
        return NULL;
    }
    return ls_capture_new(ls_module_state_of(module)->capture_type, pending, cost_ns);
}

static PyObject *core_active(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyBool_FromLong(ls_session_active());
}

/* range(name) -> Range, one cached object per name (the cache is bounded). */
static PyObject *core_range(PyObject *module, PyObject *name)
{
    ls_module_state *st = ls_module_state_of(module);
    PyObject *cached = PyUnicode_CheckExact(name)
                           ? PyDict_GetItemWithError(st->range_cache, name) : NULL;
    if (cached != NULL)
        return Py_NewRef(cached);
    if (PyErr_Occurred())
        return NULL;
    PyObject *range = ls_range_new(st->range_type, name);
    if (range == NULL)
        return NULL;
    if (!PyUnicode_CheckExact(name)) /* a str subclass: not cached (it may hash oddly) */
        return range;
    if (PyDict_GET_SIZE(st->range_cache) >= LS_RANGE_CACHE_MAX)
        PyDict_Clear(st->range_cache);
    if (PyDict_SetItem(st->range_cache, name, range) != 0) {
        Py_DECREF(range);
        return NULL;
    }
    return range;
}

/* step(name, index) -> StepScope always named `name` with index `index`. */
static PyObject *core_step(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "step(name, index) takes 2 arguments, got %zd", nargs);
        return NULL;
    }
    long index = PyLong_AsLong(args[1]);
    if (index == -1 && PyErr_Occurred())
        return NULL;
    if (index < 0 || index > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "step index must be >= 0, got %ld", index);
        return NULL;
    }
    return ls_step_fixed(ls_module_state_of(module)->step_type, args[0], (int32_t)index);
}

/* call_range(module, site) -> CallRange. */
static PyObject *core_call_range(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "call_range(module, site) takes 2 arguments, got %zd",
                     nargs);
        return NULL;
    }
    ls_module_state *st = ls_module_state_of(module);
    return ls_call_range_new(st->call_range_type, args[0], args[1], st->site_type);
}

static PyObject *core_instrument_mismatches(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyLong_FromUnsignedLongLong(ls_site_mismatch_total());
}

static PyObject *core_now_ns(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyLong_FromUnsignedLongLong(ls_clock_now());
}

/* How long interpreter exit waits for a finish in progress. */
#define LS_SHUTDOWN_TIMEOUT_NS 10000000000ull

static PyObject *core_release_counters(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    if (ls_session_active()) {
        PyErr_SetString(PyExc_RuntimeError, "a profile is running: its stop releases nothing "
                        "it still needs; call this after it");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    ls_worker_shutdown(LS_SHUTDOWN_TIMEOUT_NS);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* The last word at interpreter exit (registered with atexit at import, so
 * it runs after the Python handler and before the handlers of modules
 * imported earlier, torch's among them).  No Python code runs in here, so
 * a Ctrl-C at exit cannot cut it short: it is raised after it returns.  A
 * session still running (the Python handler was interrupted) stops, its
 * records dropped (nobody can read them any more); then the worker
 * finishes what it holds and gives the counters back, and the thread ends
 * (at most LS_SHUTDOWN_TIMEOUT_NS), before CUDA and CUPTI go away.  Does
 * nothing once done; never raises. */
static PyObject *core_at_exit(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    ls_finish *pending = NULL;
    uint64_t cost_ns = 0;
    if (ls_session_active() && ls_session_stop(&pending, &cost_ns) == 0)
        ls_finish_abandon(pending); /* freed by the worker once it ran */
    Py_BEGIN_ALLOW_THREADS
    ls_worker_shutdown(LS_SHUTDOWN_TIMEOUT_NS);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *core_demangle(PyObject *module, PyObject *name)
{
    (void)module;
    Py_ssize_t size = 0;
    const char *text = PyUnicode_AsUTF8AndSize(name, &size);
    if (text == NULL)
        return NULL;
    char *plain = (size_t)size == strlen(text) ? ls_demangle(text) : NULL;
    if (plain == NULL)
        Py_RETURN_NONE;
    PyObject *out = PyUnicode_DecodeUTF8(plain, (Py_ssize_t)strlen(plain), "replace");
    free(plain);
    return out;
}

/* prepare_graphs(cupti_paths) -> None, or the sentence saying why
 * graph-level mode could not be turned on (ls_graphs). */
static PyObject *core_prepare_graphs(PyObject *module, PyObject *paths)
{
    (void)module;
    if (ls_session_active()) {
        PyErr_SetString(PyExc_RuntimeError, "loopscope.prepare() cannot run inside a profile");
        return NULL;
    }
    PyObject *seq = NULL;
    Py_ssize_t n = 0;
    const char **candidates = cupti_paths_of(paths, &seq, &n);
    if (candidates == NULL)
        return NULL;
    char why[1024] = "";
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = ls_graphs_prepare(candidates, (size_t)n, why, sizeof why);
    Py_END_ALLOW_THREADS
    free(candidates);
    Py_DECREF(seq);
    if (rc == 0)
        Py_RETURN_NONE;
    return PyUnicode_FromString(why[0] ? why : "graph-level tracing could not be turned on");
}

static PyObject *core_graphs_prepared(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyBool_FromLong(ls_graphs_prepared());
}

/* cupti_load(candidates) -> dict: loads CUPTI as a profile would (the copy
 * already in the process, else the first usable candidate) and says what
 * it got: {ok, path, version, major, how, pm_missing, error}.  For
 * loopscope.doctor(); a profile loads it the same way at its start. */
static PyObject *core_cupti_load(PyObject *module, PyObject *paths)
{
    (void)module;
    PyObject *seq = NULL;
    Py_ssize_t n = 0;
    const char **candidates = cupti_paths_of(paths, &seq, &n);
    if (candidates == NULL)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = ls_cupti_load(candidates, (size_t)n);
    Py_END_ALLOW_THREADS
    free(candidates);
    Py_DECREF(seq);
    uint32_t version = ls_cupti_version();
    const char *missing = rc == 0 ? ls_cupti_pm_missing() : NULL;
    return Py_BuildValue("{s:O,s:z,s:I,s:i,s:z,s:z,s:z}", "ok", rc == 0 ? Py_True : Py_False,
                         "path", rc == 0 ? ls_cupti_path() : NULL, "version",
                         (unsigned int)version, "major", ls_cupti_version_major(version), "how",
                         rc == 0 ? ls_cupti_how() : NULL, "pm_missing", missing, "error",
                         rc == 0 ? NULL : ls_cupti_error());
}

static PyObject *core_cupti_loaded(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyBool_FromLong(ls_cupti_loaded());
}

static PyObject *core_driver_present(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyBool_FromLong(ls_cuda_driver_present());
}

static PyObject *core_driver_cuda_version(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyLong_FromLong(ls_cuda_driver_version());
}

static PyMethodDef core_methods[] = {
    {"prepare_graphs", core_prepare_graphs, METH_O,
     "prepare_graphs(cupti_paths) -> None, or why graph-level mode could not be turned on."},
    {"cupti_load", core_cupti_load, METH_O,
     "cupti_load(candidates) -> {ok, path, version, major, how, pm_missing, error}: CUPTI "
     "loaded as a profile loads it."},
    {"cupti_loaded", core_cupti_loaded, METH_NOARGS, "True once CUPTI is loaded here."},
    {"driver_present", core_driver_present, METH_NOARGS,
     "True when libcuda.so.1 can be opened (a profile loads CUPTI only then)."},
    {"driver_cuda_version", core_driver_cuda_version, METH_NOARGS,
     "The loaded driver's CUDA version (13000 for 13.0); 0 when no driver is loaded."},
    {"graphs_prepared", core_graphs_prepared, METH_NOARGS,
     "True once graph-level mode is on in this process."},
    {"start", core_start, METH_O,
     "start(values) -> {'tracing', 'reason', 'watching_syncs', 'syncs_reason', 'cupti_path',"
     " 'clock', 'sampling', 'metrics_reason'}.  values: a dict of every option, resolved"
     " (loopscope.live._options.core_start_values: their defaults, ranges and meaning live"
     " there; a missing or unknown key is a TypeError)."},
    {"stop", core_stop, METH_NOARGS,
     "stop() -> Capture: ends the running profile; loopscope's worker thread finishes it, "
     "and the Capture waits for that the first time a result is asked for."},
    {"active", core_active, METH_NOARGS, "True while a profile runs."},
    {"range", core_range, METH_O, "range(name) -> a reusable range context manager."},
    {"step", (PyCFunction)(void (*)(void))core_step, METH_FASTCALL,
     "step(name, index) -> a step always named `name` with index `index` (replays)."},
    {"call_range", (PyCFunction)(void (*)(void))core_call_range, METH_FASTCALL,
     "call_range(module, site) -> CallRange: the module's call wrapped in site's range."},
    {"_instrument_mismatches", core_instrument_mismatches, METH_NOARGS,
     "Layer ranges cut short or left open, every site's since the process started."},
    {"now_ns", core_now_ns, METH_NOARGS, "The profiler clock, in ns."},
    {"demangle", core_demangle, METH_O,
     "demangle(name) -> the demangled C++ name (str), or None when name is not a mangled "
     "C++ name or cannot be demangled."},
    {"_release_counters", core_release_counters, METH_NOARGS,
     "Finishes what loopscope's worker thread has left, gives the GPU's counters back "
     "(sampling stays enabled a few seconds after a profile, for the next one) and ends "
     "the thread; called at interpreter exit."},
    {"_at_exit", core_at_exit, METH_NOARGS,
     "Called by atexit (loopscope registers it at import): stops a profile still running, "
     "finishes what loopscope's worker thread holds, gives the GPU's counters back and ends "
     "the thread.  Runs no Python code (Ctrl-C cannot cut it short); never raises."},
    {"_rows", ls_py_rows, METH_VARARGS,
     "_rows(count, program, exports) -> (rows, exported): the summary's per-step dicts built "
     "row by row from a program of columns (see csrc/python_api/ls_rows.h; loopscope._rows declares "
     "them)."},
    {"_column_stats", ls_py_column_stats, METH_O,
     "_column_stats(column) -> (count, sum, min, max) of a column of int64 or uint64."},
    {"_round", ls_py_round_method, METH_VARARGS,
     "_round(x, digits) -> round(x, digits) as the row programs compute it (for tests)."},
    {"_trace_reader", ls_trace_reader_new, METH_NOARGS, "A new trace reader (see ls_trace_py.c)."},
    {"_trace_feed", (PyCFunction)(void (*)(void))ls_trace_feed, METH_FASTCALL,
     "_trace_feed(reader, data, final): Kineto JSON bytes, in order."},
    {"_trace_add", (PyCFunction)(void (*)(void))ls_trace_add, METH_FASTCALL,
     "_trace_add(reader, kind, rows) -> rows read: table rows (Nsight Systems), or \"device\" "
     "rows of SM figures (any trace)."},
    {"_trace_members", ls_trace_members, METH_O, "{top-level key: raw JSON bytes}."},
    {"_trace_settle", (PyCFunction)(void (*)(void))ls_trace_settle, METH_VARARGS | METH_KEYWORDS,
     "_trace_settle(reader, base_ns, device, own_export=False, span=None)."},
    {"_trace_ranges", ls_trace_ranges, METH_O,
     "[(name, parent, start_ns, end_ns, thread, step mark or -1)]."},
    {"_trace_stats", ls_trace_stats, METH_O, "Counts, skips and their reasons."},
    {"_trace_capture", ls_trace_capture, METH_VARARGS,
     "_trace_capture(reader, step_of, reason, syncs_reason, metrics_reason, note) -> Capture."},
    {NULL, NULL, 0, NULL},
};

/* CallRange subclasses functools.partial, whose size is known only now. */
static int make_call_range_type(PyObject *module, ls_module_state *st)
{
    PyObject *functools = PyImport_ImportModule("functools");
    if (functools == NULL)
        return -1;
    PyObject *partial = PyObject_GetAttrString(functools, "partial");
    Py_DECREF(functools);
    if (partial == NULL)
        return -1;
    if (!PyType_Check(partial) || ((PyTypeObject *)partial)->tp_call == NULL ||
        !PyType_HasFeature((PyTypeObject *)partial, Py_TPFLAGS_HAVE_GC)) {
        PyErr_SetString(PyExc_ImportError, "loopscope: functools.partial is not the C type "
                        "this build expects");
        Py_DECREF(partial);
        return -1;
    }
    ls_call_range_type_spec.basicsize =
        (int)(((PyTypeObject *)partial)->tp_basicsize + (Py_ssize_t)ls_call_range_fields_size());
    PyObject *bases = PyTuple_Pack(1, partial);
    Py_DECREF(partial);
    if (bases == NULL)
        return -1;
    st->call_range_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &ls_call_range_type_spec,
                                                                bases);
    Py_DECREF(bases);
    return st->call_range_type == NULL ? -1 : 0;
}

static int core_exec(PyObject *module)
{
    ls_module_state *st = ls_module_state_of(module);
    st->range_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &ls_range_type_spec, NULL);
    if (st->range_type == NULL)
        return -1;
    st->capture_type =
        (PyTypeObject *)PyType_FromModuleAndSpec(module, &ls_capture_type_spec, NULL);
    if (st->capture_type == NULL)
        return -1;
    st->model_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &ls_model_type_spec, NULL);
    if (st->model_type == NULL)
        return -1;
    st->step_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &ls_step_type_spec, NULL);
    if (st->step_type == NULL)
        return -1;
    st->stepper_type =
        (PyTypeObject *)PyType_FromModuleAndSpec(module, &ls_stepper_type_spec, NULL);
    if (st->stepper_type == NULL)
        return -1;
    st->site_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &ls_site_type_spec, NULL);
    if (st->site_type == NULL)
        return -1;
    if (make_call_range_type(module, st) != 0)
        return -1;
    st->range_cache = PyDict_New();
    if (st->range_cache == NULL)
        return -1;
    if (PyModule_AddObjectRef(module, "Range", (PyObject *)st->range_type) != 0 ||
        PyModule_AddObjectRef(module, "Capture", (PyObject *)st->capture_type) != 0 ||
        PyModule_AddObjectRef(module, "Model", (PyObject *)st->model_type) != 0 ||
        PyModule_AddObjectRef(module, "StepScope", (PyObject *)st->step_type) != 0 ||
        PyModule_AddObjectRef(module, "Stepper", (PyObject *)st->stepper_type) != 0 ||
        PyModule_AddObjectRef(module, "Site", (PyObject *)st->site_type) != 0 ||
        PyModule_AddObjectRef(module, "CallRange", (PyObject *)st->call_range_type) != 0)
        return -1;
    /* the trace readers' bound on one name (ls_kineto.h), for the nsys reader */
    if (PyModule_AddIntConstant(module, "TRACE_MAX_NAME", LS_KINETO_MAX_NAME) != 0 ||
        PyModule_AddIntConstant(module, "TRACE_MAX_UNIT", LS_KINETO_MAX_UNIT) != 0)
        return -1;
    /* the one list of reasons a reader skips a record for its times (ls_tbuild.h) */
    PyObject *reasons = PyTuple_New(LS_TB_TIME_REASONS);
    for (int i = 0; reasons != NULL && i < LS_TB_TIME_REASONS; i++) {
        PyObject *text = PyUnicode_FromString(ls_tb_time_reason_text[i]);
        if (text == NULL)
            Py_CLEAR(reasons);
        else
            PyTuple_SET_ITEM(reasons, i, text);
    }
    int added = reasons != NULL &&
                PyModule_AddObjectRef(module, "TIME_SKIP_REASONS", reasons) == 0;
    Py_XDECREF(reasons);
    if (!added)
        return -1;
    if (PyModule_AddFunctions(module, ls_strict_py_methods) != 0 ||
        PyModule_AddFunctions(module, ls_inject_methods) != 0)
        return -1;
#ifdef LOOPSCOPE_TEST_HOOKS
    if (PyModule_AddFunctions(module, ls_test_hook_methods) != 0)
        return -1;
#endif
    return 0;
}

static int core_traverse(PyObject *module, visitproc visit, void *arg)
{
    ls_module_state *st = ls_module_state_of(module);
    Py_VISIT(st->range_type);
    Py_VISIT(st->capture_type);
    Py_VISIT(st->model_type);
    Py_VISIT(st->step_type);
    Py_VISIT(st->stepper_type);
    Py_VISIT(st->site_type);
    Py_VISIT(st->call_range_type);
    Py_VISIT(st->range_cache);
    return 0;
}

static int core_clear(PyObject *module)
{
    ls_module_state *st = ls_module_state_of(module);
    Py_CLEAR(st->range_type);
    Py_CLEAR(st->capture_type);
    Py_CLEAR(st->model_type);
    Py_CLEAR(st->step_type);
    Py_CLEAR(st->stepper_type);
    Py_CLEAR(st->site_type);
    Py_CLEAR(st->call_range_type);
    Py_CLEAR(st->range_cache);
    return 0;
}

static void core_free(void *module) { core_clear((PyObject *)module); }

static PyModuleDef_Slot core_slots[] = {
    {Py_mod_exec, core_exec},
#ifdef Py_mod_multiple_interpreters
    /* The capture state is process wide (CUPTI is), so one interpreter only. */
    {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_NOT_SUPPORTED},
#endif
    {0, NULL},
};

static struct PyModuleDef ls_module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "loopscope._core",
    .m_doc = "loopscope's C core: CUPTI capture, NVTX ranges, gap analysis.",
    .m_size = sizeof(ls_module_state),
    .m_methods = core_methods,
    .m_slots = core_slots,
    .m_traverse = core_traverse,
    .m_clear = core_clear,
    .m_free = core_free,
};

PyMODINIT_FUNC PyInit__core(void) { return PyModuleDef_Init(&ls_module_def); }
