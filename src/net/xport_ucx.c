/*
 * xport_ucx.c - the UCX transport of the node RPC (see xport.h): UCP
 * stream endpoints, client-server over a sockaddr listener, one UCP
 * context and worker per endpoint, driven from its loop.
 *
 * Owns: the context, the worker and its listener, and each connection's
 * endpoint. UCX picks the wire underneath (UCX_TLS: tcp without RDMA
 * hardware, rc/ud/dc over InfiniBand or RoCE), this file is the same for
 * all of them.
 *
 * Driving the worker: UCX's callbacks (a connection request, a send's
 * completion, an endpoint's error) only run inside ucp_worker_progress
 * (or inside a force close), and here they only note what happened; the
 * events go to rpc.c afterwards, from `kick`, a deferred callback of the
 * loop (so never inside a call of ops, as xport.h promises). `kick'
 * progresses the worker until it has nothing more, reads the endpoints
 * ucp_stream_worker_poll says have data, then arms the worker
 * (ucp_worker_arm) and polls its event fd through the loop (one-shot):
 * when the fd fires, kick again. Every operation here defers kick too.
 * An endpoint closed in kick means another progress before arming: UCX
 * destroys its transport endpoints (closes its sockets) from the
 * worker's progress queue, which does not wake the fd.
 *
 * Receiving: ucp_stream_recv_data_nb hands out UCX's own buffer (no copy
 * here), released once rpc.c took the bytes. An endpoint with data while
 * its receive is not armed keeps it in UCX and is read when armed again.
 *
 * Closing: ucp_ep_close_nbx with FORCE (every endpoint here has peer
 * error handling: the other side sees an error, as with a reset); its
 * outstanding send and gets end with -ECANCELED. A connection freed while
 * its send, close or gets are still with UCX waits on the port's zombie
 * list (with its unpacked remote key, destroyed when it is released).
 *
 * RMA: the context has UCP_FEATURE_RMA; mem_map is ucp_mem_map of the
 * region plus ucp_rkey_pack, rkey_unpack is ucp_ep_rkey_unpack, get is
 * ucp_get_nbx. UCX checks no length in a packed key: one comes only from
 * an authenticated peer (rpc.c's handshake), trusted as far as that peer.
 * Over a wire without RMA (UCX_TLS=tcp) UCP emulates gets with active
 * messages, answered inside the owner's ucp_worker_progress: the owner's
 * kick runs when its event fd fires, idle or not. A get's completion is
 * noted (the port's done list) and its done runs from kick, in order.
 */
#include "net/xport.h"
#include "base/container.h"

#ifdef OL_HAVE_UCX

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ucp/api/ucp.h>

#include "rt/net.h"

#define UCX_POLL_EPS 64

struct ucx_port;

struct ucx_conn {
    struct ol_xconn x;
    struct ucx_port *port;
    struct ucx_conn *next, *prev;        /* the port's live list, or its zombies */
    struct ucx_conn *pnext;              /* the port's list of events to deliver */
    ucp_ep_h ep;
    void *send_req, *close_req;
    ucp_dt_iov_t *siov;
    int siov_cap;
    size_t send_len;
    bool dialer, recv_armed, has_data, shut, freed, pending, accepted_ev;
    bool delivering;                     /* its events run: a free waits */
    ucp_rkey_h rkey;                     /* the peer's, for gets; NULL: none */
    uint32_t ngets;                      /* gets of its with UCX: a release waits */
    bool in_data;                        /* rpc.c reads UCX's buffer: a close waits */
    /* events noted, delivered by kick */
    bool ev_connected, ev_sent, ev_recv_end;
    int sent_res, recv_res;
    ucs_status_t failed;                 /* the endpoint's error, once */
};

/* A get: with UCX (on the port's outstanding list), then done (on its
 * done list) until kick runs its callback. */
