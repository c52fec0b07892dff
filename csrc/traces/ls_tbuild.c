/* ls_tbuild: see ls_tbuild.h.
 *
 * Until settle, the records' unsigned time fields hold file times plus
 * BIAS, so that negative file times (events before Kineto's base) keep
 * their order in an unsigned field. */
#include "ls_search.h"
#include "ls_tbuild.h"

#include "ls_cbids.h"
#include "ls_names.h"
#include "ls_samples.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIAS (1ull << 62)
#define TIME_LIMIT (1ll << 61) /* |file time| and |base| stay below: sums fit int64 */

static uint64_t bias(int64_t t) { return (uint64_t)t + BIAS; }
static int64_t unbias(uint64_t v) { return (int64_t)(v - BIAS); }

static const char *const class_names[LS_TB_CLASSES] = {
    "kernel", "gpu_memcpy", "gpu_memset", "cuda_graph", "cuda_runtime", "cuda_driver", "cpu_op",
    "python_function", "user_annotation", "gpu_user_annotation", "cuda_sync", "flow",
    "counter", "metadata", "other",
};

const char *const ls_tb_time_reason_text[LS_TB_TIME_REASONS] = {
    "no usable ts", "no usable dur", "a negative dur", "no start or end time",
    "ends before it starts", "a time 2**61 ns or more from the trace's start",
};

const char *ls_tbuild_class_name(ls_tb_class c)
{
    return (unsigned)c < LS_TB_CLASSES ? class_names[c] : "?";
}

void ls_tbuild_init(ls_tbuild *b) { memset(b, 0, sizeof *b); }

void ls_tbuild_free(ls_tbuild *b)
{
    ls_strtab_free(&b->names);
    ls_records_clear(&b->rec);
    free(b->ranges.items);
    free(b->frames.items);
    free(b->points.items);
    free(b->tags);
    free(b->gpu_processes.items);
    free(b->api_role);
    free(b->api_cbid);
    free(b->api_domain);
    free(b->api_alias);
    memset(b, 0, sizeof *b);
}

void ls_tbuild_skip(ls_tbuild *b, ls_tb_class c, const char *reason)
{
    b->skipped[c]++;
    if (b->why[c][0] == '\0')
        snprintf(b->why[c], sizeof b->why[c], "%s", reason);
}

void ls_tbuild_skip_times(ls_tbuild *b, ls_tb_class c, ls_tb_time_reason why)
{
    b->skipped_times[c]++;
    ls_tbuild_skip(b, c, ls_tb_time_reason_text[why]);
}

static int fail(ls_tbuild *b)
{
    b->failed = 1;
    return -1;
}

static int grow(void **items, size_t *capacity, size_t needed, size_t size)
{
    if (needed <= *capacity)
        return 0;
    size_t cap = *capacity ? *capacity * 2 : 1024;
    while (cap < needed)
        cap *= 2;
    void *bigger = realloc(*items, cap * size);
    if (bigger == NULL)
        return -1;
    *items = bigger;
    *capacity = cap;
    return 0;
}

#define APPEND(b, array, out)                                                          \
    do {                                                                               \
        if (grow((void **)&(array).items, &(array).capacity, (array).count + 1,        \
                 sizeof *(array).items) != 0)                                          \
            return fail(b);                                                            \
        (out) = &(array).items[(array).count++];                                       \
        memset((out), 0, sizeof *(out));                                               \
    } while (0)

/* Times the records can hold; an event outside them is skipped and counted
 * under its class (never left out silently). */
static int times_ok(ls_tbuild *b, ls_tb_class cls, int64_t start, int64_t end)
{
    if (start > -TIME_LIMIT && end < TIME_LIMIT && end >= start)
        return 1;
    ls_tbuild_skip_times(b, cls, end < start ? LS_TB_TIME_ENDS_BEFORE : LS_TB_TIME_TOO_FAR);
    return 0;
}

/* The checks of ls_tbuild_op's geometry: NULL when `g` can be kept, or why
 * not (the text of geometry_why). */
static const char *geometry_problem(const ls_tb_geometry *g)
{
    static const int64_t grid_limits[3] = {UINT32_MAX, UINT16_MAX, UINT16_MAX};
    static const int64_t block_limits[3] = {1024, 1024, 64};
    for (int i = 0; i < 3; i++) {
        if ((g->given & LS_TB_GRID) && (g->grid[i] < 1 || g->grid[i] > grid_limits[i]))
            return "a grid side that is not an integer in CUDA's limits";
        if ((g->given & LS_TB_BLOCK) && (g->block[i] < 1 || g->block[i] > block_limits[i]))
            return "a block side that is not an integer in CUDA's limits (1024, 1024, 64)";
    }
    if ((g->given & LS_TB_REGISTERS) && (g->registers < 0 || g->registers > 255))
        return "registers per thread that are not an integer from 0 to 255";
    if ((g->given & LS_TB_SHARED) && (g->shared < 0 || g->shared > UINT32_MAX))
        return "shared memory that is not an integer from 0 to 2^32 - 1 bytes";
    return NULL;
}

