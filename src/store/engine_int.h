/*
 * engine_int.h - the object engine's private structures, shared by
 * engine.c (store, cores, request pool, op plumbing), engine_put.c (PUT,
 * UploadPart, CompleteMultipartUpload's commit), engine_get.c (GET),
 * engine_del.c (DELETE), engine_bucket.c (buckets, ListMultipartUploads),
 * engine_mpu.c (the upload registry, the scan at open, create, abort,
 * ListParts, Complete's checks) and engine_listing.c (the listing
 * catalog's upkeep at each commit). Nothing outside src/store/engine*.c
 * includes it.
 *
 * A request is one struct ol_sreq from the core's pool, plus a fixed
 * region of the core's arena (stripe slots, then per-drive metadata
 * buffers). Per drive of the set it has one control op (struct ol_sdrv:
 * one step in flight at a time), and per stripe slot and drive one data op.
 * Every op starts through ol_se_start (the core's ring, or for another
 * node's drive the remote hooks, engine.h) and goes through ol_se_issue:
 * a submission that fails (ring not running, a remote step refused) is
 * completed later from the request's timer with its error, so
 * no completion, and no user callback, ever runs inside the call that
 * issued the op. A request is released only when none of its ops is in
 * the ring (inflight == 0).
 */
#ifndef OL_STORE_ENGINE_INT_H
#define OL_STORE_ENGINE_INT_H

#include "store/ec.h"
#include "store/engine.h"
#include "store/format.h"
#include "store/layout.h"
#include "store/meta.h"
#include "store/syncer.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#define OL_SE_MAXD   OL_FORMAT_MAX_SET_DRIVES  /* 32 drives per set at most */
/* A drive's barrier (ol_sdrv.sjoin, engine.c "one barrier per filesystem"):
 * none out, parked until its peers on the filesystem ask too, carried by a
 * peer's, or out for itself and the peers in its sfollow. */
enum { OL_SE_SJ_NONE = 0, OL_SE_SJ_PARKED, OL_SE_SJ_FOLLOW, OL_SE_SJ_OUT };
#define OL_SE_SLOTS  OL_STORE_PUT_SLOTS
_Static_assert(OL_STORE_GET_SLOTS <= OL_SE_SLOTS, "a GET reads into the first slots");
/* A PUT's commit syncs up to four files of a drive at once (its data, its
 * new metadata, the parents of the directories it made), each on the
 * drive's op of one stripe slot (idle by then): engine_put.c "the fan". */
#define OL_SE_FAN    4u
_Static_assert(OL_SE_FAN <= OL_SE_SLOTS, "the fan's syncs use the slots' ops");
#define OL_SE_PAGE   4096u  /* alignment of O_DIRECT writes (offsets, lengths, buffers) */
#define OL_SE_PATH   256u      /* longest relative path built: ~180 bytes */
#define OL_SE_CTL    0xffu     /* sop->slot of a drive's control op */
#define OL_SE_RLOCK  0xfeu     /* sop->slot of a request's cluster lock (engine_ver.c) */
enum { OL_SE_RL_NONE = 0, OL_SE_RL_WAIT, OL_SE_RL_DONE };
/* Metadata buffer = inline shard + this + room for 10000 parts with the
 * longest checksums (~680 KB, ol_store_open): one version's largest record
 * without parts is ~62 KiB (6 headers of 2 KiB, 48 KiB tagging, user
 * metadata, key). The buffers are reserved, not touched: a read only
 * touches the pages of the file it reads. */
#define OL_SE_META_SLACK (80u << 10)

struct ol_store_drive {
    char *path;
    int dfd;                   /* O_DIRECTORY fd of the drive, -1 = offline or remote */
    bool remote;               /* another node's: its steps go to ol_store.remote */
    bool adopted;              /* blank at open: adopted, to be rebuilt */
    bool dio;                  /* O_DIRECT writes of 4 KiB-aligned pages work here
                                  (tried at open, unless the params say never) */
    bool syncfs;               /* synced by the group commit (syncer.h): store_sync
                                  is syncfs and its filesystem one syncfs makes
                                  durable as a whole (ol_store_open); else an fsync
                                  of each file and directory */
    unsigned long fs_type;     /* statfs f_type of its filesystem */
    bool ordered;              /* a PUT's commit needs one barrier here, not two:
                                  syncfs, dio and XFS (engine_put.c "ordered
                                  commit") */
};

struct ol_se_reg;              /* the multipart registry (engine_mpu.c) */
struct ol_se_ver;              /* commit locks, bucket versioning (engine_ver.c) */

