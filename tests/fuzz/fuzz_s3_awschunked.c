/*
 * fuzz_s3_awschunked.c - libFuzzer target for the aws-chunked body decoder
 * (src/s3/awschunked.c).
 *
 * Byte 0 picks the mode (signed, signed with trailer, unsigned with
 * trailer) and whether chunks are staged and hashed in pairs, byte 1 the
 * split size; the rest is the body, fed in pieces
 * of that size from an allocation of its exact length.
 *
 * Aborts when a contract of awschunked.h breaks: a return outside the
 * documented set; a call that consumes nothing or more than it was given;
 * a data slice outside the bytes consumed; more data out than came in; a
 * decoder that accepts more input after failing; finish() answering 0 for
 * a body whose decoded length differs from the one announced.
 */
#include "s3/awschunked.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(c) do { if (!(c)) abort(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    int mode = 1 + data[0] % 3;
    size_t step = 1 + data[1];
    uint64_t expect = (data[2] & 1) ? UINT64_MAX : (uint64_t)(data[2] >> 1);
    size_t n = size - 3;
    char *in = malloc(n ? n : 1);
    memcpy(in, data + 3, n);
    static const uint8_t key[32] = {1}, seed[32] = {2};
    static uint8_t stage[OL_AWSC_STAGE];
    struct ol_awsc st;
    ol_awsc_init(&st, mode, key, "20130524T000000Z", "20130524/us-east-1/s3/aws4_request", 34,
                 seed, expect, (data[0] / 3) & 1 ? stage : NULL);
    size_t off = 0, out = 0;
    long rc = 0;
    while (off < n) {
        size_t m = n - off < step ? n - off : step;
        const char *d;
        size_t dl;
        rc = ol_awsc_feed(&st, in + off, m, &d, &dl);
        if (rc < 0) {
            REQUIRE(rc == -EBADMSG || rc == -EACCES || rc == -EMSGSIZE || rc == -E2BIG);
            const char *d2;
            size_t dl2;
            REQUIRE(ol_awsc_feed(&st, in + off, m, &d2, &dl2) == rc);
            REQUIRE(ol_awsc_finish(&st) == rc);
            break;
        }
        REQUIRE(rc > 0 && (size_t)rc <= m);
        REQUIRE(dl == 0 || (d >= in + off && d + dl <= in + off + (size_t)rc));
        out += dl;
        off += (size_t)rc;
    }
    REQUIRE(out <= n);
    if (rc >= 0 && ol_awsc_finish(&st) == 0)
        REQUIRE(expect == UINT64_MAX || out == expect);
    free(in);
    return 0;
}
