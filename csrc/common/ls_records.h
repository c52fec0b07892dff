/* ls_records: the compact record arrays that every source (live CUPTI,
 * injected test records, later trace files) fills and the analysis reads.
 * All times are nanoseconds on one clock (CUPTI's, when CUPTI is loaded). */
#ifndef LS_RECORDS_H
#define LS_RECORDS_H

#include "ls_metrics.h"
#include "ls_names.h"

#include <stddef.h>
#include <stdint.h>

/* LS_OP_GRAPH (issue 27, graph-level mode): one whole replay of a CUDA graph
 * exec, from CUPTI's graph-level trace (one record per replay, no record per
 * node): start_ns/end_ns span the replay's first node to its last, name_id
 * names the graph ("CUDA graph <id>"), graph_launched is 1 and the geometry
 * is 0 (a replay has no one shape).  It is GPU work like a kernel for busy
 * time, gaps, steps and ranges, but not a kernel: kernel counts, the kernel
 * table and fill read kernels only. */
typedef enum { LS_OP_KERNEL = 0, LS_OP_MEMCPY = 1, LS_OP_MEMSET = 2, LS_OP_GRAPH = 3 } ls_op_kind;

/* One GPU operation: kernel, memcpy, memset or a graph replay. */
typedef struct {
    uint64_t start_ns, end_ns;
    uint64_t bytes;          /* memcpy/memset size, 0 for kernels */
    uint32_t correlation_id; /* ties the op to the API call that launched it */
    uint32_t device_id;
    uint32_t stream_id;
    uint32_t name_id;        /* kernel name in ls_names; UINT32_MAX if none */
    uint8_t kind;            /* ls_op_kind */
    uint8_t copy_kind;       /* CUpti_ActivityMemcpyKind for memcpys */
    uint8_t graph_launched;  /* 1 if it ran as part of a CUDA graph */
    uint8_t host_memory;     /* memcpys: CUpti_ActivityMemoryKind of the host side
                                (1 pageable, 2 pinned), 0 when no side is host */
    /* Kernels: the launch geometry, 0 where the source does not say (the
     * limits of CUDA fit: grid y and z below 65536, block sides <= 1024,
     * registers <= 255).  Memcpys and memsets leave them 0. */
    uint32_t shared_bytes;   /* static + dynamic shared memory per block */
    uint32_t grid_x;
    uint16_t grid_y, grid_z;
    uint16_t block_x, block_y, block_z;
    uint16_t registers;      /* per thread */
} ls_op;

/* The one way every source makes an op: `kind` with its times, device,
 * stream, correlation id, name (LS_NO_NAME if none) and bytes (0 for
 * kernels); every other field 0 (copy kind, host memory, geometry), except
 * that a graph replay is graph_launched (LS_OP_GRAPH above).  A field added
 * to ls_op then starts defined in every producer. */
ls_op ls_op_make(ls_op_kind kind, uint64_t start_ns, uint64_t end_ns, uint32_t device_id,
                 uint32_t stream_id, uint32_t correlation_id, uint32_t name_id, uint64_t bytes);

/* One host API call (runtime or driver), as CUPTI timed it. */
typedef struct {
    uint64_t start_ns, end_ns;
    uint64_t thread_id;      /* launch callbacks: pthread_self(), as ranges; activity
                                records: CUPTI's threadId; 0 when unknown */
    uint32_t correlation_id;
    uint32_t cbid;
    uint32_t domain; /* 0 runtime, 1 driver */
    uint32_t alias;  /* trace readers: the HIP name it was read under (ls_cbid_alias_name),
                        0 for a CUDA call */
} ls_api;

/* One CUPTI SYNCHRONIZATION activity record: an interval where the host
 * waited in a stream, event or context synchronize.
 *
 * Names, the same in C and Python: a "sync record" is this raw record; a
 * "sync" is a host wait as a user sees it (one `.item()`, one
 * `torch.cuda.synchronize()`), built from the blocking calls by ls_syncs
 * and reported in summary["syncs"]; a "wait class" (ls_cbids) says how an
 * API call can make the host wait. */
typedef struct {
    uint64_t start_ns, end_ns;
    uint32_t correlation_id;
    uint32_t stream_id;
    uint32_t type; /* CUpti_ActivitySynchronizationType */
    uint32_t reserved;
} ls_sync_record;

/* One Python frame of a captured stack (see ls_pystack). */
typedef struct {
    uint32_t code;          /* ls_pycodes id, LS_NO_CODE if the table was full */
    int32_t line, end_line; /* source lines of the instruction, -1 unknown */
    int16_t col, end_col;   /* UTF-8 byte columns, -1 unknown (before 3.11) */
    uint8_t truth_test;     /* 1: the instruction tests an object's truth (if, while,
                               not, and/or, a comprehension's if): its __bool__ runs */
    uint8_t reserved[3];    /* 0 (frames are compared byte by byte) */
} ls_frame;

#define LS_CALL_FRAMES 16

/* One API call that can make the host wait for the GPU (a wait class in
 * ls_cbids), with the Python stack that made it. */
typedef struct {
    uint64_t enter_ns, exit_ns; /* exit_ns 0 while the call has not returned */
    uint64_t thread_id;         /* pthread_self(), as threading.get_ident() */
    uint64_t launches_before;   /* launch calls of its thread before this one began */
    uint32_t correlation_id;
    uint32_t cbid;
    uint8_t domain; /* 0 runtime, 1 driver */
    uint8_t role;   /* ls_cbids role flags */
    uint8_t frame_count;
    uint8_t alias;  /* trace readers: the HIP name it was read under (ls_cbid_alias_name),
                       0 for a CUDA call */
    ls_frame frames[LS_CALL_FRAMES]; /* innermost first */
} ls_call;

