/*
 * main.c - openlaked: configuration → cores → serve → graceful shutdown.
 *
 * Owns: process start-up (config, the directories made and locked through
 * dirs.c, signal mask), one event loop per core with its listeners, the
 * start-up banner, and shutdown:
 *   first SIGTERM/SIGINT  stop accepting, let in-flight requests finish (at
 *                         most http.shutdown_timeout_ms), then exit 0; in a
 *                         cluster the KV pool takes no new work first, the
 *                         cores stop once its messages are all handled
 *                         (kvpool.c), then the node RPC's loop, then the
 *                         lease is revoked;
 *   second signal         exit 1 at once.
 * Signals are taken synchronously by the main thread (sigtimedwait); loop
 * threads block them, so no handler ever runs on a loop.
 */
#include "daemon/daemon.h"

#include "base/dirlock.h"
#include "base/fault.h"
#include "base/log.h"
#include "http/tls.h"
#include "store/layout.h"
#include "rt/net.h"

#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define OL_TICK_MS 50

static void ol_usage(FILE *f)
{
    fprintf(f,
            "usage: openlaked [--config FILE] [--KEY VALUE ...]\n"
            "\n"
            "Runs the OpenLake daemon in the foreground.\n"
            "\n"
            "  --config FILE    read settings from a TOML file\n"
            "  --KEY VALUE      set any configuration key (e.g. --s3-addr 127.0.0.1:9000)\n"
            "  --help-config    list every configuration key with its default\n"
            "  --version        print the version and exit\n"
            "  --help           this text\n"
            "\n"
            "Secrets: --secret-key-file FILE and --kv-token-file FILE (or OPENLAKE_*),\n"
            "not --secret-key / --kv-token, whose values any local user can read in ps.\n"
            "\n"
            "Precedence: defaults < config file < flags < OPENLAKE_* environment variables.\n"
            "With no config, a single-node default is used (data under ./data,\n"
            "S3 and admin on 127.0.0.1:9000). See docs/configuration.md.\n");
}

/* ---- per-core life --------------------------------------------------------- */

static void ol_core_tick(ol_loop *loop, struct ol_timer *t)
{
    struct ol_core *core = (struct ol_core *)((char *)t - offsetof(struct ol_core, tick));
    /* the store's requests too: a write whose client left still commits, and
     * one stopped under it would make the listing catalog dirty (engine.h,
     * ol_store_set_catalog) */
    bool store_idle = !core->store || ol_store_core_busy(core->store) == 0 ||
                      atomic_load(&core->d->closing);
    /* and the KV pool's messages: none may come to a loop that stopped */
    if (atomic_load(&core->d->draining) && ol_http_server_conns(core->s3) == 0 &&
        (!core->kv || ol_kv_server_idle(core->kv)) && !core->sweeping && store_idle &&
        ol_daemon_kvpool_quiet(core->d) && ol_daemon_cstore_quiet(core->d)) {
        ol_loop_stop(loop);
        return;
    }
    ol_timer_arm(loop, t, OL_TICK_MS);
}

/* ---- expired multipart uploads ------------------------------------------------ */

/* Sweep period: half the expiry, between 1 s and 60 s. */
static uint64_t ol_sweep_ms(const struct ol_config *c)
{
    uint64_t ms = (uint64_t)c->multipart_expiry_s * 500u;
    return ms < 1000 ? 1000 : ms > 60000 ? 60000 : ms;
}

static void ol_sweep_next(struct ol_core *core);

static void ol_sweep_done(void *ud, const struct ol_store_event *ev)
{
    struct ol_core *core = ud;
    core->sweeping = false;
    if (ev->type != OL_STORE_EV_DONE)
        return;
    if (ev->status == 0)
        core->swept++;
    else
        ol_warn("multipart expiry: removing an expired upload failed (%d); retried later",
                ev->status);
    if (atomic_load(&core->d->draining))
        return;
    if (ev->status == 0)
        ol_sweep_next(core);   /* the next expired one, if any */
    else
        ol_timer_arm(core->loop, &core->sweep, ol_sweep_ms(&core->d->cfg));
}

