/*
 * proto.c - the KV-cache wire protocol codec (see proto.h, and
 * docs/kv-protocol.md for the byte tables).
 *
 * Owns: encoding and validating frames. Every body has a "shape" (its
 * layout), picked from the header by shape_of(); one table gives each
 * shape's size rules for the header check, one function per shape walks a
 * body to validate it, and the iterators afterwards only read.
 *
 * Must not: do I/O, allocate, read outside [buf, buf + len), include
 * anything but libc, proto.h (and the index.h it names), base/le.h,
 * ISA-L's crc.h and xxhash.h. Integers are loaded and stored byte by byte
 * (base/le.h), so buffers need no alignment.
 */
#include "kv/proto.h"

#include "base/crc32c.h"
#include "base/le.h"
#include "base/simd.h"

#include <errno.h>
#include <string.h>

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

/* ---- byte access ---------------------------------------------------------- */

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

/* ---- names and checksums -------------------------------------------------- */

static const char *const status_names[OL_KV_STATUS__COUNT] = {
    "OK", "EXISTS", "NOT_FOUND", "NOSPACE", "BUSY", "PINNED",
    "STALE_GENERATION", "TOO_LARGE", "BAD_REQUEST", "UNAUTHORIZED",
    "UNSUPPORTED_VERSION", "QUOTA", "CHECKSUM_MISMATCH", "UNSUPPORTED",
    "SHUTTING_DOWN", "INTERNAL", "WRONG_SHARD",
};

const char *ol_kv_status_name(int s)
{
    return s >= 0 && s < OL_KV_STATUS__COUNT ? status_names[s] : "UNKNOWN";
}

static const char *const op_names[OL_KV_OP__MAX + 1] = {
    NULL, "HELLO", "RESERVE", "COMMIT", "ABORT", "LOOKUP", "ACQUIRE",
    "RELEASE", "DELETE", "RESET", "STATS", "PUT", "GET", "ERROR", "MEMBERS",
};

const char *ol_kv_op_name(int op)
{
    return op >= 1 && op <= OL_KV_OP__MAX ? op_names[op] : "UNKNOWN";
}

static const char *const stat_names[OL_KV_STAT__COUNT] = {
    "entries", "bytes_used", "bytes_capacity", "slots_total", "slots_free",
    "hits", "misses", "evictions", "reservations", "commits", "aborts",
    "pins", "acquires", "deletes", "disk_entries", "disk_bytes", "sessions",
    "protocol_errors",
};

const char *ol_kv_stat_name(int i)
{
    return i >= 0 && i < OL_KV_STAT__COUNT ? stat_names[i] : "unknown";
}

int ol_kv_parse_status(int rc)
{
    switch (rc) {
    case OL_KV_INVALID:     return OL_KV_BAD_REQUEST;
    case OL_KV_BAD_VERSION: return OL_KV_UNSUPPORTED_VERSION;
    case OL_KV_TOO_LARGE:   return OL_KV_TOO_LARGE_ST;
    default:                return OL_KV_OK;
    }
}

uint32_t ol_kv_crc32c(uint32_t crc, const void *p, size_t n)
{
    return ol_crc32c(crc, p, n);
}

uint64_t ol_kv_ns_seed(const void *ns, size_t len)
{
    return XXH3_64bits(ns, len);
}

struct ol_kv_hash ol_kv_key_hash(uint64_t ns_seed, const void *key, size_t len)
{
    XXH128_hash_t h = XXH3_128bits_withSeed(key, len, ns_seed);
    return (struct ol_kv_hash){h.low64, h.high64};
}

/*
 * Value checksums. Debian's libxxhash.so exports two builds of XXH3: the
 * plain entry points (XXH3_64bits, XXH3_64bits_update), compiled for
 * baseline x86-64 (SSE2), and the *_dispatch ones of xxh_x86dispatch.h,
 * which pick the AVX2 or AVX-512 kernel the CPU has. The plain build
 * hashes at about memory bandwidth, so a copy plus the hash ran at half of
 * memcpy; the dispatched one is about twice as fast and leaves the copy
 * the bottleneck. XXH3 is defined by its output: every kernel gives the
 * same hash (tests/unit/test_kv_proto.c checks it against the plain
 * build). The dispatch symbols are weak: a libxxhash without them (another
 * platform, a static link) leaves them NULL and the plain ones are used.
 */
extern XXH64_hash_t XXH3_64bits_dispatch(const void *input, size_t len) __attribute__((weak));
extern XXH_errorcode XXH3_64bits_update_dispatch(XXH3_state_t *state, const void *input, size_t len)
    __attribute__((weak));

uint64_t ol_kv_value_hash(const void *p, size_t n)
{
    return XXH3_64bits_dispatch ? XXH3_64bits_dispatch(p, n) : XXH3_64bits(p, n);
}

/* Chunks of 64 KiB: copied, then hashed while they are still in L1/L2 (the
 * copy brings the destination lines into cache); one pass over memory.
 * Measured here (bench/kv/kv_bench.c): 16 KiB to 256 KiB chunks are within
 * noise of each other, 4 KiB ones lose a quarter to per-call overhead. The
 * destination is hashed, not the source: what a put commits is the sum of
 * the bytes in the slot, what a get hands out is the copy it checked. */
uint64_t ol_kv_copy_hash(void *dst, const void *src, uint64_t n)
{
    enum { CHUNK = 64 * 1024 };
    if (n <= CHUNK) {
        memcpy(dst, src, n);
        return ol_kv_value_hash(dst, n);
    }
    XXH_errorcode (*update)(XXH3_state_t *, const void *, size_t) =
        XXH3_64bits_update_dispatch ? XXH3_64bits_update_dispatch : XXH3_64bits_update;
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    const char *s = src;
    char *d = dst;
    for (uint64_t off = 0; off < n; off += CHUNK) {
        size_t len = n - off < CHUNK ? (size_t)(n - off) : CHUNK;
        memcpy(d + off, s + off, len);
        update(&st, d + off, len);
    }
    return XXH3_64bits_digest(&st);
}

/* ---- shapes --------------------------------------------------------------- */

enum shape {
    SH_NONE,         /* no such frame */
    SH_EMPTY,        /* RESET, STATS requests */
    SH_HELLO_REQ,
    SH_HELLO_RESP,
    SH_KEYS,         /* RESERVE, LOOKUP, ACQUIRE, DELETE, GET requests */
    SH_COMMIT,
    SH_SLOT_REF,     /* ABORT, RELEASE requests */
    SH_PUT,
    SH_RESERVE_RES,
    SH_ACQUIRE_RES,
    SH_STATUS,       /* COMMIT, ABORT, RELEASE, DELETE, PUT responses */
    SH_LOOKUP_RES,
    SH_GET_RES,
    SH_RESET_RES,
    SH_STATS,
    SH_MESSAGE,      /* ERROR, and every response with status != OK */
    SH_MEMBERS,      /* MEMBERS response (v2) */
};

