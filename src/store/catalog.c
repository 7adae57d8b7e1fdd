/*
 * catalog.c - per-bucket listing indexes: load or rebuild at start, memory
 * while serving (updated by the engine at its commits), checkpoint at a
 * clean shutdown of a catalog that is not dirty (see catalog.h).
 */
#include "store/catalog.h"

#include "base/assert.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "store/layout.h"
#include "store/meta.h"


struct cbucket {
    char name[64];
    struct ol_index *idx;      /* memory-only while serving */
    pthread_mutex_t mu;
    int64_t created;           /* seconds: the oldest birth time of its directories */
    unsigned seen;             /* drives holding it at open */
    bool listed;               /* ListBuckets shows it (on half the drives, or created) */
};

struct ol_catalog {
    pthread_rwlock_t lock;     /* the table */
    struct cbucket *b[OL_CATALOG_MAX_BUCKETS];
    unsigned n;
    char root[4200];           /* <first drive>/.openlake/index */
    char **drives;
    unsigned ndrives;
    unsigned marker_quorum;    /* drives agreeing on a delete marker (a GET's read quorum) */
    atomic_bool dirty;         /* an index may be wrong: no clean marker at close */
    atomic_uint_fast64_t errors; /* times it was marked dirty */
};

/* One entry of a page: its name at names[off], len bytes. */
struct pent {
    uint32_t off;
    uint16_t len;
    bool prefix;               /* a CommonPrefix (rec unused) */
    struct ol_index_rec rec;
};

struct ol_catalog_page {
    unsigned n;
    size_t used;               /* bytes of names */
    struct pent e[OL_CATALOG_PAGE_MAX];
    uint8_t names[OL_CATALOG_PAGE_MAX * OL_INDEX_KEY_MAX];
};

static void say(char *err, size_t errlen, const char *fmt, const char *a, int e)
{
    snprintf(err, errlen, fmt, a, strerror(e));
}

static struct cbucket *find_locked(struct ol_catalog *c, const char *name)
{
    for (unsigned i = 0; i < c->n; i++)
        if (strcmp(c->b[i]->name, name) == 0)
            return c->b[i];
    return NULL;
}

static int add_locked(struct ol_catalog *c, const char *name, struct ol_index *idx)
{
    if (c->n == OL_CATALOG_MAX_BUCKETS)
        return -ENOSPC;
    struct cbucket *b = calloc(1, sizeof *b);
    if (!b)
        return -ENOMEM;
    snprintf(b->name, sizeof b->name, "%s", name);
    b->idx = idx;
    pthread_mutex_init(&b->mu, NULL);
    c->b[c->n++] = b;
    return 0;
}

/* ---- rebuild from object metadata ------------------------------------------------ */

static int read_file(const char *path, uint8_t *buf, size_t cap, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    size_t got = 0;
    for (;;) {
        ssize_t r = read(fd, buf + got, cap - got);
        if (r < 0) {
            int e = errno;
            close(fd);
            return -e;
        }
        if (r == 0)
            break;
        got += (size_t)r;
        if (got == cap)
            break;
    }
    close(fd);
    *len = got;
    return 0;
}

/* Whether rel (a path under each drive) exists on a drive before d. */
static bool seen_before(const struct ol_catalog *c, unsigned d, const char *rel)
{
    char path[5000];
    for (unsigned j = 0; j < d; j++) {
        snprintf(path, sizeof path, "%s/%s", c->drives[j], rel);
        if (access(path, F_OK) == 0)
            return true;
    }
    return false;
}

/*
 * The object in directory rel (".openlake/buckets/<b>/objects/<ab>/<hash>",
 * the same on every drive of its set) as a GET would see it: among the
 * drives' latest versions, the newest one that its erasure k drives agree
 * on (ol_meta_same_version; a delete marker: the read quorum, as a GET
 * counts); a delete marker is kept, flagged, for
 * ListObjectVersions (ListObjects skips it). So a write or delete cut short
 * by a crash is listed exactly when it can be read. Returns 1 and fills
 * rec, key (OL_LAYOUT_KEY_MAX + 1 bytes) and *klen; 0 when no version has
 * a read quorum.
 */
