/*
 * test_store_meta.c - unit tests of src/store/meta.c, the per-object
 * metadata file codec: round trips of every field (objects, delete markers,
 * multipart parts, inline data, user metadata, every checksum kind), the
 * object key, the newest-first order, put / replace-null / update / remove rewriting with
 * unchanged records copied byte for byte, every limit at and one over,
 * every byte of a file flipped, every truncation, unknown format versions,
 * structural corruption behind a valid checksum, duplicate version ids,
 * files ending exactly at a PROT_NONE guard page, and the worked example
 * of docs/store-meta.md byte for byte.
 */
#include "olt.h"

#include "store/meta.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

/* ---- helpers ---------------------------------------------------------- */

/* The object key of most files here, and where their first record starts. */
#define KEY   "photos/2024/cat.jpg"
#define KLEN  (sizeof KEY - 1)
#define EMPTY ((int)OL_META_EMPTY_LEN(KLEN))
#define FIRST ((int)(OL_META_HDR_LEN + 2 + KLEN))

static uint32_t ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static void st16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void st32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void st64(uint8_t *p, uint64_t v)
{
    st32(p, (uint32_t)v);
    st32(p + 4, (uint32_t)(v >> 32));
}

/* Recomputes the trailer after a test patched a file. */
static void refix(uint8_t *f, size_t n)
{
    st64(f + n - 8, XXH3_64bits(f, n - 8));
}

static struct ol_meta_bytes S(const char *s)
{
    return (struct ol_meta_bytes){(const uint8_t *)s, (uint32_t)strlen(s)};
}

static bool bytes_eq(struct ol_meta_bytes b, const void *p, size_t n)
{
    return b.len == n && (n == 0 || memcmp(b.p, p, n) == 0);
}

static bool bytes_is(struct ol_meta_bytes b, const char *s)
{
    return bytes_eq(b, s, strlen(s));
}

static void vid_of(uint8_t vid[16], unsigned x)
{
    memset(vid, 0, 16);
    st32(vid, x);
    vid[15] = 0xA5;
}

/* An object version with every scalar field set, no strings/parts/inline. */
static void base_object(struct ol_meta_version *v, unsigned id)
{
    memset(v, 0, sizeof *v);
    v->type = OL_META_OBJECT;
    vid_of(v->vid, id);
    v->mtime_ns = 1700000000123456789ull + id;
    v->size = 123456789012ull;
    for (int i = 0; i < 16; i++) {
        v->etag[i] = (uint8_t)(0xA0 + i);
        v->data_dir[i] = (uint8_t)(0x10 + i);
    }
    v->storage_class = OL_META_SC_STANDARD;
    v->ec.k = 4;
    v->ec.m = 2;
    v->ec.index = 3;
    v->ec.block_size = 1u << 20;
    const uint8_t dist[6] = {2, 0, 5, 1, 3, 4};
    memcpy(v->ec.dist, dist, 6);
}

static void delete_marker(struct ol_meta_version *v, unsigned id)
{
    memset(v, 0, sizeof *v);
    v->type = OL_META_DELETE_MARKER;
    vid_of(v->vid, id);
    v->mtime_ns = 1800000000000000000ull + id;
}

/* Encodes n versions into a fresh exact-size allocation. */
static uint8_t *encode(const struct ol_meta_version *const *vs, unsigned n, int *len)
{
    int want = EMPTY;
    for (unsigned i = 0; i < n; i++) {
        int s = ol_meta_version_size(vs[i]);
        OLT_CHECK(s > 0);
        want += s;
    }
    uint8_t *buf = malloc((size_t)want);
    OLT_CHECK(buf);
    OLT_CHECK_EQ(ol_meta_encode(KEY, KLEN, vs, n, buf, (size_t)want - 1), -ENOSPC);
    *len = ol_meta_encode(KEY, KLEN, vs, n, buf, (size_t)want);
    OLT_CHECK_EQ(*len, want);
    return buf;
}

static uint8_t *encode1(const struct ol_meta_version *v, int *len)
{
    const struct ol_meta_version *vs[1] = {v};
    return encode(vs, 1, len);
}

/* Every field of the decoded d equals the (array-form) source s. */
static void check_same(const struct ol_meta_version *s, const struct ol_meta_version *d)
{
    OLT_CHECK_EQ(d->type, s->type);
    OLT_CHECK_MEM(d->vid, s->vid, 16);
    OLT_CHECK(d->mtime_ns == s->mtime_ns);
    if (s->type == OL_META_DELETE_MARKER) {
        OLT_CHECK(d->size == 0 && d->part_count == 0 && !d->has_inline && d->ec.k == 0);
        return;
    }
    OLT_CHECK(d->size == s->size);
    OLT_CHECK_MEM(d->etag, s->etag, 16);
    OLT_CHECK_EQ(d->etag_parts, s->etag_parts);
    OLT_CHECK_EQ(d->storage_class, s->storage_class);
    OLT_CHECK_EQ(d->cks.algo, s->cks.algo);
    OLT_CHECK_EQ(d->cks.flags, s->cks.flags);
    OLT_CHECK_EQ(d->cks.parts, s->cks.parts);
    int L = ol_meta_cks_len(s->cks.algo);
    OLT_CHECK(L >= 0);
    OLT_CHECK_MEM(d->cks.sum, s->cks.sum, (size_t)L);
    OLT_CHECK_EQ(d->ec.k, s->ec.k);
    OLT_CHECK_EQ(d->ec.m, s->ec.m);
    OLT_CHECK_EQ(d->ec.index, s->ec.index);
    OLT_CHECK_EQ(d->ec.block_size, s->ec.block_size);
    OLT_CHECK_MEM(d->ec.dist, s->ec.dist, (size_t)s->ec.k + s->ec.m);
    OLT_CHECK_MEM(d->data_dir, s->data_dir, 16);
    for (int i = 0; i < OL_META_HDR__COUNT; i++)
        OLT_CHECK(bytes_eq(d->hdr[i], s->hdr[i].p, s->hdr[i].len));
    OLT_CHECK(bytes_eq(d->tagging, s->tagging.p, s->tagging.len));
    OLT_CHECK_EQ(d->user_count, s->user_count);
    OLT_CHECK(d->user == NULL && d->user_enc.p != NULL);
    uint32_t ps = 0, pd = 0;
    struct ol_meta_kv ks, kd;
    unsigned pairs = 0;
    while (ol_meta_user_next(s, &ps, &ks) == 1) {
        OLT_CHECK_EQ(ol_meta_user_next(d, &pd, &kd), 1);
        OLT_CHECK(bytes_eq(kd.name, ks.name.p, ks.name.len));
        OLT_CHECK(bytes_eq(kd.value, ks.value.p, ks.value.len));
        pairs++;
    }
    OLT_CHECK_EQ(ol_meta_user_next(d, &pd, &kd), 0);
    OLT_CHECK_EQ(pairs, s->user_count);
    OLT_CHECK_EQ(d->part_count, s->part_count);
    OLT_CHECK(d->parts == NULL && d->parts_enc != NULL);
    for (unsigned i = 0; i < s->part_count; i++) {
        struct ol_meta_part a, b;
        OLT_CHECK_EQ(ol_meta_part_at(s, i, &a), 0);
        OLT_CHECK_EQ(ol_meta_part_at(d, i, &b), 0);
        OLT_CHECK_EQ(b.number, a.number);
        OLT_CHECK(b.size == a.size && b.actual_size == a.actual_size);
        OLT_CHECK_MEM(b.etag, a.etag, 16);
        OLT_CHECK_MEM(b.cks, a.cks, (size_t)L);
    }
    OLT_CHECK_EQ(d->has_inline, s->has_inline);
    OLT_CHECK_EQ(d->flat, s->flat);
    if (s->has_inline) {
        OLT_CHECK(bytes_eq(d->inline_data, s->inline_data.p, s->inline_data.len));
        OLT_CHECK(d->inline_sum == XXH3_64bits(s->inline_data.p, s->inline_data.len));
    }
}

/* Opens buf, checks its single version against s, and that the decoded
 * version re-encodes to the same bytes. */
static void roundtrip1(const struct ol_meta_version *s)
{
    int n;
    uint8_t *buf = encode1(s, &n);
    struct ol_meta_file f;
    OLT_CHECK_EQ(ol_meta_open(buf, (size_t)n, &f), 0);
    OLT_CHECK_EQ(f.count, 1);
    struct ol_meta_version d;
    OLT_CHECK_EQ(ol_meta_next(&f, &d), 1);
    check_same(s, &d);
    OLT_CHECK(d.raw.p == buf + FIRST);
    OLT_CHECK(bytes_is(f.key, KEY));
    OLT_CHECK_EQ(d.raw.len, (uint32_t)n - EMPTY);
    OLT_CHECK_EQ(ol_meta_version_size(&d), d.raw.len);
    struct ol_meta_version e;
    OLT_CHECK_EQ(ol_meta_next(&f, &e), 0);
    /* decode -> encode: the same bytes */
    int n2;
    uint8_t *again = encode1(&d, &n2);
    OLT_CHECK_EQ(n2, n);
    OLT_CHECK_MEM(again, buf, (size_t)n);
    free(again);
    free(buf);
}

