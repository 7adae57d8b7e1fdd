/*
 * fuzz_store_meta.c - libFuzzer target for the object metadata codec
 * (src/store/meta.c).
 *
 * The first input byte picks a mode; the rest is the payload:
 *   mode % 3 == 0  the payload is opened as a metadata file;
 *   mode % 3 == 1  the same, after writing the payload's length into the
 *                  header's total-length field and fixing the trailer
 *                  checksum, so that mutations reach the record validators
 *                  instead of dying at the checksum;
 *   mode % 3 == 2  the payload drives the encoder: a list of versions whose
 *                  fields (in range or not) come from the bytes, a buffer
 *                  capacity, and rewrites (put / replace / update / remove);
 *                  whatever file it writes must open and decode to the same
 *                  fields.
 *
 * Aborts when an invariant of the meta.h contract breaks: a return outside
 * the documented set; a slice outside the file; a field over its limit; a
 * wrong inline checksum; duplicate version ids; an iterator, find or part
 * lookup that disagrees with the order of the file; a valid file that does
 * not re-encode to the very same bytes (decode -> encode); a rewrite whose
 * result does not open, or that changes records it should copy; an encoder
 * file that does not open. Reads outside the buffer are left to ASan:
 * opened bytes always sit in an allocation of exactly their length.
 */
#include "store/meta.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#define REQUIRE(c) do { if (!(c)) abort(); } while (0)

