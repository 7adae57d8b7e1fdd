/*
 * test_loop.c - the per-core event loop: cross-core messages (order, no
 * loss, under load), timers, submitting inside a callback, file I/O
 * through the ring (incl. O_DIRECT with registered buffers), and socket
 * accept/recv/send with provided buffers.
 */
#include "olt.h"

#include "rt/loop.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static ol_loop *mk_loop(int index)
{
    char err[256];
    ol_loop *l = NULL;
    struct ol_loop_params p = {.index = index, .cpu = -1, .recv_bufs = 64, .recv_buf_size = 4096};
    int rc = ol_loop_create(&p, &l, err, sizeof err);
    if (rc == -EPERM || rc == -ENOSYS)
        OLT_SKIP("io_uring not available here");
    if (rc < 0)
        olt_fail(__FILE__, __LINE__, "ol_loop_create: %s", err);
    return l;
}

/* ---- cross-core messages ------------------------------------------------ */

#define SENDERS 3
#define PER_SENDER 200000

struct tmsg {
    struct ol_msg m;
    int sender;
    int seq;
};

struct sink {
    int next[SENDERS + 1];
    long received;
    int bad;
    long expect;
};
static struct sink g_sink;

static void on_tmsg(ol_loop *loop, struct ol_msg *m)
{
    struct tmsg *t = (struct tmsg *)m;
    if (t->seq != g_sink.next[t->sender])
        g_sink.bad++;
    g_sink.next[t->sender] = t->seq + 1;
    if (++g_sink.received == g_sink.expect)
        ol_loop_stop(loop);
}

struct sender_arg {
    ol_loop *target;
    int id;
    struct tmsg *msgs;
};

static void *thread_sender(void *p)
{
    struct sender_arg *a = p;
    for (int i = 0; i < PER_SENDER; i++) {
        a->msgs[i].m.fn = on_tmsg;
        a->msgs[i].sender = a->id;
        a->msgs[i].seq = i;
        ol_loop_post(a->target, &a->msgs[i].m);
    }
    return NULL;
}

/* A loop that sends from its own thread (MSG_RING doorbell path). */
struct loop_sender {
    struct ol_timer t;
    struct sender_arg a;
    int sent;
};

static void loop_send_some(ol_loop *loop, struct ol_timer *t)
{
    struct loop_sender *s = (struct loop_sender *)t;
    for (int k = 0; k < 5000 && s->sent < PER_SENDER; k++, s->sent++) {
        struct tmsg *m = &s->a.msgs[s->sent];
        m->m.fn = on_tmsg;
        m->sender = s->a.id;
        m->seq = s->sent;
        ol_loop_post(s->a.target, &m->m);
    }
    if (s->sent < PER_SENDER)
        ol_timer_arm(loop, t, 0);
    else
        ol_loop_stop(loop);
}

static int loop_sender_init(ol_loop *loop, void *arg)
{
    struct loop_sender *s = arg;
    ol_timer_arm(loop, &s->t, 0);
    return 0;
}

OLT_TEST(loop_messages_ordered_no_loss_under_load)
{
    ol_loop *target = mk_loop(0);
    ol_loop *src = mk_loop(1);
    memset(&g_sink, 0, sizeof g_sink);
    g_sink.expect = (long)(SENDERS + 1) * PER_SENDER;

    pthread_t th[SENDERS];
    struct sender_arg args[SENDERS];
    for (int i = 0; i < SENDERS; i++) {
        args[i] = (struct sender_arg){target, i, calloc(PER_SENDER, sizeof(struct tmsg))};
        OLT_CHECK(args[i].msgs != NULL);
    }
    struct loop_sender ls = {.t = {.fn = loop_send_some},
                             .a = {target, SENDERS, calloc(PER_SENDER, sizeof(struct tmsg))}};
    OLT_CHECK(ls.a.msgs != NULL);

    OLT_CHECK_EQ(ol_loop_start(target, NULL, NULL), 0);
    for (int i = 0; i < SENDERS; i++)
        pthread_create(&th[i], NULL, thread_sender, &args[i]);
    OLT_CHECK_EQ(ol_loop_start(src, loop_sender_init, &ls), 0);
    for (int i = 0; i < SENDERS; i++)
        pthread_join(th[i], NULL);
    ol_loop_join(src);
    ol_loop_join(target);

    OLT_CHECK_EQ(g_sink.bad, 0);
    OLT_CHECK_EQ(g_sink.received, g_sink.expect);
    for (int i = 0; i <= SENDERS; i++)
        OLT_CHECK_EQ(g_sink.next[i], PER_SENDER);
    struct ol_loop_info info;
    ol_loop_get_info(src, &info);
    printf("  (msg_ring doorbell: %s, setup flags 0x%x)\n", info.msg_ring ? "yes" : "no",
           info.setup_flags);
    ol_loop_destroy(src);
    ol_loop_destroy(target);
}

