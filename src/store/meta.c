/*
 * meta.c - the per-object metadata file codec (see meta.h, and
 * docs/store-meta.md for the byte tables).
 *
 * Owns: encoding, validating and rewriting "OLOM" files. One function
 * sizes and validates a version for encoding (vsize), one writes it
 * (vwrite), one decodes and validates a stored record (vdecode); the file
 * functions and the rewrite helpers are built from those three, so the
 * encoder and the decoder check the same rules.
 *
 * Must not: do I/O, allocate, read outside [buf, buf + len), include
 * anything but libc, meta.h, base/le.h and xxhash.h. Integers are loaded
 * and stored byte by byte (base/le.h), so buffers need no alignment. Stack use: a 16 KiB bitmap
 * in ol_meta_open and ol_meta_encode (duplicate version ids).
 */
#include "store/meta.h"

#include "base/le.h"

#include <errno.h>
#include <string.h>

#include <xxhash.h>

/* ---- byte access ---------------------------------------------------------- */

/* memcpy that takes (NULL, 0); returns the end of the copy. */
static inline uint8_t *put(uint8_t *q, const void *src, size_t n)
{
    if (n)
        memcpy(q, src, n);
    return q + n;
}

/*
 * XXH3-64, seed 0. Debian's libxxhash exports a dispatching build that
 * picks the AVX2/AVX-512 kernel (see ol_kv_value_hash in src/kv/proto.c);
 * the symbol is weak, so a libxxhash without it leaves it NULL and the
 * plain build is used. Every kernel gives the same hash.
 */
extern XXH64_hash_t XXH3_64bits_dispatch(const void *input, size_t len) __attribute__((weak));

static uint64_t hash64(const void *p, size_t n)
{
    return XXH3_64bits_dispatch ? XXH3_64bits_dispatch(p, n) : XXH3_64bits(p, n);
}

/* ---- small helpers ---------------------------------------------------------- */

static const uint8_t cks_lens[OL_META_CKS__COUNT] = {0, 4, 4, 8, 20, 32};

int ol_meta_cks_len(unsigned algo)
{
    return algo < OL_META_CKS__COUNT ? cks_lens[algo] : -EINVAL;
}

const char *ol_meta_hdr_name(unsigned i)
{
    static const char *const names[OL_META_HDR__COUNT] = {
        "Content-Type", "Content-Encoding", "Content-Disposition",
        "Content-Language", "Cache-Control", "Expires",
    };
    return i < OL_META_HDR__COUNT ? names[i] : NULL;
}

bool ol_meta_same_version(const struct ol_meta_version *a, const struct ol_meta_version *b)
{
    return a->type == b->type && a->mtime_ns == b->mtime_ns && a->size == b->size &&
           a->ec.k == b->ec.k && a->ec.m == b->ec.m && a->ec.block_size == b->ec.block_size &&
           a->has_inline == b->has_inline && a->flat == b->flat && a->etag_parts == b->etag_parts &&
           memcmp(a->vid, b->vid, 16) == 0 && memcmp(a->data_dir, b->data_dir, 16) == 0 &&
           memcmp(a->etag, b->etag, 16) == 0;
}

bool ol_meta_vid_is_null(const uint8_t vid[OL_META_ID_LEN])
{
    uint8_t any = 0;
    for (unsigned i = 0; i < OL_META_ID_LEN; i++)
        any |= vid[i];
    return any == 0;
}

int ol_meta_etag_format(const uint8_t etag[16], uint16_t parts, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    char tail[8];
    int tn = 0;
    if (parts) {
        char d[5];
        int nd = 0;
        for (unsigned x = parts; x; x /= 10)
            d[nd++] = (char)('0' + x % 10);
        tail[tn++] = '-';
        while (nd)
            tail[tn++] = d[--nd];
    }
    size_t len = 32 + (size_t)tn;
    if (cap < len + 1)
        return -ENOSPC;
    for (int i = 0; i < 16; i++) {
        out[2 * i] = hex[etag[i] >> 4];
        out[2 * i + 1] = hex[etag[i] & 15];
    }
    memcpy(out + 32, tail, (size_t)tn);
    out[len] = '\0';
    return (int)len;
}

