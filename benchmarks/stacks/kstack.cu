// A kernel library on whichever CUDA runtime it is built against (12 or 13),
// driven from Python with ctypes by cuda_stack.py: a streaming copy (memory
// bound), an FMA chain (compute bound), a blocking copy back (a host sync),
// and CUDA events around every kernel of a timed burst.
#include <cuda_runtime.h>

__global__ void stream_copy(const float4 *a, float4 *b, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float4 v = a[i];
        v.x *= 1.0001f; v.y *= 1.0001f; v.z *= 1.0001f; v.w *= 1.0001f;
        b[i] = v;
    }
}

__global__ void fma_chain(float *x, int n, int iters)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float a = x[i], b = a * 0.5f, c = a * 0.25f, d = a * 0.125f;
    for (int k = 0; k < iters; k++) {
        a = a * 1.0000001f + 0.5f; b = b * 0.9999999f + 0.25f;
        c = c * 1.0000002f + 0.125f; d = d * 0.9999998f + 0.0625f;
    }
    x[i] = a + b + c + d;
}

static float *a, *b, *small;
static size_t big_n, small_n;
static float host[256];
static cudaEvent_t ev[2 * 4096];

extern "C" int runtime_version(void) { int v = 0; cudaRuntimeGetVersion(&v); return v; }

extern "C" int setup(long big, long smalln)
{
    big_n = (size_t)big; small_n = (size_t)smalln;
    if (cudaMalloc(&a, big_n * sizeof(float)) || cudaMalloc(&b, big_n * sizeof(float)) ||
        cudaMalloc(&small, small_n * sizeof(float)))
        return 1;
    cudaMemset(a, 0, big_n * sizeof(float));
    cudaMemset(small, 0, small_n * sizeof(float));
    for (int i = 0; i < 2 * 4096; i++) cudaEventCreate(&ev[i]);
    return (int)cudaDeviceSynchronize();
}

// `times` streaming copies of the big buffers, back to back.
extern "C" int copies(int times)
{
    for (int t = 0; t < times; t++)
        stream_copy<<<1320, 512>>>((const float4 *)a, (float4 *)b, big_n / 4);
    return (int)cudaGetLastError();
}

// `times` FMA chains over the small buffer (no DRAM traffic to speak of).
extern "C" int fmas(int times, int iters)
{
    for (int t = 0; t < times; t++)
        fma_chain<<<(int)((small_n + 255) / 256), 256>>>(small, (int)small_n, iters);
    return (int)cudaGetLastError();
}

// One timed kernel: events before and after, slot k (k < 4096).
extern "C" int timed_fma(int k, int iters)
{
    cudaEventRecord(ev[2 * k]);
    fma_chain<<<(int)((small_n + 255) / 256), 256>>>(small, (int)small_n, iters);
    cudaEventRecord(ev[2 * k + 1]);
    return (int)cudaGetLastError();
}

// ms between event i and event j of the timed kernels' slots.
extern "C" float elapsed(int i, int j)
{
    float ms = -1.0f;
    cudaEventSynchronize(ev[j]);
    cudaEventElapsedTime(&ms, ev[i], ev[j]);
    return ms;
}

extern "C" int copy_back(void) { return (int)cudaMemcpy(host, small, sizeof host, cudaMemcpyDeviceToHost); }
extern "C" int sync_all(void) { return (int)cudaDeviceSynchronize(); }
