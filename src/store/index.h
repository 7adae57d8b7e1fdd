/*
 * index.h - the ordered per-bucket key index of the object store: every
 * key of a bucket in S3's order, each with the small fixed record a
 * listing needs (size, mtime, ETag, storage class, flags, latest version
 * id), so ListObjects never reads object metadata and never walks
 * directories. An index lives in memory; on disk it is a sorted snapshot
 * written at checkpoints plus an append log with group commit. What the
 * daemon makes durable is the catalog's choice (catalog.h): it keeps its
 * indexes memory-only while serving and checkpoints them only at a clean
 * stop (see Durability).
 *
 * Owns: the in-memory ordered map, the S3 listing walk (prefix,
 * delimiter, marker, max-keys, CommonPrefixes, IsTruncated, next marker),
 * and the byte layout of the index directory's files (format version 1):
 *
 *   <dir>/snapshot        sorted snapshot: every key and record
 *   <dir>/snapshot.tmp    a checkpoint in progress (never read; removed)
 *   <dir>/log.<16 hex>    the append log of generation G, replayed after
 *                         the snapshot; exactly one is live
 *
 * docs/store-index.md has the prose and offset-table version of the
 * layout below; the two must agree.
 *
 * Must not: know drives, placement, object metadata files or the event
 * loop; include anything but libc and xxhash.h; validate S3 key syntax
 * (UTF-8, NUL: ol_layout_key_ok at the S3 boundary does that - here a key
 * is 1..1024 arbitrary bytes); rebuild itself from object metadata (the
 * catalog does that through ol_index_create_empty + ol_index_put).
 *
 * ---- Why a B+tree ------------------------------------------------------
 *
 * A B+tree whose leaves are slotted byte areas of at most 4 KiB, each
 * holding the longest prefix common to its keys once and then per key
 * only the rest (u16 length, bytes, the 52-byte record) plus a u16 slot
 * offset; inner nodes hold 64 children and suffix-truncated separators
 * (the shortest byte string between two leaves). Leaf areas are allocated
 * to fit (256-byte steps), not at a fixed page size, so a half-full leaf
 * does not cost a full page. Per key that is the key bytes minus the
 * shared prefix, 56 bytes of record and slot, and about 6 bytes of leaf,
 * separator and inner-node overhead: ~100 bytes for a 40-byte key
 * (measured in docs/benchmarks.md, store-index section).
 *   - An ART looks keys up faster, but keeps a separate leaf allocation
 *     per key (pointer plus malloc header, ~24 bytes before the key and
 *     record) and inner nodes sized for the byte alphabet, and it has no
 *     leaf chain: every "next key" of a listing climbs a parent stack.
 *   - A skiplist spends two or more pointers and an allocation per key,
 *     and each step of a listing lands on a cache-cold node.
 * A listing is a walk along linked leaves: the next key is the next slot,
 * a page of 1000 keys touches a few dozen leaves. With a delimiter, a whole
 * CommonPrefix group is skipped by one descent to the group's successor,
 * so a million keys under "dir/" cost one step.
 *
 * ---- Durability --------------------------------------------------------
 *
 * ol_index_put / ol_index_remove change the in-memory map at once (later
 * listings see the change) and append a log frame to an in-memory batch
 * (not on a memory-only index). ol_index_flush writes the batch and a
 * COMMIT frame at the end of the log with one pwrite and fdatasyncs it
 * (group commit: one flush covers every change made since the last). A
 * change is durable only once a flush or a checkpoint that covers it
 * returned 0.
 *
 * What the daemon uses, exactly (catalog.h): memory-only indexes while
 * serving (no change is logged, flushed or synced, and no write waits for
 * the index), each copied into a fresh index directory and checkpointed at
 * a clean stop, then a clean marker written; a start loads them only when
 * that marker is there, else (a crash, a dirty catalog) rebuilds them from
 * the object metadata. The log and flush are built and tested for an index
 * made durable change by change; the catalog never calls ol_index_flush.
 *
 * Flush and checkpoint are plain blocking syscalls: callers run them off
 * the event-loop threads (the catalog: at the stop, after the loops ended).
 * A handle is not thread-safe: one thread at a time, the caller serialises.
 *
 * A batch is applied on replay only when it is whole: every frame and the
 * COMMIT that closes it verify (length, type, checksum, count, sequence).
 * Replay stops at the first batch that does not: a crash mid-flush leaves
 * a torn last batch, never acknowledged, which is cut off (the log is
 * truncated there so appends continue after the last whole batch).
 * Garbage is never loaded. A complete batch found after the bad one means
 * the bad one had been fdatasynced, so acknowledged changes were lost:
 * open reports it (info->damaged) and the caller should rebuild.
 *
 * ol_index_checkpoint writes every key to snapshot.tmp, fsyncs, renames it
 * over snapshot, fsyncs the directory, starts log G+1 (header, fsync,
 * directory fsync) and unlinks log G. A crash at any point leaves either
 * (old snapshot, log G) or (new snapshot, log G+1 or none yet): open
 * removes snapshot.tmp and logs older than the snapshot's generation, and
 * creates a missing log. The snapshot is checked as a whole (XXH3-64
 * trailer, strictly ascending keys): a bad one is -EBADMSG, never a
 * partial index.
 *
 * ---- Snapshot, format version 1 (all integers little-endian) -----------
 *
 *   off size field
 *     0    4 magic "OLIS" (4f 4c 49 53)
 *     4    2 u16 format version: 1
 *     6    2 u16 flags: 0
 *     8    8 u64 index id: random, shared by the snapshot and its logs
 *    16    8 u64 log generation G: log.<G> is replayed after this snapshot
 *    24    8 u64 key count N
 *    32    .  N entries, keys strictly ascending, each:
 *             0   2 u16 shared: leading bytes shared with the previous
 *                       key, the longest such run (0 for the first key)
 *             2   2 u16 rest length R >= 1; shared + R = key length <= 1024
 *             4   R     the key's remaining bytes
 *           4+R  52     record (below)
 *    -8    8 u64 XXH3-64 (seed 0) of every byte before it
 *
 * ---- Log, format version 1 ----------------------------------------------
 *
 * Header, 32 bytes:
 *     0    4 magic "OLIL" (4f 4c 49 4c)
 *     4    2 u16 format version: 1
 *     6    2 u16 flags: 0
 *     8    8 u64 generation G (equals the file name's)
 *    16    8 u64 index id (equals the snapshot's)
 *    24    8 u64 XXH3-64 (seed 0) of bytes 0..23
 * then frames, back to back. Frame:
 *     0    4 u32 frame length L, this field and the checksum included
 *     4    1 u8  type: 1 PUT, 2 REMOVE, 3 COMMIT
 *     5    1 u8  reserved, 0
 *     6    2 u16 key length K: 1..1024 (PUT, REMOVE); 0 (COMMIT)
 *     8    K     key
 *   PUT:     8+K  52  record;                      L = 68 + K
 *   REMOVE:  nothing more;                         L = 16 + K
 *   COMMIT:  8    4  u32 frames in the batch (>= 1, the COMMIT excluded)
 *           12    4  u32 reserved, 0
 *           16    8  u64 batch sequence: 1, 2, ... within this log;  L = 32
 *   L-8    8 u64 XXH3-64, seed G, of the frame's bytes 0..L-9
 *
 * Record, 52 bytes (struct ol_index_rec):
 *     0    8 u64 size: the object's length in bytes
 *     8    8 u64 modification time, ns since the Unix epoch
 *    16   16 ETag: MD5, or for a multipart upload MD5 of the parts' MD5s
 *    32    2 u16 ETag part count: 0 = "<md5>", N = "<md5>-N"
 *    34    1 u8  storage class (enum ol_meta_sc; opaque here)
 *    35    1 u8  flags: OL_INDEX_F_*; other bits 0
 *    36   16 latest version id; all zero = the null version
 *
 * ---- Errors ---------------------------------------------------------------
 *
 * One convention: 0 (or a documented non-negative value) on success, else
 * a negative errno, errno itself untouched:
 *   -EINVAL   a key of 0 or more than 1024 bytes, reserved flag bits set,
 *             a durable-only call on a memory-only index
 *   -ENOENT   get/remove: no such key; open: no index in the directory
 *   -EBADMSG  open: the snapshot (or a log header) is corrupt or missing
 *             while a log exists: rebuild the index
 *   -ENOTSUP  open: a sound snapshot or log of another format version
 *   -EBUSY    open/create: another handle holds the directory (flock)
 *   -ESTALE   cursor, listing: the index changed under the walk
 *   -ENOMEM   out of memory; nothing changed (a put allocates everything
 *             it may need, split nodes included, before touching the tree)
 *   -EIO etc. flush/checkpoint: the syscall's error. A failed write is
 *             retried by the next flush (the batch is kept, the log cut
 *             back); a failed fdatasync or a failed cut-back fails the
 *             handle for good (the page cache can no longer be trusted).
 * A failed handle refuses put, remove, flush and checkpoint with its error
 * (reads still answer from memory); the caller closes it and reopens
 * (replays what was flushed) or rebuilds.
 */
