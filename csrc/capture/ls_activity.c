/* ls_activity: see ls_activity.h. */
#define _POSIX_C_SOURCE 200809L
#include "ls_activity.h"

#include "ls_buffers.h"
#include "ls_clock.h"
#include "ls_cupti.h"
#include "ls_launches.h"
#include "ls_names.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* The record versions read here are the oldest ones both the CUDA 13.0 and
 * the 13.5 headers define.  CUPTI only appends fields to newer versions, so
 * every field read below sits at the same offset in whatever version the
 * loaded library writes (checked against both header sets). */
typedef CUpti_ActivityKernel9 ls_kernel_record;
typedef CUpti_ActivityMemcpy5 ls_memcpy_record;
typedef CUpti_ActivityMemset3 ls_memset_record;

/* The sink and the enabled kinds change under `state`: a start (the
 * profiling thread) and a stop (the worker) may run at once back to back. */
static pthread_mutex_t state = PTHREAD_MUTEX_INITIALIZER;
static ls_records *sink_records; /* drains go here (the worker reads it) */
/* Profiles that continued the kinds, in order: more than one while a
 * finish waits for the GPU (a loop that does not synchronize: the next
 * profiles start before it hands over). */
#define LS_NEXT_SINKS 4
static ls_records *next_sinks[LS_NEXT_SINKS];
static size_t next_count;
static int sink_continued;       /* the running profile continued the last one's kinds */
static uint64_t stop_began_ns;   /* host clock at the last stop's start */
static int started_soon_after_stop; /* the running profile started back to back
                                     * (ls_activity_back_to_back): its stop waits a grace */
static int next_may_continue;    /* the session says a next start could continue the kinds */
static int stopping;             /* a stop is turning the kinds off: no continuing */
static pthread_cond_t stopped = PTHREAD_COND_INITIALIZER;
/* A start continued the kinds (ls_activity_continue): a stop waiting its
 * grace for one wakes at once.  CLOCK_MONOTONIC (set up once). */
static pthread_cond_t continued;
static pthread_once_t continued_once = PTHREAD_ONCE_INIT;
static void init_continued(void)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&continued, &attr);
    pthread_condattr_destroy(&attr);
}
static ls_api_records enabled_api;
static int enabled_zeroed;
static CUpti_ActivityKind enabled[8];
static size_t enabled_count;
/* Graph-level mode (ls_graphs): the graph trace kind stays on for the
 * process once enabled; a replay record that began before the window's
 * start (CUPTI's clock) is an earlier replay's, not the window's. */
static atomic_int graph_trace_on;
static _Atomic uint64_t graph_floor_ns;

static void CUPTIAPI on_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    ls_buffers_request(buffer, size, max_records);
}

static void CUPTIAPI on_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer,
                                         size_t size, size_t valid_size)
{
    (void)ctx;
    (void)stream;
    (void)size;
    ls_buffers_complete(buffer, valid_size);
}

static int valid_interval(ls_records *sink, uint64_t start, uint64_t end, uint32_t correlation)
{
    if (start == 0 || end < start) {
        /* A finish's forced flush hands back, incomplete, the running work
         * of a counters-only profile that started beside it: launched after
         * this profile's stop, it is not this profile's to count. */
        if (sink->stop_launch_id != 0 && ls_launch_id_later(correlation, sink->stop_launch_id))
            sink->later_incomplete++;
        else
            sink->invalid_records++;
        return 0;
    }
    return 1;
}

static ls_op *add_op(ls_records *sink, ls_op_kind kind, uint64_t start, uint64_t end,
                     uint32_t device, uint32_t stream, uint32_t correlation, uint64_t bytes,
                     uint32_t name_id, uint8_t copy_kind, uint8_t graph_launched)
{
    if (!valid_interval(sink, start, end, correlation))
        return NULL;
    ls_op *op = ls_ops_append(&sink->ops);
    if (op == NULL) {
        sink->dropped_records++;
        return NULL;
    }
    *op = ls_op_make(kind, start, end, device, stream, correlation, name_id, bytes);
    op->copy_kind = copy_kind;
    op->graph_launched = graph_launched;
    return op;
}

