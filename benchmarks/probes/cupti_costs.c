/* cupti_costs: the host time of each CUPTI call a profile's start and stop
 * make, measured alone, to choose the cheapest order (issue 11).
 *
 * GPU work is cuMemsetD8Async on one stream (MEMSET records; no module to
 * load).  Each figure is the median of ROUNDS repetitions, in microseconds.
 * Also: whether flushing and disabling activity from a second thread while
 * the first one launches works, and what it costs the launching thread.
 *
 * Build and run on the GPU machine:
 *   gcc -O2 -std=c11 -I/usr/local/cuda/include benchmarks/probes/cupti_costs.c -o /tmp/cupti_costs \
 *       -L/usr/local/cuda/lib64 -L/usr/local/cuda/extras/CUPTI/lib64 -lcupti -lcuda -lpthread \
 *       -Wl,-rpath,/usr/local/cuda/extras/CUPTI/lib64:/usr/local/cuda/lib64
 *   /tmp/cupti_costs
 */
#define _POSIX_C_SOURCE 200809L
#include <cuda.h>
#include <cupti.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUNDS 21
#define CHECK_CU(x)                                                                    \
    do {                                                                               \
        CUresult r_ = (x);                                                             \
        if (r_ != CUDA_SUCCESS) {                                                      \
            fprintf(stderr, "%s failed: %d\n", #x, (int)r_);                           \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)
#define CHECK_CUPTI(x)                                                                 \
    do {                                                                               \
        CUptiResult r_ = (x);                                                          \
        if (r_ != CUPTI_SUCCESS) {                                                     \
            const char *s_ = "?";                                                      \
            cuptiGetResultString(r_, &s_);                                             \
            fprintf(stderr, "%s failed: %s\n", #x, s_);                                \
        }                                                                              \
    } while (0)

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

static volatile long records_seen;

static void CUPTIAPI on_request(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *size = 4 << 20;
    *buffer = aligned_alloc(8, *size);
    *max_records = 0;
}

static void CUPTIAPI on_complete(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                 size_t valid)
{
    (void)ctx, (void)stream, (void)size;
    CUpti_Activity *record = NULL;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS)
        __atomic_add_fetch(&records_seen, 1, __ATOMIC_RELAXED);
    free(buffer);
}

static void CUPTIAPI on_callback(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id,
                                 const void *data)
{
    (void)ud, (void)d, (void)id, (void)data;
}

static const CUpti_ActivityKind kinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION};
#define NKINDS 4

static CUdeviceptr scratch;
static CUstream stream;

static void launch(int n)
{
    for (int i = 0; i < n; i++)
        CHECK_CU(cuMemsetD8Async(scratch, (unsigned char)i, 256, stream));
}

static void enable_all(void)
{
    for (int k = 0; k < NKINDS; k++)
        CHECK_CUPTI(cuptiActivityEnable(kinds[k]));
}

static void disable_all(void)
{
    for (int k = 0; k < NKINDS; k++)
        CHECK_CUPTI(cuptiActivityDisable(kinds[k]));
}

/* Host time of one launch call, median of many, in the current state. */
static double steady_launch_us(void)
{
    double v[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now_us();
        launch(1000);
        v[r] = (now_us() - t0) / 1000.0;
        CHECK_CU(cuCtxSynchronize());
    }
    return median(v, ROUNDS);
}

static volatile int launching;

static void *flusher(void *arg)
{
    int disable = *(int *)arg;
    struct timespec pause = {0, 2000000};
    nanosleep(&pause, NULL);
    double t0 = now_us();
    CHECK_CUPTI(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    double t1 = now_us();
    if (disable)
        disable_all();
    double t2 = now_us();
    printf("  second thread while launching: flush %.1f us%s", t1 - t0, disable ? "" : "\n");
    if (disable)
        printf(", disable %.1f us\n", t2 - t1);
    return NULL;
}

int main(void)
{
    double v[ROUNDS], w[ROUNDS], x[ROUNDS], y[ROUNDS];
    CUdevice dev;
    CUcontext ctx;
    CHECK_CU(cuInit(0));
    CHECK_CU(cuDeviceGet(&dev, 0));
    CHECK_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK_CU(cuCtxSetCurrent(ctx));
    CHECK_CU(cuMemAlloc(&scratch, 1 << 20));
    CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    launch(100);
    CHECK_CU(cuCtxSynchronize());
    char name[128];
    CHECK_CU(cuDeviceGetName(name, sizeof name, dev));
    printf("device %s\n", name);

    double t0 = now_us();
    CHECK_CUPTI(cuptiActivityRegisterCallbacks(on_request, on_complete));
    printf("cuptiActivityRegisterCallbacks (first CUPTI call): %.1f us\n", now_us() - t0);
    printf("launch call, nothing enabled: %.3f us\n", steady_launch_us());

    /* Enable, first launch, flush, disable: each profile's cycle today. */
    for (int r = 0; r < ROUNDS; r++) {
        double a = now_us();
        enable_all();
        double b = now_us();
        launch(1);
        double c = now_us();
        launch(1);
        double d = now_us();
        CHECK_CU(cuCtxSynchronize());
        double e = now_us();
        disable_all();
        double f = now_us();
        CHECK_CUPTI(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
        double g = now_us();
        v[r] = b - a;
        w[r] = c - b;
        x[r] = f - e;
        y[r] = g - f;
        (void)d;
    }
    printf("per profile cycle: enable 4 kinds %.1f us, first launch after enable %.1f us, "
           "disable %.1f us, forced flush after disable %.1f us\n",
           median(v, ROUNDS), median(w, ROUNDS), median(x, ROUNDS), median(y, ROUNDS));

    /* Kept enabled: the first launch of a "profile" costs what a later one does. */
    enable_all();
    launch(10);
    CHECK_CU(cuCtxSynchronize());
    for (int r = 0; r < ROUNDS; r++) {
        double a = now_us();
        launch(1);
        double b = now_us();
        CHECK_CU(cuCtxSynchronize());
        double c = now_us();
        CHECK_CUPTI(cuptiActivityFlushAll(0));
        double d = now_us();
        CHECK_CUPTI(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
        double e = now_us();
        v[r] = b - a;
        w[r] = c - b;
        x[r] = d - c;
        y[r] = e - d;
    }
    printf("kept enabled: first launch %.1f us, idle cuCtxSynchronize %.1f us, flush(0) %.1f us, "
           "forced flush %.1f us\n",
           median(v, ROUNDS), median(w, ROUNDS), median(x, ROUNDS), median(y, ROUNDS));
    printf("launch call, activity enabled: %.3f us\n", steady_launch_us());

    /* Forced flush with many records pending (1,000 memsets). */
    for (int r = 0; r < ROUNDS; r++) {
        launch(1000);
        CHECK_CU(cuCtxSynchronize());
        double a = now_us();
        CHECK_CUPTI(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
        v[r] = now_us() - a;
    }
    printf("forced flush with 1,000 records pending: %.1f us (records seen so far %ld)\n",
           median(v, ROUNDS), records_seen);

    /* Callbacks: subscribe, enable launch + sync ids, disable, unsubscribe. */
    static const CUpti_CallbackId runtime_ids[] = {
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
    };
    static const CUpti_CallbackId driver_ids[] = {
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,     CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
        CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async,    CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,
        CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2,    CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2,
    };
    double s[ROUNDS], en[ROUNDS], dis[ROUNDS], un[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        CUpti_SubscriberHandle sub;
        double a = now_us();
        CHECK_CUPTI(cuptiSubscribe(&sub, on_callback, NULL));
        double b = now_us();
        for (size_t i = 0; i < sizeof runtime_ids / sizeof *runtime_ids; i++)
            CHECK_CUPTI(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, runtime_ids[i]));
        for (size_t i = 0; i < sizeof driver_ids / sizeof *driver_ids; i++)
            CHECK_CUPTI(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, driver_ids[i]));
        double c = now_us();
        for (size_t i = 0; i < sizeof runtime_ids / sizeof *runtime_ids; i++)
            CHECK_CUPTI(cuptiEnableCallback(0, sub, CUPTI_CB_DOMAIN_RUNTIME_API, runtime_ids[i]));
        for (size_t i = 0; i < sizeof driver_ids / sizeof *driver_ids; i++)
            CHECK_CUPTI(cuptiEnableCallback(0, sub, CUPTI_CB_DOMAIN_DRIVER_API, driver_ids[i]));
        double d = now_us();
        CHECK_CUPTI(cuptiUnsubscribe(sub));
        double e = now_us();
        s[r] = b - a;
        en[r] = (c - b) / 16.0;
        dis[r] = (d - c) / 16.0;
        un[r] = e - d;
    }
    printf("callbacks: subscribe %.1f us, enable one id %.2f us, disable one id %.2f us, "
           "unsubscribe %.1f us\n",
           median(s, ROUNDS), median(en, ROUNDS), median(dis, ROUNDS), median(un, ROUNDS));

    /* Launch cost with the callbacks subscribed and enabled on the launch id. */
    {
        CUpti_SubscriberHandle sub;
        CHECK_CUPTI(cuptiSubscribe(&sub, on_callback, NULL));
        CHECK_CUPTI(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API,
                                        CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async));
        printf("launch call, activity + a callback on it: %.3f us\n", steady_launch_us());
        CHECK_CUPTI(cuptiEnableCallback(0, sub, CUPTI_CB_DOMAIN_DRIVER_API,
                                        CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async));
        printf("launch call, activity, callback disabled but subscribed: %.3f us\n",
               steady_launch_us());
        CHECK_CUPTI(cuptiUnsubscribe(sub));
    }

    /* Flush and disable from a second thread while this one launches. */
    for (int disable = 0; disable <= 1; disable++) {
        long before = records_seen;
        pthread_t t;
        pthread_create(&t, NULL, flusher, &disable);
        double a = now_us();
        launch(20000);
        double b = now_us();
        pthread_join(t, NULL);
        CHECK_CU(cuCtxSynchronize());
        CHECK_CUPTI(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
        printf("  launching thread: %.3f us a launch over 20,000; records %ld\n",
               (b - a) / 20000.0, records_seen - before);
    }
    printf("launch call after the second thread disabled activity: %.3f us\n",
           steady_launch_us());
    enable_all();
    t0 = now_us();
    launch(1);
    printf("first launch after enabling again: %.1f us\n", now_us() - t0);
    CHECK_CU(cuCtxSynchronize());
    disable_all();
    CHECK_CUPTI(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    printf("done, records seen %ld\n", records_seen);
    return 0;
}
