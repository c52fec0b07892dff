/* ls_pmsampling: see ls_pmsampling.h. */
#include "ls_pmsampling.h"

#include "ls_clock.h"
#include "ls_cuda.h"
#include "ls_cupti.h"
#include "ls_pmavail.h"
#include "ls_pmcache.h"
#include "ls_pmconfig.h"
#include "ls_samples.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LS_PM_REQUIRED 2
#define LS_PM_MAX_ROUNDS 64 /* decode rounds per call: bounds a decode's cost */

/* The CUPTI metrics of the figures (ls_metrics); figure i is cupti_names[i]. */
static const char *const cupti_names[] = {
#define LS_CUPTI_NAME(id, name, cupti, rate) cupti,
    LS_METRIC_TABLE(LS_CUPTI_NAME)
#undef LS_CUPTI_NAME
};
static const unsigned char rates[] = {
#define LS_IS_RATE(id, name, cupti, rate) rate,
    LS_METRIC_TABLE(LS_IS_RATE)
#undef LS_IS_RATE
};
#define LS_PM_NAMES (sizeof cupti_names / sizeof cupti_names[0])

/* The figures in order of importance, for the choice of what fits one pass
 * (ls_metric_choice): a lesser metric is dropped first.  The tensor pipe
 * comes before issue rate, occupancy and PCIe: without it COMPUTE_BOUND
 * cannot tell whether the tensor cores are in use. */
static const int priority[] = {
    LS_M_SM_ACTIVE, LS_M_DRAM_THROUGHPUT, LS_M_GR_ACTIVE, LS_M_DRAM_READ_GBPS,
    LS_M_DRAM_WRITE_GBPS, LS_M_TENSOR_ACTIVE, LS_M_SM_ISSUE, LS_M_WARP_OCCUPANCY,
    LS_M_PCIE_READ_GBPS, LS_M_PCIE_WRITE_GBPS,
};
_Static_assert(sizeof priority / sizeof priority[0] == LS_METRICS,
               "every figure has its place in the order of importance");

/* The CUPTI names in order of importance (string literals: stable pointers). */
static void ordered_names(const char **out)
{
    for (size_t i = 0; i < LS_PM_NAMES; i++)
        out[i] = cupti_names[priority[i]];
}

size_t ls_pm_ordered_names(const char **out)
{
    ordered_names(out);
    return LS_PM_NAMES;
}

static int is_rate(int id) { return rates[id]; }

static struct {
    int active;                /* started */
    CUpti_PmSampling_Object *object; /* enabled and configured, kept between profiles */
    ls_pm_options configured;  /* what the object was configured with */
    int time_trigger;          /* the object's trigger: 1 GPU time, 0 SYSCLK */
    int ids[LS_PM_NAMES];      /* figure of each kept metric, in evaluation order */
    size_t kept;
    uint8_t *image, *pristine; /* counter data image, and a fresh copy to reset it */
    size_t image_size;
    int image_dirty;           /* decoded into since the last reset */
    ls_pm_stats stats;
} pm;

/* The config of the last chip sampled, kept for the next profile: building
 * it loads the chip's metric tables, and it does not change between runs. */
static struct {
    ls_pmconfig *config;
    char chip[64];
    unsigned char kept[LS_PM_NAMES]; /* in order of importance (priority[]) */
} cached;

static int profiler_initialized;

/* The first failure of a run is the one worth reading: later ones follow from it. */
static void note_error(const char *message)
{
    if (pm.stats.error[0] == '\0')
        snprintf(pm.stats.error, sizeof pm.stats.error, "%s", message);
}


const ls_pm_stats *ls_pm_stats_now(void) { return &pm.stats; }

const char *ls_pm_phase_name(int phase)
{
    static const char *const names[LS_PM_PHASES] = {
        "init",    "chip",       "availability", "cache",        "host",  "image", "release",
        "enable",  "set_config", "counter_data", "start",        "stop",  "reset"};
    return phase >= 0 && phase < LS_PM_PHASES ? names[phase] : "?";
}

