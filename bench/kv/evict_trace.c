/*
 * evict_trace.c - hit ratio of the KV eviction policies (src/kv/evict.c) on
 * synthetic prefix-reuse traces, at several cache sizes.
 *
 * Owns: a seeded trace generator (shared system prompts, multi-turn
 * conversations, RAG over a shared corpus, one-shot long documents) and a
 * replayer that plays the KV service's protocol against one policy: per
 * request, Lookup the block chain (only the leading run of hits is served),
 * pin the request's blocks, touch the blocks found, insert the missing ones
 * (evicting when the slab is full), release. Must not: depend on anything
 * but libc and evict.c; time anything but the policy calls.
 *
 *   evict_trace [-w chat,rag,scan] [-n REQUESTS] [-s SEEDS] [-r ROUNDS]
 *               [-f 0.05,0.1,0.2,0.4] -o PREFIX
 *
 * Writes PREFIX-runs.csv (one row per workload, seed, cache size, policy and
 * round; policies lru, s3fifo, arc and the diagnostic lru-rev) and
 * PREFIX-workloads.csv (what each generated trace holds). The
 * workload model is described in docs/benchmarks.md ("KV eviction") and in
 * the table `workloads` below. Every replay is checked: ol_evict_check()
 * after the run, identical hit counts in every round, and no key served
 * that was not inserted.
 */
#include "kv/evict.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NIL UINT32_MAX

static void die(const char *what)
{
    fprintf(stderr, "evict_trace: %s\n", what);
    exit(1);
}

static void *xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n ? n : 1, sz);
    if (!p)
        die("out of memory");
    return p;
}

/* ---- random numbers ---------------------------------------------------- */

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rnd(uint64_t *s)
{
    return mix64(*s += 0x9E3779B97F4A7C15ull);
}

static double unif(uint64_t *s)
{
    return (double)(rnd(s) >> 11) * 0x1.0p-53;
}

static double expo(uint64_t *s, double mean)
{
    return -mean * log(1.0 - unif(s));
}

/* Geometric on 1, 2, ... with the given mean (>= 1). */
static uint32_t geom(uint64_t *s, double mean, uint32_t max)
{
    double p = 1.0 / mean;
    uint32_t k = 1 + (uint32_t)floor(log(1.0 - unif(s)) / log(1.0 - p + 1e-12));
    return k > max ? max : k;
}

static uint32_t uniform_in(uint64_t *s, uint32_t lo, uint32_t hi)
{
    return lo + (uint32_t)(rnd(s) % (hi - lo + 1));
}

/* Zipf(alpha) over 0..n-1 by inverse CDF. */
struct zipf {
    double *cdf;
    uint32_t n;
};

static void zipf_init(struct zipf *z, uint32_t n, double alpha)
{
    z->n = n;
    z->cdf = xcalloc(n, sizeof(double));
    double sum = 0;
    for (uint32_t i = 0; i < n; i++)
        z->cdf[i] = sum += pow(i + 1.0, -alpha);
    for (uint32_t i = 0; i < n; i++)
        z->cdf[i] /= sum;
}