struct ucx_get {
    struct ucx_get *next, *prev;
    struct ucx_port *up;
    struct ucx_conn *c;                  /* NULL once completed */
    bool ended;                          /* given up by destroy: on the done list */
    void *req;
    void (*done)(void *arg, int res);
    void *arg;
    int res;
};

struct ucx_port {
    struct ol_xport t;
    ucp_context_h ctx;
    ucp_worker_h w;
    ucp_listener_h lis;
    int efd;
    struct ol_op poll_op;
    bool polling, stopped, destroying;
    bool closed;                         /* an endpoint closed since kick's last progress */
    struct ol_timer kick;
    struct ucx_conn *live, *zombies, *phead, *ptail;
    ucp_mem_h memh;                      /* the mapped region, or NULL */
    void *rkey_buf;                      /* its packed key */
    size_t rkey_len;
    struct ucx_get *gets;                /* with UCX */
    struct ucx_get *ghead, *gtail;       /* completed, their callbacks due */
    uint32_t ngets;                      /* on either list */
};

static void port_kick(struct ucx_port *up)
{
    if (!up->destroying)
        ol_loop_defer(up->t.loop, &up->kick);
}

/* c has an event for rpc.c: delivered by the next kick. */
static void conn_pend(struct ucx_conn *c)
{
    struct ucx_port *up = c->port;
    if (!c->pending) {
        c->pending = true;
        c->pnext = NULL;
        if (up->ptail)
            up->ptail->pnext = c;
        else
            up->phead = c;
        up->ptail = c;
    }
    port_kick(up);
}

static void list_unlink(struct ucx_conn **head, struct ucx_conn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        *head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->next = c->prev = NULL;
}

static void list_push(struct ucx_conn **head, struct ucx_conn *c)
{
    c->prev = NULL;
    c->next = *head;
    if (*head)
        (*head)->prev = c;
    *head = c;
}

static int status_errno(ucs_status_t st)
{
    switch (st) {
    case UCS_OK: return 0;
    case UCS_ERR_CANCELED: return -ECANCELED;
    case UCS_ERR_NO_MEMORY: return -ENOMEM;
    case UCS_ERR_UNREACHABLE: return -EHOSTUNREACH;
    case UCS_ERR_REJECTED: return -ECONNREFUSED;
    case UCS_ERR_TIMED_OUT: case UCS_ERR_ENDPOINT_TIMEOUT: return -ETIMEDOUT;
    default: return -ECONNRESET;
    }
}

/* The end of c's armed receive, with res (noted; delivered by kick). */
static void conn_end_recv(struct ucx_conn *c, int res)
{
    if (!c->recv_armed || c->ev_recv_end)
        return;
    c->ev_recv_end = true;
    c->recv_res = res;
    conn_pend(c);
}

static void on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t st)
{
    (void)ep;
    struct ucx_conn *c = arg;
    if (c->failed == UCS_OK)
        c->failed = st;
    conn_end_recv(c, status_errno(st));
}

static void on_send_done(void *req, ucs_status_t st, void *user)
{
    struct ucx_conn *c = user;
    ucp_request_free(req);
    c->send_req = NULL;
    if (c->freed)
        return;
    c->ev_sent = true;
    c->sent_res = st == UCS_OK ? (int)c->send_len : status_errno(st);
    conn_pend(c);
}

static struct ucx_conn *conn_new(struct ucx_port *up, bool dialer)
{
    struct ucx_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->x.t = &up->t;
    c->port = up;
    c->dialer = dialer;
    return c;
}

static void ep_params_common(ucp_ep_params_t *ep, struct ucx_conn *c)
{
    ep->field_mask |= UCP_EP_PARAM_FIELD_USER_DATA | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep->user_data = c;
    ep->err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep->err_handler.cb = on_ep_error;
    ep->err_handler.arg = c;
}

