/*
 * loop.c - the per-core io_uring event loop (see loop.h for the contract).
 *
 * One iteration:
 *   1. drain the cross-core mailbox if its doorbell is set;
 *   2. fire expired timers;
 *   3. submit queued SQEs and wait for at least one CQE (or the next timer
 *      tick, or nothing when work is pending);
 *   4. copy up to OL_CQE_BATCH completions out of the CQ, advance it, and run
 *      each op's callback.
 *
 * Ring set-up: the ring is created in ol_loop_create() on the creating
 * thread. With SINGLE_ISSUER the ring starts disabled (R_DISABLED) and is
 * enabled by the thread that runs it, which then becomes its only issuer.
 *
 * user_data: a pointer to the caller's struct ol_op, or one of the reserved
 * small values below, or a loop pointer tagged with bit 0 (the sender's own
 * completion of a MSG_RING doorbell).
 *
 * Mailbox: an intrusive multi-producer single-consumer queue (Vyukov), so a
 * post is one atomic exchange plus one store, wait-free, with no allocation.
 * The doorbell flag makes at most one wake-up per drain.
 */
#include "rt/loop.h"

#include "base/assert.h"
#include "base/fault.h"
#include "base/log.h"

#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define OL_UD_IGNORE   0ULL
#define OL_UD_DOORBELL 16ULL
#define OL_UD_EVENTFD  32ULL
#define OL_BGID        0
#define OL_WHEEL_SLOTS 512
#define OL_CQE_BATCH   256

struct ol_loop {
    struct io_uring ring;
    struct ol_loop_params p;
    struct ol_loop_info info;
    int ring_ok;               /* ring initialised */
    _Atomic int enabled;       /* ring enabled and owned by its thread */
    bool rings_on;             /* IORING_REGISTER_ENABLE_RINGS done (once) */
    bool efd_armed;            /* the eventfd's read is in the ring */
    _Atomic int stop;
    uint64_t now_ms;

    /* provided receive buffers */
    struct io_uring_buf_ring *br;
    size_t br_bytes;
    char *bufs;
    size_t bufs_bytes;
    unsigned bufs_out;

    /* timer wheel */
    struct ol_timer wheel[OL_WHEEL_SLOTS]; /* sentinels */
    struct ol_timer soon;      /* sentinel: ol_loop_defer's, run next iteration */
    struct ol_timer soon_run;  /* sentinel: the deferred ones being run */
    unsigned batch_left;       /* completions of this batch not dispatched yet */
    uint64_t wheel_tick;       /* last processed tick */
    unsigned timers;

    /* mailbox */
    struct ol_msg *_Atomic mb_head;
    struct ol_msg *mb_tail;
    struct ol_msg mb_stub;
    _Atomic int bell;
    int efd;
    uint64_t efd_val;
    int mb_busy;               /* a producer was mid-push: do not block */

    pthread_t thread;
    int thread_started;
    _Atomic int running;
    int (*init)(ol_loop *, void *);
    void *init_arg;
    int init_rc;
    sem_t started;
};

static _Thread_local ol_loop *ol_loop_self;

static uint64_t ol_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

ol_loop *ol_loop_current(void) { return ol_loop_self; }
int ol_loop_index(const ol_loop *loop) { return loop->p.index; }
uint64_t ol_loop_now_ms(const ol_loop *loop) { return loop->now_ms; }
unsigned ol_loop_recv_buf_size(const ol_loop *loop) { return loop->p.recv_buf_size; }
unsigned ol_loop_bufs_out(const ol_loop *loop) { return loop->bufs_out; }
unsigned ol_loop_bufs_free(const ol_loop *loop) { return loop->p.recv_bufs - loop->bufs_out; }
void ol_loop_get_info(const ol_loop *loop, struct ol_loop_info *info) { *info = loop->info; }

/* ---- SQEs ---------------------------------------------------------------- */

/* Returns a free SQE, submitting queued ones first when the SQ is full. */
static struct io_uring_sqe *ol_sqe(ol_loop *loop)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&loop->ring);
    if (!sqe && atomic_load_explicit(&loop->enabled, memory_order_relaxed)) {
        io_uring_submit(&loop->ring);
        sqe = io_uring_get_sqe(&loop->ring);
    }
    return sqe;
}