/* Removes one expired upload; done when there is none left. */
static void ol_sweep_next(struct ol_core *core)
{
    int rc = ol_store_mpu_cleanup(core->store, (uint64_t)time(NULL) * 1000000000ull,
                                  ol_sweep_done, core);
    if (rc == 0) {
        core->sweeping = true;
        return;
    }
    if (core->swept)
        ol_info("multipart expiry: %u incomplete upload%s older than %lld s removed",
                core->swept, core->swept == 1 ? "" : "s",
                (long long)core->d->cfg.multipart_expiry_s);
    core->swept = 0;
    if (!atomic_load(&core->d->draining))
        ol_timer_arm(core->loop, &core->sweep, ol_sweep_ms(&core->d->cfg));
}

static void ol_core_sweep(ol_loop *loop, struct ol_timer *t)
{
    struct ol_core *core = (struct ol_core *)((char *)t - offsetof(struct ol_core, sweep));
    (void)loop;
    if (!core->sweeping && !atomic_load(&core->d->draining))
        ol_sweep_next(core);
}

static void ol_core_on_drain(ol_loop *loop, struct ol_msg *m)
{
    struct ol_core *core = (struct ol_core *)((char *)m - offsetof(struct ol_core, drain_msg));
    ol_timer_cancel(loop, &core->sweep);
    ol_http_server_drain(core->s3);
    if (core->kv)
        ol_kv_server_drain(core->kv);
    ol_timer_arm(loop, &core->tick, 0);
}

static void ol_core_on_close(ol_loop *loop, struct ol_msg *m)
{
    struct ol_core *core = (struct ol_core *)((char *)m - offsetof(struct ol_core, close_msg));
    ol_http_server_close_all(core->s3);
    if (core->kv)
        ol_kv_server_close_all(core->kv);
    ol_timer_arm(loop, &core->tick, 0);
}

static int ol_core_init(ol_loop *loop, void *arg)
{
    struct ol_core *core = arg;
    struct ol_config *cfg = &core->d->cfg;
    int n = core->d->ncores;
    struct ol_http_limits lim = {
        .max_header_bytes = (uint32_t)cfg->http.max_header_bytes,
        .max_headers = (uint32_t)cfg->http.max_headers,
        .header_timeout_ms = (uint32_t)cfg->http.header_timeout_ms,
        .idle_timeout_ms = (uint32_t)cfg->http.idle_timeout_ms,
        .body_min_rate = (uint32_t)cfg->http.body_min_rate,
        .body_rate_window_ms = (uint32_t)cfg->http.body_rate_window_ms,
        .max_conns = (uint32_t)((cfg->http.max_connections + n - 1) / n),
        .max_body_bytes = cfg->http.max_body_bytes,
        .out_bufs = (uint32_t)cfg->http.output_buffers,
        .loopback_sndbuf = (uint32_t)cfg->http.loopback_sndbuf,
        .tls = core->d->tls,
    };
    struct ol_http_handler h = ol_admin_handler;
    h.ctx = core;
    core->tick.fn = ol_core_tick;
    core->sweep.fn = ol_core_sweep;
    core->drain_msg.fn = ol_core_on_drain;
    core->close_msg.fn = ol_core_on_close;
    if (ol_admin_init(core, core->err, sizeof core->err) < 0)
        return -1;
    if (core->d->store && ol_store_core_create(core->d->store, loop, &core->store) < 0) {
        snprintf(core->err, sizeof core->err, "object store: out of memory");
        return -1;
    }
    struct ol_s3_params sp = {.creds = &core->d->creds.view, .region = cfg->region,
                              .domain = cfg->s3_domain, .sigv2 = cfg->s3_sigv2,
                              .core = core->index, .loop = loop,
                              .store = core->store,
                              .store_all = core->d->store,
                              .catalog = core->d->catalog,
                              .debug = cfg->http.debug_endpoints};
    if (ol_s3_server_create(&sp, &core->s3api) < 0) {
        snprintf(core->err, sizeof core->err, "s3: out of memory");
        return -1;
    }
    if (ol_http_server_create(loop, cfg->s3_addr, &lim, &h, &core->s3, core->err,
                              sizeof core->err) < 0)
        return -1;
    if (core->d->kv && ol_kv_server_create(loop, core->index, core->d->kv, core->d->kv_servers,
                                           cfg->kv_addr, &core->kv, core->err,
                                           sizeof core->err) < 0)
        return -1;
    if (ol_daemon_kvpool_core(core->d, core->index) < 0) {
        snprintf(core->err, sizeof core->err, "kv pool: no session free on a shard");
        return -1;
    }
    if (core->index == 0 && core->store && cfg->multipart_expiry_s > 0)
        ol_timer_arm(loop, &core->sweep, ol_sweep_ms(cfg));
    return 0;
}