/* ---- timers -------------------------------------------------------------- */

struct ttimer {
    struct ol_timer t;
    uint64_t armed_at, after;
    int fired;
    int *order;
    int *norder;
    int id;
};

static void on_ttimer(ol_loop *loop, struct ol_timer *t)
{
    struct ttimer *x = (struct ttimer *)t;
    x->fired++;
    if (ol_loop_now_ms(loop) < x->armed_at + x->after)
        x->fired = 100; /* fired early */
    x->order[(*x->norder)++] = x->id;
}

struct timer_case {
    struct ttimer t[4];
    struct ol_timer stopper;
    int order[8], norder;
};

static void on_stop(ol_loop *loop, struct ol_timer *t) { ol_loop_stop(loop); }

static int timers_init(ol_loop *loop, void *arg)
{
    struct timer_case *tc = arg;
    static const uint64_t after[4] = {60, 20, 40, 5000};
    for (int i = 0; i < 4; i++) {
        tc->t[i] = (struct ttimer){.t = {.fn = on_ttimer}, .armed_at = ol_loop_now_ms(loop),
                                   .after = after[i], .order = tc->order,
                                   .norder = &tc->norder, .id = i};
        ol_timer_arm(loop, &tc->t[i].t, after[i]);
    }
    ol_timer_cancel(loop, &tc->t[3].t); /* cancelled: never fires */
    tc->stopper.fn = on_stop;
    ol_timer_arm(loop, &tc->stopper, 150);
    return 0;
}

OLT_TEST(loop_timers_fire_in_order_never_early)
{
    ol_loop *l = mk_loop(0);
    struct timer_case tc;
    memset(&tc, 0, sizeof tc);
    OLT_CHECK_EQ(ol_loop_start(l, timers_init, &tc), 0);
    ol_loop_join(l);
    OLT_CHECK_EQ(tc.norder, 3);
    OLT_CHECK_EQ(tc.order[0], 1);
    OLT_CHECK_EQ(tc.order[1], 2);
    OLT_CHECK_EQ(tc.order[2], 0);
    for (int i = 0; i < 3; i++)
        OLT_CHECK_EQ(tc.t[i].fired, 1);
    OLT_CHECK_EQ(tc.t[3].fired, 0);
    ol_loop_destroy(l);
}

/* ---- deferred calls ---------------------------------------------------------- */

struct defer_case {
    struct ol_timer d1, d2, stopper;
    int runs, d2_runs, done_before_stop;
};

static void on_d1(ol_loop *loop, struct ol_timer *t)
{
    struct defer_case *dc = (struct defer_case *)((char *)t - offsetof(struct defer_case, d1));
    if (++dc->runs < 100)
        ol_loop_defer(loop, t);   /* the next iteration, without waiting */
    else
        dc->done_before_stop = 1;
}

static void on_d2(ol_loop *loop, struct ol_timer *t)
{
    struct defer_case *dc = (struct defer_case *)((char *)t - offsetof(struct defer_case, d2));
    dc->d2_runs++;
}

