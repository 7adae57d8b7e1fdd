/*
 * store_harness.c - the object-engine test harness of store_harness.h,
 * shared by test_store_engine.c and test_store_mpu.c: the environment
 * (drives in the test's tmpdir, store, loop, core), calls run on the loop
 * thread, the PUT pump and GET collector with their wrappers, and looking
 * at the drives. Helpers only: it holds no test.
 */
#include "store_harness.h"

#include "cluster/drive.h"
#include "net/rpc.h"
#include "store/catalog.h"
#include "store/format.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- running things on the loop thread --------------------------------------- */

void sh_call_init(struct sh_call *t, const char *b, const char *k, const uint8_t *data,
                  uint64_t size)
{
    memset(t, 0, sizeof *t);
    t->bucket = b;
    t->key = k;
    t->data = data;
    t->size = t->stop = size;
    t->chunk = OL_STORE_WRITE_MAX;
}

void sh_done(struct sh_call *t, int status)
{
    if (t->posted)
        return;
    t->status = status;
    t->posted = true;
    if (t->parent) {
        if (--t->parent->remaining == 0)
            sh_done(t->parent, 0);
        return;
    }
    sem_post(&t->sem);
}

static void on_msg(ol_loop *l, struct ol_msg *m)
{
    (void)l;
    struct sh_call *t = (struct sh_call *)m;
    t->fn(t);
}

int sh_call_on(struct sh_env *e, unsigned core, struct sh_call *t, void (*fn)(struct sh_call *))
{
    t->e = e;
    t->fn = fn;
    t->on = core;
    t->posted = false;
    t->m.fn = on_msg;
    sem_init(&t->sem, 0, 0);
    ol_loop_post(core ? e->loop2 : e->loop, &t->m);
    while (sem_wait(&t->sem) < 0 && errno == EINTR)
        ;
    sem_destroy(&t->sem);
    return t->status;
}

int sh_call(struct sh_env *e, struct sh_call *t, void (*fn)(struct sh_call *))
{
    return sh_call_on(e, 0, t, fn);
}

struct ol_store_core *sh_core(const struct sh_call *t) { return t->on ? t->e->c2 : t->e->c; }

static void fn_core_create(struct sh_call *t)
{
    sh_done(t, ol_store_core_create(t->e->s, t->on ? t->e->loop2 : t->e->loop,
                                    t->on ? &t->e->c2 : &t->e->c));
}

static void fn_core_destroy(struct sh_call *t)
{
    ol_store_core_destroy(sh_core(t));
    *(t->on ? &t->e->c2 : &t->e->c) = NULL;
    sh_done(t, 0);
}

static void fn_stats(struct sh_call *t)
{
    t->st = *ol_store_core_stats(sh_core(t));
    t->busy = ol_store_core_busy(sh_core(t));
    sh_done(t, 0);
}

struct ol_store_stats sh_stats(struct sh_env *e)
{
    struct sh_call t;
    memset(&t, 0, sizeof t);
    sh_call(e, &t, fn_stats);
    return t.st;
}

unsigned sh_busy(struct sh_env *e)
{
    struct sh_call t;
    memset(&t, 0, sizeof t);
    sh_call(e, &t, fn_stats);
    return t.busy;
}

static unsigned busy_on(struct sh_env *e, unsigned core)
{
    struct sh_call t;
    memset(&t, 0, sizeof t);
    sh_call_on(e, core, &t, fn_stats);
    return t.busy;
}

void sh_settle(struct sh_env *e)
{
    for (unsigned core = 0; core < 1u + e->two; core++) {
        for (int i = 0; i < 500 && busy_on(e, core); i++)
            usleep(10000);
        OLT_CHECK_EQ(busy_on(e, core), 0);
    }
}

/* ---- remote drives ---------------------------------------------------------------
 *
 * OLT_STORE_REMOTE=odd (scripts/test.sh runs the engine's tests so too):
 * the store is opened as a cluster store whose odd drives are another
 * node's. A loop of their own runs two node RPC endpoints on loopback:
 * node 1 serves those drives' directories (cluster/drive.h's server), node
 * 2 is the store's client; every step of the engine on an odd drive goes
 * over the wire. The drives are formatted first by an ordinary open. */

