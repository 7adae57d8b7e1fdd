/*
 * server.c - the KV listener of one core (see server.h).
 *
 * Input: receive buffers are copied into the connection's frame buffer
 * (metadata frames are small; values travel through the slab, or inline in
 * PUT/GET frames of at most 16 MiB for clients on other hosts), whole frames
 * are decoded in place and answered into the connection's output buffer;
 * one send per batch. Large GET values are not copied into it: they go out
 * from their slots (sendmsg with an iovec), pinned until sent. Frame
 * buffers come from a per-core pool and are held only while a connection
 * has bytes in flight. A frame is processed only when its worst-case answer
 * fits in the output buffer, so a client that pipelines faster than it
 * reads is slowed, never dropped. Protocol errors get an ERROR frame, then
 * the connection closes.
 *
 * Disk tier: before an ACQUIRE or GET frame is answered, its keys that are
 * only on disk are read into RAM (ol_kv_shard_promote); the connection is
 * parked meanwhile (it reads no further frames) and every disk completion
 * runs the parked connections again. A frame waits at most
 * OL_KVS_LOAD_WAIT_MS; then it is answered with what RAM holds. Committed
 * entries are written behind after each batch of frames (ol_kv_shard_pump).
 * The cluster's KV pool reads disk-only keys for other nodes the same way
 * (ol_kv_server_promote), told of each completion by its disk_done hook.
 *
 * Before HELLO: a connection is unauthenticated until its HELLO's token
 * checks. Until then it holds no pooled buffer (its bytes go to a small
 * buffer inside the connection, and a frame before HELLO may be at most
 * OL_KVS_PRE_CAP bytes), it must complete HELLO within kv_hello_timeout_ms
 * of its accept, and at most kv_max_unauthenticated of them live per core
 * and listener (one more closes the oldest): so the 512 connection slots
 * of a core always keep room for clients that authenticated, and the Unix
 * socket's room is not taken by TCP peers (a burst of accepts can still
 * fill the slots with connections being closed: TCP accepts past
 * OL_KVS_CONNS - OL_KVS_HANDOVER_ROOM - OL_KVS_UNIX_ROOM, and Unix ones
 * past OL_KVS_CONNS - OL_KVS_HANDOVER_ROOM, are refused then; hand-overs
 * of authenticated clients still land). Clients say HELLO again on a
 * connection closed before its answer (docs/kv-client.md). Every connection closed for
 * these reasons is counted (ol_kv_service_metrics) and logged at most once
 * per OL_KVS_LOG_MS per core.
 *
 * Tenants (service.h): HELLO's namespace picks the tenant; the token must
 * open it (the tenant's own, or the admin token), else UNAUTHORIZED as for
 * a bad token. The connection is then bound to that tenant's shard on its
 * core (c->t, c->sh): every operation, the slab it maps and STATS are that
 * tenant's. The tick and the disk completions run every tenant's shard of
 * this core.
 *
 * Hand-over: HELLO names the shard the connection serves. If that shard is
 * another core's, this core stops receiving, and posts the socket to that
 * core (ol_msg embedded in the connection); the target core adopts it,
 * answers the HELLO and posts an acknowledgement back, on which this core
 * frees its connection without closing the socket.
 */
#include "kv/server.h"
#include "base/container.h"

#include "base/assert.h"
#include "base/log.h"
#include "base/pool.h"
#include "rt/net.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define OL_KVS_CONNS       512
/* Slots a new connection may not take: kept for clients that authenticated
 * on another core and are handed over here. A connection closed to make
 * room holds its slot until its receive's cancellation completes, so a
 * burst of accepts can fill the slots with closing ones; the accepts past
 * this mark are refused, the hand-overs still land. */
#define OL_KVS_HANDOVER_ROOM 64
/* And on the core with the Unix socket, slots TCP accepts may not take:
 * a TCP flood does not shed same-host clients. */
#define OL_KVS_UNIX_ROOM   64
#define OL_KVS_BUFS        128  /* frame buffers, lent to connections with bytes in flight */
#define OL_KVS_MAX_ITEMS   8192u
#define OL_KVS_MAX_BODY    (1u << 20)   /* metadata frames */
#define OL_KVS_MAX_DATA    (16u << 20)  /* PUT requests and GET answers (values inline) */
/* Input: one whole frame may wait for output room (IN_PAUSE: receiving
 * stops past it), plus room for the receive completions the kernel already
 * produced when the receive is cancelled (up to 32 x 16 KiB per wake-up).
 * The pools reserve address space only; pages are touched as frames use them. */
#define OL_KVS_IN_PAUSE    (OL_KV_HDR_LEN + OL_KVS_MAX_DATA)
#define OL_KVS_IN_CAP      (OL_KVS_IN_PAUSE + (2u << 20))
#define OL_KVS_OUT_CAP     (OL_KV_HDR_LEN + OL_KVS_MAX_DATA + OL_KVS_MAX_ITEMS * 48u + 4096)
/* GET values of OL_KVS_BY_REF bytes or more are not copied into the answer:
 * the output buffer leaves their room untouched and the send takes them
 * from the slab (struct ol_kv_ref, a table kept past OL_KVS_OUT_CAP in the
 * same pooled buffer); OL_KVS_IOV iovecs per send. */
#define OL_KVS_BY_REF      (16u << 10)
#define OL_KVS_IOV         64
#define OL_KVS_OUT_BUF     (OL_KVS_OUT_CAP + OL_KVS_MAX_ITEMS * sizeof(struct ol_kv_ref))
#define OL_KVS_DEFAULT_VALUE (64u << 10)
#define OL_KVS_TICK_MS     100
/* Bytes a connection may hold before HELLO: one HELLO frame at its largest
 * (header, fixed fields, token, namespace, padding, CRC trailer) fits. */
#define OL_KVS_PRE_CAP     1024u
_Static_assert(OL_KV_HDR_LEN + 32 + OL_KV_MAX_TOKEN + OL_KV_MAX_NAMESPACE + 8 + 8 <= OL_KVS_PRE_CAP,
               "a HELLO frame must fit the pre-HELLO buffer");
#define OL_KVS_LOG_MS      10000  /* refused connections: one log line a core per 10 s */
#define OL_KVS_LOAD_WAIT_MS 2000

/* A GET value sent from its slot: out[off, off + len) on the wire is
 * src[0, len); the session pins (slot, gen) until those bytes are sent. */
struct ol_kv_ref {
    uint32_t off, len;
    const char *src;
    uint64_t gen;
    uint32_t slot;
};

struct ol_kv_conn {
    struct ol_op recv_op, send_op;
    struct ol_kv_server *srv;
    struct ol_kv_conn *next, *prev;
    int fd;
    bool is_unix, recv_armed, send_inflight, closing, close_after, hello, shm, migrating, adopted;
    bool ucx;                      /* bridged from the UCX listener (ol_kv_server_adopt) */
    bool parked;              /* waiting for disk reads (on srv->parked) */
    bool authed;              /* HELLO's token checked (hello: and bound here) */
    bool pending;             /* on srv->pend[is_unix]: accepted, not authed */
    struct ol_kv_conn *pend_next, *pend_prev;
    uint64_t accepted_ms;
    struct ol_kv_conn *park_next, *park_prev;
    uint64_t park_since;      /* ms when the frame first waited; 0 = not waiting */
    int busy;
    int sid;                  /* session on c->sh */
    struct ol_kv_tenant *t;   /* after HELLO: the namespace's tenant */
    struct ol_kv_shard *sh;   /* once bound: t's shard of this core */
    uint64_t ns_seed;
    uint32_t ns;
    uint64_t value_size;
    uint64_t session_id;
    /* the cluster's KV pool (server.h, ol_kv_remote): the frame being
     * served waits for keys fetched from their home nodes */
    uint8_t fetch_state;      /* FETCH_NONE, FETCH_PENDING (token), FETCH_DONE */
    uint64_t fetch_token;
    struct ol_kv_hash *there; /* a LOOKUP's keys their homes have, sorted (malloc) */
    uint32_t nthere;
    uint16_t nslen;           /* the namespace of HELLO */
    uint16_t version;         /* negotiated in HELLO: frames up to it are served */
    char nsb[OL_KV_MAX_NAMESPACE];
    char *in, *out;
    uint32_t in_len, out_len, out_sent;
    uint32_t nrefs, refs_done; /* out's slab references, and how many are sent (unpinned) */
    struct msghdr msg;         /* the send in flight when it has references */
    struct iovec iov[OL_KVS_IOV];
    /* hand-over */
    struct ol_msg mig_msg, ack_msg;
    uint64_t hello_req_id;
    uint32_t want_shard;
    unsigned crc_flag;        /* OL_KV_F_BODY_CRC when the frame being answered had it */
    char pre[OL_KVS_PRE_CAP]; /* input before HELLO (in == pre), no pooled buffer */
};

/* Unauthenticated connections of one listener, oldest first. */
struct ol_kv_pend {
    struct ol_kv_conn *head, *tail;
    uint32_t n;
};

/* A tenant's shard of this core, and the context of its disk completions. */
struct ol_kvs_unit {
    struct ol_kv_server *srv;
    struct ol_kv_shard *shard;
    uint64_t peer_hits, peer_misses; /* the shard's hits and misses for other nodes (load) */
};

enum { FETCH_NONE, FETCH_PENDING, FETCH_DONE };

