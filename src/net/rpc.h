/*
 * rpc.h - the node RPC endpoint of one node: requests to other nodes and
 * their answers, over a byte transport (xport.h: TCP or UCX), authenticated both
 * ways, with credit flow control (docs/node-protocol.md).
 *
 * Owns: the listener on rpc_addr, one connection to each peer this node
 * calls (it dials: the dialer sends requests, the acceptor answers), the
 * connections other nodes dialled here, the handshake (frame.h: an
 * HMAC-SHA256 challenge each way over the cluster secret), the calls in
 * flight with their deadlines, the credits, reconnects with backoff, and
 * the per-peer counters (ol_rpc_metrics); over a transport with RMA (ucx),
 * the one region this node maps for its peers' reads, handed out in READY,
 * and each connection's region of its peer (ol_rpc_get).
 *
 * Flow control, and why memory is bounded everywhere:
 *   - Requests spend credit: a dialer never has more request bytes (header
 *     included) sent and unanswered than its acceptor granted (the window,
 *     given in READY and given back in each REPLY as the acceptor finishes
 *     requests). A dialer over its credit breaks the protocol: closed. An
 *     acceptor keeps one connection per dialer id (a newer one replaces an
 *     older, and is turned away, CLOSE busy, while the older's requests are
 *     still held). So it holds at most `window` bytes of requests per node.
 *   - Replies spend no credit (so two nodes calling each other cannot
 *     deadlock): each request says the most reply bytes it accepts
 *     (reply_max), and a dialer keeps the sum of reply_max of its calls in
 *     flight within its reply window, which it announces in HELLO and the
 *     acceptor enforces (the reply_max of requests not yet answered on the
 *     wire). So an acceptor's queued replies to one dialer are bounded by
 *     that window; a reply over its reply_max breaks the protocol.
 *   - A call that does not fit the credit waits in the peer's queue (a
 *     "credit stall"); the queue holds at most a window of frames and
 *     max_calls calls. A call beyond any bound fails at once with -EAGAIN
 *     (retryable), never grows a queue.
 *   - Except with no_credits, for measuring what the credits buy: the
 *     acceptor then grants OL_RPC_NO_CREDITS, and only its dialers' own
 *     limits bound what it holds of their requests.
 *   - Before its proof checks, a connection holds no buffer but the few
 *     bytes of a handshake frame inside it, must finish within
 *     handshake_ms, and at most max_unauth such live at once (one more
 *     closes the oldest).
 *
 * Must not: block, allocate for a frame beyond the bounds above, or be
 * called from another thread than its loop's (ol_rpc_set_revision and
 * ol_rpc_metrics excepted).
 *
 * Errors: calls return 0 or -errno; a call's callback gets the reply's
 * status (>= 0, enum ol_rpc_status) or -errno: -ETIMEDOUT (its deadline),
 * -ECONNRESET (the connection went while it was in flight; retryable),
 * -ECANCELED (the endpoint closes), -EMSGSIZE (larger than the peer takes).
 */
#ifndef OL_NET_RPC_H
#define OL_NET_RPC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "net/frame.h"
#include "rt/loop.h"

struct ol_rpc;

#define OL_RPC_DEF_WINDOW     (8u << 20)
#define OL_RPC_DEF_CALLS      1024u
#define OL_RPC_DEF_HANDSHAKE  2000u
#define OL_RPC_DEF_UNAUTH     64u
#define OL_RPC_MAX_CONNS      8192u   /* connections of an endpoint, both roles */
#define OL_RPC_MAX_PEERS      4096u
#define OL_RPC_BACKOFF_MIN_MS 50u
#define OL_RPC_BACKOFF_MAX_MS 2000u
#define OL_RPC_MIN_SECRET     16u     /* bytes of cluster secret, at least */
#define OL_RPC_CONN_SLOTS     4u      /* handlers' state slots per connection */

/* Built-in operations (handlers of others: ol_rpc_handle). */
enum {
    /* PING: payload u32 n, then anything; reply: n bytes (n <= reply_max).
     * For liveness, round-trip time, and bytes per second both ways. */
    OL_RPC_OP_PING = 0,
    OL_RPC_OP_MAX = 63,
};

/* The credit an acceptor with no_credits grants: the most a u32 counts. */
#define OL_RPC_NO_CREDITS UINT32_MAX

