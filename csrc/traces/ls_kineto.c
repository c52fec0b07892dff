/* ls_kineto: see ls_kineto.h.
 *
 * The reader is a small state machine over "units": the opening bracket, a
 * top-level member, one event, a separator.  A unit is parsed whole from a
 * contiguous buffer; when the buffer ends inside it, the reader rewinds to
 * the unit's start and waits for the next chunk (waiting until twice as
 * many bytes are there, so one huge unit costs linear time). */
#include "ls_kineto.h"

#include "ls_json.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    S_START, S_MEMBER_FIRST, S_MEMBER, S_AFTER_MEMBER, S_EVENT_FIRST, S_EVENT_AFTER,
    S_EVENT_NEXT, S_END
};

#define MAX_KEPT_MEMBER (16u << 20) /* top-level members above this are not kept */
#define MAX_COUNTER_ARGS 16

void ls_kineto_init(ls_kineto *k)
{
    memset(k, 0, sizeof *k);
    ls_tbuild_init(&k->build);
}

void ls_kineto_free(ls_kineto *k)
{
    ls_tbuild_free(&k->build);
    free(k->buf);
    free(k->raw);
    free(k->members);
    free(k->scratch);
    memset(k, 0, sizeof *k);
}

/* ---- one event ----------------------------------------------------------- */

typedef enum { ID_NONE, ID_NUMBER, ID_STRING } ls_id_kind;

typedef struct {
    ls_id_kind kind;
    ls_json_number number;
    ls_json_string string;
} ls_id;

typedef struct {
    ls_json_string key;
    ls_json_number value;
} ls_number_arg;

typedef struct {
    ls_json_string ph, cat, name;
    int has_ph, has_cat, has_name, has_ts, has_dur;
    ls_json_number ts, dur;
    ls_id pid, tid;
    int has_correlation, has_device, has_stream, has_bytes;
    ls_json_number correlation, device, stream, bytes;
    /* loopscope's own export: a range's step, a call's sync and site (or
     * its own site outside syncs) and the launches before it, a kernel's
     * whole name, a process's name */
    int has_step, has_sync, has_site, has_launches_before, has_launch, has_call_site;
    ls_json_number step, sync, site, launches_before, launch, call_site;
    int has_mangled, has_signature, has_arg_name, has_series;
    ls_json_string mangled, signature, arg_name, series;
    ls_number_arg numbers[MAX_COUNTER_ARGS]; /* numeric args, for counters */
    int number_count;
    ls_tb_geometry geometry; /* a kernel's args grid, block, registers per
                                thread and shared memory, as Kineto writes them */
} ls_event;

/* The key is the literal `word` (no escapes): a length check first. */
#define key_is(s, word) \
    (!(s)->escaped && (s)->len == sizeof(word) - 1 && memcmp((s)->text, word, sizeof(word) - 1) == 0)

/* A number or a string (pid and tid are either). */
static int read_id(ls_json_cursor *c, ls_id *out)
{
    int rc = ls_json_ws(c);
    if (rc != LS_JSON_OK)
        return rc;
    if (*c->p == '"') {
        out->kind = ID_STRING;
        return ls_json_read_string(c, &out->string);
    }
    if (*c->p == '-' || (*c->p >= '0' && *c->p <= '9')) {
        out->kind = ID_NUMBER;
        return ls_json_read_number(c, &out->number);
    }
    out->kind = ID_NONE;
    return ls_json_skip_value(c, 1);
}

/* A number into *out (has = 1), or any other value skipped (has = 0). */
static int read_number_field(ls_json_cursor *c, ls_json_number *out, int *has)
{
    int rc = ls_json_ws(c);
    if (rc != LS_JSON_OK)
        return rc;
    if (*c->p == '-' || (*c->p >= '0' && *c->p <= '9') || *c->p == 'N' || *c->p == 'I') {
        *has = 1;
        return ls_json_read_number(c, out);
    }
    *has = 0;
    return ls_json_skip_value(c, 1);
}

/* A number as a geometry value: the integer, or -1 when it is not one in
 * [0, 2^62] (the builder checks the limits). */
static int64_t geometry_value(const ls_json_number *n)
{
    uint64_t v;
    return ls_json_number_uint(n, (uint64_t)1 << 62, &v) == 0 ? (int64_t)v : -1;
}

/* A geometry number (registers per thread, shared memory) into *out; any
 * other value is skipped and reads as -1 (given, unusable). */
static int read_geometry_number(ls_json_cursor *c, int64_t *out)
{
    ls_json_number n;
    int has = 0;
    int rc = read_number_field(c, &n, &has);
    if (rc == LS_JSON_OK)
        *out = has ? geometry_value(&n) : -1;
    return rc;
}

/* A grid or block, [x, y, z], into out[3]; a value that is not a list of
 * three numbers is skipped and reads as -1s.  The value is validated and
 * consumed whole first, so the list is then read from complete text. */
static int read_dims(ls_json_cursor *c, int64_t out[3])
{
    out[0] = out[1] = out[2] = -1;
    int rc = ls_json_ws(c);
    if (rc != LS_JSON_OK)
        return rc;
    const char *start = c->p;
    if ((rc = ls_json_skip_value(c, 2)) != LS_JSON_OK || *start != '[')
        return rc;
    ls_json_cursor list = {start + 1, c->p, NULL};
    int64_t v[3];
    for (int i = 0; i < 3; i++) {
        ls_json_number n;
        if (ls_json_ws(&list) != LS_JSON_OK || ls_json_read_number(&list, &n) != LS_JSON_OK ||
            ls_json_ws(&list) != LS_JSON_OK || *list.p != (i < 2 ? ',' : ']'))
            return LS_JSON_OK; /* not three numbers: unusable */
        list.p++;
        v[i] = geometry_value(&n);
    }
    memcpy(out, v, sizeof v);
    return LS_JSON_OK;
}

