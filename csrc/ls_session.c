/* ls_session: see ls_session.h.  Every function here runs with the GIL held,
 * which serialises them; CUPTI's own threads only touch ls_buffers. */
#include "ls_session.h"

#include "ls_activity.h"
#include "ls_buffers.h"
#include "ls_calls.h"
#include "ls_clock.h"
#include "ls_pycodes.h"
#include "ls_cuda.h"
#include "ls_cupti.h"
#include "ls_launches.h"
#include "ls_names.h"
#include "ls_nvtx.h"
#include "ls_pmdecoder.h"
#include "ls_pmsampling.h"
#include "ls_rangestack.h"
#include "ls_samples.h"
#include "ls_subscriber.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define LS_RANGE_RESERVE 4096
#define LS_MAX_CODES 8192         /* distinct Python functions in sync stacks */
#define LS_CODE_ARENA (1u << 20)  /* their file and function names */

static struct {
    int active;
    int tracing;
    int callbacks;        /* loopscope holds CUPTI's callback slot, callbacks on */
    int launch_callbacks; /* launch calls come from callbacks (ls_launches) */
    int sampling;         /* PM sampling runs */
    uint32_t generation;
    ls_capture capture;
} session;

const char *ls_session_start_phase_name(int phase)
{
    static const char *const names[LS_START_PHASES] = {
        "reset", "cupti", "callbacks", "activity", "warm_up", "metrics"};
    return phase >= 0 && phase < LS_START_PHASES ? names[phase] : "?";
}

const char *ls_session_stop_phase_name(int phase)
{
    static const char *const names[LS_STOP_PHASES] = {
        "callbacks", "sync", "activity", "release", "metrics", "records"};
    return phase >= 0 && phase < LS_STOP_PHASES ? names[phase] : "?";
}

/* Adds the time since *t0 to *phase and moves *t0 to now. */
static void lap(uint64_t *phase, uint64_t *t0)
{
    uint64_t now = ls_clock_monotonic_ns();
    *phase += now - *t0;
    *t0 = now;
}

/* A child forked during a session: the session, and CUPTI with it, belong to
 * the parent.  The child drops its copy (no CUPTI call: CUDA cannot be used
 * after a fork) and is free to profile again, host-only. */
