/*
 * rpc.c - the node RPC endpoint (see rpc.h; wire format in frame.h and
 * docs/node-protocol.md).
 *
 * A connection has one role. The dialer (struct ol_rpc_peer owns it) sends
 * HELLO, AUTH and REQUESTs; the acceptor sends CHALLENGE, READY and
 * REPLYs. The bytes move over a transport (xport.h: TCP, TLS over TCP,
 * or UCX);
 * everything else is here, the same for every transport. Input arrives
 * in the transport's buffers and is copied into the frame being
 * assembled: a handshake or CLOSE frame into the connection's small
 * buffer, a REQUEST into its struct ol_rpc_reqi (handed
 * to the handler), a REPLY into a buffer of its length (bounded by the
 * call's reply_max; its callback may keep it: ol_rpc_keep). Output is a
 * queue of whole frames, each its header and payload in one buffer or its
 * header then the caller's pieces by reference (ol_rpc_call_ref,
 * ol_rpc_reply_ref: not copied, unref run when the frame is freed), handed
 * to the transport up to OL_RPC_IOV pieces at a time.
 *
 * Calls: a peer has max_calls slots; a call's id is (sequence << 16 |
 * slot). A slot is WAITING (its frame in the peer's queue, for the
 * connection or for credit), SENT, or LATE (its deadline passed and its
 * callback ran; the reply, which may still come, is dropped when it does,
 * and its reply_max stays reserved until then). A connection's end fails
 * its peer's calls at once (-ECONNRESET) and frees every slot.
 *
 * A 50 ms tick closes handshakes past their deadline, dials peers whose
 * backoff ended, re-arms receives that found no buffer while none was
 * free (one that ends with buffers free again, as when the completions
 * before it handed theirs back, re-arms at once: waiting a tick for each
 * ring's worth of bytes cost a burst larger than the ring 50 ms per ring),
 * and pings peers this node has sent nothing for OL_RPC_IDLE_PING_MS
 * (peer_idle_ping).
 *
 * Remote reads (RMA): with a transport that has them (xport.h), an
 * endpoint may map one region (ol_rpc_map) whose packed key its READY
 * gives each dialer that said in HELLO it reads remotely; the dialer
 * unpacks it on that connection (a reconnect gets a fresh one) and
 * ol_rpc_get reads from it. Nothing here knows what the region holds.
 */
#include "net/rpc.h"
#include "base/container.h"

#include "base/assert.h"
#include "base/crc32c.h"
#include "base/le.h"
#include "base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "net/xport.h"
#include "rt/net.h"

#define OL_RPC_TICK_MS   50
#define OL_RPC_IOV       64
#define OL_RPC_SMALL     (OL_RPC_CLOSE_MAX > OL_RPC_HELLO_LEN ? OL_RPC_CLOSE_MAX : OL_RPC_HELLO_LEN)
#define OL_RPC_BUCKETS   1024
#define OL_RPC_LOG_MS    10000
#define OL_RPC_ADDR_LEN  272
#define OL_RPC_METRIC_PEERS 128   /* peers with series of their own */
#define OL_RPC_IDLE_PING_MS 1000u   /* a READY peer sent nothing this long: a PING */
#define OL_RPC_PING_DEADLINE_MS 5000u


/* A frame to send: its header in data, then its payload, copied into data
 * after the header, or (niov > 0) the caller's pieces by reference (ref,
 * run when the frame is freed: sent or dropped). */
struct ol_rpc_out {
    struct ol_rpc_out *next;
    uint32_t len, sent;       /* the whole frame's, header included */
    uint32_t release;         /* a REPLY: its request's reply_max, given back when sent */
    int niov;
    struct iovec *piov;       /* [niov], in the same allocation */
    struct ol_rpc_ref ref;
    _Alignas(struct iovec) uint8_t data[];
};

enum { S_FREE, S_WAITING, S_SENT, S_LATE, S_FAILED };

struct ol_rpc_slot {
    struct ol_timer timer;
    struct ol_rpc_peer *peer;
    struct ol_rpc_slot *wnext, *wprev;   /* the peer's wait queue; FAILED: the
                                            endpoint's list of callbacks to run */
    struct ol_rpc_out *frame;            /* while WAITING */
    ol_rpc_done done;
    void *arg;
    uint64_t id;
    uint32_t reply_max;
    int rc;                              /* FAILED: what its callback gets */
    uint8_t state;
};

enum { P_DOWN, P_DIALING, P_READY };

struct ol_rpc_peer {
    struct ol_rpc *r;
    struct ol_rpc_peer *hnext;
    int64_t id;
    char addr[OL_RPC_ADDR_LEN];
    struct sockaddr_storage sa;
    socklen_t salen;
    struct ol_rpc_conn *conn;
    int state;
    uint64_t retry_ms;
    uint32_t backoff_ms;
    uint32_t max_payload;                /* the acceptor's, from CHALLENGE */
    uint64_t reply_reserved;
    struct ol_rpc_slot *slots;
    uint32_t nfree, *freelist;
    uint64_t seq;
    struct ol_rpc_slot *whead, *wtail;
    uint64_t wait_bytes;                 /* frames in the wait queue */
    bool stalled;
    struct ol_rpc_peer *dnext;           /* removed, freed once its callbacks ran */
    uint64_t sent_ms;                    /* when a request last went to its connection */
    uint64_t ping_id;                    /* the idle ping's call id; 0: none sent yet */
    _Atomic uint32_t credit, window;
    _Atomic uint64_t calls, timeouts, resets, stalls, sent_bytes, recv_bytes, connects,
        auth_failures, pings;
    _Atomic bool ready;
};

enum { C_HELLO, C_AUTH, C_CHAL, C_READY, C_OPEN };

/* A request held by its handler: the public part, then the payload. */
struct ol_rpc_reqi {
    struct ol_rpc_req pub;
    struct ol_rpc_conn *conn;
    uint64_t id;
    uint32_t frame_len;
    uint8_t data[];
};

struct ol_rpc_conn {
    struct ol_xconn *x;                  /* its transport's connection */
    struct ol_rpc *r;
    struct ol_rpc_conn *next, *prev;
    struct ol_rpc_conn *unext, *uprev;   /* acceptors before their proof checked */
    struct ol_rpc_peer *peer;            /* dialer: its peer while attached */
    bool dialer, recv_armed, send_inflight, connecting, closing, close_after, rearm, unauth;
    bool dead;                           /* closed and done with: freed by the reap */
    bool want_rma;                       /* acceptor: the dialer's HELLO asked for a region */
    uint64_t rma_base, rma_len;          /* dialer: the acceptor's region (rma_len 0: none) */
    int state;
    uint64_t deadline_ms;
    int64_t peer_id;
    uint8_t nonce_d[OL_RPC_NONCE_LEN], nonce_a[OL_RPC_NONCE_LEN];
    uint32_t refs;                       /* requests its handlers hold */
    void *data[OL_RPC_CONN_SLOTS];       /* acceptor: its handlers' state (conn_data) */
    /* input: the frame being assembled */
    uint8_t hdr[OL_RPC_HDR_LEN];
    uint32_t hdr_have, body_have;
    uint32_t body_crc;                   /* of body[0, body_have), as it is copied in */
    struct ol_rpc_hdr h;
    uint8_t *body;                       /* small, req->data, or a reply buffer */
    struct ol_rpc_reqi *req;
    uint8_t small[OL_RPC_SMALL];
    /* acceptor: credit, and the dialer's reply window (HELLO) against the
     * reply_max of its requests not yet answered on the wire */
    uint32_t credit_left, grant, reply_budget;
    uint64_t reply_held;
    /* output */
    struct ol_rpc_out *ohead, *otail;
    struct iovec iov[OL_RPC_IOV];
};

/* The counters of one peer, or of all peers summed (ol_rpc_metrics). */
struct peer_sums {
    uint64_t connects, auth, calls, timeouts, resets, stalls, pings, sent, recv, inflight, credit;
};

struct ol_rpc {
    ol_loop *loop;
    int64_t self_id;
    char cluster[OL_RPC_NAME_LEN];
    uint8_t secret[256];
    size_t secret_len;
    uint32_t window, reply_window, max_calls, handshake_ms, max_unauth, max_payload;
    uint32_t credit;               /* granted each dialer in READY: window, or
                                      OL_RPC_NO_CREDITS */
    bool rma;                            /* dialer: asks for regions (HELLO) */
    struct ol_rpc_region region;         /* this node's, mapped (rkey_len 0: none) */
    struct ol_xport *xp;                 /* the transport: its listener, connections */
    int port;
    bool closing;
    struct ol_timer tick;
    struct { ol_rpc_handler fn; void *arg; } handlers[OL_RPC_OP_MAX + 1];
    struct { void (*fn)(void *data, void *arg); void *arg; } conn_end[OL_RPC_CONN_SLOTS];
    unsigned nconn_end;                  /* slots given (ol_rpc_on_conn_end) */
    struct ol_rpc_conn *conns;
    uint32_t nconns;
    struct ol_rpc_conn *uhead, *utail;
    uint32_t nunauth;
    struct ol_rpc_slot *fhead, *ftail;   /* failed calls whose callbacks are due */
    struct ol_rpc_peer *dead_peers;      /* removed, not yet freed */
    struct ol_timer deliver;             /* deferred: runs those callbacks, frees the dead */
    pthread_mutex_t mu;                  /* the peer table, against ol_rpc_metrics */
    struct peer_sums gone;               /* counters of the peers removed (under mu), so
                                            that the summed series never go back */
    struct ol_rpc_peer *buckets[OL_RPC_BUCKETS];
    uint32_t npeers;
    _Atomic int64_t revision, peer_revision;
    _Atomic uint64_t requests, auth_failures, hs_timeouts, unauth_evicted, refused,
        protocol_errors, accepted, nobufs;
    uint64_t log_ms;
};

