/* ls_test_hooks: the test hooks of loopscope._core, all in one place, each
 * named with a leading underscore, compiled only into a test build
 * (LOOPSCOPE_TEST_HOOKS=1; loopscope._testhooks re-exports them).  They feed
 * fake API calls and fake PM samples to the running session, drive
 * loopscope's worker thread, the hand-over of a profile's finish, the PM
 * config cache and the sample placement without a GPU, and show the name
 * table and range stack, so the analysis and everything above it is tested
 * with exact answers.  Synthetic records and the scripted clock (_inject,
 * _set_test_clock) are the product's, in ls_inject: a recording's replay
 * needs them.  Bad input raises TypeError/ValueError naming the argument. */
#include "ls_test_hooks.h"

#include "ls_activity.h"
#include "ls_capture_type.h"
#include "ls_cbids.h"
#include "ls_clock.h"
#include "ls_finish.h"
#include "ls_ids.h"
#include "ls_launches.h"
#include "ls_module_state.h"
#include "ls_names.h"
#include "ls_owncalls.h"
#include "ls_nvtx.h"
#include "ls_pmavail.h"
#include "ls_pmcache.h"
#include "ls_pmsampling.h"
#include "ls_pystack.h"
#include "ls_metric_choice.h"
#include "ls_metrics.h"
#include "ls_pyvalues.h"
#include "ls_radix.h"
#include "ls_rangestack.h"
#include "ls_sampler.h"
#include "ls_samples.h"
#include "ls_session.h"
#include "ls_subscriber.h"
#include "ls_switchboard.h"
#include "ls_worker.h"

#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* _sample_wanted(start, end, window_start, window_stop) -> overlaps, and
 * _sample_clock_offset(first_start, started, tolerance) -> offset: the PM
 * sampler's rules for a decoded sample. */
static PyObject *sample_wanted(PyObject *module, PyObject *args)
{
    (void)module;
    unsigned long long start, end, window_start, window_stop;
    if (!PyArg_ParseTuple(args, "KKKK:_sample_wanted", &start, &end, &window_start, &window_stop))
        return NULL;
    return PyBool_FromLong(ls_sample_overlaps(start, end, window_start, window_stop));
}

static PyObject *sample_clock_offset(PyObject *module, PyObject *args)
{
    (void)module;
    unsigned long long first_start, started, tolerance;
    if (!PyArg_ParseTuple(args, "KKK:_sample_clock_offset", &first_start, &started, &tolerance))
        return NULL;
    return PyLong_FromLongLong(ls_sample_clock_offset(first_start, started, tolerance));
}

static PyObject *activity_back_to_back(PyObject *module, PyObject *args)
{
    (void)module;
    unsigned long long stop_began, now;
    if (!PyArg_ParseTuple(args, "KK:_activity_back_to_back", &stop_began, &now))
        return NULL;
    return PyBool_FromLong(ls_activity_back_to_back(stop_began, now));
}

static PyObject *settle_samples(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *spans;
    unsigned long long max_span, started, stopped, tolerance, window_start = ULLONG_MAX;
    if (!PyArg_ParseTuple(args, "OKKKK|K:_settle_samples", &spans, &max_span, &started, &stopped,
                          &tolerance, &window_start))
        return NULL;
    if (window_start == ULLONG_MAX)
        window_start = started; /* the profile began where its sampling did */
    PyObject *seq = PySequence_Fast(spans, "spans must be a sequence of (start_ns, end_ns)");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    ls_sample *samples = calloc((size_t)(n ? n : 1), sizeof *samples);
    if (samples == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned long long start, end;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "KK", &start, &end) ||
            end < start) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "spans[%zd]: end before start", i);
            free(samples);
            Py_DECREF(seq);
            return NULL;
        }
        samples[i].start_ns = start;
        samples[i].end_ns = end;
    }
    Py_DECREF(seq);
    ls_samples_sort(samples, (size_t)n);
    ls_settle_result r;
    size_t kept = ls_samples_settle(samples, (size_t)n, max_span, window_start, started, stopped,
                                    tolerance, &r);
    PyObject *out = PyList_New((Py_ssize_t)kept);
    for (size_t i = 0; out != NULL && i < kept; i++) {
        PyObject *pair = Py_BuildValue("KK", (unsigned long long)samples[i].start_ns,
                                       (unsigned long long)samples[i].end_ns);
        if (pair == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, (Py_ssize_t)i, pair);
    }
    free(samples);
    if (out == NULL)
        return NULL;
    return Py_BuildValue("NnnLO", out, (Py_ssize_t)r.partial, (Py_ssize_t)r.ended_before,
                         (long long)r.delta_ns, r.outside ? Py_True : Py_False);
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
                     "loopscope listens to (see csrc/common/ls_cbids.c)", i, api);
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
static PyObject *inject_calls(PyObject *module, PyObject *args, PyObject *kwargs)
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
        PyObject *t = ls_py_u64(fakes[i].token);
        if (t == NULL)
            Py_CLEAR(tokens);
        else
            PyList_SET_ITEM(tokens, i, t);
    }
    PyMem_Free(fakes);
    return tokens;
}

/* _fake_context_created(): CUPTI's resource callback for a new CUDA context,
 * through the switchboard, as a CUDA call of this thread would make it. */
static PyObject *fake_context_created(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    CUpti_ResourceData data;
    memset(&data, 0, sizeof data);
    data.context = (CUcontext)(uintptr_t)0x1;
    ls_switchboard_callback(NULL, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED,
                            &data);
    Py_RETURN_NONE;
}

/* _locate_as(code, byte_offset, as_code): the source position a frame of
 * `code` at `byte_offset` gets, (line, col, end_line, end_col), kept under
 * as_code's address, as if `code` had been made where as_code is (a code
 * object dropped and another made at its address); None where there is
 * none. */
static PyObject *locate_as(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *code, *as_code;
    int byte_offset;
    if (!PyArg_ParseTuple(args, "O!iO!:_locate_as", &PyCode_Type, &code, &byte_offset,
                          &PyCode_Type, &as_code))
        return NULL;
    PyObject *bytecode = PyObject_GetAttrString(code, "co_code");
    if (bytecode == NULL)
        return NULL;
    Py_ssize_t nbytes = PyBytes_Check(bytecode) ? PyBytes_GET_SIZE(bytecode) : 0;
    Py_DECREF(bytecode);
    if (byte_offset < 0 || byte_offset >= nbytes) {
        PyErr_Format(PyExc_ValueError, "_locate_as: byte_offset %d is outside the code's %zd bytes",
                     byte_offset, nbytes);
        return NULL;
    }
    int at[4];
    if (!ls_pystack_locate_as(as_code, code, byte_offset, at))
        Py_RETURN_NONE;
    return Py_BuildValue("(iiii)", at[0], at[1], at[2], at[3]);
}

