/* ls_model_type: see ls_model_type.h. */
#include "ls_model_type.h"

#include "ls_cbids.h"
#include "ls_cuda.h"
#include "ls_model_build.h"
#include "ls_model_queries.h"
#include "ls_names.h"
#include "ls_pyvalues.h"
#include "ls_trace_export.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#define U64(v) ls_py_u64(v)
#define LS_MAX_BINS 1000000

typedef struct {
    PyObject_HEAD
    PyObject *owner;          /* what owns the records (its Capture's capsule): kept alive */
    const ls_capture *capture;
    ls_model model;
} ls_model_object;

static const char *const cause_names[LS_CAUSE_COUNT] = {"host", "sync", "other"};
static const char *const class_names[LS_CLASS_COUNT] = {"normal", "warning", "severe"};

PyObject *ls_model_new(PyTypeObject *type, PyObject *owner, const ls_capture *capture,
                       const ls_model_options *options)
{
    ls_model_object *self = PyObject_GC_New(ls_model_object, type);
    if (self == NULL)
        return NULL;
    self->owner = Py_NewRef(owner);
    self->capture = capture;
    int rc = ls_model_build(&capture->records, options, &self->model);
    PyObject_GC_Track(self);
    if (rc == -2) {
        Py_DECREF(self);
        PyErr_SetString(PyExc_ValueError, "steps: a range index is past the capture's ranges "
                                          "or given twice");
        return NULL;
    }
    if (rc != 0) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

static int model_traverse(PyObject *op, visitproc visit, void *arg)
{
    Py_VISIT(((ls_model_object *)op)->owner);
    Py_VISIT(Py_TYPE(op));
    return 0;
}

static int model_clear(PyObject *op)
{
    Py_CLEAR(((ls_model_object *)op)->owner);
    return 0;
}

static void model_dealloc(PyObject *op)
{
    PyTypeObject *type = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    ls_model_free(&((ls_model_object *)op)->model);
    model_clear(op);
    type->tp_free(op);
    Py_DECREF(type);
}

/* -- dicts -------------------------------------------------------------- */

static PyObject *gap_stats_dict(const ls_gap_stats *s)
{
    PyObject *hist = PyList_New(LS_HIST_BINS);
    for (int i = 0; hist != NULL && i < LS_HIST_BINS; i++) {
        PyObject *v = U64(s->histogram[i]);
        if (v == NULL)
            Py_CLEAR(hist);
        else
            PyList_SET_ITEM(hist, i, v);
    }
    if (hist == NULL)
        return NULL;
    return ls_py_dict_of(
        17, "sync_overlap_ns", U64(s->sync_overlap_ns), "count", U64(s->count), "normal", U64(s->by_class[LS_CLASS_NORMAL]), "warning",
        U64(s->by_class[LS_CLASS_WARNING]), "severe", U64(s->by_class[LS_CLASS_SEVERE]), "host",
        U64(s->by_cause[LS_CAUSE_HOST]), "sync", U64(s->by_cause[LS_CAUSE_SYNC]), "other",
        U64(s->by_cause[LS_CAUSE_OTHER]), "total_ns", U64(s->total_ns), "max_ns",
        U64(s->max_ns), "p50_ns", U64(s->p50_ns), "p99_ns", U64(s->p99_ns), "histogram", hist,
        "host_ns", U64(s->by_cause_ns[LS_CAUSE_HOST]), "sync_ns",
        U64(s->by_cause_ns[LS_CAUSE_SYNC]), "other_ns", U64(s->by_cause_ns[LS_CAUSE_OTHER]),
        "merged", U64(s->merged));
}

static PyObject *id_or_none(uint32_t id)
{
    return id == LS_MODEL_NO_ID ? Py_NewRef(Py_None) : U64(id);
}

/* The line's figures, with "gaps" when `gaps` is not NULL. */
static PyObject *line_dict(const ls_line *t, const ls_gap_stats *gaps)
{
    PyObject *d = ls_py_dict_of(
        16, "device", id_or_none(t->device_id), "stream", id_or_none(t->stream_id), "kernels",
        U64(t->kernels), "memcpys", U64(t->memcpys), "memsets", U64(t->memsets), "graphs",
        U64(t->graphs), "graph_ns", U64(t->graph_ns), "busy_ns",
        U64(t->busy_ns), "compute_ns", U64(t->compute_ns), "comm_ns", U64(t->comm_ns),
        "first_ns", U64(t->first_ns), "last_ns", U64(t->last_ns), "kernel_ns",
        U64(t->kernel_ns), "shaped_ns",
        U64(t->shaped_ns), "filled_ns", U64(t->filled_ns), "replay_idle_ns",
        U64(t->replay_idle_ns));
    if (d != NULL && gaps != NULL) {
        PyObject *g = gap_stats_dict(gaps);
        if (g == NULL || PyDict_SetItemString(d, "gaps", g) != 0)
            Py_CLEAR(d);
        Py_XDECREF(g);
    }
    return d;
}

/* Sets d[key] = value (stolen); on failure releases d and returns NULL. */
static PyObject *with_item(PyObject *d, const char *key, PyObject *value)
{
    if (d != NULL && (value == NULL || PyDict_SetItemString(d, key, value) != 0))
        Py_CLEAR(d);
    Py_XDECREF(value);
    return d;
}

/* Merges more (stolen) into d; on failure releases d. */
static PyObject *with_items(PyObject *d, PyObject *more)
{
    if (d != NULL && (more == NULL || PyDict_Update(d, more) != 0))
        Py_CLEAR(d);
    Py_XDECREF(more);
    return d;
}

static PyObject *float_or_none(double v)
{
    return isnan(v) ? Py_NewRef(Py_None) : PyFloat_FromDouble(v);
}

/* {figure: value or None, ..., "samples", "covered_ns", "window_ns"}. */
static PyObject *metric_avg_dict(const ls_metric_avg *m)
{
    PyObject *d = PyDict_New();
    uint64_t covered = 0;
    for (int j = 0; d != NULL && j < LS_METRICS; j++) {
        if (m->covered_ns[j] > covered)
            covered = m->covered_ns[j];
        d = with_item(d, ls_metric_name(j), float_or_none(m->value[j]));
    }
    return with_items(d, ls_py_dict_of(3, "samples", U64(m->samples), "covered_ns",
                                       U64(covered), "window_ns", U64(m->window_ns)));
}

static PyObject *metrics_dict(const ls_metrics *m)
{
    static const char *const from[] = {NULL, "ops", "gr_active"};
    return ls_py_dict_of(3, "span", metric_avg_dict(&m->span), "busy", metric_avg_dict(&m->busy),
                         "busy_from", ls_py_text_or_none(from[m->busy_from]));
}

static PyObject *group_metrics_dict(const ls_group_metrics *g)
{
    PyObject *windows[2];
    for (int w = 0; w < 2; w++) {
        PyObject *d = PyDict_New();
        for (int j = 0; d != NULL && j < LS_METRICS; j++)
            d = with_item(d, ls_metric_name(j), float_or_none(g->value[w][j]));
        windows[w] = d;
    }
    return ls_py_dict_of(3, "span", windows[0], "busy", windows[1], "samples",
                         U64(g->samples));
}

/* A list of n items made by make(self, i); NULL with an exception set. */
static PyObject *list_of(ls_model_object *self, size_t n,
                         PyObject *(*make)(ls_model_object *, size_t))
{
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list != NULL && i < n; i++) {
        PyObject *item = make(self, i);
        if (item == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    return list;
}

/* -- readiness and kernels ------------------------------------------------ */

/* A step's (or the whole capture's) ls_step_readiness as a dict. */
static PyObject *readiness_dict(const ls_step_readiness *x)
{
    return ls_py_dict_of(
        13, "graph_launches", U64(x->graph_launches), "replay_host_ns", U64(x->replay_host_ns),
        "replay_pairs", U64(x->replay_pairs), "memory_calls", U64(x->memory_calls),
        "first_memory_call", ls_py_index_or_none(x->first_memory_call), "stream_ordered",
        U64(x->stream_ordered), "pageable_copies", U64(x->pageable_copies),
        "first_pageable_op", ls_py_index_or_none(x->first_pageable_op),
        "first_pageable_call", ls_py_index_or_none(x->first_pageable_call), "ops", U64(x->ops),
        "signature", U64(x->signature), "launch_calls", U64(x->launch_calls),
        "pageable_call_ns", U64(x->pageable_call_ns));
}

static PyObject *triple(uint32_t a, uint32_t b, uint32_t c)
{
    return Py_BuildValue("(III)", (unsigned int)a, (unsigned int)b, (unsigned int)c);
}

static PyObject *kernel_item(ls_model_object *self, size_t i)
{
    const ls_kernel_entry *e = &self->model.kernels.items[i];
    const ls_op *k = &e->shape;
    PyObject *shape = ls_py_dict_of(
        7, "grid", triple(k->grid_x, k->grid_y, k->grid_z), "block",
        triple(k->block_x, k->block_y, k->block_z), "registers", U64(k->registers),
        "shared_bytes", U64(k->shared_bytes), "device", U64(k->device_id), "count",
        U64(e->shape_count), "total_ns", U64(e->shape_ns));
    return ls_py_dict_of(8, "name", ls_py_name_or_none(e->name_id), "count", U64(e->count),
                         "total_ns", U64(e->total_ns), "max_ns", U64(e->max_ns), "shapes",
                         U64(e->shapes), "shaped_ns", U64(e->shaped_ns), "filled_ns",
                         PyFloat_FromDouble(e->filled_ns), "shape", shape);
}

/* kernels(n=None) -> the n kernel names that took the most time (all with None). */
static PyObject *model_kernels(PyObject *op, PyObject *args)
{
    ls_model_object *self = (ls_model_object *)op;
    PyObject *limit = Py_None;
    if (!PyArg_ParseTuple(args, "|O:kernels", &limit))
        return NULL;
    size_t n = self->model.kernels.count;
    if (limit != Py_None) {
        Py_ssize_t v = PyLong_AsSsize_t(limit);
        if (v == -1 && PyErr_Occurred())
            return NULL;
        if (v < 0) {
            PyErr_Format(PyExc_ValueError, "kernels: n must be >= 0 or None, got %zd", v);
            return NULL;
        }
        if ((size_t)v < n)
            n = (size_t)v;
    }
    return list_of(self, n, kernel_item);
}

/* sync_gaps() -> per sync (as syncs()), the idle ns of the gaps it caused. */
static PyObject *model_sync_gaps(PyObject *op, PyObject *unused)
{
    (void)unused;
    const ls_model *m = &((ls_model_object *)op)->model;
    PyObject *list = PyList_New((Py_ssize_t)m->syncs.count);
    for (size_t i = 0; list != NULL && i < m->syncs.count; i++) {
        PyObject *v = U64(m->sync_gap_ns[i]);
        if (v == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, v);
    }
    return list;
}

/* -- the whole, devices, streams ------------------------------------------ */

static PyObject *model_total(PyObject *op, PyObject *unused)
{
    (void)unused;
    const ls_model *m = &((ls_model_object *)op)->model;
    return with_item(line_dict(&m->total.line, &m->total.gaps), "readiness",
                     readiness_dict(&m->readiness.total));
}

/* The device's facts (SM count, ...) as dict items, None where unknown. */
static PyObject *facts_dict(const ls_device_facts *f)
{
    ls_device_facts none = {0, 0, 0, 0, 0, 0};
    if (f == NULL)
        f = &none;
#define OR_NONE(v) ((v) ? U64(v) : Py_NewRef(Py_None))
    return ls_py_dict_of(5, "sm_count", OR_NONE(f->sm_count), "max_threads_per_sm",
                         OR_NONE(f->max_threads_per_sm), "max_blocks_per_sm",
                         OR_NONE(f->max_blocks_per_sm), "registers_per_sm",
                         OR_NONE(f->registers_per_sm), "shared_bytes_per_sm",
                         OR_NONE(f->shared_bytes_per_sm));
#undef OR_NONE
}

static PyObject *device_item(ls_model_object *self, size_t i)
{
    const ls_timeline *t = &self->model.devices[i];
    /* a device's id is always real (UINT32_MAX is a valid id, not "none") */
    PyObject *d = with_item(line_dict(&t->line, &t->gaps), "device", U64(t->line.device_id));
    char name[256];
    int named = self->capture->traced &&
                ls_cuda_device_name((int)t->line.device_id, name, sizeof name) == 0;
    d = with_item(d, "name", named ? PyUnicode_FromString(name) : Py_NewRef(Py_None));
    return with_items(d, facts_dict(ls_records_device(&self->capture->records,
                                                      t->line.device_id)));
}

static PyObject *stream_item(ls_model_object *self, size_t i)
{
    const ls_timeline *t = &self->model.streams[i];
    /* a stream's device and stream ids are always real */
    PyObject *d = with_item(line_dict(&t->line, &t->gaps), "device", U64(t->line.device_id));
    return with_item(d, "stream", U64(t->line.stream_id));
}

static PyObject *model_devices(PyObject *op, PyObject *unused)
{
    (void)unused;
    ls_model_object *self = (ls_model_object *)op;
    return list_of(self, self->model.device_count, device_item);
}

static PyObject *model_streams(PyObject *op, PyObject *unused)
{
    (void)unused;
    ls_model_object *self = (ls_model_object *)op;
    return list_of(self, self->model.stream_count, stream_item);
}

static PyObject *model_metrics(PyObject *op, PyObject *unused)
{
    (void)unused;
    const ls_model *m = &((ls_model_object *)op)->model;
    return m->has_samples ? metrics_dict(&m->metrics) : Py_NewRef(Py_None);
}

/* -- steps, ranges, groups ------------------------------------------------ */

/* The steps in use (a live step index may be skipped): their numbers. */
static size_t used_steps(const ls_model *m, size_t *out)
{
    size_t n = 0;
    for (size_t s = 0; s < m->steps.count; s++)
        if (m->steps.range_of[s] != LS_MODEL_NO_ID) {
            if (out)
                out[n] = s;
            n++;
        }
    return n;
}

static PyObject *step_dict(ls_model_object *self, size_t s)
{
    const ls_model *m = &self->model;
    const ls_range *range = &self->capture->records.ranges.items[m->steps.range_of[s]];
    const ls_timeline *t = ls_model_step_line(m, s);
    PyObject *d = line_dict(&t->line, &t->gaps);
    d = with_items(d, ls_py_dict_of(
        8, "index", U64(s), "range", U64(m->steps.range_of[s]), "name",
        ls_py_range_name(range), "thread", U64(range->thread_id), "start_ns",
        U64(range->start_ns), "end_ns", U64(range->end_ns), "syncs", U64(m->step_syncs[s]),
        "sync_blocked_ns", U64(m->step_sync_blocked_ns[s])));
    d = with_item(d, "readiness", readiness_dict(&m->readiness.steps[s]));
    return with_item(d, "metrics", m->has_samples ? metrics_dict(&m->step_metrics[s])
                                                  : Py_NewRef(Py_None));
}

static PyObject *model_steps(PyObject *op, PyObject *unused)
{
    (void)unused;
    ls_model_object *self = (ls_model_object *)op;
    size_t n = used_steps(&self->model, NULL);
    size_t *numbers = PyMem_Malloc((n ? n : 1) * sizeof *numbers);
    if (numbers == NULL)
        return PyErr_NoMemory();
    used_steps(&self->model, numbers);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list != NULL && i < n; i++) {
        PyObject *d = step_dict(self, numbers[i]);
        if (d == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, d);
    }
    PyMem_Free(numbers);
    return list;
}

static PyObject *range_item(ls_model_object *self, size_t i)
{
    const ls_model *m = &self->model;
    const ls_range *range = &self->capture->records.ranges.items[i];
    PyObject *d = line_dict(ls_model_range_line(m, i), NULL);
    d = with_items(d, ls_py_dict_of(
        8, "name", ls_py_range_name(range), "parent", PyLong_FromLong(range->parent),
        "depth", U64(range->depth), "step", ls_py_index_or_none(m->steps.step_of[i]), "group",
        ls_py_index_or_none(m->groups.group_of[i]), "thread", U64(range->thread_id),
        "start_ns", U64(range->start_ns), "end_ns", U64(range->end_ns)));
    return with_item(d, "metrics", m->has_samples ? metrics_dict(&m->range_metrics[i])
                                                  : Py_NewRef(Py_None));
}

static PyObject *model_ranges(PyObject *op, PyObject *unused)
{
    (void)unused;
    ls_model_object *self = (ls_model_object *)op;
    return list_of(self, self->capture->records.ranges.count, range_item);
}

/* A group's name: its first range's name (ls_range_name) from byte
 * `offset` on (past a step's prefix); None when unknown. */
static PyObject *group_name(const ls_range *first, uint32_t offset)
{
    char small[256], *text = small;
    size_t n = ls_range_name(first, small, sizeof small);
    if (n == SIZE_MAX || offset > n)
        Py_RETURN_NONE;
    if (n >= sizeof small) {
        text = PyMem_Malloc(n + 1);
        if (text == NULL)
            return PyErr_NoMemory();
        ls_range_name(first, text, n + 1);
    }
    PyObject *name = PyUnicode_DecodeUTF8(text + offset, (Py_ssize_t)(n - offset), "replace");
    if (text != small)
        PyMem_Free(text);
    return name;
}

static PyObject *group_item(ls_model_object *self, size_t g)
{
    const ls_model *m = &self->model;
    const ls_group *group = &m->groups.items[g];
    const ls_range *first = &self->capture->records.ranges.items[group->first_range];
    const ls_timeline *t = ls_model_group_line(m, g);
    PyObject *d = line_dict(&t->line, &t->gaps);
    d = with_items(d, ls_py_dict_of(
        7, "name", group_name(first, group->key_offset), "parent",
        PyLong_FromLong(group->parent), "depth", U64(group->depth), "step_prefixed",
        PyBool_FromLong(group->step_prefixed), "count", U64(group->count), "host_ns",
        U64(group->host_ns), "span_ns", U64(ls_model_group_span_ns(m, g))));
    return with_item(d, "metrics", m->has_samples ? group_metrics_dict(&m->group_metrics[g])
                                                  : Py_NewRef(Py_None));
}

static PyObject *model_groups(PyObject *op, PyObject *unused)
{
    (void)unused;
    ls_model_object *self = (ls_model_object *)op;
    return list_of(self, self->model.groups.count, group_item);
}

/* -- syncs and gaps ------------------------------------------------------ */

/* The syncs: (start_ns, end_ns, blocked_ns, thread_id, step or None,
 * wait_class, [call indices]) in time order of each thread. */
static PyObject *model_syncs(PyObject *op, PyObject *unused)
{
    (void)unused;
    ls_model_object *self = (ls_model_object *)op;
    const ls_syncs *w = &self->model.syncs;
    size_t call_count = self->capture->records.calls.count;
    PyObject *list = PyList_New((Py_ssize_t)w->count);
    PyObject **calls = PyMem_Calloc(w->count ? w->count : 1, sizeof *calls);
    int failed = list == NULL || calls == NULL;
    for (size_t i = 0; !failed && i < w->count; i++)
        failed = (calls[i] = PyList_New(0)) == NULL;
    for (size_t c = 0; !failed && c < call_count; c++) {
        int32_t k = w->sync_of_call[c];
        if (k >= 0) {
            PyObject *index = U64(c);
            failed = index == NULL || PyList_Append(calls[k], index) != 0;
            Py_XDECREF(index);
        }
    }
    for (size_t i = 0; !failed && i < w->count; i++) {
        const ls_sync *x = &w->items[i];
        PyObject *t = Py_BuildValue(
            "(KKKKNsO)", (unsigned long long)x->start_ns, (unsigned long long)x->end_ns,
            (unsigned long long)x->blocked_ns, (unsigned long long)x->thread_id,
            ls_py_index_or_none(x->step), ls_wait_class_name((ls_wait_class)x->wait_class),
            calls[i]);
        if (t == NULL)
            failed = 1;
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    for (size_t i = 0; calls != NULL && i < w->count; i++)
        Py_XDECREF(calls[i]);
    PyMem_Free(calls);
    if (failed) {
        Py_XDECREF(list);
        return PyErr_Occurred() ? NULL : PyErr_NoMemory();
    }
    return list;
}

static PyObject *gap_dict(ls_model_object *self, const ls_gap *g)
{
    const ls_op *ops = self->capture->records.ops.items;
    return ls_py_dict_of(
        9, "start_ns", U64(g->start_ns), "duration_ns", U64(g->end_ns - g->start_ns), "device",
        U64(g->device_id), "stream", U64(g->stream_id), "cause",
        PyUnicode_FromString(cause_names[g->cause]), "class",
        PyUnicode_FromString(class_names[g->gap_class]), "step", ls_py_index_or_none(g->step),
        "before", ls_py_name_or_none(ops[g->next_op].name_id), "after",
        ls_py_name_or_none(ops[g->prev_op].name_id));
}

static PyObject *model_worst_gaps(PyObject *op, PyObject *args)
{
    ls_model_object *self = (ls_model_object *)op;
    Py_ssize_t n = 10;
    if (!PyArg_ParseTuple(args, "|n:worst_gaps", &n))
        return NULL;
    if (n < 0) {
        PyErr_Format(PyExc_ValueError, "worst_gaps: n must be >= 0, got %zd", n);
        return NULL;
    }
    if ((size_t)n > self->model.gap_count)
        n = (Py_ssize_t)self->model.gap_count;
    uint32_t *idx = PyMem_Malloc((n ? (size_t)n : 1) * sizeof *idx);
    if (idx == NULL)
        return PyErr_NoMemory();
    size_t kept = ls_model_worst_gaps(&self->model, (size_t)n, idx);
    PyObject *list = PyList_New((Py_ssize_t)kept);
    for (size_t i = 0; list != NULL && i < kept; i++) {
        PyObject *d = gap_dict(self, &self->model.gaps[idx[i]]);
        if (d == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, d);
    }
    PyMem_Free(idx);
    return list;
}

/* -- columns ------------------------------------------------------------- */

/* A memoryview of format `fmt` over `bytes` (stolen). */
static PyObject *typed_view(PyObject *bytes, const char *fmt)
{
    if (bytes == NULL)
        return NULL;
    PyObject *view = PyMemoryView_FromObject(bytes);
    Py_DECREF(bytes);
    if (view == NULL)
        return NULL;
    PyObject *typed = PyObject_CallMethod(view, "cast", "s", fmt);
    Py_DECREF(view);
    return typed;
}

/* One column: `size`-byte items at base + i * stride, for i < n. */
typedef struct {
    const char *base;
    size_t stride, size, n;
    const char *fmt;
} ls_column;

/* A memoryview of format `fmt` over a new bytes object holding the column. */
static PyObject *column_view(ls_column c)
{
    PyObject *bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(c.n * c.size));
    if (bytes != NULL) {
        char *out = PyBytes_AS_STRING(bytes);
        for (size_t i = 0; i < c.n; i++)
            memcpy(out + i * c.size, c.base + i * c.stride, c.size);
    }
    return typed_view(bytes, c.fmt);
}

/* A field inside an array of records (NULL when there is no array: no offset to NULL). */
static const char *field_of(const void *array, size_t offset)
{
    return array ? (const char *)array + offset : NULL;
}

#define FIELD(array, type, field, fmt, n) \
    {field_of((array), offsetof(type, field)), sizeof(type), sizeof(((type *)0)->field), (n), \
     (fmt)}
#define ARRAY(array, fmt, n) {(const char *)(array), sizeof *(array), sizeof *(array), (n), (fmt)}

static const char *const op_column_names[] = {
    "start_ns", "end_ns", "device", "stream", "kind", "correlation", "launch_ns", "step",
    "range", "group", "comm", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
    "registers", "shared_bytes", "copy_kind", "host_memory", "fill",
};

static ls_column op_column(const ls_model_object *self, int which)
{
    const ls_op *ops = self->capture->records.ops.items;
    const ls_model *m = &self->model;
    size_t n = self->capture->records.ops.count;
    const ls_column columns[] = {
        FIELD(ops, ls_op, start_ns, "Q", n),    FIELD(ops, ls_op, end_ns, "Q", n),
        FIELD(ops, ls_op, device_id, "I", n),   FIELD(ops, ls_op, stream_id, "I", n),
        FIELD(ops, ls_op, kind, "B", n),        FIELD(ops, ls_op, correlation_id, "I", n),
        ARRAY(m->op_launch_ns, "Q", n),         ARRAY(m->op_step, "i", n),
        ARRAY(m->op_range, "i", n),             ARRAY(m->op_group, "i", n),
        ARRAY(m->op_comm, "B", n),              FIELD(ops, ls_op, grid_x, "I", n),
        FIELD(ops, ls_op, grid_y, "H", n),      FIELD(ops, ls_op, grid_z, "H", n),
        FIELD(ops, ls_op, block_x, "H", n),     FIELD(ops, ls_op, block_y, "H", n),
        FIELD(ops, ls_op, block_z, "H", n),     FIELD(ops, ls_op, registers, "H", n),
        FIELD(ops, ls_op, shared_bytes, "I", n), FIELD(ops, ls_op, copy_kind, "B", n),
        FIELD(ops, ls_op, host_memory, "B", n), ARRAY(m->op_fill, "d", n),
    };
    return columns[which];
}

static const char *const gap_column_names[] = {
    "start_ns", "end_ns", "device", "stream", "class", "cause", "step", "next_op", "prev_op",
};

static ls_column gap_column(const ls_model_object *self, int which)
{
    const ls_gap *gaps = self->model.gaps;
    size_t n = self->model.gap_count;
    const ls_column columns[] = {
        FIELD(gaps, ls_gap, start_ns, "Q", n),  FIELD(gaps, ls_gap, end_ns, "Q", n),
        FIELD(gaps, ls_gap, device_id, "I", n), FIELD(gaps, ls_gap, stream_id, "I", n),
        FIELD(gaps, ls_gap, gap_class, "B", n), FIELD(gaps, ls_gap, cause, "B", n),
        FIELD(gaps, ls_gap, step, "i", n),      FIELD(gaps, ls_gap, next_op, "I", n),
        FIELD(gaps, ls_gap, prev_op, "I", n),
    };
    return columns[which];
}

#define COLUMNS(names) ((int)(sizeof names / sizeof names[0]))

static PyObject *model_op_column(PyObject *op, PyObject *name)
{
    for (int k = 0; PyUnicode_Check(name) && k < COLUMNS(op_column_names); k++)
        if (PyUnicode_CompareWithASCIIString(name, op_column_names[k]) == 0)
            return column_view(op_column((ls_model_object *)op, k));
    PyErr_Format(PyExc_ValueError, "op_column: no column %R (start_ns, end_ns, device, stream, "
                 "kind, correlation, launch_ns, step, range, group, comm, grid_x, grid_y, "
                 "grid_z, block_x, block_y, block_z, registers, shared_bytes, copy_kind, "
                 "host_memory, fill)", name);
    return NULL;
}

static PyObject *model_gap_column(PyObject *op, PyObject *name)
{
    for (int k = 0; PyUnicode_Check(name) && k < COLUMNS(gap_column_names); k++)
        if (PyUnicode_CompareWithASCIIString(name, gap_column_names[k]) == 0)
            return column_view(gap_column((ls_model_object *)op, k));
    PyErr_Format(PyExc_ValueError, "gap_column: no column %R (start_ns, end_ns, device, stream, "
                 "class, cause, step, next_op, prev_op)", name);
    return NULL;
}

/* -- bins --------------------------------------------------------------- */

static int read_window(PyObject *args, PyObject *kwargs, const char *format, char **keywords,
                       unsigned long long *start, unsigned long long *end, Py_ssize_t *bins,
                       PyObject **extra)
{
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, format, keywords, start, end, bins, extra))
        return -1;
    if (*end <= *start || *bins < 1 || *bins > LS_MAX_BINS) {
        PyErr_Format(PyExc_ValueError, "need start_ns < end_ns and 1 <= bins <= %d (got %llu, "
                     "%llu, %zd)", LS_MAX_BINS, *start, *end, *bins);
        return -1;
    }
    return 0;
}

