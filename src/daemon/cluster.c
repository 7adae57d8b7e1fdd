/*
 * cluster.c - openlaked's side of cluster membership: this node's record
 * (cluster/member.h) from its configuration and its services.
 *
 * Owns: the record's fields: the addresses as other hosts reach them (a
 * wildcard listener's host becomes cluster.advertise_host, else the host
 * name), this host's name and first data dir (how a restarted node knows its
 * own previous record), the capacities.
 */
#include "daemon/daemon.h"

#include "base/log.h"
#include "kv/service.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* addr ("host:port", "[v6]:port") with a wildcard host replaced by host. */
static void advertised(const char *addr, const char *host, char *out, size_t len)
{
    const char *colon = strrchr(addr, ':');
    size_t hl = colon ? (size_t)(colon - addr) : 0;
    bool wild = (hl == 7 && !strncmp(addr, "0.0.0.0", 7)) || (hl == 4 && !strncmp(addr, "[::]", 4)) ||
                hl == 0;
    if (wild && colon)
        snprintf(out, len, "%s%s", host, colon);
    else
        snprintf(out, len, "%s", addr);
}

int ol_daemon_cluster_join(struct ol_daemon *d, char *err, size_t errlen)
{
    const struct ol_config *c = &d->cfg;
    if (!c->cluster.name[0])
        return 0;
    struct ol_member self = {.id = c->self_id, .pid = getpid(), .started = time(NULL),
                             .drives = c->mode == OL_MODE_KV ? 0 : c->n_data_dirs};
    snprintf(self.state, sizeof self.state, "starting");
    snprintf(self.version, sizeof self.version, "%s", OL_VERSION);
    if (c->cluster.advertise_host[0])
        snprintf(self.host, sizeof self.host, "%s", c->cluster.advertise_host);
    else if (gethostname(self.host, sizeof self.host - 1) < 0)
        snprintf(self.host, sizeof self.host, "localhost");
    char real[PATH_MAX];
    snprintf(self.data_dir, sizeof self.data_dir, "%.*s", (int)sizeof self.data_dir - 1,
             realpath(c->data_dirs[0], real) ? real : c->data_dirs[0]);
    advertised(c->s3_addr, self.host, self.s3_addr, sizeof self.s3_addr);
    if (c->mode != OL_MODE_S3)
        advertised(c->kv_addr, self.host, self.kv_addr, sizeof self.kv_addr);
    advertised(c->rpc_addr, self.host, self.rpc_addr, sizeof self.rpc_addr);
    if (d->kv) {
        self.kv_slab_bytes = d->kv->tenants[0].slab.size;
        self.kv_disk_bytes = (uint64_t)(c->kv_disk.capacity_gb * (double)(1ull << 30));
    }
    if (ol_cluster_start(c, &self, &d->cluster, err, errlen) < 0)
        return -1;
    return 0;
}
