/*
 * engine_get.c - GET and HEAD: metadata from every drive of the set, the
 * version a read quorum agrees on, then the requested range stripe by
 * stripe (two slots: one being handed out while the next is read), each
 * shard block verified; missing, short or corrupt blocks are replaced by
 * other shards and the stripe rebuilt. The caller pulls slices with
 * ol_get_next; they point into the request's slots (or, for inline
 * objects, into the metadata buffers).
 *
 * Phases: META (read meta / statx bucket per drive) -> WAIT (EV_META
 * sent, waiting for the first ol_get_next) -> OPEN (the part's shard file
 * opened on every usable drive) -> DATA (slots) ; SWITCH (the range goes
 * on in the next part: this part's files closed, then OPEN again) ; FAILED
 * (EV_DONE with an error before any data) ; at ol_get_end: CLOSE (open
 * files closed) -> released.
 *
 * Parts: an object is read one part at a time (r->pi, the part's object
 * offset r->pbase and size r->psize); stripes, slots and the range bounds
 * r->poff / r->pend are relative to the part. A PUT's object is one part.
 *
 * Mapped reads: when the caller sends the bytes by reference (args.by_ref:
 * plain-HTTP GetObject), a part's shard file is also mapped read-only
 * when its first block is wanted, and a block whose pages are all in the
 * page cache (mincore) is verified where it lies and handed out from
 * there: the copy into the slot, a fifth of a large GET's CPU, is not made. A block with a
 * page not cached is read into its slot as before (a fault in the mapping
 * would block the loop on the drive), which also brings the file's next
 * pages in (readahead). Shard files are never written once renamed into
 * place (a heal or an overwrite makes a new file), so a verified page keeps
 * its bytes while it is mapped; a page the kernel cannot supply (the file
 * shrank under us, a read error after reclaim) raises SIGBUS in user space,
 * which base/mapguard.h turns into a fallback to the read, and fails the
 * send in the kernel (a short body, never wrong bytes). A rebuild copies its
 * mapped sources into the slot first, under the same guard. A mapping is
 * the core's, shared by every GET of its file (below); a GET lets its
 * mappings go when the part's files are closed, after the caller released
 * the last slice (ol_get_next / ol_get_end).
 */
#include "store/engine_int.h"

#include "base/le.h"
#include "base/mapguard.h"
#include "store/bitrot.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

enum { GPH_META = 1, GPH_WAIT, GPH_OPEN, GPH_DATA, GPH_FAILED, GPH_CLOSE, GPH_SWITCH };
enum { M_OPEN = 1, M_READ, M_CLOSE, M_STAT, O_OPEN, X_CLOSE };

static uint32_t stride(const struct ol_sreq *r) { return OL_BITROT_HDR_SIZE + r->B; }

/* ---- mapped reads (see the header) --------------------------------------------------------- */

/* Pages of one block a residency check covers; a larger block is read. */
#define MAP_VEC 1040u

/* ---- shared mappings: a shard file's mapping is kept on the core and
 * shared by every GET of that file, those at the same time included, and
 * kept after the last for the next, so a hot object is not mapped, faulted
 * in and unmapped again for each GET (docs/store.md, "Mapped reads"). Found
 * by inode and size (the mapping holds the inode, so its number is not
 * reused while it is kept). An entry's users are the GETs holding it; one
 * unused for OL_SE_PARK_MS goes, and the oldest unused one when the table
 * is full (with none unused, a GET maps the file for itself). An entry a
 * GET found failing (SIGBUS) is given to no other and goes with its last
 * user. */

static void park_unmap(struct ol_store_core *c, struct ol_se_park *pk)
{
    munmap((void *)(uintptr_t)pk->p, pk->len);
    pk->p = NULL;
    c->npark--;
}

static void park_sweep(ol_loop *loop, struct ol_timer *t);

/* The sweep armed for the first unused entry to expire; an armed one is
 * early enough already (an entry let go now expires after every other). */
static void park_arm(struct ol_store_core *c, uint64_t now)
{
    if (ol_timer_armed(&c->park_timer))
        return;
    uint64_t next = UINT64_MAX;
    for (unsigned i = 0; i < OL_SE_PARK; i++) {
        const struct ol_se_park *pk = &c->park[i];
        if (pk->p && pk->users == 0 && pk->at_ms + OL_SE_PARK_MS < next)
            next = pk->at_ms + OL_SE_PARK_MS;
    }
    if (next == UINT64_MAX)
        return;
    c->park_timer.fn = park_sweep;
    ol_timer_arm(c->loop, &c->park_timer, next > now ? next - now : 0);
}

static void park_sweep(ol_loop *loop, struct ol_timer *t)
{
    struct ol_store_core *c = (struct ol_store_core *)((char *)t -
                                                       offsetof(struct ol_store_core, park_timer));
    uint64_t now = ol_loop_now_ms(loop);
    for (unsigned i = 0; i < OL_SE_PARK; i++) {
        struct ol_se_park *pk = &c->park[i];
        if (pk->p && pk->users == 0 && now - pk->at_ms >= OL_SE_PARK_MS)
            park_unmap(c, pk);
    }
    park_arm(c, now);
}