#ifndef OL_STORE_INDEX_H
#define OL_STORE_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OL_INDEX_KEY_MAX    1024u    /* bytes; = OL_LAYOUT_KEY_MAX */
#define OL_INDEX_FORMAT     1u       /* snapshot and log format version */
#define OL_INDEX_REC_LEN    52u      /* an encoded record */
#define OL_INDEX_SNAP_HDR   32u
#define OL_INDEX_LOG_HDR    32u

/* Record flags. */
#define OL_INDEX_F_DELETE_MARKER 0x01u /* the latest version is a delete marker:
                                          ListObjects does not show the key */
#define OL_INDEX_F_VERSIONS      0x02u /* the key may have more than the one
                                          null version: ListObjectVersions
                                          reads its metadata (set whenever it
                                          may: a flag too many costs a read,
                                          one missing would hide versions) */
#define OL_INDEX_F_ALL           0x03u

/* What a listing shows for a key without reading its metadata. */
struct ol_index_rec {
    uint64_t size;            /* bytes */
    uint64_t mtime_ns;        /* ns since the Unix epoch */
    uint8_t etag[16];         /* MD5 (of the parts' MD5s for multipart) */
    uint16_t etag_parts;      /* 0 = plain ETag, N = "-N" */
    uint8_t storage_class;    /* enum ol_meta_sc */
    uint8_t flags;            /* OL_INDEX_F_* */
    uint8_t version_id[16];   /* latest version; all zero = null */
};

