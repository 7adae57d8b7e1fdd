/*
 * op_object.c - the object operations: PutObject (the body streamed into
 * the engine's PUT, with its headers, user metadata, tags and checksum
 * kept in the new version), GetObject and HeadObject (conditions, Range
 * and partNumber, the version's headers and the response-* overrides,
 * the body streamed out of the engine's GET), and GetObjectTagging, which
 * reads the version the way a GET does (its document is op_tagging.c's).
 * UploadPart streams its body through the same PUT path (op_mpu.c), and
 * CreateMultipartUpload and CopyObject's REPLACE take a new object's
 * metadata from the request as PutObject does (ol_s3_new_object_*,
 * ol_s3_user_meta); DeleteObject is versioning.c's.
 *
 * Every engine callback runs on this core's loop thread with the request
 * state as its user data; a request whose client went away (q->r NULL) is
 * only cleaned up.
 *
 * Must not: hold more of a body than the spill the engine has not taken
 * yet (OL_S3_SPILL), or ask the engine for a GET's next slice before the
 * connection has taken the last one (sent it, or copied it into its output
 * queue).
 */
#include "s3/op_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "s3/date.h"
#include "s3/range.h"
#include "s3/versioning.h"
#include "store/layout.h"

#define OL_S3_MAX_OBJECT (5ull << 40)   /* 5 TiB, as S3 */

/* ---- PutObject ------------------------------------------------------------ */

/* The parity for x-amz-storage-class (-1: the store's default). false when
 * the class is not one S3 knows (answered InvalidStorageClass). */
bool ol_s3_parity(struct ol_s3_req *q, int *parity)
{
    *parity = -1;
    const struct ol_http_header *sc = ol_s3_hdr(q, "x-amz-storage-class");
    if (!sc)
        return true;
    const struct ol_store *all = q->srv->p.store_all;
    unsigned p = 0;
    if (!all || ol_layout_parity_for_class(sc->value, sc->value_len,
                                           ol_store_drives_per_set(all), ol_store_parity(all),
                                           &p) < 0) {
        ol_s3_error(q, OL_S3_INVALID_STORAGE_CLASS, NULL);
        return false;
    }
    *parity = (int)p;
    return true;
}

static void put_abort(struct ol_s3_req *q)
{
    struct ol_s3_op_put *st = &q->op.put;
    if (st->put && !st->finishing) {
        ol_put_abort(st->put);
        st->put = NULL;
    }
}

void ol_s3_put_fail(struct ol_s3_req *q, enum ol_s3_err e, const char *msg)
{
    put_abort(q);
    ol_s3_error(q, e, msg);
}

/* Hands bytes to the engine; keeps what it cannot take yet in the spill. */
static int put_push(struct ol_s3_req *q, const char *d, size_t n)
{
    struct ol_s3_op_put *st = &q->op.put;
    while (n > 0) {
        if (st->waiting_ready) {
            if (n > OL_S3_SPILL - st->spill_len)
                return -ENOBUFS;
            memcpy(st->spill + st->spill_len, d, n);
            st->spill_len += n;
            return 0;
        }
        size_t take = n < OL_STORE_WRITE_MAX ? n : OL_STORE_WRITE_MAX;
        int rc = ol_put_write(st->put, d, take);
        if (rc < 0)
            return rc;
        d += take;
        n -= take;
        if (rc == 1) {
            st->waiting_ready = true;
            if (q->r)
                ol_http_req_pause(q->r);
        }
    }
    return 0;
}

static void put_finish(struct ol_s3_req *q);

void ol_s3_put_body(struct ol_s3_req *q, const char *d, size_t n)
{
    int rc = put_push(q, d, n);
    char c[128];
    if (rc < 0)
        ol_s3_put_fail(q, rc == -ENOBUFS ? OL_S3_SLOW_DOWN : OL_S3_INTERNAL,
                       rc == -ENOBUFS ? NULL : ol_s3_cause(c, "ol_put_write", rc));
}

void ol_s3_put_body_end(struct ol_s3_req *q, enum ol_s3_err verdict)
{
    struct ol_s3_op_put *st = &q->op.put;
    if (verdict) {
        ol_s3_put_fail(q, verdict, NULL);
        return;
    }
    st->body_ended = true;
    if (!st->waiting_ready && st->spill_len == 0)
        put_finish(q);
}

