/*
 * op_copy.c - CopyObject and UploadPartCopy: the source named by
 * x-amz-copy-source ("[/]bucket/key[?versionId=ID]"), checked against
 * x-amz-copy-source-if-* (cond.c), streamed through this core from the
 * engine's GET into its PUT (a new version, or part N of an upload),
 * whole or UploadPartCopy's x-amz-copy-source-range, hashed on the way
 * (its MD5 ETag, and the checksum the source or the upload has).
 * CopyObject's COPY directive keeps the source's headers and user
 * metadata; REPLACE takes the request's, as PutObject does.
 *
 * Must not: copy more than S3's 5 GiB in one request, or hold more of the
 * source than the slice the GET lent (the PUT takes it, or the GET waits).
 */
#include "s3/op_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "s3/date.h"
#include "s3/pct.h"
#include "s3/range.h"
#include "s3/versioning.h"
#include "store/layout.h"

/* ---- CopyObject ------------------------------------------------------------------ */

#define OL_S3_MAX_COPY (5ull << 30)   /* S3's limit for a single CopyObject */

/* What the copy keeps of the source (COPY directive) once its GET ends. */
struct copy_state {
    struct ol_get *get;
    struct ol_put *put;
    bool replace, waiting_ready, get_done, put_finishing;
    uint64_t size;
    struct ol_meta_version v;            /* the new version's fields */
    struct ol_meta_kv kv[64];
    struct ol_ck ck;
    char strings[OL_META_HDR__COUNT * OL_META_MAX_HEADER + OL_META_MAX_USER_BYTES + 64];
    size_t used;
    const uint8_t *pending;              /* a GET slice not yet taken by the PUT */
    size_t pending_len, pending_off;
    char src_bucket[64];
    char src_key[OL_S3_KEY_MAX + 1];
    bool src_has_vid;                    /* x-amz-copy-source ...?versionId= */
    uint8_t src_vid[16];                 /* asked for, then the version copied */
    uint8_t new_vid[16];                 /* the new version's id */
    struct ol_store_cond cond;           /* If-None-Match / If-Match on the destination */
    /* UploadPartCopy: the data goes into part pnum of upload uid */
    bool part, ranged;
    uint8_t uid[16];
    uint32_t pnum;
    uint64_t roff, rlen;                 /* x-amz-copy-source-range */
};

static struct ol_meta_bytes keep(struct copy_state *c, const uint8_t *p, uint32_t len)
{
    char *dst = c->strings + c->used;
    memcpy(dst, p, len);
    c->used += len;
    return (struct ol_meta_bytes){(const uint8_t *)dst, len};
}

static void copy_free(struct ol_s3_req *q)
{
    struct copy_state *c = q->op_state;
    if (c) {
        if (c->get)
            ol_get_end(c->get);
        if (c->put && !c->put_finishing)
            ol_put_abort(c->put);
        free(c);
        q->op_state = NULL;
    }
}

static void copy_fail(struct ol_s3_req *q, enum ol_s3_err e, const char *msg)
{
    copy_free(q);
    if (q->r)
        ol_s3_error(q, e, msg);
    else
        ol_s3_req_free(q);
}

static void copy_client_gone(struct ol_s3_req *q)
{
    struct copy_state *c = q->op_state;
    if (c && c->put_finishing)
        return;   /* the PUT's EV_DONE frees q */
    copy_free(q);
    ol_s3_req_free(q);
}

static void copy_pump(struct ol_s3_req *q);

/* A copy's answer document into out[512]: CopyObjectResult, or
 * UploadPartCopy's CopyPartResult, with the new version's or part's
 * LastModified and ETag, and a part's checksum (that of an upload with a
 * checksum algorithm). Returns its length. */
static size_t copy_result(const struct copy_state *c, char out[512])
{
    const char *doc = c->part ? "CopyPartResult" : "CopyObjectResult";
    char d[40], et[OL_META_ETAG_STRLEN + 2];
    ol_s3_iso_date((int64_t)(c->v.mtime_ns / 1000000000ull), d);
    ol_s3_etag_quoted(&c->v, et);
    struct ol_xml_w w;
    ol_xml_w_init(&w, out, 512);
    ol_xml_decl(&w);
    ol_xml_open(&w, doc, OL_S3_NS);
    ol_xml_elem_s(&w, "LastModified", d);
    ol_xml_elem_s(&w, "ETag", et);
    if (c->part && c->v.cks.algo) {
        char b64[OL_CK_MAX_B64 + 1], tag[32];
        ol_ck_b64(c->v.cks.sum, ol_ck_raw_size(c->v.cks.algo), b64);
        snprintf(tag, sizeof tag, "Checksum%s", ol_ck_name(c->v.cks.algo));
        ol_xml_elem_s(&w, tag, b64);
    }
    ol_xml_close(&w, doc);
    return w.n;
}

