/* ls_strict: loopscope.no_sync(), the strict mode.  While armed, the first
 * host wait on the armed thread is noted by the switchboard at API exit,
 * and the main thread's interpreter is asked (Py_AddPendingCall, which needs
 * neither the GIL nor an allocation) to call the Python handler as soon as
 * control is back in Python: the handler decides (allowed kinds) and raises
 * SyncError at the line that caused the wait.  Nothing is raised from inside
 * a CUPTI callback.  An async copy counts when its host memory is pageable,
 * which the switchboard asks the driver while strict mode is armed.  A wait noted on another thread, or one the pending call
 * could not report, is reported when the mode is disarmed. */
#ifndef LS_STRICT_H
#define LS_STRICT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "ls_records.h"

#include <stdint.h>

/* With the GIL: arms strict mode for the calling thread.  `handler` is
 * called as handler(token) with the GIL when a wait was noted; it raises to
 * stop the user's code or returns to let it go on.  0, or -1 with an
 * exception set when strict mode is already armed. */
int ls_strict_arm(PyObject *handler, int on_main_thread);

/* With the GIL: disarms.  Returns the token (see ls_calls) of a wait noted
 * but not yet handled, 0 if none. */
uint64_t ls_strict_disarm(void);

/* 1 while strict mode is armed for the thread `thread_id` (cheap: callbacks
 * ask before doing extra work, such as checking a copy's host memory). */
int ls_strict_watches(uint64_t thread_id);

/* From the switchboard at API exit of a call that waited: notes the first
 * one on the armed thread.  Never allocates, never blocks. */
void ls_strict_note(const ls_call *call, uint64_t token);

#endif
