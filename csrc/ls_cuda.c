/* ls_cuda: see ls_cuda.h. */
#define _GNU_SOURCE
#include "ls_cuda.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>

typedef int (*ls_cu_ctx_get_current)(void **);
typedef int (*ls_cu_ctx_synchronize)(void);
typedef int (*ls_cu_device_get)(int *, int);
typedef int (*ls_cu_device_get_name)(char *, int, int);

/* NOLOAD: if nothing in the process uses CUDA there is nothing to wait for. */
static void *driver(void)
{
    return dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
}

int ls_cuda_sync_current_context(void)
{
    void *lib = driver();
    if (lib == NULL)
        return 0;
    ls_cu_ctx_get_current get_current;
    ls_cu_ctx_synchronize synchronize;
    *(void **)(&get_current) = dlsym(lib, "cuCtxGetCurrent");
    *(void **)(&synchronize) = dlsym(lib, "cuCtxSynchronize");
    int result = 0;
    void *ctx = NULL;
    if (get_current != NULL && synchronize != NULL && get_current(&ctx) == 0 && ctx != NULL)
        result = synchronize() == 0 ? 1 : -1;
    dlclose(lib);
    return result;
}

int ls_cuda_device_name(int ordinal, char *buf, size_t size)
{
    if (size > 0)
        buf[0] = '\0';
    void *lib = driver();
    if (lib == NULL)
        return -1;
    ls_cu_device_get device_get;
    ls_cu_device_get_name get_name;
    *(void **)(&device_get) = dlsym(lib, "cuDeviceGet");
    *(void **)(&get_name) = dlsym(lib, "cuDeviceGetName");
    int device = 0, result = -1;
    if (device_get != NULL && get_name != NULL && device_get(&device, ordinal) == 0 &&
        get_name(buf, (int)size, device) == 0)
        result = 0;
    dlclose(lib);
    return result;
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
        void *lib = driver();
        if (lib == NULL)
            return -1; /* no driver yet: ask again next time */
        ls_cu_device_get device_get;
        int (*get_attribute)(int *, int, int);
        *(void **)(&device_get) = dlsym(lib, "cuDeviceGet");
        *(void **)(&get_attribute) = dlsym(lib, "cuDeviceGetAttribute");
        int device = 0, v[5] = {0, 0, 0, 0, 0};
        static const int which[5] = {SMS, THREADS, BLOCKS, REGISTERS, SHARED};
        int ok = device_get != NULL && get_attribute != NULL && device_get(&device, ordinal) == 0;
        for (int i = 0; ok && i < 5; i++)
            if (get_attribute(&v[i], which[i], device) != 0 || v[i] < 0)
                v[i] = 0; /* an attribute this driver lacks stays unknown */
        ok = ok && v[0] > 0 && v[1] > 0;
        known[ordinal] = (ls_device_facts){(uint32_t)ordinal, (uint32_t)v[0], (uint32_t)v[1],
                                           (uint32_t)v[2], (uint32_t)v[3], (uint32_t)v[4]};
        asked[ordinal] = ok ? 1 : -1;
        dlclose(lib);
    }
    if (asked[ordinal] != 1)
        return -1;
    *out = known[ordinal];
    return 0;
}

int ls_cuda_driver_present(void)
{
    return dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) != NULL;
}

int ls_cuda_warm_up(void)
{
    static void *scratch_ctx;
    static unsigned long long scratch; /* CUdeviceptr, kept for the process */
    void *lib = driver();
    if (lib == NULL)
        return 0;
    ls_cu_ctx_get_current get_current;
    int (*mem_alloc)(unsigned long long *, size_t);
    int (*memset_d8)(unsigned long long, unsigned char, size_t);
    *(void **)(&get_current) = dlsym(lib, "cuCtxGetCurrent");
    *(void **)(&mem_alloc) = dlsym(lib, "cuMemAlloc_v2");
    *(void **)(&memset_d8) = dlsym(lib, "cuMemsetD8_v2");
    void *ctx = NULL;
    int result = -1;
    if (get_current && mem_alloc && memset_d8 && get_current(&ctx) == 0) {
        if (ctx != NULL && ctx != scratch_ctx && mem_alloc(&scratch, 1) == 0)
            scratch_ctx = ctx;
        if (ctx == NULL)
            result = 0;
        else if (ctx == scratch_ctx && memset_d8(scratch, 0, 1) == 0)
            result = ls_cuda_sync_current_context();
    }
    dlclose(lib);
    return result;
}

typedef int (*ls_cu_pointer_get_attribute)(void *, int, unsigned long long);
static ls_cu_pointer_get_attribute pointer_get_attribute;

int ls_cuda_prepare_pointer_query(void)
{
    if (pointer_get_attribute != NULL)
        return 0;
    void *lib = driver();
    if (lib == NULL)
        return -1;
    *(void **)(&pointer_get_attribute) = dlsym(lib, "cuPointerGetAttribute");
    return pointer_get_attribute != NULL ? 0 : -1;
}

int ls_cuda_host_is_pageable(const void *p)
{
    enum { MEMORY_TYPE = 2, SUCCESS = 0, INVALID_VALUE = 1 }; /* CU_POINTER_ATTRIBUTE_MEMORY_TYPE */
    if (pointer_get_attribute == NULL || p == NULL)
        return -1;
    unsigned int type = 0;
    int status = pointer_get_attribute(&type, MEMORY_TYPE, (unsigned long long)(uintptr_t)p);
    if (status == SUCCESS)
        return 0;
    return status == INVALID_VALUE ? 1 : -1; /* unknown to CUDA: plain pageable memory */
}

int ls_cuda_current_device(int *ordinal)
{
    void *lib = driver();
    if (lib == NULL)
        return 0;
    ls_cu_ctx_get_current get_current;
    int (*get_device)(int *);
    *(void **)(&get_current) = dlsym(lib, "cuCtxGetCurrent");
    *(void **)(&get_device) = dlsym(lib, "cuCtxGetDevice");
    void *ctx = NULL;
    int result = -1;
    if (get_current && get_device && get_current(&ctx) == 0)
        result = ctx == NULL ? 0 : get_device(ordinal) == 0 ? 1 : -1;
    dlclose(lib);
    return result;
}
