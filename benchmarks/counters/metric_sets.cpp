// metric_sets: which of loopscope's PM metrics each chip knows, and how many
// passes every set of them needs, asked of CUPTI's profiler host API (the
// same calls loopscope's ls_pmconfig makes).  Built and run by
// metric_sets.py on a GPU machine (CUPTI needs a driver to start):
//   metric_sets CHIP|device:N ... -- METRIC ...
// CHIP: a chip name CUPTI supports (no availability image: the chip's full
// counter set); device:N: device N's own chip with its availability image.
// Prints one JSON object per chip on a line.  Sets are masks over the
// metrics in the order given; only sets that contain the first REQUIRED (2)
// metrics are asked (loopscope always keeps those).
#include <cuda.h>
#include <cupti.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

static const int REQUIRED = 2;

template <typename T> static T params(size_t size) { T p; memset(&p, 0, sizeof p); p.structSize = size; return p; }

// Passes the set needs: >= 1; -1 a name the chip does not know; -2 another failure.
static int passes(const char *chip, const std::vector<uint8_t> &avail,
                  const std::vector<const char *> &names)
{
    auto ip = params<CUpti_Profiler_Host_Initialize_Params>(CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
    ip.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
    ip.pChipName = chip;
    ip.pCounterAvailabilityImage = avail.empty() ? nullptr : avail.data();
    if (cuptiProfilerHostInitialize(&ip) != CUPTI_SUCCESS) return -2;
    int out = -2;
    auto ap = params<CUpti_Profiler_Host_ConfigAddMetrics_Params>(CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
    ap.pHostObject = ip.pHostObject;
    ap.ppMetricNames = const_cast<const char **>(names.data());
    ap.numMetrics = names.size();
    CUptiResult r = cuptiProfilerHostConfigAddMetrics(&ap);
    if (r == CUPTI_ERROR_INVALID_METRIC_NAME || r == CUPTI_ERROR_INVALID_PARAMETER) out = -1;
    else if (r == CUPTI_SUCCESS) {
        auto sp = params<CUpti_Profiler_Host_GetConfigImageSize_Params>(CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
        sp.pHostObject = ip.pHostObject;
        if (cuptiProfilerHostGetConfigImageSize(&sp) == CUPTI_SUCCESS) {
            std::vector<uint8_t> img(sp.configImageSize);
            auto gp = params<CUpti_Profiler_Host_GetConfigImage_Params>(CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
            gp.pHostObject = ip.pHostObject; gp.configImageSize = img.size(); gp.pConfigImage = img.data();
            auto pp = params<CUpti_Profiler_Host_GetNumOfPasses_Params>(CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE);
            pp.configImageSize = img.size(); pp.pConfigImage = img.data();
            if (cuptiProfilerHostGetConfigImage(&gp) == CUPTI_SUCCESS &&
                cuptiProfilerHostGetNumOfPasses(&pp) == CUPTI_SUCCESS)
                out = (int)pp.numOfPasses;
        }
    }
    auto dp = params<CUpti_Profiler_Host_Deinitialize_Params>(CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
    dp.pHostObject = ip.pHostObject;
    cuptiProfilerHostDeinitialize(&dp);
    return out;
}

int main(int argc, char **argv)
{
    std::vector<std::string> chips;
    std::vector<const char *> metrics;
    bool after = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--")) { after = true; continue; }
        if (after) metrics.push_back(argv[i]); else chips.push_back(argv[i]);
    }
    setvbuf(stdout, nullptr, _IOLBF, 0); // a line at a time: a crash keeps what was printed
    cuInit(0);                            // CUPTI's device calls need the driver started
    auto ini = params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
    if (cuptiProfilerInitialize(&ini) != CUPTI_SUCCESS)
        fprintf(stderr, "cuptiProfilerInitialize failed\n");
    uint32_t version = 0;
    cuptiGetVersion(&version);
    auto cp = params<CUpti_Profiler_Host_GetSupportedChips_Params>(CUpti_Profiler_Host_GetSupportedChips_Params_STRUCT_SIZE);
    std::string supported;
    if (cuptiProfilerHostGetSupportedChips(&cp) == CUPTI_SUCCESS)
        for (size_t i = 0; i < cp.numChips; i++) supported += std::string(i ? "\",\"" : "") + cp.ppChipNames[i];
    printf("{\"cupti_version\": %u, \"supported_chips\": [\"%s\"]}\n", version, supported.c_str());
    size_t n = metrics.size();
    for (const std::string &spec : chips) {
        auto t0 = std::chrono::steady_clock::now();
        std::string chip = spec;
        std::vector<uint8_t> avail;
        if (spec.rfind("device:", 0) == 0) {
            size_t dev = std::stoul(spec.substr(7));
            auto cn = params<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
            cn.deviceIndex = dev;
            if (cuptiDeviceGetChipName(&cn) != CUPTI_SUCCESS) { printf("{\"chip\": \"%s\", \"error\": \"chip name\"}\n", spec.c_str()); continue; }
            chip = cn.pChipName;
            auto ca = params<CUpti_PmSampling_GetCounterAvailability_Params>(CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE);
            ca.deviceIndex = dev;
            if (cuptiPmSamplingGetCounterAvailability(&ca) == CUPTI_SUCCESS) {
                avail.resize(ca.counterAvailabilityImageSize);
                ca.pCounterAvailabilityImage = avail.data();
                cuptiPmSamplingGetCounterAvailability(&ca);
            }
        }
        printf("{\"chip\": \"%s\", \"spec\": \"%s\", \"availability_bytes\": %zu, \"known\": [", chip.c_str(), spec.c_str(), avail.size());
        std::vector<int> known(n);
        for (size_t i = 0; i < n; i++) {
            known[i] = passes(chip.c_str(), avail, {metrics[i]}) >= 1;
            printf("%s%d", i ? ", " : "", known[i]);
        }
        printf("], \"passes\": {");
        bool first = true;
        for (unsigned mask = 0; mask < (1u << n); mask++) {
            bool ok = true;
            for (int r = 0; r < REQUIRED; r++) ok = ok && (mask >> r & 1);
            for (size_t i = 0; i < n; i++) ok = ok && (!(mask >> i & 1) || known[i]);
            if (!ok) continue;
            std::vector<const char *> set;
            for (size_t i = 0; i < n; i++) if (mask >> i & 1) set.push_back(metrics[i]);
            printf("%s\"%u\": %d", first ? "" : ", ", mask, passes(chip.c_str(), avail, set));
            first = false;
        }
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        printf("}, \"seconds\": %.1f}\n", s);
        fflush(stdout);
    }
    return 0;
}