struct ol_store {
    unsigned n, sets, dps, parity;
    uint32_t stripe_bytes, inline_max;
    uint32_t bmax;             /* largest shard block: ol_ec_shard_len(stripe, dps - dps/2) */
    uint32_t meta_cap;         /* bytes of one metadata buffer */
    size_t region;             /* PUT: one shard's place in a slot: 4 KiB of room
                                  before a record of 8 + bmax bytes, page-rounded */
    size_t slot_size;          /* bytes of one stripe slot: dps * region */
    size_t arena_size;         /* bytes of one request's region */
    unsigned max_requests;
    uint8_t deployment[16];
    struct ol_store_drive *drives;  /* n, set-major */
    uint64_t mpu_min_part;
    int64_t mpu_expiry_ns;     /* < 0: never */
    struct ol_se_reg *reg;     /* shared by the cores, own mutex */
    struct ol_se_ver *ver;     /* shared by the cores, own mutex */
    struct ol_syncers *sync;   /* group commit by syncfs, or NULL: fsyncs per file */
    ol_store_heal_fn heal_fn;  /* heal queue (NULL = off), set before the loops run */
    void *heal_ud;
    struct ol_catalog *catalog;/* listings kept at each commit (engine_listing.c;
                                  NULL = none), set before the loops run */
    struct ol_store_remote remote;  /* the steps of remote drives (engine.h) */
    struct ol_store_locks locks;    /* a cluster store's commit locks (engine.h); .lock
                                       NULL: the table of engine_ver.c */
};

struct ol_sreq;

/* One asynchronous operation of a request. */
struct ol_sop {
    struct ol_op op;           /* first: a completion's op is the sop */
    struct ol_sreq *r;
    uint8_t pos;               /* drive position in the set */
    uint8_t slot;              /* stripe slot, or OL_SE_CTL */
    bool deferred;             /* submission failed: completed by the timer */
    int dres;
};

/* Metadata state of one drive (GET, DELETE, PUT's old file). */
enum {
    OL_SE_M_UNKNOWN = 0,
    OL_SE_M_OK,        /* valid file, key matches, latest is an object (d->v) */
    OL_SE_M_OTHER,     /* valid file of this key whose latest is a delete marker or none */
    OL_SE_M_KEY,       /* valid file of another key (hash collision) */
    OL_SE_M_BAD,       /* corrupt file */
    OL_SE_M_NONE,      /* no file, the bucket is there */
    OL_SE_M_NOBUCKET,  /* no bucket directory on this drive */
    OL_SE_M_ERR,       /* offline, I/O error, too big, newer format */
};

/* One drive of the set within a request. */
struct ol_sdrv {
    struct ol_sop s;           /* control op: one step in flight at a time */
    int fd;                    /* file open for this drive's current work, or -1 */
    int fd2;                   /* directory open for an fsync, or -1 */
    int tfd;                   /* PUT: the new metadata file in tmp (a PUT's opened
                                  in PREP, prep_side; else by the commit), or -1 */
    int mfd;                   /* PUT commit: the current metadata file open for
                                  reading, or -1 */
    int ffd[OL_SE_FAN];        /* PUT commit: each sync of the fan's file, or -1 */
    int err;                   /* 0, or why this drive left the request */
    int fs_err;                /* result of the dir-fsync sub-sequence */
    const uint8_t *map;        /* GET: the part's shard file mapped read-only
                                  (engine_get.c "mapped reads"), or NULL */
    size_t map_len;            /*   its length: the file's size when mapped */
    bool map_off;              /*   no more blocks from it (it failed): reads */
    uint16_t map_slot;         /*   its entry in the core's park table, or
                                    OL_SE_MAP_OWN: mapped for this GET alone */
    uint16_t step;             /* what the pending completion is for */
    uint16_t after;            /* step to continue at after a dir fsync */
    uint8_t pos, shard;        /* position in the set, shard index it holds */
    uint8_t ms;                /* OL_SE_M_* */
    uint8_t retries;           /* PUT: directory races retried */
    bool active;               /* has work in the current phase */
    /* PUT */
    bool dio;                  /* its file is open with O_DIRECT (engine_put.c) */
    bool ord;                  /* this PUT's commit is ordered: its metadata written
                                  with O_DIRECT, one barrier after the rename
                                  (engine_put.c "ordered commit") */
    bool bucket, made_tmp, made_part, made_ab, made_obj, renamed, tmeta, committed;
    bool mren;                 /* PUT commit: the metadata's rename was issued (its
                                  result aside, the drive may hold the new file) */
    uint8_t prep_wait;         /* PUT PREP: the statx and the file's steps still
                                  running side by side (engine_put.c prep_side) */
    int prep_err;              /* the first error of those */
    bool had_old, old_dd, meta_ready;
    uint8_t early;             /* PUT commit: the metadata written early (engine_put.c
                                  "the early write"): 0 or EW_* */
    bool early_wait;           /* the commit waits for that write to end */
    bool early_fail;           /* so does drive_fail (d->err says why) */
    uint32_t early_len;        /* bytes it wrote at offset 0 */
    int early_err;             /* its error (EW_BAD) */
    bool new_ab, new_obj;      /* made since the last fan: their parents to fsync */
    bool obj_now;              /* this attempt made <hash>: no metadata in it */
    uint8_t fan;               /* PUT commit: syncs of the fan in flight (+1 while
                                  they start) */
    uint8_t fst[OL_SE_FAN];    /* each sync's step (engine_put.c) */
    int fan_err;               /* the fan's first error */
    int mren_res;              /* ordered commit: the metadata's rename, a member of
                                  the fan (engine_put.c) */
    struct ol_sync_wait sw;    /* a barrier of s (ol_se_barrier) */
    uint8_t sjoin;             /* that barrier shared with the request's other drives
                                  on its filesystem (engine.c "one barrier per
                                  filesystem"): OL_SE_SJ_* */
    uint32_t sfollow;          /* OL_SE_SJ_OUT: positions whose barriers it carries */
    bool one;                  /* DELETE of a version: only d->v's data dir goes */
    /* multipart */
    bool made_up;              /* create: made uploads/ */
    bool urec;                 /* the upload record is on this drive */
    bool valid;                /* Complete: every listed part's record matches */
    bool moved;                /* removal: data/ was renamed into the object */
    bool gone;                 /* removal: the upload record is gone */
    uint16_t pr_after;         /* part-record read: step to continue at */
    uint32_t pr_num;           /* part-record read: part number */
    uint32_t vi;               /* Complete: listed part being checked */
    int pr_res;                /* part-record read: the read's result */
    uint32_t mlen, nlen;
    uint32_t iter, iter2;
    uint8_t *mbuf, *nbuf;      /* metadata read / new metadata (arena) */
    const char *fpath;         /* directory being fsynced */
    struct ol_meta_file mf;    /* decoded file (when ms is OK / OTHER) */
    struct ol_meta_version v;  /* GET: latest; PUT: the replaced null version */
    struct statx stx;
    char path[OL_SE_PATH];     /* per-drive path (old data dirs, scans) */
};

