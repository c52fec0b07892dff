/* ls_json: see ls_json.h.  A hand-written lexer for the few JSON shapes a
 * trace holds; strict where Python's json is strict (control characters
 * and bad escapes in strings, number grammar), lenient where it is lenient
 * (NaN and Infinity). */
#include "ls_json.h"

#include <math.h>
#include <string.h>

#define BAD(c, msg) ((c)->error = (msg), LS_JSON_BAD)
#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

static int hex_value(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

int ls_json_read_string(ls_json_cursor *c, ls_json_string *out)
{
    const char *p = c->p + 1; /* past the quote */
    const char *start = p;
    int escaped = 0;
    for (;;) {
        /* Fast scan to the next byte that needs a look: eight at a time
         * while no byte of the word is a quote, a backslash or a control
         * character (the classic "has zero byte" bit trick). */
        while (c->end - p >= 8) {
            uint64_t w;
            memcpy(&w, p, 8);
            uint64_t q = w ^ (ONES * '"'), b = w ^ (ONES * '\\');
            uint64_t hit = ((q - ONES) & ~q) | ((b - ONES) & ~b) | ((w - ONES * 0x20) & ~w);
            if ((hit & HIGHS) != 0)
                break;
            p += 8;
        }
        while (p < c->end && *p != '"' && *p != '\\' && (unsigned char)*p >= 0x20)
            p++;
        if (p >= c->end)
            return LS_JSON_MORE;
        if (*p == '"')
            break;
        if (*p != '\\') {
            c->p = p;
            return BAD(c, "a control character inside a string");
        }
        escaped = 1;
        if (p + 1 >= c->end)
            return LS_JSON_MORE;
        switch (p[1]) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            p += 2;
            break;
        case 'u':
            if (p + 6 > c->end)
                return LS_JSON_MORE;
            for (int i = 2; i < 6; i++)
                if (hex_value(p[i]) < 0) {
                    c->p = p;
                    return BAD(c, "a bad \\u escape inside a string");
                }
            p += 6;
            break;
        default:
            c->p = p;
            return BAD(c, "a bad escape inside a string");
        }
    }
    out->text = start;
    out->len = (size_t)(p - start);
    out->escaped = escaped;
    c->p = p + 1;
    return LS_JSON_OK;
}

/* Matches `word` at c->p: OK (advanced), MORE when the buffer ends inside a
 * prefix of it, BAD otherwise. */
static int literal(ls_json_cursor *c, const char *word)
{
    size_t n = strlen(word);
    size_t have = (size_t)(c->end - c->p);
    if (have < n) {
        if (memcmp(c->p, word, have) == 0)
            return LS_JSON_MORE;
        return BAD(c, "an unknown word (not true, false, null or a number)");
    }
    if (memcmp(c->p, word, n) != 0)
        return BAD(c, "an unknown word (not true, false, null or a number)");
    c->p += n;
    return LS_JSON_OK;
}

static void add_digit(ls_json_number *n, int d, int *dropped)
{
    if (n->digits <= (UINT64_MAX - 9) / 10 && *dropped == 0)
        n->digits = n->digits * 10 + (uint64_t)d;
    else
        (*dropped)++;
}

int ls_json_read_number(ls_json_cursor *c, ls_json_number *out)
{
    memset(out, 0, sizeof *out);
    const char *p = c->p;
    if (*p == 'N' || *p == 'I') {
        int rc = literal(c, *p == 'N' ? "NaN" : "Infinity");
        out->special = 1;
        return rc;
    }
    if (*p == '-') {
        out->neg = 1;
        if (++p >= c->end)
            return LS_JSON_MORE;
        if (*p == 'I') {
            c->p = p;
            out->special = 1;
            return literal(c, "Infinity");
        }
    }
    int dropped = 0; /* integer digits past the 19th: each one scales by 10 */
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < c->end && *p >= '0' && *p <= '9')
            add_digit(out, *p++ - '0', &dropped);
    } else {
        c->p = p;
        return BAD(c, "a malformed number");
    }
    int32_t exp10 = dropped;
    if (p < c->end && *p == '.') {
        p++;
        const char *first = p;
        while (p < c->end && *p >= '0' && *p <= '9') {
            int before = dropped;
            add_digit(out, *p++ - '0', &dropped);
            if (dropped == before)
                exp10--;
        }
        if (p == first) {
            if (p >= c->end)
                return LS_JSON_MORE;
            c->p = p;
            return BAD(c, "a malformed number (no digit after the point)");
        }
    }
    if (p < c->end && (*p == 'e' || *p == 'E')) {
        p++;
        int eneg = 0;
        if (p < c->end && (*p == '+' || *p == '-'))
            eneg = *p++ == '-';
        const char *first = p;
        int32_t e = 0;
        while (p < c->end && *p >= '0' && *p <= '9') {
            if (e < 100000)
                e = e * 10 + (*p - '0');
            p++;
        }
        if (p == first) {
            if (p >= c->end)
                return LS_JSON_MORE;
            c->p = p;
            return BAD(c, "a malformed number (no digit in the exponent)");
        }
        exp10 += eneg ? -e : e;
    }
    if (p >= c->end)
        return LS_JSON_MORE; /* more digits may follow in the next chunk */
    out->exp10 = exp10;
    c->p = p;
    return LS_JSON_OK;
}