/* The bins of a window as a memoryview of uint64: filled by ls_model_busy_bins
 * (min_class < 0, device index `device`) or ls_model_gap_bins. */
static PyObject *bins_view(const ls_model *m, long device, int min_class, uint64_t start,
                           uint64_t end, size_t bins)
{
    PyObject *bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(bins * sizeof(uint64_t)));
    if (bytes != NULL) {
        uint64_t *out = (uint64_t *)PyBytes_AS_STRING(bytes);
        if (min_class < 0)
            ls_model_busy_bins(m, device, start, end, bins, out);
        else
            ls_model_gap_bins(m, min_class, start, end, bins, out);
    }
    return typed_view(bytes, "Q");
}

static PyObject *model_busy_bins(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"start_ns", "end_ns", "bins", "device", NULL};
    ls_model_object *self = (ls_model_object *)op;
    unsigned long long start, end;
    Py_ssize_t bins;
    PyObject *device = Py_None;
    if (read_window(args, kwargs, "KKn|O:busy_bins", keywords, &start, &end, &bins, &device))
        return NULL;
    long index = -1; /* every device */
    if (device != Py_None) {
        long id = PyLong_AsLong(device);
        if (id == -1 && PyErr_Occurred())
            return NULL;
        index = (long)self->model.device_count; /* a device with no op: idle throughout */
        for (size_t d = 0; d < self->model.device_count; d++)
            if ((long)self->model.devices[d].line.device_id == id)
                index = (long)d;
    }
    return bins_view(&self->model, index, -1, start, end, (size_t)bins);
}

