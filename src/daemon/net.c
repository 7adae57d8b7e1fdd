/*
 * net.c - openlaked's node RPC: the endpoint of src/net on a loop of its
 * own, its peers kept in step with the cluster's membership.
 *
 * Owns: the "net" loop and its thread (not a data core: it runs no S3 or
 * KV connection), the ol_rpc endpoint listening on rpc_addr with the
 * cluster secret (over TLS with rpc_tls_cert, rpc_tls_key and rpc_tls_ca),
 * and the sync that makes every other member a peer (at the numeric
 * rpc_addr of its record) and forgets members that left. The
 * sync checks the membership view's revision (cluster/member.h) every
 * OL_NET_SYNC_MS and copies the view only when it moved; the endpoint
 * carries that revision in its frames, and a peer's newer one (held for
 * OL_NET_BEHIND_MS) makes the membership read again (ol_cluster_refresh:
 * a stalled watch); each new view also goes to the KV
 * pool (kvpool.c: its placement), whose KV_GET/KV_PUT handlers this loop
 * serves, and is checked for members whose records state another
 * cluster.kv_replicas (one warning per change of who differs). Only in a
 * cluster ([cluster]).
 *
 * And the probe (POST /_openlake/cluster/probe, admin_cluster.c): one
 * peer after another, the round trip of 16 empty PINGs (the median) and
 * the bytes per second each way (PINGs of OL_PROBE_CHUNK, OL_PROBE_DEPTH
 * in flight: replies of that size for "from", requests for "to"), over
 * the very connections the cluster uses. Its results are read by the
 * admin cores under the probe's mutex.
 */
#include "daemon/daemon.h"

#include "base/log.h"
#include "net/rpc.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OL_NET_SYNC_MS 200
#define OL_NET_BEHIND_MS 1000 /* a peer's revision ahead this long: read the members again */
#define OL_NET_STOP_MS 1000   /* connections closing at shutdown: at most this */
#define OL_PROBE_RTT_N 16
#define OL_PROBE_CHUNK (1u << 20)
#define OL_PROBE_DEPTH 4
#define OL_PROBE_CALL_MS 5000

struct ol_probe_result {
    int64_t peer;
    bool ok;
    uint64_t rtt_ns;
    double to_bps, from_bps;
    char error[96];
};

/* The probe: what admin cores read (under mu), and the net loop's run. */
struct ol_probe {
    pthread_mutex_t mu;
    uint64_t id;
    bool running;
    uint32_t mib;
    int n;                          /* results: one per peer when it started */
    struct ol_probe_result *res;
    struct ol_msg start_msg;
    /* the net loop's alone */
    int cur, phase;                 /* peer index; 0 rtt, 1 from, 2 to */
    uint32_t chunk, issued, done, inflight, total;
    bool failed;
    uint64_t t0, t_call, bytes;
    uint64_t rtt[OL_PROBE_RTT_N];
};

struct ol_daemon_net {
    struct ol_daemon *d;
    ol_loop *loop;
    struct ol_rpc *rpc;
    struct ol_timer sync, stop_check;
    struct ol_member *view;     /* OL_MEMBER_MAX, reused by each sync */
    int64_t synced;             /* the view revision the peers follow */
    int64_t *peers;             /* ids that are peers now, ascending */
    int npeers;
    int64_t bad_logged;         /* the revision a bad address was last logged at */
    int64_t asked;              /* the peer revision the last refresh was asked for */
    uint64_t behind_since;      /* ms: since when a peer's revision is ahead (0: it is not) */
    struct ol_msg stop_msg;
    uint64_t stop_since;
    struct ol_probe probe;
    char err[256];
    uint64_t replicas_key;      /* who differs on kv_replicas, as last logged (0: none) */
};

/* Who differs on kv_replicas, as a key that a member joining or leaving
 * with the most common value does not change: the values present and
 * each (id, value) of a member with another value. 0: they agree. */
