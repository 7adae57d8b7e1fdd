/*
 * test_store_listing.c - the listing catalog (store/catalog.h) and its
 * upkeep by the engine (engine.h, ol_store_set_catalog).
 *
 * The catalog alone: a page is copied out under the bucket's lock and
 * formatted after it (the callback may call back into the catalog;
 * max-keys is clamped to the page), a failed update makes the catalog
 * dirty (counted, no clean marker at close: the next open rebuilds), a
 * clean close is loaded again.
 *
 * The engine keeping it, on a real loop with temporary drives: every
 * commit (PUT, a PUT whose caller ignores its answer, Complete, DELETE,
 * delete markers, version deletes, buckets) leaves the key's record equal
 * to what a GET finds (size, ETag, mtime, version id, flags), across a
 * clean restart; two cores racing PUTs of one key leave the record of the
 * version GET serves; a core stopped under a commit makes the catalog
 * dirty and the restart rebuilds it.
 */
#include "olt.h"
#include "store_harness.h"

#include "store/catalog.h"
#include "store/engine_int.h"   /* ol_se_renamed_hook */
#include "store/index.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One drive with buckets bk1 and bk2 (empty): its path into out. */
static void one_drive(char *out, size_t cap)
{
    snprintf(out, cap, "%s/d0", olt_tmpdir());
    const char *sub[] = {"", "/.openlake", "/.openlake/buckets", "/.openlake/buckets/bk1",
                         "/.openlake/buckets/bk2"};
    for (unsigned i = 0; i < sizeof sub / sizeof *sub; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s%s", out, sub[i]);
        OLT_CHECK(mkdir(p, 0700) == 0);
    }
}

static struct ol_catalog *cat_open(const char *drive, struct ol_catalog_info *info)
{
    const char *dp[1] = {drive};
    struct ol_catalog *c = NULL;
    char err[256] = "";
    int rc = ol_catalog_open(dp, 1, 1, &c, info, err, sizeof err);
    if (rc < 0)
        olt_fail(__FILE__, __LINE__, "ol_catalog_open: %d %s", rc, err);
    return c;
}

static struct ol_index_rec rec_of(unsigned i)
{
    struct ol_index_rec r;
    memset(&r, 0, sizeof r);
    r.size = i;
    r.mtime_ns = 1700000000000000000ull + i;
    memset(r.etag, (int)(i & 0xff), sizeof r.etag);
    return r;
}

/* Field by field (the struct has padding). */
static bool rec_eq(const struct ol_index_rec *a, const struct ol_index_rec *b)
{
    return a->size == b->size && a->mtime_ns == b->mtime_ns &&
           !memcmp(a->etag, b->etag, sizeof a->etag) && a->etag_parts == b->etag_parts &&
           a->storage_class == b->storage_class && a->flags == b->flags &&
           !memcmp(a->version_id, b->version_id, sizeof a->version_id);
}

static bool clean_marker(const char *drive)
{
    char p[600];
    snprintf(p, sizeof p, "%s/.openlake/index/clean", drive);
    return access(p, F_OK) == 0;
}

/* The callback: checks order and records, and writes into the catalog
 * while the listing runs (which would deadlock under the bucket's lock). */
struct seen {
    struct ol_catalog *c;
    unsigned n, prefixes;
    char last[64];
};

static int seen_entry(void *arg, const uint8_t *name, size_t len, const struct ol_index_rec *rec)
{
    struct seen *s = arg;
    char k[64];
    OLT_CHECK(len < sizeof k);
    memcpy(k, name, len);
    k[len] = 0;
    OLT_CHECK(strcmp(k, s->last) > 0);
    snprintf(s->last, sizeof s->last, "%s", k);
    if (!rec) {
        s->prefixes++;
        return 0;
    }
    unsigned i = 9999;   /* z-late */
    OLT_CHECK(k[0] == 'z' || sscanf(k, "k%u", &i) == 1);
    struct ol_index_rec want = rec_of(i);
    OLT_CHECK(rec_eq(rec, &want));
    s->n++;
    /* into the same bucket, during the listing: a key after every listed one */
    struct ol_index_rec r = rec_of(9999);
    OLT_CHECK_EQ(ol_catalog_put(s->c, "bk1", "z-late", 6, &r), 0);
    return 0;
}

