/*
 * test_s3_awschunked.c - aws-chunked bodies: AWS's published streaming
 * example (signatures included), the trailer modes, every way a body can
 * be wrong, and input split at every possible place; chunks hashed by the
 * decoder (in pairs or one by one) or by the caller, all to one verdict.
 */
#include "olt.h"

#include "base/md5sha.h"
#include "base/sha256.h"
#include "s3/awschunked.h"

#include <errno.h>
#include <stdlib.h>

#include <openssl/evp.h>

#define SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define DATE "20130524T000000Z"
#define SCOPE "20130524/us-east-1/s3/aws4_request"
#define SEED "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"

static uint8_t key[32], seed[32];

static void setup(void)
{
    struct ol_sigv4 a = {0};
    memcpy(a.scope_date, "20130524", 9);
    a.region = "us-east-1";
    a.region_len = 9;
    a.service = "s3";
    a.service_len = 2;
    OLT_CHECK_EQ(ol_sigv4_signing_key(SECRET, strlen(SECRET), &a, key), 0);
    OLT_CHECK_EQ(ol_sigv4_from_hex(SEED, 64, seed), 0);
}

static char *body;
static size_t body_len;

static void add(const void *p, size_t n)
{
    body = realloc(body, body_len + n);
    memcpy(body + body_len, p, n);
    body_len += n;
}

static void adds(const char *s) { add(s, strlen(s)); }

/* AWS's example: 65536 + 1024 bytes of 'a', three signed chunks */
static void aws_example(void)
{
    static char a[65536];
    memset(a, 'a', sizeof a);
    body_len = 0;
    adds("10000;chunk-signature=ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648\r\n");
    add(a, 65536);
    adds("\r\n400;chunk-signature=0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497\r\n");
    add(a, 1024);
    adds("\r\n0;chunk-signature=b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9\r\n\r\n");
}

/* One decoding of body in pieces of `step` bytes (0: random 1..300), with
 * chunks hashed in pairs (stage), one by one, or (outside) by the caller
 * with the MD5 of the data in one pass (base/md5sha.h), that MD5 then
 * checked against OpenSSL's. */
static int decode1(int mode, uint64_t expect, size_t step, char *out, size_t *out_len,
                   struct ol_awsc *st, uint8_t *stage, bool outside)
{
    ol_awsc_init(st, mode, key, DATE, SCOPE, strlen(SCOPE), seed, expect, stage);
    struct ol_md5 md5 = {0};
    ol_md5_init(&md5);
    outside = outside && mode != OL_AWSC_UNSIGNED_TRAILER;
    if (outside)
        ol_awsc_hash_outside(st);
    size_t off = 0, o = 0;
    int rc = 0;
    while (off < body_len) {
        size_t n = step ? step : 1 + (size_t)(rand() % 300);
        if (n > body_len - off)
            n = body_len - off;
        while (n > 0) {
            const char *d;
            size_t dl;
            long used = ol_awsc_feed(st, body + off, n, &d, &dl);
            if (used < 0) {
                rc = (int)used;
                goto out;
            }
            OLT_CHECK(used > 0 && (size_t)used <= n);
            OLT_CHECK(dl == 0 || (d >= body + off && d + dl <= body + off + used));
            memcpy(out + o, d, dl);
            if (outside && dl)
                ol_md5_sha256_update(&md5, ol_awsc_chunk_sha(st), d, dl);
            o += dl;
            off += (size_t)used;
            n -= (size_t)used;
        }
    }
    rc = ol_awsc_finish(st);
    if (rc == 0 && outside) {
        uint8_t got[16], want[16];
        unsigned l = 16;
        ol_md5_final(&md5, got);
        OLT_CHECK(EVP_Digest(out, o, want, &l, EVP_md5(), NULL) == 1);
        OLT_CHECK_MEM(got, want, 16);
    }
out:
    *out_len = o;
    return rc;
}

/* Decodes body three ways (staged chunk pairs, one by one, hashed by the
 * caller): they must agree on the verdict, and on the data when the body
 * is good. Returns the first error or finish()'s answer; *out gets the
 * data. */
