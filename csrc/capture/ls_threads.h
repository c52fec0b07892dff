/* ls_threads: one identity per host thread across the record sources.
 *
 * Ranges, blocking calls and launch callbacks name their thread by its
 * whole pthread_self(); CUPTI's API activity records (launches when another
 * client holds CUPTI's callback slot, e.g. after torch.profiler) carry only
 * its lower 32 bits (CUpti_ActivityAPI.threadId is 32 bits wide).  Without
 * one identity a launch finds no range of its thread, and its kernels fall
 * back to whichever step began last on any thread. */
#ifndef LS_THREADS_H
#define LS_THREADS_H

#include "ls_records.h"

#include <stddef.h>

/* Gives each API record of r whose thread id is 32 bits wide and names no
 * range's or call's thread exactly the whole id of the one thread (of the
 * ranges, calls and API records) with those lower 32 bits.  Ids with no
 * such thread, or with two, stay as they are (the attribution then goes by
 * time).  Returns how many records it widened, or -1 when memory ran out
 * (nothing changed then). */
long ls_threads_widen_api_ids(ls_records *r);

#endif
