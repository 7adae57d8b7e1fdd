/*
 * test_cluster_drive.c - cluster/drive.h: drive steps over the node RPC.
 *
 * The codec: every step round-trips, the table's refusals (paths that
 * leave the drive, reserved bytes, fields a step does not use, sizes), the
 * wire's open flags, and a decode of every prefix ending at a guard page.
 * Then two real endpoints on loopback (node 1 serves two drive
 * directories, one of them offline; node 2 is the client), one loop on the
 * test thread: a file made, written, synced, grown, read back, stat'd,
 * renamed and removed through the client; what a dialer cannot do (a
 * path out of the drive, a handle closed or of another connection, a drive
 * the node does not have); 4 MiB reads beyond the reply window waiting
 * their turn; the per-connection bound on open files; and a connection's
 * files closed when it ends.
 */
#include "olt.h"

#include "cluster/drive.h"
#include "cluster/lock.h"
#include "net/rpc.h"
#include "rt/loop.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char SECRET[] = "0123456789abcdef0123456789abcdef";

/* ---- the codec ------------------------------------------------------------------- */

static size_t build(const struct ol_drv_req *q, uint8_t *out)
{
    ol_drv_req_encode(q, out);
    size_t n = OL_DRV_HDR_LEN;
    if (q->path_len)
        memcpy(out + n, q->path, q->path_len);
    n += q->path_len;
    if (q->path2_len)
        memcpy(out + n, q->path2, q->path2_len);
    n += q->path2_len;
    if (q->data_len)
        memcpy(out + n, q->data, q->data_len);
    return n + q->data_len;
}

static int decodes(const struct ol_drv_req *q)
{
    static uint8_t b[OL_DRV_HDR_LEN + 1024];
    struct ol_drv_req g;
    return ol_drv_req_decode(b, build(q, b), &g);
}

OLT_TEST(cluster_drive_codec_roundtrip)
{
    static const uint8_t data[5] = "hello";
    struct ol_drv_req reqs[] = {
        {.step = OL_DRV_OPEN, .arg = OL_DRV_O_WRONLY | OL_DRV_O_CREAT | OL_DRV_O_TRUNC,
         .mode = 0600, .path = "a/b", .path_len = 3},
        {.step = OL_DRV_READ, .handle = 0x10002, .arg = 4096, .off = 1ull << 40},
        {.step = OL_DRV_WRITE, .handle = 7, .off = 12, .data = data, .data_len = 5},
        {.step = OL_DRV_FSYNC, .handle = 7, .arg = 1},
        {.step = OL_DRV_CLOSE, .handle = 7},
        {.step = OL_DRV_MKDIR, .mode = 0700, .path = ".openlake/tmp/x", .path_len = 15},
        {.step = OL_DRV_UNLINK, .arg = 1, .path = "x", .path_len = 1},
        {.step = OL_DRV_RENAME, .path = "a", .path_len = 1, .path2 = "b/c", .path2_len = 3},
        {.step = OL_DRV_STATX, .path = "a..b/.c", .path_len = 7},
        {.step = OL_DRV_FALLOCATE, .handle = 1, .off = 1 << 20},
    };
    for (size_t i = 0; i < sizeof reqs / sizeof reqs[0]; i++) {
        struct ol_drv_req *q = &reqs[i];
        for (int k = 0; k < 16; k++)
            q->uuid[k] = (uint8_t)(i * 16 + k);
        uint8_t b[OL_DRV_HDR_LEN + 64];
        size_t n = build(q, b);
        struct ol_drv_req g;
        OLT_CHECK_EQ(ol_drv_req_decode(b, n, &g), 0);
        OLT_CHECK_MEM(g.uuid, q->uuid, 16);
        OLT_CHECK_EQ(g.step, q->step);
        OLT_CHECK_EQ(g.handle, q->handle);
        OLT_CHECK_EQ(g.arg, q->arg);
        OLT_CHECK_EQ(g.mode, q->mode);
        OLT_CHECK(g.off == q->off);
        OLT_CHECK_EQ(g.path_len, q->path_len);
        OLT_CHECK(!q->path_len || !memcmp(g.path, q->path, q->path_len));
        OLT_CHECK_EQ(g.path2_len, q->path2_len);
        OLT_CHECK_EQ(g.data_len, q->data_len);
        /* every shorter payload is refused, never read past */
        for (size_t k = 0; k < n; k++) {
            uint8_t *c = malloc(k ? k : 1);
            if (k)
                memcpy(c, b, k);
            int rc = ol_drv_req_decode(c, k, &g);
            free(c);
            OLT_CHECK(rc == -EINVAL || (q->step == OL_DRV_WRITE && k > n - q->data_len));
        }
    }
    /* the header's layout, byte by byte */
    struct ol_drv_req q = {.step = OL_DRV_READ, .handle = 0x01020304, .arg = 0x100,
                           .off = 0x1122334455667788ull};
    uint8_t h[OL_DRV_HDR_LEN];
    ol_drv_req_encode(&q, h);
    OLT_CHECK_EQ(h[16], OL_DRV_READ);
    OLT_CHECK_EQ(h[24], 4);
    OLT_CHECK_EQ(h[27], 1);
    OLT_CHECK_EQ(h[29], 1);
    OLT_CHECK_EQ(h[40], 0x88);
    OLT_CHECK_EQ(h[47], 0x11);
}

