/*
 * loop.h - one io_uring event loop per core.
 *
 * Owns: a ring, its provided-buffer ring for socket receives, a timer wheel,
 * a cross-core mailbox, and the thread that runs it. Every operation is
 * asynchronous: the caller embeds a `struct ol_op` in its own object, prepares
 * an operation with one of the ol_loop_* calls below, and its callback runs on
 * this loop's thread when the completion arrives. Nothing here allocates
 * after ol_loop_create(); nothing here blocks except the ring wait itself.
 *
 * Must not: know about HTTP, S3 or KV. This layer is standalone (libc +
 * liburing + src/base/log.h) so it can be tested and benchmarked alone.
 *
 * Errors: functions return 0 or -errno and never touch errno. Completions
 * carry the kernel's cqe->res (>= 0 or -errno) unchanged.
 *
 * Thread rules: every function except ol_loop_post() and ol_loop_stop() must
 * be called on the loop's own thread.
 */
#ifndef OL_RT_LOOP_H
#define OL_RT_LOOP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <linux/stat.h>

typedef struct ol_loop ol_loop;
struct ol_op;

/*
 * Completion callback. `res` is cqe->res; `flags` is cqe->flags (check
 * OL_CQE_MORE for multishot operations: when it is clear, the operation has
 * ended and the op may be reused or freed).
 */
typedef void (*ol_op_cb)(ol_loop *loop, struct ol_op *op, int res, unsigned flags);

struct ol_op {
    ol_op_cb cb;
#ifdef OL_FAULTS
    uint8_t fault_op;       /* test builds only (base/fault.h): the enum
                               ol_fault_op kind of the file operation last
                               prepared on this op by an ol_loop_* call below,
                               for a fault hook at its completion */
#endif
};

#define OL_CQE_MORE   (1U << 1) /* IORING_CQE_F_MORE */
#define OL_CQE_BUFFER (1U << 0) /* IORING_CQE_F_BUFFER */

struct ol_loop_params {
    int index;              /* loop number 0..n-1 (for logs and metrics) */
    int cpu;                /* CPU to pin the thread to; -1 = do not pin */
    unsigned sq_entries;    /* submission queue size (power of two); 0 = 1024 */
    unsigned recv_bufs;     /* provided receive buffers (power of two); 0 = 1024 */
    unsigned recv_buf_size; /* bytes each; 0 = 16384 */
    unsigned tick_ms;       /* timer resolution; 0 = 10 */
    unsigned iowq_bounded;  /* the kernel's workers for this loop's blocking
                               file work (fsync, path ops, writes it cannot
                               do at once); 0 = OL_LOOP_IOWQ_BOUNDED */
};

/* io_uring's default is 4 per online CPU: on a small machine a burst of
 * PUTs (an fdatasync per drive, then mkdirs, renames and fsyncs, all
 * punted) queued behind 8 workers, ~2.5 ms per step. Workers are made as
 * work arrives, so a higher cap costs nothing when idle; past 32, large
 * PUTs (direct writes punted on devices without nowait) lost more to
 * switching between workers than small ones gained (docs/benchmarks-history.md). */
#define OL_LOOP_IOWQ_BOUNDED 32

/* What the loop negotiated with the kernel (for logs, tests and metrics). */
struct ol_loop_info {
    unsigned setup_flags;   /* IORING_SETUP_* actually in use */
    int msg_ring;           /* cross-core doorbell by IORING_OP_MSG_RING */
    int multishot_recv;     /* recv uses provided buffers, multishot */
    unsigned iowq_bounded;  /* the cap in effect once the loop runs (0: the
                               kernel refused ours and keeps its default) */
};

/*
 * Creates a loop. Does not start a thread: see ol_loop_start() or run it on
 * the calling thread with ol_loop_run(). Tries SINGLE_ISSUER|DEFER_TASKRUN,
 * then COOP_TASKRUN, then no flags, so it works on older kernels.
 * Returns 0 and *out, or -errno with a message in err.
 */
int ol_loop_create(const struct ol_loop_params *p, ol_loop **out, char *err, size_t errlen);
/* Frees a loop that is not running. Open file descriptors of callers are theirs. */
void ol_loop_destroy(ol_loop *loop);