/* Test builds: the kind of a file operation, for base/fault.h's hook (loop.h). */
#ifdef OL_FAULTS
#define OL_FOP(op, kind) ((op)->fault_op = (uint8_t)(kind))
#else
#define OL_FOP(op, kind) ((void)0)
#endif

#define OL_GET_SQE(loop, sqe)                                                 \
    struct io_uring_sqe *sqe = ol_sqe(loop);                                  \
    if (!sqe)                                                                 \
        return -EBUSY

int ol_loop_accept(ol_loop *loop, struct ol_op *op, int listen_fd)
{
    OL_GET_SQE(loop, sqe);
    io_uring_prep_multishot_accept(sqe, listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    io_uring_sqe_set_data(sqe, op);
    return 0;
}

int ol_loop_recv(ol_loop *loop, struct ol_op *op, int fd)
{
    OL_GET_SQE(loop, sqe);
    io_uring_prep_recv_multishot(sqe, fd, NULL, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = OL_BGID;
    io_uring_sqe_set_data(sqe, op);
    return 0;
}

char *ol_loop_recv_buf(ol_loop *loop, unsigned flags, unsigned *bid)
{
    if (!(flags & IORING_CQE_F_BUFFER))
        return NULL;
    *bid = flags >> IORING_CQE_BUFFER_SHIFT;
    OL_ASSERT(*bid < loop->p.recv_bufs && loop->bufs_out < loop->p.recv_bufs);
    loop->bufs_out++;
    return loop->bufs + (size_t)*bid * loop->p.recv_buf_size;
}

char *ol_loop_buf_addr(const ol_loop *loop, unsigned bid)
{
    return loop->bufs + (size_t)bid * loop->p.recv_buf_size;
}

void ol_loop_buf_release(ol_loop *loop, unsigned bid)
{
    OL_ASSERT(bid < loop->p.recv_bufs && loop->bufs_out > 0);
    io_uring_buf_ring_add(loop->br, loop->bufs + (size_t)bid * loop->p.recv_buf_size,
                          loop->p.recv_buf_size, (unsigned short)bid,
                          io_uring_buf_ring_mask(loop->p.recv_bufs), 0);
    io_uring_buf_ring_advance(loop->br, 1);
    loop->bufs_out--;
}

int ol_loop_sendmsg(ol_loop *loop, struct ol_op *op, int fd, const struct msghdr *msg)
{
    OL_GET_SQE(loop, sqe);
    io_uring_prep_sendmsg(sqe, fd, msg, MSG_NOSIGNAL);
    io_uring_sqe_set_data(sqe, op);
    return 0;
}

int ol_loop_send(ol_loop *loop, struct ol_op *op, int fd, const void *buf, size_t len)
{
    OL_GET_SQE(loop, sqe);
    io_uring_prep_send(sqe, fd, buf, len, MSG_NOSIGNAL);
    io_uring_sqe_set_data(sqe, op);
    return 0;
}

int ol_loop_connect(ol_loop *loop, struct ol_op *op, int fd, const struct sockaddr *addr,
                    socklen_t addrlen)
{
    OL_GET_SQE(loop, sqe);
    io_uring_prep_connect(sqe, fd, addr, addrlen);
    io_uring_sqe_set_data(sqe, op);
    return 0;
}

int ol_loop_poll(ol_loop *loop, struct ol_op *op, int fd, unsigned events)
{
    OL_GET_SQE(loop, sqe);
    io_uring_prep_poll_add(sqe, fd, events);
    io_uring_sqe_set_data(sqe, op);
    return 0;
}

int ol_loop_cancel(ol_loop *loop, struct ol_op *op)
{
    OL_GET_SQE(loop, sqe);
    io_uring_prep_cancel(sqe, op, IORING_ASYNC_CANCEL_ALL);
    io_uring_sqe_set_data64(sqe, OL_UD_IGNORE);
    return 0;
}

/* ---- files ---------------------------------------------------------------- */

int ol_loop_openat(ol_loop *loop, struct ol_op *op, int dfd, const char *path, int flags, mode_t mode)
{
    OL_FOP(op, OL_FAULT_OP_OPEN);
    OL_GET_SQE(loop, sqe);
    io_uring_prep_openat(sqe, dfd, path, flags, mode);
    io_uring_sqe_set_data(sqe, op);
    return 0;
}

int ol_loop_read(ol_loop *loop, struct ol_op *op, int fd, void *buf, unsigned len, uint64_t off)
{
    OL_FOP(op, OL_FAULT_OP_READ);
    OL_GET_SQE(loop, sqe);
    io_uring_prep_read(sqe, fd, buf, len, off);
    io_uring_sqe_set_data(sqe, op);
    return 0;
}

int ol_loop_write(ol_loop *loop, struct ol_op *op, int fd, const void *buf, unsigned len, uint64_t off)
{
    OL_FOP(op, OL_FAULT_OP_WRITE);
    OL_GET_SQE(loop, sqe);
    io_uring_prep_write(sqe, fd, buf, len, off);
    io_uring_sqe_set_data(sqe, op);
    return 0;
}

int ol_loop_read_fixed(ol_loop *loop, struct ol_op *op, int fd, void *buf, unsigned len, uint64_t off, int index)
{
    OL_FOP(op, OL_FAULT_OP_READ);
    OL_GET_SQE(loop, sqe);
    io_uring_prep_read_fixed(sqe, fd, buf, len, off, index);
    io_uring_sqe_set_data(sqe, op);
    return 0;
}

int ol_loop_write_fixed(ol_loop *loop, struct ol_op *op, int fd, const void *buf, unsigned len, uint64_t off, int index)
{
    OL_FOP(op, OL_FAULT_OP_WRITE);
    OL_GET_SQE(loop, sqe);
    io_uring_prep_write_fixed(sqe, fd, buf, len, off, index);
    io_uring_sqe_set_data(sqe, op);
    return 0;
}

int ol_loop_fsync(ol_loop *loop, struct ol_op *op, int fd, int datasync)
{
    OL_FOP(op, OL_FAULT_OP_FSYNC);
    OL_GET_SQE(loop, sqe);
    io_uring_prep_fsync(sqe, fd, datasync ? IORING_FSYNC_DATASYNC : 0);
    io_uring_sqe_set_data(sqe, op);
    return 0;
}

int ol_loop_fallocate(ol_loop *loop, struct ol_op *op, int fd, int mode, uint64_t off,
                      uint64_t len)
{
    OL_FOP(op, OL_FAULT_OP_FALLOCATE);
    OL_GET_SQE(loop, sqe);
    io_uring_prep_fallocate(sqe, fd, mode, (off_t)off, (off_t)len);
    io_uring_sqe_set_data(sqe, op);
    return 0;
}

int ol_loop_renameat(ol_loop *loop, struct ol_op *op, int olddfd, const char *oldpath,
                     int newdfd, const char *newpath, unsigned flags)
{
    OL_FOP(op, OL_FAULT_OP_RENAME);
    OL_GET_SQE(loop, sqe);
    io_uring_prep_renameat(sqe, olddfd, oldpath, newdfd, newpath, flags);
    io_uring_sqe_set_data(sqe, op);
    return 0;
}

int ol_loop_mkdirat(ol_loop *loop, struct ol_op *op, int dfd, const char *path, mode_t mode)
{
    OL_FOP(op, OL_FAULT_OP_MKDIR);
    OL_GET_SQE(loop, sqe);
    io_uring_prep_mkdirat(sqe, dfd, path, mode);
    io_uring_sqe_set_data(sqe, op);
    return 0;
}

int ol_loop_unlinkat(ol_loop *loop, struct ol_op *op, int dfd, const char *path, int flags)
{
    OL_FOP(op, OL_FAULT_OP_UNLINK);
    OL_GET_SQE(loop, sqe);
    io_uring_prep_unlinkat(sqe, dfd, path, flags);
    io_uring_sqe_set_data(sqe, op);
    return 0;
}

int ol_loop_statx(ol_loop *loop, struct ol_op *op, int dfd, const char *path, int flags,
                  unsigned mask, struct statx *out)
{
    OL_FOP(op, OL_FAULT_OP_STATX);
    OL_GET_SQE(loop, sqe);
    io_uring_prep_statx(sqe, dfd, path, flags, mask, out);
    io_uring_sqe_set_data(sqe, op);
    return 0;
}

int ol_loop_close(ol_loop *loop, struct ol_op *op, int fd)
{
    OL_FOP(op, OL_FAULT_OP_CLOSE);
    OL_GET_SQE(loop, sqe);
    io_uring_prep_close(sqe, fd);
    io_uring_sqe_set_data(sqe, op);
    return 0;
}

int ol_loop_register_buffers(ol_loop *loop, const struct iovec *iov, unsigned n)
{
    return io_uring_register_buffers(&loop->ring, iov, n);
}

/* ---- timers ---------------------------------------------------------------- */

static uint64_t ol_tick_of(const ol_loop *loop, uint64_t ms) { return ms / loop->p.tick_ms; }

void ol_timer_cancel(ol_loop *loop, struct ol_timer *t)
{
    if (!t->prev)
        return;
    OL_ASSERT(loop->timers > 0 && t->prev->next == t && (!t->next || t->next->prev == t));
    t->prev->next = t->next;
    if (t->next)
        t->next->prev = t->prev;
    t->next = t->prev = NULL;
    loop->timers--;
}

/* Links t (not armed) first into the list after sentinel head. */
static void ol_timer_link(ol_loop *loop, struct ol_timer *head, struct ol_timer *t)
{
    OL_ASSERT(!t->prev && !t->next && t->fn);
    t->next = head->next;
    t->prev = head;
    if (head->next)
        head->next->prev = t;
    head->next = t;
    loop->timers++;
}

void ol_timer_arm(ol_loop *loop, struct ol_timer *t, uint64_t ms)
{
    ol_timer_cancel(loop, t);
    t->expires_ms = loop->now_ms + ms;
    /* Round up so a timer never fires early. */
    uint64_t tick = ol_tick_of(loop, t->expires_ms + loop->p.tick_ms - 1);
    if (tick <= loop->wheel_tick)
        tick = loop->wheel_tick + 1;
    ol_timer_link(loop, &loop->wheel[tick % OL_WHEEL_SLOTS], t);
}

int ol_loop_more_pending(ol_loop *loop)
{
    return loop->batch_left || io_uring_cq_ready(&loop->ring) ? 1 : 0;
}

int ol_loop_submit_now(ol_loop *loop)
{
    if (!io_uring_sq_ready(&loop->ring) ||
        !atomic_load_explicit(&loop->enabled, memory_order_relaxed))
        return 0;
    return io_uring_submit(&loop->ring);
}

void ol_loop_defer(ol_loop *loop, struct ol_timer *t)
{
    ol_timer_cancel(loop, t);
    t->expires_ms = loop->now_ms;
    ol_timer_link(loop, &loop->soon, t);
}

static void ol_timers_run(ol_loop *loop)
{
    /* the deferred ones first; those deferred again by a callback wait for
     * the next iteration */
    struct ol_timer *d = loop->soon.next;
    if (d) {
        loop->soon.next = NULL;
        d->prev = &loop->soon_run;
        loop->soon_run.next = d;
        while ((d = loop->soon_run.next)) {
            ol_timer_cancel(loop, d);
            d->fn(loop, d); /* may arm, defer or cancel any timer */
        }
    }
    uint64_t now_tick = ol_tick_of(loop, loop->now_ms);
    if (!loop->timers) {
        loop->wheel_tick = now_tick;
        return;
    }
    /* Visit each slot passed since the last run (at most one revolution). */
    uint64_t from = loop->wheel_tick + 1;
    if (now_tick >= from + OL_WHEEL_SLOTS)
        from = now_tick - OL_WHEEL_SLOTS + 1;
    for (uint64_t tick = from; tick <= now_tick; tick++) {
        /* Timers re-armed by a callback land after this tick: no livelock. */
        loop->wheel_tick = tick;
        struct ol_timer *head = &loop->wheel[tick % OL_WHEEL_SLOTS];
    restart:
        for (struct ol_timer *t = head->next; t; t = t->next) {
            if (t->expires_ms <= loop->now_ms) {
                ol_timer_cancel(loop, t);
                t->fn(loop, t); /* may arm or cancel any timer */
                goto restart;
            }
        }
    }
    loop->wheel_tick = now_tick;
}

/* ---- mailbox ----------------------------------------------------------------- */

static void ol_mb_push(ol_loop *loop, struct ol_msg *m)
{
    atomic_store_explicit(&m->next, NULL, memory_order_relaxed);
    struct ol_msg *prev = atomic_exchange_explicit(&loop->mb_head, m, memory_order_acq_rel);
    atomic_store_explicit(&prev->next, m, memory_order_release);
}

/* Returns the oldest message, NULL when empty; sets *busy when a producer
 * is between its two steps (the caller retries soon). */
static struct ol_msg *ol_mb_pop(ol_loop *loop, int *busy)
{
    struct ol_msg *tail = loop->mb_tail;
    struct ol_msg *next = atomic_load_explicit(&tail->next, memory_order_acquire);
    if (tail == &loop->mb_stub) {
        if (!next)
            return NULL;
        loop->mb_tail = next;
        tail = next;
        next = atomic_load_explicit(&next->next, memory_order_acquire);
    }
    if (next) {
        loop->mb_tail = next;
        return tail;
    }
    if (tail != atomic_load_explicit(&loop->mb_head, memory_order_acquire)) {
        *busy = 1;
        return NULL;
    }
    ol_mb_push(loop, &loop->mb_stub);
    next = atomic_load_explicit(&tail->next, memory_order_acquire);
    if (next) {
        loop->mb_tail = next;
        return tail;
    }
    *busy = 1;
    return NULL;
}

static void ol_mb_drain(ol_loop *loop)
{
    loop->mb_busy = 0;
    if (!atomic_exchange_explicit(&loop->bell, 0, memory_order_acq_rel))
        return;
    struct ol_msg *m;
    int busy = 0;
    while ((m = ol_mb_pop(loop, &busy)))
        m->fn(loop, m);
    if (busy) {
        loop->mb_busy = 1;
        atomic_store_explicit(&loop->bell, 1, memory_order_release);
    }
}

static void ol_efd_ring(ol_loop *to)
{
    uint64_t one = 1;
    ssize_t n = write(to->efd, &one, sizeof one);
    (void)n; /* EAGAIN means the counter is already non-zero: awake anyway */
}

void ol_loop_post(ol_loop *to, struct ol_msg *msg)
{
    ol_mb_push(to, msg);
    if (atomic_exchange_explicit(&to->bell, 1, memory_order_acq_rel))
        return; /* a wake-up is already on its way */
    ol_loop *self = ol_loop_self;
    if (self == to)
        return; /* drained at the top of our own next iteration */
    if (self && self != to && self->info.msg_ring &&
        atomic_load_explicit(&to->enabled, memory_order_acquire)) {
        struct io_uring_sqe *sqe = ol_sqe(self);
        if (sqe) {
            io_uring_prep_msg_ring(sqe, to->ring.ring_fd, 0, OL_UD_DOORBELL, 0);
            io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)to | 1u);
            return;
        }
    }
    ol_efd_ring(to);
}

