/*
 * store_harness.h - the object-engine test harness shared by the
 * test_store_*.c files of the engine (implemented in store_harness.c).
 *
 * It owns: the environment (temporary directories as drives, a store, a
 * real loop and one core on it; for the listing tests the catalog the
 * store keeps and a second core); running a call on the loop thread while
 * the test thread waits (sh_call: post a message, the engine's callback
 * ends it with sh_done); the PUT pump, the GET collector and the plain
 * callbacks with their common wrappers (GET, range GET, HEAD, DELETE,
 * buckets); and looking at the drives (object directories, metadata of a
 * drive, which drive holds a shard, tmp/ left empty, wiping a drive).
 *
 * struct sh_call is one superset of what the tests of both files set and
 * read; a test file keeps its own PUT starts (fn_put, which also picks the
 * version its PUTs finish with) and its own wrappers where they differ.
 */
#ifndef OL_TEST_STORE_HARNESS_H
#define OL_TEST_STORE_HARNESS_H

#include "olt.h"

#include "rt/loop.h"
#include "store/catalog.h"
#include "store/engine.h"
#include "store/layout.h"
#include "store/meta.h"

#include <semaphore.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SH_MAXD 8
#define SH_STRIPE (64u << 10)   /* small stripes: several per object, fast */

struct sh_env {
    char path[SH_MAXD][512];
    const char *dp[SH_MAXD];
    unsigned n, dps;
    struct ol_store_params p;
    struct ol_store *s;
    struct ol_store_core *c;
    ol_loop *loop;
    /* sh_env_open_listing: the listing catalog the store keeps, and a
     * second core on its own loop (sh_call_on) */
    bool listing, two;
    struct ol_catalog *cat;
    struct ol_catalog_info cat_info;   /* what its last open did */
    int cat_rc;                        /* what its last close returned */
    struct ol_store_core *c2;
    ol_loop *loop2;
    /* OLT_STORE_REMOTE=odd: the odd drives are another node's, reached
     * through real node RPC (cluster/drive.h) on a loop of their own */
    struct sh_remote *rem;
};

/* One call run on the loop thread; the fields are what the calls use. */
struct sh_call {
    struct ol_msg m;
    struct sh_env *e;
    void (*fn)(struct sh_call *);
    sem_t sem;
    int status;
    bool posted;
    const char *bucket, *key;
    /* put / part: sh_put_pump writes data[written..stop), then, when stop is
       size, finishes with the version fill() gives */
    const uint8_t *data;
    uint64_t size, stop, written;
    size_t chunk;
    int parity;
    void (*fill)(struct sh_call *, struct ol_meta_version *);
    struct ol_put *put;
    unsigned ones, readies;
    bool part;
    uint8_t id[16];
    uint32_t number;
    uint8_t etag[16];
    uint8_t cks_algo;
    uint8_t cks[OL_META_CKS_MAX];
    /* get: [off, off + len) (len -1: to the end), or part part_no */
    struct ol_get *get;
    uint64_t off;
    int64_t len;
    uint32_t part_no;
    bool head;
    bool by_ref;               /* ol_get_args.by_ref: slices may lie in a mapping */
    void (*on_data)(struct sh_call *); /* after each slice is copied out, if set */
    bool held;                 /* set by on_data: the next slice waits for sh_get_resume */
    uint8_t *out;
    uint64_t cap, got, msize;
    bool meta;
    uint16_t etag_parts, part_count;
    int set_rc;
    /* multipart */
    struct ol_mpu_create_args ca;
    struct ol_mpu_complete_args cpa;
    struct ol_mpu_list_parts_args lpa;
    struct ol_mpu_list_uploads_args lua;
    size_t len_out;
    uint64_t now_ns;
    /* several at once: sub-calls report to their parent */
    struct sh_call *parent;
    unsigned remaining;
    /* misc */
    struct ol_store_stats st;
    unsigned busy;
    int which;
    unsigned on;               /* the core it runs on (sh_call_on): sh_core(t) */
};

/* ---- running things on the loop thread ---- */

