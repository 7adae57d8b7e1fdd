/*
 * md5sha.c - MD5 and SHA-256 of the same bytes in one pass (see
 * md5sha.h).
 *
 * Per 64-byte block: the MD5 state in four scalar registers, the SHA-256
 * state in two vector ones; MD5's 64 steps in 16 groups of four
 * (md5_steps.h), each followed by four SHA-256 rounds (sha256_ni.h). The
 * two chains share nothing, so the core runs one while the other waits on
 * its latency. tests/unit/test_md5sha.c holds both digests to OpenSSL's.
 */
#define OPENSSL_SUPPRESS_DEPRECATED   /* SHA256_CTX: a state we hold */
#include "base/md5sha.h"

#include "base/md5_steps.h"
#include "base/sha256.h"
#include "base/sha256_ni.h"

#include <string.h>

#if defined(__x86_64__)
#define STEP(f, a, b, c, d, j, s, t)           \
    a += f(b, c, d) + m[j] + (uint32_t)(t);    \
    a = ROTL(a, s);                            \
    a += b;
/* MD5's steps 4q..4q+3, then SHA-256's rounds 4q..4q+3 */
#define PAIR(q)                                                                 \
    do {                                                                        \
        MD5_Q##q                                                                \
        __m128i k = OL_SHA_NI_SCHED(w, q);                                      \
        cdgh = _mm_sha256rnds2_epu32(cdgh, abef, k);                            \
        abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(k, 0x0E));   \
    } while (0)

SHA_TARGET static void blocks(uint32_t md[4], uint32_t sh[8], const uint8_t *p, size_t nb)
{
    __m128i abef, cdgh;
    ol_sha_ni_load(sh, &abef, &cdgh);
    uint32_t a = md[0], b = md[1], c = md[2], d = md[3];
    for (; nb; nb--, p += 64) {
        uint32_t m[16];
        memcpy(m, p, 64);   /* MD5's words: little-endian hosts only */
        __m128i w[4];
        OL_SHA_NI_MSG(w, p);
        const uint32_t a0 = a, b0 = b, c0 = c, d0 = d;
        const __m128i sa = abef, sc = cdgh;
        PAIR(0); PAIR(1); PAIR(2); PAIR(3); PAIR(4); PAIR(5); PAIR(6); PAIR(7);
        PAIR(8); PAIR(9); PAIR(10); PAIR(11); PAIR(12); PAIR(13); PAIR(14); PAIR(15);
        a += a0, b += b0, c += c0, d += d0;
        abef = _mm_add_epi32(abef, sa);
        cdgh = _mm_add_epi32(cdgh, sc);
    }
    md[0] = a, md[1] = b, md[2] = c, md[3] = d;
    ol_sha_ni_store(sh, abef, cdgh);
}

/*
 * Four MD5 lanes in the 128-bit vector registers (one lane per 32-bit
 * element) and the SHA-256s of the first NS of them, interleaved: per
 * block, MD5's four steps of all lanes then four rounds of each SHA-256,
 * sixteen times. Each lane's block is read once, as four 16-byte rows: a
 * 4x4 transpose gives MD5 its message words, a byte swap gives SHA-256
 * its own. Only 128-bit registers: VEX/EVEX-128 writes leave the upper
 * halves clean, so the SHA instructions (legacy SSE only) pay no
 * transition (base/simd.h; mixed with 256-bit MD5 lanes they ran 50x
 * slower on the Intel Xeon VM). So no arrays the compiler may copy or
 * transpose with wider registers either (GCC copied one with a zmm move,
 * clang vectorised the state's scalar transpose with ymm): named
 * variables, transposes in xmm registers (X4_T4).
 */
