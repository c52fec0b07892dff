/* ls_session: see ls_session.h.  Every function here runs with the GIL held,
 * which serialises them; CUPTI's own threads only touch ls_buffers, and
 * loopscope's worker only the finish job (ls_finish) and the sampler. */
#include "ls_session.h"

#include "ls_activity.h"
#include "ls_buffers.h"
#include "ls_calls.h"
#include "ls_clock.h"
#include "ls_pycodes.h"
#include "ls_cuda.h"
#include "ls_cupti.h"
#include "ls_finish.h"
#include "ls_handover.h"
#include "ls_launches.h"
#include "ls_names.h"
#include "ls_nvtx.h"
#include "ls_rangestack.h"
#include "ls_sampler.h"
#include "ls_subscriber.h"
#include "ls_switchboard.h"
#include "ls_worker.h"

#include <pthread.h>
#include <stdatomic.h>
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
    int sampling;         /* a PM sampling window is open (ls_sampler) */
    int defer;            /* the finish goes to the worker */
    int warmed_up_once;   /* LS_WARM_UP_ONCE: the process has warmed up */
    ls_timestamp_source timestamp_source; /* of the last profile that set it */
    int graph_paused;     /* graph_kernels: the graph-level trace is off for this profile */
    uint64_t graph_execs_before; /* graph execs instantiated before it began */
    ls_handover plan;     /* what this start takes over from the last profile */
    uint32_t generation;
    ls_finish *job;       /* the worker's part of this profile */
    ls_capture capture;
    /* PM sampling waiting for the profiled code's first CUDA context (no
     * context existed at the start): LS_PM_DEFERRED until the resource
     * callback opens the window, then LS_PM_OPENED. */
    _Atomic int pm_deferred;
    ls_sampler_options pm_deferred_options;
    _Atomic int pm_window; /* the sampler's window of this profile, -1: none */
} session;

enum { LS_PM_NOT_DEFERRED = 0, LS_PM_DEFERRED = 1, LS_PM_OPENED = 2 };

const char *ls_session_start_phase_name(int phase)
{
    static const char *const names[LS_START_PHASES] = {
        "wait", "reset", "cupti", "callbacks", "activity", "warm_up", "metrics"};
    return phase >= 0 && phase < LS_START_PHASES ? names[phase] : "?";
}

const char *ls_session_stop_phase_name(int phase)
{
    static const char *const names[LS_STOP_PHASES] = {"callbacks", "release", "records",
                                                       "hand_over"};
    return phase >= 0 && phase < LS_STOP_PHASES ? names[phase] : "?";
}

