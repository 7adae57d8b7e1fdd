/*
 * engine_bucket.c - bucket create / delete / exists (see engine.h): plain
 * directories <drive>/.openlake/buckets/<bucket>/objects on every drive of
 * every set.
 *
 * One set at a time (r->bset), the set's drives in parallel. Create: phase
 * MAIN mkdirs per set; on a set below write quorum, phase UNDO removes what
 * MAIN made in the sets so far. Delete: phase SCAN goes over every set
 * (statx, then rmdir of the 256 <ab> directories, stopping at a non-empty
 * one); phase RM removes objects/, uploads/ and the bucket per set. Exists:
 * statx per set (phase MAIN). ListMultipartUploads is Exists, then a read
 * of the upload registry (engine_mpu.c). PutBucketVersioning (phase MAIN):
 * statx, the versioning file (engine_ver.c) written to tmp, fsynced,
 * renamed into the bucket, the bucket fsynced; Delete removes that file
 * before the bucket directory. A bucket with uploads in progress
 * is not empty (-ENOTEMPTY: abort them first). Create and Delete hold the
 * bucket's commit lock (phase LOCK waits for it) and add or drop the
 * bucket in the listing catalog at their success (engine_listing.c).
 */
#include "store/engine_int.h"

#include "base/le.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>

enum { OL_SE_BOP_CREATE = 1, OL_SE_BOP_DELETE, OL_SE_BOP_EXISTS, OL_SE_BOP_UPLOADS,
       OL_SE_BOP_VERSIONING };
enum { OL_SE_BPH_MAIN = 1, OL_SE_BPH_UNDO, OL_SE_BPH_SCAN, OL_SE_BPH_RM, OL_SE_BPH_LOCK };
enum {
    OL_SE_B_MK = 1, OL_SE_B_MKO, OL_SE_B_SYNC1, OL_SE_B_SYNC2,
    OL_SE_B_UNO, OL_SE_B_UNB,
    OL_SE_B_STAT, OL_SE_B_SCAN,
    OL_SE_B_RMO, OL_SE_B_RMU, OL_SE_B_RMB, OL_SE_B_RMSYNC,
    OL_SE_B_XSTAT, OL_SE_B_RMV,
    OL_SE_B_VSTAT, OL_SE_B_VOPEN, OL_SE_B_VWRITE, OL_SE_B_VSYNC, OL_SE_B_VCLOSE,
    OL_SE_B_VRENAME, OL_SE_B_VSYNCED, OL_SE_B_VUNLINK,
};

static unsigned ol_se_gpos(const struct ol_sreq *r, unsigned pos) { return r->bset * r->n + pos; }
static void ol_se_bit_set(uint8_t *b, unsigned i) { b[i / 8] |= (uint8_t)(1u << (i % 8)); }
static bool ol_se_bit(const uint8_t *b, unsigned i) { return b[i / 8] & (1u << (i % 8)); }

static void ol_se_bkt_fail(struct ol_sdrv *d, int err)
{
    if (!d->err)
        d->err = err;
    ol_se_drive_end(d);
}

