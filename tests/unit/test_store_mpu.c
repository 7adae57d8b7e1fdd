/*
 * test_store_mpu.c - multipart uploads in the object engine, on a real loop
 * with temporary directories as drives (a small minimum part size):
 * create / upload parts / complete / GET byte-exact (ETag, ranges across
 * part boundaries, partNumber reads), a part uploaded twice, a subset of
 * parts, the Complete errors (InvalidPartOrder, InvalidPart, EntityTooSmall),
 * abort, ListParts and ListMultipartUploads paging, lost drives after
 * Complete, crashes (an open part, a Complete cut short before and after its
 * commit) and expiry, overwrites in both directions, bucket delete, the
 * checksum checks, flow control, and the engine's MD5 against OpenSSL's.
 *
 * As in test_store_engine.c, the test thread drives the engine through
 * messages to the loop thread and waits for the callback (store_harness.h,
 * shared with it; the PUTs and parts here finish with their MD5 as ETag).
 */
#include "olt.h"
#include "store_harness.h"

#include "store/engine.h"
#include "store/engine_int.h"
#include "store/format.h"
#include "store/layout.h"
#include "store/meta.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#define MINPART 100000u       /* mpu_min_part of these tests */

/* ---- environment ---------------------------------------------------------------- */

static void env_open(struct sh_env *e, unsigned n, unsigned dps)
{
    sh_env_open(e, n, dps, 4096, MINPART);
}

/* Clean stops wait for background work (aborted PUTs clean up after their callback). */
static void env_reopen(struct sh_env *e)
{
    sh_settle(e);
    sh_env_stop(e, false);
    sh_env_start(e);
}

static void env_close(struct sh_env *e)
{
    sh_settle(e);
    sh_env_stop(e, false);
}

/* ---- data ------------------------------------------------------------------------ */

static void md5(const void *p, size_t n, uint8_t out[16])
{
    unsigned len = 16;
    OLT_CHECK_EQ(EVP_Digest(p, n, out, &len, EVP_md5(), NULL), 1);
}

/* ---- PUT and parts ----------------------------------------------------------------- */

/* The version the PUTs and parts of these tests finish with: ETag and checksum of t. */
static void fill_version(struct sh_call *t, struct ol_meta_version *v)
{
    memcpy(v->etag, t->etag, 16);
    v->cks.algo = t->cks_algo;
    memcpy(v->cks.sum, t->cks, sizeof v->cks.sum);
}

static void fn_put(struct sh_call *t)
{
    int rc;
    t->fill = fill_version;
    if (t->part) {
        struct ol_mpu_part_args a = {.bucket = t->bucket, .key = t->key, .upload_id = t->id,
                                     .number = t->number, .size = t->size};
        rc = ol_mpu_part_begin(t->e->c, &a, sh_put_cb, t, &t->put);
    } else {
        struct ol_put_args a = {.bucket = t->bucket, .key = t->key, .size = t->size,
                                .parity = -1};
        rc = ol_put_begin(t->e->c, &a, sh_put_cb, t, &t->put);
    }
    if (rc < 0)
        return sh_done(t, rc);
    sh_put_pump(t);
}

static int put(struct sh_env *e, const char *b, const char *k, const uint8_t *data, uint64_t size)
{
    struct sh_call t;
    memset(&t, 0, sizeof t);
    t.bucket = b;
    t.key = k;
    t.data = data;
    t.size = t.stop = size;
    t.chunk = OL_STORE_WRITE_MAX;
    md5(data, size, t.etag);
    return sh_call(e, &t, fn_put);
}

/* The call of an UploadPart of data[0..size) (its MD5 in t->etag). */
static void part_call(struct sh_call *t, const char *b, const char *k, const uint8_t id[16],
                      uint32_t number, const uint8_t *data, uint64_t size)
{
    memset(t, 0, sizeof *t);
    t->part = true;
    t->bucket = b;
    t->key = k;
    memcpy(t->id, id, 16);
    t->number = number;
    t->data = data;
    t->size = t->stop = size;
    t->chunk = 10007; /* odd chunks: writes cross shard and stripe edges */
    md5(data, size, t->etag);
}

/* UploadPart of data[0..size); *etag (OUT) = its MD5. */
static int part_full(struct sh_env *e, const char *b, const char *k, const uint8_t id[16],
                     uint32_t number, const uint8_t *data, uint64_t size, uint8_t etag[16],
                     struct sh_call *out)
{
    struct sh_call t;
    part_call(&t, b, k, id, number, data, size);
    if (etag)
        memcpy(etag, t.etag, 16);
    int rc = sh_call(e, &t, fn_put);
    if (out)
        *out = t;
    return rc;
}

static int part(struct sh_env *e, const char *b, const char *k, const uint8_t id[16],
                uint32_t number, const uint8_t *data, uint64_t size, uint8_t etag[16])
{
    return part_full(e, b, k, id, number, data, size, etag, NULL);
}

/* ---- GET ---------------------------------------------------------------------------- */

static int get_part(struct sh_env *e, const char *b, const char *k, uint32_t number, uint8_t *out,
                    uint64_t cap, uint64_t *got)
{
    struct sh_call t;
    memset(&t, 0, sizeof t);
    t.bucket = b;
    t.key = k;
    t.part_no = number;
    t.len = -1;
    t.out = out;
    t.cap = cap;
    int rc = sh_call(e, &t, sh_fn_get);
    if (got)
        *got = t.got;
    return rc;
}

/* ---- multipart calls -------------------------------------------------------------------- */

static void fn_create(struct sh_call *t)
{
    int rc = ol_mpu_create(t->e->c, &t->ca, sh_simple_cb, t);
    if (rc < 0)
        sh_done(t, rc);
}

static int create_cks(struct sh_env *e, const char *b, const char *k, uint8_t algo,
                      uint8_t flags, uint8_t id[16]);

static int create_full(struct sh_env *e, const char *b, const char *k, uint8_t algo, uint8_t id[16])
{
    return create_cks(e, b, k, algo, 0, id);
}

/* Creates an upload whose checksum is algo with flags (its type). */
static int create_cks(struct sh_env *e, const char *b, const char *k, uint8_t algo,
                      uint8_t flags, uint8_t id[16])
{
    struct sh_call t;
    memset(&t, 0, sizeof t);
    struct ol_meta_version v;
    memset(&v, 0, sizeof v);
    static const char ct[] = "video/mp4";
    v.hdr[OL_META_HDR_CONTENT_TYPE] = (struct ol_meta_bytes){(const uint8_t *)ct, sizeof ct - 1};
    static const struct ol_meta_kv kv = {{(const uint8_t *)"owner", 5},
                                         {(const uint8_t *)"flink", 5}};
    v.user = &kv;
    v.user_count = 1;
    v.cks.algo = algo;
    v.cks.flags = flags;
    t.ca = (struct ol_mpu_create_args){.bucket = b, .key = k, .parity = -1, .v = &v};
    int rc = sh_call(e, &t, fn_create);
    memcpy(id, t.ca.upload_id, 16);
    return rc;
}

static int create(struct sh_env *e, const char *b, const char *k, uint8_t id[16])
{
    return create_full(e, b, k, OL_META_CKS_NONE, id);
}

static void fn_complete(struct sh_call *t)
{
    int rc = ol_mpu_complete(t->e->c, &t->cpa, sh_simple_cb, t);
    if (rc < 0)
        sh_done(t, rc);
}

/* Complete with parts[0..n) (number, etag, cks); sizes and the ETag come back in *out. */
static int complete_full(struct sh_env *e, const char *b, const char *k, const uint8_t id[16],
                         struct ol_meta_part *parts, unsigned n,
                         const struct ol_meta_checksum *cks, struct sh_call *out)
{
    struct sh_call t;
    memset(&t, 0, sizeof t);
    t.cpa = (struct ol_mpu_complete_args){.bucket = b, .key = k, .upload_id = id,
                                          .parts = parts, .nparts = n, .cks = cks};
    int rc = sh_call(e, &t, fn_complete);
    if (out)
        *out = t;
    return rc;
}

static int complete(struct sh_env *e, const char *b, const char *k, const uint8_t id[16],
                    struct ol_meta_part *parts, unsigned n)
{
    return complete_full(e, b, k, id, parts, n, NULL, NULL);
}

static void fn_mabort(struct sh_call *t)
{
    int rc = ol_mpu_abort(t->e->c, t->bucket, t->key, t->id, sh_simple_cb, t);
    if (rc < 0)
        sh_done(t, rc);
}

static int mabort(struct sh_env *e, const char *b, const char *k, const uint8_t id[16])
{
    struct sh_call t;
    memset(&t, 0, sizeof t);
    t.bucket = b;
    t.key = k;
    memcpy(t.id, id, 16);
    return sh_call(e, &t, fn_mabort);
}

static void fn_list_parts(struct sh_call *t)
{
    int rc = ol_mpu_list_parts(t->e->c, &t->lpa, sh_simple_cb, t);
    if (rc < 0)
        sh_done(t, rc);
}

static int list_parts(struct sh_env *e, const char *b, const char *k, const uint8_t id[16],
                      uint32_t marker, unsigned max, struct ol_mpu_part_info *out,
                      struct sh_call *res)
{
    memset(res, 0, sizeof *res);
    res->lpa = (struct ol_mpu_list_parts_args){.bucket = b, .key = k, .upload_id = id,
                                               .marker = marker, .max = max, .out = out};
    return sh_call(e, res, fn_list_parts);
}

static void fn_list_uploads(struct sh_call *t)
{
    int rc = ol_mpu_list_uploads(t->e->c, &t->lua, sh_simple_cb, t);
    if (rc < 0)
        sh_done(t, rc);
}

static char g_keys[64 * 1025];