static int defer_init(ol_loop *loop, void *arg)
{
    struct defer_case *dc = arg;
    dc->d1.fn = on_d1;
    dc->d2.fn = on_d2;
    dc->stopper.fn = on_stop;
    ol_loop_defer(loop, &dc->d2);
    ol_loop_defer(loop, &dc->d1);
    ol_timer_cancel(loop, &dc->d2);          /* withdrawn: never runs */
    ol_timer_arm(loop, &dc->stopper, 20);
    return 0;
}

OLT_TEST(loop_deferred_calls_run_next_iteration_without_waiting)
{
    ol_loop *l = mk_loop(0);
    struct defer_case dc;
    memset(&dc, 0, sizeof dc);
    OLT_CHECK_EQ(ol_loop_start(l, defer_init, &dc), 0);
    ol_loop_join(l);
    /* the kernel took loop.h's io-wq cap (it can since 5.15) */
    struct ol_loop_info info;
    ol_loop_get_info(l, &info);
    OLT_CHECK_EQ(info.iowq_bounded, OL_LOOP_IOWQ_BOUNDED);
    OLT_CHECK_EQ(dc.runs, 100);   /* 100 iterations before a 20 ms timer: none waited a tick */
    OLT_CHECK(dc.done_before_stop);
    OLT_CHECK_EQ(dc.d2_runs, 0);
    ol_loop_destroy(l);
}

/* ---- submitting inside a callback ------------------------------------------ */

/* A write to a pipe prepared inside a callback reaches the kernel at
 * ol_loop_submit_now, not when the callback returns: the bytes are in the
 * pipe right after it (a pipe write with room is done at submission). */
struct snow_case {
    struct ol_timer t, stopper;
    struct ol_op op;
    int p[2];
    int before, queued, after, again, done_res;
};

static void snow_done(ol_loop *loop, struct ol_op *op, int res, unsigned flags)
{
    struct snow_case *c = (struct snow_case *)((char *)op - offsetof(struct snow_case, op));
    c->done_res = res;
    ol_loop_stop(loop);
}

static void snow_run(ol_loop *loop, struct ol_timer *t)
{
    struct snow_case *c = (struct snow_case *)((char *)t - offsetof(struct snow_case, t));
    char b;
    c->op.cb = snow_done;
    if (ol_loop_write(loop, &c->op, c->p[1], "x", 1, 0) < 0)
        return;
    c->before = (int)read(c->p[0], &b, 1);   /* only queued: the pipe is empty */
    c->queued = ol_loop_submit_now(loop);
    c->after = (int)read(c->p[0], &b, 1);    /* done by the kernel already */
    c->again = ol_loop_submit_now(loop);     /* nothing queued */
}

static int snow_init(ol_loop *loop, void *arg)
{
    struct snow_case *c = arg;
    c->t.fn = snow_run;
    c->stopper.fn = on_stop;
    ol_loop_defer(loop, &c->t);           /* inside the running loop */
    ol_timer_arm(loop, &c->stopper, 2000); /* a write that never completes */
    return 0;
}

OLT_TEST(loop_submit_now_hands_queued_ops_to_the_kernel)
{
    ol_loop *l = mk_loop(0);
    struct snow_case c;
    memset(&c, 0, sizeof c);
    c.done_res = -1000;
    OLT_CHECK_EQ(pipe2(c.p, O_NONBLOCK), 0);
    OLT_CHECK_EQ(ol_loop_start(l, snow_init, &c), 0);
    ol_loop_join(l);
    OLT_CHECK_EQ(c.before, -1);
    OLT_CHECK_EQ(c.queued, 1);
    OLT_CHECK_EQ(c.after, 1);
    OLT_CHECK_EQ(c.again, 0);
    OLT_CHECK_EQ(c.done_res, 1);
    close(c.p[0]);
    close(c.p[1]);
    ol_loop_destroy(l);
}

/* ---- file I/O --------------------------------------------------------------- */

/* A tiny sequential script of ring file operations. */
struct fcase {
    struct ol_op op;
    int step, fd, dfd, failed;
    char path[512], path2[512];
    char *buf;
    size_t len;
    int direct;
    struct statx stx;
    char err[256];
};

