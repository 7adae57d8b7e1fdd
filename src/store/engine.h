/*
 * engine.h - the object engine of one node: durable erasure-coded PUT,
 * GET (with reconstruction and checksum verification), HEAD and DELETE of
 * whole objects, S3 multipart uploads (create, upload part, complete,
 * abort, list, expiry; GET of objects made of parts), and plain buckets,
 * as an asynchronous API on the per-core io_uring loops (rt/loop.h).
 *
 * Owns: the paths below on every drive, the commit order that makes an
 * object visible, the shard-file contents (stripes cut into shard blocks,
 * each framed by store/bitrot.h), quorum decisions, the per-core pools
 * of request states and stripe buffers, and the registry of multipart
 * uploads in progress. It uses, and does not re-decide:
 * ec.h (Reed-Solomon), bitrot.h (block framing), layout.h (set, shard
 * distribution, quorums, object directory names), format.h (drive format at
 * open), meta.h (the metadata file codec).
 *
 * Must not: block a loop thread (every file operation after ol_store_open
 * goes through ol_loop_*), allocate per request (pools are sized at
 * ol_store_core_create; an empty pool is -EBUSY), validate bucket or key
 * names (the S3 layer did: ol_layout_bucket_ok / ol_layout_key_ok), or
 * know HTTP. Healing (engine_heal.c) is the exception to "every file
 * operation through ol_loop_*": a blocking call for the healer's thread
 * (store/heal.h), never made on a loop; the requests only hand what needs
 * healing to the heal hook.
 *
 * ---- on one drive ------------------------------------------------------------
 *
 *   <drive>/.openlake/format                       drive format (format.h)
 *   <drive>/.openlake/tmp/<tid>.part               shard file of a PUT or an UploadPart
 *                                                  in flight
 *   <drive>/.openlake/tmp/<tid>.meta               metadata file being written
 *   <drive>/.openlake/buckets/<bucket>/            a bucket
 *   <drive>/.openlake/buckets/<bucket>/versioning  its versioning state (engine_ver.c;
 *                                                  absent: never versioned)
 *   <drive>/.openlake/tmp/<tid>.ver                versioning file being written
 *   <drive>/.openlake/buckets/<bucket>/objects/<ab>/<hash>/meta
 *                                                  the object's metadata (meta.h)
 *   <drive>/.openlake/buckets/<bucket>/objects/<ab>/<hash>/<data-dir>.data
 *                                                  this drive's shard of a PUT's object
 *                                                  (a "flat" version: OL_META_VF_FLAT)
 *   <drive>/.openlake/buckets/<bucket>/objects/<ab>/<hash>/<data-dir>/part.<n>
 *                                                  this drive's shard of part n of a
 *                                                  multipart object
 *   <drive>/.openlake/buckets/<bucket>/uploads/<ab>/<hash>/<upload>/upload
 *                                                  a multipart upload in progress
 *                                                  (see "multipart uploads" below)
 *   <drive>/.openlake/buckets/<bucket>/uploads/<ab>/<hash>/<upload>/data/part.<n>
 *                                                  this drive's shard of uploaded part n
 *
 * <ab>/<hash> is ol_layout_object_dir(deployment, key); <tid> and
 * <data-dir> are random uuids written "xxxxxxxx-xxxx-...". ol_store_open
 * removes everything under .openlake/tmp/ (writes a crash interrupted).
 *
 * ---- shard files ---------------------------------------------------------------
 *
 * An object of size S on a set of n = k + m drives (m parity) is cut into
 * stripes of k * B bytes, B = ol_ec_shard_len(stripe_bytes, k) (a multiple
 * of 64, so k * B >= stripe_bytes). Stripe s (0-based) of L bytes (L = k*B
 * except for the last) is laid out as k data shards of b = ol_ec_shard_len(L,
 * k) bytes each (shard j holds stripe bytes [j*b, (j+1)*b), the tail of the
 * last zero-filled), encoded into m parity shards of b bytes. Shard i of
 * every stripe goes to the drive at position p with dist[p] == i
 * (ol_layout_distribution of ol_layout_object_hash), as block s of that
 * drive's shard file (<data-dir>.data, or part.1 of a multipart object's
 * data dir): bitrot framing version 1 with block size B, so block s
 * sits at offset s * (8 + B) and every block but the last is B bytes. The
 * block seed is XXH3-64(data-dir id, 16 bytes, seed = shard index): a block
 * of another object, another shard or another offset never verifies. The
 * metadata records k, m, B (block_size), the data-dir id and dist; the
 * reader derives everything else from them and the size.
 *
 * Parts: an object made by CompleteMultipartUpload has one shard file per
 * part, part.<number>, each laid out as above from its own first byte (its
 * own stripes, the last one short), with block seeds XXH3-64(data-dir id ||
 * part number as u32 LE, 20 bytes, seed = shard index) for parts other
 * than 1 (part 1 keeps the 16-byte seed above, so a PUT's shard file is
 * laid out like a part.1). The version's parts[] give each part's number and size, in
 * object order; their sizes add up to the object's. A part file ends with
 * its part record after the last block (see "multipart uploads"); readers
 * never look past the last block.
 *
 * Inline objects: an object of at most inline_max bytes (one stripe) has no
 * data dir and no shard files. Its stripe is erasure-coded the same way and
 * each drive's metadata file carries that drive's shard (b bytes, no bitrot
 * framing: the metadata file's own XXH3 checksums cover it) as inline data;
 * the version's data-dir id is all zero. An empty object is always inline
 * (no bytes at all), even with inline_max 0.
 *
 * ---- commit order of a PUT (per drive; a write quorum must finish it all) --------
 *
 *   1. statx buckets/<bucket>; create tmp/<tid>.part and reserve its full
 *      size, rounded up to 4 KiB (fallocate: drives without room fail here,
 *      before the body is streamed; a filesystem without fallocate just
 *      goes on); create tmp/<tid>.meta
 *   2. the shard blocks, stripe by stripe (at most OL_STORE_PUT_SLOTS stripes
 *      in flight per PUT, from the request's fixed buffer)
 *      -- barrier: fewer than a write quorum of drives left: the tmp files
 *         are removed and the PUT fails with -EIO; nothing was visible --
 *   3. take the key's commit lock (see "versions"); mkdir objects/<ab> and
 *      objects/<ab>/<hash>; rename tmp/<tid>.part -> <hash>/<data-dir>.data
 *      (not yet synced, but a name no metadata points at yet); read
 *      <hash>/meta and decide a conditional write on it; the new version is
 *      added as the latest (a null one replaces the null version, wherever
 *      it stood), every other version is kept; write the new file to
 *      tmp/<tid>.meta (while the mkdir and the rename run, as if the key
 *      were new; again, merged, when <hash> was there: engine_put.c)
 *   4. at once (engine_put.c "the fan"): fdatasync the shard file, fsync
 *      tmp/<tid>.meta, fsync the parent of each directory 3 made (and
 *      objects/ for a new <hash> in an <ab> that was there: another key's
 *      PUT may have made it and not synced it yet); each file closed after
 *      its sync
 *   5. all of 4 done: rename tmp/<tid>.meta over <hash>/meta, fsync <hash>/
 *      <- visible (that one fsync makes 3's rename durable too: both are
 *      entries of <hash>/; the shard file's own tmp/ entry never needs to
 *      be). Two rounds of syncs per drive, where a sequence of 3 to 5 would
 *      do: the data, the metadata and the directories holding them are
 *      durable before the one name that makes them visible
 *   6. quorum of drives through 5: the listing catalog gets the new
 *      version (ol_store_set_catalog), the replaced version's data is
 *      removed (its shard file; a multipart version's part files, then its
 *      data dir) and EV_DONE(0). Below quorum: each drive is put back (the old
 *      meta bytes rewritten the same way, or meta unlinked when there was
 *      none; the new shard file removed) and EV_DONE(-EIO).
 * Inline objects skip 1's file, 2, 3's rename and 4's fdatasync. A crash
 * before 5's rename leaves only tmp files (removed at open) or an
 * unreferenced shard file, maybe incomplete (for the scanner, later); after
 * it, the drives that renamed hold the new version and reads take the
 * newest version a read quorum agrees on.
 * A new key costs three new inodes per drive (shard file, <hash>/, meta;
 * <ab>/ for the first key under it), and no directory for its data: inode
 * allocation is most of a 1 MiB PUT's CPU on ext4 without a journal.
 *
 * ---- reads ---------------------------------------------------------------------
 *
 * GET/HEAD read <hash>/meta on every drive of the set. A drive without it
 * (ENOENT) is asked whether it has the bucket directory. The object is the
 * latest version that a read quorum (k) of drives agree on (version id,
 * mtime, data dir, size, ETag, geometry); when several do, the newest
 * mtime. No agreement: -ENOENT when a read quorum of drives have the
 * bucket but not the object (a delete marker or another key's file count
 * as "not the object"), OL_STORE_ENOBUCKET when no drive has the bucket and
 * a read quorum say so, else -EIO. Data: only the data shards a range needs
 * are read; a block that is missing, short or fails ol_bitrot_verify is
 * replaced by reading other shards (data first, then parity) and the
 * stripe is rebuilt with ol_ec_reconstruct. Fewer than k good shards:
 * -EIO. Corrupt bytes are never handed out.
 *
 * DELETE per drive: read meta (its versions' data), unlink meta, fsync
 * <hash>/, remove every version's shard files (and data dirs), rmdir <hash>
 * and <ab> (when empty). Success when
 * a write quorum of drives no longer hold the object (a missing object is
 * success, as in S3). DELETE of a version (ol_delete_version): the file
 * without it written and renamed like a PUT's (or the whole removal above
 * when it was the last version), then its data dir removed. A delete
 * marker is a PUT (of 0 bytes). Both DELETEs hold the key's commit lock.
 *
 * ---- multipart uploads ------------------------------------------------------------
 *
 * An upload lives on the drives of its object's set, in
 * uploads/<ab>/<hash>/<upload>/ (<ab>/<hash> as for the object, <upload>
 * the upload id written as a uuid):
 *
 *   upload          the upload record: a metadata file (meta.h) of the
 *                   object's key with one object version, the template
 *                   fixed at create: headers, user metadata, tagging,
 *                   storage class, checksum algorithm and type (the
 *                   FULL_OBJECT flag), k, m, B, dist, data dir = the
 *                   upload id, mtime = initiated. Its
 *                   presence is the upload's existence on that drive.
 *   data/part.<n>   this drive's shard of part n, laid out as in an object
 *                   (the data dir id is the upload id), followed by the
 *                   part record: a metadata file of the object's key with
 *                   one version (size, etag = the part's MD5, cks = the
 *                   part's checksum, k, m, B, index, dist, data dir = the
 *                   upload id, mtime, parts[0] = this part), then an
 *                   8-byte footer: u32 LE record length, "OLPT". Blocks
 *                   and record are one file, replaced by one rename: a
 *                   drive never pairs the bytes of one upload of part n
 *                   with the record of another.
 *
 * Create (per drive): statx the bucket; mkdir uploads, <ab>, <hash> (as
 * needed), <upload>, <upload>/data; write tmp/<tid>.meta, fsync, rename it
 * to <upload>/upload; fsync <upload>, <hash> and the parent of each
 * directory made. A write quorum (of the upload's k + m) must finish it,
 * else it is undone.
 *
 * UploadPart (per drive): statx <upload>/upload; create tmp/<tid>.part;
 * the blocks as in a PUT; at the end the part record and its footer,
 * fdatasync, close; rename tmp/<tid>.part over <upload>/data/part.<n>
 * (replacing an earlier upload of n atomically); fsync <upload>/data.
 * Below write quorum the tmp files go and the status is -EIO; drives that
 * renamed keep the new part (Complete reads every drive's records and
 * uses only drives whose records match what the client lists).
 *
 * Complete (per drive): read <upload>/upload and every listed part's
 * record (statx for the length, then the file's tail); a drive whose
 * records do not all match (number, etag, checksum, k, m, B, the file's
 * length) is left out. A write quorum of matching drives is needed, else
 * InvalidPart (too few drives could hold the listed parts) or -EIO. Then
 * the parts uploaded but not listed are unlinked, and the PUT commit
 * (steps 4-6) runs with rename <upload>/data -> objects/<ab>/<hash>/<upload>
 * as the data dir and the new version (parts[] = the listed parts, size =
 * their sum, etag = MD5 of their binary MD5s, etag_parts = their count,
 * the template's headers). After the quorum: the replaced version's data
 * dir goes, then <upload>/upload, <upload>, and the empty <hash> and <ab>
 * under uploads/; drives left out lose the whole upload. Below quorum the
 * drives are put back (metadata as before, the data dir renamed back
 * into the upload; unlisted parts stay deleted).
 *
 * Abort (per drive): unlink <upload>/upload, fsync <upload> (the upload
 * is gone from the drive), then unlink the parts, rmdir data, <upload>,
 * <hash>, <ab>. Success at a write quorum.
 *
 * The registry: the uploads in progress are also kept in memory, in one
 * table shared by the cores (a mutex held for table updates only, never
 * across I/O): bucket, key, id, initiated, m, B, storage class, checksum
 * algorithm and type, and a bitmap of the part numbers ever begun (io_uring has no
 * getdents: Abort, Complete and ListParts learn the part files from it).
 * ol_store_open rebuilds it by scanning the drives (blocking, before the
 * loops run): an upload whose record is on fewer than a read quorum of its
 * set's drives, or older than mpu_expiry_s, is removed; directories
 * without a record are removed; an upload whose data/ is missing (a crash
 * inside Complete) is finished on that drive when the object's metadata
 * there names the upload as a data dir, else its data dir is renamed back.
 * A crash therefore leaves an upload whole or gone on each drive, and the
 * object old or new as after a PUT, never a mix.
 *
 * Concurrency: every request lives on the core that began it; writes of
 * one key (on one core or two) are ordered by the key's commit lock, held
 * from reading the old metadata to the end of the request, so no commit
 * is lost and a conditional write is decided on what it replaces (see
 * "versions and conditional writes"). The lock table is in memory: it
 * orders the requests of this process (a cluster needs its own lock).
 * Directory races between a DELETE removing empty <ab>/<hash> directories
 * and a PUT creating them are retried by the PUT.
 *
 * Errors: 0 or -errno everywhere. Requests report through one callback
 * (ol_store_cb). Statuses: -ENOENT no such object; OL_STORE_ENOBUCKET no such
 * bucket; -EIO quorum not reached (too many drives missing, failing or
 * corrupt); OL_STORE_EFULL a write's quorum lacks only drives without room
 * for its files; -EBUSY the core's pool is empty (503 SlowDown); -ERANGE range
 * not satisfiable; -EINVAL a caller error (sizes, parity); -ENOTEMPTY bucket
 * not empty; -EEXIST bucket exists. Multipart uploads add
 * OL_STORE_ENOUPLOAD, OL_STORE_EPARTORDER, OL_STORE_EBADPART,
 * OL_STORE_ETOOSMALL and -ENOSPC (the registry is full).
 *
 * Threads: ol_store_open/close on a thread that runs no loop; everything
 * else on the loop thread of the core passed to ol_store_core_create. The
 * struct ol_store is read-only after open and shared by all cores.
 */
