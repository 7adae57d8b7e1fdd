/*
 * cmd_heal.c - `openlake heal [BUCKET[/PREFIX]]`: start a heal walk on
 * openlaked and follow it to the end.
 *
 * Owns: the admin call (POST /_openlake/heal, then GET /_openlake/heal every
 * 200 ms) over plain HTTP/1.1, signed with AWS SigV4 (s3/sigv4.h, the same
 * canonical request the daemon checks) with an S3 credential from the
 * flags, the environment or the daemon's generated credentials file; the
 * progress lines on stderr and the summary on stdout.
 *
 * Must not: speak TLS (the admin plane listens on s3_addr, plain HTTP in
 * this build), or retry a walk that failed: exit 1 says so.
 */
#include "cli/cli.h"
#include "cli/output.h"
#include "base/datadir.h"
#include "base/secretfile.h"
#include "s3/pct.h"
#include "s3/sigv4.h"

#include <errno.h>
#include <netdb.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define OL_HEAL_RESP_MAX (64u << 10)
#define OL_HEAL_POLL_MS  200

struct ol_heal_args {
    const char *endpoint, *access_key, *secret_key, *secret_key_file, *credentials, *region,
        *target;
    char host[256], port[8];
    char ak[129], sk[129];
};

/* ---- credentials ---------------------------------------------------------------- */

/* access_key = "..." / secret_key = "..." lines of the daemon's s3.credentials. */
static int read_credentials(struct ol_heal_args *a, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -errno;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char name[32], val[129];
        if (sscanf(line, " %31[a-z_] = \"%128[^\"]\"", name, val) != 2)
            continue;
        if (!strcmp(name, "access_key"))
            snprintf(a->ak, sizeof a->ak, "%s", val);
        else if (!strcmp(name, "secret_key"))
            snprintf(a->sk, sizeof a->sk, "%s", val);
    }
    fclose(f);
    return a->ak[0] && a->sk[0] ? 0 : -EINVAL;
}

/* $a if set and not empty, else $b (b may be NULL) if so, else NULL. */
static const char *env2(const char *a, const char *b)
{
    const char *v = getenv(a);
    if ((!v || !*v) && b)
        v = getenv(b);
    return v && *v ? v : NULL;
}

/* ---- one signed request ------------------------------------------------------------- */

static void hex_sha256(const void *p, size_t n, char out[65])
{
    uint8_t d[32];
    SHA256(p, n, d);
    ol_sigv4_hex(d, out);
    out[64] = 0;
}

/* Sends method path?query, signed; the status (or -errno) and the body in
 * resp (NUL-terminated). */
