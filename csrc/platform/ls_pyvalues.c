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