/* How long a probe waits for the worker thread to end. */
#define LS_PROBE_SHUTDOWN_NS 10000000000ull

static void probe_tick(void) {}

/* What the sampler's idle release does, for a probe with no sampler. */
static void probe_release(void) { ls_sampler_release(); }

/* _decoder_probe(period_ns, run_ns, keep_ns=-1) -> (ticks, stop_ns, state):
 * runs loopscope's worker thread alone, ticking every period_ns (without a
 * profile its ticks do nothing) for run_ns, and stops the ticks, timing
 * that; then ends the thread, or with keep_ns >= 0 leaves it to release
 * the sampler after keep_ns.  The thread's life cycle, without a GPU. */
static PyObject *decoder_probe(PyObject *module, PyObject *args)
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
        ls_worker_when_idle(probe_release, (uint64_t)keep_ns);
    else
        ls_worker_shutdown(LS_PROBE_SHUTDOWN_NS);
    Py_END_ALLOW_THREADS
    return Py_BuildValue("KKs", (unsigned long long)ls_worker_ticks(),
                         (unsigned long long)stop_ns, ls_worker_state());
}

#define LS_TICK_STARTS_MAX 64

static struct {
    uint64_t cost_ns;
    atomic_size_t count;
    uint64_t at[LS_TICK_STARTS_MAX];
} slow_ticks; /* written by the worker's tick, read once the ticks stopped */

static void slow_tick(void)
{
    size_t i = atomic_load(&slow_ticks.count);
    if (i < LS_TICK_STARTS_MAX) {
        slow_ticks.at[i] = ls_clock_monotonic_ns();
        atomic_store(&slow_ticks.count, i + 1);
    }
    struct timespec pause = {(time_t)(slow_ticks.cost_ns / 1000000000ull),
                             (long)(slow_ticks.cost_ns % 1000000000ull)};
    nanosleep(&pause, NULL);
}

/* _tick_starts(period_ns, cost_ns, ticks) -> [ns, ...]: runs the worker's
 * ticks alone, each taking cost_ns (a decode that falls behind when cost_ns
 * exceeds period_ns), until `ticks` have begun (at most 64); returns when
 * each began (monotonic clock) and ends the thread. */
static PyObject *tick_starts(PyObject *module, PyObject *args)
{
    (void)module;
    unsigned long long period_ns, cost_ns;
    Py_ssize_t want;
    if (!PyArg_ParseTuple(args, "KKn:_tick_starts", &period_ns, &cost_ns, &want))
        return NULL;
    if (ls_session_active()) {
        PyErr_SetString(PyExc_RuntimeError, "_tick_starts needs no profile running");
        return NULL;
    }
    if (want < 1 || want > LS_TICK_STARTS_MAX) {
        PyErr_Format(PyExc_ValueError, "_tick_starts: ticks must be 1-%d", LS_TICK_STARTS_MAX);
        return NULL;
    }
    ls_worker_wait_idle();
    memset(slow_ticks.at, 0, sizeof slow_ticks.at);
    atomic_store(&slow_ticks.count, 0);
    slow_ticks.cost_ns = cost_ns;
    Py_BEGIN_ALLOW_THREADS
    ls_worker_when_idle(NULL, 0);
    ls_worker_set_tick(slow_tick, period_ns);
    struct timespec poll = {0, 1000000};
    uint64_t give_up = ls_clock_monotonic_ns() + 60000000000ull;
    while (atomic_load(&slow_ticks.count) < (size_t)want && ls_clock_monotonic_ns() < give_up)
        nanosleep(&poll, NULL);
    ls_worker_set_tick(NULL, 0);
    ls_worker_wait_idle();
    ls_worker_shutdown(LS_PROBE_SHUTDOWN_NS);
    Py_END_ALLOW_THREADS
    PyObject *out = PyList_New(0);
    size_t have = atomic_load(&slow_ticks.count);
    for (size_t i = 0; out != NULL && i < have && i < (size_t)want; i++) {
        PyObject *t = PyLong_FromUnsignedLongLong(slow_ticks.at[i]);
        if (t == NULL || PyList_Append(out, t) != 0)
            Py_CLEAR(out);
        Py_XDECREF(t);
    }
    return out;
}

static void noop_task(ls_task *task) { (void)task; }

/* _beside_decode(decode_ns) -> (task_ns, wait_idle_ns, ticks): with the sampler's
 * tick in a decode of decode_ns, how long a task posted to the worker (a
 * profile's finish) takes to run, and how long ls_worker_wait_idle (a
 * start's wait for the finishes) takes. */
static PyObject *beside_decode(PyObject *module, PyObject *args)
{
    (void)module;
    unsigned long long decode_ns;
    if (!PyArg_ParseTuple(args, "K:_beside_decode", &decode_ns))
        return NULL;
    if (ls_session_active()) {
        PyErr_SetString(PyExc_RuntimeError, "_beside_decode needs no profile running");
        return NULL;
    }
    ls_worker_wait_idle();
    memset(slow_ticks.at, 0, sizeof slow_ticks.at);
    atomic_store(&slow_ticks.count, 0);
    slow_ticks.cost_ns = decode_ns;
    uint64_t task_ns = 0, idle_ns = 0;
    Py_BEGIN_ALLOW_THREADS
    ls_worker_when_idle(NULL, 0);
    ls_worker_set_tick_in(LS_TICK_SAMPLER, slow_tick, 1000000000ull);
    ls_worker_retime_tick(LS_TICK_SAMPLER, 1000000000ull, 1);
    struct timespec poll = {0, 100000};
    uint64_t give_up = ls_clock_monotonic_ns() + 10000000000ull;
    while (atomic_load(&slow_ticks.count) == 0 && ls_clock_monotonic_ns() < give_up)
        nanosleep(&poll, NULL);
    static ls_task task;
    memset(&task, 0, sizeof task);
    task.run = noop_task;
    char why[200];
    uint64_t t0 = ls_clock_monotonic_ns();
    if (ls_worker_post(&task, why, sizeof why) == 0) {
        ls_worker_hold(&task);
        ls_worker_wait(&task);
    }
    task_ns = ls_clock_monotonic_ns() - t0;
    t0 = ls_clock_monotonic_ns();
    ls_worker_wait_idle();
    idle_ns = ls_clock_monotonic_ns() - t0;
    ls_worker_set_tick_in(LS_TICK_SAMPLER, NULL, 0);
    ls_worker_wait_tick(LS_TICK_SAMPLER);
    ls_worker_shutdown(LS_PROBE_SHUTDOWN_NS);
    Py_END_ALLOW_THREADS
    return Py_BuildValue("KKn", (unsigned long long)task_ns, (unsigned long long)idle_ns,
                         (Py_ssize_t)atomic_load(&slow_ticks.count));
}

