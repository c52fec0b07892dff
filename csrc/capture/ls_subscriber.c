/* ls_subscriber: see ls_subscriber.h. */
#include "ls_subscriber.h"

#include "ls_cbids.h"
#include "ls_cupti.h"
#include "ls_switchboard.h"

#include <stdio.h>
#include <string.h>

static CUpti_SubscriberHandle subscriber;
static int callbacks_enabled;
static int waits_enabled;
static int launches_enabled;
static int contexts_watched;
static int graph_execs_watched;

static const CUpti_CallbackDomain api_domains[] = {CUPTI_CB_DOMAIN_RUNTIME_API,
                                                   CUPTI_CB_DOMAIN_DRIVER_API};

int ls_subscriber_wants(uint8_t role, int waits, int launches)
{
    /* A light profile would count kernel launches only to split a copy from
     * a wait after it on one stack when a kernel came between: one C call
     * doing copy, kernel, stream sync.  The callback pair a kernel cost
     * GPT-2 generate() 2-3% (H200, 2026-11-29 21:23Z: syncs on over off
     * 1.2-2.8% without, 3.9-5.7% with), so it counts none. */
    int launch = (role & LS_ROLE_LAUNCH) && launches;
    return launch || (waits && (LS_ROLE_WAIT_CLASS(role) != LS_WAIT_NONE ||
                                (role & LS_ROLE_MEMORY)));
}

/* Sets every callback id ls_subscriber_wants; returns 0, or -1 at the first
 * failure when enabling (the caller then disables them all again). */
static int set_callbacks(uint32_t enable)
{
    unsigned set = 0, unknown = 0;
    for (unsigned d = 0; d < 2; d++) {
        unsigned size = 0;
        const uint8_t *roles = ls_cbid_roles(api_domains[d], &size);
        for (unsigned cbid = 0; cbid < size; cbid++) {
            if (!ls_subscriber_wants(roles[cbid], waits_enabled, launches_enabled))
                continue;
            CUptiResult st = LS_CUPTI_CHECK(EnableCallback(enable, subscriber, api_domains[d], cbid));
            /* An id newer than the loaded CUPTI (CUDA 13's cuCtxSynchronize_v2
             * under CUPTI 12) is refused as an invalid parameter: that call
             * cannot happen in this process, so there is nothing to watch. */
            if (st == CUPTI_ERROR_INVALID_PARAMETER) {
                unknown++;
                continue;
            }
            if (st != CUPTI_SUCCESS && enable)
                return -1;
            set++;
        }
    }
    if (unknown > 0 && set > 0)
        ls_cupti_clear_error();
    return enable && set == 0 ? -1 : 0; /* every id refused: not a matter of versions */
}

int ls_subscriber_enable_callbacks(int waits, int launches, char *reason,
                                   size_t reason_size)
{
    if (subscriber == NULL) {
        snprintf(reason, reason_size, "loopscope does not hold CUPTI's callback slot");
        return -1;
    }
    waits_enabled = waits;
    launches_enabled = launches;
    if (set_callbacks(1) != 0) {
        snprintf(reason, reason_size, "%s", ls_cupti_error());
        set_callbacks(0);
        return -1;
    }
    callbacks_enabled = 1;
    return 0;
}

int ls_subscriber_watch_contexts(void (*on_context)(void *context))
{
    if (subscriber == NULL)
        return -1;
    ls_switchboard_on_context(on_context);
    if (LS_CUPTI_CHECK(EnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                      CUPTI_CBID_RESOURCE_CONTEXT_CREATED)) != CUPTI_SUCCESS) {
        ls_switchboard_on_context(NULL);
        return -1;
    }
    contexts_watched = 1;
    return 0;
}

int ls_subscriber_watch_graph_execs(void)
{
    if (subscriber == NULL)
        return -1;
    if (LS_CUPTI_CHECK(EnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                      CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED)) != CUPTI_SUCCESS)
        return -1;
    graph_execs_watched = 1;
    return 0;
}

void ls_subscriber_disable_callbacks(void)
{
    if (graph_execs_watched && subscriber != NULL) {
        LS_CUPTI_CHECK(EnableCallback(0, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                      CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED));
        graph_execs_watched = 0;
    }
    if (contexts_watched && subscriber != NULL) {
        LS_CUPTI_CHECK(EnableCallback(0, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                      CUPTI_CBID_RESOURCE_CONTEXT_CREATED));
        ls_switchboard_on_context(NULL);
        contexts_watched = 0;
    }
    if (!callbacks_enabled || subscriber == NULL)
        return;
    set_callbacks(0);
    callbacks_enabled = 0;
}

int ls_subscriber_claim(char *reason, size_t reason_size)
{
    if (subscriber != NULL)
        return 0;
    char other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = "";
    CUptiResult status;
    if (ls_cupti.Subscribe_v2 != NULL) {
        CUpti_SubscriberParams params;
        memset(&params, 0, sizeof params);
        params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
        params.subscriberName = "loopscope";
        params.oldSubscriberName = other;
        params.oldSubscriberSize = sizeof other - 1;
        status = LS_CUPTI_CHECK(Subscribe_v2(&subscriber, ls_switchboard_callback, NULL, &params));
    } else {
        status = LS_CUPTI_CHECK(Subscribe(&subscriber, ls_switchboard_callback, NULL));
    }
    if (status == CUPTI_SUCCESS)
        return LS_SUBSCRIBER_OK;
    subscriber = NULL;
    if (status == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
        snprintf(reason, reason_size,
                 "CUPTI's callback slot is held by another client (%s), e.g. torch.profiler "
                 "from an earlier use in this process: GPU activity is traced, CUPTI "
                 "callbacks are not available",
                 other[0] ? other : "CUPTI did not name it");
        return LS_SUBSCRIBER_HELD;
    }
    snprintf(reason, reason_size, "%s", ls_cupti_error());
    return LS_SUBSCRIBER_ERROR;
}

void ls_subscriber_release(void)
{
    if (subscriber == NULL)
        return;
    ls_subscriber_disable_callbacks();
    LS_CUPTI_CHECK(Unsubscribe(subscriber));
    subscriber = NULL;
}
