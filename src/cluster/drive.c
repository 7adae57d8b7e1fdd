/*
 * drive.c - drive steps over the node RPC (drive.h): the DRIVE codec, the
 * server that runs them on this node's drives, and the client that sends
 * them from any loop.
 *
 * Server: each request is one job (the request held until its reply, the
 * step's op, its NUL-terminated paths, a READ's buffer), run as one
 * io_uring op on the node RPC's loop; the reply is sent by reference from
 * the job (a READ's bytes are not copied again) and the job is freed when
 * the endpoint is done with them. A connection's files are a table in its
 * conn_data slot: an OPEN reserves its entry before the openat goes out,
 * so the bound holds with opens in flight; the table is freed with the
 * connection (ol_rpc_on_conn_end: every request of it answered, so no op
 * of it runs), closing what is still open.
 *
 * Client: ol_drv_start copies the step into a job, posts it to the net
 * loop, which calls; a call the peer's reply window refuses (-EAGAIN)
 * waits in a FIFO, retried at every reply and every millisecond, until its
 * deadline; the reply (or the failure) is decoded on the net loop into the
 * caller's buffers and the job posted back to the caller's loop, which
 * completes the op and frees the job.
 */
#include "cluster/drive.h"
#include "base/container.h"

#include "base/le.h"

#include <xxhash.h>

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define OL_DRV_MAX_LOCAL 256u

/* ---- the codec ------------------------------------------------------------------- */

int ol_drv_path_ok(const char *p, size_t n)
{
    if (n == 0 || n > OL_DRV_PATH_MAX || p[0] == '/')
        return 0;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] == 0)
            return 0;
        if (i < n && p[i] != '/')
            continue;
        size_t len = i - start;
        if (len == 0 || (len == 1 && p[start] == '.') ||
            (len == 2 && p[start] == '.' && p[start + 1] == '.'))
            return 0;
        start = i + 1;
    }
    return 1;
}

