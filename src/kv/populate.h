/*
 * populate.h - makes the kernel allocate the KV slabs' pages ahead of first
 * use (kv_slab.populate = "background"), in one low-priority thread.
 *
 * Why: the kernel allocates (and zeroes) a shmem page when it is first
 * touched; on 4 KiB shmem pages a fresh daemon's first puts ran 2.0-2.6
 * times slower than into a populated slab (docs/benchmarks.md, "KV first
 * contact"). Populating the slab after start-up moves that cost off the
 * first clients.
 *
 * Owns: the order pages are populated in, the thread that does it, and each
 * tenant's count of bytes gone over (ol_kv_tenant.populated).
 * Must not: write a byte of any slab (ol_kv_slab_populate only makes the
 * kernel allocate pages, MADV_POPULATE_WRITE or a read fault, and leaves a
 * page that is there as it is), touch shard state, run on a loop thread, or
 * change a system setting.
 *
 * Order, per slab: the superblock and slot headers [0, data_off), then the
 * data pages in rounds: each shard's next `chunk_pages` pages from the start
 * of its page range upward, shard after shard. A shard's allocator hands out
 * its lowest free page first (slab.c), so these are the pages its first
 * writes land on. Slabs one after another, tenant "default" first.
 */
#ifndef OL_KV_POPULATE_H
#define OL_KV_POPULATE_H

#include <stdint.h>

struct ol_kv_service;

/* A slab's geometry as the order sees it. */
struct ol_kv_pop_geom {
    uint64_t data_off;     /* first data page's offset (a multiple of 2 MiB) */
    uint32_t npages;       /* data pages */
    uint32_t nshards;      /* shard i holds pages [ol_kv_shard_first_page(i), ...(i + 1)) */
    uint32_t chunk_pages;  /* data pages per range */
};

/*
 * The k-th range of a slab's populate order, k = 0, 1, ... (pure). Returns 1
 * with [*off, *off + *len), or 0 once k is past the last. A range may be
 * empty (*len 0: a shard with fewer pages than the others, in its last
 * round). Over all k the ranges cover [0, data_off + npages * 2 MiB) once.
 */
int ol_kv_pop_range(const struct ol_kv_pop_geom *g, uint64_t k, uint64_t *off, uint64_t *len);

/*
 * Bytes of memory this process may still take: the least of /proc/meminfo's
 * MemAvailable and, for our cgroup and each above it, its limit less its
 * usage (v2 memory.max - memory.current when the v2 mount has controllers,
 * else v1 memory.limit_in_bytes - memory.usage_in_bytes); -1 when none can
 * be read. Paths are read under root ("" for the real ones; tests pass a
 * directory laid out the same way). A slab is populated only while what it
 * lacks fits in 90 % of this.
 */
int64_t ol_kv_pop_room(const char *root);

struct ol_kv_populate;

/*
 * Starts the thread that populates every tenant's slab of svc (SCHED_IDLE,
 * else nice 19; unpinned), adding to each tenant's `populated` as it goes
 * and logging each slab when done, with the time it took. svc must outlive
 * it: ol_kv_populate_stop() before ol_kv_service_destroy(). Returns 0, or
 * -errno of pthread_create / -ENOMEM.
 */
int ol_kv_populate_start(struct ol_kv_service *svc, struct ol_kv_populate **out);

/* Stops the thread (within one range: a few ms) and frees p. NULL is a no-op. */
void ol_kv_populate_stop(struct ol_kv_populate *p);

#endif
