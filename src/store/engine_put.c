/*
 * engine_put.c - streaming PUT: stripes encoded into the request's slots
 * and written to tmp shard files while the body arrives, then the commit
 * of engine.h's header (fsync, rename of the data dir, metadata written
 * and renamed, quorum, old data removed or everything undone).
 *
 * Phases (r->phase), each waiting for every drive's steps to end:
 *   PREP    statx bucket; create tmp/<tid>.part, fallocate its size (a
 *           PUT's statx, then the creation of tmp/<tid>.meta, run beside
 *           the file's steps: prep_side)
 *   DATA    slot writes (no drive steps; whole pages with O_DIRECT where the
 *           drive takes it, "Direct I/O" below; pages of a filling stripe
 *           already, when the drives are idle: "Ahead writes"); ends when
 *           finished and idle
 *   COMMIT  under the key's lock: mkdirs (<obj>, and <ab> only when
 *           missing), rename the file to
 *           <obj>/<ddir>.data (a flat version: no data dir), read old meta,
 *           write the new one to tmp (a PUT's, while the mkdir and the
 *           rename run, as if the key were new: "the early write"); then
 *           "the fan": with the syncfs group
 *           commit (the default, syncer.h) one barrier, the files closed
 *           beside it (on XFS with O_DIRECT no barrier there, the files
 *           only closed: "the ordered commit");
 *           with store_sync = fsync the file's fdatasync, the new meta's
 *           fsync and the fsyncs of the new directories' parents, all at
 *           once; then rename the meta into place and a second barrier (or
 *           fsync <obj>: one fsync makes both renames durable). Two rounds
 *           of syncs per drive, the least that orders data before its name.
 *   CLEAN   old data dirs removed; failed drives' leftovers undone
 *   UNDO    every drive put back (below quorum)
 *   ABORT   like UNDO, for ol_put_abort; no callback at the end
 *
 * Two more modes of the same request (r->mode, engine.h "multipart uploads"):
 *   PART      UploadPart: PREP statx's the upload record and creates
 *             tmp/<tid>.part (no tmp dir); SYNC writes the part record
 *             after the blocks, fdatasyncs and closes the file; COMMIT
 *             renames it over <upload>/data/part.<n> and fsyncs data/;
 *             UNDO keeps parts already renamed.
 *   COMPLETE  no data: MVAL (engine_mpu.c: records read and checked) ->
 *             MTRIM (unlisted parts unlinked) -> COMMIT with <upload>/data
 *             as the directory renamed into the object -> CLEAN (then the
 *             upload removed on every drive) or UNDO (data dir renamed back).
 */
#include "store/engine_int.h"

#include "store/bitrot.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>

enum { PH_PREP = 1, PH_DATA, PH_SYNC, PH_COMMIT, PH_CLEAN, PH_UNDO, PH_ABORT, PH_MVAL,
       PH_MTRIM, PH_LOCK };

enum {
    P_STAT = 1, P_STAT2, P_OPEN, P_FALLOC,
    S_TRAIL, S_SYNC, S_CLOSE, C_PRENAME,
    C_MKAB, C_MKOBJ, C_RENAME, C_MOPEN, C_MREAD, C_MCLOSE,
    C_TRECLOSE, C_TOPEN, C_TWRITE, C_FANSYNC, C_MRENAME, C_OSYNCED, C_FAILCLOSE,
    K_UNLINK,
    U_STEP, U_TOPEN, U_TWRITE, U_TSYNC, U_TCLOSE,
};

/* A slot op's step outside DATA (fst[k]): the fan's (FS_OPEN..FS_CLOSE),
 * PREP's open of the new metadata file (FS_TMETA, prep_side), the early
 * write (FS_EARLY). */
enum { FS_OPEN = 1, FS_SYNC, FS_CLOSE, FS_TMETA, FS_EARLY };
/* The early write's state (d->early). */
enum { EW_RUN = 1, EW_OK, EW_BAD };

#define OL_SE_RETRIES 3

static uint32_t stride(const struct ol_sreq *r) { return OL_BITROT_HDR_SIZE + r->B; }

/* Shard j's record (8-byte header, then its block) in slot sl. Each shard
 * has a page-aligned region of the slot; the record starts sl->pre bytes
 * in, where the file offset of the record falls in its page, so that the
 * region's pages are the file's pages (O_DIRECT writes them as they are). */
static uint8_t *rec(const struct ol_sreq *r, const struct ol_sslot *sl, unsigned j)
{
    return sl->base + (size_t)j * r->c->s->region + sl->pre;
}

static unsigned healthy(const struct ol_sreq *r)
{
    unsigned n = 0;
    for (unsigned i = 0; i < r->n; i++)
        n += !r->d[i].err;
    return n;
}

/* Whether the drives without room are what the write quorum lacks. */
static bool full(const struct ol_sreq *r)
{
    unsigned nospc = 0;
    for (unsigned i = 0; i < r->n; i++)
        nospc += r->d[i].err == -ENOSPC || r->d[i].err == -EDQUOT;
    return nospc && healthy(r) + nospc >= r->wq;
}

/* The status of a write that lost its quorum, whatever step it was at:
 * OL_STORE_EFULL when what it lacks is room, else -EIO. */
static int lost(const struct ol_sreq *r) { return full(r) ? OL_STORE_EFULL : -EIO; }

/* ---- slots -------------------------------------------------------------------------- */

static void slot_init(struct ol_sreq *r, struct ol_sslot *sl, uint64_t stripe)
{
    uint64_t start = stripe * r->SD;
    uint64_t left = r->size - start;
    sl->stripe = stripe;
    sl->len = (uint32_t)(left < r->SD ? left : r->SD);
    sl->blen = (uint32_t)ol_ec_shard_len(sl->len, r->k);
    sl->fill = 0;
    sl->pre = (uint32_t)(stripe * stride(r) % OL_SE_PAGE);
    sl->tails = 0;
    sl->ahead = 0;
    sl->aenc = 0;
    memset(sl->aoff, 0, sizeof sl->aoff);
    sl->state = OL_SE_SL_FILL;
}

/* Makes a free slot the one being filled, when data is still to come. */
static void next_fill(struct ol_sreq *r)
{
    if (r->cur >= 0 || r->next_stripe >= r->nstripes)
        return;
    for (unsigned i = 0; i < OL_SE_SLOTS; i++)
        if (r->slot[i].state == OL_SE_SL_FREE) {
            r->cur = (int)i;
            slot_init(r, &r->slot[i], r->next_stripe++);
            return;
        }
}

/* Bytes ol_put_write can take now. */
static uint64_t space(const struct ol_sreq *r)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < OL_SE_SLOTS; i++) {
        const struct ol_sslot *sl = &r->slot[i];
        if ((int)i == r->cur)
            n += sl->len - sl->fill;
        else if (sl->state == OL_SE_SL_FREE)
            n += r->SD;
    }
    return n;
}

static bool ahead_wanted(const struct ol_sreq *r);

static bool want_pause(const struct ol_sreq *r)
{
    if (r->phase == PH_PREP && ahead_wanted(r) && r->written && r->written < r->size)
        return true; /* the files first, for the ahead writes ("Ahead writes") */
    uint64_t left = r->size - r->written;
    uint64_t need = left < OL_STORE_WRITE_MAX ? left : OL_STORE_WRITE_MAX;
    return left && space(r) < need;
}

/* Zero-fills the padding, computes parity, seals each shard block. */
static void seal(struct ol_sreq *r, struct ol_sslot *sl)
{
    uint32_t blen = sl->blen;
    if (blen) {
        uint8_t *data[OL_EC_MAX_DATA], *parity[OL_EC_MAX_PARITY];
        for (unsigned j = 0; j < r->k; j++) {
            uint64_t start = (uint64_t)j * blen;
            uint8_t *p = rec(r, sl, j) + OL_BITROT_HDR_SIZE;
            if (start + blen > sl->len) {
                uint32_t from = sl->len > start ? (uint32_t)(sl->len - start) : 0;
                memset(p + from, 0, blen - from);
            }
            data[j] = p + sl->aenc;
        }
        for (unsigned i = 0; i < r->m; i++)
            parity[i] = rec(r, sl, r->k + i) + OL_BITROT_HDR_SIZE + sl->aenc;
        ol_ec_encode(r->ec, blen - sl->aenc, data, parity); /* the rest: ahead_encode */
        if (!r->inline_obj)
            for (unsigned i = 0; i < r->n; i++) {
                uint8_t *b = rec(r, sl, i);
                ol_bitrot_seal(ol_se_part_seed(r->ddir, r->pnum, i), sl->stripe,
                               b + OL_BITROT_HDR_SIZE, blen, b);
            }
    }
    sl->state = OL_SE_SL_SEALED;
}

static bool slots_io(const struct ol_sreq *r)
{
    for (unsigned i = 0; i < OL_SE_SLOTS; i++)
        if (r->slot[i].state == OL_SE_SL_IO || r->slot[i].ahead)
            return true;
    return false;
}

static bool slots_idle(const struct ol_sreq *r)
{
    for (unsigned i = 0; i < OL_SE_SLOTS; i++)
        if (r->slot[i].state == OL_SE_SL_IO || r->slot[i].state == OL_SE_SL_SEALED ||
            r->slot[i].ahead)
            return false;
    return true;
}

/*
 * Direct I/O. A drive that takes O_DIRECT (ol_store_drive.dio) has its file
 * opened with it, and every write is of whole pages from the slot's
 * page-aligned regions. A record rarely ends on a page boundary, so each
 * stripe's write stops at the last one: the bytes past it go to the
 * drive's carry (r->carry, one page per drive) and are written by the next
 * stripe's write, which starts on that page (they are copied into the room
 * before its record). A PUT's file ends in zeros up to a page boundary
 * (bitrot.h; PREP reserves it rounded up, heal writes it so too), so its
 * last stripe writes its last page whole: the file leaves nothing to write
 * back, and a barrier's syncfs has no page of it to write (mixed load: a
 * loaded PUT's p99 −10 %). A part's file ends exactly where its framing
 * says, for the record after its blocks: after the last stripe's write
 * O_DIRECT is turned off (fcntl), and the bytes past the last page and the
 * record (SYNC) are written buffered. Direct writes leave no dirty pages
 * to the fdatasync and skip the page-cache copy.
 */