uint32_t ls_pm_counter_samples(const ls_pm_options *o)
{
    if (o->max_samples != 0)
        return o->max_samples;
    uint64_t per_period = o->decode_period_ns / (o->interval_ns ? o->interval_ns : 1);
    uint64_t want = 4 * per_period;
    return (uint32_t)(want < 64 ? 64 : want > 4096 ? 4096 : want);
}


/* A plain sentence for the statuses users meet; the CUPTI text otherwise. */
static void explain(CUptiResult status, const char *what, char *why, size_t n)
{
    switch (status) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
        snprintf(why, n, "no permission to read the GPU's performance counters (%s): the driver "
                 "restricts them to administrators; run as root or load the driver with "
                 "NVreg_RestrictProfilingToAdminUsers=0 "
                 "(https://developer.nvidia.com/ERR_NVGPUCTRPERM)", what);
        return;
    case CUPTI_ERROR_HARDWARE_BUSY:
        snprintf(why, n, "the GPU's performance counters are held by another profiler (%s): "
                 "Nsight Compute or Systems, DCGM profiling, or another process sampling them",
                 what);
        return;
    case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
    case CUPTI_ERROR_NOT_SUPPORTED:
    case CUPTI_ERROR_INVALID_CHIP_NAME:
        snprintf(why, n, "PM sampling is not supported on this GPU or configuration (%s: %s)",
                 what, ls_cupti_error());
        return;
    default:
        snprintf(why, n, "PM sampling failed: %s", ls_cupti_error()[0] ? ls_cupti_error() : what);
    }
}

#define LS_PARAMS(type, name)          \
    type name;                         \
    memset(&name, 0, sizeof name);     \
    name.structSize = type##_STRUCT_SIZE

static CUptiResult start_sampler(void)
{
    LS_PARAMS(CUpti_PmSampling_Start_Params, p);
    p.pPmSamplingObject = pm.object;
    return LS_CUPTI_CHECK(PmSamplingStart(&p));
}

static CUptiResult stop_sampler(void)
{
    LS_PARAMS(CUpti_PmSampling_Stop_Params, p);
    p.pPmSamplingObject = pm.object;
    return LS_CUPTI_CHECK(PmSamplingStop(&p));
}

static void release(void)
{
    if (pm.object != NULL) {
        if (pm.active)
            stop_sampler();
        LS_PARAMS(CUpti_PmSampling_Disable_Params, p);
        p.pPmSamplingObject = pm.object;
        LS_CUPTI_CHECK(PmSamplingDisable(&p));
        pm.object = NULL;
    }
    free(pm.image);
    free(pm.pristine);
    pm.image = pm.pristine = NULL;
    pm.active = 0;
}

void ls_pm_release(void) { release(); }

/* The enabled object can be started again as it is. */
static int reusable(const ls_pm_options *o, int device)
{
    return pm.object != NULL && pm.configured.device == device &&
           pm.configured.interval_ns == o->interval_ns &&
           pm.configured.hw_buffer_bytes == o->hw_buffer_bytes &&
           pm.configured.max_samples == ls_pm_counter_samples(o);
}

static CUptiResult set_config(const ls_pm_options *o, const uint8_t *image, size_t size,
                              CUpti_PmSampling_TriggerMode mode, uint64_t interval)
{
    LS_PARAMS(CUpti_PmSampling_SetConfig_Params, p);
    p.pPmSamplingObject = pm.object;
    p.configSize = size;
    p.pConfig = image;
    p.hardwareBufferSize = o->hw_buffer_bytes;
    p.samplingInterval = interval;
    p.triggerMode = mode;
    p.hwBufferAppendMode = CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST;
    return LS_CUPTI_CHECK(PmSamplingSetConfig(&p));
}