static int list_uploads(struct sh_env *e, const char *b, const char *prefix, const char *km,
                        const uint8_t *idm, unsigned max, struct ol_mpu_upload_info *out,
                        struct sh_call *res)
{
    memset(res, 0, sizeof *res);
    res->lua = (struct ol_mpu_list_uploads_args){.bucket = b, .prefix = prefix, .key_marker = km,
                                                 .upload_id_marker = idm, .max = max,
                                                 .out = out, .keys = g_keys,
                                                 .keys_cap = sizeof g_keys};
    return sh_call(e, res, fn_list_uploads);
}

static void fn_cleanup(struct sh_call *t)
{
    int rc = ol_store_mpu_cleanup(t->e->c, t->now_ns, sh_simple_cb, t);
    if (rc < 0)
        sh_done(t, rc);
}

/* ---- looking at the drives ---------------------------------------------------------- */

/* <drive i>/.openlake/buckets/<b>/uploads/<ab>/<hash>/<upload> */
static void upload_dir(const struct sh_env *e, unsigned i, const char *b, const char *k,
                       const uint8_t id[16], char *out, size_t len)
{
    char od[OL_LAYOUT_DIR_LEN], u[37];
    sh_obj_hash(e, k, od);
    ol_format_uuid_str(id, u);
    snprintf(out, len, "%s/.openlake/buckets/%s/uploads/%s/%s", e->path[i], b, od, u);
}

static bool exists(const char *p) { return access(p, F_OK) == 0; }

static void etag_of(struct ol_meta_part *parts, unsigned n, uint8_t out[16])
{
    uint8_t cat[16 * 16];
    for (unsigned i = 0; i < n; i++)
        memcpy(cat + 16 * i, parts[i].etag, 16);
    md5(cat, 16 * n, out);
}

/* ---- tests ------------------------------------------------------------------------------- */

OLT_TEST_T(store_mpu_three_parts_round_trip, 120)
{
    struct sh_env e;
    env_open(&e, 4, 4); /* k 2 + m 2 */
    OLT_CHECK_EQ(sh_bucket_create(&e, "mp"), 0);
    uint64_t sz[3] = {200001, 150007, 77777}; /* no multiple of a stripe */
    uint64_t total = sz[0] + sz[1] + sz[2];
    uint8_t *all = sh_pattern(total, 7), id[16];
    OLT_CHECK_EQ(create(&e, "mp", "video/a.mp4", id), 0);
    OLT_CHECK_EQ(ol_store_mpu_count(e.s), 1);
    /* parts out of order: 3, 1, 2 */
    struct ol_meta_part parts[3];
    memset(parts, 0, sizeof parts);
    uint64_t off[3] = {0, sz[0], sz[0] + sz[1]};
    for (unsigned j = 0; j < 3; j++) {
        unsigned i = (j + 2) % 3;
        parts[i].number = i + 1;
        OLT_CHECK_EQ(part(&e, "mp", "video/a.mp4", id, i + 1, all + off[i], sz[i], parts[i].etag), 0);
    }
    /* on the drives: the record, and a part file per part (blocks, then the record) */
    for (unsigned d = 0; d < 4; d++) {
        char u[700], p[800];
        upload_dir(&e, d, "mp", "video/a.mp4", id, u, sizeof u);
        snprintf(p, sizeof p, "%s/upload", u);
        OLT_CHECK(exists(p));
        snprintf(p, sizeof p, "%s/data", u);
        OLT_CHECK_EQ(sh_count_entries(p), 3);
    }
    OLT_CHECK_EQ(sh_head(&e, "mp", "video/a.mp4", NULL), -ENOENT); /* not visible yet */
    struct sh_call c;
    OLT_CHECK_EQ(complete_full(&e, "mp", "video/a.mp4", id, parts, 3, NULL, &c), 0);
    uint8_t want[16];
    etag_of(parts, 3, want);
    OLT_CHECK_MEM(c.cpa.etag, want, 16);
    OLT_CHECK_EQ(c.cpa.size, total);
    OLT_CHECK(c.cpa.mtime_ns > 0);
    OLT_CHECK_EQ(c.cpa.storage_class, OL_META_SC_STANDARD);
    for (unsigned i = 0; i < 3; i++)
        OLT_CHECK_EQ(parts[i].size, sz[i]);
    OLT_CHECK_EQ(ol_store_mpu_count(e.s), 0);
    /* HEAD: the multipart ETag, parts */
    struct sh_call h;
    OLT_CHECK_EQ(sh_head(&e, "mp", "video/a.mp4", &h), 0);
    OLT_CHECK_EQ(h.msize, total);
    OLT_CHECK_MEM(h.etag, want, 16);
    OLT_CHECK_EQ(h.etag_parts, 3);
    OLT_CHECK_EQ(h.part_count, 3);
    sh_check_get(&e, "mp", "video/a.mp4", all, total);
    /* ranges across the part boundaries */
    uint8_t *buf = malloc(total);
    struct { uint64_t off; int64_t len; } cases[] = {
        {sz[0] - 10, 20}, {sz[0] - 1, 2}, {sz[0], 1}, {sz[0] - 5, (int64_t)sz[1] + 10},
        {100, (int64_t)total - 200}, {off[2] - 3, -1}, {total - 1, 1}, {0, (int64_t)sz[0]},
        {sz[0] + 70000, 100000},
    };
    for (unsigned i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint64_t got = 0, want_len = cases[i].len < 0 ? total - cases[i].off : (uint64_t)cases[i].len;
        OLT_CHECK_EQ(sh_get_range(&e, "mp", "video/a.mp4", cases[i].off, cases[i].len, buf, total,
                               &got), 0);
        OLT_CHECK_EQ(got, want_len);
        OLT_CHECK_MEM(buf, all + cases[i].off, got);
    }
    /* partNumber reads */
    for (unsigned i = 0; i < 3; i++) {
        uint64_t got = 0;
        OLT_CHECK_EQ(get_part(&e, "mp", "video/a.mp4", i + 1, buf, total, &got), 0);
        OLT_CHECK_EQ(got, sz[i]);
        OLT_CHECK_MEM(buf, all + off[i], sz[i]);
    }
    OLT_CHECK_EQ(get_part(&e, "mp", "video/a.mp4", 4, buf, total, NULL), -ENOENT);
    /* on the drives: meta + the data dir (named by the upload id) with part.1..3; no upload */
    for (unsigned d = 0; d < 4; d++) {
        char dir[700], dd[800], u[37];
        sh_obj_dir(&e, d, "mp", "video/a.mp4", dir, sizeof dir);
        OLT_CHECK_EQ(sh_count_entries(dir), 2);
        ol_format_uuid_str(id, u);
        snprintf(dd, sizeof dd, "%s/%s", dir, u);
        OLT_CHECK_EQ(sh_count_entries(dd), 3);
        char up[700];
        upload_dir(&e, d, "mp", "video/a.mp4", id, up, sizeof up);
        OLT_CHECK(!exists(up));
        *strrchr(up, '/') = 0; /* <hash> */
        OLT_CHECK(!exists(up));
    }
    /* a PUT's object has one part: number 1 is all of it */
    OLT_CHECK_EQ(put(&e, "mp", "single", all, 150000), 0);
    uint64_t got = 0;
    OLT_CHECK_EQ(get_part(&e, "mp", "single", 1, buf, total, &got), 0);
    OLT_CHECK_EQ(got, 150000);
    OLT_CHECK_MEM(buf, all, 150000);
    OLT_CHECK_EQ(get_part(&e, "mp", "single", 2, buf, total, NULL), -ENOENT);
    struct ol_store_stats st = sh_stats(&e);
    OLT_CHECK_EQ(st.mpu_created, 1);
    OLT_CHECK_EQ(st.mpu_completed, 1);
    OLT_CHECK_EQ(st.mpu_parts, 3);
    OLT_CHECK_EQ(st.checksum_failures, 0);
    OLT_CHECK_EQ(st.reads_reconstructed, 0);
    /* durable: after a re-open, still the same */
    env_reopen(&e);
    sh_check_get(&e, "mp", "video/a.mp4", all, total);
    sh_check_tmp_empty(&e);
    free(buf);
    free(all);
    env_close(&e);
}

OLT_TEST_T(store_mpu_reupload_replaces_part, 120)
{
    struct sh_env e;
    env_open(&e, 4, 4);
    OLT_CHECK_EQ(sh_bucket_create(&e, "re"), 0);
    uint8_t *a = sh_pattern(120000, 1), *b1 = sh_pattern(130000, 2), *b2 = sh_pattern(90001, 3);
    uint8_t id[16];
    OLT_CHECK_EQ(create(&e, "re", "k", id), 0);
    struct ol_meta_part p[2], old;
    memset(p, 0, sizeof p);
    p[0].number = 1;
    p[1].number = 2;
    OLT_CHECK_EQ(part(&e, "re", "k", id, 1, a, 120000, p[0].etag), 0);
    OLT_CHECK_EQ(part(&e, "re", "k", id, 2, b1, 130000, p[1].etag), 0);
    old = p[1];
    OLT_CHECK_EQ(part(&e, "re", "k", id, 2, b2, 90001, p[1].etag), 0);
    /* the first upload of part 2 is gone */
    struct ol_meta_part q[2] = {p[0], old};
    OLT_CHECK_EQ(complete(&e, "re", "k", id, q, 2), OL_STORE_EBADPART);
    OLT_CHECK_EQ(complete(&e, "re", "k", id, p, 2), 0);
    OLT_CHECK_EQ(p[1].size, 90001);
    uint8_t *want = malloc(210001);
    memcpy(want, a, 120000);
    memcpy(want + 120000, b2, 90001);
    sh_check_get(&e, "re", "k", want, 210001);
    sh_check_tmp_empty(&e);
    free(want);
    free(a);
    free(b1);
    free(b2);
    env_close(&e);
}

