/* ls_rows: the summary's long lists of dicts (a dict per step, with its
 * gaps, causes and readiness dicts) built row by row in C from a program
 * that python/loopscope/_rows.py declares: which key takes which column,
 * and how (as is, an int of a column of int64, ns scaled to ms, a rounded
 * ratio of two columns, a nested dict).  The shaping stays declared in
 * Python; a million rows cost only the objects they hold, with no
 * intermediate list of floats per figure.
 *
 * _core._rows(count, program, exports) -> (rows, exported)
 *   program: (template, entries); template a dict whose copies are the
 *     rows (a shared key table: loopscope._rows.template), holding the
 *     consts' values, or None (a new dict per row: smaller for a handful
 *     of keys); entries a tuple of
 *     (key, export, op, *args), export -1 or a slot below `exports`:
 *       "item", seq                 seq[i] (a sequence of `count` items)
 *       "const", value              the same object in every row
 *       "list_copy", list           a new list with list's items
 *       "int", column               int(column[i])
 *       "scale", column, div        column[i] / div
 *       "scale", column, div, guard column[i] / div, or None where guard[i] is 0
 *       "span", first, last, div    (last[i] - first[i]) / div
 *       "ratio", num, den, den2, pre, post, digits, zero
 *           zero when den[i] (+ den2[i]) is 0, else
 *           round(pre * num[i] / (den[i] + den2[i]) / post, digits):
 *           Python's own arithmetic and round(), exactly (den2 None: 0)
 *       "dict", program             a nested dict
 *     column: a buffer of int64 or uint64 ("q"/"Q", Model.step_table's
 *     memoryviews), `count` items.
 *   exported: a tuple of `exports` lists; slot k holds, per row, the value
 *     its entry put in the row (the verdict reads figures of the rows).
 * Equal floats within a row are one object (floats are immutable). */
#ifndef LS_ROWS_H
#define LS_ROWS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

PyObject *ls_py_rows(PyObject *module, PyObject *args);

/* round(x, digits) as Python computes it (correctly rounded decimal, half
 * to even), without a call into Python unless x is within rounding error
 * of a tie; NULL with an exception set on failure. */
PyObject *ls_py_round(double x, int digits);

/* _core._round(x, digits): ls_py_round, for tests against Python's round(). */
PyObject *ls_py_round_method(PyObject *module, PyObject *args);

/* _core._column_stats(column) -> (count, sum, min, max) of a column of
 * int64 or uint64 (min and max None when empty): the loop's totals over
 * the step columns without an int object per item. */
PyObject *ls_py_column_stats(PyObject *module, PyObject *object);

#endif
