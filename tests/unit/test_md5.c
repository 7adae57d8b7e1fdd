/*
 * test_md5.c - base/md5.h against OpenSSL's one-shot MD5: lone streams cut
 * at every size around a block, and sets with many streams fed in random
 * interleavings, random chunk sizes, ended, dropped or given back at random
 * moments (both kernels, 2 and 3 lanes, and the lone path taken), with and
 * without a SHA-256 companion (ol_md5_with_sha256) held to OpenSSL too.
 */
#include "olt.h"

#include "base/md5.h"
#include "base/sha256.h"

#include <openssl/evp.h>
#include <stdbool.h>
#include <stdlib.h>

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void ref_md5(const uint8_t *p, size_t n, uint8_t out[16])
{
    unsigned l = 16;
    OLT_CHECK(EVP_Digest(p, n, out, &l, EVP_md5(), NULL) == 1);
}

static void ref_sha256(const uint8_t *p, size_t n, uint8_t out[32])
{
    unsigned l = 32;
    OLT_CHECK(EVP_Digest(p, n, out, &l, EVP_sha256(), NULL) == 1);
}

OLT_TEST(md5_lone_stream_matches_openssl)
{
    uint8_t buf[600], want[16], got[16];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)rnd();
    for (size_t n = 0; n <= 300; n++)
        for (size_t cut = 0; cut <= n; cut += 1 + n / 7) {
            struct ol_md5 h = {0};
            SHA256_CTX c;
            ol_md5_init(&h);
            ol_sha256_init(&c);
            ol_md5_with_sha256(&h, &c);   /* a lone stream feeds it as it goes */
            ol_md5_update(&h, buf, cut);
            ol_md5_update(&h, buf + cut, n - cut);
            ol_md5_final(&h, got);
            ref_md5(buf, n, want);
            OLT_CHECK_MEM(got, want, 16);
            uint8_t sg[32], sw[32];
            ol_sha256_final(&c, sg);
            ref_sha256(buf, n, sw);
            OLT_CHECK_MEM(sg, sw, 32);
        }
    /* the RFC 1321 test suite value */
    struct ol_md5 h = {0};
    ol_md5_init(&h);
    ol_md5_update(&h, "message digest", 14);
    ol_md5_final(&h, got);
    static const uint8_t rfc[16] = {0xf9, 0x6b, 0x69, 0x7d, 0x7c, 0xb7, 0x93, 0x8d,
                                    0x52, 0x5a, 0x2f, 0x31, 0xaa, 0xf1, 0x61, 0xd0};
    OLT_CHECK_MEM(got, rfc, 16);
}

enum { LANES = 40, MAXLEN = 1000000 };

struct stream {
    bool on;
    bool sha;         /* with a SHA-256 companion (ol_md5_with_sha256) */
    size_t len;       /* bytes fed */
    size_t target;    /* ends at this length */
};

/* Random streams of random lengths fed in random pieces, on a set that
 * uses only one kernel (NULL: the fastest for each group), half of them
 * with a SHA-256 companion: every digest is OpenSSL's. */
static void random_streams(const char *kernel, bool x4)
{
    struct ol_md5_set *set = ol_md5_set_new(LANES);
    OLT_CHECK(set != NULL);
    if (ol_md5_set_x4(set, x4) != x4) {   /* no such kernel here */
        ol_md5_set_free(set);
        return;
    }
    if (kernel && !ol_md5_set_only(set, kernel)) {   /* not on this CPU */
        ol_md5_set_free(set);
        return;
    }
    uint8_t *src = malloc(MAXLEN + 64);
    OLT_CHECK(src != NULL);
    for (size_t i = 0; i < MAXLEN + 64; i++)
        src[i] = (uint8_t)rnd();
    struct stream s[LANES] = {{0}};
    struct ol_md5 *lane[LANES];
    static SHA256_CTX sha[LANES];
    for (unsigned i = 0; i < LANES; i++)
        OLT_CHECK((lane[i] = ol_md5_get(set)) != NULL);
    OLT_CHECK(ol_md5_get(set) == NULL);   /* all lent */
    size_t base[LANES];   /* each stream hashes src[base, base + len) */
    unsigned ended = 0, dropped = 0;
    while (ended < 400) {
        unsigned i = (unsigned)(rnd() % LANES);
        struct ol_md5 *h = lane[i];
        if (!s[i].on) {
            ol_md5_init(h);
            s[i].on = true;
            s[i].len = 0;
            s[i].sha = rnd() % 2;
            if (s[i].sha) {
                ol_sha256_init(&sha[i]);
                ol_md5_with_sha256(h, &sha[i]);
            }
            uint64_t r = rnd() % 4;   /* short, block-sized, long, longest */
            s[i].target = r == 0 ? rnd() % 200 : r == 1 ? 64 * (rnd() % 300)
                          : r == 2 ? rnd() % 200000 : rnd() % MAXLEN;
            base[i] = rnd() % 64;
            continue;
        }
        if (rnd() % 500 == 0) {
            if (rnd() % 2) {
                ol_md5_drop(h);
            } else {   /* given back and lent again */
                ol_md5_put(h);
                OLT_CHECK((lane[i] = ol_md5_get(set)) != NULL);
            }
            s[i].on = false;
            dropped++;
            continue;
        }
        size_t n = rnd() % 3 == 0 ? rnd() % 80 : rnd() % 40000;
        if (rnd() % 50 == 0)
            n = OL_MD5_STAGE + rnd() % (2 * OL_MD5_STAGE);   /* more than a stage */
        if (n > s[i].target - s[i].len)
            n = s[i].target - s[i].len;
        ol_md5_update(h, src + base[i] + s[i].len, n);
        s[i].len += n;
        if (s[i].len == s[i].target) {
            uint8_t got[16], want[16];
            ol_md5_final(h, got);
            ref_md5(src + base[i], s[i].len, want);
            if (memcmp(got, want, 16) != 0)
                olt_fail(__FILE__, __LINE__, "lane %u: digest of %zu bytes differs", i,
                         s[i].len);
            if (s[i].sha) {   /* whole once the MD5 is */
                uint8_t sg[32], sw[32];
                ol_sha256_final(&sha[i], sg);
                ref_sha256(src + base[i], s[i].len, sw);
                if (memcmp(sg, sw, 32) != 0)
                    olt_fail(__FILE__, __LINE__, "lane %u: SHA-256 of %zu bytes differs", i,
                             s[i].len);
            }
            s[i].on = false;
            ended++;
        }
    }
    OLT_CHECK(dropped > 0);
    uint64_t multi, single;
    ol_md5_set_stats(set, &multi, &single);
    for (unsigned i = 0; i < LANES; i++)
        ol_md5_put(lane[i]);
    OLT_CHECK(multi > 0 && single > 0);   /* both paths taken */
    free(src);
    ol_md5_set_free(set);
}

