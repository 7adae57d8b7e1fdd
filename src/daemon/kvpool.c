/*
 * kvpool.c - openlaked's side of the cluster's KV pool: every KV block key
 * has cluster.kv_replicas home nodes (cluster/place.h over the KV members
 * of the view), and this node fetches the keys its clients miss from their
 * homes, one home after another (for a LOOKUP it only asks whether they
 * have them: KV_GET with EXISTS, OL_KP_EXISTS_KEYS keys a call, no value
 * read or moved), and sends a copy of each value its
 * clients store to each of its homes that is another node (docs/cluster.md
 * "The KV pool", wire formats in docs/node-protocol.md).
 *
 * Owns: the placement snapshot the cores read (an atomic pointer; a
 * replaced snapshot is freed OL_KP_GRACE_MS later, long after any core's
 * use of it ended: a core reads it within one callback), and beside it the
 * same KV members with their kv_addr, which a client asks for (MEMBERS,
 * docs/kv-protocol.md) to place keys itself; the hooks of the
 * KV servers (kv/server.h, struct ol_kv_remote), which run on the cores
 * and only copy and post; the net loop's half: KV_GET and KV_PUT calls to
 * homes, and the handlers that serve them here by posting to the core
 * that owns each key's shard (which reads a key on its disk tier only back
 * into RAM first; an EXISTS call reads nothing).
 *
 * Copies: a value a home serves is copied out of its shard once (the
 * reply references it: ol_rpc_reply_ref); a value fetched stays in the
 * reply it came in (ol_rpc_keep) until its core stores it; a push is
 * copied once on its core and sent by reference (ol_rpc_call_ref).
 *
 * Threads: hooks and stores/loads on the data cores; everything with the
 * node RPC on the net loop; messages between them (ol_loop_post), each
 * counted in `inflight` until its receiver is done with it. Shutdown:
 * ol_daemon_kvpool_close (at SIGTERM) stops new work (fetches and pushes
 * refused, requests of other nodes answered SHUTTING_DOWN); the cores keep running
 * until ol_daemon_kvpool_quiet (every message handled: bounded by the calls'
 * deadlines), so no message is ever posted to a loop that stopped.
 *
 * Bounds: fetches in flight per core OL_KP_FETCHES, push bytes from a core
 * not yet handed to the node RPC OL_KP_PUSH_BYTES, every home's copy
 * counted (a push over it is dropped and counted; one that finds its
 * home's window full waits for room, in order, until its deadline); a
 * fetch's calls all end by its deadline (each gets an equal share, with
 * its keys' homes not yet asked, of what is left), each key asked of each
 * home at most once, and once more when its value did not fit (below); a
 * KV_GET call asks at most OL_KP_GET_KEYS keys (a LOOKUP's EXISTS call
 * OL_KP_EXISTS_KEYS, of OL_KP_EXISTS_BYTES at most), as many values as fit its
 * reply going by the last value length a home said to the fetch, and takes a reply of
 * a quarter of the node RPC's reply window (OL_KP_REPLY_MAX at most; one
 * value larger than that by the same length, one key with room for it); a
 * call that finds the home's window full waits (kp_later) until there is
 * room or the fetch's deadline; the values that did not fit a reply are
 * asked again, as many a call as fit (one larger alone, with room for it,
 * when the window has room and it is at most what a home reads for one
 * reply, 2 x OL_KP_REPLY_MAX), ahead of the fetch's calls not yet sent.
 * Serving other nodes: at most OL_KP_SERVE_BYTES of values read for
 * replies at once, from the request's arrival until its reply was sent
 * (or dropped), disk reads in flight for them included (more: BUSY);
 * a key on the disk tier only is read into RAM on the core that owns it
 * (kv/server.h ol_kv_server_promote, as a local GET reads it), at most
 * OL_KP_DISK_READS reads of one request in flight per core, and the
 * request waits for them (kp_core.disk_wait) until half of
 * cluster.kv_timeout_ms after it came: then what did not land is a miss,
 * so the reply goes out before the caller's deadline. A home that is
 * down, slow or partitioned: its calls fail or time out within
 * cluster.kv_timeout_ms, its keys are asked of their next home (a home
 * whose connection is down is asked last), or misses, its pushes dropped.
 *
 * Remote reads (RMA, over UCX with rdma.backend = "ucx", off by default;
 * docs/node-protocol.md "Remote reads"): attach maps the default tenant's
 * slab for other nodes' reads (ol_rpc_map); a KV_GET to a home whose
 * region this node has asks for grants (flag GRANT), and the home answers
 * each key of its default tenant in RAM with where it is (kv/server.h
 * ol_kv_server_grant: touched as a read, nothing pinned). The fetch's
 * core reserved a slot of its session's value size for each key first
 * (kp_fetch); the fetcher reads each granted value straight into it, or,
 * larger than the slot, into a buffer of its own (struct kp_rma), then
 * the home's slot header: magic, generation, length, sum and key as
 * granted, else (or a read that failed) the key is asked again once as a
 * plain KV_GET, then a miss. The core checks the XXH3-64 in the slot and
 * commits it (kp_fetch_back; a copy is copied into the slot, a key that
 * did not come gives its slot back). Bounds: OL_KP_RMA_BYTES of buffers
 * at once on the net loop (past it: copies); a fetch's reads end by its
 * deadline (kp_rma_timeout: the rest are misses, each kp_rma kept with
 * its buffer, or its slot, until its get's event; a slot then goes back
 * through its core: kp_rma_abort).
 */
#include "daemon/daemon.h"

#include "base/assert.h"
#include "base/fault.h"
#include "base/le.h"
#include "base/log.h"
#include "cluster/place.h"
#include "kv/proto.h"
#include "kv/server.h"
#include "kv/service.h"
#include "kv/slab.h"
#include "net/rpc.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OL_KP_GRACE_MS   10000
#define OL_KP_FETCHES    64
#define OL_KP_PUSH_BYTES (64ull << 20)
#define OL_KP_REPLY_MAX  (4u << 20)
#define OL_KP_GET_KEYS   16
#define OL_KP_SERVE_BYTES (256ull << 20)
#define OL_KP_DISK_READS 16
#define OL_KP_RMA_BYTES  (256ull << 20)
#define OL_KP_EXISTS_KEYS 512    /* keys a call when asking only whether homes have them */
#define OL_KP_EXISTS_BYTES (32u << 10) /* and their bytes (2 + key_len each), under the
                                          smallest window (cluster.rpc_window_bytes) */
#define OL_KP_CALL_KEYS  OL_KP_EXISTS_KEYS /* the most keys of any KV_GET call */
#define OL_KP_GRANT      1u      /* KV_GET flags: grants where the home can */
#define OL_KP_EXISTS     2u      /* KV_GET flags: whether the home has each key, no values */
#define OL_KP_ST_GRANT   256u    /* a KV_GET reply entry: granted (40 bytes) */
#define OL_KP_GRANT_LEN  40u

enum { OP_KV_GET = 1, OP_KV_PUT = 2 };

struct kp_core {
    struct ol_kvpool *kp;
    int core;
    _Atomic uint32_t fetches;       /* fetch requests in flight */
    _Atomic uint64_t push_bytes;    /* push bytes in flight */
    /* the core's thread only: requests of other nodes waiting for disk
     * reads of this core, in order, and the timer of their deadlines */
    struct kp_part *disk_wait, *disk_wait_tail;
    struct ol_timer wake;
};

/* The KV members of one placement snapshot, as MEMBERS answers them. */
struct kp_members {
    int64_t revision;
    int n;
    struct kp_addr {
        int64_t id;
        uint64_t weight;
        uint16_t len, ulen;
        char addr[OL_CONFIG_ADDR_LEN];      /* its kv_addr */
        char uaddr[OL_CONFIG_ADDR_LEN];     /* its kv_ucx_addr */
    } m[];
};

struct kp_retired {
    struct kp_retired *next;
    struct ol_place *p;
    struct kp_members *mb;
    uint64_t at_ms;
};

struct ol_kvpool {
    struct ol_daemon *d;
    int64_t self;
    uint32_t timeout_ms;
    int replicas;                       /* cluster.kv_replicas: homes per key */
    uint32_t reply_max, reply_window;   /* of a KV_GET call; the RPC's reply window */
    _Atomic int closing, ready;
    _Atomic int64_t inflight;           /* messages between the loops */
    _Atomic uint64_t serve_bytes;       /* values read for replies to other nodes */
    struct kp_fetch *waiting;           /* net loop: fetches with calls waiting for room */
    bool rma;                           /* net loop: this node asks homes for grants */
    bool granting;                      /* net loop: tenant 0's slab is mapped: grants */
    uint64_t rma_held;                  /* net loop: value bytes of gets not yet ended */
    struct kp_push *push_head, *push_tail; /* net loop: pushes waiting for room */
    struct ol_timer retry;              /* net loop: sends them */
    _Atomic(struct ol_place *) place;
    _Atomic(struct kp_members *) members; /* placed with `place`, for clients */
    struct kp_retired *retired;     /* net loop only */
    struct kp_core *cores;
    struct ol_place_member *kbuf;
    _Atomic uint64_t fetched_keys, fetch_misses, fetch_failures, pushes, push_drops,
        push_failures, served_gets, served_puts, served_disk_keys,
        fetched_later, rma_keys, rma_bytes, rma_retries, served_grants, lookup_hits,
        rma_direct_keys,
        served_exists;
};

_Static_assert(OL_PLACE_MAX_REPLICAS >= 16, "cluster.kv_replicas goes up to 16");

/* ---- placement ---------------------------------------------------------------- */

/* Core: the homes of h other than this node, best first, into out (room
 * for kp->replicas ids): how many (0 without a placement, or when this
 * node is h's only home). */
static int kp_homes(struct ol_kvpool *kp, struct ol_kv_hash h, int64_t *out)
{
    struct ol_place *p = atomic_load_explicit(&kp->place, memory_order_acquire);
    int64_t all[OL_PLACE_MAX_REPLICAS];
    int n = p ? ol_place_homes(p, h, kp->replicas, all) : 0, m = 0;
    for (int i = 0; i < n; i++)
        if (all[i] != kp->self)
            out[m++] = all[i];
    return m;
}

static int64_t kp_home_of(void *arg, struct ol_kv_hash h)
{
    struct kp_core *kc = arg;
    int64_t homes[OL_PLACE_MAX_REPLICAS];
    return kp_homes(kc->kp, h, homes) > 0 ? homes[0] : -1;
}

/* Core: a MEMBERS answer (kv/server.h ol_kv_remote.members): the members'
 * kv_addr, or their kv_ucx_addr for a client on the UCX listener. */
static int kp_members_enc(void *arg, struct ol_kv_enc *e, bool ucx)
{
    struct kp_core *kc = arg;
    struct kp_members *mb = atomic_load_explicit(&kc->kp->members, memory_order_acquire);
    if (!mb)
        return 0; /* no view yet: answered as a node in no cluster */
    struct ol_kv_members_head h = {.revision = mb->revision,
                                   .replicas = (uint16_t)kc->kp->replicas};
    int rc = ol_kv_enc_members_head(e, &h);
    for (int i = 0; i < mb->n && rc == 0; i++)
        rc = ucx ? ol_kv_enc_member(e, mb->m[i].id, mb->m[i].weight, mb->m[i].uaddr, mb->m[i].ulen)
                 : ol_kv_enc_member(e, mb->m[i].id, mb->m[i].weight, mb->m[i].addr, mb->m[i].len);
    return rc;
}