static CUptiResult chip_name(int device, char *chip, size_t chip_size)
{
    LS_PARAMS(CUpti_Device_GetChipName_Params, p);
    p.deviceIndex = (size_t)device;
    CUptiResult st = LS_CUPTI_CHECK(DeviceGetChipName(&p));
    if (st == CUPTI_SUCCESS)
        snprintf(chip, chip_size, "%s", p.pChipName ? p.pChipName : "?");
    return st;
}

/* Adds the host time since *t0 to phase `k` and moves *t0 to now. */
static void lap(int k, uint64_t *t0)
{
    uint64_t now = ls_clock_monotonic_ns();
    pm.stats.phase_ns[k] += now - *t0;
    *t0 = now;
}

/* The single-pass config for `chip`: the one of an earlier profile, the
 * disk cache's, or a new one (written to the cache); the availability image
 * it is built for comes from the disk cache when `cached_availability` and
 * it is there (*from_cache then says so).  Returns 0, or -1 with a sentence
 * in `why`. */
static int config_for(const ls_pm_options *o, int device, const char *chip,
                      int cached_availability, int *from_cache, char *why, size_t why_size)
{
    *from_cache = 0;
    if (cached.config != NULL && strcmp(cached.chip, chip) == 0) {
        pm.stats.config_reused = 1;
        snprintf(pm.stats.config_source, sizeof pm.stats.config_source, "reused");
        return 0;
    }
    ls_pmconfig_free(cached.config);
    cached.config = NULL;
    uint64_t t0 = ls_clock_monotonic_ns();
    uint8_t *avail = NULL;
    size_t avail_size = 0;
    CUptiResult st = ls_pmavail_get(o->cache_dir, device, chip, cached_availability, &avail,
                                    &avail_size, from_cache, pm.stats.cache_note,
                                    sizeof pm.stats.cache_note);
    pm.stats.availability_cached = *from_cache;
    lap(LS_PM_PHASE_AVAILABILITY, &t0);
    if (st != CUPTI_SUCCESS) {
        explain(st, "cuptiPmSamplingGetCounterAvailability", why, why_size);
        return -1;
    }
    uint32_t version = 0;
    LS_CUPTI_CHECK(GetVersion(&version));
    const char *names[LS_PM_NAMES];
    ordered_names(names);
    ls_pmcache_key key = {chip, names, LS_PM_NAMES, version, avail, avail_size};
    char *note = pm.stats.cache_note;
    size_t note_size = sizeof pm.stats.cache_note;
    if (o->cache_dir[0] != '\0') {
        uint8_t *image = NULL;
        size_t image_size = 0;
        int found = ls_pmcache_load(o->cache_dir, &key, cached.kept, &image, &image_size, note,
                                    note_size);
        if (found == 1 &&
            ls_pmconfig_from_image(chip, avail, avail_size, names, LS_PM_NAMES,
                                   cached.kept, image, image_size, &cached.config, note,
                                   note_size) == 0)
            snprintf(pm.stats.config_source, sizeof pm.stats.config_source, "cache");
        free(image);
        lap(LS_PM_PHASE_CACHE, &t0);
    }
    int rc = 0;
    if (cached.config == NULL) {
        ls_pmconfig_times times = {0, 0};
        rc = ls_pmconfig_create(chip, avail, avail_size, names, LS_PM_NAMES,
                                LS_PM_REQUIRED, cached.kept, &cached.config, &times, why,
                                why_size);
        pm.stats.phase_ns[LS_PM_PHASE_HOST] += times.host_ns;
        pm.stats.phase_ns[LS_PM_PHASE_IMAGE] += times.image_ns;
        snprintf(pm.stats.config_source, sizeof pm.stats.config_source, "built");
        t0 = ls_clock_monotonic_ns();
        if (rc == 0 && o->cache_dir[0] != '\0') {
            size_t size = 0;
            const uint8_t *image = ls_pmconfig_image(cached.config, &size);
            char stored[1024];
            if (ls_pmcache_store(o->cache_dir, &key, cached.kept, image, size, stored,
                                 sizeof stored) != 0 && note[0] == '\0')
                snprintf(note, note_size, "%s", stored);
            lap(LS_PM_PHASE_CACHE, &t0);
        }
    }
    free(avail);
    if (rc != 0)
        return -1;
    snprintf(cached.chip, sizeof cached.chip, "%s", chip);
    return 0;
}

