/*
 * md5sha.h - the MD5 and the SHA-256 of the same bytes in one pass.
 *
 * A signed streaming upload (aws-chunked, STREAMING-AWS4-HMAC-SHA256-
 * PAYLOAD) needs both of every byte: the MD5 for its ETag, the SHA-256 for
 * each chunk's signature. Each alone is one serial chain that leaves most
 * of the core idle: MD5 waits on its scalar additions and rotates, SHA-256
 * (SHA extensions) on SHA256RNDS2's latency, in other units. One loop that
 * runs a block of each, four MD5 steps then four SHA-256 rounds, keeps
 * both busy: on the AMD EPYC of docs/benchmarks.md one stream of both at
 * 1.65 ms per MiB, where OpenSSL's MD5 then its SHA-256 take 2.24 (MD5
 * alone 1.58). When an upload has the core to itself (no other upload's
 * bytes to hash its MD5 beside, base/md5.h) this is what its bytes go
 * through (s3/body.h).
 *
 * Owns: the interleaved kernel (md5sha.c: the steps of base/md5_steps.h,
 * the rounds of base/sha256_ni.h) and feeding it from the two streams'
 * states. OpenSSL owns the rest of both streams (partial blocks, padding,
 * digests), as in md5.h and sha256.h.
 *
 * Must not: allocate, keep pointers, or take a lane of an MD5 set (its
 * bytes belong to the set's staging).
 *
 *   struct ol_md5 m = {0};  SHA256_CTX c;
 *   ol_md5_init(&m);  ol_sha256_init(&c);
 *   ol_md5_sha256_update(&m, &c, p, n);   // as many times as it takes
 *   ol_md5_final(&m, etag);  ol_sha256_final(&c, digest);
 */
#ifndef OL_BASE_MD5SHA_H
#define OL_BASE_MD5SHA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/sha.h>

#include "base/md5.h"

/* Whether the one-pass kernel runs here (x86-64 with the SHA
 * extensions); else ol_md5_sha256_update is two updates. */
bool ol_md5sha_fast(void);

/* The kernel for a set's group of uploads that each need both (base/md5.h:
 * lanes with a SHA-256 companion): whether this CPU runs it (the SHA
 * extensions and AVX), and the kernel itself: four MD5 lanes, lane l
 * hashing nb blocks at p[l] into the state md[l], and the SHA-256
 * contexts c[0..ns) (1 <= ns <= 4; each between whole blocks, num == 0)
 * of lanes 0..ns-1 over the same blocks, all interleaved; a lane with no
 * stream repeats another's pointer (its state is thrown away). */
bool ol_md5sha_x4_fast(void);
/* Tests: the kernel's MD5 in "avx" (VEX-128, rotates by shifts) or
 * "avx512" (EVEX-128 rotate and three-input logic) only; NULL: the best
 * this CPU runs again. False when the CPU has no such kernel. */
bool ol_md5sha_x4_only(const char *kernel);
void ol_md5sha_x4(uint32_t (*md)[4], SHA256_CTX *const *c, const uint8_t *const *p,
                  unsigned ns, size_t nb);

/* Adds p[0..n) to the lone MD5 stream h (set == NULL) and to c: the whole
 * blocks in one pass when both streams stand at the same offset within a
 * block (the case when their bytes have been the same since a block
 * boundary, as a chunk's are), the rest by each on its own. A lane of a
 * set gets ol_md5_update. Returns the bytes that went through the one
 * pass. */
size_t ol_md5_sha256_update(struct ol_md5 *h, SHA256_CTX *c, const void *p, size_t n);

#endif