static int stop_at_3(void *arg, const uint8_t *name, size_t len, const struct ol_index_rec *rec)
{
    unsigned *n = arg;
    return ++*n == 3 ? -ECANCELED : 0;
}

OLT_TEST_T(store_listing_page_is_copied_out_and_formatted_after_the_lock, 60)
{
    char drive[512];
    one_drive(drive, sizeof drive);
    struct ol_catalog_info info;
    struct ol_catalog *c = cat_open(drive, &info);
    OLT_CHECK_EQ(info.buckets, 2);
    struct ol_catalog_page *page;
    OLT_CHECK_EQ(ol_catalog_page_create(&page), 0);
    for (unsigned i = 0; i < 1500; i++) {
        char k[32];
        int n = snprintf(k, sizeof k, "k%05u", i);
        struct ol_index_rec r = rec_of(i);
        OLT_CHECK_EQ(ol_catalog_put(c, "bk1", k, (size_t)n, &r), 0);
    }
    OLT_CHECK_EQ(ol_catalog_put(c, "bk1", "dir/a", 5, &(struct ol_index_rec){0}), 0);
    /* more than a page asked for: a page of OL_CATALOG_PAGE_MAX, truncated */
    struct seen s = {.c = c};
    struct ol_index_list_req req = {.max_keys = 5000, .delim = "/", .delim_len = 1};
    struct ol_index_list_out out;
    OLT_CHECK_EQ(ol_catalog_list(c, "bk1", &req, page, seen_entry, &s, &out), 0);
    OLT_CHECK_EQ(s.prefixes, 1);              /* "dir/" sorts first */
    OLT_CHECK_EQ(s.n, OL_CATALOG_PAGE_MAX - 1);
    OLT_CHECK_EQ(out.nkeys + out.nprefixes, OL_CATALOG_PAGE_MAX);
    OLT_CHECK(out.truncated);
    OLT_CHECK_EQ(out.next_len, 6);
    OLT_CHECK_MEM(out.next, "k00998", 6);
    struct ol_index_rec got;
    OLT_CHECK_EQ(ol_catalog_get(c, "bk1", "z-late", 6, &got), 0); /* the callback's write */
    /* the rest, from the next marker */
    memset(&s, 0, sizeof s);
    s.c = c;
    snprintf(s.last, sizeof s.last, "k00998");
    req.start = out.next;
    req.start_len = out.next_len;
    req.delim_len = 0;
    struct ol_index_list_out out2;
    OLT_CHECK_EQ(ol_catalog_list(c, "bk1", &req, page, seen_entry, &s, &out2), 0);
    OLT_CHECK_EQ(out2.nkeys, 1500 - 999 + 1);   /* k00999..k01499 and z-late */
    OLT_CHECK(!out2.truncated);
    /* a callback that stops: its value, and *out still has the whole page */
    unsigned calls = 0;
    req.start_len = 0;
    req.max_keys = 10;
    OLT_CHECK_EQ(ol_catalog_list(c, "bk1", &req, page, stop_at_3, &calls, &out), -ECANCELED);
    OLT_CHECK_EQ(calls, 3);
    OLT_CHECK_EQ(out.nkeys, 10);
    OLT_CHECK_EQ(ol_catalog_list(c, "nob", &req, page, stop_at_3, &calls, &out), -ENOENT);
    OLT_CHECK(!ol_catalog_dirty(c));
    ol_catalog_page_destroy(page);
    OLT_CHECK_EQ(ol_catalog_close(c), 0);
    OLT_CHECK(clean_marker(drive));
    /* a clean close is loaded, not rebuilt */
    c = cat_open(drive, &info);
    OLT_CHECK_EQ(info.rebuilt, 0);
    OLT_CHECK_EQ(info.keys, 1502);
    OLT_CHECK(!clean_marker(drive));          /* stale from now on */
    OLT_CHECK_EQ(ol_catalog_get(c, "bk1", "k01234", 6, &got), 0);
    struct ol_index_rec want = rec_of(1234);
    OLT_CHECK(rec_eq(&got, &want));
    OLT_CHECK_EQ(ol_catalog_close(c), 0);
}

