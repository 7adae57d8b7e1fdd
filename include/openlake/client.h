/*
 * openlake/client.h - the C client of the OpenLake KV cache.
 *
 * A client holds one connection per server shard and routes each key to its
 * shard (the rule in docs/kv-protocol.md), so a batch is split, sent to all
 * shards at once and merged back in key order. Over the Unix socket values
 * move through the shared slab (the client maps it; no copy through the
 * socket); over TCP they travel inline in PUT/GET frames.
 *
 * Thread safety: one client may be used from several threads. Each shard
 * connection has its own lock; a call takes the locks of the shards its keys
 * live on (in shard order), so calls on different shards run in parallel.
 *
 * Failures: a broken connection is reopened on a later call, after a
 * backoff that doubles from 10 ms to 1 s; meanwhile calls touching that
 * shard return -EAGAIN. Per-key outcomes are KV status codes
 * (enum ol_kv_status in docs/kv-protocol.md: 0 OK, 1 EXISTS, 2 NOT_FOUND...).
 *
 * Every function returns 0 or a negative errno: -EINVAL (bad arguments),
 * -EAGAIN (a shard is reconnecting: retry), -ETIMEDOUT, -EIO (connection
 * lost during the call), -EPROTO (the server refused the frame; the client
 * keeps working), -EACCES (bad token, from ol_client_open).
 */
#ifndef OPENLAKE_CLIENT_H
#define OPENLAKE_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ol_client ol_client;

struct ol_client_opts {
    const char *addr;       /* Unix socket path (has a '/'), or "host:port" for TCP */
    const char *token;      /* NULL: read it from token_file */
    const char *token_file; /* e.g. <data dir>/kv.token */
    const char *ns;         /* namespace: model fingerprint + tenant salt */
    uint64_t value_size;    /* value size class in bytes; 0 = the server's default */
    int timeout_ms;         /* per call; 0 = 10000 */
};

struct ol_client_key {
    const void *data;
    uint16_t len;           /* 1..192 */
};

#define OL_CLIENT_STATS 18  /* counters of ol_client_stats, in protocol order */

/* Connects to every shard (HELLO with the token), maps the slab over Unix. */
int ol_client_open(const struct ol_client_opts *o, ol_client **out, char *err, size_t errlen);
void ol_client_close(ol_client *c);
uint32_t ol_client_shards(const ol_client *c);
/* True when values move through the shared slab (Unix socket). */
bool ol_client_has_slab(const ol_client *c);

/* Presence of n keys, in order; *leading = length of the leading run of hits. */
int ol_client_lookup(ol_client *c, const struct ol_client_key *keys, uint32_t n,
                     uint8_t *present, uint32_t *leading);
/* Stores n values (status[i] per key: OK, EXISTS, NOSPACE, ...). */
int ol_client_put(ol_client *c, const struct ol_client_key *keys, const void *const *values,
                  const uint64_t *lens, uint32_t n, uint16_t *status);
/* Reads n values into bufs (caps: sizes). status[i] OK with lens[i] set,
 * NOT_FOUND, TOO_LARGE (cap too small), or CHECKSUM_MISMATCH: the bytes
 * failed their xxh3 (checked while copying), lens[i] is 0 and the buffer's
 * content must not be used. */
int ol_client_get(ol_client *c, const struct ol_client_key *keys, void *const *bufs,
                  const uint64_t *caps, uint64_t *lens, uint32_t n, uint16_t *status);
int ol_client_delete(ol_client *c, const struct ol_client_key *keys, uint32_t n, uint16_t *status);
/* Deletes the namespace's entries on every shard. */
int ol_client_reset(ol_client *c, uint64_t *removed);
/* Counters summed over the shards (process-wide ones as reported). */
int ol_client_stats(ol_client *c, uint64_t counters[OL_CLIENT_STATS]);

#ifdef __cplusplus
}
#endif

#endif
