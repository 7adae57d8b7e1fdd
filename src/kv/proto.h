/*
 * proto.h - the KV-cache wire protocol: frame codec (encoder and decoder).
 *
 * Owns: the byte layout of every frame that clients and openlaked exchange
 * over the KV Unix socket and TCP port, the limits, the opcode and status
 * numbers, and the checksum conventions. docs/kv-protocol.md is the prose
 * and offset-table version of this contract; the two must agree.
 *
 * Must not: do I/O, allocate, keep hidden state, read a byte outside the
 * [buf, buf + len) it is given, or include anything but libc, ISA-L's crc.h
 * and xxhash.h. It knows nothing of sessions, the slab or sockets: it turns
 * bytes into validated fields (slices of the caller's buffer, zero copy) and
 * fields into bytes in a caller buffer.
 *
 * Frame = 32-byte header + body of body_len bytes. All integers little-endian.
 *
 *   off size type    field
 *     0    4 u8[4]   magic "OLKV" (4F 4C 4B 56)
 *     4    2 u16     version: frame format version: 2 for MEMBERS frames,
 *                    1 for every other (OL_KV_VERSION; v2 = v1 + MEMBERS)
 *     6    2 u16     opcode (enum ol_kv_op)
 *     8    8 u64     request id, chosen by the client, echoed in the response
 *    16    4 u32     body_len: bytes after the header; a multiple of 8
 *    20    4 u32     count: items in the body (0 for single-struct bodies)
 *    24    2 u16     status: 0 in requests; enum ol_kv_status in responses
 *    26    2 u16     flags: OL_KV_F_RESPONSE | OL_KV_F_BODY_CRC, others 0
 *    28    4 u32     hdr_crc: CRC-32C of bytes 0..27 (see ol_kv_crc32c)
 *
 * Body: a sequence of items, each starting at a body offset that is a
 * multiple of 8, padded with zero bytes to the next multiple of 8. Reserved
 * fields and padding must be zero; decoding rejects anything else, so every
 * valid frame has exactly one encoding (decode then re-encode gives the same
 * bytes). With OL_KV_F_BODY_CRC the body ends with an 8-byte trailer
 * { u32 CRC-32C of the body bytes before it, u32 0 }, counted in body_len.
 * Per-opcode body layouts: docs/kv-protocol.md and the item structs below.
 *
 * Return convention of the parsers (picohttpparser style, STYLE.md 6):
 *   >= 0  complete; bytes consumed
 *   -1    OL_KV_INVALID      malformed: answer ERROR BAD_REQUEST, close
 *   -2    OL_KV_INCOMPLETE   a valid prefix; call again with more bytes
 *   -3    OL_KV_BAD_VERSION  magic fine, version unknown: UNSUPPORTED_VERSION
 *   -4    OL_KV_TOO_LARGE    over a limit (body, items, value): TOO_LARGE
 * ol_kv_parse_status() maps these to the status of the ERROR reply.
 *
 * Encoder functions return 0 / bytes written, or a negative errno:
 * -ENOSPC (the caller's buffer is too small), -E2BIG (a protocol limit),
 * -EINVAL (a field out of range, or an item that does not belong in the
 * frame being built). A failed append leaves the frame as it was, so a
 * batching caller may end the frame at the first -ENOSPC/-E2BIG and carry the
 * item over into the next frame.
 *
 * Validation happens once: ol_kv_body_open() checks the whole body (every
 * length against the body end, padding, reserved fields, statuses, limits,
 * the body CRC) before the caller sees any item, so a batch is accepted or
 * rejected as a whole and the ol_kv_dec_* iterators cannot fail afterwards.
 * Value checksums (xxh3-64) are NOT checked here: they travel end to end
 * from the writer to the reader (ol_kv_value_hash).
 */
#ifndef OL_KV_PROTO_H
#define OL_KV_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kv/index.h" /* struct ol_kv_hash */

/* ---- constants ---------------------------------------------------------- */