static int read_string_field(ls_json_cursor *c, ls_json_string *out, int *has)
{
    int rc = ls_json_ws(c);
    if (rc != LS_JSON_OK)
        return rc;
    if (*c->p == '"') {
        *has = 1;
        return ls_json_read_string(c, out);
    }
    *has = 0;
    return ls_json_skip_value(c, 1);
}

/* Iterates the members of the object at c->p: calls member() after each
 * key with the cursor at the value, which must consume the value. */
typedef int (*ls_member_fn)(ls_json_cursor *c, const ls_json_string *key, ls_event *ev);

static int read_object(ls_json_cursor *c, ls_event *ev, ls_member_fn member)
{
    c->p++; /* '{' */
    int rc = ls_json_ws(c);
    if (rc != LS_JSON_OK)
        return rc;
    if (*c->p == '}') {
        c->p++;
        return LS_JSON_OK;
    }
    for (;;) {
        if (*c->p != '"') {
            c->error = "an object key that is not a string";
            return LS_JSON_BAD;
        }
        ls_json_string key;
        if ((rc = ls_json_read_string(c, &key)) != LS_JSON_OK || (rc = ls_json_ws(c)) != LS_JSON_OK)
            return rc;
        if (*c->p != ':') {
            c->error = "a missing ':' after an object key";
            return LS_JSON_BAD;
        }
        c->p++;
        if ((rc = member(c, &key, ev)) != LS_JSON_OK || (rc = ls_json_ws(c)) != LS_JSON_OK)
            return rc;
        if (*c->p == '}') {
            c->p++;
            return LS_JSON_OK;
        }
        if (*c->p != ',') {
            c->error = "a missing ',' or '}' in an object";
            return LS_JSON_BAD;
        }
        c->p++;
        if ((rc = ls_json_ws(c)) != LS_JSON_OK)
            return rc;
    }
}

static int arg_member(ls_json_cursor *c, const ls_json_string *key, ls_event *ev)
{
    if (key_is(key, "correlation"))
        return read_number_field(c, &ev->correlation, &ev->has_correlation);
    if (key_is(key, "device"))
        return read_number_field(c, &ev->device, &ev->has_device);
    if (key_is(key, "stream"))
        return read_number_field(c, &ev->stream, &ev->has_stream);
    if (key_is(key, "bytes"))
        return read_number_field(c, &ev->bytes, &ev->has_bytes);
    if (key_is(key, "step"))
        return read_number_field(c, &ev->step, &ev->has_step);
    if (key_is(key, "sync"))
        return read_number_field(c, &ev->sync, &ev->has_sync);
    if (key_is(key, "site"))
        return read_number_field(c, &ev->site, &ev->has_site);
    if (key_is(key, "launch"))
        return read_number_field(c, &ev->launch, &ev->has_launch);
    if (key_is(key, "call_site"))
        return read_number_field(c, &ev->call_site, &ev->has_call_site);
    if (key_is(key, "launches_before"))
        return read_number_field(c, &ev->launches_before, &ev->has_launches_before);
    if (key_is(key, "mangled"))
        return read_string_field(c, &ev->mangled, &ev->has_mangled);
    if (key_is(key, "signature"))
        return read_string_field(c, &ev->signature, &ev->has_signature);
    if (key_is(key, "name"))
        return read_string_field(c, &ev->arg_name, &ev->has_arg_name);
    if (key_is(key, "series"))
        return read_string_field(c, &ev->series, &ev->has_series);
    if (key_is(key, "grid")) {
        ev->geometry.given |= LS_TB_GRID;
        return read_dims(c, ev->geometry.grid);
    }
    if (key_is(key, "block")) {
        ev->geometry.given |= LS_TB_BLOCK;
        return read_dims(c, ev->geometry.block);
    }
    if (key_is(key, "registers per thread")) {
        ev->geometry.given |= LS_TB_REGISTERS;
        return read_geometry_number(c, &ev->geometry.registers);
    }
    if (key_is(key, "shared memory")) {
        ev->geometry.given |= LS_TB_SHARED;
        return read_geometry_number(c, &ev->geometry.shared);
    }
    int rc = ls_json_ws(c);
    if (rc != LS_JSON_OK)
        return rc;
    int maybe_counter = !ev->has_ph || (ev->ph.len == 1 && ev->ph.text[0] == 'C');
    if (maybe_counter && ev->number_count < MAX_COUNTER_ARGS &&
        (*c->p == '-' || (*c->p >= '0' && *c->p <= '9'))) {
        ls_number_arg *a = &ev->numbers[ev->number_count];
        if ((rc = ls_json_read_number(c, &a->value)) == LS_JSON_OK) {
            a->key = *key;
            ev->number_count++;
        }
        return rc;
    }
    return ls_json_skip_value(c, 2);
}

