/*
 * config.c - see config.h. One static key table drives everything.
 *
 * Owns: ol_config_keys[] (name, kind, storage offset, default, range or
 * choices, one-line doc) and the code that reads values into struct
 * ol_config from a parsed TOML tree, from "--key value" flags and from
 * OPENLAKE_* variables, checks them against the table, suggests near
 * misses, and prints the table as documentation.
 * Must not: log, exit, or know what a setting means beyond its checks
 * (the daemon and subsystems interpret the values).
 *
 * Adding a key: add a field to struct ol_config, one row below, and run
 * `openlaked --help-config` (or the unit test) to refresh the reference
 * block in docs/configuration.md; the unit test fails until the two agree.
 *
 * Table rows:
 *   K_TABLE    a [table]; its keys are rows named "table.key"
 *   K_TABLES   an [[array of tables]]; `off` is the element array, `size`
 *              one element, `count_off` the int count, `hi` the capacity;
 *              its keys are rows flagged KF_IN_ARRAY with offsets inside
 *              the element
 *   K_INT      int64_t in [lo, hi]
 *   K_UINT     uint64_t in [0, INT64_MAX] (TOML integers are signed)
 *   K_FLOAT    double in [flo, fhi], finite; TOML integers accepted
 *   K_BOOL     bool
 *   K_STR      char[size], length in [lo, hi], optional check()
 *   K_ADDR     char[size] holding host:port or [v6]:port
 *   K_ENUM     int index into choices[]
 *   K_LIST     char[hi][size] + int count at count_off; lo..hi items,
 *              each item non-empty, shorter than size, optional check()
 * A K_STR row with secret_of names a file holding the secret key of that
 * name (a top-level K_STR row flagged KF_SECRET); finalize reads it.
 * Defaults are written as flag text and applied by the same code that
 * reads flags, so a default is checked like any other value.
 */
#include "base/config.h"
#include "base/datadir.h"
#include "base/assert.h"
#include "base/fault.h"
#include "base/log.h"
#include "base/nspat.h"
#include "base/secretfile.h"
#include "base/toml.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

enum ckind { K_TABLE, K_TABLES, K_INT, K_UINT, K_FLOAT, K_BOOL, K_STR, K_ADDR,
             K_ENUM, K_LIST };

enum {
    KF_IN_ARRAY = 1,   /* key of each [[table]] element */
    KF_NO_FILE = 2,    /* flag and environment only */
    KF_REQUIRED = 4,   /* must appear in each [[table]] element */
    KF_SECRET = 8,     /* redacted by ol_config_dump */
    KF_KEY_FILE = 16,  /* a private key's path: a regular file, warned about
                          when group or others may read it */
    KF_EMPTY_OK = 32,  /* K_ADDR: "" is allowed (the listener is off) */
};

struct ckey {
    const char *name;
    uint8_t kind, flags;
    size_t off, size, count_off;
    size_t org_off;               /* K_TABLES: the element's origin */
    int64_t lo, hi;
    double flo, fhi;
    const char *const *choices;
    int (*check)(const char *s);  /* extra test for K_STR / K_LIST items */
    const char *expect;           /* replaces the generated "expected ..." */
    const char *def;              /* default as flag text; NULL: none */
    const char *doc;
    const char *secret_of;        /* K_STR path of a file holding this secret key */
};

#define CO(f) offsetof(struct ol_config, f)
#define CS(f) sizeof(((struct ol_config *)0)->f)
#define CRO(f) offsetof(struct ol_config_credential, f)
#define CRS(f) sizeof(((struct ol_config_credential *)0)->f)
#define TO(f) offsetof(struct ol_config_kv_tenant, f)
#define TS(f) sizeof(((struct ol_config_kv_tenant *)0)->f)

static const char *const modes[] = {"all", "s3", "kv", NULL};
static const char *const transports[] = {"tcp", "ucx", NULL};
static const char *const backends[] = {"none", "ucx", NULL};
static const char *const syncs[] = {"syncfs", "fsync", NULL};
static const char *const kv_populates[] = {"background", "off", NULL};
static const char *const levels[] = {"debug", "info", "warn", "error", NULL};

static int check_region(const char *s)
{
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9') || *s == '-' || *s == '_' || *s == '.'))
            return -1;
    return 0;
}

static int check_access_key(const char *s)
{
    for (; *s; s++)
        if (*s <= ' ' || *s >= 0x7f || *s == '/')
            return -1;
    return 0;
}

static int check_secret_key(const char *s)
{
    for (; *s; s++)
        if (*s <= ' ' || *s >= 0x7f)
            return -1;
    return 0;
}

/* A DNS name: labels of letters, digits and '-', joined by '.'. */
static int check_domain(const char *s)
{
    size_t label = 0;
    for (; *s; s++) {
        if (*s == '.') {
            if (!label)
                return -1;
            label = 0;
        } else if ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                   (*s >= '0' && *s <= '9') || *s == '-') {
            if (++label > 63)
                return -1;
        } else {
            return -1;
        }
    }
    return 0;
}

static int check_path(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return -1;
    return 0;
}

/* An octal mode of 3 or 4 digits, at most 0777, that lets the owner read
 * and write ("0600", "0660", "666"). */
static int check_mode(const char *s)
{
    size_t n = strlen(s);
    unsigned long v = 0;
    if (n < 3 || n > 4)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '7')
            return -1;
        v = v * 8 + (unsigned long)(s[i] - '0');
    }
    return v <= 0777 && (v & 0600) == 0600 ? 0 : -1;
}

static int check_device(const char *s)
{
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9') || *s == '-' || *s == '_' ||
              *s == '.' || *s == ':'))
            return -1;
    return 0;
}

/* An etcd endpoint: an http:// or https:// URL, printable, no spaces. */
static int check_url(const char *s)
{
    if (strncmp(s, "http://", 7) != 0 && strncmp(s, "https://", 8) != 0)
        return -1;
    for (; *s; s++)
        if ((unsigned char)*s <= 0x20 || *s == 0x7f)
            return -1;
    return 0;
}

/* A pool's nodes: ids and ranges "a-b" of ids, separated by commas (the
 * daemon parses them: cluster/pool_rec.h ol_pool_parse_nodes). */
static int check_pool_nodes(const char *s)
{
    if (!*s)
        return -1;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || *s == ',' || *s == '-' || *s == ' '))
            return -1;
    return 0;
}

/* A cluster name: a-z, 0-9, '_', '-' (it is part of every etcd key). */
static int check_cluster_name(const char *s)
{
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-' || *s == '_'))
            return -1;
    return 0;
}

/* A tenant name: 1..32 of a-z, 0-9, '_', '-'; "default" names the
 * namespaces no tenant claims. */
static int check_tenant_name(const char *s)
{
    if (strcmp(s, "default") == 0)
        return -1;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-' || *s == '_'))
            return -1;
    return 0;
}