static bool pad_last(const struct ol_sreq *r) { return r->mode == OL_SE_MODE_PUT; }

static int dio_off(struct ol_sdrv *d)
{
    if (!d->dio)
        return 0;
    d->dio = false;
    return fcntl(d->fd, F_SETFL, 0) < 0 ? -errno : 0;
}

static void slot_write(struct ol_sreq *r, unsigned si, struct ol_sdrv *d, const uint8_t *buf,
                       uint32_t len, uint64_t off)
{
    struct ol_sslot *sl = &r->slot[si];
    struct ol_sop *w = &r->w[si][d->pos];
    sl->wlen[d->pos] = len;
    r->c->swr++;
    ol_se_issue(r, w, ol_se_start(r, d->pos, &w->op,
                                  &(struct ol_store_rstep){.code = OL_RSTEP_WRITE, .fd = d->fd,
                                                           .wbuf = buf, .len = len, .off = off}));
}

/*
 * Ahead writes. A lone PUT's body arrives over a millisecond or two, and
 * its stripe's writes used to start only when the stripe was sealed, all
 * of them then: on a drive that takes ~1 ms to write anything and more
 * for each MiB, the body's arrival and the writes ran one after the other.
 * While a slot fills, the whole pages of a record whose bytes are final
 * are written now, on the drive's own ops for this (r->wa, OL_SE_AHEAD of
 * them, one always kept free for the head below): a data shard's as its
 * block's bytes come in, a parity shard's as the parity is encoded range
 * by range (it needs the bytes of every data block at those offsets:
 * ahead_encode). What the seal leaves is the record's first page (the
 * carry and the header, whose checksum covers the whole block: the
 * "head", on a wa op) and the pages after the last ahead one (on the
 * slot's op, as any stripe write).
 *
 * Only for a PUT's file on a drive taking O_DIRECT (a part's tail is
 * written buffered, after its last page), and only while no sealed
 * stripe's writes run on this core (c->swr): with other writes queued the
 * drive is not idle, and more, smaller writes would only cost CPU (PUT 64
 * MiB, many PUTs at once). Each ahead write is at least OL_SE_AHEAD_MIN.
 * The file's bytes are the same as with one write per stripe. A slot is
 * not free (not reused) while any of its ahead writes runs: submit counts
 * them in its pending writes, and before that slots_io() sees them.
 *
 * The files come first: PREP's creates run on the ring's io-wq workers,
 * which share the core with this thread, and while the body's bytes kept
 * it busy hashing they waited their turn (PREP ended at 0.7-1.3 ms of a
 * 1.7 ms body, after it for a third of lone PUTs, and then no page could
 * go ahead). So while the drives are idle, ol_put_write asks the writer to
 * wait (want_pause) after the first bytes until PREP is done (0.3 ms):
 * the client's bytes wait in the socket meanwhile.
 */
#define OL_SE_AHEAD_MIN (128u * 1024u)

/* A PUT's file (not inline), while no sealed stripe's writes run on the core. */
static bool ahead_wanted(const struct ol_sreq *r)
{
    return pad_last(r) && !r->inline_obj && !r->c->swr;
}

/* Start of a record's ahead pages: the first page boundary after its header. */
static uint32_t ahead_p0(const struct ol_sslot *sl)
{
    return (sl->pre + OL_BITROT_HDR_SIZE + OL_SE_PAGE - 1) & ~(OL_SE_PAGE - 1);
}

/* Bytes of shard `shard`'s block in sl that are final before the seal. */
static uint32_t ahead_ready(const struct ol_sreq *r, const struct ol_sslot *sl, unsigned shard)
{
    if (shard >= r->k)
        return sl->aenc;
    uint64_t start = (uint64_t)shard * sl->blen;
    if (sl->fill <= start)
        return 0;
    uint64_t x = sl->fill - start;
    return x < sl->blen ? (uint32_t)x : sl->blen;
}

/* Encodes the parity of the block offsets every data block has final bytes
 * for (those before the last data block's fill: the blocks before it are
 * whole then), up to a page boundary of the records; ISA-L codes each
 * offset on its own, so the seal encodes only the rest. */
static void ahead_encode(struct ol_sreq *r, struct ol_sslot *sl)
{
    if (!r->m)
        return;
    uint32_t base = sl->pre + OL_BITROT_HDR_SIZE;
    uint32_t end = (base + ahead_ready(r, sl, r->k - 1)) & ~(OL_SE_PAGE - 1);
    if (end <= base || end - base < sl->aenc + OL_SE_AHEAD_MIN)
        return;
    end -= base;
    uint8_t *data[OL_EC_MAX_DATA], *parity[OL_EC_MAX_PARITY];
    for (unsigned j = 0; j < r->k; j++)
        data[j] = rec(r, sl, j) + OL_BITROT_HDR_SIZE + sl->aenc;
    for (unsigned i = 0; i < r->m; i++)
        parity[i] = rec(r, sl, r->k + i) + OL_BITROT_HDR_SIZE + sl->aenc;
    ol_ec_encode(r->ec, end - sl->aenc, data, parity);
    sl->aenc = end;
}

/* Drive pos's free wa op (-1: none), and how many are busy. */
static int ahead_op(const struct ol_sreq *r, unsigned pos, unsigned *busy)
{
    int k = -1;
    *busy = 0;
    for (unsigned i = OL_SE_AHEAD; i-- > 0;) {
        if (r->aw[pos][i].kind == OL_SE_AW_FREE)
            k = (int)i;
        else
            ++*busy;
    }
    return k;
}

/* Writes [from, to) of drive d's record page frame in slot si on its wa op
 * k: an ahead write, or (head) the first pages of a sealed stripe's. */
static void ahead_write(struct ol_sreq *r, unsigned si, struct ol_sdrv *d, unsigned k,
                        uint32_t from, uint32_t to, bool head)
{
    struct ol_sslot *sl = &r->slot[si];
    struct ol_sawr *a = &r->aw[d->pos][k];
    struct ol_sop *w = &r->wa[d->pos][k];
    uint8_t *page = rec(r, sl, d->shard) - sl->pre;
    a->len = to - from;
    a->slot = (uint8_t)si;
    a->kind = head ? OL_SE_AW_HEAD : OL_SE_AW_AHEAD;
    if (head) {
        r->c->swr++;
    } else {
        sl->ahead++;
    }
    ol_se_issue(r, w, ol_se_start(r, d->pos, &w->op,
                                  &(struct ol_store_rstep){
                                      .code = OL_RSTEP_WRITE, .fd = d->fd, .wbuf = page + from,
                                      .len = to - from,
                                      .off = sl->stripe * stride(r) - sl->pre + from}));
}

/* Starts the ahead writes the filling slot si has pages for. */
static void ahead_kick(struct ol_sreq *r, unsigned si)
{
    struct ol_sslot *sl = &r->slot[si];
    if (r->phase != PH_DATA || r->status < 0 || r->aborted || !ahead_wanted(r) ||
        sl->state != OL_SE_SL_FILL)
        return;
    ahead_encode(r, sl);
    uint32_t base = sl->pre + OL_BITROT_HDR_SIZE;
    for (unsigned pos = 0; pos < r->n; pos++) {
        struct ol_sdrv *d = &r->d[pos];
        if (d->err || d->fd < 0 || !d->dio)
            continue;
        uint32_t end = (base + ahead_ready(r, sl, d->shard)) & ~(OL_SE_PAGE - 1);
        uint32_t from = sl->aoff[pos] ? sl->aoff[pos] : ahead_p0(sl);
        unsigned busy;
        int k = ahead_op(r, pos, &busy);
        if (end < from + OL_SE_AHEAD_MIN || k < 0 || busy + 1 >= OL_SE_AHEAD)
            continue; /* one op stays free for the head */
        ahead_write(r, si, d, (unsigned)k, from, end, false);
        sl->aoff[pos] = end;
    }
}

/* Drive d's writes of sealed slot si, [0, end) of its record's page frame
 * less the ahead pages: one write, or the head and the rest. Returns how
 * many. A free wa op for the head is always there: ahead writes leave one,
 * and only the one slot filling has them while no sealed stripe's writes
 * (a head among them) run; were none free, the record would be written
 * whole (the ahead pages again, the same bytes). */
static unsigned dio_final(struct ol_sreq *r, unsigned si, struct ol_sdrv *d, uint32_t end)
{
    struct ol_sslot *sl = &r->slot[si];
    uint8_t *page = rec(r, sl, d->shard) - sl->pre;
    uint64_t fo = sl->stripe * stride(r) - sl->pre;
    uint32_t e = sl->aoff[d->pos];
    unsigned busy;
    int k = e ? ahead_op(r, d->pos, &busy) : -1;
    if (k < 0) {
        if (!end)
            return 0; /* all of it is in the carry, for the next stripe's write */
        slot_write(r, si, d, page, end, fo);
        return 1;
    }
    ahead_write(r, si, d, (unsigned)k, 0, ahead_p0(sl), true);
    if (end == e)
        return 1;
    slot_write(r, si, d, page + e, end - e, fo + e);
    return 2;
}

/* The last stripe's bytes of drive d past its last whole page. */
static void tail_write(struct ol_sreq *r, unsigned si, struct ol_sdrv *d)
{
    struct ol_sslot *sl = &r->slot[si];
    uint32_t all = sl->pre + OL_BITROT_HDR_SIZE + sl->blen, whole = all & ~(OL_SE_PAGE - 1);
    uint8_t *page = rec(r, sl, d->shard) - sl->pre;
    slot_write(r, si, d, page + whole, all - whole, sl->stripe * stride(r) - sl->pre + whole);
}

