/* ls_trace_py: the Python face of the trace readers.  A reader (a capsule
 * around ls_kineto, whose builder also takes Nsight Systems rows) is fed,
 * settled, and turned into a Capture, the same object a live profile ends
 * with, so the summary comes from the same C analysis.
 *
 *   r = _trace_reader()
 *   _trace_feed(r, chunk, final)       Kineto JSON bytes (GIL released)
 *   _trace_add(r, kind, rows)          rows of a table (Nsight Systems), or
 *                                      "device" rows (id, SMs, threads, blocks,
 *                                      registers, shared bytes per SM)
 *   _trace_members(r)                  {top-level key: raw JSON bytes}
 *   _trace_settle(r, base_ns, device, own_export=False, span=None)
 *                                      one clock, ranges nested, stacks
 *   _trace_ranges(r)                   [(name, parent, start_ns, end_ns, thread, step mark)]
 *   _trace_stats(r)                    counts, skips and their reasons
 *   _trace_capture(r, step_of, ...)    -> Capture (the reader is spent)
 *
 * Python-facing functions return NULL with an exception set on error. */
#include "ls_trace_py.h"

#include "ls_capture_type.h"
#include "ls_kineto.h"
#include "ls_module_state.h"
#include "ls_names.h"
#include "ls_pyvalues.h"
#include "ls_samples.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define CAPSULE "loopscope._core.TraceReader"

typedef struct {
    ls_kineto kineto;
    int busy;  /* a feed runs without the GIL */
    int spent; /* its records went to a Capture */
} ls_trace_reader;

static void reader_destroy(PyObject *capsule)
{
    ls_trace_reader *r = PyCapsule_GetPointer(capsule, CAPSULE);
    if (r != NULL) {
        ls_kineto_free(&r->kineto);
        PyMem_RawFree(r);
    }
}

/* The reader of a capsule, ready for more work; NULL with an exception. */
static ls_trace_reader *reader_of(PyObject *capsule, int want_settled)
{
    ls_trace_reader *r = PyCapsule_GetPointer(capsule, CAPSULE);
    if (r == NULL)
        return NULL;
    if (r->busy || r->spent) {
        PyErr_SetString(PyExc_RuntimeError, r->busy ? "this trace reader is busy in another thread"
                                                    : "this trace reader already made its Capture");
        return NULL;
    }
    if (want_settled >= 0 && r->kineto.build.settled != want_settled) {
        PyErr_SetString(PyExc_RuntimeError, want_settled ? "the trace reader is not settled yet"
                                                         : "the trace reader is settled already");
        return NULL;
    }
    return r;
}

PyObject *ls_trace_reader_new(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    ls_trace_reader *r = PyMem_RawCalloc(1, sizeof *r);
    if (r == NULL)
        return PyErr_NoMemory();
    ls_kineto_init(&r->kineto);
    PyObject *capsule = PyCapsule_New(r, CAPSULE, reader_destroy);
    if (capsule == NULL) {
        ls_kineto_free(&r->kineto);
        PyMem_RawFree(r);
    }
    return capsule;
}

PyObject *ls_trace_feed(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "_trace_feed(reader, data, final) takes 3 arguments");
        return NULL;
    }
    ls_trace_reader *r = reader_of(args[0], 0);
    int final = PyObject_IsTrue(args[2]);
    if (r == NULL || final < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) != 0)
        return NULL;
    int rc;
    r->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    rc = ls_kineto_feed(&r->kineto, view.buf, (size_t)view.len, final);
    Py_END_ALLOW_THREADS
    r->busy = 0;
    PyBuffer_Release(&view);
    if (rc == -2)
        return PyErr_NoMemory();
    if (rc != 0) {
        PyErr_SetString(PyExc_ValueError, r->kineto.error);
        return NULL;
    }
    if (final && !r->kineto.bare && !r->kineto.saw_events) {
        PyErr_SetString(PyExc_ValueError, "JSON, but not a trace: the object has no "
                                          "\"traceEvents\" list");
        return NULL;
    }
    Py_RETURN_NONE;
}