static const struct ckey ol_config_keys[] = {
    {.name = "self_id", .kind = K_INT, .off = CO(self_id), .lo = 0,
     .hi = INT32_MAX, .def = "0",
     .doc = "This node's id; unique in its cluster."},
    {.name = "mode", .kind = K_ENUM, .off = CO(mode), .choices = modes,
     .def = "all",
     .doc = "Services to run: all, s3 (S3 API only) or kv (KV cache only)."},
    {.name = "transport", .kind = K_ENUM, .off = CO(transport),
     .choices = transports, .def = "tcp",
     .doc = "Node RPC transport, in a cluster: tcp, or ucx (UCX stream endpoints; UCX_TLS picks the wire; a build without UCX refuses it). Without a cluster, ucx is warned about (no effect)."},
    {.name = "rpc_addr", .kind = K_ADDR, .off = CO(rpc_addr),
     .size = CS(rpc_addr), .def = "127.0.0.1:9100",
     .doc = "A cluster node's node RPC listener (docs/node-protocol.md); "
            "mode kv without a cluster: the KV address unless kv_addr is set; "
            "set in modes all and s3 without a cluster: warned about (no effect)."},
    {.name = "rpc_tls_cert", .kind = K_STR, .off = CO(rpc_tls_cert), .size = CS(rpc_tls_cert),
     .lo = 0, .hi = OL_CONFIG_PATH_LEN - 1, .check = check_path,
     .expect = "a path of at most 4095 bytes", .def = "",
     .doc = "PEM certificate chain of this node for TLS on the node RPC (transport tcp; with rpc_tls_key and rpc_tls_ca); \"\" = no TLS (docs/node-protocol.md)."},
    {.name = "rpc_tls_key", .kind = K_STR, .flags = KF_KEY_FILE, .off = CO(rpc_tls_key),
     .size = CS(rpc_tls_key), .lo = 0, .hi = OL_CONFIG_PATH_LEN - 1, .check = check_path,
     .expect = "a path of at most 4095 bytes", .def = "",
     .doc = "PEM private key of rpc_tls_cert (a regular file; a warning when group or others may read it)."},
    {.name = "rpc_tls_ca", .kind = K_STR, .off = CO(rpc_tls_ca), .size = CS(rpc_tls_ca),
     .lo = 0, .hi = OL_CONFIG_PATH_LEN - 1, .check = check_path,
     .expect = "a path of at most 4095 bytes", .def = "",
     .doc = "PEM CA bundle that every node's rpc_tls_cert must chain to; a peer presenting another is refused."},
    {.name = "s3_addr", .kind = K_ADDR, .off = CO(s3_addr),
     .size = CS(s3_addr), .def = "127.0.0.1:9000",
     .doc = "S3 HTTP listen address (also serves /_openlake/ admin paths)."},
    {.name = "kv_addr", .kind = K_ADDR, .off = CO(kv_addr),
     .size = CS(kv_addr), .def = "127.0.0.1:9400",
     .doc = "KV service TCP listen address."},
    {.name = "kv_ucx_addr", .kind = K_ADDR, .flags = KF_EMPTY_OK, .off = CO(kv_ucx_addr),
     .size = CS(kv_ucx_addr), .def = "",
     .doc = "KV service over UCX stream endpoints (the vLLM connector's openlake_device \"ucx\"; UCX_TLS picks the wire); \"\" = off. A build without UCX refuses it."},
    {.name = "kv_socket", .kind = K_STR, .off = CO(kv_socket), .size = CS(kv_socket),
     .lo = 0, .hi = 107, .check = check_path,
     .expect = "a socket path of at most 107 bytes",
     .def = "",
     .doc = "KV service Unix socket; \"\" = kv.sock in the first data dir."},
    {.name = "kv_socket_mode", .kind = K_STR, .off = CO(kv_socket_mode),
     .size = CS(kv_socket_mode), .lo = 3, .hi = 4, .check = check_mode,
     .expect = "an octal mode of 3 or 4 digits, at most 0777, with owner read and write",
     .def = "0600",
     .doc = "Permission bits of the KV Unix socket; \"0660\" lets the socket's group connect (clients still need a token; put kv_socket in a directory they can reach)."},
    {.name = "kv_token", .kind = K_STR, .flags = KF_SECRET, .off = CO(kv_token),
     .size = CS(kv_token), .lo = 0, .hi = 128, .check = check_secret_key,
     .expect = "a string of up to 128 printable ASCII characters without spaces",
     .def = "",
     .doc = "Token KV clients present; \"\" = generated once, kept 0600 in kv.token in the first data dir (or read from kv_token_file)."},
    {.name = "kv_token_file", .kind = K_STR, .off = CO(kv_token_file),
     .size = CS(kv_token_file), .lo = 0, .hi = OL_CONFIG_PATH_LEN - 1, .check = check_path,
     .expect = "a path of at most 4095 bytes", .def = "", .secret_of = "kv_token",
     .doc = "File holding kv_token, read at start (trailing newline dropped); not with kv_token. A flag shows in /proc/PID/cmdline, a file does not."},
    {.name = "kv_hello_timeout_ms", .kind = K_INT, .off = CO(kv_hello_timeout_ms),
     .lo = 10, .hi = 600000, .def = "2000",
     .doc = "A KV connection that has not completed HELLO this many ms after it was accepted is closed."},
    {.name = "kv_max_unauthenticated", .kind = K_INT, .off = CO(kv_max_unauthenticated),
     .lo = 1, .hi = 256, .def = "64",
     .doc = "KV connections per core and listener (TCP, Unix socket) that have not completed HELLO; one more closes the oldest. The other connection slots (512 a core) stay for clients that did."},
    {.name = "region", .kind = K_STR, .off = CO(region), .size = CS(region),
     .lo = 1, .hi = OL_CONFIG_REGION_LEN - 1, .check = check_region,
     .expect = "a region name of 1 to 63 letters, digits, '-', '_' or '.'",
     .def = "us-east-1",
     .doc = "S3 region this server reports and signs requests for."},
    {.name = "s3_domain", .kind = K_STR, .off = CO(s3_domain), .size = CS(s3_domain),
     .lo = 0, .hi = OL_CONFIG_DOMAIN_LEN - 1, .check = check_domain,
     .expect = "a DNS name such as s3.example.com (letters, digits, '-', '.')",
     .def = "",
     .doc = "Base domain of virtual-host-style requests (bucket.<s3_domain>); \"\" = path style only."},
    {.name = "s3_sigv2", .kind = K_BOOL, .off = CO(s3_sigv2), .def = "true",
     .doc = "Accept S3 requests signed with Signature Version 2 (HMAC-SHA1: \"Authorization: AWS ...\" headers, and presigned URLs with AWSAccessKeyId, Signature and Expires: what boto3's generate_presigned_url and s3cmd signurl make by default), as MinIO and Ceph RGW do; false = SigV4 only."},
    {.name = "s3_tls_cert", .kind = K_STR, .off = CO(s3_tls_cert), .size = CS(s3_tls_cert),
     .lo = 0, .hi = OL_CONFIG_PATH_LEN - 1, .check = check_path,
     .expect = "a path of at most 4095 bytes",
     .def = "",
     .doc = "PEM certificate chain for TLS on s3_addr (with s3_tls_key); \"\" = plain HTTP."},
    {.name = "s3_tls_key", .kind = K_STR, .off = CO(s3_tls_key),
     .size = CS(s3_tls_key), .lo = 0, .hi = OL_CONFIG_PATH_LEN - 1, .check = check_path,
     .expect = "a path of at most 4095 bytes",
     .def = "",
     .doc = "PEM private key of s3_tls_cert."},
    {.name = "data_dirs", .kind = K_LIST, .off = CO(data_dirs),
     .size = CS(data_dirs[0]), .count_off = CO(n_data_dirs), .lo = 1,
     .hi = OL_CONFIG_MAX_DATA_DIRS, .check = check_path,
     .expect = "a non-empty path of at most 4095 bytes",
     .def = "./data",
     .doc = "Data directories, one per drive; each must be distinct. A missing one is "
            "made only where its parent exists; each is locked while openlaked runs. "
            "Named nowhere: ./data where that directory exists, else "
            "$XDG_DATA_HOME/openlake (~/.local/share/openlake), parents made."},
    {.name = "set_drive_count", .kind = K_INT, .off = CO(set_drive_count),
     .lo = 0, .hi = 256, .def = "0",
     .doc = "Drives per erasure set; 0 = choose from the drive count."},
    {.name = "default_parity_count", .kind = K_INT,
     .off = CO(default_parity_count), .lo = -1, .hi = 128, .def = "-1",
     .doc = "Parity drives per erasure set; -1 = auto. At most half a set."},
    {.name = "inline_max_bytes", .kind = K_INT, .off = CO(inline_max_bytes),
     .lo = 0, .hi = 1048576, .def = "131072",
     .doc = "Objects of at most this many bytes are kept inside their metadata file (one file per drive); 0 = never."},
    {.name = "multipart_expiry_s", .kind = K_INT, .off = CO(multipart_expiry_s),
     .lo = 0, .hi = 315360000, .def = "604800",
     .doc = "Incomplete multipart uploads older than this many seconds are removed; 0 = never."},
    {.name = "direct_io", .kind = K_BOOL, .off = CO(direct_io), .def = "true",
     .doc = "Shard files of objects and parts are written with O_DIRECT on drives that take it (tried at start): no page-cache copy, no dirty pages for the fsync. false = buffered writes."},
    {.name = "store_sync", .kind = K_ENUM, .off = CO(store_sync), .choices = syncs,
     .def = "syncfs",
     .doc = "How writes are made durable: syncfs = one syncfs(2) per filesystem for every write waiting (group commit, for drives that are local filesystems of their own; drives on other filesystems, FUSE and network ones among them, are synced file by file anyway); fsync = an fsync of each file and directory (for drives that share a filesystem with other busy writers)."},
    {.name = "heal_queue_size", .kind = K_INT, .off = CO(heal_queue_size),
     .lo = 1, .hi = 1048576, .def = "1024",
     .doc = "Objects waiting for the on-read heal; more are dropped (counted)."},
    {.name = "heal_scan_rate_mbps", .kind = K_INT, .off = CO(heal_scan_rate_mbps),
     .lo = 0, .hi = 100000, .def = "0",
     .doc = "Background scanner: MB/s of shards checksum-verified; 0 = off."},
    {.name = "heal_scan_interval_s", .kind = K_INT, .off = CO(heal_scan_interval_s),
     .lo = 0, .hi = 31536000, .def = "86400",
     .doc = "Background scanner: seconds between the end of a pass and the next."},
    {.name = "credentials", .kind = K_TABLES, .off = CO(credentials),
     .size = sizeof(struct ol_config_credential),
     .count_off = CO(n_credentials), .hi = OL_CONFIG_MAX_CREDENTIALS,
     .org_off = CRO(origin),
     .doc = "S3 credentials, one table per key pair (see also access_key)."},
    {.name = "credentials.access_key", .kind = K_STR,
     .flags = KF_IN_ARRAY | KF_REQUIRED, .off = CRO(access_key),
     .size = CRS(access_key), .lo = 3, .hi = 128, .check = check_access_key,
     .expect = "a string of 3 to 128 printable ASCII characters without "
               "spaces or '/'",
     .doc = "Access key id; unique."},
    {.name = "credentials.secret_key", .kind = K_STR,
     .flags = KF_IN_ARRAY | KF_REQUIRED | KF_SECRET, .off = CRO(secret_key),
     .size = CRS(secret_key), .lo = 8, .hi = 128, .check = check_secret_key,
     .expect = "a string of 8 to 128 printable ASCII characters without "
               "spaces",
     .doc = "Secret key of that access key."},
    {.name = "kv_slab", .kind = K_TABLE,
     .doc = "The KV cache's shared-memory slab."},
    {.name = "kv_slab.cpu_ram_frac", .kind = K_FLOAT,
     .off = CO(kv_slab.cpu_ram_frac), .flo = 0, .fhi = 0.95, .def = "0",
     .doc = "Slab size as a fraction of host RAM; 0 = unset."},
    {.name = "kv_slab.capacity_gb", .kind = K_FLOAT,
     .off = CO(kv_slab.capacity_gb), .flo = 0, .fhi = INFINITY, .def = "0",
     .doc = "Slab size in GiB; 0 = auto."},
    {.name = "kv_slab.namespace_quota_gb", .kind = K_FLOAT,
     .off = CO(kv_slab.namespace_quota_gb), .flo = 0, .fhi = INFINITY, .def = "0",
     .doc = "RAM one namespace may hold, in GiB (its oldest entries go first); 0 = no quota."},
    {.name = "kv_slab.reserve_ttl_secs", .kind = K_INT,
     .off = CO(kv_slab.reserve_ttl_secs), .lo = 1, .hi = 86400, .def = "30",
     .doc = "Seconds a reserved, uncommitted slot is kept before reuse."},
    {.name = "kv_slab.populate", .kind = K_ENUM, .off = CO(kv_slab.populate),
     .choices = kv_populates, .def = "background",
     .doc = "When the slabs' memory is allocated: background = by a low-priority thread once "
            "the daemon is ready (every slab's whole size, about 0.5 s per GiB of one core), so "
            "first writes find their pages; off = each page at its first write, which made a "
            "fresh daemon's first puts 2-2.6x slower on the benchmark VM (docs/kv-slab.md)."},
    {.name = "kv_disk", .kind = K_TABLE,
     .doc = "The KV cache's disk tier (values evicted from RAM, kept across restarts)."},
    {.name = "kv_disk.dirs", .kind = K_LIST, .off = CO(kv_disk.dirs),
     .size = CS(kv_disk.dirs[0]), .count_off = CO(kv_disk.n_dirs), .lo = 0,
     .hi = OL_CONFIG_MAX_KV_DISK_DIRS, .check = check_path,
     .expect = "a non-empty path of at most 4095 bytes",
     .doc = "Directories on local drives for the disk tier; empty = the data dirs. Made "
            "and locked as data_dirs are."},
    {.name = "kv_disk.capacity_gb", .kind = K_FLOAT,
     .off = CO(kv_disk.capacity_gb), .flo = 0, .fhi = INFINITY, .def = "0",
     .doc = "Disk tier size in GiB over all its dirs; 0 = no disk tier."},
    {.name = "kv_disk.queue_depth", .kind = K_INT,
     .off = CO(kv_disk.queue_depth), .lo = 1, .hi = 1024, .def = "32",
     .doc = "Disk reads and writes in flight per core."},
    {.name = "kv_tenants", .kind = K_TABLES, .off = CO(kv_tenants),
     .size = sizeof(struct ol_config_kv_tenant), .count_off = CO(n_kv_tenants),
     .hi = OL_CONFIG_MAX_KV_TENANTS, .org_off = TO(origin),
     .doc = "KV tenants: each has its own token, namespaces and slab; its clients map only "
            "its slab. kv_token opens every namespace."},
    {.name = "kv_tenants.name", .kind = K_STR, .flags = KF_IN_ARRAY | KF_REQUIRED,
     .off = TO(name), .size = TS(name), .lo = 1, .hi = OL_CONFIG_TENANT_NAME_LEN - 1,
     .check = check_tenant_name,
     .expect = "a name of 1 to 32 characters a-z, 0-9, '_' or '-', not \"default\"",
     .doc = "The tenant's name (logs, metrics, its disk tier's directory); unique."},
    {.name = "kv_tenants.token_file", .kind = K_STR, .flags = KF_IN_ARRAY | KF_REQUIRED,
     .off = TO(token_file), .size = TS(token_file), .lo = 1, .hi = OL_CONFIG_PATH_LEN - 1,
     .check = check_path, .expect = "a path of 1 to 4095 bytes",
     .doc = "File holding the tenant's token, read at start (trailing whitespace dropped; "
            "the rules of kv_token); unique among the tenants and not kv_token."},
    {.name = "kv_tenants.namespaces", .kind = K_LIST, .flags = KF_IN_ARRAY | KF_REQUIRED,
     .off = TO(namespaces), .size = TS(namespaces[0]), .count_off = TO(n_namespaces),
     .lo = 1, .hi = OL_CONFIG_MAX_TENANT_NS, .check = ol_nspat_check,
     .expect = "a namespace (1 to 256 bytes, no control characters), or a prefix "
               "ending in '*' such as \"team-a/*\"",
     .doc = "The namespaces the tenant's token opens; no namespace may be claimed by two tenants."},
    {.name = "kv_tenants.capacity_gb", .kind = K_FLOAT, .flags = KF_IN_ARRAY | KF_REQUIRED,
     .off = TO(capacity_gb), .flo = 0.001, .fhi = INFINITY,
     .doc = "The tenant's slab in GiB (at least 2 MiB per core)."},
    {.name = "kv_tenants.disk_capacity_gb", .kind = K_FLOAT, .flags = KF_IN_ARRAY,
     .off = TO(disk_capacity_gb), .flo = 0, .fhi = INFINITY, .def = "0",
     .doc = "The tenant's disk tier in GiB, in kv_disk's dirs (kv-disk/tenant-<name>/); 0 = none."},
    {.name = "rdma", .kind = K_TABLE,
     .doc = "Remote reads (RMA) in the KV pool over the node RPC's UCX (transport = \"ucx\"): a node maps its KV slab and reads other nodes' values straight out of theirs (docs/cluster.md)."},
    {.name = "rdma.backend", .kind = K_ENUM, .off = CO(rdma.backend),
     .choices = backends, .def = "none",
     .doc = "none: values move as copies over the node RPC's stream; ucx (needs transport = \"ucx\"): read out of the other nodes' slabs. Only on a network nothing but the nodes reaches: UCX's RMA lets any process that connects to rpc_addr read and write the daemon's memory (its software RMA checks no key; docs/security.md)."},
    {.name = "rdma.devices", .kind = K_LIST, .off = CO(rdma.devices),
     .size = CS(rdma.devices[0]), .count_off = CO(rdma.n_devices), .lo = 0,
     .hi = OL_CONFIG_MAX_RDMA_DEVICES, .check = check_device,
     .expect = "a device name like \"mlx5_0:1\" (letters, digits, '-', '_', "
               "'.', ':'; at most 63)",
     .doc = "UCX_NET_DEVICES of the node RPC's UCX context (transport = \"ucx\") and of the KV service's (kv_ucx_addr), e.g. [\"mlx5_0:1\"] (the environment's UCX_NET_DEVICES wins); empty = UCX's choice. Warned about when neither is on (no effect)."},
    {.name = "rdma.gid_index", .kind = K_INT, .off = CO(rdma.gid_index),
     .lo = -1, .hi = 255, .def = "-1",
     .doc = "UCX_IB_GID_INDEX (RoCE) of the node RPC's UCX context and of the KV service's (the environment's wins); -1 = UCX's choice. Warned about when neither is on (no effect)."},
    {.name = "cluster", .kind = K_TABLE,
     .doc = "Membership of a cluster of openlaked nodes, kept in etcd (docs/cluster.md). No name: a single host, no etcd."},
    {.name = "cluster.name", .kind = K_STR, .off = CO(cluster.name), .size = CS(cluster.name),
     .lo = 0, .hi = 63, .check = check_cluster_name,
     .expect = "up to 63 of a-z, 0-9, '_', '-'", .def = "",
     .doc = "The cluster this node joins (its etcd keys are under /openlake/<name>/); \"\" = none."},
    {.name = "cluster.etcd", .kind = K_LIST, .off = CO(cluster.etcd),
     .size = CS(cluster.etcd[0]), .count_off = CO(cluster.n_etcd), .lo = 0,
     .hi = OL_CONFIG_MAX_ETCD, .check = check_url,
     .expect = "an http:// or https:// URL of at most 255 bytes",
     .doc = "etcd v3 client URLs, e.g. [\"http://10.0.0.1:2379\"]; needed with cluster.name."},
    {.name = "cluster.etcd_user", .kind = K_STR, .off = CO(cluster.etcd_user),
     .size = CS(cluster.etcd_user), .lo = 0, .hi = 128, .check = check_secret_key,
     .expect = "a string of up to 128 printable ASCII characters without spaces", .def = "",
     .doc = "etcd user (etcd auth enabled); \"\" = none. Its password: cluster.etcd_password_file."},
    {.name = "cluster.etcd_password", .kind = K_STR, .flags = KF_SECRET,
     .off = CO(cluster.etcd_password), .size = CS(cluster.etcd_password), .lo = 0, .hi = 128,
     .check = check_secret_key,
     .expect = "a string of up to 128 printable ASCII characters without spaces", .def = "",
     .doc = "etcd user's password; prefer cluster.etcd_password_file (a flag shows in ps)."},
    {.name = "cluster.etcd_password_file", .kind = K_STR, .off = CO(cluster.etcd_password_file),
     .size = CS(cluster.etcd_password_file), .lo = 0, .hi = OL_CONFIG_PATH_LEN - 1,
     .check = check_path, .expect = "a path of at most 4095 bytes", .def = "",
     .secret_of = "cluster.etcd_password",
     .doc = "File holding the etcd user's password, read at start."},
    {.name = "cluster.etcd_tls_ca", .kind = K_STR, .off = CO(cluster.etcd_tls_ca),
     .size = CS(cluster.etcd_tls_ca), .lo = 0, .hi = OL_CONFIG_PATH_LEN - 1,
     .check = check_path, .expect = "a path of at most 4095 bytes", .def = "",
     .doc = "CA bundle for https:// etcd URLs; \"\" = the system's."},
    {.name = "cluster.etcd_tls_cert", .kind = K_STR, .off = CO(cluster.etcd_tls_cert),
     .size = CS(cluster.etcd_tls_cert), .lo = 0, .hi = OL_CONFIG_PATH_LEN - 1,
     .check = check_path, .expect = "a path of at most 4095 bytes", .def = "",
     .doc = "Client certificate for etcd (etcd --client-cert-auth), with cluster.etcd_tls_key."},
    {.name = "cluster.etcd_tls_key", .kind = K_STR, .off = CO(cluster.etcd_tls_key),
     .size = CS(cluster.etcd_tls_key), .lo = 0, .hi = OL_CONFIG_PATH_LEN - 1,
     .check = check_path, .expect = "a path of at most 4095 bytes", .def = "",
     .doc = "Private key of cluster.etcd_tls_cert."},
    {.name = "cluster.lease_ttl_secs", .kind = K_INT, .off = CO(cluster.lease_ttl_secs),
     .lo = 2, .hi = 600, .def = "10",
     .doc = "Seconds without a lease renewal (a dead or cut-off node) before the node leaves the cluster's membership."},
    {.name = "cluster.etcd_timeout_ms", .kind = K_INT, .off = CO(cluster.etcd_timeout_ms),
     .lo = 100, .hi = 60000, .def = "3000",
     .doc = "Each etcd request's deadline (connect included); then the next endpoint."},
    {.name = "cluster.advertise_host", .kind = K_STR, .off = CO(cluster.advertise_host),
     .size = CS(cluster.advertise_host), .lo = 0, .hi = OL_CONFIG_DOMAIN_LEN - 1,
     .check = check_device, .expect = "a host name or IP address", .def = "",
     .doc = "Host other nodes and the CLI reach this node at, for addresses that listen on 0.0.0.0 or [::]; \"\" = the host name."},
    {.name = "cluster.secret", .kind = K_STR, .flags = KF_SECRET, .off = CO(cluster.secret),
     .size = CS(cluster.secret), .lo = 0, .hi = 128, .check = check_secret_key,
     .expect = "a string of up to 128 printable ASCII characters without spaces", .def = "",
     .doc = "The cluster's shared secret, with which nodes prove themselves to each other; prefer cluster.secret_file."},
    {.name = "cluster.secret_file", .kind = K_STR, .off = CO(cluster.secret_file),
     .size = CS(cluster.secret_file), .lo = 0, .hi = OL_CONFIG_PATH_LEN - 1,
     .check = check_path, .expect = "a path of at most 4095 bytes", .def = "",
     .secret_of = "cluster.secret",
     .doc = "File holding cluster.secret (at least 32 characters, the same on every node; e.g. openssl rand -hex 32), read at start; needed with cluster.name."},
    {.name = "cluster.rpc_window_bytes", .kind = K_INT, .off = CO(cluster.rpc_window_bytes),
     .lo = 65536, .hi = 67108864, .def = "8388608",
     .doc = "Node RPC credit: request bytes another node may have in flight to this one (it holds at most this much of each peer's requests); also the largest request."},
    {.name = "cluster.rpc_credits", .kind = K_BOOL, .off = CO(cluster.rpc_credits), .def = "true",
     .doc = "For measuring only (the incast benchmark): false grants each node 4 GiB of credit, so that what this node holds of its peers' requests is bounded only by their own limits (a warning at start says so); cluster.rpc_window_bytes still bounds one request."},
    {.name = "cluster.kv_timeout_ms", .kind = K_INT, .off = CO(cluster.kv_timeout_ms),
     .lo = 10, .hi = 10000, .def = "300",
     .doc = "The KV pool: how long a fetch from a key's home node or a save sent home may take; past it the key is a miss, the save dropped."},
    {.name = "cluster.kv_replicas", .kind = K_INT, .off = CO(cluster.kv_replicas),
     .lo = 1, .hi = 16, .def = "1",
     .doc = "The KV pool: how many home nodes each block key has (the first r KV members by placement; all of them when fewer); a block saved is sent to each, a miss is asked of each in turn. Each copy past the first costs the block's bytes again in network and memory."},
    {.name = "cluster.store_pools", .kind = K_LIST, .off = CO(cluster.store_pools),
     .size = CS(cluster.store_pools[0]), .count_off = CO(cluster.n_store_pools), .lo = 0,
     .hi = 1, .check = check_pool_nodes,
     .expect = "node ids and ranges of them, e.g. \"1-4\" or \"1,2,5,6\"",
     .doc = "The object store across hosts (being built: docs/cluster.md): the nodes of its pool, in order; every node of the pool lists the same, and has as many data_dirs as the others. Each erasure set spreads over the pool's nodes. [] = each node's store is its own. One pool for now."},
    {.name = "cluster.store_timeout_ms", .kind = K_INT, .off = CO(cluster.store_timeout_ms),
     .lo = 100, .hi = 600000, .def = "10000",
     .doc = "The object store across hosts: how long a step on another node's drive may take (a node down or cut off answers no later than this); past it the drive counts as failed for that request."},
    {.name = "threads", .kind = K_INT, .off = CO(threads), .lo = 0,
     .hi = 256, .def = "0",
     .doc = "Event-loop threads, one per core; 0 = online cores (max 256)."},
    {.name = "log_level", .kind = K_ENUM, .off = CO(log_level),
     .choices = levels, .def = "info",
     .doc = "Least severe log level written."},
    {.name = "http", .kind = K_TABLE,
     .doc = "HTTP limits of the S3 listener."},
    {.name = "http.max_header_bytes", .kind = K_INT,
     .off = CO(http.max_header_bytes), .lo = 1024, .hi = 1048576,
     .def = "16384",
     .doc = "Largest request line plus headers, in bytes."},
    {.name = "http.max_headers", .kind = K_INT, .off = CO(http.max_headers),
     .lo = 8, .hi = 1000, .def = "100",
     .doc = "Most header fields in one request."},
    {.name = "http.header_timeout_ms", .kind = K_INT,
     .off = CO(http.header_timeout_ms), .lo = 1, .hi = 3600000,
     .def = "10000",
     .doc = "Time allowed for a request's headers from their first byte; for a "
            "new connection's first request, from the connect."},
    {.name = "http.idle_timeout_ms", .kind = K_INT,
     .off = CO(http.idle_timeout_ms), .lo = 1, .hi = 86400000,
     .def = "60000",
     .doc = "Connections idle between requests are closed after this; a body "
            "with no bytes this long gets 408."},
    {.name = "http.body_min_rate", .kind = K_INT,
     .off = CO(http.body_min_rate), .lo = 0, .hi = 1073741824,
     .def = "1024",
     .doc = "Slowest request body allowed, bytes/s over a window; 0 = no minimum."},
    {.name = "http.body_rate_window_ms", .kind = K_INT,
     .off = CO(http.body_rate_window_ms), .lo = 100, .hi = 3600000,
     .def = "30000",
     .doc = "Window over which body_min_rate is measured (receiving time only)."},
    {.name = "http.max_connections", .kind = K_INT,
     .off = CO(http.max_connections), .lo = 1, .hi = 1000000,
     .def = "10000",
     .doc = "Open connections allowed per process."},
    {.name = "http.max_body_bytes", .kind = K_UINT,
     .off = CO(http.max_body_bytes), .def = "5368709120",
     .doc = "Largest request body in bytes (5 GiB); 0 = unlimited."},
    {.name = "http.output_buffers", .kind = K_INT,
     .off = CO(http.output_buffers), .lo = 16, .hi = 1048576, .def = "4096",
     .doc = "Response buffers of 16 KiB per core, shared by its connections."},
    {.name = "http.loopback_sndbuf", .kind = K_INT,
     .off = CO(http.loopback_sndbuf), .lo = 0, .hi = 67108864, .def = "262144",
     .doc = "Send buffer of plain-HTTP connections from this host, bytes; 0 = autotuning."},
    {.name = "http.shutdown_timeout_ms", .kind = K_INT,
     .off = CO(http.shutdown_timeout_ms), .lo = 0, .hi = 3600000,
     .def = "10000",
     .doc = "Time given to open requests on shutdown before closing."},
    {.name = "http.debug_endpoints", .kind = K_BOOL,
     .off = CO(http.debug_endpoints), .def = "false",
     .doc = "Enables test-only endpoints under /_openlake/debug/, and the S3 "
            "request header x-openlake-debug-internal-error (answered with a "
            "logged InternalError)."},
    {.name = "access_key", .kind = K_STR, .flags = KF_NO_FILE,
     .off = CO(flag_credential.access_key),
     .size = CS(flag_credential.access_key), .lo = 3, .hi = 128,
     .check = check_access_key,
     .expect = "a string of 3 to 128 printable ASCII characters without "
               "spaces or '/'",
     .doc = "With secret_key: one credential pair, added to [[credentials]]."},
    {.name = "secret_key", .kind = K_STR, .flags = KF_NO_FILE | KF_SECRET,
     .off = CO(flag_credential.secret_key),
     .size = CS(flag_credential.secret_key), .lo = 8, .hi = 128,
     .check = check_secret_key,
     .expect = "a string of 8 to 128 printable ASCII characters without "
               "spaces",
     .doc = "Secret key of access_key; replaces the file's if it has the key."},
    {.name = "secret_key_file", .kind = K_STR, .flags = KF_NO_FILE,
     .off = CO(flag_secret_key_file), .size = CS(flag_secret_key_file), .lo = 0,
     .hi = OL_CONFIG_PATH_LEN - 1, .check = check_path,
     .expect = "a path of at most 4095 bytes", .def = "", .secret_of = "secret_key",
     .doc = "File holding secret_key, read at start (trailing newline dropped); not with secret_key."},
};

