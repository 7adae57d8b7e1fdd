/*
 * admin_disks.c - GET /_openlake/disks: this node's drives and KV disk
 * tier as its filesystems see them (`openlake disk info`).
 *
 *   GET /_openlake/disks   signed like S3 requests (paths are an operator's
 *        business); one JSON object:
 *        {"node":ID|null, "cluster":NAME|null, "as_of":unix_seconds,
 *         "age_ms":N,
 *         "drives":[{"index","path","set","store","online","adopted",
 *                    "size_bytes","free_bytes","avail_bytes","error"}],
 *         "kv_disk":{"capacity_bytes",
 *                    "dirs":[{"path","size_bytes","avail_bytes",
 *                             "files":[{"name","bytes","allocated_bytes"}],
 *                             "error"}]}}
 *        "store" false: no object store on this node (mode kv; the data dir
 *        still holds its tokens); "online": the store opened the drive;
 *        "adopted": a blank drive the store adopted when this run started,
 *        whose set's objects the healer rebuilds on it (true until the
 *        next start, healed or not); sizes from statvfs (null when
 *        it failed, "error" says why); KV disk files: <dir>/kv-disk/
 *        shard-*.{dat,idx} (the main tier's, docs/kv-disk.md), their length
 *        and the blocks the filesystem gave them.
 *
 * Owns: the route, and a thread ("disks") that makes the answer: statvfs
 * and stat block on a drive that hangs, which a data core must never do.
 * The thread remakes it every OL_DISKS_EVERY_MS, and at once when a
 * request finds it older than a second (that request gets the one it
 * finds, with its age: the CLI asks again). The route copies it under the
 * mutex the thread holds only to swap it in.
 */
#include "daemon/daemon.h"

#include "base/log.h"
#include "store/engine.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>

#define OL_DISKS_EVERY_MS 5000
#define OL_DISKS_FRESH_MS 1000
#define OL_DISKS_FILES    256    /* KV disk files listed per dir, at most */
#define OL_DISKS_JOIN_MS  2000   /* the shutdown waits this long for the thread */