/* The class named `name` (normal, warning, severe), or -1 with a
 * ValueError naming `who`. */
static int class_named(PyObject *name, const char *who)
{
    for (int k = 0; k < LS_CLASS_COUNT; k++)
        if (PyUnicode_CompareWithASCIIString(name, class_names[k]) == 0)
            return k;
    PyErr_Format(PyExc_ValueError, "%s: min_class must be 'normal', 'warning' or 'severe', "
                 "got %R", who, name);
    return -1;
}

static PyObject *model_gap_bins(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"start_ns", "end_ns", "bins", "min_class", NULL};
    ls_model_object *self = (ls_model_object *)op;
    unsigned long long start, end;
    Py_ssize_t bins;
    PyObject *min_class = NULL;
    if (read_window(args, kwargs, "KKn|U:gap_bins", keywords, &start, &end, &bins, &min_class))
        return NULL;
    int cls = min_class == NULL ? LS_CLASS_SEVERE : class_named(min_class, "gap_bins");
    if (cls < 0)
        return NULL;
    return bins_view(&self->model, -1, cls, start, end, (size_t)bins);
}

/* -- a window of time ------------------------------------------------------ */

/* Appends item (stolen) to list; 0, or -1 with an exception set. */
static int append_new(PyObject *list, PyObject *item)
{
    int rc = item == NULL ? -1 : PyList_Append(list, item);
    Py_XDECREF(item);
    return rc;
}