PyObject *ls_trace_members(PyObject *module, PyObject *capsule)
{
    (void)module;
    ls_trace_reader *r = reader_of(capsule, -1);
    if (r == NULL)
        return NULL;
    const ls_kineto *k = &r->kineto;
    PyObject *dict = PyDict_New();
    for (size_t i = 0; dict != NULL && i < k->member_count; i++) {
        const ls_kineto_member *m = &k->members[i];
        PyObject *key = PyUnicode_DecodeUTF8(k->raw + m->key_at, (Py_ssize_t)m->key_len, "replace");
        PyObject *value = PyBytes_FromStringAndSize(k->raw + m->value_at, (Py_ssize_t)m->value_len);
        if (key == NULL || value == NULL || PyDict_SetItem(dict, key, value) != 0)
            Py_CLEAR(dict);
        Py_XDECREF(key);
        Py_XDECREF(value);
    }
    return dict;
}

/* ---- rows from a table ------------------------------------------------------ */

/* Item i of a row as an int64; *present 0 for None.  -1 with an exception
 * for anything that is not an int. */
static int row_int(PyObject *row, Py_ssize_t i, long long *out, int *present)
{
    PyObject *v = PyTuple_GET_ITEM(row, i);
    if (v == Py_None) {
        *present = 0;
        return 0;
    }
    if (!PyLong_Check(v) || PyBool_Check(v)) {
        PyErr_Format(PyExc_TypeError, "trace row item %zd must be an int or None, not %.100s", i,
                     Py_TYPE(v)->tp_name);
        return -1;
    }
    int overflow = 0;
    *out = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (*out == -1 && PyErr_Occurred())
        return -1;
    *present = overflow == 0;
    return 0;
}

/* Item i as UTF-8 text, NULL (no error) for None. */
static const char *row_text(PyObject *row, Py_ssize_t i, Py_ssize_t *len, int *bad)
{
    PyObject *v = PyTuple_GET_ITEM(row, i);
    *bad = 0;
    if (v == Py_None)
        return NULL;
    if (!PyUnicode_Check(v)) {
        *bad = 1;
        PyErr_Format(PyExc_TypeError, "trace row item %zd must be a str or None, not %.100s", i,
                     Py_TYPE(v)->tp_name);
        return NULL;
    }
    const char *text = PyUnicode_AsUTF8AndSize(v, len);
    if (text == NULL)
        *bad = 1;
    return text;
}

typedef enum { R_KERNEL, R_MEMCPY, R_MEMSET, R_RUNTIME, R_DRIVER, R_SYNC, R_RANGE, R_FRAME,
               R_POINT, R_DEVICE, R_KINDS } ls_row_kind;

static const char *const row_kind_names[R_KINDS] = {"kernel", "memcpy", "memset", "runtime",
                                                    "driver", "sync", "range", "frame", "point",
                                                    "device"};
#define MAX_ROW 17
static const Py_ssize_t row_widths[R_KINDS] = {17, 9, 9, 5, 5, 5, 4, 4, 5, 6};
static const ls_tb_class row_classes[R_KINDS] = {
    LS_TB_KERNEL, LS_TB_MEMCPY, LS_TB_MEMSET, LS_TB_RUNTIME, LS_TB_DRIVER, LS_TB_SYNC,
    LS_TB_ANNOTATION, LS_TB_PYTHON, LS_TB_COUNTER, LS_TB_METADATA};

/* A value of row items from..from+n: as given, 0 for None (not given), -1
 * for an int beyond 64 bits (given, unusable); the bit i of the result:
 * item from + i was given. */
static unsigned given_values(PyObject *row, Py_ssize_t from, int n, const long long *v,
                             const int *has, int64_t *out)
{
    unsigned given = 0;
    for (int i = 0; i < n; i++) {
        int present = PyTuple_GET_ITEM(row, from + i) != Py_None;
        out[i] = !present ? 0 : has[from + i] ? (int64_t)v[from + i] : -1;
        given |= (unsigned)present << i;
    }
    return given;
}

/* Items 9..16 of a kernel row: gridX/Y/Z, blockX/Y/Z, registers per thread,
 * shared memory per block (None where the table has no such column). */
static void row_geometry(PyObject *row, const long long *v, const int *has, ls_tb_geometry *g)
{
    int64_t values[8];
    unsigned given = given_values(row, 9, 8, v, has, values);
    memset(g, 0, sizeof *g);
    memcpy(g->grid, values, sizeof g->grid);
    memcpy(g->block, values + 3, sizeof g->block);
    g->registers = values[6];
    g->shared = values[7];
    /* a grid or block with a side missing is unusable, not absent */
    for (int i = 0; i < 3; i++) {
        if ((given & 7) && !((given >> i) & 1))
            g->grid[i] = -1;
        if ((given & 070) && !((given >> (3 + i)) & 1))
            g->block[i] = -1;
    }
    g->given = ((given & 7) ? LS_TB_GRID : 0) | ((given & 070) ? LS_TB_BLOCK : 0) |
               ((given & 0100) ? LS_TB_REGISTERS : 0) | ((given & 0200) ? LS_TB_SHARED : 0);
}

