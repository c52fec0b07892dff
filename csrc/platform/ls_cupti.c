/* ls_cupti: see ls_cupti.h. */
#define _GNU_SOURCE
#include "ls_cupti.h"

#include "ls_cuda.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

ls_cupti_api ls_cupti;

static void *cupti_handle;
static char cupti_path[1024];
/* Per thread: loopscope's worker thread makes CUPTI calls too, and each
 * caller reads the message of its own last failure. */
static _Thread_local char cupti_error[1024];
static const char *pm_missing = "cuptiPmSamplingEnable";
static uint32_t cupti_version; /* cuptiGetVersion of the adopted library */
static char cupti_how[64];     /* why this copy: "already loaded" or "candidate N" */

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

uint32_t ls_cupti_version(void) { return cupti_handle != NULL ? cupti_version : 0; }
const char *ls_cupti_how(void) { return cupti_how; }

int ls_cupti_version_major(uint32_t version)
{
    if (version >= 100000)
        return (int)(version / 10000); /* 130001: 13.0 (CUPTI 13's xxyyzz) */
    return version >= 18 ? 12 : 0; /* API 18 (12.0) to 28 (12.9): CUDA 12 */
}

/* One line per refused candidate, kept for the final error. */
static void note_refusal(char *tried, size_t size, const char *path, const char *why)
{
    size_t used = strlen(tried);
    if (used + 4 < size)
        snprintf(tried + used, size - used, "%s%s: %s", used ? "; " : "", path, why);
}

/* Takes `handle` as the CUPTI in use if it has every required symbol and is
 * a CUPTI loopscope can drive (CUDA 12.0 or newer, and a 13.x only on a
 * driver of CUDA 13 or newer when the driver says).  Returns 0, or -1 with
 * the reason in `why` and `handle` closed unless `keep_open`. */
static int adopt(void *handle, const char *how, int keep_open, char *why, size_t why_size)
{
    ls_cupti_api api;
    memset(&api, 0, sizeof api);
    const char *missing = resolve_symbols(handle, &api);
    uint32_t version = 0;
    if (missing != NULL)
        snprintf(why, why_size, "lacks the symbol %s (not a CUPTI loopscope can use)", missing);
    else if (api.GetVersion(&version) != CUPTI_SUCCESS || ls_cupti_version_major(version) < 12)
        snprintf(why, why_size, "CUPTI API version %u is older than CUDA 12.0's (18)",
                 (unsigned)version);
    else if (ls_cupti_version_major(version) >= 13 && ls_cuda_driver_version() > 0 &&
             ls_cuda_driver_version() < 13000)
        snprintf(why, why_size, "CUPTI %d needs a driver of CUDA 13 (580 or newer); this "
                 "driver runs CUDA %d.%d", ls_cupti_version_major(version),
                 ls_cuda_driver_version() / 1000, ls_cuda_driver_version() % 1000 / 10);
    else
        why[0] = '\0';
    if (why[0] != '\0') {
        if (!keep_open)
            dlclose(handle);
        return -1;
    }
    pm_missing = resolve_pm_symbols(handle, &api);
    ls_cupti = api;
    cupti_handle = handle;
    cupti_version = version;
    snprintf(cupti_how, sizeof cupti_how, "%s", how);
    pthread_once(&fork_once, watch_forks);
    /* Where the library really lives, for the summary and for bug reports. */
    Dl_info info;
    if (dladdr(*(void **)(&api.GetVersion), &info) != 0 && info.dli_fname != NULL)
        snprintf(cupti_path, sizeof cupti_path, "%s", info.dli_fname);
    else
        snprintf(cupti_path, sizeof cupti_path, "%s", how);
    return 0;
}

/* dl_iterate_phdr visitor: the first mapped object named libcupti.so*. */
static int find_mapped(struct dl_phdr_info *info, size_t size, void *out)
{
    (void)size;
    const char *name = info->dlpi_name;
    if (name == NULL || name[0] == '\0')
        return 0;
    const char *base = strrchr(name, '/');
    base = base != NULL ? base + 1 : name;
    if (strncmp(base, "libcupti.so", 11) != 0)
        return 0;
    snprintf((char *)out, 1024, "%s", name);
    return 1;
}

int ls_cupti_mapped(char *path, size_t size)
{
    char found[1024] = "";
    dl_iterate_phdr(find_mapped, found);
    if (path != NULL && size > 0)
        snprintf(path, size, "%s", found);
    return found[0] != '\0';
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
    char why[512];
    /* 1. A CUPTI already in the process (torch's profiler loads its own at
     * import), whatever its major version: two CUPTIs must never meet. */
    char mapped[1024];
    if (ls_cupti_mapped(mapped, sizeof mapped)) {
        void *handle = dlopen(mapped, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
        if (handle != NULL && adopt(handle, "already loaded in this process", 1, why,
                                    sizeof why) == 0)
            return 0;
        snprintf(cupti_error, sizeof cupti_error,
                 "this process already holds a CUPTI loopscope cannot use (%.400s: %.300s); "
                 "loopscope"
                 " will not load a second one beside it", mapped,
                 handle != NULL ? why : "it could not be opened again");
        return -1;
    }
    /* 2. The caller's candidates, best first (_cupti_paths: beside the
     * process's CUDA runtime, the pip wheels, the toolkits, then bare
     * sonames for the loader's own search). */
    char tried[sizeof cupti_error - 128] = "";
    for (size_t i = 0; i < n; i++) {
        void *handle = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
        if (handle == NULL) {
            const char *err = dlerror();
            note_refusal(tried, sizeof tried, candidates[i], err ? err : "cannot be opened");
            continue;
        }
        char how[64];
        snprintf(how, sizeof how, "candidate %zu of %zu", i + 1, n);
        if (adopt(handle, how, 0, why, sizeof why) == 0)
            return 0;
        note_refusal(tried, sizeof tried, candidates[i], why);
    }
    if (n == 0)
        snprintf(cupti_error, sizeof cupti_error,
                 "no CUPTI library was found (libcupti.so.12 or .13): install the "
                 "nvidia-cuda-cupti-cu12 wheel (CUDA 12) or nvidia-cuda-cupti (CUDA 13), as "
                 "torch's CUDA wheels do, or a CUDA toolkit");
    else
        snprintf(cupti_error, sizeof cupti_error, "no usable CUPTI among %zu candidate(s): %.880s",
                 n, tried);
    return -1;
}
