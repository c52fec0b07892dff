/* ls_rows: see ls_rows.h. */
#include "ls_rows.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef enum { OP_ITEM, OP_CONST, OP_LIST_COPY, OP_INT, OP_SCALE, OP_SPAN, OP_RATIO, OP_DICT } op_kind;

/* A column of int64 or uint64 read in place from a buffer. */
typedef struct {
    Py_buffer view;
    int held;
    int is_signed;
} int_column;

typedef struct row_program row_program;

typedef struct {
    PyObject *key; /* borrowed: the program holds it for the call */
    int export;    /* a slot of `exported`, or -1 */
    op_kind kind;
    PyObject *object; /* item: a fast sequence (owned); const, list_copy, ratio's zero: borrowed */
    int_column a, b, c;
    double pre, post;
    int digits;
    row_program *nested;
} row_op;

struct row_program {
    PyObject *template; /* borrowed; NULL: a new dict per row */
    Py_ssize_t n;
    row_op *ops;
};

/* Equal floats made within one build share one object, found by their
 * bits in a direct-mapped table (borrowed: the rows built so far hold
 * them until the build ends; a failed build drops its rows only after
 * its last use of the cache).  A million range rows of a few hundred
 * distinct host times hold a few hundred floats, not a million. */
#define FLOAT_CACHE 256
typedef struct {
    uint64_t bits[FLOAT_CACHE];
    PyObject *object[FLOAT_CACHE]; /* NULL: an empty slot */
} float_cache;

static PyObject *cached_float(float_cache *cache, double value)
{
    uint64_t bits;
    memcpy(&bits, &value, sizeof bits);
    uint64_t h = bits * 0x9E3779B97F4A7C15ull;
    size_t slot = (size_t)(h >> 56); /* FLOAT_CACHE = 2**8 slots */
    if (cache->object[slot] != NULL && cache->bits[slot] == bits) {
        Py_INCREF(cache->object[slot]);
        return cache->object[slot];
    }
    PyObject *made = PyFloat_FromDouble(value);
    if (made != NULL) {
        cache->bits[slot] = bits;
        cache->object[slot] = made;
    }
    return made;
}

/* ---- rounding as Python's round(x, digits) ---- */

static const double powers_of_ten[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9};

/* 1 and *out = round(x, digits) when no tie is within the product's
 * rounding error: the decimal Python rounds to is then k / 10**digits with
 * k the integer nearest to |x| * 10**digits, and an IEEE division of two
 * exact values gives the double nearest to it, as Python's conversion of
 * that decimal does.  0: ask Python. */
static int round_fast(double x, int digits, double *out)
{
    if (!isfinite(x) || digits < 0 || digits > 9)
        return 0;
    double scale = powers_of_ten[digits];
    double y = fabs(x) * scale; /* within y * 2**-53 of the exact product */
    if (!(y < 0x1p52))
        return 0;
    double whole = floor(y), fraction = y - whole; /* both exact */
    if (fabs(fraction - 0.5) <= ldexp(y, -50) + 0x1p-1000)
        return 0; /* a tie, or too close to one to tell */
    double k = fraction > 0.5 ? whole + 1.0 : whole;
    *out = copysign(k / scale, x);
    return 1;
}

PyObject *ls_py_round(double x, int digits)
{
    double rounded;
    if (round_fast(x, digits, &rounded))
        return PyFloat_FromDouble(rounded);
    PyObject *value = PyFloat_FromDouble(x);
    if (value == NULL)
        return NULL;
    PyObject *out = PyObject_CallMethod(value, "__round__", "i", digits);
    Py_DECREF(value);
    return out;
}

PyObject *ls_py_round_method(PyObject *module, PyObject *args)
{
    (void)module;
    double x;
    int digits;
    if (!PyArg_ParseTuple(args, "di:_round", &x, &digits))
        return NULL;
    return ls_py_round(x, digits);
}

/* ---- columns ---- */

