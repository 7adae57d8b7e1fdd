/*
 * disk.c - see disk.h.
 *
 * Entry states: FREE; WRITING (value, then header, in flight; in the index
 * so that a second write of the key is refused; not readable); LIVE (in the
 * index and its class's policy; readable); ERASING (out of the index; the
 * header is being zeroed; the slot is reused after that). A delete that
 * meets a WRITING entry or a LIVE one being read marks it doomed; the
 * completion then erases it.
 */
#include "kv/disk.h"

#include "base/assert.h"
#include "base/fault.h"
#include "base/log.h"
#include "base/simd.h"
#include "kv/evict.h"
#include "kv/proto.h"
#include "kv/space.h"

#include <errno.h>
#include <fcntl.h>
#include <isa-l/crc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define OL_NONE UINT32_MAX
#define OL_ALIGN 4096u

enum { OL_D_FREE = 0, OL_D_WRITING, OL_D_LIVE, OL_D_ERASING };
enum { OL_IO_WRITE = 1, OL_IO_READ, OL_IO_ERASE };

struct ol_kv_dent {
    uint64_t seq;          /* write sequence: newest wins when rebuilding */
    uint64_t value_len, value_sum;
    struct ol_kv_hash h;
    uint32_t ns;
    uint16_t pins;         /* reads in flight */
    uint8_t state, cls;
    uint8_t doomed;
};

/* One operation in flight: a value write then its header write; a header
 * read and a value read together; or a header erasure. */
struct ol_kv_dio {
    struct ol_op op_a, op_b;
    struct ol_kv_disk *d;
    uint64_t tag;
    void *dst;
    uint32_t id, next_free;
    uint8_t kind, pending;
    int status;
    struct ol_kv_slot_hdr hdr __attribute__((aligned(OL_ALIGN)));
};

/* The .idx superblock, version 1 (docs/kv-disk.md). */
struct ol_kv_disk_sb {
    uint32_t magic;
    uint16_t version;
    uint16_t hdr_size;
    uint32_t shard, nshards;
    uint32_t npages, page_size;
    uint32_t slots_per_page;
    uint32_t crc;          /* CRC-32C of bytes 0..27 */
};

struct ol_kv_disk {
    int data_fd, idx_fd;
    bool direct;
    char files[4096];   /* <dir>/kv-disk or <dir>/kv-disk/tenant-<name> */
    uint32_t shard, npages, nents;
    struct ol_kv_alloc alloc;
    struct ol_kv_index index;
    struct ol_evict evict[OL_KV_MAX_CLASSES];
    int evict_kind;
    struct ol_kv_dent *ents;
    uint64_t next_seq;
    /* operations */
    struct ol_kv_dio *ios;
    uint32_t nios, free_io, busy_ios;
    /* header erasures waiting for an operation: a ring of entry ids */
    uint32_t *erase_q;
    uint32_t erase_head, erase_len;
    ol_loop *loop;
    ol_kv_disk_done_fn done;
    void *ctx;
    struct ol_kv_disk_stats st;
};

static const struct ol_kv_slot_hdr ol_zero_hdr __attribute__((aligned(OL_ALIGN)));

static uint64_t ol_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

static uint32_t ol_crc32c(const void *p, size_t n)
{
    uint32_t c = ~crc32_iscsi((unsigned char *)p, (int)n, 0xFFFFFFFFu);
    ol_simd_clean();   /* base/simd.h: ISA-L leaves the vector unit dirty */
    return c;
}

static uint64_t ol_data_off(const struct ol_kv_disk *d, uint32_t id)
{
    return (uint64_t)(id / OL_KV_SLOTS_PER_PAGE) * OL_KV_PAGE +
           (uint64_t)(id % OL_KV_SLOTS_PER_PAGE) * d->alloc.cls[d->ents[id].cls].slot_size;
}

static uint64_t ol_hdr_off(uint32_t id) { return OL_KV_DISK_SB_SIZE + (uint64_t)id * OL_KV_HDR_SIZE; }

/* ---- entries ------------------------------------------------------------------ */

static bool ol_d_pinned(void *ctx, uint32_t id)
{
    const struct ol_kv_disk *d = ctx;
    return d->ents[id].pins || d->ents[id].state != OL_D_LIVE;
}

static void ol_d_free(struct ol_kv_disk *d, uint32_t id)
{
    struct ol_kv_dent *e = &d->ents[id];
    ol_kv_alloc_free(&d->alloc, e->cls, id);
    e->state = OL_D_FREE;
    e->pins = 0;
    e->doomed = 0;
}

