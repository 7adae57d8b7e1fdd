/*
 * toml.c - see toml.h. A single-pass recursive-descent reader.
 *
 * Owns: the lexer and parser, the document arena and the (parent, key) hash
 * used while parsing to find duplicates in O(1).
 * Must not: read past parser.end, recurse deeper than OL_TOML_MAX_DEPTH + 1
 * value levels, or allocate outside the arena except the parse-time scratch
 * buffer and hash index (both freed before ol_toml_parse returns).
 *
 * Design notes
 *   - The whole input is checked for valid UTF-8 first, so later code only
 *     has to look at ASCII bytes and may copy the rest through unchanged.
 *   - Strings and quoted keys are decoded into one scratch buffer of len + 1
 *     bytes (a decoded string is never longer than its source text), then
 *     copied into the arena at their exact size.
 *   - Table provenance is kept in node flags to enforce TOML's rules on
 *     redefinition:
 *       F_DEFINED   made by a [header] (or the root)
 *       F_IMPLICIT  made as an intermediate of a header path; a later
 *                   [header] may define it once
 *       F_DOTTED    made by a dotted key; only dotted keys may add to it,
 *                   only [headers] of sub-tables may pass through it
 *       F_INLINE    an inline table: sealed once written
 *       F_AOT       an array made by [[header]]; a static array is sealed
 *     Dotted keys extend only F_DOTTED tables. This is the strict reading
 *     of TOML 1.0 ("any such table must have all its key/value pairs
 *     defined under the current [table] header"): a table created
 *     implicitly by a header cannot later be extended with dotted keys.
 *   - Node lines are tracked incrementally (every newline passes through
 *     newline() or the string decoder); error positions are recomputed
 *     from the start of the input, which only happens once per parse.
 */
#include "base/toml.h"

#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    F_DEFINED = 1,
    F_IMPLICIT = 2,
    F_DOTTED = 4,
    F_INLINE = 8,
    F_AOT = 16,
};

struct ol_toml {
    uint8_t type;              /* enum ol_toml_type */
    uint8_t flags;             /* F_* above; tables and arrays only */
    uint16_t depth;            /* root = 0 */
    uint32_t line, col;
    const char *key;           /* NUL-terminated; NULL for root / elements */
    struct ol_toml *parent, *next;
    union {
        struct { struct ol_toml *head, *tail; size_t n; } c;
        struct { const char *s; size_t len; } s;
        int64_t i;
        double f;
        bool b;
    } u;
};

#define OL_TOML_CHUNK (64u << 10)

struct ol_toml_chunk {
    struct ol_toml_chunk *next;
    size_t used, cap;
    max_align_t data[];
};

struct ol_toml_doc {
    struct ol_toml_chunk *chunks;   /* head is the one being filled */
    size_t mem;                     /* bytes of chunk payload allocated */
    struct ol_toml root;
};

struct kpart {
    const char *s;             /* arena copy, NUL-terminated */
    size_t len;
    const unsigned char *at;   /* where the part starts in the input */
};

struct parser {
    const char *name;
    const unsigned char *base, *p, *end;
    const unsigned char *line_start, *bom_end;
    uint32_t line;
    char *err;
    size_t errlen;
    int failed;
    struct ol_toml_doc *doc;
    struct ol_toml *cur;           /* table receiving key = value lines */
    struct ol_toml **ht;           /* open addressing, (parent, key) */
    size_t hcap, hn;
    char *scratch;                 /* len + 1 bytes */
    char fbuf[32];                 /* found() text */
};

/* ------------------------------------------------------------------ */
/* errors                                                              */

