/*
 * daemon.h - what openlaked's parts share: the cores and their servers.
 *
 * Owns: struct ol_daemon (one per process) and struct ol_core (one per
 * event loop). Wiring only: subsystems keep their own state.
 */
#ifndef OL_DAEMON_H
#define OL_DAEMON_H

#include <stdatomic.h>

#include "base/config.h"
#include "cluster/member.h"
#include "http/server.h"
#include "kv/populate.h"
#include "kv/server.h"
#include "rt/loop.h"
#include "s3/creds.h"
#include "s3/server.h"
#include "store/catalog.h"
#include "store/engine.h"
#include "store/heal.h"

struct ol_daemon;

struct ol_core {
    int index;
    struct ol_daemon *d;
    ol_loop *loop;
    ol_http_server *s3;        /* the S3 + admin listener of this core */
    struct ol_kv_server *kv;   /* the KV listener of this core (mode all, kv) */
    struct ol_timer tick;      /* shutdown progress check */
    struct ol_timer sweep;     /* core 0: expired multipart uploads removed */
    bool sweeping;             /* a removal is in flight */
    unsigned swept;            /* uploads removed by this sweep */
    struct ol_msg drain_msg;   /* posted by the main thread on SIGTERM */
    struct ol_msg close_msg;   /* posted when the shutdown timeout expires */
    void *admin;               /* admin handler state (admin.c) */
    struct ol_s3_server *s3api; /* the S3 API on this core */
    struct ol_store_core *store; /* the object store on this core (modes all, s3) */
    char err[256];
};

struct ol_daemon {
    struct ol_config cfg;
    int ncores;
    struct ol_core *cores;
    _Atomic int ready;         /* every core is serving, the stores recovered (main.c) */
    _Atomic int ready_held;    /* POST /_openlake/debug/ready?hold=1 (tests only) */
    _Atomic int draining;      /* shutdown started */
    _Atomic int closing;       /* ... and its timeout passed: stop with what is left */
    struct ol_kv_service *kv;  /* NULL in mode s3 */
    struct ol_kv_server **kv_servers; /* one per core */
    struct ol_kv_populate *kv_pop;    /* kv_slab.populate = "background"; NULL when done with */
    struct ol_s3_credset creds;       /* S3 credentials (s3/creds.h) */
    struct ol_store *store;           /* the object store; NULL in mode kv */
    struct ol_catalog *catalog;       /* key indexes for ListObjects */
    struct ol_tls_ctx *tls;           /* TLS on s3_addr, or NULL (http/tls.h) */
    struct ol_healer *healer;         /* heal queue, walks, scanner; NULL in mode kv */
    struct ol_dirlock *locks;         /* the data and KV disk dirs, held for life (dirs.c) */
    struct ol_cluster *cluster;       /* membership in etcd ([cluster]); NULL: a single host */
    struct ol_daemon_net *net;        /* the node RPC (net.c); NULL: a single host */
    struct ol_kvpool *kvpool;         /* the cluster's KV pool (kvpool.c); NULL: none */
    struct ol_daemon_kvucx *kvucx;    /* the KV service on kv_ucx_addr (kvucx.c); NULL: none */
    struct ol_daemon_cstore *cstore;  /* the object store across hosts (cstore.c); NULL:
                                         this node's store is its own */
    _Atomic(struct ol_disks *) disks; /* GET /_openlake/disks's thread (admin_disks.c):
                                         set once the cores serve, read by admin cores */
    int drain;                        /* main thread's (cluster.c): 0 active, 1 draining,
                                         2 drained */
    int64_t drain_since_ms;           /* monotonic: when "draining" was seen in etcd (0: not yet) */
    int64_t quiet_since_ms;           /* monotonic: since when the KV pool is quiet (0: it is not) */
};

/* cluster.c: joins the cluster of [cluster] (state "starting"): 0, or -1
 * with err holding the line to print before exiting 2 (the node id is
 * held by another live node, etcd refused the credentials). No [cluster]:
 * 0 and nothing done. */
int ol_daemon_cluster_join(struct ol_daemon *d, char *err, size_t errlen);

/* cluster.c, main thread: the node's state once it serves ("active", or
 * "draining" when its drain key is in etcd), and then every 100 ms while it
 * serves: follows the drain key (draining; drained once the record said
 * draining for cluster.kv_timeout_ms and the KV pool is quiet; active again
 * when the key is deleted). Each state change waits for etcd (bounded, as
 * ol_cluster_set_state). No cluster: nothing. */
void ol_daemon_cluster_serving(struct ol_daemon *d);
void ol_daemon_cluster_tick(struct ol_daemon *d);

