/*
 * test_config.c - unit tests of the config module (src/base/config.c).
 *
 * Covers: defaults; a deployment file written the way existing clusters
 * write theirs; precedence defaults < file < flags < environment; the
 * kv-mode rpc_addr rule; every kind of error with its exact message;
 * did-you-mean for keys, flags and variables; cross-key checks; the
 * credential pair from flags/env; secrets read from *_file keys, and the
 * warnings about secrets on the command line or in loose files; address
 * validation; dump round trip; and that docs/configuration.md carries the
 * key list byte for byte.
 */
#include "olt.h"

#include "base/config.h"
#include "base/log.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static char err[1024];

static struct ol_config *cfg(void)
{
    struct ol_config *c = malloc(sizeof *c);
    OLT_CHECK(c != NULL);
    ol_config_defaults(c);
    return c;
}

static int load(struct ol_config *c, const char *text)
{
    return ol_config_load_buffer(c, "openlake.toml", text, strlen(text), err,
                                 sizeof err);
}

/* Applies flags given as a NULL-terminated list (argv[0] is added). */
static int args(struct ol_config *c, ...)
{
    char *argv[64];
    int argc = 0;
    argv[argc++] = (char *)"openlaked";
    va_list ap;
    va_start(ap, c);
    for (char *a; (a = va_arg(ap, char *)) != NULL && argc < 63;)
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    return ol_config_apply_args(c, argc, argv, err, sizeof err);
}

/* Applies "NAME=value" strings given as a NULL-terminated list. */
static int env(struct ol_config *c, ...)
{
    char *envp[64];
    int n = 0;
    va_list ap;
    va_start(ap, c);
    for (char *a; (a = va_arg(ap, char *)) != NULL && n < 63;)
        envp[n++] = a;
    va_end(ap);
    envp[n] = NULL;
    return ol_config_apply_env(c, envp, err, sizeof err);
}

static int finalize(struct ol_config *c)
{
    return ol_config_finalize(c, err, sizeof err);
}

/* The file must be rejected with exactly `want`, at load or finalize. */
#define FILE_ERR(text, want)                                                 \
    do {                                                                     \
        struct ol_config *c_ = cfg();                                        \
        int rc_ = load(c_, text);                                            \
        if (rc_ == 0)                                                        \
            rc_ = finalize(c_);                                              \
        if (rc_ == 0)                                                        \
            olt_fail(__FILE__, __LINE__, "accepted:\n%s", text);             \
        OLT_CHECK_STR(err, want);                                            \
        free(c_);                                                            \
    } while (0)

#define ARGS_ERR(want, ...)                                                  \
    do {                                                                     \
        struct ol_config *c_ = cfg();                                        \
        OLT_CHECK_EQ(args(c_, __VA_ARGS__, (char *)NULL), -1);               \
        OLT_CHECK_STR(err, want);                                            \
        free(c_);                                                            \
    } while (0)

/* Unknown OPENLAKE_* variables are ignored (a warning on stderr), not errors:
 * orchestrators inject variables with our prefix. */
#define ENV_IGNORED(...)                                                     \
    do {                                                                     \
        struct ol_config *c_ = cfg();                                        \
        OLT_CHECK_EQ(env(c_, __VA_ARGS__, (char *)NULL), 0);                 \
        free(c_);                                                            \
    } while (0)

#define ENV_ERR(want, ...)                                                   \
    do {                                                                     \
        struct ol_config *c_ = cfg();                                        \
        OLT_CHECK_EQ(env(c_, __VA_ARGS__, (char *)NULL), -1);                \
        OLT_CHECK_STR(err, want);                                            \
        free(c_);                                                            \
    } while (0)

static const char deployment[] =
    "# openlake cluster, node 2 (KV tier)\n"
    "self_id = 2\n"
    "mode = \"kv\"\n"
    "rpc_addr = \"10.0.0.12:9100\"\n"
    "data_dirs = [\"/mnt/nvme0/openlake\", \"/mnt/nvme1/openlake\"]\n"
    "\n"
    "[[credentials]]\n"
    "access_key = \"openlake\"\n"
    "secret_key = \"openlake-secret\"\n"
    "\n"
    "[[credentials]]\n"
    "access_key = \"ci-runner\"\n"
    "secret_key = \"ci-runner-secret-key\"\n"
    "\n"
    "[cluster]\n"
    "name = \"prod\"\n"
    "etcd = [\"http://10.0.0.10:2379\", \"http://10.0.0.11:2379\"]\n"
    "secret = \"0123456789abcdef0123456789abcdef\"\n"
    "rpc_window_bytes = 4194304\n"
    "\n"
    "[kv_slab]\n"
    "cpu_ram_frac = 0.5\n"
    "capacity_gb = 64\n"
    "reserve_ttl_secs = 30\n"
    "\n"
    "[rdma]\n"
    "backend = \"none\"\n"
    "devices = [\"mlx5_0:1\", \"mlx5_1:1\"]\n"
    "gid_index = 3\n";

OLT_TEST(config_defaults)
{
    struct ol_config *c = cfg();
    OLT_CHECK_EQ(c->self_id, 0);
    OLT_CHECK_EQ(c->mode, OL_MODE_ALL);
    OLT_CHECK_EQ(c->transport, OL_TRANSPORT_TCP);
    OLT_CHECK_STR(c->rpc_addr, "127.0.0.1:9100");
    OLT_CHECK_STR(c->s3_addr, "127.0.0.1:9000");
    OLT_CHECK_STR(c->kv_addr, "127.0.0.1:9400");
    OLT_CHECK_STR(c->region, "us-east-1");
    OLT_CHECK_EQ(c->n_data_dirs, 1);
    OLT_CHECK_STR(c->data_dirs[0], "./data");
    OLT_CHECK_EQ(c->set_drive_count, 0);
    OLT_CHECK_EQ(c->default_parity_count, -1);
    OLT_CHECK_EQ(c->n_credentials, 0);
    OLT_CHECK(c->kv_slab.cpu_ram_frac == 0.0);
    OLT_CHECK(c->kv_slab.capacity_gb == 0.0);
    OLT_CHECK_EQ(c->kv_slab.reserve_ttl_secs, 30);
    OLT_CHECK_EQ(c->rdma.backend, OL_RDMA_NONE);
    OLT_CHECK_EQ(c->rdma.n_devices, 0);
    OLT_CHECK_EQ(c->rdma.gid_index, -1);
    OLT_CHECK_EQ(c->threads, 0);
    OLT_CHECK_EQ(c->log_level, OL_LOG_INFO);
    OLT_CHECK_EQ(c->http.max_header_bytes, 16384);
    OLT_CHECK_EQ(c->http.max_headers, 100);
    OLT_CHECK_EQ(c->http.header_timeout_ms, 10000);
    OLT_CHECK_EQ(c->http.idle_timeout_ms, 60000);
    OLT_CHECK_EQ(c->http.max_connections, 10000);
    OLT_CHECK(c->http.max_body_bytes == 5ull << 30);
    OLT_CHECK_EQ(c->http.shutdown_timeout_ms, 10000);
    OLT_CHECK(!c->http.debug_endpoints);
    OLT_CHECK_STR(c->config_file, "");
    OLT_CHECK(!ol_config_is_set(c, "s3_addr"));
    /* log_level indexes follow enum ol_log_level */
    OLT_CHECK_EQ(args(c, "--log-level", "error", (char *)NULL), 0);
    OLT_CHECK_EQ(c->log_level, OL_LOG_ERROR);
    OLT_CHECK_EQ(args(c, "--log-level", "warn", (char *)NULL), 0);
    OLT_CHECK_EQ(c->log_level, OL_LOG_WARN);
    OLT_CHECK_EQ(args(c, "--log-level", "debug", (char *)NULL), 0);
    OLT_CHECK_EQ(c->log_level, OL_LOG_DEBUG);
    /* an empty configuration finalizes as is */
    ol_config_defaults(c);
    OLT_CHECK_EQ(finalize(c), 0);
    free(c);
}

OLT_TEST(config_deployment_file_accepted_as_written)
{
    struct ol_config *c = cfg();
    OLT_CHECK_EQ(load(c, deployment), 0);
    OLT_CHECK_EQ(finalize(c), 0);
    OLT_CHECK_EQ(c->self_id, 2);
    OLT_CHECK_EQ(c->mode, OL_MODE_KV);
    OLT_CHECK_STR(c->rpc_addr, "10.0.0.12:9100");
    OLT_CHECK_STR(c->kv_addr, "127.0.0.1:9400");  /* a cluster node's rpc_addr is its own */
    OLT_CHECK_EQ(c->n_data_dirs, 2);
    OLT_CHECK_STR(c->data_dirs[1], "/mnt/nvme1/openlake");
    OLT_CHECK_EQ(c->n_credentials, 2);
    OLT_CHECK_STR(c->credentials[0].access_key, "openlake");
    OLT_CHECK_STR(c->credentials[0].secret_key, "openlake-secret");
    OLT_CHECK_STR(c->credentials[1].access_key, "ci-runner");
    OLT_CHECK_EQ(c->credentials[1].origin.source, OL_CONFIG_FILE);
    OLT_CHECK_EQ(c->credentials[1].origin.line, 11);
    OLT_CHECK_STR(c->cluster.name, "prod");
    OLT_CHECK_EQ(c->cluster.n_etcd, 2);
    OLT_CHECK_EQ(c->cluster.rpc_window_bytes, 4194304);
    OLT_CHECK_EQ(strlen(c->cluster.secret), 32);
    OLT_CHECK(c->kv_slab.cpu_ram_frac == 0.5);
    OLT_CHECK(c->kv_slab.capacity_gb == 64.0);
    OLT_CHECK_EQ(c->kv_slab.reserve_ttl_secs, 30);
    OLT_CHECK_EQ(c->rdma.backend, OL_RDMA_NONE);
    OLT_CHECK_EQ(c->rdma.n_devices, 2);
    OLT_CHECK_STR(c->rdma.devices[0], "mlx5_0:1");
    OLT_CHECK_EQ(c->rdma.gid_index, 3);
    OLT_CHECK_STR(c->config_file, "openlake.toml");
    char o[128];
    OLT_CHECK_STR(ol_config_origin_of(c, "rpc_addr", o, sizeof o), "openlake.toml:4");
    OLT_CHECK_STR(ol_config_origin_of(c, "kv_slab.capacity_gb", o, sizeof o), "openlake.toml:23");
    OLT_CHECK_STR(ol_config_origin_of(c, "kv_addr", o, sizeof o), "default");
    OLT_CHECK(ol_config_origin_of(c, "nope", o, sizeof o) == NULL);
    OLT_CHECK(ol_config_is_set(c, "rdma.devices"));
    OLT_CHECK(!ol_config_is_set(c, "threads"));
    OLT_CHECK(!ol_config_is_set(c, "nope"));
    free(c);
}

