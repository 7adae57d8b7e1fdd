/*
 * admin.c - routes of the S3 listener that belong to OpenLake itself.
 *
 *   GET|HEAD /_openlake/health/live    200 while the process serves
 *   GET|HEAD /_openlake/health/ready   200 when every core serves, 503 while
 *                                      starting (the object store, the KV
 *                                      service and its disk tier are opened
 *                                      and recovered before: main.c) or
 *                                      shutting down
 *   GET      /_openlake/metrics        Prometheus text (all cores, the healer;
 *                                      in a cluster the membership, the node
 *                                      RPC's peers and the KV pool)
 *   POST|GET /_openlake/heal           heal walks (admin_heal.c; SigV4-signed)
 *   GET      /_openlake/disks          the drives and the KV disk tier
 *                                      (admin_disks.c; SigV4-signed)
 *   POST|GET /_openlake/cluster/probe  the node RPC measured to every peer
 *                                      (admin_cluster.c; SigV4-signed)
 *   PUT|POST /_openlake/debug/sink     (http.debug_endpoints only) consumes
 *            [?hold_ms=N]              the body, answers its length and
 *                                      SHA-256; hold_ms pauses the body
 *                                      before reading it (backpressure tests)
 *   GET      /_openlake/debug/source?bytes=N[&chunked=1]
 *                                      (http.debug_endpoints only) streams N
 *                                      bytes, byte i = i mod 251
 *   POST     /_openlake/debug/ready?hold=1|0
 *                                      (http.debug_endpoints only) holds the
 *                                      daemon not ready, as while starting:
 *                                      health/ready 503, KV HELLO BUSY
 *                                      "starting; retry"; 0 lets it go
 *   GET      /_openlake/debug/ready    (http.debug_endpoints only) "held" or
 *                                      "free", and "hello_busy N": HELLOs
 *                                      answered BUSY so far
 *   GET|POST /_openlake/debug/faults   (http.debug_endpoints, and test builds
 *                                      only: base/fault.h) POST replaces the
 *                                      fault rules by the body's spec (empty:
 *                                      none); both answer the rules and counts
 *                                      as JSON; a bad spec is 400
 *
 * `_` is not allowed in bucket names, so /_openlake/ never clashes with S3.
 * Every other request goes to the S3 API (s3/server.h), which marks its
 * per-request state so the body, drain and abort callbacks reach it too.
 *
 * Owns: route matching and the per-core pool of request states for the
 * streaming debug routes. Must not: block; everything answers from the loop.
 */
#include "daemon/daemon.h"

#include "base/fault.h"
#include "base/log.h"
#include "base/pool.h"
#include "http/metrics.h"

#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define OL_ADMIN_STATES   64
#define OL_METRICS_CAP    (1u << 20)
#define OL_SOURCE_CHUNK   65536

enum ol_admin_kind { OL_ADM_SINK = 1, OL_ADM_SOURCE, OL_ADM_FAULTS };
#define OL_FAULT_SPEC_MAX 2048   /* bytes of a POSTed fault spec */

struct ol_admin_req {
    enum ol_admin_kind kind;
    struct ol_core *core;
    ol_http_req *r;
    EVP_MD_CTX *md;            /* sink: owned by the slot, reused */
    uint64_t bytes;            /* sink: received; source: sent */
    uint64_t total;            /* source: to send */
    struct ol_timer hold;      /* sink: hold_ms */
#ifdef OL_FAULTS
    char spec[OL_FAULT_SPEC_MAX + 1]; /* faults: the body so far (bytes counts it) */
#endif
};

struct ol_admin {
    struct ol_pool states;
    EVP_MD_CTX *mds[OL_ADMIN_STATES];
    unsigned nmds;
    char *scratch;             /* metrics rendering, OL_METRICS_CAP bytes */
};

static char ol_pattern[OL_SOURCE_CHUNK + 251];
static pthread_once_t ol_pattern_once = PTHREAD_ONCE_INIT;

static void ol_pattern_init(void)
{
    for (size_t i = 0; i < sizeof ol_pattern; i++)
        ol_pattern[i] = (char)(i % 251);
}

/* ---- helpers ------------------------------------------------------------ */

static int ol_path_is(const char *path, size_t len, const char *lit)
{
    return strlen(lit) == len && memcmp(path, lit, len) == 0;
}