/* cstore.c: the object store across hosts (cluster.store_pools; being
 * built). prepare (main thread, after the cluster join, before the node
 * RPC): the pool's record from etcd (made when there is none), checked
 * against this node's settings, and this node's drives formatted to it; 0
 * (nothing done without store_pools) or -1 with err. serve (net loop, as
 * it starts): the DRIVE server for this node's drives and the client for
 * the others'; 0 or -errno. open (main thread, the net loop running,
 * before the cores): d->store over every drive of the pool, d->catalog;
 * 0 or -1 with err. quiet: no step of a core is out at another node (the
 * cores stop only then). unserve (net loop joined, after its endpoint's
 * destroy, before the loop's): the server and client go. close: the rest. */
struct ol_rpc;
int ol_daemon_cstore_prepare(struct ol_daemon *d, char *err, size_t errlen);
int ol_daemon_cstore_serve(struct ol_daemon *d, ol_loop *loop, struct ol_rpc *rpc);
int ol_daemon_cstore_open(struct ol_daemon *d, char *err, size_t errlen);
bool ol_daemon_cstore_quiet(struct ol_daemon *d);
void ol_daemon_cstore_unserve(struct ol_daemon *d);
/* cstore.c: set owners (docs/cluster.md "Ordering"): a thread that takes
 * in etcd the sets that prefer this node among the pool's active nodes and
 * hands over those that prefer another; start once the node serves, stop
 * before the cluster leaves. owner: set's owner and its fencing token as
 * last read (-ENOENT: none now). metrics: openlake_store_sets_*. */
int ol_daemon_cstore_owners_start(struct ol_daemon *d, char *err, size_t errlen);
void ol_daemon_cstore_owners_stop(struct ol_daemon *d);
int ol_daemon_cstore_owner(struct ol_daemon *d, unsigned set, int64_t *node, int64_t *token);
size_t ol_daemon_cstore_metrics(struct ol_daemon *d, char *buf, size_t cap);
void ol_daemon_cstore_close(struct ol_daemon *d);

/* net.c: the node RPC of a cluster node: its loop and thread, the
 * endpoint on rpc_addr (src/net), every other member a peer. 0 (nothing
 * done without [cluster]), or -1 with err (rpc_addr cannot be listened on).
 * Stop: connections closed (at most a second), the thread joined. Metrics:
 * the openlake_rpc_* lines (their length; >= cap: did not fit). */
int ol_daemon_net_start(struct ol_daemon *d, char *err, size_t errlen);
void ol_daemon_net_stop(struct ol_daemon *d);
size_t ol_daemon_net_metrics(struct ol_daemon *d, char *buf, size_t cap);
/* The probe of the node RPC to every peer, one after another: the median
 * round trip of 16 empty calls and the bytes per second each way over mib
 * MiB. Start: 0 and its *id; -EBUSY while one runs; -ENOTCONN outside a
 * cluster. The current or last probe as one JSON object into buf (its
 * length; >= cap: did not fit); d must be a cluster node. Any thread. */
int ol_daemon_net_probe_start(struct ol_daemon *d, uint32_t mib, uint64_t *id);
size_t ol_daemon_net_probe_json(struct ol_daemon *d, char *buf, size_t cap);

/* net.c: [rdma]'s devices ("mlx5_0:1,...") and GID index ("3"), or "",
 * as a UCX context takes them (struct ol_xport_ucx_opts), for the node
 * RPC's and the KV service's contexts. */
#define OL_DAEMON_UCX_DEVICES_LEN (OL_CONFIG_MAX_RDMA_DEVICES * OL_CONFIG_DEVICE_LEN)
void ol_daemon_ucx_devices(const struct ol_config *c, char *devs, size_t devs_len, char *gid,
                           size_t gid_len);

/* kvucx.c: the KV service over UCX on kv_ucx_addr (nothing when it is ""
 * or there is no KV service): its loop and thread, the listener, a bridge
 * to a core's KV server per endpoint. start: once the cores serve; 0 or -1
 * with err. quiesce: at the start of a shutdown, before the cores drain
 * (no socket is handed to a core after it returns). stop: after the cores
 * stopped. metrics: the openlake_kv_ucx_* lines. */
int ol_daemon_kvucx_start(struct ol_daemon *d, char *err, size_t errlen);
void ol_daemon_kvucx_quiesce(struct ol_daemon *d);
void ol_daemon_kvucx_stop(struct ol_daemon *d);
size_t ol_daemon_kvucx_metrics(struct ol_daemon *d, char *buf, size_t cap);

/* net.c: the net loop and the node RPC endpoint (NULL outside a cluster). */
struct ol_rpc;
ol_loop *ol_daemon_net_loop(struct ol_daemon *d);
struct ol_rpc *ol_daemon_net_rpc(struct ol_daemon *d);