OLT_TEST(config_full_toml_forms)
{
    /* the same settings written with dotted keys, inline tables, quoted
     * keys and an inline-table array are just as good */
    struct ol_config *c = cfg();
    OLT_CHECK_EQ(load(c,
        "kv_slab.capacity_gb = 1.5\n"
        "'region' = \"eu-west-1\"\n"
        "http = { max_headers = 50, debug_endpoints = true }\n"
        "credentials = [ { access_key = \"abc\", secret_key = \"12345678\" } ]\n"
        "data_dirs = [\n  '/a',  # first\n  '/b',\n]\n"
        "http_unused_table_is_fine = 0\n"), -1);
    OLT_CHECK_STR(err, "openlake.toml:9: unknown key \"http_unused_table_is_fine\"");
    ol_config_defaults(c);
    OLT_CHECK_EQ(load(c,
        "kv_slab.capacity_gb = 1.5\n"
        "'region' = \"eu-west-1\"\n"
        "http = { max_headers = 50, debug_endpoints = true }\n"
        "credentials = [ { access_key = \"abc\", secret_key = \"12345678\" } ]\n"
        "data_dirs = [\n  '/a',  # first\n  '/b',\n]\n"
        "threads = 0x10\n"
        "http.max_body_bytes = 1_000_000\n"), -1);
    /* http was defined by an inline table, so the dotted key is a TOML error */
    OLT_CHECK_STR(err, "openlake.toml:10:1: cannot add keys to \"http\" with a dotted key: it is an inline table (line 3)");
    ol_config_defaults(c);
    OLT_CHECK_EQ(load(c,
        "kv_slab.capacity_gb = 1.5\n"
        "'region' = \"eu-west-1\"\n"
        "http = { max_headers = 50, debug_endpoints = true }\n"
        "credentials = [ { access_key = \"abc\", secret_key = \"12345678\" } ]\n"
        "data_dirs = [\n  '/a',  # first\n  '/b',\n]\n"
        "threads = 0x10\n"), 0);
    OLT_CHECK(c->kv_slab.capacity_gb == 1.5);
    OLT_CHECK_STR(c->region, "eu-west-1");
    OLT_CHECK_EQ(c->http.max_headers, 50);
    OLT_CHECK(c->http.debug_endpoints);
    OLT_CHECK_EQ(c->n_credentials, 1);
    OLT_CHECK_STR(c->credentials[0].secret_key, "12345678");
    OLT_CHECK_EQ(c->n_data_dirs, 2);
    OLT_CHECK_EQ(c->threads, 16);
    /* a NULL name stands in as "<config>" */
    OLT_CHECK_EQ(ol_config_load_buffer(c, NULL, "threads = -2", 12, err, sizeof err), -1);
    OLT_CHECK_STR(err, "<config>:1: threads: expected an integer from 0 to 256, got integer -2");
    OLT_CHECK_EQ(ol_config_load_buffer(c, NULL, "threads = ", 10, err, sizeof err), -1);
    OLT_CHECK_STR(err, "<config>:1:11: expected a value, found end of input");
    /* a list given again replaces the whole list */
    OLT_CHECK_EQ(load(c, "data_dirs = ['/z']\n[[credentials]]\naccess_key = 'xyz'\nsecret_key = 'abcdefgh'\n"), 0);
    OLT_CHECK_EQ(c->n_data_dirs, 1);
    OLT_CHECK_STR(c->data_dirs[0], "/z");
    OLT_CHECK_EQ(c->n_credentials, 1);
    OLT_CHECK_STR(c->credentials[0].access_key, "xyz");
    free(c);
}

OLT_TEST(config_kv_mode_takes_rpc_addr)
{
    struct ol_config *c = cfg();
    /* mode kv, rpc_addr set, kv_addr not: kv_addr = rpc_addr */
    OLT_CHECK_EQ(load(c, "mode = \"kv\"\nrpc_addr = \"10.1.2.3:7000\"\n"), 0);
    OLT_CHECK_EQ(finalize(c), 0);
    OLT_CHECK_STR(c->kv_addr, "10.1.2.3:7000");
    /* kv_addr set explicitly wins */
    ol_config_defaults(c);
    OLT_CHECK_EQ(load(c, "mode = \"kv\"\nrpc_addr = \"10.1.2.3:7000\"\nkv_addr = \"10.1.2.3:7400\"\n"), 0);
    OLT_CHECK_EQ(finalize(c), 0);
    OLT_CHECK_STR(c->kv_addr, "10.1.2.3:7400");
    /* ... also when it is set by a flag or the environment */
    ol_config_defaults(c);
    OLT_CHECK_EQ(load(c, "mode = \"kv\"\nrpc_addr = \"10.1.2.3:7000\"\n"), 0);
    OLT_CHECK_EQ(env(c, "OPENLAKE_KV_ADDR=127.0.0.1:9400", (char *)NULL), 0);
    OLT_CHECK_EQ(finalize(c), 0);
    OLT_CHECK_STR(c->kv_addr, "127.0.0.1:9400");
    /* mode all: no change */
    ol_config_defaults(c);
    OLT_CHECK_EQ(load(c, "rpc_addr = \"10.1.2.3:7000\"\n"), 0);
    OLT_CHECK_EQ(finalize(c), 0);
    OLT_CHECK_STR(c->kv_addr, "127.0.0.1:9400");
    /* mode kv with nothing set keeps the default KV address */
    ol_config_defaults(c);
    OLT_CHECK_EQ(args(c, "--mode", "kv", (char *)NULL), 0);
    OLT_CHECK_EQ(finalize(c), 0);
    OLT_CHECK_STR(c->kv_addr, "127.0.0.1:9400");
    /* mode and rpc_addr from the environment */
    ol_config_defaults(c);
    OLT_CHECK_EQ(env(c, "OPENLAKE_MODE=kv", "OPENLAKE_RPC_ADDR=[::1]:9100", (char *)NULL), 0);
    OLT_CHECK_EQ(finalize(c), 0);
    OLT_CHECK_STR(c->kv_addr, "[::1]:9100");
    free(c);
}

OLT_TEST(config_precedence_file_flags_env)
{
    const char *dir = olt_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/openlake.toml", dir);
    FILE *f = fopen(path, "w");
    OLT_CHECK(f != NULL);
    fputs("threads = 2\ns3_addr = \"127.0.0.1:9001\"\nregion = \"file-region\"\n"
          "data_dirs = [\"/file\"]\n[http]\nmax_headers = 10\n", f);
    fclose(f);
    char *argv[] = {"openlaked", "--config", path, "--threads", "3",
                    "--s3-addr", "127.0.0.1:9002", "--data-dirs=/flag1,/flag2",
                    "--http.max-headers=20", NULL};
    char *envp[] = {"PATH=/bin", "OPENLAKE_THREADS=4",
                    "OPENLAKE_HTTP_MAX_HEADERS=30", "HOME=/root", NULL};
    struct ol_config *c = malloc(sizeof *c);
    OLT_CHECK_EQ(ol_config_load(c, 9, argv, envp, err, sizeof err), 0);
    OLT_CHECK_EQ(c->threads, 4);                     /* env */
    OLT_CHECK_STR(c->s3_addr, "127.0.0.1:9002");     /* flag */
    OLT_CHECK_STR(c->region, "file-region");         /* file */
    OLT_CHECK_EQ(c->n_data_dirs, 2);                 /* flag list replaces */
    OLT_CHECK_STR(c->data_dirs[1], "/flag2");
    OLT_CHECK_EQ(c->http.max_headers, 30);
    OLT_CHECK_STR(c->config_file, path);
    char o[600], want[600];
    OLT_CHECK_STR(ol_config_origin_of(c, "threads", o, sizeof o), "environment OPENLAKE_THREADS");
    OLT_CHECK_STR(ol_config_origin_of(c, "s3_addr", o, sizeof o), "flag --s3-addr");
    snprintf(want, sizeof want, "%s:3", path);
    OLT_CHECK_STR(ol_config_origin_of(c, "region", o, sizeof o), want);
    /* no --config: defaults, flags, env */
    char *argv2[] = {"openlaked", "--threads", "3", NULL};
    OLT_CHECK_EQ(ol_config_load(c, 3, argv2, envp, err, sizeof err), 0);
    OLT_CHECK_EQ(c->threads, 4);
    OLT_CHECK_STR(c->region, "us-east-1");
    OLT_CHECK_STR(c->config_file, "");
    /* an error in any stage comes back */
    char *argv3[] = {"openlaked", "--config", "/nonexistent/openlake.toml", NULL};
    OLT_CHECK_EQ(ol_config_load(c, 3, argv3, envp, err, sizeof err), -1);
    OLT_CHECK_STR(err, "/nonexistent/openlake.toml: cannot open: No such file or directory");
    char *envp2[] = {"OPENLAKE_THREDS=1", NULL}; /* ignored with a warning */
    OLT_CHECK_EQ(ol_config_load(c, 1, argv, envp2, err, sizeof err), 0);
    free(c);
}

OLT_TEST(config_flag_forms)
{
    struct ol_config *c = cfg();
    OLT_CHECK_EQ(args(c,
        "--threads", "3", "--s3_addr=127.0.0.1:9001", "--kv-slab.capacity-gb", "4.5",
        "--kv_slab.reserve_ttl_secs=60", "--kv-slab.cpu_ram-frac", "0.25",
        "--http.debug-endpoints", "--log-level", "debug",
        "--data-dirs", " /a , /b ", "--rdma.devices", "mlx5_0:1,mlx5_1:1",
        "--config", "ignored.toml", "--config=also-ignored", "--help", "-h",
        "--help-config", "--version", "--default-parity-count", "-1",
        "--http.max-body-bytes", "18446744073709551615", (char *)NULL), -1);
    OLT_CHECK_STR(err, "command line: --http.max-body-bytes: expected an integer >= 0, got \"18446744073709551615\"");
    OLT_CHECK_EQ(c->threads, 3);
    OLT_CHECK_STR(c->s3_addr, "127.0.0.1:9001");
    OLT_CHECK(c->kv_slab.capacity_gb == 4.5);
    OLT_CHECK_EQ(c->kv_slab.reserve_ttl_secs, 60);
    OLT_CHECK(c->kv_slab.cpu_ram_frac == 0.25);
    OLT_CHECK(c->http.debug_endpoints);
    OLT_CHECK_EQ(c->log_level, OL_LOG_DEBUG);
    OLT_CHECK_EQ(c->n_data_dirs, 2);
    OLT_CHECK_STR(c->data_dirs[0], "/a");
    OLT_CHECK_STR(c->data_dirs[1], "/b");
    OLT_CHECK_EQ(c->rdma.n_devices, 2);
    OLT_CHECK_STR(c->rdma.devices[1], "mlx5_1:1");
    OLT_CHECK_EQ(c->default_parity_count, -1);
    OLT_CHECK_EQ(args(c, "--http.max-body-bytes", "0", "--http.debug-endpoints=false",
                      (char *)NULL), 0);
    OLT_CHECK(c->http.max_body_bytes == 0);
    OLT_CHECK(!c->http.debug_endpoints);
    OLT_CHECK_EQ(args(c, "--http.max-body-bytes", "9223372036854775807", (char *)NULL), 0);
    OLT_CHECK(c->http.max_body_bytes == (uint64_t)INT64_MAX);
    /* bare boolean, then booleans spelled various ways */
    OLT_CHECK_EQ(args(c, "--http.debug-endpoints", (char *)NULL), 0);
    OLT_CHECK(c->http.debug_endpoints);
    const char *no[] = {"false", "0", "no", "off", "FALSE"};
    const char *yes[] = {"true", "1", "yes", "on", "True"};
    for (int i = 0; i < 5; i++) {
        OLT_CHECK_EQ(args(c, "--http.debug-endpoints", no[i], (char *)NULL), 0);
        OLT_CHECK(!c->http.debug_endpoints);
        OLT_CHECK_EQ(args(c, "--http.debug-endpoints", yes[i], (char *)NULL), 0);
        OLT_CHECK(c->http.debug_endpoints);
    }
    /* the boolean before another flag takes no value */
    OLT_CHECK_EQ(args(c, "--http.debug-endpoints=0", (char *)NULL), 0);
    OLT_CHECK_EQ(args(c, "--http.debug-endpoints", "--threads", "7", (char *)NULL), 0);
    OLT_CHECK(c->http.debug_endpoints);
    OLT_CHECK_EQ(c->threads, 7);
    /* "--key=" gives the empty value */
    OLT_CHECK_EQ(args(c, "--rdma.devices=", (char *)NULL), 0);
    OLT_CHECK_EQ(c->rdma.n_devices, 0);
    /* integers and numbers take the TOML forms */
    OLT_CHECK_EQ(args(c, "--threads", "0x20", "--kv-slab.capacity-gb", "1e1", (char *)NULL), 0);
    OLT_CHECK_EQ(c->threads, 32);
    OLT_CHECK(c->kv_slab.capacity_gb == 10.0);
    OLT_CHECK_EQ(args(c, (char *)NULL), 0);
    free(c);
}

