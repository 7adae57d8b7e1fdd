/*
 * cmd_cluster.c - `openlake cluster status`: the cluster as etcd knows it,
 * and whether each node answers.
 *
 * Owns: reading the members straight from etcd (cluster/etcd.h, the same
 * records the nodes keep: cluster/member.h), asking each node's
 * /_openlake/health/ready, the table or JSON, and the exit status: 0 when
 * every etcd endpoint is healthy and every node is active and ready, 1
 * when anything is degraded (or etcd cannot be read), 2 usage.
 *
 * Where etcd is: --config FILE (a node's own configuration, read as the
 * daemon reads it, environment included: its [cluster] section), or
 * --etcd URL[,URL...] --cluster NAME, with the etcd user, password file
 * and TLS files as flags (a password itself never: a flag shows in ps).
 */
#include "cli/cli.h"
#include "cli/output.h"
#include "base/config.h"
#include "cluster/etcd.h"
#include "cluster/member.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define OL_CLUSTER_PROBE_MS 2000

struct ol_cl_args {
    const char *sub, *config, *etcd, *cluster, *user, *password_file, *ca, *cert, *key,
        *timeout;
};

struct ol_cl_node {
    struct ol_member m;
    int ready;               /* 1 ready, 0 answered not ready, -1 no answer */
    long http;
    char why[160];
};

struct ol_cl_list {
    struct ol_cl_node *v;
    int n, cap;
    char prefix[160];
    int bad;                 /* records this version cannot read */
};

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

/* GET http(s)://<s3_addr>/_openlake/health/ready (https checked against
 * the system's CAs; the record's address pasted in: a record is written by
 * a node or an operator with etcd access, not by a client). */
static void probe(struct ol_cl_node *n)
{
    CURL *c = curl_easy_init();
    if (!c) {
        n->ready = -1;
        snprintf(n->why, sizeof n->why, "out of memory");
        return;
    }
    char url[400];
    snprintf(url, sizeof url, "%s://%s/_openlake/health/ready", n->m.s3_tls ? "https" : "http",
             n->m.s3_addr);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)OL_CLUSTER_PROBE_MS);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    CURLcode cc = curl_easy_perform(c);
    if (cc != CURLE_OK) {
        n->ready = -1;
        snprintf(n->why, sizeof n->why, "%s", curl_easy_strerror(cc));
    } else {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &n->http);
        n->ready = n->http == 200;
        if (!n->ready)
            snprintf(n->why, sizeof n->why, "health/ready: HTTP %ld", n->http);
    }
    curl_easy_cleanup(c);
}

static int cmp_node(const void *a, const void *b)
{
    const struct ol_cl_node *x = a, *y = b;
    return (x->m.id > y->m.id) - (x->m.id < y->m.id);
}

static const char *uptime(int64_t started, char *buf, size_t len)
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