void ol_se_bkt_drive(struct ol_sdrv *d, int res)
{
    struct ol_sreq *r = d->s.r;
    if (ol_se_fsync_step(d, &res))
        return;
    unsigned g = ol_se_gpos(r, d->pos);
    switch (d->step) {
    /* create */
    case OL_SE_B_MK:
        if (res == 0)
            ol_se_bit_set(r->made_b, g);
        else if (res == -EEXIST)
            d->bucket = true; /* it was there */
        else
            return ol_se_bkt_fail(d, res);
        d->step = OL_SE_B_MKO;
        ol_se_mkdirat(d, r->p_objects);
        return;
    case OL_SE_B_MKO:
        if (res == 0)
            ol_se_bit_set(r->made_o, g);
        else if (res != -EEXIST)
            return ol_se_bkt_fail(d, res);
        else if (d->bucket)
            d->had_old = true; /* bucket and objects/ both there already */
        if (ol_se_bit(r->made_o, g))
            return ol_se_fsync_dir(d, r->p_bucket, OL_SE_B_SYNC1);
        res = 0;
        /* fall through */
    case OL_SE_B_SYNC1:
        if (res < 0)
            return ol_se_bkt_fail(d, res);
        if (ol_se_bit(r->made_b, g))
            return ol_se_fsync_dir(d, OL_FORMAT_DIR "/buckets", OL_SE_B_SYNC2);
        res = 0;
        /* fall through */
    case OL_SE_B_SYNC2:
        if (res < 0)
            return ol_se_bkt_fail(d, res);
        d->committed = true;
        return ol_se_drive_end(d);
    /* create, undo */
    case OL_SE_B_UNO:
        if (ol_se_bit(r->made_b, g)) {
            d->step = OL_SE_B_UNB;
            ol_se_unlinkat(d, r->p_bucket, AT_REMOVEDIR);
            return;
        }
        return ol_se_drive_end(d);
    case OL_SE_B_UNB:
        return ol_se_drive_end(d);
    /* delete, scan */
    case OL_SE_B_STAT:
        if (res == -ENOENT || res == -ENOTDIR) {
            d->ms = OL_SE_M_NOBUCKET;
            return ol_se_drive_end(d);
        }
        if (res < 0)
            return ol_se_bkt_fail(d, res);
        d->ms = OL_SE_M_NONE;
        d->iter = 0;
        d->step = OL_SE_B_SCAN;
        ol_se_join(d->path, r->p_objects, "/00", NULL);
        ol_se_unlinkat(d, d->path, AT_REMOVEDIR);
        return;
    case OL_SE_B_SCAN:
        if (res == -ENOTEMPTY || res == -EEXIST) {
            r->notempty = true;
            return ol_se_drive_end(d);
        }
        if (res < 0 && res != -ENOENT)
            return ol_se_bkt_fail(d, res);
        if (++d->iter == 256)
            return ol_se_drive_end(d);
        char ab[4];
        snprintf(ab, sizeof ab, "/%02x", d->iter & 0xffu);
        ol_se_join(d->path, r->p_objects, ab, NULL);
        ol_se_unlinkat(d, d->path, AT_REMOVEDIR);
        return;
    /* delete, removal */
    case OL_SE_B_RMO:
        if (res == -ENOTEMPTY || res == -EEXIST) {
            r->notempty = true;
            return ol_se_bkt_fail(d, -ENOTEMPTY);
        }
        if (res < 0 && res != -ENOENT)
            return ol_se_bkt_fail(d, res);
        d->step = OL_SE_B_RMU;
        ol_se_unlinkat(d, r->p_uploads, AT_REMOVEDIR);
        return;
    case OL_SE_B_RMU:
        if (res == -ENOTEMPTY || res == -EEXIST) { /* leftovers of uploads (open removes them) */
            r->notempty = true;
            return ol_se_bkt_fail(d, -ENOTEMPTY);
        }
        if (res < 0 && res != -ENOENT)
            return ol_se_bkt_fail(d, res);
        d->step = OL_SE_B_RMV;
        ol_se_unlinkat(d, r->p_part, 0); /* the versioning file */
        return;
    case OL_SE_B_RMV:
        if (res < 0 && res != -ENOENT)
            return ol_se_bkt_fail(d, res);
        d->step = OL_SE_B_RMB;
        ol_se_unlinkat(d, r->p_bucket, AT_REMOVEDIR);
        return;
    case OL_SE_B_RMB:
        if (res < 0 && res != -ENOENT)
            return ol_se_bkt_fail(d, res);
        return ol_se_fsync_dir(d, OL_FORMAT_DIR "/buckets", OL_SE_B_RMSYNC);
    case OL_SE_B_RMSYNC:
        if (res < 0)
            return ol_se_bkt_fail(d, res);
        d->committed = true;
        return ol_se_drive_end(d);
    /* exists */
    case OL_SE_B_XSTAT:
        return ol_se_bucket_stat_end(d, res);
    /* versioning: the file to tmp, fsync, rename, fsync the bucket */
    case OL_SE_B_VSTAT:
        if (res < 0)
            return ol_se_bucket_stat_end(d, res);
        d->step = OL_SE_B_VOPEN;
        ol_se_openat(d, r->p_tmeta, O_CREAT | O_TRUNC | O_WRONLY, 0600);
        return;
    case OL_SE_B_VOPEN:
        if (res < 0)
            return ol_se_bkt_fail(d, res);
        d->fd = res;
        d->step = OL_SE_B_VWRITE;
        ol_se_write(d, d->fd, r->tmpl, OL_SE_VER_FILE, 0);
        return;
    case OL_SE_B_VWRITE:
        if (res != (int)OL_SE_VER_FILE)
            d->err = res < 0 ? res : -EIO;
        d->step = d->err ? OL_SE_B_VCLOSE : OL_SE_B_VSYNC;
        if (d->err)
            ol_se_close(d, d->fd);
        else
            ol_se_fsync(d, d->fd, 0);
        return;
    case OL_SE_B_VSYNC:
        if (res < 0)
            d->err = res;
        d->step = OL_SE_B_VCLOSE;
        ol_se_close(d, d->fd);
        return;
    case OL_SE_B_VCLOSE:
        d->fd = -1;
        if (d->err) {
            d->step = OL_SE_B_VUNLINK; /* ends (default) after the unlink */
            ol_se_unlinkat(d, r->p_tmeta, 0);
            return;
        }
        d->step = OL_SE_B_VRENAME;
        ol_se_renameat(d, r->p_tmeta, r->p_part);
        return;
    case OL_SE_B_VRENAME:
        if (res < 0)
            return ol_se_bkt_fail(d, res);
        return ol_se_fsync_dir(d, r->p_bucket, OL_SE_B_VSYNCED);
    case OL_SE_B_VSYNCED:
        if (res < 0)
            return ol_se_bkt_fail(d, res);
        d->committed = true;
        return ol_se_drive_end(d);
    default:
        return ol_se_drive_end(d);
    }
}