/* The KV members kbuf[0, nk) (in the order of m, ol_place_kv_members) with
 * their records' kv_addr: a new kp_members, or NULL (out of memory). */
static struct kp_members *kp_members_make(const struct ol_place_member *k, int nk,
                                          const struct ol_member *m, int n, int64_t revision)
{
    struct kp_members *mb = malloc(sizeof *mb + (size_t)nk * sizeof mb->m[0]);
    if (!mb)
        return NULL;
    mb->revision = revision;
    mb->n = nk;
    for (int i = 0, j = 0; i < nk; i++) {
        while (j < n && m[j].id != k[i].id)
            j++;
        OL_ASSERT(j < n); /* k is a subsequence of m */
        size_t len = strnlen(m[j].kv_addr, sizeof m[j].kv_addr);
        size_t ulen = strnlen(m[j].kv_ucx_addr, sizeof m[j].kv_ucx_addr);
        mb->m[i] = (struct kp_addr){.id = k[i].id, .weight = k[i].weight,
                                    .len = (uint16_t)(len > OL_KV_MAX_ADDR ? 0 : len),
                                    .ulen = (uint16_t)(ulen > OL_KV_MAX_ADDR ? 0 : ulen)};
        memcpy(mb->m[i].addr, m[j].kv_addr, mb->m[i].len);
        memcpy(mb->m[i].uaddr, m[j].kv_ucx_addr, mb->m[i].ulen);
    }
    return mb;
}

void ol_daemon_kvpool_view(struct ol_daemon *d, const struct ol_member *m, int n,
                           int64_t revision, uint64_t now_ms)
{
    struct ol_kvpool *kp = d->kvpool;
    if (!kp)
        return;
    int nk = ol_place_kv_members(m, n, kp->kbuf);
    struct ol_place *p = NULL;
    struct kp_members *mb = kp_members_make(kp->kbuf, nk, m, n, revision);
    if (mb && ol_place_create(kp->kbuf, nk, revision, &p) == 0) {
        struct kp_retired *r = malloc(sizeof *r);
        if (r) {
            struct ol_place *old = atomic_exchange_explicit(&kp->place, p, memory_order_acq_rel);
            struct kp_members *omb =
                atomic_exchange_explicit(&kp->members, mb, memory_order_acq_rel);
            *r = (struct kp_retired){kp->retired, old, omb, now_ms};
            kp->retired = r;
        } else { /* the old ones stay: swapped, they could not be freed later */
            ol_place_destroy(p);
            free(mb);
        }
    } else {
        free(mb);
    }
    for (struct kp_retired **pp = &kp->retired; *pp;) {
        struct kp_retired *r = *pp;
        if (now_ms - r->at_ms >= OL_KP_GRACE_MS) {
            *pp = r->next;
            ol_place_destroy(r->p);
            free(r->mb);
            free(r);
        } else {
            pp = &r->next;
        }
    }
}

/* ---- fetch: this node's clients miss keys homed elsewhere ------------------------ */

struct kp_key {
    struct ol_kv_hash h;
    int64_t home;                   /* fetch: the home asked now (kp_next_home) */
    uint16_t klen;
    uint32_t koff;                  /* in the request's bytes */
    uint8_t *value;                 /* fetched: its own (malloc), or in one of its
                                       fetch's replies (in_reply); or NULL */
    uint64_t len, sum;
    bool there;                     /* an exists fetch: a home has it */
    bool in_reply;
    /* remote reads straight into this slab (default tenant): */
    bool reserved;                  /* core: dst is a slot reserved for it */
    bool filled;                    /* net loop: its value was read into dst, checked */
    bool busy;                      /* net loop: a read into dst outlived the fetch (its
                                       kp_rma gives dst back when it ends) */
    struct ol_kv_loc dst;
};

/* A KV_GET reply kept by a fetch (ol_rpc_keep): its keys' values point
 * into it, so they are not copied until the core stores them. */
struct kp_reply {
    struct kp_reply *next;
    uint8_t *bytes;
};

/* A value to send home (KV_PUT), from a core to the net loop. */
struct kp_push {
    struct ol_msg msg;
    struct kp_core *kc;
    struct kp_push *next;           /* net loop: waiting for room in its home's window */
    uint64_t deadline_ms;
    int64_t home;                   /* one of the key's homes, placed by the core */
    uint32_t len;                   /* of payload */
    uint8_t payload[];              /* the KV_PUT payload, ready */
};

static int kp_push_try(struct ol_kvpool *kp, struct kp_push *u, uint64_t now);

/* A KV_GET that found the peer's window full (-EAGAIN): sent when it has
 * room, or given up at the fetch's deadline. */
struct kp_later {
    struct kp_later *next;
    int64_t home;
    bool plain;                     /* no grants: the values themselves */
    uint32_t reply_max, n;
    uint32_t idx[];                 /* [n] */
};

struct kp_fetch {
    struct ol_msg msg;
    struct kp_core *kc;
    struct kp_later *later, *later_tail;  /* net loop: calls waiting for room */
    struct kp_later *later_first;         /* the last of the asks again at the front of
                                             later (values that did not fit), or NULL */
    uint32_t hint;                        /* the last value length a home said to this
                                             fetch (0: none yet) */
    bool exists;                          /* whether the homes have the keys, no values */
    struct kp_fetch *wnext;               /* on kp->waiting while it has some */
    bool waiting;
    uint64_t deadline_ms;
    int tenant;
    uint64_t token;
    uint32_t n, pending;
    uint16_t nslen;
    uint32_t nsoff;
    uint32_t r;                     /* room for homes per key: kp->replicas */
    struct kp_key *k;               /* [n], after the struct */
    int64_t *homes;                 /* [n * r]: key i's homes but this node, best first */
    uint16_t *asked;                /* [n]: bit j set once homes[i * r + j] was asked */
    uint32_t *idx;                  /* [n]: scratch of kp_fetch_go */
    uint8_t *nh;                    /* [n]: how many homes key i has */
    uint8_t *bytes;                 /* namespace and keys */
    struct kp_rma *rmas;            /* net loop: its remote reads not ended */
    struct ol_timer rma_timer;      /* net loop: at the deadline, they are misses */
    struct kp_reply *replies;       /* kept: freed once the core stored their values */
};

/* A remote read of a granted value (net loop): the value's bytes into
 * buf, then its slot header's first 16 bytes. Counted in its fetch's
 * pending until it ends, or until the fetch's deadline, when the fetch
 * lets go of it (f = NULL): it stays, and its buffer, until its get's
 * event, which frees it. */
struct kp_rma {
    struct ol_kvpool *kp;
    struct kp_fetch *f;
    struct kp_rma *next, *prev;     /* f->rmas */
    uint32_t i;                     /* the key's index in f */
    int64_t home;
    uint64_t len, sum, off, gen, hdr_off;
    bool hdr_step;                  /* the header's get is the one outstanding */
    uint8_t hdr[56];                /* the slot header's bytes 0..55 (docs/kv-slab.md) */
    uint8_t *buf;                   /* the key's reserved slot (direct), or its own */
    bool direct;                    /* buf is the slot of f->k[i].dst */
    int core;                       /* direct: the core that reserved it */
    struct ol_kv_loc dst;           /* direct: the slot, given back by the core when
                                       the read outlived its fetch (abort_msg) */
    struct ol_msg abort_msg;
};

/* One KV_GET call: which of the fetch's keys it asked. */
struct kp_get {
    struct kp_fetch *f;
    int64_t home;
    bool grant;                     /* it asked for grants */
    bool again;                     /* an ask again (plain): a value that did not fit
                                       it goes on to its next home */
    uint32_t reply_max;
    uint32_t n;
    uint32_t idx[];                 /* [n] */
};

static void kp_fetch_back(ol_loop *loop, struct ol_msg *m);

/* The largest reply of one value alone a fetch asks for: the RPC's reply
 * window, and what a home reads for one reply (2 x OL_KP_REPLY_MAX). */
static uint64_t kp_alone_max(const struct ol_kvpool *kp)
{
    uint64_t home = 20 + 2 * (uint64_t)OL_KP_REPLY_MAX;
    return kp->reply_window < home ? kp->reply_window : home;
}

static void kp_fetch_end(struct ol_kvpool *kp, struct kp_fetch *f)
{
    OL_ASSERT(!f->rmas);
    ol_timer_cancel(ol_daemon_net_loop(kp->d), &f->rma_timer);
    f->msg.fn = kp_fetch_back;   /* the fetch's count in inflight goes with it */
    ol_loop_post(kp->d->cores[f->kc->core].loop, &f->msg);
}

static int kp_get_call(struct ol_kvpool *kp, struct kp_fetch *f, int64_t home,
                       const uint32_t *idx, uint32_t n, uint32_t reply_max, bool plain);
static int kp_get_or_later(struct ol_kvpool *kp, struct kp_fetch *f, int64_t home,
                           const uint32_t *idx, uint32_t n, uint32_t reply_max, bool plain);
static void kp_ask(struct ol_kvpool *kp, struct kp_fetch *f, uint32_t *idx, uint32_t m);

static void kp_rma_free(struct kp_rma *r)
{
    if (!r->direct) {
        r->kp->rma_held -= r->len;
        free(r->buf);
    }
    free(r);
}

/* Core: a read into a reserved slot that outlived its fetch ended: the
 * slot is given back. */
static void kp_rma_abort(ol_loop *loop, struct ol_msg *m)
{
    (void)loop;
    struct kp_rma *r = (struct kp_rma *)((char *)m - offsetof(struct kp_rma, abort_msg));
    ol_kv_server_abort(r->kp->d->kv_servers[r->core], 0, &r->dst);
    free(r);
}

/* r is over: its value handed to its key (ok), or asked of its home once
 * more as a plain KV_GET (then a miss); its count in f's pending goes. */
static void kp_rma_end(struct kp_rma *r, bool ok)
{
    struct ol_kvpool *kp = r->kp;
    struct kp_fetch *f = r->f;
    if (r->prev)
        r->prev->next = r->next;
    else
        f->rmas = r->next;
    if (r->next)
        r->next->prev = r->prev;
    struct kp_key *k = &f->k[r->i];
    if (ok) {
        if (r->direct) {
            k->filled = true;      /* in its slot: the core checks and commits it */
        } else {
            k->value = r->buf;
            k->in_reply = false;
            r->buf = NULL;
        }
        k->len = r->len;
        k->sum = r->sum;
        atomic_fetch_add(&kp->rma_keys, 1);
        atomic_fetch_add(&kp->rma_bytes, r->len);
        if (k->home != f->homes[(size_t)r->i * f->r])
            atomic_fetch_add(&kp->fetched_later, 1);
    } else {
        atomic_fetch_add(&kp->rma_retries, 1);
        uint64_t alone = r->len + 20;
        if (alone > kp_alone_max(kp) || atomic_load(&kp->closing) ||
            kp_get_or_later(kp, f, r->home, &r->i, 1, (uint32_t)alone, true) != 0)
            atomic_fetch_add(&kp->fetch_misses, 1);
    }
    kp_rma_free(r);
    if (--f->pending == 0)
        kp_fetch_end(kp, f);
}

