/* ls_site_type: the layer ranges of loopscope.instrument().
 *
 * A Site is one instrumented call site (a module's call, or its backward):
 * its range name, its owner token, and the name prefixed by the step open
 * on the calling thread ("Step_3/layers.0/mlp"), built once per step.  A
 * CallRange is what instrument() puts in a module's __dict__ as
 * `_call_impl` (which Module.__call__ looks up on the instance): a
 * functools.partial subclass whose call opens the site's range, runs
 * torch's own Module._call_impl and closes the range, all in C.  With no
 * hooks on the module, torch keeps its no-hook fast path; Dynamo sees a
 * functools.partial and traces the wrapped call (no range inside compiled
 * code, no graph break); `forward` is untouched, so torch.compile picks its
 * entry frame as for any module. */
#include "ls_site_type.h"

#include "ls_names.h"
#include "ls_nvtx.h"
#include "ls_range_type.h"
#include "ls_session.h"
#include "ls_step_type.h"

#include <string.h>

typedef struct {
    PyObject_HEAD
    PyObject *name;        /* str: the range name without a step prefix */
    uint64_t owner;
    uint32_t name_id;      /* held */
    void *nvtx_handle;     /* registered name_id, NULL: pushed as text */
    int prefix;            /* prefix the name with the open step */
    int any_thread;        /* no step on this thread: take the last one opened anywhere */
    uint64_t cached_serial; /* the step serial cached_id was built for, 0: none */
    uint32_t cached_id;    /* held: "<step>/<name>" */
    uint64_t mismatches;   /* ranges of this site cut short by a BaseException, or left open */
} ls_site_object;

static uint64_t instrument_mismatches; /* every site's, process wide */

uint64_t ls_site_mismatch_total(void) { return instrument_mismatches; }

/* The name for a call now: the prefixed one while a step is open (built
 * once per step), else the plain one.  LS_NO_NAME only when memory ran out. */
static uint32_t site_name(ls_site_object *s)
{
    if (!s->prefix)
        return s->name_id;
    uint64_t serial;
    int32_t index;
    uint32_t step = ls_step_prefix(s->any_thread, &serial, &index);
    if (step == LS_NO_NAME)
        return s->name_id;
    if (serial == s->cached_serial)
        return s->cached_id;
    static char *buffer; /* grows to the longest name: the GIL guards it */
    static size_t buffer_size;
    size_t own_len = ls_names_length(s->name_id);
    char none[1];
    for (;;) {
        size_t step_len = ls_names_format(step, index, buffer ? buffer : none,
                                          buffer ? buffer_size : sizeof none);
        size_t need = step_len + 1 + own_len;
        if (need + 1 > buffer_size) {
            char *bigger = PyMem_RawRealloc(buffer, need + 1);
            if (bigger == NULL)
                return LS_NO_NAME;
            buffer = bigger;
            buffer_size = need + 1;
            continue; /* format again, into the bigger buffer */
        }
        buffer[step_len] = '/';
        memcpy(buffer + step_len + 1, ls_names_text(s->name_id), own_len);
        uint32_t id = ls_names_intern(buffer, need);
        if (id == LS_NO_NAME)
            return LS_NO_NAME;
        ls_names_release(s->cached_id);
        s->cached_id = id;
        s->cached_serial = serial;
        return id;
    }
}

/* Opens the site's range; 1 when a range was pushed. */
static int site_push(ls_site_object *s)
{
    uint32_t id = site_name(s);
    if (id == LS_NO_NAME)
        return 0;
    return ls_session_push(s->owner, id, -1, id == s->name_id ? s->nvtx_handle : NULL, NULL) ==
           LS_PUSH_OK;
}

static void count_mismatch(ls_site_object *s, uint64_t n)
{
    s->mismatches += n;
    instrument_mismatches += n;
}

static PyObject *site_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"name", "prefix", "any_thread", NULL};
    PyObject *name;
    int prefix = 1, any_thread = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|pp:Site", keywords, &name, &prefix,
                                     &any_thread))
        return NULL;
    const char *text;
    Py_ssize_t len;
    if (ls_check_name(name, "range name", &text, &len) != 0)
        return NULL;
    uint32_t id = ls_names_intern(text, (size_t)len);
    if (id == LS_NO_NAME)
        return PyErr_NoMemory();
    ls_site_object *self = (ls_site_object *)type->tp_alloc(type, 0);
    if (self == NULL) {
        ls_names_release(id);
        return NULL;
    }
    self->name = Py_NewRef(name);
    self->owner = ls_session_new_owner();
    self->name_id = id;
    self->nvtx_handle = ls_nvtx_register(ls_names_text(id));
    self->prefix = prefix;
    self->any_thread = any_thread;
    self->cached_id = LS_NO_NAME;
    return (PyObject *)self;
}

