/*
 * auth.h - who sent an S3 request, and how its body must be checked.
 *
 * Owns: the authentication decision for one request head: SigV4 in the
 * Authorization header or in a presigned URL's query, or SigV2 in either
 * form (sigv2.h; unless the configuration turns it off), the credential
 * lookup, the clock-skew (15 minutes) and expiry checks, the region and
 * service of the scope, and the payload mode announced by
 * x-amz-content-sha256 (UNSIGNED-PAYLOAD, a hex SHA-256 the body must
 * match, or one of the aws-chunked streaming modes, for which it hands the
 * caller the signing key and seed signature that awschunked.h needs;
 * SigV2 requests may announce UNSIGNED-PAYLOAD, a hex SHA-256 or
 * STREAMING-UNSIGNED-PAYLOAD-TRAILER, nothing that needs a SigV4 key).
 *
 * Must not: read bodies or know operations. No anonymous access: a request
 * with neither form of signature is AccessDenied.
 */
#ifndef OL_S3_AUTH_H
#define OL_S3_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/parse.h"
#include "s3/errors.h"
#include "s3/sigv4.h"

#define OL_S3_MAX_SKEW_S 900   /* 15 minutes, as AWS */

enum ol_s3_payload {
    OL_S3_PAY_UNSIGNED = 1,          /* UNSIGNED-PAYLOAD (and every presigned URL) */
    OL_S3_PAY_SHA256,                /* the body's SHA-256 must equal body_sha256 */
    OL_S3_PAY_STREAM_SIGNED,         /* STREAMING-AWS4-HMAC-SHA256-PAYLOAD */
    OL_S3_PAY_STREAM_SIGNED_TRAILER, /* ...-PAYLOAD-TRAILER */
    OL_S3_PAY_STREAM_UNSIGNED_TRAILER, /* STREAMING-UNSIGNED-PAYLOAD-TRAILER */
};

struct ol_s3_creds {
    const char *const *access_keys;
    const char *const *secrets;
    int n;
};

/* What requests are checked against; outlives them. */
struct ol_s3_auth_conf {
    const struct ol_s3_creds *creds;
    const char *region;               /* the SigV4 scope's region */
    const char *domain;               /* s3_domain (virtual-host style), or "" / NULL */
    bool sigv2;                       /* accept Signature Version 2 (s3_sigv2) */
};

/* Which signature a request carried (ol_s3_auth.sig). */
enum ol_s3_sig {
    OL_S3_SIG_V4 = 1,                 /* Authorization: AWS4-HMAC-SHA256 */
    OL_S3_SIG_V4_QUERY,               /* presigned, X-Amz-Signature */
    OL_S3_SIG_V2,                     /* Authorization: AWS AK:sig */
    OL_S3_SIG_V2_QUERY,               /* presigned, AWSAccessKeyId / Signature / Expires */
};

struct ol_s3_auth {
    int cred;                         /* index of the credential that signed */
    int sig;                          /* enum ol_s3_sig, once the form is known */
    int payload;                      /* enum ol_s3_payload */
    uint8_t body_sha256[32];          /* OL_S3_PAY_SHA256 */
    /* the streaming modes: what ol_awsc_init needs */
    uint8_t key[32], seed[32];
    char amz_date[17];
    char scope[OL_SIGV4_SCOPE_MAX];
    size_t scope_len;
    char message[200];                /* the error's specific message, or "" */
};

/*
 * ol_s3_authenticate - check one request head. path and query are the raw
 * request-target parts (query without '?'); now is the server's clock
 * (seconds since the epoch); conf the credentials and settings. Returns
 * OL_S3_OK with *out filled, or the S3 error to answer (out->message may
 * say more). SigV2 with conf->sigv2 false is AccessDenied, saying so.
 */
enum ol_s3_err ol_s3_authenticate(const char *method, size_t method_len, const char *path,
                                  size_t path_len, const char *query, size_t query_len,
                                  const struct ol_http_header *hdrs, size_t nhdrs,
                                  const struct ol_s3_auth_conf *conf, int64_t now,
                                  struct ol_s3_auth *out);

#endif