/* NULL: the set's own choice; each of the others where this CPU has it. */
static const char *const kernels[] = {NULL, "x2", "x3", "v8-avx2", "v8-avx512", "v16-avx512"};

OLT_TEST_T(md5_set_matches_openssl, 300)
{
    OLT_CHECK(ol_md5_set_new(0) == NULL);
    OLT_CHECK(ol_md5_set_new(1u << 20) == NULL);   /* staging offsets past int32 */
    struct ol_md5_set *set = ol_md5_set_new(4);
    OLT_CHECK(set != NULL);
    OLT_CHECK(!ol_md5_set_only(set, "x5"));       /* no such kernel */
    OLT_CHECK(!ol_md5_set_only(set, "v16-avx512")); /* 16 lanes in a set of 4 */
    OLT_CHECK(ol_md5_set_only(set, "x2"));        /* the scalar ones run anywhere */
    ol_md5_set_free(set);
    for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++) {
        random_streams(kernels[k], false);
        random_streams(kernels[k], true);   /* companions through md5sha.h's x4 */
    }
}

/* n lanes fed in step (2: pairs only; 64: groups of up to 16), with only
 * one kernel (NULL: the fastest for each group), each with a SHA-256
 * companion: every one of them ends right, nearly all blocks hashed with
 * company. */
static void in_step(unsigned n, const char *kernel, bool x4)
{
    struct ol_md5_set *set = ol_md5_set_new(n);
    OLT_CHECK(set != NULL);
    if (ol_md5_set_x4(set, x4) != x4) {
        ol_md5_set_free(set);
        return;
    }
    bool x2 = kernel && strcmp(kernel, "x2") == 0;
    if ((kernel && strcmp(kernel, "x3") == 0 && n < 3) ||
        (kernel && !ol_md5_set_only(set, kernel))) {
        ol_md5_set_free(set);   /* no group fits it / not on this CPU */
        return;
    }
    enum { LEN = 3 * OL_MD5_STAGE + 1000 };
    uint8_t *src = malloc(LEN + n);
    for (size_t i = 0; i < LEN + n; i++)
        src[i] = (uint8_t)rnd();
    struct ol_md5 *lane[64];
    static SHA256_CTX sha[64];
    for (unsigned i = 0; i < n; i++) {
        ol_md5_init(lane[i] = ol_md5_get(set));
        ol_sha256_init(&sha[i]);
        ol_md5_with_sha256(lane[i], &sha[i]);
    }
    for (size_t at = 0; at < LEN; at += 1000)
        for (unsigned i = 0; i < n; i++)
            ol_md5_update(lane[i], src + i + at, LEN - at < 1000 ? LEN - at : 1000);
    uint64_t multi, single;
    ol_md5_set_stats(set, &multi, &single);
    OLT_CHECK(multi >= (uint64_t)n * (LEN / 64 - OL_MD5_STAGE / 64) - single);
    /* pairs only for three lanes leave one out now and then */
    OLT_CHECK(single * (x2 && n == 3 ? 20 : 50) < multi);
    for (unsigned i = 0; i < n; i++) {
        uint8_t got[16], want[16];
        ol_md5_final(lane[i], got);
        ref_md5(src + i, LEN, want);
        OLT_CHECK_MEM(got, want, 16);
        uint8_t sg[32], sw[32];
        ol_sha256_final(&sha[i], sg);
        ref_sha256(src + i, LEN, sw);
        OLT_CHECK_MEM(sg, sw, 32);
    }
    free(src);
    ol_md5_set_free(set);
}

