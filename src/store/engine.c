/*
 * engine.c - see engine.h. This file: opening the store (format, drive
 * directories, tmp cleanup), the per-core state (request pool, arena,
 * erasure codes, counters), the plumbing every request kind shares
 * (issuing ops, deferred completions, phases, common drive steps (open
 * phases, failing a drive, a bucket's statx), dir fsyncs and barriers (one
 * per filesystem a request's drives share), metadata decoding, callbacks).
 * PUT, GET, DELETE and the bucket operations are in engine_put.c,
 * engine_get.c, engine_del.c and engine_bucket.c; multipart uploads in
 * engine_mpu.c (and the PUT and GET files).
 */
#include "store/engine_int.h"

#include "base/assert.h"
#include "base/fault.h"
#include "store/bitrot.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

static void ol_se_say(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void ol_se_say(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static size_t ol_se_round(size_t v, size_t a) { return (v + a - 1) / a * a; }

/*
 * Is the filesystem of dfd one whose syncfs(2) makes every change made on
 * it durable, as the group commit (syncer.h) needs? Local filesystems with
 * a journal or copy-on-write and their own sync_fs: ext2/3/4, XFS, btrfs,
 * f2fs, bcachefs, ZFS; overlayfs (it syncs its upper filesystem); tmpfs
 * (nothing is durable there either way). Not the others: a FUSE server
 * without syncfs support answers it without syncing, a network filesystem
 * may keep data the server has not committed. Those drives are synced file
 * by file (store.md, "Making writes durable").
 */
#define OL_SE_XFS_MAGIC 0x58465342ul

static bool syncfs_whole(int dfd, unsigned long *type)
{
    struct statfs st;
    *type = 0;
    if (fstatfs(dfd, &st) < 0)
        return false;
    *type = (unsigned long)st.f_type;
    switch (*type) {
    case 0xEF53ul:     /* ext2, ext3, ext4 */
    case OL_SE_XFS_MAGIC:
    case 0x9123683Eul: /* btrfs */
    case 0xF2F52010ul: /* f2fs */
    case 0xCA451A4Eul: /* bcachefs */
    case 0x2FC12FC1ul: /* ZFS */
    case 0x794C7630ul: /* overlayfs */
    case 0x01021994ul: /* tmpfs */
        return true;
    default:
        return false;
    }
}

/* ---- opening the store (blocking: main thread) ----------------------------------- */

int ol_se_rm_inside(int fd, int depth)
{
    if (depth > 16)
        return -ELOOP;
    int dup_fd = dup(fd);
    if (dup_fd < 0)
        return -errno;
    DIR *dir = fdopendir(dup_fd);
    if (!dir) {
        int rc = -errno;
        close(dup_fd);
        return rc;
    }
    rewinddir(dir);
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (unlinkat(fd, e->d_name, 0) == 0)
            continue;
        if (errno != EISDIR && errno != EPERM) {
            rc = -errno;
            break;
        }
        int sub = openat(fd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0) {
            rc = -errno;
            break;
        }
        rc = ol_se_rm_inside(sub, depth + 1);
        close(sub);
        if (rc == 0 && unlinkat(fd, e->d_name, AT_REMOVEDIR) < 0)
            rc = -errno;
        if (rc < 0)
            break;
    }
    closedir(dir);
    return rc;
}

static int ol_se_mkdir_at(int dfd, const char *path)
{
    if (mkdirat(dfd, path, 0700) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

/* Does an O_DIRECT write of one aligned page work in the drive's tmp/?
 * (Not on some filesystems; on others only with larger alignment.) */
static bool ol_se_probe_dio(int dfd)
{
    static const char name[] = OL_FORMAT_DIR "/tmp/direct-io.probe";
    int fd = openat(dfd, name, O_CREAT | O_TRUNC | O_WRONLY | O_DIRECT | O_CLOEXEC, 0600);
    if (fd < 0) { /* some (ramfs) make the file, then refuse O_DIRECT */
        unlinkat(dfd, name, 0);
        return false;
    }
    void *page = aligned_alloc(OL_SE_PAGE, OL_SE_PAGE);
    bool ok = false;
    if (page) {
        memset(page, 0, OL_SE_PAGE);
        ok = pwrite(fd, page, OL_SE_PAGE, OL_SE_PAGE) == (ssize_t)OL_SE_PAGE;
        free(page);
    }
    close(fd);
    unlinkat(dfd, name, 0);
    return ok;
}

/* Prepares drive i: its directory fd, .openlake/{tmp,buckets}, tmp emptied,
 * whether it takes O_DIRECT writes (dio: try). */
static int ol_se_open_drive(struct ol_store_drive *d, bool dio, char *err, size_t errlen)
{
    d->dfd = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d->dfd < 0) {
        int rc = -errno;
        ol_se_say(err, errlen, "%s: cannot open the drive directory: %s", d->path, strerror(-rc));
        return rc;
    }
    int rc = ol_se_mkdir_at(d->dfd, OL_FORMAT_DIR "/tmp");
    if (rc == 0)
        rc = ol_se_mkdir_at(d->dfd, OL_FORMAT_DIR "/buckets");
    if (rc < 0) {
        ol_se_say(err, errlen, "%s: cannot make %s/tmp and %s/buckets: %s", d->path,
                  OL_FORMAT_DIR, OL_FORMAT_DIR, strerror(-rc));
        return rc;
    }
    int tfd = openat(d->dfd, OL_FORMAT_DIR "/tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (tfd < 0) {
        rc = -errno;
    } else {
        rc = ol_se_rm_inside(tfd, 0);
        if (rc == 0 && fsync(tfd) < 0)
            rc = -errno;
        close(tfd);
    }
    if (rc < 0)
        ol_se_say(err, errlen, "%s: cannot empty %s/tmp: %s", d->path, OL_FORMAT_DIR,
                  strerror(-rc));
    else
        d->dio = dio && ol_se_probe_dio(d->dfd);
    return rc;
}

int ol_store_open(const struct ol_store_params *p, struct ol_store **out, char *err, size_t errlen)
{
    *out = NULL;
    ol_se_say(err, errlen, "%s", "");
    unsigned n = p->n, dps = p->drives_per_set;
    if (!p->drives || n == 0 || dps == 0 || dps > OL_SE_MAXD || n % dps != 0 ||
        n / dps > OL_FORMAT_MAX_SETS) {
        ol_se_say(err, errlen, "store: %u drives in sets of %u: need 1..%u drives per set "
                  "and a whole number of sets (at most %u)", n, dps, OL_SE_MAXD,
                  OL_FORMAT_MAX_SETS);
        return -EINVAL;
    }
    unsigned parity = p->parity < 0 ? ol_layout_default_parity(dps) : (unsigned)p->parity;
    if (parity > dps / 2 || dps - parity > OL_EC_MAX_DATA || parity > OL_EC_MAX_PARITY) {
        ol_se_say(err, errlen, "store: parity %u for sets of %u drives: need at most %u and at "
                  "most %u data shards", parity, dps, dps / 2, OL_EC_MAX_DATA);
        return -EINVAL;
    }
    uint32_t stripe = p->stripe_bytes ? p->stripe_bytes : OL_STORE_STRIPE_DEFAULT;
    if (stripe < OL_STORE_STRIPE_MIN || stripe > OL_STORE_STRIPE_MAX) {
        ol_se_say(err, errlen, "store: stripe of %u bytes: need %u..%u", stripe,
                  OL_STORE_STRIPE_MIN, OL_STORE_STRIPE_MAX);
        return -EINVAL;
    }
    if (p->mpu_expiry_s < -1) {
        ol_se_say(err, errlen, "store: mpu_expiry_s %lld: need -1 (never), 0 (default) or "
                  "seconds", (long long)p->mpu_expiry_s);
        return -EINVAL;
    }
    uint64_t inl = p->inline_max < 0 ? OL_STORE_INLINE_DEFAULT : (uint64_t)p->inline_max;
    if (inl > stripe)
        inl = stripe;
    if (inl > OL_META_MAX_INLINE)
        inl = OL_META_MAX_INLINE;
    /* The smallest k any PUT may use (parity up to dps / 2) must have a code. */
    unsigned kmin = dps - dps / 2;

    /* A cluster store's formats are its caller's (engine.h): none read here. */
    bool cluster = p->deployment != NULL;
    bool any_remote = false;
    for (unsigned i = 0; cluster && p->remote_drives && i < n; i++)
        any_remote |= p->remote_drives[i];
    if (any_remote && (!p->remote || !p->remote->start)) {
        ol_se_say(err, errlen, "store: remote drives and no way to reach them");
        return -EINVAL;
    }
    struct ol_format_plan plan;
    memset(&plan, 0, sizeof plan);
    int rc = 0;
    if (!cluster) {
        rc = ol_format_resolve(p->drives, n, dps, p->format_flags, &plan, err, errlen);
        if (rc == 0)
            rc = ol_format_apply(&plan, err, errlen);
    }
    if (rc < 0) {
        ol_format_plan_free(&plan);
        return rc;
    }

    struct ol_store *s = calloc(1, sizeof *s);
    if (!s) {
        ol_format_plan_free(&plan);
        return -ENOMEM;
    }
    s->drives = calloc(n, sizeof *s->drives);
    if (!s->drives) {
        rc = -ENOMEM;
        goto fail;
    }
    for (unsigned i = 0; i < n; i++)
        s->drives[i].dfd = -1;
    s->n = n;
    s->dps = dps;
    s->sets = n / dps;
    s->parity = parity;
    s->stripe_bytes = stripe;
    s->inline_max = (uint32_t)inl;
    s->bmax = (uint32_t)ol_ec_shard_len(stripe, kmin);
    /* room for a version of 10000 parts with the longest checksums (~680 KB) */
    s->meta_cap = (uint32_t)ol_se_round(ol_se_round(inl, OL_EC_ALIGN) + OL_SE_META_SLACK +
                                        (size_t)OL_META_MAX_PARTS *
                                            (OL_META_PART_FIXED + OL_META_CKS_MAX), 4096);
    s->region = ol_se_round(OL_SE_PAGE + OL_BITROT_HDR_SIZE + s->bmax, OL_SE_PAGE);
    s->slot_size = (size_t)dps * s->region;
    s->arena_size = OL_SE_SLOTS * s->slot_size + (2 * (size_t)dps + 1) * s->meta_cap +
                    (size_t)dps * OL_SE_PAGE;
    s->max_requests = p->max_requests ? p->max_requests : OL_STORE_REQUESTS_DEFAULT;
    memcpy(s->deployment, cluster ? p->deployment : plan.deployment, 16);
    if (cluster && p->remote)
        s->remote = *p->remote;
    if (cluster && p->locks)
        s->locks = *p->locks;
    s->mpu_min_part = p->mpu_min_part ? p->mpu_min_part : OL_STORE_MPU_MIN_PART;
    s->mpu_expiry_ns = p->mpu_expiry_s < 0 ? -1
                       : (p->mpu_expiry_s ? p->mpu_expiry_s : OL_STORE_MPU_EXPIRY_S) *
                             (int64_t)1000000000;
    for (unsigned i = 0; i < n; i++) {
        struct ol_store_drive *d = &s->drives[i];
        d->path = strdup(p->drives[i]);
        if (!d->path) {
            rc = -ENOMEM;
            goto fail;
        }
        if (cluster && p->remote_drives && p->remote_drives[i]) {
            d->remote = true;   /* its node opens, cleans and scans it */
            continue;
        }
        if (!cluster && plan.drives[i].state == OL_FORMAT_OFFLINE)
            continue; /* runs degraded: every request counts it failed */
        d->adopted = !cluster && plan.drives[i].heal;
        rc = ol_se_open_drive(d, p->direct_io >= 0, err, errlen);
        if (rc < 0)
            goto fail;
    }
    rc = ol_se_mpu_open(s, p, err, errlen);
    if (rc < 0)
        goto fail;
    rc = ol_se_ver_open(s, err, errlen);
    if (rc < 0)
        goto fail;
    if (p->sync == 0) {
        int *dfds = malloc(n * sizeof *dfds);
        if (!dfds) {
            rc = -ENOMEM;
            goto fail;
        }
        for (unsigned i = 0; i < n; i++) {
            struct ol_store_drive *dr = &s->drives[i];
            dr->syncfs = dr->dfd >= 0 && syncfs_whole(dr->dfd, &dr->fs_type);
            dr->ordered = dr->syncfs && dr->dio && dr->fs_type == OL_SE_XFS_MAGIC;
            dfds[i] = dr->syncfs ? dr->dfd : -1; /* the others are synced file by file */
        }
        rc = ol_syncers_open(dfds, n, &s->sync, err, errlen);
        free(dfds);
        if (rc < 0)
            goto fail;
    }
    ol_format_plan_free(&plan);
    *out = s;
    return 0;
fail:
    ol_format_plan_free(&plan);
    ol_store_close(s);
    return rc;
}

void ol_store_close(struct ol_store *s)
{
    if (!s)
        return;
    ol_syncers_close(s->sync);
    ol_se_mpu_close(s);
    ol_se_ver_close(s);
    if (s->drives) {
        for (unsigned i = 0; i < s->n; i++) {
            if (s->drives[i].dfd >= 0)
                close(s->drives[i].dfd);
            free(s->drives[i].path);
        }
        free(s->drives);
    }
    free(s);
}

unsigned ol_store_sets(const struct ol_store *s) { return s->sets; }

void ol_store_sync_stats(const struct ol_store *s, uint64_t *syncs, uint64_t *barriers,
                         uint64_t *ns)
{
    ol_syncers_counts(s->sync, syncs, barriers, ns);
}

void ol_store_set_heal_hook(struct ol_store *s, ol_store_heal_fn fn, void *ud)
{
    s->heal_fn = fn;
    s->heal_ud = ud;
}

void ol_se_heal_queue(struct ol_sreq *r)
{
    const struct ol_store *s = r->c->s;
    if (s->heal_fn && r->klen)
        s->heal_fn(s->heal_ud, r->bucket, r->key);
}

bool ol_store_drive_direct_io(const struct ol_store *s, unsigned drive)
{
    return drive < s->n && s->drives[drive].dio;
}

bool ol_store_drive_syncfs(const struct ol_store *s, unsigned drive, unsigned long *fs_type)
{
    if (fs_type)
        *fs_type = drive < s->n ? s->drives[drive].fs_type : 0;
    return drive < s->n && s->drives[drive].syncfs;
}

bool ol_store_drive_ordered(const struct ol_store *s, unsigned drive)
{
    return drive < s->n && s->drives[drive].ordered;
}

bool ol_store_drive_adopted(const struct ol_store *s, unsigned drive)
{
    return drive < s->n && s->drives[drive].adopted;
}

int ol_store_drive_fd(const struct ol_store *s, unsigned drive)
{
    return drive < s->n ? s->drives[drive].dfd : -1;
}

unsigned ol_store_drive_count(const struct ol_store *s) { return s->n; }
unsigned ol_store_drives_per_set(const struct ol_store *s) { return s->dps; }
unsigned ol_store_parity(const struct ol_store *s) { return s->parity; }
uint32_t ol_store_inline_max(const struct ol_store *s) { return s->inline_max; }

unsigned ol_store_set_of(const struct ol_store *s, const char *bucket, const char *key)
{
    return ol_layout_set_of(s->deployment, bucket, strlen(bucket), key, strlen(key), s->sets);
}

/* ---- cores ----------------------------------------------------------------------- */

static uint64_t ol_se_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256**: ids need uniqueness, not secrecy; seeded from getrandom. */
static uint64_t ol_se_rand(struct ol_store_core *c)
{
    uint64_t *s = c->rng;
    uint64_t r = ol_se_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = ol_se_rotl(s[3], 45);
    return r;
}

void ol_se_random_id(struct ol_store_core *c, uint8_t out[16])
{
    uint64_t a = ol_se_rand(c), b = ol_se_rand(c);
    memcpy(out, &a, 8);
    memcpy(out + 8, &b, 8);
    out[6] = (uint8_t)((out[6] & 0x0f) | 0x40);
    out[8] = (uint8_t)((out[8] & 0x3f) | 0x80);
}

int ol_store_core_create(struct ol_store *s, ol_loop *loop, struct ol_store_core **out)
{
    *out = NULL;
    struct ol_store_core *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->s = s;
    c->loop = loop;
    int rc = -ENOMEM;
    c->reqs = calloc(s->max_requests, sizeof *c->reqs);
    c->freel = calloc(s->max_requests, sizeof *c->freel);
    if (!c->reqs || !c->freel)
        goto fail;
    c->arena_total = s->arena_size * s->max_requests;
    void *a = mmap(NULL, c->arena_total, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (a == MAP_FAILED) {
        c->arena = NULL;
        goto fail;
    }
    c->arena = a;
    for (unsigned i = 0; i < s->max_requests; i++)
        c->freel[c->nfree++] = s->max_requests - 1 - i;
    for (unsigned m = 0; m <= s->dps / 2 && m <= OL_EC_MAX_PARITY; m++) {
        unsigned k = s->dps - m;
        if (k == 0 || k > OL_EC_MAX_DATA)
            continue;
        void *e = NULL;
        if (posix_memalign(&e, 64, sizeof(struct ol_ec)) != 0)
            goto fail;
        c->ec[m] = e;
        rc = ol_ec_init(c->ec[m], k, m);
        if (rc < 0)
            goto fail;
        rc = -ENOMEM;
    }
    uint8_t seed[32];
    if (getrandom(seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed) {
        uint64_t t = ol_se_now_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)c;
        for (unsigned i = 0; i < 32; i++)
            seed[i] = (uint8_t)(XXH3_64bits_withSeed(&t, sizeof t, i) & 0xff);
    }
    memcpy(c->rng, seed, sizeof seed);
    if (!(c->rng[0] | c->rng[1] | c->rng[2] | c->rng[3]))
        c->rng[0] = 1;
    *out = c;
    return 0;
fail:
    ol_store_core_destroy(c);
    return rc;
}

void ol_store_core_destroy(struct ol_store_core *c)
{
    if (!c)
        return;
    /* A barrier still out names its request's memory: the syncer finishes
     * with it before that goes (it posts to the stopped loop, which outlives
     * this core; the message is never run). */
    while (atomic_load_explicit(&c->barriers_out, memory_order_acquire))
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    if (c->reqs) {
        /* Requests still in use (the loop stopped under them): a crash. One
         * that held a commit lock may have committed, or not: the listing
         * cannot know (engine_listing.c). */
        for (unsigned i = 0; i < c->s->max_requests; i++) {
            struct ol_sreq *r = &c->reqs[i].r;
            if (!r->in_use)
                continue;
            if (r->locked)
                ol_se_listing_unknown(c->s, "a write was dropped by a stopping core");
            for (unsigned p = 0; p < OL_SE_MAXD; p++) {
                if (p < r->n && ol_se_drive(r, p)->remote)
                    continue;   /* its node's handles: closed with the connection */
                /* a GET's own mapping (the shared ones: ol_se_park_drop) */
                if (r->d[p].map && r->d[p].map_slot == OL_SE_MAP_OWN)
                    munmap((void *)(uintptr_t)r->d[p].map, r->d[p].map_len);
                if (r->d[p].fd >= 0)
                    close(r->d[p].fd);
                if (r->d[p].fd2 >= 0)
                    close(r->d[p].fd2);
                if (r->d[p].tfd >= 0)
                    close(r->d[p].tfd);
                if (r->d[p].mfd >= 0)
                    close(r->d[p].mfd);
                for (unsigned k = 0; k < OL_SE_FAN; k++)
                    if (r->d[p].ffd[k] >= 0)
                        close(r->d[p].ffd[k]);
            }
        }
    }
    ol_se_park_drop(c);
    for (unsigned m = 0; m <= OL_EC_MAX_PARITY; m++)
        free(c->ec[m]);
    if (c->arena)
        munmap(c->arena, c->arena_total);
    free(c->reqs);
    free(c->freel);
    free(c);
}

unsigned ol_store_core_busy(const struct ol_store_core *c) { return c->s->max_requests - c->nfree; }
const struct ol_store_stats *ol_store_core_stats(const struct ol_store_core *c) { return &c->st; }

/* ---- requests ---------------------------------------------------------------------- */

static void ol_se_on_timer(ol_loop *loop, struct ol_timer *t);

static void ol_se_fds_init(struct ol_sdrv *d)
{
    d->fd = d->fd2 = d->tfd = d->mfd = -1;
    for (unsigned k = 0; k < OL_SE_FAN; k++)
        d->ffd[k] = -1;
}

struct ol_sreq *ol_se_req_get(struct ol_store_core *c, uint8_t kind, ol_store_cb cb, void *ud)
{
    if (!c->nfree) {
        c->st.busy++;
        return NULL;
    }
    unsigned idx = c->freel[--c->nfree];
    OL_ASSERT(idx < c->s->max_requests);
    struct ol_sreq *r = &c->reqs[idx].r;
    OL_ASSERT(!r->in_use);
    memset(r, 0, offsetof(struct ol_sreq, d));
    memset(&r->w, 0, sizeof r->w);
    memset(&r->wa, 0, sizeof r->wa);
    memset(&r->aw, 0, sizeof r->aw);
    memset(&r->slot, 0, sizeof r->slot);
    memset(&r->tmpl, 0, sizeof *r - offsetof(struct ol_sreq, tmpl));
    r->timer.fn = ol_se_on_timer;
    r->c = c;
    r->cb = cb;
    r->ud = ud;
    r->kind = kind;
    r->in_use = true;
    r->cur = -1;
    r->sel = -1;
    r->hold = -1;
    r->uidx = -1;
    r->pnum = 1;
    r->arena = c->arena + (size_t)idx * c->s->arena_size;
    for (unsigned i = 0; i < OL_SE_SLOTS; i++)
        r->slot[i].base = r->arena + i * c->s->slot_size;
    r->tmpl = r->arena + OL_SE_SLOTS * c->s->slot_size + 2 * (size_t)c->s->dps * c->s->meta_cap;
    r->carry = r->tmpl + c->s->meta_cap;
    for (unsigned i = 0; i < OL_SE_MAXD; i++) {
        struct ol_sdrv *d = &r->d[i];
        ol_se_fds_init(d);
        d->s.r = r;
        d->s.pos = (uint8_t)i;
        d->s.slot = OL_SE_CTL;
        d->s.deferred = false;
        d->pos = (uint8_t)i;
    }
    for (unsigned sl = 0; sl < OL_SE_SLOTS; sl++)
        for (unsigned i = 0; i < OL_SE_MAXD; i++) {
            r->w[sl][i].r = r;
            r->w[sl][i].pos = (uint8_t)i;
            r->w[sl][i].slot = (uint8_t)sl;
        }
    for (unsigned i = 0; i < OL_SE_MAXD; i++)
        for (unsigned k = 0; k < OL_SE_AHEAD; k++) {
            r->wa[i][k].r = r;
            r->wa[i][k].pos = (uint8_t)i;
            r->wa[i][k].slot = (uint8_t)(OL_SE_SLOTS + k);
        }
    return r;
}

void ol_se_req_put(struct ol_sreq *r)
{
    struct ol_store_core *c = r->c;
    /* released only when none of its ops is in the ring (engine_int.h) */
    OL_ASSERT(r->in_use && r->inflight == 0 && r->cbdepth == 0 && r->sparked == 0);
    OL_ASSERT(c->nfree < c->s->max_requests);
    ol_timer_cancel(c->loop, &r->timer);
    ol_se_key_unlock(r);
    r->in_use = false;
    c->freel[c->nfree++] = (uint32_t)((union ol_sreq_u *)r - c->reqs);
}

/* out = a + b + c (NULL parts skipped), cut at OL_SE_PATH - 1 bytes (never reached:
 * the longest path is ~180 bytes). */
void ol_se_join(char *out, const char *a, const char *b, const char *c)
{
    const char *parts[3] = {a, b, c};
    size_t n = 0;
    for (unsigned i = 0; i < 3; i++) {
        if (!parts[i])
            continue;
        size_t l = strlen(parts[i]);
        if (l > OL_SE_PATH - 1 - n)
            l = OL_SE_PATH - 1 - n;
        memcpy(out + n, parts[i], l);
        n += l;
    }
    out[n] = 0;
}

void ol_se_names(struct ol_sreq *r, const char *bucket, const char *key)
{
    const struct ol_store *s = r->c->s;
    r->blen = strnlen(bucket, OL_LAYOUT_BUCKET_MAX);
    memcpy(r->bucket, bucket, r->blen);
    r->bucket[r->blen] = 0;
    ol_se_join(r->p_bucket, OL_FORMAT_DIR "/buckets/", r->bucket, NULL);
    ol_se_join(r->p_objects, r->p_bucket, "/objects", NULL);
    r->n = s->dps;
    if (!key)
        return;
    r->klen = strnlen(key, OL_LAYOUT_KEY_MAX);
    memcpy(r->key, key, r->klen);
    r->key[r->klen] = 0;
    r->set = ol_layout_set_of(s->deployment, r->bucket, r->blen, r->key, r->klen, s->sets);
    ol_se_obj_names(s, r->key, r->klen, r->p_objects, r->p_ab, r->p_obj, r->p_meta);
}

void ol_se_obj_names(const struct ol_store *s, const char *key, size_t klen, const char *p_objects,
                     char *p_ab, char *p_obj, char *p_meta)
{
    char odir[OL_LAYOUT_DIR_LEN];
    ol_layout_object_dir(s->deployment, key, klen, odir);
    char ab[4] = {'/', odir[0], odir[1], 0};
    ol_se_join(p_ab, p_objects, ab, NULL);
    ol_se_join(p_obj, p_objects, "/", odir);
    ol_se_join(p_meta, p_obj, "/meta", NULL);
}

void ol_se_drives_init(struct ol_sreq *r)
{
    const struct ol_store *s = r->c->s;
    uint8_t *meta = r->arena + OL_SE_SLOTS * s->slot_size;
    for (unsigned i = 0; i < r->n; i++) {
        struct ol_sdrv *d = &r->d[i];
        uint8_t *mbuf = meta + (size_t)i * s->meta_cap;
        uint8_t *nbuf = meta + (size_t)(s->dps + i) * s->meta_cap;
        memset(&d->err, 0, sizeof *d - offsetof(struct ol_sdrv, err));
        ol_se_fds_init(d);
        d->pos = (uint8_t)i;
        d->mbuf = mbuf;
        d->nbuf = nbuf;
        if (ol_se_grouped(r, i)) /* before any change of this request (syncer.h) */
            d->sw.since = ol_syncer_mark(s->sync, ol_se_drive_index(r, i));
        if (!ol_se_online(r, i)) {
            d->err = -ENODEV;
            d->ms = OL_SE_M_ERR;
        }
    }
}

unsigned ol_se_drive_index(const struct ol_sreq *r, unsigned pos)
{
    return r->set * r->c->s->dps + pos;
}

const struct ol_store_drive *ol_se_drive(const struct ol_sreq *r, unsigned pos)
{
    return &r->c->s->drives[ol_se_drive_index(r, pos)];
}

bool ol_se_grouped(const struct ol_sreq *r, unsigned pos)
{
    return ol_se_drive(r, pos)->syncfs;
}

int ol_se_dfd(const struct ol_sreq *r, unsigned pos) { return ol_se_drive(r, pos)->dfd; }

bool ol_se_online(const struct ol_sreq *r, unsigned pos)
{
    const struct ol_store_drive *d = ol_se_drive(r, pos);
    return d->remote || d->dfd >= 0;
}

void ol_se_path_id(char *out, const char *prefix, const uint8_t id[16], const char *suffix)
{
    char u[38];
    u[0] = '/';
    ol_format_uuid_str(id, u + 1);
    ol_se_join(out, prefix, u, suffix);
}

void ol_se_part_path(char *out, const char *p_obj, const struct ol_meta_version *v, uint32_t num)
{
    if (v->flat) {
        ol_se_path_id(out, p_obj, v->data_dir, OL_SE_FLAT_SFX);
        return;
    }
    char sfx[24];
    snprintf(sfx, sizeof sfx, "/part.%u", num);
    ol_se_path_id(out, p_obj, v->data_dir, sfx);
}

bool ol_se_data_rm(char *out, int *flags, const char *p_obj, const struct ol_meta_version *v,
                   unsigned i)
{
    unsigned parts = v->part_count ? v->part_count : 1;
    *flags = 0;
    if (i < parts) {
        struct ol_meta_part pt = {.number = 1};
        if (v->part_count)
            ol_meta_part_at(v, i, &pt);
        ol_se_part_path(out, p_obj, v, pt.number);
        return true;
    }
    if (i > parts || v->flat)
        return false;
    ol_se_path_id(out, p_obj, v->data_dir, NULL);
    *flags = AT_REMOVEDIR;
    return true;
}

int ol_se_hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

bool ol_se_uuid_parse(const char *s, uint8_t out[16])
{
    if (strlen(s) != 36)
        return false;
    unsigned o = 0;
    for (unsigned i = 0; i < 36;) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i++] != '-')
                return false;
            continue;
        }
        int a = ol_se_hexval(s[i]), b = ol_se_hexval(s[i + 1]);
        if (a < 0 || b < 0)
            return false;
        out[o++] = (uint8_t)(a << 4 | b);
        i += 2;
    }
    return true;
}