static uint32_t zipf_draw(const struct zipf *z, uint64_t *s)
{
    double u = unif(s);
    uint32_t lo = 0, hi = z->n - 1;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (z->cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* ---- workloads --------------------------------------------------------- */

/* Lengths are in KV blocks (16 tokens each in vLLM's default layout). */
struct workload {
    const char *name;
    uint32_t requests;
    /* system prompts: nsys of them, Zipf(sys_alpha) popularity */
    uint32_t nsys, sys_min, sys_max;
    double sys_alpha;
    /* what a new arrival is: a conversation, a RAG query, a one-shot document */
    double p_conv, p_rag, p_scan;
    /* conversations: turns geometric; each turn = user message + reply */
    double turns_mean, user_mean, reply_mean;
    /* idle time before the next turn, in requests served meanwhile:
     * exponential, short or (with p_gap_long) long */
    double gap_short, gap_long, p_gap_long;
    /* RAG: a corpus of ndocs documents, Zipf(doc_alpha), question q blocks */
    uint32_t ndocs, doc_min, doc_max;
    double doc_alpha;
    /* one-shot documents (summarise this file): never seen again */
    uint32_t scan_min, scan_max;
};

static const struct workload workloads[] = {
    {
        .name = "chat", .requests = 60000,
        .nsys = 8, .sys_min = 20, .sys_max = 200, .sys_alpha = 1.0,
        .p_conv = 0.85, .p_rag = 0.05, .p_scan = 0.10,
        .turns_mean = 6, .user_mean = 3, .reply_mean = 10,
        .gap_short = 500, .gap_long = 8000, .p_gap_long = 0.25,
        .ndocs = 2000, .doc_min = 16, .doc_max = 128, .doc_alpha = 0.9,
        .scan_min = 100, .scan_max = 800,
    },
    {
        .name = "rag", .requests = 60000,
        .nsys = 4, .sys_min = 20, .sys_max = 120, .sys_alpha = 1.0,
        .p_conv = 0.30, .p_rag = 0.60, .p_scan = 0.10,
        .turns_mean = 4, .user_mean = 3, .reply_mean = 10,
        .gap_short = 500, .gap_long = 8000, .p_gap_long = 0.25,
        .ndocs = 5000, .doc_min = 32, .doc_max = 256, .doc_alpha = 0.9,
        .scan_min = 100, .scan_max = 800,
    },
    {
        .name = "scan", .requests = 60000,
        .nsys = 8, .sys_min = 20, .sys_max = 200, .sys_alpha = 1.0,
        .p_conv = 0.50, .p_rag = 0.10, .p_scan = 0.40,
        .turns_mean = 6, .user_mean = 3, .reply_mean = 10,
        .gap_short = 500, .gap_long = 8000, .p_gap_long = 0.25,
        .ndocs = 2000, .doc_min = 16, .doc_max = 128, .doc_alpha = 0.9,
        .scan_min = 200, .scan_max = 2000,
    },
};
#define NWORKLOADS (sizeof workloads / sizeof workloads[0])

/*
 * A request is a chain of segments; block i of a segment has key
 * mix64(ns + i), and its chain position is the segment's offset plus i.
 * A conversation's segment holds its whole history, so turn k re-sends turns
 * 1..k-1 under the same keys. The first `lookup` blocks are the prompt
 * (looked up); the rest is the reply, stored when the request ends.
 */
struct seg {
    uint64_t ns;
    uint32_t len;
};

enum req_type { R_CONV, R_RAG, R_SCAN, R_TYPES };

struct req {
    uint32_t seg0, total, lookup;
    uint8_t nseg, type;
};

struct trace {
    struct req *req;
    struct seg *seg;
    uint32_t nreq, nseg, max_total;
    uint64_t unique_blocks, lookup_blocks, blocks_by_type[R_TYPES];
    uint32_t reqs_by_type[R_TYPES];
};

#define NS_SYS  (1ull << 60)
#define NS_CONV (2ull << 60)
#define NS_DOC  (3ull << 60)
#define NS_ONCE (4ull << 60)

struct conv {
    uint32_t sys, hist, turns_left;
    uint64_t ns;
};

/* min-heap of (due, conversation) */
struct due {
    double t;
    uint32_t c;
};

static void heap_push(struct due *h, uint32_t *n, struct due d)
{
    uint32_t i = (*n)++;
    while (i > 0 && h[(i - 1) / 2].t > d.t) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = d;
}

static struct due heap_pop(struct due *h, uint32_t *n)
{
    struct due top = h[0], last = h[--*n];
    uint32_t i = 0;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && h[c + 1].t < h[c].t)
            c++;
        if (h[c].t >= last.t)
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = last;
    return top;
}

/* Key set for counting unique blocks. */
struct kset {
    uint64_t *k, mask, n;
};

static void kset_add(struct kset *s, uint64_t key)
{
    if (2 * (s->n + 1) > s->mask + 1) {
        struct kset g = {xcalloc(2 * (s->mask + 1), 8), 2 * (s->mask + 1) - 1, 0};
        for (uint64_t i = 0; i <= s->mask; i++)
            if (s->k[i])
                kset_add(&g, s->k[i]);
        free(s->k);
        *s = g;
    }
    for (uint64_t i = key & s->mask;; i = (i + 1) & s->mask) {
        if (s->k[i] == key)
            return;
        if (!s->k[i]) {
            s->k[i] = key;
            s->n++;
            return;
        }
    }
}

static uint64_t block_key(uint64_t ns, uint32_t i)
{
    uint64_t k = mix64(ns + i);
    return k ? k : 1;
}

static void gen_trace(struct trace *t, const struct workload *w, uint64_t seed)
{
    uint64_t s = seed * 0x2545F4914F6CDD1Dull + 1;
    memset(t, 0, sizeof *t);
    t->req = xcalloc(w->requests, sizeof *t->req);
    t->seg = xcalloc(3ull * w->requests, sizeof *t->seg);
    struct zipf zs, zd;
    zipf_init(&zs, w->nsys, w->sys_alpha);
    zipf_init(&zd, w->ndocs, w->doc_alpha);
    uint32_t *sys_len = xcalloc(w->nsys, sizeof(uint32_t));
    for (uint32_t i = 0; i < w->nsys; i++)
        sys_len[i] = uniform_in(&s, w->sys_min, w->sys_max);
    uint32_t *doc_len = xcalloc(w->ndocs, sizeof(uint32_t));
    for (uint32_t i = 0; i < w->ndocs; i++)
        doc_len[i] = uniform_in(&s, w->doc_min, w->doc_max);
    struct conv *cv = xcalloc(w->requests, sizeof *cv);
    struct due *heap = xcalloc(w->requests, sizeof *heap);
    uint32_t nconv = 0, nheap = 0;
    uint64_t once = 0;

    for (uint32_t r = 0; r < w->requests; r++) {
        struct req *q = &t->req[r];
        struct seg *sg = &t->seg[t->nseg];
        q->seg0 = t->nseg;
        uint32_t c = NIL;
        if (nheap && heap[0].t <= r) {
            c = heap_pop(heap, &nheap).c;
        } else {
            double u = unif(&s) * (w->p_conv + w->p_rag + w->p_scan);
            if (u < w->p_conv) {
                c = nconv++;
                cv[c] = (struct conv){zipf_draw(&zs, &s), 0,
                                      geom(&s, w->turns_mean, 64), NS_CONV | c};
            } else if (u < w->p_conv + w->p_rag) {
                uint32_t sys = zipf_draw(&zs, &s), d = zipf_draw(&zd, &s);
                uint32_t ql = geom(&s, w->user_mean, 32), rl = geom(&s, w->reply_mean, 64);
                sg[0] = (struct seg){NS_SYS | (uint64_t)sys << 32, sys_len[sys]};
                sg[1] = (struct seg){NS_DOC | (uint64_t)sys << 40 | (uint64_t)d << 8, doc_len[d]};
                sg[2] = (struct seg){NS_ONCE | once++ << 20, ql + rl};
                q->nseg = 3;
                q->type = R_RAG;
                q->total = sg[0].len + sg[1].len + sg[2].len;
                q->lookup = q->total - rl;
            } else {
                uint32_t sys = zipf_draw(&zs, &s);
                uint32_t dl = uniform_in(&s, w->scan_min, w->scan_max);
                uint32_t rl = geom(&s, w->reply_mean, 64);
                sg[0] = (struct seg){NS_SYS | (uint64_t)sys << 32, sys_len[sys]};
                sg[1] = (struct seg){NS_ONCE | once++ << 20, dl + rl};
                q->nseg = 2;
                q->type = R_SCAN;
                q->total = sg[0].len + sg[1].len;
                q->lookup = q->total - rl;
            }
        }
        if (c != NIL) {
            struct conv *k = &cv[c];
            uint32_t ul = geom(&s, w->user_mean, 32), rl = geom(&s, w->reply_mean, 64);
            sg[0] = (struct seg){NS_SYS | (uint64_t)k->sys << 32, sys_len[k->sys]};
            sg[1] = (struct seg){k->ns << 20, k->hist + ul + rl};
            q->nseg = 2;
            q->type = R_CONV;
            q->total = sg[0].len + sg[1].len;
            q->lookup = q->total - rl;
            k->hist += ul + rl;
            if (--k->turns_left) {
                double gap = unif(&s) < w->p_gap_long ? expo(&s, w->gap_long)
                                                       : expo(&s, w->gap_short);
                heap_push(heap, &nheap, (struct due){r + 1 + gap, c});
            }
        }
        t->nseg += q->nseg;
        if (q->total > t->max_total)
            t->max_total = q->total;
        t->lookup_blocks += q->lookup;
        t->blocks_by_type[q->type] += q->lookup;
        t->reqs_by_type[q->type]++;
    }
    t->nreq = w->requests;

    struct kset ks = {xcalloc(1u << 20, 8), (1u << 20) - 1, 0};
    for (uint32_t r = 0; r < t->nreq; r++)
        for (uint32_t j = 0; j < t->req[r].nseg; j++) {
            const struct seg *g = &t->seg[t->req[r].seg0 + j];
            for (uint32_t i = 0; i < g->len; i++)
                kset_add(&ks, block_key(g->ns, i));
        }
    t->unique_blocks = ks.n;
    free(ks.k);
    free(zs.cdf);
    free(zd.cdf);
    free(sys_len);
    free(doc_len);
    free(cv);
    free(heap);
}

/* ---- the simulated KV service ------------------------------------------ */

/* The policies compared: every kind of the module, plus, as a diagnostic,
 * LRU with the caller touching and inserting each request's blocks deepest
 * first (a prefix-aware caller could do that with plain LRU). */
enum pol { P_LRU, P_S3FIFO, P_ARC, P_LRU_REV, P_COUNT };
static const char *const pol_names[P_COUNT] = {"lru", "s3fifo", "arc", "lru-rev"};
static const enum ol_evict_kind pol_kind[P_COUNT] = {
    OL_EVICT_LRU, OL_EVICT_S3FIFO, OL_EVICT_ARC, OL_EVICT_LRU};

struct sim {
    uint32_t cap;
    uint64_t *mkey;   /* key -> id, linear probing, 0 = empty */
    uint32_t *mid;
    uint64_t mmask;
    uint64_t *id_key; /* 0 = slot free */
    uint32_t *free_ids, nfree;
    uint32_t *pin, epoch;
    struct ol_evict ev;
    /* per-request scratch, sized for the longest chain */
    uint32_t *ids, *newpos;
    uint64_t *keys;
};

struct result {
    uint64_t lookup_blocks, prefix_hits, block_hits, ops, ns, stuck;
};

static bool sim_pinned(void *ctx, uint32_t id)
{
    const struct sim *m = ctx;
    return m->pin[id] == m->epoch;
}

static uint32_t map_get(const struct sim *m, uint64_t key)
{
    for (uint64_t i = key & m->mmask;; i = (i + 1) & m->mmask) {
        if (m->mkey[i] == key)
            return m->mid[i];
        if (!m->mkey[i])
            return NIL;
    }
}

static void map_put(struct sim *m, uint64_t key, uint32_t id)
{
    uint64_t i = key & m->mmask;
    while (m->mkey[i])
        i = (i + 1) & m->mmask;
    m->mkey[i] = key;
    m->mid[i] = id;
}

static void map_del(struct sim *m, uint64_t key)
{
    uint64_t i = key & m->mmask;
    while (m->mkey[i] != key)
        i = (i + 1) & m->mmask;
    for (;;) {
        m->mkey[i] = 0;
        uint64_t j = i;
        for (;;) {
            j = (j + 1) & m->mmask;
            if (!m->mkey[j])
                return;
            uint64_t k = m->mkey[j] & m->mmask;
            if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
                continue;
            m->mkey[i] = m->mkey[j];
            m->mid[i] = m->mid[j];
            i = j;
            break;
        }
    }
}

static void sim_init(struct sim *m, enum pol p, uint32_t cap, uint32_t max_total)
{
    memset(m, 0, sizeof *m);
    m->cap = cap;
    uint64_t sz = 1;
    while (sz < 2ull * cap)
        sz <<= 1;
    m->mkey = xcalloc(sz, 8);
    m->mid = xcalloc(sz, 4);
    m->mmask = sz - 1;
    m->id_key = xcalloc(cap, 8);
    m->free_ids = xcalloc(cap, 4);
    for (uint32_t i = 0; i < cap; i++)
        m->free_ids[i] = cap - 1 - i;
    m->nfree = cap;
    m->pin = xcalloc(cap, 4);
    m->ids = xcalloc(max_total, 4);
    m->newpos = xcalloc(max_total, 4);
    m->keys = xcalloc(max_total, 8);
    int rc = ol_evict_init(&m->ev, pol_kind[p], cap);
    if (rc)
        die(rc == -ENOMEM ? "ol_evict_init: out of memory" : "ol_evict_init failed");
}

static void sim_exit(struct sim *m)
{
    ol_evict_exit(&m->ev);
    free(m->mkey); free(m->mid); free(m->id_key); free(m->free_ids);
    free(m->pin); free(m->ids); free(m->newpos); free(m->keys);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * One request. Lookup: the leading run of present prompt blocks is served.
 * Every block of the chain is then pinned for the request's lifetime; found
 * blocks are touched (ol_evict_hit), missing ones get a slot (a free one,
 * else a victim) and are inserted with their key as fingerprint and their
 * chain position as hint. Only the policy calls are timed; the key map is
 * updated after the clock stops (exact: new slots are pinned, so no slot is
 * handed out twice within a request, and no key repeats within a chain).
 */
static void sim_request(struct sim *m, const struct trace *t, const struct req *q,
                        bool reverse, bool count, struct result *res)
{
    uint32_t n = 0, lead = NIL, found = 0;
    m->epoch++;
    for (uint32_t j = 0; j < q->nseg; j++) {
        const struct seg *g = &t->seg[q->seg0 + j];
        for (uint32_t i = 0; i < g->len; i++, n++) {
            uint64_t key = block_key(g->ns, i);
            uint32_t id = map_get(m, key);
            m->keys[n] = key;
            m->ids[n] = id;
            if (id != NIL) {
                if (m->id_key[id] != key)
                    die("map returned a slot holding another key");
                m->pin[id] = m->epoch;
                found += n < q->lookup;
            } else if (lead == NIL) {
                lead = n;
            }
        }
    }
    if (lead == NIL || lead > q->lookup)
        lead = q->lookup;

    uint32_t nnew = 0;
    uint64_t ops = 0, stuck = 0, t0 = now_ns();
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = reverse ? n - 1 - k : k;
        if (m->ids[i] != NIL) {
            ol_evict_hit(&m->ev, m->ids[i]);
            ops++;
        }
    }
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = reverse ? n - 1 - k : k, id;
        if (m->ids[i] != NIL)
            continue;
        if (m->nfree) {
            id = m->free_ids[--m->nfree];
        } else {
            int64_t v = ol_evict_victim(&m->ev, sim_pinned, m);
            ops++;
            if (v < 0) {  /* every slot pinned by this request: store no more */
                stuck = 1;
                break;
            }
            id = (uint32_t)v;
        }
        ol_evict_insert(&m->ev, id, m->keys[i], i);
        ops++;
        m->pin[id] = m->epoch;
        m->ids[i] = id;
        m->newpos[nnew++] = i;
    }
    uint64_t t1 = now_ns();

    for (uint32_t k = 0; k < nnew; k++) {
        uint32_t i = m->newpos[k], id = m->ids[i];
        if (m->id_key[id])
            map_del(m, m->id_key[id]);
        map_put(m, m->keys[i], id);
        m->id_key[id] = m->keys[i];
    }
    if (count) {
        res->lookup_blocks += q->lookup;
        res->prefix_hits += lead;
        res->block_hits += found;
        res->ops += ops;
        res->ns += t1 - t0;
        res->stuck += stuck;
    }
}

