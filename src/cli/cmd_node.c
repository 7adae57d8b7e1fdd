/*
 * cmd_node.c - one node's commands: `openlake node info [NODE]` (its etcd
 * record, whether its drain key is set, whether /_openlake/health/ready
 * answers) and `openlake disk info [NODE]` (its signed GET
 * /_openlake/disks: each data dir and the KV disk tier).
 *
 * Owns: what those two print (table or JSON) and their exit status: node
 * info 0 when the record was read, 1 when the node has none or etcd
 * cannot be read; disk info 0 when every drive is online and measured, 1
 * when one is not or the node cannot be asked. Their options, where etcd
 * is and the credential are cmd_cluster.c's one parser (ol_cl_main), and
 * the records are read by its ol_cl_read_members (cli.h); the admin
 * plane's address and the signed request are admin.c's. Must not: parse
 * options of its own, or talk to etcd but through those.
 */
#include "cli/admin.h"
#include "cli/cli.h"
#include "cli/output.h"
#include "cluster/etcd.h"
#include "cluster/member.h"

#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Node id's record, with the others read into l (the caller frees l->v):
 * the node, or NULL with l freed and the failure said (naming cmd) and its
 * exit status in *status: etcd unreadable, or no such node. */
static struct ol_cl_node *read_node(const struct ol_cli *cli, const char *cmd, struct ol_etcd *e,
                                    const char *name, int64_t id, struct ol_cl_list *l,
                                    int *status)
{
    char err[512] = "";
    int64_t rev = 0;
    int rc = ol_cl_read_members(e, name, l, &rev, err, sizeof err);
    struct ol_cl_node *n = rc == 0 ? (struct ol_cl_node *)ol_cl_find_node(l, id) : NULL;
    if (!n) {
        free(l->v);
        l->v = NULL;
        *status = rc < 0 ? ol_cli_fail(cli, cmd, "cannot read the members: %s", err)
                         : ol_cli_fail(cli, cmd, "no node %lld in cluster %s (a node that is "
                                       "not running has no record: see cluster status)",
                                       (long long)id, name);
    }
    return n;
}

/* ---- node info ------------------------------------------------------------------------ */

/* node info NODE: its record and whether it is ready. */
int ol_cl_node_info(const struct ol_cli *cli, struct ol_etcd *e, const char *name, int64_t id)
{
    char err[512] = "";
    struct ol_cl_list l = {0};
    int64_t rev = 0;
    int rc;
    struct ol_cl_node *n = read_node(cli, "node", e, name, id, &l, &rc);
    if (!n)
        return rc;
    ol_cl_probe(n);
    char key[200], up[32];
    ol_member_drain_key(name, id, key, sizeof key);
    struct ol_cl_exact x = {key, false};
    rc = ol_etcd_range_prefix(e, key, ol_cl_find_exact, &x, &rev, err, sizeof err);
    if (cli->out & OL_OUT_JSON) {
        struct ol_json j;
        ol_json_init(&j, stdout);
        ol_json_object_begin(&j);
        ol_json_key(&j, "cluster");
        ol_json_str(&j, name);
        ol_cl_node_json(&j, n);
        ol_json_key(&j, "instance");
        ol_json_str(&j, n->m.instance);
        ol_json_key(&j, "data_dir");
        ol_json_str(&j, n->m.data_dir);
        ol_json_key(&j, "s3_tls");
        ol_json_bool(&j, n->m.s3_tls);
        ol_json_key(&j, "uptime_s");
        ol_json_int(&j, n->m.started > 0 ? (int64_t)time(NULL) - n->m.started : 0);
        ol_json_key(&j, "drain_asked");
        if (rc < 0)
            ol_json_null(&j);
        else
            ol_json_bool(&j, x.found);
        ol_json_object_end(&j);
    } else {
        printf("node %lld of cluster %s\n", (long long)id, name);
        printf("  state      %s%s\n", n->m.state,
               rc < 0 ? "" : x.found ? " (asked to drain)" : "");
        printf("  ready      %s%s%s\n", n->ready == 1 ? "yes" : n->ready == 0 ? "no" : "unreachable",
               n->why[0] ? ": " : "", n->why);
        printf("  version    %s\n", n->m.version);
        printf("  host       %s (pid %lld)\n", n->m.host, (long long)n->m.pid);
        printf("  up         %s\n", ol_cl_uptime(n->m.started, up, sizeof up));
        printf("  s3         %s://%s\n", n->m.s3_tls ? "https" : "http", n->m.s3_addr);
        printf("  kv         %s\n", n->m.kv_addr[0] ? n->m.kv_addr : "-");
        printf("  rpc        %s\n", n->m.rpc_addr);
        printf("  kv slab    %.1f GiB\n", (double)n->m.kv_slab_bytes / (1 << 30));
        printf("  kv disk    %.1f GiB\n", (double)n->m.kv_disk_bytes / (1 << 30));
        if (n->m.kv_replicas > 0)
            printf("  kv homes   %lld per key (cluster.kv_replicas)\n",
                   (long long)n->m.kv_replicas);
        printf("  drives     %lld\n", (long long)n->m.drives);
        printf("  data dir   %s\n", n->m.data_dir);
        printf("  instance   %s\n", n->m.instance);
        if (rc < 0)
            printf("  cannot read its drain key: %s\n", err);
    }
    free(l.v);
    return OL_EXIT_OK;
}