#ifndef OL_STORE_ENGINE_H
#define OL_STORE_ENGINE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rt/loop.h"
#include "store/meta.h"

struct ol_store;       /* the drives and the geometry: one per process */
struct ol_store_core;  /* per core: pools, erasure codes, counters */
struct ol_put;         /* one streaming PUT */
struct ol_get;         /* one GET / HEAD */

/* The status that means "no such bucket" (the S3 layer's NoSuchBucket);
 * -ENOENT is "no such key". */
#define OL_STORE_ENOBUCKET (-ENXIO)
#define OL_STORE_EFULL     (-ENOSR)     /* drives without room (S3: 507) */
/* Multipart statuses (the S3 errors they stand for). */
#define OL_STORE_ENOUPLOAD  (-ESRCH)    /* NoSuchUpload */
#define OL_STORE_EPARTORDER (-EDOM)     /* InvalidPartOrder */
#define OL_STORE_EBADPART   (-EBADR)    /* InvalidPart */
#define OL_STORE_ETOOSMALL  (-EMSGSIZE) /* EntityTooSmall */
#define OL_STORE_EBADDIGEST (-EBADE)    /* BadDigest: Complete's checksum hook
                                           refused the object's checksum */

#define OL_STORE_STRIPE_DEFAULT (1u << 20)  /* 1 MiB of data per stripe */
#define OL_STORE_STRIPE_MIN     (64u << 10)
#define OL_STORE_STRIPE_MAX     (16u << 20)
/*
 * Default inline threshold: 128 KiB (= OL_META_MAX_INLINE, the most one
 * version's inline data may hold). Objects up to it cost one metadata file
 * per drive instead of a data dir and a shard file; each drive's metadata
 * grows by ~ size / k, and a GET of a small object reads nothing but the
 * metadata files it reads anyway.
 */