void ol_se_park_drop(struct ol_store_core *c)
{
    if (ol_timer_armed(&c->park_timer))
        ol_timer_cancel(c->loop, &c->park_timer);
    for (unsigned i = 0; i < OL_SE_PARK; i++)
        if (c->park[i].p)
            park_unmap(c, &c->park[i]);
}

/* A slot for a new entry: a free one, else the oldest unused one (unmapped
 * first); OL_SE_PARK when every entry is in use. */
static unsigned park_slot(struct ol_store_core *c)
{
    unsigned old = OL_SE_PARK;
    for (unsigned i = 0; i < OL_SE_PARK; i++) {
        struct ol_se_park *pk = &c->park[i];
        if (!pk->p)
            return i;
        if (pk->users == 0 && (old == OL_SE_PARK || pk->at_ms < c->park[old].at_ms))
            old = i;
    }
    if (old != OL_SE_PARK)
        park_unmap(c, &c->park[old]);
    return old;
}

/* d's mapping of the part's shard file, shared from the core's table or
 * made when its first block is wanted (so a parity file is mapped only when
 * a rebuild needs it); NULL when its blocks are to be read: the caller did
 * not allow it, the file is empty, the mmap failed, or the mapping raised
 * SIGBUS. */
static const uint8_t *drive_map(struct ol_sreq *r, struct ol_sdrv *d)
{
    if (!r->map_ok || d->map_off || ol_se_drive(r, d->pos)->remote)
        return NULL;   /* another node's file: read block by block */
    if (d->map)
        return d->map;
    struct ol_store_core *c = r->c;
    struct stat st;
    d->map_off = true; /* one try per file */
    if (fstat(d->fd, &st) < 0 || st.st_size <= 0)
        return NULL;
    unsigned slot = OL_SE_PARK;
    for (unsigned i = 0, seen = 0; i < OL_SE_PARK && seen < c->npark; i++) {
        const struct ol_se_park *pk = &c->park[i];
        if (!pk->p)
            continue;
        seen++;
        if (!pk->dead && pk->ino == (uint64_t)st.st_ino && pk->dev == (uint64_t)st.st_dev &&
            pk->len == (size_t)st.st_size) {
            slot = i;
            break;
        }
    }
    d->map_len = (size_t)st.st_size;
    if (slot == OL_SE_PARK) {
        void *m = mmap(NULL, d->map_len, PROT_READ, MAP_SHARED, d->fd, 0);
        if (m == MAP_FAILED)
            return NULL;
        d->map_off = false;
        d->map = m;
        slot = park_slot(c);
        if (slot == OL_SE_PARK) { /* every entry in use */
            d->map_slot = OL_SE_MAP_OWN;
            return d->map;
        }
        c->park[slot] = (struct ol_se_park){.dev = (uint64_t)st.st_dev,
                                            .ino = (uint64_t)st.st_ino, .p = m,
                                            .len = d->map_len};
        c->npark++;
    }
    c->park[slot].users++;
    d->map_slot = (uint16_t)slot;
    d->map = c->park[slot].p;
    d->map_off = false;
    return d->map;
}

/* At the part's end, when the caller holds no slice: d lets its mapping go
 * (it stays until then, since slices handed out may still point into it);
 * one that failed is given to no other GET. */
static void map_release(struct ol_sreq *r, struct ol_sdrv *d)
{
    struct ol_store_core *c = r->c;
    if (d->map && d->map_slot == OL_SE_MAP_OWN) {
        munmap((void *)(uintptr_t)d->map, d->map_len);
    } else if (d->map) {
        struct ol_se_park *pk = &c->park[d->map_slot];
        uint64_t now = ol_loop_now_ms(c->loop);
        pk->dead |= d->map_off;
        pk->at_ms = now;
        if (--pk->users == 0 && pk->dead)
            park_unmap(c, pk);
        else if (pk->users == 0)
            park_arm(c, now);
    }
    d->map = NULL;
    d->map_len = 0;
    d->map_off = false;
}

/* What a block's check learnt: shared by the mapping and the read. */
static void block_checked(struct ol_sreq *r, struct ol_sslot *sl, unsigned i, bool ok)
{
    if (ok) {
        sl->good |= 1u << i;
    } else {
        r->c->st.checksum_failures++;
        r->healed = r->heal_q = true;
    }
}

struct map_verify {
    uint64_t seed, stripe;
    const uint8_t *hdr;
    uint32_t blen;
};

static int map_verify_fn(void *arg)
{
    const struct map_verify *a = arg;
    return ol_bitrot_verify(a->seed, a->stripe, a->hdr, a->hdr + OL_BITROT_HDR_SIZE, a->blen);
}

