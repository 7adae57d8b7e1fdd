/*
 * kv_bench.c - the KV service seen from a same-host client, over the Unix
 * socket and the shared slab (a minimal client built on src/kv/proto.c).
 *
 *   kv_bench SOCKET TOKEN rtt SECONDS
 *       round trips of 32-key RESERVE, COMMIT and LOOKUP frames, one at a
 *       time: p50/p99/p999 in microseconds for each, and for the three as
 *       one Reserve→Commit→Lookup cycle.
 *   kv_bench SOCKET TOKEN data VALUE_BYTES SECONDS
 *       put = RESERVE a batch, copy the values into the slab, COMMIT;
 *       get = ACQUIRE a batch, copy the values out, RELEASE; GB/s of value
 *       bytes for each, and single-thread memcpy of the same bytes between
 *       the same kind of buffers in the same run, as the ceiling. No value
 *       checksums: the protocol and the copies alone.
 *   kv_bench SOCKET TOKEN lib VALUE_BYTES SECONDS
 *       the same through the C client library (ol_client_put / ol_client_get:
 *       every value's xxh3-64 computed while copying in, checked while
 *       copying out), next to three ceilings measured in the same run:
 *       memcpy DRAM to DRAM, DRAM into a MAP_SHARED memfd mapping (what put
 *       writes into) and out of it (what get reads from).
 *
 * Prints one JSON object. The daemon must run with --threads 1 (one shard):
 * this client does not route keys between shards.
 */
#include "kv/proto.h"
#include "openlake/client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define BATCH 32

static int g_fd;
static uint8_t g_out[1 << 20], g_in[1 << 20];
static uint64_t g_req = 1;
static char *g_slab;
static size_t g_slab_size;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
    fprintf(stderr, "kv_bench: %s\n", what);
    exit(1);
}

static void send_all(const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = send(g_fd, c, n, MSG_NOSIGNAL);
        if (w <= 0)
            die("send");
        c += w;
        n -= (size_t)w;
    }
}

/* Reads one response frame into g_in; returns its decoder. */
static struct ol_kv_dec read_frame(struct ol_kv_hdr *h, int *fd_out)
{
    size_t have = 0;
    for (;;) {
        struct ol_kv_dec d;
        long n = ol_kv_frame_parse(g_in, have, h, &d);
        if (n > 0) {
            if (h->status != OL_KV_OK)
                die(ol_kv_status_name(h->status));
            return d;
        }
        if (n != OL_KV_INCOMPLETE)
            die("bad response frame");
        char ctl[CMSG_SPACE(sizeof(int))];
        struct iovec iov = {g_in + have, sizeof g_in - have};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
                           .msg_controllen = sizeof ctl};
        ssize_t got = recvmsg(g_fd, &m, 0);
        if (got <= 0)
            die("recv");
        struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
        if (cm && cm->cmsg_type == SCM_RIGHTS && fd_out)
            memcpy(fd_out, CMSG_DATA(cm), sizeof(int));
        have += (size_t)got;
    }
}

static void keys_frame(unsigned op, uint64_t base)
{
    struct ol_kv_enc e;
    char key[32];
    ol_kv_frame_begin(&e, g_out, sizeof g_out, op, g_req++, 0, 0);
    for (int i = 0; i < BATCH; i++) {
        int n = snprintf(key, sizeof key, "bench-%llu", (unsigned long long)(base + (uint64_t)i));
        ol_kv_enc_key(&e, key, (size_t)n);
    }
    send_all(g_out, (size_t)ol_kv_frame_end(&e));
}

