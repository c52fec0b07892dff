/* ls_pmdecoder: a thread of loopscope's own that decodes PM samples once
 * per period while sampling runs.
 *
 * Decoding there rather than at range exits means a loop without steps or
 * ranges still never overflows the hardware buffer, the buffer and the
 * counter data image can be small (a period's worth of samples), and the
 * user's thread never pays for decoding.  The thread never touches Python
 * and blocks every signal, so the interpreter's handlers stay on its own
 * threads.  Samples go into an array of the decoder's, handed over at stop. */
#ifndef LS_PMDECODER_H
#define LS_PMDECODER_H

#include "ls_records.h"

#include <stddef.h>
#include <stdint.h>

/* Starts the thread (PM sampling must be running: ls_pm_start).  Returns 0,
 * or -1 with a sentence in `why`; sampling then still works, decoded at stop. */
int ls_pmdecoder_start(uint64_t period_ns, char *why, size_t why_size);

/* Wakes the thread, joins it, and moves every sample it decoded to the end
 * of `into`.  Returns 0, or -1 if memory for the move ran out (the samples
 * that did not fit are counted as lost in *lost).  Safe when not started. */
int ls_pmdecoder_stop(ls_sample_array *into, uint64_t *lost);

/* Periods the last (or running) decoder thread woke up for. */
uint64_t ls_pmdecoder_rounds(void);

#endif