/* t zeroed for a call on b/k, with size bytes of data (NULL for none) that
 * a PUT writes whole (stop = size) in OL_STORE_WRITE_MAX pieces. */
void sh_call_init(struct sh_call *t, const char *b, const char *k, const uint8_t *data,
                  uint64_t size);
/* Ends t with status (once): wakes the test thread, or counts down the parent. */
void sh_done(struct sh_call *t, int status);
/* Runs fn(t) on e's loop thread and waits until it is done; its status. */
int sh_call(struct sh_env *e, struct sh_call *t, void (*fn)(struct sh_call *));
/* The same on core `core` (0, or 1: the second core of sh_env_open_listing);
 * fn finds that core's store core with sh_core(t). Two test threads may
 * each run calls on their own core at once. */
int sh_call_on(struct sh_env *e, unsigned core, struct sh_call *t, void (*fn)(struct sh_call *));
struct ol_store_core *sh_core(const struct sh_call *t);
struct ol_store_stats sh_stats(struct sh_env *e);
/* Request states of the core in use. */
unsigned sh_busy(struct sh_env *e);
/* Waits until no request state is in use (background cleanups done). */
void sh_settle(struct sh_env *e);

/* ---- environment ---- */

/* Whether this run puts the odd drives on another node (OLT_STORE_REMOTE=odd). */
bool sh_remote_mode(void);
/* In that run, skips the test here with why (a property of local drives,
 * or what remote drives do not do yet); otherwise nothing. */
void sh_local_only(const char *why);

/* n drives (mkdir'ed under the test's tmpdir), dps per set, stripes of
 * SH_STRIPE, default parity; then sh_env_start. */
void sh_env_open(struct sh_env *e, unsigned n, unsigned dps, int64_t inline_max,
                 uint64_t mpu_min_part);
/* sh_env_open with the listing catalog (store/catalog.h) opened on the
 * drives and set on the store before the loops run, and with two set, a
 * second loop and core. */
void sh_env_open_listing(struct sh_env *e, unsigned n, unsigned dps, int64_t inline_max,
                         bool two);
/* Opens the store of e->p (and the catalog, e->listing), starts a loop and
 * creates the core on it (and the second, e->two). */
void sh_env_start(struct sh_env *e);
/* Stops the loops: after sh_settle, the cores are destroyed on their loops;
 * with crash set, they are dropped as a crash would drop them. Then the
 * catalog is closed (e->cat_rc; with crash set, its clean marker removed
 * after: the next start rebuilds) and the store. */
void sh_env_stop(struct sh_env *e, bool crash);

/* ---- operations ---- */

/* The PUT callback and pump: flow control (READY), errors abort the PUT. */
void sh_put_cb(void *ud, const struct ol_store_event *ev);
void sh_put_pump(struct sh_call *t);
/* A whole PUT of data[0..size) with the store's parity, finished with the
 * version fill() gives; its status. */
int sh_put(struct sh_env *e, const char *b, const char *k, const uint8_t *data, uint64_t size,
           void (*fill)(struct sh_call *, struct ol_meta_version *));
/* Aborts the PUT left open in t->put. */
void sh_fn_abort_put(struct sh_call *t);

/* The GET callback: the version into msize/etag/..., the data into out[0..cap). */
void sh_get_cb(void *ud, const struct ol_store_event *ev);
void sh_fn_get(struct sh_call *t);
/* On the loop thread: a GET its on_data held (t->held) goes on. */
void sh_get_resume(struct sh_call *t);
/* GET of [off, off + len) (len -1: to the end) into out; *got = bytes. */
int sh_get_range(struct sh_env *e, const char *b, const char *k, uint64_t off, int64_t len,
                 uint8_t *out, uint64_t cap, uint64_t *got);
/* Full GET compared with want[0..size). */
void sh_check_get(struct sh_env *e, const char *b, const char *k, const uint8_t *want,
                  uint64_t size);
/* HEAD; the call (msize, etag, etag_parts, part_count) in *out when out is set. */
int sh_head(struct sh_env *e, const char *b, const char *k, struct sh_call *out);

