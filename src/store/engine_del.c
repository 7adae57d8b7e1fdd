/*
 * engine_del.c - DELETE of a whole object on every drive of its set: read
 * the metadata (to learn the versions' data), unlink it, fsync the object
 * directory, remove every version's shard files (and multipart objects'
 * data dirs), then the object directory when it is empty. Its <ab>
 * parent stays (one of the bucket's 256, removed with the bucket): the
 * next PUT of a key under it then makes one directory, not two, and does
 * not first fail on the missing parent (two io-wq steps fewer in its
 * commit). A drive without the file (or with another key's file) already
 * does not hold the object.
 *
 * DELETE of one version (ol_delete_version): the same read; a drive
 * without the version is done; when it is the file's only version, the
 * whole-object removal above; else the file without it is written to
 * tmp/<tid>.meta, fsynced, renamed over meta, the object directory
 * fsynced, then that version's data removed. Both hold the key's
 * commit lock (engine_ver.c) from before the read to the end: phase 0
 * waits for it.
 */
#include "store/engine_int.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>

enum { D_OPEN = 1, D_READ, D_CLOSE, D_STAT, D_UNLINK, D_SYNCED, D_DATA, D_RMOBJ,
       D_FAILCLOSE, D_TOPEN, D_TWRITE, D_TSYNC, D_TCLOSE, D_TRENAME, D_TSYNCED, D_TUNLINK };

static void drive_fail(struct ol_sdrv *d, int err) { ol_se_drive_fail(d, err, D_FAILCLOSE); }

/* Next removal of some version's data (its shard files, then its data dir
 * if it has one: ol_se_data_rm); then the object directory. d->old_dd: a
 * version's data is being removed. */
static void data_next(struct ol_sdrv *d)
{
    struct ol_sreq *r = d->s.r;
    static const uint8_t zero[16];
    while (!d->old_dd && !d->one && (d->ms == OL_SE_M_OK || d->ms == OL_SE_M_OTHER)) {
        if (ol_meta_next(&d->mf, &d->v) != 1)
            break;
        if (d->v.type == OL_META_OBJECT && !d->v.has_inline && memcmp(d->v.data_dir, zero, 16)) {
            d->old_dd = true;
            d->iter2 = 0;
        }
    }
    int flags;
    if (d->old_dd && ol_se_data_rm(d->path, &flags, r->p_obj, &d->v, d->iter2++)) {
        d->step = D_DATA;
        ol_se_unlinkat(d, d->path, flags);
        return;
    }
    if (d->old_dd) { /* that version's data is gone: the next one's */
        d->old_dd = false;
        return data_next(d);
    }
    if (d->one)
        return ol_se_drive_end(d); /* other versions stay */
    d->step = D_RMOBJ;
    ol_se_unlinkat(d, r->p_obj, AT_REMOVEDIR);
}

/* After the read for one version (DELETE of it, its tag set): false when
 * the drive is done already (a corrupt copy, left for heal; or the version
 * is not on it); else it holds the version (d->v) and counts as found. */
static bool version_here(struct ol_sdrv *d)
{
    if (d->ms == OL_SE_M_BAD) {
        drive_fail(d, -EIO);
        return false;
    }
    if (d->v.type == 0) {
        d->committed = true; /* nothing of it here */
        ol_se_drive_end(d);
        return false;
    }
    d->valid = true;
    return true;
}

/* DELETE of a version, after the read: d->v is the version (type 0: not
 * on this drive). */
static void version_start(struct ol_sdrv *d)
{
    struct ol_sreq *r = d->s.r;
    struct ol_delete_args *a = r->da;
    if (!version_here(d))
        return;
    if (d->v.type == OL_META_DELETE_MARKER)
        a->was_marker = true;
    if (d->mf.count == 1) {   /* the last version: the object goes */
        ol_meta_rewind(&d->mf);
        d->step = D_UNLINK;
        ol_se_unlinkat(d, r->p_meta, 0);
        return;
    }
    int n = ol_meta_remove_version(d->mbuf, d->mlen, r->want_vid, d->nbuf, r->c->s->meta_cap);
    struct ol_meta_file nf;
    struct ol_meta_version lv;
    if (n < 0 || ol_meta_open(d->nbuf, (size_t)n, &nf) < 0 || ol_meta_latest(&nf, &lv) < 0)
        return drive_fail(d, -EIO);
    static const uint8_t zero[16];
    a->latest = lv.type;
    a->more = nf.count > 1 || memcmp(lv.vid, zero, 16) != 0;
    a->lv = lv;
    d->nlen = (uint32_t)n;
    d->step = D_TOPEN;
    ol_se_openat(d, r->p_tmeta, O_CREAT | O_TRUNC | O_WRONLY, 0600);
}

/* Tag set rewrite, after the read: d->v is the version (type 0: not on
 * this drive). */
