/*
 * xport_tls.c - the TLS transport of the node RPC (see xport.h): the TCP
 * transport underneath (xport_tcp.c, with its events taken here), and one
 * mutual TLS 1.3 session per connection over memory BIOs (http/tls.h:
 * each end presents its certificate and verifies the other's against one
 * CA bundle), so that rpc.c sees plaintext only and runs as over TCP.
 *
 * Owns: the sessions, their buffers, and how TCP's events become the
 * transport's. `accepted` comes at the TCP accept, before any TLS (so
 * rpc.c's limit on connections that have not authenticated, and their
 * deadline, cover the TLS handshake too: a stranger holds one of those
 * slots and no more); a dial's `connected` once its handshake completed;
 * `received` with plaintext only; `sent` with the plaintext bytes taken
 * from an iov, once all of their ciphertext went out. A failed handshake,
 * a peer that speaks no TLS, a bad record: the connection ends with an
 * error event (-EPROTO), and a warning at most once per XTLS_LOG_MS; a
 * handshake refused sends its TLS alert before TCP stops, so that the
 * peer learns why.
 *
 * Bounds, per connection: a send takes at most XTLS_SEND_MAX plaintext
 * bytes of its iov (rpc.c sends the rest next time), written at once
 * (its pieces gathered into a buffer of XTLS_SEND_MAX first, so that small
 * pieces share records); ciphertext goes out
 * through one buffer of XTLS_OUT bytes, and the session holds about one
 * send's ciphertext besides (XTLS_SEND_MAX, and 22 bytes a record of at
 * most 16 KiB); ciphertext the session made past 2 x XTLS_OUT
 * not yet sent (a peer that does not read its KeyUpdate answers) ends
 * the connection; plaintext goes up XTLS_PLAIN bytes (a record) at a time;
 * received bytes not yet handed up past XTLS_IN_MAX end the connection
 * (-EMSGSIZE); a receive that ended for want of a buffer mid-handshake is
 * armed again XTLS_NOBUF_MS later.
 *
 * A connection that rpc.c frees while TCP still has operations of its own
 * outstanding (they were cancelled) waits for their events on the
 * transport's list of the freed (busy() is true meanwhile), and goes with
 * the last of them, or at destroy.
 *
 * Must not: block; emit an event inside one of its ops (those defer to
 * the connection's kick); know frames, rpc.c's handshake or credits.
 */
#include "net/xport.h"
#include "base/container.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "http/tls.h"

#define XTLS_SEND_MAX (64u << 10)              /* plaintext a send takes */
#define XTLS_OUT      ((64u << 10) + 1024u)    /* ciphertext going out */
#define XTLS_PLAIN    (16u << 10)              /* plaintext handed up at a time */
#define XTLS_IN_MAX   (1u << 20)               /* received, not handed up */
#define XTLS_LOG_MS   10000u
#define XTLS_NOBUF_MS 10u                      /* mid-handshake receive armed again */


struct tls_conn;

struct tls_port {
    struct ol_xport t;             /* rpc.c's: its events and arg */
    struct ol_xport *tcp;          /* underneath: our events, arg this */
    ol_tls_ctx *ctx;
    struct tls_conn *freed;        /* freed by rpc.c, TCP operations outstanding */
    _Atomic uint64_t failures;     /* handshakes that failed */
    uint64_t log_ms;
};

struct tls_conn {
    struct ol_xconn x;             /* rpc.c's */
    struct ol_xconn *tcp;          /* underneath; its user is this */
    ol_tls_conn *s;
    struct ol_timer kick;          /* events due from an op, run from the loop */
    struct tls_conn *fnext, *fprev;
    bool dialer;
    bool x_dial, x_recv, x_send;   /* rpc.c's operations outstanding */
    bool t_dial, t_recv, t_send;   /* TCP's */
    bool ready;                    /* the handshake completed */
    bool got_data;                 /* plaintext came: the peer passed the handshake */
    bool shut, failed, freed;
    bool linger;                   /* failed: TCP stops once its alert went */
    int err;                       /* failed: what rpc.c's operations end with */
    int depth;                     /* inside this connection's events */
    uint32_t pend;                 /* plain[0, pend) not yet handed up */
    uint32_t pt;                   /* x_send: the plaintext bytes it took */
    uint64_t ct_made, ct_sent;     /* ciphertext bytes put in out, and sent */
    uint64_t ct_mark;              /* x_send ends when ct_sent reaches it */
    uint32_t out_len, out_off;
    struct iovec oiov;
    uint8_t out[XTLS_OUT];
    uint8_t plain[XTLS_PLAIN];
    uint8_t stage[XTLS_SEND_MAX];  /* a send's pieces gathered: one write, full records */
};