#define NKEYS ((int)(sizeof ol_config_keys / sizeof ol_config_keys[0]))
_Static_assert(sizeof ol_config_keys / sizeof ol_config_keys[0] <=
               OL_CONFIG_MAX_KEYS, "raise OL_CONFIG_MAX_KEYS");

/* ------------------------------------------------------------------ */
/* names                                                               */

static int find_key(const char *name)
{
    for (int i = 0; i < NKEYS; i++)
        if (strcmp(ol_config_keys[i].name, name) == 0)
            return i;
    return -1;
}

/* "--kv-slab.capacity-gb" */
static const char *flag_name(const char *key, char *buf, size_t len)
{
    snprintf(buf, len, "--%s", key);
    for (char *p = buf; *p; p++)
        if (*p == '_')
            *p = '-';
    return buf;
}

/* "OPENLAKE_KV_SLAB_CAPACITY_GB" */
static const char *env_name(const char *key, char *buf, size_t len)
{
    snprintf(buf, len, "OPENLAKE_%s", key);
    for (char *p = buf; *p; p++) {
        if (*p == '.')
            *p = '_';
        else if (*p >= 'a' && *p <= 'z')
            *p = (char)(*p - 'a' + 'A');
    }
    return buf;
}

/* Optimal string alignment distance (edits and adjacent swaps). */
static int osa(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 64 || m > 64)
        return 1000;
    int d[65][65];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int cost = a[i - 1] != b[j - 1];
            int v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v)
                v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[n][m];
}

