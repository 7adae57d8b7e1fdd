/*
 * cmd_cluster.c - `openlake cluster status`: the cluster as etcd knows it,
 * and whether each node answers; `openlake cluster topology [--probe]`:
 * the KV members and their share of the keys, and with --probe the node
 * RPC measured between every pair of nodes (each node's signed
 * /_openlake/cluster/probe, one node after another); `openlake cluster
 * drain|undrain NODE`: the node's drain key (cluster/member.h) put or
 * deleted, then its record waited on until it says drained / active. And
 * the one parser of `cluster`, `node` and `disk` (ol_cl_main), which runs
 * `node info` and `disk info` from cmd_node.c.
 *
 * Owns: reading the members straight from etcd (cluster/etcd.h, the same
 * records the nodes keep: cluster/member.h; shared with cmd_node.c
 * through cli.h), writing drain keys, asking
 * each node's /_openlake/health/ready and reading its KV figures (bytes
 * held, hits, misses) from its /_openlake/metrics, the table or JSON, and
 * the exit status: 0 when every etcd endpoint is healthy, every node is
 * ready and active (or draining or drained: asked for) and the nodes'
 * records state the same cluster.kv_replicas, 1 when anything is
 * degraded (or etcd cannot be read), a node is unknown, or a drain did not
 * finish in --wait-ms; 2 usage.
 *
 * Where etcd is: --config FILE (a node's own configuration, read as the
 * daemon reads it, environment included: its [cluster] section), or
 * --etcd URL[,URL...] --cluster NAME, with the etcd user, password file
 * and TLS files as flags (a password itself never: a flag shows in ps).
 */
#include "cli/admin.h"
#include "cli/cli.h"
#include "cli/output.h"
#include "base/config.h"
#include "cluster/etcd.h"
#include "cluster/member.h"
#include "cluster/place.h"
#include "cluster/pool_rec.h"
#include "store/format.h"
#include "store/layout.h"

#include <jansson.h>

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define OL_CLUSTER_PROBE_MS 2000
#define OL_DRAIN_WAIT_MS    30000   /* drain and undrain: how long to wait by default */
#define OL_DRAIN_POLL_MS    200

struct ol_cl_args {
    const char *sub, *node, *config, *etcd, *cluster, *user, *password_file, *ca, *cert, *key,
        *timeout, *wait, *addr;
    /* topology --probe */
    bool probe;
    const char *mib, *access_key, *secret_key, *secret_key_file, *credentials, *region;
};

#define OL_TOPO_POLL_MS   100
#define OL_TOPO_RESP_MAX  (1u << 20)

#define OL_CLUSTER_METRICS_MAX (8u << 20)   /* a metrics page longer than this: not read */

static int on_node(void *arg, const struct ol_etcd_kv *kv)
{
    struct ol_cl_list *l = arg;
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 16;
        struct ol_cl_node *nv = realloc(l->v, (size_t)cap * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        l->v = nv;
        l->cap = cap;
    }
    struct ol_cl_node *n = &l->v[l->n];
    memset(n, 0, sizeof *n);
    char why[128];
    if (ol_member_decode(kv->val, kv->vlen, &n->m, why, sizeof why) < 0) {
        l->bad++;
        return 0;
    }
    n->m.mod_revision = kv->mod_revision;
    l->n++;
    return 0;
}

static size_t discard(char *p, size_t sz, size_t n, void *arg)
{
    (void)p, (void)arg;
    return sz * n;
}

/* A response body into a bounded buffer (a longer one fails the transfer). */
struct ol_cl_body {
    char *p;
    size_t len, cap;
};

static size_t take_body(char *p, size_t sz, size_t n, void *arg)
{
    struct ol_cl_body *b = arg;
    size_t add = sz * n;
    if (b->len + add + 1 > b->cap) {
        if (b->len + add + 1 > OL_CLUSTER_METRICS_MAX)
            return 0;
        size_t cap = b->cap ? b->cap : 65536;
        while (cap < b->len + add + 1)
            cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np)
            return 0;
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, add);
    b->len += add;
    b->p[b->len] = 0;
    return add;
}

/* GET http(s)://<s3_addr><path> (https checked against the system's CAs;
 * the record's address pasted in: a record is written by a node or an
 * operator with etcd access, not by a client): the curl result, *http the
 * status; the body into b (NULL: discarded). */
static CURLcode node_get(const struct ol_cl_node *n, const char *path, long *http,
                         struct ol_cl_body *b)
{
    CURL *c = curl_easy_init();
    if (!c)
        return CURLE_OUT_OF_MEMORY;
    char url[400];
    snprintf(url, sizeof url, "%s://%s%s", n->m.s3_tls ? "https" : "http", n->m.s3_addr, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)OL_CLUSTER_PROBE_MS);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, b ? take_body : discard);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    CURLcode cc = curl_easy_perform(c);
    if (cc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, http);
    curl_easy_cleanup(c);
    return cc;
}

/* The sum over tenants of a node's metric `name{tenant="..."[,rest]} V`
 * (rest: the other label, e.g. tier="ram", or NULL for none). */
static uint64_t sum_metric(const char *page, const char *name, const char *rest)
{
    uint64_t sum = 0;
    size_t nl = strlen(name);
    for (const char *l = page; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        if (strncmp(l, name, nl) != 0 || l[nl] != '{')
            continue;
        const char *close = strchr(l + nl, '}'), *eol = strchr(l, '\n');
        if (!close || (eol && close > eol))
            continue;
        if (rest) {
            const char *r = strstr(l + nl, rest);
            if (!r || r > close)
                continue;
        }
        sum += strtoull(close + 1, NULL, 10);
    }
    return sum;
}

/* The node's health/ready, and its KV figures from its metrics when it
 * has a KV service. */
void ol_cl_probe(struct ol_cl_node *n)
{
    CURLcode cc = node_get(n, "/_openlake/health/ready", &n->http, NULL);
    if (cc != CURLE_OK) {
        n->ready = -1;
        snprintf(n->why, sizeof n->why, "%s", curl_easy_strerror(cc));
        return;
    }
    n->ready = n->http == 200;
    if (!n->ready)
        snprintf(n->why, sizeof n->why, "health/ready: HTTP %ld", n->http);
    if (!n->m.kv_addr[0] && !n->m.kv_slab_bytes)
        return;
    struct ol_cl_body b = {0};
    long http = 0;
    if (node_get(n, "/_openlake/metrics", &http, &b) == CURLE_OK && http == 200 && b.p &&
        strstr(b.p, "openlake_kv_tenant_hits_total{")) {
        n->kv = true;
        n->kv_hits = sum_metric(b.p, "openlake_kv_tenant_hits_total", NULL);
        n->kv_misses = sum_metric(b.p, "openlake_kv_tenant_misses_total", NULL);
        n->kv_ram = sum_metric(b.p, "openlake_kv_tenant_used_bytes", "tier=\"ram\"");
        n->kv_disk = sum_metric(b.p, "openlake_kv_tenant_used_bytes", "tier=\"disk\"");
    }
    free(b.p);
}

