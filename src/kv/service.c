/*
 * service.c - see service.h.
 */
#include "kv/service.h"

#include "base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define OL_KV_DEFAULT_RAM_FRAC 0.25

int ol_kv_service_token_ok(const struct ol_kv_service *svc, const void *tok, size_t len)
{
    const unsigned char *a = (const unsigned char *)svc->token, *b = tok;
    unsigned char diff = (unsigned char)(len != svc->token_len);
    for (size_t i = 0; i < svc->token_len; i++)
        diff |= (unsigned char)(a[i] ^ (i < len ? b[i] : 0));
    return diff == 0;
}

/* Reads the token file, or creates it (write, fsync, rename, fsync dir). */
static int ol_token_file(struct ol_kv_service *svc, const char *dir, char *err, size_t errlen)
{
    snprintf(svc->token_path, sizeof svc->token_path, "%s/kv.token", dir);
    int fd = open(svc->token_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
        struct stat st;
        ssize_t n = -1;
        if (fstat(fd, &st) == 0 && (st.st_mode & 077) == 0)
            n = read(fd, svc->token, sizeof svc->token - 1);
        close(fd);
        if (n <= 0 || (st.st_mode & 077)) {
            snprintf(err, errlen, "%s: unreadable, empty or not mode 0600 (delete it to make a new one)",
                     svc->token_path);
            return -EACCES;
        }
        svc->token_len = (size_t)n;
        svc->token[n] = 0;
        return 0;
    }
    if (errno != ENOENT) {
        int rc = -errno;
        snprintf(err, errlen, "%s: %s", svc->token_path, strerror(errno));
        return rc;
    }
    unsigned char rnd[32];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        snprintf(err, errlen, "getrandom: %s", strerror(errno));
        return -EIO;
    }
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(svc->token + 2 * i, 3, "%02x", rnd[i]);
    svc->token_len = 2 * sizeof rnd;
    char tmp[sizeof svc->token_path + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", svc->token_path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int ok = fd >= 0 && write(fd, svc->token, svc->token_len) == (ssize_t)svc->token_len &&
             fsync(fd) == 0;
    if (fd >= 0)
        close(fd);
    if (!ok || rename(tmp, svc->token_path) < 0) {
        int rc = -errno;
        snprintf(err, errlen, "cannot write %s: %s", svc->token_path, strerror(errno));
        unlink(tmp);
        return rc ? rc : -EIO;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

static int ol_open_disks(struct ol_kv_service *svc, const struct ol_config *cfg, char *err,
                         size_t errlen)
{
    int n = svc->nshards, rc;
    svc->disks = calloc((size_t)n, sizeof *svc->disks);
    if (!svc->disks) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    int ndirs = cfg->kv_disk.n_dirs ? cfg->kv_disk.n_dirs : cfg->n_data_dirs;
    uint64_t share = (uint64_t)(cfg->kv_disk.capacity_gb * (double)(1u << 30)) / (uint64_t)n;
    if (share < OL_KV_PAGE) {
        snprintf(err, errlen, "kv_disk.capacity_gb: %g GiB gives each of the %d cores less than "
                 "2 MiB; raise it", cfg->kv_disk.capacity_gb, n);
        return -EINVAL;
    }
    uint64_t recovered = 0;
    for (int i = 0; i < n; i++) {
        struct ol_kv_disk_params p = {
            .dir = cfg->kv_disk.n_dirs ? cfg->kv_disk.dirs[i % ndirs] : cfg->data_dirs[i % ndirs],
            .shard = i, .nshards = n, .bytes = share, .evict_kind = OL_EVICT_DEFAULT,
            .queue_depth = (unsigned)cfg->kv_disk.queue_depth};
        if ((rc = ol_kv_disk_open(&svc->disks[i], &p, err, errlen)) < 0)
            return rc;
        if ((rc = ol_kv_shard_set_disk(&svc->shards[i], svc->disks[i])) < 0) {
            snprintf(err, errlen, "out of memory");
            return rc;
        }
        struct ol_kv_disk_stats st;
        ol_kv_disk_stats(svc->disks[i], &st);
        recovered += st.recovered;
    }
    ol_info("kv disk tier: %.2f GiB in %d dir(s), %llu entries found", cfg->kv_disk.capacity_gb,
            ndirs, (unsigned long long)recovered);
    return 0;
}

int ol_kv_service_create(struct ol_kv_service **out, const struct ol_config *cfg, int nshards,
                         char *err, size_t errlen)
{
    int rc;
    struct ol_kv_service *svc = calloc(1, sizeof *svc);
    if (!svc) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    svc->slab.fd = -1;
    svc->nshards = nshards;
    svc->ttl_ms = (uint32_t)cfg->kv_slab.reserve_ttl_secs * 1000u;
    svc->hello_timeout_ms = (uint32_t)cfg->kv_hello_timeout_ms;
    svc->max_unauth = (uint32_t)cfg->kv_max_unauthenticated;
    const char *dir = cfg->data_dirs[0];
    char sock[OL_CONFIG_PATH_LEN + 16];
    if (cfg->kv_socket[0])
        snprintf(sock, sizeof sock, "%s", cfg->kv_socket);
    else
        snprintf(sock, sizeof sock, "%s/kv.sock", dir);
    if (strlen(sock) >= sizeof svc->sock_path) {
        snprintf(err, errlen, "kv_socket: %s/kv.sock is longer than 107 bytes; set kv_socket", dir);
        rc = -ENAMETOOLONG;
        goto fail;
    }
    memcpy(svc->sock_path, sock, strlen(sock) + 1);
    if (cfg->kv_token[0]) {
        svc->token_len = strlen(cfg->kv_token);
        memcpy(svc->token, cfg->kv_token, svc->token_len);
    } else if ((rc = ol_token_file(svc, dir, err, errlen)) < 0) {
        goto fail;
    }

    double ram = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGE_SIZE);
    double bytes = cfg->kv_slab.cpu_ram_frac > 0   ? cfg->kv_slab.cpu_ram_frac * ram
                   : cfg->kv_slab.capacity_gb > 0 ? cfg->kv_slab.capacity_gb * (double)(1u << 30)
                                                  : OL_KV_DEFAULT_RAM_FRAC * ram;
    uint64_t want = (uint64_t)bytes;
    if (want < (uint64_t)nshards * OL_KV_PAGE)
        want = (uint64_t)nshards * OL_KV_PAGE; /* at least a page per shard */
    if ((rc = ol_kv_slab_create(&svc->slab, want, 1, err, errlen)) < 0)
        goto fail;
    svc->shards = calloc((size_t)nshards, sizeof *svc->shards);
    if (!svc->shards) {
        rc = -ENOMEM;
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    uint32_t np = svc->slab.npages;
    for (int i = 0; i < nshards; i++) {
        uint32_t first = (uint32_t)((uint64_t)np * (uint64_t)i / (uint64_t)nshards);
        uint32_t end = (uint32_t)((uint64_t)np * (uint64_t)(i + 1) / (uint64_t)nshards);
        if ((rc = ol_kv_shard_init(&svc->shards[i], &svc->slab, first, end - first,
                                   OL_EVICT_DEFAULT, svc->ttl_ms)) < 0) {
            snprintf(err, errlen, "kv shard %d: %s", i, strerror(-rc));
            goto fail;
        }
        /* keys spread evenly over the shards: each enforces its share */
        ol_kv_shard_set_quota(&svc->shards[i],
                              (uint64_t)(cfg->kv_slab.namespace_quota_gb * (double)(1u << 30)) /
                                  (uint64_t)nshards);
    }
    if (cfg->kv_disk.capacity_gb > 0 && (rc = ol_open_disks(svc, cfg, err, errlen)) < 0)
        goto fail;
    *out = svc;
    return 0;
fail:
    ol_kv_service_destroy(svc);
    return rc;
}

void ol_kv_service_destroy(struct ol_kv_service *svc)
{
    if (!svc)
        return;
    if (svc->shards)
        for (int i = 0; i < svc->nshards; i++)
            ol_kv_shard_exit(&svc->shards[i]);
    free(svc->shards);
    if (svc->disks)
        for (int i = 0; i < svc->nshards; i++)
            ol_kv_disk_close(svc->disks[i]);
    free(svc->disks);
    ol_kv_slab_destroy(&svc->slab);
    explicit_bzero(svc->token, sizeof svc->token);
    free(svc);
}

size_t ol_kv_service_metrics(struct ol_kv_service *svc, char *buf, size_t cap)
{
    int n = snprintf(buf, cap,
        "# HELP openlake_kv_sessions KV sessions open (connections past HELLO).\n"
        "# TYPE openlake_kv_sessions gauge\n"
        "openlake_kv_sessions %llu\n"
        "# HELP openlake_kv_unauthenticated_closed_total KV connections closed before "
        "a successful HELLO, by cause.\n"
        "# TYPE openlake_kv_unauthenticated_closed_total counter\n"
        "openlake_kv_unauthenticated_closed_total{cause=\"refused\"} %llu\n"
        "openlake_kv_unauthenticated_closed_total{cause=\"hello_timeout\"} %llu\n"
        "openlake_kv_unauthenticated_closed_total{cause=\"evicted\"} %llu\n",
        (unsigned long long)atomic_load(&svc->sessions),
        (unsigned long long)atomic_load(&svc->conns_refused),
        (unsigned long long)atomic_load(&svc->hello_timeouts),
        (unsigned long long)atomic_load(&svc->unauth_evicted));
    return n < 0 ? cap : (size_t)n;
}
