/*
 * kvucx.c - openlaked's KV service over UCX: a listener on kv_ucx_addr
 * whose UCP stream endpoints are served by the KV server as TCP clients
 * are (the vLLM connector's openlake_device "ucx"; docs/kv-client.md).
 *
 * Owns: the "kvucx" loop and its thread (no data core), the UCX transport
 * of src/net listening on kv_ucx_addr (a context without RMA: nothing of
 * this process is readable through it; [rdma]'s devices and GID index, as
 * the node RPC's), and one bridge per endpoint: a
 * socket pair whose other end a core's KV server adopts
 * (ol_kv_server_adopt; the cores take turns), and the bytes pumped both
 * ways. The KV server does everything else: HELLO and its token, the
 * deadline and limits before HELLO, frames, answers; it does not know
 * UCX, and a bridge knows no frame.
 *
 * Pumping: client to server, what UCX delivers is appended to the
 * bridge's `up` buffer and sent into the pair (one send at a time); server
 * to client, the pair is polled, read (non-blocking) into `down` and sent
 * on the endpoint, and read again once that send ended. UCX delivers what
 * it holds and cannot be told to wait, so `up` is bounded instead: until
 * the server answered anything (before HELLO) at most OL_KVU_PRE_CAP
 * bytes wait in it, then OL_KVU_UP_CAP (one frame of the largest the
 * protocol takes, which the server itself may hold); a client past that is
 * disconnected (counted). An idle bridge's `up` over OL_KVU_UP_KEEP is
 * freed (kvu_sweep), so an idle client holds at most that. A bridge ends when either side ends: a peer that
 * closes, a server that closes (after the bytes it sent went out), an
 * error. At most OL_KVU_CONNS bridges live; more endpoints are refused.
 *
 * Stop: quiesce (at the start of a shutdown, before the cores are told to
 * drain) closes the listener and hands no more sockets to the cores, so
 * every hand-over message lands on a core that still runs; the bridges
 * pump on while the cores drain their connections. stop (after the cores
 * stopped) closes what is left and joins the thread.
 */
#include "daemon/daemon.h"

#include "base/log.h"
#include "kv/proto.h"
#include "kv/server.h"
#include "net/xport.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define OL_KVU_CONNS    1024
#define OL_KVU_PRE_CAP  (64u << 10)
#define OL_KVU_UP_CAP   ((size_t)OL_KV_MAX_DATA_BODY + (1u << 20))
#define OL_KVU_DOWN     (256u << 10)
#define OL_KVU_UP_KEEP  (1u << 20)   /* an idle bridge's up buffer over this is freed */
#define OL_KVU_SWEEP_MS 1000         /* how often idle bridges are looked for */
#define OL_KVU_STOP_MS  1000

struct ol_daemon_kvucx;

struct kvu_conn {
    struct ol_daemon_kvucx *u;
    struct kvu_conn *next, *prev;
    struct ol_xconn *x;
    int fd;                       /* the bridge's end of the pair */
    /* client -> server */
    uint8_t *up;
    uint8_t *up_old;              /* up before it grew, while a send reads it */
    size_t up_off, up_len, up_cap;
    struct ol_op send_op;
    /* server -> client */
    uint8_t *down;
    size_t down_off, down_len;
    struct iovec siov;
    struct ol_op poll_op;
    bool recv_armed, sock_sending, ucx_sending, polling;
    bool answered;                /* the server sent something */
    bool up_used;                 /* bytes taken since the last sweep */
    bool closing;
};

struct kvu_adopt {                /* a socket for a core's KV server */
    struct ol_msg m;
    struct ol_kv_server *s;
    int fd;
};

struct ol_daemon_kvucx {
    struct ol_daemon *d;
    ol_loop *loop;
    struct ol_xport *t;
    struct kvu_conn *conns;
    uint32_t nconns, next_core;
    bool listening;
    _Atomic bool quiet;           /* quiesced: no more hand-overs */
    struct ol_msg quiesce_msg, stop_msg;
    struct ol_timer stop_check, sweep;
    uint64_t stop_since;
    _Atomic uint64_t accepted, refused, overrun, bytes_up, bytes_down;
    _Atomic uint64_t up_bytes;    /* the bridges' up buffers (up_cap), held now */
    _Atomic uint32_t live;
    char err[256];
};

