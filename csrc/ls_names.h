/* ls_names: one process-wide table of interned strings (range names, kernel
 * names).  A name is stored once and referred to by a 32-bit id; ids stay
 * valid for the life of the process, so records and cached range objects
 * never copy strings. */
#ifndef LS_NAMES_H
#define LS_NAMES_H

#include <stddef.h>
#include <stdint.h>

#define LS_NO_NAME UINT32_MAX

/* Returns the id of `text` (length `len`, need not be NUL-terminated),
 * adding it if new; LS_NO_NAME when memory ran out.  Any thread (the
 * worker interns kernel names while Python threads intern range names). */
uint32_t ls_names_intern(const char *text, size_t len);

/* The NUL-terminated text of `id`, or NULL for an unknown id.  Lock-free,
 * any thread; the text never moves. */
const char *ls_names_text(uint32_t id);

/* Per-name slot for the NVTX registered-string handle (NULL until set);
 * set and read only by threads holding the GIL. */
void *ls_names_nvtx_handle(uint32_t id);
void ls_names_set_nvtx_handle(uint32_t id, void *handle);

uint32_t ls_names_count(void);

#endif
