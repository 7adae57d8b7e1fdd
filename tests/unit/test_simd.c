/*
 * test_simd.c - every wrapper of an ISA-L kernel leaves the vector unit
 * clean (base/simd.h): after it, the AVX state is back in its init state
 * (XINUSE bit 2, read with XGETBV 1), so legacy-SSE code (libxxhash,
 * OpenSSL's SHA-NI) runs at full speed.
 */
#include "olt.h"

#include "base/simd.h"
#include "kv/proto.h"
#include "s3/checksum.h"
#include "store/ec.h"

#include <cpuid.h>
#include <stdlib.h>

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
    /* erasure coding and reconstruction */
    struct ol_ec *ec = malloc(sizeof *ec);
    OLT_CHECK(ec != NULL);
    OLT_CHECK_EQ(ol_ec_init(ec, 4, 2), 0);
    static uint8_t sh[6][4096];
    uint8_t *d[4] = {sh[0], sh[1], sh[2], sh[3]}, *p[2] = {sh[4], sh[5]};
    for (int i = 0; i < 4; i++)
        memcpy(sh[i], buf + 4096 * i, 4096);
    ol_ec_encode(ec, 4096, d, p);
    OLT_CHECK_EQ(avx_dirty(), 0);
    uint8_t *all[6] = {sh[0], sh[1], sh[2], sh[3], sh[4], sh[5]};
    memset(sh[1], 0, 4096);
    OLT_CHECK_EQ(ol_ec_reconstruct(ec, 4096, all, 0x3d, 0x02), 0);
    OLT_CHECK_EQ(avx_dirty(), 0);
    OLT_CHECK_MEM(sh[1], buf + 4096, 4096);
    free(ec);
    /* and the rule itself */
    __asm__ volatile("vmovdqu %0, %%ymm1" ::"m"(buf[0]));
    OLT_CHECK_EQ(avx_dirty(), 1);
    ol_simd_clean();
    OLT_CHECK_EQ(avx_dirty(), 0);
}
#endif