/* PUT: write ops per drive for the pages of a filling stripe and the
 * first page of a sealed one (engine_put.c "ahead writes"), and what each
 * is doing. */
#define OL_SE_AHEAD 4u
_Static_assert(OL_SE_SLOTS + OL_SE_AHEAD < OL_SE_CTL, "sop slot numbers");
enum { OL_SE_AW_FREE = 0, OL_SE_AW_AHEAD, OL_SE_AW_HEAD };
struct ol_sawr {
    uint32_t len;              /* bytes of the write in flight */
    uint8_t slot;              /* its stripe slot */
    uint8_t kind;              /* OL_SE_AW_* */
};

/* Stripe slot states. */
enum { OL_SE_SL_FREE = 0, OL_SE_SL_FILL, OL_SE_SL_SEALED, OL_SE_SL_IO, OL_SE_SL_READY,
       OL_SE_SL_FAILED };

struct ol_sslot {
    uint8_t *base;             /* GET: n blocks of 8 + B bytes (header, then the
                                  shard); PUT: n regions (engine_put.c rec()) */
    uint64_t stripe;
    uint32_t pre;              /* PUT: file offset of the records, mod 4096 */
    uint32_t tails;            /* PUT: drives whose buffered tail write is next */
    uint32_t wlen[OL_SE_MAXD]; /* PUT: bytes of each drive's write in flight */
    uint32_t len;              /* data bytes of this stripe */
    uint32_t blen;             /* shard bytes of this stripe */
    uint32_t fill;             /* PUT: data bytes copied in */
    uint8_t state;
    uint8_t pending;           /* data ops in flight */
    /* PUT, writes ahead of the seal (engine_put.c "ahead writes"): pages of a
     * record written while the stripe still fills, and where the rest starts */
    uint32_t aoff[OL_SE_MAXD]; /* end of each drive's ahead pages in the record's
                                  page frame (0: none yet) */
    uint8_t ahead;             /* ahead writes in flight */
    uint32_t aenc;             /* parity bytes of each block encoded so far */
    uint32_t want, good, tried;/* GET: shard masks */
    uint8_t *sp[OL_SE_MAXD];   /* GET: each shard's bytes */
};

enum { OL_SE_PUT = 1, OL_SE_GET, OL_SE_DEL, OL_SE_BKT, OL_SE_MPU };
/* PUT kind: what it writes. */
enum { OL_SE_MODE_PUT = 0, OL_SE_MODE_PART, OL_SE_MODE_COMPLETE };