OLT_TEST(md5_set_lanes_in_step)
{
    for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++) {
        for (int x4 = 0; x4 < 2; x4++) {
            in_step(2, kernels[k], x4);
            in_step(3, kernels[k], x4);
            in_step(64, kernels[k], x4);
        }
    }
}

/* An ended stream waits for company: the next lanes' updates hash its
 * staged blocks together with theirs, and its digest is right. */
OLT_TEST(md5_ended_lane_waits_for_company)
{
    struct ol_md5_set *set = ol_md5_set_new(4);
    OLT_CHECK(set != NULL);
    enum { LA = OL_MD5_STAGE - 100, LB = OL_MD5_STAGE + 5000 };
    uint8_t *a = malloc(LA), *b = malloc(LB);
    for (size_t i = 0; i < LA; i++)
        a[i] = (uint8_t)rnd();
    for (size_t i = 0; i < LB; i++)
        b[i] = (uint8_t)rnd();
    struct ol_md5 *x = ol_md5_get(set), *y = ol_md5_get(set);
    ol_md5_init(x);
    ol_md5_init(y);
    OLT_CHECK(ol_md5_company_coming(x));       /* y is lent and not ended */
    ol_md5_update(x, a, LA);
    OLT_CHECK(!ol_md5_end(x));                 /* alone: its blocks wait */
    OLT_CHECK(!ol_md5_ready(x));
    OLT_CHECK(ol_md5_company_coming(x));
    OLT_CHECK(!ol_md5_company_coming(y));      /* x has ended */
    uint64_t multi, single;
    ol_md5_set_stats(set, &multi, &single);
    OLT_CHECK_EQ(multi, 0);
    OLT_CHECK_EQ(single, 0);
    /* y's bytes arrive in pieces: each is hashed with x's waiting blocks */
    size_t at = 0;
    while (!ol_md5_ready(x)) {
        OLT_CHECK(at < LB);
        size_t n = LB - at < 16384 ? LB - at : 16384;
        ol_md5_update(y, b + at, n);
        at += n;
    }
    OLT_CHECK(at <= LA + 16384);               /* drained as fast as y arrived */
    ol_md5_set_stats(set, &multi, &single);
    OLT_CHECK_EQ(single, 0);
    OLT_CHECK_EQ(multi, 2 * (uint64_t)(LA / 64));
    uint8_t got[16], want[16];
    ol_md5_final(x, got);
    ref_md5(a, LA, want);
    OLT_CHECK_MEM(got, want, 16);
    ol_md5_put(x);
    OLT_CHECK(!ol_md5_company_coming(y));      /* no other lane lent */
    ol_md5_update(y, b + at, LB - at);
    OLT_CHECK(!ol_md5_end(y));
    ol_md5_final(y, got);                      /* gives up waiting: alone */
    ref_md5(b, LB, want);
    OLT_CHECK_MEM(got, want, 16);
    ol_md5_set_stats(set, &multi, &single);
    OLT_CHECK(single > 0);
    /* a waiting lane given back leaves no trace; an ending lane is hashed
     * at once with what another one has staged */
    struct ol_md5 *u = ol_md5_get(set), *v = ol_md5_get(set), *w = ol_md5_get(set);
    ol_md5_init(u);
    ol_md5_init(v);
    ol_md5_init(w);
    ol_md5_update(w, b, 4096);
    OLT_CHECK(!ol_md5_end(w));
    ol_md5_put(w);                             /* its client went away */
    ol_md5_update(u, a, 70000);
    ol_md5_update(v, b, 90000);
    ol_md5_set_stats(set, &multi, &single);
    uint64_t m0 = multi, s0 = single;
    OLT_CHECK(ol_md5_end(u));                  /* hashed with v's blocks */
    ol_md5_set_stats(set, &multi, &single);
    OLT_CHECK_EQ(multi - m0, 2 * (uint64_t)(70000 / 64));
    OLT_CHECK_EQ(single, s0);
    OLT_CHECK(!ol_md5_end(v));                 /* the rest of v: no company */
    ol_md5_set_stats(set, &multi, &single);
    OLT_CHECK_EQ(single, s0);
    ol_md5_final(u, got);
    ref_md5(a, 70000, want);
    OLT_CHECK_MEM(got, want, 16);
    ol_md5_final(v, got);
    ref_md5(b, 90000, want);
    OLT_CHECK_MEM(got, want, 16);
    ol_md5_put(u);
    ol_md5_put(v);
    ol_md5_put(y);
    free(a);
    free(b);
    ol_md5_set_free(set);
}