/* One row: 0 (added or skipped with a reason), -1 with an exception. */
static int add_row(ls_tbuild *b, ls_row_kind kind, PyObject *row)
{
    ls_tb_class cls = row_classes[kind];
    long long v[MAX_ROW] = {0};
    int has[MAX_ROW] = {0};
    Py_ssize_t width = row_widths[kind];
    if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != width) {
        PyErr_Format(PyExc_TypeError, "a %s row must be a tuple of %zd items, got %R",
                     row_kind_names[kind], width, row);
        return -1;
    }
    static const int text_at[R_KINDS] = {5, 5, 5, 4, 4, -1, 3, 3, 2, -1};
    for (Py_ssize_t i = 0; i < width; i++) {
        if (i == text_at[kind] || (kind == R_POINT && (i == 3 || i == 4)))
            continue;
        if (row_int(row, i, &v[i], &has[i]) != 0)
            return -1;
    }
    if (kind == R_DEVICE) { /* facts, not an event: never skipped */
        int64_t facts[5];
        given_values(row, 1, 5, v, has, facts);
        if (has[0] && v[0] >= 0 && v[0] <= 0xFFFF)
            ls_tbuild_device(b, (uint32_t)v[0], facts);
        else
            b->facts_bad += 5;
        return 0;
    }
    /* The name is checked before any skip, as the numbers are above: a value
     * of another type is refused in every row, whether or not its times can
     * be used, so the answer never hangs on which rows a file happens to skip. */
    Py_ssize_t len = 0;
    int bad = 0;
    const char *text = text_at[kind] >= 0 ? row_text(row, text_at[kind], &len, &bad) : NULL;
    if (bad)
        return -1;
    ls_tbuild_seen(b, cls);
    if (!has[0] || !has[1]) {
        ls_tbuild_skip_times(b, cls, LS_TB_TIME_NO_START_END);
        return 0;
    }
    if (kind != R_POINT && v[1] < v[0]) {
        ls_tbuild_skip_times(b, cls, LS_TB_TIME_ENDS_BEFORE);
        return 0;
    }
    int rc = 0;
    ls_tb_geometry geometry;
    switch (kind) {
    case R_KERNEL:
    case R_MEMCPY:
    case R_MEMSET:
        if (!has[2] || v[2] < 0 || v[2] > 0xFFFF || !has[3] || v[3] < 0 || v[3] > UINT32_MAX) {
            ls_tbuild_skip(b, cls, "no usable device or stream");
            return 0;
        }
        if (kind == R_KERNEL)
            row_geometry(row, v, has, &geometry);
        rc = ls_tbuild_op(b, kind == R_KERNEL ? LS_OP_KERNEL : kind == R_MEMCPY ? LS_OP_MEMCPY
                                                                               : LS_OP_MEMSET,
                          v[0], v[1], (uint32_t)v[2], (uint32_t)v[3],
                          has[4] && v[4] >= 0 ? (uint32_t)v[4] : 0, text, (size_t)len,
                          has[6] && v[6] > 0 ? (uint64_t)v[6] : 0,
                          has[7] ? (uint8_t)v[7] : 0, has[8] ? (uint8_t)v[8] : 0,
                          kind == R_KERNEL ? &geometry : NULL);
        break;
    case R_RUNTIME:
    case R_DRIVER:
        if (text == NULL || !has[2]) {
            ls_tbuild_skip(b, cls, "no name or thread");
            return 0;
        }
        rc = ls_tbuild_api(b, kind == R_DRIVER, v[0], v[1], (uint64_t)v[2],
                           (uint32_t)(has[3] ? v[3] : 0), has[3] && v[3] >= 0 && v[3] <= UINT32_MAX,
                           text, (size_t)len);
        break;
    case R_SYNC:
        rc = ls_tbuild_sync(b, v[0], v[1], has[2] ? (uint32_t)v[2] : 0,
                            has[3] ? (uint32_t)v[3] : 0, has[4] ? (uint32_t)v[4] : 0);
        break;
    case R_RANGE:
    case R_FRAME:
        if (text == NULL || !has[2]) {
            ls_tbuild_skip(b, cls, "no name or thread");
            return 0;
        }
        rc = kind == R_RANGE ? ls_tbuild_range(b, v[0], v[1], (uint64_t)v[2], text, (size_t)len, -1)
                             : ls_tbuild_frame(b, v[0], v[1], (uint64_t)v[2], text, (size_t)len);
        break;
    case R_POINT: {
        /* (ts, device, series: str, figure: str, value) */
        Py_ssize_t flen = 0;
        const char *figure = row_text(row, 3, &flen, &bad);
        if (bad)
            return -1;
        double value = PyFloat_AsDouble(PyTuple_GET_ITEM(row, 4));
        if (value == -1.0 && PyErr_Occurred())
            return -1;
        int metric = figure ? ls_metric_id(figure) : -1;
        if (text == NULL || metric < 0 || !isfinite(value)) {
            ls_tbuild_skip(b, cls, "no series, a figure loopscope does not know, or no value");
            return 0;
        }
        uint32_t series = ls_strtab_intern(&b->names, text, (size_t)len);
        if (series == LS_STRTAB_NONE)
            rc = -1;
        else
            rc = ls_tbuild_point(b, v[0], series, (uint32_t)(v[1] & 0xFFFF), metric, value, 0);
        break;
    }
    default:
        break;
    }
    if (rc != 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

PyObject *ls_trace_add(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "_trace_add(reader, kind, rows) takes 3 arguments");
        return NULL;
    }
    ls_trace_reader *r = reader_of(args[0], 0);
    if (r == NULL)
        return NULL;
    int kind = -1;
    for (int k = 0; k < R_KINDS && PyUnicode_Check(args[1]); k++)
        if (PyUnicode_CompareWithASCIIString(args[1], row_kind_names[k]) == 0)
            kind = k;
    if (kind < 0) {
        PyErr_Format(PyExc_ValueError, "_trace_add: unknown row kind %R", args[1]);
        return NULL;
    }
    PyObject *seq = PySequence_Fast(args[2], "_trace_add: rows must be a sequence of tuples");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (add_row(&r->kineto.build, (ls_row_kind)kind, PySequence_Fast_GET_ITEM(seq, i)) != 0) {
            Py_DECREF(seq);
            return NULL;
        }
    }
    Py_DECREF(seq);
    return PyLong_FromSsize_t(n);
}

