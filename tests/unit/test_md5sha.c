/*
 * test_md5sha.c - base/md5sha.h against OpenSSL's one-shot MD5 and
 * SHA-256: the same bytes fed in pieces of every size around a block,
 * from unaligned addresses, with both streams standing at the same offset
 * in a block and (SHA-256 started later) at different ones, long enough
 * for the bit count to matter; and the one-pass kernel really taken where
 * the CPU has it (the bytes it reports).
 */
#include "olt.h"

#include "base/md5sha.h"
#include "base/sha256.h"

#include <openssl/evp.h>
#include <stdlib.h>

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void ref(const EVP_MD *md, const uint8_t *p, size_t n, uint8_t *out)
{
    unsigned l = 0;
    OLT_CHECK(EVP_Digest(p, n, out, &l, md, NULL) == 1);
}

/* MD5 of p[0..n), SHA-256 of p[lead..n): the first lead bytes go to MD5
 * alone, the rest to both in pieces of `piece` bytes (0: random 1..300,
 * or whole blocks of up to 64 KiB). */
static void check(const uint8_t *p, size_t n, size_t lead, size_t piece)
{
    struct ol_md5 m = {0};
    SHA256_CTX c;
    ol_md5_init(&m);
    ol_sha256_init(&c);
    ol_md5_update(&m, p, lead);
    size_t off = lead;
    while (off < n) {
        size_t k = piece ? piece : rnd() % 4 ? 1 + rnd() % 300 : 64 * (1 + rnd() % 1024);
        if (k > n - off)
            k = n - off;
        bool aligned = m.tail == c.num;
        size_t head = aligned && m.tail ? 64 - m.tail : 0;
        size_t one = ol_md5_sha256_update(&m, &c, p + off, k);
        OLT_CHECK(one % 64 == 0 && one <= k);
        if (!ol_md5sha_fast() || !aligned)
            OLT_CHECK_EQ(one, 0);
        else
            OLT_CHECK_EQ(one, k > head ? (k - head) / 64 * 64 : 0);
        off += k;
    }
    uint8_t gm[16], gs[32], wm[16], ws[32];
    ol_md5_final(&m, gm);
    ol_sha256_final(&c, gs);
    ref(EVP_md5(), p, n, wm);
    ref(EVP_sha256(), p + lead, n - lead, ws);
    OLT_CHECK_MEM(gm, wm, 16);
    OLT_CHECK_MEM(gs, ws, 32);
}

OLT_TEST(md5sha_matches_openssl)
{
    enum { CAP = 1 << 20 };
    uint8_t *a = malloc(CAP + 1);
    for (size_t i = 0; i <= CAP; i++)
        a[i] = (uint8_t)rnd();
    for (size_t n = 0; n <= 260; n++) {
        check(a, n, 0, n ? n : 1);   /* one piece */
        check(a + 1, n, 0, 7);       /* unaligned, small pieces */
        check(a, n, 0, 64);
        check(a, n, n < 64 ? n : 64, 65);  /* SHA-256 a block later: same offsets */
        check(a + 3, n, n < 5 ? n : 5, 0);  /* different offsets: one by one */
    }
    for (int i = 0; i < 100; i++) {
        size_t n = rnd() % (CAP + 1), lead = rnd() % 2 ? 64 * (rnd() % 8) : rnd() % 100;
        check(a + rnd() % 2, n, lead < n ? lead : n, 0);
    }
    check(a, CAP, 0, 65536);
    free(a);
}

/* A lane of an MD5 set keeps its bytes staged for the set (never the one
 * pass); a lone stream leaves its partial block in both states. */
