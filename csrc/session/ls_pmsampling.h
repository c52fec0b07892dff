/* ls_pmsampling: CUPTI PM sampling of one device's performance counters.
 *
 * Start builds a single-pass config (ls_pmconfig; its image is read from
 * and written to the disk cache of ls_pmcache when a folder is given),
 * enables sampling on the device with a GPU-time trigger (SYSCLK where time
 * is unsupported), sizes the hardware buffer and the counter data image, and
 * starts.  Decode moves what the hardware buffer holds into ls_sample
 * records (values converted to the named figures of ls_records.h).  Every
 * function runs on loopscope's worker thread (ls_sampler), one at a time,
 * never in a CUPTI callback.  The config is kept for the next profile, and
 * sampling stays enabled after a stop until ls_pm_release.  Every failure
 * becomes a sentence; nothing here exits or raises. */
#ifndef LS_PMSAMPLING_H
#define LS_PMSAMPLING_H

#include "ls_records.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int device;              /* CUDA ordinal; -1: the current context's device (else 0) */
    uint64_t interval_ns;    /* sampling interval */
    size_t hw_buffer_bytes;  /* hardware buffer the GPU writes records into */
    uint32_t max_samples;    /* samples one counter data image holds; 0: sized for a
                              * decode period (see ls_pm_counter_samples) */
    uint64_t decode_period_ns; /* how often the worker empties the buffer */
    char cache_dir[1024];    /* folder of the config image cache (ls_pmcache), "" for none */
} ls_pm_options;

/* Whether two option sets make the same sampler (device, interval, hardware
 * buffer, image size): a running one can then serve the next window as it
 * is (decode period and cache folder do not change the sampler). */
static inline int ls_pm_same_sampler(const ls_pm_options *a, const ls_pm_options *b)
{
    return a->device == b->device && a->interval_ns == b->interval_ns &&
           a->hw_buffer_bytes == b->hw_buffer_bytes && a->max_samples == b->max_samples;
}

/* The set-up and tear-down steps whose host time is reported. */
enum {
    LS_PM_PHASE_INIT,         /* the profiler back end: libnvperf, cuptiProfilerInitialize */
    LS_PM_PHASE_CHIP,         /* cuptiDeviceGetChipName */
    LS_PM_PHASE_AVAILABILITY, /* the device's counter availability image */
    LS_PM_PHASE_CACHE,        /* reading (and checking) or writing the cached config image */
    LS_PM_PHASE_HOST,         /* host objects: made to build the image, or to evaluate */
    LS_PM_PHASE_IMAGE,        /* building config images and counting their passes */
    LS_PM_PHASE_RELEASE,      /* disabling an earlier profile's other configuration */
    LS_PM_PHASE_ENABLE,       /* cuptiPmSamplingEnable */
    LS_PM_PHASE_SET_CONFIG,   /* cuptiPmSamplingSetConfig: the hardware buffer */
    LS_PM_PHASE_COUNTER_DATA, /* sizing and initialising the counter data image */
    LS_PM_PHASE_START,        /* cuptiPmSamplingStart */
    LS_PM_PHASE_STOP,         /* cuptiPmSamplingStop and the last decode */
    LS_PM_PHASE_RESET,        /* resetting the counter data image for the next start */
    LS_PM_PHASES
};

typedef struct {
    int device;
    char chip[64];
    int time_trigger;          /* 1: GPU time interval, 0: SYSCLK interval */
    uint64_t interval;         /* ns (time trigger) or SYSCLK cycles */
    uint64_t hw_buffer_bytes, counter_data_bytes;
    unsigned char collected[LS_METRICS]; /* 1 for each figure sampled */
    char collected_names[1024];  /* the CUPTI metric names sampled, comma separated */
    char dropped[1024];          /* CUPTI metric names dropped to fit one pass, "" if none */
    uint64_t started_ns;         /* CUPTI's clock right after sampling started */
    uint64_t stopped_ns;         /* CUPTI's clock right after it stopped (after the tail's
                                    decode when sampling went on) */
    uint64_t samples;            /* samples decoded */
    uint64_t overflows;          /* decodes that found the hardware buffer overflowed */
    uint64_t counter_data_full;  /* decodes that filled the counter data image */
    uint64_t incomplete;         /* partial samples dropped (ls_samples_settle) */
    uint64_t eval_errors;        /* samples whose values could not be evaluated */
    uint64_t decodes, decode_ns; /* decode calls and the host time they took */
    uint64_t decode_data_ns;     /* of which in cuptiPmSamplingDecodeData */
    uint64_t tail_samples;       /* decoded by the profile's finish (after its stop) */
    uint64_t tail_decode_ns;     /* host time of that last decode */
    uint64_t stop_ns;            /* host time of cuptiPmSamplingStop (0: after the finish) */
    uint64_t evaluate_ns;        /* of which evaluating samples into values */
    uint64_t restarts;           /* stop + start to recover from an overflow */
    uint64_t reconfigures;       /* where that failed: disable, enable, configure, start */
    int sampler_reused;          /* 1 when the enabled sampler came from an earlier profile */
    uint64_t phase_ns[LS_PM_PHASES]; /* host time of each set-up and tear-down step */
    int config_reused;           /* 1 when the config image came from an earlier profile */
    char config_source[16];      /* "built", "cache" (disk) or "reused" (this process) */
    int availability_cached;     /* 1: the counter availability image came from the disk
                                  * cache (ls_pmavail), not from CUPTI */
    char cache_note[1024];       /* why the disk cache was not used or written, "" if fine */
    uint32_t max_samples;        /* samples the counter data image holds */
    uint64_t skipped;            /* decoded and not evaluated: drained, or before the window */
    char error[1024];            /* a failure after start (decode, stop), "" if none */
} ls_pm_stats;