/* Starts the current phase on set r->bset. */
static void ol_se_bkt_start_set(struct ol_sreq *r)
{
    r->set = r->bset;
    ol_se_drives_init(r);
    ol_se_phase_begin(r);
    for (unsigned i = 0; i < r->n; i++) {
        struct ol_sdrv *d = &r->d[i];
        if (d->err)
            continue;
        ol_se_drive_begin(d);
        switch (r->phase) {
        case OL_SE_BPH_MAIN:
            if (r->bop == OL_SE_BOP_CREATE) {
                d->step = OL_SE_B_MK;
                ol_se_mkdirat(d, r->p_bucket);
            } else if (r->bop == OL_SE_BOP_VERSIONING) {
                d->step = OL_SE_B_VSTAT;
                ol_se_statx(d, r->p_bucket);
            } else {
                d->step = OL_SE_B_XSTAT;
                ol_se_statx(d, r->p_bucket);
            }
            break;
        case OL_SE_BPH_UNDO: {
            unsigned g = ol_se_gpos(r, i);
            if (ol_se_bit(r->made_o, g)) {
                d->step = OL_SE_B_UNO;
                ol_se_unlinkat(d, r->p_objects, AT_REMOVEDIR);
            } else if (ol_se_bit(r->made_b, g)) {
                d->step = OL_SE_B_UNB;
                ol_se_unlinkat(d, r->p_bucket, AT_REMOVEDIR);
            } else {
                d->active = false;
                r->active--;
            }
            break;
        }
        case OL_SE_BPH_SCAN:
            d->step = OL_SE_B_STAT;
            ol_se_statx(d, r->p_bucket);
            break;
        case OL_SE_BPH_RM:
            d->step = OL_SE_B_RMO;
            ol_se_unlinkat(d, r->p_objects, AT_REMOVEDIR);
            break;
        }
    }
    ol_se_phase_started(r);
}

static void ol_se_bkt_go(struct ol_sreq *r);