static int ol_method_is(const struct ol_http_request *h, const char *m)
{
    return strlen(m) == h->method_len && memcmp(h->method, m, h->method_len) == 0;
}

/* Value of query parameter `name` as an unsigned number; def when absent. */
static uint64_t ol_query_u64(const char *q, size_t qlen, const char *name, uint64_t def)
{
    size_t nl = strlen(name);
    const char *end = q + qlen;
    while (q < end) {
        const char *amp = memchr(q, '&', (size_t)(end - q));
        const char *stop = amp ? amp : end;
        if ((size_t)(stop - q) > nl && memcmp(q, name, nl) == 0 && q[nl] == '=') {
            uint64_t v = 0;
            for (const char *p = q + nl + 1; p < stop && *p >= '0' && *p <= '9'; p++)
                v = v > UINT64_MAX / 10 ? UINT64_MAX : v * 10 + (uint64_t)(*p - '0');
            return v;
        }
        q = stop + 1;
    }
    return def;
}

static void ol_method_not_allowed(ol_http_req *r, const char *allow)
{
    char hdr[96], body[64];
    int n = snprintf(body, sizeof body, "method not allowed; use %s\n", allow);
    snprintf(hdr, sizeof hdr, "Allow: %s\r\nContent-Type: text/plain\r\n", allow);
    if (ol_http_resp_start(r, 405, hdr, n) == 0)
        ol_http_resp_write(r, body, (size_t)n);
    ol_http_resp_end(r);
}

/* ---- debug sink / source --------------------------------------------------- */

static void ol_sink_hold_done(ol_loop *loop, struct ol_timer *t)
{
    struct ol_admin_req *s = (struct ol_admin_req *)((char *)t - offsetof(struct ol_admin_req, hold));
    ol_http_req_resume(s->r);
}

static void ol_state_free(struct ol_admin_req *s)
{
    struct ol_admin *a = s->core->admin;
    ol_timer_cancel(s->core->loop, &s->hold);
    ol_pool_put(&a->states, s);
}

static void ol_source_pump(ol_http_req *r, struct ol_admin_req *s)
{
    while (s->bytes < s->total) {
        uint64_t left = s->total - s->bytes;
        size_t n = left < OL_SOURCE_CHUNK ? (size_t)left : OL_SOURCE_CHUNK;
        if (ol_http_resp_write(r, ol_pattern + s->bytes % 251, n) < 0)
            return; /* output full: on_drain calls us again */
        s->bytes += n;
    }
    ol_state_free(s);
    ol_http_req_set_udata(r, NULL);
    ol_http_resp_end(r);
}

static struct ol_admin_req *ol_state_new(struct ol_core *core, ol_http_req *r, enum ol_admin_kind k)
{
    struct ol_admin *a = core->admin;
    struct ol_admin_req *s = ol_pool_get(&a->states);
    if (!s)
        return NULL;
    size_t slot = ((size_t)((char *)s - a->states.mem)) / a->states.obj_size;
    memset(s, 0, sizeof *s);
    s->kind = k;
    s->core = core;
    s->r = r;
    s->md = a->mds[slot];
    s->hold.fn = ol_sink_hold_done;
    ol_http_req_set_udata(r, s);
    return s;
}