/* Puts a kernel's geometry on `op` when it can be kept whole; counts it. */
static void set_geometry(ls_tbuild *b, ls_op *op, const ls_tb_geometry *g)
{
    b->kernels++;
    const char *problem = g ? geometry_problem(g) : NULL;
    if (problem != NULL) {
        b->geometry_bad++;
        if (b->geometry_why[0] == '\0')
            snprintf(b->geometry_why, sizeof b->geometry_why, "%s", problem);
        return;
    }
    if (g == NULL || (g->given & (LS_TB_GRID | LS_TB_BLOCK)) != (LS_TB_GRID | LS_TB_BLOCK)) {
        b->geometry_missing++;
        return;
    }
    op->grid_x = (uint32_t)g->grid[0];
    op->grid_y = (uint16_t)g->grid[1];
    op->grid_z = (uint16_t)g->grid[2];
    op->block_x = (uint16_t)g->block[0];
    op->block_y = (uint16_t)g->block[1];
    op->block_z = (uint16_t)g->block[2];
    op->registers = (g->given & LS_TB_REGISTERS) ? (uint16_t)g->registers : 0;
    op->shared_bytes = (g->given & LS_TB_SHARED) ? (uint32_t)g->shared : 0;
}

void ls_tbuild_device(ls_tbuild *b, uint32_t device, const int64_t facts[5])
{
    uint32_t v[5];
    for (int i = 0; i < 5; i++) {
        int usable = facts[i] >= 0 && facts[i] <= UINT32_MAX;
        v[i] = usable ? (uint32_t)facts[i] : 0;
        b->facts_bad += !usable;
    }
    ls_device_facts f = {device, v[0], v[1], v[2], v[3], v[4]};
    if (ls_records_set_device(&b->rec, &f) != 0)
        for (int i = 0; i < 5; i++)
            b->facts_bad += v[i] != 0;
}

int ls_tbuild_op(ls_tbuild *b, int kind, int64_t start, int64_t end, uint32_t device,
                 uint32_t stream, uint32_t correlation, const char *name, size_t name_len,
                 uint64_t bytes, uint8_t copy_kind, uint8_t host_memory,
                 const ls_tb_geometry *geometry)
{
    static const ls_tb_class class_of_kind[] = {LS_TB_KERNEL, LS_TB_MEMCPY, LS_TB_MEMSET,
                                                LS_TB_GRAPH}; /* by ls_op_kind */
    if (!times_ok(b, class_of_kind[kind <= LS_OP_GRAPH ? kind : LS_OP_KERNEL], start, end))
        return 0;
    uint32_t id = LS_NO_NAME;
    if (name != NULL && (id = ls_strtab_intern(&b->names, name, name_len)) == LS_STRTAB_NONE)
        return fail(b);
    ls_op *op;
    APPEND(b, b->rec.ops, op);
    if (device < 64) /* known before settling: deviceProperties are matched to it */
        b->devices_seen |= 1ull << device;
    /* a graph replay is graph_launched: a whole replay (loopscope's own export) */
    *op = ls_op_make((ls_op_kind)kind, bias(start), bias(end), device, stream, correlation, id,
                     bytes);
    op->copy_kind = copy_kind;
    op->host_memory = host_memory;
    if (kind == LS_OP_KERNEL)
        set_geometry(b, op, geometry);
    return 0;
}

/* Role, callback id and domain of an API name, looked up once per name. */
static int api_info(ls_tbuild *b, uint32_t id, int driver, uint8_t *role, uint32_t *cbid,
                    uint8_t *domain, uint8_t *alias)
{
    if (id >= b->api_cache) {
        size_t cap = b->api_cache ? b->api_cache : 256;
        while (cap <= id)
            cap *= 2;
        uint8_t *roles = realloc(b->api_role, cap);
        if (roles == NULL)
            return fail(b);
        b->api_role = roles;
        uint32_t *cbids = realloc(b->api_cbid, cap * sizeof *cbids);
        if (cbids == NULL)
            return fail(b);
        b->api_cbid = cbids;
        uint8_t *domains = realloc(b->api_domain, cap);
        if (domains == NULL)
            return fail(b);
        b->api_domain = domains;
        uint8_t *aliases = realloc(b->api_alias, cap);
        if (aliases == NULL)
            return fail(b);
        b->api_alias = aliases;
        memset(b->api_role + b->api_cache, 0, cap - b->api_cache);
        b->api_cache = cap;
    }
    if (b->api_role[id] == 0) {
        CUpti_CallbackDomain d;
        CUpti_CallbackId c;
        const char *text = ls_strtab_text(&b->names, id, NULL);
        if (text != NULL && ls_cbid_find(text, &d, &c) == 0) {
            b->api_role[id] = (uint8_t)(ls_cbid_role_of(d, c) + 1);
            b->api_cbid[id] = c;
            b->api_domain[id] = d == CUPTI_CB_DOMAIN_DRIVER_API;
            b->api_alias[id] = ls_cbid_alias_of(text);
        } else {
            b->api_role[id] = 1; /* no role */
            b->api_cbid[id] = 0;
            b->api_domain[id] = (uint8_t)driver;
            b->api_alias[id] = 0;
        }
    }
    *role = (uint8_t)(b->api_role[id] - 1);
    *cbid = b->api_cbid[id];
    *domain = b->api_domain[id];
    *alias = b->api_alias[id];
    return 0;
}

