/* ls_module: the loopscope._core extension module (multi-phase init, module
 * state, heap types).  Python-facing functions return NULL with an exception
 * set on error; the capture path below them never raises. */
#include "ls_module.h"

#include "ls_clock.h"
#include "ls_cupti.h"
#include "ls_finish.h"
#include "ls_sampler.h"
#include "ls_session.h"
#include "ls_worker.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct PyModuleDef ls_module_def;

PyObject *ls_dict_of(int pairs, ...)
{
    va_list ap;
    va_start(ap, pairs);
    PyObject *dict = PyDict_New();
    int failed = dict == NULL;
    for (int i = 0; i < pairs; i++) {
        const char *key = va_arg(ap, const char *);
        PyObject *value = va_arg(ap, PyObject *);
        if (!failed && (value == NULL || PyDict_SetItemString(dict, key, value) != 0))
            failed = 1;
        Py_XDECREF(value);
    }
    va_end(ap);
    if (failed) {
        Py_XDECREF(dict);
        return NULL;
    }
    return dict;
}

ls_module_state *ls_module_get_state(PyObject *module)
{
    return (ls_module_state *)PyModule_GetState(module);
}

/* start(trace=..., ...) -> dict: see the method table for the keywords. */
static PyObject *core_start(PyObject *module, PyObject *args, PyObject *kwargs)
{
    (void)module;
    static char *keywords[] = {"trace", "driver_api", "buffer_bytes", "max_buffers",
                               "cupti_paths", "warm_up", "syncs", "metrics",
                               "metrics_interval_ns", "metrics_buffer_bytes", "metrics_device",
                               "metrics_max_samples", "metrics_decode_ns", "zeroed_buffers",
                               "defer", "metrics_cache_dir", "metrics_keep_ns",
                               "metrics_keep_running_ns", "metrics_wait_for_start",
                               "callbacks", NULL};
    int trace = 1, driver_api = 0, warm_up = LS_WARM_UP_EVERY, syncs = 1, metrics = 0,
        metrics_device = -1, zeroed = 1, defer = 1, wait_for_start = 0, callbacks = 1;
    Py_ssize_t buffer_bytes = 4 << 20, max_buffers = 64, metrics_buffer_bytes = 64 << 20;
    unsigned long long interval_ns = 100000, decode_ns = 10000000;
    unsigned long long keep_ns = 3000000000ull, keep_running_ns = 0;
    unsigned int max_samples = 0; /* 0: sized for the decode period */
    PyObject *paths = NULL;
    const char *cache_dir = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|ppnnOippKniIKppzKKpp:start", keywords,
                                     &trace, &driver_api, &buffer_bytes, &max_buffers, &paths,
                                     &warm_up, &syncs, &metrics, &interval_ns,
                                     &metrics_buffer_bytes, &metrics_device, &max_samples,
                                     &decode_ns, &zeroed, &defer, &cache_dir, &keep_ns,
                                     &keep_running_ns, &wait_for_start, &callbacks))
        return NULL;
    if (buffer_bytes < 65536 || max_buffers < 1) {
        PyErr_Format(PyExc_ValueError, "buffer_bytes must be >= 65536 and max_buffers >= 1 "
                     "(got %zd and %zd)", buffer_bytes, max_buffers);
        return NULL;
    }
    if (interval_ns < 1000 || interval_ns > 1000000000ull || metrics_buffer_bytes < (1 << 20) ||
        (max_samples != 0 && max_samples < 16) || decode_ns < 1000000ull ||
        decode_ns > 10000000000ull) {
        PyErr_Format(PyExc_ValueError, "need 1000 <= metrics_interval_ns <= 1e9, "
                     "metrics_buffer_bytes >= 1 MiB, metrics_max_samples 0 (auto) or >= 16 "
                     "and 1e6 <= metrics_decode_ns <= 1e10 (got %llu, %zd, %u, %llu)",
                     interval_ns, metrics_buffer_bytes, max_samples, decode_ns);
        return NULL;
    }
    if (warm_up < LS_WARM_UP_NONE || warm_up > LS_WARM_UP_ONCE) {
        PyErr_Format(PyExc_ValueError, "warm_up must be 0 (none), 1 (every start) or 2 (once "
                     "per process), got %d", warm_up);
        return NULL;
    }
    ls_pm_options pm = {metrics_device, interval_ns, (size_t)metrics_buffer_bytes, max_samples,
                        decode_ns, ""};
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
    PyObject *seq = (paths != NULL && paths != Py_None)
                        ? PySequence_Fast(paths, "cupti_paths must be a sequence of str")
                        : PyTuple_New(0);
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    const char **candidates = calloc((size_t)(n ? n : 1), sizeof *candidates);
    if (candidates == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        candidates[i] = PyUnicode_Check(item) ? PyUnicode_AsUTF8(item) : NULL;
        if (candidates[i] == NULL) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "cupti_paths[%zd] must be a str", i);
            free(candidates);
            Py_DECREF(seq);
            return NULL;
        }
    }
    ls_session_options options;
    memset(&options, 0, sizeof options);
    options.trace = trace;
    options.syncs = syncs;
    options.driver_api = driver_api;
    options.warm_up = (ls_warm_up)warm_up;
    options.zeroed_buffers = zeroed;
    options.defer = defer;
    options.callbacks = callbacks;
    options.buffer_bytes = (size_t)buffer_bytes;
    options.max_buffers = (size_t)max_buffers;
    options.cupti_paths = candidates;
    options.cupti_path_count = (size_t)n;
    options.metrics = metrics;
    options.pm = pm;
    options.pm_keep_ns = keep_ns;
    options.pm_keep_running_ns = keep_running_ns;
    options.pm_wait_for_start = wait_for_start;
    ls_session_state state;
    uint64_t waited = 0;
    /* The last profile's finish may still run on the worker: wait for it
     * without the GIL (its time is reported as the start's "wait"). */
    Py_BEGIN_ALLOW_THREADS
    waited = ls_session_wait_for_finish();
    Py_END_ALLOW_THREADS
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
    return ls_capture_new(ls_module_get_state(module)->capture_type, pending, cost_ns);
}

