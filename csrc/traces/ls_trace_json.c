/* ls_trace_json: see ls_trace_json.h. */
#include "ls_search.h"
#include "ls_trace_json.h"

#include "ls_cbids.h"
#include "ls_names.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK (1u << 20) /* text handed to the sink at a time, about */

typedef struct {
    char *text;
    size_t len, cap;
    int failed; /* -1 no memory, -2 the sink stopped */
    ls_trace_sink sink;
    void *context;
} ls_out;

static void reserve(ls_out *o, size_t more)
{
    if (o->failed || o->len + more <= o->cap)
        return;
    size_t cap = o->cap ? o->cap : CHUNK + 4096;
    while (cap < o->len + more)
        cap *= 2;
    char *bigger = realloc(o->text, cap);
    if (bigger == NULL) {
        o->failed = -1;
        return;
    }
    o->text = bigger;
    o->cap = cap;
}

static void flush(ls_out *o)
{
    if (!o->failed && o->len > 0 && o->sink(o->context, o->text, o->len) != 0)
        o->failed = -2;
    o->len = 0;
}

static void put(ls_out *o, const char *s, size_t n)
{
    reserve(o, n);
    if (o->failed)
        return;
    memcpy(o->text + o->len, s, n);
    o->len += n;
}

/* A string literal, its length counted by the compiler. */
#define PUT_TEXT(o, literal) put((o), "" literal, sizeof(literal) - 1)

static void putf(ls_out *o, const char *format, ...)
{
    char small[128];
    va_list ap;
    va_start(ap, format);
    int n = vsnprintf(small, sizeof small, format, ap);
    va_end(ap);
    if (n > 0)
        put(o, small, (size_t)n < sizeof small ? (size_t)n : sizeof small - 1);
}

/* An unsigned integer in decimal (the writer's hot path: no printf). */
static void put_u64(ls_out *o, uint64_t v)
{
    char digits[20];
    size_t n = 0;
    do {
        digits[sizeof digits - 1 - n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    put(o, digits + sizeof digits - n, n);
}

/* Microseconds from t0 to t, three decimals at most ("2.1", "1.0", "-0.5"). */
static void put_us(ls_out *o, uint64_t t, uint64_t t0)
{
    uint64_t d = t >= t0 ? t - t0 : t0 - t;
    unsigned frac = (unsigned)(d % 1000);
    if (t < t0)
        PUT_TEXT(o, "-");
    put_u64(o, d / 1000);
    char text[4] = {'.', (char)('0' + frac / 100), (char)('0' + frac / 10 % 10),
                    (char)('0' + frac % 10)};
    size_t n = frac % 100 == 0 ? 2 : frac % 10 == 0 ? 3 : 4;
    put(o, text, n);
}

/* Length of the UTF-8 sequence at s (of at most n bytes), 0 if invalid. */
static size_t utf8_length(const unsigned char *s, size_t n)
{
    size_t len = s[0] < 0x80 ? 1 : (s[0] >> 5) == 6 ? 2 : (s[0] >> 4) == 14 ? 3
               : (s[0] >> 3) == 30 ? 4 : 0;
    if (len == 0 || len > n || (len == 2 && s[0] < 0xC2))
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return len;
}

/* A JSON string of `text` (NULL: `fallback`). */
static void put_string(ls_out *o, const char *text, const char *fallback)
{
    const unsigned char *s = (const unsigned char *)(text ? text : fallback);
    size_t n = strlen((const char *)s), run = 0; /* s[run, i): plain ASCII to copy as is */
    PUT_TEXT(o, "\"");
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            i++;
            continue;
        }
        put(o, (const char *)s + run, i - run);
        if (c == '"' || c == '\\') {
            PUT_TEXT(o, "\\");
            put(o, (const char *)&s[i], 1);
            i++;
        } else if (c < 0x20) {
            putf(o, "\\u%04x", c);
            i++;
        } else {
            size_t len = utf8_length(s + i, n - i);
            if (len == 0) {
                PUT_TEXT(o, "\xEF\xBF\xBD"); /* U+FFFD */
                i++;
            } else {
                put(o, (const char *)s + i, len);
                i += len;
            }
        }
        run = i;
    }
    put(o, (const char *)s + run, n - run);
    PUT_TEXT(o, "\"");
}