/* Item and body sizes. */
#define KEY_ITEM_MIN      8u                        /* align8(2 + 1) */
#define KEY_ITEM_MAX      200u                      /* align8(2 + 192) */
#define COMMIT_ITEM       32u
#define SLOT_REF_ITEM     16u
#define RESERVE_RES_ITEM  24u
#define ACQUIRE_RES_ITEM  40u
#define PUT_HEAD_FIXED    16u                       /* value_len, checksum */
#define PUT_ITEM_MIN      (PUT_HEAD_FIXED + KEY_ITEM_MIN)
#define GET_HEAD          24u
#define HELLO_REQ_FIXED   24u
#define HELLO_REQ_MIN     32u                       /* align8(24 + 0 + 1) */
#define HELLO_REQ_MAX     536u                      /* align8(24 + 256 + 256) */
#define HELLO_RESP_LEN    64u
#define LOOKUP_HEAD       8u
#define RESET_RES_LEN     8u
#define STATS_LEN         (8u * OL_KV_STAT__COUNT)
#define MESSAGE_MIN       8u
#define MESSAGE_MAX       1032u                     /* align8(2 + 1024) */
#define MEMBERS_HEAD      16u                       /* revision, replicas, reserved */
#define MEMBER_FIXED      18u                       /* id, weight, addr_len */
#define MEMBER_ITEM_MIN   24u                       /* align8(18 + 0) */
#define MEMBER_ITEM_MAX   288u                      /* align8(18 + 263) */

/* Body layout of each opcode's request and OK response (0 = SH_NONE). */
static const uint8_t req_shape[OL_KV_OP__MAX + 1] = {
    [OL_KV_OP_HELLO] = SH_HELLO_REQ,  [OL_KV_OP_RESERVE] = SH_KEYS,
    [OL_KV_OP_COMMIT] = SH_COMMIT,    [OL_KV_OP_ABORT] = SH_SLOT_REF,
    [OL_KV_OP_LOOKUP] = SH_KEYS,      [OL_KV_OP_ACQUIRE] = SH_KEYS,
    [OL_KV_OP_RELEASE] = SH_SLOT_REF, [OL_KV_OP_DELETE] = SH_KEYS,
    [OL_KV_OP_RESET] = SH_EMPTY,      [OL_KV_OP_STATS] = SH_EMPTY,
    [OL_KV_OP_PUT] = SH_PUT,          [OL_KV_OP_GET] = SH_KEYS,
    [OL_KV_OP_MEMBERS] = SH_EMPTY,
};
static const uint8_t resp_shape[OL_KV_OP__MAX + 1] = {
    [OL_KV_OP_HELLO] = SH_HELLO_RESP,  [OL_KV_OP_RESERVE] = SH_RESERVE_RES,
    [OL_KV_OP_COMMIT] = SH_STATUS,     [OL_KV_OP_ABORT] = SH_STATUS,
    [OL_KV_OP_LOOKUP] = SH_LOOKUP_RES, [OL_KV_OP_ACQUIRE] = SH_ACQUIRE_RES,
    [OL_KV_OP_RELEASE] = SH_STATUS,    [OL_KV_OP_DELETE] = SH_STATUS,
    [OL_KV_OP_RESET] = SH_RESET_RES,   [OL_KV_OP_STATS] = SH_STATS,
    [OL_KV_OP_PUT] = SH_STATUS,        [OL_KV_OP_GET] = SH_GET_RES,
    [OL_KV_OP_MEMBERS] = SH_MEMBERS,
};

/* The frame version an opcode's frames carry: the first version that has it. */
static unsigned op_version(unsigned op)
{
    return op == OL_KV_OP_MEMBERS ? 2u : OL_KV_VERSION;
}

/* The body layout of a frame; SH_NONE when no such frame exists (unknown
 * opcode, an ERROR request, an OK ERROR). status is known to be valid. */
static enum shape shape_of(unsigned op, bool response, unsigned status)
{
    if (op < 1 || op > OL_KV_OP__MAX)
        return SH_NONE;
    if (!response)
        return (enum shape)req_shape[op];
    if (status != OL_KV_OK)
        return SH_MESSAGE;                 /* ERROR, or any failed request */
    return (enum shape)resp_shape[op];     /* SH_NONE for an OK ERROR */
}

/* Shapes whose items are counted by the header (others have count 0). */
static bool shape_is_list(enum shape s)
{
    switch (s) {
    case SH_KEYS: case SH_COMMIT: case SH_SLOT_REF: case SH_PUT:
    case SH_RESERVE_RES: case SH_ACQUIRE_RES: case SH_STATUS:
    case SH_LOOKUP_RES: case SH_GET_RES: case SH_MEMBERS:
        return true;
    default:
        return false;
    }
}

/* Shapes that carry values inline and so get the data-frame body limit. */
static uint32_t shape_body_limit(enum shape s)
{
    return s == SH_PUT || s == SH_GET_RES ? OL_KV_MAX_DATA_BODY : OL_KV_MAX_BODY;
}

/* Whether a payload of p bytes (body without trailer) is possible for n items. */
static bool shape_size_ok(enum shape s, uint64_t n, uint64_t p)
{
    switch (s) {
    case SH_EMPTY:       return p == 0;
    case SH_HELLO_REQ:   return p >= HELLO_REQ_MIN && p <= HELLO_REQ_MAX;
    case SH_HELLO_RESP:  return p == HELLO_RESP_LEN;
    case SH_KEYS:        return p >= n * KEY_ITEM_MIN && p <= n * KEY_ITEM_MAX;
    case SH_COMMIT:      return p == n * COMMIT_ITEM;
    case SH_SLOT_REF:    return p == n * SLOT_REF_ITEM;
    case SH_PUT:         return p >= n * PUT_ITEM_MIN;
    case SH_RESERVE_RES: return p == n * RESERVE_RES_ITEM;
    case SH_ACQUIRE_RES: return p == n * ACQUIRE_RES_ITEM;
    case SH_STATUS:      return p == ol_kv_align8(2 * n);
    case SH_LOOKUP_RES:  return p == LOOKUP_HEAD + ol_kv_align8((n + 7) / 8);
    case SH_GET_RES:     return p >= n * GET_HEAD;
    case SH_RESET_RES:   return p == RESET_RES_LEN;
    case SH_STATS:       return p == STATS_LEN;
    case SH_MESSAGE:     return p >= MESSAGE_MIN && p <= MESSAGE_MAX;
    case SH_MEMBERS:     return n <= OL_KV_MAX_MEMBERS && p >= MEMBERS_HEAD + n * MEMBER_ITEM_MIN &&
                                p <= MEMBERS_HEAD + n * MEMBER_ITEM_MAX;
    case SH_NONE:        return false;
    }
    return false;
}

/* ---- header ---------------------------------------------------------------- */

