/* ls_cuda: see ls_cuda.h. */
#define _GNU_SOURCE
#include "ls_cuda.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

typedef unsigned long long ls_cu_ptr; /* CUdeviceptr */

/* The driver entry points, filled once the driver is found loaded. */
static struct {
    int (*ctx_get_current)(void **);
    int (*ctx_set_current)(void *);
    int (*ctx_synchronize)(void);
    int (*ctx_get_device)(int *);
    int (*device_get)(int *, int);
    int (*device_get_name)(char *, int, int);
    int (*device_get_attribute)(int *, int, int);
    int (*mem_alloc)(ls_cu_ptr *, size_t);
    int (*memset_d8_async)(ls_cu_ptr, unsigned char, size_t, void *);
    int (*stream_create)(void **, unsigned int);
    int (*stream_synchronize)(void *);
    int (*pointer_get_attribute)(void *, int, ls_cu_ptr);
    int (*driver_get_version)(int *);
    int (*device_get_count)(int *);
    int (*primary_ctx_get_state)(int, unsigned int *, int *);
} cu;
static atomic_int resolved;
static pthread_mutex_t resolve_lock = PTHREAD_MUTEX_INITIALIZER;

/* 0 once the symbols are known; -1 while no driver is loaded.  NOLOAD: if
 * nothing in the process uses CUDA there is nothing to ask it. */
static int resolve(void)
{
    if (atomic_load_explicit(&resolved, memory_order_acquire))
        return 0;
    pthread_mutex_lock(&resolve_lock);
    if (!atomic_load_explicit(&resolved, memory_order_relaxed)) {
        /* The handle is kept: the driver stays loaded for the process anyway. */
        void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
        if (lib != NULL) {
#define LS_SYM(field, name) *(void **)(&cu.field) = dlsym(lib, name)
            LS_SYM(ctx_get_current, "cuCtxGetCurrent");
            LS_SYM(ctx_set_current, "cuCtxSetCurrent");
            LS_SYM(ctx_synchronize, "cuCtxSynchronize");
            LS_SYM(ctx_get_device, "cuCtxGetDevice");
            LS_SYM(device_get, "cuDeviceGet");
            LS_SYM(device_get_name, "cuDeviceGetName");
            LS_SYM(device_get_attribute, "cuDeviceGetAttribute");
            LS_SYM(mem_alloc, "cuMemAlloc_v2");
            LS_SYM(memset_d8_async, "cuMemsetD8Async");
            LS_SYM(stream_create, "cuStreamCreate");
            LS_SYM(stream_synchronize, "cuStreamSynchronize");
            LS_SYM(pointer_get_attribute, "cuPointerGetAttribute");
            LS_SYM(driver_get_version, "cuDriverGetVersion");
            LS_SYM(device_get_count, "cuDeviceGetCount");
            LS_SYM(primary_ctx_get_state, "cuDevicePrimaryCtxGetState");
#undef LS_SYM
            atomic_store_explicit(&resolved, 1, memory_order_release);
        }
    }
    pthread_mutex_unlock(&resolve_lock);
    return atomic_load_explicit(&resolved, memory_order_acquire) ? 0 : -1;
}

void *ls_cuda_current_context(void)
{
    void *ctx = NULL;
    if (resolve() != 0 || cu.ctx_get_current == NULL || cu.ctx_get_current(&ctx) != 0)
        return NULL;
    return ctx;
}

int ls_cuda_use_context(void *context)
{
    if (context == NULL || resolve() != 0 || cu.ctx_set_current == NULL)
        return 0;
    return cu.ctx_set_current(context) == 0 ? 1 : -1;
}

int ls_cuda_sync_current_context(void)
{
    if (ls_cuda_current_context() == NULL || cu.ctx_synchronize == NULL)
        return 0;
    return cu.ctx_synchronize() == 0 ? 1 : -1;
}

int ls_cuda_sync_context(void *context)
{
    int used = ls_cuda_use_context(context);
    if (used <= 0)
        return used;
    return cu.ctx_synchronize != NULL && cu.ctx_synchronize() == 0 ? 1 : -1;
}

int ls_cuda_context_exists(void)
{
    if (resolve() != 0)
        return 0; /* the driver is not even loaded: no context can exist */
    if (ls_cuda_current_context() != NULL)
        return 1;
    int count = 0;
    if (cu.device_get_count == NULL || cu.primary_ctx_get_state == NULL)
        return -1;
    int rc = cu.device_get_count(&count);
    if (rc == 3) /* CUDA_ERROR_NOT_INITIALIZED: cuInit never ran, so no context */
        return 0;
    if (rc != 0)
        return -1;
    for (int ordinal = 0; ordinal < count; ordinal++) {
        int device = 0, active = 0;
        unsigned int flags = 0;
        if (cu.device_get == NULL || cu.device_get(&device, ordinal) != 0 ||
            cu.primary_ctx_get_state(device, &flags, &active) != 0)
            return -1;
        if (active)
            return 1;
    }
    return 0;
}