/* A get of r ended (res 0 or -errno): the header's after the value's;
 * then the seqlock's check (docs/kv-slab.md): the slot's magic, its
 * generation even and the one granted (a freed slot's is odd: retired),
 * committed, and the value's length, XXH3-64 and key hash those granted,
 * so the value read was the key's whole. Its XXH3-64 is checked again as
 * the core stores it. */
static bool kp_rma_hdr_ok(const struct kp_rma *r, struct ol_kv_hash h)
{
    const uint8_t *b = r->hdr;
    uint64_t gen = ol_le_ld64(b + 8);
    return ol_le_ld32(b) == OL_KV_SLOT_MAGIC && gen == r->gen && !(gen & 1) &&
           ol_le_ld64(b + 16) == r->len && ol_le_ld64(b + 24) == r->sum &&
           (ol_le_ld32(b + 36) & OL_KV_SLOT_COMMITTED) && ol_le_ld64(b + 40) == h.lo &&
           ol_le_ld64(b + 48) == h.hi;
}

static void kp_rma_step(void *arg, int res)
{
    struct kp_rma *r = arg;
    if (!r->f) { /* its fetch gave up on it at its deadline */
        if (r->direct && !atomic_load(&r->kp->closing)) {
            r->abort_msg.fn = kp_rma_abort;   /* its slot, now written no more */
            ol_loop_post(r->kp->d->cores[r->core].loop, &r->abort_msg);
            return;
        }
        kp_rma_free(r);   /* (closing: the cores stop; the slab goes with them) */
        return;
    }
    res = OL_FAULT(OL_FAULT_RMA, OL_FAULT_OP_READ, 0, res);
    if (res == 0 && !r->hdr_step) {
        r->hdr_step = true;
        struct ol_rpc *rpc = ol_daemon_net_rpc(r->kp->d);
        res = rpc ? ol_rpc_get(rpc, r->home, r->hdr, sizeof r->hdr, r->hdr_off, kp_rma_step, r)
                  : -ECANCELED;
        if (res == 0)
            return;
    }
    kp_rma_end(r, res == 0 && kp_rma_hdr_ok(r, r->f->k[r->i].h));
}

/* Net loop: f's deadline with remote reads not ended: each a miss; each
 * stays until its get's event (its buffer may still be written). */
static void kp_rma_timeout(ol_loop *loop, struct ol_timer *t)
{
    (void)loop;
    struct kp_fetch *f = (struct kp_fetch *)((char *)t - offsetof(struct kp_fetch, rma_timer));
    struct ol_kvpool *kp = f->kc->kp;
    uint32_t n = 0;
    while (f->rmas) {
        struct kp_rma *r = f->rmas;
        f->rmas = r->next;
        if (r->direct)
            f->k[r->i].busy = true;   /* its slot is the read's until it ends */
        r->f = NULL;
        n++;
    }
    atomic_fetch_add(&kp->fetch_misses, n);
    f->pending -= n;
    if (n && f->pending == 0)
        kp_fetch_end(kp, f);
}

/* Net loop: key i of f, granted by home (entry e, 40 bytes): read from
 * home's region into a buffer of its own. 0, or -errno (not started: asked
 * again as a plain KV_GET by the caller). */
static int kp_rma_start(struct ol_kvpool *kp, struct kp_fetch *f, int64_t home, uint32_t i,
                        const uint8_t *e)
{
    struct ol_rpc *rpc = ol_daemon_net_rpc(kp->d);
    uint64_t len = ol_le_ld32(e + 4);
    const struct kp_key *k = &f->k[i];
    bool direct = k->reserved && len <= k->dst.capacity;
    if (!rpc || (!direct && kp->rma_held + len > OL_KP_RMA_BYTES))
        return -EAGAIN;
    if (ol_le_ld64(e + 8) == 0)
        return -EINVAL;   /* no checksum to check the read with: as a copy */
    struct kp_rma *r = calloc(1, sizeof *r);
    uint8_t *buf = !r ? NULL
                   : direct ? (uint8_t *)kp->d->kv->tenants[0].slab.base + k->dst.offset
                            : malloc(len ? len : 1);
    if (!buf) {
        free(r);
        return -ENOMEM;
    }
    *r = (struct kp_rma){.kp = kp, .f = f, .i = i, .home = home, .len = len,
                         .sum = ol_le_ld64(e + 8), .off = ol_le_ld64(e + 16),
                         .gen = ol_le_ld64(e + 24), .hdr_off = ol_le_ld64(e + 32), .buf = buf,
                         .direct = direct, .core = f->kc->core, .dst = k->dst};
    if (!direct)
        kp->rma_held += len;
    int rc = len ? ol_rpc_get(rpc, home, buf, len, r->off, kp_rma_step, r)
                 : ol_rpc_get(rpc, home, r->hdr, sizeof r->hdr, r->hdr_off, kp_rma_step, r);
    r->hdr_step = len == 0;
    if (rc != 0) {
        kp_rma_free(r);
        return rc;
    }
    r->next = f->rmas;
    if (f->rmas)
        f->rmas->prev = r;
    f->rmas = r;
    f->pending++;
    if (!ol_timer_armed(&f->rma_timer)) {
        uint64_t now = ol_loop_now_ms(ol_daemon_net_loop(kp->d));
        f->rma_timer.fn = kp_rma_timeout;
        ol_timer_arm(ol_daemon_net_loop(kp->d), &f->rma_timer,
                     f->deadline_ms > now ? f->deadline_ms - now : 0);
    }
    return 0;
}

/* KV_GET reply: u32 n, then per key: u16 status, u16 0, u32 len, u64 sum,
 * and the value; or (a grant) u16 OL_KP_ST_GRANT, u16 0, u32 len, u64
 * sum, u64 the value's offset, u64 its slot's generation, u64 its slot
 * header's offset, all in the home's region. */
static void kp_get_done(void *arg, int rc, const uint8_t *p, uint32_t len)
{
    struct kp_get *g = arg;
    struct kp_fetch *f = g->f;
    struct ol_kvpool *kp = f->kc->kp;
    uint32_t again[OL_KP_CALL_KEYS], na = 0, i = 0;  /* keys for their next home */
    uint32_t big[OL_KP_GET_KEYS], blen[OL_KP_GET_KEYS], nb = 0;  /* to ask again */
    if (rc != OL_RPC_OK || len < 4 || ol_le_ld32(p) != g->n) {
        atomic_fetch_add(&kp->fetch_failures, 1);
    } else if (f->exists) {
        /* per key 16 bytes: OK (the home has it) or NOT_FOUND (its next home) */
        for (uint32_t off = 4; i < g->n && len - off >= 16; i++, off += 16) {
            uint16_t st = ol_le_ld16(p + off);
            if (st != OL_KV_OK && st != OL_KV_NOT_FOUND)
                break;  /* not an EXISTS answer: the rest as a failed call */
            if (st == OL_KV_OK)
                f->k[g->idx[i]].there = true;
            else
                again[na++] = g->idx[i];
        }
        if (i < g->n)
            atomic_fetch_add(&kp->fetch_failures, 1);
    } else {
        uint32_t off = 4;
        struct kp_reply *kept = NULL;
        for (; i < g->n; i++) {
            if (len - off < 16)
                break;
            uint16_t st = ol_le_ld16(p + off);
            uint32_t vlen = ol_le_ld32(p + off + 4);
            uint64_t sum = ol_le_ld64(p + off + 8);
            if (st == OL_KP_ST_GRANT) {
                if (!g->grant || len - off < OL_KP_GRANT_LEN)
                    break; /* not asked for, or short: the rest as a failed call */
                uint32_t one = g->idx[i];
                uint64_t alone = (uint64_t)vlen + 20;   /* as a copy, with room for it */
                if (kp_rma_start(kp, f, g->home, one, p + off) != 0 &&
                    (alone > kp_alone_max(kp) ||
                     kp_get_or_later(kp, f, g->home, &one, 1, (uint32_t)alone, true) != 0))
                    again[na++] = one;
                off += OL_KP_GRANT_LEN;
                continue;
            }
            off += 16;
            if (st == OL_KV_OK || st == OL_KV_TOO_LARGE_ST)
                f->hint = vlen;
            uint64_t alone = (uint64_t)vlen + 20;   /* a reply of this value alone */
            if (st == OL_KV_TOO_LARGE_ST && alone > kp_alone_max(kp)) {
                /* more than any home reads for one reply: a miss, at every home */
                atomic_fetch_add(&kp->fetch_misses, 1);
                continue;
            }
            if (st == OL_KV_TOO_LARGE_ST && !g->again && (g->n > 1 || alone > g->reply_max) &&
                !atomic_load(&kp->closing)) {
                /* did not fit with the others: asked again (below); a value
                 * that did not fit its ask again (it grew) goes to its next
                 * home, so each key is asked again once a home */
                big[nb] = g->idx[i];
                blen[nb++] = vlen;
                continue;
            }
            if (st != OL_KV_OK) {
                again[na++] = g->idx[i];
                continue;
            }
            if (vlen > len - off)
                break;
            if (!kept) {   /* the values stay where they came, in the reply */
                struct kp_reply *rp = malloc(sizeof *rp);
                if (rp && (rp->bytes = ol_rpc_keep(p))) {
                    rp->next = f->replies;
                    f->replies = rp;
                    kept = rp;
                } else {
                    free(rp);
                    break;  /* no memory: the rest as a failed call */
                }
            }
            struct kp_key *k = &f->k[g->idx[i]];
            k->value = kept->bytes + off;
            k->in_reply = true;
            k->len = vlen;
            k->sum = sum;
            if (k->home != f->homes[(size_t)g->idx[i] * f->r])
                atomic_fetch_add(&kp->fetched_later, 1);
            off += vlen;
        }
    }
    while (i < g->n)                    /* not answered: a failed call, a short reply */
        again[na++] = g->idx[i++];
    /* The values that did not fit, asked again in order, as many a call as
     * fit in a KV_GET's reply (one larger than that alone, with room for
     * it), ahead of the calls not yet sent (kp_get_or_later). */
    for (uint32_t b = 0; b < nb;) {
        uint64_t room = 4 + 16 + (uint64_t)blen[b];
        uint32_t e = b + 1;
        while (e < nb && room + 16 + blen[e] <= kp->reply_max)
            room += 16 + (uint64_t)blen[e++];
        if (kp_get_or_later(kp, f, g->home, big + b, e - b, (uint32_t)room, true) != 0)
            for (uint32_t j = b; j < e; j++)
                again[na++] = big[j];
        b = e;
    }
    free(g);
    if (na)
        kp_ask(kp, f, again, na);
    if (kp->waiting || kp->push_head)   /* room in a peer's window: the waiting go first */
        ol_loop_defer(ol_daemon_net_loop(kp->d), &kp->retry);
    if (--f->pending == 0)
        kp_fetch_end(kp, f);
}

