/* ls_session: the one profiling session of the process (CUPTI is process
 * wide, so the session is too).  Owns the record arrays while it runs, the
 * per-thread range stacks, and the order of start and stop.  The stop only
 * notes the end time, turns the callbacks off and hands the rest to
 * loopscope's worker thread (ls_finish); a start waits for the last
 * profile's finish. */
#ifndef LS_SESSION_H
#define LS_SESSION_H

#include "ls_pmsampling.h"
#include "ls_records.h"

#include <stddef.h>
#include <stdint.h>

/* When start pays CUPTI's lazy set-up (ls_cuda_warm_up). */
typedef enum {
    LS_WARM_UP_NONE = 0,
    LS_WARM_UP_EVERY = 1, /* at every start */
    LS_WARM_UP_ONCE = 2,  /* at the first traced start of the process */
} ls_warm_up;

typedef struct {
    int trace;               /* trace GPU activity through CUPTI */
    int syncs;               /* watch the calls that make the host wait (callbacks) */
    int driver_api;          /* fallback path: driver-API activity records too */
    ls_warm_up warm_up;
    int zeroed_buffers;      /* hand CUPTI cleared activity buffers (ls_buffers) */
    int defer;               /* finish on the worker thread (0: inside stop) */
    int callbacks;           /* claim CUPTI's callbacks (0: activity records only, no
                              * launch records or syncs: the floor of tracing's cost) */
    size_t buffer_bytes;     /* size of one activity buffer */
    size_t max_buffers;      /* cap of the buffer pool */
    const char *const *cupti_paths;
    size_t cupti_path_count;
    int metrics;             /* sample SM/DRAM counters (CUPTI PM sampling) */
    ls_pm_options pm;        /* how */
    uint64_t pm_keep_ns;         /* sampling stays enabled this long after a profile */
    uint64_t pm_keep_running_ns; /* ... and running this long (0: stopped at the finish) */
    int pm_wait_for_start;   /* start waits for the sampler's set-up and start */
} ls_session_options;

typedef struct {
    int tracing;               /* 1 when CUPTI records GPU activity */
    const char *reason;        /* why not, "" when tracing */
    int watching_syncs;        /* 1 when the calls that wait are watched */
    const char *syncs_reason;  /* why not, "" when watching */
    int sampling;              /* 1 when PM sampling runs */
    const char *metrics_reason; /* why not, "" when sampling */
} ls_session_state;

/* The steps of start, stop (the user's thread) and finish (the worker)
 * whose host time is reported (CLOCK_MONOTONIC), so the profile's own cost
 * can be read off every summary. */
enum {
    LS_START_WAIT,      /* waiting for the last profile's finish on the worker */
    LS_START_RESET,     /* record arrays, call store, code table */
    LS_START_CUPTI,     /* loading CUPTI, activity buffers */
    LS_START_CALLBACKS, /* subscribing and enabling the callbacks */
    LS_START_ACTIVITY,  /* enabling the activity kinds */
    LS_START_WARM_UP,   /* the warm-up memset and its wait */
    LS_START_METRICS,   /* handing PM sampling's start to the worker (ls_sampler) */
    LS_START_PHASES
};
enum {
    LS_STOP_CALLBACKS,  /* disabling the callbacks */
    LS_STOP_RELEASE,    /* unsubscribing */
    LS_STOP_RECORDS,    /* moving the launch and call records out of their stores */
    LS_STOP_HAND_OVER,  /* handing the rest to the worker (or doing it here) */
    LS_STOP_PHASES
};
enum {
    LS_FINISH_SYNC,     /* waiting for the GPU work of the profile */
    LS_FINISH_ACTIVITY, /* disabling activity, flushing and parsing the buffers */
    LS_FINISH_METRICS,  /* stopping PM sampling, the last decode, the window's samples */
    LS_FINISH_RECORDS,  /* merging and filtering the records */
    LS_FINISH_PHASES
};

/* "wait", "reset", ... for LS_START_*; "callbacks", ... for LS_STOP_*;
 * "sync", ... for LS_FINISH_*. */
const char *ls_session_start_phase_name(int phase);
const char *ls_session_stop_phase_name(int phase);
const char *ls_session_finish_phase_name(int phase);

