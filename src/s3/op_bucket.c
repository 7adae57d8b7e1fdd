/*
 * op_bucket.c - the bucket operations: ListBuckets (from the listing
 * catalog, with AWS's optional parameters), CreateBucket (its
 * LocationConstraint must be this server's region), DeleteBucket,
 * HeadBucket, GetBucketLocation, and GetBucketVersioning's check that the
 * bucket exists (its document is versioning.c's).
 *
 * Must not: touch a bucket's objects or its versioning state (the engine
 * refuses to delete a bucket that has objects; versioning.c sets the
 * state).
 */
#include "s3/op_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "s3/date.h"
#include "s3/versioning.h"
#include "store/catalog.h"

/* ---- buckets ---------------------------------------------------------------- */


/*
 * ListBuckets, with AWS's optional parameters: max-buckets (1..10000),
 * continuation-token (base64 of the last name of the previous page),
 * prefix, bucket-region (this server's one region: all buckets or none).
 * With any of them, each Bucket carries BucketRegion ("if the request
 * contains at least one valid parameter"), Prefix is echoed when sent, and
 * a truncated page ends with ContinuationToken.
 */
void ol_s3_list_buckets(struct ol_s3_req *q)
{
    char prefix[OL_S3_KEY_MAX + 1], tok[128], region[64], num[16];
    int pl = ol_s3_qparam(q, "prefix", prefix, sizeof prefix);
    int tl = ol_s3_qparam(q, "continuation-token", tok, sizeof tok);
    int rl = ol_s3_qparam(q, "bucket-region", region, sizeof region);
    int ml = ol_s3_qparam(q, "max-buckets", num, sizeof num);
    if (pl < 0 || rl < 0) {
        ol_s3_error(q, OL_S3_INVALID_ARGUMENT, "A ListBuckets parameter is malformed or too "
                    "long.");
        return;
    }
    uint8_t after[64];
    int al = tl > 0 ? ol_s3_token_decode(tok, tl, after, sizeof after - 1) : 0;
    if (tl < 0 || al < 0) {
        ol_s3_error(q, OL_S3_INVALID_ARGUMENT, "The continuation token provided is incorrect");
        return;
    }
    after[al] = 0;
    unsigned max = OL_CATALOG_MAX_BUCKETS;
    if (ml != 0) {
        char *end;
        long v = ml > 0 ? strtol(num, &end, 10) : 0;
        if (ml < 0 || *end || num[0] < '0' || num[0] > '9' || v < 1 || v > 10000) {
            ol_s3_error(q, OL_S3_INVALID_ARGUMENT, "max-buckets must be an integer from 1 "
                        "to 10000.");
            return;
        }
        max = (unsigned)v;
    }
    const char *qs = q->query;
    size_t ql = q->query_len;
    bool has_prefix = ol_s3_query_has(qs, ql, "prefix");
    bool params = has_prefix || ol_s3_query_has(qs, ql, "continuation-token") ||
                  ol_s3_query_has(qs, ql, "bucket-region") ||
                  ol_s3_query_has(qs, ql, "max-buckets");
    bool other_region = ol_s3_query_has(qs, ql, "bucket-region") &&
                        strcmp(region, q->srv->p.region) != 0;
    struct ol_catalog_bucket *v = malloc(OL_CATALOG_MAX_BUCKETS * sizeof *v);
    size_t cap = 8192 + 6 * (size_t)pl + (size_t)OL_CATALOG_MAX_BUCKETS * 256;
    char *out = malloc(cap);
    if (!v || !out) {
        free(v);
        free(out);
        ol_s3_error(q, OL_S3_SLOW_DOWN, NULL);
        return;
    }
    unsigned n = q->srv->p.catalog && !other_region
                     ? ol_catalog_buckets(q->srv->p.catalog, v, OL_CATALOG_MAX_BUCKETS) : 0;
    struct ol_xml_w w;
    ol_xml_w_init(&w, out, cap);
    ol_xml_decl(&w);
    ol_xml_open(&w, "ListAllMyBucketsResult", OL_S3_NS);
    ol_s3_owner(&w, "Owner");
    ol_xml_open(&w, "Buckets", NULL);
    unsigned listed = 0;
    const char *last = NULL;
    bool truncated = false;
    for (unsigned i = 0; i < n; i++) {
        if (strcmp(v[i].name, (const char *)after) <= 0 ||
            strncmp(v[i].name, prefix, (size_t)pl) != 0)
            continue;
        if (listed == max) {
            truncated = true;
            break;
        }
        char d[40];
        ol_s3_iso_date(v[i].created, d);
        ol_xml_open(&w, "Bucket", NULL);
        ol_xml_elem_s(&w, "Name", v[i].name);
        ol_xml_elem_s(&w, "CreationDate", d);
        if (params)
            ol_xml_elem_s(&w, "BucketRegion", q->srv->p.region);
        ol_xml_close(&w, "Bucket");
        last = v[i].name;
        listed++;
    }
    ol_xml_close(&w, "Buckets");
    if (truncated) {
        char nt[96];
        int tn = EVP_EncodeBlock((unsigned char *)nt, (const unsigned char *)last,
                                 (int)strlen(last));
        ol_xml_elem(&w, "ContinuationToken", nt, (size_t)tn);
    }
    if (has_prefix)
        ol_xml_elem(&w, "Prefix", prefix, (size_t)pl);
    ol_xml_close(&w, "ListAllMyBucketsResult");
    if (w.err)
        ol_s3_error(q, OL_S3_INTERNAL, NULL);
    else
        ol_s3_reply(q, 200, NULL, "application/xml", out, w.n);
    free(v);
    free(out);
}