/* Byte-wise order of names; a proper prefix sorts first. */
static int name_cmp(const uint8_t *a, uint32_t al, const uint8_t *b, uint32_t bl)
{
    uint32_t n = al < bl ? al : bl;
    int c = n ? memcmp(a, b, n) : 0;
    if (c)
        return c;
    return al < bl ? -1 : al > bl;
}

/* A caller's slice: at most max bytes, and a pointer when not empty. */
static bool slice_ok(const struct ol_meta_bytes *s, uint32_t max)
{
    return s->len <= max && (s->p != NULL || s->len == 0);
}

/*
 * Walks count stored user pairs in p[0..n): names 1.. bytes, strictly
 * ascending, names and values together at most OL_META_MAX_USER_BYTES.
 * Returns the bytes they take, or -1.
 */
static int user_walk(const uint8_t *p, uint32_t n, uint32_t count)
{
    uint32_t off = 0, total = 0;
    const uint8_t *prev = NULL;
    uint32_t prevlen = 0;
    for (uint32_t i = 0; i < count; i++) {
        if (n - off < 2)
            return -1;
        uint32_t nl = ol_le_ld16(p + off);
        off += 2;
        if (nl == 0 || n - off < nl)
            return -1;
        const uint8_t *name = p + off;
        off += nl;
        if (n - off < 2)
            return -1;
        uint32_t vl = ol_le_ld16(p + off);
        off += 2;
        if (n - off < vl)
            return -1;
        off += vl;
        total += nl + vl;
        if (total > OL_META_MAX_USER_BYTES)
            return -1;
        if (prev && name_cmp(prev, prevlen, name, nl) >= 0)
            return -1;
        prev = name;
        prevlen = nl;
    }
    return (int)off;
}

/* Checks count stored part records of 36 + L bytes at p: numbers
 * 1..OL_META_MAX_PARTS, strictly ascending. */
static bool parts_ok(const uint8_t *p, uint32_t count, uint32_t L)
{
    uint32_t prev = 0;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t num = ol_le_ld32(p + (size_t)i * (OL_META_PART_FIXED + L));
        if (num <= prev || num > OL_META_MAX_PARTS)
            return false;
        prev = num;
    }
    return true;
}

/* Checksum fields; returns the checksum length L, or -1. */
static int cks_check(const struct ol_meta_checksum *c)
{
    if (c->algo >= OL_META_CKS__COUNT ||
        (c->flags & ~(OL_META_CKS_COMPOSITE | OL_META_CKS_FULL_OBJECT)) ||
        c->flags == (OL_META_CKS_COMPOSITE | OL_META_CKS_FULL_OBJECT))
        return -1;
    if ((c->flags & OL_META_CKS_FULL_OBJECT) &&
        (c->parts != 0 || (c->algo != OL_META_CKS_CRC32 && c->algo != OL_META_CKS_CRC32C &&
                           c->algo != OL_META_CKS_CRC64NVME)))
        return -1;
    if (c->flags & OL_META_CKS_COMPOSITE) {
        if (c->algo == OL_META_CKS_NONE || c->parts == 0 || c->parts > OL_META_MAX_PARTS)
            return -1;
    } else if (c->parts != 0) {
        return -1;
    }
    return cks_lens[c->algo];
}

/* Erasure fields: 1 <= k, k + m <= 64, index < k + m, block size >= 1,
 * dist[0..k+m) a permutation of 0..k+m-1. */
static bool ec_ok(const struct ol_meta_erasure *e)
{
    unsigned n = (unsigned)e->k + e->m;
    if (e->k == 0 || n > OL_META_MAX_SHARDS || e->index >= n || e->block_size == 0)
        return false;
    uint64_t seen = 0;
    for (unsigned i = 0; i < n; i++) {
        unsigned d = e->dist[i];
        if (d >= n || (seen >> d & 1))
            return false;
        seen |= (uint64_t)1 << d;
    }
    return true;
}

/* ---- duplicate version ids ------------------------------------------------------ */

/*
 * A Bloom filter of the version ids seen so far (3 probes over at most
 * 2^17 bits, 16 bits per id): a miss proves an id new; a hit (about 1 in
 * 100 at 10000 ids) sends the caller to compare against the earlier ids.
 */
#define DUP_WORDS 2048u /* 2^17 bits, 16 KiB */

struct dup {
    uint64_t w[DUP_WORDS];
    uint32_t mask;
};