static void conn_close(struct ol_rpc_conn *c);
static void conn_flush(struct ol_rpc_conn *c);
static void conn_arm(struct ol_rpc_conn *c);
static void peer_pump(struct ol_rpc_peer *p);
static void peer_dial(struct ol_rpc_peer *p);

static uint64_t now_ms(struct ol_rpc *r) { return ol_loop_now_ms(r->loop); }

/* The payload of the reply whose callback runs now on this thread, which
 * ol_rpc_keep may take (NULL: taken, or none). */
static _Thread_local uint8_t *keepable;

uint8_t *ol_rpc_keep(const uint8_t *payload)
{
    if (!payload || payload != keepable)
        return NULL;
    keepable = NULL;
    return (uint8_t *)(uintptr_t)payload;
}

/* ---- output ---------------------------------------------------------------- */

/* A frame with payload iov[0, n): allocated, header written; the payload
 * copied, or with ref (ref->unref set) referenced until the frame is freed.
 * NULL: no memory (ref not run). */
static struct ol_rpc_out *frame_new(struct ol_rpc *r, struct ol_rpc_hdr *h,
                                    const struct iovec *iov, int n, const struct ol_rpc_ref *ref)
{
    size_t len = 0;
    for (int i = 0; i < n; i++)
        len += iov[i].iov_len;
    bool byref = ref && ref->unref && len;
    _Static_assert(OL_RPC_HDR_LEN % _Alignof(struct iovec) == 0, "pieces after the header");
    size_t tail = byref ? (size_t)n * sizeof(struct iovec) : len;
    struct ol_rpc_out *f = malloc(sizeof *f + OL_RPC_HDR_LEN + tail);
    if (!f)
        return NULL;
    f->next = NULL;
    f->len = (uint32_t)(OL_RPC_HDR_LEN + len);
    f->sent = 0;
    f->release = 0;
    f->niov = 0;
    f->piov = NULL;
    f->ref = (struct ol_rpc_ref){0};
    h->len = (uint32_t)len;
    h->revision = atomic_load_explicit(&r->revision, memory_order_relaxed);
    if (byref) {
        f->piov = (struct iovec *)(void *)(f->data + OL_RPC_HDR_LEN);
        for (int i = 0; i < n; i++)
            if (iov[i].iov_len)
                f->piov[f->niov++] = iov[i];
        f->ref = *ref;
        h->payload_crc = ol_rpc_payload_crc(f->piov, f->niov);
    } else {
        uint8_t *p = f->data + OL_RPC_HDR_LEN;
        for (int i = 0; i < n; i++) {
            if (iov[i].iov_len)
                memcpy(p, iov[i].iov_base, iov[i].iov_len);
            p += iov[i].iov_len;
        }
        struct iovec whole = {f->data + OL_RPC_HDR_LEN, len};
        h->payload_crc = len ? ol_rpc_payload_crc(&whole, 1) : 0;
    }
    ol_rpc_hdr_encode(h, f->data);
    return f;
}

static void frame_free(struct ol_rpc_out *f)
{
    if (f && f->ref.unref)
        f->ref.unref(f->ref.arg);
    free(f);
}

/* The bytes of f not sent yet as at most max pieces in v (fewer than all
 * of them when max runs out). Returns how many. */
static int frame_pieces(const struct ol_rpc_out *f, struct iovec *v, int max)
{
    uint32_t skip = f->sent, head = f->niov ? OL_RPC_HDR_LEN : f->len;
    int n = 0;
    if (skip < head) {
        v[n++] = (struct iovec){(uint8_t *)(uintptr_t)f->data + skip, head - skip};
        skip = 0;
    } else {
        skip -= head;
    }
    for (int i = 0; i < f->niov && n < max; i++) {
        size_t l = f->piov[i].iov_len;
        if (skip >= l) {
            skip -= (uint32_t)l;
            continue;
        }
        v[n++] = (struct iovec){(uint8_t *)f->piov[i].iov_base + skip, l - skip};
        skip = 0;
    }
    return n;
}

static void conn_queue(struct ol_rpc_conn *c, struct ol_rpc_out *f)
{
    if (c->otail)
        c->otail->next = f;
    else
        c->ohead = f;
    c->otail = f;
}

/* Queues a control frame (handshake, READY, CLOSE) and sends. -ENOMEM: closed. */
static int conn_send(struct ol_rpc_conn *c, uint8_t type, uint32_t aux, uint16_t status,
                     const void *payload, uint32_t len)
{
    struct ol_rpc_hdr h = {.type = type, .aux = aux, .status = status};
    struct iovec iov = {(void *)(uintptr_t)payload, len};
    struct ol_rpc_out *f = frame_new(c->r, &h, &iov, len ? 1 : 0, NULL);
    if (!f) {
        conn_close(c);
        return -ENOMEM;
    }
    conn_queue(c, f);
    conn_flush(c);
    return 0;
}

/* Sends CLOSE with status and message, then closes. */
static void conn_refuse(struct ol_rpc_conn *c, int status, const char *msg)
{
    if (c->closing || c->close_after)
        return;
    if (status == OL_RPC_PROTOCOL)
        atomic_fetch_add(&c->r->protocol_errors, 1);
    size_t n = strnlen(msg, OL_RPC_CLOSE_MAX);
    c->close_after = true;
    if (conn_send(c, OL_RPC_CLOSE, 0, (uint16_t)status, msg, (uint32_t)n) == 0 && !c->ohead)
        conn_close(c);
}

static void on_sent(struct ol_xconn *x, int res)
{
    struct ol_rpc_conn *c = x->user;
    c->send_inflight = false;
    if (res < 0) {
        conn_close(c);
        return;
    }
    if (c->dialer && c->peer)
        atomic_fetch_add_explicit(&c->peer->sent_bytes, (uint64_t)res, memory_order_relaxed);
    uint32_t left = (uint32_t)res;
    while (left && c->ohead) {
        struct ol_rpc_out *f = c->ohead;
        uint32_t take = f->len - f->sent < left ? f->len - f->sent : left;
        f->sent += take;
        left -= take;
        if (f->sent == f->len) {
            c->ohead = f->next;
            if (!c->ohead)
                c->otail = NULL;
            c->reply_held -= f->release;
            frame_free(f);
        }
    }
    if (c->closing) {
        conn_close(c); /* frees once nothing is in flight */
        return;
    }
    if (!c->ohead && c->close_after) {
        conn_close(c);
        return;
    }
    conn_flush(c);
}

static void conn_flush(struct ol_rpc_conn *c)
{
    if (c->send_inflight || c->closing || c->connecting || !c->ohead)
        return;
    int n = 0;
    for (struct ol_rpc_out *f = c->ohead; f && n < OL_RPC_IOV; f = f->next)
        n += frame_pieces(f, c->iov + n, OL_RPC_IOV - n);
    if (c->x->t->ops->send(c->x, c->iov, n) != 0) {
        conn_close(c);
        return;
    }
    c->send_inflight = true;
}

/* ---- calls ------------------------------------------------------------------ */

static void wait_unlink(struct ol_rpc_peer *p, struct ol_rpc_slot *s)
{
    if (s->wprev)
        s->wprev->wnext = s->wnext;
    else
        p->whead = s->wnext;
    if (s->wnext)
        s->wnext->wprev = s->wprev;
    else
        p->wtail = s->wprev;
    s->wnext = s->wprev = NULL;
    p->wait_bytes -= s->frame->len;
}

/* Returns s to its peer's free slots (its callback has run, or runs now
 * from the caller's own context). */
/* What a call holds besides its slot: its deadline, its frame while it
 * waits, its reply_max reserved. */
static void slot_release(struct ol_rpc_peer *p, struct ol_rpc_slot *s)
{
    ol_timer_cancel(p->r->loop, &s->timer);
    if (s->state == S_WAITING) {
        wait_unlink(p, s);
        frame_free(s->frame);
        s->frame = NULL;
    }
    p->reply_reserved -= s->reply_max;
    s->reply_max = 0;
}

static void slot_free(struct ol_rpc_peer *p, struct ol_rpc_slot *s)
{
    slot_release(p, s);
    s->state = S_FREE;
    s->done = NULL;
    p->freelist[p->nfree++] = (uint32_t)(s - p->slots);
}

/*
 * Ends call s with rc. Its callback does not run here: s joins the
 * endpoint's list of failed calls, run from a deferred callback (never in
 * the middle of one of the endpoint's own walks, so a callback may call
 * anything of rpc.h, remove its peer included); the slot is free once it
 * ran. A LATE call (its callback ran at its deadline) is just freed.
 */
static void slot_fail(struct ol_rpc_peer *p, struct ol_rpc_slot *s, int rc)
{
    struct ol_rpc *r = p->r;
    if (s->state == S_LATE) {
        slot_free(p, s);
        return;
    }
    OL_ASSERT(s->state == S_WAITING || s->state == S_SENT);
    slot_release(p, s);
    s->state = S_FAILED;
    s->rc = rc;
    s->wnext = NULL;
    if (r->ftail)
        r->ftail->wnext = s;
    else
        r->fhead = s;
    r->ftail = s;
    ol_loop_defer(r->loop, &r->deliver);
}

/* Ends every call of p with rc (in flight, waiting; late ones are freed). */
static void peer_fail_calls(struct ol_rpc_peer *p, int rc)
{
    for (uint32_t i = 0; i < p->r->max_calls; i++) {
        struct ol_rpc_slot *s = &p->slots[i];
        if (s->state == S_FREE || s->state == S_FAILED)
            continue;
        if (rc == -ECONNRESET && s->state != S_LATE)
            atomic_fetch_add_explicit(&p->resets, 1, memory_order_relaxed);
        slot_fail(p, s, rc);
    }
    p->stalled = false;
}