int ol_kv_frame_parse_header(const void *buf, size_t len, struct ol_kv_hdr *out)
{
    const uint8_t *b = buf;
    if (len == 0)
        return OL_KV_INCOMPLETE;
    size_t m = len < 4 ? len : 4;
    if (memcmp(b, OL_KV_MAGIC, m) != 0)
        return OL_KV_INVALID;
    if (len >= 6 && (ol_le_ld16(b + 4) < 1 || ol_le_ld16(b + 4) > OL_KV_VERSION_MAX))
        return OL_KV_BAD_VERSION;
    if (len < OL_KV_HDR_LEN)
        return OL_KV_INCOMPLETE;
    if (ol_kv_crc32c(0, b, 28) != ol_le_ld32(b + 28))
        return OL_KV_INVALID;

    struct ol_kv_hdr h = {
        .version = ol_le_ld16(b + 4),
        .opcode = ol_le_ld16(b + 6),
        .req_id = ol_le_ld64(b + 8),
        .body_len = ol_le_ld32(b + 16),
        .count = ol_le_ld32(b + 20),
        .status = ol_le_ld16(b + 24),
        .flags = ol_le_ld16(b + 26),
    };
    if (h.flags & ~OL_KV_F_ALL)
        return OL_KV_INVALID;
    bool resp = h.flags & OL_KV_F_RESPONSE;
    if (resp ? h.status >= OL_KV_STATUS__COUNT : h.status != 0)
        return OL_KV_INVALID;
    enum shape s = shape_of(h.opcode, resp, h.status);
    if (s == SH_NONE || h.version != op_version(h.opcode))
        return OL_KV_INVALID;
    if (h.body_len % 8)
        return OL_KV_INVALID;
    if (h.count > OL_KV_MAX_ITEMS || h.body_len > shape_body_limit(s))
        return OL_KV_TOO_LARGE;
    uint32_t p = h.body_len;
    if (h.flags & OL_KV_F_BODY_CRC) {
        if (p < OL_KV_TRAILER_LEN)
            return OL_KV_INVALID;
        p -= OL_KV_TRAILER_LEN;
    }
    if (!shape_is_list(s) && h.count != 0)
        return OL_KV_INVALID;
    if (!shape_size_ok(s, h.count, p))
        return OL_KV_INVALID;
    *out = h;
    return OL_KV_HDR_LEN;
}

/* ---- body validation -------------------------------------------------------- */

/* A key item at b[0..left): its size, or 0 when malformed. */
static uint32_t key_item(const uint8_t *b, uint64_t left)
{
    if (left < 2)
        return 0;
    uint32_t k = ol_le_ld16(b);
    uint32_t size = (uint32_t)ol_kv_align8(2 + k);
    if (k < 1 || k > OL_KV_MAX_KEY || size > left)
        return 0;
    if (!all_zero(b + 2 + k, size - 2 - k))
        return 0;
    return size;
}

int ol_kv_parse_put_head(const void *buf, size_t len, uint64_t body_left,
                         struct ol_kv_put_item *out)
{
    const uint8_t *b = buf;
    if (body_left < PUT_ITEM_MIN)
        return OL_KV_INVALID;
    if (len < PUT_HEAD_FIXED + 2)
        return OL_KV_INCOMPLETE;
    uint64_t vlen = ol_le_ld64(b);
    if (vlen > OL_KV_MAX_VALUE)
        return OL_KV_TOO_LARGE;
    uint32_t k = ol_le_ld16(b + PUT_HEAD_FIXED);
    uint32_t head = PUT_HEAD_FIXED + (uint32_t)ol_kv_align8(2 + k);
    if (k < 1 || k > OL_KV_MAX_KEY || head + ol_kv_align8(vlen) > body_left)
        return OL_KV_INVALID;
    if (len < head)
        return OL_KV_INCOMPLETE;
    if (!key_item(b + PUT_HEAD_FIXED, head - PUT_HEAD_FIXED))
        return OL_KV_INVALID;
    out->value_len = vlen;
    out->checksum = ol_le_ld64(b + 8);
    out->key.p = b + PUT_HEAD_FIXED + 2;
    out->key.len = k;
    out->value = NULL;
    return (int)head;
}

int ol_kv_parse_get_head(const void *buf, size_t len, uint64_t body_left,
                         struct ol_kv_get_res *out)
{
    const uint8_t *b = buf;
    if (body_left < GET_HEAD)
        return OL_KV_INVALID;
    if (len < GET_HEAD)
        return OL_KV_INCOMPLETE;
    uint16_t st = ol_le_ld16(b);
    uint64_t vlen = ol_le_ld64(b + 8), sum = ol_le_ld64(b + 16);
    if (st >= OL_KV_STATUS__COUNT || !all_zero(b + 2, 6))
        return OL_KV_INVALID;
    if (st != OL_KV_OK && (vlen | sum))
        return OL_KV_INVALID;
    if (vlen > OL_KV_MAX_VALUE)
        return OL_KV_TOO_LARGE;
    if (GET_HEAD + ol_kv_align8(vlen) > body_left)
        return OL_KV_INVALID;
    out->status = st;
    out->value_len = vlen;
    out->checksum = sum;
    out->value = NULL;
    return GET_HEAD;
}

/* A status field: known, and the fields of a failed item all zero. */
static bool item_status_ok(const uint8_t *b, size_t rest_off, size_t rest_len)
{
    uint16_t st = ol_le_ld16(b);
    if (st >= OL_KV_STATUS__COUNT || ol_le_ld16(b + 2) != 0)
        return false;
    return st == OL_KV_OK || all_zero(b + rest_off, rest_len);
}

static int validate_hello_req(const uint8_t *b, uint32_t p)
{
    uint16_t lo = ol_le_ld16(b), hi = ol_le_ld16(b + 2);
    uint32_t flags = ol_le_ld32(b + 4);
    uint64_t vsize = ol_le_ld64(b + 8);
    uint32_t tl = ol_le_ld16(b + 16), nl = ol_le_ld16(b + 18);
    if (lo < 1 || lo > hi || (flags & ~(OL_KV_HELLO_WANTS_SHM | OL_KV_HELLO_SHARD)) ||
        (!(flags & OL_KV_HELLO_SHARD) && ol_le_ld32(b + 20)))
        return OL_KV_INVALID;
    if (vsize > OL_KV_MAX_VALUE)
        return OL_KV_TOO_LARGE;
    if (tl > OL_KV_MAX_TOKEN || nl < 1 || nl > OL_KV_MAX_NAMESPACE)
        return OL_KV_INVALID;
    uint32_t used = HELLO_REQ_FIXED + tl + nl;
    if (ol_kv_align8(used) != p || !all_zero(b + used, p - used))
        return OL_KV_INVALID;
    return 0;
}

