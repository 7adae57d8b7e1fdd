/*
 * range.h - the byte ranges of the S3 API: the Range header of GetObject
 * and HeadObject, and UploadPartCopy's x-amz-copy-source-range.
 *
 * Owns: parsing both (and resolving a Range against the object's size).
 * Must not: know requests or the store, answer, or allocate; it reads only
 * the header's bytes (http/parse.h's slices, not NUL-terminated), so it is
 * tested alone.
 */
#ifndef OL_S3_RANGE_H
#define OL_S3_RANGE_H

#include <stdint.h>

#include "http/parse.h"

/*
 * ol_s3_range - the Range header h (NULL: none) against an object of size
 * bytes. Returns 0 for the whole object, 1 for a range (*off, *len set), -1
 * when not satisfiable (416). Syntax S3 does not serve (several ranges,
 * other units, nonsense) is ignored: the whole object, as RFC 9110 allows.
 */
int ol_s3_range(const struct ol_http_header *h, uint64_t size, uint64_t *off, uint64_t *len);

/*
 * ol_s3_copy_range - x-amz-copy-source-range h, "bytes=first-last" (both
 * offsets given, first <= last). Returns 0 with *first and *last set, or
 * -1 when malformed (InvalidArgument); whether it fits the source is the
 * caller's to check.
 */
int ol_s3_copy_range(const struct ol_http_header *h, uint64_t *first, uint64_t *last);

#endif