#define OL_STORE_INLINE_DEFAULT (128u << 10)
#define OL_STORE_REQUESTS_DEFAULT 64u
/* Stripes in flight per PUT: direct writes take the drive's time, and with
 * 2 a 64 MiB PUT paused (and its receive was cancelled and re-armed) at
 * every stripe (PUT 64 MiB +12 % with 4). A GET reads ahead only
 * OL_STORE_GET_SLOTS: with 4 a 64 MiB GET was 14-17 % slower. */
#define OL_STORE_PUT_SLOTS 4u
#define OL_STORE_GET_SLOTS 2u
/* ol_put_write takes at most this many bytes per call (see there). */
#define OL_STORE_WRITE_MAX (64u << 10)
/* Multipart: S3's smallest part (every part but the last), the default
 * expiry of an incomplete upload (Flink keeps uploads open across
 * checkpoints), the default registry size, S3's largest part number. */
#define OL_STORE_MPU_MIN_PART     (5ull << 20)
#define OL_STORE_MPU_EXPIRY_S     (7 * 24 * 3600)
#define OL_STORE_MPU_UPLOADS      4096u
#define OL_STORE_MPU_MAX_PART_NUM 10000u
#define OL_STORE_MPU_ID_LEN       16u

/* ---- drives of other nodes -----------------------------------------------------------
 *
 * In the cluster store a set's drives are partly other nodes'. The engine
 * takes every step on a drive (open, read, write, fsync, close, mkdir,
 * unlink, rename, statx, fallocate) as one struct ol_store_rstep; a local
 * drive's goes to the core's ring, a remote drive's to the hooks below
 * (cluster/drive.h sends it to the drive's node). A remote drive's files
 * are that node's handles (>= 0): the engine only hands them back to the
 * hooks. Remote drives take no O_DIRECT, no syncfs group commit and no
 * mapped reads: their writes are buffered and synced file by file, and
 * their GETs read block by block.
 */
enum ol_store_rstep_code {
    OL_RSTEP_OPEN = 1,   /* path, flags (open(2): no O_DIRECT), mode: a file */
    OL_RSTEP_READ,       /* fd, buf, len, off: bytes read */
    OL_RSTEP_WRITE,      /* fd, wbuf, len, off: bytes written */
    OL_RSTEP_FSYNC,      /* fd, flags 1: data only */
    OL_RSTEP_CLOSE,      /* fd */
    OL_RSTEP_MKDIR,      /* path, mode */
    OL_RSTEP_UNLINK,     /* path, flags AT_REMOVEDIR or 0 */
    OL_RSTEP_RENAME,     /* path -> path2 */
    OL_RSTEP_STATX,      /* path, stx: its type bits and size */
    OL_RSTEP_FALLOCATE,  /* fd, off = length from 0 */
    OL_RSTEP_MAX = OL_RSTEP_FALLOCATE,
};

struct statx;

struct ol_store_rstep {
    uint8_t code;              /* enum ol_store_rstep_code */
    int fd;
    int flags;
    unsigned mode;
    const char *path, *path2;  /* relative to the drive; copied by start */
    void *buf;                 /* READ: filled before the completion */
    const void *wbuf;          /* WRITE: unchanged until the completion */
    unsigned len;
    uint64_t off;
    struct statx *stx;         /* STATX: filled before the completion */
    int64_t token;             /* a change made under a cluster commit lock: its set's
                                  fencing token, which the drive must have taken
                                  (docs/cluster.md "Ordering"); 0: none */
};

struct ol_store_remote {
    /* Starts st on configured drive `drive` for an op of `loop` (the
     * calling core's): 0, and op->cb(loop, op, result, 0) runs later on
     * loop, exactly once (result >= 0 or -errno as the local call would
     * give; a node down or late: -ENOTCONN, -ECONNRESET, -ETIMEDOUT...);
     * or -errno, and op->cb never runs. */
    int (*start)(void *ud, ol_loop *loop, unsigned drive, const struct ol_store_rstep *st,
                 struct ol_op *op);
    /* Whether this node's drive `drive` took fencing token `token` (a
     * change under a commit lock on a local drive): false, and the step
     * fails with -ESTALE. NULL: local drives are not fenced. Any core. */
    bool (*fenced)(void *fud, unsigned drive, int64_t token);
    void *ud, *fud;
};

/*
 * The commit locks of a cluster store (docs/cluster.md "Ordering"): a
 * key's commit lock (and a bucket's) is its set's owner's, which may be
 * another node. Without these hooks the engine takes its own table's.
 */
struct ol_store_lock {
    int64_t node;              /* who granted it */
    uint32_t id;               /* its id there */
    int64_t token;             /* the set's fencing token with it */
    uint64_t ticket;           /* the asker's name of the grant (its unlock names it) */
};

struct ol_store_locks {
    /* Asks for the commit lock of path (relative to a drive: an object's
     * directory, or a bucket's for set 0) in set, for a request of `loop`:
     * 0, and op->cb(loop, op, res, 0) runs later on loop, exactly once,
     * with *out filled before: res 0 granted, -EBUSY held by another,
     * another -errno (no owner reachable now: asked again later); or
     * -errno now, and op->cb never runs. */
    int (*lock)(void *ud, ol_loop *loop, unsigned set, const char *path,
                struct ol_store_lock *out, struct ol_op *op);
    /* Gives back a lock granted (nobody waits for it). Any core's thread. */
    void (*unlock)(void *ud, unsigned set, const struct ol_store_lock *l);
    void *ud;
};

/* The engine's own lock table, for the owner's side of those hooks: 0 and
 * *slot, or -EBUSY (held, or the table is full); and its release. Any thread. */
int ol_store_key_trylock(struct ol_store *s, const char *path, unsigned *slot);
void ol_store_key_unlock(struct ol_store *s, unsigned slot);

