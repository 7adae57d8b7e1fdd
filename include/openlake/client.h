/*
 * openlake/client.h - the C client of the OpenLake KV cache.
 *
 * A client holds one connection per server shard and routes each key to its
 * shard (the rule in docs/kv-protocol.md), so a batch is split, sent to all
 * shards at once and merged back in key order. Over the Unix socket values
 * move through the shared slab (the client maps it; no copy through the
 * socket); over TCP and UCX they travel inline in PUT/GET frames. Over the
 * Unix socket the slot calls (reserve/commit/abort, acquire/release, below) hand
 * out the slab memory itself, for zero-copy writers and readers.
 * Reference, with the zero-copy rules: docs/kv-client.md.
 *
 * Thread safety: one client may be used from several threads. Each shard
 * connection has its own lock; a call takes the locks of the shards its keys
 * (or slot handles) live on (in shard order), so calls on different shards
 * run in parallel.
 *
 * Failures: a broken connection is reopened on a later call, after a
 * backoff that doubles from 10 ms to 1 s; meanwhile calls touching that
 * shard return -EAGAIN. A HELLO answered BUSY (the daemon is still
 * starting, or the shard has no session free; the server closes), or whose
 * connection closed before any answer (the server shed it), is said
 * again on a new connection after 10 ms, doubling to 200 ms, until
 * timeout_ms has passed: ol_client_open counts from its start (then
 * -EBUSY), a reconnect from its own start (then -EAGAIN). A call that fails half way drops the connections it
 * left out of step (their pins and reservations end on the server); the
 * others keep theirs. Per-key outcomes are KV status codes (enum
 * ol_kv_status in docs/kv-protocol.md: 0 OK, 1 EXISTS, 2 NOT_FOUND...).
 *
 * Every function returns 0 or a negative errno: -EINVAL (bad arguments),
 * -E2BIG (a key-list call (lookup, delete, reserve, acquire) whose keys for
 * one shard exceed the server's max_items, 8192, or its 1 MiB frame body:
 * split the call),
 * -EAGAIN (a shard is reconnecting: retry), -EBUSY (ol_client_open: the
 * server answered BUSY until the timeout), -ETIMEDOUT, -EIO (connection
 * lost during the call), -EPROTO (the server refused the frame, or its
 * answer made no sense; the client keeps working), -EACCES (bad token, from
 * ol_client_open), -EOPNOTSUPP (a slot call over TCP or UCX; ol_client_open
 * of a ucx:// address where UCX is missing), -ENOMEM.
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
    const char *addr;       /* Unix socket path (has a '/'), "host:port" for TCP
                               ("[v6]:port" too), or ucx://host:port: UCX stream
                               endpoints (the daemon's kv ucx_addr), values inline
                               as over TCP; UCX (libucp.so.0) is loaded when first
                               used: without it, open fails with -EOPNOTSUPP */
    const char *token;      /* NULL: read it from token_file */
    const char *token_file; /* e.g. <data dir>/kv.token */
    const char *ns;         /* namespace: model fingerprint + tenant salt */
    uint64_t value_size;    /* value size class in bytes; 0 = the server's default */
    int timeout_ms;         /* per call (ol_client_open: for all its HELLOs, BUSY
                               answers retried within it); 0 = 10000 */
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
/* Stores n values (status[i] per key: OK, EXISTS, NOSPACE, TOO_LARGE, ...).
 * Over TCP a batch of any size is cut into frames within the server's
 * limits and pipelined; a value that no frame can carry (over the server's
 * max_data_body) gets TOO_LARGE and is not sent. The values must stay
 * unchanged until the call returns (large ones are sent from them). */
int ol_client_put(ol_client *c, const struct ol_client_key *keys, const void *const *values,
                  const uint64_t *lens, uint32_t n, uint16_t *status);
/* Reads n values into bufs (caps: sizes). status[i] OK with lens[i] set,
 * NOT_FOUND, TOO_LARGE (cap too small; over TCP also a value over the
 * server's max_data_body, which cannot travel inline; GET frames are sized
 * from min(cap, value_size) per key and keys the server could not fit are
 * asked again), or CHECKSUM_MISMATCH: the bytes
 * failed their xxh3 (checked while copying) or, over the Unix socket, the
 * slot header disagreed (see ol_client_acquire); lens[i] is 0 and the
 * buffer's content must not be used. */
int ol_client_get(ol_client *c, const struct ol_client_key *keys, void *const *bufs,
                  const uint64_t *caps, uint64_t *lens, uint32_t n, uint16_t *status);