#define OL_KV_MAGIC         "OLKV"
#define OL_KV_VERSION       1u        /* HELLO frames, and every opcode but MEMBERS */
#define OL_KV_VERSION_MAX   2u        /* v2 = v1 + MEMBERS; the newest this codec speaks */
#define OL_KV_HDR_LEN       32u
#define OL_KV_TRAILER_LEN   8u        /* body CRC trailer, when flagged */

/*
 * Limits. Decoding rejects anything above them (OL_KV_TOO_LARGE for sizes
 * and counts, OL_KV_INVALID for string lengths); encoding refuses to
 * produce it. A server may advertise lower limits in its HELLO response.
 *
 * OL_KV_MAX_BODY: every frame except PUT requests and OK GET responses. The
 *   largest valid metadata body is 65536 keys of 192 bytes (200 bytes each
 *   with prefix and padding) plus the CRC trailer = 13,107,208 bytes, so
 *   16 MiB admits every valid one and bounds a connection's read buffer.
 * OL_KV_MAX_VALUE: one value (a vLLM KV block is a few MiB; 256 MiB leaves
 *   room for large models and big block sizes).
 * OL_KV_MAX_DATA_BODY: PUT requests and OK GET responses (values inline):
 *   1 GiB = four maximal values, or hundreds of typical blocks per frame.
 *   It keeps body_len far inside u32 and inside the int length of ISA-L's
 *   CRC routine.
 */
#define OL_KV_MAX_BODY       (16u << 20)
#define OL_KV_MAX_DATA_BODY  (1u << 30)
#define OL_KV_MAX_VALUE      (256u << 20)
#define OL_KV_MAX_ITEMS      65536u
#define OL_KV_MAX_KEY        192u     /* keys are 1..192 bytes */
#define OL_KV_MAX_TOKEN      256u     /* auth token, 0..256 bytes */
#define OL_KV_MAX_NAMESPACE  256u     /* namespace, 1..256 bytes */
#define OL_KV_MAX_MESSAGE    1024u    /* error message text, 0..1024 bytes */
#define OL_KV_MAX_MEMBERS    4096u    /* MEMBERS items (= OL_MEMBER_MAX, a view's members) */
#define OL_KV_MAX_ADDR       263u     /* a member's kv_addr, 0..263 bytes (host:port) */
#define OL_KV_MAX_REPLICAS   16u      /* MEMBERS replicas (= cluster.kv_replicas' limit) */

/* Header flags. */
#define OL_KV_F_RESPONSE   0x0001u    /* set on every server-to-client frame */
#define OL_KV_F_BODY_CRC   0x0002u    /* body ends with the CRC-32C trailer */
#define OL_KV_F_ALL        0x0003u

/* HELLO request flags. */
#define OL_KV_HELLO_WANTS_SHM  0x00000001u  /* map the slab (Unix socket) */
#define OL_KV_HELLO_SHARD      0x00000002u  /* the shard field names the shard to serve */
/* HELLO response flags. */
#define OL_KV_HELLO_SHM        0x0001u      /* slab fd attached; geometry valid */

/* Parser returns. */
#define OL_KV_INVALID       (-1)
#define OL_KV_INCOMPLETE    (-2)
#define OL_KV_BAD_VERSION   (-3)
#define OL_KV_TOO_LARGE     (-4)

/* Opcodes. Stable numbers: never reuse one. */
enum ol_kv_op {
    OL_KV_OP_HELLO   = 1,   /* open a session; must be the first frame */
    OL_KV_OP_RESERVE = 2,   /* keys -> writable slots (shared slab) */
    OL_KV_OP_COMMIT  = 3,   /* publish written slots */
    OL_KV_OP_ABORT   = 4,   /* give reserved slots back unpublished */
    OL_KV_OP_LOOKUP  = 5,   /* presence bitmap + leading run of hits */
    OL_KV_OP_ACQUIRE = 6,   /* pin slots for reading (shared slab) */
    OL_KV_OP_RELEASE = 7,   /* unpin */
    OL_KV_OP_DELETE  = 8,   /* remove keys */
    OL_KV_OP_RESET   = 9,   /* remove every entry of the caller's namespace */
    OL_KV_OP_STATS   = 10,  /* counters */
    OL_KV_OP_PUT     = 11,  /* TCP data path: values inline in the request */
    OL_KV_OP_GET     = 12,  /* TCP data path: values inline in the response */
    OL_KV_OP_ERROR   = 13,  /* response only: protocol error, then close */
    OL_KV_OP_MEMBERS = 14,  /* v2: the cluster's KV members (placement), for clients */
};
#define OL_KV_OP__MAX 14

