/*
 * sigv4.h - AWS Signature Version 4 as an S3 server checks it.
 *
 * Owns: parsing the `Authorization: AWS4-HMAC-SHA256 ...` header and the
 * presigned-URL query parameters (X-Amz-Algorithm, -Credential, -Date,
 * -Expires, -SignedHeaders, -Signature); the canonical request (S3 rules:
 * the path decoded and re-encoded once, never normalised; query parameters
 * decoded, re-encoded and sorted; signed headers trimmed, inner runs of
 * spaces folded, repeated names joined with ','); the string to sign; the
 * signing key; the seed, chunk and trailer signatures of the streaming
 * payload modes (STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]); and the
 * constant-time comparison of signatures.
 *
 * Must not: know credentials, clocks or S3 errors. The caller looks up the
 * secret for the access key, checks the date against its clock and the
 * scope's date, and maps the -errno returns below to S3 error codes.
 * Nothing allocates; all output goes to caller buffers; HMAC and SHA-256
 * come from OpenSSL libcrypto.
 *
 * Errors: -EINVAL malformed input (AuthorizationHeaderMalformed /
 * AuthorizationQueryParametersError / InvalidRequest for the caller);
 * -ENOSPC the caller's buffer is too small (the canonical request is
 * bounded by OL_SIGV4_MAX_CANONICAL: beyond it the request is refused);
 * -ENOENT a header named in SignedHeaders is absent from the request.
 */
#ifndef OL_S3_SIGV4_H
#define OL_S3_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/parse.h"

#define OL_SIGV4_ALGO          "AWS4-HMAC-SHA256"
#define OL_SIGV4_MAX_CANONICAL 32768u  /* canonical request bytes */
#define OL_SIGV4_MAX_SIGNED    64u     /* headers named in SignedHeaders */
#define OL_SIGV4_MAX_EXPIRES   604800  /* presigned URLs: 7 days, as AWS */
#define OL_SIGV4_SCOPE_MAX     128u    /* "yyyymmdd/region/s3/aws4_request" */

/* Slices point into the caller's header value or query string. */
struct ol_sigv4 {
    const char *access_key;   size_t access_key_len;
    const char *scope;        size_t scope_len;      /* date/region/service/aws4_request */
    const char *region;       size_t region_len;
    const char *service;      size_t service_len;
    char scope_date[9];                              /* "yyyymmdd", NUL-terminated */
    const char *signed_headers; size_t signed_headers_len; /* "host;x-amz-date" */
    uint8_t signature[32];
    /* Presigned only (the header form takes X-Amz-Date from a header). */
    bool presigned;
    char amz_date[17];                               /* "yyyymmddThhmmssZ" */
    long expires;                                    /* seconds, 1..OL_SIGV4_MAX_EXPIRES */
};

/*
 * ol_sigv4_parse_header - parse an Authorization header value:
 *   AWS4-HMAC-SHA256 Credential=AK/20130524/us-east-1/s3/aws4_request,
 *     SignedHeaders=host;range;x-amz-date, Signature=<64 hex>
 * (components in any order, separated by ',' and optional spaces).
 * Returns 0, or -EINVAL (wrong algorithm, a component missing or repeated,
 * a credential that is not five '/'-separated parts ending in
 * aws4_request, a bad date, a signature that is not 64 hex digits, signed
 * headers not lower case, not sorted, or not including "host").
 */
int ol_sigv4_parse_header(const char *v, size_t n, struct ol_sigv4 *out);

/*
 * ol_sigv4_parse_query - parse a presigned request's query string (raw, as
 * sent, without the '?'). The X-Amz-* values are percent-decoded into
 * `scratch` (at least n bytes), which the slices in out then point into.
 * Returns 0, -ENOENT when the query carries no X-Amz-Algorithm (not a
 * presigned request), or -EINVAL (a parameter missing or malformed,
 * X-Amz-Expires outside 1..604800, the rules of parse_header).
 */
