/*
 * slab.h - the KV slab: one shared-memory region holding every cached value,
 * mapped by the daemon and by same-host clients.
 *
 * Owns: the region (a sealed memfd: hugetlbfs pages when the host's pool
 * has room, else shmem with transparent huge pages advised), knowing which
 * of those backs it, its layout, the slot header format, and the
 * allocation of data pages to shards and of slots to size classes inside a
 * shard.
 *
 * Must not: know keys' meaning, the index, eviction order or the protocol.
 * Allocation is per shard and single-threaded (a shard belongs to one core);
 * nothing allocates heap memory after ol_kv_slab_create().
 *
 * Region layout (version 1; every offset little-endian, documented in
 * docs/kv-slab.md):
 *
 *   offset        size                      content
 *   0             4096                      superblock (struct ol_kv_super)
 *   hdr_off       npages * 128 * 256        slot headers, 256 bytes each,
 *                                           header of slot id s at hdr_off + 256*s
 *   data_off      npages * 2 MiB            data pages (data_off is 2 MiB aligned)
 *
 * Slot ids: page p, slot i inside it → id = p * 128 + i. A size class with
 * slots of up to 2 MiB cuts pages into floor(2 MiB / slot_size) slots; a
 * larger class takes runs of contiguous pages, one slot per run (id =
 * first page * 128). Values start at the slot's first byte, 4 KiB aligned
 * (O_DIRECT and DMA friendly); slot_size = value size rounded up to 4 KiB
 * and to at least 16 KiB.
 *
 * Slot header (256 bytes, written by the daemon; clients verify with it):
 *   0   u32  magic 0x534b4c4f ("OLKS")
 *   4   u16  version (1)
 *   6   u16  key length (<= 192)
 *   8   u64  generation: bumped when the slot is given to a new key; odd
 *            while the daemon is changing the header (seqlock)
 *   16  u64  value length
 *   24  u64  value checksum: XXH3-64 of the value bytes (0 = not given)
 *   32  u32  namespace id
 *   36  u32  flags (bit 0: committed)
 *   40  u64  key hash, low 64 bits (XXH3-128 of namespace id + key)
 *   48  u64  key hash, high 64 bits
 *   56  u32  header checksum: standard CRC-32C (initial and final XOR
 *            0xFFFFFFFF, as in docs/kv-protocol.md) of bytes 0..55
 *            and the key bytes
 *   60  u32  reserved (0)
 *   64  192  key bytes
 */
#ifndef OL_KV_SLAB_H
#define OL_KV_SLAB_H

#include <stddef.h>
#include <stdint.h>

#include "kv/index.h"

#define OL_KV_PAGE           (2u << 20)
#define OL_KV_MIN_SLOT       (16u << 10)
#define OL_KV_SLOTS_PER_PAGE (OL_KV_PAGE / OL_KV_MIN_SLOT) /* 128 */
#define OL_KV_HDR_SIZE       256u
#define OL_KV_KEY_MAX        192u
#define OL_KV_MAX_CLASSES    16
#define OL_KV_SUPER_MAGIC    0x424c534bu /* "KSLB" */
#define OL_KV_SLOT_MAGIC     0x534b4c4fu /* "OLKS" */
#define OL_KV_SLAB_VERSION   1
#define OL_KV_SLOT_COMMITTED 1u

struct ol_kv_super {
    uint32_t magic;
    uint16_t version;
    uint16_t _pad;
    uint64_t size;       /* region bytes */
    uint64_t hdr_off;
    uint64_t data_off;
    uint32_t npages;
    uint32_t page_size;
    uint32_t hdr_size;
    uint32_t slots_per_page;
};

struct ol_kv_slot_hdr {
    uint32_t magic;
    uint16_t version;
    uint16_t key_len;
    uint64_t gen;
    uint64_t value_len;
    uint64_t value_sum;
    uint32_t ns;
    uint32_t flags;
    uint64_t hash_lo;
    uint64_t hash_hi;
    uint32_t hdr_crc;
    uint32_t _reserved;
    uint8_t key[OL_KV_KEY_MAX];
};
_Static_assert(sizeof(struct ol_kv_slot_hdr) == OL_KV_HDR_SIZE, "slot header is 256 bytes");

/* What backs a slab's memory. */
enum ol_kv_backing {
    OL_KV_BACKING_SHMEM,     /* shmem, 4 KiB pages: shmem THP is off */
    OL_KV_BACKING_SHMEM_THP, /* shmem, 2 MiB transparent huge pages where the kernel
                                finds them (4 KiB where it does not) */
    OL_KV_BACKING_HUGETLB,   /* hugetlbfs pages, reserved from the host's pool at creation */
};

struct ol_kv_slab {
    int fd;              /* memfd, sealed against resizing; passed to clients */
    char *base;
    size_t size;
    enum ol_kv_backing backing;
    uint32_t page_bytes; /* the kernel's page for it: hugetlb's (st_blksize), else 4096 */
    char thp[64];        /* shmem: the sysfs setting that decides THP, e.g.
                            "shmem_enabled=never"; "" when the kernel has none */
    struct ol_kv_super *sb;
    uint32_t npages;
};