static PyObject *site_enter(PyObject *op, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(site_push((ls_site_object *)op));
}

/* exit() -> 'closed', 'out_of_order' or 'not_open' (see ls_session_pop). */
static PyObject *site_exit(PyObject *op, PyObject *unused)
{
    (void)unused;
    static const char *const results[] = {"closed", "out_of_order", "not_open"};
    return PyUnicode_FromString(results[ls_session_pop(((ls_site_object *)op)->owner)]);
}

static PyObject *site_count_mismatch(PyObject *op, PyObject *unused)
{
    (void)unused;
    count_mismatch((ls_site_object *)op, 1);
    Py_RETURN_NONE;
}

static PyObject *site_get_name(PyObject *op, void *closure)
{
    (void)closure;
    return Py_NewRef(((ls_site_object *)op)->name);
}

static PyObject *site_get_mismatches(PyObject *op, void *closure)
{
    (void)closure;
    return PyLong_FromUnsignedLongLong(((ls_site_object *)op)->mismatches);
}

static PyObject *site_repr(PyObject *op)
{
    ls_site_object *s = (ls_site_object *)op;
    return PyUnicode_FromFormat("<loopscope site %R%s>", s->name,
                                s->prefix ? " (step prefixed)" : "");
}

static int site_traverse(PyObject *op, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(op));
    Py_VISIT(((ls_site_object *)op)->name);
    return 0;
}

static int site_clear(PyObject *op)
{
    Py_CLEAR(((ls_site_object *)op)->name);
    return 0;
}

static void site_dealloc(PyObject *op)
{
    ls_site_object *s = (ls_site_object *)op;
    PyTypeObject *type = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    site_clear(op);
    ls_names_release(s->name_id);
    ls_names_release(s->cached_id);
    type->tp_free(op);
    Py_DECREF(type);
}

