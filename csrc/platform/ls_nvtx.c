/* ls_nvtx: see ls_nvtx.h.  Pushes and pops both go through the domain API
 * on the default (NULL) domain, so a tool sees one kind of pair. */
#include "ls_nvtx.h"

#include <nvtx3/nvToolsExt.h>
#include <string.h>

static uint32_t registered; /* callers hold the GIL */

void *ls_nvtx_register(const char *text)
{
    if (text == NULL || registered >= LS_NVTX_MAX_REGISTERED)
        return NULL;
    /* NULL when no tool is attached: nothing was kept anywhere then. */
    nvtxStringHandle_t handle = nvtxDomainRegisterStringA(NULL, text);
    if (handle != NULL)
        registered++;
    return (void *)handle;
}

void ls_nvtx_push(const char *text, void *handle)
{
    nvtxEventAttributes_t attrs;
    memset(&attrs, 0, sizeof attrs);
    attrs.version = NVTX_VERSION;
    attrs.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    if (handle != NULL) {
        attrs.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
        attrs.message.registered = (nvtxStringHandle_t)handle;
    } else {
        attrs.messageType = NVTX_MESSAGE_TYPE_ASCII;
        attrs.message.ascii = text ? text : "?";
    }
    nvtxDomainRangePushEx(NULL, &attrs);
}

void ls_nvtx_pop(void) { nvtxDomainRangePop(NULL); }

uint32_t ls_nvtx_registered(void) { return registered; }
