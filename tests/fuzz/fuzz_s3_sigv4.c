/*
 * fuzz_s3_sigv4.c - libFuzzer target for the SigV4 parsers and the canonical
 * request builder (src/s3/sigv4.c).
 *
 * The first byte picks a mode; the rest, copied into an allocation of its
 * exact length (ASan catches any read past it), is:
 *   mode % 3 == 0  an Authorization header value;
 *   mode % 3 == 1  a presigned query string;
 *   mode % 3 == 2  a request target "path?query" for the canonical request.
 *
 * Aborts when a contract of sigv4.h breaks: a return outside the documented
 * set; a parsed slice outside the input (or the scratch area); a scope date
 * that is not 8 digits; a canonical request longer than its buffer or with
 * a byte the encoder never emits in the path or query lines.
 */
#include "s3/sigv4.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(c) do { if (!(c)) abort(); } while (0)

static int inside(const char *p, size_t n, const char *base, size_t len)
{
    return p >= base && p + n <= base + len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int mode = data[0] % 3;
    size_t n = size - 1;
    char *in = malloc(n ? n : 1);
    memcpy(in, data + 1, n);
    struct ol_sigv4 a;
    if (mode == 0) {
        int rc = ol_sigv4_parse_header(in, n, &a);
        REQUIRE(rc == 0 || rc == -EINVAL);
        if (rc == 0) {
            REQUIRE(inside(a.access_key, a.access_key_len, in, n));
            REQUIRE(inside(a.scope, a.scope_len, in, n));
            REQUIRE(inside(a.signed_headers, a.signed_headers_len, in, n));
            REQUIRE(strlen(a.scope_date) == 8);
        }
    } else if (mode == 1) {
        char *scratch = malloc(n ? n : 1);
        int rc = ol_sigv4_parse_query(in, n, scratch, &a);
        REQUIRE(rc == 0 || rc == -EINVAL || rc == -ENOENT);
        if (rc == 0) {
            REQUIRE(inside(a.access_key, a.access_key_len, scratch, n));
            REQUIRE(inside(a.signed_headers, a.signed_headers_len, scratch, n));
            REQUIRE(a.expires >= 1 && a.expires <= OL_SIGV4_MAX_EXPIRES);
        }
        free(scratch);
    } else {
        const char *qm = memchr(in, '?', n);
        size_t pl = qm ? (size_t)(qm - in) : n;
        const char *q = qm ? qm + 1 : in + n;
        size_t ql = qm ? n - pl - 1 : 0;
        struct ol_http_header h = {"host", 4, "example", 7};
        static char out[OL_SIGV4_MAX_CANONICAL];
        int rc = ol_sigv4_canonical_request("GET", 3, in, pl, q, ql, n & 1, &h, 1, "host", 4,
                                            "UNSIGNED-PAYLOAD", 16, out, sizeof out);
        REQUIRE(rc > 0 || rc == -EINVAL || rc == -ENOSPC);
        if (rc > 0) {
            REQUIRE((size_t)rc <= sizeof out);
            /* the path and query lines hold only unreserved bytes, '%', '/', '=', '&' */
            const char *p = memchr(out, '\n', (size_t)rc) + 1;
            const char *end = memchr(p, '\n', (size_t)rc - (size_t)(p - out));
            end = memchr(end + 1, '\n', (size_t)rc - (size_t)(end + 1 - out));
            for (const char *c = p; c < end; c++) {
                char x = *c;
                REQUIRE((x >= 'A' && x <= 'Z') || (x >= 'a' && x <= 'z') ||
                        (x >= '0' && x <= '9') || strchr("-._~%/=&\n", x));
            }
        }
    }
    free(in);
    return 0;
}
