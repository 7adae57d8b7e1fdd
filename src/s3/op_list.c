/*
 * op_list.c - ListObjects (v1 and v2), one page of the bucket's listing
 * catalog (store/catalog.h), and what every listing's answer shares: its
 * query parameters, continuation tokens, encoding-type=url and <Owner>
 * (ListBuckets in op_bucket.c, ListObjectVersions in versioning.c,
 * ListParts and ListMultipartUploads in op_mpu.c use them).
 *
 * Must not: change the catalog (the engine keeps it at its commits), or
 * wait on drives: the catalog is memory, so a listing answers within its
 * handler and keeps nothing of the request.
 */
#include "s3/op_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "s3/date.h"
#include "s3/pct.h"
#include "store/catalog.h"

/* ---- ListObjects (v1 and v2) ---------------------------------------------------- */

void ol_s3_url_elem(struct ol_xml_w *w, const char *tag, const char *s, size_t n, bool url)
{
    ol_xml_open(w, tag, NULL);
    ol_s3_url_text(w, s, n, url);
    ol_xml_close(w, tag);
}

struct list_ctx {
    struct ol_xml_w *w, *cp;   /* Contents, CommonPrefixes (appended after) */
    bool url, owner;
};

static int list_entry(void *arg, const uint8_t *name, size_t len, const struct ol_index_rec *rec)
{
    struct list_ctx *lc = arg;
    if (!rec) {
        ol_xml_open(lc->cp, "CommonPrefixes", NULL);
        ol_s3_url_elem(lc->cp, "Prefix", (const char *)name, len, lc->url);
        ol_xml_close(lc->cp, "CommonPrefixes");
        return 0;
    }
    struct ol_xml_w *w = lc->w;
    char d[80], et[OL_META_ETAG_STRLEN + 2];
    ol_s3_iso_date_ms(rec->mtime_ns, d);
    struct ol_meta_version v = {0};
    memcpy(v.etag, rec->etag, 16);
    v.etag_parts = rec->etag_parts;
    ol_s3_etag_quoted(&v, et);
    ol_xml_open(w, "Contents", NULL);
    ol_s3_url_elem(w, "Key", (const char *)name, len, lc->url);
    ol_xml_elem_s(w, "LastModified", d);
    ol_xml_elem_s(w, "ETag", et);
    ol_xml_elem_u64(w, "Size", rec->size);
    ol_xml_elem_s(w, "StorageClass", ol_s3_storage_class_name(rec->storage_class));
    if (lc->owner) {
        ol_s3_owner(w, "Owner");
    }
    ol_xml_close(w, "Contents");
    return w->err;
}

/* A continuation token (base64 of the name to resume after) decoded into
 * out; its length, or -1 when it is not base64 of at most max bytes. */
int ol_s3_token_decode(const char *tok, int tl, uint8_t *out, size_t max)
{
    if (tl % 4 || (size_t)tl > (max + 2) / 3 * 4)
        return -1;
    int n = EVP_DecodeBlock(out, (const unsigned char *)tok, tl);
    size_t pad = (tl >= 1 && tok[tl - 1] == '=') + (tl >= 2 && tok[tl - 2] == '=');
    if (n < 0 || (size_t)n < pad || (size_t)n - pad > max)
        return -1;
    return (int)((size_t)n - pad);
}

/* A query parameter into buf; -1 when present but bad. */
int ol_s3_qparam(struct ol_s3_req *q, const char *name, char *buf, size_t cap)
{
    int n = ol_s3_query(q->query, q->query_len, name, buf, cap);
    if (n == -ENOENT) {
        buf[0] = 0;
        return 0;
    }
    return n < 0 ? -1 : n;
}

