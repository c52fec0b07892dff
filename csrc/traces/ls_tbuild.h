/* ls_tbuild: turns the events of a trace file (Kineto JSON, Nsight Systems
 * SQLite) into the same ls_records a live profile fills, so one C analysis
 * serves both.  Pure C, no Python and no GIL: readers add events, then
 * ls_tbuild_settle puts them on one clock and derives what a trace does not
 * store but the records hold (range nesting, the Python stack of each call
 * that may wait, allocate or free, launches before it, counter samples).
 *
 * Times go in as signed nanoseconds on the file's own clock (Kineto's are
 * relative to baseTimeNanoseconds); settle adds the base.  Names go in as
 * text and live in the builder's private string table until the owner maps
 * them to ls_names (ls_tbuild_name).
 *
 * Adding functions return 0, or -1 when memory ran out (the builder is then
 * marked failed; settle refuses it).  An event whose fields are unusable is
 * counted with ls_tbuild_skip by the reader, never added; one whose times lie
 * 2**61 ns or more from the file's zero (or end before they start) is
 * counted so by the adding function itself. */
#ifndef LS_TBUILD_H
#define LS_TBUILD_H

#include "ls_records.h"
#include "ls_strtab.h"

#include <stddef.h>
#include <stdint.h>

/* What an event of the file is, for counts and skips. */
typedef enum {
    LS_TB_KERNEL, LS_TB_MEMCPY, LS_TB_MEMSET, LS_TB_GRAPH, LS_TB_RUNTIME, LS_TB_DRIVER,
    LS_TB_CPU_OP, LS_TB_PYTHON, LS_TB_ANNOTATION, LS_TB_GPU_ANNOTATION, LS_TB_SYNC, LS_TB_FLOW,
    LS_TB_COUNTER, LS_TB_METADATA, LS_TB_OTHER, LS_TB_CLASSES
} ls_tb_class;

/* The class's name as a file calls it ("kernel", "cuda_runtime", ...). */
const char *ls_tbuild_class_name(ls_tb_class c);

/* Why an event's times cannot be used: the one list every reader skips by
 * (ls_tbuild_skip_times); the texts are ls_tb_time_reason_text. */
typedef enum {
    LS_TB_TIME_NO_TS,          /* Kineto: no ts, or one that is not a number */
    LS_TB_TIME_NO_DUR,         /* Kineto: no dur, or one that is not a number */
    LS_TB_TIME_NEGATIVE_DUR,   /* Kineto: dur < 0 */
    LS_TB_TIME_NO_START_END,   /* Nsight Systems: a row with no start or no end */
    LS_TB_TIME_ENDS_BEFORE,    /* an end before the start */
    LS_TB_TIME_TOO_FAR,        /* 2**61 ns or more from the file's zero */
    LS_TB_TIME_REASONS
} ls_tb_time_reason;

extern const char *const ls_tb_time_reason_text[LS_TB_TIME_REASONS];

/* A host interval: a range, a Python function or a CPU op. */
typedef struct {
    int64_t start, end;
    uint64_t thread;
    uint32_t name;  /* string table id */
    uint32_t index; /* ranges: order of addition (a stable tie-break) */
    int32_t step;   /* ranges: the step number the file marks it with, -1 none */
    uint32_t reserved;
} ls_tb_span;

/* One value of a counter series at a time. */
typedef struct {
    int64_t ts;
    double value;
    uint32_t series, device;
    int32_t metric;      /* LS_M_*, or -1: the series' value ends here */
    uint32_t device_pid; /* 1: `device` is the event's numeric pid, which a GPU
                            process name may map to its device (settle) */
} ls_tb_point;

/* Which host sync of loopscope's own export a call belongs to, and the
 * site of that sync (an index into the export's sync site list); or, for a
 * recorded call outside syncs, its own site (an index into the export's
 * call site list). */
#define LS_TB_NO_TAG UINT32_MAX
typedef struct {
    uint32_t sync, site; /* LS_TB_NO_TAG: no sync (site: none known) */
    uint32_t call_site;  /* outside syncs: its site, LS_TB_NO_TAG none known */
    uint32_t recorded;   /* 1: the export recorded the call (tagged event) */
} ls_tb_tag;

/* A numeric pid the file names "GPU <device>". */
typedef struct {
    uint32_t pid, device;
} ls_tb_gpu_process;

LS_DEFINE_ARRAY(ls_tb_span_array, ls_tb_span);
LS_DEFINE_ARRAY(ls_tb_point_array, ls_tb_point);
LS_DEFINE_ARRAY(ls_tb_gpu_process_array, ls_tb_gpu_process);

#define LS_TB_REASON 80