OLT_TEST(cluster_drive_codec_refusals)
{
    static const uint8_t data[4] = "abcd";
    /* paths that leave the drive, or are not paths */
    static const char *bad[] = {"/etc/passwd", "..", "../x", "a/../../x", "a//b", "a/", "./a",
                                "a/.", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        OLT_CHECK(!ol_drv_path_ok(bad[i], strlen(bad[i])));
        struct ol_drv_req q = {.step = OL_DRV_STATX, .path = bad[i],
                               .path_len = (uint16_t)strlen(bad[i])};
        OLT_CHECK_EQ(decodes(&q), -EINVAL);
        struct ol_drv_req r = {.step = OL_DRV_RENAME, .path = "a", .path_len = 1,
                               .path2 = bad[i], .path2_len = (uint16_t)strlen(bad[i])};
        OLT_CHECK_EQ(decodes(&r), -EINVAL);
    }
    OLT_CHECK(!ol_drv_path_ok("a\0b", 3));
    char longp[OL_DRV_PATH_MAX + 2];
    memset(longp, 'x', sizeof longp);
    OLT_CHECK(ol_drv_path_ok(longp, OL_DRV_PATH_MAX));
    OLT_CHECK(!ol_drv_path_ok(longp, OL_DRV_PATH_MAX + 1));
    OLT_CHECK(ol_drv_path_ok("...", 3));   /* a name, not a parent */
    struct ol_drv_req cases[] = {
        {.step = 0},
        {.step = OL_DRV_STEP_MAX + 1},
        {.step = OL_DRV_CLOSE},                                        /* ok: handle 0 */
        {.step = OL_DRV_CLOSE, .path = "a", .path_len = 1},            /* a path it does not use */
        {.step = OL_DRV_OPEN, .path = "a", .path_len = 1, .handle = 1},
        {.step = OL_DRV_OPEN, .path = "a", .path_len = 1, .arg = 0x40},
        {.step = OL_DRV_OPEN, .path = "a", .path_len = 1, .arg = 3},   /* WRONLY and RDWR */
        {.step = OL_DRV_OPEN, .path = "a", .path_len = 1, .mode = 01000},
        {.step = OL_DRV_OPEN},                                         /* no path */
        {.step = OL_DRV_READ, .handle = 1},                            /* 0 bytes */
        {.step = OL_DRV_READ, .handle = 1, .arg = OL_DRV_IO_MAX + 1},
        {.step = OL_DRV_WRITE, .handle = 1},                           /* no data */
        {.step = OL_DRV_READ, .handle = 1, .arg = 1, .data = data, .data_len = 4},
        {.step = OL_DRV_FSYNC, .handle = 1, .arg = 2},
        {.step = OL_DRV_UNLINK, .path = "a", .path_len = 1, .arg = 2},
        {.step = OL_DRV_MKDIR, .path = "a", .path_len = 1, .mode = 01777},
        {.step = OL_DRV_FALLOCATE, .handle = 1},                       /* length 0 */
        {.step = OL_DRV_STATX, .path = "a", .path_len = 1, .off = 1},
    };
    static const int want[] = {-EINVAL, -EINVAL, 0, -EINVAL, -EINVAL, -EINVAL, -EINVAL,
                               -EINVAL, -EINVAL, -EINVAL, -EINVAL, -EINVAL, -EINVAL, -EINVAL,
                               -EINVAL, -EINVAL, -EINVAL, -EINVAL};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = decodes(&cases[i]);
        if (rc != want[i])
            olt_fail(__FILE__, __LINE__, "case %zu: %d, want %d", i, rc, want[i]);
    }
    /* reserved bytes */
    struct ol_drv_req ok = {.step = OL_DRV_CLOSE, .handle = 1};
    uint8_t b[OL_DRV_HDR_LEN];
    struct ol_drv_req g;
    for (int off = 17; off < 40; off++) {
        if ((off >= 18 && off < 22) || (off >= 24 && off < 36))
            continue;
        build(&ok, b);
        b[off] = 1;
        OLT_CHECK_EQ(ol_drv_req_decode(b, sizeof b, &g), -EINVAL);
    }
    /* open flags both ways */
    uint32_t w;
    OLT_CHECK_EQ(ol_drv_flags_to_wire(O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, &w), 0);
    OLT_CHECK_EQ(w, OL_DRV_O_WRONLY | OL_DRV_O_CREAT | OL_DRV_O_EXCL);
    OLT_CHECK_EQ(ol_drv_flags_from_wire(w), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW);
    OLT_CHECK_EQ(ol_drv_flags_to_wire(O_RDONLY | O_DIRECTORY | O_NOFOLLOW, &w), 0);
    OLT_CHECK_EQ(w, OL_DRV_O_DIRECTORY);
    OLT_CHECK_EQ(ol_drv_flags_to_wire(O_WRONLY | O_DIRECT, &w), -EINVAL);
    OLT_CHECK_EQ(ol_drv_flags_to_wire(O_WRONLY | O_APPEND, &w), -EINVAL);
}

