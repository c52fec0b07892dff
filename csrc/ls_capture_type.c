/* ls_capture_type: the records of one finished profile, owned by a Python
 * object, and their analysis returned as plain dicts (ns integers; the
 * Python layer shapes units and names). */
#include "ls_module.h"

#include "ls_analysis.h"
#include "ls_cbids.h"
#include "ls_clock.h"
#include "ls_cuda.h"
#include "ls_finish.h"
#include "ls_names.h"
#include "ls_samples.h"

#include <math.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LS_WORST_GAPS 10

typedef struct {
    PyObject_HEAD
    ls_capture capture;   /* empty until the finish job is taken */
    ls_finish *pending;   /* the worker's job, NULL once taken */
    uint64_t stop_cost_ns;
} ls_capture_object;

PyObject *ls_capture_new(PyTypeObject *type, ls_finish *pending, uint64_t stop_cost_ns)
{
    ls_capture_object *self = PyObject_New(ls_capture_object, type);
    if (self == NULL) {
        ls_finish_abandon(pending);
        return NULL;
    }
    memset(&self->capture, 0, sizeof self->capture);
    self->pending = pending;
    self->stop_cost_ns = stop_cost_ns;
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
    ls_finish_take(job, &self->capture, ls_clock_monotonic_ns() - t0);
    ls_capture *c = &self->capture;
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

PyObject *ls_capture_pending_py(PyObject *module, PyObject *capture)
{
    ls_module_state *st = ls_module_get_state(module);
    if (!PyObject_TypeCheck(capture, st->capture_type)) {
        PyErr_Format(PyExc_TypeError, "_capture_pending needs a Capture, not %.100s",
                     Py_TYPE(capture)->tp_name);
        return NULL;
    }
    ls_finish *job = ((ls_capture_object *)capture)->pending;
    return PyBool_FromLong(job != NULL && !ls_finish_done(job));
}

static void capture_dealloc(PyObject *op)
{
    PyTypeObject *type = Py_TYPE(op);
    ls_capture_object *self = (ls_capture_object *)op;
    if (self->pending != NULL)
        ls_finish_abandon(self->pending);
    ls_records_clear(&self->capture.records);
    type->tp_free(op);
    Py_DECREF(type);
}

#define U64(v) PyLong_FromUnsignedLongLong((unsigned long long)(v))

static PyObject *name_or_none(uint32_t id)
{
    const char *text = ls_names_text(id);
    if (text == NULL)
        Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace");
}

static PyObject *gap_stats_dict(const ls_gap_stats *s)
{
    PyObject *hist = PyList_New(LS_HIST_BINS);
    if (hist == NULL)
        return NULL;
    for (int i = 0; i < LS_HIST_BINS; i++) {
        PyObject *v = U64(s->histogram[i]);
        if (v == NULL) {
            Py_DECREF(hist);
            return NULL;
        }
        PyList_SET_ITEM(hist, i, v);
    }
    return ls_dict_of(15, "count", U64(s->count), "normal", U64(s->normal), "warning",
                   U64(s->warning), "severe", U64(s->severe), "host",
                   U64(s->by_cause[LS_CAUSE_HOST]), "sync", U64(s->by_cause[LS_CAUSE_SYNC]),
                   "other", U64(s->by_cause[LS_CAUSE_OTHER]), "total_ns", U64(s->total_ns),
                   "max_ns", U64(s->max_ns), "p50_ns", U64(s->p50_ns), "p99_ns",
                   U64(s->p99_ns), "histogram", hist, "host_ns",
                   U64(s->by_cause_ns[LS_CAUSE_HOST]), "sync_ns",
                   U64(s->by_cause_ns[LS_CAUSE_SYNC]), "other_ns",
                   U64(s->by_cause_ns[LS_CAUSE_OTHER]));
}

static PyObject *timeline_dict(const ls_timeline *t)
{
    PyObject *device = t->device_id == UINT32_MAX ? Py_NewRef(Py_None) : U64(t->device_id);
    PyObject *stream = t->stream_id == UINT32_MAX ? Py_NewRef(Py_None) : U64(t->stream_id);
    return ls_dict_of(9, "device", device, "stream", stream, "kernels", U64(t->kernels),
                   "memcpys", U64(t->memcpys), "memsets", U64(t->memsets), "busy_ns",
                   U64(t->busy_ns), "first_ns", U64(t->first_ns), "last_ns", U64(t->last_ns),
                   "gaps", gap_stats_dict(&t->gaps));
}

static PyObject *timeline_list(const ls_timeline *lines, size_t n, int with_device_name)
{
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (list == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        PyObject *d = timeline_dict(&lines[i]);
        if (d != NULL && with_device_name) {
            char name[256];
            PyObject *v = ls_cuda_device_name((int)lines[i].device_id, name, sizeof name) == 0
                              ? PyUnicode_FromString(name) : Py_NewRef(Py_None);
            if (v == NULL || PyDict_SetItemString(d, "name", v) != 0)
                Py_CLEAR(d);
            Py_XDECREF(v);
        }
        if (d == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, d);
    }
    return list;
}

/* {figure: value or None, ..., "samples", "covered_ns", "window_ns"}. */
static PyObject *metric_avg_dict(const ls_metric_avg *m)
{
    PyObject *d = PyDict_New();
    uint64_t covered = 0;
    for (int j = 0; d != NULL && j < LS_METRICS; j++) {
        PyObject *v = isnan(m->value[j]) ? Py_NewRef(Py_None) : PyFloat_FromDouble(m->value[j]);
        if (m->covered_ns[j] > covered)
            covered = m->covered_ns[j];
        if (v == NULL || PyDict_SetItemString(d, ls_metric_name(j), v) != 0)
            Py_CLEAR(d);
        Py_XDECREF(v);
    }
    PyObject *more = d == NULL ? NULL
        : ls_dict_of(3, "samples", U64(m->samples), "covered_ns", U64(covered), "window_ns",
                     U64(m->window_ns));
    if (more == NULL || PyDict_Update(d, more) != 0)
        Py_CLEAR(d);
    Py_XDECREF(more);
    return d;
}

static PyObject *metrics_pair(const ls_metric_avg *span, const ls_metric_avg *busy)
{
    return ls_dict_of(2, "span", metric_avg_dict(span), "busy", metric_avg_dict(busy));
}

/* One dict per range; with plain == 0, None for each range that is not a
 * step (its figures then come through its group: far fewer objects). */
static PyObject *range_list(const ls_records *r, const ls_analysis *a, int plain)
{
    PyObject *list = PyList_New((Py_ssize_t)r->ranges.count);
    if (list == NULL)
        return NULL;
    for (size_t i = 0; i < r->ranges.count; i++) {
        const ls_range *range = &r->ranges.items[i];
        if (!plain && range->step_index < 0) {
            PyList_SET_ITEM(list, (Py_ssize_t)i, Py_NewRef(Py_None));
            continue;
        }
        PyObject *d = timeline_dict(&a->ranges[i]);
        PyObject *extra = d == NULL ? NULL
            : ls_dict_of(7, "name", name_or_none(range->name_id), "parent",
                      PyLong_FromLong(range->parent), "depth", U64(range->depth), "step",
                      range->step_index >= 0 ? PyLong_FromLong(range->step_index)
                                             : Py_NewRef(Py_None),
                      "thread", U64(range->thread_id), "start_ns", U64(range->start_ns),
                      "end_ns", U64(range->end_ns));
        if (extra != NULL) {
            PyObject *m = a->has_samples ? metrics_pair(&a->range_span[i], &a->range_busy[i])
                                         : Py_NewRef(Py_None);
            if (m == NULL || PyDict_SetItemString(extra, "metrics", m) != 0)
                Py_CLEAR(extra);
            Py_XDECREF(m);
        }
        if (extra == NULL || PyDict_Update(d, extra) != 0) {
            Py_XDECREF(extra);
            Py_XDECREF(d);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(extra);
        PyList_SET_ITEM(list, (Py_ssize_t)i, d);
    }
    return list;
}

/* The group time lines, each with "span_ns" (its ranges' spans summed). */
static PyObject *group_list(const ls_analysis *a)
{
    PyObject *list = timeline_list(a->groups, a->group_count, 0);
    for (size_t g = 0; list != NULL && g < a->group_count; g++) {
        PyObject *span = U64(a->group_span_ns[g]);
        if (span == NULL || PyDict_SetItemString(PyList_GET_ITEM(list, (Py_ssize_t)g),
                                                 "span_ns", span) != 0)
            Py_CLEAR(list);
        Py_XDECREF(span);
    }
    return list;
}

static int compare_gap_length(const void *pa, const void *pb)
{
    const ls_gap *a = *(const ls_gap *const *)pa, *b = *(const ls_gap *const *)pb;
    uint64_t da = a->end_ns - a->start_ns, db = b->end_ns - b->start_ns;
    if (da != db)
        return da > db ? -1 : 1;
    return a->start_ns < b->start_ns ? -1 : a->start_ns > b->start_ns;
}

static PyObject *worst_gaps(const ls_records *r, const ls_analysis *a)
{
    static const char *const causes[LS_CAUSE_COUNT] = {"host", "sync", "other"};
    const ls_gap **sorted = malloc((a->gap_count ? a->gap_count : 1) * sizeof *sorted);
    if (sorted == NULL)
        return PyErr_NoMemory();
    for (size_t i = 0; i < a->gap_count; i++)
        sorted[i] = &a->gaps[i];
    qsort(sorted, a->gap_count, sizeof *sorted, compare_gap_length);
    size_t n = a->gap_count < LS_WORST_GAPS ? a->gap_count : LS_WORST_GAPS;
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list != NULL && i < n; i++) {
        const ls_gap *g = sorted[i];
        PyObject *d = ls_dict_of(
            8, "start_ns", U64(g->start_ns), "duration_ns", U64(g->end_ns - g->start_ns),
            "device", U64(g->device_id), "cause", PyUnicode_FromString(causes[g->cause]),
            "step", g->step >= 0 ? PyLong_FromLong(g->step) : Py_NewRef(Py_None),
            "stream", U64(r->ops.items[g->next_op].stream_id), "before",
            name_or_none(r->ops.items[g->next_op].name_id), "after",
            name_or_none(r->ops.items[g->prev_op].name_id));
        if (d == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, d);
    }
    free(sorted);
    return list;
}

/* The syncs: (start_ns, end_ns, blocked_ns, thread_id, step or None,
 * wait_class, [call indices]) in time order of each thread. */
static PyObject *wait_list(const ls_waits *w, size_t call_count)
{
    PyObject *list = PyList_New((Py_ssize_t)w->count);
    PyObject **calls = calloc(w->count ? w->count : 1, sizeof *calls);
    int failed = list == NULL || calls == NULL;
    for (size_t i = 0; !failed && i < w->count; i++)
        failed = (calls[i] = PyList_New(0)) == NULL;
    for (size_t c = 0; !failed && c < call_count; c++) {
        int32_t k = w->wait_of_call[c];
        if (k >= 0) {
            PyObject *index = U64(c);
            failed = index == NULL || PyList_Append(calls[k], index) != 0;
            Py_XDECREF(index);
        }
    }
    for (size_t i = 0; !failed && i < w->count; i++) {
        const ls_wait *x = &w->items[i];
        PyObject *t = Py_BuildValue(
            "(KKKKNsO)", (unsigned long long)x->start_ns, (unsigned long long)x->end_ns,
            (unsigned long long)x->blocked_ns, (unsigned long long)x->thread_id,
            x->step >= 0 ? PyLong_FromLong(x->step) : Py_NewRef(Py_None),
            ls_wait_class_name((ls_wait_class)x->wait_class), calls[i]);
        if (t == NULL)
            failed = 1;
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    for (size_t i = 0; calls != NULL && i < w->count; i++)
        Py_XDECREF(calls[i]);
    free(calls);
    if (failed) {
        Py_XDECREF(list);
        return PyErr_Occurred() ? NULL : PyErr_NoMemory();
    }
    return list;
}

/* Reads `groups` (a sequence of ints, one per range, -1 for none) into a
 * new array; *count gets 1 + the largest group.  Returns NULL with an
 * exception set on bad input or no memory. */
static int32_t *read_groups(PyObject *groups, size_t range_count, size_t *count)
{
    PyObject *seq = PySequence_Fast(groups, "analyze: groups must be a sequence of int");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int32_t *out = NULL;
    if ((size_t)n != range_count) {
        PyErr_Format(PyExc_ValueError, "analyze: groups has %zd items, the capture has %zu "
                     "ranges (one group per range, -1 for none)", n, range_count);
        goto done;
    }
    out = malloc((n ? (size_t)n : 1) * sizeof *out);
    if (out == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    *count = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyLong_Check(item) || PyBool_Check(item)) {
            PyErr_Format(PyExc_TypeError, "analyze: groups[%zd] must be an int, not %.100s",
                         i, Py_TYPE(item)->tp_name);
            goto bad_item;
        }
        int overflow = 0;
        long g = PyLong_AsLongAndOverflow(item, &overflow);
        if (overflow != 0 || g < -1 || g >= INT32_MAX) {
            PyErr_Format(PyExc_ValueError, "analyze: groups[%zd] is %R: must be between -1 "
                         "(no group) and %d", i, item, INT32_MAX - 1);
            goto bad_item;
        }
        out[i] = (int32_t)g;
        if (g >= 0 && (size_t)g + 1 > *count)
            *count = (size_t)g + 1;
    }
    goto done;
bad_item:
    free(out);
    out = NULL;
done:
    Py_DECREF(seq);
    return out;
}

static PyObject *capture_analyze(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"normal_us", "severe_us", "groups", "plain_ranges", NULL};
    double normal_us = 20.0, severe_us = 50.0;
    PyObject *groups = Py_None;
    int plain_ranges = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|ddOp:analyze", keywords, &normal_us,
                                     &severe_us, &groups, &plain_ranges))
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
    int32_t *group_of = NULL;
    size_t group_count = 0;
    if (groups != Py_None) {
        group_of = read_groups(groups, self->capture.records.ranges.count, &group_count);
        if (group_of == NULL)
            return NULL;
    }
    ls_thresholds t = {(uint64_t)(normal_us * 1000.0 + 0.5), (uint64_t)(severe_us * 1000.0 + 0.5)};
    ls_analysis a;
    int rc = ls_analyze(&self->capture.records, t, group_of, group_count, &a);
    free(group_of);
    if (rc != 0)
        return PyErr_NoMemory();
    PyObject *edges = PyList_New(LS_HIST_BINS);
    for (int i = 0; edges != NULL && i < LS_HIST_BINS; i++) {
        PyObject *v = U64(ls_hist_edges_ns[i]);
        if (v == NULL)
            Py_CLEAR(edges);
        else
            PyList_SET_ITEM(edges, i, v);
    }
    PyObject *result = ls_dict_of(
        12, "waits", wait_list(&a.waits, self->capture.records.calls.count), "unknown_copies",
        U64(a.waits.unknown_copies), "total", timeline_dict(&a.total), "devices",
        timeline_list(a.devices, a.device_count, self->capture.traced), "streams",
        timeline_list(a.streams, a.stream_count, 0), "ranges",
        range_list(&self->capture.records, &a, plain_ranges), "groups", group_list(&a),
        "worst_gaps",
        worst_gaps(&self->capture.records, &a), "ops_without_launch",
        U64(a.ops_without_launch), "ignored_records", U64(a.ignored_records),
        "histogram_edges_ns", edges, "thresholds_ns",
        Py_BuildValue("(KK)", (unsigned long long)t.normal_below_ns,
                      (unsigned long long)t.severe_above_ns));
    if (result != NULL) {
        PyObject *m = a.has_samples ? metrics_pair(&a.metrics_span, &a.metrics_busy)
                                    : Py_NewRef(Py_None);
        if (m == NULL || PyDict_SetItemString(result, "metrics", m) != 0)
            Py_CLEAR(result);
        Py_XDECREF(m);
    }
    ls_analysis_free(&a);
    return result;
}

