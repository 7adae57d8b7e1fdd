/*
 * test_store_layout.c - placement (set choice uniform, stable, keyed by the
 * deployment; pinned known answers), shard distribution, parity defaults
 * and storage classes, quorums, bucket and key rules, object directories.
 */
#include "olt.h"

#include "store/layout.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t id_a[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static const uint8_t id_b[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17};

static unsigned set_of(const uint8_t *id, const char *b, const char *k, unsigned nsets)
{
    return ol_layout_set_of(id, b, strlen(b), k, strlen(k), nsets);
}

OLT_TEST(store_layout_set_of_uniform)
{
    enum { KEYS = 100000, SETS = 8 };
    unsigned count[SETS] = {0}, moved = 0;
    char key[32];
    for (unsigned i = 0; i < KEYS; i++) {
        int n = snprintf(key, sizeof key, "photos/2024/img-%06u.jpg", i);
        unsigned s = ol_layout_set_of(id_a, "bucket", 6, key, (size_t)n, SETS);
        OLT_CHECK(s < SETS);
        OLT_CHECK_EQ(ol_layout_set_of(id_a, "bucket", 6, key, (size_t)n, SETS), s);
        count[s]++;
        moved += ol_layout_set_of(id_b, "bucket", 6, key, (size_t)n, SETS) != s;
    }
    /* Chi-square with 7 degrees of freedom: P(X > 29.9) = 1e-4. */
    double chi = 0, want = (double)KEYS / SETS;
    for (unsigned s = 0; s < SETS; s++)
        chi += (count[s] - want) * (count[s] - want) / want;
    if (chi > 29.9)
        olt_fail(__FILE__, __LINE__, "chi-square %.1f", chi);
    /* Another deployment places independently: about 7/8 of keys move. */
    OLT_CHECK(moved > KEYS * 85 / 100 && moved < KEYS * 90 / 100);
    /* One set: always 0. */
    OLT_CHECK_EQ(set_of(id_a, "b", "anything", 1), 0);
}

OLT_TEST(store_layout_hash_inputs)
{
    /* Bucket and key are length-separated: moving a byte across changes it. */
    OLT_CHECK(ol_layout_object_hash(id_a, "ab", 2, "c", 1) !=
              ol_layout_object_hash(id_a, "a", 1, "bc", 2));
    OLT_CHECK(ol_layout_object_hash(id_a, "ab", 2, "c", 1) ==
              ol_layout_object_hash(id_a, "ab", 2, "c", 1));
    OLT_CHECK(ol_layout_object_hash(id_a, "ab", 2, "c", 1) !=
              ol_layout_object_hash(id_b, "ab", 2, "c", 1));
    OLT_CHECK(ol_layout_object_hash(id_a, "ab", 2, "c", 1) !=
              ol_layout_object_hash(id_a, "ab", 2, "d", 1));
    /* The distribution hash is not the set hash: set and rotation independent. */
    unsigned same = 0;
    char key[16];
    for (unsigned i = 0; i < 1000; i++) {
        int n = snprintf(key, sizeof key, "k%u", i);
        uint64_t h = ol_layout_object_hash(id_a, "b", 1, key, (size_t)n);
        same += (unsigned)(h % 4) == ol_layout_set_of(id_a, "b", 1, key, (size_t)n, 4);
    }
    OLT_CHECK(same > 180 && same < 320); /* about 1/4 */
}

/*
 * Placement is on-disk format: these values must never change (a change
 * would lose every stored object). Computed once with xxHash 0.8.1.
 */
OLT_TEST(store_layout_known_answers)
{
    char dir[OL_LAYOUT_DIR_LEN];
    OLT_CHECK_EQ(set_of(id_a, "bucket", "key", 1000), 339);
    OLT_CHECK_EQ(set_of(id_b, "bucket", "key", 1000), 413);
    OLT_CHECK_EQ(ol_layout_object_hash(id_a, "bucket", 6, "key", 3), 0x656370db89cfc89cull);
    ol_layout_object_dir(id_a, "key", 3, dir);
    OLT_CHECK_STR(dir, "3f/3f156968b891a405d0559122457d516e");
    ol_layout_object_dir(id_a, "", 0, dir);
    OLT_CHECK_STR(dir, "e8/e8046494fdc18969801ffb5a3b7ba733");
}