#undef STEP
#define STEP MD5_VSTEP
#define VADD _mm_add_epi32
#define VSET1 _mm_set1_epi32
#define X4_ROUNDS(i, q)                                                             \
    if ((i) < NS) {                                                                 \
        __m128i kw = OL_SHA_NI_SCHED(w##i, q);                                      \
        cdgh##i = _mm_sha256rnds2_epu32(cdgh##i, abef##i, kw);                      \
        abef##i = _mm_sha256rnds2_epu32(abef##i, cdgh##i, _mm_shuffle_epi32(kw, 0x0E)); \
    }
#define X4_Q(q)                                                                     \
    do {                                                                            \
        MD5_Q##q                                                                    \
        X4_ROUNDS(0, q) X4_ROUNDS(1, q) X4_ROUNDS(2, q) X4_ROUNDS(3, q)            \
    } while (0)
/* A 4x4 transpose of 32-bit words in four registers, in place. */
#define X4_T4(r0, r1, r2, r3)                                                       \
    do {                                                                            \
        __m128i t0_ = _mm_unpacklo_epi32(r0, r1), t1_ = _mm_unpackhi_epi32(r0, r1); \
        __m128i t2_ = _mm_unpacklo_epi32(r2, r3), t3_ = _mm_unpackhi_epi32(r2, r3); \
        r0 = _mm_unpacklo_epi64(t0_, t2_);                                          \
        r1 = _mm_unpackhi_epi64(t0_, t2_);                                          \
        r2 = _mm_unpacklo_epi64(t1_, t3_);                                          \
        r3 = _mm_unpackhi_epi64(t1_, t3_);                                          \
    } while (0)
#define X4_FEED(i)                                                                  \
    if ((i) < NS) {                                                                 \
        abef##i = _mm_add_epi32(abef##i, sa##i);                                    \
        cdgh##i = _mm_add_epi32(cdgh##i, sc##i);                                    \
    }
#define X4_BODY                                                                     \
    {                                                                               \
        /* lane l's state is md[l] = {a, b, c, d}: transposed in registers */  \
        __m128i a = _mm_loadu_si128((const __m128i *)md[0]),                        \
                b = _mm_loadu_si128((const __m128i *)md[1]),                        \
                c = _mm_loadu_si128((const __m128i *)md[2]),                        \
                d = _mm_loadu_si128((const __m128i *)md[3]);                        \
        X4_T4(a, b, c, d);                                                          \
        /* named, not arrays: an array copy became a 64-byte (zmm) move, and \
         * the dirty upper state made every SHA instruction after it slow */  \
        __m128i abef0, cdgh0, abef1, cdgh1, abef2, cdgh2, abef3, cdgh3;             \
        abef0 = cdgh0 = abef1 = cdgh1 = abef2 = cdgh2 = abef3 = cdgh3 = _mm_setzero_si128(); \
        if (NS > 0) ol_sha_ni_load(sh[0], &abef0, &cdgh0);                          \
        if (NS > 1) ol_sha_ni_load(sh[1], &abef1, &cdgh1);                          \
        if (NS > 2) ol_sha_ni_load(sh[2], &abef2, &cdgh2);                          \
        if (NS > 3) ol_sha_ni_load(sh[3], &abef3, &cdgh3);                          \
        const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL); \
        for (size_t k = 0; k < nb; k++) {                                           \
            __m128i m[16], w0[4], w1[4], w2[4], w3[4];                              \
            for (int r = 0; r < 4; r++) {   /* row r: words 4r..4r+3 of each lane */ \
                __m128i x0 = _mm_loadu_si128((const __m128i *)(p[0] + 64 * k + 16 * r)); \
                __m128i x1 = _mm_loadu_si128((const __m128i *)(p[1] + 64 * k + 16 * r)); \
                __m128i x2 = _mm_loadu_si128((const __m128i *)(p[2] + 64 * k + 16 * r)); \
                __m128i x3 = _mm_loadu_si128((const __m128i *)(p[3] + 64 * k + 16 * r)); \
                if (NS > 0) w0[r] = _mm_shuffle_epi8(x0, bswap);                    \
                if (NS > 1) w1[r] = _mm_shuffle_epi8(x1, bswap);                    \
                if (NS > 2) w2[r] = _mm_shuffle_epi8(x2, bswap);                    \
                if (NS > 3) w3[r] = _mm_shuffle_epi8(x3, bswap);                    \
                X4_T4(x0, x1, x2, x3);                                              \
                m[4 * r + 0] = x0;                                                  \
                m[4 * r + 1] = x1;                                                  \
                m[4 * r + 2] = x2;                                                  \
                m[4 * r + 3] = x3;                                                  \
            }                                                                       \
            const __m128i a0 = a, b0 = b, c0 = c, d0 = d;                           \
            const __m128i sa0 = abef0, sc0 = cdgh0, sa1 = abef1, sc1 = cdgh1;       \
            const __m128i sa2 = abef2, sc2 = cdgh2, sa3 = abef3, sc3 = cdgh3;       \
            X4_Q(0); X4_Q(1); X4_Q(2); X4_Q(3); X4_Q(4); X4_Q(5); X4_Q(6); X4_Q(7);     \
            X4_Q(8); X4_Q(9); X4_Q(10); X4_Q(11); X4_Q(12); X4_Q(13); X4_Q(14); X4_Q(15); \
            a = _mm_add_epi32(a, a0);                                               \
            b = _mm_add_epi32(b, b0);                                               \
            c = _mm_add_epi32(c, c0);                                               \
            d = _mm_add_epi32(d, d0);                                               \
            X4_FEED(0) X4_FEED(1) X4_FEED(2) X4_FEED(3)                             \
        }                                                                           \
        X4_T4(a, b, c, d);                                                          \
        _mm_storeu_si128((__m128i *)md[0], a);                                      \
        _mm_storeu_si128((__m128i *)md[1], b);                                      \
        _mm_storeu_si128((__m128i *)md[2], c);                                      \
        _mm_storeu_si128((__m128i *)md[3], d);                                      \
        if (NS > 0) ol_sha_ni_store(sh[0], abef0, cdgh0);                           \
        if (NS > 1) ol_sha_ni_store(sh[1], abef1, cdgh1);                           \
        if (NS > 2) ol_sha_ni_store(sh[2], abef2, cdgh2);                           \
        if (NS > 3) ol_sha_ni_store(sh[3], abef3, cdgh3);                           \
    }