enum ol_s3_err ol_s3_user_meta(struct ol_s3_req *q, struct ol_s3_user_meta *um)
{
    const struct ol_http_request *h = ol_http_req_head(q->r);
    size_t used = 0, total = 0;
    um->n = 0;
    for (size_t i = 0; i < h->num_headers; i++) {
        const struct ol_http_header *x = &h->headers[i];
        if (x->name_len <= 11 || strncasecmp(x->name, "x-amz-meta-", 11) != 0)
            continue;
        size_t nl = x->name_len - 11;
        total += nl + x->value_len;
        if (total > OL_META_MAX_USER_BYTES || um->n == 64)
            return OL_S3_METADATA_TOO_LARGE;
        char *name = um->names + used;
        for (size_t k = 0; k < nl; k++) {
            char c = x->name[11 + k];
            name[k] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
        }
        used += nl;
        struct ol_meta_kv kv = {{(const uint8_t *)name, (uint32_t)nl},
                                {(const uint8_t *)x->value, (uint32_t)x->value_len}};
        unsigned j = um->n++;   /* insertion sort by name */
        while (j > 0) {
            const struct ol_meta_kv *p = &um->kv[j - 1];
            size_t m = p->name.len < nl ? p->name.len : nl;
            int c = memcmp(p->name.p, name, m);
            if (c < 0 || (c == 0 && p->name.len <= nl)) {
                if (c == 0 && p->name.len == nl)
                    return OL_S3_INVALID_ARGUMENT;   /* the same name twice */
                break;
            }
            um->kv[j] = um->kv[j - 1];
            j--;
        }
        um->kv[j] = kv;
    }
    return OL_S3_OK;
}

static void set_hdr(struct ol_meta_version *v, int which, const struct ol_http_header *x)
{
    if (x && x->value_len)
        v->hdr[which] = (struct ol_meta_bytes){(const uint8_t *)x->value, (uint32_t)x->value_len};
}

/* The Content-Encoding to store: the header's list without its
 * aws-chunked elements (the transfer framing, not the object's encoding:
 * S3 drops them wherever they stand, so "gzip, aws-chunked" is stored as
 * "gzip"); the other elements as sent, commas between them. Writes into
 * out (cap bytes) and returns the length, 0 when nothing is left; a value
 * longer than cap is returned whole (a slice of the header: too large to
 * store, refused by the caller's length check). */
static struct ol_meta_bytes content_encoding(const struct ol_http_header *ce, char *out,
                                             size_t cap)
{
    if (!ce)
        return (struct ol_meta_bytes){0};
    if (ce->value_len > cap)
        return (struct ol_meta_bytes){(const uint8_t *)ce->value, (uint32_t)ce->value_len};
    size_t n = 0;
    const char *v = ce->value, *end = v + ce->value_len;
    for (;;) {
        const char *c = memchr(v, ',', (size_t)(end - v));
        const char *s = v, *t = c ? c : end;
        while (s < t && (*s == ' ' || *s == '\t'))
            s++;
        while (t > s && (t[-1] == ' ' || t[-1] == '\t'))
            t--;
        bool chunked = t - s == 11 && strncasecmp(s, "aws-chunked", 11) == 0;
        if (!chunked && t > s) {
            const char *from = s;
            if (n) {
                out[n++] = ',';
                from = v;   /* the spaces after the comma, as sent */
            }
            memcpy(out + n, from, (size_t)(t - from));
            n += (size_t)(t - from);
        }
        if (!c)
            break;
        v = c + 1;
    }
    return (struct ol_meta_bytes){(const uint8_t *)out, (uint32_t)n};
}

uint8_t ol_s3_storage_class(struct ol_s3_req *q)
{
    const struct ol_http_header *sc = ol_s3_hdr(q, "x-amz-storage-class");
    return sc && sc->value_len == 18 && memcmp(sc->value, "REDUCED_REDUNDANCY", 18) == 0
               ? OL_META_SC_REDUCED_REDUNDANCY : OL_META_SC_STANDARD;
}