static int event_member(ls_json_cursor *c, const ls_json_string *key, ls_event *ev)
{
    if (key->escaped || key->len < 2 || key->len > 4)
        return ls_json_skip_value(c, 1);
    if (key_is(key, "ph"))
        return read_string_field(c, &ev->ph, &ev->has_ph);
    if (key_is(key, "cat"))
        return read_string_field(c, &ev->cat, &ev->has_cat);
    if (key_is(key, "name"))
        return read_string_field(c, &ev->name, &ev->has_name);
    if (key_is(key, "ts"))
        return read_number_field(c, &ev->ts, &ev->has_ts);
    if (key_is(key, "dur"))
        return read_number_field(c, &ev->dur, &ev->has_dur);
    if (key_is(key, "pid"))
        return read_id(c, &ev->pid);
    if (key_is(key, "tid"))
        return read_id(c, &ev->tid);
    if (key_is(key, "args")) {
        int rc = ls_json_ws(c);
        if (rc != LS_JSON_OK)
            return rc;
        if (*c->p == '{')
            return read_object(c, ev, arg_member);
        return ls_json_skip_value(c, 1);
    }
    return ls_json_skip_value(c, 1);
}

/* ---- from a parsed event to records ----------------------------------------- */

/* The text of a string token, unescaped when needed (into k->scratch). */
static const char *text_of(ls_kineto *k, const ls_json_string *s, size_t *len)
{
    if (!s->escaped) {
        *len = s->len;
        return s->text;
    }
    if (k->scratch_cap < s->len + 1) {
        char *bigger = realloc(k->scratch, s->len + 1);
        if (bigger == NULL)
            return NULL;
        k->scratch = bigger;
        k->scratch_cap = s->len + 1;
    }
    *len = ls_json_unescape(s, k->scratch, k->scratch_cap);
    return k->scratch;
}

/* A name longer than LS_KINETO_MAX_NAME bytes, cut there (at a UTF-8
 * character's start) with a note of its length, in k->scratch. */
static const char *cut_name(ls_kineto *k, const char *name, size_t *len)
{
    char note[64];
    int note_len = snprintf(note, sizeof note, " [name cut: %llu bytes]",
                            (unsigned long long)*len);
    size_t keep = LS_KINETO_MAX_NAME;
    while (keep > 0 && ((unsigned char)name[keep] & 0xC0) == 0x80)
        keep--; /* never half a character */
    size_t need = keep + (size_t)note_len + 1;
    if (k->scratch_cap < need) { /* realloc keeps an unescaped name already there */
        int in_scratch = name == k->scratch;
        char *bigger = realloc(k->scratch, need);
        if (bigger == NULL)
            return NULL;
        k->scratch = bigger;
        k->scratch_cap = need;
        if (in_scratch)
            name = bigger;
    }
    if (name != k->scratch)
        memcpy(k->scratch, name, keep);
    memcpy(k->scratch + keep, note, (size_t)note_len + 1);
    *len = keep + (size_t)note_len;
    k->names_cut++;
    return k->scratch;
}

static int ci_equal(const ls_json_string *s, const char *word)
{
    size_t n = strlen(word);
    if (s->escaped || s->len != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (tolower((unsigned char)s->text[i]) != word[i])
            return 0;
    return 1;
}

static ls_tb_class class_of_cat(const ls_event *ev)
{
    if (!ev->has_cat)
        return LS_TB_OTHER;
    static const struct {
        const char *cat;
        ls_tb_class c;
    } table[] = {
        {"kernel", LS_TB_KERNEL}, {"gpu_memcpy", LS_TB_MEMCPY}, {"memcpy", LS_TB_MEMCPY},
        {"gpu_memset", LS_TB_MEMSET}, {"memset", LS_TB_MEMSET},
        {"cuda_graph", LS_TB_GRAPH}, /* loopscope's export: a replay traced whole */
        {"cuda_runtime", LS_TB_RUNTIME}, {"runtime", LS_TB_RUNTIME},
        {"cuda_driver", LS_TB_DRIVER}, {"driver", LS_TB_DRIVER},
        {"cpu_op", LS_TB_CPU_OP}, {"operator", LS_TB_CPU_OP},
        {"python_function", LS_TB_PYTHON}, {"user_annotation", LS_TB_ANNOTATION},
        {"gpu_user_annotation", LS_TB_GPU_ANNOTATION}, {"cuda_sync", LS_TB_SYNC},
        {"ac2g", LS_TB_FLOW}, {"async_cpu_to_gpu", LS_TB_FLOW},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (ci_equal(&ev->cat, table[i].cat))
            return table[i].c;
    return LS_TB_OTHER;
}

static uint64_t string_hash(const ls_json_string *s)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < s->len; i++)
        h = (h ^ (unsigned char)s->text[i]) * 1099511628211ull;
    return h | (1ull << 63); /* never equal to a numeric thread id */
}

/* Keeps the name of a string thread id (the first LS_KINETO_THREAD_NAMES). */
static void note_thread_name(ls_kineto *k, uint64_t id, const ls_json_string *s)
{
    for (size_t i = 0; i < k->thread_name_count; i++)
        if (k->thread_names[i].id == id)
            return;
    if (k->thread_name_count == LS_KINETO_THREAD_NAMES)
        return;
    ls_kineto_thread_name *t = &k->thread_names[k->thread_name_count++];
    t->id = id;
    size_t n = s->len < sizeof t->name - 1 ? s->len : sizeof t->name - 1;
    memcpy(t->name, s->text, n);
    t->name[n] = '\0';
}

/* A thread id from tid: a number, or a string's hash (its name kept). */
static int thread_of(ls_kineto *k, const ls_id *id, uint64_t *out)
{
    if (id->kind == ID_NUMBER) {
        int64_t v;
        if (ls_json_number_scaled(&id->number, 0, &v) != 0)
            return -1;
        *out = (uint64_t)v & ~(1ull << 63);
        return 0;
    }
    if (id->kind == ID_STRING) {
        *out = string_hash(&id->string);
        note_thread_name(k, *out, &id->string);
        return 0;
    }
    return -1;
}