static void peer_free(struct ol_rpc_peer *p)
{
    for (uint32_t i = 0; p->slots && i < p->r->max_calls; i++)   /* waiting at destroy */
        if (p->slots[i].state == S_WAITING)
            frame_free(p->slots[i].frame);
    free(p->slots);
    free(p->freelist);
    free(p);
}

static void conn_reap(struct ol_rpc *r);

/* The deferred half of slot_fail and of removals: the failed calls'
 * callbacks (those they cause included), then the removed peers and the
 * dead connections are freed. */
static void on_deliver(ol_loop *loop, struct ol_timer *t)
{
    (void)loop;
    struct ol_rpc *r = (struct ol_rpc *)((char *)t - offsetof(struct ol_rpc, deliver));
    struct ol_rpc_slot *s;
    while ((s = r->fhead)) {
        r->fhead = s->wnext;
        if (!r->fhead)
            r->ftail = NULL;
        ol_rpc_done done = s->done;
        void *arg = s->arg;
        int rc = s->rc;
        slot_free(s->peer, s);
        done(arg, rc, NULL, 0);
    }
    while (r->dead_peers) {
        struct ol_rpc_peer *p = r->dead_peers;
        r->dead_peers = p->dnext;
        peer_free(p);
    }
    conn_reap(r);
}

static void on_call_timer(ol_loop *loop, struct ol_timer *t)
{
    (void)loop;
    struct ol_rpc_slot *s = OL_CONTAINER(t, struct ol_rpc_slot, timer);
    struct ol_rpc_peer *p = s->peer;
    ol_rpc_done done = s->done;
    void *arg = s->arg;
    atomic_fetch_add_explicit(&p->timeouts, 1, memory_order_relaxed);
    if (s->state == S_WAITING) {
        slot_free(p, s);
    } else {
        s->state = S_LATE; /* its reply may still come: reply_max stays reserved */
        s->done = NULL;
    }
    done(arg, -ETIMEDOUT, NULL, 0);
}

/* Moves waiting calls into the connection's output while credit allows. */
static void peer_pump(struct ol_rpc_peer *p)
{
    if (p->state != P_READY || !p->conn)
        return;
    struct ol_rpc_conn *c = p->conn;
    while (p->whead) {
        struct ol_rpc_slot *s = p->whead;
        uint32_t len = s->frame->len;
        if (len - OL_RPC_HDR_LEN > p->max_payload) {
            slot_fail(p, s, -EMSGSIZE);
            continue;
        }
        uint32_t credit = atomic_load_explicit(&p->credit, memory_order_relaxed);
        if (len > credit) {
            if (!p->stalled) {
                p->stalled = true;
                atomic_fetch_add_explicit(&p->stalls, 1, memory_order_relaxed);
            }
            break;
        }
        p->stalled = false;
        atomic_store_explicit(&p->credit, credit - len, memory_order_relaxed);
        wait_unlink(p, s);
        conn_queue(c, s->frame);
        s->frame = NULL;
        s->state = S_SENT;
        p->sent_ms = now_ms(p->r);
    }
    conn_flush(c);
}

int ol_rpc_call(struct ol_rpc *r, int64_t peer, uint16_t op, const struct iovec *iov, int n,
                uint32_t reply_max, uint32_t timeout_ms, ol_rpc_done done, void *arg)
{
    return ol_rpc_call_ref(r, peer, op, iov, n, NULL, reply_max, timeout_ms, done, arg);
}

int ol_rpc_call_ref(struct ol_rpc *r, int64_t peer, uint16_t op, const struct iovec *iov, int n,
                    const struct ol_rpc_ref *ref, uint32_t reply_max, uint32_t timeout_ms,
                    ol_rpc_done done, void *arg)
{
    OL_ASSERT(done && timeout_ms > 0);
    struct ol_rpc_peer *p = r->buckets[(uint64_t)peer % OL_RPC_BUCKETS];
    while (p && p->id != peer)
        p = p->hnext;
    if (r->closing)
        return -ECANCELED;
    if (!p)
        return -ENOENT;
    if (p->state == P_DOWN)
        return -ENOTCONN;
    size_t len = 0;
    for (int i = 0; i < n; i++)
        len += iov[i].iov_len;
    if (reply_max > r->reply_window || len > OL_RPC_PAYLOAD_LIMIT ||
        (p->state == P_READY && len > p->max_payload))
        return -EMSGSIZE;
    if (!p->nfree || p->reply_reserved + reply_max > r->reply_window ||
        p->wait_bytes + OL_RPC_HDR_LEN + len > r->window)
        return -EAGAIN;
    struct ol_rpc_slot *s = &p->slots[p->freelist[p->nfree - 1]];
    uint64_t id = (++p->seq << 16) | (uint64_t)(s - p->slots);
    struct ol_rpc_hdr h = {.type = OL_RPC_REQUEST, .op = op, .id = id, .aux = reply_max};
    struct ol_rpc_out *f = frame_new(r, &h, iov, n, ref);
    if (!f)
        return -ENOMEM;
    if (!f->ref.unref && ref && ref->unref)
        ref->unref(ref->arg);   /* an empty payload: nothing referenced */
    p->nfree--;
    s->frame = f;
    s->id = id;
    s->done = done;
    s->arg = arg;
    s->reply_max = reply_max;
    s->state = S_WAITING;
    p->reply_reserved += reply_max;
    p->wait_bytes += f->len;
    s->wnext = NULL;
    s->wprev = p->wtail;
    if (p->wtail)
        p->wtail->wnext = s;
    else
        p->whead = s;
    p->wtail = s;
    s->timer.fn = on_call_timer;
    ol_timer_arm(r->loop, &s->timer, timeout_ms);
    atomic_fetch_add_explicit(&p->calls, 1, memory_order_relaxed);
    /* Only calls already admitted can end inside the pump (too large for
     * the peer): this one's length was checked above when it is ready. */
    peer_pump(p);
    return 0;
}

/* ---- handlers ---------------------------------------------------------------- */

void ol_rpc_reply(struct ol_rpc_req *req, int status, const struct iovec *iov, int n)
{
    ol_rpc_reply_ref(req, status, iov, n, NULL);
}

void ol_rpc_reply_ref(struct ol_rpc_req *req, int status, const struct iovec *iov, int n,
                      const struct ol_rpc_ref *ref)
{
    struct ol_rpc_reqi *ri = OL_CONTAINER(req, struct ol_rpc_reqi, pub);
    struct ol_rpc_conn *c = ri->conn;
    size_t len = 0;
    for (int i = 0; i < n; i++)
        len += iov[i].iov_len;
    if (len > req->reply_max) {
        status = OL_RPC_TOO_LARGE;
        n = 0;
    }
    OL_ASSERT(c->refs > 0 && status >= 0 && status <= OL_RPC_STATUS_MAX);
    struct ol_rpc_hdr h = {.type = OL_RPC_REPLY, .op = req->op, .id = ri->id,
                           .status = (uint16_t)status};
    c->refs--;
    c->grant += ri->frame_len;
    if (c->closing || c->close_after) {
        free(ri);
        if (ref && ref->unref)
            ref->unref(ref->arg);
        conn_close(c); /* frees c once nothing else holds it */
        return;
    }
    h.aux = c->grant;
    struct ol_rpc_out *f = frame_new(c->r, &h, iov, n, ref);
    uint32_t reply_max = req->reply_max;
    free(ri);
    if ((!f || !f->ref.unref) && ref && ref->unref)
        ref->unref(ref->arg);   /* not sent, or nothing referenced (TOO_LARGE, empty) */
    if (!f) {
        conn_close(c);
        return;
    }
    f->release = reply_max;
    c->credit_left += c->grant;
    c->grant = 0;
    conn_queue(c, f);
    conn_flush(c);
}

/* PING: u32 n, then anything; the reply is n zero bytes. */
static void on_ping(struct ol_rpc_req *req, void *arg)
{
    (void)arg;
    if (req->len < 4) {
        ol_rpc_reply(req, OL_RPC_BAD_REQUEST, NULL, 0);
        return;
    }
    uint32_t want = ol_le_ld32(req->payload);
    if (want > req->reply_max) {
        ol_rpc_reply(req, OL_RPC_TOO_LARGE, NULL, 0);
        return;
    }
    static const uint8_t zeros[64 << 10];
    struct iovec iov[64];
    int n = 0;
    for (uint32_t left = want; left && n < 64; n++) {
        iov[n].iov_base = (void *)(uintptr_t)zeros;
        iov[n].iov_len = left < sizeof zeros ? left : sizeof zeros;
        left -= (uint32_t)iov[n].iov_len;
    }
    if (want > sizeof zeros * 64) {
        ol_rpc_reply(req, OL_RPC_TOO_LARGE, NULL, 0);
        return;
    }
    ol_rpc_reply(req, OL_RPC_OK, iov, n);
}

/* ---- connections ---------------------------------------------------------------- */

static void unauth_remove(struct ol_rpc_conn *c)
{
    if (!c->unauth)
        return;
    struct ol_rpc *r = c->r;
    if (c->uprev)
        c->uprev->unext = c->unext;
    else
        r->uhead = c->unext;
    if (c->unext)
        c->unext->uprev = c->uprev;
    else
        r->utail = c->uprev;
    c->unext = c->uprev = NULL;
    c->unauth = false;
    r->nunauth--;
}

/* A closing connection with nothing in flight and no request held: its
 * socket and buffers go now; the struct stays on the list, marked dead,
 * until the deferred reap (so a walk of the list that closes connections
 * never steps on freed memory). */
