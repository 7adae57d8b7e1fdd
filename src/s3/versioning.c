/*
 * versioning.c - S3 versioning on the engine (see versioning.h): version
 * ids, DeleteObject (object, version, delete marker),
 * Get/PutBucketVersioning and ListObjectVersions.
 *
 * ListObjectVersions walks the bucket's key index (all keys, delete
 * markers included) for one page of keys and CommonPrefixes, then reads
 * the metadata file of each key that may have more than its one null
 * version (index flags VERSIONS or DELETE_MARKER), one key after the
 * other: a page costs one metadata read per such key on each drive of its
 * set (keys of a bucket never versioned cost nothing beyond the index).
 *
 * Must not: keep anything of a request after it answered; block (every
 * store call is asynchronous, the index is memory).
 */
#include "s3/versioning.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "s3/date.h"
#include "s3/op_int.h"
#include "store/catalog.h"
#include "store/index.h"
#include "store/meta.h"

static const uint8_t null_vid[16];

/* ---- version ids ------------------------------------------------------------------ */

void ol_s3_vid_format(const uint8_t vid[16], char out[OL_S3_VID_LEN + 1])
{
    if (memcmp(vid, null_vid, 16) == 0) {
        memcpy(out, "null", 5);
        return;
    }
    static const char hx[] = "0123456789abcdef";
    for (unsigned i = 0; i < 16; i++) {
        out[2 * i] = hx[vid[i] >> 4];
        out[2 * i + 1] = hx[vid[i] & 15];
    }
    out[OL_S3_VID_LEN] = 0;
}

int ol_s3_vid_parse(const char *s, size_t n, uint8_t vid[16])
{
    if (n == 4 && memcmp(s, "null", 4) == 0) {
        memset(vid, 0, 16);
        return 0;
    }
    if (n != OL_S3_VID_LEN)
        return -1;
    for (unsigned i = 0; i < 32; i++) {
        char c = s[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0)
            return -1;
        if (i % 2 == 0)
            vid[i / 2] = (uint8_t)(v << 4);
        else
            vid[i / 2] |= (uint8_t)v;
    }
    return memcmp(vid, null_vid, 16) == 0 ? -1 : 0; /* one spelling per id */
}

int ol_s3_vid_query(struct ol_s3_req *q, uint8_t vid[16])
{
    char buf[64];
    int n = ol_s3_query(q->query, q->query_len, "versionId", buf, sizeof buf);
    if (n == -ENOENT)
        return 0;
    if (n < 0 || ol_s3_vid_parse(buf, (size_t)n, vid) < 0) {
        ol_s3_error(q, OL_S3_INVALID_ARGUMENT, "Invalid version id specified");
        return -1;
    }
    return 1;
}

void ol_s3_vid_new(struct ol_s3_req *q, uint8_t vid[16])
{
    memset(vid, 0, 16);
    if (ol_store_versioning_get(ol_store_core_store(ol_s3_store(q)), q->route.bucket) !=
        OL_STORE_VER_ENABLED)
        return;
    do
        ol_store_random_id(ol_s3_store(q), vid);
    while (memcmp(vid, null_vid, 16) == 0);
}

