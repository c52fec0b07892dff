/* ls_inject: records from Python into the running profile (_inject) and a
 * scripted profiler clock (_set_test_clock).  Product code: loopscope._replay
 * turns a recording back into a profile through them (`loopscope demo`,
 * `loopscope analyze`/`compare` of a recording), and the tests feed exact
 * records with them.  Bad input raises TypeError/ValueError naming the record
 * and the field; nothing is appended from a list that fails. */
#include "ls_inject.h"

#include "ls_cbids.h"
#include "ls_clock.h"
#include "ls_pyvalues.h"
#include "ls_samples.h"
#include "ls_session.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum {
    K_KERNEL, K_MEMCPY, K_MEMSET, K_API, K_SYNC_RECORD, K_SAMPLE, K_RANGE, K_DEVICE, K_GRAPH,
    K_UNKNOWN
} ls_inject_kind;

static const char *const kind_names[] = {"kernel", "memcpy", "memset", "api", "sync_record",
                                         "sample", "range", "device", "graph"};
/* In messages: "<label> record <i>" ("sync record 3", not "sync_record record 3"). */
static const char *const kind_labels[] = {"kernel", "memcpy", "memset", "api", "sync", "sample",
                                          "range", "device", "graph"};
static const char *const kind_fields[] = {
    "(start_ns, end_ns, device, stream, correlation_id[, name[, bytes[, grid[, block[, "
    "registers[, shared_bytes]]]]]]) (grid, block: an int or a tuple of 1 to 3 ints)",
    "(start_ns, end_ns, device, stream, correlation_id[, name[, bytes[, copy_kind[, "
    "host_memory]]]]) (copy_kind: CUpti_ActivityMemcpyKind, 1 HtoD, 2 DtoH, 8 DtoD; "
    "host_memory: 1 pageable, 2 pinned)",
    "(start_ns, end_ns, device, stream, correlation_id[, name[, bytes]])",
    "(start_ns, end_ns, correlation_id[, thread_id[, domain[, api]]]) (domain: 0 runtime, 1 "
    "driver; api: the call's name in csrc/common/ls_cbids.c, e.g. 'cudaGraphLaunch', whose domain "
    "it must match, or its CUPTI callback id)",
    "(start_ns, end_ns[, stream])",
    "(start_ns, end_ns, {figure: value}[, device]) (figures:"
#define LS_FIGURE_NAME(id, name, cupti, rate) " " name
    LS_METRIC_TABLE(LS_FIGURE_NAME)
#undef LS_FIGURE_NAME
    "; the others are not collected)",
    "(start_ns, end_ns, name, parent, step, thread_id) (parent: index of the enclosing range "
    "of its thread, -1 for none; step: its step index, -1 for a plain range)",
    "(device, sm_count, max_threads_per_sm[, max_blocks_per_sm[, registers_per_sm[, "
    "shared_bytes_per_sm]]])",
    "(start_ns, end_ns, device, stream, correlation_id[, name]) (one whole CUDA-graph "
    "replay: name as 'CUDA graph 1', correlation_id its cudaGraphLaunch's)",
};
static const Py_ssize_t min_items[] = {5, 5, 5, 3, 2, 3, 6, 3, 5};
static const Py_ssize_t max_items[] = {11, 9, 7, 6, 3, 4, 6, 6, 6};

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
        if (!PyFloat_Check(value) && !(PyLong_Check(value) && !PyBool_Check(value))) {
            PyErr_Format(PyExc_TypeError, "loopscope._inject: sample record %zd, %s must be a "
                         "number, not %.100s", index, name, Py_TYPE(value)->tp_name);
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

/* Reads item `i` as an int in [-1, limit]. */
static int read_index(PyObject *t, Py_ssize_t i, Py_ssize_t index, long long limit, int32_t *out)
{
    PyObject *item = PyTuple_GET_ITEM(t, i);
    int overflow = 0;
    long long v = PyLong_Check(item) && !PyBool_Check(item)
                      ? PyLong_AsLongLongAndOverflow(item, &overflow) : -2;
    if (PyErr_Occurred())
        return -1;
    if (!PyLong_Check(item) || PyBool_Check(item)) {
        PyErr_Format(PyExc_TypeError, "loopscope._inject: range record %zd, field %zd must be "
                     "an int, not %.100s", index, i, Py_TYPE(item)->tp_name);
        return -1;
    }
    if (overflow != 0 || v < -1 || v > limit) {
        PyErr_Format(PyExc_ValueError, "loopscope._inject: range record %zd, field %zd is %R: "
                     "must be between -1 and %lld", index, i, item, limit);
        return -1;
    }
    *out = (int32_t)v;
    return 0;
}

/* A closed range: its parent must be a range recorded before it. */
static int append_range(ls_records *r, PyObject *t, Py_ssize_t index, uint64_t start,
                        uint64_t end)
{
    PyObject *name = PyTuple_GET_ITEM(t, 2);
    if (!PyUnicode_Check(name) || PyUnicode_GET_LENGTH(name) == 0) {
        PyErr_Format(PyExc_TypeError, "loopscope._inject: range record %zd, field 2 (name) "
                     "must be a non-empty str, got %R", index, name);
        return -1;
    }
    int32_t parent, step;
    unsigned long long thread;
    if (read_index(t, 3, index, (long long)r->ranges.count - 1, &parent) ||
        read_index(t, 4, index, INT32_MAX, &step) ||
        read_uint(t, 5, index, "range", INT64_MAX, &thread))
        return -1;
    Py_ssize_t len;
    const char *text = PyUnicode_AsUTF8AndSize(name, &len);
    if (text == NULL)
        return -1;
    if (memchr(text, '\0', (size_t)len) != NULL) {
        PyErr_Format(PyExc_ValueError, "loopscope._inject: range record %zd, field 2 (name) "
                     "contains a NUL character: names are C strings", index);
        return -1;
    }
    /* Held by the records from here on, even if this record fails below. */
    uint32_t name_id = ls_names_intern_held(&r->names, text, (size_t)len);
    ls_range *range = name_id == LS_NO_NAME ? NULL : ls_ranges_append(&r->ranges);
    if (range == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    range->start_ns = start;
    range->end_ns = end;
    range->thread_id = thread;
    range->name_id = name_id;
    range->parent = parent;
    range->step_index = step;
    range->depth = parent >= 0 ? r->ranges.items[parent].depth + 1 : 0;
    return 0;
}

/* A device's facts: replaces those given before for the same device. */
static int append_device(ls_records *r, PyObject *t, Py_ssize_t index)
{
    unsigned long long v[6] = {0, 0, 0, 0, 0, 0};
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); i++)
        if (read_uint(t, i, index, "device", UINT32_MAX, &v[i]))
            return -1;
    if (v[1] == 0 || v[2] == 0) {
        PyErr_Format(PyExc_ValueError, "loopscope._inject: device record %zd: sm_count and "
                     "max_threads_per_sm must be > 0", index);
        return -1;
    }
    ls_device_facts facts = {(uint32_t)v[0], (uint32_t)v[1], (uint32_t)v[2], (uint32_t)v[3],
                             (uint32_t)v[4], (uint32_t)v[5]};
    if (ls_records_set_device(r, &facts) != 0) {
        PyErr_Format(PyExc_ValueError, "loopscope._inject: device record %zd: more than %d "
                     "devices", index, LS_MAX_DEVICE_FACTS);
        return -1;
    }
    return 0;
}