struct ol_index;

/* What ol_index_open found; every field is set on success. */
struct ol_index_open_info {
    uint64_t keys;            /* keys in the index after open */
    uint64_t snapshot_keys;   /* of them loaded from the snapshot */
    uint64_t log_gen;         /* generation of the live log */
    uint64_t log_batches;     /* whole batches replayed */
    uint64_t log_records;     /* PUT and REMOVE frames replayed */
    uint64_t dropped_records; /* PUT and REMOVE frames in the cut-off tail,
                                 found by following frame lengths from the
                                 bad batch (a lower bound when a length
                                 field itself is damaged) */
    uint64_t dropped_bytes;   /* bytes cut off the end of the log */
    bool damaged;             /* a whole, valid batch followed the bad one:
                                 acknowledged changes were lost (not a torn
                                 tail); rebuild from object metadata */
};

/* Counters for benchmarks, tests and the admin API. */
struct ol_index_stats {
    uint64_t keys;
    uint64_t leaves;
    uint64_t inner_nodes;
    unsigned height;          /* inner levels above the leaves */
    uint64_t mem_bytes;       /* bytes the tree asked malloc for (leaf areas,
                                 nodes, separators), malloc overhead excluded */
    uint64_t log_bytes;       /* live log size on disk, header included */
    uint64_t pending_frames;  /* PUT/REMOVE frames not yet flushed */
    uint64_t pending_bytes;
};

/* ---- lifecycle -------------------------------------------------------------- */

/*
 * A new, empty index in dir (created if missing; its parent must exist),
 * replacing any index files there: snapshot, snapshot.tmp and logs are
 * removed, then log.0000000000000001 (with a fresh index id) is written
 * and fsynced, and the directory fsynced. No snapshot is written: the
 * index becomes openable at its first ol_index_checkpoint, and until then
 * ol_index_open answers -EBADMSG (a log without a snapshot). So a rebuild
 * (create, put every key found in the object metadata, checkpoint) that a
 * crash interrupts is redone, never taken for a whole index; a new bucket
 * checkpoints at once (an empty checkpoint is two small files). dir NULL
 * makes a memory-only index: flush is a no-op, checkpoint -EINVAL. *out
 * (OUT) is the handle, freed by ol_index_close. Returns 0, -EBUSY (another
 * handle holds the directory), -ENOMEM or a syscall's -errno (then *out is
 * NULL).
 */
