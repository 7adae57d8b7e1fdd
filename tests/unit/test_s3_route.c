/*
 * test_s3_route.c - S3 routing: operations by method and sub-resource,
 * path and virtual-host addressing, key decoding and validation,
 * traversal-looking keys kept as names, refused sub-resources.
 */
#include "olt.h"

#include "s3/pct.h"
#include "s3/route.h"

#include <errno.h>

static enum ol_s3_err r(const char *m, const char *target, const char *host, const char *domain,
                        struct ol_s3_route *out)
{
    const char *q = strchr(target, '?');
    size_t pl = q ? (size_t)(q - target) : strlen(target);
    const char *query = q ? q + 1 : "";
    return ol_s3_route(m, strlen(m), target, pl, query, strlen(query), host,
                       host ? strlen(host) : 0, domain, false, out);
}

/* the operation, or minus the error */
static int op(const char *m, const char *target)
{
    struct ol_s3_route o;
    enum ol_s3_err e = r(m, target, "localhost:9000", NULL, &o);
    return e == OL_S3_OK ? (int)o.op : -(int)e;
}

OLT_TEST(s3_route_operations)
{
    OLT_CHECK_EQ(op("GET", "/"), OL_OP_LIST_BUCKETS);
    OLT_CHECK_EQ(op("PUT", "/bkt"), OL_OP_CREATE_BUCKET);
    OLT_CHECK_EQ(op("PUT", "/bkt/"), OL_OP_CREATE_BUCKET);
    OLT_CHECK_EQ(op("HEAD", "/bkt"), OL_OP_HEAD_BUCKET);
    OLT_CHECK_EQ(op("DELETE", "/bkt"), OL_OP_DELETE_BUCKET);
    OLT_CHECK_EQ(op("GET", "/bkt?location"), OL_OP_GET_BUCKET_LOCATION);
    OLT_CHECK_EQ(op("GET", "/bkt?versioning"), OL_OP_GET_BUCKET_VERSIONING);
    OLT_CHECK_EQ(op("PUT", "/bkt?versioning"), OL_OP_PUT_BUCKET_VERSIONING);
    OLT_CHECK_EQ(op("GET", "/bkt?list-type=2&prefix=a"), OL_OP_LIST_OBJECTS_V2);
    OLT_CHECK_EQ(op("GET", "/bkt?prefix=a&delimiter=%2F"), OL_OP_LIST_OBJECTS);
    OLT_CHECK_EQ(op("GET", "/bkt?versions"), OL_OP_LIST_OBJECT_VERSIONS);
    OLT_CHECK_EQ(op("GET", "/bkt?uploads"), OL_OP_LIST_MULTIPART_UPLOADS);
    OLT_CHECK_EQ(op("POST", "/bkt?delete"), OL_OP_DELETE_OBJECTS);
    OLT_CHECK_EQ(op("PUT", "/bkt/k"), OL_OP_PUT_OBJECT);
    OLT_CHECK_EQ(op("GET", "/bkt/k"), OL_OP_GET_OBJECT);
    OLT_CHECK_EQ(op("HEAD", "/bkt/k"), OL_OP_HEAD_OBJECT);
    OLT_CHECK_EQ(op("DELETE", "/bkt/k"), OL_OP_DELETE_OBJECT);
    OLT_CHECK_EQ(op("POST", "/bkt/k?uploads"), OL_OP_CREATE_MULTIPART);
    OLT_CHECK_EQ(op("PUT", "/bkt/k?partNumber=1&uploadId=x"), OL_OP_UPLOAD_PART);
    OLT_CHECK_EQ(op("POST", "/bkt/k?uploadId=x"), OL_OP_COMPLETE_MULTIPART);
    OLT_CHECK_EQ(op("DELETE", "/bkt/k?uploadId=x"), OL_OP_ABORT_MULTIPART);
    OLT_CHECK_EQ(op("GET", "/bkt/k?uploadId=x"), OL_OP_LIST_PARTS);
    OLT_CHECK_EQ(op("GET", "/bkt/k?tagging"), OL_OP_GET_OBJECT_TAGGING);
    OLT_CHECK_EQ(op("PUT", "/bkt/k?tagging"), OL_OP_PUT_OBJECT_TAGGING);
    OLT_CHECK_EQ(op("DELETE", "/bkt/k?tagging"), OL_OP_DELETE_OBJECT_TAGGING);
    struct ol_s3_route o;
    OLT_CHECK_EQ(ol_s3_route("PUT", 3, "/bkt/k", 6, "", 0, NULL, 0, NULL, true, &o), OL_S3_OK);
    OLT_CHECK_EQ(o.op, OL_OP_COPY_OBJECT);
    OLT_CHECK_EQ(ol_s3_route("PUT", 3, "/bkt/k", 6, "partNumber=2&uploadId=u", 23, NULL, 0, NULL,
                             true, &o), OL_S3_OK);
    OLT_CHECK_EQ(o.op, OL_OP_UPLOAD_PART_COPY);
    /* refusals */
    OLT_CHECK_EQ(op("POST", "/bkt/k"), -OL_S3_METHOD_NOT_ALLOWED);
    OLT_CHECK_EQ(op("PATCH", "/bkt"), -OL_S3_METHOD_NOT_ALLOWED);
    OLT_CHECK_EQ(op("PUT", "/"), -OL_S3_METHOD_NOT_ALLOWED);
    OLT_CHECK_EQ(op("GET", "/bkt?acl"), -OL_S3_NOT_IMPLEMENTED);
    OLT_CHECK_EQ(op("PUT", "/bkt/k?acl"), -OL_S3_NOT_IMPLEMENTED);
    OLT_CHECK_EQ(op("PUT", "/bkt?policy"), -OL_S3_NOT_IMPLEMENTED);
    OLT_CHECK_EQ(op("GET", "/bkt?list-type=3"), -OL_S3_INVALID_ARGUMENT);
    OLT_CHECK_EQ(op("PUT", "/bkt/k?partNumber=1"), -OL_S3_INVALID_ARGUMENT);
    OLT_CHECK_EQ(op("GET", "/Bad_Bucket/k"), -OL_S3_INVALID_BUCKET_NAME);
    OLT_CHECK_EQ(op("GET", "/ab/k"), -OL_S3_INVALID_BUCKET_NAME);
    OLT_CHECK_STR(ol_s3_op_name(OL_OP_PUT_OBJECT), "PutObject");
}