/* A new zeroed call with its tag (b->tags stays parallel to the calls). */
static ls_call *append_call(ls_tbuild *b, ls_tb_tag tag)
{
    size_t n = b->rec.calls.count + 1;
    if (grow((void **)&b->tags, &b->tag_capacity, n, sizeof *b->tags) != 0 ||
        grow((void **)&b->rec.calls.items, &b->rec.calls.capacity, n,
             sizeof *b->rec.calls.items) != 0) {
        fail(b);
        return NULL;
    }
    b->tags[n - 1] = tag;
    ls_call *call = &b->rec.calls.items[b->rec.calls.count++];
    memset(call, 0, sizeof *call);
    return call;
}

/* An API record and/or a call of one host API event. */
static int add_api(ls_tbuild *b, int driver, int64_t start, int64_t end, uint64_t thread,
                   uint32_t correlation, int has_correlation, int launch, const char *name,
                   size_t len, const ls_tb_tag *tag, uint64_t launches_before)
{
    if (!times_ok(b, driver ? LS_TB_DRIVER : LS_TB_RUNTIME, start, end))
        return 0;
    uint32_t id = ls_strtab_intern(&b->names, name, len);
    uint8_t role, domain, alias;
    uint32_t cbid;
    if (id == LS_STRTAB_NONE || api_info(b, id, driver, &role, &cbid, &domain, &alias) != 0)
        return fail(b);
    if (has_correlation && launch) {
        ls_api *api;
        APPEND(b, b->rec.apis, api);
        *api = (ls_api){bias(start), bias(end), thread, correlation, cbid, domain, alias};
    }
    /* the calls a live capture records: those that may wait, allocate or free */
    if (tag != NULL || LS_ROLE_WAIT_CLASS(role) != LS_WAIT_NONE || (role & LS_ROLE_MEMORY)) {
        ls_call *call = append_call(b, tag ? *tag : (ls_tb_tag){LS_TB_NO_TAG, LS_TB_NO_TAG,
                                                                LS_TB_NO_TAG, 0});
        if (call == NULL)
            return -1;
        call->enter_ns = bias(start);
        call->exit_ns = bias(end);
        call->thread_id = thread;
        call->correlation_id = has_correlation ? correlation : 0;
        call->cbid = cbid;
        call->domain = domain;
        call->role = role;
        call->alias = alias;
        call->launches_before = launches_before;
        b->tagged_calls += tag != NULL;
    }
    return 0;
}

int ls_tbuild_api(ls_tbuild *b, int driver, int64_t start, int64_t end, uint64_t thread,
                  uint32_t correlation, int has_correlation, const char *name, size_t len)
{
    return add_api(b, driver, start, end, thread, correlation, has_correlation, 1, name, len,
                   NULL, 0);
}

int ls_tbuild_wait(ls_tbuild *b, int driver, int64_t start, int64_t end, uint64_t thread,
                   uint32_t correlation, int has_correlation, int launch, const char *name,
                   size_t len, uint32_t sync, uint32_t site, uint64_t launches_before)
{
    ls_tb_tag tag = {sync, site, LS_TB_NO_TAG, 1};
    return add_api(b, driver, start, end, thread, correlation, has_correlation, launch, name,
                   len, &tag, launches_before);
}

int ls_tbuild_call(ls_tbuild *b, int driver, int64_t start, int64_t end, uint64_t thread,
                   uint32_t correlation, int has_correlation, int launch, const char *name,
                   size_t len, uint32_t call_site, uint64_t launches_before)
{
    ls_tb_tag tag = {LS_TB_NO_TAG, LS_TB_NO_TAG, call_site, 1};
    return add_api(b, driver, start, end, thread, correlation, has_correlation, launch, name,
                   len, &tag, launches_before);
}

int ls_tbuild_gpu_process(ls_tbuild *b, uint32_t pid, uint32_t device)
{
    ls_tb_gpu_process *p;
    APPEND(b, b->gpu_processes, p);
    *p = (ls_tb_gpu_process){pid, device};
    return 0;
}

int ls_tbuild_sync(ls_tbuild *b, int64_t start, int64_t end, uint32_t stream,
                   uint32_t correlation, uint32_t type)
{
    if (!times_ok(b, LS_TB_SYNC, start, end))
        return 0;
    ls_sync_record *s;
    APPEND(b, b->rec.sync_records, s);
    *s = (ls_sync_record){bias(start), bias(end), correlation, stream, type, 0};
    return 0;
}

static int add_span(ls_tbuild *b, ls_tb_span_array *a, int64_t start, int64_t end,
                    uint64_t thread, const char *name, size_t len, int32_t step)
{
    if (!times_ok(b, a == &b->frames ? LS_TB_PYTHON : LS_TB_ANNOTATION, start, end))
        return 0;
    uint32_t id = ls_strtab_intern(&b->names, name, len);
    if (id == LS_STRTAB_NONE)
        return fail(b);
    ls_tb_span *s;
    APPEND(b, *a, s);
    *s = (ls_tb_span){start, end, thread, id, (uint32_t)(a->count - 1), step, 0};
    return 0;
}

int ls_tbuild_range(ls_tbuild *b, int64_t start, int64_t end, uint64_t thread,
                    const char *name, size_t len, int32_t step)
{
    return add_span(b, &b->ranges, start, end, thread, name, len, step < 0 ? -1 : step);
}

