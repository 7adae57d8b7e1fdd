/*
 * parse.c - HTTP/1.1 request-head parser, head analysis and chunked decoder.
 *
 * Owns: the byte-level grammar of requests (see parse.h for the contract and
 * docs/http.md for the rules in prose). Three parts:
 *   1. ol_http_parse_request / ol_http_parse_headers: stateless scanners
 *      over the caller's buffer. One pass, left to right, each byte classed
 *      by one table lookup; an error is reported at the first byte that
 *      makes the prefix invalid, so a longer buffer never turns -1 back
 *      into -2.
 *   2. ol_http_head_analyze: framing and connection semantics of a parsed
 *      head (Content-Length, Transfer-Encoding, Connection, Expect, Host).
 *   3. ol_chunked_*: a resumable byte-at-a-time state machine over the
 *      chunked framing; body data is never copied, only pointed at.
 * Must not: allocate, include anything but libc and parse.h, or read past
 * the length it is given (tests/unit/test_http_parse.c checks that against
 * a guard page; tests/fuzz/ fuzzes both parsers).
 */
#include "http/parse.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

/* Byte classes, one bit each, in one table. */
enum {
    C_TCHAR = 1,   /* RFC 9110 tchar: token characters */
    C_VALUE = 2,   /* field-value byte: HTAB, SP, VCHAR, obs-text */
    C_TARGET = 4,  /* request-target byte: VCHAR, obs-text (no CTL, SP) */
    C_HOST = 8,    /* RFC 3986 host[:port] incl. IP-literal and pct-encoded */
    C_QDTEXT = 16, /* quoted-string qdtext: HTAB, SP, VCHAR but " and \ */
    C_HEX = 32,    /* HEXDIG */
};

static const uint8_t ol_http_class[256] = {
    /* 0x00 */  0,  0,  0,  0,  0,  0,  0,  0,  0, 18,  0,  0,  0,  0,  0,  0,
    /* 0x10 */  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,
    /* 0x20 */ 18, 31,  6, 23, 31, 31, 31, 31, 30, 30, 31, 31, 30, 31, 31, 22,
    /* 0x30 */ 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 30, 30, 22, 30, 22, 22,
    /* 0x40 */ 22, 63, 63, 63, 63, 63, 63, 31, 31, 31, 31, 31, 31, 31, 31, 31,
    /* 0x50 */ 31, 31, 31, 31, 31, 31, 31, 31, 31, 31, 31, 30,  6, 30, 23, 31,
    /* 0x60 */ 23, 63, 63, 63, 63, 63, 63, 31, 31, 31, 31, 31, 31, 31, 31, 31,
    /* 0x70 */ 31, 31, 31, 31, 31, 31, 31, 31, 31, 31, 31, 22, 23, 22, 31,  0,
    /* 0x80 */ 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22,
    /* 0x90 */ 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22,
    /* 0xa0 */ 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22,
    /* 0xb0 */ 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22,
    /* 0xc0 */ 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22,
    /* 0xd0 */ 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22,
    /* 0xe0 */ 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22,
    /* 0xf0 */ 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22,
};

#define IS(c, cls) (ol_http_class[(uint8_t)(c)] & (cls))

/* ---------------------------------------------------------------------- */
/* 1. Head scanners                                                       */
/* ---------------------------------------------------------------------- */

/*
 * Consumes one line ending at *pp: CRLF or a bare LF. Returns 0 and moves
 * *pp past it, -2 when the bytes end first, -1 for anything else.
 */
static inline int eat_eol(const char **pp, const char *end)
{
    const char *p = *pp;
    if (*p == '\r') {
        if (++p == end)
            return OL_HTTP_INCOMPLETE;
        if (*p != '\n')
            return OL_HTTP_INVALID;
    } else if (*p != '\n') {
        return OL_HTTP_INVALID;
    }
    *pp = p + 1;
    return 0;
}

/*
 * True when the head that started at buf cannot have ended inside
 * buf[0..len): no LF followed by an empty line starts at or after
 * last_len - 3 (the earlier call saw no end before last_len). min_len is the
 * shortest last_len for which the end must be preceded by a LF at all.
 */