/* Block i of the slot's stripe from d's mapping: true when it was decided
 * there (good: sl->sp[i] points into the mapping; or failing its checksum),
 * false when it must be read (a page not in the page cache, the file too
 * short, or a SIGBUS while verifying, after which the drive is read). */
static bool map_block(struct ol_sreq *r, struct ol_sslot *sl, unsigned i, struct ol_sdrv *d)
{
    uint64_t off = sl->stripe * stride(r);
    size_t len = OL_BITROT_HDR_SIZE + sl->blen;
    if (off > d->map_len || len > d->map_len - off)
        return false; /* short: the read reports it */
    uintptr_t a = (uintptr_t)d->map + off, pg = a & ~(uintptr_t)(OL_SE_PAGE - 1);
    size_t span = a + len - pg, npg = (span + OL_SE_PAGE - 1) / OL_SE_PAGE;
    unsigned char vec[MAP_VEC];
    if (npg > MAP_VEC || mincore((void *)pg, span, vec) < 0)
        return false;
    for (size_t j = 0; j < npg; j++)
        if (!(vec[j] & 1))
            return false;
    struct map_verify mv = {.seed = ol_se_part_seed(r->ddir, r->pnum, i), .stripe = sl->stripe,
                            .hdr = (const uint8_t *)a, .blen = sl->blen};
    int rc = ol_mapguard_run(d->map, d->map_len, map_verify_fn, &mv);
    if (rc == -EFAULT) {
        d->map_off = true;
        return false;
    }
    if (rc == 0) {
        sl->sp[i] = (uint8_t *)a + OL_BITROT_HDR_SIZE;
        r->c->st.mapped_bytes += sl->blen;
    }
    block_checked(r, sl, i, rc == 0);
    return true;
}

struct map_copy {
    void *to;
    const void *from;
    size_t len;
};

static int map_copy_fn(void *arg)
{
    const struct map_copy *a = arg;
    memcpy(a->to, a->from, a->len);
    return 0;
}

/* Before a rebuild (ISA-L reads its sources in user space): the good blocks
 * that lie in a mapping are copied into the slot. False when a SIGBUS lost
 * one: it is no longer good or tried, and its drive is read from now on. */
static bool sources_in_slot(struct ol_sreq *r, struct ol_sslot *sl)
{
    bool all = true;
    uint32_t st = stride(r);
    for (unsigned i = 0; i < r->n; i++) {
        uint8_t *own = sl->base + (size_t)i * st + OL_BITROT_HDR_SIZE;
        if (!(sl->good & (1u << i)) || sl->sp[i] == own)
            continue;
        struct ol_sdrv *d = &r->d[r->drv_of[i]];
        struct map_copy mc = {.to = own, .from = sl->sp[i], .len = sl->blen};
        sl->sp[i] = own;
        if (ol_mapguard_run(d->map, d->map_len, map_copy_fn, &mc) == -EFAULT) {
            d->map_off = true;
            sl->good &= ~(1u << i);
            sl->tried &= ~(1u << i);
            all = false;
        }
    }
    return all;
}

/* ---- drive steps ---------------------------------------------------------------------- */

void ol_se_get_drive(struct ol_sdrv *d, int res)
{
    struct ol_sreq *r = d->s.r;
    switch (d->step) {
    case M_OPEN:
        if (res == -ENOENT || res == -ENOTDIR) {
            d->step = M_STAT;
            ol_se_statx(d, r->p_bucket);
            return;
        }
        if (res < 0) {
            d->ms = OL_SE_M_ERR;
            return ol_se_drive_end(d);
        }
        d->fd = res;
        d->step = M_READ;
        d->mlen = 0;
        ol_se_read(d, d->fd, d->mbuf, r->c->s->meta_cap, 0);
        return;
    case M_READ:
        if (res < 0) {
            d->ms = OL_SE_M_ERR;
        } else {
            /* a short read is not the file's end: read on while the header
             * (once there) says more, without a read more when it does not
             * (the file's whole comes in one read, almost always) */
            d->mlen += (uint32_t)res;
            uint32_t cap = r->c->s->meta_cap, want = cap;
            if (d->mlen >= OL_META_HDR_LEN)
                want = ol_le_ld32(d->mbuf + 12) < cap ? ol_le_ld32(d->mbuf + 12) : cap;
            if (res > 0 && d->mlen < want) {
                ol_se_read(d, d->fd, d->mbuf + d->mlen, cap - d->mlen, d->mlen);
                return;
            }
        }
        d->step = M_CLOSE;
        ol_se_close(d, d->fd);
        d->fd = -1;
        return;
    case M_CLOSE:
        if (d->ms != OL_SE_M_ERR)
            ol_se_meta_decode(r, d);
        return ol_se_drive_end(d);
    case M_STAT:
        if (res == 0)
            d->ms = OL_SE_M_NONE;
        else if (res == -ENOENT || res == -ENOTDIR)
            d->ms = OL_SE_M_NOBUCKET;
        else
            d->ms = OL_SE_M_ERR;
        return ol_se_drive_end(d);
    case O_OPEN:
        if (res >= 0) {
            d->fd = res;
        } else {
            d->err = res; /* no shard file here: read others */
            r->c->st.read_errors++;
            r->healed = r->heal_q = true;
        }
        return ol_se_drive_end(d);
    default: /* X_CLOSE */
        return ol_se_drive_end(d);
    }
}

