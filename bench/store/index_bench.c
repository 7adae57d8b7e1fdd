/*
 * index_bench.c - the object store's ordered key index (src/store/index*.c)
 * on one core: insert, get and remove rates, memory per key, S3 listing
 * (first page, whole listing paged through next markers as a client does,
 * with and without a delimiter, and the plain twin that steps through
 * CommonPrefix groups key by key), and the durable side: group-commit
 * flushes, log replay, checkpoint and snapshot load.
 *
 *   index_bench mem dirs|flat N      in memory; one JSON object on stdout
 *   index_bench build DIR N          a fresh index in DIR: N puts in random
 *                                    order, a flush every 1000, then 200
 *                                    single-put flushes; no checkpoint
 *   index_bench open DIR             open (log replay), checkpoint, close,
 *                                    open again (snapshot load)
 *
 * Key sets: "dirs" = dir%04u/file%06u.bin, 2000 directories of N/2000
 * files (22 bytes); "flat" = random [a-z0-9] keys of 20..60 bytes (40 on
 * average), no '/'. Memory per key is the resident-set growth while the
 * keys go in (keys themselves generated before), and the tree's own count
 * of bytes asked from malloc. Times are CLOCK_MONOTONIC.
 */
#include "store/index.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t s_rng = 0x853c49e6748fea9bull;
static uint64_t rnd(void)
{
    s_rng ^= s_rng << 13;
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return s_rng;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long rss_bytes(void)
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return rss * sysconf(_SC_PAGESIZE);
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "index_bench: %s: %s\n", what, strerror(-rc));
    exit(1);
}

/* ---- keys ------------------------------------------------------------------- */

struct keys {
    char *buf;
    uint32_t *off;
    uint16_t *len;
    size_t n;
};

static void keys_make(struct keys *k, const char *kind, size_t n)
{
    k->buf = malloc(n * 61);
    k->off = malloc(n * sizeof *k->off);
    k->len = malloc(n * sizeof *k->len);
    k->n = n;
    size_t at = 0, per = n / 2000 ? n / 2000 : 1;
    for (size_t i = 0; i < n; i++) {
        char *p = k->buf + at;
        size_t len;
        if (strcmp(kind, "dirs") == 0) {
            len = (size_t)sprintf(p, "dir%04u/file%06u.bin", (unsigned)(i / per), (unsigned)(i % per));
        } else {
            len = 20 + rnd() % 41;
            for (size_t j = 0; j < len; j++)
                p[j] = "abcdefghijklmnopqrstuvwxyz0123456789"[rnd() % 36];
        }
        k->off[i] = (uint32_t)at;
        k->len[i] = (uint16_t)len;
        at += len;
    }
}

static void keys_shuffle(struct keys *k)
{
    for (size_t i = k->n; i > 1; i--) {
        size_t j = rnd() % i;
        uint32_t o = k->off[i - 1];
        uint16_t l = k->len[i - 1];
        k->off[i - 1] = k->off[j];
        k->len[i - 1] = k->len[j];
        k->off[j] = o;
        k->len[j] = l;
    }
}

static const struct keys *s_sort;
static int key_cmp(const void *a, const void *b)
{
    size_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    const struct keys *k = s_sort;
    size_t m = k->len[i] < k->len[j] ? k->len[i] : k->len[j];
    int c = memcmp(k->buf + k->off[i], k->buf + k->off[j], m);
    return c ? c : (k->len[i] > k->len[j]) - (k->len[i] < k->len[j]);
}

/* Puts the keys in byte order. */
static void keys_sort(struct keys *k)
{
    uint32_t *ord = malloc(k->n * sizeof *ord), *off = malloc(k->n * sizeof *off);
    uint16_t *len = malloc(k->n * sizeof *len);
    for (size_t i = 0; i < k->n; i++)
        ord[i] = (uint32_t)i;
    s_sort = k;
    qsort(ord, k->n, sizeof *ord, key_cmp);
    for (size_t i = 0; i < k->n; i++) {
        off[i] = k->off[ord[i]];
        len[i] = k->len[ord[i]];
    }
    free(k->off);
    free(k->len);
    free(ord);
    k->off = off;
    k->len = len;
}

