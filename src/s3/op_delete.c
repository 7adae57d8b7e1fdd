/*
 * op_delete.c - DeleteObjects: up to 1000 keys (and versions) from one
 * XML body, deleted one after the other through versioning.h's
 * ol_s3_vdel (the same three kinds of delete as DeleteObject), answered
 * with one DeleteResult; a key's failure is that key's <Error>, never the
 * request's (but for a bucket that does not exist).
 *
 * Must not: run the deletes side by side (a batch would drain the core's
 * request pool), or decide what a delete does (versioning.c does).
 */
#include "s3/op_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "s3/versioning.h"
#include "store/layout.h"

/* ---- DeleteObjects ------------------------------------------------------------ */

#define OL_S3_MAX_DELETE 1000u

struct del_item {
    char key[OL_S3_KEY_MAX + 1];
    uint16_t klen;
    bool has_version, bad_key, bad_version;
    uint8_t vid[16];
    enum ol_s3_err err;       /* per key; OL_S3_OK when deleted */
    int status;
    bool marker, show_vid;    /* the answer (versioning.h, ol_s3_vdel) */
    uint8_t out_vid[16];
};

struct del_state {
    struct del_item *items;
    unsigned n, next;
    bool quiet, bad, in_object;
    struct ol_s3_vdel x;      /* the delete in flight */
};

static int del_xml_cb(void *ctx, const char *path, size_t depth, const char *text, size_t len,
                      bool end)
{
    struct del_state *d = ctx;
    if (depth == 1 && strcmp(path, "Delete") != 0)
        return -EINVAL;
    if (!end) {
        if (strcmp(path, "Delete/Object") == 0) {
            if (d->n == OL_S3_MAX_DELETE)
                return -E2BIG;
            memset(&d->items[d->n], 0, sizeof d->items[0]);
            d->in_object = true;
        }
        return 0;
    }
    if (strcmp(path, "Delete/Quiet") == 0) {
        d->quiet = len == 4 && memcmp(text, "true", 4) == 0;
    } else if (strcmp(path, "Delete/Object/Key") == 0 && d->in_object) {
        struct del_item *it = &d->items[d->n];
        if (len > OL_S3_KEY_MAX || ol_layout_key_ok(text, len) < 0) {
            it->bad_key = true;
            len = len > OL_S3_KEY_MAX ? OL_S3_KEY_MAX : len;
        }
        memcpy(it->key, text, len);
        it->key[len] = 0;
        it->klen = (uint16_t)len;
    } else if (strcmp(path, "Delete/Object/VersionId") == 0 && d->in_object) {
        struct del_item *it = &d->items[d->n];
        it->has_version = true;
        it->bad_version = ol_s3_vid_parse(text, len, it->vid) < 0;
    } else if (strcmp(path, "Delete/Object") == 0) {
        if (d->items[d->n].klen == 0 && !d->items[d->n].bad_key)
            return -EINVAL;   /* an Object without a Key */
        d->n++;
        d->in_object = false;
    }
    return 0;
}

static void del_reply(struct ol_s3_req *q)
{
    struct del_state *d = q->op_state;
    size_t cap = 4096 + (size_t)d->n * (OL_S3_KEY_MAX * 6 + 256);
    char *out = malloc(cap);
    if (!out) {
        free(d->items);
        free(d);
        q->op_state = NULL;
        ol_s3_error(q, OL_S3_SLOW_DOWN, NULL);
        return;
    }
    struct ol_xml_w w;
    ol_xml_w_init(&w, out, cap);
    ol_xml_decl(&w);
    ol_xml_open(&w, "DeleteResult", OL_S3_NS);
    for (unsigned i = 0; i < d->n; i++) {
        struct del_item *it = &d->items[i];
        if (it->err == OL_S3_OK) {
            if (d->quiet)
                continue;
            char id[OL_S3_VID_LEN + 1];
            ol_s3_vid_format(it->out_vid, id);
            ol_xml_open(&w, "Deleted", NULL);
            ol_xml_elem(&w, "Key", it->key, it->klen);
            if (it->has_version)
                ol_xml_elem_s(&w, "VersionId", id);
            if (it->marker) {
                ol_xml_elem_s(&w, "DeleteMarker", "true");
                ol_xml_elem_s(&w, "DeleteMarkerVersionId", id);
            }
            ol_xml_close(&w, "Deleted");
        } else {
            const struct ol_s3_err_info *info = ol_s3_err_info(it->err);
            ol_xml_open(&w, "Error", NULL);
            ol_xml_elem(&w, "Key", it->key, it->klen);
            ol_xml_elem_s(&w, "Code", info->code);
            ol_xml_elem_s(&w, "Message", info->message);
            ol_xml_close(&w, "Error");
        }
    }
    ol_xml_close(&w, "DeleteResult");
    free(d->items);
    free(d);
    q->op_state = NULL;
    if (w.err)
        ol_s3_error(q, OL_S3_INTERNAL, "the DeleteResult did not fit its XML buffer");
    else
        ol_s3_reply(q, 200, NULL, "application/xml", out, w.n);
    free(out);
}