enum form { FORM_FILE, FORM_FLAG, FORM_ENV };

/*
 * The key nearest to `unknown` (a key name for FORM_FILE / FORM_FLAG, an
 * environment name for FORM_ENV) among those settable that way, or -1.
 * A name equal to the last part of a nested key (capacity_gb) counts as
 * one edit away from it; environment names are compared upper-cased.
 */
static int suggest(const char *unknown, enum form form)
{
    int best = -1, bestd = 1000;
    char cand[160], last[160], up[160];
    if (form == FORM_ENV) {         /* variables differ from ours in case */
        snprintf(up, sizeof up, "%s", unknown);
        for (char *p = up; *p; p++)
            if (*p >= 'a' && *p <= 'z')
                *p = (char)(*p - 'a' + 'A');
        unknown = up;
    }
    for (int i = 0; i < NKEYS; i++) {
        const struct ckey *k = &ol_config_keys[i];
        if (form == FORM_FILE && (k->flags & KF_NO_FILE))
            continue;
        if (form != FORM_FILE && ((k->flags & KF_IN_ARRAY) ||
                                  k->kind == K_TABLE || k->kind == K_TABLES))
            continue;
        const char *dot = strrchr(k->name, '.');
        const char *lastp = dot ? dot + 1 : k->name;
        if (form == FORM_ENV) {
            env_name(k->name, cand, sizeof cand);
            env_name(lastp, last, sizeof last);
        } else {
            snprintf(cand, sizeof cand, "%s", k->name);
            snprintf(last, sizeof last, "%s", lastp);
        }
        int d = osa(unknown, cand);
        if (dot && strcmp(unknown, last) == 0 && d > 1)
            d = 1;
        if (d < bestd) {
            bestd = d;
            best = i;
        }
    }
    size_t len = strlen(unknown);
    if (form == FORM_ENV && len > 9)
        len -= 9;
    int limit = (int)(len / 3);
    if (limit < 1)
        limit = 1;
    if (limit > 3)
        limit = 3;
    return bestd <= limit ? best : -1;
}

/* ------------------------------------------------------------------ */
/* errors                                                              */

struct src {
    int source;                /* enum ol_config_source */
    const char *file;          /* OL_CONFIG_FILE */
    uint32_t line;             /* OL_CONFIG_FILE */
    const char *disp;          /* the key as the user wrote it */
};

__attribute__((format(printf, 3, 4)))
static int errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* snprintf that gcc does not second-guess: messages are cut to fit by
 * design, so -Wformat-truncation has nothing to add here. */
__attribute__((format(printf, 3, 4)))
static void bufprintf(char *buf, size_t len, const char *fmt, ...)
{
    if (len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, len, fmt, ap);
        va_end(ap);
    }
}

/* "openlake.toml:7: kv_slab.capacity_gb" / "command line: --x" / ... */
static const char *where(const struct src *s, char *buf, size_t len)
{
    switch (s->source) {
    case OL_CONFIG_FILE:
        bufprintf(buf, len, "%s:%u: %s", s->file, s->line, s->disp);
        break;
    case OL_CONFIG_FLAG:
        bufprintf(buf, len, "command line: %s", s->disp);
        break;
    case OL_CONFIG_ENV:
        bufprintf(buf, len, "environment: %s", s->disp);
        break;
    default:
        bufprintf(buf, len, "default: %s", s->disp);
        break;
    }
    return buf;
}

/* `"text"`, escaped and cut to fit messages (at most 40 characters);
 * len must be at least 8. */
static const char *quote(const char *s, char *buf, size_t len)
{
    size_t pos = 0, n = 0;
    buf[pos++] = '"';
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char tmp[8];
        int cut = n >= 40 && (c & 0xC0) != 0x80;
        if (cut)
            snprintf(tmp, sizeof tmp, "...");
        else if (c == '"' || c == '\\')
            snprintf(tmp, sizeof tmp, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            snprintf(tmp, sizeof tmp, "\\u%04x", c);
        else {
            tmp[0] = (char)c;
            tmp[1] = 0;
        }
        size_t tl = strlen(tmp);
        if (pos + tl + 2 > len)
            break;
        memcpy(buf + pos, tmp, tl);
        pos += tl;
        if (cut)
            break;
        if ((c & 0xC0) != 0x80)
            n++;
    }
    buf[pos++] = '"';
    buf[pos] = 0;
    return buf;
}

/* "a number >= 0", "one of \"all\", \"s3\", \"kv\"", ... */
static const char *expect(const struct ckey *k, char *buf, size_t len)
{
    switch (k->kind) {
    case K_TABLE:
        snprintf(buf, len, "a table");
        break;
    case K_TABLES:
        snprintf(buf, len, "an array of tables ([[%s]])", k->name);
        break;
    case K_INT:
        if (k->hi == INT64_MAX)
            snprintf(buf, len, "an integer >= %lld", (long long)k->lo);
        else
            snprintf(buf, len, "an integer from %lld to %lld",
                     (long long)k->lo, (long long)k->hi);
        break;
    case K_UINT:
        snprintf(buf, len, "an integer >= 0");
        break;
    case K_FLOAT:
        if (isinf(k->fhi))
            snprintf(buf, len, "a number >= %g", k->flo);
        else
            snprintf(buf, len, "a number from %g to %g", k->flo, k->fhi);
        break;
    case K_BOOL:
        snprintf(buf, len, "true or false");
        break;
    case K_STR:
        if (k->expect)
            snprintf(buf, len, "%s", k->expect);
        else
            snprintf(buf, len, "a string of %lld to %lld bytes",
                     (long long)k->lo, (long long)k->hi);
        break;
    case K_ADDR:
        snprintf(buf, len, "an address host:port or [v6]:port "
                 "(port 1 to 65535)%s", k->flags & KF_EMPTY_OK ? ", or \"\" (off)" : "");
        break;
    case K_ENUM: {
        size_t pos = (size_t)snprintf(buf, len, "one of");
        for (int i = 0; k->choices[i] && pos < len; i++)
            pos += (size_t)snprintf(buf + pos, len - pos, "%s \"%s\"",
                                    i ? "," : "", k->choices[i]);
        break;
    }
    case K_LIST:
        if (k->lo > 0)
            snprintf(buf, len, "an array of %lld to %lld strings",
                     (long long)k->lo, (long long)k->hi);
        else
            snprintf(buf, len, "an array of at most %lld strings",
                     (long long)k->hi);
        break;
    }
    return buf;
}

/* "<where>: expected <expect>, got <what>"; a secret's text is not shown,
 * only its length (the message goes to stderr and into logs). */
static int bad_value(const struct ckey *k, const char *exp,
                     const struct ol_toml *node, const char *text,
                     const struct src *s, char *err, size_t errlen)
{
    char w[512], e[256], got[160];
    size_t slen = 0;
    const char *str = node ? ol_toml_str(node, &slen) : text;
    if (!exp)
        exp = expect(k, e, sizeof e);
    if ((k->flags & KF_SECRET) && str)
        snprintf(got, sizeof got, "a string of %zu bytes (secret, not shown)",
                 node ? slen : strlen(str));
    else if (node)
        ol_toml_describe(node, got, sizeof got);
    else
        quote(text, got, sizeof got);
    return errf(err, errlen, "%s: expected %s, got %s", where(s, w, sizeof w),
                exp, got);
}

/* ------------------------------------------------------------------ */
/* values                                                              */

static int text_int(const char *t, int64_t *v)
{
    double f;
    return ol_toml_number(t, strlen(t), v, &f, NULL) == OL_TOML_INT ? 0 : -1;
}

static int text_uint(const char *t, uint64_t *v)
{
    uint64_t x = 0;
    size_t n = strlen(t);
    if (n == 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (t[i] == '_' && i > 0 && i + 1 < n && t[i - 1] != '_')
            continue;
        if (t[i] < '0' || t[i] > '9')
            return -1;
        uint64_t d = (uint64_t)(t[i] - '0');
        if (x > (UINT64_MAX - d) / 10)
            return -1;
        x = x * 10 + d;
    }
    *v = x;
    return 0;
}

static int text_bool(const char *t, bool *v)
{
    static const char *const yes[] = {"true", "1", "yes", "on"};
    static const char *const no[] = {"false", "0", "no", "off"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(t, yes[i]) == 0) {
            *v = true;
            return 0;
        }
        if (strcasecmp(t, no[i]) == 0) {
            *v = false;
            return 0;
        }
    }
    return -1;
}

static int is_host_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
}

/* host:port (hostname or IPv4) or [IPv6]:port, port 1..65535. */
static int addr_valid(const char *s)
{
    const char *colon;
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        if (!rb || rb[1] != ':')
            return 0;
        size_t hl = (size_t)(rb - s - 1);
        char host[64];
        if (hl == 0 || hl >= sizeof host)
            return 0;
        memcpy(host, s + 1, hl);
        host[hl] = 0;
        char *pct = strchr(host, '%');
        if (pct) {
            if (!pct[1])
                return 0;
            for (char *z = pct + 1; *z; z++)
                if (!is_host_char(*z))
                    return 0;
            *pct = 0;
        }
        struct in6_addr a6;
        if (inet_pton(AF_INET6, host, &a6) != 1)
            return 0;
        colon = rb + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon || colon == s || colon - s > 253)
            return 0;
        int digits_dots = 1;
        for (const char *p = s; p < colon; p++) {
            if (!is_host_char(*p))
                return 0;
            if (!((*p >= '0' && *p <= '9') || *p == '.'))
                digits_dots = 0;
        }
        if (digits_dots) {
            char host[32];
            struct in_addr a4;
            size_t hl = (size_t)(colon - s);
            if (hl >= sizeof host)
                return 0;
            memcpy(host, s, hl);
            host[hl] = 0;
            if (inet_pton(AF_INET, host, &a4) != 1)
                return 0;
        }
    }
    const char *p = colon + 1;
    size_t n = strlen(p);
    if (n == 0 || n > 5)
        return 0;
    long port = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return 0;
        port = port * 10 + (*p - '0');
    }
    return port >= 1 && port <= 65535;
}

/* Checks one string (len = strlen(s); TOML strings never hold a NUL) for a
 * K_STR key or K_LIST item; 0 if acceptable. */
static int str_ok(const struct ckey *k, const char *s, size_t len)
{
    if (k->kind == K_LIST) {
        if (len == 0 || len >= k->size)
            return -1;
    } else if ((int64_t)len < k->lo || (int64_t)len > k->hi || len >= k->size) {
        return -1;
    }
    return k->check ? k->check(s) : 0;
}