static bool no_end_since(const char *buf, size_t len, size_t last_len, size_t min_len)
{
    if (last_len < min_len || last_len >= len)
        return false;
    const char *p = buf + (last_len >= 3 ? last_len - 3 : 0);
    const char *end = buf + len;
    while ((p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
        if (++p == end)
            return true;
        if (*p == '\n' || (*p == '\r' && p + 1 < end && p[1] == '\n'))
            return false;
    }
    return true;
}

/*
 * Parses header lines from p up to and including the empty line into
 * headers[0..max); headers NULL with max SIZE_MAX only validates. On success stores the count in
 * *num and returns the position after the empty line; otherwise NULL with
 * *err set to -1, -2 or -3.
 */
static const char *scan_headers(const char *p, const char *end,
                                struct ol_http_header *headers, size_t max,
                                size_t *num, int *err)
{
    size_t n = 0;
    for (;;) {
        if (p == end)
            goto incomplete;
        if (*p == '\r' || *p == '\n') {
            int r = eat_eol(&p, end);
            if (r) {
                *err = r;
                return NULL;
            }
            *num = n;
            return p;
        }
        if (n == max) {
            *err = IS(*p, C_TCHAR) ? OL_HTTP_TOO_MANY_HEADERS : OL_HTTP_INVALID;
            return NULL;
        }
        /* field-name ":" with nothing between (also rejects obs-fold) */
        const char *name = p;
        while (IS(*p, C_TCHAR))
            if (++p == end)
                goto incomplete;
        if (p == name || *p != ':')
            goto invalid;
        size_t name_len = (size_t)(p - name);
        /* OWS field-value OWS */
        do {
            if (++p == end)
                goto incomplete;
        } while (*p == ' ' || *p == '\t');
        const char *value = p;
        while (IS(*p, C_VALUE))
            if (++p == end)
                goto incomplete;
        const char *vend = p;
        int r = eat_eol(&p, end);
        if (r) {
            *err = r;
            return NULL;
        }
        while (vend > value && (vend[-1] == ' ' || vend[-1] == '\t'))
            vend--;
        if (headers) {
            headers[n].name = name;
            headers[n].name_len = name_len;
            headers[n].value = value;
            headers[n].value_len = (size_t)(vend - value);
        }
        n++;
    }
incomplete:
    *err = OL_HTTP_INCOMPLETE;
    return NULL;
invalid:
    *err = OL_HTTP_INVALID;
    return NULL;
}

int ol_http_parse_request(const char *buf, size_t len, size_t last_len,
                          struct ol_http_request *req,
                          struct ol_http_header *headers, size_t max_headers)
{
    if (len > INT_MAX)
        len = INT_MAX;
    if (no_end_since(buf, len, last_len, 1))
        return OL_HTTP_INCOMPLETE;

    const char *p = buf, *end = buf + len;
    int r;
    /* empty lines before the request line are ignored */
    for (;;) {
        if (p == end)
            return OL_HTTP_INCOMPLETE;
        if (*p != '\r' && *p != '\n')
            break;
        if ((r = eat_eol(&p, end)))
            return r;
    }
    /* method SP */
    const char *method = p;
    while (IS(*p, C_TCHAR))
        if (++p == end)
            return OL_HTTP_INCOMPLETE;
    if (p == method || *p != ' ')
        return OL_HTTP_INVALID;
    size_t method_len = (size_t)(p - method);
    if (++p == end)
        return OL_HTTP_INCOMPLETE;
    /* request-target SP */
    const char *target = p;
    while (IS(*p, C_TARGET))
        if (++p == end)
            return OL_HTTP_INCOMPLETE;
    if (p == target || *p != ' ')
        return OL_HTTP_INVALID;
    size_t target_len = (size_t)(p - target);
    p++;
    /* HTTP-version: "HTTP/1.0" or "HTTP/1.1" */
    static const char ver[] = "HTTP/1.";
    for (size_t i = 0; i < sizeof ver - 1; i++, p++) {
        if (p == end)
            return OL_HTTP_INCOMPLETE;
        if (*p != ver[i])
            return OL_HTTP_INVALID;
    }
    if (p == end)
        return OL_HTTP_INCOMPLETE;
    if (*p != '0' && *p != '1')
        return OL_HTTP_INVALID;
    int minor = *p - '0';
    if (++p == end)
        return OL_HTTP_INCOMPLETE;
    if ((r = eat_eol(&p, end)))
        return r;

    size_t n;
    p = scan_headers(p, end, headers, max_headers, &n, &r);
    if (!p)
        return r;
    req->method = method;
    req->method_len = method_len;
    req->target = target;
    req->target_len = target_len;
    req->minor_version = minor;
    req->headers = headers;
    req->num_headers = n;
    return (int)(p - buf);
}

int ol_http_parse_headers(const char *buf, size_t len, size_t last_len,
                          struct ol_http_header *headers, size_t max_headers,
                          size_t *num_headers)
{
    if (len > INT_MAX)
        len = INT_MAX;
    if (no_end_since(buf, len, last_len, 2))
        return OL_HTTP_INCOMPLETE;
    size_t n;
    int err;
    const char *p = scan_headers(buf, buf + len, headers, max_headers, &n, &err);
    if (!p)
        return err;
    *num_headers = n;
    return (int)(p - buf);
}

bool ol_http_name_eq(const char *s, size_t n, const char *lit)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((unsigned)(c - 'A') < 26u)
            c |= 0x20;
        if (c != (unsigned char)lit[i])   /* also stops at lit's NUL */
            return false;
    }
    return lit[n] == '\0';
}

