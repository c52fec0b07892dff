/* ls_cbids: the one table of CUPTI callback ids loopscope enables, and what
 * each one means to it.  Kept in one file so a reader sees every API call
 * loopscope listens to: launch calls (for gap causes and steps) and calls
 * that can make the host wait for the GPU (implicit syncs). */
#ifndef LS_CBIDS_H
#define LS_CBIDS_H

#include <cupti.h>
#include <stdint.h>

/* How a call can block the host.  Stored in bits 1..3 of a role. */
typedef enum {
    LS_WAIT_NONE = 0,
    LS_WAIT_STREAM = 1,     /* cudaStreamSynchronize, cuStreamSynchronize */
    LS_WAIT_EVENT = 2,      /* cudaEventSynchronize, cuEventSynchronize */
    LS_WAIT_DEVICE = 3,     /* cudaDeviceSynchronize, cuCtxSynchronize */
    LS_WAIT_COPY = 4,       /* synchronous copy: blocks unless device to device */
    LS_WAIT_COPY_ASYNC = 5, /* async copy: blocks only when host memory is pageable */
    LS_WAIT_FREE = 6,       /* cudaFree / cuMemFree: waits for the whole device */
    LS_WAIT_CLASS_COUNT = 7
} ls_wait_class;

enum {
    LS_ROLE_LAUNCH = 1,          /* the call puts work on a stream */
    LS_ROLE_MEMORY = 16,         /* it allocates or frees memory: recorded with its stack,
                                    like a call that waits (a CUDA graph capture refuses it) */
    LS_ROLE_GRAPH = 32,          /* it replays a CUDA graph */
    LS_ROLE_STREAM_ORDERED = 64, /* a memory call ordered on a stream (cudaMallocAsync):
                                    a capture takes it as a graph memory node */
};

#define LS_ROLE_WAIT_CLASS(role) ((ls_wait_class)(((role) >> 1) & 7))

/* Role flags of a callback id: LS_ROLE_* | (ls_wait_class << 1); 0 for ids
 * loopscope ignores.  O(1), safe from any thread. */
uint8_t ls_cbid_role_of(CUpti_CallbackDomain domain, CUpti_CallbackId cbid);

/* The role array of a domain (runtime or driver API), indexed by callback
 * id, and its length in *size; NULL and 0 for other domains.  Every id with
 * a role is one loopscope enables. */
const uint8_t *ls_cbid_roles(CUpti_CallbackDomain domain, unsigned *size);

/* The role of an API record's call: domain 0 runtime, 1 driver (as
 * ls_api.domain).  0 for ids loopscope ignores. */
uint8_t ls_cbid_role_of_record(uint32_t domain, uint32_t cbid);

/* The API name of a callback id without CUPTI's version suffix
 * ("cudaStreamSynchronize"), or NULL for ids not in the table. */
const char *ls_cbid_name(CUpti_CallbackDomain domain, CUpti_CallbackId cbid);

/* Finds a callback id of the table by API name, with or without the version
 * suffix ("cudaStreamSynchronize", "cuMemcpyDtoHAsync_v2"), or by the
 * name of the HIP runtime call that does the same ("hipStreamSynchronize"
 * finds cudaStreamSynchronize's id: ROCm traces read like CUDA ones).  0
 * and the id, or -1 when the table has no such call. */
int ls_cbid_find(const char *name, CUpti_CallbackDomain *domain, CUpti_CallbackId *cbid);

/* The HIP alias of an API name: a small number > 0 when ls_cbid_find reads
 * `name` as a HIP call, 0 otherwise; ls_cbid_alias_name turns it back into
 * the HIP name (NULL for 0 or an unknown number), so a ROCm trace's calls
 * keep their own names in the summary and the export.  A per-thread
 * variant ("hipStreamSynchronize_spt") is its call's alias, named without
 * the suffix. */
uint8_t ls_cbid_alias_of(const char *name);
const char *ls_cbid_alias_name(uint32_t alias);

/* The host pointer of an async driver copy between host and device
 * (cuMemcpyHtoDAsync / cuMemcpyDtoHAsync, which the runtime's
 * cudaMemcpyAsync also goes through), read from its callback parameters;
 * NULL for other calls. */
const void *ls_cbid_copy_host_pointer(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                      const void *params);

/* 1 when a runtime async copy is marked device to device by its caller
 * (cudaMemcpyAsync with cudaMemcpyDeviceToDevice, as torch's copy_ between
 * device tensors): it never waits, so no stack is captured for it. */
int ls_cbid_copy_is_device_only(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                const void *params);

/* The wait class as a word: "stream", "event", "device", "copy",
 * "copy_async", "free", or "none". */
const char *ls_wait_class_name(ls_wait_class c);

#endif