OLT_TEST_T(store_listing_failed_update_makes_the_catalog_dirty, 60)
{
    char drive[512];
    one_drive(drive, sizeof drive);
    struct ol_catalog_info info;
    struct ol_catalog *c = cat_open(drive, &info);
    struct ol_index_rec r = rec_of(1);
    OLT_CHECK_EQ(ol_catalog_put(c, "bk1", "kept", 4, &r), 0);
    OLT_CHECK_EQ(ol_catalog_remove(c, "bk1", "never", 5), 0);   /* nothing to remove */
    OLT_CHECK_EQ(ol_catalog_remove(c, "nob", "k", 1), 0);
    OLT_CHECK(!ol_catalog_dirty(c));
    OLT_CHECK_EQ(ol_catalog_errors(c), 0);
    /* a commit into a bucket the table lacks, a key too long: both wrong */
    OLT_CHECK_EQ(ol_catalog_put(c, "nob", "k", 1, &r), -ENOENT);
    OLT_CHECK(ol_catalog_dirty(c));
    static char longkey[OL_INDEX_KEY_MAX + 1];
    memset(longkey, 'x', sizeof longkey);
    OLT_CHECK_EQ(ol_catalog_put(c, "bk1", longkey, sizeof longkey, &r), -EINVAL);
    OLT_CHECK_EQ(ol_catalog_errors(c), 2);
    /* it keeps serving */
    struct ol_index_rec got;
    OLT_CHECK_EQ(ol_catalog_get(c, "bk1", "kept", 4, &got), 0);
    /* its close saves nothing and writes no marker */
    OLT_CHECK_EQ(ol_catalog_close(c), -ESTALE);
    OLT_CHECK(!clean_marker(drive));
    c = cat_open(drive, &info);
    OLT_CHECK_EQ(info.rebuilt, 2);            /* from the (empty) object metadata */
    OLT_CHECK_EQ(info.keys, 0);
    OLT_CHECK(!ol_catalog_dirty(c));
    ol_catalog_set_dirty(c, "a test", 0);
    OLT_CHECK_EQ(ol_catalog_errors(c), 1);
    OLT_CHECK_EQ(ol_catalog_close(c), -ESTALE);
    OLT_CHECK(!clean_marker(drive));
}

/* ---- the engine keeps it ------------------------------------------------------------ */

/* The version a GET serves (scalars), or why there is none. */
struct seen_ver {
    int status;
    bool marker;
    struct ol_meta_version v;
};

static void head_cb(void *ud, const struct ol_store_event *ev)
{
    struct sh_call *t = ud;
    struct seen_ver *h = (struct seen_ver *)t->out;
    if (ev->version) {   /* EV_META, or EV_DONE OL_STORE_EDELMARK */
        h->v = *ev->version;
        h->v.parts = NULL;
        h->marker = ev->version->type == OL_META_DELETE_MARKER;
    }
    ol_get_end(t->get);
    sh_done(t, ev->type == OL_STORE_EV_META ? 0 : ev->status);
}

static void fn_head(struct sh_call *t)
{
    struct ol_get_args a = {.bucket = t->bucket, .key = t->key, .length = -1};
    int rc = ol_get_begin(sh_core(t), &a, head_cb, t, &t->get);
    if (rc < 0)
        sh_done(t, rc);
}

/* The catalog's record of b/k equals the latest version a GET finds (no
 * record when there is none). */
static void check_listed(struct sh_env *e, const char *b, const char *k)
{
    struct seen_ver h;
    memset(&h, 0, sizeof h);
    struct sh_call t;
    sh_call_init(&t, b, k, NULL, 0);
    t.out = (uint8_t *)&h;
    h.status = sh_call(e, &t, fn_head);
    struct ol_index_rec rec;
    int rc = ol_catalog_get(e->cat, b, k, strlen(k), &rec);
    if (h.status == -ENOENT) {
        if (rc != -ENOENT)
            olt_fail(__FILE__, __LINE__, "%s/%s: listed, GET finds none", b, k);
        return;
    }
    OLT_CHECK(h.status == 0 || h.status == OL_STORE_EDELMARK);
    if (rc != 0)
        olt_fail(__FILE__, __LINE__, "%s/%s: not listed, GET finds it (%d)", b, k, h.status);
    OLT_CHECK_EQ(!!(rec.flags & OL_INDEX_F_DELETE_MARKER), h.marker);
    OLT_CHECK_MEM(rec.version_id, h.v.vid, 16);
    OLT_CHECK_EQ(rec.mtime_ns, h.v.mtime_ns);
    if (!h.marker) {
        OLT_CHECK_EQ(rec.size, h.v.size);
        OLT_CHECK_MEM(rec.etag, h.v.etag, 16);
        OLT_CHECK_EQ(rec.etag_parts, h.v.etag_parts);
        OLT_CHECK_EQ(rec.storage_class, h.v.storage_class);
    }
}

