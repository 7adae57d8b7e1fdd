/*
 * heal.c - the healer thread: on-read queue, walks (CLI, drive rebuild)
 * and the checksum scanner over ol_store_heal_object. See heal.h.
 *
 * Owns: the queue (a ring of fixed entries with a 64-bit hash per entry
 * for deduplication), the walk and scanner states, the counters; all
 * under one mutex that is never held across I/O. Directory listings are
 * blocking (opendir/readdir on the drives' directory fds), on this thread.
 */
#include "store/heal.h"

#include "base/log.h"
#include "store/format.h"
#include "store/layout.h"
#include "store/meta.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

struct hq_ent {
    uint64_t hash;
    char bucket[OL_LAYOUT_BUCKET_MAX + 1];
    char key[OL_LAYOUT_KEY_MAX + 1];
};

struct ol_healer {
    struct ol_store *s;
    struct ol_healer_params p;
    pthread_t thr;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop, started, paused;
    /* queue: ring of p.queue_size entries */
    struct hq_ent *q;
    unsigned qhead, qlen;
    struct hq_ent cur;          /* the entry being healed (worker only) */
    /* walk requested (walk_req) or running */
    bool walk_req, walk_rebuild_req;
    char req_bucket[OL_LAYOUT_BUCKET_MAX + 1], req_prefix[OL_LAYOUT_KEY_MAX + 1];
    uint8_t *rebuild_sets;      /* sets to walk for a rebuild (1 = yes), s->sets bytes */
    uint64_t next_scan_ns;      /* monotonic */
    struct ol_heal_stats st;
};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t ent_hash(const char *bucket, const char *key)
{
    return XXH3_64bits_withSeed(key, strlen(key), XXH3_64bits(bucket, strlen(bucket)));
}

/* ---- the queue ----------------------------------------------------------------------- */

static void enqueue_hook(void *ud, const char *bucket, const char *key)
{
    ol_healer_enqueue(ud, bucket, key);
}

void ol_healer_enqueue(struct ol_healer *h, const char *bucket, const char *key)
{
    size_t bl = strlen(bucket), kl = strlen(key);
    if (bl == 0 || bl > OL_LAYOUT_BUCKET_MAX || kl == 0 || kl > OL_LAYOUT_KEY_MAX)
        return;
    uint64_t hash = ent_hash(bucket, key);
    pthread_mutex_lock(&h->mu);
    for (unsigned i = 0; i < h->qlen; i++) {
        const struct hq_ent *e = &h->q[(h->qhead + i) % h->p.queue_size];
        if (e->hash == hash && !strcmp(e->bucket, bucket) && !strcmp(e->key, key)) {
            pthread_mutex_unlock(&h->mu);
            return; /* queued already */
        }
    }
    if (h->qlen == h->p.queue_size) {
        h->st.dropped++;
    } else {
        struct hq_ent *e = &h->q[(h->qhead + h->qlen) % h->p.queue_size];
        e->hash = hash;
        memcpy(e->bucket, bucket, bl + 1);
        memcpy(e->key, key, kl + 1);
        h->qlen++;
        h->st.queued++;
        pthread_cond_signal(&h->cv);
    }
    pthread_mutex_unlock(&h->mu);
}

/* ---- healing one object ------------------------------------------------------------------ */

enum { SRC_QUEUE, SRC_WALK, SRC_SCAN };

static int heal_one(struct ol_healer *h, const char *bucket, const char *key, int src)
{
    struct ol_heal_result r;
    int rc = ol_store_heal_object(h->s, bucket, key, 0, &r);
    bool failed = rc < 0 && rc != -ENOENT;
    if (failed)
        ol_warn("heal: %s/%s: %s", bucket, key, strerror(-rc));
    pthread_mutex_lock(&h->mu);
    if (r.drives_healed) {
        h->st.objects_healed++;
        h->st.shards_healed += r.shards_written;
        h->st.bytes_written += r.bytes_written;
    }
    h->st.failed += failed;
    h->st.dirs_removed += r.dirs_removed;
    if (src == SRC_WALK) {
        h->st.walk_scanned++;
        h->st.walk_healed += r.drives_healed > 0;
        h->st.walk_failed += failed;
        h->st.walk_bytes += r.bytes_written;
    } else if (src == SRC_SCAN) {
        h->st.scan_objects++;
        h->st.scan_bytes += r.bytes_verified;
    }
    pthread_mutex_unlock(&h->mu);
    return rc < 0 ? rc : (int)(r.bytes_verified > INT32_MAX ? INT32_MAX : r.bytes_verified);
}