const char *ls_session_finish_phase_name(int phase)
{
    static const char *const names[LS_FINISH_PHASES] = {"sync", "activity", "metrics",
                                                         "records"};
    return phase >= 0 && phase < LS_FINISH_PHASES ? names[phase] : "?";
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
    /* The job's activity records were the parent's worker's: the child
     * cannot trust what that thread left (ls_worker forgets its tasks). */
    session.job = NULL;
    ls_finish_forget_in_child();
    ls_activity_forget_in_child();
    ls_clock_use(LS_CLOCK_MONOTONIC);
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static void watch_forks(void)
{
    /* The name table's child handler must run first: ls_records_clear
     * releases names. */
    ls_names_watch_forks();
    pthread_atfork(NULL, NULL, forget_in_child);
}

int ls_session_active(void) { return session.active; }
ls_records *ls_session_records(void) { return session.active ? &session.capture.records : NULL; }
void ls_session_mark_injected(void) { session.capture.injected = 1; }
void ls_session_mark_calls_injected(void) { session.capture.calls_injected = 1; }
void ls_session_mark_samples_injected(void) { session.capture.samples_injected = 1; }

/* PM sampling, after tracing started (CUPTI is loaded by then if it can be):
 * only the checks that need no GPU work happen here; the worker sets
 * sampling up and starts it (ls_sampler). */
/* The resource callback (ls_switchboard, on the thread that made the
 * context, inside CUDA): opens the deferred window on that context.  No
 * wait, no allocation, no GIL. */
static void context_created(void *context)
{
    int expected = LS_PM_DEFERRED;
    if (!atomic_compare_exchange_strong(&session.pm_deferred, &expected, LS_PM_OPENED))
        return;
    int window = -1;
    ls_sampler_open(&session.pm_deferred_options, ls_clock_now(), context,
                    session.capture.decoder_error, sizeof session.capture.decoder_error, 1,
                    &window);
    atomic_store(&session.pm_window, window);
}

/* Has context_created called at the next CUDA context's creation: through
 * CUPTI's resource callback (the session holds the callback slot), or for
 * the test source through the switchboard alone (its test hook).  0, or -1
 * when it cannot be watched. */
static int watch_contexts(void)
{
    if (ls_sampler_is_fake()) {
        ls_switchboard_on_context(context_created);
        return 0;
    }
    return session.callbacks ? ls_subscriber_watch_contexts(context_created) : -1;
}

int ls_session_should_wait(const ls_session_options *o)
{
    return ls_handover_should_wait(o->trace, o->callbacks, o->own_timestamps,
                                   session.timestamp_source);
}

/* Waits for the finish in flight to turn the activity kinds off (its time
 * is the start's "wait"): not for its PM tail, which a counters-only start
 * after a traced profile waited for too (6-12 ms, H200 07:44Z).  Not off
 * within the bound (never seen): every finish in flight, as before. */
#define LS_KINDS_OFF_BOUND_NS 2000000000ull
static void wait_for_kinds_off(ls_capture *c)
{
    uint64_t t0 = ls_clock_monotonic_ns();
    if (!ls_activity_wait_off(LS_KINDS_OFF_BOUND_NS))
        ls_worker_wait_idle();
    c->start_phase_ns[LS_START_WAIT] += ls_clock_monotonic_ns() - t0;
}

/* Returns what ls_sampler_open did (LS_SAMPLER_*). */
static int start_metrics(const ls_session_options *o, ls_capture *c, uint64_t start_ns)
{
    atomic_store(&session.pm_deferred, LS_PM_NOT_DEFERRED);
    atomic_store(&session.pm_window, -1);
    if (!o->metrics) {
        snprintf(c->metrics_reason, sizeof c->metrics_reason,
                 "SM and DRAM sampling was turned off (metrics=False)");
        return LS_SAMPLER_NO_WAIT;
    }
    if (!ls_sampler_is_fake()) {
        if (!ls_cuda_driver_present()) {
            snprintf(c->metrics_reason, sizeof c->metrics_reason,
                     "no NVIDIA GPU driver on this machine (libcuda.so.1 cannot be opened)");
            return LS_SAMPLER_NO_WAIT;
        }
        if (ls_cupti_load(o->cupti_paths, o->cupti_path_count) != 0) {
            snprintf(c->metrics_reason, sizeof c->metrics_reason, "%s", ls_cupti_error());
            return LS_SAMPLER_NO_WAIT;
        }
    }
    ls_sampler_options so = {o->pm, LS_PM_KEEP_RUNNING_NS, LS_PM_KEEP_NS, o->pm_wait_for_start,
                             LS_PM_WAIT_BOUND_NS};
    session.sampling = 1;
    c->sampled = 1; /* until the worker says otherwise */
    c->metrics_reason[0] = '\0';
    /* Asked only once sampling will run (CUPTI loaded, which a child
     * forked after its parent loaded it never is): never after a fork. */
    void *context = ls_sampler_is_fake() ? NULL : ls_cuda_current_context();
    int no_context = ls_sampler_is_fake() ? ls_sampler_fake_no_context() : context == NULL;
    if (no_context && watch_contexts() == 0) {
        /* No CUDA context yet (`loopscope run` starts before the script):
         * setting the sampler up now would fail; the first context the
         * profiled code makes opens the window (the device is the one it
         * was made on). */
        session.pm_deferred_options = so;
        atomic_store(&session.pm_deferred, LS_PM_DEFERRED);
        return LS_SAMPLER_NO_WAIT;
    }
    if (so.pm.device < 0 && ls_cuda_current_device(&so.pm.device) != 1)
        so.pm.device = 0;
    int window = -1;
    int opened = ls_sampler_open(&so, start_ns, context, c->decoder_error,
                                 sizeof c->decoder_error, 0, &window);
    atomic_store(&session.pm_window, window);
    if (window < 0 && c->metrics_reason[0] == '\0') {
        snprintf(c->metrics_reason, sizeof c->metrics_reason, "%s", c->decoder_error);
        c->decoder_error[0] = '\0';
    }
    return opened;
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
        ls_subscriber_enable_callbacks(o->syncs, o->trace, why, why_size) != 0) {
        ls_subscriber_release();
        if (why[0] == '\0')
            snprintf(why, why_size, "out of memory for launch records");
        return LS_SUBSCRIBER_ERROR;
    }
    session.callbacks = 1;
    session.launch_callbacks = o->trace;
    return LS_SUBSCRIBER_OK;
}

