/* ls_nvtx: see ls_nvtx.h. */
#include "ls_nvtx.h"

#include "ls_names.h"

#include <nvtx3/nvToolsExt.h>
#include <string.h>

void ls_nvtx_register(uint32_t name_id)
{
    if (ls_names_nvtx_handle(name_id) != NULL)
        return;
    const char *text = ls_names_text(name_id);
    if (text == NULL)
        return;
    /* NULL domain: the default one, where Nsight Systems shows plain ranges.
     * Returns NULL when no tool is attached; push then falls back to text. */
    nvtxStringHandle_t handle = nvtxDomainRegisterStringA(NULL, text);
    ls_names_set_nvtx_handle(name_id, (void *)handle);
}

void ls_nvtx_push(uint32_t name_id)
{
    void *handle = ls_names_nvtx_handle(name_id);
    if (handle != NULL) {
        nvtxEventAttributes_t attrs;
        memset(&attrs, 0, sizeof attrs);
        attrs.version = NVTX_VERSION;
        attrs.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
        attrs.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
        attrs.message.registered = (nvtxStringHandle_t)handle;
        nvtxDomainRangePushEx(NULL, &attrs);
        return;
    }
    const char *text = ls_names_text(name_id);
    nvtxRangePushA(text ? text : "?");
}

void ls_nvtx_pop(void) { nvtxRangePop(); }