/* A "full" object: strings, user metadata, tagging, parts, SHA-256. */
static const struct ol_meta_kv full_user[3] = {
    {{(const uint8_t *)"alpha", 5}, {(const uint8_t *)"1", 1}},
    {{(const uint8_t *)"alphabet", 8}, {(const uint8_t *)"", 0}},
    {{(const uint8_t *)"zeta", 4}, {(const uint8_t *)"z\0z", 3}},
};

static struct ol_meta_part full_parts[3];

static void full_object(struct ol_meta_version *v, unsigned id)
{
    base_object(v, id);
    v->etag_parts = 3;
    v->storage_class = OL_META_SC_REDUCED_REDUNDANCY;
    v->cks.algo = OL_META_CKS_SHA256;
    v->cks.flags = OL_META_CKS_COMPOSITE;
    v->cks.parts = 3;
    for (int i = 0; i < 32; i++)
        v->cks.sum[i] = (uint8_t)(i * 7 + 1);
    v->hdr[OL_META_HDR_CONTENT_TYPE] = S("application/x-tar");
    v->hdr[OL_META_HDR_CONTENT_ENCODING] = S("gzip");
    v->hdr[OL_META_HDR_CONTENT_DISPOSITION] = S("attachment; filename=\"a b.tgz\"");
    v->hdr[OL_META_HDR_CONTENT_LANGUAGE] = S("en-GB");
    v->hdr[OL_META_HDR_CACHE_CONTROL] = S("max-age=3600");
    v->hdr[OL_META_HDR_EXPIRES] = S("Thu, 01 Dec 1994 16:00:00 GMT");
    v->tagging = S("project=lake&team=a%20b");
    v->user = full_user;
    v->user_count = 3;
    for (int i = 0; i < 3; i++) {
        memset(&full_parts[i], 0, sizeof full_parts[i]);
        full_parts[i].number = (uint32_t)(i * 2 + 1);
        full_parts[i].size = (5ull << 20) + (uint64_t)i;
        full_parts[i].actual_size = (5ull << 20) - (uint64_t)i;
        memset(full_parts[i].etag, 0x30 + i, 16);
        memset(full_parts[i].cks, 0x60 + i, 32);
    }
    v->parts = full_parts;
    v->part_count = 3;
}

/* ---- round trips ------------------------------------------------------ */

OLT_TEST(store_meta_roundtrip_object)
{
    struct ol_meta_version v;
    base_object(&v, 1);
    roundtrip1(&v);
    OLT_CHECK_EQ(ol_meta_version_size(&v), OL_META_OBJ_FIXED + 6 + 6 * 2 + 2 + 2);
    full_object(&v, 2);
    roundtrip1(&v);
    /* every header alone */
    for (int h = 0; h < OL_META_HDR__COUNT; h++) {
        base_object(&v, 3);
        v.hdr[h] = S("only-this-one");
        roundtrip1(&v);
    }
    /* the largest shard set, a one-shard set */
    base_object(&v, 4);
    v.ec.k = 48;
    v.ec.m = 16;
    v.ec.index = 63;
    for (int i = 0; i < 64; i++)
        v.ec.dist[i] = (uint8_t)(63 - i);
    roundtrip1(&v);
    base_object(&v, 5);
    v.ec.k = 1;
    v.ec.m = 0;
    v.ec.index = 0;
    v.ec.dist[0] = 0;
    v.size = 0;
    roundtrip1(&v);
}

OLT_TEST(store_meta_roundtrip_delete_marker)
{
    struct ol_meta_version v;
    delete_marker(&v, 9);
    OLT_CHECK_EQ(ol_meta_version_size(&v), OL_META_DM_LEN);
    roundtrip1(&v);
    /* object fields of a delete marker are ignored on encode */
    full_object(&v, 9);
    v.type = OL_META_DELETE_MARKER;
    v.has_inline = true;
    OLT_CHECK_EQ(ol_meta_version_size(&v), OL_META_DM_LEN);
    int n;
    uint8_t *buf = encode1(&v, &n);
    OLT_CHECK_EQ(n, EMPTY + OL_META_DM_LEN);
    struct ol_meta_file f;
    struct ol_meta_version d;
    OLT_CHECK_EQ(ol_meta_open(buf, (size_t)n, &f), 0);
    OLT_CHECK_EQ(ol_meta_latest(&f, &d), 0);
    OLT_CHECK_EQ(d.type, OL_META_DELETE_MARKER);
    OLT_CHECK(d.size == 0 && d.user_count == 0 && d.tagging.len == 0 && !d.has_inline);
    free(buf);
    /* a null delete marker */
    delete_marker(&v, 0);
    memset(v.vid, 0, 16);
    OLT_CHECK(ol_meta_vid_is_null(v.vid));
    roundtrip1(&v);
}

OLT_TEST(store_meta_multipart_parts)
{
    struct ol_meta_version v;
    full_object(&v, 1);
    roundtrip1(&v);
    int n;
    uint8_t *buf = encode1(&v, &n);
    struct ol_meta_file f;
    struct ol_meta_version d;
    OLT_CHECK_EQ(ol_meta_open(buf, (size_t)n, &f), 0);
    OLT_CHECK_EQ(ol_meta_latest(&f, &d), 0);
    struct ol_meta_part p;
    OLT_CHECK_EQ(ol_meta_part_find(&d, 3, &p), 1);
    OLT_CHECK_EQ(p.number, 3);
    OLT_CHECK(p.size == (5ull << 20) + 1 && p.actual_size == (5ull << 20) - 1);
    OLT_CHECK_EQ(p.cks[31], 0x61);
    OLT_CHECK_EQ(ol_meta_part_find(&d, 5, &p), 2);
    OLT_CHECK_EQ(ol_meta_part_find(&d, 1, &p), 0);
    OLT_CHECK_EQ(ol_meta_part_find(&d, 2, &p), -ENOENT);
    OLT_CHECK_EQ(ol_meta_part_find(&d, 6, &p), -ENOENT);
    OLT_CHECK_EQ(ol_meta_part_at(&d, 3, &p), -ENOENT);
    OLT_CHECK_EQ(ol_meta_part_find(&v, 5, &p), 2); /* array form too */
    char etag[OL_META_ETAG_STRLEN];
    OLT_CHECK_EQ(ol_meta_etag_format(d.etag, d.etag_parts, etag, sizeof etag), 34);
    OLT_CHECK_STR(etag, "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf-3");
    free(buf);
    /* parts without a checksum: 36 bytes each */
    full_object(&v, 2);
    v.cks = (struct ol_meta_checksum){0};
    int with = ol_meta_version_size(&v);
    v.part_count = 1;
    OLT_CHECK_EQ(ol_meta_version_size(&v), with - 2 * OL_META_PART_FIXED);
    roundtrip1(&v);
    /* 10000 parts */
    struct ol_meta_part *many = calloc(OL_META_MAX_PARTS, sizeof *many);
    OLT_CHECK(many);
    for (unsigned i = 0; i < OL_META_MAX_PARTS; i++) {
        many[i].number = i + 1;
        many[i].size = many[i].actual_size = 5u << 20;
        many[i].cks[0] = (uint8_t)i;
    }
    full_object(&v, 3);
    v.parts = many;
    v.part_count = OL_META_MAX_PARTS;
    v.etag_parts = OL_META_MAX_PARTS;
    v.cks.parts = OL_META_MAX_PARTS;
    roundtrip1(&v);
    buf = encode1(&v, &n);
    OLT_CHECK_EQ(ol_meta_open(buf, (size_t)n, &f), 0);
    OLT_CHECK_EQ(ol_meta_latest(&f, &d), 0);
    OLT_CHECK_EQ(ol_meta_part_find(&d, 7777, &p), 7776);
    OLT_CHECK_EQ(p.cks[0], (uint8_t)7776);
    OLT_CHECK_EQ(ol_meta_etag_format(d.etag, d.etag_parts, etag, sizeof etag), 38);
    OLT_CHECK_STR(etag, "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf-10000");
    free(buf);
    free(many);
}

OLT_TEST(store_meta_inline_data)
{
    static uint8_t data[OL_META_MAX_INLINE];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 31 + 7);
    struct ol_meta_version v;
    const uint32_t lens[] = {0, 1, 4096, OL_META_MAX_INLINE};
    for (unsigned i = 0; i < 4; i++) {
        base_object(&v, 1);
        v.has_inline = true;
        v.inline_data = (struct ol_meta_bytes){data, lens[i]};
        v.inline_sum = 12345; /* ignored by the encoder */
        roundtrip1(&v);
    }
    /* the inline checksum is checked even behind a good trailer */
    base_object(&v, 1);
    v.has_inline = true;
    v.inline_data = (struct ol_meta_bytes){data, 100};
    int n;
    uint8_t *buf = encode1(&v, &n);
    struct ol_meta_file f;
    OLT_CHECK_EQ(ol_meta_open(buf, (size_t)n, &f), 0);
    buf[n - 8 - 50] ^= 1;   /* a byte of the inline data */
    refix(buf, (size_t)n);
    OLT_CHECK_EQ(ol_meta_open(buf, (size_t)n, &f), -EBADMSG);
    buf[n - 8 - 50] ^= 1;
    buf[n - 8 - 100 - 8] ^= 1; /* the stored inline sum */
    refix(buf, (size_t)n);
    OLT_CHECK_EQ(ol_meta_open(buf, (size_t)n, &f), -EBADMSG);
    free(buf);
    /* inline flag without data is an empty inline payload, not "absent" */
    base_object(&v, 1);
    int without = ol_meta_version_size(&v);
    v.has_inline = true;
    OLT_CHECK_EQ(ol_meta_version_size(&v), without + 12);
    roundtrip1(&v);
}