int ls_tbuild_frame(ls_tbuild *b, int64_t start, int64_t end, uint64_t thread,
                    const char *name, size_t len)
{
    if (b->frames.count >= LS_TB_MAX_FRAMES) {
        b->frames_dropped++;
        return 0;
    }
    /* "<built-in method item of Tensor object at 0x7f...>": the address makes
     * every tensor's name new; drop it so names repeat. */
    if (len > 8 && name[0] == '<' && name[len - 1] == '>') {
        size_t i = len - 1; /* back over the hex digits of the address */
        while (i > 0 && isxdigit((unsigned char)name[i - 1]))
            i--;
        if (i >= 7 && memcmp(name + i - 6, " at 0x", 6) == 0) {
            char buf[512];
            size_t keep = i - 6 < sizeof buf - 2 ? i - 6 : sizeof buf - 2;
            memcpy(buf, name, keep);
            buf[keep] = '>';
            return add_span(b, &b->frames, start, end, thread, buf, keep + 1, -1);
        }
    }
    return add_span(b, &b->frames, start, end, thread, name, len, -1);
}

int ls_tbuild_point(ls_tbuild *b, int64_t ts, uint32_t series, uint32_t device, int metric,
                    double value, int device_pid)
{
    if (!times_ok(b, LS_TB_COUNTER, ts, ts) || metric < 0 || metric >= LS_METRICS || !isfinite(value))
        return 0;
    ls_tb_point *p;
    APPEND(b, b->points, p);
    *p = (ls_tb_point){ts, value, series, device, metric, device_pid != 0};
    return 0;
}

int ls_tbuild_point_end(ls_tbuild *b, int64_t ts, uint32_t series, uint32_t device,
                        int device_pid)
{
    if (!times_ok(b, LS_TB_COUNTER, ts, ts))
        return 0;
    ls_tb_point *p;
    APPEND(b, b->points, p);
    *p = (ls_tb_point){ts, NAN, series, device, -1, device_pid != 0};
    return 0;
}

const char *ls_tbuild_name(const ls_tbuild *b, uint32_t id)
{
    return ls_strtab_text(&b->names, id, NULL);
}

/* ---- settle ------------------------------------------------------------ */

static int compare_spans(const void *pa, const void *pb)
{
    const ls_tb_span *a = pa, *b = pb;
    if (a->thread != b->thread)
        return a->thread < b->thread ? -1 : 1;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    if (a->end != b->end)
        return a->end > b->end ? -1 : 1; /* the enclosing one first */
    return (a->index > b->index) - (a->index < b->index);
}

typedef struct {
    int64_t start, end;
    uint64_t thread;
    uint32_t index, slot; /* addition order, position in the per-thread order */
} ls_order_key;

static int compare_global(const void *pa, const void *pb)
{
    const ls_order_key *a = pa, *b = pb;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    if (a->end != b->end)
        return a->end > b->end ? -1 : 1;
    if (a->thread != b->thread)
        return a->thread < b->thread ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

/* Ranges in order of start, each with its enclosing range on its thread. */
static int nest_ranges(ls_tbuild *b)
{
    size_t n = b->ranges.count;
    ls_tb_span *spans = b->ranges.items;
    if (n > 1)
        qsort(spans, n, sizeof *spans, compare_spans);
    int32_t *parent = malloc((n ? n : 1) * sizeof *parent);
    uint32_t *depth = malloc((n ? n : 1) * sizeof *depth);
    uint32_t *stack = malloc((n ? n : 1) * sizeof *stack);
    ls_order_key *keys = malloc((n ? n : 1) * sizeof *keys);
    uint32_t *global_of = malloc((n ? n : 1) * sizeof *global_of);
    int rc = -1;
    if (!parent || !depth || !stack || !keys || !global_of || ls_ranges_reserve(&b->rec.ranges, n))
        goto done;
    size_t top = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && spans[i].thread != spans[i - 1].thread)
            top = 0;
        while (top > 0 && spans[stack[top - 1]].end < spans[i].end)
            top--; /* ended before this one does: not its parent */
        parent[i] = top > 0 ? (int32_t)stack[top - 1] : -1;
        depth[i] = top > 0 ? depth[stack[top - 1]] + 1 : 0;
        stack[top++] = (uint32_t)i;
        keys[i] = (ls_order_key){spans[i].start, spans[i].end, spans[i].thread,
                                 spans[i].index, (uint32_t)i};
    }
    qsort(keys, n, sizeof *keys, compare_global);
    for (size_t g = 0; g < n; g++)
        global_of[keys[g].slot] = (uint32_t)g;
    for (size_t g = 0; g < n; g++) {
        const ls_tb_span *s = &spans[keys[g].slot];
        int32_t p = parent[keys[g].slot];
        ls_range *r = &b->rec.ranges.items[g];
        r->start_ns = (uint64_t)s->start;
        r->end_ns = (uint64_t)s->end;
        r->thread_id = s->thread;
        r->name_id = s->name;
        r->parent = p >= 0 ? (int32_t)global_of[p] : -1;
        r->step_index = s->step;
        r->depth = depth[keys[g].slot];
    }
    b->rec.ranges.count = n;
    rc = 0;