/* ---- parts ---------------------------------------------------------------------------------- */

/* Part i of v (a version without parts is one part, number 1). */
static int part_at(const struct ol_meta_version *v, unsigned i, struct ol_meta_part *pt)
{
    if (v->part_count == 0) {
        if (i)
            return -ENOENT;
        memset(pt, 0, sizeof *pt);
        pt->number = 1;
        pt->size = v->size;
        return 0;
    }
    return ol_meta_part_at(v, i, pt);
}

int ol_store_part_range(const struct ol_meta_version *v, uint32_t number, uint64_t *offset,
                        uint64_t *length)
{
    struct ol_meta_part pt;
    uint64_t base = 0;
    for (unsigned i = 0; part_at(v, i, &pt) == 0; i++) {
        if (pt.number == number) {
            *offset = base;
            *length = pt.size;
            return 0;
        }
        base += pt.size;
    }
    return -ENOENT;
}

/* Loads part r->pi (at object offset r->pbase): its size, number, file and
 * the range's share of it. */
static void part_load(struct ol_sreq *r)
{
    struct ol_meta_part pt;
    if (part_at(&r->d[r->sel].v, r->pi, &pt) < 0) {
        pt.number = 0; /* past the last part: an empty share */
        pt.size = 0;
    }
    r->pnum = pt.number;
    r->psize = pt.size;
    uint64_t lo = r->off > r->pbase ? r->off : r->pbase;
    uint64_t hi = r->end < r->pbase + r->psize ? r->end : r->pbase + r->psize;
    r->poff = lo - r->pbase;
    r->pend = hi > lo ? hi - r->pbase : r->poff;
    ol_se_part_path(r->p_part, r->p_obj, &r->d[r->sel].v, r->pnum);
}

/* Moves to the first part (from r->pi on) with bytes of the range after r->dl. */
static void part_seek(struct ol_sreq *r)
{
    part_load(r);
    while (r->pnum && (r->poff >= r->pend || r->dl >= r->pbase + r->pend)) {
        r->pbase += r->psize;
        r->pi++;
        part_load(r);
    }
}

/* ---- choosing the version ---------------------------------------------------------------- */

static bool geometry_ok(const struct ol_sreq *r, const struct ol_meta_version *v)
{
    const struct ol_store_core *c = r->c;
    unsigned k = v->ec.k, m = v->ec.m;
    if (k == 0 || k + m != r->n || m > OL_EC_MAX_PARITY || !c->ec[m] || v->ec.block_size == 0)
        return false;
    if (v->has_inline && (v->size > (uint64_t)k * v->ec.block_size || v->part_count > 1))
        return false; /* an inline object is one stripe */
    if (v->part_count) { /* the parts make up the object */
        uint64_t sum = 0;
        struct ol_meta_part pt;
        for (unsigned i = 0; i < v->part_count; i++) {
            if (ol_meta_part_at(v, i, &pt) < 0 || pt.size > v->size - sum)
                return false;
            sum += pt.size;
        }
        if (sum != v->size)
            return false;
    }
    uint64_t blen = v->has_inline ? ol_ec_shard_len(v->size, k) : v->ec.block_size;
    return blen <= c->s->bmax;
}