/* _sampler_state() -> (state, live windows): the PM sampler's life
 * ("off", "starting", "running", "stopped") and its windows in use. */
static PyObject *sampler_state(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    int live = 0;
    const char *state = ls_sampler_state(&live);
    return Py_BuildValue("si", state, live);
}

/* _sampler_keep(keep_running_ns, keep_ns, wait_bound_ns=0, decode_ns=0,
 * overflows=0, tail_cap=0): the sampler's idle times and an open's wait bound
 * (0: the defaults); each test-source decode's host time and overflows; the
 * most samples a finish's tail reads (0: all). */
static PyObject *sampler_keep(PyObject *module, PyObject *args)
{
    (void)module;
    unsigned long long keep_running_ns, keep_ns, wait_bound_ns = 0, decode_ns = 0, overflows = 0,
                       tail_cap = 0;
    if (!PyArg_ParseTuple(args, "KK|KKKK:_sampler_keep", &keep_running_ns, &keep_ns,
                          &wait_bound_ns, &decode_ns, &overflows, &tail_cap))
        return NULL;
    ls_sampler_set_keep(keep_running_ns, keep_ns, wait_bound_ns, decode_ns, overflows, tail_cap);
    Py_RETURN_NONE;
}

/* _launches_latest_id(): the latest launch correlation id any profile's
 * callbacks saw (ls_launches_latest_id). */
static PyObject *launches_latest_id(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyLong_FromUnsignedLong(ls_launches_latest_id());
}

/* _callback_wanted(api, waits, launches) -> bool: whether a profile
 * enables the callback of `api` (a name of ls_cbids), as ls_subscriber_wants. */
static PyObject *callback_wanted(PyObject *module, PyObject *args)
{
    (void)module;
    const char *api;
    int waits, launches;
    if (!PyArg_ParseTuple(args, "spp", &api, &waits, &launches))
        return NULL;
    CUpti_CallbackDomain domain;
    CUpti_CallbackId cbid;
    if (ls_cbid_find(api, &domain, &cbid) != 0) {
        PyErr_Format(PyExc_ValueError, "api: %s is not a call loopscope listens to", api);
        return NULL;
    }
    return PyBool_FromLong(ls_subscriber_wants(ls_cbid_role_of(domain, cbid), waits, launches));
}

static PyObject *decoder_state(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyUnicode_FromString(ls_worker_state());
}

/* Reads one (start_ns, end_ns, {figure: value}) sample. */
static int read_sample(PyObject *item, Py_ssize_t index, ls_sample *out)
{
    unsigned long long start = 0, end = 0;
    PyObject *values = NULL;
    if (!PyTuple_Check(item) ||
        !PyArg_ParseTuple(item, "KKO!", &start, &end, &PyDict_Type, &values)) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "_fake_samples: sample %zd must be (start_ns, end_ns, "
                     "{figure: value})", index);
        return -1;
    }
    if (end <= start) {
        PyErr_Format(PyExc_ValueError, "_fake_samples: sample %zd ends before it starts", index);
        return -1;
    }
    out->start_ns = start;
    out->end_ns = end;
    for (int j = 0; j < LS_METRICS; j++)
        out->values[j] = NAN;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(values, &pos, &key, &value)) {
        const char *name = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
        int id = name ? ls_metric_id(name) : -1;
        double v = PyFloat_AsDouble(value);
        if (id < 0 || (v == -1.0 && PyErr_Occurred())) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "_fake_samples: sample %zd has a bad figure %R", index,
                         key);
            return -1;
        }
        out->values[id] = v;
    }
    return 0;
}

static PyObject *fake_samples(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *list;
    Py_ssize_t per_tick = 1;
    unsigned long long interval_ns = 100000, setup_ns = 0, setup_sleep_ns = 0;
    int reused = 0, no_context = 0;
    if (!PyArg_ParseTuple(args, "O|nKKpKp:_fake_samples", &list, &per_tick, &interval_ns,
                          &setup_ns, &reused, &setup_sleep_ns, &no_context))
        return NULL;
    if (ls_session_active()) {
        PyErr_SetString(PyExc_RuntimeError, "_fake_samples needs no profile running");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(list, "_fake_samples: samples must be a sequence");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    ls_sample *samples = calloc((size_t)(n ? n : 1), sizeof *samples);
    if (samples == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (read_sample(PySequence_Fast_GET_ITEM(seq, i), i, &samples[i]) != 0) {
            free(samples);
            Py_DECREF(seq);
            return NULL;
        }
    Py_DECREF(seq);
    /* The worker may still finish the last profile with the old source. */
    Py_BEGIN_ALLOW_THREADS
    ls_worker_wait_idle();
    Py_END_ALLOW_THREADS
    int rc = ls_sampler_fake(samples, (size_t)n, per_tick > 0 ? (size_t)per_tick : 1, interval_ns,
                             setup_ns, reused, setup_sleep_ns, no_context);
    free(samples);
    if (rc != 0)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

/* _split_after_stop(stop_ns, apis, ops, syncs, own_ids): the back-to-back
 * split of a finish (ls_finish_move_after_stop) on synthetic records.
 * apis and syncs: (start_ns, end_ns, correlation_id); ops: (start_ns,
 * end_ns, correlation_id, name); own_ids: correlation ids of loopscope's
 * own calls.  Returns ((api ids, op names, sync ids) kept, (same) moved). */
static int split_read(PyObject *seq, Py_ssize_t i, int with_name, unsigned long long v[3],
                      const char **name)
{
    PyObject *t = PySequence_Fast_GET_ITEM(seq, i);
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 3 + with_name) {
        PyErr_Format(PyExc_TypeError, "_split_after_stop: record %zd must be a tuple of %d", i,
                     3 + with_name);
        return -1;
    }
    for (int k = 0; k < 3; k++) {
        v[k] = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(t, k));
        if (PyErr_Occurred())
            return -1;
    }
    if (with_name && (*name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(t, 3))) == NULL)
        return -1;
    return 0;
}