static void expect_bad(const uint8_t *buf, int n, int off, uint8_t val, int line);

OLT_TEST(store_meta_flat_data)
{
    struct ol_meta_part p;
    memset(&p, 0, sizeof p);
    p.number = 1;
    p.size = p.actual_size = 123456789012ull;
    struct ol_meta_version v;
    base_object(&v, 1);
    v.part_count = 1;
    v.parts = &p;
    v.flat = true;
    roundtrip1(&v);
    int n;
    uint8_t *buf = encode1(&v, &n);
    OLT_CHECK_EQ(buf[FIRST + 5], OL_META_VF_FLAT);
    struct ol_meta_version w;
    struct ol_meta_file f;
    OLT_CHECK_EQ(ol_meta_open(buf, (size_t)n, &f), 0);
    OLT_CHECK_EQ(ol_meta_latest(&f, &w), 0);
    OLT_CHECK(ol_meta_same_version(&v, &w));
    w.flat = false;                         /* the flag tells two versions apart */
    OLT_CHECK(!ol_meta_same_version(&v, &w));
    expect_bad(buf, n, FIRST + 5, OL_META_VF_FLAT | OL_META_VF_INLINE, __LINE__);
    free(buf);
    /* the encoder refuses a flat version that is inline or not one part */
    v.has_inline = true;
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    v.has_inline = false;
    v.part_count = 0;
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    struct ol_meta_part two[2] = {p, p};
    two[1].number = 2;
    v.parts = two;
    v.part_count = 2;
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    /* a decoder refuses the flag on a 2-part record */
    v.flat = false;
    buf = encode1(&v, &n);
    expect_bad(buf, n, FIRST + 5, OL_META_VF_FLAT, __LINE__);
    free(buf);
}

OLT_TEST(store_meta_user_metadata)
{
    struct ol_meta_version v;
    base_object(&v, 1);
    v.user = full_user;
    v.user_count = 3;
    roundtrip1(&v);
    /* unsorted, duplicate, empty name */
    struct ol_meta_kv kv[3] = {full_user[1], full_user[0], full_user[2]};
    v.user = kv;
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    kv[0] = full_user[0];
    kv[1] = full_user[0];
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    kv[1] = full_user[1];
    kv[0].name = S("");
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    /* count without an array */
    v.user = NULL;
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    /* the total limit: names and values together */
    static char big[OL_META_MAX_USER_BYTES + 1];
    memset(big, 'v', sizeof big);
    kv[0].name = S("n");
    kv[0].value = (struct ol_meta_bytes){(const uint8_t *)big, OL_META_MAX_USER_BYTES - 1};
    v.user = kv;
    v.user_count = 1;
    roundtrip1(&v);
    kv[0].value.len++;
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    kv[0].value.len = 1000;
    kv[1].name = S("o");
    kv[1].value = (struct ol_meta_bytes){(const uint8_t *)big, 1046}; /* 2048 in all */
    v.user_count = 2;
    OLT_CHECK(ol_meta_version_size(&v) > 0);
    kv[1].value.len++;
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    /* the encoded form: re-encodes; both forms at once is refused */
    base_object(&v, 1);
    v.user = full_user;
    v.user_count = 3;
    int n;
    uint8_t *buf = encode1(&v, &n);
    struct ol_meta_file f;
    struct ol_meta_version d;
    OLT_CHECK_EQ(ol_meta_open(buf, (size_t)n, &f), 0);
    OLT_CHECK_EQ(ol_meta_latest(&f, &d), 0);
    d.user = full_user;
    OLT_CHECK_EQ(ol_meta_version_size(&d), -EINVAL);
    d.user = NULL;
    d.user_count = 2; /* count disagrees with the bytes */
    OLT_CHECK_EQ(ol_meta_version_size(&d), -EINVAL);
    d.user_count = 3;
    d.user_enc.len--;
    OLT_CHECK_EQ(ol_meta_version_size(&d), -EINVAL);
    free(buf);
    /* names sort byte-wise, a prefix first; a name equal to a prefix */
    struct ol_meta_kv order[4] = {
        {S("A"), S("")}, {S("a"), S("")}, {S("ab"), S("")}, {S("b"), S("")},
    };
    base_object(&v, 1);
    v.user = order;
    v.user_count = 4;
    roundtrip1(&v);
}

OLT_TEST(store_meta_checksum_kinds)
{
    static const int lens[OL_META_CKS__COUNT] = {0, 4, 4, 8, 20, 32};
    struct ol_meta_version v;
    for (unsigned a = 0; a < OL_META_CKS__COUNT; a++) {
        OLT_CHECK_EQ(ol_meta_cks_len(a), lens[a]);
        for (unsigned comp = 0; comp < 2; comp++) {
            full_object(&v, a);
            v.cks.algo = (uint8_t)a;
            v.cks.flags = (uint8_t)(comp ? OL_META_CKS_COMPOSITE : 0);
            v.cks.parts = (uint16_t)(comp ? 3 : 0);
            if (a == OL_META_CKS_NONE && comp) {
                OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
                continue;
            }
            roundtrip1(&v);
            int s = ol_meta_version_size(&v);
            full_object(&v, a);
            v.cks = (struct ol_meta_checksum){0};
            OLT_CHECK_EQ(s, ol_meta_version_size(&v) + lens[a] * (1 + 3));
        }
    }
    OLT_CHECK_EQ(ol_meta_cks_len(OL_META_CKS__COUNT), -EINVAL);
    full_object(&v, 1);
    v.cks.algo = OL_META_CKS__COUNT;
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    full_object(&v, 1);
    v.cks.flags = 2;
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    full_object(&v, 1);
    v.cks.parts = 0; /* composite needs N */
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    v.cks.parts = OL_META_MAX_PARTS + 1;
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    v.cks.parts = OL_META_MAX_PARTS;
    OLT_CHECK(ol_meta_version_size(&v) > 0);
    v.cks.flags = 0; /* full-object with a part count */
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    /* FULL_OBJECT (an upload record's type): the CRCs, no part count, not
     * with COMPOSITE */
    for (unsigned a = 0; a < OL_META_CKS__COUNT; a++) {
        full_object(&v, 1);
        v.cks.algo = (uint8_t)a;
        v.cks.flags = OL_META_CKS_FULL_OBJECT;
        v.cks.parts = 0;
        if (a == OL_META_CKS_CRC32 || a == OL_META_CKS_CRC32C || a == OL_META_CKS_CRC64NVME)
            roundtrip1(&v);
        else
            OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    }
    full_object(&v, 1);
    v.cks.algo = OL_META_CKS_CRC32;
    v.cks.flags = OL_META_CKS_FULL_OBJECT;
    v.cks.parts = 2;
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    v.cks.flags = OL_META_CKS_FULL_OBJECT | OL_META_CKS_COMPOSITE;
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    v.cks.flags = 4;
    v.cks.parts = 0;
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
}

OLT_TEST(store_meta_newest_first)
{
    struct ol_meta_version a, b, c;
    full_object(&a, 30);
    delete_marker(&b, 20);
    base_object(&c, 10);
    const struct ol_meta_version *vs[3] = {&a, &b, &c};
    int n;
    uint8_t *buf = encode(vs, 3, &n);
    struct ol_meta_file f;
    OLT_CHECK_EQ(ol_meta_open(buf, (size_t)n, &f), 0);
    OLT_CHECK_EQ(f.count, 3);
    struct ol_meta_version d;
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 3; i++) {
            OLT_CHECK_EQ(ol_meta_next(&f, &d), 1);
            check_same(vs[i], &d);
        }
        OLT_CHECK_EQ(ol_meta_next(&f, &d), 0);
        OLT_CHECK_EQ(ol_meta_next(&f, &d), 0);
        ol_meta_rewind(&f);
    }
    OLT_CHECK_EQ(ol_meta_latest(&f, &d), 0);
    check_same(&a, &d);
    for (int i = 0; i < 3; i++) {
        OLT_CHECK_EQ(ol_meta_find(&f, vs[i]->vid, &d), i);
        check_same(vs[i], &d);
    }
    uint8_t other[16];
    vid_of(other, 99);
    OLT_CHECK_EQ(ol_meta_find(&f, other, &d), -ENOENT);
    memset(other, 0, 16);
    OLT_CHECK_EQ(ol_meta_find(&f, other, &d), -ENOENT);
    free(buf);
    /* an empty file */
    uint8_t empty[EMPTY];
    OLT_CHECK_EQ(ol_meta_encode(KEY, KLEN, NULL, 0, empty, sizeof empty), EMPTY);
    OLT_CHECK_EQ(ol_meta_open(empty, sizeof empty, &f), 0);
    OLT_CHECK_EQ(f.count, 0);
    OLT_CHECK_EQ(ol_meta_next(&f, &d), 0);
    OLT_CHECK_EQ(ol_meta_latest(&f, &d), -ENOENT);
    OLT_CHECK_EQ(ol_meta_find(&f, other, &d), -ENOENT);
}

