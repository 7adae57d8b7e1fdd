/*
 * xport_tcp.c - the TCP transport of the node RPC (see xport.h): the
 * loop's multishot accept and receive, connect and sendmsg, and the
 * connections' socket options (no delay; keepalive and a user timeout, so
 * a peer host that dies without a reset fails its connection in seconds).
 */
#include "net/xport.h"
#include "base/container.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rt/net.h"

/* A dead or cut-off peer host (no reset): its connection fails after this
 * long with bytes unacknowledged, or idle after keepalive probes. */
#define TCP_USER_TIMEOUT_MS 10000u
#define TCP_KEEPIDLE_S      5
#define TCP_KEEPINTVL_S     2
#define TCP_KEEPCNT_N       3


struct tcp_port {
    struct ol_xport t;
    int lfd;
    struct ol_op accept_op;
    bool accepting, stopped;
};

struct tcp_conn {
    struct ol_xconn x;
    int fd;
    struct ol_op recv_op, send_op, conn_op;
    bool recv_armed, send_inflight, connecting;
    struct sockaddr_storage sa;
    socklen_t salen;
    struct msghdr msg;
};

static struct tcp_conn *conn_new(struct ol_xport *t, int fd);

static void on_accept(ol_loop *loop, struct ol_op *op, int res, unsigned flags)
{
    struct tcp_port *tp = OL_CONTAINER(op, struct tcp_port, accept_op);
    if (!(flags & OL_CQE_MORE))
        tp->accepting = false;
    if (res >= 0) {
        struct tcp_conn *c = conn_new(&tp->t, res);
        if (c)
            tp->t.ev->accepted(tp->t.arg, &c->x);
        else
            close(res);
    }
    if (!tp->accepting && !tp->stopped && ol_loop_accept(loop, &tp->accept_op, tp->lfd) == 0)
        tp->accepting = true;
}

static void on_recv(ol_loop *loop, struct ol_op *op, int res, unsigned flags)
{
    struct tcp_conn *c = OL_CONTAINER(op, struct tcp_conn, recv_op);
    bool more = flags & OL_CQE_MORE;
    if (!more)
        c->recv_armed = false;
    if (res > 0) {
        unsigned bid;
        char *b = ol_loop_recv_buf(loop, flags, &bid);
        if (!b) {
            c->x.t->ev->received(&c->x, -EIO, NULL, more);
            return;
        }
        c->x.t->ev->received(&c->x, res, (const uint8_t *)b, more);
        ol_loop_buf_release(loop, bid);
        return;
    }
    c->x.t->ev->received(&c->x, res, NULL, more);
}

static void on_send(ol_loop *loop, struct ol_op *op, int res, unsigned flags)
{
    (void)loop;
    (void)flags;
    struct tcp_conn *c = OL_CONTAINER(op, struct tcp_conn, send_op);
    c->send_inflight = false;
    c->x.t->ev->sent(&c->x, res == 0 ? -EPIPE : res);
}

static void on_connect(ol_loop *loop, struct ol_op *op, int res, unsigned flags)
{
    (void)loop;
    (void)flags;
    struct tcp_conn *c = OL_CONTAINER(op, struct tcp_conn, conn_op);
    c->connecting = false;
    c->x.t->ev->connected(&c->x, res);
}

static struct tcp_conn *conn_new(struct ol_xport *t, int fd)
{
    struct tcp_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->x.t = t;
    c->fd = fd;
    c->recv_op.cb = on_recv;
    c->send_op.cb = on_send;
    c->conn_op.cb = on_connect;
    /* A peer host that dies or is cut off without a reset: unacknowledged
     * bytes fail the connection after TCP_USER_TIMEOUT_MS, an idle one
     * after its keepalive probes; its calls then fail at once instead of
     * waiting out their deadlines one by one. */
    int one = 1, idle = TCP_KEEPIDLE_S, intvl = TCP_KEEPINTVL_S, cnt = TCP_KEEPCNT_N;
    unsigned user_timeout = TCP_USER_TIMEOUT_MS;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
    return c;
}

