/*
 * server.c - the S3 request life cycle on one core (see server.h):
 *
 *   on_request  split the target, authenticate, route, start the operation
 *   on_body     verify (body.h) and hand decoded bytes to the operation
 *   on_body_end verdict on the body, then the operation finishes
 *   on_drain    streaming responses refill (GET)
 *   on_abort    the client went away: the operation undoes its work
 *
 * Operations live in op_*.c (and versioning.c), reached through the command
 * table in route.c, and talk to this file through s3_int.h.
 */
#include "s3/s3_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "store/catalog.h"

bool ol_s3_owns(const void *udata)
{
    return udata && ((const struct ol_s3_req *)udata)->magic == OL_S3_REQ_MAGIC;
}

static void md5_on_soon(ol_loop *loop, struct ol_timer *t);
static void md5_on_late(ol_loop *loop, struct ol_timer *t);

int ol_s3_server_create(const struct ol_s3_params *p, struct ol_s3_server **out)
{
    struct ol_s3_server *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->p = *p;
    s->auth = (struct ol_s3_auth_conf){p->creds, p->region, p->domain, p->sigv2};
    s->started = (uint32_t)time(NULL);
    s->md5_soon.fn = md5_on_soon;
    s->md5_late.fn = md5_on_late;
    if (ol_pool_init(&s->states, sizeof(struct ol_s3_req), OL_S3_STATES) < 0)
        goto oom;
    /* the ETags of up to OL_S3_MD5_LANES uploads on this core are hashed
     * side by side */
    if (!(s->md5 = ol_md5_set_new(OL_S3_MD5_LANES)))
        goto oom;
    if (ol_pool_init(&s->stages, OL_AWSC_STAGE, OL_S3_CHUNK_STAGES) < 0)
        goto oom;
    for (unsigned i = 0; i < OL_S3_STATES; i++) {
        struct ol_s3_body_ctx *c = &s->ctx[i];
        if (!(c->cksum = EVP_MD_CTX_new()))
            goto oom;
        s->ctx_free[i] = i;
    }
    s->nctx_free = OL_S3_STATES;
    /* the listings of this core copy their page here (catalog.h) */
    if (p->catalog && ol_catalog_page_create(&s->list_page) < 0)
        goto oom;
    *out = s;
    return 0;
oom:
    ol_s3_server_destroy(s);
    return -ENOMEM;
}

void ol_s3_server_destroy(struct ol_s3_server *s)
{
    if (!s)
        return;
    for (unsigned i = 0; i < OL_S3_STATES; i++) {
        EVP_MD_CTX_free(s->ctx[i].cksum);
    }
    if (s->p.loop) {
        ol_timer_cancel(s->p.loop, &s->md5_soon);
        ol_timer_cancel(s->p.loop, &s->md5_late);
    }
    ol_md5_set_free(s->md5);
    ol_pool_exit(&s->stages);
    ol_pool_exit(&s->states);
    ol_catalog_page_destroy(s->list_page);
    free(s);
}

void ol_s3_server_stats(const struct ol_s3_server *s, struct ol_s3_stats *out)
{
    ol_md5_set_stats(s->md5, &out->etag_blocks_interleaved, &out->etag_blocks_alone);
    out->etag_waits = __atomic_load_n(&s->md5_waits, __ATOMIC_RELAXED);
    out->etag_waits_late = __atomic_load_n(&s->md5_waits_late, __ATOMIC_RELAXED);
    out->chunk_paired_bytes = __atomic_load_n(&s->chunk_paired, __ATOMIC_RELAXED);
    out->chunk_unstaged = __atomic_load_n(&s->chunk_unstaged, __ATOMIC_RELAXED);
    out->one_pass_bytes = __atomic_load_n(&s->one_pass_bytes, __ATOMIC_RELAXED);
    out->one_pass_moved = __atomic_load_n(&s->one_pass_moved, __ATOMIC_RELAXED);
    out->auth_sigv4 = __atomic_load_n(&s->auth_sigv4, __ATOMIC_RELAXED);
    out->auth_sigv2 = __atomic_load_n(&s->auth_sigv2, __ATOMIC_RELAXED);
}

