/*
 * probe.h - what the running kernel's io_uring supports.
 *
 * Owns: one runtime answer per process to "which io_uring setup flags,
 * opcodes, features and registrations work here", found by trying them
 * (setting up and tearing down small rings, registering and unregistering
 * buffers, arming multishot accept/recv on a private AF_UNIX socket pair)
 * rather than by reading the liburing headers we were compiled against. The
 * event loop uses it to choose setup flags and fall back cleanly;
 * `openlake version` prints it.
 *
 * Must not: depend on anything but libc, pthreads and liburing (no daemon or
 * base headers), leave a ring, socket, mapping or registration behind,
 * change the caller's errno, or raise signals (sends use MSG_NOSIGNAL).
 *
 * Errors: functions return 0 (or a length) or -errno.
 */
#ifndef OL_RT_PROBE_H
#define OL_RT_PROBE_H

#include <stdbool.h>
#include <stddef.h>

/*
 * The probe's answer. Every bool is false when `available` is false.
 *
 * Multishot accept/recv are decided by a live trial: a multishot accept is
 * armed on a listening AF_UNIX socket and must complete for one connection
 * with IORING_CQE_F_MORE set; a multishot recv (provided-buffer ring) is
 * armed on that connection and must do the same for one message. When the
 * trial cannot run for reasons unrelated to io_uring (no sockets), the
 * answer falls back to opcode support plus the kernel version (accept: 5.19,
 * recv: 6.0), and multishot_trial is false.
 */
struct ol_uring_features {
    bool available;              /* io_uring_setup(2) works at all */
    bool setup_single_issuer;    /* IORING_SETUP_SINGLE_ISSUER (6.0) */
    bool setup_defer_taskrun;    /* ..._SINGLE_ISSUER|_DEFER_TASKRUN (6.1) */
    bool setup_coop_taskrun;     /* IORING_SETUP_COOP_TASKRUN (5.19) */
    bool setup_taskrun_flag;     /* ..._COOP_TASKRUN|_TASKRUN_FLAG (5.19) */
    bool setup_submit_all;       /* IORING_SETUP_SUBMIT_ALL (5.18) */
    bool op_msg_ring;            /* IORING_OP_MSG_RING */
    bool op_send_zc;             /* IORING_OP_SEND_ZC */
    bool op_sendmsg_zc;          /* IORING_OP_SENDMSG_ZC */
    bool multishot_accept;       /* IORING_ACCEPT_MULTISHOT works */
    bool multishot_recv;         /* IORING_RECV_MULTISHOT works */
    bool provided_buffer_rings;  /* io_uring_register_buf_ring() works */
    bool registered_buffers;     /* io_uring_register_buffers() works */
    bool op_openat;              /* IORING_OP_OPENAT */
    bool op_statx;               /* IORING_OP_STATX */
    bool op_renameat;            /* IORING_OP_RENAMEAT */
    bool op_mkdirat;             /* IORING_OP_MKDIRAT (5.15) */
    bool op_unlinkat;            /* IORING_OP_UNLINKAT */
    bool op_fsync;               /* IORING_OP_FSYNC */
    bool op_read;                /* IORING_OP_READ */
    bool op_write;               /* IORING_OP_WRITE */
    bool feat_nodrop;            /* IORING_FEAT_NODROP */
    bool feat_fast_poll;         /* IORING_FEAT_FAST_POLL */
    bool feat_ext_arg;           /* IORING_FEAT_EXT_ARG */
    bool multishot_trial;        /* multishot_* came from a live trial */
    int setup_error;             /* 0, or -errno of the failed io_uring_setup */
    int io_uring_disabled;       /* kernel.io_uring_disabled (0..2); -1 absent */
    char kernel_release[65];     /* uname -r */
};

/* A buffer this large always holds either format of ol_uring_features_format. */
#define OL_URING_FEATURES_FMT_MAX 2048

/*
 * Fills *f (required, caller-owned) with this kernel's io_uring features.
 * The probe runs once per process, on the first call, under pthread_once;
 * later and concurrent calls copy the cached answer. The first call takes
 * about a millisecond and opens (and closes) rings and sockets. errno is
 * left as it was.
 *
 * Returns 0 when io_uring is usable. Otherwise returns f->setup_error, the
 * negative errno io_uring_setup failed with (-ENOSYS: no io_uring in this
 * kernel or blocked by seccomp; -EPERM: kernel.io_uring_disabled or policy;
 * -ENOMEM ...), and *f is still filled in: available and every feature
 * false, kernel_release and io_uring_disabled set.
 */
int ol_uring_probe(struct ol_uring_features *f);

/*
 * Writes *f into buf (len bytes, NUL-terminated) as text:
 *   json == 0: one "name value" line per item, names padded to one column,
 *              values "yes"/"no" (kernel and io_uring_disabled first);
 *   json != 0: one JSON object on one line, no trailing newline, with the
 *              same names as keys: booleans, "kernel" a string,
 *              "io_uring_disabled" a number or null, "setup_error" null or
 *              the strerror text.
 * Returns the length written (excluding the NUL), or -ENOSPC when buf was
 * too small (buf then holds a NUL-terminated prefix if len > 0).
 * OL_URING_FEATURES_FMT_MAX bytes always suffice.
 */
int ol_uring_features_format(const struct ol_uring_features *f, char *buf,
                             size_t len, int json);

#endif