static void kvu_maybe_free(struct kvu_conn *c)
{
    if (!c->closing || c->recv_armed || c->sock_sending || c->ucx_sending || c->polling)
        return;
    struct ol_daemon_kvucx *u = c->u;
    if (c->prev)
        c->prev->next = c->next;
    else
        u->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    u->nconns--;
    atomic_store(&u->live, u->nconns);
    c->x->t->ops->free(c->x);
    close(c->fd);
    atomic_fetch_sub(&u->up_bytes, c->up_cap);
    free(c->up);
    free(c->up_old);
    free(c->down);
    free(c);
}

/* Ends c's bridge: its operations end soon, and the last one frees it
 * (every event handler ends with kvu_maybe_free and touches c no more). */
static void kvu_close(struct kvu_conn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    c->x->t->ops->shutdown(c->x);   /* its receive and send end soon */
    shutdown(c->fd, SHUT_RDWR);     /* and the poll and the send on the pair */
}

/* ---- client -> server ------------------------------------------------------- */

static void kvu_on_sock_sent(ol_loop *loop, struct ol_op *op, int res, unsigned flags);

static void kvu_sock_send(struct kvu_conn *c)
{
    struct ol_daemon_kvucx *u = c->u;
    if (c->closing || c->sock_sending || c->up_off == c->up_len)
        return;
    size_t n = c->up_len - c->up_off;
    if (n > (1u << 30))
        n = 1u << 30;
    c->send_op.cb = kvu_on_sock_sent;
    if (ol_loop_send(u->loop, &c->send_op, c->fd, c->up + c->up_off, n) < 0) {
        kvu_close(c);
        return;
    }
    c->sock_sending = true;
}

static void kvu_on_sock_sent(ol_loop *loop, struct ol_op *op, int res, unsigned flags)
{
    (void)loop;
    (void)flags;
    struct kvu_conn *c = (struct kvu_conn *)((char *)op - offsetof(struct kvu_conn, send_op));
    c->sock_sending = false;
    free(c->up_old);
    c->up_old = NULL;
    if (res <= 0) {
        kvu_close(c);
        kvu_maybe_free(c);
        return;
    }
    atomic_fetch_add(&c->u->bytes_up, (uint64_t)res);
    c->up_off += (size_t)res;
    if (c->up_off == c->up_len)
        c->up_off = c->up_len = 0;
    kvu_sock_send(c);
    kvu_maybe_free(c);
}

/* Takes n bytes the client sent: false when they do not fit (closed). */
static bool kvu_take(struct kvu_conn *c, const uint8_t *b, size_t n)
{
    struct ol_daemon_kvucx *u = c->u;
    size_t cap = c->answered ? OL_KVU_UP_CAP : OL_KVU_PRE_CAP;
    if (c->up_len - c->up_off + n > cap) {
        atomic_fetch_add(&u->overrun, 1);
        return false;
    }
    if (c->up_len + n > c->up_cap && c->up_off && !c->sock_sending) {
        memmove(c->up, c->up + c->up_off, c->up_len - c->up_off);
        c->up_len -= c->up_off;
        c->up_off = 0;
    }
    if (c->up_len + n > c->up_cap) {
        size_t want = c->up_cap ? c->up_cap : 64u << 10;
        while (want < c->up_len + n)
            want *= 2;
        /* a send on the pair may be reading the old buffer: it stays until
         * that send ended (the offsets hold in the new one) */
        uint8_t *p = malloc(want);
        if (!p)
            return false;
        if (c->up_len)
            memcpy(p, c->up, c->up_len);
        if (c->sock_sending && !c->up_old)
            c->up_old = c->up;        /* the one the send started on */
        else
            free(c->up);
        c->up = p;
        atomic_fetch_add(&u->up_bytes, want - c->up_cap);
        c->up_cap = want;
    }
    memcpy(c->up + c->up_len, b, n);
    c->up_len += n;
    c->up_used = true;
    return true;
}

/* ---- server -> client -------------------------------------------------------- */

static void kvu_on_poll(ol_loop *loop, struct ol_op *op, int res, unsigned flags);

static void kvu_poll(struct kvu_conn *c)
{
    struct ol_daemon_kvucx *u = c->u;
    if (c->closing || c->polling || c->ucx_sending)
        return;
    c->poll_op.cb = kvu_on_poll;
    if (ol_loop_poll(u->loop, &c->poll_op, c->fd, POLLIN) < 0) {
        kvu_close(c);
        return;
    }
    c->polling = true;
}