static int cmp_node(const void *a, const void *b)
{
    const struct ol_cl_node *x = a, *y = b;
    return (x->m.id > y->m.id) - (x->m.id < y->m.id);
}

const char *ol_cl_uptime(int64_t started, char *buf, size_t len)
{
    long long s = (long long)time(NULL) - started;
    if (started <= 0 || s < 0)
        snprintf(buf, len, "-");
    else if (s < 120)
        snprintf(buf, len, "%llds", s);
    else if (s < 7200)
        snprintf(buf, len, "%lldm", s / 60);
    else if (s < 172800)
        snprintf(buf, len, "%lldh", s / 3600);
    else
        snprintf(buf, len, "%lldd", s / 86400);
    return buf;
}

/* The node records under the cluster's prefix, in id order: 0 or -errno
 * with err. */
int ol_cl_read_members(struct ol_etcd *e, const char *name, struct ol_cl_list *l, int64_t *rev,
                        char *err, size_t errlen)
{
    ol_member_prefix(name, l->prefix, sizeof l->prefix);
    int rc = ol_etcd_range_prefix(e, l->prefix, on_node, l, rev, err, errlen);
    if (rc == -ENOMEM && !err[0])
        snprintf(err, errlen, "out of memory");
    if (rc == 0 && l->n)
        qsort(l->v, (size_t)l->n, sizeof *l->v, cmp_node);
    return rc;
}

void ol_cl_node_json(struct ol_json *j, const struct ol_cl_node *n)
{
    ol_json_key(j, "id");
    ol_json_int(j, n->m.id);
    ol_json_key(j, "state");
    ol_json_str(j, n->m.state);
    ol_json_key(j, "ready");
    ol_json_bool(j, n->ready == 1);
    ol_json_key(j, "reachable");
    ol_json_bool(j, n->ready >= 0);
    ol_json_key(j, "why");
    ol_json_str(j, n->why[0] ? n->why : NULL);
    ol_json_key(j, "version");
    ol_json_str(j, n->m.version);
    ol_json_key(j, "host");
    ol_json_str(j, n->m.host);
    ol_json_key(j, "pid");
    ol_json_int(j, n->m.pid);
    ol_json_key(j, "started");
    ol_json_int(j, n->m.started);
    ol_json_key(j, "s3_addr");
    ol_json_str(j, n->m.s3_addr);
    ol_json_key(j, "kv_addr");
    ol_json_str(j, n->m.kv_addr);
    ol_json_key(j, "rpc_addr");
    ol_json_str(j, n->m.rpc_addr);
    ol_json_key(j, "kv_slab_bytes");
    ol_json_uint(j, n->m.kv_slab_bytes);
    ol_json_key(j, "kv_disk_bytes");
    ol_json_uint(j, n->m.kv_disk_bytes);
    ol_json_key(j, "drives");
    ol_json_int(j, n->m.drives);
    ol_json_key(j, "kv_replicas");
    if (n->m.kv_replicas > 0)
        ol_json_int(j, n->m.kv_replicas);
    else
        ol_json_null(j);
    ol_json_key(j, "kv");
    if (!n->kv) {
        ol_json_null(j);
    } else {
        ol_json_object_begin(j);
        ol_json_key(j, "used_ram_bytes");
        ol_json_uint(j, n->kv_ram);
        ol_json_key(j, "used_disk_bytes");
        ol_json_uint(j, n->kv_disk);
        ol_json_key(j, "hits");
        ol_json_uint(j, n->kv_hits);
        ol_json_key(j, "misses");
        ol_json_uint(j, n->kv_misses);
        ol_json_object_end(j);
    }
}

/* active, or draining / drained: an operator asked for it, not a fault. */
static bool serving_state(const char *state)
{
    return !strcmp(state, "active") || !strcmp(state, "draining") || !strcmp(state, "drained");
}

