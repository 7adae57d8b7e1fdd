/*
 * auth.c - S3 request authentication (see auth.h).
 */
#include "s3/auth.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "s3/awschunked.h"
#include "s3/route.h"
#include "s3/sigv2.h"

static const struct ol_http_header *hdr(const struct ol_http_header *h, size_t n,
                                        const char *name)
{
    size_t nl = strlen(name);
    for (size_t i = 0; i < n; i++)
        if (h[i].name_len == nl && strncasecmp(h[i].name, name, nl) == 0)
            return &h[i];
    return NULL;
}

static int find_cred(const struct ol_s3_creds *c, const char *ak, size_t n)
{
    int found = -1;
    for (int i = 0; i < c->n; i++) {   /* no early exit: the same time for every key */
        size_t kl = strlen(c->access_keys[i]);
        if (kl == n && CRYPTO_memcmp(c->access_keys[i], ak, n) == 0)
            found = i;
    }
    return found;
}

static enum ol_s3_err fail(struct ol_s3_auth *out, enum ol_s3_err e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum ol_s3_err fail(struct ol_s3_auth *out, enum ol_s3_err e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->message, sizeof out->message, fmt, ap);
    va_end(ap);
    return e;
}

/* Region and service of the scope, the scope's date against the request's. */
static enum ol_s3_err check_scope(const struct ol_sigv4 *a, const char *amz_date,
                                  const char *region, enum ol_s3_err malformed,
                                  struct ol_s3_auth *out)
{
    if (a->service_len != 2 || memcmp(a->service, "s3", 2) != 0)
        return fail(out, malformed, "The credential scope's service must be 's3'.");
    size_t rl = strlen(region);
    if (a->region_len != rl || memcmp(a->region, region, rl) != 0)
        return fail(out, malformed, "The authorization header is malformed; the region '%.*s' "
                    "is wrong; expecting '%s'", (int)(a->region_len < 64 ? a->region_len : 64),
                    a->region, region);
    if (memcmp(a->scope_date, amz_date, 8) != 0)
        return fail(out, malformed, "The credential scope's date does not match the request "
                    "date.");
    return OL_S3_OK;
}

/*
 * The SigV4 signing key is four HMACs of the secret, the date, the region
 * and the service: the same for every request of a client on one day. Each
 * loop thread keeps the last few it derived (exact match on all four, the
 * secret compared in constant time), so a request costs one HMAC for its
 * signature instead of five. Thread-local: no lock, nothing shared.
 */
#define OL_AUTH_KEY_CACHE 8

struct key_cache_ent {
    bool used;
    uint8_t secret_len, region_len, service_len;
    char secret[128], region[64], service[16], date[8];
    uint8_t key[32];
};

static _Thread_local struct key_cache_ent key_cache[OL_AUTH_KEY_CACHE];
static _Thread_local unsigned key_cache_next;

static int signing_key(const char *secret, const struct ol_sigv4 *a, uint8_t key[32])
{
    size_t sl = strlen(secret);
    bool cacheable = sl <= sizeof key_cache[0].secret && a->region_len <= 64 &&
                     a->service_len <= 16;
    for (unsigned i = 0; cacheable && i < OL_AUTH_KEY_CACHE; i++) {
        const struct key_cache_ent *e = &key_cache[i];
        if (e->used && e->secret_len == sl && e->region_len == a->region_len &&
            e->service_len == a->service_len && memcmp(e->date, a->scope_date, 8) == 0 &&
            memcmp(e->region, a->region, a->region_len) == 0 &&
            memcmp(e->service, a->service, a->service_len) == 0 &&
            CRYPTO_memcmp(e->secret, secret, sl) == 0) {
            memcpy(key, e->key, 32);
            return 0;
        }
    }
    if (ol_sigv4_signing_key(secret, sl, a, key) < 0)
        return -EINVAL;
    if (cacheable) {
        struct key_cache_ent *e = &key_cache[key_cache_next++ % OL_AUTH_KEY_CACHE];
        e->used = true;
        e->secret_len = (uint8_t)sl;
        e->region_len = (uint8_t)a->region_len;
        e->service_len = (uint8_t)a->service_len;
        memcpy(e->secret, secret, sl);
        memcpy(e->region, a->region, a->region_len);
        memcpy(e->service, a->service, a->service_len);
        memcpy(e->date, a->scope_date, 8);
        memcpy(e->key, key, 32);
    }
    return 0;
}