/* Item `i` of a kernel record: a grid or block as an int or 1 to 3 ints,
 * each in [1, limits[k]]. */
static int read_dims(PyObject *t, Py_ssize_t i, Py_ssize_t index, const char *what,
                     const unsigned long long limits[3], unsigned long long out[3])
{
    PyObject *item = PyTuple_GET_ITEM(t, i);
    int is_tuple = PyTuple_Check(item);
    Py_ssize_t n = is_tuple ? PyTuple_GET_SIZE(item) : 1;
    out[0] = out[1] = out[2] = 1;
    for (Py_ssize_t k = 0; k < n && n <= 3; k++) {
        PyObject *side = is_tuple ? PyTuple_GET_ITEM(item, k) : item;
        if (!PyLong_Check(side) || PyBool_Check(side)) {
            n = 0; /* reported below */
            break;
        }
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(side, &overflow);
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (overflow != 0 || v < 1 || (unsigned long long)v > limits[k]) {
            PyErr_Format(PyExc_ValueError, "loopscope._inject: kernel record %zd, %s %R: side %zd "
                         "must be between 1 and %llu", index, what, item, k, limits[k]);
            return -1;
        }
        out[k] = (unsigned long long)v;
    }
    if (n < 1 || n > 3) {
        PyErr_Format(PyExc_TypeError, "loopscope._inject: kernel record %zd, %s must be an int "
                     "or a tuple of 1 to 3 ints, got %R", index, what, item);
        return -1;
    }
    return 0;
}

