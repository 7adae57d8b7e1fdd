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

#include <openssl/sha.h>

#include "base/md5.h"

/* Whether the one-pass kernel runs here (x86-64 with the SHA
 * extensions); else ol_md5_sha256_update is two updates. */
bool ol_md5sha_fast(void);

/* Adds p[0..n) to the lone MD5 stream h (set == NULL) and to c: the whole
 * blocks in one pass when both streams stand at the same offset within a
 * block (the case when their bytes have been the same since a block
 * boundary, as a chunk's are), the rest by each on its own. A lane of a
 * set gets ol_md5_update. Returns the bytes that went through the one
 * pass. */
size_t ol_md5_sha256_update(struct ol_md5 *h, SHA256_CTX *c, const void *p, size_t n);

#endif
