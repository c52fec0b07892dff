/* ls_trace_json: the bulk of a Chrome/Perfetto JSON trace of one analysed
 * capture, written in C (a Python loop per op would cost seconds at a few
 * million ops).  _trace_export.py writes the rest (metadata events, the
 * file around them).
 *
 * Each event is written as ",{...}" (a comma first: the caller has written
 * the array's first event), times in microseconds from t0_ns with up to
 * three decimals, in this order: the ranges (category step or range, on
 * their thread's tid), then each GPU op (category kernel, memcpy or memset,
 * one track per stream) followed by the end of its flow arrow when a launch
 * record has its correlation id, each API record (category api, on the API
 * lane) followed by the start of its arrow when an op has its id, the sync
 * records (on their lane), and the warning and severe gaps (each GPU's gaps
 * lane).  Strings are JSON-escaped; bytes that are not UTF-8 become
 * U+FFFD. */
#ifndef LS_TRACE_JSON_H
#define LS_TRACE_JSON_H

#include "ls_model.h"
#include "ls_records.h"

#include <stddef.h>
#include <stdint.h>

/* Receives the text in pieces; returns 0, or -1 to stop the writing. */
typedef int (*ls_trace_sink)(void *context, const char *text, size_t len);

typedef struct {
    uint64_t t0_ns;           /* time 0 of the trace */
    long profile;             /* the profile's number, in the ranges' args */
    uint32_t host_pid;        /* process of ranges, API calls and sync records */
    uint32_t gpu_pid;         /* a device not in device_ids goes to process gpu_pid + d */
    const uint32_t *range_tid; /* per range: the tid of its thread */
    /* Chrome's pid/tid are small ints whatever the ids they stand for:
     * device_ids (sorted) -> device_pid; stream_keys (sorted, device << 32 |
     * stream) -> stream_tid; the host lanes of API calls and sync records,
     * and each GPU's gaps lane, get the tids below. */
    const uint32_t *device_ids, *device_pid;
    size_t device_count;
    const uint64_t *stream_keys;
    const uint32_t *stream_tid;
    size_t stream_count;
    uint32_t api_tid, sync_tid, gap_tid;
    /* How ops are named: for each name id in name_ids (sorted, name_count of
     * them), the event's name and two optional args ("signature", "mangled");
     * NULL entries (or an id not listed) fall back to the raw name. */
    const uint32_t *name_ids;
    size_t name_count;
    const char *const *display, *const *signature, *const *mangled;
} ls_trace_options;

/* Writes the events of `r` and its model `m`.  Returns 0; -1 when memory
 * ran out; -2 when the sink stopped it. */
int ls_trace_json_write(const ls_records *r, const ls_model *m, const ls_trace_options *o,
                        ls_trace_sink sink, void *context);

#endif