static int tcp_listen(struct ol_xport *t, const char *addr, int *port, char *err, size_t errlen)
{
    struct tcp_port *tp = (struct tcp_port *)t;
    int fd = ol_net_listen(addr, 0, port, err, errlen);
    if (fd < 0)
        return fd;
    tp->lfd = fd;
    if (ol_loop_accept(t->loop, &tp->accept_op, fd) == 0)
        tp->accepting = true;
    return 0;
}

static void tcp_unlisten(struct ol_xport *t)
{
    struct tcp_port *tp = (struct tcp_port *)t;
    tp->stopped = true;
    if (tp->accepting)
        ol_loop_cancel(t->loop, &tp->accept_op);
    if (tp->lfd >= 0)
        shutdown(tp->lfd, SHUT_RDWR);
}

static bool tcp_busy(const struct ol_xport *t)
{
    return ((const struct tcp_port *)t)->accepting;
}

static struct ol_xconn *tcp_dial(struct ol_xport *t, const struct sockaddr *sa, socklen_t salen,
                                 void *user, int *rc)
{
    if (salen > sizeof(struct sockaddr_storage)) {
        *rc = -EINVAL;
        return NULL;
    }
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *rc = -errno;
        return NULL;
    }
    struct tcp_conn *c = conn_new(t, fd);
    if (!c) {
        close(fd);
        *rc = -ENOMEM;
        return NULL;
    }
    c->x.user = user;
    memcpy(&c->sa, sa, salen);
    c->salen = salen;
    *rc = ol_loop_connect(t->loop, &c->conn_op, fd, (struct sockaddr *)&c->sa, c->salen);
    if (*rc != 0) {
        close(fd);
        free(c);
        return NULL;
    }
    c->connecting = true;
    return &c->x;
}

static int tcp_recv(struct ol_xconn *x)
{
    struct tcp_conn *c = (struct tcp_conn *)x;
    int rc = ol_loop_recv(x->t->loop, &c->recv_op, c->fd);
    if (rc == 0)
        c->recv_armed = true;
    return rc;
}

static int tcp_send(struct ol_xconn *x, const struct iovec *iov, int n)
{
    struct tcp_conn *c = (struct tcp_conn *)x;
    memset(&c->msg, 0, sizeof c->msg);
    c->msg.msg_iov = (struct iovec *)(uintptr_t)iov;
    c->msg.msg_iovlen = (size_t)n;
    int rc = ol_loop_sendmsg(x->t->loop, &c->send_op, c->fd, &c->msg);
    if (rc == 0)
        c->send_inflight = true;
    return rc;
}

static void tcp_shutdown(struct ol_xconn *x)
{
    struct tcp_conn *c = (struct tcp_conn *)x;
    ol_loop *loop = x->t->loop;
    if (c->recv_armed)
        ol_loop_cancel(loop, &c->recv_op);
    if (c->send_inflight)
        ol_loop_cancel(loop, &c->send_op);
    if (c->connecting)
        ol_loop_cancel(loop, &c->conn_op);
    shutdown(c->fd, SHUT_RDWR);
}

static void tcp_free(struct ol_xconn *x)
{
    struct tcp_conn *c = (struct tcp_conn *)x;
    close(c->fd);
    free(c);
}

static void tcp_destroy(struct ol_xport *t)
{
    struct tcp_port *tp = (struct tcp_port *)t;
    if (tp->lfd >= 0)
        close(tp->lfd);
    free(tp);
}

static const struct ol_xport_ops tcp_ops = {
    .name = "tcp",
    .listen = tcp_listen,
    .unlisten = tcp_unlisten,
    .busy = tcp_busy,
    .dial = tcp_dial,
    .recv = tcp_recv,
    .send = tcp_send,
    .shutdown = tcp_shutdown,
    .free = tcp_free,
    .destroy = tcp_destroy,
};

int ol_xport_tcp_create(ol_loop *loop, const struct ol_xport_events *ev, void *arg,
                        struct ol_xport **out)
{
    struct tcp_port *tp = calloc(1, sizeof *tp);
    if (!tp)
        return -ENOMEM;
    tp->t = (struct ol_xport){.ops = &tcp_ops, .loop = loop, .ev = ev, .arg = arg};
    tp->lfd = -1;
    tp->accept_op.cb = on_accept;
    *out = &tp->t;
    return 0;
}
