/* ls_capture_type: the records of one finished profile, owned by a Python
 * object, and their analysis returned as plain dicts (ns integers; the
 * Python layer shapes units and names). */
#include "ls_capture_type.h"

#include "ls_call_dict.h"
#include "ls_clock.h"
#include "ls_cuda.h"
#include "ls_finish.h"
#include "ls_model_type.h"
#include "ls_module_state.h"
#include "ls_pyvalues.h"
#include "ls_samples.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <string.h>

#define LS_CACHED_MODELS 8
#define LS_RECORDS_CAPSULE "loopscope._core.records"

typedef struct {
    PyObject_HEAD
    ls_capture *capture;  /* empty until the finish job is taken; owned by `records` */
    PyObject *records;    /* a capsule that owns *capture: the Models keep it, not this
                           * object, so a Capture and its cached Models make no reference
                           * cycle and go by reference counting alone */
    ls_finish *pending;   /* the worker's job, NULL once taken */
    uint64_t stop_cost_ns;
    PyObject *models; /* dict: (normal_ns, severe_ns, steps) -> Model, the latest few */
} ls_capture_object;

/* The facts (SM count, threads per SM, ...) of each traced device the ops
 * ran on, from the driver, once per device: what kernels' grids are judged
 * against.  Facts already there (injected) are kept. */
static void add_device_facts(ls_capture *capture)
{
    ls_records *r = &capture->records;
    uint32_t tried[LS_MAX_DEVICE_FACTS];
    size_t n = 0;
    for (size_t i = 0; capture->traced && i < r->ops.count && n < LS_MAX_DEVICE_FACTS; i++) {
        uint32_t id = r->ops.items[i].device_id;
        if (i > 0 && id == r->ops.items[i - 1].device_id)
            continue; /* the common case: one device */
        int seen = ls_records_device(r, id) != NULL;
        for (size_t k = 0; !seen && k < n; k++)
            seen = tried[k] == id;
        if (seen)
            continue;
        tried[n++] = id;
        ls_device_facts facts;
        if (id < LS_MAX_DEVICE_FACTS && ls_cuda_device_facts((int)id, &facts) == 0)
            ls_records_set_device(r, &facts);
    }
}

/* The capsule's destructor: the records go with their last holder (the
 * Capture or a Model that outlived it). */
static void records_free(PyObject *capsule)
{
    ls_capture *c = PyCapsule_GetPointer(capsule, LS_RECORDS_CAPSULE);
    if (c == NULL) {
        PyErr_Clear(); /* cannot happen: the name is ours */
        return;
    }
    ls_records_clear(&c->records);
    free(c);
#ifdef __GLIBC__
    /* A capture and its models free arrays of hundreds of KiB, which glibc
     * keeps in the heap once its mmap threshold has risen: 1,000 profiles in
     * a row then held ~100 MiB.  Give the free pages back. */
    malloc_trim(0);
#endif
}