static int status(const struct ol_cli *cli, struct ol_etcd *e, const char *name, int n_ep)
{
    char err[512] = "", herr[512] = "";
    int healthy = 0;
    ol_etcd_health(e, &healthy, herr, sizeof herr);
    struct ol_cl_list l = {0};
    int64_t rev = 0;
    int rc = ol_cl_read_members(e, name, &l, &rev, err, sizeof err);
    if (rc == 0)
        for (int i = 0; i < l.n; i++)
            ol_cl_probe(&l.v[i]);
    bool degraded = rc < 0 || healthy < n_ep || l.bad > 0;
    for (int i = 0; i < l.n; i++)
        degraded |= l.v[i].ready != 1 || !serving_state(l.v[i].m.state);
    /* nodes that place keys with different cluster.kv_replicas */
    char differ[512];
    struct ol_member *ms = calloc(l.n > 0 ? (size_t)l.n : 1, sizeof *ms);
    if (!ms) {
        fprintf(stderr, "openlake cluster: out of memory\n");
        free(l.v);
        return OL_EXIT_FAIL;
    }
    for (int i = 0; i < l.n; i++)
        ms[i] = l.v[i].m;
    bool replicas_differ = ol_member_replicas_differ(ms, l.n, differ, sizeof differ);
    free(ms);
    degraded |= replicas_differ;

    if (cli->out & OL_OUT_JSON) {
        struct ol_json j;
        ol_json_init(&j, stdout);
        ol_json_object_begin(&j);
        ol_json_key(&j, "cluster");
        ol_json_str(&j, name);
        ol_json_key(&j, "degraded");
        ol_json_bool(&j, degraded);
        ol_json_key(&j, "etcd");
        ol_json_object_begin(&j);
        ol_json_key(&j, "endpoints");
        ol_json_int(&j, n_ep);
        ol_json_key(&j, "healthy");
        ol_json_int(&j, healthy);
        ol_json_key(&j, "error");
        ol_json_str(&j, rc < 0 ? err : healthy < n_ep ? herr : NULL);
        ol_json_object_end(&j);
        ol_json_key(&j, "revision");
        ol_json_int(&j, rev);
        ol_json_key(&j, "unreadable_records");
        ol_json_int(&j, l.bad);
        ol_json_key(&j, "kv_replicas_differ");
        ol_json_str(&j, replicas_differ ? differ : NULL);
        ol_json_key(&j, "nodes");
        ol_json_array_begin(&j);
        for (int i = 0; i < l.n; i++) {
            ol_json_object_begin(&j);
            ol_cl_node_json(&j, &l.v[i]);
            ol_json_object_end(&j);
        }
        ol_json_array_end(&j);
        ol_json_object_end(&j);   /* the top level ends its line */
    } else {
        printf("cluster %s: %d node%s", name, l.n, l.n == 1 ? "" : "s");
        if (rc == 0)
            printf(" at etcd revision %lld", (long long)rev);
        printf("; etcd: %d of %d endpoint%s healthy\n", healthy, n_ep, n_ep == 1 ? "" : "s");
        if (healthy < n_ep)
            printf("  etcd: %s\n", herr);
        if (rc < 0)
            printf("  cannot read the members: %s\n", err);
        if (l.bad)
            printf("  %d node record%s this version cannot read (a newer openlake?)\n", l.bad,
                   l.bad == 1 ? "" : "s");
        if (replicas_differ)
            printf("  cluster.kv_replicas differs: %s (each node places keys with its own: "
                   "set it the same on every node)\n", differ);
        if (l.n) {
            static const struct ol_col cols[] = {
                {"node", "NODE", OL_ALIGN_RIGHT},   {"state", "STATE", OL_ALIGN_LEFT},
                {"ready", "READY", OL_ALIGN_LEFT},  {"version", "VERSION", OL_ALIGN_LEFT},
                {"up", "UP", OL_ALIGN_RIGHT},       {"host", "HOST", OL_ALIGN_LEFT},
                {"s3", "S3", OL_ALIGN_LEFT},        {"kv", "KV", OL_ALIGN_LEFT},
                {"slab", "KV SLAB", OL_ALIGN_RIGHT}, {"used", "KV USED", OL_ALIGN_RIGHT},
                {"hit", "KV HIT", OL_ALIGN_RIGHT},  {"drives", "DRIVES", OL_ALIGN_RIGHT}};
            ol_table *t = ol_table_create(cols, sizeof cols / sizeof cols[0]);
            for (int i = 0; i < l.n; i++) {
                const struct ol_cl_node *n = &l.v[i];
                char up[32];
                ol_table_row(t);
                ol_table_int(t, n->m.id);
                ol_table_str(t, n->m.state);
                ol_table_str(t, n->ready == 1 ? "yes" : n->ready == 0 ? "no" : "unreachable");
                ol_table_str(t, n->m.version);
                ol_table_str(t, ol_cl_uptime(n->m.started, up, sizeof up));
                ol_table_str(t, n->m.host);
                ol_table_str(t, n->m.s3_addr);
                ol_table_str(t, n->m.kv_addr[0] ? n->m.kv_addr : "-");
                ol_table_strf(t, "%.1f GiB", (double)n->m.kv_slab_bytes / (1 << 30));
                if (!n->kv) {
                    ol_table_str(t, "-");
                    ol_table_str(t, "-");
                } else {
                    ol_table_strf(t, "%.2f GiB", (double)(n->kv_ram + n->kv_disk) / (1 << 30));
                    uint64_t asked = n->kv_hits + n->kv_misses;
                    if (asked)
                        ol_table_strf(t, "%.1f%%", 100.0 * (double)n->kv_hits / (double)asked);
                    else
                        ol_table_str(t, "-");
                }
                ol_table_int(t, n->m.drives);
            }
            ol_table_print(t, stdout, cli->out);
            ol_table_destroy(t);
            for (int i = 0; i < l.n; i++)
                if (l.v[i].ready != 1)
                    printf("  node %lld: %s\n", (long long)l.v[i].m.id, l.v[i].why);
        }
    }
    free(l.v);
    return degraded ? OL_EXIT_FAIL : OL_EXIT_OK;
}

/* ---- topology ----------------------------------------------------------------- */

/* One node's probe answer: its peers' measurements. */
struct ol_topo_row {
    json_t *peers;            /* the "peers" array, or NULL */
    char why[200];            /* why there is none */
};

/* Asks node n to probe its peers and waits for the answer. */
static void probe_node(const struct ol_cli_cred *cred, const struct ol_cl_node *n, int mib,
                       int nodes, struct ol_topo_row *row, char *resp)
{
    char host[256], port[16], q[32];
    if (ol_cli_admin_addr(n->m.s3_addr, n->m.s3_tls, host, port, row->why, sizeof row->why) < 0)
        return;
    snprintf(q, sizeof q, "mib=%d", mib);
    int st = ol_cli_admin_request(cred, host, port, "POST", "/_openlake/cluster/probe", q, resp,
                                  OL_TOPO_RESP_MAX);
    if (st != 202) {
        snprintf(row->why, sizeof row->why, "%s", st < 0 ? strerror(-st) : resp);
        row->why[strcspn(row->why, "\n")] = 0;
        return;
    }
    json_error_t je;
    json_t *start = json_loads(resp, 0, &je);
    json_int_t id = json_integer_value(json_object_get(start, "probe"));
    json_decref(start);
    /* each peer: 16 round trips and mib MiB each way; 5 s a call at most */
    long limit_ms = 10000 + (long)nodes * (2000 + (long)mib * 100);
    for (long waited = 0; waited < limit_ms; waited += OL_TOPO_POLL_MS) {
        struct timespec ts = {0, OL_TOPO_POLL_MS * 1000000L};
        nanosleep(&ts, NULL);
        st = ol_cli_admin_request(cred, host, port, "GET", "/_openlake/cluster/probe", "", resp,
                                  OL_TOPO_RESP_MAX);
        if (st != 200) {
            snprintf(row->why, sizeof row->why, "%s", st < 0 ? strerror(-st) : resp);
            row->why[strcspn(row->why, "\n")] = 0;
            return;
        }
        json_t *js = json_loads(resp, 0, &je);
        if (!js || json_integer_value(json_object_get(js, "probe")) != id) {
            json_decref(js);
            snprintf(row->why, sizeof row->why, "its probe was replaced by another");
            return;
        }
        if (!json_is_true(json_object_get(js, "running"))) {
            row->peers = json_incref(json_object_get(js, "peers"));
            json_decref(js);
            return;
        }
        json_decref(js);
    }
    snprintf(row->why, sizeof row->why, "no answer within %ld s", limit_ms / 1000);
}

/* Node a's measurement of peer b (NULL when none). */
static json_t *pair(const struct ol_topo_row *rows, const struct ol_cl_list *l, int a, int b)
{
    size_t i;
    json_t *p;
    if (!rows[a].peers)
        return NULL;
    json_array_foreach(rows[a].peers, i, p)
        if (json_integer_value(json_object_get(p, "peer")) == l->v[b].m.id)
            return p;
    return NULL;
}