/* Whether f's keys are asked of home as grants: this node reads remotely,
 * home gave it its region, and the keys are the default tenant's (the one
 * slab a node maps; other tenants' values move as copies). */
static bool kp_grants(struct ol_kvpool *kp, struct ol_rpc *rpc, const struct kp_fetch *f,
                      int64_t home)
{
    return kp->rma && f->tenant == 0 && ol_rpc_peer_region(rpc, home) > 0;
}

/* One KV_GET to home for keys idx[0, n) of f (f->pending counts it),
 * given an equal share, with the homes not yet asked of the call's key that has the most, of what
 * is left until the fetch's deadline. 0 or -errno (not sent; -ETIMEDOUT:
 * the deadline passed). */
static int kp_get_call(struct ol_kvpool *kp, struct kp_fetch *f, int64_t home,
                       const uint32_t *idx, uint32_t n, uint32_t reply_max, bool plain)
{
    struct ol_rpc *rpc = ol_daemon_net_rpc(kp->d);
    uint64_t now = ol_loop_now_ms(ol_daemon_net_loop(kp->d));
    if (now >= f->deadline_ms)
        return -ETIMEDOUT;
    /* the key with the most homes left sets the share: each of them keeps
     * time for its next home */
    uint32_t unasked = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)__builtin_popcount(((1u << f->nh[idx[i]]) - 1u) &
                                                  ~(uint32_t)f->asked[idx[i]]);
        unasked = u > unasked ? u : unasked;
    }
    uint64_t share = (f->deadline_ms - now) / (1 + unasked);
    uint32_t timeout = share ? (uint32_t)share : 1;
    struct kp_get *g = calloc(1, sizeof *g + n * sizeof *idx);
    if (!g || !rpc) {
        free(g);
        return -ENOMEM;
    }
    g->f = f;
    g->home = home;
    /* grants from a home whose region this node can read; their entries
     * are 40 bytes, and a value it answers itself (not granted) comes
     * back too large for this call, and is asked again alone */
    g->grant = !plain && !f->exists && kp_grants(kp, rpc, f, home);
    g->again = plain;
    if (g->grant)
        reply_max = 4 + OL_KP_GRANT_LEN * n;
    if (f->exists)
        reply_max = 4 + 16 * n;
    g->reply_max = reply_max;
    uint8_t hdr[8];
    ol_le_st16(hdr, f->nslen);
    ol_le_st16(hdr + 2, f->exists ? OL_KP_EXISTS : g->grant ? OL_KP_GRANT : 0);
    ol_le_st32(hdr + 4, n);
    struct iovec iov[2 + 2 * OL_KP_CALL_KEYS];
    uint8_t klens[OL_KP_CALL_KEYS][2];
    int ni = 0;
    iov[ni++] = (struct iovec){hdr, 8};
    iov[ni++] = (struct iovec){f->bytes + f->nsoff, f->nslen};
    for (uint32_t i = 0; i < n; i++) {
        ol_le_st16(klens[i], f->k[idx[i]].klen);
        iov[ni++] = (struct iovec){klens[i], 2};
        iov[ni++] = (struct iovec){f->bytes + f->k[idx[i]].koff, f->k[idx[i]].klen};
        g->idx[i] = idx[i];
    }
    g->n = n;
    int rc = ol_rpc_call(rpc, home, OP_KV_GET, iov, ni, reply_max, timeout, kp_get_done, g);
    if (rc < 0) {
        free(g);
        return rc;
    }
    f->pending++;
    return 0;
}

/* kp_get_call, or, when the home's window is full (-EAGAIN), the call kept
 * for later (the fetch holds itself open meanwhile). 0 or -errno. */
static int kp_get_or_later(struct ol_kvpool *kp, struct kp_fetch *f, int64_t home,
                           const uint32_t *idx, uint32_t n, uint32_t reply_max, bool plain)
{
    int rc = kp_get_call(kp, f, home, idx, n, reply_max, plain);
    if (rc != -EAGAIN)
        return rc;
    struct kp_later *l = malloc(sizeof *l + n * sizeof *idx);
    if (!l)
        return -ENOMEM;
    l->home = home;
    l->plain = plain;
    l->reply_max = reply_max;
    l->n = n;
    memcpy(l->idx, idx, n * sizeof *idx);
    /* An ask again (plain: a value that did not fit, a grant whose read
     * failed) goes ahead of the fetch's calls not yet sent, after the
     * other asks again, so a fetch cut short by its deadline keeps the
     * front of the prefix rather than holes all along it. */
    struct kp_later **at = plain ? (f->later_first ? &f->later_first->next : &f->later)
                                 : (f->later_tail ? &f->later_tail->next : &f->later);
    l->next = *at;
    *at = l;
    if (!l->next)
        f->later_tail = l;
    if (plain)
        f->later_first = l;
    if (!f->waiting) {
        f->waiting = true;
        f->pending++;          /* held open until its waiting calls went */
        f->wnext = kp->waiting;
        kp->waiting = f;
        ol_timer_arm(ol_daemon_net_loop(kp->d), &kp->retry, 2);
    }
    return 0;
}

/* Net loop, every 2 ms while some wait and after each reply: the waiting
 * calls, in order, while their homes have room; past its deadline (or at
 * shutdown) a fetch's waiting calls are given up: misses. */
static void kp_on_retry(ol_loop *loop, struct ol_timer *t)
{
    struct ol_kvpool *kp = (struct ol_kvpool *)((char *)t - offsetof(struct ol_kvpool, retry));
    uint64_t now = ol_loop_now_ms(loop);
    struct kp_fetch *list = kp->waiting, *ended = NULL;
    kp->waiting = NULL;
    while (list) {
        struct kp_fetch *f = list;
        list = f->wnext;
        bool give_up = atomic_load(&kp->closing) || now >= f->deadline_ms;
        /* In order for each home; a home whose window is full holds back
         * its own calls, not the fetch's calls to other homes. */
        int64_t full[OL_KP_GET_KEYS];
        int nfull = 0;
        struct kp_later **pp = &f->later, *prev = NULL;
        while (*pp) {
            struct kp_later *l = *pp;
            bool held = false;
            for (int j = 0; j < nfull && !held; j++)
                held = full[j] == l->home;
            if (held) {
                prev = l;
                pp = &l->next;
                continue;
            }
            int rc = give_up ? -ETIMEDOUT : kp_get_call(kp, f, l->home, l->idx, l->n,
                                                         l->reply_max, l->plain);
            if (rc == -EAGAIN) {
                if (nfull == OL_KP_GET_KEYS)
                    break;
                full[nfull++] = l->home;
                prev = l;
                pp = &l->next;
                continue;
            }
            *pp = l->next;
            if (f->later_tail == l)
                f->later_tail = prev;
            if (f->later_first == l)   /* the asks again are the front: prev is one or NULL */
                f->later_first = prev;
            if (rc < 0)
                atomic_fetch_add(&kp->fetch_failures, 1);
            if (rc == -ETIMEDOUT)
                atomic_fetch_add(&kp->fetch_misses, l->n);
            else if (rc < 0)
                kp_ask(kp, f, l->idx, l->n);   /* their next homes */
            free(l);
        }
        if (f->later) {
            f->wnext = kp->waiting;
            kp->waiting = f;
        } else {
            f->later_tail = f->later_first = NULL;
            f->waiting = false;
            f->wnext = ended;
            ended = f;
        }
    }
    while (ended) {
        struct kp_fetch *f = ended;
        ended = f->wnext;
        if (--f->pending == 0)
            kp_fetch_end(kp, f);
    }
    /* the waiting pushes: each tried (one whose home is full stays, in
     * order), past its deadline dropped */
    struct kp_push *u = kp->push_head, *keep = NULL, *tail = NULL;
    kp->push_head = kp->push_tail = NULL;
    while (u) {
        struct kp_push *next = u->next;
        if (kp_push_try(kp, u, now) == -EAGAIN) {
            u->next = NULL;
            if (tail)
                tail->next = u;
            else
                keep = u;
            tail = u;
        }
        u = next;
    }
    kp->push_head = keep;
    kp->push_tail = tail;
    if (kp->waiting || kp->push_head)
        ol_timer_arm(loop, t, 2);
}

/* Net loop: key i's next home to ask, made the key's home: the best
 * ranked not yet asked whose connection is up, else the best ranked not
 * yet asked (its connection may be coming up). -1: every home was asked. */
static int64_t kp_next_home(struct ol_rpc *rpc, struct kp_fetch *f, uint32_t i)
{
    const int64_t *homes = f->homes + (size_t)i * f->r;
    int pick = -1;
    for (int j = 0; j < f->nh[i]; j++) {
        if (f->asked[i] & (1u << j))
            continue;
        if (pick < 0)
            pick = j;
        if (ol_rpc_peer_ready(rpc, homes[j])) {
            pick = j;
            break;
        }
    }
    if (pick < 0)
        return -1;
    f->asked[i] |= (uint16_t)(1u << pick);
    return f->k[i].home = homes[pick];
}

/* Net loop: keys idx[0, m) of f (idx is scratch: changed) asked of each
 * one's next home (kp_next_home), up to OL_KP_GET_KEYS keys of one home a
 * call (an EXISTS fetch: OL_KP_EXISTS_KEYS, OL_KP_EXISTS_BYTES of keys).
 * A call that cannot be sent sends its keys on to their next homes;
 * a key with no home left, or past the fetch's deadline, or at shutdown,
 * is a miss. Each key is asked of each of its homes at most once (a value
 * too large for its call again, kp_get_done), so a fetch of n keys
 * makes at most 2 x n x cluster.kv_replicas calls. */