/* Also used by the encoder, on the struct. */
static bool hello_resp_fields_ok(const struct ol_kv_hello_resp *r)
{
    if (r->version < 1 || (r->flags & ~OL_KV_HELLO_SHM))
        return false;
    if (r->max_items < 1 || r->max_items > OL_KV_MAX_ITEMS ||
        r->max_body < 1 || r->max_body > OL_KV_MAX_BODY ||
        r->max_data_body < 1 || r->max_data_body > OL_KV_MAX_DATA_BODY ||
        r->max_value < 1 || r->max_value > OL_KV_MAX_VALUE ||
        r->max_key < 1 || r->max_key > OL_KV_MAX_KEY)
        return false;
    if (!(r->flags & OL_KV_HELLO_SHM))
        return (r->slab_size | r->slot_size | r->value_offset | r->slot_count) == 0;
    if (r->slot_size == 0 || r->slot_count == 0 || r->value_offset >= r->slot_size)
        return false;
    /* slot_count * slot_size <= slab_size, without overflow. */
    return r->slot_size <= r->slab_size / r->slot_count;
}

static void get_hello_resp(const uint8_t *b, struct ol_kv_hello_resp *r)
{
    r->session_id = ol_le_ld64(b);
    r->version = ol_le_ld16(b + 8);
    r->flags = ol_le_ld16(b + 10);
    r->shards = ol_le_ld32(b + 12);
    r->slab_size = ol_le_ld64(b + 16);
    r->slot_size = ol_le_ld64(b + 24);
    r->value_offset = ol_le_ld64(b + 32);
    r->slot_count = ol_le_ld32(b + 40);
    r->max_items = ol_le_ld32(b + 44);
    r->max_body = ol_le_ld32(b + 48);
    r->max_data_body = ol_le_ld32(b + 52);
    r->max_value = ol_le_ld32(b + 56);
    r->max_key = ol_le_ld16(b + 60);
}

static int validate_lookup_res(const uint8_t *b, uint32_t n, uint32_t p)
{
    uint32_t lead = ol_le_ld32(b);
    if (lead > n || ol_le_ld32(b + 4) != 0)
        return OL_KV_INVALID;
    const uint8_t *bm = b + LOOKUP_HEAD;
    uint32_t full = lead / 8;
    for (uint32_t i = 0; i < full; i++)
        if (bm[i] != 0xFF)
            return OL_KV_INVALID;
    /* the run's last partial byte: its bits below lead%8 set */
    uint8_t low = (uint8_t)((1u << (lead & 7)) - 1);
    if (low && (bm[full] & low) != low)
        return OL_KV_INVALID;
    /* and the key that ends the run, if any, missed */
    if (lead < n && (bm[full] >> (lead & 7)) & 1)
        return OL_KV_INVALID;
    uint32_t nbytes = (n + 7) / 8;
    if (n & 7) {
        uint8_t unused = (uint8_t)(0xFFu << (n & 7));
        if (bm[nbytes - 1] & unused)
            return OL_KV_INVALID;
    }
    if (!all_zero(bm + nbytes, p - LOOKUP_HEAD - nbytes))
        return OL_KV_INVALID;
    return 0;
}

/* A MEMBERS item at b[0..left): its size, or 0 when malformed. */
static uint32_t member_item(const uint8_t *b, uint64_t left)
{
    if (left < MEMBER_ITEM_MIN)
        return 0;
    uint32_t al = ol_le_ld16(b + 16);
    uint32_t size = (uint32_t)ol_kv_align8(MEMBER_FIXED + al);
    if (al > OL_KV_MAX_ADDR || size > left || ol_le_ld64(b + 8) == 0 ||
        !all_zero(b + MEMBER_FIXED + al, size - MEMBER_FIXED - al))
        return 0;
    return size;
}

static int validate_members(const uint8_t *b, uint32_t n, uint32_t p)
{
    uint32_t rep = ol_le_ld16(b + 8);
    if (rep > OL_KV_MAX_REPLICAS || !all_zero(b + 10, 6) ||
        (rep == 0 && (n != 0 || ol_le_ld64(b) != 0)))
        return OL_KV_INVALID;
    uint64_t off = MEMBERS_HEAD;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t size = member_item(b + off, p - off);
        if (!size)
            return OL_KV_INVALID;
        off += size;
    }
    return off == p ? 0 : OL_KV_INVALID;
}

/* Walks a payload of p bytes with n items of shape s; 0 or a parser error. */
static int validate_body(enum shape s, const uint8_t *b, uint32_t n, uint32_t p)
{
    uint64_t off = 0;
    switch (s) {
    case SH_EMPTY:
        return 0;
    case SH_HELLO_REQ:
        return validate_hello_req(b, p);
    case SH_HELLO_RESP: {
        struct ol_kv_hello_resp r;
        get_hello_resp(b, &r);
        return hello_resp_fields_ok(&r) && ol_le_ld16(b + 62) == 0 ? 0 : OL_KV_INVALID;
    }
    case SH_KEYS:
        for (uint32_t i = 0; i < n; i++) {
            uint32_t size = key_item(b + off, p - off);
            if (!size)
                return OL_KV_INVALID;
            off += size;
        }
        break;
    case SH_COMMIT:
        for (uint32_t i = 0; i < n; i++, off += COMMIT_ITEM) {
            if (ol_le_ld32(b + off + 4))
                return OL_KV_INVALID;
            if (ol_le_ld64(b + off + 16) > OL_KV_MAX_VALUE)
                return OL_KV_TOO_LARGE;
        }
        break;
    case SH_SLOT_REF:
        for (uint32_t i = 0; i < n; i++, off += SLOT_REF_ITEM)
            if (ol_le_ld32(b + off + 4))
                return OL_KV_INVALID;
        break;
    case SH_RESERVE_RES:
        for (uint32_t i = 0; i < n; i++, off += RESERVE_RES_ITEM)
            if (!item_status_ok(b + off, 4, RESERVE_RES_ITEM - 4))
                return OL_KV_INVALID;
        break;
    case SH_ACQUIRE_RES:
        for (uint32_t i = 0; i < n; i++, off += ACQUIRE_RES_ITEM) {
            if (!item_status_ok(b + off, 4, ACQUIRE_RES_ITEM - 4))
                return OL_KV_INVALID;
            if (ol_le_ld64(b + off + 24) > OL_KV_MAX_VALUE)
                return OL_KV_TOO_LARGE;
        }
        break;
    case SH_STATUS:
        for (uint32_t i = 0; i < n; i++)
            if (ol_le_ld16(b + 2 * i) >= OL_KV_STATUS__COUNT)
                return OL_KV_INVALID;
        return all_zero(b + 2 * n, p - 2 * n) ? 0 : OL_KV_INVALID;
    case SH_LOOKUP_RES:
        return validate_lookup_res(b, n, p);
    case SH_PUT:
        for (uint32_t i = 0; i < n; i++) {
            struct ol_kv_put_item it;
            int h = ol_kv_parse_put_head(b + off, p - off, p - off, &it);
            if (h < 0)
                return h;
            off += (uint64_t)h + it.value_len;
            uint64_t pad = ol_kv_align8(it.value_len) - it.value_len;
            if (!all_zero(b + off, pad))
                return OL_KV_INVALID;
            off += pad;
        }
        break;
    case SH_GET_RES:
        for (uint32_t i = 0; i < n; i++) {
            struct ol_kv_get_res it;
            int h = ol_kv_parse_get_head(b + off, p - off, p - off, &it);
            if (h < 0)
                return h;
            off += (uint64_t)h + it.value_len;
            uint64_t pad = ol_kv_align8(it.value_len) - it.value_len;
            if (!all_zero(b + off, pad))
                return OL_KV_INVALID;
            off += pad;
        }
        break;
    case SH_RESET_RES:
    case SH_STATS:
        return 0;
    case SH_MESSAGE: {
        uint32_t ml = ol_le_ld16(b);
        if (ml > OL_KV_MAX_MESSAGE || ol_kv_align8(2 + ml) != p)
            return OL_KV_INVALID;
        return all_zero(b + 2 + ml, p - 2 - ml) ? 0 : OL_KV_INVALID;
    }
    case SH_MEMBERS:
        return validate_members(b, n, p);
    case SH_NONE:
        return OL_KV_INVALID;
    }
    return off == p ? 0 : OL_KV_INVALID;
}