/* ---- settle, look, capture ------------------------------------------------------ */

/* _trace_settle(reader, base_ns, device, own_export=False, span=None,
 * merge_idle_upto_ns=0): span (start, end) in file nanoseconds, as
 * loopscope's export carries it; idle intervals of at most
 * merge_idle_upto_ns are below the file's time resolution (ls_model). */
PyObject *ls_trace_settle(PyObject *module, PyObject *args, PyObject *kwargs)
{
    (void)module;
    static char *keywords[] = {"reader", "base_ns", "device", "own_export", "span",
                               "merge_idle_upto_ns", NULL};
    PyObject *capsule, *span = Py_None;
    long long base_ns;
    unsigned long long merge = 0;
    int device, own_export = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OLi|pOK:_trace_settle", keywords, &capsule,
                                     &base_ns, &device, &own_export, &span, &merge))
        return NULL;
    ls_tb_settle_options o = {(int64_t)base_ns, device, own_export, 0, 0, 0, (uint64_t)merge};
    long long start, end;
    if (span != Py_None) {
        if (!PyArg_ParseTuple(span, "LL:_trace_settle span", &start, &end))
            return NULL;
        o.has_span = 1;
        o.span_start = start;
        o.span_end = end;
    }
    ls_trace_reader *r = reader_of(capsule, 0);
    if (r == NULL)
        return NULL;
    if (ls_tbuild_settle(&r->kineto.build, &o) != 0)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