static uint64_t replicas_key(const struct ol_member *m, int cnt)
{
    int per[OL_MEMBER_MAX_REPLICAS + 1] = {0}, most = 0, values = 0;
    for (int i = 0; i < cnt; i++)
        if (m[i].kv_replicas > 0 && m[i].kv_replicas <= OL_MEMBER_MAX_REPLICAS &&
            per[m[i].kv_replicas]++ == 0)
            values++;
    if (values < 2)
        return 0;
    for (int r = 1; r <= OL_MEMBER_MAX_REPLICAS; r++)
        if (per[r] > per[most])
            most = r;
    uint64_t h = 1469598103934665603ull;            /* FNV-1a over what differs */
#define MIX(x) (h = (h ^ (uint64_t)(x)) * 1099511628211ull)
    for (int r = 1; r <= OL_MEMBER_MAX_REPLICAS; r++)
        MIX(per[r] ? r : 0);
    for (int i = 0; i < cnt; i++)
        if (m[i].kv_replicas > 0 && m[i].kv_replicas != most) {
            MIX(m[i].id);
            MIX(m[i].kv_replicas);
        }
#undef MIX
    return h ? h : 1;
}

/* The members place keys with their own cluster.kv_replicas: a warning
 * when they differ, again only when who differs changes (not when a
 * member with the most common value comes or goes), and a line when they
 * agree again. */
static void check_replicas(struct ol_daemon_net *n, int cnt)
{
    uint64_t key = replicas_key(n->view, cnt);
    if (key == n->replicas_key)
        return;
    n->replicas_key = key;
    char now[512];
    ol_member_replicas_differ(n->view, cnt, now, sizeof now);
    if (key && n->d->kv)
        ol_warn("cluster %s: cluster.kv_replicas differs between members: %s; each node "
                "places keys with its own (this one with %lld), so a value saved through a "
                "node with fewer has fewer copies: set it the same on every node",
                n->d->cfg.cluster.name, now, (long long)n->d->cfg.cluster.kv_replicas);
    else if (key)
        ol_warn("cluster %s: cluster.kv_replicas differs between members: %s; each node "
                "places keys with its own, so a value saved through a node with fewer has "
                "fewer copies: set it the same on every node", n->d->cfg.cluster.name, now);
    else
        ol_info("cluster %s: the members agree on cluster.kv_replicas again",
                n->d->cfg.cluster.name);
}

static void net_sync(ol_loop *loop, struct ol_timer *t)
{
    struct ol_daemon_net *n = (struct ol_daemon_net *)((char *)t - offsetof(struct ol_daemon_net, sync));
    struct ol_cluster_view v;
    int64_t have = ol_cluster_revision(n->d->cluster);
    /* A peer's frames carry a newer revision than this view for a second:
     * the watch delivers within milliseconds, so it has stalled; ask for
     * one read of the members (once per revision seen: a peer's bogus
     * revision costs one read, not one a second). */
    int64_t peer = ol_rpc_peer_revision(n->rpc);
    if (peer > have && peer > n->asked) {
        uint64_t now = ol_loop_now_ms(loop);
        if (!n->behind_since) {
            n->behind_since = now;
        } else if (now - n->behind_since >= OL_NET_BEHIND_MS &&
                   ol_cluster_refresh(n->d->cluster, peer)) {
            n->asked = peer;
            n->behind_since = 0;
        }
    } else {
        n->behind_since = 0;
    }
    if (have != n->synced)
        ol_cluster_view(n->d->cluster, &v, n->view, OL_MEMBER_MAX);
    else
        v.revision = n->synced;
    if (v.revision != n->synced) {
        int cnt = v.n < OL_MEMBER_MAX ? v.n : OL_MEMBER_MAX;
        int64_t *next = malloc(sizeof *next * (size_t)(cnt ? cnt : 1));
        int nn = 0;
        if (next) {
            for (int i = 0; i < cnt; i++) {
                const struct ol_member *m = &n->view[i];
                if (m->id == n->d->cfg.self_id || !m->rpc_addr[0])
                    continue;
                int rc = ol_rpc_peer_set(n->rpc, m->id, m->rpc_addr);
                if (rc == 0) {
                    next[nn++] = m->id;
                } else if (n->bad_logged != v.revision) {
                    n->bad_logged = v.revision;
                    ol_warn("cluster %s: member %lld: rpc_addr \"%s\" %s: not reachable over "
                            "the node RPC", n->d->cfg.cluster.name, (long long)m->id,
                            m->rpc_addr, rc == -ENOSPC ? "past the peer limit"
                                                       : "is not a numeric host:port");
                }
            }
            /* Both lists ascend (the view is in id order): forget the
             * peers that are not members any more. */
            int j = 0;
            for (int i = 0; i < n->npeers; i++) {
                while (j < nn && next[j] < n->peers[i])
                    j++;
                if (j >= nn || next[j] != n->peers[i])
                    ol_rpc_peer_remove(n->rpc, n->peers[i]);
            }
            free(n->peers);
            n->peers = next;
            n->npeers = nn;
            n->synced = v.revision;
            ol_rpc_set_revision(n->rpc, v.revision);
            ol_daemon_kvpool_view(n->d, n->view, cnt, v.revision, ol_loop_now_ms(loop));
            check_replicas(n, cnt);
        }
    }
    ol_timer_arm(loop, t, OL_NET_SYNC_MS);
}

