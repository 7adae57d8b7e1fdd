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
#endif

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