PyObject *ls_trace_ranges(PyObject *module, PyObject *capsule)
{
    (void)module;
    ls_trace_reader *r = reader_of(capsule, 1);
    if (r == NULL)
        return NULL;
    const ls_tbuild *b = &r->kineto.build;
    const ls_range_array *a = &b->rec.ranges;
    PyObject *list = PyList_New((Py_ssize_t)a->count);
    for (size_t i = 0; list != NULL && i < a->count; i++) {
        const ls_range *x = &a->items[i];
        const char *name = ls_tbuild_name(b, x->name_id);
        PyObject *t = Py_BuildValue("(NiKKKi)",
                                    PyUnicode_DecodeUTF8(name ? name : "?",
                                                         (Py_ssize_t)strlen(name ? name : "?"),
                                                         "replace"),
                                    (int)x->parent, (unsigned long long)x->start_ns,
                                    (unsigned long long)x->end_ns,
                                    (unsigned long long)x->thread_id, (int)x->step_index);
        if (t == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    return list;
}

#define U64(v) PyLong_FromUnsignedLongLong((unsigned long long)(v))

PyObject *ls_trace_stats(PyObject *module, PyObject *capsule)
{
    (void)module;
    ls_trace_reader *r = PyCapsule_GetPointer(capsule, CAPSULE);
    if (r == NULL)
        return NULL;
    const ls_kineto *k = &r->kineto;
    const ls_tbuild *b = &k->build;
    /* Per class of event: how many were seen, skipped, and the first reason. */
    /* skipped_times: of those skipped, how many for their times (ls_tb_time_reason). */
    PyObject *seen = PyDict_New(), *skipped = PyDict_New(), *why = PyDict_New();
    PyObject *timed = PyDict_New();
    int failed = seen == NULL || skipped == NULL || why == NULL || timed == NULL;
    for (int c = 0; !failed && c < LS_TB_CLASSES; c++) {
        const char *name = ls_tbuild_class_name((ls_tb_class)c);
        PyObject *n = U64(b->seen[c]), *s = U64(b->skipped[c]), *t = U64(b->skipped_times[c]);
        failed = n == NULL || s == NULL || t == NULL ||
                 (b->seen[c] && PyDict_SetItemString(seen, name, n)) ||
                 (b->skipped[c] && PyDict_SetItemString(skipped, name, s)) ||
                 (b->skipped_times[c] && PyDict_SetItemString(timed, name, t));
        Py_XDECREF(n);
        Py_XDECREF(s);
        Py_XDECREF(t);
        if (!failed && b->why[c][0]) {
            PyObject *w = PyUnicode_DecodeUTF8(b->why[c], (Py_ssize_t)strlen(b->why[c]), "replace");
            failed = w == NULL || PyDict_SetItemString(why, name, w);
            Py_XDECREF(w);
        }
    }
    if (failed) {
        Py_XDECREF(seen);
        Py_XDECREF(skipped);
        Py_XDECREF(why);
        Py_XDECREF(timed);
        return NULL;
    }
    PyObject *devices = PyList_New(0);
    for (int d = 0; devices != NULL && d < 64; d++) {
        if (!((b->devices_seen >> d) & 1))
            continue;
        PyObject *v = PyLong_FromLong(d);
        if (v == NULL || PyList_Append(devices, v) != 0)
            Py_CLEAR(devices);
        Py_XDECREF(v);
    }
    PyObject *thread_names = PyDict_New();
    for (size_t i = 0; thread_names != NULL && i < k->thread_name_count; i++) {
        PyObject *key = U64(k->thread_names[i].id);
        PyObject *name = PyUnicode_DecodeUTF8(k->thread_names[i].name,
                                              (Py_ssize_t)strlen(k->thread_names[i].name),
                                              "replace");
        if (key == NULL || name == NULL || PyDict_SetItem(thread_names, key, name) != 0)
            Py_CLEAR(thread_names);
        Py_XDECREF(key);
        Py_XDECREF(name);
    }
    PyObject *geometry = ls_py_dict_of(
        4, "kernels", U64(b->kernels), "missing", U64(b->geometry_missing), "bad",
        U64(b->geometry_bad), "why", ls_py_text_or_none(b->geometry_why[0] ? b->geometry_why : NULL));
    return ls_py_dict_of(
        21, "skipped_times", timed, "thread_names", thread_names, "kernel_geometry", geometry, "facts_bad", U64(b->facts_bad), "frames_dropped", U64(b->frames_dropped), "seen", seen, "skipped", skipped, "why", why, "events", U64(k->events), "offset_ns",
        PyLong_FromLongLong(b->offset_ns), "shift_ns", U64(b->shift_ns), "frames_used",
        U64(b->frames_used), "devices", devices, "ops", U64(b->rec.ops.count), "apis",
        U64(b->rec.apis.count), "calls", U64(b->rec.calls.count), "ranges",
        U64(b->rec.ranges.count + b->ranges.count), "samples", U64(b->rec.samples.count),
        "counter_values", U64(k->counter_values), "counter_unknown", U64(k->counter_unknown),
        "members_dropped", U64(k->members_dropped));
}

static void copy_text(char *out, size_t cap, PyObject *text)
{
    out[0] = '\0';
    if (text != NULL && text != Py_None && PyUnicode_Check(text)) {
        const char *s = PyUnicode_AsUTF8(text);
        if (s != NULL)
            snprintf(out, cap, "%s", s);
        else
            PyErr_Clear();
    }
}

/* _trace_capture(reader, step_of, reason, syncs_reason, metrics_reason, note) */
PyObject *ls_trace_capture(PyObject *module, PyObject *args)
{
    PyObject *capsule, *step_of, *reason, *syncs_reason, *metrics_reason, *note;
    if (!PyArg_ParseTuple(args, "OOOOOO:_trace_capture", &capsule, &step_of, &reason,
                          &syncs_reason, &metrics_reason, &note))
        return NULL;
    ls_trace_reader *r = reader_of(capsule, 1);
    if (r == NULL)
        return NULL;
    ls_tbuild *b = &r->kineto.build;
    ls_records *rec = &b->rec;
    PyObject *seq = PySequence_Fast(step_of, "step_of must be a sequence of ints");
    if (seq == NULL)
        return NULL;
    if ((size_t)PySequence_Fast_GET_SIZE(seq) != rec->ranges.count) {
        PyErr_Format(PyExc_ValueError, "step_of has %zd items for %zu ranges",
                     PySequence_Fast_GET_SIZE(seq), rec->ranges.count);
        Py_DECREF(seq);
        return NULL;
    }
    for (size_t i = 0; i < rec->ranges.count; i++) {
        long step = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)i));
        if (step == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return NULL;
        }
        rec->ranges.items[i].step_index = step >= 0 && step <= INT32_MAX ? (int32_t)step : -1;
    }
    Py_DECREF(seq);
    /* Names to the process-wide table the analysis and Capture read, held
     * by the records (released with them). */
    uint32_t *map = PyMem_RawMalloc((b->names.count ? b->names.count : 1) * sizeof *map);
    if (map == NULL)
        return PyErr_NoMemory();
    memset(map, 0xFF, (b->names.count ? b->names.count : 1) * sizeof *map);
