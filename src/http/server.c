/*
 * server.c - HTTP/1.1 connections on one event loop (see server.h).
 *
 * Input: multishot recv hands us provided buffers. Each is queued on the
 * connection (inq) with an offset and consumed in place: heads are parsed
 * where they lie, bodies are handed to the handler as spans of the buffer.
 * A buffer goes back to the kernel as soon as its bytes are consumed, except
 * the one holding the current request's head, which stays until the response
 * ends (the head's slices point into it). A head split across receives is
 * copied into a staging buffer (bounded by max_header_bytes). While a request
 * waits for its response, or its handler paused the body, further input is
 * only queued; past OL_INQ_HIGH buffers we cancel the receive (backpressure)
 * and re-arm it once the queue drains.
 *
 * Output: responses are copied into 16 KiB buffers from a per-core pool,
 * chained per connection, and sent with one sendmsg per flush. Flushes
 * happen once per batch of input, so pipelined requests share a send.
 * A plain connection from this host gets a small send buffer
 * (lim.loopback_sndbuf, rt/net.h says why); one from elsewhere, and a TLS
 * one, keep the kernel's autotuning. A TLS response is copied through the
 * core's output pool (its ciphertext chain), so a small kernel buffer
 * would make that shared pool the queue: with 16 buffers and 24 GETs at
 * once, heads found it empty often enough that a client ran out of
 * retries (test_responses_wait_for_output_buffers_instead_of_stalling).
 *
 * Lifetime: a connection is freed only when it is closing, no receive or
 * send is in flight, and no callback of ours is on the stack (busy == 0).
 *
 * Timers: one per connection, armed for the nearest of: idle (no progress
 * for idle_timeout_ms), head deadline (slowloris: header_timeout_ms from a
 * request's first byte, or from the accept for a connection's first
 * request, so one that never sends is not kept for the idle timeout),
 * the end of the body-rate window (http/rate.h: while a body is received,
 * it must average body_min_rate bytes/s over each window of the time the
 * server was willing to receive it; the handler's pauses and a lack of
 * receive buffers stop that clock), linger after a response that ends the
 * connection, and retry after ENOBUFS. A body that stalls or is too slow
 * gets 408 (or the handler's on_timeout answer) and the connection closes.
 *
 * TLS (lim.tls set): each connection gets a session (http/tls.h) and a few
 * plaintext buffers of its own. Received ciphertext goes into the session
 * and its provided buffer back to the kernel at once; plaintext is
 * decrypted into the connection's buffers, which enter the input queue like
 * received ones (segment ids with OL_TLS_BID set), only while the queue is
 * below OL_INQ_HIGH, so backpressure is the same. Output is encrypted at
 * flush: the plaintext buffers are written into the session and freed, and
 * the ciphertext is moved into a second chain of output buffers (tout),
 * which is what gets sent.
 */
#include "http/server.h"
#include "base/container.h"
#include "http/rate.h"
#include "http/tls.h"

#include "base/assert.h"
#include "base/log.h"
#include "base/pool.h"
#include "rt/net.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define OL_OBUF_BYTES   16384
#define OL_OBUF_CAP     (OL_OBUF_BYTES - 24)
#define OL_OUT_MAX_BUFS 64            /* queued output per connection: 1 MiB */
#define OL_OUT_PIPELINE_BUFS 16       /* parse no new request past 256 KiB queued */
/* Held receive buffers per connection. Past OL_INQ_HIGH the receive is
 * cancelled, but completions the kernel already produced (a multishot recv
 * posts up to 32 per wake-up) still arrive: OL_INQ leaves room for them. */
#define OL_INQ          128
#define OL_INQ_HIGH     4
#define OL_IOV          16
#define OL_LINGER_MS    1000
#define OL_NOBUFS_RETRY_MS 10
#define OL_ACCEPT_RETRY_MS 100
#define OL_TLS_BID      0x8000u       /* segment id of a TLS plaintext buffer */
#define OL_TLS_NBUF     6             /* OL_INQ_HIGH queued + the pinned head + 1 */
#define OL_TLS_BUF      16384         /* a TLS record's plaintext at most */
#define OL_TLS_IN_HIGH  (256u << 10)  /* undecrypted input: stop receiving past this */

const double ol_http_lat_bounds[OL_HTTP_LAT_BUCKETS] = {
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
    0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10,
};

/* Single-writer counters: plain load + store, no locked instruction. */
#define OL_STAT_ADD(field, n)                                                   \
    atomic_store_explicit(&(field),                                             \
        atomic_load_explicit(&(field), memory_order_relaxed) + (n),             \
        memory_order_relaxed)

struct ol_obuf {
    struct ol_obuf *next;
    uint32_t len, off;
    const char *ext;   /* the caller's bytes (ol_http_resp_write_ref), else NULL: data */
    char data[OL_OBUF_CAP];
};

static inline const char *ol_obuf_bytes(const struct ol_obuf *b)
{
    return b->ext ? b->ext : b->data;
}

enum ol_conn_state {
    OL_CS_HEAD,   /* waiting for (more of) a request head */
    OL_CS_BODY,   /* delivering the request body */
    OL_CS_RESP,   /* body done; waiting for the handler to end the response */
    OL_CS_LINGER, /* final response sent, write side shut, draining input */
};

struct ol_inseg {
    uint16_t bid;
    uint32_t off, len;
};

struct ol_http_conn;

/* A TLS connection's session and plaintext input buffers (malloc'd at
 * accept, for TLS listeners only). */
struct ol_tls_io {
    ol_tls_conn *t;
    uint32_t used;                       /* bit i: buf[i] holds queued input */
    bool closed;                         /* close_notify or a TLS error seen */
    char buf[OL_TLS_NBUF][OL_TLS_BUF];
};

struct ol_http_req {
    struct ol_http_conn *c;
    struct ol_http_request head;
    struct ol_http_head_info info;
    void *udata;
    uint64_t body_left;     /* Content-Length bodies */
    uint64_t t0_ns;
    int status;
    bool active, started, ended, head_only, chunked_out, body_done, paused;
    bool no_body_out;       /* 1xx/204/304 or HEAD */
    struct ol_chunked chunk;
};

struct ol_http_conn {
    struct ol_op recv_op;
    struct ol_op send_op;
    ol_http_server *srv;
    struct ol_http_conn *next, *prev;   /* server's list */
    struct ol_http_conn *bw_next, *bw_prev;   /* waiting for output buffers */
    bool bw_waiting;
    int fd;
    enum ol_conn_state state;
    bool recv_armed, send_inflight, closing, close_after, in_process;
    bool recv_stopping;     /* its cancel sent; more completions may come */
    bool peer_eof, nobufs, head_pinned;
    uint16_t head_bid;
    int busy;
    uint32_t seq;                        /* bumped when a request ends */
    struct ol_inseg inq[OL_INQ];
    uint16_t inq_head, inq_n;
    char *stage;
    uint32_t stage_len;
    uint64_t head_deadline;
    uint64_t touched_ms;                 /* last progress (ol_conn_touch) */
    struct ol_http_rate rate;            /* OL_CS_BODY: the body-rate window */
    struct ol_obuf *out_head, *out_tail;
    uint32_t out_bufs;
    struct ol_tls_io *tio;               /* NULL: plain HTTP */
    struct ol_obuf *tout_head, *tout_tail;  /* TLS: ciphertext to send */
    uint32_t tout_bufs;
    struct msghdr msg;
    struct iovec iov[OL_IOV];
    struct ol_timer timer;
    struct ol_http_req req;
    struct ol_http_header hdrs[];        /* limits.max_headers */
};

