/* ls_switchboard: see ls_switchboard.h. */
#include "ls_switchboard.h"

#include "ls_calls.h"
#include "ls_cbids.h"
#include "ls_cuda.h"
#include "ls_cupti.h"
#include "ls_launches.h"
#include "ls_owncalls.h"
#include "ls_strict.h"

#include <pthread.h>
#include <stdatomic.h>

/* Calls of a wait class that cannot wait this time, known from their
 * parameters: cudaFree(NULL) / cuMemFree(0), a common no-op at context
 * set-up (the pointer is every free call's first parameter), and an async
 * copy marked device to device. */
static int cannot_wait(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, ls_wait_class wait,
                       const CUpti_CallbackData *call)
{
    if (wait == LS_WAIT_FREE)
        return call->functionParams != NULL && *(const uintptr_t *)call->functionParams == 0;
    return wait == LS_WAIT_COPY_ASYNC &&
           ls_cbid_copy_is_device_only(domain, cbid, call->functionParams);
}

void ls_switchboard_dispatch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                             const CUpti_CallbackData *call, uint64_t (*now)(void))
{
    uint8_t role = ls_cbid_role_of(domain, cbid);
    ls_wait_class wait = LS_ROLE_WAIT_CLASS(role);
    uint32_t driver = domain == CUPTI_CB_DOMAIN_DRIVER_API;
    /* calls kept with their stack: those that can wait, and memory calls */
    int kept = wait != LS_WAIT_NONE || (role & LS_ROLE_MEMORY);
    /* loopscope's worker waiting for the GPU at a finish while the next
     * profile runs: not the user's call.  (Asked only of kept calls, off
     * the launch path: the worker launches nothing.) */
    if (kept && ls_owncalls_this_thread()) {
        if (call->callbackSite == CUPTI_API_ENTER)
            ls_owncalls_note(call->correlationId);
        return;
    }
    if (call->callbackSite == CUPTI_API_ENTER) {
        uint64_t t = now();
        /* The common case, a launch that cannot wait, stops at its record:
         * the thread's launch count and the stack are for calls that can. */
        int watch = kept && call->correlationData != NULL &&
                    (wait == LS_WAIT_NONE || !cannot_wait(domain, cbid, wait, call));
        uint64_t launches_before = watch ? ls_launches_seen_by((uint64_t)pthread_self()) : 0;
        if (role & LS_ROLE_LAUNCH)
            ls_launches_record(driver, cbid, call->correlationId, t);
        if (kept && call->correlationData != NULL)
            *call->correlationData =
                watch ? ls_calls_enter(driver, cbid, role, call->correlationId, t,
                                       launches_before)
                      : 0;
        return;
    }
    if (!kept || call->correlationData == NULL || *call->correlationData == 0)
        return;
    uint64_t token = *call->correlationData;
    const ls_call *c = ls_calls_exit(token, now());
    if (c == NULL || wait == LS_WAIT_NONE || !ls_strict_watches(c->thread_id))
        return;
    /* An async copy waits only with pageable host memory.  Its activity
     * record tells later; strict mode must know now, so it asks the driver
     * (one call, only while no_sync() guards this thread). */
    if (wait == LS_WAIT_COPY_ASYNC) {
        const void *host = ls_cbid_copy_host_pointer(domain, cbid, call->functionParams);
        if (host == NULL || ls_cuda_host_is_pageable(host) != 1)
            return;
    }
    ls_strict_note(c, token);
}

static uint64_t cupti_now(void)
{
    uint64_t t = 0;
    ls_cupti.GetTimestamp(&t); /* no check: a hot path; 0 marks a failure */
    return t;
}

static void (*_Atomic context_listener)(void *context);
static atomic_uint_fast64_t graph_execs_created;

uint64_t ls_switchboard_graph_execs_created(void) { return atomic_load(&graph_execs_created); }

void ls_switchboard_on_context(void (*on_context)(void *context))
{
    atomic_store(&context_listener, on_context);
}

void CUPTIAPI ls_switchboard_callback(void *userdata, CUpti_CallbackDomain domain,
                                      CUpti_CallbackId cbid, const void *data)
{
    (void)userdata;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API) {
        ls_switchboard_dispatch(domain, cbid, (const CUpti_CallbackData *)data, cupti_now);
    } else if (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
        void (*listener)(void *) = atomic_load(&context_listener);
        if (listener != NULL)
            listener(((const CUpti_ResourceData *)data)->context);
    } else if (domain == CUPTI_CB_DOMAIN_RESOURCE &&
               cbid == CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED) {
        atomic_fetch_add(&graph_execs_created, 1);
    }
}
