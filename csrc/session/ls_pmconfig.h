/* ls_pmconfig: the part of PM sampling that needs CUPTI's profiler host API
 * (cupti_profiler_host.h is C++-only): the config image of a single-pass
 * metric set, and the evaluation of decoded samples into metric values.
 *
 * Two things come out of the host API, and only one can be kept across
 * processes: the config image (plain bytes, cached on disk by ls_pmcache)
 * and the host object that evaluates samples (made anew in each process,
 * from the chip name and the counter availability image).  A config made
 * from a cached image makes its host object at the first evaluation, so
 * sampling can start before it exists.
 *
 * Written in C++ (ls_pmconfig.cpp) with this C interface; no exceptions, no
 * STL, malloc only.  Every function needs ls_cupti_load() and the profiler
 * host symbols (ls_cupti_pm_missing() == NULL).  One thread at a time. */
#ifndef LS_PMCONFIG_H
#define LS_PMCONFIG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ls_pmconfig ls_pmconfig;

/* Host time of the steps of a build, ns (added to). */
typedef struct {
    uint64_t host_ns;  /* host objects: cuptiProfilerHostInitialize, AddMetrics, Deinitialize */
    uint64_t image_ns; /* config images and their pass counts */
} ls_pmconfig_times;

/* Builds the config image for the metrics `names[0..n)`, given in order of
 * importance, on chip `chip` with the device's counter availability image.
 * Names this chip does not know are dropped; while the set needs more than
 * one pass, the last remaining name is dropped; the first `required` names
 * must survive.  kept[i] is set to 1 for each name kept, 0 otherwise.
 * Returns 0 with *out set (free with ls_pmconfig_free), or -1 with a
 * sentence in `why` (*out NULL). */
int ls_pmconfig_create(const char *chip, const uint8_t *availability, size_t availability_size,
                       const char *const *names, size_t n, size_t required,
                       unsigned char *kept, ls_pmconfig **out, ls_pmconfig_times *times,
                       char *why, size_t why_size);

/* A config from a cached image (copied) for the names with kept[i] == 1.
 * Checks that the image needs one pass.  Returns 0 with *out set, or -1
 * with a sentence in `why`. */
int ls_pmconfig_from_image(const char *chip, const uint8_t *availability,
                           size_t availability_size, const char *const *names, size_t n,
                           const unsigned char *kept, const uint8_t *image, size_t image_size,
                           ls_pmconfig **out, char *why, size_t why_size);

/* Makes the host object now if the config has none (its host time is added
 * to *host_ns).  Returns 0, or -1 (the CUPTI message in ls_cupti_error()). */
int ls_pmconfig_prepare(ls_pmconfig *config, uint64_t *host_ns);

/* The config image and its size. */
const uint8_t *ls_pmconfig_image(const ls_pmconfig *config, size_t *size);

/* The kept metric names, in the order ls_pmconfig_evaluate writes values. */
const char *const *ls_pmconfig_names(const ls_pmconfig *config, size_t *count);

/* Evaluates sample `index` of a decoded counter data image into
 * values[0..count) (count from ls_pmconfig_names), making the host object
 * first if needed.  Returns 0, or -1 (the CUPTI message in
 * ls_cupti_error()). */
int ls_pmconfig_evaluate(ls_pmconfig *config, const uint8_t *counter_data, size_t size,
                         size_t index, double *values);

/* Releases the host object and the image; NULL is allowed. */
void ls_pmconfig_free(ls_pmconfig *config);

#ifdef __cplusplus
}
#endif

#endif
