/*
 * crc32c.c - CRC-32C over ISA-L (see crc32c.h).
 */
#include "base/crc32c.h"

#include "base/simd.h"

#include <isa-l/crc.h>

uint32_t ol_crc32c(uint32_t crc, const void *p, size_t n)
{
    /* ISA-L keeps the raw register: no inversion on the way in or out. */
    unsigned int reg = ~crc;
    const unsigned char *b = p;
    while (n) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : n;
        reg = crc32_iscsi((unsigned char *)b, (int)chunk, reg);
        b += chunk;
        n -= chunk;
    }
    ol_simd_clean();   /* base/simd.h: ISA-L leaves the vector unit dirty */
    return ~reg;
}