uint64_t ol_se_seed(const uint8_t ddir[16], unsigned shard)
{
    return XXH3_64bits_withSeed(ddir, 16, shard);
}

uint64_t ol_se_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- ops ------------------------------------------------------------------------- */

void ol_se_dispatch(struct ol_sdrv *d, int res)
{
    OL_ASSERT(d->s.r->kind >= OL_SE_PUT && d->s.r->kind <= OL_SE_MPU && d->ms <= OL_SE_M_ERR &&
              d->sjoin <= OL_SE_SJ_OUT);
    switch (d->s.r->kind) {
    case OL_SE_PUT: ol_se_put_drive(d, res); break;
    case OL_SE_GET: ol_se_get_drive(d, res); break;
    case OL_SE_DEL: ol_se_del_drive(d, res); break;
    case OL_SE_MPU: ol_se_mpu_drive(d, res); break;
    default: ol_se_bkt_drive(d, res); break;
    }
}

/* Where every drive op's result reaches the request's state machine:
 * completions from the ring, deferred ones (the timer) and barriers
 * (ol_se_on_sync). Test builds rewrite the result here (base/fault.h). */
static void ol_se_on_op(ol_loop *loop, struct ol_op *op, int res, unsigned flags)
{
    (void)loop;
    (void)flags;
    struct ol_sop *s = (struct ol_sop *)op;
    struct ol_sreq *r = s->r;
    OL_ASSERT(r->in_use && r->inflight > 0);
    if (s->slot == OL_SE_RLOCK) {
        r->inflight--;
        return ol_se_rlock_done(r, res);
    }
    OL_ASSERT(s->pos < r->n);
    OL_ASSERT(s->slot == OL_SE_CTL || s->slot < OL_SE_SLOTS + OL_SE_AHEAD);
    r->inflight--;
    res = OL_FAULT(OL_FAULT_STORE, s->op.fault_op, ol_se_drive_index(r, s->pos), res);
    if (s->slot == OL_SE_CTL) {
        ol_se_dispatch(&r->d[s->pos], res);
    } else if (r->kind == OL_SE_PUT) {
        ol_se_put_slot(r, s->slot, s->pos, res);
    } else {
        ol_se_get_slot(r, s->slot, s->pos, res);
    }
}

