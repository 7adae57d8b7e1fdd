/*
 * test_s3_sigv2.c - Signature Version 2 (src/s3/sigv2.c) against AWS's
 * published examples (the S3 developer guide's "Signing and authenticating
 * REST requests": Object GET, Object PUT, List, Fetch ?acl, Upload with
 * x-amz-* headers, query-string authentication), the canonicalisation
 * rules clients sign by (botocore's HmacV1Auth, s3cmd), malformed input,
 * dates, and the parsers on input that ends at a PROT_NONE guard page. The
 * same requests through ol_s3_authenticate: accepted, refused with the
 * setting off, expired, skewed.
 */
#include "olt.h"

#include "s3/auth.h"
#include "s3/sigv2.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#define AK "AKIAIOSFODNN7EXAMPLE"
#define SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"

static struct ol_http_header H(const char *n, const char *v)
{
    return (struct ol_http_header){n, strlen(n), v, strlen(v)};
}

/* The string to sign of a request; checks it, then its signature. */
static void check(const char *method, const char *bucket, const char *path, const char *query,
                  const struct ol_http_header *h, size_t nh, const char *expires,
                  const char *want_sts, const char *want_sig)
{
    char sts[OL_SIGV2_MAX_STS + 1];
    int n = ol_sigv2_string_to_sign(method, strlen(method), bucket, bucket ? strlen(bucket) : 0,
                                    path, strlen(path), query, strlen(query), h, nh, expires,
                                    expires ? strlen(expires) : 0, sts, OL_SIGV2_MAX_STS);
    OLT_CHECK(n > 0);
    sts[n] = 0;
    OLT_CHECK_STR(sts, want_sts);
    if (!want_sig)
        return;
    char hdr[128];
    snprintf(hdr, sizeof hdr, "AWS " AK ":%s", want_sig);
    struct ol_sigv2 a;
    OLT_CHECK_EQ(ol_sigv2_parse_header(hdr, strlen(hdr), &a), 0);
    uint8_t sig[20];
    ol_sigv2_sign(SECRET, strlen(SECRET), sts, (size_t)n, sig);
    OLT_CHECK(ol_sigv2_equal(sig, a.signature));
}

