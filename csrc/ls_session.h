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

/* Range edges: the hot path.  They never raise, never take the GIL (the
 * callers hold it), and allocate only through the amortised growth of the
 * range array and the thread's stack.  Outside a session they only drive
 * NVTX.  An exit closes the range its owner opened (by identity): see
 * ls_rangestack. */

/* A token no other range owner has: one per Range, step or layer object. */
uint64_t ls_session_new_owner(void);

enum { LS_PUSH_OK = 0, LS_PUSH_STEP_OPEN = -1, LS_PUSH_NO_MEMORY = -2 };

/* Opens a range named by the live id `name_id` for `owner` on the calling
 * thread: NVTX push (by `nvtx_handle` when not NULL, else `nvtx_text` when
 * not NULL, else the name's text) and, while a session runs, a range record
 * (the records then hold the name; a step's name_id is its template, see
 * ls_names_format).  A step (`step_index >= 0`) is refused while another
 * step of the same session is open on the thread.  Returns LS_PUSH_OK,
 * LS_PUSH_STEP_OPEN or LS_PUSH_NO_MEMORY (a record that could not be kept
 * counts as dropped); on failure nothing is pushed. */
int ls_session_push(uint64_t owner, uint32_t name_id, int32_t step_index, void *nvtx_handle,
                    const char *nvtx_text);

typedef enum {
    LS_EXIT_CLOSED = 0,       /* closed the thread's innermost open range */
    LS_EXIT_OUT_OF_ORDER = 1, /* closed its owner's range, with others still open inside it */
    LS_EXIT_NOT_OPEN = 2,     /* its owner had no range open on this thread: nothing done */
} ls_exit_result;

/* Closes the innermost range `owner` has open on the calling thread (NVTX
 * pop, end time).  Exits out of order and exits with nothing open count as
 * range mismatches of the running session; an exit with nothing open pops
 * no NVTX range, so NVTX pairs stay balanced per thread. */
ls_exit_result ls_session_pop(uint64_t owner);

/* Parses completed CUPTI activity buffers if any wait, so the pool recycles
 * and long loops never run out of buffers; one atomic load otherwise.
 * Belongs to the session's background work (issue 11's worker); until that
 * exists a step's enter calls it, never a range's exit. */
void ls_session_service(void);

/* The live session's records (for the test hook), NULL when none runs. */
ls_records *ls_session_records(void);
void ls_session_mark_injected(void);
void ls_session_mark_calls_injected(void);
void ls_session_mark_samples_injected(void);

#endif