static void check_flags(struct sh_env *e, const char *b, const char *k, uint8_t want)
{
    struct ol_index_rec rec;
    OLT_CHECK_EQ(ol_catalog_get(e->cat, b, k, strlen(k), &rec), 0);
    OLT_CHECK_EQ(rec.flags, want);
}

/* t->id: the version id; t->which 1: a delete marker; t->etag: the ETag. */
static void fill_ver(struct sh_call *t, struct ol_meta_version *v)
{
    memcpy(v->etag, t->etag, 16);
    memcpy(v->vid, t->id, 16);
    v->storage_class = (uint8_t)(t->size & 1);   /* both classes */
    if (t->which == 1)
        v->type = OL_META_DELETE_MARKER;
}

static void ignore_cb(void *ud, const struct ol_store_event *ev) { (void)ud, (void)ev; }

/* A PUT (t->part: an UploadPart of upload t->id) on t's core. t->readies
 * set: its caller ignores every event (as an S3 request whose client went
 * away): the call ends as soon as the PUT was handed over. */
static void fn_put(struct sh_call *t)
{
    bool ignore = t->readies;
    int rc;
    t->fill = fill_ver;
    if (t->part) {
        struct ol_mpu_part_args a = {.bucket = t->bucket, .key = t->key, .upload_id = t->id,
                                     .number = 1, .size = t->size};
        rc = ol_mpu_part_begin(sh_core(t), &a, sh_put_cb, t, &t->put);
    } else {
        struct ol_put_args a = {.bucket = t->bucket, .key = t->key, .size = t->size,
                                .parity = -1};
        rc = ol_put_begin(sh_core(t), &a, ignore ? ignore_cb : sh_put_cb, t, &t->put);
    }
    if (rc < 0)
        return sh_done(t, rc);
    if (!ignore)
        return sh_put_pump(t);
    OLT_CHECK(t->size <= OL_STORE_WRITE_MAX);
    OLT_CHECK(ol_put_write(t->put, t->data, t->size) >= 0);
    struct ol_meta_version v;
    memset(&v, 0, sizeof v);
    fill_ver(t, &v);
    OLT_CHECK_EQ(ol_put_finish(t->put, &v), 0);
    sh_done(t, 0);
}

/* A PUT of b/k, size bytes of data (seed picks the ETag), version vid
 * (NULL: null), on core `core`; marker: a delete marker. */
static int put_on(struct sh_env *e, unsigned core, const char *b, const char *k,
                  const uint8_t *data, uint64_t size, unsigned seed, const uint8_t *vid,
                  int marker, bool ignore)
{
    struct sh_call t;
    sh_call_init(&t, b, k, data, size);
    memset(t.etag, (int)seed, 16);
    t.etag[0] = (uint8_t)(seed >> 8);
    if (vid)
        memcpy(t.id, vid, 16);
    t.which = marker;
    t.readies = ignore;
    return sh_call_on(e, core, &t, fn_put);
}

static struct ol_delete_args g_da;

static void fn_vdel(struct sh_call *t)
{
    g_da = (struct ol_delete_args){.bucket = t->bucket, .key = t->key};
    memcpy(g_da.vid, t->id, 16);
    int rc = ol_delete_version(sh_core(t), &g_da, sh_simple_cb, t);
    if (rc < 0)
        sh_done(t, rc);
}

static int vdel(struct sh_env *e, const char *b, const char *k, const uint8_t vid[16])
{
    struct sh_call t;
    sh_call_init(&t, b, k, NULL, 0);
    memcpy(t.id, vid, 16);
    return sh_call(e, &t, fn_vdel);
}

static void fn_setver(struct sh_call *t)
{
    int rc = ol_store_versioning_set(sh_core(t), t->bucket, OL_STORE_VER_ENABLED, sh_simple_cb,
                                     t);
    if (rc < 0)
        sh_done(t, rc);
}

static void fn_mpu(struct sh_call *t)
{
    int rc = t->which == 0 ? ol_mpu_create(sh_core(t), &t->ca, sh_simple_cb, t)
                           : ol_mpu_complete(sh_core(t), &t->cpa, sh_simple_cb, t);
    if (rc < 0)
        sh_done(t, rc);
}