/* Space callback: evicts LIVE entry id (already out of its policy). */
static void ol_d_drop(void *ctx, uint32_t id)
{
    struct ol_kv_disk *d = ctx;
    struct ol_kv_dent *e = &d->ents[id];
    ol_kv_index_remove(&d->index, e->h);
    d->st.entries--;
    d->st.value_bytes -= e->value_len;
    d->st.evictions++;
    ol_d_free(d, id);
}

/* Takes a LIVE or WRITING entry out of view; its header is zeroed before
 * the slot is reused (now, or when its I/O completes). */
static void ol_d_erase_later(struct ol_kv_disk *d, uint32_t id)
{
    struct ol_kv_dent *e = &d->ents[id];
    OL_ASSERT(e->state == OL_D_LIVE || e->state == OL_D_WRITING);
    OL_ASSERT(d->erase_len < d->nents);
    e->state = OL_D_ERASING;
    d->erase_q[(d->erase_head + d->erase_len) % d->nents] = id;
    d->erase_len++;
}

static void ol_d_unpublish(struct ol_kv_disk *d, uint32_t id)
{
    struct ol_kv_dent *e = &d->ents[id];
    ol_kv_index_remove(&d->index, e->h);
    if (e->state == OL_D_LIVE) {
        if (ol_evict_contains(&d->evict[e->cls], id))
            ol_evict_remove(&d->evict[e->cls], id);
        d->st.entries--;
        d->st.value_bytes -= e->value_len;
    }
}

/* Deletes id: out of view now, header erased once no I/O holds it. */
static void ol_d_delete(struct ol_kv_disk *d, uint32_t id)
{
    struct ol_kv_dent *e = &d->ents[id];
    ol_d_unpublish(d, id);
    d->st.deletes++;
    if (e->state == OL_D_WRITING || e->pins)
        e->doomed = 1; /* the completion erases it */
    else
        ol_d_erase_later(d, id);
}

/* ---- operations ------------------------------------------------------------------ */

static struct ol_kv_dio *ol_io_get(struct ol_kv_disk *d)
{
    if (d->free_io == OL_NONE || !d->loop)
        return NULL;
    struct ol_kv_dio *io = &d->ios[d->free_io];
    d->free_io = io->next_free;
    d->busy_ios++;
    return io;
}

static void ol_io_put(struct ol_kv_disk *d, struct ol_kv_dio *io)
{
    OL_ASSERT(d->busy_ios > 0 && io >= d->ios && io < d->ios + d->nios);
    io->next_free = d->free_io;
    d->free_io = (uint32_t)(io - d->ios);
    d->busy_ios--;
}

bool ol_kv_disk_idle_slot(const struct ol_kv_disk *d)
{
    return d->loop && d->free_io != OL_NONE;
}

bool ol_kv_disk_busy(const struct ol_kv_disk *d)
{
    return d->busy_ios || d->erase_len;
}

/* ---- completions ------------------------------------------------------------------ */

static void ol_on_erased(struct ol_kv_dio *io, int res);
static void ol_on_value_written(struct ol_kv_dio *io, int res);
static void ol_on_hdr_written(struct ol_kv_dio *io, int res);
static void ol_read_part(struct ol_kv_dio *io, bool want, int res, unsigned expect);

/* Where every operation's result reaches the tier's state machine (b: the
 * io's second op, op_b). Test builds rewrite it here (base/fault.h; the
 * drive is the shard). */
static void ol_on_io(struct ol_kv_dio *io, const struct ol_op *op, bool b, int res)
{
    OL_ASSERT(io->kind >= OL_IO_WRITE && io->kind <= OL_IO_ERASE && io->id < io->d->nents);
    OL_ASSERT(io->kind == OL_IO_READ ? io->pending > 0 && io->d->ents[io->id].pins > 0
              : io->kind == OL_IO_WRITE ? io->d->ents[io->id].state == OL_D_WRITING
                                        : io->d->ents[io->id].state == OL_D_ERASING);
    res = OL_FAULT(OL_FAULT_KVDISK, op->fault_op, io->d->shard, res);
    switch (io->kind) {
    case OL_IO_ERASE:
        return ol_on_erased(io, res);
    case OL_IO_WRITE:
        return b ? ol_on_hdr_written(io, res) : ol_on_value_written(io, res);
    default: /* OL_IO_READ: the value (op_a) and its header (op_b) */
        return ol_read_part(io, true, res,
                            b ? OL_KV_HDR_SIZE
                              : (unsigned)ol_up(io->d->ents[io->id].value_len, OL_ALIGN));
    }
}