/* ---- responses ------------------------------------------------------------ */

static void md5_unpark(struct ol_s3_req *q);
static void md5_poll(struct ol_s3_server *s, bool company);

/* A one-pass upload's body has ended (or the request went): the next
 * upload may be alone again. */
static void one_pass_end(struct ol_s3_req *q)
{
    if (q->one_pass) {
        q->one_pass = false;
        q->srv->one_pass_live--;
    }
}

void ol_s3_req_free(struct ol_s3_req *q)
{
    struct ol_s3_server *s = q->srv;
    if (q->r)
        ol_http_req_set_udata(q->r, NULL);
    if (q->md5_parked)
        md5_unpark(q);
    one_pass_end(q);
    if (q->md5) {
        ol_md5_put(q->md5);   /* what a body cut short staged goes too */
        if (s->parked)
            md5_poll(s, true); /* one stream fewer to wait for */
    }
    if (q->ctx_slot >= 0)
        s->ctx_free[s->nctx_free++] = (unsigned)q->ctx_slot;
    if (q->stage)
        ol_pool_put(&s->stages, q->stage);
    free(q->xml);
    q->magic = 0;
    ol_pool_put(&s->states, q);
}

void ol_s3_client_gone_wait(struct ol_s3_req *q)
{
    (void)q;   /* the engine's callback comes, finds q->r NULL and frees q */
}

static void req_id(struct ol_s3_server *s, char out[17])
{
    uint64_t id = ((uint64_t)(s->p.core & 0xff) << 56) | ((uint64_t)(s->started & 0xffffff) << 32) |
                  (uint32_t)++s->counter;
    snprintf(out, 17, "%016llX", (unsigned long long)id);
}

/* The request id header (plus extra lines) for a response. */
static void id_headers(const char *id, const char *extra, char *out, size_t cap)
{
    snprintf(out, cap, "x-amz-request-id: %s\r\nx-amz-id-2: %s\r\n%s", id, id, extra ? extra : "");
}

static void send_error_raw(ol_http_req *r, const char *id, enum ol_s3_err e, const char *msg,
                           const char *resource, size_t rlen, const char *extra)
{
    const struct ol_s3_err_info *info = ol_s3_err_info(e);
    char body[4096], hdr[1024];
    int n = ol_xml_error_doc(body, sizeof body, info->code, msg && msg[0] ? msg : info->message,
                             resource, rlen > 1024 ? 1024 : rlen, id);
    if (n < 0)
        n = ol_xml_error_doc(body, sizeof body, info->code, info->message, "", 0, id);
    char ct[600];
    snprintf(ct, sizeof ct, "Content-Type: application/xml\r\n%s", extra ? extra : "");
    id_headers(id, ct, hdr, sizeof hdr);
    if (info->status == 304) {
        ol_http_resp_start(r, 304, hdr, 0);
    } else if (ol_http_resp_start(r, info->status, hdr, n) == 0) {
        ol_http_resp_write(r, body, (size_t)n);
    }
    ol_http_resp_end(r);
}

void ol_s3_error_at(struct ol_s3_req *q, enum ol_s3_err e, const char *msg, const char *extra,
                    const char *where)
{
    ol_http_req *r = q->r;
    char id[17];
    memcpy(id, q->id, sizeof id);
    const char *path = q->path;
    size_t plen = q->path_len;
    if (ol_s3_err_info(e)->status == 500) {
        /* ours, not the client's: the cause to the log, S3's words to the client */
        const struct ol_http_request *h = ol_http_req_head(r);
        ol_error("S3 request %s: 500 InternalError for %.*s %.*s: %s (%s)", id,
                 (int)h->method_len, h->method, (int)(plen > 512 ? 512 : plen), path,
                 msg && msg[0] ? msg : "no cause given", where);
        msg = NULL;
    }
    ol_s3_req_free(q);
    send_error_raw(r, id, e, msg, path, plen, extra);
}