static void dup_init(struct dup *d, uint32_t count)
{
    uint32_t bits = 512;
    while (bits < count * 16u && bits < DUP_WORDS * 64u)
        bits <<= 1;
    d->mask = bits - 1;
    memset(d->w, 0, bits / 8);
}

/* Adds vid; true when it may have been added before. */
static bool dup_add(struct dup *d, const uint8_t *vid)
{
    uint64_t h = XXH3_64bits(vid, OL_META_ID_LEN);
    bool seen = true;
    for (int i = 0; i < 3; i++) {
        uint32_t b = (uint32_t)(h >> (21 * i)) & d->mask;
        uint64_t bit = (uint64_t)1 << (b & 63);
        if (!(d->w[b >> 6] & bit))
            seen = false;
        d->w[b >> 6] |= bit;
    }
    return seen;
}

/* ---- one version: validate + size, write, decode ------------------------------ */

/* Validates v for encoding; returns its record length or -EINVAL. */
static int vsize(const struct ol_meta_version *v)
{
    if (!v)
        return -EINVAL;
    if (v->type == OL_META_DELETE_MARKER)
        return OL_META_DM_LEN;
    if (v->type != OL_META_OBJECT)
        return -EINVAL;
    int L = cks_check(&v->cks);
    if (L < 0 || v->storage_class >= OL_META_SC__COUNT || v->etag_parts > OL_META_MAX_PARTS ||
        !ec_ok(&v->ec) || (v->flat && (v->has_inline || v->part_count != 1)))
        return -EINVAL;
    uint64_t size = OL_META_OBJ_FIXED + (uint32_t)L + (uint32_t)v->ec.k + v->ec.m;
    for (int i = 0; i < OL_META_HDR__COUNT; i++) {
        if (!slice_ok(&v->hdr[i], OL_META_MAX_HEADER))
            return -EINVAL;
        size += 2 + v->hdr[i].len;
    }
    if (!slice_ok(&v->tagging, OL_META_MAX_TAGGING))
        return -EINVAL;
    size += 2 + v->tagging.len;

    /* user metadata, either form */
    if (v->user && v->user_enc.p)
        return -EINVAL;
    if (v->user_enc.p) {
        int used = user_walk(v->user_enc.p, v->user_enc.len, v->user_count);
        if (used < 0 || (uint32_t)used != v->user_enc.len)
            return -EINVAL;
        size += 2 + v->user_enc.len;
    } else {
        if (v->user_enc.len || (v->user_count && !v->user))
            return -EINVAL;
        uint32_t total = 0;
        size += 2;
        for (uint32_t i = 0; i < v->user_count; i++) {
            const struct ol_meta_kv *kv = &v->user[i];
            if (kv->name.len == 0 || !slice_ok(&kv->name, OL_META_MAX_USER_BYTES) ||
                !slice_ok(&kv->value, OL_META_MAX_USER_BYTES))
                return -EINVAL;
            total += kv->name.len + kv->value.len;
            if (total > OL_META_MAX_USER_BYTES)
                return -EINVAL;
            if (i && name_cmp(v->user[i - 1].name.p, v->user[i - 1].name.len, kv->name.p,
                              kv->name.len) >= 0)
                return -EINVAL;
            size += 4 + kv->name.len + kv->value.len;
        }
    }

    /* parts, either form */
    if (v->part_count > OL_META_MAX_PARTS || (v->parts && v->parts_enc) ||
        (v->part_count && !v->parts && !v->parts_enc))
        return -EINVAL;
    if (v->parts_enc) {
        if (!parts_ok(v->parts_enc, v->part_count, (uint32_t)L))
            return -EINVAL;
    } else {
        uint32_t prev = 0;
        for (uint32_t i = 0; i < v->part_count; i++) {
            if (v->parts[i].number <= prev || v->parts[i].number > OL_META_MAX_PARTS)
                return -EINVAL;
            prev = v->parts[i].number;
        }
    }
    size += (uint64_t)v->part_count * (OL_META_PART_FIXED + (uint32_t)L);

    if (v->has_inline) {
        if (!slice_ok(&v->inline_data, OL_META_MAX_INLINE))
            return -EINVAL;
        size += 12 + v->inline_data.len;
    }
    return (int)size; /* < 1 MiB: every term above is bounded */
}

