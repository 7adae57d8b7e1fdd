/*
 * cstore.c - openlaked's side of the object store across hosts (being
 * built: docs/cluster.md "The object store across hosts"): the pool this
 * node is in (cluster.store_pools), its record in etcd, this node's drives
 * formatted to it, the DRIVE server for them on the node RPC, and the
 * store opened over all of the pool's drives, the other nodes' through
 * the DRIVE client.
 *
 * Owns: struct ol_daemon_cstore (the record, this node's index in the
 * pool, its drives' uuids and directories for the server, the client and
 * the engine's hooks over it).
 *
 * When: prepare on the main thread after the cluster join and before the
 * node RPC starts (blocking etcd calls, drive formats); serve on the net
 * loop as it starts (net.c), before any peer connects; open on the main
 * thread once the net loop runs and before the cores (ol_store_open).
 * Shutdown: ol_daemon_cstore_quiet tells when no step of the cores is out
 * at another node (the cores run until then); close after the store closed.
 *
 * Must not: run on a loop thread (prepare and open block), or open a
 * store whose pool does not match this node's configuration: every
 * mismatch stops the start with a line saying what differs.
 */
#include "daemon/daemon.h"

#include "base/container.h"
#include "base/le.h"
#include "base/log.h"
#include "cluster/drive.h"
#include "cluster/etcd.h"
#include "cluster/lock.h"
#include "cluster/member.h"
#include "cluster/pool_rec.h"
#include "store/catalog.h"
#include "store/engine.h"
#include "store/format.h"
#include "store/layout.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define OL_CSTORE_ETCD_WAIT_S 60   /* first formation: how long to wait for etcd */
#define OL_CSTORE_OWNER_MS    500  /* the owners thread's period */

/* A set's owner as last read from etcd (docs/cluster.md "Ordering"). */
struct cs_owner {
    int64_t node;                       /* -1: none */
    int64_t token;                      /* the key's revision: the fencing token */
};

struct ol_daemon_cstore {
    struct ol_pool_rec rec;
    int index;                          /* this node's in the pool */
    unsigned d;                         /* drives per node (its data_dirs) */
    struct ol_drv_local local[OL_CONFIG_MAX_DATA_DIRS];
    _Atomic int64_t fence[OL_CONFIG_MAX_DATA_DIRS];   /* each local drive's token */
    pthread_mutex_t fmu[OL_CONFIG_MAX_DATA_DIRS];     /* whoever writes its fence file */
    struct ol_drv_server *server;       /* on the net loop */
    struct ol_drv_client *client;
    struct ol_drv_remote *remote;
    struct ol_store_remote hooks;
    bool *flags;                        /* per position: another node's */
    char (*names)[48];                  /* per remote position: its name in messages */
    const char **paths;
    /* set owners: the thread that takes and gives back this node's sets */
    pthread_t owner_t;
    bool owner_started;
    atomic_bool stop;
    struct ol_etcd *oe;                 /* the thread's */
    pthread_mutex_t omu;                /* owners[], the counters */
    struct cs_owner *owners;            /* one per set */
    struct cs_owner *scan;              /* the thread's: what a round reads */
    uint32_t *fenced;                   /* the thread's: per set, its positions that took
                                           this node's token (bit = drive of the set) */
    int64_t *fenced_token;              /* the token those bits are for */
    int64_t *refence_goal;              /* the thread's: per set, the token its last fence
                                           again for orphaned locks made (0: none) */
    bool *refence_due;                  /* the thread's: per set, orphans of it wait for a
                                           new token not yet put */
    uint8_t orphans_new[OL_STORE_KEY_LOCKS / 8];  /* under omu: locks whose holder's
                                                     connection ended (held on) */
    uint8_t orphans_wait[OL_STORE_KEY_LOCKS / 8]; /* the thread's: those it took in */
    uint16_t orphan_set[OL_STORE_KEY_LOCKS];      /* under omu: the set of each orphan */
    unsigned rounds;
    unsigned sets;
    uint64_t owned, taken, given;
    /* commit locks (docs/cluster.md "Ordering") */
    struct ol_store_locks locks;        /* the engine's hooks */
    ol_loop *net;
    struct ol_rpc *rpc;
    int lk_slot;                        /* the owner side's connection slot */
    _Atomic uint64_t lk_out;            /* asks and gives back not done (cores quiet) */
    _Atomic uint64_t lk_granted, lk_busy, lk_refused, lk_served, lk_late, lk_orphaned;
    _Atomic uint64_t lk_ticket;         /* the last LOCK's ticket (cluster/lock.h) */
    uint64_t lk_tickets[OL_STORE_KEY_LOCKS];   /* net loop: the ticket of each lock this
                                                  node granted to another (0: none) */
    uint16_t lk_sets[OL_STORE_KEY_LOCKS];      /* net loop: the set of each such lock */
    _Atomic(struct ol_store *) store;   /* d->store once open, for the net loop's handlers */
};

static void cstore_free(struct ol_daemon_cstore *cs)
{
    if (!cs)
        return;
    for (unsigned j = 0; j < cs->d; j++)
        if (cs->local[j].dfd >= 0)
            close(cs->local[j].dfd);
    ol_drv_remote_destroy(cs->remote);
    ol_drv_client_destroy(cs->client);   /* NULL unless the net loop never started */
    ol_drv_server_destroy(cs->server);
    ol_pool_rec_free(&cs->rec);
    free(cs->owners);
    free(cs->scan);
    free(cs->fenced);
    free(cs->fenced_token);
    free(cs->refence_goal);
    free(cs->refence_due);
    free(cs->flags);
    free(cs->names);
    free(cs->paths);
    free(cs);
}

