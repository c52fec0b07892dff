/* ls_capture_type: the records of one finished profile, owned by a Python
 * object, and their analysis returned as plain dicts (ns integers; the
 * Python layer shapes units and names). */
#include "ls_module.h"

#include "ls_analysis.h"
#include "ls_cuda.h"
#include "ls_names.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LS_WORST_GAPS 10

typedef struct {
    PyObject_HEAD
    ls_capture capture;
} ls_capture_object;

PyObject *ls_capture_new(PyTypeObject *type, ls_capture *capture)
{
    ls_capture_object *self = PyObject_New(ls_capture_object, type);
    if (self == NULL) {
        ls_records_clear(&capture->records);
        return NULL;
    }
    self->capture = *capture;
    return (PyObject *)self;
}

static void capture_dealloc(PyObject *op)
{
    PyTypeObject *type = Py_TYPE(op);
    ls_records_clear(&((ls_capture_object *)op)->capture.records);
    type->tp_free(op);
    Py_DECREF(type);
}

/* Builds a dict from alternating (const char *key, PyObject *value) pairs,
 * stealing each value; NULL values make it fail (after releasing the rest). */
static PyObject *dict_of(int pairs, ...)
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
    return dict_of(15, "count", U64(s->count), "normal", U64(s->normal), "warning",
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
    return dict_of(9, "device", device, "stream", stream, "kernels", U64(t->kernels),
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

static PyObject *range_list(const ls_records *r, const ls_analysis *a)
{
    PyObject *list = PyList_New((Py_ssize_t)r->ranges.count);
    if (list == NULL)
        return NULL;
    for (size_t i = 0; i < r->ranges.count; i++) {
        const ls_range *range = &r->ranges.items[i];
        PyObject *d = timeline_dict(&a->ranges[i]);
        PyObject *extra = d == NULL ? NULL
            : dict_of(7, "name", name_or_none(range->name_id), "parent",
                      PyLong_FromLong(range->parent), "depth", U64(range->depth), "step",
                      range->step_index >= 0 ? PyLong_FromLong(range->step_index)
                                             : Py_NewRef(Py_None),
                      "thread", U64(range->thread_id), "start_ns", U64(range->start_ns),
                      "end_ns", U64(range->end_ns));
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
        PyObject *d = dict_of(
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

static PyObject *capture_analyze(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"normal_us", "severe_us", NULL};
    double normal_us = 20.0, severe_us = 50.0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|dd:analyze", keywords, &normal_us,
                                     &severe_us))
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
    ls_thresholds t = {(uint64_t)(normal_us * 1000.0 + 0.5), (uint64_t)(severe_us * 1000.0 + 0.5)};
    ls_analysis a;
    if (ls_analyze(&self->capture.records, t, &a) != 0)
        return PyErr_NoMemory();
    PyObject *edges = PyList_New(LS_HIST_BINS);
    for (int i = 0; edges != NULL && i < LS_HIST_BINS; i++) {
        PyObject *v = U64(ls_hist_edges_ns[i]);
        if (v == NULL)
            Py_CLEAR(edges);
        else
            PyList_SET_ITEM(edges, i, v);
    }
    PyObject *result = dict_of(
        9, "total", timeline_dict(&a.total), "devices",
        timeline_list(a.devices, a.device_count, self->capture.traced), "streams",
        timeline_list(a.streams, a.stream_count, 0), "ranges",
        range_list(&self->capture.records, &a), "worst_gaps",
        worst_gaps(&self->capture.records, &a), "ops_without_launch",
        U64(a.ops_without_launch), "ignored_records", U64(a.ignored_records),
        "histogram_edges_ns", edges, "thresholds_ns",
        Py_BuildValue("(KK)", (unsigned long long)t.normal_below_ns,
                      (unsigned long long)t.severe_above_ns));
    ls_analysis_free(&a);
    return result;
}

static PyObject *capture_info(PyObject *op, PyObject *unused)
{
    (void)unused;
    const ls_capture *c = &((ls_capture_object *)op)->capture;
    const ls_records *r = &c->records;
    return dict_of(21, "ops_before_start", U64(c->ops_before_start), "note",
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
     "analyze(normal_us=20.0, severe_us=50.0) -> dict of gap figures (ns)."},
    {"info", capture_info, METH_NOARGS, "Counts, flags and costs of the capture."},
    {"ops", capture_ops, METH_NOARGS,
     "GPU ops as (kind, start_ns, end_ns, device, stream, correlation_id, name, bytes)."},
    {"apis", capture_apis, METH_NOARGS,
     "Host API calls as (start_ns, end_ns, correlation_id, thread_id, cbid, domain)."},
    {"syncs", capture_syncs, METH_NOARGS,
     "Host syncs as (start_ns, end_ns, stream, correlation_id, type)."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot capture_slots[] = {
    {Py_tp_doc, "The records of one finished loopscope profile."},
    {Py_tp_methods, capture_methods},
    {Py_tp_dealloc, capture_dealloc},
    {0, NULL},
};

PyType_Spec ls_capture_type_spec = {
    .name = "loopscope._core.Capture",
    .basicsize = sizeof(ls_capture_object),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = capture_slots,
};
