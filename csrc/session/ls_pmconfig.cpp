// ls_pmconfig: see ls_pmconfig.h.  C++ only because cupti_profiler_host.h is.
#include "ls_pmconfig.h"

#include "ls_cupti.h"
extern "C" {
#include "ls_clock.h"
#include "ls_metric_choice.h"
}

#include <cupti_profiler_host.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ls_pmconfig {
    CUpti_Profiler_Host_Object *host; // nullptr until needed (a config from a cached image)
    uint8_t *image;
    size_t image_size;
    size_t passes;
    const char **names; // the kept names, borrowed from the caller's array (static tables)
    size_t count;
    char chip[64];      // for a host object made later
    uint8_t *availability;
    size_t availability_size;
};

namespace {

bool is_bad_name(CUptiResult status)
{
    return status == CUPTI_ERROR_INVALID_METRIC_NAME || status == CUPTI_ERROR_INVALID_PARAMETER;
}

template <typename T>
T params(size_t size)
{
    T p;
    memset(&p, 0, sizeof p);
    p.structSize = size;
    return p;
}

// Adds the host time since t0 to *total.
void add_since(uint64_t t0, uint64_t *total)
{
    if (total != nullptr)
        *total += ls_clock_monotonic_ns() - t0;
}

void host_free(CUpti_Profiler_Host_Object *host, uint64_t *host_ns)
{
    if (host == nullptr)
        return;
    uint64_t t0 = ls_clock_monotonic_ns();
    auto p = params<CUpti_Profiler_Host_Deinitialize_Params>(
        CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
    p.pHostObject = host;
    LS_CUPTI_CHECK(ProfilerHostDeinitialize(&p));
    add_since(t0, host_ns);
}

CUptiResult host_new(const char *chip, const uint8_t *availability,
                     CUpti_Profiler_Host_Object **host)
{
    // CUPTI 13 appended pSinglePassMetricSetName; CUPTI 12 knows the struct
    // up to pHostObject, and is given that size.
    size_t size = ls_cupti_version_major(ls_cupti_version()) >= 13
                      ? CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE
                      : CUPTI_PROFILER_STRUCT_SIZE(CUpti_Profiler_Host_Initialize_Params,
                                                   pHostObject);
    auto p = params<CUpti_Profiler_Host_Initialize_Params>(size);
    p.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
    p.pChipName = chip;
    p.pCounterAvailabilityImage = availability;
    CUptiResult status = LS_CUPTI_CHECK(ProfilerHostInitialize(&p));
    *host = status == CUPTI_SUCCESS ? p.pHostObject : nullptr;
    return status;
}

// A host object holding `names`; CUPTI_SUCCESS or the status of the failed call.
CUptiResult host_with(const char *chip, const uint8_t *availability, const char **names,
                      size_t n, CUpti_Profiler_Host_Object **host, uint64_t *host_ns)
{
    uint64_t t0 = ls_clock_monotonic_ns();
    CUptiResult status = host_new(chip, availability, host);
    if (status == CUPTI_SUCCESS) {
        auto p = params<CUpti_Profiler_Host_ConfigAddMetrics_Params>(
            CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
        p.pHostObject = *host;
        p.ppMetricNames = names;
        p.numMetrics = n;
        status = ls_cupti.ProfilerHostConfigAddMetrics(&p);
        if (!is_bad_name(status)) // an unknown name is expected and handled by the caller
            ls_cupti_report(status, "cuptiProfilerHostConfigAddMetrics");
    }
    add_since(t0, host_ns);
    if (status != CUPTI_SUCCESS) {
        host_free(*host, host_ns);
        *host = nullptr;
    }
    return status;
}

CUptiResult count_passes(const uint8_t *image, size_t size, size_t *passes)
{
    auto pp = params<CUpti_Profiler_Host_GetNumOfPasses_Params>(
        CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE);
    pp.configImageSize = size;
    pp.pConfigImage = const_cast<uint8_t *>(image);
    CUptiResult status = LS_CUPTI_CHECK(ProfilerHostGetNumOfPasses(&pp));
    *passes = status == CUPTI_SUCCESS ? pp.numOfPasses : 0;
    return status;
}

// The config image of the host object and its pass count.
CUptiResult make_image(ls_pmconfig *c, uint64_t *image_ns)
{
    uint64_t t0 = ls_clock_monotonic_ns();
    auto ps = params<CUpti_Profiler_Host_GetConfigImageSize_Params>(
        CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
    ps.pHostObject = c->host;
    CUptiResult status = LS_CUPTI_CHECK(ProfilerHostGetConfigImageSize(&ps));
    if (status == CUPTI_SUCCESS) {
        free(c->image);
        c->image = static_cast<uint8_t *>(malloc(ps.configImageSize ? ps.configImageSize : 1));
        c->image_size = ps.configImageSize;
        if (c->image == nullptr)
            status = CUPTI_ERROR_OUT_OF_MEMORY;
    }
    if (status == CUPTI_SUCCESS) {
        auto pi = params<CUpti_Profiler_Host_GetConfigImage_Params>(
            CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
        pi.pHostObject = c->host;
        pi.configImageSize = c->image_size;
        pi.pConfigImage = c->image;
        status = LS_CUPTI_CHECK(ProfilerHostGetConfigImage(&pi));
    }
    if (status == CUPTI_SUCCESS)
        status = count_passes(c->image, c->image_size, &c->passes);
    add_since(t0, image_ns);
    return status;
}

// A config with copies of the chip name and availability image, no host object.
ls_pmconfig *config_new(const char *chip, const uint8_t *availability, size_t availability_size,
                        size_t n)
{
    ls_pmconfig *c = static_cast<ls_pmconfig *>(calloc(1, sizeof *c));
    if (c == nullptr)
        return nullptr;
    c->names = static_cast<const char **>(malloc((n ? n : 1) * sizeof *c->names));
    c->availability = static_cast<uint8_t *>(malloc(availability_size ? availability_size : 1));
    if (c->names == nullptr || c->availability == nullptr) {
        ls_pmconfig_free(c);
        return nullptr;
    }
    snprintf(c->chip, sizeof c->chip, "%s", chip);
    memcpy(c->availability, availability, availability_size);
    c->availability_size = availability_size;
    return c;
}

// The oracle of ls_metric_choose: builds the host object and config image of
// the names kept, and says whether they fit one pass.
struct fits_ctx {
    const char *chip;
    const uint8_t *availability;
    const char *const *names;
    ls_pmconfig *c;
    uint64_t *host_ns, *image_ns;
    CUptiResult status;
};

int fits_one_pass(const unsigned char *keep, size_t n, void *opaque)
{
    fits_ctx *x = static_cast<fits_ctx *>(opaque);
    ls_pmconfig *c = x->c;
    c->count = 0;
    for (size_t i = 0; i < n; i++)
        if (keep[i])
            c->names[c->count++] = x->names[i];
    host_free(c->host, x->host_ns);
    c->host = nullptr;
    x->status = host_with(x->chip, x->availability, c->names, c->count, &c->host, x->host_ns);
    if (x->status == CUPTI_SUCCESS)
        x->status = make_image(c, x->image_ns);
    if (x->status != CUPTI_SUCCESS)
        return -1;
    return c->passes == 1 ? 1 : 0;
}

} // namespace

extern "C" int ls_pmconfig_create(const char *chip, const uint8_t *availability,
                                  size_t availability_size, const char *const *names, size_t n,
                                  size_t required, unsigned char *kept, ls_pmconfig **out,
                                  ls_pmconfig_times *times, char *why, size_t why_size)
{
    *out = nullptr;
    ls_pmconfig *c = config_new(chip, availability, availability_size, n);
    unsigned char *known = static_cast<unsigned char *>(malloc(n ? n : 1));
    if (c == nullptr || known == nullptr) {
        ls_pmconfig_free(c);
        free(known);
        snprintf(why, why_size, "out of memory building the PM sampling config");
        return -1;
    }
    fits_ctx x = {chip, availability, names, c, times ? &times->host_ns : nullptr,
                  times ? &times->image_ns : nullptr, CUPTI_SUCCESS};
    // 1. Names this chip does not know: found one by one, only if the set fails.
    memset(known, 1, n);
    CUpti_Profiler_Host_Object *probe = nullptr;
    for (size_t i = 0; i < n; i++)
        c->names[i] = names[i];
    x.status = host_with(chip, availability, c->names, n, &probe, x.host_ns);
    host_free(probe, x.host_ns);
    if (is_bad_name(x.status)) {
        x.status = CUPTI_SUCCESS;
        for (size_t i = 0; i < n && x.status == CUPTI_SUCCESS; i++) {
            const char *single = names[i];
            CUptiResult one = host_with(chip, availability, &single, 1, &probe, x.host_ns);
            host_free(probe, x.host_ns);
            if (is_bad_name(one))
                known[i] = 0;
            else if (one != CUPTI_SUCCESS)
                x.status = one;
        }
    }
    // 2. The most important set that fits one pass (ls_metric_choice), then
    // its config built once more if the last question was about another set.
    int count = -1;
    if (x.status == CUPTI_SUCCESS)
        count = ls_metric_choose(known, n, fits_one_pass, &x, kept);
    free(known);
    if (count > 0) {
        size_t asked = c->count;
        size_t want = 0;
        for (size_t i = 0; i < n; i++)
            want += kept[i];
        bool same = asked == want;
        for (size_t i = 0, j = 0; same && i < n; i++)
            if (kept[i])
                same = c->names[j++] == names[i];
        if (!same && fits_one_pass(kept, n, &x) != 1)
            count = -1;
    }
    bool required_kept = count > 0;
    for (size_t i = 0; i < required && i < n; i++)
        required_kept = required_kept && kept[i];
    if (count > 0 && required_kept) {
        *out = c;
        return 0;
    }
    if (count < 0 || x.status != CUPTI_SUCCESS)
        snprintf(why, why_size, "the PM sampling config for chip %s could not be built: %s",
                 chip, ls_cupti_error()[0] ? ls_cupti_error() : "CUPTI refused the metric set");
    else
        snprintf(why, why_size, "chip %s cannot sample %s in one pass (or does not know it)",
                 chip, names[0]);
    ls_pmconfig_free(c);
    return -1;
}

extern "C" int ls_pmconfig_from_image(const char *chip, const uint8_t *availability,
                                      size_t availability_size, const char *const *names,
                                      size_t n, const unsigned char *kept, const uint8_t *image,
                                      size_t image_size, ls_pmconfig **out, char *why,
                                      size_t why_size)
{
    *out = nullptr;
    ls_pmconfig *c = config_new(chip, availability, availability_size, n);
    if (c != nullptr) {
        c->image = static_cast<uint8_t *>(malloc(image_size ? image_size : 1));
        if (c->image == nullptr) {
            ls_pmconfig_free(c);
            c = nullptr;
        }
    }
    if (c == nullptr) {
        snprintf(why, why_size, "out of memory reading the cached PM sampling config");
        return -1;
    }
    memcpy(c->image, image, image_size);
    c->image_size = image_size;
    for (size_t i = 0; i < n; i++)
        if (kept[i])
            c->names[c->count++] = names[i];
    if (c->count == 0 || count_passes(c->image, c->image_size, &c->passes) != CUPTI_SUCCESS ||
        c->passes != 1) {
        snprintf(why, why_size, "the cached PM config image is not a single-pass image for "
                 "these metrics (%s)", ls_cupti_error()[0] ? ls_cupti_error() : "wrong pass count");
        ls_pmconfig_free(c);
        return -1;
    }
    *out = c;
    return 0;
}

extern "C" int ls_pmconfig_prepare(ls_pmconfig *config, uint64_t *host_ns)
{
    if (config->host != nullptr)
        return 0;
    return host_with(config->chip, config->availability, config->names, config->count,
                     &config->host, host_ns) == CUPTI_SUCCESS ? 0 : -1;
}

extern "C" const uint8_t *ls_pmconfig_image(const ls_pmconfig *config, size_t *size)
{
    *size = config->image_size;
    return config->image;
}

extern "C" const char *const *ls_pmconfig_names(const ls_pmconfig *config, size_t *count)
{
    *count = config->count;
    return config->names;
}

extern "C" int ls_pmconfig_evaluate(ls_pmconfig *config, const uint8_t *counter_data,
                                    size_t size, size_t index, double *values)
{
    if (ls_pmconfig_prepare(config, nullptr) != 0)
        return -1;
    auto p = params<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(
        CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
    p.pHostObject = config->host;
    p.pCounterDataImage = counter_data;
    p.counterDataImageSize = size;
    p.rangeIndex = index;
    p.ppMetricNames = config->names;
    p.numMetrics = config->count;
    p.pMetricValues = values;
    return LS_CUPTI_CHECK(ProfilerHostEvaluateToGpuValues(&p)) == CUPTI_SUCCESS ? 0 : -1;
}

extern "C" void ls_pmconfig_free(ls_pmconfig *config)
{
    if (config == nullptr)
        return;
    host_free(config->host, nullptr);
    free(config->image);
    free(config->names);
    free(config->availability);
    free(config);
}