int ol_index_create_empty(const char *dir, struct ol_index **out);

/*
 * Opens the index in dir: loads the snapshot, replays the live log's whole
 * batches, cuts a torn tail off the log, removes leftovers of an
 * interrupted checkpoint (snapshot.tmp, older logs) and creates the live
 * log if a crash came before it. info (OUT, may be NULL) says what was
 * found. Holds an exclusive flock on dir until close. Returns 0;
 * -ENOENT no snapshot and no log: no index here (or no directory);
 * -EBADMSG a corrupt snapshot, a missing snapshot beside a log (also an
 *          index created but never checkpointed), a corrupt
 *          log header followed by frames, a log of another index or of a
 *          generation newer than the snapshot's: rebuild;
 * -ENOTSUP another format version; -EBUSY; -ENOMEM; a syscall's -errno.
 * On failure *out is NULL and the files are left as they were.
 */
int ol_index_open(const char *dir, struct ol_index **out, struct ol_index_open_info *info);

/*
 * Frees the handle and releases the directory. Changes not yet flushed
 * are lost: flush first. NULL is a no-op.
 */
void ol_index_close(struct ol_index *idx);

/* ---- map ------------------------------------------------------------------ */

/*
 * Inserts key (klen bytes, 1..1024, any bytes) with *rec, or replaces its
 * record, and queues a PUT frame for the next flush. Returns 0 inserted,
 * 1 replaced; -EINVAL (key length, rec->flags outside OL_INDEX_F_ALL),
 * -ENOMEM, or the failed handle's error.
 */
int ol_index_put(struct ol_index *idx, const void *key, size_t klen, const struct ol_index_rec *rec);

/*
 * Removes key and queues a REMOVE frame. Returns 0; -ENOENT (nothing
 * queued), -EINVAL, -ENOMEM, or the failed handle's error.
 */
int ol_index_remove(struct ol_index *idx, const void *key, size_t klen);

/* Copies key's record into *rec (OUT). Returns 0, -ENOENT, -EINVAL. */
int ol_index_get(const struct ol_index *idx, const void *key, size_t klen, struct ol_index_rec *rec);

/* Keys in the index. */
uint64_t ol_index_count(const struct ol_index *idx);

/* Fills *st (OUT). */
void ol_index_stats(const struct ol_index *idx, struct ol_index_stats *st);

/*
 * Walks the whole tree and checks every invariant (keys strictly
 * ascending within and across leaves, each leaf's prefix shared by its
 * keys, separators bounding their subtrees, the leaf chain matching the
 * tree, the key count, the memory account). O(n); for tests. Returns 0 or
 * -EUCLEAN naming nothing: a failed check is a bug in this file.
 */
int ol_index_check(const struct ol_index *idx);

/* ---- durability ----------------------------------------------------------- */

/*
 * Makes every change so far durable: writes the queued frames and a
 * COMMIT frame at the end of the log in one pwrite, then fdatasync. No
 * syscall when nothing is queued; a no-op on a memory-only index.
 * Blocking. Returns 0 or -errno (see Errors: a write error leaves the
 * batch queued for a retry, an fdatasync error fails the handle).
 */
int ol_index_flush(struct ol_index *idx);

/*
 * Flushes, then writes a sorted snapshot of the whole index and starts a
 * new empty log (see Durability), so the next open reads one sequential
 * file instead of replaying every change. Blocking; O(keys). Returns 0,
 * -EINVAL on a memory-only index, or -errno. On failure before the rename
 * the old snapshot and log stay in use; a failure after it fails the
 * handle (the next open finds a consistent directory).
 */
int ol_index_checkpoint(struct ol_index *idx);

/* ---- cursor ----------------------------------------------------------------- */

/*
 * A position in the index, on the caller's stack. After a seek or next
 * that returned 1, key[0..klen) and rec are the current entry's (copies:
 * they stay valid after the index changes). Any put or remove invalidates
 * the position: the next call of ol_index_next returns -ESTALE. Fields
 * after `rec` are private.
 */