enum { WINDOW_BUSY, WINDOW_GAPS, WINDOW_RANGES, WINDOW_SYNCS, WINDOW_KINDS };
static const char *const window_kinds[WINDOW_KINDS] = {"busy", "gaps", "ranges", "syncs"};
static const char *const window_counts[WINDOW_KINDS] = {"busy_count", "gap_count", "range_count",
                                                        "sync_count"};

/* What meets [start, end] (see ls_model_busy_within), of the kinds whose
 * lists[kind] is not NULL: each list holds the first `limit` items, each
 * count all of them.  Returns 0, or -1 with an exception set. */
static int fill_window(ls_model_object *self, uint64_t start, uint64_t end, size_t limit,
                       int min_class, uint64_t min_range_ns, PyObject *lists[WINDOW_KINDS],
                       uint64_t counts[WINDOW_KINDS])
{
    const ls_model *m = &self->model;
    const ls_records *r = &self->capture->records;
    enum { BUSY = WINDOW_BUSY, GAPS = WINDOW_GAPS, RANGES = WINDOW_RANGES, SYNCS = WINDOW_SYNCS };
    for (size_t d = 0; lists[BUSY] != NULL && d < m->device_count; d++) {
        size_t first, last;
        ls_model_busy_within(m, d, start, end, &first, &last);
        counts[BUSY] += last - first;
        for (size_t k = first; k < last && (size_t)PyList_GET_SIZE(lists[BUSY]) < limit; k++) {
            ls_busy_span b = ls_model_busy_span(m, d, k);
            if (append_new(lists[BUSY], Py_BuildValue("(KKk)", (unsigned long long)b.start_ns,
                                                      (unsigned long long)b.end_ns,
                                                      (unsigned long)m->devices[d].line.device_id)))
                return -1;
        }
    }
    for (size_t d = 0; lists[GAPS] != NULL && d < m->device_count; d++) {
        size_t first, last;
        ls_model_gaps_within(m, d, start, end, &first, &last);
        for (size_t g = first; g < last; g++) {
            if (m->gaps[g].gap_class < min_class)
                continue;
            counts[GAPS]++;
            if ((size_t)PyList_GET_SIZE(lists[GAPS]) < limit &&
                append_new(lists[GAPS], gap_dict(self, &m->gaps[g])))
                return -1;
        }
    }
    for (size_t i = 0; lists[RANGES] != NULL && i < r->ranges.count; i++) {
        const ls_range *x = &r->ranges.items[i];
        uint64_t length = x->end_ns > x->start_ns ? x->end_ns - x->start_ns : 0;
        if (x->end_ns < start || x->start_ns > end || length < min_range_ns)
            continue;
        counts[RANGES]++;
        if ((size_t)PyList_GET_SIZE(lists[RANGES]) >= limit)
            continue;
        /* its group's name (the name without the step's prefix): the same
         * layer in every step, one colour in the pictures */
        int32_t g = m->groups.group_of[i];
        const ls_group *group = g >= 0 ? &m->groups.items[g] : NULL;
        PyObject *key = group == NULL ? Py_NewRef(Py_None)
                      : group_name(&r->ranges.items[group->first_range], group->key_offset);
        if (append_new(lists[RANGES],
                       Py_BuildValue("(nKKkKNNN)", (Py_ssize_t)i, (unsigned long long)x->start_ns,
                                     (unsigned long long)x->end_ns, (unsigned long)x->depth,
                                     (unsigned long long)x->thread_id,
                                     ls_py_index_or_none(m->steps.step_of[i]),
                                     ls_py_range_name(x), key)))
            return -1;
    }
    for (size_t k = 0; lists[SYNCS] != NULL && k < m->syncs.count; k++) {
        const ls_sync *x = &m->syncs.items[k];
        if (x->end_ns < start || x->start_ns > end)
            continue;
        counts[SYNCS]++;
        if ((size_t)PyList_GET_SIZE(lists[SYNCS]) < limit &&
            append_new(lists[SYNCS],
                       Py_BuildValue("(KKKKNs)", (unsigned long long)x->start_ns,
                                     (unsigned long long)x->end_ns,
                                     (unsigned long long)x->blocked_ns,
                                     (unsigned long long)x->thread_id,
                                     ls_py_index_or_none(x->step),
                                     ls_wait_class_name((ls_wait_class)x->wait_class))))
            return -1;
    }
    return 0;
}