void ol_se_issue(struct ol_sreq *r, struct ol_sop *s, int rc)
{
    OL_ASSERT(r->in_use && !s->deferred && s->r == r);
    r->inflight++;
    s->op.cb = ol_se_on_op;
    if (rc < 0) {
        s->deferred = true;
        s->dres = rc;
        ol_timer_arm(r->c->loop, &r->timer, 0);
    }
}

void ol_se_kick(struct ol_sreq *r)
{
    r->kick = true;
    ol_timer_arm(r->c->loop, &r->timer, 0);
}

static bool ol_se_step_kind(struct ol_sreq *r)
{
    switch (r->kind) {
    case OL_SE_PUT: return ol_se_put_step(r);
    case OL_SE_GET: return ol_se_get_step(r);
    case OL_SE_DEL: return ol_se_del_step(r);
    case OL_SE_MPU: return ol_se_mpu_step(r);
    default: return ol_se_bkt_step(r);
    }
}

bool ol_se_advance(struct ol_sreq *r)
{
    OL_ASSERT(r->in_use);
    if (r->advancing) {
        r->again = true;
        return false;
    }
    r->advancing = true;
    do {
        r->again = false;
        if (ol_se_step_kind(r))
            return true;
    } while (r->again);
    r->advancing = false;
    return false;
}