OLT_TEST(store_meta_object_key)
{
    static char key[OL_META_MAX_KEY + 1];
    memset(key, 'k', sizeof key);
    struct ol_meta_version v;
    base_object(&v, 1);
    const struct ol_meta_version *vs[1] = {&v};
    static uint8_t a[8192], b[8192];
    OLT_CHECK_EQ(ol_meta_encode(key, 0, vs, 1, a, sizeof a), -EINVAL);
    OLT_CHECK_EQ(ol_meta_encode(NULL, 3, vs, 1, a, sizeof a), -EINVAL);
    OLT_CHECK_EQ(ol_meta_encode(key, OL_META_MAX_KEY + 1, vs, 1, a, sizeof a), -EINVAL);
    int n = ol_meta_encode(key, OL_META_MAX_KEY, vs, 1, a, sizeof a);
    OLT_CHECK_EQ(n, (int)OL_META_EMPTY_LEN(OL_META_MAX_KEY) + ol_meta_version_size(&v));
    struct ol_meta_file f;
    OLT_CHECK_EQ(ol_meta_open(a, (size_t)n, &f), 0);
    OLT_CHECK(bytes_eq(f.key, key, OL_META_MAX_KEY) && f.key.p == a + 18);
    /* a one-byte key, and a key with any bytes in it */
    OLT_CHECK(ol_meta_encode("k", 1, vs, 1, a, sizeof a) > 0);
    OLT_CHECK(ol_meta_encode("../\xff\x00x", 6, vs, 1, a, sizeof a) > 0);
    /* put: the key names a new file and must match an old one */
    OLT_CHECK_EQ(ol_meta_put_version(NULL, 0, key, 0, &v, false, a, sizeof a), -EINVAL);
    OLT_CHECK_EQ(ol_meta_put_version(NULL, 0, NULL, 1, &v, false, a, sizeof a), -EINVAL);
    n = ol_meta_put_version(NULL, 0, KEY, KLEN, &v, false, a, sizeof a);
    OLT_CHECK(n > 0);
    struct ol_meta_version w;
    base_object(&w, 2);
    OLT_CHECK_EQ(ol_meta_put_version(a, (size_t)n, "photos/2024/dog.jpg", KLEN, &w, false, b,
                                     sizeof b), -EINVAL);
    OLT_CHECK_EQ(ol_meta_put_version(a, (size_t)n, KEY, KLEN - 1, &w, false, b, sizeof b),
                 -EINVAL);
    int m = ol_meta_put_version(a, (size_t)n, KEY, KLEN, &w, false, b, sizeof b);
    OLT_CHECK(m > n);
    /* update and remove keep it */
    OLT_CHECK_EQ(ol_meta_remove_version(b, (size_t)m, w.vid, a, sizeof a), n);
    OLT_CHECK_EQ(ol_meta_open(a, (size_t)n, &f), 0);
    OLT_CHECK(bytes_is(f.key, KEY));
    OLT_CHECK_EQ(ol_meta_remove_version(a, (size_t)n, v.vid, b, sizeof b), EMPTY);
    OLT_CHECK_EQ(ol_meta_open(b, (size_t)EMPTY, &f), 0);
    OLT_CHECK(bytes_is(f.key, KEY) && f.count == 0);
    /* no file: nothing to update or remove */
    OLT_CHECK_EQ(ol_meta_update_version(NULL, 0, &v, a, sizeof a), -ENOENT);
    OLT_CHECK_EQ(ol_meta_remove_version(NULL, 0, v.vid, a, sizeof a), -ENOENT);
}

/* ---- rewriting -------------------------------------------------------- */

/* The raw record of version id x in file buf[0..n). */
static struct ol_meta_bytes raw_of(const uint8_t *buf, int n, unsigned x)
{
    struct ol_meta_file f;
    struct ol_meta_version d;
    uint8_t vid[16];
    vid_of(vid, x);
    OLT_CHECK_EQ(ol_meta_open(buf, (size_t)n, &f), 0);
    OLT_CHECK(ol_meta_find(&f, vid, &d) >= 0);
    return d.raw;
}

/* The version ids of buf, newest first, as small numbers (null = 0). */
static void ids_are(const uint8_t *buf, int n, const unsigned *want, unsigned count)
{
    struct ol_meta_file f;
    struct ol_meta_version d;
    OLT_CHECK_EQ(ol_meta_open(buf, (size_t)n, &f), 0);
    OLT_CHECK_EQ(f.count, count);
    for (unsigned i = 0; i < count; i++) {
        OLT_CHECK_EQ(ol_meta_next(&f, &d), 1);
        unsigned got = ol_meta_vid_is_null(d.vid) ? 0 : ld32(d.vid);
        if (got != want[i])
            olt_fail(__FILE__, __LINE__, "version %u: id %u, want %u", i, got, want[i]);
    }
}

OLT_TEST(store_meta_put_replace_remove)
{
    static uint8_t b1[1 << 16], b2[1 << 16];
    struct ol_meta_version v1, v2, dm, nul, nul2;
    full_object(&v1, 1);
    base_object(&v2, 2);
    delete_marker(&dm, 3);
    base_object(&nul, 0);
    memset(nul.vid, 0, 16);
    nul.size = 111;
    delete_marker(&nul2, 0);
    memset(nul2.vid, 0, 16);

    /* first PUT: no file yet */
    int n = ol_meta_put_version(NULL, 0, KEY, KLEN, &v1, false, b1, sizeof b1);
    OLT_CHECK(n > 0);
    ids_are(b1, n, (const unsigned[]){1}, 1);
    /* the same as encoding it alone */
    int n1;
    uint8_t *alone = encode1(&v1, &n1);
    OLT_CHECK_EQ(n, n1);
    OLT_CHECK_MEM(alone, b1, (size_t)n);
    free(alone);

    n = ol_meta_put_version(b1, (size_t)n, KEY, KLEN, &v2, false, b2, sizeof b2);
    ids_are(b2, n, (const unsigned[]){2, 1}, 2);
    n = ol_meta_put_version(b2, (size_t)n, KEY, KLEN, &nul, false, b1, sizeof b1);
    ids_are(b1, n, (const unsigned[]){0, 2, 1}, 3);
    n = ol_meta_put_version(b1, (size_t)n, KEY, KLEN, &dm, false, b2, sizeof b2);
    ids_are(b2, n, (const unsigned[]){3, 0, 2, 1}, 4);
    /* unchanged records are copied byte for byte */
    struct ol_meta_bytes r1 = raw_of(b2, n, 1);
    int e1;
    alone = encode1(&v1, &e1);
    OLT_CHECK(bytes_eq(r1, alone + FIRST, (size_t)e1 - EMPTY));
    free(alone);

    /* a duplicate id without replace */
    OLT_CHECK_EQ(ol_meta_put_version(b2, (size_t)n, KEY, KLEN, &nul2, false, b1, sizeof b1),
                 -EEXIST);
    OLT_CHECK_EQ(ol_meta_put_version(b2, (size_t)n, KEY, KLEN, &v2, false, b1, sizeof b1), -EEXIST);
    /* replace the null version: it moves to the front as the new latest */
    int m = ol_meta_put_version(b2, (size_t)n, KEY, KLEN, &nul2, true, b1, sizeof b1);
    OLT_CHECK_EQ(m, n - ol_meta_version_size(&nul) + OL_META_DM_LEN);
    ids_are(b1, m, (const unsigned[]){0, 3, 2, 1}, 4);
    struct ol_meta_file f;
    struct ol_meta_version d;
    OLT_CHECK_EQ(ol_meta_open(b1, (size_t)m, &f), 0);
    OLT_CHECK_EQ(ol_meta_latest(&f, &d), 0);
    OLT_CHECK_EQ(d.type, OL_META_DELETE_MARKER);
    /* replace when there is none: a plain insert */
    struct ol_meta_version v4;
    base_object(&v4, 4);
    n = ol_meta_put_version(b1, (size_t)m, KEY, KLEN, &v4, true, b2, sizeof b2);
    ids_are(b2, n, (const unsigned[]){4, 0, 3, 2, 1}, 5);

    /* update in place */
    struct ol_meta_version v2t = v2;
    v2t.tagging = S("k=v");
    m = ol_meta_update_version(b2, (size_t)n, &v2t, b1, sizeof b1);
    OLT_CHECK_EQ(m, n + 3);
    ids_are(b1, m, (const unsigned[]){4, 0, 3, 2, 1}, 5);
    OLT_CHECK_EQ(ol_meta_open(b1, (size_t)m, &f), 0);
    OLT_CHECK_EQ(ol_meta_find(&f, v2.vid, &d), 3);
    OLT_CHECK(bytes_is(d.tagging, "k=v"));
    struct ol_meta_version v9;
    base_object(&v9, 9);
    OLT_CHECK_EQ(ol_meta_update_version(b1, (size_t)m, &v9, b2, sizeof b2), -ENOENT);

    /* remove: middle, newest, oldest, absent, down to empty */
    uint8_t vid[16];
    vid_of(vid, 3);
    n = ol_meta_remove_version(b1, (size_t)m, vid, b2, sizeof b2);
    OLT_CHECK_EQ(n, m - OL_META_DM_LEN);
    ids_are(b2, n, (const unsigned[]){4, 0, 2, 1}, 4);
    OLT_CHECK_EQ(ol_meta_remove_version(b2, (size_t)n, vid, b1, sizeof b1), -ENOENT);
    vid_of(vid, 4);
    m = ol_meta_remove_version(b2, (size_t)n, vid, b1, sizeof b1);
    ids_are(b1, m, (const unsigned[]){0, 2, 1}, 3);
    vid_of(vid, 1);
    n = ol_meta_remove_version(b1, (size_t)m, vid, b2, sizeof b2);
    ids_are(b2, n, (const unsigned[]){0, 2}, 2);
    memset(vid, 0, 16);
    m = ol_meta_remove_version(b2, (size_t)n, vid, b1, sizeof b1);
    ids_are(b1, m, (const unsigned[]){2}, 1);
    vid_of(vid, 2);
    n = ol_meta_remove_version(b1, (size_t)m, vid, b2, sizeof b2);
    OLT_CHECK_EQ(n, EMPTY);
    ids_are(b2, n, NULL, 0);
    OLT_CHECK_EQ(ol_meta_remove_version(NULL, 0, vid, b1, sizeof b1), -ENOENT);
    /* put into an empty file */
    m = ol_meta_put_version(b2, (size_t)n, KEY, KLEN, &v2, false, b1, sizeof b1);
    ids_are(b1, m, (const unsigned[]){2}, 1);

    /* errors: bad old file, bad version, exact capacity */
    OLT_CHECK_EQ(ol_meta_put_version(b1, (size_t)m - 1, KEY, KLEN, &v1, false, b2, sizeof b2),
                 -EBADMSG);
    OLT_CHECK_EQ(ol_meta_put_version(NULL, 5, KEY, KLEN, &v1, false, b2, sizeof b2), -EBADMSG);
    struct ol_meta_version bad = v1;
    bad.ec.k = 0;
    OLT_CHECK_EQ(ol_meta_put_version(b1, (size_t)m, KEY, KLEN, &bad, false, b2, sizeof b2),
                 -EINVAL);
    OLT_CHECK_EQ(ol_meta_update_version(b1, (size_t)m, &bad, b2, sizeof b2), -EINVAL);
    int want = m + ol_meta_version_size(&v1);
    memset(b2, 0xEE, sizeof b2);
    OLT_CHECK_EQ(ol_meta_put_version(b1, (size_t)m, KEY, KLEN, &v1, false, b2, (size_t)want - 1),
                 -ENOSPC);
    OLT_CHECK_EQ(b2[0], 0xEE); /* untouched */
    OLT_CHECK_EQ(ol_meta_put_version(b1, (size_t)m, KEY, KLEN, &v1, false, b2, (size_t)want), want);
    vid_of(vid, 2);
    size_t short_cap = (size_t)want - (size_t)ol_meta_version_size(&v2) - 1;
    OLT_CHECK_EQ(ol_meta_remove_version(b2, (size_t)want, vid, b1, short_cap), -ENOSPC);
}