static void ol_on_io_a(ol_loop *loop, struct ol_op *op, int res, unsigned flags)
{
    ol_on_io((struct ol_kv_dio *)((char *)op - offsetof(struct ol_kv_dio, op_a)), op, false, res);
}

static void ol_on_io_b(ol_loop *loop, struct ol_op *op, int res, unsigned flags)
{
    ol_on_io((struct ol_kv_dio *)((char *)op - offsetof(struct ol_kv_dio, op_b)), op, true, res);
}

static void ol_on_erased(struct ol_kv_dio *io, int res)
{
    struct ol_kv_disk *d = io->d;
    if (res != (int)OL_KV_HDR_SIZE)
        d->st.io_errors++; /* a stale header only costs a failed read later */
    ol_d_free(d, io->id);
    ol_io_put(d, io);
    ol_kv_disk_pump(d);
}

void ol_kv_disk_pump(struct ol_kv_disk *d)
{
    while (d->erase_len) {
        struct ol_kv_dio *io = ol_io_get(d);
        if (!io)
            return;
        uint32_t id = d->erase_q[d->erase_head];
        io->kind = OL_IO_ERASE;
        io->id = id;
        io->op_a.cb = ol_on_io_a;
        if (ol_loop_write(d->loop, &io->op_a, d->idx_fd, &ol_zero_hdr, OL_KV_HDR_SIZE,
                          ol_hdr_off(id)) < 0) {
            ol_io_put(d, io);
            return; /* ring full: the next completion pumps again */
        }
        d->erase_head = (d->erase_head + 1) % d->nents;
        d->erase_len--;
    }
}

/* ---- writes ------------------------------------------------------------------------ */

static void ol_write_end(struct ol_kv_disk *d, struct ol_kv_dio *io, int status)
{
    struct ol_kv_dent *e = &d->ents[io->id];
    uint64_t tag = io->tag;
    if (status == 0 && e->doomed) {
        e->doomed = 0;
        ol_d_erase_later(d, io->id); /* deleted while being written */
        status = -ECANCELED;
    } else if (status == 0) {
        e->state = OL_D_LIVE;
        ol_evict_insert(&d->evict[e->cls], io->id, e->h.lo, 0);
        d->st.entries++;
        d->st.value_bytes += e->value_len;
        d->st.writes++;
        d->st.write_bytes += e->value_len;
    } else {
        d->st.io_errors++;
        if (!e->doomed)
            ol_kv_index_remove(&d->index, e->h);
        ol_d_erase_later(d, io->id); /* the header may be half written */
    }
    ol_io_put(d, io);
    d->done(d->ctx, OL_KV_DISK_WROTE, tag, status, NULL);
    ol_kv_disk_pump(d);
}

static void ol_on_hdr_written(struct ol_kv_dio *io, int res)
{
    ol_write_end(io->d, io, res == (int)OL_KV_HDR_SIZE ? 0 : -EIO);
}

static void ol_on_value_written(struct ol_kv_dio *io, int res)
{
    struct ol_kv_disk *d = io->d;
    struct ol_kv_dent *e = &d->ents[io->id];
    if (res < 0 || (uint64_t)res != ol_up(e->value_len, OL_ALIGN)) {
        ol_write_end(d, io, -EIO);
        return;
    }
    if (e->doomed) {
        ol_write_end(d, io, 0); /* becomes -ECANCELED; no header needed */
        return;
    }
    io->op_b.cb = ol_on_io_b;
    if (ol_loop_write(d->loop, &io->op_b, d->idx_fd, &io->hdr, OL_KV_HDR_SIZE, ol_hdr_off(io->id)) < 0)
        ol_write_end(d, io, -EIO);
}