struct ol_kv_server {
    ol_loop *loop;
    int core;
    /* the cluster's KV pool: the daemon's hooks, and a session per tenant
     * on this core's shards for what it stores and reads for other nodes */
    struct ol_kv_remote remote;
    bool has_remote;
    int *rsid;                           /* [svc->ntenants] */
    uint64_t fetch_seq;
    struct ol_kv_service *svc;
    struct ol_kvs_unit *units;           /* [svc->ntenants] */
    struct ol_kv_server **servers;
    int tcp_fd, unix_fd, port;
    struct ol_op tcp_accept, unix_accept;
    bool draining;
    struct ol_pool conns, inbufs, outbufs;
    struct ol_kv_conn *list;
    struct ol_kv_conn *parked;           /* connections waiting for disk reads */
    struct ol_kv_pend pend[2];           /* [is_unix] */
    uint32_t nconns;
    struct ol_timer tick;
    int64_t homes[OL_KVS_MAX_ITEMS];     /* the pool: the homes of a fetch's keys */
    struct ol_kv_hash hs[OL_KVS_MAX_ITEMS];
    uint8_t present[OL_KVS_MAX_ITEMS];
    uint8_t mine[OL_KVS_MAX_ITEMS];      /* key i belongs to this shard */
    const uint8_t *kp[OL_KVS_MAX_ITEMS]; /* keys of the frame being served */
    uint16_t kl[OL_KVS_MAX_ITEMS];
};

static _Atomic uint64_t ol_kv_next_session = 1;


static void ol_kvc_process(struct ol_kv_conn *c);
static void ol_kvc_saved(struct ol_kv_conn *c, struct ol_kv_hash h, const void *key,
                         uint16_t klen, const void *value, uint64_t len, uint64_t sum);
static void ol_kvc_saved_slot(struct ol_kv_conn *c, uint32_t slot);
static void ol_kvc_flush(struct ol_kv_conn *c);
static void ol_kvc_close(struct ol_kv_conn *c);

/* ---- lifetime ------------------------------------------------------------ */

static void ol_kvc_unpark(struct ol_kv_conn *c)
{
    if (!c->parked)
        return;
    if (c->park_prev)
        c->park_prev->park_next = c->park_next;
    else
        c->srv->parked = c->park_next;
    if (c->park_next)
        c->park_next->park_prev = c->park_prev;
    c->park_next = c->park_prev = NULL;
    c->parked = false;
}

static void ol_kvc_pend_remove(struct ol_kv_conn *c)
{
    if (!c->pending)
        return;
    struct ol_kv_pend *p = &c->srv->pend[c->is_unix];
    if (c->pend_prev)
        c->pend_prev->pend_next = c->pend_next;
    else
        p->head = c->pend_next;
    if (c->pend_next)
        c->pend_next->pend_prev = c->pend_prev;
    else
        p->tail = c->pend_prev;
    c->pend_next = c->pend_prev = NULL;
    c->pending = false;
    OL_ASSERT(p->n > 0);
    p->n--;
}

static void ol_kvc_pend_add(struct ol_kv_conn *c)
{
    struct ol_kv_pend *p = &c->srv->pend[c->is_unix];
    c->pend_prev = p->tail;
    c->pend_next = NULL;
    if (p->tail)
        p->tail->pend_next = c;
    else
        p->head = c;
    p->tail = c;
    p->n++;
    c->pending = true;
}

/* Returns c's input buffer: to the pool, or nothing for the inline one. */
static void ol_kvc_in_put(struct ol_kv_conn *c)
{
    if (c->in && c->in != c->pre)
        ol_pool_put(&c->srv->inbufs, c->in);
    c->in = NULL;
}

static void ol_kvc_maybe_free(struct ol_kv_conn *c)
{
    if (!c->closing || c->busy || c->recv_armed || c->send_inflight)
        return;
    struct ol_kv_server *s = c->srv;
    ol_kvc_unpark(c);
    ol_kvc_pend_remove(c);
    free(c->there);
    if (c->hello && !c->migrating) {
        ol_kv_shard_session_close(c->sh, c->sid);
        atomic_fetch_sub(&s->svc->sessions, 1);
        atomic_fetch_sub(&c->t->sessions, 1);
    }
    ol_kvc_in_put(c);
    if (c->out)
        ol_pool_put(&s->outbufs, c->out);
    if (!c->migrating) /* a handed-over socket belongs to the other core now */
        close(c->fd);
    if (c->prev)
        c->prev->next = c->next;
    else
        s->list = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->nconns--;
    ol_pool_put(&s->conns, c);
}

static void ol_kvc_close(struct ol_kv_conn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    ol_kvc_pend_remove(c); /* its slot is free soon: not counted against newer ones */
    if (c->recv_armed)
        ol_loop_cancel(c->srv->loop, &c->recv_op);
    if (!c->migrating)
        shutdown(c->fd, SHUT_RDWR);
    ol_kvc_maybe_free(c);
}

static struct ol_kv_conn *ol_kvc_new(struct ol_kv_server *s, int fd, bool is_unix)
{
    struct ol_kv_conn *c = s->draining ? NULL : ol_pool_get(&s->conns);
    if (!c)
        return NULL;
    memset(c, 0, sizeof *c);
    c->srv = s;
    c->fd = fd;
    c->is_unix = is_unix;
    c->sid = -1;
    c->version = OL_KV_VERSION; /* HELLO's; the session's once negotiated */
    c->next = s->list;
    if (s->list)
        s->list->prev = c;
    s->list = c;
    s->nconns++;
    return c;
}

/* Orders key hashes (a LOOKUP's keys their homes have, c->there). */
static int ol_kvc_hash_cmp(const void *a, const void *b)
{
    const struct ol_kv_hash *x = a, *y = b;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    return x->hi < y->hi ? -1 : x->hi > y->hi;
}

/* ---- output -------------------------------------------------------------------- */

/* The slab references of c's output (GET values sent from their slots). */
static struct ol_kv_ref *ol_kvc_refs(struct ol_kv_conn *c)
{
    return (struct ol_kv_ref *)(c->out + OL_KVS_OUT_CAP);
}

static void ol_on_kv_send(ol_loop *loop, struct ol_op *op, int res, unsigned flags)
{
    struct ol_kv_conn *c = OL_CONTAINER(op, struct ol_kv_conn, send_op);
    c->send_inflight = false;
    c->busy++;
    if (res < 0) {
        ol_kvc_close(c); /* pins still held go with the session */
    } else if (!c->closing) {
        c->out_sent += (uint32_t)res;
        struct ol_kv_ref *r = c->nrefs ? ol_kvc_refs(c) : NULL;
        for (; c->refs_done < c->nrefs && r[c->refs_done].off + r[c->refs_done].len <= c->out_sent;
             c->refs_done++)
            ol_kv_shard_release(c->sh, c->sid, r[c->refs_done].slot, r[c->refs_done].gen);
        if (c->out_sent == c->out_len) {
            c->out_len = c->out_sent = 0;
            c->nrefs = c->refs_done = 0;
            ol_pool_put(&c->srv->outbufs, c->out); /* idle connections hold no buffer */
            c->out = NULL;
            if (c->close_after)
                ol_kvc_close(c);
            else
                ol_kvc_process(c); /* input may be waiting for output room */
        } else {
            ol_kvc_flush(c);
        }
    }
    c->busy--;
    ol_kvc_maybe_free(c);
}

/*
 * Sends what is left of the output: out[out_sent, out_len), except that the
 * ranges of unsent slab references come from the slab. A short send
 * resumes from out_sent, which may lie inside a reference.
 */
static void ol_kvc_flush(struct ol_kv_conn *c)
{
    if (c->send_inflight || c->closing || c->out_sent == c->out_len)
        return;
    int rc;
    if (c->refs_done == c->nrefs) {
        rc = ol_loop_send(c->srv->loop, &c->send_op, c->fd, c->out + c->out_sent,
                          c->out_len - c->out_sent);
    } else {
        const struct ol_kv_ref *r = ol_kvc_refs(c);
        uint32_t pos = c->out_sent, k = c->refs_done;
        int n = 0;
        for (; k < c->nrefs && n + 2 <= OL_KVS_IOV; k++) {
            if (pos < r[k].off) {
                c->iov[n++] = (struct iovec){c->out + pos, r[k].off - pos};
                pos = r[k].off;
            }
            c->iov[n++] = (struct iovec){(char *)r[k].src + (pos - r[k].off), r[k].off + r[k].len - pos};
            pos = r[k].off + r[k].len;
        }
        if (k == c->nrefs && pos < c->out_len)
            c->iov[n++] = (struct iovec){c->out + pos, c->out_len - pos};
        c->msg = (struct msghdr){.msg_iov = c->iov, .msg_iovlen = (size_t)n};
        rc = ol_loop_sendmsg(c->srv->loop, &c->send_op, c->fd, &c->msg);
    }
    if (rc == 0)
        c->send_inflight = true;
    else
        ol_kvc_close(c);
}

static bool ol_kvc_out(struct ol_kv_conn *c)
{
    if (!c->out && !(c->out = ol_pool_get(&c->srv->outbufs)))
        return false;
    return true;
}

/* A frame whose status is not OK: header + message. */
static void ol_kvc_reply_status(struct ol_kv_conn *c, unsigned op, uint64_t req_id,
                                unsigned status, const char *msg)
{
    struct ol_kv_enc e;
    if (!ol_kvc_out(c) || ol_kv_frame_begin(&e, c->out + c->out_len, OL_KVS_OUT_CAP - c->out_len,
                                            op, req_id, OL_KV_F_RESPONSE | c->crc_flag, status) < 0) {
        ol_kvc_close(c);
        return;
    }
    ol_kv_enc_message(&e, msg, strlen(msg));
    long n = ol_kv_frame_end(&e);
    if (n < 0) {
        ol_kvc_close(c);
        return;
    }
    c->out_len += (uint32_t)n;
}

