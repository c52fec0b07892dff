/* ls_strict: see ls_strict.h. */
#include "ls_strict.h"

#include "ls_cuda.h"

#include <pthread.h>
#include <stdatomic.h>

/* One armed thread.  thread_id and the note flags are read by callbacks on
 * any thread; the rest is written with the GIL while the slot is free. */
typedef struct {
    atomic_uint_fast64_t thread_id; /* 0: the slot is free */
    int on_main_thread;
    PyObject *handler;              /* strong reference while armed */
    ls_strict_describe describe;
    atomic_int claimed;             /* a wait is being noted, or was */
    atomic_int ready;               /* ... and `noted` is written */
    ls_strict_noted noted;
} ls_strict_slot;

static ls_strict_slot slots[LS_STRICT_THREADS];
static atomic_int armed_threads;
static atomic_int pending_scheduled; /* a pending call for the main thread is queued */

static ls_strict_slot *find(uint64_t thread_id)
{
    for (int i = 0; i < LS_STRICT_THREADS; i++)
        if (atomic_load_explicit(&slots[i].thread_id, memory_order_acquire) == thread_id)
            return &slots[i];
    return NULL;
}

/* With the GIL (which orders the takers): moves a fully written note out. */
static int take(ls_strict_slot *s, ls_strict_noted *out)
{
    if (!atomic_load(&s->ready))
        return 0; /* none, or one still being written: taken next time */
    *out = s->noted;
    atomic_store(&s->ready, 0);
    atomic_store(&s->claimed, 0);
    return 1;
}

/* Runs in the main thread with the GIL, at the interpreter's next check. */
static int run_handler(void *unused)
{
    (void)unused;
    atomic_store(&pending_scheduled, 0);
    ls_strict_slot *s = find((uint64_t)pthread_self());
    ls_strict_noted noted;
    if (s == NULL || s->handler == NULL || !take(s, &noted))
        return 0;
    PyObject *handler = Py_NewRef(s->handler); /* the handler may disarm */
    PyObject *arg = s->describe(&noted);
    PyObject *result = arg != NULL ? PyObject_CallOneArg(handler, arg) : NULL;
    Py_XDECREF(arg);
    Py_DECREF(handler);
    if (result == NULL)
        return -1; /* the exception surfaces in the running Python code */
    Py_DECREF(result);
    return 0;
}

int ls_strict_arm(PyObject *handler, int on_main_thread, ls_strict_describe describe)
{
    uint64_t self = (uint64_t)pthread_self();
    if (find(self) != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "loopscope.no_sync() blocks do not nest: this "
                        "thread is already inside one");
        return -1;
    }
    ls_strict_slot *s = find(0);
    if (s == NULL) {
        PyErr_Format(PyExc_RuntimeError, "loopscope.no_sync(): at most %d threads can be "
                     "inside no_sync() blocks at once", LS_STRICT_THREADS);
        return -1;
    }
    ls_cuda_prepare_pointer_query(); /* for async copies; without a driver they pass */
    Py_XSETREF(s->handler, Py_NewRef(handler));
    s->describe = describe;
    s->on_main_thread = on_main_thread;
    atomic_store(&s->claimed, 0);
    atomic_store(&s->ready, 0);
    atomic_store_explicit(&s->thread_id, self, memory_order_release);
    atomic_fetch_add(&armed_threads, 1);
    return 0;
}

int ls_strict_disarm(uint64_t thread_id, ls_strict_noted *noted)
{
    ls_strict_slot *s = thread_id != 0 ? find(thread_id) : NULL;
    if (s == NULL)
        return 0;
    int got = take(s, noted);
    atomic_store(&s->thread_id, 0);
    atomic_fetch_sub(&armed_threads, 1);
    atomic_store(&s->claimed, 0);
    Py_CLEAR(s->handler);
    return got;
}

int ls_strict_take_all(int (*each)(const ls_strict_noted *noted, void *arg), void *arg)
{
    for (int i = 0; i < LS_STRICT_THREADS; i++) {
        ls_strict_noted noted;
        if (atomic_load(&slots[i].thread_id) != 0 && take(&slots[i], &noted) &&
            each(&noted, arg) != 0)
            return -1;
    }
    return 0;
}

int ls_strict_watches(uint64_t thread_id)
{
    return atomic_load_explicit(&armed_threads, memory_order_relaxed) > 0 &&
           find(thread_id) != NULL;
}

void ls_strict_note(const ls_call *call, uint64_t token)
{
    if (atomic_load_explicit(&armed_threads, memory_order_relaxed) == 0)
        return;
    ls_strict_slot *s = find(call->thread_id);
    int idle = 0;
    if (s == NULL || !atomic_compare_exchange_strong(&s->claimed, &idle, 1))
        return; /* not armed, or an earlier wait is still waiting for its handler */
    s->noted = (ls_strict_noted){token, call->thread_id, call->cbid, call->domain, call->role};
    atomic_store(&s->ready, 1);
    idle = 0;
    if (s->on_main_thread && atomic_compare_exchange_strong(&pending_scheduled, &idle, 1))
        if (Py_AddPendingCall(run_handler, NULL) != 0)
            atomic_store(&pending_scheduled, 0); /* queue full: reported at disarm */
}