int ol_kv_disk_write(struct ol_kv_disk *d, uint32_t ns, struct ol_kv_hash h, const void *key,
                     uint16_t key_len, const void *src, uint64_t len, uint64_t sum, uint64_t tag)
{
    if (key_len > OL_KV_KEY_MAX)
        return -EINVAL;
    if (ol_kv_index_find(&d->index, h) >= 0)
        return -EEXIST;
    int c = ol_kv_alloc_class(&d->alloc, len);
    if (c < 0)
        return c == -ENOSPC ? -ENOSPC : -E2BIG;
    if (!d->evict[c].capacity && ol_evict_init(&d->evict[c], d->evict_kind, d->nents) < 0)
        return -ENOMEM;
    struct ol_kv_dio *io = ol_io_get(d);
    if (!io)
        return -EBUSY;
    struct ol_kv_space_ops ops = {.pinned = ol_d_pinned, .drop = ol_d_drop, .ctx = d};
    int64_t id = ol_kv_space_slot(&d->alloc, d->evict, c, &ops);
    if (id < 0) {
        ol_io_put(d, io);
        return -ENOSPC;
    }
    struct ol_kv_dent *e = &d->ents[id];
    *e = (struct ol_kv_dent){.seq = ++d->next_seq, .value_len = len, .value_sum = sum, .h = h,
                             .ns = ns, .state = OL_D_WRITING, .cls = (uint8_t)c};
    ol_kv_index_insert(&d->index, h, (uint32_t)id);
    struct ol_kv_slot_hdr *hd = &io->hdr;
    memset(hd, 0, sizeof *hd);
    hd->magic = OL_KV_DISK_MAGIC;
    hd->version = OL_KV_DISK_VERSION;
    hd->key_len = key_len;
    hd->gen = e->seq;
    hd->value_len = len;
    hd->value_sum = sum;
    hd->ns = ns;
    hd->flags = OL_KV_SLOT_COMMITTED;
    hd->hash_lo = h.lo;
    hd->hash_hi = h.hi;
    hd->_reserved = d->alloc.cls[c].slot_size;
    memcpy(hd->key, key, key_len);
    hd->hdr_crc = ol_kv_slot_hdr_crc(hd);
    io->kind = OL_IO_WRITE;
    io->id = (uint32_t)id;
    io->tag = tag;
    io->op_a.cb = ol_on_io_a;
    if (ol_loop_write(d->loop, &io->op_a, d->data_fd, src, (unsigned)ol_up(len, OL_ALIGN),
                      ol_data_off(d, (uint32_t)id)) < 0) {
        ol_kv_index_remove(&d->index, h);
        ol_d_free(d, (uint32_t)id);
        ol_io_put(d, io);
        return -EBUSY;
    }
    return 0;
}

/* ---- reads --------------------------------------------------------------------------- */

static void ol_read_part(struct ol_kv_dio *io, bool want, int res, unsigned expect)
{
    if (!want || res < 0 || (unsigned)res < expect)
        io->status = -EIO;
    if (--io->pending)
        return;
    struct ol_kv_disk *d = io->d;
    struct ol_kv_dent *e = &d->ents[io->id];
    const struct ol_kv_slot_hdr *hd = &io->hdr;
    int status = io->status;
    if (status == 0 &&
        (hd->magic != OL_KV_DISK_MAGIC || hd->version != OL_KV_DISK_VERSION ||
         hd->key_len > OL_KV_KEY_MAX || ol_kv_slot_hdr_crc(hd) != hd->hdr_crc ||
         hd->gen != e->seq || hd->hash_lo != e->h.lo || hd->hash_hi != e->h.hi ||
         hd->ns != e->ns || hd->value_len != e->value_len || hd->value_sum != e->value_sum ||
         ol_kv_value_hash(io->dst, e->value_len) != e->value_sum))
        status = -EBADMSG;
    e->pins--;
    if (status == -EIO)
        d->st.io_errors++;
    if (status == 0) {
        d->st.reads++;
        d->st.read_bytes += e->value_len;
    } else if (!e->doomed) {
        if (status == -EBADMSG)
            d->st.corrupt++;
        /* rare, and an operator wants to know: one line per entry */
        ol_warn("kv_disk: %s/shard-%u.dat slot %u: %s; entry dropped (%llu so far)",
                d->files, d->shard, io->id,
                status == -EBADMSG ? "value or header failed its checks" : "read error",
                (unsigned long long)(d->st.corrupt + d->st.io_errors));
        ol_d_unpublish(d, io->id); /* never served again */
        e->doomed = 1;
    }
    if (e->doomed && !e->pins) {
        e->doomed = 0;
        ol_d_erase_later(d, io->id);
    }
    uint64_t tag = io->tag;
    ol_io_put(d, io);
    d->done(d->ctx, OL_KV_DISK_READ, tag, status, status == 0 ? hd : NULL);
    ol_kv_disk_pump(d);
}