/* Allocates and initialises the counter data image for the kept metrics. */
static CUptiResult make_counter_data(uint32_t max_samples, const char **what)
{
    size_t count = 0;
    const char *const *names = ls_pmconfig_names(cached.config, &count);
    LS_PARAMS(CUpti_PmSampling_GetCounterDataSize_Params, ps);
    ps.pPmSamplingObject = pm.object;
    ps.pMetricNames = (const char **)names;
    ps.numMetrics = count;
    ps.maxSamples = max_samples;
    *what = "cuptiPmSamplingGetCounterDataSize";
    CUptiResult st = LS_CUPTI_CHECK(PmSamplingGetCounterDataSize(&ps));
    if (st != CUPTI_SUCCESS)
        return st;
    pm.image_size = ps.counterDataSize;
    pm.image = malloc(pm.image_size ? pm.image_size : 1);
    pm.pristine = malloc(pm.image_size ? pm.image_size : 1);
    if (pm.image == NULL || pm.pristine == NULL)
        return CUPTI_ERROR_OUT_OF_MEMORY;
    LS_PARAMS(CUpti_PmSampling_CounterDataImage_Initialize_Params, pi);
    pi.pPmSamplingObject = pm.object;
    pi.counterDataSize = pm.image_size;
    pi.pCounterData = pm.image;
    *what = "cuptiPmSamplingCounterDataImageInitialize";
    st = LS_CUPTI_CHECK(PmSamplingCounterDataImageInitialize(&pi));
    if (st == CUPTI_SUCCESS)
        memcpy(pm.pristine, pm.image, pm.image_size);
    pm.image_dirty = 0;
    return st;
}

static void list_names(const unsigned char *kept, int want, char *out, size_t n)
{
    out[0] = '\0';
    size_t used = 0;
    for (size_t i = 0; i < LS_PM_NAMES; i++) {
        if (kept[i] != want)
            continue;
        int w = snprintf(out + used, n - used, "%s%s", used ? ", " : "",
                         cupti_names[priority[i]]);
        if (w < 0 || (size_t)w >= n - used)
            break;
        used += (size_t)w;
    }
}

/* Enables sampling on the device, sets the config and the hardware buffer,
 * and makes the counter data image; the host time of each step goes to
 * phase_ns.  Returns 0, or -1 with a sentence in `why` and everything
 * released. */
