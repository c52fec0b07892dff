/* ls_json: the JSON lexing a trace reader needs, over one bounded buffer:
 * whitespace, strings (located, unescaped on demand), numbers (kept as an
 * exact decimal, so a microsecond time with nanosecond digits converts to
 * integer nanoseconds without float64 rounding) and skipping any value.
 *
 * Every function reads only inside [cur->p, cur->end).  They return
 * LS_JSON_OK with cur->p past what they read; LS_JSON_MORE when the buffer
 * ended first (cur->p is then undefined: the caller rewinds and retries
 * with more bytes); LS_JSON_BAD when the text is not JSON, with cur->p at
 * the offending byte and cur->error naming the problem.  Pure C, no
 * allocation, no Python. */
#ifndef LS_JSON_H
#define LS_JSON_H

#include <stddef.h>
#include <stdint.h>

enum { LS_JSON_OK = 0, LS_JSON_MORE = 1, LS_JSON_BAD = 2 };

#define LS_JSON_MAX_DEPTH 512

typedef struct {
    const char *p, *end;
    const char *error; /* static text, set with LS_JSON_BAD */
} ls_json_cursor;

/* A string token: its raw bytes between the quotes. */
typedef struct {
    const char *text;
    size_t len;
    int escaped; /* contains backslash escapes: unescape before use */
} ls_json_string;

/* A number token as an exact decimal: (-1)^neg * digits * 10^exp10.
 * Digits past the 19th are dropped (exp10 keeps the scale). */
typedef struct {
    uint64_t digits;
    int32_t exp10;
    uint8_t neg;
    uint8_t special; /* NaN, Infinity or -Infinity (accepted as Python's json does) */
} ls_json_number;

/* Skips spaces, tabs, CR and LF; OK, or MORE at the end of the buffer.
 * Inline: it runs between every two tokens. */
static inline int ls_json_ws(ls_json_cursor *c)
{
    const char *p = c->p, *end = c->end;
    while (p < end && (unsigned char)*p <= ' ' &&
           (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    c->p = p;
    return p < end ? LS_JSON_OK : LS_JSON_MORE;
}

/* Reads a string whose opening quote is at cur->p. */
int ls_json_read_string(ls_json_cursor *c, ls_json_string *out);

/* Reads a number (or NaN/Infinity) at cur->p.  A number that touches the
 * end of the buffer is MORE: more digits may follow. */
int ls_json_read_number(ls_json_cursor *c, ls_json_number *out);

/* Skips one value of any kind at cur->p (after whitespace), validating it. */
int ls_json_skip_value(ls_json_cursor *c, int depth);

/* Copies the unescaped text of `s` into out[0..cap), NUL-terminated and cut
 * at cap - 1 bytes; returns its length.  \u escapes become UTF-8 (a lone
 * surrogate becomes U+FFFD). */
size_t ls_json_unescape(const ls_json_string *s, char *out, size_t cap);

/* The number times 10^scale as an integer, rounded half away from zero:
 * 0, or -1 when it is special or out of [-2^62, 2^62].  ns from us: scale 3. */
int ls_json_number_scaled(const ls_json_number *n, int scale, int64_t *out);

/* The number as an exact integer in [0, limit]: 0, or -1 when it is not
 * one (fractional, negative, special or above limit). */
int ls_json_number_uint(const ls_json_number *n, uint64_t limit, uint64_t *out);

/* The number as a double (NaN for NaN). */
double ls_json_number_double(const ls_json_number *n);

#endif
