/* ls_cbids: see ls_cbids.h.  The two lists below are the table itself.  Each
 * becomes a role array and a name array, one designated initializer per
 * callback id, so a callback's lookup is one bounds check and one load. */
#include "ls_cbids.h" /* cupti.h brings the callback parameter structs */

#include <string.h>

#define L LS_ROLE_LAUNCH
#define W(c) ((uint8_t)((c) << 1))
#define COPY (L | W(LS_WAIT_COPY))
#define COPY_ASYNC (L | W(LS_WAIT_COPY_ASYNC))
#define G (L | LS_ROLE_GRAPH)
#define M LS_ROLE_MEMORY
#define FREE (W(LS_WAIT_FREE) | M)
#define MA (M | LS_ROLE_STREAM_ORDERED)

/* Runtime API.  PyTorch's own kernels, copies and syncs come through here. */
#define LS_RUNTIME_CALLS(X)                                                            \
    X(cudaLaunchKernel_v7000, L) X(cudaLaunchKernel_ptsz_v7000, L)                     \
    X(cudaLaunchKernelExC_v11060, L) X(cudaLaunchKernelExC_ptsz_v11060, L)             \
    X(cudaLaunchCooperativeKernel_v9000, L) X(cudaLaunchCooperativeKernel_ptsz_v9000, L) \
    X(cudaGraphLaunch_v10000, G) X(cudaGraphLaunch_ptsz_v10000, G)                     \
    X(cudaMemset_v3020, L) X(cudaMemset_ptds_v7000, L)                                 \
    X(cudaMemsetAsync_v3020, L) X(cudaMemsetAsync_ptsz_v7000, L)                       \
    X(cudaMemset2DAsync_v3020, L) X(cudaMemset2DAsync_ptsz_v7000, L)                   \
    X(cudaMemset3DAsync_v3020, L) X(cudaMemset3DAsync_ptsz_v7000, L)                   \
    X(cudaMemcpy_v3020, COPY) X(cudaMemcpy_ptds_v7000, COPY)                           \
    X(cudaMemcpy2D_v3020, COPY) X(cudaMemcpy2D_ptds_v7000, COPY)                       \
    X(cudaMemcpy3D_v3020, COPY) X(cudaMemcpy3D_ptds_v7000, COPY)                       \
    X(cudaMemcpyPeer_v4000, COPY)                                                      \
    X(cudaMemcpyToSymbol_v3020, COPY) X(cudaMemcpyToSymbol_ptds_v7000, COPY)           \
    X(cudaMemcpyFromSymbol_v3020, COPY) X(cudaMemcpyFromSymbol_ptds_v7000, COPY)       \
    X(cudaMemcpyAsync_v3020, COPY_ASYNC) X(cudaMemcpyAsync_ptsz_v7000, COPY_ASYNC)     \
    X(cudaMemcpy2DAsync_v3020, COPY_ASYNC) X(cudaMemcpy2DAsync_ptsz_v7000, COPY_ASYNC) \
    X(cudaMemcpy3DAsync_v3020, COPY_ASYNC) X(cudaMemcpy3DAsync_ptsz_v7000, COPY_ASYNC) \
    X(cudaMemcpyPeerAsync_v4000, COPY_ASYNC)                                           \
    X(cudaMemcpyToSymbolAsync_v3020, COPY_ASYNC)                                       \
    X(cudaMemcpyToSymbolAsync_ptsz_v7000, COPY_ASYNC)                                  \
    X(cudaMemcpyFromSymbolAsync_v3020, COPY_ASYNC)                                     \
    X(cudaMemcpyFromSymbolAsync_ptsz_v7000, COPY_ASYNC)                                \
    X(cudaDeviceSynchronize_v3020, W(LS_WAIT_DEVICE))                                  \
    X(cudaThreadSynchronize_v3020, W(LS_WAIT_DEVICE))                                  \
    X(cudaStreamSynchronize_v3020, W(LS_WAIT_STREAM))                                  \
    X(cudaStreamSynchronize_ptsz_v7000, W(LS_WAIT_STREAM))                             \
    X(cudaEventSynchronize_v3020, W(LS_WAIT_EVENT))                                    \
    X(cudaFree_v3020, FREE) X(cudaFreeHost_v3020, FREE)                                \
    X(cudaMalloc_v3020, M) X(cudaMallocHost_v3020, M) X(cudaMallocPitch_v3020, M)      \
    X(cudaMalloc3D_v3020, M) X(cudaMallocManaged_v6000, M)                             \
    X(cudaMallocAsync_v11020, MA) X(cudaMallocAsync_ptsz_v11020, MA)                   \
    X(cudaMallocFromPoolAsync_v11020, MA) X(cudaMallocFromPoolAsync_ptsz_v11020, MA)   \
    X(cudaFreeAsync_v11020, MA) X(cudaFreeAsync_ptsz_v11020, MA)