/* Writes the sealed slots, oldest stripe first (only in DATA, while healthy). */
static void submit(struct ol_sreq *r)
{
    if (r->phase != PH_DATA || r->status < 0 || r->aborted)
        return;
    for (;;) {
        struct ol_sslot *sl = NULL;
        unsigned si = 0;
        for (unsigned i = 0; i < OL_SE_SLOTS; i++)
            if (r->slot[i].state == OL_SE_SL_SEALED && (!sl || r->slot[i].stripe < sl->stripe)) {
                sl = &r->slot[i];
                si = i;
            }
        if (!sl)
            return;
        uint32_t len = OL_BITROT_HDR_SIZE + sl->blen;
        uint64_t off = sl->stripe * stride(r);
        bool last = sl->stripe + 1 == r->nstripes;
        unsigned live = 0;
        sl->state = OL_SE_SL_IO;
        sl->tails = 0;
        sl->pending = sl->ahead; /* its ahead writes count until they end */
        /* a PUT's records are written in whole pages to the end */
        uint32_t wend = (sl->pre + len) & ~(OL_SE_PAGE - 1);
        if (last && pad_last(r))
            wend = sl->pre + len + ol_bitrot_pad(off + len);
        for (unsigned pos = 0; pos < r->n; pos++) {
            struct ol_sdrv *d = &r->d[pos];
            if (d->err || d->fd < 0)
                continue;
            live++;
            uint8_t *rp = rec(r, sl, d->shard);
            if (!d->dio) {
                uint32_t pad = last && pad_last(r) ? ol_bitrot_pad(off + len) : 0;
                memset(rp + len, 0, pad);
                slot_write(r, si, d, rp, len + pad, off);
                sl->pending++;
                continue;
            }
            uint8_t *page = rp - sl->pre, *carry = r->carry + (size_t)pos * OL_SE_PAGE;
            uint32_t all = sl->pre + len, whole = all & ~(OL_SE_PAGE - 1);
            memcpy(page, carry, sl->pre);
            memcpy(carry, page + whole, all - whole);
            if (pad_last(r)) { /* a PUT's: whole pages to the end (ahead writes above) */
                if (last)
                    memset(page + all, 0, wend - all);
                sl->pending += (uint8_t)dio_final(r, si, d, wend);
                continue;
            }
            if (whole) {
                slot_write(r, si, d, page, whole, off - sl->pre);
                if (last && all > whole)
                    sl->tails |= 1u << pos;
            } else if (last) { /* all of it is past the last page written */
                int e = dio_off(d);
                if (e < 0) {
                    d->err = e;
                    continue;
                }
                tail_write(r, si, d);
            } else {
                continue; /* in the carry, for the next stripe's write */
            }
            sl->pending++;
        }
        if (!live) {
            if (!sl->pending)
                sl->state = OL_SE_SL_FREE;
            r->status = lost(r);
            return;
        }
        if (!sl->pending) {
            sl->state = OL_SE_SL_FREE;
            next_fill(r);
        }
    }
}

static void fan_done(struct ol_sdrv *d, unsigned k, int res);
static void early_done(struct ol_sdrv *d, int res);
static void prep_stat_done(struct ol_sdrv *d, int res);
static void prep_half(struct ol_sdrv *d, int err);
static void early_start(struct ol_sdrv *d);
static void commit_meta(struct ol_sdrv *d);
static void commit_start(struct ol_sdrv *d);

/* One of sealed slot si's writes ended: the slot is free after the last. */
static void slot_end(struct ol_sreq *r, unsigned si)
{
    struct ol_sslot *sl = &r->slot[si];
    if (--sl->pending == 0) {
        sl->state = OL_SE_SL_FREE;
        if (r->status == 0 && healthy(r) < r->wq)
            r->status = lost(r);
        next_fill(r);
    }
    ol_se_advance(r);
}

/* Drive pos's wa op k ended: an ahead write or a head write. */
static void ahead_done(struct ol_sreq *r, unsigned k, unsigned pos, int res)
{
    struct ol_sawr *a = &r->aw[pos][k];
    unsigned si = a->slot;
    uint8_t kind = a->kind;
    struct ol_sslot *sl = &r->slot[si];
    struct ol_sdrv *d = &r->d[pos];
    a->kind = OL_SE_AW_FREE;
    if (res != (int)a->len) {
        if (!d->err)
            d->err = res < 0 ? res : -EIO;
    } else {
        r->c->st.direct_bytes += (uint64_t)res;
        if (kind == OL_SE_AW_AHEAD)
            r->c->st.ahead_bytes += (uint64_t)res;
    }
    if (kind == OL_SE_AW_HEAD) { /* the first pages of a sealed stripe's */
        r->c->swr--;
        return slot_end(r, si);
    }
    sl->ahead--;
    if (sl->state == OL_SE_SL_IO)
        return slot_end(r, si); /* sealed since: submit counted it */
    ahead_kick(r, si); /* still filling (or sealed, never to be written) */
    ol_se_advance(r);
}

void ol_se_put_slot(struct ol_sreq *r, unsigned slot, unsigned pos, int res)
{
    if (slot >= OL_SE_SLOTS) /* a wa op (DATA only: every phase after waits for them) */
        return ahead_done(r, slot - OL_SE_SLOTS, pos, res);
    if (r->phase == PH_COMMIT)
        return fan_done(&r->d[pos], slot, res); /* the slots are idle: the fan's ops */
    if (r->phase == PH_PREP)
        return prep_stat_done(&r->d[pos], res); /* the bucket's statx (prep_side) */
    struct ol_sslot *sl = &r->slot[slot];
    struct ol_sdrv *d = &r->d[pos];
    bool ok = res == (int)sl->wlen[pos];
    r->c->swr--;
    if (!ok && !d->err)
        d->err = res < 0 ? res : -EIO;
    if (ok && d->dio) {
        r->c->st.direct_bytes += (uint64_t)res;
        /* a part's bytes after its last page are buffered, and its record */
        int e = sl->stripe + 1 == r->nstripes && !pad_last(r) ? dio_off(d) : 0;
        if (e < 0 && !d->err)
            d->err = e;
    }
    if (sl->tails & (1u << pos)) {
        sl->tails &= ~(1u << pos);
        if (!d->err && r->status == 0 && !r->aborted) {
            tail_write(r, slot, d);
            return;
        }
    }
    slot_end(r, slot);
}

/* ---- drive steps ---------------------------------------------------------------------- */

/* The replaced version's data is gone: Complete then removes the upload. */
static void clean_done(struct ol_sdrv *d)
{
    if (d->s.r->mode == OL_SE_MODE_COMPLETE)
        return ol_se_mpu_rm_start(d, true);
    ol_se_drive_end(d);
}

/* The drive leaves the request: its files closed one by one (C_FAILCLOSE
 * comes back here), then it ends. */
static void drive_fail(struct ol_sdrv *d, int err)
{
    if (d->early == EW_RUN) { /* its write still runs on a slot op: after it */
        if (!d->err)
            d->err = err;
        d->early_fail = true;
        return;
    }
    int *fd = d->tfd >= 0 ? &d->tfd : d->mfd >= 0 ? &d->mfd : NULL;
    if (fd) {
        if (!d->err)
            d->err = err;
        d->step = C_FAILCLOSE;
        ol_se_close(d, *fd);
        *fd = -1;
        return;
    }
    ol_se_drive_fail(d, err, C_FAILCLOSE);
}

/*
 * The fan. Once the new metadata is written to tmp, everything its rename
 * will depend on is made durable at once, each sync on this drive's op of
 * one stripe slot (F_*: the slot's index): the data file's fdatasync (it
 * was renamed into the object directory before: a name no metadata points
 * at yet), the metadata file's fsync, and the fsyncs of the directories
 * that hold the ones this commit made (objects/ also for a new <hash>
 * under an <ab> it found: fan_start). Each ends by closing what it used;
 * the last to end renames the metadata (C_MRENAME), or fails the drive
 * with the first error. On one journal the syncs share its flushes. With
 * the group commit the members are the closes and one barrier; with the
 * ordered commit (below) the closes and the rename itself, whose barrier
 * follows (a barrier needs no file closed).
 */
enum { F_DATA, F_META, F_OBJECTS, F_AB };

static void fan_issue(struct ol_sdrv *d, unsigned k, uint8_t st, int rc)
{
    d->fst[k] = st;
    ol_se_issue(d->s.r, &d->s.r->w[k][d->pos], rc);
}

static void fan_sync(struct ol_sdrv *d, unsigned k)
{
    struct ol_sop *w = &d->s.r->w[k][d->pos];
    fan_issue(d, k, FS_SYNC,
              ol_se_start(d->s.r, d->pos, &w->op,
                          &(struct ol_store_rstep){.code = OL_RSTEP_FSYNC, .fd = d->ffd[k],
                                                   .flags = k == F_DATA}));
}

/* Member k syncs fd, or the directory at path (opened first). */
static void fan_member(struct ol_sdrv *d, unsigned k, int fd, const char *path)
{
    struct ol_sreq *r = d->s.r;
    if (ol_se_grouped(r, d->pos)) { /* files only closed, beside the fan's barrier */
        if (fd < 0)
            return;
        d->fan++;
        d->ffd[k] = -1;
        return fan_issue(d, k, FS_CLOSE,
                         ol_se_start(r, d->pos, &r->w[k][d->pos].op,
                                     &(struct ol_store_rstep){.code = OL_RSTEP_CLOSE, .fd = fd}));
    }
    d->fan++;
    if (fd >= 0) {
        d->ffd[k] = fd;
        return fan_sync(d, k);
    }
    struct ol_sop *w = &r->w[k][d->pos];
    fan_issue(d, k, FS_OPEN,
              ol_se_start(r, d->pos, &w->op,
                          &(struct ol_store_rstep){.code = OL_RSTEP_OPEN, .path = path,
                                                   .flags = O_RDONLY | O_DIRECTORY}));
}