/* The buffer's items must be int64 or uint64 (key: the entry it is for). */
static int open_checked(int_column *column, PyObject *key)
{
    const char *format = column->view.format ? column->view.format : "B";
    if (format[0] == '@' || format[0] == '=')
        format++;
    int is_signed = strcmp(format, "q") == 0 || strcmp(format, "l") == 0;
    int is_unsigned = strcmp(format, "Q") == 0 || strcmp(format, "L") == 0;
    if (column->view.itemsize != 8 || !(is_signed || is_unsigned)) {
        PyErr_Format(PyExc_TypeError, "_rows: key %R: a column must hold int64 or uint64 "
                                      "items, not format %s of %zd bytes",
                     key, column->view.format ? column->view.format : "B",
                     column->view.itemsize);
        return -1;
    }
    column->is_signed = is_signed;
    return 0;
}

static int open_column(PyObject *object, Py_ssize_t count, PyObject *key, int_column *column)
{
    if (PyObject_GetBuffer(object, &column->view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0) {
        PyErr_Format(PyExc_TypeError, "_rows: key %R: a column must be a buffer of int64 or "
                                      "uint64 (a memoryview of format 'q' or 'Q')", key);
        return -1;
    }
    column->held = 1;
    if (open_checked(column, key) != 0)
        return -1;
    if (column->view.len != count * 8) {
        PyErr_Format(PyExc_ValueError, "_rows: key %R: a column of %zd items for %zd rows", key,
                     column->view.len / 8, count);
        return -1;
    }
    return 0;
}

static void close_column(int_column *column)
{
    if (column->held)
        PyBuffer_Release(&column->view);
    column->held = 0;
}

static PyObject *int_at(const int_column *column, Py_ssize_t i)
{
    const char *at = (const char *)column->view.buf + i * 8;
    if (column->is_signed) {
        int64_t value;
        memcpy(&value, at, sizeof value);
        return PyLong_FromLongLong((long long)value);
    }
    uint64_t value;
    memcpy(&value, at, sizeof value);
    return PyLong_FromUnsignedLongLong((unsigned long long)value);
}

/* The item as a double when it is an integer of at most 53 bits (exact). */
static int small_at(const int_column *column, Py_ssize_t i, double *out)
{
    const char *at = (const char *)column->view.buf + i * 8;
    if (column->is_signed) {
        int64_t value;
        memcpy(&value, at, sizeof value);
        if (value > (INT64_C(1) << 53) || value < -(INT64_C(1) << 53))
            return 0;
        *out = (double)value;
        return 1;
    }
    uint64_t value;
    memcpy(&value, at, sizeof value);
    if (value > (UINT64_C(1) << 53))
        return 0;
    *out = (double)value;
    return 1;
}

/* ---- parsing a program ---- */

static void free_program(row_program *program)
{
    if (program == NULL)
        return;
    for (Py_ssize_t k = 0; program->ops != NULL && k < program->n; k++) {
        row_op *op = &program->ops[k];
        if (op->kind == OP_ITEM)
            Py_XDECREF(op->object);
        close_column(&op->a);
        close_column(&op->b);
        close_column(&op->c);
        free_program(op->nested);
    }
    PyMem_Free(program->ops);
    PyMem_Free(program);
}

/* Which export slots an entry fills (each exactly once). */
typedef struct {
    int exports;
    unsigned char taken[64];
} export_slots;

static row_program *parse_program(PyObject *spec, Py_ssize_t count, export_slots *slots);

static int arity_error(PyObject *key, const char *op, int wanted)
{
    PyErr_Format(PyExc_ValueError, "_rows: key %R: op %s takes %d arguments", key, op, wanted);
    return -1;
}

static int parse_double(PyObject *object, PyObject *key, const char *what, double *out)
{
    *out = PyFloat_AsDouble(object);
    if (*out == -1.0 && PyErr_Occurred()) {
        PyErr_Format(PyExc_TypeError, "_rows: key %R: %s must be a number", key, what);
        return -1;
    }
    if (*out == 0.0 || !isfinite(*out)) {
        PyErr_Format(PyExc_ValueError, "_rows: key %R: %s must be finite and not 0", key, what);
        return -1;
    }
    return 0;
}

static int parse_op(PyObject *entry, Py_ssize_t count, export_slots *slots, row_op *op)
{
    if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) < 3) {
        PyErr_SetString(PyExc_TypeError, "_rows: an entry must be a tuple (key, export, op, ...)");
        return -1;
    }
    op->key = PyTuple_GET_ITEM(entry, 0);
    if (!PyUnicode_Check(op->key)) {
        PyErr_Format(PyExc_TypeError, "_rows: key %R is not a str", op->key);
        return -1;
    }
    long export = PyLong_AsLong(PyTuple_GET_ITEM(entry, 1));
    if ((export == -1 && PyErr_Occurred()) || export < -1 || export >= slots->exports ||
        (export >= 0 && slots->taken[export])) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "_rows: key %R: export must be -1 or a slot below %d "
                                       "that no other entry fills", op->key, slots->exports);
        return -1;
    }
    op->export = (int)export;
    if (export >= 0)
        slots->taken[export] = 1;
    PyObject *name = PyTuple_GET_ITEM(entry, 2);
    const char *kind = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    if (kind == NULL) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "_rows: key %R: the op must be a str", op->key);
        return -1;
    }
    Py_ssize_t args = PyTuple_GET_SIZE(entry) - 3;
    PyObject *const *arg = &PyTuple_GET_ITEM(entry, 3);
    if (strcmp(kind, "item") == 0) {
        op->kind = OP_ITEM;
        if (args != 1)
            return arity_error(op->key, kind, 1);
        op->object = PySequence_Fast(arg[0], "_rows: an item column must be a sequence");
        if (op->object == NULL)
            return -1;
        if (PySequence_Fast_GET_SIZE(op->object) != count) {
            PyErr_Format(PyExc_ValueError, "_rows: key %R: a column of %zd items for %zd rows",
                         op->key, PySequence_Fast_GET_SIZE(op->object), count);
            return -1;
        }
        return 0;
    }
    if (strcmp(kind, "const") == 0 || strcmp(kind, "list_copy") == 0) {
        op->kind = kind[0] == 'c' ? OP_CONST : OP_LIST_COPY;
        if (args != 1)
            return arity_error(op->key, kind, 1);
        op->object = arg[0];
        if (op->kind == OP_LIST_COPY && !PyList_Check(op->object)) {
            PyErr_Format(PyExc_TypeError, "_rows: key %R: list_copy takes a list", op->key);
            return -1;
        }
        return 0;
    }
    /* int: a column; scale: a column and a divisor (and a guard column: None
     * where it is 0); span: two and a divisor. */
    int is_int = strcmp(kind, "int") == 0, is_scale = strcmp(kind, "scale") == 0;
    if (is_int || is_scale || strcmp(kind, "span") == 0) {
        op->kind = is_int ? OP_INT : is_scale ? OP_SCALE : OP_SPAN;
        int columns = op->kind == OP_SPAN ? 2 : 1, wanted = columns + !is_int;
        int guarded = is_scale && args == wanted + 1;
        if (args != wanted && !guarded)
            return arity_error(op->key, kind, wanted);
        if (open_column(arg[0], count, op->key, &op->a) != 0 ||
            (columns == 2 && open_column(arg[1], count, op->key, &op->b) != 0) ||
            (guarded && open_column(arg[2], count, op->key, &op->b) != 0))
            return -1;
        return is_int ? 0 : parse_double(arg[columns], op->key, "the divisor", &op->post);
    }
    if (strcmp(kind, "ratio") == 0) {
        op->kind = OP_RATIO;
        if (args != 7)
            return arity_error(op->key, kind, 7);
        if (open_column(arg[0], count, op->key, &op->a) != 0 ||
            open_column(arg[1], count, op->key, &op->b) != 0 ||
            (arg[2] != Py_None && open_column(arg[2], count, op->key, &op->c) != 0))
            return -1;
        if (parse_double(arg[3], op->key, "pre", &op->pre) != 0 ||
            parse_double(arg[4], op->key, "post", &op->post) != 0)
            return -1;
        long digits = PyLong_AsLong(arg[5]);
        if ((digits == -1 && PyErr_Occurred()) || digits < 0 || digits > 15) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "_rows: key %R: digits must be an int 0-15", op->key);
            return -1;
        }
        op->digits = (int)digits;
        op->object = arg[6];
        return 0;
    }
    if (strcmp(kind, "dict") == 0) {
        op->kind = OP_DICT;
        if (args != 1)
            return arity_error(op->key, kind, 1);
        op->nested = parse_program(arg[0], count, slots);
        return op->nested == NULL ? -1 : 0;
    }
    PyErr_Format(PyExc_ValueError, "_rows: key %R: no op %R", op->key, name);
    return -1;
}

