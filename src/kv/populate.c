/*
 * populate.c - see populate.h.
 */
#include "kv/populate.h"

#include "base/assert.h"
#include "base/log.h"
#include "kv/service.h"
#include "kv/slab.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
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

/* Populates tenant t's slab; stops early when asked. Returns 0, 1 (stopped)
 * or -errno of ol_kv_slab_populate. */
static int ol_pop_slab(struct ol_kv_populate *p, struct ol_kv_tenant *t)
{
    const struct ol_kv_slab *s = &t->slab;
    struct ol_kv_pop_geom g = {.data_off = s->size - (uint64_t)s->npages * OL_KV_PAGE,
                               .npages = s->npages, .nshards = (uint32_t)p->svc->nshards,
                               .chunk_pages = OL_POP_CHUNK_PAGES};
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
