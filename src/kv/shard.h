/*
 * shard.h - one KV shard: the cache lifecycle over a share of the slab.
 *
 * Owns: the entries of its slab pages (state, generation, pins, owner),
 * the key index, one eviction policy per size class, reservations and their
 * TTL, per-session pins, and the shard's counters. A shard is used by one
 * core only: no locks; nothing allocates after init except
 * ol_kv_shard_session_open (once per client connection, not per request).
 *
 * Must not: parse frames, hash keys (callers pass XXH3-128 of namespace +
 * key), or touch sockets.
 *
 * Disk tier (optional, kv/disk.h): every committed entry is queued for
 * writing behind (ol_kv_shard_pump starts the writes while the disk has
 * room; the entry is held in RAM while its write is in flight, and a write
 * that never got to start is simply not on disk). RAM eviction of an entry
 * that is on disk is free. A key on disk but not in RAM counts as present
 * for Lookup and Reserve (EXISTS); Acquire needs it in RAM: the server
 * calls ol_kv_shard_promote first, which reads it into a fresh slot
 * (state LOADING: in the index, pinned, not yet visible) and publishes it
 * when the read passes its checksums, or drops it (a miss) when not.
 *
 * Lifecycle of an entry:
 *
 *   (free) --reserve--> RESERVED --commit--> COMMITTED --evict/delete--> (free)
 *                          |  \--abort / TTL / session closed--> (free)
 *   COMMITTED --acquire--> pins++ ... --release--> pins--
 *   delete/reset of a pinned entry --> DOOMED (gone from the index; the slot
 *   is freed by the last release)
 *
 * A pinned or reserved slot is never evicted or reused. A session that
 * closes drops its pins and aborts its reservations. Keys are visible to
 * Lookup/Acquire only once committed; a Reserve of a key that is reserved or
 * committed answers EXISTS (nobody writes the same block twice).
 */
#ifndef OL_KV_SHARD_H
#define OL_KV_SHARD_H

#include <stdint.h>

#include "kv/disk.h"
#include "kv/evict.h"
#include "kv/index.h"
#include "kv/proto.h"
#include "kv/slab.h"

#define OL_KV_MAX_SESSIONS     4096
#define OL_KV_SHARD_NS         1024    /* namespaces tracked per shard; more share one */
#define OL_KV_SESSION_PINS     16384   /* distinct slots one session may pin */

struct ol_kv_ent;
struct ol_kv_session;

/* A namespace's use of the shard: RAM bytes (slots of its reserved, loading
 * and committed entries), and its committed entries oldest first (the
 * order its quota evicts in; a hit moves an entry to the young end). */
struct ol_kv_nsu {
    uint32_t ns, used;
    uint64_t bytes, entries, value_bytes;
    uint32_t head, tail;
};

struct ol_kv_shard_stats {
    uint64_t entries, reserved, pinned_slots;
    uint64_t bytes_used, bytes_capacity; /* slot bytes held (reserved + committed) */
    uint64_t value_bytes;                /* value bytes of committed entries */
    uint64_t lookups, hits, misses, acquires; /* hits/misses: Lookup and Acquire keys */
    uint64_t reserves, commits, aborts, expired;
    uint64_t evictions, deletes;
    uint64_t promotions, disk_hits;      /* entries read back from disk; Lookup keys found there */
    uint64_t writebehind_skipped;        /* evicted before their write could start */
};

struct ol_kv_shard {
    const struct ol_kv_slab *slab;
    struct ol_kv_alloc alloc;
    struct ol_kv_index index;
    struct ol_evict evict[OL_KV_MAX_CLASSES];
    int evict_kind;
    uint32_t id_base;            /* slot id of local entry 0 */
    uint32_t nents;
    struct ol_kv_ent *ents;
    struct ol_kv_session *sessions[OL_KV_MAX_SESSIONS];
    uint32_t ttl_ms;
    uint32_t res_head, res_tail; /* reservations, oldest first (local ids) */
    uint64_t quota;              /* RAM bytes per namespace on this shard; 0 = none */
    uint32_t nsu_count;
    struct ol_kv_nsu nsu[OL_KV_SHARD_NS + 1]; /* open addressing; [OL_KV_SHARD_NS]: the rest */
    struct ol_kv_disk *disk;     /* NULL: no disk tier */
    struct ol_kv_wq { uint32_t lid; uint64_t gen; } *wq; /* committed, not yet on disk */
    uint32_t wq_head, wq_len;
    struct ol_kv_shard_stats st;
};

/* What a reservation or an acquired entry is, for the client. */
struct ol_kv_loc {
    uint32_t slot;       /* slab slot id */
    uint64_t gen;        /* slot generation: give it back on commit/release */
    uint64_t offset;     /* byte offset of the value in the slab region */
    uint64_t capacity;   /* slot bytes (the most a value may hold) */
    uint64_t value_len;  /* acquire: the committed length */
    uint64_t value_sum;  /* acquire: XXH3-64 of the value, 0 if not given */
};

/*
 * Sets up a shard over slab pages [first_page, first_page + npages).
 * evict_kind: enum ol_evict_kind. ttl_ms: how long a reservation may stay
 * uncommitted. Returns 0 or -errno.
 */
int ol_kv_shard_init(struct ol_kv_shard *sh, const struct ol_kv_slab *slab, uint32_t first_page,
                     uint32_t npages, int evict_kind, uint32_t ttl_ms);
void ol_kv_shard_exit(struct ol_kv_shard *sh);