struct ol_store_params {
    const char *const *drives;  /* n drive directories in configured order;
                                   each must exist (format.h never creates
                                   one); copied. A remote drive's entry is
                                   only its name in messages */
    unsigned n;
    unsigned drives_per_set;    /* 1..32; n a multiple of it; sets = n / it */
    int parity;                 /* -1 = ol_layout_default_parity; 0..dps/2,
                                   and dps - parity <= 16 (ec.h) */
    uint32_t stripe_bytes;      /* 0 = OL_STORE_STRIPE_DEFAULT; MIN..MAX.
                                   Objects keep their own block size, but a
                                   core's buffers fit the current stripe:
                                   do not lower it under existing objects */
    int64_t inline_max;         /* -1 = OL_STORE_INLINE_DEFAULT, 0 = never
                                   inline; clamped to stripe_bytes and
                                   OL_META_MAX_INLINE */
    unsigned max_requests;      /* request states per core; 0 = 64 */
    unsigned format_flags;      /* OL_FORMAT_ADOPT_* for ol_format_resolve */
    uint64_t mpu_min_part;      /* the smallest part but the last at Complete
                                   (EntityTooSmall); 0 = OL_STORE_MPU_MIN_PART */
    int64_t mpu_expiry_s;       /* incomplete uploads older than this are
                                   removed by ol_store_open and
                                   ol_store_mpu_cleanup; 0 = OL_STORE_MPU_EXPIRY_S,
                                   -1 = never */
    int direct_io;              /* 0 = where a drive takes it (tried at
                                   open: a 4 KiB O_DIRECT write), PUTs and
                                   parts write their shard files' whole
                                   pages with O_DIRECT; -1 = never */
    int sync;                   /* 0 = group commit: a syncfs per filesystem
                                   for every write waiting (syncer.h), on
                                   drives whose filesystem it covers
                                   (ol_store_drive_syncfs; the others as 1);
                                   1 = an fsync of each file and directory */
    unsigned mpu_max_uploads;   /* uploads in progress at once (registry
                                   entries, ~2.4 KiB each, touched as used);
                                   0 = OL_STORE_MPU_UPLOADS. ol_store_open adds
                                   room for the uploads it finds */
    /* The cluster store: the caller resolved and wrote the formats of its
     * own drives (a pool's, cluster/), so ol_store_open reads none; the
     * deployment id is this, and drive i is another node's when
     * remote_drives[i] (reached through remote; not opened here, nor
     * scanned for uploads, versioning or leftovers: its node does that).
     * NULL: a single host's store, every drive local and formatted here. */
    const uint8_t *deployment;     /* 16 bytes, or NULL */
    const bool *remote_drives;     /* n flags, or NULL: none */
    const struct ol_store_remote *remote;   /* copied */
    const struct ol_store_locks *locks;     /* copied; NULL: the engine's own table */
};

/*
 * Opens the store (main thread, before the loops run; blocking calls):
 * ol_format_resolve + ol_format_apply over the drives (a refusal comes back
 * as its error with the resolver's message), then on every drive that is
 * not offline: mkdir .openlake/tmp and .openlake/buckets, remove everything
 * under .openlake/tmp/, and open the drive directory (O_DIRECTORY) for the
 * *at() calls, and (direct_io 0) try one O_DIRECT page write in tmp/;
 * then the multipart registry is rebuilt from the drives'
 * uploads/ directories (expired, orphaned and below-quorum uploads are
 * removed; see "multipart uploads"). Offline drives stay in the layout and
 * count as failed in every request. Returns 0 and *out; -EINVAL (params; err says which);
 * -EUCLEAN (format refused); -ENOMEM; or -errno of a drive (err names it).
 */
int ol_store_open(const struct ol_store_params *p, struct ol_store **out, char *err,
                  size_t errlen);
/* Closes the drive directories and frees s. Every core must be destroyed first. */
void ol_store_close(struct ol_store *s);

/* The syncfs group commit's counters (0 with store_sync = fsync): syncfs
 * calls, barriers answered, nanoseconds in syncfs. Any thread. */
void ol_store_sync_stats(const struct ol_store *s, uint64_t *syncs, uint64_t *barriers,
                         uint64_t *ns);

/* Geometry, for callers and tests. */
unsigned ol_store_sets(const struct ol_store *s);
unsigned ol_store_drives_per_set(const struct ol_store *s);
unsigned ol_store_parity(const struct ol_store *s);
uint32_t ol_store_inline_max(const struct ol_store *s);
/* The set (0..sets-1) that holds bucket/key. */
unsigned ol_store_set_of(const struct ol_store *s, const char *bucket, const char *key);

/*
 * Per-core counters. Read on the core's loop thread (or after it stopped);
 * the daemon exports the sum over cores.
 */
struct ol_store_stats {
    uint64_t puts, put_bytes, put_errors, put_aborts;
    uint64_t gets, get_bytes, get_errors;
    uint64_t deletes, delete_errors;
    uint64_t busy;                  /* requests refused: pool empty (-EBUSY) */
    uint64_t reads_reconstructed;   /* stripes (or inline objects) rebuilt from parity */
    uint64_t checksum_failures;     /* shard blocks / metadata files that failed their checksum */
    uint64_t read_errors;           /* shard files missing, short, or failing to read */
    uint64_t write_drive_failures;  /* drives that missed a PUT/DELETE that succeeded */
    uint64_t needs_heal;            /* requests that found a drive to heal */
    uint64_t mpu_created, mpu_completed, mpu_aborted;  /* uploads (aborted: also expired) */
    uint64_t mpu_parts;             /* parts uploaded (also counted in puts) */
    uint64_t direct_bytes;          /* shard-file bytes written with O_DIRECT */
    uint64_t ahead_bytes;           /* of those, written before their stripe was sealed
                                       (engine_put.c "ahead writes") */
    uint64_t mapped_bytes;          /* GET: shard bytes verified and handed out where
                                       they lie in the page cache (engine_get.c
                                       "mapped reads"), not read into a slot */
};

/*
 * Creates the state of one core (on that loop's thread): max_requests
 * request states, and for each one a fixed buffer region (stripe slots and
 * metadata buffers) reserved with mmap(MAP_NORESERVE), so memory is only
 * used as requests touch it; one Reed-Solomon code per allowed parity.
 * Returns 0 and *out, -ENOMEM, or -EINVAL.
 */
int ol_store_core_create(struct ol_store *s, ol_loop *loop, struct ol_store_core **out);
/*
 * Frees the core. Call it on the loop's thread with no request in use, or
 * after the loop has stopped: requests still in use are then dropped as a
 * crash would drop them (their tmp files stay until the next open). The
 * loop must not be destroyed before: this waits for the requests' syncfs
 * barriers still out, which are posted back to it (never run).
 */
void ol_store_core_destroy(struct ol_store_core *c);
/* Request states in use (PUTs and GETs not yet released, DELETEs and bucket
 * operations in flight, aborted PUTs still cleaning up). */
unsigned ol_store_core_busy(const struct ol_store_core *c);
const struct ol_store_stats *ol_store_core_stats(const struct ol_store_core *c);

/* ---- requests ------------------------------------------------------------------ */

enum ol_store_ev {
    OL_STORE_EV_READY = 1, /* PUT: room again after ol_put_write returned 1 */
    OL_STORE_EV_ERROR,     /* PUT before finish: it cannot succeed (status);
                              call ol_put_abort */
    OL_STORE_EV_META,      /* GET: the object's version (status 0) */
    OL_STORE_EV_DATA,      /* GET: data[0..len) of the requested range, in order */
    OL_STORE_EV_DONE,      /* the request ended with status (ol_store_mpu_cleanup:
                              len = the uploads removed) */
};

struct ol_store_event {
    enum ol_store_ev type;
    int status;                            /* 0 or -errno */
    const struct ol_meta_version *version; /* EV_META: valid until ol_get_end */
    const uint8_t *data;                   /* EV_DATA: valid until the next */
    size_t len;                            /*   ol_get_next or ol_get_end */
};

/* Runs on the core's loop thread. */
typedef void (*ol_store_cb)(void *ud, const struct ol_store_event *ev);

/* ---- versions and conditional writes ---- */

