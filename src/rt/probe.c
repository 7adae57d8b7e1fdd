/*
 * probe.c - runtime detection of io_uring features (see probe.h).
 *
 * Owns: the process-wide cached answer (ol_probe_result, written once under
 * ol_probe_once) and the trials that produce it. Every trial acquires its
 * own ring, socket or mapping and releases all of them before returning, in
 * reverse order, through one cleanup label.
 *
 * Must not: include anything from OpenLake but probe.h; block for more than
 * OL_PROBE_WAIT_MS on any completion; change the caller's errno.
 */
#include "rt/probe.h"

#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <unistd.h>

/* The longest we wait for one completion in a trial. Completions in the
 * trials are immediate on any working kernel; this only bounds a broken one. */
#define OL_PROBE_WAIT_MS 1000

/* Buffer group used by the provided-buffer-ring trials. */
#define OL_PROBE_BGID 7

static pthread_once_t ol_probe_once = PTHREAD_ONCE_INIT;
static struct ol_uring_features ol_probe_result;

/* Name and location of every bool in struct ol_uring_features, in output
 * order. Formatting and the unit test's expectations both follow this list. */
static const struct {
    const char *name;
    size_t off;
} ol_probe_bools[] = {
#define OL_F(field) { #field, offsetof(struct ol_uring_features, field) }
    OL_F(available),
    OL_F(setup_single_issuer),
    OL_F(setup_defer_taskrun),
    OL_F(setup_coop_taskrun),
    OL_F(setup_taskrun_flag),
    OL_F(setup_submit_all),
    OL_F(op_msg_ring),
    OL_F(op_send_zc),
    OL_F(op_sendmsg_zc),
    OL_F(multishot_accept),
    OL_F(multishot_recv),
    OL_F(multishot_trial),
    OL_F(provided_buffer_rings),
    OL_F(registered_buffers),
    OL_F(op_openat),
    OL_F(op_statx),
    OL_F(op_renameat),
    OL_F(op_mkdirat),
    OL_F(op_unlinkat),
    OL_F(op_fsync),
    OL_F(op_read),
    OL_F(op_write),
    OL_F(feat_nodrop),
    OL_F(feat_fast_poll),
    OL_F(feat_ext_arg),
#undef OL_F
};

/* ---- small helpers ------------------------------------------------------ */

/* Reads /proc/sys/kernel/io_uring_disabled: 0..2, or -1 if absent/unreadable. */
static int ol_probe_read_disabled(void)
{
    FILE *fp = fopen("/proc/sys/kernel/io_uring_disabled", "re");
    int v = -1;
    if (!fp)
        return -1;
    if (fscanf(fp, "%d", &v) != 1)
        v = -1;
    fclose(fp);
    return v;
}

/* Parses "major.minor" from a release string into major * 1000 + minor;
 * 0 when it does not start that way. */
static int ol_probe_kernel_version(const char *release)
{
    int major = 0, minor = 0;
    if (sscanf(release, "%d.%d", &major, &minor) != 2)
        return 0;
    return major * 1000 + minor;
}

/* True if a ring can be set up with exactly these IORING_SETUP_* flags. */
static bool ol_probe_setup_flags(unsigned flags)
{
    struct io_uring ring;
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = flags;
    if (io_uring_queue_init_params(4, &ring, &p) < 0)
        return false;
    io_uring_queue_exit(&ring);
    return true;
}

/* True if one page can be registered as a fixed buffer (and unregistered). */
static bool ol_probe_registered_buffers(struct io_uring *ring)
{
    long page = sysconf(_SC_PAGESIZE);
    void *mem = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    bool ok = false;
    if (mem == MAP_FAILED)
        return false;
    struct iovec iov = { .iov_base = mem, .iov_len = (size_t)page };
    if (io_uring_register_buffers(ring, &iov, 1) == 0) {
        ok = true;
        io_uring_unregister_buffers(ring);
    }
    munmap(mem, (size_t)page);
    return ok;
}

/*
 * A provided-buffer ring of `entries` buffers of `size` bytes, in one
 * anonymous mapping: the ring in the first page, the buffers after it.
 */
struct ol_probe_bufring {
    void *mem;
    size_t len;
    bool registered;
};

/* Maps and registers the ring as group OL_PROBE_BGID and fills it.
 * Returns 0 or -errno (nothing left to release on failure). */