PyObject *ls_capture_new(PyTypeObject *type, ls_finish *pending, uint64_t stop_cost_ns)
{
    ls_capture_object *self = PyObject_GC_New(ls_capture_object, type);
    if (self == NULL) {
        if (pending != NULL)
            ls_finish_abandon(pending);
        return NULL;
    }
    self->capture = NULL;
    self->records = NULL;
    self->pending = pending;
    self->stop_cost_ns = stop_cost_ns;
    self->models = PyDict_New();
    PyObject_GC_Track(self);
    if (self->models == NULL)
        goto error;
    ls_capture *c = calloc(1, sizeof *c);
    if (c == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    self->records = PyCapsule_New(c, LS_RECORDS_CAPSULE, records_free);
    if (self->records == NULL) {
        free(c);
        goto error;
    }
    self->capture = c;
    return (PyObject *)self;
error:
    Py_DECREF(self);
    return NULL;
}

PyObject *ls_capture_new_finished(PyTypeObject *type, ls_capture *capture)
{
    ls_capture_object *self = (ls_capture_object *)ls_capture_new(type, NULL, 0);
    if (self == NULL) {
        ls_records_clear(&capture->records);
        return NULL;
    }
    *self->capture = *capture;
    memset(capture, 0, sizeof *capture);
    return (PyObject *)self;
}

/* Waits (without the GIL) for the worker to finish the capture and takes
 * it: every method of the type reads a finished capture.  0, never fails. */
static int capture_ready(ls_capture_object *self)
{
    ls_finish *job = self->pending;
    if (job == NULL)
        return 0;
    uint64_t t0 = ls_clock_monotonic_ns();
    if (!ls_finish_done(job)) {
        /* Held before the GIL goes: another thread taking the job meanwhile
         * waits for this one to be out before it frees the job. */
        ls_finish_hold(job);
        Py_BEGIN_ALLOW_THREADS
        ls_finish_wait(job);
        Py_END_ALLOW_THREADS
    }
    if (self->pending != job) /* another thread took it meanwhile */
        return 0;
    self->pending = NULL;
    ls_finish_take(job, self->capture, ls_clock_monotonic_ns() - t0);
    ls_capture *c = self->capture;
    add_device_facts(c); /* the devices the ops ran on are known now */
    c->stop_ns_cost = self->stop_cost_ns;
    uint64_t other = 0;
    for (int k = 0; k < LS_STOP_PHASES; k++)
        if (k != LS_STOP_HAND_OVER)
            other += c->stop_phase_ns[k];
    c->stop_phase_ns[LS_STOP_HAND_OVER] = self->stop_cost_ns > other ? self->stop_cost_ns - other : 0;
    return 0;
}

static PyObject *capture_getattro(PyObject *op, PyObject *name)
{
    if (capture_ready((ls_capture_object *)op) != 0)
        return NULL;
    return PyObject_GenericGetAttr(op, name);
}

int ls_capture_is_pending(PyObject *capture)
{
    ls_finish *job = ((ls_capture_object *)capture)->pending;
    return job != NULL && !ls_finish_done(job);
}

static int capture_traverse(PyObject *op, visitproc visit, void *arg)
{
    Py_VISIT(((ls_capture_object *)op)->models);
    Py_VISIT(Py_TYPE(op));
    return 0;
}

static int capture_clear(PyObject *op)
{
    Py_CLEAR(((ls_capture_object *)op)->models);
    return 0;
}

static void capture_dealloc(PyObject *op)
{
    PyTypeObject *type = Py_TYPE(op);
    ls_capture_object *self = (ls_capture_object *)op;
    PyObject_GC_UnTrack(op);
    capture_clear(op); /* the models first: their arrays go before the records' trim */
    if (self->pending != NULL)
        ls_finish_abandon(self->pending);
    Py_XDECREF(self->records); /* the records, unless a Model still holds them */
    type->tp_free(op);
    Py_DECREF(type);
}

/* Reads `steps` (None, or a sequence of range indices) into a new array
 * and a tuple key; NULL array with an exception set on bad input. */
static uint32_t *read_steps(PyObject *steps, size_t range_count, size_t *n, PyObject **key)
{
    PyObject *seq = PySequence_Fast(steps, "model: steps must be None or a sequence of range "
                                           "indices");
    if (seq == NULL)
        return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    uint32_t *out = PyMem_Malloc((count ? (size_t)count : 1) * sizeof *out);
    if (out == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        Py_ssize_t v = PyLong_Check(item) && !PyBool_Check(item) ? PyLong_AsSsize_t(item) : -2;
        if (v == -1 && PyErr_Occurred())
            PyErr_Clear();
        if (v < 0 || (size_t)v >= range_count) {
            PyErr_Format(PyExc_ValueError, "model: steps[%zd] is %R: must be the index of one of "
                         "the capture's %zu ranges", i, item, range_count);
            goto bad;
        }
        out[i] = (uint32_t)v;
    }
    *key = PySequence_Tuple(seq);
    if (*key == NULL)
        goto bad;
    Py_DECREF(seq);
    *n = (size_t)count;
    return out;
bad:
    PyMem_Free(out);
    Py_DECREF(seq);
    return NULL;
}

/* model(normal_us=20.0, severe_us=50.0, steps=None) -> Model, computed once
 * per (thresholds, steps) and cached on the capture. */
static PyObject *capture_model(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"normal_us", "severe_us", "steps", NULL};
    double normal_us = 20.0, severe_us = 50.0;
    PyObject *steps = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|ddO:model", keywords, &normal_us,
                                     &severe_us, &steps))
        return NULL;
    if (!(normal_us >= 0.0) || !(severe_us >= normal_us) || !(severe_us <= 1e9)) {
        char msg[200];
        snprintf(msg, sizeof msg,
                 "gap thresholds must satisfy 0 <= normal_us <= severe_us <= 1e9 "
                 "(got normal_us=%g, severe_us=%g)", normal_us, severe_us);
        PyErr_SetString(PyExc_ValueError, msg);
        return NULL;
    }
    ls_capture_object *self = (ls_capture_object *)op;
    ls_model_options options = {
        {(uint64_t)(normal_us * 1000.0 + 0.5), (uint64_t)(severe_us * 1000.0 + 0.5)}, NULL, 0};
    PyObject *steps_key = Py_NewRef(Py_None);
    uint32_t *chosen = NULL;
    if (steps != Py_None) {
        Py_DECREF(steps_key);
        chosen = read_steps(steps, self->capture->records.ranges.count,
                            &options.step_range_count, &steps_key);
        if (chosen == NULL)
            return NULL;
        options.step_ranges = chosen;
    }
    PyObject *key = Py_BuildValue("(KKN)", (unsigned long long)options.thresholds.normal_below_ns,
                                  (unsigned long long)options.thresholds.severe_above_ns,
                                  steps_key);
    PyObject *model = key ? PyDict_GetItemWithError(self->models, key) : NULL;
    if (model != NULL) {
        Py_INCREF(model);
    } else if (key != NULL && !PyErr_Occurred()) {
        ls_module_state *st = ls_module_state_of_type(Py_TYPE(op));
        model = st ? ls_model_new(st->model_type, self->records, self->capture, &options) : NULL;
        if (model != NULL && PyDict_Size(self->models) >= LS_CACHED_MODELS) {
            Py_ssize_t pos = 0; /* forget the oldest */
            PyObject *oldest, *value;
            if (PyDict_Next(self->models, &pos, &oldest, &value) &&
                PyDict_DelItem(self->models, oldest) != 0)
                Py_CLEAR(model);
        }
        if (model != NULL && PyDict_SetItem(self->models, key, model) != 0)
            Py_CLEAR(model);
    }
    Py_XDECREF(key);
    PyMem_Free(chosen);
    return model;
}