static enum ol_s3_err sign_and_compare(const struct ol_sigv4 *a, const char *secret,
                                       const char *method, size_t method_len, const char *path,
                                       size_t path_len, const char *query, size_t query_len,
                                       const struct ol_http_header *hdrs, size_t nhdrs,
                                       const char *payload, size_t payload_len,
                                       const char *amz_date, struct ol_s3_auth *out)
{
    char canon[OL_SIGV4_MAX_CANONICAL];
    int n = ol_sigv4_canonical_request(method, method_len, path, path_len, query, query_len,
                                       a->presigned, hdrs, nhdrs, a->signed_headers,
                                       a->signed_headers_len, payload, payload_len, canon,
                                       sizeof canon);
    if (n == -ENOENT)
        return fail(out, OL_S3_ACCESS_DENIED, "A header named in SignedHeaders is missing.");
    if (n == -ENOSPC)
        return fail(out, OL_S3_INVALID_REQUEST, "The request is too large to sign (more than "
                    "%u bytes of canonical request).", OL_SIGV4_MAX_CANONICAL);
    if (n < 0)
        return fail(out, OL_S3_INVALID_REQUEST, "The request URI has invalid percent-encoding.");
    uint8_t sig[32];
    if (signing_key(secret, a, out->key) < 0)
        return OL_S3_INTERNAL;
    ol_sigv4_sign(out->key, amz_date, a->scope, a->scope_len, canon, (size_t)n, sig);
    if (!ol_sigv4_equal(sig, a->signature))
        return OL_S3_SIGNATURE_DOES_NOT_MATCH;
    memcpy(out->seed, sig, 32);
    memcpy(out->amz_date, amz_date, 16);
    out->amz_date[16] = 0;
    out->scope_len = a->scope_len;
    memcpy(out->scope, a->scope, a->scope_len);
    return OL_S3_OK;
}

/* The payload mode x-amz-content-sha256 announces (p). */
static enum ol_s3_err payload_mode(const struct ol_http_header *p, struct ol_s3_auth *out)
{
    int mode = ol_awsc_mode_of(p->value, p->value_len);
    if (mode == OL_AWSC_SIGNED)
        out->payload = OL_S3_PAY_STREAM_SIGNED;
    else if (mode == OL_AWSC_SIGNED_TRAILER)
        out->payload = OL_S3_PAY_STREAM_SIGNED_TRAILER;
    else if (mode == OL_AWSC_UNSIGNED_TRAILER)
        out->payload = OL_S3_PAY_STREAM_UNSIGNED_TRAILER;
    else if (p->value_len == 16 && memcmp(p->value, "UNSIGNED-PAYLOAD", 16) == 0)
        out->payload = OL_S3_PAY_UNSIGNED;
    else if (ol_sigv4_from_hex(p->value, p->value_len, out->body_sha256) == 0)
        out->payload = OL_S3_PAY_SHA256;
    else
        return fail(out, OL_S3_INVALID_ARGUMENT, "x-amz-content-sha256 must be "
                    "UNSIGNED-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER], "
                    "STREAMING-UNSIGNED-PAYLOAD-TRAILER, or a SHA-256 in hex.");
    return OL_S3_OK;
}

static enum ol_s3_err header_auth(const struct ol_http_header *auth, const char *method,
                                  size_t method_len, const char *path, size_t path_len,
                                  const char *query, size_t query_len,
                                  const struct ol_http_header *hdrs, size_t nhdrs,
                                  const struct ol_s3_creds *creds, const char *region,
                                  int64_t now, struct ol_s3_auth *out)
{
    struct ol_sigv4 a;
    if (ol_sigv4_parse_header(auth->value, auth->value_len, &a) < 0)
        return OL_S3_AUTH_HEADER_MALFORMED;
    const struct ol_http_header *d = hdr(hdrs, nhdrs, "x-amz-date");
    int64_t t;
    if (!d || ol_sigv4_parse_amz_date(d->value, d->value_len, &t) < 0)
        return fail(out, OL_S3_ACCESS_DENIED,
                    "AWS authentication requires a valid x-amz-date header.");
    enum ol_s3_err e = check_scope(&a, d->value, region, OL_S3_AUTH_HEADER_MALFORMED, out);
    if (e)
        return e;
    if (t > now + OL_S3_MAX_SKEW_S || t < now - OL_S3_MAX_SKEW_S)
        return OL_S3_REQUEST_TIME_TOO_SKEWED;
    const struct ol_http_header *p = hdr(hdrs, nhdrs, "x-amz-content-sha256");
    if (!p)
        return fail(out, OL_S3_INVALID_REQUEST,
                    "Missing required header for this request: x-amz-content-sha256");
    e = payload_mode(p, out);
    if (e)
        return e;
    out->cred = find_cred(creds, a.access_key, a.access_key_len);
    if (out->cred < 0)
        return OL_S3_INVALID_ACCESS_KEY;
    return sign_and_compare(&a, creds->secrets[out->cred], method, method_len, path, path_len,
                            query, query_len, hdrs, nhdrs, p->value, p->value_len, d->value,
                            out);
}