OLT_TEST(store_layout_distribution)
{
    uint8_t out[OL_LAYOUT_MAX_SHARDS];
    for (unsigned n = 1; n <= 32; n++) {
        for (uint64_t h = 0; h < 3 * (uint64_t)n + 7; h++) {
            uint64_t hash = h * 0x9e3779b97f4a7c15ull;
            memset(out, 0xff, sizeof out);
            ol_layout_distribution(hash, n, out);
            uint64_t seen[4] = {0};
            for (unsigned p = 0; p < n; p++) {
                OLT_CHECK(out[p] < n);
                OLT_CHECK(!(seen[out[p] / 64] >> (out[p] % 64) & 1));
                seen[out[p] / 64] |= 1ull << (out[p] % 64);
            }
            OLT_CHECK_EQ(out[n], 0xff); /* nothing past nshards */
            /* A rotation: shard s at (start + s) % n. */
            unsigned start = (unsigned)(hash % n);
            for (unsigned s = 0; s < n; s++)
                OLT_CHECK_EQ(out[(start + s) % n], s);
        }
    }
    /* Every drive gets shard 0 for some objects. */
    unsigned first[8] = {0};
    char key[16];
    for (unsigned i = 0; i < 800; i++) {
        int len = snprintf(key, sizeof key, "o%u", i);
        ol_layout_distribution(ol_layout_object_hash(id_a, "b", 1, key, (size_t)len), 8, out);
        for (unsigned p = 0; p < 8; p++)
            if (out[p] == 0)
                first[p]++;
    }
    for (unsigned p = 0; p < 8; p++)
        OLT_CHECK(first[p] > 50);
    ol_layout_distribution(~0ull, 256, out);
    OLT_CHECK_EQ(out[255], 255 - (~0ull % 256)); /* 256 shards fit a uint8_t */
}

OLT_TEST(store_layout_default_parity)
{
    static const unsigned want[] = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4};
    for (unsigned n = 0; n < sizeof want / sizeof *want; n++)
        OLT_CHECK_EQ(ol_layout_default_parity(n), want[n]);
    OLT_CHECK_EQ(ol_layout_default_parity(32), 4);
    /* Never more than half a set. */
    for (unsigned n = 1; n <= 32; n++)
        OLT_CHECK(ol_layout_default_parity(n) <= n / 2);
}

static int cls(const char *c, unsigned dps, unsigned std, unsigned *m)
{
    return ol_layout_parity_for_class(c, strlen(c), dps, std, m);
}