OLT_TEST(config_env_forms)
{
    struct ol_config *c = cfg();
    OLT_CHECK_EQ(env(c, "OPENLAKE_DATA_DIRS=/d1,/d2", "OPENLAKE_S3_ADDR=0.0.0.0:9000",
                     "OPENLAKE_KV_SLAB_CAPACITY_GB=4", "OPENLAKE_HTTP_DEBUG_ENDPOINTS=1",
                     "OPENLAKE_RDMA_DEVICES=mlx5_0:1", "OPENLAKE_SELF_ID=7",
                     "NOT_OURS=1", "OPENLAKEX=1", "OPENLAKE_NO_EQUALS",
                     "OPENLAKE_LOG_LEVEL=warn", (char *)NULL), 0);
    OLT_CHECK_EQ(c->n_data_dirs, 2);
    OLT_CHECK_STR(c->data_dirs[0], "/d1");
    OLT_CHECK_STR(c->data_dirs[1], "/d2");
    OLT_CHECK_STR(c->s3_addr, "0.0.0.0:9000");
    OLT_CHECK(c->kv_slab.capacity_gb == 4.0);
    OLT_CHECK(c->http.debug_endpoints);
    OLT_CHECK_EQ(c->rdma.n_devices, 1);
    OLT_CHECK_EQ(c->self_id, 7);
    OLT_CHECK_EQ(c->log_level, OL_LOG_WARN);
    OLT_CHECK(ol_config_is_set(c, "kv_slab.capacity_gb"));
    /* NULL envp reads the process environment */
    OLT_CHECK_EQ(setenv("OPENLAKE_REGION", "from-environ", 1), 0);
    OLT_CHECK_EQ(ol_config_apply_env(c, NULL, err, sizeof err), 0);
    OLT_CHECK_STR(c->region, "from-environ");
    unsetenv("OPENLAKE_REGION");
    free(c);
}

OLT_TEST(config_file_value_errors)
{
    /* the example from the design notes, exactly */
    FILE_ERR("# comment\nself_id = 1\n\n\n[kv_slab]\n# size\ncapacity_gb = \"big\"\n",
             "openlake.toml:7: kv_slab.capacity_gb: expected a number >= 0, got string \"big\"");
    FILE_ERR("threads = \"4\"\n", "openlake.toml:1: threads: expected an integer from 0 to 256, got string \"4\"");
    FILE_ERR("threads = 300\n", "openlake.toml:1: threads: expected an integer from 0 to 256, got integer 300");
    FILE_ERR("threads = 4.0\n", "openlake.toml:1: threads: expected an integer from 0 to 256, got float 4");
    FILE_ERR("mode = \"fast\"\n", "openlake.toml:1: mode: expected one of \"all\", \"s3\", \"kv\", got string \"fast\"");
    FILE_ERR("mode = \"KV\"\n", "openlake.toml:1: mode: expected one of \"all\", \"s3\", \"kv\", got string \"KV\"");
    FILE_ERR("transport = 1\n", "openlake.toml:1: transport: expected one of \"tcp\", \"ucx\", got integer 1");
    FILE_ERR("s3_addr = \"localhost\"\n", "openlake.toml:1: s3_addr: expected an address host:port or [v6]:port (port 1 to 65535), got string \"localhost\"");
    FILE_ERR("region = \"us east\"\n", "openlake.toml:1: region: expected a region name of 1 to 63 letters, digits, '-', '_' or '.', got string \"us east\"");
    FILE_ERR("region = \"\"\n", "openlake.toml:1: region: expected a region name of 1 to 63 letters, digits, '-', '_' or '.', got string \"\"");
    FILE_ERR("[http]\ndebug_endpoints = \"yes\"\n", "openlake.toml:2: http.debug_endpoints: expected true or false, got string \"yes\"");
    FILE_ERR("[http]\nmax_header_bytes = 100\n", "openlake.toml:2: http.max_header_bytes: expected an integer from 1024 to 1048576, got integer 100");
    FILE_ERR("[http]\nmax_body_bytes = -1\n", "openlake.toml:2: http.max_body_bytes: expected an integer >= 0, got integer -1");
    FILE_ERR("kv_slab.cpu_ram_frac = 0.96\n", "openlake.toml:1: kv_slab.cpu_ram_frac: expected a number from 0 to 0.95, got float 0.96");
    FILE_ERR("kv_slab.cpu_ram_frac = nan\n", "openlake.toml:1: kv_slab.cpu_ram_frac: expected a number from 0 to 0.95, got float nan");
    FILE_ERR("kv_slab.capacity_gb = inf\n", "openlake.toml:1: kv_slab.capacity_gb: expected a number >= 0, got float inf");
    FILE_ERR("kv_slab.capacity_gb = -1\n", "openlake.toml:1: kv_slab.capacity_gb: expected a number >= 0, got integer -1");
    FILE_ERR("data_dirs = \"/d1\"\n", "openlake.toml:1: data_dirs: expected an array of 1 to 64 strings, got string \"/d1\"");
    FILE_ERR("data_dirs = []\n", "openlake.toml:1: data_dirs: expected an array of 1 to 64 strings, got an empty array");
    FILE_ERR("data_dirs = [\"/d1\",\n  5]\n", "openlake.toml:2: data_dirs[1]: expected a non-empty path of at most 4095 bytes, got integer 5");
    FILE_ERR("data_dirs = [\"\"]\n", "openlake.toml:1: data_dirs[0]: expected a non-empty path of at most 4095 bytes, got string \"\"");
    FILE_ERR("rdma.devices = [\"mlx5 0\"]\n", "openlake.toml:1: rdma.devices[0]: expected a device name like \"mlx5_0:1\" (letters, digits, '-', '_', '.', ':'; at most 63), got string \"mlx5 0\"");
    FILE_ERR("http = 5\n", "openlake.toml:1: http: expected a table, got integer 5");
    FILE_ERR("[credentials]\naccess_key = \"abc\"\n", "openlake.toml:1: credentials: expected an array of tables ([[credentials]]), got table");
    FILE_ERR("credentials = [1]\n", "openlake.toml:1: credentials[0]: expected a table, got integer 1");
    FILE_ERR("[[credentials]]\naccess_key = \"abc\"\n", "openlake.toml:1: credentials[0]: missing required key secret_key");
    FILE_ERR("[[credentials]]\naccess_key = \"abc\"\nsecret_key = \"12345678\"\n[[credentials]]\nsecret_key = \"12345678\"\n",
             "openlake.toml:4: credentials[1]: missing required key access_key");
    FILE_ERR("[[credentials]]\naccess_key = \"ab\"\nsecret_key = \"12345678\"\n",
             "openlake.toml:2: credentials.access_key: expected a string of 3 to 128 printable ASCII characters without spaces or '/', got string \"ab\"");
    FILE_ERR("[[credentials]]\naccess_key = \"a/b\"\nsecret_key = \"12345678\"\n",
             "openlake.toml:2: credentials.access_key: expected a string of 3 to 128 printable ASCII characters without spaces or '/', got string \"a/b\"");
    FILE_ERR("[[credentials]]\naccess_key = \"abc\"\nsecret_key = \"short\"\n",
             "openlake.toml:3: credentials.secret_key: expected a string of 8 to 128 printable ASCII characters without spaces, got a string of 5 bytes (secret, not shown)");
    /* [[nodes]] is gone: etcd holds a cluster's members */
    FILE_ERR("self_id = 1\n[[nodes]]\nid = 1\nrpc_addr = \"h:1\"\n", "openlake.toml:2: [[nodes]] is gone: a cluster's members are the nodes registered in etcd ([cluster] name, etcd and secret_file on each node; docs/cluster.md); remove the [[nodes]] tables");
    FILE_ERR("access_key = \"abc\"\n", "openlake.toml:1: access_key is not accepted in a config file; put credentials in a [[credentials]] table");
    /* strings too long for their field */
    char buf[600];
    snprintf(buf, sizeof buf, "[[credentials]]\naccess_key = \"%0129d\"\nsecret_key = \"12345678\"\n", 0);
    FILE_ERR(buf, "openlake.toml:2: credentials.access_key: expected a string of 3 to 128 printable ASCII characters without spaces or '/', got string \"000000000000000000000000000000000000000000000000...\"");
    snprintf(buf, sizeof buf, "region = \"%064d\"\n", 0);
    FILE_ERR(buf, "openlake.toml:1: region: expected a region name of 1 to 63 letters, digits, '-', '_' or '.', got string \"000000000000000000000000000000000000000000000000...\"");
    /* TOML syntax errors come through with line and column */
    FILE_ERR("self_id = \n", "openlake.toml:1:11: expected a value, found end of line");
    FILE_ERR("a = 1979-05-27\n", "openlake.toml:1:5: dates and times are not supported");
}

OLT_TEST(config_list_and_table_capacity)
{
    size_t cap = 1 << 20, n = 0;
    char *b = malloc(cap);
    n += (size_t)sprintf(b + n, "data_dirs = [");
    for (int i = 0; i < 65; i++)
        n += (size_t)sprintf(b + n, "\"/d%d\", ", i);
    n += (size_t)sprintf(b + n, "]\n");
    FILE_ERR(b, "openlake.toml:1: data_dirs: expected an array of 1 to 64 strings, got an array of 65 entries");
    n = 0;
    for (int i = 0; i < 65; i++)
        n += (size_t)sprintf(b + n, "[[credentials]]\naccess_key = \"key%d\"\nsecret_key = \"secret-%d\"\n", i, i);
    FILE_ERR(b, "openlake.toml:193: credentials[64]: more than 64 [[credentials]] entries");
    free(b);
}

