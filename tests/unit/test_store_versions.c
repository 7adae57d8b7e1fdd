/*
 * test_store_versions.c - versions in the object engine (engine.h,
 * "versions and conditional writes") on a real loop with temporary
 * directories as drives: versioned PUTs keep every version, a null PUT
 * replaces the null version (and its data dir), delete markers and
 * OL_STORE_EDELMARK, GET by version id, DELETE of one version (and of the
 * last one), If-None-Match / If-Match decided at the commit, the commit
 * lock (racing writes of one key: no version lost, one conditional
 * winner), the bucket versioning file across re-opens and damaged copies,
 * the version cap of the metadata file (a clear -EFBIG), and tag sets
 * rewritten on one version in place (ol_set_tagging).
 */
#include "olt.h"
#include "store_harness.h"

#include "base/le.h"
#include "store/engine.h"
#include "store/format.h"
#include "store/meta.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

/* t->id: the version id; t->which: 1 = a delete marker; t->number: the
 * condition kind, t->etag / t->etag_parts its ETag. */
static void fill_ver(struct sh_call *t, struct ol_meta_version *v)
{
    for (unsigned i = 0; i < 16; i++)
        v->etag[i] = (uint8_t)(t->size * 7 + i + t->id[0]);
    memcpy(v->vid, t->id, 16);
    if (t->which == 1)
        v->type = OL_META_DELETE_MARKER;
}

static void fn_vput(struct sh_call *t)
{
    struct ol_put_args a = {.bucket = t->bucket, .key = t->key, .size = t->size, .parity = -1};
    a.cond.kind = (uint8_t)t->number;
    memcpy(a.cond.etag, t->etag, 16);
    a.cond.etag_parts = t->etag_parts;
    t->fill = fill_ver;
    int rc = ol_put_begin(t->e->c, &a, sh_put_cb, t, &t->put);
    if (rc < 0)
        return sh_done(t, rc);
    sh_put_pump(t);
}

static void vid_of(uint8_t vid[16], unsigned n)
{
    memset(vid, 0, 16);
    vid[0] = (uint8_t)n;
    vid[15] = 0xa5;
}

/* PUT of size bytes of data as version vid (NULL: null), with a condition. */
static int vput(struct sh_env *e, const char *k, const uint8_t *data, uint64_t size,
                const uint8_t *vid, unsigned cond, const uint8_t *cetag)
{
    struct sh_call t;
    memset(&t, 0, sizeof t);
    t.bucket = "vbk";
    t.key = k;
    t.data = data;
    t.size = t.stop = size;
    t.chunk = OL_STORE_WRITE_MAX;
    if (vid)
        memcpy(t.id, vid, 16);
    t.number = cond;
    if (cetag)
        memcpy(t.etag, cetag, 16);
    return sh_call(e, &t, fn_vput);
}

static int vmark(struct sh_env *e, const char *k, const uint8_t *vid)
{
    struct sh_call t;
    memset(&t, 0, sizeof t);
    t.bucket = "vbk";
    t.key = k;
    t.which = 1;
    t.chunk = 1;
    if (vid)
        memcpy(t.id, vid, 16);
    return sh_call(e, &t, fn_vput);
}

/* GET by version id: EDELMARK's marker id into t->id. */
static void vget_cb(void *ud, const struct ol_store_event *ev)
{
    struct sh_call *t = ud;
    if (ev->type == OL_STORE_EV_DONE && ev->status == OL_STORE_EDELMARK) {
        memcpy(t->id, ev->version->vid, 16);
        t->meta = ev->version->type == OL_META_DELETE_MARKER;
    }
    sh_get_cb(ud, ev);
}

static void fn_vget(struct sh_call *t)
{
    struct ol_get_args a = {.bucket = t->bucket, .key = t->key, .length = -1,
                            .vid = t->which ? t->id : NULL};
    int rc = ol_get_begin(t->e->c, &a, vget_cb, t, &t->get);
    if (rc < 0)
        sh_done(t, rc);
}