static void del_next(struct ol_s3_req *q);

static void del_done(struct ol_s3_req *q, struct ol_s3_vdel *x, int status)
{
    struct del_state *d = q->op_state;
    struct del_item *it = &d->items[d->next++];
    if (status == OL_STORE_ENOBUCKET && q->r) {   /* the request's error, not a key's */
        free(d->items);
        free(d);
        q->op_state = NULL;
        ol_s3_error(q, OL_S3_NO_SUCH_BUCKET, NULL);
        return;
    }
    if (status < 0) {
        const char *msg;
        it->err = ol_s3_store_err(status, &msg);
    } else {
        it->marker = x->marker;
        it->show_vid = x->show_vid;
        memcpy(it->out_vid, x->out_vid, 16);
    }
    del_next(q);
}

/* One delete at a time (a batch must not drain the core's request pool). */
static void del_next(struct ol_s3_req *q)
{
    struct del_state *d = q->op_state;
    while (d->next < d->n) {
        struct del_item *it = &d->items[d->next];
        if (!q->r) {   /* the client left: stop here */
            free(d->items);
            free(d);
            q->op_state = NULL;
            ol_s3_req_free(q);
            return;
        }
        if (it->bad_key) {
            it->err = it->klen >= OL_S3_KEY_MAX ? OL_S3_KEY_TOO_LONG : OL_S3_INVALID_ARGUMENT;
        } else if (it->bad_version) {
            it->err = OL_S3_NO_SUCH_VERSION;
        } else {
            d->x = (struct ol_s3_vdel){.key = it->key, .klen = it->klen,
                                       .has_vid = it->has_version, .done = del_done};
            memcpy(d->x.vid, it->vid, 16);
            int rc = ol_s3_vdel_start(q, &d->x);
            if (rc == 0)
                return;
            const char *msg;
            it->err = ol_s3_store_err(rc, &msg);
        }
        d->next++;
    }
    if (!q->r) {
        free(d->items);
        free(d);
        q->op_state = NULL;
        ol_s3_req_free(q);
        return;
    }
    del_reply(q);
}

static void delete_objects_body(struct ol_s3_req *q)
{
    struct del_state *d = calloc(1, sizeof *d);
    if (d)
        d->items = malloc(OL_S3_MAX_DELETE * sizeof *d->items);
    if (!d || !d->items) {
        if (d)
            free(d);
        ol_s3_error(q, OL_S3_SLOW_DOWN, NULL);
        return;
    }
    int rc = ol_xml_parse(q->xml, q->xml_len, del_xml_cb, d);
    if (rc < 0 || d->n == 0) {
        free(d->items);
        free(d);
        ol_s3_error(q, OL_S3_MALFORMED_XML, rc == -E2BIG ? "At most 1000 keys per request."
                                                          : NULL);
        return;
    }
    q->op_state = d;
    q->abort_handler = ol_s3_client_gone_wait;   /* del_next frees once its delete returns */
    del_next(q);
}

void ol_s3_delete_objects(struct ol_s3_req *q)
{
    /* S3 requires an integrity header on DeleteObjects */
    bool sum = ol_s3_hdr(q, "content-md5") != NULL;
    const struct ol_http_request *h = ol_http_req_head(q->r);
    for (size_t i = 0; i < h->num_headers && !sum; i++)
        sum = ol_ck_algo_of_header(h->headers[i].name, h->headers[i].name_len) != 0;
    if (!sum && !ol_s3_hdr(q, "x-amz-trailer")) {
        ol_s3_error(q, OL_S3_INVALID_REQUEST, "Missing required header for this request: "
                    "Content-MD5 (or an x-amz-checksum-* header).");
        return;
    }
    enum ol_s3_err e = ol_s3_read_xml(q, delete_objects_body);
    if (e)
        ol_s3_error(q, e, NULL);
}