/* The command table (route.c) is complete: every operation the router can
 * name has a name and a handler, and says what it needs. */
OLT_TEST(s3_route_command_table)
{
    for (int op = 0; op < OL_OP__COUNT; op++) {
        const struct ol_s3_op_def *d = ol_s3_op_def((enum ol_s3_op)op);
        if (!d->name || !d->name[0])
            olt_fail(__FILE__, __LINE__, "operation %d has no name", op);
        OLT_CHECK_STR(ol_s3_op_name((enum ol_s3_op)op), d->name);
        for (int j = 0; j < op; j++)
            if (strcmp(ol_s3_op_def((enum ol_s3_op)j)->name, d->name) == 0)
                olt_fail(__FILE__, __LINE__, "%s names two operations", d->name);
        if (op == OL_OP_NONE) {
            OLT_CHECK(d->handler == NULL);
            continue;
        }
        if (!d->handler)
            olt_fail(__FILE__, __LINE__, "%s has no handler", d->name);
        /* a store for all but ListBuckets; the catalog for ListObjects */
        OLT_CHECK_EQ(!!(d->needs & OL_S3_NEEDS_STORE), op != OL_OP_LIST_BUCKETS);
        OLT_CHECK_EQ(!!(d->needs & OL_S3_NEEDS_CATALOG),
                     op == OL_OP_LIST_OBJECTS || op == OL_OP_LIST_OBJECTS_V2);
    }
    OLT_CHECK(ol_s3_op_def(OL_OP__COUNT) == ol_s3_op_def(OL_OP_NONE));
    OLT_CHECK_STR(ol_s3_op_name(OL_OP__COUNT), "Unknown");
    OLT_CHECK_STR(ol_s3_op_name(OL_OP_NONE), "None");
}

