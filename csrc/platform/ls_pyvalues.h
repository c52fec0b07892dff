/* ls_pyvalues: small builders of Python values shared by the types and
 * functions of the module (dicts from key/value pairs, ints, names).
 * Python-facing: each returns a new reference, or NULL with an exception
 * set. */
#ifndef LS_PYVALUES_H
#define LS_PYVALUES_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "ls_records.h"

#include <stdint.h>

/* A dict from alternating (const char *key, PyObject *value) pairs,
 * stealing each value; a NULL value makes it fail (after releasing the
 * rest) and return NULL with the exception set. */
PyObject *ls_py_dict_of(int pairs, ...);

/* An int from a uint64_t. */
PyObject *ls_py_u64(uint64_t value);

/* A str from UTF-8 text (bad bytes replaced), None for NULL. */
PyObject *ls_py_text_or_none(const char *text);

/* The str of an interned name (ls_names), None for LS_NO_NAME or an
 * unknown id. */
PyObject *ls_py_name_or_none(uint32_t name_id);

/* The str of a range's name (ls_range_name: a step's is made from its
 * template and index), None when unknown. */
PyObject *ls_py_range_name(const ls_range *range);

/* An int, or None when value is negative (a step or index that is absent). */
PyObject *ls_py_index_or_none(int64_t value);

#endif