static const char SH_SECRET[] = "store-harness-secret-0123456789abcdef";

struct sh_remote {
    ol_loop *net;
    struct ol_rpc *srv, *cli;
    struct ol_drv_server *ds;
    struct ol_drv_client *dc;
    struct ol_drv_remote *dr;
    struct ol_store_remote hooks;
    struct ol_drv_local local[SH_MAXD];
    struct ol_drv_map map[SH_MAXD];
    unsigned nlocal;
    bool flags[SH_MAXD];
    uint8_t deployment[16];
    int rc;
    sem_t sem;
    struct ol_msg m;
};

static int rem_init(ol_loop *l, void *arg)
{
    struct sh_remote *rm = arg;
    char err[256];
    struct ol_rpc_params p = {.self_id = 1, .cluster = "harness", .secret = SH_SECRET,
                              .secret_len = strlen(SH_SECRET), .listen_addr = "127.0.0.1:0"};
    int rc = ol_rpc_create(l, &p, &rm->srv, err, sizeof err);
    if (rc == 0) {
        p.self_id = 2;
        p.listen_addr = NULL;
        rc = ol_rpc_create(l, &p, &rm->cli, err, sizeof err);
    }
    if (rc == 0)
        rc = ol_drv_server_create(l, rm->srv, rm->local, rm->nlocal, &rm->ds);
    if (rc == 0)
        rc = ol_drv_client_create(l, rm->cli, 10000, &rm->dc);
    if (rc == 0) {
        char addr[64];
        snprintf(addr, sizeof addr, "127.0.0.1:%d", ol_rpc_port(rm->srv));
        rc = ol_rpc_peer_set(rm->cli, 1, addr);
    }
    rm->rc = rc;
    return 0;
}

static void rem_close(ol_loop *l, struct ol_msg *m)
{
    struct sh_remote *rm = (struct sh_remote *)((char *)m - offsetof(struct sh_remote, m));
    ol_rpc_close_all(rm->cli);
    ol_rpc_close_all(rm->srv);
    (void)l;
    sem_post(&rm->sem);
}

static void rem_idle(ol_loop *l, struct ol_msg *m)
{
    struct sh_remote *rm = (struct sh_remote *)((char *)m - offsetof(struct sh_remote, m));
    rm->rc = ol_rpc_idle(rm->cli) && ol_rpc_idle(rm->srv);
    (void)l;
    sem_post(&rm->sem);
}

static void rem_post(struct sh_remote *rm, void (*fn)(ol_loop *, struct ol_msg *))
{
    rm->m.fn = fn;
    ol_loop_post(rm->net, &rm->m);
    while (sem_wait(&rm->sem) < 0 && errno == EINTR)
        ;
}

