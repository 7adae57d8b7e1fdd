/*
 * pct.h - hex digits and percent-decoding, shared by the SigV4 checks, the
 * router and the aws-chunked decoder.
 *
 * Owns: nothing but these two pure helpers. Must not: allocate.
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

#endif