/* The template's keys must be the entries' keys in their order: a row is
 * the template with its values replaced, so its keys come from there. */
static int check_template(const row_program *program)
{
    if (PyDict_Size(program->template) != program->n)
        goto differs;
    Py_ssize_t pos = 0, k = 0;
    PyObject *key, *value;
    while (PyDict_Next(program->template, &pos, &key, &value)) {
        const row_op *op = &program->ops[k++];
        int same = PyObject_RichCompareBool(key, op->key, Py_EQ);
        if (same < 0)
            return -1;
        if (!same)
            goto differs;
        if (op->kind == OP_CONST && value != op->object) {
            PyErr_Format(PyExc_ValueError, "_rows: key %R: a const must be the template's "
                                           "value (its copies keep it)", op->key);
            return -1;
        }
    }
    return 0;
differs:
    PyErr_SetString(PyExc_ValueError,
                    "_rows: the template's keys are not the entries' keys in their order");
    return -1;
}

static row_program *parse_program(PyObject *spec, Py_ssize_t count, export_slots *slots)
{
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 2 ||
        !PyTuple_Check(PyTuple_GET_ITEM(spec, 1))) {
        PyErr_SetString(PyExc_TypeError, "_rows: a program must be a tuple (template, entries)");
        return NULL;
    }
    PyObject *template = PyTuple_GET_ITEM(spec, 0), *entries = PyTuple_GET_ITEM(spec, 1);
    if (template != Py_None && !PyDict_CheckExact(template)) {
        PyErr_SetString(PyExc_TypeError, "_rows: a program's template must be a dict or None");
        return NULL;
    }
    row_program *program = PyMem_Calloc(1, sizeof *program);
    if (program == NULL)
        return (row_program *)PyErr_NoMemory();
    program->template = template == Py_None ? NULL : template;
    program->n = PyTuple_GET_SIZE(entries);
    program->ops = PyMem_Calloc(program->n ? (size_t)program->n : 1, sizeof *program->ops);
    if (program->ops == NULL) {
        free_program(program);
        return (row_program *)PyErr_NoMemory();
    }
    for (Py_ssize_t k = 0; k < program->n; k++)
        if (parse_op(PyTuple_GET_ITEM(entries, k), count, slots, &program->ops[k]) != 0) {
            program->n = k + 1; /* what parse_op opened is freed */
            free_program(program);
            return NULL;
        }
    if (program->template != NULL && check_template(program) != 0) {
        free_program(program);
        return NULL;
    }
    return program;
}

