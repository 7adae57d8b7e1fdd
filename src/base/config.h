/*
 * config.h - every openlaked setting, its default, and how it is loaded.
 *
 * Owns: struct ol_config, the one key table (config.c) that every way of
 * setting a key is derived from (TOML file, command-line flag, environment
 * variable, validation, did-you-mean suggestions, `openlaked --help-config`
 * and docs/configuration.md), and the loading order
 *
 *     defaults -> TOML file (--config FILE) -> command-line flags
 *              -> OPENLAKE_* environment variables -> ol_config_finalize()
 *
 * (each later source overrides the earlier ones key by key; a list given by
 * a later source replaces the whole list).
 *
 * Must not: log, exit, touch global state (the log level included), or read
 * any file but the one it is asked to and the token files of [[kv_tenants]]
 * (read by ol_config_finalize). The caller prints the message and exits
 * (openlaked exits 2).
 *
 * Naming: a key's flag is "--" + key with '_' written as '-' (either is
 * accepted), e.g. kv_slab.capacity_gb -> --kv-slab.capacity-gb; its
 * environment variable is "OPENLAKE_" + key upper-cased with '.' -> '_',
 * e.g. OPENLAKE_KV_SLAB_CAPACITY_GB. List keys take a comma-separated list
 * from a flag or the environment (items are trimmed of spaces).
 * [[credentials]], [[nodes]] and [[kv_tenants]] are file-only, except that
 * the flag and environment keys access_key + secret_key (OPENLAKE_ACCESS_KEY,
 * OPENLAKE_SECRET_KEY) add or replace one credential pair.
 *
 * Secrets: kv_token and secret_key each have a *_file key naming a file
 * that holds the secret (base/secretfile.h: trailing whitespace dropped;
 * missing, empty or too long is an error). ol_config_finalize() reads it
 * into the secret's field; giving both forms, from any sources, is an
 * error. A secret given as a flag is readable by every local user in
 * /proc/PID/cmdline: ol_config_secret_warning() says so, for the log.
 *
 * Errors: every function that can fail returns 0 or -1 and, on -1, writes
 * one line (no newline) into the caller's err[errlen], naming where the bad
 * value came from, the key, what was expected and what was found:
 *     openlake.toml:7: kv_slab.capacity_gb: expected a number >= 0, got string "big"
 *     openlake.toml:3: unknown key "s3_adr" (did you mean "s3_addr"?)
 *     command line: unknown flag --s3-adr (did you mean --s3-addr?)
 *     environment: OPENLAKE_S3_ADDR: expected an address host:port ..., got "x"
 * After a failure the struct holds a mix of old and new values; do not use
 * it. err may be NULL only when errlen is 0.
 *
 * Size: struct ol_config is about 840 KiB (fixed arrays); allocate it
 * statically or on the heap, not on a thread's stack.
 */
#ifndef OL_CONFIG_H
#define OL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define OL_CONFIG_ADDR_LEN        264   /* host:port incl. NUL (253-char host) */
#define OL_CONFIG_PATH_LEN        4096
#define OL_CONFIG_REGION_LEN      64
#define OL_CONFIG_DOMAIN_LEN      254
#define OL_CONFIG_KEY_LEN         129   /* access / secret key, 128 + NUL */
#define OL_CONFIG_DEVICE_LEN      64
#define OL_CONFIG_MAX_DATA_DIRS   64
#define OL_CONFIG_MAX_KV_DISK_DIRS 16
#define OL_CONFIG_MAX_CREDENTIALS 64
#define OL_CONFIG_MAX_RDMA_DEVICES 32
#define OL_CONFIG_MAX_ETCD        16
#define OL_CONFIG_MAX_POOLS       8     /* cluster.store_pools */
#define OL_CONFIG_POOL_LEN        256   /* one pool's node list, 255 + NUL */
#define OL_CONFIG_URL_LEN         256
#define OL_CONFIG_MAX_KV_TENANTS  32
#define OL_CONFIG_MAX_TENANT_NS   16    /* namespace patterns per tenant */
#define OL_CONFIG_TENANT_NAME_LEN 33    /* 32 + NUL */
#define OL_CONFIG_NSPAT_LEN       257   /* a namespace pattern (base/nspat.h), 256 + NUL */
#define OL_CONFIG_MAX_KEYS        96    /* capacity of origin[] */