static void tagging_start(struct ol_sdrv *d)
{
    struct ol_sreq *r = d->s.r;
    struct ol_tagging_args *a = r->ta;
    if (!version_here(d))
        return;
    if (d->v.type == OL_META_DELETE_MARKER) {
        a->is_marker = true; /* markers have no tags: nothing to write */
        d->committed = true;
        return ol_se_drive_end(d);
    }
    struct ol_meta_version nv = d->v;
    nv.tagging.p = a->tagging;
    nv.tagging.len = a->tagging_len;
    int n = ol_meta_update_version(d->mbuf, d->mlen, &nv, d->nbuf, r->c->s->meta_cap);
    if (n < 0)
        return drive_fail(d, n == -ENOSPC || n == -E2BIG ? -E2BIG : -EIO);
    d->nlen = (uint32_t)n;
    d->step = D_TOPEN;
    ol_se_openat(d, r->p_tmeta, O_CREAT | O_TRUNC | O_WRONLY, 0600);
}

void ol_se_del_drive(struct ol_sdrv *d, int res)
{
    struct ol_sreq *r = d->s.r;
    if (ol_se_fsync_step(d, &res))
        return;
    switch (d->step) {
    case D_OPEN:
        if (res == -ENOENT || res == -ENOTDIR) {
            d->step = D_STAT;
            ol_se_statx(d, r->p_bucket);
            return;
        }
        if (res < 0)
            return drive_fail(d, res);
        d->fd = res;
        d->step = D_READ;
        d->mlen = 0;
        ol_se_read(d, d->fd, d->mbuf, r->c->s->meta_cap, 0);
        return;
    case D_READ:
        if (res < 0)
            return drive_fail(d, res);
        /* a short read is not the file's end (a version's removal rewrites
         * these bytes): read on until 0 or full */
        d->mlen += (uint32_t)res;
        if (res > 0 && d->mlen < r->c->s->meta_cap) {
            ol_se_read(d, d->fd, d->mbuf + d->mlen, r->c->s->meta_cap - d->mlen, d->mlen);
            return;
        }
        d->step = D_CLOSE;
        ol_se_close(d, d->fd);
        d->fd = -1;
        return;
    case D_CLOSE:
        ol_se_meta_decode(r, d);
        if (d->ms == OL_SE_M_KEY)
            return ol_se_drive_end(d); /* another key's object: not ours to remove */
        if (d->ms == OL_SE_M_ERR)
            return drive_fail(d, -EIO);
        if (r->da)
            return version_start(d);
        if (r->ta)
            return tagging_start(d);
        d->step = D_UNLINK;
        ol_se_unlinkat(d, r->p_meta, 0);
        return;
    case D_STAT:
        return ol_se_bucket_stat_end(d, res);
    case D_UNLINK:
        if (res == -ENOENT) {
            d->committed = true; /* gone already (a concurrent DELETE) */
            return data_next(d);
        }
        if (res < 0)
            return drive_fail(d, res);
        return ol_se_fsync_dir(d, r->p_obj, D_SYNCED);
    case D_SYNCED:
        if (res < 0)
            return drive_fail(d, res);
        d->committed = true;
        return data_next(d);
    case D_DATA:
        return data_next(d);
    case D_TOPEN:
        if (res < 0)
            return drive_fail(d, res);
        d->fd = res;
        d->step = D_TWRITE;
        ol_se_write(d, d->fd, d->nbuf, d->nlen, 0);
        return;
    case D_TWRITE:
        if (res != (int)d->nlen)
            d->err = res < 0 ? res : -EIO;
        d->step = D_TSYNC;
        ol_se_fsync(d, d->fd, 0);
        return;
    case D_TSYNC:
        if (res < 0 && !d->err)
            d->err = res;
        d->step = D_TCLOSE;
        ol_se_close(d, d->fd);
        d->fd = -1;
        return;
    case D_TCLOSE:
        if (d->err) {
            d->step = D_TUNLINK;
            ol_se_unlinkat(d, r->p_tmeta, 0);
            return;
        }
        d->step = D_TRENAME;
        ol_se_renameat(d, r->p_tmeta, r->p_meta);
        return;
    case D_TRENAME:
        if (res < 0)
            return drive_fail(d, res);
        return ol_se_fsync_dir(d, r->p_obj, D_TSYNCED);
    case D_TSYNCED: {
        static const uint8_t zero[16];
        if (res < 0)
            return drive_fail(d, res);
        d->committed = true;
        if (r->ta)
            return ol_se_drive_end(d); /* the data stays as it is */
        d->one = true;
        if (d->v.type == OL_META_OBJECT && !d->v.has_inline && memcmp(d->v.data_dir, zero, 16)) {
            d->old_dd = true;
            d->iter2 = 0;
        }
        return data_next(d);
    }
    case D_RMOBJ: /* when not empty: leftovers for the scanner */
    default:      /* D_FAILCLOSE */
        return ol_se_drive_end(d);
    }
}