/* Status codes, in response headers and response items. Stable numbers. */
enum ol_kv_status {
    OL_KV_OK                  = 0,
    OL_KV_EXISTS              = 1,   /* RESERVE/PUT: key already present */
    OL_KV_NOT_FOUND           = 2,
    OL_KV_NOSPACE             = 3,   /* nothing evictable: all pinned/reserved */
    OL_KV_BUSY                = 4,   /* transient; retry the item */
    OL_KV_PINNED              = 5,   /* DELETE of a pinned entry */
    OL_KV_STALE_GENERATION    = 6,   /* slot/generation not (or no longer) yours */
    OL_KV_TOO_LARGE_ST        = 7,   /* over a limit */
    OL_KV_BAD_REQUEST         = 8,   /* malformed frame or field */
    OL_KV_UNAUTHORIZED        = 9,   /* bad token, or no HELLO yet */
    OL_KV_UNSUPPORTED_VERSION = 10,
    OL_KV_QUOTA               = 11,  /* namespace quota reached */
    OL_KV_CHECKSUM_MISMATCH   = 12,  /* value bytes do not match their xxh3 */
    OL_KV_UNSUPPORTED         = 13,  /* opcode not served on this session */
    OL_KV_SHUTTING_DOWN       = 14,  /* server draining; retry elsewhere/later */
    OL_KV_INTERNAL            = 15,
    OL_KV_WRONG_SHARD         = 16,  /* key belongs to another shard's connection */
};
#define OL_KV_STATUS__COUNT 17

/* ---- small helpers -------------------------------------------------------- */

/* n rounded up to a multiple of 8 (n <= UINT64_MAX - 7). */
static inline uint64_t ol_kv_align8(uint64_t n) { return (n + 7) & ~(uint64_t)7; }

/*
 * ol_kv_status_name - the stable upper-case name of status s ("OK",
 * "NOT_FOUND", ...), or "UNKNOWN" for a number outside the enum. Static.
 */
const char *ol_kv_status_name(int s);

/* ol_kv_op_name - "HELLO", "RESERVE", ..., or "UNKNOWN". Static. */
const char *ol_kv_op_name(int op);

/* True for statuses after which the same item may simply be sent again. */
static inline bool ol_kv_status_retryable(int s)
{
    return s == OL_KV_BUSY || s == OL_KV_SHUTTING_DOWN;
}

/*
 * ol_kv_parse_status - the status to put in the ERROR frame answering a
 * parser return rc < 0: BAD_REQUEST for -1, UNSUPPORTED_VERSION for -3,
 * TOO_LARGE for -4; OK for anything else (-2 is not an error).
 */
int ol_kv_parse_status(int rc);

/*
 * ol_kv_crc32c - CRC-32C (Castagnoli; iSCSI, RFC 3720): reflected
 * polynomial 0x82F63B78, initial value and final XOR 0xFFFFFFFF; check value
 * ol_kv_crc32c(0, "123456789", 9) == 0xE3069283. Chains like zlib's crc32:
 * crc is 0 to start, or the result over the preceding bytes. It is
 * ~crc32_iscsi(p, n, ~crc) with ISA-L (which itself neither inverts its
 * initial value nor its result). Any n; p may be NULL when n is 0.
 */
uint32_t ol_kv_crc32c(uint32_t crc, const void *p, size_t n);

/*
 * Key routing, shared by clients and the server (docs/kv-protocol.md, "Shards
 * and key routing"): ol_kv_ns_seed is XXH3-64 of the namespace; a key's hash
 * is XXH3-128 of its bytes with that seed; its shard is hi mod shards.
 */
