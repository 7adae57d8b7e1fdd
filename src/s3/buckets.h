/*
 * buckets.h - the daemon's list of buckets, for ListBuckets.
 *
 * Owns: one table shared by every core: bucket names and creation times,
 * read from the drives at start-up (a bucket is a directory
 * <drive>/.openlake/buckets/<name> on the drives, store/engine.h) and kept
 * current by CreateBucket and DeleteBucket. Bucket-level calls are rare, so
 * one mutex guards it; object requests never touch it (the engine answers
 * NoSuchBucket from the drives).
 *
 * Must not: decide whether a bucket exists for an object request.
 */
#ifndef OL_S3_BUCKETS_H
#define OL_S3_BUCKETS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define OL_S3_MAX_BUCKETS 4096u   /* ListBuckets answers at most this many */

struct ol_s3_bucket {
    char name[64];
    int64_t created;              /* seconds since the epoch */
};

struct ol_s3_buckets {
    pthread_mutex_t mu;
    unsigned n;
    struct ol_s3_bucket *v;       /* sorted by name, OL_S3_MAX_BUCKETS slots */
};

/* Reads the bucket directories of the drives (blocking: at start-up). A
 * name found on at least half of the drives counts. Returns 0 or -ENOMEM. */
int ol_s3_buckets_load(struct ol_s3_buckets *b, const char *const *drives, unsigned n);
void ol_s3_buckets_free(struct ol_s3_buckets *b);
/* After a successful CreateBucket / DeleteBucket. add: -ENOSPC when full. */
int ol_s3_buckets_add(struct ol_s3_buckets *b, const char *name, int64_t created);
void ol_s3_buckets_remove(struct ol_s3_buckets *b, const char *name);
/* Copies up to max entries, sorted; returns how many. */
unsigned ol_s3_buckets_list(struct ol_s3_buckets *b, struct ol_s3_bucket *out, unsigned max);

#endif