bool ol_s3_new_object_check(struct ol_s3_req *q, struct ol_s3_user_meta *um)
{
    enum ol_s3_err e = ol_s3_user_meta(q, um);
    if (e) {
        ol_s3_error(q, e, NULL);
        return false;
    }
    const struct ol_http_header *tg = ol_s3_hdr(q, "x-amz-tagging");
    if (tg && (tg->value_len > OL_META_MAX_TAGGING ||
               ol_s3_tags_each(tg->value, tg->value_len, NULL, NULL) < 0)) {
        ol_s3_error(q, OL_S3_INVALID_TAG, NULL);
        return false;
    }
    return true;
}

void ol_s3_new_object_fields(struct ol_s3_req *q, struct ol_meta_version *v,
                             const struct ol_s3_user_meta *um, char ce[OL_META_MAX_HEADER])
{
    v->user = um->kv;
    v->user_count = (uint16_t)um->n;
    set_hdr(v, OL_META_HDR_CONTENT_TYPE, ol_s3_hdr(q, "content-type"));
    v->hdr[OL_META_HDR_CONTENT_ENCODING] = content_encoding(ol_s3_hdr(q, "content-encoding"), ce,
                                                            OL_META_MAX_HEADER);
    set_hdr(v, OL_META_HDR_CONTENT_DISPOSITION, ol_s3_hdr(q, "content-disposition"));
    set_hdr(v, OL_META_HDR_CONTENT_LANGUAGE, ol_s3_hdr(q, "content-language"));
    set_hdr(v, OL_META_HDR_CACHE_CONTROL, ol_s3_hdr(q, "cache-control"));
    set_hdr(v, OL_META_HDR_EXPIRES, ol_s3_hdr(q, "expires"));
    const struct ol_http_header *tg = ol_s3_hdr(q, "x-amz-tagging");
    if (tg && tg->value_len)
        v->tagging = (struct ol_meta_bytes){(const uint8_t *)tg->value, (uint32_t)tg->value_len};
    v->storage_class = ol_s3_storage_class(q);
}

static void put_finish(struct ol_s3_req *q)
{
    struct ol_s3_op_put *st = &q->op.put;
    struct ol_meta_version v;
    memset(&v, 0, sizeof v);
    memcpy(v.etag, q->body.md5, 16);
    struct ol_s3_user_meta um;
    enum ol_s3_err e = ol_s3_user_meta(q, &um);
    if (e) {
        ol_s3_put_fail(q, e, NULL);
        return;
    }
    char ce[OL_META_MAX_HEADER];
    ol_s3_new_object_fields(q, &v, &um, ce);
    for (int i = 0; i < OL_META_HDR__COUNT; i++)
        if (v.hdr[i].len > OL_META_MAX_HEADER) {
            ol_s3_put_fail(q, OL_S3_METADATA_TOO_LARGE, NULL);
            return;
        }
    if (q->body.ck_algo) {
        v.cks.algo = (uint8_t)q->body.ck_algo;   /* ol_ck_algo and ol_meta_cks agree */
        memcpy(v.cks.sum, q->body.ck_raw, q->body.ck_len);
    }
    memcpy(v.vid, st->vid, 16);
    int rc = ol_put_finish(st->put, &v);
    if (rc == -EINVAL && st->is_part && v.cks.algo) {
        /* an upload created without a checksum algorithm: the part's checksum
         * was verified against its bytes above, it is just not kept */
        v.cks.algo = 0;
        memset(v.cks.sum, 0, sizeof v.cks.sum);
        rc = ol_put_finish(st->put, &v);
    }
    if (rc < 0) {
        char c[128];
        ol_s3_put_fail(q, rc == -EINVAL ? OL_S3_INVALID_ARGUMENT : OL_S3_INTERNAL,
                       rc == -EINVAL ? NULL : ol_s3_cause(c, "ol_put_finish", rc));
        return;
    }
    st->finishing = true;
}