/* ERROR frame, then close once it is sent. */
static void ol_kvc_proto_error(struct ol_kv_conn *c, uint64_t req_id, unsigned status,
                               const char *msg)
{
    atomic_fetch_add(&c->srv->svc->protocol_errors, 1);
    ol_kvc_reply_status(c, OL_KV_OP_ERROR, req_id, status, msg);
    c->close_after = true;
    c->in_len = 0;
}

/* ---- HELLO ---------------------------------------------------------------------- */

/* Opens c's session on its tenant's shard of this core. */
static int ol_kvc_bind(struct ol_kv_conn *c)
{
    struct ol_kv_server *s = c->srv;
    c->sh = &c->t->shards[s->core];
    int sid = ol_kv_shard_session_open(c->sh);
    if (sid < 0)
        return -1;
    c->sid = sid;
    c->hello = true;
    atomic_fetch_add(&s->svc->sessions, 1);
    atomic_fetch_add(&c->t->sessions, 1);
    c->session_id = atomic_fetch_add(&ol_kv_next_session, 1);
    return 0;
}

/* Sends the HELLO response (with the fd of the tenant's slab for a SHM
 * session) directly: it is the first thing the connection sends, and small. */
static void ol_kvc_hello_reply(struct ol_kv_conn *c, uint64_t req_id)
{
    struct ol_kv_server *s = c->srv;
    const struct ol_kv_slab *slab = &c->t->slab;
    struct ol_kv_hello_resp r = {
        .session_id = c->session_id, .version = c->version, .flags = c->shm ? OL_KV_HELLO_SHM : 0,
        .shards = (uint32_t)s->svc->nshards, .max_items = OL_KVS_MAX_ITEMS,
        .max_body = OL_KVS_MAX_BODY, .max_data_body = OL_KVS_MAX_DATA,
        .max_value = OL_KV_MAX_VALUE, .max_key = OL_KV_MAX_KEY,
    };
    if (c->shm) {
        r.slab_size = slab->size;
        r.slot_size = ol_kv_slot_size_for(c->value_size);
        r.value_offset = 0;
        r.slot_count = (uint32_t)((uint64_t)slab->npages * OL_KV_PAGE / r.slot_size);
    }
    uint8_t buf[256];
    struct ol_kv_enc e;
    long n = -1;
    if (ol_kv_frame_begin(&e, buf, sizeof buf, OL_KV_OP_HELLO, req_id,
                          OL_KV_F_RESPONSE | c->crc_flag, OL_KV_OK) == 0 &&
        ol_kv_enc_hello_resp(&e, &r) == 0)
        n = ol_kv_frame_end(&e);
    if (n < 0) {
        ol_kvc_close(c);
        return;
    }
    struct iovec iov = {buf, (size_t)n};
    union {
        char b[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (c->shm) {
        memset(&ctl, 0, sizeof ctl);
        m.msg_control = ctl.b;
        m.msg_controllen = sizeof ctl.b;
        struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &slab->fd, sizeof(int));
    }
    if (sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT) != n)
        ol_kvc_close(c);
}

static void ol_kvc_adopted_start(struct ol_kv_conn *c);

/* Target core: adopt a socket handed over by another core. */
static void ol_on_kv_migrate(ol_loop *loop, struct ol_msg *m)
{
    struct ol_kv_conn *src = OL_CONTAINER(m, struct ol_kv_conn, mig_msg);
    struct ol_kv_server *s = src->srv->servers[src->want_shard];
    struct ol_kv_conn *c = ol_kvc_new(s, src->fd, src->is_unix);
    if (c) {
        c->authed = true;
        c->shm = src->shm;
        c->crc_flag = src->crc_flag;
        c->ns_seed = src->ns_seed;
        c->ns = src->ns;
        memcpy(c->nsb, src->nsb, src->nslen);
        c->nslen = src->nslen;
        c->t = src->t;
        c->value_size = src->value_size;
        c->version = src->version;
        c->ucx = src->ucx;
        /* Frames the client pipelined behind its HELLO come along. */
        if (src->in_len && !(c->in = ol_pool_get(&s->inbufs))) {
            close(c->fd);
            c->migrating = true; /* nothing of ours to close */
            c->closing = true;
            ol_kvc_maybe_free(c);
            ol_loop_post(src->srv->loop, &src->ack_msg);
            return;
        }
        if (src->in_len) {
            memcpy(c->in, src->in, src->in_len);
            c->in_len = src->in_len;
        }
        if (ol_kvc_bind(c) < 0) {
            ol_kvc_proto_error(c, src->hello_req_id, OL_KV_BUSY, "too many sessions");
            ol_kvc_flush(c);
        } else {
            ol_kvc_hello_reply(c, src->hello_req_id);
            ol_kvc_adopted_start(c);
        }
    } else {
        close(src->fd);
        atomic_fetch_add(&s->svc->conns_refused, 1);
    }
    ol_loop_post(src->srv->loop, &src->ack_msg);
}

/* Source core: the target has the socket; drop our side. */
static void ol_on_kv_migrated(ol_loop *loop, struct ol_msg *m)
{
    struct ol_kv_conn *c = OL_CONTAINER(m, struct ol_kv_conn, ack_msg);
    c->busy--;
    ol_kvc_close(c);
}

static void ol_kvc_handle_hello(struct ol_kv_conn *c, const struct ol_kv_hdr *h, struct ol_kv_dec *d)
{
    struct ol_kv_server *s = c->srv;
    struct ol_kv_hello_req q;
    if (c->hello) {
        ol_kvc_proto_error(c, h->req_id, OL_KV_BAD_REQUEST, "HELLO was already sent");
        return;
    }
    if (ol_kv_dec_hello_req(d, &q) < 0) {
        ol_kvc_proto_error(c, h->req_id, OL_KV_BAD_REQUEST, "malformed HELLO");
        return;
    }
    struct ol_kv_tenant *t = ol_kv_service_tenant_of(s->svc, q.ns.p, q.ns.len);
    if (!ol_kv_service_may_open(s->svc, t, q.token.p, q.token.len)) {
        /* a bad token and another tenant's answer alike */
        atomic_fetch_add(&s->svc->protocol_errors, 1);
        atomic_fetch_add(&t->hello_refused, 1);
        ol_kvc_reply_status(c, OL_KV_OP_HELLO, h->req_id, OL_KV_UNAUTHORIZED,
                            s->svc->ntenants > 1 ? "bad token for this namespace" : "bad token");
        c->close_after = true;
        return;
    }
    c->t = t;
    c->authed = true;
    ol_kvc_pend_remove(c);
    if (q.min_version > OL_KV_VERSION_MAX) {
        ol_kvc_reply_status(c, OL_KV_OP_HELLO, h->req_id, OL_KV_UNSUPPORTED_VERSION,
                            "this server speaks protocol versions 1 and 2");
        c->close_after = true;
        return;
    }
    c->version = (uint16_t)(q.max_version < OL_KV_VERSION_MAX ? q.max_version : OL_KV_VERSION_MAX);
    uint32_t shard = (q.flags & OL_KV_HELLO_SHARD) ? q.shard : 0;
    if (shard >= (uint32_t)s->svc->nshards) {
        ol_kvc_reply_status(c, OL_KV_OP_HELLO, h->req_id, OL_KV_BAD_REQUEST, "no such shard");
        c->close_after = true;
        return;
    }
    if (!atomic_load(&s->svc->ready)) { /* any shard: ready is the daemon's word */
        atomic_fetch_add(&s->svc->hello_busy, 1);
        ol_kvc_reply_status(c, OL_KV_OP_HELLO, h->req_id, OL_KV_BUSY, "starting; retry");
        c->close_after = true;
        return;
    }
    c->shm = c->is_unix && (q.flags & OL_KV_HELLO_WANTS_SHM);
    c->value_size = q.value_size ? q.value_size : OL_KVS_DEFAULT_VALUE;
    c->ns_seed = ol_kv_ns_seed(q.ns.p, q.ns.len);
    c->ns = (uint32_t)c->ns_seed;
    memcpy(c->nsb, q.ns.p, q.ns.len);
    c->nslen = (uint16_t)q.ns.len;
    if ((int)shard == s->core) {
        if (ol_kvc_bind(c) < 0) {
            ol_kvc_proto_error(c, h->req_id, OL_KV_BUSY, "too many sessions");
            return;
        }
        ol_kvc_hello_reply(c, h->req_id);
        return;
    }
    /* Another core's shard: hand the socket over once receiving stopped. */
    c->migrating = true;
    c->want_shard = shard;
    c->hello_req_id = h->req_id;
    c->mig_msg.fn = ol_on_kv_migrate;
    c->ack_msg.fn = ol_on_kv_migrated;
    if (c->recv_armed)
        ol_loop_cancel(s->loop, &c->recv_op);
}

static void ol_kvc_start_handover(struct ol_kv_conn *c)
{
    c->busy++; /* released by the acknowledgement */
    ol_loop_post(c->srv->servers[c->want_shard]->loop, &c->mig_msg);
}

/* ---- operations -------------------------------------------------------------------- */

/* Decodes the keys of a key-list request into srv->hs and srv->mine (the key
 * belongs to this shard); sets *wrong when any does not. Returns the count. */