int ol_kv_disk_read(struct ol_kv_disk *d, int64_t id, void *dst, uint64_t tag)
{
    if (id < 0 || (uint64_t)id >= d->nents || d->ents[id].state != OL_D_LIVE || d->ents[id].doomed)
        return -ENOENT;
    struct ol_kv_dio *io = ol_io_get(d);
    if (!io)
        return -EBUSY;
    struct ol_kv_dent *e = &d->ents[id];
    io->kind = OL_IO_READ;
    io->id = (uint32_t)id;
    io->tag = tag;
    io->dst = dst;
    io->status = 0;
    io->pending = 2;
    io->op_a.cb = ol_on_io_a;
    io->op_b.cb = ol_on_io_b;
    e->pins++;
    if (ol_loop_read(d->loop, &io->op_a, d->data_fd, dst, (unsigned)ol_up(e->value_len, OL_ALIGN),
                     ol_data_off(d, (uint32_t)id)) < 0) {
        e->pins--;
        ol_io_put(d, io);
        return -EBUSY;
    }
    if (ol_loop_read(d->loop, &io->op_b, d->idx_fd, &io->hdr, OL_KV_HDR_SIZE,
                     ol_hdr_off((uint32_t)id)) < 0)
        ol_read_part(io, false, -EIO, 0); /* the value read completes the op */
    ol_evict_hit(&d->evict[e->cls], (uint32_t)id);
    return 0;
}

/* ---- queries, deletes ----------------------------------------------------------------- */

int64_t ol_kv_disk_find(const struct ol_kv_disk *d, uint32_t ns, struct ol_kv_hash h,
                        uint64_t *value_len)
{
    int64_t id = ol_kv_index_find(&d->index, h);
    if (id < 0)
        return -1;
    const struct ol_kv_dent *e = &d->ents[id];
    if (e->state != OL_D_LIVE || e->doomed || e->ns != ns)
        return -1;
    if (value_len)
        *value_len = e->value_len;
    return id;
}

bool ol_kv_disk_has(const struct ol_kv_disk *d, struct ol_kv_hash h)
{
    return ol_kv_index_find(&d->index, h) >= 0;
}

int ol_kv_disk_delete(struct ol_kv_disk *d, uint32_t ns, struct ol_kv_hash h)
{
    int64_t id = ol_kv_index_find(&d->index, h);
    if (id < 0 || d->ents[id].ns != ns)
        return -ENOENT;
    ol_d_delete(d, (uint32_t)id);
    ol_kv_disk_pump(d);
    return 0;
}

uint64_t ol_kv_disk_reset(struct ol_kv_disk *d, uint32_t ns)
{
    uint64_t n = 0;
    for (uint32_t id = 0; id < d->nents; id++) {
        struct ol_kv_dent *e = &d->ents[id];
        if ((e->state == OL_D_LIVE || e->state == OL_D_WRITING) && !e->doomed && e->ns == ns) {
            ol_d_delete(d, id);
            n++;
        }
    }
    ol_kv_disk_pump(d);
    return n;
}

void ol_kv_disk_stats(const struct ol_kv_disk *d, struct ol_kv_disk_stats *out)
{
    *out = d->st;
}

void ol_kv_disk_attach(struct ol_kv_disk *d, ol_loop *loop, ol_kv_disk_done_fn done, void *ctx)
{
    d->loop = loop;
    d->done = done;
    d->ctx = ctx;
}

/* ---- open, recovery ---------------------------------------------------------------- */

/* A header that passed its checks, reduced to what the index needs. */
struct ol_found {
    uint64_t seq, value_len, value_sum;
    struct ol_kv_hash h;
    uint32_t id, ns;
};

static int ol_found_newest_first(const void *a, const void *b)
{
    const struct ol_found *x = a, *y = b;
    return x->seq < y->seq ? 1 : x->seq > y->seq ? -1 : 0;
}

/* A header that may describe a live entry. */
static bool ol_hdr_plausible(const struct ol_kv_slot_hdr *h)
{
    return h->magic == OL_KV_DISK_MAGIC && h->version == OL_KV_DISK_VERSION &&
           h->key_len <= OL_KV_KEY_MAX && (h->flags & OL_KV_SLOT_COMMITTED) && h->gen &&
           ol_kv_slot_size_for(h->value_len) == h->_reserved && ol_kv_slot_hdr_crc(h) == h->hdr_crc;
}

