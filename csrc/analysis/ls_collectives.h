/* ls_collectives: which GPU kernels are collective communication (moving
 * data between GPUs) rather than compute, from the kernel's name, in pure
 * C.  The name may be raw (mangled, as CUPTI gives it) or demangled (as a
 * trace file may).
 *
 * Communication: a kernel whose identifier (after an Itanium mangling
 * prefix such as "_Z40" or "_ZN4") starts with "nccl" (NCCL's
 * ncclDevKernel_* / ncclKernel_*), "nvshmem" or "rccl"; or whose name
 * contains a known collective family: "cross_device_reduce" (vLLM's custom
 * all-reduce), "symmetric_memory" (torch's symmetric-memory collectives),
 * "userbuffers" (Transformer Engine) or "deep_ep" (DeepEP all-to-all). */
#ifndef LS_COLLECTIVES_H
#define LS_COLLECTIVES_H

/* 1 when `name` names a collective communication kernel, else 0 (also for
 * NULL). */
int ls_collectives_is_comm(const char *name);

#endif
