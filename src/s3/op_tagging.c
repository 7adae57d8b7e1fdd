/*
 * op_tagging.c - object tags: the tag set as S3 takes it (x-amz-tagging's
 * URL-encoded k=v&k2=v2, the form the version keeps, meta.h) with S3's
 * rules, the Tagging document, and PutObjectTagging / DeleteObjectTagging
 * on the current version or the one ?versionId names. GetObjectTagging
 * reads the version through the GET path (op_object.c) and answers
 * ol_s3_tagging_doc; PutObject and CreateMultipartUpload check their
 * x-amz-tagging with ol_s3_tags_each.
 *
 * Must not: write anything of the version but its tag set
 * (ol_set_tagging), or keep a tag set the rules refuse.
 */
#include "s3/op_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3/pct.h"
#include "s3/versioning.h"
#include "store/layout.h"

/* ---- tags --------------------------------------------------------------------- */

/* Characters of a UTF-8 string (not bytes). */
static size_t utf8_chars(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            c++;
    return c;
}

/* One tag set in x-amz-tagging form (k=v&k2=v2, URL-encoded): calls fn per
 * decoded pair. Returns the tag count, or -1 when S3 would refuse it. */
int ol_s3_tags_each(const char *s, size_t n,
                    void (*fn)(void *, const char *, size_t, const char *, size_t), void *arg)
{
    char keys[10][129 * 4];
    size_t klen[10];
    int count = 0;
    size_t i = 0;
    while (i < n) {
        size_t st = i;
        while (i < n && s[i] != '&')
            i++;
        const char *p = s + st;
        size_t pl = i - st;
        i++;
        if (pl == 0)
            continue;
        if (count == 10)
            return -1;
        const char *eq = memchr(p, '=', pl);
        size_t kl = eq ? (size_t)(eq - p) : pl;
        char k[129 * 4 + 1], v[257 * 4 + 1];
        char qk[600], qv[1200];
        if (kl >= sizeof qk || (eq && pl - kl - 1 >= sizeof qv))
            return -1;
        /* decode through the query helper: "x=" + value */
        snprintf(qk, sizeof qk, "k=%.*s", (int)kl, p);
        snprintf(qv, sizeof qv, "v=%.*s", eq ? (int)(pl - kl - 1) : 0, eq ? eq + 1 : "");
        int dk = ol_s3_query(qk, strlen(qk), "k", k, sizeof k);
        int dv = ol_s3_query(qv, strlen(qv), "v", v, sizeof v);
        if (dk <= 0 || dv < 0 || utf8_chars(k, (size_t)dk) > 128 ||
            utf8_chars(v, (size_t)dv) > 256 || ol_layout_key_ok(k, (size_t)dk) < 0 ||
            (dk >= 4 && strncmp(k, "aws:", 4) == 0))
            return -1;
        for (int j = 0; j < count; j++)
            if (klen[j] == (size_t)dk && memcmp(keys[j], k, (size_t)dk) == 0)
                return -1;   /* the same key twice */
        memcpy(keys[count], k, (size_t)dk);
        klen[count] = (size_t)dk;
        if (fn)
            fn(arg, k, (size_t)dk, v, (size_t)dv);
        count++;
    }
    return count;
}

static void tag_xml(void *arg, const char *k, size_t kl, const char *v, size_t vl)
{
    struct ol_xml_w *w = arg;
    ol_xml_open(w, "Tag", NULL);
    ol_xml_elem(w, "Key", k, kl);
    ol_xml_elem(w, "Value", v, vl);
    ol_xml_close(w, "Tag");
}

void ol_s3_tagging_doc(struct ol_xml_w *w, const struct ol_meta_version *v)
{
    ol_xml_decl(w);
    ol_xml_open(w, "Tagging", OL_S3_NS);
    ol_xml_open(w, "TagSet", NULL);
    ol_s3_tags_each((const char *)v->tagging.p, v->tagging.len, tag_xml, w);
    ol_xml_close(w, "TagSet");
    ol_xml_close(w, "Tagging");
}