uint64_t ol_kv_ns_seed(const void *ns, size_t len);
struct ol_kv_hash ol_kv_key_hash(uint64_t ns_seed, const void *key, size_t len);

/* ol_kv_value_hash - XXH3_64bits(p, n), seed 0: the per-value checksum. */
uint64_t ol_kv_value_hash(const void *p, size_t n);
/*
 * ol_kv_copy_hash - copies n bytes from src to dst and returns the same value
 * as ol_kv_value_hash(src, n), in one pass over memory: each 64 KiB chunk is
 * hashed right after it is copied, while it is still in cache.
 */
uint64_t ol_kv_copy_hash(void *dst, const void *src, uint64_t n);

/* ---- header -------------------------------------------------------------- */

struct ol_kv_hdr {
    uint16_t version;
    uint16_t opcode;
    uint64_t req_id;
    uint32_t body_len;     /* including the CRC trailer when flagged */
    uint32_t count;
    uint16_t status;
    uint16_t flags;
};

static inline bool ol_kv_hdr_is_response(const struct ol_kv_hdr *h)
{
    return (h->flags & OL_KV_F_RESPONSE) != 0;
}

/* Total frame length: header plus body. */
static inline uint64_t ol_kv_frame_len(const struct ol_kv_hdr *h)
{
    return OL_KV_HDR_LEN + (uint64_t)h->body_len;
}

/*
 * ol_kv_frame_parse_header - parse and check the 32-byte header at buf.
 *
 * buf/len: bytes received so far; only buf[0..min(len, 32)) is read.
 * out:     OUT, filled on a return of 32 only.
 *
 * Checks, in this order, each as soon as its bytes are there: magic (-1,
 * after as little as 1 byte), version (-3 once bytes 4..5 are in and not 1
 * or 2; the magic and version bytes are frozen for all versions), then with
 * 32 bytes: header
 * CRC (-1), flags known (-1), status (requests: 0; responses: a known
 * status) (-1), opcode known, and not ERROR in a request nor in an OK
 * response, and in a frame of the version that has it: MEMBERS in version
 * 2 only, every other opcode in version 1 only (-1), body_len a multiple of 8 (-1), body_len and count within the
 * limits for this opcode and direction (-4), and body_len consistent with
 * count for the opcode's layout (-1), so an impossible body is refused
 * before it is read.
 *
 * Returns 32, OL_KV_INCOMPLETE, OL_KV_INVALID, OL_KV_BAD_VERSION or
 * OL_KV_TOO_LARGE. The header does not say who sent it: a server must also
 * refuse frames with OL_KV_F_RESPONSE set, a client frames without it.
 */
int ol_kv_frame_parse_header(const void *buf, size_t len, struct ol_kv_hdr *out);

/* ---- decoding bodies ------------------------------------------------------ */

/*
 * Decoder cursor over one validated body. Public so it lives on the caller's
 * stack; treat the fields as private.
 */
struct ol_kv_dec {
    const uint8_t *p;      /* body start */
    uint32_t len;          /* body bytes without the CRC trailer */
    uint32_t off;          /* next item */
    uint32_t count;        /* items in the body */
    uint32_t index;        /* items returned so far */
    uint16_t opcode;
    uint8_t shape;         /* the body layout (private enum in proto.c) */
};

/* A slice of the caller's buffer; not NUL-terminated. */
struct ol_kv_bytes {
    const uint8_t *p;
    uint32_t len;
};

/* HELLO request (count 0). */
struct ol_kv_hello_req {
    uint16_t min_version, max_version; /* 1 <= min <= max */
    uint32_t flags;                    /* OL_KV_HELLO_WANTS_SHM | OL_KV_HELLO_SHARD */
    uint32_t shard;                    /* with OL_KV_HELLO_SHARD; else 0 */
    uint64_t value_size;               /* value size class in bytes; 0 = default */
    struct ol_kv_bytes token;          /* 0..256 bytes */
    struct ol_kv_bytes ns;             /* namespace, 1..256 bytes */
};

/* HELLO response (count 0, status OK). Without OL_KV_HELLO_SHM the slab
 * fields (slab_size, slot_size, value_offset, slot_count) are 0. */