/* ---- running it ---- */

/* (last - first) / div, or pre * num / den / post rounded, through Python
 * numbers: for integers of more than 53 bits, where a double would round. */
static PyObject *slow_figure(const row_op *op, Py_ssize_t i)
{
    PyObject *x = NULL, *y = NULL, *den = NULL, *out = NULL;
    if (op->kind == OP_SPAN) {
        PyObject *first = int_at(&op->a, i), *last = int_at(&op->b, i);
        if (first != NULL && last != NULL)
            x = PyNumber_Subtract(last, first);
        Py_XDECREF(first);
        Py_XDECREF(last);
    } else {
        x = int_at(&op->a, i);
        den = int_at(&op->b, i);
        if (den != NULL && op->c.held) {
            PyObject *more = int_at(&op->c, i);
            PyObject *sum = more ? PyNumber_Add(den, more) : NULL;
            Py_XDECREF(more);
            Py_SETREF(den, sum);
        }
        int no_den = den != NULL ? PyObject_Not(den) : -1;
        if (no_den != 0) { /* 1: a zero denominator gives `zero`; -1: an error */
            Py_XDECREF(x);
            Py_XDECREF(den);
            if (no_den < 0)
                return NULL;
            Py_INCREF(op->object);
            return op->object;
        }
        if (x != NULL && op->pre != 1.0) {
            PyObject *pre = PyFloat_FromDouble(op->pre);
            y = pre ? PyNumber_Multiply(pre, x) : NULL;
            Py_XDECREF(pre);
            Py_SETREF(x, y);
        }
        if (x != NULL && den != NULL)
            Py_SETREF(x, PyNumber_TrueDivide(x, den));
        else
            Py_CLEAR(x);
    }
    if (x != NULL && op->post != 1.0) {
        PyObject *post = PyFloat_FromDouble(op->post);
        y = post ? PyNumber_TrueDivide(x, post) : NULL;
        Py_XDECREF(post);
        Py_SETREF(x, y);
    }
    if (x != NULL && op->kind == OP_RATIO) {
        double value = PyFloat_AsDouble(x);
        out = value == -1.0 && PyErr_Occurred() ? NULL : ls_py_round(value, op->digits);
    } else {
        out = x;
        x = NULL;
    }
    Py_XDECREF(x);
    Py_XDECREF(den);
    return out;
}