OLT_TEST(config_unknown_keys_did_you_mean)
{
    FILE_ERR("region = \"x\"\n\ns3_adr = \"127.0.0.1:9000\"\n",
             "openlake.toml:3: unknown key \"s3_adr\" (did you mean \"s3_addr\"?)");
    FILE_ERR("zzz = 1\n", "openlake.toml:1: unknown key \"zzz\"");
    FILE_ERR("[htpp]\nmax_headers = 1\n", "openlake.toml:1: unknown key \"htpp\" (did you mean \"http\"?)");
    FILE_ERR("[kv_slab]\ncapacty_gb = 1\n", "openlake.toml:2: unknown key \"kv_slab.capacty_gb\" (did you mean \"kv_slab.capacity_gb\"?)");
    FILE_ERR("capacity_gb = 1\n", "openlake.toml:1: unknown key \"capacity_gb\" (did you mean \"kv_slab.capacity_gb\"?)");
    FILE_ERR("[http]\nmax_header = 1\n", "openlake.toml:2: unknown key \"http.max_header\" (did you mean \"http.max_headers\"?)");
    FILE_ERR("trheads = 1\n", "openlake.toml:1: unknown key \"trheads\" (did you mean \"threads\"?)");
    FILE_ERR("[[credential]]\n", "openlake.toml:1: unknown key \"credential\" (did you mean \"credentials\"?)");
    FILE_ERR("\"s3.addr\" = 1\n", "openlake.toml:1: unknown key \"s3.addr\" (did you mean \"s3_addr\"?)");
    FILE_ERR("[kv_slab.extra]\n", "openlake.toml:1: unknown key \"kv_slab.extra\"");
    /* a key only flags may set is not suggested for a file */
    FILE_ERR("acces_key = 1\n", "openlake.toml:1: unknown key \"acces_key\"");

    ARGS_ERR("command line: unknown flag --s3-adr (did you mean --s3-addr?)", "--s3-adr", "x");
    ARGS_ERR("command line: unknown flag --zzz", "--zzz");
    ARGS_ERR("command line: unknown flag --capacity-gb (did you mean --kv-slab.capacity-gb?)", "--capacity-gb=1");
    ARGS_ERR("command line: unknown flag --kv_slab.capcity_gb (did you mean --kv-slab.capacity-gb?)", "--kv_slab.capcity_gb", "1");
    ARGS_ERR("command line: unknown flag --acces-key (did you mean --access-key?)", "--acces-key", "abc");
    ENV_IGNORED("OPENLAKE_S3_ADR=1");
    ENV_IGNORED("OPENLAKE_CAPACITY_GB=1");
    ENV_IGNORED("OPENLAKE_WHATEVER=1");
    ENV_IGNORED("OPENLAKE_=1");
    ENV_IGNORED("OPENLAKE_s3_addr=1");
}

OLT_TEST(config_flag_and_env_errors)
{
    ARGS_ERR("command line: --threads: expected an integer from 0 to 256, got \"abc\"", "--threads", "abc");
    ARGS_ERR("command line: --threads: expected an integer from 0 to 256, got \"\"", "--threads=");
    ARGS_ERR("command line: --threads needs a value (an integer from 0 to 256)", "--threads");
    ARGS_ERR("command line: unexpected argument \"foo\"", "foo");
    ARGS_ERR("command line: unexpected argument \"-x\"", "-x");
    ARGS_ERR("command line: unexpected argument \"--\"", "--");
    ARGS_ERR("command line: --config needs a file name", "--config");
    ARGS_ERR("command line: --kv-slab.capacity-gb: expected a number >= 0, got \"big\"", "--kv-slab.capacity-gb", "big");
    ARGS_ERR("command line: --http.debug-endpoints: expected true or false, got \"maybe\"", "--http.debug-endpoints", "maybe");
    ARGS_ERR("command line: --data-dirs[1]: expected a non-empty path of at most 4095 bytes, got \"\"", "--data-dirs", "/a,,/b");
    ARGS_ERR("command line: --data-dirs: expected an array of 1 to 64 strings, got an empty list", "--data-dirs=");
    ARGS_ERR("command line: --mode: expected one of \"all\", \"s3\", \"kv\", got \"fast\"", "--mode", "fast");
    ARGS_ERR("command line: --kv-slab: kv_slab is a table; set its keys, e.g. --kv-slab.cpu-ram-frac", "--kv-slab", "1");
    ARGS_ERR("command line: unknown flag --nodes", "--nodes", "1");
    ARGS_ERR("command line: --credentials.access_key: [[credentials]] entries can only be given in the config file", "--credentials.access_key=x");
    ARGS_ERR("command line: --http.max-body-bytes: expected an integer >= 0, got \"-1\"", "--http.max-body-bytes", "-1");
    ARGS_ERR("command line: --self-id: expected an integer from 0 to 2147483647, got \"1.5\"", "--self-id", "1.5");
    char many[200];
    memset(many, 'x', sizeof many - 1);
    many[sizeof many - 1] = 0;
    ARGS_ERR("command line: --region: expected a region name of 1 to 63 letters, digits, '-', '_' or '.', got \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...\"", "--region", many);

    /* names are printed on one printable line */
    ARGS_ERR("command line: unknown flag --a?b", "--a\nb");
    ENV_IGNORED("OPENLAKE_A\x01" "B=1");
    ENV_ERR("environment: OPENLAKE_THREADS: expected an integer from 0 to 256, got \"x\"", "OPENLAKE_THREADS=x");
    ENV_ERR("environment: OPENLAKE_S3_ADDR: expected an address host:port or [v6]:port (port 1 to 65535), got \"127.0.0.1\"", "OPENLAKE_S3_ADDR=127.0.0.1");
    ENV_ERR("environment: OPENLAKE_CREDENTIALS: [[credentials]] entries can only be given in the config file", "OPENLAKE_CREDENTIALS=1");
    ENV_ERR("environment: OPENLAKE_HTTP: http is a table; set its keys, e.g. OPENLAKE_HTTP_MAX_HEADER_BYTES", "OPENLAKE_HTTP=1");
    ENV_ERR("environment: OPENLAKE_DATA_DIRS[0]: expected a non-empty path of at most 4095 bytes, got \"\"", "OPENLAKE_DATA_DIRS=,/x");
    ENV_ERR("environment: OPENLAKE_DATA_DIRS: expected an array of 1 to 64 strings, got an empty list", "OPENLAKE_DATA_DIRS=");
    ENV_ERR("environment: OPENLAKE_RDMA_DEVICES[0]: expected a device name like \"mlx5_0:1\" (letters, digits, '-', '_', '.', ':'; at most 63), got \"a b\"", "OPENLAKE_RDMA_DEVICES=a b");
    /* 65 items */
    char list[1024];
    size_t n = (size_t)sprintf(list, "OPENLAKE_DATA_DIRS=");
    for (int i = 0; i < 65; i++)
        n += (size_t)sprintf(list + n, "%s/%d", i ? "," : "", i);
    ENV_ERR("environment: OPENLAKE_DATA_DIRS: expected an array of 1 to 64 strings, got more than 64 items", list);
}

OLT_TEST(config_find_file_arg)
{
    const char *path = "x";
    char *a1[] = {"openlaked", "--threads", "2", NULL};
    OLT_CHECK_EQ(ol_config_find_file_arg(3, a1, &path, err, sizeof err), 0);
    OLT_CHECK(path == NULL);
    char *a2[] = {"openlaked", "--config", "a.toml", NULL};
    OLT_CHECK_EQ(ol_config_find_file_arg(3, a2, &path, err, sizeof err), 0);
    OLT_CHECK_STR(path, "a.toml");
    char *a3[] = {"openlaked", "--threads=2", "--config=b.toml", NULL};
    OLT_CHECK_EQ(ol_config_find_file_arg(3, a3, &path, err, sizeof err), 0);
    OLT_CHECK_STR(path, "b.toml");
    char *a4[] = {"openlaked", "--config", "a", "--config=b", NULL};
    OLT_CHECK_EQ(ol_config_find_file_arg(4, a4, &path, err, sizeof err), -1);
    OLT_CHECK_STR(err, "command line: --config given twice");
    char *a5[] = {"openlaked", "--config", NULL};
    OLT_CHECK_EQ(ol_config_find_file_arg(2, a5, &path, err, sizeof err), -1);
    OLT_CHECK_STR(err, "command line: --config needs a file name");
    char *a6[] = {"openlaked", "--config=", NULL};
    OLT_CHECK_EQ(ol_config_find_file_arg(2, a6, &path, err, sizeof err), -1);
    OLT_CHECK_STR(err, "command line: --config needs a file name");
}