OLT_TEST_T(store_mpu_complete_errors_and_subset, 120)
{
    struct sh_env e;
    env_open(&e, 6, 6); /* k 3 + m 3 */
    OLT_CHECK_EQ(sh_bucket_create(&e, "ce"), 0);
    uint64_t sz[4] = {110000, 50000, 120000, 100003};
    uint8_t *d[4], id[16];
    struct ol_meta_part p[4];
    memset(p, 0, sizeof p);
    OLT_CHECK_EQ(create(&e, "ce", "obj", id), 0);
    for (unsigned i = 0; i < 4; i++) {
        d[i] = sh_pattern(sz[i], 20 + i);
        p[i].number = i + 1;
        OLT_CHECK_EQ(part(&e, "ce", "obj", id, i + 1, d[i], sz[i], p[i].etag), 0);
    }
    /* InvalidPartOrder: at once */
    struct ol_meta_part bad[3] = {p[0], p[2], p[1]};
    OLT_CHECK_EQ(complete(&e, "ce", "obj", id, bad, 3), OL_STORE_EPARTORDER);
    struct ol_meta_part dup[2] = {p[0], p[0]};
    OLT_CHECK_EQ(complete(&e, "ce", "obj", id, dup, 2), OL_STORE_EPARTORDER);
    struct ol_meta_part zero = p[0];
    zero.number = 0;
    OLT_CHECK_EQ(complete(&e, "ce", "obj", id, &zero, 1), -EINVAL);
    /* InvalidPart: a wrong etag, a part never uploaded */
    struct ol_meta_part wrong[2] = {p[0], p[2]};
    wrong[1].etag[3] ^= 1;
    OLT_CHECK_EQ(complete(&e, "ce", "obj", id, wrong, 2), OL_STORE_EBADPART);
    struct ol_meta_part missing[2] = {p[0], p[2]};
    missing[1].number = 7;
    OLT_CHECK_EQ(complete(&e, "ce", "obj", id, missing, 2), OL_STORE_EBADPART);
    /* EntityTooSmall: part 2 (50000) is not the last */
    OLT_CHECK_EQ(complete(&e, "ce", "obj", id, p, 4), OL_STORE_ETOOSMALL);
    /* none of that changed anything */
    OLT_CHECK_EQ(sh_head(&e, "ce", "obj", NULL), -ENOENT);
    OLT_CHECK_EQ(ol_store_mpu_count(e.s), 1);
    /* a subset: parts 1 and 3 (the last may be small: here 3 is the last) */
    struct ol_meta_part sub[2] = {p[0], p[2]};
    struct sh_call c;
    OLT_CHECK_EQ(complete_full(&e, "ce", "obj", id, sub, 2, NULL, &c), 0);
    uint64_t total = sz[0] + sz[2];
    uint8_t *want = malloc(total);
    memcpy(want, d[0], sz[0]);
    memcpy(want + sz[0], d[2], sz[2]);
    sh_check_get(&e, "ce", "obj", want, total);
    struct sh_call h;
    OLT_CHECK_EQ(sh_head(&e, "ce", "obj", &h), 0);
    OLT_CHECK_EQ(h.etag_parts, 2);
    /* the unlisted parts 2 and 4 are gone; the data dir has part.1 and part.3 */
    for (unsigned dr = 0; dr < 6; dr++) {
        char dir[700], dd[800], pp[820], u[37];
        sh_obj_dir(&e, dr, "ce", "obj", dir, sizeof dir);
        ol_format_uuid_str(id, u);
        snprintf(dd, sizeof dd, "%s/%s", dir, u);
        OLT_CHECK_EQ(sh_count_entries(dd), 2);
        snprintf(pp, sizeof pp, "%s/part.1", dd);
        OLT_CHECK(exists(pp));
        snprintf(pp, sizeof pp, "%s/part.3", dd);
        OLT_CHECK(exists(pp));
    }
    /* after Complete the upload is gone */
    OLT_CHECK_EQ(complete(&e, "ce", "obj", id, sub, 2), OL_STORE_ENOUPLOAD);
    /* part 2 read by number (the object's second part is upload part 3) */
    uint8_t *buf = malloc(total);
    uint64_t got = 0;
    OLT_CHECK_EQ(get_part(&e, "ce", "obj", 3, buf, total, &got), 0);
    OLT_CHECK_EQ(got, sz[2]);
    OLT_CHECK_MEM(buf, d[2], sz[2]);
    OLT_CHECK_EQ(get_part(&e, "ce", "obj", 2, buf, total, NULL), -ENOENT);
    sh_check_tmp_empty(&e);
    for (unsigned i = 0; i < 4; i++)
        free(d[i]);
    free(want);
    free(buf);
    env_close(&e);
}

OLT_TEST_T(store_mpu_abort_then_no_such_upload, 120)
{
    struct sh_env e;
    env_open(&e, 4, 4);
    OLT_CHECK_EQ(sh_bucket_create(&e, "ab"), 0);
    uint8_t *a = sh_pattern(150000, 5), id[16], id2[16];
    struct ol_meta_part p[2];
    memset(p, 0, sizeof p);
    p[0].number = 1;
    p[1].number = 2;
    OLT_CHECK_EQ(create(&e, "ab", "k", id), 0);
    OLT_CHECK_EQ(create(&e, "ab", "k", id2), 0); /* another upload of the same key stays */
    OLT_CHECK_EQ(part(&e, "ab", "k", id, 1, a, 150000, p[0].etag), 0);
    OLT_CHECK_EQ(part(&e, "ab", "k", id, 2, a, 1000, p[1].etag), 0);
    OLT_CHECK_EQ(mabort(&e, "ab", "k", id), 0);
    OLT_CHECK_EQ(part(&e, "ab", "k", id, 3, a, 1000, NULL), OL_STORE_ENOUPLOAD);
    OLT_CHECK_EQ(complete(&e, "ab", "k", id, p, 2), OL_STORE_ENOUPLOAD);
    OLT_CHECK_EQ(mabort(&e, "ab", "k", id), OL_STORE_ENOUPLOAD);
    struct ol_mpu_part_info info[4];
    struct sh_call lp;
    OLT_CHECK_EQ(list_parts(&e, "ab", "k", id, 0, 4, info, &lp), OL_STORE_ENOUPLOAD);
    /* a wrong key for an id is no such upload */
    OLT_CHECK_EQ(mabort(&e, "ab", "other", id2), OL_STORE_ENOUPLOAD);
    for (unsigned d = 0; d < 4; d++) {
        char u[700];
        upload_dir(&e, d, "ab", "k", id, u, sizeof u);
        OLT_CHECK(!exists(u));
        upload_dir(&e, d, "ab", "k", id2, u, sizeof u);
        OLT_CHECK(exists(u));
    }
    OLT_CHECK_EQ(ol_store_mpu_count(e.s), 1);
    OLT_CHECK_EQ(mabort(&e, "ab", "k", id2), 0);
    for (unsigned d = 0; d < 4; d++) { /* uploads/ is empty again */
        char u[700];
        snprintf(u, sizeof u, "%s/.openlake/buckets/ab/uploads", e.path[d]);
        OLT_CHECK_EQ(sh_count_entries(u), 0);
    }
    OLT_CHECK_EQ(sh_stats(&e).mpu_aborted, 2);
    OLT_CHECK_EQ(sh_head(&e, "ab", "k", NULL), -ENOENT);
    /* no such bucket */
    OLT_CHECK_EQ(create(&e, "nob", "k", id), OL_STORE_ENOBUCKET);
    OLT_CHECK_EQ(ol_store_mpu_count(e.s), 0);
    sh_check_tmp_empty(&e);
    free(a);
    env_close(&e);
}