/* ---- main ------------------------------------------------------------------- */

/* The erasure sets over data_dirs: set_drive_count, or the largest divisor of
 * the drive count up to 16 (one set of all drives when it has none). */
static int ol_open_store(struct ol_daemon *d, char *err, size_t errlen)
{
    struct ol_config *c = &d->cfg;
    unsigned n = (unsigned)c->n_data_dirs, dps = (unsigned)c->set_drive_count;
    int parity = (int)c->default_parity_count;
    if (dps && n % dps && c->cluster.name[0]) {
        /* Sets that span nodes need the cluster store, which is not built
         * yet: this node stores on its own drives until then. */
        ol_warn("set_drive_count = %u spans nodes; the object store of this build keeps "
                "erasure sets on this node's %u drive%s", dps, n, n == 1 ? "" : "s");
        dps = 0;
        parity = -1;
    }
    if (dps == 0) {
        dps = n;
        for (unsigned k = n < 16 ? n : 16; k >= 1; k--)
            if (n % k == 0) {
                dps = k;
                break;
            }
    }
    const char *drives[OL_CONFIG_MAX_DATA_DIRS];
    for (unsigned i = 0; i < n; i++)
        drives[i] = c->data_dirs[i];
    struct ol_store_params p = {.drives = drives, .n = n, .drives_per_set = dps,
                                .parity = parity, .inline_max = c->inline_max_bytes,
                                .direct_io = c->direct_io ? 0 : -1,
                                .sync = c->store_sync == OL_SYNC_FSYNC,
                                .mpu_expiry_s = c->multipart_expiry_s ? c->multipart_expiry_s
                                                                      : -1};
    int rc = ol_store_open(&p, &d->store, err, errlen);
    if (rc < 0)
        return rc;
    for (unsigned i = 0; i < n && !p.sync; i++) {
        unsigned long fst;
        if (ol_store_drive_fd(d->store, i) >= 0 && !ol_store_drive_syncfs(d->store, i, &fst))
            ol_warn("drive %s: its filesystem (statfs type 0x%lx) is not one that syncfs is "
                    "known to make durable as a whole: its writes are synced file by file, as "
                    "with store_sync = \"fsync\" (docs/store.md)", drives[i], fst);
    }
    struct ol_catalog_info ci;
    unsigned mq = ol_layout_read_quorum(ol_store_drives_per_set(d->store),
                                        ol_store_parity(d->store));
    rc = ol_catalog_open(drives, n, mq, &d->catalog, &ci, err, errlen);
    if (rc == 0)
        ol_store_set_catalog(d->store, d->catalog);   /* kept by the engine's commits */
    if (rc == 0)
        ol_info("listing indexes: %u bucket%s, %llu keys, %u rebuilt from %llu metadata "
                "files, %.2f s", ci.buckets, ci.buckets == 1 ? "" : "s", ci.keys, ci.rebuilt,
                ci.metas, ci.seconds);
    return rc;
}