/* ---- limits ----------------------------------------------------------- */

OLT_TEST_T(store_meta_limits, 60)
{
    struct ol_meta_version v;
    static char big[OL_META_MAX_TAGGING + 1];
    memset(big, 'x', sizeof big);
    struct ol_meta_bytes bb = {(const uint8_t *)big, 0};

    /* strings */
    for (int h = 0; h < OL_META_HDR__COUNT; h++) {
        base_object(&v, 1);
        bb.len = OL_META_MAX_HEADER;
        v.hdr[h] = bb;
        roundtrip1(&v);
        v.hdr[h].len++;
        OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
        v.hdr[h] = (struct ol_meta_bytes){NULL, 1};
        OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    }
    base_object(&v, 1);
    bb.len = OL_META_MAX_TAGGING;
    v.tagging = bb;
    roundtrip1(&v);
    v.tagging.len++;
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);

    /* inline */
    static uint8_t data[OL_META_MAX_INLINE + 1];
    base_object(&v, 1);
    v.has_inline = true;
    v.inline_data = (struct ol_meta_bytes){data, OL_META_MAX_INLINE};
    OLT_CHECK(ol_meta_version_size(&v) > 0);
    v.inline_data.len++;
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);

    /* parts: count, numbers */
    struct ol_meta_part *parts = calloc(OL_META_MAX_PARTS + 1, sizeof *parts);
    OLT_CHECK(parts);
    for (unsigned i = 0; i <= OL_META_MAX_PARTS; i++)
        parts[i].number = i + 1;
    base_object(&v, 1);
    v.parts = parts;
    v.part_count = OL_META_MAX_PARTS;
    OLT_CHECK(ol_meta_version_size(&v) > 0);
    v.part_count = OL_META_MAX_PARTS + 1;
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    v.part_count = 2;
    parts[1].number = 1; /* not ascending */
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    parts[0].number = 0;
    parts[1].number = 2;
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    parts[0].number = 1;
    parts[1].number = OL_META_MAX_PARTS + 1;
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    parts[1].number = OL_META_MAX_PARTS;
    OLT_CHECK(ol_meta_version_size(&v) > 0);
    v.parts = NULL; /* a count without parts */
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    v.parts = parts;
    v.parts_enc = data; /* both forms */
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    free(parts);

    /* scalar fields */
    base_object(&v, 1);
    v.etag_parts = OL_META_MAX_PARTS;
    OLT_CHECK(ol_meta_version_size(&v) > 0);
    v.etag_parts++;
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    base_object(&v, 1);
    v.storage_class = OL_META_SC__COUNT;
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    base_object(&v, 1);
    v.type = 0;
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    v.type = 3;
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    OLT_CHECK_EQ(ol_meta_version_size(NULL), -EINVAL);

    /* erasure */
    base_object(&v, 1);
    v.ec.k = 0;
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    base_object(&v, 1);
    v.ec.index = 6;
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    base_object(&v, 1);
    v.ec.block_size = 0;
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    base_object(&v, 1);
    v.ec.dist[0] = v.ec.dist[1]; /* not a permutation */
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    base_object(&v, 1);
    v.ec.dist[2] = 6; /* out of range */
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);
    base_object(&v, 1);
    v.ec.k = 49;
    v.ec.m = 16; /* 65 shards */
    for (int i = 0; i < 64; i++)
        v.ec.dist[i] = (uint8_t)i;
    OLT_CHECK_EQ(ol_meta_version_size(&v), -EINVAL);

    /* versions per file */
    struct ol_meta_version *dms = calloc(OL_META_MAX_VERSIONS + 1, sizeof *dms);
    const struct ol_meta_version **vs = calloc(OL_META_MAX_VERSIONS + 1, sizeof *vs);
    OLT_CHECK(dms && vs);
    for (unsigned i = 0; i <= OL_META_MAX_VERSIONS; i++) {
        delete_marker(&dms[i], i + 1);
        vs[i] = &dms[i];
    }
    size_t cap = EMPTY + (OL_META_MAX_VERSIONS + 1) * OL_META_DM_LEN;
    uint8_t *buf = malloc(cap), *out = malloc(cap);
    OLT_CHECK(buf && out);
    OLT_CHECK_EQ(ol_meta_encode(KEY, KLEN, vs, OL_META_MAX_VERSIONS + 1, buf, cap), -E2BIG);
    int n = ol_meta_encode(KEY, KLEN, vs, OL_META_MAX_VERSIONS, buf, cap);
    OLT_CHECK_EQ(n, EMPTY + OL_META_MAX_VERSIONS * OL_META_DM_LEN);
    struct ol_meta_file f;
    struct ol_meta_version d;
    OLT_CHECK_EQ(ol_meta_open(buf, (size_t)n, &f), 0);
    OLT_CHECK_EQ(ol_meta_find(&f, dms[OL_META_MAX_VERSIONS - 1].vid, &d),
                 OL_META_MAX_VERSIONS - 1);
    OLT_CHECK_EQ(ol_meta_put_version(buf, (size_t)n, KEY, KLEN, &dms[OL_META_MAX_VERSIONS], false,
                                     out, cap),
                 -E2BIG);
    /* ... but replacing one keeps the count */
    OLT_CHECK_EQ(ol_meta_put_version(buf, (size_t)n, KEY, KLEN, &dms[5], true, out, cap), n);
    /* a count over the limit in a file is refused */
    st32(buf + 8, OL_META_MAX_VERSIONS + 1);
    refix(buf, (size_t)n);
    OLT_CHECK_EQ(ol_meta_open(buf, (size_t)n, &f), -EBADMSG);
    free(buf);
    free(out);
    free(vs);
    free(dms);

    /* file size: 33 versions of 128 KiB inline data is over 4 MiB */
    struct ol_meta_version iv[33];
    const struct ol_meta_version *ivs[33];
    for (int i = 0; i < 33; i++) {
        base_object(&iv[i], (unsigned)i + 1);
        iv[i].has_inline = true;
        iv[i].inline_data = (struct ol_meta_bytes){data, OL_META_MAX_INLINE};
        ivs[i] = &iv[i];
    }
    cap = 33u * (OL_META_MAX_INLINE + 200);
    buf = malloc(cap);
    out = malloc(cap);
    OLT_CHECK(buf && out);
    OLT_CHECK_EQ(ol_meta_encode(KEY, KLEN, ivs, 33, buf, cap), -E2BIG);
    n = ol_meta_encode(KEY, KLEN, ivs, 31, buf, cap);
    OLT_CHECK(n > 0 && (unsigned)n < OL_META_MAX_FILE);
    OLT_CHECK_EQ(ol_meta_put_version(buf, (size_t)n, KEY, KLEN, &iv[31], false, out, cap), -E2BIG);
    buf[n] = 0xA5; /* a byte after the file that is not padding */
    OLT_CHECK(ol_meta_open(buf, (size_t)n + 1, &f) == -EBADMSG);
    free(buf);
    free(out);
    /* a buffer over OL_META_MAX_FILE is refused before it is hashed */
    buf = calloc(OL_META_MAX_FILE + 1, 1);
    OLT_CHECK(buf);
    memcpy(buf, "OLOM\x01\x00", 6);
    OLT_CHECK_EQ(ol_meta_open(buf, OL_META_MAX_FILE + 1, &f), -EBADMSG);
    free(buf);

    /* the largest version there can be: every field at its limit */
    {
        struct ol_meta_version mx;
        full_object(&mx, 1);
        mx.ec.k = 32;
        mx.ec.m = 32;
        for (int i = 0; i < 64; i++)
            mx.ec.dist[i] = (uint8_t)i;
        for (int h = 0; h < OL_META_HDR__COUNT; h++)
            mx.hdr[h] = (struct ol_meta_bytes){(const uint8_t *)big, OL_META_MAX_HEADER};
        mx.tagging = (struct ol_meta_bytes){(const uint8_t *)big, OL_META_MAX_TAGGING};
        /* the most pairs: all 256 one-byte names and 896 two-byte ones
         * (2048 name bytes, empty values), in byte-wise order */
        static struct ol_meta_kv kvs[1152];
        static uint8_t names[256][2];
        unsigned np = 0;
        for (unsigned b0 = 0; b0 < 256; b0++) {
            names[b0][0] = (uint8_t)b0;
            kvs[np++] = (struct ol_meta_kv){{names[b0], 1}, {NULL, 0}};
            static uint8_t two[896][2];
            for (unsigned c = 0; c < 256 && b0 * 256 + c < 896; c++) {
                uint8_t *t = two[b0 * 256 + c];
                t[0] = (uint8_t)b0;
                t[1] = (uint8_t)c;
                kvs[np++] = (struct ol_meta_kv){{t, 2}, {NULL, 0}};
            }
        }
        OLT_CHECK_EQ(np, 1152);
        mx.user = kvs;
        mx.user_count = 1152;
        struct ol_meta_part *mp = calloc(OL_META_MAX_PARTS, sizeof *mp);
        OLT_CHECK(mp);
        for (unsigned i = 0; i < OL_META_MAX_PARTS; i++)
            mp[i].number = i + 1;
        mx.parts = mp;
        mx.part_count = OL_META_MAX_PARTS;
        mx.has_inline = true;
        mx.inline_data = (struct ol_meta_bytes){data, OL_META_MAX_INLINE};
        int s = ol_meta_version_size(&mx);
        /* docs/store-meta.md, "Limits": 879,380 bytes */
        OLT_CHECK_EQ(s, 88 + 32 + 64 + 6 * 2050 + (2 + 1152 * 4 + 2048) + 49154 + 680000 +
                            12 + 131072);
        OLT_CHECK_EQ(s, 879380);
        OLT_CHECK(s + EMPTY < (int)(OL_META_MAX_FILE / 4));
        roundtrip1(&mx);
        free(mp);
    }

    /* duplicate ids in one encode */
    struct ol_meta_version a, b;
    base_object(&a, 7);
    delete_marker(&b, 7);
    const struct ol_meta_version *ab[2] = {&a, &b};
    uint8_t small[4096];
    OLT_CHECK_EQ(ol_meta_encode(KEY, KLEN, ab, 2, small, sizeof small), -EEXIST);
    ab[1] = NULL;
    OLT_CHECK_EQ(ol_meta_encode(KEY, KLEN, ab, 2, small, sizeof small), -EINVAL);
    OLT_CHECK_EQ(ol_meta_encode(KEY, KLEN, NULL, 2, small, sizeof small), -EINVAL);
}