static void forget_in_child(void)
{
    if (session.active)
        ls_records_clear(&session.capture.records);
    memset(&session.capture, 0, sizeof session.capture);
    session.active = session.tracing = session.callbacks = 0;
    session.launch_callbacks = session.sampling = 0;
    ls_clock_use(LS_CLOCK_MONOTONIC);
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static void watch_forks(void) { pthread_atfork(NULL, NULL, forget_in_child); }

int ls_session_active(void) { return session.active; }
ls_records *ls_session_records(void) { return session.active ? &session.capture.records : NULL; }
void ls_session_mark_injected(void) { session.capture.injected = 1; }
void ls_session_mark_calls_injected(void) { session.capture.calls_injected = 1; }
void ls_session_mark_samples_injected(void) { session.capture.samples_injected = 1; }

/* Samples reaching further than this outside the profile are taken to be
 * on another clock than the activity records (ls_samples_settle). */
#define LS_SAMPLE_CLOCK_TOLERANCE_NS 100000000ull
#define LS_SAMPLE_PARTIAL_FACTOR 10
/* How long sampling stays enabled after a profile, for the next one. */
#define LS_PM_KEEP_NS 3000000000ull

/* PM sampling, after tracing started (CUPTI is loaded by then if it can be). */
static void start_metrics(const ls_session_options *o, ls_capture *c)
{
    if (!o->metrics) {
        snprintf(c->metrics_reason, sizeof c->metrics_reason,
                 "SM and DRAM sampling was turned off (metrics=False)");
        return;
    }
    if (!ls_cuda_driver_present()) {
        snprintf(c->metrics_reason, sizeof c->metrics_reason,
                 "no NVIDIA GPU driver on this machine (libcuda.so.1 cannot be opened)");
        return;
    }
    if (ls_cupti_load(o->cupti_paths, o->cupti_path_count) != 0) {
        snprintf(c->metrics_reason, sizeof c->metrics_reason, "%s", ls_cupti_error());
        return;
    }
    ls_pmdecoder_hold();
    if (ls_pm_start(&o->pm, c->metrics_reason, sizeof c->metrics_reason) != 0) {
        ls_pmdecoder_release_after(0);
        return;
    }
    /* Without the thread, samples are still decoded at stop; the hardware
     * buffer then has to hold the whole run, and an overflow says so. */
    c->decoder_error[0] = '\0';
    (void)ls_pmdecoder_start(o->pm.decode_period_ns, c->decoder_error, sizeof c->decoder_error);
    session.sampling = 1;
    c->sampled = 1;
    c->metrics_reason[0] = '\0';
}

/* Stops sampling, takes the rest of the samples, puts them in time order
 * and on the activity clock. */
static void stop_metrics(ls_capture *c)
{
    ls_records *r = &c->records;
    if (session.sampling) {
        uint64_t lost = 0;
        if (ls_pmdecoder_stop(&r->samples, &lost) != 0 && c->stop_error[0] == '\0')
            snprintf(c->stop_error, sizeof c->stop_error,
                     "PM sampling: out of memory, %llu samples lost", (unsigned long long)lost);
        if (ls_pm_stop(&r->samples) != 0 && c->stop_error[0] == '\0')
            snprintf(c->stop_error, sizeof c->stop_error, "PM sampling: %.1000s",
                     ls_pm_stats_now()->error);
        ls_pmdecoder_release_after(LS_PM_KEEP_NS);
        c->pm = *ls_pm_stats_now();
        r->sample_device = (uint32_t)c->pm.device;
    }
    ls_samples_sort(r->samples.items, r->samples.count);
    if (!session.sampling || r->samples.count == 0 || c->pm.started_ns == 0)
        return;
    ls_settle_result settled;
    uint64_t longest = (uint64_t)LS_SAMPLE_PARTIAL_FACTOR * (c->pm.interval ? c->pm.interval : 1);
    r->samples.count = ls_samples_settle(r->samples.items, r->samples.count, longest,
                                         c->pm.started_ns,
                                         c->pm.stopped_ns ? c->pm.stopped_ns : UINT64_MAX / 2,
                                         LS_SAMPLE_CLOCK_TOLERANCE_NS, &settled);
    c->pm.incomplete += settled.partial;
    c->sample_clock_delta_ns = settled.delta_ns;
    c->sample_clock_shift_ns = settled.shift_ns;
}

/* Claims CUPTI's callback slot and enables the callbacks: launch calls
 * (recorded when tracing, else only counted, which sync grouping needs) and
 * the calls that wait when `syncs`.  Returns the subscriber result; on
 * failure `why` says why. */
static int start_callbacks(const ls_session_options *o, char *why, size_t why_size)
{
    int claim = ls_subscriber_claim(why, why_size);
    if (claim != LS_SUBSCRIBER_OK)
        return claim;
    if (ls_launches_reset(o->trace) != 0 ||
        ls_subscriber_enable_callbacks(o->syncs, why, why_size) != 0) {
        ls_subscriber_release();
        if (why[0] == '\0')
            snprintf(why, why_size, "out of memory for launch records");
        return LS_SUBSCRIBER_ERROR;
    }
    session.callbacks = 1;
    session.launch_callbacks = o->trace;
    return LS_SUBSCRIBER_OK;
}

static void start_cupti(const ls_session_options *o, ls_capture *c)
{
    const char *off_trace = "GPU tracing was turned off (trace=False)";
    const char *off_syncs = "sync detection was turned off (syncs=False)";
    snprintf(c->reason, sizeof c->reason, "%s", off_trace);
    snprintf(c->syncs_reason, sizeof c->syncs_reason, "%s", off_syncs);
    if (!o->trace && !o->syncs)
        return;
    char why[1024] = "";
    uint64_t t0 = ls_clock_monotonic_ns();
    if (!ls_cuda_driver_present())
        snprintf(why, sizeof why, "no NVIDIA GPU driver on this machine (libcuda.so.1 cannot be opened)");
    else if (ls_cupti_load(o->cupti_paths, o->cupti_path_count) != 0)
        snprintf(why, sizeof why, "%s", ls_cupti_error());
    else if (o->trace && ls_buffers_configure(o->buffer_bytes, 2, o->max_buffers) != 0)
        snprintf(why, sizeof why, "could not allocate CUPTI activity buffers");
    lap(&c->start_phase_ns[LS_START_CUPTI], &t0);
    if (why[0] != '\0') {
        if (o->trace)
            snprintf(c->reason, sizeof c->reason, "%s", why);
        if (o->syncs)
            snprintf(c->syncs_reason, sizeof c->syncs_reason, "%s", why);
        return;
    }
    int claim = start_callbacks(o, why, sizeof why);
    lap(&c->start_phase_ns[LS_START_CALLBACKS], &t0);
    if (claim == LS_SUBSCRIBER_OK && o->syncs) {
        c->watched_syncs = 1;
        c->syncs_reason[0] = '\0';
    } else if (claim != LS_SUBSCRIBER_OK && o->syncs) {
        snprintf(c->syncs_reason, sizeof c->syncs_reason, "%s", why);
    }
    if (!o->trace || claim == LS_SUBSCRIBER_ERROR) {
        if (o->trace)
            snprintf(c->reason, sizeof c->reason, "%s", why);
        return;
    }
    ls_api_records api = LS_API_RECORDS_NONE;
    if (claim == LS_SUBSCRIBER_HELD) {
        /* Kineto subscribes at its first use and never lets go, so after one
         * torch.profiler run the slot stays taken though nobody traces.  The
         * Python layer has already refused when a tool is really tracing
         * (torch.profiler running, a CUDA injection tool); activity tracing
         * needs no subscription, so go on (launch calls then come from API
         * activity records) and say what is missing. */
        snprintf(c->note, sizeof c->note, "%s", why);
        api = o->driver_api ? LS_API_RECORDS_ALL : LS_API_RECORDS_RUNTIME;
    }
    int activity = ls_activity_start(&c->records, api, c->reason, sizeof c->reason);
    lap(&c->start_phase_ns[LS_START_ACTIVITY], &t0);
    if (activity != 0) {
        ls_subscriber_release();
        session.callbacks = session.launch_callbacks = 0;
        if (c->watched_syncs) {
            c->watched_syncs = 0;
            snprintf(c->syncs_reason, sizeof c->syncs_reason, "%s", c->reason);
        }
        return;
    }
    if (o->warm_up)
        ls_cuda_warm_up();
    lap(&c->start_phase_ns[LS_START_WARM_UP], &t0);
    session.tracing = 1;
    c->traced = 1;
    c->reason[0] = '\0';
}

int ls_session_start(const ls_session_options *options, ls_session_state *state)
{
    if (session.active)
        return -1;
    pthread_once(&fork_once, watch_forks);
    memset(&session.capture, 0, sizeof session.capture);
    uint64_t t0 = ls_clock_monotonic_ns();
    ls_cupti_clear_error();
    if (ls_ranges_reserve(&session.capture.records.ranges, LS_RANGE_RESERVE) != 0)
        return -1;
    session.tracing = 0;
    session.callbacks = 0;
    session.launch_callbacks = 0;
    session.sampling = 0;
    /* The call store and code table exist in every session: the test hook
     * feeds them without CUPTI. */
    if (ls_calls_reset() != 0 || ls_pycodes_reset(LS_MAX_CODES, LS_CODE_ARENA) != 0 ||
        ls_launches_reset(0) != 0)
        return -1;
    uint64_t *phase = session.capture.start_phase_ns;
    lap(&phase[LS_START_RESET], &t0);
    start_cupti(options, &session.capture);
    t0 = ls_clock_monotonic_ns();
    start_metrics(options, &session.capture);
    lap(&phase[LS_START_METRICS], &t0);
    ls_clock_use(session.tracing || session.callbacks || session.sampling ? LS_CLOCK_CUPTI
                                                                           : LS_CLOCK_MONOTONIC);
    session.generation++;
    session.active = 1;
    session.capture.records.start_ns = ls_clock_now();
    state->tracing = session.tracing;
    state->reason = session.capture.reason;
    state->watching_syncs = session.capture.watched_syncs;
    state->syncs_reason = session.capture.syncs_reason;
    state->sampling = session.sampling;
    state->metrics_reason = session.capture.metrics_reason;
    return 0;
}

int ls_session_stop(ls_capture *out)
{
    if (!session.active)
        return -1;
    ls_capture *c = &session.capture;
    uint64_t stop_ns = ls_clock_now();
    c->records.stop_ns = stop_ns;
    uint64_t *phase = c->stop_phase_ns;
    uint64_t t0 = ls_clock_monotonic_ns();
    ls_subscriber_disable_callbacks();
    lap(&phase[LS_STOP_CALLBACKS], &t0);
    if (session.tracing || session.sampling) {
        /* Wait for the kernels launched inside the profile, so the flush
         * below returns all of them (and the samples cover them).  Records
         * of this sync itself start after stop_ns and are ignored by the
         * analysis. */
        ls_cuda_sync_current_context();
    }
    lap(&phase[LS_STOP_SYNC], &t0);
    if (session.tracing) {
        if (ls_activity_stop() != 0)
            snprintf(c->stop_error, sizeof c->stop_error, "%s", ls_cupti_error());
        c->buffer_bytes = ls_buffers_allocated_bytes();
        c->buffers_refused = ls_buffers_refused();
    }
    lap(&phase[LS_STOP_ACTIVITY], &t0);
    ls_subscriber_release();
    lap(&phase[LS_STOP_RELEASE], &t0);
    /* Last: disabling PM sampling may tear down parts of CUPTI's profiler. */
    stop_metrics(c);
    lap(&phase[LS_STOP_METRICS], &t0);
    if (session.launch_callbacks)
        c->records.dropped_records += ls_launches_move_to(&c->records.apis);
    c->records.dropped_records += ls_calls_move_to(&c->records.calls, stop_ns);
    c->codes_refused = ls_pycodes_refused();
    ls_pycodes_take(&c->records.codes);
    /* Traced ops that ended before the profile began (the warm-up memset,
     * work queued earlier) are not part of it.  Injected test records keep
     * their own time line. */
    size_t kept = 0;
    for (size_t i = 0; i < c->records.ops.count; i++)
        if (!c->traced || c->records.ops.items[i].end_ns >= c->records.start_ns)
            c->records.ops.items[kept++] = c->records.ops.items[i];
    c->ops_before_start = c->records.ops.count - kept;
    c->records.ops.count = kept;
    kept = 0;
    for (size_t i = 0; i < c->records.calls.count; i++)
        if (c->records.calls.items[i].enter_ns >= c->records.start_ns)
            c->records.calls.items[kept++] = c->records.calls.items[i];
    c->calls_before_start = c->records.calls.count - kept;
    c->records.calls.count = kept;
    for (size_t i = 0; i < c->records.ranges.count; i++) {
        ls_range *r = &c->records.ranges.items[i];
        if (r->end_ns == 0) {
            r->end_ns = stop_ns;
            c->ranges_left_open++;
        }
    }
    lap(&phase[LS_STOP_RECORDS], &t0);
    c->stop_ns_cost = ls_clock_now() - stop_ns;
    ls_clock_use(LS_CLOCK_MONOTONIC);
    *out = *c;
    memset(c, 0, sizeof *c);
    session.active = 0;
    session.tracing = 0;
    session.callbacks = 0;
    session.launch_callbacks = 0;
    session.sampling = 0;
    return 0;
}

uint64_t ls_session_new_owner(void)
{
    static uint64_t next_owner = 1;
    return next_owner++;
}

int ls_session_push(uint64_t owner, uint32_t name_id, int32_t step_index, void *nvtx_handle,
                    const char *nvtx_text)
{
    uint32_t generation = session.active ? session.generation : 0;
    ls_rangestack *stack = ls_rangestack_mine();
    if (step_index >= 0 && ls_rangestack_open_steps(stack, generation) > 0)
        return LS_PUSH_STEP_OPEN;
    const ls_open_range *outer = ls_rangestack_top(stack);
    int nested = outer != NULL && outer->generation == generation;
    ls_open_range entry = {owner, -1, generation, nested ? outer->depth + 1 : 0,
                           LS_OPEN_NVTX | (step_index >= 0 ? LS_OPEN_STEP : 0u)};
    ls_range *r = NULL;
    if (session.active) {
        ls_records *records = &session.capture.records;
        if (ls_names_hold(&records->names, name_id) == 0)
            r = ls_ranges_append(&records->ranges);
        if (r != NULL) {
            entry.record = (int32_t)(records->ranges.count - 1);
            r->name_id = name_id;
            r->step_index = step_index;
            r->depth = entry.depth;
            r->parent = nested ? outer->record : -1;
            r->thread_id = (uint64_t)pthread_self();
        } else {
            records->dropped_records++;
        }
    }
    if (ls_rangestack_push(stack, &entry) != 0) {
        if (r != NULL)
            session.capture.records.ranges.count--;
        if (session.active)
            session.capture.records.dropped_records++;
        return LS_PUSH_NO_MEMORY;
    }
    ls_nvtx_push(nvtx_text ? nvtx_text : ls_names_text(name_id), nvtx_handle);
    if (r != NULL)
        r->start_ns = ls_clock_now();
    return 0;
}

ls_exit_result ls_session_pop(uint64_t owner)
{
    ls_rangestack *stack = ls_rangestack_mine();
    ptrdiff_t at = ls_rangestack_find(stack, owner);
    if (at < 0) {
        if (session.active)
            session.capture.range_mismatches++;
        return LS_EXIT_NOT_OPEN;
    }
    int innermost = (size_t)at + 1 == ls_rangestack_size(stack);
    ls_open_range entry = ls_rangestack_remove(stack, at);
    int ours = session.active && entry.generation == session.generation;
    if (ours && entry.record >= 0)
        session.capture.records.ranges.items[entry.record].end_ns = ls_clock_now();
    if (entry.flags & LS_OPEN_NVTX)
        ls_nvtx_pop();
    if (!ours)
        return innermost ? LS_EXIT_CLOSED : LS_EXIT_OUT_OF_ORDER;
    if (!innermost)
        session.capture.range_mismatches++;
    if (session.launch_callbacks)
        ls_launches_reserve(); /* two atomic loads unless a chunk is needed */
    ls_calls_reserve();
    return innermost ? LS_EXIT_CLOSED : LS_EXIT_OUT_OF_ORDER;
}

void ls_session_service(void)
{
    if (!session.tracing || !ls_activity_pending())
        return;
    uint64_t t0 = ls_clock_monotonic_ns();
    ls_activity_drain();
    session.capture.drains++;
    session.capture.drain_ns += ls_clock_monotonic_ns() - t0;
}