/* Appends the synthetic launch records `apis` (start_ns, end_ns,
 * correlation_id) and kernel records `ops` (the same and a name) of a
 * split or filter hook to `r`.  0, or -1 (an exception set, or out of
 * memory). */
static int read_launches(ls_records *r, PyObject *apis, PyObject *ops)
{
    unsigned long long v[3];
    const char *name = NULL;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(apis); i++) {
        if (split_read(apis, i, 0, v, NULL) != 0)
            return -1;
        ls_api *a = ls_apis_append(&r->apis);
        if (a == NULL)
            return -1;
        *a = (ls_api){v[0], v[1], 1, (uint32_t)v[2], 0, 0, 0};
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(ops); i++) {
        if (split_read(ops, i, 1, v, &name) != 0)
            return -1;
        ls_op *op = ls_ops_append(&r->ops);
        if (op == NULL)
            return -1;
        uint32_t name_id = ls_names_intern_held(&r->names, name, strlen(name));
        *op = ls_op_make(LS_OP_KERNEL, v[0], v[1], 0, 0, (uint32_t)v[2], name_id, 0);
    }
    return 0;
}

static int split_append(PyObject *list, PyObject *item)
{
    int rc = item != NULL && list != NULL ? PyList_Append(list, item) : -1;
    Py_XDECREF(item);
    return rc;
}

static PyObject *split_lists(const ls_records *r)
{
    PyObject *apis = PyList_New(0), *ops = PyList_New(0), *syncs = PyList_New(0);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < r->apis.count; i++)
        rc = split_append(apis, PyLong_FromUnsignedLong(r->apis.items[i].correlation_id));
    for (size_t i = 0; rc == 0 && i < r->ops.count; i++) {
        const char *text = ls_names_text(r->ops.items[i].name_id);
        rc = split_append(ops, PyUnicode_FromString(text ? text : ""));
    }
    for (size_t i = 0; rc == 0 && i < r->sync_records.count; i++)
        rc = split_append(syncs,
                          PyLong_FromUnsignedLong(r->sync_records.items[i].correlation_id));
    if (rc != 0) {
        Py_XDECREF(apis);
        Py_XDECREF(ops);
        Py_XDECREF(syncs);
        return NULL;
    }
    return Py_BuildValue("(NNN)", apis, ops, syncs);
}

static PyObject *split_after_stop(PyObject *module, PyObject *args)
{
    (void)module;
    unsigned long long stop;
    PyObject *apis, *ops, *syncs, *own;
    if (!PyArg_ParseTuple(args, "KOOOO:_split_after_stop", &stop, &apis, &ops, &syncs, &own))
        return NULL;
    ls_capture *c = calloc(1, sizeof *c);
    ls_records *next = calloc(1, sizeof *next);
    PyObject *lists[4] = {PySequence_Fast(apis, "apis"), PySequence_Fast(ops, "ops"),
                          PySequence_Fast(syncs, "syncs"), PySequence_Fast(own, "own_ids")};
    PyObject *result = NULL;
    if (c == NULL || next == NULL || !lists[0] || !lists[1] || !lists[2] || !lists[3]) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    c->records.stop_ns = stop;
    unsigned long long v[3];
    if (read_launches(&c->records, lists[0], lists[1]) != 0)
        goto done;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(lists[2]); i++) {
        if (split_read(lists[2], i, 0, v, NULL) != 0)
            goto done;
        ls_sync_record *sr = ls_sync_records_append(&c->records.sync_records);
        if (sr == NULL)
            goto done;
        *sr = (ls_sync_record){v[0], v[1], (uint32_t)v[2], 0, 0, 0};
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(lists[3]); i++) {
        unsigned long id = PyLong_AsUnsignedLong(PySequence_Fast_GET_ITEM(lists[3], i));
        if (PyErr_Occurred())
            goto done;
        ls_owncalls_note((uint32_t)id);
    }
    ls_finish_move_after_stop(c, next);
    PyObject *kept = split_lists(&c->records), *moved = kept ? split_lists(next) : NULL;
    if (kept != NULL && moved != NULL)
        result = Py_BuildValue("(NNk)", kept, moved, (unsigned long)next->earlier_launch_floor);
    else
        Py_XDECREF(kept);
done:
    ls_owncalls_forget(); /* the synthetic ids must not follow into later profiles */
    for (int k = 0; k < 4; k++)
        Py_XDECREF(lists[k]);
    if (c != NULL)
        ls_records_clear(&c->records);
    if (next != NULL)
        ls_records_clear(next);
    free(c);
    free(next);
    if (result == NULL && !PyErr_Occurred())
        PyErr_NoMemory();
    return result;
}

/* _filter_window(start_ns, stop_ns, floor, apis, ops): a traced finish's
 * window filter (ls_finish_filter_window) on synthetic records; floor, the
 * latest launch id of earlier profiles (0: none).  apis: (start_ns, end_ns,
 * correlation_id); ops: (start_ns, end_ns, correlation_id, name).  Returns
 * the names of the ops kept. */
static PyObject *filter_window(PyObject *module, PyObject *args)
{
    (void)module;
    unsigned long long start, stop;
    unsigned long floor;
    PyObject *apis, *ops;
    if (!PyArg_ParseTuple(args, "KKkOO:_filter_window", &start, &stop, &floor, &apis, &ops))
        return NULL;
    ls_capture *c = calloc(1, sizeof *c);
    PyObject *lists[2] = {PySequence_Fast(apis, "apis"), PySequence_Fast(ops, "ops")};
    PyObject *result = NULL;
    if (c == NULL || !lists[0] || !lists[1]) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    c->traced = 1;
    c->records.start_ns = start;
    c->records.stop_ns = stop;
    c->records.earlier_launch_floor = (uint32_t)floor;
    if (read_launches(&c->records, lists[0], lists[1]) != 0)
        goto done;
    ls_finish_filter_window(c);
    PyObject *kept = split_lists(&c->records);
    if (kept != NULL) {
        result = PyTuple_GetItem(kept, 1);
        Py_XINCREF(result);
        Py_DECREF(kept);
    }
done:
    for (int k = 0; k < 2; k++)
        Py_XDECREF(lists[k]);
    if (c != NULL)
        ls_records_clear(&c->records);
    free(c);
    if (result == NULL && !PyErr_Occurred())
        PyErr_NoMemory();
    return result;
}