static void kvu_ucx_send(struct kvu_conn *c)
{
    c->siov = (struct iovec){c->down + c->down_off, c->down_len - c->down_off};
    if (c->x->t->ops->send(c->x, &c->siov, 1) < 0) {
        kvu_close(c);
        return;
    }
    c->ucx_sending = true;
}

static void kvu_on_poll(ol_loop *loop, struct ol_op *op, int res, unsigned flags)
{
    (void)loop;
    (void)flags;
    (void)res;
    struct kvu_conn *c = (struct kvu_conn *)((char *)op - offsetof(struct kvu_conn, poll_op));
    c->polling = false;
    if (c->closing) {
        kvu_maybe_free(c);
        return;
    }
    ssize_t n = recv(c->fd, c->down, OL_KVU_DOWN, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        kvu_poll(c);
    } else if (n <= 0) {
        kvu_close(c);                /* the server closed (its last bytes went out) */
    } else {
        c->answered = true;
        c->down_off = 0;
        c->down_len = (size_t)n;
        kvu_ucx_send(c);
    }
    kvu_maybe_free(c);
}

/* ---- the endpoint's events ----------------------------------------------------- */

static void kvu_on_received(struct ol_xconn *x, int res, const uint8_t *b, bool more)
{
    struct kvu_conn *c = x->user;
    if (!more)
        c->recv_armed = false;
    if (res > 0 && !c->closing) {
        if (!kvu_take(c, b, (size_t)res))
            kvu_close(c);
        else
            kvu_sock_send(c);
    } else if (res <= 0 && res != -ENOBUFS) {
        kvu_close(c);                /* the client closed, or an error */
    }
    if (!c->recv_armed && !c->closing) {
        if (x->t->ops->recv(x) == 0)
            c->recv_armed = true;
        else
            kvu_close(c);
    }
    kvu_maybe_free(c);
}

static void kvu_on_sent(struct ol_xconn *x, int res)
{
    struct kvu_conn *c = x->user;
    c->ucx_sending = false;
    if (res <= 0 || c->closing) {
        kvu_close(c);
        kvu_maybe_free(c);
        return;
    }
    atomic_fetch_add(&c->u->bytes_down, (uint64_t)res);
    c->down_off += (size_t)res;
    if (c->down_off < c->down_len)
        kvu_ucx_send(c);
    else
        kvu_poll(c);
    kvu_maybe_free(c);
}

static void kvu_on_connected(struct ol_xconn *x, int res)
{
    (void)x;
    (void)res;                        /* the listener dials nothing */
}

static void kvu_on_adopt(ol_loop *loop, struct ol_msg *m)
{
    (void)loop;
    struct kvu_adopt *a = (struct kvu_adopt *)m;
    ol_kv_server_adopt(a->s, a->fd);
    free(a);
}

static void kvu_on_accepted(void *arg, struct ol_xconn *x)
{
    struct ol_daemon_kvucx *u = arg;
    struct ol_daemon *d = u->d;
    int sv[2] = {-1, -1};
    struct kvu_conn *c = NULL;
    struct kvu_adopt *a = NULL;
    if (atomic_load(&u->quiet) || u->nconns >= OL_KVU_CONNS ||
        !(c = calloc(1, sizeof *c)) || !(c->down = malloc(OL_KVU_DOWN)) ||
        !(a = calloc(1, sizeof *a)) ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        atomic_fetch_add(&u->refused, 1);
        if (c)
            free(c->down);
        free(c);
        free(a);
        x->t->ops->free(x);
        return;
    }
    atomic_fetch_add(&u->accepted, 1);
    c->u = u;
    c->x = x;
    c->fd = sv[0];
    x->user = c;
    c->next = u->conns;
    if (u->conns)
        u->conns->prev = c;
    u->conns = c;
    u->nconns++;
    atomic_store(&u->live, u->nconns);
    /* the server's end to a core (any: HELLO moves it to its shard's) */
    uint32_t core = u->next_core++ % (uint32_t)d->ncores;
    a->m.fn = kvu_on_adopt;
    a->s = d->kv_servers[core];
    a->fd = sv[1];
    ol_loop_post(d->cores[core].loop, &a->m);
    if (x->t->ops->recv(x) == 0)
        c->recv_armed = true;
    else
        kvu_close(c);
    kvu_poll(c);
    kvu_maybe_free(c);
}