/*
 * Creates a region with room for about `bytes` of values (rounded down to
 * whole 2 MiB pages, at least one page). Tries hugetlb pages first when
 * try_huge (a memfd with MFD_HUGETLB: its mapping reserves every page from
 * the pool, so it fails at once when the pool has too few free), then a
 * normal memfd with transparent huge pages advised; records which in
 * s->backing (shmem_enabled read from sysfs). Pages are allocated when
 * first touched (see ol_kv_slab_populate). Returns 0, or -errno with a
 * message in err.
 */
int ol_kv_slab_create(struct ol_kv_slab *s, uint64_t bytes, int try_huge, char *err, size_t errlen);
void ol_kv_slab_destroy(struct ol_kv_slab *s);

/*
 * Whether a memfd mapped with MADV_HUGEPAGE gets 2 MiB transparent huge
 * pages, from the text of /sys/kernel/mm/transparent_hugepage/shmem_enabled
 * (top) and of .../hugepages-2048kB/shmem_enabled (pmd: the per-size control
 * of Linux 6.11+, NULL when absent). The setting in force is the bracketed
 * word ("always within_size advise [never] deny force"); pmd's decides unless
 * it is "inherit" or top's is "deny" or "force" (those override it). Huge: always, within_size (the slab is all within its
 * size), advise (the daemon advises it) and force. Writes the deciding file
 * and setting to word ("shmem_enabled=never",
 * "hugepages-2048kB/shmem_enabled=advise"; "" when neither can be read).
 * Returns 1 (huge) or 0.
 */
int ol_kv_thp_shmem(const char *top, const char *pmd, char *word, size_t wordlen);

/* A small file's text (a sysfs or procfs file) into buf, NUL-terminated: at
 * most len - 1 bytes of one read. Returns buf, or NULL when unreadable or
 * empty. */
const char *ol_kv_read_small(const char *path, char *buf, size_t len);

/* "hugetlb", "shmem_thp" or "shmem": the label of openlake_kv_slab_info. */
const char *ol_kv_slab_backing_name(const struct ol_kv_slab *s);

/* The host's hugetlb pool, from /proc/meminfo. */
struct ol_kv_hugetlb_pool {
    long total, free;    /* HugePages_Total, HugePages_Free; -1 when unknown */
    uint64_t page;       /* Hugepagesize in bytes; 0 when unknown */
};
/* Reads /proc/meminfo into p (unknown fields as above). */
void ol_kv_hugetlb_pool_read(struct ol_kv_hugetlb_pool *p);

/*
 * What backs s, for the start-up log, in buf (320 bytes are enough):
 * "hugetlbfs 2 MiB pages", "shmem with THP (shmem_enabled=advise)", or for
 * 4 KiB pages how to get the faster ones: "shmem, 4 KiB pages (shmem THP is
 * off: echo advise > /sys/kernel/mm/transparent_hugepage/shmem_enabled; or
 * reserve hugetlb pages: vm.nr_hugepages, N of 2 MiB for this slab)", with
 * the pool's free pages when it has some (pool: the host's, as read by
 * ol_kv_hugetlb_pool_read). Returns buf.
 */
const char *ol_kv_slab_backing_text(const struct ol_kv_slab *s,
                                    const struct ol_kv_hugetlb_pool *pool, char *buf, size_t len);

/*
 * Makes the kernel allocate the pages of [off, off + len) of the region
 * (widened to whole s->page_bytes pages) without changing a byte of it:
 * MADV_POPULATE_WRITE (Linux 5.14) through a mapping of just that range,
 * made and unmapped by the call, so the daemon's own mapping, page tables
 * and RSS stay as they were (with shmem THP, advised MADV_HUGEPAGE like
 * the daemon's: under "advise" the mapping that faults decides the page
 * size). Where the kernel refuses it (EINVAL), or
 * *touch is set, a read of one byte per page instead, which allocates a
 * zeroed page too (shmem and hugetlbfs allocate on read faults); *touch is
 * set from then on. Safe while shards and clients use the slab: a page
 * already there is left as it is, contents and all. Returns 0, -EINVAL
 * (the range is not inside the region), or -errno of mmap / madvise
 * (-ENOMEM: no memory for the pages, or the cgroup's limit).
 */
int ol_kv_slab_populate(const struct ol_kv_slab *s, uint64_t off, uint64_t len, int *touch);

/* Bytes of the region the kernel has allocated pages for (written or
 * populated at least once), from fstat's st_blocks of the memfd; at most
 * s->size. 0 when fstat fails. */
uint64_t ol_kv_slab_allocated(const struct ol_kv_slab *s);

static inline struct ol_kv_slot_hdr *ol_kv_slab_hdr(const struct ol_kv_slab *s, uint32_t id)
{
    return (struct ol_kv_slot_hdr *)(s->base + s->sb->hdr_off + (uint64_t)id * OL_KV_HDR_SIZE);
}