static int configure(const ls_pm_options *o, int device, uint64_t *phase_ns, char *why,
                     size_t why_size)
{
    CUptiResult st;
    uint64_t t0 = ls_clock_monotonic_ns();
    LS_PARAMS(CUpti_PmSampling_Enable_Params, pe);
    pe.deviceIndex = (size_t)device;
    st = LS_CUPTI_CHECK(PmSamplingEnable(&pe));
    phase_ns[LS_PM_PHASE_ENABLE] = ls_clock_monotonic_ns() - t0;
    if (st != CUPTI_SUCCESS) {
        explain(st, "cuptiPmSamplingEnable", why, why_size);
        release();
        return -1;
    }
    pm.object = pe.pPmSamplingObject;
    size_t image_size = 0;
    const uint8_t *image = ls_pmconfig_image(cached.config, &image_size);
    pm.time_trigger = 1;
    t0 = ls_clock_monotonic_ns();
    st = set_config(o, image, image_size, CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL,
                    o->interval_ns);
    if (st == CUPTI_ERROR_NOT_SUPPORTED || st == CUPTI_ERROR_INVALID_PARAMETER) {
        /* Turing and GA100 have no time trigger: count SYSCLK cycles instead,
         * taking the system clock as about 1 GHz (the interval is then
         * approximate, and the samples keep their own timestamps). */
        pm.time_trigger = 0;
        st = set_config(o, image, image_size, CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_SYSCLK_INTERVAL,
                        o->interval_ns);
    }
    phase_ns[LS_PM_PHASE_SET_CONFIG] = ls_clock_monotonic_ns() - t0;
    if (st != CUPTI_SUCCESS) {
        explain(st, "cuptiPmSamplingSetConfig", why, why_size);
        release();
        return -1;
    }
    uint32_t max_samples = ls_pm_counter_samples(o);
    const char *what = "cuptiPmSamplingGetCounterDataSize";
    t0 = ls_clock_monotonic_ns();
    st = make_counter_data(max_samples, &what);
    phase_ns[LS_PM_PHASE_COUNTER_DATA] = ls_clock_monotonic_ns() - t0;
    if (st != CUPTI_SUCCESS) {
        if (st == CUPTI_ERROR_OUT_OF_MEMORY)
            snprintf(why, why_size, "out of host memory for the PM sampling counter data");
        else
            explain(st, what, why, why_size);
        release();
        return -1;
    }
    pm.configured = *o;
    pm.configured.device = device;
    pm.configured.max_samples = max_samples;
    return 0;
}

int ls_pm_start(const ls_pm_options *o, char *why, size_t why_size)
{
    if (pm.active) {
        snprintf(why, why_size, "PM sampling is already running");
        return -1;
    }
    memset(&pm.stats, 0, sizeof pm.stats);
    const char *missing = ls_cupti_pm_missing();
    if (missing != NULL) {
        uint32_t v = ls_cupti_version();
        snprintf(why, why_size, "SM and DRAM need CUPTI 12.6 or later: this process's CUPTI "
                 "(%s, API version %u) has no PM sampling (%s is missing); kernels, gaps and "
                 "syncs are traced. Fix: a CUDA 12.6+ or 13 stack (torch's cu126 or newer "
                 "wheels bring one), or nvidia-cuda-cupti-cu12>=12.6", ls_cupti_path(),
                 (unsigned)v, missing);
        return -1;
    }
    uint64_t t0 = ls_clock_monotonic_ns();
    if (ls_cupti_load_nvperf(why, why_size) != 0)
        return -1;
    CUptiResult st = CUPTI_SUCCESS;
    if (!profiler_initialized) {
        LS_PARAMS(CUpti_Profiler_Initialize_Params, pi);
        st = LS_CUPTI_CHECK(ProfilerInitialize(&pi));
        if (st != CUPTI_SUCCESS) {
            explain(st, "cuptiProfilerInitialize", why, why_size);
            return -1;
        }
        profiler_initialized = 1;
    }
    lap(LS_PM_PHASE_INIT, &t0);
    int device = o->device;
    if (device < 0 && ls_cuda_current_device(&device) != 1)
        device = 0;
    pm.stats.device = device;
    st = chip_name(device, pm.stats.chip, sizeof pm.stats.chip);
    lap(LS_PM_PHASE_CHIP, &t0);
    if (st != CUPTI_SUCCESS) {
        explain(st, "cuptiDeviceGetChipName", why, why_size);
        return -1;
    }
    int availability_cached = 0;
    if (config_for(o, device, pm.stats.chip, 1, &availability_cached, why, why_size) != 0)
        return -1;
    pm.kept = 0;
    for (size_t i = 0; i < LS_PM_NAMES; i++)
        if (cached.kept[i]) { /* the config evaluates its names in this order */
            pm.ids[pm.kept++] = priority[i];
            pm.stats.collected[priority[i]] = 1;
        }
    list_names(cached.kept, 1, pm.stats.collected_names, sizeof pm.stats.collected_names);
    list_names(cached.kept, 0, pm.stats.dropped, sizeof pm.stats.dropped);

    if (reusable(o, device)) {
        pm.stats.sampler_reused = 1;
        ls_pm_reset(); /* normally done after the last stop already */
    } else {
        t0 = ls_clock_monotonic_ns();
        release();
        lap(LS_PM_PHASE_RELEASE, &t0);
        if (configure(o, device, pm.stats.phase_ns, why, why_size) != 0) {
            if (!availability_cached)
                return -1;
            /* The cached availability image may be stale (another driver
             * state than its key tells): forget it, ask CUPTI, once. */
            ls_pmavail_forget(o->cache_dir, device, pm.stats.chip);
            ls_pmconfig_free(cached.config);
            cached.config = NULL;
            if (config_for(o, device, pm.stats.chip, 0, &availability_cached, why, why_size) != 0 ||
                configure(o, device, pm.stats.phase_ns, why, why_size) != 0)
                return -1;
        }
    }
    pm.stats.hw_buffer_bytes = pm.configured.hw_buffer_bytes;
    pm.stats.max_samples = pm.configured.max_samples;
    pm.stats.counter_data_bytes = pm.image_size;
    pm.stats.interval = o->interval_ns;
    pm.stats.time_trigger = pm.time_trigger;
    t0 = ls_clock_monotonic_ns();
    st = start_sampler();
    lap(LS_PM_PHASE_START, &t0);
    if (st != CUPTI_SUCCESS) {
        explain(st, "cuptiPmSamplingStart", why, why_size);
        release();
        return -1;
    }
    /* CUPTI's clock, the one activity records use, whatever the session's
     * clock mode is at this instant. */
    if (LS_CUPTI_CHECK(GetTimestamp(&pm.stats.started_ns)) != CUPTI_SUCCESS)
        pm.stats.started_ns = 0;
    pm.active = 1;
    /* A config read from the disk cache has no host object yet: make it
     * now, after the start, so sampling does not wait for it. */
    if (ls_pmconfig_prepare(cached.config, &pm.stats.phase_ns[LS_PM_PHASE_HOST]) != 0)
        note_error(ls_cupti_error());
    return 0;
}