struct scratch {
    uint8_t *buf;                /* one metadata file */
    struct ol_meta_version *lv;  /* per drive: its latest version */
    uint32_t *nv;                /* per drive: versions in its file */
    bool *ok;                    /* per drive: lv is valid and of this key */
};

static int quorum_latest(const struct ol_catalog *c, const char *rel, struct scratch *sc,
                         unsigned long long *metas, struct ol_index_rec *rec, char *key,
                         size_t *klen)
{
    struct ol_meta_version *lv = sc->lv;
    bool *ok = sc->ok;
    uint8_t *buf = sc->buf;
    bool have_key = false;
    unsigned n = c->ndrives;
    for (unsigned i = 0; i < n; i++) {
        ok[i] = false;
        char meta[5000];
        snprintf(meta, sizeof meta, "%s/%s/meta", c->drives[i], rel);
        size_t len = 0;
        if (read_file(meta, buf, OL_META_MAX_FILE, &len) < 0)
            continue;
        (*metas)++;
        struct ol_meta_file f;
        if (ol_meta_open(buf, len, &f) < 0 || ol_meta_latest(&f, &lv[i]) < 0 ||
            f.key.len > OL_LAYOUT_KEY_MAX)
            continue;   /* damaged copies are left to the other drives and heal */
        if (!have_key) {
            memcpy(key, f.key.p, f.key.len);
            *klen = f.key.len;
            have_key = true;
        } else if (f.key.len != *klen || memcmp(key, f.key.p, *klen) != 0) {
            continue;   /* another key's file (hash collision): not this object */
        }
        sc->nv[i] = f.count;
        ok[i] = true;   /* lv[i]'s pointers are stale now: only its fields are used */
    }
    int best = -1;
    for (unsigned i = 0; i < n; i++) {
        if (!ok[i])
            continue;
        unsigned cnt = 0;
        for (unsigned j = 0; j < n; j++)
            cnt += ok[j] && ol_meta_same_version(&lv[i], &lv[j]);
        unsigned need = lv[i].type == OL_META_OBJECT ? lv[i].ec.k : c->marker_quorum;
        if (cnt >= need && (best < 0 || lv[i].mtime_ns > lv[best].mtime_ns))
            best = (int)i;
    }
    if (best < 0)
        return 0;
    const struct ol_meta_version *v = &lv[best];
    memset(rec, 0, sizeof *rec);
    rec->mtime_ns = v->mtime_ns;
    if (v->type == OL_META_OBJECT) {
        rec->size = v->size;
        rec->etag_parts = v->etag_parts;
        rec->storage_class = v->storage_class;
        memcpy(rec->etag, v->etag, 16);
    } else {
        rec->flags |= OL_INDEX_F_DELETE_MARKER;  /* kept for ListObjectVersions */
    }
    if (sc->nv[best] > 1 || !ol_meta_vid_is_null(v->vid))
        rec->flags |= OL_INDEX_F_VERSIONS;
    memcpy(rec->version_id, v->vid, 16);
    return 1;
}

