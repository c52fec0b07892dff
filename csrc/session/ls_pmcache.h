/* ls_pmcache: the PM sampling config image kept on disk, so a new process
 * skips building it (the config phase took ~170 ms on an H200).
 *
 * One file per key (chip, metric set asked for, CUPTI version, the device's
 * counter availability image): its name carries a hash of the key and its
 * header the key itself, so a change of chip, metric set or CUPTI reads
 * another file.  A file whose header does not match, whose checksum fails
 * or that is cut short is ignored with a sentence saying why (the caller
 * builds the image and writes the file anew).  Writes go to a temporary
 * file that is renamed over the old one, so a reader never sees half a
 * file.  Plain C file I/O: no CUPTI, no Python, any thread. */
#ifndef LS_PMCACHE_H
#define LS_PMCACHE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *chip;
    const char *const *names; /* the metric set asked for, in order */
    size_t count;
    uint32_t cupti_version;
    const uint8_t *availability; /* the device's counter availability image */
    size_t availability_size;
} ls_pmcache_key;

/* The file of `key` under `dir`, into path.  0, or -1 when it does not fit. */
int ls_pmcache_path(const char *dir, const ls_pmcache_key *key, char *path, size_t path_size);

/* Reads the file of `key`.  Returns 1 with *image (malloc'd, the caller
 * frees it), *image_size and kept[0..key->count) (1 for each name the image
 * samples); 0 when there is no file; -1 when the file is unusable, with a
 * sentence in `note` (nothing is returned then). */
int ls_pmcache_load(const char *dir, const ls_pmcache_key *key, unsigned char *kept,
                    uint8_t **image, size_t *image_size, char *note, size_t note_size);

/* Writes the file of `key` (making `dir` and its parents, mode 0700).
 * Returns 0, or -1 with a sentence in `note`. */
int ls_pmcache_store(const char *dir, const ls_pmcache_key *key, const unsigned char *kept,
                     const uint8_t *image, size_t image_size, char *note, size_t note_size);

#endif