/* CreateMultipartUpload, one part of data[0..size) (ETag seed), Complete. */
static int multipart(struct sh_env *e, const char *b, const char *k, const uint8_t *data,
                     uint64_t size, unsigned seed)
{
    struct sh_call t;
    memset(&t, 0, sizeof t);
    struct ol_meta_version tmpl;
    memset(&tmpl, 0, sizeof tmpl);
    tmpl.storage_class = OL_META_SC_REDUCED_REDUNDANCY;
    t.ca = (struct ol_mpu_create_args){.bucket = b, .key = k, .parity = -1, .v = &tmpl};
    int rc = sh_call(e, &t, fn_mpu);
    if (rc < 0)
        return rc;
    uint8_t id[16];
    memcpy(id, t.ca.upload_id, 16);
    sh_call_init(&t, b, k, data, size);
    t.part = true;
    memcpy(t.id, id, 16);
    memset(t.etag, (int)seed, 16);
    if ((rc = sh_call(e, &t, fn_put)) < 0)
        return rc;
    struct ol_meta_part part = {.number = 1};
    memcpy(part.etag, t.etag, 16);
    memset(&t, 0, sizeof t);
    t.which = 1;
    t.cpa = (struct ol_mpu_complete_args){.bucket = b, .key = k, .upload_id = id,
                                          .parts = &part, .nparts = 1};
    return sh_call(e, &t, fn_mpu);
}

static bool bucket_listed(struct sh_env *e, const char *b)
{
    static struct ol_catalog_bucket v[OL_CATALOG_MAX_BUCKETS];
    unsigned n = ol_catalog_buckets(e->cat, v, OL_CATALOG_MAX_BUCKETS);
    for (unsigned i = 0; i < n; i++)
        if (strcmp(v[i].name, b) == 0)
            return true;
    return false;
}

static void vid_of(uint8_t vid[16], unsigned n)
{
    memset(vid, 0, 16);
    vid[0] = (uint8_t)n;
    vid[15] = 0x5a;
}

OLT_TEST_T(store_listing_engine_keeps_it_at_each_commit, 120)
{
    struct sh_env e;
    sh_env_open_listing(&e, 4, 4, 8192, false);   /* one set, 2 + 2 */
    OLT_CHECK(!bucket_listed(&e, "lbk"));
    OLT_CHECK_EQ(sh_bucket_create(&e, "lbk"), 0);
    OLT_CHECK(bucket_listed(&e, "lbk"));
    uint8_t *small = sh_pattern(100, 1), *big = sh_pattern(300000, 2);
    /* a PUT whose caller ignores the answer lands all the same */
    OLT_CHECK_EQ(put_on(&e, 0, "lbk", "gone", small, 100, 7, NULL, 0, true), 0);
    sh_settle(&e);
    check_listed(&e, "lbk", "gone");
    check_flags(&e, "lbk", "gone", 0);   /* never versioned: one null version */
    OLT_CHECK_EQ(put_on(&e, 0, "lbk", "big", big, 300000, 8, NULL, 0, false), 0);
    check_listed(&e, "lbk", "big");
    OLT_CHECK_EQ(put_on(&e, 0, "lbk", "big", small, 99, 9, NULL, 0, false), 0);  /* replaced */
    check_listed(&e, "lbk", "big");
    OLT_CHECK_EQ(multipart(&e, "lbk", "mp", big, 300000, 10), 0);
    check_listed(&e, "lbk", "mp");
    struct ol_index_rec rec;
    OLT_CHECK_EQ(ol_catalog_get(e.cat, "lbk", "mp", 2, &rec), 0);
    OLT_CHECK_EQ(rec.etag_parts, 1);
    OLT_CHECK_EQ(rec.storage_class, OL_META_SC_REDUCED_REDUNDANCY);
    OLT_CHECK_EQ(sh_del(&e, "lbk", "gone"), 0);
    check_listed(&e, "lbk", "gone");      /* removed */
    OLT_CHECK_EQ(sh_del(&e, "lbk", "never"), 0);
    check_listed(&e, "lbk", "never");
    OLT_CHECK(!ol_catalog_dirty(e.cat));
    /* a clean restart loads what the engine kept */
    sh_env_stop(&e, false);
    OLT_CHECK_EQ(e.cat_rc, 0);
    sh_env_start(&e);
    OLT_CHECK_EQ(e.cat_info.rebuilt, 0);
    OLT_CHECK_EQ(e.cat_info.keys, 2);
    check_listed(&e, "lbk", "big");
    check_listed(&e, "lbk", "mp");
    check_listed(&e, "lbk", "gone");
    /* a bucket deleted leaves the catalog */
    OLT_CHECK_EQ(sh_del(&e, "lbk", "big"), 0);
    OLT_CHECK_EQ(sh_del(&e, "lbk", "mp"), 0);
    OLT_CHECK_EQ(sh_bucket_delete(&e, "lbk"), 0);
    OLT_CHECK(!bucket_listed(&e, "lbk"));
    struct ol_catalog_page *page;
    OLT_CHECK_EQ(ol_catalog_page_create(&page), 0);
    struct ol_index_list_req req = {.max_keys = 10};
    struct ol_index_list_out out;
    OLT_CHECK_EQ(ol_catalog_list(e.cat, "lbk", &req, page, NULL, NULL, &out), -ENOENT);
    ol_catalog_page_destroy(page);
    free(small);
    free(big);
    sh_env_stop(&e, false);
    OLT_CHECK_EQ(e.cat_rc, 0);
}