enum ol_config_mode { OL_MODE_ALL, OL_MODE_S3, OL_MODE_KV };
enum ol_config_transport { OL_TRANSPORT_TCP, OL_TRANSPORT_UCX };
enum ol_config_rdma_backend { OL_RDMA_NONE, OL_RDMA_UCX };
enum ol_config_store_sync { OL_SYNC_SYNCFS, OL_SYNC_FSYNC };
enum ol_config_kv_populate { OL_KV_POPULATE_BACKGROUND, OL_KV_POPULATE_OFF };
/* log_level holds the values of enum ol_log_level (base/log.h):
 * 0 debug, 1 info, 2 warn, 3 error. */

/* Where a key's current value came from. */
enum ol_config_source {
    OL_CONFIG_DEFAULT = 0,
    OL_CONFIG_FILE,
    OL_CONFIG_FLAG,
    OL_CONFIG_ENV,
};

struct ol_config_origin {
    uint8_t source;            /* enum ol_config_source */
    uint32_t line;             /* file line when source is OL_CONFIG_FILE */
};

struct ol_config_credential {
    char access_key[OL_CONFIG_KEY_LEN];
    char secret_key[OL_CONFIG_KEY_LEN];
    struct ol_config_origin origin;     /* the [[credentials]] header */
};

/* One [[kv_tenants]] entry: who may use which KV namespaces, in a slab of
 * its own (docs/configuration.md, "KV tenants"). */
struct ol_config_kv_tenant {
    char name[OL_CONFIG_TENANT_NAME_LEN];      /* [a-z0-9_-], unique, not "default" */
    char token_file[OL_CONFIG_PATH_LEN];
    char namespaces[OL_CONFIG_MAX_TENANT_NS][OL_CONFIG_NSPAT_LEN]; /* base/nspat.h */
    int n_namespaces;
    double capacity_gb;                        /* its slab */
    double disk_capacity_gb;                   /* its disk tier; 0 = none */
    /* Set by ol_config_finalize from token_file (not a key: never dumped). */
    char token[OL_CONFIG_KEY_LEN];
    uint16_t token_file_mode;                  /* the file's permission bits */
    struct ol_config_origin origin;            /* the [[kv_tenants]] header */
};

