/*
 * route.h - which S3 operation a request is, on which bucket and key.
 *
 * Owns: path-style (/bucket/key) and virtual-host-style
 * (bucket.<s3_domain>/key) addressing, percent-decoding and validation of
 * the bucket name and key (store/layout.h rules), the sub-resource table
 * (?uploads, ?uploadId, ?partNumber, ?versioning, ?location, ?tagging,
 * ?delete, ?versions, list-type=2, ...) that picks the operation, and
 * reading single query parameters. Sub-resources OpenLake does not serve
 * (?acl, ?policy, ?lifecycle, ...) are NotImplemented, never silently
 * treated as a plain GET or PUT.
 *
 * Also owns the command table, one row per operation: its name, its
 * handler (op_*.c, versioning.c) and what it needs before the handler
 * runs; ol_s3_dispatch (s3_int.h) runs a routed request through it.
 *
 * Must not: authenticate, touch storage, or allocate; operations live in
 * their handlers, never in the table or the dispatch.
 */
#ifndef OL_S3_ROUTE_H
#define OL_S3_ROUTE_H

#include <stdbool.h>
#include <stddef.h>

#include "s3/errors.h"

#define OL_S3_KEY_MAX 1024u

enum ol_s3_op {
    OL_OP_NONE = 0,
    OL_OP_LIST_BUCKETS,
    OL_OP_CREATE_BUCKET,
    OL_OP_DELETE_BUCKET,
    OL_OP_HEAD_BUCKET,
    OL_OP_GET_BUCKET_LOCATION,
    OL_OP_GET_BUCKET_VERSIONING,
    OL_OP_PUT_BUCKET_VERSIONING,
    OL_OP_LIST_OBJECTS,            /* v1 */
    OL_OP_LIST_OBJECTS_V2,
    OL_OP_LIST_OBJECT_VERSIONS,
    OL_OP_LIST_MULTIPART_UPLOADS,
    OL_OP_DELETE_OBJECTS,
    OL_OP_PUT_OBJECT,
    OL_OP_COPY_OBJECT,
    OL_OP_GET_OBJECT,
    OL_OP_HEAD_OBJECT,
    OL_OP_DELETE_OBJECT,
    OL_OP_CREATE_MULTIPART,
    OL_OP_UPLOAD_PART,
    OL_OP_UPLOAD_PART_COPY,
    OL_OP_COMPLETE_MULTIPART,
    OL_OP_ABORT_MULTIPART,
    OL_OP_LIST_PARTS,
    OL_OP_GET_OBJECT_TAGGING,
    OL_OP_PUT_OBJECT_TAGGING,
    OL_OP_DELETE_OBJECT_TAGGING,
    OL_OP__COUNT
};

struct ol_s3_route {
    enum ol_s3_op op;
    char bucket[64];                 /* "" for ListBuckets */
    size_t bucket_len;
    char key[OL_S3_KEY_MAX + 1];     /* decoded, NUL-terminated; "" for bucket ops */
    size_t key_len;
    bool virtual_host;
};

/*
 * ol_s3_route - classify a request. method: the HTTP method; path, query:
 * the raw request-target parts (query without '?'); host: the Host header
 * value (NULL if absent); domain: the configured s3_domain ("" or NULL:
 * path style only); copy_source: whether x-amz-copy-source was sent.
 * Returns OL_S3_OK, or the error to answer: InvalidBucketName, KeyTooLong,
 * InvalidArgument (key not UTF-8, bad percent-encoding), MethodNotAllowed,
 * NotImplemented (a sub-resource OpenLake does not serve).
 */
enum ol_s3_err ol_s3_route(const char *method, size_t method_len, const char *path,
                           size_t path_len, const char *query, size_t query_len,
                           const char *host, size_t host_len, const char *domain,
                           bool copy_source, struct ol_s3_route *out);

/*
 * ol_s3_vhost_bucket - the bucket a virtual-host-style Host names: host is
 * "<bucket>.<domain>[:port]" (domain compared ignoring case). Returns the
 * bucket's first byte inside host with its length in *len, or NULL (no
 * domain configured, no host, or a path-style request).
 */
const char *ol_s3_vhost_bucket(const char *host, size_t host_len, const char *domain,
                               size_t *len);

/* The operation's name as in AWS's API reference ("PutObject"); "None"
 * for OL_OP_NONE, "Unknown" for a value out of range. */
const char *ol_s3_op_name(enum ol_s3_op op);

/* What an operation needs before its handler runs (else 501). */
#define OL_S3_NEEDS_STORE   0x1u   /* an object store (the daemon may have none) */
#define OL_S3_NEEDS_CATALOG 0x2u   /* the listing catalog (ListObjects v1, v2) */

struct ol_s3_req;
/* A row of the command table. */
struct ol_s3_op_def {
    const char *name;                       /* ol_s3_op_name */
    void (*handler)(struct ol_s3_req *q);   /* NULL for OL_OP_NONE only */
    unsigned needs;                         /* OL_S3_NEEDS_* */
};

/* The command table's row of op (OL_OP_NONE's for a value out of range). */
const struct ol_s3_op_def *ol_s3_op_def(enum ol_s3_op op);

/*
 * ol_s3_query - the decoded value of query parameter `name` into out[cap]
 * (NUL-terminated). Returns its length, -ENOENT when absent, -EINVAL for
 * bad percent-encoding, -E2BIG when it does not fit. A parameter without
 * '=' has the empty value.
 */
int ol_s3_query(const char *query, size_t query_len, const char *name, char *out, size_t cap);
bool ol_s3_query_has(const char *query, size_t query_len, const char *name);

#endif
