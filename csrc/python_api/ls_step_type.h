/* ls_step_type: loop steps of loopscope._core.  Stepper (a profile's step
 * numbering and default name template) and StepScope (one prof.step()). */
#ifndef LS_STEP_TYPE_H
#define LS_STEP_TYPE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

extern PyType_Spec ls_step_type_spec;
extern PyType_Spec ls_stepper_type_spec;

/* A step always named `name` with index `index` (recordings replay so).
 * Returns a new reference or NULL with an exception set. */
PyObject *ls_step_fixed(PyTypeObject *type, PyObject *name, int32_t index);

/* The name template id of the step open on this thread (with `any_thread`
 * and none here, of the step last opened on any thread), LS_NO_NAME when
 * none; its index and serial (new at each step enter) go to *index and
 * *serial.  The id stays held while that step is open.  Never fails. */
uint32_t ls_step_prefix(int any_thread, uint64_t *serial, int32_t *index);

#endif