/*
 * Versions (S3 versioning): the caller chooses each new version's id. A
 * version with the all-zero (null) id replaces the key's null version
 * wherever it stood and becomes the latest (a bucket never versioned, or
 * versioning Suspended); any other id is added as the latest and every
 * other version is kept (Enabled). A delete marker is written as a PUT
 * of 0 bytes whose version has type OL_META_DELETE_MARKER.
 *
 * Commit lock: every write that rewrites an object's metadata (PUT,
 * delete marker, Complete, DELETE of a version or of the object) holds the
 * key's commit lock (one table for the whole store, shared by the cores)
 * from reading the old metadata until its request is released; a write
 * finding the lock taken waits (it is retried every timer tick), except a
 * conditional write, which fails with OL_STORE_ECONFLICT (S3's 409
 * ConditionalRequestConflict). The engine updates the listing catalog
 * under it, at the commit point (ol_store_set_catalog); the lock is let go
 * after the EV_DONE callback returns. So two writes of one key, on one
 * core or two, commit one after the other: no version is lost, the
 * listing follows them in that order, and of several racing
 * If-None-Match: * writes exactly one succeeds.
 */
#define OL_STORE_EPRECOND  (-EALREADY)  /* PreconditionFailed (412) */
#define OL_STORE_ECONFLICT (-EDEADLK)   /* ConditionalRequestConflict (409) */
#define OL_STORE_EDELMARK  (-EOWNERDEAD)/* the version (or the latest) is a delete
                                           marker: S3 405 / 404 with
                                           x-amz-delete-marker */
/* Keys whose commit lock is held at once, in the whole store (a request
 * that finds the table full waits as for a taken lock). */
#define OL_STORE_KEY_LOCKS 4096u

enum ol_store_cond_kind {
    OL_STORE_COND_NONE = 0,
    OL_STORE_COND_ABSENT,   /* If-None-Match: *: OL_STORE_EPRECOND when the latest
                               version is an object */
    OL_STORE_COND_MATCH,    /* If-Match: -ENOENT when there is no object (the
                               latest is a delete marker or none), OL_STORE_EPRECOND
                               when its ETag differs */
};

struct ol_store_cond {
    uint8_t kind;           /* enum ol_store_cond_kind */
    uint16_t etag_parts;    /* MATCH: the ETag as etag + part count */
    uint8_t etag[16];
};

/* Bucket versioning state (S3 GetBucketVersioning). */
enum ol_store_versioning {
    OL_STORE_VER_OFF = 0,       /* never enabled: no Status */
    OL_STORE_VER_ENABLED = 1,
    OL_STORE_VER_SUSPENDED = 2,
};

/*
 * The bucket's versioning state, from memory (read from the drives at
 * ol_store_open, kept by ol_store_versioning_set). Any thread.
 */
enum ol_store_versioning ol_store_versioning_get(struct ol_store *s, const char *bucket);
/*
 * PutBucketVersioning: writes the bucket's versioning file (see
 * docs/store-meta.md, "bucket versioning file") on every drive of every
 * set: tmp, fsync, rename, fsync of the bucket directory. EV_DONE: 0 (a
 * write quorum of every set holds it; the memory state is updated),
 * OL_STORE_ENOBUCKET, -EIO. Returns 0, -EBUSY, -EINVAL (state).
 */
int ol_store_versioning_set(struct ol_store_core *c, const char *bucket,
                            enum ol_store_versioning state, ol_store_cb cb, void *ud);
/* The store a core belongs to. */
struct ol_store *ol_store_core_store(const struct ol_store_core *c);
/* 16 random bytes for a new version id (the core's generator). */
void ol_store_random_id(struct ol_store_core *c, uint8_t out[16]);

/* ---- listings ---- */

struct ol_catalog;
/*
 * The listing catalog (store/catalog.h) the engine keeps in step with its
 * commits; set once after ol_store_open, before the loops run (NULL, the
 * default: no listing upkeep, e.g. the engine's own unit tests). Every
 * write then updates it at its commit point: when its write quorum is
 * reached, under the key's commit lock, before EV_DONE and whether or not
 * the caller still wants the answer:
 *   PUT (also a CopyObject, a PUT whose bytes come from a GET), delete
 *     marker, Complete   the new version is the key's latest: size, mtime,
 *                        ETag and its part count, storage class, version
 *                        id, DELETE_MARKER for a marker, VERSIONS when the
 *                        key may hold more than that one null version (the
 *                        new metadata kept another, the id is not null,
 *                        or the bucket was ever versioned);
 *   DELETE               the key is removed;
 *   DELETE of a version  the key's new latest, from the metadata written,
 *                        or its removal with the last version (nothing
 *                        when no drive had the version);
 *   bucket create/delete the bucket is added / dropped (under the bucket's
 *                        own commit lock, so the two keep their order).
 * UploadPart, tag sets and versioning states change no listing. A write
 * the catalog cannot follow marks it dirty (catalog.h), to be rebuilt at
 * the next start: a DELETE that failed after removing the object from
 * some drives, and any write holding a commit lock when
 * ol_store_core_destroy drops it (its commit may have happened).
 */
void ol_store_set_catalog(struct ol_store *s, struct ol_catalog *cat);

/* ---- PUT ---- */

struct ol_put_args {
    const char *bucket;   /* NUL-terminated, validated; copied */
    const char *key;      /* NUL-terminated, validated; copied */
    uint64_t size;        /* exactly this many bytes follow */
    int parity;           /* -1 = the store's; else 0..dps/2 with dps - parity <= 16
                             (storage class: ol_layout_parity_for_class) */
    struct ol_store_cond cond;  /* conditional write; zero = none */
};

/*
 * Starts a PUT. The engine picks the set, the distribution and the ids, and
 * starts step 1 on the set's drives while the caller sends data.
 * Returns 0 and *out (the caller owns the put until ol_put_finish returns 0
 * or ol_put_abort); -EBUSY (pool empty); -EINVAL (parity out of range).
 * No callback runs inside this call.
 */
int ol_put_begin(struct ol_store_core *c, const struct ol_put_args *a, ol_store_cb cb, void *ud,
                 struct ol_put **out);
/*
 * Hands over len (<= OL_STORE_WRITE_MAX) more bytes, which are copied.
 * Returns 0 (take more); 1 (taken, but less than OL_STORE_WRITE_MAX bytes
 * of room are left, or, while the drives are idle, the PUT's files are
 * still being made (engine_put.c "Ahead writes"): do not call again before
 * EV_READY, e.g. pause the HTTP body); -EINVAL (more bytes than the size
 * given at begin, len over OL_STORE_WRITE_MAX, or after finish); -ENOBUFS (called while paused:
 * nothing taken); -errno (the PUT has failed, as EV_ERROR said or will
 * say: call ol_put_abort). Never runs the callback.
 */
int ol_put_write(struct ol_put *p, const void *data, size_t len);
/*
 * Ends the body. v holds what the S3 layer decided (etag, etag_parts,
 * hdr[], user (array form), tagging, storage_class, cks, vid: see
 * "versions" above; type: OL_META_DELETE_MARKER writes a delete marker,
 * size 0 only); the engine fills mtime, size, ec, data_dir, one part and
 * the inline data, encodes v at once (v and what it points to may go away when this
 * returns). Returns 0: the put now belongs to the engine, EV_DONE comes
 * with 0 once a write quorum holds it durably (or -EIO, OL_STORE_ENOBUCKET,
 * ...) and the put is released after that callback. Returns -EINVAL (fewer
 * bytes than the size; a field of v out of range) or the -errno of a
 * failed PUT: the put is still the caller's: ol_put_abort it.
 */
int ol_put_finish(struct ol_put *p, const struct ol_meta_version *v);
/*
 * Abandons a PUT that ol_put_finish has not taken (client gone, checksum
 * mismatch, EV_ERROR): nothing becomes visible, the tmp files are removed
 * in the background, no more callbacks. May be called from the callback.
 */
void ol_put_abort(struct ol_put *p);

/* ---- GET / HEAD ---- */