static void ol_banner(struct ol_daemon *d)
{
    struct ol_config *c = &d->cfg;
    int port = ol_http_server_port(d->cores[0].s3);
    char host[300];
    snprintf(host, sizeof host, "%s", c->s3_addr);
    char *colon = strrchr(host, ':');
    if (colon)
        *colon = 0;
    if (!strcmp(host, "0.0.0.0") || !host[0])
        snprintf(host, sizeof host, "127.0.0.1");
    printf("openlaked %s (%s) serving on %d core%s\n", OL_VERSION, OL_GIT_COMMIT, d->ncores,
           d->ncores == 1 ? "" : "s");
    const char *scheme = d->tls ? "https" : "http";
    printf("  S3 endpoint:  %s://%s:%d   (region %s; signed requests only%s)\n", scheme, host,
           port, c->region, d->tls ? "; TLS" : "");
    if (d->creds.generated)   /* printed this once: the file keeps it */
        printf("  S3 access key: %s\n  S3 secret key: %s\n  (generated; kept in %s, mode "
               "0600)\n", d->creds.access_key[0], d->creds.secret[0], d->creds.path);
    else if (d->creds.path[0])
        printf("  S3 credentials: in %s (mode 0600)\n", d->creds.path);
    else
        printf("  S3 credentials: %d configured\n", d->creds.n);
    printf("  health:       curl %s://%s:%d/_openlake/health/live\n", scheme, host, port);
    printf("  readiness:    curl %s://%s:%d/_openlake/health/ready\n", scheme, host, port);
    printf("  metrics:      curl %s://%s:%d/_openlake/metrics\n", scheme, host, port);
    if (d->kv) {
        printf("  KV (TCP):     %s   (port %d)\n", c->kv_addr, ol_kv_server_port(d->cores[0].kv));
        printf("  KV (Unix):    %s\n", d->kv->sock_path);
        if (d->kvucx)
            printf("  KV (UCX):     %s   (openlake_device \"ucx\")\n", c->kv_ucx_addr);
        struct ol_kv_hugetlb_pool pool;
        ol_kv_hugetlb_pool_read(&pool);
        char what[320];
        printf("  KV slab:      %.1f GiB in %d shard%s, %s\n",
               (double)d->kv->tenants[0].slab.size / (1 << 30), d->kv->nshards,
               d->kv->nshards == 1 ? "" : "s",
               ol_kv_slab_backing_text(&d->kv->tenants[0].slab, &pool, what, sizeof what));
        for (int i = 1; i < d->kv->ntenants; i++) /* names and sizes; never a token */
            printf("  KV tenant:    %s, slab %.2f GiB (its own token and namespaces)\n",
                   d->kv->tenants[i].name, (double)d->kv->tenants[i].slab.size / (1 << 30));
        if (d->kv->token_path[0])
            printf("  KV token:     in %s (mode 0600; clients present it in HELLO)\n",
                   d->kv->token_path);
        else if (c->kv_token_file[0])
            printf("  KV token:     from %s (kv_token_file)\n", c->kv_token_file);
    }
    printf("  data dir:     %s\n", c->data_dirs[0]);
    if (c->cluster.name[0])
        printf("  cluster:      %s, node %lld, etcd %s%s (openlake cluster status --etcd %s "
               "--cluster %s)\n", c->cluster.name, (long long)c->self_id, c->cluster.etcd[0],
               c->cluster.n_etcd > 1 ? " ..." : "", c->cluster.etcd[0], c->cluster.name);
    printf("Stop with Ctrl-C (SIGINT) or SIGTERM.\n");
    fflush(stdout);
}

#define OL_HEAP_MMAP (32 << 20)   /* larger allocations are mapped */
#define OL_HEAP_KEEP (64 << 20)   /* free bytes an arena keeps at its top */

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            ol_usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--version")) {
            printf("openlaked %s (commit %s)\n", OL_VERSION, OL_GIT_COMMIT);
            return 0;
        }
        if (!strcmp(argv[i], "--help-config")) {
            ol_config_print_keys(stdout);
            return 0;
        }
    }

    /* Buffers of up to a few MiB (node RPC frames, values in flight, EC
     * stripes) come from the heap and go back to it: glibc's defaults map
     * such a buffer fresh and unmap it at free, or trim the heap a few MiB
     * past its top, so each one was faulted in and zeroed page by page
     * again (a quarter of the node RPC's CPU per GB; docs/benchmarks.md).
     * Bound: each malloc arena (about one per thread: the net loop, each
     * data core) keeps at most OL_HEAP_KEEP free at its top after a burst. */
    mallopt(M_MMAP_THRESHOLD, OL_HEAP_MMAP);
    mallopt(M_TRIM_THRESHOLD, OL_HEAP_KEEP);

    static struct ol_daemon d;
    char err[1024];
    if (ol_config_load(&d.cfg, argc, argv, environ, err, sizeof err) < 0) {
        fprintf(stderr, "openlaked: %s\n", err);
        return 2;
    }
    ol_log_set_level((enum ol_log_level)d.cfg.log_level);
    for (int i = 0; ol_config_secret_warning(&d.cfg, i, err, sizeof err); i++)
        ol_warn("%s", err);
    for (int i = 0; ol_config_unused_warning(&d.cfg, i, err, sizeof err); i++)
        ol_warn("%s", err);