static void matrix(const struct ol_cli *cli, const struct ol_cl_list *l,
                   const struct ol_topo_row *rows, const char *title, int what)
{
    struct ol_col *cols = calloc((size_t)l->n + 1, sizeof *cols);
    char (*names)[24] = calloc((size_t)l->n, sizeof *names);
    if (!cols || !names) {
        free(cols);
        free(names);
        return;
    }
    cols[0] = (struct ol_col){"from", "FROM \\ TO", OL_ALIGN_RIGHT};
    for (int i = 0; i < l->n; i++) {
        snprintf(names[i], sizeof names[i], "%lld", (long long)l->v[i].m.id);
        cols[i + 1] = (struct ol_col){names[i], names[i], OL_ALIGN_RIGHT};
    }
    printf("\n%s\n", title);
    ol_table *t = ol_table_create(cols, (size_t)l->n + 1);
    ol_table_set_indent(t, 2);
    for (int a = 0; a < l->n; a++) {
        ol_table_row(t);
        ol_table_int(t, l->v[a].m.id);
        for (int b = 0; b < l->n; b++) {
            json_t *p = a == b ? NULL : pair(rows, l, a, b);
            if (!p || !json_is_true(json_object_get(p, "ok")))
                ol_table_str(t, a == b ? "." : p ? "failed" : "-");
            else if (what == 0)
                ol_table_strf(t, "%.0f", json_number_value(json_object_get(p, "rtt_us")));
            else
                ol_table_strf(t, "%.2f",
                              json_number_value(json_object_get(p, "to_bytes_per_s")) / 1e9);
        }
    }
    ol_table_print(t, stdout, cli->out & ~OL_OUT_JSON);
    ol_table_destroy(t);
    free(cols);
    free(names);
}

/* The object store's pools (docs/cluster.md "Pools, sets and drives"). */
struct ol_topo_pools {
    struct ol_pool_rec v[8];
    int n, bad;
    /* the set owners of pool 0 (docs/cluster.md "Ordering"): node, token */
    int64_t owner[OL_POOL_MAX_SETS], token[OL_POOL_MAX_SETS];
};

static int on_owner(void *arg, const struct ol_etcd_kv *kv)
{
    struct ol_topo_pools *p = arg;
    unsigned set;
    int64_t node;
    if (ol_pool_owner_parse(kv->key, kv->klen, kv->val, kv->vlen, OL_POOL_MAX_SETS, &set,
                            &node) == 0) {
        p->owner[set] = node;
        p->token[set] = kv->mod_revision;
    }
    return 0;
}

static int on_pool(void *arg, const struct ol_etcd_kv *kv)
{
    struct ol_topo_pools *p = arg;
    char err[256];
    if (kv->val && p->n < 8 &&
        ol_pool_rec_decode(kv->val, kv->vlen, &p->v[p->n], err, sizeof err) == 0)
        p->n++;
    else if (kv->val)
        p->bad++;
    return 0;
}

static bool member_up(const struct ol_cl_list *l, int64_t id)
{
    for (int i = 0; i < l->n; i++)
        if (l->v[i].m.id == id)
            return true;
    return false;
}

/* Each pool: its shape, then every set's drives (node:drive), how many of
 * them are on live members, and the node failures it survives. */
static void pools_print(const struct ol_cli *cli, const struct ol_topo_pools *ps,
                        const struct ol_cl_list *l, struct ol_json *j)
{
    if (j) {
        ol_json_key(j, "store_pools");
        ol_json_array_begin(j);
    }
    for (int k = 0; k < ps->n; k++) {
        const struct ol_pool_rec *r = &ps->v[k];
        const struct ol_pool_shape *sh = &r->shape;
        unsigned sets = ol_pool_sets(sh), wb = ol_pool_write_budget(sh);
        if (j) {
            ol_json_object_begin(j);
            ol_json_key(j, "pool");
            ol_json_int(j, r->pool);
            ol_json_key(j, "nodes");
            ol_json_array_begin(j);
            for (unsigned i = 0; i < sh->nodes; i++)
                ol_json_int(j, r->nodes[i]);
            ol_json_array_end(j);
            ol_json_key(j, "drives_per_node");
            ol_json_int(j, sh->drives_per_node);
            ol_json_key(j, "set_drives");
            ol_json_int(j, sh->set_drives);
            ol_json_key(j, "parity");
            ol_json_int(j, sh->parity);
            ol_json_key(j, "write_quorum");
            ol_json_int(j, sh->set_drives - wb);
            ol_json_key(j, "sets");
            ol_json_array_begin(j);
        } else {
            printf("\nobject store pool %u: %u node%s of %u drive%s, %u set%s of %u drives, "
                   "parity %u (reads need %u drives of a set, writes %u)\n", r->pool, sh->nodes,
                   sh->nodes == 1 ? "" : "s", sh->drives_per_node,
                   sh->drives_per_node == 1 ? "" : "s", sets, sets == 1 ? "" : "s",
                   sh->set_drives, sh->parity, sh->set_drives - sh->parity,
                   sh->set_drives - wb);
        }
        static const struct ol_col cols[] = {
            {"set", "SET", OL_ALIGN_RIGHT},
            {"drives", "DRIVES (NODE:DRIVE)", OL_ALIGN_LEFT},
            {"up", "UP", OL_ALIGN_RIGHT},
            {"owner", "OWNER", OL_ALIGN_RIGHT},
            {"reads", "NODES IT MAY LOSE: READS", OL_ALIGN_RIGHT},
            {"writes", "WRITES", OL_ALIGN_RIGHT}};
        ol_table *t = j ? NULL : ol_table_create(cols, sizeof cols / sizeof cols[0]);
        if (t)
            ol_table_set_indent(t, 2);
        for (unsigned set = 0; set < sets; set++) {
            char drv[32 * 24];
            size_t dl = 0;
            unsigned up = 0;
            if (j) {
                ol_json_object_begin(j);
                ol_json_key(j, "set");
                ol_json_int(j, set);
                ol_json_key(j, "drives");
                ol_json_array_begin(j);
            }
            for (unsigned g = set * sh->set_drives; g < (set + 1) * sh->set_drives; g++) {
                int64_t node = r->nodes[ol_pool_node_of(sh->nodes, g)];
                unsigned drive = ol_pool_drive_of(sh->nodes, g);
                bool live = member_up(l, node);
                up += live;
                dl += (size_t)snprintf(drv + dl, sizeof drv - dl, "%s%lld:%u", dl ? " " : "",
                                       (long long)node, drive);
                if (dl >= sizeof drv)
                    dl = sizeof drv - 1;
                if (j) {
                    char u[37];
                    ol_format_uuid_str(r->uuids[g], u);
                    ol_json_object_begin(j);
                    ol_json_key(j, "node");
                    ol_json_int(j, node);
                    ol_json_key(j, "drive");
                    ol_json_int(j, drive);
                    ol_json_key(j, "uuid");
                    ol_json_str(j, u);
                    ol_json_key(j, "node_up");
                    ol_json_bool(j, live);
                    ol_json_object_end(j);
                }
            }
            unsigned rd = ol_pool_survives(sh, set, sh->parity), wr = ol_pool_survives(sh, set, wb);
            bool owned = r->pool == 0 && ps->owner[set] >= 0;
            if (j) {
                ol_json_array_end(j);
                ol_json_key(j, "drives_up");
                ol_json_int(j, up);
                ol_json_key(j, "owner");
                if (owned)
                    ol_json_int(j, ps->owner[set]);
                else
                    ol_json_raw(j, "null");
                ol_json_key(j, "owner_token");
                ol_json_int(j, owned ? ps->token[set] : 0);
                ol_json_key(j, "node_failures_survived_reads");
                ol_json_int(j, rd);
                ol_json_key(j, "node_failures_survived_writes");
                ol_json_int(j, wr);
                ol_json_object_end(j);
                continue;
            }
            ol_table_row(t);
            ol_table_int(t, set);
            ol_table_str(t, drv);
            ol_table_strf(t, "%u/%u", up, sh->set_drives);
            if (owned)
                ol_table_int(t, ps->owner[set]);
            else
                ol_table_str(t, "-");
            ol_table_int(t, rd);
            ol_table_int(t, wr);
        }
        if (j) {
            ol_json_array_end(j);
            ol_json_object_end(j);
        } else {
            ol_table_print(t, stdout, cli->out);
            ol_table_destroy(t);
        }
    }
    if (j)
        ol_json_array_end(j);
    if (!j && ps->bad)
        printf("  %d pool record%s this version cannot read\n", ps->bad, ps->bad == 1 ? "" : "s");
}