done:
    free(parent);
    free(depth);
    free(stack);
    free(keys);
    free(global_of);
    return rc;
}

/* "dir/file.py(12): func" -> file, line, function; anything else is a
 * frame with no file (built-in functions, CPU ops, module names). */
static void parse_frame_name(const char *text, size_t len, size_t *file_len, int *line,
                             size_t *func_at)
{
    *file_len = 0;
    *line = -1;
    *func_at = 0;
    const char *sep = NULL;
    for (size_t i = 0; i + 2 < len; i++)
        if (text[i] == ')' && text[i + 1] == ':' && text[i + 2] == ' ')
            sep = text + i; /* the last one: a file name may hold "): " */
    if (sep == NULL || text[0] == '<' || sep == text)
        return;
    const char *p = sep;
    int value = 0, digits = 0;
    while (p > text && p[-1] >= '0' && p[-1] <= '9' && digits < 9)
        p--, digits++;
    if (digits == 0 || p == text || p[-1] != '(' || p - 1 == text)
        return;
    for (const char *d = p; d < sep; d++)
        value = value * 10 + (*d - '0');
    *file_len = (size_t)(p - 1 - text);
    *line = value;
    *func_at = (size_t)(sep + 3 - text);
}

typedef struct {
    uint64_t file_at, func_at; /* offsets in the arena; UINT64_MAX: no file */
    int line;
} ls_code_draft;

/* The code table entry of a frame name, added on first use. */
static int code_of(ls_tbuild *b, uint32_t *code_ids, ls_code_draft **drafts, size_t *count,
                   size_t *cap, char **arena, size_t *used, size_t *arena_cap, uint32_t name,
                   uint32_t *out)
{
    if (code_ids[name] != UINT32_MAX) {
        *out = code_ids[name];
        return 0;
    }
    size_t len;
    const char *text = ls_strtab_text(&b->names, name, &len);
    size_t file_len, func_at;
    int line;
    parse_frame_name(text, len, &file_len, &line, &func_at);
    size_t need = len + 2;
    if (grow((void **)drafts, cap, *count + 1, sizeof **drafts) != 0 ||
        grow((void **)arena, arena_cap, *used + need, 1) != 0)
        return -1;
    ls_code_draft *d = &(*drafts)[*count];
    d->line = line;
    if (file_len > 0) {
        d->file_at = *used;
        memcpy(*arena + *used, text, file_len);
        (*arena)[*used + file_len] = '\0';
        *used += file_len + 1;
    } else {
        d->file_at = UINT64_MAX;
    }
    d->func_at = *used;
    memcpy(*arena + *used, text + func_at, len - func_at);
    (*arena)[*used + len - func_at] = '\0';
    *used += len - func_at + 1;
    code_ids[name] = (uint32_t)*count;
    *out = (uint32_t)(*count)++;
    return 0;
}

/* Frames worth keeping beyond the innermost ones: a Python file outside
 * torch (the user's code, the libraries it calls). */
static int user_frame(const ls_tbuild *b, uint32_t name)
{
    size_t len, file_len, func_at;
    int line;
    const char *text = ls_strtab_text(&b->names, name, &len);
    parse_frame_name(text, len, &file_len, &line, &func_at);
    return file_len > 0 && strncmp(text, "torch/", 6) != 0;
}

static const ls_call *sort_calls;

static int compare_call_order(const void *pa, const void *pb)
{
    const ls_call *a = &sort_calls[*(const uint32_t *)pa];
    const ls_call *b = &sort_calls[*(const uint32_t *)pb];
    if (a->thread_id != b->thread_id)
        return a->thread_id < b->thread_id ? -1 : 1;
    if (a->enter_ns != b->enter_ns)
        return a->enter_ns < b->enter_ns ? -1 : 1;
    return 0;
}

#define INNER_FRAMES 8

/* Each call's stack: the frames on its thread that enclose its start,
 * innermost first; the 8 innermost, then only user frames. */