/* Reads every header (skipping holes) into found[]. Returns the count or -errno. */
static int64_t ol_scan(struct ol_kv_disk *d, struct ol_found *found, char *err, size_t errlen)
{
    enum { CHUNK = 1u << 20 };
    struct ol_kv_slot_hdr *buf = malloc(CHUNK);
    if (!buf)
        return -ENOMEM;
    int64_t nfound = 0;
    uint64_t end = ol_hdr_off(d->nents);
    for (uint64_t off = OL_KV_DISK_SB_SIZE; off < end;) {
        off_t data = lseek(d->idx_fd, (off_t)off, SEEK_DATA); /* skip never-written ranges */
        if (data < 0 || (uint64_t)data >= end)
            break;
        off = (uint64_t)data & ~(uint64_t)(OL_KV_HDR_SIZE - 1); /* headers are 256-aligned */
        size_t want = end - off < CHUNK ? (size_t)(end - off) : CHUNK;
        ssize_t got = pread(d->idx_fd, buf, want, (off_t)off);
        if (got < 0) {
            int e = errno;
            snprintf(err, errlen, "kv_disk: reading %s/shard-%u.idx: %s", d->files,
                     d->shard, strerror(e));
            free(buf);
            return -e;
        }
        size_t n = (size_t)got / OL_KV_HDR_SIZE;
        if (n == 0)
            break;
        for (size_t i = 0; i < n; i++) {
            const struct ol_kv_slot_hdr *h = &buf[i];
            if (!ol_hdr_plausible(h))
                continue;
            found[nfound++] = (struct ol_found){
                .seq = h->gen, .value_len = h->value_len, .value_sum = h->value_sum,
                .h = {.lo = h->hash_lo, .hi = h->hash_hi}, .ns = h->ns,
                .id = (uint32_t)((off - OL_KV_DISK_SB_SIZE) / OL_KV_HDR_SIZE + i)};
        }
        off += n * OL_KV_HDR_SIZE;
    }
    free(buf);
    return nfound;
}

/* Rebuilds alloc, index and policies from the headers. The newest wins
 * when two headers claim one key or overlapping space; values are checked
 * when read, not here. */
static int ol_recover(struct ol_kv_disk *d, char *err, size_t errlen)
{
    struct ol_found *found = malloc((size_t)d->nents * sizeof *found);
    if (!found) {
        snprintf(err, errlen, "out of memory for the disk tier's index");
        return -ENOMEM;
    }
    int64_t nfound = ol_scan(d, found, err, errlen);
    if (nfound < 0) {
        free(found);
        return (int)nfound;
    }
    qsort(found, (size_t)nfound, sizeof *found, ol_found_newest_first);
    uint32_t kept = 0;
    for (int64_t i = 0; i < nfound; i++) {
        const struct ol_found *f = &found[i];
        int c = ol_kv_alloc_class(&d->alloc, f->value_len);
        if (c < 0 || ol_kv_index_find(&d->index, f->h) >= 0)
            continue; /* too many classes, or a newer copy of the key */
        if (!d->evict[c].capacity && ol_evict_init(&d->evict[c], d->evict_kind, d->nents) < 0) {
            free(found);
            snprintf(err, errlen, "out of memory for the disk tier's index");
            return -ENOMEM;
        }
        if (ol_kv_alloc_claim(&d->alloc, c, f->id) < 0)
            continue; /* overlaps newer data */
        d->ents[f->id] = (struct ol_kv_dent){.seq = f->seq, .value_len = f->value_len,
                                             .value_sum = f->value_sum, .h = f->h, .ns = f->ns,
                                             .state = OL_D_LIVE, .cls = (uint8_t)c};
        ol_kv_index_insert(&d->index, f->h, f->id);
        if (f->seq > d->next_seq)
            d->next_seq = f->seq;
        found[kept++] = *f;
        d->st.entries++;
        d->st.value_bytes += f->value_len;
    }
    /* Oldest first into the policies, so the newest are the most recent. */
    for (uint32_t i = kept; i-- > 0;) {
        uint32_t id = found[i].id;
        ol_evict_insert(&d->evict[d->ents[id].cls], id, found[i].h.lo, 0);
    }
    d->st.recovered = kept;
    free(found);
    return 0;
}