/* A device index from a number, or the digits of a string ("GPU 1"). */
static int device_of(const ls_id *id, uint32_t *out)
{
    uint64_t v;
    if (id->kind == ID_NUMBER) {
        if (ls_json_number_uint(&id->number, 0xFFFF, &v) != 0)
            return -1;
        *out = (uint32_t)v;
        return 0;
    }
    if (id->kind == ID_STRING) {
        size_t i = 0;
        while (i < id->string.len && !isdigit((unsigned char)id->string.text[i]))
            i++;
        if (i == id->string.len)
            return -1;
        v = 0;
        for (; i < id->string.len && isdigit((unsigned char)id->string.text[i]) && v <= 0xFFFF; i++)
            v = v * 10 + (uint64_t)(id->string.text[i] - '0');
        if (v > 0xFFFF)
            return -1;
        *out = (uint32_t)v;
        return 0;
    }
    return -1;
}

/* CUpti_ActivityMemoryKind of a side's word in a copy's name. */
static uint8_t memory_kind_of(const char *word, size_t len)
{
    static const char *const words[] = {NULL, "Pageable", "Pinned", "Device", "Array",
                                        "Managed", "Device Static", "Managed Static"};
    for (uint8_t k = 1; k < sizeof words / sizeof words[0]; k++)
        if (strlen(words[k]) == len && memcmp(word, words[k], len) == 0)
            return k;
    return 0;
}

/* "Memcpy DtoH (Device -> Pageable)": CUPTI's copy kind and the host side's
 * memory kind (1 pageable, 2 pinned, 5 managed, ...; 0 when no side is
 * host), read from the side the kind names H, or, in names without sides,
 * from the word Pageable or Pinned anywhere. */
static void copy_kind_of(const char *name, size_t len, uint8_t *kind, uint8_t *host)
{
    static const struct {
        const char *word;
        uint8_t kind;
    } kinds[] = {{"HtoD", 1}, {"DtoH", 2}, {"HtoA", 3}, {"AtoH", 4}, {"AtoA", 5},
                 {"AtoD", 6}, {"DtoA", 7}, {"DtoD", 8}, {"HtoH", 9}, {"PtoP", 10}};
    const char *word = NULL;
    *kind = 0;
    *host = 0;
    for (size_t i = 0; i + 4 <= len && *kind == 0; i++)
        for (size_t j = 0; j < sizeof kinds / sizeof kinds[0]; j++)
            if (memcmp(name + i, kinds[j].word, 4) == 0) {
                *kind = kinds[j].kind;
                word = kinds[j].word;
                break;
            }
    /* the sides: "(<source> -> <destination>)" */
    const char *open = memchr(name, '(', len), *end = name + len;
    const char *arrow = NULL, *close = NULL;
    for (const char *p = open; p != NULL && p + 4 <= end && arrow == NULL; p++)
        if (memcmp(p, " -> ", 4) == 0)
            arrow = p;
    if (arrow != NULL)
        close = memchr(arrow, ')', (size_t)(end - arrow));
    if (word != NULL && close != NULL && (word[0] == 'H' || word[3] == 'H')) {
        *host = word[0] == 'H' ? memory_kind_of(open + 1, (size_t)(arrow - open - 1))
                               : memory_kind_of(arrow + 4, (size_t)(close - arrow - 4));
        return;
    }
    if (word == NULL && open != NULL && arrow == NULL) { /* "Memcpy (Managed)": no kind */
        const char *shut = memchr(open, ')', (size_t)(end - open));
        if (shut != NULL && (*host = memory_kind_of(open + 1, (size_t)(shut - open - 1))) != 0)
            return;
    }
    for (size_t i = 0; i + 6 <= len; i++) {
        if (i + 8 <= len && memcmp(name + i, "Pageable", 8) == 0) {
            *host = 1;
            return;
        }
        if (memcmp(name + i, "Pinned", 6) == 0)
            *host = 2;
    }
}

/* The figure a counter value stands for, from its series name and key
 * ("SM Active" / "value", "sm__cycles_active.avg.pct_of_peak..."); -1 when
 * none loopscope knows. */
static int metric_of(const ls_json_string *series, const ls_json_string *key)
{
    char text[256];
    size_t n = 0;
    const ls_json_string *parts[2] = {series, key};
    for (int p = 0; p < 2; p++) {
        if (parts[p] == NULL)
            continue;
        for (size_t i = 0; i < parts[p]->len && n + 2 < sizeof text; i++)
            text[n++] = (char)tolower((unsigned char)parts[p]->text[i]);
        text[n++] = ' ';
    }
    text[n] = '\0';
#define HAS(w) (strstr(text, (w)) != NULL)
    if (HAS("sm__cycles_active") || ((HAS("sm active") || HAS("sms active") || HAS("sm_active"))
                                     && !HAS("tensor")))
        return LS_M_SM_ACTIVE;
    if (HAS("dram__throughput") || (HAS("dram") && (HAS("throughput") || HAS("util")) &&
                                    !HAS("read") && !HAS("write")))
        return LS_M_DRAM_THROUGHPUT;
    if (HAS("gr__cycles_active") || HAS("gr active") || HAS("gr_active"))
        return LS_M_GR_ACTIVE;
    if (HAS("tensor") && HAS("active"))
        return LS_M_TENSOR_ACTIVE;
    if (HAS("warps_active") || HAS("warp occupancy") || HAS("warps in flight"))
        return LS_M_WARP_OCCUPANCY;
    /* rates in GB/s and the issue rate, as loopscope's export names them */
    if (HAS("gb/s") && (HAS("dram") || HAS("pcie")) && (HAS("read") || HAS("write")))
        return HAS("dram") ? (HAS("read") ? LS_M_DRAM_READ_GBPS : LS_M_DRAM_WRITE_GBPS)
                           : (HAS("read") ? LS_M_PCIE_READ_GBPS : LS_M_PCIE_WRITE_GBPS);
    if (HAS("sm issue") || HAS("sm__inst_executed.avg.per_cycle_active"))
        return LS_M_SM_ISSUE;
#undef HAS
    return -1;
}