static void copy_put_event(void *ud, const struct ol_store_event *ev)
{
    struct ol_s3_req *q = ud;
    struct copy_state *c = q->op_state;
    if (ev->type == OL_STORE_EV_READY) {
        c->waiting_ready = false;
        copy_pump(q);
    } else if (ev->type == OL_STORE_EV_ERROR) {
        const char *msg;
        enum ol_s3_err e = ol_s3_store_err(ev->status, &msg);
        copy_fail(q, e, msg);
    } else if (ev->type == OL_STORE_EV_DONE) {
        c->put = NULL;
        if (!q->r || ev->status < 0) {
            int st = ev->status;
            bool part = c->part;
            copy_free(q);
            if (!q->r)
                ol_s3_req_free(q);
            else if (part)
                ol_s3_mpu_error(q, st);
            else
                ol_s3_store_error(q, st);
            return;
        }
        char out[512];
        size_t n = copy_result(c, out);
        if (c->part) {
            copy_free(q);
            ol_s3_reply(q, 200, NULL, "application/xml", out, n);
            return;
        }
        char h[160];
        size_t hn = ol_s3_vid_header(q, c->new_vid, h, sizeof h);
        static const uint8_t null_vid[16];
        if (c->src_has_vid || memcmp(c->src_vid, null_vid, 16) != 0) {
            char id[OL_S3_VID_LEN + 1];
            ol_s3_vid_format(c->src_vid, id);
            snprintf(h + hn, sizeof h - hn, "x-amz-copy-source-version-id: %s\r\n", id);
            hn += strlen(h + hn);
        }
        copy_free(q);
        ol_s3_reply(q, 200, hn ? h : NULL, "application/xml", out, n);
    }
}

static void copy_finish(struct ol_s3_req *q)
{
    struct copy_state *c = q->op_state;
    ol_md5_final(ol_s3_md5(q), c->v.etag);
    if (c->v.cks.algo)
        ol_ck_final(&c->ck, c->v.cks.sum);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    c->v.mtime_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
    c->v.type = OL_META_OBJECT;
    memcpy(c->v.vid, c->new_vid, 16);
    int rc = ol_put_finish(c->put, &c->v);
    if (rc < 0) {
        char cb[128];
        copy_fail(q, OL_S3_INTERNAL, ol_s3_cause(cb, "ol_put_finish (copy)", rc));
        return;
    }
    c->put_finishing = true;
}

/* Moves GET slices into the PUT as fast as both allow. */
static void copy_pump(struct ol_s3_req *q)
{
    struct copy_state *c = q->op_state;
    while (c->pending && !c->waiting_ready) {
        size_t n = c->pending_len - c->pending_off;
        if (n > OL_STORE_WRITE_MAX)
            n = OL_STORE_WRITE_MAX;
        const uint8_t *p = c->pending + c->pending_off;
        int rc = ol_put_write(c->put, p, n);
        if (rc < 0) {
            char cb[128];
            copy_fail(q, OL_S3_INTERNAL, ol_s3_cause(cb, "ol_put_write (copy)", rc));
            return;
        }
        ol_md5_update(ol_s3_md5(q), p, n);
        if (c->v.cks.algo)
            ol_ck_update(&c->ck, p, n);
        c->pending_off += n;
        if (c->pending_off == c->pending_len)
            c->pending = NULL;
        if (rc == 1)
            c->waiting_ready = true;
    }
    if (c->pending || c->waiting_ready)
        return;
    if (c->get_done) {
        copy_finish(q);
        return;
    }
    int rc = ol_get_next(c->get);
    char cb[128];
    if (rc < 0)
        copy_fail(q, rc == -ERANGE ? OL_S3_INVALID_RANGE : OL_S3_INTERNAL,
                  rc == -ERANGE ? NULL : ol_s3_cause(cb, "ol_get_next (copy)", rc));
}