int ol_s3_reply(struct ol_s3_req *q, int status, const char *headers, const char *ctype,
                const void *body, size_t len)
{
    char hdr[8192];
    char extra[7800];
    snprintf(extra, sizeof extra, "%s%s%s%s", ctype ? "Content-Type: " : "", ctype ? ctype : "",
             ctype ? "\r\n" : "", headers ? headers : "");
    id_headers(q->id, extra, hdr, sizeof hdr);
    ol_http_req *r = q->r;
    ol_s3_req_free(q);
    int rc = ol_http_resp_start(r, status, hdr, (int64_t)len);
    if (rc == 0 && len)
        rc = ol_http_resp_write(r, body, len);
    ol_http_resp_end(r);
    return rc;
}

/* ---- request life cycle ---------------------------------------------------- */

void ol_s3_on_request(struct ol_s3_server *s, ol_http_req *r)
{
    const struct ol_http_request *h = ol_http_req_head(r);
    const char *target = h->target;
    const char *qm = memchr(target, '?', h->target_len);
    size_t plen = qm ? (size_t)(qm - target) : h->target_len;
    const char *query = qm ? qm + 1 : target + plen;
    size_t qlen = h->target_len - plen - (qm ? 1 : 0);

    struct ol_s3_req *q = ol_pool_get(&s->states);
    if (!q || s->nctx_free == 0) {
        char id[17];
        req_id(s, id);
        if (q)
            ol_pool_put(&s->states, q);
        send_error_raw(r, id, OL_S3_SLOW_DOWN, NULL, target, plen, NULL);
        return;
    }
    memset(q, 0, offsetof(struct ol_s3_req, op));   /* the rest: by whoever uses it */
    q->magic = OL_S3_REQ_MAGIC;
    q->srv = s;
    q->r = r;
    q->ctx_slot = (int)s->ctx_free[--s->nctx_free];
    q->path = target;
    q->path_len = plen;
    q->query = query;
    q->query_len = qlen;
    q->xml = NULL;
    q->xml_len = 0;
    q->op_state = NULL;
    req_id(s, q->id);
    ol_http_req_set_udata(r, q);

    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    enum ol_s3_err e = ol_s3_authenticate(h->method, h->method_len, target, plen, query, qlen,
                                          h->headers, h->num_headers, &s->auth, now.tv_sec,
                                          &q->auth);
    if (e) {
        char msg[sizeof q->auth.message];
        memcpy(msg, q->auth.message, sizeof msg);
        ol_s3_error(q, e, msg);
        return;
    }
    if (q->auth.sig == OL_S3_SIG_V2 || q->auth.sig == OL_S3_SIG_V2_QUERY)
        s->auth_sigv2++;
    else
        s->auth_sigv4++;
    const struct ol_http_header *host = ol_s3_hdr(q, "host");
    const struct ol_http_header *copy = ol_s3_hdr(q, "x-amz-copy-source");
    e = ol_s3_route(h->method, h->method_len, target, plen, query, qlen,
                    host ? host->value : NULL, host ? host->value_len : 0, s->p.domain,
                    copy != NULL, &q->route);
    if (e) {
        ol_s3_error(q, e, NULL);
        return;
    }
    if (s->p.debug && ol_s3_hdr(q, "x-openlake-debug-internal-error")) {
        ol_s3_error(q, OL_S3_INTERNAL, "asked for by x-openlake-debug-internal-error "
                    "(http.debug_endpoints)");
        return;
    }
    ol_s3_dispatch(q);
}

