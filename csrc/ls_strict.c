/* ls_strict: see ls_strict.h. */
#include "ls_strict.h"

#include "ls_cuda.h"

#include <pthread.h>
#include <stdatomic.h>

static struct {
    atomic_int armed;
    uint64_t thread_id;
    int on_main_thread;
    atomic_uint_fast64_t noted;   /* token of the first wait not yet handled */
    atomic_int pending_scheduled; /* a pending call is queued */
    PyObject *handler;            /* strong reference while armed */
} strict;

/* Runs in the main thread with the GIL, at the interpreter's next check. */
static int run_handler(void *unused)
{
    (void)unused;
    atomic_store(&strict.pending_scheduled, 0);
    uint64_t token = atomic_exchange(&strict.noted, 0);
    if (!atomic_load(&strict.armed) || token == 0 || strict.handler == NULL)
        return 0;
    PyObject *result = PyObject_CallFunction(strict.handler, "K", (unsigned long long)token);
    if (result == NULL)
        return -1; /* the exception surfaces in the running Python code */
    Py_DECREF(result);
    return 0;
}

int ls_strict_arm(PyObject *handler, int on_main_thread)
{
    if (atomic_load(&strict.armed)) {
        PyErr_SetString(PyExc_RuntimeError, "loopscope.no_sync() blocks do not nest");
        return -1;
    }
    ls_cuda_prepare_pointer_query(); /* for async copies; without a driver they pass */
    Py_XSETREF(strict.handler, Py_NewRef(handler));
    strict.thread_id = (uint64_t)pthread_self();
    strict.on_main_thread = on_main_thread;
    atomic_store(&strict.noted, 0);
    atomic_store(&strict.armed, 1);
    return 0;
}

int ls_strict_watches(uint64_t thread_id)
{
    return atomic_load_explicit(&strict.armed, memory_order_relaxed) &&
           strict.thread_id == thread_id;
}

uint64_t ls_strict_disarm(void)
{
    atomic_store(&strict.armed, 0);
    Py_CLEAR(strict.handler);
    return atomic_exchange(&strict.noted, 0);
}

void ls_strict_note(const ls_call *call, uint64_t token)
{
    if (!ls_strict_watches(call->thread_id))
        return;
    uint_fast64_t none = 0;
    if (!atomic_compare_exchange_strong(&strict.noted, &none, token))
        return; /* an earlier wait is still waiting for its handler */
    int idle = 0;
    if (strict.on_main_thread && atomic_compare_exchange_strong(&strict.pending_scheduled, &idle, 1))
        if (Py_AddPendingCall(run_handler, NULL) != 0)
            atomic_store(&strict.pending_scheduled, 0); /* queue full: reported at disarm */
}