long ol_kv_body_open(struct ol_kv_dec *d, const struct ol_kv_hdr *h,
                     const void *buf, size_t len)
{
    const uint8_t *b = buf;
    bool resp = h->flags & OL_KV_F_RESPONSE;
    enum shape s = shape_of(h->opcode, resp, h->status);
    if (len < h->body_len)
        return OL_KV_INCOMPLETE;
    uint32_t p = h->body_len;
    if (h->flags & OL_KV_F_BODY_CRC) {
        p -= OL_KV_TRAILER_LEN;
        if (ol_le_ld32(b + p + 4) != 0 || ol_le_ld32(b + p) != ol_kv_crc32c(0, b, p))
            return OL_KV_INVALID;
    }
    int rc = validate_body(s, b, h->count, p);
    if (rc < 0)
        return rc;
    *d = (struct ol_kv_dec){
        .p = b, .len = p, .off = s == SH_MEMBERS ? MEMBERS_HEAD : 0, .count = h->count,
        .index = 0, .opcode = h->opcode, .shape = (uint8_t)s,
    };
    return (long)h->body_len;
}

long ol_kv_frame_parse(const void *buf, size_t len, struct ol_kv_hdr *h,
                       struct ol_kv_dec *d)
{
    int rc = ol_kv_frame_parse_header(buf, len, h);
    if (rc < 0)
        return rc;
    long n = ol_kv_body_open(d, h, (const uint8_t *)buf + OL_KV_HDR_LEN,
                             len - OL_KV_HDR_LEN);
    return n < 0 ? n : n + OL_KV_HDR_LEN;
}

/* ---- iterators (bodies are valid: no checks but the layout) ----------------- */

/* The next item of shape s, or NULL at the end / on a layout mismatch (*rc). */
static const uint8_t *next_item(struct ol_kv_dec *d, enum shape s, int *rc)
{
    if (d->shape != s) {
        *rc = -1;
        return NULL;
    }
    if (d->index == d->count) {
        *rc = 0;
        return NULL;
    }
    d->index++;
    *rc = 1;
    return d->p + d->off;
}

int ol_kv_dec_key(struct ol_kv_dec *d, struct ol_kv_bytes *out)
{
    int rc;
    const uint8_t *b = next_item(d, SH_KEYS, &rc);
    if (!b)
        return rc;
    out->len = ol_le_ld16(b);
    out->p = b + 2;
    d->off += (uint32_t)ol_kv_align8(2 + out->len);
    return 1;
}

int ol_kv_dec_slot_ref(struct ol_kv_dec *d, struct ol_kv_slot_ref *out)
{
    int rc;
    const uint8_t *b = next_item(d, SH_SLOT_REF, &rc);
    if (!b)
        return rc;
    out->slot = ol_le_ld32(b);
    out->gen = ol_le_ld64(b + 8);
    d->off += SLOT_REF_ITEM;
    return 1;
}

int ol_kv_dec_commit(struct ol_kv_dec *d, struct ol_kv_commit_item *out)
{
    int rc;
    const uint8_t *b = next_item(d, SH_COMMIT, &rc);
    if (!b)
        return rc;
    out->slot = ol_le_ld32(b);
    out->gen = ol_le_ld64(b + 8);
    out->value_len = ol_le_ld64(b + 16);
    out->checksum = ol_le_ld64(b + 24);
    d->off += COMMIT_ITEM;
    return 1;
}

int ol_kv_dec_put(struct ol_kv_dec *d, struct ol_kv_put_item *out)
{
    int rc;
    const uint8_t *b = next_item(d, SH_PUT, &rc);
    if (!b)
        return rc;
    int h = ol_kv_parse_put_head(b, d->len - d->off, d->len - d->off, out);
    out->value = b + h;
    d->off += (uint32_t)(h + ol_kv_align8(out->value_len));
    return 1;
}

int ol_kv_dec_reserve_res(struct ol_kv_dec *d, struct ol_kv_reserve_res *out)
{
    int rc;
    const uint8_t *b = next_item(d, SH_RESERVE_RES, &rc);
    if (!b)
        return rc;
    out->status = ol_le_ld16(b);
    out->slot = ol_le_ld32(b + 4);
    out->gen = ol_le_ld64(b + 8);
    out->offset = ol_le_ld64(b + 16);
    d->off += RESERVE_RES_ITEM;
    return 1;
}

int ol_kv_dec_acquire_res(struct ol_kv_dec *d, struct ol_kv_acquire_res *out)
{
    int rc;
    const uint8_t *b = next_item(d, SH_ACQUIRE_RES, &rc);
    if (!b)
        return rc;
    out->status = ol_le_ld16(b);
    out->slot = ol_le_ld32(b + 4);
    out->gen = ol_le_ld64(b + 8);
    out->offset = ol_le_ld64(b + 16);
    out->value_len = ol_le_ld64(b + 24);
    out->checksum = ol_le_ld64(b + 32);
    d->off += ACQUIRE_RES_ITEM;
    return 1;
}

int ol_kv_dec_status(struct ol_kv_dec *d, uint16_t *out)
{
    int rc;
    const uint8_t *b = next_item(d, SH_STATUS, &rc);
    if (!b)
        return rc;
    *out = ol_le_ld16(b);
    d->off += 2;
    return 1;
}

int ol_kv_dec_get_res(struct ol_kv_dec *d, struct ol_kv_get_res *out)
{
    int rc;
    const uint8_t *b = next_item(d, SH_GET_RES, &rc);
    if (!b)
        return rc;
    out->status = ol_le_ld16(b);
    out->value_len = ol_le_ld64(b + 8);
    out->checksum = ol_le_ld64(b + 16);
    out->value = b + GET_HEAD;
    d->off += (uint32_t)(GET_HEAD + ol_kv_align8(out->value_len));
    return 1;
}

