/*
 * net.c - openlaked's node RPC: the endpoint of src/net on a loop of its
 * own, its peers kept in step with the cluster's membership.
 *
 * Owns: the "net" loop and its thread (not a data core: it runs no S3 or
 * KV connection), the ol_rpc endpoint listening on rpc_addr with the
 * cluster secret, and the sync that makes every other member a peer (at
 * the numeric rpc_addr of its record) and forgets members that left. The
 * sync reads the membership view (cluster/member.h) every
 * OL_NET_SYNC_MS and acts only when its revision moved; the endpoint
 * carries that revision in its frames. Only in a cluster ([cluster]).
 */
#include "daemon/daemon.h"

#include "base/log.h"
#include "net/rpc.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OL_NET_SYNC_MS 200
#define OL_NET_STOP_MS 1000   /* connections closing at shutdown: at most this */

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
    struct ol_msg stop_msg;
    uint64_t stop_since;
    char err[256];
};

static void net_sync(ol_loop *loop, struct ol_timer *t)
{
    struct ol_daemon_net *n = (struct ol_daemon_net *)((char *)t - offsetof(struct ol_daemon_net, sync));
    struct ol_cluster_view v;
    ol_cluster_view(n->d->cluster, &v, n->view, OL_MEMBER_MAX);
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
        }
    }
    ol_timer_arm(loop, t, OL_NET_SYNC_MS);
}

static int net_init(ol_loop *loop, void *arg)
{
    struct ol_daemon_net *n = arg;
    const struct ol_config *c = &n->d->cfg;
    struct ol_rpc_params p = {
        .self_id = c->self_id,
        .cluster = c->cluster.name,
        .secret = c->cluster.secret,
        .secret_len = strlen(c->cluster.secret),
        .listen_addr = c->rpc_addr,
        .window = (uint32_t)c->cluster.rpc_window_bytes,
    };
    if (ol_rpc_create(loop, &p, &n->rpc, n->err, sizeof n->err) < 0)
        return -1;
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
    n->bad_logged = -1;
    struct ol_loop_params lp = {.index = d->ncores, .cpu = -1, .recv_bufs = 256};
    if (ol_loop_create(&lp, &n->loop, err, errlen) < 0) {
        free(n->view);
        free(n);
        return -1;
    }
    if (ol_loop_start(n->loop, net_init, n) < 0) {
        snprintf(err, errlen, "rpc_addr: %s", n->err[0] ? n->err : "the net loop did not start");
        ol_loop_destroy(n->loop);
        free(n->view);
        free(n);
        return -1;
    }
    d->net = n;
    ol_info("node rpc: listening on %s (tcp), cluster %s", d->cfg.rpc_addr, d->cfg.cluster.name);
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
    ol_loop_destroy(n->loop);
    free(n->peers);
    free(n->view);
    free(n);
}

size_t ol_daemon_net_metrics(struct ol_daemon *d, char *buf, size_t cap)
{
    if (!d->net)
        return 0;
    char labels[96];
    snprintf(labels, sizeof labels, "cluster=\"%s\"", d->cfg.cluster.name);
    return ol_rpc_metrics(d->net->rpc, labels, buf, cap);
}
