/*
 * engine_ver.c - what versioning needs beyond the PUT, GET and DELETE
 * requests: the per-key commit locks (engine.h, "versions and
 * conditional writes") and the buckets' versioning state (the bucket
 * versioning file on the drives, read at ol_store_open, and its copy in
 * memory). The request that writes the file is a bucket operation
 * (engine_bucket.c); this file encodes, decodes and caches it.
 *
 * Bucket versioning file, <drive>/.openlake/buckets/<bucket>/versioning
 * (24 bytes, little-endian; docs/store-meta.md has the table):
 *
 *   0   4  magic "OLBV"
 *   4   2  format version (1)
 *   6   1  state: 1 Enabled, 2 Suspended (0: never written)
 *   7   1  reserved, 0
 *   8   8  mtime: ns since the Unix epoch when it was set
 *  16   8  XXH3-64 (seed 0) of bytes 0..15
 *
 * At open the valid copy with the newest mtime over all drives wins; a
 * damaged or missing copy is ignored (a bucket with no valid copy is Off).
 *
 * Must not: block a loop thread (the scan runs in ol_store_open only; the
 * table calls take a mutex for a few hundred nanoseconds).
 */
#include "store/engine_int.h"

#include "base/assert.h"
#include "base/le.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

struct ol_se_verent {
    char name[OL_LAYOUT_BUCKET_MAX + 1];
    uint8_t state;
    uint64_t mtime_ns;
};

struct ol_se_ver {
    pthread_mutex_t mu;                  /* the lock table and the bucket table */
    uint64_t locks[OL_STORE_KEY_LOCKS];  /* held keys' hashes; 0 = free */
    unsigned nbuckets, cap;
    struct ol_se_verent *b;              /* buckets with a state other than Off */
};

/* ---- the versioning file -------------------------------------------------------------- */

void ol_se_ver_encode(uint8_t out[OL_SE_VER_FILE], uint8_t state, uint64_t mtime_ns)
{
    memcpy(out, "OLBV", 4);
    ol_le_st16(out + 4, 1);
    out[6] = state;
    out[7] = 0;
    ol_le_st64(out + 8, mtime_ns);
    ol_le_st64(out + 16, XXH3_64bits(out, 16));
}

int ol_se_ver_decode(const uint8_t *b, size_t len, uint8_t *state, uint64_t *mtime_ns)
{
    if (len != OL_SE_VER_FILE || memcmp(b, "OLBV", 4) != 0 ||
        ol_le_ld64(b + 16) != XXH3_64bits(b, 16))
        return -EBADMSG;
    if (ol_le_ld16(b + 4) != 1)
        return -ENOTSUP;
    if (b[7] || b[6] < OL_STORE_VER_ENABLED || b[6] > OL_STORE_VER_SUSPENDED)
        return -EBADMSG;
    *state = b[6];
    *mtime_ns = ol_le_ld64(b + 8);
    return 0;
}

/* ---- the table ------------------------------------------------------------------------- */

static struct ol_se_verent *find_locked(struct ol_se_ver *v, const char *bucket)
{
    for (unsigned i = 0; i < v->nbuckets; i++)
        if (strcmp(v->b[i].name, bucket) == 0)
            return &v->b[i];
    return NULL;
}

/* Records state for bucket unless a newer one is there. 0 or -ENOMEM. */
static int remember_locked(struct ol_se_ver *v, const char *bucket, uint8_t state, uint64_t mtime)
{
    struct ol_se_verent *e = find_locked(v, bucket);
    if (!e) {
        if (v->nbuckets == v->cap) {
            unsigned cap = v->cap ? 2 * v->cap : 16;
            struct ol_se_verent *nb = realloc(v->b, cap * sizeof *nb);
            if (!nb)
                return -ENOMEM;
            v->b = nb;
            v->cap = cap;
        }
        e = &v->b[v->nbuckets++];
        memset(e, 0, sizeof *e);
        snprintf(e->name, sizeof e->name, "%s", bucket);
    } else if (e->mtime_ns > mtime) {
        return 0;
    }
    e->state = state;
    e->mtime_ns = mtime;
    return 0;
}

