/*
 * store_err.c - the store engine's statuses (store/engine.h) as S3 errors:
 * what every operation answers when the engine refuses or fails, and the
 * InternalError's cause for the log when it should not have.
 *
 * Must not: decide an operation's own errors (those stay with the
 * operation), or call the store.
 */
#include "s3/op_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

enum ol_s3_err ol_s3_store_err(int status, const char **msg)
{
    *msg = NULL;
    switch (status) {
    case -ENOENT: return OL_S3_NO_SUCH_KEY;
    case OL_STORE_ENOBUCKET: return OL_S3_NO_SUCH_BUCKET;
    case -EBUSY: return OL_S3_SLOW_DOWN;
    case -ENOTEMPTY: return OL_S3_BUCKET_NOT_EMPTY;
    case -EEXIST: return OL_S3_BUCKET_ALREADY_OWNED;
    case -ERANGE: return OL_S3_INVALID_RANGE;
    case OL_STORE_EPRECOND: return OL_S3_PRECONDITION_FAILED;
    case OL_STORE_ECONFLICT: return OL_S3_CONDITIONAL_CONFLICT;
    case OL_STORE_EDELMARK: return OL_S3_NO_SUCH_KEY;
    case -EFBIG:
        *msg = "The object has too many versions: its metadata file would exceed this "
               "store's limit. Delete old versions first.";
        return OL_S3_INVALID_REQUEST;
    case -EIO:
        *msg = "Not enough drives of the object's erasure set answered correctly.";
        return OL_S3_SERVICE_UNAVAILABLE;
    case OL_STORE_EFULL: return OL_S3_STORAGE_FULL;
    default: return OL_S3_INTERNAL;
    }
}

/* An InternalError's cause for the log (ol_s3_error): what failed and the
 * status it gave. Returns buf. */
const char *ol_s3_cause(char buf[128], const char *what, int status)
{
    snprintf(buf, 128, "%s: %d (%s)", what, status, strerror(status < 0 ? -status : status));
    return buf;
}

void ol_s3_store_error(struct ol_s3_req *q, int status)
{
    const char *msg;
    char c[128];
    enum ol_s3_err e = ol_s3_store_err(status, &msg);
    ol_s3_error(q, e, e == OL_S3_INTERNAL ? ol_s3_cause(c, "the store", status) : msg);
}

static enum ol_s3_err mpu_err(int status, const char **msg)
{
    *msg = NULL;
    switch (status) {
    case OL_STORE_ENOUPLOAD: return OL_S3_NO_SUCH_UPLOAD;
    case OL_STORE_EPARTORDER: return OL_S3_INVALID_PART_ORDER;
    case OL_STORE_EBADPART: return OL_S3_INVALID_PART;
    case OL_STORE_ETOOSMALL: return OL_S3_ENTITY_TOO_SMALL;
    case OL_STORE_EBADDIGEST: return OL_S3_BAD_DIGEST;
    case -ENOSPC:
        *msg = "Too many multipart uploads in progress: complete or abort some.";
        return OL_S3_SLOW_DOWN;
    default: return ol_s3_store_err(status, msg);
    }
}

void ol_s3_mpu_error(struct ol_s3_req *q, int status)
{
    const char *msg;
    char c[128];
    enum ol_s3_err e = mpu_err(status, &msg);
    ol_s3_error(q, e, e == OL_S3_INTERNAL ? ol_s3_cause(c, "the store (multipart)", status) : msg);
}