static const struct ol_xport_ops tls_ops;

static struct tls_port *port_of(struct tls_conn *c) { return (struct tls_port *)c->x.t; }

/* Stops c's TCP, unless its last send (a TLS alert) is still going:
 * then at that send's end. */
static void conn_stop_tcp(struct tls_conn *c)
{
    if (c->tcp && !c->linger)
        c->tcp->t->ops->shutdown(c->tcp);
}

/* The connection ends: its TCP stops, rpc.c's operations end with err
 * (0: the peer closed) from the end of the current event, or from the
 * kick when called inside an op. */
static void conn_fail(struct tls_conn *c, int err)
{
    if (c->failed || c->shut || c->freed)
        return;
    c->failed = true;
    c->err = err;
    conn_stop_tcp(c);
    if (!c->depth)
        ol_loop_defer(c->x.t->loop, &c->kick);
}

/* Ends rpc.c's operations of a failed or shut down connection. */
static void conn_settle(struct tls_conn *c)
{
    const struct ol_xport_events *ev = c->x.t->ev;
    int e = c->failed ? c->err : -ECANCELED;
    if (c->x_dial) {
        c->x_dial = false;
        ev->connected(&c->x, e < 0 ? e : -ECONNRESET);
    }
    if (c->x_send && !c->freed) {
        c->x_send = false;
        ev->sent(&c->x, e < 0 ? e : -EPIPE);
    }
    if (c->x_recv && !c->freed) {
        c->x_recv = false;
        ev->received(&c->x, e, NULL, false);
    }
}

/* Frees c once rpc.c freed it and TCP has nothing of it outstanding. */
static void conn_maybe_free(struct tls_conn *c)
{
    if (!c->freed || c->depth || c->t_dial || c->t_recv || c->t_send)
        return;
    struct tls_port *tp = port_of(c);
    if (c->fprev)
        c->fprev->fnext = c->fnext;
    else
        tp->freed = c->fnext;
    if (c->fnext)
        c->fnext->fprev = c->fprev;
    if (c->tcp)
        c->tcp->t->ops->free(c->tcp);
    ol_tls_conn_free(c->s);
    free(c);
}

/* The end of each of c's events: what its failure owes rpc.c, then c
 * goes if it was freed meanwhile. */
static void conn_leave(struct tls_conn *c)
{
    if (--c->depth > 0)
        return;
    if (!c->freed && (c->failed || c->shut)) {
        c->depth++;
        conn_settle(c);
        c->depth--;
    }
    conn_maybe_free(c);
}

/* Sends the ciphertext the session made, one buffer at a time. */
static void conn_flush(struct tls_conn *c)
{
    if (c->t_send || c->failed || c->shut || c->freed || c->t_dial)
        return;
    if (c->out_off == c->out_len) {
        c->out_len = (uint32_t)ol_tls_out(c->s, c->out, sizeof c->out);
        c->out_off = 0;
        c->ct_made += c->out_len;
        if (!c->out_len)
            return;
    }
    c->oiov.iov_base = c->out + c->out_off;
    c->oiov.iov_len = c->out_len - c->out_off;
    int rc = c->tcp->t->ops->send(c->tcp, &c->oiov, 1);
    if (rc != 0) {
        conn_fail(c, rc);
        return;
    }
    c->t_send = true;
}

static void conn_tls_error(struct tls_conn *c, long rc)
{
    if (rc == OL_TLS_CLOSED) {
        conn_fail(c, 0);
        return;
    }
    struct tls_port *tp = port_of(c);
    char why[256];
    ol_tls_why(c->s, why, sizeof why);
    if (!c->got_data) {
        /* the alert that tells the peer why (its log then says so too):
         * a few bytes into a socket that has carried no data */
        conn_flush(c);
        c->linger = c->t_send;
        atomic_fetch_add_explicit(&tp->failures, 1, memory_order_relaxed);
        ol_warn_limited(&tp->log_ms, ol_loop_now_ms(tp->t.loop), XTLS_LOG_MS,
                        "node rpc: TLS handshake %s a peer failed: %s",
                        c->dialer ? "dialing" : "accepting", why);
    } else {
        ol_warn_limited(&tp->log_ms, ol_loop_now_ms(tp->t.loop), XTLS_LOG_MS,
                        "node rpc: a TLS session with a peer failed: %s", why);
    }
    conn_fail(c, -EPROTO);
}

