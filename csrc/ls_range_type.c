/* ls_range_type: the Range context manager.  Enter and exit run in C, so a
 * with-block costs little more than Python's own with-statement. */
#include "ls_range_type.h"

#include "ls_names.h"
#include "ls_nvtx.h"
#include "ls_session.h"

typedef struct {
    PyObject_HEAD
    PyObject *name;     /* str */
    uint32_t name_id;
    int32_t step_index; /* -1 for a plain range */
} ls_range_object;

PyObject *ls_range_new(PyTypeObject *type, PyObject *name, int32_t step_index)
{
    if (!PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError, "range name must be a str, not %.100s",
                     Py_TYPE(name)->tp_name);
        return NULL;
    }
    Py_ssize_t len = 0;
    const char *text = PyUnicode_AsUTF8AndSize(name, &len);
    if (text == NULL)
        return NULL;
    if (len == 0) {
        PyErr_SetString(PyExc_ValueError, "range name must not be empty");
        return NULL;
    }
    uint32_t id = ls_names_intern(text, (size_t)len);
    if (id == LS_NO_NAME)
        return PyErr_NoMemory();
    ls_nvtx_register(id);
    ls_range_object *self = PyObject_GC_New(ls_range_object, type);
    if (self == NULL)
        return NULL;
    self->name = Py_NewRef(name);
    self->name_id = id;
    self->step_index = step_index;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static PyObject *range_enter(PyObject *op, PyObject *unused)
{
    (void)unused;
    ls_range_object *self = (ls_range_object *)op;
    if (ls_session_push(self->name_id, self->step_index) != 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "step %R started while another step is open on this thread: steps "
                     "do not nest (use loopscope.range() inside a step)", self->name);
        return NULL;
    }
    return Py_NewRef(op);
}

static PyObject *range_exit(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    (void)args;
    (void)nargs;
    ls_range_object *self = (ls_range_object *)op;
    ls_session_pop(self->step_index >= 0);
    Py_RETURN_FALSE; /* never swallow the user's exception */
}

static PyObject *range_repr(PyObject *op)
{
    ls_range_object *self = (ls_range_object *)op;
    if (self->step_index >= 0)
        return PyUnicode_FromFormat("<loopscope step %R index=%d>", self->name,
                                    (int)self->step_index);
    return PyUnicode_FromFormat("<loopscope range %R>", self->name);
}

static PyObject *range_get_name(PyObject *op, void *closure)
{
    (void)closure;
    return Py_NewRef(((ls_range_object *)op)->name);
}

static PyObject *range_get_step(PyObject *op, void *closure)
{
    (void)closure;
    int32_t step = ((ls_range_object *)op)->step_index;
    if (step < 0)
        Py_RETURN_NONE;
    return PyLong_FromLong(step);
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
    type->tp_free(op);
    Py_DECREF(type);
}

static PyMethodDef range_methods[] = {
    {"__enter__", range_enter, METH_NOARGS, "Open the range (NVTX push + host timestamp)."},
    {"__exit__", (PyCFunction)(void (*)(void))range_exit, METH_FASTCALL,
     "Close the range; exceptions pass through."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef range_getset[] = {
    {"name", range_get_name, NULL, "The range's name.", NULL},
    {"step", range_get_step, NULL, "Step index, or None for a plain range.", NULL},
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