/* Formats the drives (an ordinary open), then serves the odd ones from node 1. */
static void rem_start(struct sh_env *e)
{
    char err[512] = "";
    struct ol_store *s = NULL;
    int rc = ol_store_open(&e->p, &s, err, sizeof err);
    if (rc < 0)
        olt_fail(__FILE__, __LINE__, "ol_store_open (to format): %d %s", rc, err);
    ol_store_close(s);
    struct sh_remote *rm = calloc(1, sizeof *rm);
    OLT_CHECK(rm != NULL);
    sem_init(&rm->sem, 0, 0);
    for (unsigned i = 0; i < e->n; i++) {
        struct ol_format f;
        OLT_CHECK_EQ(ol_format_read(e->path[i], &f), 0);
        memcpy(rm->deployment, f.deployment, 16);
        memcpy(rm->map[i].uuid, f.uuid, 16);
        rm->map[i].node = 1;
        ol_format_free(&f);
        if (!(i & 1))
            continue;
        rm->flags[i] = true;
        struct ol_drv_local *l = &rm->local[rm->nlocal++];
        memcpy(l->uuid, rm->map[i].uuid, 16);
        l->dfd = open(e->path[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        OLT_CHECK(l->dfd >= 0);
    }
    struct ol_loop_params lp = {.index = 1, .cpu = -1, .recv_bufs = 256};   /* as the daemon's */
    OLT_CHECK_EQ(ol_loop_create(&lp, &rm->net, err, sizeof err), 0);
    OLT_CHECK_EQ(ol_loop_start(rm->net, rem_init, rm), 0);
    OLT_CHECK_EQ(rm->rc, 0);
    for (int i = 0; i < 400 && !ol_rpc_peer_ready(rm->cli, 1); i++)
        usleep(5000);
    OLT_CHECK(ol_rpc_peer_ready(rm->cli, 1));
    rm->dr = ol_drv_remote_create(rm->dc, rm->map, e->n, &rm->hooks);
    OLT_CHECK(rm->dr != NULL);
    e->p.deployment = rm->deployment;
    e->p.remote_drives = rm->flags;
    e->p.remote = &rm->hooks;
    e->rem = rm;
}

/* After the store closed: the endpoints close, the loop goes. */
static void rem_stop(struct sh_env *e)
{
    struct sh_remote *rm = e->rem;
    if (!rm)
        return;
    rem_post(rm, rem_close);
    for (int i = 0; i < 400; i++) {
        rem_post(rm, rem_idle);
        if (rm->rc)
            break;
        usleep(5000);
    }
    ol_loop_stop(rm->net);
    ol_loop_join(rm->net);
    OLT_CHECK_EQ(ol_drv_client_inflight(rm->dc), 0);
    ol_drv_client_destroy(rm->dc);
    ol_rpc_destroy(rm->cli);
    ol_rpc_destroy(rm->srv);
    ol_drv_server_destroy(rm->ds);
    ol_drv_remote_destroy(rm->dr);
    ol_loop_destroy(rm->net);
    for (unsigned i = 0; i < rm->nlocal; i++)
        close(rm->local[i].dfd);
    sem_destroy(&rm->sem);
    free(rm);
    e->rem = NULL;
    e->p.deployment = NULL;
    e->p.remote_drives = NULL;
    e->p.remote = NULL;
}

/* ---- environment -------------------------------------------------------------- */

bool sh_remote_mode(void)
{
    const char *remote = getenv("OLT_STORE_REMOTE");
    return remote && strcmp(remote, "odd") == 0;
}

void sh_local_only(const char *why)
{
    if (sh_remote_mode())
        OLT_SKIP(why);
}

void sh_env_start(struct sh_env *e)
{
    char err[512] = "";
    /* OLT_STORE_SYNC=fsync: every test of the engine with a sync per file
     * (scripts/test.sh runs them so too); the default is group commit. */
    const char *sync = getenv("OLT_STORE_SYNC");
    if (sync && strcmp(sync, "fsync") == 0)
        e->p.sync = 1;
    if (sh_remote_mode() && e->n > 1)
        rem_start(e);
    int rc = ol_store_open(&e->p, &e->s, err, sizeof err);
    if (rc < 0)
        olt_fail(__FILE__, __LINE__, "ol_store_open: %d %s", rc, err);
    if (e->listing) {
        unsigned mq = ol_layout_read_quorum(ol_store_drives_per_set(e->s), ol_store_parity(e->s));
        rc = ol_catalog_open(e->dp, e->n, mq, &e->cat, &e->cat_info, err, sizeof err);
        if (rc < 0)
            olt_fail(__FILE__, __LINE__, "ol_catalog_open: %d %s", rc, err);
        ol_store_set_catalog(e->s, e->cat);
    }
    for (unsigned core = 0; core < 1u + e->two; core++) {
        ol_loop **l = core ? &e->loop2 : &e->loop;
        *l = sh_loop_new();
        OLT_CHECK_EQ(ol_loop_start(*l, NULL, NULL), 0);
        struct sh_call t;
        memset(&t, 0, sizeof t);
        OLT_CHECK_EQ(sh_call_on(e, core, &t, fn_core_create), 0);
    }
}

void sh_env_stop(struct sh_env *e, bool crash)
{
    if (!crash) {
        /* the cores may only go once no request is in use: the last GET's
           files may still be closing after its EV_DONE */
        sh_settle(e);
        for (unsigned core = 0; core < 1u + e->two; core++) {
            struct sh_call t;
            memset(&t, 0, sizeof t);
            sh_call_on(e, core, &t, fn_core_destroy);
        }
    }
    for (unsigned core = 0; core < 1u + e->two; core++) {
        ol_loop **l = core ? &e->loop2 : &e->loop;
        struct ol_store_core **c = core ? &e->c2 : &e->c;
        ol_loop_stop(*l);
        ol_loop_join(*l);
        if (crash) { /* before the loop goes: it waits for barriers still out */
            ol_store_core_destroy(*c);
            *c = NULL;
        }
        ol_loop_destroy(*l);
        *l = NULL;
    }
    if (e->cat) {
        e->cat_rc = ol_catalog_close(e->cat);
        e->cat = NULL;
        char clean[600];   /* a crash never reaches the clean close */
        snprintf(clean, sizeof clean, "%s/.openlake/index/clean", e->path[0]);
        if (crash)
            unlink(clean);
    }
    ol_store_close(e->s);
    e->s = NULL;
    rem_stop(e);
}

/* The drives of sh_env_open, and its parameters. */
static void env_init(struct sh_env *e, unsigned n, unsigned dps, int64_t inline_max,
                     uint64_t mpu_min_part)
{
    memset(e, 0, sizeof *e);
    e->n = n;
    e->dps = dps;
    for (unsigned i = 0; i < n; i++) {
        snprintf(e->path[i], sizeof e->path[i], "%s/d%u", olt_tmpdir(), i);
        OLT_CHECK(mkdir(e->path[i], 0700) == 0);
        e->dp[i] = e->path[i];
    }
    e->p = (struct ol_store_params){.drives = e->dp, .n = n, .drives_per_set = dps,
                                    .parity = -1, .stripe_bytes = SH_STRIPE,
                                    .inline_max = inline_max, .mpu_min_part = mpu_min_part};
}

void sh_env_open(struct sh_env *e, unsigned n, unsigned dps, int64_t inline_max,
                 uint64_t mpu_min_part)
{
    env_init(e, n, dps, inline_max, mpu_min_part);
    sh_env_start(e);
}

void sh_env_open_listing(struct sh_env *e, unsigned n, unsigned dps, int64_t inline_max,
                         bool two)
{
    env_init(e, n, dps, inline_max, 0);
    e->listing = true;
    e->two = two;
    sh_env_start(e);
}

/* ---- operations ------------------------------------------------------------------ */

void sh_put_cb(void *ud, const struct ol_store_event *ev)
{
    struct sh_call *t = ud;
    switch (ev->type) {
    case OL_STORE_EV_READY:
        t->readies++;
        sh_put_pump(t);
        break;
    case OL_STORE_EV_ERROR:
        ol_put_abort(t->put);
        t->put = NULL;
        sh_done(t, ev->status);
        break;
    case OL_STORE_EV_DONE:
        t->put = NULL;
        sh_done(t, ev->status);
        break;
    default:
        break;
    }
}

void sh_put_pump(struct sh_call *t)
{
    while (t->written < t->stop) {
        uint64_t n = t->stop - t->written;
        if (n > t->chunk)
            n = t->chunk;
        int rc = ol_put_write(t->put, t->data + t->written, (size_t)n);
        if (rc < 0) {
            ol_put_abort(t->put);
            t->put = NULL;
            return sh_done(t, rc);
        }
        t->written += n;
        if (rc == 1) {
            t->ones++;
            return;
        }
    }
    if (t->stop < t->size)
        return sh_done(t, 0); /* a partial PUT, left open for the test */
    struct ol_meta_version v;
    memset(&v, 0, sizeof v);
    t->fill(t, &v);
    int rc = ol_put_finish(t->put, &v);
    if (rc < 0) {
        ol_put_abort(t->put);
        t->put = NULL;
        sh_done(t, rc);
    }
}

void sh_fn_abort_put(struct sh_call *t)
{
    ol_put_abort(t->put);
    t->put = NULL;
    sh_done(t, 0);
}

void sh_get_cb(void *ud, const struct ol_store_event *ev)
{
    struct sh_call *t = ud;
    int rc;
    switch (ev->type) {
    case OL_STORE_EV_META:
        t->meta = true;
        t->msize = ev->version->size;
        memcpy(t->etag, ev->version->etag, 16);
        t->etag_parts = ev->version->etag_parts;
        t->part_count = ev->version->part_count;
        if (t->head) {
            ol_get_end(t->get);
            return sh_done(t, 0);
        }
        if (t->part_no) {
            t->set_rc = ol_get_set_part(t->get, t->part_no);
            if (t->set_rc < 0) {
                ol_get_end(t->get);
                return sh_done(t, t->set_rc);
            }
        } else if (t->off || t->len >= 0) {
            ol_get_set_range(t->get, t->off, t->len);
        }
        rc = ol_get_next(t->get);
        if (rc < 0) {
            ol_get_end(t->get);
            sh_done(t, rc);
        }
        break;
    case OL_STORE_EV_DATA:
        if (t->got + ev->len > t->cap) {
            ol_get_end(t->get);
            return sh_done(t, -EOVERFLOW);
        }
        memcpy(t->out + t->got, ev->data, ev->len);
        t->got += ev->len;
        if (t->on_data)
            t->on_data(t);
        if (t->held)
            break;
        rc = ol_get_next(t->get); /* from inside the callback: the engine loops */
        if (rc < 0) {
            ol_get_end(t->get);
            sh_done(t, rc);
        }
        break;
    case OL_STORE_EV_DONE:
        ol_get_end(t->get);
        sh_done(t, ev->status);
        break;
    default:
        break;
    }
}

void sh_get_resume(struct sh_call *t)
{
    t->held = false;
    int rc = ol_get_next(t->get);
    if (rc < 0) {
        ol_get_end(t->get);
        sh_done(t, rc);
    }
}

void sh_fn_get(struct sh_call *t)
{
    struct ol_get_args a = {.bucket = t->bucket, .key = t->key, .offset = 0, .length = -1,
                            .by_ref = t->by_ref};
    int rc = ol_get_begin(t->e->c, &a, sh_get_cb, t, &t->get);
    if (rc < 0)
        sh_done(t, rc);
}

int sh_get_range(struct sh_env *e, const char *b, const char *k, uint64_t off, int64_t len,
                 uint8_t *out, uint64_t cap, uint64_t *got)
{
    struct sh_call t;
    memset(&t, 0, sizeof t);
    t.bucket = b;
    t.key = k;
    t.off = off;
    t.len = len;
    t.out = out;
    t.cap = cap;
    int rc = sh_call(e, &t, sh_fn_get);
    if (got)
        *got = t.got;
    return rc;
}

void sh_check_get(struct sh_env *e, const char *b, const char *k, const uint8_t *want,
                  uint64_t size)
{
    uint8_t *buf = malloc(size + 1);
    uint64_t got = 0;
    int rc = sh_get_range(e, b, k, 0, -1, buf, size + 1, &got);
    if (rc != 0)
        olt_fail(__FILE__, __LINE__, "get %s/%s (%llu bytes): %d", b, k,
                 (unsigned long long)size, rc);
    OLT_CHECK_EQ(got, size);
    if (size)
        OLT_CHECK_MEM(buf, want, size);
    free(buf);
}

int sh_head(struct sh_env *e, const char *b, const char *k, struct sh_call *out)
{
    struct sh_call t;
    memset(&t, 0, sizeof t);
    t.bucket = b;
    t.key = k;
    t.head = true;
    int rc = sh_call(e, &t, sh_fn_get);
    if (out)
        *out = t;
    return rc;
}

void sh_simple_cb(void *ud, const struct ol_store_event *ev)
{
    struct sh_call *t = ud;
    t->len_out = ev->len;
    sh_done(t, ev->status);
}

static void fn_delete(struct sh_call *t)
{
    int rc = ol_delete(t->e->c, t->bucket, t->key, sh_simple_cb, t);
    if (rc < 0)
        sh_done(t, rc);
}

int sh_del(struct sh_env *e, const char *b, const char *k)
{
    struct sh_call t;
    memset(&t, 0, sizeof t);
    t.bucket = b;
    t.key = k;
    return sh_call(e, &t, fn_delete);
}

static void fn_bucket(struct sh_call *t)
{
    int rc = t->which == 0 ? ol_store_bucket_create(t->e->c, t->bucket, sh_simple_cb, t)
             : t->which == 1 ? ol_store_bucket_delete(t->e->c, t->bucket, sh_simple_cb, t)
                             : ol_store_bucket_exists(t->e->c, t->bucket, sh_simple_cb, t);
    if (rc < 0)
        sh_done(t, rc);
}

int sh_bucket_op(struct sh_env *e, int which, const char *b)
{
    struct sh_call t;
    memset(&t, 0, sizeof t);
    t.bucket = b;
    t.which = which;
    return sh_call(e, &t, fn_bucket);
}

/* ---- data and the drives --------------------------------------------------------- */

uint8_t *sh_pattern(uint64_t size, unsigned seed)
{
    uint8_t *p = malloc(size ? size : 1);
    uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
    for (uint64_t i = 0; i < size; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)x;
    }
    return p;
}

void sh_obj_hash(const struct sh_env *e, const char *k, char od[OL_LAYOUT_DIR_LEN])
{
    struct ol_format f;
    OLT_CHECK_EQ(ol_format_read(e->path[0], &f), 0);
    ol_layout_object_dir(f.deployment, k, strlen(k), od);
    ol_format_free(&f);
}

void sh_obj_dir(const struct sh_env *e, unsigned i, const char *b, const char *k, char *out,
                size_t len)
{
    char od[OL_LAYOUT_DIR_LEN];
    sh_obj_hash(e, k, od);
    snprintf(out, len, "%s/.openlake/buckets/%s/objects/%s", e->path[i], b, od);
}

unsigned sh_drive_of(const struct sh_env *e, const char *b, const char *k, unsigned pos)
{
    return ol_store_set_of(e->s, b, k) * e->dps + pos;
}

static size_t read_file(const char *path, uint8_t *buf, size_t cap)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, cap);
    close(fd);
    return n < 0 ? 0 : (size_t)n;
}