/* Runs the handshake on what arrived, then hands plaintext up while
 * rpc.c's receive is armed. Inside one of c's events. */
static void conn_pump(struct tls_conn *c)
{
    const struct ol_xport_events *ev = c->x.t->ev;
    while (!c->failed && !c->shut && !c->freed) {
        if (!c->pend) {
            if (c->ready && !c->x_recv)
                break;   /* held until rpc.c arms its receive */
            long n = ol_tls_read(c->s, c->plain, sizeof c->plain);
            if (n > 0) {
                c->pend = (uint32_t)n;
                c->got_data = true;
            }
            if (!c->ready && ol_tls_ready(c->s)) {
                c->ready = true;
                conn_flush(c);   /* the client's Finished */
                if (c->x_dial) {
                    c->x_dial = false;
                    ev->connected(&c->x, 0);   /* rpc.c sends HELLO, arms its receive */
                    if (c->failed || c->shut || c->freed)
                        break;
                }
            }
            if (n < 0) {
                conn_tls_error(c, n);
                break;
            }
            if (n == 0)
                break;
        }
        if (!c->x_recv)
            break;
        uint32_t m = c->pend;
        c->pend = 0;
        ev->received(&c->x, (int)m, c->plain, true);
    }
    conn_flush(c);   /* handshake messages, alerts, key updates */
}

static void on_kick(ol_loop *loop, struct ol_timer *t)
{
    (void)loop;
    struct tls_conn *c = OL_CONTAINER(t, struct tls_conn, kick);
    c->depth++;
    if (!c->freed && !c->failed && !c->shut && !c->t_dial)
        conn_pump(c);
    if (!c->freed && !c->failed && !c->shut && !c->t_dial && !c->ready && !c->t_recv &&
        c->tcp) {
        /* mid-handshake, TCP's receive ended for want of a buffer */
        int rc = c->tcp->t->ops->recv(c->tcp);
        if (rc != 0)
            conn_fail(c, rc);
        else
            c->t_recv = true;
    }
    conn_leave(c);
}

static struct tls_conn *conn_new(struct tls_port *tp, bool dialer)
{
    struct tls_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->s = dialer ? ol_tls_conn_new_client(tp->ctx) : ol_tls_conn_new(tp->ctx);
    if (!c->s) {
        free(c);
        return NULL;
    }
    c->x.t = &tp->t;
    c->dialer = dialer;
    c->kick.fn = on_kick;
    return c;
}

/* ---- TCP's events ------------------------------------------------------------ */

static void on_tcp_accepted(void *arg, struct ol_xconn *tx)
{
    struct tls_port *tp = arg;
    struct tls_conn *c = conn_new(tp, false);
    if (!c) {
        tx->t->ops->free(tx);
        return;
    }
    c->tcp = tx;
    tx->user = c;
    c->depth++;
    tp->t.ev->accepted(tp->t.arg, &c->x);   /* rpc.c arms its receive, or frees c */
    conn_leave(c);
}

static void on_tcp_connected(struct ol_xconn *tx, int res)
{
    struct tls_conn *c = tx->user;
    c->depth++;
    c->t_dial = false;
    if (!c->freed && !c->failed && !c->shut) {
        int rc = res < 0 ? res : c->tcp->t->ops->recv(c->tcp);
        if (rc != 0) {
            conn_fail(c, rc);
        } else {
            c->t_recv = true;
            conn_pump(c);   /* the ClientHello */
        }
    }
    conn_leave(c);
}

