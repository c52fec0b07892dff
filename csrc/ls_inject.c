/* ls_inject: the test hook.  Appends synthetic records to the running
 * session, so the analysis (and everything above it) is tested with exact
 * answers and no GPU.  Bad input raises TypeError/ValueError naming the
 * record and the field; nothing is appended from a list that fails. */
#include "ls_module.h"

#include "ls_names.h"
#include "ls_samples.h"

#include <math.h>
#include <stdlib.h>

#include <string.h>

typedef enum { K_KERNEL, K_MEMCPY, K_MEMSET, K_API, K_SYNC, K_SAMPLE, K_UNKNOWN } ls_inject_kind;

static const char *const kind_names[] = {"kernel", "memcpy", "memset", "api", "sync", "sample"};
static const char *const kind_fields[] = {
    "(start_ns, end_ns, device, stream, correlation_id[, name[, bytes]])",
    "(start_ns, end_ns, device, stream, correlation_id[, name[, bytes[, copy_kind[, "
    "host_memory]]]]) (copy_kind: CUpti_ActivityMemcpyKind, 1 HtoD, 2 DtoH, 8 DtoD; "
    "host_memory: 1 pageable, 2 pinned)",
    "(start_ns, end_ns, device, stream, correlation_id[, name[, bytes]])",
    "(start_ns, end_ns, correlation_id[, thread_id])",
    "(start_ns, end_ns[, stream])",
    "(start_ns, end_ns, {figure: value}[, device]) (figures: sm_active_pct, "
    "dram_throughput_pct, gr_active_pct, sm_issue, warp_occupancy_pct, dram_read_gbps, "
    "dram_write_gbps, pcie_read_gbps, pcie_write_gbps, tensor_active_pct; the others are "
    "not collected)",
};
static const Py_ssize_t min_items[] = {5, 5, 5, 3, 2, 3};
static const Py_ssize_t max_items[] = {7, 9, 7, 4, 3, 4};

/* Reads item `i` of `tuple` as a non-negative integer below `limit`. */
static int read_uint(PyObject *tuple, Py_ssize_t i, Py_ssize_t record, const char *kind,
                     unsigned long long limit, unsigned long long *out)
{
    PyObject *item = PyTuple_GET_ITEM(tuple, i);
    if (!PyLong_Check(item) || PyBool_Check(item)) {
        PyErr_Format(PyExc_TypeError, "loopscope._inject: %s record %zd, field %zd must be an "
                     "int, not %.100s", kind, record, i, Py_TYPE(item)->tp_name);
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(item, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow != 0 || v < 0 || (unsigned long long)v > limit) {
        PyErr_Format(PyExc_ValueError, "loopscope._inject: %s record %zd, field %zd is %R: "
                     "must be between 0 and %llu", kind, record, i, item, limit);
        return -1;
    }
    *out = (unsigned long long)v;
    return 0;
}

/* A PM sample: its figures from a dict, those left out NaN (not collected). */
static int append_sample(ls_records *r, PyObject *t, Py_ssize_t index, uint64_t start,
                         uint64_t end)
{
    ls_sample sample;
    sample.start_ns = start;
    sample.end_ns = end;
    for (int j = 0; j < LS_METRICS; j++)
        sample.values[j] = NAN;
    if (end == start) {
        PyErr_Format(PyExc_ValueError, "loopscope._inject: sample record %zd lasts 0 ns", index);
        return -1;
    }
    PyObject *values = PyTuple_GET_ITEM(t, 2);
    if (!PyDict_Check(values)) {
        PyErr_Format(PyExc_TypeError, "loopscope._inject: sample record %zd, field 2 must be a "
                     "dict of figures, not %.100s", index, Py_TYPE(values)->tp_name);
        return -1;
    }
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(values, &pos, &key, &value)) {
        const char *name = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
        int id = name ? ls_metric_id(name) : -1;
        if (id < 0) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "loopscope._inject: sample record %zd names an "
                             "unknown figure %R", index, key);
            return -1;
        }
        double v = PyFloat_AsDouble(value);
        if (v == -1.0 && PyErr_Occurred())
            return -1;
        if (!(v >= 0.0) || isinf(v)) {
            PyErr_Format(PyExc_ValueError, "loopscope._inject: sample record %zd, %s is %R: "
                         "must be a finite number >= 0", index, name, value);
            return -1;
        }
        sample.values[id] = v;
    }
    unsigned long long device = 0;
    if (PyTuple_GET_SIZE(t) > 3 && read_uint(t, 3, index, "sample", UINT32_MAX, &device))
        return -1;
    ls_sample *slot = ls_samples_append(&r->samples);
    if (slot == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *slot = sample;
    r->sample_device = (uint32_t)device;
    return 0;
}

