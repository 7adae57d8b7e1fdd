/*
 * test_alloc.c - proves the HTTP hot path does no heap allocation.
 *
 * This binary replaces malloc/calloc/realloc/free with counting wrappers
 * around glibc's (symbol interposition in the executable), so it is built
 * only without sanitizers (build/alloc_tests). The server runs in-process
 * on an event loop; only allocations made on that loop's thread are counted.
 * After a warm-up, thousands of requests (keep-alive, pipelined, with
 * Content-Length and chunked bodies, streamed responses) must allocate
 * nothing.
 */
#include "olt.h"

#include "http/server.h"
#include "rt/loop.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

static __thread int tl_counting;
static _Atomic long g_allocs;

void *malloc(size_t n)
{
    if (tl_counting)
        atomic_fetch_add(&g_allocs, 1);
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b)
{
    if (tl_counting)
        atomic_fetch_add(&g_allocs, 1);
    return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n)
{
    if (tl_counting)
        atomic_fetch_add(&g_allocs, 1);
    return __libc_realloc(p, n);
}
void free(void *p) { __libc_free(p); }

/* ---- a handler: GET answers a small body; PUT/POST consume the body and
 * answer its length; GET /stream sends 200 KiB in pieces via on_drain. ---- */

struct hstate {
    uint64_t body;
    uint64_t left; /* /stream */
};
static struct hstate g_state; /* one request at a time per connection here */
static char g_chunk[8192];

static void h_stream(ol_http_req *r)
{
    while (g_state.left) {
        size_t n = g_state.left < sizeof g_chunk ? g_state.left : sizeof g_chunk;
        if (ol_http_resp_write(r, g_chunk, n) < 0)
            return;
        g_state.left -= n;
    }
    ol_http_resp_end(r);
}

static void h_request(ol_http_req *r)
{
    const struct ol_http_request *h = ol_http_req_head(r);
    g_state.body = 0;
    if (h->target_len == 7 && memcmp(h->target, "/stream", 7) == 0) {
        g_state.left = 200 * 1024;
        ol_http_resp_start(r, 200, "Content-Type: application/octet-stream\r\n", -1);
        h_stream(r);
    }
}

static void h_body(ol_http_req *r, const char *d, size_t n) { g_state.body += n; }

static void h_body_end(ol_http_req *r)
{
    const struct ol_http_request *h = ol_http_req_head(r);
    if (h->target_len == 7 && memcmp(h->target, "/stream", 7) == 0)
        return;
    char out[64];
    int n = snprintf(out, sizeof out, "%llu\n", (unsigned long long)g_state.body);
    ol_http_resp_simple(r, 200, "text/plain", out, (size_t)n);
}

static void h_drain(ol_http_req *r) { h_stream(r); }

static struct ol_http_server *g_srv;

/* Self-check: an allocation on the loop thread must be counted. */
static _Atomic int g_probe_done;
static void probe_alloc(ol_loop *loop, struct ol_msg *m)
{
    void *volatile p = malloc(16);
    free(p);
    atomic_store(&g_probe_done, 1);
}

static int srv_init(ol_loop *loop, void *arg)
{
    struct ol_http_limits lim = {.max_header_bytes = 8192, .max_headers = 64,
                                 .header_timeout_ms = 10000, .idle_timeout_ms = 10000,
                                 .max_conns = 64};
    struct ol_http_handler h = {.on_request = h_request, .on_body = h_body,
                                .on_body_end = h_body_end, .on_drain = h_drain};
    char err[256];
    if (ol_http_server_create(loop, "127.0.0.1:0", &lim, &h, &g_srv, err, sizeof err) < 0) {
        fprintf(stderr, "server: %s\n", err);
        return -1;
    }
    tl_counting = 1; /* from here on, this thread's allocations are counted */
    return 0;
}

/* ---- client helpers ---------------------------------------------------------- */

static int g_port;

static int dial(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g_port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0)
        olt_fail(__FILE__, __LINE__, "connect: %s", strerror(errno));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* Reads responses until `count` final "HTTP/1.1 200" status lines and their
 * bodies have been seen; returns total bytes read. Bodies here are small or
 * chunked and end with "0\r\n\r\n". Simple framing for a known server. */