/* The pool's record from etcd, made by this node if there is none yet. */
static int pool_record(struct ol_daemon *d, const struct ol_pool_rec *mine,
                       struct ol_pool_rec *out, char *err, size_t errlen)
{
    const struct ol_config *c = &d->cfg;
    struct ol_etcd_opts o;
    ol_cluster_etcd_opts(c, &o);
    struct ol_etcd *e = NULL;
    int rc = ol_etcd_open(&o, &e, err, errlen);
    if (rc < 0)
        return rc;
    size_t len = 0;
    char *js = ol_pool_rec_encode(mine, &len);
    size_t havelen = len + 4096;
    char *have = malloc(havelen);
    char key[256];
    snprintf(key, sizeof key, "/openlake/%s/store/pools/%u", c->cluster.name, mine->pool);
    rc = -ENOMEM;
    for (time_t until = time(NULL) + OL_CSTORE_ETCD_WAIT_S; js && have;) {
        int64_t rev = 0;
        char eerr[256];
        rc = ol_etcd_create(e, key, js, len, 0, &rev, have, havelen, eerr, sizeof eerr);
        if (rc == 0) {
            ol_info("cluster %s: object store pool %u made (%u nodes, sets of %u, parity %u)",
                    c->cluster.name, mine->pool, mine->shape.nodes, mine->shape.set_drives,
                    mine->shape.parity);
            rc = ol_pool_rec_decode(js, len, out, err, errlen);
            break;
        }
        if (rc == 1) {
            rc = ol_pool_rec_decode(have, strlen(have), out, err, errlen);
            if (rc < 0) {
                char tmp[256];
                snprintf(tmp, sizeof tmp, "%s", err);
                snprintf(err, errlen, "etcd %s: %s", key, tmp);
            }
            break;
        }
        if (time(NULL) >= until) {
            snprintf(err, errlen, "cluster %s: etcd did not answer for %d s (%s): the object "
                     "store's pool record is needed to start", c->cluster.name,
                     OL_CSTORE_ETCD_WAIT_S, eerr);
            break;
        }
        sleep(1);
    }
    free(js);
    free(have);
    ol_etcd_close(e);
    return rc < 0 ? rc : 0;
}

/* What this node's configuration says the pool is: -1 with err when it
 * cannot be one. */
static int pool_wanted(struct ol_daemon *d, struct ol_pool_rec *mine, char *err, size_t errlen)
{
    const struct ol_config *c = &d->cfg;
    int64_t *nodes = malloc(OL_POOL_MAX_NODES * sizeof *nodes);
    unsigned n = 0;
    if (!nodes)
        return -1;
    int rc = ol_pool_parse_nodes(c->cluster.store_pools[0], nodes, OL_POOL_MAX_NODES, &n, err,
                                 errlen);
    if (rc == 0 && c->mode == OL_MODE_KV) {
        snprintf(err, errlen, "cluster.store_pools is set in mode kv: no object store here");
        rc = -1;
    }
    bool in = false;
    for (unsigned i = 0; rc == 0 && i < n; i++)
        in |= nodes[i] == c->self_id;
    if (rc == 0 && !in) {
        snprintf(err, errlen, "cluster.store_pools: this node (self_id %lld) is in no pool",
                 (long long)c->self_id);
        rc = -1;
    }
    unsigned dpn = (unsigned)c->n_data_dirs;
    unsigned dd = c->set_drive_count ? (unsigned)c->set_drive_count
                                     : ol_pool_auto_set_drives(n, dpn);
    struct ol_pool_shape s = {n, dpn, dd, 0};
    if (rc == 0 && dd)
        s.parity = c->default_parity_count >= 0 ? (unsigned)c->default_parity_count
                                                : ol_pool_auto_parity(n, dd);
    if (rc == 0 && dd == 0) {
        snprintf(err, errlen, "cluster.store_pools: %u nodes of %u drives: no set size from 2 "
                 "to 16 divides %u drives; give set_drive_count", n, dpn, n * dpn);
        rc = -1;
    }
    if (rc == 0)
        rc = ol_pool_rec_new(0, nodes, &s, mine, err, errlen);
    free(nodes);
    return rc < 0 ? -1 : 0;
}

/* The record against this node's settings: what must agree. */
static int pool_agrees(struct ol_daemon *d, const struct ol_pool_rec *want,
                       const struct ol_pool_rec *rec, char *err, size_t errlen)
{
    const struct ol_config *c = &d->cfg;
    bool nodes_same = want->shape.nodes == rec->shape.nodes;
    for (unsigned i = 0; nodes_same && i < rec->shape.nodes; i++)
        nodes_same = want->nodes[i] == rec->nodes[i];
    if (!nodes_same) {
        snprintf(err, errlen, "cluster.store_pools \"%s\" is not the pool etcd holds (%u nodes, "
                 "from node %lld): every node of a pool lists the same nodes in the same "
                 "order", c->cluster.store_pools[0], rec->shape.nodes, (long long)rec->nodes[0]);
        return -1;
    }
    if (want->shape.drives_per_node != rec->shape.drives_per_node) {
        snprintf(err, errlen, "this node has %u data_dirs, the pool's nodes %u each: every "
                 "node of a pool has as many drives", want->shape.drives_per_node,
                 rec->shape.drives_per_node);
        return -1;
    }
    if (c->set_drive_count && (unsigned)c->set_drive_count != rec->shape.set_drives) {
        snprintf(err, errlen, "set_drive_count = %lld, but the pool's sets are of %u drives "
                 "(a pool's layout never changes)", (long long)c->set_drive_count,
                 rec->shape.set_drives);
        return -1;
    }
    if (c->default_parity_count >= 0 && (unsigned)c->default_parity_count != rec->shape.parity) {
        snprintf(err, errlen, "default_parity_count = %lld, but the pool's parity is %u",
                 (long long)c->default_parity_count, rec->shape.parity);
        return -1;
    }
    return 0;
}

/* Drive j of this node: formatted to its position, or refused. */
static int format_drive(struct ol_daemon *d, struct ol_daemon_cstore *cs, unsigned j,
                        char *err, size_t errlen)
{
    const struct ol_pool_rec *r = &cs->rec;
    unsigned n = r->shape.nodes, dd = r->shape.set_drives;
    unsigned g = ol_pool_position(n, (unsigned)cs->index, j);
    const char *path = d->cfg.data_dirs[j];
    struct ol_format f;
    int rc = ol_format_read(path, &f);
    if (rc == -ENOENT) {   /* blank: this position's drive from now on */
        struct ol_format w = {.sets = ol_pool_sets(&r->shape), .drives_per_set = dd,
                              .set = g / dd, .drive = g % dd, .layout = r->uuids};
        memcpy(w.deployment, r->deployment, 16);
        memcpy(w.uuid, r->uuids[g], 16);
        rc = ol_format_write(path, &w);
        if (rc < 0) {
            snprintf(err, errlen, "%s: cannot format it for the pool: %s", path, strerror(-rc));
            return -1;
        }
        ol_info("%s: formatted as pool position %u (set %u drive %u)", path, g, g / dd, g % dd);
    } else if (rc < 0) {
        snprintf(err, errlen, "%s: cannot read its format: %s", path, strerror(-rc));
        return -1;
    } else {
        bool ok = !memcmp(f.deployment, r->deployment, 16) && !memcmp(f.uuid, r->uuids[g], 16) &&
                  f.sets == ol_pool_sets(&r->shape) && f.drives_per_set == dd &&
                  f.set == g / dd && f.drive == g % dd;
        ol_format_free(&f);
        if (!ok) {
            snprintf(err, errlen, "%s: formatted for another deployment or position than this "
                     "node's drive %u of the pool (position %u): a single host's drive, or "
                     "another pool's; wipe it to reuse it", path, j, g);
            return -1;
        }
    }
    memcpy(cs->local[j].uuid, r->uuids[g], 16);
    cs->local[j].dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cs->local[j].dfd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    int64_t token = 0;
    rc = ol_drv_fence_read(cs->local[j].dfd, &token);
    if (rc < 0) {
        snprintf(err, errlen, "%s: its fence file (.openlake/fence) cannot be read: %s; move "
                 "it away to start (the set's owner writes it again)", path, strerror(-rc));
        return -1;
    }
    atomic_store(&cs->fence[j], token);
    cs->local[j].fence = &cs->fence[j];
    pthread_mutex_init(&cs->fmu[j], NULL);
    cs->local[j].fmu = &cs->fmu[j];
    return 0;
}