static void conn_maybe_free(struct ol_rpc_conn *c)
{
    if (c->dead || !c->closing || c->recv_armed || c->send_inflight || c->connecting ||
        c->refs)
        return;
    struct ol_rpc *r = c->r;
    for (unsigned i = 0; i < r->nconn_end; i++)
        if (c->data[i])
            r->conn_end[i].fn(c->data[i], r->conn_end[i].arg);
    memset(c->data, 0, sizeof c->data);
    if (c->x)
        c->x->t->ops->free(c->x);
    c->x = NULL;
    while (c->ohead) {
        struct ol_rpc_out *f = c->ohead;
        c->ohead = f->next;
        frame_free(f);
    }
    c->otail = NULL;
    /* a request being received owns its payload (c->body points into it) */
    if (c->req)
        free(c->req);
    else if (c->body && c->body != c->small)
        free(c->body);
    c->req = NULL;
    c->body = NULL;
    c->dead = true;
    r->nconns--;
    ol_loop_defer(r->loop, &r->deliver);
}

static void conn_reap(struct ol_rpc *r)
{
    for (struct ol_rpc_conn *c = r->conns, *next; c; c = next) {
        next = c->next;
        if (!c->dead)
            continue;
        if (c->prev)
            c->prev->next = c->next;
        else
            r->conns = c->next;
        if (c->next)
            c->next->prev = c->prev;
        free(c);
    }
}

/* Detaches a dialer's connection from its peer: the peer goes down (a
 * retry after its backoff) and its calls fail now. */
static void conn_detach(struct ol_rpc_conn *c)
{
    struct ol_rpc_peer *p = c->peer;
    if (!p)
        return;
    c->peer = NULL;
    p->conn = NULL;
    bool was_ready = p->state == P_READY;
    p->state = P_DOWN;
    atomic_store_explicit(&p->ready, false, memory_order_relaxed);
    atomic_store_explicit(&p->credit, 0, memory_order_relaxed);
    if (was_ready)
        p->backoff_ms = OL_RPC_BACKOFF_MIN_MS;
    p->retry_ms = now_ms(p->r) + p->backoff_ms;
    if (!was_ready) {
        p->backoff_ms *= 2;
        if (p->backoff_ms > OL_RPC_BACKOFF_MAX_MS)
            p->backoff_ms = OL_RPC_BACKOFF_MAX_MS;
    }
    peer_fail_calls(p, c->r->closing ? -ECANCELED : -ECONNRESET);
}

static void conn_close(struct ol_rpc_conn *c)
{
    if (c->dead)
        return;
    if (!c->closing) {
        c->closing = true;
        unauth_remove(c);
        if (c->x)
            c->x->t->ops->shutdown(c->x);
        conn_detach(c);
    }
    conn_maybe_free(c);
}

/* A warning, at most one per OL_RPC_LOG_MS per endpoint (a peer that
 * keeps failing, or a stranger knocking, cannot flood the log). */
__attribute__((format(printf, 2, 3)))
static void log_limited(struct ol_rpc *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ol_vwarn_limited(&r->log_ms, now_ms(r), OL_RPC_LOG_MS, fmt, ap);
    va_end(ap);
}

/* A connection over x (a dialer's: NULL until its dial started). */
static struct ol_rpc_conn *conn_new(struct ol_rpc *r, struct ol_xconn *x, bool dialer)
{
    if (r->nconns >= OL_RPC_MAX_CONNS)
        return NULL;
    struct ol_rpc_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->r = r;
    c->x = x;
    if (x)
        x->user = c;
    c->dialer = dialer;
    c->deadline_ms = now_ms(r) + r->handshake_ms;
    c->next = r->conns;
    if (r->conns)
        r->conns->prev = c;
    r->conns = c;
    r->nconns++;
    return c;
}

static void conn_arm(struct ol_rpc_conn *c)
{
    if (c->recv_armed || c->closing)
        return;
    if (c->x->t->ops->recv(c->x) != 0) {
        conn_close(c);
        return;
    }
    c->recv_armed = true;
    c->rearm = false;
}

/* ---- the handshake ----------------------------------------------------------- */

static void dialer_hello(struct ol_rpc_conn *c)
{
    struct ol_rpc *r = c->r;
    uint8_t b[OL_RPC_HELLO_LEN] = {0};
    ol_le_st64(b, (uint64_t)r->self_id);
    if (getrandom(c->nonce_d, sizeof c->nonce_d, 0) != (ssize_t)sizeof c->nonce_d) {
        conn_close(c);
        return;
    }
    memcpy(b + 8, c->nonce_d, OL_RPC_NONCE_LEN);
    memcpy(b + 8 + OL_RPC_NONCE_LEN, r->cluster, OL_RPC_NAME_LEN);
    ol_le_st32(b + 104, r->reply_window);
    ol_le_st32(b + 108, r->rma ? OL_RPC_HELLO_RMA : 0);
    c->state = C_CHAL;
    if (conn_send(c, OL_RPC_HELLO, 0, 0, b, sizeof b) == 0)
        conn_arm(c);
}

/* Acceptor: HELLO in; the CHALLENGE out. */
static void acceptor_hello(struct ol_rpc_conn *c, const uint8_t *b)
{
    struct ol_rpc *r = c->r;
    c->peer_id = (int64_t)ol_le_ld64(b);
    memcpy(c->nonce_d, b + 8, OL_RPC_NONCE_LEN);
    c->reply_budget = ol_le_ld32(b + 104);
    uint32_t flags = ol_le_ld32(b + 108);
    if (flags & ~OL_RPC_HELLO_RMA) {
        conn_refuse(c, OL_RPC_PROTOCOL, "unknown HELLO flags");
        return;
    }
    c->want_rma = flags & OL_RPC_HELLO_RMA;
    if (memcmp(b + 8 + OL_RPC_NONCE_LEN, r->cluster, OL_RPC_NAME_LEN) != 0) {
        atomic_fetch_add(&r->auth_failures, 1);
        log_limited(r, "node rpc: a dialer (claims node %lld) names another cluster: refused",
                    (long long)c->peer_id);
        conn_refuse(c, OL_RPC_WRONG_CLUSTER, "wrong cluster");
        return;
    }
    if (getrandom(c->nonce_a, sizeof c->nonce_a, 0) != (ssize_t)sizeof c->nonce_a) {
        conn_close(c);
        return;
    }
    uint8_t out[OL_RPC_CHAL_LEN] = {0};
    ol_le_st64(out, (uint64_t)r->self_id);
    memcpy(out + 8, c->nonce_a, OL_RPC_NONCE_LEN);
    ol_rpc_proof(r->secret, r->secret_len, 1, r->cluster, c->peer_id, r->self_id, c->nonce_d,
                 c->nonce_a, out + 8 + OL_RPC_NONCE_LEN);
    ol_le_st32(out + 72, r->max_payload);
    c->state = C_AUTH;
    conn_send(c, OL_RPC_CHALLENGE, 0, 0, out, sizeof out);
}

/* A revision an authenticated peer's frame carried (its AUTH or READY
 * included: a node that joins tells the others at once). */
static void note_revision(struct ol_rpc *r, int64_t rev)
{
    int64_t have = atomic_load_explicit(&r->peer_revision, memory_order_relaxed);
    while (rev > have && !atomic_compare_exchange_weak_explicit(
                             &r->peer_revision, &have, rev, memory_order_relaxed,
                             memory_order_relaxed)) {
    }
}

/* Acceptor: AUTH in; READY out, or refused. */
static void acceptor_auth(struct ol_rpc_conn *c, const uint8_t *b)
{
    struct ol_rpc *r = c->r;
    uint8_t want[OL_RPC_PROOF_LEN];
    ol_rpc_proof(r->secret, r->secret_len, 0, r->cluster, c->peer_id, r->self_id, c->nonce_d,
                 c->nonce_a, want);
    if (!ol_rpc_proof_equal(want, b)) {
        atomic_fetch_add(&r->auth_failures, 1);
        log_limited(r, "node rpc: a dialer claiming node %lld failed authentication (another "
                    "cluster secret?): refused", (long long)c->peer_id);
        conn_refuse(c, OL_RPC_AUTH_FAILED, "authentication failed");
        return;
    }
    unauth_remove(c);
    /* One connection per dialer: a newer one (the node restarted, or
     * reconnected before this end saw the old one go) replaces the older. */
    bool held = false;
    for (struct ol_rpc_conn *o = r->conns, *next; o; o = next) {
        next = o->next;
        if (o == c || o->dead || o->dialer || o->state != C_OPEN || o->peer_id != c->peer_id)
            continue;
        held |= o->refs > 0;
        conn_close(o);
    }
    if (held) {
        /* its requests there still count against this dialer: it holds
         * no more than one window at a time, and comes back after its
         * backoff, when the handlers have answered them */
        conn_refuse(c, OL_RPC_BUSY, "the previous connection's requests are still held");
        return;
    }
    c->state = C_OPEN;
    c->credit_left = r->credit;
    note_revision(r, c->h.revision);
    if (c->want_rma && r->region.rkey_len) {
        uint8_t *out = malloc(OL_RPC_READY_HDR + r->region.rkey_len);
        if (!out) {
            conn_close(c);
            return;
        }
        size_t n = ol_rpc_ready_encode(&r->region, out);
        conn_send(c, OL_RPC_READY, r->credit, 0, out, (uint32_t)n);
        free(out);
        return;
    }
    conn_send(c, OL_RPC_READY, r->credit, 0, NULL, 0);
}