OLT_TEST(s3_sigv2_aws_examples)
{
    /* Object GET, virtual-host style: the bucket from Host leads the resource */
    struct ol_http_header get[] = {H("Host", "awsexamplebucket1.us-west-1.s3.amazonaws.com"),
                                   H("Date", "Tue, 27 Mar 2007 19:36:42 +0000")};
    check("GET", "awsexamplebucket1", "/photos/puppy.jpg", "", get, 2, NULL,
          "GET\n\n\nTue, 27 Mar 2007 19:36:42 +0000\n/awsexamplebucket1/photos/puppy.jpg",
          "qgk2+6Sv9/oM7G3qLEjTH1a1l1g=");
    /* Object PUT: Content-Type signed, Content-Length not */
    struct ol_http_header put[] = {H("Content-Type", "image/jpeg"), H("Content-Length", "94328"),
                                   H("Host", "awsexamplebucket1.s3.us-west-1.amazonaws.com"),
                                   H("Date", "Tue, 27 Mar 2007 21:15:45 +0000")};
    check("PUT", "awsexamplebucket1", "/photos/puppy.jpg", "", put, 4, NULL,
          "PUT\n\nimage/jpeg\nTue, 27 Mar 2007 21:15:45 +0000\n/awsexamplebucket1/photos/puppy.jpg",
          "iqRzw+ileNPu1fhspnRs8nOjjIA=");
    /* List: prefix, max-keys, marker are not sub-resources */
    struct ol_http_header list[] = {H("User-Agent", "Mozilla/5.0"),
                                    H("Host", "awsexamplebucket1.us-west-1.s3.amazonaws.com"),
                                    H("Date", "Tue, 27 Mar 2007 19:42:41 +0000")};
    check("GET", "awsexamplebucket1", "/", "prefix=photos&max-keys=50&marker=puppy", list, 3,
          NULL, "GET\n\n\nTue, 27 Mar 2007 19:42:41 +0000\n/awsexamplebucket1/",
          "m0WP8eCtspQl5Ahe6L1SozdX9YA=");
    /* Fetch ?acl: a sub-resource without a value */
    struct ol_http_header acl[] = {H("Host", "awsexamplebucket1.us-west-1.s3.amazonaws.com"),
                                   H("Date", "Tue, 27 Mar 2007 19:44:46 +0000")};
    check("GET", "awsexamplebucket1", "/", "acl", acl, 2, NULL,
          "GET\n\n\nTue, 27 Mar 2007 19:44:46 +0000\n/awsexamplebucket1/?acl",
          "82ZHiFIjc+WbcwFKGUVEQspPn+0=");
    /* Upload: Content-MD5, x-amz-* lower-cased, sorted, a repeated one
     * joined with ','; other headers left out */
    struct ol_http_header up[] = {
        H("User-Agent", "curl/7.15.5"), H("Host", "static.example.com:8080"),
        H("Date", "Tue, 27 Mar 2007 21:06:08 +0000"), H("x-amz-acl", "public-read"),
        H("content-type", "application/x-download"), H("Content-MD5", "4gJE4saaMU4BqNR0kLY+lw=="),
        H("X-Amz-Meta-ReviewedBy", "joe@example.com"),
        H("X-Amz-Meta-ReviewedBy", "jane@example.com"),
        H("X-Amz-Meta-FileChecksum", "0x02661779"), H("X-Amz-Meta-ChecksumAlgorithm", "crc32"),
        H("Content-Disposition", "attachment; filename=database.dat"),
        H("Content-Encoding", "gzip"), H("Content-Length", "5913339")};
    check("PUT", "static.example.com", "/db-backup.dat.gz", "", up, 13, NULL,
          "PUT\n4gJE4saaMU4BqNR0kLY+lw==\napplication/x-download\n"
          "Tue, 27 Mar 2007 21:06:08 +0000\nx-amz-acl:public-read\n"
          "x-amz-meta-checksumalgorithm:crc32\nx-amz-meta-filechecksum:0x02661779\n"
          "x-amz-meta-reviewedby:joe@example.com,jane@example.com\n"
          "/static.example.com/db-backup.dat.gz",
          "jtBQa0Aq+DkULFI8qrpwIjGEx0E=");
    /* Query-string authentication: Expires in the Date line (the guide's
     * pair of string and signature from before it renamed its bucket) */
    const char *q = "AWSAccessKeyId=" AK "&Expires=1175139620"
                    "&Signature=NpgCjnDzrM%2BWFzoENXmpNDUsSn8%3D";
    char scratch[256];
    struct ol_sigv2 a;
    OLT_CHECK_EQ(ol_sigv2_parse_query(q, strlen(q), scratch, &a), 0);
    OLT_CHECK(a.presigned);
    OLT_CHECK_EQ(a.expires_at, 1175139620);
    OLT_CHECK(a.access_key_len == 20 && memcmp(a.access_key, AK, 20) == 0);
    struct ol_http_header qh[] = {H("Host", "johnsmith.s3.amazonaws.com")};
    char sts[256];
    int n = ol_sigv2_string_to_sign("GET", 3, "johnsmith", 9, "/photos/puppy.jpg", 17, q,
                                    strlen(q), qh, 1, a.expires, a.expires_len, sts, sizeof sts);
    OLT_CHECK(n > 0);
    sts[n] = 0;
    OLT_CHECK_STR(sts, "GET\n\n\n1175139620\n/johnsmith/photos/puppy.jpg");
    uint8_t sig[20];
    ol_sigv2_sign(SECRET, strlen(SECRET), sts, (size_t)n, sig);
    OLT_CHECK(ol_sigv2_equal(sig, a.signature));
    sig[19] ^= 1;
    OLT_CHECK(!ol_sigv2_equal(sig, a.signature));
}

/* With x-amz-date the Date line is empty and x-amz-date is signed among the
 * x-amz-* headers: the guide's rule, and what s3cmd signs. (The guide's
 * own Delete example puts x-amz-date's value in the Date line instead,
 * against that rule; clients follow the rule.) */