static uint32_t ol_kvc_keys(struct ol_kv_conn *c, struct ol_kv_dec *d, bool *wrong,
                            const uint8_t **kp, uint16_t *kl)
{
    struct ol_kv_server *s = c->srv;
    struct ol_kv_bytes k;
    uint32_t n = 0;
    *wrong = false;
    while (ol_kv_dec_key(d, &k) == 1) {
        s->hs[n] = ol_kv_key_hash(c->ns_seed, k.p, k.len);
        s->mine[n] = ol_kv_shard_of(s->svc, s->hs[n]) == s->core;
        if (!s->mine[n])
            *wrong = true;
        if (kp) {
            kp[n] = k.p;
            kl[n] = (uint16_t)k.len;
        }
        n++;
    }
    return n;
}

static void ol_kvc_dispatch(struct ol_kv_conn *c, const struct ol_kv_hdr *h, struct ol_kv_dec *d)
{
    struct ol_kv_server *s = c->srv;
    OL_ASSERT(c->hello && c->sh == &c->t->shards[s->core]); /* bound to its tenant's shard */
    struct ol_kv_shard *sh = c->sh;
    const struct ol_kv_slab *slab = &c->t->slab;
    unsigned op = h->opcode;
    bool needs_shm = op == OL_KV_OP_RESERVE || op == OL_KV_OP_COMMIT || op == OL_KV_OP_ABORT ||
                     op == OL_KV_OP_ACQUIRE || op == OL_KV_OP_RELEASE;
    if (needs_shm && !c->shm) {
        ol_kvc_reply_status(c, op, h->req_id, OL_KV_UNSUPPORTED,
                            "this operation needs a shared-memory session (Unix socket, WANTS_SHM)");
        return;
    }
    struct ol_kv_enc e;
    if (ol_kv_frame_begin(&e, c->out + c->out_len, OL_KVS_OUT_CAP - c->out_len, op, h->req_id,
                          OL_KV_F_RESPONSE | c->crc_flag, OL_KV_OK) < 0) {
        ol_kvc_close(c);
        return;
    }
    uint64_t now = ol_loop_now_ms(s->loop);
    bool wrong;
    switch (op) {
    case OL_KV_OP_LOOKUP: {
        uint32_t n = ol_kvc_keys(c, d, &wrong, NULL, NULL);
        if (wrong) {
            ol_kvc_reply_status(c, op, h->req_id, OL_KV_WRONG_SHARD,
                                "a key belongs to another shard's connection");
            return;
        }
        ol_kv_shard_lookup(sh, c->ns, s->hs, n, s->present);
        uint32_t homed = 0; /* keys their homes have: hits, not misses */
        for (uint32_t i = 0; i < n; i++) {
            if (!s->present[i] && c->nthere &&
                bsearch(&s->hs[i], c->there, c->nthere, sizeof *c->there, ol_kvc_hash_cmp)) {
                s->present[i] = 1;
                homed++;
            }
            ol_kv_enc_lookup_hit(&e, s->present[i]);
        }
        sh->st.hits += homed;
        sh->st.misses -= homed;
        break;
    }
    case OL_KV_OP_RESERVE: {
        uint32_t n = ol_kvc_keys(c, d, &wrong, s->kp, s->kl);
        for (uint32_t i = 0; i < n; i++) {
            struct ol_kv_reserve_res r = {.status = OL_KV_WRONG_SHARD};
            if (s->mine[i]) {
                struct ol_kv_loc loc;
                r.status = (uint16_t)ol_kv_shard_reserve(sh, c->sid, c->ns, s->hs[i], s->kp[i], s->kl[i],
                                                         c->value_size, i, now, &loc);
                if (r.status == OL_KV_OK) {
                    r.slot = loc.slot;
                    r.gen = loc.gen;
                    r.offset = loc.offset;
                }
            }
            ol_kv_enc_reserve_res(&e, &r);
        }
        break;
    }
    case OL_KV_OP_COMMIT: {
        struct ol_kv_commit_item it;
        while (ol_kv_dec_commit(d, &it) == 1) {
            int st = ol_kv_shard_commit(sh, c->sid, it.slot, it.gen, it.value_len, it.checksum);
            ol_kv_enc_status(&e, (unsigned)st);
            if (st == OL_KV_OK && s->has_remote)
                ol_kvc_saved_slot(c, it.slot);
        }
        break;
    }
    case OL_KV_OP_ABORT:
    case OL_KV_OP_RELEASE: {
        struct ol_kv_slot_ref r;
        while (ol_kv_dec_slot_ref(d, &r) == 1)
            ol_kv_enc_status(&e, (unsigned)(op == OL_KV_OP_ABORT
                                                ? ol_kv_shard_abort(sh, c->sid, r.slot, r.gen)
                                                : ol_kv_shard_release(sh, c->sid, r.slot, r.gen)));
        break;
    }
    case OL_KV_OP_ACQUIRE: {
        uint32_t n = ol_kvc_keys(c, d, &wrong, NULL, NULL);
        for (uint32_t i = 0; i < n; i++) {
            struct ol_kv_acquire_res r = {.status = OL_KV_WRONG_SHARD};
            if (s->mine[i]) {
                struct ol_kv_loc loc;
                r.status = (uint16_t)ol_kv_shard_acquire(sh, c->sid, c->ns, s->hs[i], &loc);
                if (r.status == OL_KV_OK) {
                    r.slot = loc.slot;
                    r.gen = loc.gen;
                    r.offset = loc.offset;
                    r.value_len = loc.value_len;
                    r.checksum = loc.value_sum;
                }
            }
            ol_kv_enc_acquire_res(&e, &r);
        }
        break;
    }
    case OL_KV_OP_PUT: {
        /* reserve, copy the value in while hashing it, commit or (checksum
         * mismatch) abort: one item at a time, one pass over each value */
        struct ol_kv_put_item it;
        uint32_t i = 0;
        while (ol_kv_dec_put(d, &it) == 1) {
            struct ol_kv_hash kh = ol_kv_key_hash(c->ns_seed, it.key.p, it.key.len);
            unsigned st;
            struct ol_kv_loc loc;
            if (ol_kv_shard_of(s->svc, kh) != s->core) {
                st = OL_KV_WRONG_SHARD;
            } else if ((st = (unsigned)ol_kv_shard_reserve(sh, c->sid, c->ns, kh, it.key.p,
                                                           (uint16_t)it.key.len, it.value_len, i,
                                                           now, &loc)) == OL_KV_OK) {
                uint64_t sum = ol_kv_copy_hash(slab->base + loc.offset, it.value,
                                               it.value_len);
                if (it.checksum && sum != it.checksum) {
                    ol_kv_shard_abort(sh, c->sid, loc.slot, loc.gen); /* nothing stored */
                    st = OL_KV_CHECKSUM_MISMATCH;
                } else {
                    st = (unsigned)ol_kv_shard_commit(sh, c->sid, loc.slot, loc.gen,
                                                      it.value_len, sum);
                    if (st == OL_KV_OK && s->has_remote)
                        ol_kvc_saved(c, kh, it.key.p, (uint16_t)it.key.len,
                                     slab->base + loc.offset, it.value_len, sum);
                }
            }
            ol_kv_enc_status(&e, st);
            i++;
        }
        break;
    }
    case OL_KV_OP_GET: {
        /* Small values are copied into the answer under a pin held for the
         * copy. Large ones stay pinned in their slots and are sent from
         * there (ol_kvc_flush), unpinned as their bytes go out (or with the
         * session). The answer is the only one in the output (dispatch of a
         * GET waits for an empty output), so its references fit the table.
         * A body CRC covers the bytes in the buffer: with it, copy. */
        uint32_t n = ol_kvc_keys(c, d, &wrong, NULL, NULL);
        uint64_t value_bytes = 0; /* the answer carries at most OL_KVS_MAX_DATA of values */
        struct ol_kv_ref *refs = ol_kvc_refs(c);
        for (uint32_t i = 0; i < n; i++) {
            struct ol_kv_loc loc;
            int st = s->mine[i] ? ol_kv_shard_acquire(sh, c->sid, c->ns, s->hs[i], &loc)
                                : OL_KV_WRONG_SHARD;
            if (st == OL_KV_OK) {
                const char *src = slab->base + loc.offset;
                bool by_ref = loc.value_len >= OL_KVS_BY_REF && !c->crc_flag;
                void *at;
                value_bytes += ol_kv_align8(loc.value_len);
                if (value_bytes > OL_KVS_MAX_DATA) {
                    st = OL_KV_TOO_LARGE_ST; /* ask for fewer values per frame */
                } else if (by_ref) {
                    ol_kv_enc_get_res(&e, OL_KV_OK, NULL, loc.value_len, loc.value_sum, &at);
                    refs[c->nrefs++] = (struct ol_kv_ref){
                        .off = (uint32_t)((char *)at - c->out), .len = (uint32_t)loc.value_len,
                        .src = src, .gen = loc.gen, .slot = loc.slot};
                    continue; /* pinned until sent */
                } else {
                    ol_kv_enc_get_res(&e, OL_KV_OK, src, loc.value_len, loc.value_sum, NULL);
                }
                ol_kv_shard_release(sh, c->sid, loc.slot, loc.gen);
            }
            if (st != OL_KV_OK)
                ol_kv_enc_get_res(&e, (unsigned)st, NULL, 0, 0, NULL);
        }
        break;
    }
    case OL_KV_OP_DELETE: {
        uint32_t n = ol_kvc_keys(c, d, &wrong, NULL, NULL);
        for (uint32_t i = 0; i < n; i++)
            ol_kv_enc_status(&e, !s->mine[i] ? OL_KV_WRONG_SHARD
                                             : (unsigned)ol_kv_shard_delete(sh, c->ns, s->hs[i]));
        break;
    }
    case OL_KV_OP_RESET:
        ol_kv_enc_reset_res(&e, ol_kv_shard_reset(sh, c->ns));
        break;
    case OL_KV_OP_STATS: {
        struct ol_kv_shard_stats st;
        ol_kv_shard_stats(sh, &st);
        struct ol_kv_stats o = {{0}};
        /* shard counters (all namespaces), then process-wide ones */
        /* the session's namespace on this shard; the rest: the shard */
        ol_kv_shard_ns_usage(sh, c->ns, &o.c[OL_KV_STAT_ENTRIES], &o.c[OL_KV_STAT_BYTES_USED]);
        o.c[OL_KV_STAT_HITS] = st.hits;
        o.c[OL_KV_STAT_MISSES] = st.misses;
        o.c[OL_KV_STAT_EVICTIONS] = st.evictions;
        o.c[OL_KV_STAT_RESERVATIONS] = st.reserves;
        o.c[OL_KV_STAT_COMMITS] = st.commits;
        o.c[OL_KV_STAT_ABORTS] = st.aborts + st.expired;
        o.c[OL_KV_STAT_PINS] = st.pinned_slots;
        o.c[OL_KV_STAT_ACQUIRES] = st.acquires;
        o.c[OL_KV_STAT_DELETES] = st.deletes;
        if (sh->disk) {
            struct ol_kv_disk_stats ds;
            ol_kv_disk_stats(sh->disk, &ds);
            o.c[OL_KV_STAT_DISK_ENTRIES] = ds.entries;
            o.c[OL_KV_STAT_DISK_BYTES] = ds.value_bytes;
        }
        /* slots of this session's value size: the slab / the shard's free pages */
        const struct ol_kv_alloc *al = &sh->alloc;
        uint32_t ss = ol_kv_slot_size_for(c->value_size);
        uint64_t per = ss <= OL_KV_PAGE ? OL_KV_PAGE / ss : 0;
        uint64_t span = per ? 1 : (ss + OL_KV_PAGE - 1) / OL_KV_PAGE;
        uint64_t np = slab->npages;
        o.c[OL_KV_STAT_BYTES_CAPACITY] = np * OL_KV_PAGE;
        o.c[OL_KV_STAT_SLOTS_TOTAL] = per ? np * per : np / span;
        o.c[OL_KV_STAT_SLOTS_FREE] = per ? (uint64_t)al->free_pages * per : al->free_pages / span;
        int k = ol_kv_alloc_class(&sh->alloc, c->value_size);
        if (k >= 0 && per)
            o.c[OL_KV_STAT_SLOTS_FREE] += (uint64_t)al->cls[k].pages * per - al->cls[k].used;
        o.c[OL_KV_STAT_SESSIONS] = atomic_load(&c->t->sessions);
        o.c[OL_KV_STAT_PROTOCOL_ERRORS] = atomic_load(&s->svc->protocol_errors);
        ol_kv_enc_stats(&e, &o);
        break;
    }
    case OL_KV_OP_MEMBERS: /* v2; a node in no cluster answers replicas 0 */
        if (s->has_remote && s->remote.members && s->remote.members(s->remote.arg, &e, c->ucx) < 0) {
            ol_kvc_reply_status(c, op, h->req_id, OL_KV_INTERNAL, "no placement to answer with");
            return;
        }
        break;
    default:
        ol_kvc_proto_error(c, h->req_id, OL_KV_BAD_REQUEST, "unknown opcode");
        return;
    }
    long n = ol_kv_frame_end(&e);
    if (n < 0) {
        ol_kvc_close(c);
        return;
    }
    c->out_len += (uint32_t)n;
}