OLT_TEST(cluster_drive_decode_at_guard_page)
{
    long pg = sysconf(_SC_PAGESIZE);
    uint8_t *m = mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                      -1, 0);
    OLT_CHECK(m != MAP_FAILED);
    OLT_CHECK(mprotect(m + pg, (size_t)pg, PROT_NONE) == 0);
    struct ol_drv_req q = {.step = OL_DRV_RENAME, .path = "from/a", .path_len = 6,
                           .path2 = "to/b", .path2_len = 4};
    uint8_t b[OL_DRV_HDR_LEN + 10];
    size_t n = build(&q, b);
    struct ol_drv_req g;
    for (size_t k = 0; k <= n; k++) {
        uint8_t *p = m + pg - k;
        memcpy(p, b, k);
        OLT_CHECK_EQ(ol_drv_req_decode(p, k, &g), k == n ? 0 : -EINVAL);
    }
    munmap(m, (size_t)pg * 2);
}

/* LOCK and UNLOCK (cluster/lock.h): round trips and refusals. */
OLT_TEST(cluster_lock_codec)
{
    const char *path = ".openlake/buckets/b/objects/ab/0123";
    struct ol_lock_msg m = {.pool = 0, .set = 7, .ticket = 0x1122334455667788ull, .path = path,
                            .path_len = (uint16_t)strlen(path)}, g;
    uint8_t b[OL_LOCK_HDR_LEN + 64];
    ol_lock_encode(&m, b);
    memcpy(b + OL_LOCK_HDR_LEN, path, m.path_len);
    size_t n = OL_LOCK_HDR_LEN + m.path_len;
    OLT_CHECK_EQ(ol_lock_decode(b, n, &g), 0);
    OLT_CHECK_EQ(g.set, 7u);
    OLT_CHECK_EQ(g.path_len, m.path_len);
    OLT_CHECK(memcmp(g.path, path, m.path_len) == 0);
    OLT_CHECK(g.ticket == m.ticket);
    OLT_CHECK_EQ(b[16], 0x88);   /* the ticket at 16, little-endian */
    OLT_CHECK_EQ(ol_lock_decode(b, n - 1, &g), -EINVAL);   /* the length says otherwise */
    b[12] = 1;
    OLT_CHECK_EQ(ol_lock_decode(b, n, &g), -EINVAL);       /* a reserved byte */
    b[12] = 0;
    memcpy(b + OL_LOCK_HDR_LEN, "../x/", 5);
    OLT_CHECK_EQ(ol_lock_decode(b, n, &g), -EINVAL);       /* not a drive path */
    OLT_CHECK_EQ(ol_lock_decode(b, 3, &g), -EINVAL);
    memcpy(b + OL_LOCK_HDR_LEN, path, m.path_len);
    m.ticket = 0;                                           /* a ticket of 0 */
    ol_lock_encode(&m, b);
    OLT_CHECK_EQ(ol_lock_decode(b, n, &g), -EINVAL);
    m.ticket = 42;
    m.id = 4095;
    ol_unlock_encode(&m, b);
    OLT_CHECK_EQ(ol_unlock_decode(b, OL_LOCK_HDR_LEN, &g), 0);
    OLT_CHECK_EQ(g.id, 4095u);
    OLT_CHECK_EQ(g.set, 7u);
    OLT_CHECK(g.ticket == 42);
    OLT_CHECK_EQ(ol_unlock_decode(b, OL_LOCK_HDR_LEN + 1, &g), -EINVAL);
    OLT_CHECK_EQ(ol_unlock_decode(b, OL_LOCK_HDR_LEN - 1, &g), -EINVAL);
    b[13] = 9;
    OLT_CHECK_EQ(ol_unlock_decode(b, OL_LOCK_HDR_LEN, &g), -EINVAL);
    b[13] = 0;
    m.id = OL_LOCK_ID_ANY;                                   /* whichever lock the ticket got */
    ol_unlock_encode(&m, b);
    OLT_CHECK_EQ(ol_unlock_decode(b, OL_LOCK_HDR_LEN, &g), 0);
    OLT_CHECK_EQ(g.id, OL_LOCK_ID_ANY);
    m.ticket = 0;
    ol_unlock_encode(&m, b);
    OLT_CHECK_EQ(ol_unlock_decode(b, OL_LOCK_HDR_LEN, &g), -EINVAL);
}

