/*
 * admin_cluster.c - the cluster routes of the admin plane.
 *
 *   POST /_openlake/cluster/probe[?mib=N]   starts measuring the node RPC
 *        to every peer (daemon/net.c: round trip, bytes per second each
 *        way over N MiB, default 64, 1..1024); 202 and {"probe":ID}; 409
 *        while one runs
 *   GET  /_openlake/cluster/probe           the current or last probe, one
 *        JSON object: {"probe":ID,"running":bool,"node":ID,"mib":N,
 *        "peers":[{"peer","ok","rtt_us","to_bytes_per_s",
 *        "from_bytes_per_s","error"}]}
 *
 * Both signed like S3 requests (a probe moves gigabytes: an operator's
 * action); 503 on a node outside a cluster. `openlake cluster topology
 * --probe` asks every node and prints the matrix.
 *
 * Owns: parsing and answering these routes. Must not: block (the probe
 * runs on the net loop; its results are read under their mutex).
 */
#include "daemon/daemon.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OL_PROBE_JSON_MAX (1u << 20)

void ol_admin_cluster_route(struct ol_core *core, ol_http_req *r, const char *path,
                            size_t plen, const char *q, size_t qlen)
{
    struct ol_daemon *d = core->d;
    if (!ol_admin_signed(core, r, path, plen, q, qlen))
        return;
    if (!d->net) {
        ol_admin_json_error(r, 503, "NotACluster", "this node is not in a cluster ([cluster])");
        return;
    }
    const struct ol_http_request *h = ol_http_req_head(r);
    if (h->method_len == 3) { /* GET */
        char *body = malloc(OL_PROBE_JSON_MAX);
        if (!body) {
            ol_admin_json_error(r, 503, "SlowDown", "out of memory");
            return;
        }
        size_t n = ol_daemon_net_probe_json(d, body, OL_PROBE_JSON_MAX);
        if (n >= OL_PROBE_JSON_MAX)
            ol_admin_json_error(r, 500, "InternalError", "probe results too large");
        else
            ol_http_resp_simple(r, 200, "application/json", body, n);
        free(body);
        return;
    }
    char v[16];
    long mib = 64;
    long vl = ol_admin_query(q, qlen, "mib", v, sizeof v);
    if (vl >= 0) {
        char *end;
        mib = strtol(v, &end, 10);
        if (vl == 0 || *end || mib < 1 || mib > 1024) {
            ol_admin_json_error(r, 400, "InvalidArgument", "mib: an integer from 1 to 1024");
            return;
        }
    } else if (vl != -ENOENT) {
        ol_admin_json_error(r, 400, "InvalidArgument", "mib: an integer from 1 to 1024");
        return;
    }
    uint64_t id;
    int rc = ol_daemon_net_probe_start(d, (uint32_t)mib, &id);
    if (rc == -EBUSY) {
        ol_admin_json_error(r, 409, "ProbeRunning", "a probe is running: wait for it to finish");
        return;
    }
    char body[64];
    int n = snprintf(body, sizeof body, "{\"probe\":%" PRIu64 "}\n", id);
    ol_http_resp_simple(r, 202, "application/json", body, (size_t)n);
}