static void kp_ask(struct ol_kvpool *kp, struct kp_fetch *f, uint32_t *idx, uint32_t m)
{
    struct ol_rpc *rpc = ol_daemon_net_rpc(kp->d);
    bool over = !rpc || atomic_load(&kp->closing) ||
                ol_loop_now_ms(ol_daemon_net_loop(kp->d)) >= f->deadline_ms;
    uint32_t w = 0;
    for (uint32_t i = 0; i < m; i++) {
        if (over || kp_next_home(rpc, f, idx[i]) < 0)
            atomic_fetch_add(&kp->fetch_misses, 1);
        else
            idx[w++] = idx[i];
    }
    m = w;
    while (m > 0) {
        /* a call for up to OL_KP_GET_KEYS keys of idx[0]'s home (EXISTS:
         * OL_KP_EXISTS_KEYS, OL_KP_EXISTS_BYTES of keys): as many
         * values as fit its reply, going by the last length a home said
         * (a grant's entry is small: OL_KP_GET_KEYS) */
        int64_t home = f->k[idx[0]].home;
        uint32_t call[OL_KP_CALL_KEYS], n = 0, most = OL_KP_GET_KEYS, rm = kp->reply_max;
        if (f->exists) {
            most = OL_KP_EXISTS_KEYS;   /* 16 bytes a key in the reply */
        } else if (!kp_grants(kp, rpc, f, home)) {
            uint64_t one = 20 + (uint64_t)f->hint;   /* a reply of one such value */
            uint64_t fit = (kp->reply_max - 4) / (one - 4);
            most = fit < 1 ? 1 : fit < OL_KP_GET_KEYS ? (uint32_t)fit : OL_KP_GET_KEYS;
            if (fit < 1 && one <= kp_alone_max(kp))
                rm = (uint32_t)one;   /* larger than a call's share: alone, with room */
        }
        w = 0;
        uint32_t kbytes = 0;   /* an EXISTS call's keys: OL_KP_EXISTS_BYTES at most */
        for (uint32_t i = 0; i < m; i++) {
            if (n < most && f->k[idx[i]].home == home &&
                (!f->exists || n == 0 || kbytes + 2u + f->k[idx[i]].klen <= OL_KP_EXISTS_BYTES)) {
                kbytes += 2u + f->k[idx[i]].klen;
                call[n++] = idx[i];
            } else {
                idx[w++] = idx[i];
            }
        }
        m = w;
        int rc = kp_get_or_later(kp, f, home, call, n, rm, false);
        if (rc == 0)
            continue;
        atomic_fetch_add(&kp->fetch_failures, 1);
        for (uint32_t i = 0; i < n; i++) {
            if (rc == -ETIMEDOUT || kp_next_home(rpc, f, call[i]) < 0)
                atomic_fetch_add(&kp->fetch_misses, 1);
            else
                idx[m++] = call[i];
        }
    }
}

/* Net loop: a core's fetch request, sent to the keys' homes. */
static void kp_fetch_go(ol_loop *loop, struct ol_msg *m)
{
    struct kp_fetch *f = (struct kp_fetch *)m;
    struct ol_kvpool *kp = f->kc->kp;
    f->pending = 1; /* this function's own, dropped at its end */
    f->deadline_ms = ol_loop_now_ms(loop) + kp->timeout_ms;
    for (uint32_t i = 0; i < f->n; i++)
        f->idx[i] = i;
    kp_ask(kp, f, f->idx, f->n);
    if (--f->pending == 0)
        kp_fetch_end(kp, f);
}

/* Core: what came back is stored here, and the waiting frame runs. */
static void kp_fetch_back(ol_loop *loop, struct ol_msg *m)
{
    (void)loop;
    struct kp_fetch *f = (struct kp_fetch *)m;
    struct kp_core *kc = f->kc;
    struct ol_kvpool *kp = kc->kp;
    struct ol_kv_server *srv = kp->d->kv_servers[kc->core];
    uint32_t ns = (uint32_t)ol_kv_ns_seed(f->bytes + f->nsoff, f->nslen);
    if (f->exists) {
        /* the hashes of the keys a home has, written over the keys read
         * before them (there[j] never reaches past k[j]) */
        struct ol_kv_hash *there = (struct ol_kv_hash *)f->k;
        uint32_t nt = 0;
        _Static_assert(sizeof(struct kp_key) >= sizeof(struct ol_kv_hash), "in place");
        for (uint32_t i = 0; i < f->n; i++)
            if (f->k[i].there)
                memmove(&there[nt++], &f->k[i].h, sizeof *there);
        atomic_fetch_add(&kp->lookup_hits, nt);
        ol_kv_server_fetched(srv, f->token, there, nt);
        goto done;
    }
    for (uint32_t i = 0; i < f->n; i++) {
        struct kp_key *k = &f->k[i];
        int st = -1;
        if (k->reserved && !k->busy) {
            /* its slot: the value read into it (checked here), or a copy's
             * copied in, else given back */
            if (k->filled || (k->value && k->len <= k->dst.capacity)) {
                st = ol_kv_server_commit(srv, 0, &k->dst, k->filled ? NULL : k->value, k->len,
                                         k->sum);
                if (st == OL_KV_OK && k->filled)
                    atomic_fetch_add(&kp->rma_direct_keys, 1);
            } else {
                ol_kv_server_abort(srv, 0, &k->dst);
            }
        }
        if (st < 0 && k->value)
            st = ol_kv_server_store(srv, f->tenant, ns, k->h, f->bytes + k->koff, k->klen,
                                    k->value, k->len, k->sum);
        if (st == OL_KV_OK || st == OL_KV_EXISTS)
            atomic_fetch_add(&kp->fetched_keys, 1);
        if (k->value && !k->in_reply)
            free(k->value);
    }
    while (f->replies) {
        struct kp_reply *rp = f->replies;
        f->replies = rp->next;
        free(rp->bytes);
        free(rp);
    }
    ol_kv_server_fetched(srv, f->token, NULL, 0);
done:
    atomic_fetch_sub(&kc->fetches, 1);
    free(f);
    atomic_fetch_sub(&kp->inflight, 1);
}

static int kp_fetch(void *arg, const struct ol_kv_fetch_req *r)
{
    struct kp_core *kc = arg;
    if (atomic_load(&kc->kp->closing))
        return -ESHUTDOWN;
    if (atomic_fetch_add(&kc->fetches, 1) >= OL_KP_FETCHES) {
        atomic_fetch_sub(&kc->fetches, 1);
        return -EAGAIN;
    }
    size_t kb = 0;
    for (uint32_t i = 0; i < r->n; i++)
        kb += r->klens[i];
    struct ol_kvpool *kp = kc->kp;
    uint32_t rr = (uint32_t)kp->replicas;
    struct kp_fetch *f = malloc(sizeof *f + r->n * (sizeof(struct kp_key) + rr * sizeof(int64_t) +
                                                    sizeof(uint32_t) + sizeof(uint16_t) + 1) +
                                r->nslen + kb);
    if (!f) {
        atomic_fetch_sub(&kc->fetches, 1);
        return -ENOMEM;
    }
    f->kc = kc;
    f->later = f->later_tail = f->later_first = NULL;
    f->hint = 0;
    f->exists = r->exists;
    f->wnext = NULL;
    f->rmas = NULL;
    f->replies = NULL;
    f->rma_timer = (struct ol_timer){.fn = kp_rma_timeout};
    f->waiting = false;
    f->tenant = r->tenant;
    f->token = r->token;
    f->n = r->n;
    f->r = rr;
    f->k = (struct kp_key *)(f + 1);
    f->homes = (int64_t *)(f->k + r->n);
    f->idx = (uint32_t *)(f->homes + (size_t)r->n * rr);
    f->asked = (uint16_t *)(f->idx + r->n);
    f->nh = (uint8_t *)(f->asked + r->n);
    f->bytes = f->nh + r->n;
    f->nslen = r->nslen;
    f->nsoff = 0;
    memcpy(f->bytes, r->ns, r->nslen);
    uint32_t off = r->nslen;
    for (uint32_t i = 0; i < r->n; i++) {
        f->k[i] = (struct kp_key){.h = r->hs[i], .home = r->homes[i], .klen = r->klens[i],
                                  .koff = off};
        /* with one home per key, the one the server was given (placed once) */
        int64_t *homes = f->homes + (size_t)i * rr;
        int nh = rr > 1 ? kp_homes(kp, r->hs[i], homes) : 0;
        if (nh == 0) {
            homes[0] = r->homes[i];
            nh = 1;
        }
        f->nh[i] = (uint8_t)nh;
        f->asked[i] = 0;
        memcpy(f->bytes + off, r->keys[i], r->klens[i]);
        off += r->klens[i];
    }
    /* remote reads land straight in this slab: a slot of the session's
     * size reserved for each key now, checked and committed when its value
     * is in (a value read as a copy is copied into it; one that does not
     * come gives it back) */
    if (kp->rma && r->tenant == 0 && !r->exists && r->value_size) {
        struct ol_kv_server *srv = kp->d->kv_servers[kc->core];
        uint32_t ns = (uint32_t)ol_kv_ns_seed(f->bytes, f->nslen);
        for (uint32_t i = 0; i < r->n; i++)
            f->k[i].reserved = ol_kv_server_reserve(srv, 0, ns, r->hs[i], r->keys[i],
                                                    r->klens[i], r->value_size,
                                                    &f->k[i].dst) == OL_KV_OK;
    }
    f->msg.fn = kp_fetch_go;
    atomic_fetch_add(&kp->inflight, 1);
    ol_loop_post(ol_daemon_net_loop(kp->d), &f->msg);
    return 0;
}

/* ---- push: values stored here, homed elsewhere ----------------------------------- */


static void kp_push_done(void *arg, int rc, const uint8_t *p, uint32_t len)
{
    struct ol_kvpool *kp = arg;
    if (kp->waiting || kp->push_head)   /* room in its home's window */
        ol_loop_defer(ol_daemon_net_loop(kp->d), &kp->retry);
    if (rc == OL_RPC_OK && len >= 2 &&
        (ol_le_ld16(p) == OL_KV_OK || ol_le_ld16(p) == OL_KV_EXISTS))
        atomic_fetch_add(&kp->pushes, 1);
    else
        atomic_fetch_add(&kp->push_failures, 1);
}

/* A push is over (handed to the node RPC, dropped, or not for another
 * node): its len bytes of kc and its count in inflight go back. */
static void kp_push_end(struct ol_kvpool *kp, struct kp_core *kc, uint32_t len, bool dropped)
{
    if (dropped)
        atomic_fetch_add(&kp->push_drops, 1);
    atomic_fetch_sub(&kc->push_bytes, len);
    atomic_fetch_sub(&kp->inflight, 1);
}

/* Sends u to its home: 0 (sent, or nothing to send: u ended), -EAGAIN (the
 * home's window is full: u kept). */
static int kp_push_try(struct ol_kvpool *kp, struct kp_push *u, uint64_t now)
{
    struct ol_rpc *rpc = ol_daemon_net_rpc(kp->d);
    struct kp_core *kc = u->kc;
    uint32_t len = u->len;
    if (!rpc || atomic_load(&kp->closing) || now >= u->deadline_ms) {
        free(u);
        kp_push_end(kp, kc, len, true);
        return 0;
    }
    /* the payload by reference: once the call is made, the node RPC frees
     * u when it is sent (or dropped), maybe before the call returns */
    struct iovec iov = {u->payload, len};
    int rc = ol_rpc_call_ref(rpc, u->home, OP_KV_PUT, &iov, 1, &(struct ol_rpc_ref){free, u}, 8,
                             kp->timeout_ms, kp_push_done, kp);
    if (rc == -EAGAIN)
        return -EAGAIN;
    if (rc < 0)
        free(u);
    kp_push_end(kp, kc, len, rc < 0);
    return 0;
}

static void kp_push_go(ol_loop *loop, struct ol_msg *m)
{
    struct kp_push *u = (struct kp_push *)m;
    struct ol_kvpool *kp = u->kc->kp;
    uint64_t now = ol_loop_now_ms(loop);
    u->deadline_ms = now + kp->timeout_ms;
    u->next = NULL;
    /* behind the pushes already waiting (a home's saves go in order) */
    if (kp->push_head || kp_push_try(kp, u, now) == -EAGAIN) {
        if (kp->push_tail)
            kp->push_tail->next = u;
        else
            kp->push_head = u;
        kp->push_tail = u;
        ol_timer_arm(loop, &kp->retry, 2);
    }
}