static int ol_sb_write(struct ol_kv_disk *d, uint32_t nshards)
{
    char blk[OL_KV_DISK_SB_SIZE] = {0};
    struct ol_kv_disk_sb *sb = (struct ol_kv_disk_sb *)blk;
    *sb = (struct ol_kv_disk_sb){.magic = OL_KV_DISK_SB_MAGIC, .version = OL_KV_DISK_VERSION,
                                 .hdr_size = OL_KV_HDR_SIZE, .shard = d->shard, .nshards = nshards,
                                 .npages = d->npages, .page_size = OL_KV_PAGE,
                                 .slots_per_page = OL_KV_SLOTS_PER_PAGE};
    sb->crc = ol_crc32c(sb, offsetof(struct ol_kv_disk_sb, crc));
    if (pwrite(d->idx_fd, blk, sizeof blk, 0) != (ssize_t)sizeof blk || fdatasync(d->idx_fd) < 0)
        return -errno ? -errno : -EIO;
    return 0;
}

static bool ol_sb_matches(struct ol_kv_disk *d, uint32_t nshards)
{
    struct ol_kv_disk_sb sb;
    if (pread(d->idx_fd, &sb, sizeof sb, 0) != (ssize_t)sizeof sb)
        return false;
    return sb.magic == OL_KV_DISK_SB_MAGIC && sb.version == OL_KV_DISK_VERSION &&
           sb.crc == ol_crc32c(&sb, offsetof(struct ol_kv_disk_sb, crc)) &&
           sb.hdr_size == OL_KV_HDR_SIZE && sb.shard == d->shard && sb.nshards == nshards &&
           sb.npages == d->npages && sb.page_size == OL_KV_PAGE &&
           sb.slots_per_page == OL_KV_SLOTS_PER_PAGE;
}