/* Every object of bucket, each looked at once across the drives. */
static int rebuild(struct ol_catalog *c, const char *bucket, struct ol_index *idx,
                   uint8_t *buf, unsigned long long *metas)
{
    char key[OL_LAYOUT_KEY_MAX + 1];
    struct scratch sc = {.buf = buf, .lv = calloc(c->ndrives, sizeof *sc.lv),
                         .nv = calloc(c->ndrives, sizeof *sc.nv),
                         .ok = calloc(c->ndrives, sizeof *sc.ok)};
    int rc = sc.lv && sc.nv && sc.ok ? 0 : -ENOMEM;
    for (unsigned d = 0; d < c->ndrives && rc == 0; d++) {
        char objs[4400];
        snprintf(objs, sizeof objs, "%s/.openlake/buckets/%s/objects", c->drives[d], bucket);
        DIR *top = opendir(objs);
        if (!top)
            continue;
        struct dirent *e1;
        while (rc == 0 && (e1 = readdir(top))) {
            if (e1->d_name[0] == '.')
                continue;
            char fan[4700];
            snprintf(fan, sizeof fan, "%s/%s", objs, e1->d_name);
            DIR *mid = opendir(fan);
            if (!mid)
                continue;
            struct dirent *e2;
            while (rc == 0 && (e2 = readdir(mid))) {
                if (e2->d_name[0] == '.')
                    continue;
                char rel[1024];
                snprintf(rel, sizeof rel, ".openlake/buckets/%s/objects/%s/%s", bucket,
                         e1->d_name, e2->d_name);
                if (seen_before(c, d, rel))
                    continue;   /* looked at from an earlier drive of its set */
                struct ol_index_rec rec;
                size_t klen = 0;
                if (quorum_latest(c, rel, &sc, metas, &rec, key, &klen) == 1)
                    rc = ol_index_put(idx, key, klen, &rec);
            }
            closedir(mid);
        }
        closedir(top);
    }
    free(sc.lv);
    free(sc.nv);
    free(sc.ok);
    return rc < 0 ? rc : 0;
}

/* The saved index of bucket, copied into a new memory-only one. */
static int load(const char *dir, struct ol_index **out)
{
    struct ol_index *disk, *mem;
    int rc = ol_index_open(dir, &disk, NULL);
    if (rc < 0)
        return rc;
    rc = ol_index_create_empty(NULL, &mem);
    if (rc < 0) {
        ol_index_close(disk);
        return rc;
    }
    struct ol_index_cursor cur;
    int more = ol_index_seek(disk, &cur, NULL, 0, false);
    while (more == 1 && rc >= 0) {
        rc = ol_index_put(mem, cur.key, cur.klen, &cur.rec);
        more = ol_index_next(&cur);
    }
    ol_index_close(disk);
    if (rc < 0 || more < 0) {
        ol_index_close(mem);
        return rc < 0 ? rc : more;
    }
    *out = mem;
    return 0;
}

static void fsync_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