static void ol_debug_route(struct ol_core *core, ol_http_req *r, const char *path, size_t plen,
                           const char *q, size_t qlen)
{
    const struct ol_http_request *h = ol_http_req_head(r);
    if (ol_path_is(path, plen, "/_openlake/debug/sink")) {
        if (!ol_method_is(h, "PUT") && !ol_method_is(h, "POST")) {
            ol_method_not_allowed(r, "PUT, POST");
            return;
        }
        struct ol_admin_req *s = ol_state_new(core, r, OL_ADM_SINK);
        if (!s) {
            ol_http_resp_simple(r, 503, "text/plain", "busy\n", 5);
            return;
        }
        EVP_DigestInit_ex(s->md, EVP_sha256(), NULL);
        uint64_t hold = ol_query_u64(q, qlen, "hold_ms", 0);
        if (hold) {
            ol_http_req_pause(r);
            ol_timer_arm(core->loop, &s->hold, hold);
        }
        return; /* on_body / on_body_end finish it */
    }
    if (ol_path_is(path, plen, "/_openlake/debug/source")) {
        if (!ol_method_is(h, "GET") && !ol_method_is(h, "HEAD")) {
            ol_method_not_allowed(r, "GET, HEAD");
            return;
        }
        struct ol_admin_req *s = ol_state_new(core, r, OL_ADM_SOURCE);
        if (!s) {
            ol_http_resp_simple(r, 503, "text/plain", "busy\n", 5);
            return;
        }
        s->total = ol_query_u64(q, qlen, "bytes", 0);
        int chunked = ol_query_u64(q, qlen, "chunked", 0) != 0;
        if (ol_http_resp_start(r, 200, "Content-Type: application/octet-stream\r\n",
                               chunked ? -1 : (int64_t)s->total) < 0) {
            ol_state_free(s);
            ol_http_req_set_udata(r, NULL);
            ol_http_resp_end(r);
            return;
        }
        if (ol_method_is(h, "HEAD"))
            s->bytes = s->total;
        ol_source_pump(r, s);
        return;
    }
    if (ol_path_is(path, plen, "/_openlake/debug/ready")) {
        struct ol_daemon *d = core->d;
        char body[96];
        if (ol_method_is(h, "POST")) {
            int hold = ol_query_u64(q, qlen, "hold", 0) != 0;
            atomic_store(&d->ready_held, hold);
            if (d->kv)
                atomic_store(&d->kv->ready, !hold && atomic_load(&d->ready));
        } else if (!ol_method_is(h, "GET")) {
            ol_method_not_allowed(r, "GET, POST");
            return;
        }
        int n = snprintf(body, sizeof body, "%s\nhello_busy %llu\n",
                         atomic_load(&d->ready_held) ? "held" : "free",
                         d->kv ? (unsigned long long)atomic_load(&d->kv->hello_busy) : 0ull);
        ol_http_resp_simple(r, 200, "text/plain", body, (size_t)n);
        return;
    }
#ifdef OL_FAULTS
    if (ol_path_is(path, plen, "/_openlake/debug/faults")) {
        if (ol_method_is(h, "GET")) {
            char body[4096];
            size_t n = ol_fault_report(body, sizeof body);
            ol_http_resp_simple(r, 200, "application/json", body, n < sizeof body ? n : 0);
            return;
        }
        if (!ol_method_is(h, "POST")) {
            ol_method_not_allowed(r, "GET, POST");
            return;
        }
        if (!ol_state_new(core, r, OL_ADM_FAULTS))
            ol_http_resp_simple(r, 503, "text/plain", "busy\n", 5);
        return; /* on_body / on_body_end finish it */
    }
#endif
    ol_http_resp_simple(r, 404, "text/plain", "no such debug endpoint\n", 23);
}

#ifdef OL_FAULTS
/* POST /_openlake/debug/faults: the whole body is the new spec. */
static void ol_faults_body_end(ol_http_req *r, struct ol_admin_req *s)
{
    char err[512], body[4096];
    int rc = -EINVAL;
    if (s->bytes > OL_FAULT_SPEC_MAX) {
        snprintf(err, sizeof err, "faults: a spec of more than %u bytes", OL_FAULT_SPEC_MAX);
    } else {
        s->spec[s->bytes] = 0;
        rc = ol_fault_set(s->spec, err, sizeof err);
    }
    if (rc == 0)
        ol_info("faults: rules set by POST /_openlake/debug/faults: \"%s\"", s->spec);
    ol_state_free(s);
    ol_http_req_set_udata(r, NULL);
    if (rc < 0) {
        int n = snprintf(body, sizeof body, "%s\n", err);
        ol_http_resp_simple(r, 400, "text/plain", body, (size_t)n);
        return;
    }
    size_t n = ol_fault_report(body, sizeof body);
    ol_http_resp_simple(r, 200, "application/json", body, n < sizeof body ? n : 0);
}
#endif

/* ---- handler ------------------------------------------------------------------ */