OLT_TEST_T(store_meta_duplicate_ids, 60)
{
    /* many versions with one duplicate far apart, in encode and in a file */
    enum { N = 5000 };
    struct ol_meta_version *dms = calloc(N, sizeof *dms);
    const struct ol_meta_version **vs = calloc(N, sizeof *vs);
    OLT_CHECK(dms && vs);
    for (unsigned i = 0; i < N; i++) {
        delete_marker(&dms[i], i + 1);
        vs[i] = &dms[i];
    }
    size_t cap = EMPTY + N * OL_META_DM_LEN;
    uint8_t *buf = malloc(cap);
    OLT_CHECK(buf);
    int n = ol_meta_encode(KEY, KLEN, vs, N, buf, cap);
    OLT_CHECK_EQ(n, (int)cap);
    struct ol_meta_file f;
    OLT_CHECK_EQ(ol_meta_open(buf, (size_t)n, &f), 0);
    vid_of(dms[N - 1].vid, 3);
    OLT_CHECK_EQ(ol_meta_encode(KEY, KLEN, vs, N, buf, cap), -EEXIST);
    /* patch the last record's id into the third one's */
    OLT_CHECK_EQ(ol_meta_open(buf, (size_t)n, &f), 0);
    memcpy(buf + n - 8 - OL_META_DM_LEN + 8, dms[N - 1].vid, 16);
    refix(buf, (size_t)n);
    OLT_CHECK_EQ(ol_meta_open(buf, (size_t)n, &f), -EBADMSG);
    /* two null versions */
    memset(buf + FIRST + 8, 0, 16);
    memset(buf + FIRST + OL_META_DM_LEN + 8, 0, 16);
    vid_of(buf + n - 8 - OL_META_DM_LEN + 8, N);
    refix(buf, (size_t)n);
    OLT_CHECK_EQ(ol_meta_open(buf, (size_t)n, &f), -EBADMSG);
    free(buf);
    free(vs);
    free(dms);
}

/* ---- corruption ------------------------------------------------------- */

/* A small file: an object with a bit of everything, a delete marker and a
 * null object with inline data. */
static uint8_t *small_file(int *n)
{
    static struct ol_meta_version a, b, c;
    static const uint8_t data[] = "hello, inline world";
    full_object(&a, 1);
    a.cks.algo = OL_META_CKS_CRC32C;
    delete_marker(&b, 2);
    base_object(&c, 0);
    memset(c.vid, 0, 16);
    c.has_inline = true;
    c.inline_data = (struct ol_meta_bytes){data, sizeof data - 1};
    c.cks.algo = OL_META_CKS_CRC64NVME;
    memset(c.cks.sum, 0x42, 8);
    const struct ol_meta_version *vs[3] = {&a, &b, &c};
    return encode(vs, 3, n);
}

OLT_TEST(store_meta_corrupt_every_byte)
{
    int n;
    uint8_t *buf = small_file(&n);
    struct ol_meta_file f;
    OLT_CHECK_EQ(ol_meta_open(buf, (size_t)n, &f), 0);
    static const uint8_t flips[] = {0x01, 0x80, 0xFF};
    for (int i = 0; i < n; i++) {
        for (unsigned k = 0; k < sizeof flips; k++) {
            uint8_t *c = malloc((size_t)n);
            OLT_CHECK(c);
            memcpy(c, buf, (size_t)n);
            c[i] ^= flips[k];
            int rc = ol_meta_open(c, (size_t)n, &f);
            if (rc != -EBADMSG)
                olt_fail(__FILE__, __LINE__, "byte %d ^ 0x%02x: %d", i, flips[k], rc);
            free(c);
        }
    }
    free(buf);
}

OLT_TEST(store_meta_truncated_and_extended)
{
    int n;
    uint8_t *buf = small_file(&n);
    struct ol_meta_file f;
    for (int k = 0; k < n; k++) {
        uint8_t *c = malloc((size_t)k + 1);
        OLT_CHECK(c);
        memcpy(c, buf, (size_t)k);
        int rc = ol_meta_open(c, (size_t)k, &f);
        if (rc != -EBADMSG)
            olt_fail(__FILE__, __LINE__, "prefix %d of %d: %d", k, n, rc);
        free(c);
    }
    OLT_CHECK_EQ(ol_meta_open(NULL, 0, &f), -EBADMSG);
    /* one byte more, even with a good checksum over it, is refused */
    uint8_t *c = malloc((size_t)n + 1);
    OLT_CHECK(c);
    memcpy(c, buf, (size_t)n);
    memmove(c + n - 7, c + n - 8, 8);
    c[n - 8] = 0;
    refix(c, (size_t)n + 1);
    OLT_CHECK_EQ(ol_meta_open(c, (size_t)n + 1, &f), -EBADMSG);
    st32(c + 12, (uint32_t)n + 1); /* and with the total length fixed too */
    refix(c, (size_t)n + 1);
    OLT_CHECK_EQ(ol_meta_open(c, (size_t)n + 1, &f), -EBADMSG);
    free(c);
    free(buf);
}