static PyObject *ratio_at(const row_op *op, Py_ssize_t i, float_cache *cache)
{
    double num, den, more = 0.0;
    if (!small_at(&op->a, i, &num) || !small_at(&op->b, i, &den) ||
        (op->c.held && !small_at(&op->c, i, &more)))
        return slow_figure(op, i);
    den += more; /* exact: both below 2**53 */
    if (den == 0.0) {
        Py_INCREF(op->object);
        return op->object;
    }
    if (fabs(den) > 0x1p53)
        return slow_figure(op, i);
    double x = op->pre * num / den;
    if (op->post != 1.0)
        x /= op->post;
    double rounded;
    if (round_fast(x, op->digits, &rounded))
        return cached_float(cache, rounded);
    return ls_py_round(x, op->digits);
}

static PyObject *span_at(const row_op *op, Py_ssize_t i, float_cache *cache)
{
    double first, last;
    if (!small_at(&op->a, i, &first) || !small_at(&op->b, i, &last))
        return slow_figure(op, i);
    return cached_float(cache, (last - first) / op->post); /* last - first: exact */
}

static PyObject *run_op(const row_op *op, Py_ssize_t i, float_cache *cache)
{
    double value;
    switch (op->kind) {
    case OP_ITEM: {
        PyObject *item = PySequence_Fast_GET_ITEM(op->object, i);
        Py_INCREF(item);
        return item;
    }
    case OP_CONST:
        Py_INCREF(op->object);
        return op->object;
    case OP_LIST_COPY:
    case OP_DICT: /* containers are made a column at a time: build_rows */
        break;
    case OP_INT:
        return int_at(&op->a, i);
    case OP_SCALE:
        if (op->b.held && small_at(&op->b, i, &value) && value == 0.0)
            return Py_NewRef(Py_None); /* the guard is 0: no figure */
        if (!small_at(&op->a, i, &value)) {
            PyObject *whole = int_at(&op->a, i), *post = PyFloat_FromDouble(op->post);
            PyObject *out = whole && post ? PyNumber_TrueDivide(whole, post) : NULL;
            Py_XDECREF(whole);
            Py_XDECREF(post);
            return out;
        }
        return cached_float(cache, value / op->post);
    case OP_SPAN:
        return span_at(op, i, cache);
    case OP_RATIO:
        return ratio_at(op, i, cache);
    }
    PyErr_SetString(PyExc_SystemError, "_rows: unknown op");
    return NULL;
}