struct ol_index_cursor {
    uint16_t klen;
    uint8_t key[OL_INDEX_KEY_MAX];
    struct ol_index_rec rec;
    /* private */
    const struct ol_index *idx;
    const void *leaf;
    uint32_t pos;
    uint64_t version;
};

/*
 * Positions c on the first key >= key (after: false) or > key (after:
 * true); klen 0 means "before every key" (key may then be NULL). key may
 * be longer than 1024 bytes (it is only compared). Returns 1 on an entry,
 * 0 past the last key.
 */
int ol_index_seek(const struct ol_index *idx, struct ol_index_cursor *c, const void *key, size_t klen,
                  bool after);

/* Moves to the next key. Returns 1 on an entry, 0 past the end, -ESTALE. */
int ol_index_next(struct ol_index_cursor *c);

/* ---- S3 listing ------------------------------------------------------------- */

/* What to list. Every byte string may be empty (len 0, pointer unused). */
struct ol_index_list_req {
    const void *prefix;       /* only keys starting with it */
    size_t prefix_len;
    const void *delim;        /* roll keys up at its first occurrence after the
                                 prefix; any length, usually "/" */
    size_t delim_len;
    const void *start;        /* exclusive start: marker, start-after or the
                                 continuation token's key */
    size_t start_len;
    unsigned max_keys;        /* entries (keys + CommonPrefixes) at most; S3
                                 clamps to 1000 at its boundary */
    bool skip_deleted;        /* hide keys whose latest version is a delete
                                 marker (ListObjects), and CommonPrefixes
                                 holding only such keys */
};

/* What a listing returned besides the entries. */
struct ol_index_list_out {
    uint32_t nkeys;           /* Contents delivered */
    uint32_t nprefixes;       /* CommonPrefixes delivered */
    bool truncated;           /* IsTruncated: more entries follow */
    uint16_t next_len;        /* 0 when nothing was delivered */
    uint8_t next[OL_INDEX_KEY_MAX]; /* NextMarker: the last key or CommonPrefix
                                       delivered; the next page's start */
};

/*
 * Called once per entry, in order: a key with its record, or a
 * CommonPrefix with rec NULL. name is valid during the call only. Return
 * 0 to go on; a negative value stops the listing, which returns it. It
 * must not change the index (the listing would stop with -ESTALE).
 */
typedef int (*ol_index_list_fn)(void *arg, const uint8_t *name, size_t len,
                                const struct ol_index_rec *rec);

/*
 * One page of an S3 listing (ListObjects v1 and v2), S3's semantics:
 *   - entries are the keys starting with prefix; with a delimiter, a key
 *     holding it at or after the end of the prefix is replaced by its
 *     CommonPrefix (the key up to and including the first such occurrence
 *     of the delimiter), each CommonPrefix once; a key equal to the prefix,
 *     or without the delimiter after the prefix, is itself an entry;
 *   - the page is the first max_keys entries, in byte order, whose name
 *     sorts after start. A marker inside a CommonPrefix therefore skips
 *     the rest of that group (its name sorts before the marker), exactly
 *     as resuming from a NextMarker that is the CommonPrefix itself does
 *     (Ceph RGW's "fast forward" rule); a marker before the prefix starts
 *     at the prefix;
 *   - truncated is true when at least one more entry follows the page;
 *     max_keys 0 returns nothing and truncated false (S3 does the same).
 * A CommonPrefix group is skipped with one descent to the group's
 * successor, never key by key. cb(arg, ...) receives the entries (cb may
 * be NULL to only count); *out (OUT) the counts, the flag and the next
 * marker. Returns 0, what cb returned to stop, or -ESTALE.
 */
int ol_index_list(const struct ol_index *idx, const struct ol_index_list_req *req,
                  ol_index_list_fn cb, void *arg, struct ol_index_list_out *out);

/*
 * The plain twin of ol_index_list: same contract, but it steps through
 * every key of a CommonPrefix group instead of descending past it. For the
 * differential test and the benchmark's before/after.
 */
int ol_index_list_ref(const struct ol_index *idx, const struct ol_index_list_req *req,
                      ol_index_list_fn cb, void *arg, struct ol_index_list_out *out);

#endif