/* One copy of v for home, counted in the core's push bytes on its own:
 * dropped over the bound, or sent (kp_push_go), independently of the
 * key's other homes' copies. KV_PUT payload: u16 ns_len, u16 key_len,
 * u32 0, u64 value_len, u64 sum, then namespace, key, value. */
static void kp_push_one(struct kp_core *kc, const struct ol_kv_saved *v, int64_t home)
{
    uint64_t len = 24 + v->nslen + v->klen + v->len;
    if (atomic_load(&kc->kp->closing) || len > UINT32_MAX) {
        atomic_fetch_add(&kc->kp->push_drops, 1);
        return;
    }
    if (atomic_fetch_add(&kc->push_bytes, len) + len > OL_KP_PUSH_BYTES) {
        atomic_fetch_sub(&kc->push_bytes, len);
        atomic_fetch_add(&kc->kp->push_drops, 1);
        return;
    }
    struct kp_push *u = malloc(sizeof *u + len);
    if (!u) {
        atomic_fetch_sub(&kc->push_bytes, len);
        atomic_fetch_add(&kc->kp->push_drops, 1);
        return;
    }
    u->kc = kc;
    u->home = home;
    u->len = (uint32_t)len;
    uint8_t *p = u->payload;
    ol_le_st16(p, v->nslen);
    ol_le_st16(p + 2, v->klen);
    ol_le_st32(p + 4, 0);
    ol_le_st64(p + 8, v->len);
    ol_le_st64(p + 16, v->sum);
    memcpy(p + 24, v->ns, v->nslen);
    memcpy(p + 24 + v->nslen, v->key, v->klen);
    memcpy(p + 24 + v->nslen + v->klen, v->value, v->len);
    u->msg.fn = kp_push_go;
    atomic_fetch_add(&kc->kp->inflight, 1);
    ol_loop_post(ol_daemon_net_loop(kc->kp->d), &u->msg);
}

/* Core: a value stored here, sent to each of its homes but this node (with
 * one home per key, the one the server was given: placed once). */
static void kp_saved(void *arg, const struct ol_kv_saved *v)
{
    struct kp_core *kc = arg;
    int64_t homes[OL_PLACE_MAX_REPLICAS];
    int nh = kc->kp->replicas > 1 ? kp_homes(kc->kp, v->h, homes) : 0;
    if (nh == 0) {
        homes[0] = v->home;
        nh = 1;
    }
    for (int i = 0; i < nh; i++)
        kp_push_one(kc, v, homes[i]);
}

/* ---- serving other nodes: KV_GET and KV_PUT -------------------------------------- */

/* One request's work on one core. */
struct kp_part {
    struct ol_msg msg;
    struct kp_serve *sv;
    struct kp_part *wnext;          /* on its kp_core's disk_wait */
    int core;
};

/* A KV_GET key not answered yet: waiting for a disk read (another's, or a
 * place in the disk's queue), or for the read this request started (its
 * length taken from the request's budget, in k->len until it lands).
 * Never on the wire. */
enum { KP_ST_WAIT = 0xfffe, KP_ST_READ = 0xffff };

struct kp_serve {
    struct ol_kvpool *kp;
    struct ol_rpc_req *req;
    int tenant, op;
    uint32_t ns;
    uint32_t n, parts_left;
    uint64_t deadline_ms;           /* disk reads not landed by then: misses */
    _Atomic uint64_t budget;        /* reply bytes the values may still take */
    struct kp_key *k;               /* [n]; koff into req->payload */
    uint8_t *core_of;               /* [n] */
    uint16_t *status;               /* [n] */
    struct kp_part *parts;          /* one per core with keys */
    uint64_t reserved;              /* of kp->serve_bytes, given back once the reply
                                       was sent or dropped (kp_serve_free) */
    bool grant;                     /* KV_GET: keys in RAM answered with grants */
    bool exists;                    /* KV_GET: whether each key is here, no values */
    struct ol_kv_grant *gr;         /* [n] when grant: status OL_KP_ST_GRANT */
    uint8_t *hdrs;                  /* the reply's headers, while it is sent */
};

/* What a served request holds until its reply is sent: its values
 * (referenced by the reply, not copied), the reply's headers, itself. */
static void kp_serve_free(void *arg)
{
    struct kp_serve *sv = arg;
    /* the bound counts a request's values until its reply has left */
    atomic_fetch_sub(&sv->kp->serve_bytes, sv->reserved);
    for (uint32_t i = 0; i < sv->n; i++)
        free(sv->k[i].value);
    free(sv->hdrs);
    free(sv->parts);
    free(sv);
}

/* Appends base[0, len) to iov[0, *ni), merged with the last piece when
 * they touch (a reply's headers with no value between them). */
static void kp_iov_add(struct iovec *iov, int *ni, void *base, size_t len)
{
    if (*ni && (uint8_t *)iov[*ni - 1].iov_base + iov[*ni - 1].iov_len == (uint8_t *)base)
        iov[*ni - 1].iov_len += len;
    else
        iov[(*ni)++] = (struct iovec){base, len};
}

static void kp_serve_reply(struct kp_serve *sv)
{
    struct ol_kvpool *kp = sv->kp;
    if (sv->op == OP_KV_PUT) {
        uint8_t st[2];
        ol_le_st16(st, sv->status[0]);
        struct iovec iov = {st, 2};
        ol_rpc_reply(sv->req, OL_RPC_OK, &iov, 1);
        atomic_fetch_add(&kp->served_puts, 1);
    } else {
        /* u32 n, per key: u16 status, u16 0, u32 len, u64 sum, value; or
         * a grant: u16 OL_KP_ST_GRANT, u16 0, u32 len, u64 sum, u64 off,
         * u64 gen, u64 hdr_off. The values by reference: sv lives until
         * the reply is sent (kp_serve_free). */
        uint8_t *hdrs = malloc(4 + OL_KP_GRANT_LEN * (size_t)sv->n);
        struct iovec *iov = malloc(sizeof *iov * (1 + 2 * (size_t)sv->n));
        sv->hdrs = hdrs;
        if (!hdrs || !iov) {
            ol_rpc_reply(sv->req, OL_RPC_BUSY, NULL, 0);
            kp_serve_free(sv);
        } else {
            int ni = 0;
            ol_le_st32(hdrs, sv->n);
            kp_iov_add(iov, &ni, hdrs, 4);
            uint8_t *h = hdrs + 4;
            for (uint32_t i = 0; i < sv->n; i++, h += 16) {
                OL_ASSERT(sv->status[i] < KP_ST_WAIT);
                if (sv->status[i] == OL_KP_ST_GRANT) {
                    const struct ol_kv_grant *gr = &sv->gr[i];
                    ol_le_st16(h, OL_KP_ST_GRANT);
                    ol_le_st16(h + 2, 0);
                    ol_le_st32(h + 4, (uint32_t)gr->len);
                    ol_le_st64(h + 8, gr->sum);
                    ol_le_st64(h + 16, gr->off);
                    ol_le_st64(h + 24, gr->gen);
                    ol_le_st64(h + 32, gr->hdr_off);
                    kp_iov_add(iov, &ni, h, OL_KP_GRANT_LEN);
                    h += OL_KP_GRANT_LEN - 16;
                    atomic_fetch_add(&kp->served_grants, 1);
                    continue;
                }
                if (sv->exists) {   /* OK or NOT_FOUND, no value */
                    memset(h, 0, 16);
                    ol_le_st16(h, sv->status[i] == OL_KV_OK ? OL_KV_OK : OL_KV_NOT_FOUND);
                    kp_iov_add(iov, &ni, h, 16);
                    continue;
                }
                bool ok = sv->status[i] == OL_KV_OK && sv->k[i].value;
                bool big = sv->status[i] == OL_KV_TOO_LARGE_ST;
                ol_le_st16(h, ok ? OL_KV_OK : (sv->status[i] ? sv->status[i] : OL_KV_NOT_FOUND));
                ol_le_st16(h + 2, 0);
                /* too large: its length, so that it can be asked alone */
                ol_le_st32(h + 4, ok || big ? (uint32_t)sv->k[i].len : 0);
                ol_le_st64(h + 8, ok ? sv->k[i].sum : 0);
                kp_iov_add(iov, &ni, h, 16);
                if (ok && sv->k[i].len)
                    kp_iov_add(iov, &ni, sv->k[i].value, sv->k[i].len);
            }
            atomic_fetch_add(sv->exists ? &kp->served_exists : &kp->served_gets, 1);
            ol_rpc_reply_ref(sv->req, OL_RPC_OK, iov, ni,
                             &(struct ol_rpc_ref){kp_serve_free, sv});
        }
        free(iov);
        return;
    }
    kp_serve_free(sv);
}

static void kp_part_back(ol_loop *loop, struct ol_msg *m)
{
    (void)loop;
    struct kp_part *pt = (struct kp_part *)m;
    struct kp_serve *sv = pt->sv;
    struct ol_kvpool *kp = sv->kp;
    if (--sv->parts_left == 0)
        kp_serve_reply(sv);
    atomic_fetch_sub(&kp->inflight, 1);
}

static bool kp_budget_take(struct kp_serve *sv, uint64_t len)
{
    uint64_t b = atomic_load(&sv->budget);
    while (b >= len && !atomic_compare_exchange_weak(&sv->budget, &b, b - len))
        ;
    return b >= len;
}

/* Core: KV_GET key i as RAM here has it, its value copied within the
 * request's budget (over it: TOO_LARGE_ST with its length, asked again
 * alone). */
static void kp_get_key(struct kp_serve *sv, struct ol_kv_server *srv, uint32_t i)
{
    struct kp_key *k = &sv->k[i];
    uint64_t len = 0, sum = 0;
    if (sv->grant) { /* where it is, not its bytes (a value over 4 GiB: copied) */
        int st = ol_kv_server_grant(srv, sv->tenant, sv->ns, k->h, &sv->gr[i]);
        if (st == OL_KV_OK && sv->gr[i].len <= UINT32_MAX && sv->gr[i].sum != 0) {
            sv->status[i] = OL_KP_ST_GRANT;
            return;
        }
        if (st != OL_KV_OK) {
            sv->status[i] = (uint16_t)st;
            return;
        }
    }
    int st = ol_kv_server_load(srv, sv->tenant, sv->ns, k->h, NULL, 0, &len, &sum);
    if (st == OL_KV_TOO_LARGE_ST || (st == OL_KV_OK && len == 0)) {
        if (!kp_budget_take(sv, len)) {
            k->len = len;
            sv->status[i] = OL_KV_TOO_LARGE_ST;
            return;
        }
        k->value = malloc(len ? len : 1);
        st = k->value ? ol_kv_server_load(srv, sv->tenant, sv->ns, k->h, k->value, len, &k->len,
                                          &k->sum)
                      : OL_KV_BUSY;
        if (st != OL_KV_OK) {
            free(k->value);
            k->value = NULL;
            atomic_fetch_add(&sv->budget, len);
        }
    }
    sv->status[i] = (uint16_t)st;
}

