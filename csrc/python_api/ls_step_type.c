/* ls_step_type: loop steps.  A Stepper holds a profile's step numbering and
 * default name template ("Step_{i}"); each prof.step() is a StepScope whose
 * enter takes the next index, so a step whose enter failed uses up nothing.
 * A step's record keeps the template's name id and the index: no name is
 * made per step (ls_names_format gives it when read); the NVTX push gets
 * the formatted text.  While a step is open on a thread, it prefixes the
 * layer ranges of instrument() there (ls_step_prefix). */
#include "ls_step_type.h"

#include "ls_module_state.h"
#include "ls_names.h"
#include "ls_range_type.h"
#include "ls_session.h"

#include <string.h>

typedef struct {
    PyObject_HEAD
    PyObject *template_;  /* str with "{i}" where the index goes */
    uint32_t template_id; /* held */
    int32_t next;         /* index of the next step entered */
} ls_stepper_object;

typedef struct {
    PyObject_HEAD
    ls_stepper_object *stepper; /* NULL for a fixed step */
    PyObject *template_;        /* str: this step's template, or its fixed name */
    uint32_t template_id;       /* held */
    uint64_t owner;
    int32_t index;              /* -1 until entered (fixed steps: their index) */
} ls_step_object;

/* The step open on this thread, and the one last opened on any thread (for
 * backward hooks, which run on autograd's threads).  Each holds a
 * reference on its template.  serial: a new value per step enter. */
typedef struct {
    uint64_t owner, serial;
    uint32_t template_id;
    int32_t index;
} ls_open_step;

static _Thread_local ls_open_step thread_step = {0, 0, LS_NO_NAME, -1};
static ls_open_step last_step = {0, 0, LS_NO_NAME, -1};
static uint64_t step_serial;

static void set_open_step(ls_open_step *slot, const ls_open_step *step)
{
    ls_names_retain(step->template_id);
    ls_names_release(slot->template_id);
    *slot = *step;
}

static void clear_open_step(ls_open_step *slot, uint64_t owner)
{
    if (slot->owner != owner)
        return;
    ls_names_release(slot->template_id);
    *slot = (ls_open_step){0, 0, LS_NO_NAME, -1};
}

uint32_t ls_step_prefix(int any_thread, uint64_t *serial, int32_t *index)
{
    const ls_open_step *s = &thread_step;
    if (s->template_id == LS_NO_NAME && any_thread)
        s = &last_step;
    *serial = s->serial;
    *index = s->index;
    return s->template_id;
}

/* The step's name into a buffer that grows to the longest one (the GIL
 * guards it): NULL when memory ran out. */
static const char *format_name(uint32_t template_id, int32_t index)
{
    static char *buffer;
    static size_t buffer_size;
    char small[128];
    size_t n = ls_names_format(template_id, index, small, sizeof small);
    if (n == SIZE_MAX)
        return NULL;
    if (n + 1 > buffer_size) {
        char *bigger = PyMem_RawRealloc(buffer, n + 1);
        if (bigger == NULL)
            return NULL;
        buffer = bigger;
        buffer_size = n + 1;
    }
    if (n < sizeof small)
        memcpy(buffer, small, n + 1);
    else
        ls_names_format(template_id, index, buffer, buffer_size);
    return buffer;
}