struct ol_http_server {
    ol_loop *loop;
    struct ol_http_limits lim;
    struct ol_http_handler h;
    int lfd;
    int port;
    struct ol_op accept_op;
    struct ol_timer accept_retry;
    bool accepting, draining;
    struct ol_pool conns, obufs, stages;
    struct ol_http_conn *list;
    struct ol_http_conn *bw_head, *bw_tail;   /* handlers waiting for output buffers */
    bool bw_waking;
    uint32_t bw_count;
    struct ol_timer bw_timer;   /* retries the waiters while there are any */
    uint32_t nconns;
    time_t date_sec;
    char date[40];
    struct ol_http_stats st;
};

static void ol_conn_process(struct ol_http_conn *c);
static void ol_conn_flush(struct ol_http_conn *c);
static void ol_conn_close(struct ol_http_conn *c);
static void ol_conn_touch(struct ol_http_conn *c);
static void ol_conn_timer_arm(struct ol_http_conn *c);
static void ol_conn_rate_sync(struct ol_http_conn *c);
static void ol_date_update(ol_http_server *srv);


static uint64_t ol_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

const char *ol_http_status_text(int s)
{
    switch (s) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 416: return "Range Not Satisfiable";
    case 417: return "Expectation Failed";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

/* ---- input queue ----------------------------------------------------------- */

static char *ol_seg_ptr(struct ol_http_conn *c, struct ol_inseg *s)
{
    if (s->bid & OL_TLS_BID)
        return c->tio->buf[s->bid & ~OL_TLS_BID] + s->off;
    return ol_loop_buf_addr(c->srv->loop, s->bid) + s->off;
}

static void ol_buf_release(struct ol_http_conn *c, uint16_t bid)
{
    if (bid & OL_TLS_BID)
        c->tio->used &= ~(1u << (bid & ~OL_TLS_BID));
    else
        ol_loop_buf_release(c->srv->loop, bid);
}

static void ol_inq_pop(struct ol_http_conn *c)
{
    OL_ASSERT(c->inq_n > 0 && c->inq_n <= OL_INQ);
    struct ol_inseg *s = &c->inq[c->inq_head];
    if (!(c->head_pinned && s->bid == c->head_bid))
        ol_buf_release(c, s->bid);
    c->inq_head = (uint16_t)((c->inq_head + 1) % OL_INQ);
    c->inq_n--;
}

static void ol_head_unpin(struct ol_http_conn *c)
{
    if (!c->head_pinned)
        return;
    c->head_pinned = false;
    /* Release now unless the buffer is still queued with unread bytes. */
    for (unsigned i = 0; i < c->inq_n; i++)
        if (c->inq[(c->inq_head + i) % OL_INQ].bid == c->head_bid)
            return;
    ol_buf_release(c, c->head_bid);
}

/* ---- output ------------------------------------------------------------------ */

static size_t ol_out_room(struct ol_http_conn *c)
{
    size_t tail_room = c->out_tail && !c->out_tail->ext ? OL_OBUF_CAP - c->out_tail->len : 0;
    size_t free_bufs = c->srv->obufs.count - c->srv->obufs.in_use;
    size_t held = c->out_bufs + c->tout_bufs;
    if (c->tio)   /* ciphertext still inside the session counts too */
        held += (ol_tls_out_pending(c->tio->t) + OL_OBUF_CAP - 1) / OL_OBUF_CAP;
    size_t mine = OL_OUT_MAX_BUFS > held ? OL_OUT_MAX_BUFS - held : 0;
    if (free_bufs > mine)
        free_bufs = mine;
    return tail_room + free_bufs * OL_OBUF_CAP;
}

/* A pool buffer (the caller checked there is one) at the end of a chain
 * (plaintext or TLS ciphertext): empty, or holding n bytes at ext by
 * reference. */
static struct ol_obuf *ol_chain_push(ol_http_server *srv, struct ol_obuf **head,
                                     struct ol_obuf **tail, uint32_t *count, const char *ext,
                                     size_t n)
{
    struct ol_obuf *b = ol_pool_get(&srv->obufs);
    b->next = NULL;
    b->len = (uint32_t)n;
    b->off = 0;
    b->ext = ext;
    if (*tail)
        (*tail)->next = b;
    else
        *head = b;
    *tail = b;
    (*count)++;
    return b;
}

static struct ol_obuf *ol_out_push(struct ol_http_conn *c, const char *ext, size_t n)
{
    return ol_chain_push(c->srv, &c->out_head, &c->out_tail, &c->out_bufs, ext, n);
}

/* Appends all of data or nothing. Returns 0 or -ENOBUFS. */

static int ol_out_append(struct ol_http_conn *c, const void *data, size_t n)
{
    if (n > ol_out_room(c))
        return -ENOBUFS;
    const char *p = data;
    while (n) {
        struct ol_obuf *b = c->out_tail;
        if (!b || b->ext || b->len == OL_OBUF_CAP)
            b = ol_out_push(c, NULL, 0);
        size_t take = OL_OBUF_CAP - b->len;
        if (take > n)
            take = n;
        memcpy(b->data + b->len, p, take);
        b->len += (uint32_t)take;
        p += take;
        n -= take;
    }
    return 0;
}

/* Queues n bytes at data by reference (one buffer of the connection's
 * OL_OUT_MAX_BUFS). Returns 0 or -ENOBUFS. */
static int ol_out_append_ref(struct ol_http_conn *c, const void *data, size_t n)
{
    size_t held = c->out_bufs + c->tout_bufs;
    if (n > UINT32_MAX || held >= OL_OUT_MAX_BUFS || c->srv->obufs.in_use >= c->srv->obufs.count)
        return -ENOBUFS;
    ol_out_push(c, data, n);
    return 0;
}

static size_t ol_out_queued(const struct ol_http_conn *c)
{
    size_t q = 0;
    for (struct ol_obuf *b = c->out_head; b; b = b->next)
        q += b->len - b->off;
    for (struct ol_obuf *b = c->tout_head; b; b = b->next)
        q += b->len - b->off;   /* TLS: ciphertext, a little more than its plaintext */
    if (c->tio)
        q += ol_tls_out_pending(c->tio->t);
    return q;
}

static void ol_out_free(struct ol_http_conn *c)
{
    while (c->out_head) {
        struct ol_obuf *b = c->out_head;
        c->out_head = b->next;
        ol_pool_put(&c->srv->obufs, b);
    }
    c->out_tail = NULL;
    c->out_bufs = 0;
    while (c->tout_head) {
        struct ol_obuf *b = c->tout_head;
        c->tout_head = b->next;
        ol_pool_put(&c->srv->obufs, b);
    }
    c->tout_tail = NULL;
    c->tout_bufs = 0;
}

/* Output waiting: plaintext, or (TLS) ciphertext in the chain or session. */
static bool ol_out_pending(const struct ol_http_conn *c)
{
    return c->out_head || c->tout_head || (c->tio && ol_tls_out_pending(c->tio->t));
}

/*
 * A connection that needs output buffers when the pool is empty and has no
 * send in flight would wait for a completion that never comes (a handler's
 * write got -ENOBUFS with nothing of its own queued; TLS ciphertext stuck
 * in the session). It waits here instead: after every send, when a
 * connection closes, and every tick while any waits (buffers also come back
 * when TLS plaintext is encrypted), ol_bw_wake flushes it, or gives its
 * handler on_drain.
 */
static void ol_bw_add(struct ol_http_conn *c)
{
    ol_http_server *srv = c->srv;
    if (c->bw_waiting)
        return;
    c->bw_waiting = true;
    srv->bw_count++;
    c->bw_next = NULL;
    c->bw_prev = srv->bw_tail;
    if (srv->bw_tail)
        srv->bw_tail->bw_next = c;
    else
        srv->bw_head = c;
    srv->bw_tail = c;
    if (!ol_timer_armed(&srv->bw_timer))
        ol_timer_arm(srv->loop, &srv->bw_timer, 1);
}

static void ol_bw_del(struct ol_http_conn *c)
{
    ol_http_server *srv = c->srv;
    if (!c->bw_waiting)
        return;
    OL_ASSERT(srv->bw_count > 0);
    c->bw_waiting = false;
    srv->bw_count--;
    if (c->bw_prev)
        c->bw_prev->bw_next = c->bw_next;
    else
        srv->bw_head = c->bw_next;
    if (c->bw_next)
        c->bw_next->bw_prev = c->bw_prev;
    else
        srv->bw_tail = c->bw_prev;
}

static void ol_conn_maybe_free(struct ol_http_conn *c);

/* Buffers came back: each connection waiting now is served once (one that
 * finds too few again waits for the next wake). Not re-entered. */
static void ol_bw_wake(ol_http_server *srv)
{
    if (srv->bw_waking)
        return;
    srv->bw_waking = true;
    for (uint32_t n = srv->bw_count; n && srv->bw_head; n--) {
        if (srv->obufs.in_use >= srv->obufs.count)
            break;
        struct ol_http_conn *c = srv->bw_head;
        ol_bw_del(c);
        if (c->closing)
            continue;
        c->busy++;
        if (ol_out_pending(c))
            ol_conn_flush(c);
        else if (c->req.active && c->req.started && !c->req.ended && srv->h.on_drain)
            srv->h.on_drain(&c->req);
        c->busy--;
        ol_conn_maybe_free(c);
    }
    srv->bw_waking = false;
}

static void ol_on_bw_timer(ol_loop *loop, struct ol_timer *t)
{
    ol_http_server *srv = OL_CONTAINER(t, ol_http_server, bw_timer);
    ol_bw_wake(srv);
    if (srv->bw_head)
        ol_timer_arm(loop, t, 1);
}

/* A write got -ENOBUFS: with no send in flight, none will bring on_drain,
 * so the connection waits for buffers. */
static int ol_out_nobufs(struct ol_http_conn *c)
{
    if (!c->send_inflight)
        ol_bw_add(c);
    return -ENOBUFS;
}

/* TLS: encrypts every queued plaintext buffer (freeing it), then moves the
 * session's ciphertext into the tout chain while the pool has buffers.
 * Returns 0, or -1 when the session failed (close the connection). */
static int ol_tls_encrypt(struct ol_http_conn *c)
{
    ol_http_server *srv = c->srv;
    ol_tls_conn *t = c->tio->t;
    if (ol_tls_ready(t)) {
        while (c->out_head) {
            struct ol_obuf *b = c->out_head;
            if (ol_tls_write(t, ol_obuf_bytes(b) + b->off, b->len - b->off) < 0)
                return -1;
            c->out_head = b->next;
            c->out_bufs--;
            ol_pool_put(&srv->obufs, b);
        }
        c->out_tail = NULL;
    }
    while (ol_tls_out_pending(t)) {
        struct ol_obuf *b = c->tout_tail;
        if (!b || b->len == OL_OBUF_CAP) {
            if (c->tout_bufs >= OL_OUT_MAX_BUFS || srv->obufs.in_use >= srv->obufs.count)
                break;   /* the rest waits in the session */
            b = ol_chain_push(srv, &c->tout_head, &c->tout_tail, &c->tout_bufs, NULL, 0);
        }
        b->len += (uint32_t)ol_tls_out(t, b->data + b->len, OL_OBUF_CAP - b->len);
    }
    return 0;
}

/* ---- connection lifetime -------------------------------------------------------- */

static void ol_conn_maybe_free(struct ol_http_conn *c)
{
    OL_ASSERT(c->busy >= 0 && c->state <= OL_CS_LINGER);
    if (!c->closing || c->busy || c->recv_armed || c->send_inflight)
        return;
    ol_http_server *srv = c->srv;
    OL_ASSERT(srv->nconns > 0);
    ol_timer_cancel(srv->loop, &c->timer);
    while (c->inq_n)
        ol_inq_pop(c);
    ol_head_unpin(c);
    if (c->stage)
        ol_pool_put(&srv->stages, c->stage);
    ol_out_free(c);
    if (c->tio) {
        ol_tls_conn_free(c->tio->t);
        free(c->tio);
        c->tio = NULL;
    }
    ol_bw_del(c);
    close(c->fd);
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->list = c->next;
    if (c->next)
        c->next->prev = c->prev;
    OL_ASSERT(!c->bw_waiting && !c->inq_n && !c->out_bufs && !c->tout_bufs);
    srv->nconns--;
    OL_STAT_ADD(srv->st.conns_active, -1);
    ol_pool_put(&srv->conns, c);
    ol_bw_wake(srv);   /* its buffers are free now */
}

static void ol_req_abort(struct ol_http_conn *c)
{
    if (c->req.active && !c->req.ended) {
        c->req.active = false;
        c->seq++;
        if (c->srv->h.on_abort)
            c->srv->h.on_abort(&c->req);
    }
}

/* Cancels the armed receive, once: a multishot receive's completions
 * already queued still arrive after the cancel is sent, and each must not
 * send another. */
static void ol_conn_stop_recv(struct ol_http_conn *c)
{
    if (!c->recv_armed || c->recv_stopping)
        return;
    c->recv_stopping = ol_loop_cancel(c->srv->loop, &c->recv_op) == 0;
}

/* Closes now: in-flight operations are cancelled; memory goes back when
 * their completions have arrived. */
static void ol_conn_close(struct ol_http_conn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    ol_req_abort(c);
    ol_timer_cancel(c->srv->loop, &c->timer);
    ol_conn_stop_recv(c);
    shutdown(c->fd, SHUT_RDWR);
    ol_conn_maybe_free(c);
}

/* After the last response of a connection has been sent: shut our side and
 * read what the client still sends for a moment, so our response is not
 * destroyed by a reset (lingering close). */
static void ol_conn_linger(struct ol_http_conn *c)
{
    c->state = OL_CS_LINGER;
    shutdown(c->fd, SHUT_WR);
    while (c->inq_n)
        ol_inq_pop(c);
    ol_timer_arm(c->srv->loop, &c->timer, OL_LINGER_MS);
    if (!c->recv_armed && !c->peer_eof)
        c->recv_armed = ol_loop_recv(c->srv->loop, &c->recv_op, c->fd) == 0;
    if (!c->recv_armed)
        ol_conn_close(c);
}

/* The client half-closed and nothing more will be parsed: close once the
 * output queued so far has been sent (a half-close is not an abort). */
static void ol_conn_end_after_output(struct ol_http_conn *c)
{
    if (ol_out_pending(c) || c->send_inflight)
        c->close_after = true; /* ol_on_send lingers, which closes at once on EOF */
    else
        ol_conn_close(c);
}

/* A response the server writes itself (errors before or instead of the
 * handler's). Always ends the connection. */
static void ol_conn_error(struct ol_http_conn *c, int status, const char *reason)
{
    ol_http_server *srv = c->srv;
    if (c->req.active && c->req.started) {
        ol_conn_close(c); /* a response is half-written: nothing else can follow */
        return;
    }
    char buf[512];
    char body[160];
    int bl = snprintf(body, sizeof body, "%d %s%s%s\n", status, ol_http_status_text(status),
                      reason ? ": " : "", reason ? reason : "");
    if (bl < 0 || bl >= (int)sizeof body)
        bl = (int)sizeof body - 1;
    ol_date_update(srv);
    int n = snprintf(buf, sizeof buf,
                     "HTTP/1.1 %d %s\r\nServer: OpenLake\r\nDate: %s\r\n"
                     "Content-Type: text/plain\r\nContent-Length: %d\r\n"
                     "Connection: close\r\n\r\n%.*s",
                     status, ol_http_status_text(status), srv->date, bl, bl, body);
    ol_req_abort(c);
    OL_STAT_ADD(srv->st.requests[status], 1);
    c->close_after = true;
    c->state = OL_CS_RESP; /* no more parsing */
    if (n < 0 || ol_out_append(c, buf, (size_t)n) < 0) {
        ol_conn_close(c);
        return;
    }
    if (!c->in_process)
        ol_conn_flush(c);
}

/* A request body timed out (stalled, or slower than body_min_rate): the
 * handler may answer (on_timeout), else the server's plain 408. */
static void ol_conn_body_timeout(struct ol_http_conn *c, const char *reason)
{
    ol_http_server *srv = c->srv;
    if (srv->h.on_timeout && c->req.active && !c->req.started) {
        uint32_t seq = c->seq;
        srv->h.on_timeout(&c->req);
        if (c->seq != seq || c->closing)
            return; /* answered */
    }
    ol_conn_error(c, 408, reason);
}

/* ---- request start ------------------------------------------------------------------ */

static void ol_req_begin(struct ol_http_conn *c)
{
    ol_http_server *srv = c->srv;
    struct ol_http_req *r = &c->req;
    r->c = c;
    if (ol_http_head_analyze(&r->head, &r->info) < 0) {
        ol_conn_error(c, r->info.status, r->info.reason);
        return;
    }
    r->c = c;
    r->udata = NULL;
    r->t0_ns = ol_now_ns();
    r->status = 0;
    r->active = true;
    r->started = r->ended = r->chunked_out = r->paused = false;
    r->head_only = r->head.method_len == 4 && memcmp(r->head.method, "HEAD", 4) == 0;
    r->no_body_out = r->head_only;
    r->body_done = false;
    r->body_left = 0;
    c->head_deadline = 0;
    if (r->info.chunked) {
        ol_chunked_init(&r->chunk, srv->lim.max_body_bytes, 0);
        c->state = OL_CS_BODY;
    } else if (r->info.content_length != OL_HTTP_NO_LENGTH && r->info.content_length > 0) {
        if (srv->lim.max_body_bytes && r->info.content_length > srv->lim.max_body_bytes) {
            ol_conn_error(c, 413, "body larger than max_body_bytes");
            return;
        }
        r->body_left = r->info.content_length;
        c->state = OL_CS_BODY;
    } else {
        r->body_done = true;
        c->state = OL_CS_RESP;
    }
    if (c->state == OL_CS_BODY) {
        ol_http_rate_begin(&c->rate, ol_loop_now_ms(srv->loop));
        ol_conn_timer_arm(c); /* the first window's end, if nearer than the idle limit */
    }
    if (srv->draining)
        r->info.keep_alive = false;
    /* Expect: 100-continue on a request without a body: nothing to wait
     * for, but the client waits for the 100 before its (empty) body, and
     * some (the aws CLI's botocore 1.43) mistake a final answer sent
     * without one for the next request's on a reused connection. */
    if (r->info.expect_continue && r->body_done) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        if (ol_out_append(c, cont, sizeof cont - 1) < 0) {
            ol_conn_close(c);
            return;
        }
    }
    uint32_t seq = c->seq;
    srv->h.on_request(r);
    if (c->seq != seq || c->closing)
        return; /* answered and ended inside on_request */
    if (r->body_done) {
        if (srv->h.on_body_end)
            srv->h.on_body_end(r);
        return;
    }
    if (r->info.expect_continue && !r->started) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        if (ol_out_append(c, cont, sizeof cont - 1) < 0)
            ol_conn_close(c);
    }
}

