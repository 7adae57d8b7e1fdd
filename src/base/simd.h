/*
 * simd.h - living with libraries that leave the vector unit dirty.
 *
 * ISA-L's AVX2/AVX-512 kernels (erasure coding and the CRCs) return with
 * the upper halves of the vector registers dirty (no vzeroupper;
 * intel/isa-l#24). Legacy-SSE code run afterwards pays for it until
 * something clears them: libxxhash's SSE2 XXH3 (the shard checksum) hashes
 * at 4.8 GB/s instead of 20 on the benchmark machine, OpenSSL's SHA-NI
 * SHA-256 (payload hashes) slows the same way. A thread stays dirty across
 * calls, so one CRC of a request slows every checksum after it. Every
 * ISA-L call is followed by ol_simd_clean().
 *
 * Owns: that one rule. Must not: anything else.
 */
#ifndef OL_BASE_SIMD_H
#define OL_BASE_SIMD_H

/* vzeroupper where the CPU has AVX; nothing elsewhere. */
static inline void ol_simd_clean(void)
{
#if defined(__AVX__)
    __builtin_ia32_vzeroupper(); /* the compiler knows what it clobbers */
#elif defined(__x86_64__)
    /* built without AVX: the compiler keeps nothing in the upper halves */
    if (__builtin_cpu_supports("avx"))
        __asm__ volatile("vzeroupper" ::: "memory");
#endif
}

#endif