static int topology(const struct ol_cli *cli, struct ol_etcd *e, const char *name,
                    const struct ol_cli_cred *cred, int mib)
{
    char err[512] = "";
    struct ol_cl_list l = {0};
    int64_t rev = 0;
    int rc = ol_cl_read_members(e, name, &l, &rev, err, sizeof err);
    if (rc < 0) {
        free(l.v);
        return ol_cli_fail(cli, "cluster", "cannot read the members: %s", err);
    }
    struct ol_member *ms = calloc((size_t)l.n + 1, sizeof *ms);
    struct ol_place_member *kv = calloc((size_t)l.n + 1, sizeof *kv);
    struct ol_topo_row *rows = calloc((size_t)l.n + 1, sizeof *rows);
    char *resp = cred ? malloc(OL_TOPO_RESP_MAX) : NULL;
    if (!ms || !kv || !rows || (cred && !resp)) {
        free(ms), free(kv), free(rows), free(resp), free(l.v);
        return ol_cli_fail(cli, "cluster", "out of memory");
    }
    for (int i = 0; i < l.n; i++)
        ms[i] = l.v[i].m;
    int nkv = ol_place_kv_members(ms, l.n, kv);
    long double total = 0;
    for (int i = 0; i < nkv; i++)
        total += kv[i].weight;
    /* the pool's capacity: the KV members' slabs and disk tiers */
    uint64_t pool_slab = 0, pool_disk = 0;
    for (int i = 0, k = 0; i < l.n && k < nkv; i++)
        if (ms[i].id == kv[k].id) {
            pool_slab += ms[i].kv_slab_bytes;
            pool_disk += ms[i].kv_disk_bytes;
            k++;
        }
    struct ol_topo_pools pools = {.n = 0};
    for (unsigned k = 0; k < OL_POOL_MAX_SETS; k++)
        pools.owner[k] = -1;
    char prefix[160], oprefix[160];
    snprintf(prefix, sizeof prefix, "/openlake/%s/store/pools/", name);
    snprintf(oprefix, sizeof oprefix, "/openlake/%s/store/owners/0/", name);
    int64_t prev;
    if (ol_etcd_range_prefix(e, prefix, on_pool, &pools, &prev, err, sizeof err) < 0 ||
        ol_etcd_range_prefix(e, oprefix, on_owner, &pools, &prev, err, sizeof err) < 0) {
        free(ms), free(kv), free(rows), free(resp), free(l.v);
        return ol_cli_fail(cli, "cluster", "cannot read the object store's pools: %s", err);
    }
    bool failed = l.bad > 0 || pools.bad > 0;
    if (cred)
        for (int i = 0; i < l.n; i++) {
            probe_node(cred, &l.v[i], mib, l.n, &rows[i], resp);
            for (int b = 0; b < l.n; b++) {
                json_t *p = b == i ? NULL : pair(rows, &l, i, b);
                failed |= b != i && (!p || !json_is_true(json_object_get(p, "ok")));
            }
        }

    if (cli->out & OL_OUT_JSON) {
        struct ol_json j;
        ol_json_init(&j, stdout);
        ol_json_object_begin(&j);
        ol_json_key(&j, "cluster");
        ol_json_str(&j, name);
        ol_json_key(&j, "revision");
        ol_json_int(&j, rev);
        ol_json_key(&j, "unreadable_records");
        ol_json_int(&j, l.bad);
        ol_json_key(&j, "kv_pool");
        ol_json_object_begin(&j);
        ol_json_key(&j, "members");
        ol_json_int(&j, nkv);
        ol_json_key(&j, "slab_bytes");
        ol_json_uint(&j, pool_slab);
        ol_json_key(&j, "disk_bytes");
        ol_json_uint(&j, pool_disk);
        ol_json_object_end(&j);
        ol_json_key(&j, "nodes");
        ol_json_array_begin(&j);
        for (int i = 0; i < l.n; i++) {
            const struct ol_member *m = &l.v[i].m;
            double share = 0;
            for (int k = 0; k < nkv; k++)
                if (kv[k].id == m->id)
                    share = (double)((long double)kv[k].weight / total);
            ol_json_object_begin(&j);
            ol_json_key(&j, "id");
            ol_json_int(&j, m->id);
            ol_json_key(&j, "state");
            ol_json_str(&j, m->state);
            ol_json_key(&j, "host");
            ol_json_str(&j, m->host);
            ol_json_key(&j, "rpc_addr");
            ol_json_str(&j, m->rpc_addr);
            ol_json_key(&j, "kv_capacity_bytes");
            ol_json_uint(&j, m->kv_slab_bytes + m->kv_disk_bytes);
            ol_json_key(&j, "kv_member");
            ol_json_bool(&j, share > 0);
            ol_json_key(&j, "kv_share");
            char num[32];
            snprintf(num, sizeof num, "%.6f", share);
            ol_json_raw(&j, num);
            if (cred) {
                ol_json_key(&j, "probe");
                if (rows[i].peers) {
                    char *dump = json_dumps(rows[i].peers, JSON_COMPACT);
                    ol_json_raw(&j, dump ? dump : "null");
                    free(dump);
                } else {
                    ol_json_object_begin(&j);
                    ol_json_key(&j, "error");
                    ol_json_str(&j, rows[i].why);
                    ol_json_object_end(&j);
                }
            }
            ol_json_object_end(&j);
        }
        ol_json_array_end(&j);
        pools_print(cli, &pools, &l, &j);
        ol_json_object_end(&j);   /* the top level ends its line */
    } else {
        printf("cluster %s at etcd revision %lld: %d node%s, %d KV member%s; KV pool "
               "%.1f GiB (slabs %.1f GiB, disk tiers %.1f GiB)\n", name, (long long)rev, l.n,
               l.n == 1 ? "" : "s", nkv, nkv == 1 ? "" : "s",
               (double)(pool_slab + pool_disk) / (1 << 30), (double)pool_slab / (1 << 30),
               (double)pool_disk / (1 << 30));
        if (l.bad)
            printf("  %d node record%s this version cannot read (a newer openlake?)\n", l.bad,
                   l.bad == 1 ? "" : "s");
        static const struct ol_col cols[] = {
            {"node", "NODE", OL_ALIGN_RIGHT},       {"state", "STATE", OL_ALIGN_LEFT},
            {"host", "HOST", OL_ALIGN_LEFT},        {"rpc", "RPC", OL_ALIGN_LEFT},
            {"kv", "KV CAPACITY", OL_ALIGN_RIGHT},  {"share", "KV KEYS", OL_ALIGN_RIGHT}};
        ol_table *t = ol_table_create(cols, sizeof cols / sizeof cols[0]);
        for (int i = 0; i < l.n; i++) {
            const struct ol_member *m = &l.v[i].m;
            int k = 0;
            while (k < nkv && kv[k].id != m->id)
                k++;
            ol_table_row(t);
            ol_table_int(t, m->id);
            ol_table_str(t, m->state);
            ol_table_str(t, m->host);
            ol_table_str(t, m->rpc_addr[0] ? m->rpc_addr : "-");
            ol_table_strf(t, "%.1f GiB", (double)(m->kv_slab_bytes + m->kv_disk_bytes) / (1 << 30));
            if (k < nkv)
                ol_table_strf(t, "%.1f%%", (double)(100 * (long double)kv[k].weight / total));
            else
                ol_table_str(t, "-");
        }
        ol_table_print(t, stdout, cli->out);
        ol_table_destroy(t);
        pools_print(cli, &pools, &l, NULL);
        if (cred) {
            matrix(cli, &l, rows, "node RPC round trip, microseconds (median of 16):", 0);
            char title[128];
            snprintf(title, sizeof title, "node RPC, GB/s the row sends to the column (%d MiB):",
                     mib);
            matrix(cli, &l, rows, title, 1);
            for (int i = 0; i < l.n; i++) {
                if (!rows[i].peers) {
                    printf("  node %lld: %s\n", (long long)l.v[i].m.id, rows[i].why);
                    continue;
                }
                size_t k;
                json_t *p;
                json_array_foreach(rows[i].peers, k, p)
                    if (!json_is_true(json_object_get(p, "ok")))
                        printf("  node %lld to %lld: %s\n", (long long)l.v[i].m.id,
                               (long long)json_integer_value(json_object_get(p, "peer")),
                               json_string_value(json_object_get(p, "error")));
            }
        }
    }
    for (int i = 0; i < l.n; i++)
        json_decref(rows[i].peers);
    for (int k = 0; k < pools.n; k++)
        ol_pool_rec_free(&pools.v[k]);
    free(ms), free(kv), free(rows), free(resp), free(l.v);
    return failed ? OL_EXIT_FAIL : OL_EXIT_OK;
}