/* Which kinds `kinds` (None: all, else an iterable of their names) asks
 * for, into wanted[]; 0, or -1 with an exception set. */
static int read_kinds(PyObject *kinds, int wanted[WINDOW_KINDS])
{
    for (int k = 0; k < WINDOW_KINDS; k++)
        wanted[k] = kinds == Py_None;
    if (kinds == Py_None)
        return 0;
    PyObject *names = PySequence_Fast(kinds, "window: kinds must be a sequence of 'busy', "
                                             "'gaps', 'ranges', 'syncs'");
    if (names == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(names); i++) {
        PyObject *name = PySequence_Fast_GET_ITEM(names, i);
        int found = -1;
        for (int k = 0; PyUnicode_Check(name) && k < WINDOW_KINDS; k++)
            if (PyUnicode_CompareWithASCIIString(name, window_kinds[k]) == 0)
                found = k;
        if (found < 0) {
            PyErr_Format(PyExc_ValueError, "window: kinds must name 'busy', 'gaps', 'ranges' "
                         "or 'syncs', got %R", name);
            Py_DECREF(names);
            return -1;
        }
        wanted[found] = 1;
    }
    Py_DECREF(names);
    return 0;
}

/* window(start_ns, end_ns, limit=1000, min_class='warning', min_range_ns=0, kinds=None) */
static PyObject *model_window(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"start_ns", "end_ns", "limit", "min_class", "min_range_ns",
                               "kinds", NULL};
    ls_model_object *self = (ls_model_object *)op;
    unsigned long long start, end, min_range_ns = 0;
    Py_ssize_t limit = 1000;
    PyObject *min_class = NULL, *kinds = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "KK|nUKO:window", keywords, &start, &end,
                                     &limit, &min_class, &min_range_ns, &kinds))
        return NULL;
    if (end < start || limit < 0) {
        PyErr_Format(PyExc_ValueError, "window: need start_ns <= end_ns and limit >= 0 (got "
                     "%llu, %llu, %zd)", start, end, limit);
        return NULL;
    }
    int cls = min_class == NULL ? LS_CLASS_WARNING : class_named(min_class, "window");
    int wanted[WINDOW_KINDS];
    if (cls < 0 || read_kinds(kinds, wanted) != 0)
        return NULL;
    PyObject *lists[WINDOW_KINDS] = {NULL, NULL, NULL, NULL};
    uint64_t counts[WINDOW_KINDS] = {0, 0, 0, 0};
    int failed = 0;
    for (int k = 0; k < WINDOW_KINDS; k++)
        if (wanted[k] && (lists[k] = PyList_New(0)) == NULL)
            failed = 1;
    PyObject *out = failed ? NULL : PyDict_New();
    if (out == NULL ||
        fill_window(self, start, end, (size_t)limit, cls, min_range_ns, lists, counts) != 0)
        Py_CLEAR(out);
    for (int k = 0; k < WINDOW_KINDS; k++) {
        if (lists[k] == NULL)
            continue;
        if (out != NULL) {
            out = with_item(out, window_kinds[k], Py_NewRef(lists[k]));
            out = with_item(out, window_counts[k], U64(counts[k]));
        }
        Py_DECREF(lists[k]);
    }
    return out;
}

/* The per-step columns of step_column and step_table: every figure of
 * steps() but the name, the gap histogram and the counters, so a view of
 * a million steps reads them in bulk instead of a dict per step.  The
 * first_* indices are signed (-1: none); the rest unsigned. */
static const char *const step_column_names[] = {
    "index", "start_ns", "end_ns", "first_ns", "last_ns", "busy_ns", "idle_ns", "range",
    "thread", "syncs", "kernels", "memcpys", "memsets", "graphs", "graph_ns", "compute_ns",
    "comm_ns", "kernel_ns", "shaped_ns", "filled_ns", "gap_count", "gap_normal", "gap_warning",
    "gap_severe", "gap_host", "gap_sync", "gap_other", "gap_host_ns", "gap_sync_ns", "gap_other_ns",
    "gap_max_ns", "gap_p50_ns", "gap_p99_ns", "graph_launches", "replay_host_ns",
    "replay_pairs", "memory_calls", "first_memory_call", "stream_ordered", "pageable_copies",
    "first_pageable_op", "first_pageable_call", "ops", "signature", "gap_sync_overlap_ns",
    "sync_blocked_ns", "pageable_call_ns",
};
#define STEP_COLUMNS COLUMNS(step_column_names)

static int step_column_signed(int k)
{
    const char *name = step_column_names[k];
    return strcmp(name, "first_memory_call") == 0 || strcmp(name, "first_pageable_op") == 0 ||
           strcmp(name, "first_pageable_call") == 0;
}

/* The column named `name` (a str), or -1. */
static int step_column_index(PyObject *name)
{
    for (int k = 0; PyUnicode_Check(name) && k < STEP_COLUMNS; k++)
        if (PyUnicode_CompareWithASCIIString(name, step_column_names[k]) == 0)
            return k;
    return -1;
}