/* Driver API: cuBLAS, Triton and CuPy launch, copy and sync through here. */
#define LS_DRIVER_CALLS(X)                                                             \
    X(cuLaunchKernel, L) X(cuLaunchKernel_ptsz, L) X(cuLaunchKernelEx, L)              \
    X(cuLaunchKernelEx_ptsz, L) X(cuLaunchCooperativeKernel, L)                        \
    X(cuLaunchCooperativeKernel_ptsz, L) X(cuLaunchGrid, L) X(cuLaunchGridAsync, L)    \
    X(cuGraphLaunch, G) X(cuGraphLaunch_ptsz, G)                                       \
    X(cuMemsetD8Async, L) X(cuMemsetD8Async_ptsz, L) X(cuMemsetD16Async, L)            \
    X(cuMemsetD16Async_ptsz, L) X(cuMemsetD32Async, L) X(cuMemsetD32Async_ptsz, L)     \
    X(cuMemcpyDtoDAsync_v2, L) X(cuMemcpyDtoDAsync_v2_ptsz, L)                         \
    X(cuMemcpy, COPY) X(cuMemcpy_ptds, COPY)                                           \
    X(cuMemcpyDtoH_v2, COPY) X(cuMemcpyDtoH_v2_ptds, COPY)                             \
    X(cuMemcpyHtoD_v2, COPY) X(cuMemcpyHtoD_v2_ptds, COPY)                             \
    X(cuMemcpyDtoD_v2, COPY) X(cuMemcpyDtoD_v2_ptds, COPY)                             \
    X(cuMemcpy2D_v2, COPY) X(cuMemcpy2D_v2_ptds, COPY)                                 \
    X(cuMemcpy3D_v2, COPY) X(cuMemcpy3D_v2_ptds, COPY)                                 \
    X(cuMemcpyPeer, COPY) X(cuMemcpyPeer_ptds, COPY)                                   \
    X(cuMemcpyAsync, COPY_ASYNC) X(cuMemcpyAsync_ptsz, COPY_ASYNC)                     \
    X(cuMemcpyHtoDAsync_v2, COPY_ASYNC) X(cuMemcpyHtoDAsync_v2_ptsz, COPY_ASYNC)       \
    X(cuMemcpyDtoHAsync_v2, COPY_ASYNC) X(cuMemcpyDtoHAsync_v2_ptsz, COPY_ASYNC)       \
    X(cuMemcpy2DAsync_v2, COPY_ASYNC) X(cuMemcpy2DAsync_v2_ptsz, COPY_ASYNC)           \
    X(cuMemcpy3DAsync_v2, COPY_ASYNC) X(cuMemcpy3DAsync_v2_ptsz, COPY_ASYNC)           \
    X(cuMemcpyPeerAsync, COPY_ASYNC) X(cuMemcpyPeerAsync_ptsz, COPY_ASYNC)             \
    X(cuCtxSynchronize, W(LS_WAIT_DEVICE)) X(cuCtxSynchronize_v2, W(LS_WAIT_DEVICE))   \
    X(cuStreamSynchronize, W(LS_WAIT_STREAM))                                          \
    X(cuStreamSynchronize_ptsz, W(LS_WAIT_STREAM))                                     \
    X(cuEventSynchronize, W(LS_WAIT_EVENT))                                            \
    X(cuMemFree_v2, FREE) X(cuMemFreeHost, FREE)                                       \
    X(cuMemAlloc_v2, M) X(cuMemAllocHost_v2, M) X(cuMemAllocPitch_v2, M)               \
    X(cuMemAllocManaged, M)                                                            \
    X(cuMemAllocAsync, MA) X(cuMemAllocAsync_ptsz, MA)                                 \
    X(cuMemAllocFromPoolAsync, MA) X(cuMemAllocFromPoolAsync_ptsz, MA)                 \
    X(cuMemFreeAsync, MA) X(cuMemFreeAsync_ptsz, MA)

