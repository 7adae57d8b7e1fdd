/*
 * service.c - see service.h.
 */
#include "kv/service.h"

#include "base/log.h"
#include "base/nspat.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define OL_KV_DEFAULT_RAM_FRAC 0.25

/* Whether tok[0, len) is want[0, want_len): time depends on want_len only. */
static bool ol_token_eq(const char *want, size_t want_len, const void *tok, size_t len)
{
    const unsigned char *a = (const unsigned char *)want, *b = tok;
    unsigned char diff = (unsigned char)(len != want_len);
    for (size_t i = 0; i < want_len; i++)
        diff |= (unsigned char)(a[i] ^ (i < len ? b[i] : 0));
    return diff == 0;
}

bool ol_kv_service_may_open(const struct ol_kv_service *svc, const struct ol_kv_tenant *t,
                            const void *tok, size_t len)
{
    bool admin = ol_token_eq(svc->token, svc->token_len, tok, len);
    bool own = t->token_len && ol_token_eq(t->token, t->token_len, tok, len);
    return admin | own;
}

struct ol_kv_tenant *ol_kv_service_tenant_of(struct ol_kv_service *svc, const void *ns,
                                             size_t len)
{
    for (int i = 1; i < svc->ntenants; i++) {
        struct ol_kv_tenant *t = &svc->tenants[i];
        for (int k = 0; k < t->npatterns; k++)
            if (ol_nspat_match(t->patterns[k], ns, len))
                return t;
    }
    return &svc->tenants[0];
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

/* Opens tenant t's disk tier of capacity_gb over kv_disk's dirs (key: the
 * setting, for messages). */
static int ol_open_disks(struct ol_kv_service *svc, struct ol_kv_tenant *t,
                         const struct ol_config *cfg, double capacity_gb, const char *key,
                         char *err, size_t errlen)
{
    int n = svc->nshards, rc;
    t->disks = calloc((size_t)n, sizeof *t->disks);
    if (!t->disks) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    int ndirs = cfg->kv_disk.n_dirs ? cfg->kv_disk.n_dirs : cfg->n_data_dirs;
    uint64_t share = (uint64_t)(capacity_gb * (double)(1u << 30)) / (uint64_t)n;
    if (share < OL_KV_PAGE) {
        snprintf(err, errlen, "%s: %g GiB gives each of the %d cores less than 2 MiB; raise it",
                 key, capacity_gb, n);
        return -EINVAL;
    }
    uint64_t recovered = 0;
    for (int i = 0; i < n; i++) {
        struct ol_kv_disk_params p = {
            .dir = cfg->kv_disk.n_dirs ? cfg->kv_disk.dirs[i % ndirs] : cfg->data_dirs[i % ndirs],
            .tenant = t == &svc->tenants[0] ? NULL : t->name,
            .shard = i, .nshards = n, .bytes = share, .evict_kind = OL_EVICT_DEFAULT,
            .queue_depth = (unsigned)cfg->kv_disk.queue_depth};
        if ((rc = ol_kv_disk_open(&t->disks[i], &p, err, errlen)) < 0)
            return rc;
        if ((rc = ol_kv_shard_set_disk(&t->shards[i], t->disks[i])) < 0) {
            snprintf(err, errlen, "out of memory");
            return rc;
        }
        struct ol_kv_disk_stats st;
        ol_kv_disk_stats(t->disks[i], &st);
        recovered += st.recovered;
    }
    if (t == &svc->tenants[0])
        ol_info("kv disk tier: %.2f GiB in %d dir(s), %llu entries found", capacity_gb, ndirs,
                (unsigned long long)recovered);
    else
        ol_info("kv tenant %s: disk tier %.2f GiB in %d dir(s), %llu entries found", t->name,
                capacity_gb, ndirs, (unsigned long long)recovered);
    return 0;
}

/* Tenant t's slab of about `bytes` (at least a page per shard), its shards
 * (each with the per-namespace quota's share) and, with disk_gb > 0, its
 * disk tier. */
static int ol_tenant_open(struct ol_kv_service *svc, struct ol_kv_tenant *t,
                          const struct ol_config *cfg, uint64_t bytes, double disk_gb,
                          const char *disk_key, char *err, size_t errlen)
{
    int rc, nshards = svc->nshards;
    if (bytes < (uint64_t)nshards * OL_KV_PAGE)
        bytes = (uint64_t)nshards * OL_KV_PAGE; /* at least a page per shard */
    if ((rc = ol_kv_slab_create(&t->slab, bytes, 1, err, errlen)) < 0)
        return rc;
    t->shards = calloc((size_t)nshards, sizeof *t->shards);
    t->pub = calloc((size_t)nshards, sizeof *t->pub);
    if (!t->shards || !t->pub) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    uint32_t np = t->slab.npages;
    for (int i = 0; i < nshards; i++) {
        uint32_t first = ol_kv_shard_first_page(np, (uint32_t)i, (uint32_t)nshards);
        uint32_t end = ol_kv_shard_first_page(np, (uint32_t)i + 1, (uint32_t)nshards);
        if ((rc = ol_kv_shard_init(&t->shards[i], &t->slab, first, end - first,
                                   OL_EVICT_DEFAULT, svc->ttl_ms)) < 0) {
            snprintf(err, errlen, "kv shard %d: %s", i, strerror(-rc));
            return rc;
        }
        /* keys spread evenly over the shards: each enforces its share */
        ol_kv_shard_set_quota(&t->shards[i],
                              (uint64_t)(cfg->kv_slab.namespace_quota_gb * (double)(1u << 30)) /
                                  (uint64_t)nshards);
    }
    if (disk_gb > 0 && (rc = ol_open_disks(svc, t, cfg, disk_gb, disk_key, err, errlen)) < 0)
        return rc;
    return 0;
}

static void ol_tenant_close(struct ol_kv_service *svc, struct ol_kv_tenant *t)
{
    if (t->shards)
        for (int i = 0; i < svc->nshards; i++)
            ol_kv_shard_exit(&t->shards[i]);
    free(t->shards);
    free(t->pub);
    if (t->disks)
        for (int i = 0; i < svc->nshards; i++)
            ol_kv_disk_close(t->disks[i]);
    free(t->disks);
    ol_kv_slab_destroy(&t->slab);
    free(t->patterns);
    explicit_bzero(t->token, sizeof t->token);
}

/* The [[kv_tenants]] entries as tenants 1.. (the admin token is known). */
static int ol_tenants_open(struct ol_kv_service *svc, const struct ol_config *cfg, char *err,
                           size_t errlen)
{
    int rc;
    for (int i = 0; i < cfg->n_kv_tenants; i++) {
        const struct ol_config_kv_tenant *ct = &cfg->kv_tenants[i];
        struct ol_kv_tenant *t = &svc->tenants[1 + i];
        snprintf(t->name, sizeof t->name, "%s", ct->name);
        t->slab.fd = -1;
        t->token_len = strlen(ct->token);
        memcpy(t->token, ct->token, t->token_len + 1);
        if (ol_token_eq(svc->token, svc->token_len, t->token, t->token_len)) {
            snprintf(err, errlen, "kv tenant %s: its token_file %s holds the admin token (%s), "
                     "which opens every namespace; give the tenant a token of its own", t->name,
                     ct->token_file, svc->token_path[0] ? svc->token_path : "kv_token");
            return -EINVAL;
        }
        t->patterns = calloc((size_t)ct->n_namespaces, sizeof *t->patterns);
        if (!t->patterns) {
            snprintf(err, errlen, "out of memory");
            return -ENOMEM;
        }
        memcpy(t->patterns, ct->namespaces, (size_t)ct->n_namespaces * sizeof *t->patterns);
        t->npatterns = ct->n_namespaces;
        if (ct->token_file_mode & 077)
            ol_warn("kv tenant %s: token_file %s is mode %04o: group or others may read it; "
                    "chmod 600 it", t->name, ct->token_file, ct->token_file_mode);
        char key[96];
        snprintf(key, sizeof key, "kv_tenants %s: disk_capacity_gb", t->name);
        if ((rc = ol_tenant_open(svc, t, cfg, (uint64_t)(ct->capacity_gb * (double)(1u << 30)),
                                 ct->disk_capacity_gb, key, err, errlen)) < 0)
            return rc;
        char pats[512];
        size_t pos = 0;
        pats[0] = 0;
        for (int k = 0; k < t->npatterns && pos < sizeof pats; k++)
            pos += (size_t)snprintf(pats + pos, sizeof pats - pos, "%s\"%s\"", k ? ", " : "",
                                    t->patterns[k]);
        struct ol_kv_hugetlb_pool pool;
        ol_kv_hugetlb_pool_read(&pool);
        char what[320];
        ol_info("kv tenant %s: slab %.2f GiB in %d shard%s, %s; namespaces %s", t->name,
                (double)t->slab.size / (1u << 30), svc->nshards, svc->nshards == 1 ? "" : "s",
                ol_kv_slab_backing_text(&t->slab, &pool, what, sizeof what), pats);
    }
    return 0;
}

int ol_kv_service_create(struct ol_kv_service **out, const struct ol_config *cfg, int nshards,
                         char *err, size_t errlen)
{
    int rc;
    struct ol_kv_service *svc = calloc(1, sizeof *svc);
    if (!svc || !(svc->tenants = calloc(1 + (size_t)cfg->n_kv_tenants, sizeof *svc->tenants))) {
        free(svc);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    svc->ntenants = 1 + cfg->n_kv_tenants;
    for (int i = 0; i < svc->ntenants; i++)
        svc->tenants[i].slab.fd = -1;
    snprintf(svc->tenants[0].name, sizeof svc->tenants[0].name, "default");
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
    svc->sock_mode = (unsigned)strtoul(cfg->kv_socket_mode, NULL, 8); /* checked by config */
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
    if ((rc = ol_tenant_open(svc, &svc->tenants[0], cfg, (uint64_t)bytes,
                             cfg->kv_disk.capacity_gb, "kv_disk.capacity_gb", err, errlen)) < 0)
        goto fail;
    struct ol_kv_hugetlb_pool pool;
    ol_kv_hugetlb_pool_read(&pool);
    char what[320];
    ol_info("kv slab: %.2f GiB in %d shard%s, %s", (double)svc->tenants[0].slab.size / (1u << 30),
            nshards, nshards == 1 ? "" : "s",
            ol_kv_slab_backing_text(&svc->tenants[0].slab, &pool, what, sizeof what));
    if ((rc = ol_tenants_open(svc, cfg, err, errlen)) < 0)
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
    for (int i = 0; i < svc->ntenants; i++)
        ol_tenant_close(svc, &svc->tenants[i]);
    free(svc->tenants);
    explicit_bzero(svc->token, sizeof svc->token);
    free(svc);
}

size_t ol_kv_service_metrics(struct ol_kv_service *svc, char *buf, size_t cap)
{
    enum { F_BYTES, F_INFO, F_ALLOCATED, F_POPULATED, F_SESSIONS, F_REFUSED, F_HITS, F_MISSES,
           F_USED, F_N };
    static const char *const fam[F_N][3] = {
        {"openlake_kv_tenant_slab_bytes", "gauge", "Bytes of the tenant's slab."},
        {"openlake_kv_slab_info", "gauge",
         "What backs the tenant's slab: hugetlb (hugetlbfs pages), shmem_thp (shmem with "
         "transparent huge pages) or shmem (4 KiB pages)."},
        {"openlake_kv_tenant_slab_allocated_bytes", "gauge",
         "Bytes of the tenant's slab the kernel has pages for (written or populated at least "
         "once); the rest costs a page allocation at first touch."},
        {"openlake_kv_tenant_slab_populated_bytes", "gauge",
         "Bytes of the tenant's slab the populate thread has gone over (kv_slab.populate = "
         "background); equal to openlake_kv_tenant_slab_bytes when done, 0 when off."},
        {"openlake_kv_tenant_sessions", "gauge", "KV sessions open on the tenant's slab."},
        {"openlake_kv_hello_refused_total", "counter",
         "HELLOs for a tenant's namespaces with a token that does not open them."},
        {"openlake_kv_tenant_hits_total", "counter",
         "LOOKUP, ACQUIRE and GET keys found (in RAM, on the disk tier, or fetched from "
         "their home node; for LOOKUP, also those their home node says it has), counted "
         "once per answer."},
        {"openlake_kv_tenant_misses_total", "counter",
         "LOOKUP, ACQUIRE and GET keys not found, counted once per answer."},
        {"openlake_kv_tenant_used_bytes", "gauge",
         "Value bytes the tenant holds, by tier (ram: committed entries of the slab; disk: "
         "the disk tier)."},
    };
    size_t pos = 0;
    for (int f = 0; f < F_N && pos < cap; f++) {
        int m = snprintf(buf + pos, cap - pos, "# HELP %s %s\n# TYPE %s %s\n", fam[f][0],
                         fam[f][2], fam[f][0], fam[f][1]);
        pos += m < 0 ? cap : (size_t)m;
        for (int i = 0; i < svc->ntenants && pos < cap; i++) {
            struct ol_kv_tenant *t = &svc->tenants[i];
            if (f == F_INFO) {
                m = snprintf(buf + pos, cap - pos, "%s{tenant=\"%s\",backing=\"%s\"} 1\n",
                             fam[f][0], t->name, ol_kv_slab_backing_name(&t->slab));
            } else if (f >= F_HITS) {
                uint64_t a = 0, b = 0;
                for (int k = 0; k < svc->nshards; k++) {
                    const struct ol_kv_pub *u = &t->pub[k];
                    a += atomic_load_explicit(f == F_HITS ? &u->hits : f == F_MISSES ? &u->misses
                                                                                      : &u->ram_bytes,
                                              memory_order_relaxed);
                    b += atomic_load_explicit(&u->disk_bytes, memory_order_relaxed);
                }
                if (f == F_USED)
                    m = snprintf(buf + pos, cap - pos,
                                 "%s{tenant=\"%s\",tier=\"ram\"} %llu\n"
                                 "%s{tenant=\"%s\",tier=\"disk\"} %llu\n",
                                 fam[f][0], t->name, (unsigned long long)a, fam[f][0], t->name,
                                 (unsigned long long)b);
                else
                    m = snprintf(buf + pos, cap - pos, "%s{tenant=\"%s\"} %llu\n", fam[f][0],
                                 t->name, (unsigned long long)a);
            } else {
                uint64_t v = f == F_BYTES       ? (uint64_t)t->slab.size
                             : f == F_ALLOCATED ? ol_kv_slab_allocated(&t->slab)
                             : f == F_POPULATED ? atomic_load(&t->populated)
                             : f == F_SESSIONS  ? atomic_load(&t->sessions)
                                                : atomic_load(&t->hello_refused);
                m = snprintf(buf + pos, cap - pos, "%s{tenant=\"%s\"} %llu\n", fam[f][0],
                             t->name, (unsigned long long)v);
            }
            pos += m < 0 ? cap : (size_t)m;
        }
    }
    if (pos >= cap)
        return cap;
    int n = snprintf(buf + pos, cap - pos,
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
    return n < 0 ? cap : pos + (size_t)n;
}