static int decode(int mode, uint64_t expect, size_t step, char *out, size_t *out_len,
                  struct ol_awsc *st)
{
    static uint8_t *stage;
    static char *alone;
    static size_t alone_cap;
    if (!stage)
        stage = malloc(OL_AWSC_STAGE);
    if (alone_cap < body_len + 1) {
        alone_cap = body_len + 1;
        alone = realloc(alone, alone_cap);
    }
    unsigned seed0 = (unsigned)rand();
    size_t alone_len;
    srand(seed0);   /* the same random pieces both times */
    int rc_alone = decode1(mode, expect, step, alone, &alone_len, st, NULL, false);
    srand(seed0);
    int rc_outside = decode1(mode, expect, step, out, out_len, st, NULL, true);
    OLT_CHECK_EQ(rc_outside, rc_alone);
    if (rc_outside == 0)
        OLT_CHECK(*out_len == alone_len && memcmp(out, alone, alone_len) == 0);
    srand(seed0);
    int rc = decode1(mode, expect, step, out, out_len, st, stage, false);
    OLT_CHECK_EQ(rc, rc_alone);
    if (rc == 0)
        OLT_CHECK(*out_len == alone_len && memcmp(out, alone, alone_len) == 0);
    return rc;
}

OLT_TEST(s3_awschunked_aws_signed_example)
{
    setup();
    aws_example();
    static char out[70000];
    size_t n;
    struct ol_awsc st;
    for (size_t step = 0; step < 4; step++) {
        OLT_CHECK_EQ(decode(OL_AWSC_SIGNED, 66560, step == 3 ? body_len : step, out, &n, &st), 0);
        OLT_CHECK_EQ(n, 66560);
        for (size_t i = 0; i < n; i++)
            OLT_CHECK(out[i] == 'a');
    }
    OLT_CHECK_EQ(decode(OL_AWSC_SIGNED, UINT64_MAX, 0, out, &n, &st), 0);
    OLT_CHECK_EQ(ol_awsc_mode_of("STREAMING-AWS4-HMAC-SHA256-PAYLOAD", 34), OL_AWSC_SIGNED);
    OLT_CHECK_EQ(ol_awsc_mode_of("UNSIGNED-PAYLOAD", 16), 0);
}

OLT_TEST(s3_awschunked_signed_body_errors)
{
    setup();
    static char out[70000];
    size_t n;
    struct ol_awsc st;
    aws_example();
    body[100] = 'b';                                   /* a data byte */
    OLT_CHECK_EQ(decode(OL_AWSC_SIGNED, 66560, 0, out, &n, &st), -EACCES);
    aws_example();
    body[30] = body[30] == '0' ? '1' : '0';            /* a chunk signature */
    OLT_CHECK_EQ(decode(OL_AWSC_SIGNED, 66560, 0, out, &n, &st), -EACCES);
    aws_example();
    OLT_CHECK_EQ(decode(OL_AWSC_SIGNED, 66561, 0, out, &n, &st), -EMSGSIZE);
    OLT_CHECK_EQ(decode(OL_AWSC_SIGNED, 1000, 0, out, &n, &st), -EMSGSIZE);
    size_t full = body_len;
    body_len = full - 2;                               /* truncated */
    OLT_CHECK_EQ(decode(OL_AWSC_SIGNED, 66560, 0, out, &n, &st), -EBADMSG);
    body_len = full;
    adds("x");                                         /* trailing junk */
    OLT_CHECK_EQ(decode(OL_AWSC_SIGNED, 66560, 0, out, &n, &st), -EBADMSG);
    aws_example();
    body[5] = '\n';                                    /* bare LF in a header */
    OLT_CHECK_EQ(decode(OL_AWSC_SIGNED, 66560, 0, out, &n, &st), -EBADMSG);
    body_len = 0;
    adds("10000000000000000;chunk-signature=ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade"
         "35a65485a288648\r\n");
    OLT_CHECK_EQ(decode(OL_AWSC_SIGNED, UINT64_MAX, 0, out, &n, &st), -EBADMSG);
    body_len = 0;
    for (int i = 0; i < 300; i++)
        adds("1");
    OLT_CHECK_EQ(decode(OL_AWSC_SIGNED, UINT64_MAX, 0, out, &n, &st), -E2BIG);
    body_len = 0;
    adds("5\r\nhello\r\n0\r\n\r\n");                  /* unsigned framing in signed mode */
    OLT_CHECK_EQ(decode(OL_AWSC_SIGNED, 5, 0, out, &n, &st), -EBADMSG);
    /* the data CRLF missing */
    body_len = 0;
    adds("400;chunk-signature=0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497\r\n");
    for (int i = 0; i < 1024; i++)
        adds("a");
    adds("XX");
    OLT_CHECK_EQ(decode(OL_AWSC_SIGNED, UINT64_MAX, 0, out, &n, &st), -EBADMSG);
}

