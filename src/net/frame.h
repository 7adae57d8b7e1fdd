/*
 * frame.h - the node RPC's frames: header codec, handshake payloads, proofs.
 *
 * Owns: the byte layout of the node-to-node protocol (docs/node-protocol.md
 * is its byte-level description; this header is the contract): the 48-byte
 * frame header, the handshake payloads' sizes and layout (below; rpc.c
 * reads and writes them), and the HMAC-SHA256 proofs of the mutual
 * authentication. Pure: no I/O, no allocation, never reads outside
 * [buf, buf + len).
 *
 * Frame header (version 1), little-endian:
 *
 *   off size field
 *     0    4 magic "OLRP"
 *     4    1 version (1)
 *     5    1 type (enum ol_rpc_type)
 *     6    2 op: REQUEST: the operation; REPLY: the request's op; else 0
 *     8    8 id: REQUEST/REPLY: the request id (the dialer's); else 0
 *    16    4 len: payload bytes after the header
 *    20    4 aux: REQUEST: reply_max, the most reply payload bytes the
 *                 dialer accepts; READY, REPLY: bytes of credit granted
 *                 to the dialer; else 0
 *    24    8 revision: the sender's membership revision (etcd's), 0 unknown
 *    32    2 status: REPLY and CLOSE: enum ol_rpc_status; else 0
 *    34    2 flags: 0 (reserved)
 *    36    4 payload CRC-32C (0 when len is 0)
 *    40    4 reserved, 0
 *    44    4 header CRC-32C of bytes 0..43
 *
 * Handshake (dialer D, acceptor A; nonces from getrandom, 32 bytes each):
 *   D→A HELLO     payload 112: u64 D's node id, u8[32] nonce_d,
 *                              u8[64] cluster name, NUL-padded,
 *                              u32 D's reply window, u32 flags (bit 0,
 *                              OL_RPC_HELLO_RMA: D reads remotely; other
 *                              bits 0)
 *   A→D CHALLENGE payload  80: u64 A's node id, u8[32] nonce_a,
 *                              u8[32] proof_a, u32 max payload, u32 0
 *   D→A AUTH      payload  32: u8[32] proof_d
 *   A→D READY     aux = the first credit; payload 0 bytes, or (only to a
 *                 HELLO with OL_RPC_HELLO_RMA, from an A with a region
 *                 mapped for remote reads) 24 + k: u64 the region's base
 *                 address (as A's process sees it), u64 its length (> 0,
 *                 base + length does not wrap), u32 k (1 ..
 *                 OL_RPC_RKEY_MAX), u32 0, u8[k] the transport's packed
 *                 remote key (ol_rpc_ready_parse)
 *   proof_x = HMAC-SHA256(cluster secret, label_x || cluster name (64,
 *             NUL-padded) || u64 D id || u64 A id || nonce_d || nonce_a)
 *   with label_a = "OLRP1 acceptor" and label_d = "OLRP1 dialer" (14 and 12
 *   bytes, no NUL). Each side checks the other's proof in constant time;
 *   the dialer also checks that A's id is the node it dialled.
 */
#ifndef OL_NET_FRAME_H
#define OL_NET_FRAME_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define OL_RPC_VERSION     1
#define OL_RPC_HDR_LEN     48
#define OL_RPC_NONCE_LEN   32
#define OL_RPC_PROOF_LEN   32
#define OL_RPC_NAME_LEN    64
#define OL_RPC_HELLO_LEN   (8 + OL_RPC_NONCE_LEN + OL_RPC_NAME_LEN + 8)      /* 112 */
#define OL_RPC_CHAL_LEN    (8 + OL_RPC_NONCE_LEN + OL_RPC_PROOF_LEN + 8)     /* 80 */
#define OL_RPC_AUTH_LEN    OL_RPC_PROOF_LEN                                  /* 32 */
#define OL_RPC_CLOSE_MAX   256       /* a CLOSE's message, bytes */
/* The largest payload any version-1 peer may announce or send. */
#define OL_RPC_PAYLOAD_LIMIT (64u << 20)
#define OL_RPC_HELLO_RMA   1u        /* HELLO flags: the dialer reads remotely */
#define OL_RPC_READY_HDR   24        /* a READY payload's fixed part */
#define OL_RPC_RKEY_MAX    4096u     /* a packed remote key's bytes, at most */