int ol_catalog_open(const char *const *drives, unsigned n, unsigned marker_quorum,
                    struct ol_catalog **out, struct ol_catalog_info *info, char *err,
                    size_t errlen)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct ol_catalog_info inf = {0};
    struct ol_catalog *c = calloc(1, sizeof *c);
    uint8_t *buf = malloc(OL_META_MAX_FILE);
    if (!c || !buf || !(c->drives = calloc(n, sizeof *c->drives))) {
        free(buf);
        if (c)
            free(c->drives);
        free(c);
        snprintf(err, errlen, "catalog: out of memory");
        return -ENOMEM;
    }
    pthread_rwlock_init(&c->lock, NULL);
    c->ndrives = n;
    c->marker_quorum = marker_quorum ? marker_quorum : 1;
    for (unsigned i = 0; i < n; i++)
        c->drives[i] = strdup(drives[i]);
    snprintf(c->root, sizeof c->root, "%s/.openlake/index", drives[0]);
    if (mkdir(c->root, 0700) < 0 && errno != EEXIST) {
        int e = errno;
        say(err, errlen, "%s: %s", c->root, e);
        free(buf);
        ol_catalog_close(c);
        return -e;
    }
    char marker[4300];
    snprintf(marker, sizeof marker, "%s/clean", c->root);
    bool clean = access(marker, F_OK) == 0;

    /* the buckets: directories under .openlake/buckets on any drive */
    int rc = 0;
    for (unsigned d = 0; d < n && rc == 0; d++) {
        char path[4300];
        snprintf(path, sizeof path, "%s/.openlake/buckets", drives[d]);
        DIR *dir = opendir(path);
        if (!dir)
            continue;
        struct dirent *e;
        while ((e = readdir(dir)) && rc == 0) {
            if (ol_layout_bucket_ok(e->d_name, strlen(e->d_name)) < 0)
                continue;
            char full[sizeof path + 256 + 2];
            snprintf(full, sizeof full, "%s/%s", path, e->d_name);
            struct statx sx;
            if (statx(AT_FDCWD, full, 0, STATX_BTIME | STATX_MTIME, &sx) < 0 ||
                !S_ISDIR(sx.stx_mode))
                continue;
            int64_t born = (sx.stx_mask & STATX_BTIME) ? sx.stx_btime.tv_sec
                                                       : sx.stx_mtime.tv_sec;
            struct cbucket *have = find_locked(c, e->d_name);
            if (have) {
                have->seen++;
                if (born < have->created)
                    have->created = born;
                continue;
            }
            struct ol_index *idx = NULL;
            char idir[sizeof c->root + 260];
            snprintf(idir, sizeof idir, "%s/%s", c->root, e->d_name);
            if (!clean || load(idir, &idx) < 0) {
                rc = ol_index_create_empty(NULL, &idx);
                if (rc == 0)
                    rc = rebuild(c, e->d_name, idx, buf, &inf.metas);
                inf.rebuilt++;
            }
            if (rc == 0 && (rc = add_locked(c, e->d_name, idx)) == 0) {
                c->b[c->n - 1]->created = born;
                c->b[c->n - 1]->seen = 1;
            } else if (idx) {
                ol_index_close(idx);
            }
        }
        closedir(dir);
    }
    for (unsigned i = 0; i < c->n; i++)   /* a name on fewer drives is a leftover */
        c->b[i]->listed = 2 * c->b[i]->seen >= n;
    free(buf);
    if (rc < 0) {
        snprintf(err, errlen, "catalog: building the bucket indexes: %s", strerror(-rc));
        ol_catalog_close(c);
        return rc;
    }
    /* From here on the saved indexes are stale until the next clean close. */
    if (clean) {
        unlink(marker);
        fsync_dir(c->root);
    }
    inf.buckets = c->n;
    for (unsigned i = 0; i < c->n; i++)
        inf.keys += ol_index_count(c->b[i]->idx);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    inf.seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    if (info)
        *info = inf;
    *out = c;
    return 0;
}

/* Removes an index directory's files, then the directory. */
static void remove_dir(const char *path)
{
    DIR *dir = opendir(path);
    if (!dir)
        return;
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (e->d_name[0] == '.')
            continue;
        char f[sizeof ((struct ol_catalog *)0)->root + 600];
        snprintf(f, sizeof f, "%s/%s", path, e->d_name);
        unlink(f);
    }
    closedir(dir);
    rmdir(path);
}

static int save(struct ol_catalog *c, struct cbucket *b)
{
    char dir[sizeof c->root + 80];
    snprintf(dir, sizeof dir, "%s/%s", c->root, b->name);
    struct ol_index *disk;
    int rc = ol_index_create_empty(dir, &disk);
    if (rc < 0)
        return rc;
    struct ol_index_cursor cur;
    int more = ol_index_seek(b->idx, &cur, NULL, 0, false);
    while (more == 1 && rc >= 0) {
        rc = ol_index_put(disk, cur.key, cur.klen, &cur.rec);
        more = ol_index_next(&cur);
    }
    if (rc >= 0 && more >= 0)
        rc = ol_index_checkpoint(disk);
    else if (rc >= 0)
        rc = more;
    ol_index_close(disk);
    return rc < 0 ? rc : 0;
}