/* The drive whose version a read quorum agrees on (newest mtime), or -errno. */
static int choose(struct ol_sreq *r)
{
    const struct ol_store *s = r->c->s;
    int best = -1;
    unsigned bestcnt = 0;
    for (unsigned i = 0; i < r->n; i++) {
        const struct ol_sdrv *d = &r->d[i];
        if (d->ms != OL_SE_M_OK || !geometry_ok(r, &d->v))
            continue;
        unsigned cnt = 0;
        for (unsigned j = 0; j < r->n; j++)
            cnt += r->d[j].ms == OL_SE_M_OK && ol_se_same_version(&d->v, &r->d[j].v);
        if (cnt >= d->v.ec.k && (best < 0 || d->v.mtime_ns > r->d[best].v.mtime_ns)) {
            best = (int)i;
            bestcnt = cnt;
        }
    }
    if (best >= 0) {
        if (bestcnt < r->n)
            r->healed = true;
        for (unsigned j = 0; j < r->n; j++) /* an offline drive cannot be healed */
            if (ol_se_online(r, j) &&
                !(r->d[j].ms == OL_SE_M_OK && ol_se_same_version(&r->d[best].v, &r->d[j].v)))
                r->heal_q = true;
        return best;
    }
    unsigned rq = ol_layout_read_quorum(r->n, s->parity);
    unsigned present = 0, nob = 0, notobj = 0;
    for (unsigned i = 0; i < r->n; i++) {
        uint8_t ms = r->d[i].ms;
        present += ms == OL_SE_M_OK || ms == OL_SE_M_OTHER || ms == OL_SE_M_KEY ||
                   ms == OL_SE_M_BAD || ms == OL_SE_M_NONE;
        nob += ms == OL_SE_M_NOBUCKET;
        notobj += ms == OL_SE_M_NONE || ms == OL_SE_M_OTHER || ms == OL_SE_M_KEY;
    }
    if (present < rq)
        return present == 0 && nob >= rq ? OL_STORE_ENOBUCKET : -EIO;
    /* a delete marker a read quorum agree on: r->sel is a drive holding it */
    for (unsigned i = 0; i < r->n; i++) {
        const struct ol_sdrv *d = &r->d[i];
        if (d->ms != OL_SE_M_OTHER || d->v.type != OL_META_DELETE_MARKER)
            continue;
        unsigned cnt = 0;
        for (unsigned j = 0; j < r->n; j++)
            cnt += r->d[j].ms == OL_SE_M_OTHER && r->d[j].v.type == OL_META_DELETE_MARKER &&
                   r->d[j].v.mtime_ns == d->v.mtime_ns && !memcmp(r->d[j].v.vid, d->v.vid, 16);
        if (cnt >= rq) {
            r->sel = (int)i;
            return OL_STORE_EDELMARK;
        }
    }
    return notobj >= rq ? -ENOENT : -EIO;
}

/* ListObjectVersions: the drive whose valid copy of the file has the newest
 * latest version (any type), or -errno as choose(). */
static int choose_raw(struct ol_sreq *r)
{
    int best = -1;
    for (unsigned i = 0; i < r->n; i++) {
        const struct ol_sdrv *d = &r->d[i];
        if ((d->ms == OL_SE_M_OK || d->ms == OL_SE_M_OTHER) && d->v.type &&
            (best < 0 || d->v.mtime_ns > r->d[best].v.mtime_ns))
            best = (int)i;
    }
    if (best >= 0)
        return best;
    int st = choose(r);
    return st < 0 && st != OL_STORE_EDELMARK ? st : -EIO;
}

static void setup(struct ol_sreq *r, int sel)
{
    const struct ol_meta_version *v = &r->d[sel].v;
    r->sel = sel;
    r->k = v->ec.k;
    r->m = v->ec.m;
    r->ec = r->c->ec[r->m];
    r->B = v->ec.block_size;
    r->SD = (uint64_t)r->k * r->B;
    r->size = v->size;
    r->inline_obj = v->has_inline;
    memcpy(r->dist, v->ec.dist, r->n);
    for (unsigned p = 0; p < r->n; p++)
        r->drv_of[r->dist[p]] = (uint8_t)p;
    memcpy(r->ddir, v->data_dir, 16);
    for (unsigned p = 0; p < r->n; p++) {
        struct ol_sdrv *d = &r->d[p];
        if (!d->err && (d->ms == OL_SE_M_NOBUCKET || d->ms == OL_SE_M_ERR))
            d->err = -ENODEV; /* not worth opening a shard on */
    }
}

/* ---- stripes ------------------------------------------------------------------------------- */

/* (Part-relative offsets from here on.) */
static uint64_t slot_end(const struct ol_sreq *r, const struct ol_sslot *sl)
{
    uint64_t e = sl->stripe * r->SD + sl->len;
    return e < r->pend ? e : r->pend;
}

/* The data shards of stripe s that hold bytes of the range. */
static uint32_t want_mask(const struct ol_sreq *r, const struct ol_sslot *sl)
{
    uint64_t base = sl->stripe * r->SD;
    uint64_t lo = (r->poff > base ? r->poff : base) - base;
    uint64_t hi = slot_end(r, sl) - base;
    unsigned j0 = (unsigned)(lo / sl->blen), j1 = (unsigned)((hi - 1) / sl->blen);
    uint32_t w = 0;
    for (unsigned j = j0; j <= j1; j++)
        w |= 1u << j;
    return w;
}

static void rebuild(struct ol_sreq *r, struct ol_sslot *sl, uint32_t present, uint32_t missing)
{
    if (ol_ec_reconstruct(r->ec, sl->blen, sl->sp, present, missing) < 0) {
        sl->state = OL_SE_SL_FAILED;
        return;
    }
    r->c->st.reads_reconstructed++;
    r->healed = true;
    sl->state = OL_SE_SL_READY;
}