typedef struct {
    ls_strtab names;
    ls_records rec;            /* times biased (see ls_tbuild.c) until settle */
    ls_tb_span_array ranges;   /* annotations and NVTX ranges */
    ls_tb_span_array frames;   /* Python functions and CPU ops, for call stacks */
    ls_tb_point_array points;
    ls_tb_tag *tags;           /* per call of rec.calls */
    size_t tag_capacity;
    uint64_t tagged_calls;     /* calls from tagged events (ls_tbuild_wait) */
    ls_tb_gpu_process_array gpu_processes;
    uint8_t *api_role;         /* per string id: role+1 of an API name, 0 not looked up */
    uint32_t *api_cbid;
    uint8_t *api_domain;
    uint8_t *api_alias;        /* per string id: ls_cbid_alias_of the name */
    size_t api_cache;
    uint64_t seen[LS_TB_CLASSES], skipped[LS_TB_CLASSES];
    uint64_t skipped_times[LS_TB_CLASSES]; /* of skipped: for their times */
    uint64_t kernels;          /* kernels added (ls_tbuild_op) */
    uint64_t geometry_missing, geometry_bad; /* of them: no geometry kept, and why */
    char geometry_why[LS_TB_REASON];         /* the first reason one was bad */
    uint64_t facts_bad;        /* device facts left unknown (ls_tbuild_device) */
    char why[LS_TB_CLASSES][LS_TB_REASON]; /* the first reason a class was skipped */
    int failed;                /* memory ran out */
    int settled;
    /* Filled by settle. */
    int64_t offset_ns;         /* added to every file time */
    uint64_t shift_ns;         /* part of offset_ns that kept times positive */
    uint64_t frames_used;      /* frames attached to calls */
    uint64_t frames_dropped;   /* frames past LS_TB_MAX_FRAMES: not kept */
    uint64_t devices_seen;     /* bit d set: an op ran on device d (d < 64) */
} ls_tbuild;

void ls_tbuild_init(ls_tbuild *b);
void ls_tbuild_free(ls_tbuild *b);

/* Counts one event of class c (whatever happens to it). */
static inline void ls_tbuild_seen(ls_tbuild *b, ls_tb_class c) { b->seen[c]++; }

/* Counts a skipped event and keeps the first reason per class. */
void ls_tbuild_skip(ls_tbuild *b, ls_tb_class c, const char *reason);

/* Counts an event skipped for its times, for one of the reasons of this
 * list (also in skipped_times[c]; its text is ls_tb_time_reason_text[why]).
 * One list for every reader, so the durations check counts these records
 * by their kind, never by a reader's wording (issue 39). */
void ls_tbuild_skip_times(ls_tbuild *b, ls_tb_class c, ls_tb_time_reason why);

/* A kernel's launch geometry as a file gives it, before any check: the
 * parts present (LS_TB_GRID, ...) and their values, -1 for a value that
 * is not a non-negative integer (a grid side of "x", 2.5, a list of two). */
enum { LS_TB_GRID = 1, LS_TB_BLOCK = 2, LS_TB_REGISTERS = 4, LS_TB_SHARED = 8 };
typedef struct {
    int64_t grid[3], block[3];
    int64_t registers; /* per thread */
    int64_t shared;    /* static + dynamic shared memory per block, bytes */
    unsigned given;    /* LS_TB_* bits */
} ls_tb_geometry;

/* kind: LS_OP_*.  copy_kind/host_memory as in ls_op.  geometry: a kernel's
 * (NULL: none given).  It is kept only whole: grid and block given, every
 * side within CUDA's limits (grid x <= 2^32 - 1, y and z <= 65535; block x
 * and y <= 1024, z <= 64; all >= 1), registers <= 255 and shared memory <
 * 2^32 when given (absent: 0, no limit of theirs).  Otherwise the kernel
 * keeps no geometry, so its fill stays unknown, and is counted in
 * geometry_missing (grid or block absent) or geometry_bad (a part given
 * but unusable; the first reason in geometry_why); never an error. */
int ls_tbuild_op(ls_tbuild *b, int kind, int64_t start, int64_t end, uint32_t device,
                 uint32_t stream, uint32_t correlation, const char *name, size_t name_len,
                 uint64_t bytes, uint8_t copy_kind, uint8_t host_memory,
                 const ls_tb_geometry *geometry);

/* What a file says of device `device` (Kineto's deviceProperties, Nsight
 * Systems' TARGET_INFO_GPU): SMs, threads, blocks, registers and shared
 * bytes per SM, in the order of ls_device_facts; 0 where the file does not
 * say.  A value that is negative (the reader's mark for an unusable one)
 * or above 2^32 - 1 is left unknown and counted in facts_bad; so are the
 * values of a device past the LS_MAX_DEVICE_FACTS first.  Later facts
 * of a device replace earlier ones.  Never fails. */
void ls_tbuild_device(ls_tbuild *b, uint32_t device, const int64_t facts[5]);

/* A runtime (driver = 0) or driver API call; has_correlation 0 when the
 * file gave none (it then launches nothing).  One that may wait, allocate
 * or free (by its name's cbid role) is also a call, as a live capture
 * records it: syncs and the graph-readiness "memory" rule read those. */
