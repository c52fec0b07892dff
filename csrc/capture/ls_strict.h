/* ls_strict: loopscope.no_sync(), the strict mode.  Each thread arms it for
 * itself (a fixed table of LS_STRICT_THREADS slots keyed by thread id: the
 * callbacks look a thread up without allocating).  While a thread is armed,
 * the first host wait on it is noted by the switchboard at API exit, and
 * for the main thread the interpreter is asked (Py_AddPendingCall, which
 * needs neither the GIL nor an allocation) to call the thread's Python
 * handler as soon as control is back in Python: the handler decides
 * (allowed kinds) and raises SyncError at the line that caused the wait.
 * Nothing is raised from inside a CUPTI callback.  An async copy counts when
 * its host memory is pageable, which the switchboard asks the driver while
 * strict mode is armed.  A wait noted on another thread, or one the pending
 * call could not report, is handed back when the thread disarms.  A noted
 * wait keeps its call's token and API, so a wait whose token outlived its
 * session (ls_calls) is still reported, by its API. */
#ifndef LS_STRICT_H
#define LS_STRICT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "ls_records.h"

#include <stdint.h>

#define LS_STRICT_THREADS 64

/* A wait noted on an armed thread and not yet handled. */
typedef struct {
    uint64_t token;     /* its ls_calls token (0: none noted) */
    uint64_t thread_id; /* the armed thread */
    uint32_t cbid;
    uint8_t domain, role; /* as in ls_call */
} ls_strict_noted;

/* Turns a noted wait into the handler's argument: a new reference, or NULL
 * with an exception set. */
typedef PyObject *(*ls_strict_describe)(const ls_strict_noted *noted);

/* With the GIL: arms strict mode for the calling thread.  `handler` is
 * called as handler(describe(noted)) with the GIL when a wait was noted on
 * the main thread; it raises to stop the user's code or returns to let it go
 * on.  0, or -1 with an exception set when this thread is armed already or
 * LS_STRICT_THREADS threads are. */
int ls_strict_arm(PyObject *handler, int on_main_thread, ls_strict_describe describe);

/* With the GIL: disarms the thread `thread_id` (the calling thread, or one
 * that has ended: a live thread may be inside a callback).  Returns 1 and
 * fills *noted with the wait noted but not yet handled, 0 when there is none
 * or the thread was not armed. */
int ls_strict_disarm(uint64_t thread_id, ls_strict_noted *noted);

/* With the GIL: takes the noted waits of every armed thread, which stay
 * armed (their tokens are about to outlive their session), calling
 * each(noted, arg) for each.  0, or -1 when `each` returned -1 (the rest
 * stay noted). */
int ls_strict_take_all(int (*each)(const ls_strict_noted *noted, void *arg), void *arg);

/* 1 while strict mode is armed for the thread `thread_id` (cheap: callbacks
 * ask before doing extra work, such as checking a copy's host memory). */
int ls_strict_watches(uint64_t thread_id);

/* From the switchboard at API exit of a call that waited: notes the first
 * one on its thread, if armed.  Never allocates, never blocks. */
void ls_strict_note(const ls_call *call, uint64_t token);

#endif