#define X4_KERNEL(name, attr, ns)                                                   \
    attr static void name(uint32_t (*md)[4], uint32_t (*sh)[8],                     \
                          const uint8_t *const *p, size_t nb)                       \
    {                                                                               \
        enum { NS = ns };                                                           \
        X4_BODY                                                                     \
    }
typedef void (*x4_kernel)(uint32_t (*md)[4], uint32_t (*sh)[8], const uint8_t *const *p,
                          size_t nb);

/* AVX-512VL: one rotate, one three-input logic op per MD5 function */
#define V_MF(x, y, z) _mm_ternarylogic_epi32(x, y, z, 0xCA)
#define V_MG(x, y, z) _mm_ternarylogic_epi32(x, y, z, 0xE4)
#define V_MH(x, y, z) _mm_ternarylogic_epi32(x, y, z, 0x96)
#define V_MI(x, y, z) _mm_ternarylogic_epi32(x, y, z, 0x39)
#define VROL _mm_rol_epi32
#define X512 __attribute__((target("sha,sse4.1,ssse3,avx,avx512f,avx512vl")))
X4_KERNEL(x4_512_1, X512, 1)
X4_KERNEL(x4_512_2, X512, 2)
X4_KERNEL(x4_512_3, X512, 3)
X4_KERNEL(x4_512_4, X512, 4)
#undef V_MF
#undef V_MG
#undef V_MH
#undef V_MI
#undef VROL
/* AVX (VEX-128): rotates by two shifts, F..I as in the scalar code */
#define V_MF(x, y, z) _mm_xor_si128(z, _mm_and_si128(x, _mm_xor_si128(y, z)))
#define V_MG(x, y, z) _mm_xor_si128(y, _mm_and_si128(z, _mm_xor_si128(x, y)))
#define V_MH(x, y, z) _mm_xor_si128(_mm_xor_si128(x, y), z)
#define V_MI(x, y, z) _mm_xor_si128(y, _mm_or_si128(x, _mm_xor_si128(z, _mm_set1_epi32(-1))))
#define VROL(x, s) _mm_or_si128(_mm_slli_epi32(x, s), _mm_srli_epi32(x, 32 - (s)))
#define XAVX __attribute__((target("sha,sse4.1,ssse3,avx")))
X4_KERNEL(x4_avx_1, XAVX, 1)
X4_KERNEL(x4_avx_2, XAVX, 2)
X4_KERNEL(x4_avx_3, XAVX, 3)
X4_KERNEL(x4_avx_4, XAVX, 4)