struct ol_get_args {
    const char *bucket;   /* NUL-terminated, validated; copied */
    const char *key;
    uint64_t offset;      /* first byte */
    int64_t length;       /* bytes; -1 = to the end */
    const uint8_t *vid;   /* NULL = the latest version; else that version (16
                             bytes, copied; zero = the null version) */
    bool raw;             /* ListObjectVersions: EV_META hands over the whole
                             metadata file (ev->data, ev->len: the valid copy
                             whose latest version is newest) and ev->version
                             its latest version (object or delete marker);
                             then ol_get_end. No read quorum is asked for */
    bool by_ref;          /* the caller only hands EV_DATA's bytes to the kernel
                             (send(2) by reference, never read in user space):
                             they may then lie in a read-only mapping of the
                             shard file, where the kernel's read of a page that
                             went bad fails the send (-EFAULT) instead of raising
                             SIGBUS (engine_get.c "mapped reads") */
};

/*
 * Starts a GET: reads the metadata from the set's drives, then the callback
 * gets EV_META (status 0, the version) or EV_DONE (-ENOENT,
 * OL_STORE_ENOBUCKET, -EIO, or OL_STORE_EDELMARK: the version asked for,
 * or the latest, is a delete marker, given in ev->version during the
 * callback; a version id that is not there is -ENOENT). Either way the caller ends it with ol_get_end.
 * Returns 0 and *out, or -EBUSY. No callback runs inside this call.
 * HEAD: ol_get_end after EV_META.
 */
int ol_get_begin(struct ol_store_core *c, const struct ol_get_args *a, ol_store_cb cb, void *ud,
                 struct ol_get **out);
/*
 * Replaces the range of args (after EV_META, before the first ol_get_next:
 * suffix ranges need the size). Same meaning as in ol_get_args.
 */
void ol_get_set_range(struct ol_get *g, uint64_t offset, int64_t length);
/*
 * S3 GetObject?partNumber=N: restricts the GET to part `number` of the
 * version (after EV_META, before the first ol_get_next). An object from a
 * PUT has one part, number 1, the whole object. Returns 0; -ENOENT when
 * the version has no such part (S3: InvalidPartNumber, 416); -EINVAL when
 * called at the wrong time. A part of 0 bytes makes ol_get_next -ERANGE.
 */
int ol_get_set_part(struct ol_get *g, uint32_t number);
/*
 * Where part `number` of v lies in the object: *offset, *length (OUT).
 * Pure; for the S3 layer's Content-Range and x-amz-mp-parts-count
 * (v->part_count). Returns 0 or -ENOENT.
 */
int ol_store_part_range(const struct ol_meta_version *v, uint32_t number, uint64_t *offset,
                        uint64_t *length);
/*
 * Asks for the next slice (after EV_META): the callback gets EV_DATA, or
 * EV_DONE (0 after the last byte; -EIO when a stripe cannot be read
 * correctly). It may run inside this call when the data is already in
 * memory; calling ol_get_next or ol_get_end from the callback is fine.
 * Returns 0; -ERANGE on the first call when the range is not satisfiable
 * (offset >= size, except the whole of an empty object; length 0); -EINVAL
 * when called before EV_META, after EV_DONE, or twice without an event
 * in between.
 */
int ol_get_next(struct ol_get *g);
/* Ends the GET (at any point, also from the callback): no more callbacks. */
void ol_get_end(struct ol_get *g);

/* ---- DELETE ---- */

/*
 * Removes the object (every version's metadata and data dirs) from every
 * drive of its set. EV_DONE: 0 (also when there was no such object),
 * OL_STORE_ENOBUCKET, -EIO (below write quorum: what was removed stays
 * removed). Returns 0, or -EBUSY. No callback inside this call.
 */
int ol_delete(struct ol_store_core *c, const char *bucket, const char *key, ol_store_cb cb,
              void *ud);

struct ol_delete_args {
    const char *bucket;   /* NUL-terminated, validated; copied */
    const char *key;
    uint8_t vid[16];      /* the version to remove (zero = the null version) */
    /* OUT, valid at EV_DONE 0 */
    bool found;           /* a quorum of drives held that version */
    bool was_marker;      /* it was a delete marker */
    uint8_t latest;       /* what is the latest now: 0 no version left,
                             OL_META_OBJECT, OL_META_DELETE_MARKER */
    bool more;            /* more than one version is left, or it is not null */
    struct ol_meta_version lv; /* the latest now: its scalar fields only (size,
                                  mtime, etag, etag_parts, storage_class, vid) */
};

/*
 * DeleteObject?versionId: removes one version of the key on every drive
 * of its set, under the key's commit lock: the metadata rewritten without
 * it (tmp, fsync, rename, fsync), or removed with the object directory
 * when it was the last version; then its data dir. a stays the caller's
 * until EV_DONE. EV_DONE: 0 (also when no drive had the version: found
 * false), OL_STORE_ENOBUCKET, -EIO. Returns 0 or -EBUSY.
 */
int ol_delete_version(struct ol_store_core *c, struct ol_delete_args *a, ol_store_cb cb,
                      void *ud);

struct ol_tagging_args {
    const char *bucket;   /* NUL-terminated, validated; copied */
    const char *key;
    uint8_t vid[16];      /* the version (zero = the null version) */
    const uint8_t *tagging;  /* the new tag set, URL-encoded (checked by the
                                caller); tagging_len 0 = none. Caller-owned
                                until EV_DONE */
    uint32_t tagging_len;
    /* OUT, valid at EV_DONE 0 */
    bool found;           /* a drive held that version */
    bool is_marker;       /* it is a delete marker (no tags: nothing written) */
};

/*
 * PutObjectTagging / DeleteObjectTagging: the tag set of one version
 * replaced on every drive of its set, under the key's commit lock, by the
 * same metadata rewrite as ol_delete_version (tmp, fsync, rename, fsync);
 * the version's data is not touched. a stays the caller's until EV_DONE.
 * EV_DONE: 0 (found false: no drive has that version), OL_STORE_ENOBUCKET,
 * -EIO (below write quorum), -E2BIG (the metadata file would outgrow the
 * store's buffer). Returns 0 or -EBUSY.
 */
int ol_set_tagging(struct ol_store_core *c, struct ol_tagging_args *a, ol_store_cb cb,
                   void *ud);

/* ---- buckets ---- */

/*
 * Bucket operations touch every drive of every set, one set at a time.
 * create: mkdir buckets/<b> and buckets/<b>/objects, fsync buckets/;
 *   EV_DONE 0; -EEXIST when a write quorum of every set had it already;
 *   -EIO when a set falls short of its write quorum (what this call
 *   created is removed again).
 * delete: -ENOTEMPTY when any drive holds an object directory (the empty
 *   <ab> directories are removed while looking: rmdir of the 256 of them);
 *   then rmdir objects/ and the bucket; 0, OL_STORE_ENOBUCKET, or -EIO.
 * exists: 0 when a read quorum of every set has it, OL_STORE_ENOBUCKET when
 *   it is on no drive of a set and a read quorum say so, else -EIO.
 * Each returns 0 (EV_DONE follows) or -EBUSY.
 */
int ol_store_bucket_create(struct ol_store_core *c, const char *bucket, ol_store_cb cb, void *ud);
int ol_store_bucket_delete(struct ol_store_core *c, const char *bucket, ol_store_cb cb, void *ud);
int ol_store_bucket_exists(struct ol_store_core *c, const char *bucket, ol_store_cb cb, void *ud);

/* ---- multipart uploads ------------------------------------------------------------ */

/*
 * Upload ids are 16 random bytes (the S3 layer prints them as 32 hex
 * digits); an upload is addressed by bucket, key and id, and a wrong key
 * for an id is OL_STORE_ENOUPLOAD. Every call below runs on the loop
 * thread of the core; none runs the callback inside itself.
 */

