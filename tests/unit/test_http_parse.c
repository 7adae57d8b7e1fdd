/*
 * test_http_parse.c - unit tests of src/http/parse.c: request-head parser,
 * header-block parser, head analysis (framing / smuggling rules) and the
 * chunked decoder, including every-prefix and every-split feeding and
 * inputs that end exactly at a PROT_NONE guard page.
 */
#include "olt.h"

#include "http/parse.h"

#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- helpers ---------------------------------------------------------- */

#define NH 16

static int parse(const char *s, struct ol_http_request *req, struct ol_http_header *h)
{
    return ol_http_parse_request(s, strlen(s), 0, req, h, NH);
}

static bool slice_is(const char *p, size_t n, const char *want)
{
    return n == strlen(want) && memcmp(p, want, n) == 0;
}

/* Parses s (must be a complete valid head) and analyzes it. */
static int analyze(const char *s, struct ol_http_head_info *info)
{
    static struct ol_http_header h[NH];
    static struct ol_http_request req;
    int n = parse(s, &req, h);
    if (n != (int)strlen(s))
        olt_fail(__FILE__, __LINE__, "parse of \"%s\" returned %d", s, n);
    int r = ol_http_head_analyze(&req, info);
    if (r == 0 && (info->status != 0 || info->reason != NULL))
        olt_fail(__FILE__, __LINE__, "success with a status");
    if (r != 0 && (r != -1 || info->reason == NULL || info->status == 0))
        olt_fail(__FILE__, __LINE__, "error without a status");
    return r;
}

/* The analysis status of s: 0 when accepted. */
static int status_of(const char *s)
{
    struct ol_http_head_info info;
    return analyze(s, &info) == 0 ? 0 : info.status;
}