/* Writes v (validated by vsize, which returned size) at q. */
static void vwrite(const struct ol_meta_version *v, uint8_t *q, uint32_t size)
{
    uint8_t *p = q;
    bool obj = v->type == OL_META_OBJECT;
    ol_le_st32(p, size);
    p[4] = v->type;
    p[5] = (uint8_t)(!obj ? 0 : v->has_inline ? OL_META_VF_INLINE : v->flat ? OL_META_VF_FLAT : 0);
    ol_le_st16(p + 6, 0);
    memcpy(p + 8, v->vid, OL_META_ID_LEN);
    ol_le_st64(p + 24, v->mtime_ns);
    if (!obj)
        return;
    uint32_t L = cks_lens[v->cks.algo];
    unsigned n = (unsigned)v->ec.k + v->ec.m;
    ol_le_st64(p + 32, v->size);
    memcpy(p + 40, v->etag, 16);
    ol_le_st16(p + 56, v->etag_parts);
    ol_le_st16(p + 58, v->part_count);
    p[60] = v->storage_class;
    p[61] = v->cks.algo;
    p[62] = v->cks.flags;
    p[63] = v->ec.k;
    p[64] = v->ec.m;
    p[65] = v->ec.index;
    ol_le_st16(p + 66, v->cks.parts);
    ol_le_st32(p + 68, v->ec.block_size);
    memcpy(p + 72, v->data_dir, OL_META_ID_LEN);
    q = p + OL_META_OBJ_FIXED;
    q = put(q, v->cks.sum, L);
    q = put(q, v->ec.dist, n);
    for (int i = 0; i < OL_META_HDR__COUNT; i++) {
        ol_le_st16(q, (uint16_t)v->hdr[i].len);
        q = put(q + 2, v->hdr[i].p, v->hdr[i].len);
    }
    ol_le_st16(q, v->user_count);
    q += 2;
    if (v->user_enc.p) {
        q = put(q, v->user_enc.p, v->user_enc.len);
    } else {
        for (uint32_t i = 0; i < v->user_count; i++) {
            const struct ol_meta_kv *kv = &v->user[i];
            ol_le_st16(q, (uint16_t)kv->name.len);
            q = put(q + 2, kv->name.p, kv->name.len);
            ol_le_st16(q, (uint16_t)kv->value.len);
            q = put(q + 2, kv->value.p, kv->value.len);
        }
    }
    ol_le_st16(q, (uint16_t)v->tagging.len);
    q = put(q + 2, v->tagging.p, v->tagging.len);
    if (v->parts_enc) {
        q = put(q, v->parts_enc, (size_t)v->part_count * (OL_META_PART_FIXED + L));
    } else {
        for (uint32_t i = 0; i < v->part_count; i++) {
            const struct ol_meta_part *pt = &v->parts[i];
            ol_le_st32(q, pt->number);
            ol_le_st64(q + 4, pt->size);
            ol_le_st64(q + 12, pt->actual_size);
            memcpy(q + 20, pt->etag, 16);
            q = put(q + OL_META_PART_FIXED, pt->cks, L);
        }
    }
    if (v->has_inline) {
        ol_le_st32(q, v->inline_data.len);
        ol_le_st64(q + 4, hash64(v->inline_data.p, v->inline_data.len));
        q = put(q + 12, v->inline_data.p, v->inline_data.len);
    }
}

/* A bounds-checked reader over one record. */
struct rd {
    const uint8_t *p;
    uint32_t n, off;
};

static const uint8_t *take(struct rd *r, uint32_t k)
{
    if (k > r->n - r->off)
        return NULL;
    const uint8_t *q = r->p + r->off;
    r->off += k;
    return q;
}

/* A u16 length and that many bytes, at most max. */
static bool take_str(struct rd *r, uint32_t max, struct ol_meta_bytes *out)
{
    const uint8_t *q = take(r, 2);
    if (!q)
        return false;
    uint32_t len = ol_le_ld16(q);
    const uint8_t *s = len <= max ? take(r, len) : NULL;
    if (!s)
        return false;
    *out = (struct ol_meta_bytes){s, len};
    return true;
}

/*
 * Decodes and validates the record at p, with n bytes left before the
 * trailer. Returns its length, or -1. Reads nothing outside p[0..n).
 */