/* Zeros after the file up to its next 4 KiB boundary (an O_DIRECT writer's
 * page) are skipped; any other trailing byte, or zeros past the page, is
 * corrupt. */
OLT_TEST(store_meta_zero_padding_to_a_page)
{
    int n;
    uint8_t *buf = small_file(&n);
    OLT_CHECK(n < (int)OL_META_PAD);
    uint8_t *c = calloc(1, 2 * OL_META_PAD);
    OLT_CHECK(c);
    memcpy(c, buf, (size_t)n);
    struct ol_meta_file f;
    for (size_t len = (size_t)n; len <= OL_META_PAD; len += len < (size_t)n + 9 ? 1 : 997) {
        OLT_CHECK_EQ(ol_meta_open(c, len, &f), 0);
        OLT_CHECK_EQ(f.len, (uint32_t)n);
        OLT_CHECK_EQ(f.count, 3);
    }
    OLT_CHECK_EQ(ol_meta_open(c, OL_META_PAD, &f), 0);
    OLT_CHECK_EQ(ol_meta_open(c, OL_META_PAD + 1, &f), -EBADMSG); /* past the page */
    for (size_t at = (size_t)n; at < OL_META_PAD; at += 1021) {
        c[at] = 1;
        OLT_CHECK_EQ(ol_meta_open(c, OL_META_PAD, &f), -EBADMSG);
        c[at] = 0;
    }
    c[OL_META_PAD - 1] = 0x80;
    OLT_CHECK_EQ(ol_meta_open(c, OL_META_PAD, &f), -EBADMSG);
    OLT_CHECK_EQ(ol_meta_open(c, OL_META_PAD - 1, &f), 0);
    free(c);
    free(buf);
}

OLT_TEST(store_meta_unknown_format_version)
{
    int n;
    uint8_t *buf = small_file(&n);
    struct ol_meta_file f;
    const uint16_t versions[] = {0, 2, 0xFFFF};
    for (int i = 0; i < 3; i++) {
        st16(buf + 4, versions[i]);
        refix(buf, (size_t)n);
        OLT_CHECK_EQ(ol_meta_open(buf, (size_t)n, &f), -ENOTSUP);
        OLT_CHECK_EQ(ol_meta_put_version(buf, (size_t)n, KEY, KLEN, NULL, false, NULL, 0),
                     -ENOTSUP);
        /* the smallest file of another version */
        uint8_t tiny[14] = {'O', 'L', 'O', 'M'};
        st16(tiny + 4, versions[i]);
        refix(tiny, sizeof tiny);
        OLT_CHECK_EQ(ol_meta_open(tiny, sizeof tiny, &f), -ENOTSUP);
        st16(tiny + 4, 1);
        refix(tiny, sizeof tiny);
        OLT_CHECK_EQ(ol_meta_open(tiny, sizeof tiny, &f), -EBADMSG);
    }
    /* a corrupt version field is a bad checksum, not another version */
    st16(buf + 4, 1);
    refix(buf, (size_t)n);
    OLT_CHECK_EQ(ol_meta_open(buf, (size_t)n, &f), 0);
    buf[4] = 2;
    OLT_CHECK_EQ(ol_meta_open(buf, (size_t)n, &f), -EBADMSG);
    free(buf);
}

/* Patches byte off of a fresh copy of buf to val, fixes the trailer and
 * expects -EBADMSG. */
static void expect_bad(const uint8_t *buf, int n, int off, uint8_t val, int line)
{
    uint8_t *c = malloc((size_t)n);
    OLT_CHECK(c);
    memcpy(c, buf, (size_t)n);
    c[off] = val;
    refix(c, (size_t)n);
    struct ol_meta_file f;
    int rc = ol_meta_open(c, (size_t)n, &f);
    if (rc != -EBADMSG)
        olt_fail(__FILE__, line, "byte %d = 0x%02x: %d", off, val, rc);
    free(c);
}

OLT_TEST(store_meta_structure_behind_good_checksum)
{
    /* one object record alone, offsets known */
    struct ol_meta_version v;
    full_object(&v, 1);
    v.cks.algo = OL_META_CKS_CRC32;
    v.has_inline = true;
    v.inline_data = S("xyz");
    int n;
    uint8_t *buf = encode1(&v, &n);
    const int R = FIRST; /* the record */
#define BAD(off, val) expect_bad(buf, n, (off), (uint8_t)(val), __LINE__)
    BAD(6, 1);             /* header flags */
    BAD(8, 0);             /* count 0 with a record */
    BAD(8, 2);             /* count 2 */
    BAD(12, (uint8_t)(n + 1)); /* total length */
    BAD(16, 0);            /* key length 0 */
    BAD(16, KLEN + 1);     /* key length: the key runs into the record */
    BAD(16, KLEN - 1);
    BAD(17, 4);            /* key length over 1024 */
    BAD(R + 0, (uint8_t)(buf[R] + 1)); /* record length */
    BAD(R + 0, (uint8_t)(buf[R] - 1));
    BAD(R + 4, 0);         /* type */
    BAD(R + 4, 3);
    BAD(R + 5, 0x04);      /* unknown record flag */
    BAD(R + 5, 0x03);      /* inline and flat */
    BAD(R + 5, 0x02);      /* flat with inline data */
    BAD(R + 5, 0x00);      /* inline data without the flag */
    BAD(R + 6, 1);         /* reserved */
    BAD(R + 7, 1);
    BAD(R + 57, 0x40);     /* etag parts over 10000 */
    BAD(R + 59, 0x40);     /* part count over 10000 */
    BAD(R + 58, 4);        /* part count 4: runs past the record */
    BAD(R + 58, 2);        /* part count 2: bytes left over */
    BAD(R + 60, 2);        /* storage class */
    BAD(R + 61, 6);        /* checksum algorithm */
    BAD(R + 61, 0);        /* NONE with the composite flag */
    BAD(R + 62, 2);        /* checksum flags */
    BAD(R + 62, 0);        /* full-object with a part count */
    BAD(R + 63, 0);        /* k = 0 */
    BAD(R + 64, 60);       /* k + m over 64 */
    BAD(R + 65, 6);        /* shard index */
    BAD(R + 66, 0);        /* composite without N */
    {                      /* block size 0 */
        uint8_t *c = malloc((size_t)n);
        OLT_CHECK(c);
        memcpy(c, buf, (size_t)n);
        st32(c + R + 68, 0);
        refix(c, (size_t)n);
        struct ol_meta_file f;
        OLT_CHECK_EQ(ol_meta_open(c, (size_t)n, &f), -EBADMSG);
        free(c);
    }
    int D = R + OL_META_OBJ_FIXED + 4; /* distribution, after the CRC32 */
    BAD(D, buf[D + 1]);    /* not a permutation */
    BAD(D, 6);
    int H = D + 6;         /* Content-Type length */
    BAD(H + 1, 0x08);      /* over 2048 */
    BAD(H, (uint8_t)(buf[H] + 1));
    /* user metadata: count, order, empty name */
    int U = H;
    for (int i = 0; i < OL_META_HDR__COUNT; i++)
        U += 2 + (buf[U] | buf[U + 1] << 8);
    OLT_CHECK_EQ(buf[U], 3);
    BAD(U, 2);
    BAD(U, 4);
    BAD(U, 0);
    BAD(U + 2 + 2, 'z');   /* "alpha" -> "zlpha": out of order */
    BAD(U + 2, 0);         /* empty first name (then garbage) */
    /* parts: number order */
    int T = U + 2 + 4 + 5 + 1 + 4 + 8 + 0 + 4 + 4 + 3; /* tagging */
    OLT_CHECK_EQ(buf[T], strlen("project=lake&team=a%20b"));
    int P = T + 2 + 23;
    OLT_CHECK_EQ(buf[P], 1);
    BAD(P, 0);             /* part number 0 */
    BAD(P, 3);             /* 3 after... equal to the next */
    BAD(P, 9);             /* not ascending */
    BAD(P + 2, 1);         /* part number 65537 */
    /* inline: length and sum */
    int I = P + 3 * (OL_META_PART_FIXED + 4);
    OLT_CHECK_EQ(buf[I], 3);
    BAD(I, 2);
    BAD(I, 4);
    BAD(I + 3, 0x80);
    BAD(I + 4, (uint8_t)(buf[I + 4] ^ 1));
    OLT_CHECK_EQ(I + 12 + 3, n - 8);
    free(buf);

    /* a delete marker with object bytes or flags */
    struct ol_meta_version dm;
    delete_marker(&dm, 5);
    buf = encode1(&dm, &n);
    BAD(R + 5, 1);
    BAD(R + 0, 33);
    free(buf);
#undef BAD
}

/* ---- guard page ------------------------------------------------------- */

