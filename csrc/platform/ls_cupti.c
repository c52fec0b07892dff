/* ls_cupti: see ls_cupti.h. */
#define _GNU_SOURCE
#include "ls_cupti.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define LS_CUPTI_SONAME "libcupti.so.13"

ls_cupti_api ls_cupti;

static void *cupti_handle;
static char cupti_path[1024];
/* Per thread: loopscope's worker thread makes CUPTI calls too, and each
 * caller reads the message of its own last failure. */
static _Thread_local char cupti_error[1024];
static const char *pm_missing = "cuptiPmSamplingEnable";

const char *ls_cupti_error(void) { return cupti_error; }
void ls_cupti_clear_error(void) { cupti_error[0] = '\0'; }
/* A child forked after CUPTI was loaded here: CUDA and CUPTI belong to the
 * parent (CUDA cannot be used after a fork), so the child never calls it. */
static int forked;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void forbid_in_child(void) { forked = 1; }
static void watch_forks(void) { pthread_atfork(NULL, NULL, forbid_in_child); }

int ls_cupti_loaded(void) { return cupti_handle != NULL && !forked; }
int ls_cupti_forked(void) { return forked; }

CUptiResult ls_cupti_refuse(const char *call)
{
    snprintf(cupti_error, sizeof cupti_error,
             "%s was not called: this process was forked from one that had loaded CUPTI, "
             "and CUDA and CUPTI cannot be used after a fork", call);
    return CUPTI_ERROR_NOT_INITIALIZED;
}
const char *ls_cupti_path(void) { return cupti_path; }

CUptiResult ls_cupti_report(CUptiResult status, const char *call)
{
    if (status == CUPTI_SUCCESS)
        return status;
    const char *text = NULL;
    if (ls_cupti.GetResultString == NULL ||
        ls_cupti.GetResultString(status, &text) != CUPTI_SUCCESS || text == NULL)
        text = "unknown CUPTI error";
    snprintf(cupti_error, sizeof cupti_error, "%s failed: %s (code %d)", call, text,
             (int)status);
    return status;
}