static void meta_renamed(struct ol_sdrv *d, int res);

static void fan_end(struct ol_sdrv *d)
{
    if (--d->fan)
        return;
    if (d->fan_err)
        return drive_fail(d, d->fan_err);
    if (d->ord) /* the rename was a member */
        return meta_renamed(d, d->mren_res);
    d->step = C_MRENAME;
    d->mren = true;
    ol_se_renameat(d, d->s.r->p_tmeta, d->s.r->p_meta);
}

void (*ol_se_fan_hook)(int dfd);
void (*ol_se_renamed_hook)(int dfd);

static void fan_start(struct ol_sdrv *d)
{
    struct ol_sreq *r = d->s.r;
    if (ol_se_fan_hook)
        ol_se_fan_hook(ol_se_dfd(r, d->pos));
    d->fan = 1; /* held while the members start */
    d->fan_err = 0;
    if (d->fd >= 0) {
        fan_member(d, F_DATA, d->fd, NULL);
        d->fd = -1;
    }
    if (d->tfd >= 0) {
        fan_member(d, F_META, d->tfd, NULL);
        d->tfd = -1;
    }
    /* A new <hash> needs its <ab> durable too, even one this PUT found:
     * another key's PUT may have made it and not fsynced objects/ yet. */
    if (d->new_ab || d->new_obj)
        fan_member(d, F_OBJECTS, -1, r->p_objects);
    if (d->new_obj)
        fan_member(d, F_AB, -1, r->p_ab);
    d->new_ab = d->new_obj = false;
    if (ol_se_grouped(r, d->pos) && !d->ord) { /* the barrier beside the closes */
        d->fan++;
        d->step = C_FANSYNC;
        ol_se_barrier(d);
    }
    if (d->ord) { /* the rename beside the closes: the writes are done, the files may stay open */
        d->fan++;
        d->step = C_MRENAME;
        d->mren = true;
        ol_se_renameat(d, r->p_tmeta, r->p_meta);
    }
    fan_end(d);
}

/* The metadata's rename into place ended with res: the barrier that makes
 * it durable next (or the commit again, when <hash> vanished). */
static void meta_renamed(struct ol_sdrv *d, int res)
{
    struct ol_sreq *r = d->s.r;
    if (res == -ENOENT && d->retries++ < OL_SE_RETRIES)
        return commit_start(d); /* an inline object's <hash> vanished */
    if (res < 0)
        return drive_fail(d, res);
    d->tmeta = false;
    d->committed = true;
    if (ol_se_renamed_hook)
        ol_se_renamed_hook(ol_se_dfd(r, d->pos));
    ol_se_fsync_dir(d, r->p_obj, C_OSYNCED);
}

static void fan_done(struct ol_sdrv *d, unsigned k, int res)
{
    switch (d->fst[k]) {
    case FS_OPEN:
        if (res < 0) {
            d->fan_err = d->fan_err ? d->fan_err : res;
            break;
        }
        d->ffd[k] = res;
        return fan_sync(d, k);
    case FS_SYNC: {
        if (res < 0 && !d->fan_err)
            d->fan_err = res;
        struct ol_sop *w = &d->s.r->w[k][d->pos];
        int fd = d->ffd[k];
        d->ffd[k] = -1;
        return fan_issue(d, k, FS_CLOSE,
                         ol_se_start(d->s.r, d->pos, &w->op,
                                     &(struct ol_store_rstep){.code = OL_RSTEP_CLOSE, .fd = fd}));
    }
    case FS_EARLY:
        return early_done(d, res);
    default: /* FS_CLOSE */
        break;
    }
    d->fst[k] = 0;
    fan_end(d);
}

static void commit_start(struct ol_sdrv *d)
{
    struct ol_sreq *r = d->s.r;
    if (r->mode == OL_SE_MODE_PART) {
        if (!ol_se_mpu_live(r)) { /* aborted meanwhile: not into its directory */
            r->status = OL_STORE_ENOUPLOAD;
            return drive_fail(d, OL_STORE_ENOUPLOAD);
        }
        d->step = C_PRENAME;
        ol_se_renameat(d, r->p_tpart, r->p_part);
        return;
    }
    d->obj_now = false;
    early_start(d);
    d->step = C_MKOBJ; /* <ab> only when missing: most keys find it made */
    ol_se_mkdirat(d, r->p_obj);
}

/* The conditional write's verdict on this drive's current object (cur
 * NULL: none, or the latest is a delete marker): 0 or the status. */
static int cond_check(const struct ol_sreq *r, const struct ol_meta_version *cur)
{
    switch (r->cond.kind) {
    case OL_STORE_COND_ABSENT:
        return cur ? OL_STORE_EPRECOND : 0;
    case OL_STORE_COND_MATCH:
        if (!cur)
            return -ENOENT;
        return cur->etag_parts == r->cond.etag_parts && !memcmp(cur->etag, r->cond.etag, 16)
                   ? 0 : OL_STORE_EPRECOND;
    default:
        return 0;
    }
}

static const uint8_t null_vid[OL_META_ID_LEN];

/*
 * The ordered commit. A barrier is a syncfs: the filesystem's log forced
 * and the drive's cache flushed, ~0.4-0.6 ms alone on the benchmark's
 * drives and more under load; two per PUT (the data and the tmp metadata
 * durable, then the rename) were a third of a lone 1 MiB PUT's time after
 * its body. On a drive where the data and the metadata are both written
 * with O_DIRECT on XFS (ol_store_drive.ordered), the rename may follow the
 * writes at once and one barrier after it make everything durable: a
 * direct write has reached the drive when it completes, and XFS writes a
 * checkpoint of its log only after a cache flush of the data device,
 * issued after every transaction the checkpoint holds was committed (the
 * conversion of the file's unwritten extents and its size among them:
 * the same order that keeps stale blocks out of a file after a crash).
 * Transactions reach the log in the order they were made, so no crash
 * recovers the rename without the bytes it names: after a crash the new
 * version is there whole, or the old one is. The metadata is padded
 * with zeros to a page for O_DIRECT, which readers skip (store-meta.md);
 * a file that would then be as large as meta_cap (a reader takes that
 * for too big) is written buffered, and that drive's commit takes the
 * two barriers. Not for parts, Complete or buffered drives; other
 * filesystems keep two (ext4 without a journal, or with data=journal,
 * does not order them so, and a statfs cannot tell which it is).
 * tests: store_engine_ordered_commit_survives_a_log_flush.
 */
static int meta_flags(const struct ol_sdrv *d)
{
    return O_CREAT | O_TRUNC | O_WRONLY | (d->ord ? O_DIRECT : 0);
}

/* The bytes of new metadata of n bytes in nbuf to write: n, or with an
 * ordered commit n padded with zeros to a page. */
static uint32_t meta_wlen(struct ol_sdrv *d, uint32_t n)
{
    if (!d->ord)
        return n;
    _Static_assert(OL_META_PAD % OL_SE_PAGE == 0, "padded metadata is whole O_DIRECT pages");
    uint32_t w = OL_META_PADDED(n);
    if (w >= d->s.r->c->s->meta_cap) { /* unpadded, buffered: two barriers */
        d->ord = false;
        if (d->tfd >= 0)
            (void)fcntl(d->tfd, F_SETFL, 0); /* if it fails, so does the write */
        return n;
    }
    memset(d->nbuf + n, 0, w - n);
    return w;
}

/* This drive's new metadata file into nbuf, over the old one (NULL: none;
 * old versions kept, a null version replaces the null version): its length,
 * or an error. */
static int meta_encode(struct ol_sdrv *d, const uint8_t *old, size_t oldlen)
{
    struct ol_sreq *r = d->s.r;
    struct ol_meta_version v = r->tv;
    if (r->dmark) {
        memset(&v, 0, sizeof v);
        v.type = OL_META_DELETE_MARKER;
        v.mtime_ns = r->tv.mtime_ns;
    }
    memcpy(v.vid, r->nvid, 16);
    v.ec.index = d->shard;
    if (r->inline_obj && !r->dmark) {
        v.has_inline = true;
        v.inline_data.p = rec(r, &r->slot[0], d->shard) + OL_BITROT_HDR_SIZE;
        v.inline_data.len = r->slot[0].blen;
    }
    bool replace = memcmp(r->nvid, null_vid, 16) == 0;
    return ol_meta_put_version(old, oldlen, r->key, r->klen, &v, replace, d->nbuf,
                               r->c->s->meta_cap);
}

/* Decodes this drive's old metadata, if any (the conditional write's
 * verdict on it), encodes the new file and starts writing it to tmp. */