#define RUNTIME_SIZE CUPTI_RUNTIME_TRACE_CBID_SIZE
#define DRIVER_SIZE CUPTI_DRIVER_TRACE_CBID_SIZE

#define RT_ROLE(id, role) [CUPTI_RUNTIME_TRACE_CBID_##id] = (role),
#define RT_NAME(id, role) [CUPTI_RUNTIME_TRACE_CBID_##id] = #id,
#define DRV_ROLE(id, role) [CUPTI_DRIVER_TRACE_CBID_##id] = (role),
#define DRV_NAME(id, role) [CUPTI_DRIVER_TRACE_CBID_##id] = #id,

static const uint8_t runtime_roles[RUNTIME_SIZE] = {LS_RUNTIME_CALLS(RT_ROLE)};
static const char *const runtime_names[RUNTIME_SIZE] = {LS_RUNTIME_CALLS(RT_NAME)};
static const uint8_t driver_roles[DRIVER_SIZE] = {LS_DRIVER_CALLS(DRV_ROLE)};
static const char *const driver_names[DRIVER_SIZE] = {LS_DRIVER_CALLS(DRV_NAME)};

uint8_t ls_cbid_role_of(CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid < RUNTIME_SIZE)
        return runtime_roles[cbid];
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid < DRIVER_SIZE)
        return driver_roles[cbid];
    return 0;
}

uint8_t ls_cbid_role_of_record(uint32_t domain, uint32_t cbid)
{
    return ls_cbid_role_of(domain ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API,
                           (CUpti_CallbackId)cbid);
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

static const char *raw_name(CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid < RUNTIME_SIZE)
        return runtime_names[cbid];
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid < DRIVER_SIZE)
        return driver_names[cbid];
    return NULL;
}

/* Length of a table name without CUPTI's suffixes ("_v3020", "_ptsz_v7000",
 * "_v2_ptds"): the name users know from the CUDA documentation. */
static size_t base_length(const char *name)
{
    const char *cut = strchr(name, '_');
    return cut ? (size_t)(cut - name) : strlen(name);
}

const char *ls_cbid_name(CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
    /* Stripped names are built once; the table is small and constant. */
    static char runtime_base[RUNTIME_SIZE][48], driver_base[DRIVER_SIZE][48];
    const char *name = raw_name(domain, cbid);
    if (name == NULL)
        return NULL;
    char *out = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? runtime_base[cbid] : driver_base[cbid];
    if (out[0] == '\0') {
        size_t n = base_length(name);
        n = n < 47 ? n : 47;
        memcpy(out, name, n);
        out[n] = '\0';
    }
    return out;
}

/* HIP (ROCm) runtime calls as the CUDA calls of the table that do the same
 * thing: Kineto on ROCm writes them under cat "cuda_runtime", and a trace
 * reader must see their launches, copies, waits and frees as it sees
 * CUDA's.  Names from the HIP runtime API (hip_runtime_api.h). */