/* The tid of host thread `thread` (every thread is listed; 0 if not). */
static unsigned host_tid(const ls_trace_options *o, uint64_t thread)
{
    size_t lo = ls_lower_bound_u64(o->thread_ids, o->thread_count, thread);
    return lo < o->thread_count && o->thread_ids[lo] == thread ? o->thread_tid[lo] : 0;
}

/* A range's name (a step's is made from its template, ls_range_name). */
static void put_range_name(ls_out *out, const ls_range *range)
{
    char small[256];
    size_t n = ls_range_name(range, small, sizeof small);
    if (n == SIZE_MAX || n < sizeof small) {
        put_string(out, n == SIZE_MAX ? NULL : small, "?");
        return;
    }
    char *big = malloc(n + 1);
    if (big == NULL) {
        out->failed = -1;
        return;
    }
    ls_range_name(range, big, n + 1);
    put_string(out, big, "?");
    free(big);
}

static void ranges(ls_out *out, const ls_records *r, const ls_model *m, const ls_trace_options *o)
{
    for (size_t i = 0; i < r->ranges.count && !out->failed; i++) {
        const ls_range *range = &r->ranges.items[i];
        if (range->end_ns < range->start_ns)
            continue; /* never closed: no slice to show */
        int32_t step = m->steps.step_of[i];
        putf(out, ",{\"ph\":\"X\",\"pid\":%u,\"tid\":%u,\"name\":", o->host_pid,
             host_tid(o, range->thread_id));
        put_range_name(out, range);
        PUT_TEXT(out, ",\"cat\":\"user_annotation\",\"ts\":");
        put_us(out, range->start_ns, o->t0_ns);
        PUT_TEXT(out, ",\"dur\":");
        put_us(out, range->end_ns, range->start_ns);
        PUT_TEXT(out, ",\"args\":{");
        if (step >= 0)
            putf(out, "\"step\":%d,", (int)step);
        putf(out, "\"kernels\":%" PRIu64 ",\"profile\":%ld}}", ls_model_range_line(m, i)->kernels,
             o->profile);
        if (out->len >= CHUNK)
            flush(out);
    }
}

/* The process of device `d`. */
static unsigned pid_of(const ls_trace_options *o, uint32_t d)
{
    size_t lo = ls_lower_bound_u32(o->device_ids, o->device_count, d);
    return lo < o->device_count && o->device_ids[lo] == d ? o->device_pid[lo] : o->gpu_pid + d;
}

/* The tid of stream `stream` of device `d` in its process. */
static unsigned tid_of(const ls_trace_options *o, uint32_t d, uint32_t stream)
{
    uint64_t key = ((uint64_t)d << 32) | stream;
    size_t lo = ls_lower_bound_u64(o->stream_keys, o->stream_count, key);
    return lo < o->stream_count && o->stream_keys[lo] == key ? o->stream_tid[lo] : stream;
}

/* The index of `name_id` in o->name_ids, or o->name_count when absent. */
static size_t name_slot(const ls_trace_options *o, uint32_t name_id)
{
    size_t lo = ls_lower_bound_u32(o->name_ids, o->name_count, name_id);
    return lo < o->name_count && o->name_ids[lo] == name_id ? lo : o->name_count;
}

/* -- launches, their calls and arrows ----------------------------------------- */

/* API records by (correlation id, domain, start, index): the first of a
 * correlation id is the one the model matches an op to (ls_model). */
typedef struct {
    uint32_t correlation, domain;
    uint64_t start_ns;
    uint32_t index;
} ls_api_key;

