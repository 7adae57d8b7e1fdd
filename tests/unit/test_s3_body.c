/*
 * test_s3_body.c - body verification: payload SHA-256, Content-MD5,
 * flexible checksums from headers and trailers, aws-chunked bodies, and
 * every refusal with its S3 error.
 */
#include "olt.h"

#include "base/sha256.h"
#include "s3/body.h"

#include <stdlib.h>

static struct ol_s3_body_ctx ctx;

static void init_ctx(void)
{
    ctx.stage = malloc(OL_AWSC_STAGE);   /* chunks hashed in pairs */
    static struct ol_md5 md5;   /* a lone stream */
    ctx.md5 = &md5;
    ctx.cksum = EVP_MD_CTX_new();
}

static struct ol_http_header H(const char *n, const char *v)
{
    return (struct ol_http_header){n, strlen(n), v, strlen(v)};
}

/* feeds `body` in pieces of `step`; returns the verdict */
static enum ol_s3_err run(const struct ol_s3_auth *a, const struct ol_http_header *h, size_t nh,
                          const char *body, size_t len, int64_t clen, size_t step,
                          struct ol_s3_body *b, char *out, size_t *out_len)
{
    enum ol_s3_err e = ol_s3_body_begin(b, a, h, nh, clen, &ctx);
    if (e)
        return e;
    size_t off = 0, o = 0;
    while (off < len) {
        size_t n = len - off < step ? len - off : step;
        const char *d;
        size_t dl;
        long used = ol_s3_body_feed(b, body + off, n, &d, &dl);
        if (used < 0)
            return b->err;
        ol_s3_body_hash(b, d, dl);
        if (out)
            memcpy(out + o, d, dl);
        o += dl;
        off += (size_t)used;
    }
    if (out_len)
        *out_len = o;
    return ol_s3_body_end(b);
}

static void sha_of(const char *s, size_t n, uint8_t out[32])
{
    EVP_Digest(s, n, out, NULL, EVP_sha256(), NULL);
}

OLT_TEST(s3_body_plain_payload_hash_md5_and_checksum)
{
    init_ctx();
    const char *body = "hello world";
    struct ol_s3_auth a = {.payload = OL_S3_PAY_SHA256};
    sha_of(body, 11, a.body_sha256);
    struct ol_s3_body b;
    OLT_CHECK_EQ(run(&a, NULL, 0, body, 11, 11, 3, &b, NULL, NULL), OL_S3_OK);
    char b64[64];
    ol_ck_b64(b.md5, 16, b64);
    OLT_CHECK_STR(b64, "XrY7u+Ae7tCTyyK7j1rNww==");   /* MD5("hello world") */
    a.body_sha256[0] ^= 1;
    OLT_CHECK_EQ(run(&a, NULL, 0, body, 11, 11, 3, &b, NULL, NULL), OL_S3_XAMZ_SHA256_MISMATCH);
    a.payload = OL_S3_PAY_UNSIGNED;
    struct ol_http_header md5[] = {H("Content-MD5", "XrY7u+Ae7tCTyyK7j1rNww==")};
    OLT_CHECK_EQ(run(&a, md5, 1, body, 11, 11, 4, &b, NULL, NULL), OL_S3_OK);
    struct ol_http_header badmd5[] = {H("Content-MD5", "AAAAAAAAAAAAAAAAAAAAAA==")};
    OLT_CHECK_EQ(run(&a, badmd5, 1, body, 11, 11, 4, &b, NULL, NULL), OL_S3_BAD_DIGEST);
    struct ol_http_header junkmd5[] = {H("Content-MD5", "not base64")};
    OLT_CHECK_EQ(run(&a, junkmd5, 1, body, 11, 11, 4, &b, NULL, NULL), OL_S3_INVALID_DIGEST);
    struct ol_http_header crc[] = {H("x-amz-checksum-crc32", "DUoRhQ==")};
    OLT_CHECK_EQ(run(&a, crc, 1, body, 11, 11, 5, &b, NULL, NULL), OL_S3_OK);
    OLT_CHECK_EQ(b.ck_len, 4);
    struct ol_http_header badcrc[] = {H("x-amz-checksum-crc32c", "DUoRhQ==")};
    OLT_CHECK_EQ(run(&a, badcrc, 1, body, 11, 11, 5, &b, NULL, NULL), OL_S3_BAD_DIGEST);
    struct ol_http_header two[] = {H("x-amz-checksum-crc32", "DUoRhQ=="),
                                   H("x-amz-checksum-crc32c", "yZRlqg==")};
    OLT_CHECK_EQ(run(&a, two, 2, body, 11, 11, 5, &b, NULL, NULL), OL_S3_INVALID_REQUEST);
    struct ol_http_header shortv[] = {H("x-amz-checksum-sha256", "DUoRhQ==")};
    OLT_CHECK_EQ(run(&a, shortv, 1, body, 11, 11, 5, &b, NULL, NULL), OL_S3_INVALID_REQUEST);
    /* a Complete's x-amz-checksum-* are the object's ("<b64>-N" too): not
     * this body's, left alone */
    struct ol_http_header obj[] = {H("x-amz-checksum-sha256", "DUoRhQ==-2"),
                                   H("x-amz-checksum-crc32", "AAAAAA==")};
    ctx.object_checksums = true;
    OLT_CHECK_EQ(run(&a, obj, 2, body, 11, 11, 5, &b, NULL, NULL), OL_S3_OK);
    OLT_CHECK_EQ(b.ck_algo, OL_CK_NONE);
    OLT_CHECK_EQ(run(&a, badmd5, 1, body, 11, 11, 4, &b, NULL, NULL), OL_S3_BAD_DIGEST);
    ctx.object_checksums = false;
    /* fewer bytes than announced */
    OLT_CHECK_EQ(run(&a, NULL, 0, body, 10, 11, 5, &b, NULL, NULL), OL_S3_INCOMPLETE_BODY);
    OLT_CHECK_EQ(run(&a, NULL, 0, body, 11, -1, 5, &b, NULL, NULL), OL_S3_MISSING_CONTENT_LENGTH);
    /* a trailer needs a trailer mode */
    struct ol_http_header tr[] = {H("x-amz-trailer", "x-amz-checksum-crc32")};
    OLT_CHECK_EQ(run(&a, tr, 1, body, 11, 11, 5, &b, NULL, NULL), OL_S3_INVALID_REQUEST);
}