static void fstep(ol_loop *loop, struct ol_op *op, int res, unsigned flags);

static void fcase_fail(ol_loop *loop, struct fcase *f, const char *what, int res)
{
    snprintf(f->err, sizeof f->err, "step %d (%s): %s", f->step, what, strerror(-res));
    f->failed = 1;
    ol_loop_stop(loop);
}

static void fstep(ol_loop *loop, struct ol_op *op, int res, unsigned flags)
{
    struct fcase *f = (struct fcase *)op;
    switch (f->step++) {
    case 0: /* start: open */
        ol_loop_openat(loop, op, AT_FDCWD, f->path,
                       O_CREAT | O_RDWR | O_TRUNC | (f->direct ? O_DIRECT : 0), 0600);
        break;
    case 1:
        if (res < 0) return fcase_fail(loop, f, "openat", res);
        f->fd = res;
        for (size_t i = 0; i < f->len; i++)
            f->buf[i] = (char)(i * 7 + 3);
        if (f->direct)
            ol_loop_write_fixed(loop, op, f->fd, f->buf, (unsigned)f->len, 0, 0);
        else
            ol_loop_write(loop, op, f->fd, f->buf, (unsigned)f->len, 0);
        break;
    case 2:
        if (res != (int)f->len) return fcase_fail(loop, f, "write", res < 0 ? res : -EIO);
        ol_loop_fsync(loop, op, f->fd, 0);
        break;
    case 3:
        if (res < 0) return fcase_fail(loop, f, "fsync", res);
        memset(f->buf, 0, f->len);
        if (f->direct)
            ol_loop_read_fixed(loop, op, f->fd, f->buf, (unsigned)f->len, 0, 0);
        else
            ol_loop_read(loop, op, f->fd, f->buf, (unsigned)f->len, 0);
        break;
    case 4:
        if (res != (int)f->len) return fcase_fail(loop, f, "read", res < 0 ? res : -EIO);
        for (size_t i = 0; i < f->len; i++)
            if (f->buf[i] != (char)(i * 7 + 3))
                return fcase_fail(loop, f, "read back", -EIO);
        ol_loop_renameat(loop, op, AT_FDCWD, f->path, AT_FDCWD, f->path2, 0);
        break;
    case 5:
        if (res < 0) return fcase_fail(loop, f, "renameat", res);
        ol_loop_statx(loop, op, AT_FDCWD, f->path2, 0, STATX_SIZE, &f->stx);
        break;
    case 6:
        if (res < 0) return fcase_fail(loop, f, "statx", res);
        if (f->stx.stx_size != f->len) return fcase_fail(loop, f, "statx size", -EIO);
        ol_loop_close(loop, op, f->fd);
        break;
    case 7:
        if (res < 0) return fcase_fail(loop, f, "close", res);
        if (strlen(f->path2) + 3 > sizeof f->path)
            return fcase_fail(loop, f, "path", -ENAMETOOLONG);
        memcpy(f->path, f->path2, strlen(f->path2));
        memcpy(f->path + strlen(f->path2), ".d", 3);
        ol_loop_mkdirat(loop, op, AT_FDCWD, f->path, 0700);
        break;
    case 8:
        if (res < 0) return fcase_fail(loop, f, "mkdirat", res);
        ol_loop_mkdirat(loop, op, AT_FDCWD, f->path, 0700);
        break;
    case 9:
        if (res != -EEXIST) return fcase_fail(loop, f, "mkdirat again", res < 0 ? res : -EIO);
        ol_loop_unlinkat(loop, op, AT_FDCWD, f->path2, 0);
        break;
    case 10:
        if (res < 0) return fcase_fail(loop, f, "unlinkat", res);
        ol_loop_unlinkat(loop, op, AT_FDCWD, f->path, AT_REMOVEDIR);
        break;
    case 11:
        if (res < 0) return fcase_fail(loop, f, "unlinkat dir", res);
        if (access(f->path, F_OK) == 0 || access(f->path2, F_OK) == 0)
            return fcase_fail(loop, f, "still there", -EIO);
        ol_loop_stop(loop);
        break;
    }
}

