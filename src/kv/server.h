/*
 * server.h - the KV listener of one core.
 *
 * Owns: this core's KV connections (TCP on kv_addr with SO_REUSEPORT on
 * every core; the Unix socket on core 0 only), frame I/O, HELLO (namespace
 * → tenant, the token that must open it, shard, the tenant's slab fd over
 * SCM_RIGHTS), and the dispatch of each operation to the tenant's shard of
 * this core. A connection serves one shard: a HELLO
 * for another core's shard hands the socket over to that core (once), so
 * every request after HELLO runs on the core that owns its keys, with no
 * locks and no cross-core traffic.
 *
 * Must not: block, or touch another core's shard.
 */
#ifndef OL_KV_SERVER_H
#define OL_KV_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "kv/proto.h"
#include "kv/service.h"
#include "rt/loop.h"

struct ol_kv_server;

/*
 * The cluster's KV pool as the KV server sees it (the daemon provides it:
 * daemon/kvpool.c; docs/cluster.md "The KV pool"). With it set, an
 * ACQUIRE (shared memory) or a GET whose keys are missing here and homed
 * on another node waits (the connection parked, at most wait_ms) while
 * they are fetched from their home into this shard, then is answered from
 * here; a LOOKUP of such keys waits while their homes are asked only
 * whether they have them (no value moves: `exists`), and counts those
 * they have as present; and a value stored here (COMMIT, PUT) that is homed on another
 * node is handed to `saved`, which sends a copy home. Every hook runs on
 * the core's thread and must not block.
 */
struct ol_kv_fetch_req {
    int core, tenant;               /* this core; the tenant's index in svc->tenants */
    const void *ns;                 /* the namespace's bytes */
    uint16_t nslen;
    uint32_t n;                     /* keys, each missing here and homed elsewhere */
    const struct ol_kv_hash *hs;
    const int64_t *homes;           /* each key's home (home_of) */
    const uint8_t *const *keys;
    const uint16_t *klens;
    bool exists;                    /* whether the homes have them, not their values */
    uint64_t token;                 /* for ol_kv_server_fetched */
    uint64_t value_size;            /* the session's value size (its slots' class) */
};

struct ol_kv_saved {
    int core, tenant;
    const void *ns;
    uint16_t nslen;
    struct ol_kv_hash h;
    int64_t home;                   /* home_of(h) */
    const void *key;
    uint16_t klen;
    const void *value;              /* valid during the call only */
    uint64_t len, sum;              /* its length and XXH3-64 */
};

struct ol_kv_remote {
    void *arg;
    uint32_t wait_ms;               /* the most a frame waits for its fetch */
    /* the node id of key hash h's best-ranked home other than this node,
     * else -1 (this node is its only home, or no placement yet); passed on
     * with the key, so a pool of one home per key places each key once */
    int64_t (*home_of)(void *arg, struct ol_kv_hash h);
    /* starts fetching r's keys (copies what it keeps): 0, and
     * ol_kv_server_fetched(token) follows (always, within wait_ms or
     * soon after); < 0: not started, the frame is answered from here */
    int (*fetch)(void *arg, const struct ol_kv_fetch_req *r);
    /* a value homed elsewhere was committed here */
    void (*saved)(void *arg, const struct ol_kv_saved *v);
    /* a disk operation of this core completed: a read that
     * ol_kv_server_promote started is over, or the queue has room again;
     * NULL: not told */
    void (*disk_done)(void *arg);
    /* a MEMBERS answer (protocol v2): the KV members of the placement
     * snapshot with their kv_addr (ucx: their kv_ucx_addr, asked on a
     * connection from the UCX listener), into e (a MEMBERS response begun
     * with room for the largest answer); 0 or -errno. NULL: the node
     * answers as one in no cluster */
    int (*members)(void *arg, struct ol_kv_enc *e, bool ucx);
};

/*
 * Creates core `core`'s server on `loop` (call on the loop's thread): the
 * TCP listener on tcp_addr, and on core 0 the Unix socket too. servers is
 * the array (one per core, filled as cores start) used to hand connections
 * over. Returns 0 or -errno with a message in err.
 */
int ol_kv_server_create(ol_loop *loop, int core, struct ol_kv_service *svc,
                        struct ol_kv_server **servers, const char *tcp_addr,
                        struct ol_kv_server **out, char *err, size_t errlen);
void ol_kv_server_destroy(struct ol_kv_server *s);
/* Stops accepting and closes idle connections; ol_kv_server_conns() → 0. */
void ol_kv_server_drain(struct ol_kv_server *s);
void ol_kv_server_close_all(struct ol_kv_server *s);
uint32_t ol_kv_server_conns(const struct ol_kv_server *s);
/* No connection left and no write behind pending (shutdown waits for this). */
bool ol_kv_server_idle(const struct ol_kv_server *s);
int ol_kv_server_port(const struct ol_kv_server *s);
/* On the core's thread: serves fd, a stream socket connected to a client
 * of the UCX listener (daemon/kvucx.c bridges its bytes), as a TCP client
 * is served (values inline, HELLO with a token, the same limits before
 * HELLO; counted with the TCP listener's), except that MEMBERS answers
 * with the members' kv_ucx_addr. fd is the server's from here on (closed
 * at once when there is no room or the server drains). */