/* Fills out[STEP_COLUMNS] with step number s's figures (signed ones as
 * their two's-complement bits). */
static void step_values(const ls_model_object *self, size_t s, uint64_t *out)
{
    const ls_model *m = &self->model;
    const ls_range *range = &self->capture->records.ranges.items[m->steps.range_of[s]];
    const ls_line *l = &ls_model_step_line(m, s)->line;
    const ls_gap_stats *g = &ls_model_step_line(m, s)->gaps;
    const ls_step_readiness *r = &m->readiness.steps[s];
    const uint64_t values[] = {
        s, range->start_ns, range->end_ns, l->first_ns, l->last_ns, l->busy_ns, g->total_ns,
        m->steps.range_of[s], range->thread_id, m->step_syncs[s], l->kernels, l->memcpys,
        l->memsets, l->graphs, l->graph_ns, l->compute_ns, l->comm_ns, l->kernel_ns,
        l->shaped_ns, l->filled_ns,
        g->count, g->by_class[LS_CLASS_NORMAL], g->by_class[LS_CLASS_WARNING],
        g->by_class[LS_CLASS_SEVERE], g->by_cause[LS_CAUSE_HOST], g->by_cause[LS_CAUSE_SYNC],
        g->by_cause[LS_CAUSE_OTHER], g->by_cause_ns[LS_CAUSE_HOST],
        g->by_cause_ns[LS_CAUSE_SYNC], g->by_cause_ns[LS_CAUSE_OTHER], g->max_ns, g->p50_ns,
        g->p99_ns, r->graph_launches, r->replay_host_ns, r->replay_pairs, r->memory_calls,
        (uint64_t)r->first_memory_call, r->stream_ordered, r->pageable_copies,
        (uint64_t)r->first_pageable_op, (uint64_t)r->first_pageable_call, r->ops, r->signature,
        g->sync_overlap_ns, m->step_sync_blocked_ns[s], r->pageable_call_ns,
    };
    _Static_assert(sizeof values / sizeof values[0] == STEP_COLUMNS, "one value a column");
    memcpy(out, values, sizeof values);
}

/* step_column(name): one item per step in use, in step order. */
static PyObject *model_step_column(PyObject *op, PyObject *name)
{
    ls_model_object *self = (ls_model_object *)op;
    const ls_model *m = &self->model;
    int which = step_column_index(name);
    if (which < 0) {
        PyErr_Format(PyExc_ValueError, "step_column: no column %R (index, start_ns, end_ns, "
                     "first_ns, last_ns, busy_ns, idle_ns, ...: see step_table())", name);
        return NULL;
    }
    size_t n = used_steps(m, NULL);
    PyObject *bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * sizeof(uint64_t)));
    if (bytes == NULL)
        return NULL;
    uint64_t *out = (uint64_t *)PyBytes_AS_STRING(bytes);
    uint64_t values[STEP_COLUMNS];
    size_t k = 0;
    for (size_t s = 0; s < m->steps.count; s++) {
        if (m->steps.range_of[s] == LS_MODEL_NO_ID)
            continue;
        step_values(self, s, values);
        out[k++] = values[which];
    }
    return typed_view(bytes, step_column_signed(which) ? "q" : "Q");
}

/* A table of columns over n items: each column's name, whether it is
 * signed, each item's values (one per column) and its name. */
typedef struct {
    const char *what; /* the method, for messages */
    const char *const *names;
    int count;
    int (*is_signed)(int column);
    void (*values)(const ls_model_object *self, size_t item, uint64_t *out);
    PyObject *(*name)(const ls_model_object *self, size_t item);
} ls_table_spec;

/* {column: memoryview} of the columns named in `wanted` (every one when
 * None) over items[0..n) (or 0..n when items is NULL), made in one pass;
 * "name" among them gives the items' names as a list.  NULL with an
 * exception set (an unknown column: ValueError). */
static PyObject *column_table(const ls_model_object *self, const ls_table_spec *spec,
                              PyObject *wanted, const size_t *items, size_t n)
{
    enum { MOST = 64 };
    int chosen[MOST + 1] = {0}; /* the last one: "name" */
    if (wanted == Py_None) {
        for (int c = 0; c < spec->count; c++)
            chosen[c] = 1;
        chosen[MOST] = 1;
    } else {
        PyObject *seq = PySequence_Check(wanted) ? PySequence_Fast(wanted, "") : NULL;
        if (seq == NULL) {
            if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_TypeError)) {
                PyErr_Clear();
                PyErr_Format(PyExc_TypeError, "%s: columns must be a sequence of column names "
                             "or None", spec->what);
            }
            return NULL;
        }
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
            PyObject *name = PySequence_Fast_GET_ITEM(seq, i);
            int k = -1;
            if (PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, "name") == 0)
                k = MOST;
            for (int c = 0; k < 0 && PyUnicode_Check(name) && c < spec->count; c++)
                if (PyUnicode_CompareWithASCIIString(name, spec->names[c]) == 0)
                    k = c;
            if (k < 0) {
                PyErr_Format(PyExc_ValueError, "%s: no column %R", spec->what, name);
                Py_DECREF(seq);
                return NULL;
            }
            chosen[k] = 1;
        }
        Py_DECREF(seq);
    }
    PyObject *bytes[MOST] = {NULL};
    uint64_t *columns[MOST] = {NULL};
    uint64_t values[MOST];
    PyObject *table = NULL, *names = NULL;
    if (chosen[MOST] && (names = PyList_New((Py_ssize_t)n)) == NULL)
        return NULL;
    for (int c = 0; c < spec->count; c++) {
        if (!chosen[c])
            continue;
        bytes[c] = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * sizeof(uint64_t)));
        if (bytes[c] == NULL)
            goto done;
        columns[c] = (uint64_t *)PyBytes_AS_STRING(bytes[c]);
    }
    for (size_t k = 0; k < n; k++) {
        size_t item = items != NULL ? items[k] : k;
        if (names != NULL) {
            PyObject *name = spec->name(self, item);
            if (name == NULL)
                goto done;
            PyList_SET_ITEM(names, (Py_ssize_t)k, name);
        }
        spec->values(self, item, values);
        for (int c = 0; c < spec->count; c++)
            if (columns[c] != NULL)
                columns[c][k] = values[c];
    }
    table = PyDict_New();
    for (int c = 0; table != NULL && c < spec->count; c++) {
        if (bytes[c] == NULL)
            continue;
        PyObject *view = typed_view(bytes[c], spec->is_signed(c) ? "q" : "Q");
        bytes[c] = NULL; /* stolen */
        if (view == NULL || PyDict_SetItemString(table, spec->names[c], view) != 0)
            Py_CLEAR(table);
        Py_XDECREF(view);
    }
    if (table != NULL && names != NULL && PyDict_SetItemString(table, "name", names) != 0)
        Py_CLEAR(table);
done:
    for (int c = 0; c < spec->count; c++)
        Py_XDECREF(bytes[c]);
    Py_XDECREF(names);
    return table;
}

static PyObject *step_name(const ls_model_object *self, size_t s)
{
    return ls_py_range_name(&self->capture->records.ranges.items[self->model.steps.range_of[s]]);
}

/* step_table(columns=None): {column: memoryview} of the named step
 * columns (every one when None), made in one pass; "name" among them
 * gives the steps' names as a list. */
static PyObject *model_step_table(PyObject *op, PyObject *args)
{
    ls_model_object *self = (ls_model_object *)op;
    PyObject *wanted = Py_None;
    if (!PyArg_ParseTuple(args, "|O:step_table", &wanted))
        return NULL;
    static const ls_table_spec spec = {"step_table", step_column_names, STEP_COLUMNS,
                                       step_column_signed, step_values, step_name};
    size_t n = used_steps(&self->model, NULL);
    size_t *numbers = PyMem_Malloc((n ? n : 1) * sizeof *numbers);
    if (numbers == NULL)
        return PyErr_NoMemory();
    used_steps(&self->model, numbers);
    PyObject *table = column_table(self, &spec, wanted, numbers, n);
    PyMem_Free(numbers);
    return table;
}

/* The per-group columns of group_table: every figure of groups() but the
 * name, the gap histogram and the counters (a million names: no dict per
 * group).  parent is signed (-1: none); the rest unsigned. */
