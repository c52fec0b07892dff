/* ls_cupti: see ls_cupti.h. */
#define _GNU_SOURCE
#include "ls_cupti.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#define LS_CUPTI_SONAME "libcupti.so.13"

ls_cupti_api ls_cupti;

static void *cupti_handle;
static char cupti_path[1024];
static char cupti_error[1024];

const char *ls_cupti_error(void) { return cupti_error; }
void ls_cupti_clear_error(void) { cupti_error[0] = '\0'; }
int ls_cupti_loaded(void) { return cupti_handle != NULL; }
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
    LS_REQUIRE(Subscribe);
    LS_REQUIRE(Unsubscribe);
    LS_REQUIRE(EnableCallback);
    LS_REQUIRE(EnableDomain);
#undef LS_REQUIRE
    *(void **)(&api->Subscribe_v2) = dlsym(handle, "cuptiSubscribe_v2");
    return NULL;
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
    ls_cupti = api;
    cupti_handle = handle;
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