#define U64(v) ls_py_u64(v)

/* range_records() -> [(name, parent, step, start_ns, end_ns)], one per range,
 * no analysis. */
static PyObject *capture_range_records(PyObject *op, PyObject *unused)
{
    (void)unused;
    const ls_records *r = &((ls_capture_object *)op)->capture->records;
    PyObject *list = PyList_New((Py_ssize_t)r->ranges.count);
    for (size_t i = 0; list != NULL && i < r->ranges.count; i++) {
        const ls_range *range = &r->ranges.items[i];
        PyObject *name = ls_py_range_name(range);
        PyObject *step = range->step_index >= 0 ? PyLong_FromLong(range->step_index)
                                                 : Py_NewRef(Py_None);
        PyObject *t = (name == NULL || step == NULL) ? NULL
            : Py_BuildValue("(OlOKK)", name, (long)range->parent, step,
                            (unsigned long long)range->start_ns,
                            (unsigned long long)range->end_ns);
        Py_XDECREF(name);
        Py_XDECREF(step);
        if (t == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    return list;
}

static PyObject *capture_info(PyObject *op, PyObject *unused)
{
    (void)unused;
    const ls_capture *c = ((ls_capture_object *)op)->capture;
    const ls_records *r = &c->records;
    PyObject *info = ls_py_dict_of(21, "ops_before_start", U64(c->ops_before_start), "note",
                   c->note[0] ? PyUnicode_FromString(c->note) : Py_NewRef(Py_None), "traced", PyBool_FromLong(c->traced), "injected",
                   PyBool_FromLong(c->injected), "reason",
                   c->reason[0] ? PyUnicode_FromString(c->reason) : Py_NewRef(Py_None),
                   "stop_error",
                   c->stop_error[0] ? PyUnicode_FromString(c->stop_error) : Py_NewRef(Py_None),
                   "start_ns", U64(r->start_ns), "stop_ns", U64(r->stop_ns), "ops",
                   U64(r->ops.count), "apis", U64(r->apis.count), "sync_records", U64(r->sync_records.count),
                   "ranges", U64(r->ranges.count), "dropped_records", U64(r->dropped_records),
                   "invalid_records", U64(r->invalid_records), "range_mismatches",
                   U64(c->range_mismatches), "ranges_left_open", U64(c->ranges_left_open),
                   "drains", U64(c->drains), "drain_ns", U64(c->drain_ns), "stop_ns_cost",
                   U64(c->stop_ns_cost), "buffer_bytes", U64(c->buffer_bytes),
                   "buffers_refused", U64(c->buffers_refused));
    /* The profile clock's rate against the host reference: 1.0 when CUPTI's
     * timestamps are ns of the host's time, None when nothing was compared. */
    PyObject *clock_rate = Py_NewRef(Py_None);
    if (c->start_reference_ns != 0 && c->stop_reference_ns > c->start_reference_ns &&
        r->stop_ns >= r->start_ns) {
        Py_DECREF(clock_rate);
        clock_rate = PyFloat_FromDouble((double)(r->stop_ns - r->start_ns) /
                                        (double)(c->stop_reference_ns - c->start_reference_ns));
    }
    static const char *const timestamp_sources[] = {"none", "loopscope", "cupti-default",
                                                    "refused"};
    PyObject *clock = ls_py_dict_of(10, "pm_wait_ns", U64(c->pm_wait_ns), "pm_wait_timed_out",
                     PyBool_FromLong(c->pm_wait_timed_out), "clock_rate", clock_rate, "reference_span_ns",
                     U64(c->stop_reference_ns > c->start_reference_ns
                             ? c->stop_reference_ns - c->start_reference_ns : 0),
                     "timestamp_source",
                     PyUnicode_FromString(timestamp_sources[c->timestamp_source <= 3
                                                                ? c->timestamp_source : 0]),
                     "timestamp_error",
                     c->timestamp_error[0] ? PyUnicode_FromString(c->timestamp_error)
                                           : Py_NewRef(Py_None),
                     "continued_tracing", PyBool_FromLong(c->continued_tracing),
                     "graph_level", PyBool_FromLong(c->graph_level),
                     "graph_kernels", PyBool_FromLong(c->graph_kernels),
                     "graph_level_ended", PyBool_FromLong(c->graph_level_ended));
    if (info != NULL && (clock == NULL || PyDict_Update(info, clock) != 0))
        Py_CLEAR(info);
    Py_XDECREF(clock);
    PyObject *more = info == NULL ? NULL
        : ls_py_dict_of(6, "calls_injected", PyBool_FromLong(c->calls_injected),
                     "watched_syncs", PyBool_FromLong(c->watched_syncs), "syncs_reason",
                     c->syncs_reason[0] ? PyUnicode_FromString(c->syncs_reason) : Py_NewRef(Py_None),
                     "calls", U64(r->calls.count), "calls_before_start", U64(c->calls_before_start),
                     "codes_refused", U64(c->codes_refused));
    if (more == NULL || PyDict_Update(info, more) != 0)
        Py_CLEAR(info);
    Py_XDECREF(more);
    /* The profile's own cost: what the worker did after the stop, and what
     * the owner waited for it. */
    static const char *const warm_up_modes[] = {"none", "every", "once"};
    PyObject *finish = info == NULL ? NULL
        : ls_py_dict_of(10, "finish_ns", U64(c->finish_ns), "finish_wait_ns",
                     U64(c->finish_wait_ns), "finished_on_worker",
                     PyBool_FromLong(c->finished_on_worker), "finish_error",
                     c->finish_error[0] ? PyUnicode_FromString(c->finish_error)
                                        : Py_NewRef(Py_None),
                     "ops_after_stop", U64(c->ops_after_stop), "records_after_stop",
                     U64(c->records_after_stop), "launch_records", U64(c->launch_records),
                     "warmed_up", PyBool_FromLong(c->warmed_up), "warm_up",
                     PyUnicode_FromString(warm_up_modes[c->warm_up_mode < 3 ? c->warm_up_mode : 0]),
                     "samples_outside", U64(c->samples_outside));
    if (finish == NULL || PyDict_Update(info, finish) != 0)
        Py_CLEAR(info);
    Py_XDECREF(finish);
    PyObject *start_phases = info == NULL ? NULL : PyDict_New();
    for (int k = 0; start_phases != NULL && k < LS_START_PHASES; k++) {
        PyObject *ns = U64(c->start_phase_ns[k]);
        if (ns == NULL || PyDict_SetItemString(start_phases, ls_session_start_phase_name(k), ns) != 0)
            Py_CLEAR(start_phases);
        Py_XDECREF(ns);
    }
    PyObject *stop_phases = info == NULL ? NULL : PyDict_New();
    for (int k = 0; stop_phases != NULL && k < LS_STOP_PHASES; k++) {
        PyObject *ns = U64(c->stop_phase_ns[k]);
        if (ns == NULL || PyDict_SetItemString(stop_phases, ls_session_stop_phase_name(k), ns) != 0)
            Py_CLEAR(stop_phases);
        Py_XDECREF(ns);
    }
    PyObject *finish_phases = info == NULL ? NULL : PyDict_New();
    for (int k = 0; finish_phases != NULL && k < LS_FINISH_PHASES; k++) {
        PyObject *ns = U64(c->finish_phase_ns[k]);
        if (ns == NULL ||
            PyDict_SetItemString(finish_phases, ls_session_finish_phase_name(k), ns) != 0)
            Py_CLEAR(finish_phases);
        Py_XDECREF(ns);
    }
    PyObject *phases = (start_phases == NULL || stop_phases == NULL || finish_phases == NULL)
        ? NULL
        : ls_py_dict_of(3, "start_phases_ns", Py_NewRef(start_phases), "stop_phases_ns",
                     Py_NewRef(stop_phases), "finish_phases_ns", Py_NewRef(finish_phases));
    Py_XDECREF(start_phases);
    Py_XDECREF(stop_phases);
    Py_XDECREF(finish_phases);
    if (info != NULL && (phases == NULL || PyDict_Update(info, phases) != 0))
        Py_CLEAR(info);
    Py_XDECREF(phases);
    const ls_pm_stats *pm = &c->pm;
    PyObject *pm_dict = Py_NewRef(Py_None);
    if (info != NULL && c->sampled) {
        Py_DECREF(pm_dict);
        PyObject *collected = PyList_New(0);
        for (int j = 0; collected != NULL && j < LS_METRICS; j++) {
            if (!pm->collected[j])
                continue;
            PyObject *name = PyUnicode_FromString(ls_metric_name(j));
            if (name == NULL || PyList_Append(collected, name) != 0)
                Py_CLEAR(collected);
            Py_XDECREF(name);
        }
        pm_dict = ls_py_dict_of(
            19, "device", PyLong_FromLong(pm->device), "chip", PyUnicode_FromString(pm->chip),
            "trigger", PyUnicode_FromString(pm->time_trigger ? "gpu_time" : "sysclk"),
            "interval", U64(pm->interval), "hw_buffer_bytes", U64(pm->hw_buffer_bytes),
            "counter_data_bytes", U64(pm->counter_data_bytes), "figures", collected,
            "cupti_metrics", PyUnicode_FromString(pm->collected_names), "dropped_metrics",
            pm->dropped[0] ? PyUnicode_FromString(pm->dropped) : Py_NewRef(Py_None),
            "started_ns", U64(pm->started_ns), "samples", U64(pm->samples), "overflows",
            U64(pm->overflows), "counter_data_full", U64(pm->counter_data_full), "incomplete",
            U64(pm->incomplete), "eval_errors", U64(pm->eval_errors), "decodes",
            U64(pm->decodes), "decode_ns", U64(pm->decode_ns), "error",
            pm->error[0] ? PyUnicode_FromString(pm->error) : Py_NewRef(Py_None),
            "clock_delta_ns", PyLong_FromLongLong(c->sample_clock_delta_ns));
        PyObject *phases = PyDict_New();
        for (int k = 0; phases != NULL && k < LS_PM_PHASES; k++) {
            PyObject *ns = U64(pm->phase_ns[k]);
            if (ns == NULL || PyDict_SetItemString(phases, ls_pm_phase_name(k), ns) != 0)
                Py_CLEAR(phases);
            Py_XDECREF(ns);
        }
        PyObject *more_pm = ls_py_dict_of(
            17, "sampler_reused", PyBool_FromLong(pm->sampler_reused),
            "stopped_ns", U64(pm->stopped_ns), "clock_latest_ns", U64(c->sample_clock_latest_ns),
            "skipped", U64(pm->skipped),
            "tail_samples", U64(pm->tail_samples), "tail_decode_ns", U64(pm->tail_decode_ns),
            "stop_ns", U64(pm->stop_ns),
            "restarts", U64(pm->restarts),
            "reconfigures", U64(pm->reconfigures),
            "decode_data_ns", U64(pm->decode_data_ns),
            "evaluate_ns", U64(pm->evaluate_ns),
            "clock_shift_ns", PyLong_FromLongLong(c->sample_clock_shift_ns),
            "phases_ns", phases,
            "config_reused", PyBool_FromLong(pm->config_reused),
            "max_samples", PyLong_FromUnsignedLong(pm->max_samples),
            "decoder_error",
            c->decoder_error[0] ? PyUnicode_FromString(c->decoder_error) : Py_NewRef(Py_None),
            "interval_note",
            c->interval_note[0] ? PyUnicode_FromString(c->interval_note) : Py_NewRef(Py_None));
        if (pm_dict != NULL && (more_pm == NULL || PyDict_Update(pm_dict, more_pm) != 0))
            Py_CLEAR(pm_dict);
        Py_XDECREF(more_pm);
        PyObject *setup = pm_dict == NULL ? NULL
            : ls_py_dict_of(6, "availability_cached", PyBool_FromLong(pm->availability_cached),
                         "config_source", PyUnicode_FromString(pm->config_source),
                         "cache_note",
                         pm->cache_note[0] ? PyUnicode_FromString(pm->cache_note)
                                           : Py_NewRef(Py_None),
                         "setup_ns", U64(c->pm_setup_ns), "began_ns", U64(c->pm_began_ns),
                         "start_delay_ns",
                         U64(c->pm_began_ns > r->start_ns ? c->pm_began_ns - r->start_ns : 0));
        if (pm_dict != NULL && (setup == NULL || PyDict_Update(pm_dict, setup) != 0))
            Py_CLEAR(pm_dict);
        Py_XDECREF(setup);
    }
    PyObject *metrics = NULL;
    if (info != NULL)
        metrics = ls_py_dict_of(5, "sampled", PyBool_FromLong(c->sampled), "samples_injected",
                             PyBool_FromLong(c->samples_injected), "metrics_reason",
                             c->metrics_reason[0] ? PyUnicode_FromString(c->metrics_reason)
                                                  : Py_NewRef(Py_None),
                             "samples", U64(r->samples.count), "pm", pm_dict);
    else
        Py_XDECREF(pm_dict);
    if (metrics == NULL || PyDict_Update(info, metrics) != 0)
        Py_CLEAR(info);
    Py_XDECREF(metrics);
    return info;
}

/* samples() -> list of (start_ns, end_ns, {figure: value}) in time order,
 * the figures not collected left out. */
static PyObject *capture_samples(PyObject *op, PyObject *unused)
{
    (void)unused;
    const ls_records *r = &((ls_capture_object *)op)->capture->records;
    PyObject *list = PyList_New((Py_ssize_t)r->samples.count);
    for (size_t i = 0; list != NULL && i < r->samples.count; i++) {
        const ls_sample *x = &r->samples.items[i];
        PyObject *values = PyDict_New();
        for (int j = 0; values != NULL && j < LS_METRICS; j++) {
            if (!isfinite(x->values[j]))
                continue;
            PyObject *v = PyFloat_FromDouble(x->values[j]);
            if (v == NULL || PyDict_SetItemString(values, ls_metric_name(j), v) != 0)
                Py_CLEAR(values);
            Py_XDECREF(v);
        }
        PyObject *t = values == NULL ? NULL
            : Py_BuildValue("(KKN)", (unsigned long long)x->start_ns,
                            (unsigned long long)x->end_ns, values);
        if (t == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    return list;
}

/* calls() -> list of dicts: the blocking calls, in record order. */
static PyObject *capture_calls(PyObject *op, PyObject *unused)
{
    (void)unused;
    const ls_records *r = &((ls_capture_object *)op)->capture->records;
    PyObject *list = PyList_New((Py_ssize_t)r->calls.count);
    ls_frame_memo memo; /* a loop's calls share a few stacks: their frames are made once */
    ls_frame_memo_init(&memo, &r->codes);
    for (size_t i = 0; list != NULL && i < r->calls.count; i++) {
        PyObject *d = ls_call_dict_memo(&r->calls.items[i], &memo);
        if (d == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, d);
    }
    ls_frame_memo_clear(&memo);
    return list;
}

static PyObject *capture_ops(PyObject *op, PyObject *unused)
{
    (void)unused;
    static const char *const kinds[] = {"kernel", "memcpy", "memset", "graph"}; /* ls_op_kind */
    const ls_records *r = &((ls_capture_object *)op)->capture->records;
    PyObject *list = PyList_New((Py_ssize_t)r->ops.count);
    for (size_t i = 0; list != NULL && i < r->ops.count; i++) {
        const ls_op *o = &r->ops.items[i];
        PyObject *name = ls_py_name_or_none(o->name_id);
        PyObject *t = name == NULL ? NULL
            : Py_BuildValue("(sKKIIINK)", kinds[o->kind <= LS_OP_GRAPH ? o->kind : LS_OP_KERNEL],
                            (unsigned long long)o->start_ns, (unsigned long long)o->end_ns,
                            o->device_id, o->stream_id, o->correlation_id, name,
                            (unsigned long long)o->bytes);
        if (t == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    return list;
}

/* The API records (launch calls) as tuples, like ops(): what a recording
 * needs to replay a capture through _inject.  Returns a new list, or NULL
 * with an exception set. */
static PyObject *capture_apis(PyObject *op, PyObject *unused)
{
    (void)unused;
    const ls_records *r = &((ls_capture_object *)op)->capture->records;
    PyObject *list = PyList_New((Py_ssize_t)r->apis.count);
    for (size_t i = 0; list != NULL && i < r->apis.count; i++) {
        const ls_api *a = &r->apis.items[i];
        PyObject *t = Py_BuildValue("(KKIKII)", (unsigned long long)a->start_ns,
                                    (unsigned long long)a->end_ns, a->correlation_id,
                                    (unsigned long long)a->thread_id, a->cbid, a->domain);
        if (t == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    return list;
}

static PyObject *capture_sync_records(PyObject *op, PyObject *unused)
{
    (void)unused;
    const ls_records *r = &((ls_capture_object *)op)->capture->records;
    PyObject *list = PyList_New((Py_ssize_t)r->sync_records.count);
    for (size_t i = 0; list != NULL && i < r->sync_records.count; i++) {
        const ls_sync_record *s = &r->sync_records.items[i];
        PyObject *t = Py_BuildValue("(KKIII)", (unsigned long long)s->start_ns,
                                    (unsigned long long)s->end_ns, s->stream_id,
                                    s->correlation_id, s->type);
        if (t == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    return list;
}

static PyObject *capture_forget_models(PyObject *op, PyObject *unused)
{
    (void)unused;
    PyDict_Clear(((ls_capture_object *)op)->models);
    Py_RETURN_NONE;
}

static PyMethodDef capture_methods[] = {
    {"model", (PyCFunction)(void (*)(void))capture_model, METH_VARARGS | METH_KEYWORDS,
     "model(normal_us=20.0, severe_us=50.0, steps=None) -> Model: the analysed model, "
     "computed once per (thresholds, steps) and cached here.  steps: None for the live steps, "
     "or the indices of the ranges that act as steps, in step order."},
    {"forget_models", capture_forget_models, METH_NOARGS,
     "Drops the cached models (and their memory); the next model() computes again."},
    {"range_records", capture_range_records, METH_NOARGS,
     "[(name, parent, step, start_ns, end_ns)] per range, in the order they began."},
    {"info", capture_info, METH_NOARGS, "Counts, flags and costs of the capture."},
    {"calls", capture_calls, METH_NOARGS,
     "Blocking API calls as dicts (api, wait_class, enter_ns, exit_ns, thread_id, frames...)."},
    {"samples", capture_samples, METH_NOARGS,
     "PM samples as (start_ns, end_ns, {figure: value}), in time order."},
    {"ops", capture_ops, METH_NOARGS,
     "GPU ops as (kind, start_ns, end_ns, device, stream, correlation_id, name, bytes)."},
    {"apis", capture_apis, METH_NOARGS,
     "Host API calls as (start_ns, end_ns, correlation_id, thread_id, cbid, domain)."},
    {"sync_records", capture_sync_records, METH_NOARGS,
     "CUPTI synchronization records as (start_ns, end_ns, stream, correlation_id, type)."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot capture_slots[] = {
    {Py_tp_doc, "The records of one finished loopscope profile.  loopscope's worker thread "
                "finishes them after the stop; the first look-up of anything on the object "
                "waits for that."},
    {Py_tp_methods, capture_methods},
    {Py_tp_traverse, capture_traverse},
    {Py_tp_clear, capture_clear},
    {Py_tp_getattro, capture_getattro},
    {Py_tp_dealloc, capture_dealloc},
    {0, NULL},
};

PyType_Spec ls_capture_type_spec = {
    .name = "loopscope._core.Capture",
    .basicsize = sizeof(ls_capture_object),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION |
             Py_TPFLAGS_HAVE_GC,
    .slots = capture_slots,
};