static enum ol_s3_err query_auth(const char *method, size_t method_len, const char *path,
                                 size_t path_len, const char *query, size_t query_len,
                                 const struct ol_http_header *hdrs, size_t nhdrs,
                                 const struct ol_s3_creds *creds, const char *region,
                                 int64_t now, struct ol_s3_auth *out, int *not_presigned)
{
    char scratch[OL_SIGV4_MAX_CANONICAL];
    struct ol_sigv4 a;
    if (query_len > sizeof scratch)
        return fail(out, OL_S3_AUTH_QUERY_ERROR, "The query string is too long.");
    int rc = ol_sigv4_parse_query(query, query_len, scratch, &a);
    if (rc == -ENOENT) {
        *not_presigned = 1;
        return OL_S3_ACCESS_DENIED;
    }
    if (rc < 0)
        return fail(out, OL_S3_AUTH_QUERY_ERROR, "X-Amz-Algorithm, -Credential, -Date, "
                    "-Expires (1 to 604800 s), -SignedHeaders and -Signature must all be "
                    "present and valid.");
    enum ol_s3_err e = check_scope(&a, a.amz_date, region, OL_S3_AUTH_QUERY_ERROR, out);
    if (e)
        return e;
    int64_t t;
    ol_sigv4_parse_amz_date(a.amz_date, 16, &t);
    if (t > now + OL_S3_MAX_SKEW_S)
        return fail(out, OL_S3_ACCESS_DENIED, "Request is not valid yet.");
    if (now > t + a.expires)
        return fail(out, OL_S3_ACCESS_DENIED, "Request has expired.");
    out->payload = OL_S3_PAY_UNSIGNED;
    out->cred = find_cred(creds, a.access_key, a.access_key_len);
    if (out->cred < 0)
        return OL_S3_INVALID_ACCESS_KEY;
    return sign_and_compare(&a, creds->secrets[out->cred], method, method_len, path, path_len,
                            query, query_len, hdrs, nhdrs, "UNSIGNED-PAYLOAD", 16, a.amz_date,
                            out);
}

/* ---- Signature Version 2 (sigv2.h) ------------------------------------------------ */

static enum ol_s3_err v2_refused(struct ol_s3_auth *out)
{
    return fail(out, OL_S3_ACCESS_DENIED, "Signature Version 2 is turned off on this server "
                "(s3_sigv2 = false): sign with SigV4 (boto3: Config(signature_version="
                "'s3v4'); s3cmd: signature_v2 = False).");
}

/* The string to sign, HMAC-SHA1 with the secret of the access key, compared. */
static enum ol_s3_err v2_compare(const struct ol_sigv2 *a, const char *method,
                                 size_t method_len, const char *path, size_t path_len,
                                 const char *query, size_t query_len,
                                 const struct ol_http_header *hdrs, size_t nhdrs,
                                 const struct ol_s3_auth_conf *conf, struct ol_s3_auth *out)
{
    out->cred = find_cred(conf->creds, a->access_key, a->access_key_len);
    if (out->cred < 0)
        return OL_S3_INVALID_ACCESS_KEY;
    const struct ol_http_header *host = hdr(hdrs, nhdrs, "host");
    size_t bl = 0;
    const char *bucket = host ? ol_s3_vhost_bucket(host->value, host->value_len, conf->domain,
                                                   &bl) : NULL;
    char sts[OL_SIGV2_MAX_STS];
    int n = ol_sigv2_string_to_sign(method, method_len, bucket, bl, path, path_len, query,
                                    query_len, hdrs, nhdrs, a->expires, a->expires_len, sts,
                                    sizeof sts);
    if (n < 0)
        return fail(out, OL_S3_INVALID_REQUEST, "The request is too large to sign with SigV2 "
                    "(over %u bytes to sign, %u x-amz-* headers or %u sub-resources).",
                    OL_SIGV2_MAX_STS, OL_SIGV2_MAX_AMZ, OL_SIGV2_MAX_SUBRES);
    const char *secret = conf->creds->secrets[out->cred];
    uint8_t sig[20];
    ol_sigv2_sign(secret, strlen(secret), sts, (size_t)n, sig);
    return a->signature_ok && ol_sigv2_equal(sig, a->signature)
               ? OL_S3_OK : OL_S3_SIGNATURE_DOES_NOT_MATCH;
}