OLT_TEST_T(store_mpu_list_parts_and_uploads, 120)
{
    struct sh_env e;
    env_open(&e, 6, 3); /* two sets */
    OLT_CHECK_EQ(sh_bucket_create(&e, "ls"), 0);
    OLT_CHECK_EQ(sh_bucket_create(&e, "ls2"), 0);
    uint8_t *a = sh_pattern(30000, 9);
    uint8_t ids[5][16];
    const char *keys[5] = {"b/x", "a/y", "b/x", "c", "a/z"};
    for (unsigned i = 0; i < 5; i++) {
        OLT_CHECK_EQ(create(&e, "ls", keys[i], ids[i]), 0);
        usleep(1000); /* distinct initiation times */
    }
    uint8_t other[16];
    OLT_CHECK_EQ(create(&e, "ls2", "a/y", other), 0);
    /* ListParts: 1, 2, 5 (part 5 twice: the newest listed) */
    uint8_t et[6][16];
    OLT_CHECK_EQ(part(&e, "ls", "b/x", ids[0], 5, a, 1000, et[5]), 0);
    OLT_CHECK_EQ(part(&e, "ls", "b/x", ids[0], 1, a, 30000, et[1]), 0);
    OLT_CHECK_EQ(part(&e, "ls", "b/x", ids[0], 2, a + 5, 20000, et[2]), 0);
    OLT_CHECK_EQ(part(&e, "ls", "b/x", ids[0], 5, a + 7, 2222, et[5]), 0);
    struct ol_mpu_part_info info[8];
    struct sh_call r;
    OLT_CHECK_EQ(list_parts(&e, "ls", "b/x", ids[0], 0, 8, info, &r), 0);
    OLT_CHECK_EQ(r.lpa.count, 3);
    OLT_CHECK(!r.lpa.truncated);
    uint32_t nums[3] = {1, 2, 5};
    uint64_t sizes[3] = {30000, 20000, 2222};
    for (unsigned i = 0; i < 3; i++) {
        OLT_CHECK_EQ(info[i].number, nums[i]);
        OLT_CHECK_EQ(info[i].size, sizes[i]);
        OLT_CHECK_MEM(info[i].etag, et[nums[i]], 16);
        OLT_CHECK(info[i].mtime_ns > 0);
    }
    OLT_CHECK(r.lpa.initiated_ns > 0);
    OLT_CHECK_EQ(list_parts(&e, "ls", "b/x", ids[0], 1, 8, info, &r), 0);
    OLT_CHECK_EQ(r.lpa.count, 2);
    OLT_CHECK_EQ(info[0].number, 2);
    OLT_CHECK_EQ(list_parts(&e, "ls", "b/x", ids[0], 0, 2, info, &r), 0);
    OLT_CHECK_EQ(r.lpa.count, 2);
    OLT_CHECK(r.lpa.truncated);
    OLT_CHECK_EQ(info[1].number, 2);
    OLT_CHECK_EQ(list_parts(&e, "ls", "b/x", ids[0], 2, 2, info, &r), 0);
    OLT_CHECK_EQ(r.lpa.count, 1);
    OLT_CHECK(!r.lpa.truncated);
    OLT_CHECK_EQ(list_parts(&e, "ls", "b/x", ids[0], 5, 2, info, &r), 0);
    OLT_CHECK_EQ(r.lpa.count, 0);
    OLT_CHECK_EQ(list_parts(&e, "ls", "c", ids[3], 0, 2, info, &r), 0); /* no parts */
    OLT_CHECK_EQ(r.lpa.count, 0);
    /* ListMultipartUploads: by key, then initiation */
    struct ol_mpu_upload_info up[8];
    OLT_CHECK_EQ(list_uploads(&e, "ls", NULL, NULL, NULL, 8, up, &r), 0);
    OLT_CHECK_EQ(r.lua.count, 5);
    OLT_CHECK(!r.lua.truncated);
    unsigned order[5] = {1, 4, 0, 2, 3}; /* a/y a/z b/x b/x c */
    for (unsigned i = 0; i < 5; i++) {
        OLT_CHECK_STR(up[i].key, keys[order[i]]);
        OLT_CHECK_MEM(up[i].upload_id, ids[order[i]], 16);
        OLT_CHECK(up[i].initiated_ns > 0);
    }
    OLT_CHECK_EQ(list_uploads(&e, "ls", "b/", NULL, NULL, 8, up, &r), 0);
    OLT_CHECK_EQ(r.lua.count, 2);
    OLT_CHECK_STR(up[0].key, "b/x");
    OLT_CHECK_EQ(list_uploads(&e, "ls", NULL, NULL, NULL, 2, up, &r), 0);
    OLT_CHECK_EQ(r.lua.count, 2);
    OLT_CHECK(r.lua.truncated);
    OLT_CHECK_STR(up[1].key, "a/z");
    /* next page from the markers */
    OLT_CHECK_EQ(list_uploads(&e, "ls", NULL, "a/z", ids[4], 2, up, &r), 0);
    OLT_CHECK_EQ(r.lua.count, 2);
    OLT_CHECK(r.lua.truncated);
    OLT_CHECK_MEM(up[0].upload_id, ids[0], 16);
    OLT_CHECK_MEM(up[1].upload_id, ids[2], 16);
    OLT_CHECK_EQ(list_uploads(&e, "ls", NULL, "b/x", ids[0], 2, up, &r), 0); /* within a key */
    OLT_CHECK_EQ(r.lua.count, 2);
    OLT_CHECK_MEM(up[0].upload_id, ids[2], 16);
    OLT_CHECK_STR(up[1].key, "c");
    OLT_CHECK_EQ(list_uploads(&e, "ls", NULL, "b/x", NULL, 8, up, &r), 0); /* key marker alone */
    OLT_CHECK_EQ(r.lua.count, 1);
    OLT_CHECK_STR(up[0].key, "c");
    OLT_CHECK_EQ(list_uploads(&e, "ls2", NULL, NULL, NULL, 8, up, &r), 0);
    OLT_CHECK_EQ(r.lua.count, 1);
    OLT_CHECK_EQ(list_uploads(&e, "nob", NULL, NULL, NULL, 8, up, &r), OL_STORE_ENOBUCKET);
    /* the registry survives a re-open (rebuilt from the drives) */
    sh_local_only("the registry is rebuilt from this node's drives: a cluster store's owner "
                  "scanning remote drives is not built yet");
    env_reopen(&e);
    OLT_CHECK_EQ(ol_store_mpu_count(e.s), 6);
    OLT_CHECK_EQ(list_uploads(&e, "ls", NULL, NULL, NULL, 8, up, &r), 0);
    OLT_CHECK_EQ(r.lua.count, 5);
    for (unsigned i = 0; i < 5; i++)
        OLT_CHECK_MEM(up[i].upload_id, ids[order[i]], 16);
    OLT_CHECK_EQ(list_parts(&e, "ls", "b/x", ids[0], 0, 8, info, &r), 0);
    OLT_CHECK_EQ(r.lpa.count, 3);
    OLT_CHECK_EQ(info[2].size, 2222);
    free(a);
    env_close(&e);
}

/* Bucket b and object "o" of three parts of sizes sz[], completed; its bytes
 * (malloc'ed) come back. */
static uint8_t *three_parts(struct sh_env *e, const char *b, const uint64_t sz[3], unsigned seed)
{
    OLT_CHECK_EQ(sh_bucket_create(e, b), 0);
    uint8_t *all = sh_pattern(sz[0] + sz[1] + sz[2], seed), id[16];
    struct ol_meta_part p[3];
    memset(p, 0, sizeof p);
    OLT_CHECK_EQ(create(e, b, "o", id), 0);
    for (unsigned i = 0, o = 0; i < 3; o += (unsigned)sz[i], i++) {
        p[i].number = i + 1;
        OLT_CHECK_EQ(part(e, b, "o", id, i + 1, all + o, sz[i], p[i].etag), 0);
    }
    OLT_CHECK_EQ(complete(e, b, "o", id, p, 3), 0);
    return all;
}

OLT_TEST_T(store_mpu_lost_drives_after_complete, 120)
{
    struct sh_env e;
    env_open(&e, 4, 4);
    uint64_t sz[3] = {140001, 133333, 5};
    uint64_t total = sz[0] + sz[1] + sz[2];
    uint8_t *all = three_parts(&e, "lost", sz, 11);
    sh_wipe(e.path[0]);
    sh_wipe(e.path[2]); /* m = 2 drives gone */
    sh_check_get(&e, "lost", "o", all, total);
    uint8_t buf[300];
    uint64_t got = 0;
    OLT_CHECK_EQ(sh_get_range(&e, "lost", "o", sz[0] - 150, 300, buf, 300, &got), 0);
    OLT_CHECK_EQ(got, 300);
    OLT_CHECK_MEM(buf, all + sz[0] - 150, 300);
    OLT_CHECK(sh_stats(&e).reads_reconstructed > 0);
    OLT_CHECK_EQ(sh_stats(&e).checksum_failures, 0);
    free(all);
    env_close(&e);
}

OLT_TEST_T(store_mpu_crash_leaves_upload_usable, 120)
{
    struct sh_env e;
    env_open(&e, 4, 4);
    OLT_CHECK_EQ(sh_bucket_create(&e, "cr"), 0);
    uint8_t *a = sh_pattern(400000, 13), id[16];
    struct ol_meta_part p[3];
    memset(p, 0, sizeof p);
    OLT_CHECK_EQ(create(&e, "cr", "k", id), 0);
    p[0].number = 1;
    p[1].number = 2;
    OLT_CHECK_EQ(part(&e, "cr", "k", id, 1, a, 150000, p[0].etag), 0);
    /* part 2 half sent when the process dies */
    struct sh_call t;
    memset(&t, 0, sizeof t);
    t.part = true;
    t.bucket = "cr";
    t.key = "k";
    memcpy(t.id, id, 16);
    t.number = 2;
    t.data = a + 150000;
    t.size = 200000;
    t.stop = 100000;
    t.chunk = 10000;
    OLT_CHECK_EQ(sh_call(&e, &t, fn_put), 0);
    usleep(50000);
    sh_env_stop(&e, true);
    sh_env_start(&e);
    sh_check_tmp_empty(&e);
    OLT_CHECK_EQ(ol_store_mpu_count(e.s), 1);
    struct ol_mpu_part_info info[4];
    struct sh_call r;
    OLT_CHECK_EQ(list_parts(&e, "cr", "k", id, 0, 4, info, &r), 0);
    OLT_CHECK_EQ(r.lpa.count, 1); /* only the finished part */
    OLT_CHECK_EQ(part(&e, "cr", "k", id, 2, a + 150000, 200000, p[1].etag), 0);
    OLT_CHECK_EQ(complete(&e, "cr", "k", id, p, 2), 0);
    sh_check_get(&e, "cr", "k", a, 350000);
    /* an aborted part upload: nothing of it stays */
    uint8_t id2[16];
    OLT_CHECK_EQ(create(&e, "cr", "k2", id2), 0);
    memset(&t, 0, sizeof t);
    t.part = true;
    t.bucket = "cr";
    t.key = "k2";
    memcpy(t.id, id2, 16);
    t.number = 1;
    t.data = a;
    t.size = 200000;
    t.stop = 100000;
    t.chunk = 10000;
    OLT_CHECK_EQ(sh_call(&e, &t, fn_put), 0);
    sh_call(&e, &t, sh_fn_abort_put);
    sh_settle(&e);
    sh_check_tmp_empty(&e);
    OLT_CHECK_EQ(list_parts(&e, "cr", "k2", id2, 0, 4, info, &r), 0);
    OLT_CHECK_EQ(r.lpa.count, 0);
    free(a);
    env_close(&e);
}

