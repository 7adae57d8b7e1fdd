/*
 * catalog.h - the buckets (for ListBuckets: names, creation times) and the
 * ordered key index of each (index.h), kept for listings: loaded at
 * start-up, updated by the object engine as buckets and objects are
 * committed and removed, saved at a clean shutdown.
 *
 * Owns: the bucket table and one in-memory ol_index per bucket, shared by
 * all cores (a mutex per bucket, a rwlock for the table), the dirty flag,
 * and its files under <first drive>/.openlake/index/<bucket>/ plus the
 * marker <first drive>/.openlake/index/clean.
 *
 * Who updates it: the object engine (engine.h, ol_store_set_catalog), at
 * each write's commit point, under the key's commit lock (so the updates
 * of one key come in commit order), whether or not the S3 request still
 * has a client. The S3 layer only reads it (ListBuckets, ListObjects,
 * ListObjectVersions).
 *
 * Durability, exactly: the object metadata on the drives is the truth and
 * the index is derived from it. While serving, the index is memory only:
 * no update is written anywhere, none is made durable before a write is
 * acknowledged. A clean shutdown (ol_catalog_close of a catalog that is
 * not dirty) checkpoints every bucket's index and then writes the marker;
 * the next start loads the indexes (one sequential file per bucket) and
 * removes the marker before serving. A start without the marker (a crash,
 * kill -9, power loss, a first start, or a shutdown of a dirty catalog)
 * rebuilds every index by reading the metadata files on all drives, each
 * object with the version a GET would serve (the newest that k drives
 * agree on), so a listing never misses an acknowledged object nor shows a
 * deleted or half-written one. Dirty: an update that failed (-ENOMEM, a
 * bucket the table lacks) or a write whose outcome the engine could not
 * know (a request dropped by a stopping loop while it held its commit
 * lock, a write that failed after changing some drives) marks the whole
 * catalog dirty; it keeps serving, and its close writes no marker.
 *
 * Must not: run its start-up and shutdown work on a loop thread (blocking
 * file I/O); the put/remove/list calls are memory-only and short, and no
 * caller code runs under its locks.
 */
#ifndef OL_STORE_CATALOG_H
#define OL_STORE_CATALOG_H

#include <stdbool.h>
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
/*
 * Saves every index and writes the clean marker (blocking; after the loops
 * stopped), then frees. A dirty catalog saves nothing and writes no marker
 * (its indexes may be wrong): -ESTALE. Returns 0, -ESTALE, or the first
 * -errno of the save (no marker either: the next start rebuilds). NULL is
 * a no-op.
 */
int ol_catalog_close(struct ol_catalog *c);

/*
 * Marks the catalog dirty (see Durability): the next start rebuilds every
 * index from the object metadata. Counted (ol_catalog_errors); the first
 * one is logged with what (a short phrase) and err (a -errno, or 0). Any
 * thread; lock-free.
 */
void ol_catalog_set_dirty(struct ol_catalog *c, const char *what, int err);
bool ol_catalog_dirty(const struct ol_catalog *c);
/* How often it was marked dirty (a failed update is one): the metric
 * openlake_store_catalog_errors_total. Any thread. */
uint64_t ol_catalog_errors(const struct ol_catalog *c);

/* A bucket was created / deleted (its index: a new empty one / dropped).
 * bucket_add: 0 (also when it was there), -ENOMEM or -ENOSPC (the table is
 * full), and then the catalog is dirty. */
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

/*
 * An object's latest version was written (rec: what the listing shows) /
 * the object is gone. 0; -ENOENT (put: no such bucket in the table: the
 * table is wrong, since the engine only calls this for a write it
 * committed), -EINVAL, -ENOMEM: then the catalog is dirty. remove: 0 also
 * when the key or the bucket is not there.
 */
int ol_catalog_put(struct ol_catalog *c, const char *bucket, const void *key, size_t klen,
                   const struct ol_index_rec *rec);
int ol_catalog_remove(struct ol_catalog *c, const char *bucket, const void *key, size_t klen);
/* The record of one key into *rec (OUT): 0, -ENOENT (no such key or
 * bucket). For tests and tools. */
int ol_catalog_get(struct ol_catalog *c, const char *bucket, const void *key, size_t klen,
                   struct ol_index_rec *rec);

/*
 * A listing page copied out of an index: room for OL_CATALOG_PAGE_MAX
 * entries of the longest keys (~1.1 MiB, reserved by malloc and touched
 * only as far as a page fills it). Caller-owned and reused, one per thread
 * that lists (the S3 layer keeps one per core): a listing never allocates.
 */
#define OL_CATALOG_PAGE_MAX 1000u     /* S3's largest max-keys */
struct ol_catalog_page;
/* A new page: 0 and *out (OUT; free with ol_catalog_page_destroy), or -ENOMEM. */
int ol_catalog_page_create(struct ol_catalog_page **out);
void ol_catalog_page_destroy(struct ol_catalog_page *p);

/*
 * One page of a listing (ol_index_list's contract and *out): the entries
 * are copied into page under the bucket's lock, which is then let go, and
 * cb runs on the copies, in order (a key with its record, a CommonPrefix
 * with rec NULL; name valid during the call), with no catalog lock held:
 * it may take its time and call back into the catalog. req->max_keys over
 * OL_CATALOG_PAGE_MAX is taken as OL_CATALOG_PAGE_MAX (the page then says
 * truncated when more follow, as S3 clamps max-keys). Returns 0, what cb
 * returned to stop (*out still describes the whole page), -ENOENT (no such
 * bucket) or -ESTALE.
 */
int ol_catalog_list(struct ol_catalog *c, const char *bucket, const struct ol_index_list_req *req,
                    struct ol_catalog_page *page, ol_index_list_fn cb, void *arg,
                    struct ol_index_list_out *out);

#endif