/* A counter event's values; or, with `end`, the end of series `series_name`
 * (an instant of category counter_end: loopscope's export marks so where
 * sampling paused, as a counter otherwise holds its value). */
static int add_counter(ls_kineto *k, const ls_event *ev, const ls_json_string *series_name,
                       int end)
{
    ls_tbuild *b = &k->build;
    int64_t ts;
    if (!ev->has_ts || ls_json_number_scaled(&ev->ts, 3, &ts) != 0) {
        ls_tbuild_skip_times(b, LS_TB_COUNTER, LS_TB_TIME_NO_TS);
        return 0;
    }
    uint32_t device = 0;
    if (device_of(&ev->pid, &device) != 0)
        device = 0;
    /* One series per (pid, name): its times bound its samples. */
    char key[300];
    size_t len = 0;
    const char *name = series_name ? text_of(k, series_name, &len) : "";
    if (name == NULL)
        return -2;
    int n = snprintf(key, sizeof key, "\x01%u|%.*s", (unsigned)device, (int)(len > 200 ? 200 : len),
                     name);
    uint32_t series = ls_strtab_intern(&b->names, key, (size_t)n);
    if (series == LS_STRTAB_NONE)
        return -2;
    if (end)
        return ls_tbuild_point_end(b, ts, series, device, ev->pid.kind == ID_NUMBER) ? -2 : 0;
    for (int i = 0; i < ev->number_count; i++) {
        const ls_number_arg *a = &ev->numbers[i];
        int metric = metric_of(ev->has_name ? &ev->name : NULL, &a->key);
        k->counter_values++;
        if (metric < 0) {
            k->counter_unknown++;
            continue;
        }
        if (ls_tbuild_point(b, ts, series, device, metric, ls_json_number_double(&a->value),
                            ev->pid.kind == ID_NUMBER) != 0)
            return -2;
    }
    return 0;
}

/* 1 when text[0..len) (not NUL-terminated) holds `word`. */
static int has_word(const char *text, size_t len, const char *word)
{
    size_t n = strlen(word);
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(text + i, word, n) == 0)
            return 1;
    return 0;
}

/* A process named "GPU <n>..." (loopscope's export names its GPU processes
 * so): its numeric pid stands for device n.  0, or -2 when memory ran out. */
static int gpu_process(ls_kineto *k, const ls_event *ev)
{
    if (!ev->has_name || !ev->has_arg_name || ev->pid.kind != ID_NUMBER ||
        !key_is(&ev->name, "process_name") || ev->arg_name.escaped)
        return 0;
    const char *text = ev->arg_name.text;
    size_t len = ev->arg_name.len, i = 4;
    uint64_t pid, device = 0;
    if (len < 5 || memcmp(text, "GPU ", 4) != 0 || !isdigit((unsigned char)text[4]) ||
        ls_json_number_uint(&ev->pid.number, UINT32_MAX, &pid) != 0)
        return 0;
    for (; i < len && isdigit((unsigned char)text[i]) && device <= 0xFFFF; i++)
        device = device * 10 + (uint64_t)(text[i] - '0');
    if (device > 0xFFFF || (i < len && text[i] != ' '))
        return 0;
    return ls_tbuild_gpu_process(&k->build, (uint32_t)pid, (uint32_t)device) ? -2 : 0;
}

#define SKIP(cls, why)                     \
    do {                                   \
        ls_tbuild_skip(b, (cls), (why));   \
        return 0;                          \
    } while (0)
#define SKIP_TIMES(cls, why)                     \
    do {                                         \
        ls_tbuild_skip_times(b, (cls), (why));   \
        return 0;                                \
    } while (0)

