/* ls_cupti: CUPTI opened at run time with dlopen, and the one status check.
 *
 * The extension never links libcupti: importing loopscope must work on a
 * machine with no GPU.  ls_cupti_load() fills a table of function pointers
 * from the first library that opens (the copy torch already loaded is tried
 * first, so two CUPTI copies never meet in one process).
 */
#ifndef LS_CUPTI_H
#define LS_CUPTI_H

#include <cupti.h>
#include <stddef.h>

typedef struct {
    CUptiResult (*GetResultString)(CUptiResult, const char **);
    CUptiResult (*GetTimestamp)(uint64_t *);
    CUptiResult (*GetVersion)(uint32_t *);
    CUptiResult (*ActivityRegisterCallbacks)(CUpti_BuffersCallbackRequestFunc,
                                             CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*ActivityEnable)(CUpti_ActivityKind);
    CUptiResult (*ActivityDisable)(CUpti_ActivityKind);
    CUptiResult (*ActivityFlushAll)(uint32_t);
    CUptiResult (*ActivityGetNextRecord)(uint8_t *, size_t, CUpti_Activity **);
    CUptiResult (*ActivityGetNumDroppedRecords)(CUcontext, uint32_t, size_t *);
    CUptiResult (*Subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
    /* Optional (CUPTI >= 12.x): tells the name of a tool that already owns CUPTI. */
    CUptiResult (*Subscribe_v2)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *,
                                CUpti_SubscriberParams *);
    CUptiResult (*Unsubscribe)(CUpti_SubscriberHandle);
    CUptiResult (*EnableCallback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                  CUpti_CallbackId);
    CUptiResult (*EnableDomain)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain);
} ls_cupti_api;

/* The table; valid only after ls_cupti_load() returned 0. */
extern ls_cupti_api ls_cupti;

/* Opens CUPTI.  Tries an already-loaded "libcupti.so.13", then each of the
 * `n` candidate paths in order, then the soname through the normal search.
 * Returns 0 on success (idempotent), -1 on failure with a reason readable
 * through ls_cupti_error().  Never raises, never exits. */
int ls_cupti_load(const char *const *candidates, size_t n);

/* 1 once the table is filled. */
int ls_cupti_loaded(void);

/* Path of the library that was opened, or "" before a successful load. */
const char *ls_cupti_path(void);

/* Records a failed CUPTI call: "cuptiX failed: CUPTI_ERROR_...: text".
 * Returns the status unchanged so callers can branch on it. */
CUptiResult ls_cupti_report(CUptiResult status, const char *call);

/* The last failure message (load or call), "" when none. */
const char *ls_cupti_error(void);
void ls_cupti_clear_error(void);

/* The one check for every CUPTI call: evaluates to the CUptiResult, records
 * a readable message on failure, never exits.  Usage:
 *     if (LS_CUPTI_CHECK(ActivityEnable(kind)) != CUPTI_SUCCESS) goto fail;   */
#define LS_CUPTI_CHECK(call_expr) \
    ls_cupti_report(ls_cupti.call_expr, "cupti" #call_expr)

#endif
