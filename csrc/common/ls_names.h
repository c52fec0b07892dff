/* ls_names: one process-wide table of interned strings (range and step
 * names, kernel names), each referred to by a 32-bit id and counted.
 *
 * A name lives while it has references: each Range, step or layer object
 * holds one on its name, and a record array holds one on every name its
 * records use (an ls_name_refs list, released with the records), so the
 * names of a profile are freed with the last capture that uses them.  Ids of
 * freed names are reused.  Text lives in arena chunks (no allocation per
 * name but the amortised growth of chunks and arrays); a chunk is freed when
 * its last name is.
 *
 * Threads.  Python threads (holding the GIL) and loopscope's worker thread
 * (without it: it interns kernel names while it parses activity records)
 * use the table at once:
 *   - interning, retaining, releasing and holding take one mutex (never held
 *     across anything but the table's own work);
 *   - reading a name (ls_names_text, _length, _format) takes no lock: an
 *     entry never moves (entries live in fixed chunks reached through a
 *     fixed directory) and its text never changes while the id is
 *     referenced.  The reader must hold a reference on the id, or be sure
 *     that something it keeps alive does (the records it reads, the object
 *     it belongs to); reading an id nobody holds is a race whose answer may
 *     be NULL or stale;
 *   - ls_names_hold on an id its list already holds is lock-free too (the
 *     range push of every step and range makes that call).
 * A child forked while another thread used the table finds it whole and
 * unlocked (ls_names_watch_forks).
 *
 * Names are C strings: a name must not contain a NUL byte (the Python-facing
 * callers refuse one with a clear error; NVTX takes C strings too). */
#ifndef LS_NAMES_H
#define LS_NAMES_H

#include <stddef.h>
#include <stdint.h>

#define LS_NO_NAME UINT32_MAX

/* The references a record array holds: one per distinct name it uses.  A
 * list is used by one thread at a time (its owner's); the table may be used
 * by others meanwhile. */
typedef struct {
    uint32_t *ids;
    size_t count, capacity;
    uint32_t tag; /* this list's mark in the table, 0 until first used */
} ls_name_refs;

/* Returns the id of `text` (`len` bytes, need not be NUL-terminated, must
 * hold no NUL) with one new reference for the caller; LS_NO_NAME when
 * memory ran out or the table is full. */
uint32_t ls_names_intern(const char *text, size_t len);

/* One more / one less reference on a live id (LS_NO_NAME is ignored).  The
 * last release frees the name; its id may then be reused. */
void ls_names_retain(uint32_t id);
void ls_names_release(uint32_t id);

/* Makes `refs` hold one reference on the live id `id` (once per list; the
 * caller must hold `id` some other way meanwhile).  Returns 0, or -1 when
 * memory ran out or `id` is not live (nothing held then).  Lock-free when
 * the list already holds it. */
int ls_names_hold(ls_name_refs *refs, uint32_t id);

/* Interns `text` and makes `refs` hold it, in one step: the id (valid while
 * `refs` holds it), or LS_NO_NAME when memory ran out. */
uint32_t ls_names_intern_held(ls_name_refs *refs, const char *text, size_t len);

/* Moves every reference `from` holds into `into` (no count changes) and
 * empties `from`.  Returns 0, or -1 when memory ran out: `from` then keeps
 * what did not move, and releasing both lists still releases everything. */
int ls_names_adopt(ls_name_refs *into, ls_name_refs *from);

/* Releases every reference `refs` holds and empties it. */
void ls_names_release_all(ls_name_refs *refs);

/* The NUL-terminated text of a held `id`, NULL for an unknown or freed id.
 * The pointer stays valid while the id is referenced.  Lock-free. */
const char *ls_names_text(uint32_t id);

/* Length in bytes of a held id's text, 0 for an unknown or freed id.
 * Lock-free. */
size_t ls_names_length(uint32_t id);

/* A step's name.  A step record keeps its name template (e.g. "Step_{i}")
 * and its index, so no name is made per step: the name is the template with
 * every "{i}" replaced by the index (a name without "{i}" is itself).
 * Writes at most size - 1 bytes and a NUL into `out` (size > 0) and returns
 * the whole name's length, like snprintf; SIZE_MAX for an unknown id.
 * Lock-free, for a held id. */
size_t ls_names_format(uint32_t id, int32_t index, char *out, size_t size);

/* Registers the table's fork handlers, once per process: the fork waits
 * for the thread inside the table (if any) to leave it, so the child finds
 * the table whole, and unlocked.  Every function that locks calls it; call
 * it before registering a fork handler of your own that uses the table, so
 * that the table's child handler runs first.  Never fails. */
void ls_names_watch_forks(void);

/* Checks the table's own invariants (for tests): every live name is found
 * by its hash, every slot names a live id, the free ids are free, each
 * chunk counts its live names.  Returns 0, or a negative code naming the
 * first broken one (-1 lookup, -2 slots, -3 free ids, -4 chunks). */
int ls_names_check(void);

/* Live names, and bytes the table holds (entries, hash slots, text chunks). */
uint32_t ls_names_count(void);
size_t ls_names_bytes(void);

/* Every live id is below this bound (ids of freed names are reused, so it
 * may exceed the count): the size of an array indexed by id.  Lock-free. */
uint32_t ls_names_id_bound(void);

#endif