/* Two pages, the second PROT_NONE; returns the address of the boundary. */
static char *guard_map(void **base, size_t *maplen)
{
    long pg = sysconf(_SC_PAGESIZE);
    *maplen = (size_t)pg * 2;
    char *m = mmap(NULL, *maplen, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    OLT_CHECK(m != MAP_FAILED);
    OLT_CHECK(mprotect(m + pg, (size_t)pg, PROT_NONE) == 0);
    *base = m;
    return m + pg;
}

/* ---- request parser --------------------------------------------------- */

OLT_TEST(http_parse_simple_get)
{
    const char *s = "GET /bucket/key?versionId=7 HTTP/1.1\r\n"
                    "Host: example.com\r\n"
                    "User-Agent:curl/8.0\r\n"
                    "Accept: \t */* \t\r\n"
                    "X-Empty:\r\n"
                    "X-Spaces:    \r\n"
                    "\r\n";
    struct ol_http_request req;
    struct ol_http_header h[NH];
    OLT_CHECK_EQ(parse(s, &req, h), strlen(s));
    OLT_CHECK(slice_is(req.method, req.method_len, "GET"));
    OLT_CHECK(slice_is(req.target, req.target_len, "/bucket/key?versionId=7"));
    OLT_CHECK_EQ(req.minor_version, 1);
    OLT_CHECK(req.headers == h);
    OLT_CHECK_EQ(req.num_headers, 5);
    OLT_CHECK(slice_is(h[0].name, h[0].name_len, "Host"));
    OLT_CHECK(slice_is(h[0].value, h[0].value_len, "example.com"));
    OLT_CHECK(slice_is(h[1].name, h[1].name_len, "User-Agent"));
    OLT_CHECK(slice_is(h[1].value, h[1].value_len, "curl/8.0"));
    OLT_CHECK(slice_is(h[2].value, h[2].value_len, "*/*"));
    OLT_CHECK(slice_is(h[3].name, h[3].name_len, "X-Empty"));
    OLT_CHECK_EQ(h[3].value_len, 0);
    OLT_CHECK_EQ(h[4].value_len, 0);
    /* slices point into the buffer */
    OLT_CHECK(req.method == s && h[0].name == s + strlen("GET /bucket/key?versionId=7 HTTP/1.1\r\n"));
}

OLT_TEST(http_parse_http10_and_inner_spaces)
{
    const char *s = "PUT /a HTTP/1.0\r\nX-Meta: a  b\tc\r\n\r\n";
    struct ol_http_request req;
    struct ol_http_header h[NH];
    OLT_CHECK_EQ(parse(s, &req, h), strlen(s));
    OLT_CHECK_EQ(req.minor_version, 0);
    OLT_CHECK(slice_is(h[0].value, h[0].value_len, "a  b\tc"));
}

OLT_TEST(http_parse_pipelined)
{
    const char *a = "GET /one HTTP/1.1\r\nHost: a\r\n\r\n";
    const char *b = "HEAD /two HTTP/1.1\r\nHost: b\r\nX: y\r\n\r\n";
    char buf[256];
    snprintf(buf, sizeof buf, "%s%s", a, b);
    size_t len = strlen(buf);
    struct ol_http_request req;
    struct ol_http_header h[NH];
    int n1 = ol_http_parse_request(buf, len, 0, &req, h, NH);
    OLT_CHECK_EQ(n1, strlen(a));
    OLT_CHECK(slice_is(req.target, req.target_len, "/one"));
    int n2 = ol_http_parse_request(buf + n1, len - (size_t)n1, 0, &req, h, NH);
    OLT_CHECK_EQ(n2, strlen(b));
    OLT_CHECK(slice_is(req.method, req.method_len, "HEAD"));
    OLT_CHECK(slice_is(req.target, req.target_len, "/two"));
    OLT_CHECK_EQ(req.num_headers, 2);
}

OLT_TEST(http_parse_leading_empty_lines_skipped)
{
    const char *s = "\r\n\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n";
    struct ol_http_request req;
    struct ol_http_header h[NH];
    OLT_CHECK_EQ(parse(s, &req, h), strlen(s));
    OLT_CHECK(slice_is(req.method, req.method_len, "GET"));
    OLT_CHECK_EQ(parse("\r\n\r\n", &req, h), OL_HTTP_INCOMPLETE);
    OLT_CHECK_EQ(parse("\r\r\nGET / HTTP/1.1\r\n\r\n", &req, h), OL_HTTP_INVALID);
}

OLT_TEST(http_parse_bare_lf_accepted)
{
    const char *s = "GET / HTTP/1.1\nHost: a\nX: b\r\n\n";
    struct ol_http_request req;
    struct ol_http_header h[NH];
    OLT_CHECK_EQ(parse(s, &req, h), strlen(s));
    OLT_CHECK_EQ(req.num_headers, 2);
    OLT_CHECK(slice_is(h[0].value, h[0].value_len, "a"));
    OLT_CHECK(slice_is(h[1].value, h[1].value_len, "b"));
    OLT_CHECK_EQ(parse("GET / HTTP/1.1\n\n", &req, h), 16);
}

OLT_TEST(http_parse_obs_text_and_target_bytes)
{
    const char *s = "GET /caf\xc3\xa9?x=%20 HTTP/1.1\r\nX-Name: na\xefve \x80\xff\r\n\r\n";
    struct ol_http_request req;
    struct ol_http_header h[NH];
    OLT_CHECK_EQ(parse(s, &req, h), strlen(s));
    OLT_CHECK(slice_is(req.target, req.target_len, "/caf\xc3\xa9?x=%20"));
    OLT_CHECK(slice_is(h[0].value, h[0].value_len, "na\xefve \x80\xff"));
    /* every tchar is accepted in method and names */
    const char *t = "!#$%&'*+-.^_`|~09azAZ * HTTP/1.1\r\n!#$%&'*+-.^_`|~09azAZ: v\r\n\r\n";
    OLT_CHECK_EQ(parse(t, &req, h), strlen(t));
    OLT_CHECK_EQ(req.method_len, 21);
}

/* Heads that must be rejected (-1), as (bytes, length) so NUL can appear. */
struct bad { const char *s; size_t n; };
#define BAD(lit) { lit, sizeof(lit) - 1 }
static const struct bad bad_heads[] = {
    BAD("GET  / HTTP/1.1\r\n\r\n"),               /* two spaces */
    BAD("GET /  HTTP/1.1\r\n\r\n"),
    BAD(" GET / HTTP/1.1\r\n\r\n"),               /* leading space */
    BAD("\tGET / HTTP/1.1\r\n\r\n"),
    BAD("G(T / HTTP/1.1\r\n\r\n"),                /* non-tchar method */
    BAD("GE\x80T / HTTP/1.1\r\n\r\n"),
    BAD(" / HTTP/1.1\r\n\r\n"),                   /* empty method */
    BAD("GET  HTTP/1.1\r\n\r\n"),                 /* empty target */
    BAD("GET / HTTP/1.2\r\n\r\n"),
    BAD("GET / HTTP/2.0\r\n\r\n"),
    BAD("GET / HTTP/0.9\r\n\r\n"),
    BAD("GET / http/1.1\r\n\r\n"),
    BAD("GET / HTTP/1.10\r\n\r\n"),
    BAD("GET / HTTP/1.1 \r\n\r\n"),               /* trailing space */
    BAD("GET /\r\n\r\n"),                         /* HTTP/0.9 style */
    BAD("GET / HTTP/1.1\rHost: a\r\n\r\n"),       /* bare CR */
    BAD("GET / HTTP/1.1\r\r\n\r\n"),
    BAD("GET /a\x01" "b HTTP/1.1\r\n\r\n"),       /* CTL in target */
    BAD("GET /a\x7f" "b HTTP/1.1\r\n\r\n"),       /* DEL in target */
    BAD("GET /a\tb HTTP/1.1\r\n\r\n"),
    BAD("GET /a\0b HTTP/1.1\r\n\r\n"),
    BAD("GET / HTTP/1.1\r\nHost : a\r\n\r\n"),    /* space before colon */
    BAD("GET / HTTP/1.1\r\nHost\t: a\r\n\r\n"),
    BAD("GET / HTTP/1.1\r\nHost: a\r\n b\r\n\r\n"), /* obs-fold */
    BAD("GET / HTTP/1.1\r\nHost: a\r\n\tb\r\n\r\n"),
    BAD("GET / HTTP/1.1\r\n Host: a\r\n\r\n"),    /* ws before first header */
    BAD("GET / HTTP/1.1\r\n: a\r\n\r\n"),         /* empty name */
    BAD("GET / HTTP/1.1\r\nHost a\r\n\r\n"),      /* no colon */
    BAD("GET / HTTP/1.1\r\nHost\r\n\r\n"),
    BAD("GET / HTTP/1.1\r\nX@Y: a\r\n\r\n"),      /* non-tchar name */
    BAD("GET / HTTP/1.1\r\nX\x80Y: a\r\n\r\n"),
    BAD("GET / HTTP/1.1\r\nX: a\0b\r\n\r\n"),     /* NUL in value */
    BAD("GET / HTTP/1.1\r\nX: a\x01" "b\r\n\r\n"),
    BAD("GET / HTTP/1.1\r\nX: a\x7f" "b\r\n\r\n"),
    BAD("GET / HTTP/1.1\r\nX: a\rb\r\n\r\n"),     /* bare CR in value */
    BAD("GET / HTTP/1.1\r\nX: a\r\r\n\r\n"),
    BAD("GET / HTTP/1.1\r\nX: a\r\n\rX"),         /* bare CR as end */
    BAD("GET / HTTP/1.1\r\nX: a\x0b" "b\r\n\r\n"),
};

OLT_TEST(http_parse_rejects)
{
    struct ol_http_request req;
    struct ol_http_header h[NH];
    for (size_t i = 0; i < sizeof bad_heads / sizeof bad_heads[0]; i++) {
        const struct bad *b = &bad_heads[i];
        int r = ol_http_parse_request(b->s, b->n, 0, &req, h, NH);
        if (r != OL_HTTP_INVALID)
            olt_fail(__FILE__, __LINE__, "bad head %zu returned %d", i, r);
        /* once invalid, every longer prefix stays invalid */
        bool seen = false;
        for (size_t k = 0; k <= b->n; k++) {
            r = ol_http_parse_request(b->s, k, 0, &req, h, NH);
            if (seen && r != OL_HTTP_INVALID)
                olt_fail(__FILE__, __LINE__, "bad head %zu prefix %zu: %d after -1", i, k, r);
            if (r == OL_HTTP_INVALID)
                seen = true;
            else if (r != OL_HTTP_INCOMPLETE)
                olt_fail(__FILE__, __LINE__, "bad head %zu prefix %zu: %d", i, k, r);
        }
    }
}

static const char *good_heads[] = {
    "GET / HTTP/1.1\r\n\r\n",
    "GET / HTTP/1.0\n\n",
    "\r\nPOST /b/k?uploads HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n",
    "PUT /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\nExpect: 100-continue\r\nX:\r\n\r\n",
};

OLT_TEST(http_parse_incomplete_every_prefix)
{
    struct ol_http_request req;
    struct ol_http_header h[NH];
    for (size_t i = 0; i < sizeof good_heads / sizeof good_heads[0]; i++) {
        const char *s = good_heads[i];
        size_t n = strlen(s);
        for (size_t k = 0; k < n; k++) {
            int r = ol_http_parse_request(s, k, 0, &req, h, NH);
            if (r != OL_HTTP_INCOMPLETE)
                olt_fail(__FILE__, __LINE__, "head %zu prefix %zu: %d", i, k, r);
        }
        OLT_CHECK_EQ(ol_http_parse_request(s, n, 0, &req, h, NH), n);
    }
}

OLT_TEST(http_parse_last_len_hint)
{
    struct ol_http_request req;
    struct ol_http_header h[NH];
    for (size_t i = 0; i < sizeof good_heads / sizeof good_heads[0]; i++) {
        const char *s = good_heads[i];
        size_t n = strlen(s);
        /* growing by one byte and by jumps, with the hint, agrees */
        for (size_t last = 0; last < n; last++)
            for (size_t k = last + 1; k <= n; k++) {
                int r = ol_http_parse_request(s, k, last, &req, h, NH);
                OLT_CHECK_EQ(r, k == n ? (int)n : OL_HTTP_INCOMPLETE);
            }
    }
    /* hint with the head already complete in the first bytes: still found */
    const char *s = "GET / HTTP/1.1\r\nHost: a\r\n\r\nXYZ";
    OLT_CHECK_EQ(ol_http_parse_request(s, strlen(s), strlen(s) - 4, &req, h, NH),
                 strlen(s) - 3);
    /* errors in new bytes wait for the end of the head under the hint */
    const char *e = "GET / HTTP/1.1\r\nX: a\0b";
    OLT_CHECK_EQ(ol_http_parse_request(e, 22, 20, &req, h, NH), OL_HTTP_INCOMPLETE);
    OLT_CHECK_EQ(ol_http_parse_request(e, 22, 0, &req, h, NH), OL_HTTP_INVALID);
}

OLT_TEST(http_parse_too_many_headers)
{
    const char *s = "GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
    struct ol_http_request req;
    struct ol_http_header h[3];
    OLT_CHECK_EQ(ol_http_parse_request(s, strlen(s), 0, &req, h, 3), strlen(s));
    OLT_CHECK_EQ(req.num_headers, 3);
    OLT_CHECK_EQ(ol_http_parse_request(s, strlen(s), 0, &req, h, 2), OL_HTTP_TOO_MANY_HEADERS);
    OLT_CHECK_EQ(ol_http_parse_request(s, strlen(s), 0, &req, NULL, 0), OL_HTTP_TOO_MANY_HEADERS);
    /* reported as soon as the extra line starts */
    OLT_CHECK_EQ(ol_http_parse_request(s, 29, 0, &req, h, 2), OL_HTTP_TOO_MANY_HEADERS);
    OLT_CHECK_EQ(ol_http_parse_request(s, 28, 0, &req, h, 2), OL_HTTP_INCOMPLETE);
    /* a malformed extra line is still malformed */
    const char *f = "GET / HTTP/1.1\r\nA: 1\r\n b\r\n\r\n";
    OLT_CHECK_EQ(ol_http_parse_request(f, strlen(f), 0, &req, h, 1), OL_HTTP_INVALID);
    const char *z = "GET / HTTP/1.1\r\n\r\n";
    OLT_CHECK_EQ(ol_http_parse_request(z, strlen(z), 0, &req, NULL, 0), strlen(z));
    OLT_CHECK_EQ(req.num_headers, 0);
}

OLT_TEST(http_parse_headers_block)
{
    struct ol_http_header h[NH];
    size_t n = 99;
    const char *s = "x-amz-checksum-crc32: AAAAAA==\r\nX-B:c\r\n\r\nBODY";
    size_t head = strlen(s) - 4;
    OLT_CHECK_EQ(ol_http_parse_headers(s, strlen(s), 0, h, NH, &n), head);
    OLT_CHECK_EQ(n, 2);
    OLT_CHECK(slice_is(h[0].value, h[0].value_len, "AAAAAA=="));
    for (size_t k = 0; k < head; k++) {
        OLT_CHECK_EQ(ol_http_parse_headers(s, k, 0, h, NH, &n), OL_HTTP_INCOMPLETE);
        for (size_t last = 0; last < k; last++)
            OLT_CHECK_EQ(ol_http_parse_headers(s, k, last, h, NH, &n), OL_HTTP_INCOMPLETE);
    }
    for (size_t last = 0; last < head; last++)
        OLT_CHECK_EQ(ol_http_parse_headers(s, head, last, h, NH, &n), head);
    OLT_CHECK_EQ(ol_http_parse_headers("\r\n", 2, 0, h, NH, &n), 2);
    OLT_CHECK_EQ(n, 0);
    OLT_CHECK_EQ(ol_http_parse_headers("\r\n", 2, 1, h, NH, &n), 2);
    OLT_CHECK_EQ(ol_http_parse_headers("\n", 1, 0, h, NH, &n), 1);
    OLT_CHECK_EQ(ol_http_parse_headers(s, strlen(s), 0, h, 1, &n), OL_HTTP_TOO_MANY_HEADERS);
    OLT_CHECK_EQ(ol_http_parse_headers(" a: b\r\n\r\n", 9, 0, h, NH, &n), OL_HTTP_INVALID);
    OLT_CHECK_EQ(ol_http_parse_headers("a: b\r\n c\r\n\r\n", 12, 0, h, NH, &n), OL_HTTP_INVALID);
    OLT_CHECK_EQ(ol_http_parse_headers("\r", 1, 0, h, NH, &n), OL_HTTP_INCOMPLETE);
    OLT_CHECK_EQ(ol_http_parse_headers("\rx", 2, 0, h, NH, &n), OL_HTTP_INVALID);
}

OLT_TEST(http_parse_guard_page)
{
    void *base;
    size_t maplen;
    char *edge = guard_map(&base, &maplen);
    struct ol_http_request req;
    struct ol_http_header h[NH];
    size_t n;
    /* every prefix of every good head, placed to end at the boundary */
    for (size_t i = 0; i < sizeof good_heads / sizeof good_heads[0]; i++) {
        size_t len = strlen(good_heads[i]);
        for (size_t k = 0; k <= len; k++) {
            char *p = edge - k;
            memcpy(p, good_heads[i], k);
            int r = ol_http_parse_request(p, k, 0, &req, h, NH);
            OLT_CHECK_EQ(r, k == len ? (int)len : OL_HTTP_INCOMPLETE);
            if (k > 0)
                OLT_CHECK_EQ(ol_http_parse_request(p, k, k - 1, &req, h, NH), r);
        }
    }
    /* every prefix of every bad head */
    for (size_t i = 0; i < sizeof bad_heads / sizeof bad_heads[0]; i++) {
        for (size_t k = 0; k <= bad_heads[i].n; k++) {
            char *p = edge - k;
            memcpy(p, bad_heads[i].s, k);
            int r = ol_http_parse_request(p, k, 0, &req, h, NH);
            OLT_CHECK(r == OL_HTTP_INCOMPLETE || r == OL_HTTP_INVALID);
        }
    }
    /* a header block, and a head cut inside each token class */
    const char *blk = "a: b\r\nc:d \r\n\r\n";
    for (size_t k = 0; k <= strlen(blk); k++) {
        char *p = edge - k;
        memcpy(p, blk, k);
        int r = ol_http_parse_headers(p, k, 0, h, NH, &n);
        OLT_CHECK_EQ(r, k == strlen(blk) ? (int)k : OL_HTTP_INCOMPLETE);
    }
    OLT_CHECK(munmap(base, maplen) == 0);
}

OLT_TEST(http_header_find_and_name_eq)
{
    const char *s = "GET / HTTP/1.1\r\nHost: a\r\nContent-Type: text/plain\r\n"
                    "content-type: second\r\n\r\n";
    struct ol_http_request req;
    struct ol_http_header h[NH];
    OLT_CHECK_EQ(parse(s, &req, h), strlen(s));
    const struct ol_http_header *f = ol_http_header_find(&req, "content-type");
    OLT_CHECK(f == &h[1]);
    OLT_CHECK(ol_http_header_find(&req, "host") == &h[0]);
    OLT_CHECK(ol_http_header_find(&req, "content") == NULL);
    OLT_CHECK(ol_http_header_find(&req, "x") == NULL);
    OLT_CHECK(ol_http_name_eq("CoNtEnT-LeNgTh", 14, "content-length"));
    OLT_CHECK(!ol_http_name_eq("Content-Lengt", 13, "content-length"));
    OLT_CHECK(!ol_http_name_eq("Content-Lengthx", 15, "content-length"));
    OLT_CHECK(!ol_http_name_eq("[", 1, "{"));   /* 0x5b | 0x20 == 0x7b */
    OLT_CHECK(ol_http_name_eq("", 0, ""));
}

/* ---- head analysis ---------------------------------------------------- */

OLT_TEST(http_analyze_defaults)
{
    struct ol_http_head_info info;
    OLT_CHECK_EQ(analyze("GET / HTTP/1.1\r\nHost: s3.local:9000\r\n\r\n", &info), 0);
    OLT_CHECK(info.keep_alive);
    OLT_CHECK(!info.chunked);
    OLT_CHECK(!info.expect_continue);
    OLT_CHECK(info.content_length == OL_HTTP_NO_LENGTH);
    OLT_CHECK(slice_is(info.host, info.host_len, "s3.local:9000"));
    OLT_CHECK_EQ(analyze("GET / HTTP/1.0\r\n\r\n", &info), 0);
    OLT_CHECK(!info.keep_alive);
    OLT_CHECK(info.host == NULL);
}

OLT_TEST(http_analyze_connection)
{
    struct ol_http_head_info info;
    OLT_CHECK_EQ(analyze("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", &info), 0);
    OLT_CHECK(!info.keep_alive);
    OLT_CHECK_EQ(analyze("GET / HTTP/1.1\r\nHost: a\r\nConnection: Keep-Alive, CLOSE\r\n\r\n", &info), 0);
    OLT_CHECK(!info.keep_alive);
    OLT_CHECK_EQ(analyze("GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nconnection: ,close,\r\n\r\n", &info), 0);
    OLT_CHECK(!info.keep_alive);
    OLT_CHECK_EQ(analyze("GET / HTTP/1.1\r\nHost: a\r\nConnection: closed, x-close\r\n\r\n", &info), 0);
    OLT_CHECK(info.keep_alive);
    OLT_CHECK_EQ(analyze("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &info), 0);
    OLT_CHECK(info.keep_alive);
    OLT_CHECK_EQ(analyze("GET / HTTP/1.0\r\nConnection: TE, KEEP-ALIVE \r\n\r\n", &info), 0);
    OLT_CHECK(info.keep_alive);
    OLT_CHECK_EQ(analyze("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", &info), 0);
    OLT_CHECK(!info.keep_alive);
    OLT_CHECK_EQ(analyze("GET / HTTP/1.0\r\nConnection: keep-alivex\r\n\r\n", &info), 0);
    OLT_CHECK(!info.keep_alive);
}

OLT_TEST(http_analyze_content_length)
{
    struct ol_http_head_info info;
    OLT_CHECK_EQ(analyze("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 42\r\n\r\n", &info), 0);
    OLT_CHECK(info.content_length == 42);
    OLT_CHECK_EQ(analyze("PUT / HTTP/1.1\r\nHost: a\r\ncontent-length:0\r\n\r\n", &info), 0);
    OLT_CHECK(info.content_length == 0);
    OLT_CHECK_EQ(analyze("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 007\r\n\r\n", &info), 0);
    OLT_CHECK(info.content_length == 7);
    OLT_CHECK_EQ(analyze("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775807\r\n\r\n", &info), 0);
    OLT_CHECK(info.content_length == (uint64_t)INT64_MAX);
    OLT_CHECK_EQ(analyze("PUT / HTTP/1.0\r\nContent-Length: 3\r\n\r\n", &info), 0);
    OLT_CHECK(info.content_length == 3);

    static const char *bad[] = {
        "Content-Length: 9223372036854775808",
        "Content-Length: 18446744073709551616",
        "Content-Length: 99999999999999999999999999",
        "Content-Length: -1",
        "Content-Length: +1",
        "Content-Length: 1a",
        "Content-Length: 0x10",
        "Content-Length: 1 2",
        "Content-Length: 1, 1",
        "Content-Length:",
        "Content-Length:   ",
        "Content-Length: 5\r\nContent-Length: 5",
        "Content-Length: 5\r\ncontent-length: 6",
        "Content-Length: 5\r\nTransfer-Encoding: chunked",
        "Transfer-Encoding: chunked\r\nContent-Length: 0",
    };
    char buf[256];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(buf, sizeof buf, "PUT / HTTP/1.1\r\nHost: a\r\n%s\r\n\r\n", bad[i]);
        if (status_of(buf) != 400)
            olt_fail(__FILE__, __LINE__, "\"%s\" gave %d", bad[i], status_of(buf));
    }
}

OLT_TEST(http_analyze_transfer_encoding)
{
    struct ol_http_head_info info;
    OLT_CHECK_EQ(analyze("PUT / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", &info), 0);
    OLT_CHECK(info.chunked);
    OLT_CHECK(info.content_length == OL_HTTP_NO_LENGTH);

    static const struct { const char *h; int status; } cases[] = {
        {"Transfer-Encoding: Chunked", 0},
        {"transfer-encoding: , chunked ,", 0},
        {"Transfer-Encoding: gzip", 400},
        {"Transfer-Encoding: identity", 400},
        {"Transfer-Encoding: chunked, gzip", 400},
        {"Transfer-Encoding: chunked, chunked", 400},
        {"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked", 400},
        {"Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip", 400},
        {"Transfer-Encoding: chunked;x=y", 400},
        {"Transfer-Encoding:", 400},
        {"Transfer-Encoding: ,", 400},
        {"Transfer-Encoding: chu nked", 400},
        {"Transfer-Encoding: \"chunked\"", 400},
        {"Transfer-Encoding: chunkedx", 400},
        {"Transfer-Encoding: gzip, chunked", 501},
        {"Transfer-Encoding: gzip;q=1 , chunked", 501},
        {"Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked", 501},
        {"Transfer-Encoding: deflate, gzip, chunked", 501},
        {"Transfer-Encoding: gzip, chunked, chunked", 400},
    };
    char buf[256];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(buf, sizeof buf, "PUT / HTTP/1.1\r\nHost: a\r\n%s\r\n\r\n", cases[i].h);
        int st = status_of(buf);
        if (st != cases[i].status)
            olt_fail(__FILE__, __LINE__, "\"%s\" gave %d, want %d", cases[i].h, st, cases[i].status);
    }
    OLT_CHECK_EQ(status_of("PUT / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
}

OLT_TEST(http_analyze_expect)
{
    struct ol_http_head_info info;
    OLT_CHECK_EQ(analyze("PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\n", &info), 0);
    OLT_CHECK(info.expect_continue);
    OLT_CHECK_EQ(analyze("PUT / HTTP/1.1\r\nHost: a\r\nexpect:  100-Continue \r\n\r\n", &info), 0);
    OLT_CHECK(info.expect_continue);
    OLT_CHECK_EQ(analyze("PUT / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n", &info), 0);
    OLT_CHECK(!info.expect_continue);
    OLT_CHECK_EQ(analyze("PUT / HTTP/1.1\r\nHost: a\r\nExpect:\r\n\r\n", &info), 0);
    OLT_CHECK(!info.expect_continue);
    OLT_CHECK_EQ(status_of("PUT / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\n\r\n"), 417);
    OLT_CHECK_EQ(status_of("PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue, x\r\n\r\n"), 417);
    OLT_CHECK_EQ(status_of("PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-continuex\r\n\r\n"), 417);
    OLT_CHECK_EQ(status_of("PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue;a=b\r\n\r\n"), 417);
}

OLT_TEST(http_analyze_host)
{
    OLT_CHECK_EQ(status_of("GET / HTTP/1.1\r\n\r\n"), 400);
    OLT_CHECK_EQ(status_of("GET / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n"), 400);
    OLT_CHECK_EQ(status_of("GET / HTTP/1.1\r\nHost: a b\r\n\r\n"), 400);
    OLT_CHECK_EQ(status_of("GET / HTTP/1.1\r\nHost: a/b\r\n\r\n"), 400);
    OLT_CHECK_EQ(status_of("GET / HTTP/1.1\r\nHost: user@a\r\n\r\n"), 400);
    OLT_CHECK_EQ(status_of("GET / HTTP/1.1\r\nHost: a\x80\r\n\r\n"), 400);
    OLT_CHECK_EQ(status_of("GET / HTTP/1.1\r\nHost: [::1]:9000\r\n\r\n"), 0);
    OLT_CHECK_EQ(status_of("GET / HTTP/1.1\r\nHost: b.s3.x-y_z~%41\r\n\r\n"), 0);
    OLT_CHECK_EQ(status_of("GET / HTTP/1.1\r\nHost:\r\n\r\n"), 0);
    OLT_CHECK_EQ(status_of("GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
    /* framing errors are reported before host errors */
    struct ol_http_head_info info;
    OLT_CHECK_EQ(analyze("GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n", &info), -1);
    OLT_CHECK_STR(info.reason, "invalid Content-Length");
}

/* ---- chunked decoder -------------------------------------------------- */

struct ck_result {
    int err;            /* 0, or the negative return */
    bool done;
    size_t consumed;    /* bytes of the message consumed in total */
    size_t out_len;
    char out[16384];
    size_t trl_len;
    char trl[OL_CHUNKED_TRAILER_MAX];
};

/*
 * Decodes msg[0..len) fed as pieces that end at cuts[0..ncuts) and len.
 * Each piece is copied to its own heap buffer of exactly its size, so a
 * read past a piece is an ASan report.
 */
static void ck_run(const char *msg, size_t len, const size_t *cuts, size_t ncuts,
                   uint64_t max_body, uint32_t max_line, struct ck_result *r)
{
    struct ol_chunked d;
    memset(r, 0, sizeof *r);
    ol_chunked_init(&d, max_body, max_line);
    size_t start = 0;
    for (size_t c = 0; c <= ncuts && !r->done && !r->err; c++) {
        size_t stop = c < ncuts ? cuts[c] : len;
        size_t plen = stop - start;
        char *piece = malloc(plen ? plen : 1);
        OLT_CHECK(piece != NULL);
        memcpy(piece, msg + start, plen);
        size_t off = 0;
        while (off < plen) {
            const char *data;
            size_t dl;
            ssize_t n = ol_chunked_decode(&d, piece + off, plen - off, &data, &dl);
            if (n < 0) {
                r->err = (int)n;
                OLT_CHECK_EQ(ol_chunked_decode(&d, piece + off, plen - off, &data, &dl), n);
                break;
            }
            OLT_CHECK((size_t)n <= plen - off);
            if (dl) {
                OLT_CHECK(data >= piece + off && data + dl <= piece + off + (size_t)n);
                OLT_CHECK(r->out_len + dl <= sizeof r->out);
                memcpy(r->out + r->out_len, data, dl);
                r->out_len += dl;
            } else {
                OLT_CHECK(data == NULL);
            }
            off += (size_t)n;
            if (ol_chunked_done(&d)) {
                r->done = true;
                break;
            }
            OLT_CHECK(n > 0);   /* progress while not done */
        }
        r->consumed = start + off;
        free(piece);
        start = stop;
    }
    if (r->done) {
        size_t tl;
        const char *t = ol_chunked_trailers(&d, &tl);
        OLT_CHECK(t != NULL && tl <= sizeof r->trl);
        memcpy(r->trl, t, tl);
        r->trl_len = tl;
        OLT_CHECK(ol_chunked_total(&d) == r->out_len);
        const char *data;
        size_t dl;
        OLT_CHECK_EQ(ol_chunked_decode(&d, "x", 1, &data, &dl), 0);
    } else {
        size_t tl = 7;
        OLT_CHECK(ol_chunked_trailers(&d, &tl) == NULL && tl == 0);
    }
}

static void ck_whole(const char *msg, size_t len, struct ck_result *r)
{
    ck_run(msg, len, NULL, 0, 0, 0, r);
}

static bool ck_same(const struct ck_result *a, const struct ck_result *b)
{
    return a->err == b->err && a->done == b->done &&
           (a->err || a->consumed == b->consumed) &&
           a->out_len == b->out_len && memcmp(a->out, b->out, a->out_len) == 0 &&
           a->trl_len == b->trl_len && memcmp(a->trl, b->trl, a->trl_len) == 0;
}

/* Feeds msg whole, one byte at a time and in every 2-way split; all agree. */
static void ck_all_splits(const char *msg, size_t len, struct ck_result *whole)
{
    static struct ck_result r;
    static size_t cuts[8192];
    ck_whole(msg, len, whole);
    OLT_CHECK(len <= sizeof cuts / sizeof cuts[0]);
    for (size_t i = 0; i < len; i++)
        cuts[i] = i + 1;
    ck_run(msg, len, cuts, len ? len - 1 : 0, 0, 0, &r);
    if (!ck_same(whole, &r))
        olt_fail(__FILE__, __LINE__, "byte-at-a-time differs for \"%.40s\"", msg);
    for (size_t k = 0; k <= len; k++) {
        ck_run(msg, len, &k, 1, 0, 0, &r);
        if (!ck_same(whole, &r))
            olt_fail(__FILE__, __LINE__, "split at %zu differs for \"%.40s\"", k, msg);
    }
}

#define CK(lit, r) ck_all_splits(lit, sizeof(lit) - 1, r)

OLT_TEST(chunked_simple)
{
    static struct ck_result r;
    CK("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", &r);
    OLT_CHECK(r.done && r.err == 0);
    OLT_CHECK_EQ(r.consumed, 26);
    OLT_CHECK_EQ(r.out_len, 11);
    OLT_CHECK_MEM(r.out, "hello world", 11);
    OLT_CHECK_EQ(r.trl_len, 2);
    OLT_CHECK_MEM(r.trl, "\r\n", 2);
    CK("0\r\n\r\n", &r);
    OLT_CHECK(r.done && r.out_len == 0 && r.consumed == 5);
    CK("000\r\n\r\n", &r);
    OLT_CHECK(r.done);
    CK("A\r\n0123456789\r\na\r\nabcdefghij\r\n0\r\n\r\n", &r);
    OLT_CHECK(r.done && r.out_len == 20);
    CK("1\r\n\0\r\n0\r\n\r\n", &r);       /* any byte is data */
    OLT_CHECK(r.done && r.out_len == 1 && r.out[0] == 0);
}

OLT_TEST(chunked_stops_at_body_end)
{
    static struct ck_result r;
    CK("3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\n\r\n", &r);
    OLT_CHECK(r.done);
    OLT_CHECK_EQ(r.consumed, 13);
    /* incomplete bodies are not done and consume everything */
    CK("3\r\nabc\r\n0\r\n\r", &r);
    OLT_CHECK(!r.done && r.err == 0 && r.consumed == 12 && r.out_len == 3);
    CK("3\r\nab", &r);
    OLT_CHECK(!r.done && r.err == 0 && r.out_len == 2);
}

OLT_TEST(chunked_spans_point_into_input)
{
    const char *m = "4\r\nwiki\r\n0\r\n\r\n";
    struct ol_chunked d;
    ol_chunked_init(&d, 0, 0);
    const char *data = (const char *)1;
    size_t dl = 99;
    ssize_t n = ol_chunked_decode(&d, m, strlen(m), &data, &dl);
    OLT_CHECK_EQ(n, 7);                   /* size line, then the span ends the call */
    OLT_CHECK(data == m + 3 && dl == 4);
    n = ol_chunked_decode(&d, m + 7, strlen(m) - 7, &data, &dl);
    OLT_CHECK_EQ(n, strlen(m) - 7);
    OLT_CHECK(data == NULL && dl == 0);
    OLT_CHECK(ol_chunked_done(&d));
    OLT_CHECK_EQ(ol_chunked_decode(&d, m, strlen(m), &data, &dl), 0);
    OLT_CHECK_EQ(ol_chunked_decode(&d, m, 0, &data, &dl), 0);
}

OLT_TEST(chunked_extensions)
{
    static struct ck_result r;
    static const char *ok[] = {
        "5;a\r\nhello\r\n0\r\n\r\n",
        "5;a=b\r\nhello\r\n0;last\r\n\r\n",
        "5 ;a\r\nhello\r\n0\r\n\r\n",
        "5\t; a = b ;c\r\nhello\r\n0\r\n\r\n",
        "5;a=\"x y;\\\"\\\\z\"\r\nhello\r\n0\r\n\r\n",
        "5;a=\"\";b=\"\x80\t\"\r\nhello\r\n0\r\n\r\n",
        "5;a=\"q\" ;b\r\nhello\r\n0\r\n\r\n",
        "5;chunk-signature=0123abcd\r\nhello\r\n0;chunk-signature=ff\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        ck_all_splits(ok[i], strlen(ok[i]), &r);
        if (!r.done || r.out_len != 5 || memcmp(r.out, "hello", 5) != 0)
            olt_fail(__FILE__, __LINE__, "extension case %zu: err %d done %d", i, r.err, r.done);
    }
    static const char *bad[] = {
        "5;\r\nhello\r\n0\r\n\r\n",
        "5; \r\nhello\r\n0\r\n\r\n",
        "5;a=\r\nhello\r\n0\r\n\r\n",
        "5;a= \r\nhello\r\n0\r\n\r\n",
        "5;a \r\nhello\r\n0\r\n\r\n",
        "5;a=b \r\nhello\r\n0\r\n\r\n",
        "5;a b\r\nhello\r\n0\r\n\r\n",
        "5;a=b c\r\nhello\r\n0\r\n\r\n",
        "5;a=\"x\r\nhello\r\n0\r\n\r\n",
        "5;a=\"x\x01\"\r\nhello\r\n0\r\n\r\n",
        "5;a=\"x\\\x01\"\r\nhello\r\n0\r\n\r\n",
        "5;a=\"x\"y\r\nhello\r\n0\r\n\r\n",
        "5;a@b\r\nhello\r\n0\r\n\r\n",
        "5;a=b\nhello\r\n0\r\n\r\n",
        "5;a=b\rhello\r\n0\r\n\r\n",
        "5,a\r\nhello\r\n0\r\n\r\n",
        "5 \r\nhello\r\n0\r\n\r\n",
        "5\t\r\nhello\r\n0\r\n\r\n",
        "5;a=\"x\" \r\nhello\r\n0\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_all_splits(bad[i], strlen(bad[i]), &r);
        if (r.err != OL_HTTP_INVALID)
            olt_fail(__FILE__, __LINE__, "bad extension case %zu accepted", i);
    }
}

OLT_TEST(chunked_trailers)
{
    static struct ck_result r;
    const char *m = "3\r\nabc\r\n0\r\nx-amz-checksum-crc32: NhCmhg==\r\nX-B:  c \r\n\r\nNEXT";
    ck_all_splits(m, strlen(m), &r);
    OLT_CHECK(r.done);
    OLT_CHECK_EQ(r.consumed, strlen(m) - 4);
    const char *want = "x-amz-checksum-crc32: NhCmhg==\r\nX-B:  c \r\n\r\n";
    OLT_CHECK_EQ(r.trl_len, strlen(want));
    OLT_CHECK_MEM(r.trl, want, r.trl_len);
    struct ol_http_header h[4];
    size_t n;
    OLT_CHECK_EQ(ol_http_parse_headers(r.trl, r.trl_len, 0, h, 4, &n), r.trl_len);
    OLT_CHECK_EQ(n, 2);
    OLT_CHECK(slice_is(h[0].name, h[0].name_len, "x-amz-checksum-crc32"));
    OLT_CHECK(slice_is(h[0].value, h[0].value_len, "NhCmhg=="));
    OLT_CHECK(slice_is(h[1].value, h[1].value_len, "c"));
}

OLT_TEST(chunked_trailers_invalid)
{
    static struct ck_result r;
    CK("0\r\n x: a\r\n\r\n", &r);            /* whitespace before a field */
    OLT_CHECK_EQ(r.err, OL_HTTP_INVALID);
    CK("0\r\nx: a\r\n b\r\n\r\n", &r);       /* obs-fold */
    OLT_CHECK_EQ(r.err, OL_HTTP_INVALID);
    CK("0\r\nx a\r\n\r\n", &r);              /* no colon */
    OLT_CHECK_EQ(r.err, OL_HTTP_INVALID);
    CK("0\r\nx : a\r\n\r\n", &r);
    OLT_CHECK_EQ(r.err, OL_HTTP_INVALID);
    CK("0\r\nx: a\nb: c\r\n\r\n", &r);       /* bare LF */
    OLT_CHECK_EQ(r.err, OL_HTTP_INVALID);
    CK("0\r\nx: a\r\n\n", &r);
    OLT_CHECK_EQ(r.err, OL_HTTP_INVALID);
    CK("0\r\n\n", &r);
    OLT_CHECK_EQ(r.err, OL_HTTP_INVALID);
    CK("0\r\nx: a\rb\r\n\r\n", &r);          /* bare CR */
    OLT_CHECK_EQ(r.err, OL_HTTP_INVALID);
    CK("0\r\n\rx", &r);
    OLT_CHECK_EQ(r.err, OL_HTTP_INVALID);
    CK("0\r\nx: a\0\r\n\r\n", &r);           /* NUL in a value */
    OLT_CHECK_EQ(r.err, OL_HTTP_INVALID);
}

OLT_TEST(chunked_trailer_limit)
{
    static char m[OL_CHUNKED_TRAILER_MAX + 64];
    static struct ck_result r;
    /* "0\r\n" + "x: " + v + "\r\n" + "\r\n": trailer section = 3 + v + 4 */
    for (int extra = -1; extra <= 1; extra++) {
        size_t vlen = OL_CHUNKED_TRAILER_MAX - 7 + (size_t)(long)extra;
        size_t n = 0;
        memcpy(m, "0\r\nx: ", 6);
        n = 6;
        memset(m + n, 'v', vlen);
        n += vlen;
        memcpy(m + n, "\r\n\r\n", 4);
        n += 4;
        ck_run(m, n, NULL, 0, 0, 0, &r);
        if (extra <= 0) {
            OLT_CHECK(r.done);
            OLT_CHECK_EQ(r.trl_len, 7 + vlen);
        } else {
            OLT_CHECK_EQ(r.err, OL_HTTP_INVALID);
        }
    }
}

OLT_TEST(chunked_invalid_sizes)
{
    static struct ck_result r;
    static const char *bad[] = {
        "\r\nabc\r\n0\r\n\r\n",          /* empty size */
        "g\r\n",
        "-1\r\n",
        "+1\r\n",
        "0x5\r\nhello\r\n0\r\n\r\n",
        " 5\r\nhello\r\n",
        ";a\r\n",
        "5\nhello\r\n0\r\n\r\n",         /* bare LF */
        "5\r\rhello\r\n",
        "5\rhello\r\n",
        "0\n\r\n",
        "00000000000000001\r\nx\r\n0\r\n\r\n",  /* 17 digits */
        "8000000000000000\r\n",          /* 2^63 */
        "ffffffffffffffff\r\n",
        "10000000000000000\r\n",
        "5\r\nhelloX\r\n0\r\n\r\n",      /* missing CRLF after data */
        "5\r\nhello\n0\r\n\r\n",
        "5\r\nhello\r0\r\n\r\n",
        "5\r\nhello0\r\n\r\n",
        "3\r\nhello\r\n0\r\n\r\n",      /* size too small */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_all_splits(bad[i], strlen(bad[i]), &r);
        if (r.err != OL_HTTP_INVALID)
            olt_fail(__FILE__, __LINE__, "bad size case %zu: err %d done %d", i, r.err, r.done);
    }
    /* the largest sizes are accepted (then wait for data) */
    CK("7fffffffffffffff\r\nab", &r);
    OLT_CHECK(!r.done && r.err == 0 && r.out_len == 2);
    CK("0000000000000005\r\nhello\r\n0\r\n\r\n", &r);
    OLT_CHECK(r.done && r.out_len == 5);
}

OLT_TEST(chunked_line_limit)
{
    static char m[OL_CHUNKED_LINE_MAX + 64];
    static struct ck_result r;
    /* "1;" + name of length L: line length 2 + L */
    for (int extra = 0; extra <= 1; extra++) {
        size_t L = OL_CHUNKED_LINE_MAX - 2 + (size_t)extra;
        m[0] = '1';
        m[1] = ';';
        memset(m + 2, 'e', L);
        memcpy(m + 2 + L, "\r\nx\r\n0\r\n\r\n", 10);
        ck_run(m, 12 + L, NULL, 0, 0, 0, &r);
        if (extra == 0)
            OLT_CHECK(r.done && r.out_len == 1);
        else
            OLT_CHECK_EQ(r.err, OL_HTTP_INVALID);
    }
    /* a huge extension is refused early, before its end arrives */
    memset(m, 'e', sizeof m);
    m[0] = '1';
    m[1] = ';';
    ck_run(m, sizeof m, NULL, 0, 0, 0, &r);
    OLT_CHECK_EQ(r.err, OL_HTTP_INVALID);
    /* a caller limit */
    const char *s = "1;abcdef\r\nx\r\n0\r\n\r\n";
    ck_run(s, strlen(s), NULL, 0, 0, 8, &r);
    OLT_CHECK(r.done);
    ck_run(s, strlen(s), NULL, 0, 0, 7, &r);
    OLT_CHECK_EQ(r.err, OL_HTTP_INVALID);
    /* the limit applies to every chunk line, the last one included */
    const char *t = "1\r\nx\r\n0;abcdefgh\r\n\r\n";
    ck_run(t, strlen(t), NULL, 0, 0, 8, &r);
    OLT_CHECK_EQ(r.err, OL_HTTP_INVALID);
}

OLT_TEST(chunked_max_body)
{
    static struct ck_result r;
    const char *m = "5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n";
    ck_run(m, strlen(m), NULL, 0, 10, 0, &r);
    OLT_CHECK(r.done && r.out_len == 10);
    ck_run(m, strlen(m), NULL, 0, 9, 0, &r);
    OLT_CHECK_EQ(r.err, OL_CHUNKED_TOO_LARGE);
    OLT_CHECK_EQ(r.out_len, 5);         /* the first chunk was handed out */
    ck_run(m, strlen(m), NULL, 0, 4, 0, &r);
    OLT_CHECK_EQ(r.err, OL_CHUNKED_TOO_LARGE);
    OLT_CHECK_EQ(r.out_len, 0);
}

OLT_TEST(chunked_long_message_all_splits)
{
    /* several chunks, extensions and trailers in one message */
    static struct ck_result r;
    CK("1\r\na\r\n1F;n=\"v\"\r\n0123456789abcdef0123456789abcde\r\n"
       "3 ; x = y\r\nxyz\r\n0\r\nA: 1\r\nb-c:\r\n\r\n", &r);
    OLT_CHECK(r.done && r.err == 0);
    OLT_CHECK_EQ(r.out_len, 35);
    OLT_CHECK_MEM(r.out, "a0123456789abcdef0123456789abcdexyz", 35);
    OLT_CHECK_EQ(r.trl_len, 14);
}

OLT_TEST(chunked_guard_page)
{
    void *base;
    size_t maplen;
    char *edge = guard_map(&base, &maplen);
    const char *m = "4;a=\"b\"\r\nwiki\r\n0\r\nx: y\r\n\r\n";
    size_t len = strlen(m);
    /* every prefix ends at the boundary; then its remainder does */
    for (size_t k = 0; k <= len; k++) {
        struct ol_chunked d;
        ol_chunked_init(&d, 0, 0);
        size_t got = 0;
        char out[8];
        const char *parts[2] = {m, m + k};
        size_t plen[2] = {k, len - k};
        for (int i = 0; i < 2; i++) {
            char *p = edge - plen[i];
            memcpy(p, parts[i], plen[i]);
            size_t off = 0;
            while (off < plen[i] && !ol_chunked_done(&d)) {
                const char *data;
                size_t dl;
                ssize_t n = ol_chunked_decode(&d, p + off, plen[i] - off, &data, &dl);
                OLT_CHECK(n > 0);
                OLT_CHECK(got + dl <= sizeof out);
                memcpy(out + got, data ? data : "", dl);
                got += dl;
                off += (size_t)n;
            }
        }
        OLT_CHECK(ol_chunked_done(&d));
        OLT_CHECK(got == 4 && memcmp(out, "wiki", 4) == 0);
    }
    OLT_CHECK(munmap(base, maplen) == 0);
}
