/*
 * test_s3_checksum.c - flexible checksums: catalogue check values, the
 * values S3 documents for "hello world", streaming == one shot, CRC-64/NVME
 * against its bitwise twin, base64 round trips and refusals.
 */
#include "olt.h"

#include "s3/checksum.h"

#include <errno.h>
#include <stdlib.h>

static void b64_of(int algo, const char *s, char *out)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    struct ol_ck c;
    uint8_t raw[OL_CK_MAX_RAW];
    OLT_CHECK_EQ(ol_ck_init(&c, algo, md), 0);
    ol_ck_update(&c, s, strlen(s));
    size_t n = ol_ck_final(&c, raw);
    OLT_CHECK_EQ(n, ol_ck_raw_size(algo));
    ol_ck_b64(raw, n, out);
    EVP_MD_CTX_free(md);
}

OLT_TEST(s3_checksum_known_values)
{
    /* CRC catalogue check values ("123456789") */
    OLT_CHECK(ol_crc64nvme(0, "123456789", 9) == 0xae8b14860a799888ull);
    OLT_CHECK(ol_crc64nvme_ref(0, "123456789", 9) == 0xae8b14860a799888ull);
    char b[OL_CK_MAX_B64 + 1];
    b64_of(OL_CK_CRC32, "123456789", b);
    OLT_CHECK_STR(b, "y/Q5Jg==");           /* 0xcbf43926 */
    b64_of(OL_CK_CRC32C, "123456789", b);
    OLT_CHECK_STR(b, "4waSgw==");           /* 0xe3069283 */
    b64_of(OL_CK_CRC32, "hello world", b);
    OLT_CHECK_STR(b, "DUoRhQ==");
    b64_of(OL_CK_CRC32C, "hello world", b);
    OLT_CHECK_STR(b, "yZRlqg==");
    b64_of(OL_CK_SHA1, "abc", b);
    OLT_CHECK_STR(b, "qZk+NkcGgWq6PiVxeFDCbJzQ2J0=");
    b64_of(OL_CK_SHA256, "", b);
    OLT_CHECK_STR(b, "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
    b64_of(OL_CK_CRC64NVME, "123456789", b);
    OLT_CHECK_STR(b, "rosUhgp5mIg=");
}

OLT_TEST(s3_checksum_streaming_equals_one_shot)
{
    static uint8_t buf[100003];
    srand(7);
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)rand();
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    for (int algo = 1; algo < OL_CK_COUNT; algo++) {
        struct ol_ck one, many;
        uint8_t r1[OL_CK_MAX_RAW], r2[OL_CK_MAX_RAW];
        OLT_CHECK_EQ(ol_ck_init(&one, algo, md), 0);
        ol_ck_update(&one, buf, sizeof buf);
        size_t n1 = ol_ck_final(&one, r1);
        OLT_CHECK_EQ(ol_ck_init(&many, algo, md), 0);
        for (size_t off = 0; off < sizeof buf;) {
            size_t n = 1 + (size_t)(rand() % 5000);
            if (n > sizeof buf - off)
                n = sizeof buf - off;
            ol_ck_update(&many, buf + off, n);
            off += n;
        }
        size_t n2 = ol_ck_final(&many, r2);
        OLT_CHECK_EQ(n1, n2);
        OLT_CHECK(memcmp(r1, r2, n1) == 0);
    }
    EVP_MD_CTX_free(md);
    /* slice-by-8 against the bitwise twin on every length and alignment */
    for (size_t off = 0; off < 8; off++)
        for (size_t n = 0; n < 300; n++)
            OLT_CHECK(ol_crc64nvme(0x1234, buf + off, n) == ol_crc64nvme_ref(0x1234, buf + off, n));
}

