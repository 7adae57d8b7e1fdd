/*
 * ec.h - Reed-Solomon erasure coding of one object stripe over ISA-L.
 *
 * Owns: the code's geometry (k data shards + m parity shards, k+m <= 32),
 * the encode matrix and its expanded tables, and a small LRU cache of
 * decode tables, all inside struct ol_ec, which the caller owns (one per
 * core: no locks, nothing allocates after ol_ec_init).
 *
 * The code is systematic: shards 0..k-1 are the data itself, shards
 * k..k+m-1 the parity. The generator is ISA-L's Cauchy matrix
 * (gf_gen_cauchy1_matrix: identity on top, 1/(i ^ j) below), so every
 * square submatrix of the parity part is invertible and any k of the k+m
 * shards rebuild all the others: every pattern of up to m lost shards is
 * decodable. All GF(2^8) arithmetic is ISA-L's (ec_init_tables,
 * ec_encode_data, gf_invert_matrix, gf_mul); none is written here.
 *
 * Shard numbering and masks: shard i (0 <= i < k+m) is bit i of a uint32_t
 * mask; arrays of shard pointers are indexed the same way (data, then
 * parity).
 *
 * Must not: allocate, do I/O, checksum (see store/bitrot.h), know objects,
 * stripes or the daemon. Callers validate lengths and masks coming from
 * outside (the request handler, the metadata reader); the coding calls
 * below check masks once because a wrong mask would read or write the
 * wrong buffer.
 */
#ifndef OL_STORE_EC_H
#define OL_STORE_EC_H

#include <stddef.h>
#include <stdint.h>

#define OL_EC_MAX_DATA   16u  /* k <= 16 */
#define OL_EC_MAX_PARITY 16u  /* m <= 16 */
#define OL_EC_MAX_SHARDS 32u  /* k + m <= 32: one bit per shard in a uint32_t */
#define OL_EC_CACHE      8u   /* decode tables kept per struct ol_ec */
#define OL_EC_ALIGN      64u  /* shard lengths are multiples of this (see shard_len) */

/* One cached set of decode tables (internal to ec.c; public for sizing). */
struct ol_ec_dec {
    uint64_t key;   /* source mask | want mask << 32; 0 = empty entry */
    uint64_t used;  /* LRU stamp: ol_ec.clock at the last use */
    unsigned nout;  /* popcount of the want mask: rows in tbls */
    _Alignas(64) uint8_t tbls[32 * OL_EC_MAX_DATA * OL_EC_MAX_PARITY];
};

/*
 * One code. About 73 KiB: keep it in the per-core context or on the heap,
 * not on a small stack. Fields are read-only for callers except the
 * counters, which callers may read (and reset).
 */
struct ol_ec {
    unsigned k, m, n;        /* n = k + m */
    uint32_t all;            /* mask of the n shards */
    uint64_t clock;          /* LRU clock, advanced per reconstruct */
    uint64_t cache_hits;     /* reconstructs that found their decode tables */
    uint64_t cache_misses;   /* reconstructs that built (and cached) them */
    uint8_t matrix[OL_EC_MAX_SHARDS * OL_EC_MAX_DATA];  /* n x k generator */
    _Alignas(64) uint8_t enc_tbls[32 * OL_EC_MAX_DATA * OL_EC_MAX_PARITY];
    struct ol_ec_dec cache[OL_EC_CACHE];
};

/*
 * Sets ec up for k data + m parity shards: builds the n x k Cauchy
 * generator and the parity rows' expanded tables; empties the cache.
 * m == 0 is a valid code with no parity (encode does nothing; nothing can
 * be rebuilt). Returns 0, or -EINVAL when k == 0, k > OL_EC_MAX_DATA or
 * m > OL_EC_MAX_PARITY (ec is then zeroed). No exit call: ec holds no
 * resources.
 */
int ol_ec_init(struct ol_ec *ec, unsigned k, unsigned m);

/*
 * Bytes per shard for a stripe of stripe_bytes data bytes:
 * ceil(stripe_bytes / k), rounded up to a multiple of OL_EC_ALIGN (64) so
 * every shard starts and ends on a SIMD vector boundary. 0 for an empty
 * stripe. The k shards then hold k * shard_len >= stripe_bytes bytes: the
 * caller cuts the stripe into k consecutive pieces of shard_len bytes and
 * zero-fills the tail of the last piece(s) before encoding (the padding is
 * the caller's; the object's metadata keeps the true length). k must be
 * 1..OL_EC_MAX_DATA.
 */
size_t ol_ec_shard_len(uint64_t stripe_bytes, unsigned k);

/*
 * Computes the m parity shards of one stripe: parity[0..m-1] from
 * data[0..k-1], each len bytes (len <= INT_MAX; any length works, multiples
 * of 64 are fastest). Buffers need no alignment and must not overlap.
 * Nothing happens when m == 0.
 */
void ol_ec_encode(const struct ol_ec *ec, size_t len, uint8_t *const *data, uint8_t **parity);

/*
 * Plain reference twin of ol_ec_encode, same contract: ISA-L's baseline
 * (non-SIMD) kernel over the same tables. For tests and benchmarks.
 */
void ol_ec_encode_ref(const struct ol_ec *ec, size_t len, uint8_t *const *data,
                      uint8_t **parity);

/*
 * Rebuilds lost shards of one stripe. shards[0..n-1] point at len-byte
 * buffers (data shards, then parity); present is the mask of shards that
 * hold good bytes, want the mask of shards to rebuild into their buffers
 * (data and/or parity; a subset of the shards not present). Reads exactly
 * k sources: the first k present shards in index order (other present
 * shards are not touched, so their bytes may be anything). Writes only the
 * wanted shards. Decode tables for (sources, want) come from the cache, or
 * are built and cached (LRU, OL_EC_CACHE entries).
 *
 * Returns 0 (want == 0 does nothing); -EINVAL when present or want name a
 * shard >= n, or want overlaps present; -ENODATA when fewer than k shards
 * are present (too many lost: nothing is written).
 */
int ol_ec_reconstruct(struct ol_ec *ec, size_t len, uint8_t **shards, uint32_t present,
                      uint32_t want);

#endif