int ls_pm_running(void) { return pm.active; }

void ls_pm_clear_error(void) { pm.stats.error[0] = '\0'; }

/* One finished sample of the image into the sink; 0, or -1 on a CUPTI error.
 * With no `want`, a drain: nothing is read or evaluated.  Else only what
 * want() accepts by its times is evaluated (~20-80 us each): a sample no
 * profile's window covers costs one GetSampleInfo. */
static int take_sample(size_t index, ls_sample_array *sink, ls_pm_want_fn want, void *arg,
                       ls_pm_cost *cost)
{
    if (want == NULL || sink == NULL) {
        cost->skipped++;
        return 0;
    }
    LS_PARAMS(CUpti_PmSampling_CounterData_GetSampleInfo_Params, pi);
    pi.pPmSamplingObject = pm.object;
    pi.pCounterDataImage = pm.image;
    pi.counterDataImageSize = pm.image_size;
    pi.sampleIndex = index;
    if (LS_CUPTI_CHECK(PmSamplingCounterDataGetSampleInfo(&pi)) != CUPTI_SUCCESS)
        return -1;
    if (pi.endTimestamp > cost->reached_ns)
        cost->reached_ns = pi.endTimestamp;
    if (!want(pi.startTimestamp, pi.endTimestamp, arg)) {
        cost->skipped++;
        return 0;
    }
    double raw[LS_PM_NAMES];
    if (ls_pmconfig_evaluate(cached.config, pm.image, pm.image_size, index, raw) != 0) {
        cost->eval_errors++;
        return 0;
    }
    ls_sample *s = ls_samples_append(sink);
    if (s == NULL) {
        cost->eval_errors++;
        return 0;
    }
    s->start_ns = pi.startTimestamp;
    s->end_ns = pi.endTimestamp;
    for (int j = 0; j < LS_METRICS; j++)
        s->values[j] = NAN;
    double seconds_ns = pi.endTimestamp > pi.startTimestamp
                            ? (double)(pi.endTimestamp - pi.startTimestamp) : 0.0;
    for (size_t k = 0; k < pm.kept; k++) {
        int id = pm.ids[k];
        if (is_rate(id))
            s->values[id] = seconds_ns > 0 ? raw[k] / seconds_ns : NAN; /* bytes/ns = GB/s */
        else
            s->values[id] = raw[k];
    }
    cost->evaluated++;
    return 0;
}