static void on_tcp_received(struct ol_xconn *tx, int res, const uint8_t *b, bool more)
{
    struct tls_conn *c = tx->user;
    c->depth++;
    if (!more)
        c->t_recv = false;
    if (c->freed || c->failed || c->shut) {
        /* nothing more to hand up */
    } else if (res > 0) {
        if (ol_tls_feed(c->s, b, (size_t)res) != 0)
            conn_fail(c, -ENOMEM);
        else if (ol_tls_in_pending(c->s) > XTLS_IN_MAX)
            conn_fail(c, -EMSGSIZE);
        else
            conn_pump(c);
        /* what the session wrote back (KeyUpdate answers) to a peer that
         * does not read: bounded too */
        if (!c->failed && !c->freed && ol_tls_out_pending(c->s) > 2 * XTLS_OUT)
            conn_fail(c, -EMSGSIZE);
        if (!c->t_recv && !c->failed && !c->shut && !c->freed && (c->x_recv || !c->ready)) {
            int rc = c->tcp->t->ops->recv(c->tcp);
            if (rc != 0)
                conn_fail(c, rc);
            else
                c->t_recv = true;
        }
    } else if (res == -ENOBUFS && c->ready) {
        /* no buffer now: rpc.c arms again later, and TCP's receive with it */
        if (!c->t_recv && c->x_recv) {
            c->x_recv = false;
            c->x.t->ev->received(&c->x, -ENOBUFS, NULL, false);
        }
    } else if (res == -ENOBUFS) {
        /* no buffer now, mid-handshake: TCP's receive armed again soon
         * (the kick), the connection kept */
        if (!c->t_recv && !ol_timer_armed(&c->kick))
            ol_timer_arm(c->x.t->loop, &c->kick, XTLS_NOBUF_MS);
    } else if (res < 0 || !c->t_recv) {
        conn_fail(c, res);   /* 0: the peer closed; an error: bytes were lost */
    }
    conn_leave(c);
}

static void on_tcp_sent(struct ol_xconn *tx, int res)
{
    struct tls_conn *c = tx->user;
    c->depth++;
    c->t_send = false;
    if (c->linger) {
        c->linger = false;
        c->tcp->t->ops->shutdown(c->tcp);
    }
    if (c->freed || c->failed || c->shut) {
        /* ended */
    } else if (res < 0) {
        conn_fail(c, res);
    } else {
        c->out_off += (uint32_t)res;
        c->ct_sent += (uint64_t)res;
        if (c->x_send && c->ct_sent >= c->ct_mark) {
            c->x_send = false;
            c->x.t->ev->sent(&c->x, (int)c->pt);
        }
        conn_flush(c);
    }
    conn_leave(c);
}

static const struct ol_xport_events tcp_events = {
    .accepted = on_tcp_accepted,
    .connected = on_tcp_connected,
    .received = on_tcp_received,
    .sent = on_tcp_sent,
};

/* ---- ops ---------------------------------------------------------------------- */

static int tls_listen(struct ol_xport *t, const char *addr, int *port, char *err, size_t errlen)
{
    struct tls_port *tp = (struct tls_port *)t;
    return tp->tcp->ops->listen(tp->tcp, addr, port, err, errlen);
}

static void tls_unlisten(struct ol_xport *t)
{
    struct tls_port *tp = (struct tls_port *)t;
    tp->tcp->ops->unlisten(tp->tcp);
}

static bool tls_busy(const struct ol_xport *t)
{
    const struct tls_port *tp = (const struct tls_port *)t;
    return tp->freed || tp->tcp->ops->busy(tp->tcp);
}

static struct ol_xconn *tls_dial(struct ol_xport *t, const struct sockaddr *sa, socklen_t salen,
                                 void *user, int *rc)
{
    struct tls_port *tp = (struct tls_port *)t;
    struct tls_conn *c = conn_new(tp, true);
    if (!c) {
        *rc = -ENOMEM;
        return NULL;
    }
    c->x.user = user;
    c->tcp = tp->tcp->ops->dial(tp->tcp, sa, salen, c, rc);
    if (!c->tcp) {
        ol_tls_conn_free(c->s);
        free(c);
        return NULL;
    }
    c->t_dial = c->x_dial = true;
    return &c->x;
}

static int tls_recv(struct ol_xconn *x)
{
    struct tls_conn *c = (struct tls_conn *)x;
    if (c->failed || c->shut)
        return -ENOTCONN;
    if (!c->t_recv && !c->t_dial) {
        int rc = c->tcp->t->ops->recv(c->tcp);
        if (rc != 0)
            return rc;
        c->t_recv = true;
    }
    c->x_recv = true;
    if (c->ready && (c->pend || ol_tls_in_pending(c->s)))
        ol_loop_defer(x->t->loop, &c->kick);   /* what arrived while it was not armed */
    return 0;
}

/* What a send writes: *take bytes (at most XTLS_SEND_MAX) from the front
 * of iov[0, n), in place or copied into c->stage. */
static const void *stage_of(struct tls_conn *c, const struct iovec *iov, int n, size_t *take)
{
    if (n >= 1 && (n == 1 || iov[0].iov_len >= XTLS_SEND_MAX)) {
        *take = iov[0].iov_len < XTLS_SEND_MAX ? iov[0].iov_len : XTLS_SEND_MAX;
        return iov[0].iov_base;
    }
    size_t t = 0;
    for (int i = 0; i < n && t < XTLS_SEND_MAX; i++) {
        size_t len = iov[i].iov_len < XTLS_SEND_MAX - t ? iov[i].iov_len : XTLS_SEND_MAX - t;
        memcpy(c->stage + t, iov[i].iov_base, len);
        t += len;
    }
    *take = t;
    return c->stage;
}

