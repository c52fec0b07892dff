/* ls_kineto: a streaming reader of torch.profiler / Kineto Chrome traces.
 * The owner feeds the file's bytes in chunks of any size (decompressed
 * already); the reader keeps only an unfinished tail, turns each event of
 * traceEvents into builder records (ls_tbuild) and keeps the other
 * top-level members (deviceProperties, baseTimeNanoseconds, ...) as raw
 * JSON text for the owner to decode.  A bare list of events (old traces)
 * is read too.  Pure C, no Python: feed may run without the GIL.
 *
 * What each event becomes: kernel / gpu_memcpy / gpu_memset -> ops (device
 * from args.device or pid, stream from args.stream or tid, launch from
 * args.correlation; a kernel's launch geometry from args.grid and
 * args.block, [x, y, z], "registers per thread" and "shared memory", kept
 * or counted as ls_tbuild_op says); cuda_graph (loopscope's export of a
 * replay traced whole) -> a graph op, named; cuda_runtime / cuda_driver ->
 * API calls (and calls
 * that may wait, allocate or free, by name); user_annotation -> ranges; python_function and
 * cpu_op -> stack frames; cuda_sync -> host syncs; "C" counters -> counter
 * points when a value names a known figure; "i" instants of category
 * counter_end (args.series) -> the end of that series' last value; "M"
 * process names "GPU <n>" -> the device of that pid's counters.  Events whose needed fields are
 * missing or unusable are counted as skipped with the reason.
 *
 * What loopscope's own export adds (see _trace_export.py), read from any
 * file but used only as the owner says (ls_tb_settle_options): a range's
 * args.step (its step), a call's args.sync / site / launches_before /
 * launch (a tagged wait, ls_tbuild_wait) or, without sync, its
 * launches_before / call_site / launch (a recorded call outside syncs,
 * ls_tbuild_call), a kernel's args.mangled or
 * args.signature (its whole name, taken over the short one shown). */
#ifndef LS_KINETO_H
#define LS_KINETO_H

#include "ls_tbuild.h"

#include <stddef.h>
#include <stdint.h>

/* Bounds on what the reader holds at once: one event or top-level member
 * (its text waits in the buffer until its end is read; white space between
 * them is never kept): a feed that leaves more than LS_KINETO_MAX_UNIT
 * bytes of one unread to its end is refused with the unit's byte offset
 * and the cap; and one name: a longer one is cut at LS_KINETO_MAX_NAME
 * bytes (at a character's start), its text ending " [name cut: N bytes]". */
#define LS_KINETO_MAX_UNIT (64u << 20)
#define LS_KINETO_MAX_NAME (64u << 10)

typedef struct {
    size_t key_at, key_len, value_at, value_len; /* offsets in `raw` */
} ls_kineto_member;

/* A thread named by a string in the trace (`"tid": "python thread"`): its
 * records carry the string's hash as their thread id; the name is kept here
 * (the first LS_KINETO_THREAD_NAMES of them) so a view can say it. */
#define LS_KINETO_THREAD_NAMES 64
typedef struct {
    uint64_t id;
    char name[96];
} ls_kineto_thread_name;

typedef struct {
    ls_tbuild build;
    char *buf;                /* unread bytes: buf[pos, len) */
    size_t len, pos, cap;
    size_t retry_at;          /* an unfinished unit waits until len reaches this */
    uint64_t consumed;        /* file bytes before buf[0], for error offsets */
    int state, bare, saw_events;
    uint64_t events;          /* elements of the event list */
    char *raw;                /* top-level members other than traceEvents */
    size_t raw_len, raw_cap;
    ls_kineto_member *members;
    size_t member_count, member_cap;
    uint64_t members_dropped; /* members too large to keep */
    uint64_t counter_values, counter_unknown; /* counter values read, not understood */
    uint64_t names_cut;       /* names longer than LS_KINETO_MAX_NAME, cut */
    ls_kineto_thread_name thread_names[LS_KINETO_THREAD_NAMES];
    size_t thread_name_count;
    char *scratch;            /* unescaped names */
    size_t scratch_cap;
    char error[256];
} ls_kineto;

void ls_kineto_init(ls_kineto *k);
void ls_kineto_free(ls_kineto *k);

/* Reads data[0..n); final = 1 with the last chunk (n may be 0).  Returns 0,
 * -1 when the text is not a readable trace (k->error says why and where),
 * -2 when memory ran out. */
int ls_kineto_feed(ls_kineto *k, const char *data, size_t n, int final);

#endif
