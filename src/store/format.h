/*
 * format.h - the drive format file of the object store, and the start-up
 * decision that checks every configured drive against it.
 *
 * Owns: <drive>/.openlake/format (and its temporary twin
 * <drive>/.openlake/format.tmp), format version 1; the deployment id and
 * the drive uuids; the classification of the configured drives at start
 * (ok, blank, offline, corrupt, newer, swapped, duplicate, foreign,
 * mismatch) and the writing of the formats that decision calls for.
 *
 * The store's drives are directories (data_dirs, in configured order);
 * consecutive runs of drives_per_set drives form the erasure sets. Every
 * drive's format file records the deployment, the drive's own uuid and
 * position, and the uuid of every drive of the deployment, so any one
 * formatted drive knows the whole topology: a blank replacement can be
 * given the uuid of its position, and a drive found at the wrong position
 * can be told where it belongs.
 *
 * Format file, version 1. All integers little-endian. S = sets,
 * D = drives per set, H = header length (48 in version 1):
 *
 *   offset       size   field
 *   0               4   magic "OLFM" (4f 4c 46 4d)
 *   4               2   u16 format version (1)
 *   6               2   u16 header length H: bytes before the uuid table;
 *                       version 1 writes 48, readers accept 48..4096 and
 *                       ignore bytes 48..H-1 (reserved for compatible
 *                       additions)
 *   8              16   deployment id (random, from getrandom)
 *   24             16   this drive's uuid (random, RFC 4122 version 4)
 *   40              2   u16 set count S (1..256)
 *   42              2   u16 drives per set D (1..32)
 *   44              2   u16 this drive's set index (0..S-1)
 *   46              2   u16 this drive's index in its set (0..D-1)
 *   H          16*S*D   the uuid of every drive, set-major: the uuid of
 *                       set s, drive d at H + 16*(s*D + d)
 *   H+16*S*D        8   u64 XXH3-64 (seed 0) of every byte before it
 *
 *   file size = H + 16*S*D + 8 exactly
 *
 * Every later version keeps the magic, the version at offset 4 and the
 * trailing XXH3-64 over all bytes before it, so a reader checks the
 * checksum first: a damaged version field reads as corrupt, a sound file
 * of a later version as "newer". Uuids are non-zero and distinct; the
 * table entry at the drive's own position is its own uuid.
 *
 * Writes are durable and atomic: format.tmp is written, fsynced, renamed
 * over format, and .openlake/ and the drive directory are fsynced. A
 * leftover format.tmp (a crash mid-write) is never read, is truncated by
 * the next write and removed by ol_format_apply.
 *
 * These are start-up calls on the main thread, before the event loops run:
 * plain blocking syscalls. Errors are -errno; resolve and apply also fill a
 * caller-supplied message buffer with one line an operator can act on.
 *
 * Must not: know buckets, objects or the event loop; create a drive
 * directory (a missing one may be an unmounted drive: formatting the
 * mount point would write to the root filesystem); heal anything (it only
 * says which drives need healing).
 */
#ifndef OL_STORE_FORMAT_H
#define OL_STORE_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OL_FORMAT_MAGIC          "OLFM"
#define OL_FORMAT_VERSION        1u
#define OL_FORMAT_HDR_LEN        48u    /* header length written by version 1 */
#define OL_FORMAT_MAX_HDR_LEN    4096u  /* largest header length a reader accepts */
#define OL_FORMAT_MAX_SETS       256u
#define OL_FORMAT_MAX_SET_DRIVES 32u    /* = OL_EC_MAX_SHARDS: one shard per drive */
#define OL_FORMAT_MAX_DRIVES     (OL_FORMAT_MAX_SETS * OL_FORMAT_MAX_SET_DRIVES)
#define OL_FORMAT_UUID_LEN       16u
#define OL_FORMAT_SUM_LEN        8u
/* Largest file a reader accepts (about 128 KiB). */
#define OL_FORMAT_MAX_FILE \
    (OL_FORMAT_MAX_HDR_LEN + OL_FORMAT_UUID_LEN * OL_FORMAT_MAX_DRIVES + OL_FORMAT_SUM_LEN)

