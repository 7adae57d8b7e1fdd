/*
 * index_file.c - see index.h: the index directory's files (snapshot and
 * append log, format version 1), group commit, checkpoint, open with
 * replay, and the handle's life cycle. The tree itself is index.c's.
 *
 * Reads map the whole file (snapshot, log) read-only and check before
 * trusting: the snapshot's trailer over every byte before its entries are
 * parsed, each log frame's checksum and exact length before its batch is
 * applied. Open changes nothing on disk until everything has loaded; then
 * it cuts a torn tail, removes checkpoint leftovers and creates a missing
 * log. Every write path is plain blocking syscalls on the caller's thread.
 */
#include "store/index_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#define OL_IX_SNAP      "snapshot"
#define OL_IX_SNAP_TMP  "snapshot.tmp"
#define OL_IX_LOG_FMT   "log.%016" PRIx64
#define OL_IX_LOG_NAME  21              /* "log." + 16 hex + NUL */

enum { OL_IX_PUT = 1, OL_IX_REMOVE = 2, OL_IX_COMMIT = 3 };

#define OL_IX_FRAME_MIN  16u
#define OL_IX_FRAME_MAX  (8u + OL_INDEX_KEY_MAX + OL_INDEX_REC_LEN + 8u)
#define OL_IX_PUT_LEN(k) (8u + (k) + OL_INDEX_REC_LEN + 8u)
#define OL_IX_REM_LEN(k) (8u + (k) + 8u)
#define OL_IX_COMMIT_LEN 32u
#define OL_IX_BATCH_KEEP (1u << 20)    /* batch buffer kept between flushes */
#define OL_IX_WBUF       (1u << 20)    /* snapshot write buffer */

/* ---- syscalls ------------------------------------------------------------------ */

static int ol_ix_pwrite_all(int fd, const uint8_t *b, size_t n, uint64_t off)
{
    while (n) {
        ssize_t w = pwrite(fd, b, n, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        if (w == 0)
            return -EIO;
        b += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return 0;
}

static int ol_ix_sync(int fd, bool data_only)
{
    while ((data_only ? fdatasync(fd) : fsync(fd)) < 0)
        if (errno != EINTR)
            return -errno;
    return 0;
}

/* Opens dir (creating it when asked) and takes its exclusive flock. */
static int ol_ix_lock_dir(const char *dir, bool create, int *fd_out)
{
    if (create && mkdir(dir, 0700) < 0 && errno != EEXIST)
        return -errno;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno == EWOULDBLOCK ? EBUSY : errno;
        close(fd);
        return -e;
    }
    *fd_out = fd;
    return 0;
}

/* What the directory holds. */
struct ol_ix_scan {
    bool snap, tmp;
    uint64_t *logs;
    size_t nlogs;
};

static bool ol_ix_log_gen(const char *name, uint64_t *gen)
{
    if (strncmp(name, "log.", 4) != 0 || strlen(name) != OL_IX_LOG_NAME - 1)
        return false;
    uint64_t g = 0;
    for (const char *p = name + 4; *p; p++) {
        int v = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
        if (v < 0)
            return false;
        g = g << 4 | (uint64_t)v;
    }
    *gen = g;
    return true;
}

static int ol_ix_scan_dir(int dirfd, struct ol_ix_scan *s)
{
    memset(s, 0, sizeof *s);
    int fd = dup(dirfd);
    if (fd < 0)
        return -errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        int e = errno;
        close(fd);
        return -e;
    }
    rewinddir(d);
    int rc = 0;
    size_t cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        uint64_t g;
        if (strcmp(de->d_name, OL_IX_SNAP) == 0) {
            s->snap = true;
        } else if (strcmp(de->d_name, OL_IX_SNAP_TMP) == 0) {
            s->tmp = true;
        } else if (ol_ix_log_gen(de->d_name, &g)) {
            if (s->nlogs == cap) {
                cap = cap ? cap * 2 : 4;
                uint64_t *n = realloc(s->logs, cap * sizeof *n);
                if (!n) {
                    rc = -ENOMEM;
                    break;
                }
                s->logs = n;
            }
            s->logs[s->nlogs++] = g;
        }
    }
    closedir(d);
    if (rc < 0) {
        free(s->logs);
        s->logs = NULL;
    }
    return rc;
}