/* Records of one parsed event: 0, or -2 when memory ran out. */
static int dispatch(ls_kineto *k, const ls_event *ev)
{
    ls_tbuild *b = &k->build;
    ls_tb_class cls = class_of_cat(ev);
    char ph = ev->has_ph && ev->ph.len == 1 ? ev->ph.text[0] : 0;
    if (ph == 'C') {
        ls_tbuild_seen(b, LS_TB_COUNTER);
        return add_counter(k, ev, ev->has_name ? &ev->name : NULL, 0);
    }
    if ((ph == 'i' || ph == 'I') && ev->has_cat && key_is(&ev->cat, "counter_end") &&
        ev->has_series) {
        ls_tbuild_seen(b, LS_TB_COUNTER);
        return add_counter(k, ev, &ev->series, 1);
    }
    if (ph == 'M') {
        ls_tbuild_seen(b, LS_TB_METADATA);
        return gpu_process(k, ev);
    }
    if (ph == 's' || ph == 'f' || ph == 't') {
        ls_tbuild_seen(b, LS_TB_FLOW);
        return 0;
    }
    if (cls == LS_TB_FLOW) {
        ls_tbuild_seen(b, LS_TB_FLOW);
        return 0;
    }
    ls_tbuild_seen(b, cls);
    if (cls == LS_TB_OTHER || cls == LS_TB_GPU_ANNOTATION)
        return 0;
    if (ph != 'X')
        SKIP(cls, ev->has_ph ? "ph is not \"X\" (a complete event)" : "no ph");
    int64_t ts, dur;
    if (!ev->has_ts || ls_json_number_scaled(&ev->ts, 3, &ts) != 0)
        SKIP_TIMES(cls, LS_TB_TIME_NO_TS);
    if (!ev->has_dur || ls_json_number_scaled(&ev->dur, 3, &dur) != 0)
        SKIP_TIMES(cls, LS_TB_TIME_NO_DUR);
    if (dur < 0)
        SKIP_TIMES(cls, LS_TB_TIME_NEGATIVE_DUR);
    int64_t end = ts + dur;
    size_t len = 0;
    const char *name = NULL;
    if (ev->has_name && (name = text_of(k, &ev->name, &len)) == NULL)
        return -2;
    if (len > LS_KINETO_MAX_NAME && (name = cut_name(k, name, &len)) == NULL)
        return -2;
    uint64_t v;
    switch (cls) {
    case LS_TB_KERNEL:
    case LS_TB_MEMCPY:
    case LS_TB_MEMSET:
    case LS_TB_GRAPH: {
        uint32_t device, stream = 0, corr = 0;
        ls_id dev_id = {ID_NUMBER, ev->device, {0}};
        if (ev->has_device ? device_of(&dev_id, &device) != 0 : device_of(&ev->pid, &device) != 0)
            SKIP(cls, "no device (args.device or a numeric pid)");
        if (ev->has_stream) {
            if (ls_json_number_uint(&ev->stream, UINT32_MAX, &v) != 0)
                SKIP(cls, "a bad args.stream");
            stream = (uint32_t)v;
        } else if (ev->tid.kind == ID_NUMBER &&
                   ls_json_number_uint(&ev->tid.number, UINT32_MAX, &v) == 0) {
            stream = (uint32_t)v;
        } else {
            SKIP(cls, "no stream (args.stream or a numeric tid)");
        }
        if (ev->has_correlation) {
            if (ls_json_number_uint(&ev->correlation, UINT32_MAX, &v) != 0)
                SKIP(cls, "a bad args.correlation");
            corr = (uint32_t)v;
        }
        uint64_t bytes = 0;
        if (ev->has_bytes && ls_json_number_uint(&ev->bytes, INT64_MAX, &bytes) != 0)
            bytes = 0;
        uint8_t copy_kind = 0, host = 0;
        if (cls == LS_TB_MEMCPY && name != NULL)
            copy_kind_of(name, len, &copy_kind, &host);
        int kind = cls == LS_TB_KERNEL ? LS_OP_KERNEL : cls == LS_TB_MEMCPY ? LS_OP_MEMCPY
                   : cls == LS_TB_GRAPH ? LS_OP_GRAPH : LS_OP_MEMSET;
        /* loopscope's export shows a short name and keeps the whole one */
        const ls_json_string *whole = ev->has_mangled ? &ev->mangled
                                    : ev->has_signature ? &ev->signature : NULL;
        if (cls == LS_TB_KERNEL && whole != NULL && (name = text_of(k, whole, &len)) == NULL)
            return -2;
        /* a kernel and a graph replay keep their names; copies are named by their kind */
        int named = cls == LS_TB_KERNEL || cls == LS_TB_GRAPH;
        return ls_tbuild_op(b, kind, ts, end, device, stream, corr, named ? name : NULL,
                            len, bytes, copy_kind, host,
                            cls == LS_TB_KERNEL ? &ev->geometry : NULL) ? -2 : 0;
    }
    case LS_TB_RUNTIME:
    case LS_TB_DRIVER: {
        /* Without a name the call has no known role, without a tid no
         * thread; it still launches the ops of its correlation id. */
        uint64_t thread = 0;
        uint32_t corr = 0;
        if (name == NULL) {
            name = "";
            len = 0;
        }
        if (thread_of(k, &ev->tid, &thread) != 0)
            thread = 0;
        int has_corr = ev->has_correlation &&
                       ls_json_number_uint(&ev->correlation, UINT32_MAX, &v) == 0;
        if (has_corr)
            corr = (uint32_t)v;
        uint64_t sync, site = LS_TB_NO_TAG, before = 0;
        int launch = ev->has_launch && ls_json_number_uint(&ev->launch, 1, &v) == 0 && v == 1;
        if (ev->has_sync && ls_json_number_uint(&ev->sync, UINT32_MAX - 1, &sync) == 0) {
            if (ev->has_site && ls_json_number_uint(&ev->site, UINT32_MAX - 1, &site) != 0)
                site = LS_TB_NO_TAG;
            if (ev->has_launches_before &&
                ls_json_number_uint(&ev->launches_before, INT64_MAX, &before) != 0)
                before = 0;
            return ls_tbuild_wait(b, cls == LS_TB_DRIVER, ts, end, thread, corr, has_corr, launch,
                                  name, len, (uint32_t)sync, (uint32_t)site, before) ? -2 : 0;
        }
        /* a recorded call outside every sync: launches_before without sync */
        if (ev->has_launches_before &&
            ls_json_number_uint(&ev->launches_before, INT64_MAX, &before) == 0) {
            if (!ev->has_call_site ||
                ls_json_number_uint(&ev->call_site, UINT32_MAX - 1, &site) != 0)
                site = LS_TB_NO_TAG;
            return ls_tbuild_call(b, cls == LS_TB_DRIVER, ts, end, thread, corr, has_corr, launch,
                                  name, len, (uint32_t)site, before) ? -2 : 0;
        }
        return ls_tbuild_api(b, cls == LS_TB_DRIVER, ts, end, thread, corr, has_corr, name, len)
                   ? -2 : 0;
    }
    case LS_TB_ANNOTATION:
    case LS_TB_PYTHON:
    case LS_TB_CPU_OP: {
        uint64_t thread;
        if (name == NULL)
            SKIP(cls, "no name");
        if (thread_of(k, &ev->tid, &thread) != 0)
            SKIP(cls, "no tid");
        int32_t step = -1;
        if (ev->has_step && ls_json_number_uint(&ev->step, INT32_MAX, &v) == 0)
            step = (int32_t)v;
        /* torch 1.8/1.9 wrote ProfilerStep#N under cat "Operator": a step all the same */
        int range = cls == LS_TB_ANNOTATION ||
                    (cls == LS_TB_CPU_OP && ci_equal(&ev->cat, "operator") &&
                     len > 13 && memcmp(name, "ProfilerStep#", 13) == 0);
        int rc = range ? ls_tbuild_range(b, ts, end, thread, name, len, step)
                                         : ls_tbuild_frame(b, ts, end, thread, name, len);
        return rc ? -2 : 0;
    }
    case LS_TB_SYNC: {
        uint32_t stream = 0, corr = 0, type = 0;
        if (ev->has_stream && ls_json_number_uint(&ev->stream, UINT32_MAX, &v) == 0)
            stream = (uint32_t)v;
        if (ev->has_correlation && ls_json_number_uint(&ev->correlation, UINT32_MAX, &v) == 0)
            corr = (uint32_t)v;
        if (name != NULL) { /* CUpti_ActivitySynchronizationType */
            type = has_word(name, len, "Wait") ? 2 : has_word(name, len, "Event") ? 1
                 : has_word(name, len, "Stream") ? 3 : has_word(name, len, "Context") ? 4 : 0;
        }
        return ls_tbuild_sync(b, ts, end, stream, corr, type) ? -2 : 0;
    }
    default:
        return 0;
    }
}