static struct ol_index_rec rec_of(size_t i)
{
    struct ol_index_rec r;
    memset(&r, 0, sizeof r);
    r.size = i * 4096 + 17;
    r.mtime_ns = 1700000000000000000ull + i;
    memcpy(r.etag, &r.size, 8);
    memcpy(r.etag + 8, &r.mtime_ns, 8);
    return r;
}

/* ---- listing ------------------------------------------------------------------ */

struct sink {
    uint64_t entries, bytes;
};

static int sink_fn(void *arg, const uint8_t *name, size_t len, const struct ol_index_rec *rec)
{
    struct sink *s = arg;
    s->entries++;
    s->bytes += len + name[len - 1] + (rec ? rec->size & 1 : 0);
    return 0;
}

typedef int (*list_fn)(const struct ol_index *, const struct ol_index_list_req *, ol_index_list_fn, void *,
                       struct ol_index_list_out *);

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The first page, reps times: median and max ms. */
static void first_page(const struct ol_index *idx, list_fn fn, const char *prefix, const char *delim,
                       int reps, double *med, double *max, uint64_t *entries)
{
    double t[256];
    struct ol_index_list_req q = {prefix, strlen(prefix), delim, strlen(delim), NULL, 0, 1000, false};
    for (int r = 0; r < reps; r++) {
        struct sink s = {0};
        struct ol_index_list_out o;
        double t0 = now();
        fn(idx, &q, sink_fn, &s, &o);
        t[r] = (now() - t0) * 1e3;
        *entries = s.entries;
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_double);
    *med = t[reps / 2];
    *max = t[reps - 1];
}

/* Every page of 1000, each starting at the previous next marker. */
static double full_listing(const struct ol_index *idx, const char *prefix, const char *delim,
                           uint64_t *pages, uint64_t *entries)
{
    uint8_t mark[OL_INDEX_KEY_MAX];
    struct ol_index_list_req q = {prefix, strlen(prefix), delim, strlen(delim), mark, 0, 1000, false};
    struct ol_index_list_out o;
    struct sink s = {0};
    *pages = 0;
    double t0 = now();
    do {
        ol_index_list(idx, &q, sink_fn, &s, &o);
        memcpy(mark, o.next, o.next_len);
        q.start_len = o.next_len;
        ++*pages;
    } while (o.truncated);
    *entries = s.entries;
    return now() - t0;
}

static int collect_cp(void *arg, const uint8_t *name, size_t len, const struct ol_index_rec *rec)
{
    struct {
        uint8_t *buf;
        uint16_t *len;
        size_t n, cap;
    } *c = arg;
    if (rec)
        return 0;
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 1024;
        c->buf = realloc(c->buf, c->cap * OL_INDEX_KEY_MAX);
        c->len = realloc(c->len, c->cap * sizeof *c->len);
    }
    memcpy(c->buf + c->n * OL_INDEX_KEY_MAX, name, len);
    c->len[c->n++] = (uint16_t)len;
    return 0;
}

/* The folder walk: root listing with "/" (every page), then every folder
 * listed with "/" (every page). Returns seconds. */
static double folder_walk(const struct ol_index *idx, uint64_t *requests, uint64_t *entries)
{
    struct {
        uint8_t *buf;
        uint16_t *len;
        size_t n, cap;
    } c = {0};
    uint8_t mark[OL_INDEX_KEY_MAX];
    struct ol_index_list_out o;
    struct sink s = {0};
    *requests = 0;
    double t0 = now();
    struct ol_index_list_req q = {"", 0, "/", 1, mark, 0, 1000, false};
    do {
        ol_index_list(idx, &q, collect_cp, &c, &o);
        memcpy(mark, o.next, o.next_len);
        q.start_len = o.next_len;
        ++*requests;
    } while (o.truncated);
    for (size_t i = 0; i < c.n; i++) {
        struct ol_index_list_req f = {c.buf + i * OL_INDEX_KEY_MAX, c.len[i], "/", 1, mark, 0, 1000, false};
        do {
            ol_index_list(idx, &f, sink_fn, &s, &o);
            memcpy(mark, o.next, o.next_len);
            f.start_len = o.next_len;
            ++*requests;
        } while (o.truncated);
    }
    double t = now() - t0;
    *entries = s.entries + c.n;
    free(c.buf);
    free(c.len);
    return t;
}