static int vdecode(const uint8_t *p, uint32_t n, struct ol_meta_version *v)
{
    memset(v, 0, sizeof *v);
    if (n < OL_META_DM_LEN)
        return -1;
    uint32_t rl = ol_le_ld32(p);
    if (rl < OL_META_DM_LEN || rl > n || ol_le_ld16(p + 6) != 0)
        return -1;
    v->type = p[4];
    memcpy(v->vid, p + 8, OL_META_ID_LEN);
    v->mtime_ns = ol_le_ld64(p + 24);
    v->raw = (struct ol_meta_bytes){p, rl};
    uint8_t flags = p[5];
    if (v->type == OL_META_DELETE_MARKER)
        return flags == 0 && rl == OL_META_DM_LEN ? (int)rl : -1;
    if (v->type != OL_META_OBJECT || (flags & ~(OL_META_VF_INLINE | OL_META_VF_FLAT)) ||
        flags == (OL_META_VF_INLINE | OL_META_VF_FLAT) || rl < OL_META_OBJ_FIXED)
        return -1;
    v->flat = flags & OL_META_VF_FLAT;
    v->size = ol_le_ld64(p + 32);
    memcpy(v->etag, p + 40, 16);
    v->etag_parts = ol_le_ld16(p + 56);
    v->part_count = ol_le_ld16(p + 58);
    v->storage_class = p[60];
    v->cks.algo = p[61];
    v->cks.flags = p[62];
    v->ec.k = p[63];
    v->ec.m = p[64];
    v->ec.index = p[65];
    v->cks.parts = ol_le_ld16(p + 66);
    v->ec.block_size = ol_le_ld32(p + 68);
    memcpy(v->data_dir, p + 72, OL_META_ID_LEN);
    int L = cks_check(&v->cks);
    if (L < 0 || v->storage_class >= OL_META_SC__COUNT || v->etag_parts > OL_META_MAX_PARTS ||
        v->part_count > OL_META_MAX_PARTS || (v->flat && v->part_count != 1))
        return -1;
    unsigned nsh = (unsigned)v->ec.k + v->ec.m;
    if (nsh > OL_META_MAX_SHARDS)
        return -1;

    struct rd r = {p, rl, OL_META_OBJ_FIXED};
    const uint8_t *q = take(&r, (uint32_t)L);
    if (!q)
        return -1;
    memcpy(v->cks.sum, q, (size_t)L);
    if (!(q = take(&r, nsh)))
        return -1;
    memcpy(v->ec.dist, q, nsh);
    if (!ec_ok(&v->ec))
        return -1;
    for (int i = 0; i < OL_META_HDR__COUNT; i++)
        if (!take_str(&r, OL_META_MAX_HEADER, &v->hdr[i]))
            return -1;
    if (!(q = take(&r, 2)))
        return -1;
    v->user_count = ol_le_ld16(q);
    int used = user_walk(p + r.off, rl - r.off, v->user_count);
    if (used < 0)
        return -1;
    v->user_enc = (struct ol_meta_bytes){p + r.off, (uint32_t)used};
    r.off += (uint32_t)used;
    if (!take_str(&r, OL_META_MAX_TAGGING, &v->tagging))
        return -1;
    uint32_t plen = v->part_count * (OL_META_PART_FIXED + (uint32_t)L);
    if (!(v->parts_enc = take(&r, plen)) || !parts_ok(v->parts_enc, v->part_count, (uint32_t)L))
        return -1;
    if (flags & OL_META_VF_INLINE) {
        if (!(q = take(&r, 12)))
            return -1;
        uint32_t ilen = ol_le_ld32(q);
        v->inline_sum = ol_le_ld64(q + 4);
        const uint8_t *data = ilen <= OL_META_MAX_INLINE ? take(&r, ilen) : NULL;
        if (!data || hash64(data, ilen) != v->inline_sum)
            return -1;
        v->has_inline = true;
        v->inline_data = (struct ol_meta_bytes){data, ilen};
    }
    return r.off == rl ? (int)rl : -1;
}

/* ---- accessors ---------------------------------------------------------------- */

