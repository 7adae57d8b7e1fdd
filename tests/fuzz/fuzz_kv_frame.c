/*
 * fuzz_kv_frame.c - libFuzzer target for the KV wire codec (src/kv/proto.c).
 *
 * The first input byte picks a mode; the rest is the payload:
 *   mode % 3 == 0  the payload is parsed as received bytes (a frame stream);
 *   mode % 3 == 1  the same, after fixing the header CRC and, when the frame
 *                  is complete and flagged, the body CRC, so that mutations
 *                  reach the body validators instead of dying at the CRC;
 *   mode % 3 == 2  the payload drives the encoder (opcode, flags, status,
 *                  capacity, then a list of appends with their arguments);
 *                  whatever frame it ends must parse.
 *
 * Aborts when an invariant of the proto.h contract breaks: a return outside
 * the documented set; -2 from a complete header or body, or a complete
 * answer from a truncated one; a prefix of a valid frame that is not -2; a
 * slice outside the body; an item field outside its limit; an iterator that
 * yields a different number of items than the header counts; a valid frame
 * that does not re-encode to the very same bytes (decode -> encode ->
 * decode); an encoder frame that does not parse. Reads outside the buffer
 * are left to ASan: parsed bytes always sit in an allocation of exactly
 * their length.
 */
#include "kv/proto.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(c) do { if (!(c)) abort(); } while (0)

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static void wr32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static bool within(const uint8_t *p, uint64_t n, const uint8_t *lo, const uint8_t *hi)
{
    return p >= lo && p <= hi && n <= (uint64_t)(hi - p);
}

/* Body layouts as docs/kv-protocol.md lists them (independent of proto.c). */
enum kind {
    K_EMPTY, K_HELLO_REQ, K_HELLO_RESP, K_KEYS, K_COMMIT, K_SLOT_REF, K_PUT,
    K_RESERVE_RES, K_ACQUIRE_RES, K_STATUS, K_LOOKUP_RES, K_GET_RES,
    K_RESET_RES, K_STATS, K_MESSAGE, K_MEMBERS,
};

static enum kind kind_of(const struct ol_kv_hdr *h)
{
    bool resp = ol_kv_hdr_is_response(h);
    if (resp && h->status != OL_KV_OK)
        return K_MESSAGE;
    switch (h->opcode) {
    case OL_KV_OP_HELLO:   return resp ? K_HELLO_RESP : K_HELLO_REQ;
    case OL_KV_OP_RESERVE: return resp ? K_RESERVE_RES : K_KEYS;
    case OL_KV_OP_COMMIT:  return resp ? K_STATUS : K_COMMIT;
    case OL_KV_OP_ABORT:   return resp ? K_STATUS : K_SLOT_REF;
    case OL_KV_OP_LOOKUP:  return resp ? K_LOOKUP_RES : K_KEYS;
    case OL_KV_OP_ACQUIRE: return resp ? K_ACQUIRE_RES : K_KEYS;
    case OL_KV_OP_RELEASE: return resp ? K_STATUS : K_SLOT_REF;
    case OL_KV_OP_DELETE:  return resp ? K_STATUS : K_KEYS;
    case OL_KV_OP_RESET:   return resp ? K_RESET_RES : K_EMPTY;
    case OL_KV_OP_STATS:   return resp ? K_STATS : K_EMPTY;
    case OL_KV_OP_PUT:     return resp ? K_STATUS : K_PUT;
    case OL_KV_OP_GET:     return resp ? K_GET_RES : K_KEYS;
    case OL_KV_OP_MEMBERS: return resp ? K_MEMBERS : K_EMPTY;
    default:               abort();    /* the header check let it through */
    }
}

static bool kind_has_items(enum kind k)
{
    return k == K_KEYS || k == K_COMMIT || k == K_SLOT_REF || k == K_PUT ||
           k == K_RESERVE_RES || k == K_ACQUIRE_RES || k == K_STATUS ||
           k == K_LOOKUP_RES || k == K_GET_RES || k == K_MEMBERS;
}

/*
 * Walks a frame that parsed (frame[0..n), n = 32 + body_len), checks every
 * field and slice, and re-encodes it into an exactly sized buffer: the bytes
 * must come out the same.
 */
static void check_valid(const uint8_t *frame, long n, const struct ol_kv_hdr *h,
                        struct ol_kv_dec *d)
{
    const uint8_t *lo = frame + OL_KV_HDR_LEN, *hi = frame + n;
    enum kind k = kind_of(h);
    if (!kind_has_items(k))
        REQUIRE(h->count == 0);
    REQUIRE(h->body_len % 8 == 0);
    REQUIRE(h->count <= OL_KV_MAX_ITEMS);