static void commit_build(struct ol_sdrv *d)
{
    struct ol_sreq *r = d->s.r;
    const uint8_t *old = NULL;
    size_t oldlen = 0;
    bool replace = memcmp(r->nvid, null_vid, 16) == 0;
    const struct ol_meta_version *cur = NULL;
    if (d->had_old) {
        ol_se_meta_decode(r, d);
        switch (d->ms) {
        case OL_SE_M_OK:
        case OL_SE_M_OTHER: {
            old = d->mbuf;
            oldlen = d->mlen;
            if (d->ms == OL_SE_M_OK)
                cur = &d->v;
            struct ol_meta_version ov;
            int cst = cond_check(r, cur);
            if (cst < 0) {
                r->cond_st = cst;
                return drive_fail(d, cst);
            }
            bool null_there = replace && ol_meta_find(&d->mf, null_vid, &ov) >= 0;
            if (d->mf.count > (null_there ? 1u : 0u))
                r->kept = true; /* another version stays beside the new one */
            if (null_there && ov.type == OL_META_OBJECT && !ov.has_inline &&
                memcmp(ov.data_dir, null_vid, 16) != 0 && memcmp(ov.data_dir, r->ddir, 16) != 0) {
                d->v = ov;
                d->old_dd = true;
            }
            break;
        }
        case OL_SE_M_BAD:
            if (r->cond.kind)
                return drive_fail(d, -EIO); /* no verdict from a corrupt copy */
            break; /* a corrupt file is replaced by a fresh one */
        default:
            return drive_fail(d, -EIO); /* another key's file, a newer format, too big */
        }
    } else {
        int cst = cond_check(r, NULL);
        if (cst < 0) {
            r->cond_st = cst;
            return drive_fail(d, cst);
        }
    }
    int n = meta_encode(d, old, oldlen);
    if (n < 0) {
        n = n == -ENOSPC || n == -E2BIG ? -EFBIG : n;
        if (n == -EFBIG)
            r->cond_st = n; /* too many versions: the answer, not a drive's failure */
        return drive_fail(d, n);
    }
    d->nlen = meta_wlen(d, (uint32_t)n);
    if (d->tfd < 0) {
        d->step = C_TOPEN;
        ol_se_openat(d, r->p_tmeta, meta_flags(d), 0600);
    } else if (d->nlen < d->early_len) { /* the early bytes would outlast these */
        d->step = C_TRECLOSE;
        ol_se_close(d, d->tfd);
        d->tfd = -1;
    } else { /* the file PREP opened: these bytes over the early ones, if any */
        d->step = C_TWRITE;
        ol_se_write(d, d->tfd, d->nbuf, d->nlen, 0);
    }
}

/*
 * The early write. On a drive where the key is new (the commit's mkdir of
 * <obj> makes it) there is no old metadata to merge: the new file holds the
 * new version alone. So while the commit makes <obj> and renames the shard
 * file into it, those bytes go to the file PREP opened, on the drive's
 * F_META slot op (idle until the fan); the commit takes them when it made
 * <obj> (commit_meta), or writes the merged bytes over them when it finds
 * an old file (never fewer bytes: the same version and more; else a fresh
 * file). Two loop turns less per new key. Not for If-Match, which needs an
 * old file. Nothing ends the drive while the write runs (drive_fail waits).
 */
static void early_start(struct ol_sdrv *d)
{
    struct ol_sreq *r = d->s.r;
    if (d->tfd < 0 || d->early || d->meta_ready || r->cond.kind == OL_STORE_COND_MATCH)
        return;
    int n = meta_encode(d, NULL, 0);
    if (n < 0)
        return; /* the commit meets the same error */
    d->early = EW_RUN;
    d->early_len = meta_wlen(d, (uint32_t)n);
    struct ol_sop *w = &r->w[F_META][d->pos];
    d->fst[F_META] = FS_EARLY;
    ol_se_issue(r, w, ol_se_start(r, d->pos, &w->op,
                                  &(struct ol_store_rstep){.code = OL_RSTEP_WRITE, .fd = d->tfd,
                                                           .wbuf = d->nbuf,
                                                           .len = d->early_len}));
}

static void early_done(struct ol_sdrv *d, int res)
{
    d->fst[F_META] = 0;
    d->early = res == (int)d->early_len ? EW_OK : EW_BAD;
    if (d->early == EW_BAD)
        d->early_err = res < 0 ? res : -EIO;
    if (d->early_fail) {
        d->early_fail = false;
        return drive_fail(d, d->err);
    }
    if (d->early_wait) {
        d->early_wait = false;
        return commit_meta(d);
    }
}

/* The new metadata once the old is known (d->had_old): the early write's
 * bytes when there is none, else commit_build's. */
static void commit_meta(struct ol_sdrv *d)
{
    if (d->early == EW_RUN) { /* nbuf is still being written */
        d->early_wait = true;
        return;
    }
    if (d->early == EW_BAD)
        return drive_fail(d, d->early_err);
    if (d->early == EW_OK && !d->had_old) {
        d->meta_ready = true;
        return fan_start(d);
    }
    commit_build(d);
}

/* Reads the current metadata file, unless this attempt made the object's
 * directory: under the key's lock nothing else writes one there. */
static void meta_read(struct ol_sdrv *d)
{
    if (d->obj_now)
        return commit_meta(d);
    d->step = C_MOPEN;
    ol_se_openat(d, d->s.r->p_meta, O_RDONLY, 0);
}

/* The next step after the directories exist: data dir in, then metadata. */
static void commit_dirs_ready(struct ol_sdrv *d)
{
    struct ol_sreq *r = d->s.r;
    if (!r->inline_obj && !d->renamed) {
        d->step = C_RENAME;
        bool put = r->mode == OL_SE_MODE_PUT; /* its file; Complete: the upload's data dir */
        ol_se_renameat(d, put ? r->p_tpart : r->p_tdir, put ? r->p_part : r->p_ddir);
    } else if (d->meta_ready) { /* a retry: the parents of what it made, then the rename */
        fan_start(d);
    } else {
        meta_read(d);
    }
}

/* Removing the replaced version's data: its part files, then its data dir. */
static void clean_next(struct ol_sdrv *d)
{
    struct ol_sreq *r = d->s.r;
    int flags;
    if (!ol_se_data_rm(d->path, &flags, r->p_obj, &d->v, d->iter))
        return clean_done(d);
    d->step = K_UNLINK;
    ol_se_unlinkat(d, d->path, flags);
}

/* Putting a drive back: a checklist, one op per item (errors ignored). */
static void undo_next(struct ol_sdrv *d)
{
    struct ol_sreq *r = d->s.r;
    for (;;) {
        switch (d->iter++) {
        case 0:
            if (d->fd >= 0 || d->tfd >= 0 || d->mfd >= 0) {
                int *fd = d->fd >= 0 ? &d->fd : d->tfd >= 0 ? &d->tfd : &d->mfd;
                d->step = U_STEP;
                ol_se_close(d, *fd);
                *fd = -1;
                d->iter--; /* the others next */
                return;
            }
            break;
        case 1:
            /* A drive whose metadata rename failed may hold the new file all
             * the same (an error says the state is unknown, and an ordered
             * commit's rename may have gone through while another member
             * failed): put back like a committed one, or the next step
             * removes the data the new file names. */
            if (!(d->committed || d->mren) || r->mode == OL_SE_MODE_PART)
                break; /* a part that replaced another stays: Complete reads the records */
            if (d->had_old && d->mlen) { /* rewrite the old bytes */
                d->step = U_TOPEN;
                ol_se_openat(d, r->p_tmeta, O_CREAT | O_TRUNC | O_WRONLY, 0600);
            } else {
                d->step = U_STEP;
                ol_se_unlinkat(d, r->p_meta, 0);
            }
            return;
        case 2:
            if (r->mode == OL_SE_MODE_COMPLETE) {
                if (d->renamed) { /* the data dir goes back into the upload */
                    d->step = U_STEP;
                    ol_se_renameat(d, r->p_ddir, r->p_udata);
                    return;
                }
                break;
            }
            if (r->mode == OL_SE_MODE_PART ? d->made_part && !d->renamed
                                           : d->renamed || d->made_part) {
                d->step = U_STEP;
                ol_se_unlinkat(d, d->renamed ? r->p_part : r->p_tpart, 0);
                return;
            }
            break;
        case 3:
            if (d->tmeta) {
                d->step = U_STEP;
                ol_se_unlinkat(d, r->p_tmeta, 0);
                return;
            }
            break;
        case 4:
            if (d->made_obj) {
                d->step = U_STEP;
                ol_se_unlinkat(d, r->p_obj, AT_REMOVEDIR);
                return;
            }
            break;
        case 5:
            if (d->made_ab) {
                d->step = U_STEP;
                ol_se_unlinkat(d, r->p_ab, AT_REMOVEDIR);
                return;
            }
            break;
        default:
            /* Complete succeeded: a drive that did not commit loses the upload */
            if (r->mode == OL_SE_MODE_COMPLETE && r->phase == PH_CLEAN && d->urec)
                return ol_se_mpu_rm_start(d, false);
            return ol_se_drive_end(d);
        }
    }
}