static PyObject *finish_delay(PyObject *module, PyObject *ns)
{
    (void)module;
    unsigned long long delay = PyLong_AsUnsignedLongLong(ns);
    if (delay == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    ls_finish_set_test_delay(delay);
    Py_RETURN_NONE;
}

/* _ids_sort_unique(ids, bits, probes=()) -> (the ids sorted with repeats
 * dropped, [ls_ids_find of each probe in that set]): ls_ids over 32- or
 * 64-bit ids (bits 32 or 64), test hook. */
static PyObject *ids_sort_unique(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *ids, *probes = NULL;
    int bits;
    if (!PyArg_ParseTuple(args, "Oi|O:_ids_sort_unique", &ids, &bits, &probes))
        return NULL;
    if (bits != 32 && bits != 64) {
        PyErr_SetString(PyExc_ValueError, "_ids_sort_unique: bits must be 32 or 64");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(ids, "_ids_sort_unique: ids must be a sequence of ints");
    PyObject *none = probes == NULL ? PyTuple_New(0) : NULL;
    PyObject *wanted = seq == NULL || (probes == NULL && none == NULL) ? NULL
        : PySequence_Fast(probes ? probes : none,
                          "_ids_sort_unique: probes must be a sequence of ints");
    Py_XDECREF(none);
    if (seq == NULL || wanted == NULL) {
        Py_XDECREF(seq);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), m = PySequence_Fast_GET_SIZE(wanted);
    uint64_t *wide = malloc((size_t)(n ? n : 1) * sizeof *wide);
    uint32_t *narrow = malloc((size_t)(n ? n : 1) * sizeof *narrow);
    PyObject *sorted = NULL, *found = NULL, *out = NULL;
    if (wide == NULL || narrow == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned long long v = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (v == (unsigned long long)-1 && PyErr_Occurred())
            goto done;
        if (bits == 32 && v > UINT32_MAX) {
            PyErr_Format(PyExc_ValueError, "_ids_sort_unique: ids[%zd] does not fit 32 bits", i);
            goto done;
        }
        wide[i] = v;
        narrow[i] = (uint32_t)v;
    }
    size_t kept = bits == 64 ? ls_ids_sort_unique_u64(wide, (size_t)n)
                             : ls_ids_sort_unique_u32(narrow, (size_t)n);
    sorted = PyList_New((Py_ssize_t)kept);
    for (size_t i = 0; sorted != NULL && i < kept; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(bits == 64 ? wide[i] : narrow[i]);
        if (v == NULL)
            Py_CLEAR(sorted);
        else
            PyList_SET_ITEM(sorted, (Py_ssize_t)i, v);
    }
    found = sorted == NULL ? NULL : PyList_New(m);
    for (Py_ssize_t i = 0; found != NULL && i < m; i++) {
        unsigned long long v = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(wanted, i));
        if (v == (unsigned long long)-1 && PyErr_Occurred()) {
            Py_CLEAR(found);
            break;
        }
        ptrdiff_t at = bits == 64 ? ls_ids_find_u64(wide, kept, v)
                       : v > UINT32_MAX ? -1 : ls_ids_find_u32(narrow, kept, (uint32_t)v);
        PyObject *x = PyLong_FromSsize_t((Py_ssize_t)at);
        if (x == NULL)
            Py_CLEAR(found);
        else
            PyList_SET_ITEM(found, i, x);
    }
    if (found != NULL)
        out = PyTuple_Pack(2, sorted, found);
done:
    Py_XDECREF(sorted);
    Py_XDECREF(found);
    free(wide);
    free(narrow);
    Py_DECREF(seq);
    Py_DECREF(wanted);
    return out;
}

/* A record of _radix_order: three keys, then its position. */
typedef struct {
    uint64_t k[3];
    uint32_t at;
} ls_radix_probe;

static void probe_fields(const void *item, uint64_t out[3])
{
    memcpy(out, ((const ls_radix_probe *)item)->k, 3 * sizeof *out);
}

static int compare_probes(const void *pa, const void *pb)
{
    const ls_radix_probe *a = pa, *b = pb;
    for (int j = 0; j < 3; j++)
        if (a->k[j] != b->k[j])
            return a->k[j] < b->k[j] ? -1 : 1;
    return (a->at > b->at) - (a->at < b->at);
}

static PyObject *radix_order(PyObject *module, PyObject *keys)
{
    (void)module;
    PyObject *seq = PySequence_Fast(keys, "_radix_order: keys must be a sequence of 3-tuples");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    ls_radix_probe *items = malloc((size_t)(n ? n : 1) * sizeof *items);
    PyObject *out = NULL;
    if (items == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 3) {
            PyErr_Format(PyExc_TypeError, "_radix_order: keys[%zd] must be a 3-tuple", i);
            goto done;
        }
        for (int j = 0; j < 3; j++) {
            items[i].k[j] = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(t, j));
            if (items[i].k[j] == (unsigned long long)-1 && PyErr_Occurred())
                goto done;
        }
        items[i].at = (uint32_t)i;
    }
    ls_radix_sort_items(items, sizeof *items, (size_t)n, probe_fields, compare_probes);
    out = PyList_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        PyObject *v = PyLong_FromUnsignedLong(items[i].at);
        if (v == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, i, v);
    }
done:
    free(items);
    Py_DECREF(seq);
    return out;
}

/* A cache key from Python values; the names array is malloc'd (free it). */
static int read_key(PyObject *chip, PyObject *names, unsigned long version, Py_buffer *avail,
                    ls_pmcache_key *key, const char ***list)
{
    PyObject *seq = PySequence_Fast(names, "_pmcache: names must be a sequence of str");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    *list = calloc((size_t)(n ? n : 1), sizeof **list);
    if (*list == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        (*list)[i] = PyUnicode_Check(item) ? PyUnicode_AsUTF8(item) : NULL;
        if ((*list)[i] == NULL) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "_pmcache: names[%zd] must be a str", i);
            Py_DECREF(seq);
            free(*list);
            return -1;
        }
    }
    /* The strings live as long as `names` does: the caller holds it. */
    Py_DECREF(seq);
    key->chip = PyUnicode_AsUTF8(chip);
    if (key->chip == NULL) {
        free(*list);
        return -1;
    }
    key->names = *list;
    key->count = (size_t)n;
    key->cupti_version = (uint32_t)version;
    key->availability = avail->buf;
    key->availability_size = (size_t)avail->len;
    return 0;
}

