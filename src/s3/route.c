/*
 * route.c - S3 request routing and the command table (see route.h).
 */
#include "s3/route.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "s3/op_int.h"
#include "s3/pct.h"
#include "s3/versioning.h"
#include "store/layout.h"

/* ---- the command table: what runs each operation, and what it needs ---- */

#define S OL_S3_NEEDS_STORE
#define C OL_S3_NEEDS_CATALOG
static const struct ol_s3_op_def ops[OL_OP__COUNT] = {
    [OL_OP_NONE] = {"None", NULL, 0},
    [OL_OP_LIST_BUCKETS] = {"ListBuckets", ol_s3_list_buckets, 0},
    [OL_OP_CREATE_BUCKET] = {"CreateBucket", ol_s3_create_bucket, S},
    [OL_OP_DELETE_BUCKET] = {"DeleteBucket", ol_s3_delete_bucket, S},
    [OL_OP_HEAD_BUCKET] = {"HeadBucket", ol_s3_bucket_exists, S},
    [OL_OP_GET_BUCKET_LOCATION] = {"GetBucketLocation", ol_s3_bucket_exists, S},
    [OL_OP_GET_BUCKET_VERSIONING] = {"GetBucketVersioning", ol_s3_bucket_exists, S},
    [OL_OP_PUT_BUCKET_VERSIONING] = {"PutBucketVersioning", ol_s3_put_bucket_versioning, S},
    [OL_OP_LIST_OBJECTS] = {"ListObjects", ol_s3_list_objects, S | C},
    [OL_OP_LIST_OBJECTS_V2] = {"ListObjectsV2", ol_s3_list_objects_v2, S | C},
    [OL_OP_LIST_OBJECT_VERSIONS] = {"ListObjectVersions", ol_s3_list_object_versions, S},
    [OL_OP_LIST_MULTIPART_UPLOADS] = {"ListMultipartUploads", ol_s3_list_uploads, S},
    [OL_OP_DELETE_OBJECTS] = {"DeleteObjects", ol_s3_delete_objects, S},
    [OL_OP_PUT_OBJECT] = {"PutObject", ol_s3_put_object, S},
    [OL_OP_COPY_OBJECT] = {"CopyObject", ol_s3_copy_object, S},
    [OL_OP_GET_OBJECT] = {"GetObject", ol_s3_get_object, S},
    [OL_OP_HEAD_OBJECT] = {"HeadObject", ol_s3_head_object, S},
    [OL_OP_DELETE_OBJECT] = {"DeleteObject", ol_s3_delete_object, S},
    [OL_OP_CREATE_MULTIPART] = {"CreateMultipartUpload", ol_s3_create_upload, S},
    [OL_OP_UPLOAD_PART] = {"UploadPart", ol_s3_upload_part, S},
    [OL_OP_UPLOAD_PART_COPY] = {"UploadPartCopy", ol_s3_upload_part_copy, S},
    [OL_OP_COMPLETE_MULTIPART] = {"CompleteMultipartUpload", ol_s3_complete_upload, S},
    [OL_OP_ABORT_MULTIPART] = {"AbortMultipartUpload", ol_s3_abort_upload, S},
    [OL_OP_LIST_PARTS] = {"ListParts", ol_s3_list_parts, S},
    [OL_OP_GET_OBJECT_TAGGING] = {"GetObjectTagging", ol_s3_get_object_tagging, S},
    [OL_OP_PUT_OBJECT_TAGGING] = {"PutObjectTagging", ol_s3_put_object_tagging, S},
    [OL_OP_DELETE_OBJECT_TAGGING] = {"DeleteObjectTagging", ol_s3_delete_object_tagging, S},
};
#undef S
#undef C

const struct ol_s3_op_def *ol_s3_op_def(enum ol_s3_op op)
{
    return &ops[op >= 0 && op < OL_OP__COUNT ? op : OL_OP_NONE];
}

const char *ol_s3_op_name(enum ol_s3_op op)
{
    return op >= 0 && op < OL_OP__COUNT ? ops[op].name : "Unknown";
}