static void warm_up(const ls_session_options *o, ls_capture *c)
{
    if (o->warm_up == LS_WARM_UP_NONE ||
        (o->warm_up == LS_WARM_UP_ONCE && session.warmed_up_once))
        return;
    if (ls_cuda_warm_up() == 1) {
        c->warmed_up = 1;
        session.warmed_up_once = 1;
    }
}

/* Before any activity kind is enabled: CUPTI's timestamps in ns again,
 * whatever source another tool left registered (ls_clock.h). */
static void own_timestamps(const ls_session_options *o, ls_capture *c)
{
    int owned = o->own_timestamps ? ls_clock_own_cupti_timestamps() : 1;
    c->timestamp_source = owned == 0 ? LS_TIMESTAMPS_OWN
                          : owned > 0 ? LS_TIMESTAMPS_CUPTI_DEFAULT
                                      : LS_TIMESTAMPS_REFUSED;
    if (owned < 0)
        snprintf(c->timestamp_error, sizeof c->timestamp_error, "%s", ls_cupti_error());
}

/* own_timestamps, unless the source registered is loopscope's still
 * (ls_handover): registering it again while PM sampling runs makes the
 * samples in flight partial (H100: 58-68 of a window's ~42 dropped). */
static void register_timestamps(const ls_session_options *o, ls_capture *c)
{
    if (o->own_timestamps && session.plan.keep_timestamps) {
        c->timestamp_source = LS_TIMESTAMPS_OWN;
        return;
    }
    own_timestamps(o, c);
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
    lap(&c->start_phase_ns[LS_START_CUPTI], &t0);
    if (why[0] != '\0') {
        if (o->trace)
            snprintf(c->reason, sizeof c->reason, "%s", why);
        if (o->syncs)
            snprintf(c->syncs_reason, sizeof c->syncs_reason, "%s", why);
        return;
    }
    int claim = LS_SUBSCRIBER_HELD;
    if (o->callbacks)
        claim = start_callbacks(o, why, sizeof why);
    else
        snprintf(why, sizeof why, "CUPTI callbacks were turned off (internal switch)");
    lap(&c->start_phase_ns[LS_START_CALLBACKS], &t0);
    /* Back to back: the last finish may still flush the kinds it left on. */
    int may_continue = o->trace && claim == LS_SUBSCRIBER_OK && o->callbacks;
    if (may_continue) {
        /* What those kinds recorded since the last stop of every profile's
         * launches (a counters-only one that went on beside that finish) is
         * not this profile's: its own launches come later. */
        ls_records *sink = ls_finish_sink(session.job);
        ls_launch_id_raise(&sink->earlier_launch_floor, ls_launches_latest_id());
    }
    int continued = may_continue && session.plan.continue_tracing &&
                    ls_activity_continue(ls_finish_sink(session.job), LS_API_RECORDS_NONE,
                                         o->zeroed_buffers) == 0;
    /* Only such a profile's stop waits for the next start (ls_activity). */
    ls_activity_expect_next(may_continue);
    if (continued) {
        c->timestamp_source = session.timestamp_source;
        c->continued_tracing = 1;
    } else {
        if (ls_handover_needs_kinds_off(o->trace, o->own_timestamps,
                                        session.plan.keep_timestamps)) {
            uint64_t w0 = ls_clock_monotonic_ns();
            ls_activity_wait_stopped(); /* a finish turning its kinds off: a flush */
            c->start_phase_ns[LS_START_WAIT] += ls_clock_monotonic_ns() - w0;
            if (ls_activity_tracing())
                wait_for_kinds_off(c); /* kinds on, not continuable: it owns them until done */
        }
        t0 = ls_clock_monotonic_ns();
        if (o->trace &&
            ls_buffers_configure(o->buffer_bytes, 2, o->max_buffers, o->zeroed_buffers) != 0) {
            /* no buffers: neither tracing nor (as before) syncs */
            if (claim == LS_SUBSCRIBER_OK) {
                ls_subscriber_release();
                session.callbacks = session.launch_callbacks = 0;
            }
            const char *no_buffers = "could not allocate CUPTI activity buffers";
            snprintf(c->reason, sizeof c->reason, "%s", no_buffers);
            if (o->syncs)
                snprintf(c->syncs_reason, sizeof c->syncs_reason, "%s", no_buffers);
            return;
        }
        register_timestamps(o, c);
        lap(&c->start_phase_ns[LS_START_CUPTI], &t0);
    }
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
        api = !o->callbacks       ? LS_API_RECORDS_NONE
              : o->driver_api     ? LS_API_RECORDS_ALL
                                  : LS_API_RECORDS_RUNTIME;
    }
    int activity = continued ? 0
                             : ls_activity_start(ls_finish_sink(session.job), api,
                                                 o->zeroed_buffers, c->reason, sizeof c->reason);
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
    warm_up(o, c);
    lap(&c->start_phase_ns[LS_START_WARM_UP], &t0);
    session.tracing = 1;
    c->traced = 1;
    c->graph_level = ls_activity_graph_trace_on();
    if (c->graph_level && o->graph_kernels) {
        /* Per kernel for this profile: only while the instantiations are
         * counted, since the trace may go on again at the stop only if no
         * graph was made meanwhile. */
        if (claim == LS_SUBSCRIBER_OK && ls_subscriber_watch_graph_execs() == 0) {
            session.graph_execs_before = ls_switchboard_graph_execs_created();
            if (ls_activity_pause_graph_trace() == 0) {
                session.graph_paused = 1;
                c->graph_level = 0;
                c->graph_kernels = 1;
            }
        }
        if (!session.graph_paused)
            snprintf(c->note, sizeof c->note, "graph_kernels=True was not possible (it needs "
                     "CUPTI's callbacks, to watch graph instantiations): CUDA-graph replays "
                     "were traced whole");
    }
    c->reason[0] = '\0';
}

