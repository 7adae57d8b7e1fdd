/*
 * awschunked.h - decoder of S3's aws-chunked request bodies.
 *
 * Owns: the framing of the three streaming payload modes a PUT or
 * UploadPart may use (x-amz-content-sha256):
 *
 *   STREAMING-AWS4-HMAC-SHA256-PAYLOAD           hex;chunk-signature=SIG CRLF data CRLF
 *                                                ... 0;chunk-signature=SIG CRLF CRLF
 *   STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER   the same, then after the final
 *                                                chunk: trailer lines, then
 *                                                x-amz-trailer-signature:SIG CRLF, CRLF
 *   STREAMING-UNSIGNED-PAYLOAD-TRAILER           hex CRLF data CRLF ... 0 CRLF,
 *                                                trailer lines, CRLF
 *
 * and, in the signed modes, the chain of chunk signatures (seeded by the
 * request's signature) and the trailer signature (sigv4.h). Data comes out
 * as slices of the caller's input, no copy. Each chunk's data is hashed
 * (SHA-256) for its signature; with a staging buffer from the caller
 * (OL_AWSC_STAGE bytes) every other chunk is copied there and hashed
 * beside the next one as that one arrives, two messages side by side
 * (base/sha256.h: ~1.45x OpenSSL's one-stream rate), so a chunk's
 * signature may be checked only while the next one is received (at the
 * latest before the final chunk's). Or the caller hashes the data itself
 * (ol_awsc_hash_outside: with the MD5 of the same bytes in one pass,
 * base/md5sha.h). Either way the caller must not commit anything before
 * ol_awsc_finish() returns 0.
 *
 * Must not: allocate, block, or know what the body is for.
 *
 * Limits: a chunk header line is at most OL_AWSC_MAX_LINE bytes; the
 * trailer at most OL_AWSC_MAX_TRAILER bytes and OL_AWSC_MAX_TRAILERS lines;
 * chunk sizes at most 16 hex digits (no overflow).
 *
 * Errors (map to S3 errors): -EBADMSG bad framing (IncompleteBody /
 * InvalidRequest); -EACCES a chunk or trailer signature does not match
 * (SignatureDoesNotMatch); -EMSGSIZE the decoded length differs from
 * x-amz-decoded-content-length (IncompleteBody); -E2BIG a limit above.
 */
#ifndef OL_S3_AWSCHUNKED_H
#define OL_S3_AWSCHUNKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/sha.h>

#include "s3/sigv4.h"

#define OL_AWSC_MAX_LINE     256u
#define OL_AWSC_MAX_TRAILER  1024u
#define OL_AWSC_MAX_TRAILERS 8u
/* Staging for the signed modes: room for the chunk that waits for its
 * pair. The sizes clients use (minio-go 64 KiB, the AWS SDKs for Java
 * 128 KiB) fit; of a longer chunk, what outgrows the stage is hashed
 * alone. */
#define OL_AWSC_STAGE        262144u

enum ol_awsc_mode {
    OL_AWSC_SIGNED = 1,          /* STREAMING-AWS4-HMAC-SHA256-PAYLOAD */
    OL_AWSC_SIGNED_TRAILER,      /* STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER */
    OL_AWSC_UNSIGNED_TRAILER,    /* STREAMING-UNSIGNED-PAYLOAD-TRAILER */
};

struct ol_awsc {
    int mode, state, err;
    uint64_t left;                    /* data bytes left in this chunk */
    uint64_t total;                   /* decoded bytes so far */
    uint64_t expect;                  /* x-amz-decoded-content-length; UINT64_MAX: none */
    unsigned line_len;
    char line[OL_AWSC_MAX_LINE];
    /* signed modes */
    uint8_t key[32], prev[32], want[32];
    char amz_date[17];
    char scope[OL_SIGV4_SCOPE_MAX];
    size_t scope_len;
    /* chunk hashes (awschunked.c): lane[cur] is the chunk being received,
     * lane[wait] (wait >= 0) an ended one whose staged bytes wait to be
     * hashed beside the next chunk's */
    uint8_t *stage;                   /* NULL: hash data as it passes */
    struct ol_awsc_lane {
        SHA256_CTX sha;               /* between whole blocks while paired */
        uint8_t want[32];             /* its announced signature */
        uint32_t used, off;           /* staged bytes; those hashed */
    } lane[2];
    int cur, wait;
    bool direct;                      /* lane[cur] hashed from the input */
    bool outside;                     /* the caller hashes (ol_awsc_hash_outside) */
    unsigned tail_len;
    uint8_t tail[64];                 /* a block of it cut by the input */
    uint64_t paired;                  /* bytes hashed beside another chunk's */
    /* trailer: canonical "name:value\n" lines (the signature line excluded) */
    unsigned trailer_len, ntrailers;
    char trailer[OL_AWSC_MAX_TRAILER];
    bool trailer_signed;
};

/*
 * ol_awsc_mode_of - the mode named by an x-amz-content-sha256 value, or 0
 * when the value names no streaming mode.
 */
int ol_awsc_mode_of(const char *v, size_t n);

/*
 * ol_awsc_init - start decoding. For the signed modes: key is the signing
 * key, amz_date the request's X-Amz-Date, scope its credential scope, seed
 * the request's own (already verified) signature, stage OL_AWSC_STAGE
 * bytes the caller lends until the body ends (or NULL: each chunk is
 * hashed alone, as it passes). For OL_AWSC_UNSIGNED_TRAILER those may be
 * NULL. decoded_len: x-amz-decoded-content-length, or UINT64_MAX when the
 * request did not send it.
 */
void ol_awsc_init(struct ol_awsc *st, int mode, const uint8_t key[32], const char *amz_date,
                  const char *scope, size_t scope_len, const uint8_t seed[32],
                  uint64_t decoded_len, uint8_t *stage);

/*
 * ol_awsc_feed - decode body bytes in[0..n). Returns the number of input
 * bytes consumed (> 0 when n > 0) and sets *data and *data_len to the decoded
 * bytes among them (a slice of in, possibly empty); call again with the
 * rest. Returns a negative error (see above) once the body is bad; the
 * decoder then stays failed.
 */
long ol_awsc_feed(struct ol_awsc *st, const char *in, size_t n, const char **data,
                  size_t *data_len);

/*
 * ol_awsc_hash_outside - the caller hashes every chunk's data (signed
 * modes; call after ol_awsc_init, before the first feed): each data slice
 * a feed returns is added to ol_awsc_chunk_sha() before the next feed,
 * which checks a chunk's signature once its CRLF comes. A slice the
 * caller leaves out makes the chunk's signature fail.
 */
void ol_awsc_hash_outside(struct ol_awsc *st);
/* The SHA-256 of the chunk the last data slice belongs to. */
SHA256_CTX *ol_awsc_chunk_sha(struct ol_awsc *st);

/* The body has ended: 0 when the final chunk (and trailer) was complete and
 * verified, else -EBADMSG / -EMSGSIZE / the earlier error. */
int ol_awsc_finish(const struct ol_awsc *st);

/* A trailer value by lower-case name (e.g. "x-amz-checksum-crc32"), valid
 * while st lives; NULL when absent. */
const char *ol_awsc_trailer(const struct ol_awsc *st, const char *name, size_t *len);

#endif