bool ol_se_can_emit(struct ol_sreq *r)
{
    if (!r->in_api)
        return true;
    ol_se_kick(r);
    return false;
}

static void ol_se_on_timer(ol_loop *loop, struct ol_timer *t)
{
    struct ol_sreq *r = (struct ol_sreq *)((char *)t - offsetof(struct ol_sreq, timer));
    struct ol_sop *list[OL_SE_MAXD * (OL_SE_SLOTS + OL_SE_AHEAD + 1) + 1];
    unsigned n = 0;
    for (unsigned i = 0; i < OL_SE_MAXD; i++)
        if (r->d[i].s.deferred)
            list[n++] = &r->d[i].s;
    for (unsigned sl = 0; sl < OL_SE_SLOTS; sl++)
        for (unsigned i = 0; i < OL_SE_MAXD; i++)
            if (r->w[sl][i].deferred)
                list[n++] = &r->w[sl][i];
    for (unsigned i = 0; i < OL_SE_MAXD; i++)
        for (unsigned k = 0; k < OL_SE_AHEAD; k++)
            if (r->wa[i][k].deferred)
                list[n++] = &r->wa[i][k];
    if (r->rlop.deferred)
        list[n++] = &r->rlop;
    bool kick = r->kick;
    r->kick = false;
    /* Deferred ops count as in flight, so r outlives every call below until
     * the last one; nothing touches r after that. */
    if (kick && ol_se_advance(r))
        return; /* released: there was nothing deferred */
    for (unsigned i = 0; i < n; i++) {
        list[i]->deferred = false;
        ol_se_on_op(loop, &list[i]->op, list[i]->dres, 0);
    }
}