enum ol_store_versioning ol_store_versioning_get(struct ol_store *s, const char *bucket)
{
    struct ol_se_ver *v = s->ver;
    pthread_mutex_lock(&v->mu);
    const struct ol_se_verent *e = find_locked(v, bucket);
    enum ol_store_versioning st = e ? (enum ol_store_versioning)e->state : OL_STORE_VER_OFF;
    pthread_mutex_unlock(&v->mu);
    return st;
}

int ol_se_ver_set(struct ol_store *s, const char *bucket, uint8_t state, uint64_t mtime_ns)
{
    struct ol_se_ver *v = s->ver;
    pthread_mutex_lock(&v->mu);
    int rc = remember_locked(v, bucket, state, mtime_ns);
    pthread_mutex_unlock(&v->mu);
    return rc;
}

void ol_se_ver_forget(struct ol_store *s, const char *bucket)
{
    struct ol_se_ver *v = s->ver;
    pthread_mutex_lock(&v->mu);
    struct ol_se_verent *e = find_locked(v, bucket);
    if (e)
        *e = v->b[--v->nbuckets];
    pthread_mutex_unlock(&v->mu);
}

/* ---- commit locks ---------------------------------------------------------------------- */

static uint64_t key_hash(const char *p_obj)
{
    uint64_t h = XXH3_64bits(p_obj, strlen(p_obj));
    return h ? h : 1;
}

int ol_se_key_trylock(struct ol_store *s, const char *p_obj, unsigned *slot)
{
    struct ol_se_ver *v = s->ver;
    uint64_t h = key_hash(p_obj);
    int freeslot = -1;
    pthread_mutex_lock(&v->mu);
    for (unsigned i = 0; i < OL_STORE_KEY_LOCKS; i++) {
        if (v->locks[i] == h) {
            pthread_mutex_unlock(&v->mu);
            return -EBUSY;
        }
        if (!v->locks[i] && freeslot < 0)
            freeslot = (int)i;
    }
    if (freeslot >= 0) {
        v->locks[freeslot] = h;
        *slot = (unsigned)freeslot;
    }
    pthread_mutex_unlock(&v->mu);
    return freeslot >= 0 ? 0 : -EBUSY;
}

/* A cluster store asks the set's owner (engine.h struct ol_store_locks): the
 * first call sends the question and says "not yet"; the answer comes as the
 * completion of r->rlop (counted in flight, so r outlives it) and kicks r,
 * whose next call takes it. A bucket's lock is set 0's. */
bool ol_se_path_lock(struct ol_sreq *r, const char *path)
{
    if (r->locked)
        return true;
    const struct ol_store_locks *h = &r->c->s->locks;
    if (!h->lock) {
        r->rl_busy = ol_se_key_trylock(r->c->s, path, &r->lock_slot) < 0;
        r->locked = !r->rl_busy;
        return r->locked;
    }
    if (r->rl == OL_SE_RL_WAIT)
        return false;
    uint64_t now = ol_loop_now_ms(r->c->loop);
    if (!r->rl_t0)
        r->rl_t0 = now ? now : 1;
    if (r->rl == OL_SE_RL_DONE) {
        r->rl = OL_SE_RL_NONE;
        r->rl_busy = r->rl_res == -EBUSY;
        if (r->rl_res == 0) {
            r->locked = true;
            return true;
        }
        if (r->rl_busy) {   /* asked again at the caller's next retry, for a while */
            r->rl_failed = now - r->rl_t0 > OL_SE_RLOCK_WAIT_MS;
            return false;
        }
        if (now - r->rl_t0 > OL_SE_RLOCK_WAIT_MS) {
            r->rl_failed = true;   /* no owner answered: the caller fails (503) */
            return false;
        }
        r->rl_next = now + OL_SE_RLOCK_AGAIN_MS;   /* no owner now: not at every retry */
    }
    if (now < r->rl_next)
        return false;
    r->rl_set = path == r->p_bucket ? 0 : r->set;
    r->rl_busy = false;
    r->rlop = (struct ol_sop){.r = r, .pos = 0, .slot = OL_SE_RLOCK};
    r->rl = OL_SE_RL_WAIT;
    ol_se_issue(r, &r->rlop, h->lock(h->ud, r->c->loop, r->rl_set, path, &r->rlk, &r->rlop.op));
    return false;
}

