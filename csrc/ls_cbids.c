/* ls_cbids: see ls_cbids.h. */
#include "ls_cbids.h"

#define RT(name) {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_##name, LS_ROLE_LAUNCH}
#define DRV(name) {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_##name, LS_ROLE_LAUNCH}

/* Launch calls, runtime and driver: cuBLAS, Triton and CuPy launch through
 * the driver API, PyTorch's own kernels through the runtime. */
const ls_cbid_entry ls_cbid_table[] = {
    RT(cudaLaunchKernel_v7000), RT(cudaLaunchKernel_ptsz_v7000),
    RT(cudaLaunchKernelExC_v11060), RT(cudaLaunchKernelExC_ptsz_v11060),
    RT(cudaLaunchCooperativeKernel_v9000), RT(cudaLaunchCooperativeKernel_ptsz_v9000),
    RT(cudaGraphLaunch_v10000), RT(cudaGraphLaunch_ptsz_v10000),
    RT(cudaMemcpy_v3020), RT(cudaMemcpy_ptds_v7000),
    RT(cudaMemcpyAsync_v3020), RT(cudaMemcpyAsync_ptsz_v7000),
    RT(cudaMemcpy2DAsync_v3020), RT(cudaMemcpy2DAsync_ptsz_v7000),
    RT(cudaMemcpy3DAsync_v3020), RT(cudaMemcpy3DAsync_ptsz_v7000),
    RT(cudaMemcpyPeerAsync_v4000),
    RT(cudaMemcpyToSymbolAsync_v3020), RT(cudaMemcpyToSymbolAsync_ptsz_v7000),
    RT(cudaMemcpyFromSymbolAsync_v3020), RT(cudaMemcpyFromSymbolAsync_ptsz_v7000),
    RT(cudaMemset_v3020), RT(cudaMemset_ptds_v7000),
    RT(cudaMemsetAsync_v3020), RT(cudaMemsetAsync_ptsz_v7000),
    RT(cudaMemset2DAsync_v3020), RT(cudaMemset2DAsync_ptsz_v7000),
    RT(cudaMemset3DAsync_v3020), RT(cudaMemset3DAsync_ptsz_v7000),
    DRV(cuLaunchKernel), DRV(cuLaunchKernel_ptsz),
    DRV(cuLaunchKernelEx), DRV(cuLaunchKernelEx_ptsz),
    DRV(cuLaunchCooperativeKernel), DRV(cuLaunchCooperativeKernel_ptsz),
    DRV(cuLaunchGrid), DRV(cuLaunchGridAsync),
    DRV(cuGraphLaunch), DRV(cuGraphLaunch_ptsz),
    DRV(cuMemcpyAsync), DRV(cuMemcpyAsync_ptsz),
    DRV(cuMemcpyHtoDAsync_v2), DRV(cuMemcpyHtoDAsync_v2_ptsz),
    DRV(cuMemcpyDtoHAsync_v2), DRV(cuMemcpyDtoHAsync_v2_ptsz),
    DRV(cuMemcpyDtoDAsync_v2), DRV(cuMemcpyDtoDAsync_v2_ptsz),
    DRV(cuMemsetD8Async), DRV(cuMemsetD8Async_ptsz),
    DRV(cuMemsetD16Async), DRV(cuMemsetD16Async_ptsz),
    DRV(cuMemsetD32Async), DRV(cuMemsetD32Async_ptsz),
};

const unsigned ls_cbid_table_size = sizeof ls_cbid_table / sizeof ls_cbid_table[0];

ls_cbid_role ls_cbid_role_of(CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
    /* Built once, on first use from a Python thread (start enables the
     * callbacks only after calling this), so callbacks only read it. */
    static uint8_t runtime_roles[CUPTI_RUNTIME_TRACE_CBID_SIZE];
    static uint8_t driver_roles[CUPTI_DRIVER_TRACE_CBID_SIZE];
    static int built;
    if (!built) {
        for (unsigned i = 0; i < ls_cbid_table_size; i++) {
            const ls_cbid_entry *e = &ls_cbid_table[i];
            if (e->domain == CUPTI_CB_DOMAIN_RUNTIME_API && e->cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE)
                runtime_roles[e->cbid] = (uint8_t)e->role;
            else if (e->domain == CUPTI_CB_DOMAIN_DRIVER_API && e->cbid < CUPTI_DRIVER_TRACE_CBID_SIZE)
                driver_roles[e->cbid] = (uint8_t)e->role;
        }
        built = 1;
    }
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE)
        return (ls_cbid_role)runtime_roles[cbid];
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid < CUPTI_DRIVER_TRACE_CBID_SIZE)
        return (ls_cbid_role)driver_roles[cbid];
    return LS_ROLE_NONE;
}