/* A client session on this shard. Returns its id (>= 0) or -EBUSY/-ENOMEM. */
int ol_kv_shard_session_open(struct ol_kv_shard *sh);
/* Drops the session's pins and aborts its reservations. */
void ol_kv_shard_session_close(struct ol_kv_shard *sh, int sid);

/*
 * Reserves a slot for (ns, key) with room for value_size bytes. hint is the
 * block's position in its prefix chain (eviction uses it). now_ms starts the
 * TTL. Returns OL_KV_OK with *loc, OL_KV_EXISTS (reserved or committed
 * already), OL_KV_NOSPACE (nothing evictable), OL_KV_TOO_LARGE_ST (value
 * larger than the shard), OL_KV_BUSY (too many size classes), OL_KV_QUOTA
 * (the namespace is at its quota and none of its own entries can go: they
 * are all pinned or reserved). Under a quota the namespace's own oldest
 * committed entries are evicted first to make room.
 */
int ol_kv_shard_reserve(struct ol_kv_shard *sh, int sid, uint32_t ns, struct ol_kv_hash h,
                        const void *key, uint16_t key_len, uint64_t value_size, uint32_t hint,
                        uint64_t now_ms, struct ol_kv_loc *loc);
/* Publishes a reservation of this session. OL_KV_OK, OL_KV_STALE_GENERATION
 * (not this session's live reservation: expired, aborted, reused),
 * OL_KV_TOO_LARGE_ST (value_len above the slot). */
int ol_kv_shard_commit(struct ol_kv_shard *sh, int sid, uint32_t slot, uint64_t gen,
                       uint64_t value_len, uint64_t value_sum);
/* Gives a reservation back. OL_KV_OK or OL_KV_STALE_GENERATION. */
int ol_kv_shard_abort(struct ol_kv_shard *sh, int sid, uint32_t slot, uint64_t gen);

/*
 * Presence of n keys of one namespace, in order. present[i] = 1 when
 * committed. Returns the length of the leading run of hits.
 */
uint32_t ol_kv_shard_lookup(struct ol_kv_shard *sh, uint32_t ns, const struct ol_kv_hash *hs,
                            uint32_t n, uint8_t *present);
/* Pins a committed entry for reading. OL_KV_OK with *loc, OL_KV_NOT_FOUND,
 * OL_KV_BUSY (the session holds OL_KV_SESSION_PINS slots). */
int ol_kv_shard_acquire(struct ol_kv_shard *sh, int sid, uint32_t ns, struct ol_kv_hash h,
                        struct ol_kv_loc *loc);
/* Drops one pin of this session. OL_KV_OK or OL_KV_STALE_GENERATION. */
int ol_kv_shard_release(struct ol_kv_shard *sh, int sid, uint32_t slot, uint64_t gen);
/* Removes a committed entry. OL_KV_OK, OL_KV_NOT_FOUND; a pinned entry is
 * removed from view at once and freed by its last release (still OK). */
int ol_kv_shard_delete(struct ol_kv_shard *sh, uint32_t ns, struct ol_kv_hash h);
/* Deletes every committed entry of namespace ns. Returns how many. */
uint64_t ol_kv_shard_reset(struct ol_kv_shard *sh, uint32_t ns);
/* Aborts reservations whose TTL has passed. Returns how many. */
uint32_t ol_kv_shard_expire(struct ol_kv_shard *sh, uint64_t now_ms);

void ol_kv_shard_stats(const struct ol_kv_shard *sh, struct ol_kv_shard_stats *out);
/* Sets the per-namespace quota in RAM bytes (0 = none). */
void ol_kv_shard_set_quota(struct ol_kv_shard *sh, uint64_t bytes);
/* Committed entries and their value bytes of namespace ns on this shard. */
void ol_kv_shard_ns_usage(const struct ol_kv_shard *sh, uint32_t ns, uint64_t *entries,
                          uint64_t *value_bytes);

/* ---- disk tier ---------------------------------------------------------- */

/* Gives the shard its disk tier (before use; the shard does not own it).
 * Returns 0 or -ENOMEM. */
int ol_kv_shard_set_disk(struct ol_kv_shard *sh, struct ol_kv_disk *d);

enum { OL_KV_WHERE_MISS = 0, OL_KV_WHERE_RAM, OL_KV_WHERE_LOADING, OL_KV_WHERE_DISK };
/* Where the entry (ns, h) is readable from. */
int ol_kv_shard_where(const struct ol_kv_shard *sh, uint32_t ns, struct ol_kv_hash h);
/*
 * Starts reading a disk-only entry into RAM. Returns 0 (LOADING: wait for
 * ol_kv_shard_disk_done), -EBUSY (the disk's queue is full: retry after a
 * completion), -ENOENT (not on disk), -ENOSPC (no RAM slot can be freed).
 */
int ol_kv_shard_promote(struct ol_kv_shard *sh, uint32_t ns, struct ol_kv_hash h);
/* Starts writes behind while the disk has room. */
void ol_kv_shard_pump(struct ol_kv_shard *sh);
/* True while writes behind wait or disk I/O is in flight. */
bool ol_kv_shard_disk_busy(const struct ol_kv_shard *sh);
/* The disk tier's completion callback (ol_kv_disk_done_fn), ctx = shard. */
void ol_kv_shard_disk_done(void *ctx, int ev, uint64_t tag, int status,
                           const struct ol_kv_slot_hdr *hdr);

#endif