OLT_TEST(s3_body_unsigned_trailer_checksum)
{
    init_ctx();
    struct ol_s3_auth a = {.payload = OL_S3_PAY_STREAM_UNSIGNED_TRAILER};
    const char *good = "5\r\nhello\r\n6\r\n world\r\n0\r\nx-amz-checksum-crc32:DUoRhQ==\r\n\r\n";
    const char *bad = "5\r\nhello\r\n6\r\n world\r\n0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n";
    const char *none = "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
    struct ol_http_header h[] = {H("x-amz-trailer", "x-amz-checksum-crc32"),
                                 H("x-amz-decoded-content-length", "11")};
    struct ol_s3_body b;
    char out[64];
    size_t n;
    for (size_t step = 1; step < 20; step += 6) {
        OLT_CHECK_EQ(run(&a, h, 2, good, strlen(good), (int64_t)strlen(good), step, &b, out, &n),
                     OL_S3_OK);
        OLT_CHECK_EQ(n, 11);
        OLT_CHECK(memcmp(out, "hello world", 11) == 0);
    }
    OLT_CHECK_EQ(run(&a, h, 2, bad, strlen(bad), (int64_t)strlen(bad), 7, &b, out, &n),
                 OL_S3_BAD_DIGEST);
    OLT_CHECK_EQ(run(&a, h, 2, none, strlen(none), (int64_t)strlen(none), 7, &b, out, &n),
                 OL_S3_INVALID_REQUEST);
    OLT_CHECK_EQ(run(&a, h, 1, good, strlen(good), (int64_t)strlen(good), 7, &b, out, &n),
                 OL_S3_MISSING_CONTENT_LENGTH);
    /* HTTP chunked framing (no Content-Length), as boto3 sends over HTTPS:
     * the decoded length header is what counts */
    OLT_CHECK_EQ(run(&a, h, 2, good, strlen(good), -1, 7, &b, out, &n), OL_S3_OK);
    OLT_CHECK(n == 11 && memcmp(out, "hello world", 11) == 0);
    OLT_CHECK_EQ(run(&a, h, 1, good, strlen(good), -1, 7, &b, out, &n),
                 OL_S3_MISSING_CONTENT_LENGTH);
    struct ol_http_header wrong_len[] = {H("x-amz-trailer", "x-amz-checksum-crc32"),
                                         H("x-amz-decoded-content-length", "12")};
    OLT_CHECK_EQ(run(&a, wrong_len, 2, good, strlen(good), (int64_t)strlen(good), 7, &b, out, &n),
                 OL_S3_INCOMPLETE_BODY);
}

