/* ls_trace_export: see ls_trace_export.h. */
#include "ls_trace_export.h"

#include "ls_ids.h"
#include "ls_names.h"
#include "ls_pyvalues.h"
#include "ls_trace_json.h"

#include <stdlib.h>
#include <string.h>

static int write_to_python(void *context, const char *text, size_t len)
{
    PyObject *chunk = PyUnicode_DecodeUTF8(text, (Py_ssize_t)len, "strict");
    PyObject *result = chunk ? PyObject_CallOneArg((PyObject *)context, chunk) : NULL;
    Py_XDECREF(chunk);
    Py_XDECREF(result);
    return result == NULL ? -1 : 0;
}

/* The display names of the ops of `r`: one call of namer(raw name) per
 * distinct name, which returns (display, signature, mangled), each a str or
 * None.  Fills the name fields of `o`; the arrays (freed by free_op_names)
 * point into the strings of *keep.  Returns 0, or -1 with an exception set. */
static int op_names(const ls_records *r, PyObject *namer, ls_trace_options *o, PyObject **keep)
{
    size_t n = r->ops.count;
    uint32_t *ids = PyMem_Malloc((n ? n : 1) * sizeof *ids);
    const char **texts = NULL;
    *keep = PyList_New(0);
    if (ids == NULL || *keep == NULL)
        goto no_memory;
    size_t unique = 0;
    for (size_t i = 0; i < n; i++)
        if (ls_names_text(r->ops.items[i].name_id) != NULL)
            ids[unique++] = r->ops.items[i].name_id;
    size_t kept = ls_ids_sort_unique_u32(ids, unique);
    texts = PyMem_Calloc(3 * (kept ? kept : 1), sizeof *texts);
    if (texts == NULL)
        goto no_memory;
    for (size_t k = 0; k < kept; k++) {
        PyObject *raw = ls_py_text_or_none(ls_names_text(ids[k]));
        PyObject *named = raw ? PyObject_CallOneArg(namer, raw) : NULL;
        Py_XDECREF(raw);
        if (named == NULL || PyList_Append(*keep, named) != 0) {
            Py_XDECREF(named);
            goto fail;
        }
        Py_DECREF(named);
        if (!PyTuple_Check(named) || PyTuple_GET_SIZE(named) != 3) {
            PyErr_SetString(PyExc_TypeError, "write_trace_events: names(raw) must return "
                            "(display, signature, mangled), each a str or None");
            goto fail;
        }
        for (int j = 0; j < 3; j++) {
            PyObject *item = PyTuple_GET_ITEM(named, j);
            if (item == Py_None)
                continue;
            texts[j * kept + k] = PyUnicode_Check(item) ? PyUnicode_AsUTF8(item) : NULL;
            if (texts[j * kept + k] == NULL) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "write_trace_events: names(raw) must "
                                    "return str or None items");
                goto fail;
            }
        }
    }
    o->name_ids = ids;
    o->name_count = kept;
    o->display = texts;
    o->signature = texts + kept;
    o->mangled = texts + 2 * kept;
    return 0;
no_memory:
    PyErr_NoMemory();
fail:
    PyMem_Free(ids);
    PyMem_Free(texts);
    Py_CLEAR(*keep);
    return -1;
}

static void free_op_names(ls_trace_options *o)
{
    PyMem_Free((void *)o->name_ids);
    PyMem_Free((void *)o->display);
}

/* Reads `lanes` {key: int} into sorted key and value arrays (PyMem); keys
 * are ints (a device) or (device, stream) tuples.  Returns 0, or -1 with an
 * exception set. */
typedef struct {
    uint64_t key;
    uint32_t value;
} ls_lane;

static int compare_lanes(const void *pa, const void *pb)
{
    const ls_lane *a = pa, *b = pb;
    return a->key < b->key ? -1 : a->key > b->key;
}

static int read_lanes(PyObject *lanes, int pairs, uint64_t **keys, uint32_t **values,
                      size_t *count)
{
    Py_ssize_t n = PyDict_Size(lanes), pos = 0;
    ls_lane *items = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *items);
    *keys = PyMem_Malloc((size_t)(n ? n : 1) * sizeof **keys);
    *values = PyMem_Malloc((size_t)(n ? n : 1) * sizeof **values);
    if (items == NULL || *keys == NULL || *values == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    PyObject *key, *value;
    size_t k = 0;
    while (PyDict_Next(lanes, &pos, &key, &value)) {
        unsigned long long a = 0, b = 0;
        if (pairs ? !PyArg_ParseTuple(key, "KK", &a, &b) : (a = PyLong_AsUnsignedLongLong(key),
                                                             a == (unsigned long long)-1 &&
                                                                 PyErr_Occurred()))
            goto fail;
        unsigned long v = PyLong_AsUnsignedLong(value);
        if (v == (unsigned long)-1 && PyErr_Occurred())
            goto fail;
        items[k++] = (ls_lane){pairs ? (a << 32) | (b & 0xffffffffull) : a, (uint32_t)v};
    }
    qsort(items, k, sizeof *items, compare_lanes);
    for (size_t i = 0; i < k; i++) {
        (*keys)[i] = items[i].key;
        (*values)[i] = items[i].value;
    }
    *count = k;
    PyMem_Free(items);
    return 0;
fail:
    PyMem_Free(items);
    PyMem_Free(*keys);
    PyMem_Free(*values);
    *keys = NULL;
    *values = NULL;
    return -1;
}

