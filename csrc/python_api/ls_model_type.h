/* ls_model_type: the Model type of loopscope._core: one analysed model
 * (ls_model) of a Capture, read by every view.  Figures of the whole run,
 * devices, streams, steps, ranges and range groups come as small dicts (ns
 * integers; Python shapes units); per-op and per-gap figures come as
 * columns (memoryviews of one typed array each), and the views that draw
 * or list them ask for only what they show (the worst gaps, busy time per
 * bin of a picture). */
#ifndef LS_MODEL_TYPE_H
#define LS_MODEL_TYPE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "ls_model.h"
#include "ls_session.h"

extern PyType_Spec ls_model_type_spec;

/* Analyses `capture`, whose records `owner` owns (the Capture's records
 * capsule, not the Capture: the Capture caches its Models, so holding it
 * would make a reference cycle); the Model keeps `owner` alive.  Returns a new reference, or NULL with an exception
 * set: MemoryError, or ValueError when options name a bad step range. */
PyObject *ls_model_new(PyTypeObject *type, PyObject *owner, const ls_capture *capture,
                       const ls_model_options *options);

#endif
