/*
 * checksum.h - S3's flexible checksums: x-amz-checksum-crc32, -crc32c,
 * -crc64nvme, -sha1, -sha256, computed over a stream, printed and parsed in
 * base64 as S3 does.
 *
 * Owns: the algorithm table (header names, x-amz-checksum-algorithm
 * values, raw sizes), incremental computation, base64 of the raw value.
 * CRC32 and CRC32C come from ISA-L, SHA-1 and SHA-256 from OpenSSL. Debian's
 * ISA-L (2.30) has no CRC-64/NVME (ISA-L calls it "rocksoft", added in
 * 2.31) and no other Debian C library provides it, so it is computed here:
 * a slice-by-8 table over the reflected polynomial, with a bitwise
 * reference twin that the tests compare it against.
 *
 * Also owns the CRC combine behind S3's FULL_OBJECT checksums of multipart
 * uploads: the CRC of A || B from crc(A), crc(B) and the length of B, so a
 * Complete makes the whole object's CRC from its parts' without reading
 * them (zlib's crc32_combine method, for the three CRCs S3 offers; no
 * Debian C library exports it for CRC-32C or CRC-64/NVME).
 *
 * Must not: know requests or storage. The S3 layer decides where a
 * checksum comes from (header or trailer) and compares.
 */
#ifndef OL_S3_CHECKSUM_H
#define OL_S3_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

enum ol_ck_algo {
    OL_CK_NONE = 0,
    OL_CK_CRC32,
    OL_CK_CRC32C,
    OL_CK_CRC64NVME,
    OL_CK_SHA1,
    OL_CK_SHA256,
    OL_CK_COUNT
};

#define OL_CK_MAX_RAW 32u   /* largest raw checksum (SHA-256) */
#define OL_CK_MAX_B64 44u   /* its base64 */

struct ol_ck {
    int algo;
    uint64_t crc;           /* CRC state */
    EVP_MD_CTX *md;         /* SHA state: the caller's context */
};

/* "x-amz-checksum-crc32" ... by lower-case header name; OL_CK_NONE if none. */
int ol_ck_algo_of_header(const char *name, size_t n);
/* "CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256" (any case); OL_CK_NONE if none. */
int ol_ck_algo_of_name(const char *name, size_t n);
/* The header name and the upper-case name of an algorithm. */
const char *ol_ck_header(int algo);
const char *ol_ck_name(int algo);
/* Raw size in bytes: 4, 4, 8, 20, 32. */
size_t ol_ck_raw_size(int algo);

/* Starts a checksum. md: a context the caller owns, used by SHA-1 and
 * SHA-256 only (NULL is fine for the CRCs). Returns 0 or -EINVAL / -EIO. */
int ol_ck_init(struct ol_ck *c, int algo, EVP_MD_CTX *md);
void ol_ck_update(struct ol_ck *c, const void *p, size_t n);
/* Writes the raw checksum (big-endian for the CRCs, as S3 prints them) and
 * returns its size. */
size_t ol_ck_final(struct ol_ck *c, uint8_t out[OL_CK_MAX_RAW]);

/* Base64 (with padding) of raw[0..n): writes 4*ceil(n/3) bytes + NUL,
 * returns the length. */
size_t ol_ck_b64(const uint8_t *raw, size_t n, char out[OL_CK_MAX_B64 + 1]);
/* Decodes a base64 value that must be exactly `want` raw bytes (out holds
 * want bytes, want <= OL_CK_MAX_RAW). Returns 0 or
 * -EINVAL (bad base64 or wrong size: S3's InvalidRequest). */
int ol_ck_from_b64(const char *s, size_t n, size_t want, uint8_t *out);

/* CRC-64/NVME (poly 0xAD93D23594C93659, reflected, init and xorout ~0):
 * continue from `crc` (0 to start). The bitwise reference twin. */
uint64_t ol_crc64nvme(uint64_t crc, const void *p, size_t n);
uint64_t ol_crc64nvme_ref(uint64_t crc, const void *p, size_t n);

/* ---- CRC combine ----------------------------------------------------------
 *
 * For CRC32, CRC32C and CRC64NVME (reflected, init and xorout all ones, so
 * crc(A || B) = shift(crc(A), |B| zero bytes) ^ crc(B)): the CRC values
 * here are numbers (what ol_ck keeps in .crc), not the big-endian bytes S3
 * prints; ol_ck_crc_load / ol_ck_crc_store convert.
 */

/* Whether algo is one of the CRCs above (S3's FULL_OBJECT algorithms). */
int ol_ck_is_crc(int algo);
/* The CRC of A || B given crc_a = crc(A), crc_b = crc(B) and len_b = |B|
 * in bytes, for a CRC algo (ol_ck_is_crc; anything else returns 0).
 * O(log len_b) multiplications in GF(2)[x] mod the polynomial, with a
 * table of x^(2^k) made once per process. */
uint64_t ol_ck_crc_combine(int algo, uint64_t crc_a, uint64_t crc_b, uint64_t len_b);
/* The reference twin: crc_a pushed through len_b zero bytes bit by bit
 * (O(len_b)), for the tests. */
uint64_t ol_ck_crc_combine_ref(int algo, uint64_t crc_a, uint64_t crc_b, uint64_t len_b);
/* A CRC's raw big-endian bytes (ol_ck_raw_size(algo) of them) as a number,
 * and back. */
uint64_t ol_ck_crc_load(int algo, const uint8_t *raw);
void ol_ck_crc_store(int algo, uint64_t crc, uint8_t *raw);

#endif
