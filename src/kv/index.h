/*
 * index.h - the KV key index of one shard: 128-bit key hash → entry id.
 *
 * Owns: an open-addressing hash table (linear probing, backward-shift
 * deletion, so no tombstones and no slow-down after churn) whose cells hold
 * the first 64 bits of the key hash and a 32-bit entry id; the second 64 bits
 * live in a dense array indexed by entry id, compared on every candidate.
 * Capacity is fixed at init (a power of two, at most 7/8 full); nothing
 * allocates afterwards.
 *
 * Must not: know what an entry is (slot, state, pins: see the shard), hash
 * keys (callers pass xxh3-128 of namespace + key, computed once), lock (one
 * index per shard, used by its core only).
 *
 * Keys are identified by their 128-bit hash alone: two different keys with
 * the same 128-bit hash would alias (probability ~2^-64 at 2^32 keys). The
 * slot header keeps the full key so a reader can still verify.
 */
#ifndef OL_KV_INDEX_H
#define OL_KV_INDEX_H

#include <stddef.h>
#include <stdint.h>

struct ol_kv_hash {
    uint64_t lo, hi;
};

struct ol_kv_index_cell {
    uint64_t lo;     /* 0 = empty cell (a real lo of 0 is stored as 1) */
    uint32_t id;
    uint32_t _pad;
};

struct ol_kv_index {
    struct ol_kv_index_cell *cells;
    uint64_t *hi;          /* by entry id */
    uint64_t mask;         /* cells - 1 */
    uint32_t max_ids;      /* entry ids are 0 .. max_ids-1 */
    uint32_t count;
};

/*
 * Sizes the table for max_ids entries (cells = next power of two >= 8/7 of
 * max_ids, at least 16). Returns 0 or -ENOMEM / -EINVAL (max_ids 0 or
 * above 2^31).
 */
int ol_kv_index_init(struct ol_kv_index *ix, uint32_t max_ids);
void ol_kv_index_exit(struct ol_kv_index *ix);

/* Entry id stored under h, or -1. */
int64_t ol_kv_index_find(const struct ol_kv_index *ix, struct ol_kv_hash h);
/*
 * Batched find: ids[i] = find(hs[i]) for i < n. Prefetches every home cell
 * first, so a batch costs about one memory latency, not n.
 */
void ol_kv_index_find_batch(const struct ol_kv_index *ix, const struct ol_kv_hash *hs,
                            size_t n, int64_t *ids);
/* Adds h → id. Returns 0, -EEXIST (h present; nothing changed), or -ENOSPC
 * (the index holds max_ids entries). id must be < max_ids and unused. */
int ol_kv_index_insert(struct ol_kv_index *ix, struct ol_kv_hash h, uint32_t id);
/* Removes h. Returns its id, or -1 when absent. */
int64_t ol_kv_index_remove(struct ol_kv_index *ix, struct ol_kv_hash h);
static inline uint32_t ol_kv_index_count(const struct ol_kv_index *ix) { return ix->count; }

/* Plain reference twin of find (no prefetch, no batching) for tests. */
int64_t ol_kv_index_find_ref(const struct ol_kv_index *ix, struct ol_kv_hash h);

#endif
