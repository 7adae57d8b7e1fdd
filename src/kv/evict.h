/*
 * evict.h - eviction policies for the KV slab: which slot to free when RAM
 * is full.
 *
 * Owns: the replacement order of the live entries of one index shard, named
 * by dense ids 0..capacity-1 (the slab slot numbers), and, for S3-FIFO and
 * ARC, ghost lists of the 64-bit fingerprints of recently evicted keys (a
 * ghost's key has no id any more, so ghosts are kept by fingerprint).
 * All memory is allocated once by ol_evict_init(); after that no call
 * allocates, blocks or fails.
 *
 * Must not: know keys, values, the slab or the wire; lock (one instance per
 * index shard, used by that shard's thread only); include anything but libc.
 * The caller owns the id <-> key map and the pin state, and asks this module
 * only "which id goes next".
 *
 * Kinds (docs/benchmarks.md, "KV eviction", has the measurements):
 *
 *   OL_EVICT_LRU     plain least-recently-used: a hit moves the entry to the
 *                    head; the victim is the tail. The baseline.
 *   OL_EVICT_S3FIFO  S3-FIFO (Yang et al., SOSP'23): a small FIFO S holding
 *                    ~10% of capacity, a main FIFO M, a 2-bit frequency per
 *                    entry (a hit only bumps it; nothing moves on a hit) and a
 *                    ghost FIFO G of the fingerprints of entries evicted from
 *                    S (as many as M holds). New entries enter S, or M if
 *                    their fingerprint is in G. Eviction takes S's tail when
 *                    S holds at least its share: moved to M if it was hit
 *                    while in S, else evicted into G. Otherwise M's tail: put
 *                    back at M's head with freq-1 if freq > 0, else evicted.
 *                    One-hit wonders (scans, one-shot documents) leave
 *                    through S without disturbing M.
 *   OL_EVICT_ARC     ARC (Megiddo & Modha, FAST'03): LRU lists T1 (seen once)
 *                    and T2 (hit since insert), ghost LRU lists B1 and B2 of
 *                    the fingerprints evicted from each (|T1|+|B1| <= c,
 *                    |B1|+|B2| <= c), and a target p for |T1| that a B1
 *                    ghost hit raises and a B2 ghost hit lowers. A ghost hit
 *                    inserts into T2. The victim is T1's LRU end when
 *                    |T1| > p, else T2's. The default: on the prefix-reuse
 *                    traces of bench/kv/ it is never more than 1% below LRU
 *                    (chat-heavy, where recency is everything) and 2-4%
 *                    above it when RAG documents or one-shot documents
 *                    compete for the cache; S3-FIFO wins as much on those
 *                    but loses up to 5% on chat at small sizes.
 *
 * Prefix chains: a Lookup serves only the leading run of hits, so a block
 * is useless once an earlier block of its chain is gone. Eviction orders
 * that favour chain heads (deepest block first) were measured and dropped:
 * on those traces the block hit ratio exceeds the leading-run hit ratio by
 * at most 0.0025, because a chain's blocks are used together and leave
 * together under every kind here; that gap bounds what such an order gains.
 *
 * Pinning: ol_evict_victim() asks the caller, per candidate, whether it is
 * pinned (being read or written). A pinned candidate is never returned; it
 * stays in the policy, moved to the head of its queue with its frequency
 * unchanged (LRU: it is in use, so it counts as recently used). If every
 * entry is pinned the call returns -1 and nothing is lost.
 *
 * Cost: O(1) per insert / hit / remove. ol_evict_victim() is O(1)
 * amortised: every step either returns, moves an entry from S to M (once
 * per insert), spends one unit of S3-FIFO frequency that an earlier hit paid
 * for, or skips a pinned entry; only the last is unpaid, so a call costs
 * O(1 + pinned entries met). Measured: ~130 M calls/s for LRU and 15-45 M
 * for S3-FIFO and ARC on one core (the ghost set's cache misses), far above
 * what copying 64 KiB-2 MiB blocks allows.
 * Memory, allocated at init: 24 bytes per id; S3-FIFO and ARC add 24 bytes
 * per ghost node (0.9 resp. 1 per id) and a ghost table of 2-4 16-byte slots
 * per ghost node: 75-115 bytes per id in all.
 *
 * Ids are the caller's: it inserts an id that is not in the policy, and hits
 * or removes only ids that are. These are checked with OL_ASSERT (base/assert.h:
 * on in test builds).
 */
#ifndef OL_KV_EVICT_H
#define OL_KV_EVICT_H

#include <stdbool.h>
#include <stdint.h>

enum ol_evict_kind {
    OL_EVICT_LRU = 0,
    OL_EVICT_S3FIFO = 1,
    OL_EVICT_ARC = 2,
};
#define OL_EVICT_KIND_COUNT 3
/* What the daemon uses unless configured otherwise (best measured kind). */
#define OL_EVICT_DEFAULT OL_EVICT_ARC

