/*
 * populate.c - see populate.h.
 */
#include "kv/populate.h"

#include "base/assert.h"
#include "base/log.h"
#include "kv/service.h"
#include "kv/slab.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* 8 MiB of data pages a range: about 3 ms of kernel work on the benchmark
 * machine, so a stop waits little and the window mapping stays small. */
#define OL_POP_CHUNK_PAGES 4

struct ol_kv_populate {
    pthread_t thread;
    atomic_int stop;
    struct ol_kv_service *svc;
};

int ol_kv_pop_range(const struct ol_kv_pop_geom *g, uint64_t k, uint64_t *off, uint64_t *len)
{
    OL_ASSERT(g->nshards > 0 && g->chunk_pages > 0 && g->data_off % OL_KV_PAGE == 0);
    uint64_t chunk = (uint64_t)g->chunk_pages * OL_KV_PAGE;
    uint64_t nhead = (g->data_off + chunk - 1) / chunk;
    if (k < nhead) {
        *off = k * chunk;
        *len = g->data_off - *off < chunk ? g->data_off - *off : chunk;
        return 1;
    }
    k -= nhead;
    uint64_t round = k / g->nshards;
    uint32_t i = (uint32_t)(k % g->nshards);
    uint64_t longest = ((uint64_t)g->npages + g->nshards - 1) / g->nshards;
    if (round * g->chunk_pages >= longest)
        return 0;
    uint64_t first = ol_kv_shard_first_page(g->npages, i, g->nshards);
    uint64_t end = ol_kv_shard_first_page(g->npages, i + 1, g->nshards);
    uint64_t p = first + round * g->chunk_pages, q = p + g->chunk_pages;
    if (p > end)
        p = end;
    if (q > end)
        q = end;
    *off = g->data_off + p * OL_KV_PAGE;
    *len = (q - p) * OL_KV_PAGE;
    return 1;
}

static double ol_pop_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A small file under root into buf (ol_kv_read_small); 0, or -1. */
static int ol_pop_read(const char *root, const char *path, char *buf, size_t len)
{
    char full[1024];
    if ((size_t)snprintf(full, sizeof full, "%s%s", root, path) >= sizeof full)
        return -1;
    return ol_kv_read_small(full, buf, len) ? 0 : -1;
}