/* Reads what the stripe still needs; READY, FAILED, or reads in flight. */
static void read_more(struct ol_sreq *r, unsigned si)
{
    struct ol_sslot *sl = &r->slot[si];
    uint32_t st = stride(r);
    for (;;) {
        uint32_t missing = sl->want & ~sl->good;
        if (!missing) {
            sl->state = OL_SE_SL_READY;
            return;
        }
        if (ol_se_popcount(sl->good) >= r->k) {
            if (!sources_in_slot(r, sl))
                continue;
            return rebuild(r, sl, sl->good, missing);
        }
        uint32_t pick = sl->want & ~sl->tried;
        if (!pick) { /* sources for a rebuild: data shards first, then parity */
            unsigned need = r->k - ol_se_popcount(sl->good);
            for (unsigned i = 0; i < r->n && need; i++)
                if (!(sl->tried & (1u << i))) {
                    pick |= 1u << i;
                    need--;
                }
        }
        if (!pick) {
            sl->state = OL_SE_SL_FAILED;
            return;
        }
        for (unsigned i = 0; i < r->n; i++) {
            if (!(pick & (1u << i)))
                continue;
            sl->tried |= 1u << i;
            unsigned pos = r->drv_of[i];
            struct ol_sdrv *d = &r->d[pos];
            if (d->err || d->fd < 0)
                continue;
            if (drive_map(r, d) && map_block(r, sl, i, d))
                continue; /* decided where it lies */
            struct ol_sop *w = &r->w[si][pos];
            ol_se_issue(r, w, ol_se_start(r, pos, &w->op,
                                          &(struct ol_store_rstep){
                                              .code = OL_RSTEP_READ, .fd = d->fd,
                                              .buf = sl->base + (size_t)i * st,
                                              .len = OL_BITROT_HDR_SIZE + sl->blen,
                                              .off = sl->stripe * st}));
            sl->pending++;
        }
        if (sl->pending)
            return;
    }
}

static void start_stripe(struct ol_sreq *r, unsigned si, uint64_t s)
{
    struct ol_sslot *sl = &r->slot[si];
    uint64_t left = r->psize - s * r->SD;
    sl->stripe = s;
    sl->len = (uint32_t)(left < r->SD ? left : r->SD);
    sl->blen = (uint32_t)ol_ec_shard_len(sl->len, r->k);
    sl->want = want_mask(r, sl);
    sl->good = sl->tried = 0;
    sl->pending = 0;
    sl->state = OL_SE_SL_IO;
    uint32_t st = stride(r);
    for (unsigned i = 0; i < r->n; i++)
        sl->sp[i] = sl->base + (size_t)i * st + OL_BITROT_HDR_SIZE;
    read_more(r, si);
}

void ol_se_get_slot(struct ol_sreq *r, unsigned si, unsigned pos, int res)
{
    struct ol_sslot *sl = &r->slot[si];
    struct ol_sdrv *d = &r->d[pos];
    unsigned i = r->dist[pos];
    if (!r->ended) {
        uint8_t *hdr = sl->base + (size_t)i * stride(r);
        if (res == (int)(OL_BITROT_HDR_SIZE + sl->blen)) {
            block_checked(r, sl, i,
                          ol_bitrot_verify(ol_se_part_seed(r->ddir, r->pnum, i), sl->stripe, hdr,
                                           sl->sp[i], sl->blen) == 0);
        } else {
            r->c->st.read_errors++;
            r->healed = r->heal_q = true;
            if (!d->err)
                d->err = res < 0 ? res : -EIO; /* short: a truncated file */
        }
    }
    if (--sl->pending == 0 && !r->ended)
        read_more(r, si);
    ol_se_advance(r);
}

/* Starts reads into the free slots, in stripe order. */
static void fill(struct ol_sreq *r)
{
    if (r->inline_obj || r->pend <= r->poff)
        return;
    uint64_t last = (r->pend - 1) / r->SD;
    while (r->rd_next <= last) {
        unsigned si = (unsigned)(r->rd_next % OL_STORE_GET_SLOTS);
        if (r->slot[si].state != OL_SE_SL_FREE)
            return;
        start_stripe(r, si, r->rd_next++);
    }
}

/* The inline object's one stripe: the shards are the metadata files' inline data. */
static void inline_stripe(struct ol_sreq *r)
{
    struct ol_sslot *sl = &r->slot[0];
    const struct ol_meta_version *sv = &r->d[r->sel].v;
    sl->stripe = 0;
    sl->len = (uint32_t)r->size;
    sl->blen = (uint32_t)ol_ec_shard_len(r->size, r->k);
    sl->want = want_mask(r, sl);
    uint32_t present = 0, st = stride(r);
    for (unsigned i = 0; i < r->n; i++)
        sl->sp[i] = sl->base + (size_t)i * st + OL_BITROT_HDR_SIZE;
    for (unsigned p = 0; p < r->n; p++) {
        const struct ol_meta_version *v = &r->d[p].v;
        unsigned idx = v->ec.index;
        if (r->d[p].ms != OL_SE_M_OK || !ol_se_same_version(v, sv) || !v->has_inline ||
            v->inline_data.len != sl->blen || idx >= r->n || (present & (1u << idx)))
            continue;
        sl->sp[idx] = (uint8_t *)(uintptr_t)v->inline_data.p;
        present |= 1u << idx;
    }
    r->rd_next = 1;
    uint32_t missing = sl->want & ~present;
    if (!missing) {
        sl->state = OL_SE_SL_READY;
        return;
    }
    if (ol_se_popcount(present) < r->k) {
        sl->state = OL_SE_SL_FAILED;
        return;
    }
    rebuild(r, sl, present, missing);
}