int ol_daemon_cstore_prepare(struct ol_daemon *d, char *err, size_t errlen)
{
    const struct ol_config *c = &d->cfg;
    if (!c->cluster.n_store_pools)
        return 0;
    if (!d->cluster) {
        snprintf(err, errlen, "cluster.store_pools needs a cluster (cluster.name, cluster.etcd)");
        return -1;
    }
    struct ol_daemon_cstore *cs = calloc(1, sizeof *cs);
    if (!cs) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (unsigned j = 0; j < OL_CONFIG_MAX_DATA_DIRS; j++)
        cs->local[j].dfd = -1;
    cs->d = (unsigned)c->n_data_dirs;
    struct ol_pool_rec want;
    if (pool_wanted(d, &want, err, errlen) < 0) {
        cstore_free(cs);
        return -1;
    }
    int rc = pool_record(d, &want, &cs->rec, err, errlen);
    if (rc == 0)
        rc = pool_agrees(d, &want, &cs->rec, err, errlen);
    ol_pool_rec_free(&want);
    cs->index = rc == 0 ? ol_pool_rec_index(&cs->rec, c->self_id) : -1;
    for (unsigned j = 0; rc == 0 && j < cs->d; j++)
        rc = format_drive(d, cs, j, err, errlen);
    if (rc < 0) {
        cstore_free(cs);
        return -1;
    }
    cs->sets = ol_pool_sets(&cs->rec.shape);
    cs->owners = calloc(cs->sets, sizeof *cs->owners);
    cs->scan = calloc(cs->sets, sizeof *cs->scan);
    cs->fenced = calloc(cs->sets, sizeof *cs->fenced);
    cs->fenced_token = calloc(cs->sets, sizeof *cs->fenced_token);
    cs->refence_goal = calloc(cs->sets, sizeof *cs->refence_goal);
    cs->refence_due = calloc(cs->sets, sizeof *cs->refence_due);
    if (!cs->owners || !cs->scan || !cs->fenced || !cs->fenced_token || !cs->refence_goal ||
        !cs->refence_due) {
        snprintf(err, errlen, "out of memory");
        cstore_free(cs);
        return -1;
    }
    for (unsigned s = 0; s < cs->sets; s++)
        cs->owners[s].node = -1;
    pthread_mutex_init(&cs->omu, NULL);
    d->cstore = cs;
    return 0;
}

/* ---- commit locks ----------------------------------------------------------------
 *
 * The engine asks for a key's commit lock through cs_lock (any core):
 * the set's owner as last read is this node: its own engine's table, now;
 * another node: LOCK over the node RPC (cluster/lock.h), whose handler
 * there takes the lock from that node's table if it owns the set. A lock
 * granted to another node is held on its connection (a bitmap in the
 * connection's slot, and the LOCK's ticket in lk_tickets) and given back by
 * an UNLOCK naming it and its ticket, or when the connection ends (the node
 * died, was cut off, or restarted) and the lock's set has been fenced
 * again with a new token (lk_conn_end, owners_round). A LOCK call that failed (its deadline
 * passed: the owner stalled) is followed by an UNLOCK of its ticket with
 * no lock id, since the owner may have granted it after all: the
 * connection delivers the two in order, and without it the key would stay
 * locked for as long as the connection lives. The token comes with the
 * grant; the drives check it (fences, below). */

struct lk_job {
    struct ol_msg msg;
    struct ol_timer t;                  /* an UNLOCK the owner's window had no room for */
    struct ol_daemon *d;
    ol_loop *home;                      /* NULL: an UNLOCK nobody waits for */
    struct ol_op *op;
    struct ol_store_lock *out;
    int64_t node, token;
    uint64_t ticket;
    uint64_t until_ms;                  /* an UNLOCK waiting for room: tried until then */
    int res;
    unsigned set;
    uint8_t hdr[OL_LOCK_HDR_LEN];
    uint16_t plen;
    char path[OL_LOCK_PATH_MAX + 1];
};

struct lk_held {
    uint8_t bits[OL_STORE_KEY_LOCKS / 8];
};

static void lk_home(ol_loop *loop, struct ol_msg *m)
{
    struct lk_job *j = OL_CONTAINER(m, struct lk_job, msg);
    struct ol_daemon_cstore *cs = j->d->cstore;
    struct ol_op *op = j->op;
    int res = j->res;
    free(j);
    atomic_fetch_sub(&cs->lk_out, 1);
    op->cb(loop, op, res, 0);
}

static void lk_finish(struct lk_job *j, int res)
{
    struct ol_daemon_cstore *cs = j->d->cstore;
    if (!j->home) {   /* an UNLOCK */
        free(j);
        atomic_fetch_sub(&cs->lk_out, 1);
        return;
    }
    j->res = res;
    j->msg.fn = lk_home;
    ol_loop_post(j->home, &j->msg);
}

static void lk_give_back(struct ol_daemon *d, int64_t node, unsigned set, uint32_t id,
                         uint64_t ticket);

static void lk_reply(void *arg, int rc, const uint8_t *p, uint32_t len)
{
    struct lk_job *j = arg;
    struct ol_daemon_cstore *cs = j->d->cstore;
    if (!j->home)
        return lk_finish(j, 0);
    int res = rc < 0 ? rc : rc != OL_RPC_OK || len != OL_LOCK_REPLY_LEN ? -EPROTO
                                                                         : (int32_t)ol_le_ld32(p);
    if (res == 0) {
        *j->out = (struct ol_store_lock){j->node, ol_le_ld32(p + 4), (int64_t)ol_le_ld64(p + 8),
                                         j->ticket};
        atomic_fetch_add(&cs->lk_granted, 1);
    } else if (res == -EBUSY) {
        atomic_fetch_add(&cs->lk_busy, 1);
    }
    if (rc < 0 && rc != -ECONNRESET)   /* it may have been granted after all */
        lk_give_back(j->d, j->node, j->set, OL_LOCK_ID_ANY, j->ticket);
    lk_finish(j, res == -ESTALE ? -EAGAIN : res);   /* not the owner (now): asked again */
}