static enum ol_s3_err v2_header_auth(const struct ol_http_header *auth, const char *method,
                                     size_t method_len, const char *path, size_t path_len,
                                     const char *query, size_t query_len,
                                     const struct ol_http_header *hdrs, size_t nhdrs,
                                     const struct ol_s3_auth_conf *conf, int64_t now,
                                     struct ol_s3_auth *out)
{
    struct ol_sigv2 a;
    if (ol_sigv2_parse_header(auth->value, auth->value_len, &a) < 0)
        return fail(out, OL_S3_INVALID_ARGUMENT, "AWS authorization header is invalid.  "
                    "Expected AwsAccessKeyId:signature");
    /* the request's time: x-amz-date when sent (then Date is not signed) */
    const struct ol_http_header *d = hdr(hdrs, nhdrs, "x-amz-date");
    if (!d)
        d = hdr(hdrs, nhdrs, "date");
    int64_t t;
    if (!d || ol_sigv2_parse_date(d->value, d->value_len, &t) < 0)
        return fail(out, OL_S3_ACCESS_DENIED,
                    "AWS authentication requires a valid Date or x-amz-date header");
    if (t > now + OL_S3_MAX_SKEW_S || t < now - OL_S3_MAX_SKEW_S)
        return OL_S3_REQUEST_TIME_TOO_SKEWED;
    const struct ol_http_header *p = hdr(hdrs, nhdrs, "x-amz-content-sha256");
    out->payload = OL_S3_PAY_UNSIGNED;
    if (p) {
        enum ol_s3_err e = payload_mode(p, out);
        if (e)
            return e;
        if (out->payload == OL_S3_PAY_STREAM_SIGNED ||
            out->payload == OL_S3_PAY_STREAM_SIGNED_TRAILER)
            return fail(out, OL_S3_INVALID_REQUEST, "Signed aws-chunked payloads "
                        "(STREAMING-AWS4-HMAC-SHA256-PAYLOAD) need a SigV4 signature.");
    }
    return v2_compare(&a, method, method_len, path, path_len, query, query_len, hdrs, nhdrs,
                      conf, out);
}

/* SigV2 in the query (AWSAccessKeyId, Signature, Expires); *absent when the
 * query has none of the three. */
static enum ol_s3_err v2_query_auth(const char *method, size_t method_len, const char *path,
                                    size_t path_len, const char *query, size_t query_len,
                                    const struct ol_http_header *hdrs, size_t nhdrs,
                                    const struct ol_s3_auth_conf *conf, int64_t now,
                                    struct ol_s3_auth *out, bool *absent)
{
    char scratch[OL_SIGV4_MAX_CANONICAL];   /* query_auth refused longer queries */
    struct ol_sigv2 a;
    int rc = ol_sigv2_parse_query(query, query_len, scratch, &a);
    *absent = rc == -ENOENT;
    if (*absent)
        return OL_S3_ACCESS_DENIED;
    out->sig = OL_S3_SIG_V2_QUERY;
    if (!conf->sigv2)
        return v2_refused(out);
    if (rc < 0)
        return fail(out, OL_S3_ACCESS_DENIED, "Query-string authentication requires the "
                    "Signature, Expires and AWSAccessKeyId parameters");
    if (now > a.expires_at)
        return fail(out, OL_S3_ACCESS_DENIED, "Request has expired");
    out->payload = OL_S3_PAY_UNSIGNED;
    return v2_compare(&a, method, method_len, path, path_len, query, query_len, hdrs, nhdrs,
                      conf, out);
}

/* ---- the decision ------------------------------------------------------------------ */

enum ol_s3_err ol_s3_authenticate(const char *method, size_t method_len, const char *path,
                                  size_t path_len, const char *query, size_t query_len,
                                  const struct ol_http_header *hdrs, size_t nhdrs,
                                  const struct ol_s3_auth_conf *conf, int64_t now,
                                  struct ol_s3_auth *out)
{
    memset(out, 0, sizeof *out);
    out->cred = -1;
    const struct ol_http_header *auth = hdr(hdrs, nhdrs, "authorization");
    if (auth && auth->value_len >= 4 && memcmp(auth->value, "AWS ", 4) == 0) {
        out->sig = OL_S3_SIG_V2;
        if (!conf->sigv2)
            return v2_refused(out);
        return v2_header_auth(auth, method, method_len, path, path_len, query, query_len, hdrs,
                              nhdrs, conf, now, out);
    }
    if (auth) {
        out->sig = OL_S3_SIG_V4;
        return header_auth(auth, method, method_len, path, path_len, query, query_len, hdrs,
                           nhdrs, conf->creds, conf->region, now, out);
    }
    int not_presigned = 0;
    enum ol_s3_err e = query_auth(method, method_len, path, path_len, query, query_len, hdrs,
                                  nhdrs, conf->creds, conf->region, now, out, &not_presigned);
    if (!not_presigned) {
        out->sig = OL_S3_SIG_V4_QUERY;
        return e;
    }
    bool absent;
    e = v2_query_auth(method, method_len, path, path_len, query, query_len, hdrs, nhdrs, conf,
                      now, out, &absent);
    if (absent)
        return fail(out, OL_S3_ACCESS_DENIED, "Anonymous access is not allowed: sign the "
                    "request (SigV4) with one of the server's credentials.");
    return e;
}