static size_t read_responses(int fd, int count, int chunked)
{
    static char buf[1 << 20];
    size_t have = 0;
    int seen = 0;
    while (seen < count) {
        ssize_t n = read(fd, buf + have, sizeof buf - have);
        if (n <= 0)
            olt_fail(__FILE__, __LINE__, "read: %zd (%s)", n, strerror(errno));
        have += (size_t)n;
        /* count complete responses */
        seen = 0;
        const char *p = buf, *end = buf + have;
        while (p < end) {
            const char *hdr_end = memmem(p, (size_t)(end - p), "\r\n\r\n", 4);
            if (!hdr_end)
                break;
            if (chunked) {
                const char *fin = memmem(hdr_end, (size_t)(end - hdr_end), "\r\n0\r\n\r\n", 7);
                if (!fin)
                    break;
                p = fin + 7;
            } else {
                const char *cl = memmem(p, (size_t)(hdr_end - p), "Content-Length: ", 16);
                size_t len = cl ? strtoul(cl + 16, NULL, 10) : 0;
                if ((size_t)(end - hdr_end - 4) < len)
                    break;
                p = hdr_end + 4 + len;
            }
            seen++;
        }
        if (seen >= count && p != end)
            olt_fail(__FILE__, __LINE__, "trailing bytes after responses");
    }
    return have;
}

static void do_round(int fd)
{
    static const char get[] = "GET /x HTTP/1.1\r\nHost: t\r\n\r\n";
    static const char put[] = "PUT /x HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello";
    static const char chunk[] =
        "POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
        "3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n";
    /* one at a time */
    OLT_CHECK(write(fd, get, sizeof get - 1) > 0);
    read_responses(fd, 1, 0);
    /* pipelined: three requests in one write */
    char pipe3[512];
    int n = snprintf(pipe3, sizeof pipe3, "%s%s%s", get, put, chunk);
    OLT_CHECK(write(fd, pipe3, (size_t)n) == n);
    read_responses(fd, 3, 0);
}

static void stream_round(int fd)
{
    static const char get[] = "GET /stream HTTP/1.1\r\nHost: t\r\n\r\n";
    OLT_CHECK(write(fd, get, sizeof get - 1) > 0);
    read_responses(fd, 1, 1);
}

OLT_TEST_T(http_hot_path_allocates_nothing_per_request, 120)
{
    char err[256];
    ol_loop *loop;
    struct ol_loop_params p = {.index = 0, .cpu = -1, .recv_bufs = 256};
    int rc = ol_loop_create(&p, &loop, err, sizeof err);
    if (rc == -EPERM || rc == -ENOSYS)
        OLT_SKIP("io_uring not available here");
    OLT_CHECK_EQ(rc, 0);
    OLT_CHECK_EQ(ol_loop_start(loop, srv_init, NULL), 0);
    g_port = ol_http_server_port(g_srv);

    int fds[4];
    for (int i = 0; i < 4; i++)
        fds[i] = dial();
    for (int w = 0; w < 200; w++) { /* warm-up: pools touched, lazy init done */
        do_round(fds[w % 4]);
        stream_round(fds[w % 4]);
    }
    usleep(100 * 1000);
    long before = atomic_load(&g_allocs);
    int rounds = 2500;
    for (int i = 0; i < rounds; i++) {
        do_round(fds[i % 4]);
        if (i % 10 == 0)
            stream_round(fds[i % 4]);
    }
    /* new connections too: accept and teardown are part of the hot path */
    for (int i = 0; i < 100; i++) {
        int fd = dial();
        do_round(fd);
        close(fd);
    }
    usleep(100 * 1000);
    long after = atomic_load(&g_allocs);
    long requests = rounds * 4L + rounds / 10 + 100 * 4L;
    printf("  %ld requests, %ld heap allocations on the loop thread (%.4f per request)\n",
           requests, after - before, (double)(after - before) / (double)requests);
    OLT_CHECK_EQ(after - before, 0);
    /* the counter does see the loop thread's allocations */
    struct ol_msg m = {.fn = probe_alloc};
    ol_loop_post(loop, &m);
    while (!atomic_load(&g_probe_done))
        usleep(1000);
    OLT_CHECK_EQ(atomic_load(&g_allocs) - after, 1);
    for (int i = 0; i < 4; i++)
        close(fds[i]);
    ol_loop_stop(loop);
    ol_loop_join(loop);
}
