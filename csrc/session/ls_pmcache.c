/* ls_pmcache: see ls_pmcache.h.  The file: the magic, then the key in full
 * (CUPTI version, chip, names, a hash of the availability image), the kept
 * flags, the image, and an FNV-1a checksum of everything before it. */
#define _POSIX_C_SOURCE 200809L
#include "ls_pmcache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char magic[8] = {'L', 'S', 'P', 'M', 'C', 'F', 'G', 1};
#define LS_PMCACHE_MAX_IMAGE (256u << 20) /* refuse absurd sizes from a bad file */

typedef struct {
    uint8_t *data;
    size_t size, capacity;
    int failed;
} buffer;

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}
#define FNV_START 1469598103934665603ULL

static void put(buffer *b, const void *data, size_t n)
{
    if (b->failed)
        return;
    if (b->size + n > b->capacity) {
        size_t cap = b->capacity ? b->capacity : 4096;
        while (cap < b->size + n)
            cap *= 2;
        uint8_t *bigger = realloc(b->data, cap);
        if (bigger == NULL) {
            b->failed = 1;
            return;
        }
        b->data = bigger;
        b->capacity = cap;
    }
    memcpy(b->data + b->size, data, n);
    b->size += n;
}

static void put_u32(buffer *b, uint32_t v) { put(b, &v, sizeof v); }
static void put_u64(buffer *b, uint64_t v) { put(b, &v, sizeof v); }
static void put_text(buffer *b, const char *s)
{
    uint32_t n = (uint32_t)strlen(s);
    put_u32(b, n);
    put(b, s, n);
}

/* The key as bytes: the start of every file, and what its name hashes. */
static void put_key(buffer *b, const ls_pmcache_key *k)
{
    put(b, magic, sizeof magic);
    put_u32(b, k->cupti_version);
    put_text(b, k->chip);
    put_u32(b, (uint32_t)k->count);
    for (size_t i = 0; i < k->count; i++)
        put_text(b, k->names[i]);
    put_u64(b, fnv1a(FNV_START, k->availability, k->availability_size));
    put_u64(b, (uint64_t)k->availability_size);
}

int ls_pmcache_path(const char *dir, const ls_pmcache_key *key, char *path, size_t path_size)
{
    buffer b = {0};
    put_key(&b, key);
    if (b.failed) {
        free(b.data);
        return -1;
    }
    uint64_t h = fnv1a(FNV_START, b.data, b.size);
    free(b.data);
    /* The chip in the name, for a reader of the folder; only [A-Za-z0-9_-]. */
    char chip[32];
    size_t n = 0;
    for (const char *c = key->chip; *c && n + 1 < sizeof chip; c++)
        chip[n++] = ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                     (*c >= '0' && *c <= '9') || *c == '-') ? *c : '_';
    chip[n] = '\0';
    int w = snprintf(path, path_size, "%s/pmconfig-%s-%016llx.bin", dir, chip,
                     (unsigned long long)h);
    return w < 0 || (size_t)w >= path_size ? -1 : 0;
}

/* Reads the file whole: 1 with *data (malloc'd), 0 when there is none, -1
 * when it cannot be read, -2 when it is no regular file (a FIFO put there
 * would block a plain open forever: the open does not wait, and fstat
 * refuses anything but a regular file before a byte is read). */
static int read_file(const char *path, uint8_t **data, size_t *size)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -2;
    }
    FILE *f = fdopen(fd, "rb");
    if (f == NULL) {
        close(fd);
        return -1;
    }
    buffer b = {0};
    uint8_t chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0 && !b.failed) {
        put(&b, chunk, got);
        if (b.size > LS_PMCACHE_MAX_IMAGE + (1u << 20))
            b.failed = 1;
    }
    int bad = ferror(f) || b.failed;
    fclose(f);
    if (bad) {
        free(b.data);
        return -1;
    }
    *data = b.data;
    *size = b.size;
    return 1;
}