static void release_column(PyObject **column, Py_ssize_t count)
{
    for (Py_ssize_t i = 0; column != NULL && i < count; i++)
        Py_XDECREF(column[i]);
    PyMem_Free(column);
}

static int build_rows(const row_program *program, Py_ssize_t count, PyObject **exported,
                      PyObject **out);

/* The values of a container op (a nested dict, a list copy) for every
 * row, in a new array; NULL with an exception set on failure. */
static PyObject **container_column(const row_op *op, Py_ssize_t count, PyObject **exported)
{
    PyObject **column = PyMem_Calloc(count ? (size_t)count : 1, sizeof *column);
    if (column == NULL)
        return (PyObject **)PyErr_NoMemory();
    int failed = 0;
    if (op->kind == OP_DICT)
        failed = build_rows(op->nested, count, exported, column) != 0;
    else
        for (Py_ssize_t i = 0; !failed && i < count; i++)
            failed = (column[i] = PyList_GetSlice(op->object, 0,
                                                  PyList_GET_SIZE(op->object))) == NULL;
    if (failed) {
        release_column(column, count);
        return NULL;
    }
    return column;
}

/* The program's `count` rows into out[] (new references; out[] holds NULLs
 * after a failure, its rows released).  The containers the rows hold are
 * made first, a column at a time, so the cyclic GC's list holds each kind
 * in one run: a full collection then walks a million steps' dicts in
 * memory order (1.3 s more at 1M steps with the kinds interleaved). */