OLT_TEST(md5sha_lone_stream_only)
{
    uint8_t buf[4096];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)rnd();
    struct ol_md5_set *set = ol_md5_set_new(2);
    OLT_CHECK(set != NULL);
    struct ol_md5 *lane = ol_md5_get(set);
    OLT_CHECK(lane != NULL);
    SHA256_CTX c;
    ol_md5_init(lane);
    ol_sha256_init(&c);
    OLT_CHECK_EQ(ol_md5_sha256_update(lane, &c, buf, sizeof buf), 0);   /* staged */
    OLT_CHECK_EQ(lane->done, 0);
    OLT_CHECK_EQ(lane->len, sizeof buf);
    uint8_t gm[16], gs[32], wm[16], ws[32];
    ol_md5_end(lane);
    ol_md5_final(lane, gm);
    ol_sha256_final(&c, gs);
    ref(EVP_md5(), buf, sizeof buf, wm);
    ref(EVP_sha256(), buf, sizeof buf, ws);
    OLT_CHECK_MEM(gm, wm, 16);
    OLT_CHECK_MEM(gs, ws, 32);
    ol_md5_put(lane);
    ol_md5_set_free(set);

    struct ol_md5 m = {0};
    ol_md5_init(&m);
    ol_sha256_init(&c);
    OLT_CHECK_EQ(ol_md5_sha256_update(&m, &c, buf, 1000), ol_md5sha_fast() ? 960 : 0);
    OLT_CHECK_EQ(m.done, 960);
    OLT_CHECK_EQ(m.tail, 40);
    OLT_CHECK_EQ(c.num, 40);
    OLT_CHECK_EQ(ol_md5sha_fast(), ol_sha256_x2_fast());
}

/* The four-lane kernel of a set's group (ol_md5sha_x4), on each MD5 flavour
 * the CPU has: four streams from unaligned addresses, the first ns of them
 * with a SHA-256 too (1..4), chained over several calls; every digest is
 * OpenSSL's (the MD5s finished from the raw states). */
OLT_TEST(md5sha_x4_matches_openssl)
{
    static const char *const kinds[] = {"avx", "avx512"};
    enum { NB = 300 };
    uint8_t *buf = malloc(4 * (NB * 64 + 8));
    for (size_t i = 0; i < 4 * (NB * 64 + 8); i++)
        buf[i] = (uint8_t)rnd();
    const uint8_t *p[4];
    for (int l = 0; l < 4; l++)
        p[l] = buf + l * (NB * 64 + 8) + l + 1;
    int ran = 0;
    for (size_t kk = 0; kk < 2; kk++) {
        if (!ol_md5sha_x4_only(kinds[kk]))
            continue;
        ran++;
        for (unsigned ns = 1; ns <= 4; ns++) {
            struct ol_md5 m[4];
            SHA256_CTX c[4];
            uint32_t md[4][4];
            SHA256_CTX *cp[4] = {&c[0], &c[1], &c[2], &c[3]};
            for (int l = 0; l < 4; l++) {
                memset(&m[l], 0, sizeof m[l]);
                ol_md5_init(&m[l]);
                ol_sha256_init(&c[l]);
                memcpy(md[l], m[l].h, sizeof md[l]);
            }
            const uint8_t *q[4] = {p[0], p[1], p[2], p[3]};
            for (size_t done = 0; done < NB;) {   /* several calls, state carried */
                size_t nb = 1 + rnd() % 70;
                if (nb > NB - done)
                    nb = NB - done;
                ol_md5sha_x4(md, cp, q, ns, nb);
                for (int l = 0; l < 4; l++)
                    q[l] += nb * 64;
                done += nb;
            }
            for (int l = 0; l < 4; l++) {
                uint8_t got[32], want[32];
                memcpy(m[l].h, md[l], sizeof md[l]);
                m[l].done = NB * 64;
                ol_md5_final(&m[l], got);
                ref(EVP_md5(), p[l], NB * 64, want);
                OLT_CHECK_MEM(got, want, 16);
                if ((unsigned)l < ns) {
                    ol_sha256_final(&c[l], got);
                    ref(EVP_sha256(), p[l], NB * 64, want);
                    OLT_CHECK_MEM(got, want, 32);
                }
            }
        }
    }
    OLT_CHECK(ol_md5sha_x4_only(NULL) == true);
    OLT_CHECK_EQ(ran > 0, ol_md5sha_x4_fast());
    free(buf);
}
