/*
 * test_simd.c - every wrapper of an ISA-L CRC, and the AVX2 XXH3 of shard
 * blocks, leave the vector unit clean (base/simd.h): after them the AVX
 * state is back in its init state (XINUSE bit 2, read with XGETBV 1), so
 * legacy-SSE code (libxxhash, OpenSSL's SHA-NI) runs at full speed.
 * Erasure coding: test_store_ec.c.
 */
#include "olt.h"

#include "base/simd.h"
#include "kv/proto.h"
#include "s3/checksum.h"
#include "store/bitrot.h"

#include <cpuid.h>

#if defined(__x86_64__)
static int avx_dirty(void)
{
    uint32_t a, d;
    __asm__ volatile("xgetbv" : "=a"(a), "=d"(d) : "c"(1));
    return (a >> 2) & 1;
}

static void need_xinuse(void)
{
    unsigned a, b, c, d;
    if (!__builtin_cpu_supports("avx") || !__get_cpuid_count(0xd, 1, &a, &b, &c, &d) ||
        !(a & (1u << 2)))
        OLT_SKIP("no AVX or no XGETBV 1 (XINUSE) on this CPU");
}

OLT_TEST(simd_isal_wrappers_leave_the_vector_unit_clean)
{
    need_xinuse();
    static uint8_t buf[1 << 16];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)(i * 7);
    /* the flexible checksums */
    for (int algo = OL_CK_CRC32; algo <= OL_CK_CRC32C; algo++) {
        struct ol_ck c;
        OLT_CHECK_EQ(ol_ck_init(&c, algo, NULL), 0);
        ol_ck_update(&c, buf, sizeof buf);
        OLT_CHECK_EQ(avx_dirty(), 0);
    }
    /* the KV CRC-32C */
    (void)ol_kv_crc32c(0, buf, sizeof buf);
    OLT_CHECK_EQ(avx_dirty(), 0);
    /* the shard checksum (XXH3, maybe the AVX2 build) */
    (void)ol_bitrot_sum(1, 2, buf, sizeof buf);
    OLT_CHECK_EQ(avx_dirty(), 0);
    /* and the rule itself */
    __asm__ volatile("vmovdqu %0, %%ymm1" ::"m"(buf[0]));
    OLT_CHECK_EQ(avx_dirty(), 1);
    ol_simd_clean();
    OLT_CHECK_EQ(avx_dirty(), 0);
}
#endif