/* _choose_metrics(known, fits) -> [kept names]: the single-pass choice of
 * PM sampling (ls_metric_choose over the product's order of importance,
 * ls_pm_ordered_names) with a Python oracle: fits(list of names) -> 1 (one
 * pass), 0 (more), -1 (cannot tell); `known`: the names the chip has. */
typedef struct {
    PyObject *fits;
    const char **names;
    int failed;
} choose_ctx;

static int python_fits(const unsigned char *keep, size_t n, void *opaque)
{
    choose_ctx *x = opaque;
    PyObject *list = PyList_New(0);
    for (size_t i = 0; list != NULL && i < n; i++) {
        if (!keep[i])
            continue;
        PyObject *name = PyUnicode_FromString(x->names[i]);
        if (name == NULL || PyList_Append(list, name) != 0)
            Py_CLEAR(list);
        Py_XDECREF(name);
    }
    PyObject *got = list != NULL ? PyObject_CallOneArg(x->fits, list) : NULL;
    Py_XDECREF(list);
    long answer = got != NULL ? PyLong_AsLong(got) : -1;
    Py_XDECREF(got);
    if (PyErr_Occurred()) {
        x->failed = 1;
        return -1;
    }
    return answer == 1 ? 1 : answer == 0 ? 0 : -1;
}

static PyObject *choose_metrics(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *known_names, *fits;
    if (!PyArg_ParseTuple(args, "OO:_choose_metrics", &known_names, &fits))
        return NULL;
    const char *names[LS_METRICS];
    size_t n = ls_pm_ordered_names(names);
    unsigned char known[LS_METRICS], keep[LS_METRICS];
    for (size_t i = 0; i < n; i++) {
        PyObject *name = PyUnicode_FromString(names[i]);
        int has = name != NULL ? PySequence_Contains(known_names, name) : -1;
        Py_XDECREF(name);
        if (has < 0)
            return NULL;
        known[i] = (unsigned char)has;
    }
    choose_ctx x = {fits, names, 0};
    int count = ls_metric_choose(known, n, python_fits, &x, keep);
    if (x.failed)
        return NULL;
    if (count < 0) {
        PyErr_SetString(PyExc_RuntimeError, "_choose_metrics: the oracle could not tell");
        return NULL;
    }
    PyObject *out = PyList_New(0);
    for (size_t i = 0; out != NULL && i < n; i++) {
        if (!keep[i])
            continue;
        PyObject *name = PyUnicode_FromString(names[i]);
        if (name == NULL || PyList_Append(out, name) != 0)
            Py_CLEAR(out);
        Py_XDECREF(name);
    }
    return out;
}

/* _pmavail(op, folder, chip, device, driver, cupti_version, image=None):
 * the counter availability cache of ls_pmavail by an explicit key.
 * "store" -> None; "load" -> (found, image or None, note or None);
 * "driver" -> this machine's driver identity (the other arguments ignored). */
static PyObject *pmavail(PyObject *module, PyObject *args, PyObject *kwargs)
{
    (void)module;
    static char *keywords[] = {"op", "folder", "chip", "device", "driver", "cupti_version",
                               "image", NULL};
    const char *op, *folder, *chip, *driver;
    int device;
    unsigned long version;
    Py_buffer image = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "sssisk|y*:_pmavail", keywords, &op, &folder,
                                     &chip, &device, &driver, &version, &image))
        return NULL;
    char note[1024] = "";
    PyObject *result = NULL;
    if (strcmp(op, "driver") == 0) {
        char text[512];
        ls_pmavail_driver(text, sizeof text);
        result = PyUnicode_FromString(text);
    } else if (strcmp(op, "store") == 0) {
        if (image.buf == NULL)
            PyErr_SetString(PyExc_ValueError, "_pmavail: 'store' needs image");
        else if (ls_pmavail_store(folder, chip, device, driver, (uint32_t)version, image.buf,
                                  (size_t)image.len, note, sizeof note) != 0)
            PyErr_SetString(PyExc_OSError, note);
        else
            result = Py_NewRef(Py_None);
    } else if (strcmp(op, "load") == 0) {
        uint8_t *bytes = NULL;
        size_t size = 0;
        int found = ls_pmavail_load(folder, chip, device, driver, (uint32_t)version, &bytes,
                                    &size, note, sizeof note);
        PyObject *data = found == 1 ? PyBytes_FromStringAndSize((const char *)bytes,
                                                                 (Py_ssize_t)size)
                                    : Py_NewRef(Py_None);
        free(bytes);
        if (data != NULL)
            result = Py_BuildValue("(iNz)", found, data, note[0] ? note : NULL);
    } else {
        PyErr_Format(PyExc_ValueError, "_pmavail: unknown op %s", op);
    }
    if (image.buf != NULL)
        PyBuffer_Release(&image);
    return result;
}