/* ---- the probe -------------------------------------------------------------- */

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void probe_issue(struct ol_daemon_net *n);

/* The current peer is done (measured or failed): the next, or the end. */
static void probe_next(struct ol_daemon_net *n)
{
    struct ol_probe *p = &n->probe;
    for (;;) {
        p->cur++;
        if (p->cur >= p->n) {
            pthread_mutex_lock(&p->mu);
            p->running = false;
            pthread_mutex_unlock(&p->mu);
            return;
        }
        struct ol_probe_result *res = &p->res[p->cur];
        if (ol_rpc_peer_ready(n->rpc, res->peer))
            break;
        pthread_mutex_lock(&p->mu);
        snprintf(res->error, sizeof res->error, "not connected");
        pthread_mutex_unlock(&p->mu);
    }
    p->phase = 0;
    p->issued = p->done = p->inflight = 0;
    p->failed = false;
    p->total = OL_PROBE_RTT_N;
    p->bytes = 0;
    probe_issue(n);
}

static void probe_fail(struct ol_daemon_net *n, const char *why)
{
    struct ol_probe *p = &n->probe;
    if (!p->failed) {
        pthread_mutex_lock(&p->mu);
        snprintf(p->res[p->cur].error, sizeof p->res[p->cur].error, "%s", why);
        pthread_mutex_unlock(&p->mu);
    }
    p->failed = true;
    if (!p->inflight)
        probe_next(n);
}

static void probe_done(void *arg, int rc, const uint8_t *payload, uint32_t len)
{
    (void)payload;
    struct ol_daemon_net *n = arg;
    struct ol_probe *p = &n->probe;
    p->inflight--;
    if (rc != OL_RPC_OK) {
        probe_fail(n, rc < 0 ? strerror(-rc) : ol_rpc_status_name(rc));
        return;
    }
    if (p->failed) {
        if (!p->inflight)
            probe_next(n);
        return;
    }
    uint64_t now = mono_ns();
    if (p->phase == 0)
        p->rtt[p->done] = now - p->t_call;
    p->bytes += p->phase == 1 ? len : p->phase == 2 ? p->chunk : 0;
    if (++p->done < p->total) {
        probe_issue(n);
        return;
    }
    struct ol_probe_result *res = &p->res[p->cur];
    double secs = (double)(now - p->t0) / 1e9;
    pthread_mutex_lock(&p->mu);
    if (p->phase == 0) {
        qsort(p->rtt, OL_PROBE_RTT_N, sizeof *p->rtt, cmp_u64);
        res->rtt_ns = p->rtt[OL_PROBE_RTT_N / 2];
    } else if (p->phase == 1) {
        res->from_bps = secs > 0 ? (double)p->bytes / secs : 0;
    } else {
        res->to_bps = secs > 0 ? (double)p->bytes / secs : 0;
        res->ok = true;
    }
    pthread_mutex_unlock(&p->mu);
    if (p->phase == 2) {
        probe_next(n);
        return;
    }
    p->phase++;
    p->issued = p->done = 0;
    p->bytes = 0;
    p->total = (uint32_t)(((uint64_t)p->mib << 20) / p->chunk);
    if (!p->total)
        p->total = 1;
    probe_issue(n);
}