struct ol_config {
    int64_t self_id;
    int mode;                           /* enum ol_config_mode */
    int transport;                      /* enum ol_config_transport */
    char rpc_addr[OL_CONFIG_ADDR_LEN];
    char rpc_tls_cert[OL_CONFIG_PATH_LEN]; /* "" = the node RPC without TLS */
    char rpc_tls_key[OL_CONFIG_PATH_LEN];
    char rpc_tls_ca[OL_CONFIG_PATH_LEN];
    char s3_addr[OL_CONFIG_ADDR_LEN];
    char kv_addr[OL_CONFIG_ADDR_LEN];
    char kv_ucx_addr[OL_CONFIG_ADDR_LEN]; /* "" = no UCX listener (daemon/kvucx.c) */
    char kv_socket[OL_CONFIG_PATH_LEN];  /* "" = <data_dirs[0]>/kv.sock */
    char kv_socket_mode[8];             /* octal permission bits, e.g. "0600" */
    char kv_token[OL_CONFIG_KEY_LEN];    /* "" = generated, kept in the data dir */
    char kv_token_file[OL_CONFIG_PATH_LEN]; /* "" = none; finalize reads it into kv_token */
    int64_t kv_hello_timeout_ms;        /* a connection without HELLO is closed then */
    int64_t kv_max_unauthenticated;     /* per core and listener; the oldest goes first */
    char region[OL_CONFIG_REGION_LEN];
    char s3_domain[OL_CONFIG_DOMAIN_LEN]; /* "" = path-style addressing only */
    bool s3_sigv2;                      /* accept Signature Version 2 requests */
    char s3_tls_cert[OL_CONFIG_PATH_LEN]; /* "" = plain HTTP */
    char s3_tls_key[OL_CONFIG_PATH_LEN];
    char data_dirs[OL_CONFIG_MAX_DATA_DIRS][OL_CONFIG_PATH_LEN];
    int n_data_dirs;
    bool data_dir_per_user;             /* data_dirs named nowhere: the XDG default,
                                           whose parents openlaked makes (base/datadir.h) */
    int64_t set_drive_count;            /* 0 = auto */
    int64_t default_parity_count;       /* -1 = auto */
    int64_t inline_max_bytes;           /* objects up to this size live in their metadata */
    int64_t multipart_expiry_s;         /* 0 = incomplete uploads never expire */
    bool direct_io;                     /* O_DIRECT shard writes where drives take them */
    int store_sync;                     /* enum ol_config_store_sync */
    int64_t heal_queue_size;            /* on-read heal queue entries */
    int64_t heal_scan_rate_mbps;        /* scanner: MB/s of shards verified; 0 = off */
    int64_t heal_scan_interval_s;       /* scanner: pause after a full pass */
    struct ol_config_credential credentials[OL_CONFIG_MAX_CREDENTIALS];
    int n_credentials;
    struct {
        double cpu_ram_frac;            /* 0 = unset */
        double capacity_gb;             /* 0 = auto */
        int64_t reserve_ttl_secs;
        double namespace_quota_gb;      /* 0 = no quota */
        int populate;                   /* enum ol_config_kv_populate */
    } kv_slab;
    struct {
        char dirs[OL_CONFIG_MAX_KV_DISK_DIRS][OL_CONFIG_PATH_LEN];
        int n_dirs;                     /* 0 = use data_dirs */
        double capacity_gb;             /* 0 = no disk tier */
        int64_t queue_depth;
    } kv_disk;
    struct ol_config_kv_tenant kv_tenants[OL_CONFIG_MAX_KV_TENANTS];
    int n_kv_tenants;
    struct {
        int backend;                    /* enum ol_config_rdma_backend */
        char devices[OL_CONFIG_MAX_RDMA_DEVICES][OL_CONFIG_DEVICE_LEN];
        int n_devices;
        int64_t gid_index;              /* -1 = auto */
    } rdma;
    struct {
        char name[64];                  /* "" = no cluster: a single host, no etcd */
        char etcd[OL_CONFIG_MAX_ETCD][OL_CONFIG_URL_LEN];
        int n_etcd;
        char etcd_user[OL_CONFIG_KEY_LEN];
        char etcd_password[OL_CONFIG_KEY_LEN];       /* secret; or from etcd_password_file */
        char etcd_password_file[OL_CONFIG_PATH_LEN];
        char etcd_tls_ca[OL_CONFIG_PATH_LEN];
        char etcd_tls_cert[OL_CONFIG_PATH_LEN];
        char etcd_tls_key[OL_CONFIG_PATH_LEN];
        int64_t lease_ttl_secs;
        int64_t etcd_timeout_ms;
        char advertise_host[OL_CONFIG_DOMAIN_LEN];   /* "" = the hostname, for 0.0.0.0 */
        char secret[OL_CONFIG_KEY_LEN];              /* node-to-node; or from secret_file */
        char secret_file[OL_CONFIG_PATH_LEN];
        int64_t rpc_window_bytes;                    /* node RPC credit per dialer */
        bool rpc_credits;                            /* false: measuring only (rpc.h no_credits) */
        int64_t kv_timeout_ms;                       /* the KV pool's calls to a home */
        int64_t kv_replicas;                         /* the KV pool's homes per key, 1..16 */
        char store_pools[OL_CONFIG_MAX_POOLS][OL_CONFIG_POOL_LEN];   /* node id lists */
        int n_store_pools;                           /* 0: each node's store its own */
        int64_t store_timeout_ms;                    /* a step on another node's drive */
    } cluster;
    int64_t threads;                    /* finalize turns 0 into online cores */
    int log_level;                      /* enum ol_log_level */
    struct {
        int64_t max_header_bytes;
        int64_t max_headers;
        int64_t header_timeout_ms;
        int64_t idle_timeout_ms;
        int64_t body_min_rate;          /* bytes/s over body_rate_window_ms; 0 = none */
        int64_t body_rate_window_ms;
        int64_t max_connections;        /* per process */
        uint64_t max_body_bytes;        /* 0 = unlimited */
        int64_t output_buffers;         /* per core, 16 KiB each */
        int64_t loopback_sndbuf;        /* SO_SNDBUF for loopback peers; 0 = autotune */
        int64_t shutdown_timeout_ms;
        bool debug_endpoints;           /* /_openlake/debug/ (tests only) */
    } http;

