/* ls_pmavail: a device's counter availability image, which PM sampling's
 * config is built for, from CUPTI (cuptiPmSamplingGetCounterAvailability:
 * ~155 ms of a process's first set-up on an H100) or from the disk cache of
 * ls_pmcache, where it is kept by chip, device, driver (its CUDA version and
 * the kernel module's version line) and CUPTI version: a change of any of
 * them reads another file.  Runs where ls_pmsampling does (the worker), never
 * in a CUPTI callback; nothing here exits or raises. */
#ifndef LS_PMAVAIL_H
#define LS_PMAVAIL_H

#include <cupti.h>
#include <stddef.h>
#include <stdint.h>

/* The image of `device` (chip `chip`), malloc'd into *avail (the caller
 * frees it) with *size.  With a cache folder and `use_cache`, a cached image
 * is returned (*from_cache 1); else CUPTI is asked and the image written to
 * the cache (a failure to write goes into `note`, not the result).  Returns
 * CUPTI's status (CUPTI_SUCCESS with an image). */
CUptiResult ls_pmavail_get(const char *cache_dir, int device, const char *chip, int use_cache,
                           uint8_t **avail, size_t *size, int *from_cache, char *note,
                           size_t note_size);

/* Removes the cached image of `device` (a set-up that failed with it). */
void ls_pmavail_forget(const char *cache_dir, int device, const char *chip);

/* The cache itself, by an explicit key (also for the tests, with no GPU):
 * load returns 1 with *avail (malloc'd) and *size, 0 when there is no file,
 * -1 when the file is unusable (`note` says why); store returns 0 or -1
 * (`note` says why). */
int ls_pmavail_load(const char *cache_dir, const char *chip, int device, const char *driver,
                    uint32_t cupti_version, uint8_t **avail, size_t *size, char *note,
                    size_t note_size);
int ls_pmavail_store(const char *cache_dir, const char *chip, int device, const char *driver,
                     uint32_t cupti_version, const uint8_t *avail, size_t size, char *note,
                     size_t note_size);

/* The driver's identity for the key, into buf: "cuda 13000; <the first line
 * of /proc/driver/nvidia/version>" (parts it cannot read say "unknown"). */
void ls_pmavail_driver(char *buf, size_t size);

#endif