/* Issues the current phase's calls: one at a time for the round trip, up
 * to OL_PROBE_DEPTH for the throughput. */
static void probe_issue(struct ol_daemon_net *n)
{
    static const uint8_t zeros[OL_PROBE_CHUNK];
    struct ol_probe *p = &n->probe;
    uint32_t depth = p->phase == 0 ? 1 : OL_PROBE_DEPTH;
    if (p->issued == 0)
        p->t0 = mono_ns();
    while (!p->failed && p->issued < p->total && p->inflight < depth) {
        uint8_t hdr[4] = {0};
        uint32_t want = p->phase == 1 ? p->chunk : 0;
        for (int i = 0; i < 4; i++)
            hdr[i] = (uint8_t)(want >> (8 * i));
        struct iovec iov[2] = {{hdr, 4}, {(void *)(uintptr_t)zeros, 0}};
        if (p->phase == 2)
            iov[1].iov_len = p->chunk - 4;
        p->t_call = mono_ns();
        int rc = ol_rpc_call(n->rpc, p->res[p->cur].peer, OL_RPC_OP_PING, iov, 2, want,
                             OL_PROBE_CALL_MS, probe_done, n);
        if (rc == -EAGAIN && p->inflight)
            return;         /* the peer's slots or reply window: on the next reply */
        if (rc < 0) {
            probe_fail(n, strerror(-rc));
            return;
        }
        p->issued++;
        p->inflight++;
    }
}

static void probe_on_start(ol_loop *loop, struct ol_msg *m)
{
    (void)loop;
    struct ol_daemon_net *n =
        (struct ol_daemon_net *)((char *)m - offsetof(struct ol_daemon_net, probe.start_msg));
    struct ol_probe *p = &n->probe;
    struct ol_probe_result *res = calloc((size_t)(n->npeers ? n->npeers : 1), sizeof *res);
    pthread_mutex_lock(&p->mu);
    free(p->res);
    p->res = res;
    p->n = res ? n->npeers : 0;
    for (int i = 0; i < p->n; i++)
        res[i].peer = n->peers[i];
    pthread_mutex_unlock(&p->mu);
    /* a request of chunk bytes must fit the window (the peers' is assumed
     * to be this node's: one setting for the cluster) */
    uint32_t w = (uint32_t)n->d->cfg.cluster.rpc_window_bytes;
    p->chunk = w / OL_PROBE_DEPTH - 64 < OL_PROBE_CHUNK ? w / OL_PROBE_DEPTH - 64 : OL_PROBE_CHUNK;
    p->cur = -1;
    probe_next(n);
}

int ol_daemon_net_probe_start(struct ol_daemon *d, uint32_t mib, uint64_t *id)
{
    struct ol_daemon_net *n = d->net;
    if (!n)
        return -ENOTCONN;
    struct ol_probe *p = &n->probe;
    pthread_mutex_lock(&p->mu);
    if (p->running) {
        pthread_mutex_unlock(&p->mu);
        return -EBUSY;
    }
    p->running = true;
    p->mib = mib;
    *id = ++p->id;
    pthread_mutex_unlock(&p->mu);
    p->start_msg.fn = probe_on_start;
    ol_loop_post(n->loop, &p->start_msg);
    return 0;
}