OLT_TEST(s3_body_signed_chunks)
{
    init_ctx();
    /* AWS's streaming example: the seed signature, key and scope */
    struct ol_sigv4 sv = {0};
    memcpy(sv.scope_date, "20130524", 9);
    sv.region = "us-east-1";
    sv.region_len = 9;
    sv.service = "s3";
    sv.service_len = 2;
    struct ol_s3_auth a = {.payload = OL_S3_PAY_STREAM_SIGNED};
    const char *secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    OLT_CHECK_EQ(ol_sigv4_signing_key(secret, strlen(secret), &sv, a.key), 0);
    ol_sigv4_from_hex("4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9", 64,
                      a.seed);
    memcpy(a.amz_date, "20130524T000000Z", 17);
    strcpy(a.scope, "20130524/us-east-1/s3/aws4_request");
    a.scope_len = strlen(a.scope);
    static char body[70000], out[70000];
    size_t len = 0, n;
#define ADD(s) (memcpy(body + len, s, strlen(s)), len += strlen(s))
    ADD("10000;chunk-signature=ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648\r\n");
    memset(body + len, 'a', 65536);
    len += 65536;
    ADD("\r\n400;chunk-signature=0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497\r\n");
    memset(body + len, 'a', 1024);
    len += 1024;
    ADD("\r\n0;chunk-signature=b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9\r\n\r\n");
    struct ol_http_header h[] = {H("x-amz-decoded-content-length", "66560")};
    struct ol_s3_body b;
    OLT_CHECK_EQ(run(&a, h, 1, body, len, (int64_t)len, 4000, &b, out, &n), OL_S3_OK);
    OLT_CHECK_EQ(n, 66560);
    body[200] = 'b';
    OLT_CHECK_EQ(run(&a, h, 1, body, len, (int64_t)len, 4000, &b, out, &n),
                 OL_S3_SIGNATURE_DOES_NOT_MATCH);
}

/* len bytes of a body (its own pattern by `shift`), signed as a payload:
 * a's SHA-256 set, md5 its MD5. */
static char *signed_body(size_t len, unsigned shift, struct ol_s3_auth *a, uint8_t md5[16])
{
    char *body = malloc(len);
    for (size_t i = 0; i < len; i++)
        body[i] = (char)(i * 2654435761u >> shift);
    *a = (struct ol_s3_auth){.payload = OL_S3_PAY_SHA256};
    sha_of(body, len, a->body_sha256);
    unsigned ml = 16;
    EVP_Digest(body, len, md5, &ml, EVP_md5(), NULL);
    return body;
}

/* A signed payload's SHA-256 on each of its three paths (beside a lone
 * MD5, in one pass with a lone MD5, from a lane of an MD5 set with another
 * lane's upload hashed beside it): the same verdicts, the same MD5. */
