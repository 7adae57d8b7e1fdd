/*
 * drive.h - another node's drives as if they were this node's: the steps
 * the object engine takes on a drive (open, read, write, fsync, close,
 * mkdir, unlink, rename, statx, fallocate) sent over the node RPC as
 * operation DRIVE (3), run by the drive's node with io_uring, and their
 * results sent back (docs/node-protocol.md "DRIVE (3)").
 *
 * Owns: the DRIVE payload codec (pure, below), the server half (a handler
 * on the node RPC's loop that runs each step on the local drive it names
 * and keeps the files a dialer opened, per connection) and the client half
 * (steps started from any loop, carried to the node RPC's loop, called,
 * and their results delivered back to the starting loop as an ordinary
 * op completion).
 *
 * Files of a remote drive are handles: small integers valid on the
 * connection that opened them. The server keeps at most
 * OL_DRV_MAX_HANDLES of them per connection (one more open: -EMFILE) and
 * closes every one when the connection ends (the dialer died, restarted or
 * was cut off), once no step of it is running. A step on a handle of
 * another connection or a closed one is -EBADF.
 *
 * Paths are relative to the drive's directory: 1..OL_DRV_PATH_MAX bytes,
 * no NUL, no leading '/', no empty, "." or ".." component (so a step never
 * leaves the drive by its path). The engine makes no symlinks; opens and
 * statx do not follow a final one.
 *
 * Errors: a result is >= 0 or -errno (Linux's generic numbers), as the
 * local system call would give; a drive this node does not have (or has
 * offline) is -ENODEV; a payload that breaks the table is the node RPC's
 * `bad request`, which the client delivers as -EPROTO. A call that fails
 * (peer down, deadline, reset) delivers its -errno (-ENOTCONN,
 * -ETIMEDOUT, -ECONNRESET, ...).
 *
 * Must not: block a loop (every file step is an io_uring op, closes at a
 * connection's end excepted), follow a path outside the drive, or hold
 * memory beyond the node RPC's bounds: a server's steps in flight are the
 * dialer's requests (its credit window) and READ buffers within its reply
 * window; a client's are its callers' steps, each one allocation.
 */
#ifndef OL_CLUSTER_DRIVE_H
#define OL_CLUSTER_DRIVE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "net/rpc.h"
#include "rt/loop.h"
#include "store/engine.h"

#define OL_DRV_RPC_OP      3u          /* node RPC operation DRIVE */
#define OL_DRV_HDR_LEN     56u         /* request header bytes */
#define OL_DRV_REPLY_LEN   8u          /* reply head bytes (STATX adds 16) */
#define OL_DRV_STATX_LEN   16u
#define OL_DRV_PATH_MAX    255u
#define OL_DRV_IO_MAX      (4u << 20)  /* bytes of one READ or WRITE */
#define OL_DRV_MAX_HANDLES 8192u       /* open files per connection */

/* The wire's steps are the engine's (store/engine.h enum ol_store_rstep_code). */
enum ol_drv_step_code {
    OL_DRV_OPEN = OL_RSTEP_OPEN,        /* path, arg = OL_DRV_O_* flags, mode; a handle */
    OL_DRV_READ = OL_RSTEP_READ,        /* handle, arg = bytes, off; bytes read, sent after */
    OL_DRV_WRITE = OL_RSTEP_WRITE,      /* handle, off, the bytes; bytes written */
    OL_DRV_FSYNC = OL_RSTEP_FSYNC,      /* handle, arg = 1: data only (fdatasync) */
    OL_DRV_CLOSE = OL_RSTEP_CLOSE,      /* handle */
    OL_DRV_MKDIR = OL_RSTEP_MKDIR,      /* path, mode */
    OL_DRV_UNLINK = OL_RSTEP_UNLINK,    /* path, arg = 1: a directory (AT_REMOVEDIR) */
    OL_DRV_RENAME = OL_RSTEP_RENAME,    /* path -> path2 */
    OL_DRV_STATX = OL_RSTEP_STATX,      /* path; the reply adds type and size */
    OL_DRV_FALLOCATE = OL_RSTEP_FALLOCATE, /* handle, off = length from 0 */
    OL_DRV_FENCE,       /* token: the drive takes it (written, synced) if larger */
    OL_DRV_STEP_MAX = OL_DRV_FENCE,
};
_Static_assert(OL_RSTEP_OPEN == 1 && OL_RSTEP_FALLOCATE == 10, "the wire's step numbers");