static PyObject *new_step(PyTypeObject *type, ls_stepper_object *stepper, PyObject *template_,
                          uint32_t template_id, int32_t index)
{
    ls_step_object *self = PyObject_GC_New(ls_step_object, type);
    if (self == NULL) {
        ls_names_release(template_id);
        return NULL;
    }
    self->stepper = (ls_stepper_object *)Py_XNewRef((PyObject *)stepper);
    self->template_ = Py_NewRef(template_);
    self->template_id = template_id;
    self->owner = ls_session_new_owner();
    self->index = index;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

PyObject *ls_step_fixed(PyTypeObject *type, PyObject *name, int32_t index)
{
    const char *text;
    Py_ssize_t len;
    if (ls_check_name(name, "step name", &text, &len) != 0)
        return NULL;
    uint32_t id = ls_names_intern(text, (size_t)len);
    if (id == LS_NO_NAME)
        return PyErr_NoMemory();
    return new_step(type, NULL, name, id, index);
}

static PyObject *step_enter(PyObject *op, PyObject *unused)
{
    (void)unused;
    ls_step_object *self = (ls_step_object *)op;
    int32_t index = self->stepper ? self->stepper->next : self->index;
    int pushed = ls_session_push(self->owner, self->template_id, index, NULL,
                                 format_name(self->template_id, index));
    if (pushed == LS_PUSH_STEP_OPEN) {
        /* Name the open step: under steps=module it is the module's, opened
         * by a call the user may not see as a step. */
        const char *open = thread_step.template_id == LS_NO_NAME
                               ? NULL : format_name(thread_step.template_id, thread_step.index);
        PyErr_Format(PyExc_RuntimeError,
                     "step %R started while %s%s%s is open on this thread: steps do not nest "
                     "(use loopscope.range() inside a step; with steps=module, each top-level "
                     "call of the module is a step already)", self->template_,
                     open ? "step '" : "another step", open ? open : "", open ? "'" : "");
        return NULL;
    }
    if (self->stepper != NULL) {
        if (self->stepper->next < INT32_MAX)
            self->stepper->next++;
        self->index = index;
    }
    if (pushed == LS_PUSH_OK) {
        ls_open_step step = {self->owner, ++step_serial, self->template_id, index};
        set_open_step(&thread_step, &step);
        set_open_step(&last_step, &step);
    }
    return Py_NewRef(op);
}

static PyObject *step_exit(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    (void)args;
    (void)nargs;
    ls_step_object *self = (ls_step_object *)op;
    (void)ls_session_pop(self->owner);
    clear_open_step(&thread_step, self->owner);
    clear_open_step(&last_step, self->owner);
    Py_RETURN_FALSE; /* never swallow the user's exception */
}

/* steps=module: the step's caller returned; it may end here (see
 * ls_session_mark_end).  True when it was open on this thread. */
static PyObject *step_mark_end(PyObject *op, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(ls_session_mark_end(((ls_step_object *)op)->owner) == 0);
}

static PyObject *step_unmark_end(PyObject *op, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(ls_session_unmark_end(((ls_step_object *)op)->owner) == 0);
}

static PyObject *step_get_name(PyObject *op, void *closure)
{
    (void)closure;
    ls_step_object *self = (ls_step_object *)op;
    if (self->index < 0)
        Py_RETURN_NONE;
    const char *text = format_name(self->template_id, self->index);
    if (text == NULL)
        return PyErr_NoMemory();
    return PyUnicode_FromString(text);
}

static PyObject *step_get_step(PyObject *op, void *closure)
{
    (void)closure;
    int32_t index = ((ls_step_object *)op)->index;
    if (index < 0)
        Py_RETURN_NONE;
    return PyLong_FromLong(index);
}

static PyObject *step_repr(PyObject *op)
{
    ls_step_object *self = (ls_step_object *)op;
    if (self->index < 0)
        return PyUnicode_FromFormat("<loopscope step %R (not entered)>", self->template_);
    const char *text = format_name(self->template_id, self->index);
    return PyUnicode_FromFormat("<loopscope step '%s' index=%d>", text ? text : "?",
                                (int)self->index);
}

static int step_traverse(PyObject *op, visitproc visit, void *arg)
{
    ls_step_object *self = (ls_step_object *)op;
    Py_VISIT(Py_TYPE(op));
    Py_VISIT(self->stepper);
    Py_VISIT(self->template_);
    return 0;
}

static int step_clear(PyObject *op)
{
    ls_step_object *self = (ls_step_object *)op;
    Py_CLEAR(self->stepper);
    Py_CLEAR(self->template_);
    return 0;
}

static void step_dealloc(PyObject *op)
{
    PyTypeObject *type = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    step_clear(op);
    ls_names_release(((ls_step_object *)op)->template_id);
    type->tp_free(op);
    Py_DECREF(type);
}

static PyMethodDef step_methods[] = {
    {"__enter__", step_enter, METH_NOARGS,
     "Open the step: the next index, its name, an NVTX range and host timestamps."},
    {"__exit__", (PyCFunction)(void (*)(void))step_exit, METH_FASTCALL,
     "Close the step; exceptions pass through."},
    {"_mark_end", step_mark_end, METH_NOARGS,
     "Mark the step's end now while it stays open (its exit keeps this end); "
     "True when it was open on this thread."},
    {"_unmark_end", step_unmark_end, METH_NOARGS,
     "Take the mark back: the exit ends the step."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef step_getset[] = {
    {"name", step_get_name, NULL, "The step's name (None until entered).", NULL},
    {"step", step_get_step, NULL, "The step's index (None until entered).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot step_slots[] = {
    {Py_tp_doc, "One loop step (what Profile.step() returns): an NVTX range named after "
                "the step, its host timestamps, and the prefix of instrument()'s ranges."},
    {Py_tp_methods, step_methods},
    {Py_tp_getset, step_getset},
    {Py_tp_repr, step_repr},
    {Py_tp_traverse, step_traverse},
    {Py_tp_clear, step_clear},
    {Py_tp_dealloc, step_dealloc},
    {0, NULL},
};

PyType_Spec ls_step_type_spec = {
    .name = "loopscope._core.StepScope",
    .basicsize = sizeof(ls_step_object),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = step_slots,
};

/* -- Stepper -------------------------------------------------------------- */

static PyObject *stepper_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"step_name", NULL};
    PyObject *template_;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:Stepper", keywords, &template_))
        return NULL;
    const char *text;
    Py_ssize_t len;
    if (ls_check_name(template_, "step_name", &text, &len) != 0)
        return NULL;
    uint32_t id = ls_names_intern(text, (size_t)len);
    if (id == LS_NO_NAME)
        return PyErr_NoMemory();
    ls_stepper_object *self = (ls_stepper_object *)type->tp_alloc(type, 0);
    if (self == NULL) {
        ls_names_release(id);
        return NULL;
    }
    self->template_ = Py_NewRef(template_);
    self->template_id = id;
    self->next = 0;
    return (PyObject *)self;
}

/* scope(name=None) -> StepScope: a step named by `name` ("{i}": the index)
 * or by the default template. */
static PyObject *stepper_scope(PyObject *op, PyObject *const *args, size_t nargsf,
                               PyObject *kwnames)
{
    ls_stepper_object *self = (ls_stepper_object *)op;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nkw == 1 && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "name") != 0) {
        PyErr_Format(PyExc_TypeError, "step() got an unexpected keyword argument %R",
                     PyTuple_GET_ITEM(kwnames, 0));
        return NULL;
    }
    if (nargs + nkw > 1) {
        PyErr_Format(PyExc_TypeError, "step() takes at most one argument (name), got %zd",
                     nargs + nkw);
        return NULL;
    }
    PyObject *name = nargs + nkw == 1 ? args[0] : Py_None;
    PyObject *template_ = self->template_;
    uint32_t id = self->template_id;
    if (name != Py_None) {
        const char *text;
        Py_ssize_t len;
        if (ls_check_name(name, "step name", &text, &len) != 0)
            return NULL;
        template_ = name;
        id = ls_names_intern(text, (size_t)len);
        if (id == LS_NO_NAME)
            return PyErr_NoMemory();
    } else {
        ls_names_retain(id);
    }
    ls_module_state *st = ls_module_state_of_type(Py_TYPE(op));
    if (st == NULL) {
        ls_names_release(id);
        return NULL;
    }
    return new_step(st->step_type, self, template_, id, -1);
}