OLT_TEST(config_load_file_errors)
{
    const char *dir = olt_tmpdir();
    struct ol_config *c = cfg();
    char path[512], want[600];
    snprintf(path, sizeof path, "%s/missing.toml", dir);
    OLT_CHECK_EQ(ol_config_load_file(c, path, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s: cannot open: No such file or directory", path);
    OLT_CHECK_STR(err, want);
    OLT_CHECK_EQ(ol_config_load_file(c, dir, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s: is a directory, not a config file", dir);
    OLT_CHECK_STR(err, want);
    snprintf(path, sizeof path, "%s/big.toml", dir);
    FILE *f = fopen(path, "w");
    for (int i = 0; i < (1 << 20) / 8 + 1; i++)
        fputs("#234567\n", f);
    fclose(f);
    OLT_CHECK_EQ(ol_config_load_file(c, path, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s: larger than the 1 MiB limit for config files", path);
    OLT_CHECK_STR(err, want);
    /* a good file, and an error in it named by path */
    snprintf(path, sizeof path, "%s/ok.toml", dir);
    f = fopen(path, "w");
    fputs(deployment, f);
    fclose(f);
    OLT_CHECK_EQ(ol_config_load_file(c, path, err, sizeof err), 0);
    OLT_CHECK_STR(c->cluster.name, "prod");
    f = fopen(path, "w");
    fputs("threads = -1\n", f);
    fclose(f);
    OLT_CHECK_EQ(ol_config_load_file(c, path, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s:1: threads: expected an integer from 0 to 256, got integer -1", path);
    OLT_CHECK_STR(err, want);
    /* /dev/null is not a regular file */
    OLT_CHECK_EQ(ol_config_load_file(c, "/dev/null", err, sizeof err), -1);
    OLT_CHECK_STR(err, "/dev/null: not a regular file");
    /* a tiny error buffer is cut, not overrun */
    char small[8];
    OLT_CHECK_EQ(ol_config_load_file(c, "/nonexistent", small, sizeof small), -1);
    OLT_CHECK_STR(small, "/nonexi");
    free(c);
}

OLT_TEST(config_credentials_from_flags_and_env)
{
    struct ol_config *c = cfg();
    OLT_CHECK_EQ(env(c, "OPENLAKE_ACCESS_KEY=envkey", "OPENLAKE_SECRET_KEY=envsecret", (char *)NULL), 0);
    OLT_CHECK_EQ(finalize(c), 0);
    OLT_CHECK_EQ(c->n_credentials, 1);
    OLT_CHECK_STR(c->credentials[0].access_key, "envkey");
    OLT_CHECK_STR(c->credentials[0].secret_key, "envsecret");
    OLT_CHECK_EQ(c->credentials[0].origin.source, OL_CONFIG_ENV);
    /* finalize twice changes nothing */
    OLT_CHECK_EQ(finalize(c), 0);
    OLT_CHECK_EQ(c->n_credentials, 1);
    /* appended after the file's */
    ol_config_defaults(c);
    OLT_CHECK_EQ(load(c, deployment), 0);
    OLT_CHECK_EQ(args(c, "--access-key", "flagkey", "--secret-key=flagsecret", (char *)NULL), 0);
    OLT_CHECK_EQ(finalize(c), 0);
    OLT_CHECK_EQ(c->n_credentials, 3);
    OLT_CHECK_STR(c->credentials[2].access_key, "flagkey");
    /* the same access key replaces the file's secret */
    ol_config_defaults(c);
    OLT_CHECK_EQ(load(c, deployment), 0);
    OLT_CHECK_EQ(env(c, "OPENLAKE_ACCESS_KEY=openlake", "OPENLAKE_SECRET_KEY=rotated-secret", (char *)NULL), 0);
    OLT_CHECK_EQ(finalize(c), 0);
    OLT_CHECK_EQ(c->n_credentials, 2);
    OLT_CHECK_STR(c->credentials[0].secret_key, "rotated-secret");
    /* one without the other */
    ol_config_defaults(c);
    OLT_CHECK_EQ(env(c, "OPENLAKE_ACCESS_KEY=abc", (char *)NULL), 0);
    OLT_CHECK_EQ(finalize(c), -1);
    OLT_CHECK_STR(err, "environment: OPENLAKE_ACCESS_KEY: given without secret_key (set --secret-key-file, OPENLAKE_SECRET_KEY_FILE or OPENLAKE_SECRET_KEY too)");
    ol_config_defaults(c);
    OLT_CHECK_EQ(args(c, "--secret-key", "12345678", (char *)NULL), 0);
    OLT_CHECK_EQ(finalize(c), -1);
    OLT_CHECK_STR(err, "command line: --secret-key: given without access_key (set --access-key or OPENLAKE_ACCESS_KEY too)");
    /* checked like file credentials */
    ENV_ERR("environment: OPENLAKE_SECRET_KEY: expected a string of 8 to 128 printable ASCII characters without spaces, got a string of 5 bytes (secret, not shown)", "OPENLAKE_SECRET_KEY=short");
    /* a secret's text never shows in a message, even a near miss */
    ARGS_ERR("command line: --kv-token: expected a string of up to 128 printable ASCII characters without spaces, got a string of 12 bytes (secret, not shown)",
             "--kv-token", "hunter2 typo");
    /* no room */
    ol_config_defaults(c);
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    for (int i = 0; i < 64; i++)
        n += (size_t)sprintf(b + n, "[[credentials]]\naccess_key = \"key%d\"\nsecret_key = \"secret-%d\"\n", i, i);
    OLT_CHECK_EQ(load(c, b), 0);
    OLT_CHECK_EQ(env(c, "OPENLAKE_ACCESS_KEY=one-more", "OPENLAKE_SECRET_KEY=12345678", (char *)NULL), 0);
    OLT_CHECK_EQ(finalize(c), -1);
    OLT_CHECK_STR(err, "environment: OPENLAKE_ACCESS_KEY: no room for one more credential (64 already)");
    free(b);
    free(c);
}

static char *dump(const struct ol_config *c, bool secrets);

/* Writes text to dir/name with the given mode; the path goes to p[512]. */
static const char *secret_file(char *p, const char *dir, const char *name, const char *text,
                               mode_t mode)
{
    snprintf(p, 512, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    OLT_CHECK(f != NULL);
    fputs(text, f);
    fclose(f);
    OLT_CHECK_EQ(chmod(p, mode), 0);
    return p;
}

/* From defaults: the flag pair f1 f2 (f1 NULL: none), the variable e1
 * (NULL: none), finalize. */
static int flags_env_final(struct ol_config *c, const char *f1, const char *f2, const char *e1)
{
    ol_config_defaults(c);
    if (f1 && args(c, f1, f2, (char *)NULL))
        return -1;
    if (e1 && env(c, e1, (char *)NULL))
        return -1;
    return finalize(c);
}

OLT_TEST(config_secret_files)
{
    const char *dir = olt_tmpdir();
    struct ol_config *c = cfg();
    char a[600], want[1200], w[600], tokp[512], skp[512];
    /* one trailing newline (or \r\n, or spaces) is dropped */
    const char *tok = secret_file(tokp, dir, "kv.token", "file-token-0123\n", 0600);
    OLT_CHECK_EQ(flags_env_final(c, "--kv-token-file", tok, NULL), 0);
    OLT_CHECK_STR(c->kv_token, "file-token-0123");
    OLT_CHECK_STR(c->kv_token_file, tok);
    OLT_CHECK(!ol_config_is_set(c, "kv_token"));
    OLT_CHECK(ol_config_secret_warning(c, 0, w, sizeof w) == NULL);
    OLT_CHECK_EQ(finalize(c), 0);              /* twice changes nothing */
    OLT_CHECK_STR(c->kv_token, "file-token-0123");
    tok = secret_file(tokp, dir, "crlf.token", "tok-crlf\r\n", 0400);
    snprintf(a, sizeof a, "OPENLAKE_KV_TOKEN_FILE=%s", tok);
    OLT_CHECK_EQ(flags_env_final(c, NULL, NULL, a), 0);
    OLT_CHECK_STR(c->kv_token, "tok-crlf");
    /* from the config file too */
    ol_config_defaults(c);
    snprintf(a, sizeof a, "kv_token_file = \"%s\"\n", tok);
    OLT_CHECK_EQ(load(c, a), 0);
    OLT_CHECK_EQ(finalize(c), 0);
    OLT_CHECK_STR(c->kv_token, "tok-crlf");
    /* the S3 secret key from a file joins the access key of a flag */
    const char *sk = secret_file(skp, dir, "s3.secret", "file-secret-key \n", 0600);
    ol_config_defaults(c);
    OLT_CHECK_EQ(args(c, "--access-key", "filekey", "--secret-key-file", sk, (char *)NULL), 0);
    OLT_CHECK_EQ(finalize(c), 0);
    OLT_CHECK_EQ(c->n_credentials, 1);
    OLT_CHECK_STR(c->credentials[0].access_key, "filekey");
    OLT_CHECK_STR(c->credentials[0].secret_key, "file-secret-key");
    OLT_CHECK_EQ(c->credentials[0].origin.source, OL_CONFIG_FLAG);
    /* ... and is not given alone */
    snprintf(a, sizeof a, "OPENLAKE_SECRET_KEY_FILE=%s", sk);
    OLT_CHECK_EQ(flags_env_final(c, NULL, NULL, a), -1);
    OLT_CHECK_STR(err, "environment: OPENLAKE_SECRET_KEY_FILE: given without access_key (set --access-key or OPENLAKE_ACCESS_KEY too)");
    /* the secret_key_file key is flag and environment only, like secret_key */
    ol_config_defaults(c);
    OLT_CHECK_EQ(load(c, "secret_key_file = \"/x\"\n"), -1);
    OLT_CHECK_STR(err, "openlake.toml:1: secret_key_file is not accepted in a config file; put credentials in a [[credentials]] table");
    /* missing, empty (only whitespace), too long, a bad character, not a regular file */
    snprintf(a, sizeof a, "%s/none", dir);
    OLT_CHECK_EQ(flags_env_final(c, "--kv-token-file", a, NULL), -1);
    snprintf(want, sizeof want, "command line: --kv-token-file: %s: cannot open: No such file or directory", a);
    OLT_CHECK_STR(err, want);
    tok = secret_file(tokp, dir, "empty", "\n \n", 0600);
    OLT_CHECK_EQ(flags_env_final(c, "--kv-token-file", tok, NULL), -1);
    snprintf(want, sizeof want, "command line: --kv-token-file: %s: is empty", tok);
    OLT_CHECK_STR(err, want);
    char big[200];
    memset(big, 'x', 129);
    strcpy(big + 129, "\n");
    tok = secret_file(tokp, dir, "long", big, 0600);
    OLT_CHECK_EQ(flags_env_final(c, "--kv-token-file", tok, NULL), -1);
    snprintf(want, sizeof want, "command line: --kv-token-file: %s: longer than 128 bytes", tok);
    OLT_CHECK_STR(err, want);
    big[128] = '\n';                           /* 128 is the most */
    big[129] = 0;
    tok = secret_file(tokp, dir, "long", big, 0600);
    OLT_CHECK_EQ(flags_env_final(c, "--kv-token-file", tok, NULL), 0);
    OLT_CHECK_EQ(strlen(c->kv_token), 128);
    tok = secret_file(tokp, dir, "space", "two words\n", 0600);
    OLT_CHECK_EQ(flags_env_final(c, "--kv-token-file", tok, NULL), -1);
    snprintf(want, sizeof want, "command line: --kv-token-file: %s: expected a string of up to 128 printable ASCII characters without spaces, got 9 bytes (secret, not shown)", tok);
    OLT_CHECK_STR(err, want);
    sk = secret_file(skp, dir, "short", "short\n", 0600);
    ol_config_defaults(c);
    OLT_CHECK_EQ(args(c, "--access-key", "abc", "--secret-key-file", sk, (char *)NULL), 0);
    OLT_CHECK_EQ(finalize(c), -1);
    snprintf(want, sizeof want, "command line: --secret-key-file: %s: expected a string of 8 to 128 printable ASCII characters without spaces, got 5 bytes (secret, not shown)", sk);
    OLT_CHECK_STR(err, want);
    OLT_CHECK_EQ(flags_env_final(c, "--kv-token-file", dir, NULL), -1);
    snprintf(want, sizeof want, "command line: --kv-token-file: %s: not a regular file", dir);
    OLT_CHECK_STR(err, want);
    /* both forms, from any two sources */
    tok = secret_file(tokp, dir, "kv.token", "file-token-0123\n", 0600);
    snprintf(a, sizeof a, "OPENLAKE_KV_TOKEN_FILE=%s", tok);
    OLT_CHECK_EQ(flags_env_final(c, "--kv-token", "inline-token", a), -1);
    OLT_CHECK_STR(err, "environment: OPENLAKE_KV_TOKEN_FILE: given together with command line: --kv-token; give the secret one way only");
    ol_config_defaults(c);
    OLT_CHECK_EQ(load(c, "kv_token = \"in-the-file\"\n"), 0);
    OLT_CHECK_EQ(args(c, "--kv-token-file", tok, (char *)NULL), 0);
    OLT_CHECK_EQ(finalize(c), -1);
    OLT_CHECK_STR(err, "command line: --kv-token-file: given together with openlake.toml:1: kv_token; give the secret one way only");
    ol_config_defaults(c);
    OLT_CHECK_EQ(args(c, "--access-key", "abc", "--secret-key", "12345678", "--secret-key-file", sk, (char *)NULL), 0);
    OLT_CHECK_EQ(finalize(c), -1);
    OLT_CHECK_STR(err, "command line: --secret-key-file: given together with command line: --secret-key; give the secret one way only");
    /* the dump writes the path, never the secret read from it */
    tok = secret_file(tokp, dir, "kv.token", "file-token-0123\n", 0600);
    OLT_CHECK_EQ(flags_env_final(c, "--kv-token-file", tok, NULL), 0);
    for (int show = 0; show < 2; show++) {
        char *t = dump(c, show);
        OLT_CHECK(strstr(t, "file-token-0123") == NULL);
        OLT_CHECK(strstr(t, "\nkv_token =") == NULL);
        snprintf(want, sizeof want, "\nkv_token_file = \"%s\"\n", tok);
        OLT_CHECK(strstr(t, want) != NULL);
        struct ol_config *b = cfg();           /* and loads back */
        OLT_CHECK_EQ(ol_config_load_buffer(b, "dump", t, strlen(t), err, sizeof err), 0);
        OLT_CHECK_EQ(finalize(b), 0);
        OLT_CHECK_STR(b->kv_token, "file-token-0123");
        free(b);
        free(t);
    }
    free(c);
}

OLT_TEST(config_secret_warnings)
{
    const char *dir = olt_tmpdir();
    struct ol_config *c = cfg();
    char w[600], want[700], tokp[512];
    /* a secret as a flag: named, with the file and environment forms */
    OLT_CHECK_EQ(flags_env_final(c, "--kv-token", "flag-token-0123", NULL), 0);
    OLT_CHECK_STR(ol_config_secret_warning(c, 0, w, sizeof w),
                  "--kv-token on the command line is readable by any local user in /proc/PID/cmdline; use --kv-token-file FILE (or OPENLAKE_KV_TOKEN_FILE, OPENLAKE_KV_TOKEN) instead");
    OLT_CHECK(strstr(w, "flag-token-0123") == NULL);
    OLT_CHECK(ol_config_secret_warning(c, 1, w, sizeof w) == NULL);
    ol_config_defaults(c);
    OLT_CHECK_EQ(args(c, "--access-key", "abc", "--secret-key", "12345678", "--kv-token", "t0123456",
                      (char *)NULL), 0);
    OLT_CHECK_EQ(finalize(c), 0);
    OLT_CHECK(strncmp(ol_config_secret_warning(c, 0, w, sizeof w), "--kv-token on the command line", 30) == 0);
    OLT_CHECK_STR(ol_config_secret_warning(c, 1, w, sizeof w),
                  "--secret-key on the command line is readable by any local user in /proc/PID/cmdline; use --secret-key-file FILE (or OPENLAKE_SECRET_KEY_FILE, OPENLAKE_SECRET_KEY) instead");
    OLT_CHECK(ol_config_secret_warning(c, 2, w, sizeof w) == NULL);
    /* the environment and the file are not the command line */
    OLT_CHECK_EQ(flags_env_final(c, NULL, NULL, "OPENLAKE_KV_TOKEN=env-token-0123"), 0);
    OLT_CHECK(ol_config_secret_warning(c, 0, w, sizeof w) == NULL);
    ol_config_defaults(c);
    OLT_CHECK_EQ(load(c, "kv_token = \"file-token\"\n[[credentials]]\naccess_key = \"abc\"\nsecret_key = \"12345678\"\n"), 0);
    OLT_CHECK_EQ(finalize(c), 0);
    OLT_CHECK(ol_config_secret_warning(c, 0, w, sizeof w) == NULL);
    /* a secret file that group or others may read */
    const char *tok = secret_file(tokp, dir, "kv.token", "file-token-0123\n", 0644);
    OLT_CHECK_EQ(flags_env_final(c, "--kv-token-file", tok, NULL), 0);
    snprintf(want, sizeof want, "command line: --kv-token-file: %s is mode 0644: group or others may read it; chmod 600 it", tok);
    OLT_CHECK_STR(ol_config_secret_warning(c, 0, w, sizeof w), want);
    OLT_CHECK(ol_config_secret_warning(c, 1, w, sizeof w) == NULL);
    free(c);
}

/* Settings that do nothing in this configuration are warned about, named
 * with where they were set; the same settings where they work are not. */
OLT_TEST(config_unused_settings_are_warned_about)
{
    char w[1024];
    struct ol_config *c = cfg();
    OLT_CHECK_EQ(load(c, "transport = \"ucx\"\nrpc_addr = \"127.0.0.1:9100\"\n"
                         "[rdma]\ndevices = [\"mlx5_0:1\"]\n"), 0);
    OLT_CHECK_EQ(finalize(c), 0);
    OLT_CHECK_STR(ol_config_unused_warning(c, 0, w, sizeof w),
                  "openlake.toml:1: transport: \"ucx\" has no effect: it is the node RPC's "
                  "transport, and the node RPC runs only in a cluster (cluster.name); the KV "
                  "service over UCX is kv_ucx_addr");
    OLT_CHECK_STR(ol_config_unused_warning(c, 1, w, sizeof w),
                  "openlake.toml:2: rpc_addr: has no effect: the node RPC runs only in a cluster "
                  "(cluster.name), and only mode \"kv\" takes it as its KV address");
    OLT_CHECK_STR(ol_config_unused_warning(c, 2, w, sizeof w),
                  "openlake.toml:4: rdma.devices: has no effect: it picks the devices of the "
                  "node RPC's UCX (transport = \"ucx\" in a cluster) and of the KV service's "
                  "(kv_ucx_addr), and neither is on");
    OLT_CHECK(ol_config_unused_warning(c, 3, w, sizeof w) == NULL);
    free(c);
    /* the same where they work: none */
    c = cfg();
    OLT_CHECK_EQ(load(c, "transport = \"ucx\"\nrpc_addr = \"127.0.0.1:9100\"\n"
                         "[rdma]\ngid_index = 3\n[cluster]\nname = \"c\"\n"
                         "etcd = [\"http://e:1\"]\n"), 0);
#ifdef OL_HAVE_UCX
    OLT_CHECK_EQ(finalize(c), 0);
    OLT_CHECK(ol_config_unused_warning(c, 0, w, sizeof w) == NULL);
#endif
    free(c);
    c = cfg();   /* mode kv takes rpc_addr as its KV address */
    OLT_CHECK_EQ(load(c, "mode = \"kv\"\nrpc_addr = \"127.0.0.1:9101\"\n"), 0);
    OLT_CHECK_EQ(finalize(c), 0);
    OLT_CHECK(ol_config_unused_warning(c, 0, w, sizeof w) == NULL);
    free(c);
    c = cfg();   /* nothing set: nothing said */
    OLT_CHECK_EQ(load(c, ""), 0);
    OLT_CHECK_EQ(finalize(c), 0);
    OLT_CHECK(ol_config_unused_warning(c, 0, w, sizeof w) == NULL);
    free(c);
}

OLT_TEST(config_cross_key_checks)
{
    FILE_ERR("[[credentials]]\naccess_key = \"abc\"\nsecret_key = \"12345678\"\n"
             "[[credentials]]\naccess_key = \"abc\"\nsecret_key = \"87654321\"\n",
             "openlake.toml:4: credentials.access_key: access key \"abc\" is listed twice (first at line 1)");
    /* a cluster node: its RPC listener has an address of its own, and a
     * secret, if given, is long enough */
    FILE_ERR("rpc_addr = \"127.0.0.1:9000\"\n[cluster]\nname = \"c\"\netcd = [\"http://e:1\"]\nsecret = \"0123456789abcdef0123456789abcdef\"\n",
             "openlake.toml:1: rpc_addr: \"127.0.0.1:9000\" is also s3_addr; a cluster node's RPC listener needs an address of its own");
    FILE_ERR("[cluster]\nname = \"c\"\netcd = [\"http://e:1\"]\nsecret = \"0123456789\"\n",
             "openlake.toml:4: cluster.secret: the cluster secret has 10 characters; it needs at least 32 (e.g. openssl rand -hex 32)");
    /* remote reads ride the node RPC's UCX */
    FILE_ERR("[rdma]\nbackend = \"ucx\"\n",
             "openlake.toml:2: rdma.backend: \"ucx\" reads over the node RPC's UCX: it needs transport = \"ucx\"");
#ifndef OL_HAVE_UCX
    FILE_ERR("transport = \"ucx\"\n[cluster]\nname = \"c\"\netcd = [\"http://e:1\"]\n",
             "openlake.toml:1: transport: \"ucx\": this build has no UCX (libucx-dev was not found when it was built); use \"tcp\"");
#else
    {
        struct ol_config *c_ = cfg();
        OLT_CHECK_EQ(load(c_, "transport = \"ucx\"\n[cluster]\nname = \"c\"\netcd = [\"http://e:1\"]\n"), 0);
        OLT_CHECK_EQ(finalize(c_), 0);
        OLT_CHECK_EQ(c_->transport, OL_TRANSPORT_UCX);
        free(c_);
    }
#endif
#ifdef OL_HAVE_UCX
    /* the KV service over UCX: an address of its own, a KV service */
    FILE_ERR("kv_ucx_addr = \"127.0.0.1:9400\"\n",
             "openlake.toml:1: kv_ucx_addr: \"127.0.0.1:9400\" is also kv_addr; the UCX listener needs an address of its own");
    FILE_ERR("kv_ucx_addr = \"127.0.0.1:9000\"\n",
             "openlake.toml:1: kv_ucx_addr: \"127.0.0.1:9000\" is also s3_addr; the UCX listener needs an address of its own");
    FILE_ERR("mode = \"s3\"\nkv_ucx_addr = \"127.0.0.1:9401\"\n",
             "openlake.toml:2: kv_ucx_addr: mode \"s3\" runs no KV service");
    {
        struct ol_config *c_ = cfg();
        OLT_CHECK_EQ(load(c_, "kv_ucx_addr = \"[::1]:9401\"\n"), 0);
        OLT_CHECK_EQ(finalize(c_), 0);
        OLT_CHECK_STR(c_->kv_ucx_addr, "[::1]:9401");
        free(c_);
        c_ = cfg();
        OLT_CHECK_EQ(load(c_, ""), 0);
        OLT_CHECK_EQ(finalize(c_), 0);
        OLT_CHECK_STR(c_->kv_ucx_addr, ""); /* off by default */
        free(c_);
    }
#else
    FILE_ERR("kv_ucx_addr = \"127.0.0.1:9401\"\n",
             "openlake.toml:1: kv_ucx_addr: this build has no UCX (libucx-dev was not found when it was built); leave it \"\"");
#endif
    FILE_ERR("kv_ucx_addr = \"9401\"\n",
             "openlake.toml:1: kv_ucx_addr: expected an address host:port or [v6]:port (port 1 to 65535), or \"\" (off), got string \"9401\"");
    FILE_ERR("data_dirs = [\"/d\", \"/e\", \"/d\"]\n", "openlake.toml:1: data_dirs: \"/d\" is listed twice");
    FILE_ERR("set_drive_count = 8\ndefault_parity_count = 5\n",
             "openlake.toml:2: default_parity_count: 5 is more than half of set_drive_count 8");
    FILE_ERR("s3_addr = \"127.0.0.1:9400\"\n",
             "openlake.toml:1: s3_addr: \"127.0.0.1:9400\" is also kv_addr; the S3 and KV listeners need different addresses");
    FILE_ERR("s3_tls_cert = \"/etc/ol/cert.pem\"\n",
             "openlake.toml:1: s3_tls_cert: given without s3_tls_key (TLS needs both the certificate and its key)");
    FILE_ERR("s3_domain = \"s3..example.com\"\n",
             "openlake.toml:1: s3_domain: expected a DNS name such as s3.example.com (letters, digits, '-', '.'), got string \"s3..example.com\"");
    /* a flag-set value is named by its flag */
    struct ol_config *c = cfg();
    OLT_CHECK_EQ(args(c, "--set-drive-count", "4", "--default-parity-count", "3", (char *)NULL), 0);
    OLT_CHECK_EQ(finalize(c), -1);
    OLT_CHECK_STR(err, "command line: --default-parity-count: 3 is more than half of set_drive_count 4");
    /* and fine combinations pass */
    ol_config_defaults(c);
    OLT_CHECK_EQ(args(c, "--set-drive-count", "4", "--default-parity-count", "2", (char *)NULL), 0);
    OLT_CHECK_EQ(finalize(c), 0);
    ol_config_defaults(c);
    OLT_CHECK_EQ(args(c, "--default-parity-count", "8", (char *)NULL), 0);   /* set size auto */
    OLT_CHECK_EQ(finalize(c), 0);
    /* mode s3 does not run the KV listener, so sharing its address is fine */
    ol_config_defaults(c);
    OLT_CHECK_EQ(args(c, "--mode", "s3", "--s3-addr", "127.0.0.1:9400", (char *)NULL), 0);
    OLT_CHECK_EQ(finalize(c), 0);
    /* mode kv: rpc_addr is the KV address of a single host (an old
     * layout), not of a cluster node, whose RPC listener is its own */
    ol_config_defaults(c);
    OLT_CHECK_EQ(args(c, "--mode", "kv", "--rpc-addr", "127.0.0.1:7000", (char *)NULL), 0);
    OLT_CHECK_EQ(finalize(c), 0);
    OLT_CHECK_STR(c->kv_addr, "127.0.0.1:7000");
    ol_config_defaults(c);
    OLT_CHECK_EQ(args(c, "--mode", "kv", "--rpc-addr", "127.0.0.1:7000", "--cluster.name", "c",
                      "--cluster.etcd", "http://e:1", (char *)NULL), 0);
    OLT_CHECK_EQ(finalize(c), 0);
    OLT_CHECK_STR(c->kv_addr, "127.0.0.1:9400");
    free(c);
}

OLT_TEST(config_threads_auto)
{
    struct ol_config *c = cfg();
    OLT_CHECK_EQ(finalize(c), 0);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    OLT_CHECK_EQ(c->threads, n < 1 ? 1 : n > 256 ? 256 : n);
    ol_config_defaults(c);
    OLT_CHECK_EQ(args(c, "--threads", "256", (char *)NULL), 0);
    OLT_CHECK_EQ(finalize(c), 0);
    OLT_CHECK_EQ(c->threads, 256);
    free(c);
}

OLT_TEST(config_addresses)
{
    const char *good[] = {"127.0.0.1:9000", "0.0.0.0:1", "localhost:65535",
                          "[::1]:9000", "[::]:80", "[fe80::1%eth0]:9000",
                          "node-1.example.com:80", "my_host:8080",
                          "[2001:db8::1]:443", "10.0.0.1:09000"};
    const char *badv[] = {"127.0.0.1", ":9000", "127.0.0.1:0", "127.0.0.1:65536",
                          "127.0.0.1:", "[::1]9000", "::1:9000", "[::1]:",
                          "[zz]:80", "256.1.1.1:80", "1.2.3:80", "host:80x",
                          "host name:80", "[]:80", "127.0.0.1:+80", "host:123456",
                          "[::1", "[fe80::1%]:80", "[fe80::1%e th]:80", "h\x01:80",
                          "h:-1", ""};
    struct ol_config *c = cfg();
    char want[512];
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        if (args(c, "--rpc-addr", good[i], (char *)NULL) != 0)
            olt_fail(__FILE__, __LINE__, "rejected %s: %s", good[i], err);
        OLT_CHECK_STR(c->rpc_addr, good[i]);
    }
    for (size_t i = 0; i < sizeof badv / sizeof badv[0]; i++) {
        if (args(c, "--rpc-addr", badv[i], (char *)NULL) == 0)
            olt_fail(__FILE__, __LINE__, "accepted %s", badv[i]);
        OLT_CHECK(strncmp(err, "command line: --rpc-addr: expected an address", 45) == 0);
    }
    snprintf(want, sizeof want, "command line: --rpc-addr: expected an address host:port or [v6]:port (port 1 to 65535), got \"h\\u0001:80\"");
    OLT_CHECK_EQ(args(c, "--rpc-addr", "h\x01:80", (char *)NULL), -1);
    OLT_CHECK_STR(err, want);
    /* a host name as long as DNS allows fits; one more byte does not */
    char host[300];
    memset(host, 'a', 253);
    strcpy(host + 253, ":9000");
    OLT_CHECK_EQ(args(c, "--rpc-addr", host, (char *)NULL), 0);
    memset(host, 'a', 254);
    strcpy(host + 254, ":9000");
    OLT_CHECK_EQ(args(c, "--rpc-addr", host, (char *)NULL), -1);
    free(c);
}

static char *dump(const struct ol_config *c, bool secrets)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ol_config_dump(f, c, secrets);
    fclose(f);
    return buf;
}

OLT_TEST(config_dump_round_trip)
{
    struct ol_config *a = cfg(), *b = cfg();
    OLT_CHECK_EQ(load(a, deployment), 0);
    OLT_CHECK_EQ(args(a, "--kv-slab.capacity-gb", "0.1", "--region", "r\"q", (char *)NULL), -1);
    OLT_CHECK_EQ(args(a, "--kv-slab.capacity-gb", "0.1", "--http.debug-endpoints",
                      "--http.max-body-bytes", "9223372036854775807", (char *)NULL), 0);
    OLT_CHECK_EQ(finalize(a), 0);
    char *t1 = dump(a, true);
    OLT_CHECK_EQ(ol_config_load_buffer(b, "dump", t1, strlen(t1), err, sizeof err), 0);
    OLT_CHECK_EQ(finalize(b), 0);
    char *t2 = dump(b, true);
    OLT_CHECK_STR(t1, t2);
    OLT_CHECK(b->kv_slab.capacity_gb == 0.1);
    OLT_CHECK(strstr(t1, "\n[cluster]\nname = \"prod\"\n") != NULL);
    OLT_CHECK(strstr(t1, "secret_key = \"openlake-secret\"") != NULL);
    char *t3 = dump(a, false);
    OLT_CHECK(strstr(t3, "openlake-secret") == NULL);
    OLT_CHECK(strstr(t3, "secret_key = \"<redacted>\"") != NULL);
    OLT_CHECK(strstr(t3, "0123456789abcdef") == NULL);            /* the cluster secret */
    OLT_CHECK(strstr(t3, "\nsecret = \"<redacted>\"") != NULL);
    OLT_CHECK(strstr(t3, "\netcd_password = \"\"") != NULL);      /* none: nothing to hide */
    free(t1);
    free(t2);
    free(t3);
    /* defaults round-trip too (the dump of a fresh config is loadable) */
    ol_config_defaults(a);
    ol_config_defaults(b);
    t1 = dump(a, false);
    OLT_CHECK_EQ(ol_config_load_buffer(b, "dump", t1, strlen(t1), err, sizeof err), 0);
    t2 = dump(b, false);
    OLT_CHECK_STR(t1, t2);
    free(t1);
    free(t2);
    free(a);
    free(b);
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 65536;
            buf = realloc(buf, cap);
        }
        size_t r = fread(buf + n, 1, 4096, f);
        n += r;
        if (r == 0)
            break;
    }
    fclose(f);
    buf[n] = 0;
    return buf;
}

OLT_TEST(config_docs_match_key_table)
{
    /* run from the repository root (make test does); else find the docs
     * relative to this source file */
    char *docs = read_all("docs/configuration.md");
    if (!docs) {
        char path[1024];
        snprintf(path, sizeof path, "%s", __FILE__);
        char *slash = strrchr(path, '/');
        if (slash)
            strcpy(slash, "/../../docs/configuration.md");
        docs = read_all(path);
    }
    OLT_CHECK(docs != NULL);
    char *keys = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&keys, &len);
    ol_config_print_keys(f);
    fclose(f);
    OLT_CHECK(len > 1000);
    /* the reference block is the printed list, byte for byte */
    const char *begin = "<!-- BEGIN ol_config_print_keys -->\n```text\n";
    const char *endm = "```\n<!-- END ol_config_print_keys -->";
    char *b = strstr(docs, begin), *e = b ? strstr(b, endm) : NULL;
    OLT_CHECK(b != NULL && e != NULL);
    b += strlen(begin);
    if ((size_t)(e - b) != len || memcmp(b, keys, len) != 0)
        olt_fail(__FILE__, __LINE__, "docs/configuration.md is out of date: "
                 "replace its reference block with `openlaked --help-config`");
    /* every key title, flag and variable appears in the docs, and no two
     * keys share a flag or a variable */
    char *names[256];
    int nn = 0;
    for (char *line = strtok(keys, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] != ' ') {
            OLT_CHECK(strstr(docs, line) != NULL);
            continue;
        }
        char *fl = strstr(line, "    flag --");
        if (!fl)
            continue;
        char flag[128], envv[128];
        OLT_CHECK(sscanf(fl, " flag %127[^,], env %127[A-Z0-9_]", flag, envv) == 2);
        for (int i = 0; i < nn; i++) {
            OLT_CHECK(strcmp(names[i], flag) != 0);
            OLT_CHECK(strcmp(names[i], envv) != 0);
        }
        OLT_CHECK(nn + 2 < 256);
        names[nn++] = strdup(flag);
        names[nn++] = strdup(envv);
    }
    OLT_CHECK(nn > 40);
    for (int i = 0; i < nn; i++)
        free(names[i]);
    free(keys);
    free(docs);
}

OLT_TEST(config_guard_page)
{
    long pg = sysconf(_SC_PAGESIZE);
    size_t len = strlen(deployment);
    OLT_CHECK((long)len < pg);
    char *mem = mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    OLT_CHECK(mem != MAP_FAILED);
    OLT_CHECK(mprotect(mem + pg, (size_t)pg, PROT_NONE) == 0);
    struct ol_config *c = malloc(sizeof *c);
    int accepted = 0;
    for (size_t k = 0; k <= len; k++) {
        char *p = mem + pg - k;
        memcpy(p, deployment, k);
        ol_config_defaults(c);
        if (ol_config_load_buffer(c, "g.toml", p, k, err, sizeof err) == 0)
            accepted++;
    }
    OLT_CHECK(accepted > 10);
    OLT_CHECK_EQ(c->rdma.gid_index, 3);   /* the last, full document */
    free(c);
    munmap(mem, (size_t)pg * 2);
}

/* ---- [[kv_tenants]] ---------------------------------------------------------- */

/* Writes `text` to <tmpdir>/<name> with `mode`; returns the path (static). */
static const char *token_file(const char *name, const char *text, mode_t mode)
{
    static char paths[8][512];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, 512, "%s/%s", olt_tmpdir(), name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    OLT_CHECK(fd >= 0);
    OLT_CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    OLT_CHECK(chmod(p, mode) == 0);
    return p;
}

/* Two tenants: top-level keys in `head` before them, `extra` (a third
 * entry) after. */
static char *tenants_doc(const char *head, const char *ta, const char *tb, const char *extra)
{
    static char doc[8192];
    snprintf(doc, sizeof doc,
             "%s"
             "[[kv_tenants]]\n"
             "name = \"team-a\"\n"
             "token_file = \"%s\"\n"
             "namespaces = [\"team-a/*\", \"shared-a\"]\n"
             "capacity_gb = 0.5\n"
             "\n"
             "[[kv_tenants]]\n"
             "name = \"b_2\"\n"
             "token_file = \"%s\"\n"
             "namespaces = [\"team-b/*\"]\n"
             "capacity_gb = 1\n"
             "disk_capacity_gb = 4\n"
             "%s",
             head, ta, tb, extra);
    return doc;
}

OLT_TEST(config_kv_tenants)
{
    const char *ta = token_file("a.tok", "token-of-a-0123\n", 0600);
    const char *tb = token_file("b.tok", "token-of-b-0123\r\n", 0640);
    struct ol_config *c = cfg();
    OLT_CHECK_EQ(load(c, tenants_doc("kv_token = \"admin-token\"\n", ta, tb, "")), 0);
    OLT_CHECK_EQ(finalize(c), 0);
    OLT_CHECK_EQ(c->n_kv_tenants, 2);
    const struct ol_config_kv_tenant *a = &c->kv_tenants[0], *b = &c->kv_tenants[1];
    OLT_CHECK_STR(a->name, "team-a");
    OLT_CHECK_STR(a->token_file, ta);
    OLT_CHECK_STR(a->token, "token-of-a-0123");
    OLT_CHECK_EQ(a->token_file_mode, 0600);
    OLT_CHECK_EQ(a->n_namespaces, 2);
    OLT_CHECK_STR(a->namespaces[0], "team-a/*");
    OLT_CHECK_STR(a->namespaces[1], "shared-a");
    OLT_CHECK(a->capacity_gb == 0.5 && a->disk_capacity_gb == 0);
    OLT_CHECK_EQ(a->origin.line, 2);
    OLT_CHECK_STR(b->name, "b_2");
    OLT_CHECK_STR(b->token, "token-of-b-0123");
    OLT_CHECK_EQ(b->token_file_mode, 0640);
    OLT_CHECK(b->capacity_gb == 1 && b->disk_capacity_gb == 4);
    /* the dump names the token files, never the tokens, and loads back */
    char *t1 = dump(c, true);
    OLT_CHECK(strstr(t1, "token-of-a") == NULL && strstr(t1, "token-of-b") == NULL);
    OLT_CHECK(strstr(t1, "\n[[kv_tenants]]\nname = \"team-a\"\ntoken_file = ") != NULL);
    OLT_CHECK(strstr(t1, "namespaces = [\"team-a/*\", \"shared-a\"]\n") != NULL);
    struct ol_config *d = cfg();
    OLT_CHECK_EQ(ol_config_load_buffer(d, "dump", t1, strlen(t1), err, sizeof err), 0);
    OLT_CHECK_EQ(finalize(d), 0);
    OLT_CHECK_STR(d->kv_tenants[1].token, "token-of-b-0123");
    free(t1);
    free(d);
    free(c);
    /* none: nothing changes */
    c = cfg();
    OLT_CHECK_EQ(load(c, "kv_token = \"x\"\n"), 0);
    OLT_CHECK_EQ(finalize(c), 0);
    OLT_CHECK_EQ(c->n_kv_tenants, 0);
    free(c);
    /* file only */
    ARGS_ERR("command line: --kv-tenants.name: [[kv_tenants]] entries can only be given in "
             "the config file", "--kv-tenants.name", "x");
}

OLT_TEST(config_kv_tenants_errors)
{
    char e[1024], extra[1024];
    const char *ta = token_file("a.tok", "token-of-a-0123\n", 0600);
    const char *tb = token_file("b.tok", "token-of-b-0123\n", 0600);
    /* names */
    snprintf(extra, sizeof extra, "\n[[kv_tenants]]\nname = \"team-a\"\ntoken_file = \"%s\"\n"
             "namespaces = [\"c\"]\ncapacity_gb = 1\n", tb);
    FILE_ERR(tenants_doc("", ta, tb, extra), "openlake.toml:14: kv_tenants.name: tenant name "
             "\"team-a\" is used twice (first at line 1)");
    FILE_ERR("[[kv_tenants]]\nname = \"default\"\n",
             "openlake.toml:2: kv_tenants.name: expected a name of 1 to 32 characters a-z, 0-9, "
             "'_' or '-', not \"default\", got string \"default\"");
    FILE_ERR("[[kv_tenants]]\nname = \"Team\"\n",
             "openlake.toml:2: kv_tenants.name: expected a name of 1 to 32 characters a-z, 0-9, "
             "'_' or '-', not \"default\", got string \"Team\"");
    /* patterns: one namespace, one tenant (a third tenant's against the two) */
    static const char *const overlaps[][2] = {
        {"\"x\", \"team-*\"", "\"team-*\" overlaps \"team-a/*\" of tenant \"team-a\" (line 1)"},
        {"\"team-b/x\"", "\"team-b/x\" overlaps \"team-b/*\" of tenant \"b_2\" (line 7)"},
    };
    const char *tc = token_file("c.tok", "token-of-c-0123", 0600);
    for (size_t i = 0; i < sizeof overlaps / sizeof overlaps[0]; i++) {
        snprintf(extra, sizeof extra, "\n[[kv_tenants]]\nname = \"c\"\ntoken_file = \"%s\"\n"
                 "namespaces = [%s]\ncapacity_gb = 1\n", tc, overlaps[i][0]);
        snprintf(e, sizeof e, "openlake.toml:14: kv_tenants.namespaces: %s: a namespace belongs "
                 "to one tenant", overlaps[i][1]);
        FILE_ERR(tenants_doc("", ta, tb, extra), e);
    }
    FILE_ERR("[[kv_tenants]]\nnamespaces = [\"a*b\"]\n",
             "openlake.toml:2: kv_tenants.namespaces[0]: expected a namespace (1 to 256 bytes, "
             "no control characters), or a prefix ending in '*' such as \"team-a/*\", got "
             "string \"a*b\"");
    FILE_ERR("[[kv_tenants]]\nnamespaces = []\n",
             "openlake.toml:2: kv_tenants.namespaces: expected an array of 1 to 16 strings, got "
             "an empty array");
    FILE_ERR("[[kv_tenants]]\nname = \"a\"\ntoken_file = \"/t\"\nnamespaces = [\"a\"]\n",
             "openlake.toml:1: kv_tenants[0]: missing required key capacity_gb");
    FILE_ERR("[[kv_tenants]]\ncapacity_gb = 0\n",
             "openlake.toml:2: kv_tenants.capacity_gb: expected a number >= 0.001, got integer 0");
    /* token files */
    snprintf(e, sizeof e, "openlake.toml:7: kv_tenants.token_file: %s/none: cannot open: No "
             "such file or directory", olt_tmpdir());
    char none[600];
    snprintf(none, sizeof none, "%s/none", olt_tmpdir());
    FILE_ERR(tenants_doc("", ta, none, ""), e);
    const char *bad = token_file("empty.tok", " \n", 0600);
    snprintf(e, sizeof e, "openlake.toml:7: kv_tenants.token_file: %s: is empty", bad);
    FILE_ERR(tenants_doc("", ta, bad, ""), e);
    bad = token_file("space.tok", "two words\n", 0600);
    snprintf(e, sizeof e, "openlake.toml:7: kv_tenants.token_file: %s: expected a string of up "
             "to 128 printable ASCII characters without spaces, got 9 bytes (secret, not shown)",
             bad);
    FILE_ERR(tenants_doc("", ta, bad, ""), e);
    char big[200];
    memset(big, 'x', 129);
    big[129] = 0;
    bad = token_file("long.tok", big, 0600);
    snprintf(e, sizeof e, "openlake.toml:7: kv_tenants.token_file: %s: longer than 128 bytes",
             bad);
    FILE_ERR(tenants_doc("", ta, bad, ""), e);
    /* a token of its own */
    snprintf(e, sizeof e, "openlake.toml:7: kv_tenants.token_file: %s holds the token of tenant "
             "\"team-a\" (line 1); each tenant needs its own", ta);
    FILE_ERR(tenants_doc("", ta, ta, ""), e);
    snprintf(e, sizeof e, "openlake.toml:2: kv_tenants.token_file: %s holds kv_token, which "
             "opens every namespace; give the tenant a token of its own", ta);
    FILE_ERR(tenants_doc("kv_token = \"token-of-a-0123\"\n", ta, tb, ""), e);
}

OLT_TEST(config_kv_socket_mode)
{
    struct ol_config *c = cfg();
    OLT_CHECK_STR(c->kv_socket_mode, "0600");
    OLT_CHECK_EQ(args(c, "--kv-socket-mode", "0660", (char *)NULL), 0);
    OLT_CHECK_STR(c->kv_socket_mode, "0660");
    OLT_CHECK_EQ(args(c, "--kv-socket-mode", "666", (char *)NULL), 0);
    free(c);
    const char *want = "command line: --kv-socket-mode: expected an octal mode of 3 or 4 "
                       "digits, at most 0777, with owner read and write, got ";
    char e[256];
    const char *bad[] = {"0400", "0680", "01777", "660x", "60", "0o660"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(e, sizeof e, "%s\"%s\"", want, bad[i]);
        ARGS_ERR(e, "--kv-socket-mode", bad[i]);
    }
}

/* TLS on the node RPC: all three files or none, over TCP only; the key a
 * regular file, warned about when group or others may read it. */
OLT_TEST(config_rpc_tls)
{
    const char *dir = olt_tmpdir();
    char kp[512], a[1600], want[1200], w[600];
    FILE_ERR("rpc_tls_cert = \"/etc/ol/node.pem\"\n",
             "openlake.toml:1: rpc_tls_cert: given without rpc_tls_key and rpc_tls_ca (TLS on the node RPC needs this node's certificate, its key and the CA bundle)");
    FILE_ERR("rpc_tls_key = \"/etc/ol/node.key\"\nrpc_tls_ca = \"/etc/ol/ca.pem\"\n",
             "openlake.toml:1: rpc_tls_key: given without rpc_tls_cert (TLS on the node RPC needs this node's certificate, its key and the CA bundle)");
    FILE_ERR("rpc_tls_ca = \"/etc/ol/ca.pem\"\n",
             "openlake.toml:1: rpc_tls_ca: given without rpc_tls_cert and rpc_tls_key (TLS on the node RPC needs this node's certificate, its key and the CA bundle)");
    FILE_ERR("rpc_tls_cert = \"/c\"\nrpc_tls_key = \"/k\"\nrpc_tls_ca = \"/a\"\n",
             "openlake.toml:1: rpc_tls_cert: the node RPC runs in a cluster only: set cluster.name too");
#ifdef OL_HAVE_UCX /* without UCX, transport = "ucx" is refused first */
    FILE_ERR("transport = \"ucx\"\nrpc_tls_cert = \"/c\"\nrpc_tls_key = \"/k\"\nrpc_tls_ca = \"/a\"\n[cluster]\nname = \"c\"\netcd = [\"http://e:1\"]\n",
             "openlake.toml:2: rpc_tls_cert: TLS is for the TCP transport; UCX encrypts nothing (transport = \"ucx\")");
#endif
    FILE_ERR("rpc_tls_cert = \"/c\"\nrpc_tls_key = \"/nonexistent/node.key\"\nrpc_tls_ca = \"/a\"\n[cluster]\nname = \"c\"\netcd = [\"http://e:1\"]\n",
             "openlake.toml:2: rpc_tls_key: /nonexistent/node.key: cannot open: No such file or directory");
    snprintf(a, sizeof a, "rpc_tls_cert = \"/c\"\nrpc_tls_key = \"%s\"\nrpc_tls_ca = \"/a\"\n[cluster]\nname = \"c\"\netcd = [\"http://e:1\"]\n", dir);
    snprintf(want, sizeof want, "openlake.toml:2: rpc_tls_key: %s: not a regular file", dir);
    FILE_ERR(a, want);
    /* flags and variables as for every key; a key group or others may
     * read is a warning, not an error */
    struct ol_config *c = cfg();
    const char *key = secret_file(kp, dir, "node.key", "not read here\n", 0640);
    OLT_CHECK_EQ(args(c, "--rpc-tls-cert", "/c", "--rpc-tls-key", key, "--cluster.name", "c",
                      "--cluster.etcd", "http://e:1", (char *)NULL), 0);
    snprintf(a, sizeof a, "OPENLAKE_RPC_TLS_CA=/etc/ol/ca.pem");
    OLT_CHECK_EQ(env(c, a, (char *)NULL), 0);
    OLT_CHECK_EQ(finalize(c), 0);
    OLT_CHECK_STR(c->rpc_tls_ca, "/etc/ol/ca.pem");
    snprintf(want, sizeof want, "command line: --rpc-tls-key: %s is mode 0640: group or others may read it; chmod 600 it", key);
    OLT_CHECK_STR(ol_config_secret_warning(c, 0, w, sizeof w), want);
    OLT_CHECK(ol_config_secret_warning(c, 1, w, sizeof w) == NULL);
    OLT_CHECK_EQ(chmod(key, 0600), 0);
    OLT_CHECK_EQ(finalize(c), 0);
    OLT_CHECK(ol_config_secret_warning(c, 0, w, sizeof w) == NULL);
    free(c);
}