/* ---- modes ---------------------------------------------------------------------- */

static int mode_mem(const char *kind, size_t n)
{
    struct keys k;
    keys_make(&k, kind, n);
    keys_shuffle(&k);
    malloc_trim(0);
    long rss0 = rss_bytes();
    struct ol_index *idx;
    int rc = ol_index_create_empty(NULL, &idx);
    if (rc < 0)
        die("create", rc);
    double t0 = now();
    for (size_t i = 0; i < n; i++)
        if ((rc = ol_index_put(idx, k.buf + k.off[i], k.len[i], &(struct ol_index_rec){.size = i})) < 0)
            die("put", rc);
    double t_ins = now() - t0;
    long rss1 = rss_bytes();
    struct ol_index_stats st;
    ol_index_stats(idx, &st);
    if (st.keys != n)
        die("key count", -EINVAL);
    double key_bytes = 0;
    for (size_t i = 0; i < n; i++)
        key_bytes += k.len[i];

    t0 = now();
    uint64_t found = 0;
    for (size_t i = 0; i < n; i++) {
        struct ol_index_rec r;
        found += ol_index_get(idx, k.buf + k.off[i], k.len[i], &r) == 0;
    }
    double t_get = now() - t0;
    if (found != n)
        die("get", -ENOENT);

    printf("{\"keys\":\"%s\",\"n\":%zu,\"avg_key_bytes\":%.1f,", kind, n, key_bytes / (double)n);
    printf("\"insert_random_keys_per_s\":%.0f,\"get_random_keys_per_s\":%.0f,", n / t_ins, n / t_get);
    printf("\"rss_bytes_per_key\":%.1f,\"tree_bytes_per_key\":%.1f,\"leaves\":%llu,\"height\":%u,",
           (double)(rss1 - rss0) / (double)n, (double)st.mem_bytes / (double)n, (unsigned long long)st.leaves,
           st.height);

    double med, max;
    uint64_t ent, pages;
    first_page(idx, ol_index_list, "", "", 101, &med, &max, &ent);
    printf("\"first_page_ms\":%.4f,\"first_page_max_ms\":%.4f,\"first_page_entries\":%llu,", med, max,
           (unsigned long long)ent);
    first_page(idx, ol_index_list, "", "/", 101, &med, &max, &ent);
    printf("\"first_page_delim_ms\":%.4f,\"first_page_delim_max_ms\":%.4f,\"first_page_delim_entries\":%llu,",
           med, max, (unsigned long long)ent);
    first_page(idx, ol_index_list_ref, "", "/", 5, &med, &max, &ent);
    printf("\"first_page_delim_ref_ms\":%.3f,", med);
    double t = full_listing(idx, "", "", &pages, &ent);
    if (ent != n)
        die("full listing", -EINVAL);
    printf("\"full_s\":%.4f,\"full_pages\":%llu,", t, (unsigned long long)pages);
    t = full_listing(idx, "", "/", &pages, &ent);
    printf("\"full_delim_s\":%.4f,\"full_delim_pages\":%llu,\"full_delim_entries\":%llu,", t,
           (unsigned long long)pages, (unsigned long long)ent);
    if (strcmp(kind, "dirs") == 0) {
        uint64_t reqs;
        t = folder_walk(idx, &reqs, &ent);
        printf("\"folder_walk_s\":%.4f,\"folder_walk_requests\":%llu,\"folder_walk_entries\":%llu,", t,
               (unsigned long long)reqs, (unsigned long long)ent);
    }

    t0 = now();
    for (size_t i = 0; i < n; i++)
        if ((rc = ol_index_remove(idx, k.buf + k.off[i], k.len[i])) < 0)
            die("remove", rc);
    double t_rm = now() - t0;
    ol_index_close(idx);

    /* In key order (a snapshot load, a sequential writer). */
    keys_sort(&k);
    struct keys s = k;
    rc = ol_index_create_empty(NULL, &idx);
    if (rc < 0)
        die("create", rc);
    t0 = now();
    for (size_t i = 0; i < n; i++)
        ol_index_put(idx, s.buf + s.off[i], s.len[i], &(struct ol_index_rec){.size = i});
    double t_seq = now() - t0;
    ol_index_stats(idx, &st);
    ol_index_close(idx);
    printf("\"remove_random_keys_per_s\":%.0f,\"insert_sorted_keys_per_s\":%.0f,\"sorted_tree_bytes_per_key\":%.1f}\n",
           n / t_rm, n / t_seq, (double)st.mem_bytes / (double)n);
    return 0;
}