void ol_s3_put_event(void *ud, const struct ol_store_event *ev)
{
    struct ol_s3_req *q = ud;
    struct ol_s3_op_put *st = &q->op.put;
    switch (ev->type) {
    case OL_STORE_EV_READY:
        st->waiting_ready = false;
        if (st->spill_len) {
            size_t n = st->spill_len;
            st->spill_len = 0;
            int rc = put_push(q, st->spill, n);   /* n <= OL_STORE_WRITE_MAX */
            if (rc < 0) {
                char c[128];
                if (q->r)
                    ol_s3_put_fail(q, OL_S3_INTERNAL,
                                   ol_s3_cause(c, "ol_put_write (the spilled bytes)", rc));
                else
                    put_abort(q), ol_s3_req_free(q);
                return;
            }
        }
        if (!st->waiting_ready) {
            if (st->body_ended)
                put_finish(q);
            else if (q->r)
                ol_http_req_resume(q->r);
        }
        return;
    case OL_STORE_EV_ERROR:
        if (q->r) {
            int status = ev->status;
            put_abort(q);
            ol_s3_store_error(q, status);
        } else {
            put_abort(q);
            ol_s3_req_free(q);
        }
        return;
    case OL_STORE_EV_DONE: {
        st->put = NULL;   /* the engine released it */
        if (!q->r) {
            ol_s3_req_free(q);
            return;
        }
        if (ev->status < 0) {
            ol_s3_store_error(q, ev->status);
            return;
        }
        char h[512], et[OL_META_ETAG_STRLEN + 2], b64[OL_CK_MAX_B64 + 1];
        struct ol_meta_version tmp = {0};
        memcpy(tmp.etag, q->body.md5, 16);
        ol_s3_etag_quoted(&tmp, et);
        int n = snprintf(h, sizeof h, "ETag: %s\r\n", et);
        if (!st->is_part)
            n += (int)ol_s3_vid_header(q, st->vid, h + n, sizeof h - (size_t)n);
        if (q->body.ck_algo) {
            ol_ck_b64(q->body.ck_raw, q->body.ck_len, b64);
            snprintf(h + n, sizeof h - (size_t)n, "%s: %s\r\n", ol_ck_header(q->body.ck_algo),
                     b64);
        }
        ol_s3_reply(q, 200, h, NULL, NULL, 0);
        return;
    }
    default:
        return;
    }
}

void ol_s3_put_client_gone(struct ol_s3_req *q)
{
    struct ol_s3_op_put *st = &q->op.put;
    if (st->finishing)
        return;   /* EV_DONE still comes: freed there */
    put_abort(q);
    ol_s3_req_free(q);
}

void ol_s3_put_object(struct ol_s3_req *q)
{
    struct ol_s3_op_put *st = &q->op.put;
    memset(st, 0, offsetof(struct ol_s3_op_put, spill));
    struct ol_store_cond cond;
    if (!ol_s3_write_cond(q, &cond))
        return;
    enum ol_s3_err e = ol_s3_begin_body(q);
    if (e) {
        ol_s3_error(q, e, NULL);
        return;
    }
    if (q->body.expect > OL_S3_MAX_OBJECT) {
        ol_s3_error(q, OL_S3_ENTITY_TOO_LARGE, NULL);
        return;
    }
    struct ol_s3_user_meta um;
    if (!ol_s3_new_object_check(q, &um))
        return;
    int parity;
    if (!ol_s3_parity(q, &parity))
        return;
    struct ol_put_args a = {.bucket = q->route.bucket, .key = q->route.key,
                            .size = q->body.expect, .parity = parity, .cond = cond};
    ol_s3_vid_new(q, st->vid);
    int rc = ol_put_begin(ol_s3_store(q), &a, ol_s3_put_event, q, &st->put);
    if (rc < 0) {
        ol_s3_store_error(q, rc);
        return;
    }
    q->body_handler = ol_s3_put_body;
    q->body_end_handler = ol_s3_put_body_end;
    q->abort_handler = ol_s3_put_client_gone;
}

/* ---- GetObject / HeadObject ----------------------------------------------------- */

static void get_release(struct ol_s3_req *q)
{
    struct ol_s3_op_get *st = &q->op.get;
    if (st->get) {
        ol_get_end(st->get);
        st->get = NULL;
    }
}

static void get_client_gone(struct ol_s3_req *q)
{
    get_release(q);
    ol_s3_req_free(q);
}