static void lk_send(ol_loop *loop, struct ol_msg *m);

static void lk_retry(ol_loop *loop, struct ol_timer *t)
{
    struct lk_job *j = OL_CONTAINER(t, struct lk_job, t);
    lk_send(loop, &j->msg);
}

/* On the net loop: the call. */
static void lk_send(ol_loop *loop, struct ol_msg *m)
{
    struct lk_job *j = OL_CONTAINER(m, struct lk_job, msg);
    struct ol_daemon_cstore *cs = j->d->cstore;
    struct iovec iov[2] = {{j->hdr, OL_LOCK_HDR_LEN}, {j->path, j->plen}};
    int n = j->home ? 2 : 1;
    int rc = ol_rpc_call(cs->rpc, j->node, j->home ? OL_LOCK_RPC_LOCK : OL_LOCK_RPC_UNLOCK, iov, n,
                         OL_LOCK_REPLY_LEN, (uint32_t)j->d->cfg.cluster.store_timeout_ms,
                         lk_reply, j);
    uint64_t now = ol_loop_now_ms(loop);
    if (rc == -EAGAIN && !j->home && !j->until_ms)
        j->until_ms = now + (uint64_t)j->d->cfg.cluster.store_timeout_ms;
    if (rc == -EAGAIN && !j->home && now < j->until_ms) {
        /* an UNLOCK waits for room: dropped, it would leave the key locked at the
         * owner until the connection ends; but not forever (an owner that
         * stalled with its connection up; and a stopping node waits for it) */
        j->t.fn = lk_retry;
        ol_timer_arm(loop, &j->t, 1);
        return;
    }
    if (rc < 0)
        lk_finish(j, rc);
}

/* The engine's check of a change under a lock on this node's drive (pool
 * position `drive`): the token is the one the drive took. */
static bool cs_fenced(void *fud, unsigned drive, int64_t token)
{
    struct ol_daemon_cstore *cs = fud;
    unsigned j = ol_pool_drive_of(cs->rec.shape.nodes, drive);
    return j < cs->d && atomic_load(&cs->fence[j]) == token;
}

static int cs_lock(void *ud, ol_loop *loop, unsigned set, const char *path,
                   struct ol_store_lock *out, struct ol_op *op)
{
    struct ol_daemon *d = ud;
    struct ol_daemon_cstore *cs = d->cstore;
    int64_t node, token;
    size_t plen = strlen(path);
    if (plen > OL_LOCK_PATH_MAX)
        return -EINVAL;
    if (ol_daemon_cstore_owner(d, set, &node, &token) < 0)
        return -EAGAIN;   /* no owner now: asked again */
    struct lk_job *j = calloc(1, sizeof *j);
    if (!j)
        return -ENOMEM;
    j->d = d;
    j->home = loop;
    j->op = op;
    j->out = out;
    j->node = node;
    j->token = token;
    j->set = set;
    j->ticket = atomic_fetch_add(&cs->lk_ticket, 1) + 1;
    atomic_fetch_add(&cs->lk_out, 1);
    if (node == d->cfg.self_id) {   /* this node's table: the answer now, delivered later */
        unsigned slot;
        int rc = ol_store_key_trylock(d->store, path, &slot);
        if (rc == 0)
            *out = (struct ol_store_lock){node, slot, token, j->ticket};
        atomic_fetch_add(rc == 0 ? &cs->lk_granted : &cs->lk_busy, 1);
        lk_finish(j, rc);
        return 0;
    }
    j->plen = (uint16_t)plen;
    memcpy(j->path, path, plen);
    struct ol_lock_msg m = {.pool = cs->rec.pool, .set = set, .ticket = j->ticket,
                            .path = j->path, .path_len = j->plen};
    ol_lock_encode(&m, j->hdr);
    j->msg.fn = lk_send;
    ol_loop_post(cs->net, &j->msg);
    return 0;
}

/* UNLOCK of lock id (or OL_LOCK_ID_ANY) granted under ticket by node, sent
 * from any thread; nobody waits for its answer. */
static void lk_give_back(struct ol_daemon *d, int64_t node, unsigned set, uint32_t id,
                         uint64_t ticket)
{
    struct ol_daemon_cstore *cs = d->cstore;
    struct lk_job *j = calloc(1, sizeof *j);
    if (!j)
        return;   /* the owner lets it go with this node's connection */
    j->d = d;
    j->node = node;
    struct ol_lock_msg m = {.pool = cs->rec.pool, .set = set, .id = id, .ticket = ticket};
    ol_unlock_encode(&m, j->hdr);
    atomic_fetch_add(&cs->lk_out, 1);
    j->msg.fn = lk_send;
    ol_loop_post(cs->net, &j->msg);
}

static void cs_unlock(void *ud, unsigned set, const struct ol_store_lock *l)
{
    struct ol_daemon *d = ud;
    if (l->node == d->cfg.self_id)
        ol_store_key_unlock(d->store, l->id);
    else
        lk_give_back(d, l->node, set, l->id, l->ticket);
}

/* The owner's side, on the net loop. */
static void lk_reply_now(struct ol_rpc_req *req, int res, uint32_t id, int64_t token)
{
    uint8_t b[OL_LOCK_REPLY_LEN];
    ol_le_st32(b, (uint32_t)res);
    ol_le_st32(b + 4, id);
    ol_le_st64(b + 8, (uint64_t)token);
    struct iovec iov = {b, req->op == OL_LOCK_RPC_LOCK ? OL_LOCK_REPLY_LEN : 8u};
    ol_rpc_reply(req, OL_RPC_OK, &iov, 1);
}

static void on_lock(struct ol_rpc_req *req, void *arg)
{
    struct ol_daemon *d = arg;
    struct ol_daemon_cstore *cs = d->cstore;
    struct ol_lock_msg m;
    struct ol_store *st = atomic_load(&cs->store);
    if (ol_lock_decode(req->payload, req->len, &m) < 0 || m.pool != cs->rec.pool ||
        m.set >= cs->sets) {
        ol_rpc_reply(req, OL_RPC_BAD_REQUEST, NULL, 0);
        return;
    }
    if (!st)
        return lk_reply_now(req, -ESTALE, 0, 0);   /* not open yet: asked again */
    atomic_fetch_add(&cs->lk_served, 1);
    int64_t node, token;
    if (ol_daemon_cstore_owner(d, m.set, &node, &token) < 0 || node != d->cfg.self_id) {
        atomic_fetch_add(&cs->lk_refused, 1);
        return lk_reply_now(req, -ESTALE, 0, 0);
    }
    struct lk_held *h = req->conn_data[cs->lk_slot];
    if (!h && !(h = req->conn_data[cs->lk_slot] = calloc(1, sizeof *h)))
        return lk_reply_now(req, -ENOMEM, 0, 0);
    char path[OL_LOCK_PATH_MAX + 1];
    memcpy(path, m.path, m.path_len);
    path[m.path_len] = 0;
    unsigned slot;
    if (ol_store_key_trylock(st, path, &slot) < 0)
        return lk_reply_now(req, -EBUSY, 0, 0);
    h->bits[slot / 8] |= (uint8_t)(1u << (slot % 8));
    cs->lk_tickets[slot] = m.ticket;
    cs->lk_sets[slot] = (uint16_t)m.set;
    lk_reply_now(req, 0, slot, token);
}