static int append_one(ls_records *r, ls_inject_kind kind, PyObject *t, Py_ssize_t index)
{
    const char *kname = kind_names[kind];
    Py_ssize_t n = PyTuple_GET_SIZE(t);
    unsigned long long start, end, a = 0, b = 0, c = 0, bytes = 0;
    if (read_uint(t, 0, index, kname, INT64_MAX, &start) || read_uint(t, 1, index, kname, INT64_MAX, &end))
        return -1;
    if (start == 0) {
        PyErr_Format(PyExc_ValueError, "loopscope._inject: %s record %zd has start_ns 0 "
                     "(CUPTI marks unfinished records so; use a positive time)", kname, index);
        return -1;
    }
    if (end < start) {
        PyErr_Format(PyExc_ValueError, "loopscope._inject: %s record %zd ends before it "
                     "starts (start_ns=%llu, end_ns=%llu): a negative duration", kname, index,
                     start, end);
        return -1;
    }
    if (kind == K_SAMPLE)
        return append_sample(r, t, index, start, end);
    if (kind == K_SYNC) {
        if (n > 2 && read_uint(t, 2, index, kname, UINT32_MAX, &a))
            return -1;
        ls_sync *s = ls_syncs_append(&r->syncs);
        if (s == NULL)
            goto nomem;
        *s = (ls_sync){start, end, 0, (uint32_t)a, 0, 0};
        return 0;
    }
    if (kind == K_API) {
        if (read_uint(t, 2, index, kname, UINT32_MAX, &a) ||
            (n > 3 && read_uint(t, 3, index, kname, UINT32_MAX, &b)))
            return -1;
        ls_api *api = ls_apis_append(&r->apis);
        if (api == NULL)
            goto nomem;
        *api = (ls_api){start, end, (uint32_t)a, 0, (uint32_t)b, 0};
        return 0;
    }
    if (read_uint(t, 2, index, kname, UINT32_MAX, &a) ||
        read_uint(t, 3, index, kname, UINT32_MAX, &b) ||
        read_uint(t, 4, index, kname, UINT32_MAX, &c))
        return -1;
    uint32_t name_id = LS_NO_NAME;
    if (n > 5 && PyTuple_GET_ITEM(t, 5) != Py_None) {
        PyObject *name = PyTuple_GET_ITEM(t, 5);
        if (!PyUnicode_Check(name)) {
            PyErr_Format(PyExc_TypeError, "loopscope._inject: %s record %zd, field 5 (name) "
                         "must be a str or None, not %.100s", kname, index,
                         Py_TYPE(name)->tp_name);
            return -1;
        }
        Py_ssize_t len;
        const char *text = PyUnicode_AsUTF8AndSize(name, &len);
        if (text == NULL)
            return -1;
        if (memchr(text, '\0', (size_t)len) != NULL) {
            PyErr_Format(PyExc_ValueError, "loopscope._inject: %s record %zd, field 5 (name) "
                         "contains a NUL character: names are C strings", kname, index);
            return -1;
        }
        /* Held by the records from here on, even if this record fails below. */
        name_id = ls_names_intern_held(&r->names, text, (size_t)len);
        if (name_id == LS_NO_NAME)
            goto nomem;
    }
    unsigned long long copy_kind = 0, host_memory = 0;
    if ((n > 6 && read_uint(t, 6, index, kname, INT64_MAX, &bytes)) ||
        (n > 7 && read_uint(t, 7, index, kname, 255, &copy_kind)) ||
        (n > 8 && read_uint(t, 8, index, kname, 255, &host_memory)))
        return -1;
    ls_op *op = ls_ops_append(&r->ops);
    if (op == NULL)
        goto nomem;
    op->start_ns = start;
    op->end_ns = end;
    op->device_id = (uint32_t)a;
    op->stream_id = (uint32_t)b;
    op->correlation_id = (uint32_t)c;
    op->name_id = name_id;
    op->bytes = bytes;
    op->kind = kind == K_KERNEL ? LS_OP_KERNEL : kind == K_MEMCPY ? LS_OP_MEMCPY : LS_OP_MEMSET;
    op->copy_kind = (uint8_t)copy_kind;
    op->host_memory = (uint8_t)host_memory;
    return 0;
nomem:
    PyErr_NoMemory();
    return -1;
}