int ls_cuda_driver_version(void)
{
    int version = 0;
    if (resolve() != 0 || cu.driver_get_version == NULL || cu.driver_get_version(&version) != 0)
        return 0;
    return version;
}

int ls_cuda_device_name(int ordinal, char *buf, size_t size)
{
    if (size > 0)
        buf[0] = '\0';
    int device = 0;
    if (resolve() != 0 || cu.device_get == NULL || cu.device_get_name == NULL ||
        cu.device_get(&device, ordinal) != 0 || cu.device_get_name(buf, (int)size, device) != 0)
        return -1;
    return 0;
}

int ls_cuda_device_facts(int ordinal, ls_device_facts *out)
{
    /* CUdevice_attribute values (cuda.h), in the order of the fields below */
    enum { SMS = 16, THREADS = 39, BLOCKS = 106, REGISTERS = 82, SHARED = 81 };
    static ls_device_facts known[LS_MAX_DEVICE_FACTS];
    static int asked[LS_MAX_DEVICE_FACTS]; /* 1 known, -1 the driver did not answer */
    if (ordinal < 0 || ordinal >= LS_MAX_DEVICE_FACTS)
        return -1;
    if (asked[ordinal] == 0) {
        if (resolve() != 0)
            return -1; /* no driver yet: ask again next time */
        int device = 0, v[5] = {0, 0, 0, 0, 0};
        static const int which[5] = {SMS, THREADS, BLOCKS, REGISTERS, SHARED};
        int ok = cu.device_get != NULL && cu.device_get_attribute != NULL &&
                 cu.device_get(&device, ordinal) == 0;
        for (int i = 0; ok && i < 5; i++)
            if (cu.device_get_attribute(&v[i], which[i], device) != 0 || v[i] < 0)
                v[i] = 0; /* an attribute this driver lacks stays unknown */
        ok = ok && v[0] > 0 && v[1] > 0;
        known[ordinal] = (ls_device_facts){(uint32_t)ordinal, (uint32_t)v[0], (uint32_t)v[1],
                                           (uint32_t)v[2], (uint32_t)v[3], (uint32_t)v[4]};
        asked[ordinal] = ok ? 1 : -1;
    }
    if (asked[ordinal] != 1)
        return -1;
    *out = known[ordinal];
    return 0;
}

int ls_cuda_driver_present(void)
{
    /* Asked at every start; a machine does not gain or lose its driver
     * while a process runs, and a failing dlopen searches the disk. */
    static atomic_int known; /* 0 not asked yet, 1 present, 2 absent */
    int answer = atomic_load(&known);
    if (answer == 0) {
        answer = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) != NULL ? 1 : 2;
        atomic_store(&known, answer);
    }
    return answer == 1;
}

int ls_cuda_warm_up(void)
{
    /* One scratch byte and one stream, for the last context warmed up. */
    static void *scratch_ctx;
    static ls_cu_ptr scratch;
    static void *stream;
    enum { NON_BLOCKING = 1 }; /* CU_STREAM_NON_BLOCKING */
    void *ctx = ls_cuda_current_context();
    if (ctx == NULL)
        return 0;
    if (cu.mem_alloc == NULL || cu.memset_d8_async == NULL || cu.stream_create == NULL ||
        cu.stream_synchronize == NULL)
        return -1;
    if (ctx != scratch_ctx) {
        if (cu.mem_alloc(&scratch, 1) != 0 || cu.stream_create(&stream, NON_BLOCKING) != 0)
            return -1;
        scratch_ctx = ctx;
    }
    if (cu.memset_d8_async(scratch, 0, 1, stream) != 0)
        return -1;
    return cu.stream_synchronize(stream) == 0 ? 1 : -1;
}

int ls_cuda_prepare_pointer_query(void)
{
    return resolve() == 0 && cu.pointer_get_attribute != NULL ? 0 : -1;
}

int ls_cuda_host_is_pageable(const void *p)
{
    enum { MEMORY_TYPE = 2, SUCCESS = 0, INVALID_VALUE = 1 }; /* CU_POINTER_ATTRIBUTE_MEMORY_TYPE */
    if (!atomic_load_explicit(&resolved, memory_order_acquire) ||
        cu.pointer_get_attribute == NULL || p == NULL)
        return -1;
    unsigned int type = 0;
    int status = cu.pointer_get_attribute(&type, MEMORY_TYPE, (ls_cu_ptr)(uintptr_t)p);
    if (status == SUCCESS)
        return 0;
    return status == INVALID_VALUE ? 1 : -1; /* unknown to CUDA: plain pageable memory */
}

int ls_cuda_current_device(int *ordinal)
{
    if (ls_cuda_current_context() == NULL)
        return 0;
    if (cu.ctx_get_device == NULL)
        return -1;
    return cu.ctx_get_device(ordinal) == 0 ? 1 : -1;
}