/* Heals what is queued; false when the healer stops. */
static bool serve_queue(struct ol_healer *h)
{
    for (;;) {
        pthread_mutex_lock(&h->mu);
        if (h->stop || h->qlen == 0) {
            bool stop = h->stop;
            pthread_mutex_unlock(&h->mu);
            return !stop;
        }
        h->cur = h->q[h->qhead];
        h->qhead = (h->qhead + 1) % h->p.queue_size;
        h->qlen--;
        pthread_mutex_unlock(&h->mu);
        heal_one(h, h->cur.bucket, h->cur.key, SRC_QUEUE);
    }
}

/* ---- walks ----------------------------------------------------------------------------------- */

struct names {
    char **v;
    size_t n, cap;
};

static int names_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void names_free(struct names *ns)
{
    for (size_t i = 0; i < ns->n; i++)
        free(ns->v[i]);
    free(ns->v);
    memset(ns, 0, sizeof *ns);
}

/* Adds the entries of dir (relative to dfd) that are directories' names
 * (no dot files) to ns. */
static void names_add_dir(struct names *ns, int dfd, const char *dir)
{
    int fd = openat(dfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (ns->n == ns->cap) {
            size_t cap = ns->cap ? ns->cap * 2 : 64;
            char **v = realloc(ns->v, cap * sizeof *v);
            if (!v)
                break;
            ns->v = v;
            ns->cap = cap;
        }
        char *copy = strdup(e->d_name);
        if (!copy)
            break;
        ns->v[ns->n++] = copy;
    }
    closedir(d);
}

/* Sorts and removes duplicates. */
static void names_unique(struct names *ns)
{
    if (ns->n == 0)
        return;
    qsort(ns->v, ns->n, sizeof *ns->v, names_cmp);
    size_t o = 1;
    for (size_t i = 1; i < ns->n; i++) {
        if (!strcmp(ns->v[i], ns->v[o - 1]))
            free(ns->v[i]);
        else
            ns->v[o++] = ns->v[i];
    }
    ns->n = o;
}

/* The union of dir over the drives of set. */
static void set_list(struct ol_healer *h, unsigned set, const char *dir, struct names *ns)
{
    unsigned dps = ol_store_drives_per_set(h->s);
    for (unsigned p = 0; p < dps; p++) {
        int dfd = ol_store_drive_fd(h->s, set * dps + p);
        if (dfd >= 0)
            names_add_dir(ns, dfd, dir);
    }
    names_unique(ns);
}

/* The key of the object whose metadata is <dir>/meta on a drive of set
 * (the first one with a valid file). */