/* ---- over the node RPC ------------------------------------------------------------- */

struct env {
    ol_loop *loop;
    struct ol_rpc *srv, *cli;            /* node 1 serves, node 2 calls */
    struct ol_drv_server *ds;
    struct ol_drv_client *dc;
    char dir[64];
    int dfd;
    uint8_t uuid[16], offline[16];
    _Atomic int64_t fence;               /* the drive's fencing token */
    struct ol_timer guard;
    int waiting, timed_out;
};

struct stepop {
    struct ol_op op;
    struct env *e;
    int res, done;
};

static void on_step_done(ol_loop *loop, struct ol_op *op, int res, unsigned flags)
{
    (void)flags;
    struct stepop *s = (struct stepop *)op;
    s->res = res;
    s->done = 1;
    if (--s->e->waiting == 0)
        ol_loop_stop(loop);
}

static void on_guard(ol_loop *loop, struct ol_timer *t)
{
    struct env *e = (struct env *)((char *)t - offsetof(struct env, guard));
    e->timed_out = 1;
    ol_loop_stop(loop);
}

/* Runs the loop until every op started is done (10 s at most). */
static void wait_all(struct env *e)
{
    e->guard.fn = on_guard;
    ol_timer_arm(e->loop, &e->guard, 10000);
    if (e->waiting)
        ol_loop_run(e->loop);
    ol_timer_cancel(e->loop, &e->guard);
    if (e->timed_out)
        olt_fail(__FILE__, __LINE__, "timed out with %d steps out", e->waiting);
}

static void start(struct env *e, struct stepop *s, const uint8_t *uuid,
                  const struct ol_store_rstep *st)
{
    s->op.cb = on_step_done;
    s->e = e;
    s->done = 0;
    OLT_CHECK_EQ(ol_drv_start(e->dc, e->loop, 1, uuid, st, &s->op), 0);
    e->waiting++;
}

static int step(struct env *e, const struct ol_store_rstep *st)
{
    struct stepop s;
    start(e, &s, e->uuid, st);
    wait_all(e);
    return s.res;
}

static int sopen(struct env *e, const char *path, int flags)
{
    return step(e, &(struct ol_store_rstep){.code = OL_DRV_OPEN, .path = path, .flags = flags,
                                         .mode = 0600});
}

/* Runs the loop for ms milliseconds. */
static void spin(struct env *e, unsigned ms)
{
    e->guard.fn = on_guard;
    ol_timer_arm(e->loop, &e->guard, ms);
    ol_loop_run(e->loop);
    e->timed_out = 0;
}

