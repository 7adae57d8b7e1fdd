/*
 * server.h - HTTP/1.1 server core: one instance per event loop.
 *
 * Owns: the loop's listening socket (SO_REUSEPORT, so every core accepts on
 * its own), its connections, their input (provided receive buffers held
 * while a request still needs them, plus a staging buffer when a request
 * head spans receives), their output chains, keep-alive, pipelining,
 * chunked request bodies, `Expect: 100-continue`, HEAD semantics, limits and
 * timeouts, and the per-core counters behind /_openlake/metrics.
 *
 * Must not: know what a request means. A handler (S3, admin) gets the parsed
 * head, streams the body, and writes the response through the calls below.
 * Everything runs on the owning loop's thread; nothing allocates per request
 * (connections, staging and output buffers come from per-core pools sized at
 * start-up; when a pool is empty the client gets 503).
 *
 * Request order on a connection is strict: the next pipelined request is not
 * parsed before the current response has ended (ol_http_resp_end).
 */
#ifndef OL_HTTP_SERVER_H
#define OL_HTTP_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>

#include "http/parse.h"
#include "rt/loop.h"

typedef struct ol_http_server ol_http_server;
typedef struct ol_http_req ol_http_req;

struct ol_http_limits {
    uint32_t max_header_bytes;    /* request line + headers; beyond: 431 */
    uint32_t max_headers;         /* header count; beyond: 431 */
    uint32_t header_timeout_ms;   /* first byte to end of head; beyond: 408. A new
                                     connection's first head: from the accept, and
                                     one that sent nothing is closed unanswered */
    uint32_t idle_timeout_ms;     /* no progress while idle or mid-body: close */
    uint32_t body_min_rate;       /* bytes/s a body must average over each window
                                     of receiving time; below: 408; 0 = no minimum */
    uint32_t body_rate_window_ms; /* that window; must be > 0 when body_min_rate is */
    uint32_t max_conns;           /* per server (per core); beyond: 503 */
    uint64_t max_body_bytes;      /* 0 = unlimited; beyond: 413 */
    uint32_t out_bufs;            /* output buffers in the pool (16 KiB each) */
    uint32_t stage_bufs;          /* head staging buffers in the pool */
    uint32_t loopback_sndbuf;     /* SO_SNDBUF for plain peers on this host; 0 = autotune */
    struct ol_tls_ctx *tls;       /* TLS on every connection (http/tls.h); NULL = plain */
};

struct ol_http_handler {
    /* A valid request head arrived. The handler answers now or later. */
    void (*on_request)(ol_http_req *r);
    /* Body bytes, de-chunked. Valid only during the call. */
    void (*on_body)(ol_http_req *r, const char *data, size_t len);
    /* The whole body has been delivered (also called for body-less requests
     * right after on_request). */
    void (*on_body_end)(ol_http_req *r);
    /* All output queued so far has been sent (for streaming responses). */
    void (*on_drain)(ol_http_req *r);
    /* The connection ended before ol_http_resp_end(): free handler state. */
    void (*on_abort)(ol_http_req *r);
    /* Optional. The body timed out (no bytes for idle_timeout_ms, or below
     * body_min_rate) before a response was started. Either the handler
     * undoes its work and answers during the call with a whole response
     * (start through end; the connection closes after it, the body
     * unread), or it does nothing: the server then ends the request as
     * for a lost connection (on_abort) and answers a plain 408 itself. */
    void (*on_timeout)(ol_http_req *r);
    void *ctx;
};

/* Per-core counters. Written by the owning loop only; read by anyone. */
#define OL_HTTP_LAT_BUCKETS 16
extern const double ol_http_lat_bounds[OL_HTTP_LAT_BUCKETS]; /* seconds */
struct ol_http_stats {
    _Atomic uint64_t conns_active, conns_total, conns_rejected;
    _Atomic uint64_t head_timeouts;    /* closed at header_timeout_ms (408 or unanswered) */
    _Atomic uint64_t slow_bodies;      /* requests failed below body_min_rate */
    _Atomic uint64_t bytes_in, bytes_out;
    _Atomic uint64_t requests[600];                      /* by status code */
    _Atomic uint64_t lat_buckets[OL_HTTP_LAT_BUCKETS + 1]; /* last = +Inf */
    _Atomic uint64_t lat_sum_us, lat_count;
};