/* Dialer: CHALLENGE in; AUTH out, or closed. */
static void dialer_challenge(struct ol_rpc_conn *c, const uint8_t *b)
{
    struct ol_rpc *r = c->r;
    struct ol_rpc_peer *p = c->peer;
    int64_t aid = (int64_t)ol_le_ld64(b);
    memcpy(c->nonce_a, b + 8, OL_RPC_NONCE_LEN);
    uint8_t want[OL_RPC_PROOF_LEN];
    if (aid != p->id) {
        log_limited(r, "node rpc: %s answers as node %lld, not %lld: closed", p->addr,
                    (long long)aid, (long long)p->id);
        conn_close(c);
        return;
    }
    ol_rpc_proof(r->secret, r->secret_len, 1, r->cluster, r->self_id, aid, c->nonce_d,
                 c->nonce_a, want);
    if (!ol_rpc_proof_equal(want, b + 8 + OL_RPC_NONCE_LEN)) {
        atomic_fetch_add_explicit(&p->auth_failures, 1, memory_order_relaxed);
        log_limited(r, "node rpc: %s (node %lld) failed authentication (another cluster "
                    "secret?): closed", p->addr, (long long)aid);
        conn_close(c);
        return;
    }
    if (ol_le_ld32(b + 76) != 0) {
        conn_close(c);
        return;
    }
    uint32_t mp = ol_le_ld32(b + 72);
    p->max_payload = mp < OL_RPC_PAYLOAD_LIMIT ? mp : OL_RPC_PAYLOAD_LIMIT;
    uint8_t proof[OL_RPC_PROOF_LEN];
    ol_rpc_proof(r->secret, r->secret_len, 0, r->cluster, r->self_id, aid, c->nonce_d,
                 c->nonce_a, proof);
    c->state = C_READY;
    conn_send(c, OL_RPC_AUTH, 0, 0, proof, sizeof proof);
}

static void dialer_ready(struct ol_rpc_conn *c, uint32_t credit, const uint8_t *b, uint32_t len)
{
    struct ol_rpc_peer *p = c->peer;
    struct ol_rpc_region rg;
    if (ol_rpc_ready_parse(b, len, &rg) != 0) {
        conn_refuse(c, OL_RPC_PROTOCOL, "bad READY payload");
        return;
    }
    if (rg.rkey_len) {
        int rc = c->x->t->ops->rkey_unpack(c->x, rg.rkey, rg.rkey_len);
        if (rc != 0) {
            log_limited(c->r, "node rpc: %s (node %lld) sent a remote key this node cannot "
                        "use (%s): closed", p->addr, (long long)p->id, strerror(-rc));
            conn_refuse(c, OL_RPC_PROTOCOL, "unusable remote key");
            return;
        }
        c->rma_base = rg.base;
        c->rma_len = rg.len;
    }
    c->state = C_OPEN;
    note_revision(c->r, c->h.revision);
    p->state = P_READY;
    p->sent_ms = now_ms(c->r);     /* its first idle ping a period from now */
    p->backoff_ms = OL_RPC_BACKOFF_MIN_MS;
    atomic_store_explicit(&p->window, credit, memory_order_relaxed);
    atomic_store_explicit(&p->credit, credit, memory_order_relaxed);
    atomic_store_explicit(&p->ready, true, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->connects, 1, memory_order_relaxed);
    peer_pump(p);
}

/* ---- input ---------------------------------------------------------------------- */

/* Which frames each state takes, and their payload limits. Returns the
 * payload bound, or -1: the frame is out of place. */
static int64_t frame_allowed(const struct ol_rpc_conn *c, const struct ol_rpc_hdr *h)
{
    if (h->type == OL_RPC_CLOSE)
        return OL_RPC_CLOSE_MAX;
    switch (c->state) {
    case C_HELLO: return h->type == OL_RPC_HELLO ? OL_RPC_HELLO_LEN : -1;
    case C_AUTH:  return h->type == OL_RPC_AUTH ? OL_RPC_AUTH_LEN : -1;
    case C_CHAL:  return h->type == OL_RPC_CHALLENGE ? OL_RPC_CHAL_LEN : -1;
    case C_READY: /* a payload only when HELLO asked for one */
        if (h->type != OL_RPC_READY)
            return -1;
        return c->r->rma ? OL_RPC_READY_HDR + OL_RPC_RKEY_MAX : 0;
    default:
        if (c->dialer)
            return h->type == OL_RPC_REPLY ? (int64_t)OL_RPC_PAYLOAD_LIMIT : -1;
        return h->type == OL_RPC_REQUEST ? (int64_t)c->r->max_payload : -1;
    }
}

/* A header is in: where its payload goes. 0, or -1 (refused; c closing). */
static int frame_begin(struct ol_rpc_conn *c)
{
    struct ol_rpc *r = c->r;
    int rc = ol_rpc_hdr_parse(c->hdr, OL_RPC_HDR_LEN, &c->h);
    if (rc != OL_RPC_HDR_LEN) {
        conn_refuse(c, OL_RPC_PROTOCOL, rc == OL_RPC_BAD_VERSION ? "unsupported version"
                                                                 : "bad frame header");
        return -1;
    }
    struct ol_rpc_hdr *h = &c->h;
    int64_t lim = frame_allowed(c, h);
    bool exact = h->type == OL_RPC_HELLO || h->type == OL_RPC_AUTH || h->type == OL_RPC_CHALLENGE;
    if (lim < 0 || h->len > lim || (exact && h->len != lim)) {
        conn_refuse(c, OL_RPC_PROTOCOL, lim < 0 ? "frame out of place" : "frame too large");
        return -1;
    }
    if (c->state == C_OPEN)
        note_revision(r, h->revision);
    c->body_have = 0;
    c->body_crc = 0;
    if (h->type == OL_RPC_REQUEST) {
        uint32_t flen = OL_RPC_HDR_LEN + h->len;
        if (flen > c->credit_left) {
            conn_refuse(c, OL_RPC_PROTOCOL, "request over its credit");
            return -1;
        }
        if (c->reply_held + h->aux > c->reply_budget) {
            conn_refuse(c, OL_RPC_PROTOCOL, "request over its reply window");
            return -1;
        }
        c->credit_left -= flen;
        c->reply_held += h->aux;
        struct ol_rpc_reqi *ri = malloc(sizeof *ri + h->len);
        if (!ri) {
            conn_close(c);
            return -1;
        }
        ri->pub = (struct ol_rpc_req){.peer = c->peer_id, .op = h->op, .reply_max = h->aux,
                                      .conn_data = c->data,
                                      .revision = h->revision, .len = h->len,
                                      .payload = ri->data};
        ri->conn = c;
        ri->id = h->id;
        ri->frame_len = flen;
        c->req = ri;
        c->body = ri->data;
    } else if (h->type == OL_RPC_REPLY) {
        struct ol_rpc_peer *p = c->peer;
        uint32_t slot = (uint32_t)(h->id & 0xffff);
        if (slot >= r->max_calls || p->slots[slot].id != h->id ||
            (p->slots[slot].state != S_SENT && p->slots[slot].state != S_LATE)) {
            conn_refuse(c, OL_RPC_PROTOCOL, "reply to no request");
            return -1;
        }
        if (h->len > p->slots[slot].reply_max) {
            conn_refuse(c, OL_RPC_PROTOCOL, "reply over its reply_max");
            return -1;
        }
        c->body = h->len ? malloc(h->len) : NULL;
        if (h->len && !c->body) {
            conn_close(c);
            return -1;
        }
    } else if (h->type == OL_RPC_READY && h->len) {
        c->body = malloc(h->len); /* bounded above; freed at the frame's end */
        if (!c->body) {
            conn_close(c);
            return -1;
        }
    } else {
        c->body = c->small;
    }
    return 0;
}

/* A whole frame is in. */
static void frame_end(struct ol_rpc_conn *c)
{
    struct ol_rpc *r = c->r;
    struct ol_rpc_hdr *h = &c->h;
    if (h->len && c->body_crc != h->payload_crc) {
        conn_refuse(c, OL_RPC_PROTOCOL, "payload checksum mismatch");
        return;
    }
    uint8_t *body = c->body;
    c->body = NULL;
    switch (h->type) {
    case OL_RPC_CLOSE: {
        char msg[OL_RPC_CLOSE_MAX + 1];
        size_t n = 0;
        for (uint32_t i = 0; i < h->len; i++)
            msg[n++] = body[i] >= 0x20 && body[i] < 0x7f ? (char)body[i] : '?';
        msg[n] = 0;
        if (c->dialer && c->peer)
            log_limited(r, "node rpc: node %lld (%s) closed the connection: %s (%s)",
                        (long long)c->peer->id, c->peer->addr, msg,
                        ol_rpc_status_name(h->status));
        conn_close(c);
        return;
    }
    case OL_RPC_HELLO:
        acceptor_hello(c, body);
        return;
    case OL_RPC_AUTH:
        acceptor_auth(c, body);
        return;
    case OL_RPC_CHALLENGE:
        dialer_challenge(c, body);
        return;
    case OL_RPC_READY:
        dialer_ready(c, h->aux, body, h->len);
        if (body != c->small)
            free(body);
        return;
    case OL_RPC_REQUEST: {
        struct ol_rpc_reqi *ri = c->req;
        c->req = NULL;
        c->refs++;
        atomic_fetch_add_explicit(&r->requests, 1, memory_order_relaxed);
        if (h->op <= OL_RPC_OP_MAX && r->handlers[h->op].fn)
            r->handlers[h->op].fn(&ri->pub, r->handlers[h->op].arg);
        else
            ol_rpc_reply(&ri->pub, OL_RPC_UNKNOWN_OP, NULL, 0);
        return;
    }
    case OL_RPC_REPLY: {
        struct ol_rpc_peer *p = c->peer;
        struct ol_rpc_slot *s = &p->slots[h->id & 0xffff];
        atomic_fetch_add_explicit(&p->recv_bytes, OL_RPC_HDR_LEN + h->len, memory_order_relaxed);
        uint32_t credit = atomic_load_explicit(&p->credit, memory_order_relaxed);
        uint32_t window = atomic_load_explicit(&p->window, memory_order_relaxed);
        if (h->aux > window - credit) {
            free(body);
            conn_refuse(c, OL_RPC_PROTOCOL, "credit over the window");
            return;
        }
        atomic_store_explicit(&p->credit, credit + h->aux, memory_order_relaxed);
        ol_rpc_done done = s->state == S_SENT ? s->done : NULL;
        void *arg = s->arg;
        slot_free(p, s);
        if (done) {
            uint8_t *outer = keepable;   /* a callback inside another's (never now) */
            keepable = body;
            done(arg, h->status, body, h->len);
            if (!keepable)
                body = NULL;             /* kept: ol_rpc_keep */
            keepable = outer;
        }
        free(body);
        if (c->peer == p && !c->closing)
            peer_pump(p);
        return;
    }
    }
}