int ol_meta_user_next(const struct ol_meta_version *v, uint32_t *pos, struct ol_meta_kv *out)
{
    if (v->user) {
        if (*pos >= v->user_count)
            return 0;
        *out = v->user[(*pos)++];
        return 1;
    }
    const uint8_t *p = v->user_enc.p;
    uint32_t n = v->user_enc.len, o = *pos;
    if (!p || o > n || n - o < 2)
        return 0;
    uint32_t nl = ol_le_ld16(p + o);
    if (n - o - 2 < nl || n - o - 2 - nl < 2)
        return 0;
    uint32_t vl = ol_le_ld16(p + o + 2 + nl);
    if (n - o - 4 - nl < vl)
        return 0;
    out->name = (struct ol_meta_bytes){p + o + 2, nl};
    out->value = (struct ol_meta_bytes){p + o + 4 + nl, vl};
    *pos = o + 4 + nl + vl;
    return 1;
}

int ol_meta_part_at(const struct ol_meta_version *v, unsigned i, struct ol_meta_part *out)
{
    if (i >= v->part_count)
        return -ENOENT;
    if (v->parts) {
        *out = v->parts[i];
        return 0;
    }
    int L = ol_meta_cks_len(v->cks.algo);
    if (!v->parts_enc || L < 0)
        return -ENOENT;
    const uint8_t *q = v->parts_enc + (size_t)i * (OL_META_PART_FIXED + (uint32_t)L);
    memset(out, 0, sizeof *out);
    out->number = ol_le_ld32(q);
    out->size = ol_le_ld64(q + 4);
    out->actual_size = ol_le_ld64(q + 12);
    memcpy(out->etag, q + 20, 16);
    memcpy(out->cks, q + OL_META_PART_FIXED, (size_t)L);
    return 0;
}

int ol_meta_part_find(const struct ol_meta_version *v, uint32_t number, struct ol_meta_part *out)
{
    unsigned lo = 0, hi = v->part_count;
    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        if (ol_meta_part_at(v, mid, out) < 0)
            return -ENOENT;
        if (out->number == number)
            return (int)mid;
        if (out->number < number)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -ENOENT;
}

/* ---- files -------------------------------------------------------------------- */

/* Writes the header and the key; returns where the first record goes. */
static uint8_t *write_header(uint8_t *out, const void *key, uint32_t klen, uint32_t count,
                             uint32_t total)
{
    memcpy(out, OL_META_MAGIC, 4);
    ol_le_st16(out + 4, OL_META_FORMAT);
    ol_le_st16(out + 6, 0);
    ol_le_st32(out + 8, count);
    ol_le_st32(out + 12, total);
    ol_le_st16(out + 16, (uint16_t)klen);
    return put(out + 18, key, klen);
}

static bool key_ok(const char *key, size_t klen)
{
    return key && klen >= 1 && klen <= OL_META_MAX_KEY;
}

static void write_trailer(uint8_t *out, uint32_t total)
{
    ol_le_st64(out + total - OL_META_TRAILER_LEN, hash64(out, total - OL_META_TRAILER_LEN));
}

int ol_meta_version_size(const struct ol_meta_version *v)
{
    return vsize(v);
}

int ol_meta_encode(const char *key, size_t klen, const struct ol_meta_version *const *versions,
                   unsigned n, uint8_t *out, size_t cap)
{
    if ((n && !versions) || !key_ok(key, klen))
        return -EINVAL;
    if (n > OL_META_MAX_VERSIONS)
        return -E2BIG;
    uint64_t total = OL_META_EMPTY_LEN(klen);
    for (unsigned i = 0; i < n; i++) {
        int s = vsize(versions[i]);
        if (s < 0)
            return s;
        total += (uint64_t)s;
    }
    if (total > OL_META_MAX_FILE)
        return -E2BIG;
    if (n > 1) {
        struct dup d;
        dup_init(&d, n);
        for (unsigned i = 0; i < n; i++)
            if (dup_add(&d, versions[i]->vid))
                for (unsigned j = 0; j < i; j++)
                    if (memcmp(versions[j]->vid, versions[i]->vid, OL_META_ID_LEN) == 0)
                        return -EEXIST;
    }
    if (!out || cap < total)
        return -ENOSPC;
    uint8_t *q = write_header(out, key, (uint32_t)klen, n, (uint32_t)total);
    for (unsigned i = 0; i < n; i++) {
        uint32_t s = (uint32_t)vsize(versions[i]);
        vwrite(versions[i], q, s);
        q += s;
    }
    write_trailer(out, (uint32_t)total);
    return (int)total;
}

