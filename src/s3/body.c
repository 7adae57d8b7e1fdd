/*
 * body.c - S3 request body verification (see body.h).
 */
#include "s3/body.h"

#include "base/sha256.h"
#include "base/simd.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

static const struct ol_http_header *hdr(const struct ol_http_header *h, size_t n,
                                        const char *name)
{
    size_t nl = strlen(name);
    for (size_t i = 0; i < n; i++)
        if (h[i].name_len == nl && strncasecmp(h[i].name, name, nl) == 0)
            return &h[i];
    return NULL;
}

static int parse_u64(const char *s, size_t n, uint64_t *out)
{
    if (n == 0 || n > 19)
        return -EINVAL;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -EINVAL;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return 0;
}

enum ol_s3_err ol_s3_body_begin(struct ol_s3_body *b, const struct ol_s3_auth *auth,
                                const struct ol_http_header *hdrs, size_t nhdrs,
                                int64_t content_length, const struct ol_s3_body_ctx *ctx)
{
    memset(b, 0, sizeof *b);
    b->ctx = *ctx;
    b->payload = auth->payload;
    b->chunked = auth->payload == OL_S3_PAY_STREAM_SIGNED ||
                 auth->payload == OL_S3_PAY_STREAM_SIGNED_TRAILER ||
                 auth->payload == OL_S3_PAY_STREAM_UNSIGNED_TRAILER;
    /* aws-chunked bodies carry their length in x-amz-decoded-content-length,
     * so they may come with HTTP chunked framing instead of a Content-Length
     * (boto3 does that over HTTPS); any other upload needs Content-Length. */
    if (content_length < 0 && !b->chunked)
        return OL_S3_MISSING_CONTENT_LENGTH;
    b->expect = content_length < 0 ? 0 : (uint64_t)content_length;
    if (b->chunked) {
        const struct ol_http_header *d = hdr(hdrs, nhdrs, "x-amz-decoded-content-length");
        if (!d || parse_u64(d->value, d->value_len, &b->expect) < 0)
            return OL_S3_MISSING_CONTENT_LENGTH;
        int mode = auth->payload == OL_S3_PAY_STREAM_SIGNED ? OL_AWSC_SIGNED
                   : auth->payload == OL_S3_PAY_STREAM_SIGNED_TRAILER ? OL_AWSC_SIGNED_TRAILER
                   : OL_AWSC_UNSIGNED_TRAILER;
        ol_awsc_init(&b->awsc, mode, auth->key, auth->amz_date, auth->scope, auth->scope_len,
                     auth->seed, b->expect, ctx->one_pass ? NULL : ctx->stage);
        if (ctx->one_pass && mode != OL_AWSC_UNSIGNED_TRAILER) {
            ol_awsc_hash_outside(&b->awsc);   /* ol_s3_body_hash does it */
            b->one_pass = true;
        }
    }
    ol_md5_init(ctx->md5);
    if (auth->payload == OL_S3_PAY_SHA256) {
        /* The body's SHA-256 beside its MD5: in one pass when the MD5 is
         * a lone stream lent for it (base/md5sha.h), from the MD5 set's
         * staging two uploads at a time when it is a lane of the set
         * (base/md5.h), else on its own. */
        memcpy(b->body_sha256, auth->body_sha256, 32);
        ol_sha256_init(&b->sha);
        if (ctx->one_pass)
            b->one_pass = true;
        else if (ctx->md5->set && ol_sha256_x2_fast()) {
            ol_md5_with_sha256(ctx->md5, &b->sha);
            b->sha_in_md5 = true;
        }
    }
    const struct ol_http_header *m = hdr(hdrs, nhdrs, "content-md5");
    if (m) {
        if (ol_ck_from_b64(m->value, m->value_len, 16, b->md5_want) < 0)
            return OL_S3_INVALID_DIGEST;
        b->md5_given = true;
    }
    /* flexible checksum: a header value, or a trailer announced by x-amz-trailer */
    for (size_t i = 0; i < nhdrs && !ctx->object_checksums; i++) {
        int a = ol_ck_algo_of_header(hdrs[i].name, hdrs[i].name_len);
        if (!a)
            continue;
        if (b->ck_algo)
            return OL_S3_INVALID_REQUEST;   /* more than one */
        b->ck_algo = a;
        if (ol_ck_from_b64(hdrs[i].value, hdrs[i].value_len, ol_ck_raw_size(a), b->ck_want) < 0)
            return OL_S3_INVALID_REQUEST;
        b->ck_given = true;
    }
    const struct ol_http_header *t = hdr(hdrs, nhdrs, "x-amz-trailer");
    if (t) {
        int a = ol_ck_algo_of_header(t->value, t->value_len);
        if (!a || b->ck_algo || auth->payload == OL_S3_PAY_STREAM_SIGNED || !b->chunked)
            return OL_S3_INVALID_REQUEST;
        b->ck_algo = a;
        b->ck_trailer = true;
    } else if (auth->payload == OL_S3_PAY_STREAM_SIGNED_TRAILER ||
               auth->payload == OL_S3_PAY_STREAM_UNSIGNED_TRAILER) {
        /* a trailer mode without x-amz-trailer: nothing to check in it */
    }
    if (b->ck_algo && ol_ck_init(&b->ck, b->ck_algo, ctx->cksum) < 0)
        return OL_S3_INTERNAL;
    return OL_S3_OK;
}