struct ol_kv_hello_resp {
    uint64_t session_id;
    uint16_t version;        /* negotiated, within the client's range */
    uint16_t flags;          /* OL_KV_HELLO_SHM */
    uint32_t shards;
    uint64_t slab_size;      /* bytes to mmap from the passed fd */
    uint64_t slot_size;
    uint64_t value_offset;   /* offset of the value inside a slot */
    uint32_t slot_count;
    /* The server's limits; each <= the protocol limit of the same name. */
    uint32_t max_items, max_body, max_data_body, max_value;
    uint16_t max_key;
};

/* A slot reference: ABORT and RELEASE request items. */
struct ol_kv_slot_ref {
    uint32_t slot;
    uint64_t gen;
};

/* RESERVE response item. status != OK: the other fields are 0. */
struct ol_kv_reserve_res {
    uint16_t status;
    uint32_t slot;
    uint64_t gen;
    uint64_t offset;         /* byte offset of the value in the slab */
};

/* COMMIT request item. */
struct ol_kv_commit_item {
    uint32_t slot;
    uint64_t gen;
    uint64_t value_len;      /* <= OL_KV_MAX_VALUE */
    uint64_t checksum;       /* xxh3-64 of the value as written */
};

/* ACQUIRE response item. status != OK: the other fields are 0. */
struct ol_kv_acquire_res {
    uint16_t status;
    uint32_t slot;
    uint64_t gen;
    uint64_t offset;
    uint64_t value_len;
    uint64_t checksum;
};

/* LOOKUP response (count = number of keys asked). */
struct ol_kv_lookup_res {
    uint32_t count;
    uint32_t leading;        /* keys 0..leading-1 hit, key `leading` missed */
    const uint8_t *bitmap;   /* bit i (byte i/8, bit i%8, LSB first) = key i */
};

/* MEMBERS response (v2; docs/kv-protocol.md "MEMBERS"): the placement a
 * client computes homes with. replicas 0: the node is in no cluster (then
 * revision and count are 0). */
struct ol_kv_members_head {
    int64_t revision;        /* etcd revision of the view the members are from */
    uint16_t replicas;       /* cluster.kv_replicas, 0..16 */
};
struct ol_kv_member_item {
    int64_t id;
    uint64_t weight;         /* KV capacity in bytes, > 0 */
    struct ol_kv_bytes addr; /* kv_addr as a client dials it, 0..263 bytes (0: none) */
};

static inline bool ol_kv_lookup_hit(const struct ol_kv_lookup_res *r, uint32_t i)
{
    return (r->bitmap[i >> 3] >> (i & 7)) & 1;
}

/* PUT request item / GET response item; value points into the body. For a
 * GET item whose status != OK, value_len and checksum are 0. */
struct ol_kv_put_item {
    struct ol_kv_bytes key;
    const uint8_t *value;
    uint64_t value_len;
    uint64_t checksum;
};
struct ol_kv_get_res {
    uint16_t status;
    const uint8_t *value;
    uint64_t value_len;
    uint64_t checksum;
};

/* STATS response: counters in this order (index = enum value). The server
 * reports the counters of the connection's shard, all namespaces together
 * (a client sums its shard connections); counters it does not keep yet
 * (slots, disk tier) are 0. */
