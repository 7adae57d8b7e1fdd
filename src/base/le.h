/*
 * le.h - little-endian integer loads and stores, byte by byte: buffers need
 * no alignment and the host's byte order does not matter.
 *
 * Owns: ol_le_ld16/32/64 and ol_le_st16/32/64, the byte access of the
 * codecs (store/meta.c, kv/proto.c) and of the engine's multipart records.
 * Must not: include anything but <stdint.h>, or do anything but move bytes.
 */
#ifndef OL_BASE_LE_H
#define OL_BASE_LE_H

#include <stdint.h>

static inline uint16_t ol_le_ld16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (unsigned)p[1] << 8);
}

static inline uint32_t ol_le_ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static inline uint64_t ol_le_ld64(const uint8_t *p)
{
    return (uint64_t)ol_le_ld32(p) | (uint64_t)ol_le_ld32(p + 4) << 32;
}

static inline void ol_le_st16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void ol_le_st32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void ol_le_st64(uint8_t *p, uint64_t v)
{
    ol_le_st32(p, (uint32_t)v);
    ol_le_st32(p + 4, (uint32_t)(v >> 32));
}

#endif
