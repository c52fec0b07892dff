/* nvtx_probe: a minimal NVTX tool for tests, loaded through
 * NVTX_INJECTION64_PATH.  It receives what Nsight Systems would receive and
 * writes one line per event to the file named by NVTX_PROBE_LOG:
 *   push <tid> <depth after> <kind> <name>     kind: text | registered
 *   pop <tid> <depth after>
 *   register <tid> <depth> <strings registered so far> <name>
 * A pop with nothing open on its thread shows a negative depth.
 * Build: cc -shared -fPIC -I<dir holding nvtx3/> nvtx_probe.c -o libnvtx_probe.so */
#define _GNU_SOURCE
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static FILE *log_file;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int depth;
static long registered;

static void emit(const char *format, const char *kind, const char *name)
{
    pthread_mutex_lock(&lock);
    if (log_file != NULL) {
        fprintf(log_file, format, (long)gettid(), depth, kind, name ? name : "");
        fputc('\n', log_file);
    }
    pthread_mutex_unlock(&lock);
}

static void push_named(const nvtxEventAttributes_t *attrs)
{
    depth++;
    if (attrs != NULL && attrs->messageType == NVTX_MESSAGE_TYPE_REGISTERED)
        emit("push %ld %d %s %s", "registered", (const char *)attrs->message.registered);
    else if (attrs != NULL && attrs->messageType == NVTX_MESSAGE_TYPE_ASCII)
        emit("push %ld %d %s %s", "text", attrs->message.ascii);
    else
        emit("push %ld %d %s %s", "other", "");
}

static int NVTX_API domain_push(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *attrs)
{
    (void)domain;
    push_named(attrs);
    return depth - 1;
}

static int NVTX_API push_ex(const nvtxEventAttributes_t *attrs)
{
    push_named(attrs);
    return depth - 1;
}

static int NVTX_API push_a(const char *message)
{
    depth++;
    emit("push %ld %d %s %s", "text", message);
    return depth - 1;
}

static int NVTX_API pop_any(void)
{
    depth--;
    emit("pop %ld %d%s%s", "", "");
    return depth;
}

static int NVTX_API domain_pop(nvtxDomainHandle_t domain)
{
    (void)domain;
    return pop_any();
}

static nvtxStringHandle_t NVTX_API register_a(nvtxDomainHandle_t domain, const char *text)
{
    (void)domain;
    char *copy = strdup(text); /* the handle is the text: kept for the process, as a tool does */
    pthread_mutex_lock(&lock);
    long n = ++registered;
    pthread_mutex_unlock(&lock);
    char count[32];
    snprintf(count, sizeof count, "%ld", n);
    emit("register %ld %d %s %s", count, text);
    return (nvtxStringHandle_t)copy;
}

static void close_log(void)
{
    pthread_mutex_lock(&lock);
    if (log_file != NULL)
        fclose(log_file);
    log_file = NULL;
    pthread_mutex_unlock(&lock);
}

__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get)
{
    const NvtxExportTableCallbacks *callbacks =
        (const NvtxExportTableCallbacks *)get(NVTX_ETID_CALLBACKS);
    const char *path = getenv("NVTX_PROBE_LOG");
    if (callbacks == NULL || path == NULL)
        return 0;
    log_file = fopen(path, "w");
    if (log_file == NULL)
        return 0;
    setvbuf(log_file, NULL, _IOFBF, 1 << 16);
    atexit(close_log);
    NvtxFunctionTable table;
    unsigned int size;
    if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size)) {
        *table[NVTX_CBID_CORE_RangePushA] = (NvtxFunctionPointer)push_a;
        *table[NVTX_CBID_CORE_RangePushEx] = (NvtxFunctionPointer)push_ex;
        *table[NVTX_CBID_CORE_RangePop] = (NvtxFunctionPointer)pop_any;
    }
    if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size)) {
        *table[NVTX_CBID_CORE2_DomainRangePushEx] = (NvtxFunctionPointer)domain_push;
        *table[NVTX_CBID_CORE2_DomainRangePop] = (NvtxFunctionPointer)domain_pop;
        *table[NVTX_CBID_CORE2_DomainRegisterStringA] = (NvtxFunctionPointer)register_a;
    }
    return 1;
}
