/*
 * admin.c - the CLI's signed calls to an openlaked's admin plane (see admin.h).
 */
#include "cli/admin.h"

#include "base/datadir.h"
#include "base/secretfile.h"
#include "s3/sigv4.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <netdb.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define OL_CLI_ADMIN_TIMEOUT_S 10

/* ---- credentials ---------------------------------------------------------------- */

/* access_key = "..." / secret_key = "..." lines of the daemon's s3.credentials. */
static int read_credentials(struct ol_cli_cred *a, const char *path)
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

int ol_cli_sign_head(const struct ol_cli_cred *a, const char *host, const char *port,
                     const char *method, const char *path, const char *query,
                     bool unsigned_payload, uint64_t content_length, bool keep_alive, char *out,
                     size_t cap)
{
    char amz_date[17], date[9], hosthdr[300], payload[65];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(amz_date, sizeof amz_date, "%Y%m%dT%H%M%SZ", &tm);
    memcpy(date, amz_date, 8);
    date[8] = 0;
    snprintf(hosthdr, sizeof hosthdr, "%s:%s", host, port);
    if (unsigned_payload)
        snprintf(payload, sizeof payload, "UNSIGNED-PAYLOAD");
    else
        hex_sha256("", 0, payload);
    size_t plen = strlen(payload);
    struct ol_http_header h[3] = {
        {"host", 4, hosthdr, strlen(hosthdr)},
        {"x-amz-content-sha256", 20, payload, plen},
        {"x-amz-date", 10, amz_date, 16},
    };
    static const char signed_h[] = "host;x-amz-content-sha256;x-amz-date";
    char *canon = malloc(OL_SIGV4_MAX_CANONICAL);
    if (!canon)
        return -ENOMEM;
    int cl = ol_sigv4_canonical_request(method, strlen(method), path, strlen(path), query,
                                        strlen(query), false, h, 3, signed_h, sizeof signed_h - 1,
                                        payload, plen, canon, OL_SIGV4_MAX_CANONICAL);
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
    int rl = snprintf(out, cap,
                      "%s %s%s%s HTTP/1.1\r\nHost: %s\r\nx-amz-date: %s\r\n"
                      "x-amz-content-sha256: %s\r\nAuthorization: " OL_SIGV4_ALGO
                      " Credential=%s/%s, SignedHeaders=%s, Signature=%s\r\n"
                      "Content-Length: %llu\r\n%s\r\n",
                      method, path, query[0] ? "?" : "", query, hosthdr, amz_date, payload, a->ak,
                      scope, signed_h, sighex, (unsigned long long)content_length,
                      keep_alive ? "" : "Connection: close\r\n");
    if (rl < 0 || (size_t)rl >= cap)
        return -E2BIG;
    return rl;
}

int ol_cli_admin_request(const struct ol_cli_cred *a, const char *host, const char *port,
                         const char *method, const char *path, const char *query, char *resp,
                         size_t cap)
{
    char req[2048];
    int rl = ol_cli_sign_head(a, host, port, method, path, query, false, 0, false, req,
                              sizeof req);
    if (rl < 0)
        return rl;
    int rc = 0;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    rc = getaddrinfo(host, port, &hints, &ai);
    if (rc != 0)
        return -EHOSTUNREACH;
    int fd = -1;
    for (struct addrinfo *p = ai; p && fd < 0; p = p->ai_next) {
        fd = socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol);
        /* a node that accepts and never answers (stopped, cut off) costs
         * OL_CLI_ADMIN_TIMEOUT_S, not forever (connect obeys SO_SNDTIMEO) */
        struct timeval tv = {OL_CLI_ADMIN_TIMEOUT_S, 0};
        if (fd >= 0) {
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        }
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
            resp[got] = 0;
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


int ol_cli_cred_load(const struct ol_cli *cli, const char *cmd, const struct ol_cli_cred_flags *f,
                     struct ol_cli_cred *out)
{
    memset(out, 0, sizeof *out);
    out->region = f->region ? f->region : "us-east-1";
    if (f->secret_key && f->secret_key_file)
        return ol_cli_usage_error(cli, cmd, "give --secret-key-file or --secret-key, not both");
    if (f->secret_key)
        ol_cli_warn_secret_flag(cli, cmd, "--secret-key",
                                "--secret-key-file FILE (or OPENLAKE_SECRET_KEY_FILE, "
                                "AWS_SECRET_ACCESS_KEY)");
    /* the flags' pair; else (no --credentials) the environment's; else the file */
    const char *ak = NULL, *sk = NULL, *skf = NULL, *skf_from = "--secret-key-file";
    if (f->access_key && (f->secret_key || f->secret_key_file)) {
        ak = f->access_key;
        sk = f->secret_key;
        skf = f->secret_key_file;
    } else if (!f->credentials && (ak = env2("OPENLAKE_ACCESS_KEY", "AWS_ACCESS_KEY_ID"))) {
        skf_from = "OPENLAKE_SECRET_KEY_FILE";
        skf = env2(skf_from, NULL);
        sk = skf ? NULL : env2("OPENLAKE_SECRET_KEY", "AWS_SECRET_ACCESS_KEY");
        if (!skf && !sk)
            ak = NULL;
    }
    if (skf) {
        char err[600];
        if (ol_secret_file_read(skf, out->sk, sizeof out->sk, NULL, err, sizeof err) < 0)
            return ol_cli_usage_error(cli, cmd, "%s %s", skf_from, err);
        snprintf(out->ak, sizeof out->ak, "%s", ak);
    } else if (ak) {
        snprintf(out->ak, sizeof out->ak, "%s", ak);
        snprintf(out->sk, sizeof out->sk, "%s", sk);
    } else {
        char dflt[4096];
        ol_datadir_find(environ, "s3.credentials", dflt, sizeof dflt);
        const char *file = f->credentials ? f->credentials : dflt;
        if (read_credentials(out, file) < 0)
            return ol_cli_usage_error(cli, cmd,
                                      "no S3 credential: give --access-key and --secret-key-file, "
                                      "set AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, or "
                                      "--credentials FILE (cannot read '%s')", file);
    }
    return 0;
}

/* ---- where a node's admin plane is ----------------------------------------------- */

/* host and port of "host:port" / "[v6]:port". */
static int split_addr(const char *addr, char *host, size_t hl, char *port, size_t pl)
{
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr)
        return -1;
    size_t n = (size_t)(colon - addr);
    if (addr[0] == '[' && n > 2 && addr[n - 1] == ']') {
        addr++;
        n -= 2;
    }
    if (n >= hl || strlen(colon + 1) >= pl)
        return -1;
    memcpy(host, addr, n);
    host[n] = 0;
    snprintf(port, pl, "%s", colon + 1);
    return 0;
}

/* host and port of a node's admin plane (its S3 listener): 0, or -1 with
 * why. A wildcard host (a single host's own config) is this host. */
int ol_cli_admin_addr(const char *s3_addr, bool tls, char host[256], char port[16], char *why,
                      size_t whylen)
{
    if (tls) {
        snprintf(why, whylen, "its admin plane is HTTPS, which this command does not speak yet");
        return -1;
    }
    if (split_addr(s3_addr, host, 256, port, 16) < 0) {
        snprintf(why, whylen, "bad S3 address: %.150s", s3_addr);
        return -1;
    }
    if (!strcmp(host, "0.0.0.0") || !strcmp(host, "::"))
        snprintf(host, 256, "%s", !strcmp(host, "::") ? "::1" : "127.0.0.1");
    return 0;
}