static void on_unlock(struct ol_rpc_req *req, void *arg)
{
    struct ol_daemon *d = arg;
    struct ol_daemon_cstore *cs = d->cstore;
    struct ol_lock_msg m;
    if (ol_unlock_decode(req->payload, req->len, &m) < 0 ||
        (m.id >= OL_STORE_KEY_LOCKS && m.id != OL_LOCK_ID_ANY) || m.pool != cs->rec.pool ||
        m.set >= cs->sets) {
        ol_rpc_reply(req, OL_RPC_BAD_REQUEST, NULL, 0);
        return;
    }
    struct lk_held *h = req->conn_data[cs->lk_slot];
    uint32_t id = m.id;
    if (h && id == OL_LOCK_ID_ANY) {   /* a LOCK its asker gave up on: granted after all? */
        for (uint32_t i = 0; i < OL_STORE_KEY_LOCKS; i++)
            if ((h->bits[i / 8] >> (i % 8) & 1) && cs->lk_tickets[i] == m.ticket) {
                id = i;
                atomic_fetch_add(&cs->lk_late, 1);
                break;
            }
    }
    if (!h || id >= OL_STORE_KEY_LOCKS || !(h->bits[id / 8] >> (id % 8) & 1) ||
        cs->lk_tickets[id] != m.ticket)
        return lk_reply_now(req, -ENOENT, 0, 0);
    h->bits[id / 8] &= (uint8_t)~(1u << (id % 8));
    cs->lk_tickets[id] = 0;
    ol_store_key_unlock(atomic_load(&cs->store), id);   /* held: the store is open */
    lk_reply_now(req, 0, 0, 0);
}

/* A connection gone: the locks its node held here go back, but not yet.
 * Its node may be alive and mid-commit (the connection was cut, not the
 * node): were its locks let go now, another node could commit the same key
 * while the cut-off node still writes, both under the set's token, and
 * the later of the two metadata writes would undo the other. So they are
 * orphans, held on, until the owners' thread has fenced each one's set
 * again with a new token (owners_round): from then on the drives refuse
 * the cut-off node's changes. */
static void lk_conn_end(void *data, void *arg)
{
    struct ol_daemon *d = arg;
    struct ol_daemon_cstore *cs = d->cstore;
    struct lk_held *h = data;
    unsigned n = 0;
    pthread_mutex_lock(&cs->omu);
    for (unsigned i = 0; i < OL_STORE_KEY_LOCKS; i++)
        if (h->bits[i / 8] >> (i % 8) & 1) {
            cs->orphans_new[i / 8] |= (uint8_t)(1u << (i % 8));
            cs->orphan_set[i] = cs->lk_sets[i];
            cs->lk_tickets[i] = 0;
            n++;
        }
    pthread_mutex_unlock(&cs->omu);
    atomic_fetch_add(&cs->lk_orphaned, n);
    free(h);
}

int ol_daemon_cstore_serve(struct ol_daemon *d, ol_loop *loop, struct ol_rpc *rpc)
{
    struct ol_daemon_cstore *cs = d->cstore;
    if (!cs)
        return 0;
    cs->net = loop;
    cs->rpc = rpc;
    cs->lk_slot = ol_rpc_on_conn_end(rpc, lk_conn_end, d);
    if (cs->lk_slot < 0)
        return cs->lk_slot;
    ol_rpc_handle(rpc, OL_LOCK_RPC_LOCK, on_lock, d);
    ol_rpc_handle(rpc, OL_LOCK_RPC_UNLOCK, on_unlock, d);
    int rc = ol_drv_server_create(loop, rpc, cs->local, cs->d, &cs->server);
    if (rc == 0)
        rc = ol_drv_client_create(loop, rpc, (uint32_t)d->cfg.cluster.store_timeout_ms,
                                  &cs->client);
    return rc;
}