int ol_meta_open(const uint8_t *buf, size_t len, struct ol_meta_file *f)
{
    if (!buf || len < 4 || memcmp(buf, OL_META_MAGIC, 4) != 0)
        return -EBADMSG;
    if (len < 6 + OL_META_TRAILER_LEN || len > OL_META_MAX_FILE)
        return -EBADMSG;
    if (len >= OL_META_HDR_LEN) { /* zeros after the file, to a page (OL_META_PAD) */
        uint32_t total = ol_le_ld32(buf + 12);
        if (total >= 6 + OL_META_TRAILER_LEN && total < len) {
            if (len > OL_META_PADDED((size_t)total))
                return -EBADMSG;
            for (size_t i = total; i < len; i++)
                if (buf[i])
                    return -EBADMSG;
            len = total;
        }
    }
    if (hash64(buf, len - OL_META_TRAILER_LEN) != ol_le_ld64(buf + len - OL_META_TRAILER_LEN))
        return -EBADMSG;
    if (ol_le_ld16(buf + 4) != OL_META_FORMAT)
        return -ENOTSUP;
    if (len < OL_META_EMPTY_LEN(1) || ol_le_ld16(buf + 6) != 0 || ol_le_ld32(buf + 12) != len)
        return -EBADMSG;
    uint32_t count = ol_le_ld32(buf + 8), klen = ol_le_ld16(buf + 16);
    if (count > OL_META_MAX_VERSIONS || klen == 0 || klen > OL_META_MAX_KEY ||
        len < OL_META_EMPTY_LEN(klen))
        return -EBADMSG;
    uint32_t end = (uint32_t)len - OL_META_TRAILER_LEN, first = OL_META_HDR_LEN + 2 + klen;
    uint32_t off = first;
    struct ol_meta_version v;
    struct dup d;
    if (count > 1)
        dup_init(&d, count);
    for (uint32_t i = 0; i < count; i++) {
        int rl = vdecode(buf + off, end - off, &v);
        if (rl < 0)
            return -EBADMSG;
        if (count > 1 && dup_add(&d, buf + off + 8)) {
            for (uint32_t o = first; o < off; o += ol_le_ld32(buf + o))
                if (memcmp(buf + o + 8, buf + off + 8, OL_META_ID_LEN) == 0)
                    return -EBADMSG;
        }
        off += (uint32_t)rl;
    }
    if (off != end)
        return -EBADMSG;
    *f = (struct ol_meta_file){
        .key = {buf + OL_META_HDR_LEN + 2, klen}, .count = count, .buf = buf,
        .len = (uint32_t)len, .first = first, .off = first, .index = 0,
    };
    return 0;
}

int ol_meta_next(struct ol_meta_file *f, struct ol_meta_version *v)
{
    if (f->index >= f->count)
        return 0;
    int rl = vdecode(f->buf + f->off, f->len - OL_META_TRAILER_LEN - f->off, v);
    if (rl < 0)
        return -EBADMSG;
    f->off += (uint32_t)rl;
    f->index++;
    return 1;
}

void ol_meta_rewind(struct ol_meta_file *f)
{
    f->off = f->first;
    f->index = 0;
}

int ol_meta_latest(const struct ol_meta_file *f, struct ol_meta_version *v)
{
    if (f->count == 0)
        return -ENOENT;
    if (vdecode(f->buf + f->first, f->len - OL_META_TRAILER_LEN - f->first, v) < 0)
        return -EBADMSG;
    return 0;
}

/*
 * Finds the record whose id is vid in a validated file: its position, with
 * *off and *rl set; -ENOENT; -EBADMSG when a length no longer fits.
 */
static int locate(const struct ol_meta_file *f, const uint8_t *vid, uint32_t *off, uint32_t *rl)
{
    uint32_t o = f->first, end = f->len - OL_META_TRAILER_LEN;
    for (uint32_t i = 0; i < f->count; i++) {
        if (end - o < OL_META_DM_LEN)
            return -EBADMSG;
        uint32_t l = ol_le_ld32(f->buf + o);
        if (l < OL_META_DM_LEN || l > end - o)
            return -EBADMSG;
        if (memcmp(f->buf + o + 8, vid, OL_META_ID_LEN) == 0) {
            *off = o;
            *rl = l;
            return (int)i;
        }
        o += l;
    }
    return -ENOENT;
}