    uint8_t *out = malloc((size_t)n);
    REQUIRE(out);
    struct ol_kv_enc e;
    REQUIRE(ol_kv_frame_begin(&e, out, (size_t)n, h->opcode, h->req_id, h->flags,
                              h->status) == 0);
    uint32_t items = 0;
    int rc;
    switch (k) {
    case K_EMPTY:
        break;
    case K_HELLO_REQ: {
        struct ol_kv_hello_req r;
        REQUIRE(ol_kv_dec_hello_req(d, &r) == 0);
        REQUIRE(r.min_version >= 1 && r.min_version <= r.max_version);
        REQUIRE(r.token.len <= OL_KV_MAX_TOKEN && r.ns.len >= 1 &&
                r.ns.len <= OL_KV_MAX_NAMESPACE);
        REQUIRE(within(r.token.p, r.token.len, lo, hi) && within(r.ns.p, r.ns.len, lo, hi));
        REQUIRE(ol_kv_enc_hello_req(&e, &r) == 0);
        break;
    }
    case K_HELLO_RESP: {
        struct ol_kv_hello_resp r;
        REQUIRE(ol_kv_dec_hello_resp(d, &r) == 0);
        REQUIRE(r.max_key <= OL_KV_MAX_KEY && r.max_value <= OL_KV_MAX_VALUE);
        REQUIRE(ol_kv_enc_hello_resp(&e, &r) == 0);
        break;
    }
    case K_KEYS: {
        struct ol_kv_bytes kb;
        while ((rc = ol_kv_dec_key(d, &kb)) == 1) {
            REQUIRE(kb.len >= 1 && kb.len <= OL_KV_MAX_KEY && within(kb.p, kb.len, lo, hi));
            REQUIRE(ol_kv_enc_key(&e, kb.p, kb.len) == 0);
            items++;
        }
        REQUIRE(rc == 0);
        break;
    }
    case K_COMMIT: {
        struct ol_kv_commit_item it;
        while ((rc = ol_kv_dec_commit(d, &it)) == 1) {
            REQUIRE(it.value_len <= OL_KV_MAX_VALUE);
            REQUIRE(ol_kv_enc_commit(&e, &it) == 0);
            items++;
        }
        REQUIRE(rc == 0);
        break;
    }
    case K_SLOT_REF: {
        struct ol_kv_slot_ref it;
        while ((rc = ol_kv_dec_slot_ref(d, &it)) == 1) {
            REQUIRE(ol_kv_enc_slot_ref(&e, it.slot, it.gen) == 0);
            items++;
        }
        REQUIRE(rc == 0);
        break;
    }
    case K_PUT: {
        struct ol_kv_put_item it;
        while ((rc = ol_kv_dec_put(d, &it)) == 1) {
            REQUIRE(it.key.len >= 1 && it.key.len <= OL_KV_MAX_KEY);
            REQUIRE(within(it.key.p, it.key.len, lo, hi));
            REQUIRE(it.value_len <= OL_KV_MAX_VALUE && within(it.value, it.value_len, lo, hi));
            REQUIRE((it.value - lo) % 8 == 0);
            REQUIRE(ol_kv_enc_put(&e, it.key.p, it.key.len, it.value, it.value_len,
                                  it.checksum, NULL) == 0);
            items++;
        }
        REQUIRE(rc == 0);
        break;
    }
    case K_RESERVE_RES: {
        struct ol_kv_reserve_res it;
        while ((rc = ol_kv_dec_reserve_res(d, &it)) == 1) {
            REQUIRE(it.status < OL_KV_STATUS__COUNT);
            REQUIRE(it.status == OL_KV_OK || (it.slot | it.gen | it.offset) == 0);
            REQUIRE(ol_kv_enc_reserve_res(&e, &it) == 0);
            items++;
        }
        REQUIRE(rc == 0);
        break;
    }
    case K_ACQUIRE_RES: {
        struct ol_kv_acquire_res it;
        while ((rc = ol_kv_dec_acquire_res(d, &it)) == 1) {
            REQUIRE(it.status < OL_KV_STATUS__COUNT && it.value_len <= OL_KV_MAX_VALUE);
            REQUIRE(it.status == OL_KV_OK ||
                    (it.slot | it.gen | it.offset | it.value_len | it.checksum) == 0);
            REQUIRE(ol_kv_enc_acquire_res(&e, &it) == 0);
            items++;
        }
        REQUIRE(rc == 0);
        break;
    }
    case K_STATUS: {
        uint16_t st;
        while ((rc = ol_kv_dec_status(d, &st)) == 1) {
            REQUIRE(st < OL_KV_STATUS__COUNT);
            REQUIRE(ol_kv_enc_status(&e, st) == 0);
            items++;
        }
        REQUIRE(rc == 0);
        break;
    }
    case K_LOOKUP_RES: {
        struct ol_kv_lookup_res r;
        REQUIRE(ol_kv_dec_lookup_res(d, &r) == 0);
        REQUIRE(r.count == h->count && r.leading <= r.count);
        REQUIRE(within(r.bitmap, (r.count + 7) / 8, lo, hi));
        for (uint32_t i = 0; i < r.count; i++) {
            if (i < r.leading)
                REQUIRE(ol_kv_lookup_hit(&r, i));
            REQUIRE(ol_kv_enc_lookup_hit(&e, ol_kv_lookup_hit(&r, i)) == 0);
        }
        if (r.leading < r.count)
            REQUIRE(!ol_kv_lookup_hit(&r, r.leading));
        items = r.count;
        break;
    }
    case K_GET_RES: {
        struct ol_kv_get_res it;
        while ((rc = ol_kv_dec_get_res(d, &it)) == 1) {
            REQUIRE(it.status < OL_KV_STATUS__COUNT && it.value_len <= OL_KV_MAX_VALUE);
            REQUIRE(within(it.value, it.value_len, lo, hi));
            REQUIRE(it.status == OL_KV_OK || (it.value_len | it.checksum) == 0);
            REQUIRE(ol_kv_enc_get_res(&e, it.status, it.value, it.value_len,
                                      it.checksum, NULL) == 0);
            items++;
        }
        REQUIRE(rc == 0);
        break;
    }
    case K_RESET_RES: {
        uint64_t removed;
        REQUIRE(ol_kv_dec_reset_res(d, &removed) == 0);
        REQUIRE(ol_kv_enc_reset_res(&e, removed) == 0);
        break;
    }
    case K_STATS: {
        struct ol_kv_stats s;
        REQUIRE(ol_kv_dec_stats(d, &s) == 0);
        REQUIRE(ol_kv_enc_stats(&e, &s) == 0);
        break;
    }
    case K_MEMBERS: {
        REQUIRE(h->version == 2 && h->count <= OL_KV_MAX_MEMBERS);
        struct ol_kv_members_head mh;
        REQUIRE(ol_kv_dec_members_head(d, &mh) == 0);
        REQUIRE(mh.replicas <= OL_KV_MAX_REPLICAS);
        REQUIRE(ol_kv_enc_members_head(&e, &mh) == 0);
        struct ol_kv_member_item it;
        while ((rc = ol_kv_dec_member(d, &it)) == 1) {
            REQUIRE(it.weight > 0 && it.addr.len <= OL_KV_MAX_ADDR);
            REQUIRE(within(it.addr.p, it.addr.len, lo, hi));
            REQUIRE(ol_kv_enc_member(&e, it.id, it.weight, it.addr.p, it.addr.len) == 0);
            items++;
        }
        REQUIRE(rc == 0);
        break;
    }
    case K_MESSAGE: {
        struct ol_kv_bytes m;
        REQUIRE(ol_kv_dec_message(d, &m) == 0);
        REQUIRE(m.len <= OL_KV_MAX_MESSAGE && within(m.p, m.len, lo, hi));
        REQUIRE(ol_kv_enc_message(&e, (const char *)m.p, m.len) == 0);
        break;
    }
    }
    if (kind_has_items(k))
        REQUIRE(items == h->count);
    /* decode -> encode gives the same bytes, in a buffer of exactly n */
    REQUIRE(ol_kv_frame_end(&e) == n);
    REQUIRE(memcmp(out, frame, (size_t)n) == 0);
    struct ol_kv_hdr h2;
    struct ol_kv_dec d2;
    REQUIRE(ol_kv_frame_parse(out, (size_t)n, &h2, &d2) == n);
    REQUIRE(h2.req_id == h->req_id && h2.count == h->count && h2.opcode == h->opcode);
    free(out);
}