OLT_TEST(s3_body_signed_payload_every_path)
{
    init_ctx();
    enum { LEN = 3 * OL_MD5_STAGE + 777 };
    struct ol_s3_auth a, a2;
    uint8_t md5[16], md5_2[16];
    char *body = signed_body(LEN, 13, &a, md5), *other = signed_body(LEN, 5, &a2, md5_2);
    struct ol_md5_set *set = ol_md5_set_new(4);
    OLT_CHECK(set != NULL);
    struct ol_md5 *saved = ctx.md5;
    for (int path = 0; path < 3; path++)
        for (int bad = 0; bad < 2; bad++) {
            ctx.one_pass = path == 1;
            struct ol_md5 *lane = NULL, *peer = NULL;
            if (path == 2) {
                ctx.md5 = lane = ol_md5_get(set);
                peer = ol_md5_get(set);   /* company: another upload's MD5 */
                ol_md5_init(peer);
            }
            struct ol_s3_body b;
            OLT_CHECK_EQ(ol_s3_body_begin(&b, &a, NULL, 0, LEN, &ctx), OL_S3_OK);
            if (bad)
                body[LEN / 2] ^= 1;
            for (size_t off = 0; off < LEN; off += 16384) {
                size_t n = LEN - off < 16384 ? LEN - off : 16384;
                const char *d;
                size_t dl;
                OLT_CHECK_EQ(ol_s3_body_feed(&b, body + off, n, &d, &dl), (long)n);
                ol_s3_body_hash(&b, d, dl);
                if (peer)
                    ol_md5_update(peer, other + off, n);
            }
            if (bad)
                body[LEN / 2] ^= 1;
            OLT_CHECK_EQ(ol_s3_body_end(&b), bad ? OL_S3_XAMZ_SHA256_MISMATCH : OL_S3_OK);
            if (!bad)
                OLT_CHECK_MEM(b.md5, md5, 16);
            OLT_CHECK_EQ(b.one_pass, path == 1);
            OLT_CHECK_EQ(b.sha_in_md5, path == 2 && ol_sha256_x2_fast());
            if (path == 1 && ol_md5sha_fast())
                OLT_CHECK(b.one_pass_bytes > LEN - 64);
            if (lane) {
                ol_md5_put(lane);
                ol_md5_put(peer);
                ctx.md5 = saved;
            }
        }
    uint64_t multi, single;
    ol_md5_set_stats(set, &multi, &single);
    OLT_CHECK(multi > 0);   /* the lane was hashed beside its peer */
    ctx.one_pass = false;
    ol_md5_set_free(set);
    free(body);
    free(other);
}

/* A one-pass signed payload moved to a lane of the MD5 set part-way (at
 * the first block edge of a slice, whatever the slices' sizes): the same
 * verdict and MD5 as hashed whole. */
OLT_TEST(s3_body_signed_payload_moves_to_a_lane)
{
    init_ctx();
    enum { LEN = 2 * OL_MD5_STAGE + 4321 };
    struct ol_s3_auth a;
    uint8_t md5[16];
    char *body = signed_body(LEN, 11, &a, md5);
    struct ol_md5_set *set = ol_md5_set_new(4);
    OLT_CHECK(set != NULL);
    static const size_t steps[] = {16384, 1000, 63, 65, 1};
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++)
        for (int bad = 0; bad < 2; bad++) {
            ctx.one_pass = true;
            struct ol_s3_body b;
            OLT_CHECK_EQ(ol_s3_body_begin(&b, &a, NULL, 0, LEN, &ctx), OL_S3_OK);
            if (bad)
                body[LEN - 10] ^= 1;
            struct ol_md5 *lane = NULL;
            size_t step = steps[k], moved_at = 0;
            for (size_t off = 0; off < LEN;) {
                size_t n = LEN - off < step ? LEN - off : step;
                const char *d;
                size_t dl;
                OLT_CHECK_EQ(ol_s3_body_feed(&b, body + off, n, &d, &dl), (long)n);
                if (!lane && off >= 100000) {   /* company came */
                    struct ol_md5 *l = ol_md5_get(set);
                    if (ol_s3_body_hash_onto(&b, l, d, dl)) {
                        lane = l;
                        moved_at = off;
                    } else {
                        ol_md5_put(l);
                        ol_s3_body_hash(&b, d, dl);
                    }
                } else {
                    OLT_CHECK(!lane || !ol_s3_body_hash_onto(&b, lane, d, dl));
                    ol_s3_body_hash(&b, d, dl);
                }
                off += n;
            }
            OLT_CHECK(lane != NULL);
            OLT_CHECK(moved_at < 100000 + 64 + step);
            OLT_CHECK(!b.one_pass);
            if (bad)
                body[LEN - 10] ^= 1;
            OLT_CHECK_EQ(ol_s3_body_end(&b), bad ? OL_S3_XAMZ_SHA256_MISMATCH : OL_S3_OK);
            if (!bad)
                OLT_CHECK_MEM(b.md5, md5, 16);
            ol_md5_put(lane);
        }
    ctx.one_pass = false;
    ol_md5_set_free(set);
    free(body);
}