/* Starts sampling.  Requires ls_cupti_load().  Returns 0, or -1 with a plain
 * sentence in `why` (everything acquired is released again). */
int ls_pm_start(const ls_pm_options *options, char *why, size_t why_size);

/* Whether a decoded sample, by its CUPTI times, is to be evaluated. */
typedef int (*ls_pm_want_fn)(uint64_t start_ns, uint64_t end_ns, void *arg);

/* What one ls_pm_decode call cost and found (the stats add it up). */
typedef struct {
    uint64_t decodes, decode_ns;  /* 1, and its host time */
    uint64_t decode_data_ns;      /* of which in cuptiPmSamplingDecodeData */
    uint64_t evaluate_ns;         /* of which reading and evaluating samples */
    uint64_t evaluated, skipped;  /* samples evaluated into the sink; let go unevaluated */
    uint64_t overflows, counter_data_full, eval_errors;
    uint64_t restarts, reconfigures; /* to recover from an overflow */
    uint64_t reached_ns;          /* the latest end of a sample read, wanted or not */
    uint64_t short_of_until;      /* 1: the round cap came before a sample reached until_ns */
} ls_pm_cost;

/* Decodes every finished sample; those want(start, end, arg) accepts are
 * evaluated into `sink`, the rest let go (with no `want`, unread).  No
 * round after one whose last sample reaches until_ns (0: every round the
 * buffer holds).  *cost (may be NULL) gets what it cost.  Returns 0, or -1
 * when a CUPTI call failed (stats.error says which; sampling stays on,
 * later decodes may still work).  Never blocks on the GPU. */
int ls_pm_decode(ls_sample_array *sink, ls_pm_want_fn want, void *arg, uint64_t until_ns,
                 ls_pm_cost *cost);

/* Stops sampling, dropping what was not decoded yet, and resets the
 * counter data image.  Sampling stays enabled and configured, so the next
 * start with the same options costs one cuptiPmSamplingStart (enabling and
 * configuring cost ~150 ms on an H200); ls_pm_release gives the counters
 * back.  Returns 0, or -1 when the stop failed (stats.error). */
int ls_pm_stop(void);

/* Resets the counter data image unless it is clean already (a start does
 * it too if nobody did). */
void ls_pm_reset(void);

/* Forgets stats.error, once its windows have it. */
void ls_pm_clear_error(void);

/* 1 while sampling runs (started, not stopped). */
int ls_pm_running(void);

/* Disables sampling (the counters are free for other profilers again) and
 * frees the counter data image; stops first if running.  Safe to repeat. */
void ls_pm_release(void);

/* The counter data image's capacity for `o`: o->max_samples, or else
 * four decode periods' worth of samples, at least 64 and at most 4096 (a
 * fuller image is decoded in several rounds, not lost). */
uint32_t ls_pm_counter_samples(const ls_pm_options *o);

/* "config", "enable", ... for LS_PM_PHASE_*. */
const char *ls_pm_phase_name(int phase);

/* The figures of the current or last sampling run. */
const ls_pm_stats *ls_pm_stats_now(void);

/* The CUPTI metric names of the figures in order of importance, the order
 * in which the single-pass choice keeps them (ls_metric_choice): writes
 * LS_METRICS pointers to static strings into out, returns their count. */
size_t ls_pm_ordered_names(const char **out);

#endif