static void on_conn_request(ucp_conn_request_h req, void *arg)
{
    struct ucx_port *up = arg;
    struct ucx_conn *c = up->lis && !up->destroying ? conn_new(up, false) : NULL;
    if (!c) {
        if (up->lis)
            ucp_listener_reject(up->lis, req);
        return;
    }
    ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST, .conn_request = req};
    ep_params_common(&ep, c);
    if (ucp_ep_create(up->w, &ep, &c->ep) != UCS_OK) {
        /* UCX rejects and frees the request itself when the endpoint
         * fails (UCX 1.13: a ucp_listener_reject here is a use after
         * free, seen under ASan with strangers on the listener) */
        free(c);
        return;
    }
    list_push(&up->live, c);
    c->accepted_ev = true;
    conn_pend(c);
}

static void conn_release(struct ucx_conn *c)
{
    if (c->rkey)
        ucp_rkey_destroy(c->rkey);
    free(c->siov);
    free(c);
}

/* Zombies whose send and close UCX has finished: freed. */
static void reap_zombies(struct ucx_port *up)
{
    for (struct ucx_conn *c = up->zombies, *next; c; c = next) {
        next = c->next;
        if (c->close_req && ucp_request_check_status(c->close_req) != UCS_INPROGRESS) {
            ucp_request_free(c->close_req);
            c->close_req = NULL;
        }
        if (c->send_req || c->close_req || c->pending || c->delivering || c->ngets)
            continue;
        list_unlink(&up->zombies, c);
        conn_release(c);
    }
}

/* Closes c's endpoint (force: its send ends with -ECANCELED). */
static void ep_close(struct ucx_conn *c)
{
    if (!c->ep)
        return;
    ucp_request_param_t prm = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                               .flags = UCP_EP_CLOSE_FLAG_FORCE};
    ucs_status_ptr_t r = ucp_ep_close_nbx(c->ep, &prm);
    c->ep = NULL;
    c->port->closed = true; /* its transport endpoints go in a later progress: kick's */
    if (r && !UCS_PTR_IS_ERR(r))
        c->close_req = r;
}

/* Reads what c's endpoint holds, while its receive is armed. */
static void conn_drain(struct ucx_conn *c)
{
    c->has_data = true;
    while (c->recv_armed && !c->shut && !c->ev_recv_end && c->ep) {
        size_t len = 0;
        ucs_status_ptr_t d = ucp_stream_recv_data_nb(c->ep, &len);
        if (d == NULL) {
            c->has_data = false;
            return;
        }
        if (UCS_PTR_IS_ERR(d)) {
            conn_end_recv(c, status_errno(UCS_PTR_STATUS(d)));
            return;
        }
        /* rpc.c may shut c down from this event (its endpoint is closed
         * once the buffer is back), never free it (its receive is armed) */
        c->in_data = true;
        c->x.t->ev->received(&c->x, (int)len, (const uint8_t *)d, true);
        c->in_data = false;
        ucp_stream_data_release(c->ep, d);
        if (c->shut)
            ep_close(c);
    }
}

/* c's events, in order; rpc.c may shut or free c from any of them. */
static void deliver_one(struct ucx_port *up, struct ucx_conn *c)
{
    if (c->accepted_ev) {
        c->accepted_ev = false;
        up->t.ev->accepted(up->t.arg, &c->x);
        return;
    }
    if (c->ev_connected) {
        c->ev_connected = false;
        up->t.ev->connected(&c->x, c->failed == UCS_OK ? 0 : status_errno(c->failed));
        if (c->freed || c->pending)
            return;
    }
    if (c->ev_sent) {
        c->ev_sent = false;
        up->t.ev->sent(&c->x, c->sent_res);
        if (c->freed || c->pending)
            return;
    }
    if (c->ev_recv_end) {
        c->ev_recv_end = false;
        c->recv_armed = false;
        up->t.ev->received(&c->x, c->recv_res, NULL, false);
        return;
    }
    if (c->has_data)
        conn_drain(c);
}