/* OPEN's flags on the wire (open(2)'s numbers differ between architectures). */
#define OL_DRV_O_WRONLY    0x01u
#define OL_DRV_O_RDWR      0x02u
#define OL_DRV_O_CREAT     0x04u
#define OL_DRV_O_EXCL      0x08u
#define OL_DRV_O_TRUNC     0x10u
#define OL_DRV_O_DIRECTORY 0x20u
#define OL_DRV_O_ALL       0x3fu

/* ---- the codec (pure) ------------------------------------------------------------ */

/* A DRIVE request, decoded; paths and data point into the payload. */
struct ol_drv_req {
    uint8_t uuid[16];          /* the drive (its format's uuid) */
    uint8_t step;              /* enum ol_drv_step_code */
    uint32_t handle;
    uint32_t arg;
    uint32_t mode;             /* OPEN, MKDIR: permission bits (<= 0777) */
    uint64_t off;
    int64_t token;             /* a fenced change's token (>= 0; 0: none) */
    const char *path, *path2;  /* not NUL-terminated */
    uint16_t path_len, path2_len;
    const uint8_t *data;       /* WRITE's bytes */
    uint32_t data_len;
};

/* Encodes q's header into hdr (OL_DRV_HDR_LEN bytes); the payload is hdr,
 * then path, path2 and data as they are. */
void ol_drv_req_encode(const struct ol_drv_req *q, uint8_t hdr[OL_DRV_HDR_LEN]);

/* Decodes and checks a payload against the table: 0, or -EINVAL (bad
 * request: short or long, an unknown step, a reserved byte not 0, a path
 * that breaks the rules above, fields a step does not use not 0, a READ or
 * WRITE over OL_DRV_IO_MAX, flags outside OL_DRV_O_ALL). */
int ol_drv_req_decode(const uint8_t *b, size_t len, struct ol_drv_req *q);

/* Whether p[0, n) is a drive-relative path by the rules above. */
int ol_drv_path_ok(const char *p, size_t n);

/* open(2) flags to OPEN's (O_CLOEXEC, O_NOFOLLOW dropped: the server sets
 * them), and back. -EINVAL: a flag with no wire form (O_DIRECT, O_APPEND...). */
int ol_drv_flags_to_wire(int oflags, uint32_t *wire);
int ol_drv_flags_from_wire(uint32_t wire);

/* ---- the server -------------------------------------------------------------------- */

/* A drive of this node: its format uuid, its open directory (-1: offline),
 * and the fencing token it took (NULL: not fenced; shared with whoever
 * else checks it, the daemon's own engine). */
struct ol_drv_local {
    uint8_t uuid[16];
    int dfd;
    _Atomic int64_t *fence;
    pthread_mutex_t *fmu;      /* held by whoever writes the fence file (a FENCE on the
                                  net loop tries it, -EAGAIN when held); NULL: none */
};
/* Raises *f to token if lower (never lowers). */
void ol_drv_fence_raise(_Atomic int64_t *f, int64_t token);

/* ---- fences ---------------------------------------------------------------------------
 *
 * A drive of the object store across hosts keeps the fencing token of its
 * set's owner in <drive>/.openlake/fence (24 bytes, little-endian):
 *   0 "OLFN"  4 u16 version 1  6 u16 0  8 i64 token  16 u64 XXH3-64 of bytes 0..15
 * written to fence.tmp, synced, renamed over, the directory synced. A change
 * carrying a token (made under the owner's commit lock) is taken only when
 * the token is the drive's; a FENCE step with a larger one replaces it. */