static bool read_key(struct ol_healer *h, unsigned set, const char *dir, char *key)
{
    unsigned dps = ol_store_drives_per_set(h->s);
    char path[1024];
    snprintf(path, sizeof path, "%s/meta", dir);
    bool ok = false;
    for (unsigned p = 0; p < dps && !ok; p++) {
        int dfd = ol_store_drive_fd(h->s, set * dps + p);
        if (dfd < 0)
            continue;
        int fd = openat(dfd, path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        struct stat st;
        uint8_t *buf = NULL;
        if (fstat(fd, &st) == 0 && st.st_size > 0 && st.st_size <= OL_META_MAX_FILE &&
            (buf = malloc((size_t)st.st_size)) &&
            pread(fd, buf, (size_t)st.st_size, 0) == st.st_size) {
            struct ol_meta_file f;
            if (ol_meta_open(buf, (size_t)st.st_size, &f) == 0 && f.key.len <= OL_LAYOUT_KEY_MAX &&
                !memchr(f.key.p, 0, f.key.len)) {
                memcpy(key, f.key.p, f.key.len);
                key[f.key.len] = 0;
                ok = true;
            }
        }
        free(buf);
        close(fd);
    }
    return ok;
}

struct walk {
    int src;                    /* SRC_WALK or SRC_SCAN */
    const char *bucket, *prefix;/* "" = all */
    const uint8_t *sets;        /* NULL = every set */
    uint64_t t0, verified;      /* scanner: pass start, bytes verified */
    bool found;                 /* OUT: the bucket (or any bucket) was listed */
};

/* Between two objects: the queue, and the scanner's pace. False = stop. */
static bool walk_pause(struct ol_healer *h, struct walk *w)
{
    if (!serve_queue(h))
        return false;
    if (w->src != SRC_SCAN)
        return true;
    for (;;) {
        pthread_mutex_lock(&h->mu);
        bool leave = h->stop || h->walk_req;
        pthread_mutex_unlock(&h->mu);
        if (leave)
            return false; /* a walk asked for: the pass starts again later */
        uint64_t due = w->t0 + (uint64_t)((double)w->verified * 1e9 / (double)h->p.scan_rate);
        uint64_t now = mono_ns();
        if (now >= due)
            return true;
        uint64_t wait = due - now > 100000000ull ? 100000000ull : due - now;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)wait};
        nanosleep(&ts, NULL);
        if (!serve_queue(h))
            return false;
    }
}

/* A rebuild gives the adopted drives of set the bucket's directories, so a
 * bucket without objects is whole on them too. */