OLT_TEST(store_layout_storage_class)
{
    unsigned m = 99;
    OLT_CHECK_EQ(cls("STANDARD", 8, 4, &m), 0);
    OLT_CHECK_EQ(m, 4);
    OLT_CHECK_EQ(cls("", 8, 4, &m), 0);
    OLT_CHECK_EQ(m, 4);
    OLT_CHECK_EQ(cls("REDUCED_REDUNDANCY", 8, 4, &m), 0);
    OLT_CHECK_EQ(m, 2);
    OLT_CHECK_EQ(cls("REDUCED_REDUNDANCY", 16, 8, &m), 0);
    OLT_CHECK_EQ(m, 4);
    OLT_CHECK_EQ(cls("REDUCED_REDUNDANCY", 6, 3, &m), 0);
    OLT_CHECK_EQ(m, 1);
    OLT_CHECK_EQ(cls("REDUCED_REDUNDANCY", 2, 1, &m), 0);
    OLT_CHECK_EQ(m, 1);
    OLT_CHECK_EQ(cls("REDUCED_REDUNDANCY", 1, 0, &m), 0);
    OLT_CHECK_EQ(m, 0); /* a 1-drive set has no parity to reduce */
    /* RRS never above standard, and at least 1 when standard is. */
    for (unsigned dps = 1; dps <= 32; dps++)
        for (unsigned std = 0; std <= dps / 2; std++) {
            OLT_CHECK_EQ(cls("REDUCED_REDUNDANCY", dps, std, &m), 0);
            OLT_CHECK(m <= std && (std == 0 || m >= 1));
        }
    m = 99;
    static const char *const bad[] = {"standard", "GLACIER", "STANDARD_IA", "REDUCED",
                                      "STANDARD ", "ONEZONE_IA", "DEEP_ARCHIVE"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        OLT_CHECK_EQ(cls(bad[i], 8, 4, &m), -EINVAL);
    OLT_CHECK_EQ(m, 99);
    OLT_CHECK_EQ(ol_layout_parity_for_class("STANDARD\0", 9, 8, 4, &m), -EINVAL);
    OLT_CHECK_EQ(ol_layout_parity_for_class("STANDARDX", 8, 8, 4, &m), 0); /* len counts */
    OLT_CHECK_EQ(cls("STANDARD", 8, 5, &m), -ERANGE);
    OLT_CHECK_EQ(cls("STANDARD", 0, 0, &m), -ERANGE);
}

OLT_TEST(store_layout_quorums)
{
    static const unsigned q[][4] = {
        /* n, m, write, read */
        {1, 0, 1, 1},  {2, 1, 2, 1},  {3, 1, 2, 2},   {4, 2, 3, 2},   {5, 2, 3, 3},
        {6, 3, 4, 3},  {8, 4, 5, 4},  {12, 4, 8, 8},  {16, 4, 12, 12}, {16, 8, 9, 8},
        {4, 0, 4, 4},
    };
    for (size_t i = 0; i < sizeof q / sizeof *q; i++) {
        OLT_CHECK_EQ(ol_layout_write_quorum(q[i][0], q[i][1]), q[i][2]);
        OLT_CHECK_EQ(ol_layout_read_quorum(q[i][0], q[i][1]), q[i][3]);
    }
}

OLT_TEST(store_layout_bucket_names)
{
    static const char *const good[] = {
        "abc", "my-bucket", "my.bucket.name", "a1b2c3", "123", "1.2.3", "1.2.3.4.5",
        "192.168.5.a", "bucket-s3alias-x", "xn-bucket", "sthree", "x--ol-s3x",
        "a-b-c", "ab--cd", "0ab", "ab0",
        "abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabc", /* 63 */
    };
    static const char *const bad[] = {
        "", "a", "ab",                                   /* too short */
        "abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcd", /* 64 */
        "MyBucket", "my_bucket", "my bucket", "bücket", "a/b", "a:b", "a\\b",
        "-abc", "abc-", ".abc", "abc.",                  /* start / end */
        "a..b", "a.-b", "a-.b",                          /* adjacent dots, DNS labels */
        "192.168.5.4", "1.1.1.1", "999.999.999.999", "0.0.0.0",  /* IP address form */
        "xn--bucket", "sthree-bucket", "sthree-configurator", "amzn-s3-demo-bucket",
        "bucket-s3alias", "bucket--ol-s3", "bucket--x-s3", "bucket--table-s3",
    };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        if (ol_layout_bucket_ok(good[i], strlen(good[i])) != 0)
            olt_fail(__FILE__, __LINE__, "good name refused: \"%s\"", good[i]);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (ol_layout_bucket_ok(bad[i], strlen(bad[i])) != -EINVAL)
            olt_fail(__FILE__, __LINE__, "bad name accepted: \"%s\"", bad[i]);
    /* A NUL inside, and len honoured (no NUL needed at the end). */
    OLT_CHECK_EQ(ol_layout_bucket_ok("abc\0def", 7), -EINVAL);
    OLT_CHECK_EQ(ol_layout_bucket_ok("abcdef-", 6), 0);
}

static int key(const char *k) { return ol_layout_key_ok(k, strlen(k)); }

OLT_TEST(store_layout_key_utf8)
{
    /* Valid: ASCII, 2-, 3- and 4-byte forms at their edges. */
    OLT_CHECK_EQ(key("photos/2024/a.jpg"), 0);
    OLT_CHECK_EQ(key("../../etc/passwd"), 0);
    OLT_CHECK_EQ(key("a/./b//c"), 0);
    OLT_CHECK_EQ(key("%2e%2e/x"), 0);
    OLT_CHECK_EQ(key("\x01\x1f\x7f"), 0);          /* controls are legal in S3 keys */
    OLT_CHECK_EQ(key("\xc2\x80"), 0);              /* U+0080 */
    OLT_CHECK_EQ(key("caf\xc3\xa9"), 0);           /* café */
    OLT_CHECK_EQ(key("\xdf\xbf"), 0);              /* U+07FF */
    OLT_CHECK_EQ(key("\xe0\xa0\x80"), 0);          /* U+0800 */
    OLT_CHECK_EQ(key("\xe6\x97\xa5\xe6\x9c\xac"), 0); /* 日本 */
    OLT_CHECK_EQ(key("\xed\x9f\xbf"), 0);          /* U+D7FF */
    OLT_CHECK_EQ(key("\xee\x80\x80"), 0);          /* U+E000 */
    OLT_CHECK_EQ(key("\xef\xbf\xbf"), 0);          /* U+FFFF */
    OLT_CHECK_EQ(key("\xf0\x90\x80\x80"), 0);      /* U+10000 */
    OLT_CHECK_EQ(key("\xf0\x9f\x98\x80"), 0);      /* 😀 */
    OLT_CHECK_EQ(key("\xf4\x8f\xbf\xbf"), 0);      /* U+10FFFF, the last */
    /* Invalid. */
    static const char *const bad[] = {
        "\xc0\xaf",             /* overlong '/' */
        "\xc1\xbf",             /* overlong */
        "\xe0\x80\xaf",         /* overlong '/' in 3 bytes */
        "\xe0\x9f\xbf",         /* overlong U+07FF */
        "\xf0\x80\x80\xaf",     /* overlong '/' in 4 bytes */
        "\xf0\x8f\xbf\xbf",     /* overlong U+FFFF */
        "\xed\xa0\x80",         /* surrogate U+D800 */
        "\xed\xbf\xbf",         /* surrogate U+DFFF */
        "\xf4\x90\x80\x80",     /* U+110000 */
        "\xf5\x80\x80\x80",     /* lead byte past U+10FFFF */
        "\xff", "\xfe",
        "\x80", "a\xbf",        /* lone continuation */
        "\xc3", "a\xc3",        /* truncated 2-byte */
        "\xe6\x97", "\xe6",     /* truncated 3-byte */
        "\xf0\x9f\x98",         /* truncated 4-byte */
        "\xc3\x28",             /* bad continuation */
        "\xe6\x28\xa5", "\xe6\x97\x28", "\xf0\x9f\x28\x80", "\xf0\x9f\x98\x28",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (key(bad[i]) != -EINVAL)
            olt_fail(__FILE__, __LINE__, "bad key %zu accepted", i);
}

OLT_TEST(store_layout_key_length)
{
    char *k = malloc(1100);
    OLT_CHECK(k);
    memset(k, 'a', 1100);
    OLT_CHECK_EQ(ol_layout_key_ok(k, 1), 0);
    OLT_CHECK_EQ(ol_layout_key_ok(k, 1024), 0);
    OLT_CHECK_EQ(ol_layout_key_ok(k, 1025), -ENAMETOOLONG);
    OLT_CHECK_EQ(ol_layout_key_ok(k, 0), -EINVAL);
    /* 1024 bytes of 4-byte characters: fine; the limit is bytes, not characters. */
    for (unsigned i = 0; i < 1024; i += 4)
        memcpy(k + i, "\xf0\x9f\x98\x80", 4);
    OLT_CHECK_EQ(ol_layout_key_ok(k, 1024), 0);
    OLT_CHECK_EQ(ol_layout_key_ok(k, 1023), -EINVAL); /* cut mid-character */
    k[500] = 0;
    OLT_CHECK_EQ(ol_layout_key_ok(k, 1024), -EINVAL);
    OLT_CHECK_EQ(ol_layout_key_ok("a\0b", 3), -EINVAL);
    OLT_CHECK_EQ(ol_layout_key_ok("\0", 1), -EINVAL);
    free(k);
}

static void check_dir(const char *d)
{
    OLT_CHECK_EQ(strlen(d), OL_LAYOUT_DIR_LEN - 1);
    for (unsigned i = 0; i < OL_LAYOUT_DIR_LEN - 1; i++) {
        char c = d[i];
        if (i == 2)
            OLT_CHECK(c == '/');
        else
            OLT_CHECK((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
    }
    OLT_CHECK(d[0] == d[3] && d[1] == d[4]); /* fan-out = the hash's first byte */
    OLT_CHECK(!strchr(d, '.'));
    OLT_CHECK(!strchr(d + 3, '/'));
}

OLT_TEST(store_layout_object_dir)
{
    static const char *const keys[] = {
        "../../etc/passwd", "..", ".", "/", "//", "a/./b", "a/../../b", "%2e%2e/x",
        "..\\..\\windows", "/absolute/path", "\xe2\x80\xae" "gpj.exe", "CON", "a\nb",
        "photos/2024/img.jpg",
    };
    char d[OL_LAYOUT_DIR_LEN], d2[OL_LAYOUT_DIR_LEN];
    char all[sizeof keys / sizeof *keys][OL_LAYOUT_DIR_LEN];
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        memset(d, 'x', sizeof d);
        ol_layout_object_dir(id_a, keys[i], strlen(keys[i]), d);
        check_dir(d);
        ol_layout_object_dir(id_a, keys[i], strlen(keys[i]), d2);
        OLT_CHECK_STR(d, d2); /* stable */
        ol_layout_object_dir(id_b, keys[i], strlen(keys[i]), d2);
        OLT_CHECK(strcmp(d, d2) != 0); /* keyed by the deployment */
        memcpy(all[i], d, sizeof d);
        for (size_t j = 0; j < i; j++)
            OLT_CHECK(strcmp(all[i], all[j]) != 0);
    }
    /* Fan-out is spread: all 256 first bytes show up over 10k keys. */
    unsigned char seen[256] = {0};
    char k[32];
    for (unsigned i = 0; i < 10000; i++) {
        int n = snprintf(k, sizeof k, "key-%u", i);
        ol_layout_object_dir(id_a, k, (size_t)n, d);
        check_dir(d);
        unsigned b = (unsigned)strtoul((char[3]){d[0], d[1], 0}, NULL, 16);
        seen[b] = 1;
    }
    for (unsigned b = 0; b < 256; b++)
        OLT_CHECK(seen[b]);
}