/* Callback of the calls that only report a status (and a length). */
void sh_simple_cb(void *ud, const struct ol_store_event *ev);
int sh_del(struct sh_env *e, const char *b, const char *k);
/* which: 0 create, 1 delete, 2 exists. */
int sh_bucket_op(struct sh_env *e, int which, const char *b);
#define sh_bucket_create(e, b) sh_bucket_op(e, 0, b)
#define sh_bucket_delete(e, b) sh_bucket_op(e, 1, b)
#define sh_bucket_exists(e, b) sh_bucket_op(e, 2, b)

/* ---- data and the drives ---- */

/* size bytes of a pseudo-random pattern (malloc'ed; never NULL). */
uint8_t *sh_pattern(uint64_t size, unsigned seed);
/* <ab>/<hash>: the object directory of key k under a bucket. */
void sh_obj_hash(const struct sh_env *e, const char *k, char od[OL_LAYOUT_DIR_LEN]);
/* <drive i>/.openlake/buckets/<b>/objects/<ab>/<hash> */
void sh_obj_dir(const struct sh_env *e, unsigned i, const char *b, const char *k, char *out,
                size_t len);
/* Drive index (0..n-1) of position pos of the object's set. */
unsigned sh_drive_of(const struct sh_env *e, const char *b, const char *k, unsigned pos);
/* The latest version in drive i's metadata of b/k (read into buf); false when none. */
bool sh_drive_meta(const struct sh_env *e, unsigned i, const char *b, const char *k,
                   uint8_t *buf, size_t cap, struct ol_meta_version *v);
/* The shard file of part `part` of b/k's latest version on drive i: a flat
 * version's <obj dir>/<data dir>.data, else <obj dir>/<data dir>/part.<part>;
 * false when the drive has no such (non-inline) version. */
bool sh_part_path(const struct sh_env *e, unsigned i, const char *b, const char *k,
                  unsigned part, char *out, size_t len);
/* Drive index holding shard `shard` of b/k. */
unsigned sh_drive_with_shard(const struct sh_env *e, const char *b, const char *k,
                             unsigned shard);
/* Entries of a directory (-1 when it does not exist). */
int sh_count_entries(const char *path);
/* Open file descriptors of this process: a test takes it before and after
 * requests that fail in every phase, to catch a file left open. */
int sh_count_fds(void);
/* After the core is idle: every drive's tmp/ is empty. */
void sh_check_tmp_empty(struct sh_env *e);
/* XORs the byte at off of the file at path with 0x5a (bit rot). */
void sh_flip_byte(const char *path, uint64_t off);
/* rm -rf of everything inside the drive: the drive's contents are gone, the directory stays. */
void sh_wipe(const char *drive);

/* A loop for a test (not started); skips where io_uring is not allowed. */
ol_loop *sh_loop_new(void);

/* Moves the test process into a mount namespace of its own, private from
 * the host's: what it mounts goes with it, even when a failed check or the
 * alarm ends the test early. False where that is not allowed. */
bool sh_own_mount_ns(void);
/* Makes a 512 MiB XFS image at img (created) and loop-mounts it on dir.
 * False where that cannot be done (no mkfs.xfs, no loop devices). */
bool sh_mount_xfs(const char *img, const char *dir);
/* Loop-mounts the filesystem image img on dir again (after a power cut:
 * XFS replays its log). */
bool sh_mount_image(const char *img, const char *dir);
/* Shuts down the XFS that holds fd as a power cut would (XFS_IOC_GOINGDOWN
 * without flushing the log): what was not durable is lost, and from then
 * on every call on it fails with EIO until it is mounted again. */
bool sh_xfs_shutdown(int fd);
/* The same after forcing the log to the disk (XFS_FSOP_GOING_FLAGS_LOGFLUSH):
 * every change made so far is durable in the journal, but the data in the
 * page cache (buffered writes not yet written back) is lost. */
bool sh_xfs_shutdown_after_the_log(int fd);

#endif
