/*
 * member.h - a node's membership of its cluster, kept in etcd
 * (docs/cluster.md "Membership").
 *
 * Each node writes one record, /openlake/<cluster>/nodes/<id> (JSON, below),
 * under an etcd lease of cluster.lease_ttl_secs that it keeps alive; a node
 * that dies or is cut off from etcd for that long leaves (etcd deletes the
 * record), and one that stops revokes its lease and leaves at once. Every
 * node watches /openlake/<cluster>/ (the records, and its own drain key:
 * below) and keeps the view: the members at an etcd
 * revision. While etcd cannot be reached the view stays as it was last
 * known, marked so (etcd_ok false), and the node keeps serving. A peer
 * whose frames carry a newer revision makes it read the members again
 * (ol_cluster_refresh).
 *
 * Owns: the record and its lease (one thread keeps them), the view (one
 * thread watches etcd into it), both threads and their etcd handles. Data
 * cores never call etcd: they read the view (ol_cluster_view, a copy
 * under a mutex the threads hold only to update it).
 *
 * Drain (docs/cluster.md "Drain"): an operator's `openlake cluster drain
 * N` puts /openlake/<cluster>/drain/<N> (no lease: it outlives restarts);
 * node N reads it when it starts and the watch follows it
 * (ol_cluster_drain_asked); the daemon then sets its state "draining" and,
 * once its KV pool work is done, "drained" (daemon/cluster.c).
 *
 * The record (format version 1):
 *   {"v":1, "id":N, "instance":"32 hex digits",
 *    "state":"starting"|"active"|"draining"|"drained"|"leaving",
 *    "version":"0.1.0",
 *    "host":"name", "data_dir":"/path", "pid":N, "started":unix_seconds,
 *    "s3_addr":"h:p", "s3_tls":bool, "kv_addr":"h:p" (or ""), "rpc_addr":"h:p",
 *    "kv_slab_bytes":N, "kv_disk_bytes":N, "drives":N,
 *    "kv_replicas":N (1..16; absent: a node without a KV pool, or older),
 *    "kv_ucx_addr":"h:p" (absent: no KV listener on UCX, or older)}
 * A reader ignores fields it does not know and refuses "v" > 1.
 */
#ifndef OL_CLUSTER_MEMBER_H
#define OL_CLUSTER_MEMBER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/config.h"

#define OL_MEMBER_FORMAT 1
#define OL_MEMBER_MAX 4096    /* members a view holds; more are left out (logged) */
#define OL_MEMBER_MAX_REPLICAS 16  /* a record's kv_replicas (cluster.kv_replicas' range) */

struct ol_member {
    int64_t id;
    char instance[40];        /* random, kept in the data dir: who wrote the record */
    char state[16];
    char version[32];
    char host[256];
    char data_dir[512];
    int64_t pid;
    int64_t started;
    char s3_addr[OL_CONFIG_ADDR_LEN];
    bool s3_tls;              /* s3_addr serves https */
    char kv_addr[OL_CONFIG_ADDR_LEN];
    char kv_ucx_addr[OL_CONFIG_ADDR_LEN]; /* "": none */
    char rpc_addr[OL_CONFIG_ADDR_LEN];
    uint64_t kv_slab_bytes;
    uint64_t kv_disk_bytes;
    int64_t drives;
    int64_t kv_replicas;      /* its cluster.kv_replicas; 0: not said (no KV, or older) */
    int64_t mod_revision;     /* etcd's, of the record */
};

/* The record as JSON into buf (its length; >= len: did not fit; 0: a
 * string in it is not UTF-8). */
size_t ol_member_encode(const struct ol_member *m, char *buf, size_t len);

/* A record from JSON: 0, or -1 with why (not JSON, a newer format, a
 * field of the wrong type). */
int ol_member_decode(const char *json, size_t len, struct ol_member *m, char *why,
                     size_t whylen);

/*
 * Whether the members m[0, n) that state a kv_replicas (those with a KV
 * pool, of a version that writes it) state different values: each node
 * places keys with its own (docs/cluster.md "The KV pool"). When they do,
 * buf[0, len) says who has what, each value once in ascending order with
 * its nodes in the order of m: "1 on node 2; 2 on nodes 1, 3" (cut with
 * "..." when it does not fit); else buf is "".
 */
