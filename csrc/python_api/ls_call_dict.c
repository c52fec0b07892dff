/* ls_call_dict: see ls_call_dict.h. */
#include "ls_call_dict.h"

#include "ls_cbids.h"
#include "ls_pyvalues.h"

#include <string.h>

struct ls_frame_slot {
    ls_frame key;
    PyObject *tuple; /* NULL: an empty slot */
};

/* The file (which 0) or function (1) of code `id` as a str, None when the
 * table has no such code: a new reference, or NULL with an exception set.
 * With a memo, made once per code. */
static PyObject *code_text(const ls_code_table *codes, uint32_t id, int which,
                           ls_frame_memo *memo)
{
    const ls_code_info *info = id < codes->count ? &codes->items[id] : NULL;
    if (info == NULL)
        Py_RETURN_NONE;
    PyObject **slot = memo != NULL && memo->texts != NULL ? &memo->texts[2 * (size_t)id + which]
                                                          : NULL;
    if (slot != NULL && *slot != NULL)
        return Py_NewRef(*slot);
    PyObject *text = ls_py_text_or_none(which == 0 ? info->filename : info->function);
    if (slot != NULL && text != NULL)
        *slot = Py_NewRef(text);
    return text;
}

static PyObject *frame_to_python(const ls_frame *f, const ls_code_table *codes,
                                 ls_frame_memo *memo)
{
    const ls_code_info *info = f->code < codes->count ? &codes->items[f->code] : NULL;
    PyObject *file = code_text(codes, f->code, 0, memo);
    PyObject *function = file != NULL ? code_text(codes, f->code, 1, memo) : NULL;
    if (function == NULL) {
        Py_XDECREF(file);
        return NULL;
    }
    return Py_BuildValue("(NNiiiiiN)", file, function, info ? info->first_line : -1, f->line,
                         f->end_line, f->col, f->end_col, PyBool_FromLong(f->truth_test));
}

static const char *const call_keys[LS_CALL_KEYS] = {
    "api", "driver", "wait_class", "enter_ns", "exit_ns", "thread_id", "correlation_id",
    "launches_before", "frames"};

void ls_frame_memo_init(ls_frame_memo *memo, const ls_code_table *codes)
{
    memset(memo, 0, sizeof *memo);
    memo->codes = codes;
    /* No room for the texts: each frame makes its own (same values). */
    memo->texts = codes->count ? PyMem_Calloc(2 * codes->count, sizeof *memo->texts) : NULL;
    for (int k = 0; k < LS_CALL_KEYS; k++) {
        memo->keys[k] = PyUnicode_InternFromString(call_keys[k]);
        if (memo->keys[k] == NULL) { /* each dict then makes its keys */
            PyErr_Clear();
            for (int j = 0; j < k; j++)
                Py_CLEAR(memo->keys[j]);
            break;
        }
    }
}

void ls_frame_memo_clear(ls_frame_memo *memo)
{
    for (int k = 0; k < LS_CALL_KEYS; k++)
        Py_XDECREF(memo->keys[k]);
    for (int k = 0; k < memo->name_count; k++)
        Py_DECREF(memo->names[k].str);
    for (size_t i = 0; memo->texts != NULL && i < 2 * memo->codes->count; i++)
        Py_XDECREF(memo->texts[i]);
    for (size_t i = 0; i < memo->capacity; i++)
        Py_XDECREF(memo->slots[i].tuple);
    PyMem_Free(memo->texts);
    PyMem_Free(memo->slots);
    memset(memo, 0, sizeof *memo);
}

static size_t frame_hash(const ls_frame *f)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the frame's bytes */
    const unsigned char *p = (const unsigned char *)f;
    for (size_t i = 0; i < sizeof *f; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return (size_t)h;
}

/* The slot of frame f (empty when not there yet); NULL when the table has
 * no room and cannot grow (the frame is then made without the memo). */