OLT_TEST(s3_route_keys_and_addressing)
{
    struct ol_s3_route o;
    OLT_CHECK_EQ(r("GET", "/bkt/a%20b+c/%E2%82%AC", NULL, NULL, &o), OL_S3_OK);
    OLT_CHECK_STR(o.bucket, "bkt");
    OLT_CHECK_STR(o.key, "a b+c/\xe2\x82\xac");
    /* traversal-looking keys are names (objects live under hashed dirs) */
    OLT_CHECK_EQ(r("GET", "/bkt/../../etc/passwd", NULL, NULL, &o), OL_S3_OK);
    OLT_CHECK_STR(o.key, "../../etc/passwd");
    OLT_CHECK_EQ(r("GET", "/bkt/%2e%2e/%2e/x", NULL, NULL, &o), OL_S3_OK);
    OLT_CHECK_STR(o.key, ".././x");
    OLT_CHECK_EQ(r("GET", "/bkt/a%00b", NULL, NULL, &o), OL_S3_INVALID_ARGUMENT);
    OLT_CHECK_EQ(r("GET", "/bkt/a%ff", NULL, NULL, &o), OL_S3_INVALID_ARGUMENT);
    OLT_CHECK_EQ(r("GET", "/bkt/a%2", NULL, NULL, &o), OL_S3_INVALID_ARGUMENT);
    static char big[2200];
    strcpy(big, "/bkt/");
    memset(big + 5, 'k', 1024);
    big[5 + 1024] = 0;
    OLT_CHECK_EQ(r("GET", big, NULL, NULL, &o), OL_S3_OK);
    OLT_CHECK_EQ(o.key_len, 1024);
    big[5 + 1024] = 'k';
    big[5 + 1025] = 0;
    OLT_CHECK_EQ(r("GET", big, NULL, NULL, &o), OL_S3_KEY_TOO_LONG);
    /* virtual host */
    OLT_CHECK_EQ(r("GET", "/dir/k.txt", "photos.s3.example.com:9000", "s3.example.com", &o),
                 OL_S3_OK);
    OLT_CHECK(o.virtual_host);
    OLT_CHECK_STR(o.bucket, "photos");
    OLT_CHECK_STR(o.key, "dir/k.txt");
    OLT_CHECK_EQ(r("GET", "/", "photos.s3.example.com", "s3.example.com", &o), OL_S3_OK);
    OLT_CHECK_EQ(o.op, OL_OP_LIST_OBJECTS);
    /* the bare domain, or another host: path style */
    OLT_CHECK_EQ(r("GET", "/photos/k", "s3.example.com", "s3.example.com", &o), OL_S3_OK);
    OLT_CHECK(!o.virtual_host);
    OLT_CHECK_STR(o.bucket, "photos");
    OLT_CHECK_EQ(r("GET", "/photos/k", "127.0.0.1:9000", "s3.example.com", &o), OL_S3_OK);
    OLT_CHECK_STR(o.key, "k");
}

OLT_TEST(s3_route_query_values)
{
    const char *q = "prefix=a%2Fb+c&max-keys=10&fetch-owner&delimiter=%2F&bad=%zz";
    char v[64];
    OLT_CHECK_EQ(ol_s3_query(q, strlen(q), "prefix", v, sizeof v), 5);
    OLT_CHECK_STR(v, "a/b c");
    OLT_CHECK_EQ(ol_s3_query(q, strlen(q), "max-keys", v, sizeof v), 2);
    OLT_CHECK_EQ(ol_s3_query(q, strlen(q), "fetch-owner", v, sizeof v), 0);
    OLT_CHECK_EQ(ol_s3_query(q, strlen(q), "marker", v, sizeof v), -ENOENT);
    OLT_CHECK_EQ(ol_s3_query(q, strlen(q), "bad", v, sizeof v), -EINVAL);
    OLT_CHECK_EQ(ol_s3_query(q, strlen(q), "prefix", v, 4), -E2BIG);
    OLT_CHECK(ol_s3_query_has(q, strlen(q), "delimiter"));
    OLT_CHECK(!ol_s3_query_has(q, strlen(q), "delim"));
}

/* ol_query_next (pct.h): every '&'-separated piece, raw, empty ones too;
 * the value NULL without '=' */
OLT_TEST(s3_route_query_walk)
{
    const char *q = "a=1&&b&=c&d=%41=x&";
    static const struct { const char *name, *value; } want[] = {
        {"a", "1"}, {"", NULL}, {"b", NULL}, {"", "c"}, {"d", "%41=x"}};
    size_t at = 0, k = 0;
    struct ol_qparam p;
    while (ol_query_next(q, strlen(q), &at, &p)) {
        OLT_CHECK(k < sizeof want / sizeof *want);
        OLT_CHECK(p.name_len == strlen(want[k].name) &&
                  memcmp(p.name, want[k].name, p.name_len) == 0);
        if (want[k].value)
            OLT_CHECK(p.value && p.value_len == strlen(want[k].value) &&
                      memcmp(p.value, want[k].value, p.value_len) == 0);
        else
            OLT_CHECK(!p.value && p.value_len == 0);
        k++;
    }
    OLT_CHECK_EQ(k, 5);
    at = 0;
    OLT_CHECK(!ol_query_next("", 0, &at, &p));
}
