/* ls_nvtx: NVTX range push/pop for interned names, so Nsight Systems shows
 * the same steps and ranges.  The only file that includes the NVTX headers.
 * Without an NVTX tool attached every call is a cheap no-op. */
#ifndef LS_NVTX_H
#define LS_NVTX_H

#include <stdint.h>

/* Registers the interned name `name_id` with NVTX once (no-op afterwards). */
void ls_nvtx_register(uint32_t name_id);

/* Pushes a range named by `name_id` on the calling thread's NVTX stack. */
void ls_nvtx_push(uint32_t name_id);

/* Pops the calling thread's innermost NVTX range. */
void ls_nvtx_pop(void);

#endif