/*
 * Core: the part's KV_GET keys not answered yet. A key in RAM is answered;
 * one on the disk tier only is read into RAM first (at most
 * OL_KP_DISK_READS of this part's reads in flight, each read's length
 * taken from the request's budget until it lands), one being read waits.
 * At the request's deadline, or at shutdown, what has not landed is
 * answered as RAM has it (a miss). Returns true when every key of the part
 * is answered.
 */
static bool kp_part_step(struct kp_part *pt, uint64_t now)
{
    struct kp_serve *sv = pt->sv;
    struct ol_kvpool *kp = sv->kp;
    struct ol_kv_server *srv = kp->d->kv_servers[pt->core];
    bool give_up = now >= sv->deadline_ms || atomic_load(&kp->closing);
    uint32_t reading = 0;
    bool left = false;
    /* the keys in RAM, the reads that landed (or failed their checks: gone) */
    for (uint32_t i = 0; i < sv->n; i++) {
        if (sv->core_of[i] != pt->core)
            continue; /* another core's key: its status is that core's */
        uint16_t st = sv->status[i];
        if (st != KP_ST_WAIT && st != KP_ST_READ)
            continue;
        struct kp_key *k = &sv->k[i];
        uint64_t len = 0;
        int where = ol_kv_server_where(srv, sv->tenant, sv->ns, k->h, &len);
        if (!give_up && where == OL_KV_WHERE_LOADING) {
            reading += st == KP_ST_READ;
            left = true;
            continue;
        }
        if (st == KP_ST_READ) {
            if (!sv->grant) /* a grant's read took none: no bytes go in the reply */
                atomic_fetch_add(&sv->budget, k->len);
            k->len = 0;
            sv->status[i] = KP_ST_WAIT;
        }
        if (!give_up && where == OL_KV_WHERE_DISK)
            continue; /* (evicted again since it landed) read below */
        kp_get_key(sv, srv, i);
        if (st == KP_ST_READ &&
            (sv->status[i] == OL_KV_OK || sv->status[i] == OL_KP_ST_GRANT))
            atomic_fetch_add(&kp->served_disk_keys, 1);
    }
    /* the reads to start */
    for (uint32_t i = 0; !give_up && i < sv->n; i++) {
        if (sv->core_of[i] != pt->core || sv->status[i] != KP_ST_WAIT)
            continue;
        struct kp_key *k = &sv->k[i];
        uint64_t len = 0;
        if (ol_kv_server_where(srv, sv->tenant, sv->ns, k->h, &len) != OL_KV_WHERE_DISK ||
            reading >= OL_KP_DISK_READS)
            continue; /* being read by another (counted above), or later */
        if (!sv->grant && !kp_budget_take(sv, len)) {
            k->len = len; /* asked again alone */
            sv->status[i] = OL_KV_TOO_LARGE_ST;
            continue;
        }
        int rc = ol_kv_server_promote(srv, sv->tenant, sv->ns, k->h);
        if (rc == 0) {
            k->len = len;
            sv->status[i] = KP_ST_READ;
            reading++;
            left = true;
            continue;
        }
        if (!sv->grant)
            atomic_fetch_add(&sv->budget, len);
        /* -ENOSPC: no RAM slot for it now; while reads of this part are in
         * flight their slots come free when they land: wait as for -EBUSY */
        if (rc != -EBUSY && !(rc == -ENOSPC && reading > 0))
            sv->status[i] = OL_KV_NOT_FOUND;
    }
    for (uint32_t i = 0; !left && i < sv->n; i++)
        left = sv->core_of[i] == pt->core && sv->status[i] == KP_ST_WAIT;
    return !left;
}

/* Core: the part is answered; the net loop replies once every part is. */
static void kp_part_end(struct kp_part *pt)
{
    pt->msg.fn = kp_part_back;
    ol_loop_post(ol_daemon_net_loop(pt->sv->kp->d), &pt->msg);
}

/* Core: pt waits for disk reads, behind the parts waiting already. */
static void kp_disk_wait_add(struct kp_core *kc, struct kp_part *pt)
{
    pt->wnext = NULL;
    if (kc->disk_wait_tail)
        kc->disk_wait_tail->wnext = pt;
    else
        kc->disk_wait = pt;
    kc->disk_wait_tail = pt;
}

/* Core: the parts waiting for disk reads, each run again (after a disk
 * completion of this core, and at the earliest of their deadlines). */
static void kp_disk_run(struct kp_core *kc, ol_loop *loop)
{
    uint64_t now = ol_loop_now_ms(loop), first = UINT64_MAX;
    struct kp_part *list = kc->disk_wait;
    kc->disk_wait = kc->disk_wait_tail = NULL;
    while (list) {
        struct kp_part *pt = list;
        list = pt->wnext;
        if (kp_part_step(pt, now)) {
            kp_part_end(pt);
            continue;
        }
        kp_disk_wait_add(kc, pt);
        if (pt->sv->deadline_ms < first)
            first = pt->sv->deadline_ms;
    }
    if (kc->disk_wait)
        ol_timer_arm(loop, &kc->wake, first > now ? first - now : 0);
    else
        ol_timer_cancel(loop, &kc->wake);
}

static void kp_on_wake(ol_loop *loop, struct ol_timer *t)
{
    kp_disk_run((struct kp_core *)((char *)t - offsetof(struct kp_core, wake)), loop);
}

/* The KV server's hook: a disk operation of this core completed. */
static void kp_disk_done(void *arg)
{
    struct kp_core *kc = arg;
    if (kc->disk_wait)
        kp_disk_run(kc, kc->kp->d->cores[kc->core].loop);
}

/* Core: this core's keys of a KV_GET or the KV_PUT's one key. */
static void kp_part_run(ol_loop *loop, struct ol_msg *m)
{
    struct kp_part *pt = (struct kp_part *)m;
    struct kp_serve *sv = pt->sv;
    struct ol_kvpool *kp = sv->kp;
    struct ol_kv_server *srv = kp->d->kv_servers[pt->core];
    const uint8_t *pl = sv->req->payload;
    for (uint32_t i = 0; i < sv->n; i++) {
        if (sv->core_of[i] != pt->core)
            continue;
        struct kp_key *k = &sv->k[i];
        if (sv->exists) {
            /* here in RAM, being read in, or on the disk tier: nothing read */
            uint64_t len = 0;
            sv->status[i] = ol_kv_server_where(srv, sv->tenant, sv->ns, k->h, &len) !=
                                    OL_KV_WHERE_MISS
                                ? OL_KV_OK : OL_KV_NOT_FOUND;
        } else if (sv->op == OP_KV_PUT) {
            uint32_t nsl = ol_le_ld16(pl), kl = ol_le_ld16(pl + 2);
            sv->status[i] = (uint16_t)ol_kv_server_store(srv, sv->tenant, sv->ns, k->h,
                                                         pl + k->koff, k->klen,
                                                         pl + 24 + nsl + kl, k->len, k->sum);
        } else {
            sv->status[i] = KP_ST_WAIT;
        }
    }
    uint64_t now = ol_loop_now_ms(loop);
    if (sv->op == OP_KV_PUT || sv->exists || kp_part_step(pt, now)) {
        kp_part_end(pt);
        return;
    }
    struct kp_core *kc = &kp->cores[pt->core];
    kp_disk_wait_add(kc, pt);
    if (!ol_timer_armed(&kc->wake) || kc->wake.expires_ms > sv->deadline_ms)
        ol_timer_arm(loop, &kc->wake, sv->deadline_ms > now ? sv->deadline_ms - now : 0);
}

static void kp_serve_parts(struct ol_rpc_req *req, struct ol_kvpool *kp, int op);

/* Net loop: a request of another node, refused while starting or leaving. */
static void kp_serve(struct ol_rpc_req *req, void *arg, int op)
{
    struct ol_kvpool *kp = arg;
    if (!kp->d->kv || req->len < 8) {
        ol_rpc_reply(req, OL_RPC_BAD_REQUEST, NULL, 0);
        return;
    }
    /* a hold on inflight before looking at closing: a core that stopped
     * saw it at 0 after closing was set, so this sees closing */
    atomic_fetch_add(&kp->inflight, 1);
    if (atomic_load(&kp->closing) || !atomic_load(&kp->ready)) {
        ol_rpc_reply(req, OL_RPC_SHUTTING_DOWN, NULL, 0);   /* starting or leaving */
        atomic_fetch_sub(&kp->inflight, 1);
        return;
    }
    kp_serve_parts(req, kp, op);
    atomic_fetch_sub(&kp->inflight, 1);
}