/* A kernel's grid, block, registers and shared memory (what decides how
 * much of the GPU it can fill).  Negative or out-of-range values (a record
 * CUPTI could not fill) are left 0: unknown. */
static uint16_t side(int32_t v) { return v > 0 && v <= UINT16_MAX ? (uint16_t)v : 0; }

static void set_geometry(ls_op *op, const ls_kernel_record *k)
{
    op->grid_x = k->gridX > 0 ? (uint32_t)k->gridX : 0;
    op->grid_y = side(k->gridY);
    op->grid_z = side(k->gridZ);
    op->block_x = side(k->blockX);
    op->block_y = side(k->blockY);
    op->block_z = side(k->blockZ);
    op->registers = k->registersPerThread;
    int64_t shared = (int64_t)k->staticSharedMemory + k->dynamicSharedMemory;
    op->shared_bytes = shared > 0 && shared <= UINT32_MAX ? (uint32_t)shared : 0;
}

/* The memory kind of a copy's host side (pageable or pinned decides whether
 * an async copy made the host wait), 0 when neither side is host memory. */
static uint8_t host_side(const ls_memcpy_record *m)
{
    switch (m->copyKind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
        return m->srcKind;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
        return m->dstKind;
    default:
        return 0;
    }
}

void ls_activity_parse(ls_records *sink, uint8_t *buffer, size_t valid_size)
{
    CUpti_Activity *record = NULL;
    for (;;) {
        CUptiResult status = ls_cupti.ActivityGetNextRecord(buffer, valid_size, &record);
        if (status == CUPTI_ERROR_MAX_LIMIT_REACHED)
            break; /* the normal end of a buffer */
        if (ls_cupti_report(status, "cuptiActivityGetNextRecord") != CUPTI_SUCCESS) {
            sink->invalid_records++;
            break;
        }
        switch (record->kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
            const ls_kernel_record *k = (const ls_kernel_record *)record;
            uint32_t name = k->name ? ls_names_intern_held(&sink->names, k->name,
                                                           strlen(k->name))
                                    : LS_NO_NAME;
            ls_op *op = add_op(sink, LS_OP_KERNEL, k->start, k->end, k->deviceId, k->streamId,
                               k->correlationId, 0, name, 0, k->graphId != 0);
            if (op != NULL)
                set_geometry(op, k);
            break;
        }
        case CUPTI_ACTIVITY_KIND_GRAPH_TRACE: {
            const CUpti_ActivityGraphTrace2 *g = (const CUpti_ActivityGraphTrace2 *)record;
            if (g->start < atomic_load_explicit(&graph_floor_ns, memory_order_relaxed))
                break; /* replayed before the window began */
            char name[32];
            int length = snprintf(name, sizeof name, "CUDA graph %u", (unsigned)g->graphId);
            uint32_t name_id = ls_names_intern_held(&sink->names, name, (size_t)length);
            add_op(sink, LS_OP_GRAPH, g->start, g->end, g->deviceId, g->streamId,
                   g->correlationId, 0, name_id, 0, 1);
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
            const ls_memcpy_record *m = (const ls_memcpy_record *)record;
            ls_op *op = add_op(sink, LS_OP_MEMCPY, m->start, m->end, m->deviceId, m->streamId,
                               m->correlationId, m->bytes, LS_NO_NAME, m->copyKind,
                               m->graphId != 0);
            if (op != NULL)
                op->host_memory = host_side(m);
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
            const ls_memset_record *m = (const ls_memset_record *)record;
            add_op(sink, LS_OP_MEMSET, m->start, m->end, m->deviceId, m->streamId,
                   m->correlationId, m->bytes, LS_NO_NAME, 0, m->graphId != 0);
            break;
        }
        case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
            const CUpti_ActivitySynchronization2 *s =
                (const CUpti_ActivitySynchronization2 *)record;
            if (!valid_interval(sink, s->start, s->end, s->correlationId))
                break;
            ls_sync_record *out = ls_sync_records_append(&sink->sync_records);
            if (out == NULL) {
                sink->dropped_records++;
                break;
            }
            out->start_ns = s->start;
            out->end_ns = s->end;
            out->correlation_id = s->correlationId;
            out->stream_id = s->streamId;
            out->type = (uint32_t)s->type;
            break;
        }
        case CUPTI_ACTIVITY_KIND_RUNTIME:
        case CUPTI_ACTIVITY_KIND_DRIVER: {
            const CUpti_ActivityAPI *a = (const CUpti_ActivityAPI *)record;
            if (!valid_interval(sink, a->start, a->end, a->correlationId))
                break;
            ls_api *out = ls_apis_append(&sink->apis);
            if (out == NULL) {
                sink->dropped_records++;
                break;
            }
            out->start_ns = a->start;
            out->end_ns = a->end;
            out->correlation_id = a->correlationId;
            out->cbid = a->cbid;
            out->thread_id = a->threadId;
            out->domain = record->kind == CUPTI_ACTIVITY_KIND_DRIVER;
            break;
        }
        default:
            break;
        }
    }
}