__attribute__((format(printf, 3, 4)))
static int fail(struct parser *P, const unsigned char *at, const char *fmt, ...)
{
    if (P->failed)
        return -1;
    P->failed = 1;
    if (!P->errlen)
        return -1;
    if (at > P->end)
        at = P->end;
    unsigned line = 1;
    const unsigned char *ls = P->bom_end;
    for (const unsigned char *q = P->base; q < at; q++)
        if (*q == '\n') {
            line++;
            ls = q + 1;
        }
    size_t col = at >= ls ? (size_t)(at - ls) + 1 : 1;
    int n = snprintf(P->err, P->errlen, "%s:%u:%zu: ", P->name, line, col);
    if (n >= 0 && (size_t)n < P->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(P->err + n, P->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* A short description of the byte at q for "found ..." in messages. */
static const char *found(struct parser *P, const unsigned char *q)
{
    if (q >= P->end)
        return "end of input";
    unsigned c = *q;
    if (c == '\n' || c == '\r')
        return "end of line";
    if (c == ' ')
        return "a space";
    if (c == '\t')
        return "a tab";
    if (c > 0x20 && c < 0x7f)
        snprintf(P->fbuf, sizeof P->fbuf, "'%c'", (char)c);
    else
        snprintf(P->fbuf, sizeof P->fbuf, "byte 0x%02x", c);
    return P->fbuf;
}

static int is_bare(int c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
           (c >= '0' && c <= '9') || c == '_' || c == '-';
}

/* Appends key k to buf at *pos, quoted when it is not a bare key. */
static void put_key(char *buf, size_t len, size_t *pos, const char *k)
{
    int bare = k[0] != 0;
    for (const char *q = k; *q; q++)
        if (!is_bare((unsigned char)*q))
            bare = 0;
    char tmp[8];
    const char *q = k;
#define PUT(ch) do { if (*pos + 1 < len) buf[(*pos)++] = (ch); } while (0)
    if (!bare)
        PUT('"');
    for (; *q; q++) {
        unsigned char c = (unsigned char)*q;
        if (bare || (c >= 0x20 && c != 0x7f && c != '"' && c != '\\')) {
            PUT((char)c);
        } else {
            if (c == '"' || c == '\\')
                snprintf(tmp, sizeof tmp, "\\%c", c);
            else
                snprintf(tmp, sizeof tmp, "\\u%04x", c);
            for (char *t = tmp; *t; t++)
                PUT(*t);
        }
    }
    if (!bare)
        PUT('"');
#undef PUT
    if (len)
        buf[*pos < len ? *pos : len - 1] = 0;
}

/*
 * The dotted path from the root to v in TOML key syntax (array levels are
 * skipped). With `quoted`, a path of bare keys is wrapped in double quotes
 * for messages ("a.b"); one with quoted parts is shown as is (x."a b").
 */
static const char *node_path(const struct ol_toml *v, char *buf, size_t len,
                             int quoted)
{
    const struct ol_toml *chain[OL_TOML_MAX_DEPTH + 2];
    int n = 0;
    for (; v && n < (int)(sizeof chain / sizeof chain[0]); v = v->parent)
        if (v->key)
            chain[n++] = v;
    size_t pos = 0;
    buf[0] = 0;
    for (int i = n - 1; i >= 0; i--) {
        if (i != n - 1 && pos + 1 < len)
            buf[pos++] = '.';
        put_key(buf, len, &pos, chain[i]->key);
    }
    if (quoted && !strchr(buf, '"') && pos + 2 < len) {
        memmove(buf + 1, buf, pos);
        buf[0] = '"';
        buf[pos + 1] = '"';
        buf[pos + 2] = 0;
    }
    return buf;
}

static const char *what_is(const struct ol_toml *v)
{
    switch (v->type) {
    case OL_TOML_TABLE:
        if (v->flags & F_INLINE)
            return "an inline table";
        if (v->flags & F_DOTTED)
            return "a table made by dotted keys";
        return "a table";
    case OL_TOML_ARRAY:
        return (v->flags & F_AOT) ? "an array of tables" : "an array";
    case OL_TOML_STRING: return "a string";
    case OL_TOML_INT: return "an integer";
    case OL_TOML_FLOAT: return "a float";
    default: return "a boolean";
    }
}

/* ------------------------------------------------------------------ */
/* memory                                                              */

static void *arena(struct parser *P, size_t n)
{
    struct ol_toml_doc *d = P->doc;
    n = (n + 15) & ~(size_t)15;
    struct ol_toml_chunk *c = d->chunks;
    if (c && c->cap - c->used >= n) {
        void *r = (char *)c->data + c->used;
        c->used += n;
        return r;
    }
    size_t cap = n > OL_TOML_CHUNK / 2 ? n : OL_TOML_CHUNK;
    if (d->mem + cap > OL_TOML_MAX_MEM) {
        fail(P, P->p, "document needs more than %u MiB of memory",
             OL_TOML_MAX_MEM >> 20);
        return NULL;
    }
    struct ol_toml_chunk *nc = malloc(sizeof *nc + cap);
    if (!nc) {
        fail(P, P->p, "out of memory");
        return NULL;
    }
    d->mem += cap;
    nc->cap = cap;
    nc->used = n;
    if (cap == n && c) {         /* dedicated chunk: keep filling the head */
        nc->next = c->next;
        c->next = nc;
    } else {
        nc->next = c;
        d->chunks = nc;
    }
    return nc->data;
}

static char *arena_dup(struct parser *P, const char *s, size_t n)
{
    char *r = arena(P, n + 1);
    if (r) {
        memcpy(r, s, n);
        r[n] = 0;
    }
    return r;
}

static uint64_t hkey(const struct ol_toml *parent, const char *k, size_t n)
{
    uint64_t h = 14695981039346656037ull ^
                 ((uint64_t)(uintptr_t)parent * 0x9E3779B97F4A7C15ull);
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)k[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 31);
}

static struct ol_toml *hfind(struct parser *P, const struct ol_toml *parent,
                             const char *k, size_t n)
{
    if (!P->hcap)
        return NULL;
    size_t m = P->hcap - 1;
    for (size_t i = hkey(parent, k, n) & m;; i = (i + 1) & m) {
        struct ol_toml *v = P->ht[i];
        if (!v)
            return NULL;
        if (v->parent == parent && memcmp(v->key, k, n) == 0 && v->key[n] == 0)
            return v;
    }
}

static int hput(struct parser *P, struct ol_toml *v)
{
    if ((P->hn + 1) * 2 > P->hcap) {
        size_t ncap = P->hcap ? P->hcap * 2 : 64;
        struct ol_toml **nt = calloc(ncap, sizeof *nt);
        if (!nt)
            return fail(P, P->p, "out of memory");
        for (size_t i = 0; i < P->hcap; i++) {
            struct ol_toml *e = P->ht[i];
            if (!e)
                continue;
            size_t j = hkey(e->parent, e->key, strlen(e->key)) & (ncap - 1);
            while (nt[j])
                j = (j + 1) & (ncap - 1);
            nt[j] = e;
        }
        free(P->ht);
        P->ht = nt;
        P->hcap = ncap;
    }
    size_t m = P->hcap - 1;
    size_t i = hkey(v->parent, v->key, strlen(v->key)) & m;
    while (P->ht[i])
        i = (i + 1) & m;
    P->ht[i] = v;
    P->hn++;
    return 0;
}

/*
 * A new child of `parent` (a table or array) starting at `at` on the
 * current line. `key` must already be an arena string (NULL for array
 * elements). Returns NULL after fail() when too deep or out of memory.
 */
static struct ol_toml *new_node(struct parser *P, struct ol_toml *parent,
                                enum ol_toml_type type, const char *key,
                                const unsigned char *at)
{
    if (parent->depth >= OL_TOML_MAX_DEPTH) {
        fail(P, at, "nesting deeper than %d levels", OL_TOML_MAX_DEPTH);
        return NULL;
    }
    struct ol_toml *v = arena(P, sizeof *v);
    if (!v)
        return NULL;
    memset(v, 0, sizeof *v);
    v->type = (uint8_t)type;
    v->depth = (uint16_t)(parent->depth + 1);
    v->line = P->line;
    v->col = at >= P->line_start ? (uint32_t)(at - P->line_start) + 1 : 1;
    v->key = key;
    v->parent = parent;
    if (key && hput(P, v))
        return NULL;
    if (parent->u.c.tail)
        parent->u.c.tail->next = v;
    else
        parent->u.c.head = v;
    parent->u.c.tail = v;
    parent->u.c.n++;
    return v;
}

/* ------------------------------------------------------------------ */
/* lexing helpers                                                      */

static void skip_ws(struct parser *P)
{
    while (P->p < P->end && (*P->p == ' ' || *P->p == '\t'))
        P->p++;
}

/* At '\n' or '\r': consumes one newline (LF or CRLF). */
static int newline(struct parser *P)
{
    if (*P->p == '\r') {
        if (P->end - P->p < 2 || P->p[1] != '\n')
            return fail(P, P->p, "carriage return not followed by a line feed");
        P->p++;
    }
    P->p++;
    P->line++;
    P->line_start = P->p;
    return 0;
}

/* At '#': consumes the comment up to (not including) the line end. */
static int comment(struct parser *P)
{
    const unsigned char *q = P->p + 1;
    while (q < P->end && *q != '\n' && *q != '\r') {
        if ((*q < 0x20 && *q != '\t') || *q == 0x7f)
            return fail(P, q, "control character 0x%02x in a comment", *q);
        q++;
    }
    P->p = q;
    return 0;
}

/* Skips spaces, tabs, comments and newlines (inside arrays). */
static int skip_wscn(struct parser *P)
{
    for (;;) {
        skip_ws(P);
        if (P->p >= P->end)
            return 0;
        if (*P->p == '#') {
            if (comment(P))
                return -1;
        } else if (*P->p == '\n' || *P->p == '\r') {
            if (newline(P))
                return -1;
        } else {
            return 0;
        }
    }
}

/* After an expression: optional spaces and comment, then a newline or EOF. */
static int end_of_line(struct parser *P, const char *what)
{
    skip_ws(P);
    if (P->p < P->end && *P->p == '#' && comment(P))
        return -1;
    if (P->p >= P->end)
        return 0;
    if (*P->p == '\n' || *P->p == '\r')
        return newline(P);
    return fail(P, P->p, "expected the end of the line after %s, found %s",
                what, found(P, P->p));
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static size_t utf8_put(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Offset of the first byte that does not start a valid UTF-8 sequence. */
static size_t utf8_invalid(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k;
        uint32_t cp, min;
        if ((c & 0xE0) == 0xC0) { k = 1; cp = c & 0x1F; min = 0x80; }
        else if ((c & 0xF0) == 0xE0) { k = 2; cp = c & 0x0F; min = 0x800; }
        else if ((c & 0xF8) == 0xF0) { k = 3; cp = c & 0x07; min = 0x10000; }
        else return i;
        if (n - i <= k)
            return i;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80)
                return i;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return i;
        i += k + 1;
    }
    return n;
}

/* ------------------------------------------------------------------ */
/* strings                                                             */

/*
 * At an opening quote. Decodes a basic or literal string (multi-line too
 * when allow_multi) into P->scratch, NUL-terminated, length in *outlen.
 */
static int parse_string(struct parser *P, int allow_multi, size_t *outlen)
{
    const unsigned char *start = P->p, *end = P->end;
    const unsigned char q = *P->p;
    int multi = 0;
    char *o = P->scratch;
    size_t n = 0;

    if (allow_multi && end - P->p >= 3 && P->p[1] == q && P->p[2] == q) {
        multi = 1;
        P->p += 3;
        if (P->p < end && (*P->p == '\n' || *P->p == '\r') && newline(P))
            return -1;
    } else {
        P->p++;
    }
    for (;;) {
        if (P->p >= end)
            return fail(P, start, "unterminated string");
        unsigned char c = *P->p;
        if (c == q) {
            if (!multi) {
                P->p++;
                break;
            }
            size_t k = 0;
            while (P->p + k < end && P->p[k] == q)
                k++;
            if (k >= 3) {
                if (k > 5)
                    return fail(P, P->p, "too many quotes at the end of a "
                                "multi-line string");
                for (size_t j = 3; j < k; j++)
                    o[n++] = (char)q;
                P->p += k;
                break;
            }
            for (size_t j = 0; j < k; j++)
                o[n++] = (char)q;
            P->p += k;
            continue;
        }
        if (c == '\\' && q == '"') {
            const unsigned char *esc = P->p++;
            if (P->p >= end)
                return fail(P, start, "unterminated string");
            c = *P->p++;
            switch (c) {
            case 'b': o[n++] = '\b'; break;
            case 't': o[n++] = '\t'; break;
            case 'n': o[n++] = '\n'; break;
            case 'f': o[n++] = '\f'; break;
            case 'r': o[n++] = '\r'; break;
            case '"': o[n++] = '"'; break;
            case '\\': o[n++] = '\\'; break;
            case 'u':
            case 'U': {
                int nd = c == 'u' ? 4 : 8;
                uint32_t cp = 0;
                for (int i = 0; i < nd; i++) {
                    int h = P->p + i < end ? hexval(P->p[i]) : -1;
                    if (h < 0)
                        return fail(P, esc, "invalid \\%c escape: expected %d "
                                    "hex digits", c, nd);
                    cp = cp * 16 + (uint32_t)h;
                }
                P->p += nd;
                if (cp == 0)
                    return fail(P, esc, "the NUL character (\\%c0000) is not "
                                "supported in strings", c);
                if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
                    return fail(P, esc, "\\%c escape is not a Unicode scalar "
                                "value", c);
                n += utf8_put(o + n, cp);
                break;
            }
            case ' ':
            case '\t':
            case '\n':
            case '\r':
                if (!multi)
                    return fail(P, esc, "invalid escape '\\' followed by %s",
                                found(P, P->p - 1));
                /* line-ending backslash: trim through the next non-space */
                P->p--;
                skip_ws(P);
                if (P->p >= end)
                    return fail(P, start, "unterminated string");
                if (*P->p != '\n' && *P->p != '\r')
                    return fail(P, esc, "a backslash followed by spaces must "
                                "be the last thing on its line");
                for (;;) {
                    skip_ws(P);
                    if (P->p < end && (*P->p == '\n' || *P->p == '\r')) {
                        if (newline(P))
                            return -1;
                        continue;
                    }
                    break;
                }
                break;
            default:
                return fail(P, esc, "invalid escape '\\' followed by %s",
                            found(P, P->p - 1));
            }
            continue;
        }
        if (c == '\n' || c == '\r') {
            if (!multi)
                return fail(P, P->p, "newline in a single-line string");
            if (newline(P))
                return -1;
            o[n++] = '\n';
            continue;
        }
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return fail(P, P->p, "control character 0x%02x in a string "
                        "(write it as an escape)", c);
        o[n++] = (char)c;
        P->p++;
    }
    o[n] = 0;
    *outlen = n;
    return 0;
}

/* ------------------------------------------------------------------ */
/* numbers                                                             */

static locale_t ol_toml_cloc;
static pthread_once_t ol_toml_cloc_once = PTHREAD_ONCE_INIT;

static void cloc_init(void)
{
    ol_toml_cloc = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}

static int is_dec(int c) { return c >= '0' && c <= '9'; }
static int is_hex(int c) { return hexval(c) >= 0; }
static int is_oct(int c) { return c >= '0' && c <= '7'; }
static int is_bin(int c) { return c == '0' || c == '1'; }

/*
 * Consumes digit *('_'? digit) at s[*pos]. Returns the number of digits
 * (0 when none, *pos unchanged) or -1 for a misplaced underscore.
 */
static int digit_run(const char *s, size_t len, size_t *pos,
                     int (*ok)(int), const char **why)
{
    size_t i = *pos;
    int nd = 0;
    if (i >= len || !ok((unsigned char)s[i]))
        return 0;
    for (;;) {
        while (i < len && ok((unsigned char)s[i])) {
            i++;
            nd++;
        }
        if (i < len && s[i] == '_') {
            if (i + 1 >= len || !ok((unsigned char)s[i + 1])) {
                *why = "an underscore must stand between two digits";
                return -1;
            }
            i++;
            continue;
        }
        break;
    }
    *pos = i;
    return nd;
}

int ol_toml_number(const char *s, size_t len, int64_t *iv, double *fv,
                   const char **why)
{
    const char *dummy;
    if (!why)
        why = &dummy;
    *why = "not a number";
    if (len == 0)
        return -1;
    size_t i = 0;
    int neg = 0, sign = 0;
    if (s[0] == '+' || s[0] == '-') {
        sign = 1;
        neg = s[0] == '-';
        i = 1;
    }
    size_t rest = len - i;
    if (rest == 3 && memcmp(s + i, "inf", 3) == 0) {
        *fv = neg ? -INFINITY : INFINITY;
        return OL_TOML_FLOAT;
    }
    if (rest == 3 && memcmp(s + i, "nan", 3) == 0) {
        *fv = copysign(NAN, neg ? -1.0 : 1.0);
        return OL_TOML_FLOAT;
    }
    if (rest >= 2 && s[i] == '0' &&
        (s[i + 1] == 'x' || s[i + 1] == 'o' || s[i + 1] == 'b')) {
        if (sign) {
            *why = "hexadecimal, octal and binary integers take no sign";
            return -1;
        }
        unsigned base = s[i + 1] == 'x' ? 16 : s[i + 1] == 'o' ? 8 : 2;
        int (*ok)(int) = base == 16 ? is_hex : base == 8 ? is_oct : is_bin;
        size_t pos = i + 2;
        int nd = digit_run(s, len, &pos, ok, why);
        if (nd < 0)
            return -1;
        if (nd == 0 || pos != len) {
            *why = base == 16 ? "expected hexadecimal digits after 0x"
                 : base == 8 ? "expected octal digits after 0o"
                 : "expected binary digits after 0b";
            return -1;
        }
        uint64_t v = 0;
        for (size_t j = i + 2; j < len; j++) {
            if (s[j] == '_')
                continue;
            uint64_t d = (uint64_t)hexval((unsigned char)s[j]);
            if (v > ((uint64_t)INT64_MAX - d) / base) {
                *why = "integer does not fit in 64 signed bits";
                return -1;
            }
            v = v * base + d;
        }
        *iv = (int64_t)v;
        return OL_TOML_INT;
    }
    size_t pos = i;
    int nd = digit_run(s, len, &pos, is_dec, why);
    if (nd < 0)
        return -1;
    if (nd == 0) {
        *why = "expected a digit";
        return -1;
    }
    if (s[i] == '0' && nd > 1) {
        *why = "leading zeros are not allowed";
        return -1;
    }
    int isfloat = 0;
    if (pos < len && s[pos] == '.') {
        pos++;
        int fd = digit_run(s, len, &pos, is_dec, why);
        if (fd < 0)
            return -1;
        if (fd == 0) {
            *why = "a decimal point must be followed by a digit";
            return -1;
        }
        isfloat = 1;
    }
    if (pos < len && (s[pos] == 'e' || s[pos] == 'E')) {
        pos++;
        if (pos < len && (s[pos] == '+' || s[pos] == '-'))
            pos++;
        int ed = digit_run(s, len, &pos, is_dec, why);
        if (ed < 0)
            return -1;
        if (ed == 0) {
            *why = "an exponent needs digits";
            return -1;
        }
        isfloat = 1;
    }
    if (pos != len) {
        *why = "unexpected character in number";
        return -1;
    }
    if (!isfloat) {
        uint64_t v = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
        for (size_t j = i; j < len; j++) {
            if (s[j] == '_')
                continue;
            uint64_t d = (uint64_t)(s[j] - '0');
            if (v > (lim - d) / 10) {
                *why = "integer does not fit in 64 signed bits";
                return -1;
            }
            v = v * 10 + d;
        }
        if (neg)
            *iv = v == lim ? INT64_MIN : -(int64_t)v;
        else
            *iv = (int64_t)v;
        return OL_TOML_INT;
    }
    char sbuf[128];
    char *b = len < sizeof sbuf ? sbuf : malloc(len + 1);
    if (!b) {
        *why = "out of memory";
        return -1;
    }
    size_t m = 0;
    for (size_t j = 0; j < len; j++)
        if (s[j] != '_')
            b[m++] = s[j];
    b[m] = 0;
    pthread_once(&ol_toml_cloc_once, cloc_init);
    double d = ol_toml_cloc ? strtod_l(b, NULL, ol_toml_cloc) : strtod(b, NULL);
    if (b != sbuf)
        free(b);
    if (isinf(d)) {
        *why = "float out of range";
        return -1;
    }
    *fv = d;
    return OL_TOML_FLOAT;
}

/* ------------------------------------------------------------------ */
/* keys and values                                                     */

/* Parses key *( '.' key ) with surrounding spaces; parts go to the arena. */
static int parse_key(struct parser *P, struct kpart *parts, int *np)
{
    int n = 0;
    for (;;) {
        skip_ws(P);
        const unsigned char *at = P->p;
        const char *src;
        size_t len;
        if (at < P->end && (*at == '"' || *at == '\'')) {
            if (parse_string(P, 0, &len))
                return -1;
            src = P->scratch;
        } else {
            while (P->p < P->end && is_bare(*P->p))
                P->p++;
            if (P->p == at)
                return fail(P, at, "expected a key, found %s", found(P, at));
            src = (const char *)at;
            len = (size_t)(P->p - at);
        }
        if (n == OL_TOML_MAX_DEPTH)
            return fail(P, at, "key has more than %d parts", OL_TOML_MAX_DEPTH);
        char *k = arena_dup(P, src, len);
        if (!k)
            return -1;
        parts[n++] = (struct kpart){k, len, at};
        skip_ws(P);
        if (P->p < P->end && *P->p == '.') {
            P->p++;
            continue;
        }
        break;
    }
    *np = n;
    return 0;
}

static int parse_value(struct parser *P, struct ol_toml *v);

static int parse_array(struct parser *P, struct ol_toml *a,
                       const unsigned char *open)
{
    for (;;) {
        if (skip_wscn(P))
            return -1;
        if (P->p >= P->end)
            return fail(P, open, "unterminated array");
        if (*P->p == ']') {
            P->p++;
            return 0;
        }
        struct ol_toml *e = new_node(P, a, OL_TOML_BOOL, NULL, P->p);
        if (!e || parse_value(P, e) || skip_wscn(P))
            return -1;
        if (P->p >= P->end)
            return fail(P, open, "unterminated array");
        if (*P->p == ',') {
            P->p++;
            continue;
        }
        if (*P->p == ']') {
            P->p++;
            return 0;
        }
        return fail(P, P->p, "expected ',' or ']' in an array, found %s",
                    found(P, P->p));
    }
}

static int parse_keyval(struct parser *P, struct ol_toml *base);

static int parse_inline(struct parser *P, struct ol_toml *t,
                        const unsigned char *open)
{
    skip_ws(P);
    if (P->p < P->end && *P->p == '}') {
        P->p++;
        return 0;
    }
    for (;;) {
        skip_ws(P);
        if (P->p >= P->end)
            return fail(P, open, "unterminated inline table");
        if (*P->p == '\n' || *P->p == '\r')
            return fail(P, P->p, "newline inside an inline table");
        if (*P->p == '}')
            return fail(P, P->p, "trailing comma in an inline table");
        if (parse_keyval(P, t))
            return -1;
        skip_ws(P);
        if (P->p >= P->end)
            return fail(P, open, "unterminated inline table");
        if (*P->p == ',') {
            P->p++;
            continue;
        }
        if (*P->p == '}') {
            P->p++;
            return 0;
        }
        if (*P->p == '\n' || *P->p == '\r')
            return fail(P, P->p, "newline inside an inline table");
        return fail(P, P->p, "expected ',' or '}' in an inline table, "
                    "found %s", found(P, P->p));
    }
}

static int looks_like_date(const unsigned char *s, size_t n)
{
    if (n >= 5 && is_dec(s[0]) && is_dec(s[1]) && is_dec(s[2]) &&
        is_dec(s[3]) && s[4] == '-')
        return 1;
    return n >= 3 && is_dec(s[0]) && is_dec(s[1]) && s[2] == ':';
}

/* At the first byte of a value; fills v (already linked into its parent). */
static int parse_value(struct parser *P, struct ol_toml *v)
{
    const unsigned char *at = P->p;
    if (at >= P->end)
        return fail(P, at, "expected a value, found end of input");
    v->line = P->line;
    v->col = (uint32_t)(at - P->line_start) + 1;
    switch (*at) {
    case '"':
    case '\'': {
        size_t len;
        if (parse_string(P, 1, &len))
            return -1;
        char *s = arena_dup(P, P->scratch, len);
        if (!s)
            return -1;
        v->type = OL_TOML_STRING;
        v->u.s.s = s;
        v->u.s.len = len;
        return 0;
    }
    case '[':
        v->type = OL_TOML_ARRAY;
        P->p++;
        return parse_array(P, v, at);
    case '{':
        v->type = OL_TOML_TABLE;
        v->flags = F_INLINE;
        P->p++;
        return parse_inline(P, v, at);
    default:
        break;
    }
    while (P->p < P->end &&
           (is_bare(*P->p) || *P->p == '+' || *P->p == '.' || *P->p == ':'))
        P->p++;
    size_t n = (size_t)(P->p - at);
    if (n == 0)
        return fail(P, at, "expected a value, found %s", found(P, at));
    int shown = n > 40 ? 40 : (int)n;
    if (n == 4 && memcmp(at, "true", 4) == 0) {
        v->type = OL_TOML_BOOL;
        v->u.b = true;
        return 0;
    }
    if (n == 5 && memcmp(at, "false", 5) == 0) {
        v->type = OL_TOML_BOOL;
        v->u.b = false;
        return 0;
    }
    if (looks_like_date(at, n))
        return fail(P, at, "dates and times are not supported");
    const char *why;
    int64_t iv;
    double fv;
    int t = ol_toml_number((const char *)at, n, &iv, &fv, &why);
    if (t == OL_TOML_INT) {
        v->type = OL_TOML_INT;
        v->u.i = iv;
        return 0;
    }
    if (t == OL_TOML_FLOAT) {
        v->type = OL_TOML_FLOAT;
        v->u.f = fv;
        return 0;
    }
    if (is_dec(*at) || *at == '+' || *at == '-')
        return fail(P, at, "invalid number %.*s: %s", shown, (const char *)at, why);
    return fail(P, at, "invalid value %.*s (strings must be quoted)", shown,
                (const char *)at);
}

/* key = value, with the key relative to `base`. */
static int parse_keyval(struct parser *P, struct ol_toml *base)
{
    struct kpart parts[OL_TOML_MAX_DEPTH];
    int n;
    char path[256];
    if (parse_key(P, parts, &n))
        return -1;
    if (P->p >= P->end || *P->p != '=')
        return fail(P, P->p, "expected '=' after a key, found %s",
                    found(P, P->p));
    P->p++;
    skip_ws(P);
    struct ol_toml *t = base;
    for (int i = 0; i < n - 1; i++) {
        struct ol_toml *c = hfind(P, t, parts[i].s, parts[i].len);
        if (!c) {
            c = new_node(P, t, OL_TOML_TABLE, parts[i].s, parts[i].at);
            if (!c)
                return -1;
            c->flags = F_DOTTED;
        } else if (c->type != OL_TOML_TABLE || !(c->flags & F_DOTTED) ||
                   (c->flags & F_INLINE)) {
            return fail(P, parts[i].at, "cannot add keys to %s with a "
                        "dotted key: it is %s (line %u)",
                        node_path(c, path, sizeof path, 1), what_is(c), c->line);
        }
        t = c;
    }
    struct ol_toml *old = hfind(P, t, parts[n - 1].s, parts[n - 1].len);
    if (old)
        return fail(P, parts[n - 1].at, "duplicate key %s (first defined "
                    "at line %u)", node_path(old, path, sizeof path, 1), old->line);
    struct ol_toml *v = new_node(P, t, OL_TOML_BOOL, parts[n - 1].s, parts[n - 1].at);
    if (!v)
        return -1;
    return parse_value(P, v);
}

/* At '[': a [table] or [[array of tables]] header line. */
static int parse_header(struct parser *P)
{
    const unsigned char *at = P->p;
    int aot = P->end - P->p >= 2 && P->p[1] == '[';
    struct kpart parts[OL_TOML_MAX_DEPTH];
    int n;
    char path[256];
    P->p += aot ? 2 : 1;
    if (parse_key(P, parts, &n))
        return -1;
    if (aot) {
        if (P->end - P->p < 2 || P->p[0] != ']' || P->p[1] != ']')
            return fail(P, P->p, "expected ']]' to close an array-of-tables "
                        "header, found %s", found(P, P->p));
        P->p += 2;
    } else {
        if (P->p >= P->end || *P->p != ']')
            return fail(P, P->p, "expected ']' to close a table header, "
                        "found %s", found(P, P->p));
        P->p++;
    }
    struct ol_toml *t = &P->doc->root;
    for (int i = 0; i < n - 1; i++) {
        struct ol_toml *c = hfind(P, t, parts[i].s, parts[i].len);
        if (!c) {
            c = new_node(P, t, OL_TOML_TABLE, parts[i].s, at);
            if (!c)
                return -1;
            c->flags = F_IMPLICIT;
        } else if (c->type == OL_TOML_ARRAY && (c->flags & F_AOT)) {
            c = c->u.c.tail;   /* the last [[element]]; never empty */
        } else if (c->type != OL_TOML_TABLE || (c->flags & F_INLINE)) {
            return fail(P, parts[i].at, "cannot define a table under %s: "
                        "it is %s (line %u)", node_path(c, path, sizeof path, 1),
                        what_is(c), c->line);
        }
        t = c;
    }
    const struct kpart *last = &parts[n - 1];
    struct ol_toml *c = hfind(P, t, last->s, last->len);
    if (aot) {
        if (!c) {
            c = new_node(P, t, OL_TOML_ARRAY, last->s, at);
            if (!c)
                return -1;
            c->flags = F_AOT;
        } else if (c->type != OL_TOML_ARRAY || !(c->flags & F_AOT)) {
            return fail(P, at, "cannot define [[%s]]: it is already %s "
                        "(line %u)", node_path(c, path, sizeof path, 0),
                        what_is(c), c->line);
        }
        struct ol_toml *e = new_node(P, c, OL_TOML_TABLE, NULL, at);
        if (!e)
            return -1;
        e->flags = F_DEFINED;
        P->cur = e;
    } else {
        if (!c) {
            c = new_node(P, t, OL_TOML_TABLE, last->s, at);
            if (!c)
                return -1;
            c->flags = F_DEFINED;
        } else if (c->type == OL_TOML_TABLE && c->flags == F_IMPLICIT) {
            c->flags = F_DEFINED;
            c->line = P->line;
            c->col = (uint32_t)(at - P->line_start) + 1;
        } else if (c->type == OL_TOML_TABLE && c->flags == F_DEFINED) {
            return fail(P, at, "table [%s] defined twice (first at line %u)",
                        node_path(c, path, sizeof path, 0), c->line);
        } else {
            return fail(P, at, "cannot define [%s]: it is already %s "
                        "(line %u)", node_path(c, path, sizeof path, 0),
                        what_is(c), c->line);
        }
        P->cur = c;
    }
    return end_of_line(P, "a table header");
}

static int parse_document(struct parser *P)
{
    while (P->p < P->end) {
        skip_ws(P);
        if (P->p >= P->end)
            break;
        unsigned char c = *P->p;
        if (c == '#' || c == '\n' || c == '\r') {
            if (end_of_line(P, "a comment"))
                return -1;
        } else if (c == '[') {
            if (parse_header(P))
                return -1;
        } else {
            if (parse_keyval(P, P->cur) || end_of_line(P, "a value"))
                return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* public                                                              */

struct ol_toml_doc *ol_toml_parse(const char *name, const char *buf, size_t len,
                                  char *err, size_t errlen)
{
    struct parser P;
    memset(&P, 0, sizeof P);
    P.name = name ? name : "<input>";
    P.err = err;
    P.errlen = err ? errlen : 0;
    if (P.errlen)
        err[0] = 0;
    if (len > OL_TOML_MAX_INPUT) {
        if (P.errlen)
            snprintf(err, errlen, "%s:1:1: input is %zu bytes; the limit is "
                     "%u (1 MiB)", P.name, len, OL_TOML_MAX_INPUT);
        return NULL;
    }
    static const unsigned char empty[1];
    P.base = len ? (const unsigned char *)buf : empty;
    P.p = P.base;
    P.end = P.base + len;
    P.line = 1;
    if (len >= 3 && P.p[0] == 0xEF && P.p[1] == 0xBB && P.p[2] == 0xBF)
        P.p += 3;
    P.line_start = P.bom_end = P.p;

    struct ol_toml_doc *doc = calloc(1, sizeof *doc);
    P.scratch = malloc(len + 1);
    if (!doc || !P.scratch) {
        if (P.errlen)
            snprintf(err, errlen, "%s:1:1: out of memory", P.name);
        free(doc);
        free(P.scratch);
        return NULL;
    }
    P.doc = doc;
    doc->root.type = OL_TOML_TABLE;
    doc->root.flags = F_DEFINED;
    doc->root.line = 1;
    doc->root.col = 1;
    P.cur = &doc->root;

    size_t bad = utf8_invalid(P.base, len);
    if (bad < len)
        fail(&P, P.base + bad, "invalid UTF-8 (byte 0x%02x)", P.base[bad]);
    else
        parse_document(&P);

    free(P.scratch);
    free(P.ht);
    if (P.failed) {
        ol_toml_free(doc);
        return NULL;
    }
    return doc;
}

void ol_toml_free(struct ol_toml_doc *doc)
{
    if (!doc)
        return;
    struct ol_toml_chunk *c = doc->chunks;
    while (c) {
        struct ol_toml_chunk *next = c->next;
        free(c);
        c = next;
    }
    free(doc);
}

const struct ol_toml *ol_toml_root(const struct ol_toml_doc *doc)
{
    return &doc->root;
}

enum ol_toml_type ol_toml_type(const struct ol_toml *v)
{
    return (enum ol_toml_type)v->type;
}

const char *ol_toml_type_name(enum ol_toml_type t)
{
    switch (t) {
    case OL_TOML_TABLE: return "table";
    case OL_TOML_ARRAY: return "array";
    case OL_TOML_STRING: return "string";
    case OL_TOML_INT: return "integer";
    case OL_TOML_FLOAT: return "float";
    case OL_TOML_BOOL: return "boolean";
    }
    return "?";
}

unsigned ol_toml_line(const struct ol_toml *v) { return v->line; }
unsigned ol_toml_col(const struct ol_toml *v) { return v->col; }
const char *ol_toml_key(const struct ol_toml *v) { return v->key; }

size_t ol_toml_count(const struct ol_toml *v)
{
    return v->type == OL_TOML_TABLE || v->type == OL_TOML_ARRAY ? v->u.c.n : 0;
}

const struct ol_toml *ol_toml_first(const struct ol_toml *v)
{
    return v->type == OL_TOML_TABLE || v->type == OL_TOML_ARRAY ? v->u.c.head
                                                                : NULL;
}

const struct ol_toml *ol_toml_next(const struct ol_toml *v) { return v->next; }

const struct ol_toml *ol_toml_get(const struct ol_toml *table, const char *key)
{
    if (table->type != OL_TOML_TABLE)
        return NULL;
    for (const struct ol_toml *c = table->u.c.head; c; c = c->next)
        if (strcmp(c->key, key) == 0)
            return c;
    return NULL;
}

const char *ol_toml_str(const struct ol_toml *v, size_t *len)
{
    if (v->type != OL_TOML_STRING)
        return NULL;
    if (len)
        *len = v->u.s.len;
    return v->u.s.s;
}

int ol_toml_int(const struct ol_toml *v, int64_t *out)
{
    if (v->type != OL_TOML_INT)
        return -1;
    *out = v->u.i;
    return 0;
}

int ol_toml_float(const struct ol_toml *v, double *out)
{
    if (v->type != OL_TOML_FLOAT)
        return -1;
    *out = v->u.f;
    return 0;
}

int ol_toml_bool(const struct ol_toml *v, bool *out)
{
    if (v->type != OL_TOML_BOOL)
        return -1;
    *out = v->u.b;
    return 0;
}

void ol_toml_describe(const struct ol_toml *v, char *buf, size_t len)
{
    if (!len)
        return;
    switch (v->type) {
    case OL_TOML_STRING: {
        size_t pos = 0, shown = 0;
        const unsigned char *s = (const unsigned char *)v->u.s.s;
        char tmp[8];
        int n = snprintf(buf, len, "string \"");
        pos = n > 0 && (size_t)n < len ? (size_t)n : len - 1;
        size_t i = 0;
        for (; i < v->u.s.len; i++) {
            unsigned c = s[i];
            if (shown >= 48 && (c & 0xC0) != 0x80)
                break;
            if (c == '"' || c == '\\')
                snprintf(tmp, sizeof tmp, "\\%c", c);
            else if (c == '\n')
                snprintf(tmp, sizeof tmp, "\\n");
            else if (c == '\t')
                snprintf(tmp, sizeof tmp, "\\t");
            else if (c < 0x20 || c == 0x7f)
                snprintf(tmp, sizeof tmp, "\\u%04x", c);
            else {
                tmp[0] = (char)c;
                tmp[1] = 0;
            }
            for (char *t = tmp; *t; t++)
                if (pos + 1 < len)
                    buf[pos++] = *t;
            shown++;
        }
        const char *tail = i < v->u.s.len ? "...\"" : "\"";
        for (; *tail; tail++)
            if (pos + 1 < len)
                buf[pos++] = *tail;
        buf[pos] = 0;
        break;
    }
    case OL_TOML_INT:
        snprintf(buf, len, "integer %lld", (long long)v->u.i);
        break;
    case OL_TOML_FLOAT:
        snprintf(buf, len, "float %g", v->u.f);
        break;
    case OL_TOML_BOOL:
        snprintf(buf, len, "boolean %s", v->u.b ? "true" : "false");
        break;
    default:
        snprintf(buf, len, "%s", ol_toml_type_name((enum ol_toml_type)v->type));
        break;
    }
}
