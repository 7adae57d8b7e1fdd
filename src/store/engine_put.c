/*
 * engine_put.c - streaming PUT: stripes encoded into the request's slots
 * and written to tmp shard files while the body arrives, then the commit
 * of engine.h's header (fsync, rename of the data dir, metadata written
 * and renamed, quorum, old data removed or everything undone).
 *
 * Phases (r->phase), each waiting for every drive's steps to end:
 *   PREP    statx bucket; mkdir tmp/<tid>; create tmp/<tid>/part.1
 *   DATA    slot writes (no drive steps); ends when finished and idle
 *   SYNC    fdatasync + close part.1; fsync tmp/<tid>
 *   COMMIT  mkdirs, rename data dir, read old meta, write + rename new meta
 *   CLEAN   old data dirs removed; failed drives' leftovers undone
 *   UNDO    every drive put back (below quorum)
 *   ABORT   like UNDO, for ol_put_abort; no callback at the end
 */
#include "store/engine_int.h"

#include "store/bitrot.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>

enum { PH_PREP = 1, PH_DATA, PH_SYNC, PH_COMMIT, PH_CLEAN, PH_UNDO, PH_ABORT };

enum {
    P_STAT = 1, P_MKTMP, P_OPEN,
    S_SYNC, S_CLOSE, S_DIRSYNCED,
    C_MKAB, C_MKOBJ, C_AB_SYNCED, C_OBJ_SYNCED, C_RENAME, C_MOPEN, C_MREAD, C_MCLOSE,
    C_TOPEN, C_TWRITE, C_TSYNC, C_TCLOSE, C_MRENAME, C_OSYNCED, C_FAILCLOSE,
    K_UNLINK, K_RMDIR,
    U_STEP, U_TOPEN, U_TWRITE, U_TSYNC, U_TCLOSE,
};

#define OL_SE_RETRIES 3

static uint32_t stride(const struct ol_sreq *r) { return OL_BITROT_HDR_SIZE + r->B; }

static unsigned healthy(const struct ol_sreq *r)
{
    unsigned n = 0;
    for (unsigned i = 0; i < r->n; i++)
        n += !r->d[i].err;
    return n;
}

/* ---- slots -------------------------------------------------------------------------- */

static void slot_init(struct ol_sreq *r, struct ol_sslot *sl, uint64_t stripe)
{
    uint64_t start = stripe * r->SD;
    uint64_t left = r->size - start;
    sl->stripe = stripe;
    sl->len = (uint32_t)(left < r->SD ? left : r->SD);
    sl->blen = (uint32_t)ol_ec_shard_len(sl->len, r->k);
    sl->fill = 0;
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

static bool want_pause(const struct ol_sreq *r)
{
    uint64_t left = r->size - r->written;
    uint64_t need = left < OL_STORE_WRITE_MAX ? left : OL_STORE_WRITE_MAX;
    return left && space(r) < need;
}

/* Zero-fills the padding, computes parity, seals each shard block. */
static void seal(struct ol_sreq *r, struct ol_sslot *sl)
{
    uint32_t blen = sl->blen, st = stride(r);
    if (blen) {
        uint8_t *data[OL_EC_MAX_DATA], *parity[OL_EC_MAX_PARITY];
        for (unsigned j = 0; j < r->k; j++) {
            uint64_t start = (uint64_t)j * blen;
            uint8_t *p = sl->base + (size_t)j * st + OL_BITROT_HDR_SIZE;
            if (start + blen > sl->len) {
                uint32_t from = sl->len > start ? (uint32_t)(sl->len - start) : 0;
                memset(p + from, 0, blen - from);
            }
            data[j] = p;
        }
        for (unsigned i = 0; i < r->m; i++)
            parity[i] = sl->base + (size_t)(r->k + i) * st + OL_BITROT_HDR_SIZE;
        ol_ec_encode(r->ec, blen, data, parity);
        if (!r->inline_obj)
            for (unsigned i = 0; i < r->n; i++) {
                uint8_t *b = sl->base + (size_t)i * st;
                ol_bitrot_seal(ol_se_seed(r->ddir, i), sl->stripe, b + OL_BITROT_HDR_SIZE, blen, b);
            }
    }
    sl->state = OL_SE_SL_SEALED;
}

static bool slots_io(const struct ol_sreq *r)
{
    for (unsigned i = 0; i < OL_SE_SLOTS; i++)
        if (r->slot[i].state == OL_SE_SL_IO)
            return true;
    return false;
}

static bool slots_idle(const struct ol_sreq *r)
{
    for (unsigned i = 0; i < OL_SE_SLOTS; i++)
        if (r->slot[i].state == OL_SE_SL_IO || r->slot[i].state == OL_SE_SL_SEALED)
            return false;
    return true;
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
        uint32_t st = stride(r), len = OL_BITROT_HDR_SIZE + sl->blen;
        sl->state = OL_SE_SL_IO;
        sl->pending = 0;
        for (unsigned pos = 0; pos < r->n; pos++) {
            struct ol_sdrv *d = &r->d[pos];
            if (d->err || d->fd < 0)
                continue;
            struct ol_sop *w = &r->w[si][pos];
            ol_se_issue(r, w, ol_loop_write(r->c->loop, &w->op, d->fd,
                                            sl->base + (size_t)d->shard * st, len,
                                            sl->stripe * st));
            sl->pending++;
        }
        if (!sl->pending) {
            sl->state = OL_SE_SL_FREE;
            r->status = -EIO;
            return;
        }
    }
}