/* The optional launch geometry of a kernel record (fields 7 to 10). */
static int read_geometry(PyObject *t, Py_ssize_t index, ls_op *op)
{
    static const unsigned long long grid_limits[3] = {UINT32_MAX, UINT16_MAX, UINT16_MAX};
    static const unsigned long long block_limits[3] = {1024, 1024, 64};
    Py_ssize_t n = PyTuple_GET_SIZE(t);
    unsigned long long grid[3] = {0, 0, 0}, block[3] = {0, 0, 0}, registers = 0, shared = 0;
    if ((n > 7 && read_dims(t, 7, index, "grid", grid_limits, grid)) ||
        (n > 8 && read_dims(t, 8, index, "block", block_limits, block)) ||
        (n > 9 && read_uint(t, 9, index, "kernel", 255, &registers)) ||
        (n > 10 && read_uint(t, 10, index, "kernel", UINT32_MAX, &shared)))
        return -1;
    if (n > 7) {
        op->grid_x = (uint32_t)grid[0];
        op->grid_y = (uint16_t)grid[1];
        op->grid_z = (uint16_t)grid[2];
    }
    if (n > 8) {
        op->block_x = (uint16_t)block[0];
        op->block_y = (uint16_t)block[1];
        op->block_z = (uint16_t)block[2];
    }
    op->registers = (uint16_t)registers;
    op->shared_bytes = (uint32_t)shared;
    return 0;
}

/* The call of an api record (field 5): an API name (its callback id, whose
 * domain must be the record's) or a callback id as an int (a recording's). */
static int read_api_name(PyObject *t, Py_ssize_t index, unsigned long long domain,
                         uint32_t *cbid)
{
    PyObject *name = PyTuple_GET_ITEM(t, 5);
    if (PyLong_Check(name) && !PyBool_Check(name)) {
        unsigned long long id = 0;
        if (read_uint(t, 5, index, "api", UINT32_MAX, &id))
            return -1;
        *cbid = (uint32_t)id;
        return 0;
    }
    const char *text = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    if (text == NULL) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "loopscope._inject: api record %zd, field 5 (api) "
                         "must be a str or an int, not %.100s", index, Py_TYPE(name)->tp_name);
        return -1;
    }
    CUpti_CallbackDomain d;
    CUpti_CallbackId id;
    if (ls_cbid_find(text, &d, &id) != 0) {
        PyErr_Format(PyExc_ValueError, "loopscope._inject: api record %zd: %R is not an API "
                     "call loopscope knows (see csrc/common/ls_cbids.c)", index, name);
        return -1;
    }
    if ((d == CUPTI_CB_DOMAIN_DRIVER_API) != (domain == 1)) {
        PyErr_Format(PyExc_ValueError, "loopscope._inject: api record %zd: %R is a %s API call "
                     "but the record's domain is %llu", index, name,
                     d == CUPTI_CB_DOMAIN_DRIVER_API ? "driver (1)" : "runtime (0)", domain);
        return -1;
    }
    *cbid = (uint32_t)id;
    return 0;
}