int ol_kv_dec_hello_req(const struct ol_kv_dec *d, struct ol_kv_hello_req *out)
{
    if (d->shape != SH_HELLO_REQ)
        return -1;
    const uint8_t *b = d->p;
    out->min_version = ol_le_ld16(b);
    out->max_version = ol_le_ld16(b + 2);
    out->flags = ol_le_ld32(b + 4);
    out->value_size = ol_le_ld64(b + 8);
    out->shard = ol_le_ld32(b + 20);
    out->token.len = ol_le_ld16(b + 16);
    out->ns.len = ol_le_ld16(b + 18);
    out->token.p = b + HELLO_REQ_FIXED;
    out->ns.p = b + HELLO_REQ_FIXED + out->token.len;
    return 0;
}

int ol_kv_dec_hello_resp(const struct ol_kv_dec *d, struct ol_kv_hello_resp *out)
{
    if (d->shape != SH_HELLO_RESP)
        return -1;
    get_hello_resp(d->p, out);
    return 0;
}

int ol_kv_dec_lookup_res(const struct ol_kv_dec *d, struct ol_kv_lookup_res *out)
{
    if (d->shape != SH_LOOKUP_RES)
        return -1;
    out->count = d->count;
    out->leading = ol_le_ld32(d->p);
    out->bitmap = d->p + LOOKUP_HEAD;
    return 0;
}

int ol_kv_dec_reset_res(const struct ol_kv_dec *d, uint64_t *removed)
{
    if (d->shape != SH_RESET_RES)
        return -1;
    *removed = ol_le_ld64(d->p);
    return 0;
}

int ol_kv_dec_stats(const struct ol_kv_dec *d, struct ol_kv_stats *out)
{
    if (d->shape != SH_STATS)
        return -1;
    for (int i = 0; i < OL_KV_STAT__COUNT; i++)
        out->c[i] = ol_le_ld64(d->p + 8 * i);
    return 0;
}

int ol_kv_dec_member(struct ol_kv_dec *d, struct ol_kv_member_item *out)
{
    int rc;
    const uint8_t *b = next_item(d, SH_MEMBERS, &rc);
    if (!b)
        return rc;
    out->id = (int64_t)ol_le_ld64(b);
    out->weight = ol_le_ld64(b + 8);
    out->addr.len = ol_le_ld16(b + 16);
    out->addr.p = b + MEMBER_FIXED;
    d->off += (uint32_t)ol_kv_align8(MEMBER_FIXED + out->addr.len);
    return 1;
}

int ol_kv_dec_members_head(const struct ol_kv_dec *d, struct ol_kv_members_head *out)
{
    if (d->shape != SH_MEMBERS)
        return -1;
    out->revision = (int64_t)ol_le_ld64(d->p);
    out->replicas = ol_le_ld16(d->p + 8);
    return 0;
}

int ol_kv_dec_message(const struct ol_kv_dec *d, struct ol_kv_bytes *out)
{
    if (d->shape != SH_MESSAGE)
        return -1;
    out->len = ol_le_ld16(d->p);
    out->p = d->p + 2;
    return 0;
}

/* ---- encoder ---------------------------------------------------------------- */

/* Body bytes the frame will have once ended, were it ended with body_len
 * len and n items. */
static uint64_t end_size(const struct ol_kv_enc *e, uint64_t len, uint64_t n)
{
    uint64_t body;
    switch ((enum shape)e->shape) {
    case SH_STATUS:     body = ol_kv_align8(2 * n); break;
    case SH_LOOKUP_RES: body = LOOKUP_HEAD + ol_kv_align8((n + 7) / 8); break;
    case SH_MESSAGE:    body = len ? len : MESSAGE_MIN; break;
    default:            body = ol_kv_align8(len); break;
    }
    return body + (e->flags & OL_KV_F_BODY_CRC ? OL_KV_TRAILER_LEN : 0);
}

/* Room for growing the body to len bytes with n items: 0 or -errno. */
static int enc_room(const struct ol_kv_enc *e, uint64_t len, uint64_t n)
{
    uint64_t body = end_size(e, len, n);
    if (n > OL_KV_MAX_ITEMS || body > shape_body_limit((enum shape)e->shape))
        return -E2BIG;
    if (OL_KV_HDR_LEN + body > e->cap)
        return -ENOSPC;
    return 0;
}

/* Start of the next item of shape s with size bytes, or NULL (*rc set).
 * list: the item counts in the header. */
static uint8_t *enc_item(struct ol_kv_enc *e, enum shape s, uint64_t size,
                         bool list, int *rc)
{
    if (e->shape != s || (!list && e->done)) {
        *rc = -EINVAL;
        return NULL;
    }
    *rc = enc_room(e, e->len + size, e->count + (list ? 1 : 0));
    if (*rc)
        return NULL;
    uint8_t *p = e->buf + OL_KV_HDR_LEN + e->len;
    memset(p, 0, size);
    return p;
}

static void enc_commit_item(struct ol_kv_enc *e, uint64_t size, bool list)
{
    e->len += (uint32_t)size;
    if (list)
        e->count++;
    else
        e->done = 1;
}

int ol_kv_frame_begin(struct ol_kv_enc *e, void *buf, size_t cap,
                      unsigned opcode, uint64_t req_id, unsigned flags,
                      unsigned status)
{
    bool resp = flags & OL_KV_F_RESPONSE;
    if ((flags & ~OL_KV_F_ALL) || status >= OL_KV_STATUS__COUNT ||
        (!resp && status != 0))
        return -EINVAL;
    enum shape s = shape_of(opcode, resp, status);
    if (s == SH_NONE)
        return -EINVAL;
    *e = (struct ol_kv_enc){
        .buf = buf, .cap = cap, .opcode = (uint16_t)opcode,
        .flags = (uint16_t)flags, .status = (uint16_t)status,
        .shape = (uint8_t)s,
    };
    uint32_t head = s == SH_LOOKUP_RES ? LOOKUP_HEAD : s == SH_MEMBERS ? MEMBERS_HEAD : 0;
    if (OL_KV_HDR_LEN + end_size(e, head, 0) > cap)
        return -ENOSPC;
    memset(e->buf, 0, OL_KV_HDR_LEN);
    memcpy(e->buf, OL_KV_MAGIC, 4);
    ol_le_st16(e->buf + 4, (uint16_t)op_version(opcode));
    ol_le_st16(e->buf + 6, (uint16_t)opcode);
    ol_le_st64(e->buf + 8, req_id);
    ol_le_st16(e->buf + 24, (uint16_t)status);
    ol_le_st16(e->buf + 26, (uint16_t)flags);
    e->len = head;
    memset(e->buf + OL_KV_HDR_LEN, 0, head);
    return 0;
}