static const struct ol_xport_events kvu_events = {
    .accepted = kvu_on_accepted,
    .connected = kvu_on_connected,
    .received = kvu_on_received,
    .sent = kvu_on_sent,
};

/* ---- the loop -------------------------------------------------------------------- */

/* Every OL_KVU_SWEEP_MS: a bridge that took no bytes since the last sweep
 * and holds none gives back an up buffer over OL_KVU_UP_KEEP (a large
 * value grew it), so idle clients hold little; a busy one keeps its
 * buffer and pays no allocation per frame. */
static void kvu_sweep(ol_loop *loop, struct ol_timer *t)
{
    struct ol_daemon_kvucx *u = (struct ol_daemon_kvucx *)((char *)t -
                                                          offsetof(struct ol_daemon_kvucx,
                                                                   sweep));
    for (struct kvu_conn *c = u->conns; c; c = c->next) {
        if (!c->up_used && !c->sock_sending && c->up_len == 0 && c->up_cap > OL_KVU_UP_KEEP) {
            atomic_fetch_sub(&u->up_bytes, c->up_cap);
            free(c->up);
            c->up = NULL;
            c->up_cap = 0;
        }
        c->up_used = false;
    }
    ol_timer_arm(loop, t, OL_KVU_SWEEP_MS);
}

static int kvu_init(ol_loop *loop, void *arg)
{
    struct ol_daemon_kvucx *u = arg;
    const struct ol_config *cfg = &u->d->cfg;
    char devs[OL_DAEMON_UCX_DEVICES_LEN], gid[16];
    ol_daemon_ucx_devices(cfg, devs, sizeof devs, gid, sizeof gid);
    struct ol_xport_ucx_opts o = {.net_devices = devs, .gid_index = gid, .rma = false};
    int rc = ol_xport_ucx_create(loop, &kvu_events, u, &o, &u->t, u->err, sizeof u->err);
    if (rc < 0)
        return -1;
    int port = 0;
    char e[200];
    if (u->t->ops->listen(u->t, cfg->kv_ucx_addr, &port, e, sizeof e) < 0) {
        snprintf(u->err, sizeof u->err, "%s", e);
        u->t->ops->destroy(u->t);
        u->t = NULL;
        return -1;
    }
    u->listening = true;
    u->sweep.fn = kvu_sweep;
    ol_timer_arm(loop, &u->sweep, OL_KVU_SWEEP_MS);
    return 0;
}

int ol_daemon_kvucx_start(struct ol_daemon *d, char *err, size_t errlen)
{
    if (!d->kv || !d->cfg.kv_ucx_addr[0])
        return 0;
    struct ol_daemon_kvucx *u = calloc(1, sizeof *u);
    if (!u) {
        snprintf(err, errlen, "kv_ucx_addr: out of memory");
        return -1;
    }
    u->d = d;
    struct ol_loop_params lp = {.index = d->ncores + 1, .cpu = -1, .recv_bufs = 16};
    if (ol_loop_create(&lp, &u->loop, err, errlen) < 0) {
        free(u);
        return -1;
    }
    if (ol_loop_start(u->loop, kvu_init, u) < 0) {
        snprintf(err, errlen, "kv_ucx_addr: %s", u->err[0] ? u->err : "the loop did not start");
        ol_loop_destroy(u->loop);
        free(u);
        return -1;
    }
    d->kvucx = u;
    ol_info("kv: listening on %s (ucx)", d->cfg.kv_ucx_addr);
    return 0;
}

static void kvu_on_quiesce(ol_loop *loop, struct ol_msg *m)
{
    (void)loop;
    struct ol_daemon_kvucx *u = (struct ol_daemon_kvucx *)((char *)m -
                                                          offsetof(struct ol_daemon_kvucx,
                                                                   quiesce_msg));
    if (u->listening)
        u->t->ops->unlisten(u->t);
    u->listening = false;
    atomic_store(&u->quiet, true);
}

void ol_daemon_kvucx_quiesce(struct ol_daemon *d)
{
    struct ol_daemon_kvucx *u = d->kvucx;
    if (!u)
        return;
    u->quiesce_msg.fn = kvu_on_quiesce;
    ol_loop_post(u->loop, &u->quiesce_msg);
    /* the cores are told to drain only once no hand-over can follow: one
     * posted before this returns is in the core's mailbox before the drain */
    for (int i = 0; i < 2000 && !atomic_load(&u->quiet); i++)
        usleep(1000);
}