/* ---- ETags: waiting for company -------------------------------------------
 *
 * Uploads reach a core mostly one after the other, so a body that ends
 * finds no other upload's bytes to hash its last MD5 blocks with (up to a
 * staging buffer, 512 KiB) and OpenSSL would do them alone at half the
 * speed (base/md5.h). While another upload on this core is still
 * receiving, the ended one is parked instead: that upload's next bytes are
 * hashed together with the parked blocks as they arrive. After each body
 * chunk the parked requests are looked at; the ready ones (and those with
 * no company left to wait for) are resumed from a deferred call at the top
 * of the next loop iteration (not inside another request's callback); a
 * timer resumes all of them at the next tick whatever happened (their last
 * blocks then go through OpenSSL). */

static void md5_unpark(struct ol_s3_req *q)
{
    struct ol_s3_req **pp = &q->srv->parked;
    while (*pp != q)
        pp = &(*pp)->md5_next;
    *pp = q->md5_next;
    q->md5_next = NULL;
    q->md5_parked = false;
}

static void body_end_now(struct ol_s3_req *q)
{
    enum ol_s3_err e = ol_s3_body_end(&q->body);
    if (q->body.chunked)
        q->srv->chunk_paired += q->body.awsc.paired;
    q->srv->one_pass_bytes += q->body.one_pass_bytes;
    q->body_end_handler(q, e);
}

/* Whether parked q goes on now; *again: it waits on a completion in sight. */
static bool md5_can_go(struct ol_s3_server *s, struct ol_s3_req *q, bool all, bool *again)
{
    if (all || ol_md5_ready(q->md5))
        return true;
    if (ol_md5_company_coming(q->md5))
        return false;   /* md5_poll looks again after that upload's bytes */
    if (ol_loop_more_pending(s->p.loop)) {
        *again = true;  /* completions are in: maybe an upload's first bytes */
        return false;
    }
    return true;
}

/* Resumes the parked requests that are ready, or have nothing to wait for
 * (no upload receiving, no completion in sight); all of them with `all`.
 * One at a time, the list looked at afresh after each: a resumed request's
 * handler may end others. */
static void md5_resume(struct ol_s3_server *s, bool all)
{
    bool again = false;
    for (;;) {
        struct ol_s3_req *q = s->parked;
        while (q && !md5_can_go(s, q, all, &again))
            q = q->md5_next;
        if (!q)
            break;
        md5_unpark(q);
        s->md5_waits_late += all;
        body_end_now(q);   /* may free q */
    }
    if (again)
        ol_loop_defer(s->p.loop, &s->md5_soon);
    if (!s->parked)
        ol_timer_cancel(s->p.loop, &s->md5_late);
}

static void md5_on_soon(ol_loop *loop, struct ol_timer *t)
{
    (void)loop;
    md5_resume((struct ol_s3_server *)((char *)t - offsetof(struct ol_s3_server, md5_soon)),
               false);
}

static void md5_on_late(ol_loop *loop, struct ol_timer *t)
{
    (void)loop;
    md5_resume((struct ol_s3_server *)((char *)t - offsetof(struct ol_s3_server, md5_late)),
               true);
}

/* After bytes were hashed (or a stream went away, with `company`): defers
 * the resumption when some parked request can go. */
static void md5_poll(struct ol_s3_server *s, bool company)
{
    for (struct ol_s3_req *q = s->parked; q; q = q->md5_next)
        if (ol_md5_ready(q->md5) || (company && !ol_md5_company_coming(q->md5))) {
            ol_loop_defer(s->p.loop, &s->md5_soon);
            return;
        }
}

/* At the end of q's body: parks q when its ETag should wait for company. */
static bool md5_park(struct ol_s3_req *q)
{
    struct ol_s3_server *s = q->srv;
    if (!s->p.loop || !q->md5 || q->body_failed || ol_md5_end(q->md5) ||
        !(ol_md5_company_coming(q->md5) || ol_loop_more_pending(s->p.loop)))
        return false;
    q->md5_parked = true;
    q->md5_next = s->parked;
    s->parked = q;
    s->md5_waits++;
    /* next iteration: still no upload receiving? then it goes alone */
    ol_loop_defer(s->p.loop, &s->md5_soon);
    if (!ol_timer_armed(&s->md5_late))
        ol_timer_arm(s->p.loop, &s->md5_late, 1);
    return true;
}

