/*
 * admin.h - the CLI's signed calls to an openlaked's admin plane
 * (/_openlake/heal, /_openlake/cluster/probe).
 *
 * Owns: where a node's admin plane is (its S3 address), finding an S3
 * credential (the flags' pair, else the environment's,
 * else the daemon's generated credentials file) and one request over plain
 * HTTP/1.1 signed with AWS SigV4 (s3/sigv4.h, the same canonical request
 * the daemon checks). Must not: speak TLS (the admin plane listens on
 * s3_addr; a TLS node is not reachable this way in this build).
 */
#ifndef OL_CLI_ADMIN_H
#define OL_CLI_ADMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/cli.h"

struct ol_cli_cred {
    char ak[129], sk[129];
    const char *region;
};

/* The credential options a command took (NULL: not given). */
struct ol_cli_cred_flags {
    const char *access_key, *secret_key, *secret_key_file, *credentials, *region;
};

/* The credential to sign with, as above. 0, or the usage error's status
 * (the message printed, naming cmd). A --secret-key flag is warned about. */
int ol_cli_cred_load(const struct ol_cli *cli, const char *cmd, const struct ol_cli_cred_flags *f,
                     struct ol_cli_cred *out);

/* The head of a request signed with c (SigV4, header form): method
 * path?query to host:port, x-amz-content-sha256 the empty body's hash, or
 * UNSIGNED-PAYLOAD (a body that the signature does not cover, as S3
 * allows), Content-Length content_length, "Connection: close" unless
 * keep_alive; path and query already percent-encoded. Its length, or
 * -E2BIG (cap too small), -ENOMEM. */
int ol_cli_sign_head(const struct ol_cli_cred *c, const char *host, const char *port,
                     const char *method, const char *path, const char *query,
                     bool unsigned_payload, uint64_t content_length, bool keep_alive, char *out,
                     size_t cap);

/* method path?query to host:port, signed, with an empty body: the HTTP
 * status (or -errno: -EHOSTUNREACH, -ECONNREFUSED, -EMSGSIZE when the
 * answer is over cap, -EPROTO) and the answer's body in resp,
 * NUL-terminated. Connecting, sending and each wait for the answer take at
 * most 10 s (-EAGAIN past it). */
int ol_cli_admin_request(const struct ol_cli_cred *c, const char *host, const char *port,
                         const char *method, const char *path, const char *query, char *resp,
                         size_t cap);

/* host and port of a node's admin plane (its S3 listener, s3_addr
 * "host:port" or "[v6]:port"): 0, or -1 with why (tls: HTTPS, not spoken
 * here; a bad address). A wildcard host (a single host's own config) is
 * this host. */
int ol_cli_admin_addr(const char *s3_addr, bool tls, char host[256], char port[16], char *why,
                      size_t whylen);

#endif