/* Consumes head bytes from p[0..n). Returns bytes used, or -1 if the
 * connection is now ending. */
static long ol_conn_head(struct ol_http_conn *c, struct ol_inseg *seg, const char *p, uint32_t n)
{
    ol_http_server *srv = c->srv;
    struct ol_http_req *r = &c->req;
    uint32_t maxh = srv->lim.max_header_bytes;
    int rc;
    if (!c->stage_len) {
        rc = ol_http_parse_request(p, n, 0, &r->head, c->hdrs, srv->lim.max_headers);
        if (rc > 0) {
            if ((uint32_t)rc > maxh) {
                ol_conn_error(c, 431, "request head larger than max_header_bytes");
                return -1;
            }
            c->head_pinned = true;
            c->head_bid = seg->bid;
            ol_req_begin(c);
            return rc;
        }
        if (rc == OL_HTTP_INCOMPLETE) {
            if (n >= maxh) {
                ol_conn_error(c, 431, "request head larger than max_header_bytes");
                return -1;
            }
            if (!c->stage && !(c->stage = ol_pool_get(&srv->stages))) {
                ol_conn_error(c, 503, "out of header buffers");
                return -1;
            }
            memcpy(c->stage, p, n);
            c->stage_len = n;
            if (!c->head_deadline) {
                c->head_deadline = ol_loop_now_ms(srv->loop) + srv->lim.header_timeout_ms;
                ol_conn_touch(c);
            }
            return n;
        }
    } else {
        uint32_t old = c->stage_len;
        uint32_t take = maxh - old < n ? maxh - old : n;
        memcpy(c->stage + old, p, take);
        c->stage_len += take;
        rc = ol_http_parse_request(c->stage, c->stage_len, old, &r->head, c->hdrs,
                                   srv->lim.max_headers);
        if (rc > 0) {
            c->stage_len = (uint32_t)rc; /* the head only; the rest stays in seg */
            ol_req_begin(c);
            return rc - (long)old;
        }
        if (rc == OL_HTTP_INCOMPLETE) {
            if (c->stage_len >= maxh) {
                ol_conn_error(c, 431, "request head larger than max_header_bytes");
                return -1;
            }
            return take;
        }
    }
    if (rc == OL_HTTP_TOO_MANY_HEADERS)
        ol_conn_error(c, 431, "more headers than max_headers");
    else
        ol_conn_error(c, 400, "malformed request head");
    return -1;
}