/* kvpool.c: the cluster's KV pool (docs/cluster.md "The KV pool"). create:
 * before the cores and the net loop start (nothing without [cluster] or a
 * KV service); 0 or -1 with err. core: on core i's thread once its KV
 * server exists: the server's hooks. attach: on the net loop, the KV_GET
 * and KV_PUT handlers. view: on the net loop, a new membership view (the
 * placement snapshot). metrics: the openlake_kvpool_* lines. destroy: once
 * the cores and the net loop stopped. */
int ol_daemon_kvpool_create(struct ol_daemon *d, char *err, size_t errlen);
int ol_daemon_kvpool_core(struct ol_daemon *d, int core);
void ol_daemon_kvpool_attach(struct ol_daemon *d, struct ol_rpc *rpc);
/* Whether the pool reads other nodes' values remotely (and maps this
 * node's slab for theirs): a KV pool on transport "ucx" with rdma.backend
 * "ucx" (off by default). The node RPC is made to ask for regions when it is. */
bool ol_daemon_kvpool_rma(const struct ol_daemon *d);
void ol_daemon_kvpool_view(struct ol_daemon *d, const struct ol_member *m, int n,
                           int64_t revision, uint64_t now_ms);
size_t ol_daemon_kvpool_metrics(struct ol_daemon *d, char *buf, size_t cap);
/* ready: the cores serve (other nodes' requests are answered from now on).
 * close: at shutdown, no new fetch, push or request of another node.
 * quiet: no message between the loops is left (the cores may stop). */
void ol_daemon_kvpool_ready(struct ol_daemon *d);
void ol_daemon_kvpool_close(struct ol_daemon *d);
bool ol_daemon_kvpool_quiet(struct ol_daemon *d);
void ol_daemon_kvpool_destroy(struct ol_daemon *d);

/* dirs.c: makes each missing data dir and KV disk dir whose parent exists
 * (logged) and locks them all, before anything in them is read. 0, or
 * -errno with err holding the one line to print before exiting 2: a
 * directory missing with its parent, not a directory, in use by another
 * process ("data dir D is in use by openlaked pid N"), or out of memory. A
 * directory that cannot be examined or locked for another reason is logged
 * and left to the subsystem that uses it. */
int ol_daemon_dirs(struct ol_daemon *d, char *err, size_t errlen);

/* admin.c: the handler for the S3 listener: admin routes under /_openlake/,
 * everything else to the S3 API (s3/server.h). */
int ol_admin_init(struct ol_core *core, char *err, size_t errlen);
void ol_admin_exit(struct ol_core *core);
extern const struct ol_http_handler ol_admin_handler;

/* admin_heal.c: the admin plane's operator routes share these: whether
 * r is a GET or POST signed with one of the daemon's S3 credentials
 * (SigV4, header or presigned), answering 405 or the S3 error when not;
 * a JSON error answer {"error":code,"message":msg}; the decoded value of
 * query parameter name into out (its length; -ENOENT absent, -EINVAL,
 * -E2BIG). */
bool ol_admin_signed(struct ol_core *core, ol_http_req *r, const char *path, size_t plen,
                     const char *q, size_t qlen);
void ol_admin_json_error(ol_http_req *r, int status, const char *code, const char *msg);
long ol_admin_query(const char *q, size_t qlen, const char *name, char *out, size_t cap);

/* admin_cluster.c: POST|GET /_openlake/cluster/probe (signed): measures
 * the node RPC to every peer (daemon/net.c); 503 outside a cluster. */
void ol_admin_cluster_route(struct ol_core *core, ol_http_req *r, const char *path,
                            size_t plen, const char *q, size_t qlen);

/* admin_heal.c: POST|GET /_openlake/heal (SigV4-signed), and the
 * openlake_heal_* metric lines into buf (their length; cap exceeded when >= cap). */
void ol_admin_heal_route(struct ol_core *core, ol_http_req *r, const char *path, size_t plen,
                         const char *q, size_t qlen);
size_t ol_admin_heal_metrics(struct ol_daemon *d, char *buf, size_t cap);
/* The object store's and the S3 API's counters, summed over the cores
 * (admin_store.c). */
/* admin_disks.c: GET /_openlake/disks (signed): the drives and the KV disk
 * tier with their filesystems' sizes, made by a thread of its own (start:
 * 0 or -errno; stop: joined, NULL: no-op). */
int ol_admin_disks_start(struct ol_daemon *d);
void ol_admin_disks_stop(struct ol_daemon *d);
void ol_admin_disks_route(struct ol_core *core, ol_http_req *r, const char *path, size_t plen,
                          const char *q, size_t qlen);

size_t ol_admin_store_metrics(struct ol_daemon *d, char *buf, size_t cap);

#endif