static void deliver(struct ucx_port *up)
{
    struct ucx_conn *c;
    while ((c = up->phead)) {
        up->phead = c->pnext;
        if (!up->phead)
            up->ptail = NULL;
        c->pending = false;
        if (c->freed)
            continue;
        c->delivering = true;
        deliver_one(up, c);
        c->delivering = false;
    }
}

/* The completed gets' callbacks, in order (each may start more). */
static void deliver_gets(struct ucx_port *up)
{
    struct ucx_get *g;
    while ((g = up->ghead)) {
        up->ghead = g->next;
        if (!up->ghead)
            up->gtail = NULL;
        up->ngets--;
        void (*done)(void *, int) = g->done;
        void *arg = g->arg;
        int res = g->res;
        free(g);
        done(arg, res);
    }
}

static void on_kick(ol_loop *loop, struct ol_timer *t)
{
    struct ucx_port *up = OL_CONTAINER(t, struct ucx_port, kick);
    bool armed = false;
    for (int round = 0; round < 64 && !armed; round++) {
        /* bounded: a peer that keeps sending cannot hold the loop here */
        up->closed = false;
        for (int i = 0; i < 256 && ucp_worker_progress(up->w); i++)
            ;
        ucp_stream_poll_ep_t eps[UCX_POLL_EPS];
        ssize_t n;
        while ((n = ucp_stream_worker_poll(up->w, eps, UCX_POLL_EPS, 0)) > 0)
            for (ssize_t i = 0; i < n; i++) {
                struct ucx_conn *c = eps[i].user_data;
                if (c && !c->freed) {
                    c->has_data = true;
                    conn_pend(c);
                }
            }
        deliver(up);
        deliver_gets(up);
        reap_zombies(up);
        /* an endpoint closed above: progress again before arming (a force
         * close only schedules its transport endpoints' destruction on the
         * worker's progress queue, which no fd event wakes: armed now, the
         * sockets would stay open until some other event, and a silent
         * stranger would never see its endpoint closed) */
        if (up->phead || up->ghead || up->closed)
            continue;
        /* UCS_ERR_BUSY: more events came, progress again; UCS_OK: the fd
         * is polled (another error is not expected of a worker made with
         * the wakeup feature; it is polled too) */
        armed = ucp_worker_arm(up->w) != UCS_ERR_BUSY;
    }
    ol_timer_cancel(loop, &up->kick); /* deliveries above may have deferred it */
    if (up->phead || up->ghead || !armed) {
        /* more than 64 rounds' worth: the next iteration */
        port_kick(up);
        return;
    }
    if (up->stopped && up->ngets) {
        /* stopped (the fd is no longer polled) with gets that end in a
         * progress: again in a millisecond, not at every turn of the loop
         * (a hung peer's gets would spin it until the stop's end) */
        if (!up->destroying)
            ol_timer_arm(loop, &up->kick, 1);
        return;
    }
    if (up->polling || up->stopped)
        return;
    if (ol_loop_poll(loop, &up->poll_op, up->efd, POLLIN) == 0)
        up->polling = true;
    else if (!up->destroying)
        ol_timer_arm(loop, &up->kick, 1); /* no submission entry now: armed again soon */
}

static void on_poll(ol_loop *loop, struct ol_op *op, int res, unsigned flags)
{
    (void)flags;
    (void)res;
    struct ucx_port *up = OL_CONTAINER(op, struct ucx_port, poll_op);
    up->polling = false;
    if (!up->destroying)
        on_kick(loop, &up->kick);
}

