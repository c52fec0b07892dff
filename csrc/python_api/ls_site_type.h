/* ls_site_type: the layer ranges of loopscope.instrument(): Site (one
 * instrumented call site) and CallRange (the functools.partial subclass
 * put in a module's __dict__ as `_call_impl`). */
#ifndef LS_SITE_TYPE_H
#define LS_SITE_TYPE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stddef.h>
#include <stdint.h>

extern PyType_Spec ls_site_type_spec;

/* Its basicsize is set at module exec: functools.partial's plus
 * ls_call_range_fields_size(). */
extern PyType_Spec ls_call_range_type_spec;
size_t ls_call_range_fields_size(void);

/* A CallRange calling `module` inside `site`'s range (site: a Site of
 * `site_type`).  Returns a new reference or NULL with an exception set. */
PyObject *ls_call_range_new(PyTypeObject *type, PyObject *module, PyObject *site,
                            PyTypeObject *site_type);

/* Layer ranges cut short or left open, every site's since the process
 * started.  Never fails. */
uint64_t ls_site_mismatch_total(void);

#endif