struct ol_sreq {
    struct ol_timer timer;     /* deferred completions and kicks */
    struct ol_store_core *c;
    ol_store_cb cb;
    void *ud;
    uint8_t kind, phase;
    bool in_use, kick;
    unsigned set, n, k, m, wq, rq;
    unsigned active;           /* drives with work in the current phase */
    unsigned inflight;         /* ops in the ring (and deferred ones) */
    unsigned sparked;          /* drives whose barrier waits for their peers
                                  (OL_SE_SJ_PARKED) */
    unsigned cbdepth;          /* user callbacks running */
    int status;
    struct ol_ec *ec;
    uint8_t dist[OL_SE_MAXD];  /* position -> shard */
    uint8_t drv_of[OL_SE_MAXD];/* shard -> position */
    uint32_t B;                /* shard block size of the object */
    uint64_t SD;               /* data bytes of a full stripe: k * B */
    uint64_t size, nstripes;
    uint8_t ddir[16], tid[16];
    size_t blen, klen;
    char bucket[OL_LAYOUT_BUCKET_MAX + 1];
    char key[OL_LAYOUT_KEY_MAX + 1];
    /* paths relative to a drive directory, the same on every drive */
    char p_bucket[OL_SE_PATH], p_objects[OL_SE_PATH], p_ab[OL_SE_PATH], p_obj[OL_SE_PATH];
    char p_meta[OL_SE_PATH], p_ddir[OL_SE_PATH], p_part[OL_SE_PATH];
    char p_tdir[OL_SE_PATH], p_tpart[OL_SE_PATH], p_tmeta[OL_SE_PATH];
    /* multipart: uploads/, <ab>, <hash>, <upload>, its record, its data/ */
    char p_uploads[OL_SE_PATH], p_uab[OL_SE_PATH], p_uhash[OL_SE_PATH];
    char p_udir[OL_SE_PATH], p_urec[OL_SE_PATH], p_udata[OL_SE_PATH];
    struct ol_sdrv d[OL_SE_MAXD];
    struct ol_sop w[OL_SE_SLOTS][OL_SE_MAXD];
    struct ol_sop wa[OL_SE_MAXD][OL_SE_AHEAD]; /* PUT: each drive's ahead and head
                                  writes (sop slot: OL_SE_SLOTS + op) */
    struct ol_sawr aw[OL_SE_MAXD][OL_SE_AHEAD];
    struct ol_sslot slot[OL_SE_SLOTS];
    uint8_t *arena;
    uint8_t *tmpl;             /* PUT: the new version, encoded once */
    uint8_t *carry;            /* PUT: per drive, its file's bytes past the last page
                                  written with O_DIRECT, not written yet (< 4 KiB) */
    uint32_t tmpl_len;
    struct ol_meta_version tv; /* PUT: decoded from tmpl */
    bool advancing, again, in_api;
    /* PUT */
    uint64_t written, next_stripe;
    int cur;                   /* slot being filled, or -1 */
    bool inline_obj, paused, finished, aborted, reported;
    /* GET */
    uint64_t off, end, dl, rd_next;
    int64_t rlen;
    int sel;                   /* drive whose version was chosen */
    int hold;                  /* slot whose bytes the caller holds, or -1 */
    bool want, ended, meta_sent, done_sent, started, healed, counted;
    bool heal_q;               /* an online drive to heal: hand the key to the heal hook */
    uint64_t delivered;
    /* buckets */
    uint8_t bop;
    unsigned bset, sets_done, sets_existed, sets_absent, sets_present;
    bool notempty;
    uint8_t made_b[OL_FORMAT_MAX_DRIVES / 8], made_o[OL_FORMAT_MAX_DRIVES / 8];
    /* multipart (PUT kind modes, MPU kind, list uploads) */
    uint8_t mode;              /* PUT kind: OL_SE_MODE_* */
    uint8_t mop;               /* MPU kind: what it does (engine_mpu.c) */
    uint32_t pnum;             /* part number: seeds and part.<n> (PUT, GET: 1..) */
    uint64_t toff;             /* PART: where the part record goes in the shard file */
    int uidx;                  /* registry entry held, or -1 */
    uint8_t uid[16];           /* the upload id */
    uint8_t ualgo, usc;        /* the upload's checksum algorithm, storage class */
    bool reg_gone, expire;
    uint8_t *bits;             /* part numbers begun (a copy of the registry's) */
    uint8_t *lbits;            /* COMPLETE: part numbers listed */
    uint8_t *sbits;            /* COMPLETE: listed parts whose size is known */
    struct ol_mpu_complete_args *ca;
    struct ol_meta_checksum ccks;
    bool has_ccks;
    struct ol_mpu_list_parts_args *la;
    struct ol_mpu_list_uploads_args *lu;
    unsigned removed;          /* cleanup: uploads removed */
    uint64_t now_ns;
    /* GET: the part being read (object offsets; poff/pend relative to the part) */
    unsigned pi;
    uint64_t pbase, psize, poff, pend;
    bool pswitch;              /* GET: closing one part's files to open the next */
    /* versions (engine_ver.c) */
    bool locked;               /* holds the key's commit lock (lock_slot, or rlk) */
    unsigned lock_slot;
    uint8_t rl;                /* a cluster store's lock (locks hooks): OL_SE_RL_* */
    bool rl_busy;              /* the last answer: held by another */
    bool rl_failed;            /* no owner granted or refused it in OL_SE_RLOCK_WAIT_MS:
                                  the request fails with -EBUSY (503) */
    uint64_t rl_t0;            /* when it first asked (loop ms) */
    uint64_t rl_next;          /* after an answer other than granted or held: not
                                  asked again before this (loop ms) */
    int rl_res;                /* its answer */
    unsigned rl_set;           /* the set it was asked in */
    struct ol_store_lock rlk;  /* what the owner granted */
    struct ol_sop rlop;        /* its op (slot OL_SE_RLOCK) */
    uint8_t nvid[16];          /* PUT: the new version's id */
    bool dmark;                /* PUT: writes a delete marker */
    bool kept;                 /* PUT: a drive's new metadata keeps another version
                                  beside the new one (the listing's VERSIONS flag) */
    struct ol_store_cond cond; /* PUT / COMPLETE: conditional write */
    int cond_st;               /* PUT: what a drive decided (failed condition, -EFBIG) */
    bool has_vid;              /* GET / DELETE: one version, want_vid */
    uint8_t want_vid[16];
    bool raw;                  /* GET: hand over the whole file */
    bool map_ok;               /* GET: slices may lie in a mapping of a shard file */
    struct ol_delete_args *da; /* DELETE of a version */
    struct ol_tagging_args *ta;/* a version's tag set rewritten (engine_del.c) */
};