void ol_se_rlock_done(struct ol_sreq *r, int res)
{
    OL_ASSERT(r->rl == OL_SE_RL_WAIT);
    r->rl = OL_SE_RL_DONE;
    r->rl_res = res;
    ol_se_kick(r);
}

bool ol_se_lock_busy(const struct ol_sreq *r) { return r->rl_busy; }

bool ol_se_key_lock(struct ol_sreq *r) { return ol_se_path_lock(r, r->p_obj); }

void ol_se_key_unlock_slot(struct ol_store *s, unsigned slot)
{
    struct ol_se_ver *v = s->ver;
    pthread_mutex_lock(&v->mu);
    v->locks[slot] = 0;
    pthread_mutex_unlock(&v->mu);
}

void ol_se_key_unlock(struct ol_sreq *r)
{
    const struct ol_store_locks *h = &r->c->s->locks;
    /* a grant that came after r stopped asking goes back too */
    if (h->lock && (r->locked || (r->rl == OL_SE_RL_DONE && r->rl_res == 0)))
        h->unlock(h->ud, r->rl_set, &r->rlk);
    r->rl = OL_SE_RL_NONE;
    if (!r->locked)
        return;
    if (!h->lock)
        ol_se_key_unlock_slot(r->c->s, r->lock_slot);
    r->locked = false;
}

int ol_store_key_trylock(struct ol_store *s, const char *path, unsigned *slot)
{
    return ol_se_key_trylock(s, path, slot);
}

void ol_store_key_unlock(struct ol_store *s, unsigned slot) { ol_se_key_unlock_slot(s, slot); }

/* ---- open / close ---------------------------------------------------------------------- */

int ol_se_ver_open(struct ol_store *s, char *err, size_t errlen)
{
    struct ol_se_ver *v = calloc(1, sizeof *v);
    if (!v) {
        snprintf(err, errlen, "store: out of memory");
        return -ENOMEM;
    }
    pthread_mutex_init(&v->mu, NULL);
    s->ver = v;
    for (unsigned i = 0; i < s->n; i++) {
        int dfd = s->drives[i].dfd;
        if (dfd < 0)
            continue;
        int bfd = openat(dfd, OL_FORMAT_DIR "/buckets", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *dir = bfd >= 0 ? fdopendir(bfd) : NULL;
        if (!dir) {
            if (bfd >= 0)
                close(bfd);
            continue;
        }
        struct dirent *e;
        while ((e = readdir(dir))) {
            if (ol_layout_bucket_ok(e->d_name, strlen(e->d_name)) < 0)
                continue;
            char p[sizeof e->d_name + 16];
            snprintf(p, sizeof p, "%s/versioning", e->d_name);
            int fd = openat(bfd, p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
            if (fd < 0)
                continue;
            uint8_t b[OL_SE_VER_FILE + 1];
            ssize_t n = read(fd, b, sizeof b);
            close(fd);
            uint8_t state;
            uint64_t mt;
            if (n < 0 || ol_se_ver_decode(b, (size_t)n, &state, &mt) < 0)
                continue; /* damaged: the other drives' copies decide */
            if (remember_locked(v, e->d_name, state, mt) < 0) {
                closedir(dir);
                snprintf(err, errlen, "store: out of memory");
                return -ENOMEM;
            }
        }
        closedir(dir);
    }
    return 0;
}

void ol_se_ver_close(struct ol_store *s)
{
    struct ol_se_ver *v = s->ver;
    if (!v)
        return;
    pthread_mutex_destroy(&v->mu);
    free(v->b);
    free(v);
    s->ver = NULL;
}

void ol_store_random_id(struct ol_store_core *c, uint8_t out[16]) { ol_se_random_id(c, out); }

struct ol_store *ol_store_core_store(const struct ol_store_core *c) { return c->s; }
