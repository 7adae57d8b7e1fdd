/*
 * test_s3_sigv4.c - SigV4 against AWS's published S3 examples (header,
 * presigned URL, streaming chunks), canonicalisation rules, and malformed
 * input.
 */
#include "olt.h"

#include "s3/sigv4.h"

#include <errno.h>
#include <openssl/evp.h>

#define SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define EMPTY_SHA "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static struct ol_http_header H(const char *n, const char *v)
{
    return (struct ol_http_header){n, strlen(n), v, strlen(v)};
}

static void check_sig(const uint8_t sig[32], const char *want)
{
    char hex[65];
    ol_sigv4_hex(sig, hex);
    hex[64] = 0;
    OLT_CHECK_STR(hex, want);
}

OLT_TEST(s3_sigv4_aws_get_object_example)
{
    const char *auth =
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41";
    struct ol_sigv4 a;
    OLT_CHECK_EQ(ol_sigv4_parse_header(auth, strlen(auth), &a), 0);
    OLT_CHECK_EQ(a.access_key_len, 20);
    OLT_CHECK(memcmp(a.access_key, "AKIAIOSFODNN7EXAMPLE", 20) == 0);
    OLT_CHECK_STR(a.scope_date, "20130524");
    OLT_CHECK_EQ(a.scope_len, strlen("20130524/us-east-1/s3/aws4_request"));

    struct ol_http_header h[] = {
        H("Host", "examplebucket.s3.amazonaws.com"), H("Range", "bytes=0-9"),
        H("x-amz-content-sha256", EMPTY_SHA), H("x-amz-date", "20130524T000000Z"),
        H("User-Agent", "not signed"),
    };
    char canon[4096];
    int n = ol_sigv4_canonical_request("GET", 3, "/test.txt", 9, "", 0, false, h, 5,
                                       a.signed_headers, a.signed_headers_len, EMPTY_SHA, 64,
                                       canon, sizeof canon);
    OLT_CHECK(n > 0);
    const char *want =
        "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
        "x-amz-content-sha256:" EMPTY_SHA "\nx-amz-date:20130524T000000Z\n\n"
        "host;range;x-amz-content-sha256;x-amz-date\n" EMPTY_SHA;
    OLT_CHECK_EQ(n, strlen(want));
    OLT_CHECK(memcmp(canon, want, (size_t)n) == 0);

    uint8_t key[32], sig[32];
    OLT_CHECK_EQ(ol_sigv4_signing_key(SECRET, strlen(SECRET), &a, key), 0);
    ol_sigv4_sign(key, "20130524T000000Z", a.scope, a.scope_len, canon, (size_t)n, sig);
    check_sig(sig, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
    OLT_CHECK(ol_sigv4_equal(sig, a.signature));
    sig[31] ^= 1;
    OLT_CHECK(!ol_sigv4_equal(sig, a.signature));
}

OLT_TEST(s3_sigv4_aws_presigned_url_example)
{
    const char *q =
        "X-Amz-Algorithm=AWS4-HMAC-SHA256"
        "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
        "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
        "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404";
    char scratch[512];
    struct ol_sigv4 a;
    OLT_CHECK_EQ(ol_sigv4_parse_query(q, strlen(q), scratch, &a), 0);
    OLT_CHECK(a.presigned);
    OLT_CHECK_EQ(a.expires, 86400);
    OLT_CHECK_STR(a.amz_date, "20130524T000000Z");
    struct ol_http_header h[] = {H("Host", "examplebucket.s3.amazonaws.com")};
    char canon[4096];
    int n = ol_sigv4_canonical_request("GET", 3, "/test.txt", 9, q, strlen(q), true, h, 1,
                                       a.signed_headers, a.signed_headers_len,
                                       "UNSIGNED-PAYLOAD", 16, canon, sizeof canon);
    OLT_CHECK(n > 0);
    const char *want =
        "GET\n/test.txt\n"
        "X-Amz-Algorithm=AWS4-HMAC-SHA256"
        "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
        "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host\n"
        "host:examplebucket.s3.amazonaws.com\n\nhost\nUNSIGNED-PAYLOAD";
    OLT_CHECK_EQ(n, strlen(want));
    OLT_CHECK(memcmp(canon, want, (size_t)n) == 0);
    uint8_t key[32], sig[32];
    OLT_CHECK_EQ(ol_sigv4_signing_key(SECRET, strlen(SECRET), &a, key), 0);
    ol_sigv4_sign(key, a.amz_date, a.scope, a.scope_len, canon, (size_t)n, sig);
    OLT_CHECK(ol_sigv4_equal(sig, a.signature));
}

static void sha(const void *p, size_t n, uint8_t out[32])
{
    EVP_Digest(p, n, out, NULL, EVP_sha256(), NULL);
}

OLT_TEST(s3_sigv4_aws_streaming_chunks_example)
{
    const char *auth =
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
        "SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;"
        "x-amz-decoded-content-length;x-amz-storage-class,"
        "Signature=4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9";
    struct ol_sigv4 a;
    OLT_CHECK_EQ(ol_sigv4_parse_header(auth, strlen(auth), &a), 0);
    struct ol_http_header h[] = {
        H("Host", "s3.amazonaws.com"), H("x-amz-date", "20130524T000000Z"),
        H("x-amz-storage-class", "REDUCED_REDUNDANCY"),
        H("Authorization", auth),
        H("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"),
        H("Content-Encoding", "aws-chunked"), H("x-amz-decoded-content-length", "66560"),
        H("Content-Length", "66824"),
    };
    const char *mode = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD";
    char canon[4096];
    int n = ol_sigv4_canonical_request("PUT", 3, "/examplebucket/chunkObject.txt", 30, "", 0,
                                       false, h, 8, a.signed_headers, a.signed_headers_len,
                                       mode, strlen(mode), canon, sizeof canon);
    OLT_CHECK(n > 0);
    uint8_t key[32], seed[32];
    OLT_CHECK_EQ(ol_sigv4_signing_key(SECRET, strlen(SECRET), &a, key), 0);
    ol_sigv4_sign(key, "20130524T000000Z", a.scope, a.scope_len, canon, (size_t)n, seed);
    OLT_CHECK(ol_sigv4_equal(seed, a.signature));

    static char data[65536];
    memset(data, 'a', sizeof data);
    uint8_t h1[32], s1[32], s2[32], s3[32];
    sha(data, 65536, h1);
    ol_sigv4_chunk_sign(key, "20130524T000000Z", a.scope, a.scope_len, seed, h1, s1);
    check_sig(s1, "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648");
    sha(data, 1024, h1);
    ol_sigv4_chunk_sign(key, "20130524T000000Z", a.scope, a.scope_len, s1, h1, s2);
    check_sig(s2, "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497");
    sha("", 0, h1);
    ol_sigv4_chunk_sign(key, "20130524T000000Z", a.scope, a.scope_len, s2, h1, s3);
    check_sig(s3, "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9");
}

static int canon_of(const char *path, const char *query, char *out, size_t cap)
{
    struct ol_http_header h[] = {H("host", "h")};
    return ol_sigv4_canonical_request("GET", 3, path, strlen(path), query, strlen(query), false,
                                      h, 1, "host", 4, "UNSIGNED-PAYLOAD", 16, out, cap);
}

OLT_TEST(s3_sigv4_canonical_path_and_query_rules)
{
    char c[1024];
    int n = canon_of("/b/a%20b+c/%E2%82%AC~x", "z=1&a=2&a=1&empty&sp=a+b&enc=%2f%41", c, sizeof c);
    OLT_CHECK(n > 0);
    c[n] = 0;
    /* path: decoded once, re-encoded (space %20, '+' kept as %2B, '~' bare),
     * never normalised; query: decoded, '+' = space, re-encoded upper-case,
     * sorted by name then value, bare names get '=' */
    const char *want = "GET\n/b/a%20b%2Bc/%E2%82%AC~x\n"
                       "a=1&a=2&empty=&enc=%2FA&sp=a%20b&z=1\nhost:h\n\nhost\nUNSIGNED-PAYLOAD";
    OLT_CHECK_STR(c, want);
    n = canon_of("/a/../b/./c//d", "", c, sizeof c);
    c[n] = 0;
    OLT_CHECK(strstr(c, "\n/a/../b/./c//d\n") != NULL);
    OLT_CHECK_EQ(canon_of("/bad%2", "", c, sizeof c), -EINVAL);
    OLT_CHECK_EQ(canon_of("/bad%zz", "", c, sizeof c), -EINVAL);
    OLT_CHECK_EQ(canon_of("/x", "a=%", c, sizeof c), -EINVAL);
    OLT_CHECK_EQ(canon_of("/x", "a=b", c, 10), -ENOSPC);
    /* a signed header the request lacks */
    struct ol_http_header h[] = {H("host", "h")};
    OLT_CHECK_EQ(ol_sigv4_canonical_request("GET", 3, "/", 1, "", 0, false, h, 1,
                                            "host;x-amz-date", 15, "x", 1, c, sizeof c),
                 -ENOENT);
    /* repeated headers joined with ',', inner spaces folded */
    struct ol_http_header h2[] = {H("Host", "h"), H("X-A", "one   two"), H("x-a", "three")};
    n = ol_sigv4_canonical_request("GET", 3, "/", 1, "", 0, false, h2, 3, "host;x-a", 8, "p", 1,
                                   c, sizeof c);
    c[n] = 0;
    OLT_CHECK(strstr(c, "\nx-a:one two,three\n") != NULL);
}

OLT_TEST(s3_sigv4_malformed_authorization_is_refused)
{
    static const char *bad[] = {
        "",
        "AWS4-HMAC-SHA256",
        "AWS4-HMAC-SHA1 Credential=A/20130524/r/s3/aws4_request,SignedHeaders=host,Signature="
        "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
        /* missing signature */
        "AWS4-HMAC-SHA256 Credential=A/20130524/r/s3/aws4_request,SignedHeaders=host",
        /* short signature */
        "AWS4-HMAC-SHA256 Credential=A/20130524/r/s3/aws4_request,SignedHeaders=host,Signature=ab",
        /* four credential parts */
        "AWS4-HMAC-SHA256 Credential=A/20130524/r/aws4_request,SignedHeaders=host,Signature="
        "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
        /* bad date */
        "AWS4-HMAC-SHA256 Credential=A/20130231/r/s3/aws4_request,SignedHeaders=host,Signature="
        "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
        /* host not signed */
        "AWS4-HMAC-SHA256 Credential=A/20130524/r/s3/aws4_request,SignedHeaders=x-amz-date,"
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
        /* unsorted / upper-case signed headers */
        "AWS4-HMAC-SHA256 Credential=A/20130524/r/s3/aws4_request,SignedHeaders=x-amz-date;host,"
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
        "AWS4-HMAC-SHA256 Credential=A/20130524/r/s3/aws4_request,SignedHeaders=Host,"
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
        /* repeated component, unknown component */
        "AWS4-HMAC-SHA256 Credential=A/20130524/r/s3/aws4_request,Credential=A/20130524/r/s3/"
        "aws4_request,SignedHeaders=host,Signature="
        "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
        "AWS4-HMAC-SHA256 Credential=A/20130524/r/s3/aws4_request,SignedHeaders=host,Foo=1,"
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct ol_sigv4 a;
        if (ol_sigv4_parse_header(bad[i], strlen(bad[i]), &a) != -EINVAL)
            olt_fail(__FILE__, __LINE__, "accepted: %s", bad[i]);
    }
    /* spaces after commas are fine */
    const char *ok = "AWS4-HMAC-SHA256 Credential=A/20130524/r/s3/aws4_request, "
                     "SignedHeaders=host, Signature="
                     "F0E8BDB87C964420E857BD35B5D6ED310BD44F0170ABA48DD91039C6036BDB41";
    struct ol_sigv4 a;
    OLT_CHECK_EQ(ol_sigv4_parse_header(ok, strlen(ok), &a), 0);
}

OLT_TEST(s3_sigv4_presigned_query_limits)
{
    char scratch[1024];
    struct ol_sigv4 a;
    const char *base = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=A%2F20130524%2Fr%2F"
                       "s3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-SignedHeaders=host"
                       "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d15"
                       "7751f604d404&X-Amz-Expires=";
    char q[1024];
    snprintf(q, sizeof q, "%s604800", base);
    OLT_CHECK_EQ(ol_sigv4_parse_query(q, strlen(q), scratch, &a), 0);
    snprintf(q, sizeof q, "%s604801", base);
    OLT_CHECK_EQ(ol_sigv4_parse_query(q, strlen(q), scratch, &a), -EINVAL);
    snprintf(q, sizeof q, "%s0", base);
    OLT_CHECK_EQ(ol_sigv4_parse_query(q, strlen(q), scratch, &a), -EINVAL);
    snprintf(q, sizeof q, "%s-5", base);
    OLT_CHECK_EQ(ol_sigv4_parse_query(q, strlen(q), scratch, &a), -EINVAL);
    OLT_CHECK_EQ(ol_sigv4_parse_query("prefix=a&max-keys=2", 19, scratch, &a), -ENOENT);
    const char *nodate = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=A%2F20130524%2Fr"
                         "%2Fs3%2Faws4_request&X-Amz-SignedHeaders=host&X-Amz-Expires=5"
                         "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957"
                         "d157751f604d404";
    OLT_CHECK_EQ(ol_sigv4_parse_query(nodate, strlen(nodate), scratch, &a), -EINVAL);
}

OLT_TEST(s3_sigv4_amz_date)
{
    int64_t t;
    OLT_CHECK_EQ(ol_sigv4_parse_amz_date("20130524T000000Z", 16, &t), 0);
    OLT_CHECK_EQ(t, 1369353600);
    OLT_CHECK_EQ(ol_sigv4_parse_amz_date("20240229T235959Z", 16, &t), 0);
    OLT_CHECK_EQ(t, 1709251199);
    OLT_CHECK_EQ(ol_sigv4_parse_amz_date("20230229T000000Z", 16, &t), -EINVAL);
    OLT_CHECK_EQ(ol_sigv4_parse_amz_date("20130524T240000Z", 16, &t), -EINVAL);
    OLT_CHECK_EQ(ol_sigv4_parse_amz_date("20130524 000000Z", 16, &t), -EINVAL);
    OLT_CHECK_EQ(ol_sigv4_parse_amz_date("20130524T000000", 15, &t), -EINVAL);
}
