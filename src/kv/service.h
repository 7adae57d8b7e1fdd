/*
 * service.h - the KV cache service of one openlaked process.
 *
 * Owns: the slab, one shard per core (shard i is used only by core i), the
 * client token, and the key → shard rule shared with clients:
 *
 *   h     = XXH3-128(key, seed = XXH3-64(namespace bytes))
 *   shard = (high 64 bits of h) mod shards
 *   ns id = low 32 bits of XXH3-64(namespace bytes)
 *
 * Created on the main thread before the cores start; after that each core
 * touches only its own shard (no locks).
 */
#ifndef OL_KV_SERVICE_H
#define OL_KV_SERVICE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "kv/shard.h"
#include "kv/slab.h"

struct ol_kv_service {
    struct ol_kv_slab slab;
    int nshards;
    struct ol_kv_shard *shards;
    struct ol_kv_disk **disks;   /* one per shard, or NULL: no disk tier */
    char token[OL_KV_MAX_TOKEN + 1];
    size_t token_len;
    char token_path[OL_CONFIG_PATH_LEN + 16]; /* "" when the token came from config */
    char sock_path[108];
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
 * Sizes the slab from cfg ([kv_slab] cpu_ram_frac wins over capacity_gb;
 * neither: a quarter of RAM), splits it into nshards shards, opens the disk
 * tier when [kv_disk] capacity_gb > 0 (shard i gets capacity / nshards in
 * dirs[i % ndirs], the data dirs when kv_disk.dirs is empty), and loads or
 * creates the token (kv_token, else <data_dirs[0]>/kv.token, created 0600
 * with 32 random bytes in hex on first start). Returns 0 or -errno with a
 * message in err.
 */
int ol_kv_service_create(struct ol_kv_service **out, const struct ol_config *cfg, int nshards,
                         char *err, size_t errlen);
void ol_kv_service_destroy(struct ol_kv_service *svc);

/* The shard of a key hash (ol_kv_key_hash in proto.h). */
static inline int ol_kv_shard_of(const struct ol_kv_service *svc, struct ol_kv_hash h)
{
    return (int)(h.hi % (uint64_t)svc->nshards);
}

/*
 * Appends the service's Prometheus metrics (openlake_kv_*) to buf[0, cap):
 * sessions, and the connections closed before HELLO by cause. Returns the
 * bytes written; cap or more when they did not fit (nothing usable then).
 */
size_t ol_kv_service_metrics(struct ol_kv_service *svc, char *buf, size_t cap);

/* Constant-time token check. */
int ol_kv_service_token_ok(const struct ol_kv_service *svc, const void *tok, size_t len);

#endif