struct ol_put { struct ol_sreq r; };
struct ol_get { struct ol_sreq r; };
union ol_sreq_u {
    struct ol_sreq r;
    struct ol_put p;
    struct ol_get g;
};

/* A shard file's mapping, shared by the GETs of that file and kept after
 * them (engine_get.c "shared mappings"): known by its inode, whose size it
 * maps. */
#define OL_SE_PARK 256u         /* per core; the oldest unused goes first */
#define OL_SE_MAP_OWN 0xffffu   /* ol_sdrv.map_slot of a mapping not in the table */
#define OL_SE_PARK_MS 1000u     /* unused that long: unmapped (a deleted file's
                                   space is freed then) */
struct ol_se_park {
    uint64_t dev, ino;
    const uint8_t *p;           /* NULL: a free entry */
    size_t len;
    uint64_t at_ms;             /* when a GET last let it go (the loop's clock) */
    uint32_t users;             /* GETs holding it */
    bool dead;                  /* it failed (SIGBUS): goes with its last user */
};

struct ol_store_core {
    struct ol_store *s;
    ol_loop *loop;
    union ol_sreq_u *reqs;
    uint32_t *freel;           /* stack of free request indices */
    unsigned nfree;
    uint8_t *arena;
    size_t arena_total;
    struct ol_ec *ec[OL_EC_MAX_PARITY + 1];  /* by parity m; NULL = not allowed */
    uint64_t rng[4];
    struct ol_store_stats st;
    _Atomic unsigned barriers_out;  /* barriers the syncer still holds (syncer.h) */
    unsigned swr;              /* PUT: sealed stripes' writes in flight on this core */
    /* GET: mappings of shard files shared by their GETs and kept after
     * them for the next (engine_get.c "shared mappings"); entries with p
     * set: npark */
    struct ol_se_park park[OL_SE_PARK];
    unsigned npark;
    struct ol_timer park_timer;   /* unmaps those unused for OL_SE_PARK_MS */
};

/* Unmaps every parked mapping (ol_store_core_destroy). */
void ol_se_park_drop(struct ol_store_core *c);

/* ---- engine.c: plumbing shared by the request kinds ------------------------ */

struct ol_sreq *ol_se_req_get(struct ol_store_core *c, uint8_t kind, ol_store_cb cb, void *ud);
void ol_se_req_put(struct ol_sreq *r);
/* Hands bucket/key of r to the heal queue (when one is set). */
void ol_se_heal_queue(struct ol_sreq *r);
/* Copies bucket (and key, may be NULL), fills the set, object dir and paths. */
void ol_se_names(struct ol_sreq *r, const char *bucket, const char *key);
/* The object's paths under p_objects: <ab>, <ab>/<hash>, <ab>/<hash>/meta
 * (each OL_SE_PATH bytes). */
void ol_se_obj_names(const struct ol_store *s, const char *key, size_t klen, const char *p_objects,
                     char *p_ab, char *p_obj, char *p_meta);
/* Resets the per-drive states for set r->set (n = dps drives). */
void ol_se_drives_init(struct ol_sreq *r);
/* The store's index of the drive at position pos of r's set, that drive,
 * and its directory fd. */
unsigned ol_se_drive_index(const struct ol_sreq *r, unsigned pos);
const struct ol_store_drive *ol_se_drive(const struct ol_sreq *r, unsigned pos);
/* Does the drive at pos sync by barriers of the group commit (ol_store_drive.syncfs)? */
bool ol_se_grouped(const struct ol_sreq *r, unsigned pos);
int ol_se_dfd(const struct ol_sreq *r, unsigned pos);
/* Whether drive pos of r can take steps: local and open, or remote. */
bool ol_se_online(const struct ol_sreq *r, unsigned pos);
/* Starts st on drive pos of r with op (not through ol_se_issue): the core's
 * ring for a local drive, the remote hooks for another node's. 0 or -errno
 * as the ol_loop_* calls return. */