/* UploadPartCopy, at the source's metadata: the range, then the part
 * write, then the pump. */
static void copy_part_begin(struct ol_s3_req *q, const struct ol_meta_version *sv)
{
    struct copy_state *c = q->op_state;
    if (c->ranged && (c->roff >= sv->size || c->rlen > sv->size - c->roff)) {
        copy_fail(q, OL_S3_INVALID_RANGE, "The x-amz-copy-source-range is not within the "
                  "source object's size.");
        return;
    }
    c->size = c->ranged ? c->rlen : sv->size;
    if (c->size > OL_S3_MAX_COPY) {
        copy_fail(q, OL_S3_INVALID_REQUEST, "The specified copy source is larger than the "
                  "maximum allowable size for a copy source: 5368709120");
        return;
    }
    if (c->size == 0) {
        copy_fail(q, OL_S3_INVALID_REQUEST, "The source object is empty: a part needs at "
                  "least one byte.");
        return;
    }
    struct ol_mpu_part_args a = {.bucket = q->route.bucket, .key = q->route.key,
                                 .upload_id = c->uid, .number = c->pnum, .size = c->size};
    int rc = ol_mpu_part_begin(ol_s3_store(q), &a, copy_put_event, q, &c->put);
    if (rc < 0) {
        copy_free(q);
        ol_s3_mpu_error(q, rc);
        return;
    }
    c->v.cks.algo = (uint8_t)ol_put_upload_algo(c->put);
    struct ol_s3_body_ctx *ctx = &q->srv->ctx[q->ctx_slot];
    ol_md5_init(ol_s3_md5(q));
    if (c->v.cks.algo && ol_ck_init(&c->ck, c->v.cks.algo, ctx->cksum) < 0) {
        copy_fail(q, OL_S3_INTERNAL, "the part's checksum could not be started (OpenSSL)");
        return;
    }
    if (c->ranged)
        ol_get_set_range(c->get, c->roff, (int64_t)c->rlen);
    copy_pump(q);
}

static void copy_get_event(void *ud, const struct ol_store_event *ev)
{
    struct ol_s3_req *q = ud;
    struct copy_state *c = q->op_state;
    if (ev->type == OL_STORE_EV_META) {
        const struct ol_meta_version *sv = ev->version;
        memcpy(c->src_vid, sv->vid, 16);
        if (ol_s3_copy_cond(q, sv)) {
            copy_fail(q, OL_S3_PRECONDITION_FAILED, NULL);
            return;
        }
        if (c->part) {
            copy_part_begin(q, sv);
            return;
        }
        if (sv->size > OL_S3_MAX_COPY) {
            copy_fail(q, OL_S3_INVALID_REQUEST, "The specified copy source is larger than the "
                      "maximum allowable size for a copy source: 5368709120");
            return;
        }
        c->size = sv->size;
        if (!c->replace) {   /* COPY: the source's headers and user metadata */
            for (int i = 0; i < OL_META_HDR__COUNT; i++)
                if (sv->hdr[i].len)
                    c->v.hdr[i] = keep(c, sv->hdr[i].p, sv->hdr[i].len);
            uint32_t pos = 0;
            struct ol_meta_kv kv;
            unsigned n = 0;
            while (n < 64 && ol_meta_user_next(sv, &pos, &kv) > 0) {
                c->kv[n].name = keep(c, kv.name.p, kv.name.len);
                c->kv[n].value = keep(c, kv.value.p, kv.value.len);
                n++;
            }
            c->v.user = c->kv;
            c->v.user_count = (uint16_t)n;
            c->v.storage_class = sv->storage_class;
        }
        c->v.cks.algo = sv->cks.algo && !(sv->cks.flags & OL_META_CKS_COMPOSITE)
                            ? sv->cks.algo : 0;
        struct ol_s3_body_ctx *ctx = &q->srv->ctx[q->ctx_slot];
        ol_md5_init(ol_s3_md5(q));
        if (c->v.cks.algo && ol_ck_init(&c->ck, c->v.cks.algo, ctx->cksum) < 0)
            c->v.cks.algo = 0;
        struct ol_put_args a = {.bucket = q->route.bucket, .key = q->route.key,
                                .size = c->size, .parity = -1, .cond = c->cond};
        int rc = ol_put_begin(ol_s3_store(q), &a, copy_put_event, q, &c->put);
        if (rc < 0) {
            const char *msg;
            enum ol_s3_err e = ol_s3_store_err(rc, &msg);
            copy_fail(q, e, msg);
            return;
        }
        copy_pump(q);
        return;
    }
    if (ev->type == OL_STORE_EV_DATA) {
        c->pending = ev->data;
        c->pending_len = ev->len;
        c->pending_off = 0;
        copy_pump(q);
        return;
    }
    /* EV_DONE */
    if (ev->status < 0 || !c->put) {
        int st = ev->status < 0 ? ev->status : -EIO;
        ol_get_end(c->get);
        c->get = NULL;
        if (st == OL_STORE_EDELMARK && c->src_has_vid) {
            copy_fail(q, OL_S3_INVALID_REQUEST, "The source of a copy request may not "
                      "specifically refer to a delete marker by version id.");
            return;
        }
        if (st == -ENOENT || st == OL_STORE_EDELMARK) {
            copy_fail(q, c->src_has_vid && st == -ENOENT ? OL_S3_NO_SUCH_VERSION
                                                         : OL_S3_NO_SUCH_KEY, NULL);
            return;
        }
        const char *msg;
        enum ol_s3_err e = ol_s3_store_err(st, &msg);
        copy_fail(q, e, msg);
        return;
    }
    ol_get_end(c->get);
    c->get = NULL;
    c->get_done = true;
    copy_pump(q);
}

