/* ls_call_dict: see ls_call_dict.h. */
#include "ls_call_dict.h"

#include "ls_cbids.h"
#include "ls_pyvalues.h"

static PyObject *frame_to_python(const ls_frame *f, const ls_code_table *codes)
{
    const ls_code_info *info = f->code < codes->count ? &codes->items[f->code] : NULL;
    return Py_BuildValue("(NNiiiiiN)", ls_py_text_or_none(info ? info->filename : NULL),
                         ls_py_text_or_none(info ? info->function : NULL),
                         info ? info->first_line : -1, f->line, f->end_line, f->col, f->end_col,
                         PyBool_FromLong(f->truth_test));
}

PyObject *ls_call_dict(const ls_call *c, const ls_code_table *codes)
{
    PyObject *frames = PyList_New(c->frame_count);
    for (int i = 0; frames != NULL && i < c->frame_count; i++) {
        PyObject *f = frame_to_python(&c->frames[i], codes);
        if (f == NULL)
            Py_CLEAR(frames);
        else
            PyList_SET_ITEM(frames, i, f);
    }
    CUpti_CallbackDomain domain = c->domain ? CUPTI_CB_DOMAIN_DRIVER_API
                                            : CUPTI_CB_DOMAIN_RUNTIME_API;
    const char *api = c->alias ? ls_cbid_alias_name(c->alias) : ls_cbid_name(domain, c->cbid);
    return ls_py_dict_of(
        9, "api", api ? PyUnicode_FromString(api) : Py_NewRef(Py_None), "driver",
        PyBool_FromLong(c->domain), "wait_class",
        PyUnicode_FromString(ls_wait_class_name(LS_ROLE_WAIT_CLASS(c->role))), "enter_ns",
        ls_py_u64(c->enter_ns), "exit_ns", ls_py_u64(c->exit_ns), "thread_id",
        ls_py_u64(c->thread_id), "correlation_id", ls_py_u64(c->correlation_id),
        "launches_before", ls_py_u64(c->launches_before), "frames", frames);
}