void ol_se_put_slot(struct ol_sreq *r, unsigned slot, unsigned pos, int res)
{
    struct ol_sslot *sl = &r->slot[slot];
    struct ol_sdrv *d = &r->d[pos];
    if (res != (int)(OL_BITROT_HDR_SIZE + sl->blen) && !d->err)
        d->err = res < 0 ? res : -EIO;
    if (--sl->pending == 0) {
        sl->state = OL_SE_SL_FREE;
        if (r->status == 0 && healthy(r) < r->wq)
            r->status = -EIO;
        next_fill(r);
    }
    ol_se_advance(r);
}

/* ---- drive steps ---------------------------------------------------------------------- */

static void drive_fail(struct ol_sdrv *d, int err)
{
    if (!d->err)
        d->err = err;
    if (d->fd >= 0) {
        d->step = C_FAILCLOSE;
        ol_se_close(d, d->fd);
        d->fd = -1;
        return;
    }
    ol_se_drive_end(d);
}

static void commit_start(struct ol_sdrv *d)
{
    d->step = C_MKAB;
    ol_se_mkdirat(d, d->s.r->p_ab);
}

/* Encodes this drive's new metadata file (old versions kept, the null
 * version replaced) and starts writing it to tmp. */
static void commit_build(struct ol_sdrv *d)
{
    struct ol_sreq *r = d->s.r;
    const uint8_t *old = NULL;
    size_t oldlen = 0;
    if (d->had_old) {
        ol_se_meta_decode(r, d);
        switch (d->ms) {
        case OL_SE_M_OK:
        case OL_SE_M_OTHER: {
            static const uint8_t null_vid[OL_META_ID_LEN];
            old = d->mbuf;
            oldlen = d->mlen;
            struct ol_meta_version ov;
            if (ol_meta_find(&d->mf, null_vid, &ov) >= 0 && ov.type == OL_META_OBJECT &&
                !ov.has_inline && memcmp(ov.data_dir, null_vid, 16) != 0 &&
                memcmp(ov.data_dir, r->ddir, 16) != 0) {
                d->v = ov;
                d->old_dd = true;
            }
            break;
        }
        case OL_SE_M_BAD:
            break; /* a corrupt file is replaced by a fresh one */
        default:
            return drive_fail(d, -EIO); /* another key's file, a newer format, too big */
        }
    }
    struct ol_meta_version v = r->tv;
    v.ec.index = d->shard;
    if (r->inline_obj) {
        v.has_inline = true;
        v.inline_data.p = r->slot[0].base + (size_t)d->shard * stride(r) + OL_BITROT_HDR_SIZE;
        v.inline_data.len = r->slot[0].blen;
    }
    int n = ol_meta_put_version(old, oldlen, r->key, r->klen, &v, true, d->nbuf,
                                r->c->s->meta_cap);
    if (n < 0)
        return drive_fail(d, n == -ENOSPC || n == -E2BIG ? -EFBIG : n);
    d->nlen = (uint32_t)n;
    d->step = C_TOPEN;
    ol_se_openat(d, r->p_tmeta, O_CREAT | O_TRUNC | O_WRONLY, 0600);
}