bool ol_se_bkt_step(struct ol_sreq *r)
{
    if (r->active || r->inflight || !ol_se_can_emit(r))
        return false;
    if (r->phase == OL_SE_BPH_LOCK) {
        ol_se_bkt_go(r);
        return false;
    }
    const struct ol_store *s = r->c->s;
    unsigned ok = 0, present = 0, absent = 0, had = 0;
    for (unsigned i = 0; i < r->n; i++) {
        const struct ol_sdrv *d = &r->d[i];
        ok += !d->err && (d->committed || d->ms == OL_SE_M_NONE);
        present += !d->err && d->ms == OL_SE_M_NONE;
        absent += !d->err && d->ms == OL_SE_M_NOBUCKET;
        had += d->had_old;
    }
    unsigned wq = ol_layout_write_quorum(r->n, s->parity);
    unsigned rq = ol_layout_read_quorum(r->n, s->parity);
    switch (r->phase) {
    case OL_SE_BPH_MAIN:
        if (r->bop == OL_SE_BOP_CREATE) {
            if (ok < wq) {
                r->status = -EIO;
                r->phase = OL_SE_BPH_UNDO;
                r->sets_done = r->bset; /* undo sets 0..bset */
                r->bset = 0;
                ol_se_bkt_start_set(r);
                return false;
            }
            r->sets_existed += had >= wq;
        } else if (r->bop == OL_SE_BOP_VERSIONING) {
            unsigned done = 0;
            for (unsigned i = 0; i < r->n; i++)
                done += !r->d[i].err && r->d[i].committed;
            if (done >= wq)
                r->sets_present++;
            else if (absent >= rq)
                r->sets_absent++;
        } else {
            if (present >= rq)
                r->sets_present++;
            else if (present == 0 && absent >= rq)
                r->sets_absent++;
        }
        if (++r->bset < s->sets) {
            ol_se_bkt_start_set(r);
            return false;
        }
        if (r->bop == OL_SE_BOP_CREATE) {
            int st = r->sets_existed == s->sets ? -EEXIST : 0;
            if (st == 0)
                ol_se_listing_bucket(r, true);
            ol_se_done(r, st);
        } else if (r->sets_present == s->sets) {
            int st = 0;
            if (r->bop == OL_SE_BOP_UPLOADS)
                ol_se_mpu_list_fill(r);
            if (r->bop == OL_SE_BOP_VERSIONING)
                st = ol_se_ver_set(r->c->s, r->bucket, r->tmpl[6], ol_le_ld64(r->tmpl + 8));
            ol_se_done(r, st);
        }
        else
            ol_se_done(r, r->sets_absent == s->sets ? OL_STORE_ENOBUCKET : -EIO);
        return true;
    case OL_SE_BPH_UNDO:
        if (++r->bset <= r->sets_done) {
            ol_se_bkt_start_set(r);
            return false;
        }
        ol_se_done(r, r->status);
        return true;
    case OL_SE_BPH_SCAN:
        if (present == 0 && absent >= rq)
            r->sets_absent++;
        if (r->notempty || (r->bset + 1 == s->sets && ol_se_mpu_bucket_busy(r->c->s, r->bucket))) {
            ol_se_done(r, -ENOTEMPTY);
            return true;
        }
        if (++r->bset < s->sets) {
            ol_se_bkt_start_set(r);
            return false;
        }
        if (r->sets_absent == s->sets) {
            ol_se_done(r, OL_STORE_ENOBUCKET);
            return true;
        }
        /* drives that failed the scan are caught by the removal's quorum */
        r->phase = OL_SE_BPH_RM;
        r->bset = 0;
        ol_se_bkt_start_set(r);
        return false;
    case OL_SE_BPH_RM:
        if (ok < wq && r->status == 0)
            r->status = r->notempty ? -ENOTEMPTY : -EIO;
        if (++r->bset < s->sets) {
            ol_se_bkt_start_set(r);
            return false;
        }
        if (r->status == 0) {
            ol_se_ver_forget(r->c->s, r->bucket);
            ol_se_listing_bucket(r, false);
        }
        ol_se_done(r, r->status);
        return true;
    }
    return false;
}