static const char *const group_column_names[] = {
    "count", "host_ns", "span_ns", "parent", "depth", "step_prefixed", "first_range",
    "first_ns", "last_ns", "busy_ns", "kernels", "memcpys", "memsets", "graphs", "graph_ns",
    "compute_ns", "comm_ns", "kernel_ns", "shaped_ns", "filled_ns", "gap_count", "gap_normal",
    "gap_warning", "gap_severe", "idle_ns", "gap_p50_ns", "gap_p99_ns", "gap_max_ns", "gap_host",
    "gap_sync", "gap_other", "gap_host_ns", "gap_sync_ns", "gap_other_ns", "gap_sync_overlap_ns",
};
#define GROUP_COLUMNS COLUMNS(group_column_names)
_Static_assert(GROUP_COLUMNS <= 64 && STEP_COLUMNS <= 64, "column_table takes 64 columns");

static int group_column_signed(int k) { return strcmp(group_column_names[k], "parent") == 0; }

static void group_values(const ls_model_object *self, size_t g, uint64_t *out)
{
    const ls_model *m = &self->model;
    const ls_group *group = &m->groups.items[g];
    const ls_line *l = &ls_model_group_line(m, g)->line;
    const ls_gap_stats *s = &ls_model_group_line(m, g)->gaps;
    const uint64_t values[] = {
        group->count, group->host_ns, ls_model_group_span_ns(m, g),
        (uint64_t)(int64_t)group->parent, group->depth, group->step_prefixed, group->first_range,
        l->first_ns, l->last_ns, l->busy_ns, l->kernels, l->memcpys, l->memsets,
        l->graphs, l->graph_ns, l->compute_ns, l->comm_ns, l->kernel_ns,
        l->shaped_ns, l->filled_ns, s->count, s->by_class[LS_CLASS_NORMAL],
        s->by_class[LS_CLASS_WARNING], s->by_class[LS_CLASS_SEVERE], s->total_ns, s->p50_ns,
        s->p99_ns, s->max_ns, s->by_cause[LS_CAUSE_HOST], s->by_cause[LS_CAUSE_SYNC],
        s->by_cause[LS_CAUSE_OTHER], s->by_cause_ns[LS_CAUSE_HOST],
        s->by_cause_ns[LS_CAUSE_SYNC], s->by_cause_ns[LS_CAUSE_OTHER], s->sync_overlap_ns,
    };
    _Static_assert(sizeof values / sizeof values[0] == GROUP_COLUMNS, "one value a column");
    memcpy(out, values, sizeof values);
}

static PyObject *group_name_of(const ls_model_object *self, size_t g)
{
    const ls_group *group = &self->model.groups.items[g];
    return group_name(&self->capture->records.ranges.items[group->first_range],
                      group->key_offset);
}

/* group_table(columns=None): as step_table, one item per range group. */
static PyObject *model_group_table(PyObject *op, PyObject *args)
{
    ls_model_object *self = (ls_model_object *)op;
    PyObject *wanted = Py_None;
    if (!PyArg_ParseTuple(args, "|O:group_table", &wanted))
        return NULL;
    static const ls_table_spec spec = {"group_table", group_column_names, GROUP_COLUMNS,
                                       group_column_signed, group_values, group_name_of};
    return column_table(self, &spec, wanted, NULL, self->model.groups.count);
}

/* group_metrics() -> per group its 'metrics' dict (as groups()'), or None
 * when the capture has no samples. */
static PyObject *model_group_metrics(PyObject *op, PyObject *unused)
{
    (void)unused;
    ls_model_object *self = (ls_model_object *)op;
    const ls_model *m = &self->model;
    if (!m->has_samples)
        Py_RETURN_NONE;
    PyObject *list = PyList_New((Py_ssize_t)m->groups.count);
    for (size_t g = 0; list != NULL && g < m->groups.count; g++) {
        PyObject *d = group_metrics_dict(&m->group_metrics[g]);
        if (d == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)g, d);
    }
    return list;
}

/* step_metrics() -> per step in use (as steps()), its counter figures
 * (as steps()' 'metrics'); None when the capture has no samples. */
static PyObject *model_step_metrics(PyObject *op, PyObject *unused)
{
    (void)unused;
    ls_model_object *self = (ls_model_object *)op;
    const ls_model *m = &self->model;
    if (!m->has_samples)
        Py_RETURN_NONE;
    PyObject *list = PyList_New((Py_ssize_t)used_steps(m, NULL));
    size_t k = 0;
    for (size_t s = 0; list != NULL && s < m->steps.count; s++) {
        if (m->steps.range_of[s] == LS_MODEL_NO_ID)
            continue;
        PyObject *d = metrics_dict(&m->step_metrics[s]);
        if (d == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)k++, d);
    }
    return list;
}

/* -- trace export -------------------------------------------------------- */

static PyObject *model_write_trace_events(PyObject *op, PyObject *args, PyObject *kwargs)
{
    ls_model_object *self = (ls_model_object *)op;
    return ls_trace_export_write(&self->capture->records, &self->model, args, kwargs);
}

/* -- attributes ----------------------------------------------------------- */

static PyObject *get_thresholds(PyObject *op, void *unused)
{
    (void)unused;
    ls_thresholds t = ((ls_model_object *)op)->model.thresholds;
    return Py_BuildValue("(KK)", (unsigned long long)t.normal_below_ns,
                         (unsigned long long)t.severe_above_ns);
}

static PyObject *get_edges(PyObject *op, void *unused)
{
    (void)op;
    (void)unused;
    PyObject *edges = PyList_New(LS_HIST_BINS);
    for (int i = 0; edges != NULL && i < LS_HIST_BINS; i++) {
        PyObject *v = U64(ls_model_hist_edges_ns[i]);
        if (v == NULL)
            Py_CLEAR(edges);
        else
            PyList_SET_ITEM(edges, i, v);
    }
    return edges;
}

enum { N_OPS, N_GAPS, N_STEPS, N_GROUPS, N_NO_LAUNCH, N_IGNORED, N_UNKNOWN_COPIES };

static PyObject *get_count(PyObject *op, void *which)
{
    ls_model_object *self = (ls_model_object *)op;
    const ls_model *m = &self->model;
    switch ((int)(intptr_t)which) {
    case N_OPS: return U64(self->capture->records.ops.count);
    case N_GAPS: return U64(m->gap_count);
    case N_STEPS: return U64(used_steps(m, NULL));
    case N_GROUPS: return U64(m->groups.count);
    case N_NO_LAUNCH: return U64(m->ops_without_launch);
    case N_IGNORED: return U64(m->ignored_records);
    default: return U64(m->syncs.unknown_copies);
    }
}

