/*
 * sigv2.h - AWS Signature Version 2 (HMAC-SHA1) as an S3 server checks it.
 *
 * Owns: parsing `Authorization: AWS <AccessKeyId>:<Signature>` and the
 * query-string form (AWSAccessKeyId, Signature, Expires: what boto3's
 * generate_presigned_url and `s3cmd signurl` make by default); the string
 * to sign
 *
 *   HTTP-Verb \n Content-MD5 \n Content-Type \n Date \n
 *   CanonicalizedAmzHeaders CanonicalizedResource
 *
 * where Date is the Date header (empty when x-amz-date is sent), or the
 * Expires parameter for the query form; CanonicalizedAmzHeaders is every
 * x-amz-* header, the name lower-cased, sorted by name, repeated names
 * joined with ',', each "name:value\n"; CanonicalizedResource is "/" and
 * the bucket for a virtual-host-style request, then the path exactly as
 * sent (not decoded; a path-style "/bucket" alone is "/bucket/", as AWS
 * expects and botocore signs it), then "?" and the request's sub-resources
 * (the list in sigv2.c, botocore's: acl, uploadId, partNumber, versionId,
 * response-* overrides, ...), sorted by name, each as sent
 * ("name" or "name=value") with the value percent-decoded; the signature
 * (HMAC-SHA1 of the secret, from OpenSSL); its constant-time comparison;
 * and the dates SigV2 carries (RFC 1123 or ISO 8601).
 *
 * Must not: know credentials, clocks or S3 errors (auth.c does: it looks
 * the access key up, checks Date / Expires against its clock and maps the
 * returns below to S3 errors). Nothing allocates; output goes to caller
 * buffers; parsed slices point into the caller's input or scratch.
 *
 * Errors: -EINVAL malformed input; -ENOSPC the string to sign does not fit
 * the caller's buffer (OL_SIGV2_MAX_STS is what auth.c gives) or the
 * request has more than OL_SIGV2_MAX_AMZ x-amz-* headers or
 * OL_SIGV2_MAX_SUBRES sub-resources; -ENOENT the query carries no SigV2
 * parameter at all (not a SigV2 request).
 */
#ifndef OL_S3_SIGV2_H
#define OL_S3_SIGV2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/parse.h"

#define OL_SIGV2_MAX_STS    16384u  /* string-to-sign bytes auth.c allows */
#define OL_SIGV2_MAX_AMZ    64u     /* x-amz-* headers in one request */
#define OL_SIGV2_MAX_SUBRES 16u     /* sub-resource parameters in one request */
#define OL_SIGV2_KEY_MAX    128u    /* access key bytes */

/* Slices point into the caller's header value or query scratch. */
struct ol_sigv2 {
    const char *access_key;  size_t access_key_len;
    uint8_t signature[20];
    bool signature_ok;                             /* base64 of 20 bytes: else it
                                                      cannot match (SignatureDoesNotMatch) */
    bool presigned;                                /* the query form */
    const char *expires;     size_t expires_len;   /* query form: as sent, decoded */
    int64_t expires_at;                            /* query form: seconds since the epoch */
};

/*
 * ol_sigv2_parse_header - an Authorization value "AWS AK:signature"
 * (exactly one space after "AWS"; AK 1..OL_SIGV2_KEY_MAX bytes without ':'
 * or spaces). Returns 0 or -EINVAL. A signature that is not base64 of 20
 * bytes parses, with signature_ok false: like any other wrong signature it
 * does not match.
 */
int ol_sigv2_parse_header(const char *v, size_t n, struct ol_sigv2 *out);

/*
 * ol_sigv2_parse_query - a query string (raw, without '?'). The values of
 * AWSAccessKeyId, Signature and Expires are percent-decoded ('+' is a
 * space; a raw '+' in Signature stays, base64's) into scratch (at least n
 * bytes). Returns 0 with all three present once (AWSAccessKeyId not empty,
 * Expires 1 to 19 digits; Signature as parse_header's); -ENOENT when none
 * of the three is present; -EINVAL otherwise (one missing or repeated, bad
 * percent-encoding, Expires not digits).
 */
int ol_sigv2_parse_query(const char *q, size_t n, char *scratch, struct ol_sigv2 *out);

/*
 * ol_sigv2_string_to_sign - writes the string to sign into out[cap].
 * bucket/bucket_len: the bucket named by a virtual-host-style Host (NULL,
 * 0 for path style); path, query: the request target's parts as sent
 * (query without '?'); hdrs: every header of the request; expires: the
 * query form's Expires as sent (NULL for the header form, which signs the
 * Date header, or "" when x-amz-date is present).
 * Returns the length, or -ENOSPC.
 */
int ol_sigv2_string_to_sign(const char *method, size_t method_len, const char *bucket,
                            size_t bucket_len, const char *path, size_t path_len,
                            const char *query, size_t query_len,
                            const struct ol_http_header *hdrs, size_t nhdrs,
                            const char *expires, size_t expires_len, char *out, size_t cap);

/* The signature: HMAC-SHA1(secret, string to sign). */
void ol_sigv2_sign(const char *secret, size_t secret_len, const char *sts, size_t sts_len,
                   uint8_t sig[20]);

/* Constant-time equality of two signatures. */
bool ol_sigv2_equal(const uint8_t a[20], const uint8_t b[20]);

/*
 * ol_sigv2_parse_date - a request date as seconds since the epoch: RFC 1123
 * "Sun, 06 Nov 1994 08:49:37 GMT" (zone GMT, UTC or +0000; botocore sends
 * GMT, s3cmd +0000) or ISO 8601 basic "19941106T084937Z". Returns 0 or
 * -EINVAL.
 */
int ol_sigv2_parse_date(const char *s, size_t n, int64_t *epoch);

#endif