OLT_TEST(store_meta_guard_page)
{
    int n;
    uint8_t *buf = small_file(&n);
    long pg = sysconf(_SC_PAGESIZE);
    size_t room = ((size_t)n + (size_t)pg - 1) / (size_t)pg * (size_t)pg;
    uint8_t *mem = mmap(NULL, room + (size_t)pg, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    OLT_CHECK(mem != MAP_FAILED);
    uint8_t *end = mem + room;
    OLT_CHECK(mprotect(end, (size_t)pg, PROT_NONE) == 0);
    struct ol_meta_file f;
    struct ol_meta_version d;
    /* every prefix, ending at the guard */
    for (int k = 0; k < n; k++) {
        memcpy(end - k, buf, (size_t)k);
        OLT_CHECK_EQ(ol_meta_open(end - k, (size_t)k, &f), -EBADMSG);
    }
    /* the whole file, read in full: iterate, find, rewrite from it */
    uint8_t *at = end - n;
    memcpy(at, buf, (size_t)n);
    OLT_CHECK_EQ(ol_meta_open(at, (size_t)n, &f), 0);
    int count = 0;
    while (ol_meta_next(&f, &d) == 1) {
        OLT_CHECK(d.raw.p >= at && d.raw.p + d.raw.len <= end);
        count++;
    }
    OLT_CHECK_EQ(count, 3);
    OLT_CHECK_EQ(d.type, OL_META_OBJECT);
    OLT_CHECK(bytes_is(d.inline_data, "hello, inline world"));
    OLT_CHECK(d.inline_data.p + d.inline_data.len == end - 8);
    uint8_t nul[16] = {0};
    OLT_CHECK_EQ(ol_meta_find(&f, nul, &d), 2);
    uint8_t *out = malloc((size_t)n);
    OLT_CHECK(out);
    int m = ol_meta_remove_version(at, (size_t)n, nul, out, (size_t)n);
    OLT_CHECK(m > 0 && m < n);
    /* a corrupt inline payload at the very end of the mapping */
    end[-9] ^= 1;
    refix(at, (size_t)n);
    OLT_CHECK_EQ(ol_meta_open(at, (size_t)n, &f), -EBADMSG);
    free(out);
    munmap(mem, room + (size_t)pg);
    free(buf);
}

/* ---- documented example ------------------------------------------------ */

/* Byte for byte the example file of docs/store-meta.md, "Worked example". */
static const uint8_t doc_example[258] = {
    /* header: magic, format 1, flags 0, 2 versions, 258 bytes; key "hello.txt" */
    0x4f, 0x4c, 0x4f, 0x4d, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x02, 0x01, 0x00, 0x00,
    0x09, 0x00, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x2e, 0x74, 0x78, 0x74,
    /* delete marker, the latest: 32 bytes */
    0x20, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11,
    0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x00, 0xe8, 0xa0, 0x7e, 0x15, 0x9d, 0x97, 0x17,
    /* the null version: a 5-byte object with its data inline, 191 bytes */
    0xbf, 0x00, 0x00, 0x00, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a, 0x36, 0xfe, 0x9c, 0x97, 0x17,
    0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x5d, 0x41, 0x40, 0x2a, 0xbc, 0x4b, 0x2a, 0x76,
    0xb9, 0x71, 0x9d, 0x91, 0x10, 0x17, 0xc5, 0x92, 0x00, 0x00, 0x01, 0x00, 0x00, 0x01, 0x00, 0x02,
    0x02, 0x01, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22,
    0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x36, 0x10, 0xa6, 0x86, 0x01, 0x00, 0x03, 0x02,
    0x0a, 0x00, 0x74, 0x65, 0x78, 0x74, 0x2f, 0x70, 0x6c, 0x61, 0x69, 0x6e, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x05, 0x00, 0x6f, 0x77, 0x6e, 0x65, 0x72, 0x03,
    0x00, 0x62, 0x6f, 0x62, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x5d, 0x41, 0x40, 0x2a, 0xbc, 0x4b,
    0x2a, 0x76, 0xb9, 0x71, 0x9d, 0x91, 0x10, 0x17, 0xc5, 0x92, 0x36, 0x10, 0xa6, 0x86, 0x05, 0x00,
    0x00, 0x00, 0xfd, 0xdc, 0x62, 0x5c, 0x55, 0xe8, 0x55, 0x95, 0x68, 0x65, 0x6c, 0x6c, 0x6f,
    /* trailer: XXH3-64 of the 250 bytes before */
    0x8e, 0xc5, 0xae, 0xc3, 0x72, 0xe8, 0x71, 0xf5,
};

OLT_TEST(store_meta_doc_example)
{
    static const uint8_t md5_hello[16] = {0x5d, 0x41, 0x40, 0x2a, 0xbc, 0x4b, 0x2a, 0x76,
                                          0xb9, 0x71, 0x9d, 0x91, 0x10, 0x17, 0xc5, 0x92};
    struct ol_meta_version dm, obj;
    memset(&dm, 0, sizeof dm);
    dm.type = OL_META_DELETE_MARKER;
    memset(dm.vid, 0x11, 16);
    dm.mtime_ns = 1700000100000000000ull;
    memset(&obj, 0, sizeof obj);
    obj.type = OL_META_OBJECT;
    obj.mtime_ns = 1700000000000000000ull;
    obj.size = 5;
    memcpy(obj.etag, md5_hello, 16);
    obj.cks.algo = OL_META_CKS_CRC32;
    const uint8_t crc32_hello[4] = {0x36, 0x10, 0xa6, 0x86}; /* CRC-32 of "hello", big-endian */
    memcpy(obj.cks.sum, crc32_hello, 4);
    obj.ec = (struct ol_meta_erasure){.k = 2, .m = 2, .index = 1, .block_size = 1u << 20,
                                      .dist = {1, 0, 3, 2}};
    memset(obj.data_dir, 0x22, 16);
    obj.hdr[OL_META_HDR_CONTENT_TYPE] = S("text/plain");
    static const struct ol_meta_kv owner = {{(const uint8_t *)"owner", 5},
                                            {(const uint8_t *)"bob", 3}};
    obj.user = &owner;
    obj.user_count = 1;
    struct ol_meta_part part = {.number = 1, .size = 5, .actual_size = 5};
    memcpy(part.etag, md5_hello, 16);
    memcpy(part.cks, crc32_hello, 4);
    obj.parts = &part;
    obj.part_count = 1;
    obj.has_inline = true;
    obj.inline_data = S("hello");
    const struct ol_meta_version *vs[2] = {&dm, &obj};
    uint8_t out[sizeof doc_example];
    OLT_CHECK_EQ(ol_meta_encode("hello.txt", 9, vs, 2, out, sizeof out), (int)sizeof doc_example);
    OLT_CHECK_MEM(out, doc_example, sizeof doc_example);
    OLT_CHECK(XXH3_64bits("hello", 5) == 0x9555e8555c62dcfdull); /* the inline sum */
    struct ol_meta_file f;
    OLT_CHECK_EQ(ol_meta_open(doc_example, sizeof doc_example, &f), 0);
    OLT_CHECK(bytes_is(f.key, "hello.txt"));
    uint8_t nul[16] = {0};
    struct ol_meta_version d;
    OLT_CHECK_EQ(ol_meta_find(&f, nul, &d), 1);
    OLT_CHECK(bytes_is(d.inline_data, "hello"));
    char etag[OL_META_ETAG_STRLEN];
    OLT_CHECK_EQ(ol_meta_etag_format(d.etag, d.etag_parts, etag, sizeof etag), 32);
    OLT_CHECK_STR(etag, "5d41402abc4b2a76b9719d911017c592");
}

/* ---- small helpers ---------------------------------------------------- */

OLT_TEST(store_meta_helpers)
{
    char s[OL_META_ETAG_STRLEN];
    uint8_t e[16];
    memset(e, 0xff, 16);
    OLT_CHECK_EQ(ol_meta_etag_format(e, 1, s, sizeof s), 34);
    OLT_CHECK_STR(s, "ffffffffffffffffffffffffffffffff-1");
    OLT_CHECK_EQ(ol_meta_etag_format(e, 65535, s, sizeof s), 38);
    OLT_CHECK_EQ(ol_meta_etag_format(e, 0, s, 33), 32);
    OLT_CHECK_EQ(ol_meta_etag_format(e, 0, s, 32), -ENOSPC);
    OLT_CHECK_EQ(ol_meta_etag_format(e, 10, s, 35), -ENOSPC);
    OLT_CHECK_STR(ol_meta_hdr_name(OL_META_HDR_CONTENT_DISPOSITION), "Content-Disposition");
    OLT_CHECK_STR(ol_meta_hdr_name(OL_META_HDR_EXPIRES), "Expires");
    OLT_CHECK(ol_meta_hdr_name(OL_META_HDR__COUNT) == NULL);
    uint8_t vid[16] = {0};
    OLT_CHECK(ol_meta_vid_is_null(vid));
    vid[15] = 1;
    OLT_CHECK(!ol_meta_vid_is_null(vid));
    /* accessors on a delete marker and on an empty object */
    struct ol_meta_version v;
    delete_marker(&v, 1);
    uint32_t pos = 0;
    struct ol_meta_kv kv;
    struct ol_meta_part p;
    OLT_CHECK_EQ(ol_meta_user_next(&v, &pos, &kv), 0);
    OLT_CHECK_EQ(ol_meta_part_at(&v, 0, &p), -ENOENT);
    OLT_CHECK_EQ(ol_meta_part_find(&v, 1, &p), -ENOENT);
}
