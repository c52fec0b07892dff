/* ls_cbids: the one table of CUPTI callback ids loopscope enables, and what
 * each one means to it.  Kept in one file so a reader sees every API call
 * loopscope listens to. */
#ifndef LS_CBIDS_H
#define LS_CBIDS_H

#include <cupti.h>
#include <stdint.h>

typedef enum {
    LS_ROLE_NONE = 0,
    LS_ROLE_LAUNCH = 1, /* puts work on a stream: kernel, copy, memset, graph */
} ls_cbid_role;

/* Role of a callback id (LS_ROLE_NONE for ids loopscope ignores).  O(1),
 * safe from any thread. */
ls_cbid_role ls_cbid_role_of(CUpti_CallbackDomain domain, CUpti_CallbackId cbid);

/* The role array of a domain (runtime or driver API), indexed by callback
 * id, and its length in *size; NULL and 0 for other domains.  Every id with
 * a role is one loopscope enables. */
const uint8_t *ls_cbid_roles(CUpti_CallbackDomain domain, unsigned *size);

#endif