/* Phase 1 (the read on every drive) once the key's commit lock is held. */
static void del_start(struct ol_sreq *r)
{
    if (!ol_se_key_lock(r)) {
        if (r->rl_failed && ol_se_can_emit(r)) {   /* no owner of the set answered (a cluster store) */
            ol_se_done(r, -EBUSY);
            return;
        }
        r->kick = true;
        ol_timer_arm(r->c->loop, &r->timer, OL_SE_LOCK_RETRY_MS);
        return;
    }
    r->phase = 1;
    ol_se_open_phase(r, r->p_meta, D_OPEN);
}

bool ol_se_del_step(struct ol_sreq *r)
{
    if (r->phase == 0) {
        del_start(r);
        return false;
    }
    if (r->active || !ol_se_can_emit(r))
        return false;
    const struct ol_store *s = r->c->s;
    unsigned m = s->parity, ok = 0, nob = 0, present = 0;
    for (unsigned i = 0; i < r->n; i++) {
        const struct ol_sdrv *d = &r->d[i];
        if (d->ms == OL_SE_M_OK && d->v.ec.k + d->v.ec.m == r->n)
            m = d->v.ec.m;
        ok += !d->err && (d->committed || d->ms == OL_SE_M_NONE || d->ms == OL_SE_M_KEY);
        nob += d->ms == OL_SE_M_NOBUCKET;
        present += !d->err && d->ms != OL_SE_M_NOBUCKET && d->ms != OL_SE_M_UNKNOWN;
    }
    struct ol_store_stats *st = &r->c->st;
    if (ok >= ol_layout_write_quorum(r->n, m)) {
        unsigned had = 0;
        for (unsigned i = 0; i < r->n; i++)
            had += r->d[i].valid;
        if (r->da)
            r->da->found = had > 0;
        if (r->ta) {
            r->ta->found = had > 0;
            ol_se_done(r, 0);
            return true;
        }
        st->deletes++;
        if (ok < r->n) {
            st->write_drive_failures += r->n - ok;
            st->needs_heal++;
        }
        ol_se_listing_delete(r); /* committed: the listing follows, still locked */
        ol_se_done(r, 0);
        return true;
    }
    unsigned changed = 0; /* drives that removed the object, or the version */
    for (unsigned i = 0; i < r->n; i++) {
        const struct ol_sdrv *d = &r->d[i];
        changed += d->committed && (r->da ? d->valid
                                          : d->ms == OL_SE_M_OK || d->ms == OL_SE_M_OTHER);
    }
    if (changed && !r->ta) /* below quorum, but what was removed stays removed */
        ol_se_listing_unknown(r->c->s, "a delete failed after changing some drives");
    int status = present == 0 && nob >= ol_layout_read_quorum(r->n, s->parity)
                     ? OL_STORE_ENOBUCKET : -EIO;
    for (unsigned i = 0; r->ta && i < r->n; i++)
        if (r->d[i].err == -E2BIG)
            status = -E2BIG;
    if (status == -EIO)
        st->delete_errors++;
    ol_se_done(r, status);
    return true;
}

int ol_delete(struct ol_store_core *c, const char *bucket, const char *key, ol_store_cb cb,
              void *ud)
{
    struct ol_sreq *r = ol_se_req_get(c, OL_SE_DEL, cb, ud);
    if (!r)
        return -EBUSY;
    ol_se_names(r, bucket, key);
    ol_se_drives_init(r);
    r->in_api = true;
    del_start(r);
    r->in_api = false;
    return 0;
}

/* A metadata rewrite of one version of bucket/key (a DELETE of it, its
 * tag set): the request, its names, a temporary metadata name, started. */
static int version_op(struct ol_store_core *c, const char *bucket, const char *key,
                      const uint8_t vid[16], struct ol_delete_args *da,
                      struct ol_tagging_args *ta, ol_store_cb cb, void *ud)
{
    struct ol_sreq *r = ol_se_req_get(c, OL_SE_DEL, cb, ud);
    if (!r)
        return -EBUSY;
    ol_se_names(r, bucket, key);
    ol_se_drives_init(r);
    r->da = da;
    r->ta = ta;
    r->has_vid = true;
    memcpy(r->want_vid, vid, 16);
    ol_se_random_id(c, r->tid);
    ol_se_path_id(r->p_tmeta, OL_FORMAT_DIR "/tmp", r->tid, ".meta");
    r->in_api = true;
    del_start(r);
    r->in_api = false;
    return 0;
}

int ol_delete_version(struct ol_store_core *c, struct ol_delete_args *a, ol_store_cb cb,
                      void *ud)
{
    a->found = a->was_marker = a->more = false;
    a->latest = 0;
    return version_op(c, a->bucket, a->key, a->vid, a, NULL, cb, ud);
}

int ol_set_tagging(struct ol_store_core *c, struct ol_tagging_args *a, ol_store_cb cb, void *ud)
{
    a->found = a->is_marker = false;
    return version_op(c, a->bucket, a->key, a->vid, NULL, a, cb, ud);
}
