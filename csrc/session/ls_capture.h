/* ls_capture: everything a finished profile hands to its owner (the
 * records and what is known about how they were taken), and the steps of
 * its start, stop and finish whose host time is reported.  Filled by
 * ls_session (start and stop, on the user's thread), ls_finish and
 * ls_sampler (the finish, on loopscope's worker); owned by the Capture
 * object (ls_capture_type) afterwards.  Types only. */
#ifndef LS_CAPTURE_H
#define LS_CAPTURE_H

#include "ls_pmsampling.h"
#include "ls_records.h"

#include <stdint.h>

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

/* Where CUPTI's timestamps came from during the session. */
typedef enum {
    LS_TIMESTAMPS_UNSET = 0,          /* CUPTI not used */
    LS_TIMESTAMPS_OWN = 1,            /* loopscope's source registered (ls_clock.h) */
    LS_TIMESTAMPS_CUPTI_DEFAULT = 2,  /* this CUPTI cannot register one: its default */
    LS_TIMESTAMPS_REFUSED = 3,        /* CUPTI refused: whatever source was there */
} ls_timestamp_source;

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
    uint64_t calls_before_start; /* blocking calls and sync records of the warm-up: left out */
    uint64_t codes_refused;    /* Python code objects the code table had no room for */
    uint64_t range_mismatches; /* exits with no matching enter */
    uint64_t ranges_left_open; /* ranges closed by stop */
    uint64_t ops_before_start; /* ops that ended before the profile began: left out */
    uint64_t ops_after_stop;   /* ops launched after the profile ended: left out */
    uint32_t stop_launch_id;   /* ls_launches_latest_id() at the stop */
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
    char interval_note[512];   /* the decoder fell behind: what the interval is now, "" if not */
    ls_pm_stats pm;            /* PM sampling's figures (valid when sampled) */
    int64_t sample_clock_delta_ns; /* first sample start minus sampling start, as decoded */
    int64_t sample_clock_shift_ns; /* added to every sample of the run: 0 on one clock */
    uint64_t sample_clock_latest_ns; /* the latest sample end the clock check saw */
    uint64_t samples_outside;  /* decoded samples outside the profile's window: left out */
    uint64_t pm_setup_ns;      /* host time the worker took to set sampling up and start it */
    uint64_t pm_began_ns;      /* CUPTI clock when sampling began for this profile */
    int pm_window;             /* its window on the sampler (ls_sampler), -1: none */
    uint64_t pm_wait_ns;       /* host time start waited for the sampler's set-up */
    int pm_wait_timed_out;     /* 1 when that wait reached its bound */
    uint64_t start_reference_ns; /* the host reference clock beside records.start_ns */
    uint64_t stop_reference_ns;  /* ... and beside records.stop_ns (ls_clock_reference_ns) */
    ls_timestamp_source timestamp_source;
    char timestamp_error[256]; /* why CUPTI refused loopscope's source, "" normally */
    int continued_tracing;     /* 1: started while the last profile still finished, tracing
                                * continued from it (back to back, no wait) */
    int graph_level;           /* 1: CUDA-graph replays traced whole (ls_graphs) */
    int graph_kernels;         /* 1: graph-level mode on, but this profile recorded each
                                * replay's kernels (graph_kernels=True) */
    int graph_level_ended;     /* 1: a graph was instantiated during such a profile, so
                                * graph-level mode ended for the process */
} ls_capture;

#endif