/* Net loop: splits a request by the cores that own its keys' shards. */
static void kp_serve_parts(struct ol_rpc_req *req, struct ol_kvpool *kp, int op)
{
    struct ol_kv_service *svc = kp->d->kv;
    const uint8_t *pl = req->payload;
    uint32_t len = req->len;
    uint32_t nsl = ol_le_ld16(pl), n, off;
    if (op == OP_KV_PUT) {
        if (len < 24 || nsl == 0 || nsl > OL_KV_MAX_NAMESPACE || ol_le_ld32(pl + 4) != 0)
            goto bad;
        n = 1;
        off = 24 + nsl;
    } else {
        n = ol_le_ld32(pl + 4);
        off = 8 + nsl;
        uint16_t fl = ol_le_ld16(pl + 2);
        if (nsl == 0 || nsl > OL_KV_MAX_NAMESPACE || n == 0 || n > 4096 || off > len ||
            (fl & ~(OL_KP_GRANT | OL_KP_EXISTS)) || fl == (OL_KP_GRANT | OL_KP_EXISTS))
            goto bad;
    }
    if (off > len)
        goto bad;
    size_t grsz = op == OP_KV_GET && (ol_le_ld16(pl + 2) & OL_KP_GRANT)
                      ? n * sizeof(struct ol_kv_grant) : 0;
    struct kp_serve *sv = calloc(1, sizeof *sv + grsz + n * (sizeof(struct kp_key) + 1 + 2));
    if (!sv) {
        ol_rpc_reply(req, OL_RPC_BUSY, NULL, 0);
        return;
    }
    sv->kp = kp;
    sv->req = req;
    sv->op = op;
    sv->n = n;
    sv->gr = grsz ? (struct ol_kv_grant *)(sv + 1) : NULL;
    sv->k = (struct kp_key *)((char *)(sv + 1) + grsz);
    sv->status = (uint16_t *)(sv->k + n);
    sv->core_of = (uint8_t *)(sv->status + n);
    /* the values may take what the reply has left after its headers (a
     * grant's: 40 bytes), and no more than this node lends all its peers'
     * requests at once */
    uint64_t ent = grsz ? OL_KP_GRANT_LEN : 16;
    bool exists = op == OP_KV_GET && (ol_le_ld16(pl + 2) & OL_KP_EXISTS);
    uint64_t budget = op == OP_KV_GET && !exists && req->reply_max > 4 + ent * n
                          ? req->reply_max - 4 - ent * n : 0;
    if (budget > OL_KP_REPLY_MAX * 2)
        budget = OL_KP_REPLY_MAX * 2;
    if (atomic_fetch_add(&kp->serve_bytes, budget) + budget > OL_KP_SERVE_BYTES) {
        atomic_fetch_sub(&kp->serve_bytes, budget);
        free(sv);
        ol_rpc_reply(req, OL_RPC_BUSY, NULL, 0);
        return;
    }
    sv->reserved = budget;
    atomic_store(&sv->budget, budget);
    /* disk reads for it end by then, so the reply beats the caller's deadline */
    sv->deadline_ms = ol_loop_now_ms(ol_daemon_net_loop(kp->d)) + kp->timeout_ms / 2;
    const void *ns = op == OP_KV_PUT ? pl + 24 : pl + 8;
    struct ol_kv_tenant *t = ol_kv_service_tenant_of(svc, ns, nsl);
    sv->tenant = (int)(t - svc->tenants);
    /* the region mapped is the default tenant's slab: another tenant's
     * keys are answered with their bytes (each entry says which) */
    sv->grant = grsz && kp->granting && sv->tenant == 0;
    sv->exists = exists;
    uint64_t seed = ol_kv_ns_seed(ns, nsl);
    sv->ns = (uint32_t)seed;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t kl;
        if (op == OP_KV_PUT) {
            kl = ol_le_ld16(pl + 2);
            uint64_t vl = ol_le_ld64(pl + 8);
            if (kl == 0 || kl > OL_KV_KEY_MAX || kl > len - off || vl != len - off - kl)
                goto bad_sv;
            sv->k[i].len = vl;
            sv->k[i].sum = ol_le_ld64(pl + 16);
        } else {
            if (len - off < 2)
                goto bad_sv;
            kl = ol_le_ld16(pl + off);
            off += 2;
            if (kl == 0 || kl > OL_KV_KEY_MAX || len - off < kl)
                goto bad_sv;
        }
        sv->k[i].koff = off;
        sv->k[i].klen = (uint16_t)kl;
        sv->k[i].h = ol_kv_key_hash(seed, pl + off, kl);
        sv->core_of[i] = (uint8_t)ol_kv_shard_of(svc, sv->k[i].h);
        off += kl;
    }
    if (op == OP_KV_GET && off != len)
        goto bad_sv;
    /* one part per core with keys */
    int ncores = kp->d->ncores;
    sv->parts = calloc((size_t)ncores, sizeof *sv->parts);
    if (!sv->parts) {
        atomic_fetch_sub(&kp->serve_bytes, sv->reserved);
        free(sv);
        ol_rpc_reply(req, OL_RPC_BUSY, NULL, 0);
        return;
    }
    bool has[256] = {0};
    for (uint32_t i = 0; i < n; i++)
        has[sv->core_of[i]] = true;
    for (int c = 0; c < ncores; c++)
        if (has[c])
            sv->parts_left++;
    for (int c = 0; c < ncores; c++)
        if (has[c]) {
            struct kp_part *pt = &sv->parts[c];
            pt->sv = sv;
            pt->core = c;
            pt->msg.fn = kp_part_run;
            atomic_fetch_add(&kp->inflight, 1);
            ol_loop_post(kp->d->cores[c].loop, &pt->msg);
        }
    return;
bad_sv:
    atomic_fetch_sub(&kp->serve_bytes, sv->reserved);
    free(sv);
bad:
    ol_rpc_reply(req, OL_RPC_BAD_REQUEST, NULL, 0);
}

static void kp_on_get(struct ol_rpc_req *req, void *arg) { kp_serve(req, arg, OP_KV_GET); }
static void kp_on_put(struct ol_rpc_req *req, void *arg) { kp_serve(req, arg, OP_KV_PUT); }

/* ---- set-up ------------------------------------------------------------------------ */

int ol_daemon_kvpool_create(struct ol_daemon *d, char *err, size_t errlen)
{
    if (!d->cluster || !d->kv)
        return 0;
    struct ol_kvpool *kp = calloc(1, sizeof *kp);
    if (!kp || !(kp->cores = calloc((size_t)d->ncores, sizeof *kp->cores)) ||
        !(kp->kbuf = calloc(OL_MEMBER_MAX, sizeof *kp->kbuf))) {
        if (kp)
            free(kp->cores);
        free(kp);
        snprintf(err, errlen, "kv pool: out of memory");
        return -1;
    }
    kp->d = d;
    kp->self = d->cfg.self_id;
    kp->timeout_ms = (uint32_t)d->cfg.cluster.kv_timeout_ms;
    kp->replicas = (int)d->cfg.cluster.kv_replicas;
    kp->reply_window = (uint32_t)d->cfg.cluster.rpc_window_bytes;   /* rpc.h: reply window */
    kp->reply_max = kp->reply_window / 4 < OL_KP_REPLY_MAX ? kp->reply_window / 4
                                                            : OL_KP_REPLY_MAX;
    for (int i = 0; i < d->ncores; i++)
        kp->cores[i] = (struct kp_core){.kp = kp, .core = i, .wake.fn = kp_on_wake};
    kp->retry.fn = kp_on_retry;
    d->kvpool = kp;
    return 0;
}

int ol_daemon_kvpool_core(struct ol_daemon *d, int core)
{
    struct ol_kvpool *kp = d->kvpool;
    if (!kp)
        return 0;
    struct ol_kv_remote r = {.arg = &kp->cores[core], .wait_ms = kp->timeout_ms + 100,
                             .home_of = kp_home_of, .fetch = kp_fetch,
                             .saved = kp_saved, .disk_done = kp_disk_done,
                             .members = kp_members_enc};
    return ol_kv_server_set_remote(d->kv_servers[core], &r);
}

bool ol_daemon_kvpool_rma(const struct ol_daemon *d)
{
    return d->kvpool && d->cfg.transport == OL_TRANSPORT_UCX &&
           d->cfg.rdma.backend == OL_RDMA_UCX;
}

void ol_daemon_kvpool_attach(struct ol_daemon *d, struct ol_rpc *rpc)
{
    struct ol_kvpool *kp = d->kvpool;
    if (!kp)
        return;
    ol_rpc_handle(rpc, OP_KV_GET, kp_on_get, kp);
    ol_rpc_handle(rpc, OP_KV_PUT, kp_on_put, kp);
    if (!ol_daemon_kvpool_rma(d))
        return;
    /* the default tenant's slab, the whole memfd mapping (its headers and
     * values): grants point into it; before any peer connects, so every
     * READY carries it */
    kp->rma = true;
    const struct ol_kv_slab *s = &d->kv->tenants[0].slab;
    int rc = ol_rpc_map(rpc, s->base, s->size);
    if (rc == 0)
        kp->granting = true;
    else
        ol_warn("kv pool: the slab cannot be mapped for remote reads (%s): other nodes get "
                "this node's values as copies", strerror(-rc));
}

void ol_daemon_kvpool_ready(struct ol_daemon *d)
{
    if (d->kvpool)
        atomic_store(&d->kvpool->ready, 1);
}

void ol_daemon_kvpool_close(struct ol_daemon *d)
{
    if (d->kvpool)
        atomic_store(&d->kvpool->closing, 1);
}

bool ol_daemon_kvpool_quiet(struct ol_daemon *d)
{
    return !d->kvpool || atomic_load(&d->kvpool->inflight) == 0;
}

size_t ol_daemon_kvpool_metrics(struct ol_daemon *d, char *buf, size_t cap)
{
    struct ol_kvpool *kp = d->kvpool;
    if (!kp)
        return 0;
    const char *c = d->cfg.cluster.name;
    int n = snprintf(buf, cap,
                     "openlake_kvpool_fetched_keys_total{cluster=\"%s\"} %llu\n"
                     "openlake_kvpool_fetch_misses_total{cluster=\"%s\"} %llu\n"
                     "openlake_kvpool_fetch_failures_total{cluster=\"%s\"} %llu\n"
                     "openlake_kvpool_pushes_total{cluster=\"%s\"} %llu\n"
                     "openlake_kvpool_push_drops_total{cluster=\"%s\"} %llu\n"
                     "openlake_kvpool_push_failures_total{cluster=\"%s\"} %llu\n"
                     "openlake_kvpool_served_gets_total{cluster=\"%s\"} %llu\n"
                     "openlake_kvpool_served_puts_total{cluster=\"%s\"} %llu\n"
                     "openlake_kvpool_served_disk_keys_total{cluster=\"%s\"} %llu\n"
                     "openlake_kvpool_fetched_later_home_total{cluster=\"%s\"} %llu\n"
                     "openlake_kvpool_rma_keys_total{cluster=\"%s\"} %llu\n"
                     "openlake_kvpool_rma_bytes_total{cluster=\"%s\"} %llu\n"
                     "openlake_kvpool_rma_retries_total{cluster=\"%s\"} %llu\n"
                     "openlake_kvpool_rma_direct_keys_total{cluster=\"%s\"} %llu\n"
                     "openlake_kvpool_served_grants_total{cluster=\"%s\"} %llu\n"
                     "openlake_kvpool_lookup_hits_total{cluster=\"%s\"} %llu\n"
                     "openlake_kvpool_served_exists_total{cluster=\"%s\"} %llu\n",
                     c, (unsigned long long)atomic_load(&kp->fetched_keys), c,
                     (unsigned long long)atomic_load(&kp->fetch_misses), c,
                     (unsigned long long)atomic_load(&kp->fetch_failures), c,
                     (unsigned long long)atomic_load(&kp->pushes), c,
                     (unsigned long long)atomic_load(&kp->push_drops), c,
                     (unsigned long long)atomic_load(&kp->push_failures), c,
                     (unsigned long long)atomic_load(&kp->served_gets), c,
                     (unsigned long long)atomic_load(&kp->served_puts), c,
                     (unsigned long long)atomic_load(&kp->served_disk_keys), c,
                     (unsigned long long)atomic_load(&kp->fetched_later), c,
                     (unsigned long long)atomic_load(&kp->rma_keys), c,
                     (unsigned long long)atomic_load(&kp->rma_bytes), c,
                     (unsigned long long)atomic_load(&kp->rma_retries), c,
                     (unsigned long long)atomic_load(&kp->rma_direct_keys), c,
                     (unsigned long long)atomic_load(&kp->served_grants), c,
                     (unsigned long long)atomic_load(&kp->lookup_hits), c,
                     (unsigned long long)atomic_load(&kp->served_exists));
    return n < 0 ? 0 : (size_t)n;
}

void ol_daemon_kvpool_destroy(struct ol_daemon *d)
{
    struct ol_kvpool *kp = d->kvpool;
    if (!kp)
        return;
    d->kvpool = NULL;
    while (kp->retired) {
        struct kp_retired *r = kp->retired;
        kp->retired = r->next;
        ol_place_destroy(r->p);
        free(r->mb);
        free(r);
    }
    ol_place_destroy(atomic_load(&kp->place));
    free(atomic_load(&kp->members));
    free(kp->kbuf);
    free(kp->cores);
    free(kp);
}
