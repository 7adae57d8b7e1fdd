/*
 * op_mpu.c - multipart uploads: CreateMultipartUpload (with its checksum
 * algorithm and type), UploadPart (its body streamed through op_object.c's
 * PUT path into the engine's part write), CompleteMultipartUpload (the
 * parts list, S3's checksum rules, and the hook that makes the object's
 * checksum from its parts'; a Complete repeated after it succeeded gets
 * the same answer), AbortMultipartUpload, ListParts and
 * ListMultipartUploads. UploadPartCopy is op_copy.c's.
 *
 * Upload ids are 32 lower-case hex digits of the engine's 16-byte id.
 *
 * Must not: keep parts or upload state of its own (the engine does), or
 * keep anything of a request once it answered.
 */
#include "s3/op_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "s3/date.h"
#include "s3/pct.h"
#include "s3/versioning.h"

/* ---- multipart uploads ---------------------------------------------------------- */

#define OL_S3_MAX_PARTS 10000u

static void hex16(const uint8_t id[16], char out[33])
{
    static const char d[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        out[2 * i] = d[id[i] >> 4];
        out[2 * i + 1] = d[id[i] & 15];
    }
    out[32] = 0;
}

static int unhex16(const char *s, size_t n, uint8_t out[16])
{
    if (n != 32)
        return -1;
    for (int i = 0; i < 16; i++) {
        char a = s[2 * i], b = s[2 * i + 1];
        int hi = ol_hexval(a), lo = ol_hexval(b);
        if (hi < 0 || lo < 0 || (a >= 'A' && a <= 'F') || (b >= 'A' && b <= 'F'))
            return -1;   /* upload ids are printed in lower case */
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

/* The request's uploadId, or an error answered. */
static bool upload_id_of(struct ol_s3_req *q, uint8_t id[16])
{
    char v[80];
    int n = ol_s3_query(q->query, q->query_len, "uploadId", v, sizeof v);
    if (n < 0 || unhex16(v, (size_t)n, id) < 0) {
        ol_s3_error(q, OL_S3_NO_SUCH_UPLOAD, NULL);
        return false;
    }
    return true;
}

/* State of the multipart calls that are not streams (create, complete,
 * abort, list), kept in op_state. */
struct mpu_state {
    struct ol_mpu_create_args create;
    struct ol_mpu_complete_args complete;
    struct ol_mpu_list_parts_args lparts;
    struct ol_mpu_list_uploads_args luploads;
    struct ol_meta_checksum cks;
    uint8_t id[16];
    struct ol_meta_part *parts;
    struct ol_mpu_part_info *pinfo;
    struct ol_mpu_upload_info *uinfo;
    char *keys;
    int algo;
    char prefix[OL_S3_KEY_MAX + 1], delim[OL_S3_KEY_MAX + 1], key_marker[OL_S3_KEY_MAX + 1];
    struct ol_store_cond cond;   /* Complete: If-None-Match / If-Match */
    struct ol_get *get;          /* Complete again: the key's latest version */
    bool full;                   /* the upload's checksum type is FULL_OBJECT */
    bool want;                   /* Complete: the client expects this object checksum: */
    unsigned want_parts;         /*   its "-N" (0: none given) */
    uint8_t want_raw[OL_CK_MAX_RAW];
    uint8_t given[OL_S3_MAX_PARTS / 8 + 1];  /* Complete: listed parts with their checksum */
};

/* ---- checksum types (S3's x-amz-checksum-type) ---- */

enum { CK_TYPE_NONE, CK_TYPE_COMPOSITE, CK_TYPE_FULL_OBJECT };

/* The request's x-amz-checksum-type: CK_TYPE_*, -1 for another value. */
static int checksum_type(struct ol_s3_req *q)
{
    const struct ol_http_header *h = ol_s3_hdr(q, "x-amz-checksum-type");
    if (!h)
        return CK_TYPE_NONE;
    if (h->value_len == 9 && strncasecmp(h->value, "COMPOSITE", 9) == 0)
        return CK_TYPE_COMPOSITE;
    if (h->value_len == 11 && strncasecmp(h->value, "FULL_OBJECT", 11) == 0)
        return CK_TYPE_FULL_OBJECT;
    return -1;
}

/* Whether an upload of checksum algo with the store's checksum flags
 * combines its parts' CRCs into a whole-object checksum (S3 FULL_OBJECT;
 * CRC-64/NVME has no other type) rather than a composite. */
static bool upload_full(unsigned algo, unsigned flags)
{
    return algo && ((flags & OL_META_CKS_FULL_OBJECT) || algo == OL_CK_CRC64NVME);
}

/* An algorithm's name in lower case, as S3's messages write it. */
static const char *ck_lower(int algo, char out[16])
{
    const char *n = algo ? ol_ck_name(algo) : "null";
    size_t i = 0;
    for (; n[i] && i < 15; i++)
        out[i] = (char)(n[i] >= 'A' && n[i] <= 'Z' ? n[i] + 32 : n[i]);
    out[i] = 0;
    return out;
}

/* <ChecksumAlgorithm> and <ChecksumType> of an upload (ListParts,
 * ListMultipartUploads), when it has an algorithm. */
static void upload_cks_xml(struct ol_xml_w *w, unsigned algo, unsigned flags)
{
    if (!algo)
        return;
    ol_xml_elem_s(w, "ChecksumAlgorithm", ol_ck_name((int)algo));
    ol_xml_elem_s(w, "ChecksumType", upload_full(algo, flags) ? "FULL_OBJECT" : "COMPOSITE");
}

static void mpu_free(struct ol_s3_req *q)
{
    struct mpu_state *m = q->op_state;
    if (!m)
        return;
    if (m->get)
        ol_get_end(m->get);
    free(m->parts);
    free(m->pinfo);
    free(m->uinfo);
    free(m->keys);
    free(m);
    q->op_state = NULL;
}

/* The start of every multipart callback: true when the request ended here
 * (the client left, or the engine failed: answered). */
static bool mpu_ended(struct ol_s3_req *q, const struct ol_store_event *ev)
{
    if (q->r && ev->status >= 0)
        return false;
    int st = ev->status;
    mpu_free(q);
    if (q->r)
        ol_s3_mpu_error(q, st);
    else
        ol_s3_req_free(q);
    return true;
}

/* The end of the XML-answering callbacks. */
static void mpu_reply_xml(struct ol_s3_req *q, const struct ol_xml_w *w)
{
    mpu_free(q);
    if (w->err)
        ol_s3_error(q, OL_S3_INTERNAL, "the XML answer did not fit its buffer");
    else
        ol_s3_reply(q, 200, NULL, "application/xml", w->p, w->n);
}

/* After an engine call: its error answered, or the request waits for it. */
static void mpu_started(struct ol_s3_req *q, int rc)
{
    if (rc < 0) {
        mpu_free(q);
        ol_s3_mpu_error(q, rc);
    } else {
        q->abort_handler = ol_s3_client_gone_wait;
    }
}

static struct mpu_state *mpu_new(struct ol_s3_req *q)
{
    struct mpu_state *m = calloc(1, sizeof *m);
    if (!m)
        ol_s3_error(q, OL_S3_SLOW_DOWN, NULL);
    q->op_state = m;
    return m;
}

static void create_done(void *ud, const struct ol_store_event *ev)
{
    struct ol_s3_req *q = ud;
    struct mpu_state *m = q->op_state;
    if (mpu_ended(q, ev))
        return;
    char out[4096], id[33], h[128] = "";
    hex16(m->create.upload_id, id);
    struct ol_xml_w w;
    ol_xml_w_init(&w, out, sizeof out);
    ol_xml_decl(&w);
    ol_xml_open(&w, "InitiateMultipartUploadResult", OL_S3_NS);
    ol_xml_elem(&w, "Bucket", q->route.bucket, q->route.bucket_len);
    ol_xml_elem(&w, "Key", q->route.key, q->route.key_len);
    ol_xml_elem_s(&w, "UploadId", id);
    ol_xml_close(&w, "InitiateMultipartUploadResult");
    if (m->algo)
        snprintf(h, sizeof h, "x-amz-checksum-algorithm: %s\r\nx-amz-checksum-type: %s\r\n",
                 ol_ck_name(m->algo), m->full ? "FULL_OBJECT" : "COMPOSITE");
    mpu_free(q);
    ol_s3_reply(q, 200, h, "application/xml", out, w.n);
}

void ol_s3_create_upload(struct ol_s3_req *q)
{
    struct ol_s3_user_meta um;
    if (!ol_s3_new_object_check(q, &um))
        return;
    int algo = 0;
    const struct ol_http_header *ca = ol_s3_hdr(q, "x-amz-checksum-algorithm");
    if (ca && !(algo = ol_ck_algo_of_name(ca->value, ca->value_len))) {
        ol_s3_error(q, OL_S3_INVALID_REQUEST, "Unknown x-amz-checksum-algorithm.");
        return;
    }
    /* the checksum type, as S3 takes it: FULL_OBJECT for the CRCs only,
     * COMPOSITE for all but CRC-64/NVME; by default COMPOSITE, except
     * CRC-64/NVME's FULL_OBJECT */
    int type = checksum_type(q);
    char msg[160], an[16];
    if (type < 0) {
        ol_s3_error(q, OL_S3_INVALID_REQUEST, "Value for x-amz-checksum-type header is invalid.");
        return;
    }
    if (type && !algo) {
        ol_s3_error(q, OL_S3_INVALID_REQUEST, "The x-amz-checksum-type header can only be used "
                    "with the x-amz-checksum-algorithm header.");
        return;
    }
    bool full = type ? type == CK_TYPE_FULL_OBJECT : algo == OL_CK_CRC64NVME;
    if (algo && (full ? !ol_ck_is_crc(algo) : algo == OL_CK_CRC64NVME)) {
        snprintf(msg, sizeof msg, "The %s checksum type cannot be used with the %s checksum "
                 "algorithm.", full ? "FULL_OBJECT" : "COMPOSITE", ck_lower(algo, an));
        ol_s3_error(q, OL_S3_INVALID_REQUEST, msg);
        return;
    }
    int parity;
    if (!ol_s3_parity(q, &parity))
        return;
    struct mpu_state *m = mpu_new(q);
    if (!m)
        return;
    m->algo = algo;
    m->full = algo && full;
    struct ol_meta_version v;
    memset(&v, 0, sizeof v);
    char ce[OL_META_MAX_HEADER];
    ol_s3_new_object_fields(q, &v, &um, ce);
    v.cks.algo = (uint8_t)algo;
    v.cks.flags = m->full ? OL_META_CKS_FULL_OBJECT : 0;
    m->create = (struct ol_mpu_create_args){.bucket = q->route.bucket, .key = q->route.key,
                                            .parity = parity, .v = &v};
    int rc = ol_mpu_create(ol_s3_store(q), &m->create, create_done, q);
    mpu_started(q, rc);
}

/* The ?partNumber of q, 1..10000; 0 after answering InvalidArgument. */
long ol_s3_part_number(struct ol_s3_req *q)
{
    char num[16];
    int nl = ol_s3_query(q->query, q->query_len, "partNumber", num, sizeof num);
    char *end = NULL;
    long pn = nl > 0 && num[0] >= '0' && num[0] <= '9' ? strtol(num, &end, 10) : 0;
    if (!end || *end || pn < 1 || pn > (long)OL_S3_MAX_PARTS) {
        ol_s3_error(q, OL_S3_INVALID_ARGUMENT, "Part number must be an integer between 1 and "
                    "10000, inclusive.");
        return 0;
    }
    return pn;
}

bool ol_s3_part_target(struct ol_s3_req *q, uint8_t id[16], long *pn)
{
    if (!upload_id_of(q, id))
        return false;
    *pn = ol_s3_part_number(q);
    return *pn != 0;
}

void ol_s3_upload_part(struct ol_s3_req *q)
{
    struct ol_s3_op_put *st = &q->op.put;
    memset(st, 0, offsetof(struct ol_s3_op_put, spill));
    st->is_part = true;
    uint8_t id[16];
    long pn;
    if (!ol_s3_part_target(q, id, &pn))
        return;
    enum ol_s3_err e = ol_s3_begin_body(q);
    if (e) {
        ol_s3_error(q, e, NULL);
        return;
    }
    if (q->body.expect > (5ull << 30)) {
        ol_s3_error(q, OL_S3_ENTITY_TOO_LARGE, NULL);
        return;
    }
    struct ol_mpu_part_args a = {.bucket = q->route.bucket, .key = q->route.key,
                                 .upload_id = id, .number = (uint32_t)pn,
                                 .size = q->body.expect};
    int rc = ol_mpu_part_begin(ol_s3_store(q), &a, ol_s3_put_event, q, &st->put);
    if (rc < 0) {
        ol_s3_mpu_error(q, rc);
        return;
    }
    /* an upload with a checksum algorithm takes parts with that checksum
     * only, as S3 does (a part without one could not be listed at
     * Complete, nor combined into a FULL_OBJECT checksum) */
    unsigned ua = ol_put_upload_algo(st->put);
    if (ua && ua != (unsigned)q->body.ck_algo) {
        char msg[128], un[16], gn[16];
        snprintf(msg, sizeof msg, "Checksum Type mismatch occurred, expected checksum Type: %s, "
                 "actual checksum Type: %s", ck_lower((int)ua, un), ck_lower(q->body.ck_algo, gn));
        ol_s3_put_fail(q, OL_S3_INVALID_REQUEST, msg);
        return;
    }
    q->body_handler = ol_s3_put_body;
    q->body_end_handler = ol_s3_put_body_end;
    q->abort_handler = ol_s3_put_client_gone;
}

/* ---- CompleteMultipartUpload ---- */

/* What the parts list says. A part may carry checksums (<ChecksumCRC32>
 * ...): the upload's algorithm's goes to parts[i].cks (and its bit in
 * m->given); each must be base64 of its algorithm's size, one per part. */
struct complete_parse {
    struct mpu_state *m;
    unsigned n;
    bool bad;            /* an ETag we never gave: InvalidPart */
    bool bad_cks;        /* a checksum not base64 of its size, or two in a part */
    int algo;            /* the upload's checksum algorithm (OL_CK_*), 0: none */
    unsigned seen;       /* the algorithms of the current part's checksums, a bit each */
    uint32_t other_part; /* the first part with only another algorithm's checksum */
    int other_algo;      /*   that algorithm */
    uint32_t missing;    /* the first part without a checksum */
};

static int complete_cb(void *ctx, const char *path, size_t depth, const char *text, size_t len,
                       bool end)
{
    struct complete_parse *cp = ctx;
    if (depth == 1 && strcmp(path, "CompleteMultipartUpload") != 0)
        return -EINVAL;
    if (!end) {
        if (strcmp(path, "CompleteMultipartUpload/Part") == 0) {
            if (cp->n == OL_S3_MAX_PARTS)
                return -E2BIG;
            memset(&cp->m->parts[cp->n], 0, sizeof cp->m->parts[0]);
            cp->seen = 0;
        }
        return 0;
    }
    struct ol_meta_part *p = &cp->m->parts[cp->n];
    if (strcmp(path, "CompleteMultipartUpload/Part/PartNumber") == 0) {
        char b[16];
        if (len == 0 || len >= sizeof b)
            return -EINVAL;
        memcpy(b, text, len);
        b[len] = 0;
        char *e;
        long v = strtol(b, &e, 10);
        if (*e || v < 1 || v > (long)OL_S3_MAX_PARTS)
            return -EINVAL;
        p->number = (uint32_t)v;
    } else if (strcmp(path, "CompleteMultipartUpload/Part/ETag") == 0) {
        const char *t = text;
        if (len >= 2 && t[0] == '"' && t[len - 1] == '"')
            t++, len -= 2;
        char lower[33];
        for (size_t i = 0; i < len && i < 32; i++)
            lower[i] = (char)(t[i] >= 'A' && t[i] <= 'F' ? t[i] + 32 : t[i]);
        if (len != 32 || unhex16(lower, 32, p->etag) < 0)
            cp->bad = true;   /* an ETag we never gave: InvalidPart */
    } else if (strncmp(path, "CompleteMultipartUpload/Part/Checksum", 37) == 0) {
        int a = ol_ck_algo_of_name(path + 37, strlen(path + 37));
        uint8_t tmp[OL_CK_MAX_RAW];
        if (!a)
            return 0;   /* an algorithm this server does not offer: not the upload's */
        if (cp->seen || ol_ck_from_b64(text, len, ol_ck_raw_size(a),
                                       a == cp->algo ? p->cks : tmp) < 0)
            cp->bad_cks = true;
        cp->seen |= 1u << a;
    } else if (strcmp(path, "CompleteMultipartUpload/Part") == 0) {
        if (p->number == 0)
            return -EINVAL;
        if (cp->algo && (cp->seen >> cp->algo & 1)) {
            cp->m->given[cp->n / 8] |= (uint8_t)(1u << (cp->n % 8));
        } else if (cp->algo && cp->seen && !cp->other_part) {
            cp->other_part = p->number;
            cp->other_algo = __builtin_ctz(cp->seen);
        } else if (cp->algo && !cp->seen && !cp->missing) {
            cp->missing = p->number;
        }
        cp->n++;
    }
    return 0;
}

/* A Complete's x-amz-checksum-<alg> value for an upload of algo: "<base64>"
 * or, for a composite, "<base64>-N" (N 1..10000). 0 with raw and *parts
 * (N, or 0 when not given); -1 when malformed. */
static int want_decode(int algo, bool composite, const char *v, size_t n, uint8_t *raw,
                       unsigned *parts)
{
    *parts = 0;
    const char *dash = memchr(v, '-', n);
    size_t bl = dash ? (size_t)(dash - v) : n;
    if (dash) {
        const char *d = dash + 1;
        size_t dl = n - bl - 1;
        if (!composite || dl == 0 || dl > 5 || d[0] == '0')
            return -1;
        unsigned x = 0;
        for (size_t i = 0; i < dl; i++) {
            if (d[i] < '0' || d[i] > '9')
                return -1;
            x = x * 10 + (unsigned)(d[i] - '0');
        }
        if (x > OL_S3_MAX_PARTS)
            return -1;
        *parts = x;
    }
    return ol_ck_from_b64(v, bl, ol_ck_raw_size(algo), raw) < 0 ? -1 : 0;
}

/*
 * The checksum rules of a Complete of an upload with a checksum algorithm,
 * as S3 applies them: x-amz-checksum-type (when sent) must be the
 * upload's; at most one x-amz-checksum-<alg> (the object's checksum the
 * client expects, compared by complete_cks), of the upload's algorithm
 * and well formed; no part with another algorithm's checksum instead; a
 * composite upload needs every part's checksum (a FULL_OBJECT one takes
 * those not given from the parts). Fills m->want*; OL_S3_OK, or the error
 * with its message in msg.
 */
static enum ol_s3_err complete_checks(struct ol_s3_req *q, const struct complete_parse *cp,
                                      char *msg, size_t cap)
{
    struct mpu_state *m = q->op_state;
    char un[16], on[16];
    ck_lower(m->algo, un);
    int type = checksum_type(q);
    if (type < 0) {
        snprintf(msg, cap, "Value for x-amz-checksum-type header is invalid.");
        return OL_S3_INVALID_REQUEST;
    }
    if (type && (type == CK_TYPE_FULL_OBJECT) != m->full) {
        snprintf(msg, cap, "The upload was created using the %s checksum mode. The complete "
                 "request must use the same checksum mode.", m->full ? "FULL_OBJECT" : "COMPOSITE");
        return OL_S3_INVALID_REQUEST;
    }
    const struct ol_http_request *h = ol_http_req_head(q->r);
    const struct ol_http_header *want = NULL;
    int wa = 0;
    for (size_t i = 0; i < h->num_headers; i++) {
        int a = ol_ck_algo_of_header(h->headers[i].name, h->headers[i].name_len);
        if (!a)
            continue;
        if (want) {
            snprintf(msg, cap, "Expecting a single x-amz-checksum- header. Multiple checksum "
                     "Types are not allowed.");
            return OL_S3_INVALID_REQUEST;
        }
        want = &h->headers[i];
        wa = a;
    }
    if (want && wa != m->algo) {
        snprintf(msg, cap, "Checksum Type mismatch occurred, expected checksum Type: %s, actual "
                 "checksum Type: %s", un, ck_lower(wa, on));
        return OL_S3_INVALID_REQUEST;
    }
    if (want && want_decode(wa, !m->full, want->value, want->value_len, m->want_raw,
                            &m->want_parts) < 0) {
        snprintf(msg, cap, "Value for %s header is invalid.", ol_ck_header(wa));
        return OL_S3_INVALID_REQUEST;
    }
    m->want = want != NULL;
    if (cp->other_part) {
        snprintf(msg, cap, "The %s you specified for part %u did not match what we received.",
                 ck_lower(cp->other_algo, on), (unsigned)cp->other_part);
        return OL_S3_BAD_DIGEST;
    }
    if (!m->full && cp->missing) {
        snprintf(msg, cap, "The upload was created using a %s checksum. The complete request "
                 "must include the checksum for each part. It was missing for part %u in the "
                 "request.", un, (unsigned)cp->missing);
        return OL_S3_INVALID_REQUEST;
    }
    return OL_S3_OK;
}

/* Complete's checksum hook (engine.h ol_mpu_cks_fn): the object's checksum
 * from the parts as they will be stored. FULL_OBJECT: their CRCs combined
 * in order (checksum.h), the CRC of the whole object; COMPOSITE: the
 * checksum of their checksums, "-N". Against what the client expects:
 * OL_STORE_EBADDIGEST when it differs. Kept in m->cks for the answer. */
static int complete_cks(void *ud, const struct ol_meta_part *parts, unsigned n,
                        struct ol_meta_checksum *out)
{
    struct ol_s3_req *q = ud;
    struct mpu_state *m = q->op_state;
    size_t raw = ol_ck_raw_size(m->algo);
    memset(out, 0, sizeof *out);
    out->algo = (uint8_t)m->algo;
    if (m->full) {
        uint64_t crc = 0;
        for (unsigned i = 0; i < n; i++) {
            uint64_t c = ol_ck_crc_load(m->algo, parts[i].cks);
            crc = i ? ol_ck_crc_combine(m->algo, crc, c, parts[i].actual_size) : c;
        }
        ol_ck_crc_store(m->algo, crc, out->sum);
    } else {
        struct ol_ck ck;
        if (ol_ck_init(&ck, m->algo, q->srv->ctx[q->ctx_slot].cksum) < 0)
            return -EIO;
        for (unsigned i = 0; i < n; i++)
            ol_ck_update(&ck, parts[i].cks, raw);
        ol_ck_final(&ck, out->sum);
        out->flags = OL_META_CKS_COMPOSITE;
        out->parts = (uint16_t)n;
    }
    m->cks = *out;
    if (m->want && (memcmp(out->sum, m->want_raw, raw) != 0 ||
                    (m->want_parts && m->want_parts != n)))
        return OL_STORE_EBADDIGEST;
    return 0;
}

/* CompleteMultipartUploadResult for the version vid (etag, nparts parts;
 * cks: its composite checksum, or NULL). The arguments may point into the
 * request's state: it is freed (and its GET ended) only after they are
 * read, once the answer is built. */
static void complete_reply(struct ol_s3_req *q, const uint8_t etag[16], unsigned nparts,
                           const uint8_t vid[16], const struct ol_meta_checksum *cks)
{
    char vh[80];
    size_t vhl = ol_s3_vid_header(q, vid, vh, sizeof vh);
    struct ol_meta_version v = {0};
    memcpy(v.etag, etag, 16);
    v.etag_parts = (uint16_t)nparts;
    char et[OL_META_ETAG_STRLEN + 2], out[4096 + 3 * OL_S3_KEY_MAX];
    ol_s3_etag_quoted(&v, et);
    struct ol_xml_w w;
    ol_xml_w_init(&w, out, sizeof out);
    ol_xml_decl(&w);
    ol_xml_open(&w, "CompleteMultipartUploadResult", OL_S3_NS);
    char loc[256];
    snprintf(loc, sizeof loc, "/%s/", q->route.bucket);
    ol_xml_open(&w, "Location", NULL);
    ol_xml_text(&w, loc, strlen(loc));
    ol_s3_url_text(&w, q->route.key, q->route.key_len, true);
    ol_xml_close(&w, "Location");
    ol_xml_elem(&w, "Bucket", q->route.bucket, q->route.bucket_len);
    ol_xml_elem(&w, "Key", q->route.key, q->route.key_len);
    ol_xml_elem_s(&w, "ETag", et);
    if (cks && cks->algo) {
        char b64[OL_CK_MAX_B64 + 1], tag[40], val[OL_CK_MAX_B64 + 8];
        bool composite = cks->flags & OL_META_CKS_COMPOSITE;
        ol_ck_b64(cks->sum, ol_ck_raw_size(cks->algo), b64);
        snprintf(val, sizeof val, composite ? "%s-%u" : "%s", b64, nparts);
        snprintf(tag, sizeof tag, "Checksum%s", ol_ck_name(cks->algo));
        ol_xml_elem_s(&w, tag, val);
        ol_xml_elem_s(&w, "ChecksumType", composite ? "COMPOSITE" : "FULL_OBJECT");
    }
    ol_xml_close(&w, "CompleteMultipartUploadResult");
    mpu_free(q);
    ol_s3_reply(q, 200, vhl ? vh : NULL, "application/xml", out, w.n);
}

/*
 * A Complete whose upload is gone. S3 answers a Complete repeated with the
 * same parts, after the first one succeeded, with the same result (a client
 * that lost the first answer retries; Flink's S3 file sink commits a part
 * file again when a checkpoint's commit is replayed). The upload's id is
 * the data dir of the version its Complete made: when the key's latest
 * version is that one and holds exactly the parts asked for, the answer is
 * that version's; otherwise NoSuchUpload (also when the object was written
 * over since).
 */
static void complete_again_event(void *ud, const struct ol_store_event *ev)
{
    struct ol_s3_req *q = ud;
    struct mpu_state *m = q->op_state;
    if (!q->r) {
        mpu_free(q);   /* ends the GET */
        ol_s3_req_free(q);
        return;
    }
    const struct ol_meta_version *v = ev->type == OL_STORE_EV_META ? ev->version : NULL;
    if (!v && ev->status != -ENOENT && ev->status != OL_STORE_EDELMARK &&
        ev->status != OL_STORE_ENOBUCKET) {
        int st = ev->status < 0 ? ev->status : -EIO;
        mpu_free(q);
        ol_s3_store_error(q, st);   /* the version could not be read: not "no upload" */
        return;
    }
    bool same = v && v->type == OL_META_OBJECT && memcmp(v->data_dir, m->id, 16) == 0 &&
                v->etag_parts == m->complete.nparts && v->part_count == m->complete.nparts;
    for (unsigned i = 0; same && i < m->complete.nparts; i++) {
        struct ol_meta_part p;
        same = ol_meta_part_at(v, i, &p) == 0 && p.number == m->parts[i].number &&
               memcmp(p.etag, m->parts[i].etag, 16) == 0;
    }
    if (!same) {
        mpu_free(q);
        ol_s3_mpu_error(q, OL_STORE_ENOUPLOAD);
        return;
    }
    complete_reply(q, v->etag, m->complete.nparts, v->vid,
                   v->cks.algo ? &v->cks : NULL);   /* ends the GET */
}

static void complete_again(struct ol_s3_req *q)
{
    struct mpu_state *m = q->op_state;
    struct ol_get_args a = {.bucket = q->route.bucket, .key = q->route.key, .offset = 0,
                            .length = -1};
    int rc = ol_get_begin(ol_s3_store(q), &a, complete_again_event, q, &m->get);
    if (rc < 0) {
        m->get = NULL;
        mpu_free(q);
        ol_s3_store_error(q, rc);
        return;
    }
    q->abort_handler = ol_s3_client_gone_wait;
}

static void complete_done(void *ud, const struct ol_store_event *ev)
{
    struct ol_s3_req *q = ud;
    struct mpu_state *m = q->op_state;
    if (q->r && ev->status == OL_STORE_ENOUPLOAD) {
        complete_again(q);
        return;
    }
    if (q->r && ev->status == OL_STORE_EBADDIGEST) {
        char msg[96], an[16];
        snprintf(msg, sizeof msg, "The %s you specified did not match the calculated checksum.",
                 ck_lower(m->algo, an));
        mpu_free(q);
        ol_s3_error(q, OL_S3_BAD_DIGEST, msg);
        return;
    }
    if (mpu_ended(q, ev))
        return;
    struct ol_mpu_complete_args *a = &m->complete;
    complete_reply(q, a->etag, a->nparts, a->vid, m->algo ? &m->cks : NULL);
}

static void complete_body(struct ol_s3_req *q)
{
    struct ol_store_cond cond;
    uint8_t id[16];
    if (!ol_s3_write_cond(q, &cond) || !upload_id_of(q, id))
        return;   /* checked before the body: cannot fail here */
    struct mpu_state *m = mpu_new(q);
    if (!m)
        return;
    m->cond = cond;
    memcpy(m->id, id, 16);
    m->parts = malloc(OL_S3_MAX_PARTS * sizeof *m->parts);
    if (!m->parts) {
        mpu_free(q);
        ol_s3_error(q, OL_S3_SLOW_DOWN, NULL);
        return;
    }
    /* the upload's checksum algorithm and type decide what the list and
     * the headers must say (an upload not found: maybe a Complete again) */
    uint8_t ualgo = 0, uflags = 0;
    bool known = ol_mpu_upload_checksum(ol_s3_store(q), q->route.bucket, q->route.key, m->id,
                                        &ualgo, &uflags) == 0;
    m->algo = known ? ualgo : 0;   /* ol_ck_algo and ol_meta_cks agree */
    m->full = upload_full(ualgo, uflags);
    struct complete_parse cp = {.m = m, .algo = m->algo};
    int rc = ol_xml_parse(q->xml, q->xml_len, complete_cb, &cp);
    if (rc < 0 || cp.n == 0) {
        mpu_free(q);
        ol_s3_error(q, OL_S3_MALFORMED_XML, NULL);
        return;
    }
    if (cp.bad_cks) {
        mpu_free(q);
        ol_s3_error(q, OL_S3_INVALID_ARGUMENT,
                    "Invalid Base64 or multiple checksums present in request");
        return;
    }
    if (cp.bad) {
        mpu_free(q);
        ol_s3_error(q, OL_S3_INVALID_PART, NULL);
        return;
    }
    m->complete = (struct ol_mpu_complete_args){.bucket = q->route.bucket, .key = q->route.key,
                                                .upload_id = m->id, .parts = m->parts,
                                                .nparts = cp.n, .cond = m->cond};
    if (!known) {
        complete_again(q);
        return;
    }
    if (m->algo) {
        char msg[256];
        enum ol_s3_err e = complete_checks(q, &cp, msg, sizeof msg);
        if (e) {
            mpu_free(q);
            ol_s3_error(q, e, msg);
            return;
        }
        m->complete.cks_fn = complete_cks;
        m->complete.cks_ud = q;
        m->complete.cks_given = m->full ? m->given : NULL;
    }
    ol_s3_vid_new(q, m->complete.vid);
    rc = ol_mpu_complete(ol_s3_store(q), &m->complete, complete_done, q);
    if (rc == OL_STORE_ENOUPLOAD)
        complete_again(q);
    else
        mpu_started(q, rc);
}

/* The state of a Complete is made once its body is in: an error of the
 * body, or the client leaving while it comes, frees nothing of it. */
void ol_s3_complete_upload(struct ol_s3_req *q)
{
    struct ol_store_cond cond;
    uint8_t id[16];
    if (!ol_s3_write_cond(q, &cond) || !upload_id_of(q, id))
        return;
    q->object_checksums = true;   /* x-amz-checksum-*: the object's, not the XML's */
    enum ol_s3_err e = ol_s3_read_xml(q, complete_body);
    if (e)
        ol_s3_error(q, e, NULL);
}

static void abort_done(void *ud, const struct ol_store_event *ev)
{
    struct ol_s3_req *q = ud;
    if (!q->r) {
        ol_s3_req_free(q);
        return;
    }
    if (ev->status < 0)
        ol_s3_mpu_error(q, ev->status);
    else
        ol_s3_reply(q, 204, NULL, NULL, NULL, 0);
}

void ol_s3_abort_upload(struct ol_s3_req *q)
{
    uint8_t id[16];
    if (!upload_id_of(q, id))
        return;
    int rc = ol_mpu_abort(ol_s3_store(q), q->route.bucket, q->route.key, id, abort_done, q);
    if (rc < 0)
        ol_s3_mpu_error(q, rc);
    else
        q->abort_handler = ol_s3_client_gone_wait;
}

/* ---- ListParts / ListMultipartUploads ---- */

static void list_parts_done(void *ud, const struct ol_store_event *ev)
{
    struct ol_s3_req *q = ud;
    struct mpu_state *m = q->op_state;
    if (mpu_ended(q, ev))
        return;
    struct ol_mpu_list_parts_args *a = &m->lparts;
    size_t cap = 8192 + (size_t)a->count * 512;
    char *out = malloc(cap), id[33], d[40], et[OL_META_ETAG_STRLEN + 2];
    if (!out) {
        mpu_free(q);
        ol_s3_error(q, OL_S3_SLOW_DOWN, NULL);
        return;
    }
    hex16(m->id, id);
    struct ol_xml_w w;
    ol_xml_w_init(&w, out, cap);
    ol_xml_decl(&w);
    ol_xml_open(&w, "ListPartsResult", OL_S3_NS);
    ol_xml_elem(&w, "Bucket", q->route.bucket, q->route.bucket_len);
    ol_xml_elem(&w, "Key", q->route.key, q->route.key_len);
    ol_xml_elem_s(&w, "UploadId", id);
    ol_xml_elem_u64(&w, "PartNumberMarker", a->marker);
    if (a->count)
        ol_xml_elem_u64(&w, "NextPartNumberMarker", a->out[a->count - 1].number);
    ol_xml_elem_u64(&w, "MaxParts", a->max);
    ol_xml_elem_s(&w, "IsTruncated", a->truncated ? "true" : "false");
    ol_xml_elem_s(&w, "StorageClass", ol_s3_storage_class_name(a->storage_class));
    upload_cks_xml(&w, a->cks_algo, a->cks_flags);
    for (unsigned i = 0; i < a->count; i++) {
        struct ol_mpu_part_info *p = &a->out[i];
        struct ol_meta_version v = {0};
        memcpy(v.etag, p->etag, 16);
        ol_s3_etag_quoted(&v, et);
        ol_s3_iso_date((int64_t)(p->mtime_ns / 1000000000ull), d);
        ol_xml_open(&w, "Part", NULL);
        ol_xml_elem_u64(&w, "PartNumber", p->number);
        ol_xml_elem_s(&w, "LastModified", d);
        ol_xml_elem_s(&w, "ETag", et);
        ol_xml_elem_u64(&w, "Size", p->size);
        if (a->cks_algo) {
            char b64[OL_CK_MAX_B64 + 1], tag[40];
            ol_ck_b64(p->cks, ol_ck_raw_size(a->cks_algo), b64);
            snprintf(tag, sizeof tag, "Checksum%s", ol_ck_name(a->cks_algo));
            ol_xml_elem_s(&w, tag, b64);
        }
        ol_xml_close(&w, "Part");
    }
    ol_xml_close(&w, "ListPartsResult");
    mpu_reply_xml(q, &w);
    free(out);
}

void ol_s3_list_parts(struct ol_s3_req *q)
{
    struct mpu_state *m = mpu_new(q);
    if (!m)
        return;
    if (!upload_id_of(q, m->id)) {
        q->op_state = NULL;
        free(m);
        return;
    }
    char v[24];
    unsigned max = 1000;
    uint32_t marker = 0;
    int n = ol_s3_query(q->query, q->query_len, "max-parts", v, sizeof v);
    if (n > 0) {
        long x = strtol(v, NULL, 10);
        max = x < 1 ? 1 : x > 1000 ? 1000 : (unsigned)x;
    }
    n = ol_s3_query(q->query, q->query_len, "part-number-marker", v, sizeof v);
    if (n > 0)
        marker = (uint32_t)strtoul(v, NULL, 10);
    m->pinfo = malloc(max * sizeof *m->pinfo);
    if (!m->pinfo) {
        mpu_free(q);
        ol_s3_error(q, OL_S3_SLOW_DOWN, NULL);
        return;
    }
    m->lparts = (struct ol_mpu_list_parts_args){.bucket = q->route.bucket, .key = q->route.key,
                                                .upload_id = m->id, .marker = marker,
                                                .max = max, .out = m->pinfo};
    int rc = ol_mpu_list_parts(ol_s3_store(q), &m->lparts, list_parts_done, q);
    mpu_started(q, rc);
}

static void list_uploads_done(void *ud, const struct ol_store_event *ev)
{
    struct ol_s3_req *q = ud;
    struct mpu_state *m = q->op_state;
    if (mpu_ended(q, ev))
        return;
    struct ol_mpu_list_uploads_args *a = &m->luploads;
    size_t cap = 8192 + (size_t)a->count * (OL_S3_KEY_MAX * 2 + 512);
    char *out = malloc(cap), id[33], d[40];
    if (!out) {
        mpu_free(q);
        ol_s3_error(q, OL_S3_SLOW_DOWN, NULL);
        return;
    }
    size_t pl = strlen(m->prefix), dl = strlen(m->delim);
    struct ol_xml_w w;
    ol_xml_w_init(&w, out, cap);
    ol_xml_decl(&w);
    ol_xml_open(&w, "ListMultipartUploadsResult", OL_S3_NS);
    ol_xml_elem(&w, "Bucket", q->route.bucket, q->route.bucket_len);
    ol_xml_elem_s(&w, "KeyMarker", a->key_marker ? a->key_marker : "");
    char idm[33] = "";
    if (a->upload_id_marker)
        hex16(a->upload_id_marker, idm);
    ol_xml_elem_s(&w, "UploadIdMarker", idm);
    if (a->count) {
        hex16(a->out[a->count - 1].upload_id, id);
        ol_xml_elem_s(&w, "NextKeyMarker", a->out[a->count - 1].key);
        ol_xml_elem_s(&w, "NextUploadIdMarker", id);
    }
    ol_xml_elem_s(&w, "Prefix", m->prefix);
    if (dl)
        ol_xml_elem_s(&w, "Delimiter", m->delim);
    ol_xml_elem_u64(&w, "MaxUploads", a->max);
    ol_xml_elem_s(&w, "IsTruncated", a->truncated ? "true" : "false");
    const char *last_cp = NULL;
    size_t last_cpl = 0;
    for (unsigned i = 0; i < a->count; i++) {
        struct ol_mpu_upload_info *u = &a->out[i];
        if (dl) {   /* roll keys up to their CommonPrefix, as ListObjects does */
            const char *hit = u->key_len > pl ? memmem(u->key + pl, u->key_len - pl, m->delim, dl)
                                              : NULL;
            if (hit) {
                size_t cl = (size_t)(hit - u->key) + dl;
                if (!(last_cp && last_cpl == cl && memcmp(last_cp, u->key, cl) == 0)) {
                    ol_xml_open(&w, "CommonPrefixes", NULL);
                    ol_xml_elem(&w, "Prefix", u->key, cl);
                    ol_xml_close(&w, "CommonPrefixes");
                }
                last_cp = u->key;
                last_cpl = cl;
                continue;
            }
        }
        hex16(u->upload_id, id);
        ol_s3_iso_date((int64_t)(u->initiated_ns / 1000000000ull), d);
        ol_xml_open(&w, "Upload", NULL);
        ol_xml_elem(&w, "Key", u->key, u->key_len);
        ol_xml_elem_s(&w, "UploadId", id);
        ol_s3_owner(&w, "Initiator");
        ol_s3_owner(&w, "Owner");
        ol_xml_elem_s(&w, "StorageClass", ol_s3_storage_class_name(u->storage_class));
        ol_xml_elem_s(&w, "Initiated", d);
        upload_cks_xml(&w, u->cks_algo, u->cks_flags);
        ol_xml_close(&w, "Upload");
    }
    ol_xml_close(&w, "ListMultipartUploadsResult");
    mpu_reply_xml(q, &w);
    free(out);
}

void ol_s3_list_uploads(struct ol_s3_req *q)
{
    struct mpu_state *m = mpu_new(q);
    if (!m)
        return;
    char *key_marker = m->key_marker;   /* lives until the engine's callback */
    char v[80];
    unsigned max = 1000;
    int n = ol_s3_query(q->query, q->query_len, "max-uploads", v, sizeof v);
    if (n > 0) {
        long x = strtol(v, NULL, 10);
        max = x < 1 ? 1 : x > 1000 ? 1000 : (unsigned)x;
    }
    int pl = ol_s3_query(q->query, q->query_len, "prefix", m->prefix, sizeof m->prefix);
    int dl = ol_s3_query(q->query, q->query_len, "delimiter", m->delim, sizeof m->delim);
    int kl = ol_s3_query(q->query, q->query_len, "key-marker", key_marker,
                         sizeof m->key_marker);
    int il = ol_s3_query(q->query, q->query_len, "upload-id-marker", v, sizeof v);
    if (pl < 0)
        m->prefix[0] = 0;
    if (dl < 0)
        m->delim[0] = 0;
    m->uinfo = malloc(max * sizeof *m->uinfo);
    m->keys = malloc((size_t)max * (OL_S3_KEY_MAX + 1));
    if (!m->uinfo || !m->keys) {
        mpu_free(q);
        ol_s3_error(q, OL_S3_SLOW_DOWN, NULL);
        return;
    }
    bool have_id = il == 32 && unhex16(v, 32, m->id) == 0;
    m->luploads = (struct ol_mpu_list_uploads_args){
        .bucket = q->route.bucket, .prefix = m->prefix,
        .key_marker = kl > 0 ? key_marker : NULL,
        .upload_id_marker = kl > 0 && have_id ? m->id : NULL, .max = max, .out = m->uinfo,
        .keys = m->keys, .keys_cap = (size_t)max * (OL_S3_KEY_MAX + 1)};
    int rc = ol_mpu_list_uploads(ol_s3_store(q), &m->luploads, list_uploads_done, q);
    mpu_started(q, rc);
}