static int mode_build(const char *dir, size_t n)
{
    struct keys k;
    keys_make(&k, "dirs", n);
    keys_shuffle(&k);
    struct ol_index *idx;
    int rc = ol_index_create_empty(dir, &idx);
    if (rc < 0 || (rc = ol_index_checkpoint(idx)) < 0)
        die("create", rc);
    double t0 = now(), tf = 0;
    unsigned flushes = 0;
    for (size_t i = 0; i < n; i++) {
        struct ol_index_rec r = rec_of(i);
        if ((rc = ol_index_put(idx, k.buf + k.off[i], k.len[i], &r)) < 0)
            die("put", rc);
        if (i % 1000 == 999) {
            double f0 = now();
            if ((rc = ol_index_flush(idx)) < 0)
                die("flush", rc);
            tf += now() - f0;
            flushes++;
        }
    }
    if ((rc = ol_index_flush(idx)) < 0)
        die("flush", rc);
    double t_build = now() - t0;
    double lat[200];
    for (int i = 0; i < 200; i++) {
        char key[32];
        int len = sprintf(key, "single/%06d", i);
        struct ol_index_rec r = rec_of((size_t)i);
        double f0 = now();
        ol_index_put(idx, key, (size_t)len, &r);
        if ((rc = ol_index_flush(idx)) < 0)
            die("flush", rc);
        lat[i] = (now() - f0) * 1e6;
    }
    qsort(lat, 200, sizeof lat[0], cmp_double);
    struct ol_index_stats st;
    ol_index_stats(idx, &st);
    ol_index_close(idx);
    printf("{\"n\":%zu,\"put_flush1000_keys_per_s\":%.0f,\"flush_1000_ms\":%.3f,\"flush_1_us\":%.1f,"
           "\"flush_1_p99_us\":%.1f,\"log_bytes\":%llu}\n",
           n, n / t_build, tf / flushes * 1e3, lat[100], lat[198], (unsigned long long)st.log_bytes);
    return 0;
}

static int mode_open(const char *dir)
{
    malloc_trim(0);
    long rss0 = rss_bytes();
    struct ol_index *idx;
    struct ol_index_open_info info;
    double t0 = now();
    int rc = ol_index_open(dir, &idx, &info);
    if (rc < 0)
        die("open", rc);
    double t_replay = now() - t0;
    long rss1 = rss_bytes();
    t0 = now();
    if ((rc = ol_index_checkpoint(idx)) < 0)
        die("checkpoint", rc);
    double t_ckpt = now() - t0;
    ol_index_close(idx);
    char path[4096];
    snprintf(path, sizeof path, "%s/snapshot", dir);
    FILE *f = fopen(path, "rb");
    long snap = 0;
    if (f) {
        fseek(f, 0, SEEK_END);
        snap = ftell(f);
        fclose(f);
    }
    malloc_trim(0);
    t0 = now();
    struct ol_index_open_info info2;
    if ((rc = ol_index_open(dir, &idx, &info2)) < 0)
        die("reopen", rc);
    double t_load = now() - t0;
    ol_index_close(idx);
    printf("{\"keys\":%llu,\"log_records\":%llu,\"replay_s\":%.3f,\"replay_rss_bytes_per_key\":%.1f,"
           "\"checkpoint_s\":%.3f,\"snapshot_bytes\":%ld,\"snapshot_load_s\":%.3f}\n",
           (unsigned long long)info.keys, (unsigned long long)info.log_records, t_replay,
           (double)(rss1 - rss0) / (double)info.keys, t_ckpt, snap, t_load);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "mem") == 0)
        return mode_mem(argv[2], strtoul(argv[3], NULL, 10));
    if (argc == 4 && strcmp(argv[1], "build") == 0)
        return mode_build(argv[2], strtoul(argv[3], NULL, 10));
    if (argc == 3 && strcmp(argv[1], "open") == 0)
        return mode_open(argv[2]);
    fprintf(stderr, "usage: index_bench mem dirs|flat N | build DIR N | open DIR\n");
    return 2;
}
