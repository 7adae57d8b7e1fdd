/*
 * s3_int.h - what the S3 server (server.c) and its operations (op_*.c)
 * share: the per-request state and the helpers to answer.
 *
 * Owns: struct ol_s3_req and struct ol_s3_server. Not for use outside
 * src/s3.
 */
#ifndef OL_S3_INT_H
#define OL_S3_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/pool.h"
#include "http/server.h"
#include "s3/auth.h"
#include "s3/body.h"
#include "s3/errors.h"
#include "s3/route.h"
#include "s3/server.h"
#include "s3/xml.h"

#define OL_S3_REQ_MAGIC    0x53335251u  /* "S3RQ": udata that belongs to S3 */
#define OL_S3_STATES       256u         /* requests in flight per core */
#define OL_S3_MD5_LANES    32u          /* uploads hashed side by side per core
                                           (OL_MD5_STAGE bytes each) */
#define OL_S3_CHUNK_STAGES 32u          /* signed streaming uploads per core whose
                                           chunks are hashed in pairs
                                           (OL_AWSC_STAGE bytes each; past
                                           that, one by one) */
#define OL_S3_MAX_XML_BODY (2u << 20)   /* request XML bodies (DeleteObjects: 1000 keys) */
#define OL_S3_WRITE_PIECE  (64u << 10) /* response bytes queued per write */
#define OL_S3_NS           "http://s3.amazonaws.com/doc/2006-03-01/"

/* PutObject / UploadPart in flight (op_object.c). */
#define OL_S3_SPILL (64u << 10)
struct ol_put;
struct ol_catalog_page;
struct ol_get;

struct ol_s3_op_put {
    struct ol_put *put;          /* the engine's PUT; NULL once finished/aborted */
    bool waiting_ready;          /* ol_put_write said "full": body paused */
    bool failed;                 /* the engine reported EV_ERROR */
    int fail_status;
    bool finishing;              /* ol_put_finish took it: waiting for EV_DONE */
    bool body_ended;
    bool is_part;                /* UploadPart: no listing entry */
    uint8_t vid[16];             /* the new version's id (versioning.h) */
    enum ol_s3_err verdict;
    size_t spill_len;            /* decoded bytes not yet taken by the engine */
    char spill[OL_S3_SPILL];
};

/* GetObject / HeadObject in flight (op_object.c). */
struct ol_s3_op_get {
    struct ol_get *get;
    bool head, started, done;
    bool tagging;                /* GetObjectTagging: answer the tag set at META */
    uint32_t part;               /* ?partNumber=N, 0 = none */
    bool has_vid;                /* ?versionId= (vid) */
    uint8_t vid[16];
    const uint8_t *pending;      /* the engine's slice being written out */
    size_t pending_len, pending_off;
    bool by_ref;                 /* pending is queued by reference: wait for drain */
};

struct ol_s3_req;
typedef void (*ol_s3_body_fn)(struct ol_s3_req *q, const char *data, size_t len);
typedef void (*ol_s3_end_fn)(struct ol_s3_req *q, enum ol_s3_err body_verdict);
typedef void (*ol_s3_fn)(struct ol_s3_req *q);

struct ol_s3_req {
    uint32_t magic;
    int ctx_slot;                /* index of this request's hash contexts */
    struct ol_md5 *md5;          /* its MD5 stream once asked for (ol_s3_md5) */
    struct ol_s3_req *md5_next;  /* parked: waiting for MD5 company (server.c) */
    bool md5_parked;
    bool one_pass;               /* a lone upload: MD5 and chunk SHA-256s in one pass,
                                    counted in srv->one_pass_live until its body ends */
    uint8_t *stage;              /* aws-chunked staging lent (srv->stages), or NULL */
    struct ol_s3_server *srv;
    ol_http_req *r;              /* NULL once the client went away */
    const char *path, *query;    /* raw request-target parts (valid while r is) */
    size_t path_len, query_len;
    char id[17];                 /* x-amz-request-id */
    bool body_failed, xml_too_big;
    bool object_checksums;       /* body.h ctx.object_checksums (Complete) */
    ol_s3_body_fn body_handler;  /* decoded body bytes */
    ol_s3_end_fn body_end_handler;
    ol_s3_fn drain_handler;      /* streaming response wants more */
    ol_s3_fn abort_handler;      /* client gone: undo, then ol_s3_req_free */
    ol_s3_fn xml_done;           /* ol_s3_read_xml: the whole body is in xml */
    char *xml;
    size_t xml_len;
    void *op_state;              /* the operation's own (e.g. a store handle) */
    struct ol_s3_op_put *put;    /* PutObject: its state (op_object.c) */
    struct ol_s3_op_get *get;    /* GetObject / HeadObject */
    union {
        struct ol_s3_op_put put;
        struct ol_s3_op_get get;
    } op;
    /* zeroed by the operations that need them */
    struct ol_s3_route route;
    struct ol_s3_auth auth;
    struct ol_s3_body body;
};