struct ol_mpu_create_args {
    const char *bucket;   /* NUL-terminated, validated; copied */
    const char *key;
    int parity;           /* as in ol_put_args (storage class) */
    const struct ol_meta_version *v; /* what S3 decided at create: hdr[], user,
                                        tagging, storage_class, cks.algo (the
                                        upload's checksum algorithm) and the
                                        cks flag OL_META_CKS_FULL_OBJECT (its
                                        type; other flags, parts and sum
                                        ignored). Encoded at once */
    uint8_t upload_id[OL_STORE_MPU_ID_LEN]; /* OUT: set before ol_mpu_create
                                               returns 0; valid once EV_DONE 0 */
};

/*
 * CreateMultipartUpload: reserves a registry entry, then writes the upload
 * record to the set's drives. EV_DONE: 0 (durable on a write quorum),
 * OL_STORE_ENOBUCKET, -EIO (what was written is removed). Returns 0; -EBUSY
 * (pool empty); -ENOSPC (registry full: mpu_max_uploads in progress);
 * -EINVAL (parity, or a field of v out of range).
 */
int ol_mpu_create(struct ol_store_core *c, struct ol_mpu_create_args *a, ol_store_cb cb,
                  void *ud);

struct ol_mpu_part_args {
    const char *bucket;   /* NUL-terminated, validated; copied */
    const char *key;
    const uint8_t *upload_id;  /* 16 bytes; copied */
    uint32_t number;      /* 1..10000 */
    uint64_t size;        /* exactly this many bytes follow */
};

/*
 * UploadPart: a streaming write driven exactly like a PUT: ol_put_write
 * (flow control, EV_READY), ol_put_finish, ol_put_abort, EV_ERROR and
 * EV_DONE as there. At ol_put_finish, v gives etag (the part's MD5) and
 * cks (the part's checksum: algorithm none or the upload's); the other
 * fields are ignored. EV_DONE / EV_ERROR statuses: 0, OL_STORE_ENOUPLOAD
 * (not on a read quorum of drives, or aborted meanwhile),
 * OL_STORE_ENOBUCKET, -EIO. Returns 0 and *out; -EBUSY; -EINVAL (number
 * out of range); OL_STORE_ENOUPLOAD (no such upload in the registry, or it
 * is being completed or aborted); -EIO (the upload's block size no longer
 * fits this store's buffers: stripe_bytes was lowered since the create).
 * ol_put_finish also returns -EINVAL when v's checksum algorithm is
 * neither none nor the upload's, or v's checksum is composite.
 */
int ol_mpu_part_begin(struct ol_store_core *c, const struct ol_mpu_part_args *a, ol_store_cb cb,
                      void *ud, struct ol_put **out);
/* The checksum algorithm (OL_META_CKS_*) of the upload a part
 * write from ol_mpu_part_begin belongs to: the part's checksum at
 * ol_put_finish must use it (UploadPartCopy computes it). */
unsigned ol_put_upload_algo(const struct ol_put *p);

/*
 * The checksum algorithm (OL_META_CKS_*) and flags (OL_META_CKS_FULL_OBJECT
 * or 0) of an upload in the registry, as its create recorded them: the S3
 * layer decides how to answer a Complete before starting it. Synchronous
 * (a look at the registry). Returns 0, or OL_STORE_ENOUPLOAD.
 */
int ol_mpu_upload_checksum(struct ol_store_core *c, const char *bucket, const char *key,
                           const uint8_t upload_id[OL_STORE_MPU_ID_LEN], uint8_t *algo,
                           uint8_t *flags);

/*
 * Complete's checksum hook: called once, on the loop thread, after every
 * listed part was found and matched on a write quorum of drives and before
 * anything is committed, with the parts as they will be stored (number,
 * size, actual_size, etag, and cks: the client's, or the part record's
 * where cks_given says the client gave none). Fills *out, the object's
 * checksum (algorithm the upload's). Returns 0, or a negative status the
 * Complete then ends with, nothing committed and the upload kept (e.g.
 * OL_STORE_EBADDIGEST when it differs from what the client expects).
 */
typedef int (*ol_mpu_cks_fn)(void *ud, const struct ol_meta_part *parts, unsigned nparts,
                             struct ol_meta_checksum *out);

struct ol_mpu_complete_args {
    const char *bucket;   /* NUL-terminated, validated; copied */
    const char *key;
    const uint8_t *upload_id;  /* 16 bytes; copied */
    struct ol_meta_part *parts;  /* the client's list, caller-owned until EV_DONE:
                                    number and etag in (cks too when the upload
                                    has a checksum algorithm); size and
                                    actual_size are filled in (OUT) */
    unsigned nparts;      /* 1..10000 */
    const struct ol_meta_checksum *cks;  /* the object's checksum (composite,
                                            computed by S3 from the parts'), with
                                            the upload's algorithm; or NULL.
                                            Copied */
    ol_mpu_cks_fn cks_fn;  /* or the hook that makes it (above); an upload
                              with a checksum algorithm needs cks or cks_fn,
                              one without has neither */
    void *cks_ud;
    const uint8_t *cks_given; /* bit i (byte i / 8, bit i % 8): parts[i].cks is
                                 the client's, compared with the part's record;
                                 clear: filled in from the record (OUT). NULL:
                                 every part's is given */
    uint64_t size;        /* OUT, valid at EV_DONE 0: the object's size */
    uint8_t etag[16];     /* OUT, valid at EV_DONE 0: MD5 of the parts' MD5s;
                             the ETag is "<hex>-<nparts>" */
    uint64_t mtime_ns;    /* OUT, valid at EV_DONE 0: the version's mtime */
    uint8_t storage_class;/* OUT, valid at EV_DONE 0: the upload's (for the
                             listing index, with size, etag, nparts, mtime) */
    uint8_t vid[16];      /* the new version's id (see "versions") */
    struct ol_store_cond cond;  /* conditional write; zero = none */
};

/*
 * CompleteMultipartUpload: a stays the caller's and must stay valid until
 * EV_DONE. EV_DONE: 0 (the object is visible, the upload gone; a->size and
 * a->etag set); OL_STORE_EBADPART (a listed part is missing, or its etag
 * or given checksum differs); OL_STORE_ETOOSMALL (a part but the last is
 * under mpu_min_part); what cks_fn returned; OL_STORE_ENOUPLOAD;
 * OL_STORE_ENOBUCKET; -EIO (quorum: the
 * upload stays, less its unlisted parts when the commit itself failed).
 * Returns 0; OL_STORE_EPARTORDER (part numbers not strictly ascending);
 * OL_STORE_ENOUPLOAD (not in the registry); -EBUSY (pool empty, or an
 * UploadPart, Complete or Abort of this upload is still running: S3
 * SlowDown, the client retries); -EINVAL (nparts or a number out of range,
 * cks or cks_fn against the upload's algorithm).
 */
int ol_mpu_complete(struct ol_store_core *c, struct ol_mpu_complete_args *a, ol_store_cb cb,
                    void *ud);

/*
 * AbortMultipartUpload: removes the upload from every drive of its set.
 * EV_DONE: 0 (gone from a write quorum), -EIO (the upload stays listed; a
 * retry finishes it). Parts still being uploaded fail (OL_STORE_ENOUPLOAD).
 * Returns 0; OL_STORE_ENOUPLOAD; -EBUSY (pool empty, or a Complete or
 * Abort of it is running).
 */
int ol_mpu_abort(struct ol_store_core *c, const char *bucket, const char *key,
                 const uint8_t upload_id[OL_STORE_MPU_ID_LEN], ol_store_cb cb, void *ud);

struct ol_mpu_part_info {
    uint32_t number;
    uint64_t size;
    uint8_t etag[16];
    uint64_t mtime_ns;                /* when the part's upload finished */
    uint8_t cks[OL_META_CKS_MAX];     /* the part's checksum (upload's algorithm) */
};