/* The next step after the directories exist: data dir in, then metadata. */
static void commit_dirs_ready(struct ol_sdrv *d)
{
    struct ol_sreq *r = d->s.r;
    if (!r->inline_obj && !d->renamed) {
        d->step = C_RENAME;
        ol_se_renameat(d, r->p_tdir, r->p_ddir);
    } else if (d->meta_ready) {
        d->step = C_MRENAME;
        ol_se_renameat(d, r->p_tmeta, r->p_meta);
    } else {
        d->step = C_MOPEN;
        ol_se_openat(d, r->p_meta, O_RDONLY, 0);
    }
}

/* Removing the replaced version's data dir: its parts, then itself. */
static void clean_next(struct ol_sdrv *d)
{
    struct ol_sreq *r = d->s.r;
    unsigned parts = d->v.part_count ? d->v.part_count : 1;
    if (d->iter < parts) {
        struct ol_meta_part pt = {.number = 1};
        if (d->v.part_count)
            ol_meta_part_at(&d->v, d->iter, &pt);
        char sfx[24];
        snprintf(sfx, sizeof sfx, "/part.%u", pt.number);
        ol_se_path_id(d->path, r->p_obj, d->v.data_dir, sfx);
        d->step = K_UNLINK;
        ol_se_unlinkat(d, d->path, 0);
        return;
    }
    ol_se_path_id(d->path, r->p_obj, d->v.data_dir, NULL);
    d->step = K_RMDIR;
    ol_se_unlinkat(d, d->path, AT_REMOVEDIR);
}

/* Putting a drive back: a checklist, one op per item (errors ignored). */
static void undo_next(struct ol_sdrv *d)
{
    struct ol_sreq *r = d->s.r;
    for (;;) {
        switch (d->iter++) {
        case 0:
            if (d->fd >= 0) {
                d->step = U_STEP;
                ol_se_close(d, d->fd);
                d->fd = -1;
                return;
            }
            break;
        case 1:
            if (!d->committed)
                break;
            if (d->had_old && d->mlen) { /* rewrite the old bytes */
                d->step = U_TOPEN;
                ol_se_openat(d, r->p_tmeta, O_CREAT | O_TRUNC | O_WRONLY, 0600);
            } else {
                d->step = U_STEP;
                ol_se_unlinkat(d, r->p_meta, 0);
            }
            return;
        case 2:
            if (d->renamed || d->made_part) {
                d->step = U_STEP;
                ol_se_unlinkat(d, d->renamed ? r->p_part : r->p_tpart, 0);
                return;
            }
            break;
        case 3:
            if (d->renamed || d->made_tmp) {
                d->step = U_STEP;
                ol_se_unlinkat(d, d->renamed ? r->p_ddir : r->p_tdir, AT_REMOVEDIR);
                return;
            }
            break;
        case 4:
            if (d->tmeta) {
                d->step = U_STEP;
                ol_se_unlinkat(d, r->p_tmeta, 0);
                return;
            }
            break;
        case 5:
            if (d->made_obj) {
                d->step = U_STEP;
                ol_se_unlinkat(d, r->p_obj, AT_REMOVEDIR);
                return;
            }
            break;
        case 6:
            if (d->made_ab) {
                d->step = U_STEP;
                ol_se_unlinkat(d, r->p_ab, AT_REMOVEDIR);
                return;
            }
            break;
        default:
            return ol_se_drive_end(d);
        }
    }
}