static int ucx_listen(struct ol_xport *t, const char *addr, int *port, char *err, size_t errlen)
{
    struct ucx_port *up = (struct ucx_port *)t;
    struct sockaddr_storage sa;
    socklen_t salen;
    if (ol_net_addr_numeric(addr, &sa, &salen) != 0) {
        snprintf(err, errlen, "node rpc (ucx): %s is not a numeric host:port", addr);
        return -EINVAL;
    }
    ucp_listener_params_t lp = {
        .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
        .sockaddr = {.addr = (struct sockaddr *)&sa, .addrlen = salen},
        .conn_handler = {.cb = on_conn_request, .arg = up},
    };
    ucs_status_t st = ucp_listener_create(up->w, &lp, &up->lis);
    if (st != UCS_OK) {
        snprintf(err, errlen, "node rpc (ucx): cannot listen on %s: %s", addr,
                 ucs_status_string(st));
        up->lis = NULL;
        return st == UCS_ERR_BUSY ? -EADDRINUSE : -EIO;
    }
    ucp_listener_attr_t la = {.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR};
    if (ucp_listener_query(up->lis, &la) == UCS_OK) {
        const struct sockaddr *s = (const struct sockaddr *)&la.sockaddr;
        if (s->sa_family == AF_INET)
            *port = ntohs(((const struct sockaddr_in *)s)->sin_port);
        else if (s->sa_family == AF_INET6)
            *port = ntohs(((const struct sockaddr_in6 *)s)->sin6_port);
    }
    port_kick(up);
    return 0;
}

static void ucx_unlisten(struct ol_xport *t)
{
    struct ucx_port *up = (struct ucx_port *)t;
    if (up->lis)
        ucp_listener_destroy(up->lis);
    up->lis = NULL;
    /* the endpoint closes: the worker's fd is no longer polled (the
     * closes still progress from kick), so the loop goes idle */
    up->stopped = true;
    if (up->polling)
        ol_loop_cancel(t->loop, &up->poll_op);
}

static bool ucx_busy(const struct ol_xport *t)
{
    const struct ucx_port *up = (const struct ucx_port *)t;
    return up->polling || up->ngets; /* a get's callback is still due */
}

static struct ol_xconn *ucx_dial(struct ol_xport *t, const struct sockaddr *sa, socklen_t salen,
                                 void *user, int *rc)
{
    struct ucx_port *up = (struct ucx_port *)t;
    struct ucx_conn *c = conn_new(up, true);
    if (!c) {
        *rc = -ENOMEM;
        return NULL;
    }
    c->x.user = user;
    ucp_ep_params_t ep = {
        .field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR,
        .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
        .sockaddr = {.addr = sa, .addrlen = salen},
    };
    ep_params_common(&ep, c);
    ucs_status_t st = ucp_ep_create(up->w, &ep, &c->ep);
    if (st != UCS_OK) {
        free(c);
        *rc = status_errno(st);
        return NULL;
    }
    list_push(&up->live, c);
    /* UCX connects in the background and holds what is sent meanwhile; a
     * failure to connect shows as the endpoint's error (the receive ends) */
    c->ev_connected = true;
    conn_pend(c);
    *rc = 0;
    return &c->x;
}

static int ucx_recv(struct ol_xconn *x)
{
    struct ucx_conn *c = (struct ucx_conn *)x;
    if (c->shut)
        return -ECANCELED;
    c->recv_armed = true;
    if (c->failed != UCS_OK)
        conn_end_recv(c, status_errno(c->failed));
    else if (c->has_data)
        conn_pend(c);
    return 0;
}

static int ucx_send(struct ol_xconn *x, const struct iovec *iov, int n)
{
    struct ucx_conn *c = (struct ucx_conn *)x;
    if (c->shut || !c->ep)
        return -ECANCELED;
    if (c->failed != UCS_OK)
        return status_errno(c->failed);
    if (n > c->siov_cap) {
        ucp_dt_iov_t *v = realloc(c->siov, (size_t)n * sizeof *v);
        if (!v)
            return -ENOMEM;
        c->siov = v;
        c->siov_cap = n;
    }
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        c->siov[i].buffer = iov[i].iov_base;
        c->siov[i].length = iov[i].iov_len;
        len += iov[i].iov_len;
    }
    c->send_len = len;
    ucp_request_param_t prm = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                        UCP_OP_ATTR_FIELD_DATATYPE,
        .cb = {.send = on_send_done},
        .datatype = ucp_dt_make_iov(),
        .user_data = c,
    };
    ucs_status_ptr_t r = ucp_stream_send_nbx(c->ep, c->siov, (size_t)n, &prm);
    if (UCS_PTR_IS_ERR(r))
        return status_errno(UCS_PTR_STATUS(r));
    if (r)
        c->send_req = r;
    else {
        c->ev_sent = true;
        c->sent_res = (int)len;
    }
    conn_pend(c);
    return 0;
}

