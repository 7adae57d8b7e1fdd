/*
 * bitrot.c - see bitrot.h. Two XXH3-64 calls per block: one over the
 * 8-byte block index to derive the block seed, one over the block.
 */
#include "store/bitrot.h"

#include "base/simd.h"

#include <errno.h>

#include <xxhash.h>

static inline void ol_bitrot_put_le64(uint8_t *p, uint64_t v)
{
    for (unsigned i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t ol_bitrot_get_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* XXH3 of a block: the AVX2 build where it runs, else the library. */
static uint64_t (*block_hash)(const void *, size_t, uint64_t) = XXH3_64bits_withSeed;

__attribute__((constructor)) static void pick_block_hash(void)
{
#if defined(__x86_64__)
    if (ol_bitrot_xxh3_avx2_built && __builtin_cpu_supports("avx2"))
        block_hash = ol_bitrot_xxh3_avx2;
#endif
}

uint64_t ol_bitrot_sum(uint64_t seed, uint64_t idx, const void *data, size_t len)
{
    uint8_t le[8];
    ol_bitrot_put_le64(le, idx);
    XXH64_hash_t bseed = XXH3_64bits_withSeed(le, sizeof le, seed);
    ol_simd_clean();   /* libxxhash's SSE2 code: base/simd.h */
    return block_hash(data, len, bseed);
}

void ol_bitrot_seal(uint64_t seed, uint64_t idx, const void *data, size_t len,
                    uint8_t out_hdr8[OL_BITROT_HDR_SIZE])
{
    ol_bitrot_put_le64(out_hdr8, ol_bitrot_sum(seed, idx, data, len));
}

int ol_bitrot_verify(uint64_t seed, uint64_t idx, const uint8_t hdr8[OL_BITROT_HDR_SIZE],
                     const void *data, size_t len)
{
    return ol_bitrot_get_le64(hdr8) == ol_bitrot_sum(seed, idx, data, len) ? 0 : -EBADMSG;
}