static void drain_visitor(uint8_t *buffer, size_t valid_size, void *ctx)
{
    ls_activity_parse((ls_records *)ctx, buffer, valid_size);
}

int ls_activity_drain(void)
{
    if (sink_records == NULL || ls_buffers_ready() == 0)
        return 0;
    ls_buffers_drain(drain_visitor, sink_records);
    return 1;
}

int ls_activity_pending(void) { return ls_buffers_ready() > 0; }

static void disable_all(void)
{
    while (enabled_count > 0)
        LS_CUPTI_CHECK(ActivityDisable(enabled[--enabled_count]));
}

int ls_activity_start(ls_records *sink, ls_api_records api, int zeroed_buffers, char *reason,
                      size_t reason_size)
{
    static const CUpti_ActivityKind base_kinds[] = {
        CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
        CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    };
    /* Before the first buffer is requested, as CUPTI asks.  A refusal only
     * costs speed (CUPTI then clears buffers itself): not a reason to stop. */
    uint8_t zeroed = zeroed_buffers ? 1 : 0;
    size_t zeroed_size = sizeof zeroed;
    LS_CUPTI_CHECK(ActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER,
                                        &zeroed_size, &zeroed));
    if (LS_CUPTI_CHECK(ActivityRegisterCallbacks(on_buffer_requested, on_buffer_completed)) !=
        CUPTI_SUCCESS)
        goto fail;
    if (atomic_load(&graph_trace_on)) {
        /* Replays since the last window left records in CUPTI's buffers:
         * forced out and thrown away, with the records CUPTI dropped
         * meanwhile (the pool did not grow), before this window counts. */
        LS_CUPTI_CHECK(ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
        ls_buffers_discard_ready();
        size_t dropped_before = 0;
        LS_CUPTI_CHECK(ActivityGetNumDroppedRecords(NULL, 0, &dropped_before));
        uint64_t now = 0;
        LS_CUPTI_CHECK(GetTimestamp(&now));
        atomic_store(&graph_floor_ns, now);
        ls_buffers_hold(0);
    }
    pthread_mutex_lock(&state);
    sink_records = sink;
    next_count = 0;
    sink_continued = 0;
    started_soon_after_stop = ls_activity_back_to_back(stop_began_ns, ls_clock_monotonic_ns());
    enabled_api = api;
    enabled_zeroed = zeroed;
    pthread_mutex_unlock(&state);
    enabled_count = 0;
    for (size_t i = 0; i < sizeof base_kinds / sizeof base_kinds[0]; i++) {
        if (LS_CUPTI_CHECK(ActivityEnable(base_kinds[i])) != CUPTI_SUCCESS)
            goto fail;
        enabled[enabled_count++] = base_kinds[i];
    }
    if (api >= LS_API_RECORDS_RUNTIME) {
        if (LS_CUPTI_CHECK(ActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME)) != CUPTI_SUCCESS)
            goto fail;
        enabled[enabled_count++] = CUPTI_ACTIVITY_KIND_RUNTIME;
    }
    if (api >= LS_API_RECORDS_ALL) {
        if (LS_CUPTI_CHECK(ActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER)) != CUPTI_SUCCESS)
            goto fail;
        enabled[enabled_count++] = CUPTI_ACTIVITY_KIND_DRIVER;
    }
    return 0;