OLT_TEST_T(store_listing_versions_markers_and_version_deletes, 120)
{
    struct sh_env e;
    sh_env_open_listing(&e, 4, 4, 8192, false);
    OLT_CHECK_EQ(sh_bucket_create(&e, "vlb"), 0);
    uint8_t *d = sh_pattern(200000, 3);
    /* a null version before versioning: no VERSIONS flag */
    OLT_CHECK_EQ(put_on(&e, 0, "vlb", "k", d, 50, 1, NULL, 0, false), 0);
    check_flags(&e, "vlb", "k", 0);
    struct sh_call t;
    memset(&t, 0, sizeof t);
    t.bucket = "vlb";
    OLT_CHECK_EQ(sh_call(&e, &t, fn_setver), 0);
    uint8_t v1[16], v2[16], m[16], z[16] = {0};
    vid_of(v1, 1);
    vid_of(v2, 2);
    vid_of(m, 3);
    OLT_CHECK_EQ(put_on(&e, 0, "vlb", "k", d, 200000, 2, v1, 0, false), 0);
    check_listed(&e, "vlb", "k");
    check_flags(&e, "vlb", "k", OL_INDEX_F_VERSIONS);
    OLT_CHECK_EQ(put_on(&e, 0, "vlb", "k", d, 70, 3, v2, 0, false), 0);
    check_listed(&e, "vlb", "k");
    /* a delete marker becomes the latest, flagged */
    OLT_CHECK_EQ(put_on(&e, 0, "vlb", "k", NULL, 0, 0, m, 1, false), 0);
    check_listed(&e, "vlb", "k");
    check_flags(&e, "vlb", "k", OL_INDEX_F_DELETE_MARKER | OL_INDEX_F_VERSIONS);
    /* removing versions: the new latest each time */
    OLT_CHECK_EQ(vdel(&e, "vlb", "k", m), 0);
    OLT_CHECK(g_da.found && g_da.was_marker);
    check_listed(&e, "vlb", "k");                 /* v2 again */
    OLT_CHECK_EQ(vdel(&e, "vlb", "k", v1), 0);    /* not the latest: v2 stays */
    check_listed(&e, "vlb", "k");
    OLT_CHECK_EQ(vdel(&e, "vlb", "k", v2), 0);
    check_listed(&e, "vlb", "k");                 /* the null version from before */
    check_flags(&e, "vlb", "k", OL_INDEX_F_VERSIONS);
    uint8_t nope[16];
    vid_of(nope, 9);
    OLT_CHECK_EQ(vdel(&e, "vlb", "k", nope), 0);  /* no such version: nothing changes */
    OLT_CHECK(!g_da.found);
    check_listed(&e, "vlb", "k");
    OLT_CHECK_EQ(vdel(&e, "vlb", "k", z), 0);     /* the last one: the key goes */
    check_listed(&e, "vlb", "k");
    OLT_CHECK_EQ(ol_catalog_get(e.cat, "vlb", "k", 1, &(struct ol_index_rec){0}), -ENOENT);
    /* a marker alone (DeleteObject on a key never written) */
    OLT_CHECK_EQ(put_on(&e, 0, "vlb", "only-marker", NULL, 0, 0, m, 1, false), 0);
    check_listed(&e, "vlb", "only-marker");
    OLT_CHECK(!ol_catalog_dirty(e.cat));
    /* as the rebuild sees it after a crash: the same records */
    sh_env_stop(&e, true);
    sh_env_start(&e);
    OLT_CHECK(e.cat_info.rebuilt >= 1);
    check_listed(&e, "vlb", "only-marker");
    free(d);
    sh_env_stop(&e, false);
}