struct ol_rpc_params {
    int64_t self_id;
    const char *cluster;          /* up to 63 bytes; copied */
    const void *secret;           /* the cluster secret; copied, zeroed at destroy */
    size_t secret_len;            /* >= OL_RPC_MIN_SECRET */
    const char *listen_addr;      /* "host:port"; NULL or "": dial only */
    const char *transport;        /* "tcp" (NULL or "" too) or "ucx" (xport.h) */
    /* TLS over tcp (xport_tls.c): all three PEM files, or none (NULL or
     * ""); with "ucx" an error */
    const char *tls_cert, *tls_key, *tls_ca;
    uint32_t window;              /* request bytes granted to each dialer; 0 = default */
    int no_credits;               /* 1, for measuring only: grant each dialer
                                     OL_RPC_NO_CREDITS of credit, so that nothing but
                                     its own limits bounds what this node holds of its
                                     requests (window still bounds one request) */
    uint32_t reply_window;        /* reply bytes of this node's calls in flight per
                                     peer; 0 = window */
    uint32_t max_calls;           /* calls in flight or waiting per peer (a power
                                     of two, <= 65536); 0 = default */
    uint32_t handshake_ms;        /* 0 = default */
    uint32_t max_unauth;          /* 0 = default */
    int rma;                      /* 1: ask each peer for its region (HELLO flag), read
                                     with ol_rpc_get (a transport with RMA only) */
    const char *ucx_net_devices;  /* ucx: UCX_NET_DEVICES unless set; NULL: UCX's */
    const char *ucx_gid_index;    /* ucx: UCX_IB_GID_INDEX unless set; NULL: UCX's */
};

/* A request, as its handler sees it. Valid until ol_rpc_reply(). */
struct ol_rpc_req {
    int64_t peer;                 /* the dialer's node id (authenticated) */
    uint16_t op;
    uint32_t reply_max;
    int64_t revision;             /* the dialer's membership revision */
    uint32_t len;
    uint8_t *payload;
    void **conn_data;             /* the connection's slots for its handlers' state,
                                     OL_RPC_CONN_SLOTS of them (NULL at first), one per
                                     ol_rpc_on_conn_end; that call's fn frees it */
};

/* A handler: must call ol_rpc_reply(req, ...) (or ol_rpc_reply_ref)
 * exactly once, now or later (on the loop's thread). The request's bytes
 * count against the dialer's credit until then. */
typedef void (*ol_rpc_handler)(struct ol_rpc_req *req, void *arg);

/* A call's end, exactly once, never inside ol_rpc_call nor inside any
 * other function of this endpoint (failures are delivered from a deferred
 * callback of the loop), so it may call anything here, ol_rpc_peer_remove
 * of its own peer included. rc >= 0: the reply's status, with its
 * payload[0, len) valid during the callback only, unless the callback
 * keeps it (ol_rpc_keep); rc < 0: -errno as above (payload NULL). */
typedef void (*ol_rpc_done)(void *arg, int rc, const uint8_t *payload, uint32_t len);

/* From a done callback, with the payload it was given: the payload is the
 * caller's from now on (free() it), valid after the callback. NULL: it
 * cannot be kept (no payload, or not the one of the callback running). */
uint8_t *ol_rpc_keep(const uint8_t *payload);

/*
 * A payload given by reference (ol_rpc_call_ref, ol_rpc_reply_ref): its
 * bytes are not copied, and must stay unchanged until unref(arg) runs,
 * once, when the endpoint is done with them (sent, or dropped: a failed
 * call, a closed connection, the endpoint destroyed), on the loop's
 * thread or inside ol_rpc_destroy. unref must not call this endpoint.
 */
struct ol_rpc_ref {
    void (*unref)(void *arg);
    void *arg;
};

/*
 * Creates an endpoint on loop (call on its thread), listening on
 * p->listen_addr when given. Returns 0 and *out, or -errno with a message
 * in err (-EINVAL: a parameter out of range, the secret too short).
 */
int ol_rpc_create(ol_loop *loop, const struct ol_rpc_params *p, struct ol_rpc **out, char *err,
                  size_t errlen);
/* Stops accepting, fails every call with -ECANCELED, closes every
 * connection. On the loop thread; the loop must run until ol_rpc_idle(). */
void ol_rpc_close_all(struct ol_rpc *r);
/* No connection left (after ol_rpc_close_all, once their operations ended). */
int ol_rpc_idle(const struct ol_rpc *r);
/* Frees the endpoint; its loop no longer runs (or never ran it). */
void ol_rpc_destroy(struct ol_rpc *r);
/*
 * Handlers' state per connection: a connection has OL_RPC_CONN_SLOTS
 * slots, *req->conn_data[i] for the i this call returned; a handler may
 * set its slot to state tied to the dialer's connection (open files,
 * locks held). fn(data, arg) runs once for each connection whose slot i
 * is not NULL, on the loop's thread, when the connection is done with:
 * closed, and every request of it answered (so no handler still works for
 * it), or inside ol_rpc_destroy. fn must not call this endpoint. Call
 * before the listener takes connections. Returns the slot, or -ENOSPC.
 */
int ol_rpc_on_conn_end(struct ol_rpc *r, void (*fn)(void *data, void *arg), void *arg);

/* The bound port of the listener (0: none). */
int ol_rpc_port(const struct ol_rpc *r);