/* Whether a step changes the drive (fenced when made under a cluster lock). */
static bool rstep_changes(const struct ol_store_rstep *st)
{
    switch (st->code) {
    case OL_RSTEP_OPEN: return (st->flags & (O_ACCMODE | O_CREAT | O_TRUNC)) != 0;
    case OL_RSTEP_WRITE:
    case OL_RSTEP_MKDIR:
    case OL_RSTEP_UNLINK:
    case OL_RSTEP_RENAME:
    case OL_RSTEP_FALLOCATE: return true;
    default: return false;
    }
}

int ol_se_start(struct ol_sreq *r, unsigned pos, struct ol_op *op,
                const struct ol_store_rstep *st0)
{
    const struct ol_store_drive *dr = ol_se_drive(r, pos);
    const struct ol_store *s = r->c->s;
    ol_loop *l = r->c->loop;
    struct ol_store_rstep fst;
    const struct ol_store_rstep *st = st0;
    /* under the owner's lock: fenced on the drives of the lock's set (a
     * bucket's create and delete, under set 0's, touch every set: the other
     * sets' drives take them unfenced) */
    if (r->locked && s->locks.lock && r->set == r->rl_set && rstep_changes(st0)) {
        fst = *st0;
        fst.token = r->rlk.token;
        st = &fst;
        if (!dr->remote && s->remote.fenced &&
            !s->remote.fenced(s->remote.fud, ol_se_drive_index(r, pos), fst.token))
            return -ESTALE;   /* the drive took another owner's token */
    }
    if (dr->remote) {
#ifdef OL_FAULTS
        static const uint8_t kind[OL_RSTEP_MAX + 1] = {
            [OL_RSTEP_OPEN] = OL_FAULT_OP_OPEN,     [OL_RSTEP_READ] = OL_FAULT_OP_READ,
            [OL_RSTEP_WRITE] = OL_FAULT_OP_WRITE,   [OL_RSTEP_FSYNC] = OL_FAULT_OP_FSYNC,
            [OL_RSTEP_CLOSE] = OL_FAULT_OP_CLOSE,   [OL_RSTEP_MKDIR] = OL_FAULT_OP_MKDIR,
            [OL_RSTEP_UNLINK] = OL_FAULT_OP_UNLINK, [OL_RSTEP_RENAME] = OL_FAULT_OP_RENAME,
            [OL_RSTEP_STATX] = OL_FAULT_OP_STATX,   [OL_RSTEP_FALLOCATE] = OL_FAULT_OP_FALLOCATE};
        op->fault_op = st->code <= OL_RSTEP_MAX ? kind[st->code] : OL_FAULT_OP_NONE;
#endif
        const struct ol_store_remote *h = &r->c->s->remote;
        return h->start(h->ud, l, ol_se_drive_index(r, pos), st, op);
    }
    int dfd = dr->dfd;
    switch (st->code) {
    case OL_RSTEP_OPEN:
        return ol_loop_openat(l, op, dfd, st->path, st->flags | O_CLOEXEC, (mode_t)st->mode);
    case OL_RSTEP_READ: return ol_loop_read(l, op, st->fd, st->buf, st->len, st->off);
    case OL_RSTEP_WRITE: return ol_loop_write(l, op, st->fd, st->wbuf, st->len, st->off);
    case OL_RSTEP_FSYNC: return ol_loop_fsync(l, op, st->fd, st->flags);
    case OL_RSTEP_CLOSE: return ol_loop_close(l, op, st->fd);
    case OL_RSTEP_MKDIR: return ol_loop_mkdirat(l, op, dfd, st->path, (mode_t)st->mode);
    case OL_RSTEP_UNLINK: return ol_loop_unlinkat(l, op, dfd, st->path, st->flags);
    case OL_RSTEP_RENAME: return ol_loop_renameat(l, op, dfd, st->path, dfd, st->path2, 0);
    case OL_RSTEP_STATX:
        return ol_loop_statx(l, op, dfd, st->path, AT_SYMLINK_NOFOLLOW, STATX_TYPE | STATX_SIZE,
                             st->stx);
    case OL_RSTEP_FALLOCATE: return ol_loop_fallocate(l, op, st->fd, 0, 0, st->off);
    default: return -EINVAL;
    }
}