const struct ol_http_header *ol_http_header_find(const struct ol_http_request *req,
                                                 const char *name)
{
    size_t len = strlen(name);
    for (size_t i = 0; i < req->num_headers; i++) {
        const struct ol_http_header *h = &req->headers[i];
        if (h->name_len == len && ol_http_name_eq(h->name, len, name))
            return h;
    }
    return NULL;
}

/* ---------------------------------------------------------------------- */
/* 2. Head analysis                                                       */
/* ---------------------------------------------------------------------- */

/*
 * Next element of a comma-separated list value (RFC 9110 section 5.6.1):
 * skips empty elements, trims OWS. Returns false at the end of the list.
 */
static bool list_next(const char **pp, const char *end, const char **s, size_t *n)
{
    const char *p = *pp;
    for (;;) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == ','))
            p++;
        if (p == end) {
            *pp = p;
            return false;
        }
        const char *e = memchr(p, ',', (size_t)(end - p));
        const char *next = e ? e + 1 : end;
        if (!e)
            e = end;
        while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        *s = p;
        *n = (size_t)(e - p);
        *pp = next;
        return true;
    }
}

/* Length of the token at the start of s[0..n). */
static size_t token_len(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && IS(s[i], C_TCHAR))
        i++;
    return i;
}

/* One transfer-coding list value folded into the running TE state. */
struct te_state {
    unsigned codings, chunked;
    bool other, last_chunked, bad;
};

static void te_fold(struct te_state *te, const char *p, const char *end)
{
    const char *s;
    size_t n;
    while (list_next(&p, end, &s, &n)) {
        size_t t = token_len(s, n);
        size_t rest = t;
        while (rest < n && (s[rest] == ' ' || s[rest] == '\t'))
            rest++;
        if (t == 0 || (rest < n && s[rest] != ';')) {
            te->bad = true;
            return;
        }
        te->codings++;
        te->last_chunked = ol_http_name_eq(s, t, "chunked");
        if (te->last_chunked) {
            te->chunked++;
            if (t != n)        /* chunked takes no parameters */
                te->bad = true;
        } else {
            te->other = true;
        }
    }
}

static int fail(struct ol_http_head_info *out, int status, const char *reason)
{
    out->status = status;
    out->reason = reason;
    return -1;
}

