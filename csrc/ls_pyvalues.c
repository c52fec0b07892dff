/* ls_pyvalues: see ls_pyvalues.h. */
#include "ls_pyvalues.h"

#include "ls_names.h"

#include <stdarg.h>
#include <string.h>

PyObject *ls_py_dict_of(int pairs, ...)
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

PyObject *ls_py_u64(uint64_t value)
{
    return PyLong_FromUnsignedLongLong((unsigned long long)value);
}

PyObject *ls_py_text_or_none(const char *text)
{
    if (text == NULL)
        Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace");
}

PyObject *ls_py_name_or_none(uint32_t name_id)
{
    return ls_py_text_or_none(ls_names_text(name_id));
}

PyObject *ls_py_range_name(const ls_range *range)
{
    char small[256];
    size_t n = ls_range_name(range, small, sizeof small);
    if (n == SIZE_MAX)
        Py_RETURN_NONE;
    if (n < sizeof small)
        return PyUnicode_DecodeUTF8(small, (Py_ssize_t)n, "replace");
    char *big = PyMem_Malloc(n + 1);
    if (big == NULL)
        return PyErr_NoMemory();
    ls_range_name(range, big, n + 1);
    PyObject *name = PyUnicode_DecodeUTF8(big, (Py_ssize_t)n, "replace");
    PyMem_Free(big);
    return name;
}

PyObject *ls_py_index_or_none(int64_t value)
{
    if (value < 0)
        Py_RETURN_NONE;
    return PyLong_FromLongLong((long long)value);
}

PyObject *ls_py_dicts(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *keys_in = NULL, *columns_in = NULL, *template = NULL;
    if (!PyArg_ParseTuple(args, "OOO!:_dicts", &keys_in, &columns_in, &PyDict_Type, &template))
        return NULL;
    PyObject *keys = PySequence_Fast(keys_in, "_dicts: keys must be a sequence of str");
    if (keys == NULL)
        return NULL;
    PyObject *columns = PySequence_Fast(columns_in, "_dicts: columns must be a sequence");
    if (columns == NULL) {
        Py_DECREF(keys);
        return NULL;
    }
    Py_ssize_t width = PySequence_Fast_GET_SIZE(keys), rows = 0;
    PyObject *out = NULL;
    PyObject **cells = NULL; /* width columns as list/tuple (new references) */
    if (PySequence_Fast_GET_SIZE(columns) != width) {
        PyErr_Format(PyExc_ValueError, "_dicts: %zd keys but %zd columns", width,
                     PySequence_Fast_GET_SIZE(columns));
        goto done;
    }
    for (Py_ssize_t j = 0; j < width; j++)
        if (!PyUnicode_Check(PySequence_Fast_GET_ITEM(keys, j))) {
            PyErr_Format(PyExc_TypeError, "_dicts: keys[%zd] is not a str", j);
            goto done;
        }
    cells = PyMem_Calloc(width ? (size_t)width : 1, sizeof *cells);
    if (cells == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t j = 0; j < width; j++) {
        cells[j] = PySequence_Fast(PySequence_Fast_GET_ITEM(columns, j),
                                   "_dicts: each column must be a sequence");
        if (cells[j] == NULL)
            goto done;
        Py_ssize_t size = PySequence_Fast_GET_SIZE(cells[j]);
        if (j == 0)
            rows = size;
        else if (size != rows) {
            PyErr_Format(PyExc_ValueError, "_dicts: column %zd has %zd items, column 0 %zd", j,
                         size, rows);
            goto done;
        }
    }
    /* Rows are copies of the template with their values set: a copy clones
     * its table at its final size, where filling a new dict would grow it
     * (and rehash) several times; a template whose keys are shared
     * (loopscope._rows) gives rows that share them too. */
    out = PyList_New(rows);
    for (Py_ssize_t i = 0; out != NULL && i < rows; i++) {
        PyObject *row = PyDict_Copy(template);
        for (Py_ssize_t j = 0; row != NULL && j < width; j++)
            if (PyDict_SetItem(row, PySequence_Fast_GET_ITEM(keys, j),
                               PySequence_Fast_GET_ITEM(cells[j], i)) != 0)
                Py_CLEAR(row);
        if (row == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, i, row);
    }
done:
    for (Py_ssize_t j = 0; cells != NULL && j < width; j++)
        Py_XDECREF(cells[j]);
    PyMem_Free(cells);
    Py_DECREF(keys);
    Py_DECREF(columns);
    return out;
}
