/*
 * xxh3_avx2.c - XXH3-64 from libxxhash's own header in its inline mode
 * (XXH_INLINE_ALL), compiled with -mavx2 (a per-file flag in the Makefile)
 * for bitrot.c, which calls it on CPUs with AVX2 instead of the shared
 * library. Debian builds libxxhash for baseline x86-64, i.e. SSE2; the same
 * function in AVX2 hashes shard blocks about 3x faster (61 vs 20 GB/s on
 * the benchmark machine, data in cache) and gives the same values (XXH3's
 * result does not depend on the vector width).
 *
 * Owns: nothing but that build of one function. A build without -mavx2
 * (the fuzz targets) gets the SSE2 code and says so.
 */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "base/simd.h"
#include "store/bitrot.h"

#if defined(__AVX2__)
const int ol_bitrot_xxh3_avx2_built = 1;
#else
const int ol_bitrot_xxh3_avx2_built = 0;
#endif

uint64_t ol_bitrot_xxh3_avx2(const void *data, size_t len, uint64_t seed)
{
    uint64_t h = XXH3_64bits_withSeed(data, len, seed);
    ol_simd_clean();   /* GCC emits no vzeroupper here: the SSE code after us would pay */
    return h;
}