/* Parses the frame stream buf[0..len) (an exact allocation) frame by frame. */
static void parse_stream(const uint8_t *buf, size_t len)
{
    size_t at = 0;
    for (int frames = 0; frames < 64; frames++) {
        const uint8_t *p = buf + at;
        size_t left = len - at;
        struct ol_kv_hdr h;
        struct ol_kv_dec d;
        int hr = ol_kv_frame_parse_header(p, left, &h);
        REQUIRE(hr == 32 || hr == OL_KV_INCOMPLETE || hr == OL_KV_INVALID ||
                hr == OL_KV_BAD_VERSION || hr == OL_KV_TOO_LARGE);
        REQUIRE((hr == OL_KV_INCOMPLETE) == (left < 32 && hr != OL_KV_INVALID &&
                                             hr != OL_KV_BAD_VERSION));
        long fr = ol_kv_frame_parse(p, left, &h, &d);
        if (hr != 32) {
            REQUIRE(fr == hr);
            return;
        }
        REQUIRE(fr > 0 || fr == OL_KV_INCOMPLETE || fr == OL_KV_INVALID ||
                fr == OL_KV_TOO_LARGE);
        REQUIRE((fr == OL_KV_INCOMPLETE) == (left - 32 < h.body_len));
        if (fr < 0)
            return;
        REQUIRE((uint64_t)fr == ol_kv_frame_len(&h) && (size_t)fr <= left);
        /* every truncation of a valid frame is "need more" */
        for (long k = 0; k < fr; k++) {
            struct ol_kv_hdr th;
            struct ol_kv_dec td;
            if (k < 40 || k > fr - 9) {
                uint8_t *cut = malloc((size_t)k + 1);
                REQUIRE(cut);
                memcpy(cut, p, (size_t)k);
                REQUIRE(ol_kv_frame_parse(cut, (size_t)k, &th, &td) == OL_KV_INCOMPLETE);
                free(cut);
            } else {
                REQUIRE(ol_kv_frame_parse(p, (size_t)k, &th, &td) == OL_KV_INCOMPLETE);
            }
        }
        check_valid(p, fr, &h, &d);
        at += (size_t)fr;
    }
}

