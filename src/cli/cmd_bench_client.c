/*
 * cmd_bench_client.c - `openlake bench client`: the load test an operator
 * runs against any node, or a pool's nodes, KV or S3, from any host.
 *
 * Owns: --concurrency worker threads, each with a connection of its own
 * (a C client session for KV, a keep-alive HTTP/1.1 connection signed
 * with SigV4 for S3), writing new values or reading back a set written
 * first (every byte checked), for --seconds; per-operation latencies
 * (the first OL_BC_SAMPLES of each worker), and the report: operations/s,
 * GB/s, p50/p99/p999, errors (a table, or --json).
 *
 * Targets: kv://HOST:PORT (the KV service over TCP), kv:PATH (its Unix
 * socket: values through the shared slab), ucx://HOST:PORT (its UCX
 * listener, kv_ucx_addr), http://HOST:PORT (the S3 API; objects in
 * --bucket, made when missing). A comma-separated list of targets of one
 * kind (up to OL_BC_MAX_TARGETS: the nodes of a pool) spreads the workers
 * over them, worker i on target i mod n.
 *
 * Must not: speak TLS (https:// is refused with a message), or report an
 * operation whose bytes did not come back whole as a success.
 */
#include "cli/admin.h"
#include "cli/cli.h"
#include "cli/output.h"
#include "openlake/client.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define OL_BC_SAMPLES (1u << 20)   /* latencies kept per worker */
#define OL_BC_MAX_CONC 256
#define OL_BC_MAX_TARGETS 64
#define OL_BC_TARGETS_LEN 8192     /* the --target list, in bytes */

struct ol_bc_target {
    const char *addr;              /* kv: the client's address (into the list's copy) */
    char host[256], port[16];      /* s3 */
};

struct ol_bc {
    const struct ol_cli *cli;
    bool s3, read;
    struct ol_bc_target t[OL_BC_MAX_TARGETS];
    unsigned nt;
    char list[OL_BC_TARGETS_LEN];  /* the --target list, split in place */
    /* kv */
    struct ol_client_opts ko;      /* addr: each worker's own target's */
    /* s3 */
    struct ol_cli_cred cred;
    const char *bucket;
    uint64_t size;
    unsigned keys;                 /* the set a read cycles over (per worker) */
    double seconds;
    _Atomic uint64_t t_end;        /* ns: set once every worker wrote its read set */
    _Atomic unsigned ready;        /* workers done writing their read sets */
    _Atomic int go;                /* the clock runs */
    uint64_t run;                  /* tells this run's keys from another's */
};