static PyGetSetDef model_getset[] = {
    {"thresholds_ns", get_thresholds, NULL, "(normal_below_ns, severe_above_ns)", NULL},
    {"histogram_edges_ns", get_edges, NULL, "Lower edges of the gap histogram's bins.", NULL},
    {"op_count", get_count, NULL, "GPU ops (kernels, memcpys, memsets, graph replays).",
     (void *)N_OPS},
    {"gap_count", get_count, NULL, "Device-wide gaps.", (void *)N_GAPS},
    {"step_count", get_count, NULL, "Steps.", (void *)N_STEPS},
    {"group_count", get_count, NULL, "Range groups.", (void *)N_GROUPS},
    {"ops_without_launch", get_count, NULL, "Ops no launch record matched.",
     (void *)N_NO_LAUNCH},
    {"ignored_records", get_count, NULL, "API and sync records after the stop.",
     (void *)N_IGNORED},
    {"unknown_copies", get_count, NULL, "Async copies with no activity record (not judged).",
     (void *)N_UNKNOWN_COPIES},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef model_methods[] = {
    {"total", model_total, METH_NOARGS,
     "The whole run: a time line dict with 'gaps' and 'readiness' (graph launches, replay "
     "host time, memory calls, pageable copies, signature of all its ops)."},
    {"devices", model_devices, METH_NOARGS,
     "One time line dict per device (with 'name' and its facts: sm_count, max_threads_per_sm, "
     "max_blocks_per_sm, registers_per_sm, shared_bytes_per_sm; None where unknown)."},
    {"streams", model_streams, METH_NOARGS, "One time line dict per stream."},
    {"steps", model_steps, METH_NOARGS,
     "One dict per step: index, range, name, thread, start_ns, end_ns, its ops' time line, "
     "'gaps', 'syncs' (count), 'sync_blocked_ns' (the host's blocked time in them), "
     "'readiness' (what a CUDA graph capture would meet) and "
     "'metrics'."},
    {"ranges", model_ranges, METH_NOARGS,
     "One dict per range: name, parent, depth, step (its step index when it acts as a step), "
     "group, thread, start_ns, end_ns, its ops' time line and 'metrics'."},
    {"groups", model_groups, METH_NOARGS,
     "One dict per range group: name, parent, depth, step_prefixed, count, host_ns, span_ns, "
     "its ops' time line, 'gaps' and 'metrics' (weighted over its ranges)."},
    {"syncs", model_syncs, METH_NOARGS,
     "The syncs: (start_ns, end_ns, blocked_ns, thread_id, step, wait_class, [call indices])."},
    {"kernels", model_kernels, METH_VARARGS,
     "kernels(n=None) -> the kernels by name, longest total time first: name, count, "
     "total_ns, max_ns, shapes (distinct launch shapes), shaped_ns and filled_ns (its time "
     "with a known fill, and that time times the fill), and 'shape': the launch shape with "
     "the most time (grid, block, registers, shared_bytes, device, count, total_ns)."},
    {"sync_gaps", model_sync_gaps, METH_NOARGS,
     "Per sync (in the order of syncs()): the idle ns of the sync-caused gaps it overlapped "
     "longest."},
    {"metrics", model_metrics, METH_NOARGS,
     "PM figures of the whole run: {'span', 'busy', 'busy_from'}, or None without samples."},
    {"worst_gaps", model_worst_gaps, METH_VARARGS,
     "worst_gaps(n=10) -> the n longest gaps as dicts, longest first."},
    {"op_column", model_op_column, METH_O,
     "op_column(name) -> memoryview, one item per op: start_ns, end_ns, device, stream, kind "
     "(0 kernel, 1 memcpy, 2 memset, 3 graph replay), correlation, launch_ns (2**64-1: "
     "none), step, range, group (-1: none), comm (1: a collective kernel), grid_x, grid_y, "
     "grid_z, block_x, "
     "block_y, block_z, registers, shared_bytes (0: unknown), copy_kind, host_memory, fill "
     "(the share of its GPU a kernel can fill, -1: unknown)."},
    {"gap_column", model_gap_column, METH_O,
     "gap_column(name) -> memoryview, one item per gap: start_ns, end_ns, device, stream, "
     "class (0 normal, 1 warning, 2 severe), cause (0 host, 1 sync, 2 other), step (-1: none), "
     "next_op, prev_op."},
    {"busy_bins", (PyCFunction)(void (*)(void))model_busy_bins, METH_VARARGS | METH_KEYWORDS,
     "busy_bins(start_ns, end_ns, bins, device=None) -> memoryview of the GPU busy ns in each "
     "of `bins` equal slices (all devices summed, or one device)."},
    {"gap_bins", (PyCFunction)(void (*)(void))model_gap_bins, METH_VARARGS | METH_KEYWORDS,
     "gap_bins(start_ns, end_ns, bins, min_class='severe') -> memoryview of the idle ns of "
     "gaps of that class or worse in each slice."},
    {"window", (PyCFunction)(void (*)(void))model_window, METH_VARARGS | METH_KEYWORDS,
     "window(start_ns, end_ns, limit=1000, min_class='warning', min_range_ns=0, kinds=None) -> "
     "what meets "
     "[start_ns, end_ns] (an interval [a, b] meets it when b >= start_ns and a <= end_ns): "
     "{'busy': [(start_ns, end_ns, device)] merged busy intervals by device then time, "
     "'gaps': [gap dicts as worst_gaps] of class min_class or worse, 'ranges': [(index, "
     "start_ns, end_ns, depth, thread, step or None, name, group name (the name without "
     "the step prefix) or None for a step)] at least min_range_ns long, "
     "'syncs': [(start_ns, end_ns, blocked_ns, thread, step or None, wait_class)]}, each list "
     "its first `limit` items, and 'busy_count', 'gap_count', 'range_count', 'sync_count': "
     "how many there are; kinds (e.g. ('ranges',)) keeps only those kinds' keys.  Cost: "
     "O(log ops + the gaps, ranges and syncs looked at + what is returned)."},
    {"step_column", model_step_column, METH_O,
     "step_column(name) -> memoryview, one item per step (as steps()): one column of "
     "step_table()."},
    {"step_table", model_step_table, METH_VARARGS,
     "step_table(columns=None) -> {column: memoryview} of those columns (all when None), one "
     "item per step (as steps()), made in one pass: "
     "index, start_ns, end_ns (host), first_ns, last_ns (its ops; 0 when none), busy_ns, "
     "idle_ns (its gaps' total), range, thread, syncs, kernels, memcpys, memsets, graphs "
     "(whole CUDA-graph replays), graph_ns, compute_ns, comm_ns, kernel_ns, shaped_ns, "
     "filled_ns; its gaps: gap_count, gap_normal, gap_warning, "
     "gap_severe, gap_host, gap_sync, gap_other, gap_host_ns, gap_sync_ns, gap_other_ns, "
     "gap_max_ns, gap_p50_ns, gap_p99_ns; its readiness: graph_launches, replay_host_ns, "
     "replay_pairs, memory_calls, first_memory_call, stream_ordered, pageable_copies, "
     "first_pageable_op, first_pageable_call (int64, -1: none), ops, signature (the rest "
     "uint64); gap_sync_overlap_ns (the sync-caused gaps' whole idle: gap_sync_ns keeps what "
     "the host waited in its sync, gap_host_ns the rest); sync_blocked_ns (the host's blocked "
     "time in the step's syncs, summed as the sync sites' blocked_ms is); and 'name': a list of the steps' names.  A million steps without a dict per "
     "step."},
    {"group_table", model_group_table, METH_VARARGS,
     "group_table(columns=None) -> {column: memoryview} of those columns (all when None), one "
     "item per range group (as groups()), made in one pass: count, host_ns, span_ns, parent "
     "(int64, -1: none), depth, step_prefixed, first_range; its ops' time line: first_ns, "
     "last_ns, busy_ns, kernels, memcpys, memsets, graphs, graph_ns, compute_ns, comm_ns, "
     "kernel_ns, shaped_ns, "
     "filled_ns; its gaps: gap_count, gap_normal, gap_warning, gap_severe, idle_ns, gap_p50_ns, "
     "gap_p99_ns, gap_max_ns, gap_host, gap_sync, gap_other, gap_host_ns, gap_sync_ns, "
     "gap_other_ns, gap_sync_overlap_ns; and 'name': a list of the groups' names.  A million names without a dict "
     "per group."},
    {"group_metrics", model_group_metrics, METH_NOARGS,
     "group_metrics() -> per group (as groups()) its 'metrics' dict, or None without samples."},
    {"step_metrics", model_step_metrics, METH_NOARGS,
     "step_metrics() -> per step (as steps()) its 'metrics' dict, or None without samples."},
    {"write_trace_events", (PyCFunction)(void (*)(void))model_write_trace_events,
     METH_VARARGS | METH_KEYWORDS,
     "write_trace_events(write, t0_ns, profile, threads, ...): the Chrome/Perfetto events of "
     "the records and this model, handed to write(str) in pieces (see ls_trace_export.h)."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot model_slots[] = {
    {Py_tp_doc, "The analysed model of one Capture (Capture.model()); every view reads it."},
    {Py_tp_methods, model_methods},
    {Py_tp_getset, model_getset},
    {Py_tp_traverse, model_traverse},
    {Py_tp_clear, model_clear},
    {Py_tp_dealloc, model_dealloc},
    {0, NULL},
};

PyType_Spec ls_model_type_spec = {
    .name = "loopscope._core.Model",
    .basicsize = sizeof(ls_model_object),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION |
             Py_TPFLAGS_HAVE_GC,
    .slots = model_slots,
};
