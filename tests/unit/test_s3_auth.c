/*
 * test_s3_auth.c - request authentication decisions on AWS's signed
 * examples: accepted as signed; every way to be refused (anonymous, wrong
 * key, wrong secret, skew, expiry, region, missing headers, bad payload
 * mode) with the S3 error a client expects.
 */
#include "olt.h"

#include "s3/auth.h"

#include <stdlib.h>

#define AK "AKIAIOSFODNN7EXAMPLE"
#define SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define EMPTY_SHA "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define T0 1369353600   /* 20130524T000000Z */
#define AUTH_GET                                                                             \
    "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"   \
    "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"                              \
    "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"

static const char *keys[] = {"OTHERKEY", AK};
static const char *secrets[] = {"other-secret", SECRET};
static const struct ol_s3_creds creds = {keys, secrets, 2};
/* path style, SigV2 accepted */
static const struct ol_s3_auth_conf US = {&creds, "us-east-1", "", true};

static struct ol_http_header H(const char *n, const char *v)
{
    return (struct ol_http_header){n, strlen(n), v, strlen(v)};
}

static enum ol_s3_err get(const char *authz, const char *date, const char *sha, int64_t now,
                          const char *region, struct ol_s3_auth *out)
{
    struct ol_http_header h[6];
    size_t n = 0;
    h[n++] = H("Host", "examplebucket.s3.amazonaws.com");
    h[n++] = H("Range", "bytes=0-9");
    if (sha)
        h[n++] = H("x-amz-content-sha256", sha);
    if (date)
        h[n++] = H("x-amz-date", date);
    if (authz)
        h[n++] = H("Authorization", authz);
    const struct ol_s3_auth_conf conf = {&creds, region, "", true};
    return ol_s3_authenticate("GET", 3, "/test.txt", 9, "", 0, h, n, &conf, now, out);
}

OLT_TEST(s3_auth_header_signed_request)
{
    struct ol_s3_auth a;
    OLT_CHECK_EQ(get(AUTH_GET, "20130524T000000Z", EMPTY_SHA, T0, "us-east-1", &a), OL_S3_OK);
    OLT_CHECK_EQ(a.cred, 1);
    OLT_CHECK_EQ(a.payload, OL_S3_PAY_SHA256);
    OLT_CHECK_EQ(a.body_sha256[0], 0xe3);
    /* within the 15-minute window either way */
    OLT_CHECK_EQ(get(AUTH_GET, "20130524T000000Z", EMPTY_SHA, T0 + 900, "us-east-1", &a),
                 OL_S3_OK);
    OLT_CHECK_EQ(get(AUTH_GET, "20130524T000000Z", EMPTY_SHA, T0 - 900, "us-east-1", &a),
                 OL_S3_OK);
}

OLT_TEST(s3_auth_refusals)
{
    struct ol_s3_auth a;
    OLT_CHECK_EQ(get(NULL, "20130524T000000Z", EMPTY_SHA, T0, "us-east-1", &a),
                 OL_S3_ACCESS_DENIED);
    OLT_CHECK(strstr(a.message, "Anonymous") != NULL);
    OLT_CHECK_EQ(get(AUTH_GET, "20130524T000000Z", EMPTY_SHA, T0 + 901, "us-east-1", &a),
                 OL_S3_REQUEST_TIME_TOO_SKEWED);
    OLT_CHECK_EQ(get(AUTH_GET, NULL, EMPTY_SHA, T0, "us-east-1", &a), OL_S3_ACCESS_DENIED);
    OLT_CHECK_EQ(get(AUTH_GET, "20130524T000000Z", NULL, T0, "us-east-1", &a),
                 OL_S3_INVALID_REQUEST);
    OLT_CHECK_EQ(get(AUTH_GET, "20130524T000000Z", "SOMETHING", T0, "us-east-1", &a),
                 OL_S3_INVALID_ARGUMENT);
    /* the payload hash is signed: UNSIGNED-PAYLOAD instead does not verify */
    OLT_CHECK_EQ(get(AUTH_GET, "20130524T000000Z", "UNSIGNED-PAYLOAD", T0, "us-east-1", &a),
                 OL_S3_SIGNATURE_DOES_NOT_MATCH);
    OLT_CHECK_EQ(get(AUTH_GET, "20130524T000000Z", EMPTY_SHA, T0, "eu-west-1", &a),
                 OL_S3_AUTH_HEADER_MALFORMED);
    OLT_CHECK(strstr(a.message, "expecting 'eu-west-1'") != NULL);
    OLT_CHECK_EQ(get(AUTH_GET, "20130525T000000Z", EMPTY_SHA, T0 + 86400, "us-east-1", &a),
                 OL_S3_AUTH_HEADER_MALFORMED);   /* scope date != request date */
    OLT_CHECK_EQ(get("AWS4-HMAC-SHA256 nonsense", "20130524T000000Z", EMPTY_SHA, T0,
                     "us-east-1", &a), OL_S3_AUTH_HEADER_MALFORMED);
    char other[512];
    snprintf(other, sizeof other, "%s", AUTH_GET);
    memcpy(strstr(other, "AKIA"), "AKIAXXXXXXXXXXXXXXXX", 20);
    OLT_CHECK_EQ(get(other, "20130524T000000Z", EMPTY_SHA, T0, "us-east-1", &a),
                 OL_S3_INVALID_ACCESS_KEY);
    const char *wrong_secrets[] = {"other-secret", "not-the-secret"};
    struct ol_s3_creds bad = {keys, wrong_secrets, 2};
    struct ol_s3_auth_conf bad_conf = {&bad, "us-east-1", "", true};
    struct ol_http_header h[] = {H("Host", "examplebucket.s3.amazonaws.com"),
                                 H("Range", "bytes=0-9"), H("x-amz-content-sha256", EMPTY_SHA),
                                 H("x-amz-date", "20130524T000000Z"), H("Authorization", AUTH_GET)};
    OLT_CHECK_EQ(ol_s3_authenticate("GET", 3, "/test.txt", 9, "", 0, h, 5, &bad_conf,
                                    T0, &a), OL_S3_SIGNATURE_DOES_NOT_MATCH);
    /* a different path or method does not verify either */
    OLT_CHECK_EQ(ol_s3_authenticate("GET", 3, "/test.txx", 9, "", 0, h, 5, &US,
                                    T0, &a), OL_S3_SIGNATURE_DOES_NOT_MATCH);
    OLT_CHECK_EQ(ol_s3_authenticate("PUT", 3, "/test.txt", 9, "", 0, h, 5, &US,
                                    T0, &a), OL_S3_SIGNATURE_DOES_NOT_MATCH);
    OLT_CHECK_EQ(ol_s3_authenticate("GET", 3, "/test.txt", 9, "x=1", 3, h, 5, &US,
                                    T0, &a), OL_S3_SIGNATURE_DOES_NOT_MATCH);
}