/* Response headers of an object version (and the response-* overrides). */
static size_t object_headers(struct ol_s3_req *q, const struct ol_meta_version *v,
                             const char *etag, bool whole, char *h, size_t cap)
{
    size_t n = 0;
    char d[40];
    ol_s3_http_date((int64_t)(v->mtime_ns / 1000000000ull), d);
#define ADD(...) do { int k_ = snprintf(h + n, cap - n, __VA_ARGS__); \
                      if (k_ > 0 && (size_t)k_ < cap - n) n += (size_t)k_; } while (0)
    ADD("ETag: %s\r\nLast-Modified: %s\r\nAccept-Ranges: bytes\r\n", etag, d);
    n += ol_s3_vid_header(q, v->vid, h + n, cap - n);
    static const struct { const char *param; int hdr; } over[] = {
        {"response-content-type", OL_META_HDR_CONTENT_TYPE},
        {"response-content-language", OL_META_HDR_CONTENT_LANGUAGE},
        {"response-expires", OL_META_HDR_EXPIRES},
        {"response-cache-control", OL_META_HDR_CACHE_CONTROL},
        {"response-content-disposition", OL_META_HDR_CONTENT_DISPOSITION},
        {"response-content-encoding", OL_META_HDR_CONTENT_ENCODING},
    };
    for (int i = 0; i < OL_META_HDR__COUNT; i++) {
        const char *name = ol_meta_hdr_name((unsigned)i);
        char val[OL_META_MAX_HEADER + 1];
        int vl = -1;
        for (size_t k = 0; k < sizeof over / sizeof over[0]; k++)
            if (over[k].hdr == i && !q->op.get.head)
                vl = ol_s3_query(q->query, q->query_len, over[k].param, val, sizeof val);
        if (vl >= 0) {
            bool clean = true;
            for (int c = 0; c < vl; c++)
                if ((unsigned char)val[c] < 0x20 && val[c] != '\t')
                    clean = false;   /* no header injection through overrides */
            if (clean)
                ADD("%s: %.*s\r\n", name, vl, val);
        } else if (v->hdr[i].len) {
            ADD("%s: %.*s\r\n", name, (int)v->hdr[i].len, (const char *)v->hdr[i].p);
        } else if (i == OL_META_HDR_CONTENT_TYPE) {
            ADD("Content-Type: binary/octet-stream\r\n");
        }
    }
    uint32_t pos = 0;
    struct ol_meta_kv kv;
    while (ol_meta_user_next(v, &pos, &kv) > 0)
        ADD("x-amz-meta-%.*s: %.*s\r\n", (int)kv.name.len, (const char *)kv.name.p,
            (int)kv.value.len, (const char *)kv.value.p);
    if (v->storage_class == OL_META_SC_REDUCED_REDUNDANCY)
        ADD("x-amz-storage-class: REDUCED_REDUNDANCY\r\n");
    if (v->tagging.len) {
        int nt = ol_s3_tags_each((const char *)v->tagging.p, v->tagging.len, NULL, NULL);
        if (nt > 0)
            ADD("x-amz-tagging-count: %d\r\n", nt);
    }
    const struct ol_http_header *mode = ol_s3_hdr(q, "x-amz-checksum-mode");
    /* the object's checksum covers the whole object: never on a range */
    if (whole && v->cks.algo && mode && mode->value_len == 7 &&
        strncasecmp(mode->value, "ENABLED", 7) == 0) {
        char b64[OL_CK_MAX_B64 + 1];
        ol_ck_b64(v->cks.sum, ol_ck_raw_size(v->cks.algo), b64);
        if (v->cks.flags & OL_META_CKS_COMPOSITE)   /* of the parts' checksums: "-N" */
            ADD("%s: %s-%u\r\nx-amz-checksum-type: COMPOSITE\r\n", ol_ck_header(v->cks.algo),
                b64, (unsigned)v->cks.parts);
        else
            ADD("%s: %s\r\nx-amz-checksum-type: FULL_OBJECT\r\n", ol_ck_header(v->cks.algo),
                b64);
    }
#undef ADD
    return n;
}

static void get_pump(struct ol_s3_req *q);