static int attach_stacks(ls_tbuild *b)
{
    size_t nc = b->rec.calls.count, nf = b->frames.count;
    if (nc == 0 || nf == 0)
        return 0;
    ls_tb_span *frames = b->frames.items;
    qsort(frames, nf, sizeof *frames, compare_spans);
    uint32_t *order = malloc(nc * sizeof *order);
    uint32_t *stack = malloc(nf * sizeof *stack);
    uint32_t *code_ids = malloc((b->names.count ? b->names.count : 1) * sizeof *code_ids);
    ls_code_draft *drafts = NULL;
    char *arena = NULL;
    size_t count = 0, cap = 0, used = 0, arena_cap = 0;
    int rc = -1;
    if (!order || !stack || !code_ids)
        goto done;
    memset(code_ids, 0xFF, (b->names.count ? b->names.count : 1) * sizeof *code_ids);
    for (size_t i = 0; i < nc; i++)
        order[i] = (uint32_t)i;
    sort_calls = b->rec.calls.items;
    qsort(order, nc, sizeof *order, compare_call_order);
    size_t f = 0, top = 0;
    uint64_t thread = 0;
    int have_thread = 0;
    for (size_t k = 0; k < nc; k++) {
        ls_call *call = &b->rec.calls.items[order[k]];
        int64_t t = (int64_t)call->enter_ns;
        if (!have_thread || call->thread_id != thread) {
            thread = call->thread_id;
            have_thread = 1;
            top = 0;
            while (f < nf && frames[f].thread < thread)
                f++;
        }
        for (; f < nf && frames[f].thread == thread && frames[f].start <= t; f++) {
            while (top > 0 && frames[stack[top - 1]].end < frames[f].start)
                top--;
            stack[top++] = (uint32_t)f;
        }
        while (top > 0 && frames[stack[top - 1]].end < t)
            top--;
        uint8_t n = 0;
        for (size_t s = top; s-- > 0 && n < LS_CALL_FRAMES;) {
            const ls_tb_span *fr = &frames[stack[s]];
            if (fr->end < t)
                continue; /* closed, below an open one that overlapped it */
            if (n >= INNER_FRAMES && !user_frame(b, fr->name))
                continue;
            uint32_t code;
            if (code_of(b, code_ids, &drafts, &count, &cap, &arena, &used, &arena_cap,
                        fr->name, &code) != 0)
                goto done;
            size_t flen, fat;
            int line;
            size_t len;
            const char *text = ls_strtab_text(&b->names, fr->name, &len);
            parse_frame_name(text, len, &flen, &line, &fat);
            call->frames[n++] = (ls_frame){.code = code, .line = line, .end_line = line, .col = -1,
                                            .end_col = -1};
        }
        call->frame_count = n;
        b->frames_used += n;
    }
    ls_code_info *items = malloc((count ? count : 1) * sizeof *items);
    if (items == NULL)
        goto done;
    for (size_t i = 0; i < count; i++) {
        items[i].filename = drafts[i].file_at == UINT64_MAX ? NULL : arena + drafts[i].file_at;
        items[i].function = arena + drafts[i].func_at;
        items[i].first_line = drafts[i].line;
    }
    b->rec.codes.items = items;
    b->rec.codes.count = count;
    b->rec.codes.arena = arena;
    arena = NULL;
    rc = 0;
done:
    free(order);
    free(stack);
    free(code_ids);
    free(drafts);
    free(arena);
    return rc;
}

typedef struct {
    uint64_t thread;
    uint64_t start;
} ls_launch_key;

static int compare_launch(const void *pa, const void *pb)
{
    const ls_launch_key *a = pa, *b = pb;
    if (a->thread != b->thread)
        return a->thread < b->thread ? -1 : 1;
    return (a->start > b->start) - (a->start < b->start);
}


/* launches_before of each call: launch calls of its thread that began
 * before it. */
static int count_launches(ls_tbuild *b)
{
    size_t na = b->rec.apis.count, n = 0;
    if (b->rec.calls.count == 0)
        return 0;
    ls_launch_key *keys = malloc((na ? na : 1) * sizeof *keys);
    if (keys == NULL)
        return -1;
    for (size_t i = 0; i < na; i++) {
        const ls_api *a = &b->rec.apis.items[i];
        CUpti_CallbackDomain d = a->domain ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API;
        if (ls_cbid_role_of(d, a->cbid) & LS_ROLE_LAUNCH)
            keys[n++] = (ls_launch_key){a->thread_id, a->start_ns};
    }
    qsort(keys, n, sizeof *keys, compare_launch);
    for (size_t i = 0; i < b->rec.calls.count; i++) {
        ls_call *c = &b->rec.calls.items[i];
        ls_launch_key first = {c->thread_id, 0}, enter = {c->thread_id, c->enter_ns};
        size_t a = ls_lower_bound(keys, n, sizeof *keys, &first, compare_launch);
        /* the thread's launches that began before the call: from keys[a] on */
        c->launches_before = ls_lower_bound(keys + a, n - a, sizeof *keys, &enter, compare_launch);
    }
    free(keys);
    return 0;
}

static int compare_points(const void *pa, const void *pb)
{
    const ls_tb_point *a = pa, *b = pb;
    if (a->series != b->series)
        return a->series < b->series ? -1 : 1;
    return (a->ts > b->ts) - (a->ts < b->ts);
}

static int compare_i64(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return (a > b) - (a < b);
}

