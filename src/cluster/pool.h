/*
 * pool.h - the layout of a pool of the cluster's object store: which node
 * holds each drive of each erasure set, and how many node failures a set
 * survives (docs/cluster.md "Pools, sets and drives").
 *
 * Owns: the layout rule and the arithmetic over it. A pool is N nodes (in
 * the pool's order, index 0..N-1) with d drives each; its P = N*d drives
 * are numbered host first, drive j of node i being pool position
 * g = j*N + i, and cut into S = P / D sets of D drives, set s being
 * positions s*D .. s*D + D - 1 (drive g mod D of its set). Consecutive
 * positions are on consecutive nodes, so a set's drives spread over
 * min(D, N) nodes and no node holds more than ceil(D / N) of them: the
 * fewest any layout can give. The rule is part of the on-disk format of a
 * pool (a change would put every drive in another set), held to fixed
 * vectors by tests/unit/test_cluster_pool.c.
 *
 * Must not: do I/O, allocate, log or know node ids (callers map node
 * index i to the pool's i-th node). Pure functions of their arguments.
 */
#ifndef OL_CLUSTER_POOL_H
#define OL_CLUSTER_POOL_H

#include <stddef.h>
#include <stdint.h>

#define OL_POOL_MAX_NODES      1024u  /* nodes of one pool */
#define OL_POOL_MAX_NODE_DRIVES 64u   /* drives of one node (data_dirs) */
#define OL_POOL_MAX_SET_DRIVES  32u   /* drives of one set (one shard each) */
#define OL_POOL_MAX_SETS        256u  /* sets of one pool */

struct ol_pool_shape {
    unsigned nodes;            /* N: 1..OL_POOL_MAX_NODES */
    unsigned drives_per_node;  /* d: 1..OL_POOL_MAX_NODE_DRIVES */
    unsigned set_drives;       /* D: 1..OL_POOL_MAX_SET_DRIVES, divides N*d */
    unsigned parity;           /* m: 0..D/2 */
};

/* Pool position of drive `drive` of node index `node`, and back. */
static inline unsigned ol_pool_position(unsigned nodes, unsigned node, unsigned drive)
{
    return drive * nodes + node;
}
static inline unsigned ol_pool_node_of(unsigned nodes, unsigned g) { return g % nodes; }
static inline unsigned ol_pool_drive_of(unsigned nodes, unsigned g) { return g / nodes; }

/*
 * Checks a shape against the bounds above: 0, or -EINVAL with one line in
 * err[0, errlen) saying what is wrong (naming the setting a user sets:
 * set_drive_count, default_parity_count, data_dirs).
 */
int ol_pool_check(const struct ol_pool_shape *s, char *err, size_t errlen);

/* S = N*d / D (a checked shape). */
unsigned ol_pool_sets(const struct ol_pool_shape *s);

/*
 * The set size chosen when set_drive_count is 0: the largest divisor of
 * P = nodes * drives_per_node from 2 to 16; P itself when none is and
 * P <= 32 (a prime from 17 to 31, or 1); else 0: no set size fits, the
 * caller refuses (ol_pool_check of D = 0 says so).
 */
unsigned ol_pool_auto_set_drives(unsigned nodes, unsigned drives_per_node);

/*
 * The parity chosen when default_parity_count is -1: the single host's
 * (store/layout.h ol_layout_default_parity), raised on a pool of two nodes
 * or more to ceil(D / N), the most drives of a set on one node, so that
 * losing one node leaves every set readable, capped at D / 2.
 */
unsigned ol_pool_auto_parity(unsigned nodes, unsigned set_drives);

/*
 * How many of set s's drives each node index holds: cnt[0, N) (OUT).
 * Returns the most on one node.
 */
unsigned ol_pool_set_spread(const struct ol_pool_shape *s, unsigned set, unsigned *cnt);

/*
 * The node failures set s survives with `budget` drives to lose: the
 * largest f such that any f nodes together hold at most `budget` of its
 * drives (the f nodes holding the most of them do). budget = m for reads
 * (k shards left), D - wq for writes (ol_pool_write_budget). At most N.
 */
unsigned ol_pool_survives(const struct ol_pool_shape *s, unsigned set, unsigned budget);

/* D - write quorum: drives a set can lose and still take writes. */
unsigned ol_pool_write_budget(const struct ol_pool_shape *s);

/*
 * The owner a set prefers (docs/cluster.md "Ordering"): of the n candidate
 * node ids[0, n) (n >= 1), the index of the one with the highest score
 * mix(key ^ mix(id + 0x9E3779B97F4A7C15)), key = pool << 32 | set, mix
 * splitmix64's finaliser (as cluster/place.h); ties to the lower id.
 * Rendezvous hashing: sets spread evenly over the candidates, and a node
 * that goes moves only the sets it was first for.
 */
unsigned ol_pool_pick(const int64_t *ids, unsigned n, unsigned pool, unsigned set);

#endif
