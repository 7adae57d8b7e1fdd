/*
 * errors.h - the S3 errors OpenLake answers with: code, HTTP status and the
 * message AWS uses (or one as plain), in one table.
 *
 * Owns: the table. Handlers name an error by its enum and may give a more
 * specific message; the response writer turns it into the error document
 * (xml.h) with the request's Resource and RequestId.
 */
#ifndef OL_S3_ERRORS_H
#define OL_S3_ERRORS_H

enum ol_s3_err {
    OL_S3_OK = 0,
    OL_S3_ACCESS_DENIED,
    OL_S3_AUTH_HEADER_MALFORMED,
    OL_S3_AUTH_QUERY_ERROR,
    OL_S3_BAD_DIGEST,
    OL_S3_BUCKET_ALREADY_OWNED,
    OL_S3_BUCKET_NOT_EMPTY,
    OL_S3_CONDITIONAL_CONFLICT,
    OL_S3_ENTITY_TOO_LARGE,
    OL_S3_ENTITY_TOO_SMALL,
    OL_S3_INCOMPLETE_BODY,
    OL_S3_INTERNAL,
    OL_S3_INVALID_ACCESS_KEY,
    OL_S3_INVALID_ARGUMENT,
    OL_S3_INVALID_BUCKET_NAME,
    OL_S3_INVALID_DIGEST,
    OL_S3_INVALID_PART,
    OL_S3_INVALID_PART_ORDER,
    OL_S3_INVALID_PART_NUMBER,
    OL_S3_INVALID_RANGE,
    OL_S3_INVALID_REQUEST,
    OL_S3_INVALID_STORAGE_CLASS,
    OL_S3_INVALID_TAG,
    OL_S3_KEY_TOO_LONG,
    OL_S3_MALFORMED_XML,
    OL_S3_METADATA_TOO_LARGE,
    OL_S3_METHOD_NOT_ALLOWED,
    OL_S3_MISSING_CONTENT_LENGTH,
    OL_S3_NO_SUCH_BUCKET,
    OL_S3_NO_SUCH_KEY,
    OL_S3_NO_SUCH_UPLOAD,
    OL_S3_NO_SUCH_VERSION,
    OL_S3_NOT_IMPLEMENTED,
    OL_S3_NOT_MODIFIED,
    OL_S3_PRECONDITION_FAILED,
    OL_S3_REQUEST_TIMEOUT,       /* 400, as AWS (the HTTP layer's own answer is 408) */
    OL_S3_REQUEST_TIME_TOO_SKEWED,
    OL_S3_SERVICE_UNAVAILABLE,
    OL_S3_SIGNATURE_DOES_NOT_MATCH,
    OL_S3_SLOW_DOWN,
    OL_S3_STORAGE_FULL,          /* OpenLake's own: S3 has no code for it */
    OL_S3_XAMZ_SHA256_MISMATCH,
    OL_S3_ERR_COUNT
};

struct ol_s3_err_info {
    const char *code;      /* "NoSuchKey" */
    int status;            /* 404 */
    const char *message;   /* the default message */
};

/* The table row of e (OL_S3_INTERNAL's for an unknown value). */
const struct ol_s3_err_info *ol_s3_err_info(enum ol_s3_err e);

#endif