int ol_client_delete(ol_client *c, const struct ol_client_key *keys, uint32_t n, uint16_t *status);
/* Deletes the namespace's entries on every shard. */
int ol_client_reset(ol_client *c, uint64_t *removed);
/* Counters summed over the shards (process-wide ones as reported). */
int ol_client_stats(ol_client *c, uint64_t counters[OL_CLIENT_STATS]);
/*
 * The cluster's KV members as the server's node places keys (protocol v2
 * MEMBERS, docs/kv-protocol.md): *revision (the view's etcd revision),
 * *replicas (cluster.kv_replicas; 0: the node is in no cluster, or has no
 * view yet) and up to cap members into m (id, weight, kv_addr as a client
 * dials it, "" when the member has none). A key's homes follow from them by
 * the rule of docs/cluster.md "Placement". Returns how many members (0..cap),
 * -EOPNOTSUPP when the server speaks protocol version 1 only, -E2BIG when
 * more than cap came (OL_CLIENT_MEMBERS_MAX is always enough), -EPROTO
 * for an answer that breaks the protocol (a kv_addr holding a NUL byte
 * among them: it would cut the string), -EINVAL for a negative cap or no
 * m with cap > 0, or a call's error. kv_addr is the server's bytes: UTF-8
 * from a conforming server, not checked here.
 */
#define OL_CLIENT_MEMBERS_MAX 4096
struct ol_client_member {
    int64_t id;
    uint64_t weight;
    char addr[264];
};
int ol_client_members(ol_client *c, int64_t *revision, int *replicas,
                      struct ol_client_member *m, int cap);
/* The mapped slab's size and how many of its bytes the kernel has pages
 * for (an fstat of its memfd: pages written, or populated by the daemon, at
 * least once); a first write to any other page waits for the kernel to
 * allocate and zero one, so allocated < size means a cold slab (see
 * kv_slab.populate in docs/kv-slab.md). Unix socket only (-EOPNOTSUPP over
 * TCP); -ENOTCONN before a slab was mapped. */
int ol_client_slab_usage(ol_client *c, uint64_t *size, uint64_t *allocated);
/* Fills this process's page tables for the first max_bytes of the server's
 * slab (0: all of it) ahead of use; otherwise each 2 MiB piece is filled the
 * first time a call touches it. Unix socket only (-EOPNOTSUPP over TCP). */
int ol_client_populate(ol_client *c, uint64_t max_bytes);

/*
 * Zero-copy slots (shared-memory clients only: a Unix socket address).
 *
 * ol_client_put/get copy each value once, between the caller's buffer and
 * the shared slab. The calls below hand out the slab memory itself:
 *
 *   reserve  -> write at slot.data -> commit (publish) or abort
 *   acquire  -> read at slot.data  -> release
 *
 * A slot handle is caller-owned memory that the client fills; it holds no
 * resources of its own on the client side (nothing to free), but on the
 * server it names a reservation or a pin of one shard connection's session.
 * Rules:
 *   - Write only into a RESERVED slot, at most capacity bytes, and only
 *     until commit/abort returns. Never write into a PINNED slot: other
 *     readers share those bytes.
 *   - Read a PINNED slot's len bytes only until release returns. While
 *     pinned, the server never evicts or reuses the slot (eviction skips
 *     it, DELETE hides the entry but frees the slot at the last release).
 *   - A reservation not committed within kv_slab.reserve_ttl_secs is
 *     reclaimed by the server; a late commit answers STALE_GENERATION.
 *   - Pins and reservations belong to the connection of their shard. If
 *     that connection is lost (the daemon restarts, a call on that shard
 *     fails with -EIO/-ETIMEDOUT), the server drops them; the client notices
 *     and refuses the handle from then on: commit/abort/release answer
 *     STALE_GENERATION for it and ol_client_slot_verify() -ESTALE, without
 *     touching the slab. The bytes at slot.data stay mapped (the client
 *     unmaps a slab only in ol_client_close()), so a stale pointer never
 *     faults, but their content may change under a reader: check with
 *     ol_client_slot_verify() before trusting bytes read from a long-held
 *     pin. Nothing of a handle may be used after ol_client_close().
 *   - A handle must not be used by two threads at once; different handles
 *     (even of one shard) may.
 *
 * Over TCP (no slab) every slot call returns -EOPNOTSUPP: use put/get.
 */
enum ol_client_slot_state {
    OL_CLIENT_SLOT_NONE = 0,     /* holds nothing: not granted, or committed/aborted/released */
    OL_CLIENT_SLOT_RESERVED = 1, /* from ol_client_reserve: write, then commit or abort */
    OL_CLIENT_SLOT_PINNED = 2,   /* from ol_client_acquire: read, then release */
};