OLT_TEST(s3_awschunked_unsigned_trailer)
{
    setup();
    static char out[4096];
    size_t n;
    struct ol_awsc st;
    body_len = 0;   /* the shape botocore sends */
    adds("5\r\nhello\r\n6\r\n world\r\n0\r\nx-amz-checksum-crc32:DUoRhQ==\r\n\r\n");
    for (size_t step = 0; step < 3; step++) {
        OLT_CHECK_EQ(decode(OL_AWSC_UNSIGNED_TRAILER, 11, step, out, &n, &st), 0);
        OLT_CHECK_EQ(n, 11);
        OLT_CHECK(memcmp(out, "hello world", 11) == 0);
        size_t vl;
        const char *v = ol_awsc_trailer(&st, "x-amz-checksum-crc32", &vl);
        OLT_CHECK(v && vl == 8 && memcmp(v, "DUoRhQ==", 8) == 0);
        OLT_CHECK(ol_awsc_trailer(&st, "x-amz-checksum-crc32c", &vl) == NULL);
    }
    body_len = 0;
    adds("5\r\nhello\r\n0\r\n");                      /* no final empty line */
    OLT_CHECK_EQ(decode(OL_AWSC_UNSIGNED_TRAILER, 5, 0, out, &n, &st), -EBADMSG);
    body_len = 0;
    adds("5;chunk-signature=x\r\nhello\r\n0\r\n\r\n");
    OLT_CHECK_EQ(decode(OL_AWSC_UNSIGNED_TRAILER, 5, 0, out, &n, &st), -EBADMSG);
    body_len = 0;
    adds("0\r\n");
    for (int i = 0; i < 9; i++)
        adds("x-amz-a:b\r\n");
    adds("\r\n");
    OLT_CHECK_EQ(decode(OL_AWSC_UNSIGNED_TRAILER, 0, 0, out, &n, &st), -E2BIG);
    body_len = 0;
    adds("0\r\nbad name:v\r\n\r\n");
    OLT_CHECK_EQ(decode(OL_AWSC_UNSIGNED_TRAILER, 0, 0, out, &n, &st), -EBADMSG);
}

/* A signed-trailer body built with the signer: two chunks, a checksum
 * trailer, the trailer signature. */
static void signed_trailer_body(const char *trailer_value, int sign_trailer)
{
    uint8_t prev[32], h[32], sig[32];
    char hex[65] = {0}, line[256];
    memcpy(prev, seed, 32);
    const char *chunks[] = {"hello", " world", ""};
    body_len = 0;
    for (int i = 0; i < 3; i++) {
        size_t cl = strlen(chunks[i]);
        EVP_Digest(chunks[i], cl, h, NULL, EVP_sha256(), NULL);
        ol_sigv4_chunk_sign(key, DATE, SCOPE, strlen(SCOPE), prev, h, sig);
        ol_sigv4_hex(sig, hex);
        snprintf(line, sizeof line, "%zx;chunk-signature=%s\r\n", cl, hex);
        adds(line);
        if (cl) {
            adds(chunks[i]);
            adds("\r\n");
        }
        memcpy(prev, sig, 32);
    }
    char canon[128];
    snprintf(canon, sizeof canon, "x-amz-checksum-crc32c:%s\n", "yZRlqg==");
    snprintf(line, sizeof line, "x-amz-checksum-crc32c:%s\r\n", trailer_value);
    adds(line);
    if (sign_trailer) {
        ol_sigv4_trailer_sign(key, DATE, SCOPE, strlen(SCOPE), prev, canon, strlen(canon), sig);
        ol_sigv4_hex(sig, hex);
        snprintf(line, sizeof line, "x-amz-trailer-signature:%s\r\n", hex);
        adds(line);
    }
    adds("\r\n");
}

