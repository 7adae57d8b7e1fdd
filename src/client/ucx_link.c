/*
 * ucx_link.c - one blocking UCX stream connection for the KV client (see
 * ucx_link.h).
 *
 * Owns: libucp, loaded once per process with dlopen and dlsym (the headers
 * give only types and constants, so nothing here links against UCX), the
 * one UCP context made from it (stream and wakeup features, workers shared
 * across threads, settings from the UCX_* environment; kept until exit),
 * and per link a worker (serialized: one thread at a time), its event fd
 * and one client-server endpoint with peer error handling.
 *
 * Waiting (cux_wait): progress the link's worker until the condition
 * holds; after a short spin with nothing to progress, arm the worker
 * (ucp_worker_arm) and sleep in poll(2) on its event fd, at most until the
 * deadline. Each poll is also cut at OL_CUX_POLL_MS, only a safety net:
 * UCX runs some work (an endpoint's teardown) from its progress queue,
 * which no fd event announces.
 *
 * Connecting: ucp_ep_create returns before anything is on the wire; a
 * flush of the new endpoint completes only once the connection is
 * established (wireup done), and a listener that is not there fails it
 * through the endpoint's error handler. So open waits for that flush.
 *
 * Receiving: ucp_stream_recv_data_nb hands out UCX's own buffer with what
 * has arrived, copied out here as the caller asks (the rest kept for the
 * next call); no receive request is ever posted, so a receive that times
 * out leaves nothing behind that could write into the caller's memory.
 *
 * Sending: ucp_stream_send_nbx with an iovec datatype, waited for. It ends
 * when UCX is done with the bytes, not when the peer has read them: a
 * peer whose worker progresses takes them all whether it reads or not (a
 * UCP stream has no flow control; a send times out only against a peer
 * that stopped progressing). UCX cannot take back a send: one that times
 * out closes the endpoint (force: UCX drops its requests), so the caller's
 * buffers are free on return.
 */
#include "client/ucx_link.h"

#include <errno.h>

#ifndef OL_HAVE_UCX

int ol_cux_open(const char *host, const char *port, int timeout_ms, struct ol_cux **out)
{
    (void)host, (void)port, (void)timeout_ms, (void)out;
    return -EOPNOTSUPP;
}

const char *ol_cux_unavailable(void) { return "this client was built without UCX"; }
int ol_cux_fd(const struct ol_cux *u) { (void)u; return -1; }
int ol_cux_sendv(struct ol_cux *u, const struct iovec *iov, int n) { (void)u, (void)iov, (void)n; return -ENOTCONN; }
long ol_cux_recv(struct ol_cux *u, void *buf, size_t cap) { (void)u, (void)buf, (void)cap; return -ENOTCONN; }
void ol_cux_close(struct ol_cux *u) { (void)u; }

#else

#include <dlfcn.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <ucp/api/ucp.h>

#define OL_CUX_SPIN     32   /* progress calls that found nothing, before sleeping */
#define OL_CUX_POLL_MS  100  /* the longest single sleep (see the top) */
#define OL_CUX_CLOSE_MS 1000 /* how long a close waits for UCX */

/* What libucp gives us; each member has the type of the function it names. */
#define OL_CUX_FNS(X)                                                                      \
    X(ucp_config_read) X(ucp_config_release) X(ucp_init_version) X(ucp_worker_create)      \
    X(ucp_worker_destroy) X(ucp_worker_get_efd) X(ucp_worker_arm) X(ucp_worker_progress)   \
    X(ucp_ep_create) X(ucp_ep_close_nbx) X(ucp_ep_flush_nbx) X(ucp_stream_send_nbx)        \
    X(ucp_stream_recv_data_nb) X(ucp_stream_data_release) X(ucp_request_check_status)      \
    X(ucp_request_free) X(ucs_status_string)

static struct {
#define OL_CUX_MEMBER(f) __typeof__(f) *f;
    OL_CUX_FNS(OL_CUX_MEMBER)
#undef OL_CUX_MEMBER
    ucp_context_h ctx;
    const char *why; /* NULL: usable */
    char why_buf[320];
} cux;

static pthread_once_t cux_once = PTHREAD_ONCE_INIT;