/*
 * Creates the server on `loop` (call on the loop's thread): opens a listener
 * on addr ("host:port", "[v6]:port") with SO_REUSEPORT, sizes its pools, and
 * arms multishot accept. Returns 0, or -errno with a message in err.
 */
int ol_http_server_create(ol_loop *loop, const char *addr, const struct ol_http_limits *lim,
                          const struct ol_http_handler *h, ol_http_server **out,
                          char *err, size_t errlen);
/* Frees a server whose connections are all closed (after ol_loop_run returns). */
void ol_http_server_destroy(ol_http_server *srv);
/*
 * Graceful stop (on the loop's thread): closes the listener, closes idle
 * connections, and lets requests in flight finish with `Connection: close`.
 * ol_http_server_conns() reaches 0 when all are done.
 */
void ol_http_server_drain(ol_http_server *srv);
/* Closes every connection now (handlers get on_abort). */
void ol_http_server_close_all(ol_http_server *srv);
uint32_t ol_http_server_conns(const ol_http_server *srv);
const struct ol_http_stats *ol_http_server_stats(const ol_http_server *srv);
/* Bound port of the listener (useful with port 0). */
int ol_http_server_port(const ol_http_server *srv);

/* ---- the request ----------------------------------------------------------- */

const struct ol_http_request *ol_http_req_head(const ol_http_req *r);
const struct ol_http_head_info *ol_http_req_info(const ol_http_req *r);
/* Case-insensitive header lookup; NULL when absent. */
const struct ol_http_header *ol_http_req_header(const ol_http_req *r, const char *name);
ol_loop *ol_http_req_loop(const ol_http_req *r);
/* The ctx pointer of the handler serving r. */
void *ol_http_req_ctx(const ol_http_req *r);
/* One pointer of handler state per request. */
void ol_http_req_set_udata(ol_http_req *r, void *p);
void *ol_http_req_udata(const ol_http_req *r);
/* Stops / restarts body delivery (backpressure). */
void ol_http_req_pause(ol_http_req *r);
void ol_http_req_resume(ol_http_req *r);

/* ---- the response ---------------------------------------------------------- */

/*
 * Queues the status line and headers. `headers` is NULL or extra header lines,
 * each ending in "\r\n". content_length < 0 selects chunked encoding.
 * Date, Server, Content-Length / Transfer-Encoding and Connection are added here.
 * Returns 0, -EALREADY if already started, -ENOBUFS when output buffers ran out.
 */
int ol_http_resp_start(ol_http_req *r, int status, const char *headers, int64_t content_length);
/* Queues body bytes (copied; ignored for HEAD). Returns 0 or -ENOBUFS: wait
 * for on_drain, then write again. */
int ol_http_resp_write(ol_http_req *r, const void *data, size_t len);
/* True when ol_http_resp_write_ref may be used: plaintext, Content-Length. */
bool ol_http_resp_can_ref(const ol_http_req *r);
/* Queues body bytes without copying them (ignored for HEAD): they are read
 * when the connection sends, so they must stay unchanged until on_drain
 * (all output handed to the kernel) or on_abort. Returns 0, -ENOBUFS (the
 * connection's output queue is full: wait for on_drain) or -EINVAL (not
 * started, ended, or !ol_http_resp_can_ref). */
int ol_http_resp_write_ref(ol_http_req *r, const void *data, size_t len);
/* Finishes the response. After this the request is gone: r must not be used. */
int ol_http_resp_end(ol_http_req *r);
/* Ends a response that cannot be completed (an error after its head was
 * sent): queued output is sent, then the connection closes, so the client
 * sees a body shorter than announced (or a chunked body without its final
 * chunk), never a complete-looking one. */
int ol_http_resp_abort(ol_http_req *r);
/* start + write + end for a small complete response. */
int ol_http_resp_simple(ol_http_req *r, int status, const char *content_type,
                        const void *body, size_t len);
/* Bytes of output queued and not yet sent on r's connection. */
size_t ol_http_resp_queued(const ol_http_req *r);

const char *ol_http_status_text(int status);

#endif