/* Resets the counter data image (a memcpy of the pristine copy: 13.5 MiB
 * for the default 400 samples on GH100). */
static void reset_image(void)
{
    if (pm.image == NULL)
        return;
    memcpy(pm.image, pm.pristine, pm.image_size);
    pm.image_dirty = 0;
}

/* After an overflow every later decode fails too (seen on an H200): the
 * buffer must be emptied by stopping and starting again, or where the
 * sampler refuses that, by configuring it anew (~150 ms, on this thread,
 * not the user's).  The samples of the overflow are lost, and counted. */
static int restart(void)
{
    CUptiResult st = stop_sampler();
    reset_image();
    if (st == CUPTI_SUCCESS && start_sampler() == CUPTI_SUCCESS) {
        pm.stats.restarts++;
        return 0;
    }
    ls_pm_options again = pm.configured;
    uint64_t unreported[LS_PM_PHASES]; /* the profile's set-up times stay as they were */
    char why[512];
    pm.active = 0;
    release();
    if (configure(&again, again.device, unreported, why, sizeof why) != 0 ||
        start_sampler() != CUPTI_SUCCESS) {
        if (pm.object != NULL)
            snprintf(why, sizeof why, "%s", ls_cupti_error());
        release();
        char message[700];
        snprintf(message, sizeof message, "sampling stopped after a hardware buffer overflow: %s",
                 why);
        note_error(message);
        return -1;
    }
    pm.active = 1;
    pm.stats.reconfigures++;
    return 0;
}