static PyMethodDef site_methods[] = {
    {"enter", site_enter, METH_NOARGS, "enter() -> bool: opens the site's range (False: none)."},
    {"exit", site_exit, METH_NOARGS,
     "exit() -> 'closed', 'out_of_order' or 'not_open': closes the site's range."},
    {"count_mismatch", site_count_mismatch, METH_NOARGS,
     "Counts one range of this site left open (its hook never ran)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef site_getset[] = {
    {"name", site_get_name, NULL, "The range name, without the step prefix.", NULL},
    {"mismatches", site_get_mismatches, NULL,
     "Ranges of this site cut short by a BaseException or left open by a hook.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot site_slots[] = {
    {Py_tp_doc, "Site(name, prefix=True, any_thread=False): one instrumented call site."},
    {Py_tp_new, site_new},
    {Py_tp_methods, site_methods},
    {Py_tp_getset, site_getset},
    {Py_tp_repr, site_repr},
    {Py_tp_traverse, site_traverse},
    {Py_tp_clear, site_clear},
    {Py_tp_dealloc, site_dealloc},
    {0, NULL},
};

PyType_Spec ls_site_type_spec = {
    .name = "loopscope._core.Site",
    .basicsize = sizeof(ls_site_object),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = site_slots,
};

/* -- CallRange: a functools.partial subclass ---------------------------------
 * To Dynamo (and to anyone reading .func and .args) it is
 * partial(type(module)._call_impl, module): torch's own module call.  It
 * keeps only a weak reference to the module, though: the module's __dict__
 * holds the CallRange, so a strong one would make a reference cycle, and a
 * dropped model would wait for the cyclic GC (its GPU memory with it)
 * instead of going at once.  Its fields follow partial's own (whose layout
 * is private), at Py_TYPE(op)->tp_basicsize - sizeof(ls_call_range_fields). */

typedef struct {
    ls_site_object *site; /* NULL when built by partial's own machinery */
    PyObject *call;       /* type(module)._call_impl, a plain function */
    PyObject *module;     /* a weak reference to the module */
} ls_call_range_fields;

static ls_call_range_fields *fields(PyObject *op)
{
    return (ls_call_range_fields *)((char *)op + Py_TYPE(op)->tp_basicsize -
                                    (Py_ssize_t)sizeof(ls_call_range_fields));
}

/* The module, a new reference; NULL with ReferenceError when it is gone. */
static PyObject *module_of(ls_call_range_fields *f)
{
    PyObject *module;
#if PY_VERSION_HEX >= 0x030D0000
    if (PyWeakref_GetRef(f->module, &module) < 0)
        return NULL;
#else
    module = Py_XNewRef(PyWeakref_GetObject(f->module));
    if (module == Py_None)
        Py_CLEAR(module);
#endif
    if (module == NULL && !PyErr_Occurred())
        PyErr_SetString(PyExc_ReferenceError,
                        "the module of this loopscope CallRange no longer exists");
    return module;
}

/* call(module, *args, **kwargs), with the module in front. */
static PyObject *call_with(PyObject *call, PyObject *module, PyObject *args, PyObject *kwargs)
{
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if ((kwargs == NULL || PyDict_GET_SIZE(kwargs) == 0) && n < 8) {
        PyObject *stack[8];
        stack[0] = module;
        for (Py_ssize_t i = 0; i < n; i++)
            stack[i + 1] = PyTuple_GET_ITEM(args, i);
        return PyObject_Vectorcall(call, stack, (size_t)n + 1, NULL);
    }
    PyObject *all = PyTuple_New(n + 1);
    if (all == NULL)
        return NULL;
    PyTuple_SET_ITEM(all, 0, Py_NewRef(module));
    for (Py_ssize_t i = 0; i < n; i++)
        PyTuple_SET_ITEM(all, i + 1, Py_NewRef(PyTuple_GET_ITEM(args, i)));
    PyObject *result = PyObject_Call(call, all, kwargs);
    Py_DECREF(all);
    return result;
}

static PyObject *call_range_call(PyObject *op, PyObject *args, PyObject *kwargs)
{
    ls_call_range_fields *f = fields(op);
    if (f->site == NULL)
        return Py_TYPE(op)->tp_base->tp_call(op, args, kwargs);
    PyObject *module = module_of(f);
    if (module == NULL)
        return NULL;
    ls_site_object *site = f->site;
    int pushed = site_push(site);
    PyObject *result = call_with(f->call, module, args, kwargs);
    if (pushed) {
        /* A BaseException that is not an Exception (KeyboardInterrupt,
         * SystemExit) cut the call short: its range ends here, counted. */
        if (result == NULL && !PyErr_ExceptionMatches(PyExc_Exception))
            count_mismatch(site, 1);
        (void)ls_session_pop(site->owner);
    }
    Py_DECREF(module);
    return result;
}

/* CallRange(module, site): the module's call wrapped in site's range. */
PyObject *ls_call_range_new(PyTypeObject *type, PyObject *module, PyObject *site,
                            PyTypeObject *site_type)
{
    if (!PyObject_TypeCheck(site, site_type)) {
        PyErr_Format(PyExc_TypeError, "CallRange: site must be a loopscope._core.Site, "
                     "not %.100s", Py_TYPE(site)->tp_name);
        return NULL;
    }
    PyObject *call = PyObject_GetAttrString((PyObject *)Py_TYPE(module), "_call_impl");
    if (call == NULL)
        return NULL;
    PyObject *ref = PyCallable_Check(call) ? PyWeakref_NewRef(module, NULL) : NULL;
    if (ref == NULL) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "CallRange: %.100s._call_impl is not callable",
                         Py_TYPE(module)->tp_name);
        Py_DECREF(call);
        return NULL;
    }
    PyObject *self = PyObject_CallOneArg((PyObject *)type, call); /* partial's __new__ */
    if (self == NULL) {
        Py_DECREF(call);
        Py_DECREF(ref);
        return NULL;
    }
    ls_call_range_fields *f = fields(self);
    f->site = (ls_site_object *)Py_NewRef(site);
    f->call = call;
    f->module = ref;
    return self;
}

/* args: (module,), as partial(type(module)._call_impl, module) has it. */
static PyObject *call_range_get_args(PyObject *op, void *closure)
{
    (void)closure;
    ls_call_range_fields *f = fields(op);
    if (f->site == NULL)
        return PyTuple_New(0);
    PyObject *module = module_of(f);
    if (module == NULL)
        return NULL;
    PyObject *args = PyTuple_Pack(1, module);
    Py_DECREF(module);
    return args;
}