static void hello(const char *token, uint64_t value_size)
{
    struct ol_kv_enc e;
    struct ol_kv_hello_req q = {.min_version = 1, .max_version = 1,
                                .flags = OL_KV_HELLO_WANTS_SHM, .value_size = value_size,
                                .token = {(const uint8_t *)token, (uint32_t)strlen(token)},
                                .ns = {(const uint8_t *)"bench", 5}};
    ol_kv_frame_begin(&e, g_out, sizeof g_out, OL_KV_OP_HELLO, g_req++, 0, 0);
    if (ol_kv_enc_hello_req(&e, &q) < 0)
        die("hello encode");
    send_all(g_out, (size_t)ol_kv_frame_end(&e));
    struct ol_kv_hdr h;
    int fd = -1;
    struct ol_kv_dec d = read_frame(&h, &fd);
    struct ol_kv_hello_resp r;
    if (ol_kv_dec_hello_resp(&d, &r) < 0 || !(r.flags & OL_KV_HELLO_SHM) || fd < 0)
        die("no shared slab in the HELLO answer");
    g_slab_size = r.slab_size;
    g_slab = mmap(NULL, g_slab_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (g_slab == MAP_FAILED)
        die("mmap slab");
    close(fd);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void pct(const char *name, double *v, size_t n, int last)
{
    qsort(v, n, sizeof *v, cmp_d);
    printf("\"%s\":{\"p50_us\":%.1f,\"p99_us\":%.1f,\"p999_us\":%.1f,\"n\":%zu}%s", name,
           v[n / 2] * 1e6, v[n * 99 / 100] * 1e6, v[n * 999 / 1000] * 1e6, n, last ? "" : ",");
}

/* RESERVE + COMMIT of BATCH new keys; fills slot refs. Optionally copies
 * vbytes from src into each slot between the two. */
static void put_batch(uint64_t base, const char *src, size_t vbytes, double *t_res, double *t_com)
{
    struct ol_kv_hdr h;
    struct ol_kv_reserve_res rr[BATCH];
    double t0 = now_s();
    keys_frame(OL_KV_OP_RESERVE, base);
    struct ol_kv_dec d = read_frame(&h, NULL);
    for (int i = 0; i < BATCH; i++)
        if (ol_kv_dec_reserve_res(&d, &rr[i]) != 1)
            die("reserve answer");
    double t1 = now_s();
    if (src)
        for (int i = 0; i < BATCH; i++)
            if (rr[i].status == OL_KV_OK)
                memcpy(g_slab + rr[i].offset, src + (size_t)i * vbytes, vbytes);
    double t2 = now_s();
    struct ol_kv_enc e;
    ol_kv_frame_begin(&e, g_out, sizeof g_out, OL_KV_OP_COMMIT, g_req++, 0, 0);
    for (int i = 0; i < BATCH; i++)
        if (rr[i].status == OL_KV_OK) {
            struct ol_kv_commit_item it = {rr[i].slot, rr[i].gen, vbytes ? vbytes : 1, 0};
            ol_kv_enc_commit(&e, &it);
        }
    send_all(g_out, (size_t)ol_kv_frame_end(&e));
    read_frame(&h, NULL);
    double t3 = now_s();
    if (t_res)
        *t_res = t1 - t0;
    if (t_com)
        *t_com = t3 - t2;
}

static int rtt(double secs)
{
    size_t cap = 2000000, n = 0;
    double *res = malloc(cap * sizeof *res), *com = malloc(cap * sizeof *com),
           *look = malloc(cap * sizeof *look), *cyc = malloc(cap * sizeof *cyc);
    uint64_t base = 0;
    double end = now_s() + secs;
    struct ol_kv_hdr h;
    while (n < cap && now_s() < end) {
        double t0 = now_s();
        put_batch(base, NULL, 0, &res[n], &com[n]);
        double t1 = now_s();
        keys_frame(OL_KV_OP_LOOKUP, base);
        read_frame(&h, NULL);
        double t2 = now_s();
        look[n] = t2 - t1;
        cyc[n] = t2 - t0;
        base += BATCH;
        n++;
    }
    printf("{\"batch\":%d,", BATCH);
    pct("reserve", res, n, 0);
    pct("commit", com, n, 0);
    pct("lookup", look, n, 0);
    pct("cycle", cyc, n, 1);
    printf("}\n");
    return 0;
}

#define WORK (256u << 20) /* DRAM-sized client buffers: no cache-resident ceiling */

/* The client's source and destination buffers, WORK bytes each; src filled. */
static void buffers(size_t nchunks, char **src, char **dst)
{
    *src = aligned_alloc(4096, WORK);
    *dst = aligned_alloc(4096, WORK);
    if (!*src || !*dst || nchunks < 2)
        die("out of memory or value too large");
    for (size_t i = 0; i < WORK; i++)
        (*src)[i] = (char)(i * 31 + i / 4096);
    memset(*dst, 0, WORK);
}

static int data(size_t vbytes, double secs)
{
    size_t total = vbytes * BATCH, nchunks = WORK / total;
    char *src, *dst;
    buffers(nchunks, &src, &dst);
    /* Ceiling: memcpy of the same batches between DRAM buffers, one thread. */
    uint64_t copied = 0, k = 0;
    double t0 = now_s(), t;
    do {
        size_t off = (size_t)(k++ % nchunks) * total;
        memcpy(dst + off, src + off, total);
        copied += total;
        t = now_s();
    } while (t - t0 < secs / 3);
    double memcpy_gbs = (double)copied / (t - t0) / 1e9;
    /* Touch the whole slab once (first-touch page faults are a one-time
     * cost of a fresh daemon, not of the data path). */
    uint64_t base = 1u << 30;
    for (size_t done = 0; done < g_slab_size; done += total, base += BATCH)
        put_batch(base, src, vbytes, NULL, NULL);
    /* put: values from DRAM into slots (evicting old ones as the slab is full) */
    uint64_t put_bytes = 0;
    k = 0;
    t0 = now_s();
    do {
        put_batch(base, src + (size_t)(k++ % nchunks) * total, vbytes, NULL, NULL);
        base += BATCH;
        put_bytes += total;
        t = now_s();
    } while (t - t0 < secs / 3);
    double put_gbs = (double)put_bytes / (t - t0) / 1e9;
    /* get: the last batches written are resident; acquire, copy out, release */
    size_t resident = g_slab_size / total / 2;
    if (resident > nchunks)
        resident = nchunks;
    uint64_t get_bytes = 0;
    struct ol_kv_hdr h;
    struct ol_kv_acquire_res ar[BATCH];
    k = 0;
    t0 = now_s();
    do {
        uint64_t b = base - BATCH * (1 + k % resident);
        char *to = dst + (size_t)(k % nchunks) * total;
        k++;
        keys_frame(OL_KV_OP_ACQUIRE, b);
        struct ol_kv_dec d = read_frame(&h, NULL);
        for (int i = 0; i < BATCH; i++)
            if (ol_kv_dec_acquire_res(&d, &ar[i]) != 1 || ar[i].status != OL_KV_OK)
                die("acquire: a recently written key is missing");
        for (int i = 0; i < BATCH; i++)
            memcpy(to + (size_t)i * vbytes, g_slab + ar[i].offset, vbytes);
        struct ol_kv_enc e;
        ol_kv_frame_begin(&e, g_out, sizeof g_out, OL_KV_OP_RELEASE, g_req++, 0, 0);
        for (int i = 0; i < BATCH; i++)
            ol_kv_enc_slot_ref(&e, ar[i].slot, ar[i].gen);
        send_all(g_out, (size_t)ol_kv_frame_end(&e));
        read_frame(&h, NULL);
        get_bytes += total;
        t = now_s();
    } while (t - t0 < secs / 3);
    double get_gbs = (double)get_bytes / (t - t0) / 1e9;
    /* correctness: the newest batch reads back as written */
    keys_frame(OL_KV_OP_ACQUIRE, base - BATCH);
    struct ol_kv_dec d = read_frame(&h, NULL);
    size_t last_src = (size_t)((k = (put_bytes / total) - 1) % nchunks) * total;
    for (int i = 0; i < BATCH; i++)
        if (ol_kv_dec_acquire_res(&d, &ar[i]) != 1 || ar[i].status != OL_KV_OK ||
            memcmp(g_slab + ar[i].offset, src + last_src + (size_t)i * vbytes, vbytes) != 0)
            die("bytes read back differ from bytes written");
    printf("{\"value_bytes\":%zu,\"batch\":%d,\"memcpy_gbs\":%.2f,\"put_gbs\":%.2f,"
           "\"get_gbs\":%.2f,\"put_frac\":%.3f,\"get_frac\":%.3f}\n",
           vbytes, BATCH, memcpy_gbs, put_gbs, get_gbs, put_gbs / memcpy_gbs, get_gbs / memcpy_gbs);
    return 0;
}

/* The ceiling a client run is held to: single-thread memcpy of the same
 * batches, from DRAM buffers to DRAM buffers and to and from a MAP_SHARED
 * memfd mapping of the slab's kind (4 KiB pages unless shmem THP is on),
 * pre-faulted like the client's mapping of a warm slab. */
static void ceilings(char *src, char *dst, size_t total, double secs, double out[3])
{
    size_t nchunks = WORK / total, shm_size = 1u << 30, nshm = shm_size / total;
    int fd = memfd_create("kv_bench", 0);
    char *shm = fd < 0 || ftruncate(fd, (off_t)shm_size) < 0 ? MAP_FAILED :
        mmap(NULL, shm_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (shm == MAP_FAILED)
        die("memfd for the ceiling");
    close(fd);
    memset(shm, 1, shm_size);
    for (int which = 0; which < 3; which++) {
        uint64_t copied = 0, k = 0;
        double t0 = now_s(), t;
        do {
            size_t off = (size_t)(k % nchunks) * total, soff = (size_t)(k % nshm) * total;
            k++;
            if (which == 0)
                memcpy(dst + off, src + off, total);
            else if (which == 1)
                memcpy(shm + soff, src + off, total);
            else
                memcpy(dst + off, shm + soff, total);
            copied += total;
            t = now_s();
        } while (t - t0 < secs);
        out[which] = (double)copied / (t - t0) / 1e9;
    }
    munmap(shm, shm_size);
}

/* ol_client_put / ol_client_get of BATCH values per call: the checked data
 * path of the library, against the memcpy ceilings of the same batches. */
static int lib(const char *sock, const char *token, size_t vbytes, double secs)
{
    size_t total = vbytes * BATCH, nchunks = WORK / total;
    char *src, *dst;
    buffers(nchunks, &src, &dst);
    double ceil[3];
    ceilings(src, dst, total, secs / 4, ceil);

    struct ol_client_opts o = {.addr = sock, .token = token, .ns = "bench-lib", .value_size = vbytes};
    ol_client *c;
    char err[256];
    if (ol_client_open(&o, &c, err, sizeof err) < 0)
        die(err);
    uint64_t stats[OL_CLIENT_STATS];
    if (ol_client_stats(c, stats) < 0)
        die("stats");
    size_t slab_batches = stats[OL_KV_STAT_BYTES_CAPACITY] / total;
    struct ol_client_key keys[BATCH];
    char names[BATCH][32];
    const void *vp[BATCH];
    void *bp[BATCH];
    uint64_t lens[BATCH], got[BATCH];
    uint16_t st[BATCH];
    uint64_t run = (uint64_t)getpid() << 32, base = 0;
    for (int i = 0; i < BATCH; i++) {
        keys[i].data = names[i];
        lens[i] = vbytes;
    }
#define LIB_KEYS(b) for (int i = 0; i < BATCH; i++) \
        keys[i].len = (uint16_t)snprintf(names[i], sizeof names[i], "l%llx-%llu", \
                                         (unsigned long long)run, (unsigned long long)((b) + (uint64_t)i))
#define LIB_VALUES(from) for (int i = 0; i < BATCH; i++) vp[i] = (from) + (size_t)i * vbytes
    /* Warm-up: one pass over the slab, so this process's mapping of it is
     * faulted in (a one-time cost per client, not of the data path). */
    double c0 = now_s();
    for (size_t n = 0; n < slab_batches + 1; n++, base += BATCH) {
        LIB_KEYS(base);
        LIB_VALUES(src + (n % nchunks) * total);
        if (ol_client_put(c, keys, vp, lens, BATCH, st) < 0)
            die("put");
    }
    double cold_gbs = (double)(slab_batches + 1) * (double)total / (now_s() - c0) / 1e9;
    uint64_t put_bytes = 0, k = 0;
    double t0 = now_s(), t;
    do {
        LIB_KEYS(base);
        LIB_VALUES(src + (size_t)(k++ % nchunks) * total);
        if (ol_client_put(c, keys, vp, lens, BATCH, st) < 0)
            die("put");
        for (int i = 0; i < BATCH; i++)
            if (st[i] != OL_KV_OK)
                die("put: a value was not stored");
        base += BATCH;
        put_bytes += total;
        t = now_s();
    } while (t - t0 < secs / 4);
    double put_gbs = (double)put_bytes / (t - t0) / 1e9;
    /* get: the newest batches, as many as the slab still holds (its pages
     * are shared with the other size classes and namespaces) */
    size_t resident = 0;
    uint8_t present[BATCH];
    uint32_t leading = 0;
    while (resident < nchunks && resident < k) {
        LIB_KEYS(base - BATCH * (resident + 1));
        if (ol_client_lookup(c, keys, BATCH, present, &leading) < 0)
            die("lookup");
        if (leading < BATCH)
            break;
        resident++;
    }
    if (!resident)
        die("get: the newest batch is not in the slab");
    uint64_t get_bytes = 0, puts = k;
    k = 0;
    t0 = now_s();
    do {
        uint64_t j = 1 + k % resident; /* batches back from the newest */
        char *to = dst + (size_t)(k % nchunks) * total;
        k++;
        LIB_KEYS(base - BATCH * j);
        for (int i = 0; i < BATCH; i++)
            bp[i] = to + (size_t)i * vbytes;
        if (ol_client_get(c, keys, bp, lens, got, BATCH, st) < 0)
            die("get");
        for (int i = 0; i < BATCH; i++)
            if (st[i] != OL_KV_OK || got[i] != vbytes) {
                fprintf(stderr, "kv_bench: get: batch -%llu key %d: %s\n", (unsigned long long)j, i,
                        ol_kv_status_name(st[i]));
                exit(1);
            }
        if (k == 1 && memcmp(to, src + (size_t)((puts - j) % nchunks) * total, total) != 0)
            die("bytes read back differ from bytes written");
        get_bytes += total;
        t = now_s();
    } while (t - t0 < secs / 4);
    double get_gbs = (double)get_bytes / (t - t0) / 1e9;
    ol_client_close(c);
    double put_ceil = ceil[0] > ceil[1] ? ceil[0] : ceil[1];
    double get_ceil = ceil[0] > ceil[2] ? ceil[0] : ceil[2];
    printf("{\"value_bytes\":%zu,\"batch\":%d,\"memcpy_gbs\":%.2f,\"memcpy_to_shm_gbs\":%.2f,"
           "\"memcpy_from_shm_gbs\":%.2f,\"put_gbs\":%.2f,\"get_gbs\":%.2f,"
           "\"put_frac\":%.3f,\"get_frac\":%.3f,\"cold_put_gbs\":%.2f,\"get_mib\":%zu}\n",
           vbytes, BATCH, ceil[0], ceil[1], ceil[2], put_gbs, get_gbs, put_gbs / put_ceil,
           get_gbs / get_ceil, cold_gbs, resident * total >> 20);
    free(src);
    free(dst);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: kv_bench SOCKET TOKEN rtt SECONDS | data VALUE_BYTES SECONDS"
                        " | lib VALUE_BYTES SECONDS\n");
        return 2;
    }
    if (strcmp(argv[3], "lib") == 0)
        return argc < 6 ? 2 : lib(argv[1], argv[2], strtoull(argv[4], NULL, 10), atof(argv[5]));
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", argv[1]);
    g_fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (connect(g_fd, (struct sockaddr *)&sa, sizeof sa) < 0)
        die("connect");
    int is_data = strcmp(argv[3], "data") == 0;
    hello(argv[2], is_data ? strtoull(argv[4], NULL, 10) : 65536);
    if (is_data)
        return argc < 6 ? 2 : data(strtoull(argv[4], NULL, 10), atof(argv[5]));
    return rtt(atof(argv[4]));
}