struct ol_mpu_list_parts_args {
    const char *bucket;   /* NUL-terminated; copied */
    const char *key;
    const uint8_t *upload_id;   /* 16 bytes; copied */
    uint32_t marker;      /* part-number-marker: parts after it */
    unsigned max;         /* max-parts, >= 1 */
    struct ol_mpu_part_info *out;  /* caller's, max entries */
    /* OUT, valid at EV_DONE 0 */
    unsigned count;
    bool truncated;       /* more parts after out[count - 1] */
    uint64_t initiated_ns;
    uint8_t storage_class, cks_algo;
    uint8_t cks_flags;    /* OL_META_CKS_FULL_OBJECT or 0 */
};

/*
 * ListParts: the parts of the upload after marker, ascending, each as a
 * read quorum of drives have it (the newest upload of that number). a
 * stays the caller's until EV_DONE. EV_DONE: 0, -EIO. Returns 0;
 * OL_STORE_ENOUPLOAD; -EBUSY; -EINVAL (max 0).
 */
int ol_mpu_list_parts(struct ol_store_core *c, struct ol_mpu_list_parts_args *a, ol_store_cb cb,
                      void *ud);

struct ol_mpu_upload_info {
    const char *key;      /* NUL-terminated, in the args' keys buffer */
    uint16_t key_len;
    uint8_t upload_id[OL_STORE_MPU_ID_LEN];
    uint64_t initiated_ns;
    uint8_t storage_class, cks_algo;
    uint8_t cks_flags;    /* OL_META_CKS_FULL_OBJECT or 0 */
};

struct ol_mpu_list_uploads_args {
    const char *bucket;   /* NUL-terminated; copied */
    const char *prefix;   /* NULL or "" = every key */
    const char *key_marker;          /* NULL = from the first key */
    const uint8_t *upload_id_marker; /* NULL, or 16 bytes: with key_marker,
                                        uploads of that key after this one */
    unsigned max;         /* max-uploads, >= 1 */
    struct ol_mpu_upload_info *out;  /* caller's, max entries */
    char *keys;           /* caller's: the keys, NUL-terminated */
    size_t keys_cap;      /* max * (OL_LAYOUT_KEY_MAX + 1) always suffices */
    /* OUT, valid at EV_DONE 0 */
    unsigned count;
    bool truncated;       /* more after out[count - 1] (the next markers) */
};

/*
 * ListMultipartUploads: the bucket's uploads in progress from the
 * registry, ordered by key (bytes), then initiation time, then id. Without
 * upload_id_marker, the uploads of key_marker itself are skipped (S3); with
 * it, those after that id. No delimiter grouping (the S3 layer may group
 * keys by a delimiter itself). a stays the caller's until EV_DONE.
 * EV_DONE: 0, OL_STORE_ENOBUCKET, -EIO (as ol_store_bucket_exists).
 * Returns 0, -EBUSY, -EINVAL (max 0).
 */
int ol_mpu_list_uploads(struct ol_store_core *c, struct ol_mpu_list_uploads_args *a,
                        ol_store_cb cb, void *ud);

/*
 * Expiry for a periodic task on a core's loop: aborts, one after the
 * other, every upload initiated more than mpu_expiry_s before now_ns (no
 * UploadPart of it running). EV_DONE: status 0 and len = the uploads
 * removed, or -EIO (len removed before it). Returns 0; -ENOENT (nothing has
 * expired: no callback); -EBUSY. ol_store_open removes expired uploads
 * too, so a daemon restarted now and then needs no task.
 */
int ol_store_mpu_cleanup(struct ol_store_core *c, uint64_t now_ns, ol_store_cb cb, void *ud);

/* Uploads in the registry (tests, metrics). Any thread. */
unsigned ol_store_mpu_count(struct ol_store *s);

/* ---- heal (engine_heal.c) ------------------------------------------------------------ */

struct ol_heal_result {
    unsigned drives_offline;   /* drives left alone: offline, unreadable, another key's file */
    unsigned drives_bad;       /* drives whose metadata was missing, corrupt or stale */
    unsigned shards_bad;       /* shard files missing, short or with a bad block */
    unsigned drives_healed;    /* drives written to */
    unsigned shards_written;   /* shard files and metadata files written */
    uint64_t bytes_verified;   /* shard bytes read and checked */
    uint64_t bytes_written;
    unsigned dirs_removed;     /* data dirs no version names, older than
                                  OL_HEAL_ORPHAN_AGE_S (a write cut short);
                                  OL_HEAL_VERIFY_ONLY: found, not removed */
};

/* A data dir in an object's directory that no version names, untouched
 * for this long, is a leftover of a write cut short between moving its
 * data in and committing the metadata: the heal removes it. */
#define OL_HEAL_ORPHAN_AGE_S 3600

#define OL_HEAL_VERIFY_ONLY 0x1u   /* find what is wrong; write nothing */

/*
 * Heals bucket/key on its set: reads every drive's metadata and takes the
 * version list a read quorum agree on (the largest k among its objects;
 * for delete markers only, the store's read quorum); a drive whose file is
 * missing, corrupt or another list gets that list rewritten (with its own
 * shard index and inline shards); every block of every shard file of every
 * version and part is verified, and a missing, short or corrupt one is
 * rebuilt from k good shards (ec.h). Shard files first, metadata last,
 * each by tmp, fsync, rename, fsync of the directory (a drive's missing
 * bucket and object directories are made). Nothing is written before all
 * of the object was checked. A blocking call for a thread that runs no
 * loop (the healer, store/heal.h); safe on several threads for distinct
 * keys. res (OUT) says what was found and done.
 * Returns 0 (healthy, or healed; res->drives_offline may be > 0); -ENOENT
 * (no drive holds the object, or a read quorum of drives have no file for
 * it, as a GET decides: the leftovers are not touched); -EIO (no version
 * list has a read quorum, or a version or part has fewer than k good
 * shards: nothing was written);
 * -EAGAIN (a drive's metadata changed while healing: that drive was
 * skipped); -EINVAL (names); -ENOMEM; -errno of a drive write.
 */
int ol_store_heal_object(struct ol_store *s, const char *bucket, const char *key, unsigned flags,
                         struct ol_heal_result *res);

/*
 * The heal queue's entry point: fn(ud, bucket, key) is called on the loop
 * thread of a core whose GET or HEAD found a drive to heal (a stale or
 * missing metadata file, a shard missing or failing its checksum) and for
 * a PUT acknowledged without some drives. It must not block. Set it before
 * the loops run; NULL = off (the counters in ol_store_stats still count).
 */
typedef void (*ol_store_heal_fn)(void *ud, const char *bucket, const char *key);
void ol_store_set_heal_hook(struct ol_store *s, ol_store_heal_fn fn, void *ud);

/* Drives (configured index 0..n-1) that ol_store_open adopted blank: their
 * set's objects must be rebuilt on them. */
bool ol_store_drive_adopted(const struct ol_store *s, unsigned drive);
/* Drive directory of configured drive i (for walks on the healer's thread),
 * -1 when offline. */
int ol_store_drive_fd(const struct ol_store *s, unsigned drive);
unsigned ol_store_drive_count(const struct ol_store *s);
/* Does configured drive i take O_DIRECT writes (ol_store_params.direct_io)? */
bool ol_store_drive_direct_io(const struct ol_store *s, unsigned drive);
/* Is configured drive i synced by the syncfs group commit? False with sync =
 * 1, offline, or on a filesystem not known to make all of itself durable on
 * syncfs (network and FUSE filesystems among them: an fsync of each file and
 * directory there); *fs_type, if not NULL, gets its statfs f_type (0 with
 * sync = 1: not looked at). */
bool ol_store_drive_syncfs(const struct ol_store *s, unsigned drive, unsigned long *fs_type);
/* Does a PUT's commit on configured drive i need one barrier instead of two
 * (engine_put.c "ordered commit": group commit, O_DIRECT and XFS)? */
bool ol_store_drive_ordered(const struct ol_store *s, unsigned drive);

#endif