#ifdef OL_FAULTS
    if (ol_fault_set_env(err, sizeof err) < 0) {
        fprintf(stderr, "openlaked: %s: %s\n", OL_FAULT_ENV, err);
        return 2;
    }
    if (getenv(OL_FAULT_ENV) && *getenv(OL_FAULT_ENV))
        ol_warn("fault injection on: %s=\"%s\"", OL_FAULT_ENV, getenv(OL_FAULT_ENV));
#else
    if (getenv(OL_FAULT_ENV))
        ol_warn("%s is ignored: this build has no fault injection (the ASan build has)",
                OL_FAULT_ENV);
#endif

    /* Before anything in the data dirs is read: a second openlaked on them
     * stops here, having changed nothing. */
    if (ol_daemon_dirs(&d, err, sizeof err) < 0) {
        fprintf(stderr, "openlaked: %s\n", err);
        return 2;
    }

    if (ol_s3_creds_load(&d.cfg, d.cfg.data_dirs[0], &d.creds, err, sizeof err) < 0) {
        fprintf(stderr, "openlaked: S3 credentials: %s\n", err);
        return 2;
    }

    if (d.cfg.s3_tls_cert[0] &&
        ol_tls_ctx_new(d.cfg.s3_tls_cert, d.cfg.s3_tls_key, &d.tls, err, sizeof err) < 0) {
        fprintf(stderr, "openlaked: %s\n", err);
        return 2;
    }
    /* a cluster store opens once the cluster and its node RPC run (below) */
    if (d.cfg.mode != OL_MODE_KV && !d.cfg.cluster.n_store_pools &&
        ol_open_store(&d, err, sizeof err) < 0) {
        fprintf(stderr, "openlaked: object store: %s\n", err);
        return 2;
    }
    /* Every thread from here on (the healer, the loops) inherits this mask:
     * SIGINT / SIGTERM reach only the main thread, which shuts down in
     * order. (A thread started before it would take a SIGTERM's default
     * action: the process dies with 143.) */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (d.store) {
        struct ol_healer_params hp = {
            .queue_size = (unsigned)d.cfg.heal_queue_size,
            .scan_rate = (uint64_t)d.cfg.heal_scan_rate_mbps * 1000000u,
            .scan_interval_s = (uint64_t)d.cfg.heal_scan_interval_s,
            .rebuild = true};
        int hrc = ol_healer_start(d.store, &hp, &d.healer);
        if (hrc < 0) {
            fprintf(stderr, "openlaked: healer: %s\n", strerror(-hrc));
            return 2;
        }
    }

    if (ol_net_listen_probe(d.cfg.s3_addr, err, sizeof err) < 0) {
        fprintf(stderr, "openlaked: s3_addr: %s\n", err);
        return 2;
    }

    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (online < 1)
        online = 1;
    d.ncores = d.cfg.threads > 0 ? (int)d.cfg.threads : (int)online;

    if (d.cfg.mode != OL_MODE_S3) {
        if (ol_net_listen_probe(d.cfg.kv_addr, err, sizeof err) < 0) {
            fprintf(stderr, "openlaked: kv_addr: %s\n", err);
            return 2;
        }
        if (ol_kv_service_create(&d.kv, &d.cfg, d.ncores, err, sizeof err) < 0) {
            fprintf(stderr, "openlaked: kv: %s\n", err);
            return 2;
        }
        d.kv_servers = calloc((size_t)d.ncores, sizeof *d.kv_servers);
    }
    /* Before the first listener opens: a node id another live node holds
     * stops this one here. */
    if (ol_daemon_cluster_join(&d, err, sizeof err) < 0) {
        fprintf(stderr, "openlaked: %s\n", err);
        return 2;
    }
    if (ol_daemon_cstore_prepare(&d, err, sizeof err) < 0) {
        fprintf(stderr, "openlaked: object store: %s\n", err);
        ol_cluster_stop(d.cluster);
        return 2;
    }
    if (ol_daemon_kvpool_create(&d, err, sizeof err) < 0 ||
        ol_daemon_net_start(&d, err, sizeof err) < 0) {
        fprintf(stderr, "openlaked: %s\n", err);
        ol_cluster_stop(d.cluster);
        return 2;
    }
    if (d.cstore && ol_daemon_cstore_open(&d, err, sizeof err) < 0) {
        fprintf(stderr, "openlaked: object store: %s\n", err);
        ol_daemon_net_stop(&d);
        ol_cluster_stop(d.cluster);
        return 2;
    }

    d.cores = calloc((size_t)d.ncores, sizeof *d.cores);
    if (!d.cores) {
        fprintf(stderr, "openlaked: out of memory\n");
        return 1;
    }
    int started = 0, status = 0;
    for (int i = 0; i < d.ncores; i++) {
        struct ol_core *core = &d.cores[i];
        core->index = i;
        core->d = &d;
        struct ol_loop_params p = {.index = i, .cpu = (int)(i % online)};
        if (ol_loop_create(&p, &core->loop, err, sizeof err) < 0) {
            fprintf(stderr, "openlaked: core %d: %s\n", i, err);
            status = 2;
            break;
        }
        if (ol_loop_start(core->loop, ol_core_init, core) < 0) {
            fprintf(stderr, "openlaked: core %d: %s\n", i, core->err[0] ? core->err : "start failed");
            status = 2;
            ol_http_server_destroy(core->s3);
            ol_kv_server_destroy(core->kv);
            ol_admin_exit(core);
            ol_s3_server_destroy(core->s3api);
            ol_store_core_destroy(core->store);
            ol_loop_destroy(core->loop);
            core->loop = NULL;
            break;
        }
        started++;
    }

    if (status == 0 && ol_daemon_kvucx_start(&d, err, sizeof err) < 0) {
        fprintf(stderr, "openlaked: %s\n", err);
        status = 2;
        for (int i = 0; i < started; i++)
            ol_loop_stop(d.cores[i].loop);
    }
    if (status == 0) {
        /* Ready: every core serves, and what it serves is whole: the object
         * store and its listing indexes were opened, the KV service created
         * with its disk tier recovered (ol_kv_service_create reads every
         * shard's index), all before the first listener opened. Until now
         * health/ready answered 503 and KV HELLO BUSY "starting; retry". */
        /* "active" in etcd before health/ready answers 200: whoever sees the
         * node ready finds it active in the cluster too. */
        ol_daemon_kvpool_ready(&d);
        int drc = ol_admin_disks_start(&d);
        if (drc < 0)
            ol_warn("cannot start the disks thread (%s): GET /_openlake/disks answers 503",
                    strerror(-drc));
        ol_daemon_cluster_serving(&d);   /* "active", or "draining" when asked to drain */
        if (ol_daemon_cstore_owners_start(&d, err, sizeof err) < 0)
            ol_warn("object store: %s: this node owns no set", err);
        atomic_store(&d.ready, 1);
        if (d.kv)
            atomic_store(&d.kv->ready, !atomic_load(&d.ready_held));
        ol_banner(&d);
        ol_info("openlaked started: %d cores, S3/admin on %s", d.ncores, d.cfg.s3_addr);
        /* The slabs' pages, now that the daemon serves: a client's first
         * writes need not wait for the kernel to allocate them
         * (kv/populate.h). A daemon that cannot start the thread still
         * serves; pages come at first use as with populate = "off". */
        int prc = d.kv && d.cfg.kv_slab.populate == OL_KV_POPULATE_BACKGROUND
                      ? ol_kv_populate_start(d.kv, &d.kv_pop)
                      : 0;
        if (prc < 0)
            ol_warn("kv slab: cannot start populating it (%s); pages come at first use",
                    strerror(-prc));
        int signals = 0;
        struct timespec deadline = {0};
        int closing = 0;
        for (;;) {
            int alive = 0;
            for (int i = 0; i < started; i++)
                alive += ol_loop_running(d.cores[i].loop);
            if (!alive)
                break;
            struct timespec ts = {.tv_sec = 0, .tv_nsec = 100 * 1000000L};
            int sig = sigtimedwait(&sigs, NULL, &ts);
            ol_daemon_cluster_tick(&d);   /* the drain key followed */
            if (sig == SIGINT || sig == SIGTERM) {
                if (++signals > 1) {
                    fprintf(stderr, "openlaked: second signal, exiting now\n");
                    _exit(1);
                }
                ol_info("signal %d: shutting down (finishing in-flight requests, at most %lld ms)",
                        sig, (long long)d.cfg.http.shutdown_timeout_ms);
                ol_daemon_kvpool_close(&d);
                ol_daemon_kvucx_quiesce(&d);   /* no hand-over lands after the drain */
                atomic_store(&d.draining, 1);
                ol_cluster_set_state(d.cluster, "leaving");
                for (int i = 0; i < started; i++)
                    ol_loop_post(d.cores[i].loop, &d.cores[i].drain_msg);
                clock_gettime(CLOCK_MONOTONIC, &deadline);
                deadline.tv_sec += d.cfg.http.shutdown_timeout_ms / 1000;
                deadline.tv_nsec += (long)(d.cfg.http.shutdown_timeout_ms % 1000) * 1000000L;
            }
            if (signals && !closing) {
                struct timespec now;
                clock_gettime(CLOCK_MONOTONIC, &now);
                if (now.tv_sec > deadline.tv_sec ||
                    (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec)) {
                    ol_warn("shutdown timeout: closing the remaining connections");
                    closing = 1;
                    atomic_store(&d.closing, 1);
                    for (int i = 0; i < started; i++)
                        ol_loop_post(d.cores[i].loop, &d.cores[i].close_msg);
                }
            }
        }
    } else {
        for (int i = 0; i < started; i++)
            ol_loop_stop(d.cores[i].loop);
    }

    ol_daemon_kvucx_quiesce(&d);     /* (done at the signal; here for any other way out) */
    for (int i = 0; i < started; i++) {
        ol_loop_join(d.cores[i].loop);
        ol_http_server_destroy(d.cores[i].s3);
        ol_kv_server_destroy(d.cores[i].kv);
        ol_admin_exit(&d.cores[i]);
        ol_s3_server_destroy(d.cores[i].s3api);
        ol_store_core_destroy(d.cores[i].store);
        ol_loop_destroy(d.cores[i].loop);
    }
    ol_daemon_kvucx_stop(&d);
    free(d.cores);
    ol_admin_disks_stop(&d);
    ol_daemon_cstore_owners_stop(&d);   /* its FENCE calls need the node RPC */
    ol_daemon_net_stop(&d);
    ol_daemon_kvpool_destroy(&d);
    ol_cluster_stop(d.cluster);      /* leaves now: the lease is revoked (its sets with it) */
    ol_healer_stop(d.healer);
    if (d.store) {
        int crc = ol_catalog_close(d.catalog);
        if (crc == -ESTALE)
            ol_warn("listing indexes not saved (they were marked dirty): the next start "
                    "rebuilds them");
        else if (crc < 0)
            ol_warn("could not save the listing indexes: the next start rebuilds them");
        ol_store_close(d.store);
    }
    ol_daemon_cstore_close(&d);
    free(d.kv_servers);
    ol_kv_populate_stop(d.kv_pop);   /* before the slabs go */
    ol_kv_service_destroy(d.kv);
    ol_tls_ctx_free(d.tls);
    ol_dirlock_destroy(d.locks);
    if (status == 0)
        ol_info("openlaked stopped");
    return status;
}