int ol_daemon_cstore_open(struct ol_daemon *d, char *err, size_t errlen)
{
    struct ol_daemon_cstore *cs = d->cstore;
    const struct ol_config *c = &d->cfg;
    const struct ol_pool_rec *r = &cs->rec;
    unsigned n = r->shape.nodes, p = n * r->shape.drives_per_node;
    struct ol_drv_map *map = calloc(p, sizeof *map);
    cs->flags = calloc(p, sizeof *cs->flags);
    cs->names = calloc(p, sizeof *cs->names);
    cs->paths = calloc(p, sizeof *cs->paths);
    if (!map || !cs->flags || !cs->names || !cs->paths) {
        free(map);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (unsigned g = 0; g < p; g++) {
        unsigned i = ol_pool_node_of(n, g), j = ol_pool_drive_of(n, g);
        map[g].node = r->nodes[i];
        memcpy(map[g].uuid, r->uuids[g], 16);
        if ((int)i == cs->index) {
            cs->paths[g] = c->data_dirs[j];
            continue;
        }
        cs->flags[g] = true;
        snprintf(cs->names[g], sizeof cs->names[g], "node %lld drive %u", (long long)r->nodes[i],
                 j);
        cs->paths[g] = cs->names[g];
    }
    cs->remote = ol_drv_remote_create(cs->client, map, p, &cs->hooks);
    free(map);
    if (!cs->remote) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    cs->hooks.fenced = cs_fenced;
    cs->hooks.fud = cs;
    struct ol_store_params sp = {.drives = cs->paths, .n = p,
                                 .drives_per_set = r->shape.set_drives,
                                 .parity = (int)r->shape.parity,
                                 .inline_max = c->inline_max_bytes,
                                 .direct_io = c->direct_io ? 0 : -1,
                                 .sync = c->store_sync == OL_SYNC_FSYNC,
                                 .mpu_expiry_s = c->multipart_expiry_s ? c->multipart_expiry_s : -1,
                                 .deployment = r->deployment, .remote_drives = cs->flags,
                                 .remote = &cs->hooks, .locks = &cs->locks};
    cs->locks = (struct ol_store_locks){.lock = cs_lock, .unlock = cs_unlock, .ud = d};
    int rc = ol_store_open(&sp, &d->store, err, errlen);
    if (rc < 0)
        return -1;
    atomic_store(&cs->store, d->store);
    /* Listings: this node's drives' index, kept by this node's commits (the
     * owners' merged listings are not built yet: docs/cluster.md). */
    const char *local[OL_CONFIG_MAX_DATA_DIRS];
    for (unsigned j = 0; j < cs->d; j++)
        local[j] = c->data_dirs[j];
    struct ol_catalog_info ci;
    rc = ol_catalog_open(local, cs->d, 1, &d->catalog, &ci, err, errlen);
    if (rc < 0)
        return -1;
    ol_store_set_catalog(d->store, d->catalog);
    ol_warn("cluster %s: the object store across hosts is being built: this node reads and "
            "writes the shards of pool %u on every node's drives and orders commits through "
            "the sets' owners, but a listing shows only what this node committed since its "
            "start and what its own drives hold, remote drives are not healed, and a multipart "
            "upload's parts go through the node that created it (docs/cluster.md)",
            c->cluster.name, r->pool);
    ol_info("cluster %s: object store pool %u: %u nodes, %u sets of %u drives, parity %u; "
            "this node is its node %d", c->cluster.name, r->pool, n, ol_pool_sets(&r->shape),
            r->shape.set_drives, r->shape.parity, cs->index);
    return 0;
}

/* ---- set owners ------------------------------------------------------------------
 *
 * Every OL_CSTORE_OWNER_MS the thread reads the pool's owner keys
 * (/openlake/<cluster>/store/owners/<pool>/<set>, value {"node":id}, each
 * under its owner's membership lease; its mod revision is the set's
 * fencing token, which only its owner raises, by putting it again, when a
 * lock holder's connection ended: lk_conn_end) and the view. The candidates are the pool's nodes
 * whose record says "active"; a set prefers the one ol_pool_pick ranks
 * first. This node creates the key of every set without one that prefers
 * it (create-if-absent: one owner at a time), and deletes the key of a set
 * it owns that prefers another active node (handing it over: a node that
 * starts takes its share back). A node that dies loses its keys with its
 * lease; its sets go to the nodes they prefer next. */

static int on_owner(void *arg, const struct ol_etcd_kv *kv)
{
    struct ol_daemon_cstore *cs = arg;
    unsigned set;
    int64_t node;
    if (ol_pool_owner_parse(kv->key, kv->klen, kv->val, kv->vlen, cs->sets, &set, &node) == 0)
        cs->scan[set] = (struct cs_owner){node, kv->mod_revision};
    return 0;
}

/* A FENCE of a remote drive this thread waits for. */
struct fence_call {
    struct ol_op op;
    sem_t *sem;
    int res;
    bool started;
};

static void fence_called(ol_loop *loop, struct ol_op *op, int res, unsigned flags)
{
    (void)loop;
    (void)flags;
    struct fence_call *f = (struct fence_call *)op;
    f->res = res;
    sem_post(f->sem);
}

/* Gives each set s with todo[s] != 0 the token tok[s] on the drives in
 * todo[s] (bit k: drive k of the set): this node's by writing their files
 * (under the drive's fence mutex, never lowering it), the others' by
 * FENCE, every set's at once (one slow node costs one timeout, not one a
 * set). The bits that took it are set in cs->fenced[s], the others cleared. */
static void fence_sets(struct ol_daemon_cstore *cs, const uint32_t *todo, const int64_t *tok)
{
    const struct ol_pool_rec *r = &cs->rec;
    unsigned n = r->shape.nodes, dd = r->shape.set_drives, total = cs->sets * dd;
    struct fence_call *calls = calloc(total, sizeof *calls);
    if (!calls)
        return;
    sem_t sem;
    sem_init(&sem, 0, 0);
    unsigned waits = 0;
    for (unsigned s = 0; s < cs->sets; s++)
        for (unsigned k = 0; k < dd; k++) {
            struct fence_call *fc = &calls[s * dd + k];
            if (!(todo[s] >> k & 1))
                continue;
            unsigned g = s * dd + k, i = ol_pool_node_of(n, g), j = ol_pool_drive_of(n, g);
            if ((int)i == cs->index) {   /* this node's drive: written here (no loop waits) */
                pthread_mutex_lock(&cs->fmu[j]);
                int64_t have = atomic_load(&cs->fence[j]);
                int rc = have == tok[s] ? 0 : have > tok[s] ? -ESTALE
                                                            : ol_drv_fence_write(cs->local[j].dfd,
                                                                                 tok[s]);
                if (rc == 0)
                    ol_drv_fence_raise(&cs->fence[j], tok[s]);
                pthread_mutex_unlock(&cs->fmu[j]);
                fc->res = rc;
                continue;
            }
            *fc = (struct fence_call){.op.cb = fence_called, .sem = &sem, .started = true};
            struct ol_store_rstep st = {.code = OL_DRV_FENCE, .token = tok[s]};
            if (ol_drv_start(cs->client, NULL, r->nodes[i], r->uuids[g], &st, &fc->op) == 0)
                waits++;
            else
                *fc = (struct fence_call){.res = -ENOMEM};
        }
    for (unsigned w = 0; w < waits; w++)
        while (sem_wait(&sem) < 0)
            ;
    sem_destroy(&sem);
    for (unsigned s = 0; s < cs->sets; s++)
        for (unsigned k = 0; k < dd; k++)
            if (todo[s] >> k & 1) {
                if (calls[s * dd + k].res == 0)
                    cs->fenced[s] |= 1u << k;
                else
                    cs->fenced[s] &= ~(1u << k);
            }
    free(calls);
}

static void owners_round(struct ol_daemon *d, struct ol_daemon_cstore *cs,
                         struct ol_member *buf, int64_t *cand)
{
    const struct ol_config *c = &d->cfg;
    struct ol_cluster_view v;
    ol_cluster_view(d->cluster, &v, buf, OL_MEMBER_MAX);
    unsigned nc = 0;
    for (unsigned i = 0; i < cs->rec.shape.nodes; i++)
        for (int k = 0; k < v.n && k < OL_MEMBER_MAX; k++)
            if (buf[k].id == cs->rec.nodes[i] && !strcmp(buf[k].state, "active"))
                cand[nc++] = cs->rec.nodes[i];
    char prefix[200], err[256];
    snprintf(prefix, sizeof prefix, "/openlake/%s/store/owners/%u/", c->cluster.name,
             cs->rec.pool);
    struct cs_owner *scan = cs->scan;
    for (unsigned s = 0; s < cs->sets; s++)
        scan[s] = (struct cs_owner){-1, 0};
    int64_t rev;
    if (ol_etcd_range_prefix(cs->oe, prefix, on_owner, cs, &rev, err, sizeof err) < 0)
        return;   /* etcd away: the owners last read stand */
    int64_t lease = ol_cluster_lease(d->cluster);
    uint64_t taken = 0, given = 0;
    for (unsigned s = 0; s < cs->sets && nc; s++) {
        int64_t pref = cand[ol_pool_pick(cand, nc, cs->rec.pool, s)];
        char key[240], val[64];
        snprintf(key, sizeof key, "%s%u", prefix, s);
        if (scan[s].node < 0 && pref == c->self_id && lease) {
            int n = snprintf(val, sizeof val, "{\"node\":%lld}", (long long)c->self_id);
            int64_t crev = 0;
            char have[256];
            int rc = ol_etcd_create(cs->oe, key, val, (size_t)n, lease, &crev, have,
                                    sizeof have, err, sizeof err);
            if (rc == 0) {
                scan[s] = (struct cs_owner){c->self_id, crev};
                taken++;
            }
        } else if (scan[s].node == c->self_id && pref != c->self_id) {
            if (ol_etcd_delete(cs->oe, key, err, sizeof err) == 0) {
                scan[s].node = -1;
                given++;
            }
        }
    }
    /* Orphaned locks (lk_conn_end): each set with one that this node owns
     * gets a new token (its key put again, if still this node's: a larger
     * revision), which the fencing below gives its drives before the set
     * grants again; an orphan goes back once its set is fenced with it (or
     * is another node's: a later owner's token is larger still). */
    uint16_t oset[OL_STORE_KEY_LOCKS];
    pthread_mutex_lock(&cs->omu);
    for (unsigned i = 0; i < OL_STORE_KEY_LOCKS / 8; i++) {
        for (unsigned b = 0; b < 8; b++)
            if (cs->orphans_new[i] >> b & 1 && cs->orphan_set[i * 8 + b] < cs->sets)
                cs->refence_due[cs->orphan_set[i * 8 + b]] = true;
        cs->orphans_wait[i] |= cs->orphans_new[i];
        cs->orphans_new[i] = 0;
    }
    memcpy(oset, cs->orphan_set, sizeof oset);
    pthread_mutex_unlock(&cs->omu);
    for (unsigned s = 0; s < cs->sets; s++) {
        if (!cs->refence_due[s])
            continue;
        if (scan[s].node != c->self_id) {
            cs->refence_due[s] = false;   /* another's, or none */
            cs->refence_goal[s] = 0;
            continue;
        }
        if (!lease)
            continue;
        char key[240], val[64];
        snprintf(key, sizeof key, "%s%u", prefix, s);
        int n = snprintf(val, sizeof val, "{\"node\":%lld}", (long long)c->self_id);
        int64_t nrev = 0;
        int rc = ol_etcd_put_if(cs->oe, key, val, (size_t)n, lease, scan[s].token, &nrev, err,
                                sizeof err);
        if (rc == 0) {
            scan[s].token = cs->refence_goal[s] = nrev;
            cs->refence_due[s] = false;
            pthread_mutex_lock(&cs->omu);   /* no grant under the old token meanwhile */
            cs->owners[s].node = -1;
            pthread_mutex_unlock(&cs->omu);
        } else if (rc == 1) {
            scan[s].node = -1;   /* changed under it: read again next round */
            cs->refence_due[s] = false;
            cs->refence_goal[s] = 0;
        }   /* else etcd away: put next round */
    }
    bool ours[OL_POOL_MAX_SETS];   /* etcd says this node owns it */
    for (unsigned s = 0; s < cs->sets; s++)
        ours[s] = scan[s].node == c->self_id;
    /* A set this node owns grants no lock before a write quorum of its
     * drives took the token: D - wq + 1 of them would do for safety (no
     * write quorum is left of drives that take the old owner's changes),
     * and wq (more) for a commit under the new token to reach its quorum. */
    unsigned dd = cs->rec.shape.set_drives;
    unsigned need = ol_layout_write_quorum(dd, cs->rec.shape.parity);
    uint32_t all = dd == 32 ? UINT32_MAX : (1u << dd) - 1;
    uint32_t *todo = calloc(cs->sets, sizeof *todo);
    int64_t *tok = calloc(cs->sets, sizeof *tok);
    bool any = false;
    for (unsigned s = 0; todo && tok && s < cs->sets; s++) {
        if (scan[s].node != c->self_id)
            continue;
        if (cs->fenced_token[s] != scan[s].token) {
            cs->fenced_token[s] = scan[s].token;
            cs->fenced[s] = 0;
        }
        todo[s] = cs->rounds % 10 == 0 ? all : all & ~cs->fenced[s];
        tok[s] = scan[s].token;
        any |= todo[s] != 0;
    }
    if (any && cs->client)
        fence_sets(cs, todo, tok);
    free(todo);
    free(tok);
    for (unsigned s = 0; s < cs->sets; s++)
        if (scan[s].node == c->self_id &&
            (unsigned)__builtin_popcount(cs->fenced[s]) < need)
            scan[s] = (struct cs_owner){-1, 0};   /* not yet: asked again */
    cs->rounds++;
    unsigned owned = 0;
    for (unsigned s = 0; s < cs->sets; s++)
        owned += scan[s].node == c->self_id;
    /* the orphans whose set no longer waits for its new token on a write
     * quorum of drives go back */
    uint8_t back[OL_STORE_KEY_LOCKS / 8] = {0};
    for (unsigned i = 0; i < OL_STORE_KEY_LOCKS; i++) {
        unsigned st = oset[i];
        if (!(cs->orphans_wait[i / 8] >> (i % 8) & 1))
            continue;
        if (st >= cs->sets ||
            (!cs->refence_due[st] &&
             (!cs->refence_goal[st] || !ours[st] ||
              (scan[st].node == c->self_id && scan[st].token >= cs->refence_goal[st])))) {
            back[i / 8] |= (uint8_t)(1u << (i % 8));
            cs->orphans_wait[i / 8] &= (uint8_t)~(1u << (i % 8));
        }
    }
    pthread_mutex_lock(&cs->omu);
    memcpy(cs->owners, scan, cs->sets * sizeof *scan);
    cs->owned = owned;
    cs->taken += taken;
    cs->given += given;
    pthread_mutex_unlock(&cs->omu);
    struct ol_store *st = atomic_load(&cs->store);
    for (unsigned i = 0; st && i < OL_STORE_KEY_LOCKS; i++)
        if (back[i / 8] >> (i % 8) & 1)
            ol_store_key_unlock(st, i);
}

static void *owners_main(void *arg)
{
    struct ol_daemon *d = arg;
    struct ol_daemon_cstore *cs = d->cstore;
    struct ol_member *buf = calloc(OL_MEMBER_MAX, sizeof *buf);
    int64_t *cand = calloc(cs->rec.shape.nodes, sizeof *cand);
    while (buf && cand && !atomic_load(&cs->stop)) {
        owners_round(d, cs, buf, cand);
        for (int t = 0; t < OL_CSTORE_OWNER_MS / 50 && !atomic_load(&cs->stop); t++) {
            struct timespec ts = {0, 50 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    free(buf);
    free(cand);
    return NULL;
}

int ol_daemon_cstore_owner(struct ol_daemon *d, unsigned set, int64_t *node, int64_t *token)
{
    struct ol_daemon_cstore *cs = d->cstore;
    if (!cs || set >= cs->sets)
        return -EINVAL;
    pthread_mutex_lock(&cs->omu);
    *node = cs->owners[set].node;
    *token = cs->owners[set].token;
    pthread_mutex_unlock(&cs->omu);
    return *node < 0 ? -ENOENT : 0;
}

size_t ol_daemon_cstore_metrics(struct ol_daemon *d, char *buf, size_t cap)
{
    struct ol_daemon_cstore *cs = d->cstore;
    if (!cs)
        return 0;
    pthread_mutex_lock(&cs->omu);
    uint64_t owned = cs->owned, taken = cs->taken, given = cs->given;
    pthread_mutex_unlock(&cs->omu);
    unsigned long long granted = atomic_load(&cs->lk_granted), busy = atomic_load(&cs->lk_busy),
                       served = atomic_load(&cs->lk_served), refused = atomic_load(&cs->lk_refused),
                       late = atomic_load(&cs->lk_late), orphaned = atomic_load(&cs->lk_orphaned);
    const char *c = d->cfg.cluster.name;
    int n = snprintf(buf, cap,
                     "# HELP openlake_store_sets_owned Erasure sets of the pool this node owns.\n"
                     "# TYPE openlake_store_sets_owned gauge\n"
                     "openlake_store_sets_owned{cluster=\"%s\"} %llu\n"
                     "# HELP openlake_store_sets_taken_total Sets this node took as owner.\n"
                     "# TYPE openlake_store_sets_taken_total counter\n"
                     "openlake_store_sets_taken_total{cluster=\"%s\"} %llu\n"
                     "# HELP openlake_store_sets_given_total Sets this node handed to the node "
                     "they prefer.\n"
                     "# TYPE openlake_store_sets_given_total counter\n"
                     "openlake_store_sets_given_total{cluster=\"%s\"} %llu\n",
                     c, (unsigned long long)owned, c, (unsigned long long)taken, c,
                     (unsigned long long)given);
    if (n < 0 || (size_t)n >= cap)
        return n < 0 ? 0 : (size_t)n;
    int m = snprintf(buf + n, cap - (size_t)n,
                     "# HELP openlake_store_locks_granted_total Commit locks this node's requests "
                     "were granted (by this node or the set's owner).\n"
                     "# TYPE openlake_store_locks_granted_total counter\n"
                     "openlake_store_locks_granted_total{cluster=\"%s\"} %llu\n"
                     "# HELP openlake_store_locks_busy_total Commit locks this node's requests "
                     "found held.\n"
                     "# TYPE openlake_store_locks_busy_total counter\n"
                     "openlake_store_locks_busy_total{cluster=\"%s\"} %llu\n"
                     "# HELP openlake_store_locks_served_total LOCK requests of other nodes this "
                     "node answered.\n"
                     "# TYPE openlake_store_locks_served_total counter\n"
                     "openlake_store_locks_served_total{cluster=\"%s\"} %llu\n"
                     "# HELP openlake_store_locks_refused_total LOCK requests for sets this node "
                     "does not own.\n"
                     "# TYPE openlake_store_locks_refused_total counter\n"
                     "openlake_store_locks_refused_total{cluster=\"%s\"} %llu\n"
                     "# HELP openlake_store_locks_late_total Locks this node granted to another "
                     "after that node stopped waiting, given back by its UNLOCK of the ticket.\n"
                     "# TYPE openlake_store_locks_late_total counter\n"
                     "openlake_store_locks_late_total{cluster=\"%s\"} %llu\n"
                     "# HELP openlake_store_locks_orphaned_total Locks this node granted whose "
                     "holder's connection ended: held on until this node's sets were fenced "
                     "again with new tokens.\n"
                     "# TYPE openlake_store_locks_orphaned_total counter\n"
                     "openlake_store_locks_orphaned_total{cluster=\"%s\"} %llu\n",
                     c, granted, c, busy, c, served, c, refused, c, late, c, orphaned);
    return m < 0 ? (size_t)n : (size_t)n + (size_t)m;
}

int ol_daemon_cstore_owners_start(struct ol_daemon *d, char *err, size_t errlen)
{
    struct ol_daemon_cstore *cs = d->cstore;
    if (!cs)
        return 0;
    struct ol_etcd_opts o;
    ol_cluster_etcd_opts(&d->cfg, &o);
    if (ol_etcd_open(&o, &cs->oe, err, errlen) < 0)
        return -1;
    ol_etcd_set_stop(cs->oe, &cs->stop);
    if (pthread_create(&cs->owner_t, NULL, owners_main, d) != 0) {
        snprintf(err, errlen, "cannot start the set owners' thread");
        return -1;
    }
    cs->owner_started = true;
    return 0;
}

void ol_daemon_cstore_owners_stop(struct ol_daemon *d)
{
    struct ol_daemon_cstore *cs = d->cstore;
    if (!cs || !cs->owner_started)
        return;
    atomic_store(&cs->stop, true);
    ol_etcd_wake(cs->oe);
    pthread_join(cs->owner_t, NULL);
    cs->owner_started = false;
    ol_etcd_close(cs->oe);
    cs->oe = NULL;
}

void ol_daemon_cstore_unserve(struct ol_daemon *d)
{
    struct ol_daemon_cstore *cs = d->cstore;
    if (!cs)
        return;
    ol_drv_client_destroy(cs->client);
    ol_drv_server_destroy(cs->server);
    cs->client = NULL;
    cs->server = NULL;
}

bool ol_daemon_cstore_quiet(struct ol_daemon *d)
{
    return !d->cstore ||
           ((!d->cstore->client || ol_drv_client_inflight(d->cstore->client) == 0) &&
            atomic_load(&d->cstore->lk_out) == 0);
}

void ol_daemon_cstore_close(struct ol_daemon *d)
{
    cstore_free(d->cstore);
    d->cstore = NULL;
}
