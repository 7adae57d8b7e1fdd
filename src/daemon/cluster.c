/*
 * cluster.c - openlaked's side of cluster membership: this node's record
 * (cluster/member.h) from its configuration and its services.
 *
 * Owns: the record's fields: the addresses as other hosts reach them (a
 * wildcard listener's host becomes cluster.advertise_host, else the host
 * name), the capacities, and the node's instance id: 32 random hex digits
 * kept in <first data dir>/cluster.instance (mode 0600, made at the first
 * start), how a restarted node knows its own previous record from another
 * node's that has the same self_id. And its state while it serves: active,
 * or draining then drained while an operator asks it to drain (the drain
 * key, cluster/member.h; docs/cluster.md "Drain").
 */
#include "daemon/daemon.h"

#include "base/log.h"
#include "kv/service.h"
#include "rt/net.h"

#include <arpa/inet.h>
#include <netdb.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/random.h>
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

/* addr with its host resolved to a numeric address (the first getaddrinfo
 * gives): the node RPC dials records' rpc_addr from its loop, where no
 * name is looked up. 0, or -1 with err. */
static int numeric(char *addr, size_t len, char *err, size_t errlen)
{
    struct sockaddr_storage sa;
    socklen_t sl;
    if (ol_net_addr_numeric(addr, &sa, &sl) == 0)
        return 0;
    char host[256];
    const char *colon = strrchr(addr, ':');
    size_t hl = colon ? (size_t)(colon - addr) : 0;
    if (!colon || hl >= sizeof host) {
        snprintf(err, errlen, "rpc_addr %s: expected host:port", addr);
        return -1;
    }
    memcpy(host, addr, hl);
    host[hl] = 0;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    int grc = getaddrinfo(host, colon + 1, &hints, &ai);
    char ip[INET6_ADDRSTRLEN];
    if (grc != 0 || getnameinfo(ai->ai_addr, ai->ai_addrlen, ip, sizeof ip, NULL, 0,
                                NI_NUMERICHOST) != 0) {
        snprintf(err, errlen, "rpc_addr %s: cannot resolve %s (%s); set "
                 "cluster.advertise_host to an address other nodes reach this one at",
                 addr, host, grc ? gai_strerror(grc) : "no numeric form");
        if (ai)
            freeaddrinfo(ai);
        return -1;
    }
    char port[16];
    snprintf(port, sizeof port, "%s", colon + 1);
    if (ai->ai_family == AF_INET6)
        snprintf(addr, len, "[%s]:%s", ip, port);
    else
        snprintf(addr, len, "%s:%s", ip, port);
    freeaddrinfo(ai);
    return 0;
}

/* The instance id from <dir>/cluster.instance, made there when missing. */
static int instance_id(const char *dir, char *out, size_t len, char *err, size_t errlen)
{
    char path[PATH_MAX + 32], buf[64] = {0};
    snprintf(path, sizeof path, "%s/cluster.instance", dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        bool ok = n >= 33 && buf[32] == '\n';
        for (int i = 0; ok && i < 32; i++)
            ok = (buf[i] >= '0' && buf[i] <= '9') || (buf[i] >= 'a' && buf[i] <= 'f');
        if (!ok) {
            snprintf(err, errlen, "%s: not 32 hex digits and a newline; remove it to make a "
                     "new one (this node then registers as a new instance)", path);
            return -EINVAL;
        }
        snprintf(out, len, "%.32s", buf);
        return 0;
    }
    if (errno != ENOENT) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -errno;
    }
    unsigned char r[16];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
        snprintf(err, errlen, "getrandom: %s", strerror(errno));
        return -EIO;
    }
    for (int i = 0; i < 16; i++)
        snprintf(buf + 2 * i, 3, "%02x", r[i]);
    buf[32] = '\n';
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, buf, 33) != 33 || fsync(fd) < 0) {
        snprintf(err, errlen, "%s: cannot write it: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -EIO;
    }
    close(fd);
    snprintf(out, len, "%.32s", buf);
    return 0;
}