/* ---- disk tier ------------------------------------------------------------------ */

/* Parks c: it reads no further frames until the server runs it again. */
static void ol_kvc_park(struct ol_kv_conn *c, uint64_t now)
{
    struct ol_kv_server *s = c->srv;
    if (!c->park_since)
        c->park_since = now ? now : 1;
    c->parked = true;
    c->park_prev = NULL;
    c->park_next = s->parked;
    if (s->parked)
        s->parked->park_prev = c;
    s->parked = c;
}

/* Before an ACQUIRE or GET: starts reading the frame's disk-only keys into
 * RAM. Returns true when the frame must wait (the connection is parked). */
static bool ol_kvc_wait_loads(struct ol_kv_conn *c, const struct ol_kv_dec *frame)
{
    struct ol_kv_server *s = c->srv;
    uint64_t now = ol_loop_now_ms(s->loop);
    if (c->park_since && now - c->park_since >= OL_KVS_LOAD_WAIT_MS)
        return false; /* waited long enough: answer from RAM */
    struct ol_kv_dec d = *frame;
    struct ol_kv_bytes k;
    bool wait = false;
    while (ol_kv_dec_key(&d, &k) == 1) {
        struct ol_kv_hash kh = ol_kv_key_hash(c->ns_seed, k.p, k.len);
        if (ol_kv_shard_of(s->svc, kh) != s->core)
            continue;
        int where = ol_kv_shard_where(c->sh, c->ns, kh);
        if (where == OL_KV_WHERE_LOADING) {
            wait = true;
        } else if (where == OL_KV_WHERE_DISK) {
            int rc = ol_kv_shard_promote(c->sh, c->ns, kh);
            wait |= rc == 0 || rc == -EBUSY;
        }
    }
    if (!wait)
        return false;
    ol_kvc_park(c, now);
    return true;
}

/* Runs every parked connection again (each parks again if it must). */
static void ol_kvs_rekick(struct ol_kv_server *s)
{
    struct ol_kv_conn *list = s->parked;
    s->parked = NULL;
    while (list) {
        struct ol_kv_conn *c = list;
        list = c->park_next;
        c->park_next = c->park_prev = NULL;
        c->parked = false;
        ol_kvc_process(c);
    }
}

static void ol_kvs_disk_done(void *ctx, int ev, uint64_t tag, int status,
                             const struct ol_kv_slot_hdr *hdr)
{
    struct ol_kvs_unit *u = ctx;
    ol_kv_shard_disk_done(u->shard, ev, tag, status, hdr);
    ol_kv_shard_pump(u->shard);
    ol_kvs_rekick(u->srv);
    if (u->srv->has_remote && u->srv->remote.disk_done)
        u->srv->remote.disk_done(u->srv->remote.arg);
}

/* ---- the cluster's KV pool ------------------------------------------------------ */

/* Before an ACQUIRE or GET: the frame's keys that are nowhere here and
 * homed on another node are fetched first; before a LOOKUP (`lookup`),
 * their homes are asked whether they have them (c->there). Returns true
 * when the frame must wait (the connection is parked). */
static bool ol_kvc_fetch(struct ol_kv_conn *c, const struct ol_kv_dec *frame, bool lookup)
{
    struct ol_kv_server *s = c->srv;
    uint64_t now = ol_loop_now_ms(s->loop);
    if (c->fetch_state == FETCH_DONE)
        return false;
    if (c->fetch_state == FETCH_PENDING) {
        if (now - c->park_since < s->remote.wait_ms) {
            ol_kvc_park(c, now);
            return true;
        }
        c->fetch_state = FETCH_DONE; /* waited enough: answered from here */
        c->park_since = 0;           /* a disk wait after it has its own time */
        return false;
    }
    struct ol_kv_dec d = *frame;
    struct ol_kv_bytes k;
    uint32_t n = 0;
    while (ol_kv_dec_key(&d, &k) == 1 && n < OL_KVS_MAX_ITEMS) {
        struct ol_kv_hash kh = ol_kv_key_hash(c->ns_seed, k.p, k.len);
        bool mine = ol_kv_shard_of(s->svc, kh) == s->core;
        if (lookup && !mine) {
            n = 0;  /* a LOOKUP with another shard's key is answered WRONG_SHARD: ask nothing */
            break;
        }
        if (!mine ||
            ol_kv_shard_where(c->sh, c->ns, kh) != OL_KV_WHERE_MISS ||
            (s->homes[n] = s->remote.home_of(s->remote.arg, kh)) < 0)
            continue;
        s->hs[n] = kh;
        s->kp[n] = k.p;
        s->kl[n] = (uint16_t)k.len;
        n++;
    }
    c->fetch_state = FETCH_DONE;
    if (!n)
        return false;
    struct ol_kv_fetch_req r = {
        .core = s->core, .tenant = (int)(c->t - s->svc->tenants), .ns = c->nsb,
        .nslen = c->nslen, .n = n, .hs = s->hs, .homes = s->homes, .keys = s->kp,
        .klens = s->kl, .exists = lookup,
        .token = ++s->fetch_seq, .value_size = c->value_size};
    if (s->remote.fetch(s->remote.arg, &r) < 0)
        return false;
    c->fetch_state = FETCH_PENDING;
    c->fetch_token = r.token;
    c->park_since = 0;
    ol_kvc_park(c, now);
    return true;
}

/* A value stored here by a client (COMMIT, PUT), when it is homed on
 * another node: handed to the pool to send home. */