int ol_catalog_close(struct ol_catalog *c)
{
    if (!c)
        return 0;
    int first = 0;
    if (atomic_load(&c->dirty)) {
        first = -ESTALE;   /* nothing saved, no marker: the next start rebuilds */
    } else if (c->root[0]) {
        for (unsigned i = 0; i < c->n; i++) {
            int rc = save(c, c->b[i]);
            if (rc < 0 && !first)
                first = rc;
        }
        /* indexes of buckets deleted meanwhile */
        DIR *dir = opendir(c->root);
        if (dir) {
            struct dirent *e;
            while ((e = readdir(dir))) {
                if (ol_layout_bucket_ok(e->d_name, strlen(e->d_name)) < 0 ||
                    find_locked(c, e->d_name))
                    continue;
                char p[sizeof c->root + 260];
                snprintf(p, sizeof p, "%s/%s", c->root, e->d_name);
                remove_dir(p);
            }
            closedir(dir);
        }
        if (first == 0) {
            char marker[4300];
            snprintf(marker, sizeof marker, "%s/clean", c->root);
            int fd = open(marker, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
            if (fd < 0 || fsync(fd) < 0)
                first = -errno;
            if (fd >= 0)
                close(fd);
            fsync_dir(c->root);
        }
    }
    for (unsigned i = 0; i < c->n; i++) {
        ol_index_close(c->b[i]->idx);
        pthread_mutex_destroy(&c->b[i]->mu);
        free(c->b[i]);
    }
    for (unsigned i = 0; i < c->ndrives; i++)
        free(c->drives[i]);
    free(c->drives);
    pthread_rwlock_destroy(&c->lock);
    free(c);
    return first;
}

/* ---- serving ----------------------------------------------------------------------- */

void ol_catalog_set_dirty(struct ol_catalog *c, const char *what, int err)
{
    atomic_fetch_add(&c->errors, 1);
    if (!atomic_exchange(&c->dirty, true))
        ol_warn("listing index: %s%s%s; it stays in use, and the next start rebuilds it from "
                "the object metadata", what, err ? ": " : "", err ? strerror(-err) : "");
}

bool ol_catalog_dirty(const struct ol_catalog *c) { return atomic_load(&c->dirty); }

uint64_t ol_catalog_errors(const struct ol_catalog *c) { return atomic_load(&c->errors); }

int ol_catalog_bucket_add(struct ol_catalog *c, const char *bucket)
{
    struct ol_index *idx;
    int rc = ol_index_create_empty(NULL, &idx);
    if (rc < 0) {
        ol_catalog_set_dirty(c, "a new bucket could not be added", rc);
        return rc;
    }
    pthread_rwlock_wrlock(&c->lock);
    struct cbucket *have = find_locked(c, bucket);
    rc = have ? 0 : add_locked(c, bucket, idx);
    bool used = rc == 0 && c->n && c->b[c->n - 1]->idx == idx;
    if (used) {
        have = c->b[c->n - 1];
        have->created = (int64_t)time(NULL);
    }
    if (have)
        have->listed = true;
    pthread_rwlock_unlock(&c->lock);
    if (!used)
        ol_index_close(idx);
    if (rc < 0)
        ol_catalog_set_dirty(c, "a new bucket could not be added", rc);
    return rc;
}

void ol_catalog_bucket_remove(struct ol_catalog *c, const char *bucket)
{
    struct cbucket *gone = NULL;
    pthread_rwlock_wrlock(&c->lock);
    for (unsigned i = 0; i < c->n; i++)
        if (strcmp(c->b[i]->name, bucket) == 0) {
            gone = c->b[i];
            c->b[i] = c->b[--c->n];
            break;
        }
    pthread_rwlock_unlock(&c->lock);
    if (gone) {   /* no one holds it: lookups hold the table lock */
        ol_index_close(gone->idx);
        pthread_mutex_destroy(&gone->mu);
        free(gone);
    }
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct ol_catalog_bucket *)a)->name,
                  ((const struct ol_catalog_bucket *)b)->name);
}

unsigned ol_catalog_buckets(struct ol_catalog *c, struct ol_catalog_bucket *out, unsigned max)
{
    unsigned n = 0;
    pthread_rwlock_rdlock(&c->lock);
    for (unsigned i = 0; i < c->n && n < max; i++)
        if (c->b[i]->listed) {
            memcpy(out[n].name, c->b[i]->name, sizeof out[n].name);
            out[n].created = c->b[i]->created;
            n++;
        }
    pthread_rwlock_unlock(&c->lock);
    qsort(out, n, sizeof *out, by_name);
    return n;
}