/* Splits a comma-separated list (items trimmed of spaces) into the item
 * buffers of a K_LIST key. */
static int set_list_text(const struct ckey *k, char *slot, int *count,
                         const char *text, const struct src *s, char *err,
                         size_t errlen)
{
    int n = 0;
    char item[OL_CONFIG_PATH_LEN + 1];
    if (*text) {
        const char *p = text;
        for (;;) {
            const char *comma = strchr(p, ',');
            const char *e = comma ? comma : p + strlen(p);
            const char *b = p;
            while (b < e && (*b == ' ' || *b == '\t'))
                b++;
            while (e > b && (e[-1] == ' ' || e[-1] == '\t'))
                e--;
            size_t len = (size_t)(e - b);
            if (len > OL_CONFIG_PATH_LEN)
                len = OL_CONFIG_PATH_LEN;   /* too long either way */
            memcpy(item, b, len);
            item[len] = 0;
            if (n == k->hi) {
                char w[512];
                return errf(err, errlen, "%s: expected %s, got more than "
                            "%lld items", where(s, w, sizeof w),
                            expect(k, item, sizeof item), (long long)k->hi);
            }
            if (str_ok(k, item, len)) {
                char d[600];
                struct src is = *s;
                snprintf(d, sizeof d, "%s[%d]", s->disp, n);
                is.disp = d;
                return bad_value(k, k->expect, NULL, item, &is, err, errlen);
            }
            memcpy(slot + (size_t)n * k->size, item, len + 1);
            n++;
            if (!comma)
                break;
            p = comma + 1;
        }
    }
    if (n < k->lo) {
        char w[512], e[256];
        if (n == 0)
            return errf(err, errlen, "%s: expected %s, got an empty list",
                        where(s, w, sizeof w), expect(k, e, sizeof e));
        return errf(err, errlen, "%s: expected %s, got a list of %d",
                    where(s, w, sizeof w), expect(k, e, sizeof e), n);
    }
    *count = n;
    return 0;
}

static int set_list_toml(const struct ckey *k, char *slot, int *count,
                         const struct ol_toml *node, const struct src *s,
                         char *err, size_t errlen)
{
    if (ol_toml_type(node) != OL_TOML_ARRAY)
        return bad_value(k, NULL, node, NULL, s, err, errlen);
    size_t total = ol_toml_count(node);
    if ((int64_t)total < k->lo || (int64_t)total > k->hi) {
        char w[512], e[256];
        if (total == 0)
            return errf(err, errlen, "%s: expected %s, got an empty array",
                        where(s, w, sizeof w), expect(k, e, sizeof e));
        return errf(err, errlen, "%s: expected %s, got an array of %zu "
                    "entries", where(s, w, sizeof w), expect(k, e, sizeof e),
                    total);
    }
    int n = 0;
    for (const struct ol_toml *e = ol_toml_first(node); e; e = ol_toml_next(e)) {
        size_t len;
        const char *str = ol_toml_str(e, &len);
        if (!str || str_ok(k, str, len)) {
            char d[600];
            struct src is = *s;
            snprintf(d, sizeof d, "%s[%d]", s->disp, n);
            is.disp = d;
            is.line = ol_toml_line(e);
            return bad_value(k, k->expect, e, NULL, &is, err, errlen);
        }
        memcpy(slot + (size_t)n * k->size, str, len + 1);
        n++;
    }
    *count = n;
    return 0;
}

/*
 * Sets key k from a TOML value (node) or from flag/env/default text.
 * `base` is the struct ol_config, or the [[table]] element for
 * KF_IN_ARRAY keys.
 */
static int set_key(const struct ckey *k, char *base, const struct ol_toml *node,
                   const char *text, const struct src *s, char *err,
                   size_t errlen)
{
    char *slot = base + k->off;
    switch (k->kind) {
    case K_INT: {
        int64_t v;
        if (node ? ol_toml_int(node, &v) : text_int(text, &v))
            break;
        if (v < k->lo || v > k->hi)
            break;
        *(int64_t *)(void *)slot = v;
        return 0;
    }
    case K_UINT: {
        uint64_t v;
        int64_t iv;
        if (node) {
            if (ol_toml_int(node, &iv) || iv < 0)
                break;
            v = (uint64_t)iv;
        } else if (text_uint(text, &v) || v > (uint64_t)INT64_MAX) {
            break;
        }
        *(uint64_t *)(void *)slot = v;
        return 0;
    }
    case K_FLOAT: {
        double v;
        int64_t iv;
        if (node) {
            if (ol_toml_int(node, &iv) == 0)
                v = (double)iv;
            else if (ol_toml_float(node, &v))
                break;
        } else {
            int t = ol_toml_number(text, strlen(text), &iv, &v, NULL);
            if (t == OL_TOML_INT)
                v = (double)iv;
            else if (t != OL_TOML_FLOAT)
                break;
        }
        if (!isfinite(v) || v < k->flo || v > k->fhi)
            break;
        *(double *)(void *)slot = v;
        return 0;
    }
    case K_BOOL: {
        bool v;
        if (node ? ol_toml_bool(node, &v) : text_bool(text, &v))
            break;
        *(bool *)(void *)slot = v;
        return 0;
    }
    case K_STR:
    case K_ADDR:
    case K_ENUM: {
        size_t len;
        const char *str = node ? ol_toml_str(node, &len) : text;
        if (!str)
            break;
        if (!node)
            len = strlen(str);
        if (k->kind == K_ENUM) {
            for (int i = 0; k->choices[i]; i++)
                if (strcmp(k->choices[i], str) == 0) {
                    *(int *)(void *)slot = i;
                    return 0;
                }
            break;
        }
        if (k->kind == K_STR ? str_ok(k, str, len) != 0
                             : (len >= k->size ||
                                (!addr_valid(str) && !(len == 0 && (k->flags & KF_EMPTY_OK)))))
            break;
        memcpy(slot, str, len + 1);
        return 0;
    }
    case K_LIST: {
        int *count = (int *)(void *)(base + k->count_off);
        if (node)
            return set_list_toml(k, slot, count, node, s, err, errlen);
        return set_list_text(k, slot, count, text, s, err, errlen);
    }
    default:
        break;
    }
    return bad_value(k, NULL, node, text, s, err, errlen);
}

static void mark(struct ol_config *c, int ki, const struct src *s)
{
    c->origin[ki].source = (uint8_t)s->source;
    c->origin[ki].line = s->source == OL_CONFIG_FILE ? s->line : 0;
}

/* ------------------------------------------------------------------ */
/* defaults                                                            */

/* Applies the defaults of the KF_IN_ARRAY keys of table key `ti`. */
static void element_defaults(int ti, char *elem)
{
    const struct ckey *t = &ol_config_keys[ti];
    size_t n = strlen(t->name);
    struct src s = {.source = OL_CONFIG_DEFAULT};
    memset(elem, 0, t->size);
    for (int i = 0; i < NKEYS; i++) {
        const struct ckey *k = &ol_config_keys[i];
        if ((k->flags & KF_IN_ARRAY) && k->def &&
            strncmp(k->name, t->name, n) == 0 && k->name[n] == '.') {
            s.disp = k->name;
            int rc = set_key(k, elem, NULL, k->def, &s, NULL, 0);
            OL_ASSERT(rc == 0);
            (void)rc;
        }
    }
}

void ol_config_defaults(struct ol_config *c)
{
    memset(c, 0, sizeof *c);
    struct src s = {.source = OL_CONFIG_DEFAULT};
    for (int i = 0; i < NKEYS; i++) {
        const struct ckey *k = &ol_config_keys[i];
        OL_ASSERT(k->kind != K_STR || k->hi < (int64_t)k->size);
        OL_ASSERT(k->kind != K_LIST || k->size <= OL_CONFIG_PATH_LEN);
        if (!k->def || (k->flags & KF_IN_ARRAY))
            continue;
        s.disp = k->name;
        int rc = set_key(k, (char *)c, NULL, k->def, &s, NULL, 0);
        OL_ASSERT(rc == 0);
        (void)rc;
    }
}

/* ------------------------------------------------------------------ */
/* TOML                                                                */

static int unknown_file_key(const char *file, unsigned line, const char *name,
                            char *err, size_t errlen)
{
    char q[160];
    if (strcmp(name, "nodes") == 0 || strncmp(name, "nodes.", 6) == 0)
        return errf(err, errlen, "%s:%u: [[nodes]] is gone: a cluster's members are the nodes "
                    "registered in etcd ([cluster] name, etcd and secret_file on each node; "
                    "docs/cluster.md); remove the [[nodes]] tables", file, line);
    int sug = suggest(name, FORM_FILE);
    quote(name, q, sizeof q);
    if (sug < 0)
        return errf(err, errlen, "%s:%u: unknown key %s", file, line, q);
    return errf(err, errlen, "%s:%u: unknown key %s (did you mean \"%s\"?)",
                file, line, q, ol_config_keys[sug].name);
}

/* Joins prefix and key; returns -1 when the key cannot be one of ours
 * (not a bare key, or too long), leaving the joined text for messages. */
static int join_key(const char *prefix, const char *key, char *buf, size_t len)
{
    int bad = 0;
    for (const char *p = key; *p; p++)
        if (!(is_host_char(*p) && *p != '.'))
            bad = 1;
    int n = snprintf(buf, len, "%s%s%s", prefix, *prefix ? "." : "", key);
    return bad || n < 0 || (size_t)n >= len ? -1 : 0;
}

static int load_tables(struct ol_config *c, int ti, const struct ol_toml *node,
                       struct src *s, char *err, size_t errlen)
{
    const struct ckey *t = &ol_config_keys[ti];
    int *count = (int *)(void *)((char *)c + t->count_off);
    char w[512], name[160];
    if (ol_toml_type(node) != OL_TOML_ARRAY)
        return bad_value(t, NULL, node, NULL, s, err, errlen);
    int n = 0;
    *count = 0;
    for (const struct ol_toml *e = ol_toml_first(node); e; e = ol_toml_next(e)) {
        struct src es = *s;
        char d[200];
        snprintf(d, sizeof d, "%s[%d]", t->name, n);
        es.disp = d;
        es.line = ol_toml_line(e);
        if (ol_toml_type(e) != OL_TOML_TABLE)
            return bad_value(t, "a table", e, NULL, &es, err, errlen);
        if (n == t->hi)
            return errf(err, errlen, "%s: more than %lld [[%s]] entries",
                        where(&es, w, sizeof w), (long long)t->hi, t->name);
        char *elem = (char *)c + t->off + (size_t)n * t->size;
        element_defaults(ti, elem);
        struct ol_config_origin *org =
            (struct ol_config_origin *)(void *)(elem + t->org_off);
        org->source = OL_CONFIG_FILE;
        org->line = es.line;
        bool seen[OL_CONFIG_MAX_KEYS] = {false};
        for (const struct ol_toml *f = ol_toml_first(e); f; f = ol_toml_next(f)) {
            int ki = join_key(t->name, ol_toml_key(f), name, sizeof name) ? -1
                     : find_key(name);
            if (ki < 0 || !(ol_config_keys[ki].flags & KF_IN_ARRAY))
                return unknown_file_key(s->file, ol_toml_line(f), name, err,
                                        errlen);
            struct src fs = *s;
            fs.line = ol_toml_line(f);
            fs.disp = ol_config_keys[ki].name;
            if (set_key(&ol_config_keys[ki], elem, f, NULL, &fs, err, errlen))
                return -1;
            seen[ki] = true;
        }
        for (int i = 0; i < NKEYS; i++) {
            const struct ckey *k = &ol_config_keys[i];
            size_t tl = strlen(t->name);
            if ((k->flags & KF_REQUIRED) && !seen[i] &&
                strncmp(k->name, t->name, tl) == 0 && k->name[tl] == '.')
                return errf(err, errlen, "%s: missing required key %s",
                            where(&es, w, sizeof w), k->name + tl + 1);
        }
        n++;
        *count = n;
    }
    return 0;
}