static void ol_kvc_saved(struct ol_kv_conn *c, struct ol_kv_hash h, const void *key,
                         uint16_t klen, const void *value, uint64_t len, uint64_t sum)
{
    struct ol_kv_server *s = c->srv;
    int64_t home = s->remote.home_of(s->remote.arg, h);
    if (home < 0)
        return;
    struct ol_kv_saved v = {.core = s->core, .tenant = (int)(c->t - s->svc->tenants),
                            .ns = c->nsb, .nslen = c->nslen, .h = h, .home = home, .key = key,
                            .klen = klen, .value = value, .len = len, .sum = sum};
    s->remote.saved(s->remote.arg, &v);
}

/* After a shared-memory COMMIT of slot: its key from the slot's header
 * (checked), its value read under a pin of the pool's session. */
static void ol_kvc_saved_slot(struct ol_kv_conn *c, uint32_t slot)
{
    struct ol_kv_server *s = c->srv;
    const struct ol_kv_slab *slab = &c->t->slab;
    struct ol_kv_slot_hdr hdr;
    memcpy(&hdr, ol_kv_slab_hdr(slab, slot), sizeof hdr);
    if (ol_kv_slab_hdr_check(&hdr) < 0 || hdr.ns != c->ns || hdr.key_len > OL_KV_KEY_MAX)
        return;
    /* the header is in memory the client writes: its key must hash to the
     * entry this slot holds, or nothing is sent */
    struct ol_kv_hash h = ol_kv_key_hash(c->ns_seed, hdr.key, hdr.key_len);
    if (h.lo != hdr.hash_lo || h.hi != hdr.hash_hi || s->remote.home_of(s->remote.arg, h) < 0)
        return;
    int tenant = (int)(c->t - s->svc->tenants);
    struct ol_kv_loc loc;
    if (ol_kv_shard_acquire(c->sh, s->rsid[tenant], c->ns, h, &loc) != OL_KV_OK)
        return;
    if (loc.slot != slot) {
        ol_kv_shard_release(c->sh, s->rsid[tenant], loc.slot, loc.gen);
        return;
    }
    ol_kvc_saved(c, h, hdr.key, hdr.key_len, slab->base + loc.offset, loc.value_len,
                 loc.value_sum);
    ol_kv_shard_release(c->sh, s->rsid[tenant], loc.slot, loc.gen);
}

int ol_kv_server_set_remote(struct ol_kv_server *s, const struct ol_kv_remote *r)
{
    s->rsid = calloc((size_t)s->svc->ntenants, sizeof *s->rsid);
    if (!s->rsid)
        return -ENOMEM;
    for (int i = 0; i < s->svc->ntenants; i++) {
        int sid = ol_kv_shard_session_open(s->units[i].shard);
        if (sid < 0) {
            while (i-- > 0)
                ol_kv_shard_session_close(s->units[i].shard, s->rsid[i]);
            free(s->rsid);
            s->rsid = NULL;
            return sid;
        }
        s->rsid[i] = sid;
    }
    s->remote = *r;
    s->has_remote = true;
    return 0;
}

void ol_kv_server_fetched(struct ol_kv_server *s, uint64_t token, const struct ol_kv_hash *there,
                          uint32_t n)
{
    for (struct ol_kv_conn *c = s->parked; c; c = c->park_next)
        if (c->fetch_state == FETCH_PENDING && c->fetch_token == token) {
            OL_ASSERT(!c->there);
            /* without memory for the list, they are misses */
            if (n && (c->there = malloc(n * sizeof *there)) != NULL) {
                memcpy(c->there, there, n * sizeof *there);
                qsort(c->there, n, sizeof *there, ol_kvc_hash_cmp);
                c->nthere = n;
            }
            c->fetch_state = FETCH_DONE;
            c->park_since = 0;
            ol_kvs_rekick(s);
            return;
        }
}

int ol_kv_server_store(struct ol_kv_server *s, int tenant, uint32_t ns, struct ol_kv_hash h,
                       const void *key, uint16_t klen, const void *value, uint64_t len,
                       uint64_t sum)
{
    struct ol_kv_loc loc;
    int st = ol_kv_server_reserve(s, tenant, ns, h, key, klen, len, &loc);
    return st == OL_KV_OK ? ol_kv_server_commit(s, tenant, &loc, value, len, sum) : st;
}

int ol_kv_server_reserve(struct ol_kv_server *s, int tenant, uint32_t ns, struct ol_kv_hash h,
                         const void *key, uint16_t klen, uint64_t len, struct ol_kv_loc *loc)
{
    OL_ASSERT(s->has_remote && tenant >= 0 && tenant < s->svc->ntenants);
    return ol_kv_shard_reserve(s->units[tenant].shard, s->rsid[tenant], ns, h, key, klen, len, 0,
                               ol_loop_now_ms(s->loop), loc);
}

int ol_kv_server_commit(struct ol_kv_server *s, int tenant, const struct ol_kv_loc *loc,
                        const void *value, uint64_t len, uint64_t sum)
{
    OL_ASSERT(s->has_remote && tenant >= 0 && tenant < s->svc->ntenants && len <= loc->capacity);
    struct ol_kv_shard *sh = s->units[tenant].shard;
    char *slot = s->svc->tenants[tenant].slab.base + loc->offset;
    /* one pass over the bytes: copied and hashed, or hashed where they are */
    uint64_t got = value ? ol_kv_copy_hash(slot, value, len) : ol_kv_value_hash(slot, len);
    if (sum && got != sum) {
        ol_kv_shard_abort(sh, s->rsid[tenant], loc->slot, loc->gen);
        return OL_KV_CHECKSUM_MISMATCH;
    }
    int st = ol_kv_shard_commit(sh, s->rsid[tenant], loc->slot, loc->gen, len, got);
    ol_kv_shard_pump(sh);
    return st;
}

void ol_kv_server_abort(struct ol_kv_server *s, int tenant, const struct ol_kv_loc *loc)
{
    OL_ASSERT(s->has_remote && tenant >= 0 && tenant < s->svc->ntenants);
    ol_kv_shard_abort(s->units[tenant].shard, s->rsid[tenant], loc->slot, loc->gen);
}

/* A pool read of (ns, h) in tenant's shard, counted (the shard counts it;
 * the published figures are this node's clients'): pinned into *loc, with
 * OL_KV_OK; the caller releases it. */
static int pool_acquire(struct ol_kv_server *s, int tenant, uint32_t ns, struct ol_kv_hash h,
                        struct ol_kv_loc *loc)
{
    OL_ASSERT(s->has_remote && tenant >= 0 && tenant < s->svc->ntenants);
    int st = ol_kv_shard_acquire(s->units[tenant].shard, s->rsid[tenant], ns, h, loc);
    s->units[tenant].peer_hits += st == OL_KV_OK;
    s->units[tenant].peer_misses += st == OL_KV_NOT_FOUND;
    return st;
}

int ol_kv_server_load(struct ol_kv_server *s, int tenant, uint32_t ns, struct ol_kv_hash h,
                      void *buf, uint64_t cap, uint64_t *len, uint64_t *sum)
{
    struct ol_kv_loc loc;
    int st = pool_acquire(s, tenant, ns, h, &loc);
    if (st != OL_KV_OK)
        return st;
    *len = loc.value_len;
    *sum = loc.value_sum;
    if (loc.value_len > cap) {
        st = OL_KV_TOO_LARGE_ST;
    } else {
        memcpy(buf, s->svc->tenants[tenant].slab.base + loc.offset, loc.value_len);
    }
    ol_kv_shard_release(s->units[tenant].shard, s->rsid[tenant], loc.slot, loc.gen);
    return st;
}

int ol_kv_server_grant(struct ol_kv_server *s, int tenant, uint32_t ns, struct ol_kv_hash h,
                       struct ol_kv_grant *g)
{
    struct ol_kv_loc loc;
    int st = pool_acquire(s, tenant, ns, h, &loc);
    if (st != OL_KV_OK)
        return st;
    const struct ol_kv_slab *sl = &s->svc->tenants[tenant].slab;
    *g = (struct ol_kv_grant){.len = loc.value_len, .sum = loc.value_sum, .off = loc.offset,
                              .gen = loc.gen,
                              .hdr_off = sl->sb->hdr_off + (uint64_t)loc.slot * OL_KV_HDR_SIZE};
    ol_kv_shard_release(s->units[tenant].shard, s->rsid[tenant], loc.slot, loc.gen);
    return OL_KV_OK;
}

int ol_kv_server_where(struct ol_kv_server *s, int tenant, uint32_t ns, struct ol_kv_hash h,
                       uint64_t *len)
{
    OL_ASSERT(s->has_remote && tenant >= 0 && tenant < s->svc->ntenants);
    struct ol_kv_shard *sh = s->units[tenant].shard;
    int where = ol_kv_shard_where(sh, ns, h);
    if (where == OL_KV_WHERE_DISK && ol_kv_disk_find(sh->disk, ns, h, len) < 0)
        where = OL_KV_WHERE_MISS;
    return where;
}

int ol_kv_server_promote(struct ol_kv_server *s, int tenant, uint32_t ns, struct ol_kv_hash h)
{
    OL_ASSERT(s->has_remote && tenant >= 0 && tenant < s->svc->ntenants);
    return ol_kv_shard_promote(s->units[tenant].shard, ns, h);
}

/* ---- input ---------------------------------------------------------------------- */

/* Worst-case size of the answer to a frame of `count` items. */
static uint32_t ol_kvc_worst(uint32_t count)
{
    return OL_KV_HDR_LEN + 64 + count * 40u + OL_KV_MAX_MESSAGE + 64;
}