    /* The pair given by access_key/secret_key flags or OPENLAKE_ACCESS_KEY/
     * OPENLAKE_SECRET_KEY; finalize merges it into credentials[]. */
    struct ol_config_credential flag_credential;
    /* secret_key_file: finalize reads it into flag_credential.secret_key. */
    char flag_secret_key_file[OL_CONFIG_PATH_LEN];

    /* Bookkeeping: the file loaded (as named to the loader, "" if none) and
     * where each key of the table got its value (index = key table order;
     * use ol_config_origin_of() rather than indexing). */
    char config_file[OL_CONFIG_PATH_LEN];
    struct ol_config_origin origin[OL_CONFIG_MAX_KEYS];
    /* Permission bits of the file each *_file key named, as finalize found
     * it (index = key table order; 0 when none was read). */
    uint16_t secret_file_mode[OL_CONFIG_MAX_KEYS];
};

/* Fills c with every key's default (from the key table) and clears the
 * lists and bookkeeping. Cannot fail. */
void ol_config_defaults(struct ol_config *c);

/*
 * Reads the TOML file `path` (at most 1 MiB) and applies every key in it.
 * Errors name the file as `path` was given. Returns 0, or -1 with a message
 * (unreadable file, TOML syntax, unknown key, bad value).
 */
int ol_config_load_file(struct ol_config *c, const char *path, char *err,
                        size_t errlen);

/* The same for a TOML document of `len` bytes in `buf` (no NUL needed);
 * `name` stands for the file name in messages (NULL: "<config>") and is
 * copied to c->config_file. Returns 0 or -1. */
int ol_config_load_buffer(struct ol_config *c, const char *name,
                          const char *buf, size_t len, char *err,
                          size_t errlen);

/*
 * Applies the config flags in argv[1..argc-1]: "--key value" or
 * "--key=value"; a boolean flag with no value (last, or followed by an
 * argument starting with "-") means true. The caller's own arguments are
 * skipped, never rejected: "--config FILE", "--config=FILE", "--help", "-h",
 * "--help-config", "--version" (the caller handles them before or after
 * this call). Anything else that is not a config flag is an error
 * (did-you-mean for near misses). Returns 0 or -1.
 */
int ol_config_apply_args(struct ol_config *c, int argc, char **argv,
                         char *err, size_t errlen);

/*
 * Applies every OPENLAKE_* variable in envp (a NULL-terminated
 * "NAME=value" array; NULL means the process environment). An OPENLAKE_*
 * name that is not a key is an error, so nothing else may use that prefix.
 * Returns 0 or -1.
 */
int ol_config_apply_env(struct ol_config *c, char **envp, char *err,
                        size_t errlen);