uint64_t ls_session_wait_for_finish(void)
{
    uint64_t t0 = ls_clock_monotonic_ns();
    if (!ls_activity_wait_off(LS_KINDS_OFF_BOUND_NS))
        ls_worker_wait_idle();
    return ls_clock_monotonic_ns() - t0;
}

int ls_session_start(const ls_session_options *options, uint64_t waited_ns,
                     ls_session_state *state)
{
    if (session.active)
        return -1;
    pthread_once(&fork_once, watch_forks);
    memset(&session.capture, 0, sizeof session.capture);
    uint64_t t0 = ls_clock_monotonic_ns();
    uint64_t *phase = session.capture.start_phase_ns;
    phase[LS_START_WAIT] = waited_ns;
    ls_cupti_clear_error();
    session.job = ls_finish_new();
    if (session.job == NULL ||
        ls_ranges_reserve(&session.capture.records.ranges, LS_RANGE_RESERVE) != 0) {
        ls_finish_discard(session.job);
        session.job = NULL;
        return -1;
    }
    session.tracing = 0;
    session.callbacks = 0;
    session.launch_callbacks = 0;
    session.sampling = 0;
    session.defer = options->defer;
    session.plan = ls_handover_plan(options->trace, options->callbacks, session.timestamp_source);
    /* The call store and code table exist in every session: the test hook
     * feeds them without CUPTI. */
    if (ls_calls_reset() != 0 || ls_pycodes_reset(LS_MAX_CODES, LS_CODE_ARENA) != 0 ||
        ls_launches_reset(0) != 0) {
        ls_finish_discard(session.job);
        session.job = NULL;
        return -1;
    }
    lap(&phase[LS_START_RESET], &t0);
    session.capture.warm_up_mode = (uint32_t)options->warm_up;
    start_cupti(options, &session.capture);
    /* PM samples carry CUPTI's clock: a profile that samples runs on it
     * even without tracing (loading CUPTI here costs nothing once loaded). */
    int samples_on_cupti_clock = options->metrics && !ls_sampler_is_fake() &&
                                 ls_cuda_driver_present() &&
                                 ls_cupti_load(options->cupti_paths, options->cupti_path_count) == 0;
    if (samples_on_cupti_clock && session.capture.timestamp_source == LS_TIMESTAMPS_UNSET) {
        ls_activity_wait_stopped();
        if (ls_activity_tracing())
            wait_for_kinds_off(&session.capture); /* no source change under its kinds */
        register_timestamps(options, &session.capture);
    }
    if (session.capture.timestamp_source != LS_TIMESTAMPS_UNSET)
        session.timestamp_source = session.capture.timestamp_source;
    int uses_cupti = session.tracing || session.callbacks || samples_on_cupti_clock;
    ls_clock_use(uses_cupti ? LS_CLOCK_CUPTI : LS_CLOCK_MONOTONIC);
    /* The window begins here: what the warm-up did is before it.  Its host
     * reference, read beside it, checks the clock's rate at the stop. */
    uint64_t start_ns = ls_clock_now();
    session.capture.start_reference_ns = ls_clock_reference_ns();
    t0 = ls_clock_monotonic_ns();
    int opened = start_metrics(options, &session.capture, start_ns);
    if (opened == LS_SAMPLER_WAITED_FOR_SLOT) {
        /* It waited for earlier profiles' finishes to free a window: the
         * start's wait, as the one for the last finish is. */
        phase[LS_START_WAIT] += ls_clock_monotonic_ns() - t0;
        t0 = ls_clock_monotonic_ns();
    } else if (opened != LS_SAMPLER_NO_WAIT) {
        session.capture.pm_wait_ns = ls_clock_monotonic_ns() - t0;
        session.capture.pm_wait_timed_out = opened == LS_SAMPLER_WAIT_TIMED_OUT;
    }
    if (opened != LS_SAMPLER_NO_WAIT) {
        /* The start waited (for the sampler's set-up, or for a window
         * slot): the profile begins after the wait (so after sampling
         * began, when it did), and the wait is no part of the window the
         * samples must cover. */
        start_ns = ls_clock_now();
        session.capture.start_reference_ns = ls_clock_reference_ns();
        ls_sampler_move_start(atomic_load(&session.pm_window), start_ns);
    }
    ls_finish_begin(session.job, session.tracing, options->pm.decode_period_ns);
    lap(&phase[LS_START_METRICS], &t0);
    session.generation++;
    session.active = 1;
    session.capture.records.start_ns = start_ns;
    state->tracing = session.tracing;
    state->reason = session.capture.reason;
    state->watching_syncs = session.capture.watched_syncs;
    state->syncs_reason = session.capture.syncs_reason;
    state->sampling = session.sampling;
    state->metrics_reason = session.capture.metrics_reason;
    return 0;
}