static const struct {
    const char *hip, *cuda;
} hip_aliases[] = {
    {"hipLaunchKernel", "cudaLaunchKernel_v7000"},
    {"hipExtLaunchKernel", "cudaLaunchKernel_v7000"},
    {"hipModuleLaunchKernel", "cudaLaunchKernel_v7000"},
    {"hipExtModuleLaunchKernel", "cudaLaunchKernel_v7000"},
    {"hipHccModuleLaunchKernel", "cudaLaunchKernel_v7000"},
    {"hipLaunchKernelExC", "cudaLaunchKernelExC_v11060"},
    {"hipDrvLaunchKernelEx", "cudaLaunchKernelExC_v11060"},
    {"hipLaunchCooperativeKernel", "cudaLaunchCooperativeKernel_v9000"},
    {"hipModuleLaunchCooperativeKernel", "cudaLaunchCooperativeKernel_v9000"},
    {"hipExtLaunchMultiKernelMultiDevice", "cudaLaunchKernel_v7000"},
    {"hipLaunchCooperativeKernelMultiDevice", "cudaLaunchCooperativeKernel_v9000"},
    {"hipGraphLaunch", "cudaGraphLaunch_v10000"},
    {"hipMemset", "cudaMemset_v3020"}, {"hipMemsetD8", "cudaMemset_v3020"},
    {"hipMemsetD16", "cudaMemset_v3020"}, {"hipMemsetD32", "cudaMemset_v3020"},
    {"hipMemsetAsync", "cudaMemsetAsync_v3020"}, {"hipMemsetD8Async", "cudaMemsetAsync_v3020"},
    {"hipMemsetD16Async", "cudaMemsetAsync_v3020"},
    {"hipMemsetD32Async", "cudaMemsetAsync_v3020"},
    {"hipMemset2DAsync", "cudaMemset2DAsync_v3020"},
    {"hipMemset3DAsync", "cudaMemset3DAsync_v3020"},
    {"hipMemcpy", "cudaMemcpy_v3020"}, {"hipMemcpyWithStream", "cudaMemcpy_v3020"},
    {"hipMemcpyHtoD", "cudaMemcpy_v3020"}, {"hipMemcpyDtoH", "cudaMemcpy_v3020"},
    {"hipMemcpyDtoD", "cudaMemcpy_v3020"}, {"hipMemcpyParam2D", "cudaMemcpy2D_v3020"},
    {"hipMemcpy2D", "cudaMemcpy2D_v3020"}, {"hipMemcpy3D", "cudaMemcpy3D_v3020"},
    {"hipMemcpyPeer", "cudaMemcpyPeer_v4000"},
    {"hipMemcpyToSymbol", "cudaMemcpyToSymbol_v3020"},
    {"hipMemcpyFromSymbol", "cudaMemcpyFromSymbol_v3020"},
    {"hipMemcpyAsync", "cudaMemcpyAsync_v3020"}, {"hipMemcpyHtoDAsync", "cudaMemcpyAsync_v3020"},
    {"hipMemcpyDtoHAsync", "cudaMemcpyAsync_v3020"},
    {"hipMemcpyDtoDAsync", "cudaMemcpyAsync_v3020"},
    {"hipMemcpy2DAsync", "cudaMemcpy2DAsync_v3020"},
    {"hipMemcpy3DAsync", "cudaMemcpy3DAsync_v3020"},
    {"hipMemcpyPeerAsync", "cudaMemcpyPeerAsync_v4000"},
    {"hipMemcpyToSymbolAsync", "cudaMemcpyToSymbolAsync_v3020"},
    {"hipMemcpyFromSymbolAsync", "cudaMemcpyFromSymbolAsync_v3020"},
    {"hipDeviceSynchronize", "cudaDeviceSynchronize_v3020"},
    {"hipCtxSynchronize", "cudaDeviceSynchronize_v3020"},
    {"hipStreamSynchronize", "cudaStreamSynchronize_v3020"},
    {"hipEventSynchronize", "cudaEventSynchronize_v3020"},
    {"hipFree", "cudaFree_v3020"}, {"hipFreeHost", "cudaFreeHost_v3020"},
    {"hipHostFree", "cudaFreeHost_v3020"},
    {"hipMalloc", "cudaMalloc_v3020"}, {"hipExtMallocWithFlags", "cudaMalloc_v3020"},
    {"hipHostMalloc", "cudaMallocHost_v3020"}, {"hipMallocHost", "cudaMallocHost_v3020"},
    {"hipMallocPitch", "cudaMallocPitch_v3020"}, {"hipMalloc3D", "cudaMalloc3D_v3020"},
    {"hipMallocManaged", "cudaMallocManaged_v6000"},
    {"hipMallocAsync", "cudaMallocAsync_v11020"},
    {"hipMallocFromPoolAsync", "cudaMallocFromPoolAsync_v11020"},
    {"hipFreeAsync", "cudaFreeAsync_v11020"},
};

