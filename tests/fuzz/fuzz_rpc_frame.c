/*
 * fuzz_rpc_frame.c - libFuzzer target for the node RPC's frame codec
 * (src/net/frame.c).
 *
 * The first input byte picks a mode; the rest is a stream of bytes:
 *   mode even: parsed as received (header after header, each followed by
 *              the payload its length claims);
 *   mode odd:  the same, after fixing each header's CRC, so that mutations
 *              reach the field checks instead of dying at the CRC.
 *
 * Aborts when the frame.h contract breaks: a return outside
 * {48, INCOMPLETE, INVALID, BAD_VERSION}; INCOMPLETE with 48 bytes in; a
 * valid header whose prefixes are not all INCOMPLETE; a valid header that
 * does not re-encode to the very same 48 bytes (parse -> encode -> parse);
 * a type, status or reserved field outside the documented set in a header
 * that parsed. Reads outside the buffer are left to ASan: each header is
 * parsed from an allocation of exactly the bytes left.
 *
 * Each READY's payload (the bytes its header claims, as many as are left)
 * goes through ol_rpc_ready_parse, from an allocation of exactly those
 * bytes: it must accept only the documented layout (frame.h: a key of 1 ..
 * OL_RPC_RKEY_MAX bytes filling the rest, a region that does not wrap),
 * point its key inside the payload, and re-encode to the same bytes.
 */
#include "base/crc32c.h"
#include "base/le.h"
#include "net/frame.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(c) do { if (!(c)) abort(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int fix = data[0] & 1;
    uint8_t *buf = malloc(size - 1 ? size - 1 : 1);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, size - 1);
    size_t off = 0, len = size - 1;
    while (off < len) {
        size_t left = len - off;
        if (fix && left >= OL_RPC_HDR_LEN)
            ol_le_st32(buf + off + 44, ol_crc32c(0, buf + off, 44));
        uint8_t *p = malloc(left);
        if (!p)
            break;
        memcpy(p, buf + off, left);
        struct ol_rpc_hdr h;
        int rc = ol_rpc_hdr_parse(p, left, &h);
        REQUIRE(rc == OL_RPC_HDR_LEN || rc == OL_RPC_INCOMPLETE || rc == OL_RPC_INVALID ||
                rc == OL_RPC_BAD_VERSION);
        REQUIRE(rc != OL_RPC_INCOMPLETE || left < OL_RPC_HDR_LEN);
        if (rc != OL_RPC_HDR_LEN) {
            free(p);
            break;
        }
        REQUIRE(h.type >= OL_RPC_HELLO && h.type <= OL_RPC_CLOSE);
        REQUIRE(h.status <= OL_RPC_STATUS_MAX);
        REQUIRE(h.status == 0 || h.type == OL_RPC_REPLY || h.type == OL_RPC_CLOSE);
        REQUIRE(h.len != 0 || h.payload_crc == 0);
        for (size_t n = 0; n < OL_RPC_HDR_LEN; n++) {
            struct ol_rpc_hdr g;
            REQUIRE(ol_rpc_hdr_parse(p, n, &g) == OL_RPC_INCOMPLETE);
        }
        uint8_t again[OL_RPC_HDR_LEN];
        ol_rpc_hdr_encode(&h, again);
        REQUIRE(memcmp(again, p, OL_RPC_HDR_LEN) == 0);
        free(p);
        off += OL_RPC_HDR_LEN;
        if (h.type == OL_RPC_READY) {
            size_t plen = h.len < len - off ? h.len : len - off;
            uint8_t *q = malloc(plen ? plen : 1);
            if (q) {
                memcpy(q, buf + off, plen);
                struct ol_rpc_region rg;
                if (ol_rpc_ready_parse(q, plen, &rg) == 0 && plen) {
                    REQUIRE(rg.rkey_len >= 1 && rg.rkey_len <= OL_RPC_RKEY_MAX);
                    REQUIRE(plen == OL_RPC_READY_HDR + rg.rkey_len);
                    REQUIRE(rg.rkey == q + OL_RPC_READY_HDR);
                    REQUIRE(rg.len > 0 && rg.base + rg.len > rg.base);
                    uint8_t *e = malloc(plen);
                    if (e) {
                        REQUIRE(ol_rpc_ready_encode(&rg, e) == plen);
                        REQUIRE(memcmp(e, q, plen) == 0);
                        free(e);
                    }
                } else if (plen == 0) {
                    REQUIRE(rg.rkey_len == 0);
                }
                free(q);
            }
        }
        if (h.len > len - off)
            break;
        off += h.len;
    }
    free(buf);
    return 0;
}