/* Runs op on the bucket's index with its mutex held (and the table read-locked,
 * so the bucket cannot go away meanwhile). */
#define WITH_BUCKET(c, bucket, stmt)                                  \
    do {                                                              \
        pthread_rwlock_rdlock(&(c)->lock);                            \
        struct cbucket *b_ = find_locked((c), (bucket));              \
        if (!b_) {                                                    \
            rc = -ENOENT;                                             \
        } else {                                                      \
            pthread_mutex_lock(&b_->mu);                              \
            struct ol_index *idx = b_->idx;                           \
            stmt;                                                     \
            pthread_mutex_unlock(&b_->mu);                            \
        }                                                             \
        pthread_rwlock_unlock(&(c)->lock);                            \
    } while (0)

int ol_catalog_put(struct ol_catalog *c, const char *bucket, const void *key, size_t klen,
                   const struct ol_index_rec *rec)
{
    int rc = 0;
    WITH_BUCKET(c, bucket, rc = ol_index_put(idx, key, klen, rec));
    if (rc < 0)
        ol_catalog_set_dirty(c, rc == -ENOENT ? "an object was committed in a bucket it does "
                                                "not hold" : "an object could not be added",
                             rc == -ENOENT ? 0 : rc);
    return rc < 0 ? rc : 0;
}

int ol_catalog_remove(struct ol_catalog *c, const char *bucket, const void *key, size_t klen)
{
    int rc = 0;
    WITH_BUCKET(c, bucket, rc = ol_index_remove(idx, key, klen));
    if (rc == -ENOENT)
        return 0;
    if (rc < 0)
        ol_catalog_set_dirty(c, "an object could not be removed", rc);
    return rc;
}

int ol_catalog_get(struct ol_catalog *c, const char *bucket, const void *key, size_t klen,
                   struct ol_index_rec *rec)
{
    int rc = 0;
    WITH_BUCKET(c, bucket, rc = ol_index_get(idx, key, klen, rec));
    return rc;
}

int ol_catalog_page_create(struct ol_catalog_page **out)
{
    *out = malloc(sizeof **out);   /* large: mapped, touched only as a page fills */
    return *out ? 0 : -ENOMEM;
}

void ol_catalog_page_destroy(struct ol_catalog_page *p) { free(p); }

/* ol_index_list's callback under the bucket's lock: the entry into the page
 * (room for max_keys <= OL_CATALOG_PAGE_MAX entries was made sure of). */
static int page_add(void *arg, const uint8_t *name, size_t len, const struct ol_index_rec *rec)
{
    struct ol_catalog_page *p = arg;
    OL_ASSERT(p->n < OL_CATALOG_PAGE_MAX && len <= OL_INDEX_KEY_MAX);
    struct pent *e = &p->e[p->n++];
    e->off = (uint32_t)p->used;
    e->len = (uint16_t)len;
    e->prefix = rec == NULL;
    if (rec)
        e->rec = *rec;
    memcpy(p->names + p->used, name, len);
    p->used += len;
    return 0;
}

int ol_catalog_list(struct ol_catalog *c, const char *bucket, const struct ol_index_list_req *req,
                    struct ol_catalog_page *page, ol_index_list_fn cb, void *arg,
                    struct ol_index_list_out *out)
{
    struct ol_index_list_req r = *req;
    if (r.max_keys > OL_CATALOG_PAGE_MAX)
        r.max_keys = OL_CATALOG_PAGE_MAX;
    page->n = 0;
    page->used = 0;
    int rc = 0;
    WITH_BUCKET(c, bucket, rc = ol_index_list(idx, &r, page_add, page, out));
    /* the formatting runs here, on the copies, with no lock held */
    for (unsigned i = 0; rc == 0 && cb && i < page->n; i++) {
        const struct pent *e = &page->e[i];
        rc = cb(arg, page->names + e->off, e->len, e->prefix ? NULL : &e->rec);
    }
    return rc;
}