int ls_pm_decode(ls_sample_array *sink, ls_pm_want_fn want, void *arg, uint64_t until_ns,
                 ls_pm_cost *out)
{
    ls_pm_cost cost;
    memset(&cost, 0, sizeof cost);
    if (!pm.active) {
        if (out != NULL)
            *out = cost;
        return 0;
    }
    uint64_t t0 = ls_clock_monotonic_ns();
    uint64_t restarts = pm.stats.restarts, reconfigures = pm.stats.reconfigures;
    int result = 0, round = 0;
    for (; round < LS_PM_MAX_ROUNDS; round++) {
        LS_PARAMS(CUpti_PmSampling_DecodeData_Params, pd);
        pd.pPmSamplingObject = pm.object;
        pd.pCounterDataImage = pm.image;
        pd.counterDataImageSize = pm.image_size;
        uint64_t t1 = ls_clock_monotonic_ns();
        CUptiResult st = LS_CUPTI_CHECK(PmSamplingDecodeData(&pd));
        cost.decode_data_ns += ls_clock_monotonic_ns() - t1;
        if (pd.overflow || st == CUPTI_ERROR_OUT_OF_MEMORY)
            cost.overflows++;
        if (st == CUPTI_ERROR_OUT_OF_MEMORY) {
            result = restart(); /* on failure the error is noted and sampling is off */
            break;
        }
        if (st != CUPTI_SUCCESS) {
            note_error(ls_cupti_error());
            result = -1;
            break;
        }
        LS_PARAMS(CUpti_PmSampling_GetCounterDataInfo_Params, pc);
        pc.pCounterDataImage = pm.image;
        pc.counterDataImageSize = pm.image_size;
        if (LS_CUPTI_CHECK(PmSamplingGetCounterDataInfo(&pc)) != CUPTI_SUCCESS) {
            note_error(ls_cupti_error());
            result = -1;
            break;
        }
        uint64_t t2 = ls_clock_monotonic_ns();
        for (size_t i = 0; i < pc.numCompletedSamples && result == 0; i++)
            if (take_sample(i, sink, want, arg, &cost) != 0) {
                note_error(ls_cupti_error());
                result = -1;
            }
        cost.evaluate_ns += ls_clock_monotonic_ns() - t2;
        int full = pd.decodeStopReason == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL;
        pm.image_dirty = 1;
        if (pc.numCompletedSamples > 0 || full) {
            /* Reset the image for the next decode (as NVIDIA's sample does).
             * A sample still in progress is not lost: the next decode
             * finishes it (H200: 30,739 samples in 3.074 s at 100 us over
             * 168 decodes). */
            reset_image();
        }
        if (!full || result != 0)
            break;
        cost.counter_data_full++;
        /* A tick (no bound, a sink): one image a call, so that what waits
         * for the decoder (a finish's tail) waits for one round at most;
         * the ticker comes back at once. */
        if (until_ns == 0 && sink != NULL)
            break;
        /* With sampling on, a decode as slow as the sampling would chase
         * it for ever (H100, 20 us: three full rounds, 200 ms past a
         * window): what lies beyond `until_ns` waits in the buffer.  Judged
         * by every sample read: those past a window are not wanted, so the
         * sink never holds one (H200, 20 us: 64 rounds, 4.8 s). */
        if (until_ns != 0 && sink != NULL && cost.reached_ns >= until_ns)
            break;
    }
    /* The cap came first: the rest, up to until_ns, waits in the buffer
     * (20 us on an H200 with an idle spell's backlog before the window). */
    cost.short_of_until = round == LS_PM_MAX_ROUNDS && until_ns != 0 && cost.reached_ns < until_ns;
    cost.decodes = 1;
    cost.decode_ns = ls_clock_monotonic_ns() - t0;
    cost.restarts = pm.stats.restarts - restarts;
    cost.reconfigures = pm.stats.reconfigures - reconfigures;
    ls_pm_stats *st = &pm.stats;
    st->decodes++;
    st->decode_ns += cost.decode_ns;
    st->decode_data_ns += cost.decode_data_ns;
    st->evaluate_ns += cost.evaluate_ns;
    st->samples += cost.evaluated;
    st->skipped += cost.skipped;
    st->overflows += cost.overflows;
    st->counter_data_full += cost.counter_data_full;
    st->eval_errors += cost.eval_errors;
    if (out != NULL)
        *out = cost;
    return result;
}

int ls_pm_stop(void)
{
    if (!pm.active)
        return 0;
    int result = 0;
    uint64_t t0 = ls_clock_monotonic_ns();
    if (stop_sampler() != CUPTI_SUCCESS) {
        note_error(ls_cupti_error());
        result = -1;
    }
    pm.stats.stop_ns = ls_clock_monotonic_ns() - t0;
    /* What was sampled since the last decode is nobody's, but it must leave
     * the hardware buffer: left there, the next start's first decode hands
     * it over with the old run's times (H200, 2026-11-29: windows read
     * samples 1.2 s before their start).  Drained unread. */
    ls_pm_cost drained;
    if (ls_pm_decode(NULL, NULL, NULL, 0, &drained) != 0)
        result = -1;
    pm.active = 0; /* enabled and configured still: see ls_pm_release */
    reset_image();
    lap(LS_PM_PHASE_STOP, &t0);
    return result;
}

void ls_pm_reset(void)
{
    if (pm.active || !pm.image_dirty)
        return;
    uint64_t t0 = ls_clock_monotonic_ns();
    reset_image();
    lap(LS_PM_PHASE_RESET, &t0);
}