int ol_se_start(struct ol_sreq *r, unsigned pos, struct ol_op *op,
                const struct ol_store_rstep *st);
/* Test hook (tests/unit only; NULL in the daemon, which never sets it):
 * called on the loop thread as a drive's fan starts, with the drive's root
 * directory descriptor, before any of the fan's syncs is issued. A test
 * kills the drive's filesystem there to fail those syncs for real. */
extern void (*ol_se_fan_hook)(int dfd);
/* Test hook, the same way: called as a PUT's metadata has been renamed into
 * place on a drive, before the barrier that makes the rename durable. */
extern void (*ol_se_renamed_hook)(int dfd);
/* Blocking (ol_store_open only): removes everything inside directory fd,
 * which stays open; depth 0 at the top. 0 or -errno. */
int ol_se_rm_inside(int fd, int depth);
void ol_se_random_id(struct ol_store_core *c, uint8_t out[16]);
void ol_se_join(char *out, const char *a, const char *b, const char *c);
/* "<uuid>" of id appended to prefix "/" into out. */
void ol_se_path_id(char *out, const char *prefix, const uint8_t id[16], const char *suffix);
/* Where a version's data lives in its object directory p_obj: the shard
 * file of part num (<dd>/part.<num>, or <dd>.data for a flat version), and
 * the i-th step of removing it all (i from 0: every part file, then the data
 * dir when there is one): path and unlinkat flags, false when no step is
 * left. */
#define OL_SE_FLAT_SFX ".data"
void ol_se_part_path(char *out, const char *p_obj, const struct ol_meta_version *v, uint32_t num);
bool ol_se_data_rm(char *out, int *flags, const char *p_obj, const struct ol_meta_version *v,
                   unsigned i);
/* A lower-case hex digit's value, or -1. */
int ol_se_hexval(char c);
/* A data dir's or upload's name, "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
 * (ol_se_path_id's form), into out; false when s is not one. */
bool ol_se_uuid_parse(const char *s, uint8_t out[16]);
uint64_t ol_se_seed(const uint8_t ddir[16], unsigned shard);
uint64_t ol_se_now_ns(void);

/* Records the submission of op s (rc = the ol_loop_* return). */
void ol_se_issue(struct ol_sreq *r, struct ol_sop *s, int rc);
/* Runs the request's advance function from the timer (no user callback may
 * run in the caller's frame). */
void ol_se_kick(struct ol_sreq *r);

/* Control-op helpers on drive d (all go through ol_se_issue). */
void ol_se_openat(struct ol_sdrv *d, const char *path, int flags, mode_t mode);
void ol_se_read(struct ol_sdrv *d, int fd, void *buf, unsigned len, uint64_t off);
void ol_se_write(struct ol_sdrv *d, int fd, const void *buf, unsigned len, uint64_t off);
void ol_se_fsync(struct ol_sdrv *d, int fd, int datasync);
/* A group-commit barrier on the drive's filesystem (store->sync set): the
 * control op completes with 0 once every change made before is durable. */
void ol_se_barrier(struct ol_sdrv *d);
void ol_se_fallocate(struct ol_sdrv *d, int fd, uint64_t len);
void ol_se_close(struct ol_sdrv *d, int fd);
void ol_se_mkdirat(struct ol_sdrv *d, const char *path);
void ol_se_unlinkat(struct ol_sdrv *d, const char *path, int flags);
void ol_se_renameat(struct ol_sdrv *d, const char *from, const char *to);
void ol_se_statx(struct ol_sdrv *d, const char *path);

/*
 * Dir fsync sub-sequence: open path (O_DIRECTORY), fsync, close; then the
 * kind's step function runs with d->step = after and res = 0 or the first
 * error. Step functions start with `if (ol_se_fsync_step(d, &res)) return;`.
 */
#define OL_SE_FS_OPEN  1000u
#define OL_SE_FS_SYNC  1001u
#define OL_SE_FS_CLOSE 1002u
void ol_se_fsync_dir(struct ol_sdrv *d, const char *path, uint16_t after);
bool ol_se_fsync_step(struct ol_sdrv *d, int *res);

/*
 * Phases: ol_se_phase_begin takes a token (so drives that finish at once
 * cannot end the phase early), each drive with work calls
 * ol_se_drive_begin, then its steps, then ol_se_drive_end (as a tail call:
 * r may be gone after it); ol_se_phase_started drops the token. When the
 * count reaches 0, ol_se_advance runs.
 */
void ol_se_phase_begin(struct ol_sreq *r);
void ol_se_drive_begin(struct ol_sdrv *d);
void ol_se_drive_end(struct ol_sdrv *d);
void ol_se_phase_started(struct ol_sreq *r);
/* A whole phase that opens path read-only (statx's it) on every drive
 * still usable (d->err == 0), each drive's completion at `step`. */