/* range_records() -> [(name, parent, step, start_ns, end_ns)], one per range,
 * no analysis. */
static PyObject *capture_range_records(PyObject *op, PyObject *unused)
{
    (void)unused;
    const ls_records *r = &((ls_capture_object *)op)->capture.records;
    PyObject *list = PyList_New((Py_ssize_t)r->ranges.count);
    for (size_t i = 0; list != NULL && i < r->ranges.count; i++) {
        const ls_range *range = &r->ranges.items[i];
        PyObject *name = name_or_none(range->name_id);
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
    const ls_capture *c = &((ls_capture_object *)op)->capture;
    const ls_records *r = &c->records;
    PyObject *info = ls_dict_of(21, "ops_before_start", U64(c->ops_before_start), "note",
                   c->note[0] ? PyUnicode_FromString(c->note) : Py_NewRef(Py_None), "traced", PyBool_FromLong(c->traced), "injected",
                   PyBool_FromLong(c->injected), "reason",
                   c->reason[0] ? PyUnicode_FromString(c->reason) : Py_NewRef(Py_None),
                   "stop_error",
                   c->stop_error[0] ? PyUnicode_FromString(c->stop_error) : Py_NewRef(Py_None),
                   "start_ns", U64(r->start_ns), "stop_ns", U64(r->stop_ns), "ops",
                   U64(r->ops.count), "apis", U64(r->apis.count), "syncs", U64(r->syncs.count),
                   "ranges", U64(r->ranges.count), "dropped_records", U64(r->dropped_records),
                   "invalid_records", U64(r->invalid_records), "range_mismatches",
                   U64(c->range_mismatches), "ranges_left_open", U64(c->ranges_left_open),
                   "drains", U64(c->drains), "drain_ns", U64(c->drain_ns), "stop_ns_cost",
                   U64(c->stop_ns_cost), "buffer_bytes", U64(c->buffer_bytes),
                   "buffers_refused", U64(c->buffers_refused));
    PyObject *more = info == NULL ? NULL
        : ls_dict_of(6, "calls_injected", PyBool_FromLong(c->calls_injected),
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
        : ls_dict_of(10, "finish_ns", U64(c->finish_ns), "finish_wait_ns",
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
        : ls_dict_of(3, "start_phases_ns", Py_NewRef(start_phases), "stop_phases_ns",
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
        pm_dict = ls_dict_of(
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
        PyObject *more_pm = ls_dict_of(
            10, "sampler_reused", PyBool_FromLong(pm->sampler_reused),
            "restarts", U64(pm->restarts),
            "reconfigures", U64(pm->reconfigures),
            "decode_data_ns", U64(pm->decode_data_ns),
            "evaluate_ns", U64(pm->evaluate_ns),
            "clock_shift_ns", PyLong_FromLongLong(c->sample_clock_shift_ns),
            "phases_ns", phases,
            "config_reused", PyBool_FromLong(pm->config_reused),
            "max_samples", PyLong_FromUnsignedLong(pm->max_samples),
            "decoder_error",
            c->decoder_error[0] ? PyUnicode_FromString(c->decoder_error) : Py_NewRef(Py_None));
        if (pm_dict != NULL && (more_pm == NULL || PyDict_Update(pm_dict, more_pm) != 0))
            Py_CLEAR(pm_dict);
        Py_XDECREF(more_pm);
        PyObject *setup = pm_dict == NULL ? NULL
            : ls_dict_of(5, "config_source", PyUnicode_FromString(pm->config_source),
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
        metrics = ls_dict_of(5, "sampled", PyBool_FromLong(c->sampled), "samples_injected",
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
    const ls_records *r = &((ls_capture_object *)op)->capture.records;
    PyObject *list = PyList_New((Py_ssize_t)r->samples.count);
    for (size_t i = 0; list != NULL && i < r->samples.count; i++) {
        const ls_sample *x = &r->samples.items[i];
        PyObject *values = PyDict_New();
        for (int j = 0; values != NULL && j < LS_METRICS; j++) {
            if (isnan(x->values[j]))
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
    const ls_records *r = &((ls_capture_object *)op)->capture.records;
    PyObject *list = PyList_New((Py_ssize_t)r->calls.count);
    for (size_t i = 0; list != NULL && i < r->calls.count; i++) {
        PyObject *d = ls_call_to_python(&r->calls.items[i], &r->codes);
        if (d == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, d);
    }
    return list;
}

static PyObject *capture_ops(PyObject *op, PyObject *unused)
{
    (void)unused;
    static const char *const kinds[] = {"kernel", "memcpy", "memset"};
    const ls_records *r = &((ls_capture_object *)op)->capture.records;
    PyObject *list = PyList_New((Py_ssize_t)r->ops.count);
    for (size_t i = 0; list != NULL && i < r->ops.count; i++) {
        const ls_op *o = &r->ops.items[i];
        PyObject *name = name_or_none(o->name_id);
        PyObject *t = name == NULL ? NULL
            : Py_BuildValue("(sKKIIINK)", kinds[o->kind], (unsigned long long)o->start_ns,
                            (unsigned long long)o->end_ns, o->device_id, o->stream_id,
                            o->correlation_id, name, (unsigned long long)o->bytes);
        if (t == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    return list;
}

/* The host-side records (launch and other API calls, host syncs) as
 * tuples, like ops(): what a recording needs to replay a capture through
 * _inject.  Returns a new list, or NULL with an exception set. */
static PyObject *capture_apis(PyObject *op, PyObject *unused)
{
    (void)unused;
    const ls_records *r = &((ls_capture_object *)op)->capture.records;
    PyObject *list = PyList_New((Py_ssize_t)r->apis.count);
    for (size_t i = 0; list != NULL && i < r->apis.count; i++) {
        const ls_api *a = &r->apis.items[i];
        PyObject *t = Py_BuildValue("(KKIIII)", (unsigned long long)a->start_ns,
                                    (unsigned long long)a->end_ns, a->correlation_id,
                                    a->thread_id, a->cbid, a->domain);
        if (t == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    return list;
}

static PyObject *capture_syncs(PyObject *op, PyObject *unused)
{
    (void)unused;
    const ls_records *r = &((ls_capture_object *)op)->capture.records;
    PyObject *list = PyList_New((Py_ssize_t)r->syncs.count);
    for (size_t i = 0; list != NULL && i < r->syncs.count; i++) {
        const ls_sync *s = &r->syncs.items[i];
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

static PyMethodDef capture_methods[] = {
    {"analyze", (PyCFunction)(void (*)(void))capture_analyze, METH_VARARGS | METH_KEYWORDS,
     "analyze(normal_us=20.0, severe_us=50.0, groups=None, plain_ranges=True) -> dict of gap "
     "figures (ns); groups: one int per range (-1: none) -> 'groups', one time line per "
     "group; plain_ranges=False: None in 'ranges' for each range that is not a step."},
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
    {"syncs", capture_syncs, METH_NOARGS,
     "Host syncs as (start_ns, end_ns, stream, correlation_id, type)."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot capture_slots[] = {
    {Py_tp_doc, "The records of one finished loopscope profile.  loopscope's worker thread "
                "finishes them after the stop; the first look-up of anything on the object "
                "waits for that."},
    {Py_tp_methods, capture_methods},
    {Py_tp_getattro, capture_getattro},
    {Py_tp_dealloc, capture_dealloc},
    {0, NULL},
};

PyType_Spec ls_capture_type_spec = {
    .name = "loopscope._core.Capture",
    .basicsize = sizeof(ls_capture_object),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = capture_slots,
};