/* A thread id and where it first appeared, for numbering threads. */
typedef struct {
    uint64_t thread;
    size_t first;
} ls_seen_thread;

static int compare_seen_by_thread(const void *pa, const void *pb)
{
    const ls_seen_thread *a = pa, *b = pb;
    if (a->thread != b->thread)
        return a->thread < b->thread ? -1 : 1;
    return (a->first > b->first) - (a->first < b->first);
}

static int compare_seen_by_first(const void *pa, const void *pb)
{
    const ls_seen_thread *a = pa, *b = pb;
    return (a->first > b->first) - (a->first < b->first);
}

/* The next free tid: above every tid of `threads` and the lanes. */
static long next_tid(PyObject *threads, unsigned sync_tid, unsigned gap_tid)
{
    long top = (long)(sync_tid > gap_tid ? sync_tid : gap_tid);
    if (top < 2)
        top = 2; /* tid 1: the unknown thread */
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(threads, &pos, &key, &value)) {
        long v = PyLong_AsLong(value);
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (v > top)
            top = v;
    }
    return top + 1;
}

/* Every host thread of the records and the model, in order of first
 * appearance, added to `threads` when new; their sorted ids and tids into
 * *ids / *tids (PyMem).  0, or -1 with an exception set. */
static int host_threads(const ls_records *r, const ls_model *m, PyObject *threads,
                        unsigned sync_tid, unsigned gap_tid, uint64_t **ids, uint32_t **tids,
                        size_t *count)
{
    size_t n = r->ranges.count + r->apis.count + m->syncs.count + r->calls.count, k = 0;
    ls_seen_thread *seen = PyMem_Malloc((n ? n : 1) * sizeof *seen);
    *ids = PyMem_Malloc((n ? n : 1) * sizeof **ids);
    *tids = PyMem_Malloc((n ? n : 1) * sizeof **tids);
    if (seen == NULL || *ids == NULL || *tids == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (size_t i = 0; i < r->ranges.count; i++, k++)
        seen[k] = (ls_seen_thread){r->ranges.items[i].thread_id, k};
    for (size_t i = 0; i < r->apis.count; i++, k++)
        seen[k] = (ls_seen_thread){r->apis.items[i].thread_id, k};
    for (size_t i = 0; i < m->syncs.count; i++, k++)
        seen[k] = (ls_seen_thread){m->syncs.items[i].thread_id, k};
    for (size_t i = 0; i < r->calls.count; i++, k++)
        seen[k] = (ls_seen_thread){r->calls.items[i].thread_id, k};
    qsort(seen, n, sizeof *seen, compare_seen_by_thread);
    size_t unique = 0;
    for (size_t i = 0; i < n; i++)
        if (unique == 0 || seen[i].thread != seen[unique - 1].thread)
            seen[unique++] = seen[i];
    qsort(seen, unique, sizeof *seen, compare_seen_by_first);
    for (size_t i = 0; i < unique; i++) {
        PyObject *key = ls_py_u64(seen[i].thread);
        PyObject *value = key ? PyDict_GetItemWithError(threads, key) : NULL;
        if (value == NULL && key != NULL && !PyErr_Occurred()) {
            long tid = seen[i].thread == 0 ? 1 : next_tid(threads, sync_tid, gap_tid);
            value = tid < 0 ? NULL : PyLong_FromLong(tid);
            if (value != NULL && PyDict_SetItem(threads, key, value) != 0)
                Py_CLEAR(value);
            Py_XDECREF(value); /* the dict holds it */
        }
        long v = value ? PyLong_AsLong(value) : -1;
        Py_XDECREF(key);
        if (value == NULL || (v == -1 && PyErr_Occurred()))
            goto fail;
        seen[i].first = (size_t)v; /* from here on: the tid */
    }
    qsort(seen, unique, sizeof *seen, compare_seen_by_thread);
    for (size_t i = 0; i < unique; i++) {
        (*ids)[i] = seen[i].thread;
        (*tids)[i] = (uint32_t)seen[i].first;
    }
    *count = unique;
    PyMem_Free(seen);
    return 0;
fail:
    PyMem_Free(seen);
    PyMem_Free(*ids);
    PyMem_Free(*tids);
    *ids = NULL;
    *tids = NULL;
    return -1;
}

/* The sampled device gets a process when the records have samples and
 * gpu_pids lacks it.  0, or -1 with an exception set. */
static int add_sampled_device(const ls_records *r, PyObject *gpu_pids, unsigned gpu_pid)
{
    if (r->samples.count == 0)
        return 0;
    PyObject *key = ls_py_u64(r->sample_device);
    int has = key ? PyDict_Contains(gpu_pids, key) : -1;
    long top = (long)gpu_pid - 1;
    Py_ssize_t pos = 0;
    PyObject *k, *value;
    while (has == 0 && PyDict_Next(gpu_pids, &pos, &k, &value)) {
        long v = PyLong_AsLong(value);
        if (v == -1 && PyErr_Occurred()) {
            has = -1;
            break;
        }
        if (v > top)
            top = v;
    }
    if (has == 0) {
        PyObject *pid = PyLong_FromLong(top + 1);
        has = pid == NULL || PyDict_SetItem(gpu_pids, key, pid) != 0 ? -1 : 1;
        Py_XDECREF(pid);
    }
    Py_XDECREF(key);
    return has < 0 ? -1 : 0;
}

/* The syncs' sites: (site_of, names, args) -> arrays into `o` (PyMem, the
 * strings borrowed from the sequences).  0, or -1 with an exception set. */
static int read_sync_sites(PyObject *sites, const ls_model *m, ls_trace_options *o,
                           PyObject **keep)
{
    PyObject *site_of = NULL, *names = NULL, *texts = NULL;
    if (!PyArg_ParseTuple(sites, "OOO:sync_sites", &site_of, &names, &texts))
        return -1;
    PyObject *a = PySequence_Fast(site_of, "sync_sites: site_of must be a sequence");
    PyObject *b = a ? PySequence_Fast(names, "sync_sites: names must be a sequence") : NULL;
    PyObject *c = b ? PySequence_Fast(texts, "sync_sites: args must be a sequence") : NULL;
    *keep = PyTuple_Pack(3, a ? a : Py_None, b ? b : Py_None, c ? c : Py_None);
    Py_XDECREF(a);
    Py_XDECREF(b);
    Py_XDECREF(c);
    if (c == NULL || *keep == NULL)
        return -1;
    Py_ssize_t ns = PySequence_Fast_GET_SIZE(a), nk = PySequence_Fast_GET_SIZE(b);
    if ((size_t)ns != m->syncs.count || PySequence_Fast_GET_SIZE(c) != nk) {
        PyErr_Format(PyExc_ValueError, "sync_sites: %zd sites for %zu syncs, %zd names for %zd "
                     "args", ns, m->syncs.count, nk, PySequence_Fast_GET_SIZE(c));
        return -1;
    }
    int32_t *site_index = PyMem_Malloc((size_t)(ns ? ns : 1) * sizeof *site_index);
    const char **strings = PyMem_Calloc(nk > 0 ? 2 * (size_t)nk : 1, sizeof *strings);
    if (site_index == NULL || strings == NULL) {
        PyMem_Free(site_index);
        PyMem_Free((void *)strings);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < ns; i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(a, i));
        if ((v == -1 && PyErr_Occurred()) || v < -1 || v >= nk) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "sync_sites: sync %zd names site %ld of %zd", i,
                             v, nk);
            goto fail;
        }
        site_index[i] = (int32_t)v;
    }
    for (Py_ssize_t i = 0; i < 2 * nk; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(i < nk ? b : c, i < nk ? i : i - nk);
        strings[i] = PyUnicode_Check(item) ? PyUnicode_AsUTF8(item) : NULL;
        if (strings[i] == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "sync_sites: names and args must be str");
            goto fail;
        }
    }
    o->sync_site = site_index;
    o->sync_site_count = (size_t)ns;
    o->site_name = strings;
    o->site_args = strings + nk;
    o->site_count = (size_t)nk;
    return 0;