static int ol_efd_arm(ol_loop *loop)
{
    struct io_uring_sqe *sqe = ol_sqe(loop);
    if (!sqe)
        return -EBUSY;
    io_uring_prep_read(sqe, loop->efd, &loop->efd_val, sizeof loop->efd_val, 0);
    io_uring_sqe_set_data64(sqe, OL_UD_EVENTFD);
    loop->efd_armed = true;
    return 0;
}

void ol_loop_stop(ol_loop *loop)
{
    atomic_store(&loop->stop, 1);
    ol_efd_ring(loop);
}

/* ---- set-up -------------------------------------------------------------------- */

static int ol_ring_init(ol_loop *loop, char *err, size_t errlen)
{
    static const unsigned tries[] = {
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_R_DISABLED |
            IORING_SETUP_SUBMIT_ALL,
        IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_SUBMIT_ALL,
        0,
    };
    int rc = -EINVAL;
    for (size_t i = 0; i < sizeof tries / sizeof tries[0]; i++) {
        struct io_uring_params prm;
        memset(&prm, 0, sizeof prm);
        prm.flags = tries[i] | IORING_SETUP_CQSIZE;
        prm.cq_entries = loop->p.sq_entries * 4;
        rc = io_uring_queue_init_params(loop->p.sq_entries, &loop->ring, &prm);
        if (rc == 0) {
            loop->info.setup_flags = prm.flags;
            loop->ring_ok = 1;
            return 0;
        }
        if (rc != -EINVAL)
            break;
    }
    snprintf(err, errlen, "io_uring_queue_init: %s%s", strerror(-rc),
             rc == -EPERM ? " (io_uring disabled? see /proc/sys/kernel/io_uring_disabled)" : "");
    return rc;
}