size_t ol_s3_vid_header(struct ol_s3_req *q, const uint8_t vid[16], char *h, size_t cap)
{
    if (memcmp(vid, null_vid, 16) == 0 &&
        ol_store_versioning_get(ol_store_core_store(ol_s3_store(q)), q->route.bucket) ==
            OL_STORE_VER_OFF)
        return 0;
    char s[OL_S3_VID_LEN + 1];
    ol_s3_vid_format(vid, s);
    int n = snprintf(h, cap, "x-amz-version-id: %s\r\n", s);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

void ol_s3_get_failed(struct ol_s3_req *q, const struct ol_store_event *ev)
{
    bool by_vid = q->op.get.has_vid;
    if (ev->status == OL_STORE_EDELMARK && ev->version) {
        char h[160], s[OL_S3_VID_LEN + 1];
        ol_s3_vid_format(ev->version->vid, s);
        snprintf(h, sizeof h, "x-amz-delete-marker: true\r\nx-amz-version-id: %s\r\n%s", s,
                 by_vid ? "Allow: DELETE\r\n" : "");
        if (by_vid)
            ol_s3_error_h(q, OL_S3_METHOD_NOT_ALLOWED,
                          "The specified method is not allowed against this resource.", h);
        else
            ol_s3_error_h(q, OL_S3_NO_SUCH_KEY, NULL, h);
        return;
    }
    if (ev->status == -ENOENT && by_vid) {
        ol_s3_error(q, OL_S3_NO_SUCH_VERSION, NULL);
        return;
    }
    ol_s3_store_error(q, ev->status);
}

/* ---- DeleteObject ------------------------------------------------------------------------ */

static void vdel_ver_done(void *ud, const struct ol_store_event *ev)
{
    struct ol_s3_vdel *x = ud;
    struct ol_s3_req *q = x->q;
    const struct ol_delete_args *a = &x->da;
    if (ev->status == 0) {
        x->show_vid = true;
        memcpy(x->out_vid, x->vid, 16);
        x->marker = a->found && a->was_marker;
    }
    x->done(q, x, ev->status);
}

static void vdel_obj_done(void *ud, const struct ol_store_event *ev)
{
    struct ol_s3_vdel *x = ud;
    x->done(x->q, x, ev->status);
}

static void vdel_marker_event(void *ud, const struct ol_store_event *ev)
{
    struct ol_s3_vdel *x = ud;
    struct ol_s3_req *q = x->q;
    if (ev->type == OL_STORE_EV_ERROR) {
        if (x->put) {
            ol_put_abort(x->put);
            x->put = NULL;
            x->done(q, x, ev->status);
        }
        return;
    }
    if (ev->type != OL_STORE_EV_DONE)
        return;
    x->put = NULL;
    if (ev->status == 0) {
        x->marker = true;
        x->show_vid = true;
    }
    x->done(q, x, ev->status);
}

int ol_s3_vdel_start(struct ol_s3_req *q, struct ol_s3_vdel *x)
{
    x->q = q;
    x->marker = x->show_vid = false;
    x->put = NULL;
    if (x->has_vid) {
        memset(&x->da, 0, sizeof x->da);
        x->da.bucket = q->route.bucket;
        x->da.key = x->key;
        memcpy(x->da.vid, x->vid, 16);
        return ol_delete_version(ol_s3_store(q), &x->da, vdel_ver_done, x);
    }
    enum ol_store_versioning st =
        ol_store_versioning_get(ol_store_core_store(ol_s3_store(q)), q->route.bucket);
    if (st == OL_STORE_VER_OFF)
        return ol_delete(ol_s3_store(q), q->route.bucket, x->key, vdel_obj_done, x);
    /* a delete marker: a PUT of nothing */
    ol_s3_vid_new(q, x->out_vid);
    struct ol_put_args a = {.bucket = q->route.bucket, .key = x->key, .size = 0, .parity = -1};
    int rc = ol_put_begin(ol_s3_store(q), &a, vdel_marker_event, x, &x->put);
    if (rc < 0)
        return rc;
    struct ol_meta_version v;
    memset(&v, 0, sizeof v);
    v.type = OL_META_DELETE_MARKER;
    memcpy(v.vid, x->out_vid, 16);
    rc = ol_put_finish(x->put, &v);
    if (rc < 0) {
        ol_put_abort(x->put);
        x->put = NULL;
    }
    return rc;
}

static void delete_object_done(struct ol_s3_req *q, struct ol_s3_vdel *x, int status)
{
    if (!q->r) {
        free(x);
        q->op_state = NULL;
        ol_s3_req_free(q);
        return;
    }
    char h[160] = "";
    size_t n = 0;
    if (status == 0 && x->show_vid) {
        char s[OL_S3_VID_LEN + 1];
        ol_s3_vid_format(x->out_vid, s);
        n = (size_t)snprintf(h, sizeof h, "x-amz-version-id: %s\r\n", s);
    }
    if (status == 0 && x->marker)
        snprintf(h + n, sizeof h - n, "x-amz-delete-marker: true\r\n");
    free(x);
    q->op_state = NULL;
    if (status < 0)
        ol_s3_store_error(q, status);
    else
        ol_s3_reply(q, 204, h[0] ? h : NULL, NULL, NULL, 0);
}

void ol_s3_delete_object(struct ol_s3_req *q)
{
    struct ol_s3_vdel *x = calloc(1, sizeof *x);
    if (!x) {
        ol_s3_error(q, OL_S3_SLOW_DOWN, NULL);
        return;
    }
    int vq = ol_s3_vid_query(q, x->vid);
    if (vq < 0) {
        free(x);
        return;
    }
    x->has_vid = vq == 1;
    x->key = q->route.key;
    x->klen = q->route.key_len;
    x->done = delete_object_done;
    q->op_state = x;
    int rc = ol_s3_vdel_start(q, x);
    if (rc < 0) {
        free(x);
        q->op_state = NULL;
        ol_s3_store_error(q, rc);
        return;
    }
    q->abort_handler = ol_s3_client_gone_wait;   /* done() frees */
}

/* ---- Get/PutBucketVersioning ------------------------------------------------------------ */

void ol_s3_versioning_doc(struct ol_s3_req *q)
{
    enum ol_store_versioning st =
        ol_store_versioning_get(ol_store_core_store(ol_s3_store(q)), q->route.bucket);
    char out[512];
    struct ol_xml_w w;
    ol_xml_w_init(&w, out, sizeof out);
    ol_xml_decl(&w);
    ol_xml_open(&w, "VersioningConfiguration", OL_S3_NS);
    if (st != OL_STORE_VER_OFF)   /* a bucket never versioned has no Status */
        ol_xml_elem_s(&w, "Status", st == OL_STORE_VER_ENABLED ? "Enabled" : "Suspended");
    ol_xml_close(&w, "VersioningConfiguration");
    ol_s3_reply(q, 200, NULL, "application/xml", out, w.n);
}

struct ver_cfg {
    int status;     /* 0 absent, else enum ol_store_versioning; -1 bad */
    bool mfa, bad;
};

static int ver_cfg_cb(void *ctx, const char *path, size_t depth, const char *text, size_t len,
                      bool end)
{
    struct ver_cfg *c = ctx;
    if (depth == 1 && strcmp(path, "VersioningConfiguration") != 0)
        return -EINVAL;
    if (!end)
        return 0;
    if (strcmp(path, "VersioningConfiguration/Status") == 0) {
        if (len == 7 && memcmp(text, "Enabled", 7) == 0)
            c->status = OL_STORE_VER_ENABLED;
        else if (len == 9 && memcmp(text, "Suspended", 9) == 0)
            c->status = OL_STORE_VER_SUSPENDED;
        else
            c->bad = true;
    } else if (strcmp(path, "VersioningConfiguration/MfaDelete") == 0) {
        if (len == 7 && memcmp(text, "Enabled", 7) == 0)
            c->mfa = true;
        else if (!(len == 8 && memcmp(text, "Disabled", 8) == 0))
            c->bad = true;
    }
    return 0;
}

static void put_versioning_done(void *ud, const struct ol_store_event *ev)
{
    struct ol_s3_req *q = ud;
    if (!q->r) {
        ol_s3_req_free(q);
        return;
    }
    if (ev->status < 0)
        ol_s3_store_error(q, ev->status);
    else
        ol_s3_reply(q, 200, NULL, NULL, NULL, 0);
}

static void put_versioning_body(struct ol_s3_req *q)
{
    struct ver_cfg c = {0};
    if (ol_xml_parse(q->xml, q->xml_len, ver_cfg_cb, &c) < 0 || c.bad || c.status == 0) {
        ol_s3_error(q, OL_S3_MALFORMED_XML, NULL);
        return;
    }
    if (c.mfa) {
        ol_s3_error(q, OL_S3_NOT_IMPLEMENTED, "MFA delete is not supported.");
        return;
    }
    int rc = ol_store_versioning_set(ol_s3_store(q), q->route.bucket,
                                     (enum ol_store_versioning)c.status, put_versioning_done, q);
    if (rc < 0)
        ol_s3_store_error(q, rc);
    else
        q->abort_handler = ol_s3_client_gone_wait;
}

void ol_s3_put_bucket_versioning(struct ol_s3_req *q)
{
    enum ol_s3_err e = ol_s3_read_xml(q, put_versioning_body);
    if (e)
        ol_s3_error(q, e, NULL);
}

/* ---- ListObjectVersions ----------------------------------------------------------------- */

struct lv_entry {
    struct ol_index_rec rec;
    uint16_t len;
    bool prefix;              /* a CommonPrefix */
    char name[OL_S3_KEY_MAX + 1];
};

struct lv_state {
    struct lv_entry *e;
    unsigned n, cur;
    unsigned max, count;      /* max-keys; Versions + DeleteMarkers + CommonPrefixes out */
    bool truncated, index_more, url;
    struct ol_get *get;
    struct ol_xml_w w, cp;    /* entries, CommonPrefixes */
    char *buf, *cpbuf;
    /* parameters */
    char prefix[OL_S3_KEY_MAX + 1], delim[OL_S3_KEY_MAX + 1], kmark[OL_S3_KEY_MAX + 1];
    int pl, dl, kl;
    bool has_vmark;
    uint8_t vmark[16];
    /* the last entry out: the next markers */
    char next_key[OL_S3_KEY_MAX + 1];
    uint16_t next_len;
    bool next_has_vid;
    uint8_t next_vid[16];
};

static void lv_free(struct ol_s3_req *q)
{
    struct lv_state *s = q->op_state;
    if (!s)
        return;
    free(s->e);
    free(s->buf);
    free(s->cpbuf);
    free(s);
    q->op_state = NULL;
}

static int lv_collect(void *arg, const uint8_t *name, size_t len, const struct ol_index_rec *rec)
{
    struct lv_state *s = arg;
    struct lv_entry *e = &s->e[s->n++];
    e->len = (uint16_t)len;
    memcpy(e->name, name, len);
    e->name[len] = 0;
    e->prefix = rec == NULL;
    if (rec)
        e->rec = *rec;
    return 0;
}

/* One <Version> or <DeleteMarker>. */
static void lv_emit(struct lv_state *s, const char *key, size_t klen,
                    const struct ol_meta_version *v, bool latest)
{
    struct ol_xml_w *w = &s->w;
    char d[80], id[OL_S3_VID_LEN + 1];
    ol_s3_iso_date_ms(v->mtime_ns, d);
    ol_s3_vid_format(v->vid, id);
    bool dm = v->type == OL_META_DELETE_MARKER;
    const char *tag = dm ? "DeleteMarker" : "Version";
    ol_xml_open(w, tag, NULL);
    ol_s3_url_elem(w, "Key", key, klen, s->url);
    ol_xml_elem_s(w, "VersionId", id);
    ol_xml_elem_s(w, "IsLatest", latest ? "true" : "false");
    ol_xml_elem_s(w, "LastModified", d);
    if (!dm) {
        char et[OL_META_ETAG_STRLEN + 2];
        ol_s3_etag_quoted(v, et);
        ol_xml_elem_s(w, "ETag", et);
        ol_xml_elem_u64(w, "Size", v->size);
        ol_xml_elem_s(w, "StorageClass", ol_s3_storage_class_name(v->storage_class));
    }
    ol_s3_owner(w, "Owner");
    ol_xml_close(w, tag);
    s->count++;
    memcpy(s->next_key, key, klen);
    s->next_len = (uint16_t)klen;
    s->next_has_vid = true;
    memcpy(s->next_vid, v->vid, 16);
}

static void lv_reply(struct ol_s3_req *q)
{
    struct lv_state *s = q->op_state;
    size_t cap = s->w.n + s->cp.n + 16384;
    char *out = malloc(cap);
    if (!out || s->w.err || s->cp.err) {
        free(out);
        lv_free(q);
        ol_s3_error(q, out ? OL_S3_INTERNAL : OL_S3_SLOW_DOWN, NULL);
        return;
    }
    struct ol_xml_w t;
    ol_xml_w_init(&t, out, cap);
    ol_xml_decl(&t);
    ol_xml_open(&t, "ListVersionsResult", OL_S3_NS);
    ol_xml_elem(&t, "Name", q->route.bucket, q->route.bucket_len);
    ol_s3_url_elem(&t, "Prefix", s->prefix, (size_t)s->pl, s->url);
    ol_s3_url_elem(&t, "KeyMarker", s->kmark, (size_t)s->kl, s->url);
    char id[OL_S3_VID_LEN + 1] = "";
    if (s->has_vmark)
        ol_s3_vid_format(s->vmark, id);
    ol_xml_elem_s(&t, "VersionIdMarker", id);
    if (s->truncated) {
        ol_s3_url_elem(&t, "NextKeyMarker", s->next_key, s->next_len, s->url);
        if (s->next_has_vid) {
            ol_s3_vid_format(s->next_vid, id);
            ol_xml_elem_s(&t, "NextVersionIdMarker", id);
        }
    }
    ol_xml_elem_u64(&t, "MaxKeys", s->max);
    if (s->dl > 0)
        ol_s3_url_elem(&t, "Delimiter", s->delim, (size_t)s->dl, s->url);
    ol_xml_elem_s(&t, "IsTruncated", s->truncated ? "true" : "false");
    if (t.n + s->w.n + s->cp.n + 64 <= cap) {
        memcpy(out + t.n, s->w.p, s->w.n);
        t.n += s->w.n;
        memcpy(out + t.n, s->cp.p, s->cp.n);
        t.n += s->cp.n;
    } else {
        t.err = -ENOSPC;
    }
    if (s->url)
        ol_xml_elem_s(&t, "EncodingType", "url");
    ol_xml_close(&t, "ListVersionsResult");
    lv_free(q);
    if (t.err)
        ol_s3_error(q, OL_S3_INTERNAL, NULL);
    else
        ol_s3_reply(q, 200, NULL, "application/xml", out, t.n);
    free(out);
}

static void lv_next(struct ol_s3_req *q);

/* The versions of the current key, from its metadata file. */
static void lv_file(struct lv_state *s, const struct lv_entry *e, const uint8_t *data, size_t len)
{
    struct ol_meta_file f;
    struct ol_meta_version v;
    if (ol_meta_open(data, len, &f) < 0)
        return;
    /* resuming inside the key-marker's versions: after version-id-marker */
    bool skipping = s->has_vmark && s->cur == 0 && e->len == s->kl &&
                    memcmp(e->name, s->kmark, e->len) == 0;
    bool first = true;
    while (ol_meta_next(&f, &v) == 1) {
        bool latest = first;
        first = false;
        if (skipping) {
            if (memcmp(v.vid, s->vmark, 16) == 0)
                skipping = false;
            continue;
        }
        if (s->count == s->max) {
            s->truncated = true;
            return;
        }
        lv_emit(s, e->name, e->len, &v, latest);
    }
}

static void lv_get_event(void *ud, const struct ol_store_event *ev)
{
    struct ol_s3_req *q = ud;
    struct lv_state *s = q->op_state;
    if (ev->type != OL_STORE_EV_META && ev->type != OL_STORE_EV_DONE)
        return;
    struct ol_get *g = s->get;
    s->get = NULL;
    if (!q->r) {
        ol_get_end(g);
        lv_free(q);
        ol_s3_req_free(q);
        return;
    }
    if (ev->type == OL_STORE_EV_META) {
        lv_file(s, &s->e[s->cur], ev->data, ev->len);
        ol_get_end(g);
    } else {
        ol_get_end(g);
        if (ev->status != -ENOENT && ev->status != OL_STORE_EDELMARK) {
            lv_free(q);
            ol_s3_store_error(q, ev->status);
            return;
        }
        /* the key went away since the index was read: nothing of it */
        const struct lv_entry *e = &s->e[s->cur];
        memcpy(s->next_key, e->name, e->len);
        s->next_len = e->len;
        s->next_has_vid = false;
    }
    s->cur++;
    lv_next(q);
}

static void lv_client_gone(struct ol_s3_req *q)
{
    struct lv_state *s = q->op_state;
    if (s && s->get)
        return;   /* the GET's callback frees */
    lv_free(q);
    ol_s3_req_free(q);
}

/* Goes on with entry s->cur (reading a key's metadata when it may have
 * versions), until the page is full or the entries end. */
static void lv_next(struct ol_s3_req *q)
{
    struct lv_state *s = q->op_state;
    while (s->cur < s->n && !s->truncated) {
        struct lv_entry *e = &s->e[s->cur];
        if (s->count == s->max) {
            s->truncated = true;
            break;
        }
        if (e->prefix) {
            ol_xml_open(&s->cp, "CommonPrefixes", NULL);
            ol_s3_url_elem(&s->cp, "Prefix", e->name, e->len, s->url);
            ol_xml_close(&s->cp, "CommonPrefixes");
            s->count++;
            memcpy(s->next_key, e->name, e->len);
            s->next_len = e->len;
            s->next_has_vid = false;
            s->cur++;
            continue;
        }
        bool resume = s->has_vmark && s->cur == 0 && e->len == s->kl &&
                      memcmp(e->name, s->kmark, e->len) == 0;
        if (!(e->rec.flags & (OL_INDEX_F_VERSIONS | OL_INDEX_F_DELETE_MARKER))) {
            if (!resume) {   /* the one null version, as the index has it */
                struct ol_meta_version v;
                memset(&v, 0, sizeof v);
                v.type = OL_META_OBJECT;
                v.mtime_ns = e->rec.mtime_ns;
                v.size = e->rec.size;
                memcpy(v.etag, e->rec.etag, 16);
                v.etag_parts = e->rec.etag_parts;
                v.storage_class = e->rec.storage_class;
                memcpy(v.vid, e->rec.version_id, 16);
                lv_emit(s, e->name, e->len, &v, true);
            }
            s->cur++;
            continue;
        }
        struct ol_get_args a = {.bucket = q->route.bucket, .key = e->name, .length = -1,
                                .raw = true};
        int rc = ol_get_begin(ol_s3_store(q), &a, lv_get_event, q, &s->get);
        if (rc < 0) {
            lv_free(q);
            ol_s3_store_error(q, rc);
            return;
        }
        return;   /* lv_get_event goes on */
    }
    if (s->cur >= s->n && s->index_more)
        s->truncated = true;   /* the index has more after the last entry */
    lv_reply(q);
}

void ol_s3_list_object_versions(struct ol_s3_req *q)
{
    if (!q->srv->p.catalog) {
        ol_s3_error(q, OL_S3_NOT_IMPLEMENTED, "Listing needs the key index.");
        return;
    }
    struct lv_state *s = calloc(1, sizeof *s);
    if (!s) {
        ol_s3_error(q, OL_S3_SLOW_DOWN, NULL);
        return;
    }
    q->op_state = s;
    char num[24], enc[16], vm[64];
    s->pl = ol_s3_qparam(q, "prefix", s->prefix, sizeof s->prefix);
    s->dl = ol_s3_qparam(q, "delimiter", s->delim, sizeof s->delim);
    s->kl = ol_s3_qparam(q, "key-marker", s->kmark, sizeof s->kmark);
    int ml = ol_s3_qparam(q, "max-keys", num, sizeof num);
    int el = ol_s3_qparam(q, "encoding-type", enc, sizeof enc);
    int vl = ol_s3_qparam(q, "version-id-marker", vm, sizeof vm);
    const char *bad = NULL;
    if (s->pl < 0 || s->dl < 0 || s->kl < 0 || ml < 0 || el < 0 || vl < 0)
        bad = "A listing parameter is malformed or too long.";
    else if (el > 0 && strcmp(enc, "url") != 0)
        bad = "Invalid Encoding Method specified in Request";
    else if (vl > 0 && s->kl == 0)
        bad = "A version-id marker cannot be specified without a key marker.";
    else if (vl > 0 && ol_s3_vid_parse(vm, (size_t)vl, s->vmark) < 0)
        bad = "Invalid version id specified";
    s->max = 1000;
    if (!bad && ml > 0) {
        char *end;
        long v = strtol(num, &end, 10);
        if (*end || v < 0)
            bad = "max-keys must be a non-negative integer.";
        else
            s->max = v > 1000 ? 1000 : (unsigned)v;
    }
    if (bad) {
        lv_free(q);
        ol_s3_error(q, OL_S3_INVALID_ARGUMENT, bad);
        return;
    }
    s->has_vmark = vl > 0;
    s->url = el > 0;
    size_t cap = 64 * 1024 + (size_t)s->max * (OL_S3_KEY_MAX * 3 + 640);
    s->e = malloc((s->max + 1) * sizeof *s->e);
    s->buf = malloc(cap);
    s->cpbuf = malloc(cap / 2);
    if (!s->e || !s->buf || !s->cpbuf) {
        lv_free(q);
        ol_s3_error(q, OL_S3_SLOW_DOWN, NULL);
        return;
    }
    ol_xml_w_init(&s->w, s->buf, cap);
    ol_xml_w_init(&s->cp, s->cpbuf, cap / 2);
    if (s->max == 0) {   /* nothing, and not truncated (as ListObjects) */
        lv_reply(q);
        return;
    }
    /* the key-marker's own versions first when resuming inside it */
    if (s->has_vmark) {
        struct lv_entry *e = &s->e[s->n++];
        memset(&e->rec, 0, sizeof e->rec);
        e->rec.flags = OL_INDEX_F_VERSIONS;
        e->len = (uint16_t)s->kl;
        memcpy(e->name, s->kmark, (size_t)s->kl + 1);
        e->prefix = false;
    }
    struct ol_index_list_req req = {.prefix = s->prefix, .prefix_len = (size_t)s->pl,
                                    .delim = s->delim, .delim_len = (size_t)s->dl,
                                    .start = s->kmark, .start_len = (size_t)s->kl,
                                    .max_keys = s->max, .skip_deleted = false};
    struct ol_index_list_out out;
    int rc = ol_catalog_list(q->srv->p.catalog, q->route.bucket, &req, q->srv->list_page,
                             lv_collect, s, &out);
    if (rc < 0) {
        lv_free(q);
        ol_s3_error(q, rc == -ENOENT ? OL_S3_NO_SUCH_BUCKET : OL_S3_INTERNAL, NULL);
        return;
    }
    s->index_more = out.truncated;
    q->abort_handler = lv_client_gone;
    lv_next(q);
}