struct ol_client_slot {
    void *data;        /* the value's first byte in the mapped slab (4 KiB aligned); NULL when
                          state is NONE. RESERVED: writable, capacity bytes. PINNED: read-only
                          by contract (the mapping is shared and writable), len bytes. */
    uint64_t capacity; /* bytes usable at data. RESERVED: the slot size of the client's value
                          size. PINNED: len (the entry may sit in a slot of another size,
                          written by a client with another value size) */
    uint64_t len;      /* RESERVED: the size asked for in reserve (what commit publishes when
                          its lens is NULL). PINNED: the value's length. After a commit that
                          answered OK: the length published. */
    uint64_t checksum; /* PINNED: xxh3-64 of the value as its writer committed it (0: none
                          given). After a commit that answered OK: the checksum sent. */
    uint64_t gen;      /* the slot's generation: names this reservation or pin on the server */
    uint32_t slot;     /* slot id in the slab */
    uint32_t shard;    /* the shard whose connection holds the reservation or pin */
    uint32_t state;    /* enum ol_client_slot_state */
    uint32_t _flags;   /* the client's own: do not touch */
    uint64_t _epoch;   /* the client's own: the connection's epoch when granted */
    const void *_hdr;  /* the client's own: the slot header, in the same mapping as data */
};

/*
 * Reserves a slot for each of n keys (a batch, split by shard like put).
 * size: the bytes the caller means to write per key; 0 means the whole slot.
 * status[i]: OK with slots[i] RESERVED (len = size, or capacity for 0);
 * otherwise slots[i] is zeroed (state NONE) and status[i] says why: EXISTS
 * (the key is present or being written), NOSPACE (every slot is pinned or
 * reserved), BUSY (retry), QUOTA, TOO_LARGE (size exceeds the slot size;
 * then nothing is sent at all). The slot memory is not cleared: it holds
 * whatever its previous value left. Returns 0, -EOPNOTSUPP over TCP, or a
 * negative errno (then no slot is held: what the call reserved is aborted).
 */
int ol_client_reserve(ol_client *c, const struct ol_client_key *keys, uint32_t n, uint64_t size,
                      struct ol_client_slot *slots, uint16_t *status);
/*
 * Publishes n reserved slots: hashes the first lens[i] bytes at
 * slots[i].data with xxh3-64 (lens NULL: slots[i].len bytes) and commits
 * them. status[i]: OK (published; the handle is now NONE with len and
 * checksum set), STALE_GENERATION (not a live reservation of this client:
 * never granted, already committed or aborted, reclaimed by the TTL, or
 * from before a reconnect; the handle is NONE), TOO_LARGE (length over the
 * capacity; nothing sent, the slot stays RESERVED: commit again or abort).
 * Returns 0, -EOPNOTSUPP over TCP, or a negative errno (handles whose
 * commit was not answered are left RESERVED; after -EIO/-ETIMEDOUT they are
 * stale).
 */
int ol_client_commit(ol_client *c, struct ol_client_slot *slots, const uint64_t *lens, uint32_t n,
                     uint16_t *status);
/* Gives n reserved slots back unpublished (protocol ABORT). status[i]: OK
 * or STALE_GENERATION; either way the handle is NONE afterwards (a handle
 * that is not RESERVED is left as it is, with STALE_GENERATION). status may
 * be NULL. Returns 0, -EOPNOTSUPP over TCP, or a negative errno. */
int ol_client_abort(ol_client *c, struct ol_client_slot *slots, uint32_t n, uint16_t *status);
/*
 * Pins the value of each of n keys for reading in place. status[i]: OK
 * with slots[i] PINNED (data, len, checksum set), NOT_FOUND, BUSY (this
 * connection pins too many slots: release some), or CHECKSUM_MISMATCH: the
 * slot header in the slab disagrees with the server's answer (wrong key,
 * generation, length or checksum, or a bad header CRC); that pin is released
 * at once and the handle is NONE. The value bytes themselves are not hashed
 * here: ol_client_slot_verify() does that, ol_client_get() always does.
 * Returns 0, -EOPNOTSUPP over TCP, or a negative errno (then no slot is
 * held: what the call pinned is released).
 */
int ol_client_acquire(ol_client *c, const struct ol_client_key *keys, uint32_t n,
                      struct ol_client_slot *slots, uint16_t *status);
/* Unpins n acquired slots. status[i]: OK or STALE_GENERATION (the pin was
 * already gone, e.g. after a reconnect); either way the handle is NONE
 * afterwards (a handle that is not PINNED is left as it is, with
 * STALE_GENERATION). status may be NULL. Returns 0, -EOPNOTSUPP over TCP, or
 * a negative errno. */
int ol_client_release(ol_client *c, struct ol_client_slot *slots, uint32_t n, uint16_t *status);
/*
 * Checks a pinned slot without a round trip: its connection is still the
 * one that pinned it, the slot header still names the same generation,
 * length and checksum, and the len bytes at data hash to checksum (when one
 * was given). Returns 0 (the bytes are the value as committed), -ESTALE (the
 * pin is gone: reconnected since), -EBADMSG (the header or the bytes do not
 * match), or -EINVAL (the handle is not PINNED). Thread-safe; takes no lock.
 */
int ol_client_slot_verify(ol_client *c, const struct ol_client_slot *slot);

#ifdef __cplusplus
}
#endif

#endif