static void ol_admin_on_request(ol_http_req *r)
{
    struct ol_core *core = ol_http_req_ctx(r);
    struct ol_daemon *d = core->d;
    const struct ol_http_request *h = ol_http_req_head(r);
    const char *path = h->target;
    const char *qm = memchr(path, '?', h->target_len);
    size_t plen = qm ? (size_t)(qm - path) : h->target_len;
    const char *q = qm ? qm + 1 : path + plen;
    size_t qlen = h->target_len - plen - (qm ? 1 : 0);
    int get = ol_method_is(h, "GET") || ol_method_is(h, "HEAD");

    if (plen < 10 || memcmp(path, "/_openlake", 10) != 0 || (plen > 10 && path[10] != '/')) {
        ol_s3_on_request(core->s3api, r);
        return;
    }
    if (ol_path_is(path, plen, "/_openlake/health/live")) {
        if (!get)
            ol_method_not_allowed(r, "GET, HEAD");
        else
            ol_http_resp_simple(r, 200, "text/plain", "ok\n", 3);
        return;
    }
    if (ol_path_is(path, plen, "/_openlake/health/ready")) {
        int ready = atomic_load(&d->ready) && !atomic_load(&d->ready_held) &&
                    !atomic_load(&d->draining);
        if (!get)
            ol_method_not_allowed(r, "GET, HEAD");
        else if (ready)
            ol_http_resp_simple(r, 200, "text/plain", "ready\n", 6);
        else
            ol_http_resp_simple(r, 503, "text/plain",
                                atomic_load(&d->draining) ? "shutting down\n" : "starting\n",
                                atomic_load(&d->draining) ? 14 : 9);
        return;
    }
    if (ol_path_is(path, plen, "/_openlake/metrics")) {
        if (!get) {
            ol_method_not_allowed(r, "GET, HEAD");
            return;
        }
        struct ol_admin *a = core->admin;
        const struct ol_http_stats *st[256];
        int n = d->ncores < 256 ? d->ncores : 256;
        for (int i = 0; i < n; i++)
            st[i] = ol_http_server_stats(d->cores[i].s3);
        size_t len = ol_http_metrics_render(st, n, a->scratch, OL_METRICS_CAP);
        if (len < OL_METRICS_CAP)
            len += ol_admin_heal_metrics(d, a->scratch + len, OL_METRICS_CAP - len);
        if (len < OL_METRICS_CAP)
            len += ol_admin_store_metrics(d, a->scratch + len, OL_METRICS_CAP - len);
        if (len < OL_METRICS_CAP && d->kv)
            len += ol_kv_service_metrics(d->kv, a->scratch + len, OL_METRICS_CAP - len);
        if (len < OL_METRICS_CAP && d->cluster)
            len += ol_cluster_metrics(d->cluster, a->scratch + len, OL_METRICS_CAP - len);
        if (len < OL_METRICS_CAP && d->net)
            len += ol_daemon_net_metrics(d, a->scratch + len, OL_METRICS_CAP - len);
        if (len < OL_METRICS_CAP && d->kvpool)
            len += ol_daemon_kvpool_metrics(d, a->scratch + len, OL_METRICS_CAP - len);
        if (len < OL_METRICS_CAP && d->kvucx)
            len += ol_daemon_kvucx_metrics(d, a->scratch + len, OL_METRICS_CAP - len);
        if (len < OL_METRICS_CAP && d->cstore)
            len += ol_daemon_cstore_metrics(d, a->scratch + len, OL_METRICS_CAP - len);
        if (len >= OL_METRICS_CAP)
            ol_http_resp_simple(r, 500, "text/plain", "metrics too large\n", 18);
        else
            ol_http_resp_simple(r, 200, "text/plain; version=0.0.4", a->scratch, len);
        return;
    }
    if (ol_path_is(path, plen, "/_openlake/cluster/probe")) {
        ol_admin_cluster_route(core, r, path, plen, q, qlen);
        return;
    }
    if (ol_path_is(path, plen, "/_openlake/disks")) {
        ol_admin_disks_route(core, r, path, plen, q, qlen);
        return;
    }
    if (ol_path_is(path, plen, "/_openlake/heal")) {
        ol_admin_heal_route(core, r, path, plen, q, qlen);
        return;
    }
    if (plen > 17 && memcmp(path, "/_openlake/debug/", 17) == 0 && d->cfg.http.debug_endpoints) {
        ol_debug_route(core, r, path, plen, q, qlen);
        return;
    }
    ol_http_resp_simple(r, 404, "text/plain", "no such admin endpoint\n", 23);
}