/* Counter points -> samples (see ls_tbuild_settle). */
static int build_samples(ls_tbuild *b, int device)
{
    size_t n = b->points.count;
    ls_tb_point *p = b->points.items;
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++) /* pids the file names "GPU <n>" */
        for (size_t g = 0; p[i].device_pid && g < b->gpu_processes.count; g++)
            if (b->gpu_processes.items[g].pid == p[i].device) {
                p[i].device = b->gpu_processes.items[g].device;
                break;
            }
    qsort(p, n, sizeof *p, compare_points);
    /* The sampled device: the one asked for, else the lowest with ops. */
    uint32_t sampled = UINT32_MAX;
    if (device >= 0) {
        sampled = (uint32_t)device;
    } else {
        for (size_t i = 0; i < n; i++)
            if (p[i].device < sampled && (p[i].device >= 64 || (b->devices_seen >> p[i].device) & 1))
                sampled = p[i].device;
        if (sampled == UINT32_MAX)
            sampled = p[0].device;
    }
    /* Each series' values hold from a time to its next one: those times
     * are the edges of the pieces. */
    int64_t *edges = malloc(2 * n * sizeof *edges);
    if (edges == NULL)
        return -1;
    size_t ne = 0;
    for (size_t i = 0, j; i < n; i = j) {
        int values = 0; /* an end alone starts no value */
        for (j = i; j < n && p[j].series == p[i].series && p[j].ts == p[i].ts; j++)
            values |= p[j].metric >= 0;
        if (values && j < n && p[j].series == p[i].series && p[i].device == sampled) {
            edges[ne++] = p[i].ts;
            edges[ne++] = p[j].ts;
        }
    }
    qsort(edges, ne, sizeof *edges, compare_i64);
    size_t unique = 0;
    for (size_t i = 0; i < ne; i++)
        if (unique == 0 || edges[i] != edges[unique - 1])
            edges[unique++] = edges[i];
    size_t pieces = unique > 1 ? unique - 1 : 0;
    ls_sample *out = malloc((pieces ? pieces : 1) * sizeof *out);
    if (out == NULL) {
        free(edges);
        return -1;
    }
    for (size_t k = 0; k < pieces; k++) {
        out[k].start_ns = (uint64_t)edges[k];
        out[k].end_ns = (uint64_t)edges[k + 1];
        for (int m = 0; m < LS_METRICS; m++)
            out[k].values[m] = NAN;
    }
    for (size_t i = 0, j; i < n; i = j) { /* each value onto the pieces it covers */
        for (j = i; j < n && p[j].series == p[i].series && p[j].ts == p[i].ts;)
            j++;
        if (j == n || p[j].series != p[i].series || p[i].device != sampled)
            continue;
        for (size_t k = ls_lower_bound_i64(edges, unique, p[i].ts); k < pieces && edges[k] < p[j].ts; k++)
            for (size_t v = i; v < j; v++)
                if (p[v].metric >= 0)
                    out[k].values[p[v].metric] = p[v].value;
    }
    size_t kept = 0;
    for (size_t k = 0; k < pieces; k++) {
        int any = 0;
        for (int m = 0; m < LS_METRICS && !any; m++)
            any = !isnan(out[k].values[m]);
        if (any)
            out[kept++] = out[k];
    }
    free(edges);
    free(b->rec.samples.items);
    b->rec.samples.items = out;
    b->rec.samples.count = b->rec.samples.capacity = kept;
    b->rec.sample_device = sampled;
    return 0;
}

typedef struct {
    ls_tb_tag tag;
    uint32_t call;
} ls_tagged_call;

static int compare_tagged(const void *pa, const void *pb)
{
    const ls_tagged_call *a = pa, *b = pb;
    if (a->tag.sync != b->tag.sync)
        return a->tag.sync < b->tag.sync ? -1 : 1;
    if (a->tag.site != b->tag.site)
        return a->tag.site < b->tag.site ? -1 : 1;
    if (a->tag.call_site != b->tag.call_site)
        return a->tag.call_site < b->tag.call_site ? -1 : 1;
    return (a->call > b->call) - (a->call < b->call);
}

#define TAG_NAME 48 /* "<loopscope sync 4294967295 site 4294967295>" fits */

/* Own export: only the tagged calls, each with the one frame of its sync
 * ("<loopscope sync N site K>"), so calls of one sync share a stack and
 * calls of two never do, or, outside syncs, of its own site ("<loopscope
 * call site K>"); their launch counts are the recorded ones. */
static int tag_stacks(ls_tbuild *b)
{
    ls_records *r = &b->rec;
    size_t kept = 0;
    for (size_t i = 0; i < r->calls.count; i++)
        if (b->tags[i].recorded) {
            b->tags[kept] = b->tags[i];
            r->calls.items[kept++] = r->calls.items[i];
        }
    r->calls.count = kept;
    if (kept == 0)
        return 0;
    ls_tagged_call *order = malloc(kept * sizeof *order);
    ls_code_info *items = malloc(kept * sizeof *items);
    char *arena = malloc(kept * TAG_NAME);
    if (order == NULL || items == NULL || arena == NULL) {
        free(order);
        free(items);
        free(arena);
        return -1;
    }
    for (size_t i = 0; i < kept; i++)
        order[i] = (ls_tagged_call){b->tags[i], (uint32_t)i};
    qsort(order, kept, sizeof *order, compare_tagged);
    size_t count = 0;
    for (size_t k = 0; k < kept; k++) {
        const ls_tb_tag *t = &order[k].tag;
        if (k == 0 || compare_tagged(&(ls_tagged_call){*t, 0},
                                     &(ls_tagged_call){order[k - 1].tag, 0}) != 0) {
            char *name = arena + count * TAG_NAME;
            if (t->sync == LS_TB_NO_TAG && t->call_site == LS_TB_NO_TAG)
                snprintf(name, TAG_NAME, "<loopscope call>");
            else if (t->sync == LS_TB_NO_TAG)
                snprintf(name, TAG_NAME, "<loopscope call site %u>", t->call_site);
            else if (t->site == LS_TB_NO_TAG)
                snprintf(name, TAG_NAME, "<loopscope sync %u>", t->sync);
            else
                snprintf(name, TAG_NAME, "<loopscope sync %u site %u>", t->sync, t->site);
            items[count++] = (ls_code_info){NULL, name, -1};
        }
        ls_call *call = &r->calls.items[order[k].call];
        call->frame_count = 1;
        call->frames[0] = (ls_frame){.code = (uint32_t)(count - 1), .line = -1, .end_line = -1,
                                      .col = -1, .end_col = -1};
    }
    free(order);
    r->codes.items = items;
    r->codes.count = count;
    r->codes.arena = arena;
    return 0;
}

