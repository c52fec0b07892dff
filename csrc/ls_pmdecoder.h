/* ls_pmdecoder: a thread of loopscope's own that decodes PM samples once
 * per period while sampling runs, and gives the counters back when no
 * profile has used them for a while.
 *
 * Decoding there rather than at range exits means a loop without steps or
 * ranges still never overflows the hardware buffer, the buffer and the
 * counter data image can be small (a period's worth of samples), and the
 * user's thread never pays for decoding.  Between profiles sampling stays
 * enabled (ls_pm_stop), so back-to-back profiles (a pytest session, a
 * notebook cell run twice) skip the ~150 ms of enabling and configuring;
 * after `keep_ns` without a profile the thread releases it and ends.
 *
 * The thread never touches Python and blocks every signal, so the
 * interpreter's handlers stay on its own threads.  Samples go into an array
 * of the decoder's, handed over at stop.  Every function but the thread
 * runs under the GIL, which orders them. */
#ifndef LS_PMDECODER_H
#define LS_PMDECODER_H

#include "ls_records.h"

#include <stddef.h>
#include <stdint.h>

/* Before ls_pm_start: the thread must not release sampling from now on. */
void ls_pmdecoder_hold(void);

/* After ls_pm_start succeeded: decode every period_ns (the thread is made
 * if there is none).  Returns 0, or -1 with a sentence in `why`; samples are
 * then decoded at stop only. */
int ls_pmdecoder_start(uint64_t period_ns, char *why, size_t why_size);

/* Parks the thread (waiting out a decode in progress) and moves every
 * sample it decoded to the end of `into`.  Returns 0, or -1 if memory for
 * the move ran out (*lost says how many samples).  Safe when not started. */
int ls_pmdecoder_stop(ls_sample_array *into, uint64_t *lost);

/* After ls_pm_stop (or a failed ls_pm_start): release sampling in keep_ns
 * unless a profile holds it again first; at once when there is no thread. */
void ls_pmdecoder_release_after(uint64_t keep_ns);

/* Releases sampling now and ends the thread (interpreter exit, tests). */
void ls_pmdecoder_shutdown(void);

/* Periods the current or last thread woke up to decode. */
uint64_t ls_pmdecoder_rounds(void);

/* "none", "decoding", "parked", "idle" or "ended": for tests. */
const char *ls_pmdecoder_state(void);

#endif