/* Resolves every symbol; returns the name of the first missing required one. */
static const char *resolve_symbols(void *handle, ls_cupti_api *api)
{
#define LS_REQUIRE(field)                                              \
    do {                                                               \
        *(void **)(&api->field) = dlsym(handle, "cupti" #field);       \
        if (api->field == NULL)                                        \
            return "cupti" #field;                                     \
    } while (0)
    LS_REQUIRE(GetResultString);
    LS_REQUIRE(GetTimestamp);
    LS_REQUIRE(GetVersion);
    LS_REQUIRE(ActivityRegisterCallbacks);
    LS_REQUIRE(ActivityEnable);
    LS_REQUIRE(ActivityDisable);
    LS_REQUIRE(ActivityFlushAll);
    LS_REQUIRE(ActivityGetNextRecord);
    LS_REQUIRE(ActivityGetNumDroppedRecords);
    LS_REQUIRE(ActivitySetAttribute);
    LS_REQUIRE(Subscribe);
    LS_REQUIRE(Unsubscribe);
    LS_REQUIRE(EnableCallback);
    LS_REQUIRE(EnableDomain);
#undef LS_REQUIRE
    *(void **)(&api->Subscribe_v2) = dlsym(handle, "cuptiSubscribe_v2");
    *(void **)(&api->ActivityRegisterTimestampCallback) =
        dlsym(handle, "cuptiActivityRegisterTimestampCallback");
    return NULL;
}

/* The optional PM sampling symbols; returns the first missing name, NULL if none. */
static const char *resolve_pm_symbols(void *handle, ls_cupti_api *api)
{
    const char *missing = NULL;
#define LS_OPTIONAL(field)                                             \
    do {                                                               \
        *(void **)(&api->field) = dlsym(handle, "cupti" #field);       \
        if (api->field == NULL && missing == NULL)                     \
            missing = "cupti" #field;                                  \
    } while (0)
    LS_OPTIONAL(ProfilerInitialize);
    LS_OPTIONAL(DeviceGetChipName);
    LS_OPTIONAL(PmSamplingEnable);
    LS_OPTIONAL(PmSamplingDisable);
    LS_OPTIONAL(PmSamplingGetCounterAvailability);
    LS_OPTIONAL(PmSamplingSetConfig);
    LS_OPTIONAL(PmSamplingStart);
    LS_OPTIONAL(PmSamplingStop);
    LS_OPTIONAL(PmSamplingDecodeData);
    LS_OPTIONAL(PmSamplingGetCounterDataSize);
    LS_OPTIONAL(PmSamplingCounterDataImageInitialize);
    LS_OPTIONAL(PmSamplingGetCounterDataInfo);
    LS_OPTIONAL(PmSamplingCounterDataGetSampleInfo);
    LS_OPTIONAL(ProfilerHostInitialize);
    LS_OPTIONAL(ProfilerHostDeinitialize);
    LS_OPTIONAL(ProfilerHostConfigAddMetrics);
    LS_OPTIONAL(ProfilerHostGetConfigImageSize);
    LS_OPTIONAL(ProfilerHostGetConfigImage);
    LS_OPTIONAL(ProfilerHostGetNumOfPasses);
    LS_OPTIONAL(ProfilerHostEvaluateToGpuValues);
#undef LS_OPTIONAL
    return missing;
}

const char *ls_cupti_pm_missing(void) { return pm_missing; }

int ls_cupti_load_nvperf(char *why, size_t why_size)
{
    static const char *const libs[] = {"libnvperf_host.so", "libnvperf_target.so"};
    char folder[1024];
    snprintf(folder, sizeof folder, "%s", cupti_path);
    char *slash = strrchr(folder, '/');
    if (slash != NULL)
        *slash = '\0';
    else
        folder[0] = '\0';
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
        if (dlopen(libs[i], RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD) != NULL)
            continue;
        void *handle = NULL;
        if (folder[0] != '\0') {
            char path[1200];
            snprintf(path, sizeof path, "%s/%s", folder, libs[i]);
            handle = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
        }
        if (handle == NULL)
            handle = dlopen(libs[i], RTLD_NOW | RTLD_GLOBAL);
        if (handle == NULL) {
            const char *err = dlerror();
            snprintf(why, why_size,
                     "CUPTI's profiler library %s was found neither next to %s nor on the "
                     "loader path (%s); it ships with the nvidia-cuda-cupti wheel and in "
                     "CUDA's extras/CUPTI/lib64", libs[i], cupti_path[0] ? cupti_path : "CUPTI",
                     err ? err : "not found");
            return -1;
        }
        /* Kept open for the life of the process, as CUPTI keeps it. */
    }
    return 0;
}

static int adopt(void *handle, const char *how)
{
    ls_cupti_api api;
    memset(&api, 0, sizeof api);
    const char *missing = resolve_symbols(handle, &api);
    if (missing != NULL) {
        snprintf(cupti_error, sizeof cupti_error,
                 "%s lacks the symbol %s: CUPTI too old for loopscope (needs CUDA 13)",
                 how, missing);
        dlclose(handle);
        return -1;
    }
    pm_missing = resolve_pm_symbols(handle, &api);
    ls_cupti = api;
    cupti_handle = handle;
    pthread_once(&fork_once, watch_forks);
    /* Where the library really lives, for the summary and for bug reports. */
    Dl_info info;
    if (dladdr(*(void **)(&api.GetVersion), &info) != 0 && info.dli_fname != NULL)
        snprintf(cupti_path, sizeof cupti_path, "%s", info.dli_fname);
    else
        snprintf(cupti_path, sizeof cupti_path, "%s", how);
    return 0;
}

int ls_cupti_load(const char *const *candidates, size_t n)
{
    if (forked) {
        snprintf(cupti_error, sizeof cupti_error,
                 "this process was forked from one that had loaded CUPTI: CUDA and CUPTI "
                 "cannot be used in it (start GPU worker processes with the 'spawn' method)");
        return -1;
    }
    if (cupti_handle != NULL)
        return 0;
    /* 1. The copy already in the process (torch loads its own at import). */
    void *handle = dlopen(LS_CUPTI_SONAME, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (handle != NULL)
        return adopt(handle, LS_CUPTI_SONAME);
    /* 2. The caller's candidates: the copy torch would load comes first. */
    for (size_t i = 0; i < n; i++) {
        handle = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
        if (handle != NULL)
            return adopt(handle, candidates[i]);
    }
    /* 3. The dynamic loader's own search (LD_LIBRARY_PATH, ld.so.cache). */
    handle = dlopen(LS_CUPTI_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (handle != NULL)
        return adopt(handle, LS_CUPTI_SONAME);
    const char *why = dlerror();
    snprintf(cupti_error, sizeof cupti_error,
             "CUPTI (%s) could not be opened: %s; searched %zu candidate path(s) and the "
             "loader path", LS_CUPTI_SONAME, why ? why : "not found", n);
    return -1;
}
