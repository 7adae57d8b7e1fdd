/*
 * test_sha256.c - base/sha256.h against OpenSSL's one-shot SHA-256: two
 * streams hashed side by side at every length around a block, after a
 * partial block (the pair falls back to one by one), of unequal lengths
 * and from unaligned addresses, and the pair kernel really taken where
 * the CPU has it.
 */
#include "olt.h"

#include "base/sha256.h"

#include <openssl/evp.h>
#include <stdlib.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void ref(const uint8_t *p, size_t n, uint8_t out[32])
{
    unsigned l = 32;
    OLT_CHECK(EVP_Digest(p, n, out, &l, EVP_sha256(), NULL) == 1);
}

/* a = pre bytes then na (pair), b = pre bytes then nb (pair), then each
 * gets `post` more alone. */
static void check(const uint8_t *pa, const uint8_t *pb, size_t pre, size_t na, size_t nb,
                  size_t post)
{
    SHA256_CTX a, b;
    uint8_t ga[32], gb[32], wa[32], wb[32];
    ol_sha256_init(&a);
    ol_sha256_init(&b);
    ol_sha256_update(&a, pa, pre);
    ol_sha256_update(&b, pb, pre);
    size_t both = ol_sha256_update2(&a, pa + pre, na, &b, pb + pre, nb);
    OLT_CHECK(both <= na && both <= nb && both % 64 == 0);
    if (pre % 64 == 0 && na >= 64 && nb >= 64)
        OLT_CHECK(ol_sha256_x2_fast() ? both == (na < nb ? na : nb) / 64 * 64 : both == 0);
    if (pre % 64)
        OLT_CHECK_EQ(both, 0);
    ol_sha256_update(&a, pa + pre + na, post);
    ol_sha256_update(&b, pb + pre + nb, post);
    ol_sha256_final(&a, ga);
    ol_sha256_final(&b, gb);
    ref(pa, pre + na + post, wa);
    ref(pb, pre + nb + post, wb);
    OLT_CHECK(memcmp(ga, wa, 32) == 0);
    OLT_CHECK(memcmp(gb, wb, 32) == 0);
}

OLT_TEST(sha256_pairs_match_openssl)
{
    enum { CAP = 300000 };
    uint8_t *a = malloc(CAP + 1), *b = malloc(CAP + 1);
    for (size_t i = 0; i <= CAP; i++) {
        a[i] = (uint8_t)rnd();
        b[i] = (uint8_t)rnd();
    }
    /* every length around a few blocks, both equal and not */
    for (size_t n = 0; n <= 200; n++) {
        check(a, b, 0, n, n, 0);
        check(a, b, 0, n, 200 - n, 5);
        check(a + 1, b + 3, 0, n, n + 64, 0);   /* unaligned */
        check(a, b, 64, n, n, 63);
        check(a, b, 7, n, n, 0);                /* a partial block first */
    }
    /* long and random */
    for (int i = 0; i < 200; i++) {
        size_t pre = rnd() % 3 ? (rnd() % 4) * 64 : rnd() % 200;
        size_t na = rnd() % 200000, nb = rnd() % 200000, post = rnd() % 100;
        check(a, b, pre, na, nb, post);
    }
    check(a, b, 0, 131072, 131072, 0);
    free(a);
    free(b);
}

/* The same context paired many times (a chunk hashed piece by piece with
 * different partners) keeps its length right past 2^32 bits. */
OLT_TEST(sha256_pairs_carry_length)
{
    enum { PIECE = 65536, PIECES = 9000 };   /* 590 MB: the bit count passes 2^32 */
    uint8_t *a = malloc(PIECE), *b = malloc(PIECE);
    for (size_t i = 0; i < PIECE; i++) {
        a[i] = (uint8_t)rnd();
        b[i] = (uint8_t)rnd();
    }
    SHA256_CTX x, y, r;
    ol_sha256_init(&x);
    ol_sha256_init(&r);
    for (int i = 0; i < PIECES; i++) {
        ol_sha256_init(&y);
        ol_sha256_update2(&x, a, PIECE, &y, b, PIECE - 64 * (size_t)(i % 3));
        ol_sha256_update(&r, a, PIECE);
    }
    uint8_t gx[32], gr[32];
    ol_sha256_final(&x, gx);
    ol_sha256_final(&r, gr);
    OLT_CHECK(memcmp(gx, gr, 32) == 0);
    free(a);
    free(b);
}