int ls_pmcache_load(const char *dir, const ls_pmcache_key *key, unsigned char *kept,
                    uint8_t **image, size_t *image_size, char *note, size_t note_size)
{
    *image = NULL;
    *image_size = 0;
    char path[1200];
    if (ls_pmcache_path(dir, key, path, sizeof path) != 0) {
        snprintf(note, note_size, "the PM config cache folder name is too long: %.200s", dir);
        return -1;
    }
    uint8_t *data = NULL;
    size_t size = 0;
    int rc = read_file(path, &data, &size);
    if (rc == 0)
        return 0;
    if (rc == -2) {
        snprintf(note, note_size, "the cached PM config %.900s is not a regular file (a FIFO, "
                 "a device or a folder): ignored", path);
        return -1;
    }
    if (rc < 0) {
        snprintf(note, note_size, "the cached PM config %.900s could not be read: ignored", path);
        return -1;
    }
    buffer want = {0};
    put_key(&want, key);
    const char *problem = NULL;
    size_t at = want.size;
    uint64_t n_image = 0;
    if (want.failed)
        problem = "out of memory";
    else if (size < want.size || memcmp(data, want.data, sizeof magic) != 0)
        problem = "not a loopscope PM config file";
    else if (memcmp(data, want.data, want.size) != 0)
        problem = "made for another chip, metric set, CUPTI or counter availability";
    else if (size < at + key->count + 8 + 8)
        problem = "cut short";
    if (problem == NULL) {
        at += key->count;
        memcpy(&n_image, data + at, sizeof n_image);
        at += 8;
        if (n_image > LS_PMCACHE_MAX_IMAGE || size != at + n_image + 8)
            problem = "cut short or of the wrong length";
    }
    if (problem == NULL) {
        uint64_t stored;
        memcpy(&stored, data + at + n_image, sizeof stored);
        if (stored != fnv1a(FNV_START, data, at + n_image))
            problem = "corrupt (checksum mismatch)";
    }
    if (problem == NULL) {
        for (size_t i = 0; i < key->count; i++)
            if (data[want.size + i] > 1)
                problem = "corrupt (bad kept flag)";
    }
    if (problem == NULL) {
        *image = malloc(n_image ? (size_t)n_image : 1);
        if (*image == NULL)
            problem = "out of memory";
    }
    if (problem != NULL) {
        snprintf(note, note_size, "the cached PM config %.900s is %s: ignored and rebuilt", path,
                 problem);
        free(want.data);
        free(data);
        return -1;
    }
    memcpy(kept, data + want.size, key->count);
    memcpy(*image, data + at, (size_t)n_image);
    *image_size = (size_t)n_image;
    free(want.data);
    free(data);
    return 1;
}

/* mkdir -p with mode 0700 for the parts it makes. */
static int make_dirs(const char *dir)
{
    char path[1024];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
        return -1;
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0700) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(path, 0700) != 0 && errno != EEXIST ? -1 : 0;
}

int ls_pmcache_store(const char *dir, const ls_pmcache_key *key, const unsigned char *kept,
                     const uint8_t *image, size_t image_size, char *note, size_t note_size)
{
    char path[1200], temp[1300];
    if (ls_pmcache_path(dir, key, path, sizeof path) != 0) {
        snprintf(note, note_size, "the PM config cache folder name is too long: %.200s", dir);
        return -1;
    }
    if (make_dirs(dir) != 0) {
        snprintf(note, note_size, "the PM config cache folder %.900s could not be made: %s",
                 dir, strerror(errno));
        return -1;
    }
    buffer b = {0};
    put_key(&b, key);
    for (size_t i = 0; i < key->count; i++) {
        uint8_t flag = kept[i] ? 1 : 0;
        put(&b, &flag, 1);
    }
    put_u64(&b, (uint64_t)image_size);
    put(&b, image, image_size);
    put_u64(&b, b.failed ? 0 : fnv1a(FNV_START, b.data, b.size));
    if (b.failed) {
        free(b.data);
        snprintf(note, note_size, "out of memory writing the PM config cache");
        return -1;
    }
    static atomic_uint serial;
    snprintf(temp, sizeof temp, "%s.tmp.%ld.%u", path, (long)getpid(),
             atomic_fetch_add(&serial, 1));
    FILE *f = fopen(temp, "wb");
    int ok = f != NULL && fwrite(b.data, 1, b.size, f) == b.size;
    if (f != NULL && fclose(f) != 0)
        ok = 0;
    free(b.data);
    if (!ok || rename(temp, path) != 0) {
        snprintf(note, note_size, "the PM config cache %.900s could not be written: %s", path,
                 strerror(errno));
        remove(temp);
        return -1;
    }
    return 0;
}
