/*
 * place.h - where a KV block lives in a cluster: weighted rendezvous
 * hashing of its key hash over the KV members (docs/cluster.md
 * "Placement").
 *
 * Owns: the placement snapshot (struct ol_place: the KV members sorted by
 * id, their weights, the etcd revision they came from) and the rule that
 * ranks members for a key. The rule is a wire contract: a node and a
 * client in any language computing a key's homes must agree, so it is
 * integer arithmetic only, written out below and in docs/cluster.md, and
 * held to fixed vectors by tests/unit/test_cluster_place.c.
 *
 * Must not: talk to etcd, log, keep state beyond the snapshot, or allocate
 * in ol_place_homes. A snapshot is immutable once built: data cores read
 * it concurrently without locks; a new membership makes a new snapshot that
 * the owner swaps in (and destroys the old one when no core reads it).
 *
 * The rule. A key's hash h = (lo, hi) is ol_kv_key_hash() (XXH3-128 of the
 * key bytes with the namespace seed, kv/proto.h). For each member (id, w),
 * all arithmetic on unsigned 64-bit integers modulo 2^64:
 *
 *   mix(z)   = z ^= z >> 30; z *= 0xBF58476D1CE4E5B9;
 *              z ^= z >> 27; z *= 0x94D049BB133111EB; z ^= z >> 31
 *              (splitmix64's finaliser)
 *   salt(id) = mix((uint64_t)id + 0x9E3779B97F4A7C15)   (id two's complement)
 *   x        = mix(h.lo ^ salt(id)); an x of 0 counts as 1
 *   lg       = log2(x) in fixed point with 32 fraction bits, truncated
 *              (ol_place_log2_q32 below, exactly)
 *   d        = 64 * 2^32 - lg                           (1 <= d <= 2^38)
 *
 * Member A ranks above member B iff w_A * d_B > w_B * d_A (exact products,
 * up to 102 bits), and on equality iff id_A < id_B. The homes of a key are
 * the first r members of that order.
 *
 * Why it is weighted rendezvous: with u = x / 2^64, uniform in (0, 1),
 * d / 2^32 = -log2(u) = -ln(u) / ln 2, so w / d is the classic score
 * -w / ln(u) times a constant shared by every member: the same order. Each
 * member's -ln(u) / w is exponential with rate w, so the first home is
 * member i with probability w_i / sum(w), and removing a member moves only
 * the keys it held (each to the member ranked next), adding one moves only
 * the keys it now wins.
 *
 * Why these pieces: splitmix64's finaliser is a published, well-tested
 * bijective 64-bit mixer that any language writes in five lines (no
 * library); salting by the id, mixed once per snapshot, makes the members'
 * values for one key look independent. Only h.lo is used: the shard of a
 * key on its node is h.hi mod shards (kv/proto.h), so placement and
 * sharding use independent bits and each node's keys spread evenly over its
 * shards. The logarithm is fixed point, not libm's log(): libms may differ
 * in the last bit (glibc on x86-64 agrees with itself, but a client's
 * Python, Go or JavaScript need not), and a one-ulp difference would
 * flip a key whose two best scores are that close. Weights are used as
 * given (bytes): only their ratios matter, and the products are compared
 * exactly, so capacities from megabytes to exabytes need no scaling and a
 * node of twice the capacity gets twice the keys.
 */
#ifndef OL_CLUSTER_PLACE_H
#define OL_CLUSTER_PLACE_H

#include <stdint.h>

/* mix() of the rule above: splitmix64's finaliser (also the object store's
 * owner preference, cluster/pool.h ol_pool_pick). */
uint64_t ol_place_mix(uint64_t z);

#include "kv/index.h" /* struct ol_kv_hash */

#define OL_PLACE_MAX_MEMBERS  4096   /* = OL_MEMBER_MAX: a view's members */
#define OL_PLACE_MAX_REPLICAS 16     /* r of ol_place_homes */

/* One KV member: its node id and weight (KV capacity in bytes, > 0). */
struct ol_place_member {
    int64_t id;
    uint64_t weight;
};

struct ol_place; /* opaque, immutable */
struct ol_member;

/*
 * ol_place_kv_members - the KV members of a membership view: the members
 * whose state is "active" and whose KV capacity, kv_slab_bytes +
 * kv_disk_bytes (saturating at 2^64 - 1), is not 0, as {id, capacity}, in
 * the order of m. out has room for n entries. Returns how many were
 * written (0..n). The one place that says who is a KV member.
 */
int ol_place_kv_members(const struct ol_member *m, int n, struct ol_place_member *out);

/*
 * ol_place_create - a snapshot of the n members m (any order; copied and
 * sorted by id) at etcd revision `revision`. m may be NULL when n is 0: an
 * empty snapshot, whose every key has no home.
 *
 * Returns 0 with *out a new snapshot (caller destroys it); -EINVAL when n <
 * 0 or n > OL_PLACE_MAX_MEMBERS, when m is NULL and n is not 0, when two
 * members have the same id, or when
 * a weight is 0 (not a KV member: ol_place_kv_members leaves those out, so
 * a 0 here is the caller's mistake); -ENOMEM. *out is untouched on error.
 */
int ol_place_create(const struct ol_place_member *m, int n, int64_t revision,
                    struct ol_place **out);

/* ol_place_destroy - frees p. NULL: no-op. */
void ol_place_destroy(struct ol_place *p);

/* The snapshot's members (count, and the i-th in id order, 0 <= i < count)
 * and the etcd revision it was made from. */
int ol_place_count(const struct ol_place *p);
struct ol_place_member ol_place_member_at(const struct ol_place *p, int i);
int64_t ol_place_revision(const struct ol_place *p);

/*
 * ol_place_homes - the homes of key hash h: the ids of the min(r, count)
 * highest-ranked members (the rule above), best first, into out (room for
 * r ids). out[0] is the same for every r >= 1, and each r's list is a
 * prefix of r + 1's.
 *
 * Returns how many ids were written (0 when the snapshot is empty), or
 * -EINVAL when r < 1 or r > OL_PLACE_MAX_REPLICAS. O(count * r); no
 * allocation, no locks; safe from any number of threads at once.
 */
int ol_place_homes(const struct ol_place *p, struct ol_kv_hash h, int r, int64_t *out);

/*
 * ol_place_homes_ref - plain reference twin of ol_place_homes, for tests:
 * scores every member, sorts them all, copies the first r. Same contract,
 * plus -ENOMEM (it allocates count entries).
 */
int ol_place_homes_ref(const struct ol_place *p, struct ol_kv_hash h, int r, int64_t *out);

/*
 * ol_place_log2_q32 - floor(log2(x) * 2^32) as the rule computes it
 * (x >= 1; 0 counts as 1), exposed so tests and other implementations can
 * check their logarithm alone:
 *
 *   k = 63 - clz(x)                                  (floor(log2 x), 0..63)
 *   m = k >= 62 ? x >> (k - 62) : x << (62 - k)      (x / 2^k, 62 fraction bits)
 *   f = 0
 *   32 times: m = (m * m) >> 62  (128-bit product);  f = f << 1;
 *             if m >= 2^63: m = m >> 1, f = f | 1
 *   result = k * 2^32 + f
 *
 * Every step truncates, so the result can fall short of the true
 * floor(log2(x) * 2^32) by a few units; the rule is this function, not the
 * true logarithm.
 */
uint64_t ol_place_log2_q32(uint64_t x);

#endif