/* Takes n received bytes. Stops early when the connection closes. */
static void conn_take(struct ol_rpc_conn *c, const uint8_t *b, uint32_t n)
{
    while (n && !c->closing && !c->close_after) {
        if (c->hdr_have < OL_RPC_HDR_LEN) {
            uint32_t take = OL_RPC_HDR_LEN - c->hdr_have;
            if (take > n)
                take = n;
            memcpy(c->hdr + c->hdr_have, b, take);
            c->hdr_have += take;
            b += take;
            n -= take;
            if (c->hdr_have < OL_RPC_HDR_LEN) {
                struct ol_rpc_hdr h;
                int rc = ol_rpc_hdr_parse(c->hdr, c->hdr_have, &h);
                if (rc != OL_RPC_INCOMPLETE)
                    conn_refuse(c, OL_RPC_PROTOCOL, "bad frame header");
                return;
            }
            if (frame_begin(c) != 0)
                return;
        }
        uint32_t take = c->h.len - c->body_have;
        if (take > n)
            take = n;
        if (take) {   /* the checksum while the bytes are in cache */
            memcpy(c->body + c->body_have, b, take);
            c->body_crc = ol_crc32c(c->body_crc, c->body + c->body_have, take);
        }
        c->body_have += take;
        b += take;
        n -= take;
        if (c->body_have == c->h.len) {
            c->hdr_have = 0;
            frame_end(c);
        }
    }
}

static void on_received(struct ol_xconn *x, int res, const uint8_t *b, bool more)
{
    struct ol_rpc_conn *c = x->user;
    if (!more)
        c->recv_armed = false;
    c->refs++; /* c stays while its frames are handled */
    if (res > 0) {
        conn_take(c, b, (uint32_t)res);
    } else if (res == -ENOBUFS) {
        atomic_fetch_add(&c->r->nobufs, 1);
        /* the receives before this one handed their buffers back (each
         * copies its bytes out): armed again below while the ring has any
         * not lent out (some may be filled already, their completions
         * still to come: then this ends in -ENOBUFS again, one more round
         * trip, and they are back by then); with none, by the tick */
        c->rearm = ol_loop_bufs_free(c->r->loop) == 0;
    } else if (res != -ECANCELED || !c->closing) {
        if (res != -ECANCELED)
            conn_close(c);
    }
    c->refs--;
    if (c->closing)
        conn_maybe_free(c);
    else if (!c->recv_armed && !c->rearm)
        conn_arm(c);
}

/* ---- accept and dial -------------------------------------------------------------- */

static void on_accepted(void *arg, struct ol_xconn *x)
{
    struct ol_rpc *r = arg;
    struct ol_rpc_conn *c = r->closing ? NULL : conn_new(r, x, false);
    if (!c) {
        atomic_fetch_add(&r->refused, 1);
        x->t->ops->free(x);
        return;
    }
    atomic_fetch_add(&r->accepted, 1);
    if (r->nunauth >= r->max_unauth) {
        atomic_fetch_add(&r->unauth_evicted, 1);
        conn_close(r->uhead);
    }
    c->unauth = true;
    c->uprev = r->utail;
    if (r->utail)
        r->utail->unext = c;
    else
        r->uhead = c;
    r->utail = c;
    r->nunauth++;
    c->state = C_HELLO;
    conn_arm(c);
}

static void on_connected(struct ol_xconn *x, int res)
{
    struct ol_rpc_conn *c = x->user;
    c->connecting = false;
    if (c->closing || res < 0) {
        conn_close(c);
        return;
    }
    dialer_hello(c);
}

static void peer_dial(struct ol_rpc_peer *p)
{
    struct ol_rpc *r = p->r;
    struct ol_rpc_conn *c = conn_new(r, NULL, true);
    if (!c) {
        p->retry_ms = now_ms(r) + p->backoff_ms;
        return;
    }
    c->peer = p;
    c->peer_id = p->id;
    c->state = C_CHAL;
    p->conn = c;
    p->state = P_DIALING;
    int rc;
    c->x = r->xp->ops->dial(r->xp, (struct sockaddr *)&p->sa, p->salen, c, &rc);
    if (!c->x) {
        conn_close(c);
        return;
    }
    c->connecting = true;
}

/* ---- idle pings -------------------------------------------------------------------- */

static void on_idle_pong(void *arg, int rc, const uint8_t *payload, uint32_t len)
{
    (void)arg, (void)rc, (void)payload, (void)len;
}

/*
 * Every frame carries its sender's membership revision, so two nodes that
 * exchange frames learn when one's etcd view is behind the other's
 * (docs/cluster.md, "A view that falls behind"). Idle peers exchange
 * none: a READY peer this node has sent no request for
 * OL_RPC_IDLE_PING_MS gets an empty PING (n = 0), which carries this
 * node's revision there and brings the peer's back in its REPLY. It is a
 * call like any other: it takes a slot, spends credit, has a deadline
 * and is counted in calls_total (and in pings_total). None is sent while
 * calls wait for the peer (they will carry the revision), when its credit
 * does not cover it, and while the previous one holds its slot (sent and
 * unanswered, past its deadline included): at most one per peer.
 */
static void peer_idle_ping(struct ol_rpc_peer *p, uint64_t now)
{
    if (p->state != P_READY || p->whead || !p->nfree || now - p->sent_ms < OL_RPC_IDLE_PING_MS)
        return;
    if (p->ping_id) {
        const struct ol_rpc_slot *s = &p->slots[p->ping_id & 0xffff];
        if (s->id == p->ping_id && s->state != S_FREE)
            return;
    }
    uint8_t n[4] = {0};
    struct iovec iov = {n, sizeof n};
    if (atomic_load_explicit(&p->credit, memory_order_relaxed) < OL_RPC_HDR_LEN + sizeof n)
        return;
    uint32_t slot = p->freelist[p->nfree - 1];   /* the slot ol_rpc_call takes */
    if (ol_rpc_call(p->r, p->id, OL_RPC_OP_PING, &iov, 1, 0, OL_RPC_PING_DEADLINE_MS,
                    on_idle_pong, NULL) != 0)
        return;
    p->ping_id = p->slots[slot].id;
    atomic_fetch_add_explicit(&p->pings, 1, memory_order_relaxed);
}

static void on_tick(ol_loop *loop, struct ol_timer *t)
{
    struct ol_rpc *r = OL_CONTAINER(t, struct ol_rpc, tick);
    uint64_t now = ol_loop_now_ms(loop);
    for (struct ol_rpc_conn *c = r->conns, *next; c; c = next) {
        next = c->next;
        if (c->closing || c->dead)
            continue;
        if (c->state != C_OPEN && now >= c->deadline_ms) {
            if (!c->dialer)
                atomic_fetch_add(&r->hs_timeouts, 1);
            conn_close(c);
        } else if (c->rearm) {
            conn_arm(c);
        }
    }
    if (!r->closing) {
        pthread_mutex_lock(&r->mu);
        for (int b = 0; b < OL_RPC_BUCKETS; b++)
            for (struct ol_rpc_peer *p = r->buckets[b]; p; p = p->hnext)
                if (p->state == P_DOWN && now >= p->retry_ms)
                    peer_dial(p);
                else
                    peer_idle_ping(p, now);
        pthread_mutex_unlock(&r->mu);
        ol_timer_arm(loop, &r->tick, OL_RPC_TICK_MS);
    }
}

static const struct ol_xport_events xport_events = {
    .accepted = on_accepted,
    .connected = on_connected,
    .received = on_received,
    .sent = on_sent,
};

/* ---- peers -------------------------------------------------------------------------- */

static struct ol_rpc_peer *peer_find(const struct ol_rpc *r, int64_t id)
{
    struct ol_rpc_peer *p = r->buckets[(uint64_t)id % OL_RPC_BUCKETS];
    while (p && p->id != id)
        p = p->hnext;
    return p;
}