int ls_tbuild_api(ls_tbuild *b, int driver, int64_t start, int64_t end, uint64_t thread,
                  uint32_t correlation, int has_correlation, const char *name, size_t len);

/* A host sync interval (CUPTI SYNCHRONIZATION record, Kineto cuda_sync). */
int ls_tbuild_sync(ls_tbuild *b, int64_t start, int64_t end, uint32_t stream,
                   uint32_t correlation, uint32_t type);

/* A range; step >= 0 when the file marks it as that step (loopscope's own
 * export does), -1 otherwise. */
int ls_tbuild_range(ls_tbuild *b, int64_t start, int64_t end, uint64_t thread,
                    const char *name, size_t len, int32_t step);

/* A call of loopscope's own export that was part of its host sync `sync`
 * (whose site is `site`, LS_TB_NO_TAG if it had none), with the launch
 * calls its thread made before it, as the live capture counted them.  It
 * is also an API record when `launch` is 1 and it has a correlation id
 * (the export writes a launch call that waited once, for both).  Settle
 * honours the tag only for an own export (ls_tb_settle_options). */
int ls_tbuild_wait(ls_tbuild *b, int driver, int64_t start, int64_t end, uint64_t thread,
                   uint32_t correlation, int has_correlation, int launch, const char *name,
                   size_t len, uint32_t sync, uint32_t site, uint64_t launches_before);

/* A call of loopscope's own export that the live capture recorded (one
 * that may wait, allocate or free) and that waited in no sync, with its
 * site `call_site` (LS_TB_NO_TAG if unknown) and the launch calls its
 * thread made before it.  `launch` as for ls_tbuild_wait.  Settle honours
 * it only for an own export. */
int ls_tbuild_call(ls_tbuild *b, int driver, int64_t start, int64_t end, uint64_t thread,
                   uint32_t correlation, int has_correlation, int launch, const char *name,
                   size_t len, uint32_t call_site, uint64_t launches_before);

/* The file names process `pid` "GPU <device>": counter values on that pid
 * are the device's (loopscope's export numbers its GPU processes from 100). */
int ls_tbuild_gpu_process(ls_tbuild *b, uint32_t pid, uint32_t device);

/* Frames kept at most (32 bytes each): a with_stack trace of millions of
 * kernels holds tens of millions of Python frames, and memory must stay
 * bounded; later frames are counted in frames_dropped, and the syncs they
 * would have placed lose their stacks. */
#define LS_TB_MAX_FRAMES (8u << 20)

/* A Python function (Kineto "file.py(12): func", "<built-in method ...>")
 * or a CPU op ("aten::item"): a frame of the stacks of calls inside it. */
int ls_tbuild_frame(ls_tbuild *b, int64_t start, int64_t end, uint64_t thread,
                    const char *name, size_t len);

/* A counter value; metric: LS_M_*.  device_pid: 1 when `device` is the
 * event's numeric pid (see ls_tb_point). */
int ls_tbuild_point(ls_tbuild *b, int64_t ts, uint32_t series, uint32_t device, int metric,
                    double value, int device_pid);

/* The end of a series' value at ts: the series has no value until its
 * next point (a counter otherwise holds its value). */
int ls_tbuild_point_end(ls_tbuild *b, int64_t ts, uint32_t series, uint32_t device,
                        int device_pid);

typedef struct {
    int64_t base_ns; /* added to every file time */
    int device;      /* keep only this device's ops when >= 0 */
    /* loopscope's own export: the calls are only its tagged ones, each
     * with the launch count it carries and one stack frame: of its own sync
     * (named "<loopscope sync N site K>", or "<loopscope sync N>"), so the
     * syncs group as they did live, or for a call outside syncs of its own
     * site ("<loopscope call site K>", or "<loopscope call>") */
    int own_export;
    int has_span;    /* the profile's own span, in file times (an own export
                        carries it); otherwise first and last record */
    int64_t span_start, span_end;
    uint64_t merge_idle_upto_ns; /* -> ls_records.merge_idle_upto_ns */
} ls_tb_settle_options;

/* Puts every record on one clock (file time + base_ns, then shifted so the
 * first time is > 0), keeps only the chosen device's ops, nests the
 * ranges (ls_range parent/depth, order of start; name_id still a string
 * table id, step_index the file's step mark or -1), gives each call its
 * stack and launch count, maps counter pids named "GPU <n>" to device n,
 * and turns counter points into samples: on the sampled device, each
 * series' value holds from its time until the series' next time (a value
 * or an end, ls_tbuild_point_end), and the
 * pieces between consecutive times of any series become one sample each,
 * with every figure whose series covers the piece.  0, or -1 when memory
 * ran out. */
int ls_tbuild_settle(ls_tbuild *b, const ls_tb_settle_options *o);

/* Name text of a string table id (ranges' name_id before ls_names). */
const char *ls_tbuild_name(const ls_tbuild *b, uint32_t id);

#endif