fail:
    PyMem_Free(site_index);
    PyMem_Free((void *)strings);
    return -1;
}

/* The sites of the recorded calls: a sequence of ints, one per call (the
 * index in the file's call site list, -1 unknown) -> o->call_site (PyMem).
 * 0, or -1 with an exception set. */
static int read_call_sites(PyObject *sites, const ls_records *r, ls_trace_options *o)
{
    PyObject *seq = PySequence_Fast(sites, "call_sites must be a sequence of ints");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int32_t *site = NULL;
    if ((size_t)n != r->calls.count) {
        PyErr_Format(PyExc_ValueError, "call_sites: %zd sites for %zu calls", n, r->calls.count);
        goto fail;
    }
    site = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *site);
    if (site == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if ((v == -1 && PyErr_Occurred()) || v < -1 || v > INT32_MAX) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "call_sites: call %zd names site %ld", i, v);
            goto fail;
        }
        site[i] = (int32_t)v;
    }
    Py_DECREF(seq);
    o->call_site = site;
    o->call_site_count = (size_t)n;
    return 0;
fail:
    Py_DECREF(seq);
    PyMem_Free(site);
    return -1;
}

PyObject *ls_trace_export_write(const ls_records *r, const ls_model *m, PyObject *args,
                                PyObject *kwargs)
{
    static char *keywords[] = {"write", "t0_ns", "profile", "threads", "host_pid", "gpu_pid",
                               "names", "gpu_pids", "stream_tids", "lanes", "sync_sites",
                               "sync_base", "site_base", "call_sites", "call_site_base",
                               NULL};
    PyObject *write, *threads, *namer = Py_None, *gpu_pids = NULL, *stream_tids = NULL;
    PyObject *sites = Py_None, *call_sites = Py_None;
    unsigned long long t0;
    long profile;
    unsigned int host_pid = 1, gpu_pid = 100, sync_tid = 2, gap_tid = 0, sync_base = 0,
                 site_base = 0, call_site_base = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OKlO!|IIOO!O!(II)OIIOI:write_trace_events",
                                     keywords, &write, &t0, &profile, &PyDict_Type, &threads,
                                     &host_pid, &gpu_pid, &namer, &PyDict_Type, &gpu_pids,
                                     &PyDict_Type, &stream_tids, &sync_tid, &gap_tid, &sites,
                                     &sync_base, &site_base, &call_sites, &call_site_base))
        return NULL;
    ls_trace_options options = {
        .t0_ns = t0, .profile = profile, .host_pid = host_pid, .gpu_pid = gpu_pid,
        .sync_tid = sync_tid, .gap_tid = gap_tid, .sync_base = sync_base,
        .site_base = site_base, .call_site_base = call_site_base};
    uint64_t *thread_ids = NULL, *device_keys = NULL, *stream_keys = NULL;
    uint32_t *thread_tid = NULL, *device_pid = NULL, *stream_tid = NULL;
    size_t thread_count = 0, device_count = 0, stream_count = 0;
    PyObject *keep = NULL, *keep_sites = NULL;
    int rc = -3; /* -3: an exception is set already */
    if (host_threads(r, m, threads, sync_tid, gap_tid, &thread_ids, &thread_tid,
                     &thread_count) != 0 ||
        (gpu_pids != NULL && add_sampled_device(r, gpu_pids, gpu_pid) != 0) ||
        (gpu_pids != NULL &&
         read_lanes(gpu_pids, 0, &device_keys, &device_pid, &device_count) != 0) ||
        (stream_tids != NULL &&
         read_lanes(stream_tids, 1, &stream_keys, &stream_tid, &stream_count) != 0) ||
        (sites != Py_None && read_sync_sites(sites, m, &options, &keep_sites) != 0) ||
        (call_sites != Py_None && read_call_sites(call_sites, r, &options) != 0))
        goto done;
    /* device ids fit 32 bits: the sorted 64-bit keys narrow in place */
    for (size_t i = 0; i < device_count; i++)
        ((uint32_t *)device_keys)[i] = (uint32_t)device_keys[i];
    options.thread_ids = thread_ids;
    options.thread_tid = thread_tid;
    options.thread_count = thread_count;
    options.device_ids = (const uint32_t *)device_keys;
    options.device_pid = device_pid;
    options.device_count = device_count;
    options.stream_keys = stream_keys;
    options.stream_tid = stream_tid;
    options.stream_count = stream_count;
    if (namer == Py_None || op_names(r, namer, &options, &keep) == 0) {
        rc = ls_trace_json_write(r, m, &options, write_to_python, write);
        free_op_names(&options);
    }
done:
    Py_XDECREF(keep);
    Py_XDECREF(keep_sites);
    PyMem_Free(thread_ids);
    PyMem_Free(thread_tid);
    PyMem_Free(device_keys);
    PyMem_Free(device_pid);
    PyMem_Free(stream_keys);
    PyMem_Free(stream_tid);
    PyMem_Free((void *)options.sync_site);
    PyMem_Free((void *)options.site_name);
    PyMem_Free((void *)options.call_site);
    if (rc == -3)
        return NULL; /* names() raised, or an argument was bad */
    if (rc == -1)
        return PyErr_NoMemory();
    if (rc != 0)
        return NULL; /* the write call raised */
    Py_RETURN_NONE;
}