/* "pinned" callback of ol_evict_victim(): true if id must not be evicted. */
typedef bool (*ol_evict_pinned_fn)(void *ctx, uint32_t id);

/* A list threaded through the next/prev fields of an entry array. */
struct ol_evict_q {
    uint32_t head, tail, size;
};

/* A resident entry (ids) or a ghost node (fingerprints only). */
struct ol_evict_ent {
    uint64_t fp;
    uint32_t next, prev;  /* next = towards the tail (older) */
    uint8_t where;        /* 0 on no list, else 1 + index into q[] */
    uint8_t freq;         /* S3-FIFO: 0..3 */
};

/* Ghost set slot: fingerprint -> ghost node; node == UINT32_MAX: empty. */
struct ol_evict_gslot {
    uint64_t fp;
    uint32_t node;
};

/*
 * The policy state. Public only so that a shard can embed it; the fields are
 * private to evict.c.
 */
struct ol_evict {
    enum ol_evict_kind kind;
    uint32_t capacity;
    uint32_t small_target;       /* S3-FIFO: S's share of capacity (>= 1) */
    uint32_t arc_p;              /* ARC: target size of T1, 0..capacity */
    struct ol_evict_ent *ent;    /* capacity entries, indexed by id */
    /* q[0], q[1]: resident lists over ent[] (LRU: q[0]; S3-FIFO: S, M;
     * ARC: T1, T2). q[2], q[3]: ghost lists over gent[] (S3-FIFO: G in
     * q[2]; ARC: B1, B2). */
    struct ol_evict_q q[4];
    struct ol_evict_ent *gent;   /* gcap ghost nodes */
    uint32_t gcap, gfree;        /* gfree: free ghost nodes through next */
    struct ol_evict_gslot *gtab; /* open addressing, at most half full */
    uint64_t gmask;
    unsigned gshift;
    void *mem;                   /* the single allocation */
};

/*
 * Sets up e for ids 0..capacity-1, all absent. kind is one of enum
 * ol_evict_kind. Returns 0, -EINVAL (capacity 0 or > 2^30, unknown kind) or
 * -ENOMEM. On error e is left zeroed and ol_evict_exit() is harmless.
 */
int ol_evict_init(struct ol_evict *e, enum ol_evict_kind kind, uint32_t capacity);

/* Frees e's memory. Safe on a zeroed or failed-init struct. */
void ol_evict_exit(struct ol_evict *e);

/* Kind name for logs and config ("lru", "s3fifo", "arc"), or NULL. */
const char *ol_evict_kind_name(enum ol_evict_kind kind);
/* Inverse of ol_evict_kind_name(). Returns the kind, or -EINVAL. */
int ol_evict_kind_parse(const char *name);

/*
 * Adds absent id as a freshly inserted (not yet hit) entry. fp is a 64-bit
 * fingerprint of the key (any well-mixed hash, e.g. the block key itself);
 * S3-FIFO and ARC look it up among their ghosts. hint is the block's
 * position in its prefix chain (0 = first block of a prompt). No kind uses
 * hint today: the prefix-aware variants measured did not beat their base
 * (docs/benchmarks.md, "KV eviction"); callers pass it so that one can.
 */
void ol_evict_insert(struct ol_evict *e, uint32_t id, uint64_t fp, uint32_t hint);

/* Records a hit on live id (LRU: to the head; S3-FIFO: freq+1; ARC: to
 * T2's head). */
void ol_evict_hit(struct ol_evict *e, uint32_t id);

/* Takes live id out of the policy without a ghost entry (deleted, reset,
 * moved to another tier). */
void ol_evict_remove(struct ol_evict *e, uint32_t id);

/*
 * Chooses a victim among the live entries for which pinned(ctx, id) is false
 * (pinned may be NULL: nothing is pinned), removes it from the policy (its
 * fingerprint may become a ghost) and returns its id. Pinned
 * entries met on the way stay live. Returns -1 if there is no entry or every
 * entry is pinned. pinned must not call back into e.
 */
int64_t ol_evict_victim(struct ol_evict *e, ol_evict_pinned_fn pinned, void *ctx);

/* Number of live entries. */
static inline uint32_t ol_evict_count(const struct ol_evict *e)
{
    return e->q[0].size + e->q[1].size;
}

/* True if id is live. */
static inline bool ol_evict_contains(const struct ol_evict *e, uint32_t id)
{
    return id < e->capacity && e->ent[id].where != 0;
}

/*
 * Walks every structure and checks its invariants (links, sizes, where,
 * ghost lists against the ghost table and the free list). O(capacity): for
 * tests and debug builds. Returns 0, or a negative code naming the first
 * broken one.
 */
int ol_evict_check(const struct ol_evict *e);

#endif