static void ol_body_finish(struct ol_http_conn *c)
{
    c->req.body_done = true;
    c->state = OL_CS_RESP;
    if (c->srv->h.on_body_end)
        c->srv->h.on_body_end(&c->req);
}

/* Hands body bytes to the handler. Returns bytes used or -1. */
static long ol_conn_body(struct ol_http_conn *c, const char *p, uint32_t n)
{
    ol_http_server *srv = c->srv;
    struct ol_http_req *r = &c->req;
    uint32_t seq = c->seq;
    if (!r->info.chunked) {
        uint32_t take = r->body_left < n ? (uint32_t)r->body_left : n;
        r->body_left -= take;
        if (srv->h.on_body)
            srv->h.on_body(r, p, take);
        if (c->seq == seq && !c->closing && r->body_left == 0)
            ol_body_finish(c);
        return take;
    }
    size_t used = 0;
    while (used < n && c->seq == seq && !c->closing && !r->paused) {
        const char *data;
        size_t dlen;
        ssize_t k = ol_chunked_decode(&r->chunk, p + used, n - used, &data, &dlen);
        if (k < 0) {
            if (k == OL_CHUNKED_TOO_LARGE)
                ol_conn_error(c, 413, "body larger than max_body_bytes");
            else
                ol_conn_error(c, 400, "malformed chunked body");
            return -1;
        }
        used += (size_t)k;
        if (dlen && srv->h.on_body)
            srv->h.on_body(r, data, dlen);
        if (c->seq != seq || c->closing)
            break;
        if (ol_chunked_done(&r->chunk)) {
            ol_body_finish(c);
            break;
        }
        if (k == 0 && !dlen)
            break;
    }
    return (long)used;
}

/* ---- processing ---------------------------------------------------------------------- */

