/*
 * crc32c.h - CRC-32C (Castagnoli; iSCSI, RFC 3720) over ISA-L.
 *
 * Owns: the one definition of the CRC-32C every wire and disk format of
 * OpenLake uses (the KV protocol, the KV slab headers, the node RPC):
 * reflected polynomial 0x82F63B78, initial value and final XOR 0xFFFFFFFF;
 * check value ol_crc32c(0, "123456789", 9) == 0xE3069283. Chains like
 * zlib's crc32: crc is 0 to start, or the result over the preceding bytes.
 * Must not: depend on anything but ISA-L.
 */
#ifndef OL_BASE_CRC32C_H
#define OL_BASE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Any n; p may be NULL when n is 0. */
uint32_t ol_crc32c(uint32_t crc, const void *p, size_t n);

#endif
