/*
 * disk.h - the KV disk tier of one shard: values written behind from RAM
 * to a local drive, read back into RAM on a hit, and found again after a
 * restart.
 *
 * Owns: the shard's two files in <dir>/kv-disk/ (a tenant's tier:
 * <dir>/kv-disk/tenant-<name>/, so tenants share no file)
 *
 *   shard-<i>.dat   values, at the same page/slot geometry as the slab
 *                   (slot id s of a class of slot_size S lives at
 *                   (s / 128) * 2 MiB + (s % 128) * S); written and read
 *                   with O_DIRECT (buffered where the filesystem has no
 *                   O_DIRECT), space reserved with fallocate at start;
 *   shard-<i>.idx   a 4 KiB superblock, then one 256-byte header per slot
 *                   id (the slab's slot header layout with its own magic,
 *                   docs/kv-disk.md), written buffered after the value;
 *
 * the allocation of disk slots (the slab's size classes, struct
 * ol_kv_alloc), the disk key index, one eviction policy per class (the RAM
 * tier's kind: when the disk is full it evicts by the same rule), the
 * rebuilding of all that from the .idx file at start, and the asynchronous
 * I/O on the shard's loop, at most queue_depth operations in flight.
 *
 * Correctness rests on checksums, not on write order: a read checks the
 * header (CRC-32C, key hash, namespace, length, sequence) and the value's
 * XXH3-64 before the shard may publish it; a mismatch (torn write, stale
 * header over reused space, bit rot) drops the entry and reports a miss.
 * Deletes zero the header before the slot is reused, so a deleted key does
 * not come back after a restart. Evicted slots are reused without zeroing:
 * at worst an evicted entry with intact bytes comes back after a restart.
 *
 * Must not: know RAM entries, sessions or the wire. The shard says what to
 * write and where to read into; completions come back through one callback.
 * Used by its shard's core only (no locks). Nothing allocates after open.
 */
#ifndef OL_KV_DISK_H
#define OL_KV_DISK_H

#include <stdbool.h>
#include <stdint.h>

#include "kv/index.h"
#include "kv/slab.h"
#include "rt/loop.h"

#define OL_KV_DISK_MAGIC    0x444b4c4fu /* "OLKD": a disk slot header */
#define OL_KV_DISK_SB_MAGIC 0x494b4c4fu /* "OLKI": the .idx superblock */
#define OL_KV_DISK_VERSION  1
#define OL_KV_DISK_SB_SIZE  4096u

struct ol_kv_disk;

/* Completion events. */
enum { OL_KV_DISK_WROTE = 1, OL_KV_DISK_READ = 2 };

/*
 * Completion callback: ev is OL_KV_DISK_WROTE or OL_KV_DISK_READ, tag the
 * caller's. status: 0; -EIO (the drive failed the I/O); -EBADMSG (a read
 * failed its checks: the entry is gone); -ECANCELED (the entry was deleted
 * while being written). For a good READ, hdr is the entry's header as read
 * from the drive (key bytes included); else NULL.
 */
typedef void (*ol_kv_disk_done_fn)(void *ctx, int ev, uint64_t tag, int status,
                                   const struct ol_kv_slot_hdr *hdr);

struct ol_kv_disk_params {
    const char *dir;       /* the drive directory, which must exist (the daemon
                              makes a missing one, docs/kv-disk.md); kv-disk/
                              is made inside */
    const char *tenant;    /* NULL: the files are in <dir>/kv-disk/; a [[kv_tenants]]
                              name: in <dir>/kv-disk/tenant-<name>/ (made too) */
    int shard, nshards;
    uint64_t bytes;        /* this shard's share, rounded down to 2 MiB pages */
    int evict_kind;        /* enum ol_evict_kind */
    unsigned queue_depth;  /* operations in flight */
};

struct ol_kv_disk_stats {
    uint64_t entries, value_bytes, bytes_capacity;
    uint64_t recovered;              /* entries found at start */
    uint64_t writes, write_bytes, reads, read_bytes;
    uint64_t corrupt, io_errors, evictions, deletes;
};

/*
 * Opens or creates the files and rebuilds the index from the .idx file
 * (blocking; call before the loops start). Files written for another shard
 * count, another page count or format version are started afresh (a log
 * line says so). Returns 0, or -errno with a message in err.
 */
int ol_kv_disk_open(struct ol_kv_disk **out, const struct ol_kv_disk_params *p, char *err,
                    size_t errlen);
/* Syncs and closes. The loop must not run any more (no I/O in flight). */
void ol_kv_disk_close(struct ol_kv_disk *d);
/* The loop that carries the I/O and the completion callback. */
void ol_kv_disk_attach(struct ol_kv_disk *d, ol_loop *loop, ol_kv_disk_done_fn done, void *ctx);

/* Id of the readable entry (ns, h), with its value length, or -1. */
int64_t ol_kv_disk_find(const struct ol_kv_disk *d, uint32_t ns, struct ol_kv_hash h,
                        uint64_t *value_len);
/* True when h is on disk or being written (any namespace). */
bool ol_kv_disk_has(const struct ol_kv_disk *d, struct ol_kv_hash h);
/* True when an operation could start now. */
bool ol_kv_disk_idle_slot(const struct ol_kv_disk *d);
/* True while operations are in flight or header erasures wait. */
bool ol_kv_disk_busy(const struct ol_kv_disk *d);

/*
 * Starts writing a value (src 4 KiB aligned, readable up to len rounded up
 * to 4 KiB, and unchanged until the WROTE completion). Returns 0 (started),
 * -EBUSY (queue full: retry after a completion), -EEXIST (h is on disk
 * already), -ENOSPC (nothing evictable), -E2BIG (larger than the tier).
 */
int ol_kv_disk_write(struct ol_kv_disk *d, uint32_t ns, struct ol_kv_hash h, const void *key,
                     uint16_t key_len, const void *src, uint64_t len, uint64_t sum, uint64_t tag);
/*
 * Starts reading entry id (from ol_kv_disk_find) into dst (4 KiB aligned,
 * room for the length rounded up to 4 KiB). Counts as a hit for eviction.
 * Returns 0 (started), -EBUSY or -ENOENT.
 */
int ol_kv_disk_read(struct ol_kv_disk *d, int64_t id, void *dst, uint64_t tag);
/* Removes (ns, h). 0 or -ENOENT. */
int ol_kv_disk_delete(struct ol_kv_disk *d, uint32_t ns, struct ol_kv_hash h);
/* Removes every entry of ns. Returns how many. */
uint64_t ol_kv_disk_reset(struct ol_kv_disk *d, uint32_t ns);
/* Starts queued header erasures while operations are free. */
void ol_kv_disk_pump(struct ol_kv_disk *d);

void ol_kv_disk_stats(const struct ol_kv_disk *d, struct ol_kv_disk_stats *out);

#endif