static void ol_kvc_process(struct ol_kv_conn *c)
{
    struct ol_kv_server *s = c->srv;
    c->busy++;
    while (!c->closing && !c->close_after && !c->migrating && !c->parked &&
           c->in_len >= OL_KV_HDR_LEN) {
        struct ol_kv_hdr h;
        int rc = ol_kv_frame_parse_header(c->in, c->in_len, &h);
        if (rc < 0) {
            ol_kvc_proto_error(c, 0, (unsigned)ol_kv_parse_status(rc), "bad frame header");
            break;
        }
        if (ol_kv_hdr_is_response(&h)) {
            ol_kvc_proto_error(c, h.req_id, OL_KV_BAD_REQUEST, "a client sent a response frame");
            break;
        }
        if (!c->authed && ol_kv_frame_len(&h) > OL_KVS_PRE_CAP) {
            ol_kvc_proto_error(c, h.req_id, OL_KV_TOO_LARGE_ST,
                               "a frame before HELLO is over 1024 bytes");
            break;
        }
        uint32_t body_max = h.opcode == OL_KV_OP_PUT ? OL_KVS_MAX_DATA : OL_KVS_MAX_BODY;
        if (h.body_len > body_max || h.count > OL_KVS_MAX_ITEMS) {
            ol_kvc_proto_error(c, h.req_id, OL_KV_TOO_LARGE_ST,
                               "frame over the server's max_body or max_items");
            break;
        }
        if (c->in_len < ol_kv_frame_len(&h))
            break; /* the rest of the frame is on its way */
        if (!c->hello && h.opcode != OL_KV_OP_HELLO) {
            ol_kvc_proto_error(c, h.req_id, OL_KV_UNAUTHORIZED, "HELLO first");
            break;
        }
        if (h.version > c->version) {
            ol_kvc_proto_error(c, h.req_id, OL_KV_UNSUPPORTED_VERSION,
                               "a frame of a protocol version newer than the session's");
            break;
        }
        if (!ol_kvc_out(c)) {
            ol_kvc_close(c);
            break;
        }
        /* Answers must fit: a GET answer (values inline) and a MEMBERS
         * answer (up to 1.2 MB) need an empty output buffer, any other a
         * worst case by item count. */
        if (h.opcode == OL_KV_OP_GET || h.opcode == OL_KV_OP_MEMBERS ? c->out_len != 0
                                     : OL_KVS_OUT_CAP - c->out_len < ol_kvc_worst(h.count))
            break; /* wait for the output to drain */
        struct ol_kv_dec d;
        long b = ol_kv_body_open(&d, &h, c->in + OL_KV_HDR_LEN, h.body_len);
        if (b < 0) {
            ol_kvc_proto_error(c, h.req_id, (unsigned)ol_kv_parse_status((int)b), "malformed frame body");
            break;
        }
        uint32_t flen = (uint32_t)ol_kv_frame_len(&h);
        if (s->has_remote && c->sh &&
            (h.opcode == OL_KV_OP_LOOKUP || (h.opcode == OL_KV_OP_ACQUIRE && c->shm) ||
             h.opcode == OL_KV_OP_GET) &&
            ol_kvc_fetch(c, &d, h.opcode == OL_KV_OP_LOOKUP))
            break; /* parked until its keys came from their homes */
        if (c->sh && c->sh->disk && /* ACQUIRE and GET come after HELLO */
            ((h.opcode == OL_KV_OP_ACQUIRE && c->shm) || h.opcode == OL_KV_OP_GET) &&
            ol_kvc_wait_loads(c, &d))
            break; /* parked until its keys are in RAM */
        c->park_since = 0;
        c->fetch_state = FETCH_NONE;
        c->crc_flag = h.flags & OL_KV_F_BODY_CRC; /* answers mirror the request */
        if (h.opcode == OL_KV_OP_HELLO)
            ol_kvc_handle_hello(c, &h, &d);
        else
            ol_kvc_dispatch(c, &h, &d);
        free(c->there);
        c->there = NULL;
        c->nthere = 0;
        if (c->closing)
            break;
        if (!c->close_after) {
            memmove(c->in, c->in + flen, c->in_len - flen);
            c->in_len -= flen;
        }
    }
    if (!c->closing && !c->migrating && c->in && !c->in_len)
        ol_kvc_in_put(c); /* idle connections hold no buffer */
    if (!c->closing && c->out && !c->out_len && !c->send_inflight) {
        ol_pool_put(&s->outbufs, c->out); /* nor an empty output buffer (after HELLO) */
        c->out = NULL;
    }
    if (c->sh)
        ol_kv_shard_pump(c->sh); /* write behind what this batch committed */
    if (!c->closing) {
        ol_kvc_flush(c);
        if (!c->recv_armed && !c->migrating && !c->close_after && c->in_len < OL_KVS_IN_PAUSE) {
            if (ol_loop_recv(s->loop, &c->recv_op, c->fd) == 0)
                c->recv_armed = true;
            else
                ol_kvc_close(c);
        }
    }
    c->busy--;
    ol_kvc_maybe_free(c);
}

/*
 * Appends n received bytes to c's input and runs its frames. Before HELLO
 * the input is c->pre (a frame there is at most OL_KVS_PRE_CAP bytes, so a
 * HELLO is whole in it); bytes past the HELLO move to a pooled buffer once
 * the token checked. Closes c when a pooled buffer is wanted and none is
 * free, or when the input would pass OL_KVS_IN_CAP.
 */
static void ol_kvc_take(struct ol_kv_conn *c, const char *b, uint32_t n)
{
    struct ol_kv_server *s = c->srv;
    while (n && !c->closing && !c->close_after) {
        if (!c->in && !c->authed)
            c->in = c->pre;
        if (c->authed && (!c->in || c->in == c->pre)) {
            char *in = ol_pool_get(&s->inbufs);
            if (!in) {
                ol_kvc_close(c);
                return;
            }
            if (c->in_len)
                memcpy(in, c->pre, c->in_len);
            c->in = in;
        }
        uint32_t cap = c->in == c->pre ? OL_KVS_PRE_CAP : OL_KVS_IN_CAP;
        uint32_t k = cap - c->in_len < n ? cap - c->in_len : n;
        if (k == 0) { /* cannot happen before HELLO: process refuses bigger frames */
            ol_kvc_close(c);
            return;
        }
        memcpy(c->in + c->in_len, b, k);
        c->in_len += k;
        b += k;
        n -= k;
        /* stop receiving while a whole frame's worth waits */
        if (c->recv_armed && c->in_len >= OL_KVS_IN_PAUSE)
            ol_loop_cancel(s->loop, &c->recv_op);
        if (!c->migrating)
            ol_kvc_process(c);
    }
}

static void ol_on_kv_recv(ol_loop *loop, struct ol_op *op, int res, unsigned flags)
{
    struct ol_kv_conn *c = OL_CONTAINER(op, struct ol_kv_conn, recv_op);
    if (!(flags & OL_CQE_MORE))
        c->recv_armed = false;
    c->busy++;
    if (res > 0) {
        unsigned bid;
        char *b = ol_loop_recv_buf(loop, flags, &bid);
        if (b && !c->closing && !c->close_after)
            ol_kvc_take(c, b, (uint32_t)res);
        if (b)
            ol_loop_buf_release(loop, bid);
    } else if (res == 0 || (res < 0 && res != -ECANCELED && res != -ENOBUFS)) {
        ol_kvc_close(c);
    }
    if (!c->recv_armed && !c->closing) {
        if (c->migrating)
            ol_kvc_start_handover(c);
        else if (res == -ECANCELED || res == -ENOBUFS)
            ol_kvc_process(c); /* re-arms when there is room */
    }
    c->busy--;
    ol_kvc_maybe_free(c);
}

static void ol_kvc_adopted_start(struct ol_kv_conn *c)
{
    c->recv_op.cb = ol_on_kv_recv;
    c->send_op.cb = ol_on_kv_send;
    ol_kvc_process(c); /* arms the receive */
}

/* ---- accept, timers ---------------------------------------------------------------- */

/* Logs the connections closed before HELLO since the last line, at most
 * once per OL_KVS_LOG_MS for the process (the core that claims the slot). */
static void ol_kvs_log_refused(struct ol_kv_server *s, uint64_t now)
{
    struct ol_kv_service *v = s->svc;
    uint64_t cur[3] = {atomic_load(&v->conns_refused), atomic_load(&v->hello_timeouts),
                       atomic_load(&v->unauth_evicted)};
    uint64_t last = atomic_load(&v->log_ms);
    if ((cur[0] == atomic_load(&v->logged[0]) && cur[1] == atomic_load(&v->logged[1]) &&
         cur[2] == atomic_load(&v->logged[2])) ||
        (last && now - last < OL_KVS_LOG_MS) ||
        !atomic_compare_exchange_strong(&v->log_ms, &last, now))
        return;
    ol_warn("kv: connections closed before HELLO since the last report: %llu refused at "
            "accept (a core's slots for new connections taken), %llu at the HELLO deadline "
            "(kv_hello_timeout_ms = %u), %llu to make room (kv_max_unauthenticated = %u per "
            "core and listener); metric openlake_kv_unauthenticated_closed_total",
            (unsigned long long)(cur[0] - atomic_load(&v->logged[0])),
            (unsigned long long)(cur[1] - atomic_load(&v->logged[1])), v->hello_timeout_ms,
            (unsigned long long)(cur[2] - atomic_load(&v->logged[2])), v->max_unauth);
    for (int i = 0; i < 3; i++)
        atomic_store(&v->logged[i], cur[i]);
}