static void ucx_shutdown(struct ol_xconn *x)
{
    struct ucx_conn *c = (struct ucx_conn *)x;
    if (c->shut)
        return;
    c->shut = true;
    if (!c->in_data)
        ep_close(c); /* else once rpc.c gave UCX's buffer back (conn_drain) */
    conn_end_recv(c, -ECANCELED);
    if (c->ev_connected && c->failed == UCS_OK)
        c->failed = UCS_ERR_CANCELED; /* the dial ends with -ECANCELED */
    port_kick(c->port);
}

static void ucx_free(struct ol_xconn *x)
{
    struct ucx_conn *c = (struct ucx_conn *)x;
    struct ucx_port *up = c->port;
    if (!c->shut)
        ucx_shutdown(x);
    c->freed = true;
    list_unlink(&up->live, c);
    if (c->send_req || c->close_req || c->pending || c->delivering || c->ngets) {
        /* pending: still on the event list; delivering: its events are
         * running (rpc.c frees it from one); ngets: its gets are with UCX
         * (they use its endpoint and key); reaped once done */
        list_push(&up->zombies, c);
        port_kick(up);
        return;
    }
    conn_release(c);
}

static void get_complete(struct ucx_port *up, struct ucx_get *g, int res);

static void ucx_destroy(struct ol_xport *t)
{
    struct ucx_port *up = (struct ucx_port *)t;
    up->destroying = true;
    ol_timer_cancel(t->loop, &up->kick);
    ucx_unlisten(t);
    while (up->live)
        ucx_free(&up->live->x);
    up->phead = up->ptail = NULL;
    for (struct ucx_conn *c = up->zombies; c; c = c->next)
        c->pending = false;
    /* UCX finishes the force closes within a few progress calls; bounded */
    for (int i = 0; i < 10000 && up->zombies; i++) {
        ucp_worker_progress(up->w);
        reap_zombies(up);
    }
    /* gets UCX never finished: nothing writes into their buffers once
     * the worker is gone; every callback runs, in order */
    while (up->gets) {
        struct ucx_get *g = up->gets;
        g->ended = true; /* a callback of UCX's for it from now on is ignored */
        get_complete(up, g, -ECANCELED);
    }
    while (up->zombies) {
        struct ucx_conn *c = up->zombies;
        list_unlink(&up->zombies, c);
        conn_release(c);
    }
    ucp_worker_destroy(up->w);
    deliver_gets(up);
    if (up->rkey_buf)
        ucp_rkey_buffer_release(up->rkey_buf);
    if (up->memh)
        ucp_mem_unmap(up->ctx, up->memh);
    ucp_cleanup(up->ctx);
    free(up);
}

/* ---- RMA ------------------------------------------------------------------------ */

