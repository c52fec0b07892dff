/* ls_nvtx: NVTX range push/pop, so Nsight Systems (or any NVTX tool) shows
 * the same steps and ranges.  The only file that includes the NVTX headers.
 * Without an NVTX tool attached every call is a cheap no-op.
 *
 * Names reach the tool two ways.  A registered string handle is cheapest
 * for the tool, but NVTX cannot unregister one: each lives in the tool
 * until the process ends.  So only long-lived names (the cached objects of
 * loopscope.range(name)) are registered, at most LS_NVTX_MAX_REGISTERED of
 * them per process; every other push (steps "Step_<i>", per-step layer
 * names, names past the cap) carries its text as an ASCII message, which
 * the tool copies.  The tool shows the same text either way. */
#ifndef LS_NVTX_H
#define LS_NVTX_H

#include <stdint.h>

#define LS_NVTX_MAX_REGISTERED 16384

/* A registered-string handle for `text` in the default domain, or NULL when
 * no tool is attached or the cap is reached (then push the text). */
void *ls_nvtx_register(const char *text);

/* Pushes a range on the calling thread's stack of the default domain:
 * by `handle` when not NULL, else by `text`. */
void ls_nvtx_push(const char *text, void *handle);

/* Pops the calling thread's innermost range of the default domain. */
void ls_nvtx_pop(void);

/* Strings registered so far (at most LS_NVTX_MAX_REGISTERED). */
uint32_t ls_nvtx_registered(void);

#endif
