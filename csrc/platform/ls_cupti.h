/* ls_cupti: CUPTI opened at run time with dlopen, and the one status check.
 *
 * The extension never links libcupti: importing loopscope must work on a
 * machine with no GPU.  ls_cupti_load() fills a table of function pointers
 * from the first library that opens (the copy already in the process is
 * taken first, so two CUPTI copies never meet in one process).
 *
 * One build drives CUPTI 12 (CUDA 12.0 and newer) and CUPTI 13: the headers
 * are CUDA 13's, every record field and callback id read has the same
 * offset and value in both (tests/capture/test_cupti_stacks.py compiles the
 * check against 12.0, 12.6, 12.9 and 13 headers), and where a parameter
 * struct grew in 13, its callers pass the size the loaded version knows
 * (ls_cupti_version()).  PM sampling needs CUPTI 12.6 (API 24) or newer.
 */
#ifndef LS_CUPTI_H
#define LS_CUPTI_H

#include <cupti.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The profiler host API's parameter structs live in a C++-only header
 * (cupti_profiler_host.h includes <string>); the table names them by tag
 * only, and ls_pmconfig.cpp, which includes that header, fills them in. */
struct CUpti_Profiler_Host_Initialize_Params;
struct CUpti_Profiler_Host_Deinitialize_Params;
struct CUpti_Profiler_Host_ConfigAddMetrics_Params;
struct CUpti_Profiler_Host_GetConfigImageSize_Params;
struct CUpti_Profiler_Host_GetConfigImage_Params;
struct CUpti_Profiler_Host_GetNumOfPasses_Params;
struct CUpti_Profiler_Host_EvaluateToGpuValues_Params;

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
    CUptiResult (*ActivitySetAttribute)(CUpti_ActivityAttribute, size_t *, void *);
    CUptiResult (*Subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
    /* Optional (CUPTI >= 12.x): tells the name of a tool that already owns CUPTI. */
    CUptiResult (*Subscribe_v2)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *,
                                CUpti_SubscriberParams *);
    /* Optional: where activity records and cuptiGetTimestamp take their time. */
    CUptiResult (*ActivityRegisterTimestampCallback)(CUpti_TimestampCallbackFunc);
    CUptiResult (*Unsubscribe)(CUpti_SubscriberHandle);
    CUptiResult (*EnableCallback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                  CUpti_CallbackId);
    CUptiResult (*EnableDomain)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain);

    /* PM sampling and the profiler host API: optional.  ls_cupti_pm_missing()
     * names the first one this CUPTI lacks. */
    CUptiResult (*ProfilerInitialize)(CUpti_Profiler_Initialize_Params *);
    CUptiResult (*DeviceGetChipName)(CUpti_Device_GetChipName_Params *);
    CUptiResult (*PmSamplingEnable)(CUpti_PmSampling_Enable_Params *);
    CUptiResult (*PmSamplingDisable)(CUpti_PmSampling_Disable_Params *);
    CUptiResult (*PmSamplingGetCounterAvailability)(CUpti_PmSampling_GetCounterAvailability_Params *);
    CUptiResult (*PmSamplingSetConfig)(CUpti_PmSampling_SetConfig_Params *);
    CUptiResult (*PmSamplingStart)(CUpti_PmSampling_Start_Params *);
    CUptiResult (*PmSamplingStop)(CUpti_PmSampling_Stop_Params *);
    CUptiResult (*PmSamplingDecodeData)(CUpti_PmSampling_DecodeData_Params *);
    CUptiResult (*PmSamplingGetCounterDataSize)(CUpti_PmSampling_GetCounterDataSize_Params *);
    CUptiResult (*PmSamplingCounterDataImageInitialize)(
        CUpti_PmSampling_CounterDataImage_Initialize_Params *);
    CUptiResult (*PmSamplingGetCounterDataInfo)(CUpti_PmSampling_GetCounterDataInfo_Params *);
    CUptiResult (*PmSamplingCounterDataGetSampleInfo)(
        CUpti_PmSampling_CounterData_GetSampleInfo_Params *);
    CUptiResult (*ProfilerHostInitialize)(struct CUpti_Profiler_Host_Initialize_Params *);
    CUptiResult (*ProfilerHostDeinitialize)(struct CUpti_Profiler_Host_Deinitialize_Params *);
    CUptiResult (*ProfilerHostConfigAddMetrics)(struct CUpti_Profiler_Host_ConfigAddMetrics_Params *);
    CUptiResult (*ProfilerHostGetConfigImageSize)(
        struct CUpti_Profiler_Host_GetConfigImageSize_Params *);
    CUptiResult (*ProfilerHostGetConfigImage)(struct CUpti_Profiler_Host_GetConfigImage_Params *);
    CUptiResult (*ProfilerHostGetNumOfPasses)(struct CUpti_Profiler_Host_GetNumOfPasses_Params *);
    CUptiResult (*ProfilerHostEvaluateToGpuValues)(
        struct CUpti_Profiler_Host_EvaluateToGpuValues_Params *);
} ls_cupti_api;