int ls_session_stop(struct ls_finish **pending, uint64_t *cost_ns)
{
    if (!session.active)
        return -1;
    ls_capture *c = &session.capture;
    uint64_t stop_ns = ls_clock_now();
    c->stop_reference_ns = ls_clock_reference_ns();
    c->records.stop_ns = stop_ns;
    uint64_t *phase = c->stop_phase_ns;
    uint64_t t0 = ls_clock_monotonic_ns(), begun = t0;
    /* The context the profile's work ran on, for the worker's wait. */
    void *context = session.tracing ? ls_cuda_current_context() : NULL;
    if (session.graph_paused) {
        /* On this thread, while the instantiations are still counted: the
         * trace on first, then the count read, so that every exec made
         * while it was off is counted (one made after is made with it on);
         * if any was, the trace goes off for good. */
        int on = ls_activity_resume_graph_trace() == 0;
        uint64_t made = ls_switchboard_graph_execs_created() - session.graph_execs_before;
        if (on && made > 0)
            ls_activity_end_graph_trace();
        c->graph_level_ended = !on || made > 0;
        session.graph_paused = 0;
        if (c->graph_level_ended)
            snprintf(c->note, sizeof c->note, "a CUDA graph was instantiated during this "
                     "graph_kernels=True profile, so graph-level mode (loopscope.prepare()) is "
                     "off for the rest of the process: CUPTI would crash replaying that graph "
                     "with the graph-level trace on; later profiles record each kernel");
    }
    ls_subscriber_disable_callbacks();
    c->stop_launch_id = ls_launches_latest_id(); /* every launch of the window is in */
    ls_switchboard_on_context(NULL);
    int window = atomic_load(&session.pm_window);
    ls_sampler_close(window, stop_ns);
    c->pm_window = window;
    if (atomic_exchange(&session.pm_deferred, LS_PM_NOT_DEFERRED) == LS_PM_DEFERRED) {
        c->sampled = 0;
        snprintf(c->metrics_reason, sizeof c->metrics_reason,
                 "no CUDA context was made while the profile ran (the code it profiled never "
                 "used the GPU), so there was nothing to sample");
    }
    lap(&phase[LS_STOP_CALLBACKS], &t0);
    ls_subscriber_release();
    lap(&phase[LS_STOP_RELEASE], &t0);
    /* The stores are process wide and the next start empties them: move
     * their records out now (callbacks are off, nothing writes them). */
    if (session.launch_callbacks) {
        size_t before = c->records.apis.count;
        c->records.dropped_records += ls_launches_move_to(&c->records.apis);
        c->launch_records = c->records.apis.count - before;
    }
    c->records.dropped_records += ls_calls_move_to(&c->records.calls, stop_ns);
    ls_pycodes_take(&c->records.codes);
    c->codes_refused = ls_pycodes_refused();
    lap(&phase[LS_STOP_RECORDS], &t0);
    ls_clock_use(LS_CLOCK_MONOTONIC);
    ls_finish_plan plan = {session.tracing, session.sampling, context, session.defer};
    ls_finish *job = session.job;
    session.job = NULL;
    session.active = 0;
    session.tracing = 0;
    session.callbacks = 0;
    session.launch_callbacks = 0;
    session.sampling = 0;
    ls_finish_hand_over(job, c, &plan); /* takes the capture over, zeroes *c */
    *cost_ns = ls_clock_monotonic_ns() - begun;
    *pending = job;
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
    if (step_index >= 0 && ls_rangestack_open_steps(stack, generation) > 0) {
        /* A step whose end is marked (steps=module: held after its caller
         * returned, in case the function returned into makes the next
         * call) yields to a new step when it is the innermost range: it
         * ends at its mark, and its own exit later closes nothing.  Any
         * other open step refuses the new one: steps do not nest. */
        const ls_open_range *top = ls_rangestack_top(stack);
        uint32_t held = LS_OPEN_STEP | LS_OPEN_ENDED;
        if (top == NULL || (top->flags & held) != held || top->generation != generation)
            return LS_PUSH_STEP_OPEN;
        ls_open_range ended = ls_rangestack_remove(stack, (ptrdiff_t)ls_rangestack_size(stack) - 1);
        if (ended.flags & LS_OPEN_NVTX)
            ls_nvtx_pop();
        ls_rangestack_note_yielded(stack, ended.owner);
    }
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

/* The end of `owner`'s innermost range on this thread, marked (now) or
 * taken back (0: ended by its exit, or at a stop meanwhile, ls_finish). */
static int set_marked_end(uint64_t owner, int mark)
{
    ls_rangestack *stack = ls_rangestack_mine();
    ptrdiff_t at = ls_rangestack_find(stack, owner);
    if (at < 0)
        return -1;
    ls_open_range entry = stack->items[at];
    if (session.active && entry.generation == session.generation && entry.record >= 0)
        session.capture.records.ranges.items[entry.record].end_ns = mark ? ls_clock_now() : 0;
    uint32_t flags = mark ? entry.flags | LS_OPEN_ENDED : entry.flags & ~LS_OPEN_ENDED;
    /* NVTX ranges nest per thread: one with a range above it ends at the
     * exit; one popped at a mark is never pushed again */
    if (mark && (flags & LS_OPEN_NVTX) && (size_t)at + 1 == ls_rangestack_size(stack)) {
        ls_nvtx_pop();
        flags &= ~LS_OPEN_NVTX;
    }
    ls_rangestack_set_flags(stack, at, flags);
    return 0;
}

int ls_session_mark_end(uint64_t owner) { return set_marked_end(owner, 1); }

int ls_session_unmark_end(uint64_t owner) { return set_marked_end(owner, 0); }

ls_exit_result ls_session_pop(uint64_t owner)
{
    ls_rangestack *stack = ls_rangestack_mine();
    ptrdiff_t at = ls_rangestack_find(stack, owner);
    if (at < 0) {
        if (ls_rangestack_take_yielded(stack, owner))
            return LS_EXIT_CLOSED; /* a new step ended it at its mark (ls_session_push) */
        if (session.active)
            session.capture.range_mismatches++;
        return LS_EXIT_NOT_OPEN;
    }
    int innermost = (size_t)at + 1 == ls_rangestack_size(stack);
    ls_open_range entry = ls_rangestack_remove(stack, at);
    int ours = session.active && entry.generation == session.generation;
    if (ours && entry.record >= 0 && !(entry.flags & LS_OPEN_ENDED))
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