int ls_tbuild_settle(ls_tbuild *b, const ls_tb_settle_options *o)
{
    if (b->failed || b->settled)
        return -1;
    ls_records *r = &b->rec;
    r->merge_idle_upto_ns = o->merge_idle_upto_ns;
    int64_t base_ns = o->base_ns;
    int device = o->device;
    int has_span = o->has_span && o->span_end >= o->span_start && o->span_start > -TIME_LIMIT &&
                   o->span_end < TIME_LIMIT;
    if (base_ns < -TIME_LIMIT || base_ns > TIME_LIMIT)
        base_ns = 0;
    /* Devices, then the filter. */
    size_t kept = 0;
    for (size_t i = 0; i < r->ops.count; i++) {
        const ls_op *op = &r->ops.items[i];
        if (op->device_id < 64)
            b->devices_seen |= 1ull << op->device_id;
        if (device < 0 || op->device_id == (uint32_t)device)
            r->ops.items[kept++] = *op;
    }
    r->ops.count = kept;
    /* The earliest time, to keep every time positive after the base. */
    int64_t first = INT64_MAX;
#define SEE(v) do { if ((v) < first) first = (v); } while (0)
    for (size_t i = 0; i < r->ops.count; i++)
        SEE(unbias(r->ops.items[i].start_ns));
    for (size_t i = 0; i < r->apis.count; i++)
        SEE(unbias(r->apis.items[i].start_ns));
    for (size_t i = 0; i < r->sync_records.count; i++)
        SEE(unbias(r->sync_records.items[i].start_ns));
    for (size_t i = 0; i < r->calls.count; i++)
        SEE(unbias(r->calls.items[i].enter_ns));
    for (size_t i = 0; i < b->ranges.count; i++)
        SEE(b->ranges.items[i].start);
    for (size_t i = 0; i < b->frames.count; i++)
        SEE(b->frames.items[i].start);
    for (size_t i = 0; i < b->points.count; i++)
        SEE(b->points.items[i].ts);
    if (has_span)
        SEE(o->span_start);
#undef SEE
    if (first == INT64_MAX)
        first = 0;
    int64_t offset = base_ns;
    b->shift_ns = 0;
    if (first + offset < 1000) { /* 1 us, so no time is 0 (CUPTI's "unset") */
        b->shift_ns = (uint64_t)(1000 - (first + offset));
        offset += (int64_t)b->shift_ns;
    }
    b->offset_ns = offset;
    uint64_t last = 0;
#define PUT(field) do { (field) = (uint64_t)(unbias(field) + offset); } while (0)
#define END(v) do { if ((v) > last) last = (v); } while (0)
    for (size_t i = 0; i < r->ops.count; i++) {
        PUT(r->ops.items[i].start_ns);
        PUT(r->ops.items[i].end_ns);
        END(r->ops.items[i].end_ns);
    }
    for (size_t i = 0; i < r->apis.count; i++) {
        PUT(r->apis.items[i].start_ns);
        PUT(r->apis.items[i].end_ns);
        END(r->apis.items[i].end_ns);
    }
    for (size_t i = 0; i < r->sync_records.count; i++) {
        PUT(r->sync_records.items[i].start_ns);
        PUT(r->sync_records.items[i].end_ns);
        END(r->sync_records.items[i].end_ns);
    }
    for (size_t i = 0; i < r->calls.count; i++) {
        PUT(r->calls.items[i].enter_ns);
        PUT(r->calls.items[i].exit_ns);
        END(r->calls.items[i].exit_ns);
    }
#undef PUT
    for (size_t i = 0; i < b->ranges.count; i++) {
        b->ranges.items[i].start += offset;
        b->ranges.items[i].end += offset;
        END((uint64_t)b->ranges.items[i].end);
    }
    for (size_t i = 0; i < b->frames.count; i++) {
        b->frames.items[i].start += offset;
        b->frames.items[i].end += offset;
    }
    for (size_t i = 0; i < b->points.count; i++) {
        b->points.items[i].ts += offset;
        END((uint64_t)b->points.items[i].ts);
    }
#undef END
    r->start_ns = (uint64_t)((has_span ? o->span_start : first) + offset);
    r->stop_ns = has_span ? (uint64_t)(o->span_end + offset) : last;
    int stacks = o->own_export ? tag_stacks(b) : attach_stacks(b) != 0 ? -1 : count_launches(b);
    if (nest_ranges(b) != 0 || stacks != 0 || build_samples(b, device) != 0)
        return fail(b);
    /* Spans and points are in the records now; give their memory back. */
    free(b->ranges.items);
    free(b->frames.items);
    free(b->points.items);
    memset(&b->ranges, 0, sizeof b->ranges);
    memset(&b->frames, 0, sizeof b->frames);
    memset(&b->points, 0, sizeof b->points);
    b->settled = 1;
    return 0;
}