static int compare_api_keys(const void *pa, const void *pb)
{
    const ls_api_key *a = pa, *b = pb;
    if (a->correlation != b->correlation)
        return a->correlation < b->correlation ? -1 : 1;
    if (a->domain != b->domain)
        return a->domain < b->domain ? -1 : 1;
    if (a->start_ns != b->start_ns)
        return a->start_ns < b->start_ns ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

/* The first key at or after (correlation, domain, start). */
static size_t api_lower_bound(const ls_api_key *keys, size_t n, uint32_t correlation,
                              uint32_t domain, uint64_t start_ns)
{
    ls_api_key want = {correlation, domain, start_ns, 0};
    return ls_lower_bound(keys, n, sizeof *keys, &want, compare_api_keys);
}

/* What the writer knows of launches: per API record, the waited call it
 * stands for too (or -1) and whether it starts an arrow; per op, whether
 * an arrow ends at it. */
typedef struct {
    ls_api_key *keys;     /* API records before the stop, sorted */
    size_t key_count;
    int32_t *call_of_api; /* per API record */
    uint8_t *arrow_of_api;
    uint8_t *arrow_of_op;
} ls_launch_index;

static void launch_index_free(ls_launch_index *x)
{
    free(x->keys);
    free(x->call_of_api);
    free(x->arrow_of_api);
    free(x->arrow_of_op);
}

typedef struct {
    uint32_t correlation, op;
} ls_op_key;

static int compare_op_keys(const void *pa, const void *pb)
{
    const ls_op_key *a = pa, *b = pb;
    if (a->correlation != b->correlation)
        return a->correlation < b->correlation ? -1 : 1;
    return (a->op > b->op) - (a->op < b->op);
}

static int launch_index_build(ls_launch_index *x, const ls_records *r)
{
    size_t na = r->apis.count, no = r->ops.count, nc = r->calls.count;
    memset(x, 0, sizeof *x);
    x->keys = malloc((na ? na : 1) * sizeof *x->keys);
    x->call_of_api = malloc((na ? na : 1) * sizeof *x->call_of_api);
    x->arrow_of_api = calloc(na ? na : 1, 1);
    x->arrow_of_op = calloc(no ? no : 1, 1);
    ls_op_key *ops = malloc((no ? no : 1) * sizeof *ops);
    if (!x->keys || !x->call_of_api || !x->arrow_of_api || !x->arrow_of_op || !ops) {
        free(ops);
        return -1;
    }
    for (size_t i = 0; i < na; i++) {
        const ls_api *a = &r->apis.items[i];
        x->call_of_api[i] = -1;
        if (r->stop_ns && a->start_ns > r->stop_ns)
            continue; /* the model leaves these out too */
        x->keys[x->key_count++] = (ls_api_key){a->correlation_id, a->domain, a->start_ns,
                                               (uint32_t)i};
    }
    qsort(x->keys, x->key_count, sizeof *x->keys, compare_api_keys);
    for (size_t i = 0; i < no; i++)
        ops[i] = (ls_op_key){r->ops.items[i].correlation_id, (uint32_t)i};
    qsort(ops, no, sizeof *ops, compare_op_keys);
    /* both sorted by correlation id: the ids with a launch and an op get an
     * arrow, from the first key of the id to each op of it */
    for (size_t k = 0, i = 0; k < x->key_count && i < no;) {
        uint32_t c = x->keys[k].correlation;
        if (ops[i].correlation < c) {
            i++;
        } else if (ops[i].correlation > c) {
            k++;
        } else {
            x->arrow_of_api[x->keys[k].index] = 1;
            for (; i < no && ops[i].correlation == c; i++)
                x->arrow_of_op[ops[i].op] = 1;
            for (; k < x->key_count && x->keys[k].correlation == c; k++)
                ;
        }
    }
    free(ops);
    /* a recorded call that was also a launch: the API record of the same
     * id, domain and start (the switchboard stamps both at once) */
    for (size_t c = 0; c < nc; c++) {
        const ls_call *call = &r->calls.items[c];
        size_t k = api_lower_bound(x->keys, x->key_count, call->correlation_id, call->domain,
                                   call->enter_ns);
        for (; k < x->key_count && x->keys[k].correlation == call->correlation_id &&
               x->keys[k].domain == call->domain && x->keys[k].start_ns == call->enter_ns; k++)
            if (x->call_of_api[x->keys[k].index] < 0) {
                x->call_of_api[x->keys[k].index] = (int32_t)c;
                break;
            }
    }
    return 0;
}

/* 1 when the model's call `c` got an API record to stand for it. */
static int call_is_merged(const ls_launch_index *x, const ls_records *r, size_t c)
{
    const ls_call *call = &r->calls.items[c];
    size_t k = api_lower_bound(x->keys, x->key_count, call->correlation_id, call->domain,
                               call->enter_ns);
    for (; k < x->key_count && x->keys[k].correlation == call->correlation_id &&
           x->keys[k].domain == call->domain && x->keys[k].start_ns == call->enter_ns; k++)
        if (x->call_of_api[x->keys[k].index] == (int32_t)c)
            return 1;
    return 0;
}

/* The flow id of correlation id `c` (apart per profile of the file). */
static uint64_t flow_id(const ls_trace_options *o, uint32_t c)
{
    return ((uint64_t)(o->profile > 0 ? o->profile : 0) << 32) | c;
}

/* One end of a launch's flow arrow (Perfetto's v1 flow): "s" on the call's
 * track at its start, or "f" bound to the enclosing slice at the op's start. */
static void put_flow(ls_out *out, int end, uint64_t pid, uint64_t tid, uint32_t correlation,
                     uint64_t ns, const ls_trace_options *o)
{
    if (end)
        PUT_TEXT(out, ",{\"ph\":\"f\",\"bp\":\"e\",\"pid\":");
    else
        PUT_TEXT(out, ",{\"ph\":\"s\",\"pid\":");
    put_u64(out, pid);
    PUT_TEXT(out, ",\"tid\":");
    put_u64(out, tid);
    PUT_TEXT(out, ",\"name\":\"launch\",\"cat\":\"launch\",\"id\":");
    put_u64(out, flow_id(o, correlation));
    PUT_TEXT(out, ",\"ts\":");
    put_us(out, ns, o->t0_ns);
    PUT_TEXT(out, "}");
}

static const char *api_category(uint32_t domain)
{
    return domain ? "cuda_driver" : "cuda_runtime";
}

static const char *api_name(uint32_t domain, uint32_t cbid, uint32_t alias)
{
    const char *name = alias ? ls_cbid_alias_name(alias)
                             : ls_cbid_name(domain ? CUPTI_CB_DOMAIN_DRIVER_API
                                                   : CUPTI_CB_DOMAIN_RUNTIME_API, cbid);
    return name ? name : "launch";
}

/* The sync of call `c`, or -1 when it did not wait. */
static int32_t sync_of(const ls_model *m, size_t c)
{
    return m->syncs.sync_of_call ? m->syncs.sync_of_call[c] : -1;
}

/* ,"sync":N,"site":K,"launches_before":L of call `c` in its sync, or
 * ,"launches_before":L,"call_site":K of one outside every sync. */
static void put_call_args(ls_out *out, const ls_records *r, const ls_model *m,
                          const ls_trace_options *o, size_t c)
{
    int32_t s = sync_of(m, c);
    if (s >= 0) {
        putf(out, ",\"sync\":%" PRIu64, (uint64_t)o->sync_base + (uint64_t)s);
        if ((size_t)s < o->sync_site_count && o->sync_site[s] >= 0)
            putf(out, ",\"site\":%" PRIu64, (uint64_t)o->site_base + (uint64_t)o->sync_site[s]);
    }
    putf(out, ",\"launches_before\":%" PRIu64, r->calls.items[c].launches_before);
    if (s < 0 && c < o->call_site_count && o->call_site[c] >= 0)
        putf(out, ",\"call_site\":%" PRIu64,
             (uint64_t)o->call_site_base + (uint64_t)o->call_site[c]);
}

static void syncs(ls_out *out, const ls_records *r, const ls_model *m, const ls_trace_options *o,
                  const ls_launch_index *x)
{
    const ls_syncs *w = &m->syncs;
    for (size_t i = 0; i < w->count && !out->failed; i++) {
        const ls_sync *s = &w->items[i];
        int32_t k = i < o->sync_site_count ? o->sync_site[i] : -1;
        int named = k >= 0 && (size_t)k < o->site_count;
        putf(out, ",{\"ph\":\"X\",\"pid\":%u,\"tid\":%u,\"name\":", o->host_pid,
             host_tid(o, s->thread_id));
        put_string(out, named ? o->site_name[k] : NULL, "sync");
        PUT_TEXT(out, ",\"cat\":\"sync\",\"ts\":");
        put_us(out, s->start_ns, o->t0_ns);
        PUT_TEXT(out, ",\"dur\":");
        put_us(out, s->end_ns, s->start_ns);
        PUT_TEXT(out, ",\"args\":{");
        if (named && o->site_args[k] && o->site_args[k][0]) {
            put(out, o->site_args[k], strlen(o->site_args[k]));
            PUT_TEXT(out, ",");
        }
        PUT_TEXT(out, "\"blocked_us\":");
        put_us(out, s->blocked_ns, 0);
        putf(out, ",\"calls\":%u,\"wait\":\"%s\"", s->call_count,
             ls_wait_class_name((ls_wait_class)s->wait_class));
        if (s->step >= 0)
            putf(out, ",\"step\":%d", (int)s->step);
        putf(out, ",\"sync\":%" PRIu64, (uint64_t)o->sync_base + i);
        if (k >= 0)
            putf(out, ",\"site\":%" PRIu64, (uint64_t)o->site_base + (uint64_t)k);
        PUT_TEXT(out, "}}");
        if (out->len >= CHUNK)
            flush(out);
    }
    /* the recorded calls that launched nothing, after the syncs */
    for (size_t c = 0; c < r->calls.count && !out->failed; c++) {
        if (call_is_merged(x, r, c))
            continue;
        const ls_call *call = &r->calls.items[c];
        putf(out, ",{\"ph\":\"X\",\"pid\":%u,\"tid\":%u,\"name\":\"%s\",\"cat\":\"%s\",\"ts\":",
             o->host_pid, host_tid(o, call->thread_id), api_name(call->domain, call->cbid, call->alias),
             api_category(call->domain));
        put_us(out, call->enter_ns, o->t0_ns);
        PUT_TEXT(out, ",\"dur\":");
        put_us(out, call->exit_ns > call->enter_ns ? call->exit_ns : call->enter_ns, call->enter_ns);
        putf(out, ",\"args\":{\"correlation\":%u", call->correlation_id);
        put_call_args(out, r, m, o, c);
        PUT_TEXT(out, "}}");
        if (out->len >= CHUNK)
            flush(out);
    }
}

static void apis(ls_out *out, const ls_records *r, const ls_model *m, const ls_trace_options *o,
                 const ls_launch_index *x)
{
    for (size_t i = 0; i < r->apis.count && !out->failed; i++) {
        const ls_api *a = &r->apis.items[i];
        int32_t c = x->call_of_api[i];
        const ls_call *call = c >= 0 ? &r->calls.items[c] : NULL;
        uint64_t end = call ? call->exit_ns : a->end_ns;
        unsigned tid = host_tid(o, a->thread_id);
        /* named by the call when it is one: the reader judges its wait by name */
        const char *name = call ? api_name(call->domain, call->cbid, call->alias)
                                : api_name(a->domain, a->cbid, a->alias);
        const char *category = api_category(a->domain);
        PUT_TEXT(out, ",{\"ph\":\"X\",\"pid\":");
        put_u64(out, o->host_pid);
        PUT_TEXT(out, ",\"tid\":");
        put_u64(out, tid);
        PUT_TEXT(out, ",\"name\":\"");
        put(out, name, strlen(name));
        PUT_TEXT(out, "\",\"cat\":\"");
        put(out, category, strlen(category));
        PUT_TEXT(out, "\",\"ts\":");
        put_us(out, a->start_ns, o->t0_ns);
        PUT_TEXT(out, ",\"dur\":");
        put_us(out, end > a->start_ns ? end : a->start_ns, a->start_ns);
        PUT_TEXT(out, ",\"args\":{\"correlation\":");
        put_u64(out, a->correlation_id);
        if (c >= 0) { /* the launch record and the call in one */
            put_call_args(out, r, m, o, (size_t)c);
            PUT_TEXT(out, ",\"launch\":1");
        }
        PUT_TEXT(out, "}}");
        if (x->arrow_of_api[i])
            put_flow(out, 0, o->host_pid, tid, a->correlation_id, a->start_ns, o);
        if (out->len >= CHUNK)
            flush(out);
    }
}

/* -- GPU ops ------------------------------------------------------------------- */

/* A copy's name as Kineto writes it: "Memcpy DtoH (Device -> Pageable)";
 * the host side is named by host_memory (CUpti_ActivityMemoryKind: Pageable,
 * Pinned, Managed, ...; the reader reads both kinds back from the name). */
static void put_copy_name(ls_out *out, const ls_op *op)
{
    static const char *const kinds[] = {NULL, "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                        "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"};
    static const char *const memory[] = {"Unknown", "Pageable", "Pinned", "Device", "Array",
                                         "Managed", "Device Static", "Managed Static"};
    const char *host = op->host_memory < sizeof memory / sizeof memory[0]
                           ? memory[op->host_memory] : "Unknown";
    const char *kind = op->copy_kind < sizeof kinds / sizeof kinds[0] ? kinds[op->copy_kind]
                                                                       : NULL;
    if (kind == NULL) {
        putf(out, "\"Memcpy%s%s%s\"", op->host_memory ? " (" : "",
             op->host_memory ? host : "", op->host_memory ? ")" : "");
        return;
    }
    const char *side[2];
    for (int k = 0; k < 2; k++) {
        char letter = kind[k == 0 ? 0 : 3];
        side[k] = letter == 'H' ? host : letter == 'D' ? "Device" : letter == 'A' ? "Array"
                                                                                 : "Peer";
    }
    putf(out, "\"Memcpy %s (%s -> %s)\"", kind, side[0], side[1]);
}

/* The JSON of each listed kernel name, escaped once (a name repeats over
 * many ops): its event name, and its ,"signature":...,"mangled":... args. */
typedef struct {
    ls_out text;          /* never flushed: an arena */
    size_t *at;           /* per slot: name [at[3k], at[3k+1]), args [.., at[3k+2]) */
} ls_name_texts;

static int name_texts_build(ls_name_texts *t, const ls_trace_options *o)
{
    memset(t, 0, sizeof *t);
    t->at = malloc((3 * o->name_count + 1) * sizeof *t->at);
    if (t->at == NULL)
        return -1;
    for (size_t k = 0; k < o->name_count && !t->text.failed; k++) {
        t->at[3 * k] = t->text.len;
        put_string(&t->text, o->display[k] ? o->display[k] : ls_names_text(o->name_ids[k]),
                   "kernel");
        t->at[3 * k + 1] = t->text.len;
        if (o->signature[k]) {
            PUT_TEXT(&t->text, ",\"signature\":");
            put_string(&t->text, o->signature[k], "");
        }
        if (o->mangled[k]) {
            PUT_TEXT(&t->text, ",\"mangled\":");
            put_string(&t->text, o->mangled[k], "");
        }
        t->at[3 * k + 2] = t->text.len;
    }
    return t->text.failed ? -1 : 0;
}

static void name_texts_free(ls_name_texts *t)
{
    free(t->text.text);
    free(t->at);
}

/* A kernel's launch geometry as Kineto writes it (args grid, block,
 * registers per thread, shared memory), when its grid and block are known:
 * a reader keeps a geometry only whole. */
static void put_geometry(ls_out *out, const ls_op *op)
{
    if (!op->grid_x || !op->grid_y || !op->grid_z || !op->block_x || !op->block_y ||
        !op->block_z)
        return;
    /* two pieces: each stays well inside putf's 127 bytes */
    putf(out, ",\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u]", op->grid_x, (unsigned)op->grid_y,
         (unsigned)op->grid_z, (unsigned)op->block_x, (unsigned)op->block_y,
         (unsigned)op->block_z);
    putf(out, ",\"registers per thread\":%u,\"shared memory\":%u", (unsigned)op->registers,
         op->shared_bytes);
}

static void ops(ls_out *out, const ls_records *r, const ls_trace_options *o,
                const ls_launch_index *x, const ls_name_texts *names)
{
    /* per ls_op_kind; a graph replay (graph-level mode) is one event on its stream's track */
    static const char *const categories[] = {"kernel", "gpu_memcpy", "gpu_memset", "cuda_graph"};
    /* correlation ids with an API record the model would match */
    for (size_t i = 0; i < r->ops.count && !out->failed; i++) {
        const ls_op *op = &r->ops.items[i];
        unsigned pid = pid_of(o, op->device_id), tid = tid_of(o, op->device_id, op->stream_id);
        size_t k = op->kind == LS_OP_KERNEL ? name_slot(o, op->name_id) : o->name_count;
        PUT_TEXT(out, ",{\"ph\":\"X\",\"pid\":");
        put_u64(out, pid);
        PUT_TEXT(out, ",\"tid\":");
        put_u64(out, tid);
        PUT_TEXT(out, ",\"name\":");
        if (op->kind == LS_OP_MEMCPY) {
            put_copy_name(out, op);
        } else if (op->kind == LS_OP_MEMSET) {
            PUT_TEXT(out, "\"Memset (Device)\"");
        } else if (k < o->name_count) {
            put(out, names->text.text + names->at[3 * k], names->at[3 * k + 1] - names->at[3 * k]);
        } else {
            put_string(out, ls_names_text(op->name_id),
                       op->kind == LS_OP_GRAPH ? "CUDA graph" : "kernel");
        }
        PUT_TEXT(out, ",\"cat\":\"");
        const char *category = categories[op->kind <= LS_OP_GRAPH ? op->kind : LS_OP_KERNEL];
        put(out, category, strlen(category));
        PUT_TEXT(out, "\",\"ts\":");
        put_us(out, op->start_ns, o->t0_ns);
        PUT_TEXT(out, ",\"dur\":");
        put_us(out, op->end_ns, op->start_ns);
        PUT_TEXT(out, ",\"args\":{\"correlation\":");
        put_u64(out, op->correlation_id);
        PUT_TEXT(out, ",\"device\":");
        put_u64(out, op->device_id);
        PUT_TEXT(out, ",\"stream\":");
        put_u64(out, op->stream_id);
        if (op->bytes) {
            PUT_TEXT(out, ",\"bytes\":");
            put_u64(out, op->bytes);
        }
        if (op->kind == LS_OP_KERNEL)
            put_geometry(out, op);
        if (k < o->name_count)
            put(out, names->text.text + names->at[3 * k + 1],
                names->at[3 * k + 2] - names->at[3 * k + 1]);
        PUT_TEXT(out, "}}");
        if (x->arrow_of_op[i])
            put_flow(out, 1, pid, tid, op->correlation_id, op->start_ns, o);
        if (out->len >= CHUNK)
            flush(out);
    }
}

static void sync_records(ls_out *out, const ls_records *r, const ls_trace_options *o)
{
    /* CUpti_ActivitySynchronizationType, in Kineto's words */
    static const char *const names[] = {"Sync", "Event Sync", "Stream Wait Event",
                                        "Stream Sync", "Context Sync"};
    for (size_t i = 0; i < r->sync_records.count && !out->failed; i++) {
        const ls_sync_record *s = &r->sync_records.items[i];
        putf(out, ",{\"ph\":\"X\",\"pid\":%u,\"tid\":%u,\"name\":\"%s\",\"cat\":\"cuda_sync\","
                  "\"ts\":", o->host_pid, o->sync_tid, names[s->type < 5 ? s->type : 0]);
        put_us(out, s->start_ns, o->t0_ns);
        PUT_TEXT(out, ",\"dur\":");
        put_us(out, s->end_ns, s->start_ns);
        putf(out, ",\"args\":{\"stream\":%u,\"correlation\":%u}}", s->stream_id,
             s->correlation_id);
        if (out->len >= CHUNK)
            flush(out);
    }
}

static void gaps(ls_out *out, const ls_model *m, const ls_trace_options *o)
{
    for (size_t i = 0; i < m->gap_count && !out->failed; i++) {
        const ls_gap *g = &m->gaps[i];
        if (g->gap_class == LS_CLASS_NORMAL) /* the GPU working as it should: left out */
            continue;
        int severe = g->gap_class == LS_CLASS_SEVERE;
        uint64_t ns = g->end_ns - g->start_ns;
        /* the length with one decimal, as "%.1f" of the microseconds */
        uint64_t tenths = (ns + 50) / 100;
        putf(out, ",{\"ph\":\"X\",\"pid\":%u,\"tid\":%u,\"name\":\"%s gap %" PRIu64
                  ".%u us\",\"cat\":\"gap\",\"cname\":\"%s\",\"ts\":", pid_of(o, g->device_id),
             o->gap_tid,
             severe ? "SEVERE" : "warning", tenths / 10, (unsigned)(tenths % 10),
             severe ? "terrible" : "bad");
        put_us(out, g->start_ns, o->t0_ns);
        PUT_TEXT(out, ",\"dur\":");
        put_us(out, g->end_ns, g->start_ns);
        PUT_TEXT(out, "}");
        if (out->len >= CHUNK)
            flush(out);
    }
}

/* -- PM samples ---------------------------------------------------------------- */

static const char *const counter_names[LS_METRICS][2] = {
    [LS_M_SM_ACTIVE] = {"SM active", "%"},
    [LS_M_DRAM_THROUGHPUT] = {"DRAM throughput", "%"},
    [LS_M_GR_ACTIVE] = {"GR active", "%"},
    [LS_M_DRAM_READ_GBPS] = {"DRAM read", "GB/s"},
    [LS_M_DRAM_WRITE_GBPS] = {"DRAM write", "GB/s"},
    [LS_M_SM_ISSUE] = {"SM issue", "IPC"},
    [LS_M_WARP_OCCUPANCY] = {"warp occupancy", "%"},
    [LS_M_PCIE_READ_GBPS] = {"PCIe read", "GB/s"},
    [LS_M_PCIE_WRITE_GBPS] = {"PCIe write", "GB/s"},
    [LS_M_TENSOR_ACTIVE] = {"tensor active", "%"},
};

int ls_trace_json_counter(int metric, const char **name, const char **unit)
{
    if (metric < 0 || metric >= LS_METRICS || counter_names[metric][0] == NULL)
        return -1;
    *name = counter_names[metric][0];
    *unit = counter_names[metric][1];
    return 0;
}

/* A double as the shortest text that reads back to it. */
static void put_double(ls_out *out, double v)
{
    char text[40];
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(text, sizeof text, "%.*g", digits, v);
        if (strtod(text, NULL) == v)
            break;
    }
    put(out, text, strlen(text));
}

static void counters_at(ls_out *out, const ls_sample *s, uint64_t t, unsigned pid,
                        const ls_trace_options *o)
{
    for (int j = 0; j < LS_METRICS; j++) {
        const char *name, *unit;
        if (!isfinite(s->values[j]) || ls_trace_json_counter(j, &name, &unit) != 0)
            continue;
        putf(out, ",{\"ph\":\"C\",\"pid\":%u,\"name\":\"%s\",\"cat\":\"counter\",\"ts\":", pid,
             name);
        put_us(out, t, o->t0_ns);
        putf(out, ",\"args\":{\"%s\":", unit);
        put_double(out, s->values[j]);
        PUT_TEXT(out, "}}");
    }
}

/* An instant that ends figure j's series at t (category counter_end): a
 * counter holds its value until its next event, so where a sample does not
 * follow at once, or lacks the figure, the series must say it stops. */
static void counter_end(ls_out *out, int j, uint64_t t, unsigned pid, const ls_trace_options *o)
{
    const char *name, *unit;
    if (ls_trace_json_counter(j, &name, &unit) != 0)
        return;
    putf(out, ",{\"ph\":\"i\",\"s\":\"p\",\"pid\":%u,\"name\":\"no sample: %s %s\","
              "\"cat\":\"counter_end\",\"ts\":", pid, name, unit);
    put_us(out, t, o->t0_ns);
    putf(out, ",\"args\":{\"series\":\"%s\"}}", name);
}

static void counters(ls_out *out, const ls_records *r, const ls_trace_options *o)
{
    size_t n = r->samples.count;
    unsigned pid = pid_of(o, r->sample_device);
    for (size_t i = 0; i < n && !out->failed; i++) {
        const ls_sample *s = &r->samples.items[i];
        counters_at(out, s, s->start_ns, pid, o);
        if (i + 1 == n) {
            /* the last sample's values once more at its end, so its length
             * is in the trace too (and the counters hold them after it) */
            counters_at(out, s, s->end_ns, pid, o);
            break;
        }
        const ls_sample *next = &r->samples.items[i + 1];
        for (int j = 0; j < LS_METRICS; j++)
            if (isfinite(s->values[j]) && (next->start_ns != s->end_ns || !isfinite(next->values[j])))
                counter_end(out, j, s->end_ns, pid, o);
        if (out->len >= CHUNK)
            flush(out);
    }
}

int ls_trace_json_write(const ls_records *r, const ls_model *m, const ls_trace_options *o,
                        ls_trace_sink sink, void *context)
{
    ls_out out = {NULL, 0, 0, 0, sink, context};
    ls_launch_index x;
    ls_name_texts names;
    int built = launch_index_build(&x, r);
    if (name_texts_build(&names, o) != 0 || built != 0) {
        launch_index_free(&x);
        name_texts_free(&names);
        return -1;
    }
    ranges(&out, r, m, o);
    syncs(&out, r, m, o, &x);
    apis(&out, r, m, o, &x);
    ops(&out, r, o, &x, &names);
    sync_records(&out, r, o);
    gaps(&out, m, o);
    counters(&out, r, o);
    flush(&out);
    free(out.text);
    launch_index_free(&x);
    name_texts_free(&names);
    return out.failed;
}