/* ---- the step function ------------------------------------------------------------------------ */

/* Counts the request once its outcome is known: before EV_DONE, or at
 * ol_get_end (HEAD, or a GET ended early). */
static void account(struct ol_sreq *r)
{
    if (r->counted)
        return;
    r->counted = true;
    struct ol_store_stats *st = &r->c->st;
    if (r->meta_sent) {
        st->gets++;
        st->get_bytes += r->delivered;
    }
    if (r->status == -EIO)
        st->get_errors++;
    if (r->healed)
        st->needs_heal++;
    if (r->heal_q)
        ol_se_heal_queue(r);
}

static bool release(struct ol_sreq *r)
{
    account(r);
    ol_se_req_put(r);
    return true;
}

/* Starts phase `phase`: the files open on the drives are closed. */
static void close_phase(struct ol_sreq *r, uint8_t phase)
{
    r->phase = phase;
    ol_se_phase_begin(r);
    for (unsigned p = 0; p < r->n; p++) {
        struct ol_sdrv *d = &r->d[p];
        map_release(r, d); /* the caller holds no slice now */
        if (d->fd < 0)
            continue;
        ol_se_drive_begin(d);
        d->step = X_CLOSE;
        ol_se_close(d, d->fd);
        d->fd = -1;
    }
    ol_se_phase_started(r);
}

static bool ended(struct ol_sreq *r)
{
    if (r->inflight)
        return false;
    if (r->phase != GPH_CLOSE) {
        close_phase(r, GPH_CLOSE);
        return false;
    }
    return release(r);
}

/* Opens the current part's shard file on every drive still usable. */
static void open_part(struct ol_sreq *r)
{
    r->phase = GPH_OPEN;
    ol_se_open_phase(r, r->p_part, O_OPEN);
}

/* The range goes on in a later part: close this part's files (then
 * GPH_SWITCH's step opens the next). Every slot is free here: the last
 * stripe of the part was handed out and released. */
static void switch_part(struct ol_sreq *r)
{
    r->pbase += r->psize;
    r->pi++;
    part_seek(r);
    close_phase(r, GPH_SWITCH);
}

/* Hands out the next slice, or EV_DONE, when the caller wants one. */
static bool pump(struct ol_sreq *r)
{
    if (!r->want)
        return false;
    if (r->hold >= 0) {
        struct ol_sslot *sl = &r->slot[r->hold];
        if (r->dl - r->pbase >= slot_end(r, sl))
            sl->state = OL_SE_SL_FREE;
        r->hold = -1;
    }
    if (r->dl >= r->end) {
        r->want = false;
        r->done_sent = true;
        account(r);
        ol_se_emit(r, OL_STORE_EV_DONE, 0);
        return false;
    }
    if (r->dl >= r->pbase + r->pend) {
        switch_part(r);
        return false;
    }
    fill(r);
    uint64_t ldl = r->dl - r->pbase;
    uint64_t s = ldl / r->SD;
    unsigned si = r->inline_obj ? 0 : (unsigned)(s % OL_STORE_GET_SLOTS);
    struct ol_sslot *sl = &r->slot[si];
    if (sl->stripe != s || (sl->state != OL_SE_SL_READY && sl->state != OL_SE_SL_FAILED))
        return false; /* reads in flight */
    if (sl->state == OL_SE_SL_FAILED) {
        r->want = false;
        r->done_sent = true;
        r->status = -EIO;
        account(r);
        ol_se_emit(r, OL_STORE_EV_DONE, -EIO);
        return false;
    }
    uint64_t o = ldl - s * r->SD;
    uint32_t j = (uint32_t)(o / sl->blen), within = (uint32_t)(o % sl->blen);
    uint64_t n = sl->blen - within;
    if (n > r->pend - ldl)
        n = r->pend - ldl;
    if (n > sl->len - o)
        n = sl->len - o;
    r->dl += n;
    r->delivered += n;
    r->hold = (int)si;
    r->want = false;
    struct ol_store_event ev = {.type = OL_STORE_EV_DATA, .data = sl->sp[j] + within, .len = n};
    r->cbdepth++;
    r->cb(r->ud, &ev);
    r->cbdepth--;
    return false;
}

