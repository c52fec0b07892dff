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

typedef struct {
    CUpti_CallbackDomain domain;
    CUpti_CallbackId cbid;
    ls_cbid_role role;
} ls_cbid_entry;

extern const ls_cbid_entry ls_cbid_table[];
extern const unsigned ls_cbid_table_size;

/* Role of a callback id (LS_ROLE_NONE for ids not in the table).  O(1). */
ls_cbid_role ls_cbid_role_of(CUpti_CallbackDomain domain, CUpti_CallbackId cbid);

#endif