struct ol_cux {
    ucp_worker_h w;
    ucp_ep_h ep;             /* NULL once closed */
    int efd;
    int timeout_ms;
    ucs_status_t failed;     /* the endpoint's first error; UCS_OK: none */
    void *rdata;             /* UCX's buffer being read out, from roff to rlen */
    size_t roff, rlen;
    ucp_dt_iov_t *siov;      /* the pieces of a send, reused */
    int siov_cap;
};

static uint64_t cux_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- the library and the context ------------------------------------------------ */

__attribute__((format(printf, 1, 2))) static void cux_unusable(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cux.why_buf, sizeof cux.why_buf, fmt, ap);
    va_end(ap);
    cux.why = cux.why_buf;
}

static void cux_load(void)
{
    void *h = dlopen("libucp.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        if (e && strstr(e, "No such file"))
            cux_unusable("libucp.so.0 not found: install UCX (Debian, Ubuntu: libucx0; RHEL: ucx)");
        else
            cux_unusable("cannot load libucp.so.0: %s", e ? e : "?");
        return;
    }
#define OL_CUX_SYM(f)                                                                  \
    if (!(cux.f = (__typeof__(cux.f))dlsym(h, #f))) {                                  \
        cux_unusable("libucp.so.0 has no %s: UCX 1.10 or newer is needed", #f);       \
        return;                                                                        \
    }
    OL_CUX_FNS(OL_CUX_SYM)
#undef OL_CUX_SYM
    ucp_config_t *cfg;
    ucs_status_t st = cux.ucp_config_read(NULL, NULL, &cfg);
    if (st != UCS_OK) {
        cux_unusable("UCX configuration (UCX_* variables): %s", cux.ucs_status_string(st));
        return;
    }
    ucp_params_t pp = {
        .field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED,
        .features = UCP_FEATURE_STREAM | UCP_FEATURE_WAKEUP,
        .mt_workers_shared = 1,
    };
    st = cux.ucp_init_version(UCP_API_MAJOR, UCP_API_MINOR, &pp, cfg, &cux.ctx);
    cux.ucp_config_release(cfg);
    if (st != UCS_OK)
        cux_unusable("ucp_init: %s", cux.ucs_status_string(st));
}

const char *ol_cux_unavailable(void)
{
    pthread_once(&cux_once, cux_load);
    return cux.why;
}

static int cux_errno(ucs_status_t st)
{
    switch (st) {
    case UCS_OK: return 0;
    case UCS_ERR_NO_MEMORY: return -ENOMEM;
    case UCS_ERR_UNREACHABLE: case UCS_ERR_NO_DEVICE: return -EHOSTUNREACH;
    case UCS_ERR_REJECTED: case UCS_ERR_NOT_CONNECTED: return -ECONNREFUSED;
    case UCS_ERR_TIMED_OUT: case UCS_ERR_ENDPOINT_TIMEOUT: return -ETIMEDOUT;
    default: return -ECONNRESET;
    }
}

/* ---- waiting ------------------------------------------------------------------------- */

typedef bool cux_done_fn(struct ol_cux *u, void *arg);

/* Progresses u's worker until done(u, arg); sleeps on its event fd when
 * there is nothing to progress. 0, or -ETIMEDOUT at deadline_ms. */
static int cux_wait(struct ol_cux *u, cux_done_fn *done, void *arg, uint64_t deadline_ms)
{
    for (unsigned i = 0;; i++) {
        if (done(u, arg))
            return 0;
        if (cux.ucp_worker_progress(u->w) || i < OL_CUX_SPIN) {
            if ((i & 255) == 255 && cux_now_ms() >= deadline_ms)
                return -ETIMEDOUT; /* a worker that always has something */
            continue;
        }
        uint64_t now = cux_now_ms();
        if (now >= deadline_ms)
            return -ETIMEDOUT;
        if (cux.ucp_worker_arm(u->w) == UCS_ERR_BUSY)
            continue; /* events came meanwhile: progress them first */
        uint64_t ms = deadline_ms - now;
        struct pollfd p = {.fd = u->efd, .events = POLLIN};
        poll(&p, 1, ms < OL_CUX_POLL_MS ? (int)ms : OL_CUX_POLL_MS); /* EINTR: loop */
    }
}

/* a request that UCX finished */
static bool cux_req_ended(struct ol_cux *u, void *req)
{
    (void)u;
    return cux.ucp_request_check_status(req) != UCS_INPROGRESS;
}

/* ... or the endpoint broke (its requests end too, but need not at once) */
static bool cux_req_or_fail(struct ol_cux *u, void *req)
{
    return u->failed != UCS_OK || cux_req_ended(u, req);
}

/* data to read, or the end of it */
static bool cux_take(struct ol_cux *u, void *arg)
{
    (void)arg;
    if (u->rdata || !u->ep)
        return true;
    size_t len = 0;
    ucs_status_ptr_t d = cux.ucp_stream_recv_data_nb(u->ep, &len);
    if (d == NULL)
        return u->failed != UCS_OK; /* what came before the error has been read */
    if (UCS_PTR_IS_ERR(d)) {
        if (u->failed == UCS_OK)
            u->failed = UCS_PTR_STATUS(d);
        return true;
    }
    u->rdata = d;
    u->roff = 0;
    u->rlen = len;
    return true;
}

/* Waits for req (a flush or close of u's endpoint, or a send) to end, then
 * frees it. Returns its status, UCS_INPROGRESS if it had not ended. */
static ucs_status_t cux_req_finish(struct ol_cux *u, void *req, cux_done_fn *done,
                                   uint64_t deadline_ms)
{
    cux_wait(u, done, req, deadline_ms);
    ucs_status_t st = cux.ucp_request_check_status(req);
    cux.ucp_request_free(req); /* one not ended yet is freed when it ends */
    return st;
}

/* ---- the endpoint ------------------------------------------------------------------- */

static void cux_on_error(void *arg, ucp_ep_h ep, ucs_status_t st)
{
    (void)ep;
    struct ol_cux *u = arg;
    if (u->failed == UCS_OK)
        u->failed = st != UCS_OK ? st : UCS_ERR_CONNECTION_RESET;
}

/* Closes u's endpoint, forcibly, waiting for UCX a bounded time; its
 * requests end (cancelled) and its transport endpoints are torn down. */
static void cux_ep_close(struct ol_cux *u)
{
    if (!u->ep)
        return;
    if (u->rdata)
        cux.ucp_stream_data_release(u->ep, u->rdata);
    u->rdata = NULL;
    ucp_request_param_t prm = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                               .flags = UCP_EP_CLOSE_FLAG_FORCE};
    ucs_status_ptr_t r = cux.ucp_ep_close_nbx(u->ep, &prm);
    u->ep = NULL;
    if (u->failed == UCS_OK)
        u->failed = UCS_ERR_CANCELED;
    if (r && !UCS_PTR_IS_ERR(r))
        cux_req_finish(u, r, cux_req_ended, cux_now_ms() + OL_CUX_CLOSE_MS);
    /* the teardown runs from the progress queue (see the top) */
    for (int i = 0; i < 64 && cux.ucp_worker_progress(u->w); i++)
        ;
}

/* Creates u's endpoint to sa and waits until it is connected (see the top). */
static int cux_connect(struct ol_cux *u, const struct sockaddr *sa, socklen_t salen,
                       uint64_t deadline_ms)
{
    ucp_ep_params_t ep = {
        .field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
        .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
        .sockaddr = {.addr = sa, .addrlen = salen},
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = {.cb = cux_on_error, .arg = u},
    };
    u->failed = UCS_OK;
    ucs_status_t st = cux.ucp_ep_create(u->w, &ep, &u->ep);
    if (st != UCS_OK) {
        u->ep = NULL;
        return cux_errno(st);
    }
    ucp_request_param_t prm = {.op_attr_mask = 0};
    ucs_status_ptr_t r = cux.ucp_ep_flush_nbx(u->ep, &prm);
    st = UCS_PTR_IS_ERR(r) ? UCS_PTR_STATUS(r) : UCS_OK;
    if (r && !UCS_PTR_IS_ERR(r))
        st = cux_req_finish(u, r, cux_req_or_fail, deadline_ms);
    if (u->failed != UCS_OK)
        st = u->failed;
    if (st == UCS_OK)
        return 0;
    cux_ep_close(u);
    return st == UCS_INPROGRESS ? -ETIMEDOUT : cux_errno(st);
}

static int cux_worker(struct ol_cux *u)
{
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SERIALIZED};
    ucs_status_t st = cux.ucp_worker_create(cux.ctx, &wp, &u->w);
    if (st != UCS_OK) {
        u->w = NULL;
        return cux_errno(st) == -ENOMEM ? -ENOMEM : -EOPNOTSUPP;
    }
    st = cux.ucp_worker_get_efd(u->w, &u->efd);
    return st == UCS_OK ? 0 : -EOPNOTSUPP;
}

int ol_cux_open(const char *host, const char *port, int timeout_ms, struct ol_cux **out)
{
    if (ol_cux_unavailable())
        return -EOPNOTSUPP;
    uint64_t deadline = cux_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 1);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai;
    if (getaddrinfo(host, port, &hints, &ai) != 0)
        return -EHOSTUNREACH;
    struct ol_cux *u = calloc(1, sizeof *u);
    int rc = u ? cux_worker(u) : -ENOMEM;
    if (u)
        u->timeout_ms = timeout_ms > 0 ? timeout_ms : 1;
    /* each address in turn ("localhost": ::1, then 127.0.0.1), within the deadline */
    for (struct addrinfo *a = ai; rc == 0 && a; a = a->ai_next) {
        rc = cux_connect(u, a->ai_addr, a->ai_addrlen, deadline);
        if (rc != -ECONNREFUSED && rc != -EHOSTUNREACH)
            break;
        if (a->ai_next && cux_now_ms() < deadline)
            rc = 0;
    }
    freeaddrinfo(ai);
    if (rc < 0) {
        ol_cux_close(u);
        return rc;
    }
    *out = u;
    return 0;
}