static void bucket_done(void *ud, const struct ol_store_event *ev)
{
    struct ol_s3_req *q = ud;
    if (!q->r) {   /* the client went away meanwhile */
        ol_s3_req_free(q);
        return;
    }
    enum ol_s3_op op = q->route.op;
    char h[256];
    if (ev->status == -EEXIST && op == OL_OP_CREATE_BUCKET &&
        strcmp(q->srv->p.region, "us-east-1") == 0) {
        /* AWS, "for legacy compatibility": re-creating a bucket you own in
         * us-east-1 is 200 OK (BucketAlreadyOwnedByYou everywhere else) */
        snprintf(h, sizeof h, "Location: /%s\r\n", q->route.bucket);
        ol_s3_reply(q, 200, h, NULL, NULL, 0);
        return;
    }
    if (ev->status < 0) {
        if (op == OL_OP_HEAD_BUCKET) {
            const char *msg;
            enum ol_s3_err e = ol_s3_store_err(ev->status, &msg);
            ol_s3_error(q, e, msg);   /* HEAD: the status alone reaches the client */
            return;
        }
        ol_s3_store_error(q, ev->status);
        return;
    }
    switch (op) {
    case OL_OP_CREATE_BUCKET:
        snprintf(h, sizeof h, "Location: /%s\r\n", q->route.bucket);
        ol_s3_reply(q, 200, h, NULL, NULL, 0);
        break;
    case OL_OP_DELETE_BUCKET:
        ol_s3_reply(q, 204, NULL, NULL, NULL, 0);
        break;
    case OL_OP_HEAD_BUCKET:
        snprintf(h, sizeof h, "x-amz-bucket-region: %s\r\n", q->srv->p.region);
        ol_s3_reply(q, 200, h, NULL, NULL, 0);
        break;
    case OL_OP_GET_BUCKET_LOCATION: {
        char out[512];
        struct ol_xml_w w;
        ol_xml_w_init(&w, out, sizeof out);
        ol_xml_decl(&w);
        ol_xml_open(&w, "LocationConstraint", OL_S3_NS);
        if (strcmp(q->srv->p.region, "us-east-1") != 0)   /* S3 leaves us-east-1 empty */
            ol_xml_text(&w, q->srv->p.region, strlen(q->srv->p.region));
        ol_xml_close(&w, "LocationConstraint");
        ol_s3_reply(q, 200, NULL, "application/xml", out, w.n);
        break;
    }
    case OL_OP_GET_BUCKET_VERSIONING:
        ol_s3_versioning_doc(q);
        break;
    default:
        ol_s3_error(q, OL_S3_INTERNAL, NULL);
    }
}

/* After an engine call on the bucket: its error answered, or the request
 * waits for bucket_done. */
static void bucket_started(struct ol_s3_req *q, int rc)
{
    if (rc < 0)
        ol_s3_store_error(q, rc);
    else
        q->abort_handler = ol_s3_client_gone_wait;
}

struct create_cfg {
    char location[64];
    bool bad;
};

static int create_cfg_cb(void *ctx, const char *path, size_t depth, const char *text,
                         size_t len, bool end)
{
    struct create_cfg *c = ctx;
    if (!end)
        return 0;
    if (strcmp(path, "CreateBucketConfiguration/LocationConstraint") == 0) {
        if (len >= sizeof c->location)
            c->bad = true;
        else
            memcpy(c->location, text, len), c->location[len] = 0;
    }
    return 0;
}

static void create_bucket_body(struct ol_s3_req *q)
{
    if (q->xml_len) {
        struct create_cfg c = {{0}, false};
        if (ol_xml_parse(q->xml, q->xml_len, create_cfg_cb, &c) < 0 || c.bad) {
            ol_s3_error(q, OL_S3_MALFORMED_XML, NULL);
            return;
        }
        if (c.location[0] && strcmp(c.location, q->srv->p.region) != 0) {
            char msg[200];
            snprintf(msg, sizeof msg, "The LocationConstraint '%s' is not this server's region "
                     "'%s'.", c.location, q->srv->p.region);
            ol_s3_error(q, OL_S3_INVALID_ARGUMENT, msg);
            return;
        }
    }
    bucket_started(q, ol_store_bucket_create(ol_s3_store(q), q->route.bucket, bucket_done, q));
}

void ol_s3_create_bucket(struct ol_s3_req *q)
{
    enum ol_s3_err e = ol_s3_read_xml(q, create_bucket_body);
    if (e)
        ol_s3_error(q, e, NULL);
}

void ol_s3_delete_bucket(struct ol_s3_req *q)
{
    bucket_started(q, ol_store_bucket_delete(ol_s3_store(q), q->route.bucket, bucket_done, q));
}

/* HeadBucket, GetBucketLocation, GetBucketVersioning: the bucket must
 * exist; bucket_done answers each. */
void ol_s3_bucket_exists(struct ol_s3_req *q)
{
    bucket_started(q, ol_store_bucket_exists(ol_s3_store(q), q->route.bucket, bucket_done, q));
}
