/* ls_cbids: see ls_cbids.h.  The role arrays are the table itself: a
 * designated initializer per callback id, so a callback's lookup is one
 * bounds check and one load, with nothing to build at run time. */
#include "ls_cbids.h"

#define RUNTIME_SIZE CUPTI_RUNTIME_TRACE_CBID_SIZE
#define DRIVER_SIZE CUPTI_DRIVER_TRACE_CBID_SIZE

#define RT(id) [CUPTI_RUNTIME_TRACE_CBID_##id] = LS_ROLE_LAUNCH
#define DRV(id) [CUPTI_DRIVER_TRACE_CBID_##id] = LS_ROLE_LAUNCH

/* Launch calls, runtime and driver: cuBLAS, Triton and CuPy launch through
 * the driver API, PyTorch's own kernels through the runtime. */
static const uint8_t runtime_roles[RUNTIME_SIZE] = {
    RT(cudaLaunchKernel_v7000), RT(cudaLaunchKernel_ptsz_v7000), RT(cudaLaunchKernelExC_v11060),
    RT(cudaLaunchKernelExC_ptsz_v11060), RT(cudaLaunchCooperativeKernel_v9000),
    RT(cudaLaunchCooperativeKernel_ptsz_v9000), RT(cudaGraphLaunch_v10000),
    RT(cudaGraphLaunch_ptsz_v10000), RT(cudaMemcpy_v3020), RT(cudaMemcpy_ptds_v7000),
    RT(cudaMemcpyAsync_v3020), RT(cudaMemcpyAsync_ptsz_v7000), RT(cudaMemcpy2DAsync_v3020),
    RT(cudaMemcpy2DAsync_ptsz_v7000), RT(cudaMemcpy3DAsync_v3020),
    RT(cudaMemcpy3DAsync_ptsz_v7000), RT(cudaMemcpyPeerAsync_v4000),
    RT(cudaMemcpyToSymbolAsync_v3020), RT(cudaMemcpyToSymbolAsync_ptsz_v7000),
    RT(cudaMemcpyFromSymbolAsync_v3020), RT(cudaMemcpyFromSymbolAsync_ptsz_v7000),
    RT(cudaMemset_v3020), RT(cudaMemset_ptds_v7000), RT(cudaMemsetAsync_v3020),
    RT(cudaMemsetAsync_ptsz_v7000), RT(cudaMemset2DAsync_v3020),
    RT(cudaMemset2DAsync_ptsz_v7000), RT(cudaMemset3DAsync_v3020),
    RT(cudaMemset3DAsync_ptsz_v7000),
};

static const uint8_t driver_roles[DRIVER_SIZE] = {
    DRV(cuLaunchKernel), DRV(cuLaunchKernel_ptsz), DRV(cuLaunchKernelEx),
    DRV(cuLaunchKernelEx_ptsz), DRV(cuLaunchCooperativeKernel),
    DRV(cuLaunchCooperativeKernel_ptsz), DRV(cuLaunchGrid), DRV(cuLaunchGridAsync),
    DRV(cuGraphLaunch), DRV(cuGraphLaunch_ptsz), DRV(cuMemcpyAsync), DRV(cuMemcpyAsync_ptsz),
    DRV(cuMemcpyHtoDAsync_v2), DRV(cuMemcpyHtoDAsync_v2_ptsz), DRV(cuMemcpyDtoHAsync_v2),
    DRV(cuMemcpyDtoHAsync_v2_ptsz), DRV(cuMemcpyDtoDAsync_v2), DRV(cuMemcpyDtoDAsync_v2_ptsz),
    DRV(cuMemsetD8Async), DRV(cuMemsetD8Async_ptsz), DRV(cuMemsetD16Async),
    DRV(cuMemsetD16Async_ptsz), DRV(cuMemsetD32Async), DRV(cuMemsetD32Async_ptsz),
};

ls_cbid_role ls_cbid_role_of(CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid < RUNTIME_SIZE)
        return (ls_cbid_role)runtime_roles[cbid];
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid < DRIVER_SIZE)
        return (ls_cbid_role)driver_roles[cbid];
    return LS_ROLE_NONE;
}

const uint8_t *ls_cbid_roles(CUpti_CallbackDomain domain, unsigned *size)
{
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
        *size = RUNTIME_SIZE;
        return runtime_roles;
    }
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
        *size = DRIVER_SIZE;
        return driver_roles;
    }
    *size = 0;
    return NULL;
}