fail:
    snprintf(reason, reason_size, "%s", ls_cupti_error());
    pthread_mutex_lock(&state);
    disable_all();
    sink_records = NULL;
    pthread_mutex_unlock(&state);
    return -1;
}

int ls_activity_tracing(void)
{
    pthread_mutex_lock(&state);
    int on = sink_records != NULL;
    pthread_mutex_unlock(&state);
    return on;
}

void ls_activity_forget_in_child(void)
{
    pthread_mutex_init(&state, NULL);
    pthread_cond_init(&stopped, NULL);
    stopping = 0;
    sink_records = NULL;
    next_count = 0;
    enabled_count = 0;
    /* The kind stays on in the child's CUPTI, if it has one loaded; a child
     * profiles per kernel unless it prepares again (ls_graphs). */
    atomic_store(&graph_trace_on, 0);
    atomic_store(&graph_floor_ns, 0);
}

void ls_activity_expect_next(int may_continue)
{
    pthread_mutex_lock(&state);
    next_may_continue = may_continue != 0;
    if (!next_may_continue) {
        /* A start that will not continue (counters only): a stop in its
         * grace waits for it no longer (it sets the kinds off at once). */
        pthread_once(&continued_once, init_continued);
        pthread_cond_broadcast(&continued);
    }
    pthread_mutex_unlock(&state);
}

int ls_activity_back_to_back(uint64_t stop_began_ns, uint64_t now_ns)
{
    return stop_began_ns != 0 && now_ns - stop_began_ns < LS_ACTIVITY_BACK_TO_BACK_NS;
}

int ls_activity_continue(ls_records *sink, ls_api_records api, int zeroed_buffers)
{
    pthread_mutex_lock(&state);
    int ok = sink_records != NULL && enabled_count > 0 && next_count < LS_NEXT_SINKS &&
             !stopping && enabled_api == api && enabled_zeroed == (zeroed_buffers ? 1 : 0);

    if (ok) {
        next_sinks[next_count++] = sink;
        pthread_once(&continued_once, init_continued);
        pthread_cond_broadcast(&continued);
    }
    pthread_mutex_unlock(&state);
    return ok ? 0 : -1;
}

/* Completed buffers only (CUPTI returns none holding a record still
 * running), drained into the sink. */
static int flush_completed(void)
{
    int rc = LS_CUPTI_CHECK(ActivityFlushAll(0)) == CUPTI_SUCCESS ? 0 : -1;
    ls_activity_drain();
    return rc;
}

/* How long the stop of a profile that continued the last one's kinds (back
 * to back) waits for the next start to continue them in turn, before it
 * turns them off: a loop ending in a synchronize reaches the stop ~0.3 ms
 * before its next start (H100), which then waited ~1 ms for the forced
 * flush and set tracing up again. */
#define LS_ACTIVITY_NEXT_GRACE_NS 1000000ull