int ol_kv_disk_open(struct ol_kv_disk **out, const struct ol_kv_disk_params *p, char *err,
                    size_t errlen)
{
    int rc = 0;
    char path[sizeof ((struct ol_kv_disk *)0)->files + 64];
    uint32_t npages = (uint32_t)(p->bytes / OL_KV_PAGE);
    if (npages == 0 || (uint64_t)npages * OL_KV_SLOTS_PER_PAGE > (1u << 31)) {
        snprintf(err, errlen, "kv_disk: a core's share must be 2 MiB to 16 TiB, got %llu bytes",
                 (unsigned long long)p->bytes);
        return -EINVAL;
    }
    if (strlen(p->dir) + (p->tenant ? strlen(p->tenant) : 0) + 32 >=
        sizeof ((struct ol_kv_disk *)0)->files) {
        snprintf(err, errlen, "kv_disk: directory name too long: %s", p->dir);
        return -ENAMETOOLONG;
    }
    struct ol_kv_disk *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    d->data_fd = d->idx_fd = -1;
    snprintf(d->files, sizeof d->files, "%s/kv-disk", p->dir);
    d->shard = (uint32_t)p->shard;
    d->npages = npages;
    d->nents = npages * OL_KV_SLOTS_PER_PAGE;
    d->evict_kind = p->evict_kind;
    d->nios = p->queue_depth ? p->queue_depth : 32;
    for (int level = 0; level < (p->tenant ? 2 : 1); level++) {
        if (level == 1) /* kv-disk/ first, then the tenant's directory in it */
            snprintf(d->files, sizeof d->files, "%s/kv-disk/tenant-%s", p->dir, p->tenant);
        if (mkdir(d->files, 0700) < 0 && errno != EEXIST) {
            rc = -errno;
            snprintf(err, errlen, "kv_disk: cannot create %s: %s", d->files, strerror(errno));
            goto fail;
        }
    }
    snprintf(path, sizeof path, "%s/shard-%d.idx", d->files, p->shard);
    if ((d->idx_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0) {
        rc = -errno;
        snprintf(err, errlen, "kv_disk: cannot open %s: %s", path, strerror(errno));
        goto fail;
    }
    bool fresh = !ol_sb_matches(d, (uint32_t)p->nshards);
    snprintf(path, sizeof path, "%s/shard-%d.dat", d->files, p->shard);
    d->data_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_DIRECT, 0600);
    d->direct = d->data_fd >= 0;
    if (d->data_fd < 0 && errno == EINVAL) /* no O_DIRECT here (tmpfs) */
        d->data_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (d->data_fd < 0) {
        rc = -errno;
        snprintf(err, errlen, "kv_disk: cannot open %s: %s", path, strerror(errno));
        goto fail;
    }
    uint64_t data_bytes = (uint64_t)npages * OL_KV_PAGE;
    if (fresh) {
        struct stat stx;
        if (fstat(d->idx_fd, &stx) == 0 && stx.st_size > 0)
            ol_warn("kv_disk: %s/shard-%d: written for another layout (threads, capacity "
                    "or version changed); starting it empty", d->files, p->shard);
        rc = 0;
        if (ftruncate(d->idx_fd, 0) < 0 || ftruncate(d->data_fd, 0) < 0 ||
            (rc = ol_sb_write(d, (uint32_t)p->nshards)) < 0) {
            rc = rc < 0 ? rc : -errno;
            snprintf(err, errlen, "kv_disk: cannot write %s: %s", path, strerror(-rc));
            goto fail;
        }
    }
    if (ftruncate(d->idx_fd, (off_t)ol_hdr_off(d->nents)) < 0) {
        rc = -errno;
        snprintf(err, errlen, "kv_disk: cannot size %s.idx: %s", path, strerror(errno));
        goto fail;
    }
    /* Reserve the space now, so a full filesystem is an error at start,
     * not a failed write later. Checked first: a fallocate that fails
     * half way keeps what it got, and could fill the drive. */
    struct stat dst;
    struct statvfs vfs;
    int fr = 0;
    if (fstat(d->data_fd, &dst) == 0 && fstatvfs(d->data_fd, &vfs) == 0 &&
        (uint64_t)dst.st_blocks * 512 < data_bytes &&
        data_bytes - (uint64_t)dst.st_blocks * 512 > (uint64_t)vfs.f_bavail * vfs.f_frsize)
        fr = ENOSPC;
    if (!fr && fallocate(d->data_fd, 0, 0, (off_t)data_bytes) < 0)
        fr = errno;
    if (fr == ENOSPC) {
        rc = -ENOSPC;
        snprintf(err, errlen,
                 "kv_disk: %s has no room for %.2f GiB (kv_disk.capacity_gb is shared by the "
                 "cores); lower kv_disk.capacity_gb or free space", p->dir,
                 (double)data_bytes / (1u << 30));
        goto fail;
    }
    if (fr != 0 && ftruncate(d->data_fd, (off_t)data_bytes) < 0) {
        rc = -errno;
        snprintf(err, errlen, "kv_disk: cannot size %s: %s", path, strerror(errno));
        goto fail;
    }
    d->st.bytes_capacity = data_bytes;
    d->ents = calloc(d->nents, sizeof *d->ents);
    d->erase_q = calloc(d->nents, sizeof *d->erase_q);
    d->ios = aligned_alloc(OL_ALIGN, ol_up((size_t)d->nios * sizeof *d->ios, OL_ALIGN));
    if (!d->ents || !d->erase_q || !d->ios) {
        rc = -ENOMEM;
        snprintf(err, errlen, "out of memory for the disk tier's index");
        goto fail;
    }
    memset(d->ios, 0, (size_t)d->nios * sizeof *d->ios);
    for (uint32_t i = 0; i < d->nios; i++) {
        d->ios[i].d = d;
        d->ios[i].next_free = i + 1 < d->nios ? i + 1 : OL_NONE;
    }
    d->free_io = 0;
    if ((rc = ol_kv_alloc_init(&d->alloc, npages, 0, npages)) < 0 ||
        (rc = ol_kv_index_init(&d->index, d->nents)) < 0) {
        snprintf(err, errlen, "out of memory for the disk tier's index");
        goto fail;
    }
    if (!fresh && (rc = ol_recover(d, err, errlen)) < 0)
        goto fail;
    *out = d;
    return 0;
fail:
    ol_kv_disk_close(d);
    return rc;
}

void ol_kv_disk_close(struct ol_kv_disk *d)
{
    if (!d)
        return;
    if (d->idx_fd >= 0) {
        fdatasync(d->idx_fd);
        close(d->idx_fd);
    }
    if (d->data_fd >= 0) {
        fdatasync(d->data_fd);
        close(d->data_fd);
    }
    for (int c = 0; c < OL_KV_MAX_CLASSES; c++)
        ol_evict_exit(&d->evict[c]);
    ol_kv_index_exit(&d->index);
    ol_kv_alloc_exit(&d->alloc);
    free(d->ents);
    free(d->erase_q);
    free(d->ios);
    free(d);
}