OLT_TEST(s3_checksum_names_and_base64)
{
    OLT_CHECK_EQ(ol_ck_algo_of_header("x-amz-checksum-crc64nvme", 24), OL_CK_CRC64NVME);
    OLT_CHECK_EQ(ol_ck_algo_of_header("X-Amz-Checksum-SHA256", 21), OL_CK_SHA256);
    OLT_CHECK_EQ(ol_ck_algo_of_header("x-amz-checksum-md5", 18), OL_CK_NONE);
    OLT_CHECK_EQ(ol_ck_algo_of_name("crc32c", 6), OL_CK_CRC32C);
    OLT_CHECK_EQ(ol_ck_algo_of_name("CRC", 3), OL_CK_NONE);
    OLT_CHECK_STR(ol_ck_name(OL_CK_CRC64NVME), "CRC64NVME");
    uint8_t raw[OL_CK_MAX_RAW];
    OLT_CHECK_EQ(ol_ck_from_b64("DUoRhQ==", 8, 4, raw), 0);
    OLT_CHECK(raw[0] == 0x0d && raw[1] == 0x4a && raw[2] == 0x11 && raw[3] == 0x85);
    OLT_CHECK_EQ(ol_ck_from_b64("DUoRhQ==", 8, 8, raw), -EINVAL);    /* wrong size */
    OLT_CHECK_EQ(ol_ck_from_b64("DUoRhQ=", 7, 4, raw), -EINVAL);
    OLT_CHECK_EQ(ol_ck_from_b64("DU!RhQ==", 8, 4, raw), -EINVAL);
    OLT_CHECK_EQ(ol_ck_from_b64("", 0, 4, raw), -EINVAL);
    OLT_CHECK_EQ(ol_ck_from_b64("rosUhgp5mIg=", 12, 8, raw), 0);
    OLT_CHECK_EQ(ol_ck_init(&(struct ol_ck){0}, OL_CK_SHA1, NULL), -EINVAL);
    OLT_CHECK_EQ(ol_ck_init(&(struct ol_ck){0}, 99, NULL), -EINVAL);
}

/* The CRC of a whole buffer through ol_ck, as a number. */
static uint64_t crc_of(int algo, const uint8_t *p, size_t n)
{
    struct ol_ck c;
    OLT_CHECK_EQ(ol_ck_init(&c, algo, NULL), 0);
    ol_ck_update(&c, p, n);
    uint8_t raw[OL_CK_MAX_RAW];
    ol_ck_final(&c, raw);
    return ol_ck_crc_load(algo, raw);
}

OLT_TEST(s3_checksum_crc_combine_matches_the_concatenation)
{
    static const int crcs[] = {OL_CK_CRC32, OL_CK_CRC32C, OL_CK_CRC64NVME};
    size_t cap = 6u << 20;
    uint8_t *buf = malloc(cap);
    OLT_CHECK(buf != NULL);
    srand(11);
    for (size_t i = 0; i < cap; i++)
        buf[i] = (uint8_t)rand();
    OLT_CHECK(!ol_ck_is_crc(OL_CK_SHA256) && !ol_ck_is_crc(OL_CK_NONE) &&
              ol_ck_is_crc(OL_CK_CRC64NVME));
    for (size_t a = 0; a < sizeof crcs / sizeof crcs[0]; a++) {
        int algo = crcs[a];
        /* fast == reference twin, on random values and lengths 0..4099 */
        for (int t = 0; t < 300; t++) {
            uint64_t x = (uint64_t)rand() << 33 ^ (uint64_t)rand() << 11 ^ (uint64_t)rand();
            uint64_t y = (uint64_t)rand() << 31 ^ (uint64_t)rand();
            if (algo != OL_CK_CRC64NVME)
                x &= 0xffffffffu, y &= 0xffffffffu;
            uint64_t len = t < 20 ? (uint64_t)t : (uint64_t)(rand() % 4100);
            OLT_CHECK(ol_ck_crc_combine(algo, x, y, len) ==
                      ol_ck_crc_combine_ref(algo, x, y, len));
        }
        /* crc(A) combined with crc(B) is crc(A || B): random splits, an
         * empty side, and 5 MiB parts like a multipart upload's */
        for (int t = 0; t < 40; t++) {
            size_t n = t < 4 ? cap : 1 + (size_t)rand() % 200000;
            size_t cut = t == 0 ? 0 : t == 1 ? n : t == 2 ? (5u << 20) : (size_t)rand() % (n + 1);
            uint64_t whole = crc_of(algo, buf, n);
            uint64_t ca = crc_of(algo, buf, cut), cb = crc_of(algo, buf + cut, n - cut);
            OLT_CHECK(ol_ck_crc_combine(algo, ca, cb, n - cut) == whole);
        }
        /* three parts folded left to right, as Complete does */
        size_t p1 = 5u << 20, p2 = 700001, p3 = cap - p1 - p2 > 3 ? 3 : 1;
        uint64_t c = crc_of(algo, buf, p1);
        c = ol_ck_crc_combine(algo, c, crc_of(algo, buf + p1, p2), p2);
        c = ol_ck_crc_combine(algo, c, crc_of(algo, buf + p1 + p2, p3), p3);
        OLT_CHECK(c == crc_of(algo, buf, p1 + p2 + p3));
        /* raw bytes <-> number */
        uint8_t raw[OL_CK_MAX_RAW];
        ol_ck_crc_store(algo, c, raw);
        OLT_CHECK(ol_ck_crc_load(algo, raw) == c);
    }
    OLT_CHECK(ol_ck_crc_combine(OL_CK_SHA1, 1, 2, 3) == 0);
    free(buf);
}
