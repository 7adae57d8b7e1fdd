/*
 * sha256_ni.h - the pieces of SHA-256 on x86-64's SHA extensions that
 * more than one kernel uses (internal to src/base: sha256.c's two streams
 * side by side, md5sha.c's one stream beside an MD5): the round
 * constants, the state in the instructions' ABEF / CDGH layout and back,
 * a block's message words, four rounds' schedule, and a context's bit
 * count after whole blocks (each kernel issues the SHA256RNDS2s in its
 * own order). FIPS 180-4 section 6.2.2; the callers hold OpenSSL's
 * SHA256_CTX and keep it between whole blocks (sha256.h).
 *
 * Every function and macro needs SHA_TARGET on its caller (or on itself).
 */
#ifndef OL_BASE_SHA256_NI_H
#define OL_BASE_SHA256_NI_H

#if defined(__x86_64__)
#include <immintrin.h>
#include <stdint.h>

#include <openssl/sha.h>

#define SHA_TARGET __attribute__((target("sha,sse4.1,ssse3")))

extern const uint32_t ol_sha256_k[64];

/* h[0..7] (a..h) into the instructions' ABEF / CDGH registers and back. */
SHA_TARGET static inline void ol_sha_ni_load(const uint32_t h[8], __m128i *abef, __m128i *cdgh)
{
    __m128i abcd = _mm_loadu_si128((const __m128i *)h);
    __m128i efgh = _mm_loadu_si128((const __m128i *)(h + 4));
    __m128i badc = _mm_shuffle_epi32(abcd, 0xB1);
    __m128i hgfe = _mm_shuffle_epi32(efgh, 0x1B);
    *abef = _mm_alignr_epi8(badc, hgfe, 8);
    *cdgh = _mm_blend_epi16(hgfe, badc, 0xF0);
}

SHA_TARGET static inline void ol_sha_ni_store(uint32_t h[8], __m128i abef, __m128i cdgh)
{
    __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
    __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)h, _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128((__m128i *)(h + 4), _mm_alignr_epi8(dchg, feba, 8));
}

/* A block's 16 message words, big-endian, as four groups m[0..3]. */
#define OL_SHA_NI_MSG(m, p)                                                                  \
    do {                                                                                     \
        const __m128i bswap_ = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL); \
        for (int i_ = 0; i_ < 4; i_++)                                                       \
            (m)[i_] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)((p) + 16 * i_)),  \
                                       bswap_);                                              \
    } while (0)

/* Schedule words 4g..4g+3 plus their constants, from m[0..3], which hold
 * the four groups before g (from g = 4 on, group g replaces group g - 4:
 * W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15]) + W[t-16]: MSG1 adds s0, the
 * ALIGNR the W[t-7] words, MSG2 s1). */
#define OL_SHA_NI_SCHED(m, g)                                                                \
    ((g) >= 4 ? ((m)[(g) & 3] = _mm_sha256msg2_epu32(                                        \
                     _mm_add_epi32(_mm_sha256msg1_epu32((m)[(g) & 3], (m)[((g) + 1) & 3]),   \
                                   _mm_alignr_epi8((m)[((g) + 3) & 3], (m)[((g) + 2) & 3], 4)), \
                     (m)[((g) + 3) & 3]))                                                    \
              : (m)[(g) & 3],                                                                \
     _mm_add_epi32((m)[(g) & 3], _mm_loadu_si128((const __m128i *)(ol_sha256_k + 4 * (g)))))

/* A context between whole blocks (num == 0) after nb more of them: its
 * bit count (h, the rest of its state, is the caller's). */
static inline void ol_sha_ni_advance(SHA256_CTX *c, size_t nb)
{
    uint64_t bits = ((uint64_t)c->Nh << 32 | c->Nl) + (uint64_t)nb * 512;
    c->Nl = (SHA_LONG)bits;
    c->Nh = (SHA_LONG)(bits >> 32);
}
#endif

#endif