static struct ls_frame_slot *find_slot(ls_frame_memo *memo, const ls_frame *f)
{
    if (2 * (memo->used + 1) > memo->capacity) {
        size_t capacity = memo->capacity ? 2 * memo->capacity : 64;
        struct ls_frame_slot *grown = PyMem_Calloc(capacity, sizeof *grown);
        if (grown == NULL)
            return NULL;
        for (size_t i = 0; i < memo->capacity; i++) {
            struct ls_frame_slot *old = &memo->slots[i];
            if (old->tuple == NULL)
                continue;
            size_t k = frame_hash(&old->key) & (capacity - 1);
            while (grown[k].tuple != NULL)
                k = (k + 1) & (capacity - 1);
            grown[k] = *old;
        }
        PyMem_Free(memo->slots);
        memo->slots = grown;
        memo->capacity = capacity;
    }
    size_t k = frame_hash(f) & (memo->capacity - 1);
    while (memo->slots[k].tuple != NULL && memcmp(&memo->slots[k].key, f, sizeof *f) != 0)
        k = (k + 1) & (memo->capacity - 1);
    return &memo->slots[k];
}

static PyObject *frame_of(const ls_frame *f, const ls_code_table *codes, ls_frame_memo *memo)
{
    struct ls_frame_slot *slot = memo != NULL ? find_slot(memo, f) : NULL;
    if (slot != NULL && slot->tuple != NULL)
        return Py_NewRef(slot->tuple);
    PyObject *tuple = frame_to_python(f, codes, memo);
    if (slot != NULL && tuple != NULL) {
        slot->key = *f;
        slot->tuple = Py_NewRef(tuple);
        memo->used++;
    }
    return tuple;
}

/* A name of the static tables (an API, a wait class) as a str, None for
 * NULL; with a memo, made once per name.  A new reference, or NULL with an
 * exception set. */
static PyObject *name_str(const char *name, ls_frame_memo *memo)
{
    if (name == NULL)
        Py_RETURN_NONE;
    for (int k = 0; memo != NULL && k < memo->name_count; k++)
        if (memo->names[k].text == name)
            return Py_NewRef(memo->names[k].str);
    PyObject *str = PyUnicode_FromString(name);
    if (str != NULL && memo != NULL && memo->name_count < LS_MEMO_NAMES) {
        memo->names[memo->name_count].text = name;
        memo->names[memo->name_count++].str = Py_NewRef(str);
    }
    return str;
}

static PyObject *call_dict(const ls_call *c, const ls_code_table *codes, ls_frame_memo *memo)
{
    PyObject *frames = PyList_New(c->frame_count);
    for (int i = 0; frames != NULL && i < c->frame_count; i++) {
        PyObject *f = frame_of(&c->frames[i], codes, memo);
        if (f == NULL)
            Py_CLEAR(frames);
        else
            PyList_SET_ITEM(frames, i, f);
    }
    CUpti_CallbackDomain domain = c->domain ? CUPTI_CB_DOMAIN_DRIVER_API
                                            : CUPTI_CB_DOMAIN_RUNTIME_API;
    const char *api = c->alias ? ls_cbid_alias_name(c->alias) : ls_cbid_name(domain, c->cbid);
    PyObject *values[LS_CALL_KEYS] = {
        name_str(api, memo), PyBool_FromLong(c->domain),
        name_str(ls_wait_class_name(LS_ROLE_WAIT_CLASS(c->role)), memo),
        ls_py_u64(c->enter_ns), ls_py_u64(c->exit_ns), ls_py_u64(c->thread_id),
        ls_py_u64(c->correlation_id), ls_py_u64(c->launches_before), frames};
    if (memo == NULL || memo->keys[0] == NULL)
        return ls_py_dict_of(LS_CALL_KEYS, call_keys[0], values[0], call_keys[1], values[1],
                             call_keys[2], values[2], call_keys[3], values[3], call_keys[4],
                             values[4], call_keys[5], values[5], call_keys[6], values[6],
                             call_keys[7], values[7], call_keys[8], values[8]);
    /* the keys made once for the list (setting an interned key skips its lookup) */
    PyObject *dict = PyDict_New();
    for (int k = 0; k < LS_CALL_KEYS; k++) {
        if (dict != NULL && (values[k] == NULL || PyDict_SetItem(dict, memo->keys[k], values[k]) != 0))
            Py_CLEAR(dict);
        Py_XDECREF(values[k]);
    }
    return dict;
}

PyObject *ls_call_dict(const ls_call *c, const ls_code_table *codes)
{
    return call_dict(c, codes, NULL);
}

PyObject *ls_call_dict_memo(const ls_call *c, ls_frame_memo *memo)
{
    return call_dict(c, memo->codes, memo);
}