static void kvu_stop_check(ol_loop *loop, struct ol_timer *t)
{
    struct ol_daemon_kvucx *u = (struct ol_daemon_kvucx *)((char *)t -
                                                          offsetof(struct ol_daemon_kvucx,
                                                                   stop_check));
    if ((!u->conns && !u->t->ops->busy(u->t)) ||
        ol_loop_now_ms(loop) - u->stop_since >= OL_KVU_STOP_MS)
        ol_loop_stop(loop);
    else
        ol_timer_arm(loop, t, 10);
}

static void kvu_on_stop(ol_loop *loop, struct ol_msg *m)
{
    struct ol_daemon_kvucx *u = (struct ol_daemon_kvucx *)((char *)m -
                                                          offsetof(struct ol_daemon_kvucx,
                                                                   stop_msg));
    kvu_on_quiesce(loop, &u->quiesce_msg);
    ol_timer_cancel(loop, &u->sweep);
    for (struct kvu_conn *c = u->conns; c; c = c->next)
        kvu_close(c); /* freed by their operations' ends, not here */
    u->stop_since = ol_loop_now_ms(loop);
    u->stop_check.fn = kvu_stop_check;
    ol_timer_arm(loop, &u->stop_check, 1);
}

void ol_daemon_kvucx_stop(struct ol_daemon *d)
{
    struct ol_daemon_kvucx *u = d->kvucx;
    if (!u)
        return;
    u->stop_msg.fn = kvu_on_stop;
    ol_loop_post(u->loop, &u->stop_msg);
    ol_loop_join(u->loop);
    d->kvucx = NULL;
    /* what is left (a bridge whose operations did not end in time) goes
     * with the transport: its endpoints are freed there */
    while (u->conns) {
        struct kvu_conn *c = u->conns;
        u->conns = c->next;
        close(c->fd);
        free(c->up);
        free(c->up_old);
        free(c->down);
        free(c);
    }
    u->t->ops->destroy(u->t);
    ol_loop_destroy(u->loop);
    free(u);
}

size_t ol_daemon_kvucx_metrics(struct ol_daemon *d, char *buf, size_t cap)
{
    struct ol_daemon_kvucx *u = d->kvucx;
    if (!u)
        return 0;
    int n = snprintf(
        buf, cap,
        "# HELP openlake_kv_ucx_connections KV clients connected on the UCX listener (kv_ucx_addr).\n"
        "# TYPE openlake_kv_ucx_connections gauge\n"
        "openlake_kv_ucx_connections %u\n"
        "# HELP openlake_kv_ucx_accepted_total UCX endpoints accepted on kv_ucx_addr.\n"
        "# TYPE openlake_kv_ucx_accepted_total counter\n"
        "openlake_kv_ucx_accepted_total %llu\n"
        "# HELP openlake_kv_ucx_refused_total UCX endpoints refused (1024 connected, shutting down, out of memory).\n"
        "# TYPE openlake_kv_ucx_refused_total counter\n"
        "openlake_kv_ucx_refused_total %llu\n"
        "# HELP openlake_kv_ucx_overrun_total UCX clients disconnected for sending more than the server took (64 KiB before it answered).\n"
        "# TYPE openlake_kv_ucx_overrun_total counter\n"
        "openlake_kv_ucx_overrun_total %llu\n"
        "# HELP openlake_kv_ucx_bytes_total Bytes moved between UCX clients and the KV server.\n"
        "# TYPE openlake_kv_ucx_bytes_total counter\n"
        "openlake_kv_ucx_bytes_total{direction=\"in\"} %llu\n"
        "openlake_kv_ucx_bytes_total{direction=\"out\"} %llu\n"
        "# HELP openlake_kv_ucx_buffer_bytes What the UCX bridges hold for bytes from their clients not yet handed to the KV server (an idle bridge's buffer over 1 MiB is freed within 2 s).\n"
        "# TYPE openlake_kv_ucx_buffer_bytes gauge\n"
        "openlake_kv_ucx_buffer_bytes %llu\n",
        atomic_load(&u->live), (unsigned long long)atomic_load(&u->accepted),
        (unsigned long long)atomic_load(&u->refused), (unsigned long long)atomic_load(&u->overrun),
        (unsigned long long)atomic_load(&u->bytes_up),
        (unsigned long long)atomic_load(&u->bytes_down),
        (unsigned long long)atomic_load(&u->up_bytes));
    return n < 0 ? 0 : (size_t)n;
}