long ol_kv_frame_end(struct ol_kv_enc *e)
{
    enum shape s = (enum shape)e->shape;
    uint8_t *body = e->buf + OL_KV_HDR_LEN;
    switch (s) {
    case SH_HELLO_REQ: case SH_HELLO_RESP: case SH_RESET_RES: case SH_STATS:
        if (!e->done)
            return -EINVAL;
        break;
    case SH_MESSAGE:
        if (!e->done) {
            memset(body, 0, MESSAGE_MIN);     /* empty message */
            e->len = MESSAGE_MIN;
            e->done = 1;
        }
        break;
    case SH_LOOKUP_RES:
        ol_le_st32(body, e->lead);
        break;
    default:
        break;
    }
    uint32_t p = (uint32_t)ol_kv_align8(e->len);
    memset(body + e->len, 0, p - e->len);
    e->len = p;
    uint32_t total = p;
    if (e->flags & OL_KV_F_BODY_CRC) {
        ol_le_st32(body + p, ol_kv_crc32c(0, body, p));
        ol_le_st32(body + p + 4, 0);
        total += OL_KV_TRAILER_LEN;
    }
    ol_le_st32(e->buf + 16, total);
    ol_le_st32(e->buf + 20, e->count);
    ol_le_st32(e->buf + 28, ol_kv_crc32c(0, e->buf, 28));
    return (long)(OL_KV_HDR_LEN + total);
}

int ol_kv_enc_key(struct ol_kv_enc *e, const void *key, size_t key_len)
{
    if (key_len < 1 || key_len > OL_KV_MAX_KEY)
        return -EINVAL;
    int rc;
    uint64_t size = ol_kv_align8(2 + key_len);
    uint8_t *p = enc_item(e, SH_KEYS, size, true, &rc);
    if (!p)
        return rc;
    ol_le_st16(p, (uint16_t)key_len);
    memcpy(p + 2, key, key_len);
    enc_commit_item(e, size, true);
    return 0;
}

int ol_kv_enc_slot_ref(struct ol_kv_enc *e, uint32_t slot, uint64_t gen)
{
    int rc;
    uint8_t *p = enc_item(e, SH_SLOT_REF, SLOT_REF_ITEM, true, &rc);
    if (!p)
        return rc;
    ol_le_st32(p, slot);
    ol_le_st64(p + 8, gen);
    enc_commit_item(e, SLOT_REF_ITEM, true);
    return 0;
}

int ol_kv_enc_commit(struct ol_kv_enc *e, const struct ol_kv_commit_item *it)
{
    if (e->shape == SH_COMMIT && it->value_len > OL_KV_MAX_VALUE)
        return -E2BIG;
    int rc;
    uint8_t *p = enc_item(e, SH_COMMIT, COMMIT_ITEM, true, &rc);
    if (!p)
        return rc;
    ol_le_st32(p, it->slot);
    ol_le_st64(p + 8, it->gen);
    ol_le_st64(p + 16, it->value_len);
    ol_le_st64(p + 24, it->checksum);
    enc_commit_item(e, COMMIT_ITEM, true);
    return 0;
}

int ol_kv_enc_reserve_res(struct ol_kv_enc *e, const struct ol_kv_reserve_res *it)
{
    if (it->status >= OL_KV_STATUS__COUNT)
        return -EINVAL;
    int rc;
    uint8_t *p = enc_item(e, SH_RESERVE_RES, RESERVE_RES_ITEM, true, &rc);
    if (!p)
        return rc;
    ol_le_st16(p, it->status);
    if (it->status == OL_KV_OK) {
        ol_le_st32(p + 4, it->slot);
        ol_le_st64(p + 8, it->gen);
        ol_le_st64(p + 16, it->offset);
    }
    enc_commit_item(e, RESERVE_RES_ITEM, true);
    return 0;
}

int ol_kv_enc_acquire_res(struct ol_kv_enc *e, const struct ol_kv_acquire_res *it)
{
    if (it->status >= OL_KV_STATUS__COUNT)
        return -EINVAL;
    bool ok = it->status == OL_KV_OK;
    if (e->shape == SH_ACQUIRE_RES && ok && it->value_len > OL_KV_MAX_VALUE)
        return -E2BIG;
    int rc;
    uint8_t *p = enc_item(e, SH_ACQUIRE_RES, ACQUIRE_RES_ITEM, true, &rc);
    if (!p)
        return rc;
    ol_le_st16(p, it->status);
    if (ok) {
        ol_le_st32(p + 4, it->slot);
        ol_le_st64(p + 8, it->gen);
        ol_le_st64(p + 16, it->offset);
        ol_le_st64(p + 24, it->value_len);
        ol_le_st64(p + 32, it->checksum);
    }
    enc_commit_item(e, ACQUIRE_RES_ITEM, true);
    return 0;
}

int ol_kv_enc_status(struct ol_kv_enc *e, unsigned status)
{
    if (status >= OL_KV_STATUS__COUNT)
        return -EINVAL;
    int rc;
    uint8_t *p = enc_item(e, SH_STATUS, 2, true, &rc);
    if (!p)
        return rc;
    ol_le_st16(p, (uint16_t)status);
    enc_commit_item(e, 2, true);
    return 0;
}

int ol_kv_enc_members_head(struct ol_kv_enc *e, const struct ol_kv_members_head *h)
{
    if (e->shape != SH_MEMBERS || h->replicas > OL_KV_MAX_REPLICAS ||
        (h->replicas == 0 && (h->revision != 0 || e->count != 0)))
        return -EINVAL;
    uint8_t *b = e->buf + OL_KV_HDR_LEN;
    ol_le_st64(b, (uint64_t)h->revision);
    ol_le_st16(b + 8, h->replicas);
    return 0;
}

int ol_kv_enc_member(struct ol_kv_enc *e, int64_t id, uint64_t weight, const void *addr,
                     size_t addr_len)
{
    if (weight == 0 || addr_len > OL_KV_MAX_ADDR ||
        (e->shape == SH_MEMBERS && (e->count >= OL_KV_MAX_MEMBERS ||
                                    ol_le_ld16(e->buf + OL_KV_HDR_LEN + 8) == 0)))
        return e->shape == SH_MEMBERS && e->count >= OL_KV_MAX_MEMBERS ? -E2BIG : -EINVAL;
    int rc;
    uint64_t size = ol_kv_align8(MEMBER_FIXED + addr_len);
    uint8_t *p = enc_item(e, SH_MEMBERS, size, true, &rc);
    if (!p)
        return rc;
    ol_le_st64(p, (uint64_t)id);
    ol_le_st64(p + 8, weight);
    ol_le_st16(p + 16, (uint16_t)addr_len);
    memcpy(p + MEMBER_FIXED, addr, addr_len);
    enc_commit_item(e, size, true);
    return 0;
}

int ol_kv_enc_lookup_hit(struct ol_kv_enc *e, bool hit)
{
    if (e->shape != SH_LOOKUP_RES)
        return -EINVAL;
    uint32_t n = e->count;
    int rc = enc_room(e, 0, (uint64_t)n + 1);
    if (rc)
        return rc;
    uint8_t *bm = e->buf + OL_KV_HDR_LEN + LOOKUP_HEAD;
    if ((n & 7) == 0) {
        bm[n / 8] = 0;
        e->len++;
    }
    if (hit) {
        bm[n / 8] |= (uint8_t)(1u << (n & 7));
        if (e->lead == n)
            e->lead++;
    }
    e->count++;
    return 0;
}