/* Every entry of TOML table `t`, whose key names start with `prefix`. */
static int load_table(struct ol_config *c, const struct ol_toml *t,
                      const char *prefix, struct src *s, char *err,
                      size_t errlen)
{
    char name[160];
    for (const struct ol_toml *e = ol_toml_first(t); e; e = ol_toml_next(e)) {
        int bad = join_key(prefix, ol_toml_key(e), name, sizeof name);
        int ki = bad ? -1 : find_key(name);
        unsigned line = ol_toml_line(e);
        if (ki < 0 || (ol_config_keys[ki].flags & KF_IN_ARRAY))
            return unknown_file_key(s->file, line, name, err, errlen);
        const struct ckey *k = &ol_config_keys[ki];
        struct src ks = *s;
        ks.line = line;
        ks.disp = k->name;
        if (k->flags & KF_NO_FILE)
            return errf(err, errlen, "%s:%u: %s is not accepted in a config "
                        "file; put credentials in a [[credentials]] table",
                        s->file, line, k->name);
        int rc;
        if (k->kind == K_TABLE) {
            if (ol_toml_type(e) != OL_TOML_TABLE)
                return bad_value(k, NULL, e, NULL, &ks, err, errlen);
            rc = load_table(c, e, k->name, s, err, errlen);
        } else if (k->kind == K_TABLES) {
            rc = load_tables(c, ki, e, &ks, err, errlen);
        } else {
            rc = set_key(k, (char *)c, e, NULL, &ks, err, errlen);
        }
        if (rc)
            return -1;
        mark(c, ki, &ks);
    }
    return 0;
}

int ol_config_load_buffer(struct ol_config *c, const char *name,
                          const char *buf, size_t len, char *err,
                          size_t errlen)
{
    if (errlen)
        err[0] = 0;
    if (!name)
        name = "<config>";
    struct ol_toml_doc *doc = ol_toml_parse(name, buf, len, err, errlen);
    if (!doc)
        return -1;
    snprintf(c->config_file, sizeof c->config_file, "%s", name);
    struct src s = {.source = OL_CONFIG_FILE, .file = c->config_file};
    int rc = load_table(c, ol_toml_root(doc), "", &s, err, errlen);
    ol_toml_free(doc);
    return rc;
}

int ol_config_load_file(struct ol_config *c, const char *path, char *err,
                        size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return errf(err, errlen, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return errf(err, errlen, "%s: %s", path, S_ISDIR(st.st_mode)
                    ? "is a directory, not a config file"
                    : "not a regular file");
    }
    size_t cap = OL_TOML_MAX_INPUT + 1, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return errf(err, errlen, "%s: out of memory", path);
    }
    while (n < cap) {
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            close(fd);
            return errf(err, errlen, "%s: read: %s", path, strerror(e));
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    int rc;
    if (n > OL_TOML_MAX_INPUT)
        rc = errf(err, errlen, "%s: larger than the 1 MiB limit for config "
                  "files", path);
    else
        rc = ol_config_load_buffer(c, path, buf, n, err, errlen);
    free(buf);
    return rc;
}

/* ------------------------------------------------------------------ */
/* flags and environment                                               */

/* Replaces control bytes in a user-supplied name with '?' so that an
 * error message stays one printable line. */
static void printable(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
}

/* Checks that key ki may be set from a flag or variable named `disp`. */
static int settable(int ki, const char *disp, const struct src *s, char *err,
                    size_t errlen)
{
    const struct ckey *k = &ol_config_keys[ki];
    const char *ctx = s->source == OL_CONFIG_ENV ? "environment" : "command line";
    char ex[160] = "";
    if (k->kind == K_TABLE) {
        for (int i = ki + 1; i < NKEYS; i++)
            if (strncmp(ol_config_keys[i].name, k->name, strlen(k->name)) == 0) {
                if (s->source == OL_CONFIG_ENV)
                    env_name(ol_config_keys[i].name, ex, sizeof ex);
                else
                    flag_name(ol_config_keys[i].name, ex, sizeof ex);
                break;
            }
        return errf(err, errlen, "%s: %s: %s is a table; set its keys, "
                    "e.g. %s", ctx, disp, k->name, ex);
    }
    if (k->kind == K_TABLES || (k->flags & KF_IN_ARRAY)) {
        const char *dot = strchr(k->name, '.');
        int tl = dot ? (int)(dot - k->name) : (int)strlen(k->name);
        return errf(err, errlen, "%s: %s: [[%.*s]] entries can only be given "
                    "in the config file", ctx, disp, tl, k->name);
    }
    return 0;
}

int ol_config_find_file_arg(int argc, char **argv, const char **path,
                            char *err, size_t errlen)
{
    *path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (strcmp(argv[i], "--config") == 0) {
            if (i + 1 >= argc)
                return errf(err, errlen, "command line: --config needs a "
                            "file name");
            v = argv[++i];
        } else if (strncmp(argv[i], "--config=", 9) == 0) {
            v = argv[i] + 9;
        } else {
            continue;
        }
        if (!*v)
            return errf(err, errlen, "command line: --config needs a file name");
        if (*path)
            return errf(err, errlen, "command line: --config given twice");
        *path = v;
    }
    return 0;
}

int ol_config_apply_args(struct ol_config *c, int argc, char **argv,
                         char *err, size_t errlen)
{
    struct src s = {.source = OL_CONFIG_FLAG};
    char name[160], disp[160], ex[160], q[160];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--config") == 0) {
            if (i + 1 >= argc)
                return errf(err, errlen, "command line: --config needs a "
                            "file name");
            i++;
            continue;
        }
        if (strncmp(a, "--config=", 9) == 0 || strcmp(a, "--help") == 0 ||
            strcmp(a, "-h") == 0 || strcmp(a, "--help-config") == 0 ||
            strcmp(a, "--version") == 0)
            continue;
        if (strncmp(a, "--", 2) != 0 || !a[2])
            return errf(err, errlen, "command line: unexpected argument %s",
                        quote(a, q, sizeof q));
        const char *eq = strchr(a, '=');
        size_t nl = eq ? (size_t)(eq - a) : strlen(a);
        if (nl >= sizeof name)
            nl = sizeof name - 1;
        snprintf(disp, sizeof disp, "%.*s", (int)nl, a);
        printable(disp);
        snprintf(name, sizeof name, "%s", disp + 2);
        for (char *p = name; *p; p++)
            if (*p == '-')
                *p = '_';
        int ki = find_key(name);
        if (ki < 0) {
            int sug = suggest(name, FORM_FLAG);
            if (sug < 0)
                return errf(err, errlen, "command line: unknown flag %s", disp);
            return errf(err, errlen, "command line: unknown flag %s (did you "
                        "mean %s?)", disp,
                        flag_name(ol_config_keys[sug].name, ex, sizeof ex));
        }
        if (settable(ki, disp, &s, err, errlen))
            return -1;
        const struct ckey *k = &ol_config_keys[ki];
        const char *val;
        if (eq)
            val = eq + 1;
        else if (k->kind == K_BOOL && (i + 1 >= argc || argv[i + 1][0] == '-'))
            val = "true";
        else if (i + 1 < argc)
            val = argv[++i];
        else
            return errf(err, errlen, "command line: %s needs a value (%s)",
                        disp, expect(k, ex, sizeof ex));
        s.disp = disp;
        if (set_key(k, (char *)c, NULL, val, &s, err, errlen))
            return -1;
        mark(c, ki, &s);
    }
    return 0;
}