enum ol_rpc_type {
    OL_RPC_HELLO = 1,
    OL_RPC_CHALLENGE = 2,
    OL_RPC_AUTH = 3,
    OL_RPC_READY = 4,
    OL_RPC_REQUEST = 5,
    OL_RPC_REPLY = 6,
    OL_RPC_CLOSE = 7,
};

/* REPLY and CLOSE statuses (wire values). */
enum ol_rpc_status {
    OL_RPC_OK = 0,
    OL_RPC_UNKNOWN_OP = 1,    /* no handler for op */
    OL_RPC_BUSY = 2,          /* the handler's resources are full; retry */
    OL_RPC_TOO_LARGE = 3,     /* the answer exceeds reply_max, or a frame its limit */
    OL_RPC_BAD_REQUEST = 4,   /* the payload makes no sense for op */
    OL_RPC_SHUTTING_DOWN = 5, /* the node is leaving; retry elsewhere */
    OL_RPC_AUTH_FAILED = 6,   /* CLOSE: the proof did not check */
    OL_RPC_PROTOCOL = 7,      /* CLOSE: a frame broke the protocol */
    OL_RPC_WRONG_CLUSTER = 8, /* CLOSE: HELLO named another cluster */
    OL_RPC_INTERNAL = 9,
    OL_RPC_STATUS_MAX = 9,
};

struct ol_rpc_hdr {
    uint8_t type;
    uint16_t op;
    uint64_t id;
    uint32_t len;
    uint32_t aux;
    int64_t revision;
    uint16_t status;
    uint32_t payload_crc;
};

/* Parse results (besides OL_RPC_HDR_LEN). */
#define OL_RPC_INCOMPLETE  (-2)  /* fewer than 48 bytes, consistent so far */
#define OL_RPC_INVALID     (-1)  /* bad magic, header CRC, type, flags, reserved or status */
#define OL_RPC_BAD_VERSION (-3)  /* magic fine, version != 1 */

/*
 * Parses a header from buf[0, len). Returns OL_RPC_HDR_LEN and *h, or one
 * of the codes above. A bad magic or version is reported as soon as the
 * bytes that show it are in (so garbage is refused without waiting for 48
 * bytes). Does not check len against any limit, nor the payload CRC.
 */
int ol_rpc_hdr_parse(const void *buf, size_t len, struct ol_rpc_hdr *h);

/* Writes h as 48 bytes at out, with its header CRC (h->payload_crc as given). */
void ol_rpc_hdr_encode(const struct ol_rpc_hdr *h, void *out);

/* CRC-32C of the payload iov[0..n) (0 for no bytes): h->payload_crc. */
uint32_t ol_rpc_payload_crc(const struct iovec *iov, int n);

/* The proof of side `acceptor` (1) or the dialer (0) into out[32]. */
void ol_rpc_proof(const void *secret, size_t secret_len, int acceptor, const char *cluster,
                  int64_t dialer_id, int64_t acceptor_id,
                  const uint8_t nonce_d[OL_RPC_NONCE_LEN],
                  const uint8_t nonce_a[OL_RPC_NONCE_LEN], uint8_t out[OL_RPC_PROOF_LEN]);

/* Constant-time equality of two proofs: 1 equal, 0 not. */
int ol_rpc_proof_equal(const uint8_t a[OL_RPC_PROOF_LEN], const uint8_t b[OL_RPC_PROOF_LEN]);

/* A READY payload's region (rkey points into the parsed bytes). */
struct ol_rpc_region {
    uint64_t base, len;
    uint32_t rkey_len;            /* 0: no region */
    const uint8_t *rkey;
};

/* Parses a READY payload buf[0, len): 0 and *out (rkey_len 0 for an
 * empty payload), or -1 (not the layout above: short, a key length of 0
 * or over OL_RPC_RKEY_MAX or other than the bytes left, a reserved field
 * not 0, a length of 0, a region that wraps). */
int ol_rpc_ready_parse(const void *buf, size_t len, struct ol_rpc_region *out);
/* Writes r as a READY payload at out (room for OL_RPC_READY_HDR +
 * r->rkey_len). Returns its length. */
size_t ol_rpc_ready_encode(const struct ol_rpc_region *r, void *out);

/* A status's name ("ok", "busy", ...; "unknown" out of range). */
const char *ol_rpc_status_name(int status);

#endif
