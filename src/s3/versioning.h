/*
 * versioning.h - S3 versioning on the engine's versions (src/s3 only):
 * version ids on the wire, the bucket's state, the three kinds of
 * DeleteObject, Get/PutBucketVersioning and ListObjectVersions
 * (conditional writes are cond.c's). The operations live in versioning.c;
 * the helpers serve PutObject, GetObject/HeadObject (op_object.c),
 * CopyObject (op_copy.c), CompleteMultipartUpload (op_mpu.c),
 * DeleteObjects (op_delete.c) and object tagging (op_tagging.c).
 *
 * Version ids: 16 bytes in the engine, 32 lowercase hex digits on the wire
 * (URL-safe, never "null"); the all-zero id is written "null". An id is
 * random (ol_store_random_id) for a write in a bucket with versioning
 * Enabled, else null.
 */
#ifndef OL_S3_VERSIONING_H
#define OL_S3_VERSIONING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "s3/s3_int.h"
#include "store/engine.h"

#define OL_S3_VID_LEN 32u   /* characters of a printed id ("null" is 4) */

/* "null" or 32 hex digits, NUL-terminated. */
void ol_s3_vid_format(const uint8_t vid[16], char out[OL_S3_VID_LEN + 1]);
/* The id of s[0..n): 0, or -1 (not "null" nor 32 hex digits, or 32 zeros). */
int ol_s3_vid_parse(const char *s, size_t n, uint8_t vid[16]);
/* The versionId query parameter: 0 absent, 1 parsed into vid, -1 (the
 * request was answered: 400 InvalidArgument). */
int ol_s3_vid_query(struct ol_s3_req *q, uint8_t vid[16]);
/* The id of a new version of q's bucket (random when Enabled, else null). */
void ol_s3_vid_new(struct ol_s3_req *q, uint8_t vid[16]);
/* "x-amz-version-id: <id>\r\n" into h[cap] when the bucket has a
 * versioning state or vid is not null (S3 sends none for a bucket never
 * versioned); bytes written. */
size_t ol_s3_vid_header(struct ol_s3_req *q, const uint8_t vid[16], char *h, size_t cap);

/*
 * One S3 delete of a key: with a version id, that version goes; without,
 * in a bucket never versioned the object goes, else a delete marker is
 * written (a random id when Enabled, the null one replacing the null
 * version when Suspended). The engine keeps the listing index (engine.h,
 * ol_store_set_catalog). done(q, x, status) runs once (q->r may be NULL:
 * the client left).
 */
struct ol_s3_vdel;
typedef void (*ol_s3_vdel_fn)(struct ol_s3_req *q, struct ol_s3_vdel *x, int status);
struct ol_s3_vdel {
    const char *key;          /* NUL-terminated, validated; in q's bucket */
    size_t klen;
    bool has_vid;
    uint8_t vid[16];
    ol_s3_vdel_fn done;
    /* OUT at done(0) */
    bool marker;              /* a delete marker was made, or the version removed was one */
    bool show_vid;            /* out_vid is to be sent */
    uint8_t out_vid[16];      /* the marker's id, or the version removed */
    /* private */
    struct ol_s3_req *q;
    struct ol_put *put;
    struct ol_delete_args da;
};
/* 0 (done follows), or -errno from the engine (done does not run). */
int ol_s3_vdel_start(struct ol_s3_req *q, struct ol_s3_vdel *x);

/* GetObject / HeadObject ended before any byte (EV_DONE status < 0):
 * answers; a delete marker is 404 NoSuchKey (the latest) or 405
 * MethodNotAllowed (asked for by versionId), with x-amz-delete-marker and
 * the marker's x-amz-version-id; an absent versionId is 404 NoSuchVersion. */
void ol_s3_get_failed(struct ol_s3_req *q, const struct ol_store_event *ev);

/* The operations. */
void ol_s3_delete_object(struct ol_s3_req *q);
void ol_s3_put_bucket_versioning(struct ol_s3_req *q);
void ol_s3_versioning_doc(struct ol_s3_req *q);   /* GetBucketVersioning, bucket known */
void ol_s3_list_object_versions(struct ol_s3_req *q);

#endif