static int ucx_mem_map(struct ol_xport *t, void *base, size_t len, const void **rkey,
                       size_t *rkey_len)
{
    struct ucx_port *up = (struct ucx_port *)t;
    if (up->memh)
        return -EEXIST;
    /* for remote reads only: on RDMA hardware the NIC refuses a remote
     * write to it (UCX's emulation over tcp checks no rights) */
    ucp_mem_map_params_t mp = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_PROT | UCP_MEM_MAP_PARAM_FIELD_FLAGS,
        /* no pinning of the whole slab at start on RDMA hardware: pages
         * are registered as they come (on-demand paging where the NIC
         * has it) */
        .flags = UCP_MEM_MAP_NONBLOCK,
        .address = base,
        .length = len,
        .prot = UCP_MEM_MAP_PROT_LOCAL_READ | UCP_MEM_MAP_PROT_LOCAL_WRITE |
                UCP_MEM_MAP_PROT_REMOTE_READ,
    };
    ucs_status_t st = ucp_mem_map(up->ctx, &mp, &up->memh);
    if (st != UCS_OK) {
        up->memh = NULL;
        return st == UCS_ERR_NO_MEMORY ? -ENOMEM : -EIO;
    }
    st = ucp_rkey_pack(up->ctx, up->memh, &up->rkey_buf, &up->rkey_len);
    if (st != UCS_OK) {
        ucp_mem_unmap(up->ctx, up->memh);
        up->memh = NULL;
        up->rkey_buf = NULL;
        return -EIO;
    }
    *rkey = up->rkey_buf;
    *rkey_len = up->rkey_len;
    return 0;
}

static int ucx_rkey_unpack(struct ol_xconn *x, const void *rkey, size_t len)
{
    struct ucx_conn *c = (struct ucx_conn *)x;
    if (!c->ep || c->shut)
        return -ECANCELED;
    if (len == 0)
        return -EINVAL;
    ucp_rkey_h rk;
    if (ucp_ep_rkey_unpack(c->ep, rkey, &rk) != UCS_OK)
        return -EINVAL;
    if (c->rkey) {
        if (c->ngets) { /* its gets still use the old one */
            ucp_rkey_destroy(rk);
            return -EBUSY;
        }
        ucp_rkey_destroy(c->rkey);
    }
    c->rkey = rk;
    return 0;
}

/* g off the outstanding list and its connection's count. */
static void get_unlink(struct ucx_port *up, struct ucx_get *g)
{
    if (g->c) {
        g->c->ngets--;
        g->c = NULL;
    }
    if (g->prev)
        g->prev->next = g->next;
    else if (up->gets == g)
        up->gets = g->next;
    if (g->next)
        g->next->prev = g->prev;
}

/* A get is over (from progress, or at once): its callback is due. */
static void get_complete(struct ucx_port *up, struct ucx_get *g, int res)
{
    get_unlink(up, g);
    g->res = res;
    g->next = g->prev = NULL;
    if (up->gtail)
        up->gtail->next = g;
    else
        up->ghead = g;
    up->gtail = g;
    port_kick(up);
}

static void on_get_done(void *req, ucs_status_t st, void *user)
{
    struct ucx_get *g = user;
    g->req = NULL;
    ucp_request_free(req);
    if (!g->ended)
        get_complete(g->up, g, status_errno(st));
}

static int ucx_get(struct ol_xconn *x, void *buf, size_t len, uint64_t raddr,
                   void (*done)(void *arg, int res), void *arg)
{
    struct ucx_conn *c = (struct ucx_conn *)x;
    struct ucx_port *up = c->port;
    if (c->shut || !c->ep)
        return -ECANCELED;
    if (c->failed != UCS_OK)
        return status_errno(c->failed);
    if (!c->rkey)
        return -ENOKEY;
    struct ucx_get *g = calloc(1, sizeof *g);
    if (!g)
        return -ENOMEM;
    g->up = up;
    g->c = c;
    g->done = done;
    g->arg = arg;
    g->next = up->gets;
    if (up->gets)
        up->gets->prev = g;
    up->gets = g;
    c->ngets++;
    up->ngets++;
    ucp_request_param_t prm = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb = {.send = on_get_done},
        .user_data = g,
    };
    ucs_status_ptr_t r = ucp_get_nbx(c->ep, buf, len, raddr, c->rkey, &prm);
    if (UCS_PTR_IS_ERR(r)) { /* the caller hears of it now: no callback */
        get_unlink(up, g);
        up->ngets--;
        free(g);
        return status_errno(UCS_PTR_STATUS(r));
    }
    if (r)
        g->req = r;
    else
        get_complete(up, g, 0);
    return 0;
}