int ol_config_apply_env(struct ol_config *c, char **envp, char *err,
                        size_t errlen)
{
    struct src s = {.source = OL_CONFIG_ENV};
    char name[160], en[160];
    if (!envp)
        envp = environ;
    for (char **e = envp; e && *e; e++) {
        if (strncmp(*e, "OPENLAKE_", 9) != 0)
            continue;
        const char *eq = strchr(*e, '=');
        if (!eq)
            continue;
        size_t nl = (size_t)(eq - *e);
        if (nl >= sizeof name)
            nl = sizeof name - 1;
        memcpy(name, *e, nl);
        name[nl] = 0;
        if (strcmp(name, OL_FAULT_ENV) == 0)
            continue; /* not a setting: fault rules of a test build (base/fault.h) */
        printable(name);
        int ki = -1;
        for (int i = 0; i < NKEYS && ki < 0; i++)
            if (strcmp(env_name(ol_config_keys[i].name, en, sizeof en), name) == 0)
                ki = i;
        if (ki < 0) {
            /* A warning, not an error: the environment is shared with other
             * tools (Kubernetes injects OPENLAKE_PORT etc. for a Service
             * named "openlake"), so a stray variable must not stop us. */
            int sug = suggest(name, FORM_ENV);
            if (sug < 0)
                ol_warn("environment: ignoring unknown variable %s", name);
            else
                ol_warn("environment: ignoring unknown variable %s (did you mean %s?)",
                        name, env_name(ol_config_keys[sug].name, en, sizeof en));
            continue;
        }
        if (settable(ki, name, &s, err, errlen))
            return -1;
        s.disp = name;
        if (set_key(&ol_config_keys[ki], (char *)c, NULL, eq + 1, &s, err,
                    errlen))
            return -1;
        mark(c, ki, &s);
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* finalize                                                            */

/* "openlake.toml:3: self_id" etc. for key ki as it was last set. */
static const char *key_where(const struct ol_config *c, int ki, char *buf,
                             size_t len)
{
    char d[160];
    struct src s = {.source = c->origin[ki].source, .file = c->config_file,
                    .line = c->origin[ki].line, .disp = ol_config_keys[ki].name};
    if (s.source == OL_CONFIG_FLAG)
        s.disp = flag_name(ol_config_keys[ki].name, d, sizeof d);
    else if (s.source == OL_CONFIG_ENV)
        s.disp = env_name(ol_config_keys[ki].name, d, sizeof d);
    if (s.source == OL_CONFIG_DEFAULT)
        snprintf(buf, len, "%s", s.disp);
    else
        where(&s, buf, len);
    return buf;
}

static const char *elem_where(const struct ol_config *c,
                              const struct ol_config_origin *o,
                              const char *key, char *buf, size_t len)
{
    if (o->source == OL_CONFIG_FILE)
        bufprintf(buf, len, "%s:%u: %s", c->config_file, o->line, key);
    else if (o->source == OL_CONFIG_ENV)
        snprintf(buf, len, "environment: %s", key);
    else if (o->source == OL_CONFIG_FLAG)
        snprintf(buf, len, "command line: %s", key);
    else
        snprintf(buf, len, "%s", key);
    return buf;
}

/* The *_file key of secret key ki, or -1. */
static int file_key_of(int ki)
{
    for (int i = 0; i < NKEYS; i++)
        if (ol_config_keys[i].secret_of &&
            strcmp(ol_config_keys[i].secret_of, ol_config_keys[ki].name) == 0)
            return i;
    return -1;
}

/* The key that gave secret key ki its value: its *_file key when that names
 * a file, else ki. */
static int secret_source(const struct ol_config *c, int ki)
{
    int fi = file_key_of(ki);
    return fi >= 0 && ((const char *)c)[ol_config_keys[fi].off] ? fi : ki;
}

/* Reads the file of each *_file key that names one into its secret. */
static int read_secret_files(struct ol_config *c, char *err, size_t errlen)
{
    char w[512], w2[512], msg[600], val[OL_CONFIG_KEY_LEN];
    for (int fi = 0; fi < NKEYS; fi++) {
        const struct ckey *f = &ol_config_keys[fi];
        const char *path = (const char *)c + f->off;
        if (!f->secret_of || !path[0])
            continue;
        int si = find_key(f->secret_of);
        const struct ckey *k = &ol_config_keys[si];
        OL_ASSERT(k->kind == K_STR && (k->flags & KF_SECRET) && k->size <= sizeof val);
        if (c->origin[si].source != OL_CONFIG_DEFAULT)
            return errf(err, errlen, "%s: given together with %s; give the secret "
                        "one way only", key_where(c, fi, w, sizeof w),
                        key_where(c, si, w2, sizeof w2));
        unsigned mode = 0;
        int n = ol_secret_file_read(path, val, k->size, &mode, msg, sizeof msg);
        if (n < 0)
            return errf(err, errlen, "%s: %s", key_where(c, fi, w, sizeof w), msg);
        if (str_ok(k, val, (size_t)n)) {
            char e[256];
            explicit_bzero(val, sizeof val);
            return errf(err, errlen, "%s: %s: expected %s, got %d bytes (secret, not "
                        "shown)", key_where(c, fi, w, sizeof w), path,
                        expect(k, e, sizeof e), n);
        }
        memcpy((char *)c + k->off, val, (size_t)n + 1);
        explicit_bzero(val, sizeof val);
        c->secret_file_mode[fi] = (uint16_t)mode;
    }
    return 0;
}

/* rpc_tls_cert, rpc_tls_key and rpc_tls_ca: all or none, in a cluster,
 * over TCP only;
 * the key a regular file, its mode kept for ol_config_secret_warning. */
static int check_rpc_tls(struct ol_config *c, char *err, size_t errlen)
{
    static const char *const names[] = {"rpc_tls_cert", "rpc_tls_key", "rpc_tls_ca"};
    const char *vals[] = {c->rpc_tls_cert, c->rpc_tls_key, c->rpc_tls_ca};
    char w[512], missing[64] = "";
    int given = -1;
    for (int i = 0; i < 3; i++)
        if (vals[i][0])
            given = given < 0 ? i : given;
        else
            snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%s",
                     missing[0] ? " and " : "", names[i]);
    if (given < 0)
        return 0;
    if (missing[0])
        return errf(err, errlen, "%s: given without %s (TLS on the node RPC needs this "
                    "node's certificate, its key and the CA bundle)",
                    key_where(c, find_key(names[given]), w, sizeof w), missing);
    if (!c->cluster.name[0])
        return errf(err, errlen, "%s: the node RPC runs in a cluster only: set cluster.name "
                    "too", key_where(c, find_key(names[given]), w, sizeof w));
    if (c->transport != OL_TRANSPORT_TCP)
        return errf(err, errlen, "%s: TLS is for the TCP transport; UCX encrypts nothing "
                    "(transport = \"ucx\")",
                    key_where(c, find_key(names[given]), w, sizeof w));
    int ki = find_key("rpc_tls_key");
    struct stat st;
    if (stat(c->rpc_tls_key, &st) != 0)
        return errf(err, errlen, "%s: %s: cannot open: %s", key_where(c, ki, w, sizeof w),
                    c->rpc_tls_key, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return errf(err, errlen, "%s: %s: not a regular file", key_where(c, ki, w, sizeof w),
                    c->rpc_tls_key);
    c->secret_file_mode[ki] = (uint16_t)(st.st_mode & 07777);
    return 0;
}

static int merge_flag_credential(struct ol_config *c, char *err, size_t errlen)
{
    struct ol_config_credential *fc = &c->flag_credential;
    int ai = find_key("access_key"), si = secret_source(c, find_key("secret_key"));
    char w[512];
    if (!fc->access_key[0] && !fc->secret_key[0])
        return 0;
    if (!fc->access_key[0] || !fc->secret_key[0]) {
        int have = fc->access_key[0] ? ai : si, miss = have == ai ? si : ai;
        int mfi = file_key_of(miss);
        char fl[64], en[64], en2[64];
        if (mfi >= 0)   /* point at the file form first */
            return errf(err, errlen, "%s: given without %s (set %s, %s or %s too)",
                        key_where(c, have, w, sizeof w), ol_config_keys[miss].name,
                        flag_name(ol_config_keys[mfi].name, fl, sizeof fl),
                        env_name(ol_config_keys[mfi].name, en, sizeof en),
                        env_name(ol_config_keys[miss].name, en2, sizeof en2));
        return errf(err, errlen, "%s: given without %s (set %s or %s too)",
                    key_where(c, have, w, sizeof w), ol_config_keys[miss].name,
                    flag_name(ol_config_keys[miss].name, fl, sizeof fl),
                    env_name(ol_config_keys[miss].name, en, sizeof en));
    }
    fc->origin = c->origin[ai];
    for (int i = 0; i < c->n_credentials; i++)
        if (strcmp(c->credentials[i].access_key, fc->access_key) == 0) {
            memcpy(c->credentials[i].secret_key, fc->secret_key,
                   sizeof fc->secret_key);
            c->credentials[i].origin = c->origin[si];
            return 0;
        }
    if (c->n_credentials == OL_CONFIG_MAX_CREDENTIALS)
        return errf(err, errlen, "%s: no room for one more credential "
                    "(%d already)", key_where(c, ai, w, sizeof w),
                    OL_CONFIG_MAX_CREDENTIALS);
    c->credentials[c->n_credentials++] = *fc;
    return 0;
}

/* [[kv_tenants]]: unique names, no namespace claimed twice, each token read
 * from its file, valid, and its own. */
static int check_kv_tenants(struct ol_config *c, char *err, size_t errlen)
{
    char w[512], q[160], q2[160], q3[160], msg[600];
    int tki = find_key("kv_token");
    for (int i = 0; i < c->n_kv_tenants; i++) {
        struct ol_config_kv_tenant *t = &c->kv_tenants[i];
        for (int j = 0; j < i; j++) {
            const struct ol_config_kv_tenant *o = &c->kv_tenants[j];
            if (strcmp(t->name, o->name) == 0)
                return errf(err, errlen, "%s: tenant name %s is used twice (first at line %u)",
                            elem_where(c, &t->origin, "kv_tenants.name", w, sizeof w),
                            quote(t->name, q, sizeof q), o->origin.line);
            for (int a = 0; a < t->n_namespaces; a++)
                for (int b = 0; b < o->n_namespaces; b++)
                    if (ol_nspat_overlap(t->namespaces[a], o->namespaces[b]))
                        return errf(err, errlen, "%s: %s overlaps %s of tenant %s (line %u): "
                                    "a namespace belongs to one tenant",
                                    elem_where(c, &t->origin, "kv_tenants.namespaces", w,
                                               sizeof w),
                                    quote(t->namespaces[a], q, sizeof q),
                                    quote(o->namespaces[b], q2, sizeof q2),
                                    quote(o->name, q3, sizeof q3), o->origin.line);
        }
        unsigned mode = 0;
        int n = ol_secret_file_read(t->token_file, t->token, sizeof t->token, &mode, msg,
                                    sizeof msg);
        elem_where(c, &t->origin, "kv_tenants.token_file", w, sizeof w);
        if (n < 0)
            return errf(err, errlen, "%s: %s", w, msg);
        t->token_file_mode = (uint16_t)mode;
        if (str_ok(&ol_config_keys[tki], t->token, (size_t)n)) {
            explicit_bzero(t->token, sizeof t->token);
            return errf(err, errlen, "%s: %s: expected %s, got %d bytes (secret, not shown)", w,
                        t->token_file, ol_config_keys[tki].expect, n);
        }
        if (c->kv_token[0] && strcmp(t->token, c->kv_token) == 0)
            return errf(err, errlen, "%s: %s holds kv_token, which opens every namespace; "
                        "give the tenant a token of its own", w, t->token_file);
        for (int j = 0; j < i; j++)
            if (strcmp(t->token, c->kv_tenants[j].token) == 0)
                return errf(err, errlen, "%s: %s holds the token of tenant %s (line %u); "
                            "each tenant needs its own", w, t->token_file,
                            quote(c->kv_tenants[j].name, q3, sizeof q3),
                            c->kv_tenants[j].origin.line);
    }
    return 0;
}

int ol_config_finalize(struct ol_config *c, char *err, size_t errlen)
{
    char w[512], q[160];
    if (errlen)
        err[0] = 0;
    if (read_secret_files(c, err, errlen) || merge_flag_credential(c, err, errlen))
        return -1;
    /* [cluster]: a name needs etcd, etcd needs a name; a user, its password;
     * a client certificate, its key */
    if (c->cluster.name[0] && !c->cluster.n_etcd)
        return errf(err, errlen, "%s: a cluster needs its etcd endpoints (cluster.etcd)",
                    key_where(c, find_key("cluster.name"), w, sizeof w));
    if (!c->cluster.name[0] && c->cluster.n_etcd)
        return errf(err, errlen, "%s: etcd is only used by a cluster: set cluster.name too",
                    key_where(c, find_key("cluster.etcd"), w, sizeof w));
    if (c->cluster.etcd_user[0] && !c->cluster.etcd_password[0])
        return errf(err, errlen, "%s: needs its password (cluster.etcd_password_file)",
                    key_where(c, find_key("cluster.etcd_user"), w, sizeof w));
    /* nodes prove themselves to each other with the cluster secret (the
     * daemon requires one: ol_daemon_cluster_join; the CLI reads etcd only) */
    if (c->cluster.secret[0] && strlen(c->cluster.secret) < 32)
        return errf(err, errlen, "%s: the cluster secret has %zu characters; it needs at "
                    "least 32 (e.g. openssl rand -hex 32)",
                    key_where(c, secret_source(c, find_key("cluster.secret")), w, sizeof w),
                    strlen(c->cluster.secret));
#ifndef OL_HAVE_UCX
    if (c->cluster.name[0] && c->transport == OL_TRANSPORT_UCX)
        return errf(err, errlen, "%s: \"ucx\": this build has no UCX (libucx-dev was not "
                    "found when it was built); use \"tcp\"",
                    key_where(c, find_key("transport"), w, sizeof w));
#endif
#ifndef OL_HAVE_UCX
    if (c->kv_ucx_addr[0])
        return errf(err, errlen, "%s: this build has no UCX (libucx-dev was not found when "
                    "it was built); leave it \"\"",
                    key_where(c, find_key("kv_ucx_addr"), w, sizeof w));
#endif
    if (c->kv_ucx_addr[0] && c->mode == OL_MODE_S3)
        return errf(err, errlen, "%s: mode \"s3\" runs no KV service",
                    key_where(c, find_key("kv_ucx_addr"), w, sizeof w));
    if (c->kv_ucx_addr[0] && (strcmp(c->kv_ucx_addr, c->kv_addr) == 0 ||
                              strcmp(c->kv_ucx_addr, c->s3_addr) == 0 ||
                              (c->cluster.name[0] && strcmp(c->kv_ucx_addr, c->rpc_addr) == 0)))
        return errf(err, errlen, "%s: %s is also %s; the UCX listener needs an address of "
                    "its own", key_where(c, find_key("kv_ucx_addr"), w, sizeof w),
                    quote(c->kv_ucx_addr, q, sizeof q),
                    strcmp(c->kv_ucx_addr, c->kv_addr) == 0   ? "kv_addr"
                    : strcmp(c->kv_ucx_addr, c->s3_addr) == 0 ? "s3_addr"
                                                              : "rpc_addr");
    if (c->rdma.backend == OL_RDMA_UCX && c->transport != OL_TRANSPORT_UCX)
        return errf(err, errlen, "%s: \"ucx\" reads over the node RPC's UCX: it needs "
                    "transport = \"ucx\"",
                    key_where(c, find_key("rdma.backend"), w, sizeof w));
    if (c->cluster.name[0] && (strcmp(c->rpc_addr, c->s3_addr) == 0 ||
                               (c->mode != OL_MODE_S3 && strcmp(c->rpc_addr, c->kv_addr) == 0)))
        return errf(err, errlen, "%s: %s is also %s; a cluster node's RPC listener needs an "
                    "address of its own", key_where(c, find_key("rpc_addr"), w, sizeof w),
                    quote(c->rpc_addr, q, sizeof q),
                    strcmp(c->rpc_addr, c->s3_addr) == 0 ? "s3_addr" : "kv_addr");
    /* one renewal that times out must leave time for another before the
     * lease runs out */
    if (c->cluster.name[0] && c->cluster.etcd_timeout_ms * 2 > c->cluster.lease_ttl_secs * 1000)
        return errf(err, errlen, "%s: %lld ms is more than half of cluster.lease_ttl_secs "
                    "(%lld s): one renewal that times out would cost the node its lease",
                    key_where(c, find_key("cluster.etcd_timeout_ms"), w, sizeof w),
                    (long long)c->cluster.etcd_timeout_ms, (long long)c->cluster.lease_ttl_secs);
    if (!c->cluster.etcd_tls_cert[0] != !c->cluster.etcd_tls_key[0])
        return errf(err, errlen, "%s: cluster.etcd_tls_cert and cluster.etcd_tls_key go "
                    "together", key_where(c, find_key(c->cluster.etcd_tls_cert[0]
                                                          ? "cluster.etcd_tls_cert"
                                                          : "cluster.etcd_tls_key"),
                                          w, sizeof w));
    for (int i = 0; i < c->n_credentials; i++)
        for (int j = 0; j < i; j++)
            if (strcmp(c->credentials[i].access_key,
                       c->credentials[j].access_key) == 0)
                return errf(err, errlen, "%s: access key %s is listed twice "
                            "(first at line %u)",
                            elem_where(c, &c->credentials[i].origin,
                                       "credentials.access_key", w, sizeof w),
                            quote(c->credentials[i].access_key, q, sizeof q),
                            c->credentials[j].origin.line);
    for (int i = 0; i < c->n_data_dirs; i++)
        for (int j = 0; j < i; j++)
            if (strcmp(c->data_dirs[i], c->data_dirs[j]) == 0)
                return errf(err, errlen, "%s: %s is listed twice",
                            key_where(c, find_key("data_dirs"), w, sizeof w),
                            quote(c->data_dirs[i], q, sizeof q));
    if (check_kv_tenants(c, err, errlen))
        return -1;
    if (c->set_drive_count > 0 && c->default_parity_count >= 0 &&
        c->default_parity_count > c->set_drive_count / 2)
        return errf(err, errlen, "%s: %lld is more than half of "
                    "set_drive_count %lld",
                    key_where(c, find_key("default_parity_count"), w, sizeof w),
                    (long long)c->default_parity_count,
                    (long long)c->set_drive_count);
    int kvi = find_key("kv_addr"), rpci = find_key("rpc_addr");
    if (c->mode == OL_MODE_KV && !c->cluster.name[0] &&
        c->origin[kvi].source == OL_CONFIG_DEFAULT && c->origin[rpci].source != OL_CONFIG_DEFAULT)
        memcpy(c->kv_addr, c->rpc_addr, sizeof c->kv_addr);
    int s3i = find_key("s3_addr");
    if (c->mode == OL_MODE_ALL && strcmp(c->s3_addr, c->kv_addr) == 0)
        return errf(err, errlen, "%s: %s is also kv_addr; the S3 and KV "
                    "listeners need different addresses",
                    key_where(c, s3i, w, sizeof w), quote(c->s3_addr, q, sizeof q));
    if (!c->s3_tls_cert[0] != !c->s3_tls_key[0]) {
        int given = find_key(c->s3_tls_cert[0] ? "s3_tls_cert" : "s3_tls_key");
        return errf(err, errlen, "%s: given without %s (TLS needs both the "
                    "certificate and its key)", key_where(c, given, w, sizeof w),
                    c->s3_tls_cert[0] ? "s3_tls_key" : "s3_tls_cert");
    }
    if (check_rpc_tls(c, err, errlen))
        return -1;
    if (c->threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        c->threads = n < 1 ? 1 : n > 256 ? 256 : n;
    }
    return 0;
}

int ol_config_load(struct ol_config *c, int argc, char **argv, char **envp,
                   char *err, size_t errlen)
{
    const char *path;
    ol_config_defaults(c);
    if (ol_config_find_file_arg(argc, argv, &path, err, errlen))
        return -1;
    if (path && ol_config_load_file(c, path, err, errlen))
        return -1;
    if (ol_config_apply_args(c, argc, argv, err, errlen) ||
        ol_config_apply_env(c, envp, err, errlen))
        return -1;
    /* data_dirs named nowhere: ./data if it is there, else the per-user
     * XDG one (base/datadir.h) */
    int di = find_key("data_dirs");
    if (c->origin[di].source == OL_CONFIG_DEFAULT) {
        char d[OL_CONFIG_PATH_LEN];
        if (ol_datadir_default(envp, d, sizeof d) == 1) {
            memcpy(c->data_dirs[0], d, sizeof d);
            c->data_dir_per_user = true;
        }
    }
    return ol_config_finalize(c, err, errlen);
}

/* ------------------------------------------------------------------ */
/* printing                                                            */

static void put_toml_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7f)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

/* The value of key k in base as TOML. */
static void put_value(FILE *f, const struct ckey *k, const char *base,
                      bool show_secrets)
{
    const char *slot = base + k->off;
    switch (k->kind) {
    case K_INT:
        fprintf(f, "%lld", (long long)*(const int64_t *)(const void *)slot);
        break;
    case K_UINT:
        fprintf(f, "%llu",
                (unsigned long long)*(const uint64_t *)(const void *)slot);
        break;
    case K_FLOAT: {
        char num[64];
        snprintf(num, sizeof num, "%.17g", *(const double *)(const void *)slot);
        if (!strpbrk(num, ".eni"))
            strcat(num, ".0");
        fputs(num, f);
        break;
    }
    case K_BOOL:
        fputs(*(const bool *)(const void *)slot ? "true" : "false", f);
        break;
    case K_STR:
    case K_ADDR:
        /* an empty secret is no secret: written as "", so the dump loads back */
        put_toml_string(f, (k->flags & KF_SECRET) && !show_secrets && slot[0]
                               ? "<redacted>" : slot);
        break;
    case K_ENUM: {
        int v = *(const int *)(const void *)slot, n = 0;
        while (k->choices[n])
            n++;
        put_toml_string(f, v >= 0 && v < n ? k->choices[v] : "?");
        break;
    }
    case K_LIST: {
        int n = *(const int *)(const void *)(base + k->count_off);
        fputc('[', f);
        for (int i = 0; i < n; i++) {
            fputs(i ? ", " : "", f);
            put_toml_string(f, slot + (size_t)i * k->size);
        }
        fputc(']', f);
        break;
    }
    default:
        break;
    }
}

static void dump_keys(FILE *f, const char *prefix, const char *base,
                      unsigned want_flags, bool show_secrets)
{
    size_t pl = strlen(prefix);
    for (int i = 0; i < NKEYS; i++) {
        const struct ckey *k = &ol_config_keys[i];
        if (k->kind == K_TABLE || k->kind == K_TABLES ||
            (k->flags & (KF_IN_ARRAY | KF_NO_FILE)) != want_flags)
            continue;
        const char *rest = k->name;
        if (pl) {
            if (strncmp(k->name, prefix, pl) != 0 || k->name[pl] != '.')
                continue;
            rest += pl + 1;
        }
        if (strchr(rest, '.'))
            continue;
        if (!want_flags && (k->flags & KF_SECRET) &&
            secret_source((const struct ol_config *)(const void *)base, i) != i)
            continue;   /* read from its file: that key's path is written */
        fprintf(f, "%s = ", rest);
        put_value(f, k, base, show_secrets);
        fputc('\n', f);
    }
}

void ol_config_dump(FILE *f, const struct ol_config *c, bool show_secrets)
{
    dump_keys(f, "", (const char *)c, 0, show_secrets);
    for (int i = 0; i < NKEYS; i++) {
        const struct ckey *t = &ol_config_keys[i];
        if (t->kind == K_TABLE) {
            fprintf(f, "\n[%s]\n", t->name);
            dump_keys(f, t->name, (const char *)c, 0, show_secrets);
        } else if (t->kind == K_TABLES) {
            int n = *(const int *)(const void *)((const char *)c + t->count_off);
            for (int j = 0; j < n; j++) {
                fprintf(f, "\n[[%s]]\n", t->name);
                dump_keys(f, t->name,
                          (const char *)c + t->off + (size_t)j * t->size,
                          KF_IN_ARRAY, show_secrets);
            }
        }
    }
}

static void put_default(FILE *f, const struct ckey *k)
{
    if (!k->def) {
        if (k->flags & KF_REQUIRED)
            fputs("required", f);
        else
            fputs(k->kind == K_LIST ? "default []" : "no default", f);
        return;
    }
    fputs("default ", f);
    if (k->kind == K_STR || k->kind == K_ADDR || k->kind == K_ENUM) {
        put_toml_string(f, k->def);
    } else if (k->kind == K_LIST) {
        fputc('[', f);
        put_toml_string(f, k->def);
        fputc(']', f);
    } else {
        fputs(k->def, f);
    }
}

void ol_config_print_keys(FILE *f)
{
    char e[256], fl[160], en[160];
    for (int i = 0; i < NKEYS; i++) {
        const struct ckey *k = &ol_config_keys[i];
        if (i)
            fputc('\n', f);
        if (k->kind == K_TABLE) {
            fprintf(f, "[%s]\n    %s\n", k->name, k->doc);
            continue;
        }
        if (k->kind == K_TABLES) {
            fprintf(f, "[[%s]]\n    at most %lld entries\n    %s\n"
                    "    file only\n", k->name, (long long)k->hi, k->doc);
            continue;
        }
        fprintf(f, "%s\n    ", k->name);
        put_default(f, k);
        fprintf(f, "; %s\n    %s\n", expect(k, e, sizeof e), k->doc);
        if (k->kind == K_LIST)
            fprintf(f, "    each item: %s\n", k->expect);
        if (k->flags & KF_IN_ARRAY)
            fputs("    file only\n", f);
        else
            fprintf(f, "    flag %s, env %s%s\n",
                    flag_name(k->name, fl, sizeof fl),
                    env_name(k->name, en, sizeof en),
                    (k->flags & KF_NO_FILE) ? "; not accepted in the file" : "");
    }
}

const char *ol_config_origin_of(const struct ol_config *c, const char *key,
                                char *buf, size_t len)
{
    int ki = find_key(key);
    char d[160];
    if (ki < 0 || !len)
        return NULL;
    const struct ol_config_origin *o = &c->origin[ki];
    switch (o->source) {
    case OL_CONFIG_FILE:
        snprintf(buf, len, "%s:%u", c->config_file, o->line);
        break;
    case OL_CONFIG_FLAG:
        snprintf(buf, len, "flag %s", flag_name(key, d, sizeof d));
        break;
    case OL_CONFIG_ENV:
        snprintf(buf, len, "environment %s", env_name(key, d, sizeof d));
        break;
    default:
        snprintf(buf, len, "default");
        break;
    }
    return buf;
}

const char *ol_config_secret_warning(const struct ol_config *c, int i, char *buf,
                                     size_t len)
{
    char fl[160], ffl[160], fen[160], en[160], w[512];
    for (int ki = 0; ki < NKEYS; ki++) {
        const struct ckey *k = &ol_config_keys[ki];
        if ((k->flags & (KF_SECRET | KF_IN_ARRAY)) == KF_SECRET &&
            c->origin[ki].source == OL_CONFIG_FLAG && i-- == 0) {
            int fi = file_key_of(ki);
            flag_name(k->name, fl, sizeof fl);
            env_name(k->name, en, sizeof en);
            if (fi < 0)
                bufprintf(buf, len, "%s on the command line is readable by any local "
                          "user in /proc/PID/cmdline; use %s instead", fl, en);
            else
                bufprintf(buf, len, "%s on the command line is readable by any local "
                          "user in /proc/PID/cmdline; use %s FILE (or %s, %s) instead",
                          fl, flag_name(ol_config_keys[fi].name, ffl, sizeof ffl),
                          env_name(ol_config_keys[fi].name, fen, sizeof fen), en);
            return buf;
        }
        if ((k->secret_of || ((k->flags & KF_KEY_FILE) && ((const char *)c)[k->off])) &&
            ol_secret_file_loose(c->secret_file_mode[ki]) && i-- == 0) {
            bufprintf(buf, len, "%s: %s is mode %04o: group or others may read it; "
                      "chmod 600 it", key_where(c, ki, w, sizeof w),
                      (const char *)c + k->off, c->secret_file_mode[ki]);
            return buf;
        }
    }
    return NULL;
}

const char *ol_config_unused_warning(const struct ol_config *c, int i, char *buf, size_t len)
{
    char w[512];
    bool cluster = c->cluster.name[0] != 0;
    if (!cluster && c->transport == OL_TRANSPORT_UCX && i-- == 0) {
        bufprintf(buf, len, "%s: \"ucx\" has no effect: it is the node RPC's transport, and "
                  "the node RPC runs only in a cluster (cluster.name); the KV service over "
                  "UCX is kv_ucx_addr", key_where(c, find_key("transport"), w, sizeof w));
        return buf;
    }
    if (!cluster && c->mode != OL_MODE_KV &&
        c->origin[find_key("rpc_addr")].source != OL_CONFIG_DEFAULT && i-- == 0) {
        bufprintf(buf, len, "%s: has no effect: the node RPC runs only in a cluster "
                  "(cluster.name), and only mode \"kv\" takes it as its KV address",
                  key_where(c, find_key("rpc_addr"), w, sizeof w));
        return buf;
    }
    if ((c->rdma.n_devices || c->rdma.gid_index >= 0) && !c->kv_ucx_addr[0] &&
        !(cluster && c->transport == OL_TRANSPORT_UCX) && i-- == 0) {
        bufprintf(buf, len, "%s: has no effect: it picks the devices of the node RPC's UCX "
                  "(transport = \"ucx\" in a cluster) and of the KV service's (kv_ucx_addr), "
                  "and neither is on",
                  key_where(c, find_key(c->rdma.n_devices ? "rdma.devices" : "rdma.gid_index"),
                            w, sizeof w));
        return buf;
    }
    return NULL;
}

bool ol_config_is_set(const struct ol_config *c, const char *key)
{
    int ki = find_key(key);
    return ki >= 0 && c->origin[ki].source != OL_CONFIG_DEFAULT;
}