static void get_event(void *ud, const struct ol_store_event *ev)
{
    struct ol_s3_req *q = ud;
    struct ol_s3_op_get *st = &q->op.get;
    if (!q->r) {
        get_client_gone(q);
        return;
    }
    if (ev->type == OL_STORE_EV_META && st->tagging) {
        char out[16384];
        struct ol_xml_w w;
        ol_xml_w_init(&w, out, sizeof out);
        ol_s3_tagging_doc(&w, ev->version);
        get_release(q);
        if (w.err)
            ol_s3_error(q, OL_S3_INTERNAL, "the tag set did not fit its XML buffer");
        else
            ol_s3_reply(q, 200, NULL, "application/xml", out, w.n);
        return;
    }
    if (ev->type == OL_STORE_EV_META) {
        const struct ol_meta_version *v = ev->version;
        char etag[OL_META_ETAG_STRLEN + 2];
        ol_s3_etag_quoted(v, etag);
        int cond = ol_s3_get_cond(q, v, etag);
        char *h = malloc(16384);
        if (!h) {
            get_release(q);
            ol_s3_error(q, OL_S3_SLOW_DOWN, NULL);
            return;
        }
        uint64_t off = 0, len = v->size;
        int pr = ol_s3_range(ol_s3_hdr(q, "range"), v->size, &off, &len);
        if (st->part && ol_store_part_range(v, st->part, &off, &len) < 0) {
            free(h);
            get_release(q);
            ol_s3_error(q, OL_S3_INVALID_PART_NUMBER, NULL);
            return;
        }
        bool whole = pr == 0 && cond == 0 && !(st->part && v->etag_parts);
        size_t n = object_headers(q, v, etag, whole, h, 16384);
        if (cond) {
            get_release(q);
            if (cond == 304) {
                snprintf(h + n, 16384 - n, "%s", "");
                ol_s3_reply(q, 304, h, NULL, NULL, 0);
            } else {
                ol_s3_error(q, OL_S3_PRECONDITION_FAILED, NULL);
            }
            free(h);
            return;
        }
        int status = 200;
        if (pr < 0) {
            char cr[64];
            snprintf(cr, sizeof cr, "Content-Range: bytes */%llu\r\n",
                     (unsigned long long)v->size);
            get_release(q);
            free(h);
            ol_s3_error_h(q, OL_S3_INVALID_RANGE, NULL, cr);
            return;
        }
        if (pr == 1 || (st->part && v->etag_parts)) {
            /* a part of a multipart object is a range of it, with the count */
            status = 206;
            if (len)
                snprintf(h + n, 16384 - n, "Content-Range: bytes %llu-%llu/%llu\r\n",
                         (unsigned long long)off, (unsigned long long)(off + len - 1),
                         (unsigned long long)v->size);
            n += strlen(h + n);
            if (st->part) {
                snprintf(h + n, 16384 - n, "x-amz-mp-parts-count: %u\r\n",
                         (unsigned)v->part_count);
                n += strlen(h + n);
            }
        }
        if (st->head || len == 0) {
            /* HEAD: the length of what a GET would send */
            get_release(q);
            char hh[16800];
            snprintf(hh, sizeof hh, "x-amz-request-id: %s\r\nx-amz-id-2: %s\r\n%s", q->id,
                     q->id, h);
            free(h);
            ol_http_req *r = q->r;
            ol_s3_req_free(q);
            ol_http_resp_start(r, status, hh, (int64_t)len);
            ol_http_resp_end(r);
            return;
        }
        if (st->part && ol_get_set_part(st->get, st->part) < 0) {
            free(h);
            get_release(q);
            ol_s3_error(q, OL_S3_INTERNAL, "ol_get_set_part refused a part the version has");
            return;
        }
        if (pr == 1)
            ol_get_set_range(st->get, off, (int64_t)len);
        char hh[16800];
        snprintf(hh, sizeof hh, "x-amz-request-id: %s\r\nx-amz-id-2: %s\r\n%s", q->id, q->id, h);
        free(h);
        if (ol_http_resp_start(q->r, status, hh, (int64_t)len) < 0) {
            get_release(q);
            ol_http_req *r = q->r;
            ol_s3_req_free(q);
            ol_http_resp_abort(r);
            return;
        }
        st->started = true;
        q->drain_handler = get_pump;
        get_pump(q);
        return;
    }
    if (ev->type == OL_STORE_EV_DATA) {
        st->pending = ev->data;
        st->pending_len = ev->len;
        st->pending_off = 0;
        get_pump(q);
        return;
    }
    if (ev->type == OL_STORE_EV_DONE) {
        st->done = true;
        get_release(q);
        if (!st->started) {
            ol_s3_get_failed(q, ev);
            return;
        }
        ol_http_req *r = q->r;
        ol_s3_req_free(q);
        if (ev->status < 0)
            ol_http_resp_abort(r);   /* the client sees a short body, never wrong bytes */
        else
            ol_http_resp_end(r);
    }
}