static PyObject *pmcache(PyObject *module, PyObject *args, PyObject *kwargs)
{
    (void)module;
    static char *keywords[] = {"op", "folder", "chip", "names", "cupti_version",
                               "availability", "kept", "image", NULL};
    const char *op, *folder;
    PyObject *chip, *names, *kept = Py_None;
    unsigned long version;
    Py_buffer avail = {0}, image = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "ssUOky*|Oy*:_pmcache", keywords, &op,
                                     &folder, &chip, &names, &version, &avail, &kept, &image))
        return NULL;
    ls_pmcache_key key;
    const char **list = NULL;
    PyObject *result = NULL;
    char note[1024] = "";
    if (read_key(chip, names, version, &avail, &key, &list) != 0)
        goto done;
    if (strcmp(op, "path") == 0) {
        char path[1200];
        if (ls_pmcache_path(folder, &key, path, sizeof path) != 0)
            PyErr_SetString(PyExc_ValueError, "_pmcache: the folder name is too long");
        else
            result = PyUnicode_FromString(path);
    } else if (strcmp(op, "store") == 0) {
        unsigned char *flags = calloc(key.count ? key.count : 1, 1);
        PyObject *seq = kept == Py_None ? NULL
            : PySequence_Fast(kept, "_pmcache: kept must be a sequence of bool");
        if (flags == NULL || image.buf == NULL || seq == NULL ||
            (size_t)PySequence_Fast_GET_SIZE(seq) != key.count) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "_pmcache: 'store' needs kept (one flag per "
                                "name) and image");
        } else {
            for (size_t i = 0; i < key.count; i++)
                flags[i] = PyObject_IsTrue(PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)i)) == 1;
            char path[1200];
            if (ls_pmcache_store(folder, &key, flags, image.buf, (size_t)image.len, note,
                                 sizeof note) != 0)
                PyErr_SetString(PyExc_OSError, note);
            else if (ls_pmcache_path(folder, &key, path, sizeof path) == 0)
                result = PyUnicode_FromString(path);
        }
        Py_XDECREF(seq);
        free(flags);
    } else if (strcmp(op, "load") == 0) {
        unsigned char *flags = calloc(key.count ? key.count : 1, 1);
        uint8_t *bytes = NULL;
        size_t size = 0;
        if (flags == NULL) {
            PyErr_NoMemory();
        } else {
            int found = ls_pmcache_load(folder, &key, flags, &bytes, &size, note, sizeof note);
            PyObject *flag_list = found == 1 ? PyList_New((Py_ssize_t)key.count) : Py_NewRef(Py_None);
            for (size_t i = 0; found == 1 && flag_list != NULL && i < key.count; i++)
                PyList_SET_ITEM(flag_list, (Py_ssize_t)i, PyBool_FromLong(flags[i]));
            PyObject *data = found == 1 ? PyBytes_FromStringAndSize((const char *)bytes,
                                                                     (Py_ssize_t)size)
                                        : Py_NewRef(Py_None);
            if (flag_list != NULL && data != NULL)
                result = Py_BuildValue("(iOOz)", found, flag_list, data, note[0] ? note : NULL);
            Py_XDECREF(flag_list);
            Py_XDECREF(data);
            free(bytes);
        }
        free(flags);
    } else {
        PyErr_Format(PyExc_ValueError, "_pmcache: op must be 'path', 'store' or 'load', not %s",
                     op);
    }
done:
    free(list);
    PyBuffer_Release(&avail);
    if (image.buf != NULL)
        PyBuffer_Release(&image);
    return result;
}

/* _capture_pending(capture) -> bool, without waiting. */
static PyObject *capture_pending(PyObject *module, PyObject *capture)
{
    ls_module_state *st = ls_module_state_of(module);
    if (!PyObject_TypeCheck(capture, st->capture_type)) {
        PyErr_Format(PyExc_TypeError, "_capture_pending needs a Capture, not %.100s",
                     Py_TYPE(capture)->tp_name);
        return NULL;
    }
    return PyBool_FromLong(ls_capture_is_pending(capture));
}

static PyObject *names(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return Py_BuildValue("{s:I,s:n,s:I,s:i}", "count", (unsigned int)ls_names_count(), "bytes",
                         (Py_ssize_t)ls_names_bytes(), "nvtx_registered",
                         (unsigned int)ls_nvtx_registered(), "check", ls_names_check());
}

/* _names_hammer(texts, rounds) -> mismatches: what loopscope's worker does
 * to the name table, without the GIL: `rounds` times, interns every text
 * into a list of its own, holds it again (the lock-free path) and reads it
 * back (the lock-free read), then releases the list.  Counts the names that
 * read back wrong or could not be interned; other threads may use the table
 * meanwhile (they run while this waits without the GIL). */
static PyObject *names_hammer(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *texts;
    unsigned long rounds;
    if (!PyArg_ParseTuple(args, "Ok:_names_hammer", &texts, &rounds))
        return NULL;
    PyObject *seq = PySequence_Fast(texts, "_names_hammer: texts must be a sequence of str");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    const char **text = PyMem_Calloc((size_t)(n ? n : 1), sizeof *text);
    Py_ssize_t *len = PyMem_Calloc((size_t)(n ? n : 1), sizeof *len);
    if (text == NULL || len == NULL) {
        PyMem_Free(text);
        PyMem_Free(len);
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        /* The UTF-8 stays with the str, which `seq` keeps alive. */
        text[i] = PyUnicode_Check(item) ? PyUnicode_AsUTF8AndSize(item, &len[i]) : NULL;
        if (text[i] == NULL || len[i] == 0 || memchr(text[i], '\0', (size_t)len[i]) != NULL) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "_names_hammer: texts[%zd] must be a non-empty "
                             "str without NUL", i);
            PyMem_Free(text);
            PyMem_Free(len);
            Py_DECREF(seq);
            return NULL;
        }
    }
    unsigned long long bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (unsigned long r = 0; r < rounds; r++) {
        ls_name_refs refs = {0};
        for (Py_ssize_t i = 0; i < n; i++) {
            uint32_t id = ls_names_intern_held(&refs, text[i], (size_t)len[i]);
            if (id == LS_NO_NAME || ls_names_hold(&refs, id) != 0) {
                bad++;
                continue;
            }
            const char *back = ls_names_text(id);
            if (back == NULL || ls_names_length(id) != (size_t)len[i] ||
                memcmp(back, text[i], (size_t)len[i]) != 0)
                bad++;
        }
        ls_names_release_all(&refs);
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(text);
    PyMem_Free(len);
    Py_DECREF(seq);
    return PyLong_FromUnsignedLongLong(bad);
}

static PyObject *open_ranges(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyLong_FromSize_t(ls_rangestack_size(ls_rangestack_mine()));
}