static void list_objects(struct ol_s3_req *q, bool v2)
{
    static __thread char prefix[OL_S3_KEY_MAX + 1], delim[OL_S3_KEY_MAX + 1],
        start[OL_S3_KEY_MAX * 2 + 8], tok[OL_S3_KEY_MAX * 2 + 8], num[24], enc[16], owner[8];
    int pl = ol_s3_qparam(q, "prefix", prefix, sizeof prefix);
    int dl = ol_s3_qparam(q, "delimiter", delim, sizeof delim);
    int ml = ol_s3_qparam(q, "max-keys", num, sizeof num);
    int el = ol_s3_qparam(q, "encoding-type", enc, sizeof enc);
    int sl = ol_s3_qparam(q, v2 ? "start-after" : "marker", start, sizeof start);
    int tl = v2 ? ol_s3_qparam(q, "continuation-token", tok, sizeof tok) : 0;
    int ol = v2 ? ol_s3_qparam(q, "fetch-owner", owner, sizeof owner) : 0;
    if (pl < 0 || dl < 0 || ml < 0 || el < 0 || sl < 0 || tl < 0 || ol < 0) {
        ol_s3_error(q, OL_S3_INVALID_ARGUMENT, "A listing parameter is malformed or too long.");
        return;
    }
    if (el > 0 && strcmp(enc, "url") != 0) {
        ol_s3_error(q, OL_S3_INVALID_ARGUMENT, "Invalid Encoding Method specified in Request");
        return;
    }
    unsigned max_keys = 1000;
    if (ml > 0) {
        char *end;
        long v = strtol(num, &end, 10);
        if (*end || v < 0) {
            ol_s3_error(q, OL_S3_INVALID_ARGUMENT, "max-keys must be a non-negative integer.");
            return;
        }
        max_keys = v > 1000 ? 1000 : (unsigned)v;
    }
    /* the continuation token: base64 of the key to resume after */
    uint8_t after[OL_S3_KEY_MAX + 4];
    size_t after_len = 0;
    if (tl > 0) {
        int n = ol_s3_token_decode(tok, tl, after, OL_S3_KEY_MAX);
        if (n < 0) {
            ol_s3_error(q, OL_S3_INVALID_ARGUMENT, "The continuation token provided is "
                        "incorrect.");
            return;
        }
        after_len = (size_t)n;
    } else if (sl > (int)OL_S3_KEY_MAX) {
        ol_s3_error(q, OL_S3_INVALID_ARGUMENT, v2 ? "start-after is longer than any key."
                                                  : "marker is longer than any key.");
        return;
    } else if (sl > 0) {
        memcpy(after, start, (size_t)sl);
        after_len = (size_t)sl;
    }
    bool url = el > 0;
    size_t cap = 64 * 1024 + (size_t)max_keys * (OL_S3_KEY_MAX * 3 + 512);
    char *buf = malloc(cap), *cpbuf = malloc(cap / 2);
    if (!buf || !cpbuf) {
        free(buf);
        free(cpbuf);
        ol_s3_error(q, OL_S3_SLOW_DOWN, NULL);
        return;
    }
    struct ol_xml_w w, cp;
    ol_xml_w_init(&w, buf, cap);
    ol_xml_w_init(&cp, cpbuf, cap / 2);
    struct ol_index_list_req req = {.prefix = prefix, .prefix_len = (size_t)pl,
                                    .delim = delim, .delim_len = (size_t)dl,
                                    .start = after, .start_len = after_len,
                                    .max_keys = max_keys, .skip_deleted = true};
    struct ol_index_list_out out;
    struct list_ctx lc = {&w, &cp, url, ol > 0 && strcmp(owner, "true") == 0};
    ol_xml_decl(&w);
    ol_xml_open(&w, "ListBucketResult", OL_S3_NS);
    ol_xml_elem(&w, "Name", q->route.bucket, q->route.bucket_len);
    /* encoding-type=url encodes v2's Prefix, not v1's (AWS; botocore
     * decodes Prefix for ListObjectsV2 only) */
    ol_s3_url_elem(&w, "Prefix", prefix, (size_t)pl, url && v2);
    size_t head_len = w.n;   /* the summary goes here, once the listing is known */
    int rc = ol_catalog_list(q->srv->p.catalog, q->route.bucket, &req, q->srv->list_page,
                             list_entry, &lc, &out);
    if (rc == -ENOENT) {
        free(buf);
        free(cpbuf);
        ol_s3_error(q, OL_S3_NO_SUCH_BUCKET, NULL);
        return;
    }
    if (rc < 0 || w.err || cp.err) {
        free(buf);
        free(cpbuf);
        ol_s3_error(q, OL_S3_INTERNAL, NULL);
        return;
    }
    char tail_buf[8192];
    struct ol_xml_w t;
    ol_xml_w_init(&t, tail_buf, sizeof tail_buf);
    if (v2) {
        ol_xml_elem_u64(&t, "KeyCount", out.nkeys + out.nprefixes);
        /* echoed when sent, even empty (an empty token lists from the start) */
        if (ol_s3_query_has(q->query, q->query_len, "continuation-token"))
            ol_xml_elem(&t, "ContinuationToken", tok, (size_t)tl);
        if (out.truncated && out.next_len) {
            char nt[OL_S3_KEY_MAX * 2 + 8];
            int n = EVP_EncodeBlock((unsigned char *)nt, out.next, out.next_len);
            ol_xml_elem(&t, "NextContinuationToken", nt, (size_t)n);
        }
        if (sl > 0)
            ol_s3_url_elem(&t, "StartAfter", start, (size_t)sl, url);
    } else {
        ol_s3_url_elem(&t, "Marker", start, (size_t)sl, url);
        if (out.truncated && dl > 0 && out.next_len)
            ol_s3_url_elem(&t, "NextMarker", (const char *)out.next, out.next_len, url);
    }
    ol_xml_elem_u64(&t, "MaxKeys", max_keys);
    if (dl > 0)
        ol_s3_url_elem(&t, "Delimiter", delim, (size_t)dl, url);
    ol_xml_elem_s(&t, "IsTruncated", out.truncated ? "true" : "false");
    if (url)
        ol_xml_elem_s(&t, "EncodingType", "url");
    if (t.err) {
        free(buf);
        free(cpbuf);
        ol_s3_error(q, OL_S3_INTERNAL, NULL);
        return;
    }
    /* body = header + summary + Contents + CommonPrefixes + close */
    size_t cp_len = cp.n;
    size_t total = w.n + t.n + cp_len + 32;
    char *body = malloc(total);
    if (!body) {
        free(buf);
        free(cpbuf);
        ol_s3_error(q, OL_S3_SLOW_DOWN, NULL);
        return;
    }
    /* w holds decl, <ListBucketResult>, Name, Prefix, then the Contents */
    size_t n = 0;
    memcpy(body, buf, head_len);
    n += head_len;
    memcpy(body + n, t.p, t.n);
    n += t.n;
    memcpy(body + n, buf + head_len, w.n - head_len);
    n += w.n - head_len;
    memcpy(body + n, cpbuf, cp_len);
    n += cp_len;
    memcpy(body + n, "</ListBucketResult>", 19);
    n += 19;
    ol_s3_reply(q, 200, NULL, "application/xml", body, n);
    free(body);
    free(buf);
    free(cpbuf);
}