static void setup(struct env *e, uint32_t window)
{
    memset(e, 0, sizeof *e);
    snprintf(e->dir, sizeof e->dir, "/tmp/ol-drive-XXXXXX");
    OLT_CHECK(mkdtemp(e->dir) != NULL);
    e->dfd = open(e->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    OLT_CHECK(e->dfd >= 0);
    memset(e->uuid, 0xa1, 16);
    memset(e->offline, 0xb2, 16);
    struct ol_loop_params lp = {.index = 0, .cpu = -1};
    char err[256];
    OLT_CHECK_EQ(ol_loop_create(&lp, &e->loop, err, sizeof err), 0);
    struct ol_rpc_params p = {.self_id = 1, .cluster = "test", .secret = SECRET,
                              .secret_len = strlen(SECRET), .listen_addr = "127.0.0.1:0",
                              .window = window, .reply_window = window};
    OLT_CHECK_EQ(ol_rpc_create(e->loop, &p, &e->srv, err, sizeof err), 0);
    p.self_id = 2;
    p.listen_addr = NULL;
    OLT_CHECK_EQ(ol_rpc_create(e->loop, &p, &e->cli, err, sizeof err), 0);
    struct ol_drv_local d[2] = {{.dfd = e->dfd, .fence = &e->fence}, {.dfd = -1}};
    memcpy(d[0].uuid, e->uuid, 16);
    memcpy(d[1].uuid, e->offline, 16);
    OLT_CHECK_EQ(ol_drv_server_create(e->loop, e->srv, d, 2, &e->ds), 0);
    OLT_CHECK_EQ(ol_drv_client_create(e->loop, e->cli, 5000, &e->dc), 0);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", ol_rpc_port(e->srv));
    OLT_CHECK_EQ(ol_rpc_peer_set(e->cli, 1, addr), 0);
    for (int i = 0; i < 400 && !ol_rpc_peer_ready(e->cli, 1); i++)
        spin(e, 5);
    OLT_CHECK(ol_rpc_peer_ready(e->cli, 1));
}

static uint64_t open_files(struct env *e)
{
    uint64_t steps, failed, n;
    ol_drv_server_stats(e->ds, &steps, &failed, &n);
    return n;
}

static void teardown(struct env *e)
{
    OLT_CHECK_EQ(ol_drv_client_inflight(e->dc), 0);
    ol_rpc_close_all(e->cli);
    ol_rpc_close_all(e->srv);
    for (int i = 0; i < 200 && !(ol_rpc_idle(e->cli) && ol_rpc_idle(e->srv)); i++)
        spin(e, 5);
    ol_drv_client_destroy(e->dc);
    ol_rpc_destroy(e->cli);
    ol_rpc_destroy(e->srv);
    ol_drv_server_destroy(e->ds);
    ol_loop_destroy(e->loop);
    close(e->dfd);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", e->dir);
    OLT_CHECK_EQ(system(cmd), 0);
}

OLT_TEST(cluster_drive_steps_over_rpc)
{
    struct env e;
    setup(&e, 0);
    enum { N = 100000 };
    uint8_t *w = malloc(N), *r = malloc(N);
    for (int i = 0; i < N; i++)
        w[i] = (uint8_t)(i * 31 + 7);
    OLT_CHECK_EQ(step(&e, &(struct ol_store_rstep){.code = OL_DRV_MKDIR, .path = "d1",
                                                 .mode = 0700}), 0);
    OLT_CHECK_EQ(step(&e, &(struct ol_store_rstep){.code = OL_DRV_MKDIR, .path = "d1",
                                                 .mode = 0700}), -EEXIST);
    int h = sopen(&e, "d1/f", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC);
    OLT_CHECK(h >= 0);
    OLT_CHECK_EQ(open_files(&e), 1);
    OLT_CHECK_EQ(step(&e, &(struct ol_store_rstep){.code = OL_DRV_WRITE, .fd = h, .wbuf = w,
                                                 .len = N}), N);
    OLT_CHECK_EQ(step(&e, &(struct ol_store_rstep){.code = OL_DRV_FSYNC, .fd = h}), 0);
    OLT_CHECK_EQ(step(&e, &(struct ol_store_rstep){.code = OL_DRV_FSYNC, .fd = h, .flags = 1}), 0);
    OLT_CHECK_EQ(step(&e, &(struct ol_store_rstep){.code = OL_DRV_FALLOCATE, .fd = h,
                                                 .off = 2 * N}), 0);
    OLT_CHECK_EQ(step(&e, &(struct ol_store_rstep){.code = OL_DRV_CLOSE, .fd = h}), 0);
    OLT_CHECK_EQ(open_files(&e), 0);
    /* a closed handle, one never given, a write to it */
    OLT_CHECK_EQ(step(&e, &(struct ol_store_rstep){.code = OL_DRV_CLOSE, .fd = h}), -EBADF);
    OLT_CHECK_EQ(step(&e, &(struct ol_store_rstep){.code = OL_DRV_WRITE, .fd = h, .wbuf = w,
                                                 .len = 1}), -EBADF);
    OLT_CHECK_EQ(step(&e, &(struct ol_store_rstep){.code = OL_DRV_READ, .fd = 0x7fff1234,
                                                 .buf = r, .len = 1}), -EBADF);
    /* the file, as the drive's node sees it */
    struct stat st;
    char p[128];
    snprintf(p, sizeof p, "%s/d1/f", e.dir);
    OLT_CHECK_EQ(stat(p, &st), 0);
    OLT_CHECK_EQ(st.st_size, 2 * N);
    OLT_CHECK_EQ(st.st_mode & 0777, 0600);
    struct statx sx;
    OLT_CHECK_EQ(step(&e, &(struct ol_store_rstep){.code = OL_DRV_STATX, .path = "d1/f",
                                                 .stx = &sx}), 0);
    OLT_CHECK(S_ISREG(sx.stx_mode));
    OLT_CHECK(sx.stx_size == 2 * N);
    OLT_CHECK_EQ(step(&e, &(struct ol_store_rstep){.code = OL_DRV_STATX, .path = "d1",
                                                 .stx = &sx}), 0);
    OLT_CHECK(S_ISDIR(sx.stx_mode));
    /* read it back: whole, then across its end */
    h = sopen(&e, "d1/f", O_RDONLY);
    OLT_CHECK(h >= 0);
    memset(r, 0, N);
    OLT_CHECK_EQ(step(&e, &(struct ol_store_rstep){.code = OL_DRV_READ, .fd = h, .buf = r,
                                                 .len = N}), N);
    OLT_CHECK(memcmp(r, w, N) == 0);
    memset(r, 0xff, N);
    OLT_CHECK_EQ(step(&e, &(struct ol_store_rstep){.code = OL_DRV_READ, .fd = h, .buf = r,
                                                 .len = N, .off = N + N / 2}), N / 2);
    OLT_CHECK_EQ(r[0], 0);   /* the fallocated range reads as zeros */
    OLT_CHECK_EQ(step(&e, &(struct ol_store_rstep){.code = OL_DRV_CLOSE, .fd = h}), 0);
    /* opens that fail: the handle's entry is given back */
    OLT_CHECK_EQ(sopen(&e, "d1/none", O_RDONLY), -ENOENT);
    OLT_CHECK_EQ(sopen(&e, "d1/f", O_WRONLY | O_CREAT | O_EXCL), -EEXIST);
    OLT_CHECK_EQ(sopen(&e, "d1/f", O_RDONLY | O_DIRECTORY), -ENOTDIR);
    OLT_CHECK_EQ(open_files(&e), 0);
    /* a symlink planted on the drive is not followed by an open */
    snprintf(p, sizeof p, "%s/d1/link", e.dir);
    OLT_CHECK_EQ(symlink("/etc/hostname", p), 0);
    OLT_CHECK_EQ(sopen(&e, "d1/link", O_RDONLY), -ELOOP);
    OLT_CHECK_EQ(step(&e, &(struct ol_store_rstep){.code = OL_DRV_UNLINK, .path = "d1/link"}), 0);
    /* rename, then remove */
    OLT_CHECK_EQ(step(&e, &(struct ol_store_rstep){.code = OL_DRV_RENAME, .path = "d1/f",
                                                 .path2 = "d1/g"}), 0);
    OLT_CHECK_EQ(step(&e, &(struct ol_store_rstep){.code = OL_DRV_STATX, .path = "d1/f",
                                                 .stx = &sx}), -ENOENT);
    OLT_CHECK_EQ(step(&e, &(struct ol_store_rstep){.code = OL_DRV_UNLINK, .path = "d1",
                                                 .flags = AT_REMOVEDIR}), -ENOTEMPTY);
    OLT_CHECK_EQ(step(&e, &(struct ol_store_rstep){.code = OL_DRV_UNLINK, .path = "d1/g"}), 0);
    OLT_CHECK_EQ(step(&e, &(struct ol_store_rstep){.code = OL_DRV_UNLINK, .path = "d1",
                                                 .flags = AT_REMOVEDIR}), 0);
    /* what a dialer cannot do: leave the drive (a bad request, nothing made) */
    OLT_CHECK_EQ(step(&e, &(struct ol_store_rstep){.code = OL_DRV_MKDIR, .path = "../escaped",
                                                 .mode = 0700}), -EPROTO);
    OLT_CHECK_EQ(step(&e, &(struct ol_store_rstep){.code = OL_DRV_MKDIR, .path = "/tmp/escaped",
                                                 .mode = 0700}), -EPROTO);
    snprintf(p, sizeof p, "%s/../escaped", e.dir);
    OLT_CHECK(access(p, F_OK) != 0);
    OLT_CHECK(access("/tmp/escaped", F_OK) != 0 || errno != ENOENT);
    /* a drive it does not have, one offline */
    struct stepop s1, s2;
    static const uint8_t nowhere[16] = {9};
    start(&e, &s1, nowhere, &(struct ol_store_rstep){.code = OL_DRV_STATX, .path = "x", .stx = &sx});
    start(&e, &s2, e.offline, &(struct ol_store_rstep){.code = OL_DRV_STATX, .path = "x",
                                                      .stx = &sx});
    wait_all(&e);
    OLT_CHECK_EQ(s1.res, -ENODEV);
    OLT_CHECK_EQ(s2.res, -ENODEV);
    /* what the client refuses itself */
    struct ol_op never = {.cb = NULL};
    OLT_CHECK_EQ(ol_drv_start(e.dc, e.loop, 1, e.uuid,
                              &(struct ol_store_rstep){.code = OL_DRV_OPEN, .path = "a",
                                                    .flags = O_WRONLY | O_DIRECT}, &never),
                 -EINVAL);
    OLT_CHECK_EQ(ol_drv_start(e.dc, e.loop, 1, e.uuid,
                              &(struct ol_store_rstep){.code = OL_DRV_READ, .fd = 1, .buf = r,
                                                    .len = OL_DRV_IO_MAX + 1}, &never),
                 -EINVAL);
    /* a node the client has no peer for */
    OLT_CHECK_EQ(ol_drv_start(e.dc, e.loop, 77, e.uuid,
                              &(struct ol_store_rstep){.code = OL_DRV_STATX, .path = "x",
                                                    .stx = &sx}, &s1.op), 0);
    s1.e = &e;
    e.waiting++;
    wait_all(&e);
    OLT_CHECK_EQ(s1.res, -ENOENT);
    uint64_t steps, failed, nopen;
    ol_drv_server_stats(e.ds, &steps, &failed, &nopen);
    if (!(steps >= 25 && failed >= 10 && nopen == 0))
        olt_fail(__FILE__, __LINE__, "steps %llu failed %llu open %llu", (unsigned long long)steps,
                 (unsigned long long)failed, (unsigned long long)nopen);
    free(w);
    free(r);
    teardown(&e);
}

/* Eight 4 MiB reads at once through a 8 MiB reply window: the ones that do
 * not fit wait for room, and every one reads its own bytes. */
OLT_TEST(cluster_drive_large_reads_wait_for_the_reply_window)
{
    struct env e;
    setup(&e, 8u << 20);
    enum { MB4 = 4 << 20, NR = 8 };
    char p[128];
    snprintf(p, sizeof p, "%s/big", e.dir);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    OLT_CHECK(fd >= 0);
    uint8_t *w = malloc((size_t)MB4 * 2);
    for (size_t i = 0; i < (size_t)MB4 * 2; i++)
        w[i] = (uint8_t)(i >> 12 ^ i);
    OLT_CHECK(write(fd, w, (size_t)MB4 * 2) == (ssize_t)MB4 * 2);
    close(fd);
    int h = sopen(&e, "big", O_RDONLY);
    OLT_CHECK(h >= 0);
    uint8_t *r[NR];
    struct stepop s[NR];
    for (int i = 0; i < NR; i++) {
        r[i] = malloc(MB4);
        start(&e, &s[i], e.uuid, &(struct ol_store_rstep){.code = OL_DRV_READ, .fd = h,
                                                      .buf = r[i], .len = MB4,
                                                      .off = (uint64_t)(i % 2) * MB4});
    }
    wait_all(&e);
    for (int i = 0; i < NR; i++) {
        OLT_CHECK_EQ(s[i].res, MB4);
        OLT_CHECK(memcmp(r[i], w + (size_t)(i % 2) * MB4, MB4) == 0);
        free(r[i]);
    }
    OLT_CHECK_EQ(step(&e, &(struct ol_store_rstep){.code = OL_DRV_CLOSE, .fd = h}), 0);
    free(w);
    teardown(&e);
}

/* At most OL_DRV_MAX_HANDLES files open per connection; every one closed
 * when the connection ends. */
OLT_TEST_T(cluster_drive_open_files_bounded_and_closed_with_the_connection, 60)
{
    struct rlimit rl;
    OLT_CHECK_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
    rlim_t need = OL_DRV_MAX_HANDLES + 256;
    if (rl.rlim_max < need)
        OLT_SKIP("RLIMIT_NOFILE's hard limit is below the bound and the files around it");
    if (rl.rlim_cur < need) {
        rl.rlim_cur = need;
        OLT_CHECK_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
    }
    struct env e;
    setup(&e, 0);
    int fd = openat(e.dfd, "f", O_WRONLY | O_CREAT, 0600);
    OLT_CHECK(fd >= 0);
    close(fd);
    unsigned want = OL_DRV_MAX_HANDLES;
    enum { BATCH = 256 };
    static struct stepop s[BATCH];
    unsigned opened = 0;
    while (opened < want) {
        unsigned n = want - opened < BATCH ? want - opened : BATCH;
        for (unsigned i = 0; i < n; i++)
            start(&e, &s[i], e.uuid, &(struct ol_store_rstep){.code = OL_DRV_OPEN, .path = "f",
                                                          .flags = O_RDONLY});
        wait_all(&e);
        for (unsigned i = 0; i < n; i++)
            OLT_CHECK(s[i].res >= 0);
        opened += n;
    }
    OLT_CHECK_EQ(open_files(&e), want);
    OLT_CHECK_EQ(sopen(&e, "f", O_RDONLY), -EMFILE);
    /* the connection goes (its node left the view): its files are closed */
    ol_rpc_peer_remove(e.cli, 1);
    for (int i = 0; i < 400 && open_files(&e); i++)
        spin(&e, 5);
    OLT_CHECK_EQ(open_files(&e), 0);
    teardown(&e);
}

/* Fences (drive.h "fences"): the file's codec; a change carrying a token is
 * taken only with the drive's token; FENCE raises it durably, never lowers. */
OLT_TEST(cluster_drive_fences)
{
    uint8_t b[OL_DRV_FENCE_LEN];
    int64_t t;
    ol_drv_fence_encode(b, 77);
    OLT_CHECK_EQ(ol_drv_fence_decode(b, sizeof b, &t), 0);
    OLT_CHECK_EQ(t, 77);
    for (size_t i = 0; i < sizeof b; i++)
        for (int bit = 0; bit < 8; bit++) {
            b[i] ^= (uint8_t)(1u << bit);
            OLT_CHECK(ol_drv_fence_decode(b, sizeof b, &t) < 0);
            b[i] ^= (uint8_t)(1u << bit);
        }
    OLT_CHECK_EQ(ol_drv_fence_decode(b, sizeof b - 1, &t), -EBADMSG);

    struct env e;
    setup(&e, 0);
    OLT_CHECK_EQ(mkdirat(e.dfd, ".openlake", 0700), 0);
    OLT_CHECK_EQ(ol_drv_fence_read(e.dfd, &t), 0);
    OLT_CHECK_EQ(t, 0);   /* never fenced */
    struct ol_store_rstep mk = {.code = OL_RSTEP_MKDIR, .path = "a", .mode = 0700};
    OLT_CHECK_EQ(step(&e, &mk), 0);   /* no token: not a fenced change */
    mk.path = "b";
    mk.token = 5;
    OLT_CHECK_EQ(step(&e, &mk), -ESTALE);   /* the drive took no token yet */
    struct ol_store_rstep fence = {.code = OL_DRV_FENCE, .token = 5};
    OLT_CHECK_EQ(step(&e, &fence), 0);
    OLT_CHECK_EQ(atomic_load(&e.fence), 5);
    OLT_CHECK_EQ(ol_drv_fence_read(e.dfd, &t), 0);
    OLT_CHECK_EQ(t, 5);   /* on the drive */
    OLT_CHECK_EQ(step(&e, &mk), 0);
    OLT_CHECK_EQ(step(&e, &fence), 0);   /* the same again: nothing to write */
    fence.token = 3;
    OLT_CHECK_EQ(step(&e, &fence), -ESTALE);   /* never lowered */
    fence.token = 9;
    OLT_CHECK_EQ(step(&e, &fence), 0);
    OLT_CHECK_EQ(ol_drv_fence_read(e.dfd, &t), 0);
    OLT_CHECK_EQ(t, 9);
    mk.path = "c";
    OLT_CHECK_EQ(step(&e, &mk), -ESTALE);   /* the old owner's token now */
    mk.token = 9;
    OLT_CHECK_EQ(step(&e, &mk), 0);
    /* reads carry no token and are never refused; a token on them is ignored */
    struct statx sx;
    OLT_CHECK_EQ(step(&e, &(struct ol_store_rstep){.code = OL_RSTEP_STATX, .path = "a",
                                                   .stx = &sx, .token = 1}), 0);
    /* FENCE from a thread that waits (the owners' thread) is refused a 0 token */
    struct ol_op never = {.cb = NULL};
    OLT_CHECK_EQ(ol_drv_start(e.dc, e.loop, 1, e.uuid,
                              &(struct ol_store_rstep){.code = OL_DRV_FENCE}, &never), -EINVAL);
    /* blocking write and read, as the owners' thread fences its own drives */
    OLT_CHECK_EQ(ol_drv_fence_write(e.dfd, 12), 0);
    OLT_CHECK_EQ(ol_drv_fence_read(e.dfd, &t), 0);
    OLT_CHECK_EQ(t, 12);
    teardown(&e);
}