/* ---- drain, undrain ---------------------------------------------------------------- */

/* Node id's record in l, or NULL. */
const struct ol_cl_node *ol_cl_find_node(const struct ol_cl_list *l, int64_t id)
{
    for (int i = 0; i < l->n; i++)
        if (l->v[i].m.id == id)
            return &l->v[i];
    return NULL;
}

int ol_cl_find_exact(void *arg, const struct ol_etcd_kv *kv)
{
    struct ol_cl_exact *x = arg;
    x->found |= kv->klen == strlen(x->key) && !memcmp(kv->key, x->key, kv->klen);
    return 0;
}

/* Waits until node id's record says state want (0), or wait_ms passed or
 * the record went (OL_EXIT_FAIL, said why). */
static int wait_state(const struct ol_cli *cli, struct ol_etcd *e, const char *name, int64_t id,
                      const char *want, long wait_ms)
{
    char err[512] = "", last[16] = "";
    for (long waited = 0;; waited += OL_DRAIN_POLL_MS) {
        struct ol_cl_list l = {0};
        int64_t rev;
        err[0] = 0;
        int rc = ol_cl_read_members(e, name, &l, &rev, err, sizeof err);
        const struct ol_cl_node *n = rc == 0 ? ol_cl_find_node(&l, id) : NULL;
        if (n)
            snprintf(last, sizeof last, "%s", n->m.state);
        free(l.v);
        if (rc == 0 && !n)
            return ol_cli_fail(cli, "cluster", "node %lld left the cluster while waiting to "
                               "be %s (stopped?)", (long long)id, want);
        if (n && !strcmp(last, want))
            return OL_EXIT_OK;
        if (waited >= wait_ms)
            return ol_cli_fail(cli, "cluster", "node %lld is still %s after %ld ms, not %s%s%s%s",
                               (long long)id, last[0] ? last : "unknown", wait_ms, want,
                               !strcmp(want, "drained") ? ": its KV pool has work in flight, "
                               "or it has not seen the drain yet" : "",
                               rc < 0 ? "; etcd: " : "", rc < 0 ? err : "");
        struct timespec ts = {0, OL_DRAIN_POLL_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* cluster drain / undrain NODE: the drain key put or deleted, then (wait_ms
 * > 0) waited on until the record says drained / active. */
static int drain(const struct ol_cli *cli, struct ol_etcd *e, const char *name, int64_t id,
                 bool on, long wait_ms)
{
    char err[512] = "", key[200];
    struct ol_cl_list l = {0};
    int64_t rev;
    int rc = ol_cl_read_members(e, name, &l, &rev, err, sizeof err);
    bool running = rc == 0 && ol_cl_find_node(&l, id);
    free(l.v);
    if (rc < 0)
        return ol_cli_fail(cli, "cluster", "cannot read the members: %s", err);
    ol_member_drain_key(name, id, key, sizeof key);
    if (on) {
        if (!running)
            return ol_cli_fail(cli, "cluster", "no node %lld in cluster %s (a node that is "
                               "not running has no record: see cluster status)",
                               (long long)id, name);
        char val[256], host[128] = "";
        gethostname(host, sizeof host - 1);
        int n = snprintf(val, sizeof val, "{\"v\":1,\"at\":%lld,\"host\":\"%s\"}",
                         (long long)time(NULL), strspn(host, "abcdefghijklmnopqrstuvwxyz"
                         "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") == strlen(host) ? host : "?");
        if ((rc = ol_etcd_put(e, key, val, (size_t)n, 0, err, sizeof err)) < 0)
            return ol_cli_fail(cli, "cluster", "cannot ask node %lld to drain: %s",
                               (long long)id, err);
    } else {
        struct ol_cl_exact x = {key, false};
        rc = ol_etcd_range_prefix(e, key, ol_cl_find_exact, &x, &rev, err, sizeof err);
        bool present = x.found;
        if (rc == 0 && present)
            rc = ol_etcd_delete(e, key, err, sizeof err);
        if (rc < 0)
            return ol_cli_fail(cli, "cluster", "cannot lift the drain of node %lld: %s",
                               (long long)id, err);
        if (!present) {
            printf("node %lld was not drained\n", (long long)id);
            return OL_EXIT_OK;
        }
        if (!running) {
            printf("node %lld: drain lifted (it is not running: it starts active)\n",
                   (long long)id);
            return OL_EXIT_OK;
        }
    }
    const char *want = on ? "drained" : "active";
    if (wait_ms == 0) {
        printf("node %lld asked to %s\n", (long long)id, on ? "drain" : "serve again");
        return OL_EXIT_OK;
    }
    rc = wait_state(cli, e, name, id, want, wait_ms);
    if (rc == OL_EXIT_OK)
        printf("node %lld is %s%s\n", (long long)id, want,
               on ? ": it takes no KV keys and has no KV pool work in flight; it can stop" : "");
    return rc;
}

/* cluster status|topology|drain|undrain, node info and disk info: one parser, one way to
 * etcd. */
int ol_cl_main(const struct ol_cli *cli, const char *cmd, int argc, char **argv)
{
    struct ol_cl_args a = {0};
    static const char *const opts[] = {"--config", "--etcd", "--cluster", "--etcd-user",
                                       "--etcd-password-file", "--etcd-ca", "--etcd-cert",
                                       "--etcd-key", "--timeout-ms", "--mib", "--access-key",
                                       "--secret-key", "--secret-key-file", "--credentials",
                                       "--region", "--wait-ms", "--addr", NULL};
    const char **slots[] = {&a.config, &a.etcd, &a.cluster, &a.user, &a.password_file,
                            &a.ca, &a.cert, &a.key, &a.timeout, &a.mib, &a.access_key,
                            &a.secret_key, &a.secret_key_file, &a.credentials, &a.region,
                            &a.wait, &a.addr};
    const char **pos[] = {&a.sub, &a.node};
    /* --probe takes no value: taken out before the valued options */
    char **args = calloc((size_t)argc + 1, sizeof *args);
    if (!args)
        return ol_cli_fail(cli, cmd, "out of memory");
    int nargs = 0;
    for (int i = 0; i < argc; i++) {
        if (i > 0 && !strcmp(argv[i], "--probe") && strcmp(argv[i - 1], "--config") &&
            strcmp(argv[i - 1], "--etcd") && strcmp(argv[i - 1], "--cluster"))
            a.probe = true;
        else
            args[nargs++] = argv[i];
    }
    int rc = ol_cli_options(cli, cmd, nargs, args, opts, slots, pos, 2);
    free(args);
    if (rc)
        return rc;
    static const char *const csubs[] = {"status", "topology", "drain", "undrain", NULL};
    static const char *const nsubs[] = {"info", NULL};
    bool disk_cmd = !strcmp(cmd, "disk");
    bool node_cmd = !strcmp(cmd, "node") || disk_cmd;   /* one node's: NODE optional */
    const char *const *subs = node_cmd ? nsubs : csubs;
    if (!a.sub)
        return ol_cli_usage_error(cli, cmd, "what to do: %s",
                                  node_cmd ? "info" : "status, topology, drain, undrain");
    int sub = 0;
    while (subs[sub] && strcmp(subs[sub], a.sub))
        sub++;
    if (!subs[sub]) {
        const char *s = ol_cli_suggest(a.sub, subs);
        return ol_cli_usage_error(cli, cmd, "unknown subcommand '%s'%s%s%s", a.sub,
                                  s ? " (did you mean '" : "", s ? s : "", s ? "'?)" : "");
    }
    bool topo = !node_cmd && sub == 1, drains = !node_cmd && sub >= 2;
    if (a.node && !drains && !node_cmd)
        return ol_cli_usage_error(cli, cmd, "%s takes no NODE", a.sub);
    if (!a.node && drains)
        return ol_cli_usage_error(cli, cmd, "%s NODE: which node (its id)", a.sub);
    if (a.wait && !drains)
        return ol_cli_usage_error(cli, cmd, "--wait-ms goes with drain and undrain");
    long wait_ms = OL_DRAIN_WAIT_MS;
    if (a.wait) {
        char *end;
        wait_ms = strtol(a.wait, &end, 10);
        if (!*a.wait || *end || wait_ms < 0 || wait_ms > 3600000)
            return ol_cli_usage_error(cli, cmd, "--wait-ms '%s': milliseconds from 0 to "
                                      "3600000", a.wait);
    }
    long long node_id = -1;
    if (a.node) {
        char *end;
        errno = 0;
        node_id = strtoll(a.node, &end, 10);
        if (!*a.node || *end || errno || node_id < 0 || node_id > INT32_MAX)
            return ol_cli_usage_error(cli, cmd, "NODE '%s': a node id, an integer from 0 to "
                                      "%d", a.node, INT32_MAX);
    }
    if (a.addr && !disk_cmd)
        return ol_cli_usage_error(cli, cmd, "--addr goes with disk info");
    if (a.addr && (a.config || a.etcd || a.cluster || a.node || a.timeout || a.user ||
                   a.password_file || a.ca || a.cert || a.key))
        return ol_cli_usage_error(cli, cmd, "--addr names the node itself: no NODE, "
                                  "--config or etcd options with it");
    if (!a.addr && !!a.config == !!(a.etcd || a.cluster))
        return ol_cli_usage_error(cli, cmd, "say where etcd is: --config FILE, or "
                                  "--etcd URL --cluster NAME%s",
                                  disk_cmd ? " (or the node: --addr HOST:PORT)" : "");
    static struct ol_config cfg;
    char err[1024];
    if (a.addr) {
        /* no etcd: the node at --addr, asked directly */
    } else if (a.config) {
        if (a.user || a.password_file || a.ca || a.cert || a.key)
            return ol_cli_usage_error(cli, cmd, "with --config the etcd settings come "
                                      "from the file's [cluster] section");
        char *cargv[] = {"openlaked", "--config", (char *)a.config, NULL};
        if (ol_config_load(&cfg, 3, cargv, environ, err, sizeof err) < 0)
            return ol_cli_usage_error(cli, cmd, "%s", err);
        if (!cfg.cluster.name[0] && !disk_cmd)
            return ol_cli_usage_error(cli, cmd, "%s has no [cluster] name", a.config);
        if (!cfg.cluster.name[0] && a.node)
            return ol_cli_usage_error(cli, cmd, "%s has no [cluster]: it configures a single "
                                      "host, which takes no NODE", a.config);
    } else {
        if (!a.etcd || !a.cluster)
            return ol_cli_usage_error(cli, cmd, "--etcd and --cluster go together");
        /* the same checks as the daemon's (names, URLs, the password file) */
        char *cargv[24];
        int n = 0;
        cargv[n++] = "openlaked";
        cargv[n++] = "--cluster.name";
        cargv[n++] = (char *)a.cluster;
        cargv[n++] = "--cluster.etcd";
        cargv[n++] = (char *)a.etcd;
        const char *flags[][2] = {{"--cluster.etcd-user", a.user},
                                  {"--cluster.etcd-password-file", a.password_file},
                                  {"--cluster.etcd-tls-ca", a.ca},
                                  {"--cluster.etcd-tls-cert", a.cert},
                                  {"--cluster.etcd-tls-key", a.key},
                                  {"--cluster.etcd-timeout-ms", a.timeout}};
        for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
            if (flags[i][1]) {
                cargv[n++] = (char *)flags[i][0];
                cargv[n++] = (char *)flags[i][1];
            }
        cargv[n] = NULL;
        char *env[] = {NULL};   /* only the flags: an OPENLAKE_* of a node's shell does not apply */
        if (ol_config_load(&cfg, n, cargv, env, err, sizeof err) < 0)
            return ol_cli_usage_error(cli, cmd, "%s", err);   /* names the daemon's key */
    }
    if (node_cmd && !a.node && !a.addr) {
        if (!a.config)
            return ol_cli_usage_error(cli, cmd, "info NODE: which node (its id; with --config "
                                      "the file's own self_id when left out)");
        node_id = cfg.self_id;
    }
    if (a.timeout && a.config)
        return ol_cli_usage_error(cli, cmd, "--timeout-ms goes with --etcd");
    bool cred_flags = a.mib || a.access_key || a.secret_key || a.secret_key_file ||
                      a.credentials || a.region;
    if (a.mib && !a.probe)
        return ol_cli_usage_error(cli, cmd, "--mib goes with topology --probe");
    if (cred_flags && !a.probe && !disk_cmd)
        return ol_cli_usage_error(cli, cmd, "the credential options go with topology --probe "
                                  "and disk info");
    if (a.probe && !topo)
        return ol_cli_usage_error(cli, cmd, "--probe goes with topology");
    struct ol_cli_cred cred;
    int mib = 64;
    if (a.probe || disk_cmd) {
        char *end = NULL;
        if (a.mib) {
            long v = strtol(a.mib, &end, 10);
            if (!*a.mib || *end || v < 1 || v > 1024)
                return ol_cli_usage_error(cli, cmd, "--mib '%s': an integer from 1 to "
                                          "1024", a.mib);
            mib = (int)v;
        }
        if (a.config && cfg.n_credentials > 0 && !a.access_key && !a.credentials &&
            !a.secret_key && !a.secret_key_file) {
            /* an operator on a node: the node's own first credential */
            memset(&cred, 0, sizeof cred);
            snprintf(cred.ak, sizeof cred.ak, "%s", cfg.credentials[0].access_key);
            snprintf(cred.sk, sizeof cred.sk, "%s", cfg.credentials[0].secret_key);
            cred.region = a.region ? a.region : cfg.region;
        } else {
            struct ol_cli_cred_flags f = {a.access_key, a.secret_key, a.secret_key_file,
                                          a.credentials, a.region};
            rc = ol_cli_cred_load(cli, cmd, &f, &cred);
            if (rc)
                return rc;
        }
    }
    if (disk_cmd && (a.addr || !cfg.cluster.name[0])) {   /* a single host, or --addr */
        rc = ol_cl_disk_info(cli, &cred, a.addr ? a.addr : cfg.s3_addr,
                       a.addr ? false : cfg.s3_tls_cert[0] != 0, "the node");
        explicit_bzero(&cred, sizeof cred);
        return rc;
    }
    struct ol_etcd_opts o;
    ol_cluster_etcd_opts(&cfg, &o);
    struct ol_etcd *e;
    if (ol_etcd_open(&o, &e, err, sizeof err) < 0)
        return ol_cli_fail(cli, cmd, "%s", err);
    if (disk_cmd)
        rc = ol_cl_node_disks(cli, e, cfg.cluster.name, node_id, &cred);
    else if (node_cmd)
        rc = ol_cl_node_info(cli, e, cfg.cluster.name, node_id);
    else if (drains)
        rc = drain(cli, e, cfg.cluster.name, node_id, sub == 2, wait_ms);
    else if (topo)
        rc = topology(cli, e, cfg.cluster.name, a.probe ? &cred : NULL, mib);
    else
        rc = status(cli, e, cfg.cluster.name, o.n_endpoints);
    ol_etcd_close(e);
    if (a.probe || disk_cmd)
        explicit_bzero(&cred, sizeof cred);
    explicit_bzero(cfg.cluster.etcd_password, sizeof cfg.cluster.etcd_password);
    return rc;
}

int ol_cmd_cluster(const struct ol_cli *cli, int argc, char **argv)
{
    return ol_cl_main(cli, "cluster", argc, argv);
}
