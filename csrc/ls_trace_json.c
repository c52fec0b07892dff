/* ls_trace_json: see ls_trace_json.h. */
#include "ls_trace_json.h"

#include "ls_names.h"

#include <inttypes.h>
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

/* Microseconds from t0 to t, three decimals at most ("2.1", "1.0", "-0.5"). */
static void put_us(ls_out *o, uint64_t t, uint64_t t0)
{
    uint64_t d = t >= t0 ? t - t0 : t0 - t;
    unsigned frac = (unsigned)(d % 1000);
    int digits = 3;
    while (digits > 1 && frac % 10 == 0) {
        frac /= 10;
        digits--;
    }
    putf(o, "%s%" PRIu64 ".%0*u", t >= t0 ? "" : "-", d / 1000, digits, frac);
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
    size_t n = strlen((const char *)s);
    put(o, "\"", 1);
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        if (c == '"' || c == '\\') {
            put(o, "\\", 1);
            put(o, (const char *)&s[i], 1);
            i++;
        } else if (c < 0x20) {
            putf(o, "\\u%04x", c);
            i++;
        } else {
            size_t len = utf8_length(s + i, n - i);
            if (len == 0) {
                put(o, "\xEF\xBF\xBD", 3); /* U+FFFD */
                i++;
            } else {
                put(o, (const char *)s + i, len);
                i += len;
            }
        }
    }
    put(o, "\"", 1);
}

static int compare_u32(const void *pa, const void *pb)
{
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
    return (a > b) - (a < b);
}

static int contains(const uint32_t *sorted, size_t n, uint32_t v)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sorted[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && sorted[lo] == v;
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
        int32_t step = m->steps.step_of[i];
        putf(out, ",{\"ph\":\"X\",\"pid\":%u,\"tid\":%u,\"name\":", o->host_pid, o->range_tid[i]);
        put_range_name(out, range);
        putf(out, ",\"cat\":\"%s\",\"ts\":", step >= 0 ? "step" : "range");
        put_us(out, range->start_ns, o->t0_ns);
        put(out, ",\"dur\":", 7);
        put_us(out, range->end_ns, range->start_ns);
        put(out, ",\"args\":{", 9);
        if (step >= 0)
            putf(out, "\"step\":%d,", (int)step);
        putf(out, "\"kernels\":%" PRIu64 ",\"profile\":%ld}}", m->range_lines[i].kernels,
             o->profile);
        if (out->len >= CHUNK)
            flush(out);
    }
}

/* The process of device `d`. */
static unsigned pid_of(const ls_trace_options *o, uint32_t d)
{
    size_t lo = 0, hi = o->device_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (o->device_ids[mid] < d)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < o->device_count && o->device_ids[lo] == d ? o->device_pid[lo] : o->gpu_pid + d;
}