int ol_meta_find(const struct ol_meta_file *f, const uint8_t vid[OL_META_ID_LEN],
                 struct ol_meta_version *v)
{
    uint32_t off, rl;
    int i = locate(f, vid, &off, &rl);
    if (i < 0)
        return i;
    if (vdecode(f->buf + off, rl, v) < 0)
        return -EBADMSG;
    return i;
}

/* ---- rewriting ---------------------------------------------------------------- */

enum op { OP_PUT, OP_UPDATE, OP_REMOVE };

/*
 * The new file = header, then (PUT) v, old records before the dropped one,
 * (UPDATE) v, old records after it, then the trailer. The dropped record is
 * the one with v's id (or vid), when there is one.
 */
static int rewrite(enum op op, const uint8_t *old, size_t oldlen, const char *key, size_t klen,
                   const struct ol_meta_version *v, const uint8_t *vid, bool replace,
                   uint8_t *out, size_t cap)
{
    struct ol_meta_file f = {.key = {(const uint8_t *)key, (uint32_t)klen}};
    if (old || oldlen) {
        int rc = ol_meta_open(old, oldlen, &f);
        if (rc < 0)
            return rc;
        if (key && (klen != f.key.len || memcmp(key, f.key.p, klen) != 0))
            return -EINVAL;
    } else {
        if (op != OP_PUT)
            return -ENOENT;
        f.len = OL_META_EMPTY_LEN((uint32_t)klen);
        f.first = f.off = OL_META_HDR_LEN + 2 + (uint32_t)klen;
    }
    int vs = 0;
    if (op != OP_REMOVE) {
        vs = vsize(v);
        if (vs < 0)
            return vs;
        vid = v->vid;
    }
    uint32_t end = f.len - OL_META_TRAILER_LEN, doff = end, dlen = 0;
    int at = f.count ? locate(&f, vid, &doff, &dlen) : -ENOENT;
    if (at == -EBADMSG)
        return at;
    bool found = at >= 0;
    if (op == OP_PUT && found && !replace)
        return -EEXIST;
    if (op != OP_PUT && !found)
        return -ENOENT;
    uint32_t count = f.count + (op == OP_REMOVE ? 0 : 1) - (found ? 1 : 0);
    uint64_t total = (uint64_t)f.len - dlen + (uint32_t)vs;
    if (count > OL_META_MAX_VERSIONS || total > OL_META_MAX_FILE)
        return -E2BIG;
    if (!out || cap < total)
        return -ENOSPC;
    uint8_t *q = write_header(out, f.key.p, f.key.len, count, (uint32_t)total);
    if (op == OP_PUT) {
        vwrite(v, q, (uint32_t)vs);
        q += vs;
    }
    if (f.buf)
        q = put(q, f.buf + f.first, doff - f.first);
    if (op == OP_UPDATE) {
        vwrite(v, q, (uint32_t)vs);
        q += vs;
    }
    if (f.buf)
        q = put(q, f.buf + doff + dlen, end - doff - dlen);
    write_trailer(out, (uint32_t)total);
    return (int)total;
}

int ol_meta_put_version(const uint8_t *old, size_t oldlen, const char *key, size_t klen,
                        const struct ol_meta_version *v, bool replace, uint8_t *out, size_t cap)
{
    if (!key_ok(key, klen))
        return -EINVAL;
    return rewrite(OP_PUT, old, oldlen, key, klen, v, NULL, replace, out, cap);
}

int ol_meta_update_version(const uint8_t *old, size_t oldlen, const struct ol_meta_version *v,
                           uint8_t *out, size_t cap)
{
    return rewrite(OP_UPDATE, old, oldlen, NULL, 0, v, NULL, false, out, cap);
}

int ol_meta_remove_version(const uint8_t *old, size_t oldlen, const uint8_t vid[OL_META_ID_LEN],
                           uint8_t *out, size_t cap)
{
    if (!vid)
        return -EINVAL;
    return rewrite(OP_REMOVE, old, oldlen, NULL, 0, NULL, vid, false, out, cap);
}