enum ol_kv_stat {
    OL_KV_STAT_ENTRIES,        /* ns: published entries in RAM */
    OL_KV_STAT_BYTES_USED,     /* ns: value bytes of those entries */
    OL_KV_STAT_BYTES_CAPACITY, /* server: slab bytes for values */
    OL_KV_STAT_SLOTS_TOTAL,    /* server */
    OL_KV_STAT_SLOTS_FREE,     /* server */
    OL_KV_STAT_HITS,           /* ns: LOOKUP/ACQUIRE/GET keys found */
    OL_KV_STAT_MISSES,         /* ns: ... not found */
    OL_KV_STAT_EVICTIONS,      /* ns */
    OL_KV_STAT_RESERVATIONS,   /* ns: slots handed out by RESERVE */
    OL_KV_STAT_COMMITS,        /* ns */
    OL_KV_STAT_ABORTS,         /* ns: aborted or abandoned reservations */
    OL_KV_STAT_PINS,           /* ns: slots pinned right now */
    OL_KV_STAT_ACQUIRES,       /* ns: successful ACQUIRE items, total */
    OL_KV_STAT_DELETES,        /* ns */
    OL_KV_STAT_DISK_ENTRIES,   /* ns: entries on the disk tier */
    OL_KV_STAT_DISK_BYTES,     /* ns */
    OL_KV_STAT_SESSIONS,       /* server: open sessions */
    OL_KV_STAT_PROTOCOL_ERRORS,/* server: ERROR frames sent */
    OL_KV_STAT__COUNT
};
struct ol_kv_stats {
    uint64_t c[OL_KV_STAT__COUNT];
};
/* ol_kv_stat_name - "entries", "bytes_used", ... or "unknown". Static. */
const char *ol_kv_stat_name(int i);

/*
 * ol_kv_body_open - validate a complete body and set up a cursor over it.
 *
 * h:       a header that ol_kv_frame_parse_header accepted.
 * buf/len: the bytes that follow that header (buf may hold more: the next
 *          pipelined frame); only buf[0..h->body_len) is read.
 * d:       OUT, the cursor; valid on success only.
 *
 * Checks every item against the body end, every length against its limit,
 * padding and reserved fields zero, statuses known, per-layout rules (e.g.
 * a LOOKUP leading run that matches its bitmap, non-OK items with zero
 * fields, HELLO version range) and, with OL_KV_F_BODY_CRC, the trailer.
 * Returns h->body_len (>= 0), OL_KV_INCOMPLETE when len < h->body_len,
 * OL_KV_INVALID or OL_KV_TOO_LARGE (a value over OL_KV_MAX_VALUE). On
 * success every slice handed out later points into buf[0..body_len).
 */
long ol_kv_body_open(struct ol_kv_dec *d, const struct ol_kv_hdr *h,
                     const void *buf, size_t len);

/*
 * ol_kv_frame_parse - ol_kv_frame_parse_header then ol_kv_body_open on the
 * bytes after it: the whole frame at buf. Returns the frame length (32 +
 * body_len) or one of the negative parser returns (-2 until the whole frame
 * is there). h and d are OUT, valid on success only.
 */
long ol_kv_frame_parse(const void *buf, size_t len, struct ol_kv_hdr *h,
                       struct ol_kv_dec *d);

/*
 * Item iterators, one per layout. Each returns 1 and fills *out with the
 * next item, 0 after the last one, or -1 when the body has another layout
 * (a caller bug: e.g. ol_kv_dec_key on a COMMIT body). Bodies are validated
 * by ol_kv_body_open, so nothing else can fail.
 *
 *   ol_kv_dec_key          RESERVE, LOOKUP, ACQUIRE, DELETE, GET requests
 *   ol_kv_dec_slot_ref     ABORT, RELEASE requests
 *   ol_kv_dec_commit       COMMIT requests
 *   ol_kv_dec_put          PUT requests
 *   ol_kv_dec_reserve_res  RESERVE responses
 *   ol_kv_dec_acquire_res  ACQUIRE responses
 *   ol_kv_dec_status       COMMIT, ABORT, RELEASE, DELETE, PUT responses
 *   ol_kv_dec_get_res      GET responses
 *   ol_kv_dec_member       MEMBERS responses (after the head)
 */
int ol_kv_dec_key(struct ol_kv_dec *d, struct ol_kv_bytes *out);
int ol_kv_dec_slot_ref(struct ol_kv_dec *d, struct ol_kv_slot_ref *out);
int ol_kv_dec_commit(struct ol_kv_dec *d, struct ol_kv_commit_item *out);
int ol_kv_dec_put(struct ol_kv_dec *d, struct ol_kv_put_item *out);
int ol_kv_dec_reserve_res(struct ol_kv_dec *d, struct ol_kv_reserve_res *out);
int ol_kv_dec_acquire_res(struct ol_kv_dec *d, struct ol_kv_acquire_res *out);
int ol_kv_dec_status(struct ol_kv_dec *d, uint16_t *out);
int ol_kv_dec_get_res(struct ol_kv_dec *d, struct ol_kv_get_res *out);
int ol_kv_dec_member(struct ol_kv_dec *d, struct ol_kv_member_item *out);

