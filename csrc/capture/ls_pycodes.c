/* ls_pycodes: see ls_pycodes.h. */
#include "ls_pycodes.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const void *code, *filename, *function; /* identity: a reused address must match all */
    uint32_t id;
    uint32_t generation;                    /* not the table's: an empty slot */
} ls_code_slot;

/* The table outlives the profiles: a reset only moves the slots'
 * generation on and empties the rest, and a take copies out what was used
 * (a few KiB), so a profile's start neither allocates nor clears 1.7 MiB
 * (the callocs were most of the start's "reset" phase: 0.1-0.3 ms). */
static struct {
    pthread_mutex_t lock;
    ls_code_slot *slots; /* open addressing, power-of-two size */
    size_t slot_mask;
    uint32_t generation; /* of the live slots; never 0 */
    int open;            /* reset since the last take: codes may be added */
    ls_code_info *infos;
    size_t count, max_codes;
    char *arena;
    size_t arena_used, arena_size;
    uint64_t refused;
} table = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* A fork waits for the table (a callback on another thread may hold it),
 * so the child finds it whole and unlocked: its next session's reset must
 * not wait for a thread that is not there. */
static pthread_once_t forks_once = PTHREAD_ONCE_INIT;
static void lock_for_fork(void) { pthread_mutex_lock(&table.lock); }
static void unlock_after_fork(void) { pthread_mutex_unlock(&table.lock); }
static void reset_in_child(void) { pthread_mutex_init(&table.lock, NULL); }
static void watch_forks(void) { pthread_atfork(lock_for_fork, unlock_after_fork, reset_in_child); }

int ls_pycodes_reset(size_t max_codes, size_t arena_bytes)
{
    pthread_once(&forks_once, watch_forks);
    size_t slots = 16;
    while (slots < 2 * max_codes)
        slots *= 2;
    pthread_mutex_lock(&table.lock);
    int ok = table.slots != NULL && table.slot_mask + 1 == slots && table.infos != NULL &&
             table.max_codes == max_codes && table.arena != NULL &&
             table.arena_size == arena_bytes;
    if (!ok) {
        free(table.slots);
        free(table.infos);
        free(table.arena);
        table.slots = calloc(slots, sizeof *table.slots);
        table.infos = malloc((max_codes ? max_codes : 1) * sizeof *table.infos);
        table.arena = malloc(arena_bytes ? arena_bytes : 1);
        table.generation = 0;
        ok = table.slots && table.infos && table.arena;
        table.slot_mask = table.slots != NULL ? slots - 1 : 0;
        table.max_codes = ok ? max_codes : 0;
        table.arena_size = ok ? arena_bytes : 0;
    }
    if (++table.generation == 0 && table.slots != NULL) {
        /* Wrapped after 2^32 resets: slots of generation 1 might linger. */
        memset(table.slots, 0, (table.slot_mask + 1) * sizeof *table.slots);
        table.generation = 1;
    }
    table.count = table.arena_used = 0;
    table.refused = 0;
    table.open = ok;
    pthread_mutex_unlock(&table.lock);
    return ok ? 0 : -1;
}

/* Appends the UTF-8 form of str `s` to the arena, NUL-terminated; returns
 * it, or NULL when it does not fit.  Reads the str's characters directly:
 * no encoding call, no allocation, no GIL needed for an immutable str. */
static const char *copy_str(PyObject *s)
{
    if (s == NULL || !PyUnicode_Check(s))
        return NULL;
#if PY_VERSION_HEX < 0x030C0000
    if (!PyUnicode_IS_READY(s))
        return NULL;
#endif
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    char *out = table.arena + table.arena_used;
    size_t room = table.arena_size - table.arena_used, used = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        unsigned char bytes[4];
        size_t len;
        if (c < 0x80) {
            bytes[0] = (unsigned char)c;
            len = 1;
        } else if (c < 0x800) {
            bytes[0] = (unsigned char)(0xC0 | (c >> 6));
            bytes[1] = (unsigned char)(0x80 | (c & 0x3F));
            len = 2;
        } else if (c < 0x10000) {
            bytes[0] = (unsigned char)(0xE0 | (c >> 12));
            bytes[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
            bytes[2] = (unsigned char)(0x80 | (c & 0x3F));
            len = 3;
        } else {
            bytes[0] = (unsigned char)(0xF0 | (c >> 18));
            bytes[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
            bytes[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
            bytes[3] = (unsigned char)(0x80 | (c & 0x3F));
            len = 4;
        }
        if (used + len + 1 > room)
            return NULL;
        memcpy(out + used, bytes, len);
        used += len;
    }
    if (used + 1 > room)
        return NULL;
    out[used++] = '\0';
    table.arena_used += used;
    return out;
}

static size_t hash_pointer(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

uint32_t ls_pycodes_intern(PyCodeObject *code)
{
    PyObject *filename = code->co_filename;
#if PY_VERSION_HEX >= 0x030B0000
    PyObject *function = code->co_qualname;
#else
    PyObject *function = code->co_name;
#endif
    uint32_t id = LS_NO_CODE;
    pthread_mutex_lock(&table.lock);
    if (!table.open)
        goto done;
    size_t i = hash_pointer(code) & table.slot_mask;
    for (;; i = (i + 1) & table.slot_mask) {
        ls_code_slot *slot = &table.slots[i];
        if (slot->generation != table.generation)
            break;
        if (slot->code == code && slot->filename == filename && slot->function == function) {
            id = slot->id;
            goto done;
        }
    }
    if (table.count >= table.max_codes) {
        table.refused++;
        goto done;
    }
    size_t mark = table.arena_used;
    const char *file_text = copy_str(filename);
    const char *function_text = file_text ? copy_str(function) : NULL;
    if (function_text == NULL) {
        table.arena_used = mark;
        table.refused++;
        goto done;
    }
    id = (uint32_t)table.count++;
    table.infos[id] = (ls_code_info){file_text, function_text, code->co_firstlineno};
    table.slots[i] = (ls_code_slot){code, filename, function, id, table.generation};
done:
    pthread_mutex_unlock(&table.lock);
    return id;
}

void ls_pycodes_view(ls_code_table *view)
{
    pthread_mutex_lock(&table.lock);
    *view = (ls_code_table){table.infos, table.count, table.arena};
    pthread_mutex_unlock(&table.lock);
}

void ls_pycodes_take(ls_code_table *out)
{
    pthread_mutex_lock(&table.lock);
    size_t n = table.open ? table.count : 0, used = table.open ? table.arena_used : 0;
    ls_code_info *infos = malloc((n ? n : 1) * sizeof *infos);
    char *arena = malloc(used ? used : 1);
    if (infos == NULL || arena == NULL) {
        free(infos);
        free(arena);
        *out = (ls_code_table){NULL, 0, NULL};
        table.refused += n; /* their frames keep ids the capture cannot name */
    } else {
        if (used > 0)
            memcpy(arena, table.arena, used);
        for (size_t i = 0; i < n; i++) {
            infos[i] = table.infos[i];
            infos[i].filename = arena + (table.infos[i].filename - table.arena);
            infos[i].function = arena + (table.infos[i].function - table.arena);
        }
        *out = (ls_code_table){infos, n, arena};
    }
    table.count = table.arena_used = 0;
    table.open = 0; /* closed until the next reset */
    pthread_mutex_unlock(&table.lock);
}

uint64_t ls_pycodes_refused(void)
{
    pthread_mutex_lock(&table.lock);
    uint64_t n = table.refused;
    pthread_mutex_unlock(&table.lock);
    return n;
}