static int fcase_init(ol_loop *loop, void *arg)
{
    struct fcase *f = arg;
    if (f->direct) {
        struct iovec iov = {f->buf, f->len};
        int rc = ol_loop_register_buffers(loop, &iov, 1);
        if (rc < 0) {
            snprintf(f->err, sizeof f->err, "register_buffers: %s", strerror(-rc));
            f->failed = 1;
            return -1;
        }
    }
    fstep(loop, &f->op, 0, 0);
    return 0;
}

static void run_fcase(int direct)
{
    ol_loop *l = mk_loop(0);
    struct fcase f;
    memset(&f, 0, sizeof f);
    f.op.cb = fstep;
    f.direct = direct;
    f.len = 64 * 1024;
    OLT_CHECK(posix_memalign((void **)&f.buf, 4096, f.len) == 0);
    snprintf(f.path, sizeof f.path, "%s/a.tmp", olt_tmpdir());
    snprintf(f.path2, sizeof f.path2, "%s/a.dat", olt_tmpdir());
    if (direct) {
        /* Skip where the filesystem refuses O_DIRECT (tmpfs). */
        int fd = open(f.path, O_CREAT | O_RDWR | O_DIRECT, 0600);
        if (fd < 0 && errno == EINVAL)
            OLT_SKIP("O_DIRECT not supported by the filesystem of TMPDIR");
        if (fd >= 0)
            close(fd);
    }
    int rc = ol_loop_start(l, fcase_init, &f);
    if (rc == 0)
        ol_loop_join(l);
    if (f.failed)
        olt_fail(__FILE__, __LINE__, "%s", f.err);
    OLT_CHECK_EQ(rc, 0);
    OLT_CHECK_EQ(f.step, 12);
    free(f.buf);
    ol_loop_destroy(l);
}

OLT_TEST(loop_file_io_open_write_fsync_read_rename_statx_close) { run_fcase(0); }
OLT_TEST(loop_file_io_o_direct_registered_buffers) { run_fcase(1); }

/* ---- sockets ------------------------------------------------------------------ */

struct echo {
    struct ol_op accept_op, recv_op, send_op;
    int lfd, cfd;
    char out[8192];
    size_t out_len;
    long echoed;
};

static void echo_send_done(ol_loop *loop, struct ol_op *op, int res, unsigned flags) {}

static void echo_recv(ol_loop *loop, struct ol_op *op, int res, unsigned flags)
{
    struct echo *e = (struct echo *)((char *)op - offsetof(struct echo, recv_op));
    if (res <= 0) {
        if (!(flags & OL_CQE_MORE) && res != 0 && res != -ECANCELED)
            ol_loop_recv(loop, &e->recv_op, e->cfd);
        if (res == 0)
            ol_loop_stop(loop);
        return;
    }
    unsigned bid;
    char *b = ol_loop_recv_buf(loop, flags, &bid);
    /* Echo synchronously (test only): copy out then hand the buffer back. */
    ssize_t w = send(e->cfd, b, (size_t)res, 0);
    e->echoed += w > 0 ? w : 0;
    ol_loop_buf_release(loop, bid);
    if (!(flags & OL_CQE_MORE))
        ol_loop_recv(loop, &e->recv_op, e->cfd);
}

static void echo_accept(ol_loop *loop, struct ol_op *op, int res, unsigned flags)
{
    struct echo *e = (struct echo *)((char *)op - offsetof(struct echo, accept_op));
    if (res < 0)
        return;
    e->cfd = res;
    e->recv_op.cb = echo_recv;
    ol_loop_recv(loop, &e->recv_op, e->cfd);
}

static int echo_init(ol_loop *loop, void *arg)
{
    struct echo *e = arg;
    e->accept_op.cb = echo_accept;
    e->send_op.cb = echo_send_done;
    return ol_loop_accept(loop, &e->accept_op, e->lfd);
}