static int build_rows(const row_program *program, Py_ssize_t count, PyObject **exported,
                      PyObject **out)
{
    PyObject ***columns = PyMem_Calloc(program->n ? (size_t)program->n : 1, sizeof *columns);
    if (columns == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    int failed = 0;
    for (Py_ssize_t k = 0; !failed && k < program->n; k++) {
        const row_op *op = &program->ops[k];
        if (op->kind == OP_DICT || op->kind == OP_LIST_COPY)
            failed = (columns[k] = container_column(op, count, exported)) == NULL;
    }
    float_cache cache;
    memset(&cache, 0, sizeof cache);
    for (Py_ssize_t i = 0; !failed && i < count; i++) {
        PyObject *row = program->template ? PyDict_Copy(program->template) : PyDict_New();
        for (Py_ssize_t k = 0; row != NULL && k < program->n; k++) {
            const row_op *op = &program->ops[k];
            if (op->kind == OP_CONST && program->template != NULL && op->export < 0)
                continue; /* the template's copy holds it */
            PyObject *value;
            if (columns[k] != NULL) {
                value = columns[k][i]; /* taken over */
                columns[k][i] = NULL;
            } else
                value = run_op(op, i, &cache);
            if (value == NULL || PyDict_SetItem(row, op->key, value) != 0) {
                Py_XDECREF(value);
                Py_CLEAR(row);
                break;
            }
            if (op->export >= 0)
                PyList_SET_ITEM(exported[op->export], i, value); /* steals it */
            else
                Py_DECREF(value);
        }
        out[i] = row;
        failed = row == NULL;
    }
    for (Py_ssize_t k = 0; k < program->n; k++)
        release_column(columns[k], count);
    PyMem_Free(columns);
    if (failed)
        for (Py_ssize_t i = 0; i < count; i++)
            Py_CLEAR(out[i]);
    return failed ? -1 : 0;
}

PyObject *ls_py_rows(PyObject *module, PyObject *args)
{
    (void)module;
    Py_ssize_t count;
    int exports;
    PyObject *spec;
    if (!PyArg_ParseTuple(args, "nOi:_rows", &count, &spec, &exports))
        return NULL;
    if (count < 0 || exports < 0 || exports > 64) {
        PyErr_SetString(PyExc_ValueError, "_rows: count must be >= 0 and exports 0-64");
        return NULL;
    }
    export_slots slots = {.exports = exports};
    row_program *program = parse_program(spec, count, &slots);
    if (program == NULL)
        return NULL;
    for (int k = 0; k < exports; k++)
        if (!slots.taken[k]) {
            PyErr_Format(PyExc_ValueError, "_rows: no entry exports to slot %d", k);
            free_program(program);
            return NULL;
        }
    PyObject *rows = PyList_New(count);
    PyObject *exported = PyTuple_New(exports);
    PyObject *lists[64] = {NULL};
    int failed = rows == NULL || exported == NULL;
    for (int k = 0; !failed && k < exports; k++) {
        lists[k] = PyList_New(count);
        if (lists[k] == NULL)
            failed = 1;
        else
            PyTuple_SET_ITEM(exported, k, lists[k]);
    }
    PyObject **made = failed ? NULL : PyMem_Calloc(count ? (size_t)count : 1, sizeof *made);
    if (!failed && made == NULL) {
        PyErr_NoMemory();
        failed = 1;
    }
    if (!failed && build_rows(program, count, lists, made) != 0)
        failed = 1;
    for (Py_ssize_t i = 0; !failed && i < count; i++)
        PyList_SET_ITEM(rows, i, made[i]); /* steals it */
    PyMem_Free(made);
    free_program(program);
    if (failed) {
        Py_XDECREF(rows);
        Py_XDECREF(exported);
        return NULL;
    }
    PyObject *out = PyTuple_Pack(2, rows, exported);
    Py_DECREF(rows);
    Py_DECREF(exported);
    return out;
}

static PyObject *int128_to_py(__int128 value)
{
    if (value >= INT64_MIN && value <= INT64_MAX)
        return PyLong_FromLongLong((long long)value);
    PyObject *high = PyLong_FromLongLong((long long)(value >> 64));
    PyObject *low = PyLong_FromUnsignedLongLong((unsigned long long)(uint64_t)value);
    PyObject *shift = PyLong_FromLong(64);
    PyObject *shifted = high && shift ? PyNumber_Lshift(high, shift) : NULL;
    PyObject *out = shifted && low ? PyNumber_Or(shifted, low) : NULL;
    Py_XDECREF(high);
    Py_XDECREF(low);
    Py_XDECREF(shift);
    Py_XDECREF(shifted);
    return out;
}

PyObject *ls_py_column_stats(PyObject *module, PyObject *object)
{
    (void)module;
    int_column column = {0};
    if (PyObject_GetBuffer(object, &column.view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0)
        return NULL;
    column.held = 1;
    PyObject *out = NULL;
    if (open_checked(&column, Py_None) == 0) {
        Py_ssize_t n = column.view.len / 8;
        /* Sums in 128 bits: a million ns figures cannot overflow them. */
        __int128 sum = 0, low = 0, high = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            const char *at = (const char *)column.view.buf + i * 8;
            __int128 value;
            if (column.is_signed) {
                int64_t v;
                memcpy(&v, at, sizeof v);
                value = v;
            } else {
                uint64_t v;
                memcpy(&v, at, sizeof v);
                value = v;
            }
            sum += value;
            if (i == 0 || value < low)
                low = value;
            if (i == 0 || value > high)
                high = value;
        }
        PyObject *total = int128_to_py(sum);
        PyObject *least = n ? int128_to_py(low) : Py_NewRef(Py_None);
        PyObject *most = n ? int128_to_py(high) : Py_NewRef(Py_None);
        if (total != NULL && least != NULL && most != NULL)
            out = Py_BuildValue("(nOOO)", n, total, least, most);
        Py_XDECREF(total);
        Py_XDECREF(least);
        Py_XDECREF(most);
    }
    close_column(&column);
    return out;
}
