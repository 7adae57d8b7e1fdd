/*
 * op_int.h - what the S3 operation files share among themselves and with
 * the command table (route.c): their handlers, and the helpers more than
 * one of them calls. (What they share with the server, the request state
 * and the helpers to answer, is s3_int.h.)
 *
 * Owns: nothing; each helper's home file is named in its section. Not for
 * use outside src/s3. Must not: declare what only its own file calls
 * (that stays static there).
 */
#ifndef OL_S3_OP_INT_H
#define OL_S3_OP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "s3/s3_int.h"
#include "store/engine.h"
#include "store/meta.h"

/* The request's object store (NULL: the daemon has none). */
static inline struct ol_store_core *ol_s3_store(struct ol_s3_req *q)
{
    return q->srv->p.store;
}

/* ---- the operations: the handlers of route.c's command table ----
 *
 * Each starts its operation on a routed, authenticated request whose
 * needs (route.h, OL_S3_NEEDS_*) are met: it answers (and frees q), or
 * leaves the operation in flight with q's handlers set. DeleteObject,
 * PutBucketVersioning and ListObjectVersions are versioning.h's. */

void ol_s3_list_buckets(struct ol_s3_req *q);
void ol_s3_create_bucket(struct ol_s3_req *q);
void ol_s3_delete_bucket(struct ol_s3_req *q);
void ol_s3_bucket_exists(struct ol_s3_req *q);   /* HeadBucket, GetBucketLocation,
                                                    GetBucketVersioning */
void ol_s3_put_object(struct ol_s3_req *q);
void ol_s3_get_object(struct ol_s3_req *q);
void ol_s3_head_object(struct ol_s3_req *q);
void ol_s3_get_object_tagging(struct ol_s3_req *q);
void ol_s3_copy_object(struct ol_s3_req *q);
void ol_s3_create_upload(struct ol_s3_req *q);
void ol_s3_upload_part(struct ol_s3_req *q);
void ol_s3_upload_part_copy(struct ol_s3_req *q);
void ol_s3_complete_upload(struct ol_s3_req *q);
void ol_s3_abort_upload(struct ol_s3_req *q);
void ol_s3_list_parts(struct ol_s3_req *q);
void ol_s3_list_uploads(struct ol_s3_req *q);
void ol_s3_put_object_tagging(struct ol_s3_req *q);
void ol_s3_delete_object_tagging(struct ol_s3_req *q);
void ol_s3_delete_objects(struct ol_s3_req *q);
void ol_s3_list_objects(struct ol_s3_req *q);      /* v1 */
void ol_s3_list_objects_v2(struct ol_s3_req *q);

/* ---- the store's statuses as S3 errors (store_err.c) ---- */

/* The S3 error for a store status (< 0) and, in *msg, its message (NULL:
 * the default). OL_S3_INTERNAL for a status the store should not give. */
enum ol_s3_err ol_s3_store_err(int status, const char **msg);
/* Answers the store status as ol_s3_store_err maps it (an InternalError
 * names the status in the log); frees q. */
void ol_s3_store_error(struct ol_s3_req *q, int status);
/* The same for a multipart call: NoSuchUpload, InvalidPartOrder,
 * InvalidPart, EntityTooSmall, BadDigest, and SlowDown for too many
 * uploads, before the rest of ol_s3_store_err. */
void ol_s3_mpu_error(struct ol_s3_req *q, int status);
/* An InternalError's cause for the log (ol_s3_error): "what: status
 * (strerror)" in buf. Returns buf. */
const char *ol_s3_cause(char buf[128], const char *what, int status);

/* ---- ETags and conditional requests (cond.c) ---- */

/* The quoted ETag of a version: "hex" or "hex-N", NUL-terminated. */
void ol_s3_etag_quoted(const struct ol_meta_version *v, char out[OL_META_ETAG_STRLEN + 2]);
/* A read's If-Match, If-None-Match, If-Modified-Since, If-Unmodified-Since
 * against version v (etag: its ol_s3_etag_quoted): 0 go on, else the
 * status to answer, 304 or 412. */
int ol_s3_get_cond(struct ol_s3_req *q, const struct ol_meta_version *v, const char *etag);
/* The x-amz-copy-source-if-* headers against the copy's source v: 0, or
 * 412 (PreconditionFailed). */
int ol_s3_copy_cond(struct ol_s3_req *q, const struct ol_meta_version *v);
/* If-None-Match / If-Match of a PutObject, CopyObject or
 * CompleteMultipartUpload into *c, for the engine to check at the commit
 * (If-None-Match: * only; an If-Match that is no ETag this store makes
 * matches nothing). false: the request was answered (501 for what S3
 * does not serve either: both headers, another If-None-Match). */
bool ol_s3_write_cond(struct ol_s3_req *q, struct ol_store_cond *c);

/* ---- listings: parameters and the pieces of their documents (op_list.c) ---- */

/* Query parameter `name` of q, decoded, into buf[cap]: its length, 0 when
 * absent (buf ""), -1 when present but malformed or longer than cap - 1. */