static void adopt_bucket(struct ol_healer *h, unsigned set, const char *bucket, const char *objects)
{
    unsigned dps = ol_store_drives_per_set(h->s);
    char bdir[600];
    snprintf(bdir, sizeof bdir, OL_FORMAT_DIR "/buckets/%s", bucket);
    for (unsigned p = 0; p < dps; p++) {
        unsigned i = set * dps + p;
        int dfd = ol_store_drive_fd(h->s, i);
        if (dfd < 0 || !ol_store_drive_adopted(h->s, i))
            continue;
        bool made = mkdirat(dfd, bdir, 0700) == 0; /* as a PUT makes them */
        made |= mkdirat(dfd, objects, 0700) == 0;
        const char *parents[] = {OL_FORMAT_DIR "/buckets", bdir};
        for (unsigned j = 0; made && j < 2; j++) {
            int fd = openat(dfd, parents[j], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (fd >= 0) {
                fsync(fd);
                close(fd);
            }
        }
    }
}

/* Walks the objects; false when stopped. */
static bool walk_run(struct ol_healer *h, struct walk *w)
{
    struct ol_store *s = h->s;
    unsigned sets = ol_store_sets(s);
    size_t plen = strlen(w->prefix);
    char *key = malloc(OL_LAYOUT_KEY_MAX + 1);
    if (!key)
        return true;
    bool go = true;
    for (unsigned set = 0; set < sets && go; set++) {
        if (w->sets && !w->sets[set])
            continue;
        struct names bk = {0};
        set_list(h, set, OL_FORMAT_DIR "/buckets", &bk);
        for (size_t b = 0; b < bk.n && go; b++) {
            if (w->bucket[0] && strcmp(bk.v[b], w->bucket))
                continue;
            w->found = true;
            char dir[600];
            snprintf(dir, sizeof dir, OL_FORMAT_DIR "/buckets/%s/objects", bk.v[b]);
            if (w->sets)
                adopt_bucket(h, set, bk.v[b], dir);
            struct names ab = {0};
            set_list(h, set, dir, &ab);
            for (size_t a = 0; a < ab.n && go; a++) {
                char adir[700];
                snprintf(adir, sizeof adir, "%s/%s", dir, ab.v[a]);
                struct names ob = {0};
                set_list(h, set, adir, &ob);
                for (size_t o = 0; o < ob.n && go; o++) {
                    char odir[800];
                    snprintf(odir, sizeof odir, "%s/%s", adir, ob.v[o]);
                    if (!read_key(h, set, odir, key))
                        continue; /* no readable metadata on any drive: nothing to heal from */
                    if (plen && strncmp(key, w->prefix, plen))
                        continue;
                    int rc = heal_one(h, bk.v[b], key, w->src);
                    if (rc > 0)
                        w->verified += (uint64_t)rc;
                    go = walk_pause(h, w);
                }
                names_free(&ob);
            }
            names_free(&ab);
        }
        names_free(&bk);
    }
    free(key);
    return go;
}

static void walk_manual(struct ol_healer *h)
{
    char bucket[sizeof h->req_bucket], prefix[sizeof h->req_prefix];
    pthread_mutex_lock(&h->mu);
    bool rebuild = h->walk_rebuild_req;
    memcpy(bucket, h->req_bucket, sizeof bucket);
    memcpy(prefix, h->req_prefix, sizeof prefix);
    h->walk_req = false;
    h->st.walk_running = true;
    h->st.walk_rebuild = rebuild;
    h->st.walk_scanned = h->st.walk_healed = h->st.walk_failed = h->st.walk_bytes = 0;
    h->st.walk_no_bucket = false;
    h->st.walk_started_ns = real_ns();
    h->st.walk_finished_ns = 0;
    snprintf(h->st.walk_bucket, sizeof h->st.walk_bucket, "%s", bucket);
    snprintf(h->st.walk_prefix, sizeof h->st.walk_prefix, "%s", prefix);
    uint64_t id = h->st.walk_id;
    pthread_mutex_unlock(&h->mu);
    ol_info("heal: walk %llu started (%s%s%s%s)", (unsigned long long)id,
            rebuild ? "rebuild of adopted drives" : "bucket ", rebuild ? "" : bucket[0] ? bucket : "*",
            prefix[0] ? ", prefix " : "", prefix);
    struct walk w = {.src = SRC_WALK, .bucket = bucket, .prefix = prefix,
                     .sets = rebuild ? h->rebuild_sets : NULL};
    walk_run(h, &w);
    pthread_mutex_lock(&h->mu);
    h->st.walk_running = false;
    h->st.walk_no_bucket = bucket[0] && !w.found;
    h->st.walk_finished_ns = real_ns();
    struct ol_heal_stats st = h->st;
    pthread_mutex_unlock(&h->mu);
    ol_info("heal: walk %llu done: %llu objects, %llu healed, %llu failed, %llu bytes written",
            (unsigned long long)id, (unsigned long long)st.walk_scanned,
            (unsigned long long)st.walk_healed, (unsigned long long)st.walk_failed,
            (unsigned long long)st.walk_bytes);
}

static void *healer_main(void *arg)
{
    struct ol_healer *h = arg;
    pthread_mutex_lock(&h->mu);
    while (h->paused && !h->stop)
        pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
    for (;;) {
        if (!serve_queue(h))
            break;
        pthread_mutex_lock(&h->mu);
        if (h->stop) {
            pthread_mutex_unlock(&h->mu);
            break;
        }
        if (h->walk_req) {
            pthread_mutex_unlock(&h->mu);
            walk_manual(h);
            continue;
        }
        uint64_t now = mono_ns();
        if (h->p.scan_rate && now >= h->next_scan_ns) {
            pthread_mutex_unlock(&h->mu);
            struct walk w = {.src = SRC_SCAN, .bucket = "", .prefix = "", .t0 = mono_ns()};
            bool whole = walk_run(h, &w);
            pthread_mutex_lock(&h->mu);
            if (whole)
                h->st.scan_passes++;
            h->next_scan_ns = mono_ns() + h->p.scan_interval_s * 1000000000ull;
            pthread_mutex_unlock(&h->mu);
            continue;
        }
        if (h->qlen == 0 && !h->walk_req) {
            uint64_t wait = h->p.scan_rate ? h->next_scan_ns - now : 3600ull * 1000000000ull;
            if (wait > 1000000000ull)
                wait = 1000000000ull;
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            uint64_t t = (uint64_t)ts.tv_nsec + wait;
            ts.tv_sec += (time_t)(t / 1000000000ull);
            ts.tv_nsec = (long)(t % 1000000000ull);
            pthread_cond_timedwait(&h->cv, &h->mu, &ts);
        }
        pthread_mutex_unlock(&h->mu);
    }
    return NULL;
}

/* ---- API ---------------------------------------------------------------------------------------- */

int64_t ol_healer_walk(struct ol_healer *h, const char *bucket, const char *prefix)
{
    bucket = bucket ? bucket : "";
    prefix = prefix ? prefix : "";
    if (strlen(bucket) > OL_LAYOUT_BUCKET_MAX || strlen(prefix) > OL_LAYOUT_KEY_MAX)
        return -EINVAL;
    pthread_mutex_lock(&h->mu);
    if (h->walk_req || h->st.walk_running) {
        pthread_mutex_unlock(&h->mu);
        return -EBUSY;
    }
    h->walk_req = true;
    h->walk_rebuild_req = false;
    snprintf(h->req_bucket, sizeof h->req_bucket, "%s", bucket);
    snprintf(h->req_prefix, sizeof h->req_prefix, "%s", prefix);
    int64_t id = (int64_t)++h->st.walk_id;
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
    return id;
}

void ol_healer_stats(struct ol_healer *h, struct ol_heal_stats *out)
{
    pthread_mutex_lock(&h->mu);
    *out = h->st;
    out->queue_len = h->qlen;
    /* a walk asked for but not yet begun reads as running, from zero */
    if (h->walk_req) {
        out->walk_running = true;
        out->walk_rebuild = h->walk_rebuild_req;
        out->walk_scanned = out->walk_healed = out->walk_failed = out->walk_bytes = 0;
        out->walk_finished_ns = 0;
        out->walk_no_bucket = false;
    }
    pthread_mutex_unlock(&h->mu);
}

int ol_healer_start(struct ol_store *s, const struct ol_healer_params *p, struct ol_healer **out)
{
    *out = NULL;
    if (p->queue_size > OL_HEAL_QUEUE_MAX)
        return -EINVAL;
    struct ol_healer *h = calloc(1, sizeof *h);
    if (!h)
        return -ENOMEM;
    h->s = s;
    h->p = *p;
    h->paused = p->paused;
    if (!h->p.queue_size)
        h->p.queue_size = OL_HEAL_QUEUE_DEFAULT;
    h->q = calloc(h->p.queue_size, sizeof *h->q);
    h->rebuild_sets = calloc(ol_store_sets(s), 1);
    if (!h->q || !h->rebuild_sets) {
        free(h->q);
        free(h->rebuild_sets);
        free(h);
        return -ENOMEM;
    }
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    h->next_scan_ns = mono_ns() + h->p.scan_interval_s * 1000000000ull;
    unsigned dps = ol_store_drives_per_set(s), adopted = 0;
    for (unsigned i = 0; p->rebuild && i < ol_store_drive_count(s); i++)
        if (ol_store_drive_adopted(s, i)) {
            h->rebuild_sets[i / dps] = 1;
            adopted++;
        }
    if (adopted) {
        h->walk_req = true;
        h->walk_rebuild_req = true;
        h->st.walk_id = 1;
    }
    int rc = pthread_create(&h->thr, NULL, healer_main, h);
    if (rc != 0) {
        pthread_cond_destroy(&h->cv);
        pthread_mutex_destroy(&h->mu);
        free(h->q);
        free(h->rebuild_sets);
        free(h);
        return -rc;
    }
    h->started = true;
    ol_store_set_heal_hook(s, enqueue_hook, h);
    *out = h;
    return 0;
}

void ol_healer_resume(struct ol_healer *h)
{
    pthread_mutex_lock(&h->mu);
    h->paused = false;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

void ol_healer_stop(struct ol_healer *h)
{
    if (!h)
        return;
    ol_store_set_heal_hook(h->s, NULL, NULL);
    pthread_mutex_lock(&h->mu);
    h->stop = true;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    if (h->started)
        pthread_join(h->thr, NULL);
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    free(h->q);
    free(h->rebuild_sets);
    free(h);
}
