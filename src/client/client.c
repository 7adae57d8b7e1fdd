/*
 * client.c - the C client of the KV cache (see include/openlake/client.h).
 *
 * Owns: one blocking connection per server shard with its own lock (a
 * Unix or TCP socket, or for a ucx://host:port address a UCX stream
 * endpoint: ucx_link.c, which loads UCX at run time; it carries the same
 * bytes as TCP), growable frame buffers per connection (reused across
 * calls), the shared slab mapping, key routing and batch split/merge,
 * reconnection with backoff, and the zero-copy slot handles (struct
 * ol_client_slot).
 * Uses src/kv/proto.c for every byte on the wire and src/kv/slab.h for the
 * slab's superblock and slot header layout (read-only: a client never
 * writes a header); nothing else of the server.
 *
 * A call: keys (or slot handles) are grouped by shard (counting sort), the
 * locks of the shards involved are taken in shard order, every shard's
 * frame is sent before any answer is read (the shards work in parallel),
 * answers are merged back in key order, locks released.
 *
 * put and get are the slot calls with a copy in between: put = RESERVE,
 * copy-and-hash into the slots, COMMIT (ABORT what did not fit); get =
 * ACQUIRE, check the slot headers, copy-and-hash out, RELEASE (sent without
 * waiting: its answer is read before the next answer on that connection,
 * see ol_c_release_nowait). Over TCP (and UCX)
 * they are PUT/GET frames cut to the server's limits and pipelined, several
 * frames in flight per connection (see "TCP: values inline" below).
 *
 * A connection with a request whose answer is unread (pending) is out of
 * step (a get's RELEASE answer left for the next call, k->deferred, does
 * not count): a call that fails drops exactly those, which makes the server
 * release their pins and reservations. Each loss bumps the connection's
 * epoch; a slot handle records the epoch it was granted in, so a handle
 * from before a loss is refused without a round trip and without touching
 * the slab. Slab mappings are unmapped only at close, so a stale handle's
 * pointer never faults.
 */
#include "openlake/client.h"

#include "client/ucx_link.h"
#include "kv/proto.h"
#include "kv/slab.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define OL_C_BACKOFF_MIN 10
#define OL_C_BACKOFF_MAX 1000
#define OL_C_BUSY_MAX    200  /* ms: the longest pause between HELLOs answered BUSY */

#define OL_C_POP_SHIFT 21 /* ol_c_populate works in 2 MiB pieces: the slab's data pages */

/* ol_client_slot._flags */
#define OL_C_SENT 1u /* named in a frame whose answer is not read yet */
#define OL_C_BAD  2u /* pinned, but its slot header failed the check: released by the same call */

struct ol_cconn {
    pthread_mutex_t mu;
    int fd;                    /* -1: broken, reconnect after retry_at; over UCX the
                                  link's event fd (ux owns it: never closed here) */
    struct ol_cux *ux;         /* is_ucx: the UCX link, NULL when broken */
    uint32_t shard;
    uint64_t next_req;
    uint8_t *out, *in;
    size_t out_cap, in_cap, in_len;
    uint64_t backoff_ms, retry_at_ms;
    bool pending;              /* a request was sent and its answer is not read yet */
    uint32_t deferred;         /* items of a get's RELEASE sent without waiting: its answer is
                                  the first one due, read before the next answer (0: none) */
    uint64_t deferred_req;     /* that RELEASE's request id */
    uint64_t epoch;            /* +1 at each loss (atomic: read without the lock) */
    char *map;                 /* the slab mapping this session's offsets refer to */
    size_t map_size;
    uint8_t *populated;        /* of map: per 2 MiB, 1 once its page tables are filled (ol_c_populate) */
    uint64_t slot_size;        /* slot size of the session's value size */
    uint64_t hdr_off;          /* the slot header table, from the superblock */
    uint32_t hdr_slots;        /* headers in it */
    /* the server's limits, from its HELLO answer */
    uint32_t max_items, max_body, max_data, max_value;
    uint16_t version;          /* the protocol version HELLO negotiated */
    struct iovec *iov;         /* a PUT frame being sent (TCP), reused across calls */
    size_t iov_cap;
};

struct ol_client {
    char addr[256];
    char token[OL_KV_MAX_TOKEN + 1];
    char ns[OL_KV_MAX_NAMESPACE + 1];
    size_t token_len, ns_len;
    bool is_unix;
    bool is_ucx;             /* addr is ucx://host:port */
    uint64_t value_size, slot_size;
    int timeout_ms;
    uint64_t seed;
    uint32_t nshards;
    char *slab;              /* the newest mapping (each connection keeps the one of its session) */
    size_t slab_size;
    uint8_t *slab_populated; /* its ol_cconn.populated */
    uint64_t hdr_off;        /* of the newest mapping's superblock */
    uint32_t hdr_slots;
    ino_t slab_ino;          /* identity of the mapped slab (a restarted daemon has a new one) */
    int slab_fd;             /* its memfd, kept for ol_client_slab_usage; -1 before the first */
    pthread_mutex_t slab_mu; /* remapping after a restart */
    struct ol_cmap { char *p; size_t n; uint8_t *populated; } retired[8]; /* old mappings, unmapped at close */
    int nretired;
    struct ol_cconn *conns;
};

static uint64_t ol_c_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int ol_c_grow(uint8_t **buf, size_t *cap, size_t need)
{
    if (*cap >= need)
        return 0;
    size_t n = *cap ? *cap : 65536;
    while (n < need)
        n *= 2;
    uint8_t *p = realloc(*buf, n);
    if (!p)
        return -ENOMEM;
    *buf = p;
    *cap = n;
    return 0;
}

/* ---- connections ---------------------------------------------------------- */

#define OL_C_UCX_SCHEME "ucx://"

/* Splits "host:port" or "[IPv6]:port" into host (NUL-terminated, in hcap
 * bytes) and *port (OUT: a slice of addr). -EINVAL without a port. */
static int ol_c_split_addr(const char *addr, char *host, size_t hcap, const char **port)
{
    const char *colon;
    if (addr[0] == '[') {
        const char *end = strchr(addr, ']');
        if (!end || end[1] != ':')
            return -EINVAL;
        snprintf(host, hcap, "%.*s", (int)(end - addr - 1), addr + 1);
        colon = end + 1;
    } else if ((colon = strrchr(addr, ':'))) {
        snprintf(host, hcap, "%.*s", (int)(colon - addr), addr);
    } else {
        return -EINVAL;
    }
    *port = colon + 1;
    return 0;
}

/* A UCX link to c's ucx://host:port in *ux (OUT); returns its event fd. */
static int ol_c_dial_ucx(const ol_client *c, struct ol_cux **ux)
{
    char host[256];
    const char *port;
    if (ol_c_split_addr(c->addr + strlen(OL_C_UCX_SCHEME), host, sizeof host, &port) < 0)
        return -EINVAL;
    int rc = ol_cux_open(host, port, c->timeout_ms, ux);
    return rc < 0 ? rc : ol_cux_fd(*ux);
}

/* Connects to c's server: returns the socket (send and receive time out
 * after c->timeout_ms), or over UCX the link's fd with the link in *ux. */
