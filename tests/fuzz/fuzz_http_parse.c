/*
 * fuzz_http_parse.c - libFuzzer target for the request-head parser, the
 * header-block parser and head analysis (src/http/parse.c).
 *
 * The input is parsed as a request head and as a header block. Aborts when
 * an invariant of the parse.h contract breaks: a return outside
 * {-3,-2,-1} and 1..len, a slice outside the bytes consumed, a name that is
 * not a token, a value with CR/LF or untrimmed whitespace, a shorter prefix
 * of a complete head that is not -2, a longer buffer that changes a
 * complete result, a last_len hint that changes the answer, or an analysis
 * that returns an impossible combination. Out-of-bounds reads are left to
 * ASan (libFuzzer hands over a buffer of exactly the input size).
 */
#include "http/parse.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAXH 32

#define REQUIRE(c) do { if (!(c)) abort(); } while (0)

static bool is_tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool in(const char *p, size_t n, const char *lo, const char *hi)
{
    return p >= lo && p <= hi && n <= (size_t)(hi - p);
}

static void check_headers(const struct ol_http_header *h, size_t n,
                          const char *buf, size_t used)
{
    for (size_t i = 0; i < n; i++) {
        REQUIRE(in(h[i].name, h[i].name_len, buf, buf + used));
        REQUIRE(in(h[i].value, h[i].value_len, buf, buf + used));
        REQUIRE(h[i].name_len > 0);
        REQUIRE(h[i].name + h[i].name_len < h[i].value || h[i].value_len == 0);
        REQUIRE(h[i].name[h[i].name_len] == ':');
        for (size_t k = 0; k < h[i].name_len; k++)
            REQUIRE(is_tchar((unsigned char)h[i].name[k]));
        for (size_t k = 0; k < h[i].value_len; k++) {
            unsigned char c = (unsigned char)h[i].value[k];
            REQUIRE(c == '\t' || (c >= 0x20 && c != 0x7f));
        }
        if (h[i].value_len) {
            REQUIRE(h[i].value[0] != ' ' && h[i].value[0] != '\t');
            char last = h[i].value[h[i].value_len - 1];
            REQUIRE(last != ' ' && last != '\t');
        }
        if (i > 0)
            REQUIRE(h[i].name > h[i - 1].value);
    }
}

static void check_analysis(const struct ol_http_request *req, const char *buf, int used)
{
    struct ol_http_head_info info;
    int a = ol_http_head_analyze(req, &info);
    if (a != 0) {
        REQUIRE(a == -1);
        REQUIRE(info.status == 400 || info.status == 417 || info.status == 501);
        REQUIRE(info.reason != NULL && info.reason[0] != '\0');
        return;
    }
    REQUIRE(info.status == 0 && info.reason == NULL);
    REQUIRE(info.content_length == OL_HTTP_NO_LENGTH ||
            info.content_length <= (uint64_t)INT64_MAX);
    REQUIRE(!(info.chunked && info.content_length != OL_HTTP_NO_LENGTH));
    REQUIRE(!info.chunked || req->minor_version == 1);
    REQUIRE(!info.expect_continue || req->minor_version == 1);
    if (info.host)
        REQUIRE(in(info.host, info.host_len, buf, buf + used));
    else
        REQUIRE(req->minor_version == 0);
    const struct ol_http_header *h = ol_http_header_find(req, "content-length");
    REQUIRE((h != NULL) == (info.content_length != OL_HTTP_NO_LENGTH));
}

static void fuzz_request(const char *buf, size_t len)
{
    static struct ol_http_header h[MAXH], h2[MAXH];
    struct ol_http_request req, req2;
    int r = ol_http_parse_request(buf, len, 0, &req, h, MAXH);
    REQUIRE(r == -1 || r == -2 || r == -3 || (r > 0 && (size_t)r <= len));
    if (r > 0) {
        REQUIRE(req.headers == h && req.num_headers <= MAXH);
        REQUIRE(req.minor_version == 0 || req.minor_version == 1);
        REQUIRE(in(req.method, req.method_len, buf, buf + r) && req.method_len > 0);
        REQUIRE(in(req.target, req.target_len, buf, buf + r) && req.target_len > 0);
        REQUIRE(req.method + req.method_len + 1 == req.target);
        for (size_t k = 0; k < req.method_len; k++)
            REQUIRE(is_tchar((unsigned char)req.method[k]));
        for (size_t k = 0; k < req.target_len; k++) {
            unsigned char c = (unsigned char)req.target[k];
            REQUIRE(c > 0x20 && c != 0x7f);
        }
        check_headers(h, req.num_headers, buf, (size_t)r);
        REQUIRE(buf[r - 1] == '\n');
        /* every shorter prefix is incomplete; the head alone parses the same */
        REQUIRE(ol_http_parse_request(buf, (size_t)r - 1, 0, &req2, h2, MAXH) == -2);
        REQUIRE(ol_http_parse_request(buf, (size_t)r, 0, &req2, h2, MAXH) == r);
        REQUIRE(req2.num_headers == req.num_headers);
        /* more room for headers changes nothing */
        REQUIRE(ol_http_parse_request(buf, len, 0, &req2, h2, MAXH) == r);
        check_analysis(&req, buf, r);
    } else if (r == -2) {
        REQUIRE(len == 0 || ol_http_parse_request(buf, len - 1, 0, &req2, h2, MAXH) == -2);
    } else {
        /* an error stays an error with more bytes; never "complete" */
        int r2 = ol_http_parse_request(buf, len, 0, &req2, h2, MAXH / 2);
        REQUIRE(r2 == -1 || r2 == -3);
    }
    /* the last_len hint: any earlier incomplete length gives the same answer
     * (errors may be deferred to -2) */
    size_t last = len ? (unsigned char)buf[0] * 31u % len : 0;
    if (ol_http_parse_request(buf, last, 0, &req2, h2, MAXH) == -2) {
        int rh = ol_http_parse_request(buf, len, last, &req2, h2, MAXH);
        if (r > 0 || r == -2)
            REQUIRE(rh == r);
        else
            REQUIRE(rh == r || rh == -2);
    }
}

static void fuzz_headers(const char *buf, size_t len)
{
    static struct ol_http_header h[MAXH], h2[MAXH];
    size_t n = 12345, n2;
    int r = ol_http_parse_headers(buf, len, 0, h, MAXH, &n);
    REQUIRE(r == -1 || r == -2 || r == -3 || (r > 0 && (size_t)r <= len));
    if (r > 0) {
        REQUIRE(n <= MAXH);
        check_headers(h, n, buf, (size_t)r);
        REQUIRE(buf[r - 1] == '\n');
        REQUIRE(ol_http_parse_headers(buf, (size_t)r - 1, 0, h2, MAXH, &n2) == -2);
        for (size_t last = 0; last < (size_t)r && last < 64; last++)
            REQUIRE(ol_http_parse_headers(buf, (size_t)r, last, h2, MAXH, &n2) == r);
    } else {
        REQUIRE(n == 12345);
    }
    /* the last_len hint never changes a complete or incomplete answer */
    size_t last = len ? (unsigned char)buf[len - 1] * 7u % len : 0;
    if (ol_http_parse_headers(buf, last, 0, h2, MAXH, &n2) == -2) {
        int rh = ol_http_parse_headers(buf, len, last, h2, MAXH, &n2);
        if (r > 0 || r == -2)
            REQUIRE(rh == r);
        else
            REQUIRE(rh == r || rh == -2);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_request((const char *)data, size);
    fuzz_headers((const char *)data, size);
    return 0;
}