#define OL_FORMAT_DIR  ".openlake"            /* inside the drive directory */
#define OL_FORMAT_FILE ".openlake/format"
#define OL_FORMAT_TMP  ".openlake/format.tmp"

/* One drive's format, decoded. */
struct ol_format {
    uint8_t deployment[16];
    uint8_t uuid[16];            /* this drive */
    unsigned sets;               /* 1..OL_FORMAT_MAX_SETS */
    unsigned drives_per_set;     /* 1..OL_FORMAT_MAX_SET_DRIVES */
    unsigned set, drive;         /* this drive's position */
    uint8_t (*layout)[16];       /* sets * drives_per_set uuids, set-major;
                                    owned by whoever filled the struct */
};

/*
 * Reads and checks <drive>/.openlake/format into f (OUT). On success
 * f->layout is a new allocation: release it with ol_format_free. On
 * failure f is zeroed (ol_format_free on it is harmless).
 *
 * Returns 0; -ENOENT (the drive directory exists but holds no format
 * file: a blank drive); -ENODEV (the drive directory does not exist:
 * not mounted, or a wrong path); -EBADMSG (not a format file: wrong
 * magic, bad checksum, truncated, wrong size, fields out of range,
 * duplicate or zero uuids, not a regular file); -ENOTSUP (a sound file of
 * a later format version); -ENOMEM; or another -errno from the OS
 * (-EACCES, -EIO, -ENOTDIR, ...).
 */
int ol_format_read(const char *drive, struct ol_format *f);

/*
 * Writes f as <drive>/.openlake/format, durably and atomically (temp file,
 * fsync, rename, fsync of .openlake/ and of the drive directory), making
 * .openlake/ (mode 0700) if needed; the file is mode 0600. The drive
 * directory itself must exist.
 *
 * Returns 0; -EINVAL (f out of range: sets, drives per set, position,
 * zero or duplicate uuids, the table at f's position not f->uuid);
 * -ENODEV (no drive directory); -ENOMEM; or -errno from the OS (-ENOSPC,
 * -EIO, -EACCES, ...). On failure the previous format file, if any, is
 * untouched.
 */
int ol_format_write(const char *drive, const struct ol_format *f);

/* Frees f->layout and zeroes f. f may be zeroed or already freed. */
void ol_format_free(struct ol_format *f);

/* Writes u as "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" into out (37 bytes, NUL-terminated). */
void ol_format_uuid_str(const uint8_t u[16], char out[37]);
/* 16 random bytes from getrandom (never all zero), with the RFC 4122
 * version 4 bits when uuid: a deployment id or a drive uuid. 0 or -EIO. */
int ol_format_random_id(uint8_t out[16], bool uuid);

/* ---- start-up resolution ------------------------------------------------------ */

/* What the configured drive at a position was found to be. */
enum ol_format_state {
    OL_FORMAT_OK = 0,   /* this deployment's drive at its own position */
    OL_FORMAT_BLANK,    /* no format file: formatted (new deployment) or
                           adopted with its position's uuid and healed */
    OL_FORMAT_OFFLINE,  /* the directory is missing or unreadable: left
                           alone (refused only for a new deployment) */
    OL_FORMAT_CORRUPT,  /* a damaged format file, or a layout table that
                           disagrees with the deployment's: refused unless
                           OL_FORMAT_ADOPT_CORRUPT */
    OL_FORMAT_NEWER,    /* written by a later format version: refused */
    OL_FORMAT_SWAPPED,  /* this deployment's drive of another position:
                           refused */
    OL_FORMAT_DUPLICATE,/* claims a position another configured drive
                           holds already (the same drive twice, or a
                           cloned drive): refused */
    OL_FORMAT_FOREIGN,  /* another deployment's drive: refused */
    OL_FORMAT_MISMATCH, /* this deployment's, but it records another set
                           count / set size than configured: refused */
};

/* Flags for ol_format_resolve. */
#define OL_FORMAT_ADOPT_CORRUPT 0x1u /* treat CORRUPT drives as blank (adopt, heal) */
#define OL_FORMAT_ADOPT_BLANK   0x2u /* adopt blank drives even when too many are blank */

