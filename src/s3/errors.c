/*
 * errors.c - the S3 error table (see errors.h). Codes, statuses and
 * messages follow AWS's "Error responses" list for Amazon S3.
 */
#include "s3/errors.h"

static const struct ol_s3_err_info tab[OL_S3_ERR_COUNT] = {
    [OL_S3_OK] = {"OK", 200, ""},
    [OL_S3_ACCESS_DENIED] = {"AccessDenied", 403, "Access Denied."},
    [OL_S3_AUTH_HEADER_MALFORMED] = {"AuthorizationHeaderMalformed", 400,
                                     "The authorization header is malformed."},
    [OL_S3_AUTH_QUERY_ERROR] = {"AuthorizationQueryParametersError", 400,
                                "Error parsing the X-Amz-Credential parameter."},
    [OL_S3_BAD_DIGEST] = {"BadDigest", 400,
                          "The Content-MD5 or checksum you specified did not match what we "
                          "received."},
    [OL_S3_BUCKET_ALREADY_OWNED] = {"BucketAlreadyOwnedByYou", 409,
                                    "Your previous request to create the named bucket "
                                    "succeeded and you already own it."},
    [OL_S3_BUCKET_NOT_EMPTY] = {"BucketNotEmpty", 409,
                                "The bucket you tried to delete is not empty."},
    [OL_S3_CONDITIONAL_CONFLICT] = {"ConditionalRequestConflict", 409,
                                    "A conflicting operation occurred. If using "
                                    "conditional writes, retry the request."},
    [OL_S3_ENTITY_TOO_LARGE] = {"EntityTooLarge", 400,
                                "Your proposed upload exceeds the maximum allowed size."},
    [OL_S3_ENTITY_TOO_SMALL] = {"EntityTooSmall", 400,
                                "Your proposed upload is smaller than the minimum allowed "
                                "object size."},
    [OL_S3_INCOMPLETE_BODY] = {"IncompleteBody", 400,
                               "You did not provide the number of bytes specified by the "
                               "Content-Length HTTP header."},
    [OL_S3_INTERNAL] = {"InternalError", 500,
                        "We encountered an internal error. Please try again."},
    [OL_S3_INVALID_ACCESS_KEY] = {"InvalidAccessKeyId", 403,
                                  "The AWS access key ID you provided does not exist in our "
                                  "records."},
    [OL_S3_INVALID_ARGUMENT] = {"InvalidArgument", 400, "Invalid argument."},
    [OL_S3_INVALID_BUCKET_NAME] = {"InvalidBucketName", 400,
                                   "The specified bucket is not valid."},
    [OL_S3_INVALID_DIGEST] = {"InvalidDigest", 400,
                              "The Content-MD5 you specified is not valid."},
    [OL_S3_INVALID_PART] = {"InvalidPart", 400,
                            "One or more of the specified parts could not be found."},
    [OL_S3_INVALID_PART_ORDER] = {"InvalidPartOrder", 400,
                                  "The list of parts was not in ascending order."},
    [OL_S3_INVALID_PART_NUMBER] = {"InvalidPartNumber", 416,
                                   "The requested partnumber is not satisfiable."},
    [OL_S3_INVALID_RANGE] = {"InvalidRange", 416, "The requested range is not satisfiable."},
    [OL_S3_INVALID_REQUEST] = {"InvalidRequest", 400, "Invalid request."},
    [OL_S3_INVALID_STORAGE_CLASS] = {"InvalidStorageClass", 400,
                                     "The storage class you specified is not valid."},
    [OL_S3_INVALID_TAG] = {"InvalidTag", 400,
                           "The tag set is not valid: at most 10 tags, unique keys of 1 to 128 "
                           "characters, values of up to 256, no aws: prefix."},
    [OL_S3_KEY_TOO_LONG] = {"KeyTooLongError", 400, "Your key is too long."},
    [OL_S3_MALFORMED_XML] = {"MalformedXML", 400,
                             "The XML you provided was not well-formed or did not validate "
                             "against our published schema."},
    [OL_S3_METADATA_TOO_LARGE] = {"MetadataTooLarge", 400,
                                  "Your metadata headers exceed the maximum allowed metadata "
                                  "size."},
    [OL_S3_METHOD_NOT_ALLOWED] = {"MethodNotAllowed", 405,
                                  "The specified method is not allowed against this "
                                  "resource."},
    [OL_S3_MISSING_CONTENT_LENGTH] = {"MissingContentLength", 411,
                                      "You must provide the Content-Length HTTP header."},
    [OL_S3_NO_SUCH_BUCKET] = {"NoSuchBucket", 404, "The specified bucket does not exist."},
    [OL_S3_NO_SUCH_KEY] = {"NoSuchKey", 404, "The specified key does not exist."},
    [OL_S3_NO_SUCH_UPLOAD] = {"NoSuchUpload", 404,
                              "The specified multipart upload does not exist."},
    [OL_S3_NO_SUCH_VERSION] = {"NoSuchVersion", 404,
                               "The specified version does not exist."},
    [OL_S3_NOT_IMPLEMENTED] = {"NotImplemented", 501,
                               "A header or query you provided implies functionality that "
                               "is not implemented."},
    [OL_S3_NOT_MODIFIED] = {"NotModified", 304, "Not Modified."},
    [OL_S3_PRECONDITION_FAILED] = {"PreconditionFailed", 412,
                                   "At least one of the preconditions you specified did not "
                                   "hold."},
    [OL_S3_REQUEST_TIMEOUT] = {"RequestTimeout", 400,
                               "Your socket connection to the server was not read from or "
                               "written to within the timeout period."},
    [OL_S3_REQUEST_TIME_TOO_SKEWED] = {"RequestTimeTooSkewed", 403,
                                       "The difference between the request time and the "
                                       "server's time is too large."},
    [OL_S3_SERVICE_UNAVAILABLE] = {"ServiceUnavailable", 503,
                                   "Please reduce your request rate."},
    [OL_S3_SIGNATURE_DOES_NOT_MATCH] = {"SignatureDoesNotMatch", 403,
                                        "The request signature we calculated does not match "
                                        "the signature you provided. Check your key and "
                                        "signing method."},
    [OL_S3_SLOW_DOWN] = {"SlowDown", 503, "Please reduce your request rate."},
    [OL_S3_STORAGE_FULL] = {"XOpenLakeStorageFull", 507,
                            "The drives of the object's erasure set have no room for it. "
                            "Free space (delete objects, old versions or incomplete uploads) "
                            "or add drives."},
    [OL_S3_XAMZ_SHA256_MISMATCH] = {"XAmzContentSHA256Mismatch", 400,
                                    "The provided 'x-amz-content-sha256' header does not "
                                    "match what was computed."},
};

const struct ol_s3_err_info *ol_s3_err_info(enum ol_s3_err e)
{
    if ((int)e < 0 || e >= OL_S3_ERR_COUNT || !tab[e].code)
        return &tab[OL_S3_INTERNAL];
    return &tab[e];
}