static int status(const struct ol_cli *cli, struct ol_etcd *e, const char *name, int n_ep)
{
    char err[512] = "", herr[512] = "";
    int healthy = 0;
    ol_etcd_health(e, &healthy, herr, sizeof herr);
    struct ol_cl_list l = {0};
    ol_member_prefix(name, l.prefix, sizeof l.prefix);
    int64_t rev = 0;
    int rc = ol_etcd_range_prefix(e, l.prefix, on_node, &l, &rev, err, sizeof err);
    if (rc == -ENOMEM && !err[0])
        snprintf(err, sizeof err, "out of memory");
    if (rc == 0) {
        if (l.n)
            qsort(l.v, (size_t)l.n, sizeof *l.v, cmp_node);
        for (int i = 0; i < l.n; i++)
            probe(&l.v[i]);
    }
    bool degraded = rc < 0 || healthy < n_ep || l.bad > 0;
    for (int i = 0; i < l.n; i++)
        degraded |= l.v[i].ready != 1 || strcmp(l.v[i].m.state, "active") != 0;

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
        ol_json_key(&j, "nodes");
        ol_json_array_begin(&j);
        for (int i = 0; i < l.n; i++) {
            const struct ol_cl_node *n = &l.v[i];
            ol_json_object_begin(&j);
            ol_json_key(&j, "id");
            ol_json_int(&j, n->m.id);
            ol_json_key(&j, "state");
            ol_json_str(&j, n->m.state);
            ol_json_key(&j, "ready");
            ol_json_bool(&j, n->ready == 1);
            ol_json_key(&j, "reachable");
            ol_json_bool(&j, n->ready >= 0);
            ol_json_key(&j, "why");
            ol_json_str(&j, n->why[0] ? n->why : NULL);
            ol_json_key(&j, "version");
            ol_json_str(&j, n->m.version);
            ol_json_key(&j, "host");
            ol_json_str(&j, n->m.host);
            ol_json_key(&j, "pid");
            ol_json_int(&j, n->m.pid);
            ol_json_key(&j, "started");
            ol_json_int(&j, n->m.started);
            ol_json_key(&j, "s3_addr");
            ol_json_str(&j, n->m.s3_addr);
            ol_json_key(&j, "kv_addr");
            ol_json_str(&j, n->m.kv_addr);
            ol_json_key(&j, "rpc_addr");
            ol_json_str(&j, n->m.rpc_addr);
            ol_json_key(&j, "kv_slab_bytes");
            ol_json_uint(&j, n->m.kv_slab_bytes);
            ol_json_key(&j, "kv_disk_bytes");
            ol_json_uint(&j, n->m.kv_disk_bytes);
            ol_json_key(&j, "drives");
            ol_json_int(&j, n->m.drives);
            ol_json_object_end(&j);
        }
        ol_json_array_end(&j);
        ol_json_object_end(&j);
        putchar('\n');
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
        if (l.n) {
            static const struct ol_col cols[] = {
                {"node", "NODE", OL_ALIGN_RIGHT},   {"state", "STATE", OL_ALIGN_LEFT},
                {"ready", "READY", OL_ALIGN_LEFT},  {"version", "VERSION", OL_ALIGN_LEFT},
                {"up", "UP", OL_ALIGN_RIGHT},       {"host", "HOST", OL_ALIGN_LEFT},
                {"s3", "S3", OL_ALIGN_LEFT},        {"kv", "KV", OL_ALIGN_LEFT},
                {"slab", "KV SLAB", OL_ALIGN_RIGHT}, {"drives", "DRIVES", OL_ALIGN_RIGHT}};
            ol_table *t = ol_table_create(cols, sizeof cols / sizeof cols[0]);
            for (int i = 0; i < l.n; i++) {
                const struct ol_cl_node *n = &l.v[i];
                char up[32];
                ol_table_row(t);
                ol_table_int(t, n->m.id);
                ol_table_str(t, n->m.state);
                ol_table_str(t, n->ready == 1 ? "yes" : n->ready == 0 ? "no" : "unreachable");
                ol_table_str(t, n->m.version);
                ol_table_str(t, uptime(n->m.started, up, sizeof up));
                ol_table_str(t, n->m.host);
                ol_table_str(t, n->m.s3_addr);
                ol_table_str(t, n->m.kv_addr[0] ? n->m.kv_addr : "-");
                ol_table_strf(t, "%.1f GiB", (double)n->m.kv_slab_bytes / (1 << 30));
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

int ol_cmd_cluster(const struct ol_cli *cli, int argc, char **argv)
{
    struct ol_cl_args a = {0};
    static const char *const opts[] = {"--config", "--etcd", "--cluster", "--etcd-user",
                                       "--etcd-password-file", "--etcd-ca", "--etcd-cert",
                                       "--etcd-key", "--timeout-ms", NULL};
    const char **slots[] = {&a.config, &a.etcd, &a.cluster, &a.user, &a.password_file,
                            &a.ca, &a.cert, &a.key, &a.timeout};
    const char **pos[] = {&a.sub};
    int rc = ol_cli_options(cli, "cluster", argc, argv, opts, slots, pos, 1);
    if (rc)
        return rc;
    static const char *const subs[] = {"status", NULL};
    if (!a.sub)
        return ol_cli_usage_error(cli, "cluster", "what to do: status");
    if (strcmp(a.sub, "status") != 0) {
        const char *s = ol_cli_suggest(a.sub, subs);
        return ol_cli_usage_error(cli, "cluster", "unknown subcommand '%s'%s%s%s", a.sub,
                                  s ? " (did you mean '" : "", s ? s : "", s ? "'?)" : "");
    }
    if (!!a.config == !!(a.etcd || a.cluster))
        return ol_cli_usage_error(cli, "cluster", "say where etcd is: --config FILE, or "
                                  "--etcd URL --cluster NAME");
    static struct ol_config cfg;
    char err[1024];
    if (a.config) {
        if (a.user || a.password_file || a.ca || a.cert || a.key)
            return ol_cli_usage_error(cli, "cluster", "with --config the etcd settings come "
                                      "from the file's [cluster] section");
        char *cargv[] = {"openlaked", "--config", (char *)a.config, NULL};
        if (ol_config_load(&cfg, 3, cargv, environ, err, sizeof err) < 0)
            return ol_cli_usage_error(cli, "cluster", "%s", err);
        if (!cfg.cluster.name[0])
            return ol_cli_usage_error(cli, "cluster", "%s has no [cluster] name", a.config);
    } else {
        if (!a.etcd || !a.cluster)
            return ol_cli_usage_error(cli, "cluster", "--etcd and --cluster go together");
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
            return ol_cli_usage_error(cli, "cluster", "%s", err);   /* names the daemon's key */
    }
    if (a.timeout && a.config)
        return ol_cli_usage_error(cli, "cluster", "--timeout-ms goes with --etcd");
    struct ol_etcd_opts o;
    ol_cluster_etcd_opts(&cfg, &o);
    struct ol_etcd *e;
    if (ol_etcd_open(&o, &e, err, sizeof err) < 0)
        return ol_cli_fail(cli, "cluster", "%s", err);
    rc = status(cli, e, cfg.cluster.name, o.n_endpoints);
    ol_etcd_close(e);
    explicit_bzero(cfg.cluster.etcd_password, sizeof cfg.cluster.etcd_password);
    return rc;
}
