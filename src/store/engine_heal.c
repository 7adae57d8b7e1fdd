/*
 * engine_heal.c - heal one object: find the drives of its set whose copy is
 * missing, stale or corrupt, rebuild their shards from the good ones and
 * write them back with the same commit discipline as a PUT.
 *
 * Owns: the decision of which drive's metadata is the object's (the
 * version list a read quorum of drives agree on), the per-drive verdicts
 * (metadata missing, corrupt or stale; a shard file missing, short or with
 * a block failing its checksum; an inline shard missing), and the rewrite
 * order: shard files first (tmp -> fdatasync -> rename into the data dir
 * -> fsync of the dir), the metadata file last (tmp -> fsync -> rename over
 * meta -> fsync of the object dir), so a drive never names data it does
 * not hold.
 *
 * Must not: run on a loop thread. Unlike the other ops it is a blocking
 * call (pread/pwrite on the drive fds) made by the healer's own thread
 * (store/heal.h): it reads every block of every shard of every version,
 * which is background work with its own rate, not a request on a core.
 * Must not make anything worse: every decision is taken after reading all
 * of the object, and when any version or part has fewer than k good shards
 * nothing is written (-EIO). Drives that are offline or hold another key's
 * file (a hash collision) are left alone.
 *
 * Writes of the same key: a read-only pass first, without locks; only when
 * it found something to repair, a second pass under the key's commit lock
 * (the one PUT, DELETE and the tag rewrite take, engine_ver.c) from its
 * first read to its last rename, so within this process no write
 * interleaves with a repair (writes meanwhile wait; conditional ones get
 * 409 ConditionalRequestConflict, as against any racing write); each
 * drive's metadata is still read again just before it is replaced (a
 * drive changed behind our back is skipped). Part files of a multipart
 * object are rebuilt without the part record that followed the blocks
 * (readers never look past the last block).
 */
#define OL_HEAL_LOCK_WAIT_MS 30000u   /* then -EBUSY: the object is left for later */
#include "store/engine_int.h"

#include "store/bitrot.h"
#include "store/ec.h"
#include "store/format.h"
#include "store/layout.h"
#include "store/meta.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

enum { H_ERR = 0, H_OK, H_NONE, H_BAD, H_KEY };

struct hdrv {
    int dfd;                  /* drive directory, -1 offline */
    int ms;                   /* H_* */
    uint8_t *buf;             /* the metadata file as read */
    size_t len;
    struct ol_meta_file mf;
    bool match;               /* its version list is the reference's */
    bool rewrite;             /* its metadata must be written */
    bool touched;             /* something was written to it */
    bool failed;              /* a shard could not be written: its metadata is not */
};

struct hctx {
    struct ol_store *s;
    const char *bucket, *key;
    size_t klen;
    unsigned set, n;
    char p_bucket[OL_SE_PATH], p_objects[OL_SE_PATH], p_ab[OL_SE_PATH], p_obj[OL_SE_PATH];
    char p_meta[OL_SE_PATH];
    struct hdrv d[OL_SE_MAXD];
    int ref;
    unsigned nv;
    struct ol_meta_version *v;   /* the reference's versions, newest first */
    uint8_t *blk;                /* n blocks of 8 + bmax bytes */
    size_t bsz;                  /* bytes of one of them */
    struct ol_ec *ec;            /* reinitialised per version geometry */
    unsigned ec_k, ec_m;
    uint64_t rng;
    struct ol_heal_result *res;
};

/* ---- small helpers ------------------------------------------------------------------- */

static int pread_full(int fd, void *buf, size_t len, uint64_t off)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, (uint8_t *)buf + got, len - got, (off_t)(off + got));
        if (n < 0)
            return errno == EINTR ? 0 : -errno;
        if (n == 0)
            return -ENODATA; /* short */
        got += (size_t)n;
    }
    return 0;
}

static int pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
    size_t put = 0;
    while (put < len) {
        ssize_t n = pwrite(fd, (const uint8_t *)buf + put, len - put, (off_t)(off + put));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        put += (size_t)n;
    }
    return 0;
}