/* Serves op with fn (replacing any handler of op). op <= OL_RPC_OP_MAX. */
void ol_rpc_handle(struct ol_rpc *r, uint16_t op, ol_rpc_handler fn, void *arg);
/*
 * The answer to req, exactly once: status and payload iov[0, n) (copied).
 * A payload over req->reply_max is not sent: the reply says TOO_LARGE. The
 * request's credit goes back to the dialer with this reply. req is freed.
 */
void ol_rpc_reply(struct ol_rpc_req *req, int status, const struct iovec *iov, int n);
/* ol_rpc_reply with the payload by reference: ref->unref runs once, now
 * or when the reply is sent or dropped. No piece may point into
 * req->payload (req is freed here). */
void ol_rpc_reply_ref(struct ol_rpc_req *req, int status, const struct iovec *iov, int n,
                      const struct ol_rpc_ref *ref);

/*
 * Adds peer id at addr ("host:port", numeric host), or moves it to a new
 * address (its connection, if any, is closed: its calls fail with
 * -ECONNRESET). Dials at once. Returns 0, -EINVAL (a bad address, id is
 * this node's), -ENOSPC (OL_RPC_MAX_PEERS).
 */
int ol_rpc_peer_set(struct ol_rpc *r, int64_t id, const char *addr);
/* Forgets peer id: its connection closes, its calls fail with -ECONNRESET. */
void ol_rpc_peer_remove(struct ol_rpc *r, int64_t id);
/* 1 when peer id's connection is authenticated and ready. */
int ol_rpc_peer_ready(const struct ol_rpc *r, int64_t id);

/*
 * Calls op on peer with payload iov[0, n) (copied before this returns),
 * accepting a reply of up to reply_max bytes, within timeout_ms (> 0; the
 * deadline counts from now, waiting for a connection or credit included).
 * Returns 0 (done runs later, once), or: -ENOENT (no such peer), -ENOTCONN
 * (it is down: between reconnect attempts), -EAGAIN (max_calls in flight,
 * or the reply window full), -EMSGSIZE (the payload over the peer's limit,
 * or reply_max over the reply window).
 */
int ol_rpc_call(struct ol_rpc *r, int64_t peer, uint16_t op, const struct iovec *iov, int n,
                uint32_t reply_max, uint32_t timeout_ms, ol_rpc_done done, void *arg);
/* ol_rpc_call with the payload by reference: on 0, ref->unref runs once
 * (when the request is sent or dropped); on an error it does not run (the
 * payload is still the caller's). */
int ol_rpc_call_ref(struct ol_rpc *r, int64_t peer, uint16_t op, const struct iovec *iov, int n,
                    const struct ol_rpc_ref *ref, uint32_t reply_max, uint32_t timeout_ms,
                    ol_rpc_done done, void *arg);

/*
 * Remote reads (transports with RMA: ucx). ol_rpc_map maps base[0, len)
 * of this process for peers' reads: each dialer whose HELLO asks (its
 * rma parameter) gets the region's address, length and key in READY. One
 * region per endpoint, mapped before peers connect (a connection made
 * earlier has none). 0, -ENOTSUP (the transport has no RMA), -EEXIST,
 * -E2BIG (the transport's key is over OL_RPC_RKEY_MAX), or the
 * transport's -errno.
 */
int ol_rpc_map(struct ol_rpc *r, void *base, size_t len);
/* The length of peer id's region on its current connection (ready, this
 * endpoint made with rma), or 0: none. */
uint64_t ol_rpc_peer_region(const struct ol_rpc *r, int64_t id);
/*
 * Reads len bytes at offset off of peer's region into buf (valid until
 * done). done(arg, res) runs exactly once, never inside this call (from
 * the loop, like a call's done), res 0 or -errno (-ECANCELED, -ECONNRESET:
 * the connection went; the transport keeps what it needs until done runs,
 * so buf must stay until then, even after this endpoint's close_all).
 * Returns 0, or -errno and done never runs: -ENOENT (no such peer),
 * -ENOTCONN (not ready), -ENOKEY (no region from it), -ERANGE ([off, off +
 * len) not inside it).
 */
int ol_rpc_get(struct ol_rpc *r, int64_t peer, void *buf, size_t len, uint64_t off,
               void (*done)(void *arg, int res), void *arg);

/* The membership revision this node puts in its frames (any thread). */
void ol_rpc_set_revision(struct ol_rpc *r, int64_t revision);
/* The highest revision an authenticated peer's frame carried (its AUTH
 * or READY, and every frame after; any thread): above this node's own,
 * its view is behind. */
int64_t ol_rpc_peer_revision(const struct ol_rpc *r);

/*
 * The openlake_rpc_* Prometheus lines into buf[0, cap): per peer
 * (label peer="id") connected, calls, failures by cause, credit stalls,
 * bytes sent and received, bytes in flight and credit left; and for the
 * endpoint, requests served, connections, handshakes refused by cause.
 * Any thread. Returns the length (cap or more: did not fit).
 */
size_t ol_rpc_metrics(struct ol_rpc *r, const char *labels, char *buf, size_t cap);

#endif