static const struct ol_xport_ops ucx_ops = {
    .name = "ucx",
    .listen = ucx_listen,
    .unlisten = ucx_unlisten,
    .busy = ucx_busy,
    .dial = ucx_dial,
    .recv = ucx_recv,
    .send = ucx_send,
    .shutdown = ucx_shutdown,
    .free = ucx_free,
    .destroy = ucx_destroy,
    .mem_map = ucx_mem_map,
    .rkey_unpack = ucx_rkey_unpack,
    .get = ucx_get,
};

int ol_xport_ucx_create(ol_loop *loop, const struct ol_xport_events *ev, void *arg,
                        const struct ol_xport_ucx_opts *o, struct ol_xport **out, char *err,
                        size_t errlen)
{
    struct ucx_port *up = calloc(1, sizeof *up);
    if (!up) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    up->t = (struct ol_xport){.ops = &ucx_ops, .loop = loop, .ev = ev, .arg = arg};
    up->poll_op.cb = on_poll;
    up->kick.fn = on_kick;
    ucp_config_t *cfg;
    ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
    if (st != UCS_OK) {
        snprintf(err, errlen, "node rpc (ucx): UCX configuration: %s", ucs_status_string(st));
        free(up);
        return -EINVAL;
    }
    /* A node that restarts listens again on its rpc_addr at once, though
     * its old connections' ends linger (TIME_WAIT): SO_REUSEADDR, as the
     * TCP transport's listener has. UCX_CM_REUSEADDR in the environment
     * wins. */
    if (!getenv("UCX_CM_REUSEADDR"))
        ucp_config_modify(cfg, "CM_REUSEADDR", "y");
    /* [rdma] devices and gid_index, where the environment does not say */
    if (o && o->net_devices && o->net_devices[0] && !getenv("UCX_NET_DEVICES"))
        ucp_config_modify(cfg, "NET_DEVICES", o->net_devices);
    if (o && o->gid_index && o->gid_index[0] && !getenv("UCX_IB_GID_INDEX"))
        ucp_config_modify(cfg, "IB_GID_INDEX", o->gid_index);
    ucp_params_t pp = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                       .features = UCP_FEATURE_STREAM | UCP_FEATURE_WAKEUP |
                                   (o && o->rma ? UCP_FEATURE_RMA : 0)};
    st = ucp_init(&pp, cfg, &up->ctx);
    ucp_config_release(cfg);
    if (st != UCS_OK) {
        snprintf(err, errlen, "node rpc (ucx): ucp_init: %s", ucs_status_string(st));
        free(up);
        return -EIO;
    }
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    st = ucp_worker_create(up->ctx, &wp, &up->w);
    if (st == UCS_OK && (st = ucp_worker_get_efd(up->w, &up->efd)) != UCS_OK)
        ucp_worker_destroy(up->w);
    if (st != UCS_OK) {
        snprintf(err, errlen, "node rpc (ucx): worker: %s", ucs_status_string(st));
        ucp_cleanup(up->ctx);
        free(up);
        return -EIO;
    }
    *out = &up->t;
    port_kick(up);
    return 0;
}

#else

#include <errno.h>
#include <stdio.h>

int ol_xport_ucx_create(ol_loop *loop, const struct ol_xport_events *ev, void *arg,
                        const struct ol_xport_ucx_opts *o, struct ol_xport **out, char *err,
                        size_t errlen)
{
    (void)loop;
    (void)ev;
    (void)arg;
    (void)o;
    (void)out;
    snprintf(err, errlen, "node rpc: transport \"ucx\": this build has no UCX (libucx-dev "
                          "was not found when it was built)");
    return -ENOTSUP;
}

#endif