bool sh_drive_meta(const struct sh_env *e, unsigned i, const char *b, const char *k,
                   uint8_t *buf, size_t cap, struct ol_meta_version *v)
{
    char p[900];
    sh_obj_dir(e, i, b, k, p, sizeof p);
    strcat(p, "/meta");
    size_t n = read_file(p, buf, cap);
    struct ol_meta_file f;
    return n && ol_meta_open(buf, n, &f) == 0 && ol_meta_latest(&f, v) == 0;
}

bool sh_part_path(const struct sh_env *e, unsigned i, const char *b, const char *k,
                  unsigned part, char *out, size_t len)
{
    static uint8_t buf[1 << 20];
    struct ol_meta_version v;
    if (!sh_drive_meta(e, i, b, k, buf, sizeof buf, &v) || v.type != OL_META_OBJECT ||
        v.has_inline)
        return false;
    char dir[700], u[37];
    sh_obj_dir(e, i, b, k, dir, sizeof dir);
    ol_format_uuid_str(v.data_dir, u);
    if (v.flat)
        snprintf(out, len, "%s/%s.data", dir, u);
    else
        snprintf(out, len, "%s/%s/part.%u", dir, u, part);
    return true;
}

unsigned sh_drive_with_shard(const struct sh_env *e, const char *b, const char *k,
                             unsigned shard)
{
    static uint8_t buf[1 << 20];
    for (unsigned pos = 0; pos < e->dps; pos++) {
        unsigned i = sh_drive_of(e, b, k, pos);
        struct ol_meta_version v;
        if (sh_drive_meta(e, i, b, k, buf, sizeof buf, &v) && v.ec.index == shard)
            return i;
    }
    olt_fail(__FILE__, __LINE__, "no drive holds shard %u of %s", shard, k);
}