void ol_se_put_drive(struct ol_sdrv *d, int res)
{
    struct ol_sreq *r = d->s.r;
    if (ol_se_fsync_step(d, &res))
        return;
    if (d->step >= OL_SE_MPU_STEPS)
        return ol_se_mpu_drive(d, res);
    switch (d->step) {
    /* PREP */
    case P_STAT:
        if (r->mode == OL_SE_MODE_PART && (res == -ENOENT || res == -ENOTDIR)) {
            d->step = P_STAT2; /* no upload here: is there a bucket? */
            ol_se_statx(d, r->p_bucket);
            return;
        }
        if (res == -ENOENT || res == -ENOTDIR) {
            d->ms = OL_SE_M_NOBUCKET;
            return drive_fail(d, -ENOENT);
        }
        if (res < 0)
            return drive_fail(d, res);
        d->bucket = true; /* PART: the upload record */
        if (r->inline_obj)
            return ol_se_drive_end(d);
        d->urec = r->mode == OL_SE_MODE_PART;
        d->dio = r->size && ol_se_drive(r, d->pos)->dio;
        d->step = P_OPEN;
        ol_se_openat(d, r->p_tpart, O_CREAT | O_EXCL | O_WRONLY | (d->dio ? O_DIRECT : 0), 0600);
        return;
    case P_STAT2:
        if (res == 0)
            d->ms = OL_SE_M_NONE;
        else if (res == -ENOENT || res == -ENOTDIR)
            d->ms = OL_SE_M_NOBUCKET;
        return drive_fail(d, res < 0 && d->ms != OL_SE_M_NOBUCKET ? res : -ENOENT);
    case P_OPEN:
        d->made_part = true; /* a failed O_CREAT may have made it too: undone either way */
        if (res < 0)
            return d->prep_wait ? prep_half(d, res) : drive_fail(d, res);
        d->fd = res;
        if (r->size) { /* a PUT's or a part's blocks (its record comes after) */
            uint64_t len = ol_se_part_blocks(r->size, r->k, r->B);
            if (pad_last(r)) /* and its zeros to the page boundary */
                len += ol_bitrot_pad(len);
            d->step = P_FALLOC;
            ol_se_fallocate(d, d->fd, len);
            return;
        }
        return d->prep_wait ? prep_half(d, 0) : ol_se_drive_end(d);
    case P_FALLOC:
        if (res != -ENOSPC && res != -EDQUOT)
            res = 0; /* not supported: the writes allocate */
        if (d->prep_wait)
            return prep_half(d, res);
        if (res)
            return drive_fail(d, res);
        return ol_se_drive_end(d);
    /* SYNC */
    case S_TRAIL:
        if (res != (int)d->nlen && !d->err)
            d->err = res < 0 ? res : -EIO;
        d->step = S_SYNC;
        ol_se_fsync(d, d->fd, 1);
        return;
    case S_SYNC:
        if (res < 0 && !d->err)
            d->err = res;
        d->step = S_CLOSE;
        ol_se_close(d, d->fd);
        d->fd = -1;
        return;
    case S_CLOSE: /* the part's directory is fsynced after its rename */
        return ol_se_drive_end(d);
    /* COMMIT */
    case C_PRENAME:
        if (res < 0)
            return drive_fail(d, res == -ENOENT ? OL_STORE_ENOUPLOAD : res);
        d->renamed = d->committed = true;
        d->made_part = false;
        return ol_se_fsync_dir(d, r->p_udata, C_OSYNCED);
    case C_MKAB:
        if (res == 0)
            d->made_ab = d->new_ab = true;
        else if (res != -EEXIST)
            return drive_fail(d, res);
        d->step = C_MKOBJ;
        ol_se_mkdirat(d, r->p_obj);
        return;
    case C_MKOBJ:
        if (res == -ENOENT && d->retries++ < OL_SE_RETRIES) {
            d->step = C_MKAB; /* no <ab> yet (or it vanished under a DELETE) */
            ol_se_mkdirat(d, r->p_ab);
            return;
        }
        if (res == 0)
            d->made_obj = d->new_obj = d->obj_now = true;
        else if (res != -EEXIST)
            return drive_fail(d, res);
        return commit_dirs_ready(d); /* their parents are fsynced in the fan */
    case C_RENAME:
        if (res == -ENOENT && d->retries++ < OL_SE_RETRIES)
            return commit_start(d); /* <hash> vanished under a DELETE */
        if (res < 0)
            return drive_fail(d, res);
        d->renamed = true;
        d->made_part = false;
        return meta_read(d);
    case C_MOPEN:
        if (res == -ENOENT)
            return commit_meta(d);
        if (res < 0)
            return drive_fail(d, res);
        d->mfd = res;
        d->step = C_MREAD;
        d->mlen = 0;
        ol_se_read(d, d->mfd, d->mbuf, r->c->s->meta_cap, 0);
        return;
    case C_MREAD:
        if (res < 0)
            return drive_fail(d, res);
        /* a short read is not the file's end: read on until 0 or full
         * (an undo writes these bytes back as the old metadata) */
        d->mlen += (uint32_t)res;
        if (res > 0 && d->mlen < r->c->s->meta_cap) {
            ol_se_read(d, d->mfd, d->mbuf + d->mlen, r->c->s->meta_cap - d->mlen, d->mlen);
            return;
        }
        d->step = C_MCLOSE;
        ol_se_close(d, d->mfd);
        d->mfd = -1;
        return;
    case C_MCLOSE:
        d->had_old = true;
        return commit_meta(d);
    case C_TRECLOSE:
        d->step = C_TOPEN;
        ol_se_openat(d, r->p_tmeta, meta_flags(d), 0600);
        return;
    case C_TOPEN:
        d->tmeta = true; /* made, maybe, even when the open failed */
        if (res < 0)
            return drive_fail(d, res);
        d->tfd = res;
        d->step = C_TWRITE;
        ol_se_write(d, d->tfd, d->nbuf, d->nlen, 0);
        return;
    case C_TWRITE:
        if (res != (int)d->nlen)
            return drive_fail(d, res < 0 ? res : -EIO);
        d->meta_ready = true;
        return fan_start(d);
    case C_FANSYNC: /* a member of the fan (fan_start) */
        if (res < 0 && !d->fan_err)
            d->fan_err = res;
        return fan_end(d);
    case C_MRENAME:
        if (d->ord) { /* a member of the fan */
            d->mren_res = res;
            return fan_end(d);
        }
        return meta_renamed(d, res);
    case C_OSYNCED:
        if (res < 0 && !d->err)
            d->err = res; /* visible but maybe not durable: not counted */
        return ol_se_drive_end(d);
    case C_FAILCLOSE:
        return drive_fail(d, d->err); /* the other file, or the end */
    /* CLEAN */
    case K_UNLINK:
        d->iter++;
        return clean_next(d);
    /* UNDO / ABORT */
    case U_STEP:
        return undo_next(d);
    case U_TOPEN:
        d->tmeta = true; /* made, maybe, even when the open failed */
        if (res < 0)
            return undo_next(d);
        d->fd = res;
        d->step = U_TWRITE;
        ol_se_write(d, d->fd, d->mbuf, d->mlen, 0);
        return;
    case U_TWRITE:
        d->step = U_TSYNC;
        ol_se_fsync(d, d->fd, 0);
        return;
    case U_TSYNC:
        d->step = U_TCLOSE;
        ol_se_close(d, d->fd);
        d->fd = -1;
        return;
    case U_TCLOSE:
        d->step = U_STEP;
        ol_se_renameat(d, r->p_tmeta, r->p_meta);
        return;
    default:
        return ol_se_drive_end(d);
    }
}

/* ---- phases ------------------------------------------------------------------------------ */

static void start_phase(struct ol_sreq *r, uint8_t phase)
{
    r->phase = phase;
    ol_se_phase_begin(r);
    for (unsigned pos = 0; pos < r->n; pos++) {
        struct ol_sdrv *d = &r->d[pos];
        if (!ol_se_online(r, pos))
            continue;
        switch (phase) {
        case PH_SYNC:
            if (d->fd < 0)
                break;
            ol_se_drive_begin(d);
            if (!d->err && r->mode == OL_SE_MODE_PART) {
                int rc = ol_se_mpu_prec_build(r, d);
                if (rc < 0) {
                    d->err = rc;
                } else { /* the part record after the blocks, then the sync */
                    d->step = S_TRAIL;
                    ol_se_write(d, d->fd, d->nbuf, d->nlen, r->toff);
                    break;
                }
            }
            if (d->err) { /* failed during DATA: only its file to close */
                d->step = S_CLOSE;
                ol_se_close(d, d->fd);
                d->fd = -1;
            } else {
                d->step = S_SYNC;
                ol_se_fsync(d, d->fd, 1);
            }
            break;
        case PH_MVAL:
            ol_se_drive_begin(d);
            ol_se_mpu_val_start(d);
            break;
        case PH_MTRIM:
            if (d->err)
                break;
            ol_se_drive_begin(d);
            ol_se_mpu_trim_start(d);
            break;
        case PH_COMMIT:
            if (d->err) {
                if (d->fd >= 0 || d->tfd >= 0) { /* failed during DATA: its files to close */
                    ol_se_drive_begin(d);
                    drive_fail(d, d->err);
                }
                break;
            }
            ol_se_drive_begin(d);
            commit_start(d);
            break;
        case PH_CLEAN:
            if (d->committed && r->mode == OL_SE_MODE_COMPLETE) {
                ol_se_drive_begin(d);
                if (d->old_dd && !d->err) {
                    d->iter = 0;
                    clean_next(d); /* then the upload's leftovers (clean_done) */
                } else {
                    ol_se_mpu_rm_start(d, true);
                }
            } else if (d->committed && !d->err) {
                if (!d->old_dd)
                    break;
                ol_se_drive_begin(d);
                d->iter = 0;
                clean_next(d);
            } else if (!d->committed) {
                ol_se_drive_begin(d);
                d->iter = 0;
                undo_next(d);
            }
            break;
        default: /* UNDO, ABORT */
            ol_se_drive_begin(d);
            d->iter = 0;
            undo_next(d);
            break;
        }
    }
    ol_se_phase_started(r);
}

/* COMMIT under the key's commit lock (engine.h, "versions"): taken now,
 * or waited for (PH_LOCK, retried from the timer), or, for a conditional
 * write, OL_STORE_ECONFLICT. UploadPart commits no object: no lock. */
static void commit_enter(struct ol_sreq *r)
{
    if (r->mode == OL_SE_MODE_PART || ol_se_key_lock(r)) {
        start_phase(r, PH_COMMIT);
        return;
    }
    if (r->rl_failed) {   /* no owner of the set answered (a cluster store) */
        r->status = -EBUSY;
        start_phase(r, PH_UNDO);
        return;
    }
    if (r->cond.kind && ol_se_lock_busy(r)) {
        r->status = OL_STORE_ECONFLICT;
        start_phase(r, PH_UNDO);
        return;
    }
    r->phase = PH_LOCK;
    r->kick = true;
    ol_timer_arm(r->c->loop, &r->timer, OL_SE_LOCK_RETRY_MS);
}

static bool put_done(struct ol_sreq *r, int status)
{
    if (!ol_se_can_emit(r))
        return false;
    struct ol_store_stats *st = &r->c->st;
    if (r->mode != OL_SE_MODE_PUT)
        ol_se_mpu_leave(r, r->mode == OL_SE_MODE_COMPLETE && status == 0);
    if (status == 0) {
        unsigned ok = 0;
        for (unsigned i = 0; i < r->n; i++)
            ok += r->d[i].committed && !r->d[i].err;
        if (r->mode == OL_SE_MODE_COMPLETE) {
            st->mpu_completed++;
        } else {
            st->puts++;
            st->put_bytes += r->size;
            st->mpu_parts += r->mode == OL_SE_MODE_PART;
        }
        if (ok < r->n) {
            st->write_drive_failures += r->n - ok;
            st->needs_heal++;
            if (r->mode != OL_SE_MODE_PART)
                ol_se_heal_queue(r);
        }
    } else {
        st->put_errors++;
    }
    ol_se_done(r, status);
    return true;
}