static int append_one(ls_records *r, ls_inject_kind kind, PyObject *t, Py_ssize_t index)
{
    const char *kname = kind_labels[kind];
    Py_ssize_t n = PyTuple_GET_SIZE(t);
    if (kind == K_DEVICE)
        return append_device(r, t, index);
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
    if (kind == K_SYNC_RECORD) {
        if (n > 2 && read_uint(t, 2, index, kname, UINT32_MAX, &a))
            return -1;
        ls_sync_record *s = ls_sync_records_append(&r->sync_records);
        if (s == NULL)
            goto nomem;
        *s = (ls_sync_record){start, end, 0, (uint32_t)a, 0, 0};
        return 0;
    }
    if (kind == K_API) {
        unsigned long long domain = 0;
        uint32_t cbid = 0;
        if (read_uint(t, 2, index, kname, UINT32_MAX, &a) ||
            (n > 3 && read_uint(t, 3, index, kname, INT64_MAX, &b)) ||
            (n > 4 && read_uint(t, 4, index, kname, 1, &domain)) ||
            (n > 5 && read_api_name(t, index, domain, &cbid)))
            return -1;
        ls_api *api = ls_apis_append(&r->apis);
        if (api == NULL)
            goto nomem;
        *api = (ls_api){start, end, b, (uint32_t)a, cbid, (uint32_t)domain, 0};
        return 0;
    }
    if (kind == K_RANGE)
        return append_range(r, t, index, start, end);
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
        (kind == K_MEMCPY && n > 7 && read_uint(t, 7, index, kname, 255, &copy_kind)) ||
        (kind == K_MEMCPY && n > 8 && read_uint(t, 8, index, kname, 255, &host_memory)))
        return -1;
    /* a graph replay is graph_launched, as CUPTI's graph-level records */
    ls_op made = ls_op_make(kind == K_KERNEL ? LS_OP_KERNEL : kind == K_MEMCPY ? LS_OP_MEMCPY
                            : kind == K_GRAPH ? LS_OP_GRAPH : LS_OP_MEMSET,
                            start, end, (uint32_t)a, (uint32_t)b, (uint32_t)c, name_id, bytes);
    made.copy_kind = (uint8_t)copy_kind;
    made.host_memory = (uint8_t)host_memory;
    if (kind == K_KERNEL && read_geometry(t, index, &made) != 0)
        return -1;
    ls_op *op = ls_ops_append(&r->ops);
    if (op == NULL)
        goto nomem;
    *op = made;
    return 0;
nomem:
    PyErr_NoMemory();
    return -1;
}

static PyObject *inject(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
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
                     "'memcpy', 'memset', 'graph', 'api', 'sync_record', 'sample', 'range', "
                     "'device', got %R", args[0]);
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
                         "%s, got %R", kind_labels[kind], i, kind_fields[kind], t);
            Py_DECREF(seq);
            return NULL;
        }
    }
    size_t before[6] = {r->ops.count, r->apis.count, r->sync_records.count, r->samples.count,
                        r->ranges.count, r->device_count};
    ls_device_facts devices_before[LS_MAX_DEVICE_FACTS];
    memcpy(devices_before, r->devices, sizeof devices_before);
    for (Py_ssize_t i = 0; i < count; i++) {
        if (append_one(r, kind, PySequence_Fast_GET_ITEM(seq, i), i) != 0) {
            memcpy(r->devices, devices_before, sizeof devices_before);
            r->device_count = before[5];
            r->ops.count = before[0];
            r->apis.count = before[1];
            r->sync_records.count = before[2];
            r->samples.count = before[3];
            r->ranges.count = before[4];
            Py_DECREF(seq);
            return NULL;
        }
    }
    Py_DECREF(seq);
    if (count > 0 && kind == K_SAMPLE)
        ls_session_mark_samples_injected();
    else if (count > 0 && kind != K_RANGE && kind != K_DEVICE) /* host records and facts */
        ls_session_mark_injected();
    return PyLong_FromSsize_t(count);
}

static PyObject *set_test_clock(PyObject *module, PyObject *args)
{
    (void)module;
    unsigned long long start = 0, tick = 0;
    double rate = 1.0;
    if (!PyArg_ParseTuple(args, "KK|d:_set_test_clock", &start, &tick, &rate))
        return NULL;
    if (!(rate > 0.0)) {
        PyErr_SetString(PyExc_ValueError, "_set_test_clock: rate must be > 0");
        return NULL;
    }
    ls_clock_set_test(start, tick);
    ls_clock_set_test_rate(rate);
    Py_RETURN_NONE;
}

PyMethodDef ls_inject_methods[] = {
    {"_inject", (PyCFunction)(void (*)(void))inject, METH_FASTCALL,
     "_inject(kind, records): appends synthetic records to the running profile (a "
     "recording's replay, and the tests)."},
    {"_set_test_clock", set_test_clock, METH_VARARGS,
     "_set_test_clock(start_ns, tick_ns, rate=1.0): a scripted clock (tick 0: off) "
     "running `rate` times as fast as the host reference the clock check reads."},
    {NULL, NULL, 0, NULL},
};