static bool within(const uint8_t *p, uint64_t n, const uint8_t *lo, const uint8_t *hi)
{
    if (n == 0)
        return true;
    return p >= lo && p <= hi && n <= (uint64_t)(hi - p);
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

static uint8_t *dup_bytes(const uint8_t *p, size_t n)
{
    uint8_t *c = malloc(n ? n : 1);
    REQUIRE(c);
    if (n)
        memcpy(c, p, n);
    return c;
}

/* Checks one decoded version against the limits and the file bounds. */
static void check_version(const struct ol_meta_version *v, const uint8_t *lo, const uint8_t *hi)
{
    REQUIRE(within(v->raw.p, v->raw.len, lo, hi) && v->raw.len >= OL_META_DM_LEN);
    REQUIRE(ol_meta_version_size(v) == (int)v->raw.len);
    if (v->type == OL_META_DELETE_MARKER) {
        REQUIRE(v->raw.len == OL_META_DM_LEN && v->size == 0 && v->part_count == 0 &&
                v->user_count == 0 && !v->has_inline && v->ec.k == 0);
        return;
    }
    REQUIRE(v->type == OL_META_OBJECT);
    const uint8_t *rlo = v->raw.p, *rhi = v->raw.p + v->raw.len;
    REQUIRE(v->storage_class < OL_META_SC__COUNT && v->etag_parts <= OL_META_MAX_PARTS);
    int L = ol_meta_cks_len(v->cks.algo);
    REQUIRE(L >= 0);
    REQUIRE((v->cks.flags & ~(OL_META_CKS_COMPOSITE | OL_META_CKS_FULL_OBJECT)) == 0);
    if (v->cks.flags & OL_META_CKS_COMPOSITE)
        REQUIRE(!(v->cks.flags & OL_META_CKS_FULL_OBJECT) && v->cks.algo != OL_META_CKS_NONE &&
                v->cks.parts >= 1 && v->cks.parts <= OL_META_MAX_PARTS);
    else
        REQUIRE(v->cks.parts == 0);
    if (v->cks.flags & OL_META_CKS_FULL_OBJECT) /* CRCs only */
        REQUIRE(v->cks.algo == OL_META_CKS_CRC32 || v->cks.algo == OL_META_CKS_CRC32C ||
                v->cks.algo == OL_META_CKS_CRC64NVME);
    unsigned n = (unsigned)v->ec.k + v->ec.m;
    REQUIRE(v->ec.k >= 1 && n <= OL_META_MAX_SHARDS && v->ec.index < n && v->ec.block_size >= 1);
    uint64_t seen = 0;
    for (unsigned i = 0; i < n; i++) {
        REQUIRE(v->ec.dist[i] < n && !(seen >> v->ec.dist[i] & 1));
        seen |= (uint64_t)1 << v->ec.dist[i];
    }
    for (int i = 0; i < OL_META_HDR__COUNT; i++)
        REQUIRE(v->hdr[i].len <= OL_META_MAX_HEADER &&
                within(v->hdr[i].p, v->hdr[i].len, rlo, rhi));
    REQUIRE(v->tagging.len <= OL_META_MAX_TAGGING &&
            within(v->tagging.p, v->tagging.len, rlo, rhi));
    REQUIRE(v->user == NULL && v->user_enc.p && within(v->user_enc.p, v->user_enc.len, rlo, rhi));
    uint32_t pos = 0, pairs = 0, total = 0;
    struct ol_meta_kv kv, prev = {{NULL, 0}, {NULL, 0}};
    int rc;
    while ((rc = ol_meta_user_next(v, &pos, &kv)) == 1) {
        REQUIRE(kv.name.len >= 1 && within(kv.name.p, kv.name.len, rlo, rhi));
        REQUIRE(within(kv.value.p, kv.value.len, rlo, rhi));
        total += kv.name.len + kv.value.len;
        if (pairs) {
            uint32_t m = prev.name.len < kv.name.len ? prev.name.len : kv.name.len;
            int c = memcmp(prev.name.p, kv.name.p, m);
            REQUIRE(c < 0 || (c == 0 && prev.name.len < kv.name.len));
        }
        prev = kv;
        pairs++;
    }
    REQUIRE(rc == 0 && pairs == v->user_count && total <= OL_META_MAX_USER_BYTES);
    REQUIRE(v->parts == NULL && v->part_count <= OL_META_MAX_PARTS);
    uint64_t plen = (uint64_t)v->part_count * (OL_META_PART_FIXED + (unsigned)L);
    REQUIRE(within(v->parts_enc, plen, rlo, rhi));
    uint32_t last = 0;
    for (unsigned i = 0; i < v->part_count; i++) {
        struct ol_meta_part p, q;
        REQUIRE(ol_meta_part_at(v, i, &p) == 0);
        REQUIRE(p.number > last && p.number <= OL_META_MAX_PARTS);
        for (unsigned b = (unsigned)L; b < OL_META_CKS_MAX; b++)
            REQUIRE(p.cks[b] == 0);
        last = p.number;
        if (i < 64 || i + 64 > v->part_count)
            REQUIRE(ol_meta_part_find(v, p.number, &q) == (int)i && q.number == p.number);
    }
    struct ol_meta_part p;
    REQUIRE(ol_meta_part_at(v, v->part_count, &p) == -ENOENT);
    REQUIRE(ol_meta_part_find(v, 0, &p) == -ENOENT);
    REQUIRE(ol_meta_part_find(v, OL_META_MAX_PARTS + 1, &p) == -ENOENT);
    if (v->has_inline) {
        REQUIRE(v->inline_data.len <= OL_META_MAX_INLINE);
        REQUIRE(within(v->inline_data.p, v->inline_data.len, rlo, rhi));
        REQUIRE(v->inline_sum == XXH3_64bits(v->inline_data.p, v->inline_data.len));
    }
    char etag[OL_META_ETAG_STRLEN];
    int el = ol_meta_etag_format(v->etag, v->etag_parts, etag, sizeof etag);
    REQUIRE(el >= 32 && el <= 38 && etag[el] == '\0');
}

/*
 * Checks a file that opened: iteration, lookups, re-encoding, rewrites.
 * buf[0..n) is an exact allocation.
 */
static void check_valid(const uint8_t *buf, size_t n, bool deep)
{
    struct ol_meta_file f;
    REQUIRE(ol_meta_open(buf, n, &f) == 0);
    REQUIRE(f.count <= OL_META_MAX_VERSIONS && n <= OL_META_MAX_FILE);
    REQUIRE(f.key.len >= 1 && f.key.len <= OL_META_MAX_KEY && f.key.p == buf + OL_META_HDR_LEN + 2);
    REQUIRE(n >= OL_META_EMPTY_LEN(f.key.len));
    const char *key = (const char *)f.key.p;
    size_t klen = f.key.len;
    struct ol_meta_version *vs = calloc(f.count ? f.count : 1, sizeof *vs);
    const struct ol_meta_version **pv = calloc(f.count ? f.count : 1, sizeof *pv);
    REQUIRE(vs && pv);
    const uint8_t *next = buf + OL_META_HDR_LEN + 2 + klen;
    for (uint32_t i = 0; i < f.count; i++) {
        REQUIRE(ol_meta_next(&f, &vs[i]) == 1);
        REQUIRE(vs[i].raw.p == next); /* records in order, back to back */
        next += vs[i].raw.len;
        check_version(&vs[i], buf, buf + n);
        pv[i] = &vs[i];
    }
    REQUIRE(next == buf + n - OL_META_TRAILER_LEN);
    struct ol_meta_version d;
    REQUIRE(ol_meta_next(&f, &d) == 0);
    REQUIRE(ol_meta_latest(&f, &d) == (f.count ? 0 : -ENOENT));
    for (uint32_t i = 0; i < f.count && i < 256; i++) {
        REQUIRE(ol_meta_find(&f, vs[i].vid, &d) == (int)i);
        REQUIRE(d.raw.p == vs[i].raw.p);
        for (uint32_t j = 0; j < i; j++)
            REQUIRE(memcmp(vs[i].vid, vs[j].vid, OL_META_ID_LEN) != 0);
    }
    /* decode -> encode: the same bytes, in a buffer of exactly n */
    uint8_t *out = malloc(n + 1);
    REQUIRE(out);
    out[n] = 0x5A;
    REQUIRE(ol_meta_encode(key, klen, pv, f.count, out, n - 1) == -ENOSPC);
    REQUIRE(ol_meta_encode(key, klen, pv, f.count, out, n) == (int)n);
    REQUIRE(memcmp(out, buf, n) == 0 && out[n] == 0x5A);
    if (!deep)
        goto done;
    /* rewrites, for the first few versions */
    uint8_t *a = malloc(n), *b = malloc(n + OL_META_DM_LEN);
    REQUIRE(a && b);
    for (uint32_t i = 0; i < f.count && i < 8; i++) {
        /* update in place with the same fields: the same file */
        REQUIRE(ol_meta_update_version(buf, n, &vs[i], a, n) == (int)n);
        REQUIRE(memcmp(a, buf, n) == 0);
        /* remove, then put back: the same file when it was the latest */
        int m = ol_meta_remove_version(buf, n, vs[i].vid, a, n);
        REQUIRE(m == (int)(n - vs[i].raw.len));
        struct ol_meta_file g;
        REQUIRE(ol_meta_open(a, (size_t)m, &g) == 0 && g.count == f.count - 1);
        REQUIRE(ol_meta_find(&g, vs[i].vid, &d) == -ENOENT);
        REQUIRE(ol_meta_put_version(a, (size_t)m, key, klen, &vs[i], false, b, n - 1) == -ENOSPC);
        REQUIRE(ol_meta_put_version(a, (size_t)m, key, klen, &vs[i], false, b, n) == (int)n);
        if (i == 0)
            REQUIRE(memcmp(b, buf, n) == 0);
        REQUIRE(ol_meta_open(b, n, &g) == 0 && g.count == f.count);
        REQUIRE(ol_meta_find(&g, vs[i].vid, &d) == 0);
        /* a duplicate put: refused, or with replace the same as above */
        REQUIRE(ol_meta_put_version(buf, n, key, klen, &vs[i], false, a, n) == -EEXIST);
        REQUIRE(ol_meta_put_version(buf, n, key, klen, &vs[i], true, a, n) == (int)n);
        REQUIRE(memcmp(a, b, n) == 0);
    }
    /* a new delete marker on top */
    if (f.count < OL_META_MAX_VERSIONS && n + OL_META_DM_LEN <= OL_META_MAX_FILE) {
        struct ol_meta_version dm = {.type = OL_META_DELETE_MARKER, .mtime_ns = 42};
        memset(dm.vid, 0xEE, OL_META_ID_LEN);
        int m = ol_meta_put_version(buf, n, key, klen, &dm, true, b, n + OL_META_DM_LEN);
        REQUIRE(m > 0 && (size_t)m <= n + OL_META_DM_LEN);
        struct ol_meta_file g;
        REQUIRE(ol_meta_open(b, (size_t)m, &g) == 0);
        REQUIRE(ol_meta_latest(&g, &d) == 0 && d.type == OL_META_DELETE_MARKER);
        REQUIRE(g.key.len == klen && memcmp(g.key.p, key, klen) == 0);
        /* another key is refused */
        char other[OL_META_MAX_KEY + 1];
        memcpy(other, key, klen);
        other[klen - 1] ^= 1;
        REQUIRE(ol_meta_put_version(buf, n, other, klen, &dm, true, b, n + OL_META_DM_LEN) ==
                -EINVAL);
    }
    free(a);
    free(b);
done:
    free(out);
    free(pv);
    free(vs);
}

/* Opens buf[0..n) (an exact allocation); on success checks everything. */
static void open_mode(const uint8_t *buf, size_t n)
{
    struct ol_meta_file f;
    int rc = ol_meta_open(buf, n, &f);
    REQUIRE(rc == 0 || rc == -EBADMSG || rc == -ENOTSUP);
    if (rc == -ENOTSUP)
        REQUIRE(n >= 14 && memcmp(buf, OL_META_MAGIC, 4) == 0 && (buf[4] | buf[5] << 8) != 1);
    if (rc)
        return;
    if (f.len < n) { /* zeros after the file, at most to its next page: the file before them */
        REQUIRE(n <= ((size_t)f.len + OL_META_PAD - 1) / OL_META_PAD * OL_META_PAD);
        for (size_t i = f.len; i < n; i++)
            REQUIRE(buf[i] == 0);
        uint8_t *c = dup_bytes(buf, f.len);
        open_mode(c, f.len);
        free(c);
        return;
    }
    check_valid(buf, n, true);
    /* every truncation is refused (a sample of them for big files) */
    for (size_t k = 0; k < n; k += (n > 512 ? n / 97 + 1 : 1)) {
        uint8_t *c = dup_bytes(buf, k);
        REQUIRE(ol_meta_open(c, k, &f) == -EBADMSG);
        free(c);
    }
}

/* ---- encoder-driven mode ------------------------------------------------- */

struct src {
    const uint8_t *p;
    size_t n;
};

static uint32_t take(struct src *s, int bytes)
{
    uint32_t v = 0;
    for (int i = 0; i < bytes; i++) {
        v |= (uint32_t)(s->n ? *s->p : 0) << (8 * i);
        if (s->n) {
            s->p++;
            s->n--;
        }
    }
    return v;
}

static uint8_t material[OL_META_MAX_INLINE + 1024];

/* A length from the bytes: mostly small, now and then near a limit. */
static uint32_t len_near(struct src *s, uint32_t limit)
{
    uint32_t x = take(s, 2);
    switch (x & 7) {
    case 0:  return limit - 1 + (x >> 3) % 3;   /* limit - 1 .. limit + 1 */
    case 1:  return 0;
    default: return (x >> 3) % 64;
    }
}

enum { MAXV = 6, MAXP = 40, MAXU = 6 };

struct built {
    struct ol_meta_version v;
    struct ol_meta_part parts[MAXP];
    struct ol_meta_kv user[MAXU];
    char names[MAXU][4];
};

static void build(struct src *s, struct built *b)
{
    struct ol_meta_version *v = &b->v;
    memset(b, 0, sizeof *b);
    uint32_t x = take(s, 1);
    v->type = (x & 15) == 0 ? (uint8_t)(x >> 4) : (x & 1) ? OL_META_DELETE_MARKER : OL_META_OBJECT;
    uint32_t id = take(s, 1);
    if (id % 5) /* else the null version */
        st32(v->vid, id % 7 + 1);
    v->mtime_ns = (uint64_t)take(s, 4) << 20;
    v->size = take(s, 4);
    for (int i = 0; i < 16; i++)
        v->etag[i] = (uint8_t)(id * 13 + (unsigned)i);
    uint32_t y = take(s, 4);
    v->etag_parts = (y & 1) ? (uint16_t)(y >> 1) % 10003 : 0;
    v->storage_class = (uint8_t)((y >> 16 & 7) == 7 ? 2 : (y >> 16) & 1);
    v->cks.algo = (uint8_t)((y >> 19) % 7);
    v->cks.flags = (uint8_t)((y >> 22) & ((y >> 24) == 0xFF ? 3 : 1));
    v->cks.parts = (v->cks.flags & OL_META_CKS_COMPOSITE) ? (uint16_t)(1 + (y >> 25) % 12) : 0;
    if ((y >> 26) == 63)
        v->cks.parts ^= 1;
    for (unsigned i = 0; i < OL_META_CKS_MAX; i++)
        v->cks.sum[i] = (uint8_t)(y + i);
    uint32_t e = take(s, 4);
    v->ec.k = (uint8_t)(e % 33);
    v->ec.m = (uint8_t)((e >> 8) % 33);
    unsigned n = (unsigned)v->ec.k + v->ec.m;
    v->ec.index = (uint8_t)(n ? (e >> 16) % (n + ((e >> 31) ? 1 : 0)) : 0);
    v->ec.block_size = (e >> 24) == 0 ? 0 : (e >> 24) << 12;
    for (unsigned i = 0; i < n && i < OL_META_MAX_SHARDS; i++)
        v->ec.dist[i] = (uint8_t)((i * 7 + (e >> 24)) % n);
    if (n && (e >> 20 & 15) == 0)
        v->ec.dist[0] = v->ec.dist[n - 1]; /* not a permutation (n > 1) */
    memset(v->data_dir, (int)id, 16);
    uint32_t which = take(s, 2);
    for (int i = 0; i < OL_META_HDR__COUNT; i++)
        if (which >> i & 1)
            v->hdr[i] = (struct ol_meta_bytes){material, len_near(s, OL_META_MAX_HEADER)};
    if (which >> 6 & 1)
        v->tagging = (struct ol_meta_bytes){material, len_near(s, OL_META_MAX_TAGGING)};
    if (which >> 7 & 1) {
        v->user_count = (uint16_t)(take(s, 1) % (MAXU + 1));
        for (unsigned i = 0; i < v->user_count; i++) {
            uint32_t u = take(s, 1);
            /* names "a", "b", ... ascending unless u says otherwise */
            b->names[i][0] = (char)('a' + i - ((u & 31) == 0 && i ? 1 : 0));
            b->names[i][1] = (char)((u & 31) == 1 ? 0 : 'x');
            uint32_t nl = (u & 31) == 2 ? 0 : 2;
            b->user[i].name = (struct ol_meta_bytes){(const uint8_t *)b->names[i], nl};
            uint32_t vl = (u >> 5) == 7 ? OL_META_MAX_USER_BYTES / 2 : (u >> 5) * 3;
            b->user[i].value = (struct ol_meta_bytes){material, vl};
        }
        v->user = b->user;
    }
    if (which >> 8 & 1) {
        v->part_count = (uint16_t)(take(s, 1) % (MAXP + 1));
        uint32_t num = 0;
        for (unsigned i = 0; i < v->part_count; i++) {
            uint32_t step = take(s, 1);
            num += step % 4 == 0 && i ? 0 : 1 + step % 3; /* now and then a repeat */
            if (step == 0xFF)
                num = OL_META_MAX_PARTS + 1;
            b->parts[i].number = num;
            b->parts[i].size = (uint64_t)step << 20;
            b->parts[i].actual_size = (uint64_t)step << 19;
            memset(b->parts[i].etag, (int)step, 16);
            memset(b->parts[i].cks, (int)(step ^ 0x55), OL_META_CKS_MAX);
        }
        v->parts = b->parts;
        if ((which >> 12 & 3) == 3)
            v->part_count = (uint16_t)(OL_META_MAX_PARTS + 1); /* over the limit */
    }
    if (which >> 9 & 1) {
        v->has_inline = true;
        uint32_t il = len_near(s, OL_META_MAX_INLINE);
        v->inline_data = (struct ol_meta_bytes){material, il};
    }
}

/* Compares decoded d with built source v (which encoded fine). */
static void same_fields(const struct ol_meta_version *v, const struct ol_meta_version *d)
{
    REQUIRE(d->type == v->type && memcmp(d->vid, v->vid, 16) == 0 && d->mtime_ns == v->mtime_ns);
    if (v->type == OL_META_DELETE_MARKER)
        return;
    int L = ol_meta_cks_len(v->cks.algo);
    REQUIRE(d->size == v->size && memcmp(d->etag, v->etag, 16) == 0 &&
            d->etag_parts == v->etag_parts && d->storage_class == v->storage_class);
    REQUIRE(d->cks.algo == v->cks.algo && d->cks.flags == v->cks.flags &&
            d->cks.parts == v->cks.parts && memcmp(d->cks.sum, v->cks.sum, (size_t)L) == 0);
    REQUIRE(d->ec.k == v->ec.k && d->ec.m == v->ec.m && d->ec.index == v->ec.index &&
            d->ec.block_size == v->ec.block_size &&
            memcmp(d->ec.dist, v->ec.dist, (size_t)v->ec.k + v->ec.m) == 0);
    REQUIRE(memcmp(d->data_dir, v->data_dir, 16) == 0);
    for (int i = 0; i < OL_META_HDR__COUNT; i++)
        REQUIRE(d->hdr[i].len == v->hdr[i].len &&
                (!v->hdr[i].len || memcmp(d->hdr[i].p, v->hdr[i].p, v->hdr[i].len) == 0));
    REQUIRE(d->tagging.len == v->tagging.len &&
            (!v->tagging.len || memcmp(d->tagging.p, v->tagging.p, v->tagging.len) == 0));
    REQUIRE(d->user_count == v->user_count && d->part_count == v->part_count);
    uint32_t pv = 0, pd = 0;
    struct ol_meta_kv a, b;
    while (ol_meta_user_next(v, &pv, &a) == 1) {
        REQUIRE(ol_meta_user_next(d, &pd, &b) == 1);
        REQUIRE(a.name.len == b.name.len && memcmp(a.name.p, b.name.p, a.name.len) == 0);
        REQUIRE(a.value.len == b.value.len &&
                (!a.value.len || memcmp(a.value.p, b.value.p, a.value.len) == 0));
    }
    REQUIRE(ol_meta_user_next(d, &pd, &b) == 0);
    for (unsigned i = 0; i < v->part_count; i++) {
        struct ol_meta_part p, q;
        REQUIRE(ol_meta_part_at(v, i, &p) == 0 && ol_meta_part_at(d, i, &q) == 0);
        REQUIRE(p.number == q.number && p.size == q.size && p.actual_size == q.actual_size &&
                memcmp(p.etag, q.etag, 16) == 0 && memcmp(p.cks, q.cks, (size_t)L) == 0);
    }
    REQUIRE(d->has_inline == v->has_inline);
    if (v->has_inline)
        REQUIRE(d->inline_data.len == v->inline_data.len &&
                (!v->inline_data.len ||
                 memcmp(d->inline_data.p, v->inline_data.p, v->inline_data.len) == 0));
}

static void encode_mode(const uint8_t *data, size_t size)
{
    struct src s = {data, size};
    for (size_t i = 0; i < sizeof material; i++)
        material[i] = (uint8_t)(i * 131 + 17);
    unsigned nv = take(&s, 1) % (MAXV + 1);
    uint32_t kx = take(&s, 2);
    size_t klen = (kx & 63) == 0 ? OL_META_MAX_KEY + (kx >> 6) % 2 : (kx & 63) == 1 ? 0 : kx % 40;
    const char *key = (const char *)material + 7;
    struct built *bs = calloc(MAXV, sizeof *bs);
    REQUIRE(bs);
    const struct ol_meta_version *pv[MAXV];
    bool any_invalid = false;
    size_t need = OL_META_EMPTY_LEN(klen);
    bool bad_key = klen == 0 || klen > OL_META_MAX_KEY;
    for (unsigned i = 0; i < nv; i++) {
        build(&s, &bs[i]);
        pv[i] = &bs[i].v;
        int vsz = ol_meta_version_size(pv[i]);
        REQUIRE(vsz == -EINVAL || vsz >= (int)OL_META_DM_LEN);
        if (vsz < 0)
            any_invalid = true;
        else
            need += (size_t)vsz;
    }
    uint32_t c = take(&s, 1);
    size_t cap = c < 16 ? need - (c % 3) : need + c % 5; /* now and then short */
    uint8_t *buf = malloc(cap + 1);
    REQUIRE(buf);
    buf[cap] = 0xA5;
    int n = ol_meta_encode(key, klen, pv, nv, buf, cap);
    REQUIRE(n > 0 || n == -EINVAL || n == -E2BIG || n == -EEXIST || n == -ENOSPC);
    REQUIRE((n == -EINVAL) == (any_invalid || bad_key));
    REQUIRE(buf[cap] == 0xA5);
    if (n < 0) {
        REQUIRE(n != -ENOSPC || cap < need);
        free(buf);
        free(bs);
        return;
    }
    REQUIRE((size_t)n == need);
    uint8_t *f = dup_bytes(buf, (size_t)n);
    check_valid(f, (size_t)n, true);
    struct ol_meta_file mf;
    REQUIRE(ol_meta_open(f, (size_t)n, &mf) == 0 && mf.count == nv);
    REQUIRE(mf.key.len == klen && memcmp(mf.key.p, key, klen) == 0);
    { /* padded with zeros to its page, as an O_DIRECT writer leaves it: the same file */
        size_t pl = ((size_t)n + OL_META_PAD - 1) / OL_META_PAD * OL_META_PAD;
        uint8_t *p = calloc(1, pl + 1);
        REQUIRE(p);
        memcpy(p, f, (size_t)n);
        struct ol_meta_file pf;
        REQUIRE(ol_meta_open(p, pl, &pf) == 0 && pf.len == (uint32_t)n && pf.count == nv);
        p[pl] = 1; /* a byte past the page, or a non-zero one in it: corrupt */
        REQUIRE(ol_meta_open(p, pl + 1, &pf) == -EBADMSG);
        if (pl > (size_t)n) {
            p[pl - 1] = 1;
            REQUIRE(ol_meta_open(p, pl, &pf) == -EBADMSG);
        }
        free(p);
    }
    struct ol_meta_version d;
    for (unsigned i = 0; i < nv; i++) {
        REQUIRE(ol_meta_next(&mf, &d) == 1);
        same_fields(pv[i], &d);
    }
    /* a few more rewrites driven by the bytes */
    uint8_t *cur = f;
    size_t curlen = (size_t)n;
    for (int step = 0; step < 4 && s.n; step++) {
        struct built nb;
        uint32_t op = take(&s, 1);
        build(&s, &nb);
        int vsz = ol_meta_version_size(&nb.v);
        size_t ocap = curlen + (vsz > 0 ? (size_t)vsz : 0);
        uint8_t *out = malloc(ocap ? ocap : 1);
        REQUIRE(out);
        int rc;
        switch (op % 3) {
        case 0:
            rc = ol_meta_put_version(cur, curlen, key, klen, &nb.v, op & 4, out, ocap);
            REQUIRE(rc > 0 || rc == -EINVAL || rc == -EEXIST || rc == -E2BIG);
            break;
        case 1:
            rc = ol_meta_update_version(cur, curlen, &nb.v, out, ocap);
            REQUIRE(rc > 0 || rc == -EINVAL || rc == -ENOENT || rc == -E2BIG);
            break;
        default:
            rc = ol_meta_remove_version(cur, curlen, nb.v.vid, out, ocap);
            REQUIRE(rc > 0 || rc == -ENOENT);
            break;
        }
        if (rc == -EINVAL)
            REQUIRE(vsz < 0);
        if (rc < 0) {
            free(out);
            continue;
        }
        uint8_t *nf = dup_bytes(out, (size_t)rc);
        free(out);
        check_valid(nf, (size_t)rc, false);
        if (op % 3 != 2) {
            struct ol_meta_file g;
            REQUIRE(ol_meta_open(nf, (size_t)rc, &g) == 0);
            int at = ol_meta_find(&g, nb.v.vid, &d);
            REQUIRE(at >= 0 && (op % 3 == 1 || at == 0));
            same_fields(&nb.v, &d);
        }
        free(cur);
        cur = nf;
        curlen = (size_t)rc;
    }
    free(cur);
    free(buf);
    free(bs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned mode = data[0] % 3;
    data++;
    size--;
    if (mode == 2) {
        encode_mode(data, size);
        return 0;
    }
    if (size > OL_META_MAX_FILE + 16)
        return 0;
    uint8_t *buf = dup_bytes(data, size);
    if (mode == 1 && size >= OL_META_EMPTY_LEN(1)) {
        st32(buf + 12, (uint32_t)size);
        st64(buf + size - 8, XXH3_64bits(buf, size - 8));
    }
    open_mode(buf, size);
    free(buf);
    return 0;
}
