/*
 * sha256.c - SHA-256 compression of two messages side by side (see
 * sha256.h).
 *
 * With the SHA extensions one stream is a chain of SHA256RNDS2
 * instructions, each waiting for the one before (per the vendors' tables
 * the unit could start one before the last is done): OpenSSL's SHA-NI
 * code, one stream, does 2.0 GB/s on the AMD EPYC of docs/benchmarks.md.
 * Two independent messages interleaved instruction by instruction do
 * 2.9 GB/s together there (tests/unit/test_sha256.c holds them to
 * OpenSSL's digests).
 * The rounds follow FIPS 180-4 section 6.2.2 in the instruction set's own
 * state layout (ABEF / CDGH words, sha256_ni.h, shared with md5sha.c's
 * kernel); everything that is not the 64 rounds
 * (padding, the length, the digest's byte order, a stream's partial block)
 * is OpenSSL's (sha256.h).
 */
#define OPENSSL_SUPPRESS_DEPRECATED   /* SHA256_CTX: a state we hold */
#include "base/sha256.h"

#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>

#include "base/sha256_ni.h"

const uint32_t ol_sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

/* Four rounds 4g..4g+3 of both streams, their instructions alternating. */
#define QUAD(g)                                                                   \
    do {                                                                          \
        __m128i k0 = OL_SHA_NI_SCHED(m0, g), k1 = OL_SHA_NI_SCHED(m1, g);        \
        cdgh0 = _mm_sha256rnds2_epu32(cdgh0, abef0, k0);                          \
        cdgh1 = _mm_sha256rnds2_epu32(cdgh1, abef1, k1);                          \
        abef0 = _mm_sha256rnds2_epu32(abef0, cdgh0, _mm_shuffle_epi32(k0, 0x0E)); \
        abef1 = _mm_sha256rnds2_epu32(abef1, cdgh1, _mm_shuffle_epi32(k1, 0x0E)); \
    } while (0)

SHA_TARGET static void blocks_x2_ni(uint32_t h0[8], uint32_t h1[8], const uint8_t *p0,
                                    const uint8_t *p1, size_t nb)
{
    __m128i abef0, cdgh0, abef1, cdgh1;
    ol_sha_ni_load(h0, &abef0, &cdgh0);
    ol_sha_ni_load(h1, &abef1, &cdgh1);
    for (; nb; nb--, p0 += 64, p1 += 64) {
        __m128i m0[4], m1[4];
        const __m128i sa0 = abef0, sc0 = cdgh0, sa1 = abef1, sc1 = cdgh1;
        OL_SHA_NI_MSG(m0, p0);
        OL_SHA_NI_MSG(m1, p1);
        /* the order of the rounds (and so of the schedule) is fixed: the
         * groups are written out so every index is a constant */
        QUAD(0); QUAD(1); QUAD(2); QUAD(3); QUAD(4); QUAD(5); QUAD(6); QUAD(7);
        QUAD(8); QUAD(9); QUAD(10); QUAD(11); QUAD(12); QUAD(13); QUAD(14); QUAD(15);
        abef0 = _mm_add_epi32(abef0, sa0);
        cdgh0 = _mm_add_epi32(cdgh0, sc0);
        abef1 = _mm_add_epi32(abef1, sa1);
        cdgh1 = _mm_add_epi32(cdgh1, sc1);
    }
    ol_sha_ni_store(h0, abef0, cdgh0);
    ol_sha_ni_store(h1, abef1, cdgh1);
}

static int have_ni = -1;

bool ol_sha256_x2_fast(void)
{
    if (__atomic_load_n(&have_ni, __ATOMIC_RELAXED) < 0) {
        unsigned a, b, c, d;
        int ok = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29)) &&
                 __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 19)) && (c & (1u << 9));
        __atomic_store_n(&have_ni, ok, __ATOMIC_RELAXED);
    }
    return __atomic_load_n(&have_ni, __ATOMIC_RELAXED) > 0;
}
#else
bool ol_sha256_x2_fast(void) { return false; }
#endif

/* ---- streams on OpenSSL's context ------------------------------------------ */

void ol_sha256_init(SHA256_CTX *c)
{
    SHA256_Init(c);
}

void ol_sha256_update(SHA256_CTX *c, const void *p, size_t n)
{
    SHA256_Update(c, p, n);
}

void ol_sha256_final(SHA256_CTX *c, uint8_t out[32])
{
    SHA256_Final(out, c);
}

size_t ol_sha256_update2(SHA256_CTX *a, const uint8_t *pa, size_t na, SHA256_CTX *b,
                         const uint8_t *pb, size_t nb)
{
    size_t both = 0;
#if defined(__x86_64__)
    if (a->num == 0 && b->num == 0 && ol_sha256_x2_fast()) {
        both = (na < nb ? na : nb) / 64;
        if (both) {
            uint32_t ha[8], hb[8];
            memcpy(ha, a->h, sizeof ha);
            memcpy(hb, b->h, sizeof hb);
            blocks_x2_ni(ha, hb, pa, pb, both);
            memcpy(a->h, ha, sizeof ha);
            memcpy(b->h, hb, sizeof hb);
            ol_sha_ni_advance(a, both);
            ol_sha_ni_advance(b, both);
        }
    }
#endif
    SHA256_Update(a, pa + both * 64, na - both * 64);
    SHA256_Update(b, pb + both * 64, nb - both * 64);
    return both * 64;
}