/*
 * Single-struct bodies. Each returns 0 and fills *out, or -1 when the body
 * has another layout.
 *
 *   ol_kv_dec_hello_req    HELLO request
 *   ol_kv_dec_hello_resp   HELLO response with status OK
 *   ol_kv_dec_lookup_res   LOOKUP response with status OK
 *   ol_kv_dec_reset_res    RESET response with status OK: entries removed
 *   ol_kv_dec_stats        STATS response with status OK
 *   ol_kv_dec_message      ERROR frames and every response whose header
 *                          status is not OK: the message text (0..1024 bytes)
 */
int ol_kv_dec_hello_req(const struct ol_kv_dec *d, struct ol_kv_hello_req *out);
int ol_kv_dec_hello_resp(const struct ol_kv_dec *d, struct ol_kv_hello_resp *out);
int ol_kv_dec_lookup_res(const struct ol_kv_dec *d, struct ol_kv_lookup_res *out);
/* MEMBERS response with status OK: its head (the items: ol_kv_dec_member) */
int ol_kv_dec_members_head(const struct ol_kv_dec *d, struct ol_kv_members_head *out);
int ol_kv_dec_reset_res(const struct ol_kv_dec *d, uint64_t *removed);
int ol_kv_dec_stats(const struct ol_kv_dec *d, struct ol_kv_stats *out);
int ol_kv_dec_message(const struct ol_kv_dec *d, struct ol_kv_bytes *out);

/*
 * Streaming data frames. A PUT request or GET response may be up to 1 GiB;
 * a reader that does not want to buffer it whole parses one item head at a
 * time and moves the value bytes itself (e.g. straight into a slab slot).
 *
 * ol_kv_parse_put_head / ol_kv_parse_get_head - parse the head of the next
 * PUT request item / GET response item at buf.
 *
 * buf/len:   bytes received of this item so far (only buf[0..len) is read).
 * body_left: payload bytes of the body from this item to the body end
 *            (without the CRC trailer): the item must fit in it.
 * out:       OUT, on success: value_len and checksum set, value NULL.
 *
 * Returns the head length H (> 0), -2, -1 or -4 (value_len over
 * OL_KV_MAX_VALUE). The value's value_len bytes follow at buf + H, then
 * ol_kv_align8(value_len) - value_len padding bytes that the caller must
 * check are zero. With OL_KV_F_BODY_CRC the caller computes the CRC over the
 * bytes itself (ol_kv_crc32c chains). Callers that hold the whole body use
 * ol_kv_body_open, which does all of this.
 */
int ol_kv_parse_put_head(const void *buf, size_t len, uint64_t body_left,
                         struct ol_kv_put_item *out);
int ol_kv_parse_get_head(const void *buf, size_t len, uint64_t body_left,
                         struct ol_kv_get_res *out);

/* ---- encoding ------------------------------------------------------------- */

/*
 * Encoder state for one frame being built in a caller buffer. Public so it
 * lives on the caller's stack; treat the fields as private.
 */
struct ol_kv_enc {
    uint8_t *buf;
    size_t cap;
    uint32_t len;          /* body bytes written (no trailer, no end padding) */
    uint32_t count;
    uint32_t lead;         /* LOOKUP response: leading run so far */
    uint16_t opcode, flags, status;
    uint8_t shape;
    uint8_t done;          /* single-struct body written */
};

/*
 * ol_kv_frame_begin - start a frame in buf[0..cap).
 *
 * flags:  OL_KV_F_RESPONSE for server frames, OL_KV_F_BODY_CRC to add the
 *         body CRC trailer.
 * status: 0 for requests; for responses the frame status. A response with
 *         status != OK (and every ERROR frame) carries only a message
 *         (ol_kv_enc_message; empty when none is added).
 *
 * Writes a provisional header. Returns 0, -EINVAL (unknown opcode, flags or
 * status, a request with a status, an ERROR request, an OK ERROR) or
 * -ENOSPC (cap below the smallest complete frame of this kind).
 * The buffer must stay in place until ol_kv_frame_end.
 */