void ol_s3_dispatch(struct ol_s3_req *q)
{
    const struct ol_s3_op_def *d = ol_s3_op_def(q->route.op);
    if ((d->needs & OL_S3_NEEDS_STORE) && !q->srv->p.store) {
        ol_s3_error(q, OL_S3_NOT_IMPLEMENTED, "This server has no object store configured.");
        return;
    }
    if (!d->handler || ((d->needs & OL_S3_NEEDS_CATALOG) && !q->srv->p.catalog)) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s is not implemented by this build of openlaked yet.",
                 d->name);
        ol_s3_error(q, OL_S3_NOT_IMPLEMENTED, msg);
        return;
    }
    d->handler(q);
}

/* Finds parameter `name` (raw names compared decoded-equal for the plain
 * ASCII names S3 uses). Sets *val and *vlen to the raw value. */
static bool find_param(const char *q, size_t n, const char *name, const char **val,
                       size_t *vlen)
{
    size_t nl = strlen(name), at = 0;
    struct ol_qparam p;
    while (ol_query_next(q, n, &at, &p)) {
        if (p.name_len == nl && memcmp(p.name, name, nl) == 0) {
            *val = p.value ? p.value : p.name + nl;
            *vlen = p.value_len;
            return true;
        }
    }
    return false;
}

bool ol_s3_query_has(const char *query, size_t query_len, const char *name)
{
    const char *v;
    size_t vl;
    return find_param(query, query_len, name, &v, &vl);
}

int ol_s3_query(const char *query, size_t query_len, const char *name, char *out, size_t cap)
{
    const char *v;
    size_t vl;
    if (!find_param(query, query_len, name, &v, &vl))
        return -ENOENT;
    if (cap == 0)
        return -E2BIG;
    long n = ol_pct_decode(v, vl, out, cap - 1, true);
    if (n < 0)
        return (int)n;
    out[n] = 0;
    return (int)n;
}

/* Sub-resources S3 has and OpenLake does not serve (yet): NotImplemented. */
static const char *const unsupported[] = {
    "acl", "policy", "policyStatus", "lifecycle", "cors", "website", "logging",
    "notification", "replication", "encryption", "object-lock", "legal-hold", "retention",
    "ownershipControls", "publicAccessBlock", "requestPayment", "accelerate", "analytics",
    "inventory", "metrics", "intelligent-tiering", "restore", "select", "torrent",
    "attributes", "session", "renameObject",
};

static bool has(const char *q, size_t n, const char *name)
{
    return ol_s3_query_has(q, n, name);
}

const char *ol_s3_vhost_bucket(const char *host, size_t host_len, const char *domain,
                               size_t *len)
{
    size_t dl = domain ? strlen(domain) : 0;
    if (!dl || !host)
        return NULL;
    size_t hl = host_len;
    const char *colon = memchr(host, ':', hl);
    if (colon)
        hl = (size_t)(colon - host);
    if (hl > dl + 1 && host[hl - dl - 1] == '.' && strncasecmp(host + hl - dl, domain, dl) == 0) {
        *len = hl - dl - 1;
        return host;
    }
    return NULL;
}

enum ol_s3_err ol_s3_route(const char *method, size_t method_len, const char *path,
                           size_t path_len, const char *query, size_t query_len,
                           const char *host, size_t host_len, const char *domain,
                           bool copy_source, struct ol_s3_route *out)
{
    memset(out, 0, sizeof *out);
    if (path_len == 0 || path[0] != '/')
        return OL_S3_INVALID_REQUEST;
    size_t blen = 0;
    const char *bucket = ol_s3_vhost_bucket(host, host_len, domain, &blen);
    out->virtual_host = bucket != NULL;
    const char *rest = path + 1;
    size_t rest_len = path_len - 1;
    if (!out->virtual_host) {   /* path style: the first segment is the bucket */
        const char *slash = memchr(rest, '/', rest_len);
        blen = slash ? (size_t)(slash - rest) : rest_len;
        bucket = rest;
        rest = slash ? slash + 1 : rest + rest_len;
        rest_len = slash ? path_len - 2 - blen : 0;
    }
    if (blen) {
        long n = ol_pct_decode(bucket, blen, out->bucket, sizeof out->bucket - 1, false);
        if (n < 0 || ol_layout_bucket_ok(out->bucket, (size_t)n) < 0)
            return OL_S3_INVALID_BUCKET_NAME;
        out->bucket_len = (size_t)n;
        out->bucket[n] = 0;
    }
    if (rest_len) {
        long n = ol_pct_decode(rest, rest_len, out->key, sizeof out->key - 1, false);
        if (n == -E2BIG)
            return OL_S3_KEY_TOO_LONG;
        if (n < 0)
            return OL_S3_INVALID_ARGUMENT;
        int rc = ol_layout_key_ok(out->key, (size_t)n);
        if (rc == -ENAMETOOLONG)
            return OL_S3_KEY_TOO_LONG;
        if (rc < 0)
            return OL_S3_INVALID_ARGUMENT;
        out->key_len = (size_t)n;
        out->key[n] = 0;
    }
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++)
        if (has(query, query_len, unsupported[i]))
            return OL_S3_NOT_IMPLEMENTED;

