/* ls_session: the one profiling session of the process (CUPTI is process
 * wide, so the session is too).  Owns the record arrays while it runs, the
 * per-thread range stacks, and the order of start and stop.  A child forked
 * while a session runs drops its copy of it (without a CUPTI call) and may
 * start its own. */
#ifndef LS_SESSION_H
#define LS_SESSION_H

#include "ls_pmsampling.h"
#include "ls_records.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int trace;               /* trace GPU activity through CUPTI */
    int syncs;               /* watch the calls that make the host wait (callbacks) */
    int driver_api;          /* fallback path: driver-API activity records too */
    int warm_up;             /* pay CUPTI's lazy set-up at start (ls_cuda_warm_up) */
    size_t buffer_bytes;     /* size of one activity buffer */
    size_t max_buffers;      /* cap of the buffer pool */
    const char *const *cupti_paths;
    size_t cupti_path_count;
    int metrics;             /* sample SM/DRAM counters (CUPTI PM sampling) */
    ls_pm_options pm;        /* how */
} ls_session_options;

typedef struct {
    int tracing;               /* 1 when CUPTI records GPU activity */
    const char *reason;        /* why not, "" when tracing */
    int watching_syncs;        /* 1 when the calls that wait are watched */
    const char *syncs_reason;  /* why not, "" when watching */
    int sampling;              /* 1 when PM sampling runs */
    const char *metrics_reason; /* why not, "" when sampling */
} ls_session_state;

/* The steps of start and stop whose host time is reported (CLOCK_MONOTONIC),
 * so the profile's own cost can be read off every summary. */
enum {
    LS_START_RESET,     /* record arrays, call store, code table */
    LS_START_CUPTI,     /* loading CUPTI, activity buffers */
    LS_START_CALLBACKS, /* subscribing and enabling the callbacks */
    LS_START_ACTIVITY,  /* enabling the activity kinds */
    LS_START_WARM_UP,   /* the warm-up memset and its wait */
    LS_START_METRICS,   /* PM sampling (its own steps are in ls_pm_stats) */
    LS_START_PHASES
};
enum {
    LS_STOP_CALLBACKS,  /* disabling the callbacks */
    LS_STOP_SYNC,       /* waiting for the GPU work of the profile */
    LS_STOP_ACTIVITY,   /* disabling activity, flushing and parsing the buffers */
    LS_STOP_RELEASE,    /* unsubscribing */
    LS_STOP_METRICS,    /* stopping PM sampling and decoding the last samples */
    LS_STOP_RECORDS,    /* moving and filtering the records */
    LS_STOP_PHASES
};

/* "reset", "cupti", ... for LS_START_*; "callbacks", "sync", ... for LS_STOP_*. */
const char *ls_session_start_phase_name(int phase);
const char *ls_session_stop_phase_name(int phase);

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
    uint64_t drains;           /* buffer drains during the session */
    uint64_t drain_ns;         /* host time they took */
    uint64_t stop_ns_cost;     /* host time stop took (sync + flush + parse) */
    uint64_t start_phase_ns[LS_START_PHASES]; /* host time of each step of start */
    uint64_t stop_phase_ns[LS_STOP_PHASES];   /* host time of each step of stop */
    uint64_t buffer_bytes;     /* activity buffer memory in use */
    uint64_t buffers_refused;  /* CUPTI asked for a buffer, none was left */
    int sampled;               /* PM sampling ran */
    int samples_injected;      /* test samples were injected */
    char metrics_reason[1024]; /* why no PM sampling, "" when it ran */
    char decoder_error[256];   /* why samples were decoded only at stop, "" normally */
    ls_pm_stats pm;            /* PM sampling's figures (valid when sampled) */
    int64_t sample_clock_delta_ns; /* first sample start minus sampling start, as decoded */
    int64_t sample_clock_shift_ns; /* added to every sample: 0 when they share the clock */
} ls_capture;

/* 1 while a session runs. */
int ls_session_active(void);

/* Starts the session.  Returns 0 (GPU tracing may still be off: see
 * state->reason), -1 if a session is already running or memory ran out. */
int ls_session_start(const ls_session_options *options, ls_session_state *state);

/* Ends the session and moves its records into `out` (caller owns them, free
 * with ls_records_clear).  Returns 0, -1 when no session runs. */
int ls_session_stop(ls_capture *out);

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