/* After PREP: is the bucket there, are enough drives ready? OL_STORE_EFULL
 * when what the quorum lacks is drives without room for the files. */
static void prep_check(struct ol_sreq *r)
{
    unsigned has = 0, nob = 0, none = 0;
    for (unsigned i = 0; i < r->n; i++) {
        has += r->d[i].bucket;
        nob += r->d[i].ms == OL_SE_M_NOBUCKET;
        none += r->d[i].ms == OL_SE_M_NONE;
    }
    if (has < r->rq)
        r->status = has == 0 && nob >= r->rq                          ? OL_STORE_ENOBUCKET
                    : r->mode == OL_SE_MODE_PART && none + nob >= r->rq ? OL_STORE_ENOUPLOAD
                                                                      : -EIO;
    else if (healthy(r) < r->wq)
        r->status = lost(r);
}

static bool data_step(struct ol_sreq *r)
{
    if (r->aborted || r->status < 0) {
        if (slots_io(r))
            return false; /* writes still in the ring */
        if (r->aborted) {
            start_phase(r, PH_ABORT);
            return false;
        }
        if (r->finished) {
            start_phase(r, PH_UNDO);
            return false;
        }
        if (!r->reported && ol_se_can_emit(r)) {
            r->reported = true;
            ol_se_emit(r, OL_STORE_EV_ERROR, r->status);
        }
        return false;
    }
    submit(r);
    if (r->status < 0) {
        r->again = true;
        return false;
    }
    if (r->cur >= 0)
        ahead_kick(r, (unsigned)r->cur); /* bytes that came during PREP */
    if (r->paused && !r->finished && !want_pause(r) && ol_se_can_emit(r)) {
        r->paused = false;
        ol_se_emit(r, OL_STORE_EV_READY, 0);
        return false;
    }
    if (r->finished && slots_idle(r)) {
        if (r->mode == OL_SE_MODE_PART)
            start_phase(r, PH_SYNC); /* its record, then its sync, before the rename */
        else if (healthy(r) < r->wq) {
            r->status = lost(r);
            r->again = true;
        } else {
            commit_enter(r); /* the file's sync is in the commit's fan */
        }
    }
    return false;
}

bool ol_se_put_step(struct ol_sreq *r)
{
    if (r->active)
        return false;
    switch (r->phase) {
    case PH_PREP:
        if (r->aborted) {
            start_phase(r, PH_ABORT);
            return false;
        }
        prep_check(r);
        r->phase = PH_DATA;
        return data_step(r);
    case PH_DATA:
        return data_step(r);
    case PH_SYNC:
        if (healthy(r) < r->wq) {
            r->status = lost(r);
            start_phase(r, PH_UNDO);
        } else {
            commit_enter(r);
        }
        return false;
    case PH_LOCK:
        commit_enter(r);
        return false;
    case PH_COMMIT: {
        unsigned ok = 0;
        for (unsigned i = 0; i < r->n; i++)
            ok += r->d[i].committed && !r->d[i].err;
        if (ok < r->wq) {
            if (r->status >= 0)
                r->status = r->cond_st ? r->cond_st : lost(r);
            start_phase(r, PH_UNDO);
        } else {
            ol_se_listing_commit(r); /* committed: the listing follows, still locked */
            start_phase(r, PH_CLEAN);
        }
        return false;
    }
    case PH_CLEAN:
        return put_done(r, 0);
    case PH_UNDO:
        return put_done(r, r->status);
    case PH_ABORT:
        if (r->inflight)
            return false;
        if (r->mode != OL_SE_MODE_PUT)
            ol_se_mpu_leave(r, false);
        ol_se_req_put(r);
        return true;
    case PH_MVAL: {
        int st = ol_se_mpu_val_decide(r);
        if (st < 0)
            return put_done(r, st);
        start_phase(r, PH_MTRIM);
        return false;
    }
    case PH_MTRIM:
        commit_enter(r);
        return false;
    }
    return false;
}

/* ---- API --------------------------------------------------------------------------------- */

/* The object's geometry with parity m and blocks of B bytes; its distribution. */
static void geometry(struct ol_sreq *r, unsigned m, uint32_t B)
{
    const struct ol_store *s = r->c->s;
    r->m = m;
    r->k = r->n - m;
    r->ec = r->c->ec[m];
    r->wq = ol_layout_write_quorum(r->n, m);
    r->rq = ol_layout_read_quorum(r->n, m);
    uint64_t h = ol_layout_object_hash(s->deployment, r->bucket, r->blen, r->key, r->klen);
    ol_layout_distribution(h, r->n, r->dist);
    for (unsigned p = 0; p < r->n; p++)
        r->drv_of[r->dist[p]] = (uint8_t)p;
    r->B = B;
    r->SD = (uint64_t)r->k * r->B;
}

/* PREP of a PUT's shard file, side by side: the bucket's statx, then the
 * creation of the new metadata's file tmp/<tid>.meta (the commit writes it
 * at once: "the early write"), on the drive's first slot op (idle until
 * DATA), while its control op creates and reserves tmp/<tid>.part (P_OPEN,
 * P_FALLOC); the drive leaves PREP once both are done. Under load every
 * step waits for a turn of the loop, and the shard writes wait for PREP:
 * one step less before them, and one less in the commit. */
static void prep_side(struct ol_sreq *r)
{
    ol_se_phase_begin(r);
    for (unsigned p = 0; p < r->n; p++) {
        struct ol_sdrv *d = &r->d[p];
        if (d->err)
            continue;
        ol_se_drive_begin(d);
        d->prep_wait = 2;
        d->dio = r->size && ol_se_drive(r, p)->dio;
        struct ol_sop *w = &r->w[0][p];
        ol_se_issue(r, w, ol_se_start(r, p, &w->op,
                                      &(struct ol_store_rstep){.code = OL_RSTEP_STATX,
                                                               .path = r->p_bucket,
                                                               .stx = &d->stx}));
        d->step = P_OPEN;
        ol_se_openat(d, r->p_tpart, O_CREAT | O_EXCL | O_WRONLY | (d->dio ? O_DIRECT : 0), 0600);
    }
    ol_se_phase_started(r);
}

/* One of prep_side's two ends, with its error (0: none). */
static void prep_half(struct ol_sdrv *d, int err)
{
    if (err && !d->prep_err)
        d->prep_err = err;
    if (--d->prep_wait)
        return;
    if (d->prep_err)
        return drive_fail(d, d->prep_err);
    ol_se_drive_end(d);
}

static void prep_stat_done(struct ol_sdrv *d, int res)
{
    struct ol_sreq *r = d->s.r;
    if (d->fst[0] == FS_TMETA) {
        d->fst[0] = 0;
        d->tmeta = true; /* undone like the commit's (a failed open may have made it) */
        if (res >= 0)
            d->tfd = res;
        return prep_half(d, res < 0 ? res : 0);
    }
    if (res == -ENOENT || res == -ENOTDIR) {
        d->ms = OL_SE_M_NOBUCKET;
        d->prep_err = -ENOENT; /* says more than the file's error, if any */
        return prep_half(d, 0);
    }
    if (res == 0)
        d->bucket = true;
    if (res < 0 || d->prep_err)
        return prep_half(d, res);
    struct ol_sop *w = &r->w[0][d->pos];
    d->fst[0] = FS_TMETA;
    ol_se_issue(r, w, ol_se_start(r, d->pos, &w->op,
                                  &(struct ol_store_rstep){.code = OL_RSTEP_OPEN,
                                                           .path = r->p_tmeta,
                                                           .flags = meta_flags(d),
                                                           .mode = 0600}));
}

/* Starts PREP: statx of path (the bucket, or the upload record) on every
 * drive; a PUT of a shard file creates it beside (prep_side). */
static void prep_start(struct ol_sreq *r, const char *path)
{
    ol_se_drives_init(r);
    for (unsigned p = 0; p < r->n; p++) {
        r->d[p].shard = r->dist[p];
        r->d[p].ord = r->mode == OL_SE_MODE_PUT && ol_se_drive(r, p)->ordered;
    }
    next_fill(r);
    r->phase = PH_PREP;
    r->in_api = true;
    if (r->mode == OL_SE_MODE_PUT && !r->inline_obj)
        prep_side(r);
    else
        ol_se_statx_phase(r, path, P_STAT);
    r->in_api = false;
}

int ol_put_begin(struct ol_store_core *c, const struct ol_put_args *a, ol_store_cb cb, void *ud,
                 struct ol_put **out)
{
    const struct ol_store *s = c->s;
    *out = NULL;
    unsigned m = a->parity < 0 ? s->parity : (unsigned)a->parity;
    if (m > s->dps / 2 || m > OL_EC_MAX_PARITY || !c->ec[m])
        return -EINVAL;
    struct ol_sreq *r = ol_se_req_get(c, OL_SE_PUT, cb, ud);
    if (!r)
        return -EBUSY;
    ol_se_names(r, a->bucket, a->key);
    geometry(r, m, (uint32_t)ol_ec_shard_len(s->stripe_bytes, r->n - m));
    r->size = a->size;
    r->nstripes = (r->size + r->SD - 1) / r->SD;
    r->inline_obj = r->size <= s->inline_max; /* always for 0 bytes (delete markers) */
    r->cond = a->cond;
    ol_se_random_id(c, r->tid);
    if (!r->inline_obj)
        ol_se_random_id(c, r->ddir);
    ol_se_path_id(r->p_tpart, OL_FORMAT_DIR "/tmp", r->tid, ".part");
    ol_se_path_id(r->p_tmeta, OL_FORMAT_DIR "/tmp", r->tid, ".meta");
    ol_se_path_id(r->p_part, r->p_obj, r->ddir, OL_SE_FLAT_SFX);
    prep_start(r, r->p_bucket);
    *out = (struct ol_put *)r;
    return 0;
}

