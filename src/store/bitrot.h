/*
 * bitrot.h - the on-disk framing of one shard file: the shard's bytes cut
 * into blocks, each preceded by a checksum that every read verifies.
 *
 * Owns: the layout of a shard file, format version 1, and the checksum of
 * each block. Pure functions: no file I/O (the engine reads and writes
 * shard files on io_uring elsewhere), no allocation, no state.
 *
 * A shard of S bytes is cut into blocks of B = block_size bytes (the shard
 * length of one stripe, ol_ec_shard_len); the last block holds the
 * remaining S - (nblocks - 1) * B bytes (1..B). nblocks = ceil(S / B); an
 * empty shard has no blocks and an empty file. Block i (0-based) sits at
 * file offset i * (8 + B):
 *
 *   offset        size  field
 *   i*(8+B) + 0      8  sum: XXH3-64 of the block's bytes, little-endian
 *   i*(8+B) + 8    len  the block's bytes (len = B, or less for the last)
 *
 *   file size = S + 8 * nblocks, or (padded) that rounded up to a
 *               multiple of OL_BITROT_PAD with zero bytes; nothing reads
 *               past the last block
 *
 * The engine pads the shard files of a single PUT (written with O_DIRECT
 * in whole pages, docs/store-format.md); an upload's part file is not
 * padded: its part record follows the last block.
 *
 * The sum is XXH3_64bits_withSeed(block bytes, len, bseed) with the block
 * seed bseed = XXH3_64bits_withSeed(i as 8 bytes little-endian, 8, seed),
 * where seed is the caller's 64-bit value for this shard file (derived
 * from the object's data-dir id and the shard number, say). A block copied
 * from another object, another shard or another offset, a block moved
 * within the file, or a torn or truncated block does not verify (XXH3
 * covers the length too). The checksum guards against rot and misplaced
 * writes, not against an adversary.
 *
 * The file carries no magic or version of its own: the object's metadata
 * records the framing version (OL_BITROT_VERSION), block_size, the shard
 * length and the seed.
 *
 * Must not: do I/O, know objects, stripes or erasure coding.
 */
#ifndef OL_STORE_BITROT_H
#define OL_STORE_BITROT_H

#include <stddef.h>
#include <stdint.h>

#define OL_BITROT_VERSION  1
#define OL_BITROT_HDR_SIZE 8u  /* checksum bytes before each block */

/* Layout helpers; block_size must be >= 1 (the metadata reader checks it). */

/* Number of blocks of a shard of shard_bytes bytes: ceil(shard_bytes / block_size). */
static inline uint64_t ol_bitrot_nblocks(uint32_t block_size, uint64_t shard_bytes)
{
    return (shard_bytes + block_size - 1) / block_size;
}

/* File offset of block idx's 8-byte checksum (its bytes follow at +8). */
static inline uint64_t ol_bitrot_block_off(uint32_t block_size, uint64_t idx)
{
    return idx * ((uint64_t)block_size + OL_BITROT_HDR_SIZE);
}

/* Bytes of block idx of a shard of shard_bytes bytes (0 past the end). */
static inline uint64_t ol_bitrot_block_len(uint32_t block_size, uint64_t shard_bytes,
                                           uint64_t idx)
{
    uint64_t start = idx * block_size;
    if (start >= shard_bytes)
        return 0;
    return shard_bytes - start < block_size ? shard_bytes - start : block_size;
}

/* Zero bytes that pad a shard file of size bytes to a multiple of OL_BITROT_PAD. */
#define OL_BITROT_PAD 4096u
static inline uint32_t ol_bitrot_pad(uint64_t size)
{
    return (uint32_t)((OL_BITROT_PAD - size % OL_BITROT_PAD) % OL_BITROT_PAD);
}

/* Size of the shard file holding shard_bytes bytes: shard_bytes + 8 per block. */
static inline uint64_t ol_bitrot_file_size(uint32_t block_size, uint64_t shard_bytes)
{
    return shard_bytes + OL_BITROT_HDR_SIZE * ol_bitrot_nblocks(block_size, shard_bytes);
}

/* The 64-bit checksum of block idx (len bytes at data) under seed. */
uint64_t ol_bitrot_sum(uint64_t seed, uint64_t idx, const void *data, size_t len);

/*
 * Writes the 8-byte header of block idx (len bytes at data, the whole
 * block) into out_hdr8 (OUT, 8 bytes).
 */
void ol_bitrot_seal(uint64_t seed, uint64_t idx, const void *data, size_t len,
                    uint8_t out_hdr8[OL_BITROT_HDR_SIZE]);

/*
 * Checks block idx as read back: hdr8 its 8-byte header, data its len
 * bytes. Returns 0 when the checksum matches, -EBADMSG when it does not
 * (rot, torn write, wrong block, wrong seed, wrong length).
 */
/* XXH3_64bits_withSeed built for AVX2 (xxh3_avx2.c), which ol_bitrot_sum
 * uses when ol_bitrot_xxh3_avx2_built and the CPU has AVX2; exposed for the
 * unit test that holds it to the library. */
extern const int ol_bitrot_xxh3_avx2_built;
uint64_t ol_bitrot_xxh3_avx2(const void *data, size_t len, uint64_t seed);

int ol_bitrot_verify(uint64_t seed, uint64_t idx, const uint8_t hdr8[OL_BITROT_HDR_SIZE],
                     const void *data, size_t len);

#endif
