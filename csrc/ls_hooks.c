/* ls_hooks: test hooks over loopscope's worker thread, its PM sampler and
 * the PM config cache, so their hand-overs are tested without a GPU.
 * Python-facing: NULL with an exception set on error. */
#include "ls_module.h"

#include "ls_finish.h"
#include "ls_pmcache.h"
#include "ls_sampler.h"
#include "ls_samples.h"
#include "ls_session.h"
#include "ls_worker.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

PyObject *ls_fake_samples_py(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *list;
    Py_ssize_t per_tick = 1;
    unsigned long long interval_ns = 100000;
    if (!PyArg_ParseTuple(args, "O|nK:_fake_samples", &list, &per_tick, &interval_ns))
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
    int rc = ls_sampler_fake(samples, (size_t)n, per_tick > 0 ? (size_t)per_tick : 1, interval_ns);
    free(samples);
    if (rc != 0)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

PyObject *ls_finish_delay_py(PyObject *module, PyObject *ns)
{
    (void)module;
    unsigned long long delay = PyLong_AsUnsignedLongLong(ns);
    if (delay == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    ls_finish_set_test_delay(delay);
    Py_RETURN_NONE;
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

PyObject *ls_pmcache_py(PyObject *module, PyObject *args, PyObject *kwargs)
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