/* The tid of stream `stream` of device `d` in its process. */
static unsigned tid_of(const ls_trace_options *o, uint32_t d, uint32_t stream)
{
    uint64_t key = ((uint64_t)d << 32) | stream;
    size_t lo = 0, hi = o->stream_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (o->stream_keys[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < o->stream_count && o->stream_keys[lo] == key ? o->stream_tid[lo] : stream;
}

/* The index of `name_id` in o->name_ids, or o->name_count when absent. */
static size_t name_slot(const ls_trace_options *o, uint32_t name_id)
{
    size_t lo = 0, hi = o->name_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (o->name_ids[mid] < name_id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < o->name_count && o->name_ids[lo] == name_id ? lo : o->name_count;
}

static void ops(ls_out *out, const ls_records *r, const uint32_t *called, size_t n_called,
                const ls_trace_options *o)
{
    static const char *const kinds[] = {"kernel", "memcpy", "memset"};
    for (size_t i = 0; i < r->ops.count && !out->failed; i++) {
        const ls_op *op = &r->ops.items[i];
        unsigned pid = pid_of(o, op->device_id), tid = tid_of(o, op->device_id, op->stream_id);
        size_t k = name_slot(o, op->name_id);
        const char *display = k < o->name_count && o->display[k] ? o->display[k]
                                                                  : ls_names_text(op->name_id);
        putf(out, ",{\"ph\":\"X\",\"pid\":%u,\"tid\":%u,\"name\":", pid, tid);
        put_string(out, display, kinds[op->kind]);
        putf(out, ",\"cat\":\"%s\",\"ts\":", kinds[op->kind]);
        put_us(out, op->start_ns, o->t0_ns);
        put(out, ",\"dur\":", 7);
        put_us(out, op->end_ns, op->start_ns);
        putf(out, ",\"args\":{\"correlation\":%u", op->correlation_id);
        if (op->bytes)
            putf(out, ",\"bytes\":%" PRIu64, op->bytes);
        if (k < o->name_count && o->signature[k]) {
            put(out, ",\"signature\":", 13);
            put_string(out, o->signature[k], "");
        }
        if (k < o->name_count && o->mangled[k]) {
            put(out, ",\"mangled\":", 11);
            put_string(out, o->mangled[k], "");
        }
        put(out, "}}", 2);
        if (contains(called, n_called, op->correlation_id)) { /* an arrow where both ends exist */
            putf(out, ",{\"ph\":\"f\",\"bp\":\"e\",\"pid\":%u,\"tid\":%u,\"name\":\"launch\","
                      "\"cat\":\"launch\",\"id\":%u,\"ts\":", pid, tid,
                 op->correlation_id);
            put_us(out, op->start_ns, o->t0_ns);
            put(out, "}", 1);
        }
        if (out->len >= CHUNK)
            flush(out);
    }
}

static void apis(ls_out *out, const ls_records *r, const uint32_t *launched, size_t n_launched,
                 const ls_trace_options *o)
{
    for (size_t i = 0; i < r->apis.count && !out->failed; i++) {
        const ls_api *a = &r->apis.items[i];
        putf(out, ",{\"ph\":\"X\",\"pid\":%u,\"tid\":%u,\"name\":\"launch\","
                  "\"cat\":\"api\",\"ts\":", o->host_pid, o->api_tid);
        put_us(out, a->start_ns, o->t0_ns);
        put(out, ",\"dur\":", 7);
        put_us(out, a->end_ns, a->start_ns);
        putf(out, ",\"args\":{\"correlation\":%u,\"thread\":%" PRIu64 "}}", a->correlation_id,
             a->thread_id);
        if (contains(launched, n_launched, a->correlation_id)) {
            putf(out, ",{\"ph\":\"s\",\"pid\":%u,\"tid\":%u,\"name\":\"launch\","
                      "\"cat\":\"launch\",\"id\":%u,\"ts\":", o->host_pid, o->api_tid,
                 a->correlation_id);
            put_us(out, a->start_ns, o->t0_ns);
            put(out, "}", 1);
        }
        if (out->len >= CHUNK)
            flush(out);
    }
}

static void sync_records(ls_out *out, const ls_records *r, const ls_trace_options *o)
{
    for (size_t i = 0; i < r->sync_records.count && !out->failed; i++) {
        const ls_sync_record *s = &r->sync_records.items[i];
        putf(out, ",{\"ph\":\"X\",\"pid\":%u,\"tid\":%u,\"name\":\"sync (stream %u)\","
                  "\"cat\":\"sync\",\"ts\":", o->host_pid, o->sync_tid, s->stream_id);
        put_us(out, s->start_ns, o->t0_ns);
        put(out, ",\"dur\":", 7);
        put_us(out, s->end_ns, s->start_ns);
        put(out, "}", 1);
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
        put(out, ",\"dur\":", 7);
        put_us(out, g->end_ns, g->start_ns);
        put(out, "}", 1);
        if (out->len >= CHUNK)
            flush(out);
    }
}

int ls_trace_json_write(const ls_records *r, const ls_model *m, const ls_trace_options *o,
                        ls_trace_sink sink, void *context)
{
    ls_out out = {NULL, 0, 0, 0, sink, context};
    size_t na = r->apis.count, no = r->ops.count;
    uint32_t *called = malloc((na ? na : 1) * sizeof *called);
    uint32_t *launched = malloc((no ? no : 1) * sizeof *launched);
    if (called == NULL || launched == NULL) {
        free(called);
        free(launched);
        return -1;
    }
    for (size_t i = 0; i < na; i++)
        called[i] = r->apis.items[i].correlation_id;
    qsort(called, na, sizeof *called, compare_u32);
    size_t nl = 0; /* ops with a launch record: their API records get an arrow */
    for (size_t i = 0; i < no; i++)
        if (contains(called, na, r->ops.items[i].correlation_id))
            launched[nl++] = r->ops.items[i].correlation_id;
    qsort(launched, nl, sizeof *launched, compare_u32);
    ranges(&out, r, m, o);
    ops(&out, r, called, na, o);
    apis(&out, r, launched, nl, o);
    sync_records(&out, r, o);
    gaps(&out, m, o);
    flush(&out);
    free(out.text);
    free(called);
    free(launched);
    return out.failed;
}