/* Hashes a body slice. A signed payload hashed in one pass because it was
 * alone (ol_s3_begin_body) moves to a lane of the MD5 set once another
 * upload hashes there: its SHA-256 and MD5 then go two and more streams
 * at a time with the others' (a 64 MiB upload that began alone would
 * otherwise stay on the one-stream pass to its end). */
static void body_hash(struct ol_s3_req *q, const char *d, size_t dl)
{
    struct ol_s3_server *s = q->srv;
    if (q->one_pass && ol_md5_set_busy(s->md5)) {
        struct ol_md5 *lane = ol_md5_get(s->md5);
        if (lane && ol_s3_body_hash_onto(&q->body, lane, d, dl)) {
            q->md5 = lane;
            one_pass_end(q);
            s->one_pass_moved++;
            return;
        }
        if (lane)
            ol_md5_put(lane);
    }
    ol_s3_body_hash(&q->body, d, dl);
}

void ol_s3_on_body(ol_http_req *r, const char *data, size_t len)
{
    struct ol_s3_req *q = ol_http_req_udata(r);
    if (!ol_s3_owns(q) || !q->body_handler)
        return;
    while (len > 0 && !q->body_failed) {
        const char *d;
        size_t dl;
        long used = ol_s3_body_feed(&q->body, data, len, &d, &dl);
        if (used < 0) {
            q->body_failed = true;   /* answered at body end: nothing is committed */
            break;
        }
        if (dl) {
            q->body_handler(q, d, dl);    /* the drives' writes go first, */
            if (q->srv->p.loop)           /* to the kernel, not after this batch */
                ol_loop_submit_now(q->srv->p.loop);
            body_hash(q, d, dl);          /* then the hashes beside them */
        }
        data += used;
        len -= (size_t)used;
    }
    if (q->srv->parked)
        md5_poll(q->srv, false);
}

void ol_s3_on_body_end(ol_http_req *r)
{
    struct ol_s3_req *q = ol_http_req_udata(r);
    if (!ol_s3_owns(q) || !q->body_end_handler)
        return;
    struct ol_s3_server *s = q->srv;
    one_pass_end(q);
    bool parked = md5_park(q);   /* its ol_md5_end may have served the parked */
    if (s->parked)
        md5_poll(s, true);
    if (!parked) {
        if (s->p.loop)   /* the last stripe's writes run beside the last hashing */
            ol_loop_submit_now(s->p.loop);
        body_end_now(q);
    }
}

void ol_s3_on_drain(ol_http_req *r)
{
    struct ol_s3_req *q = ol_http_req_udata(r);
    if (ol_s3_owns(q) && q->drain_handler)
        q->drain_handler(q);
}

void ol_s3_on_abort(ol_http_req *r)
{
    struct ol_s3_req *q = ol_http_req_udata(r);
    if (!ol_s3_owns(q))
        return;
    if (q->md5_parked)
        md5_unpark(q);
    q->r = NULL;   /* the request is gone: nothing may be sent */
    if (q->abort_handler)
        q->abort_handler(q);
    else
        ol_s3_req_free(q);
}

void ol_s3_on_timeout(ol_http_req *r)
{
    struct ol_s3_req *q = ol_http_req_udata(r);
    if (!ol_s3_owns(q))
        return;
    char id[17];
    memcpy(id, q->id, sizeof id);
    const char *path = q->path;   /* in the request head: valid until the response ends */
    size_t plen = q->path_len;
    ol_s3_on_abort(r);            /* as if the client had gone: q may be freed */
    ol_http_req_set_udata(r, NULL);
    send_error_raw(r, id, OL_S3_REQUEST_TIMEOUT, NULL, path, plen, NULL);
}

