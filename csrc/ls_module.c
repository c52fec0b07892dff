/* ls_module: the loopscope._core extension module (multi-phase init, module
 * state, heap types), and its public functions: start, stop, ranges and
 * steps, the clock.  Strict mode's functions come from ls_strict_py, the
 * test hooks from ls_test_hooks.  Python-facing functions return NULL with
 * an exception set on error; the capture path below them never raises. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "ls_capture_type.h"
#include "ls_clock.h"
#include "ls_cupti.h"
#include "ls_demangle.h"
#include "ls_model_type.h"
#include "ls_module_state.h"
#include "ls_pmdecoder.h"
#include "ls_range_type.h"
#include "ls_session.h"
#include "ls_strict_py.h"
#include "ls_test_hooks.h"
#include "ls_trace_py.h"

#include <stdlib.h>
#include <string.h>

static struct PyModuleDef ls_module_def;

/* start(trace, driver_api, buffer_bytes, max_buffers, cupti_paths) -> dict */
static PyObject *core_start(PyObject *module, PyObject *args, PyObject *kwargs)
{
    (void)module;
    static char *keywords[] = {"trace", "driver_api", "buffer_bytes", "max_buffers",
                               "cupti_paths", "warm_up", "syncs", "metrics",
                               "metrics_interval_ns", "metrics_buffer_bytes", "metrics_device",
                               "metrics_max_samples", "metrics_decode_ns", NULL};
    int trace = 1, driver_api = 0, warm_up = 1, syncs = 1, metrics = 0, metrics_device = -1;
    Py_ssize_t buffer_bytes = 4 << 20, max_buffers = 64, metrics_buffer_bytes = 64 << 20;
    unsigned long long interval_ns = 100000, decode_ns = 10000000;
    unsigned int max_samples = 0; /* 0: sized for the decode period */
    PyObject *paths = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|ppnnOpppKniIK:start", keywords, &trace,
                                     &driver_api, &buffer_bytes, &max_buffers, &paths,
                                     &warm_up, &syncs, &metrics, &interval_ns,
                                     &metrics_buffer_bytes, &metrics_device, &max_samples,
                                     &decode_ns))
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
    ls_session_options options = {trace, syncs, driver_api, warm_up, (size_t)buffer_bytes,
                                  (size_t)max_buffers, candidates, (size_t)n, metrics,
                                  {metrics_device, interval_ns, (size_t)metrics_buffer_bytes,
                                   max_samples, decode_ns}};
    ls_session_state state;
    int rc = ls_session_start(&options, &state);
    free(candidates);
    Py_DECREF(seq);
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
    ls_capture capture;
    if (ls_session_stop(&capture) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "no loopscope profile is running");
        return NULL;
    }
    return ls_capture_new(ls_module_state_of(module)->capture_type, &capture);
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
    ls_module_state *st = ls_module_state_of(module);
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
    return ls_range_new(ls_module_state_of(module)->range_type, args[0], (int32_t)index);
}

static PyObject *core_now_ns(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyLong_FromUnsignedLongLong(ls_clock_now());
}

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
    ls_pmdecoder_shutdown();
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

static PyMethodDef core_methods[] = {
    {"start", (PyCFunction)(void (*)(void))core_start, METH_VARARGS | METH_KEYWORDS,
     "start(trace=True, driver_api=False, buffer_bytes=4MiB, max_buffers=64, cupti_paths=(),"
     " warm_up=True, syncs=True, metrics=False, metrics_interval_ns=100000,"
     " metrics_buffer_bytes=64MiB, metrics_device=-1, metrics_max_samples=0 (auto),"
     " metrics_decode_ns=10000000) -> {'tracing', 'reason', 'watching_syncs', 'syncs_reason',"
     " 'cupti_path', 'clock', 'sampling', 'metrics_reason'}"},
    {"stop", core_stop, METH_NOARGS, "stop() -> Capture: ends the running profile."},
    {"active", core_active, METH_NOARGS, "True while a profile runs."},
    {"range", core_range, METH_O, "range(name) -> a reusable range context manager."},
    {"step", (PyCFunction)(void (*)(void))core_step, METH_FASTCALL,
     "step(name, index) -> a step range context manager."},
    {"now_ns", core_now_ns, METH_NOARGS, "The profiler clock, in ns."},
    {"demangle", core_demangle, METH_O,
     "demangle(name) -> the demangled C++ name (str), or None when name is not a mangled "
     "C++ name or cannot be demangled."},
    {"_release_counters", core_release_counters, METH_NOARGS,
     "Gives the GPU's counters back now (sampling stays enabled a few seconds after a "
     "profile, for the next one); called at interpreter exit."},
    {"_trace_reader", ls_trace_reader_new, METH_NOARGS, "A new trace reader (see ls_trace_py.c)."},
    {"_trace_feed", (PyCFunction)(void (*)(void))ls_trace_feed, METH_FASTCALL,
     "_trace_feed(reader, data, final): Kineto JSON bytes, in order."},
    {"_trace_add", (PyCFunction)(void (*)(void))ls_trace_add, METH_FASTCALL,
     "_trace_add(reader, kind, rows) -> rows read: table rows (Nsight Systems)."},
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
    st->range_cache = PyDict_New();
    if (st->range_cache == NULL)
        return -1;
    if (PyModule_AddObjectRef(module, "Range", (PyObject *)st->range_type) != 0 ||
        PyModule_AddObjectRef(module, "Capture", (PyObject *)st->capture_type) != 0 ||
        PyModule_AddObjectRef(module, "Model", (PyObject *)st->model_type) != 0)
        return -1;
    if (PyModule_AddFunctions(module, ls_strict_py_methods) != 0 ||
        PyModule_AddFunctions(module, ls_test_hook_methods) != 0)
        return -1;
    return 0;
}

static int core_traverse(PyObject *module, visitproc visit, void *arg)
{
    ls_module_state *st = ls_module_state_of(module);
    Py_VISIT(st->range_type);
    Py_VISIT(st->capture_type);
    Py_VISIT(st->model_type);
    Py_VISIT(st->range_cache);
    return 0;
}

static int core_clear(PyObject *module)
{
    ls_module_state *st = ls_module_state_of(module);
    Py_CLEAR(st->range_type);
    Py_CLEAR(st->capture_type);
    Py_CLEAR(st->model_type);
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