struct ol_s3_server {
    struct ol_s3_params p;
    struct ol_s3_auth_conf auth;  /* from p: what requests are checked against */
    uint32_t started;            /* seconds, for request ids */
    uint32_t counter;
    struct ol_pool states;
    struct ol_s3_body_ctx ctx[OL_S3_STATES];
    struct ol_md5_set *md5;      /* MD5 lanes lent to uploads (base/md5.h) */
    struct ol_md5 md5_lone[OL_S3_STATES];   /* slot i's stream when none is free */
    struct ol_pool stages;       /* aws-chunked staging (awschunked.h) */
    unsigned ctx_free[OL_S3_STATES];
    unsigned nctx_free;
    /* bodies that ended with MD5 blocks left, waiting for company (server.c) */
    struct ol_s3_req *parked;
    struct ol_timer md5_soon;    /* deferred: resume the ready ones */
    struct ol_timer md5_late;    /* a tick: resume them all */
    uint64_t md5_waits, md5_waits_late;
    uint64_t chunk_paired;       /* signed chunk bytes hashed in pairs */
    uint64_t chunk_unstaged;     /* signed uploads that found no staging */
    unsigned one_pass_live;      /* one-pass uploads still receiving */
    uint64_t one_pass_bytes;     /* their bytes hashed in one pass */
    uint64_t one_pass_moved;     /* signed payloads moved from it to the MD5 set */
    struct ol_catalog_page *list_page; /* a listing's page, copied out of the
                                          catalog (NULL without a catalog) */
    uint64_t auth_sigv4, auth_sigv2;   /* requests authenticated, by signature version */
};

/* Starts the operation of a routed, authenticated request: its handler in
 * the command table (route.c), or 501 NotImplemented naming what is
 * missing (no object store; no listing catalog for ListObjects). */
void ol_s3_dispatch(struct ol_s3_req *q);

/*
 * Answers with the error document and frees q. msg NULL: the default.
 * InternalError (500) is a bug or a failure of this server, never the
 * client's: its msg is the cause, written to the log at error level with
 * the request id, method, path and the caller's file:line (where), and the
 * client gets S3's message. Every S3 error document goes out here.
 */
void ol_s3_error_at(struct ol_s3_req *q, enum ol_s3_err e, const char *msg, const char *extra,
                    const char *where);
#define OL_S3_STR_(x) #x
#define OL_S3_STR(x) OL_S3_STR_(x)
#define OL_S3_HERE __FILE__ ":" OL_S3_STR(__LINE__)
#define ol_s3_error(q, e, msg) ol_s3_error_at((q), (e), (msg), NULL, OL_S3_HERE)
/* The same, with extra header lines (each "\r\n"-terminated). */
#define ol_s3_error_h(q, e, msg, extra) ol_s3_error_at((q), (e), (msg), (extra), OL_S3_HERE)
/* Answers status with extra header lines (each "\r\n"-terminated, may be
 * NULL), a content type (may be NULL) and a complete body; frees q. */
int ol_s3_reply(struct ol_s3_req *q, int status, const char *headers, const char *ctype,
                const void *body, size_t len);
/* Frees q without answering (after the operation answered itself). */
void ol_s3_req_free(struct ol_s3_req *q);
/* The abort_handler of a request waiting for one engine call whose
 * callback frees q once it finds q->r NULL: nothing to undo now. */
void ol_s3_client_gone_wait(struct ol_s3_req *q);

/* The request's header `name` (lower case), or NULL; q->r must be set. */
static inline const struct ol_http_header *ol_s3_hdr(struct ol_s3_req *q, const char *name)
{
    return ol_http_req_header(q->r, name);
}

/* Checks the body's headers and makes on_body verify it (body.h). */
enum ol_s3_err ol_s3_begin_body(struct ol_s3_req *q);
/* The request's MD5 stream (an ETag): a lane of the core's set while one is
 * free, else the slot's lone stream; given back when the request ends. */
struct ol_md5 *ol_s3_md5(struct ol_s3_req *q);
/* Collects a small XML body (<= OL_S3_MAX_XML_BODY), verified, then calls done. */
enum ol_s3_err ol_s3_read_xml(struct ol_s3_req *q, void (*done)(struct ol_s3_req *q));

#endif
