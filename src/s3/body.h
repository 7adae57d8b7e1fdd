/*
 * body.h - what an S3 request body must prove before anything it carries is
 * committed: its payload signature mode (the body's SHA-256, or aws-chunked
 * chunk signatures, or nothing), Content-MD5, and a flexible checksum from
 * a header or a trailer; and the MD5 that becomes a PUT's ETag.
 *
 * Owns: one pass over the body bytes as they arrive, de-chunking
 * aws-chunked bodies (awschunked.h) and feeding every hash at once (a
 * signed body's chunk SHA-256s, or its payload SHA-256, and its MD5 in
 * one interleaved pass when the caller lends a lone MD5 stream for it:
 * ctx.one_pass; a payload SHA-256 with the MD5 from a lane of the core's
 * MD5 set, two uploads' SHA-256s at a time: base/md5.h's
 * ol_md5_with_sha256); the verdict at the end. The decoded bytes go to the caller as slices of its
 * input (no copy), before they are verified: the caller stages them and
 * commits only when ol_s3_body_end() says OL_S3_OK.
 *
 * Must not: allocate (the caller lends an EVP_MD_CTX and an MD5 lane), or know where the
 * bytes go.
 */
#ifndef OL_S3_BODY_H
#define OL_S3_BODY_H

#include <stdbool.h>
#include <stdint.h>

#include <openssl/evp.h>

#include "base/md5.h"
#include "base/md5sha.h"
#include "http/parse.h"
#include "s3/auth.h"
#include "s3/awschunked.h"
#include "s3/checksum.h"
#include "s3/errors.h"

/* The hash contexts a body needs; owned by the caller, reusable. */
struct ol_s3_body_ctx {
    uint8_t *stage;        /* aws-chunked: OL_AWSC_STAGE bytes, or NULL */
    struct ol_md5 *md5;    /* the ETag: a lane of the core's MD5 set (base/md5.h) */
    bool one_pass;         /* md5 is a lone stream, hashed in one pass with a signed
                              body's chunk SHA-256s or its payload SHA-256
                              (base/md5sha.h) */
    EVP_MD_CTX *cksum;     /* a SHA-1 / SHA-256 flexible checksum */
    bool object_checksums; /* the x-amz-checksum-* headers are the object's
                              (CompleteMultipartUpload), not this body's:
                              left to the caller */
};

struct ol_s3_body {
    int payload;                     /* enum ol_s3_payload */
    bool chunked;                    /* aws-chunked framing */
    bool one_pass;                   /* MD5 and chunk or payload SHA-256s in one pass */
    bool sha_in_md5;                 /* the payload SHA-256 fed by the MD5 lane
                                        (ol_md5_with_sha256) */
    uint64_t one_pass_bytes;         /* bytes that went through it */
    struct ol_awsc awsc;
    struct ol_s3_body_ctx ctx;
    uint8_t body_sha256[32];         /* OL_S3_PAY_SHA256: the one signed */
    SHA256_CTX sha;                  /* OL_S3_PAY_SHA256: the one computed */
    bool md5_given;
    uint8_t md5_want[16];
    int ck_algo;                     /* flexible checksum, or OL_CK_NONE */
    bool ck_trailer;                 /* its value comes in the trailer */
    bool ck_given;                   /* value known (header) */
    uint8_t ck_want[OL_CK_MAX_RAW];
    struct ol_ck ck;
    uint64_t expect;                 /* decoded bytes announced */
    uint64_t got;                    /* decoded bytes seen */
    uint64_t hashed;                 /* of them, through ol_s3_body_hash */
    enum ol_s3_err err;              /* first failure while feeding */
    /* results, valid after ol_s3_body_end() == OL_S3_OK */
    uint8_t md5[16];
    uint8_t ck_raw[OL_CK_MAX_RAW];
    size_t ck_len;
};

/*
 * ol_s3_body_begin - check the body's headers and get ready. auth: the
 * request's authentication (auth.h); content_length: the Content-Length
 * header (-1 when absent, i.e. HTTP chunked framing: MissingContentLength
 * unless the payload is aws-chunked, whose decoded length is a header).
 * Checks: Content-MD5 (base64 of 16 bytes, else InvalidDigest); at most one
 * x-amz-checksum-<algo> header, with a valid value (InvalidRequest);
 * x-amz-trailer naming one checksum, only with a trailer mode
 * (InvalidRequest); aws-chunked modes need x-amz-decoded-content-length
 * (MissingContentLength). Returns OL_S3_OK or the error to answer.
 */
enum ol_s3_err ol_s3_body_begin(struct ol_s3_body *b, const struct ol_s3_auth *auth,
                                const struct ol_http_header *hdrs, size_t nhdrs,
                                int64_t content_length, const struct ol_s3_body_ctx *ctx);

/*
 * ol_s3_body_feed - the next bytes of the body as received. Returns the
 * number of input bytes consumed (call again with the rest) and sets
 * *data and *len to the decoded bytes among them; or -1 once the body is
 * bad (b->err says which S3 error: SignatureDoesNotMatch, IncompleteBody,
 * InvalidRequest, ...). The decoded bytes are not hashed yet: pass each
 * slice to ol_s3_body_hash, in order, before the next feed.
 */
long ol_s3_body_feed(struct ol_s3_body *b, const char *in, size_t n, const char **data,
                     size_t *len);

/*
 * ol_s3_body_hash - runs the payload SHA-256, the MD5 and the flexible
 * checksum over a slice ol_s3_body_feed gave (every slice, in order, before
 * the next feed; after the caller has handed the bytes on), and with
 * one_pass the chunk's SHA-256 too. ol_s3_body_end fails with
 * InternalError (or, one_pass, SignatureDoesNotMatch) when a slice was
 * skipped.
 */
void ol_s3_body_hash(struct ol_s3_body *b, const char *p, size_t n);

/*
 * ol_s3_body_hash_onto - ol_s3_body_hash for a one-pass signed payload (not
 * aws-chunked) that other uploads on its core now hash beside in the MD5
 * set: p up to the first block edge in one pass, then the stream moves to
 * `lane` (a lane of that set, lent and unused: ol_md5_take) with its
 * SHA-256, and the rest of p goes through it. False, and nothing hashed,
 * when b is not such a body or p holds no block edge; the caller then
 * gives the lane back and hashes p with ol_s3_body_hash.
 */
bool ol_s3_body_hash_onto(struct ol_s3_body *b, struct ol_md5 *lane, const char *p, size_t n);

/*
 * ol_s3_body_end - the body has ended. Verifies the length, the payload
 * hash (XAmzContentSHA256Mismatch), the chunk and trailer signatures, the
 * Content-MD5 (BadDigest) and the flexible checksum (BadDigest, or
 * InvalidRequest when a trailer that was announced never came). On OL_S3_OK,
 * b->md5 holds the body's MD5 and b->ck_raw / ck_len its flexible checksum.
 */
enum ol_s3_err ol_s3_body_end(struct ol_s3_body *b);

#endif
