/*
 * catalog.h - the buckets (for ListBuckets: names, creation times) and the
 * ordered key index of each (index.h), kept for listings: loaded at
 * start-up, updated as buckets and objects are created and deleted, saved
 * at a clean shutdown.
 *
 * Owns: the bucket table and one in-memory ol_index per bucket, shared by
 * all cores (a mutex per bucket, a rwlock for the table), and its files under
 * <first drive>/.openlake/index/<bucket>/ plus the marker
 * <first drive>/.openlake/index/clean.
 *
 * Durability: the object metadata on the drives is the truth; the index is
 * derived from it. A clean shutdown checkpoints every bucket's index and
 * writes the marker; the next start loads the indexes (one sequential file
 * per bucket) and removes the marker before serving. A start without the
 * marker (a crash, kill -9, power loss, a first start) rebuilds every index
 * by reading the metadata files on all drives, each object with the
 * version a GET would serve (the newest that k drives agree on), so a
 * listing never misses an acknowledged object nor shows a deleted or
 * half-written one. Between those points the
 * index lives in memory only: nothing on the request path waits for it.
 *
 * Must not: run its start-up and shutdown work on a loop thread (blocking
 * file I/O); the put/remove/list calls are memory-only and short.
 */
#ifndef OL_STORE_CATALOG_H
#define OL_STORE_CATALOG_H

#include <stddef.h>
#include <stdint.h>

#include "store/index.h"

struct ol_catalog;

/* What open did, for the log line and tests. */
struct ol_catalog_info {
    unsigned buckets;
    unsigned rebuilt;          /* buckets rebuilt from object metadata */
    unsigned long long keys;   /* keys in all indexes */
    unsigned long long metas;  /* metadata files read by rebuilds */
    double seconds;
};

/*
 * Loads (after a clean shutdown) or rebuilds (otherwise) the index of every
 * bucket found on the drives (blocking; main thread). marker_quorum: how
 * many drives of a set must agree on a delete marker for it to be the
 * latest (the store's read quorum, as a GET counts; an object needs its own
 * k). Returns 0, -ENOMEM, or -errno with err filled.
 */
int ol_catalog_open(const char *const *drives, unsigned n, unsigned marker_quorum,
                    struct ol_catalog **out, struct ol_catalog_info *info, char *err,
                    size_t errlen);
/* Saves every index and writes the clean marker (blocking; after the loops
 * stopped), then frees. Returns 0 or the first -errno (the next start then
 * rebuilds). NULL is a no-op. */
int ol_catalog_close(struct ol_catalog *c);

/* A bucket was created / deleted (its index: a new empty one / dropped). */
int ol_catalog_bucket_add(struct ol_catalog *c, const char *bucket);
void ol_catalog_bucket_remove(struct ol_catalog *c, const char *bucket);

/* ListBuckets: the buckets and their creation times (the oldest birth
 * time of their directories; the time of CreateBucket for new ones),
 * sorted by name. Found at open on fewer than half of the drives: left
 * out (a leftover of a create or delete cut short). */
#define OL_CATALOG_MAX_BUCKETS 4096u
struct ol_catalog_bucket {
    char name[64];
    int64_t created;           /* seconds since the epoch */
};
unsigned ol_catalog_buckets(struct ol_catalog *c, struct ol_catalog_bucket *out, unsigned max);

/* An object's latest version was written / removed. -ENOENT: no such bucket. */
int ol_catalog_put(struct ol_catalog *c, const char *bucket, const void *key, size_t klen,
                   const struct ol_index_rec *rec);
int ol_catalog_remove(struct ol_catalog *c, const char *bucket, const void *key, size_t klen);

/* One page of a listing (ol_index_list's contract), under the bucket's
 * lock: cb must not call back into the catalog. -ENOENT: no such bucket. */
int ol_catalog_list(struct ol_catalog *c, const char *bucket, const struct ol_index_list_req *req,
                    ol_index_list_fn cb, void *arg, struct ol_index_list_out *out);

#endif
