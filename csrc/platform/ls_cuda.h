/* ls_cuda: the few CUDA driver calls loopscope needs, found with dlsym in the
 * driver the process has already loaded (never loads it, never links it).
 * The symbols are looked up once, the first time the driver is found
 * loaded; every function is safe from any thread. */
#ifndef LS_CUDA_H
#define LS_CUDA_H

#include "ls_records.h"

#include <stddef.h>

/* Waits for the work of the calling thread's current CUDA context.
 * Returns 1 if it synchronised, 0 if there was nothing to do (no driver
 * loaded, no current context), -1 if the driver call failed. */
int ls_cuda_sync_current_context(void);

/* The calling thread's current CUDA context (a CUcontext), NULL when none
 * or no driver is loaded. */
void *ls_cuda_current_context(void);

/* Makes `context` current on the calling thread (loopscope's worker works
 * on the user's context).  1 when done, 0 for a NULL context or no driver,
 * -1 when the driver refused. */
int ls_cuda_use_context(void *context);

/* Makes `context` current on the calling thread and waits for its work:
 * the end of a profile on loopscope's worker.  1, 0 or -1 as above. */
int ls_cuda_sync_context(void *context);

/* Writes the name of device `ordinal` into buf ("" if unknown).  Returns 0 on
 * success, -1 when the driver is not loaded or the call failed. */
int ls_cuda_device_name(int ordinal, char *buf, size_t size);

/* Whether the process has a CUDA context yet: 1 when the calling thread
 * has a current one or a device's primary context is active, 0 when none
 * can exist (the driver is not loaded, or never initialised), -1 when the
 * driver cannot tell.  Contexts made with cuCtxCreate on other threads are
 * not seen (the graph-level mode's check, ls_graphs, says so). */
int ls_cuda_context_exists(void);

/* The driver's CUDA version (cuDriverGetVersion: 13000 for 13.0), 0 when
 * no driver is loaded or it cannot tell. */
int ls_cuda_driver_version(void);

/* Fills *out with what the driver says of device `ordinal`: SM count,
 * threads, blocks, registers and shared memory per SM.  Each device is
 * asked once per process (call with the GIL, never from a callback).
 * Returns 0, or -1 when the driver is not loaded or did not answer (out is
 * then left as it was). */
int ls_cuda_device_facts(int ordinal, ls_device_facts *out);

/* Runs a 1-byte memset on a stream of loopscope's own (non-blocking, so it
 * does not wait behind the user's queued work) on the current context's
 * device, and waits for that stream only.  CUPTI sets tracing up lazily at
 * the first GPU operation after activity is enabled (measured: 150-1500 us
 * on an H200), which would otherwise show up as a fake bubble in the
 * user's first step.  Returns 1 when it ran, 0 when there is no current
 * context, -1 when a driver call failed. */
int ls_cuda_warm_up(void);

/* The device of the calling thread's current CUDA context, in *ordinal.
 * Returns 1 when found, 0 when no context is current (or the driver is not
 * loaded), -1 when a driver call failed. */
int ls_cuda_current_device(int *ordinal);

/* 1 when the NVIDIA driver library can be opened (it stays loaded, as CUPTI
 * would load it anyway), 0 when the machine has no NVIDIA driver.  Asked
 * once per process. */
int ls_cuda_driver_present(void);

/* Looks cuPointerGetAttribute up once (call with the GIL, before a callback
 * may use ls_cuda_host_is_pageable).  0 when found, -1 when the driver is not
 * loaded. */
int ls_cuda_prepare_pointer_query(void);

/* Whether host memory at `p` is pageable (not pinned or registered with
 * CUDA): 1 pageable, 0 pinned or device memory, -1 unknown (not prepared, or
 * the driver answered otherwise).  One driver call, no allocation: usable
 * from a CUPTI callback. */
int ls_cuda_host_is_pageable(const void *p);

#endif