/* Replays trace t through policy p with cap slots. Requests before
 * `warm` fill the cache and are not counted. */
static struct result replay(const struct trace *t, enum pol p, uint32_t cap, uint32_t warm)
{
    struct sim m;
    struct result res = {0};
    sim_init(&m, p, cap, t->max_total);
    for (uint32_t r = 0; r < t->nreq; r++)
        sim_request(&m, t, &t->req[r], p == P_LRU_REV, r >= warm, &res);
    if (ol_evict_check(&m.ev) != 0)
        die("ol_evict_check failed after a replay");
    if (ol_evict_count(&m.ev) != cap - m.nfree)
        die("policy count differs from slots in use");
    sim_exit(&m);
    return res;
}

/* ---- main -------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr,
            "usage: evict_trace [-w chat,rag,scan] [-n REQUESTS] [-s SEEDS] [-r ROUNDS]\n"
            "                   [-f 0.05,0.1,0.2,0.4] -o PREFIX\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *wsel = "chat,rag,scan", *out = NULL;
    char fbuf[256] = "0.05,0.1,0.2,0.4";
    uint32_t nreq = 0, seeds = 3, rounds = 1;
    int opt;
    while ((opt = getopt(argc, argv, "w:n:s:r:f:o:")) != -1) {
        switch (opt) {
        case 'w': wsel = optarg; break;
        case 'n': nreq = (uint32_t)strtoul(optarg, NULL, 10); break;
        case 's': seeds = (uint32_t)strtoul(optarg, NULL, 10); break;
        case 'r': rounds = (uint32_t)strtoul(optarg, NULL, 10); break;
        case 'f': snprintf(fbuf, sizeof fbuf, "%s", optarg); break;
        case 'o': out = optarg; break;
        default: usage();
        }
    }
    if (!out || !seeds || !rounds)
        usage();
    double fracs[16];
    unsigned nf = 0;
    for (char *tok = strtok(fbuf, ","); tok && nf < 16; tok = strtok(NULL, ","))
        fracs[nf++] = atof(tok);
    char path[1024];
    snprintf(path, sizeof path, "%s-runs.csv", out);
    FILE *fr = fopen(path, "w");
    snprintf(path, sizeof path, "%s-workloads.csv", out);
    FILE *fw = fopen(path, "w");
    if (!fr || !fw)
        die("cannot write the output files");
    fprintf(fr, "workload,seed,frac,cache_blocks,unique_blocks,policy,round,requests_counted,"
                "lookup_blocks,prefix_hits,block_hits,prefix_hit_ratio,block_hit_ratio,"
                "policy_ops,policy_ns,ops_per_s,stuck_requests\n");
    fprintf(fw, "workload,seed,requests,unique_blocks,lookup_blocks,max_chain,"
                "conv_requests,rag_requests,scan_requests,conv_blocks,rag_blocks,scan_blocks\n");

    for (size_t wi = 0; wi < NWORKLOADS; wi++) {
        struct workload w = workloads[wi];
        if (!strstr(wsel, w.name))
            continue;
        if (nreq)
            w.requests = nreq;
        for (uint32_t seed = 1; seed <= seeds; seed++) {
            struct trace t;
            gen_trace(&t, &w, seed);
            fprintf(fw, "%s,%u,%u,%llu,%llu,%u,%u,%u,%u,%llu,%llu,%llu\n", w.name, seed,
                    t.nreq, (unsigned long long)t.unique_blocks,
                    (unsigned long long)t.lookup_blocks, t.max_total,
                    t.reqs_by_type[R_CONV], t.reqs_by_type[R_RAG], t.reqs_by_type[R_SCAN],
                    (unsigned long long)t.blocks_by_type[R_CONV],
                    (unsigned long long)t.blocks_by_type[R_RAG],
                    (unsigned long long)t.blocks_by_type[R_SCAN]);
            fflush(fw);
            uint32_t warm = t.nreq / 5;
            for (unsigned fi = 0; fi < nf; fi++) {
                uint32_t cap = (uint32_t)(fracs[fi] * (double)t.unique_blocks);
                if (cap < t.max_total)  /* one request must fit */
                    cap = t.max_total;
                struct result first[P_COUNT];
                for (uint32_t round = 0; round < rounds; round++)
                    for (int p = 0; p < P_COUNT; p++) {
                        struct result r = replay(&t, (enum pol)p, cap, warm);
                        if (round == 0)
                            first[p] = r;
                        else if (r.prefix_hits != first[p].prefix_hits ||
                                 r.block_hits != first[p].block_hits)
                            die("a replay is not deterministic");
                        fprintf(fr, "%s,%u,%g,%u,%llu,%s,%u,%u,%llu,%llu,%llu,%.6f,%.6f,"
                                    "%llu,%llu,%.0f,%llu\n",
                                w.name, seed, fracs[fi], cap,
                                (unsigned long long)t.unique_blocks, pol_names[p], round,
                                t.nreq - warm, (unsigned long long)r.lookup_blocks,
                                (unsigned long long)r.prefix_hits,
                                (unsigned long long)r.block_hits,
                                (double)r.prefix_hits / (double)r.lookup_blocks,
                                (double)r.block_hits / (double)r.lookup_blocks,
                                (unsigned long long)r.ops, (unsigned long long)r.ns,
                                r.ns ? (double)r.ops * 1e9 / (double)r.ns : 0.0,
                                (unsigned long long)r.stuck);
                        fflush(fr);
                        fprintf(stderr, "%s seed %u frac %g %-13s prefix %.4f block %.4f "
                                        "%.1f Mops/s\n", w.name, seed, fracs[fi], pol_names[p],
                                (double)r.prefix_hits / (double)r.lookup_blocks,
                                (double)r.block_hits / (double)r.lookup_blocks,
                                r.ns ? (double)r.ops * 1e3 / (double)r.ns : 0.0);
                    }
            }
            free(t.req);
            free(t.seg);
        }
    }
    fclose(fr);
    fclose(fw);
    return 0;
}