/* A worker is ready (its read set written): waits for the clock. */
static void ready_wait(struct ol_bc *b)
{
    atomic_fetch_add(&b->ready, 1);
    while (!atomic_load(&b->go)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

struct ol_bc_worker {
    struct ol_bc *b;
    const struct ol_bc_target *t;  /* its target: b->t[id mod b->nt] */
    pthread_t th;
    int id;
    uint64_t ops, bytes, errors;
    uint64_t *lat;                 /* nanoseconds */
    size_t nlat;
    char err[256];
    char *val, *buf;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The bytes of value k of worker w: a pattern no two keys share. */
static void fill(char *p, uint64_t n, uint64_t run, int w, uint64_t k)
{
    uint64_t x = run ^ ((uint64_t)w << 40) ^ (k * 0x9E3779B97F4A7C15ull);
    for (uint64_t i = 0; i < n; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(p + i, &x, n - i < 8 ? n - i : 8);
    }
}

static void record(struct ol_bc_worker *w, uint64_t t0, bool ok, uint64_t bytes)
{
    if (!ok) {
        w->errors++;
        return;
    }
    w->ops++;
    w->bytes += bytes;
    if (w->nlat < OL_BC_SAMPLES)
        w->lat[w->nlat++] = now_ns() - t0;
}

/* ---- KV ------------------------------------------------------------------------ */

static void *kv_worker(void *arg)
{
    struct ol_bc_worker *w = arg;
    struct ol_bc *b = w->b;
    ol_client *c = NULL;
    char name[64];
    struct ol_client_key key = {name, 0};
    uint16_t st = 0;
    uint64_t len = b->size, got;
    struct ol_client_opts o = b->ko;
    o.addr = w->t->addr;
    bool ready = ol_client_open(&o, &c, w->err, sizeof w->err) == 0;
    /* the set it reads back, written before the clock runs */
    for (unsigned k = 0; ready && b->read && k < b->keys; k++) {
        key.len = (uint16_t)snprintf(name, sizeof name, "bc-%llx-%d-%u",
                                     (unsigned long long)b->run, w->id, k);
        fill(w->val, b->size, b->run, w->id, k);
        const void *v = w->val;
        if (ol_client_put(c, &key, &v, &len, 1, &st) < 0 || st != 0) {
            snprintf(w->err, sizeof w->err, "writing the set to read: status %u", st);
            ready = false;
        }
    }
    if (!ready)
        w->errors++;
    ready_wait(b);
    for (uint64_t k = 0; ready && now_ns() < b->t_end; k++) {
        if (b->read) {
            unsigned idx = (unsigned)(k % b->keys);
            key.len = (uint16_t)snprintf(name, sizeof name, "bc-%llx-%d-%u",
                                         (unsigned long long)b->run, w->id, idx);
            void *bp = w->buf;
            uint64_t t0 = now_ns();
            int rc = ol_client_get(c, &key, &bp, &len, &got, 1, &st);
            bool ok = rc == 0 && st == 0 && got == b->size;
            if (ok) {
                fill(w->val, b->size, b->run, w->id, idx);
                ok = memcmp(w->val, w->buf, b->size) == 0;
            }
            record(w, t0, ok, b->size);
            if (!ok && !w->err[0])
                snprintf(w->err, sizeof w->err, "get: rc %d status %u%s", rc, st,
                         rc == 0 && st == 0 ? " (wrong bytes)" : "");
        } else {
            key.len = (uint16_t)snprintf(name, sizeof name, "bc-%llx-%d-w%llu",
                                         (unsigned long long)b->run, w->id,
                                         (unsigned long long)k);
            fill(w->val, b->size, b->run, w->id, k);
            const void *v = w->val;
            uint64_t t0 = now_ns();
            int rc = ol_client_put(c, &key, &v, &len, 1, &st);
            bool ok = rc == 0 && st == 0;
            record(w, t0, ok, b->size);
            if (!ok && !w->err[0])
                snprintf(w->err, sizeof w->err, "put: rc %d status %u", rc, st);
        }
    }
    if (c)
        ol_client_close(c);
    return NULL;
}

/* ---- S3 ------------------------------------------------------------------------ */

static int s3_connect(const struct ol_bc_target *t)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    if (getaddrinfo(t->host, t->port, &hints, &ai) != 0)
        return -1;
    int fd = -1;
    for (struct addrinfo *p = ai; p && fd < 0; p = p->ai_next) {
        fd = socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol);
        if (fd >= 0 && connect(fd, p->ai_addr, p->ai_addrlen) < 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd >= 0) {
        struct timeval tv = {30, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
    return fd;
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* One signed request on fd (body: len bytes, or none); the answer's status,
 * its body into buf (cap; longer is an error), *blen its length. -1: the
 * connection failed. */
static int s3_call(struct ol_bc_worker *w, int fd, const char *method, const char *path,
                   const char *body, uint64_t len, char *buf, uint64_t cap, uint64_t *blen)
{
    struct ol_bc *b = w->b;
    char head[4096];
    int hl = ol_cli_sign_head(&b->cred, w->t->host, w->t->port, method, path, "", body != NULL,
                              len, true, head, sizeof head);
    if (hl < 0 || send_all(fd, head, (size_t)hl) < 0 || (body && send_all(fd, body, len) < 0))
        return -1;
    char rh[8192];
    size_t got = 0;
    char *end = NULL;
    while (!end) {
        if (got == sizeof rh - 1)
            return -1;
        ssize_t r = recv(fd, rh + got, sizeof rh - 1 - got, 0);
        if (r <= 0)
            return -1;
        got += (size_t)r;
        rh[got] = 0;
        end = strstr(rh, "\r\n\r\n");
    }
    int status = 0;
    if (sscanf(rh, "HTTP/1.%*d %d", &status) != 1)
        return -1;
    uint64_t clen = 0;
    for (char *l = strstr(rh, "\r\n"); l && l < end; l = strstr(l + 2, "\r\n"))
        if (!strncasecmp(l + 2, "content-length:", 15))
            clen = strtoull(l + 17, NULL, 10);
    size_t have = got - (size_t)(end + 4 - rh);
    if (clen > cap || have > clen)
        return -1;
    memcpy(buf, end + 4, have);
    while (have < clen) {
        ssize_t r = recv(fd, buf + have, clen - have, 0);
        if (r <= 0)
            return -1;
        have += (size_t)r;
    }
    *blen = clen;
    return status;
}

static void *s3_worker(void *arg)
{
    struct ol_bc_worker *w = arg;
    struct ol_bc *b = w->b;
    int fd = s3_connect(w->t);
    bool ready = fd >= 0;
    if (!ready)
        snprintf(w->err, sizeof w->err, "cannot connect to %.200s:%s", w->t->host, w->t->port);
    char path[512];
    uint64_t blen;
    for (unsigned k = 0; ready && b->read && k < b->keys; k++) {
        snprintf(path, sizeof path, "/%s/bc-%llx-%d-%u", b->bucket,
                 (unsigned long long)b->run, w->id, k);
        fill(w->val, b->size, b->run, w->id, k);
        int st = s3_call(w, fd, "PUT", path, w->val, b->size, w->buf, b->size, &blen);
        if (st != 200) {
            snprintf(w->err, sizeof w->err, "writing the set to read: HTTP %d", st);
            ready = false;
        }
    }
    if (!ready)
        w->errors++;
    ready_wait(b);
    for (uint64_t k = 0; ready && fd >= 0 && now_ns() < b->t_end; k++) {
        uint64_t idx = b->read ? k % b->keys : k;
            if (b->read)
            snprintf(path, sizeof path, "/%s/bc-%llx-%d-%u", b->bucket,
                     (unsigned long long)b->run, w->id, (unsigned)idx);
        else
            snprintf(path, sizeof path, "/%s/bc-%llx-%d-w%llu", b->bucket,
                     (unsigned long long)b->run, w->id, (unsigned long long)idx);
        uint64_t t0 = now_ns();
        int st;
        bool ok;
        if (b->read) {
            st = s3_call(w, fd, "GET", path, NULL, 0, w->buf, b->size, &blen);
            ok = st == 200 && blen == b->size;
            if (ok) {
                fill(w->val, b->size, b->run, w->id, idx);
                ok = memcmp(w->val, w->buf, b->size) == 0;
            }
        } else {
            fill(w->val, b->size, b->run, w->id, idx);
            t0 = now_ns();
            st = s3_call(w, fd, "PUT", path, w->val, b->size, w->buf, b->size, &blen);
            ok = st == 200;
        }
        record(w, t0, ok, b->size);
        if (!ok && !w->err[0])
            snprintf(w->err, sizeof w->err, "%s %.200s: HTTP %d", b->read ? "GET" : "PUT", path, st);
        if (st < 0) {   /* the connection is gone: a new one */
            close(fd);
            fd = s3_connect(w->t);
        }
    }
    if (fd >= 0)
        close(fd);
    return NULL;
}

/* ---- the command ------------------------------------------------------------------ */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double pct(const uint64_t *v, size_t n, double p)
{
    if (!n)
        return 0;
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return (double)v[i] / 1000.0;   /* microseconds */
}

/* "key": v as a JSON number printed with fmt. */
static void jfloat(struct ol_json *j, const char *key, const char *fmt, double v)
{
    char num[64];
    snprintf(num, sizeof num, fmt, v);
    ol_json_key(j, key);
    ol_json_raw(j, num);
}

int ol_cmd_bench_client(const struct ol_cli *cli, int argc, char **argv)
{
    const char *target = NULL, *op = NULL, *size = NULL, *conc = NULL, *secs = NULL, *keys = NULL,
               *token = NULL, *token_file = NULL, *ns = NULL, *bucket = NULL, *ak = NULL,
               *sk = NULL, *skf = NULL, *creds = NULL, *region = NULL;
    static const char *const opts[] = {"--target", "--op", "--size", "--concurrency",
                                       "--seconds", "--keys", "--token", "--token-file", "--ns",
                                       "--bucket", "--access-key", "--secret-key",
                                       "--secret-key-file", "--credentials", "--region", NULL};
    const char **slots[] = {&target, &op, &size, &conc, &secs, &keys, &token, &token_file, &ns,
                            &bucket, &ak, &sk, &skf, &creds, &region};
    int rc = ol_cli_options(cli, "bench", argc - 1, argv + 1, opts, slots, NULL, 0);
    if (rc)
        return rc;
    static struct ol_bc b;
    memset(&b, 0, sizeof b);
    b.cli = cli;
    if (!target || !op)
        return ol_cli_usage_error(cli, "bench", "client needs --target and --op read|write");
    if (strcmp(op, "read") && strcmp(op, "write"))
        return ol_cli_usage_error(cli, "bench", "--op '%s': read or write", op);
    b.read = !strcmp(op, "read");
    char *end;
    b.size = size ? strtoull(size, &end, 10) : 262144;
    if ((size && (*end || !*size)) || b.size == 0 || b.size > (16u << 20))
        return ol_cli_usage_error(cli, "bench", "--size: 1 to 16777216 bytes");
    unsigned nc = conc ? (unsigned)strtoul(conc, &end, 10) : 4;
    if ((conc && (*end || !*conc)) || nc == 0 || nc > OL_BC_MAX_CONC)
        return ol_cli_usage_error(cli, "bench", "--concurrency: 1 to %d", OL_BC_MAX_CONC);
    b.seconds = secs ? strtod(secs, &end) : 5;
    if ((secs && (*end || !*secs)) || b.seconds <= 0 || b.seconds > 3600)
        return ol_cli_usage_error(cli, "bench", "--seconds: more than 0, at most 3600");
    b.keys = keys ? (unsigned)strtoul(keys, &end, 10) : 16;
    if ((keys && (*end || !*keys)) || b.keys == 0 || b.keys > 65536)
        return ol_cli_usage_error(cli, "bench", "--keys: 1 to 65536 (per worker, for read)");
    char tokpath[4096];
    if (strlen(target) >= sizeof b.list)
        return ol_cli_usage_error(cli, "bench", "--target: at most %d bytes",
                                  OL_BC_TARGETS_LEN - 1);
    memcpy(b.list, target, strlen(target) + 1);
    int kind = -1;                 /* 0: KV (kv://, kv:, ucx://), 1: S3 (http://) */
    char *save = NULL;
    for (char *one = strtok_r(b.list, ",", &save); one; one = strtok_r(NULL, ",", &save)) {
        if (b.nt == OL_BC_MAX_TARGETS)
            return ol_cli_usage_error(cli, "bench", "--target: at most %d targets",
                                      OL_BC_MAX_TARGETS);
        struct ol_bc_target *t = &b.t[b.nt++];
        bool ucx = !strncmp(one, "ucx://", 6);
        int k;
        if (ucx || !strncmp(one, "kv://", 5) || !strncmp(one, "kv:", 3)) {
            k = 0;
            /* ucx://: the client takes the address as it is */
            t->addr = ucx ? one : one + (!strncmp(one, "kv://", 5) ? 5 : 3);
            if (!*t->addr || (ucx && !one[6]))
                return ol_cli_usage_error(cli, "bench", "--target '%s': kv://HOST:PORT, "
                                          "kv:PATH or ucx://HOST:PORT", one);
        } else if (!strncmp(one, "http://", 7)) {
            k = 1;
            const char *hp = one + 7, *colon = strrchr(hp, ':');
            size_t hl = colon ? (size_t)(colon - hp) : strcspn(hp, "/");
            if (!hl || hl >= sizeof t->host)
                return ol_cli_usage_error(cli, "bench", "--target '%s': http://HOST:PORT", one);
            memcpy(t->host, hp, hl);
            snprintf(t->port, sizeof t->port, "%.*s", colon ? (int)strcspn(colon + 1, "/") : 2,
                     colon ? colon + 1 : "80");
        } else {
            return ol_cli_usage_error(cli, "bench", "--target '%s': kv://HOST:PORT, kv:PATH, "
                                      "ucx://HOST:PORT or http://HOST:PORT (https is not "
                                      "supported)", one);
        }
        if (kind >= 0 && k != kind)
            return ol_cli_usage_error(cli, "bench", "--target: a list is all KV targets "
                                      "(kv://, kv:, ucx://) or all S3 (http://)");
        kind = k;
    }
    if (!b.nt)
        return ol_cli_usage_error(cli, "bench", "--target: no target in '%s'", target);
    if (nc < b.nt)
        return ol_cli_usage_error(cli, "bench", "--concurrency %u: fewer workers than the "
                                  "%u targets", nc, b.nt);
    if (kind == 0) {
        if (bucket || ak || sk || skf || creds || region)
            return ol_cli_usage_error(cli, "bench", "--bucket and the S3 credential options go "
                                      "with an http:// target");
        /* the token beside the first target's socket, when not named */
        b.ko = (struct ol_client_opts){.addr = b.t[0].addr, .ns = ns ? ns : "bench-client",
                                       .value_size = b.size};
        int ex = ol_cli_kv_token(cli, "bench", token, token_file, &b.ko, tokpath);
        if (ex)
            return ex;
    } else {
        b.s3 = true;
        if (token || token_file || ns)
            return ol_cli_usage_error(cli, "bench", "--token, --token-file and --ns go with a "
                                      "kv target");
        b.bucket = bucket ? bucket : "openlake-bench";
        struct ol_cli_cred_flags f = {ak, sk, skf, creds, region};
        int ex = ol_cli_cred_load(cli, "bench", &f, &b.cred);
        if (ex)
            return ex;
    }
    b.run = (uint64_t)getpid() << 24 ^ (uint64_t)time(NULL);
    for (unsigned i = 0; b.s3 && i < b.nt; i++) {  /* the bucket, made where missing */
        char resp[4096], path[300];
        snprintf(path, sizeof path, "/%s", b.bucket);
        struct ol_bc_worker probe = {.b = &b, .t = &b.t[i]};
        int fd = s3_connect(&b.t[i]);
        uint64_t blen;
        int st = fd < 0 ? -1 : s3_call(&probe, fd, "PUT", path, NULL, 0, resp, sizeof resp - 1,
                                       &blen);
        if (fd >= 0)
            close(fd);
        if (st != 200 && st != 409) {
            explicit_bzero(&b.cred, sizeof b.cred);
            return ol_cli_fail(cli, "bench", "http://%s:%s: cannot make bucket %s (%s)",
                               b.t[i].host, b.t[i].port, b.bucket,
                               st < 0 ? "no answer" : "refused: check the credential");
        }
    }
    struct ol_bc_worker *w = calloc(nc, sizeof *w);
    if (!w)
        return ol_cli_fail(cli, "bench", "out of memory");
    for (unsigned i = 0; i < nc; i++) {
        w[i].b = &b;
        w[i].t = &b.t[i % b.nt];
        w[i].id = (int)i;
        w[i].lat = malloc(OL_BC_SAMPLES * sizeof *w[i].lat);
        w[i].val = malloc(b.size);
        w[i].buf = malloc(b.size);
        if (!w[i].lat || !w[i].val || !w[i].buf) {
            for (unsigned k = 0; k <= i; k++)
                free(w[k].lat), free(w[k].val), free(w[k].buf);
            free(w);
            return ol_cli_fail(cli, "bench", "out of memory");
        }
    }
    /* every worker writes the set it reads first; the clock starts when
     * all of them are done, and runs --seconds */
    atomic_store(&b.t_end, UINT64_MAX);
    unsigned started = 0;
    for (unsigned i = 0; i < nc; i++) {
        if (pthread_create(&w[i].th, NULL, b.s3 ? s3_worker : kv_worker, &w[i]) != 0)
            break;
        started++;
    }
    for (unsigned i = started; i < nc; i++)
        w[i].errors = 1;   /* no thread */
    while (atomic_load(&b.ready) < started) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    uint64_t t0 = now_ns();
    atomic_store(&b.t_end, started == nc ? t0 + (uint64_t)(b.seconds * 1e9) : 0);
    atomic_store(&b.go, 1);
    for (unsigned i = 0; i < started; i++)
        pthread_join(w[i].th, NULL);
    double elapsed = (double)(now_ns() - t0) / 1e9;
    uint64_t ops = 0, bytes = 0, errors = 0;
    size_t n = 0;
    const char *why = started < nc ? "cannot start the workers" : NULL;
    for (unsigned i = 0; i < nc; i++) {
        ops += w[i].ops;
        bytes += w[i].bytes;
        errors += w[i].errors;
        n += w[i].nlat;
        if (!why && w[i].err[0])
            why = w[i].err;
    }
    uint64_t *all = malloc((n ? n : 1) * sizeof *all);
    size_t k = 0;
    for (unsigned i = 0; i < started && all; i++) {
        memcpy(all + k, w[i].lat, w[i].nlat * sizeof *all);
        k += w[i].nlat;
    }
    if (all)
        qsort(all, k, sizeof *all, cmp_u64);
    double p50 = all ? pct(all, k, 0.50) : 0, p99 = all ? pct(all, k, 0.99) : 0,
           p999 = all ? pct(all, k, 0.999) : 0;
    double opsps = ops / elapsed, gbps = (double)bytes / elapsed / 1e9;
    if (cli->out & OL_OUT_JSON) {
        struct ol_json j;
        ol_json_init(&j, stdout);
        ol_json_object_begin(&j);
        ol_json_key(&j, "target");
        ol_json_str(&j, target);
        ol_json_key(&j, "targets");
        ol_json_uint(&j, b.nt);
        ol_json_key(&j, "op");
        ol_json_str(&j, op);
        ol_json_key(&j, "size");
        ol_json_uint(&j, b.size);
        ol_json_key(&j, "concurrency");
        ol_json_uint(&j, nc);
        jfloat(&j, "seconds", "%.3f", elapsed);
        ol_json_key(&j, "ops");
        ol_json_uint(&j, ops);
        ol_json_key(&j, "errors");
        ol_json_uint(&j, errors);
        jfloat(&j, "ops_per_s", "%.1f", opsps);
        jfloat(&j, "gb_per_s", "%.4f", gbps);
        jfloat(&j, "p50_us", "%.1f", p50);
        jfloat(&j, "p99_us", "%.1f", p99);
        jfloat(&j, "p999_us", "%.1f", p999);
        ol_json_key(&j, "error");
        ol_json_str(&j, why);
        ol_json_object_end(&j);   /* the top level ends its line */
    } else {
        printf("%s %s of %llu B, %u at a time, %.1f s: %llu ops, %.0f ops/s, %.3f GB/s, "
               "p50 %.0f us, p99 %.0f us, p999 %.0f us, %llu errors\n",
               target, op, (unsigned long long)b.size, nc, elapsed, (unsigned long long)ops,
               opsps, gbps, p50, p99, p999, (unsigned long long)errors);
        if (why)
            printf("  first error: %s\n", why);
    }
    for (unsigned i = 0; i < nc; i++) {
        free(w[i].lat);
        free(w[i].val);
        free(w[i].buf);
    }
    free(w);
    free(all);
    explicit_bzero(&b.cred, sizeof b.cred);
    if (errors || !ops)
        return ol_cli_fail(cli, "bench", "%llu operation%s failed%s",
                           (unsigned long long)errors, errors == 1 ? "" : "s",
                           ops ? "" : " (none succeeded)");
    return OL_EXIT_OK;
}