static void ol_admin_on_body(ol_http_req *r, const char *data, size_t len)
{
    if (ol_s3_owns(ol_http_req_udata(r))) {
        ol_s3_on_body(r, data, len);
        return;
    }
    struct ol_admin_req *s = ol_http_req_udata(r);
#ifdef OL_FAULTS
    if (s && s->kind == OL_ADM_FAULTS) {
        if (s->bytes < OL_FAULT_SPEC_MAX)
            memcpy(s->spec + s->bytes, data,
                   len < OL_FAULT_SPEC_MAX - s->bytes ? len : OL_FAULT_SPEC_MAX - s->bytes);
        s->bytes += len;
        return;
    }
#endif
    if (!s || s->kind != OL_ADM_SINK)
        return;
    EVP_DigestUpdate(s->md, data, len);
    s->bytes += len;
}

static void ol_admin_on_body_end(ol_http_req *r)
{
    if (ol_s3_owns(ol_http_req_udata(r))) {
        ol_s3_on_body_end(r);
        return;
    }
    struct ol_admin_req *s = ol_http_req_udata(r);
#ifdef OL_FAULTS
    if (s && s->kind == OL_ADM_FAULTS)
        return ol_faults_body_end(r, s);
#endif
    if (!s || s->kind != OL_ADM_SINK)
        return;
    unsigned char md[32];
    unsigned mdlen = 0;
    EVP_DigestFinal_ex(s->md, md, &mdlen);
    char body[160];
    int n = snprintf(body, sizeof body, "{\"bytes\":%llu,\"sha256\":\"", (unsigned long long)s->bytes);
    for (unsigned i = 0; i < mdlen; i++)
        n += snprintf(body + n, sizeof body - (size_t)n, "%02x", md[i]);
    n += snprintf(body + n, sizeof body - (size_t)n, "\"}\n");
    ol_state_free(s);
    ol_http_req_set_udata(r, NULL);
    ol_http_resp_simple(r, 200, "application/json", body, (size_t)n);
}

static void ol_admin_on_drain(ol_http_req *r)
{
    if (ol_s3_owns(ol_http_req_udata(r))) {
        ol_s3_on_drain(r);
        return;
    }
    struct ol_admin_req *s = ol_http_req_udata(r);
    if (s && s->kind == OL_ADM_SOURCE)
        ol_source_pump(r, s);
}

static void ol_admin_on_abort(ol_http_req *r)
{
    if (ol_s3_owns(ol_http_req_udata(r))) {
        ol_s3_on_abort(r);
        return;
    }
    struct ol_admin_req *s = ol_http_req_udata(r);
    if (s)
        ol_state_free(s);
}

static void ol_admin_on_timeout(ol_http_req *r)
{
    ol_s3_on_timeout(r);   /* S3 answers RequestTimeout; admin paths get the server's 408 */
}

const struct ol_http_handler ol_admin_handler = {
    .on_request = ol_admin_on_request,
    .on_body = ol_admin_on_body,
    .on_body_end = ol_admin_on_body_end,
    .on_drain = ol_admin_on_drain,
    .on_abort = ol_admin_on_abort,
    .on_timeout = ol_admin_on_timeout,
};

int ol_admin_init(struct ol_core *core, char *err, size_t errlen)
{
    struct ol_admin *a = calloc(1, sizeof *a);
    if (!a)
        goto oom;
    core->admin = a;
    if (ol_pool_init(&a->states, sizeof(struct ol_admin_req), OL_ADMIN_STATES) < 0)
        goto oom;
    a->scratch = mmap(NULL, OL_METRICS_CAP, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (a->scratch == MAP_FAILED) {
        a->scratch = NULL;
        goto oom;
    }
    for (; a->nmds < OL_ADMIN_STATES; a->nmds++)
        if (!(a->mds[a->nmds] = EVP_MD_CTX_new()))
            goto oom;
    pthread_once(&ol_pattern_once, ol_pattern_init);
    return 0;
oom:
    snprintf(err, errlen, "admin: out of memory");
    ol_admin_exit(core);
    return -ENOMEM;
}

void ol_admin_exit(struct ol_core *core)
{
    struct ol_admin *a = core->admin;
    if (!a)
        return;
    for (unsigned i = 0; i < a->nmds; i++)
        EVP_MD_CTX_free(a->mds[i]);
    if (a->scratch)
        munmap(a->scratch, OL_METRICS_CAP);
    ol_pool_exit(&a->states);
    free(a);
    core->admin = NULL;
}