int sh_count_entries(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *x;
    while ((x = readdir(d)))
        if (strcmp(x->d_name, ".") && strcmp(x->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

int sh_count_fds(void)
{
    int n = 0;
    for (int fd = 0; fd < 4096; fd++)
        if (fcntl(fd, F_GETFD) >= 0)
            n++;
    return n;
}

void sh_check_tmp_empty(struct sh_env *e)
{
    sh_settle(e);
    for (unsigned i = 0; i < e->n; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/.openlake/tmp", e->path[i]);
        int n = sh_count_entries(p);
        if (n > 0) {
            char cmd[700];
            snprintf(cmd, sizeof cmd, "ls -laR %s >&2", p);
            if (system(cmd)) {
            }
            olt_fail(__FILE__, __LINE__, "%s holds %d entries", p, n);
        }
    }
}

static const char *g_wipe_root;
static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    if (strcmp(p, g_wipe_root) != 0)
        remove(p);
    return 0;
}

static void sh_fn_put(struct sh_call *t)
{
    struct ol_put_args a = {.bucket = t->bucket, .key = t->key, .size = t->size, .parity = -1};
    int rc = ol_put_begin(t->e->c, &a, sh_put_cb, t, &t->put);
    if (rc < 0)
        return sh_done(t, rc);
    sh_put_pump(t);
}

int sh_put(struct sh_env *e, const char *b, const char *k, const uint8_t *data, uint64_t size,
           void (*fill)(struct sh_call *, struct ol_meta_version *))
{
    struct sh_call t;
    sh_call_init(&t, b, k, data, size);
    t.fill = fill;
    return sh_call(e, &t, sh_fn_put);
}

void sh_flip_byte(const char *path, uint64_t off)
{
    int fd = open(path, O_RDWR);
    OLT_CHECK(fd >= 0);
    uint8_t c;
    OLT_CHECK_EQ(pread(fd, &c, 1, (off_t)off), 1);
    c ^= 0x5a;
    OLT_CHECK_EQ(pwrite(fd, &c, 1, (off_t)off), 1);
    close(fd);
}

void sh_wipe(const char *drive)
{
    g_wipe_root = drive;
    nftw(drive, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    OLT_CHECK_EQ(sh_count_entries(drive), 0);
}

ol_loop *sh_loop_new(void)
{
    char err[256];
    ol_loop *l = NULL;
    struct ol_loop_params lp = {.index = 0, .cpu = -1, .recv_bufs = 64, .recv_buf_size = 4096};
    int rc = ol_loop_create(&lp, &l, err, sizeof err);
    if (rc == -EPERM || rc == -ENOSYS)
        OLT_SKIP("io_uring not available here");
    if (rc < 0)
        olt_fail(__FILE__, __LINE__, "ol_loop_create: %s", err);
    return l;
}

bool sh_own_mount_ns(void)
{
    return unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0;
}

bool sh_mount_xfs(const char *img, const char *dir)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "truncate -s 512M '%s' && mkfs.xfs -q -f '%s' >/dev/null 2>&1",
             img, img);
    return system(cmd) == 0 && sh_mount_image(img, dir);
}

bool sh_mount_image(const char *img, const char *dir)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "mount -o loop '%s' '%s' 2>/dev/null", img, dir);
    return system(cmd) == 0;
}

/* XFS_IOC_GOINGDOWN and its XFS_FSOP_GOING_FLAGS_{LOG,NOLOG}FLUSH (xfs_fs.h) */
#define SH_XFS_IOC_GOINGDOWN _IOR('X', 125, uint32_t)
#define SH_XFS_GOING_LOGFLUSH 1u
#define SH_XFS_GOING_NOLOGFLUSH 2u

static bool xfs_goingdown(int fd, uint32_t how)
{
    return ioctl(fd, SH_XFS_IOC_GOINGDOWN, &how) == 0;
}

bool sh_xfs_shutdown_after_the_log(int fd) { return xfs_goingdown(fd, SH_XFS_GOING_LOGFLUSH); }

bool sh_xfs_shutdown(int fd) { return xfs_goingdown(fd, SH_XFS_GOING_NOLOGFLUSH); }