OLT_TEST(loop_multishot_accept_and_recv_with_provided_buffers)
{
    ol_loop *l = mk_loop(0);
    struct echo e;
    memset(&e, 0, sizeof e);
    e.lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    OLT_CHECK(bind(e.lfd, (struct sockaddr *)&a, sizeof a) == 0);
    OLT_CHECK(listen(e.lfd, 16) == 0);
    socklen_t al = sizeof a;
    getsockname(e.lfd, (struct sockaddr *)&a, &al);
    OLT_CHECK_EQ(ol_loop_start(l, echo_init, &e), 0);

    int c = socket(AF_INET, SOCK_STREAM, 0);
    OLT_CHECK(connect(c, (struct sockaddr *)&a, sizeof a) == 0);
    /* More than all provided buffers together (64 x 4 KiB), in pieces. */
    size_t total = 1u << 20, sent = 0, got = 0;
    char *buf = malloc(65536), *in = malloc(65536);
    unsigned long sum_out = 0, sum_in = 0;
    while (got < total) {
        if (sent < total) {
            size_t n = total - sent < 65536 ? total - sent : 65536;
            for (size_t i = 0; i < n; i++) {
                buf[i] = (char)((sent + i) * 13);
                sum_out += (unsigned char)buf[i];
            }
            OLT_CHECK(write(c, buf, n) == (ssize_t)n);
            sent += n;
        }
        ssize_t r = read(c, in, 65536);
        OLT_CHECK(r > 0);
        for (ssize_t i = 0; i < r; i++)
            sum_in += (unsigned char)in[i];
        got += (size_t)r;
    }
    OLT_CHECK_EQ(got, total);
    OLT_CHECK_EQ(sum_in, sum_out);
    close(c); /* EOF stops the loop */
    ol_loop_join(l);
    OLT_CHECK_EQ(ol_loop_bufs_out(l), 0);
    close(e.cfd);
    close(e.lfd);
    free(buf);
    free(in);
    ol_loop_destroy(l);
}

/* ---- running again ------------------------------------------------------------ */

/* A loop stopped may run again on its thread (tests step loops this way):
 * the stop that ended a run is consumed, and a message posted from another
 * thread while it was not running (its eventfd woken, not re-armed at the
 * stop) wakes the next run. */
struct rerun_case {
    struct ol_msg m;
    struct ol_timer guard;
    int got, guard_fired;
};

static void rerun_msg(ol_loop *loop, struct ol_msg *m)
{
    struct rerun_case *c = (struct rerun_case *)((char *)m - offsetof(struct rerun_case, m));
    c->got++;
    ol_loop_stop(loop);
}

static void rerun_guard(ol_loop *loop, struct ol_timer *t)
{
    struct rerun_case *c = (struct rerun_case *)((char *)t - offsetof(struct rerun_case, guard));
    c->guard_fired = 1;
    ol_loop_stop(loop);
}

static void *rerun_poster(void *arg)
{
    void **a = arg;
    usleep(20000);
    ol_loop_post(a[0], a[1]);
    return NULL;
}

OLT_TEST(loop_runs_again_after_a_stop)
{
    ol_loop *l = mk_loop(0);
    struct rerun_case c;
    memset(&c, 0, sizeof c);
    c.m.fn = rerun_msg;
    c.guard.fn = rerun_guard;
    for (int round = 1; round <= 3; round++) {
        ol_timer_arm(l, &c.guard, 5000);
        pthread_t th;
        void *a[2] = {l, &c.m};
        OLT_CHECK_EQ(pthread_create(&th, NULL, rerun_poster, a), 0);
        ol_loop_run(l);   /* ends at the message, not at the guard */
        pthread_join(th, NULL);
        ol_timer_cancel(l, &c.guard);
        OLT_CHECK_EQ(c.got, round);
        OLT_CHECK_EQ(c.guard_fired, 0);
    }
    /* a stop asked before a run ends that run at once, and only that one */
    ol_loop_stop(l);
    ol_loop_run(l);
    ol_timer_arm(l, &c.guard, 30);
    ol_loop_run(l);
    OLT_CHECK_EQ(c.guard_fired, 1);
    ol_loop_destroy(l);
}