int ol_rpc_peer_set(struct ol_rpc *r, int64_t id, const char *addr)
{
    struct sockaddr_storage sa;
    socklen_t salen;
    if (id == r->self_id || strlen(addr) >= OL_RPC_ADDR_LEN || ol_net_addr_numeric(addr, &sa, &salen))
        return -EINVAL;
    struct ol_rpc_peer *p = peer_find(r, id);
    if (p) {
        if (strcmp(p->addr, addr) == 0)
            return 0;
        if (p->conn)
            conn_close(p->conn);
        pthread_mutex_lock(&r->mu);
        snprintf(p->addr, sizeof p->addr, "%s", addr);
        pthread_mutex_unlock(&r->mu);
        p->sa = sa;
        p->salen = salen;
        p->backoff_ms = OL_RPC_BACKOFF_MIN_MS;
        p->retry_ms = 0;
        if (!r->closing)
            peer_dial(p);
        return 0;
    }
    if (r->npeers >= OL_RPC_MAX_PEERS)
        return -ENOSPC;
    p = calloc(1, sizeof *p);
    struct ol_rpc_slot *slots = calloc(r->max_calls, sizeof *slots);
    uint32_t *fl = calloc(r->max_calls, sizeof *fl);
    if (!p || !slots || !fl) {
        free(p);
        free(slots);
        free(fl);
        return -ENOMEM;
    }
    p->r = r;
    p->id = id;
    snprintf(p->addr, sizeof p->addr, "%s", addr);
    p->sa = sa;
    p->salen = salen;
    p->slots = slots;
    p->freelist = fl;
    for (uint32_t i = 0; i < r->max_calls; i++) {
        slots[i].peer = p;
        fl[i] = r->max_calls - 1 - i;
    }
    p->nfree = r->max_calls;
    p->backoff_ms = OL_RPC_BACKOFF_MIN_MS;
    p->state = P_DOWN;
    pthread_mutex_lock(&r->mu);
    p->hnext = r->buckets[(uint64_t)id % OL_RPC_BUCKETS];
    r->buckets[(uint64_t)id % OL_RPC_BUCKETS] = p;
    r->npeers++;
    pthread_mutex_unlock(&r->mu);
    if (!r->closing)
        peer_dial(p);
    return 0;
}

static struct peer_sums peer_sums_of(struct ol_rpc_peer *p)
{
    uint32_t credit = atomic_load(&p->credit), window = atomic_load(&p->window);
    bool ready = atomic_load(&p->ready);
    return (struct peer_sums){
        atomic_load(&p->connects), atomic_load(&p->auth_failures), atomic_load(&p->calls),
        atomic_load(&p->timeouts), atomic_load(&p->resets), atomic_load(&p->stalls),
        atomic_load(&p->pings), atomic_load(&p->sent_bytes), atomic_load(&p->recv_bytes),
        ready ? window - credit : 0, ready ? credit : 0};
}

/* a += b - c, for the counters (not the gauges). */
static void peer_sums_add(struct peer_sums *a, const struct peer_sums *b,
                          const struct peer_sums *c)
{
    a->connects += b->connects - c->connects, a->auth += b->auth - c->auth;
    a->calls += b->calls - c->calls, a->timeouts += b->timeouts - c->timeouts;
    a->resets += b->resets - c->resets, a->stalls += b->stalls - c->stalls;
    a->pings += b->pings - c->pings, a->sent += b->sent - c->sent, a->recv += b->recv - c->recv;
}

void ol_rpc_peer_remove(struct ol_rpc *r, int64_t id)
{
    struct ol_rpc_peer *p = peer_find(r, id);
    if (!p)
        return;
    pthread_mutex_lock(&r->mu);
    struct ol_rpc_peer **pp = &r->buckets[(uint64_t)id % OL_RPC_BUCKETS];
    while (*pp != p)
        pp = &(*pp)->hnext;
    *pp = p->hnext;
    r->npeers--;
    struct peer_sums zero = {0}, at = peer_sums_of(p);
    peer_sums_add(&r->gone, &at, &zero);
    pthread_mutex_unlock(&r->mu);
    if (p->conn)
        conn_close(p->conn); /* detaches: its calls fail */
    peer_fail_calls(p, -ECONNRESET);
    p->state = P_DOWN;
    struct peer_sums end = peer_sums_of(p);    /* what its calls' failure counted */
    pthread_mutex_lock(&r->mu);
    peer_sums_add(&r->gone, &end, &at);
    pthread_mutex_unlock(&r->mu);
    /* freed by the deferred delivery, after its calls' callbacks ran (a
     * walk of the buckets in progress may still hold it: its hnext stays) */
    p->dnext = r->dead_peers;
    r->dead_peers = p;
    ol_loop_defer(r->loop, &r->deliver);
}

int ol_rpc_peer_ready(const struct ol_rpc *r, int64_t id)
{
    const struct ol_rpc_peer *p = peer_find(r, id);
    return p && p->state == P_READY;
}

/* ---- remote reads ------------------------------------------------------------------ */

int ol_rpc_map(struct ol_rpc *r, void *base, size_t len)
{
    const struct ol_xport_ops *ops = r->xp->ops;
    if (!ops->mem_map || !ops->get)
        return -ENOTSUP;
    if (r->region.rkey_len)
        return -EEXIST;
    const void *rkey;
    size_t klen;
    int rc = ops->mem_map(r->xp, base, len, &rkey, &klen);
    if (rc != 0)
        return rc;
    if (klen == 0 || klen > OL_RPC_RKEY_MAX)
        return -E2BIG; /* mapped, never handed out (the transport unmaps at destroy) */
    r->region = (struct ol_rpc_region){.base = (uint64_t)(uintptr_t)base, .len = len,
                                       .rkey_len = (uint32_t)klen, .rkey = rkey};
    return 0;
}

uint64_t ol_rpc_peer_region(const struct ol_rpc *r, int64_t id)
{
    const struct ol_rpc_peer *p = peer_find(r, id);
    return p && p->state == P_READY && p->conn ? p->conn->rma_len : 0;
}

int ol_rpc_get(struct ol_rpc *r, int64_t peer, void *buf, size_t len, uint64_t off,
               void (*done)(void *arg, int res), void *arg)
{
    struct ol_rpc_peer *p = peer_find(r, peer);
    if (!p)
        return -ENOENT;
    if (p->state != P_READY || !p->conn || r->closing)
        return -ENOTCONN;
    struct ol_rpc_conn *c = p->conn;
    if (!c->rma_len)
        return -ENOKEY;
    if (off > c->rma_len || len > c->rma_len - off)
        return -ERANGE;
    return c->x->t->ops->get(c->x, buf, len, c->rma_base + off, done, arg);
}

/* ---- the endpoint -------------------------------------------------------------------- */

int ol_rpc_create(ol_loop *loop, const struct ol_rpc_params *p, struct ol_rpc **out, char *err,
                  size_t errlen)
{
    uint32_t window = p->window ? p->window : OL_RPC_DEF_WINDOW;
    uint32_t calls = p->max_calls ? p->max_calls : OL_RPC_DEF_CALLS;
    if (p->secret_len < OL_RPC_MIN_SECRET || p->secret_len > 256) {
        snprintf(err, errlen, "the cluster secret must be %u to 256 bytes", OL_RPC_MIN_SECRET);
        return -EINVAL;
    }
    if (p->transport && p->transport[0] && strcmp(p->transport, "tcp") != 0 &&
        strcmp(p->transport, "ucx") != 0) {
        snprintf(err, errlen, "node rpc: unknown transport \"%s\" (tcp or ucx)", p->transport);
        return -EINVAL;
    }
    bool tls = (p->tls_cert && p->tls_cert[0]) || (p->tls_key && p->tls_key[0]) ||
               (p->tls_ca && p->tls_ca[0]);
    if (tls && (!p->tls_cert || !p->tls_cert[0] || !p->tls_key || !p->tls_key[0] ||
                !p->tls_ca || !p->tls_ca[0])) {
        snprintf(err, errlen, "node rpc: TLS needs its certificate, key and CA bundle");
        return -EINVAL;
    }
    if (tls && p->transport && strcmp(p->transport, "ucx") == 0) {
        snprintf(err, errlen, "node rpc: TLS is for the TCP transport; UCX encrypts nothing");
        return -EINVAL;
    }
    if (strlen(p->cluster) >= OL_RPC_NAME_LEN || window < (64u << 10) ||
        p->reply_window > OL_RPC_PAYLOAD_LIMIT ||
        window > OL_RPC_PAYLOAD_LIMIT + OL_RPC_HDR_LEN || (calls & (calls - 1)) ||
        calls > 65536 || p->self_id < 0) {
        snprintf(err, errlen, "node rpc: a parameter is out of range");
        return -EINVAL;
    }
    struct ol_rpc *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    r->loop = loop;
    r->self_id = p->self_id;
    memcpy(r->cluster, p->cluster, strlen(p->cluster));
    memcpy(r->secret, p->secret, p->secret_len);
    r->secret_len = p->secret_len;
    r->window = window;
    r->max_payload = window - OL_RPC_HDR_LEN;
    r->credit = p->no_credits ? OL_RPC_NO_CREDITS : window;
    r->reply_window = p->reply_window ? p->reply_window : window;
    r->max_calls = calls;
    r->handshake_ms = p->handshake_ms ? p->handshake_ms : OL_RPC_DEF_HANDSHAKE;
    r->max_unauth = p->max_unauth ? p->max_unauth : OL_RPC_DEF_UNAUTH;
    r->rma = p->rma != 0;
    pthread_mutex_init(&r->mu, NULL);
    r->handlers[OL_RPC_OP_PING].fn = on_ping;
    int rc;
    if (p->transport && strcmp(p->transport, "ucx") == 0) {
        struct ol_xport_ucx_opts uo = {.net_devices = p->ucx_net_devices,
                                       .gid_index = p->ucx_gid_index, .rma = r->rma};
        rc = ol_xport_ucx_create(loop, &xport_events, r, &uo, &r->xp, err, errlen);
    } else if (tls) {
        struct ol_xport_tls_opts to = {.cert = p->tls_cert, .key = p->tls_key, .ca = p->tls_ca};
        rc = ol_xport_tls_create(loop, &xport_events, r, &to, &r->xp, err, errlen);
    } else {
        rc = ol_xport_tcp_create(loop, &xport_events, r, &r->xp);
        if (rc != 0)
            snprintf(err, errlen, "node rpc: no transport: %s", strerror(-rc));
    }
    if (rc == 0 && r->rma && !r->xp->ops->get)
        r->rma = false; /* nothing to read with: HELLO does not ask */
    if (rc == 0 && p->listen_addr && p->listen_addr[0])
        rc = r->xp->ops->listen(r->xp, p->listen_addr, &r->port, err, errlen);
    if (rc != 0) {
        if (r->xp)
            r->xp->ops->destroy(r->xp);
        pthread_mutex_destroy(&r->mu);
        explicit_bzero(r->secret, sizeof r->secret);
        free(r);
        return rc;
    }
    r->tick.fn = on_tick;
    r->deliver.fn = on_deliver;
    ol_timer_arm(loop, &r->tick, OL_RPC_TICK_MS);
    *out = r;
    return 0;
}