/*
 * Runs the loop on the calling thread until ol_loop_stop(). The ring is set up
 * for its issuer thread lazily by the first call (SINGLE_ISSUER rule), so create
 * on one thread, run on another is fine. A run consumes the stop that ended
 * it: the same thread may run the loop again (tests step a loop this way).
 * Returns 0.
 */
int ol_loop_run(ol_loop *loop);
/*
 * Starts a thread (pinned to p->cpu) that calls init(loop, arg) on itself and
 * then runs the loop. Returns 0 once init succeeded; if init returns
 * non-zero, the thread is joined and -ECANCELED is returned; -errno when no
 * thread could be made.
 */
int ol_loop_start(ol_loop *loop, int (*init)(ol_loop *, void *), void *arg);
/* Waits for the loop's thread to end (after ol_loop_stop). */
void ol_loop_join(ol_loop *loop);
/* True from ol_loop_start() until the loop's thread has left ol_loop_run(). */
int ol_loop_running(const ol_loop *loop);
/* Asks the loop to return from ol_loop_run() at its next iteration. Any thread. */
void ol_loop_stop(ol_loop *loop);

int ol_loop_index(const ol_loop *loop);
void ol_loop_get_info(const ol_loop *loop, struct ol_loop_info *info);
/* Monotonic milliseconds, read once per loop iteration. */
uint64_t ol_loop_now_ms(const ol_loop *loop);
/* The loop running on this thread, or NULL. */
ol_loop *ol_loop_current(void);

/* ---- sockets ---------------------------------------------------------- */

/* Multishot accept: op->cb gets one completion per connection (res = fd). */
int ol_loop_accept(ol_loop *loop, struct ol_op *op, int listen_fd);
/*
 * Multishot receive into the loop's provided buffers. Each completion with
 * res > 0 carries a buffer: ol_loop_recv_buf(loop, flags) gives its address;
 * the callee must hand it back with ol_loop_buf_release() (now or later).
 * res == 0 is EOF; -ENOBUFS means all buffers were in use (re-arm later).
 */
int ol_loop_recv(ol_loop *loop, struct ol_op *op, int fd);
char *ol_loop_recv_buf(ol_loop *loop, unsigned flags, unsigned *bid);
void ol_loop_buf_release(ol_loop *loop, unsigned bid);
/* Address of provided buffer bid (one already handed out). */
char *ol_loop_buf_addr(const ol_loop *loop, unsigned bid);
unsigned ol_loop_recv_buf_size(const ol_loop *loop);
/* Number of provided buffers currently lent out (for tests and metrics),
 * and of those in the ring, free for the kernel to fill. */
unsigned ol_loop_bufs_out(const ol_loop *loop);
unsigned ol_loop_bufs_free(const ol_loop *loop);
/* sendmsg(2) with MSG_NOSIGNAL. iov must stay valid until the completion. */
int ol_loop_sendmsg(ol_loop *loop, struct ol_op *op, int fd, const struct msghdr *msg);
int ol_loop_send(ol_loop *loop, struct ol_op *op, int fd, const void *buf, size_t len);
/* connect(2) of a socket (non-blocking or not); addr must stay valid until
 * the completion (res 0 or -errno). */
int ol_loop_connect(ol_loop *loop, struct ol_op *op, int fd, const struct sockaddr *addr,
                    socklen_t addrlen);
/* One-shot poll of fd for events (POLLIN...): res is the events that
 * fired, or -errno. For a library's wakeup fd (UCX's worker). */
int ol_loop_poll(ol_loop *loop, struct ol_op *op, int fd, unsigned events);
/* Cancels every operation whose op is `op` (its callbacks still run, with
 * -ECANCELED or their real result). */
int ol_loop_cancel(ol_loop *loop, struct ol_op *op);

/* ---- files (all through the ring; never block the loop) ---------------- */

