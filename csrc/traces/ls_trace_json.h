/* ls_trace_json: the bulk of a Chrome/Perfetto JSON trace of one analysed
 * capture, written in C (a Python loop per op would cost seconds at a few
 * million ops).  _trace_export.py writes the rest (metadata events, the
 * file around them) and documents the layout.
 *
 * Each event is written as ",{...}" (a comma first: the caller has written
 * the array's first event), times in microseconds from t0_ns with up to
 * three decimals (so nanoseconds survive), in this order:
 * - the ranges (category user_annotation, a step's args with "step"), on
 *   their thread's tid;
 * - the host syncs of the model, each a slice (category sync) on the tid of
 *   the thread that waited, named and described by its site, followed by
 *   the recorded calls (ls_calls: those that may wait, allocate or free)
 *   that launched nothing (category cuda_runtime or cuda_driver): a call
 *   of a sync with args "sync", "site", "launches_before"; a call outside
 *   every sync (an allocation, a copy that did not wait) with args
 *   "launches_before" and "call_site" (its site, when known), so a reader
 *   rebuilds every call the model's readiness counts;
 * - the API records (launch calls: category cuda_runtime or cuda_driver,
 *   named by their callback id) on their thread's tid; a launch call that
 *   is also a recorded call is written once, with the call's duration and
 *   its args as above plus "launch": 1; the chosen record of each correlation id (as the
 *   model matches launches) that launched an op starts a flow arrow ("s");
 * - each GPU op (category kernel, gpu_memcpy or gpu_memset, one track per
 *   stream; args correlation, device, stream, bytes, a kernel's launch
 *   geometry as Kineto writes it ("grid": [x, y, z], "block": [x, y, z],
 *   "registers per thread", "shared memory"; only when its grid and block
 *   are known) and its whole name), followed by the end of its flow arrow
 *   ("f", bp "e", at its start) when its launch call is in the trace;
 * - the sync records (category cuda_sync, on the sync-record lane);
 * - the warning and severe gaps (category gap, each GPU's gaps lane);
 * - the PM samples as counter events ("C") on the sampled GPU's process,
 *   one series per figure, each value at its sample's start and the last
 *   sample's values again at its end; values that were not collected are
 *   left out, and where a figure's next sample does not follow at once (a
 *   pause in sampling, a figure not collected) an instant of category
 *   counter_end (args.series) ends its series.
 * Strings are JSON-escaped; bytes that are not UTF-8 become U+FFFD. */
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
    uint32_t host_pid;        /* process of ranges, API calls, syncs and sync records */
    uint32_t gpu_pid;         /* a device not in device_ids goes to process gpu_pid + d */
    /* Chrome's pid/tid are small ints whatever the ids they stand for:
     * thread_ids (sorted; every thread of a range, API record or sync) ->
     * thread_tid; device_ids (sorted) -> device_pid; stream_keys (sorted,
     * device << 32 | stream) -> stream_tid; the sync records' lane and each
     * GPU's gaps lane get the tids below. */
    const uint64_t *thread_ids;
    const uint32_t *thread_tid;
    size_t thread_count;
    const uint32_t *device_ids, *device_pid;
    size_t device_count;
    const uint64_t *stream_keys;
    const uint32_t *stream_tid;
    size_t stream_count;
    uint32_t sync_tid, gap_tid;
    /* How ops are named: for each name id in name_ids (sorted, name_count of
     * them), the event's name and two optional args ("signature", "mangled");
     * NULL entries (or an id not listed) fall back to the raw name. */
    const uint32_t *name_ids;
    size_t name_count;
    const char *const *display, *const *signature, *const *mangled;
    /* The syncs' sites: sync_site[i] (sync_site_count == the model's sync
     * count, or 0 for none) is the index of sync i's site in site_name
     * (the slice's name) and site_args (JSON members, no braces, that go
     * first in its args), or -1.  In the file, syncs are numbered from
     * sync_base and sites from site_base (earlier profiles of the same
     * file took the numbers below). */
    const int32_t *sync_site;
    size_t sync_site_count;
    const char *const *site_name, *const *site_args;
    size_t site_count;
    uint32_t sync_base, site_base;
    /* The sites of the recorded calls outside syncs: call_site[i]
     * (call_site_count == the records' call count, or 0 for none) is the
     * index of call i's site in the file's call site list, numbered from
     * call_site_base, or -1 when unknown. */
    const int32_t *call_site;
    size_t call_site_count;
    uint32_t call_site_base;
} ls_trace_options;

/* Writes the events of `r` and its model `m`.  Returns 0; -1 when memory
 * ran out; -2 when the sink stopped it. */
int ls_trace_json_write(const ls_records *r, const ls_model *m, const ls_trace_options *o,
                        ls_trace_sink sink, void *context);

/* The counter series of PM figure `metric` (LS_M_*): the event's name and
 * its one arg key ("SM active", "%"), as the Kineto reader understands
 * them back.  0, or -1 for a figure out of range. */
int ls_trace_json_counter(int metric, const char **name, const char **unit);

#endif
