/*
 * server.h - the S3 API on one core: the HTTP handler behind every request
 * of the S3 listener that is not an admin route (/_openlake/...).
 *
 * Owns: per-request state (from a per-core pool), request ids
 * (x-amz-request-id on every response), authentication of every request
 * (auth.h), routing (route.h), body verification (body.h), error documents
 * (errors.h, xml.h), and the operation handlers, which call the object
 * store (store/engine.h) on this core.
 *
 * Must not: block, or allocate per request (pools sized at create; when
 * empty the client gets 503 SlowDown).
 */
#ifndef OL_S3_SERVER_H
#define OL_S3_SERVER_H

#include <stdbool.h>

#include "http/server.h"
#include "s3/auth.h"

struct ol_s3_server;
struct ol_store_core;
struct ol_store;
struct ol_catalog;

struct ol_s3_params {
    const struct ol_s3_creds *creds;   /* outlives the server */
    const char *region;                /* "us-east-1" */
    const char *domain;                /* virtual-host style base domain, or "" */
    bool sigv2;                        /* accept Signature Version 2 (s3_sigv2) */
    int core;                          /* core index (request ids) */
    ol_loop *loop;                     /* this core's loop; NULL: no waits (tests) */
    struct ol_store_core *store;       /* this core's object store; NULL: none */
    const struct ol_store *store_all;  /* the store (geometry), or NULL */
    struct ol_catalog *catalog;        /* the buckets and their key indexes (ListBuckets,
                                          ListObjects, ListObjectVersions): read
                                          only here, the store engine keeps them */
    bool debug;                        /* http.debug_endpoints: a signed request with
                                          x-openlake-debug-internal-error is answered
                                          InternalError (its log line: tests) */
};

/* On the loop's thread. Returns 0 or -ENOMEM. */
int ol_s3_server_create(const struct ol_s3_params *p, struct ol_s3_server **out);
void ol_s3_server_destroy(struct ol_s3_server *s);

/* Counters of one core's S3 API (read from any thread: relaxed loads of
 * counters only this core writes). */
struct ol_s3_stats {
    uint64_t etag_blocks_interleaved;  /* MD5 blocks hashed with other uploads' */
    uint64_t etag_blocks_alone;        /* ... and alone (OpenSSL) */
    uint64_t etag_waits;               /* bodies parked to wait for MD5 company */
    uint64_t etag_waits_late;          /* ... that the tick ended (hashed alone) */
    uint64_t chunk_paired_bytes;       /* signed chunks' bytes hashed beside another's */
    uint64_t chunk_unstaged;           /* signed uploads with no staging (one by one) */
    uint64_t one_pass_bytes;           /* signed chunks' or payloads' bytes hashed with the MD5
                                          in one pass */
    uint64_t one_pass_moved;           /* signed payloads moved from it to the MD5 set */
    uint64_t auth_sigv4;               /* requests authenticated with SigV4 (header or query) */
    uint64_t auth_sigv2;               /* ... with SigV2 (header or query) */
};
void ol_s3_server_stats(const struct ol_s3_server *s, struct ol_s3_stats *out);

/* The HTTP handler's callbacks; the daemon's router calls them for every
 * request that is not an admin route (ol_s3_owns says whose udata it is). */
void ol_s3_on_request(struct ol_s3_server *s, ol_http_req *r);
void ol_s3_on_body(ol_http_req *r, const char *data, size_t len);
void ol_s3_on_body_end(ol_http_req *r);
void ol_s3_on_drain(ol_http_req *r);
void ol_s3_on_abort(ol_http_req *r);
/* The body timed out (http on_timeout): the operation undoes its work as
 * on_abort, and the client gets RequestTimeout. Does nothing for a request
 * the S3 layer does not own. */
void ol_s3_on_timeout(ol_http_req *r);
bool ol_s3_owns(const void *udata);

#endif