void ol_se_open_phase(struct ol_sreq *r, const char *path, uint16_t step);
void ol_se_statx_phase(struct ol_sreq *r, const char *path, uint16_t step);
/* Drive d leaves the request with err (the first error stays): its open
 * file is closed first (the close completes at close_step, which ends the
 * drive), or it ends at once. */
void ol_se_drive_fail(struct ol_sdrv *d, int err, uint16_t close_step);
/* The statx (res) of the bucket directory of a key without metadata on d:
 * d->ms = NONE (the bucket is there) or NOBUCKET, or d->err = res; the
 * drive ends. */
void ol_se_bucket_stat_end(struct ol_sdrv *d, int res);

/*
 * Runs the kind's step function until nothing changes. Re-entrant: a call
 * made while it runs (from a user callback, or a phase that ended at once)
 * makes the running one loop again. Returns true when the request was
 * released (do not touch it).
 */
bool ol_se_advance(struct ol_sreq *r);
/* False (and a kick to retry from the timer) inside an API call that must
 * not run the callback. */
bool ol_se_can_emit(struct ol_sreq *r);

/* Reads d->mbuf[0..mlen) as this request's key's metadata: sets d->ms,
 * d->mf and d->v (when OK). Counts checksum failures. */
void ol_se_meta_decode(struct ol_sreq *r, struct ol_sdrv *d);
/* Same version on two drives (the fields a quorum must agree on). */
bool ol_se_same_version(const struct ol_meta_version *a, const struct ol_meta_version *b);

/* Calls the user's callback. */
void ol_se_emit(struct ol_sreq *r, enum ol_store_ev type, int status);
/* Releases r, then calls cb(ud, EV_DONE status) (the callback may reuse the slot). */
void ol_se_done(struct ol_sreq *r, int status);

/* ---- per kind ------------------------------------------------------------------ */

/* Step functions return true when they released the request. */
void ol_se_put_drive(struct ol_sdrv *d, int res);
void ol_se_put_slot(struct ol_sreq *r, unsigned slot, unsigned pos, int res);
bool ol_se_put_step(struct ol_sreq *r);
void ol_se_get_drive(struct ol_sdrv *d, int res);
void ol_se_get_slot(struct ol_sreq *r, unsigned slot, unsigned pos, int res);
bool ol_se_get_step(struct ol_sreq *r);
void ol_se_del_drive(struct ol_sdrv *d, int res);
bool ol_se_del_step(struct ol_sreq *r);
void ol_se_bkt_drive(struct ol_sdrv *d, int res);
bool ol_se_bkt_step(struct ol_sreq *r);
void ol_se_mpu_drive(struct ol_sdrv *d, int res);
bool ol_se_mpu_step(struct ol_sreq *r);
/* Runs d's kind's step function for d->step (after a shared sub-sequence). */
void ol_se_dispatch(struct ol_sdrv *d, int res);

/* ---- versions (engine_ver.c) ------------------------------------------------------ */

#define OL_SE_VER_FILE 24u     /* bytes of a bucket versioning file */
int ol_se_ver_open(struct ol_store *s, char *err, size_t errlen);
void ol_se_ver_close(struct ol_store *s);
void ol_se_ver_encode(uint8_t out[OL_SE_VER_FILE], uint8_t state, uint64_t mtime_ns);
/* 0; -EBADMSG (damaged); -ENOTSUP (another format version). */
int ol_se_ver_decode(const uint8_t *b, size_t len, uint8_t *state, uint64_t *mtime_ns);
/* The memory state (unless a newer one is there). 0 or -ENOMEM. */
int ol_se_ver_set(struct ol_store *s, const char *bucket, uint8_t state, uint64_t mtime_ns);
void ol_se_ver_forget(struct ol_store *s, const char *bucket);
/* Takes r's key's commit lock (r->p_obj): true when held (also already). */
bool ol_se_key_lock(struct ol_sreq *r);
/* The same for another directory of the same table (a bucket's: its
 * creates and deletes, engine_bucket.c). */
bool ol_se_path_lock(struct ol_sreq *r, const char *path);
/* The commit lock of the object directory p_obj (r->p_obj's form), for
 * callers without a request (the healer's thread): 0 and *slot (release
 * with ol_se_key_unlock_slot), or -EBUSY (held, or the table is full). */
int ol_se_key_trylock(struct ol_store *s, const char *p_obj, unsigned *slot);
/* Lets it go (ol_se_req_put does it for every request; ol_se_done after
 * the EV_DONE callback). */
void ol_se_key_unlock(struct ol_sreq *r);
void ol_se_key_unlock_slot(struct ol_store *s, unsigned slot);
/* Whether the lock r last asked for is held by another (a conditional
 * write fails then) rather than still on its way from the set's owner. */