/* ---- helpers for operations ---------------------------------------------- */

enum ol_s3_err ol_s3_begin_body(struct ol_s3_req *q)
{
    const struct ol_http_request *h = ol_http_req_head(q->r);
    const struct ol_http_head_info *info = ol_http_req_info(q->r);
    /* S3 frames bodies with Content-Length (aws-chunked lives inside it, or
     * inside HTTP chunked framing); no length and no Transfer-Encoding is an
     * empty body. */
    int64_t clen = info->chunked ? -1
                   : info->content_length == OL_HTTP_NO_LENGTH ? 0
                   : (int64_t)info->content_length;
    struct ol_s3_server *s = q->srv;
    struct ol_s3_body_ctx *ctx = &s->ctx[q->ctx_slot];
    bool chunk_signed = q->auth.payload == OL_S3_PAY_STREAM_SIGNED ||
                        q->auth.payload == OL_S3_PAY_STREAM_SIGNED_TRAILER;
    /* A signed upload alone on this core (no MD5 lane lent, no other
     * one-pass upload receiving) has no company to hash its MD5 beside:
     * its MD5 and its chunks' SHA-256s, or its whole body's (a signed
     * payload, the AWS SDKs' default over plain HTTP), go through one pass
     * instead (base/md5sha.h), as its bytes come, nothing staged. */
    ctx->one_pass = (chunk_signed || q->auth.payload == OL_S3_PAY_SHA256) && !q->md5 &&
                    ol_md5sha_fast() &&
                    !ol_md5_set_busy(s->md5) && s->one_pass_live == 0;
    if (ctx->one_pass) {
        q->md5 = &s->md5_lone[q->ctx_slot];
        q->one_pass = true;
        s->one_pass_live++;
    }
    ctx->md5 = ol_s3_md5(q);
    if (!ctx->one_pass && !q->stage && chunk_signed && !(q->stage = ol_pool_get(&s->stages)))
        s->chunk_unstaged++;   /* none left: its chunks one by one */
    ctx->stage = q->stage;
    ctx->object_checksums = q->object_checksums;
    return ol_s3_body_begin(&q->body, &q->auth, h->headers, h->num_headers, clen,
                            ctx);
}

struct ol_md5 *ol_s3_md5(struct ol_s3_req *q)
{
    if (!q->md5 && !(q->md5 = ol_md5_get(q->srv->md5)))
        q->md5 = &q->srv->md5_lone[q->ctx_slot];
    return q->md5;
}

static void xml_body(struct ol_s3_req *q, const char *d, size_t n)
{
    if (q->xml_len + n > OL_S3_MAX_XML_BODY) {
        q->body_failed = true;
        q->xml_too_big = true;
        return;
    }
    if (!q->xml) {
        q->xml = malloc(OL_S3_MAX_XML_BODY);   /* bounded, rare (bucket-level calls) */
        if (!q->xml) {
            q->body_failed = true;
            return;
        }
    }
    memcpy(q->xml + q->xml_len, d, n);
    q->xml_len += n;
}

static void xml_end(struct ol_s3_req *q, enum ol_s3_err e)
{
    if (q->xml_too_big)
        e = OL_S3_ENTITY_TOO_LARGE;
    else if (!e && q->body_failed)
        e = OL_S3_SLOW_DOWN;   /* no memory for the body: retry, as when a pool is empty */
    if (e) {
        ol_s3_error(q, e, NULL);
        return;
    }
    q->xml_done(q);
}

enum ol_s3_err ol_s3_read_xml(struct ol_s3_req *q, void (*done)(struct ol_s3_req *q))
{
    enum ol_s3_err e = ol_s3_begin_body(q);
    if (e)
        return e;
    q->xml_done = done;
    q->body_handler = xml_body;
    q->body_end_handler = xml_end;
    return OL_S3_OK;
}