static int ol_probe_bufring_setup(struct io_uring *ring,
                                  struct ol_probe_bufring *br,
                                  unsigned entries, unsigned size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    int ret;
    br->len = page + (size_t)entries * size;
    br->registered = false;
    br->mem = mmap(NULL, br->len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (br->mem == MAP_FAILED)
        return -ENOMEM;

    struct io_uring_buf_reg reg;
    memset(&reg, 0, sizeof reg);
    reg.ring_addr = (uint64_t)(uintptr_t)br->mem;
    reg.ring_entries = entries;
    reg.bgid = OL_PROBE_BGID;
    ret = io_uring_register_buf_ring(ring, &reg, 0);
    if (ret < 0) {
        munmap(br->mem, br->len);
        return ret;
    }
    br->registered = true;

    struct io_uring_buf_ring *r = br->mem;
    char *bufs = (char *)br->mem + page;
    io_uring_buf_ring_init(r);
    for (unsigned i = 0; i < entries; i++)
        io_uring_buf_ring_add(r, bufs + (size_t)i * size, size,
                              (unsigned short)i,
                              io_uring_buf_ring_mask(entries), (int)i);
    io_uring_buf_ring_advance(r, (int)entries);
    return 0;
}

/* Unregisters and unmaps. The ring must have no request still using it,
 * or be already torn down (then only the mapping is released). */
static void ol_probe_bufring_release(struct io_uring *ring,
                                     struct ol_probe_bufring *br)
{
    if (ring && br->registered)
        io_uring_unregister_buf_ring(ring, OL_PROBE_BGID);
    munmap(br->mem, br->len);
}

/*
 * Waits for the completion tagged `user_data`, discarding others.
 * Copies its res and flags. Returns 0, or -ETIME / -errno from the wait.
 */
static int ol_probe_wait(struct io_uring *ring, uint64_t user_data,
                         int *res, unsigned *flags)
{
    for (;;) {
        struct io_uring_cqe *cqe;
        struct __kernel_timespec ts = {
            .tv_sec = OL_PROBE_WAIT_MS / 1000,
            .tv_nsec = (OL_PROBE_WAIT_MS % 1000) * 1000000LL,
        };
        int ret = io_uring_wait_cqe_timeout(ring, &cqe, &ts);
        if (ret == -EINTR)
            continue;
        if (ret < 0)
            return ret;
        uint64_t ud = cqe->user_data;
        *res = cqe->res;
        *flags = cqe->flags;
        io_uring_cqe_seen(ring, cqe);
        if (ud == user_data)
            return 0;
    }
}

/*
 * Opens a listening AF_UNIX stream socket with an autobound abstract name
 * and a connected client for it. Returns 0 or -errno.
 */
static int ol_probe_socket_pair(int *lfd, int *cfd)
{
    struct sockaddr_un sa;
    socklen_t salen = sizeof(sa_family_t);
    int ret;
    *lfd = *cfd = -1;
    *lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (*lfd < 0)
        return -errno;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    /* Binding only the family autobinds a unique abstract address. */
    if (bind(*lfd, (struct sockaddr *)&sa, salen) < 0 || listen(*lfd, 4) < 0)
        goto fail;
    salen = sizeof sa;
    if (getsockname(*lfd, (struct sockaddr *)&sa, &salen) < 0)
        goto fail;
    *cfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (*cfd < 0)
        goto fail;
    return 0;
fail:
    ret = -errno;
    if (*cfd >= 0)
        close(*cfd);
    close(*lfd);
    *lfd = *cfd = -1;
    return ret;
}

/*
 * The multishot trial (see probe.h). Sets f->multishot_accept and
 * f->multishot_recv and returns 0 when the trial ran; returns -errno when
 * the environment (sockets, memory) prevented it, leaving both unset.
 */
static int ol_probe_multishot(struct ol_uring_features *f)
{
    struct io_uring ring;
    struct io_uring_sqe *sqe;
    struct ol_probe_bufring br = { .mem = NULL };
    struct sockaddr_un sa;
    socklen_t salen = sizeof sa;
    int lfd = -1, cfd = -1, afd = -1, res, ret;
    bool have_ring = false, have_br = false;
    unsigned flags;

    ret = ol_probe_socket_pair(&lfd, &cfd);
    if (ret < 0)
        return ret;
    ret = io_uring_queue_init(8, &ring, 0);
    if (ret < 0)
        goto out;
    have_ring = true;

    /* Multishot accept: arm first, then connect, so the connection arrives
     * through the armed request. -EINVAL means the kernel rejects the flag;
     * the connection then stays in the backlog for accept4() below. */
    sqe = io_uring_get_sqe(&ring);
    io_uring_prep_multishot_accept(sqe, lfd, NULL, NULL, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, 1);
    ret = io_uring_submit(&ring);
    if (ret < 0)
        goto out;
    if (getsockname(lfd, (struct sockaddr *)&sa, &salen) < 0 ||
        connect(cfd, (struct sockaddr *)&sa, salen) < 0) {
        ret = -errno;
        goto out;
    }
    ret = ol_probe_wait(&ring, 1, &res, &flags);
    if (ret == 0 && res >= 0) {
        afd = res;
        f->multishot_accept = (flags & IORING_CQE_F_MORE) != 0;
    } else {
        f->multishot_accept = false;
    }
    if (afd < 0) {
        afd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (afd < 0) {
            ret = -errno;
            goto out;
        }
    }

    /* Multishot recv needs a provided-buffer ring; without one it cannot
     * exist on this kernel. */
    f->multishot_recv = false;
    if (ol_probe_bufring_setup(&ring, &br, 4, 64) == 0) {
        have_br = true;
        sqe = io_uring_get_sqe(&ring);
        io_uring_prep_recv_multishot(sqe, afd, NULL, 0, 0);
        sqe->flags |= IOSQE_BUFFER_SELECT;
        sqe->buf_group = OL_PROBE_BGID;
        io_uring_sqe_set_data64(sqe, 2);
        ret = io_uring_submit(&ring);
        if (ret < 0)
            goto out;
        if (send(cfd, "p", 1, MSG_NOSIGNAL) != 1) {
            ret = -errno;
            goto out;
        }
        if (ol_probe_wait(&ring, 2, &res, &flags) == 0 && res > 0)
            f->multishot_recv = (flags & IORING_CQE_F_MORE) &&
                                (flags & IORING_CQE_F_BUFFER);
    }
    ret = 0;

out:
    /* Tearing the ring down cancels the still-armed multishot requests
     * before the buffers they may point at are unmapped. */
    if (have_ring)
        io_uring_queue_exit(&ring);
    if (have_br)
        ol_probe_bufring_release(NULL, &br);
    if (afd >= 0)
        close(afd);
    if (cfd >= 0)
        close(cfd);
    if (lfd >= 0)
        close(lfd);
    return ret;
}

/* ---- the probe ---------------------------------------------------------- */

static void ol_probe_run(void)
{
    struct ol_uring_features *f = &ol_probe_result;
    struct io_uring ring;
    struct io_uring_params p;
    struct utsname u;
    int ret;

    memset(f, 0, sizeof *f);
    if (uname(&u) == 0)
        snprintf(f->kernel_release, sizeof f->kernel_release, "%s", u.release);
    f->io_uring_disabled = ol_probe_read_disabled();

    memset(&p, 0, sizeof p);
    ret = io_uring_queue_init_params(8, &ring, &p);
    if (ret < 0) {
        f->setup_error = ret;
        return;
    }
    f->available = true;
    f->feat_nodrop = (p.features & IORING_FEAT_NODROP) != 0;
    f->feat_fast_poll = (p.features & IORING_FEAT_FAST_POLL) != 0;
    f->feat_ext_arg = (p.features & IORING_FEAT_EXT_ARG) != 0;

    struct io_uring_probe *op = io_uring_get_probe_ring(&ring);
    if (op) {
        f->op_msg_ring = io_uring_opcode_supported(op, IORING_OP_MSG_RING);
        f->op_send_zc = io_uring_opcode_supported(op, IORING_OP_SEND_ZC);
        f->op_sendmsg_zc = io_uring_opcode_supported(op, IORING_OP_SENDMSG_ZC);
        f->op_openat = io_uring_opcode_supported(op, IORING_OP_OPENAT);
        f->op_statx = io_uring_opcode_supported(op, IORING_OP_STATX);
        f->op_renameat = io_uring_opcode_supported(op, IORING_OP_RENAMEAT);
        f->op_mkdirat = io_uring_opcode_supported(op, IORING_OP_MKDIRAT);
        f->op_unlinkat = io_uring_opcode_supported(op, IORING_OP_UNLINKAT);
        f->op_fsync = io_uring_opcode_supported(op, IORING_OP_FSYNC);
        f->op_read = io_uring_opcode_supported(op, IORING_OP_READ);
        f->op_write = io_uring_opcode_supported(op, IORING_OP_WRITE);
    }
    bool op_accept = op && io_uring_opcode_supported(op, IORING_OP_ACCEPT);
    bool op_recv = op && io_uring_opcode_supported(op, IORING_OP_RECV);
    if (op)
        io_uring_free_probe(op);

    f->registered_buffers = ol_probe_registered_buffers(&ring);
    struct ol_probe_bufring br;
    if (ol_probe_bufring_setup(&ring, &br, 8, 64) == 0) {
        f->provided_buffer_rings = true;
        ol_probe_bufring_release(&ring, &br);
    }
    io_uring_queue_exit(&ring);

    f->setup_single_issuer = ol_probe_setup_flags(IORING_SETUP_SINGLE_ISSUER);
    f->setup_defer_taskrun = f->setup_single_issuer &&
        ol_probe_setup_flags(IORING_SETUP_SINGLE_ISSUER |
                             IORING_SETUP_DEFER_TASKRUN);
    f->setup_coop_taskrun = ol_probe_setup_flags(IORING_SETUP_COOP_TASKRUN);
    f->setup_taskrun_flag = f->setup_coop_taskrun &&
        ol_probe_setup_flags(IORING_SETUP_COOP_TASKRUN |
                             IORING_SETUP_TASKRUN_FLAG);
    f->setup_submit_all = ol_probe_setup_flags(IORING_SETUP_SUBMIT_ALL);

    if (ol_probe_multishot(f) == 0) {
        f->multishot_trial = true;
    } else {
        int v = ol_probe_kernel_version(f->kernel_release);
        f->multishot_accept = op_accept && v >= 5019;
        f->multishot_recv = op_recv && f->provided_buffer_rings && v >= 6000;
    }
}

int ol_uring_probe(struct ol_uring_features *f)
{
    int saved_errno = errno;
    pthread_once(&ol_probe_once, ol_probe_run);
    errno = saved_errno;
    *f = ol_probe_result;
    return f->setup_error;
}

/* ---- formatting --------------------------------------------------------- */

/* An append cursor over a caller's buffer that remembers overflow. */
struct ol_probe_out {
    char *buf;
    size_t len, pos;
    bool full;
};

static void ol_probe_put(struct ol_probe_out *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void ol_probe_put(struct ol_probe_out *o, const char *fmt, ...)
{
    va_list ap;
    size_t room = o->pos < o->len ? o->len - o->pos : 0;
    va_start(ap, fmt);
    int n = vsnprintf(room ? o->buf + o->pos : NULL, room, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= room) {
        o->full = true;
        o->pos = o->len;
        return;
    }
    o->pos += (size_t)n;
}

/* Appends s as a JSON string. Only ASCII is expected here (uname, strerror);
 * control and non-ASCII bytes become escapes or '?', keeping output valid. */
static void ol_probe_put_json_str(struct ol_probe_out *o, const char *s)
{
    ol_probe_put(o, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            ol_probe_put(o, "\\%c", c);
        else if (c < 0x20)
            ol_probe_put(o, "\\u%04x", c);
        else
            ol_probe_put(o, "%c", c < 0x7f ? c : '?');
    }
    ol_probe_put(o, "\"");
}

int ol_uring_features_format(const struct ol_uring_features *f, char *buf,
                             size_t len, int json)
{
    struct ol_probe_out o = { .buf = buf, .len = len };
    char ebuf[128];
    const char *err = f->setup_error ?
        strerror_r(-f->setup_error, ebuf, sizeof ebuf) : NULL;

    if (len > 0)
        buf[0] = '\0';
    if (json) {
        ol_probe_put(&o, "{\"kernel\":");
        ol_probe_put_json_str(&o, f->kernel_release);
        if (f->io_uring_disabled >= 0)
            ol_probe_put(&o, ",\"io_uring_disabled\":%d", f->io_uring_disabled);
        else
            ol_probe_put(&o, ",\"io_uring_disabled\":null");
        ol_probe_put(&o, ",\"setup_error\":");
        if (err)
            ol_probe_put_json_str(&o, err);
        else
            ol_probe_put(&o, "null");
        for (size_t i = 0; i < sizeof ol_probe_bools / sizeof ol_probe_bools[0]; i++) {
            const bool *v = (const bool *)((const char *)f + ol_probe_bools[i].off);
            ol_probe_put(&o, ",\"%s\":%s", ol_probe_bools[i].name,
                         *v ? "true" : "false");
        }
        ol_probe_put(&o, "}");
    } else {
        ol_probe_put(&o, "%-22s %s\n", "kernel", f->kernel_release);
        if (f->io_uring_disabled >= 0)
            ol_probe_put(&o, "%-22s %d\n", "io_uring_disabled", f->io_uring_disabled);
        else
            ol_probe_put(&o, "%-22s %s\n", "io_uring_disabled", "(no sysctl)");
        if (err)
            ol_probe_put(&o, "%-22s %s\n", "setup_error", err);
        for (size_t i = 0; i < sizeof ol_probe_bools / sizeof ol_probe_bools[0]; i++) {
            const bool *v = (const bool *)((const char *)f + ol_probe_bools[i].off);
            ol_probe_put(&o, "%-22s %s\n", ol_probe_bools[i].name, *v ? "yes" : "no");
        }
    }
    if (o.full)
        return -ENOSPC;
    return (int)o.pos;
}