static void ol_conn_arm_recv(struct ol_http_conn *c)
{
    if (c->recv_armed || c->closing || c->peer_eof || c->nobufs || c->inq_n >= OL_INQ_HIGH)
        return;
    if (c->tio && (c->tio->closed || ol_tls_in_pending(c->tio->t) >= OL_TLS_IN_HIGH))
        return;
    if (c->state == OL_CS_BODY && c->req.paused)
        return;
    if (ol_loop_recv(c->srv->loop, &c->recv_op, c->fd) == 0)
        c->recv_armed = true;
    else
        ol_conn_close(c);
}

/* TLS: decrypts into free plaintext buffers, queued as input, while the
 * queue is below OL_INQ_HIGH. -1: the session failed (close). */
static int ol_tls_fill(struct ol_http_conn *c)
{
    struct ol_tls_io *io = c->tio;
    while (!io->closed && c->inq_n < OL_INQ_HIGH) {
        unsigned i = 0;
        while (i < OL_TLS_NBUF && (io->used >> i & 1))
            i++;
        if (i == OL_TLS_NBUF)
            break;   /* the rest waits in the session */
        long n = ol_tls_read(io->t, io->buf[i], OL_TLS_BUF);
        if (n == 0)
            break;
        if (n < 0) {
            io->closed = true;
            if (n == OL_TLS_ERROR)
                return -1;
            c->peer_eof = true;   /* close_notify: the client is done sending */
            break;
        }
        io->used |= 1u << i;
        struct ol_inseg *s = &c->inq[(c->inq_head + c->inq_n) % OL_INQ];
        s->bid = (uint16_t)(OL_TLS_BID | i);
        s->off = 0;
        s->len = (uint32_t)n;
        c->inq_n++;
    }
    return 0;
}

static void ol_conn_process(struct ol_http_conn *c)
{
    if (c->in_process)
        return;
    c->in_process = true;
    c->busy++;
    while (!c->closing && c->state != OL_CS_RESP && c->state != OL_CS_LINGER) {
        if (c->tio && ol_tls_fill(c) < 0) {
            ol_conn_close(c);
            break;
        }
        if (!c->inq_n)
            break;
        if (c->state == OL_CS_BODY && c->req.paused)
            break;
        /* Output backpressure: a client that pipelines faster than it reads
         * waits here until ol_on_send drains its responses. */
        if (c->state == OL_CS_HEAD && c->out_bufs + c->tout_bufs >= OL_OUT_PIPELINE_BUFS)
            break;
        struct ol_inseg *seg = &c->inq[c->inq_head];
        const char *p = ol_seg_ptr(c, seg);
        bool body = c->state == OL_CS_BODY;
        long used = body ? ol_conn_body(c, p, seg->len) : ol_conn_head(c, seg, p, seg->len);
        if (used < 0)
            break;
        if (body)
            ol_http_rate_add(&c->rate, (uint64_t)used);
        seg->off += (uint32_t)used;
        seg->len -= (uint32_t)used;
        if (seg->len == 0)
            ol_inq_pop(c);
    }
    if (!c->closing && c->peer_eof && !c->inq_n) {
        if (c->state == OL_CS_HEAD)
            ol_conn_end_after_output(c); /* client finished sending; we answered all */
        else if (c->state == OL_CS_BODY && !c->req.paused)
            ol_conn_close(c);            /* body cut short by the client */
    }
    c->in_process = false;
    if (!c->closing) {
        ol_conn_flush(c);
        ol_conn_arm_recv(c);
    }
    c->busy--;
    ol_conn_maybe_free(c);
}

/* ---- I/O completions --------------------------------------------------------------- */

static void ol_on_send(ol_loop *loop, struct ol_op *op, int res, unsigned flags)
{
    struct ol_http_conn *c = OL_CONTAINER(op, struct ol_http_conn, send_op);
    ol_http_server *srv = c->srv;
    OL_ASSERT(c->send_inflight); /* one send at a time, and the conn waits for it */
    c->send_inflight = false;
    c->busy++;
    if (res < 0) {
        ol_conn_close(c);
    } else if (!c->closing) {
        OL_STAT_ADD(srv->st.bytes_out, (uint64_t)res);
        size_t left = (size_t)res;
        /* what was sent: the plaintext chain, or with TLS the ciphertext one */
        struct ol_obuf **head = c->tio ? &c->tout_head : &c->out_head;
        struct ol_obuf **tail = c->tio ? &c->tout_tail : &c->out_tail;
        uint32_t *count = c->tio ? &c->tout_bufs : &c->out_bufs;
        while (left && *head) {
            struct ol_obuf *b = *head;
            size_t have = b->len - b->off;
            if (left < have) {
                b->off += (uint32_t)left;
                break;
            }
            left -= have;
            *head = b->next;
            if (!*head)
                *tail = NULL;
            (*count)--;
            ol_pool_put(&srv->obufs, b);
        }
        ol_conn_touch(c);
        bool input = c->inq_n || (c->tio && ol_tls_in_pending(c->tio->t));
        if (c->state == OL_CS_HEAD && input &&
            c->out_bufs + c->tout_bufs < OL_OUT_PIPELINE_BUFS)
            ol_conn_process(c); /* pipelined requests waiting for output room */
        if (c->closing) {
            /* closed while processing */
        } else if (ol_out_pending(c)) {
            ol_conn_flush(c);
        } else if (c->close_after && (!c->req.active || c->req.ended)) {
            ol_conn_linger(c);
        } else if (c->req.active && c->req.started && !c->req.ended && srv->h.on_drain) {
            srv->h.on_drain(&c->req);
        }
    }
    c->busy--;
    ol_conn_maybe_free(c);
    ol_bw_wake(srv);   /* the buffers just sent are free */
    (void)loop;
    (void)flags;
}

static void ol_conn_flush(struct ol_http_conn *c)
{
    if (c->send_inflight || c->closing)
        return;
    struct ol_obuf *head = c->out_head;
    if (c->tio) {
        if (ol_tls_encrypt(c) < 0) {
            ol_conn_close(c);
            return;
        }
        head = c->tout_head;
    }
    if (!head) {
        if (ol_out_pending(c))
            ol_bw_add(c);   /* TLS: ciphertext waits in the session for buffers */
        return;
    }
    int n = 0;
    for (struct ol_obuf *b = head; b && n < OL_IOV; b = b->next) {
        c->iov[n].iov_base = (char *)ol_obuf_bytes(b) + b->off;
        c->iov[n].iov_len = b->len - b->off;
        n++;
    }
    int rc;
    if (n == 1) { /* plain send: no msghdr/iovec import in the kernel */
        rc = ol_loop_send(c->srv->loop, &c->send_op, c->fd, c->iov[0].iov_base, c->iov[0].iov_len);
    } else {
        memset(&c->msg, 0, sizeof c->msg);
        c->msg.msg_iov = c->iov;
        c->msg.msg_iovlen = (size_t)n;
        rc = ol_loop_sendmsg(c->srv->loop, &c->send_op, c->fd, &c->msg);
    }
    if (rc == 0)
        c->send_inflight = true;
    else
        ol_conn_close(c);
}