PyMethodDef ls_test_hook_methods[] = {
    {"_names", names, METH_NOARGS,
     "_names() -> {'count', 'bytes', 'nvtx_registered', 'check'}: test hook, the name table "
     "(check: 0, or which invariant broke, see ls_names_check)."},
    {"_names_hammer", names_hammer, METH_VARARGS,
     "_names_hammer(texts, rounds) -> mismatches: test hook, the worker's use of the name "
     "table (intern, hold, read, release) without the GIL."},
    {"_open_ranges", open_ranges, METH_NOARGS,
     "_open_ranges() -> test hook, the ranges open on this thread."},
    {"_inject_calls", (PyCFunction)(void (*)(void))inject_calls, METH_VARARGS | METH_KEYWORDS,
     "_inject_calls(calls, release_gil=True): test hook; each call (api, duration_ns"
     "[, correlation_id[, function_param]]) goes through the real switchboard, enter then exit,"
     " from this thread with its Python stack; returns their tokens (0: not a blocking call)."},
    {"_decoder_probe", decoder_probe, METH_VARARGS,
     "_decoder_probe(period_ns, run_ns, keep_ns=-1) -> (ticks, stop_ns, state): test hook "
     "for the worker thread's ticks."},
    {"_sample_wanted", sample_wanted, METH_VARARGS,
     "_sample_wanted(start_ns, end_ns, window_start_ns, window_stop_ns) -> bool: test hook; "
     "whether a sample belongs to a window (0 stop: open)."},
    {"_sample_clock_offset", sample_clock_offset, METH_VARARGS,
     "_sample_clock_offset(first_start_ns, started_ns, tolerance_ns) -> int: test hook; "
     "sampling's clock less the activity clock, judged from a run's first complete sample."},
    {"_activity_back_to_back", activity_back_to_back, METH_VARARGS,
     "_activity_back_to_back(stop_began_ns, now_ns) -> bool: test hook; whether a start at "
     "now_ns follows the last stop closely enough to count as back to back."},
    {"_settle_samples", settle_samples, METH_VARARGS,
     "_settle_samples(spans, max_span_ns, started_ns, stopped_ns, tolerance_ns[, "
     "window_start_ns]) -> (spans, partial, ended_before, delta_ns, outside): test hook for "
     "checking PM samples against a profile's span."},
    {"_beside_decode", beside_decode, METH_VARARGS,
     "_beside_decode(decode_ns) -> (task_ns, wait_idle_ns, ticks): test hook; a worker task's "
     "latency and a wait for the worker while the sampler's tick decodes for decode_ns."},
    {"_tick_starts", tick_starts, METH_VARARGS,
     "_tick_starts(period_ns, cost_ns, ticks) -> [ns, ...]: test hook; when each of the "
     "worker's ticks began, each tick taking cost_ns."},
    {"_sampler_keep", sampler_keep, METH_VARARGS,
     "_sampler_keep(keep_running_ns, keep_ns, wait_bound_ns=0, decode_ns=0, overflows=0, "
     "tail_cap=0): the PM sampler's idle times and an open's wait bound (0: the defaults), each "
     "test-source decode's reported host time and hardware-buffer overflows, and the most "
     "samples a finish's tail reads (0: all)."},
    {"_filter_window", filter_window, METH_VARARGS,
     "_filter_window(start_ns, stop_ns, floor, apis, ops) -> [op names kept]: test hook; a "
     "traced finish's window filter on synthetic records (floor: earlier profiles' latest "
     "launch id, 0 none)."},
    {"_callback_wanted", callback_wanted, METH_VARARGS,
     "_callback_wanted(api, waits, launches) -> bool: test hook; whether a profile "
     "enables the CUPTI callback of api (a name of csrc/common/ls_cbids.c)."},
    {"_launches_latest_id", launches_latest_id, METH_NOARGS,
     "_launches_latest_id() -> int: the latest launch correlation id the callbacks saw."},
    {"_sampler_state", sampler_state, METH_NOARGS,
     "_sampler_state() -> (state, live windows): 'off', 'starting', 'running' or 'stopped'."},
    {"_decoder_state", decoder_state, METH_NOARGS,
     "_decoder_state() -> 'none', 'ticking', 'parked', 'idle', 'busy' or 'ended': the "
     "worker thread's state, test hook."},
    {"_split_after_stop", split_after_stop, METH_VARARGS,
     "_split_after_stop(stop_ns, apis, ops, syncs, own_ids): the back-to-back split of a "
     "finish on synthetic records: ((api ids, op names, sync ids) kept, (...) moved, "
     "the next profile's earlier_launch_floor)."},
    {"_fake_samples", fake_samples, METH_VARARGS,
     "_fake_samples(samples, per_tick=1, interval_ns=100000, setup_ns=0, reused=False, "
     "setup_sleep_ns=0, no_context=False): test "
     "hook; synthetic PM samples (start_ns, end_ns, {figure: value}) stand in for CUPTI's in "
     "the next profiles with metrics=True (each worker tick hands over per_tick of them, the "
     "finish the rest; sampling begins setup_ns after a profile's start, as a sampler set up "
     "by an earlier profile when reused); an empty list removes them."},
    {"_ids_sort_unique", ids_sort_unique, METH_VARARGS,
     "_ids_sort_unique(ids, bits, probes=()) -> (sorted unique ids, [index of each probe or "
     "-1]): test hook for ls_ids."},
    {"_radix_order", radix_order, METH_O,
     "_radix_order(keys) -> the positions of keys (3-tuples of uint64) in sorted order, ties "
     "by position: test hook for ls_radix_sort_items."},
    {"_finish_delay", finish_delay, METH_O,
     "_finish_delay(ns): test hook; every profile's finish waits ns on the worker thread "
     "first, and goes to the worker even when nothing needs it (0: off)."},
    {"_capture_pending", capture_pending, METH_O,
     "_capture_pending(capture) -> bool: test hook; True while the worker has not "
     "finished the capture (asks without waiting)."},
    {"_pmcache", (PyCFunction)(void (*)(void))pmcache, METH_VARARGS | METH_KEYWORDS,
     "_pmcache(op, folder, chip, names, cupti_version, availability, kept=None, image=None):"
     " test hook over the PM config cache files; op 'store' -> path, 'load' -> (found, "
     "kept, image, note), 'path' -> path."},
    {"_locate_as", locate_as, METH_VARARGS,
     "_locate_as(code, byte_offset, as_code): test hook, a frame's kept source position."},
    {"_fake_context_created", fake_context_created, METH_NOARGS,
     "_fake_context_created(): test hook, CUPTI's resource callback for a new CUDA context."},
    {"_choose_metrics", choose_metrics, METH_VARARGS,
     "_choose_metrics(known, fits) -> kept names: test hook, PM sampling's single-pass "
     "choice in its order of importance, over a Python oracle fits(names) -> 1/0/-1."},
    {"_pmavail", (PyCFunction)(void (*)(void))pmavail, METH_VARARGS | METH_KEYWORDS,
     "_pmavail(op, folder, chip, device, driver, cupti_version, image=None): test hook, the "
     "counter availability cache (ls_pmavail)."},
    {NULL, NULL, 0, NULL},
};