/*
 * Cross-key checks and derived values, run once after all sources:
 *   - each *_file key that names a file (kv_token_file, secret_key_file)
 *     has it read into its secret (kv_token, secret_key) and checked like
 *     the secret given inline; the secret given inline as well is an error;
 *   - access_key/secret_key from flags/env must come together; the pair
 *     replaces the secret of the credential with that access key, or is
 *     appended;
 *   - access keys, node ids, node rpc_addrs and data_dirs must be unique;
 *   - [[kv_tenants]]: names unique; no namespace claimed by two tenants
 *     (their patterns must not overlap); each token_file is read
 *     (base/secretfile.h) into the entry's token, which must be a valid
 *     kv_token, differ from every other tenant's and from kv_token;
 *     self_id must be one of the [[nodes]] ids when nodes are listed;
 *   - default_parity_count <= set_drive_count / 2 when both are set;
 *   - s3_addr must differ from rpc_addr (modes all, s3) and from kv_addr
 *     (mode all);
 *   - rpc_tls_cert, rpc_tls_key and rpc_tls_ca come together, in a
 *     cluster, with transport "tcp"; rpc_tls_key must name a regular file (its mode is
 *     kept for ol_config_secret_warning);
 *   - mode "kv": when kv_addr was not set by any source but rpc_addr was,
 *     kv_addr = rpc_addr;
 *   - threads 0 becomes the number of online cores (at most 256).
 * Returns 0 or -1.
 */
int ol_config_finalize(struct ol_config *c, char *err, size_t errlen);

/*
 * All of the above in order: defaults, the file named by --config (if
 * any), the flags, the environment (envp NULL: the process's), finalize.
 * Returns 0 or -1.
 */
int ol_config_load(struct ol_config *c, int argc, char **argv, char **envp,
                   char *err, size_t errlen);

/*
 * Finds "--config FILE" / "--config=FILE" in argv[1..]. Sets *path to FILE
 * (a pointer into argv) or NULL when absent and returns 0; returns -1 with a
 * message when --config has no value or is given twice.
 */
int ol_config_find_file_arg(int argc, char **argv, const char **path,
                            char *err, size_t errlen);

/*
 * The i-th (i = 0, 1, ...) warning about how the secrets were given, one
 * line for the log, in buf; NULL when there is no i-th. After a successful
 * ol_config_finalize(). The warnings:
 *   --kv-token on the command line is readable by any local user in
 *   /proc/PID/cmdline; use --kv-token-file FILE (or OPENLAKE_KV_TOKEN_FILE,
 *   OPENLAKE_KV_TOKEN) instead
 *   command line: --kv-token-file: /etc/ol/kv.token is mode 0644: group or
 *   others may read it; chmod 600 it
 * They name keys, flags and paths, never a secret.
 */
const char *ol_config_secret_warning(const struct ol_config *c, int i, char *buf,
                                     size_t len);

/*
 * The i-th warning (i = 0, 1, ...) about a setting that has no effect in
 * this configuration, a line for the log in buf; NULL when there is no
 * i-th. After a successful ol_config_finalize(). The warnings: transport
 * "ucx", rpc_addr (modes all, s3) without a cluster; rdma.devices or
 * rdma.gid_index with no UCX context to take them (neither transport "ucx"
 * in a cluster nor kv_ucx_addr).
 */
const char *ol_config_unused_warning(const struct ol_config *c, int i, char *buf, size_t len);

/* Prints the documented key list (`openlaked --help-config`). The text is
 * the reference block of docs/configuration.md, byte for byte. */
void ol_config_print_keys(FILE *f);

/*
 * Writes the effective configuration as a TOML document that loads back to
 * the same settings. Secret keys are written as "<redacted>" unless
 * show_secrets; a secret read from its *_file key is left out (the path is
 * written instead; it is not secret).
 */
void ol_config_dump(FILE *f, const struct ol_config *c, bool show_secrets);

/*
 * Describes where `key` (a name from the key table, e.g. "kv_slab.capacity_gb")
 * got its value: "default", "openlake.toml:7", "flag --kv-slab.capacity-gb",
 * "environment OPENLAKE_KV_SLAB_CAPACITY_GB". Returns buf, or NULL for an
 * unknown key or len 0.
 */
const char *ol_config_origin_of(const struct ol_config *c, const char *key,
                                char *buf, size_t len);

/* Whether `key` was set by a file, flag or environment variable (0 for
 * defaults and unknown keys). */
bool ol_config_is_set(const struct ol_config *c, const char *key);

#endif