static void ol_on_recv(ol_loop *loop, struct ol_op *op, int res, unsigned flags)
{
    struct ol_http_conn *c = OL_CONTAINER(op, struct ol_http_conn, recv_op);
    ol_http_server *srv = c->srv;
    OL_ASSERT(c->recv_armed); /* the conn is not freed while a receive is out */
    if (!(flags & OL_CQE_MORE))
        c->recv_armed = c->recv_stopping = false;
    c->busy++;
    if (res > 0) {
        unsigned bid;
        char *buf = ol_loop_recv_buf(loop, flags, &bid);
        OL_STAT_ADD(srv->st.bytes_in, (uint64_t)res);
        if (!buf) {
            ol_conn_close(c);
        } else if (c->closing || c->state == OL_CS_LINGER) {
            ol_loop_buf_release(loop, bid);
        } else if (c->tio) {
            /* ciphertext: into the session, the buffer back at once */
            int fr = ol_tls_feed(c->tio->t, buf, (size_t)res);
            ol_loop_buf_release(loop, bid);
            if (fr < 0) {
                ol_conn_close(c);
            } else {
                if (ol_tls_in_pending(c->tio->t) >= OL_TLS_IN_HIGH)
                    ol_conn_stop_recv(c); /* backpressure */
                /* the head deadline runs from the first byte of a request's
                 * records (and of the handshake): trickling them does not
                 * extend it */
                if (c->state == OL_CS_HEAD && !c->head_deadline)
                    c->head_deadline = ol_loop_now_ms(loop) + srv->lim.header_timeout_ms;
                ol_conn_touch(c);
                ol_conn_process(c);
            }
        } else if (c->inq_n == OL_INQ) {
            ol_loop_buf_release(loop, bid);
            ol_warn("http: input queue overflow on fd %d; closing", c->fd);
            ol_conn_close(c);
        } else {
            struct ol_inseg *s = &c->inq[(c->inq_head + c->inq_n) % OL_INQ];
            s->bid = (uint16_t)bid;
            s->off = 0;
            s->len = (uint32_t)res;
            c->inq_n++;
            if (c->inq_n >= OL_INQ_HIGH)
                ol_conn_stop_recv(c); /* backpressure */
            ol_conn_touch(c);
            ol_conn_process(c);
        }
    } else if (res == 0) {
        c->peer_eof = true;
        if (c->state == OL_CS_LINGER)
            ol_conn_close(c);
        else if (c->state == OL_CS_BODY)
            ol_conn_process(c); /* the rest of the body may be queued; else cut short */
        else if (c->state == OL_CS_HEAD && !c->inq_n && !c->stage_len)
            ol_conn_end_after_output(c);
        else
            ol_conn_process(c); /* answer what was sent before the EOF */
    } else if (res == -ENOBUFS) {
        c->nobufs = true;
        ol_conn_rate_sync(c); /* not receiving: the body-rate clock stops */
        ol_timer_arm(loop, &c->timer, OL_NOBUFS_RETRY_MS);
    } else if (res != -ECANCELED) {
        ol_conn_close(c);
    } else if (!c->closing) {
        ol_conn_arm_recv(c);
    }
    c->busy--;
    ol_conn_maybe_free(c);
}

/* Arms the timer for the nearest of: the idle limit from the last
 * progress, the head deadline, and (while the body-rate clock runs) the
 * end of the body-rate window. */
static void ol_conn_timer_arm(struct ol_http_conn *c)
{
    ol_http_server *srv = c->srv;
    if (c->state == OL_CS_LINGER || c->closing)
        return;
    uint64_t now = ol_loop_now_ms(srv->loop);
    uint64_t due = c->touched_ms + srv->lim.idle_timeout_ms;
    if (c->head_deadline && c->head_deadline < due)
        due = c->head_deadline;
    if (c->state == OL_CS_BODY && c->rate.running && srv->lim.body_min_rate) {
        uint64_t end = ol_http_rate_due(&c->rate, srv->lim.body_rate_window_ms);
        if (end < due)
            due = end;
    }
    uint64_t ms = due > now ? due - now : 0;
    if (c->nobufs && ms > OL_NOBUFS_RETRY_MS)
        ms = OL_NOBUFS_RETRY_MS;
    ol_timer_arm(srv->loop, &c->timer, ms);
}

/* Progress: the idle limit runs from now. */
static void ol_conn_touch(struct ol_http_conn *c)
{
    if (c->state == OL_CS_LINGER || c->closing)
        return;
    c->touched_ms = ol_loop_now_ms(c->srv->loop);
    ol_conn_timer_arm(c);
}

/* The body-rate clock runs while the server is willing to receive the
 * body: in OL_CS_BODY, not paused by the handler, with receive buffers.
 * Call after any of these changes. */
static void ol_conn_rate_sync(struct ol_http_conn *c)
{
    uint64_t now = ol_loop_now_ms(c->srv->loop);
    if (c->state == OL_CS_BODY && !c->req.paused && !c->nobufs)
        ol_http_rate_go(&c->rate, now);
    else
        ol_http_rate_stop(&c->rate, now);
}

/* A window of the body-rate clock ended with too few bytes. A window that
 * ended with enough starts the next one. */
static bool ol_conn_body_slow(struct ol_http_conn *c, uint64_t now)
{
    const struct ol_http_limits *lim = &c->srv->lim;
    return lim->body_min_rate &&
           ol_http_rate_check(&c->rate, now, lim->body_min_rate, lim->body_rate_window_ms) ==
               OL_HTTP_RATE_SLOW;
}

static void ol_on_timer(ol_loop *loop, struct ol_timer *t)
{
    struct ol_http_conn *c = OL_CONTAINER(t, struct ol_http_conn, timer);
    ol_http_server *srv = c->srv;
    uint64_t now = ol_loop_now_ms(loop);
    c->busy++;
    if (c->state == OL_CS_LINGER) {
        ol_conn_close(c);
    } else if (c->nobufs) {
        c->nobufs = false;
        ol_conn_rate_sync(c);
        ol_conn_arm_recv(c);
        ol_conn_touch(c);
    } else if (c->state == OL_CS_RESP && !c->send_inflight) {
        ol_conn_touch(c); /* the handler is working: not our timeout */
    } else if (c->head_deadline && now >= c->head_deadline) {
        OL_STAT_ADD(srv->st.head_timeouts, 1);
        if (!c->inq_n && !c->stage_len)
            ol_conn_close(c); /* no byte of a request (a new connection): nothing to answer */
        else if (c->tio && !ol_tls_ready(c->tio->t))
            ol_conn_close(c); /* no TLS session to answer in */
        else
            ol_conn_error(c, 408, "request head not received in time");
    } else if (c->state == OL_CS_BODY && ol_conn_body_slow(c, now)) {
        OL_STAT_ADD(srv->st.slow_bodies, 1);
        ol_conn_body_timeout(c, "request body slower than body_min_rate");
    } else if (now < c->touched_ms + srv->lim.idle_timeout_ms) {
        ol_conn_timer_arm(c); /* woken for a deadline, not the idle limit */
    } else if (c->state == OL_CS_HEAD && !c->inq_n && !c->stage_len) {
        ol_conn_close(c); /* idle keep-alive connection */
    } else if (c->state == OL_CS_HEAD) {
        ol_conn_error(c, 408, "request head stalled");
    } else if (c->state == OL_CS_BODY && !c->req.paused) {
        ol_conn_body_timeout(c, "request body stalled");
    } else if (c->state == OL_CS_BODY) {
        ol_conn_touch(c);
    } else {
        ol_conn_close(c); /* client stopped reading our output */
    }
    c->busy--;
    ol_conn_maybe_free(c);
}

/* ---- accept ------------------------------------------------------------------------- */

static void ol_reject(ol_http_server *srv, int fd)
{
    if (srv->lim.tls) {   /* no session yet: plain text would only confuse the client */
        close(fd);
        OL_STAT_ADD(srv->st.conns_rejected, 1);
        OL_STAT_ADD(srv->st.requests[503], 1);
        return;
    }
    static const char body[] = "503 Service Unavailable: too many connections\n";
    char msg[256];
    int len = snprintf(msg, sizeof msg,
                       "HTTP/1.1 503 Service Unavailable\r\nServer: OpenLake\r\n"
                       "Content-Type: text/plain\r\nContent-Length: %zu\r\n"
                       "Connection: close\r\nRetry-After: 1\r\n\r\n%s",
                       sizeof body - 1, body);
    /* One non-blocking attempt; a full socket buffer just loses the text. */
    ssize_t n = send(fd, msg, (size_t)len, MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)n;
    close(fd);
    OL_STAT_ADD(srv->st.conns_rejected, 1);
    OL_STAT_ADD(srv->st.requests[503], 1);
}