#define OL_DRV_FENCE_LEN 24u
void ol_drv_fence_encode(uint8_t b[OL_DRV_FENCE_LEN], int64_t token);
/* 0 and *token; -EBADMSG (damaged), -ENOTSUP (another version). */
int ol_drv_fence_decode(const uint8_t *b, size_t len, int64_t *token);
/* Blocking (not on a loop): the drive's token (0 when it has no file: never
 * fenced), or -errno; and writing a new one durably. */
int ol_drv_fence_read(int dfd, int64_t *token);
int ol_drv_fence_write(int dfd, int64_t token);

struct ol_drv_server;

/*
 * Serves DRIVE on rpc (on its loop's thread, before peers connect) for the
 * n drives d[0, n) (copied; their directories stay the caller's and open
 * until destroy). Returns 0 and *out, or -ENOMEM / -EINVAL (n over 256) /
 * -ENOSPC (the endpoint's connection slots are all taken).
 */
int ol_drv_server_create(ol_loop *loop, struct ol_rpc *rpc, const struct ol_drv_local *d,
                         unsigned n, struct ol_drv_server **out);
/* Frees the server after the endpoint's close_all and idle (no step of it
 * running) or its destroy. */
void ol_drv_server_destroy(struct ol_drv_server *s);
/* Counters: steps served, steps that failed (a result < 0), files open. Any thread. */
void ol_drv_server_stats(const struct ol_drv_server *s, uint64_t *steps, uint64_t *failed,
                         uint64_t *open_files);

/* ---- the client -------------------------------------------------------------------- */

struct ol_drv_client;
/* A step (store/engine.h struct ol_store_rstep): OPEN's flags are open(2)'s
 * (ol_drv_flags_to_wire); UNLINK's AT_REMOVEDIR or 0; FSYNC's 1 = data
 * only; path and path2 are copied; READ's buf is filled and STATX's stx
 * gets stx_mode's type bits and stx_size before the completion. */

/*
 * A client over rpc, on the node RPC's loop `net` (its thread), each call
 * with a deadline of timeout_ms (> 0). Returns 0 and *out, or -ENOMEM.
 */
int ol_drv_client_create(ol_loop *net, struct ol_rpc *rpc, uint32_t timeout_ms,
                         struct ol_drv_client **out);
/*
 * Starts step st on drive uuid of node `node`, from any loop's thread:
 * op->cb(loop, op, result, 0) runs later on `loop`, exactly once, never
 * inside this call (loop NULL: on the net loop's thread, for a caller that
 * is no loop and waits). A call that finds the peer's reply window full waits
 * in order for room, within its deadline. Returns 0, or -ENOMEM, -EINVAL
 * (a path over OL_DRV_PATH_MAX, flags with no wire form, a READ or WRITE
 * over OL_DRV_IO_MAX): then op->cb never runs.
 */
int ol_drv_start(struct ol_drv_client *c, ol_loop *loop, int64_t node, const uint8_t uuid[16],
                 const struct ol_store_rstep *st, struct ol_op *op);
/* Steps started and not yet delivered (any thread). */
uint64_t ol_drv_client_inflight(const struct ol_drv_client *c);
/* Frees the client once nothing is in flight. */
void ol_drv_client_destroy(struct ol_drv_client *c);

/*
 * The object engine's hooks for its remote drives over client c: the
 * store's drive i (configured index, i < n) is drive map[i].uuid of node
 * map[i].node (entries of local drives are not used). Returns a new
 * object (free with ol_drv_remote_destroy after the store closed) and
 * fills *hooks (for ol_store_params.remote), or NULL (out of memory).
 */
struct ol_drv_map {
    int64_t node;
    uint8_t uuid[16];
};
struct ol_drv_remote;
struct ol_drv_remote *ol_drv_remote_create(struct ol_drv_client *c, const struct ol_drv_map *map,
                                           unsigned n, struct ol_store_remote *hooks);
void ol_drv_remote_destroy(struct ol_drv_remote *r);

#endif