OLT_TEST(s3_sigv2_x_amz_date_replaces_date)
{
    struct ol_http_header del[] = {H("User-Agent", "dotnet"), H("Host", "s3.us-west-1.amazonaws.com"),
                                   H("Date", "Tue, 27 Mar 2007 21:20:27 +0000"),
                                   H("x-amz-date", "Tue, 27 Mar 2007 21:20:26 +0000")};
    check("DELETE", NULL, "/awsexamplebucket1/photos/puppy.jpg", "", del, 4, NULL,
          "DELETE\n\n\n\nx-amz-date:Tue, 27 Mar 2007 21:20:26 +0000\n"
          "/awsexamplebucket1/photos/puppy.jpg",
          "Ri1hpB1zpS9pGqR7y8kuNFCl4sE=");
}

OLT_TEST(s3_sigv2_canonical_resource_rules)
{
    struct ol_http_header h[] = {H("Date", "Tue, 27 Mar 2007 19:44:46 GMT"),
                                 H("x-amz-meta-b", "  two  "), H("X-AMZ-META-A", "one"),
                                 H("x-amz-meta-b", "three")};
    /* path style: the path as sent, not decoded; sub-resources sorted by
     * name, values decoded ('+' kept), others (and the v2 parameters) out */
    check("GET", NULL, "/bkt/a%20b/%E2%82%AC+x",
          "versionId=v%2F1&response-content-type=text%2Fplain&prefix=p&uploads"
          "&AWSAccessKeyId=x&partNumber=2&acl=",
          h, 4, NULL,
          "GET\n\n\nTue, 27 Mar 2007 19:44:46 GMT\nx-amz-meta-a:one\nx-amz-meta-b:two,three\n"
          "/bkt/a%20b/%E2%82%AC+x?acl=&partNumber=2&response-content-type=text/plain&uploads"
          "&versionId=v/1",
          NULL);
    /* a repeated sub-resource keeps the order it was sent in; stray '%' stays */
    check("PUT", "b", "/k", "uploadId=2&tagging&uploadId=1%zz", h, 1, NULL,
          "PUT\n\n\nTue, 27 Mar 2007 19:44:46 GMT\n/b/k?tagging&uploadId=2&uploadId=1%zz", NULL);
    /* path style, a bucket alone: "/bucket/" (botocore's authPath); the
     * service: "/" */
    check("PUT", NULL, "/bkt", "acl", h, 1, NULL, "PUT\n\n\nTue, 27 Mar 2007 19:44:46 GMT\n/bkt/?acl",
          NULL);
    check("GET", NULL, "/", "", h, 1, NULL, "GET\n\n\nTue, 27 Mar 2007 19:44:46 GMT\n/", NULL);
    /* presigned: Expires is the Date line even with a Date header */
    check("GET", NULL, "/b/k", "", h, 1, "1700000000", "GET\n\n\n1700000000\n/b/k", NULL);
    /* bounded */
    char small[16];
    OLT_CHECK_EQ(ol_sigv2_string_to_sign("GET", 3, NULL, 0, "/b/kkkkkkkkkkkkkkkkkk", 20, "", 0,
                                         h, 1, NULL, 0, small, sizeof small), -ENOSPC);
    struct ol_http_header many[OL_SIGV2_MAX_AMZ + 1];
    for (size_t i = 0; i <= OL_SIGV2_MAX_AMZ; i++)
        many[i] = H("x-amz-meta-x", "v");
    char big[OL_SIGV2_MAX_STS];
    OLT_CHECK_EQ(ol_sigv2_string_to_sign("GET", 3, NULL, 0, "/b/k", 4, "", 0, many,
                                         OL_SIGV2_MAX_AMZ + 1, NULL, 0, big, sizeof big),
                 -ENOSPC);
    OLT_CHECK(ol_sigv2_string_to_sign("GET", 3, NULL, 0, "/b/k", 4, "", 0, many,
                                      OL_SIGV2_MAX_AMZ, NULL, 0, big, sizeof big) > 0);
}