#define GLOBAL(id)                                                                      \
    ((id) >= b->names.count ? LS_NO_NAME                                                \
     : map[id] != LS_NO_NAME ? map[id]                                                  \
     : (map[id] = ls_names_intern_held(&rec->names, ls_tbuild_name(b, (id)),           \
                                       strlen(ls_tbuild_name(b, (id))))))
    for (size_t i = 0; i < rec->ops.count; i++)
        rec->ops.items[i].name_id = GLOBAL(rec->ops.items[i].name_id);
    for (size_t i = 0; i < rec->ranges.count; i++)
        rec->ranges.items[i].name_id = GLOBAL(rec->ranges.items[i].name_id);
#undef GLOBAL
    PyMem_RawFree(map);
    ls_capture capture;
    memset(&capture, 0, sizeof capture);
    capture.records = *rec;
    memset(rec, 0, sizeof *rec);
    r->spent = 1;
    capture.injected = capture.records.ops.count > 0;
    /* syncs are judged from the API calls, unless the caller says why not
     * (loopscope's export of a profile that did not watch them) */
    capture.watched_syncs = b->seen[LS_TB_RUNTIME] + b->seen[LS_TB_DRIVER] > 0 &&
                            syncs_reason == Py_None;
    capture.samples_injected = capture.records.samples.count > 0;
    capture.records.invalid_records = 0;
    for (int c = 0; c < LS_TB_CLASSES; c++)
        capture.records.invalid_records += b->skipped[c];
    copy_text(capture.reason, sizeof capture.reason, reason);
    copy_text(capture.syncs_reason, sizeof capture.syncs_reason, syncs_reason);
    copy_text(capture.metrics_reason, sizeof capture.metrics_reason, metrics_reason);
    copy_text(capture.note, sizeof capture.note, note);
    return ls_capture_new_finished(ls_module_state_of(module)->capture_type, &capture);
}