/* A copy's state (CopyObject, UploadPartCopy) with its source from
 * x-amz-copy-source ("[/]bucket/key[?versionId=ID]", percent-encoded),
 * made q's op_state; NULL after answering the error. */
static struct copy_state *copy_new(struct ol_s3_req *q)
{
    const struct ol_http_header *src = ol_s3_hdr(q, "x-amz-copy-source");
    char raw[2 * OL_S3_KEY_MAX + 80], dec[OL_S3_KEY_MAX + 80];
    if (!src || src->value_len >= sizeof raw) {
        ol_s3_error(q, OL_S3_INVALID_ARGUMENT, "Copy Source must mention the source bucket "
                    "and key: sourcebucket/sourcekey");
        return NULL;
    }
    memcpy(raw, src->value, src->value_len);
    raw[src->value_len] = 0;
    char *qm = strchr(raw, '?');
    uint8_t vid[16];
    if (qm) {
        if (strncmp(qm, "?versionId=", 11) != 0 ||
            ol_s3_vid_parse(qm + 11, strlen(qm + 11), vid) < 0) {
            ol_s3_error(q, OL_S3_INVALID_ARGUMENT, "Invalid version id specified");
            return NULL;
        }
        *qm = 0;
    }
    /* percent-decode, then bucket/key */
    const char *p = raw[0] == '/' ? raw + 1 : raw;
    long dn = ol_pct_decode(p, strlen(p), dec, sizeof dec - 1, false);
    size_t o = dn < 0 ? 0 : (size_t)dn;
    dec[o] = 0;
    char *slash = memchr(dec, '/', o);
    size_t bl = slash ? (size_t)(slash - dec) : 0;
    size_t kl = slash ? o - bl - 1 : 0;
    if (!slash || ol_layout_bucket_ok(dec, bl) < 0 || kl == 0 || kl > OL_S3_KEY_MAX ||
        ol_layout_key_ok(slash + 1, kl) < 0) {
        ol_s3_error(q, OL_S3_INVALID_ARGUMENT, "Copy Source must mention the source bucket "
                    "and key: sourcebucket/sourcekey");
        return NULL;
    }
    struct copy_state *c = calloc(1, sizeof *c);
    if (!c) {
        ol_s3_error(q, OL_S3_SLOW_DOWN, NULL);
        return NULL;
    }
    memcpy(c->src_bucket, dec, bl);
    memcpy(c->src_key, slash + 1, kl);
    c->src_has_vid = qm != NULL;
    if (qm)
        memcpy(c->src_vid, vid, 16);
    q->op_state = c;
    return c;
}