void ol_se_put_drive(struct ol_sdrv *d, int res)
{
    struct ol_sreq *r = d->s.r;
    if (ol_se_fsync_step(d, &res))
        return;
    switch (d->step) {
    /* PREP */
    case P_STAT:
        if (res == -ENOENT || res == -ENOTDIR) {
            d->ms = OL_SE_M_NOBUCKET;
            return drive_fail(d, -ENOENT);
        }
        if (res < 0)
            return drive_fail(d, res);
        d->bucket = true;
        if (r->inline_obj)
            return ol_se_drive_end(d);
        d->step = P_MKTMP;
        ol_se_mkdirat(d, r->p_tdir);
        return;
    case P_MKTMP:
        if (res < 0)
            return drive_fail(d, res);
        d->made_tmp = true;
        d->step = P_OPEN;
        ol_se_openat(d, r->p_tpart, O_CREAT | O_EXCL | O_WRONLY, 0600);
        return;
    case P_OPEN:
        if (res < 0)
            return drive_fail(d, res);
        d->fd = res;
        d->made_part = true;
        return ol_se_drive_end(d);
    /* SYNC */
    case S_SYNC:
        if (res < 0 && !d->err)
            d->err = res;
        d->step = S_CLOSE;
        ol_se_close(d, d->fd);
        d->fd = -1;
        return;
    case S_CLOSE:
        if (d->err)
            return ol_se_drive_end(d);
        return ol_se_fsync_dir(d, r->p_tdir, S_DIRSYNCED);
    case S_DIRSYNCED:
        if (res < 0 && !d->err)
            d->err = res;
        return ol_se_drive_end(d);
    /* COMMIT */
    case C_MKAB:
        if (res == 0)
            d->made_ab = true;
        else if (res != -EEXIST)
            return drive_fail(d, res);
        d->step = C_MKOBJ;
        ol_se_mkdirat(d, r->p_obj);
        return;
    case C_MKOBJ:
        if (res == -ENOENT && d->retries++ < OL_SE_RETRIES)
            return commit_start(d); /* <ab> vanished under a DELETE */
        if (res == 0)
            d->made_obj = true;
        else if (res != -EEXIST)
            return drive_fail(d, res);
        if (d->made_ab)
            return ol_se_fsync_dir(d, r->p_objects, C_AB_SYNCED);
        res = 0;
        /* fall through */
    case C_AB_SYNCED:
        if (res < 0)
            return drive_fail(d, res);
        if (d->made_obj)
            return ol_se_fsync_dir(d, r->p_ab, C_OBJ_SYNCED);
        res = 0;
        /* fall through */
    case C_OBJ_SYNCED:
        if (res < 0)
            return drive_fail(d, res);
        return commit_dirs_ready(d);
    case C_RENAME:
        if (res == -ENOENT && d->retries++ < OL_SE_RETRIES)
            return commit_start(d); /* <hash> vanished under a DELETE */
        if (res < 0)
            return drive_fail(d, res);
        d->renamed = true;
        d->made_tmp = d->made_part = false;
        d->step = C_MOPEN;
        ol_se_openat(d, r->p_meta, O_RDONLY, 0);
        return;
    case C_MOPEN:
        if (res == -ENOENT)
            return commit_build(d);
        if (res < 0)
            return drive_fail(d, res);
        d->fd = res;
        d->step = C_MREAD;
        ol_se_read(d, d->fd, d->mbuf, r->c->s->meta_cap, 0);
        return;
    case C_MREAD:
        if (res < 0)
            return drive_fail(d, res);
        d->mlen = (uint32_t)res;
        d->step = C_MCLOSE;
        ol_se_close(d, d->fd);
        d->fd = -1;
        return;
    case C_MCLOSE:
        d->had_old = true;
        return commit_build(d);
    case C_TOPEN:
        if (res < 0)
            return drive_fail(d, res);
        d->fd = res;
        d->tmeta = true;
        d->step = C_TWRITE;
        ol_se_write(d, d->fd, d->nbuf, d->nlen, 0);
        return;
    case C_TWRITE:
        if (res != (int)d->nlen)
            return drive_fail(d, res < 0 ? res : -EIO);
        d->step = C_TSYNC;
        ol_se_fsync(d, d->fd, 0);
        return;
    case C_TSYNC:
        if (res < 0)
            return drive_fail(d, res);
        d->step = C_TCLOSE;
        ol_se_close(d, d->fd);
        d->fd = -1;
        return;
    case C_TCLOSE:
        d->meta_ready = true;
        d->step = C_MRENAME;
        ol_se_renameat(d, r->p_tmeta, r->p_meta);
        return;
    case C_MRENAME:
        if (res == -ENOENT && d->retries++ < OL_SE_RETRIES)
            return commit_start(d); /* an inline object's <hash> vanished */
        if (res < 0)
            return drive_fail(d, res);
        d->tmeta = false;
        d->committed = true;
        return ol_se_fsync_dir(d, r->p_obj, C_OSYNCED);
    case C_OSYNCED:
        if (res < 0 && !d->err)
            d->err = res; /* visible but maybe not durable: not counted */
        return ol_se_drive_end(d);
    case C_FAILCLOSE:
        return ol_se_drive_end(d);
    /* CLEAN */
    case K_UNLINK:
        d->iter++;
        return clean_next(d);
    case K_RMDIR:
        return ol_se_drive_end(d);
    /* UNDO / ABORT */
    case U_STEP:
        return undo_next(d);
    case U_TOPEN:
        if (res < 0)
            return undo_next(d);
        d->fd = res;
        d->tmeta = true;
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
        if (ol_se_dfd(r, pos) < 0)
            continue;
        switch (phase) {
        case PH_SYNC:
            if (d->fd < 0)
                break;
            ol_se_drive_begin(d);
            if (d->err) { /* failed during DATA: only its file to close */
                d->step = S_CLOSE;
                ol_se_close(d, d->fd);
                d->fd = -1;
            } else {
                d->step = S_SYNC;
                ol_se_fsync(d, d->fd, 1);
            }
            break;
        case PH_COMMIT:
            if (d->err)
                break;
            ol_se_drive_begin(d);
            commit_start(d);
            break;
        case PH_CLEAN:
            if (d->committed && !d->err) {
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

static bool put_done(struct ol_sreq *r, int status)
{
    if (!ol_se_can_emit(r))
        return false;
    struct ol_store_stats *st = &r->c->st;
    if (status == 0) {
        unsigned ok = 0;
        for (unsigned i = 0; i < r->n; i++)
            ok += r->d[i].committed && !r->d[i].err;
        st->puts++;
        st->put_bytes += r->size;
        if (ok < r->n) {
            st->write_drive_failures += r->n - ok;
            st->needs_heal++;
        }
    } else {
        st->put_errors++;
    }
    ol_se_done(r, status);
    return true;
}

/* After PREP: is the bucket there, are enough drives ready? */
static void prep_check(struct ol_sreq *r)
{
    unsigned has = 0, nob = 0;
    for (unsigned i = 0; i < r->n; i++) {
        has += r->d[i].bucket;
        nob += r->d[i].ms == OL_SE_M_NOBUCKET;
    }
    if (has < r->rq)
        r->status = has == 0 && nob >= r->rq ? OL_STORE_ENOBUCKET : -EIO;
    else if (healthy(r) < r->wq)
        r->status = -EIO;
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
    if (r->paused && !r->finished && !want_pause(r) && ol_se_can_emit(r)) {
        r->paused = false;
        ol_se_emit(r, OL_STORE_EV_READY, 0);
        return false;
    }
    if (r->finished && slots_idle(r))
        start_phase(r, r->inline_obj ? PH_COMMIT : PH_SYNC);
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
            r->status = -EIO;
            start_phase(r, PH_UNDO);
        } else {
            start_phase(r, PH_COMMIT);
        }
        return false;
    case PH_COMMIT: {
        unsigned ok = 0;
        for (unsigned i = 0; i < r->n; i++)
            ok += r->d[i].committed && !r->d[i].err;
        if (ok < r->wq) {
            r->status = -EIO;
            start_phase(r, PH_UNDO);
        } else {
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
        ol_se_req_put(r);
        return true;
    }
    return false;
}

/* ---- API --------------------------------------------------------------------------------- */

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
    r->m = m;
    r->k = r->n - m;
    r->ec = c->ec[m];
    r->wq = ol_layout_write_quorum(r->n, m);
    r->rq = ol_layout_read_quorum(r->n, m);
    uint64_t h = ol_layout_object_hash(s->deployment, r->bucket, r->blen, r->key, r->klen);
    ol_layout_distribution(h, r->n, r->dist);
    for (unsigned p = 0; p < r->n; p++)
        r->drv_of[r->dist[p]] = (uint8_t)p;
    r->size = a->size;
    r->B = (uint32_t)ol_ec_shard_len(s->stripe_bytes, r->k);
    r->SD = (uint64_t)r->k * r->B;
    r->nstripes = (r->size + r->SD - 1) / r->SD;
    r->inline_obj = r->size <= s->inline_max;
    ol_se_random_id(c, r->tid);
    if (!r->inline_obj)
        ol_se_random_id(c, r->ddir);
    ol_se_path_id(r->p_tdir, OL_FORMAT_DIR "/tmp", r->tid, NULL);
    ol_se_path_id(r->p_tpart, OL_FORMAT_DIR "/tmp", r->tid, "/part.1");
    ol_se_path_id(r->p_tmeta, OL_FORMAT_DIR "/tmp", r->tid, ".meta");
    ol_se_path_id(r->p_ddir, r->p_obj, r->ddir, NULL);
    ol_se_path_id(r->p_part, r->p_obj, r->ddir, "/part.1");
    ol_se_drives_init(r);
    for (unsigned p = 0; p < r->n; p++)
        r->d[p].shard = r->dist[p];
    next_fill(r);
    r->phase = PH_PREP;
    r->in_api = true;
    ol_se_phase_begin(r);
    for (unsigned p = 0; p < r->n; p++) {
        struct ol_sdrv *d = &r->d[p];
        if (d->err)
            continue;
        ol_se_drive_begin(d);
        d->step = P_STAT;
        ol_se_statx(d, r->p_bucket);
    }
    ol_se_phase_started(r);
    r->in_api = false;
    *out = (struct ol_put *)r;
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
    uint32_t st = stride(r);
    while (len) {
        struct ol_sslot *sl = &r->slot[r->cur];
        uint32_t o = sl->fill, j = o / sl->blen, within = o % sl->blen;
        size_t n = sl->blen - within;
        if (n > sl->len - o)
            n = sl->len - o;
        if (n > len)
            n = len;
        memcpy(sl->base + (size_t)j * st + OL_BITROT_HDR_SIZE + within, src, n);
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
    struct ol_meta_version t = *v;
    struct ol_meta_part part;
    memset(&part, 0, sizeof part);
    part.number = 1;
    part.size = part.actual_size = r->size;
    memcpy(part.etag, v->etag, 16);
    memcpy(part.cks, v->cks.sum, sizeof part.cks);
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
    r->in_api = true;
    if (!ol_se_advance(r))
        r->in_api = false;
}