/* Asks the engine for the next slice, once what was asked is written. */
static void get_pump(struct ol_s3_req *q)
{
    struct ol_s3_op_get *st = &q->op.get;
    /* Plain HTTP: the slice is sent from the engine's memory, which stays
     * the slice's until ol_get_next; so the next slice is asked for only
     * once the connection drained (sent all it had) and called us back. */
    if (st->pending && st->by_ref) {
        st->by_ref = false;   /* on_drain: sent */
        st->pending_off = st->pending_len;
    } else if (st->pending && st->pending_off == 0 && ol_http_resp_can_ref(q->r)) {
        int rc = ol_http_resp_write_ref(q->r, st->pending, st->pending_len);
        if (rc == 0) {
            st->by_ref = true;
        } else if (rc != -ENOBUFS) {
            get_release(q);
            ol_http_req *r = q->r;
            ol_s3_req_free(q);
            ol_http_resp_abort(r);
        }
        return;   /* queued, or the queue is full: on_drain brings us back */
    }
    /* TLS: the slice goes out in pieces the connection's output queue can
     * take (it holds ~1 MiB); when it is full, on_drain brings us back. */
    while (st->pending && st->pending_off < st->pending_len) {
        size_t n = st->pending_len - st->pending_off;
        if (n > OL_S3_WRITE_PIECE)
            n = OL_S3_WRITE_PIECE;
        if (ol_http_resp_write(q->r, st->pending + st->pending_off, n) == -ENOBUFS)
            return;
        st->pending_off += n;
    }
    st->pending = NULL;
    if (!st->get || st->done)
        return;
    int rc = ol_get_next(st->get);
    if (rc < 0 && rc != -EINVAL) {
        get_release(q);
        ol_http_req *r = q->r;
        ol_s3_req_free(q);
        ol_http_resp_abort(r);
    }
}

static void get_object(struct ol_s3_req *q, bool head, bool tagging)
{
    struct ol_s3_op_get *st = &q->op.get;
    memset(st, 0, sizeof *st);
    st->head = head;
    st->tagging = tagging;
    if (!tagging && ol_s3_query_has(q->query, q->query_len, "partNumber")) {
        long n = ol_s3_part_number(q);
        if (!n)
            return;
        if (ol_s3_hdr(q, "range")) {
            ol_s3_error(q, OL_S3_INVALID_REQUEST,
                        "Cannot specify both Range header and partNumber query parameter.");
            return;
        }
        st->part = (uint32_t)n;
    }
    int vq = ol_s3_vid_query(q, st->vid);
    if (vq < 0)
        return;
    st->has_vid = vq == 1;
    struct ol_get_args a = {.bucket = q->route.bucket, .key = q->route.key, .offset = 0,
                            .length = -1, .vid = st->has_vid ? st->vid : NULL,
                            /* get_pump sends plain-HTTP slices by reference */
                            .by_ref = !head && !tagging && ol_http_resp_can_ref(q->r)};
    q->abort_handler = get_client_gone;
    int rc = ol_get_begin(ol_s3_store(q), &a, get_event, q, &st->get);
    if (rc < 0)
        ol_s3_store_error(q, rc);
}

void ol_s3_get_object(struct ol_s3_req *q) { get_object(q, false, false); }

void ol_s3_head_object(struct ol_s3_req *q) { get_object(q, true, false); }

/* GetObjectTagging: the version's tag set, read as a GET reads it. */
void ol_s3_get_object_tagging(struct ol_s3_req *q) { get_object(q, false, true); }