/* Two threads, each PUTting one key on its own core, released together. */
#define RACE_ROUNDS 40
static pthread_barrier_t g_bar;
static struct sh_env *g_env;
static uint8_t *g_race_data;

static void *racer(void *arg)
{
    unsigned core = (unsigned)(uintptr_t)arg;
    for (unsigned i = 0; i < RACE_ROUNDS; i++) {
        pthread_barrier_wait(&g_bar);
        /* sizes on both sides of the inline limit; a distinct ETag each */
        uint64_t size = (i + core) % 3 == 0 ? 150000 + core : 1000 + 10 * i + core;
        OLT_CHECK_EQ(put_on(g_env, core, "race", "r", g_race_data, size, 2 * i + core + 1, NULL,
                            0, false), 0);
        pthread_barrier_wait(&g_bar);   /* the main thread checks */
        pthread_barrier_wait(&g_bar);
    }
    return NULL;
}

OLT_TEST_T(store_listing_two_cores_racing_one_key_agree_with_get, 180)
{
    struct sh_env e;
    sh_env_open_listing(&e, 4, 4, 8192, true);
    g_env = &e;
    g_race_data = sh_pattern(160000, 5);
    OLT_CHECK_EQ(sh_bucket_create(&e, "race"), 0);
    pthread_barrier_init(&g_bar, NULL, 3);
    pthread_t th[2];
    for (uintptr_t i = 0; i < 2; i++)
        OLT_CHECK_EQ(pthread_create(&th[i], NULL, racer, (void *)i), 0);
    for (unsigned i = 0; i < RACE_ROUNDS; i++) {
        pthread_barrier_wait(&g_bar);   /* go */
        pthread_barrier_wait(&g_bar);   /* both answered */
        check_listed(&e, "race", "r");
        pthread_barrier_wait(&g_bar);
    }
    for (unsigned i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&g_bar);
    OLT_CHECK(!ol_catalog_dirty(e.cat));
    free(g_race_data);
    sh_env_stop(&e, false);
    OLT_CHECK_EQ(e.cat_rc, 0);
}

/* Stops the loop under a PUT's commit, at its first rename of metadata. */
static atomic_bool g_stopped;

static void stop_at_rename(int dfd)
{
    (void)dfd;
    if (!atomic_exchange(&g_stopped, true))
        ol_loop_stop(g_env->loop);
}

OLT_TEST_T(store_listing_core_stopped_under_a_commit_makes_it_dirty, 120)
{
    sh_local_only("drops a core with steps in flight: another node's steps would answer a loop gone");
    struct sh_env e;
    sh_env_open_listing(&e, 4, 4, 8192, false);
    g_env = &e;
    OLT_CHECK_EQ(sh_bucket_create(&e, "drop"), 0);
    uint8_t *d = sh_pattern(100, 6);
    OLT_CHECK_EQ(put_on(&e, 0, "drop", "k", d, 100, 1, NULL, 0, false), 0);
    ol_se_renamed_hook = stop_at_rename;
    OLT_CHECK_EQ(put_on(&e, 0, "drop", "k", d, 60, 2, NULL, 0, true), 0);
    for (int i = 0; i < 1000 && !atomic_load(&g_stopped); i++)
        usleep(1000);
    ol_se_renamed_hook = NULL;
    OLT_CHECK(atomic_load(&g_stopped));
    sh_env_stop(&e, true);            /* the PUT is dropped holding its lock */
    OLT_CHECK_EQ(e.cat_rc, -ESTALE);  /* dirty: nothing saved, no marker */
    sh_env_start(&e);
    OLT_CHECK_EQ(e.cat_info.rebuilt, 1);
    check_listed(&e, "drop", "k");    /* whichever version GET serves */
    free(d);
    sh_env_stop(&e, false);
    OLT_CHECK_EQ(e.cat_rc, 0);
}