/* Byte offset in the region of slot `id` of a class with `slot_size`. */
static inline uint64_t ol_kv_slab_off(const struct ol_kv_slab *s, uint32_t id, uint32_t slot_size)
{
    return s->sb->data_off + (uint64_t)(id / OL_KV_SLOTS_PER_PAGE) * OL_KV_PAGE +
           (uint64_t)(id % OL_KV_SLOTS_PER_PAGE) * slot_size;
}

/* First data page of shard i of n over npages pages: shard i holds pages
 * [ol_kv_shard_first_page(npages, i, n), ol_kv_shard_first_page(npages, i + 1, n)). */
static inline uint32_t ol_kv_shard_first_page(uint32_t npages, uint32_t i, uint32_t n)
{
    return (uint32_t)((uint64_t)npages * i / n);
}

/* slot_size for a value size, or 0 when the value is too large for a span
 * of the whole region. */
uint32_t ol_kv_slot_size_for(uint64_t value_size);

/*
 * Slot header writes (seqlock). _begin at Reserve records the key and
 * leaves the generation odd (not readable) while the client writes the
 * value; _publish at Commit sets the value fields, the checksum and the even
 * generation. One checksum per entry instead of two.
 */
void ol_kv_slab_hdr_begin(const struct ol_kv_slab *s, uint32_t id, uint64_t gen, uint32_t ns,
                          struct ol_kv_hash h, const void *key, uint16_t key_len);
void ol_kv_slab_hdr_publish(const struct ol_kv_slab *s, uint32_t id, uint64_t value_len,
                            uint64_t value_sum, uint32_t flags);
/* At free: the generation made odd, so a reader that checks the header
 * after reading the bytes (a remote read granted earlier) never takes a
 * slot whose page was given to another size class, whose bytes other
 * slots now hold while this header is never written again. */
void ol_kv_slab_hdr_retire(const struct ol_kv_slab *s, uint32_t id);
/* Verifies a header copy: magic, version, key length and checksum. Returns 0 or -1. */
int ol_kv_slab_hdr_check(const struct ol_kv_slot_hdr *h);
/* The header checksum (bytes 0..55 and the key bytes, CRC-32C). The disk
 * tier's headers use the same layout and checksum. */
uint32_t ol_kv_slot_hdr_crc(const struct ol_kv_slot_hdr *h);

/* ---- per-shard allocation ------------------------------------------------- */

struct ol_kv_class {
    uint32_t slot_size;        /* 0 = class unused */
    uint32_t per_page;         /* slots per page, or 0 for spans */
    uint32_t span_pages;       /* pages per slot for spans, else 1 */
    uint32_t pages;            /* pages held */
    uint32_t used;             /* slots allocated */
    uint32_t partial;          /* head of the list of pages with free slots, or UINT32_MAX */
};

struct ol_kv_alloc {
    uint32_t first_page, npages; /* this shard's pages: [first_page, first_page + npages) */
    uint32_t free_pages;
    uint8_t *page_class;         /* by local page: 0 = free, c+1 = class c, 0xFF = span tail */
    uint32_t *page_next;         /* by local page: links of its class's partial list */
    uint32_t *page_prev;
    uint64_t *page_used;         /* by local page: 128-bit bitmap of used slots (2 words) */
    uint16_t *page_nused;
    struct ol_kv_class cls[OL_KV_MAX_CLASSES];
};

/* Gives a shard pages [first, first + n) of a region of total_pages pages
 * (the slab, or a disk tier file). Returns 0, -EINVAL or -ENOMEM. */
int ol_kv_alloc_init(struct ol_kv_alloc *a, uint32_t total_pages, uint32_t first, uint32_t n);
void ol_kv_alloc_exit(struct ol_kv_alloc *a);
/* Class for value_size, created on first use. Returns the class number or
 * -ENOSPC (all OL_KV_MAX_CLASSES in use) / -E2BIG (larger than the shard). */
int ol_kv_alloc_class(struct ol_kv_alloc *a, uint64_t value_size);
/* A free slot of class c, or -ENOSPC (the caller evicts and retries). */
int64_t ol_kv_alloc_slot(struct ol_kv_alloc *a, int c);
/* Returns slot id of class c. Wholly free pages go back to the shard. */
void ol_kv_alloc_free(struct ol_kv_alloc *a, int c, uint32_t id);
/* Class of an allocated slot id. */
int ol_kv_alloc_class_of(const struct ol_kv_alloc *a, uint32_t id);
/*
 * Marks slot id of class c as allocated (rebuilding an allocator from a
 * persisted index). Returns 0, -EINVAL (id is not a slot position of class
 * c, or out of range) or -EBUSY (the slot, or its page, is taken by another
 * slot or class).
 */
int ol_kv_alloc_claim(struct ol_kv_alloc *a, int c, uint32_t id);

#endif