/* Copies file from -> to (both paths), or removes `to` when from is NULL. */
static void copy_file(const char *from, const char *to)
{
    static uint8_t buf[1 << 20];
    int fd = open(from, O_RDONLY);
    OLT_CHECK(fd >= 0);
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    OLT_CHECK(n > 0);
    fd = open(to, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    OLT_CHECK(fd >= 0);
    OLT_CHECK_EQ(write(fd, buf, (size_t)n), n);
    close(fd);
}

OLT_TEST_T(store_mpu_complete_cut_short_recovers, 120)
{
    struct sh_env e;
    env_open(&e, 4, 4);
    OLT_CHECK_EQ(sh_bucket_create(&e, "cc"), 0);
    uint8_t *a = sh_pattern(300000, 17), *old = sh_pattern(200000, 18), id[16];
    OLT_CHECK_EQ(put(&e, "cc", "k", old, 200000), 0);
    struct ol_meta_part p[2];
    memset(p, 0, sizeof p);
    OLT_CHECK_EQ(create(&e, "cc", "k", id), 0);
    p[0].number = 1;
    p[1].number = 2;
    OLT_CHECK_EQ(part(&e, "cc", "k", id, 1, a, 180000, p[0].etag), 0);
    OLT_CHECK_EQ(part(&e, "cc", "k", id, 2, a + 180000, 120000, p[1].etag), 0);
    /* (1) a crash after Complete renamed data/ into the object on every drive,
     * before any metadata: the data dirs go back into the upload at open */
    char u[37];
    ol_format_uuid_str(id, u);
    sh_settle(&e);
    sh_env_stop(&e, false);
    for (unsigned d = 0; d < 4; d++) {
        char ud[700], from[800], to[800];
        upload_dir(&e, d, "cc", "k", id, ud, sizeof ud);
        snprintf(from, sizeof from, "%s/data", ud);
        sh_obj_dir(&e, d, "cc", "k", to, sizeof to);
        snprintf(to + strlen(to), sizeof to - strlen(to), "/%s", u);
        OLT_CHECK_EQ(rename(from, to), 0);
    }
    sh_env_start(&e);
    sh_check_get(&e, "cc", "k", old, 200000); /* the old object, untouched */
    OLT_CHECK_EQ(ol_store_mpu_count(e.s), 1);
    struct ol_mpu_part_info info[4];
    struct sh_call r;
    OLT_CHECK_EQ(list_parts(&e, "cc", "k", id, 0, 4, info, &r), 0);
    OLT_CHECK_EQ(r.lpa.count, 2);
    /* (2) a crash after the commit, before the upload's record was removed:
     * the record is put back by hand on every drive; at open the object's
     * metadata names the upload as a data dir, so the leftovers go */
    char saved[4][800];
    for (unsigned d = 0; d < 4; d++) {
        char ud[700];
        upload_dir(&e, d, "cc", "k", id, ud, sizeof ud);
        snprintf(saved[d], sizeof saved[d], "%s/saved-%u", olt_tmpdir(), d);
        char rec[800];
        snprintf(rec, sizeof rec, "%s/upload", ud);
        copy_file(rec, saved[d]);
    }
    OLT_CHECK_EQ(complete(&e, "cc", "k", id, p, 2), 0);
    sh_check_get(&e, "cc", "k", a, 300000);
    sh_settle(&e);
    sh_env_stop(&e, false);
    for (unsigned d = 0; d < 4; d++) {
        char ud[700], rec[800];
        upload_dir(&e, d, "cc", "k", id, ud, sizeof ud);
        char cmd[1600];
        snprintf(cmd, sizeof cmd, "mkdir -p '%s'", ud);
        OLT_CHECK_EQ(system(cmd), 0);
        snprintf(rec, sizeof rec, "%s/upload", ud);
        copy_file(saved[d], rec);
    }
    sh_env_start(&e);
    OLT_CHECK_EQ(ol_store_mpu_count(e.s), 0);
    for (unsigned d = 0; d < 4; d++) {
        char ud[700];
        upload_dir(&e, d, "cc", "k", id, ud, sizeof ud);
        OLT_CHECK(!exists(ud));
    }
    sh_check_get(&e, "cc", "k", a, 300000);
    /* (3) an upload whose record is on fewer than a read quorum of drives
     * (a create cut short) is removed at open */
    uint8_t id2[16];
    OLT_CHECK_EQ(create(&e, "cc", "k2", id2), 0);
    sh_settle(&e);
    sh_env_stop(&e, false);
    for (unsigned d = 1; d < 4; d++) {
        char ud[700], rec[800];
        upload_dir(&e, d, "cc", "k2", id2, ud, sizeof ud);
        snprintf(rec, sizeof rec, "%s/upload", ud);
        OLT_CHECK_EQ(unlink(rec), 0);
    }
    sh_env_start(&e);
    OLT_CHECK_EQ(ol_store_mpu_count(e.s), 0);
    for (unsigned d = 0; d < 4; d++) {
        char ud[700];
        upload_dir(&e, d, "cc", "k2", id2, ud, sizeof ud);
        OLT_CHECK(!exists(ud));
    }
    free(a);
    free(old);
    env_close(&e);
}

OLT_TEST_T(store_mpu_expiry, 120)
{
    struct sh_env e;
    env_open(&e, 4, 4);
    OLT_CHECK_EQ(sh_bucket_create(&e, "ex"), 0);
    uint8_t *a = sh_pattern(50000, 19), id[16], id2[16];
    OLT_CHECK_EQ(create(&e, "ex", "k", id), 0);
    OLT_CHECK_EQ(part(&e, "ex", "k", id, 1, a, 50000, NULL), 0);
    OLT_CHECK_EQ(create(&e, "ex", "k2", id2), 0);
    struct sh_call t;
    memset(&t, 0, sizeof t);
    t.now_ns = 1; /* nothing is older than the expiry yet */
    OLT_CHECK_EQ(sh_call(&e, &t, fn_cleanup), -ENOENT);
    memset(&t, 0, sizeof t);
    t.now_ns = UINT64_MAX / 2; /* far in the future: both expired */
    OLT_CHECK_EQ(sh_call(&e, &t, fn_cleanup), 0);
    OLT_CHECK_EQ(t.len_out, 2);
    OLT_CHECK_EQ(ol_store_mpu_count(e.s), 0);
    OLT_CHECK_EQ(part(&e, "ex", "k", id, 2, a, 50000, NULL), OL_STORE_ENOUPLOAD);
    for (unsigned d = 0; d < 4; d++) {
        char u[700];
        snprintf(u, sizeof u, "%s/.openlake/buckets/ex/uploads", e.path[d]);
        OLT_CHECK_EQ(sh_count_entries(u), 0);
    }
    /* at open, with an expiry of 1 s */
    OLT_CHECK_EQ(create(&e, "ex", "k3", id), 0);
    sh_settle(&e);
    sh_env_stop(&e, false);
    usleep(1100000);
    e.p.mpu_expiry_s = 1;
    sh_env_start(&e);
    OLT_CHECK_EQ(ol_store_mpu_count(e.s), 0);
    for (unsigned d = 0; d < 4; d++) {
        char u[700];
        upload_dir(&e, d, "ex", "k3", id, u, sizeof u);
        OLT_CHECK(!exists(u));
    }
    /* -1: never */
    OLT_CHECK_EQ(create(&e, "ex", "k4", id), 0);
    sh_settle(&e);
    sh_env_stop(&e, false);
    e.p.mpu_expiry_s = -1;
    sh_env_start(&e);
    OLT_CHECK_EQ(ol_store_mpu_count(e.s), 1);
    memset(&t, 0, sizeof t);
    t.now_ns = UINT64_MAX / 2;
    OLT_CHECK_EQ(sh_call(&e, &t, fn_cleanup), -ENOENT);
    free(a);
    env_close(&e);
}

OLT_TEST_T(store_mpu_overwrites_remove_old_data, 120)
{
    struct sh_env e;
    env_open(&e, 4, 4);
    OLT_CHECK_EQ(sh_bucket_create(&e, "ow"), 0);
    uint8_t *a = sh_pattern(300000, 21), *b = sh_pattern(250000, 22), id[16];
    OLT_CHECK_EQ(put(&e, "ow", "x", a, 300000), 0);
    char dir[700];
    sh_obj_dir(&e, 0, "ow", "x", dir, sizeof dir);
    /* the single-part object's shard file (flat: <uuid>.data beside meta) */
    DIR *dd = opendir(dir);
    char olddd[1000] = "";
    struct dirent *x;
    while ((x = readdir(dd)))
        if (strlen(x->d_name) == 41 && !strcmp(x->d_name + 36, ".data"))
            snprintf(olddd, sizeof olddd, "%s/%s", dir, x->d_name);
    closedir(dd);
    OLT_CHECK(exists(olddd));
    struct ol_meta_part p[2];
    memset(p, 0, sizeof p);
    OLT_CHECK_EQ(create(&e, "ow", "x", id), 0);
    p[0].number = 1;
    p[1].number = 2;
    OLT_CHECK_EQ(part(&e, "ow", "x", id, 1, b, 150000, p[0].etag), 0);
    OLT_CHECK_EQ(part(&e, "ow", "x", id, 2, b + 150000, 100000, p[1].etag), 0);
    sh_check_get(&e, "ow", "x", a, 300000); /* the old object until Complete */
    OLT_CHECK_EQ(complete(&e, "ow", "x", id, p, 2), 0);
    sh_check_get(&e, "ow", "x", b, 250000);
    OLT_CHECK(!exists(olddd));
    for (unsigned d = 0; d < 4; d++) {
        sh_obj_dir(&e, d, "ow", "x", dir, sizeof dir);
        OLT_CHECK_EQ(sh_count_entries(dir), 2); /* meta + the new data dir */
    }
    /* a PUT over the multipart object removes every part */
    OLT_CHECK_EQ(put(&e, "ow", "x", a, 200000), 0);
    sh_check_get(&e, "ow", "x", a, 200000);
    char u[37], mdd[900];
    ol_format_uuid_str(id, u);
    for (unsigned d = 0; d < 4; d++) {
        sh_obj_dir(&e, d, "ow", "x", dir, sizeof dir);
        snprintf(mdd, sizeof mdd, "%s/%s", dir, u);
        OLT_CHECK(!exists(mdd));
        OLT_CHECK_EQ(sh_count_entries(dir), 2); /* meta + the PUT's shard file */
        OLT_CHECK(sh_part_path(&e, d, "ow", "x", 1, mdd, sizeof mdd));
        OLT_CHECK(exists(mdd));
    }
    /* DELETE of a multipart object */
    OLT_CHECK_EQ(create(&e, "ow", "y", id), 0);
    OLT_CHECK_EQ(part(&e, "ow", "y", id, 1, b, 150000, p[0].etag), 0);
    OLT_CHECK_EQ(part(&e, "ow", "y", id, 2, b + 150000, 100000, p[1].etag), 0);
    OLT_CHECK_EQ(complete(&e, "ow", "y", id, p, 2), 0);
    OLT_CHECK_EQ(sh_del(&e, "ow", "y"), 0);
    for (unsigned d = 0; d < 4; d++) {
        sh_obj_dir(&e, d, "ow", "y", dir, sizeof dir);
        OLT_CHECK_EQ(sh_count_entries(dir), -1);
    }
    sh_check_tmp_empty(&e);
    free(a);
    free(b);
    env_close(&e);
}

OLT_TEST_T(store_mpu_bucket_delete_and_busy, 120)
{
    struct sh_env e;
    env_open(&e, 4, 4);
    OLT_CHECK_EQ(sh_bucket_create(&e, "bd"), 0);
    uint8_t *a = sh_pattern(400000, 23), id[16];
    OLT_CHECK_EQ(create(&e, "bd", "k", id), 0);
    OLT_CHECK_EQ(sh_bucket_delete(&e, "bd"), -ENOTEMPTY);
    /* Complete while an UploadPart of the upload is still open: busy */
    struct sh_call t;
    memset(&t, 0, sizeof t);
    t.part = true;
    t.bucket = "bd";
    t.key = "k";
    memcpy(t.id, id, 16);
    t.number = 1;
    t.data = a;
    t.size = 200000;
    t.stop = 100000;
    t.chunk = 10000;
    md5(a, 200000, t.etag);
    OLT_CHECK_EQ(sh_call(&e, &t, fn_put), 0);
    struct ol_meta_part p;
    memset(&p, 0, sizeof p);
    p.number = 1;
    memcpy(p.etag, t.etag, 16);
    OLT_CHECK_EQ(complete(&e, "bd", "k", id, &p, 1), -EBUSY);
    /* abort meanwhile: the part cannot land in the removed upload */
    OLT_CHECK_EQ(mabort(&e, "bd", "k", id), 0);
    t.stop = t.size; /* the rest of the part, then finish */
    OLT_CHECK_EQ(sh_call(&e, &t, sh_put_pump), OL_STORE_ENOUPLOAD);
    sh_settle(&e);
    sh_check_tmp_empty(&e);
    OLT_CHECK_EQ(sh_bucket_delete(&e, "bd"), 0);
    free(a);
    env_close(&e);
}

OLT_TEST_T(store_mpu_checksums_and_flow_control, 120)
{
    struct sh_env e;
    env_open(&e, 4, 4);
    OLT_CHECK_EQ(sh_bucket_create(&e, "ck"), 0);
    uint64_t big = 30ull * SH_STRIPE + 777;
    uint8_t *a = sh_pattern(big, 25), id[16];
    OLT_CHECK_EQ(create_full(&e, "ck", "k", OL_META_CKS_CRC32, id), 0);
    struct ol_meta_part p[2];
    memset(p, 0, sizeof p);
    p[0].number = 1;
    p[1].number = 2;
    /* the part's checksum (any 4 bytes here: the engine stores, S3 computes) */
    struct sh_call t;
    memset(&t, 0, sizeof t);
    t.part = true;
    t.bucket = "ck";
    t.key = "k";
    memcpy(t.id, id, 16);
    t.number = 1;
    t.data = a;
    t.size = t.stop = big;
    t.chunk = OL_STORE_WRITE_MAX;
    t.cks_algo = OL_META_CKS_CRC32;
    memcpy(t.cks, "\x01\x02\x03\x04", 4);
    md5(a, big, t.etag);
    OLT_CHECK_EQ(sh_call(&e, &t, fn_put), 0);
    OLT_CHECK(t.ones > 0); /* flow control as for a PUT */
    OLT_CHECK_EQ(t.readies, t.ones);
    memcpy(p[0].etag, t.etag, 16);
    memcpy(p[0].cks, t.cks, 4);
    /* a part with another algorithm is refused at finish */
    memset(&t, 0, sizeof t);
    t.part = true;
    t.bucket = "ck";
    t.key = "k";
    memcpy(t.id, id, 16);
    t.number = 2;
    t.data = a;
    t.size = t.stop = 1000;
    t.chunk = 1000;
    t.cks_algo = OL_META_CKS_SHA1;
    OLT_CHECK_EQ(sh_call(&e, &t, fn_put), -EINVAL);
    t.cks_algo = OL_META_CKS_CRC32;
    memcpy(t.cks, "\x05\x06\x07\x08", 4);
    t.written = 0;
    md5(a, 1000, t.etag);
    OLT_CHECK_EQ(sh_call(&e, &t, fn_put), 0);
    memcpy(p[1].etag, t.etag, 16);
    memcpy(p[1].cks, t.cks, 4);
    struct ol_meta_checksum obj = {.algo = OL_META_CKS_CRC32, .flags = OL_META_CKS_COMPOSITE,
                                   .parts = 2};
    memcpy(obj.sum, "\x0a\x0b\x0c\x0d", 4);
    /* the object's checksum is required with the upload's algorithm */
    OLT_CHECK_EQ(complete(&e, "ck", "k", id, p, 2), -EINVAL);
    /* a part checksum that differs from the one uploaded */
    p[1].cks[0] ^= 1;
    OLT_CHECK_EQ(complete_full(&e, "ck", "k", id, p, 2, &obj, NULL), OL_STORE_EBADPART);
    p[1].cks[0] ^= 1;
    OLT_CHECK_EQ(complete_full(&e, "ck", "k", id, p, 2, &obj, NULL), 0);
    uint8_t *want = malloc(big + 1000);
    memcpy(want, a, big);
    memcpy(want + big, a, 1000);
    sh_check_get(&e, "ck", "k", want, big + 1000);
    free(want);
    /* the version carries the composite checksum and each part's */
    char dir[700], mp[800];
    sh_obj_dir(&e, 0, "ck", "k", dir, sizeof dir);
    snprintf(mp, sizeof mp, "%s/meta", dir);
    static uint8_t buf[1 << 20];
    int fd = open(mp, O_RDONLY);
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    struct ol_meta_file f;
    struct ol_meta_version v;
    OLT_CHECK_EQ(ol_meta_open(buf, (size_t)n, &f), 0);
    OLT_CHECK_EQ(ol_meta_latest(&f, &v), 0);
    OLT_CHECK_EQ(v.cks.algo, OL_META_CKS_CRC32);
    OLT_CHECK_EQ(v.cks.flags, OL_META_CKS_COMPOSITE);
    OLT_CHECK_MEM(v.cks.sum, "\x0a\x0b\x0c\x0d", 4);
    OLT_CHECK_EQ(v.hdr[OL_META_HDR_CONTENT_TYPE].len, 9);
    OLT_CHECK_EQ(v.user_count, 1);
    struct ol_meta_part pt;
    OLT_CHECK_EQ(ol_meta_part_at(&v, 1, &pt), 0);
    OLT_CHECK_MEM(pt.cks, "\x05\x06\x07\x08", 4);
    OLT_CHECK_EQ(pt.size, 1000);
    free(a);
    env_close(&e);
}

/* Complete's checksum hook for the tests: records what it was given,
 * answers ret, else the checksum sum (CRC32). */
struct hook {
    unsigned calls, n;
    struct ol_meta_part parts[4];
    int ret;
    uint8_t sum[4];
};

static int hook_fn(void *ud, const struct ol_meta_part *parts, unsigned n,
                   struct ol_meta_checksum *out)
{
    struct hook *h = ud;
    h->calls++;
    h->n = n;
    memcpy(h->parts, parts, (n < 4 ? n : 4) * sizeof *parts);
    if (h->ret)
        return h->ret;
    memset(out, 0, sizeof *out);
    out->algo = OL_META_CKS_CRC32;
    memcpy(out->sum, h->sum, 4);
    return 0;
}

static int complete_hook(struct sh_env *e, const char *b, const char *k, const uint8_t id[16],
                         struct ol_meta_part *parts, unsigned n, const uint8_t *given,
                         struct hook *h, const struct ol_meta_checksum *cks)
{
    struct sh_call t;
    memset(&t, 0, sizeof t);
    t.cpa = (struct ol_mpu_complete_args){.bucket = b, .key = k, .upload_id = id,
                                          .parts = parts, .nparts = n, .cks = cks,
                                          .cks_fn = h ? hook_fn : NULL, .cks_ud = h,
                                          .cks_given = given};
    return sh_call(e, &t, fn_complete);
}

/* UploadPart of data[0..size) with a 4-byte CRC32 checksum value. */
static int part_crc(struct sh_env *e, const char *b, const char *k, const uint8_t id[16],
                    uint32_t number, const uint8_t *data, uint64_t size, const char *crc,
                    uint8_t etag[16])
{
    struct sh_call t;
    part_call(&t, b, k, id, number, data, size);
    t.cks_algo = OL_META_CKS_CRC32;
    memcpy(t.cks, crc, 4);
    memcpy(etag, t.etag, 16);
    return sh_call(e, &t, fn_put);
}

/* An upload created FULL_OBJECT keeps its type (record, registry, its
 * rebuild); Complete's hook sees the parts with their sizes and checksums,
 * the client's or, where it gave none, the records'; a hook's refusal
 * commits nothing and keeps the upload; what it makes is the object's
 * checksum, stored without the FULL_OBJECT flag. */
OLT_TEST_T(store_mpu_full_object_checksum_hook, 120)
{
    struct sh_env e;
    env_open(&e, 4, 4);
    OLT_CHECK_EQ(sh_bucket_create(&e, "fo"), 0);
    uint64_t big = 3ull * SH_STRIPE + 5;
    uint8_t *a = sh_pattern(big + 1000, 31), id[16], none[16] = {1};
    OLT_CHECK_EQ(create_cks(&e, "fo", "k", OL_META_CKS_CRC32, OL_META_CKS_FULL_OBJECT, id), 0);
    uint8_t algo = 0, flags = 0;
    OLT_CHECK_EQ(ol_mpu_upload_checksum(e.c, "fo", "k", id, &algo, &flags), 0);
    OLT_CHECK_EQ(algo, OL_META_CKS_CRC32);
    OLT_CHECK_EQ(flags, OL_META_CKS_FULL_OBJECT);
    OLT_CHECK_EQ(ol_mpu_upload_checksum(e.c, "fo", "k", none, &algo, &flags),
                 OL_STORE_ENOUPLOAD);
    OLT_CHECK_EQ(ol_mpu_upload_checksum(e.c, "fo", "other", id, &algo, &flags),
                 OL_STORE_ENOUPLOAD);
    struct ol_meta_part p[2];
    memset(p, 0, sizeof p);
    p[0].number = 1;
    p[1].number = 2;
    OLT_CHECK_EQ(part_crc(&e, "fo", "k", id, 1, a, big, "\x01\x02\x03\x04", p[0].etag), 0);
    OLT_CHECK_EQ(part_crc(&e, "fo", "k", id, 2, a + big, 1000, "\x05\x06\x07\x08", p[1].etag),
                 0);
    env_reopen(&e);   /* the type comes back from the record */
    flags = 0;
    OLT_CHECK_EQ(ol_mpu_upload_checksum(e.c, "fo", "k", id, &algo, &flags), 0);
    OLT_CHECK_EQ(flags, OL_META_CKS_FULL_OBJECT);
    struct sh_call r;
    struct ol_mpu_part_info info[4];
    OLT_CHECK_EQ(list_parts(&e, "fo", "k", id, 0, 4, info, &r), 0);
    OLT_CHECK_EQ(r.lpa.cks_flags, OL_META_CKS_FULL_OBJECT);
    /* part 1's checksum given, part 2's not */
    memcpy(p[0].cks, "\x01\x02\x03\x04", 4);
    uint8_t given[2] = {0x01, 0};
    struct hook h = {.ret = OL_STORE_EBADDIGEST};
    struct ol_meta_checksum obj = {.algo = OL_META_CKS_CRC32};
    OLT_CHECK_EQ(complete_hook(&e, "fo", "k", id, p, 2, given, &h, &obj), -EINVAL);
    OLT_CHECK_EQ(complete_hook(&e, "fo", "k", id, p, 2, given, NULL, NULL), -EINVAL);
    OLT_CHECK_EQ(complete_hook(&e, "fo", "k", id, p, 2, given, &h, NULL), OL_STORE_EBADDIGEST);
    OLT_CHECK_EQ(h.calls, 1);
    OLT_CHECK_EQ(h.n, 2);
    OLT_CHECK_EQ(h.parts[0].actual_size, big);
    OLT_CHECK_EQ(h.parts[1].actual_size, 1000);
    OLT_CHECK_MEM(h.parts[1].cks, "\x05\x06\x07\x08", 4);   /* from the record */
    OLT_CHECK_EQ(ol_store_mpu_count(e.s), 1);                  /* still there */
    /* a given checksum that differs: InvalidPart, the hook not asked */
    p[0].cks[3] ^= 1;
    OLT_CHECK_EQ(complete_hook(&e, "fo", "k", id, p, 2, given, &h, NULL), OL_STORE_EBADPART);
    OLT_CHECK_EQ(h.calls, 1);
    p[0].cks[3] ^= 1;
    memset(p[1].cks, 0, sizeof p[1].cks);
    h.ret = 0;
    memcpy(h.sum, "\xde\xad\xbe\xef", 4);
    OLT_CHECK_EQ(complete_hook(&e, "fo", "k", id, p, 2, given, &h, NULL), 0);
    OLT_CHECK_EQ(h.calls, 2);
    OLT_CHECK_EQ(ol_store_mpu_count(e.s), 0);
    sh_check_get(&e, "fo", "k", a, big + 1000);
    struct ol_meta_version v;
    static uint8_t buf[1 << 20];
    OLT_CHECK(sh_drive_meta(&e, 0, "fo", "k", buf, sizeof buf, &v));
    OLT_CHECK_EQ(v.cks.algo, OL_META_CKS_CRC32);
    OLT_CHECK_EQ(v.cks.flags, 0);
    OLT_CHECK_EQ(v.cks.parts, 0);
    OLT_CHECK_MEM(v.cks.sum, "\xde\xad\xbe\xef", 4);
    struct ol_meta_part pt;
    OLT_CHECK_EQ(ol_meta_part_at(&v, 1, &pt), 0);
    OLT_CHECK_MEM(pt.cks, "\x05\x06\x07\x08", 4);
    free(a);
    env_close(&e);
}

/* Uploads two parts of 150000 and 120000 bytes of a[] to a new upload of b/k. */
static void two_parts(struct sh_env *e, const char *b, const char *k, const uint8_t *a,
                      uint8_t id[16], struct ol_meta_part p[2])
{
    memset(p, 0, 2 * sizeof *p);
    OLT_CHECK_EQ(create(e, b, k, id), 0);
    p[0].number = 1;
    p[1].number = 2;
    OLT_CHECK_EQ(part(e, b, k, id, 1, a, 150000, p[0].etag), 0);
    OLT_CHECK_EQ(part(e, b, k, id, 2, a + 150000, 120000, p[1].etag), 0);
}

OLT_TEST_T(store_mpu_complete_leaves_out_a_drive_missing_a_part, 120)
{
    struct sh_env e;
    env_open(&e, 6, 3); /* two sets of k 2 + m 1: write quorum 2 */
    OLT_CHECK_EQ(sh_bucket_create(&e, "dg"), 0);
    uint8_t *a = sh_pattern(270000, 31), id[16];
    struct ol_meta_part p[2];
    two_parts(&e, "dg", "obj", a, id, p);
    unsigned set = ol_store_set_of(e.s, "dg", "obj"), lost = set * 3 + 1;
    char ud[700], pp[800];
    upload_dir(&e, lost, "dg", "obj", id, ud, sizeof ud);
    snprintf(pp, sizeof pp, "%s/data/part.2", ud);
    OLT_CHECK_EQ(unlink(pp), 0);
    OLT_CHECK_EQ(complete(&e, "dg", "obj", id, p, 2), 0);
    sh_check_get(&e, "dg", "obj", a, 270000);
    OLT_CHECK(!exists(ud)); /* the drive left out lost the upload too */
    char dir[700];
    sh_obj_dir(&e, lost, "dg", "obj", dir, sizeof dir);
    OLT_CHECK_EQ(sh_count_entries(dir), -1); /* and never got the object */
    struct ol_store_stats st = sh_stats(&e);
    OLT_CHECK_EQ(st.write_drive_failures, 1);
    OLT_CHECK_EQ(st.needs_heal, 2); /* the Complete, and the GET that saw the drive */
    /* two drives of three without the part: no quorum can hold it */
    two_parts(&e, "dg", "obj2", a, id, p);
    set = ol_store_set_of(e.s, "dg", "obj2");
    for (unsigned d = 0; d < 2; d++) {
        upload_dir(&e, set * 3 + d, "dg", "obj2", id, ud, sizeof ud);
        snprintf(pp, sizeof pp, "%s/data/part.1", ud);
        OLT_CHECK_EQ(unlink(pp), 0);
    }
    OLT_CHECK_EQ(complete(&e, "dg", "obj2", id, p, 2), OL_STORE_EBADPART);
    OLT_CHECK_EQ(ol_store_mpu_count(e.s), 1);
    free(a);
    env_close(&e);
}

OLT_TEST_T(store_mpu_complete_below_quorum_is_undone, 120)
{
    struct sh_env e;
    env_open(&e, 4, 4); /* k 2 + m 2: write quorum 3 */
    OLT_CHECK_EQ(sh_bucket_create(&e, "uq"), 0);
    uint8_t *a = sh_pattern(270000, 33), *old = sh_pattern(100000, 34), id[16];
    OLT_CHECK_EQ(put(&e, "uq", "x", old, 100000), 0);
    struct ol_meta_part p[2];
    two_parts(&e, "uq", "x", a, id, p);
    /* two drives cannot take new metadata ("meta" became a directory) */
    for (unsigned d = 0; d < 2; d++) {
        char dir[700], q[800];
        sh_obj_dir(&e, d, "uq", "x", dir, sizeof dir);
        snprintf(q, sizeof q, "%s/meta", dir);
        OLT_CHECK_EQ(unlink(q), 0);
        OLT_CHECK_EQ(mkdir(q, 0700), 0);
    }
    OLT_CHECK_EQ(complete(&e, "uq", "x", id, p, 2), -EIO);
    sh_check_get(&e, "uq", "x", old, 100000); /* the old object, put back */
    char u[37];
    ol_format_uuid_str(id, u);
    for (unsigned d = 0; d < 4; d++) { /* the data went back into the upload */
        char ud[700], dd[800], dir[700], od[800];
        upload_dir(&e, d, "uq", "x", id, ud, sizeof ud);
        snprintf(dd, sizeof dd, "%s/data", ud);
        OLT_CHECK_EQ(sh_count_entries(dd), 2);
        sh_obj_dir(&e, d, "uq", "x", dir, sizeof dir);
        snprintf(od, sizeof od, "%s/%s", dir, u);
        OLT_CHECK(!exists(od));
    }
    OLT_CHECK_EQ(ol_store_mpu_count(e.s), 1);
    struct ol_mpu_part_info info[4];
    struct sh_call r;
    OLT_CHECK_EQ(list_parts(&e, "uq", "x", id, 0, 4, info, &r), 0);
    OLT_CHECK_EQ(r.lpa.count, 2);
    /* repaired: the same Complete now succeeds */
    for (unsigned d = 0; d < 2; d++) {
        char dir[700], q[800];
        sh_obj_dir(&e, d, "uq", "x", dir, sizeof dir);
        snprintf(q, sizeof q, "%s/meta", dir);
        OLT_CHECK_EQ(rmdir(q), 0);
    }
    OLT_CHECK_EQ(complete(&e, "uq", "x", id, p, 2), 0);
    sh_check_get(&e, "uq", "x", a, 270000);
    sh_check_tmp_empty(&e);
    free(a);
    free(old);
    env_close(&e);
}

OLT_TEST_T(store_mpu_part_files_swapped_never_verify, 120)
{
    struct sh_env e;
    env_open(&e, 4, 4);
    OLT_CHECK_EQ(sh_bucket_create(&e, "sw"), 0);
    uint8_t *a = sh_pattern(200000, 35), id[16];
    struct ol_meta_part p[2];
    memset(p, 0, sizeof p);
    OLT_CHECK_EQ(create(&e, "sw", "k", id), 0);
    p[0].number = 1;
    p[1].number = 2;
    OLT_CHECK_EQ(part(&e, "sw", "k", id, 1, a, 100000, p[0].etag), 0); /* same sizes */
    OLT_CHECK_EQ(part(&e, "sw", "k", id, 2, a + 100000, 100000, p[1].etag), 0);
    OLT_CHECK_EQ(complete(&e, "sw", "k", id, p, 2), 0);
    unsigned d = sh_drive_with_shard(&e, "sw", "k", 0);
    char dir[700], p1[800], p2[800], tmp[800], u[37];
    sh_obj_dir(&e, d, "sw", "k", dir, sizeof dir);
    ol_format_uuid_str(id, u);
    snprintf(p1, sizeof p1, "%s/%s/part.1", dir, u);
    snprintf(p2, sizeof p2, "%s/%s/part.2", dir, u);
    snprintf(tmp, sizeof tmp, "%s/%s/swap", dir, u);
    OLT_CHECK_EQ(rename(p1, tmp), 0);
    OLT_CHECK_EQ(rename(p2, p1), 0);
    OLT_CHECK_EQ(rename(tmp, p2), 0);
    sh_check_get(&e, "sw", "k", a, 200000);
    struct ol_store_stats st = sh_stats(&e);
    OLT_CHECK(st.checksum_failures >= 2); /* each part's blocks fail in the other's file */
    OLT_CHECK(st.reads_reconstructed >= 2);
    free(a);
    env_close(&e);
}

OLT_TEST_T(store_mpu_many_sparse_parts, 120)
{
    struct sh_env e;
    env_open(&e, 4, 4);
    sh_env_stop(&e, false);
    e.p.mpu_min_part = 1; /* parts of any size */
    sh_env_start(&e);
    OLT_CHECK_EQ(sh_bucket_create(&e, "many"), 0);
    enum { N = 41 };
    struct ol_meta_part p[N];
    uint64_t off[N + 1];
    memset(p, 0, sizeof p);
    off[0] = 0;
    for (unsigned i = 0; i < N; i++) {
        p[i].number = i + 1 == N ? 10000 : 1 + 249 * i; /* 1, 250, ..., 9961, 10000 */
        off[i + 1] = off[i] + 1 + (i * 7919u) % 3000;
    }
    uint64_t total = off[N];
    uint8_t *all = sh_pattern(total, 41), id[16];
    OLT_CHECK_EQ(create(&e, "many", "k", id), 0);
    for (unsigned i = N; i-- > 0;)
        OLT_CHECK_EQ(part(&e, "many", "k", id, p[i].number, all + off[i], off[i + 1] - off[i],
                          p[i].etag), 0);
    OLT_CHECK_EQ(part(&e, "many", "k", id, 9999, all, 10, NULL), 0); /* not listed */
    struct ol_mpu_part_info info[N + 2];
    struct sh_call r;
    OLT_CHECK_EQ(list_parts(&e, "many", "k", id, 0, N + 2, info, &r), 0);
    OLT_CHECK_EQ(r.lpa.count, N + 1);
    OLT_CHECK_EQ(info[N - 1].number, 9999);
    OLT_CHECK_EQ(info[N].number, 10000);
    struct sh_call c;
    OLT_CHECK_EQ(complete_full(&e, "many", "k", id, p, N, NULL, &c), 0);
    uint8_t want[16], cat[16 * N];
    for (unsigned i = 0; i < N; i++)
        memcpy(cat + 16 * i, p[i].etag, 16);
    md5(cat, sizeof cat, want);
    OLT_CHECK_MEM(c.cpa.etag, want, 16);
    sh_check_get(&e, "many", "k", all, total);
    uint8_t *buf = malloc(total);
    uint64_t got = 0;
    OLT_CHECK_EQ(sh_get_range(&e, "many", "k", off[3] + 1, (int64_t)(off[20] - off[3]), buf, total,
                           &got), 0); /* across 17 parts */
    OLT_CHECK_EQ(got, off[20] - off[3]);
    OLT_CHECK_MEM(buf, all + off[3] + 1, got);
    OLT_CHECK_EQ(get_part(&e, "many", "k", 10000, buf, total, &got), 0);
    OLT_CHECK_EQ(got, off[N] - off[N - 1]);
    OLT_CHECK_MEM(buf, all + off[N - 1], got);
    OLT_CHECK_EQ(get_part(&e, "many", "k", 9999, buf, total, NULL), -ENOENT);
    char dir[700], dd[800], u[37];
    sh_obj_dir(&e, 0, "many", "k", dir, sizeof dir);
    ol_format_uuid_str(id, u);
    snprintf(dd, sizeof dd, "%s/%s", dir, u);
    OLT_CHECK_EQ(sh_count_entries(dd), N); /* 9999 was removed */
    free(buf);
    free(all);
    env_close(&e);
}

/* ol_store_heal_object on an object of three parts: a deleted part file
 * and a flipped byte in another drive's part are rebuilt (the blocks byte
 * for byte; the part record that followed them is not rewritten). */
OLT_TEST_T(store_mpu_heal_parts, 120)
{
    sh_local_only("heal walks only this node's drives: a cluster store's remote drives are not healed yet");
    struct sh_env e;
    env_open(&e, 4, 4);
    uint64_t sz[3] = {140001, 133333, 5};
    uint64_t total = sz[0] + sz[1] + sz[2];
    uint8_t *all = three_parts(&e, "heal", sz, 13);
    static uint8_t mbuf[1 << 20];
    struct ol_meta_version v;
    OLT_CHECK(sh_drive_meta(&e, 1, "heal", "o", mbuf, sizeof mbuf, &v));
    char dir[600], u[37], p2[700], p3[700];
    ol_format_uuid_str(v.data_dir, u);
    sh_obj_dir(&e, 1, "heal", "o", dir, sizeof dir);
    snprintf(p2, sizeof p2, "%s/%s/part.2", dir, u);
    sh_obj_dir(&e, 3, "heal", "o", dir, sizeof dir);
    snprintf(p3, sizeof p3, "%s/%s/part.3", dir, u);
    /* the blocks of part 2 on drive 1 and part 3 on drive 3, as written */
    uint64_t n3 = 8 + 64; /* part 3: 5 bytes, one block of a 64-byte shard */
    uint8_t b2[200000], b3[64 + 8];
    int fd = open(p2, O_RDONLY);
    OLT_CHECK(fd >= 0);
    ssize_t l2 = pread(fd, b2, sizeof b2, 0);
    close(fd);
    OLT_CHECK(l2 > 0);
    fd = open(p3, O_RDWR);
    OLT_CHECK(fd >= 0);
    OLT_CHECK_EQ(pread(fd, b3, n3, 0), (ssize_t)n3);
    uint8_t x = b3[10] ^ 0x33;
    OLT_CHECK_EQ(pwrite(fd, &x, 1, 10), 1);
    close(fd);
    OLT_CHECK_EQ(unlink(p2), 0);
    sh_check_get(&e, "heal", "o", all, total);

    struct ol_heal_result res;
    OLT_CHECK_EQ(ol_store_heal_object(e.s, "heal", "o", 0, &res), 0);
    OLT_CHECK_EQ(res.shards_bad, 2);
    OLT_CHECK_EQ(res.drives_healed, 2);
    uint8_t g[200000];
    fd = open(p2, O_RDONLY);
    OLT_CHECK(fd >= 0);
    ssize_t h2 = pread(fd, g, sizeof g, 0);
    close(fd);
    OLT_CHECK(h2 > 0 && h2 < l2); /* the blocks, without the record */
    OLT_CHECK_MEM(g, b2, (size_t)h2);
    fd = open(p3, O_RDONLY);
    OLT_CHECK(fd >= 0);
    OLT_CHECK_EQ(pread(fd, g, sizeof g, 0), (ssize_t)n3);
    close(fd);
    OLT_CHECK_MEM(g, b3, n3);
    OLT_CHECK_EQ(ol_store_heal_object(e.s, "heal", "o", 0, &res), 0);
    OLT_CHECK_EQ(res.shards_bad, 0);
    struct ol_store_stats before = sh_stats(&e);
    sh_check_get(&e, "heal", "o", all, total);
    OLT_CHECK_EQ(sh_stats(&e).reads_reconstructed, before.reads_reconstructed);
    free(all);
    env_close(&e);
}