static int ol_bufs_init(ol_loop *loop, char *err, size_t errlen)
{
    unsigned n = loop->p.recv_bufs;
    loop->br_bytes = (size_t)n * sizeof(struct io_uring_buf);
    loop->bufs_bytes = (size_t)n * loop->p.recv_buf_size;
    loop->br = mmap(NULL, loop->br_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (loop->br == MAP_FAILED) {
        loop->br = NULL;
        snprintf(err, errlen, "mmap buffer ring: %s", strerror(errno));
        return -ENOMEM;
    }
    loop->bufs = mmap(NULL, loop->bufs_bytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (loop->bufs == MAP_FAILED) {
        loop->bufs = NULL;
        snprintf(err, errlen, "mmap receive buffers (%zu bytes): %s", loop->bufs_bytes, strerror(errno));
        return -ENOMEM;
    }
    io_uring_buf_ring_init(loop->br);
    struct io_uring_buf_reg reg = {
        .ring_addr = (uint64_t)(uintptr_t)loop->br,
        .ring_entries = n,
        .bgid = OL_BGID,
    };
    int rc = io_uring_register_buf_ring(&loop->ring, &reg, 0);
    if (rc < 0) {
        snprintf(err, errlen, "io_uring_register_buf_ring: %s (kernel >= 5.19 needed)", strerror(-rc));
        return rc;
    }
    for (unsigned i = 0; i < n; i++)
        io_uring_buf_ring_add(loop->br, loop->bufs + (size_t)i * loop->p.recv_buf_size,
                              loop->p.recv_buf_size, (unsigned short)i, io_uring_buf_ring_mask(n), (int)i);
    io_uring_buf_ring_advance(loop->br, (int)n);
    loop->info.multishot_recv = 1;
    return 0;
}

static int ol_pow2(unsigned v) { return v && !(v & (v - 1)); }

int ol_loop_create(const struct ol_loop_params *p, ol_loop **out, char *err, size_t errlen)
{
    int rc;
    ol_loop *loop = calloc(1, sizeof *loop);
    if (!loop) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    sem_init(&loop->started, 0, 0);
    loop->p = *p;
    if (!loop->p.sq_entries) loop->p.sq_entries = 1024;
    if (!loop->p.recv_bufs) loop->p.recv_bufs = 1024;
    if (!loop->p.recv_buf_size) loop->p.recv_buf_size = 16384;
    if (!loop->p.tick_ms) loop->p.tick_ms = 10;
    loop->efd = -1;
    if (!ol_pow2(loop->p.sq_entries) || !ol_pow2(loop->p.recv_bufs) || loop->p.recv_bufs > 32768) {
        snprintf(err, errlen, "sq_entries and recv_bufs must be powers of two (recv_bufs <= 32768)");
        rc = -EINVAL;
        goto fail;
    }
    loop->mb_tail = &loop->mb_stub;
    atomic_store(&loop->mb_head, &loop->mb_stub);
    loop->now_ms = ol_mono_ms();
    loop->wheel_tick = ol_tick_of(loop, loop->now_ms);
    loop->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (loop->efd < 0) {
        rc = -errno;
        snprintf(err, errlen, "eventfd: %s", strerror(errno));
        goto fail;
    }
    if ((rc = ol_ring_init(loop, err, errlen)) < 0)
        goto fail;
    if ((rc = ol_bufs_init(loop, err, errlen)) < 0)
        goto fail;
    struct io_uring_probe *probe = io_uring_get_probe_ring(&loop->ring);
    if (probe) {
        loop->info.msg_ring = io_uring_opcode_supported(probe, IORING_OP_MSG_RING);
        io_uring_free_probe(probe);
    }
    if ((rc = ol_efd_arm(loop)) < 0) {
        snprintf(err, errlen, "arming the mailbox eventfd: %s", strerror(-rc));
        goto fail;
    }
    *out = loop;
    return 0;
fail:
    ol_loop_destroy(loop);
    return rc;
}

void ol_loop_destroy(ol_loop *loop)
{
    if (!loop)
        return;
    if (loop->ring_ok)
        io_uring_queue_exit(&loop->ring);
    sem_destroy(&loop->started);
    if (loop->bufs)
        munmap(loop->bufs, loop->bufs_bytes);
    if (loop->br)
        munmap(loop->br, loop->br_bytes);
    if (loop->efd >= 0)
        close(loop->efd);
    free(loop);
}

/* ---- running -------------------------------------------------------------------- */

static void ol_dispatch(ol_loop *loop, uint64_t ud, int res, unsigned flags)
{
    if (ud == OL_UD_IGNORE || ud == OL_UD_DOORBELL)
        return;
    if (ud == OL_UD_EVENTFD) {
        loop->efd_armed = false;
        if (!atomic_load(&loop->stop))
            ol_efd_arm(loop);
        return;
    }
    if (ud & 1u) {
        /* Our MSG_RING doorbell to another loop failed: wake it by eventfd. */
        if (res < 0)
            ol_efd_ring((ol_loop *)(uintptr_t)(ud & ~(uint64_t)1u));
        return;
    }
    struct ol_op *op = (struct ol_op *)(uintptr_t)ud;
    OL_ASSERT(op->cb);
    op->cb(loop, op, res, flags);
}

/* Caps the io-wq of the calling thread, the ring's only submitter. The
 * kernel makes that io-wq at the thread's first submission and applies a
 * cap set before then only when it makes it: a NOP (its completion
 * ignored) makes it first, so the cap applies now and reads back. */
static void ol_iowq_cap(ol_loop *loop)
{
    struct io_uring_sqe *nop = io_uring_get_sqe(&loop->ring);
    if (nop) {
        io_uring_prep_nop(nop);
        io_uring_sqe_set_data64(nop, OL_UD_IGNORE);
        io_uring_submit(&loop->ring);
    }
    unsigned v[2] = {loop->p.iowq_bounded ? loop->p.iowq_bounded : OL_LOOP_IOWQ_BOUNDED, 0};
    int rc = io_uring_register_iowq_max_workers(&loop->ring, v);
    if (rc == 0) {
        v[0] = v[1] = 0; /* zeros read the caps in effect */
        rc = io_uring_register_iowq_max_workers(&loop->ring, v);
    }
    if (rc < 0)
        ol_warn("io_uring io-wq workers: %s (the kernel's default stays)", strerror(-rc));
    else
        loop->info.iowq_bounded = v[0];
}

int ol_loop_run(ol_loop *loop)
{
    OL_ASSERT(!ol_loop_self || ol_loop_self == loop); /* one loop per thread */
    ol_loop_self = loop;
    ol_log_set_core(loop->p.index);
    if ((loop->info.setup_flags & IORING_SETUP_R_DISABLED) && !loop->rings_on) {
        /* liburing 2.3 declares io_uring_enable_rings() but does not export
         * it, so register the opcode directly. */
        if (syscall(__NR_io_uring_register, loop->ring.ring_fd, IORING_REGISTER_ENABLE_RINGS,
                    NULL, 0) < 0) {
            int rc = -errno;
            ol_error("io_uring enable rings: %s", strerror(-rc));
            return rc;
        }
    }
    loop->rings_on = true;
    if (!loop->efd_armed)
        ol_efd_arm(loop);   /* a run before this one ended with it unarmed */
    ol_iowq_cap(loop);
    atomic_store_explicit(&loop->enabled, 1, memory_order_release);
    struct io_uring_cqe *cqes[OL_CQE_BATCH];
    struct { uint64_t ud; int res; unsigned flags; } batch[OL_CQE_BATCH];
    while (!atomic_load_explicit(&loop->stop, memory_order_relaxed)) {
        loop->now_ms = ol_mono_ms();
        ol_mb_drain(loop);
        ol_timers_run(loop);

        if (loop->mb_busy || loop->soon.next || io_uring_cq_ready(&loop->ring)) {
            io_uring_submit_and_get_events(&loop->ring);
        } else {
            struct io_uring_cqe *cqe;
            struct __kernel_timespec ts = {.tv_sec = 1};
            if (loop->timers) {
                uint64_t next = (loop->wheel_tick + 1) * loop->p.tick_ms;
                uint64_t wait = next > loop->now_ms ? next - loop->now_ms : 0;
                ts.tv_sec = (long long)(wait / 1000);
                ts.tv_nsec = (long long)(wait % 1000) * 1000000;
            }
            int rc = io_uring_submit_and_wait_timeout(&loop->ring, &cqe, 1, &ts, NULL);
            if (rc < 0 && rc != -ETIME && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY)
                ol_warn("io_uring wait: %s", strerror(-rc));
        }
        loop->now_ms = ol_mono_ms();
        unsigned n;
        while ((n = io_uring_peek_batch_cqe(&loop->ring, cqes, OL_CQE_BATCH)) > 0) {
            for (unsigned i = 0; i < n; i++) {
                batch[i].ud = cqes[i]->user_data;
                batch[i].res = cqes[i]->res;
                batch[i].flags = cqes[i]->flags;
            }
            io_uring_cq_advance(&loop->ring, n);
            for (unsigned i = 0; i < n; i++) {
                loop->batch_left = n - i - 1;
                ol_dispatch(loop, batch[i].ud, batch[i].res, batch[i].flags);
            }
            loop->batch_left = 0;
            if (n < OL_CQE_BATCH)
                break;
        }
    }
    io_uring_submit(&loop->ring);
    atomic_store_explicit(&loop->enabled, 0, memory_order_release);
    atomic_store(&loop->stop, 0);   /* this run took the stop: a later run runs */
    ol_loop_self = NULL;
    return 0;
}

static void *ol_loop_thread(void *arg)
{
    ol_loop *loop = arg;
    if (loop->p.cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(loop->p.cpu, &set);
        int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
        if (rc)
            ol_warn("loop %d: cannot pin to cpu %d: %s", loop->p.index, loop->p.cpu, strerror(rc));
    }
    char name[16];
    snprintf(name, sizeof name, "ol-core%d", loop->p.index);
    pthread_setname_np(pthread_self(), name);
    ol_loop_self = loop;
    ol_log_set_core(loop->p.index);
    loop->init_rc = loop->init ? loop->init(loop, loop->init_arg) : 0;
    sem_post(&loop->started);
    if (loop->init_rc == 0)
        ol_loop_run(loop);
    atomic_store(&loop->running, 0);
    return NULL;
}

int ol_loop_start(ol_loop *loop, int (*init)(ol_loop *, void *), void *arg)
{
    loop->init = init;
    loop->init_arg = arg;
    atomic_store(&loop->running, 1);
    int rc = pthread_create(&loop->thread, NULL, ol_loop_thread, loop);
    if (rc) {
        atomic_store(&loop->running, 0);
        return -rc;
    }
    loop->thread_started = 1;
    while (sem_wait(&loop->started) != 0 && errno == EINTR) {}
    if (loop->init_rc) {
        ol_loop_join(loop);
        return -ECANCELED;
    }
    return 0;
}

void ol_loop_join(ol_loop *loop)
{
    if (!loop->thread_started)
        return;
    pthread_join(loop->thread, NULL);
    loop->thread_started = 0;
}

int ol_loop_running(const ol_loop *loop)
{
    return atomic_load(&loop->running);
}