/* The number a file holds; "max" (v2's no limit) as INT64_MAX; -1 if none. */
static int64_t ol_pop_num(const char *root, const char *path)
{
    char b[64];
    if (ol_pop_read(root, path, b, sizeof b) < 0)
        return -1;
    if (!strncmp(b, "max", 3))
        return INT64_MAX;
    char *end;
    unsigned long long v = strtoull(b, &end, 10);
    return end == b ? -1 : v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

int64_t ol_kv_pop_room(const char *root)
{
    int64_t room = -1;
    char b[4096];
    if (ol_pop_read(root, "/proc/meminfo", b, sizeof b) == 0) {
        const char *m = strstr(b, "MemAvailable:");
        unsigned long long kb;
        if (m && sscanf(m + 13, "%llu", &kb) == 1)
            room = kb > INT64_MAX / 1024 ? INT64_MAX : (int64_t)kb * 1024;
    }
    /* our cgroup and each above it: v2 where its controllers file is at
     * the mount's root, else v1's memory hierarchy */
    char t[8];
    int v2 = ol_pop_read(root, "/sys/fs/cgroup/cgroup.controllers", t, sizeof t) == 0;
    if (ol_pop_read(root, "/proc/self/cgroup", b, sizeof b) < 0)
        return room;
    char path[512] = "";
    char *save = NULL;
    for (char *line = strtok_r(b, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = *c2 = 0; /* "ID:CONTROLLERS:PATH" */
        const char *ctl = c1 + 1;
        int hit = v2 ? !strcmp(line, "0") && !*ctl
                     : (!strcmp(ctl, "memory") || strstr(ctl, ",memory") || !strncmp(ctl, "memory,", 7));
        if (hit && strlen(c2 + 1) < sizeof path) {
            snprintf(path, sizeof path, "%s", c2 + 1);
            break;
        }
    }
    if (!path[0])
        return room;
    const char *base = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory";
    const char *fmax = v2 ? "memory.max" : "memory.limit_in_bytes";
    const char *fcur = v2 ? "memory.current" : "memory.usage_in_bytes";
    for (;;) {
        char f[1024];
        snprintf(f, sizeof f, "%s%s/%s", base, strcmp(path, "/") ? path : "", fmax);
        int64_t lim = ol_pop_num(root, f);
        snprintf(f, sizeof f, "%s%s/%s", base, strcmp(path, "/") ? path : "", fcur);
        int64_t cur = ol_pop_num(root, f);
        if (lim >= 0 && lim != INT64_MAX && cur >= 0) {
            int64_t left = lim > cur ? lim - cur : 0;
            if (room < 0 || left < room)
                room = left;
        }
        char *slash = strrchr(path, '/');
        if (!slash || !strcmp(path, "/"))
            break;
        if (slash == path)
            slash[1] = 0; /* "/a" -> "/" */
        else
            *slash = 0;
    }
    return room;
}

/* Populates tenant t's slab; stops early when asked. Returns 0, 1 (stopped)
 * or -errno of ol_kv_slab_populate. */
static int ol_pop_slab(struct ol_kv_populate *p, struct ol_kv_tenant *t)
{
    const struct ol_kv_slab *s = &t->slab;
    struct ol_kv_pop_geom g = {.data_off = s->size - (uint64_t)s->npages * OL_KV_PAGE,
                               .npages = s->npages, .nshards = (uint32_t)p->svc->nshards,
                               .chunk_pages = OL_POP_CHUNK_PAGES};
    /* Populating commits the slab's memory now: only while it fits in 90 %
     * of what this process may still take (MemAvailable, the cgroups'
     * limits), so a slab sized past them is not what makes the kernel's OOM
     * killer act at start; its pages then come at first use. */
    uint64_t have = ol_kv_slab_allocated(s), need = s->size > have ? s->size - have : 0;
    int64_t room = ol_kv_pop_room("");
    if (room >= 0 && need > (uint64_t)room / 10 * 9) {
        const char *who = t == &p->svc->tenants[0] ? "kv slab" : "kv tenant";
        ol_warn("%s%s%s: not populating: its %.2f GiB without pages are more than 90 %% of the "
                "%.2f GiB this process may still take (MemAvailable, the cgroup's memory limit); "
                "pages come at first use, and the slab cannot hold more than that",
                who, t == &p->svc->tenants[0] ? "" : " ", t == &p->svc->tenants[0] ? "" : t->name,
                (double)need / (1u << 30), (double)room / (1u << 30));
        return -ENOMEM;
    }
    double t0 = ol_pop_now();
    int touch = 0, rc;
    uint64_t off, len;
    for (uint64_t k = 0; ol_kv_pop_range(&g, k, &off, &len); k++) {
        if (atomic_load(&p->stop))
            return 1;
        if (len && (rc = ol_kv_slab_populate(s, off, len, &touch)) < 0) {
            const char *why = rc == -ENOMEM ? "out of memory (or the cgroup's limit)"
                                            : strerror(-rc);
            if (t == &p->svc->tenants[0])
                ol_warn("kv slab: populating stopped after %.2f of %.2f GiB: %s; the rest gets "
                        "its pages at first use", (double)atomic_load(&t->populated) / (1u << 30),
                        (double)s->size / (1u << 30), why);
            else
                ol_warn("kv tenant %s: populating its slab stopped after %.2f of %.2f GiB: %s; "
                        "the rest gets its pages at first use", t->name,
                        (double)atomic_load(&t->populated) / (1u << 30),
                        (double)s->size / (1u << 30), why);
            return rc;
        }
        atomic_fetch_add(&t->populated, len);
    }
    /* the order covers the region once (populate.h): every byte is counted */
    OL_ASSERT(atomic_load(&t->populated) == s->size);
    const char *how = touch ? "a read per page: this kernel has no MADV_POPULATE_WRITE"
                            : "MADV_POPULATE_WRITE";
    double secs = ol_pop_now() - t0;
    if (t == &p->svc->tenants[0])
        ol_info("kv slab: populated %.2f GiB in %.2f s (%s)", (double)s->size / (1u << 30), secs,
                how);
    else
        ol_info("kv tenant %s: slab populated, %.2f GiB in %.2f s (%s)", t->name,
                (double)s->size / (1u << 30), secs, how);
    return 0;
}

static void *ol_pop_main(void *arg)
{
    struct ol_kv_populate *p = arg;
    /* Only when a core would otherwise idle: the loops keep their CPU. */
    struct sched_param sp = {0};
    if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp) != 0)
        setpriority(PRIO_PROCESS, (id_t)gettid(), 19);
    pthread_setname_np(pthread_self(), "ol-kv-populate");
    for (int i = 0; i < p->svc->ntenants; i++) {
        int rc = ol_pop_slab(p, &p->svc->tenants[i]);
        if (rc == 1 || rc == -ENOMEM)
            break; /* stopping, or no memory for the next slab either */
    }
    return NULL;
}

int ol_kv_populate_start(struct ol_kv_service *svc, struct ol_kv_populate **out)
{
    struct ol_kv_populate *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->svc = svc;
    int rc = pthread_create(&p->thread, NULL, ol_pop_main, p);
    if (rc != 0) {
        free(p);
        return -rc;
    }
    *out = p;
    return 0;
}

void ol_kv_populate_stop(struct ol_kv_populate *p)
{
    if (!p)
        return;
    atomic_store(&p->stop, 1);
    pthread_join(p->thread, NULL);
    free(p);
}