/* ---- PutObjectTagging / DeleteObjectTagging ------------------------------------- */

#define OL_S3_TAGS_MAX 49152u      /* the URL-encoded tag set: meta.h's limit */

struct tag_state {
    struct ol_get *get;            /* finding the current version (no versionId) */
    struct ol_tagging_args a;
    bool has_vid;
    size_t len;                    /* bytes of enc */
    char key[129 * 4 + 1];         /* the Tag being parsed */
    char val[257 * 4 + 1];
    size_t kl, vl;
    bool have_key, have_val, bad;
    bool applying;                 /* ol_set_tagging in flight: its EV_DONE frees q */
    unsigned ntags;
    char enc[OL_S3_TAGS_MAX];      /* "k=v&k2=v2", URL-encoded */
};

/* Appends s[0..n) percent-encoded (RFC 3986 unreserved kept). */
static bool tag_enc(struct tag_state *t, const char *s, size_t n)
{
    long el = ol_pct_encode(s, n, t->enc + t->len, sizeof t->enc - t->len, false);
    if (el < 0)
        return false;
    t->len += (size_t)el;
    return true;
}

static int tagging_cb(void *ctx, const char *path, size_t depth, const char *text, size_t len,
                      bool end)
{
    struct tag_state *t = ctx;
    if (depth == 1 && strcmp(path, "Tagging") != 0)
        return -EINVAL;
    if (!end) {
        if (strcmp(path, "Tagging/TagSet/Tag") == 0)
            t->have_key = t->have_val = false;
        return 0;
    }
    if (strcmp(path, "Tagging/TagSet/Tag/Key") == 0) {
        if (len >= sizeof t->key)
            t->bad = true;
        else
            memcpy(t->key, text, len), t->kl = len, t->have_key = true;
    } else if (strcmp(path, "Tagging/TagSet/Tag/Value") == 0) {
        if (len >= sizeof t->val)
            t->bad = true;
        else
            memcpy(t->val, text, len), t->vl = len, t->have_val = true;
    } else if (strcmp(path, "Tagging/TagSet/Tag") == 0) {
        if (!t->have_key || !t->have_val)
            return -EINVAL;    /* a Tag needs both */
        if (t->ntags++) {
            if (t->len + 1 >= sizeof t->enc)
                return -E2BIG;
            t->enc[t->len++] = '&';
        }
        if (!tag_enc(t, t->key, t->kl) || t->len + 1 >= sizeof t->enc)
            return -E2BIG;
        t->enc[t->len++] = '=';
        if (!tag_enc(t, t->val, t->vl))
            return -E2BIG;
    }
    return 0;
}

static void tag_free(struct ol_s3_req *q)
{
    struct tag_state *t = q->op_state;
    if (t) {
        if (t->get)
            ol_get_end(t->get);
        free(t);
        q->op_state = NULL;
    }
}

static void tag_gone(struct ol_s3_req *q)
{
    struct tag_state *t = q->op_state;
    if (t && t->applying)
        return;   /* its EV_DONE frees q */
    tag_free(q);
    ol_s3_req_free(q);
}

static void tag_done(void *ud, const struct ol_store_event *ev)
{
    struct ol_s3_req *q = ud;
    struct tag_state *t = q->op_state;
    if (!q->r) {
        tag_free(q);
        ol_s3_req_free(q);
        return;
    }
    int st = ev->status;
    bool put = q->route.op == OL_OP_PUT_OBJECT_TAGGING;
    uint8_t vid[16];
    memcpy(vid, t->a.vid, 16);
    bool found = t->a.found, marker = t->a.is_marker, has_vid = t->has_vid;
    tag_free(q);
    if (st == -E2BIG) {
        ol_s3_error(q, OL_S3_INVALID_REQUEST, "The object's metadata has no room for this "
                    "tag set.");
    } else if (st < 0) {
        ol_s3_store_error(q, st);
    } else if (!found) {
        ol_s3_error(q, has_vid ? OL_S3_NO_SUCH_VERSION : OL_S3_NO_SUCH_KEY, NULL);
    } else if (marker) {
        ol_s3_error(q, OL_S3_METHOD_NOT_ALLOWED, "A delete marker has no tags.");
    } else {
        char h[128];
        size_t n = ol_s3_vid_header(q, vid, h, sizeof h);
        h[n] = 0;
        ol_s3_reply(q, put ? 200 : 204, n ? h : NULL, NULL, NULL, 0);
    }
}