/* A step of drive d's control op. */
static void ol_se_ctl(struct ol_sdrv *d, const struct ol_store_rstep *st)
{
    struct ol_sreq *r = d->s.r;
    ol_se_issue(r, &d->s, ol_se_start(r, d->pos, &d->s.op, st));
}

void ol_se_openat(struct ol_sdrv *d, const char *path, int flags, mode_t mode)
{
    ol_se_ctl(d, &(struct ol_store_rstep){.code = OL_RSTEP_OPEN, .path = path, .flags = flags,
                                          .mode = mode});
}

void ol_se_read(struct ol_sdrv *d, int fd, void *buf, unsigned len, uint64_t off)
{
    ol_se_ctl(d, &(struct ol_store_rstep){.code = OL_RSTEP_READ, .fd = fd, .buf = buf,
                                          .len = len, .off = off});
}

void ol_se_write(struct ol_sdrv *d, int fd, const void *buf, unsigned len, uint64_t off)
{
    ol_se_ctl(d, &(struct ol_store_rstep){.code = OL_RSTEP_WRITE, .fd = fd, .wbuf = buf,
                                          .len = len, .off = off});
}

/* ---- one barrier per filesystem ----------------------------------------------------
 *
 * A set's drives may share a filesystem (data_dirs on one disk), and one
 * syncfs makes all of their changes durable. Sent one per drive, a
 * request's barriers straddled the syncfs the first of them started (the
 * others' steps ended while it ran, so they waited for the next one): a PUT
 * on 4 drives of one XFS took 1.4-1.5 syncfs, mostly two in a row. So a
 * drive that asks for a barrier while another drive of its request on the
 * same filesystem is still at its steps (active, healthy, no barrier of its
 * own asked) parks; the last of them to ask, or the last to end its steps
 * (ol_se_drive_end), sends one barrier that carries the parked ones, and
 * its completion completes each of theirs with the same result. A parked
 * drive waits only for ops of its own request already under way, each of
 * which ends in a step, a barrier or the drive's end. Drives on filesystems
 * of their own never park. */