int ol_kv_frame_begin(struct ol_kv_enc *e, void *buf, size_t cap,
                      unsigned opcode, uint64_t req_id, unsigned flags,
                      unsigned status);

/*
 * ol_kv_frame_end - finish the frame: final padding, body_len, count, body
 * CRC trailer and header CRC. Returns the frame length (32 + body_len), or
 * -EINVAL when a single-struct body (HELLO, RESET/STATS response) was never
 * added. Appends reserve room for the padding and trailer, so end never
 * runs out of space. The encoder may be begun again afterwards.
 */
long ol_kv_frame_end(struct ol_kv_enc *e);

/*
 * Item appenders. Each returns 0, -EINVAL (the frame has another layout, or
 * a field out of range: empty or over-long key, unknown status), -E2BIG (one
 * more item than OL_KV_MAX_ITEMS, a body over its limit, a value over
 * OL_KV_MAX_VALUE) or -ENOSPC; the frame is unchanged on failure. Response
 * items whose status is not OK are written with all other fields 0.
 */
int ol_kv_enc_key(struct ol_kv_enc *e, const void *key, size_t key_len);
int ol_kv_enc_slot_ref(struct ol_kv_enc *e, uint32_t slot, uint64_t gen);
int ol_kv_enc_commit(struct ol_kv_enc *e, const struct ol_kv_commit_item *it);
int ol_kv_enc_reserve_res(struct ol_kv_enc *e, const struct ol_kv_reserve_res *it);
int ol_kv_enc_acquire_res(struct ol_kv_enc *e, const struct ol_kv_acquire_res *it);
int ol_kv_enc_status(struct ol_kv_enc *e, unsigned status);
/* LOOKUP response: one bit per key, in request order. */
int ol_kv_enc_lookup_hit(struct ol_kv_enc *e, bool hit);
/* MEMBERS response: the head first (0s until set: then the node is in no
 * cluster; replicas <= 16, and 0 only with revision 0), then one item per
 * member (weight > 0, addr 0..263 bytes, at most 4096 items: -E2BIG past
 * them; -EINVAL for an item after a head of replicas 0). */
int ol_kv_enc_members_head(struct ol_kv_enc *e, const struct ol_kv_members_head *h);
int ol_kv_enc_member(struct ol_kv_enc *e, int64_t id, uint64_t weight, const void *addr,
                     size_t addr_len);
/*
 * PUT request item / GET response item. value may be NULL: the value bytes
 * are then left for the caller to fill (e.g. a device-to-host copy straight
 * into the frame) before ol_kv_frame_end. value_at (OUT, may be NULL) gets
 * where the value bytes are in buf. A GET item with status != OK takes no
 * value (value_len and checksum are written as 0).
 */
int ol_kv_enc_put(struct ol_kv_enc *e, const void *key, size_t key_len,
                  const void *value, uint64_t value_len, uint64_t checksum,
                  void **value_at);
int ol_kv_enc_get_res(struct ol_kv_enc *e, unsigned status, const void *value,
                      uint64_t value_len, uint64_t checksum, void **value_at);

/*
 * Single-struct bodies: same returns as the appenders, plus -EINVAL when the
 * body was already added. Fields are checked as the decoder checks them
 * (HELLO: versions, lengths, flags, limits; the slab fields must be 0
 * without OL_KV_HELLO_SHM).
 */
int ol_kv_enc_hello_req(struct ol_kv_enc *e, const struct ol_kv_hello_req *r);
int ol_kv_enc_hello_resp(struct ol_kv_enc *e, const struct ol_kv_hello_resp *r);
int ol_kv_enc_reset_res(struct ol_kv_enc *e, uint64_t removed);
int ol_kv_enc_stats(struct ol_kv_enc *e, const struct ol_kv_stats *s);
int ol_kv_enc_message(struct ol_kv_enc *e, const char *msg, size_t len);

#endif