static int skip_container(ls_json_cursor *c, int depth, char close)
{
    c->p++; /* the opening bracket */
    int rc = ls_json_ws(c);
    if (rc != LS_JSON_OK)
        return rc;
    if (*c->p == close) {
        c->p++;
        return LS_JSON_OK;
    }
    for (;;) {
        if (close == '}') {
            if (*c->p != '"')
                return BAD(c, "an object key that is not a string");
            ls_json_string key;
            if ((rc = ls_json_read_string(c, &key)) != LS_JSON_OK ||
                (rc = ls_json_ws(c)) != LS_JSON_OK)
                return rc;
            if (*c->p != ':')
                return BAD(c, "a missing ':' after an object key");
            c->p++;
        }
        if ((rc = ls_json_skip_value(c, depth + 1)) != LS_JSON_OK ||
            (rc = ls_json_ws(c)) != LS_JSON_OK)
            return rc;
        if (*c->p == close) {
            c->p++;
            return LS_JSON_OK;
        }
        if (*c->p != ',')
            return BAD(c, close == '}' ? "a missing ',' or '}' in an object"
                                       : "a missing ',' or ']' in a list");
        c->p++;
        if ((rc = ls_json_ws(c)) != LS_JSON_OK)
            return rc;
    }
}

int ls_json_skip_value(ls_json_cursor *c, int depth)
{
    int rc = ls_json_ws(c);
    if (rc != LS_JSON_OK)
        return rc;
    if (depth > LS_JSON_MAX_DEPTH)
        return BAD(c, "values nested more than 512 levels deep");
    ls_json_string s;
    ls_json_number n;
    switch (*c->p) {
    case '{':
        return skip_container(c, depth, '}');
    case '[':
        return skip_container(c, depth, ']');
    case '"':
        return ls_json_read_string(c, &s);
    case 't':
        return literal(c, "true");
    case 'f':
        return literal(c, "false");
    case 'n':
        return literal(c, "null");
    default:
        if (*c->p == '-' || (*c->p >= '0' && *c->p <= '9') || *c->p == 'N' || *c->p == 'I')
            return ls_json_read_number(c, &n);
        return BAD(c, "a character that starts no JSON value");
    }
}

static size_t put_utf8(char *out, size_t at, size_t cap, uint32_t cp)
{
    char tmp[4];
    size_t n;
    if (cp < 0x80) {
        tmp[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        tmp[0] = (char)(0xC0 | (cp >> 6));
        tmp[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        tmp[0] = (char)(0xE0 | (cp >> 12));
        tmp[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        tmp[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        tmp[0] = (char)(0xF0 | (cp >> 18));
        tmp[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        tmp[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        tmp[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    if (at + n >= cap)
        return at;
    memcpy(out + at, tmp, n);
    return at + n;
}

static uint32_t hex4(const char *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v = v * 16 + (uint32_t)hex_value(p[i]);
    return v;
}

size_t ls_json_unescape(const ls_json_string *s, char *out, size_t cap)
{
    size_t at = 0;
    const char *p = s->text, *end = s->text + s->len;
    if (cap == 0)
        return 0;
    while (p < end && at + 1 < cap) {
        if (*p != '\\') {
            out[at++] = *p++;
            continue;
        }
        char e = p[1]; /* ls_json_read_string checked every escape */
        if (e == 'u') {
            uint32_t cp = hex4(p + 2);
            p += 6;
            if (cp >= 0xD800 && cp < 0xDC00 && p + 6 <= end && p[0] == '\\' && p[1] == 'u') {
                uint32_t low = hex4(p + 2);
                if (low >= 0xDC00 && low < 0xE000) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                    p += 6;
                }
            }
            if (cp >= 0xD800 && cp < 0xE000)
                cp = 0xFFFD;
            at = put_utf8(out, at, cap, cp);
            continue;
        }
        static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
        const char *hit = strchr(from, e);
        out[at++] = hit ? to[hit - from] : e;
        p += 2;
    }
    out[at] = '\0';
    return at;
}

static const uint64_t pow10_table[20] = {
    1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull,
    100000000ull, 1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull,
    10000000000000ull, 100000000000000ull, 1000000000000000ull, 10000000000000000ull,
    100000000000000000ull, 1000000000000000000ull, 10000000000000000000ull,
};

#define LIMIT_62 (1ull << 62)

int ls_json_number_scaled(const ls_json_number *n, int scale, int64_t *out)
{
    if (n->special)
        return -1;
    int64_t k = (int64_t)n->exp10 + scale;
    uint64_t v = n->digits;
    if (v == 0) {
        *out = 0;
        return 0;
    }
    if (k >= 0) {
        if (k > 19)
            return -1;
        uint64_t m = pow10_table[k];
        if (v > LIMIT_62 / m)
            return -1;
        v *= m;
    } else {
        if (k < -19) {
            v = 0;
        } else {
            uint64_t d = pow10_table[-k];
            uint64_t q = v / d, r = v % d;
            v = q + (r >= d - r ? 1 : 0); /* half away from zero */
        }
    }
    if (v > LIMIT_62)
        return -1;
    *out = n->neg ? -(int64_t)v : (int64_t)v;
    return 0;
}

int ls_json_number_uint(const ls_json_number *n, uint64_t limit, uint64_t *out)
{
    if (n->special || (n->neg && n->digits != 0))
        return -1;
    uint64_t v = n->digits;
    if (n->exp10 < 0) {
        if (n->exp10 < -19)
            return v == 0 ? (*out = 0, 0) : -1;
        uint64_t d = pow10_table[-n->exp10];
        if (v % d != 0)
            return -1;
        v /= d;
    } else if (n->exp10 > 0 && v != 0) {
        if (n->exp10 > 19 || v > UINT64_MAX / pow10_table[n->exp10])
            return -1;
        v *= pow10_table[n->exp10];
    }
    if (v > limit)
        return -1;
    *out = v;
    return 0;
}

double ls_json_number_double(const ls_json_number *n)
{
    if (n->special)
        return NAN;
    double v = (double)n->digits * pow(10.0, (double)n->exp10);
    return n->neg ? -v : v;
}