static struct ol_kv_conn *ol_kv_accepted(struct ol_kv_server *s, int fd, bool is_unix)
{
    uint64_t now = ol_loop_now_ms(s->loop);
    struct ol_kv_pend *p = &s->pend[is_unix];
    if (!s->draining && p->n >= s->svc->max_unauth) {
        atomic_fetch_add(&s->svc->unauth_evicted, 1);
        ol_kvc_close(p->head); /* the oldest: a real client sends HELLO at once */
        ol_kvs_log_refused(s, now);
    }
    uint32_t room = OL_KVS_CONNS - OL_KVS_HANDOVER_ROOM -
                    (is_unix || s->unix_fd < 0 ? 0 : OL_KVS_UNIX_ROOM);
    struct ol_kv_conn *c = s->nconns < room ? ol_kvc_new(s, fd, is_unix) : NULL;
    if (!c) {
        close(fd);
        if (!s->draining) {
            atomic_fetch_add(&s->svc->conns_refused, 1);
            ol_kvs_log_refused(s, now);
        }
        return NULL;
    }
    c->accepted_ms = now;
    ol_kvc_pend_add(c);
    c->recv_op.cb = ol_on_kv_recv;
    c->send_op.cb = ol_on_kv_send;
    if (!is_unix) {
        /* answers go out at once: with several frames pipelined, Nagle would
         * hold a small answer until the client's (delayed) ACK of the last */
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    if (ol_loop_recv(s->loop, &c->recv_op, fd) == 0)
        c->recv_armed = true;
    else
        ol_kvc_close(c);
    return c;
}

void ol_kv_server_adopt(struct ol_kv_server *s, int fd)
{
    struct ol_kv_conn *c = ol_kv_accepted(s, fd, false);
    if (c)
        c->ucx = true; /* closed already or not: only MEMBERS reads it */
}

static void ol_on_kv_accept_tcp(ol_loop *loop, struct ol_op *op, int res, unsigned flags)
{
    struct ol_kv_server *s = OL_CONTAINER(op, struct ol_kv_server, tcp_accept);
    if (!(flags & OL_CQE_MORE) && !s->draining && s->tcp_fd >= 0 && res != -ECANCELED)
        ol_loop_accept(loop, &s->tcp_accept, s->tcp_fd);
    if (res >= 0)
        ol_kv_accepted(s, res, false);
}

static void ol_on_kv_accept_unix(ol_loop *loop, struct ol_op *op, int res, unsigned flags)
{
    struct ol_kv_server *s = OL_CONTAINER(op, struct ol_kv_server, unix_accept);
    if (!(flags & OL_CQE_MORE) && !s->draining && s->unix_fd >= 0 && res != -ECANCELED)
        ol_loop_accept(loop, &s->unix_accept, s->unix_fd);
    if (res >= 0)
        ol_kv_accepted(s, res, true);
}

/* Tenant i's shard counters, for other threads to read (service.h): its
 * hits and misses less those of reads for other nodes (ol_kv_server_load). */
static void ol_kvs_publish(struct ol_kv_server *s, int i)
{
    struct ol_kvs_unit *un = &s->units[i];
    struct ol_kv_pub *u = &s->svc->tenants[i].pub[s->core];
    struct ol_kv_shard_stats st;
    ol_kv_shard_stats(un->shard, &st);
    struct ol_kv_shard *sh = un->shard;
    atomic_store_explicit(&u->hits, st.hits - un->peer_hits, memory_order_relaxed);
    atomic_store_explicit(&u->misses, st.misses - un->peer_misses, memory_order_relaxed);
    atomic_store_explicit(&u->ram_bytes, st.value_bytes, memory_order_relaxed);
    if (sh->disk) {
        struct ol_kv_disk_stats ds;
        ol_kv_disk_stats(sh->disk, &ds);
        atomic_store_explicit(&u->disk_bytes, ds.value_bytes, memory_order_relaxed);
    }
}

static void ol_on_kv_tick(ol_loop *loop, struct ol_timer *t)
{
    struct ol_kv_server *s = OL_CONTAINER(t, struct ol_kv_server, tick);
    uint64_t now = ol_loop_now_ms(loop);
    for (int u = 0; u < 2; u++) /* oldest first: stop at the first within its time */
        while (s->pend[u].head && now - s->pend[u].head->accepted_ms >= s->svc->hello_timeout_ms) {
            atomic_fetch_add(&s->svc->hello_timeouts, 1);
            ol_kvc_close(s->pend[u].head);
        }
    ol_kvs_log_refused(s, now);
    for (int i = 0; i < s->svc->ntenants; i++) {
        ol_kv_shard_expire(s->units[i].shard, now);
        ol_kv_shard_pump(s->units[i].shard);
        ol_kvs_publish(s, i);
    }
    ol_kvs_rekick(s); /* parked frames past their wait are answered */
    ol_timer_arm(loop, t, OL_KVS_TICK_MS);
}

/* ---- public ------------------------------------------------------------------------- */

int ol_kv_server_create(ol_loop *loop, int core, struct ol_kv_service *svc,
                        struct ol_kv_server **servers, const char *tcp_addr,
                        struct ol_kv_server **out, char *err, size_t errlen)
{
    struct ol_kv_server *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    int rc;
    s->loop = loop;
    s->core = core;
    s->svc = svc;
    if (!(s->units = calloc((size_t)svc->ntenants, sizeof *s->units))) {
        free(s);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    for (int i = 0; i < svc->ntenants; i++)
        s->units[i] = (struct ol_kvs_unit){.srv = s, .shard = &svc->tenants[i].shards[core]};
    s->servers = servers;
    s->tcp_fd = s->unix_fd = -1;
    s->tcp_accept.cb = ol_on_kv_accept_tcp;
    s->unix_accept.cb = ol_on_kv_accept_unix;
    s->tick.fn = ol_on_kv_tick;
    if ((rc = ol_pool_init(&s->conns, sizeof(struct ol_kv_conn), OL_KVS_CONNS)) < 0 ||
        (rc = ol_pool_init(&s->inbufs, OL_KVS_IN_CAP, OL_KVS_BUFS)) < 0 ||
        (rc = ol_pool_init(&s->outbufs, OL_KVS_OUT_BUF, OL_KVS_BUFS)) < 0) {
        snprintf(err, errlen, "kv: cannot reserve connection pools");
        goto fail;
    }
    if ((rc = ol_net_listen(tcp_addr, 1, &s->port, err, errlen)) < 0)
        goto fail;
    s->tcp_fd = rc;
    if (core == 0) {
        if ((rc = ol_net_listen_unix(svc->sock_path, svc->sock_mode, err, errlen)) < 0)
            goto fail;
        s->unix_fd = rc;
        ol_loop_accept(loop, &s->unix_accept, s->unix_fd);
    }
    ol_loop_accept(loop, &s->tcp_accept, s->tcp_fd);
    ol_timer_arm(loop, &s->tick, OL_KVS_TICK_MS);
    for (int i = 0; i < svc->ntenants; i++)
        if (svc->tenants[i].disks)
            ol_kv_disk_attach(svc->tenants[i].disks[core], loop, ol_kvs_disk_done, &s->units[i]);
    servers[core] = s;
    *out = s;
    return 0;
fail:
    ol_kv_server_destroy(s);
    return rc;
}

void ol_kv_server_destroy(struct ol_kv_server *s)
{
    if (!s)
        return;
    if (s->tcp_fd >= 0)
        close(s->tcp_fd);
    if (s->unix_fd >= 0) {
        close(s->unix_fd);
        unlink(s->svc->sock_path);
    }
    ol_pool_exit(&s->conns);
    ol_pool_exit(&s->inbufs);
    ol_pool_exit(&s->outbufs);
    free(s->rsid);   /* its sessions go with the shards */
    free(s->units);
    free(s);
}

void ol_kv_server_drain(struct ol_kv_server *s)
{
    if (s->draining)
        return;
    s->draining = true; /* the tick keeps running: it pumps writes behind until idle */
    ol_loop_cancel(s->loop, &s->tcp_accept);
    close(s->tcp_fd);
    s->tcp_fd = -1;
    if (s->unix_fd >= 0) {
        ol_loop_cancel(s->loop, &s->unix_accept);
        close(s->unix_fd);
        s->unix_fd = -1;
        unlink(s->svc->sock_path);
    }
    /* KV sessions are long-lived: close each once its answers are sent. */
    for (struct ol_kv_conn *c = s->list, *next; c; c = next) {
        next = c->next;
        if (c->migrating)
            continue;
        c->busy++;
        if (c->out_sent == c->out_len)
            ol_kvc_close(c);
        else
            c->close_after = true;
        c->busy--;
        ol_kvc_maybe_free(c);
    }
}

void ol_kv_server_close_all(struct ol_kv_server *s)
{
    for (struct ol_kv_conn *c = s->list, *next; c; c = next) {
        next = c->next;
        if (!c->migrating)
            ol_kvc_close(c);
    }
}

uint32_t ol_kv_server_conns(const struct ol_kv_server *s) { return s->nconns; }
bool ol_kv_server_idle(const struct ol_kv_server *s)
{
    if (s->nconns)
        return false;
    for (int i = 0; i < s->svc->ntenants; i++)
        if (ol_kv_shard_disk_busy(s->units[i].shard))
            return false;
    return true;
}
int ol_kv_server_port(const struct ol_kv_server *s) { return s->port; }