/* ---- disk info ------------------------------------------------------------------------ */

#define OL_DISKS_RESP_MAX (1u << 20)

/* bytes as GiB, or MiB under one GiB; "-" for null. */
static const char *size_str(json_t *v, char *buf, size_t len)
{
    double b = (double)json_integer_value(v);
    if (!json_is_integer(v))
        snprintf(buf, len, "-");
    else if (b >= (1 << 30))
        snprintf(buf, len, "%.1f GiB", b / (1 << 30));
    else
        snprintf(buf, len, "%.1f MiB", b / (1 << 20));
    return buf;
}

/* disk info: the node's GET /_openlake/disks at host:port (asked again,
 * a few times 100 ms apart, while the node's answer is over a second old:
 * asking made it measure anew). 0, or 1 when it cannot be asked or a drive
 * is offline or cannot be measured. */
int ol_cl_disk_info(const struct ol_cli *cli, const struct ol_cli_cred *cred,
                     const char *s3_addr, bool tls, const char *who)
{
    char host[256], port[16], why[200];
    if (ol_cli_admin_addr(s3_addr, tls, host, port, why, sizeof why) < 0)
        return ol_cli_fail(cli, "disk", "%s: %s", who, why);
    char *resp = malloc(OL_DISKS_RESP_MAX);
    if (!resp)
        return ol_cli_fail(cli, "disk", "out of memory");
    resp[0] = 0;
    json_t *js = NULL;
    int st = 0;
    for (int tries = 0; tries < 10; tries++) {
        st = ol_cli_admin_request(cred, host, port, "GET", "/_openlake/disks", "", resp,
                                  OL_DISKS_RESP_MAX);
        json_decref(js);
        json_error_t je;
        js = st == 200 ? json_loads(resp, 0, &je) : NULL;
        if (st != 200 && st != 503)
            break;
        if (js && json_integer_value(json_object_get(js, "age_ms")) <= 1000)
            break;
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (!js) {
        resp[OL_DISKS_RESP_MAX - 1] = 0;
        resp[strcspn(resp, "\n")] = 0;
        int rc = ol_cli_fail(cli, "disk", "%s (%s:%s): %s", who, host, port,
                             st < 0 ? strerror(-st) : st == 200 ? "not JSON" : resp);
        free(resp);
        return rc;
    }
    free(resp);
    json_t *drives = json_object_get(js, "drives"), *kvd = json_object_get(js, "kv_disk");
    bool degraded = false;
    size_t i;
    json_t *o;
    json_array_foreach(drives, i, o)
        degraded |= json_is_false(json_object_get(o, "online")) ||
                    !json_is_null(json_object_get(o, "error"));
    if (cli->out & OL_OUT_JSON) {
        char *dump = json_dumps(js, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (dump)
            printf("%s\n", dump);
        free(dump);
    } else {
        printf("%s: %zu drive%s\n", who, json_array_size(drives),
               json_array_size(drives) == 1 ? "" : "s");
        static const struct ol_col cols[] = {
            {"drive", "DRIVE", OL_ALIGN_RIGHT}, {"set", "SET", OL_ALIGN_RIGHT},
            {"state", "STATE", OL_ALIGN_LEFT},  {"size", "SIZE", OL_ALIGN_RIGHT},
            {"avail", "AVAIL", OL_ALIGN_RIGHT}, {"path", "PATH", OL_ALIGN_LEFT}};
        ol_table *t = ol_table_create(cols, sizeof cols / sizeof cols[0]);
        char b1[32], b2[32];
        json_array_foreach(drives, i, o) {
            json_t *set = json_object_get(o, "set");
            ol_table_row(t);
            ol_table_int(t, json_integer_value(json_object_get(o, "index")));
            if (json_is_integer(set))
                ol_table_int(t, json_integer_value(set));
            else
                ol_table_str(t, "-");
            ol_table_str(t, !json_is_null(json_object_get(o, "error")) ? "unreadable"
                            : json_is_null(json_object_get(o, "online")) ? "no store"
                            : json_is_false(json_object_get(o, "online")) ? "offline"
                            : json_is_true(json_object_get(o, "adopted")) ? "adopted at start"
                            : "online");
            ol_table_str(t, size_str(json_object_get(o, "size_bytes"), b1, sizeof b1));
            ol_table_str(t, size_str(json_object_get(o, "avail_bytes"), b2, sizeof b2));
            ol_table_str(t, json_string_value(json_object_get(o, "path")));
        }
        ol_table_print(t, stdout, cli->out);
        ol_table_destroy(t);
        json_array_foreach(drives, i, o)
            if (!json_is_null(json_object_get(o, "error")))
                printf("  drive %zu: %s\n", i, json_string_value(json_object_get(o, "error")));
        json_t *dirs = json_object_get(kvd, "dirs");
        if (!json_array_size(dirs)) {
            printf("KV disk tier: none\n");
        } else {
            printf("KV disk tier: %s in %zu dir%s\n",
                   size_str(json_object_get(kvd, "capacity_bytes"), b1, sizeof b1),
                   json_array_size(dirs), json_array_size(dirs) == 1 ? "" : "s");
            json_array_foreach(dirs, i, o) {
                size_t k;
                json_t *f, *files = json_object_get(o, "files");
                long long bytes = 0, alloc = 0;
                json_array_foreach(files, k, f) {
                    bytes += json_integer_value(json_object_get(f, "bytes"));
                    alloc += json_integer_value(json_object_get(f, "allocated_bytes"));
                }
                json_t *jb = json_integer(bytes), *ja = json_integer(alloc);
                char b3[32];
                printf("  %s: %zu file%s, %s (%s allocated); filesystem %s avail\n",
                       json_string_value(json_object_get(o, "path")), json_array_size(files),
                       json_array_size(files) == 1 ? "" : "s", size_str(jb, b1, sizeof b1),
                       size_str(ja, b3, sizeof b3),
                       size_str(json_object_get(o, "avail_bytes"), b2, sizeof b2));
                json_decref(jb);
                json_decref(ja);
            }
        }
    }
    json_decref(js);
    return degraded ? OL_EXIT_FAIL : OL_EXIT_OK;
}

/* disk info NODE of a cluster: its record's S3 address asked. */
int ol_cl_node_disks(const struct ol_cli *cli, struct ol_etcd *e, const char *name, int64_t id,
                      const struct ol_cli_cred *cred)
{
    char who[64];
    struct ol_cl_list l = {0};
    int rc;
    const struct ol_cl_node *n = read_node(cli, "disk", e, name, id, &l, &rc);
    if (!n)
        return rc;
    snprintf(who, sizeof who, "node %lld", (long long)id);
    rc = ol_cl_disk_info(cli, cred, n->m.s3_addr, n->m.s3_tls, who);
    free(l.v);
    return rc;
}

/* ---- the commands --------------------------------------------------------------------- */

int ol_cmd_node(const struct ol_cli *cli, int argc, char **argv)
{
    return ol_cl_main(cli, "node", argc, argv);
}

int ol_cmd_disk(const struct ol_cli *cli, int argc, char **argv)
{
    return ol_cl_main(cli, "disk", argc, argv);
}