#define M(lit) (method_len == sizeof(lit) - 1 && memcmp(method, lit, method_len) == 0)
    const char *q = query;
    size_t ql = query_len;
    enum ol_s3_op op = OL_OP_NONE;
    if (!out->bucket_len) {
        if (M("GET"))
            op = OL_OP_LIST_BUCKETS;
    } else if (!out->key_len) {
        if (M("GET")) {
            if (has(q, ql, "location")) op = OL_OP_GET_BUCKET_LOCATION;
            else if (has(q, ql, "versioning")) op = OL_OP_GET_BUCKET_VERSIONING;
            else if (has(q, ql, "versions")) op = OL_OP_LIST_OBJECT_VERSIONS;
            else if (has(q, ql, "uploads")) op = OL_OP_LIST_MULTIPART_UPLOADS;
            else if (has(q, ql, "tagging")) return OL_S3_NOT_IMPLEMENTED;
            else {
                char v[8];
                int n = ol_s3_query(q, ql, "list-type", v, sizeof v);
                if (n == 1 && v[0] == '2') op = OL_OP_LIST_OBJECTS_V2;
                else if (n == -ENOENT) op = OL_OP_LIST_OBJECTS;
                else return OL_S3_INVALID_ARGUMENT;
            }
        } else if (M("PUT")) {
            if (has(q, ql, "versioning")) op = OL_OP_PUT_BUCKET_VERSIONING;
            else if (has(q, ql, "tagging")) return OL_S3_NOT_IMPLEMENTED;
            else op = OL_OP_CREATE_BUCKET;
        } else if (M("DELETE")) {
            if (has(q, ql, "tagging")) return OL_S3_NOT_IMPLEMENTED;
            op = OL_OP_DELETE_BUCKET;
        } else if (M("HEAD")) {
            op = OL_OP_HEAD_BUCKET;
        } else if (M("POST")) {
            if (has(q, ql, "delete")) op = OL_OP_DELETE_OBJECTS;
        }
    } else {
        bool upload = has(q, ql, "uploadId");
        if (M("GET")) {
            if (upload) op = OL_OP_LIST_PARTS;
            else if (has(q, ql, "tagging")) op = OL_OP_GET_OBJECT_TAGGING;
            else op = OL_OP_GET_OBJECT;
        } else if (M("HEAD")) {
            op = OL_OP_HEAD_OBJECT;
        } else if (M("PUT")) {
            if (upload || has(q, ql, "partNumber"))
                op = copy_source ? OL_OP_UPLOAD_PART_COPY : OL_OP_UPLOAD_PART;
            else if (has(q, ql, "tagging")) op = OL_OP_PUT_OBJECT_TAGGING;
            else op = copy_source ? OL_OP_COPY_OBJECT : OL_OP_PUT_OBJECT;
            if ((op == OL_OP_UPLOAD_PART || op == OL_OP_UPLOAD_PART_COPY) &&
                !(upload && has(q, ql, "partNumber")))
                return OL_S3_INVALID_ARGUMENT;
        } else if (M("DELETE")) {
            if (upload) op = OL_OP_ABORT_MULTIPART;
            else if (has(q, ql, "tagging")) op = OL_OP_DELETE_OBJECT_TAGGING;
            else op = OL_OP_DELETE_OBJECT;
        } else if (M("POST")) {
            if (has(q, ql, "uploads")) op = OL_OP_CREATE_MULTIPART;
            else if (upload) op = OL_OP_COMPLETE_MULTIPART;
        }
    }
#undef M
    if (op == OL_OP_NONE)
        return OL_S3_METHOD_NOT_ALLOWED;
    out->op = op;
    return OL_S3_OK;
}