/* Starts r->bop on set 0. A create or a delete first takes the bucket's
 * commit lock (the table of engine_ver.c, keyed by the bucket's directory),
 * held to the end of its callback, so the two commit, and update the
 * listing catalog, one after the other; while another holds it, retried
 * from the timer. */
static void ol_se_bkt_go(struct ol_sreq *r)
{
    uint8_t bop = r->bop;
    if ((bop == OL_SE_BOP_CREATE || bop == OL_SE_BOP_DELETE) &&
        !ol_se_path_lock(r, r->p_bucket)) {
        if (r->rl_failed && ol_se_can_emit(r)) {   /* no owner of set 0 answered (a cluster store) */
            ol_se_done(r, -EBUSY);
            return;
        }
        r->phase = OL_SE_BPH_LOCK;
        r->kick = true;
        ol_timer_arm(r->c->loop, &r->timer, OL_SE_LOCK_RETRY_MS);
        return;
    }
    r->phase = bop == OL_SE_BOP_DELETE ? OL_SE_BPH_SCAN : OL_SE_BPH_MAIN;
    ol_se_bkt_start_set(r);
}

/* Starts operation bop (no callback inside the call); 0. */
static int ol_se_bkt_run(struct ol_sreq *r, uint8_t bop)
{
    r->bop = bop;
    r->bset = 0;
    r->in_api = true;
    ol_se_bkt_go(r);
    r->in_api = false;
    return 0;
}

static int ol_se_bkt_begin(struct ol_store_core *c, uint8_t bop, const char *bucket,
                           ol_store_cb cb, void *ud)
{
    struct ol_sreq *r = ol_se_req_get(c, OL_SE_BKT, cb, ud);
    if (!r)
        return -EBUSY;
    ol_se_names(r, bucket, NULL);
    ol_se_join(r->p_uploads, r->p_bucket, "/uploads", NULL);
    ol_se_join(r->p_part, r->p_bucket, "/versioning", NULL);
    return ol_se_bkt_run(r, bop);
}

int ol_store_bucket_create(struct ol_store_core *c, const char *bucket, ol_store_cb cb, void *ud)
{
    return ol_se_bkt_begin(c, OL_SE_BOP_CREATE, bucket, cb, ud);
}

int ol_store_bucket_delete(struct ol_store_core *c, const char *bucket, ol_store_cb cb, void *ud)
{
    return ol_se_bkt_begin(c, OL_SE_BOP_DELETE, bucket, cb, ud);
}

int ol_store_bucket_exists(struct ol_store_core *c, const char *bucket, ol_store_cb cb, void *ud)
{
    return ol_se_bkt_begin(c, OL_SE_BOP_EXISTS, bucket, cb, ud);
}

int ol_mpu_list_uploads(struct ol_store_core *c, struct ol_mpu_list_uploads_args *a,
                        ol_store_cb cb, void *ud)
{
    if (a->max == 0)
        return -EINVAL;
    a->count = 0;
    a->truncated = false;
    struct ol_sreq *r = ol_se_req_get(c, OL_SE_BKT, cb, ud);
    if (!r)
        return -EBUSY;
    ol_se_names(r, a->bucket, NULL);
    r->lu = a;
    return ol_se_bkt_run(r, OL_SE_BOP_UPLOADS);
}

int ol_store_versioning_set(struct ol_store_core *c, const char *bucket,
                            enum ol_store_versioning state, ol_store_cb cb, void *ud)
{
    if (state != OL_STORE_VER_ENABLED && state != OL_STORE_VER_SUSPENDED)
        return -EINVAL;
    struct ol_sreq *r = ol_se_req_get(c, OL_SE_BKT, cb, ud);
    if (!r)
        return -EBUSY;
    ol_se_names(r, bucket, NULL);
    ol_se_join(r->p_part, r->p_bucket, "/versioning", NULL);
    ol_se_random_id(c, r->tid);
    ol_se_path_id(r->p_tmeta, OL_FORMAT_DIR "/tmp", r->tid, ".ver");
    ol_se_ver_encode(r->tmpl, (uint8_t)state, ol_se_now_ns());
    return ol_se_bkt_run(r, OL_SE_BOP_VERSIONING);
}