static int fs_of(const struct ol_sreq *r, unsigned pos)
{
    return ol_se_grouped(r, pos) ? ol_syncer_fs(r->c->s->sync, ol_se_drive_index(r, pos)) : -1;
}

/* Whether a drive of r on filesystem fs, other than `self`, is still at its
 * steps with no barrier asked. */
static bool peers_at_work(const struct ol_sreq *r, const struct ol_sdrv *self, int fs)
{
    for (unsigned j = 0; j < r->n; j++) {
        const struct ol_sdrv *p = &r->d[j];
        if (p != self && p->active && !p->err && p->sjoin == OL_SE_SJ_NONE && fs_of(r, j) == fs)
            return true;
    }
    return false;
}

static void ol_se_on_sync(ol_loop *loop, struct ol_msg *m)
{
    struct ol_sdrv *d = (struct ol_sdrv *)((char *)m - offsetof(struct ol_sdrv, sw));
    struct ol_sreq *r = d->s.r;
    OL_ASSERT(d->sjoin == OL_SE_SJ_OUT && !(d->sfollow >> d->pos & 1));
    uint32_t carried = d->sfollow;
    int res = d->sw.res;
    d->sfollow = 0;
    d->sjoin = OL_SE_SJ_NONE;
    for (unsigned j = 0; j < r->n; j++)
        if (carried >> j & 1)
            r->d[j].sjoin = OL_SE_SJ_NONE;
    /* the carried ones first: d's op, still in flight, keeps r alive */
    for (unsigned j = 0; j < r->n; j++)
        if (carried >> j & 1)
            ol_se_on_op(loop, &r->d[j].s.op, res, 0);
    ol_se_on_op(loop, &d->s.op, res, 0);
}

/* Sends lead's barrier, carrying every drive parked on filesystem fs. */
static void barrier_send(struct ol_sreq *r, struct ol_sdrv *lead, int fs)
{
    uint32_t carried = 0;
    OL_ASSERT(lead->sjoin == OL_SE_SJ_NONE);
    for (unsigned j = 0; r->sparked && j < r->n; j++) {
        struct ol_sdrv *p = &r->d[j];
        if (p == lead || p->sjoin != OL_SE_SJ_PARKED || fs_of(r, j) != fs)
            continue;
        carried |= 1u << j;
        p->sjoin = OL_SE_SJ_FOLLOW;
        OL_ASSERT(r->sparked > 0);
        r->sparked--;
        if (p->sw.since < lead->sw.since)
            lead->sw.since = p->sw.since;   /* the earliest mark: every error since */
    }
    lead->sfollow = carried;
    lead->sjoin = OL_SE_SJ_OUT;
    lead->sw.msg.fn = ol_se_on_sync;
    lead->sw.out = &r->c->barriers_out;
    atomic_fetch_add_explicit(&r->c->barriers_out, 1, memory_order_relaxed);
    ol_syncer_wait(r->c->s->sync, ol_se_drive_index(r, lead->pos), r->c->loop, &lead->sw);
}

/* A drive of r on filesystem fs stopped being at work: the parked ones
 * there go, once none is left at work. */
static void barrier_release(struct ol_sreq *r, int fs)
{
    if (!r->sparked || fs < 0 || peers_at_work(r, NULL, fs))
        return;
    for (unsigned j = 0; j < r->n; j++) {
        struct ol_sdrv *p = &r->d[j];
        if (p->sjoin == OL_SE_SJ_PARKED && fs_of(r, j) == fs) {
            p->sjoin = OL_SE_SJ_NONE;
            r->sparked--;
            return barrier_send(r, p, fs);
        }
    }
}

void ol_se_barrier(struct ol_sdrv *d)
{
    struct ol_sreq *r = d->s.r;
    ol_se_issue(r, &d->s, 0);
#ifdef OL_FAULTS
    d->s.op.fault_op = OL_FAULT_OP_FSYNC; /* not prepared by ol_loop_fsync */
#endif
    int fs = fs_of(r, d->pos);
    if (fs >= 0 && peers_at_work(r, d, fs)) {
        d->sjoin = OL_SE_SJ_PARKED;
        r->sparked++;
        return;
    }
    barrier_send(r, d, fs);
}

void ol_se_fsync(struct ol_sdrv *d, int fd, int datasync)
{
    if (ol_se_grouped(d->s.r, d->pos))
        return ol_se_barrier(d);
    ol_se_ctl(d, &(struct ol_store_rstep){.code = OL_RSTEP_FSYNC, .fd = fd, .flags = datasync});
}

void ol_se_fallocate(struct ol_sdrv *d, int fd, uint64_t len)
{
    ol_se_ctl(d, &(struct ol_store_rstep){.code = OL_RSTEP_FALLOCATE, .fd = fd, .off = len});
}

void ol_se_close(struct ol_sdrv *d, int fd)
{
    ol_se_ctl(d, &(struct ol_store_rstep){.code = OL_RSTEP_CLOSE, .fd = fd});
}

void ol_se_mkdirat(struct ol_sdrv *d, const char *path)
{
    ol_se_ctl(d, &(struct ol_store_rstep){.code = OL_RSTEP_MKDIR, .path = path, .mode = 0700});
}