/* ---- the state machine ----------------------------------------------------- */

static int keep_member(ls_kineto *k, const ls_json_string *key, const char *value, size_t n)
{
    if (n > MAX_KEPT_MEMBER) {
        k->members_dropped++;
        return 0;
    }
    size_t need = k->raw_len + key->len + n + 2;
    if (need > k->raw_cap) {
        size_t cap = k->raw_cap ? k->raw_cap : 4096;
        while (cap < need)
            cap *= 2;
        char *bigger = realloc(k->raw, cap);
        if (bigger == NULL)
            return -2;
        k->raw = bigger;
        k->raw_cap = cap;
    }
    if (k->member_count == k->member_cap) {
        size_t cap = k->member_cap ? k->member_cap * 2 : 16;
        ls_kineto_member *bigger = realloc(k->members, cap * sizeof *bigger);
        if (bigger == NULL)
            return -2;
        k->members = bigger;
        k->member_cap = cap;
    }
    ls_kineto_member *m = &k->members[k->member_count++];
    m->key_at = k->raw_len;
    m->key_len = ls_json_unescape(key, k->raw + k->raw_len, key->len + 1);
    k->raw_len += m->key_len + 1;
    m->value_at = k->raw_len;
    m->value_len = n;
    memcpy(k->raw + k->raw_len, value, n);
    k->raw_len += n + 1;
    k->raw[k->raw_len - 1] = '\0';
    return 0;
}

static int read_event(ls_kineto *k, ls_json_cursor *c)
{
    int rc = ls_json_ws(c);
    if (rc != LS_JSON_OK)
        return rc;
    if (*c->p != '{') {
        rc = ls_json_skip_value(c, 2);
        if (rc == LS_JSON_OK) {
            k->events++;
            ls_tbuild_seen(&k->build, LS_TB_OTHER);
            ls_tbuild_skip(&k->build, LS_TB_OTHER, "an event that is not an object");
        }
        return rc;
    }
    ls_event ev;
    memset(&ev, 0, sizeof ev);
    if ((rc = read_object(c, &ev, event_member)) != LS_JSON_OK)
        return rc;
    k->events++;
    return dispatch(k, &ev) == 0 ? LS_JSON_OK : -2;
}