int ol_daemon_cluster_join(struct ol_daemon *d, char *err, size_t errlen)
{
    const struct ol_config *c = &d->cfg;
    if (!c->cluster.name[0])
        return 0;
    if (!c->cluster.secret[0]) {
        snprintf(err, errlen, "cluster %s: a cluster needs its secret (cluster.secret_file: "
                 "a file holding at least 32 characters, the same on every node, e.g. from "
                 "openssl rand -hex 32); nodes prove themselves to each other with it",
                 c->cluster.name);
        return -1;
    }
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
    self.s3_tls = c->s3_tls_cert[0] != 0;
    if (c->mode != OL_MODE_S3)
        advertised(c->kv_addr, self.host, self.kv_addr, sizeof self.kv_addr);
    if (c->mode != OL_MODE_S3 && c->kv_ucx_addr[0])
        advertised(c->kv_ucx_addr, self.host, self.kv_ucx_addr, sizeof self.kv_ucx_addr);
    advertised(c->rpc_addr, self.host, self.rpc_addr, sizeof self.rpc_addr);
    if (numeric(self.rpc_addr, sizeof self.rpc_addr, err, errlen) < 0)
        return -1;
    if (d->kv) {
        self.kv_slab_bytes = d->kv->tenants[0].slab.size;
        self.kv_disk_bytes = (uint64_t)(c->kv_disk.capacity_gb * (double)(1ull << 30));
        self.kv_replicas = c->cluster.kv_replicas;
    }
    if (instance_id(c->data_dirs[0], self.instance, sizeof self.instance, err, errlen) < 0)
        return -1;
    for (int i = 0; i < c->cluster.n_etcd; i++)
        if (c->cluster.etcd_user[0] && !strncmp(c->cluster.etcd[i], "http://", 7)) {
            ol_warn("cluster %s: etcd %s is plain http: the etcd password and token cross "
                    "the network in the clear (use https:// with cluster.etcd_tls_ca)",
                    c->cluster.name, c->cluster.etcd[i]);
            break;
        }
    if (ol_cluster_start(c, &self, &d->cluster, err, errlen) < 0)
        return -1;
    return 0;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void drain_set(struct ol_daemon *d, int drain)
{
    static const char *const names[] = {"active", "draining", "drained"};
    ol_cluster_set_state(d->cluster, names[drain]);
    d->drain_since_ms = 0;          /* the tick starts it once "draining" is in etcd */
    d->quiet_since_ms = 0;
    ol_info("cluster %s: node %lld is %s", d->cfg.cluster.name, (long long)d->cfg.self_id,
            names[drain]);
    d->drain = drain;
}

void ol_daemon_cluster_serving(struct ol_daemon *d)
{
    if (d->cluster)
        drain_set(d, ol_cluster_drain_asked(d->cluster) ? 1 : 0);
}

void ol_daemon_cluster_tick(struct ol_daemon *d)
{
    if (!d->cluster || atomic_load(&d->draining))
        return;
    bool asked = ol_cluster_drain_asked(d->cluster);
    if (!asked && d->drain)
        drain_set(d, 0);
    else if (asked && d->drain == 0)
        drain_set(d, 1);
    /* Drained: every node stops placing keys here once its watch sees
     * "draining" (so the clock starts when etcd has it, not when it was
     * asked for: etcd may be slow or away); a call one of them started
     * before that ends within cluster.kv_timeout_ms (answered or timed
     * out); and this node's own KV pool work has been quiet for as long
     * (a push handed to the node RPC ends within that deadline too). Work
     * that keeps coming (its own clients' saves and misses) keeps it
     * draining: stop them first. */
    else if (asked && d->drain == 1) {
        int64_t now = mono_ms();
        if (!d->drain_since_ms && ol_cluster_state_written(d->cluster))
            d->drain_since_ms = now;
        if (!ol_daemon_kvpool_quiet(d))
            d->quiet_since_ms = 0;
        else if (!d->quiet_since_ms)
            d->quiet_since_ms = now;
        int64_t wait = d->cfg.cluster.kv_timeout_ms;
        if (d->drain_since_ms && now - d->drain_since_ms >= wait && d->quiet_since_ms &&
            now - d->quiet_since_ms >= wait)
            drain_set(d, 2);
    }
}