void ol_se_unlinkat(struct ol_sdrv *d, const char *path, int flags)
{
    ol_se_ctl(d, &(struct ol_store_rstep){.code = OL_RSTEP_UNLINK, .path = path, .flags = flags});
}

void ol_se_renameat(struct ol_sdrv *d, const char *from, const char *to)
{
    ol_se_ctl(d, &(struct ol_store_rstep){.code = OL_RSTEP_RENAME, .path = from, .path2 = to});
}

void ol_se_statx(struct ol_sdrv *d, const char *path)
{
    ol_se_ctl(d, &(struct ol_store_rstep){.code = OL_RSTEP_STATX, .path = path, .stx = &d->stx});
}

void ol_se_fsync_dir(struct ol_sdrv *d, const char *path, uint16_t after)
{
    if (ol_se_grouped(d->s.r, d->pos)) {
        d->step = after;
        return ol_se_barrier(d);
    }
    d->after = after;
    d->fs_err = 0;
    d->step = OL_SE_FS_OPEN;
    ol_se_openat(d, path, O_RDONLY | O_DIRECTORY, 0);
}

bool ol_se_fsync_step(struct ol_sdrv *d, int *res)
{
    switch (d->step) {
    case OL_SE_FS_OPEN:
        if (*res < 0) {
            d->step = d->after;
            return false;
        }
        d->fd2 = *res;
        d->step = OL_SE_FS_SYNC;
        ol_se_fsync(d, d->fd2, 0);
        return true;
    case OL_SE_FS_SYNC:
        d->fs_err = *res < 0 ? *res : 0;
        d->step = OL_SE_FS_CLOSE;
        ol_se_close(d, d->fd2);
        d->fd2 = -1;
        return true;
    case OL_SE_FS_CLOSE:
        d->step = d->after;
        *res = d->fs_err;
        return false;
    default:
        return false;
    }
}

void ol_se_phase_begin(struct ol_sreq *r) { r->active++; }

void ol_se_drive_begin(struct ol_sdrv *d)
{
    OL_ASSERT(!d->active && d->pos < d->s.r->n);
    d->active = true;
    d->s.r->active++;
}

void ol_se_drive_end(struct ol_sdrv *d)
{
    struct ol_sreq *r = d->s.r;
    OL_ASSERT(d->active && r->active > 0);
    d->active = false;
    if (r->sparked)
        barrier_release(r, fs_of(r, d->pos));
    if (--r->active == 0)
        ol_se_advance(r);
}

void ol_se_phase_started(struct ol_sreq *r)
{
    OL_ASSERT(r->active > 0);
    if (--r->active == 0)
        ol_se_advance(r);
}

/* A phase of one op per drive still usable: openat read-only, or statx. */
static void ol_se_path_phase(struct ol_sreq *r, const char *path, uint16_t step, bool stat)
{
    ol_se_phase_begin(r);
    for (unsigned p = 0; p < r->n; p++) {
        struct ol_sdrv *d = &r->d[p];
        if (d->err)
            continue;
        ol_se_drive_begin(d);
        d->step = step;
        if (stat)
            ol_se_statx(d, path);
        else
            ol_se_openat(d, path, O_RDONLY, 0);
    }
    ol_se_phase_started(r);
}

void ol_se_open_phase(struct ol_sreq *r, const char *path, uint16_t step)
{
    ol_se_path_phase(r, path, step, false);
}

void ol_se_statx_phase(struct ol_sreq *r, const char *path, uint16_t step)
{
    ol_se_path_phase(r, path, step, true);
}

void ol_se_drive_fail(struct ol_sdrv *d, int err, uint16_t close_step)
{
    if (!d->err)
        d->err = err;
    if (d->fd >= 0) {
        d->step = close_step;
        ol_se_close(d, d->fd);
        d->fd = -1;
        return;
    }
    ol_se_drive_end(d);
}

void ol_se_bucket_stat_end(struct ol_sdrv *d, int res)
{
    if (res == 0)
        d->ms = OL_SE_M_NONE;
    else if (res == -ENOENT || res == -ENOTDIR)
        d->ms = OL_SE_M_NOBUCKET;
    else
        d->err = res;
    ol_se_drive_end(d);
}

void ol_se_emit(struct ol_sreq *r, enum ol_store_ev type, int status)
{
    OL_ASSERT(r->in_use);
    struct ol_store_event ev = {.type = type, .status = status};
    r->cbdepth++;
    r->cb(r->ud, &ev);
    r->cbdepth--;
}

void ol_se_done(struct ol_sreq *r, int status)
{
    ol_store_cb cb = r->cb;
    void *ud = r->ud;
    /* the key's commit lock is held through the callback, so what the
     * caller records of the commit (the listing index) is ordered too */
    struct ol_store *s = r->c->s;
    bool locked = r->locked;
    unsigned slot = r->lock_slot, lset = r->rl_set;
    struct ol_store_lock lk = r->rlk;
    r->locked = false;
    ol_se_req_put(r);
    struct ol_store_event ev = {.type = OL_STORE_EV_DONE, .status = status};
    cb(ud, &ev);
    if (locked && s->locks.lock)
        s->locks.unlock(s->locks.ud, lset, &lk);
    else if (locked)
        ol_se_key_unlock_slot(s, slot);
}

/* ---- metadata ---------------------------------------------------------------------- */

void ol_se_meta_decode(struct ol_sreq *r, struct ol_sdrv *d)
{
    if (d->mlen >= r->c->s->meta_cap) {
        d->ms = OL_SE_M_ERR; /* larger than this store reads */
        return;
    }
    int rc = ol_meta_open(d->mbuf, d->mlen, &d->mf);
    if (rc == -EBADMSG) {
        d->ms = OL_SE_M_BAD;
        r->c->st.checksum_failures++;
        return;
    }
    if (rc < 0) {
        d->ms = OL_SE_M_ERR; /* a later format: not ours to read or overwrite */
        return;
    }
    if (d->mf.key.len != r->klen || memcmp(d->mf.key.p, r->key, r->klen) != 0) {
        d->ms = OL_SE_M_KEY;
        return;
    }
    int rc2 = r->has_vid ? ol_meta_find(&d->mf, r->want_vid, &d->v) : ol_meta_latest(&d->mf, &d->v);
    if (rc2 < 0)
        d->v.type = 0; /* no such version: d->v holds nothing */
    /* OTHER with d->v a delete marker: the version (the latest) is one */
    d->ms = rc2 >= 0 && d->v.type == OL_META_OBJECT ? OL_SE_M_OK : OL_SE_M_OTHER;
}

bool ol_se_same_version(const struct ol_meta_version *a, const struct ol_meta_version *b)
{
    return ol_meta_same_version(a, b);
}
