/* ls_range_type: the Range context manager of loopscope.range(name).  Enter
 * and exit run in C, so a with-block costs little more than Python's own
 * with-statement.  Each object has its own owner token: its exit closes the
 * range it opened on the calling thread (ls_session_pop), whatever else
 * opened or closed in between. */
#include "ls_range_type.h"

#include "ls_names.h"
#include "ls_nvtx.h"
#include "ls_session.h"

#include <string.h>

typedef struct {
    PyObject_HEAD
    PyObject *name;    /* str */
    uint64_t owner;
    uint32_t name_id;  /* one reference held */
    void *nvtx_handle; /* registered string, NULL: pushed as text */
} ls_range_object;

int ls_check_name(PyObject *name, const char *what, const char **text, Py_ssize_t *len)
{
    if (!PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError, "%s must be a str, not %.100s", what,
                     Py_TYPE(name)->tp_name);
        return -1;
    }
    *text = PyUnicode_AsUTF8AndSize(name, len);
    if (*text == NULL)
        return -1;
    if (*len == 0) {
        PyErr_Format(PyExc_ValueError, "%s must not be empty", what);
        return -1;
    }
    if (memchr(*text, '\0', (size_t)*len) != NULL) {
        PyErr_Format(PyExc_ValueError, "%s %R contains a NUL character (U+0000): names are C "
                     "strings for NVTX and would be cut there; remove it", what, name);
        return -1;
    }
    return 0;
}

PyObject *ls_range_new(PyTypeObject *type, PyObject *name)
{
    const char *text;
    Py_ssize_t len;
    if (ls_check_name(name, "range name", &text, &len) != 0)
        return NULL;
    uint32_t id = ls_names_intern(text, (size_t)len);
    if (id == LS_NO_NAME)
        return PyErr_NoMemory();
    ls_range_object *self = PyObject_GC_New(ls_range_object, type);
    if (self == NULL) {
        ls_names_release(id);
        return NULL;
    }
    self->name = Py_NewRef(name);
    self->owner = ls_session_new_owner();
    self->name_id = id;
    self->nvtx_handle = ls_nvtx_register(ls_names_text(id));
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static PyObject *range_enter(PyObject *op, PyObject *unused)
{
    (void)unused;
    ls_range_object *self = (ls_range_object *)op;
    /* LS_PUSH_NO_MEMORY is counted as a dropped record: the user's code goes on. */
    (void)ls_session_push(self->owner, self->name_id, -1, self->nvtx_handle, NULL);
    return Py_NewRef(op);
}

static PyObject *range_exit(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    (void)args;
    (void)nargs;
    (void)ls_session_pop(((ls_range_object *)op)->owner);
    Py_RETURN_FALSE; /* never swallow the user's exception */
}

static PyObject *range_repr(PyObject *op)
{
    return PyUnicode_FromFormat("<loopscope range %R>", ((ls_range_object *)op)->name);
}

static PyObject *range_get_name(PyObject *op, void *closure)
{
    (void)closure;
    return Py_NewRef(((ls_range_object *)op)->name);
}

static PyObject *range_get_step(PyObject *op, void *closure)
{
    (void)op;
    (void)closure;
    Py_RETURN_NONE;
}

static int range_traverse(PyObject *op, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(op));
    Py_VISIT(((ls_range_object *)op)->name);
    return 0;
}

static int range_clear(PyObject *op)
{
    Py_CLEAR(((ls_range_object *)op)->name);
    return 0;
}

static void range_dealloc(PyObject *op)
{
    PyTypeObject *type = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    range_clear(op);
    ls_names_release(((ls_range_object *)op)->name_id);
    type->tp_free(op);
    Py_DECREF(type);
}

static PyMethodDef range_methods[] = {
    {"__enter__", range_enter, METH_NOARGS, "Open the range (NVTX push + host timestamp)."},
    {"__exit__", (PyCFunction)(void (*)(void))range_exit, METH_FASTCALL,
     "Close the range this object opened on this thread; exceptions pass through."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef range_getset[] = {
    {"name", range_get_name, NULL, "The range's name.", NULL},
    {"step", range_get_step, NULL, "None: a plain range (steps are StepScope objects).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot range_slots[] = {
    {Py_tp_doc, "A named host range: an NVTX range plus loopscope's own timestamps."},
    {Py_tp_methods, range_methods},
    {Py_tp_getset, range_getset},
    {Py_tp_repr, range_repr},
    {Py_tp_traverse, range_traverse},
    {Py_tp_clear, range_clear},
    {Py_tp_dealloc, range_dealloc},
    {0, NULL},
};

PyType_Spec ls_range_type_spec = {
    .name = "loopscope._core.Range",
    .basicsize = sizeof(ls_range_object),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = range_slots,
};
