/*
 * frame.c - the node RPC's frame codec and proofs (see frame.h).
 */
#include "net/frame.h"

#include "base/crc32c.h"
#include "base/le.h"

#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

static const uint8_t ol_rpc_magic[4] = {'O', 'L', 'R', 'P'};

int ol_rpc_hdr_parse(const void *buf, size_t len, struct ol_rpc_hdr *h)
{
    const uint8_t *b = buf;
    size_t m = len < 4 ? len : 4;
    if (memcmp(b, ol_rpc_magic, m) != 0)
        return OL_RPC_INVALID;
    if (len > 4 && b[4] != OL_RPC_VERSION)
        return OL_RPC_BAD_VERSION;
    if (len < OL_RPC_HDR_LEN)
        return OL_RPC_INCOMPLETE;
    if (ol_crc32c(0, b, 44) != ol_le_ld32(b + 44))
        return OL_RPC_INVALID;
    uint8_t type = b[5];
    uint16_t flags = ol_le_ld16(b + 34), status = ol_le_ld16(b + 32);
    if (type < OL_RPC_HELLO || type > OL_RPC_CLOSE || flags != 0 || ol_le_ld32(b + 40) != 0 ||
        status > OL_RPC_STATUS_MAX ||
        (status != 0 && type != OL_RPC_REPLY && type != OL_RPC_CLOSE))
        return OL_RPC_INVALID;
    *h = (struct ol_rpc_hdr){
        .type = type,
        .op = ol_le_ld16(b + 6),
        .id = ol_le_ld64(b + 8),
        .len = ol_le_ld32(b + 16),
        .aux = ol_le_ld32(b + 20),
        .revision = (int64_t)ol_le_ld64(b + 24),
        .status = status,
        .payload_crc = ol_le_ld32(b + 36),
    };
    if (h->len == 0 && h->payload_crc != 0)
        return OL_RPC_INVALID;
    return OL_RPC_HDR_LEN;
}

void ol_rpc_hdr_encode(const struct ol_rpc_hdr *h, void *out)
{
    uint8_t *b = out;
    memcpy(b, ol_rpc_magic, 4);
    b[4] = OL_RPC_VERSION;
    b[5] = h->type;
    ol_le_st16(b + 6, h->op);
    ol_le_st64(b + 8, h->id);
    ol_le_st32(b + 16, h->len);
    ol_le_st32(b + 20, h->aux);
    ol_le_st64(b + 24, (uint64_t)h->revision);
    ol_le_st16(b + 32, h->status);
    ol_le_st16(b + 34, 0);
    ol_le_st32(b + 36, h->len ? h->payload_crc : 0);
    ol_le_st32(b + 40, 0);
    ol_le_st32(b + 44, ol_crc32c(0, b, 44));
}

uint32_t ol_rpc_payload_crc(const struct iovec *iov, int n)
{
    uint32_t crc = 0;
    for (int i = 0; i < n; i++)
        crc = ol_crc32c(crc, iov[i].iov_base, iov[i].iov_len);
    return crc;
}

void ol_rpc_proof(const void *secret, size_t secret_len, int acceptor, const char *cluster,
                  int64_t dialer_id, int64_t acceptor_id,
                  const uint8_t nonce_d[OL_RPC_NONCE_LEN],
                  const uint8_t nonce_a[OL_RPC_NONCE_LEN], uint8_t out[OL_RPC_PROOF_LEN])
{
    static const char la[] = "OLRP1 acceptor", ld[] = "OLRP1 dialer";
    uint8_t msg[sizeof la - 1 + OL_RPC_NAME_LEN + 16 + 2 * OL_RPC_NONCE_LEN];
    size_t n = 0;
    const char *label = acceptor ? la : ld;
    size_t ll = acceptor ? sizeof la - 1 : sizeof ld - 1;
    memcpy(msg, label, ll);
    n = ll;
    memset(msg + n, 0, OL_RPC_NAME_LEN);
    size_t cl = strnlen(cluster, OL_RPC_NAME_LEN);
    memcpy(msg + n, cluster, cl);
    n += OL_RPC_NAME_LEN;
    ol_le_st64(msg + n, (uint64_t)dialer_id);
    ol_le_st64(msg + n + 8, (uint64_t)acceptor_id);
    n += 16;
    memcpy(msg + n, nonce_d, OL_RPC_NONCE_LEN);
    memcpy(msg + n + OL_RPC_NONCE_LEN, nonce_a, OL_RPC_NONCE_LEN);
    n += 2 * OL_RPC_NONCE_LEN;
    unsigned int olen = OL_RPC_PROOF_LEN;
    HMAC(EVP_sha256(), secret, (int)secret_len, msg, n, out, &olen);
}

int ol_rpc_proof_equal(const uint8_t a[OL_RPC_PROOF_LEN], const uint8_t b[OL_RPC_PROOF_LEN])
{
    return CRYPTO_memcmp(a, b, OL_RPC_PROOF_LEN) == 0;
}

int ol_rpc_ready_parse(const void *buf, size_t len, struct ol_rpc_region *out)
{
    const uint8_t *b = buf;
    *out = (struct ol_rpc_region){0};
    if (len == 0)
        return 0;
    if (len < OL_RPC_READY_HDR)
        return -1;
    uint64_t base = ol_le_ld64(b), rlen = ol_le_ld64(b + 8);
    uint32_t k = ol_le_ld32(b + 16);
    if (ol_le_ld32(b + 20) != 0 || k == 0 || k > OL_RPC_RKEY_MAX ||
        len - OL_RPC_READY_HDR != k || rlen == 0 || base + rlen < base)
        return -1;
    *out = (struct ol_rpc_region){.base = base, .len = rlen, .rkey_len = k,
                                  .rkey = b + OL_RPC_READY_HDR};
    return 0;
}

size_t ol_rpc_ready_encode(const struct ol_rpc_region *r, void *out)
{
    uint8_t *b = out;
    ol_le_st64(b, r->base);
    ol_le_st64(b + 8, r->len);
    ol_le_st32(b + 16, r->rkey_len);
    ol_le_st32(b + 20, 0);
    memcpy(b + OL_RPC_READY_HDR, r->rkey, r->rkey_len);
    return OL_RPC_READY_HDR + r->rkey_len;
}

const char *ol_rpc_status_name(int status)
{
    static const char *const names[] = {
        "ok", "unknown op", "busy", "too large", "bad request", "shutting down",
        "authentication failed", "protocol error", "wrong cluster", "internal error",
    };
    return status >= 0 && status <= OL_RPC_STATUS_MAX ? names[status] : "unknown";
}
