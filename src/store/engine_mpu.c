/*
 * engine_mpu.c - multipart uploads (engine.h, "multipart uploads"): the
 * in-memory registry of uploads in progress, its rebuild from the drives at
 * ol_store_open (blocking, before any loop runs), CreateMultipartUpload,
 * AbortMultipartUpload and the expiry task, ListParts, and the per-drive
 * sub-sequences the PUT request's multipart modes use (engine_put.c):
 * Complete's checks and trimming, the removal of an upload, the part
 * record. UploadPart and Complete's commit run in engine_put.c, reads of
 * multipart objects in engine_get.c, ListMultipartUploads in
 * engine_bucket.c.
 *
 * Must not: block a loop thread (the registry's mutex is held for table
 * updates only, never across I/O; the directory scan runs in
 * ol_store_open only), allocate per request (bitmaps live in the request's
 * stripe-slot memory, pages are caller-owned), or trust a record it did not
 * check (every record read is a checksummed metadata file whose key, upload
 * id, part number and file length are compared).
 *
 * Request kind OL_SE_MPU, r->mop:
 *   CREATE  MAIN (per drive: statx bucket, mkdirs, record to tmp, fsync,
 *           rename, dir fsyncs) -> quorum: registry entry made LIVE, or
 *           UNDO (what was made removed) and the reservation freed.
 *   ABORT   MAIN (per drive: the removal sub-sequence) -> quorum: entry
 *           freed; for the expiry task, the next expired upload.
 *   PARTS   per part number of the bitmap after the marker: MAIN (every
 *           drive reads the part's record) -> the record a read quorum
 *           agrees on goes to the caller's page.
 */
#include "store/engine_int.h"

#include "base/le.h"
#include "base/md5.h"
#include "store/bitrot.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

/* ---- small helpers ------------------------------------------------------------------ */

uint64_t ol_se_part_seed(const uint8_t ddir[16], uint32_t number, unsigned shard)
{
    if (number == 1)
        return ol_se_seed(ddir, shard);
    uint8_t b[20];
    memcpy(b, ddir, 16);
    ol_le_st32(b + 16, number);
    return XXH3_64bits_withSeed(b, sizeof b, shard);
}

uint64_t ol_se_part_blocks(uint64_t size, unsigned k, uint32_t B)
{
    if (size == 0)
        return 0;
    uint64_t sd = (uint64_t)k * B, nst = (size + sd - 1) / sd, last = size - (nst - 1) * sd;
    return ol_bitrot_file_size(B, (nst - 1) * B + ol_ec_shard_len(last, k));
}

void ol_se_upload_names(struct ol_sreq *r, const uint8_t id[16])
{
    char odir[OL_LAYOUT_DIR_LEN];
    ol_layout_object_dir(r->c->s->deployment, r->key, r->klen, odir);
    char ab[4] = {'/', odir[0], odir[1], 0};
    memcpy(r->uid, id, 16);
    ol_se_join(r->p_uploads, r->p_bucket, "/uploads", NULL);
    ol_se_join(r->p_uab, r->p_uploads, ab, NULL);
    ol_se_join(r->p_uhash, r->p_uploads, "/", odir);
    ol_se_path_id(r->p_udir, r->p_uhash, id, NULL);
    ol_se_path_id(r->p_urec, r->p_uhash, id, "/upload");
    ol_se_path_id(r->p_udata, r->p_uhash, id, "/data");
}

/* The next bit set at or after `from` (up to part 10000), or 0. */
static uint32_t next_bit(const uint8_t *b, uint32_t from)
{
    for (uint32_t i = from ? from : 1; i <= OL_STORE_MPU_MAX_PART_NUM; i++) {
        if (!b[i >> 3]) {
            i |= 7; /* a zero byte: skip it */
            continue;
        }
        if (ol_se_bit_get(b, i))
            return i;
    }
    return 0;
}

/* ---- the registry ------------------------------------------------------------------------ */

enum { U_FREE = 0, U_RESERVED, U_LIVE, U_EXCL };

struct ol_se_upload {
    uint8_t state, m, sc, algo;
    uint8_t cflags;              /* checksum flags: OL_META_CKS_FULL_OBJECT or 0 */
    uint32_t B;
    unsigned set, writers;
    uint64_t initiated_ns;
    uint8_t id[16];
    uint16_t blen, klen;
    char bucket[OL_LAYOUT_BUCKET_MAX + 1];
    char key[OL_LAYOUT_KEY_MAX + 1];
    uint8_t bits[OL_SE_PBITS];   /* part numbers begun */
};

struct ol_se_reg {
    pthread_mutex_t mu;
    unsigned cap, count, nfree;
    struct ol_se_upload *u;      /* cap entries */
    uint32_t *order;             /* count entries (LIVE, EXCL), by reg_cmp */
    uint32_t *freel;             /* nfree free entries */
};

/* Bucket, then key bytes. */
static int cmp_bk(const struct ol_se_upload *u, const char *b, const char *k, size_t kl)
{
    int c = strcmp(u->bucket, b);
    if (c)
        return c;
    size_t n = u->klen < kl ? u->klen : kl;
    c = memcmp(u->key, k, n);
    if (c)
        return c;
    return (u->klen > kl) - (u->klen < kl);
}

/* The listing order: bucket, key, initiated, id. */
static int reg_cmp(const struct ol_se_upload *a, const struct ol_se_upload *b)
{
    int c = cmp_bk(a, b->bucket, b->key, b->klen);
    if (c)
        return c;
    if (a->initiated_ns != b->initiated_ns)
        return a->initiated_ns < b->initiated_ns ? -1 : 1;
    return memcmp(a->id, b->id, 16);
}