/* Makes the CRCs of the first frame in buf right, where there are bytes. */
static void fix_crcs(uint8_t *buf, size_t len)
{
    if (len < 32)
        return;
    uint32_t blen = rd32(buf + 16);
    if ((buf[26] & OL_KV_F_BODY_CRC) && blen >= 8 && blen % 8 == 0 && len - 32 >= blen)
        wr32(buf + 32 + blen - 8, ol_kv_crc32c(0, buf + 32, blen - 8));
    wr32(buf + 28, ol_kv_crc32c(0, buf, 28));
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

static const uint8_t zeros[OL_KV_MAX_MESSAGE + 8];

static void encode_mode(const uint8_t *data, size_t size)
{
    struct src s = {data, size};
    unsigned op = take(&s, 1) % (OL_KV_OP__MAX + 2);
    unsigned flags = take(&s, 1) & 7;              /* one bit beyond the known */
    unsigned status = take(&s, 1) % (OL_KV_STATUS__COUNT + 1);
    size_t cap = take(&s, 2) % 8192;
    uint8_t *buf = malloc(cap + 1);
    REQUIRE(buf);
    memset(buf, 0, cap + 1);
    struct ol_kv_enc e;
    int rc = ol_kv_frame_begin(&e, buf, cap, op, 0x0102030405060708ull, flags, status);
    REQUIRE(rc == 0 || rc == -EINVAL || rc == -ENOSPC);
    if (rc) {
        free(buf);
        return;
    }
    uint32_t appended = 0;
    for (int steps = 0; steps < 256 && s.n; steps++) {
        unsigned what = take(&s, 1) % 16;
        uint32_t a = take(&s, 2), b = take(&s, 4);
        const uint8_t *bytes = s.p;                   /* key/value material */
        size_t avail = s.n;
        size_t klen = a % (OL_KV_MAX_KEY + 2);        /* 0..193 */
        uint64_t vlen = b % 1024;
        if (b >> 31)                                  /* now and then huge */
            vlen = OL_KV_MAX_VALUE - 64 + (b & 127);
        const void *key = klen <= avail ? bytes : zeros;
        const void *val = vlen <= avail ? bytes : NULL;
        switch (what) {
        case 0:  rc = ol_kv_enc_key(&e, key, klen); break;
        case 1:  rc = ol_kv_enc_slot_ref(&e, a, (uint64_t)b << 7); break;
        case 2: {
            struct ol_kv_commit_item it = {a, b, vlen, (uint64_t)a * b};
            rc = ol_kv_enc_commit(&e, &it);
            break;
        }
        case 3: {
            struct ol_kv_reserve_res it = {(uint16_t)(a % 17), b, a, (uint64_t)b << 3};
            rc = ol_kv_enc_reserve_res(&e, &it);
            break;
        }
        case 4: {
            struct ol_kv_acquire_res it = {(uint16_t)(a % 17), b, a, b, vlen, a};
            rc = ol_kv_enc_acquire_res(&e, &it);
            break;
        }
        case 5:  rc = ol_kv_enc_status(&e, a % 17); break;
        case 6:  rc = ol_kv_enc_lookup_hit(&e, a & 1); break;
        case 7:  rc = ol_kv_enc_put(&e, key, klen, val, vlen, b, NULL); break;
        case 8:  rc = ol_kv_enc_get_res(&e, a % 17, val, vlen, b, NULL); break;
        case 9: {
            size_t tl = a % 260, nl = b % 260;
            struct ol_kv_hello_req r = {
                .min_version = (uint16_t)(b >> 16 & 3), .max_version = (uint16_t)(b >> 18 & 3),
                .flags = a >> 15, .value_size = vlen,
                .token = {tl <= avail ? bytes : zeros, (uint32_t)tl},
                .ns = {nl <= avail ? bytes : zeros, (uint32_t)nl},
            };
            rc = ol_kv_enc_hello_req(&e, &r);
            break;
        }
        case 10: {
            struct ol_kv_hello_resp r = {
                .session_id = b, .version = (uint16_t)(a & 3), .flags = (uint16_t)(a >> 2 & 3),
                .shards = 4, .slab_size = (uint64_t)b << 12, .slot_size = 4096,
                .value_offset = a >> 4 & 4095, .slot_count = b >> 20,
                .max_items = 1 + a % OL_KV_MAX_ITEMS, .max_body = OL_KV_MAX_BODY,
                .max_data_body = OL_KV_MAX_DATA_BODY, .max_value = 1 + b % OL_KV_MAX_VALUE,
                .max_key = (uint16_t)(a % 200),
            };
            if (!(r.flags & OL_KV_HELLO_SHM))
                r.slab_size = r.slot_size = r.value_offset = r.slot_count = 0;
            rc = ol_kv_enc_hello_resp(&e, &r);
            break;
        }
        case 11: rc = ol_kv_enc_reset_res(&e, (uint64_t)a << 32 | b); break;
        case 13: {
            struct ol_kv_members_head mh = {.revision = (int64_t)b - (a & 1), .replicas = (uint16_t)(a % 18)};
            rc = ol_kv_enc_members_head(&e, &mh);
            break;
        }
        case 14: {
            size_t al = a % (OL_KV_MAX_ADDR + 2);        /* 0..264 */
            rc = ol_kv_enc_member(&e, (int64_t)b - 7, a % 3 ? (uint64_t)b << 3 : 0,
                                  al <= avail ? bytes : zeros, al);
            break;
        }
        case 12: {
            struct ol_kv_stats st;
            for (int i = 0; i < OL_KV_STAT__COUNT; i++)
                st.c[i] = (uint64_t)b * (uint64_t)i + a;
            rc = ol_kv_enc_stats(&e, &st);
            break;
        }
        default: {
            size_t ml = b % (OL_KV_MAX_MESSAGE + 2);
            rc = ol_kv_enc_message(&e, ml <= avail ? (const char *)bytes : (const char *)zeros, ml);
            break;
        }
        }
        REQUIRE(rc == 0 || rc == -EINVAL || rc == -ENOSPC || rc == -E2BIG);
        if (rc == 0)
            appended++;
        /* consume what the item used as material */
        size_t used = (a % 64) < avail ? (a % 64) : avail;
        s.p += used;
        s.n -= used;
    }
    long n = ol_kv_frame_end(&e);
    REQUIRE(n == -EINVAL || (n >= 32 && (size_t)n <= cap));
    if (n < 0) {
        free(buf);
        return;
    }
    REQUIRE(buf[cap] == 0);                       /* nothing past cap */
    /* what the encoder produced parses, in an exact allocation */
    uint8_t *f = malloc((size_t)n);
    REQUIRE(f);
    memcpy(f, buf, (size_t)n);
    struct ol_kv_hdr h;
    struct ol_kv_dec d;
    REQUIRE(ol_kv_frame_parse(f, (size_t)n, &h, &d) == n);
    REQUIRE(h.opcode == op && h.flags == flags && h.status == status);
    if (kind_has_items(kind_of(&h)))
        REQUIRE(h.count <= appended);
    check_valid(f, n, &h, &d);
    free(f);
    free(buf);
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
    uint8_t *buf = malloc(size ? size : 1);
    REQUIRE(buf);
    if (size)
        memcpy(buf, data, size);
    if (mode == 1)
        fix_crcs(buf, size);
    parse_stream(buf, size);
    free(buf);
    return 0;
}