#define HIP_ALIASES (sizeof hip_aliases / sizeof hip_aliases[0])
_Static_assert(HIP_ALIASES < 255, "a HIP alias fits a byte");

uint8_t ls_cbid_alias_of(const char *name)
{
    if (!(name[0] == 'h' && name[1] == 'i' && name[2] == 'p'))
        return 0;
    /* "_spt": HIP's per-thread default stream variant of the same call */
    size_t n = strlen(name);
    if (n > 4 && strcmp(name + n - 4, "_spt") == 0)
        n -= 4;
    for (size_t i = 0; i < HIP_ALIASES; i++)
        if (strlen(hip_aliases[i].hip) == n && strncmp(name, hip_aliases[i].hip, n) == 0)
            return (uint8_t)(i + 1);
    return 0;
}

const char *ls_cbid_alias_name(uint32_t alias)
{
    return alias >= 1 && alias <= HIP_ALIASES ? hip_aliases[alias - 1].hip : NULL;
}

int ls_cbid_find(const char *name, CUpti_CallbackDomain *domain, CUpti_CallbackId *cbid)
{
    if (name[0] == 'h' && name[1] == 'i' && name[2] == 'p') {
        uint8_t alias = ls_cbid_alias_of(name);
        return alias ? ls_cbid_find(hip_aliases[alias - 1].cuda, domain, cbid) : -1;
    }
    static const CUpti_CallbackDomain domains[] = {CUPTI_CB_DOMAIN_RUNTIME_API,
                                                   CUPTI_CB_DOMAIN_DRIVER_API};
    size_t wanted = strlen(name);
    for (unsigned d = 0; d < 2; d++) {
        unsigned size = 0;
        ls_cbid_roles(domains[d], &size);
        for (unsigned id = 0; id < size; id++) {
            const char *candidate = raw_name(domains[d], id);
            if (candidate == NULL)
                continue;
            if (strcmp(candidate, name) == 0 ||
                (base_length(candidate) == wanted && strncmp(candidate, name, wanted) == 0)) {
                *domain = domains[d];
                *cbid = id;
                return 0;
            }
        }
    }
    return -1;
}

const void *ls_cbid_copy_host_pointer(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                      const void *params)
{
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API || params == NULL)
        return NULL;
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz:
        return ((const cuMemcpyHtoDAsync_v2_params *)params)->srcHost;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz:
        return ((const cuMemcpyDtoHAsync_v2_params *)params)->dstHost;
    default:
        return NULL;
    }
}

int ls_cbid_copy_is_device_only(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                const void *params)
{
    if (domain != CUPTI_CB_DOMAIN_RUNTIME_API || params == NULL)
        return 0;
    switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020:
        return ((const cudaMemcpyAsync_v3020_params *)params)->kind == cudaMemcpyDeviceToDevice;
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000:
        return ((const cudaMemcpyAsync_ptsz_v7000_params *)params)->kind ==
               cudaMemcpyDeviceToDevice;
    default:
        return 0;
    }
}

const char *ls_wait_class_name(ls_wait_class c)
{
    static const char *const names[LS_WAIT_CLASS_COUNT] = {
        "none", "stream", "event", "device", "copy", "copy_async", "free"};
    return (unsigned)c < LS_WAIT_CLASS_COUNT ? names[c] : "none";
}