size_t ol_daemon_net_probe_json(struct ol_daemon *d, char *buf, size_t cap)
{
    struct ol_daemon_net *n = d->net;
    struct ol_probe *p = &n->probe;
    size_t o = 0;
#define SAY(...)                                                                          \
    do {                                                                                  \
        int w_ = snprintf(buf + (o < cap ? o : cap), o < cap ? cap - o : 0, __VA_ARGS__); \
        if (w_ > 0)                                                                       \
            o += (size_t)w_;                                                              \
    } while (0)
    pthread_mutex_lock(&p->mu);
    SAY("{\"probe\":%" PRIu64 ",\"running\":%s,\"node\":%lld,\"mib\":%u,\"peers\":[", p->id,
        p->running ? "true" : "false", (long long)d->cfg.self_id, p->mib);
    for (int i = 0; i < p->n; i++) {
        const struct ol_probe_result *r = &p->res[i];
        SAY("%s{\"peer\":%lld,\"ok\":%s,\"rtt_us\":%.1f,\"to_bytes_per_s\":%.0f,"
            "\"from_bytes_per_s\":%.0f,\"error\":\"%s\"}",
            i ? "," : "", (long long)r->peer, r->ok ? "true" : "false",
            (double)r->rtt_ns / 1000.0, r->to_bps, r->from_bps, r->error);
    }
    pthread_mutex_unlock(&p->mu);
    SAY("]}\n");
#undef SAY
    return o;
}

void ol_daemon_ucx_devices(const struct ol_config *c, char *devs, size_t devs_len, char *gid,
                           size_t gid_len)
{
    size_t dl = 0;
    devs[0] = gid[0] = 0;
    for (int i = 0; i < c->rdma.n_devices && dl < devs_len; i++)
        dl += (size_t)snprintf(devs + dl, devs_len - dl, "%s%s", i ? "," : "",
                               c->rdma.devices[i]);
    if (c->rdma.gid_index >= 0)
        snprintf(gid, gid_len, "%d", (int)c->rdma.gid_index);
}

static int net_init(ol_loop *loop, void *arg)
{
    struct ol_daemon_net *n = arg;
    const struct ol_config *c = &n->d->cfg;
    /* [rdma]: the UCX context's devices and GID index, and remote reads */
    char devs[OL_DAEMON_UCX_DEVICES_LEN], gid[16];
    ol_daemon_ucx_devices(c, devs, sizeof devs, gid, sizeof gid);
    struct ol_rpc_params p = {
        .self_id = c->self_id,
        .rma = ol_daemon_kvpool_rma(n->d),
        .ucx_net_devices = devs,
        .ucx_gid_index = gid,
        .cluster = c->cluster.name,
        .secret = c->cluster.secret,
        .secret_len = strlen(c->cluster.secret),
        .listen_addr = c->rpc_addr,
        .transport = c->transport == OL_TRANSPORT_UCX ? "ucx" : "tcp",
        .tls_cert = c->rpc_tls_cert,
        .tls_key = c->rpc_tls_key,
        .tls_ca = c->rpc_tls_ca,
        .window = (uint32_t)c->cluster.rpc_window_bytes,
        .no_credits = !c->cluster.rpc_credits,
    };
    if (ol_rpc_create(loop, &p, &n->rpc, n->err, sizeof n->err) < 0)
        return -1;
    if (p.no_credits)
        ol_warn("cluster %s: cluster.rpc_credits = false: this node grants its peers 4 GiB of "
                "credit each, so nothing but their own limits bounds what it holds of their "
                "requests; for measuring only", c->cluster.name);
    if (p.rma)
        ol_warn("cluster %s: rdma.backend = \"ucx\": any process that opens a UCX connection "
                "to %s can read and write this daemon's memory (UCX's RMA checks no key "
                "over transports without hardware RMA); keep it on a network only the "
                "nodes reach", c->cluster.name, c->rpc_addr);
    if (ol_daemon_cstore_serve(n->d, loop, n->rpc) < 0) {
        snprintf(n->err, sizeof n->err, "the object store's drive service: out of memory");
        return -1;
    }
    ol_daemon_kvpool_attach(n->d, n->rpc);
    n->sync.fn = net_sync;
    ol_timer_arm(loop, &n->sync, 1);
    return 0;
}