static int ol_c_dial(const ol_client *c, struct ol_cux **ux)
{
    int fd;
    if (c->is_ucx)
        return ol_c_dial_ucx(c, ux);
    if (c->is_unix) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(c->addr) >= sizeof sa.sun_path)
            return -ENAMETOOLONG;
        memcpy(sa.sun_path, c->addr, strlen(c->addr) + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
            goto fail;
    } else {
        char host[256];
        const char *port;
        if (ol_c_split_addr(c->addr, host, sizeof host, &port) < 0)
            return -EINVAL;
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
        struct addrinfo *ai;
        if (getaddrinfo(host, port, &hints, &ai) != 0)
            return -EHOSTUNREACH;
        fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int ok = fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0;
        freeaddrinfo(ai);
        if (!ok)
            goto fail;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    struct timeval tv = {.tv_sec = c->timeout_ms / 1000, .tv_usec = (c->timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    return fd;
fail:;
    int rc = -errno;
    if (fd >= 0)
        close(fd);
    return rc;
}

/* Closes k's socket, or its UCX link (and the link's fd with it): k is
 * broken (fd -1). */
static void ol_c_hangup(struct ol_cconn *k)
{
    if (k->ux)
        ol_cux_close(k->ux);
    else if (k->fd >= 0)
        close(k->fd);
    k->ux = NULL;
    k->fd = -1;
}

/* A UCX link's result as a socket's would be: -ETIMEDOUT, else -EIO. */
static int ol_c_ux_rc(long rc) { return rc >= 0 ? 0 : rc == -ETIMEDOUT ? -ETIMEDOUT : -EIO; }

static int ol_c_send(struct ol_cconn *k, const void *p, size_t n)
{
    if (k->ux)
        return ol_c_ux_rc(ol_cux_sendv(k->ux, &(struct iovec){(void *)p, n}, 1));
    const char *b = p;
    while (n) {
        ssize_t w = send(k->fd, b, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return errno == EAGAIN ? -ETIMEDOUT : -EIO;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

/*
 * Reads what has arrived (at least a byte) onto the end of k->in, which has
 * room. A descriptor passed with it (Unix) lands in *fd_out if that is -1
 * (fd_out may be NULL), else is closed. 0, -ETIMEDOUT or -EIO.
 */
static int ol_c_read(struct ol_cconn *k, int *fd_out)
{
    if (k->ux) {
        long got = ol_cux_recv(k->ux, k->in + k->in_len, k->in_cap - k->in_len);
        if (got > 0)
            k->in_len += (size_t)got;
        return got > 0 ? 0 : got == -ETIMEDOUT ? -ETIMEDOUT : -EIO;
    }
    union {
        char b[CMSG_SPACE(sizeof(int))];
        struct cmsghdr a;
    } ctl;
    struct iovec iov = {k->in + k->in_len, k->in_cap - k->in_len};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b,
                       .msg_controllen = sizeof ctl.b};
    ssize_t got;
    while ((got = recvmsg(k->fd, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
        ;
    if (got <= 0)
        return got < 0 && errno == EAGAIN ? -ETIMEDOUT : -EIO;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
    if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
        int fd;
        memcpy(&fd, CMSG_DATA(cm), sizeof fd);
        if (fd_out && *fd_out < 0)
            *fd_out = fd;
        else
            close(fd);
    }
    k->in_len += (size_t)got;
    return 0;
}

/*
 * Reads the next whole frame into k->in (a descriptor passed with it lands
 * in fd_out). On success h and d describe it and used is its length (the
 * caller calls ol_c_consume). A frame with a non-OK status is returned too.
 */
static int ol_c_recv(struct ol_cconn *k, struct ol_kv_hdr *h, struct ol_kv_dec *d, int *fd_out,
                     size_t *used)
{
    for (;;) {
        if (k->in_len) {
            long n = ol_kv_frame_parse(k->in, k->in_len, h, d);
            if (n > 0) {
                *used = (size_t)n;
                return 0;
            }
            if (n != OL_KV_INCOMPLETE)
                return -EIO;
            struct ol_kv_hdr hh;
            if (ol_kv_frame_parse_header(k->in, k->in_len, &hh) > 0 &&
                ol_c_grow(&k->in, &k->in_cap, ol_kv_frame_len(&hh)) < 0)
                return -ENOMEM;
        }
        if (ol_c_grow(&k->in, &k->in_cap, k->in_len + 65536) < 0)
            return -ENOMEM;
        int rc = ol_c_read(k, fd_out);
        if (rc < 0)
            return rc;
    }
}

static void ol_c_consume(struct ol_cconn *k, size_t used)
{
    memmove(k->in, k->in + used, k->in_len - used);
    k->in_len -= used;
}

static uint64_t ol_c_epoch(const struct ol_cconn *k) { return __atomic_load_n(&k->epoch, __ATOMIC_ACQUIRE); }

static void ol_c_fail(struct ol_cconn *k)
{
    ol_c_hangup(k);
    k->in_len = 0;
    k->pending = false;
    k->deferred = 0; /* the server drops the session's pins with it */
    __atomic_add_fetch(&k->epoch, 1, __ATOMIC_ACQ_REL); /* its pins and reservations are gone */
    k->backoff_ms = k->backoff_ms ? k->backoff_ms * 2 : OL_C_BACKOFF_MIN;
    if (k->backoff_ms > OL_C_BACKOFF_MAX)
        k->backoff_ms = OL_C_BACKOFF_MAX;
    k->retry_at_ms = ol_c_now_ms() + k->backoff_ms;
}

/*
 * Reads the answer of a get's RELEASE sent without waiting (k->deferred), if
 * one is due: it must answer that request, OK, with one OK status per slot
 * sent. Called under k's lock before any other answer on k is read. Returns
 * 0, or an error with k out of step (the caller drops it).
 */
static int ol_c_deferred_read(struct ol_cconn *k)
{
    if (!k->deferred || k->fd < 0)
        return 0;
    struct ol_kv_hdr h;
    struct ol_kv_dec d;
    size_t used;
    int rc = ol_c_recv(k, &h, &d, NULL, &used);
    if (rc < 0)
        return rc;
    if (h.req_id != k->deferred_req || h.status != OL_KV_OK || d.count != k->deferred)
        rc = -EIO;
    for (uint16_t st; rc == 0 && (rc = ol_kv_dec_status(&d, &st)) == 1;)
        rc = st == OL_KV_OK ? 0 : -EIO;
    if (rc < 0)
        return -EIO;
    ol_c_consume(k, used);
    k->deferred = 0;
    return 0;
}

/* Checks a freshly mapped slab's superblock (docs/kv-slab.md): a client
 * refuses a layout it does not know. Returns 0 with the header table's place. */
static int ol_c_check_super(const char *m, size_t size, uint64_t *hdr_off, uint32_t *hdr_slots)
{
    struct ol_kv_super sb;
    if (size < sizeof sb)
        return -EPROTO;
    memcpy(&sb, m, sizeof sb);
    uint64_t slots = (uint64_t)sb.npages * OL_KV_SLOTS_PER_PAGE;
    if (sb.magic != OL_KV_SUPER_MAGIC || sb.version != OL_KV_SLAB_VERSION ||
        sb.hdr_size != OL_KV_HDR_SIZE || sb.size > size || sb.hdr_off > sb.size ||
        slots > UINT32_MAX || slots * OL_KV_HDR_SIZE > sb.size - sb.hdr_off)
        return -EPROTO;
    *hdr_off = sb.hdr_off;
    *hdr_slots = (uint32_t)slots;
    return 0;
}

/* Connects k and says HELLO for its shard. Maps the slab on first success. */
static int ol_c_hello(ol_client *c, struct ol_cconn *k, struct ol_kv_hello_resp *resp)
{
    int fd = ol_c_dial(c, &k->ux);
    if (fd < 0)
        return fd;
    k->fd = fd;
    k->in_len = 0;
    k->pending = false;
    k->deferred = 0;
    struct ol_kv_hello_req q = {
        .min_version = 1, .max_version = OL_KV_VERSION_MAX,
        .flags = OL_KV_HELLO_SHARD | (c->is_unix ? OL_KV_HELLO_WANTS_SHM : 0),
        .shard = k->shard, .value_size = c->value_size,
        .token = {(const uint8_t *)c->token, (uint32_t)c->token_len},
        .ns = {(const uint8_t *)c->ns, (uint32_t)c->ns_len},
    };
    struct ol_kv_enc e;
    int rc = ol_c_grow(&k->out, &k->out_cap, 4096);
    if (rc == 0 && (ol_kv_frame_begin(&e, k->out, k->out_cap, OL_KV_OP_HELLO, k->next_req++, 0, 0) < 0 ||
                    ol_kv_enc_hello_req(&e, &q) < 0))
        rc = -EINVAL;
    if (rc == 0)
        rc = ol_c_send(k, k->out, (size_t)ol_kv_frame_end(&e));
    struct ol_kv_hdr h;
    struct ol_kv_dec d;
    int slab_fd = -1;
    size_t used = 0;
    if (rc == 0)
        rc = ol_c_recv(k, &h, &d, &slab_fd, &used);
    if (rc == -EIO && k->in_len == 0)
        rc = -EBUSY; /* closed before any answer: the server shed it (too many
                        connections before HELLO, or stopping); say it again */
    if (rc == 0) {
        if (h.status == OL_KV_UNAUTHORIZED)
            rc = -EACCES;
        else if (h.status == OL_KV_BUSY) /* starting, or no session free; it closes */
            rc = -EBUSY;
        else if (h.status != OL_KV_OK || ol_kv_dec_hello_resp(&d, resp) < 0)
            rc = -EPROTO;
        ol_c_consume(k, used);
    }
    if (rc == 0) {
        k->max_items = resp->max_items;
        k->max_body = resp->max_body;
        k->max_data = resp->max_data_body;
        k->max_value = resp->max_value;
        k->version = resp->version;
    }
    if (rc == 0 && c->is_unix) {
        struct stat st;
        if (slab_fd < 0 || !(resp->flags & OL_KV_HELLO_SHM) || fstat(slab_fd, &st) < 0) {
            rc = -EPROTO;
        } else {
            pthread_mutex_lock(&c->slab_mu);
            if (!c->slab || st.st_ino != c->slab_ino) {
                /* First HELLO, or a restarted daemon with a new slab: map it.
                 * An old mapping stays until close (another thread may still
                 * be copying from it; its sessions are gone anyway). */
                void *m = mmap(NULL, resp->slab_size, PROT_READ | PROT_WRITE, MAP_SHARED, slab_fd, 0);
                /* Where shmem THP is "advise", pages this mapping faults in
                 * are 2 MiB only if it asks, like the daemon's (kv-slab.md,
                 * "Backing"); a no-op where THP is off. */
                if (m != MAP_FAILED)
                    madvise(m, resp->slab_size, MADV_HUGEPAGE);
                uint8_t *populated = NULL;
                uint64_t hdr_off = 0;
                uint32_t hdr_slots = 0;
                if (m == MAP_FAILED) {
                    rc = -errno;
                } else if ((rc = ol_c_check_super(m, resp->slab_size, &hdr_off, &hdr_slots)) < 0 ||
                           (c->slab && c->nretired == (int)(sizeof c->retired / sizeof c->retired[0])) ||
                           !(populated = calloc((resp->slab_size >> OL_C_POP_SHIFT) + 1, 1))) {
                    munmap(m, resp->slab_size);
                    rc = rc < 0 ? rc : populated ? -EMFILE : -ENOMEM;
                } else {
                    if (c->slab)
                        c->retired[c->nretired++] = (struct ol_cmap){c->slab, c->slab_size, c->slab_populated};
                    c->slab = m;
                    c->slab_size = resp->slab_size;
                    c->slab_populated = populated;
                    c->slab_ino = st.st_ino;
                    if (c->slab_fd >= 0)
                        close(c->slab_fd);
                    c->slab_fd = slab_fd; /* kept: ol_client_slab_usage */
                    slab_fd = -1;
                    c->slot_size = resp->slot_size;
                    c->hdr_off = hdr_off;
                    c->hdr_slots = hdr_slots;
                }
            }
            if (rc == 0) {
                k->map = c->slab;
                k->map_size = c->slab_size;
                k->populated = c->slab_populated;
                k->slot_size = c->slot_size;
                k->hdr_off = c->hdr_off;
                k->hdr_slots = c->hdr_slots;
            }
            pthread_mutex_unlock(&c->slab_mu);
        }
    }
    if (slab_fd >= 0)
        close(slab_fd);
    if (rc < 0) {
        ol_c_hangup(k);
        return rc;
    }
    k->backoff_ms = 0;
    return 0;
}

/*
 * ol_c_hello, again on a new connection while the server answers BUSY (the
 * daemon is starting, or the shard has no session free) or closes the
 * connection before answering it at all, after pauses of
 * 10 ms doubling to 200 ms, until deadline_ms (ol_c_now_ms). Returns what
 * the last try returned: -EBUSY when the deadline came first.
 */
static int ol_c_hello_retry(ol_client *c, struct ol_cconn *k, struct ol_kv_hello_resp *resp,
                            uint64_t deadline_ms)
{
    uint64_t pause = OL_C_BACKOFF_MIN;
    for (;;) {
        int rc = ol_c_hello(c, k, resp);
        uint64_t now = ol_c_now_ms();
        if (rc != -EBUSY || now >= deadline_ms)
            return rc;
        uint64_t ms = pause < deadline_ms - now ? pause : deadline_ms - now;
        struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
        pause = pause * 2 < OL_C_BUSY_MAX ? pause * 2 : OL_C_BUSY_MAX;
    }
}

/* Why ol_client_open could not say HELLO, for its message. */
static const char *ol_c_hello_error(int rc)
{
    return rc == -EACCES  ? "the server refused the token"
           : rc == -EBUSY ? "the server answered BUSY until the timeout (still starting?)"
                          : strerror(-rc);
}

/* Makes k usable: reconnects a broken one once its backoff has passed. */
static int ol_c_ready(ol_client *c, struct ol_cconn *k)
{
    if (k->fd >= 0)
        return 0;
    if (ol_c_now_ms() < k->retry_at_ms)
        return -EAGAIN;
    struct ol_kv_hello_resp r;
    int rc = ol_c_hello_retry(c, k, &r, ol_c_now_ms() + (uint64_t)c->timeout_ms);
    if (rc < 0) {
        ol_c_fail(k);
        return -EAGAIN;
    }
    return 0;
}

/* ---- open / close ---------------------------------------------------------- */

int ol_client_open(const struct ol_client_opts *o, ol_client **out, char *err, size_t errlen)
{
    if (!o || !o->addr || !o->ns || (!o->token && !o->token_file)) {
        snprintf(err, errlen, "addr, ns and token (or token_file) are required");
        return -EINVAL;
    }
    ol_client *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    int rc;
    c->slab_fd = -1;
    pthread_mutex_init(&c->slab_mu, NULL);
    snprintf(c->addr, sizeof c->addr, "%s", o->addr);
    c->is_ucx = strncmp(o->addr, OL_C_UCX_SCHEME, strlen(OL_C_UCX_SCHEME)) == 0;
    c->is_unix = !c->is_ucx && strchr(o->addr, '/') != NULL;
    c->ns_len = strlen(o->ns);
    if (c->ns_len < 1 || c->ns_len > OL_KV_MAX_NAMESPACE) {
        snprintf(err, errlen, "namespace must be 1..%u bytes", OL_KV_MAX_NAMESPACE);
        rc = -EINVAL;
        goto fail;
    }
    memcpy(c->ns, o->ns, c->ns_len);
    if (o->token) {
        c->token_len = strlen(o->token);
        if (c->token_len > OL_KV_MAX_TOKEN) {
            snprintf(err, errlen, "token longer than %u bytes", OL_KV_MAX_TOKEN);
            rc = -EINVAL;
            goto fail;
        }
        memcpy(c->token, o->token, c->token_len);
    } else {
        int fd = open(o->token_file, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, c->token, OL_KV_MAX_TOKEN) : -1;
        if (fd >= 0)
            close(fd);
        if (n < 0) {
            rc = -errno;
            snprintf(err, errlen, "cannot read token file %s: %s", o->token_file, strerror(errno));
            goto fail;
        }
        while (n > 0 && (c->token[n - 1] == '\n' || c->token[n - 1] == '\r'))
            n--;
        c->token_len = (size_t)n;
    }
    c->value_size = o->value_size;
    c->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 10000;
    c->seed = ol_kv_ns_seed(c->ns, c->ns_len);
    /* Shard 0 first: its answer says how many shards there are. */
    uint64_t deadline = ol_c_now_ms() + (uint64_t)c->timeout_ms;
    struct ol_cconn first = {.fd = -1, .shard = 0, .next_req = 1};
    struct ol_kv_hello_resp r;
    if ((rc = ol_c_hello_retry(c, &first, &r, deadline)) < 0) {
        if (rc == -EACCES) /* a bad token, or one of a tenant that does not claim ns */
            snprintf(err, errlen, "%s: the server refused the token for namespace \"%.*s\"",
                     c->addr, (int)c->ns_len, c->ns);
        else if (rc == -EOPNOTSUPP && c->is_ucx && ol_cux_unavailable())
            snprintf(err, errlen, "%s: %s", c->addr, ol_cux_unavailable());
        else
            snprintf(err, errlen, "%s: %s", c->addr, ol_c_hello_error(rc));
        free(first.out);
        free(first.in);
        goto fail;
    }
    c->nshards = r.shards ? r.shards : 1;
    c->conns = calloc(c->nshards, sizeof *c->conns);
    if (!c->conns) {
        ol_c_hangup(&first);
        free(first.out);
        free(first.in);
        rc = -ENOMEM;
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    c->conns[0] = first;
    for (uint32_t i = 0; i < c->nshards; i++) {
        struct ol_cconn *k = &c->conns[i];
        pthread_mutex_init(&k->mu, NULL);
        k->shard = i;
        if (i == 0)
            continue;
        k->fd = -1;
        k->next_req = 1;
        if ((rc = ol_c_hello_retry(c, k, &r, deadline)) < 0) {
            snprintf(err, errlen, "%s shard %u: %s", c->addr, i, ol_c_hello_error(rc));
            goto fail;
        }
    }
    *out = c;
    return 0;
fail:
    ol_client_close(c);
    return rc;
}

void ol_client_close(ol_client *c)
{
    if (!c)
        return;
    for (uint32_t i = 0; c->conns && i < c->nshards; i++) {
        /* a get's RELEASE still unanswered: wait for it (within the socket
         * timeout), so its pins are gone when close returns */
        ol_c_deferred_read(&c->conns[i]);
        ol_c_hangup(&c->conns[i]);
        free(c->conns[i].out);
        free(c->conns[i].in);
        free(c->conns[i].iov);
        pthread_mutex_destroy(&c->conns[i].mu);
    }
    free(c->conns);
    if (c->slab)
        munmap(c->slab, c->slab_size);
    free(c->slab_populated);
    if (c->slab_fd >= 0)
        close(c->slab_fd);
    for (int i = 0; i < c->nretired; i++) {
        munmap(c->retired[i].p, c->retired[i].n);
        free(c->retired[i].populated);
    }
    pthread_mutex_destroy(&c->slab_mu);
    free(c);
}

uint32_t ol_client_shards(const ol_client *c) { return c->nshards; }
bool ol_client_has_slab(const ol_client *c) { return c->slab != NULL; }

/* ---- batches ------------------------------------------------------------------ */

struct ol_batch {
    uint32_t n;
    uint32_t *order;    /* item indexes grouped by shard */
    uint32_t *start;    /* start[s] .. start[s+1]: shard s's part of order (s < nshards;
                           items of no shard sit past start[nshards]) */
};

/* Groups items 0..n-1 by shard sh[i] (counting sort); sh[i] == nshards
 * leaves item i out of every shard's part. */
static int ol_batch_group(ol_client *c, const uint32_t *sh, uint32_t n, struct ol_batch *b)
{
    b->n = n;
    b->order = malloc(((size_t)n + 1) * sizeof *b->order);
    b->start = calloc((size_t)c->nshards + 2, sizeof *b->start);
    uint32_t *fill = calloc((size_t)c->nshards + 1, sizeof *fill);
    if (!b->order || !b->start || !fill) {
        free(fill);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < n; i++)
        b->start[sh[i] + 1]++;
    for (uint32_t s = 0; s <= c->nshards; s++)
        b->start[s + 1] += b->start[s];
    for (uint32_t i = 0; i < n; i++)
        b->order[b->start[sh[i]] + fill[sh[i]]++] = i;
    free(fill);
    return 0;
}

/* Validates n keys and groups them by the shard each routes to. */
static int ol_batch_make(ol_client *c, const struct ol_client_key *keys, uint32_t n,
                         struct ol_batch *b)
{
    uint32_t *sh = malloc(((size_t)n + 1) * sizeof *sh);
    if (!sh)
        return -ENOMEM;
    int rc = 0;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        if (!keys[i].data || keys[i].len < 1 || keys[i].len > OL_KV_MAX_KEY) {
            rc = -EINVAL;
            break;
        }
        struct ol_kv_hash h = ol_kv_key_hash(c->seed, keys[i].data, keys[i].len);
        sh[i] = (uint32_t)(h.hi % c->nshards);
    }
    if (rc == 0)
        rc = ol_batch_group(c, sh, n, b);
    free(sh);
    return rc;
}

/* Groups n slot handles by shard; handles not in `state` belong to none. */
static int ol_batch_of_slots(ol_client *c, const struct ol_client_slot *slots, uint32_t n,
                             uint32_t state, struct ol_batch *b)
{
    uint32_t *sh = malloc(((size_t)n + 1) * sizeof *sh);
    if (!sh)
        return -ENOMEM;
    for (uint32_t i = 0; i < n; i++)
        sh[i] = slots[i].state == state && slots[i].shard < c->nshards ? slots[i].shard : c->nshards;
    int rc = ol_batch_group(c, sh, n, b);
    free(sh);
    return rc;
}

static void ol_batch_free(struct ol_batch *b)
{
    free(b->order);
    free(b->start);
}

static uint32_t ol_batch_len(const struct ol_batch *b, uint32_t s) { return b->start[s + 1] - b->start[s]; }

/* Locks every shard of b that has items (all shards when all), in order, and
 * makes their connections usable. */
static int ol_batch_lock(ol_client *c, const struct ol_batch *b, bool all)
{
    int rc = 0;
    for (uint32_t s = 0; s < c->nshards; s++) {
        if (!all && !ol_batch_len(b, s))
            continue;
        pthread_mutex_lock(&c->conns[s].mu);
        if (rc == 0)
            rc = ol_c_ready(c, &c->conns[s]);
    }
    return rc;
}

/* Unlocks what ol_batch_lock locked. A connection left with an unread
 * answer (the call failed half way) would desynchronise the next call, so
 * it is dropped; the server then releases its pins and reservations, and
 * the next call reconnects. Connections in step are kept, with their pins. */
static void ol_batch_unlock(ol_client *c, const struct ol_batch *b, bool all)
{
    for (uint32_t s = 0; s < c->nshards; s++)
        if (all || ol_batch_len(b, s)) {
            if (c->conns[s].fd >= 0 && c->conns[s].pending)
                ol_c_fail(&c->conns[s]);
            pthread_mutex_unlock(&c->conns[s].mu);
        }
}

/* Starts a frame on shard s's connection buffer, sized for `need` bytes. */
static int ol_c_begin(struct ol_cconn *k, struct ol_kv_enc *e, unsigned op, size_t need)
{
    if (ol_c_grow(&k->out, &k->out_cap, need + 4096) < 0)
        return -ENOMEM;
    return ol_kv_frame_begin(e, k->out, k->out_cap, op, k->next_req++, 0, 0) < 0 ? -EINVAL : 0;
}

static int ol_c_finish(struct ol_cconn *k, struct ol_kv_enc *e)
{
    long n = ol_kv_frame_end(e);
    if (n < 0)
        return -EINVAL;
    int rc = ol_c_send(k, k->out, (size_t)n);
    if (rc < 0)
        ol_c_fail(k);
    else
        k->pending = true;
    return rc;
}

/* Sends a key-list frame (op) for shard s's part of b. */
static int ol_c_send_keys(ol_client *c, const struct ol_batch *b, uint32_t s, unsigned op,
                          const struct ol_client_key *keys)
{
    struct ol_cconn *k = &c->conns[s];
    struct ol_kv_enc e;
    int rc = ol_c_begin(k, &e, op, (size_t)ol_batch_len(b, s) * (OL_KV_MAX_KEY + 16));
    for (uint32_t j = b->start[s]; rc == 0 && j < b->start[s + 1]; j++)
        if (ol_kv_enc_key(&e, keys[b->order[j]].data, keys[b->order[j]].len) < 0)
            rc = -EINVAL;
    if (rc == 0 && k->max_body && e.len > k->max_body)
        rc = -E2BIG; /* over the server's max_body: split the call */
    return rc ? rc : ol_c_finish(k, &e);
}

/* Receives shard s's answer to request req: 0 with h and d set (call
 * ol_c_consume after use). The caller sets k->pending again when more
 * answers are due. */
static int ol_c_answer_to(ol_client *c, uint32_t s, uint64_t req, struct ol_kv_hdr *h,
                          struct ol_kv_dec *d, size_t *used)
{
    struct ol_cconn *k = &c->conns[s];
    int rc = ol_c_deferred_read(k);
    if (rc == 0)
        rc = ol_c_recv(k, h, d, NULL, used);
    if (rc == 0 && h->req_id != req)
        rc = -EIO; /* answers come in request order: anything else is out of step */
    if (rc < 0) {
        ol_c_fail(k);
        return rc;
    }
    k->pending = false;
    if (h->status != OL_KV_OK) {
        ol_c_consume(k, *used);
        return -EPROTO;
    }
    return 0;
}

/* Receives the answer to the one request in flight on shard s's connection. */
static int ol_c_answer(ol_client *c, uint32_t s, struct ol_kv_hdr *h, struct ol_kv_dec *d,
                       size_t *used)
{
    return ol_c_answer_to(c, s, c->conns[s].next_req - 1, h, d, used);
}


/*
 * One round of a key-list request: sends op with each shard's keys of b to
 * every shard first, then reads the answers in shard order, handing each to
 * per_answer (which decodes shard s's items, b->order[b->start[s] + j] being
 * the key index of item j). Returns 0 or the first error.
 */
typedef int (*ol_c_answer_fn)(const struct ol_batch *b, uint32_t s, struct ol_kv_dec *d, void *arg);

/* Reads the answer of every shard that has keys in b, in shard order. */
static int ol_c_answers(ol_client *c, const struct ol_batch *b, ol_c_answer_fn per_answer, void *arg)
{
    int rc = 0;
    for (uint32_t s = 0; s < c->nshards && rc == 0; s++) {
        if (!ol_batch_len(b, s))
            continue;
        struct ol_kv_hdr h;
        struct ol_kv_dec d;
        size_t used;
        if ((rc = ol_c_answer(c, s, &h, &d, &used)) < 0)
            break;
        rc = per_answer(b, s, &d, arg);
        ol_c_consume(&c->conns[s], used);
        if (rc < 0)
            ol_c_fail(&c->conns[s]); /* an answer that does not fit its request */
    }
    return rc;
}

static int ol_c_keys_round(ol_client *c, const struct ol_batch *b, unsigned op,
                           const struct ol_client_key *keys, ol_c_answer_fn per_answer, void *arg)
{
    /* One frame per shard: each shard's share of the keys must fit the
     * server's max_items (HELLO); else -E2BIG before anything is sent. */
    for (uint32_t s = 0; s < c->nshards; s++)
        if (c->conns[s].max_items && ol_batch_len(b, s) > c->conns[s].max_items)
            return -E2BIG;
    int rc = 0;
    for (uint32_t s = 0; s < c->nshards && rc == 0; s++)
        if (ol_batch_len(b, s))
            rc = ol_c_send_keys(c, b, s, op, keys);
    return rc ? rc : ol_c_answers(c, b, per_answer, arg);
}

static int ol_c_dec_lookup(const struct ol_batch *b, uint32_t s, struct ol_kv_dec *d, void *arg)
{
    uint8_t *present = arg;
    struct ol_kv_lookup_res lr;
    if (ol_kv_dec_lookup_res(d, &lr) < 0 || lr.count != ol_batch_len(b, s))
        return -EPROTO;
    for (uint32_t j = 0; j < lr.count; j++)
        present[b->order[b->start[s] + j]] = ol_kv_lookup_hit(&lr, j);
    return 0;
}

static int ol_c_dec_statuses(const struct ol_batch *b, uint32_t s, struct ol_kv_dec *d, void *arg)
{
    uint16_t *status = arg, st;
    for (uint32_t j = b->start[s]; j < b->start[s + 1]; j++) {
        if (ol_kv_dec_status(d, &st) != 1)
            return -EPROTO;
        status[b->order[j]] = st;
    }
    return 0;
}

/* ---- calls ---------------------------------------------------------------------- */

/* Locks the shards of a batch just made (rc: what making it returned). On
 * failure nothing is held and b is freed; otherwise end with ol_c_call_end. */
static int ol_c_call_begin(ol_client *c, struct ol_batch *b, int rc)
{
    if (rc == 0 && (rc = ol_batch_lock(c, b, false)) < 0)
        ol_batch_unlock(c, b, false);
    if (rc < 0)
        ol_batch_free(b);
    return rc;
}

static int ol_c_call_end(ol_client *c, struct ol_batch *b, int rc)
{
    ol_batch_unlock(c, b, false);
    ol_batch_free(b);
    return rc;
}

/* ---- slot handles ----------------------------------------------------------------- */

/*
 * Fills the page tables of this process's mapping for the 2 MiB pieces of
 * [offset, offset + size) the first time a slot there is handed out, with
 * one MADV_POPULATE_READ (Linux 5.14; older kernels refuse it and the copy
 * faults the pages in as before). The slab is shmem, which needs no write
 * notification, so the pages are mapped writable too. Without it the first
 * copy into or out of each 4 KiB page of a fresh client's mapping takes a
 * page fault: on the benchmark machine about 1.1 us per page, 0.29 s per
 * GiB, a first pass at ~3.5 GB/s; populated per 2 MiB, 0.08 s per GiB.
 * Memory: the piece's shmem pages that are not there yet are allocated
 * (the daemon's slab, within its configured size, filled a little ahead of
 * the slots that use it), plus the page tables a copy would have made
 * anyway (4 KiB per 2 MiB). Concurrent callers may both populate a piece:
 * harmless.
 */
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
static void ol_c_populate_map(char *map, size_t map_size, uint8_t *populated,
                              uint64_t offset, uint64_t size)
{
    if (!size)
        return;
    uint64_t first = offset >> OL_C_POP_SHIFT, last = (offset + size - 1) >> OL_C_POP_SHIFT;
    while (first <= last && __atomic_load_n(&populated[first], __ATOMIC_RELAXED))
        first++;
    while (last >= first && last > 0 && __atomic_load_n(&populated[last], __ATOMIC_RELAXED))
        last--;
    if (first > last)
        return;
    uint64_t from = first << OL_C_POP_SHIFT, to = (last + 1) << OL_C_POP_SHIFT;
    madvise(map + from, (to < map_size ? to : map_size) - from, MADV_POPULATE_READ);
    for (uint64_t p = first; p <= last; p++)
        __atomic_store_n(&populated[p], 1, __ATOMIC_RELAXED);
}

static void ol_c_populate(const struct ol_cconn *k, uint64_t offset, uint64_t size)
{
    ol_c_populate_map(k->map, k->map_size, k->populated, offset, size);
}

/* Fills sl for a slot granted on connection k with `size` usable bytes (a
 * reservation: the session's slot size; a pin: the value's length, as the
 * entry may sit in a slot of another size class). The server's slot id and
 * range are checked against k's mapping: -EPROTO when outside it. */
static int ol_c_slot_set(const struct ol_cconn *k, struct ol_client_slot *sl, uint32_t slot,
                         uint64_t gen, uint64_t offset, uint64_t size, uint32_t state)
{
    if (slot >= k->hdr_slots || offset > k->map_size || size > k->map_size - offset)
        return -EPROTO;
    ol_c_populate(k, offset, size);
    *sl = (struct ol_client_slot){
        .data = k->map + offset, .capacity = size, .gen = gen, .slot = slot,
        .shard = k->shard, .state = state, ._epoch = ol_c_epoch(k),
        ._hdr = k->map + k->hdr_off + (uint64_t)slot * OL_KV_HDR_SIZE,
    };
    return 0;
}

/* The handle holds nothing any more (len and checksum stay readable). */
static void ol_c_slot_done(struct ol_client_slot *sl)
{
    sl->data = NULL;
    sl->state = OL_CLIENT_SLOT_NONE;
    sl->_flags = 0;
}

/* The slot header of a pinned slot agrees with the server's answer and, when
 * given, with the key (the header is stable while the slot is pinned). */
static bool ol_c_hdr_ok(const ol_client *c, const struct ol_client_slot *sl,
                        const struct ol_client_key *key)
{
    struct ol_kv_slot_hdr h;
    memcpy(&h, sl->_hdr, sizeof h);
    return ol_kv_slab_hdr_check(&h) == 0 && h.gen == sl->gen && (h.flags & OL_KV_SLOT_COMMITTED) &&
           h.value_len == sl->len && h.value_sum == sl->checksum && h.ns == (uint32_t)c->seed &&
           (!key || (h.key_len == key->len && memcmp(h.key, key->data, key->len) == 0));
}

/* What the RESERVE and ACQUIRE answer decoders fill. */
struct ol_c_slots_out {
    ol_client *c;
    const struct ol_client_key *keys;
    struct ol_client_slot *slots;
    uint16_t *status;
    uint64_t size;  /* RESERVE: bytes asked for, 0 = the slot */
};

static int ol_c_dec_reserve(const struct ol_batch *b, uint32_t s, struct ol_kv_dec *d, void *arg)
{
    struct ol_c_slots_out *o = arg;
    struct ol_kv_reserve_res r;
    for (uint32_t j = b->start[s]; j < b->start[s + 1]; j++) {
        uint32_t i = b->order[j];
        if (ol_kv_dec_reserve_res(d, &r) != 1)
            return -EPROTO;
        o->status[i] = r.status;
        if (r.status != OL_KV_OK)
            continue;
        if (ol_c_slot_set(&o->c->conns[s], &o->slots[i], r.slot, r.gen, r.offset,
                          o->c->conns[s].slot_size, OL_CLIENT_SLOT_RESERVED) < 0)
            return -EPROTO;
        o->slots[i].len = o->size ? o->size : o->slots[i].capacity;
    }
    return 0;
}

static int ol_c_dec_acquire(const struct ol_batch *b, uint32_t s, struct ol_kv_dec *d, void *arg)
{
    struct ol_c_slots_out *o = arg;
    struct ol_kv_acquire_res r;
    for (uint32_t j = b->start[s]; j < b->start[s + 1]; j++) {
        uint32_t i = b->order[j];
        struct ol_client_slot *sl = &o->slots[i];
        if (ol_kv_dec_acquire_res(d, &r) != 1)
            return -EPROTO;
        o->status[i] = r.status;
        if (r.status != OL_KV_OK)
            continue;
        if (ol_c_slot_set(&o->c->conns[s], sl, r.slot, r.gen, r.offset, r.value_len,
                          OL_CLIENT_SLOT_PINNED) < 0)
            return -EPROTO;
        sl->len = r.value_len;
        sl->checksum = r.checksum;
        if (!ol_c_hdr_ok(o->c, sl, &o->keys[i])) {
            o->status[i] = OL_KV_CHECKSUM_MISMATCH; /* never hand out a slot that is not the key's */
            sl->_flags |= OL_C_BAD;
        }
    }
    return 0;
}

/*
 * One round of a slot-handle request (COMMIT, ABORT or RELEASE) over b's
 * shards, for the handles of slots in the state op works on (and, with
 * only_flag, having that flag). A handle whose connection was lost since it
 * was granted, or that sits on a connection out of step, is not sent: it is
 * finished with STALE_GENERATION. COMMIT sends lens[i] (NULL: slots[i].len)
 * bytes with checksum sums[i]; a length over the capacity is answered
 * TOO_LARGE here and the handle stays RESERVED. Answered handles are
 * finished, except a COMMIT answered TOO_LARGE. status[i] (status may be
 * NULL) is written for every handle considered; others keep theirs.
 * Returns 0 or the first error (unanswered handles then keep their state).
 */
static int ol_c_slots_round(ol_client *c, const struct ol_batch *b, unsigned op,
                            struct ol_client_slot *slots, const uint64_t *lens, const uint64_t *sums,
                            uint32_t only_flag, uint16_t *status)
{
    uint32_t want = op == OL_KV_OP_RELEASE ? OL_CLIENT_SLOT_PINNED : OL_CLIENT_SLOT_RESERVED;
    size_t item = op == OL_KV_OP_COMMIT ? 32 : 16;
    int rc = 0;
    for (uint32_t s = 0; s < c->nshards && rc == 0; s++) {
        struct ol_cconn *k = &c->conns[s];
        struct ol_kv_enc e;
        uint32_t items = 0;
        if (!ol_batch_len(b, s) || (rc = ol_c_begin(k, &e, op, (size_t)ol_batch_len(b, s) * item)) < 0)
            continue;
        for (uint32_t j = b->start[s]; j < b->start[s + 1]; j++) {
            uint32_t i = b->order[j];
            struct ol_client_slot *sl = &slots[i];
            if (sl->state != want || (only_flag && !(sl->_flags & only_flag)))
                continue;
            uint16_t st = OL_KV_OK;
            uint64_t len = lens ? lens[i] : sl->len;
            if (k->fd < 0 || k->pending || sl->_epoch != ol_c_epoch(k)) {
                st = OL_KV_STALE_GENERATION;
                ol_c_slot_done(sl);
            } else if (op == OL_KV_OP_COMMIT && len > sl->capacity) {
                st = OL_KV_TOO_LARGE_ST;
            } else if (op == OL_KV_OP_COMMIT) {
                ol_kv_enc_commit(&e, &(struct ol_kv_commit_item){sl->slot, sl->gen, len, sums[i]});
                sl->len = len;
                sl->checksum = sums[i];
            } else {
                ol_kv_enc_slot_ref(&e, sl->slot, sl->gen);
            }
            if (st == OL_KV_OK) {
                sl->_flags |= OL_C_SENT;
                items++;
            } else if (status) {
                status[i] = st;
            }
        }
        if (items)
            rc = ol_c_finish(k, &e);
    }
    for (uint32_t s = 0; s < c->nshards && rc == 0; s++) {
        struct ol_cconn *k = &c->conns[s];
        bool sent = false;
        for (uint32_t j = b->start[s]; j < b->start[s + 1] && !sent; j++)
            sent = slots[b->order[j]]._flags & OL_C_SENT;
        if (!sent)
            continue;
        struct ol_kv_hdr h;
        struct ol_kv_dec d;
        size_t used;
        if ((rc = ol_c_answer(c, s, &h, &d, &used)) < 0)
            break;
        for (uint32_t j = b->start[s]; j < b->start[s + 1] && rc == 0; j++) {
            struct ol_client_slot *sl = &slots[b->order[j]];
            uint16_t st;
            if (!(sl->_flags & OL_C_SENT))
                continue;
            if (ol_kv_dec_status(&d, &st) != 1) {
                rc = -EPROTO;
                ol_c_fail(k);
                break;
            }
            if (status)
                status[b->order[j]] = st;
            sl->_flags &= ~OL_C_SENT;
            if (!(op == OL_KV_OP_COMMIT && st == OL_KV_TOO_LARGE_ST))
                ol_c_slot_done(sl);
        }
        ol_c_consume(k, used);
    }
    for (uint32_t i = 0; i < b->n; i++)
        slots[i]._flags &= ~OL_C_SENT;
    return rc;
}

/* RESERVE for b's keys into slots (zeroed first). */
static int ol_c_reserve_locked(ol_client *c, const struct ol_batch *b, const struct ol_client_key *keys,
                               uint64_t size, struct ol_client_slot *slots, uint16_t *status)
{
    memset(slots, 0, (size_t)b->n * sizeof *slots);
    struct ol_c_slots_out o = {c, keys, slots, status, size};
    return ol_c_keys_round(c, b, OL_KV_OP_RESERVE, keys, ol_c_dec_reserve, &o);
}

/* ACQUIRE for b's keys into slots (zeroed first); pins whose slot header
 * fails the check are released again (status CHECKSUM_MISMATCH). */
static int ol_c_acquire_locked(ol_client *c, const struct ol_batch *b, const struct ol_client_key *keys,
                               struct ol_client_slot *slots, uint16_t *status)
{
    memset(slots, 0, (size_t)b->n * sizeof *slots);
    struct ol_c_slots_out o = {c, keys, slots, status, 0};
    int rc = ol_c_keys_round(c, b, OL_KV_OP_ACQUIRE, keys, ol_c_dec_acquire, &o);
    for (uint32_t i = 0; i < b->n; i++) {
        if (slots[i]._flags & OL_C_BAD)
            return rc ? rc : ol_c_slots_round(c, b, OL_KV_OP_RELEASE, slots, NULL, NULL, OL_C_BAD, NULL);
    }
    return rc;
}

/* After a reserve or acquire failed: gives back what it got, on the
 * connections still in step (the others are dropped, which does the same),
 * and leaves every handle NONE. */
static void ol_c_slots_undo(ol_client *c, const struct ol_batch *b, unsigned op,
                            struct ol_client_slot *slots)
{
    ol_c_slots_round(c, b, op, slots, NULL, NULL, 0, NULL);
    memset(slots, 0, (size_t)b->n * sizeof *slots);
}

int ol_client_reserve(ol_client *c, const struct ol_client_key *keys, uint32_t n, uint64_t size,
                      struct ol_client_slot *slots, uint16_t *status)
{
    if (!c->slab)
        return -EOPNOTSUPP; /* TCP: no shared slab to hand out; values go inline (put) */
    pthread_mutex_lock(&c->slab_mu);
    uint64_t cap = c->slot_size;
    pthread_mutex_unlock(&c->slab_mu);
    struct ol_batch b = {0};
    int rc = ol_c_call_begin(c, &b, ol_batch_make(c, keys, n, &b));
    if (rc < 0)
        return rc;
    if (size > cap) {
        memset(slots, 0, (size_t)n * sizeof *slots);
        for (uint32_t i = 0; i < n; i++)
            status[i] = OL_KV_TOO_LARGE_ST;
    } else if ((rc = ol_c_reserve_locked(c, &b, keys, size, slots, status)) < 0) {
        ol_c_slots_undo(c, &b, OL_KV_OP_ABORT, slots);
    }
    return ol_c_call_end(c, &b, rc);
}

int ol_client_acquire(ol_client *c, const struct ol_client_key *keys, uint32_t n,
                      struct ol_client_slot *slots, uint16_t *status)
{
    if (!c->slab)
        return -EOPNOTSUPP; /* TCP: no shared slab to read in place; use get */
    struct ol_batch b = {0};
    int rc = ol_c_call_begin(c, &b, ol_batch_make(c, keys, n, &b));
    if (rc < 0)
        return rc;
    if ((rc = ol_c_acquire_locked(c, &b, keys, slots, status)) < 0)
        ol_c_slots_undo(c, &b, OL_KV_OP_RELEASE, slots);
    return ol_c_call_end(c, &b, rc);
}

/* COMMIT, ABORT or RELEASE of caller handles: every handle not in the state
 * op works on, or stale, answers STALE_GENERATION without a round trip. */
static int ol_c_slots_call(ol_client *c, unsigned op, struct ol_client_slot *slots,
                           const uint64_t *lens, const uint64_t *sums, uint32_t n, uint16_t *status)
{
    if (!c->slab)
        return -EOPNOTSUPP; /* TCP sessions have no slots */
    uint32_t want = op == OL_KV_OP_RELEASE ? OL_CLIENT_SLOT_PINNED : OL_CLIENT_SLOT_RESERVED;
    for (uint32_t i = 0; i < n; i++) {
        if (status)
            status[i] = OL_KV_STALE_GENERATION;
        /* once stale, always stale (epochs only grow): finish it without
         * locking a shard that may be reconnecting */
        if (slots[i].state == want &&
            (slots[i].shard >= c->nshards || slots[i]._epoch != ol_c_epoch(&c->conns[slots[i].shard])))
            ol_c_slot_done(&slots[i]);
    }
    struct ol_batch b = {0};
    int rc = ol_c_call_begin(c, &b, ol_batch_of_slots(c, slots, n, want, &b));
    if (rc < 0)
        return rc;
    rc = ol_c_slots_round(c, &b, op, slots, lens, sums, 0, status);
    return ol_c_call_end(c, &b, rc);
}

int ol_client_commit(ol_client *c, struct ol_client_slot *slots, const uint64_t *lens, uint32_t n,
                     uint16_t *status)
{
    /* hash before taking any lock: other threads keep using the shards */
    uint64_t *sums = calloc((size_t)n + 1, sizeof *sums);
    if (!sums)
        return -ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t len = lens ? lens[i] : slots[i].len;
        if (slots[i].state == OL_CLIENT_SLOT_RESERVED && len <= slots[i].capacity)
            sums[i] = ol_kv_value_hash(slots[i].data, len);
    }
    int rc = ol_c_slots_call(c, OL_KV_OP_COMMIT, slots, lens, sums, n, status);
    free(sums);
    return rc;
}

int ol_client_abort(ol_client *c, struct ol_client_slot *slots, uint32_t n, uint16_t *status)
{
    return ol_c_slots_call(c, OL_KV_OP_ABORT, slots, NULL, NULL, n, status);
}

int ol_client_release(ol_client *c, struct ol_client_slot *slots, uint32_t n, uint16_t *status)
{
    return ol_c_slots_call(c, OL_KV_OP_RELEASE, slots, NULL, NULL, n, status);
}

int ol_client_slot_verify(ol_client *c, const struct ol_client_slot *slot)
{
    if (slot->state != OL_CLIENT_SLOT_PINNED || slot->shard >= c->nshards)
        return -EINVAL;
    if (slot->_epoch != ol_c_epoch(&c->conns[slot->shard]))
        return -ESTALE;
    if (!ol_c_hdr_ok(c, slot, NULL) ||
        (slot->checksum && ol_kv_value_hash(slot->data, slot->len) != slot->checksum))
        return -EBADMSG;
    return 0;
}

/* ---- operations --------------------------------------------------------------- */

int ol_client_lookup(ol_client *c, const struct ol_client_key *keys, uint32_t n,
                     uint8_t *present, uint32_t *leading)
{
    struct ol_batch b = {0};
    int rc = ol_c_call_begin(c, &b, ol_batch_make(c, keys, n, &b));
    if (rc < 0)
        return rc;
    rc = ol_c_call_end(c, &b, ol_c_keys_round(c, &b, OL_KV_OP_LOOKUP, keys, ol_c_dec_lookup, present));
    if (rc == 0) {
        uint32_t run = 0;
        while (run < n && present[run])
            run++;
        *leading = run;
    }
    return rc;
}

int ol_client_delete(ol_client *c, const struct ol_client_key *keys, uint32_t n, uint16_t *status)
{
    struct ol_batch b = {0};
    int rc = ol_c_call_begin(c, &b, ol_batch_make(c, keys, n, &b));
    if (rc < 0)
        return rc;
    return ol_c_call_end(c, &b, ol_c_keys_round(c, &b, OL_KV_OP_DELETE, keys, ol_c_dec_statuses, status));
}

/* Slab path: RESERVE, copy each value in while hashing it, COMMIT; ABORT
 * the reservations that were not committed (a value larger than its slot). */
static int ol_c_put_slab(ol_client *c, const struct ol_batch *b, const struct ol_client_key *keys,
                         const void *const *values, const uint64_t *lens, uint16_t *status)
{
    struct ol_client_slot *sl = calloc((size_t)b->n + 1, sizeof *sl);
    uint64_t *sums = calloc((size_t)b->n + 1, sizeof *sums);
    int rc = sl && sums ? ol_c_reserve_locked(c, b, keys, 0, sl, status) : -ENOMEM;
    for (uint32_t i = 0; i < b->n && rc == 0; i++)
        if (sl[i].state == OL_CLIENT_SLOT_RESERVED && lens[i] <= sl[i].capacity)
            sums[i] = ol_kv_copy_hash(sl[i].data, values[i], lens[i]);
    if (rc == 0)
        rc = ol_c_slots_round(c, b, OL_KV_OP_COMMIT, sl, lens, sums, 0, status);
    if (sl)
        ol_c_slots_round(c, b, OL_KV_OP_ABORT, sl, NULL, NULL, 0, NULL);
    free(sums);
    free(sl);
    return rc;
}

/* Copies a value (checksum: its xxh3-64, 0 = none) into a caller buffer of
 * cap bytes, checking it on the way: *status becomes TOO_LARGE or
 * CHECKSUM_MISMATCH (with *len 0), or stays, with *len set. */
static void ol_c_copy_out(void *buf, uint64_t cap, const void *src, uint64_t len, uint64_t checksum,
                          uint16_t *status, uint64_t *out_len)
{
    *out_len = 0;
    if (len > cap) {
        *status = OL_KV_TOO_LARGE_ST;
        return;
    }
    uint64_t sum = ol_kv_copy_hash(buf, src, len);
    if (checksum && sum != checksum)
        *status = OL_KV_CHECKSUM_MISMATCH; /* never hand out bytes that fail it */
    else
        *out_len = len;
}

/*
 * A get's RELEASE, sent without waiting for its answer: the connection stays
 * in step (not pending) with k->deferred set, and the answer is read (and
 * checked) by ol_c_answer_to before the next answer on that connection, so
 * it overlaps the next call's request instead of costing a round trip of
 * its own. The server handles frames in order, so the pins are gone before
 * it reads anything the client sends next. A send that fails drops the
 * connection (and the pins with it), as a failed RELEASE round would.
 */
static void ol_c_release_nowait(ol_client *c, const struct ol_batch *b, struct ol_client_slot *sl)
{
    for (uint32_t s = 0; s < c->nshards; s++) {
        struct ol_cconn *k = &c->conns[s];
        uint32_t items = 0;
        for (uint32_t j = b->start[s]; j < b->start[s + 1]; j++)
            items += sl[b->order[j]].state == OL_CLIENT_SLOT_PINNED;
        if (!items || k->fd < 0 || k->pending || (k->deferred && ol_c_deferred_read(k) < 0)) {
            if (items && k->fd >= 0)
                ol_c_fail(k); /* out of step: the pins go with the connection */
            continue;
        }
        struct ol_kv_enc e;
        if (ol_c_begin(k, &e, OL_KV_OP_RELEASE, (size_t)items * 16) < 0) {
            ol_c_fail(k);
            continue;
        }
        for (uint32_t j = b->start[s]; j < b->start[s + 1]; j++) {
            struct ol_client_slot *h = &sl[b->order[j]];
            if (h->state == OL_CLIENT_SLOT_PINNED)
                ol_kv_enc_slot_ref(&e, h->slot, h->gen);
            ol_c_slot_done(h);
        }
        if (ol_c_finish(k, &e) == 0) {
            k->pending = false;
            k->deferred = items;
            k->deferred_req = k->next_req - 1;
        }
    }
}

/* Slab path: ACQUIRE (slot headers checked), copy out and check, RELEASE
 * (not waited for: ol_c_release_nowait). */
static int ol_c_get_slab(ol_client *c, const struct ol_batch *b, const struct ol_client_key *keys,
                         void *const *bufs, const uint64_t *caps, uint64_t *lens, uint16_t *status)
{
    struct ol_client_slot *sl = calloc((size_t)b->n + 1, sizeof *sl);
    if (!sl)
        return -ENOMEM;
    int rc = ol_c_acquire_locked(c, b, keys, sl, status);
    for (uint32_t i = 0; i < b->n && rc == 0; i++) {
        lens[i] = 0;
        if (sl[i].state == OL_CLIENT_SLOT_PINNED)
            ol_c_copy_out(bufs[i], caps[i], sl[i].data, sl[i].len, sl[i].checksum, &status[i], &lens[i]);
    }
    /* unpin; on a connection left out of step by a failure the pins go
     * with the connection (ol_batch_unlock drops it) */
    if (rc == 0)
        ol_c_release_nowait(c, b, sl);
    else
        ol_c_slots_round(c, b, OL_KV_OP_RELEASE, sl, NULL, NULL, 0, NULL);
    free(sl);
    return rc;
}

/* ---- TCP: values inline in PUT and GET frames ------------------------------------- */

/*
 * Over TCP a put or get is a pipeline on each shard's connection. The
 * shard's items are cut into frames that fit the server's limits from its
 * HELLO answer (max_items; max_data_body for a PUT request's body and for
 * the values of a GET answer; max_body for a GET request's keys), aiming at
 * OL_C_DATA_FRAME value bytes per frame, and up to OL_C_WINDOW frames are in
 * flight per connection, so the client hashes and sends frame i+1 while the
 * server stores or reads frame i. Answers are read oldest first, shard after
 * shard, each followed by the next frame of its shard.
 *
 * PUT: an item that fits no frame (its value over max_value, or the item
 * over max_data_body) is answered TOO_LARGE without being sent. Values of
 * OL_C_BY_REF bytes or more are not copied into the frame buffer: the frame
 * goes out with sendmsg and an iovec pointing at the caller's bytes.
 *
 * GET: an answer's size is known only to the server, so frames are sized
 * from what the caller expects per value: min(cap, value_size) (cap alone
 * when the session's value_size is 0). The server answers TOO_LARGE for an
 * item whose value would take the answer past max_data_body; such an item
 * is asked again in a follow-up round, unless it was the first of its frame
 * (its value alone is over the limit: TOO_LARGE is final). Every frame's
 * first item is final, so the rounds end.
 */
#define OL_C_DATA_FRAME (4u << 20)
#define OL_C_WINDOW     8
#define OL_C_BY_REF     (64u << 10)

/* ol_c_data.flag[i] */
#define OL_C_FRAMED 1u /* in a frame sent this round: its answer has a result for it */
#define OL_C_AGAIN  2u /* GET: answered TOO_LARGE behind other items; ask again */

struct ol_c_lane {                  /* one connection's part of a round */
    uint32_t next, end;             /* x->items[next..end): not framed yet */
    uint32_t head, n;               /* frames in flight, oldest first: fr[head], ... (a ring) */
    struct {
        uint32_t from, to;          /* x->items[from..to) */
        uint64_t req;
    } fr[OL_C_WINDOW];
};

struct ol_c_data {
    ol_client *c;
    unsigned op;                    /* OL_KV_OP_PUT or OL_KV_OP_GET */
    const struct ol_client_key *keys;
    const void *const *values;      /* PUT */
    const uint64_t *vlens;          /* PUT */
    void *const *bufs;              /* GET */
    const uint64_t *caps;           /* GET */
    uint64_t *lens;                 /* GET */
    uint16_t *status;
    uint32_t *items;                /* item indexes of the round, grouped by shard */
    uint8_t *flag;                  /* per item */
};

/* Sends n iovecs (advanced in place on short writes), at most 1024 per
 * call; over UCX all at once. */
static int ol_c_sendv(struct ol_cconn *k, struct iovec *iov, size_t n)
{
    if (k->ux)
        return n > INT_MAX ? -E2BIG : ol_c_ux_rc(ol_cux_sendv(k->ux, iov, (int)n));
    while (n) {
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = n < 1024 ? n : 1024};
        ssize_t w = sendmsg(k->fd, &m, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 && errno == EAGAIN ? -ETIMEDOUT : -EIO;
        while (n && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

/* Picks the items of lane ln's next frame, from x->items[ln->next] on, and
 * moves ln->next past them. PUT items that fit no frame are finished here
 * (TOO_LARGE) and not flagged. Returns the number of items flagged
 * OL_C_FRAMED and in *body the request body's size (values included). */
static uint32_t ol_c_data_pick(struct ol_c_data *x, const struct ol_cconn *k, struct ol_c_lane *ln,
                               size_t *body)
{
    bool put = x->op == OL_KV_OP_PUT;
    uint64_t body_max = put ? k->max_data : k->max_body;
    uint64_t target = k->max_data < OL_C_DATA_FRAME ? k->max_data : OL_C_DATA_FRAME;
    uint64_t req = 0, data = 0;
    uint32_t count = 0, j = ln->next;
    for (; j < ln->end; j++) {
        uint32_t i = x->items[j];
        uint64_t item = ol_kv_align8(2 + (uint64_t)x->keys[i].len), vals;
        if (put) {
            item += 16 + ol_kv_align8(x->vlens[i]);
            vals = item;
            if (x->vlens[i] > k->max_value || item > body_max) {
                x->status[i] = OL_KV_TOO_LARGE_ST; /* no frame can carry it */
                continue;
            }
        } else {
            uint64_t want = x->caps[i];
            if (x->c->value_size && x->c->value_size < want)
                want = x->c->value_size;
            vals = 24 + ol_kv_align8(want);
        }
        if (count && (count >= k->max_items || req + item > body_max || data + vals > target))
            break;
        req += item;
        data += vals;
        count++;
        x->flag[i] = OL_C_FRAMED;
    }
    ln->next = j;
    *body = (size_t)req;
    return count;
}

/* Frames and sends lane ln's next items on shard s's connection. */
static int ol_c_data_send(struct ol_c_data *x, uint32_t s, struct ol_c_lane *ln)
{
    struct ol_cconn *k = &x->c->conns[s];
    uint32_t from = ln->next;
    size_t body;
    uint32_t count = ol_c_data_pick(x, k, ln, &body);
    if (!count)
        return 0;
    if (x->op == OL_KV_OP_PUT && k->iov_cap < 2 * (size_t)count + 1) {
        struct iovec *v = realloc(k->iov, (2 * (size_t)count + 1) * sizeof *v);
        if (!v)
            return -ENOMEM;
        k->iov = v;
        k->iov_cap = 2 * (size_t)count + 1;
    }
    struct ol_kv_enc e;
    int rc = ol_c_begin(k, &e, x->op, body);
    if (rc < 0)
        return rc;
    size_t niov = 0;
    const uint8_t *seg = k->out; /* start of the frame bytes not yet in k->iov */
    for (uint32_t j = from; j < ln->next; j++) {
        uint32_t i = x->items[j];
        if (!(x->flag[i] & OL_C_FRAMED))
            continue;
        if (x->op == OL_KV_OP_GET) {
            if (ol_kv_enc_key(&e, x->keys[i].data, x->keys[i].len) < 0)
                return -EINVAL;
            continue;
        }
        /* a large value stays where it is: the frame leaves room for it
         * (untouched) and the iovec points at the caller's bytes instead */
        bool by_ref = x->vlens[i] >= OL_C_BY_REF;
        void *at;
        if (ol_kv_enc_put(&e, x->keys[i].data, x->keys[i].len, by_ref ? NULL : x->values[i],
                          x->vlens[i], ol_kv_value_hash(x->values[i], x->vlens[i]), &at) < 0)
            return -EINVAL;
        if (by_ref) {
            k->iov[niov++] = (struct iovec){(void *)seg, (size_t)((const uint8_t *)at - seg)};
            k->iov[niov++] = (struct iovec){(void *)x->values[i], x->vlens[i]};
            seg = (const uint8_t *)at + x->vlens[i];
        }
    }
    long n = ol_kv_frame_end(&e);
    if (n < 0)
        return -EINVAL;
    struct iovec one;
    struct iovec *iov = niov ? k->iov : &one;
    iov[niov++] = (struct iovec){(void *)seg, (size_t)(k->out + n - seg)};
    if ((rc = ol_c_sendv(k, iov, niov)) < 0) {
        ol_c_fail(k);
        return rc;
    }
    k->pending = true;
    uint32_t f = (ln->head + ln->n) % OL_C_WINDOW;
    ln->fr[f].from = from;
    ln->fr[f].to = ln->next;
    ln->fr[f].req = k->next_req - 1;
    ln->n++;
    return 0;
}

/* Reads the answer to lane ln's oldest frame on shard s's connection. */
static int ol_c_data_answer(struct ol_c_data *x, uint32_t s, struct ol_c_lane *ln)
{
    struct ol_cconn *k = &x->c->conns[s];
    uint32_t from = ln->fr[ln->head].from, to = ln->fr[ln->head].to;
    uint64_t req = ln->fr[ln->head].req;
    ln->head = (ln->head + 1) % OL_C_WINDOW;
    ln->n--;
    struct ol_kv_hdr h;
    struct ol_kv_dec d;
    size_t used;
    int rc = ol_c_answer_to(x->c, s, req, &h, &d, &used);
    if (k->fd >= 0 && ln->n)
        k->pending = true; /* later frames' answers are still due */
    if (rc < 0)
        return rc;
    bool first = true;
    for (uint32_t j = from; j < to && rc == 0; j++) {
        uint32_t i = x->items[j];
        if (!(x->flag[i] & OL_C_FRAMED))
            continue;
        if (x->op == OL_KV_OP_PUT) {
            if (ol_kv_dec_status(&d, &x->status[i]) != 1)
                rc = -EPROTO;
        } else {
            struct ol_kv_get_res g;
            if (ol_kv_dec_get_res(&d, &g) != 1) {
                rc = -EPROTO;
                break;
            }
            x->status[i] = g.status;
            if (g.status == OL_KV_OK)
                ol_c_copy_out(x->bufs[i], x->caps[i], g.value, g.value_len, g.checksum,
                              &x->status[i], &x->lens[i]);
            else if (g.status == OL_KV_TOO_LARGE_ST && !first)
                x->flag[i] |= OL_C_AGAIN; /* the answer was full: ask again */
        }
        first = false;
    }
    ol_c_consume(k, used);
    if (rc < 0)
        ol_c_fail(k); /* an answer that does not fit its request */
    return rc;
}

/* One round over b's items (again: only those flagged OL_C_AGAIN). */
static int ol_c_data_round(struct ol_c_data *x, const struct ol_batch *b, bool again)
{
    ol_client *c = x->c;
    struct ol_c_lane *ln = calloc(c->nshards, sizeof *ln);
    if (!ln)
        return -ENOMEM;
    uint32_t pos = 0;
    for (uint32_t s = 0; s < c->nshards; s++) {
        ln[s].next = pos;
        for (uint32_t j = b->start[s]; j < b->start[s + 1]; j++) {
            uint32_t i = b->order[j];
            if (!again || (x->flag[i] & OL_C_AGAIN)) {
                x->items[pos++] = i;
                x->flag[i] = 0;
            }
        }
        ln[s].end = pos;
    }
    int rc = 0;
    for (uint32_t s = 0; s < c->nshards; s++)
        while (rc == 0 && ln[s].n < OL_C_WINDOW && ln[s].next < ln[s].end)
            rc = ol_c_data_send(x, s, &ln[s]);
    for (bool more = true; rc == 0 && more;) {
        more = false;
        for (uint32_t s = 0; s < c->nshards && rc == 0; s++) {
            if (!ln[s].n)
                continue;
            more = true;
            rc = ol_c_data_answer(x, s, &ln[s]);
            while (rc == 0 && ln[s].n < OL_C_WINDOW && ln[s].next < ln[s].end)
                rc = ol_c_data_send(x, s, &ln[s]);
        }
    }
    free(ln);
    return rc;
}

/* A put or get over TCP: rounds until no item is to be asked again. */
static int ol_c_data_call(struct ol_c_data *x, const struct ol_batch *b)
{
    x->items = malloc(((size_t)b->n + 1) * sizeof *x->items);
    x->flag = calloc((size_t)b->n + 1, 1);
    int rc = x->items && x->flag ? 0 : -ENOMEM;
    if (x->lens)
        memset(x->lens, 0, (size_t)b->n * sizeof *x->lens);
    for (bool again = false; rc == 0;) {
        if ((rc = ol_c_data_round(x, b, again)) < 0)
            break;
        again = false;
        for (uint32_t i = 0; i < b->n && !again; i++)
            again = x->flag[i] & OL_C_AGAIN;
        if (!again)
            break;
    }
    free(x->items);
    free(x->flag);
    return rc;
}

int ol_client_put(ol_client *c, const struct ol_client_key *keys, const void *const *values,
                  const uint64_t *lens, uint32_t n, uint16_t *status)
{
    struct ol_batch b = {0};
    int rc = ol_c_call_begin(c, &b, ol_batch_make(c, keys, n, &b));
    if (rc < 0)
        return rc;
    rc = c->slab ? ol_c_put_slab(c, &b, keys, values, lens, status)
                 : ol_c_data_call(&(struct ol_c_data){.c = c, .op = OL_KV_OP_PUT, .keys = keys,
                                                         .values = values, .vlens = lens,
                                                         .status = status}, &b);
    return ol_c_call_end(c, &b, rc);
}

int ol_client_get(ol_client *c, const struct ol_client_key *keys, void *const *bufs,
                  const uint64_t *caps, uint64_t *lens, uint32_t n, uint16_t *status)
{
    struct ol_batch b = {0};
    int rc = ol_c_call_begin(c, &b, ol_batch_make(c, keys, n, &b));
    if (rc < 0)
        return rc;
    rc = c->slab ? ol_c_get_slab(c, &b, keys, bufs, caps, lens, status)
                 : ol_c_data_call(&(struct ol_c_data){.c = c, .op = OL_KV_OP_GET, .keys = keys,
                                                         .bufs = bufs, .caps = caps, .lens = lens,
                                                         .status = status}, &b);
    return ol_c_call_end(c, &b, rc);
}

/* A no-item request on every shard (RESET, STATS); fn reads each answer. */
static int ol_c_each_shard(ol_client *c, unsigned op,
                           int (*fn)(const struct ol_kv_dec *d, uint32_t s, void *arg), void *arg)
{
    struct ol_batch b = {.start = NULL};
    int rc = ol_batch_lock(c, &b, true);
    for (uint32_t s = 0; s < c->nshards && rc == 0; s++) {
        struct ol_kv_enc e;
        if ((rc = ol_c_begin(&c->conns[s], &e, op, 64)) == 0)
            rc = ol_c_finish(&c->conns[s], &e);
    }
    for (uint32_t s = 0; s < c->nshards && rc == 0; s++) {
        struct ol_kv_hdr h;
        struct ol_kv_dec d;
        size_t used;
        if ((rc = ol_c_answer(c, s, &h, &d, &used)) < 0)
            break;
        rc = fn(&d, s, arg);
        ol_c_consume(&c->conns[s], used);
    }
    ol_batch_unlock(c, &b, true);
    return rc;
}

static int ol_c_reset_one(const struct ol_kv_dec *d, uint32_t s, void *arg)
{
    uint64_t n;
    if (ol_kv_dec_reset_res(d, &n) < 0)
        return -EPROTO;
    *(uint64_t *)arg += n;
    return 0;
}

int ol_client_reset(ol_client *c, uint64_t *removed)
{
    uint64_t n = 0;
    int rc = ol_c_each_shard(c, OL_KV_OP_RESET, ol_c_reset_one, &n);
    if (rc == 0 && removed)
        *removed = n;
    return rc;
}

static int ol_c_stats_one(const struct ol_kv_dec *d, uint32_t s, void *arg)
{
    uint64_t *sum = arg;
    struct ol_kv_stats st;
    if (ol_kv_dec_stats(d, &st) < 0)
        return -EPROTO;
    for (int i = 0; i < OL_CLIENT_STATS && i < OL_KV_STAT__COUNT; i++) {
        bool process_wide = i == OL_KV_STAT_BYTES_CAPACITY || i == OL_KV_STAT_SLOTS_TOTAL ||
                            i == OL_KV_STAT_SESSIONS || i == OL_KV_STAT_PROTOCOL_ERRORS;
        sum[i] = process_wide ? st.c[i] : sum[i] + st.c[i];
    }
    return 0;
}

int ol_client_stats(ol_client *c, uint64_t counters[OL_CLIENT_STATS])
{
    memset(counters, 0, sizeof(uint64_t) * OL_CLIENT_STATS);
    return ol_c_each_shard(c, OL_KV_OP_STATS, ol_c_stats_one, counters);
}

struct ol_c_members {
    int64_t *revision;
    int *replicas;
    struct ol_client_member *m;
    int cap, n;
};

static int ol_c_members_one(const struct ol_kv_dec *d, uint32_t s, void *arg)
{
    struct ol_c_members *o = arg;
    struct ol_kv_members_head h;
    if (ol_kv_dec_members_head(d, &h) < 0)
        return -EPROTO;
    *o->revision = h.revision;
    *o->replicas = h.replicas;
    struct ol_kv_dec it = *d;
    struct ol_kv_member_item m;
    while (ol_kv_dec_member(&it, &m) == 1) {
        if (o->n >= o->cap)
            return -E2BIG;
        if (memchr(m.addr.p, 0, m.addr.len))   /* it would end the C string early */
            return -EPROTO;
        struct ol_client_member *x = &o->m[o->n++];
        x->id = m.id;
        x->weight = m.weight;
        memcpy(x->addr, m.addr.p, m.addr.len);
        x->addr[m.addr.len] = 0;
    }
    return 0;
}

int ol_client_members(ol_client *c, int64_t *revision, int *replicas,
                      struct ol_client_member *m, int cap)
{
    if (cap < 0 || (!m && cap > 0))
        return -EINVAL;
    struct ol_c_members o = {revision, replicas, m, cap, 0};
    struct ol_batch b = {.start = NULL};
    int rc = ol_batch_lock(c, &b, true);
    if (rc == 0 && c->conns[0].version < 2)
        rc = -EOPNOTSUPP;
    struct ol_kv_enc e;
    if (rc == 0 && (rc = ol_c_begin(&c->conns[0], &e, OL_KV_OP_MEMBERS, 64)) == 0)
        rc = ol_c_finish(&c->conns[0], &e);
    if (rc == 0) {
        struct ol_kv_hdr h;
        struct ol_kv_dec d;
        size_t used;
        if ((rc = ol_c_answer(c, 0, &h, &d, &used)) == 0) {
            rc = ol_c_members_one(&d, 0, &o);
            ol_c_consume(&c->conns[0], used);
        }
    }
    ol_batch_unlock(c, &b, true);
    return rc < 0 ? rc : o.n;
}

int ol_client_slab_usage(ol_client *c, uint64_t *size, uint64_t *allocated)
{
    if (!c->is_unix)
        return -EOPNOTSUPP;
    struct stat st;
    int rc = 0;
    pthread_mutex_lock(&c->slab_mu);
    if (c->slab_fd < 0 || fstat(c->slab_fd, &st) < 0) {
        rc = c->slab_fd < 0 ? -ENOTCONN : -errno;
    } else {
        uint64_t a = (uint64_t)st.st_blocks * 512u;
        *size = c->slab_size;
        *allocated = a < c->slab_size ? a : c->slab_size;
    }
    pthread_mutex_unlock(&c->slab_mu);
    return rc;
}

int ol_client_populate(ol_client *c, uint64_t max_bytes)
{
    if (!c->is_unix)
        return -EOPNOTSUPP;
    pthread_mutex_lock(&c->slab_mu);
    if (c->slab) {
        uint64_t n = max_bytes && max_bytes < c->slab_size ? max_bytes : c->slab_size;
        ol_c_populate_map(c->slab, c->slab_size, c->slab_populated, 0, n);
    }
    pthread_mutex_unlock(&c->slab_mu);
    return 0;
}