void ol_s3_body_hash(struct ol_s3_body *b, const char *p, size_t n)
{
    if (n == 0 || b->err)
        return;
    ol_simd_clean();   /* OpenSSL's SHA-NI code is legacy SSE: base/simd.h */
    if (b->one_pass)
        b->one_pass_bytes += ol_md5_sha256_update(
            b->ctx.md5, b->chunked ? ol_awsc_chunk_sha(&b->awsc) : &b->sha, p, n);
    else {
        if (b->payload == OL_S3_PAY_SHA256 && !b->sha_in_md5)
            ol_sha256_update(&b->sha, p, n);
        ol_md5_update(b->ctx.md5, p, n);   /* and b->sha with sha_in_md5 */
    }
    if (b->ck_algo)
        ol_ck_update(&b->ck, p, n);
    b->hashed += n;
}

bool ol_s3_body_hash_onto(struct ol_s3_body *b, struct ol_md5 *lane, const char *p, size_t n)
{
    size_t edge = (64 - b->hashed % 64) % 64;
    if (!b->one_pass || b->chunked || b->err || b->payload != OL_S3_PAY_SHA256 || edge > n)
        return false;
    ol_s3_body_hash(b, p, edge);   /* MD5 and SHA-256 both at a block's edge */
    ol_md5_take(lane, b->ctx.md5);
    ol_md5_with_sha256(lane, &b->sha);
    b->ctx.md5 = lane;
    b->one_pass = false;
    b->sha_in_md5 = true;
    ol_s3_body_hash(b, p + edge, n - edge);
    return true;
}

long ol_s3_body_feed(struct ol_s3_body *b, const char *in, size_t n, const char **data,
                     size_t *len)
{
    *data = in;
    *len = 0;
    if (b->err)
        return -1;
    if (!b->chunked) {
        if (n > b->expect - b->got) {   /* the HTTP layer frames by Content-Length */
            b->err = OL_S3_INCOMPLETE_BODY;
            return -1;
        }
        b->got += n;
        *len = n;
        return (long)n;
    }
    long used = ol_awsc_feed(&b->awsc, in, n, data, len);
    if (used < 0) {
        b->err = used == -EACCES ? OL_S3_SIGNATURE_DOES_NOT_MATCH
                 : used == -EMSGSIZE ? OL_S3_INCOMPLETE_BODY
                 : OL_S3_INVALID_REQUEST;
        *len = 0;
        return -1;
    }
    b->got += *len;
    return used;
}

enum ol_s3_err ol_s3_body_end(struct ol_s3_body *b)
{
    if (b->err)
        return b->err;
    if (b->chunked) {
        int rc = ol_awsc_finish(&b->awsc);
        if (rc == -EACCES)
            return b->err = OL_S3_SIGNATURE_DOES_NOT_MATCH;
        if (rc < 0)
            return b->err = OL_S3_INCOMPLETE_BODY;
    }
    if (b->got != b->expect)
        return b->err = OL_S3_INCOMPLETE_BODY;
    if (b->hashed != b->got)
        return b->err = OL_S3_INTERNAL;   /* a caller that skipped ol_s3_body_hash */
    ol_md5_final(b->ctx.md5, b->md5);   /* b->sha is whole after it (sha_in_md5) */
    if (b->payload == OL_S3_PAY_SHA256) {
        uint8_t h[32];
        ol_sha256_final(&b->sha, h);
        if (memcmp(h, b->body_sha256, 32) != 0)
            return b->err = OL_S3_XAMZ_SHA256_MISMATCH;
    }
    if (b->md5_given && memcmp(b->md5, b->md5_want, 16) != 0)
        return b->err = OL_S3_BAD_DIGEST;
    if (b->ck_algo) {
        b->ck_len = ol_ck_final(&b->ck, b->ck_raw);
        if (b->ck_trailer) {
            size_t vl;
            const char *v = ol_awsc_trailer(&b->awsc, ol_ck_header(b->ck_algo), &vl);
            if (!v || ol_ck_from_b64(v, vl, b->ck_len, b->ck_want) < 0)
                return b->err = OL_S3_INVALID_REQUEST;
        }
        if (memcmp(b->ck_raw, b->ck_want, b->ck_len) != 0)
            return b->err = OL_S3_BAD_DIGEST;
    }
    return OL_S3_OK;
}