/* One unit from c->p: OK, MORE, BAD, or -2 (memory). */
static int step(ls_kineto *k, ls_json_cursor *c)
{
    int rc = ls_json_ws(c);
    if (rc != LS_JSON_OK)
        return rc;
    switch (k->state) {
    case S_START:
        if ((size_t)(c->end - c->p) >= 3 && memcmp(c->p, "\xEF\xBB\xBF", 3) == 0 && k->consumed == 0) {
            c->p += 3; /* a UTF-8 byte order mark */
            return LS_JSON_OK;
        }
        if (*c->p == '{') {
            c->p++;
            k->state = S_MEMBER_FIRST;
        } else if (*c->p == '[') {
            c->p++;
            k->bare = 1;
            k->state = S_EVENT_FIRST;
        } else {
            c->error = "not a JSON object or list";
            return LS_JSON_BAD;
        }
        return LS_JSON_OK;
    case S_MEMBER_FIRST:
    case S_MEMBER: {
        if (k->state == S_MEMBER_FIRST && *c->p == '}') {
            c->p++;
            k->state = S_END;
            return LS_JSON_OK;
        }
        if (*c->p != '"') {
            c->error = "an object key that is not a string";
            return LS_JSON_BAD;
        }
        ls_json_string key;
        if ((rc = ls_json_read_string(c, &key)) != LS_JSON_OK || (rc = ls_json_ws(c)) != LS_JSON_OK)
            return rc;
        if (*c->p != ':') {
            c->error = "a missing ':' after an object key";
            return LS_JSON_BAD;
        }
        c->p++;
        if ((rc = ls_json_ws(c)) != LS_JSON_OK)
            return rc;
        if (key_is(&key, "traceEvents") && *c->p == '[') {
            c->p++;
            k->saw_events = 1;
            k->state = S_EVENT_FIRST;
            return LS_JSON_OK;
        }
        const char *value = c->p;
        if ((rc = ls_json_skip_value(c, 1)) != LS_JSON_OK)
            return rc;
        if ((rc = keep_member(k, &key, value, (size_t)(c->p - value))) != 0)
            return rc;
        k->state = S_AFTER_MEMBER;
        return LS_JSON_OK;
    }
    case S_AFTER_MEMBER:
        if (*c->p == ',') {
            c->p++;
            k->state = S_MEMBER;
        } else if (*c->p == '}') {
            c->p++;
            k->state = S_END;
        } else {
            c->error = "a missing ',' or '}' between the top-level members";
            return LS_JSON_BAD;
        }
        return LS_JSON_OK;
    case S_EVENT_FIRST:
        if (*c->p == ']') {
            c->p++;
            k->state = k->bare ? S_END : S_AFTER_MEMBER;
            return LS_JSON_OK;
        }
        /* fall through */
    case S_EVENT_NEXT:
        if ((rc = read_event(k, c)) != LS_JSON_OK)
            return rc;
        k->state = S_EVENT_AFTER;
        return LS_JSON_OK;
    case S_EVENT_AFTER:
        if (*c->p == ',') {
            c->p++;
            k->state = S_EVENT_NEXT;
        } else if (*c->p == ']') {
            c->p++;
            k->state = k->bare ? S_END : S_AFTER_MEMBER;
        } else {
            c->error = "a missing ',' or ']' between events";
            return LS_JSON_BAD;
        }
        return LS_JSON_OK;
    default: /* S_END */
        c->error = "extra data after the JSON value";
        return LS_JSON_BAD;
    }
}

static int append(ls_kineto *k, const char *data, size_t n)
{
    if (k->pos > 0) { /* keep only the unread tail */
        memmove(k->buf, k->buf + k->pos, k->len - k->pos);
        k->len -= k->pos;
        k->consumed += k->pos;
        if (k->retry_at >= k->pos)
            k->retry_at -= k->pos;
        k->pos = 0;
    }
    if (k->len + n > k->cap) {
        size_t cap = k->cap ? k->cap : (1u << 20);
        while (cap < k->len + n)
            cap *= 2;
        char *bigger = realloc(k->buf, cap);
        if (bigger == NULL)
            return -2;
        k->buf = bigger;
        k->cap = cap;
    }
    if (n > 0)
        memcpy(k->buf + k->len, data, n);
    k->len += n;
    return 0;
}

/* 1, with the error, when the unfinished unit at k->pos holds `pending`
 * bytes, more than LS_KINETO_MAX_UNIT (checked at every feed that leaves
 * a unit unfinished with more than the cap held). */
static int unit_too_long(ls_kineto *k, size_t pending)
{
    if (pending <= LS_KINETO_MAX_UNIT)
        return 0;
    snprintf(k->error, sizeof k->error,
             "the event or top-level member at byte %llu is longer than the cap of %u bytes "
             "(%u MiB) for one: refused", (unsigned long long)(k->consumed + k->pos),
             LS_KINETO_MAX_UNIT, LS_KINETO_MAX_UNIT >> 20);
    return 1;
}

int ls_kineto_feed(ls_kineto *k, const char *data, size_t n, int final)
{
    if (append(k, data, n) != 0)
        return -2;
    if (!final && k->len < k->retry_at && k->len - k->pos <= LS_KINETO_MAX_UNIT)
        return 0; /* past the cap: parse now, so a unit over it is refused at once */
    ls_json_cursor c = {k->buf + k->pos, k->buf + k->len, NULL};
    for (;;) {
        (void)ls_json_ws(&c); /* white space between units is never kept */
        k->pos = (size_t)(c.p - k->buf);
        const char *unit = c.p;
        int rc = step(k, &c);
        if (rc == LS_JSON_OK) {
            k->pos = (size_t)(c.p - k->buf);
            continue;
        }
        if (rc == -2 || k->build.failed)
            return -2;
        if (rc == LS_JSON_MORE) {
            if (final) {
                if (k->state == S_END)
                    return 0; /* only whitespace after the value */
                snprintf(k->error, sizeof k->error,
                         "the file ends in the middle of the JSON (at byte %llu): truncated?",
                         (unsigned long long)(k->consumed + k->len));
                return -1;
            }
            size_t pending = (size_t)(k->buf + k->len - unit);
            if (unit_too_long(k, pending))
                return -1;
            k->retry_at = k->len + (pending > (1u << 20) ? pending : 0);
            return 0;
        }
        snprintf(k->error, sizeof k->error, "not valid JSON at byte %llu: %s",
                 (unsigned long long)(k->consumed + (size_t)(c.p - k->buf)),
                 c.error ? c.error : "unexpected text");
        return -1;
    }
}
