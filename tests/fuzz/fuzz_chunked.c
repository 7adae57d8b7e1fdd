/*
 * fuzz_chunked.c - libFuzzer target for the chunked decoder
 * (src/http/parse.c).
 *
 * Input: one configuration byte (bit 0: max_line 16 instead of the default,
 * bit 1: max_body 64 instead of none), then the body bytes. The body is
 * decoded three ways: whole, split in two at a point derived from the data,
 * and one byte at a time, each piece in its own exactly-sized heap buffer
 * (ASan catches a read past it). All three must agree on the error, on
 * done, on the bytes consumed, on the data and on the trailers. Every span
 * must lie inside the bytes its call consumed; a call that is not done
 * must make progress; total must match the data; done trailers must parse
 * with ol_http_parse_headers to exactly their length. Aborts otherwise.
 */
#include "http/parse.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(c) do { if (!(c)) abort(); } while (0)

struct result {
    int err;
    bool done;
    size_t consumed;
    size_t out_len;
    char *out;          /* capacity: input length */
    size_t trl_len;
    char trl[OL_CHUNKED_TRAILER_MAX];
};

static void run(const char *msg, size_t len, size_t step, size_t split,
                uint64_t max_body, uint32_t max_line, struct result *r)
{
    struct ol_chunked d;
    ol_chunked_init(&d, max_body, max_line);
    r->err = 0;
    r->done = false;
    r->consumed = 0;
    r->out_len = 0;
    r->trl_len = 0;
    size_t start = 0;
    while (start < len && !r->done && !r->err) {
        size_t plen = step ? step : (start < split ? split : len) - start;
        if (plen > len - start)
            plen = len - start;
        char *piece = malloc(plen);
        REQUIRE(piece != NULL);
        memcpy(piece, msg + start, plen);
        size_t off = 0;
        while (off < plen) {
            const char *data;
            size_t dl;
            ssize_t n = ol_chunked_decode(&d, piece + off, plen - off, &data, &dl);
            if (n < 0) {
                REQUIRE(n == OL_HTTP_INVALID || n == OL_CHUNKED_TOO_LARGE);
                REQUIRE(n == OL_HTTP_INVALID || max_body);
                REQUIRE(ol_chunked_decode(&d, piece, plen, &data, &dl) == n);
                REQUIRE(!ol_chunked_done(&d));
                r->err = (int)n;
                break;
            }
            REQUIRE((size_t)n <= plen - off);
            if (dl) {
                REQUIRE(data >= piece + off && data + dl == piece + off + (size_t)n);
                REQUIRE(r->out_len + dl <= len);
                memcpy(r->out + r->out_len, data, dl);
                r->out_len += dl;
            } else {
                REQUIRE(data == NULL);
            }
            off += (size_t)n;
            if (ol_chunked_done(&d)) {
                r->done = true;
                break;
            }
            REQUIRE(n > 0);
        }
        r->consumed = start + off;
        free(piece);
        if (plen == 0)
            break;
        start += plen;
    }
    REQUIRE(ol_chunked_total(&d) == r->out_len);
    REQUIRE(!max_body || r->out_len <= max_body);
    size_t tl;
    const char *t = ol_chunked_trailers(&d, &tl);
    if (r->done) {
        REQUIRE(t != NULL && tl >= 2 && tl <= OL_CHUNKED_TRAILER_MAX);
        REQUIRE(t[tl - 2] == '\r' && t[tl - 1] == '\n');
        memcpy(r->trl, t, tl);
        r->trl_len = tl;
        static struct ol_http_header h[OL_CHUNKED_TRAILER_MAX / 3];
        size_t nh;
        REQUIRE(ol_http_parse_headers(t, tl, 0, h, sizeof h / sizeof h[0], &nh) == (int)tl);
        const char *data;
        size_t dl;
        REQUIRE(ol_chunked_decode(&d, msg, len, &data, &dl) == 0 && dl == 0);
    } else {
        REQUIRE(t == NULL && tl == 0);
        if (!r->err)
            REQUIRE(r->consumed == len);
    }
}

static void same(const struct result *a, const struct result *b)
{
    REQUIRE(a->err == b->err && a->done == b->done);
    if (!a->err)
        REQUIRE(a->consumed == b->consumed);
    /* the same data, even when an error follows it */
    REQUIRE(a->out_len == b->out_len && memcmp(a->out, b->out, a->out_len) == 0);
    REQUIRE(a->trl_len == b->trl_len && memcmp(a->trl, b->trl, a->trl_len) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    uint8_t cfg = data[0];
    const char *msg = (const char *)data + 1;
    size_t len = size - 1;
    uint32_t max_line = (cfg & 1) ? 16 : 0;
    uint64_t max_body = (cfg & 2) ? 64 : 0;
    static struct result whole, halves, bytes;
    char *o1 = malloc(len + 1), *o2 = malloc(len + 1), *o3 = malloc(len + 1);
    REQUIRE(o1 && o2 && o3);
    whole.out = o1;
    halves.out = o2;
    bytes.out = o3;
    size_t split = len ? ((size_t)cfg * 131u + (unsigned char)msg[len - 1]) % (len + 1) : 0;
    run(msg, len, 0, len, max_body, max_line, &whole);
    run(msg, len, 0, split, max_body, max_line, &halves);
    run(msg, len, 1, 0, max_body, max_line, &bytes);
    same(&whole, &halves);
    same(&whole, &bytes);
    free(o1);
    free(o2);
    free(o3);
    return 0;
}
