/*
 * heal.h - the healer: one background thread that repairs objects with
 * ol_store_heal_object (engine.h), fed by three sources, in this order of
 * priority:
 *
 *   1. the on-read queue: GET/HEAD that found a stale or missing drive, a
 *      missing or corrupt shard, and PUTs acknowledged without some drives
 *      (engine hook -> ol_healer_enqueue). Bounded (queue_size entries),
 *      deduplicated by bucket/key; when full the request is dropped and
 *      counted (the scanner or a walk finds the object later).
 *   2. walks: `openlake heal [BUCKET[/PREFIX]]` (ol_healer_walk) and the
 *      rebuild of drives adopted blank at start (ol_healer_start starts it
 *      for their sets). A walk lists the object directories of a set's
 *      drives (the union over the drives, so an object missing from some
 *      drives is found on the others), reads the key from a metadata file
 *      and heals it; one walk at a time.
 *   3. the scanner: a walk of everything, repeated every scan_interval_s,
 *      that verifies (and heals) at most scan_rate bytes of shards per
 *      second; 0 = off.
 *
 * Owns: the thread, the queue, the walk and scanner states and the
 * counters (ol_healer_stats). Objects are healed one at a time (bounded
 * concurrency: one object's I/O at a time, on this thread only); between
 * two objects of a walk the queue is served first.
 *
 * Must not: run on a loop thread except ol_healer_enqueue, which takes a
 * mutex for a bounded copy and never does I/O.
 */
#ifndef OL_STORE_HEAL_H
#define OL_STORE_HEAL_H

#include <stdbool.h>
#include <stdint.h>

#include "store/engine.h"

struct ol_healer;

#define OL_HEAL_QUEUE_DEFAULT 1024u
#define OL_HEAL_QUEUE_MAX     (1u << 20)

struct ol_healer_params {
    unsigned queue_size;       /* on-read queue entries; 0 = OL_HEAL_QUEUE_DEFAULT */
    uint64_t scan_rate;        /* scanner: shard bytes verified per second; 0 = off */
    uint64_t scan_interval_s;  /* scanner: pause after a full pass */
    bool rebuild;              /* walk the sets of drives adopted blank at open */
    bool paused;               /* take no work before ol_healer_resume (tests;
                                  queue and walk requests are still accepted) */
};

/* Counters; any thread. A walk's fields describe the current walk, or the
 * last one when none runs. */
struct ol_heal_stats {
    uint64_t queued, dropped, queue_len;    /* on-read queue */
    uint64_t objects_healed;    /* objects that had a drive rewritten (any source) */
    uint64_t shards_healed;     /* shard and metadata files written */
    uint64_t bytes_written;
    uint64_t dirs_removed;      /* leftover shard files / data dirs of writes cut short */
    uint64_t failed;            /* objects that could not be healed */
    uint64_t scan_objects, scan_bytes, scan_passes;  /* scanner */
    /* the current or last walk */
    bool walk_running, walk_rebuild;
    bool walk_no_bucket;        /* the walk's bucket is on no drive */
    uint64_t walk_id;           /* 0 = none yet; increases per walk */
    uint64_t walk_scanned, walk_healed, walk_failed, walk_bytes;
    uint64_t walk_started_ns, walk_finished_ns;
    char walk_bucket[64], walk_prefix[1025];
};

/*
 * Starts the healer thread on s (and the rebuild walk when p->rebuild and
 * a drive was adopted). Sets the engine's heal hook to ol_healer_enqueue.
 * Returns 0 and *out, -EINVAL (queue_size over OL_HEAL_QUEUE_MAX), -ENOMEM,
 * or -errno of pthread_create.
 */
int ol_healer_start(struct ol_store *s, const struct ol_healer_params *p, struct ol_healer **out);
/* Lets a healer started paused take work. Any thread. */
void ol_healer_resume(struct ol_healer *h);
/* Stops the thread (the object being healed is finished first) and frees h. */
void ol_healer_stop(struct ol_healer *h);

/* Queues bucket/key (copied). Any thread; never blocks on I/O. */
void ol_healer_enqueue(struct ol_healer *h, const char *bucket, const char *key);

/*
 * Starts a walk of bucket (NULL or "" = every bucket) under prefix (NULL
 * or "" = every key). Returns its id (> 0), or -EBUSY (a walk is running),
 * -EINVAL (names too long).
 */
int64_t ol_healer_walk(struct ol_healer *h, const char *bucket, const char *prefix);

void ol_healer_stats(struct ol_healer *h, struct ol_heal_stats *out);

#endif