int ls_activity_stop(ls_records **next, int (*settled)(void *ctx), void *ctx)
{
    *next = NULL;
    if (sink_records == NULL)
        return 0;
    int result = 0;
    pthread_mutex_lock(&state);
    stop_began_ns = ls_clock_monotonic_ns();
    if (next_count == 0 && next_may_continue && (sink_continued || started_soon_after_stop)) {
        /* Woken by the continue itself (no poll): the grace is a bound. */
        pthread_once(&continued_once, init_continued);
        uint64_t until = stop_began_ns + LS_ACTIVITY_NEXT_GRACE_NS;
        struct timespec at = {(time_t)(until / 1000000000ull), (long)(until % 1000000000ull)};
        while (next_count == 0 && next_may_continue && ls_clock_monotonic_ns() < until)
            if (pthread_cond_timedwait(&continued, &state, &at) != 0)
                break;
    }
    int handing_over = next_count > 0;
    if (!handing_over)
        stopping = 1; /* from here no start continues: it waits for the stop */
    pthread_mutex_unlock(&state);
    if (handing_over) {
        /* The next profile's kernels may be running: completed buffers
         * only, until this window's records are all in (bounded). */
        uint64_t t0 = ls_clock_monotonic_ns();
        for (;;) {
            if (flush_completed() != 0)
                result = -1;
            if (settled == NULL || settled(ctx) ||
                ls_clock_monotonic_ns() - t0 > LS_ACTIVITY_SETTLE_NS)
                break;
            struct timespec pause = {0, 100000}; /* 0.1 ms */
            nanosleep(&pause, NULL);
        }
    } else {
        disable_all(); /* off before the flush, as always: nothing runs half-recorded */
        /* Forced: also hand back buffers that are only partly filled. */
        if (LS_CUPTI_CHECK(ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)) != CUPTI_SUCCESS)
            result = -1;
        ls_activity_drain();
    }
    size_t dropped = 0;
    if (LS_CUPTI_CHECK(ActivityGetNumDroppedRecords(NULL, 0, &dropped)) == CUPTI_SUCCESS)
        sink_records->dropped_records += dropped;
    pthread_mutex_lock(&state);
    if (handing_over) {
        *next = sink_records = next_sinks[0];
        memmove(next_sinks, next_sinks + 1, (next_count - 1) * sizeof next_sinks[0]);
        next_count--;
        sink_continued = 1;
    } else {
        sink_records = NULL;
        stopping = 0;
        if (atomic_load(&graph_trace_on))
            ls_buffers_hold(1); /* replay records until the next window: no growth */
        pthread_cond_broadcast(&stopped);
    }
    pthread_mutex_unlock(&state);
    return result;
}

int ls_activity_enable_graph_trace(int zeroed_buffers, char *reason, size_t reason_size)
{
    if (atomic_load(&graph_trace_on))
        return 0;
    uint8_t zeroed = zeroed_buffers ? 1 : 0;
    size_t zeroed_size = sizeof zeroed;
    LS_CUPTI_CHECK(ActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER,
                                        &zeroed_size, &zeroed));
    if (LS_CUPTI_CHECK(ActivityRegisterCallbacks(on_buffer_requested, on_buffer_completed)) !=
            CUPTI_SUCCESS ||
        LS_CUPTI_CHECK(ActivityEnable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE)) != CUPTI_SUCCESS) {
        snprintf(reason, reason_size, "%s", ls_cupti_error());
        return -1;
    }
    atomic_store(&graph_trace_on, 1);
    return 0;
}

int ls_activity_graph_trace_on(void) { return atomic_load(&graph_trace_on); }

int ls_activity_pause_graph_trace(void)
{
    if (!atomic_load(&graph_trace_on))
        return -1;
    /* Off is always safe: an exec instantiated with the kind on replays
     * with it off, its kernels recorded one by one (probe, H100). */
    return LS_CUPTI_CHECK(ActivityDisable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE)) == CUPTI_SUCCESS
               ? 0
               : -1;
}

void ls_activity_end_graph_trace(void)
{
    LS_CUPTI_CHECK(ActivityDisable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE));
    atomic_store(&graph_trace_on, 0);
    ls_buffers_hold(0);
}

int ls_activity_resume_graph_trace(void)
{
    if (LS_CUPTI_CHECK(ActivityEnable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE)) != CUPTI_SUCCESS) {
        ls_activity_end_graph_trace();
        return -1;
    }
    return 0;
}

int ls_activity_wait_off(uint64_t bound_ns)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now); /* `stopped` runs on the default clock */
    uint64_t at_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec + bound_ns;
    struct timespec at = {(time_t)(at_ns / 1000000000ull), (long)(at_ns % 1000000000ull)};
    pthread_mutex_lock(&state);
    while (sink_records != NULL || stopping)
        if (pthread_cond_timedwait(&stopped, &state, &at) != 0)
            break;
    int off = sink_records == NULL && !stopping;
    pthread_mutex_unlock(&state);
    return off;
}

void ls_activity_wait_stopped(void)
{
    pthread_mutex_lock(&state);
    while (stopping)
        pthread_cond_wait(&stopped, &state);
    pthread_mutex_unlock(&state);
}
