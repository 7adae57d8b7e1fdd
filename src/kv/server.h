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

#include "kv/service.h"
#include "rt/loop.h"

struct ol_kv_server;

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

#endif