static int vget(struct sh_env *e, const char *k, const uint8_t *vid, uint8_t *out, uint64_t cap,
                struct sh_call *res)
{
    memset(res, 0, sizeof *res);
    res->bucket = "vbk";
    res->key = k;
    res->out = out;
    res->cap = cap;
    res->len = -1;
    if (vid) {
        res->which = 1;
        memcpy(res->id, vid, 16);
    }
    return sh_call(e, res, fn_vget);
}

static struct ol_delete_args g_da;

static void fn_vdel(struct sh_call *t)
{
    g_da.bucket = t->bucket;
    g_da.key = t->key;
    memcpy(g_da.vid, t->id, 16);
    int rc = ol_delete_version(t->e->c, &g_da, sh_simple_cb, t);
    if (rc < 0)
        sh_done(t, rc);
}

static int vdel(struct sh_env *e, const char *k, const uint8_t *vid)
{
    struct sh_call t;
    memset(&t, 0, sizeof t);
    t.bucket = "vbk";
    t.key = k;
    memcpy(t.id, vid, 16);
    return sh_call(e, &t, fn_vdel);
}

/* Versions in drive i's metadata file of k (0 without a file). */
static unsigned versions_on(const struct sh_env *e, unsigned i, const char *k)
{
    static uint8_t buf[OL_META_MAX_FILE];
    char dir[700], p[760];
    sh_obj_dir(e, i, "vbk", k, dir, sizeof dir);
    snprintf(p, sizeof p, "%s/meta", dir);
    int fd = open(p, O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    struct ol_meta_file f;
    OLT_CHECK(n > 0 && ol_meta_open(buf, (size_t)n, &f) == 0);
    return f.count;
}

/* Entries of the object directory on drive i (meta + data dirs), -1 without it. */
static int obj_entries(const struct sh_env *e, unsigned i, const char *k)
{
    char dir[700];
    sh_obj_dir(e, i, "vbk", k, dir, sizeof dir);
    return sh_count_entries(dir);
}

static void env(struct sh_env *e)
{
    sh_env_open(e, 4, 4, 8192, 0);   /* one set, 2 + 2 */
    OLT_CHECK_EQ(sh_bucket_create(e, "vbk"), 0);
}

OLT_TEST_T(store_versions_put_get_and_null_replacement, 120)
{
    struct sh_env e;
    env(&e);
    uint64_t big = 300000, small = 100;
    uint8_t *d1 = sh_pattern(big, 1), *d2 = sh_pattern(small, 2), *d3 = sh_pattern(big, 3);
    uint8_t *d4 = sh_pattern(small, 4), *out = malloc(big + 1);
    uint8_t a[16], b[16], z[16] = {0};
    vid_of(a, 1);
    vid_of(b, 2);
    OLT_CHECK_EQ(vput(&e, "k", d1, big, a, 0, NULL), 0);
    OLT_CHECK_EQ(vput(&e, "k", d2, small, b, 0, NULL), 0);
    struct sh_call r;
    OLT_CHECK_EQ(vget(&e, "k", NULL, out, big + 1, &r), 0);
    OLT_CHECK_EQ(r.got, small);
    OLT_CHECK_MEM(out, d2, small);
    OLT_CHECK_EQ(vget(&e, "k", a, out, big + 1, &r), 0);
    OLT_CHECK_EQ(r.got, big);
    OLT_CHECK_MEM(out, d1, big);
    OLT_CHECK_EQ(vget(&e, "k", z, out, big + 1, &r), -ENOENT);   /* no null version yet */
    for (unsigned i = 0; i < e.n; i++)
        OLT_CHECK_EQ(versions_on(&e, i, "k"), 2u);
    /* a null version (big: a data dir), then another replacing it */
    OLT_CHECK_EQ(vput(&e, "k", d3, big, NULL, 0, NULL), 0);
    OLT_CHECK_EQ(obj_entries(&e, 0, "k"), 3);   /* meta, a's and the null's data dirs */
    OLT_CHECK_EQ(vput(&e, "k", d4, small, NULL, 0, NULL), 0);
    sh_settle(&e);
    for (unsigned i = 0; i < e.n; i++) {
        OLT_CHECK_EQ(versions_on(&e, i, "k"), 3u);
        OLT_CHECK_EQ(obj_entries(&e, i, "k"), 2);   /* the replaced null's data dir went */
    }
    OLT_CHECK_EQ(vget(&e, "k", z, out, big + 1, &r), 0);
    OLT_CHECK_MEM(out, d4, small);
    OLT_CHECK_EQ(vget(&e, "k", a, out, big + 1, &r), 0);
    OLT_CHECK_MEM(out, d1, big);
    sh_check_tmp_empty(&e);
    free(d1), free(d2), free(d3), free(d4), free(out);
    sh_env_stop(&e, false);
}

OLT_TEST_T(store_versions_delete_markers_and_version_deletes, 120)
{
    struct sh_env e;
    env(&e);
    uint64_t big = 200000;
    uint8_t *d1 = sh_pattern(big, 5), *out = malloc(big + 1);
    uint8_t a[16], m[16];
    vid_of(a, 1);
    vid_of(m, 9);
    OLT_CHECK_EQ(vput(&e, "k", d1, big, a, 0, NULL), 0);
    OLT_CHECK_EQ(vmark(&e, "k", m), 0);
    struct sh_call r;
    OLT_CHECK_EQ(vget(&e, "k", NULL, out, big + 1, &r), OL_STORE_EDELMARK);
    OLT_CHECK(r.meta);
    OLT_CHECK_MEM(r.id, m, 16);
    OLT_CHECK_EQ(vget(&e, "k", m, out, big + 1, &r), OL_STORE_EDELMARK);
    OLT_CHECK_EQ(vget(&e, "k", a, out, big + 1, &r), 0);
    OLT_CHECK_MEM(out, d1, big);
    /* a version that is not there: found false, nothing changes */
    uint8_t x[16];
    vid_of(x, 77);
    OLT_CHECK_EQ(vdel(&e, "k", x), 0);
    OLT_CHECK(!g_da.found);
    /* the marker goes: the object is back */
    OLT_CHECK_EQ(vdel(&e, "k", m), 0);
    OLT_CHECK(g_da.found && g_da.was_marker);
    OLT_CHECK_EQ(g_da.latest, OL_META_OBJECT);
    OLT_CHECK_MEM(g_da.lv.vid, a, 16);
    OLT_CHECK_EQ(g_da.lv.size, big);
    OLT_CHECK_EQ(vget(&e, "k", NULL, out, big + 1, &r), 0);
    OLT_CHECK_MEM(out, d1, big);
    /* the last version goes: the object directory too */
    OLT_CHECK_EQ(vdel(&e, "k", a), 0);
    OLT_CHECK(g_da.found && !g_da.was_marker);
    OLT_CHECK_EQ(g_da.latest, 0);
    for (unsigned i = 0; i < e.n; i++)
        OLT_CHECK_EQ(obj_entries(&e, i, "k"), -1);
    OLT_CHECK_EQ(vget(&e, "k", NULL, out, big + 1, &r), -ENOENT);
    /* a marker on a key that never existed, then on top of the null version */
    OLT_CHECK_EQ(vmark(&e, "fresh", m), 0);
    OLT_CHECK_EQ(vget(&e, "fresh", NULL, out, big + 1, &r), OL_STORE_EDELMARK);
    OLT_CHECK_EQ(vput(&e, "n", d1, big, NULL, 0, NULL), 0);
    OLT_CHECK_EQ(vmark(&e, "n", NULL), 0);       /* Suspended: the null marker replaces it */
    sh_settle(&e);
    for (unsigned i = 0; i < e.n; i++) {
        OLT_CHECK_EQ(versions_on(&e, i, "n"), 1u);
        OLT_CHECK_EQ(obj_entries(&e, i, "n"), 1);   /* meta only: the data dir went */
    }
    sh_check_tmp_empty(&e);
    free(d1), free(out);
    sh_env_stop(&e, false);
}

OLT_TEST_T(store_versions_conditional_writes, 120)
{
    struct sh_env e;
    env(&e);
    uint64_t big = 150000;
    uint8_t *d1 = sh_pattern(big, 7), *out = malloc(big + 1);
    OLT_CHECK_EQ(vput(&e, "c", d1, 10, NULL, OL_STORE_COND_ABSENT, NULL), 0);
    int fds = sh_count_fds();
    struct sh_call r;
    OLT_CHECK_EQ(vget(&e, "c", NULL, out, big + 1, &r), 0);
    uint8_t etag[16];
    memcpy(etag, r.etag, 16);
    /* exists: 412, for an inline body and for one with a data dir */
    OLT_CHECK_EQ(vput(&e, "c", d1, 20, NULL, OL_STORE_COND_ABSENT, NULL), OL_STORE_EPRECOND);
    OLT_CHECK_EQ(vput(&e, "c", d1, big, NULL, OL_STORE_COND_ABSENT, NULL), OL_STORE_EPRECOND);
    uint8_t wrong[16];
    memcpy(wrong, etag, 16);
    wrong[3] ^= 1;
    OLT_CHECK_EQ(vput(&e, "c", d1, big, NULL, OL_STORE_COND_MATCH, wrong), OL_STORE_EPRECOND);
    OLT_CHECK_EQ(vput(&e, "none", d1, 5, NULL, OL_STORE_COND_MATCH, etag), -ENOENT);
    OLT_CHECK_EQ(vget(&e, "none", NULL, out, big + 1, &r), -ENOENT);
    OLT_CHECK_EQ(vget(&e, "c", NULL, out, big + 1, &r), 0);
    OLT_CHECK_EQ(r.got, 10u);                   /* unchanged by the refused writes */
    sh_settle(&e);
    for (unsigned i = 0; i < e.n; i++)
        OLT_CHECK_EQ(obj_entries(&e, i, "c"), 1); /* no data dir left by them */
    OLT_CHECK_EQ(sh_count_fds(), fds); /* nor an open file: refused with their data open */
    OLT_CHECK_EQ(vput(&e, "c", d1, big, NULL, OL_STORE_COND_MATCH, etag), 0);
    OLT_CHECK_EQ(vget(&e, "c", NULL, out, big + 1, &r), 0);
    OLT_CHECK_EQ(r.got, big);
    /* a delete marker is no object */
    uint8_t m[16];
    vid_of(m, 3);
    OLT_CHECK_EQ(vmark(&e, "c", m), 0);
    OLT_CHECK_EQ(vput(&e, "c", d1, 5, NULL, OL_STORE_COND_MATCH, r.etag), -ENOENT);
    OLT_CHECK_EQ(vput(&e, "c", d1, 5, NULL, OL_STORE_COND_ABSENT, NULL), 0);
    sh_check_tmp_empty(&e);
    free(d1), free(out);
    sh_env_stop(&e, false);
}

/* Several writes of one key started in one loop turn. */
#define NRACE 6
static struct sh_call g_sub[NRACE];
static uint8_t *g_data;

static void fn_race(struct sh_call *t)
{
    t->remaining = NRACE;
    for (unsigned i = 0; i < NRACE; i++) {
        struct sh_call *u = &g_sub[i];
        memset(u, 0, sizeof *u);
        u->e = t->e;
        u->parent = t;
        u->bucket = "vbk";
        u->key = "r";
        u->data = g_data;
        u->size = u->stop = 70000 + i;   /* a data dir each */
        u->chunk = OL_STORE_WRITE_MAX;
        u->number = (unsigned)t->which;  /* the condition */
        vid_of(u->id, 10 + i + (t->which ? 0 : 100));
        fn_vput(u);
    }
}

OLT_TEST_T(store_versions_commit_lock_orders_racing_writes, 120)
{
    struct sh_env e;
    env(&e);
    g_data = sh_pattern(80000, 9);
    struct sh_call t;
    memset(&t, 0, sizeof t);
    t.which = OL_STORE_COND_ABSENT;
    OLT_CHECK_EQ(sh_call(&e, &t, fn_race), 0);
    unsigned wins = 0;
    for (unsigned i = 0; i < NRACE; i++) {
        int st = g_sub[i].status;
        OLT_CHECK(st == 0 || st == OL_STORE_ECONFLICT || st == OL_STORE_EPRECOND);
        wins += st == 0;
    }
    OLT_CHECK_EQ(wins, 1u);
    sh_settle(&e);
    OLT_CHECK_EQ(versions_on(&e, 0, "r"), 1u);
    /* unconditional versioned writes wait for each other: none is lost */
    memset(&t, 0, sizeof t);
    OLT_CHECK_EQ(sh_call(&e, &t, fn_race), 0);
    for (unsigned i = 0; i < NRACE; i++)
        OLT_CHECK_EQ(g_sub[i].status, 0);
    sh_settle(&e);
    for (unsigned i = 0; i < e.n; i++)
        OLT_CHECK_EQ(versions_on(&e, i, "r"), 1u + NRACE);
    sh_check_tmp_empty(&e);
    free(g_data);
    sh_env_stop(&e, false);
}

static void fn_setver(struct sh_call *t)
{
    int rc = ol_store_versioning_set(t->e->c, t->bucket, (enum ol_store_versioning)t->which,
                                     sh_simple_cb, t);
    if (rc < 0)
        sh_done(t, rc);
}

static int setver(struct sh_env *e, const char *b, int state)
{
    struct sh_call t;
    memset(&t, 0, sizeof t);
    t.bucket = b;
    t.which = state;
    return sh_call(e, &t, fn_setver);
}

OLT_TEST_T(store_versions_bucket_versioning_file, 120)
{
    struct sh_env e;
    env(&e);
    OLT_CHECK_EQ(ol_store_versioning_get(e.s, "vbk"), OL_STORE_VER_OFF);
    OLT_CHECK_EQ(setver(&e, "vbk", OL_STORE_VER_ENABLED), 0);
    OLT_CHECK_EQ(ol_store_versioning_get(e.s, "vbk"), OL_STORE_VER_ENABLED);
    OLT_CHECK_EQ(setver(&e, "nob", OL_STORE_VER_ENABLED), OL_STORE_ENOBUCKET);
    OLT_CHECK_EQ(setver(&e, "vbk", 7), -EINVAL);
    sh_env_stop(&e, false);
    sh_env_start(&e);
    OLT_CHECK_EQ(ol_store_versioning_get(e.s, "vbk"), OL_STORE_VER_ENABLED);
    OLT_CHECK_EQ(setver(&e, "vbk", OL_STORE_VER_SUSPENDED), 0);
    /* every drive holds the 24-byte file; damage two copies */
    char p[700];
    for (unsigned i = 0; i < e.n; i++) {
        snprintf(p, sizeof p, "%s/.openlake/buckets/vbk/versioning", e.path[i]);
        int fd = open(p, O_RDWR);
        OLT_CHECK(fd >= 0);
        uint8_t b[32];
        OLT_CHECK_EQ(read(fd, b, sizeof b), 24);
        OLT_CHECK_MEM(b, "OLBV", 4);
        OLT_CHECK_EQ(b[6], OL_STORE_VER_SUSPENDED);
        OLT_CHECK_EQ(ol_le_ld64(b + 16), XXH3_64bits(b, 16));
        if (i == 0) {       /* a flipped bit */
            b[6] ^= 3;
            OLT_CHECK_EQ(pwrite(fd, b, 24, 0), 24);
        } else if (i == 1) { /* an intact file of a later format, newer: ignored */
            ol_le_st16(b + 4, 2);
            b[6] = OL_STORE_VER_ENABLED;
            ol_le_st64(b + 8, ol_le_ld64(b + 8) + 1000000000ull);
            ol_le_st64(b + 16, XXH3_64bits(b, 16));
            OLT_CHECK_EQ(pwrite(fd, b, 24, 0), 24);
        }
        close(fd);
    }
    sh_env_stop(&e, false);
    sh_env_start(&e);
    OLT_CHECK_EQ(ol_store_versioning_get(e.s, "vbk"), OL_STORE_VER_SUSPENDED);
    /* the bucket goes with its file; a new one of the name is never versioned */
    OLT_CHECK_EQ(sh_bucket_delete(&e, "vbk"), 0);
    OLT_CHECK_EQ(ol_store_versioning_get(e.s, "vbk"), OL_STORE_VER_OFF);
    OLT_CHECK_EQ(sh_bucket_create(&e, "vbk"), 0);
    OLT_CHECK_EQ(ol_store_versioning_get(e.s, "vbk"), OL_STORE_VER_OFF);
    sh_check_tmp_empty(&e);
    sh_env_stop(&e, false);
}

OLT_TEST_T(store_versions_metadata_cap_is_efbig, 300)
{
    /* Inline versions of 8 KiB on k = 2: ~4 KiB of each drive's metadata file
     * per version; the file stops at the store's metadata buffer (meta_cap,
     * ~900 KB), well before OL_META_MAX_FILE: a clear -EFBIG, nothing lost. */
    struct sh_env e;
    env(&e);
    uint8_t *d = sh_pattern(8192, 11);
    unsigned n = 0;
    int rc = 0;
    uint8_t v[16];
    while (n < 1000) {
        vid_of(v, 0);
        ol_le_st32(v + 4, n + 1);
        rc = vput(&e, "cap", d, 8192, v, 0, NULL);
        if (rc < 0)
            break;
        n++;
    }
    OLT_CHECK_EQ(rc, -EFBIG);
    OLT_CHECK(n > 100);
    for (unsigned i = 0; i < e.n; i++)
        OLT_CHECK_EQ(versions_on(&e, i, "cap"), n);
    struct sh_call r;
    uint8_t *out = malloc(8193);
    OLT_CHECK_EQ(vget(&e, "cap", NULL, out, 8193, &r), 0);
    OLT_CHECK_MEM(out, d, 8192);
    /* removing one version makes room again */
    vid_of(v, 0);
    ol_le_st32(v + 4, 1);
    OLT_CHECK_EQ(vdel(&e, "cap", v), 0);
    OLT_CHECK(g_da.found);
    vid_of(v, 0);
    ol_le_st32(v + 4, 5000);
    OLT_CHECK_EQ(vput(&e, "cap", d, 8192, v, 0, NULL), 0);
    sh_check_tmp_empty(&e);
    free(d), free(out);
    sh_env_stop(&e, false);
}

/* ---- tag sets (ol_set_tagging) ---------------------------------------------------- */

static struct ol_tagging_args g_ta;

static void fn_vtag(struct sh_call *t)
{
    g_ta.bucket = t->bucket;
    g_ta.key = t->key;
    memcpy(g_ta.vid, t->id, 16);
    g_ta.tagging = t->data;
    g_ta.tagging_len = (uint32_t)t->size;
    int rc = ol_set_tagging(t->e->c, &g_ta, sh_simple_cb, t);
    if (rc < 0)
        sh_done(t, rc);
}

static int vtag(struct sh_env *e, const char *k, const uint8_t *vid, const char *tags)
{
    struct sh_call t;
    memset(&t, 0, sizeof t);
    t.bucket = "vbk";
    t.key = k;
    if (vid)
        memcpy(t.id, vid, 16);
    t.data = (const uint8_t *)tags;
    t.size = strlen(tags);
    return sh_call(e, &t, fn_vtag);
}

/* The tag set of version vid of k on drive i, into out (NUL-terminated). */
static void tags_on(const struct sh_env *e, unsigned i, const char *k, const uint8_t *vid,
                    char *out, size_t cap)
{
    static uint8_t buf[OL_META_MAX_FILE];
    char dir[700], p[760];
    sh_obj_dir(e, i, "vbk", k, dir, sizeof dir);
    snprintf(p, sizeof p, "%s/meta", dir);
    int fd = open(p, O_RDONLY);
    OLT_CHECK(fd >= 0);
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    struct ol_meta_file f;
    struct ol_meta_version v;
    uint8_t null_vid[16] = {0};
    OLT_CHECK(n > 0 && ol_meta_open(buf, (size_t)n, &f) == 0);
    OLT_CHECK(ol_meta_find(&f, vid ? vid : null_vid, &v) >= 0);
    OLT_CHECK(v.tagging.len < cap);
    memcpy(out, v.tagging.p, v.tagging.len);
    out[v.tagging.len] = 0;
}

OLT_TEST_T(store_versions_tag_sets_rewritten_in_place, 120)
{
    struct sh_env e;
    env(&e);
    uint64_t big = 300000, small = 100;
    uint8_t *d1 = sh_pattern(big, 3), *d2 = sh_pattern(small, 4), *out = malloc(big + 1);
    uint8_t a[16], b[16], m[16], x[16];
    vid_of(a, 1);
    vid_of(b, 2);
    vid_of(m, 3);
    vid_of(x, 99);
    OLT_CHECK_EQ(vput(&e, "t", d1, big, a, 0, NULL), 0);     /* erasure-coded */
    OLT_CHECK_EQ(vput(&e, "t", d2, small, b, 0, NULL), 0);   /* inline, the latest */
    OLT_CHECK_EQ(vtag(&e, "t", a, "k=v&x=%20y"), 0);
    OLT_CHECK(g_ta.found && !g_ta.is_marker);
    OLT_CHECK_EQ(vtag(&e, "t", b, "only=b"), 0);
    char got[128];
    for (unsigned i = 0; i < e.n; i++) {
        tags_on(&e, i, "t", a, got, sizeof got);
        OLT_CHECK_STR(got, "k=v&x=%20y");
        tags_on(&e, i, "t", b, got, sizeof got);
        OLT_CHECK_STR(got, "only=b");
        OLT_CHECK_EQ(versions_on(&e, i, "t"), 2u);
    }
    /* the data of both versions is untouched */
    struct sh_call r;
    OLT_CHECK_EQ(vget(&e, "t", a, out, big + 1, &r), 0);
    OLT_CHECK_MEM(out, d1, big);
    OLT_CHECK_EQ(vget(&e, "t", NULL, out, big + 1, &r), 0);
    OLT_CHECK_MEM(out, d2, small);
    /* cleared; a version that is not there; a delete marker; no key */
    OLT_CHECK_EQ(vtag(&e, "t", a, ""), 0);
    tags_on(&e, 0, "t", a, got, sizeof got);
    OLT_CHECK_STR(got, "");
    OLT_CHECK_EQ(vtag(&e, "t", x, "z=1"), 0);
    OLT_CHECK(!g_ta.found);
    OLT_CHECK_EQ(vmark(&e, "t", m), 0);
    OLT_CHECK_EQ(vtag(&e, "t", m, "z=1"), 0);
    OLT_CHECK(g_ta.found && g_ta.is_marker);
    OLT_CHECK_EQ(vtag(&e, "nokey", NULL, "z=1"), 0);
    OLT_CHECK(!g_ta.found);
    sh_settle(&e);
    sh_check_tmp_empty(&e);
    free(d1), free(d2), free(out);
    sh_env_stop(&e, false);
}