bool ol_member_replicas_differ(const struct ol_member *m, int n, char *buf, size_t len);

/* "/openlake/<cluster>/nodes/" and that plus the id. */
void ol_member_prefix(const char *cluster, char *buf, size_t len);
void ol_member_key(const char *cluster, int64_t id, char *buf, size_t len);

/* "/openlake/<cluster>/drain/<id>": present while node id is asked to
 * drain (its value is for people: who asked and when; a node only looks
 * at whether it exists). */
void ol_member_drain_key(const char *cluster, int64_t id, char *buf, size_t len);

struct ol_cluster;
struct ol_etcd_opts;

/* The etcd options of c's [cluster] (endpoints, user and password, TLS
 * files, timeout): pointers into c, which must outlive them. The daemon's
 * and the CLI's one way to reach etcd. */
void ol_cluster_etcd_opts(const struct ol_config *c, struct ol_etcd_opts *o);

/* Joins cfg's cluster as self (its id, addresses, capacities; state
 * "starting"): registers the record once, here, before returning, then
 * starts the two threads. Returns 0; -EEXIST with err naming the holder
 * when a live node of another instance holds this id (a record of this
 * node's own instance, self->instance from its data dir, is its previous
 * life: the data dir lock says it is dead, and it is replaced); -EACCES
 * when etcd refuses the
 * credentials; other errors of etcd.h with err. An etcd that does not
 * answer is not an error: logged, and the threads keep trying. */
int ol_cluster_start(const struct ol_config *cfg, const struct ol_member *self,
                     struct ol_cluster **out, char *err, size_t errlen);

/* The record's state from now on ("active" once serving, "draining" and
 * "drained" while asked to drain, "leaving" at shutdown): written by the lease thread; returns once it is in etcd, or
 * after etcd_timeout_ms and a second, or at once while the node is not
 * registered or etcd is known to be away (the thread writes it when etcd
 * answers). */
void ol_cluster_set_state(struct ol_cluster *cl, const char *state);

/* Whether the last state set is in etcd (written under the node's lease). */
bool ol_cluster_state_written(struct ol_cluster *cl);

struct ol_cluster_view {
    int64_t revision;         /* etcd revision of the view; 0: none read yet */
    bool etcd_ok;             /* the last etcd call answered */
    int64_t etcd_since;       /* unix seconds: since when etcd_ok has been what it is */
    bool registered;          /* this node's record is in etcd under its live lease */
    char etcd_error[256];     /* the last failure ("" none) */
    uint64_t lease_renewals, etcd_failures, watch_restarts;
    int n;                    /* members, id order */
    struct ol_member *members;
};

/* A copy of the view; members into buf (cap entries; n says how many
 * there were, at most cap copied). */
void ol_cluster_view(struct ol_cluster *cl, struct ol_cluster_view *v, struct ol_member *buf,
                     int cap);

/* A peer's frames carried revision, newer than this view's: when the
 * watch thread is watching (not reading already) and no refresh is asked
 * yet, it ends its watch and reads every member again (on the next etcd
 * endpoint if this one does not answer), then watches from there. True
 * when asked. A watch that stalls without an error (an etcd member that
 * hangs) is how a view falls behind; the read makes it current. Any
 * thread. */
bool ol_cluster_refresh(struct ol_cluster *cl, int64_t revision);

/* Whether this node's drain key is in etcd, as last read (at start, then
 * by the watch). */
bool ol_cluster_drain_asked(struct ol_cluster *cl);

/* The view's revision alone (a moment under the view's mutex): whether a
 * copy of the view is worth taking. */
int64_t ol_cluster_revision(struct ol_cluster *cl);

/* The openlake_cluster_* Prometheus lines into buf: their length (cap or
 * more: did not fit). Takes the view's mutex for a moment. */
size_t ol_cluster_metrics(struct ol_cluster *cl, char *buf, size_t cap);

/* The lease this node's record lives under (0: not registered now). Keys
 * put under it go with the record: the object store's set owners
 * (daemon/cstore.c). Any thread. */
int64_t ol_cluster_lease(struct ol_cluster *cl);

/* Leaves: the record's lease is revoked (gone from etcd now, if it
 * answers within its timeout), the threads stopped and joined. NULL: no-op. */
void ol_cluster_stop(struct ol_cluster *cl);

#endif