int ol_drv_flags_to_wire(int f, uint32_t *wire)
{
    uint32_t w = 0;
    int acc = f & O_ACCMODE;
    if (acc == O_WRONLY)
        w |= OL_DRV_O_WRONLY;
    else if (acc == O_RDWR)
        w |= OL_DRV_O_RDWR;
    else if (acc != O_RDONLY)
        return -EINVAL;
    f &= ~(O_ACCMODE | O_CLOEXEC | O_NOFOLLOW);
    static const struct { int o; uint32_t w; } map[] = {
        {O_CREAT, OL_DRV_O_CREAT}, {O_EXCL, OL_DRV_O_EXCL},
        {O_TRUNC, OL_DRV_O_TRUNC}, {O_DIRECTORY, OL_DRV_O_DIRECTORY}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (f & map[i].o) {
            w |= map[i].w;
            f &= ~map[i].o;
        }
    if (f)
        return -EINVAL;
    *wire = w;
    return 0;
}

int ol_drv_flags_from_wire(uint32_t w)
{
    int f = (w & OL_DRV_O_RDWR) ? O_RDWR : (w & OL_DRV_O_WRONLY) ? O_WRONLY : O_RDONLY;
    if (w & OL_DRV_O_CREAT)
        f |= O_CREAT;
    if (w & OL_DRV_O_EXCL)
        f |= O_EXCL;
    if (w & OL_DRV_O_TRUNC)
        f |= O_TRUNC;
    if (w & OL_DRV_O_DIRECTORY)
        f |= O_DIRECTORY;
    return f | O_CLOEXEC | O_NOFOLLOW;
}

/*
 * Header (56 bytes, little-endian):
 *   0 uuid[16]  16 u8 step  17 u8 0  18 u16 path_len  20 u16 path2_len  22 u16 0
 *   24 u32 handle  28 u32 arg  32 u32 mode  36 u32 0  40 u64 off  48 i64 token
 * then path, path2, data.
 */
void ol_drv_req_encode(const struct ol_drv_req *q, uint8_t b[OL_DRV_HDR_LEN])
{
    memset(b, 0, OL_DRV_HDR_LEN);
    memcpy(b, q->uuid, 16);
    b[16] = q->step;
    ol_le_st16(b + 18, q->path_len);
    ol_le_st16(b + 20, q->path2_len);
    ol_le_st32(b + 24, q->handle);
    ol_le_st32(b + 28, q->arg);
    ol_le_st32(b + 32, q->mode);
    ol_le_st64(b + 40, q->off);
    ol_le_st64(b + 48, (uint64_t)q->token);
}

/* What each step uses: a path, a second path, a handle, data. */
struct drv_uses {
    bool path, path2, handle, data;
};
static const struct drv_uses ol_drv_uses[OL_DRV_STEP_MAX + 1] = {
    [OL_DRV_OPEN] = {true, false, false, false},
    [OL_DRV_READ] = {false, false, true, false},
    [OL_DRV_WRITE] = {false, false, true, true},
    [OL_DRV_FSYNC] = {false, false, true, false},
    [OL_DRV_CLOSE] = {false, false, true, false},
    [OL_DRV_MKDIR] = {true, false, false, false},
    [OL_DRV_UNLINK] = {true, false, false, false},
    [OL_DRV_RENAME] = {true, true, false, false},
    [OL_DRV_STATX] = {true, false, false, false},
    [OL_DRV_FALLOCATE] = {false, false, true, false},
    [OL_DRV_FENCE] = {false, false, false, false},
};

int ol_drv_req_decode(const uint8_t *b, size_t len, struct ol_drv_req *q)
{
    if (len < OL_DRV_HDR_LEN)
        return -EINVAL;
    memset(q, 0, sizeof *q);
    memcpy(q->uuid, b, 16);
    q->step = b[16];
    q->path_len = ol_le_ld16(b + 18);
    q->path2_len = ol_le_ld16(b + 20);
    q->handle = ol_le_ld32(b + 24);
    q->arg = ol_le_ld32(b + 28);
    q->mode = ol_le_ld32(b + 32);
    q->off = ol_le_ld64(b + 40);
    q->token = (int64_t)ol_le_ld64(b + 48);
    if (q->token < 0)
        return -EINVAL;
    if (q->step < 1 || q->step > OL_DRV_STEP_MAX || b[17] || ol_le_ld16(b + 22) ||
        ol_le_ld32(b + 36))
        return -EINVAL;
    size_t fixed = OL_DRV_HDR_LEN + (size_t)q->path_len + q->path2_len;
    if (fixed > len)
        return -EINVAL;
    q->path = (const char *)b + OL_DRV_HDR_LEN;
    q->path2 = q->path + q->path_len;
    q->data = b + fixed;
    q->data_len = (uint32_t)(len - fixed);
    struct drv_uses u = ol_drv_uses[q->step];
    if (u.path ? !ol_drv_path_ok(q->path, q->path_len) : q->path_len != 0)
        return -EINVAL;
    if (u.path2 ? !ol_drv_path_ok(q->path2, q->path2_len) : q->path2_len != 0)
        return -EINVAL;
    if (!u.handle && q->handle)
        return -EINVAL;
    if (u.data ? (q->data_len == 0 || q->data_len > OL_DRV_IO_MAX) : q->data_len != 0)
        return -EINVAL;
    switch (q->step) {
    case OL_DRV_OPEN:
        if (q->arg & ~OL_DRV_O_ALL || (q->arg & OL_DRV_O_WRONLY && q->arg & OL_DRV_O_RDWR) ||
            q->mode > 0777 || q->off)
            return -EINVAL;
        return 0;
    case OL_DRV_READ:
        return q->arg == 0 || q->arg > OL_DRV_IO_MAX || q->mode ? -EINVAL : 0;
    case OL_DRV_WRITE:
        return q->arg || q->mode ? -EINVAL : 0;
    case OL_DRV_FSYNC:
    case OL_DRV_UNLINK:
        return q->arg > 1 || q->mode || q->off ? -EINVAL : 0;
    case OL_DRV_MKDIR:
        return q->arg || q->mode > 0777 || q->off ? -EINVAL : 0;
    case OL_DRV_FALLOCATE:
        return q->arg || q->mode || q->off == 0 || q->off > INT64_MAX ? -EINVAL : 0;
    case OL_DRV_FENCE:
        return q->arg || q->mode || q->off || q->token == 0 ? -EINVAL : 0;
    default: /* CLOSE, RENAME, STATX */
        return q->arg || q->mode || q->off ? -EINVAL : 0;
    }
}

/* ---- the server ------------------------------------------------------------------ */

/* A connection's files: handle = generation << 16 | index (index < 65536). */
struct drv_files {
    int *fd;                   /* -1 free, -2 reserved by an OPEN in flight */
    uint16_t *gen;
    uint32_t cap, used, free_head;
    uint32_t *next_free;
    uint16_t gen0;             /* this connection's first generation: another than
                                  the connections before it (a handle of one of
                                  theirs is EBADF here, not another file) */
};

struct ol_drv_server {
    ol_loop *loop;
    struct ol_rpc *rpc;
    int slot;                  /* its connection slot (ol_rpc_on_conn_end) */
    unsigned n;
    struct ol_drv_local d[OL_DRV_MAX_LOCAL];
    uint16_t conn_seq;                /* the last connection's gen0 */
    _Atomic uint64_t steps, failed, open_files;
};

struct drv_job {
    struct ol_op op;
    struct ol_drv_server *s;
    struct ol_rpc_req *req;
    struct drv_files *files;
    uint32_t slot;             /* OPEN: the entry reserved */
    uint8_t step;
    uint8_t fstep;             /* FENCE: where its writing is (on_fence) */
    unsigned di;               /* FENCE: the local drive */
    int ffd;                   /* FENCE: the file or directory open */
    int64_t token;             /* FENCE */
    uint8_t fbuf[OL_DRV_FENCE_LEN];
    uint8_t reply[OL_DRV_REPLY_LEN + OL_DRV_STATX_LEN];
    struct statx stx;
    char *path, *path2;
    uint8_t *buf;              /* READ */
    char names[];
};

#define DRV_FREE     (-1)
#define DRV_RESERVED (-2)

static struct drv_files *files_of(struct ol_drv_server *s, struct ol_rpc_req *req)
{
    struct drv_files *f = req->conn_data[s->slot];
    if (!f) {
        f = calloc(1, sizeof *f);
        if (f) {
            f->free_head = UINT32_MAX;
            s->conn_seq = (uint16_t)((s->conn_seq + 0x1357) & 0x7fff);
            f->gen0 = s->conn_seq;
            req->conn_data[s->slot] = f;
        }
    }
    return f;
}

static int files_reserve(struct drv_files *f, uint32_t *slot)
{
    if (f->used >= OL_DRV_MAX_HANDLES)
        return -EMFILE;
    if (f->free_head == UINT32_MAX) {
        uint32_t cap = f->cap ? f->cap * 2 : 64;
        if (cap > OL_DRV_MAX_HANDLES)
            cap = OL_DRV_MAX_HANDLES;
        int *fd = realloc(f->fd, cap * sizeof *fd);
        if (!fd)
            return -ENOMEM;
        f->fd = fd;
        uint16_t *gen = realloc(f->gen, cap * sizeof *gen);
        if (!gen)
            return -ENOMEM;
        f->gen = gen;
        uint32_t *nf = realloc(f->next_free, cap * sizeof *nf);
        if (!nf)
            return -ENOMEM;
        f->next_free = nf;
        for (uint32_t i = cap; i-- > f->cap;) {
            f->fd[i] = DRV_FREE;
            f->gen[i] = f->gen0;
            f->next_free[i] = f->free_head;
            f->free_head = i;
        }
        f->cap = cap;
    }
    uint32_t i = f->free_head;
    f->free_head = f->next_free[i];
    f->fd[i] = DRV_RESERVED;
    f->used++;
    *slot = i;
    return 0;
}

static void files_release(struct drv_files *f, uint32_t i)
{
    f->fd[i] = DRV_FREE;
    f->gen[i] = (uint16_t)((f->gen[i] + 1) & 0x7fff);
    f->next_free[i] = f->free_head;
    f->free_head = i;
    f->used--;
}

static uint32_t handle_of(const struct drv_files *f, uint32_t i)
{
    return (uint32_t)f->gen[i] << 16 | i;
}

/* The fd of a handle, or -EBADF. */
static int files_fd(const struct drv_files *f, uint32_t h, uint32_t *slot)
{
    uint32_t i = h & 0xffff;
    if (!f || i >= f->cap || f->fd[i] < 0 || f->gen[i] != h >> 16)
        return -EBADF;
    *slot = i;
    return f->fd[i];
}

static void on_conn_end(void *data, void *arg)
{
    struct ol_drv_server *s = arg;
    struct drv_files *f = data;
    for (uint32_t i = 0; i < f->cap; i++)
        if (f->fd[i] >= 0) {
            close(f->fd[i]);   /* no step of the connection runs: none uses it */
            atomic_fetch_sub_explicit(&s->open_files, 1, memory_order_relaxed);
        }
    free(f->fd);
    free(f->gen);
    free(f->next_free);
    free(f);
}

static void job_unref(void *arg) { free(arg); }

static void job_reply(struct drv_job *j, int res)
{
    struct ol_drv_server *s = j->s;
    atomic_fetch_add_explicit(&s->steps, 1, memory_order_relaxed);
    if (res < 0)
        atomic_fetch_add_explicit(&s->failed, 1, memory_order_relaxed);
    ol_le_st32(j->reply, (uint32_t)res);
    ol_le_st32(j->reply + 4, 0);
    struct iovec iov[2] = {{j->reply, OL_DRV_REPLY_LEN}, {NULL, 0}};
    int n = 1;
    if (j->step == OL_DRV_STATX && res >= 0) {
        ol_le_st32(j->reply + 8, j->stx.stx_mode & S_IFMT);
        ol_le_st32(j->reply + 12, 0);
        ol_le_st64(j->reply + 16, j->stx.stx_size);
        iov[0].iov_len += OL_DRV_STATX_LEN;
    } else if (j->step == OL_DRV_READ && res > 0) {
        iov[1] = (struct iovec){j->buf, (size_t)res};
        n = 2;
    }
    struct ol_rpc_ref ref = {job_unref, j};
    ol_rpc_reply_ref(j->req, OL_RPC_OK, iov, n, &ref);
}

static void on_step(ol_loop *loop, struct ol_op *op, int res, unsigned flags)
{
    (void)loop;
    (void)flags;
    struct drv_job *j = OL_CONTAINER(op, struct drv_job, op);
    struct ol_drv_server *s = j->s;
    if (j->step == OL_DRV_OPEN) {
        if (res >= 0) {
            j->files->fd[j->slot] = res;
            res = (int)handle_of(j->files, j->slot);
            atomic_fetch_add_explicit(&s->open_files, 1, memory_order_relaxed);
        } else {
            files_release(j->files, j->slot);
        }
    } else if (j->step == OL_DRV_CLOSE && res >= 0) {
        atomic_fetch_sub_explicit(&s->open_files, 1, memory_order_relaxed);
    }
    job_reply(j, res);
}

/* ---- fences ---------------------------------------------------------------------- */

#define FENCE_FILE ".openlake/fence"
#define FENCE_TMP  ".openlake/fence.tmp"
#define FENCE_DIR  ".openlake"

void ol_drv_fence_encode(uint8_t b[OL_DRV_FENCE_LEN], int64_t token)
{
    memcpy(b, "OLFN", 4);
    ol_le_st16(b + 4, 1);
    ol_le_st16(b + 6, 0);
    ol_le_st64(b + 8, (uint64_t)token);
    ol_le_st64(b + 16, XXH3_64bits(b, 16));
}

int ol_drv_fence_decode(const uint8_t *b, size_t len, int64_t *token)
{
    if (len != OL_DRV_FENCE_LEN || memcmp(b, "OLFN", 4) || ol_le_ld64(b + 16) != XXH3_64bits(b, 16))
        return -EBADMSG;
    if (ol_le_ld16(b + 4) != 1)
        return -ENOTSUP;
    int64_t t = (int64_t)ol_le_ld64(b + 8);
    if (ol_le_ld16(b + 6) || t < 0)
        return -EBADMSG;
    *token = t;
    return 0;
}

int ol_drv_fence_read(int dfd, int64_t *token)
{
    int fd = openat(dfd, FENCE_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        *token = 0;
        return errno == ENOENT ? 0 : -errno;
    }
    uint8_t b[OL_DRV_FENCE_LEN + 1];
    ssize_t n = read(fd, b, sizeof b);
    int rc = n < 0 ? -errno : 0;
    close(fd);
    return rc < 0 ? rc : ol_drv_fence_decode(b, (size_t)n, token);
}

int ol_drv_fence_write(int dfd, int64_t token)
{
    uint8_t b[OL_DRV_FENCE_LEN];
    ol_drv_fence_encode(b, token);
    int fd = openat(dfd, FENCE_TMP, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -errno;
    int rc = write(fd, b, sizeof b) == (ssize_t)sizeof b && fsync(fd) == 0 ? 0 : -EIO;
    close(fd);
    if (rc == 0 && renameat(dfd, FENCE_TMP, dfd, FENCE_FILE) < 0)
        rc = -errno;
    int dd = rc == 0 ? openat(dfd, FENCE_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (dd >= 0) {
        if (fsync(dd) < 0)
            rc = -errno;
        close(dd);
    }
    return rc;
}

/* A FENCE that writes the drive's file, one io_uring step at a time (the
 * net loop never blocks): open fence.tmp, write, fsync, close, rename over
 * fence, open .openlake, fsync, close; then the token is the drive's. */
enum { FN_OPEN = 1, FN_WRITE, FN_SYNC, FN_CLOSE, FN_RENAME, FN_DOPEN, FN_DSYNC, FN_DCLOSE };

static void fence_unlock(struct ol_drv_server *s, unsigned di)
{
    if (s->d[di].fmu)
        pthread_mutex_unlock(s->d[di].fmu);
}

void ol_drv_fence_raise(_Atomic int64_t *f, int64_t token)
{
    int64_t have = atomic_load(f);
    while (have < token && !atomic_compare_exchange_weak(f, &have, token))
        ;
}

static void job_reply(struct drv_job *j, int res);

static void on_fence(ol_loop *loop, struct ol_op *op, int res, unsigned flags)
{
    (void)flags;
    struct drv_job *j = OL_CONTAINER(op, struct drv_job, op);
    struct ol_drv_server *s = j->s;
    int dfd = s->d[j->di].dfd, rc = 0;
    if (res < 0 && j->fstep != FN_CLOSE && j->fstep != FN_DCLOSE) {
        if (j->ffd >= 0)
            close(j->ffd);   /* a failed step's file: closed at once */
        fence_unlock(s, j->di);
        return job_reply(j, res);
    }
    switch (j->fstep) {
    case FN_OPEN:
        j->ffd = res;
        j->fstep = FN_WRITE;
        rc = ol_loop_write(loop, op, j->ffd, j->fbuf, OL_DRV_FENCE_LEN, 0);
        break;
    case FN_WRITE:
        if (res != (int)OL_DRV_FENCE_LEN) {
            close(j->ffd);
            fence_unlock(s, j->di);
            return job_reply(j, -EIO);
        }
        j->fstep = FN_SYNC;
        rc = ol_loop_fsync(loop, op, j->ffd, 0);
        break;
    case FN_SYNC:
        j->fstep = FN_CLOSE;
        rc = ol_loop_close(loop, op, j->ffd);
        if (rc == 0)
            j->ffd = -1;
        break;
    case FN_CLOSE:
        j->fstep = FN_RENAME;
        rc = ol_loop_renameat(loop, op, dfd, FENCE_TMP, dfd, FENCE_FILE, 0);
        break;
    case FN_RENAME:
        j->fstep = FN_DOPEN;
        rc = ol_loop_openat(loop, op, dfd, FENCE_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
        break;
    case FN_DOPEN:
        j->ffd = res;
        j->fstep = FN_DSYNC;
        rc = ol_loop_fsync(loop, op, j->ffd, 0);
        break;
    case FN_DSYNC:
        j->fstep = FN_DCLOSE;
        rc = ol_loop_close(loop, op, j->ffd);
        if (rc == 0)
            j->ffd = -1;
        break;
    default: /* FN_DCLOSE: durable */
        ol_drv_fence_raise(s->d[j->di].fence, j->token);
        fence_unlock(s, j->di);
        return job_reply(j, 0);
    }
    if (rc < 0) {
        if (j->ffd >= 0)
            close(j->ffd);
        fence_unlock(s, j->di);
        job_reply(j, rc);
    }
}

static void fence_start(struct drv_job *j, unsigned di, int64_t token)
{
    struct ol_drv_server *s = j->s;
    _Atomic int64_t *f = s->d[di].fence;
    if (!f)
        return job_reply(j, -ENOTSUP);
    int64_t have = atomic_load(f);
    if (token < have)
        return job_reply(j, -ESTALE);
    if (token == have)
        return job_reply(j, 0);
    if (s->d[di].fmu && pthread_mutex_trylock(s->d[di].fmu) != 0)
        return job_reply(j, -EAGAIN);   /* another writer has the file: asked again later */
    if (atomic_load(f) >= token) {      /* raised meanwhile */
        if (s->d[di].fmu)
            pthread_mutex_unlock(s->d[di].fmu);
        return job_reply(j, atomic_load(f) == token ? 0 : -ESTALE);
    }
    j->di = di;
    j->token = token;
    j->ffd = -1;
    j->fstep = FN_OPEN;
    ol_drv_fence_encode(j->fbuf, token);
    j->op.cb = on_fence;
    int rc = ol_loop_openat(s->loop, &j->op, s->d[di].dfd, FENCE_TMP,
                            O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (rc < 0) {
        fence_unlock(s, di);
        job_reply(j, rc);
    }
}

/* Whether a step changes the drive (a fenced change when it carries a token). */
static bool step_changes(const struct ol_drv_req *q)
{
    switch (q->step) {
    case OL_DRV_OPEN:
        return (q->arg & (OL_DRV_O_WRONLY | OL_DRV_O_RDWR | OL_DRV_O_CREAT | OL_DRV_O_TRUNC)) != 0;
    case OL_DRV_WRITE:
    case OL_DRV_MKDIR:
    case OL_DRV_UNLINK:
    case OL_DRV_RENAME:
    case OL_DRV_FALLOCATE: return true;
    default: return false;
    }
}

static void on_drive(struct ol_rpc_req *req, void *arg)
{
    struct ol_drv_server *s = arg;
    struct ol_drv_req q;
    if (ol_drv_req_decode(req->payload, req->len, &q) < 0) {
        ol_rpc_reply(req, OL_RPC_BAD_REQUEST, NULL, 0);
        return;
    }
    if (q.step == OL_DRV_READ && (uint64_t)q.arg + OL_DRV_REPLY_LEN > req->reply_max) {
        ol_rpc_reply(req, OL_RPC_TOO_LARGE, NULL, 0);
        return;
    }
    size_t names = (size_t)q.path_len + 1 + q.path2_len + 1;
    size_t extra = q.step == OL_DRV_READ ? q.arg : 0;
    struct drv_job *j = malloc(sizeof *j + names + extra);
    if (!j) {
        ol_rpc_reply(req, OL_RPC_BUSY, NULL, 0);
        return;
    }
    j->op.cb = on_step;
    j->s = s;
    j->req = req;
    j->files = NULL;
    j->step = q.step;
    j->path = j->names;
    if (q.path_len)
        memcpy(j->path, q.path, q.path_len);
    j->path[q.path_len] = 0;
    j->path2 = j->path + q.path_len + 1;
    if (q.path2_len)
        memcpy(j->path2, q.path2, q.path2_len);
    j->path2[q.path2_len] = 0;
    j->buf = (uint8_t *)j->names + names;
    int dfd = -1;
    unsigned di = 0;
    for (unsigned i = 0; i < s->n; i++)
        if (!memcmp(s->d[i].uuid, q.uuid, 16)) {
            dfd = s->d[i].dfd;
            di = i;
            break;
        }
    if (dfd < 0)
        return job_reply(j, -ENODEV);
    if (q.step == OL_DRV_FENCE)
        return fence_start(j, di, q.token);
    /* a change under a commit lock: only with the token the drive took */
    if (q.token && step_changes(&q) && s->d[di].fence && atomic_load(s->d[di].fence) != q.token)
        return job_reply(j, -ESTALE);
    int fd = -1, rc;
    uint32_t slot = 0;
    if (ol_drv_uses[q.step].handle) {
        fd = files_fd(req->conn_data[s->slot], q.handle, &slot);
        if (fd < 0)
            return job_reply(j, fd);
    }
    ol_loop *l = s->loop;
    switch (q.step) {
    case OL_DRV_OPEN:
        j->files = files_of(s, req);
        if (!j->files)
            return job_reply(j, -ENOMEM);
        rc = files_reserve(j->files, &j->slot);
        if (rc < 0)
            return job_reply(j, rc);
        rc = ol_loop_openat(l, &j->op, dfd, j->path, ol_drv_flags_from_wire(q.arg),
                            (mode_t)q.mode);
        if (rc < 0)
            files_release(j->files, j->slot);
        break;
    case OL_DRV_READ:
        rc = ol_loop_read(l, &j->op, fd, j->buf, q.arg, q.off);
        break;
    case OL_DRV_WRITE:
        rc = ol_loop_write(l, &j->op, fd, q.data, q.data_len, q.off);   /* req outlives it */
        break;
    case OL_DRV_FSYNC:
        rc = ol_loop_fsync(l, &j->op, fd, (int)q.arg);
        break;
    case OL_DRV_CLOSE:
        files_release(req->conn_data[s->slot], slot);   /* the handle is gone at once */
        rc = ol_loop_close(l, &j->op, fd);
        if (rc < 0) {
            close(fd);
            atomic_fetch_sub_explicit(&s->open_files, 1, memory_order_relaxed);
        }
        break;
    case OL_DRV_MKDIR:
        rc = ol_loop_mkdirat(l, &j->op, dfd, j->path, (mode_t)q.mode);
        break;
    case OL_DRV_UNLINK:
        rc = ol_loop_unlinkat(l, &j->op, dfd, j->path, q.arg ? AT_REMOVEDIR : 0);
        break;
    case OL_DRV_RENAME:
        rc = ol_loop_renameat(l, &j->op, dfd, j->path, dfd, j->path2, 0);
        break;
    case OL_DRV_STATX:
        rc = ol_loop_statx(l, &j->op, dfd, j->path, AT_SYMLINK_NOFOLLOW,
                           STATX_TYPE | STATX_SIZE, &j->stx);
        break;
    default: /* OL_DRV_FALLOCATE */
        rc = ol_loop_fallocate(l, &j->op, fd, 0, 0, q.off);
        break;
    }
    if (rc < 0)
        job_reply(j, rc);
}

int ol_drv_server_create(ol_loop *loop, struct ol_rpc *rpc, const struct ol_drv_local *d,
                         unsigned n, struct ol_drv_server **out)
{
    if (n > OL_DRV_MAX_LOCAL)
        return -EINVAL;
    struct ol_drv_server *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->loop = loop;
    s->rpc = rpc;
    s->n = n;
    memcpy(s->d, d, n * sizeof *d);
    s->slot = ol_rpc_on_conn_end(rpc, on_conn_end, s);
    if (s->slot < 0) {
        free(s);
        return -ENOSPC;
    }
    ol_rpc_handle(rpc, OL_DRV_RPC_OP, on_drive, s);
    *out = s;
    return 0;
}

void ol_drv_server_destroy(struct ol_drv_server *s) { free(s); }

void ol_drv_server_stats(const struct ol_drv_server *s, uint64_t *steps, uint64_t *failed,
                         uint64_t *open_files)
{
    *steps = atomic_load_explicit(&s->steps, memory_order_relaxed);
    *failed = atomic_load_explicit(&s->failed, memory_order_relaxed);
    *open_files = atomic_load_explicit(&s->open_files, memory_order_relaxed);
}

/* ---- the client ------------------------------------------------------------------ */

struct ol_drv_client {
    ol_loop *net;
    struct ol_rpc *rpc;
    uint32_t timeout_ms;
    struct cjob *whead, *wtail;     /* calls waiting for reply room (net loop) */
    struct ol_timer retry;
    _Atomic uint64_t inflight;
};

struct cjob {
    struct ol_msg msg;
    struct ol_drv_client *c;
    ol_loop *home;
    struct ol_op *op;
    int64_t node;
    uint64_t deadline_ms;
    struct cjob *next;
    struct ol_drv_req q;
    uint8_t hdr[OL_DRV_HDR_LEN];
    void *buf;
    struct statx *stx;
    int res;
    char names[];
};

static void cjob_home(ol_loop *loop, struct ol_msg *m)
{
    struct cjob *j = OL_CONTAINER(m, struct cjob, msg);
    struct ol_drv_client *c = j->c;
    struct ol_op *op = j->op;
    int res = j->res;
    free(j);
    atomic_fetch_sub_explicit(&c->inflight, 1, memory_order_relaxed);
    op->cb(loop, op, res, 0);
}

static void cjob_finish(struct cjob *j, int res)
{
    j->res = res;
    j->msg.fn = cjob_home;
    if (j->home)
        ol_loop_post(j->home, &j->msg);
    else
        cjob_home(NULL, &j->msg);   /* a waiting thread's: its callback, here */
}

static void on_reply(void *arg, int rc, const uint8_t *p, uint32_t len);

/* Calls j: 0 (sent or queued by the endpoint), -EAGAIN (no reply room). */
static int cjob_call(struct cjob *j)
{
    struct ol_drv_client *c = j->c;
    struct iovec iov[4] = {{j->hdr, OL_DRV_HDR_LEN}};
    int n = 1;
    if (j->q.path_len)
        iov[n++] = (struct iovec){(void *)j->q.path, j->q.path_len};
    if (j->q.path2_len)
        iov[n++] = (struct iovec){(void *)j->q.path2, j->q.path2_len};
    if (j->q.data_len)
        iov[n++] = (struct iovec){(void *)(uintptr_t)j->q.data, j->q.data_len};
    uint32_t reply_max = OL_DRV_REPLY_LEN + (j->q.step == OL_DRV_READ    ? j->q.arg
                                             : j->q.step == OL_DRV_STATX ? OL_DRV_STATX_LEN
                                                                          : 0);
    uint64_t now = ol_loop_now_ms(c->net);
    uint32_t left = j->deadline_ms > now ? (uint32_t)(j->deadline_ms - now) : 1;
    int rc = ol_rpc_call(c->rpc, j->node, OL_DRV_RPC_OP, iov, n, reply_max, left, on_reply, j);
    if (rc == -EAGAIN)
        return rc;
    if (rc < 0)
        cjob_finish(j, rc);
    return 0;
}

/* Calls the waiting jobs again, in order for each peer: a peer whose reply
 * window is still full keeps its jobs (and blocks only its own later ones),
 * the others' go. A job is unlinked before it is called: a call that fails
 * at once finishes it (and frees it). */
static void retry_waiting(struct ol_drv_client *c)
{
    uint64_t now = ol_loop_now_ms(c->net);
    int64_t full[32];
    unsigned nfull = 0;
    struct cjob **link = &c->whead, *last = NULL;
    while (*link) {
        struct cjob *j = *link;
        if (j->deadline_ms <= now) {   /* past its deadline: over, blocked or not */
            *link = j->next;
            cjob_finish(j, -ETIMEDOUT);
            continue;
        }
        bool blocked = false;
        for (unsigned k = 0; k < nfull && !blocked; k++)
            blocked = full[k] == j->node;
        if (!blocked) {
            *link = j->next;
            if (cjob_call(j) == 0)
                continue;           /* sent (or finished): gone from the queue */
            j->next = *link;        /* -EAGAIN: back in its place */
            *link = j;
            if (nfull < 32)
                full[nfull++] = j->node;
        }
        last = *link;
        link = &(*link)->next;
    }
    c->wtail = last;
    if (c->whead && !ol_timer_armed(&c->retry))
        ol_timer_arm(c->net, &c->retry, 1);
}

static void on_retry(ol_loop *loop, struct ol_timer *t)
{
    (void)loop;
    retry_waiting(OL_CONTAINER(t, struct ol_drv_client, retry));
}

static void on_reply(void *arg, int rc, const uint8_t *p, uint32_t len)
{
    struct cjob *j = arg;
    struct ol_drv_client *c = j->c;
    int res;
    if (rc < 0)
        res = rc;
    else if (rc != OL_RPC_OK || len < OL_DRV_REPLY_LEN)
        res = rc == OL_RPC_BUSY ? -EAGAIN : -EPROTO;
    else {
        res = (int32_t)ol_le_ld32(p);
        uint32_t body = len - OL_DRV_REPLY_LEN;
        if (res < -4095)
            res = -EPROTO;
        else if (j->q.step == OL_DRV_READ && res >= 0) {
            if ((uint32_t)res > j->q.arg || body != (uint32_t)res)
                res = -EPROTO;
            else
                memcpy(j->buf, p + OL_DRV_REPLY_LEN, body);
        } else if (j->q.step == OL_DRV_STATX && res >= 0) {
            if (body != OL_DRV_STATX_LEN) {
                res = -EPROTO;
            } else {
                memset(j->stx, 0, sizeof *j->stx);
                j->stx->stx_mask = STATX_TYPE | STATX_SIZE;
                j->stx->stx_mode = (uint16_t)(ol_le_ld32(p + 8) & S_IFMT);
                j->stx->stx_size = ol_le_ld64(p + 16);
            }
        } else if (body) {
            res = -EPROTO;
        }
    }
    cjob_finish(j, res);
    if (c->whead)
        retry_waiting(c);
}

static void cjob_start(ol_loop *loop, struct ol_msg *m)
{
    (void)loop;
    struct cjob *j = OL_CONTAINER(m, struct cjob, msg);
    struct ol_drv_client *c = j->c;
    j->deadline_ms = ol_loop_now_ms(c->net) + c->timeout_ms;
    bool behind = false;   /* a job of the same peer waits: this one goes after it */
    for (struct cjob *w = c->whead; w && !behind; w = w->next)
        behind = w->node == j->node;
    if (!behind && cjob_call(j) == 0)
        return;
    j->next = NULL;
    if (c->wtail)
        c->wtail->next = j;
    else
        c->whead = j;
    c->wtail = j;
    if (!ol_timer_armed(&c->retry))
        ol_timer_arm(c->net, &c->retry, 1);
}

int ol_drv_start(struct ol_drv_client *c, ol_loop *loop, int64_t node, const uint8_t uuid[16],
                 const struct ol_store_rstep *st, struct ol_op *op)
{
    if (st->code < 1 || st->code > OL_DRV_STEP_MAX || (st->code == OL_DRV_FENCE && st->token <= 0))
        return -EINVAL;
    size_t pl = st->path ? strlen(st->path) : 0, p2 = st->path2 ? strlen(st->path2) : 0;
    if (pl > OL_DRV_PATH_MAX || p2 > OL_DRV_PATH_MAX)
        return -EINVAL;
    struct ol_drv_req q = {.step = st->code, .token = st->token};
    if (st->token < 0)
        return -EINVAL;
    memcpy(q.uuid, uuid, 16);
    switch (st->code) {
    case OL_DRV_OPEN:
        if (ol_drv_flags_to_wire(st->flags, &q.arg) < 0)
            return -EINVAL;
        q.mode = st->flags & O_CREAT ? (uint32_t)(st->mode & 0777) : 0;
        break;
    case OL_DRV_READ:
    case OL_DRV_WRITE:
        if (st->len == 0 || st->len > OL_DRV_IO_MAX)
            return -EINVAL;
        q.arg = st->code == OL_DRV_READ ? st->len : 0;
        q.off = st->off;
        if (st->code == OL_DRV_WRITE) {
            q.data = st->wbuf;
            q.data_len = st->len;
        }
        break;
    case OL_DRV_FSYNC: q.arg = st->flags ? 1 : 0; break;
    case OL_DRV_MKDIR: q.mode = (uint32_t)(st->mode & 0777); break;
    case OL_DRV_UNLINK: q.arg = st->flags & AT_REMOVEDIR ? 1 : 0; break;
    case OL_DRV_FALLOCATE: q.off = st->off; break;
    default: break;
    }
    if (ol_drv_uses[st->code].handle) {
        if (st->fd < 0)
            return -EINVAL;
        q.handle = (uint32_t)st->fd;
    }
    struct cjob *j = malloc(sizeof *j + pl + p2);
    if (!j)
        return -ENOMEM;
    memset(j, 0, sizeof *j);
    j->c = c;
    j->home = loop;
    j->op = op;
    j->node = node;
    j->buf = st->buf;
    j->stx = st->stx;
    if (pl)
        memcpy(j->names, st->path, pl);
    if (p2)
        memcpy(j->names + pl, st->path2, p2);
    q.path = j->names;
    q.path_len = (uint16_t)pl;
    q.path2 = j->names + pl;
    q.path2_len = (uint16_t)p2;
    j->q = q;
    ol_drv_req_encode(&q, j->hdr);
    atomic_fetch_add_explicit(&c->inflight, 1, memory_order_relaxed);
    j->msg.fn = cjob_start;
    ol_loop_post(c->net, &j->msg);
    return 0;
}

int ol_drv_client_create(ol_loop *net, struct ol_rpc *rpc, uint32_t timeout_ms,
                         struct ol_drv_client **out)
{
    struct ol_drv_client *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->net = net;
    c->rpc = rpc;
    c->timeout_ms = timeout_ms ? timeout_ms : 1;
    c->retry.fn = on_retry;
    *out = c;
    return 0;
}

uint64_t ol_drv_client_inflight(const struct ol_drv_client *c)
{
    return atomic_load_explicit(&c->inflight, memory_order_relaxed);
}

void ol_drv_client_destroy(struct ol_drv_client *c)
{
    if (!c)
        return;
    ol_timer_cancel(c->net, &c->retry);
    free(c);
}

/* ---- the engine's hooks ------------------------------------------------------------ */

struct ol_drv_remote {
    struct ol_drv_client *c;
    unsigned n;
    struct ol_drv_map map[];
};

static int remote_start(void *ud, ol_loop *loop, unsigned drive, const struct ol_store_rstep *st,
                        struct ol_op *op)
{
    struct ol_drv_remote *r = ud;
    if (drive >= r->n)
        return -ENODEV;
    return ol_drv_start(r->c, loop, r->map[drive].node, r->map[drive].uuid, st, op);
}

struct ol_drv_remote *ol_drv_remote_create(struct ol_drv_client *c, const struct ol_drv_map *map,
                                           unsigned n, struct ol_store_remote *hooks)
{
    struct ol_drv_remote *r = malloc(sizeof *r + n * sizeof *map);
    if (!r)
        return NULL;
    r->c = c;
    r->n = n;
    memcpy(r->map, map, n * sizeof *map);
    *hooks = (struct ol_store_remote){.start = remote_start, .ud = r};
    return r;
}

void ol_drv_remote_destroy(struct ol_drv_remote *r) { free(r); }