/* One configured drive in a plan. */
struct ol_format_drive {
    const char *path;            /* the caller's string, not copied */
    enum ol_format_state state;
    int read_rc;                 /* what ol_format_read returned for it */
    bool write;                  /* ol_format_apply writes its format */
    bool heal;                   /* its position's data must be rebuilt */
    bool refused;                /* this drive stops the start */
    unsigned set, drive;         /* configured position */
    /* From the drive's own format (when it has one): */
    uint8_t found_deployment[16];
    unsigned found_sets, found_drives_per_set;
    unsigned found_set, found_drive;
    /* SWAPPED: the drive configured at the position this one belongs to;
     * DUPLICATE: the drive that also claims that position. */
    unsigned other;
};

/* The outcome of ol_format_resolve. Zero it or let resolve fill it. */
struct ol_format_plan {
    unsigned n, sets, drives_per_set;
    unsigned flags;
    bool fresh;                  /* a new deployment: every drive formatted */
    bool blank_refused;          /* refused: more than half the drives blank, or
                                    a set with blank drives and none formatted */
    uint8_t deployment[16];
    uint8_t (*layout)[16];       /* n uuids, set-major = configured order */
    struct ol_format_drive *drives;  /* n, in configured order */
    unsigned nok, nwrite, nheal, noffline, nrefused;
};

/*
 * Reads the format of each of the n configured drives (drives[i] is the
 * drive at set i / drives_per_set, index i % drives_per_set) and decides
 * what to do, filling plan (OUT). Reads only: nothing is written.
 *
 *  - No drive formatted, all blank (CORRUPT ones too with
 *    OL_FORMAT_ADOPT_CORRUPT): a new deployment; fresh deployment id and
 *    uuids, every drive to be written. Any drive OFFLINE or NEWER (or
 *    CORRUPT without the flag) refuses: a new deployment needs them all.
 *  - Otherwise the deployment held by most formatted drives is this one,
 *    and its layout table the one most of them hold. Its drives at their
 *    own position are OK; BLANK drives (and CORRUPT ones with the flag)
 *    get the uuid recorded for their position and are marked write + heal;
 *    OFFLINE drives are left out (the store runs degraded); every other
 *    state refuses. Too many blank drives refuse too, unless
 *    OL_FORMAT_ADOPT_BLANK: more than half of the n (a wrong data_dirs
 *    entry or an unmounted drive looks like that), or any set whose drives
 *    are all blank or offline with at least one blank (nothing to heal it
 *    from).
 *
 * Returns 0 (plan ready for ol_format_apply; it may write nothing);
 * -EUCLEAN (refused: err holds the first problem and a count of the
 * others; plan->drives says which drives and why, see
 * ol_format_describe); -EINVAL (n == 0, n not a multiple of
 * drives_per_set, or over the limits; err says which); -ENOMEM; -EIO
 * (getrandom failed). err gets one line on every failure. Whatever it
 * returns, release the plan with ol_format_plan_free. drives[] must
 * outlive the plan.
 */
int ol_format_resolve(const char *const *drives, unsigned n, unsigned drives_per_set,
                      unsigned flags, struct ol_format_plan *plan, char *err, size_t errlen);

/*
 * Writes the formats the plan calls for, two-phase: first format.tmp on
 * every such drive (written and fsynced; on a failure all are removed and
 * nothing is formatted), then each renamed into place; and removes
 * leftover format.tmp files from the drives it does not write (OFFLINE
 * ones excepted). Returns 0; -EINVAL (a refused or empty plan); or the
 * -errno of the failing drive, with a line in err.
 */
int ol_format_apply(const struct ol_format_plan *plan, char *err, size_t errlen);

/*
 * One line for drive i of the plan: its path, state, and for a refused
 * drive what the operator should do. Always NUL-terminates buf (len > 0).
 */
void ol_format_describe(const struct ol_format_plan *plan, unsigned i, char *buf, size_t len);

/* "ok", "blank", "offline", "corrupt", "newer", "swapped", "duplicate", "foreign", "mismatch". */
const char *ol_format_state_name(enum ol_format_state s);

/* Frees what the plan holds and zeroes it. Safe on a zeroed plan. */
void ol_format_plan_free(struct ol_format_plan *plan);

#endif