static PyObject *stepper_get_count(PyObject *op, void *closure)
{
    (void)closure;
    return PyLong_FromLong(((ls_stepper_object *)op)->next);
}

static PyObject *stepper_get_template(PyObject *op, void *closure)
{
    (void)closure;
    return Py_NewRef(((ls_stepper_object *)op)->template_);
}

static int stepper_traverse(PyObject *op, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(op));
    Py_VISIT(((ls_stepper_object *)op)->template_);
    return 0;
}

static int stepper_clear(PyObject *op)
{
    Py_CLEAR(((ls_stepper_object *)op)->template_);
    return 0;
}

static void stepper_dealloc(PyObject *op)
{
    PyTypeObject *type = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    stepper_clear(op);
    ls_names_release(((ls_stepper_object *)op)->template_id);
    type->tp_free(op);
    Py_DECREF(type);
}

static PyMethodDef stepper_methods[] = {
    {"scope", (PyCFunction)(void (*)(void))stepper_scope, METH_FASTCALL | METH_KEYWORDS,
     "scope(name=None) -> StepScope; its enter takes the next index."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef stepper_getset[] = {
    {"count", stepper_get_count, NULL, "Steps entered so far (the next index).", NULL},
    {"step_name", stepper_get_template, NULL, "The default name template.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot stepper_slots[] = {
    {Py_tp_doc, "Stepper(step_name): a profile's step numbering; \"{i}\" in names is the "
                "index."},
    {Py_tp_new, stepper_new},
    {Py_tp_methods, stepper_methods},
    {Py_tp_getset, stepper_getset},
    {Py_tp_traverse, stepper_traverse},
    {Py_tp_clear, stepper_clear},
    {Py_tp_dealloc, stepper_dealloc},
    {0, NULL},
};

PyType_Spec ls_stepper_type_spec = {
    .name = "loopscope._core.Stepper",
    .basicsize = sizeof(ls_stepper_object),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = stepper_slots,
};