/* Everything a finished session hands to its owner. */
typedef struct {
    ls_records records;
    int traced;                /* CUPTI traced the session */
    int injected;              /* test records were injected */
    int calls_injected;        /* test API calls went through the switchboard */
    char reason[1024];         /* why the GPU part is missing, "" if present */
    char stop_error[1024];     /* a CUPTI failure at stop, "" if none */
    char note[1024];           /* traced, but with something missing ("" if not) */
    int watched_syncs;         /* the calls that wait were watched (callbacks) */
    char syncs_reason[1024];   /* why not, "" when watched */
    uint64_t calls_before_start; /* blocking calls of the warm-up: left out */
    uint64_t codes_refused;    /* Python code objects the code table had no room for */
    uint64_t range_mismatches; /* exits with no matching enter */
    uint64_t ranges_left_open; /* ranges closed by stop */
    uint64_t ops_before_start; /* ops that ended before the profile began: left out */
    uint64_t ops_after_stop;   /* ops launched after the profile ended: left out */
    uint64_t records_after_stop; /* API records, syncs and calls after the end: left out */
    uint64_t drains;           /* buffer drains during the session (on the worker) */
    uint64_t drain_ns;         /* host time they took */
    uint64_t stop_ns_cost;     /* host time stop took on the user's thread (set by the owner) */
    uint64_t start_phase_ns[LS_START_PHASES]; /* host time of each step of start */
    uint64_t stop_phase_ns[LS_STOP_PHASES];   /* host time of each step of stop */
    uint64_t finish_phase_ns[LS_FINISH_PHASES]; /* host time of each step of the finish */
    uint64_t finish_ns;        /* host time of the whole finish */
    uint64_t finish_wait_ns;   /* how long its owner waited for the finish */
    int finished_on_worker;    /* 1: on the worker thread; 0: inside stop */
    char finish_error[256];    /* why the finish ran inside stop or failed, "" normally */
    uint64_t launch_records;   /* launch calls seen through callbacks */
    int warmed_up;             /* start ran the warm-up */
    uint32_t warm_up_mode;     /* ls_warm_up asked for */
    uint64_t buffer_bytes;     /* activity buffer memory in use */
    uint64_t buffers_refused;  /* CUPTI asked for a buffer, none was left */
    int sampled;               /* PM sampling ran */
    int samples_injected;      /* test samples were injected */
    char metrics_reason[1024]; /* why no PM sampling, "" when it ran */
    char decoder_error[256];   /* why samples were decoded only at the end, "" normally */
    ls_pm_stats pm;            /* PM sampling's figures (valid when sampled) */
    int64_t sample_clock_delta_ns; /* first sample start minus sampling start, as decoded */
    int64_t sample_clock_shift_ns; /* added to every sample: 0 when they share the clock */
    uint64_t samples_outside;  /* decoded samples outside the profile's window: left out */
    uint64_t pm_setup_ns;      /* host time the worker took to set sampling up and start it */
    uint64_t pm_began_ns;      /* CUPTI clock when sampling began for this profile */
} ls_capture;

/* 1 while a session runs. */
int ls_session_active(void);

/* Blocks until the last profile's finish is done, so a start can follow.
 * Call without the GIL, before ls_session_start; returns the time waited. */
uint64_t ls_session_wait_for_finish(void);

/* Starts the session.  Returns 0 (GPU tracing may still be off: see
 * state->reason), -1 if a session is already running or memory ran out.
 * waited_ns: what ls_session_wait_for_finish took, for the report. */
int ls_session_start(const ls_session_options *options, uint64_t waited_ns,
                     ls_session_state *state);

struct ls_finish;

/* Ends the session: notes the end time and turns the callbacks off; the
 * rest runs on the worker.  *pending gets the job that ends with the
 * records (ls_finish.h: the caller owns it), *cost_ns the host time the
 * stop took on this thread.  Returns 0, -1 when no session runs. */
int ls_session_stop(struct ls_finish **pending, uint64_t *cost_ns);

/* Range edges: the hot path.  Never raise, never allocate beyond amortised
 * growth of the range array.  push returns 0, or -1 when `step_index >= 0`
 * and a step is already open on this thread (steps do not nest); nothing
 * is pushed then.  Outside a session they only drive NVTX. */
int ls_session_push(uint32_t name_id, int32_t step_index);
void ls_session_pop(int is_step);

/* The live session's records (for the test hook), NULL when none runs. */
ls_records *ls_session_records(void);
void ls_session_mark_injected(void);
void ls_session_mark_calls_injected(void);
void ls_session_mark_samples_injected(void);

#endif
