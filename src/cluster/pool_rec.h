/*
 * pool_rec.h - the record of a pool of the cluster's object store in etcd
 * (docs/cluster.md "The pool record"): which nodes, in which order, with
 * how many drives each, in sets of how many with what parity, under
 * which deployment id, and the uuid of every drive position (pool.h's
 * layout numbers the positions).
 *
 * Owns: making a new record (random deployment id and uuids), its JSON
 * encoding and its checked decoding. The record is written once, by the
 * first node of the pool that finds none (etcd create-if-absent), and
 * read by every other: every node then formats its own drives to it.
 *
 * Must not: talk to etcd, touch drives or log.
 */
#ifndef OL_CLUSTER_POOL_REC_H
#define OL_CLUSTER_POOL_REC_H

#include "cluster/pool.h"

#include <stddef.h>
#include <stdint.h>

#define OL_POOL_REC_FORMAT 1

struct ol_pool_rec {
    unsigned pool;                 /* its index (0: the first pool) */
    uint8_t deployment[16];        /* keys placement in this pool (store-format.md) */
    struct ol_pool_shape shape;
    int64_t *nodes;                /* shape.nodes ids, in the pool's order */
    uint8_t (*uuids)[16];          /* nodes * drives_per_node, by position */
};

/*
 * A new record: the shape (checked with ol_pool_check: -EINVAL and its
 * message), nodes[0, shape->nodes) (distinct, >= 0: else -EINVAL), a fresh
 * deployment id and fresh distinct uuids. 0, -EINVAL, -ENOMEM, -EIO (no
 * randomness). Free with ol_pool_rec_free.
 */
int ol_pool_rec_new(unsigned pool, const int64_t *nodes, const struct ol_pool_shape *shape,
                    struct ol_pool_rec *out, char *err, size_t errlen);

/* The JSON of r: a new NUL-terminated string (free()), *len its length; NULL: no memory. */
char *ol_pool_rec_encode(const struct ol_pool_rec *r, size_t *len);

/*
 * Parses and checks a record: 0, -ENOTSUP (a newer format), or -EINVAL
 * with what is wrong in err (not JSON, a field missing or of the wrong
 * type, a shape ol_pool_check refuses, node ids not distinct or negative,
 * a uuid count other than the positions, a malformed, zero or repeated
 * uuid, a zero deployment id); -ENOMEM.
 */
int ol_pool_rec_decode(const char *json, size_t len, struct ol_pool_rec *out, char *err,
                       size_t errlen);

void ol_pool_rec_free(struct ol_pool_rec *r);

/*
 * Parses a pool's node list (cluster.store_pools): ids and ranges "a-b"
 * (a <= b) separated by commas, spaces allowed around them, into
 * out[0, *n) in order, at most max. 0, or -EINVAL with what is wrong in
 * err (not a number, an empty item, a range backwards, an id twice, more
 * than max).
 */
int ol_pool_parse_nodes(const char *s, int64_t *out, unsigned max, unsigned *n, char *err,
                        size_t errlen);

/*
 * A set owner's key and value (docs/cluster.md "Ordering":
 * .../store/owners/<pool>/<set> = {"node":<id>}): 0 with *set (the key's
 * last component, below nsets) and *node; -EINVAL when either is not that.
 */
int ol_pool_owner_parse(const char *key, size_t klen, const char *val, size_t vlen,
                        unsigned nsets, unsigned *set, int64_t *node);

/* The pool index (0..nodes-1) of node id, or -1. */
int ol_pool_rec_index(const struct ol_pool_rec *r, int64_t id);

#endif