OLT_TEST(s3_sigv2_malformed_is_refused)
{
    struct ol_sigv2 a;
    static const char *const bad_headers[] = {
        "AWS", "AWS ", "AWS " AK, "AWS :qgk2+6Sv9/oM7G3qLEjTH1a1l1g=",
        "AWS  " AK ":qgk2+6Sv9/oM7G3qLEjTH1a1l1g=",      /* a space in the key */
        "AWS4-HMAC-SHA256 Credential=x",
    };
    for (size_t i = 0; i < sizeof bad_headers / sizeof *bad_headers; i++)
        OLT_CHECK_EQ(ol_sigv2_parse_header(bad_headers[i], strlen(bad_headers[i]), &a), -EINVAL);
    /* a signature that cannot be one parses, and never matches */
    static const char *const bad_sigs[] = {
        "AWS " AK ":", "AWS " AK ":qgk2+6Sv9/oM7G3qLEjTH1a1l1g",   /* no padding */
        "AWS " AK ":qgk2+6Sv9/oM7G3qLEjTH1a1l1g==",                /* too long */
        "AWS " AK ":qgk2+6Sv9/oM7G3qLEjTH1a1l1=",                  /* too short */
        "AWS " AK ":qgk2+6Sv9/oM7G3qLEjTH1a1l1-=",                 /* not base64 */
        "AWS " AK ":qgk2+6Sv9/oM7G3qLEjTH1a1l1g= ",
    };
    for (size_t i = 0; i < sizeof bad_sigs / sizeof *bad_sigs; i++) {
        OLT_CHECK_EQ(ol_sigv2_parse_header(bad_sigs[i], strlen(bad_sigs[i]), &a), 0);
        OLT_CHECK(!a.signature_ok);
    }
    OLT_CHECK_EQ(ol_sigv2_parse_header(bad_sigs[1], strlen(bad_sigs[1]) - 1, &a), 0);
    char key[OL_SIGV2_KEY_MAX + 64];
    memset(key, 'K', sizeof key);
    memcpy(key, "AWS ", 4);
    memcpy(key + 4 + OL_SIGV2_KEY_MAX + 1, ":qgk2+6Sv9/oM7G3qLEjTH1a1l1g=", 29);
    OLT_CHECK_EQ(ol_sigv2_parse_header(key, 4 + OL_SIGV2_KEY_MAX + 30, &a), -EINVAL);

    char scratch[512];
    static const char *const absent[] = {"", "a=1&b", "X-Amz-Signature=x", "awsaccesskeyid=x"};
    for (size_t i = 0; i < sizeof absent / sizeof *absent; i++)
        OLT_CHECK_EQ(ol_sigv2_parse_query(absent[i], strlen(absent[i]), scratch, &a), -ENOENT);
    static const char *const bad_queries[] = {
        "AWSAccessKeyId=AK&Expires=1",                       /* no signature */
        "Signature=qgk2%2B6Sv9%2FoM7G3qLEjTH1a1l1g%3D&Expires=1",
        "AWSAccessKeyId=AK&Signature=qgk2%2B6Sv9%2FoM7G3qLEjTH1a1l1g%3D",
        "AWSAccessKeyId=AK&AWSAccessKeyId=AK&Expires=1&Signature=qgk2%2B6Sv9%2FoM7G3qLEjTH1a1l1g%3D",
        "AWSAccessKeyId=AK&Expires=1x&Signature=qgk2%2B6Sv9%2FoM7G3qLEjTH1a1l1g%3D",
        "AWSAccessKeyId=AK&Expires=&Signature=qgk2%2B6Sv9%2FoM7G3qLEjTH1a1l1g%3D",
        "AWSAccessKeyId=AK&Expires=99999999999999999999&Signature=qgk2%2B6Sv9%2FoM7G3qLEjTH1a1l1g%3D",
        "AWSAccessKeyId=%zz&Expires=1&Signature=qgk2%2B6Sv9%2FoM7G3qLEjTH1a1l1g%3D",
        "AWSAccessKeyId=&Expires=1&Signature=qgk2%2B6Sv9%2FoM7G3qLEjTH1a1l1g%3D",
    };
    for (size_t i = 0; i < sizeof bad_queries / sizeof *bad_queries; i++)
        OLT_CHECK_EQ(ol_sigv2_parse_query(bad_queries[i], strlen(bad_queries[i]), scratch, &a),
                     -EINVAL);
    const char *short_sig = "AWSAccessKeyId=AK&Expires=1&Signature=abc%3D";
    OLT_CHECK_EQ(ol_sigv2_parse_query(short_sig, strlen(short_sig), scratch, &a), 0);
    OLT_CHECK(!a.signature_ok);
    /* a raw '+' in Signature is base64's (not a space) */
    const char *plus = "Expires=1&AWSAccessKeyId=AK&Signature=qgk2+6Sv9/oM7G3qLEjTH1a1l1g=";
    OLT_CHECK_EQ(ol_sigv2_parse_query(plus, strlen(plus), scratch, &a), 0);
    OLT_CHECK(a.signature_ok);
    OLT_CHECK_EQ(a.signature[0], 0xaa);
}