OLT_TEST(s3_awschunked_signed_trailer)
{
    setup();
    static char out[4096];
    size_t n;
    struct ol_awsc st;
    signed_trailer_body("yZRlqg==", 1);
    for (size_t step = 0; step < 3; step++) {
        OLT_CHECK_EQ(decode(OL_AWSC_SIGNED_TRAILER, 11, step, out, &n, &st), 0);
        OLT_CHECK_EQ(n, 11);
        size_t vl;
        const char *v = ol_awsc_trailer(&st, "x-amz-checksum-crc32c", &vl);
        OLT_CHECK(v && vl == 8 && memcmp(v, "yZRlqg==", 8) == 0);
    }
    signed_trailer_body("AAAAAA==", 1);            /* trailer changed after signing */
    OLT_CHECK_EQ(decode(OL_AWSC_SIGNED_TRAILER, 11, 0, out, &n, &st), -EACCES);
    signed_trailer_body("yZRlqg==", 0);            /* no trailer signature */
    OLT_CHECK_EQ(decode(OL_AWSC_SIGNED_TRAILER, 11, 0, out, &n, &st), -EBADMSG);
    signed_trailer_body("yZRlqg==", 1);
    OLT_CHECK_EQ(decode(OL_AWSC_SIGNED, 11, 0, out, &n, &st), -EBADMSG);  /* no trailer allowed */
}

/* A signed body of chunks of the given sizes (data: a pattern from the
 * offset), signed with the signer; returns the decoded length. */
static size_t signed_body(const size_t *sizes, int n)
{
    uint8_t prev[32], h[32], sig[32];
    char hex[65] = {0}, line[256];
    memcpy(prev, seed, 32);
    body_len = 0;
    size_t total = 0;
    static char *data;
    for (int i = 0; i <= n; i++) {
        size_t cl = i < n ? sizes[i] : 0;
        data = realloc(data, cl + 1);
        for (size_t j = 0; j < cl; j++)
            data[j] = (char)((total + j) * 2654435761u >> 13);
        EVP_Digest(data, cl, h, NULL, EVP_sha256(), NULL);
        ol_sigv4_chunk_sign(key, DATE, SCOPE, strlen(SCOPE), prev, h, sig);
        ol_sigv4_hex(sig, hex);
        snprintf(line, sizeof line, "%zx;chunk-signature=%s\r\n", cl, hex);
        adds(line);
        add(data, cl);
        if (cl)
            adds("\r\n");
        memcpy(prev, sig, 32);
        total += cl;
    }
    adds("\r\n");
    return total;
}

/* Chunks of every shape the pairs meet: 64 KiB (minio-go) and 128 KiB
 * (the AWS SDKs for Java), longer ones than the stage holds, pairs of
 * unequal length (the waiting one runs out first, or the next one ends
 * first), sizes that are not whole blocks, single bytes, and odd counts
 * (the last chunk waits and is hashed alone), fed whole, in 16 KiB and in
 * random small pieces (blocks cut by the input); the pairs really taken
 * where the CPU has the kernel; then a flipped data byte in each chunk in
 * turn must fail the body. */
OLT_TEST(s3_awschunked_signed_chunk_pairs)
{
    setup();
    static const size_t shapes[][6] = {
        {65536, 65536, 65536, 65536, 0},
        {131072, 131072, 131072, 0},
        {65536, 65536, 65536, 1000, 0},
        {300001, 65536, 200000, 131073, 7, 0},
        {1, 63, 64, 65, 131071, 0},
        {65536, 0},
        {500000, 0},
    };
    size_t sizes[6];
    int n;
    static char out[1 << 20];
    size_t got;
    struct ol_awsc st;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (n = 0; shapes[s][n]; n++)
            sizes[n] = shapes[s][n];
        size_t total = signed_body(sizes, n);
        for (size_t step = 0; step < 3; step++) {
            size_t st_len = step == 0 ? 16384 : step == 1 ? 0 : body_len;
            OLT_CHECK_EQ(decode(OL_AWSC_SIGNED, total, st_len, out, &got, &st), 0);
            OLT_CHECK_EQ(got, total);
            if (s == 0 && ol_sha256_x2_fast())   /* half of each pair beside the other */
                OLT_CHECK_EQ(st.paired, 2 * 65536);
            for (size_t j = 0; j < got; j++)
                if (out[j] != (char)(j * 2654435761u >> 13)) {
                    OLT_CHECK(0 && "data changed");
                    break;
                }
        }
        /* one flipped byte in chunk i: the decoder refuses the body */
        size_t at = 0;
        for (int i = 0; i < n; i++) {
            at = (size_t)(strstr(body + at, "chunk-signature=") - body);
            at = (size_t)(strstr(body + at, "\r\n") - body) + 2;   /* chunk i's data */
            body[at + sizes[i] / 2] ^= 1;
            OLT_CHECK_EQ(decode(OL_AWSC_SIGNED, total, 16384, out, &got, &st), -EACCES);
            body[at + sizes[i] / 2] ^= 1;
            at += sizes[i];
        }
    }
}