/* Starts reading the copy's source; the rest follows its events. */
static void copy_start(struct ol_s3_req *q)
{
    struct copy_state *c = q->op_state;
    struct ol_get_args a = {.bucket = c->src_bucket, .key = c->src_key, .offset = 0,
                            .length = -1, .vid = c->src_has_vid ? c->src_vid : NULL};
    q->abort_handler = copy_client_gone;
    int rc = ol_get_begin(ol_s3_store(q), &a, copy_get_event, q, &c->get);
    if (rc < 0) {
        const char *msg;
        enum ol_s3_err e = ol_s3_store_err(rc, &msg);
        copy_fail(q, e, msg);
    }
}

void ol_s3_copy_object(struct ol_s3_req *q)
{
    struct copy_state *c = copy_new(q);
    if (!c)
        return;
    const struct ol_http_header *dir = ol_s3_hdr(q, "x-amz-metadata-directive");
    bool replace = dir && dir->value_len == 7 && memcmp(dir->value, "REPLACE", 7) == 0;
    if (dir && !replace && !(dir->value_len == 4 && memcmp(dir->value, "COPY", 4) == 0)) {
        copy_fail(q, OL_S3_INVALID_ARGUMENT, "Unknown metadata directive.");
        return;
    }
    if (!replace && strcmp(c->src_bucket, q->route.bucket) == 0 &&
        strlen(c->src_key) == q->route.key_len &&
        memcmp(c->src_key, q->route.key, q->route.key_len) == 0) {
        copy_fail(q, OL_S3_INVALID_REQUEST, "This copy request is illegal because it is "
                  "trying to copy an object to itself without changing the object's "
                  "metadata, storage class, website redirect location or encryption "
                  "attributes.");
        return;
    }
    q->op_state = NULL;   /* a refused condition answers (and frees q) itself */
    if (!ol_s3_write_cond(q, &c->cond)) {
        free(c);
        return;
    }
    q->op_state = c;
    c->replace = replace;
    ol_s3_vid_new(q, c->new_vid);
    if (replace) {   /* REPLACE: the request's headers, as PutObject takes them */
        struct ol_s3_user_meta *um = malloc(sizeof *um);
        enum ol_s3_err e = um ? ol_s3_user_meta(q, um) : OL_S3_SLOW_DOWN;
        if (e) {
            free(um);
            copy_fail(q, e, NULL);
            return;
        }
        for (unsigned i = 0; i < um->n; i++) {
            c->kv[i].name = keep(c, um->kv[i].name.p, um->kv[i].name.len);
            c->kv[i].value = keep(c, um->kv[i].value.p, um->kv[i].value.len);
        }
        c->v.user = c->kv;
        c->v.user_count = (uint16_t)um->n;
        free(um);
        static const char *const names[OL_META_HDR__COUNT] = {
            "content-type", "content-encoding", "content-disposition", "content-language",
            "cache-control", "expires"};
        for (int i = 0; i < OL_META_HDR__COUNT; i++) {
            const struct ol_http_header *x = ol_s3_hdr(q, names[i]);
            if (x && x->value_len && x->value_len <= OL_META_MAX_HEADER)
                c->v.hdr[i] = keep(c, (const uint8_t *)x->value, (uint32_t)x->value_len);
        }
        c->v.storage_class = ol_s3_storage_class(q);
    }
    copy_start(q);
}

/* UploadPartCopy: part partNumber of uploadId from an object, whole or
 * the x-amz-copy-source-range "bytes=first-last" of it, streamed through
 * the core like CopyObject. */
void ol_s3_upload_part_copy(struct ol_s3_req *q)
{
    uint8_t id[16];
    long pn;
    if (!ol_s3_part_target(q, id, &pn))
        return;
    struct copy_state *c = copy_new(q);
    if (!c)
        return;
    const struct ol_http_header *rg = ol_s3_hdr(q, "x-amz-copy-source-range");
    uint64_t first = 0, last = 0;
    if (rg && ol_s3_copy_range(rg, &first, &last) < 0) {
        copy_fail(q, OL_S3_INVALID_ARGUMENT, "The x-amz-copy-source-range value must be "
                  "of the form bytes=first-last where first and last are the zero-based "
                  "offsets of the first and last bytes to copy");
        return;
    }
    c->part = true;
    memcpy(c->uid, id, 16);
    c->pnum = (uint32_t)pn;
    c->ranged = rg != NULL;
    c->roff = first;
    c->rlen = last - first + 1;
    copy_start(q);
}
