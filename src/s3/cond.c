/*
 * cond.c - ETags and the conditional headers that compare them: a read's
 * If-Match, If-None-Match, If-Modified-Since and If-Unmodified-Since
 * (GetObject, HeadObject), CopyObject's and UploadPartCopy's
 * x-amz-copy-source-if-* on the source, and a write's If-None-Match: * /
 * If-Match (PutObject, CopyObject, CompleteMultipartUpload), which the
 * engine checks at its commit (engine.h, struct ol_store_cond).
 *
 * Must not: read or write the store; the caller hands it the version.
 */
#include "s3/op_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3/date.h"
#include "s3/pct.h"

/* The quoted ETag of a version: "hex" or "hex-N". */
void ol_s3_etag_quoted(const struct ol_meta_version *v, char out[OL_META_ETAG_STRLEN + 2])
{
    char e[OL_META_ETAG_STRLEN];
    ol_meta_etag_format(v->etag, v->etag_parts, e, sizeof e);
    snprintf(out, OL_META_ETAG_STRLEN + 2, "\"%s\"", e);
}

/* An If-Match / If-None-Match list ("a", "b", W/"c", *) against etag. */
static bool etag_listed(const char *list, size_t n, const char *etag)
{
    size_t el = strlen(etag);   /* quoted */
    size_t i = 0;
    while (i < n) {
        while (i < n && (list[i] == ' ' || list[i] == ','))
            i++;
        size_t s = i;
        while (i < n && list[i] != ',')
            i++;
        size_t e = i;
        while (e > s && list[e - 1] == ' ')
            e--;
        const char *t = list + s;
        size_t tl = e - s;
        if (tl == 1 && t[0] == '*')
            return true;
        if (tl > 2 && t[0] == 'W' && t[1] == '/')
            t += 2, tl -= 2;
        if (tl == el && memcmp(t, etag, el) == 0)
            return true;
        if (tl + 2 == el && memcmp(t, etag + 1, tl) == 0)   /* sent unquoted */
            return true;
    }
    return false;
}

/* The four headers of a read's conditions, in the order RFC 9110 (13.2.2)
 * evaluates them. */
struct cond_headers {
    const char *match, *unmodified_since, *none_match, *modified_since;
};

/* The conditions named h against version v (its quoted etag): 0 go on,
 * 412 when If-Match or If-Unmodified-Since fails, not_modified when
 * If-None-Match or If-Modified-Since does. A date that does not parse is
 * ignored; an If-*-Since gives way to its ETag twin when both are sent. */
static int evaluate(struct ol_s3_req *q, const struct cond_headers *h,
                    const struct ol_meta_version *v, const char *etag, int not_modified)
{
    int64_t mtime = (int64_t)(v->mtime_ns / 1000000000ull);
    const struct ol_http_header *im = ol_s3_hdr(q, h->match);
    const struct ol_http_header *inm = ol_s3_hdr(q, h->none_match);
    const struct ol_http_header *ims = ol_s3_hdr(q, h->modified_since);
    const struct ol_http_header *ius = ol_s3_hdr(q, h->unmodified_since);
    if (im && !etag_listed(im->value, im->value_len, etag))
        return 412;
    if (!im && ius) {
        int64_t t = ol_s3_parse_http_date(ius->value, ius->value_len);
        if (t >= 0 && mtime > t)
            return 412;
    }
    if (inm && etag_listed(inm->value, inm->value_len, etag))
        return not_modified;
    if (!inm && ims) {
        int64_t t = ol_s3_parse_http_date(ims->value, ims->value_len);
        if (t >= 0 && mtime <= t)
            return not_modified;
    }
    return 0;
}

int ol_s3_get_cond(struct ol_s3_req *q, const struct ol_meta_version *v, const char *etag)
{
    static const struct cond_headers h = {"if-match", "if-unmodified-since", "if-none-match",
                                          "if-modified-since"};
    return evaluate(q, &h, v, etag, 304);
}

int ol_s3_copy_cond(struct ol_s3_req *q, const struct ol_meta_version *v)
{
    static const struct cond_headers h = {
        "x-amz-copy-source-if-match", "x-amz-copy-source-if-unmodified-since",
        "x-amz-copy-source-if-none-match", "x-amz-copy-source-if-modified-since"};
    char etag[OL_META_ETAG_STRLEN + 2];
    ol_s3_etag_quoted(v, etag);
    return evaluate(q, &h, v, etag, 412);
}

bool ol_s3_write_cond(struct ol_s3_req *q, struct ol_store_cond *c)
{
    memset(c, 0, sizeof *c);
    const struct ol_http_header *inm = ol_s3_hdr(q, "if-none-match");
    const struct ol_http_header *im = ol_s3_hdr(q, "if-match");
    if (inm && im) {
        ol_s3_error(q, OL_S3_NOT_IMPLEMENTED, "If-Match and If-None-Match together are not "
                    "supported on writes.");
        return false;
    }
    if (inm) {
        if (!(inm->value_len == 1 && inm->value[0] == '*')) {
            ol_s3_error(q, OL_S3_NOT_IMPLEMENTED, "If-None-Match on a write supports only *.");
            return false;
        }
        c->kind = OL_STORE_COND_ABSENT;
        return true;
    }
    if (im) {
        const char *v = im->value;
        size_t n = im->value_len;
        if (n >= 2 && v[0] == '"' && v[n - 1] == '"')
            v++, n -= 2;   /* S3 compares the ETag with or without its quotes */
        size_t hexlen = n;
        unsigned long parts = 0;
        const char *dash = memchr(v, '-', n);
        if (dash) {
            hexlen = (size_t)(dash - v);
            char num[8];
            size_t dl = n - hexlen - 1;
            if (dl == 0 || dl >= sizeof num)
                goto bad;
            memcpy(num, dash + 1, dl);
            num[dl] = 0;
            char *end;
            parts = strtoul(num, &end, 10);
            if (*end || parts == 0 || parts > OL_META_MAX_PARTS)
                goto bad;
        }
        if (hexlen != 32)
            goto bad;
        for (unsigned i = 0; i < 32; i++) {
            int x = ol_hexval(v[i]);
            if (x < 0)
                goto bad;
            c->etag[i / 2] = (uint8_t)(i % 2 ? c->etag[i / 2] | x : x << 4);
        }
        c->kind = OL_STORE_COND_MATCH;
        c->etag_parts = (uint16_t)parts;
        return true;
    bad:
        /* not an ETag this store can have made: no object matches it */
        c->kind = OL_STORE_COND_MATCH;
        c->etag_parts = 0xffff;
        return true;
    }
    return true;
}
