/*
 * pct.h - hex digits, percent-decoding and -encoding, and walking a raw
 * query string, shared by the SigV4 and SigV2 checks, the router, the
 * aws-chunked decoder, listings (encoding-type=url), tag sets and the CLI's
 * query strings.
 *
 * Owns: nothing but these pure helpers. Must not: allocate.
 */
#ifndef OL_S3_PCT_H
#define OL_S3_PCT_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* The value of one hex digit (either case), or -1. */
static inline int ol_hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/*
 * Percent-decodes s[0..n) into out[cap]; plus: '+' decodes to a space (a
 * query string). Returns the decoded length, -EINVAL (a '%' without two hex
 * digits) or -E2BIG (more than cap bytes).
 */
static inline long ol_pct_decode(const char *s, size_t n, char *out, size_t cap, bool plus)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%') {
            if (i + 2 >= n || ol_hexval(s[i + 1]) < 0 || ol_hexval(s[i + 2]) < 0)
                return -EINVAL;
            c = (char)(ol_hexval(s[i + 1]) << 4 | ol_hexval(s[i + 2]));
            i += 2;
        } else if (c == '+' && plus) {
            c = ' ';
        }
        if (o == cap)
            return -E2BIG;
        out[o++] = c;
    }
    return (long)o;
}

/*
 * Percent-encodes s[0..n) into out[cap], NUL-terminated: RFC 3986's
 * unreserved characters (and '/' when keep_slash) stay, every other byte
 * becomes %XX (upper-case hex). Returns the encoded length, or -E2BIG when
 * it (and its NUL) does not fit.
 */
static inline long ol_pct_encode(const char *s, size_t n, char *out, size_t cap,
                                 bool keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/');
        if (o + (keep ? 1 : 3) >= cap)
            return -E2BIG;
        if (keep) {
            out[o++] = (char)c;
        } else {
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    if (o >= cap)
        return -E2BIG;
    out[o] = 0;
    return (long)o;
}

/* One parameter of a raw query string: slices of it, nothing decoded. */
struct ol_qparam {
    const char *name, *value;   /* value: after '=', or NULL when there is none */
    size_t name_len, value_len;
};

/*
 * ol_query_next - the parameter of q[0..n) that starts at *at, and *at moved
 * past it and its '&'. Returns false when none is left. Every '&'-separated
 * piece is one parameter, empty ones too (a name of length 0):
 *
 *   size_t at = 0; struct ol_qparam p;
 *   while (ol_query_next(q, n, &at, &p)) ...
 */
static inline bool ol_query_next(const char *q, size_t n, size_t *at, struct ol_qparam *p)
{
    if (*at >= n)
        return false;
    const char *s = q + *at;
    const char *amp = (const char *)memchr(s, '&', n - *at);
    size_t len = amp ? (size_t)(amp - s) : n - *at;
    *at += len + 1;
    const char *eq = (const char *)memchr(s, '=', len);
    p->name = s;
    p->name_len = eq ? (size_t)(eq - s) : len;
    p->value = eq ? eq + 1 : NULL;
    p->value_len = eq ? len - p->name_len - 1 : 0;
    return true;
}

#endif