int ol_cux_fd(const struct ol_cux *u) { return u->efd; }

/* ---- I/O ------------------------------------------------------------------------------ */

int ol_cux_sendv(struct ol_cux *u, const struct iovec *iov, int n)
{
    if (!u->ep || u->failed != UCS_OK)
        return -ECONNRESET;
    if (n > u->siov_cap) {
        ucp_dt_iov_t *v = realloc(u->siov, (size_t)n * sizeof *v);
        if (!v)
            return -ENOMEM;
        u->siov = v;
        u->siov_cap = n;
    }
    size_t m = 0;
    for (int i = 0; i < n; i++)
        if (iov[i].iov_len)
            u->siov[m++] = (ucp_dt_iov_t){iov[i].iov_base, iov[i].iov_len};
    if (!m)
        return 0;
    ucp_request_param_t prm = {.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE,
                               .datatype = ucp_dt_make_iov()};
    ucs_status_ptr_t r = cux.ucp_stream_send_nbx(u->ep, u->siov, m, &prm);
    if (r == NULL)
        return 0;
    if (UCS_PTR_IS_ERR(r))
        return cux_errno(UCS_PTR_STATUS(r)) == -ENOMEM ? -ENOMEM : -ECONNRESET;
    int rc = cux_wait(u, cux_req_or_fail, r, cux_now_ms() + (uint64_t)u->timeout_ms);
    if (cux.ucp_request_check_status(r) == UCS_INPROGRESS)
        cux_ep_close(u); /* timed out, or broken: UCX lets go of the caller's memory */
    ucs_status_t st = cux.ucp_request_check_status(r);
    cux.ucp_request_free(r);
    if (rc < 0)
        return rc;
    return st == UCS_OK ? 0 : -ECONNRESET;
}

long ol_cux_recv(struct ol_cux *u, void *buf, size_t cap)
{
    if (!cap)
        return 0;
    int rc = cux_wait(u, cux_take, NULL, cux_now_ms() + (uint64_t)u->timeout_ms);
    if (rc < 0)
        return rc;
    if (!u->rdata)
        return 0; /* the peer closed, or the link broke */
    size_t n = u->rlen - u->roff < cap ? u->rlen - u->roff : cap;
    memcpy(buf, (const char *)u->rdata + u->roff, n);
    u->roff += n;
    if (u->roff == u->rlen) {
        cux.ucp_stream_data_release(u->ep, u->rdata);
        u->rdata = NULL;
    }
    return (long)n;
}

void ol_cux_close(struct ol_cux *u)
{
    if (!u)
        return;
    if (u->w) {
        cux_ep_close(u);
        cux.ucp_worker_destroy(u->w);
    }
    free(u->siov);
    free(u);
}

#endif /* OL_HAVE_UCX */