int ol_sigv4_parse_query(const char *q, size_t n, char *scratch, struct ol_sigv4 *out);

/*
 * ol_sigv4_canonical_request - write the canonical request into out[cap]:
 *   method \n canonical URI \n canonical query \n canonical headers \n
 *   signed headers \n payload hash
 * path/query: the request-target's parts, raw as sent (query without '?',
 * may be empty). For presigned requests pass presigned = true: the
 * X-Amz-Signature parameter is left out. hdrs: every header of the request.
 * payload: the hashed-payload value (the x-amz-content-sha256 header, or
 * "UNSIGNED-PAYLOAD" for presigned URLs).
 * Returns the length written, -EINVAL (bad percent-encoding in path or
 * query), -ENOENT (a signed header is missing), -ENOSPC.
 */
int ol_sigv4_canonical_request(const char *method, size_t method_len,
                               const char *path, size_t path_len,
                               const char *query, size_t query_len, bool presigned,
                               const struct ol_http_header *hdrs, size_t nhdrs,
                               const char *signed_headers, size_t signed_len,
                               const char *payload, size_t payload_len,
                               char *out, size_t cap);

/* signing key = HMAC chain over "AWS4"+secret, date, region, service,
 * "aws4_request". secret_len <= 128; returns 0 or -EINVAL. */
int ol_sigv4_signing_key(const char *secret, size_t secret_len, const struct ol_sigv4 *a,
                         uint8_t key[32]);

/*
 * ol_sigv4_sign - the request signature: HMAC(key, string to sign) where the
 * string to sign is "AWS4-HMAC-SHA256\n" amz_date "\n" scope "\n"
 * hex(SHA-256(canonical request)).
 */
void ol_sigv4_sign(const uint8_t key[32], const char *amz_date, const char *scope,
                   size_t scope_len, const char *canonical, size_t canonical_len,
                   uint8_t sig[32]);

/*
 * ol_sigv4_chunk_sign - signature of one chunk of a streaming upload
 * (STREAMING-AWS4-HMAC-SHA256-PAYLOAD): string to sign
 * "AWS4-HMAC-SHA256-PAYLOAD\n" amz_date "\n" scope "\n" hex(prev) "\n"
 * hex(SHA-256("")) "\n" hex(chunk_sha256). prev is the seed signature for
 * the first chunk, then each chunk's own. The final, empty chunk is signed
 * too (chunk_sha256 = SHA-256("")).
 */
void ol_sigv4_chunk_sign(const uint8_t key[32], const char *amz_date, const char *scope,
                         size_t scope_len, const uint8_t prev[32],
                         const uint8_t chunk_sha256[32], uint8_t sig[32]);

/*
 * ol_sigv4_trailer_sign - signature of the trailing headers of
 * STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER: string to sign
 * "AWS4-HMAC-SHA256-TRAILER\n" amz_date "\n" scope "\n" hex(prev) "\n"
 * hex(SHA-256(trailer)), where trailer is the trailing header lines as
 * sent, each "name:value\n" (prev: the final chunk's signature).
 */
void ol_sigv4_trailer_sign(const uint8_t key[32], const char *amz_date, const char *scope,
                           size_t scope_len, const uint8_t prev[32],
                           const char *trailer, size_t trailer_len, uint8_t sig[32]);

/* Constant-time equality of two signatures. */
bool ol_sigv4_equal(const uint8_t a[32], const uint8_t b[32]);

/* Hex helpers: 32 bytes <-> 64 lower-case hex digits. from_hex returns 0 or
 * -EINVAL (wrong length or a non-hex digit; upper case accepted). */
void ol_sigv4_hex(const uint8_t in[32], char out[64]);
int ol_sigv4_from_hex(const char *s, size_t n, uint8_t out[32]);

/* Checks an "yyyymmddThhmmssZ" stamp and converts it to seconds since the
 * epoch (UTC). Returns 0 or -EINVAL. */
int ol_sigv4_parse_amz_date(const char *s, size_t n, int64_t *epoch);

#endif
