/* ls_switchboard: see ls_switchboard.h. */
#include "ls_switchboard.h"

#include "ls_calls.h"
#include "ls_cbids.h"
#include "ls_cuda.h"
#include "ls_cupti.h"
#include "ls_launches.h"
#include "ls_strict.h"

#include <pthread.h>

/* cudaFree(NULL) / cuMemFree(0) is a common no-op (context set-up): the
 * first parameter of every free call in the table is the pointer. */
static int frees_nothing(const CUpti_CallbackData *call)
{
    return call->functionParams != NULL && *(const uintptr_t *)call->functionParams == 0;
}

void ls_switchboard_dispatch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                             const CUpti_CallbackData *call, uint64_t (*now)(void))
{
    uint8_t role = ls_cbid_role_of(domain, cbid);
    ls_wait_class wait = LS_ROLE_WAIT_CLASS(role);
    uint32_t driver = domain == CUPTI_CB_DOMAIN_DRIVER_API;
    if (call->callbackSite == CUPTI_API_ENTER) {
        uint64_t t = now();
        uint64_t launches_before = ls_launches_seen_by((uint64_t)pthread_self());
        if (role & LS_ROLE_LAUNCH)
            ls_launches_record(driver, cbid, call->correlationId, t);
        if (wait == LS_WAIT_NONE || call->correlationData == NULL)
            return;
        *call->correlationData = 0;
        if (wait == LS_WAIT_FREE && frees_nothing(call))
            return;
        *call->correlationData =
            ls_calls_enter(driver, cbid, role, call->correlationId, t, launches_before);
        return;
    }
    if (wait == LS_WAIT_NONE || call->correlationData == NULL || *call->correlationData == 0)
        return;
    uint64_t token = *call->correlationData;
    const ls_call *c = ls_calls_exit(token, now());
    if (c == NULL || !ls_strict_watches(c->thread_id))
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

void CUPTIAPI ls_switchboard_callback(void *userdata, CUpti_CallbackDomain domain,
                                      CUpti_CallbackId cbid, const void *data)
{
    (void)userdata;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API)
        ls_switchboard_dispatch(domain, cbid, (const CUpti_CallbackData *)data, cupti_now);
}