bool ol_se_lock_busy(const struct ol_sreq *r);
/* A cluster lock's answer (ol_se_on_op, slot OL_SE_RLOCK). */
void ol_se_rlock_done(struct ol_sreq *r, int res);
/* Tick to wait before retrying a taken lock. */
#define OL_SE_LOCK_RETRY_MS 1u
/* How long a request asks a set's owner for a lock that no owner answers. */
#define OL_SE_RLOCK_WAIT_MS 10000u
#define OL_SE_RLOCK_AGAIN_MS 20u

/* ---- the listing catalog (engine_listing.c) ---------------------------------------- */

/* Each at the commit point, before EV_DONE, with r's commit lock held. */
/* PUT, delete marker, Complete (a part: nothing): r's version is the key's latest. */
void ol_se_listing_commit(struct ol_sreq *r);
/* DELETE (of the object, r->da NULL) or of a version (r->da): the key's new
 * latest, or its removal (a tag set rewrite, r->ta: nothing). */
void ol_se_listing_delete(struct ol_sreq *r);
/* Bucket r->bucket created / deleted. */
void ol_se_listing_bucket(struct ol_sreq *r, bool created);
/* A write whose outcome the listing cannot follow (what: why): the
 * catalog is marked dirty, to be rebuilt at the next start. */
void ol_se_listing_unknown(struct ol_store *s, const char *what);

/* ---- multipart (engine_mpu.c) ---------------------------------------------------- */

/* Part numbers 0..10000 as bits: bytes of one bitmap. */
#define OL_SE_PBITS ((OL_STORE_MPU_MAX_PART_NUM + 8u) / 8u)
static inline bool ol_se_bit_get(const uint8_t *b, unsigned i) { return b[i >> 3] >> (i & 7) & 1; }
static inline void ol_se_bit_put(uint8_t *b, unsigned i) { b[i >> 3] |= (uint8_t)(1u << (i & 7)); }
/* Steps at or above this are engine_mpu.c's (any kind forwards them there). */
#define OL_SE_MPU_STEPS 300u
/* Part record: footer "OLPT" + u32 length; a tail read of this many bytes holds it. */
#define OL_SE_PREC_MAGIC "OLPT"
#define OL_SE_PREC_TAIL  4096u

/* Opening and closing: the scan of the drives and the registry. */
int ol_se_mpu_open(struct ol_store *s, const struct ol_store_params *p, char *err, size_t errlen);
void ol_se_mpu_close(struct ol_store *s);
/* Fills r->p_uploads .. p_udata for upload id (after ol_se_names). */
void ol_se_upload_names(struct ol_sreq *r, const uint8_t id[16]);
/* Block seed of shard `shard` of part `number` (part 1: ol_se_seed). */
uint64_t ol_se_part_seed(const uint8_t ddir[16], uint32_t number, unsigned shard);
/* Shard file bytes of a part of size bytes: blocks and headers (not the record). */
uint64_t ol_se_part_blocks(uint64_t size, unsigned k, uint32_t B);

/* UploadPart: takes the registry entry (LIVE) as a writer and marks the
 * part number; fills r->uidx, r->m, r->B, r->ualgo. 0 or OL_STORE_ENOUPLOAD. */
int ol_se_mpu_part_enter(struct ol_sreq *r, uint32_t number);
/* Still LIVE (not being aborted)? */
bool ol_se_mpu_live(const struct ol_sreq *r);
/* Complete: takes the entry exclusively (writers 0); copies the bitmap to
 * r->bits; fills r->m, r->B, r->ualgo, r->usc. 0, OL_STORE_ENOUPLOAD, -EBUSY. */
int ol_se_mpu_excl_enter(struct ol_sreq *r);
/* Lets go of the entry: a writer leaves; an exclusive holder frees it
 * (gone) or makes it LIVE again. */
void ol_se_mpu_leave(struct ol_sreq *r, bool gone);
/* Any upload of bucket in the registry? */
bool ol_se_mpu_bucket_busy(struct ol_store *s, const char *bucket);
/* ListMultipartUploads: fills r->lu from the registry. */
void ol_se_mpu_list_fill(struct ol_sreq *r);

/* Per-drive sub-sequences (they end with ol_se_drive_end). */
void ol_se_mpu_rm_start(struct ol_sdrv *d, bool moved);  /* remove the upload */
void ol_se_mpu_val_start(struct ol_sdrv *d);             /* Complete: read and check */
void ol_se_mpu_trim_start(struct ol_sdrv *d);            /* Complete: unlisted parts */
/* Complete, after the checks: the status, and r->tmpl / r->tv on success. */
int ol_se_mpu_val_decide(struct ol_sreq *r);
/* UploadPart: d->nbuf = this drive's part record and footer (d->nlen). */
int ol_se_mpu_prec_build(struct ol_sreq *r, struct ol_sdrv *d);
static inline unsigned ol_se_popcount(uint32_t x) { return (unsigned)__builtin_popcount(x); }

#endif