void ol_s3_list_objects(struct ol_s3_req *q) { list_objects(q, false); }

void ol_s3_list_objects_v2(struct ol_s3_req *q) { list_objects(q, true); }

/* ---- the pieces every listing shares ---------------------------------------------- */

/* S3's encoding-type=url: every byte but unreserved ones and '/' as %XX. */
void ol_s3_url_text(struct ol_xml_w *w, const char *s, size_t n, bool url)
{
    if (!url) {
        ol_xml_text(w, s, n);
        return;
    }
    char e[3 * OL_S3_KEY_MAX + 1];   /* keys, prefixes and markers: <= 1024 bytes */
    long el = ol_pct_encode(s, n, e, sizeof e, true);
    if (el < 0)
        w->err = -ENOSPC;
    else
        ol_xml_text(w, e, (size_t)el);
}

const char *ol_s3_storage_class_name(unsigned sc)
{
    return sc == OL_META_SC_REDUCED_REDUNDANCY ? "REDUCED_REDUNDANCY" : "STANDARD";
}

/* <Owner> / <Initiator>: every object belongs to the one account. */
void ol_s3_owner(struct ol_xml_w *w, const char *tag)
{
    ol_xml_open(w, tag, NULL);
    ol_xml_elem_s(w, "ID", "openlake");
    ol_xml_elem_s(w, "DisplayName", "openlake");
    ol_xml_close(w, tag);
}