bool ol_se_get_step(struct ol_sreq *r)
{
    if (r->active)
        return false;
    if (r->ended)
        return ended(r);
    switch (r->phase) {
    case GPH_META: {
        int sel = r->raw ? choose_raw(r) : choose(r);
        if (sel < 0) {
            if (!ol_se_can_emit(r))
                return false;
            r->status = sel;
            r->phase = GPH_FAILED;
            r->done_sent = true;
            account(r);
            struct ol_store_event ev = {.type = OL_STORE_EV_DONE, .status = sel};
            if (sel == OL_STORE_EDELMARK)
                ev.version = &r->d[r->sel].v;
            r->cbdepth++;
            r->cb(r->ud, &ev);
            r->cbdepth--;
            return false;
        }
        if (r->raw) {
            if (!ol_se_can_emit(r))
                return false;
            r->phase = GPH_FAILED; /* nothing to read: waiting for ol_get_end */
            r->done_sent = true;
            const struct ol_sdrv *d = &r->d[sel];
            struct ol_store_event ev = {.type = OL_STORE_EV_META, .version = &d->v,
                                        .data = d->mbuf, .len = d->mlen};
            r->cbdepth++;
            r->cb(r->ud, &ev);
            r->cbdepth--;
            return false;
        }
        setup(r, sel);
        r->phase = GPH_WAIT;
        r->again = true;
        return false;
    }
    case GPH_WAIT:
        if (!r->meta_sent) {
            if (!ol_se_can_emit(r))
                return false;
            r->meta_sent = true;
            struct ol_store_event ev = {.type = OL_STORE_EV_META, .version = &r->d[r->sel].v};
            r->cbdepth++;
            r->cb(r->ud, &ev);
            r->cbdepth--;
            return false;
        }
        if (!r->want)
            return false;
        r->pi = 0;
        r->pbase = 0;
        part_seek(r);
        if (r->inline_obj || r->end == 0) {
            if (r->inline_obj && r->end > 0)
                inline_stripe(r);
            r->phase = GPH_DATA;
            r->again = true;
            return false;
        }
        open_part(r);
        return false;
    case GPH_SWITCH:
        for (unsigned p = 0; p < r->n; p++) /* a new file on each drive */
            if (r->d[p].err != -ENODEV)
                r->d[p].err = 0;
        open_part(r);
        return false;
    case GPH_OPEN:
        r->phase = GPH_DATA;
        r->rd_next = r->poff / r->SD;
        /* fall through */
    case GPH_DATA:
        return pump(r);
    default: /* FAILED: waiting for ol_get_end */
        return false;
    }
}

/* ---- API ------------------------------------------------------------------------------------- */

int ol_get_begin(struct ol_store_core *c, const struct ol_get_args *a, ol_store_cb cb, void *ud,
                 struct ol_get **out)
{
    *out = NULL;
    struct ol_sreq *r = ol_se_req_get(c, OL_SE_GET, cb, ud);
    if (!r)
        return -EBUSY;
    ol_se_names(r, a->bucket, a->key);
    ol_se_drives_init(r);
    r->off = a->offset;
    r->rlen = a->length;
    r->raw = a->raw;
    r->map_ok = a->by_ref && ol_mapguard_init() == 0;
    if (a->vid) {
        r->has_vid = true;
        memcpy(r->want_vid, a->vid, 16);
    }
    r->phase = GPH_META;
    r->in_api = true;
    ol_se_open_phase(r, r->p_meta, M_OPEN);
    r->in_api = false;
    *out = (struct ol_get *)r;
    return 0;
}

void ol_get_set_range(struct ol_get *g, uint64_t offset, int64_t length)
{
    struct ol_sreq *r = &g->r;
    if (r->started)
        return;
    r->off = offset;
    r->rlen = length;
}

int ol_get_set_part(struct ol_get *g, uint32_t number)
{
    struct ol_sreq *r = &g->r;
    if (!r->meta_sent || r->started || r->ended || r->done_sent)
        return -EINVAL;
    uint64_t off, len;
    if (ol_store_part_range(&r->d[r->sel].v, number, &off, &len) < 0)
        return -ENOENT;
    r->off = off;
    r->rlen = (int64_t)len;
    return 0;
}

int ol_get_next(struct ol_get *g)
{
    struct ol_sreq *r = &g->r;
    if (r->ended || r->done_sent || !r->meta_sent || r->want)
        return -EINVAL;
    if (!r->started) {
        if (r->off == 0 && r->rlen < 0) {
            r->end = r->size;
        } else {
            if (r->rlen == 0 || r->off >= r->size)
                return -ERANGE;
            uint64_t e = r->rlen < 0 ? r->size : r->off + (uint64_t)r->rlen;
            r->end = e < r->size && e > r->off ? e : r->size;
        }
        r->dl = r->off;
        r->started = true;
    }
    r->want = true;
    ol_se_advance(r);
    return 0;
}

void ol_get_end(struct ol_get *g)
{
    struct ol_sreq *r = &g->r;
    if (r->ended)
        return;
    r->ended = true;
    r->want = false;
    account(r);
    ol_se_advance(r);
}