static void ol_on_accept(ol_loop *loop, struct ol_op *op, int res, unsigned flags)
{
    ol_http_server *srv = OL_CONTAINER(op, ol_http_server, accept_op);
    if (!(flags & OL_CQE_MORE)) {
        srv->accepting = false;
        /* Re-arm at once after a connection; after an error (EMFILE, ENOMEM)
         * wait a little instead of spinning on the same error. */
        if (!srv->draining && srv->lfd >= 0 && res != -ECANCELED) {
            if (res >= 0)
                srv->accepting = ol_loop_accept(loop, &srv->accept_op, srv->lfd) == 0;
            else
                ol_timer_arm(loop, &srv->accept_retry, OL_ACCEPT_RETRY_MS);
        }
    }
    if (res < 0) {
        if (res != -ECANCELED)
            ol_warn("http: accept: %s", strerror(-res));
        return;
    }
    int fd = res;
    if (srv->draining) {
        close(fd);
        return;
    }
    struct ol_http_conn *c = srv->nconns < srv->lim.max_conns ? ol_pool_get(&srv->conns) : NULL;
    if (!c) {
        ol_reject(srv, fd);
        return;
    }
    struct ol_tls_io *tio = NULL;
    if (srv->lim.tls) {
        tio = malloc(sizeof *tio);
        if (!tio || !(tio->t = ol_tls_conn_new(srv->lim.tls))) {
            free(tio);
            ol_pool_put(&srv->conns, c);
            ol_reject(srv, fd);
            return;
        }
        tio->used = 0;
        tio->closed = false;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (!srv->lim.tls) /* TLS output is staged in the core's pool: see the header */
        ol_net_cap_loopback_sndbuf(fd, (int)srv->lim.loopback_sndbuf);
    memset(c, 0, offsetof(struct ol_http_conn, req));
    c->tio = tio;
    c->recv_op.cb = ol_on_recv;
    c->send_op.cb = ol_on_send;
    c->timer.fn = ol_on_timer;
    c->srv = srv;
    c->fd = fd;
    c->state = OL_CS_HEAD;
    c->req.active = false;
    c->req.ended = false;
    c->next = srv->list;
    if (srv->list)
        srv->list->prev = c;
    srv->list = c;
    srv->nconns++;
    OL_STAT_ADD(srv->st.conns_active, 1);
    OL_STAT_ADD(srv->st.conns_total, 1);
    /* the first request's head is due header_timeout_ms from now: a
     * connection that sends nothing is not kept for the idle timeout */
    c->head_deadline = ol_loop_now_ms(loop) + srv->lim.header_timeout_ms;
    ol_conn_arm_recv(c);
    ol_conn_touch(c);
}

static void ol_on_accept_retry(ol_loop *loop, struct ol_timer *t)
{
    ol_http_server *srv = OL_CONTAINER(t, ol_http_server, accept_retry);
    if (!srv->draining && srv->lfd >= 0 && !srv->accepting)
        srv->accepting = ol_loop_accept(loop, &srv->accept_op, srv->lfd) == 0;
}

/* ---- public: request -------------------------------------------------------------- */

const struct ol_http_request *ol_http_req_head(const ol_http_req *r) { return &r->head; }
const struct ol_http_head_info *ol_http_req_info(const ol_http_req *r) { return &r->info; }
ol_loop *ol_http_req_loop(const ol_http_req *r) { return r->c->srv->loop; }
void *ol_http_req_ctx(const ol_http_req *r) { return r->c->srv->h.ctx; }
void ol_http_req_set_udata(ol_http_req *r, void *p) { r->udata = p; }
void *ol_http_req_udata(const ol_http_req *r) { return r->udata; }
size_t ol_http_resp_queued(const ol_http_req *r) { return ol_out_queued(r->c); }

const struct ol_http_header *ol_http_req_header(const ol_http_req *r, const char *name)
{
    return ol_http_header_find(&r->head, name);
}

void ol_http_req_pause(ol_http_req *r)
{
    r->paused = true;
    ol_conn_rate_sync(r->c); /* the server's pause: not the client's slowness */
}

void ol_http_req_resume(ol_http_req *r)
{
    struct ol_http_conn *c = r->c;
    if (!r->paused)
        return;
    r->paused = false;
    ol_conn_rate_sync(c);
    if (c->state == OL_CS_BODY)
        ol_conn_timer_arm(c); /* the window's end is due again */
    if (!c->in_process)
        ol_conn_process(c);
}

/* ---- public: response ------------------------------------------------------------- */

static void ol_date_update(ol_http_server *srv)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    if (ts.tv_sec == srv->date_sec)
        return;
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    strftime(srv->date, sizeof srv->date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    srv->date_sec = ts.tv_sec;
}

int ol_http_resp_start(ol_http_req *r, int status, const char *headers, int64_t content_length)
{
    struct ol_http_conn *c = r->c;
    ol_http_server *srv = c->srv;
    if (r->started)
        return -EALREADY;
    if (status < 100 || status > 599)
        status = 500;
    ol_date_update(srv);
    bool no_body = (status >= 100 && status < 200) || status == 204 || status == 304;
    /* A response before the body was read ends the connection: the unread
     * body would otherwise be parsed as the next request. */
    bool close = !r->info.keep_alive || srv->draining || c->close_after || !r->body_done;
    char head[384];
    int n = snprintf(head, sizeof head, "HTTP/1.1 %d %s\r\nServer: OpenLake\r\nDate: %s\r\n",
                     status, ol_http_status_text(status), srv->date);
    if (!no_body) {
        if (content_length >= 0)
            n += snprintf(head + n, sizeof head - (size_t)n, "Content-Length: %lld\r\n",
                          (long long)content_length);
        else if (!r->head_only)
            n += snprintf(head + n, sizeof head - (size_t)n, "Transfer-Encoding: chunked\r\n");
    }
    if (close)
        n += snprintf(head + n, sizeof head - (size_t)n, "Connection: close\r\n");
    else if (r->head.minor_version == 0)
        n += snprintf(head + n, sizeof head - (size_t)n, "Connection: keep-alive\r\n");
    size_t hl = headers ? strlen(headers) : 0;
    if ((size_t)n + hl + 2 > ol_out_room(c))
        return -ENOBUFS;
    ol_out_append(c, head, (size_t)n);
    if (hl)
        ol_out_append(c, headers, hl);
    ol_out_append(c, "\r\n", 2);
    r->started = true;
    r->status = status;
    r->no_body_out = r->head_only || no_body;
    r->chunked_out = !r->no_body_out && content_length < 0;
    if (close)
        c->close_after = true;
    if (!c->in_process)
        ol_conn_flush(c);
    return 0;
}

int ol_http_resp_write(ol_http_req *r, const void *data, size_t len)
{
    struct ol_http_conn *c = r->c;
    if (!r->started || r->ended)
        return -EINVAL;
    if (r->no_body_out || len == 0)
        return 0;
    int rc;
    if (r->chunked_out) {
        char pre[24];
        int pn = snprintf(pre, sizeof pre, "%zx\r\n", len);
        if ((size_t)pn + len + 2 > ol_out_room(c))
            return ol_out_nobufs(c);
        ol_out_append(c, pre, (size_t)pn);
        ol_out_append(c, data, len);
        rc = ol_out_append(c, "\r\n", 2);
    } else {
        rc = ol_out_append(c, data, len);
    }
    if (rc == -ENOBUFS)
        return ol_out_nobufs(c);
    if (rc == 0 && !c->in_process)
        ol_conn_flush(c);
    return rc;
}

bool ol_http_resp_can_ref(const ol_http_req *r)
{
    return !r->c->tio && !r->chunked_out;
}

int ol_http_resp_write_ref(ol_http_req *r, const void *data, size_t len)
{
    struct ol_http_conn *c = r->c;
    if (!r->started || r->ended || !ol_http_resp_can_ref(r))
        return -EINVAL;
    if (r->no_body_out || len == 0)
        return 0;
    int rc = ol_out_append_ref(c, data, len);
    if (rc == -ENOBUFS)
        return ol_out_nobufs(c);
    if (rc == 0 && !c->in_process)
        ol_conn_flush(c);
    return rc;
}

int ol_http_resp_abort(ol_http_req *r)
{
    if (!r->active || r->ended)
        return -EINVAL;
    r->c->close_after = true;
    r->chunked_out = false;   /* no final chunk: the body must look cut short */
    return ol_http_resp_end(r);
}

int ol_http_resp_end(ol_http_req *r)
{
    struct ol_http_conn *c = r->c;
    ol_http_server *srv = c->srv;
    if (!r->active || r->ended)
        return -EINVAL;
    if (!r->started) {
        int rc = ol_http_resp_start(r, 500, NULL, 0);
        if (rc < 0) {   /* no buffer for even a head: the client sees a reset, not a hang */
            ol_conn_close(c);
            return rc;
        }
    }
    if (r->chunked_out && ol_out_append(c, "0\r\n\r\n", 5) < 0) {
        ol_conn_close(c);
        return -ENOBUFS;
    }
    uint64_t us = (ol_now_ns() - r->t0_ns) / 1000u;
    double s = (double)us / 1e6;
    int b = 0;
    while (b < OL_HTTP_LAT_BUCKETS && s > ol_http_lat_bounds[b])
        b++;
    OL_STAT_ADD(srv->st.lat_buckets[b], 1);
    OL_STAT_ADD(srv->st.lat_sum_us, us);
    OL_STAT_ADD(srv->st.lat_count, 1);
    OL_STAT_ADD(srv->st.requests[r->status], 1);
    r->ended = true;
    r->active = false;
    c->seq++;
    ol_head_unpin(c);
    c->stage_len = 0;
    if (c->stage) {
        ol_pool_put(&srv->stages, c->stage);
        c->stage = NULL;
    }
    if (c->close_after) {
        c->state = OL_CS_RESP; /* parse nothing more; linger once flushed */
        if (!c->in_process && !ol_out_pending(c) && !c->send_inflight)
            ol_conn_linger(c);
    } else {
        c->state = OL_CS_HEAD;
    }
    if (!c->in_process) {
        c->busy++;
        ol_conn_flush(c);
        ol_conn_process(c);
        c->busy--;
        ol_conn_maybe_free(c);
    }
    return 0;
}

int ol_http_resp_simple(ol_http_req *r, int status, const char *content_type,
                        const void *body, size_t len)
{
    char hdr[160];
    hdr[0] = 0;
    if (content_type)
        snprintf(hdr, sizeof hdr, "Content-Type: %s\r\n", content_type);
    int rc = ol_http_resp_start(r, status, hdr, (int64_t)len);
    if (rc == 0 && len)
        rc = ol_http_resp_write(r, body, len);
    if (rc < 0) {
        ol_conn_close(r->c);
        return rc;
    }
    return ol_http_resp_end(r);
}

/* ---- public: server ---------------------------------------------------------------- */

int ol_http_server_create(ol_loop *loop, const char *addr, const struct ol_http_limits *lim,
                          const struct ol_http_handler *h, ol_http_server **out,
                          char *err, size_t errlen)
{
    ol_http_server *srv = calloc(1, sizeof *srv);
    if (!srv) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    int rc;
    srv->loop = loop;
    srv->lim = *lim;
    srv->h = *h;
    srv->lfd = -1;
    srv->accept_op.cb = ol_on_accept;
    srv->accept_retry.fn = ol_on_accept_retry;
    srv->bw_timer.fn = ol_on_bw_timer;
    if (!srv->lim.out_bufs)
        srv->lim.out_bufs = 4096;
    if (!srv->lim.stage_bufs)
        srv->lim.stage_bufs = srv->lim.max_conns / 4 + 64;
    if (srv->lim.max_headers < 1 || srv->lim.max_header_bytes < 64 || !srv->lim.max_conns ||
        (srv->lim.body_min_rate && !srv->lim.body_rate_window_ms)) {
        snprintf(err, errlen, "http limits out of range");
        rc = -EINVAL;
        goto fail;
    }
    size_t csize = sizeof(struct ol_http_conn) + srv->lim.max_headers * sizeof(struct ol_http_header);
    if ((rc = ol_pool_init(&srv->conns, csize, srv->lim.max_conns)) < 0 ||
        (rc = ol_pool_init(&srv->obufs, sizeof(struct ol_obuf), srv->lim.out_bufs)) < 0 ||
        (rc = ol_pool_init(&srv->stages, srv->lim.max_header_bytes, srv->lim.stage_bufs)) < 0) {
        snprintf(err, errlen, "cannot reserve connection pools: %s", strerror(-rc));
        goto fail;
    }
    if (srv->lim.max_header_bytes > ol_loop_recv_buf_size(loop) * 64u) {
        snprintf(err, errlen, "max_header_bytes too large for the receive buffers");
        rc = -EINVAL;
        goto fail;
    }
    if ((rc = ol_net_listen(addr, 1, &srv->port, err, errlen)) < 0)
        goto fail;
    srv->lfd = rc;
    if ((rc = ol_loop_accept(loop, &srv->accept_op, srv->lfd)) < 0) {
        snprintf(err, errlen, "arming accept: %s", strerror(-rc));
        goto fail;
    }
    srv->accepting = true;
    *out = srv;
    return 0;
fail:
    ol_http_server_destroy(srv);
    return rc;
}

void ol_http_server_destroy(ol_http_server *srv)
{
    if (!srv)
        return;
    if (srv->lfd >= 0)
        close(srv->lfd);
    ol_pool_exit(&srv->conns);
    ol_pool_exit(&srv->obufs);
    ol_pool_exit(&srv->stages);
    free(srv);
}

void ol_http_server_drain(ol_http_server *srv)
{
    if (srv->draining)
        return;
    srv->draining = true;
    ol_timer_cancel(srv->loop, &srv->accept_retry);
    ol_timer_cancel(srv->loop, &srv->bw_timer);
    if (srv->accepting)
        ol_loop_cancel(srv->loop, &srv->accept_op);
    if (srv->lfd >= 0) {
        close(srv->lfd);
        srv->lfd = -1;
    }
    struct ol_http_conn *c = srv->list, *next;
    for (; c; c = next) {
        next = c->next;
        c->busy++;
        if (c->state == OL_CS_HEAD && !c->inq_n && !c->stage_len && !ol_out_pending(c))
            ol_conn_close(c);
        else
            c->close_after = true;
        c->busy--;
        ol_conn_maybe_free(c);
    }
}

void ol_http_server_close_all(ol_http_server *srv)
{
    struct ol_http_conn *c = srv->list, *next;
    for (; c; c = next) {
        next = c->next;
        ol_conn_close(c);
    }
}

uint32_t ol_http_server_conns(const ol_http_server *srv) { return srv->nconns; }
const struct ol_http_stats *ol_http_server_stats(const ol_http_server *srv) { return &srv->st; }
int ol_http_server_port(const ol_http_server *srv) { return srv->port; }