static int fsync_dir(int dfd, const char *path)
{
    int fd = openat(dfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

/* mkdir path when missing; a new directory's parent is fsynced. Modes as a
 * PUT makes them (0700 directories, 0600 files): a healed shard is no more
 * readable to other local users than the one it replaces. */
static int mkdir_synced(int dfd, const char *path)
{
    if (mkdirat(dfd, path, 0700) < 0)
        return errno == EEXIST ? 0 : -errno;
    char parent[OL_SE_PATH];
    snprintf(parent, sizeof parent, "%s", path);
    char *slash = strrchr(parent, '/');
    if (slash)
        *slash = 0;
    return fsync_dir(dfd, parent);
}

/* Creates a tmp file for writing on drive dfd (fd or -errno); a drive whose
 * .openlake/tmp went away while serving (wiped) gets it back. */
static int tmp_create(int dfd, const char *path)
{
    int fd = openat(dfd, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno == ENOENT) {
        mkdir_synced(dfd, OL_FORMAT_DIR);
        mkdir_synced(dfd, OL_FORMAT_DIR "/tmp");
        fd = openat(dfd, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    }
    return fd < 0 ? -errno : fd;
}

static uint64_t next_rand(struct hctx *h)
{
    uint64_t x = h->rng += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* .openlake/tmp/<16 random hex>.<suffix> */
static void tmp_name(struct hctx *h, char *out, const char *suffix)
{
    snprintf(out, OL_SE_PATH, OL_FORMAT_DIR "/tmp/heal-%016llx%016llx.%s",
             (unsigned long long)next_rand(h), (unsigned long long)next_rand(h), suffix);
}

static bool same_file_versions(struct ol_meta_file *a, struct ol_meta_file *b)
{
    if (a == b)
        return true;
    if (a->count != b->count)
        return false;
    ol_meta_rewind(a);
    ol_meta_rewind(b);
    struct ol_meta_version va, vb;
    bool same = true;
    while (same && ol_meta_next(a, &va) == 1) {
        if (ol_meta_next(b, &vb) != 1 || va.type != vb.type || va.mtime_ns != vb.mtime_ns ||
            memcmp(va.vid, vb.vid, 16) != 0)
            same = false;
        else if (va.type == OL_META_OBJECT &&
                 (!ol_se_same_version(&va, &vb) || memcmp(va.ec.dist, vb.ec.dist, va.ec.k + va.ec.m)))
            same = false;
    }
    ol_meta_rewind(a);
    ol_meta_rewind(b);
    return same;
}

/* ---- reading the metadata ------------------------------------------------------------- */

/* Reads drive p's metadata file into a fresh buffer (*buf, *len); 0, -ENOENT, -errno. */
static int meta_read(struct hctx *h, unsigned p, uint8_t **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    int fd = openat(h->d[p].dfd, h->p_meta, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    int rc = fstat(fd, &st) < 0 ? -errno : 0;
    if (rc == 0 && (st.st_size < 0 || (uint64_t)st.st_size > OL_META_MAX_FILE))
        rc = -EFBIG;
    if (rc == 0) {
        *buf = malloc(st.st_size ? (size_t)st.st_size : 1);
        if (!*buf)
            rc = -ENOMEM;
        else
            rc = pread_full(fd, *buf, (size_t)st.st_size, 0);
        *len = (size_t)st.st_size;
    }
    close(fd);
    if (rc < 0) {
        free(*buf);
        *buf = NULL;
        if (rc == -ENODATA)
            rc = -EIO; /* the file shrank while read */
    }
    return rc;
}

static void meta_load(struct hctx *h, unsigned p)
{
    struct hdrv *d = &h->d[p];
    if (d->dfd < 0) {
        d->ms = H_ERR;
        return;
    }
    int rc = meta_read(h, p, &d->buf, &d->len);
    if (rc == -ENOENT || rc == -ENOTDIR) {
        d->ms = H_NONE;
        return;
    }
    if (rc < 0) {
        /* unreadable or oversized: rewritten from the others; else left alone */
        d->ms = rc == -EIO || rc == -EFBIG ? H_BAD : H_ERR;
        return;
    }
    rc = ol_meta_open(d->buf, d->len, &d->mf);
    if (rc == -EBADMSG) {
        d->ms = H_BAD;
        return;
    }
    if (rc < 0) {
        d->ms = H_ERR; /* a later format: not ours to overwrite */
        return;
    }
    if (d->mf.key.len != h->klen || memcmp(d->mf.key.p, h->key, h->klen) != 0) {
        d->ms = H_KEY;
        return;
    }
    d->ms = H_OK;
}

/* Read quorum of a file: the largest k among its objects, else the store's. */
static unsigned file_quorum(struct hctx *h, struct ol_meta_file *f)
{
    unsigned q = 0;
    struct ol_meta_version v;
    ol_meta_rewind(f);
    while (ol_meta_next(f, &v) == 1)
        if (v.type == OL_META_OBJECT && v.ec.k > q)
            q = v.ec.k;
    ol_meta_rewind(f);
    return q ? q : ol_layout_read_quorum(h->n, h->s->parity);
}

static uint64_t file_mtime(const struct ol_meta_file *f)
{
    struct ol_meta_version v;
    return ol_meta_latest(f, &v) == 0 ? v.mtime_ns : 0;
}

/* Picks the reference drive; -ENOENT when no drive has the object, -EIO when
 * no version list has a read quorum. */
static int choose_ref(struct hctx *h)
{
    int best = -1;
    unsigned bestcnt = 0;
    bool any = false;
    for (unsigned i = 0; i < h->n; i++) {
        if (h->d[i].ms == H_BAD)
            any = true;
        if (h->d[i].ms != H_OK)
            continue;
        any = true;
        unsigned cnt = 0;
        for (unsigned j = 0; j < h->n; j++)
            cnt += h->d[j].ms == H_OK && same_file_versions(&h->d[i].mf, &h->d[j].mf);
        if (cnt < file_quorum(h, &h->d[i].mf))
            continue;
        uint64_t mt = file_mtime(&h->d[i].mf);
        if (best < 0 || mt > file_mtime(&h->d[best].mf) ||
            (mt == file_mtime(&h->d[best].mf) && cnt > bestcnt)) {
            best = (int)i;
            bestcnt = cnt;
        }
    }
    if (best < 0) {
        /* as a GET decides: a read quorum of drives without the file means
         * no object (what is left is a DELETE's or an unfinished PUT's) */
        unsigned none = 0;
        for (unsigned i = 0; i < h->n; i++)
            none += h->d[i].ms == H_NONE;
        return !any || none >= ol_layout_read_quorum(h->n, h->s->parity) ? -ENOENT : -EIO;
    }
    h->ref = best;
    struct hdrv *r = &h->d[best];
    h->nv = r->mf.count;
    h->v = calloc(h->nv ? h->nv : 1, sizeof *h->v);
    if (!h->v)
        return -ENOMEM;
    ol_meta_rewind(&r->mf);
    for (unsigned i = 0; i < h->nv; i++)
        if (ol_meta_next(&r->mf, &h->v[i]) != 1)
            return -EIO;
    for (unsigned i = 0; i < h->n; i++) {
        struct hdrv *d = &h->d[i];
        d->match = d->ms == H_OK && same_file_versions(&r->mf, &d->mf);
        d->rewrite = !d->match && d->ms != H_ERR && d->ms != H_KEY;
    }
    return 0;
}

/* ---- shard files ---------------------------------------------------------------------- */

static int ec_for(struct hctx *h, unsigned k, unsigned m)
{
    if (h->ec && h->ec_k == k && h->ec_m == m)
        return 0;
    if (!h->ec) {
        h->ec = aligned_alloc(64, (sizeof *h->ec + 63) / 64 * 64);
        if (!h->ec)
            return -ENOMEM;
    }
    int rc = ol_ec_init(h->ec, k, m);
    if (rc < 0)
        return rc;
    h->ec_k = k;
    h->ec_m = m;
    return 0;
}

/* Geometry of a part: stripe count, and stripe s's shard length. */
static uint64_t part_stripes(uint64_t size, unsigned k, uint32_t B)
{
    uint64_t sd = (uint64_t)k * B;
    return (size + sd - 1) / sd;
}

static uint32_t stripe_blen(uint64_t size, unsigned k, uint32_t B, uint64_t s)
{
    uint64_t sd = (uint64_t)k * B, off = s * sd;
    uint64_t len = size - off < sd ? size - off : sd;
    return (uint32_t)ol_ec_shard_len(len, k);
}

/* Checks every block of drive p's shard file of part pt of v: 0 good, 1 bad,
 * -errno when the drive cannot be read at all (left alone). */
static int shard_check(struct hctx *h, unsigned p, const struct ol_meta_version *v,
                       const struct ol_meta_part *pt)
{
    char path[OL_SE_PATH];
    ol_se_part_path(path, h->p_obj, v, pt->number);
    int fd = openat(h->d[p].dfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT || errno == ENOTDIR ? 1 : -errno;
    unsigned k = v->ec.k, shard = v->ec.dist[p];
    uint32_t B = v->ec.block_size;
    uint64_t ns = part_stripes(pt->size, k, B);
    uint64_t seed = ol_se_part_seed(v->data_dir, pt->number, shard);
    uint8_t *b = h->blk;
    int bad = 0;
    for (uint64_t s = 0; s < ns && !bad; s++) {
        uint32_t bl = stripe_blen(pt->size, k, B, s);
        int rc = pread_full(fd, b, OL_BITROT_HDR_SIZE + bl, ol_bitrot_block_off(B, s));
        if (rc == -ENODATA || rc == -EIO) {
            bad = 1;
            break;
        }
        if (rc < 0) {
            close(fd);
            return rc;
        }
        h->res->bytes_verified += bl;
        if (ol_bitrot_verify(seed, s, b, b + OL_BITROT_HDR_SIZE, bl) != 0)
            bad = 1;
    }
    close(fd);
    return bad;
}

/* Writes tmp (already complete and fdatasynced) as `to`, making the missing
 * directories on the way. */
static int rename_into(struct hctx *h, unsigned p, const char *tmp, const char *dir,
                       const char *to)
{
    int dfd = h->d[p].dfd, rc = 0;
    const char *dirs[] = {OL_FORMAT_DIR "/buckets", h->p_bucket, h->p_objects, h->p_ab,
                          h->p_obj, dir};
    for (unsigned i = 0; i < sizeof dirs / sizeof *dirs && rc == 0; i++)
        if (dirs[i])
            rc = mkdir_synced(dfd, dirs[i]);
    if (rc == 0 && renameat(dfd, tmp, dfd, to) < 0)
        rc = -errno;
    if (rc == 0)
        rc = fsync_dir(dfd, dir ? dir : h->p_obj);
    return rc;
}

/*
 * Rebuilds part pt of v on the drives in `bad` (positions) from the drives
 * in `good` (at least k): stripe by stripe, k good blocks read and verified
 * again, the missing shards reconstructed and sealed, appended to a tmp
 * file per bad drive; then each file is synced and renamed into place.
 */
static int part_rebuild(struct hctx *h, const struct ol_meta_version *v,
                        const struct ol_meta_part *pt, uint32_t good, uint32_t bad)
{
    unsigned k = v->ec.k, m = v->ec.m, n = h->n;
    uint32_t B = v->ec.block_size;
    int rc = ec_for(h, k, m);
    if (rc < 0)
        return rc;
    int rfd[OL_SE_MAXD], wfd[OL_SE_MAXD];
    char tmp[OL_SE_MAXD][OL_SE_PATH];
    for (unsigned p = 0; p < n; p++)
        rfd[p] = wfd[p] = -1;
    char path[OL_SE_PATH];
    ol_se_part_path(path, h->p_obj, v, pt->number);
    uint32_t present = 0, want = 0;
    int drive_err = 0;         /* a drive that cannot take its shard: the others go on */
    for (unsigned p = 0; p < n && rc == 0; p++) {
        if (good & (1u << p)) {
            if (ol_se_popcount(present) >= k)
                continue;
            rfd[p] = openat(h->d[p].dfd, path, O_RDONLY | O_CLOEXEC);
            if (rfd[p] < 0)
                rc = -errno;
            present |= 1u << v->ec.dist[p];
        } else if (bad & (1u << p)) {
            tmp_name(h, tmp[p], "part");
            wfd[p] = tmp_create(h->d[p].dfd, tmp[p]);
            if (wfd[p] < 0) {
                drive_err = drive_err ? drive_err : wfd[p];
                wfd[p] = -1;
                h->d[p].failed = true;
                continue;
            }
            want |= 1u << v->ec.dist[p];
        }
    }
    if (rc == 0 && ol_se_popcount(present) < k)
        rc = -EIO;
    uint64_t ns = part_stripes(pt->size, k, B);
    uint8_t *sp[OL_SE_MAXD];
    for (unsigned i = 0; i < n; i++)
        sp[i] = h->blk + (size_t)i * h->bsz + OL_BITROT_HDR_SIZE;
    for (uint64_t s = 0; s < ns && rc == 0; s++) {
        uint32_t bl = stripe_blen(pt->size, k, B, s);
        uint64_t off = ol_bitrot_block_off(B, s);
        for (unsigned p = 0; p < n && rc == 0; p++) {
            if (rfd[p] < 0)
                continue;
            unsigned i = v->ec.dist[p];
            uint8_t *hdr = sp[i] - OL_BITROT_HDR_SIZE;
            rc = pread_full(rfd[p], hdr, OL_BITROT_HDR_SIZE + bl, off);
            if (rc == 0 && ol_bitrot_verify(ol_se_part_seed(v->data_dir, pt->number, i), s, hdr,
                                            sp[i], bl) != 0)
                rc = -EIO; /* changed since the check: leave it to a later heal */
        }
        if (rc == 0)
            rc = ol_ec_reconstruct(h->ec, bl, sp, present, want);
        for (unsigned p = 0; p < n && rc == 0; p++) {
            if (wfd[p] < 0)
                continue;
            unsigned i = v->ec.dist[p];
            uint8_t *hdr = sp[i] - OL_BITROT_HDR_SIZE;
            ol_bitrot_seal(ol_se_part_seed(v->data_dir, pt->number, i), s, sp[i], bl, hdr);
            rc = pwrite_full(wfd[p], hdr, OL_BITROT_HDR_SIZE + bl, off);
            h->res->bytes_written += bl + OL_BITROT_HDR_SIZE;
        }
    }
    if (v->flat && rc == 0) { /* a PUT's file ends in zeros to a page boundary (bitrot.h) */
        static const uint8_t zeros[OL_BITROT_PAD];
        uint64_t end = ol_se_part_blocks(pt->size, k, B);
        for (unsigned p = 0; p < n && rc == 0; p++)
            if (wfd[p] >= 0)
                rc = pwrite_full(wfd[p], zeros, ol_bitrot_pad(end), end);
    }
    for (unsigned p = 0; p < n; p++)
        if (rfd[p] >= 0)
            close(rfd[p]);
    char ddir[OL_SE_PATH];  /* made if missing; none for a flat version */
    ol_se_path_id(ddir, h->p_obj, v->data_dir, NULL);
    int first = rc;
    for (unsigned p = 0; p < n; p++) {
        if (wfd[p] < 0)
            continue;
        int wrc = first;
        if (wrc == 0 && fdatasync(wfd[p]) < 0)
            wrc = -errno;
        close(wfd[p]);
        if (wrc == 0)
            wrc = fsync_dir(h->d[p].dfd, OL_FORMAT_DIR "/tmp");
        if (wrc == 0)
            wrc = rename_into(h, p, tmp[p], v->flat ? NULL : ddir, path);
        if (wrc < 0) {
            unlinkat(h->d[p].dfd, tmp[p], 0);
            h->d[p].failed = true;
            if (rc == 0)
                rc = wrc;
            continue;
        }
        h->d[p].touched = true;
        h->res->shards_written++;
    }
    return rc ? rc : drive_err;
}

/* Checks (and with fix, rebuilds) every part of object version v. */
static int version_data(struct hctx *h, const struct ol_meta_version *v, bool fix)
{
    struct ol_meta_part pt;
    int ret = 0;
    for (unsigned pi = 0; pi < v->part_count; pi++) {
        if (ol_meta_part_at(v, pi, &pt) < 0)
            return -EIO;
        uint32_t good = 0, bad = 0;
        for (unsigned p = 0; p < h->n; p++) {
            if (h->d[p].ms == H_ERR || h->d[p].ms == H_KEY)
                continue;
            int rc = shard_check(h, p, v, &pt);
            if (rc == 0)
                good |= 1u << p;
            else if (rc == 1)
                bad |= 1u << p;
        }
        if (!bad)
            continue;
        h->res->shards_bad += ol_se_popcount(bad);
        if (ol_se_popcount(good) < v->ec.k)
            return -EIO;
        if (!fix)
            continue;
        int rc = part_rebuild(h, v, &pt, good, bad);
        if (rc < 0 && ret == 0)
            ret = rc;
    }
    return ret;
}

/* ---- metadata --------------------------------------------------------------------------- */

/* Inline shards of version vi for drive p into out (blen bytes); from the
 * drives whose file matches. */
static int inline_rebuild(struct hctx *h, const struct ol_meta_version *v, unsigned p,
                          uint8_t *out)
{
    unsigned k = v->ec.k, m = v->ec.m, n = h->n;
    size_t blen = ol_ec_shard_len(v->size, k);
    if (blen == 0)
        return 0;
    int rc = ec_for(h, k, m);
    if (rc < 0)
        return rc;
    uint8_t *sp[OL_SE_MAXD];
    for (unsigned i = 0; i < n; i++)
        sp[i] = h->blk + (size_t)i * h->bsz;
    uint32_t present = 0;
    for (unsigned q = 0; q < n; q++) {
        struct ol_meta_version dv;
        if (!h->d[q].match || ol_meta_find(&h->d[q].mf, v->vid, &dv) < 0 || !dv.has_inline ||
            dv.inline_data.len != blen || dv.ec.index != v->ec.dist[q])
            continue;
        memcpy(sp[dv.ec.index], dv.inline_data.p, blen);
        present |= 1u << dv.ec.index;
    }
    unsigned want = v->ec.dist[p];
    if (present & (1u << want)) {
        memcpy(out, sp[want], blen);
        return 0;
    }
    rc = ol_ec_reconstruct(h->ec, blen, sp, present, 1u << want);
    if (rc < 0)
        return rc == -ENODATA ? -EIO : rc;
    memcpy(out, sp[want], blen);
    return 0;
}

/* Removes the data dirs drive p's old file names that the new one does not. */
static void drop_stale_dirs(struct hctx *h, unsigned p, struct ol_meta_file *old)
{
    struct ol_meta_version ov;
    ol_meta_rewind(old);
    while (ol_meta_next(old, &ov) == 1) {
        if (ov.type != OL_META_OBJECT || ov.has_inline)
            continue;
        bool kept = false;
        for (unsigned i = 0; i < h->nv && !kept; i++)
            kept = h->v[i].type == OL_META_OBJECT && !memcmp(h->v[i].data_dir, ov.data_dir, 16);
        if (kept)
            continue;
        char path[OL_SE_PATH];
        int fl;
        for (unsigned i = 0; ol_se_data_rm(path, &fl, h->p_obj, &ov, i); i++)
            unlinkat(h->d[p].dfd, path, fl);
    }
}

/* The newest mtime of directory fd and its files; -1 on an error. */
static int64_t newest_mtime(int fd)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -1;
    int64_t t = st.st_mtime;
    int dup_fd = dup(fd);
    DIR *dir = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (!dir) {
        if (dup_fd >= 0)
            close(dup_fd);
        return -1;
    }
    rewinddir(dir);
    struct dirent *e;
    while ((e = readdir(dir)))
        if (e->d_name[0] != '.' && fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            st.st_mtime > t)
            t = st.st_mtime;
    closedir(dir);
    return t;
}

/* Removes from drive p's object directory the data dirs and flat shard
 * files (<id>.data) that no version of the reference names and that
 * nothing touched for OL_HEAL_ORPHAN_AGE_S (the key's commit lock is held:
 * no write of it is between moving its data in and committing). Returns how many went; with remove false,
 * only counts them (the read-only pass, without the lock). */
static unsigned drop_orphans(struct hctx *h, unsigned p, bool remove)
{
    int ofd = openat(h->d[p].dfd, h->p_obj, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (ofd < 0)
        return 0;
    int lfd = dup(ofd);
    DIR *dir = lfd >= 0 ? fdopendir(lfd) : NULL;
    if (!dir) {
        if (lfd >= 0)
            close(lfd);
        close(ofd);
        return 0;
    }
    unsigned removed = 0;
    int64_t now = (int64_t)time(NULL);
    struct dirent *e;
    while ((e = readdir(dir))) {
        uint8_t id[16];
        char name[40];
        size_t nl = strlen(e->d_name);
        bool flat = nl == 36 + strlen(OL_SE_FLAT_SFX) && !strcmp(e->d_name + 36, OL_SE_FLAT_SFX);
        snprintf(name, sizeof name, "%.36s", e->d_name);
        if ((!flat && nl != 36) || !ol_se_uuid_parse(name, id))
            continue;
        bool named = false;
        for (unsigned i = 0; i < h->nv && !named; i++)
            named = h->v[i].type == OL_META_OBJECT && !h->v[i].has_inline &&
                    memcmp(h->v[i].data_dir, id, 16) == 0;
        if (named)
            continue;
        if (flat) { /* a flat version's shard file */
            struct stat st;
            if (fstatat(ofd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
                now - (int64_t)st.st_mtime < OL_HEAL_ORPHAN_AGE_S)
                continue;
            removed += !remove || unlinkat(ofd, e->d_name, 0) == 0;
            continue;
        }
        int dfd = openat(ofd, e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (dfd < 0)
            continue;
        int64_t t = newest_mtime(dfd);
        if (t < 0 || now - t < OL_HEAL_ORPHAN_AGE_S || !remove) {
            removed += t >= 0 && now - t >= OL_HEAL_ORPHAN_AGE_S;
            close(dfd);
            continue;
        }
        int sfd = dup(dfd);   /* shares dfd's offset, which newest_mtime moved */
        DIR *sub = sfd >= 0 ? fdopendir(sfd) : NULL;
        if (sub)
            rewinddir(sub);
        struct dirent *f;
        while (sub && (f = readdir(sub)))
            if (strncmp(f->d_name, "part.", 5) == 0)
                unlinkat(dfd, f->d_name, 0);
        if (sub)
            closedir(sub);
        else if (sfd >= 0)
            close(sfd);
        close(dfd);
        if (unlinkat(ofd, e->d_name, AT_REMOVEDIR) == 0)
            removed++;
    }
    closedir(dir);
    if (removed)
        fsync(ofd);
    close(ofd);
    return removed;
}

/* Writes drive p's metadata file: the reference's versions, with p's shard
 * index and p's inline shards. */
static int meta_write(struct hctx *h, unsigned p)
{
    struct hdrv *d = &h->d[p];
    size_t cap = OL_META_MAX_FILE;
    uint8_t *out = malloc(cap);
    uint8_t *inl = malloc((size_t)h->nv * OL_META_MAX_INLINE + 1);
    struct ol_meta_version *nv = calloc(h->nv ? h->nv : 1, sizeof *nv);
    const struct ol_meta_version **vp = calloc(h->nv ? h->nv : 1, sizeof *vp);
    int rc = out && inl && nv && vp ? 0 : -ENOMEM;
    for (unsigned i = 0; i < h->nv && rc == 0; i++) {
        nv[i] = h->v[i];
        vp[i] = &nv[i];
        if (nv[i].type != OL_META_OBJECT)
            continue;
        nv[i].ec.index = nv[i].ec.dist[p];
        if (nv[i].has_inline) {
            uint8_t *o = inl + (size_t)i * OL_META_MAX_INLINE;
            rc = inline_rebuild(h, &h->v[i], p, o);
            nv[i].inline_data.p = o;
            nv[i].inline_data.len = (uint32_t)ol_ec_shard_len(nv[i].size, nv[i].ec.k);
        }
    }
    int len = rc == 0 ? ol_meta_encode(h->key, h->klen, vp, h->nv, out, cap) : rc;
    rc = len < 0 ? len : 0;
    /* padded to its page as the reference's is (a PUT's on XFS, engine_put.c
     * "the ordered commit"), so the healed file is byte for byte the lost one */
    const struct hdrv *rd = &h->d[h->ref];
    if (rc == 0 && rd->len > rd->mf.len) {
        size_t pl = OL_META_PADDED((size_t)len);
        if (pl <= cap) {
            memset(out + len, 0, pl - (size_t)len);
            len = (int)pl;
        }
    }
    char tmp[OL_SE_PATH];
    tmp_name(h, tmp, "meta");
    int fd = -1;
    if (rc == 0) {
        fd = tmp_create(d->dfd, tmp);
        if (fd < 0) {
            rc = fd;
            fd = -1;
        }
    }
    if (rc == 0)
        rc = pwrite_full(fd, out, (size_t)len, 0);
    if (rc == 0 && fsync(fd) < 0)
        rc = -errno;
    if (fd >= 0)
        close(fd);
    /* the drive's file must still be what was judged */
    uint8_t *now = NULL;
    size_t nlen = 0;
    if (rc == 0) {
        int r2 = meta_read(h, p, &now, &nlen);
        bool same = (r2 == -ENOENT && d->ms == H_NONE) ||
                    (r2 == 0 && d->buf && nlen == d->len && !memcmp(now, d->buf, nlen)) ||
                    (r2 == -ENOTDIR && d->ms == H_NONE);
        if (!same)
            rc = -EAGAIN;
        free(now);
    }
    if (rc == 0)
        rc = rename_into(h, p, tmp, NULL, h->p_meta);
    if (rc < 0 && fd >= 0)
        unlinkat(d->dfd, tmp, 0);
    if (rc == 0) {
        d->touched = true;
        h->res->bytes_written += (uint64_t)len;
        if (d->ms == H_OK)
            drop_stale_dirs(h, p, &d->mf);
    }
    free(vp);
    free(nv);
    free(inl);
    free(out);
    return rc;
}

/* ---- the op ------------------------------------------------------------------------------- */

static void names(struct hctx *h)
{
    const struct ol_store *s = h->s;
    ol_se_join(h->p_bucket, OL_FORMAT_DIR "/buckets/", h->bucket, NULL);
    ol_se_join(h->p_objects, h->p_bucket, "/objects", NULL);
    ol_se_obj_names(s, h->key, h->klen, h->p_objects, h->p_ab, h->p_obj, h->p_meta);
}

static int heal_run(struct hctx *h, unsigned flags)
{
    struct ol_heal_result *res = h->res;
    for (unsigned p = 0; p < h->n; p++) {
        h->d[p].dfd = h->s->drives[h->set * h->s->dps + p].dfd;
        meta_load(h, p);
        res->drives_offline += h->d[p].ms == H_ERR || h->d[p].ms == H_KEY;
    }
    int rc = choose_ref(h);
    if (rc < 0)
        return rc;
    for (unsigned i = 0; i < h->nv; i++) {
        const struct ol_meta_version *v = &h->v[i];
        if (v->type != OL_META_OBJECT)
            continue;
        if (v->ec.k == 0 || v->ec.k + v->ec.m != h->n || v->ec.m > OL_EC_MAX_PARITY ||
            v->ec.block_size == 0 || v->ec.block_size > h->s->bmax)
            return -EIO; /* not a geometry this store can rebuild */
        if (v->has_inline) {
            unsigned good = 0;
            for (unsigned p = 0; p < h->n; p++)
                good += h->d[p].match;
            if (good < v->ec.k)
                return -EIO;
        }
    }
    /* verify everything before writing anything */
    for (unsigned i = 0; i < h->nv; i++)
        if (h->v[i].type == OL_META_OBJECT && !h->v[i].has_inline) {
            rc = version_data(h, &h->v[i], false);
            if (rc < 0)
                return rc;
        }
    for (unsigned p = 0; p < h->n; p++)
        res->drives_bad += h->d[p].rewrite;
    for (unsigned p = 0; p < h->n; p++)   /* drives whose file is the reference's */
        if (h->d[p].dfd >= 0 && h->d[p].match && !h->d[p].rewrite)
            res->dirs_removed += drop_orphans(h, p, !(flags & OL_HEAL_VERIFY_ONLY));
    if (flags & OL_HEAL_VERIFY_ONLY)
        return 0;
    if (res->shards_bad == 0 && res->drives_bad == 0)
        return 0;
    res->shards_bad = 0;
    res->bytes_verified = 0;
    int ret = 0;
    for (unsigned i = 0; i < h->nv; i++)
        if (h->v[i].type == OL_META_OBJECT && !h->v[i].has_inline) {
            rc = version_data(h, &h->v[i], true);
            if (rc < 0 && ret == 0)
                ret = rc;
        }
    for (unsigned p = 0; p < h->n; p++) {
        if (!h->d[p].rewrite || h->d[p].failed)
            continue; /* (a drive missing a shard must not name it) */
        rc = meta_write(h, p);
        if (rc < 0 && ret == 0)
            ret = rc;
        if (rc == 0)
            res->shards_written += 1; /* the metadata file (and its inline shards) */
    }
    for (unsigned p = 0; p < h->n; p++)
        res->drives_healed += h->d[p].touched;
    return ret;
}

/* One pass over bucket/key (a fresh context), with the key's commit lock
 * held when lock is set: writes of the key wait for it, so it is taken
 * only for a pass that may write. After OL_HEAL_LOCK_WAIT_MS of trying,
 * -EBUSY (the object is left for later). */
static int heal_pass(struct ol_store *s, const char *bucket, size_t blen, const char *key,
                     size_t klen, unsigned flags, bool lock, struct ol_heal_result *res)
{
    memset(res, 0, sizeof *res);
    struct hctx *h = calloc(1, sizeof *h);
    if (!h)
        return -ENOMEM;
    h->s = s;
    h->bucket = bucket;
    h->key = key;
    h->klen = klen;
    h->n = s->dps;
    h->set = ol_layout_set_of(s->deployment, bucket, blen, key, klen, s->sets);
    h->res = res;
    h->ref = -1;
    h->rng = ol_se_now_ns() ^ (uint64_t)(uintptr_t)h;
    names(h);
    h->bsz = (OL_BITROT_HDR_SIZE + (size_t)s->bmax + 63) / 64 * 64;
    h->blk = aligned_alloc(64, h->bsz * h->n);
    unsigned slot = 0;
    int rc = h->blk ? 0 : -ENOMEM;
    if (rc == 0 && lock) {
        rc = -EBUSY;
        for (unsigned waited = 0; waited <= OL_HEAL_LOCK_WAIT_MS; waited++) {
            if ((rc = ol_se_key_trylock(s, h->p_obj, &slot)) == 0)
                break;
            nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
        }
    }
    if (rc == 0) {
        rc = heal_run(h, flags);
        if (lock)
            ol_se_key_unlock_slot(s, slot);
    }
    for (unsigned p = 0; p < h->n; p++)
        free(h->d[p].buf);
    free(h->v);
    free(h->ec);
    free(h->blk);
    free(h);
    return rc;
}

int ol_store_heal_object(struct ol_store *s, const char *bucket, const char *key, unsigned flags,
                         struct ol_heal_result *res)
{
    memset(res, 0, sizeof *res);
    size_t blen = strnlen(bucket, OL_LAYOUT_BUCKET_MAX + 1);
    size_t klen = strnlen(key, OL_LAYOUT_KEY_MAX + 1);
    if (blen == 0 || blen > OL_LAYOUT_BUCKET_MAX || klen == 0 || klen > OL_LAYOUT_KEY_MAX)
        return -EINVAL;
    /* First a read-only pass without the lock (the scanner's common case:
     * a healthy object, never in a writer's way); only when it found
     * something to repair, the writing pass under the key's commit lock,
     * which reads everything again. */
    int rc = heal_pass(s, bucket, blen, key, klen, OL_HEAL_VERIFY_ONLY, false, res);
    if ((flags & OL_HEAL_VERIFY_ONLY) || rc < 0 ||
        (res->shards_bad == 0 && res->drives_bad == 0 && res->dirs_removed == 0))
        return rc;
    return heal_pass(s, bucket, blen, key, klen, flags, true, res);
}