static int x4_isa = -1;   /* 0: none, 1: AVX, 2: AVX-512VL */

static int x4_which(void)
{
    if (__atomic_load_n(&x4_isa, __ATOMIC_RELAXED) < 0) {
        int isa = !ol_sha256_x2_fast() || !__builtin_cpu_supports("avx") ? 0
                  : __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") ? 2
                  : 1;
        __atomic_store_n(&x4_isa, isa, __ATOMIC_RELAXED);
    }
    return __atomic_load_n(&x4_isa, __ATOMIC_RELAXED);
}
#endif

bool ol_md5sha_x4_only(const char *kernel)
{
#if defined(__x86_64__)
    __atomic_store_n(&x4_isa, -1, __ATOMIC_RELAXED);
    int best = x4_which();
    int want = !kernel ? best : strcmp(kernel, "avx") == 0 ? 1 : strcmp(kernel, "avx512") == 0 ? 2 : 9;
    if (want > best)
        return false;
    __atomic_store_n(&x4_isa, want, __ATOMIC_RELAXED);
    return true;
#else
    return !kernel;
#endif
}

bool ol_md5sha_x4_fast(void)
{
#if defined(__x86_64__)
    return x4_which() > 0;
#else
    return false;
#endif
}

void ol_md5sha_x4(uint32_t (*md)[4], SHA256_CTX *const *c, const uint8_t *const *p,
                  unsigned ns, size_t nb)
{
#if defined(__x86_64__)
    static const x4_kernel k[3][4] = {
        {NULL, NULL, NULL, NULL},
        {x4_avx_1, x4_avx_2, x4_avx_3, x4_avx_4},
        {x4_512_1, x4_512_2, x4_512_3, x4_512_4},
    };
    int isa = x4_which();
    if (isa > 0 && ns >= 1 && ns <= 4) {
        uint32_t sh[4][8];
        for (unsigned i = 0; i < ns; i++)
            memcpy(sh[i], c[i]->h, sizeof sh[i]);
        k[isa][ns - 1](md, sh, p, nb);
        for (unsigned i = 0; i < ns; i++) {
            memcpy(c[i]->h, sh[i], sizeof sh[i]);
            ol_sha_ni_advance(c[i], nb);
        }
        return;
    }
#endif
    (void)md, (void)c, (void)p, (void)ns, (void)nb;
    __builtin_trap();   /* callers ask ol_md5sha_x4_fast first */
}

bool ol_md5sha_fast(void)
{
#if defined(__x86_64__)
    return ol_sha256_x2_fast();   /* the same instructions: SHA, SSE4.1, SSSE3 */
#else
    return false;
#endif
}

size_t ol_md5_sha256_update(struct ol_md5 *h, SHA256_CTX *c, const void *data, size_t n)
{
    const uint8_t *p = data;
    size_t one = 0;
#if defined(__x86_64__)
    if (!h->set && h->tail == c->num && ol_md5sha_fast()) {
        if (h->tail) {   /* up to the block boundary both stand before */
            size_t take = 64 - h->tail < n ? 64 - h->tail : n;
            ol_md5_update(h, p, take);
            ol_sha256_update(c, p, take);
            p += take;
            n -= take;
        }
        size_t nb = n / 64;
        if (nb) {   /* h->tail == c->num == 0 here */
            uint32_t sh[8];
            memcpy(sh, c->h, sizeof sh);
            blocks(h->h, sh, p, nb);
            memcpy(c->h, sh, sizeof sh);
            h->done += nb * 64;
            ol_sha_ni_advance(c, nb);
            p += nb * 64;
            n -= nb * 64;
            one = nb * 64;
        }
    }
#endif
    ol_md5_update(h, p, n);
    ol_sha256_update(c, p, n);
    return one;
}
