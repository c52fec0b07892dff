/* ls_pmavail: see ls_pmavail.h. */
#define _POSIX_C_SOURCE 200809L
#include "ls_pmavail.h"

#include "ls_cuda.h"
#include "ls_cupti.h"
#include "ls_pmcache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The cache key's parts beyond chip and CUPTI version, as ls_pmcache's
 * "names": what the file holds, the device, the driver. */
typedef struct {
    char what[32], device[32], driver[512];
    const char *names[3];
    unsigned char kept[3];
    ls_pmcache_key key;
} avail_key;

static void make_key(avail_key *k, const char *chip, int device, const char *driver,
                     uint32_t cupti_version)
{
    snprintf(k->what, sizeof k->what, "counter-availability");
    snprintf(k->device, sizeof k->device, "device %d", device);
    snprintf(k->driver, sizeof k->driver, "%s", driver);
    k->names[0] = k->what;
    k->names[1] = k->device;
    k->names[2] = k->driver;
    memset(k->kept, 1, sizeof k->kept);
    k->key = (ls_pmcache_key){chip, k->names, 3, cupti_version, NULL, 0};
}

void ls_pmavail_driver(char *buf, size_t size)
{
    char line[400] = "unknown";
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    if (f != NULL) {
        if (fgets(line, sizeof line, f) == NULL)
            snprintf(line, sizeof line, "unknown");
        fclose(f);
        line[strcspn(line, "\n")] = '\0';
    }
    int cuda = ls_cuda_driver_version();
    if (cuda > 0)
        snprintf(buf, size, "cuda %d; %s", cuda, line);
    else
        snprintf(buf, size, "cuda unknown; %s", line);
}

int ls_pmavail_load(const char *cache_dir, const char *chip, int device, const char *driver,
                    uint32_t cupti_version, uint8_t **avail, size_t *size, char *note,
                    size_t note_size)
{
    avail_key k;
    make_key(&k, chip, device, driver, cupti_version);
    unsigned char kept[3];
    return ls_pmcache_load(cache_dir, &k.key, kept, avail, size, note, note_size);
}

int ls_pmavail_store(const char *cache_dir, const char *chip, int device, const char *driver,
                     uint32_t cupti_version, const uint8_t *avail, size_t size, char *note,
                     size_t note_size)
{
    avail_key k;
    make_key(&k, chip, device, driver, cupti_version);
    return ls_pmcache_store(cache_dir, &k.key, k.kept, avail, size, note, note_size);
}

void ls_pmavail_forget(const char *cache_dir, int device, const char *chip)
{
    char driver[512], path[2048];
    ls_pmavail_driver(driver, sizeof driver);
    uint32_t version = 0;
    LS_CUPTI_CHECK(GetVersion(&version));
    avail_key k;
    make_key(&k, chip, device, driver, version);
    if (cache_dir[0] != '\0' && ls_pmcache_path(cache_dir, &k.key, path, sizeof path) == 0)
        unlink(path);
}

/* CUPTI's image: asked twice, for its size, then for its bytes. */
static CUptiResult from_cupti(int device, uint8_t **avail, size_t *size)
{
    CUpti_PmSampling_GetCounterAvailability_Params p;
    memset(&p, 0, sizeof p);
    p.structSize = CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE;
    p.deviceIndex = (size_t)device;
    CUptiResult st = LS_CUPTI_CHECK(PmSamplingGetCounterAvailability(&p));
    if (st != CUPTI_SUCCESS)
        return st;
    *avail = malloc(p.counterAvailabilityImageSize ? p.counterAvailabilityImageSize : 1);
    if (*avail == NULL)
        return CUPTI_ERROR_OUT_OF_MEMORY;
    p.pCounterAvailabilityImage = *avail;
    st = LS_CUPTI_CHECK(PmSamplingGetCounterAvailability(&p));
    if (st != CUPTI_SUCCESS) {
        free(*avail);
        *avail = NULL;
    } else {
        *size = p.counterAvailabilityImageSize;
    }
    return st;
}

CUptiResult ls_pmavail_get(const char *cache_dir, int device, const char *chip, int use_cache,
                           uint8_t **avail, size_t *size, int *from_cache, char *note,
                           size_t note_size)
{
    *avail = NULL;
    *size = 0;
    *from_cache = 0;
    char driver[512];
    ls_pmavail_driver(driver, sizeof driver);
    uint32_t version = 0;
    LS_CUPTI_CHECK(GetVersion(&version));
    int caching = cache_dir != NULL && cache_dir[0] != '\0';
    char why[1024] = "";
    if (caching && use_cache &&
        ls_pmavail_load(cache_dir, chip, device, driver, version, avail, size, why,
                        sizeof why) == 1) {
        if (*size > 0) {
            *from_cache = 1;
            return CUPTI_SUCCESS;
        }
        free(*avail); /* an empty image is no image */
        *avail = NULL;
    }
    if (why[0] != '\0' && note[0] == '\0')
        snprintf(note, note_size, "%s", why);
    CUptiResult st = from_cupti(device, avail, size);
    if (st == CUPTI_SUCCESS && caching) {
        why[0] = '\0';
        if (ls_pmavail_store(cache_dir, chip, device, driver, version, *avail, *size, why,
                             sizeof why) != 0 && note[0] == '\0')
            snprintf(note, note_size, "%s", why);
    }
    return st;
}