int ol_s3_qparam(struct ol_s3_req *q, const char *name, char *buf, size_t cap);
/* A continuation token (base64 of the name to resume after) decoded into
 * out: its length, or -1 when it is not base64 of at most max bytes (out
 * needs room for the decoded block: max + 2 bytes). */
int ol_s3_token_decode(const char *tok, int tl, uint8_t *out, size_t max);
/* s[0..n) as XML text, percent-encoded first when url (S3's
 * encoding-type=url: every byte but unreserved ones and '/'); encoded, it
 * must fit 3 * OL_S3_KEY_MAX bytes (a key, prefix or marker), else
 * w->err is set. */
void ol_s3_url_text(struct ol_xml_w *w, const char *s, size_t n, bool url);
/* <tag>ol_s3_url_text</tag> */
void ol_s3_url_elem(struct ol_xml_w *w, const char *tag, const char *s, size_t n, bool url);
/* A kept storage class's name (OL_META_SC_*) as <StorageClass> writes it. */
const char *ol_s3_storage_class_name(unsigned sc);
/* <Owner> / <Initiator> (tag): every object belongs to the one account. */
void ol_s3_owner(struct ol_xml_w *w, const char *tag);

/* ---- tags (op_tagging.c) ---- */

/* The Tagging document (GetObjectTagging) of version v's tag set into w. */
void ol_s3_tagging_doc(struct ol_xml_w *w, const struct ol_meta_version *v);

/* One tag set in x-amz-tagging form (k=v&k2=v2, URL-encoded, s[0..n)):
 * calls fn (may be NULL) per decoded pair. Returns the tag count, or -1
 * when S3 would refuse it (more than 10 tags, an empty key or the same key
 * twice, a key over 128 or a value over 256 characters, a key layout.h
 * refuses, an aws: key, bad percent-encoding). */
int ol_s3_tags_each(const char *s, size_t n,
                    void (*fn)(void *, const char *, size_t, const char *, size_t), void *arg);

/* ---- what a new object takes from the request (PutObject, CopyObject's
 * REPLACE, CreateMultipartUpload): op_object.c ---- */

/* Lower-cased x-amz-meta-* names and their values, sorted, within S3's 2 KiB. */
struct ol_s3_user_meta {
    struct ol_meta_kv kv[64];
    char names[2048];
    unsigned n;
};
/* Fills um from q's headers (um's names point into um, its values into
 * the request). OL_S3_OK, MetadataTooLarge, or InvalidArgument (a name
 * twice). */
enum ol_s3_err ol_s3_user_meta(struct ol_s3_req *q, struct ol_s3_user_meta *um);
/* The parity for x-amz-storage-class into *parity (-1: the store's
 * default). false when the class is not one S3 knows: InvalidStorageClass
 * answered. */
bool ol_s3_parity(struct ol_s3_req *q, int *parity);
/* The storage class a new object keeps (OL_META_SC_*) from
 * x-amz-storage-class, once ol_s3_parity accepted it. */
uint8_t ol_s3_storage_class(struct ol_s3_req *q);
/* The checks of a new object's metadata before its body: its user
 * metadata into um (ol_s3_user_meta) and its x-amz-tagging (within
 * meta.h's limit and ol_s3_tags_each's rules). false after answering
 * (MetadataTooLarge, InvalidArgument, InvalidTag). */
bool ol_s3_new_object_check(struct ol_s3_req *q, struct ol_s3_user_meta *um);
/* What a new object keeps of the request, into v: the user metadata um,
 * Content-Type, Content-Encoding (its list without aws-chunked elements,
 * the framing, written into ce), Content-Disposition, Content-Language,
 * Cache-Control, Expires, x-amz-tagging and the storage class. v points
 * into the request, um and ce; a header longer than OL_META_MAX_HEADER is
 * the caller's to refuse. */
void ol_s3_new_object_fields(struct ol_s3_req *q, struct ol_meta_version *v,
                             const struct ol_s3_user_meta *um, char ce[OL_META_MAX_HEADER]);

/* ---- a body streamed into the engine (PutObject, UploadPart): q->op.put, op_object.c ---- */

void ol_s3_put_body(struct ol_s3_req *q, const char *d, size_t n);       /* body_handler */
void ol_s3_put_body_end(struct ol_s3_req *q, enum ol_s3_err verdict);   /* body_end_handler */
void ol_s3_put_client_gone(struct ol_s3_req *q);                        /* abort_handler */
void ol_s3_put_event(void *ud, const struct ol_store_event *ev);        /* the engine's */
/* Aborts the engine's PUT and answers e (msg: ol_s3_error's). */
void ol_s3_put_fail(struct ol_s3_req *q, enum ol_s3_err e, const char *msg);

/* ---- multipart parameters (op_mpu.c) ---- */

/* The ?partNumber of q, 1..10000; 0 after answering InvalidArgument. */
long ol_s3_part_number(struct ol_s3_req *q);
/* The part an UploadPart or UploadPartCopy writes: ?uploadId into id,
 * ?partNumber into *pn; false after answering (NoSuchUpload, or
 * ol_s3_part_number's InvalidArgument). */
bool ol_s3_part_target(struct ol_s3_req *q, uint8_t id[16], long *pn);

#endif