#define PRESIGNED                                                                          \
    "X-Amz-Algorithm=AWS4-HMAC-SHA256"                                                     \
    "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"    \
    "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"            \
    "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"

OLT_TEST(s3_auth_presigned_url)
{
    struct ol_s3_auth a;
    struct ol_http_header h[] = {H("Host", "examplebucket.s3.amazonaws.com")};
    const char *q = PRESIGNED;
    OLT_CHECK_EQ(ol_s3_authenticate("GET", 3, "/test.txt", 9, q, strlen(q), h, 1, &US,
                                    T0 + 3600, &a), OL_S3_OK);
    OLT_CHECK_EQ(a.payload, OL_S3_PAY_UNSIGNED);
    OLT_CHECK_EQ(ol_s3_authenticate("GET", 3, "/test.txt", 9, q, strlen(q), h, 1, &US,
                                    T0 + 86401, &a), OL_S3_ACCESS_DENIED);
    OLT_CHECK(strstr(a.message, "expired") != NULL);
    OLT_CHECK_EQ(ol_s3_authenticate("GET", 3, "/test.txt", 9, q, strlen(q), h, 1, &US,
                                    T0 - 1000, &a), OL_S3_ACCESS_DENIED);
    OLT_CHECK_EQ(ol_s3_authenticate("PUT", 3, "/test.txt", 9, q, strlen(q), h, 1, &US,
                                    T0, &a), OL_S3_SIGNATURE_DOES_NOT_MATCH);
    /* SigV2 (test_s3_sigv2.c): a malformed one, and any with s3_sigv2 = false */
    const char *v2 = "AWSAccessKeyId=AK&Signature=abc%3D";
    OLT_CHECK_EQ(ol_s3_authenticate("GET", 3, "/test.txt", 9, v2, strlen(v2), h, 1, &US, T0, &a),
                 OL_S3_ACCESS_DENIED);
    OLT_CHECK(strstr(a.message, "AWSAccessKeyId parameters") != NULL);
    const struct ol_s3_auth_conf v4_only = {&creds, "us-east-1", "", false};
    OLT_CHECK_EQ(ol_s3_authenticate("GET", 3, "/test.txt", 9, v2, strlen(v2), h, 1, &v4_only,
                                    T0, &a), OL_S3_ACCESS_DENIED);
    OLT_CHECK(strstr(a.message, "Signature Version 2") != NULL);
    const char *broken = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=10";
    OLT_CHECK_EQ(ol_s3_authenticate("GET", 3, "/test.txt", 9, broken, strlen(broken), h, 1,
                                    &US, T0, &a), OL_S3_AUTH_QUERY_ERROR);
}

/* The per-thread signing-key cache must never let a request through with
 * the key of another secret: the same access key with its secret changed
 * (a rotation), alternating, on one thread. */
OLT_TEST(s3_auth_signing_key_cache_follows_the_secret)
{
    static const char *rot_secrets[] = {"other-secret", "rotated-secret-0123456789"};
    static const struct ol_s3_creds rotated = {keys, rot_secrets, 2};
    static const struct ol_s3_auth_conf rotated_conf = {&rotated, "us-east-1", "", true};
    struct ol_http_header h[4] = {H("Host", "examplebucket.s3.amazonaws.com"),
                                  H("Range", "bytes=0-9"),
                                  H("x-amz-content-sha256", EMPTY_SHA),
                                  H("x-amz-date", "20130524T000000Z")};
    struct ol_http_header ha[5];
    memcpy(ha, h, sizeof h);
    ha[4] = H("Authorization", AUTH_GET);
    struct ol_s3_auth a;
    for (int round = 0; round < 3; round++) {
        OLT_CHECK_EQ(ol_s3_authenticate("GET", 3, "/test.txt", 9, "", 0, ha, 5, &US,
                                        T0, &a), OL_S3_OK);
        OLT_CHECK_EQ(ol_s3_authenticate("GET", 3, "/test.txt", 9, "", 0, ha, 5, &rotated_conf,
                                        T0, &a), OL_S3_SIGNATURE_DOES_NOT_MATCH);
    }
}