int ol_mpu_part_begin(struct ol_store_core *c, const struct ol_mpu_part_args *a, ol_store_cb cb,
                      void *ud, struct ol_put **out)
{
    *out = NULL;
    if (a->number < 1 || a->number > OL_STORE_MPU_MAX_PART_NUM)
        return -EINVAL;
    struct ol_sreq *r = ol_se_req_get(c, OL_SE_PUT, cb, ud);
    if (!r)
        return -EBUSY;
    ol_se_names(r, a->bucket, a->key);
    ol_se_upload_names(r, a->upload_id);
    r->mode = OL_SE_MODE_PART;
    r->pnum = a->number;
    int rc = ol_se_mpu_part_enter(r, a->number); /* r->m, r->B, r->ualgo */
    if (rc == 0 && (r->B > c->s->bmax || !c->ec[r->m])) {
        ol_se_mpu_leave(r, false); /* the stripe was made smaller since the create */
        rc = -EIO;
    }
    if (rc < 0) {
        ol_se_req_put(r);
        return rc;
    }
    geometry(r, r->m, r->B);
    r->size = a->size;
    r->nstripes = (r->size + r->SD - 1) / r->SD;
    r->toff = ol_se_part_blocks(r->size, r->k, r->B);
    memcpy(r->ddir, r->uid, 16);
    ol_se_random_id(c, r->tid);
    char sfx[24];
    snprintf(sfx, sizeof sfx, "/part.%u", a->number);
    ol_se_path_id(r->p_tpart, OL_FORMAT_DIR "/tmp", r->tid, ".part");
    ol_se_join(r->p_part, r->p_udata, sfx, NULL);
    prep_start(r, r->p_urec);
    *out = (struct ol_put *)r;
    return 0;
}

int ol_mpu_complete(struct ol_store_core *c, struct ol_mpu_complete_args *a, ol_store_cb cb,
                    void *ud)
{
    if (a->nparts == 0 || a->nparts > OL_META_MAX_PARTS)
        return -EINVAL;
    for (unsigned i = 0; i < a->nparts; i++) {
        uint32_t n = a->parts[i].number;
        if (n < 1 || n > OL_STORE_MPU_MAX_PART_NUM)
            return -EINVAL;
        if (i && n <= a->parts[i - 1].number)
            return OL_STORE_EPARTORDER;
    }
    struct ol_sreq *r = ol_se_req_get(c, OL_SE_PUT, cb, ud);
    if (!r)
        return -EBUSY;
    ol_se_names(r, a->bucket, a->key);
    ol_se_upload_names(r, a->upload_id);
    r->mode = OL_SE_MODE_COMPLETE;
    r->bits = r->slot[1].base;   /* no stripes here: the slots hold bitmaps */
    r->lbits = r->bits + OL_SE_PBITS;
    r->sbits = r->lbits + OL_SE_PBITS;
    int rc = ol_se_mpu_excl_enter(r);
    /* an upload with an algorithm: the object's checksum or its hook (one
     * of them, the upload's algorithm); without: neither */
    bool bad = r->ualgo == OL_META_CKS_NONE
                   ? a->cks || a->cks_fn
                   : !a->cks == !a->cks_fn || (a->cks && a->cks->algo != r->ualgo);
    if (rc == 0 && bad) {
        ol_se_mpu_leave(r, false);
        rc = -EINVAL;
    }
    if (rc < 0) {
        ol_se_req_put(r);
        return rc;
    }
    if (a->cks) {
        r->ccks = *a->cks;
        r->has_ccks = true;
    }
    r->ca = a;
    memcpy(r->nvid, a->vid, 16);
    r->cond = a->cond;
    geometry(r, r->m, r->B);
    memcpy(r->ddir, r->uid, 16);
    ol_se_random_id(c, r->tid);
    memset(r->lbits, 0, 2 * OL_SE_PBITS);
    for (unsigned i = 0; i < a->nparts; i++) {
        ol_se_bit_put(r->lbits, a->parts[i].number);
        ol_se_bit_put(r->bits, a->parts[i].number); /* removed with the upload too */
    }
    ol_se_join(r->p_tdir, r->p_udata, NULL, NULL);  /* what COMMIT renames */
    ol_se_path_id(r->p_tmeta, OL_FORMAT_DIR "/tmp", r->tid, ".meta");
    ol_se_path_id(r->p_ddir, r->p_obj, r->ddir, NULL);
    ol_se_drives_init(r);
    for (unsigned p = 0; p < r->n; p++)
        r->d[p].shard = r->dist[p];
    r->in_api = true;
    start_phase(r, PH_MVAL);
    r->in_api = false;
    return 0;
}

int ol_put_write(struct ol_put *p, const void *data, size_t len)
{
    struct ol_sreq *r = &p->r;
    if (r->status < 0)
        return r->status;
    if (r->finished || r->aborted || len > OL_STORE_WRITE_MAX || len > r->size - r->written)
        return -EINVAL;
    if (len > space(r))
        return -ENOBUFS;
    const uint8_t *src = data;
    while (len) {
        struct ol_sslot *sl = &r->slot[r->cur];
        uint32_t o = sl->fill, j = o / sl->blen, within = o % sl->blen;
        size_t n = sl->blen - within;
        if (n > sl->len - o)
            n = sl->len - o;
        if (n > len)
            n = len;
        memcpy(rec(r, sl, j) + OL_BITROT_HDR_SIZE + within, src, n);
        sl->fill += (uint32_t)n;
        r->written += n;
        src += n;
        len -= n;
        if (sl->fill == sl->len && !r->inline_obj) {
            seal(r, sl);
            r->cur = -1;
            next_fill(r);
        }
    }
    submit(r);
    if (r->cur >= 0)
        ahead_kick(r, (unsigned)r->cur);
    if (want_pause(r)) {
        r->paused = true;
        return 1;
    }
    return 0;
}

int ol_put_finish(struct ol_put *p, const struct ol_meta_version *v)
{
    struct ol_sreq *r = &p->r;
    const struct ol_store *s = r->c->s;
    if (r->status < 0)
        return r->status;
    if (r->finished || r->aborted || r->written != r->size)
        return -EINVAL;
    if (v->type == OL_META_DELETE_MARKER && (r->size || r->mode != OL_SE_MODE_PUT))
        return -EINVAL;
    r->dmark = v->type == OL_META_DELETE_MARKER;
    if (r->mode == OL_SE_MODE_PUT)
        memcpy(r->nvid, v->vid, 16);
    struct ol_meta_version t = *v;
    struct ol_meta_part part;
    memset(&part, 0, sizeof part);
    part.number = r->pnum;
    part.size = part.actual_size = r->size;
    memcpy(part.etag, v->etag, 16);
    memcpy(part.cks, v->cks.sum, sizeof part.cks);
    if (r->mode == OL_SE_MODE_PART) {
        /* the part record: only what a part has */
        if ((v->cks.algo != OL_META_CKS_NONE && v->cks.algo != r->ualgo) || v->cks.flags ||
            v->cks.parts)
            return -EINVAL;
        memset(&t, 0, sizeof t);
        memcpy(t.etag, v->etag, 16);
        t.cks.algo = v->cks.algo;
        memcpy(t.cks.sum, v->cks.sum, sizeof t.cks.sum);
        t.storage_class = r->usc;
    }
    t.type = OL_META_OBJECT;
    memset(t.vid, 0, sizeof t.vid);
    t.mtime_ns = ol_se_now_ns();
    t.size = r->size;
    memset(&t.ec, 0, sizeof t.ec);
    t.ec.k = (uint8_t)r->k;
    t.ec.m = (uint8_t)r->m;
    t.ec.block_size = r->B;
    memcpy(t.ec.dist, r->dist, r->n);
    memcpy(t.data_dir, r->ddir, 16);
    t.part_count = 1;
    t.parts = &part;
    t.parts_enc = NULL;
    t.has_inline = false;
    t.flat = r->mode == OL_SE_MODE_PUT && !r->inline_obj; /* one file beside meta */
    t.inline_data = (struct ol_meta_bytes){0};
    const struct ol_meta_version *tp = &t;
    int len = ol_meta_encode(r->key, r->klen, &tp, 1, r->tmpl, s->meta_cap);
    if (len < 0)
        return -EINVAL;
    struct ol_meta_file f;
    if (ol_meta_open(r->tmpl, (size_t)len, &f) < 0 || ol_meta_latest(&f, &r->tv) < 0)
        return -EINVAL;
    r->tmpl_len = (uint32_t)len;
    if (r->inline_obj && r->cur >= 0)
        seal(r, &r->slot[r->cur]); /* parity of the one stripe; never written as a slot */
    if (r->inline_obj)
        for (unsigned i = 0; i < OL_SE_SLOTS; i++)
            r->slot[i].state = OL_SE_SL_FREE;
    r->finished = true;
    r->in_api = true;
    ol_se_advance(r);
    r->in_api = false;
    return 0;
}

void ol_put_abort(struct ol_put *p)
{
    struct ol_sreq *r = &p->r;
    if (r->aborted || r->finished)
        return;
    r->aborted = true;
    r->c->st.put_aborts++;
    if (r->mode == OL_SE_MODE_PART)
        ol_se_mpu_leave(r, false); /* it can no longer commit: Complete need not wait */
    r->in_api = true;
    if (!ol_se_advance(r))
        r->in_api = false;
}

unsigned ol_put_upload_algo(const struct ol_put *p) { return p->r.ualgo; }