static void ol_ix_log_name(char name[OL_IX_LOG_NAME], uint64_t gen)
{
    snprintf(name, OL_IX_LOG_NAME, OL_IX_LOG_FMT, gen);
}

/* ---- log ------------------------------------------------------------------------- */

static void ol_ix_log_hdr(uint8_t h[OL_INDEX_LOG_HDR], uint64_t gen, uint64_t id)
{
    memcpy(h, "OLIL", 4);
    ol_ix_put16(h + 4, OL_INDEX_FORMAT);
    ol_ix_put16(h + 6, 0);
    ol_ix_put64(h + 8, gen);
    ol_ix_put64(h + 16, id);
    ol_ix_put64(h + 24, XXH3_64bits(h, 24));
}

/* Creates (or empties) log.<gen> holding just its header, fsynced; the
 * directory is not. Returns the descriptor or -errno. */
static int ol_ix_log_create(int dirfd, uint64_t gen, uint64_t id)
{
    char name[OL_IX_LOG_NAME];
    ol_ix_log_name(name, gen);
    int fd = openat(dirfd, name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -errno;
    uint8_t h[OL_INDEX_LOG_HDR];
    ol_ix_log_hdr(h, gen, id);
    int rc = ol_ix_pwrite_all(fd, h, sizeof h, 0);
    if (rc == 0)
        rc = ol_ix_sync(fd, false);
    if (rc < 0) {
        close(fd);
        unlinkat(dirfd, name, 0);
        return rc;
    }
    return fd;
}

/* Room for n more frame bytes and the batch's COMMIT. */
static int ol_ix_batch_reserve(struct ol_index *idx, size_t n)
{
    size_t need = idx->batch_len + n + OL_IX_COMMIT_LEN;
    if (need <= idx->batch_cap)
        return 0;
    size_t cap = idx->batch_cap ? idx->batch_cap : 4096;
    while (cap < need)
        cap *= 2;
    uint8_t *b = realloc(idx->batch, cap);
    if (!b)
        return -ENOMEM;
    idx->batch = b;
    idx->batch_cap = cap;
    return 0;
}

/* Appends a PUT (rec non-NULL) or REMOVE frame; room was reserved. */
static void ol_ix_frame(struct ol_index *idx, const uint8_t *key, size_t klen, const uint8_t *rec)
{
    uint8_t *f = idx->batch + idx->batch_len;
    size_t len = rec ? OL_IX_PUT_LEN(klen) : OL_IX_REM_LEN(klen);
    ol_ix_put32(f, (uint32_t)len);
    f[4] = rec ? OL_IX_PUT : OL_IX_REMOVE;
    f[5] = 0;
    ol_ix_put16(f + 6, (unsigned)klen);
    memcpy(f + 8, key, klen);
    if (rec)
        memcpy(f + 8 + klen, rec, OL_INDEX_REC_LEN);
    ol_ix_put64(f + len - 8, XXH3_64bits_withSeed(f, len - 8, idx->gen));
    idx->batch_len += len;
    idx->batch_frames++;
}

/* The length of the whole, valid frame at b[off..size), else 0. */
static size_t ol_ix_frame_ok(const uint8_t *b, size_t size, size_t off, uint64_t gen)
{
    if (size - off < OL_IX_FRAME_MIN)
        return 0;
    const uint8_t *f = b + off;
    size_t len = ol_ix_get32(f), k = ol_ix_get16(f + 6);
    if (len < OL_IX_FRAME_MIN || len > OL_IX_FRAME_MAX || len > size - off || f[5] != 0)
        return 0;
    if (ol_ix_get64(f + len - 8) != XXH3_64bits_withSeed(f, len - 8, gen))
        return 0;
    switch (f[4]) {
    case OL_IX_PUT:
        return k >= 1 && k <= OL_INDEX_KEY_MAX && len == OL_IX_PUT_LEN(k) &&
                       !(f[8 + k + 35] & ~OL_INDEX_F_ALL)
                   ? len
                   : 0;
    case OL_IX_REMOVE:
        return k >= 1 && k <= OL_INDEX_KEY_MAX && len == OL_IX_REM_LEN(k) ? len : 0;
    case OL_IX_COMMIT:
        return k == 0 && len == OL_IX_COMMIT_LEN && ol_ix_get32(f + 8) >= 1 && ol_ix_get32(f + 12) == 0
                   ? len
                   : 0;
    default:
        return 0;
    }
}

/*
 * Replays the frames of a mapped log (size bytes, header checked): every
 * whole batch, in order, up to the first that is not. *good (OUT) is where
 * the valid part ends. Fills the log fields of info. 0 or -ENOMEM.
 */
static int ol_ix_replay(struct ol_index *idx, const uint8_t *b, size_t size, size_t *good,
                        struct ol_index_open_info *info)
{
    size_t off = OL_INDEX_LOG_HDR;
    uint64_t seq = 1;
    while (off < size) {
        size_t p = off, nfr = 0, len;
        bool whole = false;
        while ((len = ol_ix_frame_ok(b, size, p, idx->gen))) {
            if (b[p + 4] == OL_IX_COMMIT) {
                whole = ol_ix_get32(b + p + 8) == nfr && ol_ix_get64(b + p + 16) == seq;
                break;
            }
            nfr++;
            p += len;
        }
        if (!whole)
            break;
        for (size_t q = off; q < p; q += ol_ix_get32(b + q)) {
            const uint8_t *f = b + q;
            size_t k = ol_ix_get16(f + 6);
            if (f[4] == OL_IX_PUT) {
                int rc = ol_ix_tree_put(idx, f + 8, k, f + 8 + k);
                if (rc < 0)
                    return rc;
            } else {
                ol_ix_tree_remove(idx, f + 8, k); /* absent: nothing to do */
            }
        }
        off = p + OL_IX_COMMIT_LEN;
        seq++;
        info->log_batches++;
        info->log_records += nfr;
    }
    *good = off;
    idx->seq = seq;
    /* Describe what is cut off: follow the frame lengths as far as they go. */
    for (size_t p = off; size - p >= 8;) {
        const uint8_t *f = b + p;
        size_t len = ol_ix_get32(f);
        if (len < OL_IX_FRAME_MIN || len > OL_IX_FRAME_MAX)
            break;
        if (f[4] == OL_IX_PUT || f[4] == OL_IX_REMOVE)
            info->dropped_records++;
        if (len > size - p)
            break;
        if (f[4] == OL_IX_COMMIT && ol_ix_frame_ok(b, size, p, idx->gen) && ol_ix_get64(f + 16) > seq)
            info->damaged = true; /* a later flush completed after the bad batch */
        p += len;
    }
    info->dropped_bytes = size - off;
    return 0;
}

/* ---- snapshot ---------------------------------------------------------------------- */

struct ol_ix_wr {
    int fd, rc;
    uint8_t *buf;
    size_t len;
    uint64_t off;
    XXH3_state_t *st;
};

static void ol_ix_wr_flush(struct ol_ix_wr *w)
{
    if (w->rc == 0 && w->len) {
        XXH3_64bits_update(w->st, w->buf, w->len);
        w->rc = ol_ix_pwrite_all(w->fd, w->buf, w->len, w->off);
        w->off += w->len;
    }
    w->len = 0;
}

static void ol_ix_wr_put(struct ol_ix_wr *w, const void *p, size_t n)
{
    if (w->len + n > OL_IX_WBUF)
        ol_ix_wr_flush(w);
    memcpy(w->buf + w->len, p, n);
    w->len += n;
}

/* Writes every key to snapshot.tmp (log generation gen), fsynced and
 * closed. 0 or -errno; the temp file is removed on failure. */
static int ol_ix_snap_write(struct ol_index *idx, uint64_t gen)
{
    struct ol_ix_wr w = {.fd = -1};
    uint8_t *keys = malloc(2 * OL_INDEX_KEY_MAX);
    w.buf = malloc(OL_IX_WBUF);
    w.st = XXH3_createState();
    if (!keys || !w.buf || !w.st || XXH3_64bits_reset(w.st) != XXH_OK) {
        w.rc = -ENOMEM;
        goto out;
    }
    w.fd = openat(idx->dirfd, OL_IX_SNAP_TMP, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (w.fd < 0) {
        w.rc = -errno;
        goto out;
    }
    uint8_t h[OL_INDEX_SNAP_HDR];
    memcpy(h, "OLIS", 4);
    ol_ix_put16(h + 4, OL_INDEX_FORMAT);
    ol_ix_put16(h + 6, 0);
    ol_ix_put64(h + 8, idx->id);
    ol_ix_put64(h + 16, gen);
    ol_ix_put64(h + 24, idx->nkeys);
    ol_ix_wr_put(&w, h, sizeof h);
    uint8_t *prev = keys, *cur = keys + OL_INDEX_KEY_MAX;
    size_t prev_len = 0;
    for (const struct ol_ix_leaf *l = idx->first; l && w.rc == 0; l = l->next) {
        const uint16_t *s = (const uint16_t *)(const void *)(l->area + l->cap) - l->n;
        memcpy(cur, l->area, l->plen);
        for (unsigned i = 0; i < l->n; i++) {
            const uint8_t *e = l->area + s[i];
            size_t r = ol_ix_get16(e), klen = l->plen + r, sh = 0;
            memcpy(cur + l->plen, e + 2, r);
            while (sh < prev_len && sh < klen && prev[sh] == cur[sh])
                sh++;
            uint8_t eh[4];
            ol_ix_put16(eh, (unsigned)sh);
            ol_ix_put16(eh + 2, (unsigned)(klen - sh));
            ol_ix_wr_put(&w, eh, 4);
            ol_ix_wr_put(&w, cur + sh, klen - sh);
            ol_ix_wr_put(&w, e + 2 + r, OL_INDEX_REC_LEN);
            memcpy(prev, cur, klen);
            prev_len = klen;
        }
    }
    ol_ix_wr_flush(&w);
    if (w.rc == 0) {
        uint8_t t[8];
        ol_ix_put64(t, XXH3_64bits_digest(w.st));
        w.rc = ol_ix_pwrite_all(w.fd, t, 8, w.off);
    }
    if (w.rc == 0)
        w.rc = ol_ix_sync(w.fd, false);
out:
    if (w.fd >= 0 && close(w.fd) < 0 && w.rc == 0)
        w.rc = -errno;
    if (w.rc < 0 && w.fd >= 0)
        unlinkat(idx->dirfd, OL_IX_SNAP_TMP, 0);
    XXH3_freeState(w.st);
    free(w.buf);
    free(keys);
    return w.rc;
}

/* Maps a whole regular file read-only. 0, -errno (-ENOENT when absent). */
static int ol_ix_map(int dirfd, const char *name, int flags, int *fd_out, const uint8_t **map,
                     size_t *size)
{
    int fd = openat(dirfd, name, flags | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    struct stat st;
    int e = fstat(fd, &st) < 0 ? errno : S_ISREG(st.st_mode) ? 0 : EBADMSG;
    if (e) {
        close(fd);
        return -e;
    }
    *map = NULL;
    *size = (size_t)st.st_size;
    if (*size) {
        void *m = mmap(NULL, *size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
        if (m == MAP_FAILED) {
            e = errno;
            close(fd);
            return -e;
        }
        *map = m;
    }
    *fd_out = fd;
    return 0;
}

/* Loads the snapshot into the (empty) tree; sets idx->id, *gen (OUT). */
static int ol_ix_snap_load(struct ol_index *idx, uint64_t *gen, struct ol_index_open_info *info)
{
    int fd;
    const uint8_t *b;
    size_t size;
    int rc = ol_ix_map(idx->dirfd, OL_IX_SNAP, O_RDONLY, &fd, &b, &size);
    if (rc < 0)
        return rc;
    close(fd);
    rc = -EBADMSG;
    if (size < OL_INDEX_SNAP_HDR + 8 || memcmp(b, "OLIS", 4) != 0 ||
        XXH3_64bits(b, size - 8) != ol_ix_get64(b + size - 8))
        goto out;
    if (ol_ix_get16(b + 4) != OL_INDEX_FORMAT) {
        rc = -ENOTSUP;
        goto out;
    }
    if (ol_ix_get16(b + 6) != 0)
        goto out;
    idx->id = ol_ix_get64(b + 8);
    *gen = ol_ix_get64(b + 16);
    uint64_t n = ol_ix_get64(b + 24);
    size_t off = OL_INDEX_SNAP_HDR, end = size - 8, klen = 0;
    uint8_t key[OL_INDEX_KEY_MAX];
    for (uint64_t i = 0; i < n; i++) {
        if (end - off < 4)
            goto out;
        size_t sh = ol_ix_get16(b + off), r = ol_ix_get16(b + off + 2);
        const uint8_t *rest = b + off + 4, *rec;
        if (sh > klen || r == 0 || sh + r > OL_INDEX_KEY_MAX || end - off - 4 < r + OL_INDEX_REC_LEN)
            goto out;
        if (sh < klen && rest[0] <= key[sh])
            goto out; /* not strictly ascending, or shared not the longest */
        rec = rest + r;
        if (rec[35] & ~OL_INDEX_F_ALL)
            goto out;
        memcpy(key + sh, rest, r);
        klen = sh + r;
        if (ol_ix_tree_put(idx, key, klen, rec) != 0) {
            rc = -ENOMEM; /* 1 (replaced) cannot happen: keys ascend */
            goto out;
        }
        off += 4 + r + OL_INDEX_REC_LEN;
    }
    if (off != end)
        goto out;
    info->snapshot_keys = n;
    rc = 0;
out:
    if (size)
        munmap((void *)b, size);
    return rc;
}

/* ---- life cycle ------------------------------------------------------------------- */

static struct ol_index *ol_ix_alloc(void)
{
    struct ol_index *idx = calloc(1, sizeof *idx);
    if (!idx)
        return NULL;
    idx->dirfd = idx->logfd = -1;
    if (ol_ix_tree_init(idx) < 0) {
        free(idx);
        return NULL;
    }
    return idx;
}

void ol_index_close(struct ol_index *idx)
{
    if (!idx)
        return;
    ol_ix_tree_free(idx);
    if (idx->logfd >= 0)
        close(idx->logfd);
    if (idx->dirfd >= 0)
        close(idx->dirfd); /* releases the flock */
    free(idx->batch);
    free(idx);
}

int ol_index_create_empty(const char *dir, struct ol_index **out)
{
    *out = NULL;
    struct ol_index *idx = ol_ix_alloc();
    if (!idx)
        return -ENOMEM;
    if (!dir) {
        *out = idx;
        return 0;
    }
    struct ol_ix_scan s = {0};
    int rc = ol_ix_lock_dir(dir, true, &idx->dirfd);
    if (rc < 0 || (rc = ol_ix_scan_dir(idx->dirfd, &s)) < 0)
        goto fail;
    if ((s.snap && unlinkat(idx->dirfd, OL_IX_SNAP, 0) < 0) ||
        (s.tmp && unlinkat(idx->dirfd, OL_IX_SNAP_TMP, 0) < 0)) {
        rc = -errno;
        goto fail;
    }
    for (size_t i = 0; i < s.nlogs; i++) {
        char name[OL_IX_LOG_NAME];
        ol_ix_log_name(name, s.logs[i]);
        if (unlinkat(idx->dirfd, name, 0) < 0) {
            rc = -errno;
            goto fail;
        }
    }
    do {
        if (getrandom(&idx->id, sizeof idx->id, 0) != sizeof idx->id) {
            rc = -errno;
            goto fail;
        }
    } while (idx->id == 0);
    idx->gen = 1;
    idx->seq = 1;
    if ((rc = ol_ix_log_create(idx->dirfd, idx->gen, idx->id)) < 0)
        goto fail;
    idx->logfd = rc;
    idx->log_size = OL_INDEX_LOG_HDR;
    if ((rc = ol_ix_sync(idx->dirfd, false)) < 0)
        goto fail;
    free(s.logs);
    *out = idx;
    return 0;
fail:
    free(s.logs);
    ol_index_close(idx);
    return rc;
}

int ol_index_open(const char *dir, struct ol_index **out, struct ol_index_open_info *info)
{
    *out = NULL;
    struct ol_index_open_info scratch;
    if (!info)
        info = &scratch;
    memset(info, 0, sizeof *info);
    struct ol_index *idx = ol_ix_alloc();
    if (!idx)
        return -ENOMEM;
    struct ol_ix_scan s = {0};
    const uint8_t *b = NULL;
    size_t size = 0, good = OL_INDEX_LOG_HDR;
    int logfd = -1;
    bool recreate = false;
    uint64_t gen = 0;
    char name[OL_IX_LOG_NAME];
    int rc = ol_ix_lock_dir(dir, false, &idx->dirfd);
    if (rc < 0 || (rc = ol_ix_scan_dir(idx->dirfd, &s)) < 0)
        goto fail;
    if (!s.snap) {
        rc = s.nlogs ? -EBADMSG : -ENOENT;
        goto fail;
    }
    if ((rc = ol_ix_snap_load(idx, &gen, info)) < 0)
        goto fail;
    rc = -EBADMSG;
    for (size_t i = 0; i < s.nlogs; i++)
        if (s.logs[i] > gen)
            goto fail;
    idx->gen = gen;

    /* The live log: missing or a torn header means a crash right after the
     * snapshot's rename (or the log's creation); start it afresh. */
    ol_ix_log_name(name, gen);
    rc = ol_ix_map(idx->dirfd, name, O_RDWR, &logfd, &b, &size);
    if (rc == -ENOENT) {
        recreate = true;
    } else if (rc < 0) {
        goto fail;
    } else if (size < OL_INDEX_LOG_HDR || memcmp(b, "OLIL", 4) != 0 ||
               XXH3_64bits(b, 24) != ol_ix_get64(b + 24)) {
        rc = -EBADMSG;
        if (size > OL_INDEX_LOG_HDR)
            goto fail; /* frames behind a bad header: not a torn creation */
        recreate = true;
    } else if (ol_ix_get16(b + 4) != OL_INDEX_FORMAT) {
        rc = -ENOTSUP;
        goto fail;
    } else if (ol_ix_get16(b + 6) != 0 || ol_ix_get64(b + 8) != gen || ol_ix_get64(b + 16) != idx->id) {
        rc = -EBADMSG;
        goto fail;
    } else if ((rc = ol_ix_replay(idx, b, size, &good, info)) < 0) {
        goto fail;
    }

    /* Loaded: now tidy the directory. */
    if (recreate) {
        if (logfd >= 0) {
            close(logfd);
            logfd = -1;
        }
        info->dropped_bytes = size;
        if ((rc = ol_ix_log_create(idx->dirfd, gen, idx->id)) < 0)
            goto fail;
        logfd = rc;
        idx->seq = 1;
    } else if (good < size) {
        if (ftruncate(logfd, (off_t)good) < 0) {
            rc = -errno;
            goto fail;
        }
        if ((rc = ol_ix_sync(logfd, true)) < 0)
            goto fail;
    }
    bool tidy = recreate;
    if (s.tmp) {
        unlinkat(idx->dirfd, OL_IX_SNAP_TMP, 0);
        tidy = true;
    }
    for (size_t i = 0; i < s.nlogs; i++) {
        if (s.logs[i] < gen) {
            char old[OL_IX_LOG_NAME];
            ol_ix_log_name(old, s.logs[i]);
            unlinkat(idx->dirfd, old, 0);
            tidy = true;
        }
    }
    if (tidy && (rc = ol_ix_sync(idx->dirfd, false)) < 0)
        goto fail;
    if (b)
        munmap((void *)b, size);
    free(s.logs);
    idx->logfd = logfd;
    idx->log_size = good;
    info->keys = idx->nkeys;
    info->log_gen = gen;
    idx->version++;
    *out = idx;
    return 0;
fail:
    if (b)
        munmap((void *)b, size);
    if (logfd >= 0)
        close(logfd);
    free(s.logs);
    ol_index_close(idx);
    return rc;
}

/* ---- changes ------------------------------------------------------------------------ */

int ol_index_put(struct ol_index *idx, const void *key, size_t klen, const struct ol_index_rec *rec)
{
    if (idx->failed)
        return idx->failed;
    if (klen == 0 || klen > OL_INDEX_KEY_MAX || (rec->flags & ~OL_INDEX_F_ALL))
        return -EINVAL;
    uint8_t r[OL_INDEX_REC_LEN];
    ol_ix_rec_encode(rec, r);
    int rc;
    if (idx->dirfd >= 0 && (rc = ol_ix_batch_reserve(idx, OL_IX_PUT_LEN(klen))) < 0)
        return rc;
    if ((rc = ol_ix_tree_put(idx, key, klen, r)) < 0)
        return rc;
    if (idx->dirfd >= 0)
        ol_ix_frame(idx, key, klen, r);
    return rc;
}

int ol_index_remove(struct ol_index *idx, const void *key, size_t klen)
{
    if (idx->failed)
        return idx->failed;
    if (klen == 0 || klen > OL_INDEX_KEY_MAX)
        return -EINVAL;
    int rc;
    if (idx->dirfd >= 0 && (rc = ol_ix_batch_reserve(idx, OL_IX_REM_LEN(klen))) < 0)
        return rc;
    if ((rc = ol_ix_tree_remove(idx, key, klen)) < 0)
        return rc;
    if (idx->dirfd >= 0)
        ol_ix_frame(idx, key, klen, NULL);
    return 0;
}

int ol_index_flush(struct ol_index *idx)
{
    if (idx->failed)
        return idx->failed;
    if (idx->batch_frames == 0)
        return 0;
    uint8_t *f = idx->batch + idx->batch_len; /* room reserved by every frame */
    ol_ix_put32(f, OL_IX_COMMIT_LEN);
    f[4] = OL_IX_COMMIT;
    f[5] = 0;
    ol_ix_put16(f + 6, 0);
    ol_ix_put32(f + 8, (uint32_t)idx->batch_frames);
    ol_ix_put32(f + 12, 0);
    ol_ix_put64(f + 16, idx->seq);
    ol_ix_put64(f + 24, XXH3_64bits_withSeed(f, 24, idx->gen));
    size_t len = idx->batch_len + OL_IX_COMMIT_LEN;
    int rc = ol_ix_pwrite_all(idx->logfd, idx->batch, len, idx->log_size);
    if (rc < 0) {
        /* Cut back what reached the file, keep the batch for a retry. */
        if (ftruncate(idx->logfd, (off_t)idx->log_size) < 0)
            idx->failed = rc;
        return rc;
    }
    if ((rc = ol_ix_sync(idx->logfd, true)) < 0) {
        idx->failed = rc;
        return rc;
    }
    idx->log_size += len;
    idx->seq++;
    idx->batch_len = 0;
    idx->batch_frames = 0;
    if (idx->batch_cap > OL_IX_BATCH_KEEP) {
        free(idx->batch);
        idx->batch = NULL;
        idx->batch_cap = 0;
    }
    return 0;
}

int ol_index_checkpoint(struct ol_index *idx)
{
    if (idx->failed)
        return idx->failed;
    if (idx->dirfd < 0)
        return -EINVAL;
    int rc = ol_index_flush(idx);
    if (rc < 0)
        return rc;
    uint64_t ng = idx->gen + 1;
    if ((rc = ol_ix_snap_write(idx, ng)) < 0)
        return rc;
    if (renameat(idx->dirfd, OL_IX_SNAP_TMP, idx->dirfd, OL_IX_SNAP) < 0) {
        rc = -errno;
        unlinkat(idx->dirfd, OL_IX_SNAP_TMP, 0);
        return rc;
    }
    /* From here the snapshot names log ng: log gen is dead either way. */
    int fd = -1;
    if ((rc = ol_ix_sync(idx->dirfd, false)) < 0 || (rc = fd = ol_ix_log_create(idx->dirfd, ng, idx->id)) < 0 ||
        (rc = ol_ix_sync(idx->dirfd, false)) < 0) {
        if (fd >= 0)
            close(fd);
        idx->failed = rc;
        return rc;
    }
    char old[OL_IX_LOG_NAME];
    ol_ix_log_name(old, idx->gen);
    close(idx->logfd);
    unlinkat(idx->dirfd, old, 0); /* a leftover is removed by the next open */
    idx->logfd = fd;
    idx->gen = ng;
    idx->seq = 1;
    idx->log_size = OL_INDEX_LOG_HDR;
    return 0;
}
