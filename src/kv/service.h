/*
 * service.h - the KV cache service of one openlaked process.
 *
 * Owns: the tenants (each: a slab, one shard per core of it, shard i used
 * only by core i, an optional disk tier), the admin token, which tenant a
 * namespace belongs to and which tokens open it, and the key → shard rule
 * shared with clients:
 *
 *   h     = XXH3-128(key, seed = XXH3-64(namespace bytes))
 *   shard = (high 64 bits of h) mod shards
 *   ns id = low 32 bits of XXH3-64(namespace bytes)
 *
 * Tenants: tenants[0] is "default", the slab sized by [kv_slab], holding
 * every namespace that no [[kv_tenants]] entry claims; without
 * [[kv_tenants]] it is the whole service, as before tenants existed. Each
 * [[kv_tenants]] entry adds a tenant with a slab of its own (a separate
 * memfd, so a client that maps it can reach no other tenant's values) and,
 * with disk_capacity_gb, a disk tier of its own. A namespace belongs to
 * one tenant (config validation refuses overlapping claims). Its HELLO is
 * accepted with that tenant's token or with the admin token (kv_token),
 * which opens every namespace; "default" has no token of its own.
 *
 * Created on the main thread before the cores start; after that each core
 * touches only its own shard of each tenant (no locks).
 */
#ifndef OL_KV_SERVICE_H
#define OL_KV_SERVICE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "kv/shard.h"
#include "kv/slab.h"

/* One shard's counters as its core last published them (every
 * OL_KV_PUB_MS, server.c): what other threads (the metrics page) may read. */
struct ol_kv_pub {
    _Atomic uint64_t hits, misses;   /* LOOKUP, ACQUIRE, GET keys, counted at the answer */
    _Atomic uint64_t ram_bytes;      /* value bytes of committed entries in RAM */
    _Atomic uint64_t disk_bytes;     /* value bytes on the disk tier */
};

/* One tenant: a slab, its shards, its disk tier, who may open it. */
struct ol_kv_tenant {
    char name[OL_CONFIG_TENANT_NAME_LEN];   /* "default", or the [[kv_tenants]] name */
    struct ol_kv_slab slab;
    struct ol_kv_shard *shards;  /* one per core */
    struct ol_kv_disk **disks;   /* one per shard, or NULL: no disk tier */
    struct ol_kv_pub *pub;       /* one per shard: its counters, published by its core */
    /* The namespace patterns it claims (base/nspat.h); none for "default". */
    char (*patterns)[OL_CONFIG_NSPAT_LEN];
    int npatterns;
    char token[OL_KV_MAX_TOKEN + 1]; /* its own token; "" for "default" */
    size_t token_len;
    _Atomic uint64_t sessions;       /* open sessions on its shards */
    _Atomic uint64_t populated;      /* bytes of its slab the populate thread has gone
                                        over (kv/populate.h); slab.size when done */
    _Atomic uint64_t hello_refused;  /* HELLOs for its namespaces with a token that
                                        does not open them (bad, or another tenant's) */
};

struct ol_kv_service {
    int nshards;
    int ntenants;                /* 1 + the [[kv_tenants]] entries */
    struct ol_kv_tenant *tenants; /* [0]: "default" */
    char token[OL_KV_MAX_TOKEN + 1]; /* the admin token: opens every namespace */
    size_t token_len;
    char token_path[OL_CONFIG_PATH_LEN + 16]; /* "" when the token came from config */
    char sock_path[108];
    unsigned sock_mode;          /* kv_socket_mode */
    uint32_t ttl_ms;
    uint32_t hello_timeout_ms;   /* kv_hello_timeout_ms */
    uint32_t max_unauth;         /* kv_max_unauthenticated, per core and listener */
    _Atomic int ready;   /* the daemon is ready (every core's server exists; set by the
                            daemon): until then HELLO answers BUSY "starting; retry" */
    _Atomic uint64_t sessions, protocol_errors; /* process-wide STATS counters */
    _Atomic uint64_t hello_busy; /* HELLOs answered BUSY "starting; retry" */
    /* Connections closed before their HELLO (the metrics of ol_kv_service_metrics):
     * refused at accept (every slot of the core taken), closed at the HELLO
     * deadline, closed to make room for a newer unauthenticated one. */
    _Atomic uint64_t conns_refused, hello_timeouts, unauth_evicted;
    _Atomic uint64_t log_ms, logged[3]; /* the last log line of those (server.c) */
};

/*
 * Creates tenant "default": sizes its slab from cfg ([kv_slab]
 * cpu_ram_frac wins over capacity_gb; neither: a quarter of RAM), splits
 * it into nshards shards, opens its disk tier when [kv_disk] capacity_gb >
 * 0 (shard i gets capacity / nshards in dirs[i % ndirs], the data dirs
 * when kv_disk.dirs is empty); then one tenant per [[kv_tenants]] entry
 * the same way from its capacity_gb and disk_capacity_gb (files in
 * kv-disk/tenant-<name>/ of the same dirs). Loads or creates the admin
 * token (kv_token, else <data_dirs[0]>/kv.token, created 0600 with 32
 * random bytes in hex on first start), which no tenant's token may equal.
 * Logs each tenant's name, sizes and what backs its slab (hugetlbfs, shmem
 * with THP, or 4 KiB shmem pages and how to get larger ones; never a
 * token). Returns 0 or -errno
 * with a message in err.
 */
int ol_kv_service_create(struct ol_kv_service **out, const struct ol_config *cfg, int nshards,
                         char *err, size_t errlen);
void ol_kv_service_destroy(struct ol_kv_service *svc);

/* The shard of a key hash (ol_kv_key_hash in proto.h). */
static inline int ol_kv_shard_of(const struct ol_kv_service *svc, struct ol_kv_hash h)
{
    return (int)(h.hi % (uint64_t)svc->nshards);
}

/* The tenant that namespace ns[0, len) belongs to: the one whose patterns
 * match it, else tenants[0] ("default"). Never NULL. */
struct ol_kv_tenant *ol_kv_service_tenant_of(struct ol_kv_service *svc, const void *ns,
                                             size_t len);

/* Whether token tok[0, len) opens tenant t's namespaces: the admin token,
 * or t's own. Constant time in the bytes of each token compared. */
bool ol_kv_service_may_open(const struct ol_kv_service *svc, const struct ol_kv_tenant *t,
                            const void *tok, size_t len);

/*
 * Appends the service's Prometheus metrics (openlake_kv_*) to buf[0, cap):
 * sessions, the connections closed before HELLO by cause, and per tenant
 * its slab's size, backing (openlake_kv_slab_info{backing=...} 1),
 * allocated bytes (an fstat of each slab) and bytes populated (the populate
 * thread's progress), sessions and refused HELLOs, hits and misses of
 * LOOKUP, ACQUIRE and GET keys and value bytes held in RAM and on disk (the
 * shards' counters as their cores last published them)
 * (label tenant="name"). Returns
 * the bytes written; cap or more when they did not fit (nothing usable then).
 */
size_t ol_kv_service_metrics(struct ol_kv_service *svc, char *buf, size_t cap);

#endif