static int tls_send(struct ol_xconn *x, const struct iovec *iov, int n)
{
    struct tls_conn *c = (struct tls_conn *)x;
    if (c->failed || c->shut)
        return -ENOTCONN;
    if (!c->ready || c->x_send)
        return -EBUSY;
    /* one write of up to XTLS_SEND_MAX (each write makes records of its
     * own): the first piece as it is when it fills that or is alone, the
     * pieces gathered into stage otherwise */
    size_t take = 0;
    const void *from = stage_of(c, iov, n, &take);
    if (!take)
        return -EINVAL;
    if (ol_tls_write(c->s, from, take) != 0) {
        conn_fail(c, -EPROTO);
        return -EPROTO;
    }
    c->pt = (uint32_t)take;
    c->ct_mark = c->ct_made + ol_tls_out_pending(c->s);
    c->x_send = true;
    conn_flush(c);   /* a failure ends x_send from the kick */
    return 0;
}

static void tls_shutdown(struct ol_xconn *x)
{
    struct tls_conn *c = (struct tls_conn *)x;
    if (c->shut || c->freed)
        return;
    c->shut = true;
    conn_stop_tcp(c);
    if (!c->depth)
        ol_loop_defer(x->t->loop, &c->kick);   /* ends rpc.c's operations */
}

static void tls_free(struct ol_xconn *x)
{
    struct tls_conn *c = (struct tls_conn *)x;
    struct tls_port *tp = port_of(c);
    c->freed = true;
    c->x_dial = c->x_recv = c->x_send = false;
    if (ol_timer_armed(&c->kick))
        ol_timer_cancel(x->t->loop, &c->kick);
    if (c->t_dial || c->t_recv || c->t_send)
        conn_stop_tcp(c);
    c->fnext = tp->freed;
    c->fprev = NULL;
    if (tp->freed)
        tp->freed->fprev = c;
    tp->freed = c;
    conn_maybe_free(c);
}

static void tls_destroy(struct ol_xport *t)
{
    struct tls_port *tp = (struct tls_port *)t;
    while (tp->freed) {   /* the loop no longer runs: their events never come */
        struct tls_conn *c = tp->freed;
        tp->freed = c->fnext;
        if (c->tcp)
            c->tcp->t->ops->free(c->tcp);
        ol_tls_conn_free(c->s);
        free(c);
    }
    tp->tcp->ops->destroy(tp->tcp);
    ol_tls_ctx_free(tp->ctx);
    free(tp);
}

static const struct ol_xport_ops tls_ops = {
    .name = "tcp+tls",
    .listen = tls_listen,
    .unlisten = tls_unlisten,
    .busy = tls_busy,
    .dial = tls_dial,
    .recv = tls_recv,
    .send = tls_send,
    .shutdown = tls_shutdown,
    .free = tls_free,
    .destroy = tls_destroy,
};

int ol_xport_tls_create(ol_loop *loop, const struct ol_xport_events *ev, void *arg,
                        const struct ol_xport_tls_opts *o, struct ol_xport **out, char *err,
                        size_t errlen)
{
    struct tls_port *tp = calloc(1, sizeof *tp);
    if (!tp) {
        snprintf(err, errlen, "node rpc: out of memory");
        return -ENOMEM;
    }
    tp->t = (struct ol_xport){.ops = &tls_ops, .loop = loop, .ev = ev, .arg = arg};
    if (ol_tls_ctx_new_mutual("rpc_tls", o->cert, o->key, o->ca, &tp->ctx, err, errlen) < 0) {
        free(tp);
        return -EINVAL;
    }
    int rc = ol_xport_tcp_create(loop, &tcp_events, tp, &tp->tcp);
    if (rc != 0) {
        snprintf(err, errlen, "node rpc: no transport: %s", strerror(-rc));
        ol_tls_ctx_free(tp->ctx);
        free(tp);
        return rc;
    }
    *out = &tp->t;
    return 0;
}

uint64_t ol_xport_tls_failures(const struct ol_xport *t)
{
    if (t->ops != &tls_ops)
        return 0;
    return atomic_load_explicit(&((struct tls_port *)(uintptr_t)t)->failures,
                                memory_order_relaxed);
}
