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
 * state layout (ABEF / CDGH words); everything that is not the 64 rounds
 * (padding, the length, the digest's byte order, a stream's partial block)
 * is OpenSSL's (sha256.h).
 */
#define OPENSSL_SUPPRESS_DEPRECATED   /* SHA256_CTX: a state we hold */
#include "base/sha256.h"

#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

#define SHA_TARGET __attribute__((target("sha,sse4.1,ssse3")))

static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

/* h[0..7] (a..h) into the instructions' ABEF / CDGH registers and back. */
SHA_TARGET static inline void to_lanes(const uint32_t h[8], __m128i *abef, __m128i *cdgh)
{
    __m128i abcd = _mm_loadu_si128((const __m128i *)h);
    __m128i efgh = _mm_loadu_si128((const __m128i *)(h + 4));
    __m128i badc = _mm_shuffle_epi32(abcd, 0xB1);
    __m128i hgfe = _mm_shuffle_epi32(efgh, 0x1B);
    *abef = _mm_alignr_epi8(badc, hgfe, 8);
    *cdgh = _mm_blend_epi16(hgfe, badc, 0xF0);
}

SHA_TARGET static inline void from_lanes(uint32_t h[8], __m128i abef, __m128i cdgh)
{
    __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
    __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)h, _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128((__m128i *)(h + 4), _mm_alignr_epi8(dchg, feba, 8));
}

/*
 * Four rounds r..r+3 of both streams. m[x][g % 4] holds the schedule
 * words 4g..4g+3 of stream x; from g = 4 on, they are made from the four
 * groups before (W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15]) + W[t-16]:
 * MSG1 adds s0, the ALIGNR the W[t-7] words, MSG2 s1).
 */
#define QUAD(g)                                                                          \
    do {                                                                                 \
        for (int x = 0; x < 2; x++) {                                                    \
            if ((g) >= 4) {                                                              \
                __m128i t7 = _mm_alignr_epi8(m[x][((g) + 3) & 3], m[x][((g) + 2) & 3], 4); \
                __m128i w = _mm_add_epi32(_mm_sha256msg1_epu32(m[x][(g) & 3],             \
                                                               m[x][((g) + 1) & 3]), t7); \
                m[x][(g) & 3] = _mm_sha256msg2_epu32(w, m[x][((g) + 3) & 3]);           \
            }                                                                            \
            k[x] = _mm_add_epi32(m[x][(g) & 3],                                          \
                                 _mm_loadu_si128((const __m128i *)(K256 + 4 * (g))));    \
        }                                                                                \
        cdgh0 = _mm_sha256rnds2_epu32(cdgh0, abef0, k[0]);                               \
        cdgh1 = _mm_sha256rnds2_epu32(cdgh1, abef1, k[1]);                               \
        abef0 = _mm_sha256rnds2_epu32(abef0, cdgh0, _mm_shuffle_epi32(k[0], 0x0E));      \
        abef1 = _mm_sha256rnds2_epu32(abef1, cdgh1, _mm_shuffle_epi32(k[1], 0x0E));      \
    } while (0)

SHA_TARGET static void blocks_x2_ni(uint32_t h0[8], uint32_t h1[8], const uint8_t *p0,
                                    const uint8_t *p1, size_t nb)
{
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i abef0, cdgh0, abef1, cdgh1;
    to_lanes(h0, &abef0, &cdgh0);
    to_lanes(h1, &abef1, &cdgh1);
    for (; nb; nb--, p0 += 64, p1 += 64) {
        __m128i m[2][4], k[2];
        const __m128i sa0 = abef0, sc0 = cdgh0, sa1 = abef1, sc1 = cdgh1;
        for (int i = 0; i < 4; i++) {
            m[0][i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p0 + 16 * i)), bswap);
            m[1][i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p1 + 16 * i)), bswap);
        }
        /* the order of the rounds (and so of the schedule) is fixed: the
         * groups are written out so every index is a constant */
        QUAD(0); QUAD(1); QUAD(2); QUAD(3); QUAD(4); QUAD(5); QUAD(6); QUAD(7);
        QUAD(8); QUAD(9); QUAD(10); QUAD(11); QUAD(12); QUAD(13); QUAD(14); QUAD(15);
        abef0 = _mm_add_epi32(abef0, sa0);
        cdgh0 = _mm_add_epi32(cdgh0, sc0);
        abef1 = _mm_add_epi32(abef1, sa1);
        cdgh1 = _mm_add_epi32(cdgh1, sc1);
    }
    from_lanes(h0, abef0, cdgh0);
    from_lanes(h1, abef1, cdgh1);
}

/* A context between whole blocks: num == 0, so h and the bit count are all
 * of its state. */
static void advance(SHA256_CTX *c, size_t nb)
{
    uint64_t bits = ((uint64_t)c->Nh << 32 | c->Nl) + (uint64_t)nb * 512;
    c->Nl = (SHA_LONG)bits;
    c->Nh = (SHA_LONG)(bits >> 32);
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
            advance(a, both);
            advance(b, both);
        }
    }
#endif
    SHA256_Update(a, pa + both * 64, na - both * 64);
    SHA256_Update(b, pb + both * 64, nb - both * 64);
    return both * 64;
}