static int request(const struct ol_heal_args *a, const char *method, const char *query,
                   char *resp, size_t cap)
{
    static const char path[] = "/_openlake/heal";
    char amz_date[17], date[9], hosthdr[300], payload[65];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(amz_date, sizeof amz_date, "%Y%m%dT%H%M%SZ", &tm);
    memcpy(date, amz_date, 8);
    date[8] = 0;
    snprintf(hosthdr, sizeof hosthdr, "%s:%s", a->host, a->port);
    hex_sha256("", 0, payload);
    struct ol_http_header h[3] = {
        {"host", 4, hosthdr, strlen(hosthdr)},
        {"x-amz-content-sha256", 20, payload, 64},
        {"x-amz-date", 10, amz_date, 16},
    };
    static const char signed_h[] = "host;x-amz-content-sha256;x-amz-date";
    char *canon = malloc(OL_SIGV4_MAX_CANONICAL);
    if (!canon)
        return -ENOMEM;
    int cl = ol_sigv4_canonical_request(method, strlen(method), path, sizeof path - 1, query,
                                        strlen(query), false, h, 3, signed_h, sizeof signed_h - 1,
                                        payload, 64, canon, OL_SIGV4_MAX_CANONICAL);
    if (cl < 0) {
        free(canon);
        return cl;
    }
    char scope[OL_SIGV4_SCOPE_MAX];
    int sl = snprintf(scope, sizeof scope, "%s/%s/s3/aws4_request", date, a->region);
    struct ol_sigv4 sv = {.region = a->region, .region_len = strlen(a->region),
                          .service = "s3", .service_len = 2};
    memcpy(sv.scope_date, date, sizeof date);
    uint8_t key[32], sig[32];
    int rc = ol_sigv4_signing_key(a->sk, strlen(a->sk), &sv, key);
    if (rc == 0)
        ol_sigv4_sign(key, amz_date, scope, (size_t)sl, canon, (size_t)cl, sig);
    free(canon);
    if (rc < 0)
        return rc;
    char sighex[65];
    ol_sigv4_hex(sig, sighex);
    sighex[64] = 0;

    char req[2048];
    int rl = snprintf(req, sizeof req,
                      "%s %s%s%s HTTP/1.1\r\nHost: %s\r\nx-amz-date: %s\r\n"
                      "x-amz-content-sha256: %s\r\nAuthorization: " OL_SIGV4_ALGO
                      " Credential=%s/%s, SignedHeaders=%s, Signature=%s\r\n"
                      "Content-Length: 0\r\nConnection: close\r\n\r\n",
                      method, path, query[0] ? "?" : "", query, hosthdr, amz_date, payload, a->ak,
                      scope, signed_h, sighex);
    if (rl < 0 || (size_t)rl >= sizeof req)
        return -E2BIG;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    rc = getaddrinfo(a->host, a->port, &hints, &ai);
    if (rc != 0)
        return -EHOSTUNREACH;
    int fd = -1;
    for (struct addrinfo *p = ai; p && fd < 0; p = p->ai_next) {
        fd = socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol);
        if (fd >= 0 && connect(fd, p->ai_addr, p->ai_addrlen) < 0) {
            rc = -errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd < 0)
        return rc < 0 ? rc : -ECONNREFUSED;
    for (int off = 0; off < rl;) {
        ssize_t n = send(fd, req + off, (size_t)(rl - off), MSG_NOSIGNAL);
        if (n < 0) {
            rc = -errno;
            close(fd);
            return rc;
        }
        off += (int)n;
    }
    size_t got = 0;
    for (;;) {
        if (got + 1 >= cap) {
            close(fd);
            return -EMSGSIZE;
        }
        ssize_t n = recv(fd, resp + got, cap - 1 - got, 0);
        if (n < 0) {
            rc = -errno;
            close(fd);
            return rc;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    resp[got] = 0;
    int status = 0;
    char *body = strstr(resp, "\r\n\r\n");
    if (sscanf(resp, "HTTP/1.%*d %d", &status) != 1 || !body)
        return -EPROTO;
    memmove(resp, body + 4, strlen(body + 4) + 1);
    return status;
}

/* ---- the JSON answers (flat objects of numbers, booleans and strings) ------------------- */

static unsigned long long jnum(const char *js, const char *key)
{
    char pat[48];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(js, pat);
    return p ? strtoull(p + strlen(pat), NULL, 10) : 0;
}

static bool jtrue(const char *js, const char *key)
{
    char pat[48];
    snprintf(pat, sizeof pat, "\"%s\":true", key);
    return strstr(js, pat) != NULL;
}

/* The "message" of an error answer, for the user. */
static const char *jmsg(char *js)
{
    char *p = strstr(js, "\"message\":\"");
    if (!p)
        return js;
    p += 11;
    char *e = strrchr(p, '"');
    if (e)
        *e = 0;
    return p;
}

static void human_bytes(unsigned long long b, char *out, size_t cap)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    unsigned i = 0;
    while (v >= 1024 && i < 4) {
        v /= 1024;
        i++;
    }
    snprintf(out, cap, i ? "%.1f %s" : "%.0f %s", v, u[i]);
}

/* ---- the command ------------------------------------------------------------------------ */

static int parse(const struct ol_cli *cli, int argc, char **argv, struct ol_heal_args *a)
{
    static const char *const opts[] = {"--endpoint", "--access-key", "--secret-key",
                                       "--secret-key-file", "--credentials", "--region", NULL};
    const char **slots[] = {&a->endpoint, &a->access_key, &a->secret_key, &a->secret_key_file,
                            &a->credentials, &a->region};
    const char **pos[] = {&a->target};
    int rc = ol_cli_options(cli, "heal", argc, argv, opts, slots, pos, 1);
    if (rc)
        return rc;
    const char *ep = a->endpoint;
    if (!strncmp(ep, "http://", 7))
        ep += 7;
    else if (strstr(ep, "://"))
        return ol_cli_usage_error(cli, "heal", "--endpoint '%s': only http:// is supported",
                                  a->endpoint);
    const char *colon = strrchr(ep, ':');
    size_t hl = colon ? (size_t)(colon - ep) : strcspn(ep, "/");
    if (hl == 0 || hl >= sizeof a->host)
        return ol_cli_usage_error(cli, "heal", "--endpoint '%s': need host:port", a->endpoint);
    memcpy(a->host, ep, hl);
    a->host[hl] = 0;
    snprintf(a->port, sizeof a->port, "%.*s", colon ? (int)strcspn(colon + 1, "/") : 2,
             colon ? colon + 1 : "80");
    if (a->secret_key && a->secret_key_file)
        return ol_cli_usage_error(cli, "heal", "give --secret-key-file or --secret-key, not both");
    if (a->secret_key)
        ol_cli_warn_secret_flag(cli, "heal", "--secret-key",
                                "--secret-key-file FILE (or OPENLAKE_SECRET_KEY_FILE, "
                                "AWS_SECRET_ACCESS_KEY)");
    /* the flags' pair; else (no --credentials) the environment's; else the file */
    const char *ak = NULL, *sk = NULL, *skf = NULL, *skf_from = "--secret-key-file";
    if (a->access_key && (a->secret_key || a->secret_key_file)) {
        ak = a->access_key;
        sk = a->secret_key;
        skf = a->secret_key_file;
    } else if (!a->credentials && (ak = env2("OPENLAKE_ACCESS_KEY", "AWS_ACCESS_KEY_ID"))) {
        skf_from = "OPENLAKE_SECRET_KEY_FILE";
        skf = env2(skf_from, NULL);
        sk = skf ? NULL : env2("OPENLAKE_SECRET_KEY", "AWS_SECRET_ACCESS_KEY");
        if (!skf && !sk)
            ak = NULL;
    }
    if (skf) {
        char err[600];
        if (ol_secret_file_read(skf, a->sk, sizeof a->sk, NULL, err, sizeof err) < 0)
            return ol_cli_usage_error(cli, "heal", "%s %s", skf_from, err);
        snprintf(a->ak, sizeof a->ak, "%s", ak);
    } else if (ak) {
        snprintf(a->ak, sizeof a->ak, "%s", ak);
        snprintf(a->sk, sizeof a->sk, "%s", sk);
    } else {
        char dflt[4096];
        ol_datadir_find(environ, "s3.credentials", dflt, sizeof dflt);
        const char *f = a->credentials ? a->credentials : dflt;
        if (read_credentials(a, f) < 0)
            return ol_cli_usage_error(cli, "heal",
                                      "no S3 credential: give --access-key and --secret-key-file, "
                                      "set AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, or "
                                      "--credentials FILE (cannot read '%s')", f);
    }
    return 0;
}

int ol_cmd_heal(const struct ol_cli *cli, int argc, char **argv)
{
    struct ol_heal_args a = {.endpoint = "http://127.0.0.1:9000", .region = "us-east-1"};
    if (getenv("OPENLAKE_ENDPOINT") && *getenv("OPENLAKE_ENDPOINT"))
        a.endpoint = getenv("OPENLAKE_ENDPOINT");
    int rc = parse(cli, argc, argv, &a);
    if (rc)
        return rc;
    char bucket[64] = "", prefix[1025] = "";
    if (a.target) {
        size_t bl = strcspn(a.target, "/");
        if (bl == 0 || bl >= sizeof bucket)
            return ol_cli_usage_error(cli, "heal", "'%s' is not BUCKET[/PREFIX]", a.target);
        memcpy(bucket, a.target, bl);
        if (a.target[bl] == '/')
            snprintf(prefix, sizeof prefix, "%s", a.target + bl + 1);
    }
    char query[4096] = "", eb[256], epx[3200];
    ol_pct_encode(bucket, strlen(bucket), eb, sizeof eb, false);   /* 3 x 63, 3 x 1024: fit */
    ol_pct_encode(prefix, strlen(prefix), epx, sizeof epx, false);
    if (bucket[0])
        snprintf(query, sizeof query, "bucket=%s%s%s", eb, prefix[0] ? "&prefix=" : "",
                 prefix[0] ? epx : "");
    char *resp = malloc(OL_HEAL_RESP_MAX);
    if (!resp)
        return ol_cli_fail(cli, "heal", "out of memory");
    int st = request(&a, "POST", query, resp, OL_HEAL_RESP_MAX);
    if (st < 0) {
        free(resp);
        return ol_cli_fail(cli, "heal", "%s:%s: %s (is openlaked running? see --endpoint)",
                           a.host, a.port, strerror(-st));
    }
    if (st != 202) {
        int ex = ol_cli_fail(cli, "heal", "HTTP %d: %s", st, jmsg(resp));
        free(resp);
        return ex;
    }
    unsigned long long id = jnum(resp, "walk"), last = ~0ull;
    bool tty = isatty(2);
    for (;;) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = OL_HEAL_POLL_MS * 1000000L};
        nanosleep(&ts, NULL);
        st = request(&a, "GET", "", resp, OL_HEAL_RESP_MAX);
        if (st != 200) {
            int ex = ol_cli_fail(cli, "heal", "progress: %s",
                                 st < 0 ? strerror(-st) : jmsg(resp));
            free(resp);
            return ex;
        }
        unsigned long long w = jnum(resp, "walk"), sc = jnum(resp, "scanned");
        bool running = jtrue(resp, "running");
        if (w != id) {
            free(resp);
            return ol_cli_fail(cli, "heal", "walk %llu was replaced by walk %llu", id, w);
        }
        char hb[32];
        human_bytes(jnum(resp, "bytes"), hb, sizeof hb);
        if (sc != last || !running) {
            fprintf(stderr, "%sheal: %llu objects scanned, %llu healed, %llu failed, %s written%s",
                    tty ? "\r" : "", sc, jnum(resp, "healed"), jnum(resp, "failed"), hb,
                    tty ? "" : "\n");
            last = sc;
        }
        if (!running)
            break;
    }
    if (tty)
        fputc('\n', stderr);
    if (jtrue(resp, "no_bucket")) {
        free(resp);
        return ol_cli_fail(cli, "heal", "no such bucket: %s", bucket);
    }
    unsigned long long sc = jnum(resp, "scanned"), he = jnum(resp, "healed"),
                       fa = jnum(resp, "failed"), by = jnum(resp, "bytes");
    if (cli->out & OL_OUT_JSON) {
        struct ol_json j;
        ol_json_init(&j, stdout);
        ol_json_object_begin(&j);
        ol_json_key(&j, "walk");
        ol_json_uint(&j, id);
        ol_json_key(&j, "bucket");
        ol_json_str(&j, bucket);
        ol_json_key(&j, "prefix");
        ol_json_str(&j, prefix);
        ol_json_key(&j, "scanned");
        ol_json_uint(&j, sc);
        ol_json_key(&j, "healed");
        ol_json_uint(&j, he);
        ol_json_key(&j, "failed");
        ol_json_uint(&j, fa);
        ol_json_key(&j, "bytes_written");
        ol_json_uint(&j, by);
        ol_json_object_end(&j);
        fputc('\n', stdout);
    } else {
        char hb[32];
        human_bytes(by, hb, sizeof hb);
        printf("healed %s%s%s: %llu objects scanned, %llu healed, %llu failed, %s written\n",
               bucket[0] ? bucket : "every bucket", prefix[0] ? "/" : "", prefix, sc, he, fa, hb);
    }
    free(resp);
    if (fa)
        return ol_cli_fail(cli, "heal", "%llu object%s could not be healed (see the daemon's log)",
                           fa, fa == 1 ? "" : "s");
    return OL_EXIT_OK;
}