struct ol_disks {
    struct ol_daemon *d;
    pthread_t thr;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop, want;
    char *json;                  /* the answer, or NULL before the first */
    size_t len;
    int64_t made_ms;             /* monotonic */
    time_t as_of;
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* size, free and avail of path's filesystem into o, or nulls and "error". */
static void fs_sizes(json_t *o, const char *path)
{
    struct statvfs sv;
    if (statvfs(path, &sv) == 0) {
        json_object_set_new(o, "size_bytes", json_integer((json_int_t)(sv.f_blocks * sv.f_frsize)));
        json_object_set_new(o, "free_bytes", json_integer((json_int_t)(sv.f_bfree * sv.f_frsize)));
        json_object_set_new(o, "avail_bytes", json_integer((json_int_t)(sv.f_bavail * sv.f_frsize)));
        json_object_set_new(o, "error", json_null());
    } else {
        json_object_set_new(o, "size_bytes", json_null());
        json_object_set_new(o, "free_bytes", json_null());
        json_object_set_new(o, "avail_bytes", json_null());
        json_object_set_new(o, "error", json_string(strerror(errno)));
    }
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(json_string_value(json_object_get(*(json_t *const *)a, "name")),
                  json_string_value(json_object_get(*(json_t *const *)b, "name")));
}

/* The main KV disk tier's files in <dir>/kv-disk/, name order. */
static json_t *kv_files(const char *dir)
{
    char path[OL_CONFIG_PATH_LEN + 16];
    snprintf(path, sizeof path, "%s/kv-disk", dir);
    json_t *arr = json_array();
    DIR *dh = opendir(path);
    if (!dh)
        return arr;
    json_t *v[OL_DISKS_FILES];
    size_t n = 0;
    struct dirent *de;
    while (n < OL_DISKS_FILES && (de = readdir(dh))) {
        size_t l = strlen(de->d_name);
        if (strncmp(de->d_name, "shard-", 6) ||
            (l < 4 || (strcmp(de->d_name + l - 4, ".dat") && strcmp(de->d_name + l - 4, ".idx"))))
            continue;
        struct stat st;
        if (fstatat(dirfd(dh), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
            continue;
        v[n++] = json_pack("{s:s, s:I, s:I}", "name", de->d_name, "bytes",
                           (json_int_t)st.st_size, "allocated_bytes",
                           (json_int_t)st.st_blocks * 512);
    }
    closedir(dh);
    qsort(v, n, sizeof *v, cmp_name);
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, v[i]);
    return arr;
}

/* The answer as of now (blocking: the thread's). NULL: out of memory. */
static char *make(struct ol_daemon *d, size_t *len)
{
    const struct ol_config *c = &d->cfg;
    json_t *drives = json_array();
    unsigned per = d->store ? ol_store_drives_per_set(d->store) : 0;
    for (int i = 0; i < c->n_data_dirs; i++) {
        json_t *o = json_pack("{s:i, s:s}", "index", i, "path", c->data_dirs[i]);
        json_object_set_new(o, "set", d->store ? json_integer(i / (int)per) : json_null());
        json_object_set_new(o, "store", json_boolean(d->store != NULL));
        json_object_set_new(o, "online", d->store ? json_boolean(ol_store_drive_fd(d->store, (unsigned)i) >= 0)
                                                  : json_null());
        json_object_set_new(o, "adopted", json_boolean(d->store &&
                                                       ol_store_drive_adopted(d->store, (unsigned)i)));
        fs_sizes(o, c->data_dirs[i]);
        json_array_append_new(drives, o);
    }
    json_t *kvd = json_object();
    json_object_set_new(kvd, "capacity_bytes",
                        json_integer((json_int_t)(c->kv_disk.capacity_gb * (double)(1ull << 30))));
    json_t *dirs = json_array();
    if (c->kv_disk.capacity_gb > 0) {
        int n = c->kv_disk.n_dirs ? c->kv_disk.n_dirs : c->n_data_dirs;
        for (int i = 0; i < n; i++) {
            const char *p = c->kv_disk.n_dirs ? c->kv_disk.dirs[i] : c->data_dirs[i];
            json_t *o = json_pack("{s:s}", "path", p);
            fs_sizes(o, p);
            json_object_del(o, "free_bytes");
            json_object_set_new(o, "files", kv_files(p));
            json_array_append_new(dirs, o);
        }
    }
    json_object_set_new(kvd, "dirs", dirs);
    json_t *top = json_object();
    bool cl = c->cluster.name[0] != 0;
    json_object_set_new(top, "node", cl ? json_integer(c->self_id) : json_null());
    json_object_set_new(top, "cluster", cl ? json_string(c->cluster.name) : json_null());
    json_object_set_new(top, "as_of", json_integer((json_int_t)time(NULL)));
    json_object_set_new(top, "drives", drives);
    json_object_set_new(top, "kv_disk", kvd);
    char *s = json_dumps(top, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(top);
    *len = s ? strlen(s) : 0;
    return s;
}

static void *disks_main(void *arg)
{
    struct ol_disks *k = arg;
    pthread_setname_np(pthread_self(), "ol-disks");   /* SIGINT/SIGTERM blocked: main's mask */
    pthread_mutex_lock(&k->mu);
    while (!k->stop) {
        k->want = false;
        pthread_mutex_unlock(&k->mu);
        size_t len;
        char *s = make(k->d, &len);
        pthread_mutex_lock(&k->mu);
        if (s) {
            free(k->json);
            k->json = s;
            k->len = len;
            k->made_ms = mono_ms();
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += OL_DISKS_EVERY_MS / 1000;
        while (!k->stop && !k->want)
            if (pthread_cond_timedwait(&k->cv, &k->mu, &ts) == ETIMEDOUT)
                break;
    }
    pthread_mutex_unlock(&k->mu);
    return NULL;
}

int ol_admin_disks_start(struct ol_daemon *d)
{
    struct ol_disks *k = calloc(1, sizeof *k);
    if (!k)
        return -ENOMEM;
    k->d = d;
    pthread_mutex_init(&k->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&k->cv, &ca);
    pthread_condattr_destroy(&ca);
    int rc = pthread_create(&k->thr, NULL, disks_main, k);
    if (rc) {
        pthread_cond_destroy(&k->cv);
        pthread_mutex_destroy(&k->mu);
        free(k);
        return -rc;
    }
    atomic_store_explicit(&d->disks, k, memory_order_release);
    return 0;
}

void ol_admin_disks_stop(struct ol_daemon *d)
{
    struct ol_disks *k = atomic_load_explicit(&d->disks, memory_order_acquire);
    if (!k)
        return;
    pthread_mutex_lock(&k->mu);
    k->stop = true;
    pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->mu);
    /* A statvfs on a dead drive may never return (why the thread exists):
     * the shutdown does not wait for it past OL_DISKS_JOIN_MS; the thread
     * and its state are left to the process's exit. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += OL_DISKS_JOIN_MS / 1000;
    if (pthread_timedjoin_np(k->thr, NULL, &ts) != 0) {
        ol_warn("disks: a drive did not answer statvfs or stat for %d s: not waiting for it",
                OL_DISKS_JOIN_MS / 1000);
        pthread_detach(k->thr);
        atomic_store_explicit(&d->disks, NULL, memory_order_release);
        return;
    }
    atomic_store_explicit(&d->disks, NULL, memory_order_release);
    pthread_cond_destroy(&k->cv);
    pthread_mutex_destroy(&k->mu);
    free(k->json);
    free(k);
}

void ol_admin_disks_route(struct ol_core *core, ol_http_req *r, const char *path, size_t plen,
                          const char *q, size_t qlen)
{
    struct ol_daemon *d = core->d;
    if (!ol_admin_signed(core, r, path, plen, q, qlen))
        return;
    const struct ol_http_request *h = ol_http_req_head(r);
    struct ol_disks *k = atomic_load_explicit(&d->disks, memory_order_acquire);
    if (h->method_len != 3) {
        ol_http_resp_simple(r, 405, "text/plain", "method not allowed; use GET\n", 28);
        return;
    }
    if (!k) {
        ol_admin_json_error(r, 503, "SlowDown", "not serving yet");
        return;
    }
    char *body = NULL;
    size_t n = 0;
    pthread_mutex_lock(&k->mu);
    int64_t age = k->json ? mono_ms() - k->made_ms : -1;
    if (age < 0 || age > OL_DISKS_FRESH_MS) {
        k->want = true;
        pthread_cond_signal(&k->cv);
    }
    /* the thread's object, with "age_ms" added before its last brace */
    if (k->json && (body = malloc(k->len + 32))) {
        memcpy(body, k->json, k->len - 1);
        n = k->len - 1 + (size_t)snprintf(body + k->len - 1, 32, ",\"age_ms\":%lld}\n",
                                          (long long)age);
    }
    pthread_mutex_unlock(&k->mu);
    if (!body)
        ol_admin_json_error(r, 503, "SlowDown", age < 0 ? "not measured yet: ask again"
                                                        : "out of memory");
    else
        ol_http_resp_simple(r, 200, "application/json", body, n);
    free(body);
}
