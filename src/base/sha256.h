/*
 * sha256.h - SHA-256 of two messages at once.
 *
 * A signed streaming upload (STREAMING-AWS4-HMAC-SHA256-PAYLOAD) asks the
 * server for the SHA-256 of every 64 KiB chunk: profiled, 28 % of a core's
 * time on 64 MiB PUTs, where OpenSSL hashes one stream at a time (2.1 GB/s
 * with the SHA extensions, which a single chain keeps half busy). Chunks
 * are independent messages, so two of them can be hashed side by side.
 *
 * Owns: the 64 rounds of two streams interleaved (sha256.c, SHA extensions
 * on x86-64). OpenSSL owns the streams themselves (SHA256_CTX): init,
 * partial blocks, padding, the digest; with no SHA extensions (or on
 * another architecture) everything is OpenSSL's.
 *
 * Must not: allocate, keep pointers, or be called with contexts that are
 * not OpenSSL's SHA-256 ones.
 *
 *   SHA256_CTX a, b;
 *   ol_sha256_init(&a); ol_sha256_init(&b);
 *   ol_sha256_update2(&a, pa, na, &b, pb, nb);   // both at once
 *   ol_sha256_update(&a, p, n);                  // one, OpenSSL
 *   ol_sha256_final(&a, digest);
 */
#ifndef OL_BASE_SHA256_H
#define OL_BASE_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/sha.h>

/* Whether the two-stream kernel runs here (else update2 is two updates). */
bool ol_sha256_x2_fast(void);

void ol_sha256_init(SHA256_CTX *c);
void ol_sha256_update(SHA256_CTX *c, const void *p, size_t n);
void ol_sha256_final(SHA256_CTX *c, uint8_t out[32]);

/* Adds pa[0..na) to a and pb[0..nb) to b: the whole blocks both have (when
 * neither holds a partial block) together, the rest one by one. Returns
 * the bytes of each that went through the two-stream kernel. */
size_t ol_sha256_update2(SHA256_CTX *a, const uint8_t *pa, size_t na, SHA256_CTX *b,
                         const uint8_t *pb, size_t nb);

#endif