int ol_http_head_analyze(const struct ol_http_request *req,
                         struct ol_http_head_info *out)
{
    *out = (struct ol_http_head_info){.content_length = OL_HTTP_NO_LENGTH};
    const struct ol_http_header *cl = NULL, *host = NULL;
    unsigned n_cl = 0, n_host = 0, n_te = 0;
    struct te_state te = {0};
    bool conn_close = false, conn_keep = false, expect_100 = false, expect_bad = false;
    const char *s;
    size_t n;

    for (size_t i = 0; i < req->num_headers; i++) {
        const struct ol_http_header *h = &req->headers[i];
        const char *v = h->value, *vend = h->value + h->value_len;
        switch (h->name_len) {
        case 4:
            if (ol_http_name_eq(h->name, 4, "host")) {
                host = h;
                n_host++;
            }
            break;
        case 6:
            if (ol_http_name_eq(h->name, 6, "expect")) {
                while (list_next(&v, vend, &s, &n)) {
                    if (ol_http_name_eq(s, n, "100-continue"))
                        expect_100 = true;
                    else
                        expect_bad = true;
                }
            }
            break;
        case 10:
            if (ol_http_name_eq(h->name, 10, "connection")) {
                while (list_next(&v, vend, &s, &n)) {
                    if (ol_http_name_eq(s, n, "close"))
                        conn_close = true;
                    else if (ol_http_name_eq(s, n, "keep-alive"))
                        conn_keep = true;
                }
            }
            break;
        case 14:
            if (ol_http_name_eq(h->name, 14, "content-length")) {
                cl = h;
                n_cl++;
            }
            break;
        case 17:
            if (ol_http_name_eq(h->name, 17, "transfer-encoding")) {
                n_te++;
                te_fold(&te, v, vend);
            }
            break;
        default:
            break;
        }
    }

