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

/* start(trace=..., ...) -> dict: see the method table for the keywords. */
static PyObject *core_start(PyObject *module, PyObject *args, PyObject *kwargs)
{
    (void)module;
    static char *keywords[] = {"trace", "driver_api", "buffer_bytes", "max_buffers",
                               "cupti_paths", "warm_up", "syncs", "metrics",
                               "metrics_interval_ns", "metrics_buffer_bytes", "metrics_device",
                               "metrics_decode_ns", "metrics_cache_dir",
                               "metrics_wait_for_start", "callbacks", "own_timestamps",
                               "graph_kernels", NULL};
    /* Warm-up once per process by default (issue 11, H200): with CUPTI's
     * buffers handed over zeroed, step 0's largest gap after the first
     * profile was the same without a warm-up (warm_up_none 96.9 us, once
     * 95.9 us, at every start 84.9 us: noise), while the one at every start
     * cost 0.36-0.42 ms of each enter; the first profile of a process still
     * showed a bubble without one (eager step 0: 206 us none, 114 us once).
     * Back to back, a start goes on beside the last finish (issue 27) and
     * the PM sampler runs on across profiles (issue 43): ls_handover. */
    int trace = 1, driver_api = 0, warm_up = LS_WARM_UP_ONCE, syncs = 1, metrics = 0,
        metrics_device = -1, callbacks = 1, own_timestamps = 1, graph_kernels = 0;
    Py_ssize_t buffer_bytes = 4 << 20, max_buffers = 64, metrics_buffer_bytes = 64 << 20;
    /* Decode every 10 ms while a profile runs (ls_sampler: 20 ms between
     * profiles).  H200, 2026-11-29: a DecodeData call costs ~0.5-0.8 ms a
     * ms of busy SMs since the last one plus ~1-3 ms (ls_sampler.h), so the
     * sampler's thread takes 0.72-0.85 core at 10 ms and is behind at 2 ms,
     * and the tail summary() waits for is one call of 5-8 ms. */
    /* The first profile of a process waits for the sampler's set-up (issue
     * 30: without it a script's one profile read no SM or DRAM at all), at
     * most LS_PM_WAIT_BOUND_NS. */
    int wait_for_start = LS_SAMPLER_WAIT_SETUP;
    unsigned long long interval_ns = 0, decode_ns = 10000000; /* interval 0: automatic */
    PyObject *paths = NULL;
    const char *cache_dir = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|ppnnOippKniKzippp:start", keywords,
                                     &trace, &driver_api, &buffer_bytes, &max_buffers, &paths,
                                     &warm_up, &syncs, &metrics, &interval_ns,
                                     &metrics_buffer_bytes, &metrics_device, &decode_ns,
                                     &cache_dir, &wait_for_start, &callbacks, &own_timestamps,
                                     &graph_kernels))
        return NULL;
    if (wait_for_start < LS_SAMPLER_WAIT_NEVER || wait_for_start > LS_SAMPLER_WAIT_SETUP) {
        PyErr_Format(PyExc_ValueError, "metrics_wait_for_start must be 0 (never), 1 (every "
                     "start) or 2 (when the sampler must be set up), got %d", wait_for_start);
        return NULL;
    }
    if (buffer_bytes < 65536 || max_buffers < 1) {
        PyErr_Format(PyExc_ValueError, "buffer_bytes must be >= 65536 and max_buffers >= 1 "
                     "(got %zd and %zd)", buffer_bytes, max_buffers);
        return NULL;
    }
    if ((interval_ns != 0 && (interval_ns < 1000 || interval_ns > 1000000000ull)) ||
        metrics_buffer_bytes < (1 << 20) ||
        decode_ns < 1000000ull || decode_ns > 10000000000ull) {
        PyErr_Format(PyExc_ValueError, "need 1000 <= metrics_interval_ns <= 1e9 (0: automatic), "
                     "metrics_buffer_bytes >= 1 MiB and 1e6 <= metrics_decode_ns <= 1e10 "
                     "(got %llu, %zd, %llu)", interval_ns, metrics_buffer_bytes, decode_ns);
        return NULL;
    }
    if (warm_up < LS_WARM_UP_NONE || warm_up > LS_WARM_UP_ONCE) {
        PyErr_Format(PyExc_ValueError, "warm_up must be 0 (none), 1 (every start) or 2 (once "
                     "per process), got %d", warm_up);
        return NULL;
    }
    ls_pm_options pm = {metrics_device, interval_ns, (size_t)metrics_buffer_bytes, 0, decode_ns,
                        ""}; /* 0 samples: the image sized for a decode period */
    if (cache_dir != NULL && strlen(cache_dir) >= sizeof pm.cache_dir) {
        PyErr_Format(PyExc_ValueError, "metrics_cache_dir is longer than %zu bytes",
                     sizeof pm.cache_dir - 1);
        return NULL;
    }
    if (cache_dir != NULL)
        snprintf(pm.cache_dir, sizeof pm.cache_dir, "%s", cache_dir);
    if (ls_session_active()) {
        PyErr_SetString(PyExc_RuntimeError,
                        "a loopscope profile is already running: profiles do not nest "
                        "(CUPTI has one owner per process); use loopscope.range() inside it");
        return NULL;
    }
    PyObject *seq = NULL;
    Py_ssize_t n = 0;
    const char **candidates = cupti_paths_of(paths, &seq, &n);
    if (candidates == NULL)
        return NULL;
    ls_session_options options;
    memset(&options, 0, sizeof options);
    options.trace = trace;
    options.syncs = syncs;
    options.driver_api = driver_api;
    options.warm_up = (ls_warm_up)warm_up;
    options.zeroed_buffers = 1; /* CUPTI's buffers handed over cleared (issue 11) */
    options.defer = 1;          /* the finish runs on the worker */
    options.callbacks = callbacks;
    options.graph_kernels = graph_kernels;
    options.buffer_bytes = (size_t)buffer_bytes;
    options.max_buffers = (size_t)max_buffers;
    options.cupti_paths = candidates;
    options.cupti_path_count = (size_t)n;
    options.metrics = metrics;
    options.pm = pm;
    options.pm_wait_for_start = wait_for_start;
    options.own_timestamps = own_timestamps;
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
    {"start", (PyCFunction)(void (*)(void))core_start, METH_VARARGS | METH_KEYWORDS,
     "start(trace=True, driver_api=False, buffer_bytes=4MiB, max_buffers=64, cupti_paths=(),"
     " warm_up=2, syncs=True, metrics=False, metrics_interval_ns=0 (automatic),"
     " metrics_buffer_bytes=64MiB, metrics_device=-1, metrics_decode_ns=10000000,"
     " metrics_cache_dir=None, metrics_wait_for_start=2, callbacks=True, own_timestamps=True,"
     " graph_kernels=False)"
     " -> {'tracing', 'reason', 'watching_syncs', 'syncs_reason', 'cupti_path', 'clock',"
     " 'sampling', 'metrics_reason'}.  warm_up: 0 none, 1 every start, 2 once per process."
     " metrics_wait_for_start: 0 never, 1 always, 2 when sampling does not run."
     " For diagnosis only (LOOPSCOPE_INTERNAL): callbacks (False: activity records only,"
     " the floor of tracing's cost) and own_timestamps (False: whatever timestamp source"
     " another tool left)."},
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