OLT_TEST(s3_sigv2_dates)
{
    int64_t t;
    OLT_CHECK_EQ(ol_sigv2_parse_date("Tue, 27 Mar 2007 19:36:42 +0000", 31, &t), 0);
    OLT_CHECK_EQ(t, 1175024202);
    OLT_CHECK_EQ(ol_sigv2_parse_date("Tue, 27 Mar 2007 19:36:42 GMT", 29, &t), 0);
    OLT_CHECK_EQ(t, 1175024202);
    OLT_CHECK_EQ(ol_sigv2_parse_date("Tue, 27 Mar 2007 19:36:42 UTC", 29, &t), 0);
    OLT_CHECK_EQ(ol_sigv2_parse_date("20070327T193642Z", 16, &t), 0);
    OLT_CHECK_EQ(t, 1175024202);
    OLT_CHECK_EQ(ol_sigv2_parse_date("Thu, 29 Feb 2024 00:00:00 GMT", 29, &t), 0);
    OLT_CHECK_EQ(t, 1709164800);
    static const char *const bad[] = {
        "", "Tue, 27 Mar 2007 19:36:42", "Tue, 27 Mar 2007 19:36:42 CET",
        "Tue, 27 Mar 2007 19:36:42 +0100", "Xyz, 27 Mar 2007 19:36:42 GMT",
        "Tue, 27 Foo 2007 19:36:42 GMT", "Tue, 32 Mar 2007 19:36:42 GMT",
        "Thu, 29 Feb 2023 00:00:00 GMT", "Tue, 27 Mar 2007 24:00:00 GMT",
        "Tue, 27 Mar 1969 19:36:42 GMT", "Tue, 7 Mar 2007 19:36:42 GMT",
        "Tue, 27 Mar 2007 19:36:4x GMT", "20070327T193642", "20071327T193642Z",
        "Tuesday, 27-Mar-07 19:36:42 GMT",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        OLT_CHECK_EQ(ol_sigv2_parse_date(bad[i], strlen(bad[i]), &t), -EINVAL);
}

/* Two pages, the second PROT_NONE; returns the address of the boundary. */
static char *guard_map(void **base, size_t *maplen)
{
    long pg = sysconf(_SC_PAGESIZE);
    *maplen = (size_t)pg * 2;
    char *m = mmap(NULL, *maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    OLT_CHECK(m != MAP_FAILED);
    OLT_CHECK(mprotect(m + pg, (size_t)pg, PROT_NONE) == 0);
    *base = m;
    return m + pg;
}

/* Every prefix of each input, placed to end exactly at the guard page:
 * the parsers and the string to sign never read past their input. */
OLT_TEST(s3_sigv2_guard_page)
{
    void *base;
    size_t maplen;
    char *edge = guard_map(&base, &maplen);
    static const char *const inputs[] = {
        "AWS " AK ":qgk2+6Sv9/oM7G3qLEjTH1a1l1g=",
        "AWSAccessKeyId=" AK "&Expires=1175139620&Signature=NpgCjnDzrM%2BWFzoENXmpNDUsSn8%3D",
        "Tue, 27 Mar 2007 19:36:42 +0000", "20070327T193642Z",
        "versionId=v%2&uploads&acl=%", "partNumber=1&uploadId=%4",
    };
    char scratch[256], sts[1024];
    struct ol_http_header h[] = {H("Date", "Tue, 27 Mar 2007 19:44:46 GMT")};
    for (size_t k = 0; k < sizeof inputs / sizeof *inputs; k++) {
        size_t len = strlen(inputs[k]);
        for (size_t n = 0; n <= len; n++) {
            char *p = edge - n;
            memcpy(p, inputs[k], n);
            struct ol_sigv2 a;
            int64_t t;
            int rc = ol_sigv2_parse_header(p, n, &a);
            OLT_CHECK(rc == 0 || rc == -EINVAL);
            rc = ol_sigv2_parse_query(p, n, scratch, &a);
            OLT_CHECK(rc == 0 || rc == -EINVAL || rc == -ENOENT);
            rc = ol_sigv2_parse_date(p, n, &t);
            OLT_CHECK(rc == 0 || rc == -EINVAL);
            OLT_CHECK(ol_sigv2_string_to_sign("GET", 3, p, n, p, n, p, n, h, 1, NULL, 0, sts,
                                              sizeof sts) > 0);
        }
    }
    munmap(base, maplen);
}

/* ---- through ol_s3_authenticate ------------------------------------------------ */

static const char *keys[] = {"OTHERKEY", AK};
static const char *secrets[] = {"other-secret", SECRET};
static const struct ol_s3_creds creds = {keys, secrets, 2};

#define T_GET 1175024202   /* Tue, 27 Mar 2007 19:36:42 +0000 */

static enum ol_s3_err auth_get(const char *authz, const char *domain, bool on, int64_t now,
                               struct ol_s3_auth *a)
{
    struct ol_http_header h[] = {H("Host", "awsexamplebucket1.s3.amazonaws.com"),
                                 H("Date", "Tue, 27 Mar 2007 19:36:42 +0000"),
                                 H("Authorization", authz)};
    const struct ol_s3_auth_conf conf = {&creds, "us-east-1", domain, on};
    return ol_s3_authenticate("GET", 3, "/photos/puppy.jpg", 17, "", 0, h, 3, &conf, now, a);
}

OLT_TEST(s3_sigv2_authenticate_header)
{
    struct ol_s3_auth a;
    const char *good = "AWS " AK ":qgk2+6Sv9/oM7G3qLEjTH1a1l1g=";
    /* virtual-host style: the bucket comes from Host (s3_domain) */
    OLT_CHECK_EQ(auth_get(good, "s3.amazonaws.com", true, T_GET, &a), OL_S3_OK);
    OLT_CHECK_EQ(a.cred, 1);
    OLT_CHECK_EQ(a.sig, OL_S3_SIG_V2);
    OLT_CHECK_EQ(a.payload, OL_S3_PAY_UNSIGNED);
    OLT_CHECK_EQ(auth_get(good, "s3.amazonaws.com", true, T_GET + 900, &a), OL_S3_OK);
    OLT_CHECK_EQ(auth_get(good, "s3.amazonaws.com", true, T_GET + 901, &a),
                 OL_S3_REQUEST_TIME_TOO_SKEWED);
    OLT_CHECK_EQ(auth_get(good, "s3.amazonaws.com", true, T_GET - 901, &a),
                 OL_S3_REQUEST_TIME_TOO_SKEWED);
    /* without s3_domain the same request is path style: /photos is the bucket */
    OLT_CHECK_EQ(auth_get(good, "", true, T_GET, &a), OL_S3_SIGNATURE_DOES_NOT_MATCH);
    OLT_CHECK_EQ(auth_get("AWS OTHERKEY:qgk2+6Sv9/oM7G3qLEjTH1a1l1g=", "s3.amazonaws.com", true,
                          T_GET, &a), OL_S3_SIGNATURE_DOES_NOT_MATCH);
    OLT_CHECK_EQ(auth_get("AWS NOSUCHKEY:qgk2+6Sv9/oM7G3qLEjTH1a1l1g=", "s3.amazonaws.com",
                          true, T_GET, &a), OL_S3_INVALID_ACCESS_KEY);
    OLT_CHECK_EQ(auth_get("AWS " AK, "s3.amazonaws.com", true, T_GET, &a),
                 OL_S3_INVALID_ARGUMENT);
    OLT_CHECK_EQ(auth_get("AWS " AK ":qgk2", "s3.amazonaws.com", true, T_GET, &a),
                 OL_S3_SIGNATURE_DOES_NOT_MATCH);
    /* turned off: refused whatever it carries, saying why */
    OLT_CHECK_EQ(auth_get(good, "s3.amazonaws.com", false, T_GET, &a), OL_S3_ACCESS_DENIED);
    OLT_CHECK(strstr(a.message, "s3_sigv2 = false") != NULL);
    /* no date at all */
    struct ol_http_header nd[] = {H("Host", "b"), H("Authorization", good)};
    const struct ol_s3_auth_conf conf = {&creds, "us-east-1", "", true};
    OLT_CHECK_EQ(ol_s3_authenticate("GET", 3, "/b/k", 4, "", 0, nd, 2, &conf, T_GET, &a),
                 OL_S3_ACCESS_DENIED);
    OLT_CHECK(strstr(a.message, "Date or x-amz-date") != NULL);
    /* a signed streaming body needs a SigV4 key */
    struct ol_http_header st[] = {H("Date", "Tue, 27 Mar 2007 19:36:42 +0000"),
                                  H("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"),
                                  H("Authorization", good)};
    OLT_CHECK_EQ(ol_s3_authenticate("PUT", 3, "/b/k", 4, "", 0, st, 3, &conf, T_GET, &a),
                 OL_S3_INVALID_REQUEST);
}

OLT_TEST(s3_sigv2_authenticate_query)
{
    struct ol_s3_auth a;
    const char *q = "AWSAccessKeyId=" AK "&Expires=1175139620"
                    "&Signature=NpgCjnDzrM%2BWFzoENXmpNDUsSn8%3D";
    struct ol_http_header h[] = {H("Host", "johnsmith.s3.amazonaws.com")};
    struct ol_s3_auth_conf conf = {&creds, "us-east-1", "s3.amazonaws.com", true};
    OLT_CHECK_EQ(ol_s3_authenticate("GET", 3, "/photos/puppy.jpg", 17, q, strlen(q), h, 1, &conf,
                                    1175139620, &a), OL_S3_OK);
    OLT_CHECK_EQ(a.sig, OL_S3_SIG_V2_QUERY);
    OLT_CHECK_EQ(a.payload, OL_S3_PAY_UNSIGNED);
    /* no maximum lifetime (as AWS): any time up to Expires */
    OLT_CHECK_EQ(ol_s3_authenticate("GET", 3, "/photos/puppy.jpg", 17, q, strlen(q), h, 1, &conf,
                                    0, &a), OL_S3_OK);
    OLT_CHECK_EQ(ol_s3_authenticate("GET", 3, "/photos/puppy.jpg", 17, q, strlen(q), h, 1, &conf,
                                    1175139621, &a), OL_S3_ACCESS_DENIED);
    OLT_CHECK(strstr(a.message, "Request has expired") != NULL);
    OLT_CHECK_EQ(ol_s3_authenticate("PUT", 3, "/photos/puppy.jpg", 17, q, strlen(q), h, 1, &conf,
                                    1175139620, &a), OL_S3_SIGNATURE_DOES_NOT_MATCH);
    const char *part = "AWSAccessKeyId=" AK "&Expires=1175139620";
    OLT_CHECK_EQ(ol_s3_authenticate("GET", 3, "/photos/puppy.jpg", 17, part, strlen(part), h, 1,
                                    &conf, 1175139620, &a), OL_S3_ACCESS_DENIED);
    OLT_CHECK(strstr(a.message, "requires the Signature, Expires and AWSAccessKeyId") != NULL);
    conf.sigv2 = false;
    OLT_CHECK_EQ(ol_s3_authenticate("GET", 3, "/photos/puppy.jpg", 17, q, strlen(q), h, 1, &conf,
                                    1175139620, &a), OL_S3_ACCESS_DENIED);
    OLT_CHECK(strstr(a.message, "Signature Version 2 is turned off") != NULL);
}
