/* ls_pystack: the calling thread's Python stack, read from inside a CUPTI
 * callback.
 *
 * PyTorch releases the GIL around most of its C++ work (.item(), .cpu(),
 * torch.cuda.synchronize()), so the callback of the sync they cause usually
 * runs without it.  The thread's own frames cannot change while it is
 * blocked inside that call, so they are read in place: each frame's code
 * object (copied out once into ls_pycodes) and the source position of the
 * instruction it is executing.  No Python object is created, no reference
 * is taken, nothing is allocated; a thread without a Python thread state
 * (a C++ thread) gets an empty stack.  This reads CPython's internal frame
 * layout, as faulthandler does; it is compiled per Python version. */
#ifndef LS_PYSTACK_H
#define LS_PYSTACK_H

#include "ls_records.h"

/* Writes up to `max` frames of the calling thread, innermost first, and
 * returns how many.  Safe with or without the GIL. */
int ls_pystack_capture(ls_frame *frames, int max);

/* Before the first capture, from a Python thread (a session's start): what
 * the kept source positions need once a process (a fork handler). */
void ls_pystack_prepare(void);

/* The test hooks' way to the kept source positions: the position (line,
 * column, end line, end column) of `byte_offset` in `code` as a frame gets
 * it, kept under the address `key` as if `code` lived there (a code object
 * made again where a dropped one was).  1, or 0 when there is none
 * (Python 3.10 keeps none). */
int ls_pystack_locate_as(const void *key, void *code, int byte_offset, int position[4]);

#endif