/* The table; valid only after ls_cupti_load() returned 0. */
extern ls_cupti_api ls_cupti;

/* Opens CUPTI.  A CUPTI already mapped in the process (any libcupti.so*)
 * is the only one it may use: it is adopted, or the load fails saying why.
 * Otherwise each of the `n` candidates (paths, or bare sonames for the
 * loader's search) is tried in order; a candidate that does not open, lacks
 * a required symbol, is older than CUDA 12.0, or is a CUPTI 13 on a driver
 * that says it runs only CUDA 12, is closed again and the next is tried.
 * Returns 0 on success (idempotent), -1 on failure with a reason naming
 * every candidate tried, readable through ls_cupti_error().  Never raises,
 * never exits. */
int ls_cupti_load(const char *const *candidates, size_t n);

/* 1 and the path of the first libcupti.so* mapped in the process (loaded by
 * anyone), 0 and "" when there is none. */
int ls_cupti_mapped(char *path, size_t size);

/* cuptiGetVersion of the library in use (0 before a load): CUDA 12 gives
 * 18 (12.0) to 28 (12.9), CUDA 13 gives xxyyzz (130001). */
uint32_t ls_cupti_version(void);

/* The CUDA major version of a CUPTI API version: 12, 13, ...; 0 when older
 * than CUDA 12.0. */
int ls_cupti_version_major(uint32_t version);

/* How the library in use was chosen: "already loaded in this process" or
 * "candidate i of n"; "" before a load. */
const char *ls_cupti_how(void);

/* 1 once the table is filled (0 again in a process forked after that: it
 * must not call CUPTI, and ls_cupti_load says so). */
int ls_cupti_loaded(void);

/* Path of the library that was opened, or "" before a successful load. */
const char *ls_cupti_path(void);

/* Records a failed CUPTI call: "cuptiX failed: CUPTI_ERROR_...: text".
 * Returns the status unchanged so callers can branch on it. */
CUptiResult ls_cupti_report(CUptiResult status, const char *call);

/* NULL when every PM sampling / profiler host symbol was found, else the
 * name of the first missing one (CUPTI older than 12.6 has none of them). */
const char *ls_cupti_pm_missing(void);

/* Opens libnvperf_host.so and libnvperf_target.so (CUPTI's profiler back
 * end, which CUPTI itself opens by bare name) from the folder of the CUPTI
 * library in use, or failing that through the loader's search, so CUPTI
 * finds them already loaded.  Returns 0, or -1 with a sentence in `why`. */
int ls_cupti_load_nvperf(char *why, size_t why_size);

/* The calling thread's last failure message (load or call), "" when none. */
const char *ls_cupti_error(void);
void ls_cupti_clear_error(void);

/* 1 in a process forked after CUPTI was loaded in its parent. */
int ls_cupti_forked(void);

/* Records why `call` was not made in such a process; returns
 * CUPTI_ERROR_NOT_INITIALIZED. */
CUptiResult ls_cupti_refuse(const char *call);

/* The one check for every CUPTI call: evaluates to the CUptiResult, records
 * a readable message on failure, never exits.  In a process forked after
 * CUPTI was loaded, the call is not made (CUDA and CUPTI belong to the
 * parent; whatever state the parent's profile left, a call could hang or
 * crash the child): it fails with CUPTI_ERROR_NOT_INITIALIZED.  Usage:
 *     if (LS_CUPTI_CHECK(ActivityEnable(kind)) != CUPTI_SUCCESS) goto fail;   */
#define LS_CUPTI_CHECK(call_expr)                         \
    (ls_cupti_forked() ? ls_cupti_refuse("cupti" #call_expr) \
                       : ls_cupti_report(ls_cupti.call_expr, "cupti" #call_expr))

#ifdef __cplusplus
}
#endif

#endif
