/* ls_session: the one profiling session of the process (CUPTI is process
 * wide, so the session is too).  Owns the record arrays while it runs, the
 * per-thread range stacks, and the order of start and stop.  The stop only
 * notes the end time, turns the callbacks off and hands the rest to
 * loopscope's worker thread (ls_finish); a start waits for the last
 * profile's finish.  A child forked while a session runs drops its copy of
 * it (without a CUPTI call) and may start its own. */
#ifndef LS_SESSION_H
#define LS_SESSION_H

#include "ls_capture.h"
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
    int warm_up;             /* ls_warm_up (an int: read from Python as one) */
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
    int pm_wait_for_start;   /* LS_SAMPLER_WAIT_*: when start waits for the sampler's
                              * set-up and start */
    int own_timestamps;      /* register loopscope's CUPTI timestamp source (ls_clock.h);
                              * 0 only to measure what another tool's source does */
    int graph_kernels;       /* graph-level mode on (ls_graphs): this profile records
                              * each replay's kernels instead (issue 27) */
} ls_session_options;

typedef struct {
    int tracing;               /* 1 when CUPTI records GPU activity */
    const char *reason;        /* why not, "" when tracing */
    int watching_syncs;        /* 1 when the calls that wait are watched */
    const char *syncs_reason;  /* why not, "" when watching */
    int sampling;              /* 1 when PM sampling runs */
    const char *metrics_reason; /* why not, "" when sampling */
} ls_session_state;

/* The names of the phases of ls_capture.h: "wait", "reset", ... for
 * LS_START_*; "callbacks", ... for LS_STOP_*;
 * "sync", ... for LS_FINISH_*. */
const char *ls_session_start_phase_name(int phase);
const char *ls_session_stop_phase_name(int phase);
const char *ls_session_finish_phase_name(int phase);


/* 1 while a session runs. */
int ls_session_active(void);

/* 1 when a start with these options must first wait for the last
 * profile's finish (ls_session_wait_for_finish, without the GIL): that
 * finish still traces and this start cannot continue its tracing. */
int ls_session_should_wait(const ls_session_options *o);

/* Blocks until the last profile's finish turned its activity kinds off
 * (not for its PM tail), so a start can follow.  Call without the GIL,
 * before ls_session_start; returns the time waited. */
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
 * step of the same session is open on the thread, unless that one is the
 * innermost range and its end is marked (ls_session_mark_end): it then ends
 * at its mark, and its exit later closes nothing.  Returns LS_PUSH_OK,
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

/* Marks the end of the innermost range `owner` has open on the calling
 * thread at this instant, while it stays open: its exit later keeps this
 * end (steps=module: a step whose caller returned, held open in case the
 * function returned into makes the next call).  Its NVTX range is popped
 * now when it is the innermost.  ls_session_unmark_end takes the mark back:
 * the exit then ends it (its NVTX range stays popped).  Each returns 0, or
 * -1 when `owner` has nothing open on this thread. */
int ls_session_mark_end(uint64_t owner);
int ls_session_unmark_end(uint64_t owner);

/* The live session's records (for the test hook), NULL when none runs. */
ls_records *ls_session_records(void);
void ls_session_mark_injected(void);
void ls_session_mark_calls_injected(void);
void ls_session_mark_samples_injected(void);

#endif
