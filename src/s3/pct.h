/*
 * pct.h - hex digits, percent-decoding and -encoding, shared by the SigV4
 * checks, the router, the aws-chunked decoder, listings (encoding-type=url),
 * tag sets and the CLI's query strings.
 *
 * Owns: nothing but these pure helpers. Must not: allocate.
 */
#ifndef OL_S3_PCT_H
#define OL_S3_PCT_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

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

#endif