/* First position in order whose entry is >= (b, k). */
static unsigned lower_bk(const struct ol_se_reg *g, const char *b, const char *k, size_t kl)
{
    unsigned lo = 0, hi = g->count;
    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        if (cmp_bk(&g->u[g->order[mid]], b, k, kl) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Position in order of upload (b, k, id), or -1. */
static int find_pos(const struct ol_se_reg *g, const char *b, const char *k, size_t kl,
                    const uint8_t id[16])
{
    for (unsigned i = lower_bk(g, b, k, kl);
         i < g->count && cmp_bk(&g->u[g->order[i]], b, k, kl) == 0; i++)
        if (memcmp(g->u[g->order[i]].id, id, 16) == 0)
            return (int)i;
    return -1;
}

static void order_insert(struct ol_se_reg *g, uint32_t idx)
{
    unsigned lo = 0, hi = g->count;
    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        if (reg_cmp(&g->u[g->order[mid]], &g->u[idx]) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    memmove(g->order + lo + 1, g->order + lo, (g->count - lo) * sizeof *g->order);
    g->order[lo] = idx;
    g->count++;
}

static void entry_free(struct ol_se_reg *g, uint32_t idx)
{
    struct ol_se_upload *u = &g->u[idx];
    if (u->state == U_LIVE || u->state == U_EXCL) {
        int pos = find_pos(g, u->bucket, u->key, u->klen, u->id);
        if (pos >= 0) {
            memmove(g->order + pos, g->order + pos + 1,
                    (g->count - (unsigned)pos - 1) * sizeof *g->order);
            g->count--;
        }
    }
    u->state = U_FREE;
    g->freel[g->nfree++] = idx;
}

/* Entry index of r's upload (bucket, key, uid), or -1. Lock held. */
static int find_entry(const struct ol_se_reg *g, const struct ol_sreq *r)
{
    int pos = find_pos(g, r->bucket, r->key, r->klen, r->uid);
    return pos < 0 ? -1 : (int)g->order[pos];
}

/* r->uidx still names r's upload? Lock held. */
static struct ol_se_upload *held(const struct ol_se_reg *g, const struct ol_sreq *r)
{
    if (r->uidx < 0)
        return NULL;
    struct ol_se_upload *u = &g->u[r->uidx];
    return u->state != U_FREE && memcmp(u->id, r->uid, 16) == 0 ? u : NULL;
}

static void take_fields(struct ol_sreq *r, const struct ol_se_upload *u)
{
    r->m = u->m;
    r->B = u->B;
    r->ualgo = u->algo;
    r->usc = u->sc;
}

int ol_se_mpu_part_enter(struct ol_sreq *r, uint32_t number)
{
    struct ol_se_reg *g = r->c->s->reg;
    pthread_mutex_lock(&g->mu);
    int idx = find_entry(g, r);
    int rc = OL_STORE_ENOUPLOAD;
    if (idx >= 0 && g->u[idx].state == U_LIVE) {
        struct ol_se_upload *u = &g->u[idx];
        u->writers++;
        ol_se_bit_put(u->bits, number);
        take_fields(r, u);
        r->uidx = idx;
        rc = 0;
    }
    pthread_mutex_unlock(&g->mu);
    return rc;
}

bool ol_se_mpu_live(const struct ol_sreq *r)
{
    struct ol_se_reg *g = r->c->s->reg;
    pthread_mutex_lock(&g->mu);
    const struct ol_se_upload *u = held(g, r);
    bool live = u && u->state == U_LIVE;
    pthread_mutex_unlock(&g->mu);
    return live;
}

/* Takes the entry exclusively; idle: no UploadPart may be running. */
static int excl_enter(struct ol_sreq *r, bool idle)
{
    struct ol_se_reg *g = r->c->s->reg;
    pthread_mutex_lock(&g->mu);
    int idx = find_entry(g, r), rc = OL_STORE_ENOUPLOAD;
    if (idx >= 0) {
        struct ol_se_upload *u = &g->u[idx];
        if (u->state != U_LIVE || (idle && u->writers)) {
            rc = -EBUSY;
        } else {
            u->state = U_EXCL;
            memcpy(r->bits, u->bits, OL_SE_PBITS);
            take_fields(r, u);
            r->uidx = idx;
            rc = 0;
        }
    }
    pthread_mutex_unlock(&g->mu);
    return rc;
}

int ol_se_mpu_excl_enter(struct ol_sreq *r) { return excl_enter(r, true); }

void ol_se_mpu_leave(struct ol_sreq *r, bool gone)
{
    struct ol_se_reg *g = r->c->s->reg;
    pthread_mutex_lock(&g->mu);
    struct ol_se_upload *u = held(g, r);
    if (u) {
        if (r->kind == OL_SE_PUT && r->mode == OL_SE_MODE_PART) {
            if (u->writers)
                u->writers--;
        } else if (gone) {
            entry_free(g, (uint32_t)r->uidx);
        } else {
            u->state = U_LIVE;
        }
    }
    pthread_mutex_unlock(&g->mu);
    r->uidx = -1;
}

bool ol_se_mpu_bucket_busy(struct ol_store *s, const char *bucket)
{
    struct ol_se_reg *g = s->reg;
    pthread_mutex_lock(&g->mu);
    unsigned i = lower_bk(g, bucket, "", 0);
    bool busy = i < g->count && strcmp(g->u[g->order[i]].bucket, bucket) == 0;
    pthread_mutex_unlock(&g->mu);
    return busy;
}

unsigned ol_store_mpu_count(struct ol_store *s)
{
    struct ol_se_reg *g = s->reg;
    pthread_mutex_lock(&g->mu);
    unsigned n = g->count;
    pthread_mutex_unlock(&g->mu);
    return n;
}

int ol_mpu_upload_checksum(struct ol_store_core *c, const char *bucket, const char *key,
                           const uint8_t upload_id[OL_STORE_MPU_ID_LEN], uint8_t *algo,
                           uint8_t *flags)
{
    struct ol_se_reg *g = c->s->reg;
    pthread_mutex_lock(&g->mu);
    int pos = find_pos(g, bucket, key, strlen(key), upload_id);
    if (pos >= 0) {
        const struct ol_se_upload *u = &g->u[g->order[pos]];
        *algo = u->algo;
        *flags = u->cflags;
    }
    pthread_mutex_unlock(&g->mu);
    return pos >= 0 ? 0 : OL_STORE_ENOUPLOAD;
}

void ol_se_mpu_list_fill(struct ol_sreq *r)
{
    struct ol_mpu_list_uploads_args *a = r->lu;
    struct ol_se_reg *g = r->c->s->reg;
    const char *pfx = a->prefix ? a->prefix : "";
    size_t pl = strlen(pfx), used = 0;
    const char *mk = a->key_marker;
    pthread_mutex_lock(&g->mu);
    unsigned i = lower_bk(g, r->bucket, pfx, pl);
    if (mk) {
        size_t ml = strlen(mk);
        unsigned j = lower_bk(g, r->bucket, mk, ml);
        int at = a->upload_id_marker ? find_pos(g, r->bucket, mk, ml, a->upload_id_marker) : -1;
        if (at >= 0) {
            j = (unsigned)at + 1; /* after that upload of the marker's key */
        } else {
            while (j < g->count && cmp_bk(&g->u[g->order[j]], r->bucket, mk, ml) == 0)
                j++; /* every upload of the marker's key */
        }
        if (j > i)
            i = j;
    }
    for (; i < g->count; i++) {
        const struct ol_se_upload *u = &g->u[g->order[i]];
        if (strcmp(u->bucket, r->bucket) != 0 || u->klen < pl || memcmp(u->key, pfx, pl) != 0)
            break; /* keys with the prefix are contiguous */
        if (a->count == a->max || used + u->klen + 1 > a->keys_cap) {
            a->truncated = true;
            break;
        }
        struct ol_mpu_upload_info *o = &a->out[a->count++];
        memcpy(a->keys + used, u->key, u->klen + 1u);
        o->key = a->keys + used;
        o->key_len = u->klen;
        used += u->klen + 1u;
        memcpy(o->upload_id, u->id, 16);
        o->initiated_ns = u->initiated_ns;
        o->storage_class = u->sc;
        o->cks_algo = u->algo;
        o->cks_flags = u->cflags;
    }
    pthread_mutex_unlock(&g->mu);
}

static int reg_alloc(struct ol_store *s, unsigned cap)
{
    struct ol_se_reg *g = calloc(1, sizeof *g);
    if (!g)
        return -ENOMEM;
    s->reg = g;
    pthread_mutex_init(&g->mu, NULL);
    g->cap = cap;
    g->u = calloc(cap, sizeof *g->u); /* large: pages are touched as entries are used */
    g->order = calloc(cap, sizeof *g->order);
    g->freel = calloc(cap, sizeof *g->freel);
    if (!g->u || !g->order || !g->freel)
        return -ENOMEM;
    for (unsigned i = 0; i < cap; i++)
        g->freel[g->nfree++] = cap - 1 - i;
    return 0;
}

void ol_se_mpu_close(struct ol_store *s)
{
    struct ol_se_reg *g = s->reg;
    if (!g)
        return;
    pthread_mutex_destroy(&g->mu);
    free(g->u);
    free(g->order);
    free(g->freel);
    free(g);
    s->reg = NULL;
}

/* ---- the scan at open (blocking) ------------------------------------------------------------ */

struct found {
    unsigned set, drives;
    uint8_t id[16];
    uint8_t m, sc, algo, k;
    uint8_t cflags;
    uint32_t B;
    uint64_t initiated_ns;
    char bucket[OL_LAYOUT_BUCKET_MAX + 1];
    char ab[3], hash[33];
    char key[OL_LAYOUT_KEY_MAX + 1];
    uint16_t klen;
    uint8_t bits[OL_SE_PBITS];
};

struct scan {
    struct ol_store *s;
    struct found *f;
    size_t n, cap;
    uint8_t *buf;              /* a metadata file */
    size_t buflen;
    unsigned removed, recovered;
};


static bool all_hex(const char *s, size_t n)
{
    if (strlen(s) != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (ol_se_hexval(s[i]) < 0)
            return false;
    return true;
}

/* Reads dirfd/name into sc->buf; its length or -errno. */
static ssize_t read_small(struct scan *sc, int dirfd, const char *name)
{
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, sc->buf, sc->buflen);
    ssize_t rc = n < 0 ? -errno : n;
    close(fd);
    if (rc >= 0 && (size_t)rc == sc->buflen)
        rc = -EFBIG;
    return rc;
}

/* rm -r dirfd/name (a directory); errors ignored. */
static void rm_tree(int dirfd, const char *name)
{
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
        ol_se_rm_inside(fd, 0);
        close(fd);
    }
    unlinkat(dirfd, name, AT_REMOVEDIR);
}

/* Does meta (the object's metadata on this drive) name id as a version's data dir? */
static bool meta_names(struct scan *sc, int objfd, const char *key, size_t klen,
                       const uint8_t id[16])
{
    ssize_t n = read_small(sc, objfd, "meta");
    struct ol_meta_file f;
    struct ol_meta_version v;
    if (n <= 0 || ol_meta_open(sc->buf, (size_t)n, &f) < 0 || f.key.len != klen ||
        memcmp(f.key.p, key, klen) != 0)
        return false;
    while (ol_meta_next(&f, &v) == 1)
        if (v.type == OL_META_OBJECT && memcmp(v.data_dir, id, 16) == 0)
            return true;
    return false;
}

/* One upload directory uploads/<ab>/<hash>/<name> on drive di of bucket b. */
static int scan_upload(struct scan *sc, unsigned di, int bfd, const char *b, const char *ab,
                       const char *hash, int hfd, const char *name)
{
    const struct ol_store *s = sc->s;
    uint8_t id[16];
    int ufd = -1;
    if (!ol_se_uuid_parse(name, id))
        goto garbage;
    ufd = openat(hfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (ufd < 0)
        goto garbage;
    ssize_t n = read_small(sc, ufd, "upload");
    struct ol_meta_file f;
    struct ol_meta_version v;
    if (n <= 0 || ol_meta_open(sc->buf, (size_t)n, &f) < 0 || ol_meta_latest(&f, &v) < 0 ||
        v.type != OL_META_OBJECT || memcmp(v.data_dir, id, 16) != 0 ||
        (unsigned)v.ec.k + v.ec.m != s->dps || v.ec.m > s->dps / 2 || v.ec.block_size == 0)
        goto garbage; /* no record (a create or a removal cut short), or not ours */
    char odir[OL_LAYOUT_DIR_LEN];
    ol_layout_object_dir(s->deployment, (const char *)f.key.p, f.key.len, odir);
    if (memcmp(odir, ab, 2) != 0 || strcmp(odir + 3, hash) != 0)
        goto garbage;
    struct found nf;
    memset(&nf, 0, sizeof nf);
    nf.set = di / s->dps;
    memcpy(nf.id, id, 16);
    nf.k = v.ec.k;
    nf.m = v.ec.m;
    nf.B = v.ec.block_size;
    nf.sc = v.storage_class;
    nf.algo = v.cks.algo;
    nf.cflags = v.cks.flags & OL_META_CKS_FULL_OBJECT;
    nf.initiated_ns = v.mtime_ns;
    snprintf(nf.bucket, sizeof nf.bucket, "%s", b);
    memcpy(nf.ab, ab, 2);
    memcpy(nf.hash, hash, 32);
    memcpy(nf.key, f.key.p, f.key.len);
    nf.klen = (uint16_t)f.key.len;

    struct stat st;
    if (fstatat(ufd, "data", &st, AT_SYMLINK_NOFOLLOW) < 0) {
        /* data/ is gone: a Complete was cut short on this drive */
        char obj[OL_SE_PATH];
        snprintf(obj, sizeof obj, "%s/objects/%s/%s", b, ab, hash);
        int ofd = openat(bfd, obj, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (ofd >= 0 && meta_names(sc, ofd, nf.key, nf.klen, id)) {
            close(ofd); /* committed here: the upload's leftovers go */
            close(ufd);
            rm_tree(hfd, name);
            sc->recovered++;
            return 0;
        }
        int rc = ofd >= 0 ? renameat(ofd, name, ufd, "data") : -1; /* rolled back */
        if (ofd >= 0)
            close(ofd);
        if (rc < 0 && mkdirat(ufd, "data", 0700) < 0 && errno != EEXIST) {
            close(ufd);
            return -errno;
        }
        fsync(ufd);
        sc->recovered++;
    }
    int dfd = openat(ufd, "data", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        close(ufd);
        goto garbage_noclose;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        if (strncmp(e->d_name, "part.", 5) != 0)
            continue;
        unsigned long pn = strtoul(e->d_name + 5, &end, 10);
        if (*end == 0 && pn >= 1 && pn <= OL_STORE_MPU_MAX_PART_NUM)
            ol_se_bit_put(nf.bits, (unsigned)pn);
    }
    closedir(d);
    close(ufd);
    for (size_t i = 0; i < sc->n; i++) {
        struct found *o = &sc->f[i];
        if (o->set == nf.set && memcmp(o->id, id, 16) == 0 && strcmp(o->bucket, b) == 0) {
            o->drives++;
            for (unsigned j = 0; j < OL_SE_PBITS; j++)
                o->bits[j] |= nf.bits[j];
            return 0;
        }
    }
    if (sc->n == sc->cap) {
        size_t nc = sc->cap ? 2 * sc->cap : 16;
        struct found *x = realloc(sc->f, nc * sizeof *x);
        if (!x)
            return -ENOMEM;
        sc->f = x;
        sc->cap = nc;
    }
    nf.drives = 1;
    sc->f[sc->n++] = nf;
    return 0;
garbage:
    if (ufd >= 0)
        close(ufd);
garbage_noclose:
    rm_tree(hfd, name);
    sc->removed++;
    return 0;
}

/* Opens dirfd/name as a directory stream (NULL when it is not one). */
static DIR *open_dir(int dirfd, const char *name, int *fd)
{
    *fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (*fd < 0)
        return NULL;
    int dup_fd = dup(*fd);
    DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (!d) {
        if (dup_fd >= 0)
            close(dup_fd);
        close(*fd);
        *fd = -1;
    }
    return d;
}

static bool dot(const char *n) { return strcmp(n, ".") == 0 || strcmp(n, "..") == 0; }

/* Every upload on drive di. */
static int scan_drive(struct scan *sc, unsigned di)
{
    int bfd, rc = 0;
    DIR *bd = open_dir(sc->s->drives[di].dfd, OL_FORMAT_DIR "/buckets", &bfd);
    if (!bd)
        return 0;
    struct dirent *be;
    while (rc == 0 && (be = readdir(bd)) != NULL) {
        if (dot(be->d_name) || strlen(be->d_name) > OL_LAYOUT_BUCKET_MAX)
            continue;
        char up[sizeof be->d_name + 8];
        snprintf(up, sizeof up, "%s/uploads", be->d_name);
        int ufd;
        DIR *ud = open_dir(bfd, up, &ufd);
        if (!ud)
            continue;
        struct dirent *ae;
        while (rc == 0 && (ae = readdir(ud)) != NULL) {
            if (dot(ae->d_name) || !all_hex(ae->d_name, 2))
                continue;
            int afd;
            DIR *ad = open_dir(ufd, ae->d_name, &afd);
            if (!ad)
                continue;
            struct dirent *he;
            while (rc == 0 && (he = readdir(ad)) != NULL) {
                if (dot(he->d_name) || !all_hex(he->d_name, 32))
                    continue;
                int hfd;
                DIR *hd = open_dir(afd, he->d_name, &hfd);
                if (!hd)
                    continue;
                struct dirent *xe;
                while (rc == 0 && (xe = readdir(hd)) != NULL)
                    if (!dot(xe->d_name))
                        rc = scan_upload(sc, di, bfd, be->d_name, ae->d_name, he->d_name, hfd,
                                         xe->d_name);
                closedir(hd);
                close(hfd);
                unlinkat(afd, he->d_name, AT_REMOVEDIR); /* when empty */
            }
            closedir(ad);
            close(afd);
            unlinkat(ufd, ae->d_name, AT_REMOVEDIR);
        }
        closedir(ud);
        close(ufd);
    }
    closedir(bd);
    close(bfd);
    return rc;
}

/* Removes upload f from every drive of its set. */
static void remove_found(struct scan *sc, const struct found *f)
{
    const struct ol_store *s = sc->s;
    char u[37], ab[100], hash[140], dir[180]; /* ~92, ~125, ~162 bytes at most */
    ol_format_uuid_str(f->id, u);
    snprintf(ab, sizeof ab, OL_FORMAT_DIR "/buckets/%s/uploads/%s", f->bucket, f->ab);
    snprintf(hash, sizeof hash, "%s/%s", ab, f->hash);
    snprintf(dir, sizeof dir, "%s/%s", hash, u);
    for (unsigned p = 0; p < s->dps; p++) {
        int dfd = s->drives[f->set * s->dps + p].dfd;
        if (dfd < 0)
            continue;
        rm_tree(dfd, dir);
        unlinkat(dfd, hash, AT_REMOVEDIR);
        unlinkat(dfd, ab, AT_REMOVEDIR);
    }
    sc->removed++;
}

int ol_se_mpu_open(struct ol_store *s, const struct ol_store_params *p, char *err, size_t errlen)
{
    struct scan sc;
    memset(&sc, 0, sizeof sc);
    sc.s = s;
    sc.buflen = s->meta_cap;
    sc.buf = malloc(sc.buflen);
    int rc = sc.buf ? 0 : -ENOMEM;
    for (unsigned i = 0; rc == 0 && i < s->n; i++) {
        if (s->drives[i].dfd < 0)
            continue;
        rc = scan_drive(&sc, i);
        if (rc < 0 && err && errlen)
            snprintf(err, errlen, "%s: cannot scan the multipart uploads: %s", s->drives[i].path,
                     strerror(-rc));
    }
    uint64_t now = ol_se_now_ns();
    unsigned keep = 0;
    for (size_t i = 0; rc == 0 && i < sc.n; i++) {
        struct found *f = &sc.f[i];
        bool expired = s->mpu_expiry_ns >= 0 && f->initiated_ns + (uint64_t)s->mpu_expiry_ns < now;
        if (expired || f->drives < ol_layout_read_quorum(s->dps, f->m)) {
            remove_found(&sc, f);
            f->drives = 0;
        } else {
            keep++;
        }
    }
    if (rc == 0)
        rc = reg_alloc(s, (p->mpu_max_uploads ? p->mpu_max_uploads : OL_STORE_MPU_UPLOADS) + keep);
    for (size_t i = 0; rc == 0 && i < sc.n; i++) {
        const struct found *f = &sc.f[i];
        if (!f->drives)
            continue;
        struct ol_se_reg *g = s->reg;
        uint32_t idx = g->freel[--g->nfree];
        struct ol_se_upload *u = &g->u[idx];
        u->state = U_LIVE;
        u->m = f->m;
        u->sc = f->sc;
        u->algo = f->algo;
        u->cflags = f->cflags;
        u->B = f->B;
        u->set = f->set;
        u->writers = 0;
        u->initiated_ns = f->initiated_ns;
        memcpy(u->id, f->id, 16);
        u->blen = (uint16_t)strlen(f->bucket);
        memcpy(u->bucket, f->bucket, u->blen + 1u);
        u->klen = f->klen;
        memcpy(u->key, f->key, f->klen);
        u->key[f->klen] = 0;
        memcpy(u->bits, f->bits, OL_SE_PBITS);
        order_insert(g, idx);
    }
    if (rc == -ENOMEM && err && errlen)
        snprintf(err, errlen, "store: out of memory for the multipart registry");
    free(sc.f);
    free(sc.buf);
    return rc;
}

/* ---- per-drive sub-sequences ---------------------------------------------------------- */

enum {
    CR_STAT = OL_SE_MPU_STEPS, CR_MKUP, CR_MKAB, CR_MKH, CR_MKU, CR_MKDATA, CR_TOPEN, CR_TWRITE,
    CR_TSYNC, CR_TCLOSE, CR_RENAME, CR_SYNC_U, CR_SYNC_H, CR_SYNC_AB, CR_SYNC_UP, CR_SYNC_B,
    CR_FAILCLOSE, CU_STEP,
    RM_REC, RM_SYNCED, RM_PART, RM_DATA, RM_UDIR, RM_HASH, RM_AB,
    PR_STAT, PR_OPEN, PR_READ, PR_CLOSE,
    V_OPEN, V_READ, V_CLOSE, V_STAT, V_PART,
    T_UNLINK,
    LP_PART,
};

#define OL_SE_RETRIES 3

static void part_path(struct ol_sdrv *d, uint32_t number)
{
    char sfx[24];
    snprintf(sfx, sizeof sfx, "/part.%u", number);
    ol_se_join(d->path, d->s.r->p_udata, sfx, NULL);
}

/* -- removal of an upload: record, (parts, data/), <upload>, <hash>, <ab> -- */

void ol_se_mpu_rm_start(struct ol_sdrv *d, bool moved)
{
    d->moved = moved;
    d->gone = false;
    d->step = RM_REC;
    ol_se_unlinkat(d, d->s.r->p_urec, 0);
}

static void rm_next(struct ol_sdrv *d)
{
    struct ol_sreq *r = d->s.r;
    if (!d->moved) {
        uint32_t pn = next_bit(r->bits, d->iter);
        if (pn) {
            d->iter = pn + 1;
            part_path(d, pn);
            d->step = RM_PART;
            ol_se_unlinkat(d, d->path, 0);
            return;
        }
        d->step = RM_DATA;
        ol_se_unlinkat(d, r->p_udata, AT_REMOVEDIR);
        return;
    }
    d->step = RM_DATA;
    ol_se_dispatch(d, 0);
}

/* -- reading part n's record: statx (length), open, read the tail, close -- */

static void prec_start(struct ol_sdrv *d, uint32_t number, uint16_t after)
{
    part_path(d, number);
    d->pr_num = number;
    d->pr_after = after;
    d->step = PR_STAT;
    ol_se_statx(d, d->path);
}

static void prec_end(struct ol_sdrv *d, int res)
{
    d->step = d->pr_after;
    ol_se_dispatch(d, res);
}

/* d->mbuf[0..mlen) is the tail of a part file of d->stx.stx_size bytes:
 * its record into d->mf / d->v. 0 or -EBADMSG. */
static int prec_parse(struct ol_sreq *r, struct ol_sdrv *d)
{
    uint32_t len = d->mlen;
    if (len < 8 || memcmp(d->mbuf + len - 4, OL_SE_PREC_MAGIC, 4) != 0)
        return -EBADMSG;
    uint32_t L = ol_le_ld32(d->mbuf + len - 8);
    if (L > len - 8)
        return -EBADMSG;
    struct ol_meta_version *v = &d->v;
    struct ol_meta_part pt;
    if (ol_meta_open(d->mbuf + len - 8 - L, L, &d->mf) < 0 || d->mf.key.len != r->klen ||
        memcmp(d->mf.key.p, r->key, r->klen) != 0 || ol_meta_latest(&d->mf, v) < 0 ||
        v->type != OL_META_OBJECT || v->part_count != 1 || ol_meta_part_at(v, 0, &pt) < 0 ||
        pt.number != d->pr_num || pt.size != v->size || memcmp(v->data_dir, r->uid, 16) != 0 ||
        (unsigned)v->ec.k + v->ec.m != r->n)
        return -EBADMSG;
    if (ol_se_part_blocks(v->size, v->ec.k, v->ec.block_size) + L + 8 != d->stx.stx_size)
        return -EBADMSG; /* a file cut short, or grown */
    return 0;
}

int ol_se_mpu_prec_build(struct ol_sreq *r, struct ol_sdrv *d)
{
    struct ol_meta_version v = r->tv;
    v.ec.index = d->shard;
    const struct ol_meta_version *vp = &v;
    int n = ol_meta_encode(r->key, r->klen, &vp, 1, d->nbuf, OL_SE_PREC_TAIL - 8);
    if (n < 0)
        return n == -ENOSPC ? -EFBIG : n;
    ol_le_st32(d->nbuf + n, (uint32_t)n);
    memcpy(d->nbuf + n + 4, OL_SE_PREC_MAGIC, 4);
    d->nlen = (uint32_t)n + 8;
    return 0;
}

/* -- Complete: the upload record, then every listed part's record -- */

void ol_se_mpu_val_start(struct ol_sdrv *d)
{
    d->step = V_OPEN;
    ol_se_openat(d, d->s.r->p_urec, O_RDONLY, 0);
}

static void val_next(struct ol_sdrv *d)
{
    struct ol_sreq *r = d->s.r;
    if (d->vi == r->ca->nparts) {
        d->valid = true;
        return ol_se_drive_end(d);
    }
    prec_start(d, r->ca->parts[d->vi].number, V_PART);
}

/* The upload record in d->nbuf[0..nlen) is this upload's? */
static bool urec_ok(struct ol_sreq *r, struct ol_sdrv *d, struct ol_meta_version *v)
{
    struct ol_meta_file f;
    return ol_meta_open(d->nbuf, d->nlen, &f) == 0 && f.key.len == r->klen &&
           memcmp(f.key.p, r->key, r->klen) == 0 && ol_meta_latest(&f, v) == 0 &&
           v->type == OL_META_OBJECT && memcmp(v->data_dir, r->uid, 16) == 0 &&
           v->ec.k == r->k && v->ec.m == r->m && v->ec.block_size == r->B;
}

/* The record in d->v matches listed part vi? Fills its size (and its
 * checksum, when the client gave none) the first time. */
static bool part_matches(struct ol_sreq *r, struct ol_sdrv *d)
{
    struct ol_meta_part *pt = &r->ca->parts[d->vi];
    const struct ol_meta_version *v = &d->v;
    if (memcmp(v->etag, pt->etag, 16) != 0 || v->ec.k != r->k || v->ec.m != r->m ||
        v->ec.block_size != r->B)
        return false;
    const uint8_t *given = r->ca->cks_given;
    bool fill = given && !(given[d->vi / 8] >> (d->vi % 8) & 1);
    struct ol_meta_part rp;
    int L = ol_meta_cks_len(r->ualgo);
    if (r->ualgo != OL_META_CKS_NONE) {
        if (v->cks.algo != r->ualgo || ol_meta_part_at(v, 0, &rp) < 0 || L < 0 ||
            (!fill && memcmp(rp.cks, pt->cks, (size_t)L) != 0))
            return false;
    } else {
        fill = false;
    }
    if (!ol_se_bit_get(r->sbits, d->vi)) {
        pt->size = pt->actual_size = v->size;
        if (fill)
            memcpy(pt->cks, rp.cks, (size_t)L);
        ol_se_bit_put(r->sbits, d->vi);
    } else if (pt->size != v->size || (fill && memcmp(rp.cks, pt->cks, (size_t)L) != 0)) {
        return false;
    }
    return true;
}

int ol_se_mpu_val_decide(struct ol_sreq *r)
{
    const struct ol_store *s = r->c->s;
    struct ol_mpu_complete_args *a = r->ca;
    unsigned present = 0, nob = 0, none = 0, ok = 0, invalid = 0;
    int tsrc = -1;
    for (unsigned i = 0; i < r->n; i++) {
        struct ol_sdrv *d = &r->d[i];
        present += d->urec;
        nob += d->ms == OL_SE_M_NOBUCKET;
        none += d->ms == OL_SE_M_NONE;
        invalid += d->err == OL_STORE_EBADPART;
        if (d->valid && !d->err) {
            ok++;
            if (tsrc < 0)
                tsrc = (int)i;
        } else if (!d->err) {
            d->err = -ESTALE; /* no part of the commit */
        }
    }
    if (present < r->rq)
        return present == 0 && nob >= r->rq ? OL_STORE_ENOBUCKET
               : none + nob >= r->rq        ? OL_STORE_ENOUPLOAD
                                            : -EIO;
    if (ok < r->wq)
        return invalid > r->n - r->k ? OL_STORE_EBADPART : -EIO;
    uint64_t sum = 0;
    struct ol_md5 md5 = {0};   /* a lone stream (base/md5.h) */
    ol_md5_init(&md5);
    for (unsigned i = 0; i < a->nparts; i++) {
        if (i + 1 < a->nparts && a->parts[i].size < s->mpu_min_part)
            return OL_STORE_ETOOSMALL;
        sum += a->parts[i].size;
        ol_md5_update(&md5, a->parts[i].etag, 16);
    }
    struct ol_meta_version t;
    if (!urec_ok(r, &r->d[tsrc], &t))
        return -EIO;
    t.mtime_ns = ol_se_now_ns();
    t.size = sum;
    ol_md5_final(&md5, t.etag);
    t.etag_parts = (uint16_t)a->nparts;
    t.part_count = (uint16_t)a->nparts;
    t.parts = a->parts;
    t.parts_enc = NULL;
    memset(&t.cks, 0, sizeof t.cks);
    if (r->has_ccks) {
        t.cks = r->ccks;
    } else if (a->cks_fn) {
        int st = a->cks_fn(a->cks_ud, a->parts, a->nparts, &t.cks);
        if (st < 0)
            return st;
        if (t.cks.algo != r->ualgo)
            return -EINVAL;
    }
    t.ec.index = 0;
    t.has_inline = false;
    t.inline_data = (struct ol_meta_bytes){0};
    const struct ol_meta_version *tp = &t;
    int len = ol_meta_encode(r->key, r->klen, &tp, 1, r->tmpl, s->meta_cap);
    if (len < 0)
        return len == -EINVAL ? -EINVAL : -EIO;
    struct ol_meta_file f;
    if (ol_meta_open(r->tmpl, (size_t)len, &f) < 0 || ol_meta_latest(&f, &r->tv) < 0)
        return -EIO;
    r->tmpl_len = (uint32_t)len;
    r->size = sum;
    a->size = sum;
    memcpy(a->etag, t.etag, 16);
    a->mtime_ns = t.mtime_ns;
    a->storage_class = t.storage_class;
    return 0;
}

/* -- Complete: the parts uploaded but not listed -- */

static void trim_next(struct ol_sdrv *d)
{
    struct ol_sreq *r = d->s.r;
    for (uint32_t pn = next_bit(r->bits, d->iter); pn; pn = next_bit(r->bits, pn + 1)) {
        if (ol_se_bit_get(r->lbits, pn))
            continue;
        d->iter = pn + 1;
        part_path(d, pn);
        d->step = T_UNLINK;
        ol_se_unlinkat(d, d->path, 0);
        return;
    }
    ol_se_drive_end(d);
}

void ol_se_mpu_trim_start(struct ol_sdrv *d)
{
    d->iter = 1;
    trim_next(d);
}

/* ---- the MPU request kind --------------------------------------------------------------- */

enum { MOP_CREATE = 1, MOP_ABORT, MOP_PARTS };
enum { MPH_MAIN = 1, MPH_UNDO, MPH_FIN };

static void cr_fail(struct ol_sdrv *d, int err) { ol_se_drive_fail(d, err, CR_FAILCLOSE); }

/* Create, put back: one op per item, errors ignored. */
static void cu_next(struct ol_sdrv *d)
{
    struct ol_sreq *r = d->s.r;
    for (;;) {
        d->step = CU_STEP;
        switch (d->iter++) {
        case 0:
            if (d->fd >= 0) {
                ol_se_close(d, d->fd);
                d->fd = -1;
                return;
            }
            break;
        case 1:
            if (d->tmeta)
                return ol_se_unlinkat(d, r->p_tmeta, 0);
            break;
        case 2:
            if (d->renamed)
                return ol_se_unlinkat(d, r->p_urec, 0);
            break;
        case 3:
            if (d->made_part)
                return ol_se_unlinkat(d, r->p_udata, AT_REMOVEDIR);
            break;
        case 4:
            if (d->made_tmp)
                return ol_se_unlinkat(d, r->p_udir, AT_REMOVEDIR);
            break;
        case 5:
            if (d->made_obj)
                return ol_se_unlinkat(d, r->p_uhash, AT_REMOVEDIR);
            break;
        case 6:
            if (d->made_ab)
                return ol_se_unlinkat(d, r->p_uab, AT_REMOVEDIR);
            break;
        default:
            return ol_se_drive_end(d);
        }
    }
}

void ol_se_mpu_drive(struct ol_sdrv *d, int res)
{
    struct ol_sreq *r = d->s.r;
    if (ol_se_fsync_step(d, &res))
        return;
    switch (d->step) {
    /* create */
    case CR_STAT:
        if (res == -ENOENT || res == -ENOTDIR) {
            d->ms = OL_SE_M_NOBUCKET;
            return cr_fail(d, -ENOENT);
        }
        if (res < 0)
            return cr_fail(d, res);
        d->bucket = true;
        d->step = CR_MKUP;
        ol_se_mkdirat(d, r->p_uploads);
        return;
    case CR_MKUP:
        if (res == 0)
            d->made_up = true;
        else if (res != -EEXIST)
            return cr_fail(d, res);
        d->step = CR_MKAB;
        ol_se_mkdirat(d, r->p_uab);
        return;
    case CR_MKAB:
        if (res == 0)
            d->made_ab = true;
        else if (res != -EEXIST)
            return cr_fail(d, res);
        d->step = CR_MKH;
        ol_se_mkdirat(d, r->p_uhash);
        return;
    case CR_MKH:
    case CR_MKU:
        if (res == -ENOENT && d->retries++ < OL_SE_RETRIES) {
            d->step = CR_MKAB; /* <ab> or <hash> vanished under an abort's rmdir */
            ol_se_mkdirat(d, r->p_uab);
            return;
        }
        if (d->step == CR_MKH) {
            if (res == 0)
                d->made_obj = true;
            else if (res != -EEXIST)
                return cr_fail(d, res);
            d->step = CR_MKU;
            ol_se_mkdirat(d, r->p_udir);
            return;
        }
        if (res < 0)
            return cr_fail(d, res);
        d->made_tmp = true;
        d->step = CR_MKDATA;
        ol_se_mkdirat(d, r->p_udata);
        return;
    case CR_MKDATA:
        if (res < 0)
            return cr_fail(d, res);
        d->made_part = true;
        d->step = CR_TOPEN;
        ol_se_openat(d, r->p_tmeta, O_CREAT | O_TRUNC | O_WRONLY, 0600);
        return;
    case CR_TOPEN:
        d->tmeta = true; /* made, maybe, even when the open failed */
        if (res < 0)
            return cr_fail(d, res);
        d->fd = res;
        d->step = CR_TWRITE;
        ol_se_write(d, d->fd, r->tmpl, r->tmpl_len, 0);
        return;
    case CR_TWRITE:
        if (res != (int)r->tmpl_len)
            return cr_fail(d, res < 0 ? res : -EIO);
        d->step = CR_TSYNC;
        ol_se_fsync(d, d->fd, 0);
        return;
    case CR_TSYNC:
        if (res < 0)
            return cr_fail(d, res);
        d->step = CR_TCLOSE;
        ol_se_close(d, d->fd);
        d->fd = -1;
        return;
    case CR_TCLOSE:
        d->step = CR_RENAME;
        ol_se_renameat(d, r->p_tmeta, r->p_urec);
        return;
    case CR_RENAME:
        if (res < 0)
            return cr_fail(d, res);
        d->tmeta = false;
        d->renamed = true;
        return ol_se_fsync_dir(d, r->p_udir, CR_SYNC_U);
    case CR_SYNC_U:
        if (res < 0)
            return cr_fail(d, res);
        return ol_se_fsync_dir(d, r->p_uhash, CR_SYNC_H);
    case CR_SYNC_H:
        if (res < 0)
            return cr_fail(d, res);
        if (d->made_obj)
            return ol_se_fsync_dir(d, r->p_uab, CR_SYNC_AB);
        res = 0;
        /* fall through */
    case CR_SYNC_AB:
        if (res < 0)
            return cr_fail(d, res);
        if (d->made_ab)
            return ol_se_fsync_dir(d, r->p_uploads, CR_SYNC_UP);
        res = 0;
        /* fall through */
    case CR_SYNC_UP:
        if (res < 0)
            return cr_fail(d, res);
        if (d->made_up)
            return ol_se_fsync_dir(d, r->p_bucket, CR_SYNC_B);
        res = 0;
        /* fall through */
    case CR_SYNC_B:
        if (res < 0)
            return cr_fail(d, res);
        d->committed = true;
        return ol_se_drive_end(d);
    case CR_FAILCLOSE:
        return ol_se_drive_end(d);
    case CU_STEP:
        return cu_next(d);
    /* removal */
    case RM_REC:
        if (res < 0 && res != -ENOENT) { /* the record stays: so do the parts */
            if (!d->err)
                d->err = res;
            return ol_se_drive_end(d);
        }
        if (res == 0)
            return ol_se_fsync_dir(d, r->p_udir, RM_SYNCED);
        d->gone = true;
        d->iter = 1;
        return rm_next(d);
    case RM_SYNCED:
        if (res < 0 && !d->err)
            d->err = res; /* gone, but maybe not durably */
        d->gone = true;
        d->iter = 1;
        return rm_next(d);
    case RM_PART:
        return rm_next(d);
    case RM_DATA:
        d->step = RM_UDIR;
        ol_se_unlinkat(d, r->p_udir, AT_REMOVEDIR);
        return;
    case RM_UDIR:
        d->step = RM_HASH;
        ol_se_unlinkat(d, r->p_uhash, AT_REMOVEDIR);
        return;
    case RM_HASH:
        if (res < 0)
            return ol_se_drive_end(d); /* another upload of the key is there */
        d->step = RM_AB;
        ol_se_unlinkat(d, r->p_uab, AT_REMOVEDIR);
        return;
    case RM_AB:
        return ol_se_drive_end(d);
    /* part record */
    case PR_STAT:
        if (res < 0)
            return prec_end(d, res);
        if (d->stx.stx_size < 8)
            return prec_end(d, -EBADMSG);
        d->step = PR_OPEN;
        ol_se_openat(d, d->path, O_RDONLY, 0);
        return;
    case PR_OPEN: {
        if (res < 0)
            return prec_end(d, res);
        d->fd = res;
        uint64_t size = d->stx.stx_size;
        uint32_t len = size < OL_SE_PREC_TAIL ? (uint32_t)size : OL_SE_PREC_TAIL;
        d->mlen = len;
        d->step = PR_READ;
        ol_se_read(d, d->fd, d->mbuf, len, size - len);
        return;
    }
    case PR_READ:
        d->pr_res = res == (int)d->mlen ? 0 : res < 0 ? res : -EBADMSG;
        d->step = PR_CLOSE;
        ol_se_close(d, d->fd);
        d->fd = -1;
        return;
    case PR_CLOSE:
        return prec_end(d, d->pr_res ? d->pr_res : prec_parse(r, d));
    /* Complete's checks */
    case V_OPEN:
        if (res == -ENOENT || res == -ENOTDIR) {
            d->step = V_STAT;
            ol_se_statx(d, r->p_bucket);
            return;
        }
        if (res < 0) {
            d->err = res;
            return ol_se_drive_end(d);
        }
        d->fd = res;
        d->step = V_READ;
        ol_se_read(d, d->fd, d->nbuf, r->c->s->meta_cap, 0);
        return;
    case V_READ:
        if (res < 0)
            d->err = res;
        else
            d->nlen = (uint32_t)res;
        d->step = V_CLOSE;
        ol_se_close(d, d->fd);
        d->fd = -1;
        return;
    case V_CLOSE: {
        if (d->err)
            return ol_se_drive_end(d);
        d->urec = true;
        struct ol_meta_version t;
        if (d->nlen >= r->c->s->meta_cap || !urec_ok(r, d, &t)) {
            d->ms = OL_SE_M_BAD;
            d->err = -EIO;
            return ol_se_drive_end(d);
        }
        d->ms = OL_SE_M_OK;
        d->vi = 0;
        return val_next(d);
    }
    case V_STAT:
        d->ms = res == 0 ? OL_SE_M_NONE
                : res == -ENOENT || res == -ENOTDIR ? OL_SE_M_NOBUCKET : OL_SE_M_ERR;
        d->err = res < 0 && d->ms == OL_SE_M_ERR ? res : -ENOENT;
        return ol_se_drive_end(d);
    case V_PART:
        if (res == -ENOENT || res == -ENOTDIR || res == -EBADMSG) {
            d->err = OL_STORE_EBADPART; /* not there, or not that part */
            return ol_se_drive_end(d);
        }
        if (res < 0) {
            d->err = res;
            return ol_se_drive_end(d);
        }
        if (!part_matches(r, d)) {
            d->err = OL_STORE_EBADPART;
            return ol_se_drive_end(d);
        }
        d->vi++;
        return val_next(d);
    case T_UNLINK:
        return trim_next(d);
    case LP_PART:
        d->ms = res == 0 ? OL_SE_M_OK : OL_SE_M_NONE;
        return ol_se_drive_end(d);
    default:
        return ol_se_drive_end(d);
    }
}

/* Releases r, then EV_DONE with status and len. */
static bool mpu_done(struct ol_sreq *r, int status, size_t len)
{
    ol_store_cb cb = r->cb;
    void *ud = r->ud;
    ol_se_req_put(r);
    struct ol_store_event ev = {.type = OL_STORE_EV_DONE, .status = status, .len = len};
    cb(ud, &ev);
    return true;
}

/* Quorums for parity r->m. */
static void quorums(struct ol_sreq *r)
{
    r->k = r->n - r->m;
    r->wq = ol_layout_write_quorum(r->n, r->m);
    r->rq = ol_layout_read_quorum(r->n, r->m);
}

static void rm_all(struct ol_sreq *r)
{
    ol_se_drives_init(r);
    r->phase = MPH_MAIN;
    ol_se_phase_begin(r);
    for (unsigned p = 0; p < r->n; p++) {
        struct ol_sdrv *d = &r->d[p];
        if (d->err)
            continue;
        ol_se_drive_begin(d);
        ol_se_mpu_rm_start(d, false);
    }
    ol_se_phase_started(r);
}

/* Expiry: takes the next expired upload (exclusively) into r. */
static bool expired_take(struct ol_sreq *r)
{
    struct ol_store *s = r->c->s;
    struct ol_se_reg *g = s->reg;
    bool found = false;
    pthread_mutex_lock(&g->mu);
    for (unsigned i = 0; i < g->count; i++) {
        uint32_t idx = g->order[i];
        struct ol_se_upload *u = &g->u[idx];
        if (u->state != U_LIVE || u->writers ||
            u->initiated_ns + (uint64_t)s->mpu_expiry_ns >= r->now_ns)
            continue;
        u->state = U_EXCL;
        ol_se_names(r, u->bucket, u->key);
        ol_se_upload_names(r, u->id);
        memcpy(r->bits, u->bits, OL_SE_PBITS);
        take_fields(r, u);
        r->uidx = (int)idx;
        found = true;
        break;
    }
    pthread_mutex_unlock(&g->mu);
    if (found)
        quorums(r);
    return found;
}

/* ListParts: reads the record of the next part number after r->pnum, or ends. */
static void lp_next(struct ol_sreq *r)
{
    uint32_t pn = r->pnum < OL_STORE_MPU_MAX_PART_NUM ? next_bit(r->bits, r->pnum + 1) : 0;
    ol_se_phase_begin(r);
    if (!pn) {
        r->phase = MPH_FIN;
    } else {
        r->pnum = pn;
        r->phase = MPH_MAIN;
        for (unsigned p = 0; p < r->n; p++) {
            struct ol_sdrv *d = &r->d[p];
            if (d->err)
                continue;
            d->ms = OL_SE_M_UNKNOWN;
            ol_se_drive_begin(d);
            prec_start(d, pn, LP_PART);
        }
    }
    ol_se_phase_started(r);
}

/* ListParts: the record of r->pnum a read quorum agrees on (newest), or -1. */
static int lp_choose(struct ol_sreq *r)
{
    int best = -1;
    for (unsigned i = 0; i < r->n; i++) {
        const struct ol_meta_version *v = &r->d[i].v;
        if (r->d[i].ms != OL_SE_M_OK)
            continue;
        unsigned cnt = 0;
        for (unsigned j = 0; j < r->n; j++) {
            const struct ol_meta_version *w = &r->d[j].v;
            cnt += r->d[j].ms == OL_SE_M_OK && memcmp(v->etag, w->etag, 16) == 0 &&
                   v->size == w->size && v->ec.k == w->ec.k && v->ec.block_size == w->ec.block_size;
        }
        if (cnt >= r->k && (best < 0 || v->mtime_ns > r->d[best].v.mtime_ns))
            best = (int)i;
    }
    return best;
}

bool ol_se_mpu_step(struct ol_sreq *r)
{
    if (r->active || !ol_se_can_emit(r))
        return false;
    struct ol_store_stats *st = &r->c->st;
    unsigned ok = 0, has = 0, nob = 0;
    for (unsigned i = 0; i < r->n; i++) {
        const struct ol_sdrv *d = &r->d[i];
        ok += !d->err && (r->mop == MOP_CREATE ? d->committed : d->gone);
        has += d->bucket;
        nob += d->ms == OL_SE_M_NOBUCKET;
    }
    switch (r->mop) {
    case MOP_CREATE:
        if (r->phase == MPH_MAIN) {
            if (ok >= r->wq) {
                struct ol_se_reg *g = r->c->s->reg;
                pthread_mutex_lock(&g->mu);
                struct ol_se_upload *u = held(g, r);
                if (u) {
                    u->state = U_LIVE;
                    order_insert(g, (uint32_t)r->uidx);
                }
                pthread_mutex_unlock(&g->mu);
                st->mpu_created++;
                if (ok < r->n) {
                    st->write_drive_failures += r->n - ok;
                    st->needs_heal++;
                }
                return mpu_done(r, 0, 0);
            }
            r->status = has == 0 && nob >= r->rq ? OL_STORE_ENOBUCKET : -EIO;
            r->phase = MPH_UNDO;
            ol_se_phase_begin(r);
            for (unsigned p = 0; p < r->n; p++) {
                struct ol_sdrv *d = &r->d[p];
                if (!ol_se_online(r, p))
                    continue;
                ol_se_drive_begin(d);
                d->iter = 0;
                cu_next(d);
            }
            ol_se_phase_started(r);
            return false;
        }
        ol_se_mpu_leave(r, true); /* the reservation */
        return mpu_done(r, r->status, 0);
    case MOP_ABORT:
        if (ok < r->wq) {
            ol_se_mpu_leave(r, false);
            return mpu_done(r, -EIO, r->removed);
        }
        ol_se_mpu_leave(r, true);
        st->mpu_aborted++;
        if (ok < r->n)
            st->needs_heal++;
        r->removed++;
        if (r->expire && expired_take(r)) {
            rm_all(r);
            return false;
        }
        return mpu_done(r, 0, r->removed);
    default: { /* MOP_PARTS */
        unsigned usable = 0;
        for (unsigned i = 0; i < r->n; i++)
            usable += !r->d[i].err;
        if (usable < r->k)
            return mpu_done(r, -EIO, 0);
        if (r->phase == MPH_MAIN) {
            int best = lp_choose(r);
            if (best >= 0) {
                struct ol_mpu_list_parts_args *a = r->la;
                if (a->count == a->max) {
                    a->truncated = true;
                    return mpu_done(r, 0, 0);
                }
                const struct ol_meta_version *v = &r->d[best].v;
                struct ol_mpu_part_info *o = &a->out[a->count++];
                struct ol_meta_part pt;
                memset(o, 0, sizeof *o);
                o->number = r->pnum;
                o->size = v->size;
                memcpy(o->etag, v->etag, 16);
                o->mtime_ns = v->mtime_ns;
                if (ol_meta_part_at(v, 0, &pt) == 0)
                    memcpy(o->cks, pt.cks, sizeof o->cks);
            }
            lp_next(r);
            return false;
        }
        return mpu_done(r, 0, 0);
    }
    }
}

/* ---- API ------------------------------------------------------------------------------------ */

int ol_mpu_create(struct ol_store_core *c, struct ol_mpu_create_args *a, ol_store_cb cb,
                  void *ud)
{
    struct ol_store *s = c->s;
    unsigned m = a->parity < 0 ? s->parity : (unsigned)a->parity;
    if (m > s->dps / 2 || m > OL_EC_MAX_PARITY || !c->ec[m] || !a->v)
        return -EINVAL;
    struct ol_sreq *r = ol_se_req_get(c, OL_SE_MPU, cb, ud);
    if (!r)
        return -EBUSY;
    ol_se_names(r, a->bucket, a->key);
    r->mop = MOP_CREATE;
    r->m = m;
    quorums(r);
    r->B = (uint32_t)ol_ec_shard_len(s->stripe_bytes, r->k);
    uint64_t h = ol_layout_object_hash(s->deployment, r->bucket, r->blen, r->key, r->klen);
    ol_layout_distribution(h, r->n, r->dist);
    uint8_t id[16];
    ol_se_random_id(c, id);
    ol_se_upload_names(r, id);
    /* the template: what the object will carry, and the upload's geometry */
    struct ol_meta_version t = *a->v;
    t.type = OL_META_OBJECT;
    memset(t.vid, 0, sizeof t.vid);
    t.mtime_ns = ol_se_now_ns();
    t.size = 0;
    memset(t.etag, 0, sizeof t.etag);
    t.etag_parts = 0;
    uint8_t algo = a->v->cks.algo, cflags = a->v->cks.flags & OL_META_CKS_FULL_OBJECT;
    memset(&t.cks, 0, sizeof t.cks);
    t.cks.algo = algo;
    t.cks.flags = cflags;
    memset(&t.ec, 0, sizeof t.ec);
    t.ec.k = (uint8_t)r->k;
    t.ec.m = (uint8_t)r->m;
    t.ec.block_size = r->B;
    memcpy(t.ec.dist, r->dist, r->n);
    memcpy(t.data_dir, id, 16);
    t.part_count = 0;
    t.parts = NULL;
    t.parts_enc = NULL;
    t.has_inline = false;
    t.inline_data = (struct ol_meta_bytes){0};
    const struct ol_meta_version *tp = &t;
    int len = ol_meta_encode(r->key, r->klen, &tp, 1, r->tmpl, s->meta_cap);
    if (len < 0) {
        ol_se_req_put(r);
        return -EINVAL;
    }
    r->tmpl_len = (uint32_t)len;
    /* a registry entry, made LIVE once the quorum has the record */
    struct ol_se_reg *g = s->reg;
    pthread_mutex_lock(&g->mu);
    if (!g->nfree) {
        pthread_mutex_unlock(&g->mu);
        ol_se_req_put(r);
        return -ENOSPC;
    }
    uint32_t idx = g->freel[--g->nfree];
    struct ol_se_upload *u = &g->u[idx];
    u->state = U_RESERVED;
    u->m = (uint8_t)r->m;
    u->sc = t.storage_class;
    u->algo = algo;
    u->cflags = cflags;
    u->B = r->B;
    u->set = r->set;
    u->writers = 0;
    u->initiated_ns = t.mtime_ns;
    memcpy(u->id, id, 16);
    u->blen = (uint16_t)r->blen;
    memcpy(u->bucket, r->bucket, r->blen + 1);
    u->klen = (uint16_t)r->klen;
    memcpy(u->key, r->key, r->klen + 1);
    memset(u->bits, 0, sizeof u->bits);
    pthread_mutex_unlock(&g->mu);
    r->uidx = (int)idx;
    memcpy(a->upload_id, id, 16);
    ol_se_random_id(c, r->tid);
    ol_se_path_id(r->p_tmeta, OL_FORMAT_DIR "/tmp", r->tid, ".meta");
    ol_se_drives_init(r);
    r->phase = MPH_MAIN;
    r->in_api = true;
    ol_se_statx_phase(r, r->p_bucket, CR_STAT);
    r->in_api = false;
    return 0;
}

int ol_mpu_abort(struct ol_store_core *c, const char *bucket, const char *key,
                 const uint8_t upload_id[OL_STORE_MPU_ID_LEN], ol_store_cb cb, void *ud)
{
    struct ol_sreq *r = ol_se_req_get(c, OL_SE_MPU, cb, ud);
    if (!r)
        return -EBUSY;
    ol_se_names(r, bucket, key);
    ol_se_upload_names(r, upload_id);
    r->mop = MOP_ABORT;
    r->bits = r->slot[1].base;
    int rc = excl_enter(r, false);
    if (rc < 0) {
        ol_se_req_put(r);
        return rc;
    }
    quorums(r);
    r->in_api = true;
    rm_all(r);
    r->in_api = false;
    return 0;
}

int ol_store_mpu_cleanup(struct ol_store_core *c, uint64_t now_ns, ol_store_cb cb, void *ud)
{
    if (c->s->mpu_expiry_ns < 0)
        return -ENOENT;
    struct ol_sreq *r = ol_se_req_get(c, OL_SE_MPU, cb, ud);
    if (!r)
        return -EBUSY;
    r->mop = MOP_ABORT;
    r->expire = true;
    r->now_ns = now_ns;
    r->bits = r->slot[1].base;
    if (!expired_take(r)) {
        ol_se_req_put(r);
        return -ENOENT;
    }
    r->in_api = true;
    rm_all(r);
    r->in_api = false;
    return 0;
}

int ol_mpu_list_parts(struct ol_store_core *c, struct ol_mpu_list_parts_args *a, ol_store_cb cb,
                      void *ud)
{
    if (a->max == 0)
        return -EINVAL;
    a->count = 0;
    a->truncated = false;
    struct ol_sreq *r = ol_se_req_get(c, OL_SE_MPU, cb, ud);
    if (!r)
        return -EBUSY;
    ol_se_names(r, a->bucket, a->key);
    ol_se_upload_names(r, a->upload_id);
    r->mop = MOP_PARTS;
    r->la = a;
    r->bits = r->slot[1].base;
    struct ol_se_reg *g = c->s->reg;
    pthread_mutex_lock(&g->mu);
    int idx = find_entry(g, r);
    if (idx >= 0) { /* a snapshot: nothing held */
        const struct ol_se_upload *u = &g->u[idx];
        memcpy(r->bits, u->bits, OL_SE_PBITS);
        take_fields(r, u);
        a->initiated_ns = u->initiated_ns;
        a->storage_class = u->sc;
        a->cks_algo = u->algo;
        a->cks_flags = u->cflags;
    }
    pthread_mutex_unlock(&g->mu);
    if (idx < 0) {
        ol_se_req_put(r);
        return OL_STORE_ENOUPLOAD;
    }
    quorums(r);
    r->pnum = a->marker;
    ol_se_drives_init(r);
    r->in_api = true;
    lp_next(r);
    r->in_api = false;
    return 0;
}