    if (n_cl > 1)
        return fail(out, 400, "duplicate Content-Length");
    if (cl) {
        if (cl->value_len == 0)
            return fail(out, 400, "invalid Content-Length");
        uint64_t v = 0;
        for (size_t i = 0; i < cl->value_len; i++) {
            unsigned d = (unsigned char)cl->value[i] - '0';
            if (d > 9)
                return fail(out, 400, "invalid Content-Length");
            if (v > ((uint64_t)INT64_MAX - d) / 10)
                return fail(out, 400, "Content-Length too large");
            v = v * 10 + d;
        }
        out->content_length = v;
    }
    if (n_te) {
        if (cl)
            return fail(out, 400, "both Content-Length and Transfer-Encoding");
        if (req->minor_version == 0)
            return fail(out, 400, "Transfer-Encoding in HTTP/1.0");
        if (te.bad)
            return fail(out, 400, "invalid Transfer-Encoding");
        if (te.chunked > 1)
            return fail(out, 400, "chunked applied twice");
        if (!te.last_chunked)
            return fail(out, 400, "final transfer coding is not chunked");
        if (te.other)
            return fail(out, 501, "transfer coding not implemented");
        out->chunked = true;
    }
    if (n_host > 1)
        return fail(out, 400, "duplicate Host");
    if (host) {
        for (size_t i = 0; i < host->value_len; i++)
            if (!IS(host->value[i], C_HOST))
                return fail(out, 400, "invalid Host");
        out->host = host->value;
        out->host_len = host->value_len;
    } else if (req->minor_version == 1) {
        return fail(out, 400, "missing Host");
    }
    if (expect_bad)
        return fail(out, 417, "unsupported expectation");
    out->expect_continue = expect_100 && req->minor_version == 1;
    out->keep_alive = !conn_close && (req->minor_version == 1 || conn_keep);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* 3. Chunked decoder                                                     */
/* ---------------------------------------------------------------------- */

/*
 * States of struct ol_chunked. One chunk is
 *   SIZE_START SIZE [ext states] LF  DATA  DATA_CR DATA_LF
 * and the end is
 *   SIZE_START "0" [ext states] LF  TRL_START (TRL_LINE TRL_LF)* TRL_END_LF DONE
 */
enum {
    CK_SIZE_START,  /* first hex digit of chunk-size */
    CK_SIZE,        /* more hex digits, or what follows them */
    CK_BWS,         /* BWS that must lead to ";" */
    CK_EXT_NAME0,   /* BWS after ";", then the first tchar of a name */
    CK_EXT_NAME,    /* in an extension name */
    CK_EXT_NAME_WS, /* BWS after a name: "=" or ";" next */
    CK_EXT_VAL0,    /* BWS after "=", then a token or DQUOTE */
    CK_EXT_TOKEN,   /* in a token value */
    CK_EXT_QUOTED,  /* in a quoted-string value */
    CK_EXT_QPAIR,   /* after a backslash in a quoted-string */
    CK_EXT_QEND,    /* after the closing DQUOTE */
    CK_LF,          /* CR of the chunk-size line seen */
    CK_DATA,        /* chunk data */
    CK_DATA_CR,     /* CRLF after chunk data */
    CK_DATA_LF,
    CK_TRL_START,   /* start of a trailer line or of the final CRLF */
    CK_TRL_LINE,    /* in a trailer field line */
    CK_TRL_LF,      /* CR of a trailer line seen */
    CK_TRL_END_LF,  /* CR of the final empty line seen */
    CK_DONE,        /* finished; a failed decoder keeps its state and sets error */
};

void ol_chunked_init(struct ol_chunked *d, uint64_t max_body, uint32_t max_line)
{
    d->remaining = 0;
    d->size = 0;
    d->total = 0;
    d->max_body = max_body;
    d->line_len = 0;
    d->max_line = (max_line == 0 || max_line > OL_CHUNKED_LINE_MAX)
                      ? OL_CHUNKED_LINE_MAX : max_line;
    d->state = CK_SIZE_START;
    d->ndigits = 0;
    d->error = 0;
    d->trailer_len = 0;
}

bool ol_chunked_done(const struct ol_chunked *d)
{
    return d->state == CK_DONE;
}

const char *ol_chunked_trailers(const struct ol_chunked *d, size_t *len)
{
    if (d->state != CK_DONE) {
        *len = 0;
        return NULL;
    }
    *len = d->trailer_len;
    return d->trailer;
}

static inline int hexval(unsigned char c)
{
    if ((unsigned)(c - '0') < 10u)
        return c - '0';
    c |= 0x20;
    return (unsigned)(c - 'a') < 6u ? c - 'a' + 10 : -1;
}

ssize_t ol_chunked_decode(struct ol_chunked *d, const char *buf, size_t len,
                          const char **data, size_t *data_len)
{
    *data = NULL;
    *data_len = 0;
    if (d->error)
        return d->error;
    if (len > (size_t)SSIZE_MAX)
        len = (size_t)SSIZE_MAX;
    const char *p = buf, *end = buf + len;
    int err = OL_HTTP_INVALID;

    while (p < end) {
        unsigned char c = (unsigned char)*p;
        /* every byte of a chunk-size line before its CR counts */
        if (d->state <= CK_EXT_QEND && c != '\r' && ++d->line_len > d->max_line)
            goto fail;
        switch (d->state) {
        case CK_SIZE_START:
        case CK_SIZE: {
            int h = hexval(c);
            if (h >= 0) {
                if (++d->ndigits > 16 ||
                    d->size > ((uint64_t)INT64_MAX - (unsigned)h) / 16)
                    goto fail;
                d->size = d->size * 16 + (unsigned)h;
                d->state = CK_SIZE;
                break;
            }
            if (d->state == CK_SIZE_START)
                goto fail;
            if (c == '\r')
                d->state = CK_LF;
            else if (c == ';')
                d->state = CK_EXT_NAME0;
            else if (c == ' ' || c == '\t')
                d->state = CK_BWS;
            else
                goto fail;
            break;
        }
        case CK_BWS:
        case CK_EXT_NAME_WS:
            if (c == ';')
                d->state = CK_EXT_NAME0;
            else if (c == '=' && d->state == CK_EXT_NAME_WS)
                d->state = CK_EXT_VAL0;
            else if (c != ' ' && c != '\t')
                goto fail;
            break;
        case CK_EXT_NAME0:
            if (IS(c, C_TCHAR))
                d->state = CK_EXT_NAME;
            else if (c != ' ' && c != '\t')
                goto fail;
            break;
        case CK_EXT_NAME:
            if (IS(c, C_TCHAR))
                break;
            if (c == '=')
                d->state = CK_EXT_VAL0;
            else if (c == ' ' || c == '\t')
                d->state = CK_EXT_NAME_WS;
            else if (c == ';')
                d->state = CK_EXT_NAME0;
            else if (c == '\r')
                d->state = CK_LF;
            else
                goto fail;
            break;
        case CK_EXT_VAL0:
            if (c == '"')
                d->state = CK_EXT_QUOTED;
            else if (IS(c, C_TCHAR))
                d->state = CK_EXT_TOKEN;
            else if (c != ' ' && c != '\t')
                goto fail;
            break;
        case CK_EXT_TOKEN:
        case CK_EXT_QEND:
            if (d->state == CK_EXT_TOKEN && IS(c, C_TCHAR))
                break;
            if (c == ';')
                d->state = CK_EXT_NAME0;
            else if (c == ' ' || c == '\t')
                d->state = CK_BWS;
            else if (c == '\r')
                d->state = CK_LF;
            else
                goto fail;
            break;
        case CK_EXT_QUOTED:
            if (c == '"')
                d->state = CK_EXT_QEND;
            else if (c == '\\')
                d->state = CK_EXT_QPAIR;
            else if (!IS(c, C_QDTEXT))
                goto fail;
            break;
        case CK_EXT_QPAIR:
            if (!IS(c, C_VALUE))
                goto fail;
            d->state = CK_EXT_QUOTED;
            break;
        case CK_LF:
            if (c != '\n')
                goto fail;
            if (d->size == 0) {
                d->state = CK_TRL_START;
                break;
            }
            if (d->max_body && d->size > d->max_body - d->total) {
                err = OL_CHUNKED_TOO_LARGE;
                goto fail;
            }
            d->remaining = d->size;
            d->state = CK_DATA;
            break;
        case CK_DATA: {
            size_t avail = (size_t)(end - p);
            size_t n = d->remaining < avail ? (size_t)d->remaining : avail;
            *data = p;
            *data_len = n;
            d->remaining -= n;
            d->total += n;
            if (d->remaining == 0)
                d->state = CK_DATA_CR;
            return (p + n) - buf;
        }
        case CK_DATA_CR:
            if (c != '\r')
                goto fail;
            d->state = CK_DATA_LF;
            break;
        case CK_DATA_LF:
            if (c != '\n')
                goto fail;
            d->size = 0;
            d->ndigits = 0;
            d->line_len = 0;
            d->state = CK_SIZE_START;
            break;
        case CK_TRL_START:
        case CK_TRL_LINE:
            if (d->trailer_len == OL_CHUNKED_TRAILER_MAX || c == '\n')
                goto fail;
            d->trailer[d->trailer_len++] = (char)c;
            if (c == '\r')
                d->state = d->state == CK_TRL_START ? CK_TRL_END_LF : CK_TRL_LF;
            else
                d->state = CK_TRL_LINE;
            break;
        case CK_TRL_LF:
        case CK_TRL_END_LF:
            if (c != '\n' || d->trailer_len == OL_CHUNKED_TRAILER_MAX)
                goto fail;
            d->trailer[d->trailer_len++] = '\n';
            if (d->state == CK_TRL_LF) {
                d->state = CK_TRL_START;
                break;
            }
            {
                /* the whole section must be valid header lines */
                size_t n;
                int r;
                const char *t = d->trailer;
                if (!scan_headers(t, t + d->trailer_len, NULL, SIZE_MAX, &n, &r))
                    goto fail;
            }
            d->state = CK_DONE;
            return (p + 1) - buf;
        case CK_DONE:
            return 0;
        }
        p++;
    }
    return p - buf;
fail:
    d->error = (int8_t)err;
    return err;
}