int ol_kv_enc_put(struct ol_kv_enc *e, const void *key, size_t key_len,
                  const void *value, uint64_t value_len, uint64_t checksum,
                  void **value_at)
{
    if (key_len < 1 || key_len > OL_KV_MAX_KEY)
        return -EINVAL;
    if (value_len > OL_KV_MAX_VALUE)
        return -E2BIG;
    uint64_t head = PUT_HEAD_FIXED + ol_kv_align8(2 + key_len);
    uint64_t size = head + ol_kv_align8(value_len);
    /* Zeroes only the head and the value's padding, not the value. */
    if (e->shape != SH_PUT)
        return -EINVAL;
    int rc = enc_room(e, e->len + size, (uint64_t)e->count + 1);
    if (rc)
        return rc;
    uint8_t *p = e->buf + OL_KV_HDR_LEN + e->len;
    memset(p, 0, head);
    if (size > head)
        memset(p + size - 8, 0, 8);          /* the value's last word + pad */
    ol_le_st64(p, value_len);
    ol_le_st64(p + 8, checksum);
    ol_le_st16(p + PUT_HEAD_FIXED, (uint16_t)key_len);
    memcpy(p + PUT_HEAD_FIXED + 2, key, key_len);
    if (value && value_len)
        memcpy(p + head, value, value_len);
    if (value_at)
        *value_at = p + head;
    enc_commit_item(e, size, true);
    return 0;
}

int ol_kv_enc_get_res(struct ol_kv_enc *e, unsigned status, const void *value,
                      uint64_t value_len, uint64_t checksum, void **value_at)
{
    if (status >= OL_KV_STATUS__COUNT)
        return -EINVAL;
    if (status != OL_KV_OK)
        value_len = checksum = 0;
    if (value_len > OL_KV_MAX_VALUE)
        return -E2BIG;
    if (e->shape != SH_GET_RES)
        return -EINVAL;
    uint64_t size = GET_HEAD + ol_kv_align8(value_len);
    int rc = enc_room(e, e->len + size, (uint64_t)e->count + 1);
    if (rc)
        return rc;
    uint8_t *p = e->buf + OL_KV_HDR_LEN + e->len;
    memset(p, 0, GET_HEAD);
    if (size > GET_HEAD)
        memset(p + size - 8, 0, 8);
    ol_le_st16(p, (uint16_t)status);
    ol_le_st64(p + 8, value_len);
    ol_le_st64(p + 16, checksum);
    if (value && value_len)
        memcpy(p + GET_HEAD, value, value_len);
    if (value_at)
        *value_at = p + GET_HEAD;
    enc_commit_item(e, size, true);
    return 0;
}

int ol_kv_enc_hello_req(struct ol_kv_enc *e, const struct ol_kv_hello_req *r)
{
    if (r->min_version < 1 || r->min_version > r->max_version ||
        (r->flags & ~(OL_KV_HELLO_WANTS_SHM | OL_KV_HELLO_SHARD)) ||
        (!(r->flags & OL_KV_HELLO_SHARD) && r->shard) || r->token.len > OL_KV_MAX_TOKEN ||
        r->ns.len < 1 || r->ns.len > OL_KV_MAX_NAMESPACE)
        return -EINVAL;
    if (r->value_size > OL_KV_MAX_VALUE)
        return -E2BIG;
    uint32_t used = HELLO_REQ_FIXED + r->token.len + r->ns.len;
    uint64_t size = ol_kv_align8(used);
    int rc;
    uint8_t *p = enc_item(e, SH_HELLO_REQ, size, false, &rc);
    if (!p)
        return rc;
    ol_le_st16(p, r->min_version);
    ol_le_st16(p + 2, r->max_version);
    ol_le_st32(p + 4, r->flags);
    ol_le_st64(p + 8, r->value_size);
    ol_le_st16(p + 16, (uint16_t)r->token.len);
    ol_le_st16(p + 18, (uint16_t)r->ns.len);
    ol_le_st32(p + 20, r->shard);
    if (r->token.len)
        memcpy(p + HELLO_REQ_FIXED, r->token.p, r->token.len);
    memcpy(p + HELLO_REQ_FIXED + r->token.len, r->ns.p, r->ns.len);
    enc_commit_item(e, size, false);
    return 0;
}

int ol_kv_enc_hello_resp(struct ol_kv_enc *e, const struct ol_kv_hello_resp *r)
{
    if (!hello_resp_fields_ok(r))
        return -EINVAL;
    int rc;
    uint8_t *p = enc_item(e, SH_HELLO_RESP, HELLO_RESP_LEN, false, &rc);
    if (!p)
        return rc;
    ol_le_st64(p, r->session_id);
    ol_le_st16(p + 8, r->version);
    ol_le_st16(p + 10, r->flags);
    ol_le_st32(p + 12, r->shards);
    ol_le_st64(p + 16, r->slab_size);
    ol_le_st64(p + 24, r->slot_size);
    ol_le_st64(p + 32, r->value_offset);
    ol_le_st32(p + 40, r->slot_count);
    ol_le_st32(p + 44, r->max_items);
    ol_le_st32(p + 48, r->max_body);
    ol_le_st32(p + 52, r->max_data_body);
    ol_le_st32(p + 56, r->max_value);
    ol_le_st16(p + 60, r->max_key);
    enc_commit_item(e, HELLO_RESP_LEN, false);
    return 0;
}

int ol_kv_enc_reset_res(struct ol_kv_enc *e, uint64_t removed)
{
    int rc;
    uint8_t *p = enc_item(e, SH_RESET_RES, RESET_RES_LEN, false, &rc);
    if (!p)
        return rc;
    ol_le_st64(p, removed);
    enc_commit_item(e, RESET_RES_LEN, false);
    return 0;
}

int ol_kv_enc_stats(struct ol_kv_enc *e, const struct ol_kv_stats *s)
{
    int rc;
    uint8_t *p = enc_item(e, SH_STATS, STATS_LEN, false, &rc);
    if (!p)
        return rc;
    for (int i = 0; i < OL_KV_STAT__COUNT; i++)
        ol_le_st64(p + 8 * i, s->c[i]);
    enc_commit_item(e, STATS_LEN, false);
    return 0;
}

int ol_kv_enc_message(struct ol_kv_enc *e, const char *msg, size_t len)
{
    if (len > OL_KV_MAX_MESSAGE)
        return -EINVAL;
    int rc;
    uint64_t size = ol_kv_align8(2 + len);
    uint8_t *p = enc_item(e, SH_MESSAGE, size, false, &rc);
    if (!p)
        return rc;
    ol_le_st16(p, (uint16_t)len);
    if (len)
        memcpy(p + 2, msg, len);
    enc_commit_item(e, size, false);
    return 0;
}