void ol_kv_server_adopt(struct ol_kv_server *s, int fd);

/* Turns the pool on for this core's server (on its thread, before it
 * serves): opens a session per tenant on its shards. 0 or -errno. */
int ol_kv_server_set_remote(struct ol_kv_server *s, const struct ol_kv_remote *r);
/* The fetch of `token` is over (what came is stored): its frame runs
 * again. For an `exists` fetch, there[0, n) are the hashes of the keys a
 * home has (copied): the LOOKUP counts them as present. */
void ol_kv_server_fetched(struct ol_kv_server *s, uint64_t token, const struct ol_kv_hash *there,
                          uint32_t n);
/*
 * For the pool, on the core's thread: stores value[0, len) under key (hash
 * h, namespace id ns) in tenant `tenant`'s shard of this core, checking
 * its XXH3-64 against sum while copying (sum 0: not checked). Returns an
 * OL_KV_* status: OK, EXISTS (there already), CHECKSUM_MISMATCH (nothing
 * stored), NOSPACE, TOO_LARGE_ST, QUOTA, BUSY.
 */
int ol_kv_server_store(struct ol_kv_server *s, int tenant, uint32_t ns, struct ol_kv_hash h,
                       const void *key, uint16_t klen, const void *value, uint64_t len,
                       uint64_t sum);
/* Reads the value of (ns, h) into buf[0, cap): OL_KV_OK with *len and *sum,
 * OL_KV_NOT_FOUND (not in RAM here), OL_KV_TOO_LARGE_ST (over cap: *len
 * says how large). */
int ol_kv_server_load(struct ol_kv_server *s, int tenant, uint32_t ns, struct ol_kv_hash h,
                      void *buf, uint64_t cap, uint64_t *len, uint64_t *sum);
/* Where the value of (ns, h) is in tenant's slab, for a remote read of
 * it (the pool's grants): offsets in the slab region. */
struct ol_kv_grant {
    uint64_t len, sum;            /* the value's length and XXH3-64 */
    uint64_t off;                 /* of the value */
    uint64_t gen;                 /* of its slot (even) */
    uint64_t hdr_off;             /* of its slot header */
};
/*
 * For the pool's remote reads straight into this slab, on the core's
 * thread. reserve: a slot of len bytes for key (hash h, namespace id ns) in
 * tenant's shard, *loc saying where (its value is written there by a
 * remote read); OL_KV_OK, or EXISTS (there already), NOSPACE, TOO_LARGE_ST,
 * QUOTA, BUSY: no slot. commit: publishes loc's reservation with len
 * bytes, value's copied in (value NULL: those already at its offset, as a
 * remote read left them), when their XXH3-64 is sum (sum 0: not checked),
 * OL_KV_OK; else gives it back (CHECKSUM_MISMATCH). abort: gives it back
 * (a read that failed or did not come). ol_kv_server_store is reserve and
 * commit with a value.
 */
int ol_kv_server_reserve(struct ol_kv_server *s, int tenant, uint32_t ns, struct ol_kv_hash h,
                         const void *key, uint16_t klen, uint64_t len, struct ol_kv_loc *loc);
int ol_kv_server_commit(struct ol_kv_server *s, int tenant, const struct ol_kv_loc *loc,
                        const void *value, uint64_t len, uint64_t sum);
void ol_kv_server_abort(struct ol_kv_server *s, int tenant, const struct ol_kv_loc *loc);

/* Like ol_kv_server_load, touched and counted as a read, without the
 * copy: OL_KV_OK with *g, OL_KV_NOT_FOUND (not in RAM here). Nothing stays
 * pinned: the slot may be given to another key at any time after, which
 * its header's generation shows (docs/kv-slab.md). */
int ol_kv_server_grant(struct ol_kv_server *s, int tenant, uint32_t ns, struct ol_kv_hash h,
                       struct ol_kv_grant *g);
/*
 * For the pool, on the core's thread: where the value of (ns, h) is in
 * tenant `tenant`'s shard of this core (OL_KV_WHERE_*, shard.h), with, for
 * OL_KV_WHERE_DISK, its length in *len. A key on the disk tier only is
 * read into RAM by ol_kv_server_promote, as a local GET reads it: the
 * read checks the disk record's header and the value's XXH3-64, and a
 * record that fails is dropped (WHERE_MISS after). Returns 0 (the read
 * started: the key is WHERE_LOADING until a completion, after which the
 * remote's disk_done hook runs), -EBUSY (the disk's queue is full: try
 * again after disk_done), -ENOENT (not on disk only), -ENOSPC (no RAM slot
 * can be freed for it).
 */
int ol_kv_server_where(struct ol_kv_server *s, int tenant, uint32_t ns, struct ol_kv_hash h,
                       uint64_t *len);
int ol_kv_server_promote(struct ol_kv_server *s, int tenant, uint32_t ns, struct ol_kv_hash h);

#endif