int ol_daemon_net_start(struct ol_daemon *d, char *err, size_t errlen)
{
    if (!d->cluster)
        return 0;
    struct ol_daemon_net *n = calloc(1, sizeof *n);
    if (!n || !(n->view = calloc(OL_MEMBER_MAX, sizeof *n->view))) {
        free(n);
        snprintf(err, errlen, "node rpc: out of memory");
        return -1;
    }
    n->d = d;
    n->synced = -1;
    pthread_mutex_init(&n->probe.mu, NULL);
    n->bad_logged = -1;
    struct ol_loop_params lp = {.index = d->ncores, .cpu = -1, .recv_bufs = 256};
    if (ol_loop_create(&lp, &n->loop, err, errlen) < 0) {
        free(n->view);
        free(n);
        return -1;
    }
    if (ol_loop_start(n->loop, net_init, n) < 0) {
        /* a message that names its setting (rpc_tls_*) keeps it alone */
        snprintf(err, errlen, "%s%s", strncmp(n->err, "rpc_tls", 7) ? "rpc_addr: " : "",
                 n->err[0] ? n->err : "the net loop did not start");
        ol_loop_destroy(n->loop);
        free(n->view);
        free(n);
        return -1;
    }
    d->net = n;
    ol_info("node rpc: listening on %s (%s), cluster %s", d->cfg.rpc_addr,
            d->cfg.transport == OL_TRANSPORT_UCX ? "ucx"
            : d->cfg.rpc_tls_cert[0]             ? "tcp+tls"
                                                 : "tcp",
            d->cfg.cluster.name);
    return 0;
}

static void net_stop_check(ol_loop *loop, struct ol_timer *t)
{
    struct ol_daemon_net *n =
        (struct ol_daemon_net *)((char *)t - offsetof(struct ol_daemon_net, stop_check));
    if (ol_rpc_idle(n->rpc) || ol_loop_now_ms(loop) - n->stop_since >= OL_NET_STOP_MS)
        ol_loop_stop(loop);
    else
        ol_timer_arm(loop, t, 10);
}

static void net_on_stop(ol_loop *loop, struct ol_msg *m)
{
    struct ol_daemon_net *n = (struct ol_daemon_net *)((char *)m - offsetof(struct ol_daemon_net, stop_msg));
    ol_timer_cancel(loop, &n->sync);
    ol_rpc_close_all(n->rpc);
    n->stop_since = ol_loop_now_ms(loop);
    n->stop_check.fn = net_stop_check;
    ol_timer_arm(loop, &n->stop_check, 1);
}

void ol_daemon_net_stop(struct ol_daemon *d)
{
    struct ol_daemon_net *n = d->net;
    if (!n)
        return;
    n->stop_msg.fn = net_on_stop;
    ol_loop_post(n->loop, &n->stop_msg);
    ol_loop_join(n->loop);
    d->net = NULL;
    ol_rpc_destroy(n->rpc);
    ol_daemon_cstore_unserve(d);   /* its files closed with the endpoint's connections */
    ol_loop_destroy(n->loop);
    free(n->peers);
    free(n->view);
    free(n->probe.res);
    pthread_mutex_destroy(&n->probe.mu);
    free(n);
}

ol_loop *ol_daemon_net_loop(struct ol_daemon *d)
{
    return d->net ? d->net->loop : NULL;
}

struct ol_rpc *ol_daemon_net_rpc(struct ol_daemon *d)
{
    return d->net ? d->net->rpc : NULL;
}

size_t ol_daemon_net_metrics(struct ol_daemon *d, char *buf, size_t cap)
{
    if (!d->net)
        return 0;
    char labels[96];
    snprintf(labels, sizeof labels, "cluster=\"%s\"", d->cfg.cluster.name);
    return ol_rpc_metrics(d->net->rpc, labels, buf, cap);
}