/* The Python code objects named by frames' `code` ids, as plain strings. */
typedef struct {
    const char *filename;
    const char *function; /* qualified name */
    int first_line;
} ls_code_info;

typedef struct {
    ls_code_info *items;
    size_t count;
    char *arena; /* owns the strings */
} ls_code_table;

/* One host range (a step or a named range), closed or still open. */
typedef struct {
    uint64_t start_ns, end_ns; /* end_ns == 0 while open */
    uint64_t thread_id;
    uint32_t name_id;   /* a step's is its name template (see ls_range_name) */
    int32_t parent;     /* index of the enclosing range on the same thread, -1 if none */
    int32_t step_index; /* >= 0 for steps, -1 for plain ranges */
    uint32_t depth;
} ls_range;

/* One PM sample: the counters over [start_ns, end_ns] on the profile clock.
 * A metric that was not collected is NaN. */
typedef struct {
    uint64_t start_ns, end_ns;
    double values[LS_METRICS];
} ls_sample;

#define LS_DEFINE_ARRAY(name, type) \
    typedef struct {                \
        type *items;                \
        size_t count, capacity;     \
    } name

LS_DEFINE_ARRAY(ls_op_array, ls_op);
LS_DEFINE_ARRAY(ls_api_array, ls_api);
LS_DEFINE_ARRAY(ls_sync_record_array, ls_sync_record);
LS_DEFINE_ARRAY(ls_range_array, ls_range);
LS_DEFINE_ARRAY(ls_call_array, ls_call);
LS_DEFINE_ARRAY(ls_sample_array, ls_sample);

/* What the analysis needs to know of a device to judge how much of it a
 * kernel's grid can fill (cuDeviceGetAttribute, or a trace file's device
 * properties); 0 where unknown. */
typedef struct {
    uint32_t device_id;
    uint32_t sm_count;
    uint32_t max_threads_per_sm;
    uint32_t max_blocks_per_sm;
    uint32_t registers_per_sm;
    uint32_t shared_bytes_per_sm;
} ls_device_facts;

#define LS_MAX_DEVICE_FACTS 64

/* Everything one profile captured. */
typedef struct {
    ls_op_array ops;
    ls_api_array apis;
    ls_sync_record_array sync_records;
    ls_range_array ranges;
    ls_call_array calls;        /* calls that may have blocked the host */
    ls_code_table codes;        /* what the calls' frames point to */
    ls_sample_array samples;    /* PM samples, in time order once the session stopped */
    uint32_t sample_device;     /* the device the samples come from */
    uint64_t start_ns, stop_ns; /* the profile's own span */
    uint64_t dropped_records;   /* reported by CUPTI or lost to a full buffer pool */
    uint64_t invalid_records;   /* end before start, or zero timestamps */
    ls_name_refs names;         /* a reference on every name the records use: a
                                   name_id put in a record must be held here */
    ls_device_facts devices[LS_MAX_DEVICE_FACTS]; /* the devices known, in no order */
    size_t device_count;
    uint64_t merge_idle_upto_ns; /* idle intervals this short or shorter are below the
                                    source's time resolution: not gaps, their busy
                                    intervals merge (0: every idle ns is a gap) */
    uint32_t earlier_launch_floor; /* back to back: launches with correlation ids up to
                                      this one (in serial order, ls_launch_id_later)
                                      were an earlier profile's (0: none) */
    uint32_t stop_launch_id;    /* the latest launch id seen at the profile's stop (0: not
                                   stopped yet): a record above it was launched after */
    uint64_t later_incomplete;  /* incomplete records launched after the stop: not invalid,
                                   not this profile's */
} ls_records;

/* Appends one zeroed slot and returns it, or NULL when memory ran out.
 * The pointer stays valid until the next append to the same array. */
ls_op *ls_ops_append(ls_op_array *a);
ls_api *ls_apis_append(ls_api_array *a);
ls_sync_record *ls_sync_records_append(ls_sync_record_array *a);
ls_range *ls_ranges_append(ls_range_array *a);
ls_call *ls_calls_append(ls_call_array *a);
ls_sample *ls_samples_append(ls_sample_array *a);

/* Reserves room for `n` more items; 0 on success, -1 when out of memory. */
int ls_ranges_reserve(ls_range_array *a, size_t n);

/* The facts of `device_id`, or NULL when none were recorded. */
const ls_device_facts *ls_records_device(const ls_records *r, uint32_t device_id);

/* Whether two ops have the same launch geometry: grid, block, registers
 * and shared memory (what a launch's fill, shape and signature read).
 * Inline: three passes over every op ask it. */
static inline int ls_op_same_geometry(const ls_op *a, const ls_op *b)
{
    return a->grid_x == b->grid_x && a->grid_y == b->grid_y && a->grid_z == b->grid_z &&
           a->block_x == b->block_x && a->block_y == b->block_y && a->block_z == b->block_z &&
           a->registers == b->registers && a->shared_bytes == b->shared_bytes;
}

/* Records (or replaces) the facts of one device.  0, or -1 when the table
 * is full. */
int ls_records_set_device(ls_records *r, const ls_device_facts *facts);

/* Frees every array, releases the names, and zeroes the struct. */
void ls_records_clear(ls_records *r);

/* The name of `range`: a plain range's text, or a step's template with
 * each "{i}" replaced by its index (ls_names_format: a step record keeps
 * its template, so no name is made per step).  Writes at most size - 1
 * bytes and a NUL into `out` (size > 0) and returns the whole name's
 * length, like snprintf; SIZE_MAX when the name is unknown. */
size_t ls_range_name(const ls_range *range, char *out, size_t size);

#endif