/* The module's plain call (a bound method), or None once the module is gone. */
static PyObject *plain_call(ls_call_range_fields *f)
{
    if (f->site == NULL)
        Py_RETURN_NONE;
    PyObject *module = module_of(f);
    if (module == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    PyObject *bound = PyMethod_New(f->call, module);
    Py_DECREF(module);
    return bound;
}

static PyObject *call_range_reduce(PyObject *op, PyObject *unused)
{
    (void)unused;
    /* A copy or a pickle of an instrumented module gets torch's plain call. */
    PyObject *plain = PyObject_GetAttrString((PyObject *)Py_TYPE(op), "_plain");
    if (plain == NULL)
        return NULL;
    PyObject *bound = plain_call(fields(op));
    if (bound == NULL) {
        Py_DECREF(plain);
        return NULL;
    }
    return Py_BuildValue("N(N)", plain, bound);
}

static PyObject *call_range_plain(PyObject *cls, PyObject *call)
{
    (void)cls;
    return Py_NewRef(call);
}

static PyObject *call_range_get_site(PyObject *op, void *closure)
{
    (void)closure;
    ls_call_range_fields *f = fields(op);
    return Py_NewRef(f->site ? (PyObject *)f->site : Py_None);
}

static PyObject *call_range_get_wrapped(PyObject *op, void *closure)
{
    (void)closure;
    return plain_call(fields(op));
}

static PyObject *call_range_repr(PyObject *op)
{
    ls_call_range_fields *f = fields(op);
    if (f->site == NULL)
        return PyUnicode_FromString("<loopscope layer range (empty)>");
    return PyUnicode_FromFormat("<loopscope layer range %R around %R>", f->site->name, f->call);
}

static int call_range_traverse(PyObject *op, visitproc visit, void *arg)
{
    ls_call_range_fields *f = fields(op);
    Py_VISIT(f->site);
    Py_VISIT(f->call);
    Py_VISIT(f->module);
    return Py_TYPE(op)->tp_base->tp_traverse(op, visit, arg); /* visits the type too */
}

static int call_range_clear(PyObject *op)
{
    ls_call_range_fields *f = fields(op);
    Py_CLEAR(f->site);
    Py_CLEAR(f->call);
    Py_CLEAR(f->module);
    inquiry base_clear = Py_TYPE(op)->tp_base->tp_clear;
    return base_clear ? base_clear(op) : 0;
}

static void call_range_dealloc(PyObject *op)
{
    PyObject_GC_UnTrack(op);
    ls_call_range_fields *f = fields(op);
    Py_CLEAR(f->site);
    Py_CLEAR(f->call);
    Py_CLEAR(f->module);
    Py_TYPE(op)->tp_base->tp_dealloc(op); /* partial's: frees, drops the type reference */
}

static PyMethodDef call_range_methods[] = {
    {"__reduce__", call_range_reduce, METH_NOARGS, "Copies and pickles hold the plain call."},
    {"_plain", call_range_plain, METH_O | METH_CLASS, "_plain(call) -> call (for copies)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef call_range_getset[] = {
    {"args", call_range_get_args, NULL, "(module,): partial's arguments, as Dynamo reads them.",
     NULL},
    {"site", call_range_get_site, NULL, "The Site whose range wraps each call.", NULL},
    {"wrapped", call_range_get_wrapped, NULL,
     "The module's plain call (a bound method), None once the module is gone.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot call_range_slots[] = {
    {Py_tp_doc, "A module's call inside a loopscope range (set by instrument())."},
    {Py_tp_call, call_range_call},
    {Py_tp_methods, call_range_methods},
    {Py_tp_getset, call_range_getset},
    {Py_tp_repr, call_range_repr},
    {Py_tp_traverse, call_range_traverse},
    {Py_tp_clear, call_range_clear},
    {Py_tp_dealloc, call_range_dealloc},
    {0, NULL},
};

PyType_Spec ls_call_range_type_spec = {
    .name = "loopscope._core.CallRange",
    .basicsize = 0, /* set at module exec: partial's size plus ls_call_range_fields */
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = call_range_slots,
};

size_t ls_call_range_fields_size(void) { return sizeof(ls_call_range_fields); }