static void tag_apply(struct ol_s3_req *q)
{
    struct tag_state *t = q->op_state;
    t->a.bucket = q->route.bucket;
    t->a.key = q->route.key;
    t->a.tagging = (const uint8_t *)t->enc;
    t->a.tagging_len = (uint32_t)t->len;
    t->applying = true;
    int rc = ol_set_tagging(ol_s3_store(q), &t->a, tag_done, q);
    if (rc < 0) {
        tag_free(q);
        ol_s3_store_error(q, rc);
    }
}

/* No versionId: the current version, as a GET finds it. */
static void tag_get_event(void *ud, const struct ol_store_event *ev)
{
    struct ol_s3_req *q = ud;
    struct tag_state *t = q->op_state;
    if (!q->r) {
        tag_gone(q);
        return;
    }
    if (ev->type == OL_STORE_EV_META) {
        memcpy(t->a.vid, ev->version->vid, 16);
        ol_get_end(t->get);
        t->get = NULL;
        tag_apply(q);
        return;
    }
    if (ev->type == OL_STORE_EV_DONE) {
        int st = ev->status < 0 ? ev->status : -EIO;
        tag_free(q);   /* ends the GET (ol_get_end), which gives its slot back */
        ol_s3_store_error(q, st);
    }
}

static void tag_start(struct ol_s3_req *q)
{
    struct tag_state *t = q->op_state;
    if (t->has_vid) {
        tag_apply(q);
        return;
    }
    struct ol_get_args a = {.bucket = q->route.bucket, .key = q->route.key, .offset = 0,
                            .length = -1};
    int rc = ol_get_begin(ol_s3_store(q), &a, tag_get_event, q, &t->get);
    if (rc < 0) {
        tag_free(q);
        ol_s3_store_error(q, rc);
    }
}

static struct tag_state *tag_new(struct ol_s3_req *q);

static void put_tagging_body(struct ol_s3_req *q)
{
    struct tag_state *t = tag_new(q);
    if (!t)
        return;
    int rc = ol_xml_parse(q->xml, q->xml_len, tagging_cb, t);
    if (rc < 0 || t->bad) {
        enum ol_s3_err e = rc == -E2BIG || t->bad ? OL_S3_INVALID_TAG : OL_S3_MALFORMED_XML;
        tag_free(q);
        ol_s3_error(q, e, NULL);
        return;
    }
    /* the same rules as x-amz-tagging: at most 10, unique keys, lengths, no aws: */
    if (ol_s3_tags_each(t->enc, t->len, NULL, NULL) < 0) {
        tag_free(q);
        ol_s3_error(q, OL_S3_INVALID_TAG, NULL);
        return;
    }
    tag_start(q);
}

static struct tag_state *tag_new(struct ol_s3_req *q)
{
    struct tag_state *t = calloc(1, sizeof *t);
    if (!t) {
        ol_s3_error(q, OL_S3_SLOW_DOWN, NULL);
        return NULL;
    }
    int vq = ol_s3_vid_query(q, t->a.vid);
    if (vq < 0) {
        free(t);
        return NULL;
    }
    t->has_vid = vq == 1;
    q->op_state = t;
    q->abort_handler = tag_gone;
    return t;
}

void ol_s3_put_object_tagging(struct ol_s3_req *q)
{
    enum ol_s3_err e = ol_s3_read_xml(q, put_tagging_body);
    if (e)
        ol_s3_error(q, e, NULL);
}

void ol_s3_delete_object_tagging(struct ol_s3_req *q)
{
    if (tag_new(q))
        tag_start(q);   /* an empty tag set */
}