int ol_loop_openat(ol_loop *loop, struct ol_op *op, int dfd, const char *path, int flags, mode_t mode);
int ol_loop_read(ol_loop *loop, struct ol_op *op, int fd, void *buf, unsigned len, uint64_t off);
int ol_loop_write(ol_loop *loop, struct ol_op *op, int fd, const void *buf, unsigned len, uint64_t off);
/* Registered-buffer variants: buf lies inside registered buffer `index`. */
int ol_loop_read_fixed(ol_loop *loop, struct ol_op *op, int fd, void *buf, unsigned len, uint64_t off, int index);
int ol_loop_write_fixed(ol_loop *loop, struct ol_op *op, int fd, const void *buf, unsigned len, uint64_t off, int index);
/* datasync != 0: fdatasync semantics. */
int ol_loop_fsync(ol_loop *loop, struct ol_op *op, int fd, int datasync);
/* fallocate(2): reserves [off, off + len) of fd (mode 0: and grows the file). */
int ol_loop_fallocate(ol_loop *loop, struct ol_op *op, int fd, int mode, uint64_t off,
                      uint64_t len);
int ol_loop_renameat(ol_loop *loop, struct ol_op *op, int olddfd, const char *oldpath,
                     int newdfd, const char *newpath, unsigned flags);
/* mkdirat(2) / unlinkat(2) (flags AT_REMOVEDIR removes a directory);
 * kernel 5.15+ (the io_uring probe reports older kernels). */
int ol_loop_mkdirat(ol_loop *loop, struct ol_op *op, int dfd, const char *path, mode_t mode);
int ol_loop_unlinkat(ol_loop *loop, struct ol_op *op, int dfd, const char *path, int flags);
int ol_loop_statx(ol_loop *loop, struct ol_op *op, int dfd, const char *path, int flags,
                  unsigned mask, struct statx *out);
int ol_loop_close(ol_loop *loop, struct ol_op *op, int fd);
/* Registers buffers for *_fixed I/O. Call once, before use. */
int ol_loop_register_buffers(ol_loop *loop, const struct iovec *iov, unsigned n);

/* ---- timers ------------------------------------------------------------ */

struct ol_timer {
    void (*fn)(ol_loop *loop, struct ol_timer *t);
    uint64_t expires_ms;
    struct ol_timer *next, *prev; /* wheel slot links; private */
};

/* (Re)arms t to fire after ms milliseconds (rounded up to the tick). */
void ol_timer_arm(ol_loop *loop, struct ol_timer *t, uint64_t ms);
/* Runs t->fn at the start of the next iteration, before timers that are
 * due and without waiting for completions: work handed on from inside a
 * callback. t is armed until then (ol_timer_cancel withdraws it;
 * arming or deferring it again moves it). */
void ol_loop_defer(ol_loop *loop, struct ol_timer *t);
/* Inside a callback: whether more completions are already in (this
 * batch's, or in the ring), i.e. more work comes without waiting. */
int ol_loop_more_pending(ol_loop *loop);
/* Inside a callback: hands the operations prepared so far to the kernel
 * now rather than when this iteration's completions are all handled.
 * For a callback that queued I/O and goes on computing for a while
 * (hashing a request body): the I/O then runs beside the computation, not
 * after it. Returns how many went (0 when none were queued) or -errno. */
int ol_loop_submit_now(ol_loop *loop);
/* Disarms t; harmless when not armed. */
void ol_timer_cancel(ol_loop *loop, struct ol_timer *t);
static inline int ol_timer_armed(const struct ol_timer *t) { return t->prev != NULL; }

/* ---- cross-core messages ----------------------------------------------- */

/*
 * A message is owned by the sender until its fn runs on the target loop;
 * then it belongs to fn. Messages from one sender arrive in the order sent;
 * none is lost. Delivery wakes the target with IORING_OP_MSG_RING when both
 * sides are loops and the kernel has it, otherwise with an eventfd.
 */
struct ol_msg {
    struct ol_msg *_Atomic next; /* private */
    void (*fn)(ol_loop *target, struct ol_msg *msg);
};

/* Posts msg to `to`. Any thread. Never fails, never blocks, never allocates. */
void ol_loop_post(ol_loop *to, struct ol_msg *msg);

#endif