static PyObject *core_active(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyBool_FromLong(ls_session_active());
}

/* range(name) -> Range, one cached object per name. */
static PyObject *core_range(PyObject *module, PyObject *name)
{
    ls_module_state *st = ls_module_get_state(module);
    PyObject *cached = PyUnicode_Check(name) ? PyDict_GetItemWithError(st->range_cache, name)
                                             : NULL;
    if (cached != NULL)
        return Py_NewRef(cached);
    if (PyErr_Occurred())
        return NULL;
    PyObject *range = ls_range_new(st->range_type, name, -1);
    if (range == NULL)
        return NULL;
    if (PyDict_SetItem(st->range_cache, name, range) != 0) {
        Py_DECREF(range);
        return NULL;
    }
    return range;
}

/* step(name, index) -> Range flagged as step `index`. */
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
    return ls_range_new(ls_module_get_state(module)->range_type, args[0], (int32_t)index);
}

static PyObject *core_now_ns(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyLong_FromUnsignedLongLong(ls_clock_now());
}

static PyObject *core_set_test_clock(PyObject *module, PyObject *args)
{
    (void)module;
    unsigned long long start = 0, tick = 0;
    if (!PyArg_ParseTuple(args, "KK:_set_test_clock", &start, &tick))
        return NULL;
    ls_clock_set_test(start, tick);
    Py_RETURN_NONE;
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

static void probe_tick(void) {}

/* _decoder_probe(period_ns, run_ns, keep_ns=-1) -> (ticks, stop_ns, state):
 * runs loopscope's worker thread alone, ticking every period_ns (without a
 * profile its ticks do nothing) for run_ns, and stops the ticks, timing
 * that; then ends the thread, or with keep_ns >= 0 leaves it to release
 * the sampler after keep_ns.  The thread's life cycle, without a GPU. */
static PyObject *core_decoder_probe(PyObject *module, PyObject *args)
{
    (void)module;
    unsigned long long period_ns, run_ns;
    long long keep_ns = -1;
    if (!PyArg_ParseTuple(args, "KK|L:_decoder_probe", &period_ns, &run_ns, &keep_ns))
        return NULL;
    if (ls_session_active()) {
        PyErr_SetString(PyExc_RuntimeError, "_decoder_probe needs no profile running");
        return NULL;
    }
    uint64_t stop_ns = 0;
    Py_BEGIN_ALLOW_THREADS
    ls_worker_when_idle(NULL, 0); /* a new run holds the sampler: no release meanwhile */
    ls_worker_set_tick(probe_tick, period_ns);
    struct timespec pause = {(time_t)(run_ns / 1000000000ull), (long)(run_ns % 1000000000ull)};
    nanosleep(&pause, NULL);
    uint64_t t0 = ls_clock_monotonic_ns();
    ls_worker_set_tick(NULL, 0);
    ls_worker_wait_idle();
    stop_ns = ls_clock_monotonic_ns() - t0;
    if (keep_ns >= 0)
        ls_worker_when_idle(ls_sampler_release, (uint64_t)keep_ns);
    else
        ls_worker_shutdown(LS_SHUTDOWN_TIMEOUT_NS);
    Py_END_ALLOW_THREADS
    return Py_BuildValue("KKs", (unsigned long long)ls_worker_ticks(),
                         (unsigned long long)stop_ns, ls_worker_state());
}

static PyObject *core_decoder_state(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyUnicode_FromString(ls_worker_state());
}

static PyMethodDef core_methods[] = {
    {"start", (PyCFunction)(void (*)(void))core_start, METH_VARARGS | METH_KEYWORDS,
     "start(trace=True, driver_api=False, buffer_bytes=4MiB, max_buffers=64, cupti_paths=(),"
     " warm_up=1, syncs=True, metrics=False, metrics_interval_ns=100000,"
     " metrics_buffer_bytes=64MiB, metrics_device=-1, metrics_max_samples=0 (auto),"
     " metrics_decode_ns=10000000, zeroed_buffers=True, defer=True, metrics_cache_dir=None,"
     " metrics_keep_ns=3e9, metrics_keep_running_ns=0, metrics_wait_for_start=False,"
     " callbacks=True)"
     " -> {'tracing', 'reason', 'watching_syncs', 'syncs_reason', 'cupti_path', 'clock',"
     " 'sampling', 'metrics_reason'}.  warm_up: 0 none, 1 every start, 2 once per process."
     " Internal switches (compared by benchmarks/overhead_options.py): zeroed_buffers (hand"
     " CUPTI cleared activity buffers), defer (finish on the worker thread, not in stop),"
     " metrics_keep_running_ns (sampling keeps running that long after a profile),"
     " metrics_wait_for_start (start waits for the sampler's set-up and start), callbacks"
     " (False: activity records only, the floor of tracing's cost)."},
    {"stop", core_stop, METH_NOARGS,
     "stop() -> Capture: ends the running profile; loopscope's worker thread finishes it, "
     "and the Capture waits for that the first time a result is asked for."},
    {"active", core_active, METH_NOARGS, "True while a profile runs."},
    {"range", core_range, METH_O, "range(name) -> a reusable range context manager."},
    {"step", (PyCFunction)(void (*)(void))core_step, METH_FASTCALL,
     "step(name, index) -> a step range context manager."},
    {"now_ns", core_now_ns, METH_NOARGS, "The profiler clock, in ns."},
    {"_inject", (PyCFunction)(void (*)(void))ls_inject, METH_FASTCALL,
     "_inject(kind, records): test hook, appends synthetic records to the running profile."},
    {"_inject_calls", (PyCFunction)(void (*)(void))ls_inject_calls, METH_VARARGS | METH_KEYWORDS,
     "_inject_calls(calls, release_gil=True): test hook; each call (api, duration_ns"
     "[, correlation_id[, function_param]]) goes through the real switchboard, enter then exit,"
     " from this thread with its Python stack; returns their tokens (0: not a blocking call)."},
    {"_strict_arm", ls_strict_arm_py, METH_VARARGS,
     "_strict_arm(handler, on_main_thread): strict mode on for this thread; handler(token)"
     " runs with the GIL when control is back in Python after a wait."},
    {"_strict_disarm", ls_strict_disarm_py, METH_NOARGS,
     "_strict_disarm() -> token of a wait noted but not handled (0 if none)."},
    {"_live_call", ls_live_call, METH_O,
     "_live_call(token) -> dict of a blocking call of the running profile, or None."},
    {"_release_counters", core_release_counters, METH_NOARGS,
     "Finishes what loopscope's worker thread has left, gives the GPU's counters back "
     "(sampling stays enabled a few seconds after a profile, for the next one) and ends "
     "the thread; called at interpreter exit."},
    {"_decoder_probe", core_decoder_probe, METH_VARARGS,
     "_decoder_probe(period_ns, run_ns, keep_ns=-1) -> (ticks, stop_ns, state): test hook "
     "for the worker thread's ticks."},
    {"_settle_samples", ls_settle_samples_py, METH_VARARGS,
     "_settle_samples(spans, max_span_ns, started_ns, stopped_ns, tolerance_ns) -> (spans, "
     "partial, delta_ns, shift_ns): test hook for placing PM samples on the activity clock."},
    {"_decoder_state", core_decoder_state, METH_NOARGS,
     "_decoder_state() -> 'none', 'ticking', 'parked', 'idle', 'busy' or 'ended': the "
     "worker thread's state, test hook."},
    {"_fake_samples", ls_fake_samples_py, METH_VARARGS,
     "_fake_samples(samples, per_tick=1, interval_ns=100000): test hook; synthetic PM "
     "samples (start_ns, end_ns, {figure: value}) stand in for CUPTI's in the next "
     "profiles with metrics=True (each worker tick hands over per_tick of them, the "
     "finish the rest); an empty list removes them."},
    {"_finish_delay", ls_finish_delay_py, METH_O,
     "_finish_delay(ns): test hook; every profile's finish waits ns on the worker thread "
     "first, and goes to the worker even when nothing needs it (0: off)."},
    {"_capture_pending", ls_capture_pending_py, METH_O,
     "_capture_pending(capture) -> bool: test hook; True while the worker has not "
     "finished the capture (asks without waiting)."},
    {"_pmcache", (PyCFunction)(void (*)(void))ls_pmcache_py, METH_VARARGS | METH_KEYWORDS,
     "_pmcache(op, folder, chip, names, cupti_version, availability, kept=None, image=None):"
     " test hook over the PM config cache files; op 'store' -> path, 'load' -> (found, "
     "kept, image, note), 'path' -> path."},
    {"_set_test_clock", core_set_test_clock, METH_VARARGS,
     "_set_test_clock(start_ns, tick_ns): test hook, a scripted clock (tick 0: off)."},
    {NULL, NULL, 0, NULL},
};

static int core_exec(PyObject *module)
{
    ls_module_state *st = ls_module_get_state(module);
    st->range_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &ls_range_type_spec, NULL);
    if (st->range_type == NULL)
        return -1;
    st->capture_type =
        (PyTypeObject *)PyType_FromModuleAndSpec(module, &ls_capture_type_spec, NULL);
    if (st->capture_type == NULL)
        return -1;
    st->range_cache = PyDict_New();
    if (st->range_cache == NULL)
        return -1;
    if (PyModule_AddObjectRef(module, "Range", (PyObject *)st->range_type) != 0 ||
        PyModule_AddObjectRef(module, "Capture", (PyObject *)st->capture_type) != 0)
        return -1;
    return 0;
}

static int core_traverse(PyObject *module, visitproc visit, void *arg)
{
    ls_module_state *st = ls_module_get_state(module);
    Py_VISIT(st->range_type);
    Py_VISIT(st->capture_type);
    Py_VISIT(st->range_cache);
    return 0;
}

static int core_clear(PyObject *module)
{
    ls_module_state *st = ls_module_get_state(module);
    Py_CLEAR(st->range_type);
    Py_CLEAR(st->capture_type);
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