PyObject *ls_inject(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "_inject(kind, records) takes 2 arguments, got %zd", nargs);
        return NULL;
    }
    ls_inject_kind kind = K_UNKNOWN;
    if (PyUnicode_Check(args[0])) {
        for (int k = 0; k < K_UNKNOWN; k++)
            if (PyUnicode_CompareWithASCIIString(args[0], kind_names[k]) == 0)
                kind = (ls_inject_kind)k;
    }
    if (kind == K_UNKNOWN) {
        PyErr_Format(PyExc_ValueError, "loopscope._inject: kind must be one of 'kernel', "
                     "'memcpy', 'memset', 'api', 'sync', 'sample', got %R", args[0]);
        return NULL;
    }
    ls_records *r = ls_session_records();
    if (r == NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "loopscope._inject: no profile is running (use it inside "
                        "`with loopscope.profile():`)");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(args[1], "loopscope._inject: records must be a sequence "
                                             "of tuples");
    if (seq == NULL)
        return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    /* Validate all first, so a bad list appends nothing. */
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *t = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) < min_items[kind] ||
            PyTuple_GET_SIZE(t) > max_items[kind]) {
            PyErr_Format(PyExc_TypeError, "loopscope._inject: %s record %zd must be a tuple "
                         "%s, got %R", kind_names[kind], i, kind_fields[kind], t);
            Py_DECREF(seq);
            return NULL;
        }
    }
    size_t before[4] = {r->ops.count, r->apis.count, r->syncs.count, r->samples.count};
    for (Py_ssize_t i = 0; i < count; i++) {
        if (append_one(r, kind, PySequence_Fast_GET_ITEM(seq, i), i) != 0) {
            r->ops.count = before[0];
            r->apis.count = before[1];
            r->syncs.count = before[2];
            r->samples.count = before[3];
            Py_DECREF(seq);
            return NULL;
        }
    }
    Py_DECREF(seq);
    if (count > 0 && kind == K_SAMPLE)
        ls_session_mark_samples_injected();
    else if (count > 0)
        ls_session_mark_injected();
    return PyLong_FromSsize_t(count);
}

PyObject *ls_settle_samples_py(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *spans;
    unsigned long long max_span, started, stopped, tolerance;
    if (!PyArg_ParseTuple(args, "OKKKK:_settle_samples", &spans, &max_span, &started, &stopped,
                          &tolerance))
        return NULL;
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
    size_t kept = ls_samples_settle(samples, (size_t)n, max_span, started, stopped, tolerance, &r);
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
    return Py_BuildValue("NnLL", out, (Py_ssize_t)r.partial, (long long)r.delta_ns,
                         (long long)r.shift_ns);
}