void ol_rpc_close_all(struct ol_rpc *r)
{
    r->closing = true;
    ol_timer_cancel(r->loop, &r->tick);
    r->xp->ops->unlisten(r->xp);
    for (int b = 0; b < OL_RPC_BUCKETS; b++)
        for (struct ol_rpc_peer *p = r->buckets[b]; p; p = p->hnext)
            peer_fail_calls(p, -ECANCELED);
    for (struct ol_rpc_conn *c = r->conns; c; c = c->next)
        conn_close(c);   /* never frees: see conn_maybe_free */
}

int ol_rpc_idle(const struct ol_rpc *r)
{
    return r->nconns == 0 && !r->xp->ops->busy(r->xp);
}

void ol_rpc_destroy(struct ol_rpc *r)
{
    if (!r)
        return;
    r->closing = true;
    for (struct ol_rpc_conn *c = r->conns; c; c = c->next) {
        if (c->dead)
            continue;
        c->closing = true;
        c->recv_armed = c->send_inflight = c->connecting = false;
        if (c->peer)
            c->peer->conn = NULL;
        c->peer = NULL;
        c->refs = 0; /* requests still held by handlers die with the loop */
        conn_maybe_free(c);
    }
    ol_timer_cancel(r->loop, &r->deliver);
    on_deliver(r->loop, &r->deliver);   /* the failed calls' callbacks; frees the dead */
    for (int b = 0; b < OL_RPC_BUCKETS; b++)
        while (r->buckets[b]) {
            struct ol_rpc_peer *p = r->buckets[b];
            r->buckets[b] = p->hnext;
            peer_free(p);
        }
    r->xp->ops->destroy(r->xp);
    pthread_mutex_destroy(&r->mu);
    explicit_bzero(r->secret, sizeof r->secret);
    free(r);
}

int ol_rpc_port(const struct ol_rpc *r)
{
    return r->port;
}

void ol_rpc_handle(struct ol_rpc *r, uint16_t op, ol_rpc_handler fn, void *arg)
{
    OL_ASSERT(op <= OL_RPC_OP_MAX);
    r->handlers[op].fn = fn;
    r->handlers[op].arg = arg;
}

int ol_rpc_on_conn_end(struct ol_rpc *r, void (*fn)(void *data, void *arg), void *arg)
{
    if (r->nconn_end >= OL_RPC_CONN_SLOTS)
        return -ENOSPC;
    r->conn_end[r->nconn_end].fn = fn;
    r->conn_end[r->nconn_end].arg = arg;
    return (int)r->nconn_end++;
}

void ol_rpc_set_revision(struct ol_rpc *r, int64_t revision)
{
    atomic_store_explicit(&r->revision, revision, memory_order_relaxed);
}

int64_t ol_rpc_peer_revision(const struct ol_rpc *r)
{
    return atomic_load_explicit(&r->peer_revision, memory_order_relaxed);
}

/* Their lines under peer="<peer>". Returns the length the lines need, as
 * snprintf does. */
static size_t peer_series(char *buf, size_t cap, const char *labels, const char *sep,
                          const char *peer, const struct peer_sums *v)
{
#define L(x) labels, sep, peer, (unsigned long long)v->x
    int w = snprintf(buf, cap,
        "openlake_rpc_peer_connects_total{%s%speer=\"%s\"} %llu\n"
        "openlake_rpc_peer_auth_failures_total{%s%speer=\"%s\"} %llu\n"
        "openlake_rpc_peer_calls_total{%s%speer=\"%s\"} %llu\n"
        "openlake_rpc_peer_failures_total{%s%speer=\"%s\",cause=\"timeout\"} %llu\n"
        "openlake_rpc_peer_failures_total{%s%speer=\"%s\",cause=\"reset\"} %llu\n"
        "openlake_rpc_peer_credit_stalls_total{%s%speer=\"%s\"} %llu\n"
        "openlake_rpc_peer_pings_total{%s%speer=\"%s\"} %llu\n"
        "openlake_rpc_peer_sent_bytes_total{%s%speer=\"%s\"} %llu\n"
        "openlake_rpc_peer_received_bytes_total{%s%speer=\"%s\"} %llu\n"
        "openlake_rpc_peer_inflight_bytes{%s%speer=\"%s\"} %llu\n"
        "openlake_rpc_peer_credit_bytes{%s%speer=\"%s\"} %llu\n",
        L(connects), L(auth), L(calls), L(timeouts), L(resets), L(stalls), L(pings), L(sent),
        L(recv), L(inflight), L(credit));
#undef L
    return w > 0 ? (size_t)w : 0;
}

size_t ol_rpc_metrics(struct ol_rpc *r, const char *labels, char *buf, size_t cap)
{
    size_t n = 0;
    const char *sep = labels && labels[0] ? "," : "";
    labels = labels ? labels : "";
#define OUT(...)                                                                     \
    do {                                                                             \
        int w_ = snprintf(buf + (n < cap ? n : cap), n < cap ? cap - n : 0, __VA_ARGS__); \
        if (w_ > 0)                                                                  \
            n += (size_t)w_;                                                         \
    } while (0)
    OUT("openlake_rpc_requests_total{%s} %llu\n", labels,
        (unsigned long long)atomic_load(&r->requests));
    OUT("openlake_rpc_accepted_total{%s} %llu\n", labels,
        (unsigned long long)atomic_load(&r->accepted));
    OUT("openlake_rpc_refused_total{%s%scause=\"auth\"} %llu\n", labels, sep,
        (unsigned long long)atomic_load(&r->auth_failures));
    OUT("openlake_rpc_refused_total{%s%scause=\"handshake_timeout\"} %llu\n", labels, sep,
        (unsigned long long)atomic_load(&r->hs_timeouts));
    OUT("openlake_rpc_refused_total{%s%scause=\"unauthenticated_evicted\"} %llu\n", labels, sep,
        (unsigned long long)atomic_load(&r->unauth_evicted));
    OUT("openlake_rpc_refused_total{%s%scause=\"connections_full\"} %llu\n", labels, sep,
        (unsigned long long)atomic_load(&r->refused));
    OUT("openlake_rpc_refused_total{%s%scause=\"protocol\"} %llu\n", labels, sep,
        (unsigned long long)atomic_load(&r->protocol_errors));
    OUT("openlake_rpc_recv_nobufs_total{%s} %llu\n", labels,
        (unsigned long long)atomic_load(&r->nobufs));
    OUT("openlake_rpc_tls_handshake_failures_total{%s} %llu\n", labels,
        (unsigned long long)ol_xport_tls_failures(r->xp));
    /* Up to OL_RPC_METRIC_PEERS peers each have their own series; past
     * that the series are summed under peer="all" (the page stays within
     * the admin endpoint's 1 MiB however many members), and only peers
     * that are down keep a line of their own, at most that many. */
    pthread_mutex_lock(&r->mu);
    uint32_t npeers = r->npeers, nup = 0;
    bool each = npeers <= OL_RPC_METRIC_PEERS;
    struct peer_sums t = each ? (struct peer_sums){0} : r->gone;
    uint32_t down_lines = 0;
    for (int b = 0; b < OL_RPC_BUCKETS; b++)
        for (struct ol_rpc_peer *p = r->buckets[b]; p; p = p->hnext) {
            long long id = (long long)p->id;
            bool ready = atomic_load(&p->ready);
            struct peer_sums v = peer_sums_of(p);
            nup += ready ? 1 : 0;
            if (!each) {
                struct peer_sums zero = {0};
                peer_sums_add(&t, &v, &zero);
                t.inflight += v.inflight, t.credit += v.credit;
                if (!ready && down_lines < OL_RPC_METRIC_PEERS) {
                    down_lines++;
                    OUT("openlake_rpc_peer_up{%s%speer=\"%lld\"} 0\n", labels, sep, id);
                }
                continue;
            }
            char peer[32];
            snprintf(peer, sizeof peer, "%lld", id);
            OUT("openlake_rpc_peer_up{%s%speer=\"%s\"} %d\n", labels, sep, peer, ready ? 1 : 0);
            n += peer_series(buf + (n < cap ? n : cap), n < cap ? cap - n : 0, labels, sep,
                             peer, &v);
        }
    if (!each) {
        OUT("openlake_rpc_peer_up{%s%speer=\"all\"} %u\n", labels, sep, nup);
        n += peer_series(buf + (n < cap ? n : cap), n < cap ? cap - n : 0, labels, sep, "all",
                         &t);
    }
    OUT("openlake_rpc_peers{%s%sstate=\"up\"} %u\n", labels, sep, nup);
    OUT("openlake_rpc_peers{%s%sstate=\"down\"} %u\n", labels, sep, npeers - nup);
    pthread_mutex_unlock(&r->mu);
#undef OUT
    return n;
}
