/*
 * awschunked.c - aws-chunked body decoder (contract in awschunked.h).
 *
 * A byte-at-a-time state machine for the framing (header lines, the CRLF
 * after each chunk's data, trailer lines) and slices for the data itself,
 * so a chunk of any size costs one call per input slice. Signed modes hash
 * each chunk's data and compare the chunk's announced signature: with no
 * stage as the data passes (the check when its CRLF arrives); with one,
 * chunks are staged and hashed in pairs (the older one checked first, so
 * the chain of signatures keeps its order).
 */
#include "s3/awschunked.h"

#include "base/sha256.h"
#include "base/simd.h"

#include "s3/pct.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

enum { ST_HDR, ST_DATA, ST_CRLF, ST_TRAILER, ST_DONE, ST_FAIL };

static const char empty_sha[32] = {
    (char)0xe3, (char)0xb0, (char)0xc4, 0x42, (char)0x98, (char)0xfc, 0x1c, 0x14,
    (char)0x9a, (char)0xfb, (char)0xf4, (char)0xc8, (char)0x99, 0x6f, (char)0xb9, 0x24,
    0x27, (char)0xae, 0x41, (char)0xe4, 0x64, (char)0x9b, (char)0x93, 0x4c,
    (char)0xa4, (char)0x95, (char)0x99, 0x1b, 0x78, 0x52, (char)0xb8, 0x55,
};

int ol_awsc_mode_of(const char *v, size_t n)
{
#define IS(lit) (n == sizeof(lit) - 1 && memcmp(v, lit, n) == 0)
    if (IS("STREAMING-AWS4-HMAC-SHA256-PAYLOAD"))
        return OL_AWSC_SIGNED;
    if (IS("STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"))
        return OL_AWSC_SIGNED_TRAILER;
    if (IS("STREAMING-UNSIGNED-PAYLOAD-TRAILER"))
        return OL_AWSC_UNSIGNED_TRAILER;
#undef IS
    return 0;
}

void ol_awsc_init(struct ol_awsc *st, int mode, const uint8_t key[32], const char *amz_date,
                  const char *scope, size_t scope_len, const uint8_t seed[32],
                  uint64_t decoded_len, uint8_t *stage)
{
    memset(st, 0, sizeof *st);
    st->mode = mode;
    st->state = ST_HDR;
    st->expect = decoded_len;
    st->stage = stage;
    st->wait = -1;
    if (mode != OL_AWSC_UNSIGNED_TRAILER) {
        memcpy(st->key, key, 32);
        memcpy(st->prev, seed, 32);
        memcpy(st->amz_date, amz_date, 16);
        st->scope_len = scope_len < sizeof st->scope ? scope_len : sizeof st->scope;
        memcpy(st->scope, scope, st->scope_len);
    }
}

static long fail(struct ol_awsc *st, int err)
{
    st->state = ST_FAIL;
    st->err = err;
    return err;
}

static bool is_signed(const struct ol_awsc *st)
{
    return st->mode != OL_AWSC_UNSIGNED_TRAILER;
}

/* ---- chunk hashes -------------------------------------------------------- *
 *
 * With a stage, chunks go in pairs: a chunk that starts with none waiting
 * is copied into the stage ("staged"; if it outgrows it, its whole blocks
 * are hashed alone to make room) and, once ended, waits. The next chunk
 * is hashed straight from the input, each of its whole blocks beside one
 * of the waiting chunk's (a block cut by the input's slicing is gathered
 * in `tail` first), so only every other chunk is copied. The waiting one
 * is checked when its blocks run out, when the next chunk ends, or before
 * the final chunk: always before the one after it.
 */

/* Lane l's chunk has all its bytes hashed: its signature, next in the
 * chain. */
static int verify(struct ol_awsc *st, int l)
{
    uint8_t h[32], sig[32];
    ol_sha256_final(&st->lane[l].sha, h);
    ol_sigv4_chunk_sign(st->key, st->amz_date, st->scope, st->scope_len, st->prev, h, sig);
    if (!ol_sigv4_equal(sig, st->lane[l].want))
        return -EACCES;
    memcpy(st->prev, sig, 32);
    return 0;
}

/* The waiting chunk, if any: what it has left hashed alone, then checked. */
static int flush_wait(struct ol_awsc *st)
{
    if (st->wait < 0)
        return 0;
    struct ol_awsc_lane *w = &st->lane[st->wait];
    ol_simd_clean();   /* the SHA-NI code is legacy SSE: base/simd.h */
    ol_sha256_update(&w->sha, st->stage + w->off, w->used - w->off);
    int l = st->wait;
    st->wait = -1;
    return verify(st, l);
}

/* nb whole blocks at p of the current (not staged) chunk: beside the
 * waiting chunk's blocks while it has some, then alone. */
static int hash_blocks(struct ol_awsc *st, const uint8_t *p, size_t nb)
{
    struct ol_awsc_lane *c = &st->lane[st->cur];
    ol_simd_clean();
    if (st->wait >= 0) {
        struct ol_awsc_lane *w = &st->lane[st->wait];
        size_t j = (w->used - w->off) / 64;
        if (j > nb)
            j = nb;
        st->paired += ol_sha256_update2(&w->sha, st->stage + w->off, j * 64, &c->sha, p, j * 64);
        w->off += (uint32_t)(j * 64);
        p += j * 64;
        nb -= j;
        if (w->used - w->off < 64) {   /* its blocks ran out: done */
            int rc = flush_wait(st);
            if (rc < 0)
                return rc;
        }
    }
    ol_sha256_update(&c->sha, p, nb * 64);
    return 0;
}

/* Data bytes of the current chunk. */
static int chunk_data(struct ol_awsc *st, const uint8_t *p, size_t m)
{
    struct ol_awsc_lane *c = &st->lane[st->cur];
    if (st->outside)
        return 0;   /* the caller's, before the next feed */
    if (!st->stage) {
        ol_simd_clean();
        ol_sha256_update(&c->sha, p, m);
        return 0;
    }
    if (st->direct) {
        while (m) {
            if (st->tail_len || m < 64) {
                size_t take = 64 - st->tail_len < m ? 64 - st->tail_len : m;
                memcpy(st->tail + st->tail_len, p, take);
                st->tail_len += (unsigned)take;
                p += take;
                m -= take;
                if (st->tail_len == 64) {
                    st->tail_len = 0;
                    int rc = hash_blocks(st, st->tail, 1);
                    if (rc < 0)
                        return rc;
                }
                continue;
            }
            size_t nb = m / 64;
            int rc = hash_blocks(st, p, nb);
            if (rc < 0)
                return rc;
            p += nb * 64;
            m -= nb * 64;
        }
        return 0;
    }
    while (m) {   /* staged */
        if (c->used == OL_AWSC_STAGE) {   /* full: hash its whole blocks alone */
            uint32_t whole = c->used & ~63u;
            ol_simd_clean();
            ol_sha256_update(&c->sha, st->stage, whole);
            memmove(st->stage, st->stage + whole, c->used - whole);
            c->used -= whole;
        }
        size_t take = OL_AWSC_STAGE - c->used < m ? OL_AWSC_STAGE - c->used : m;
        memcpy(st->stage + c->used, p, take);
        c->used += (uint32_t)take;
        p += take;
        m -= take;
    }
    return 0;
}

/* The current chunk's CRLF: checked now, or (staged, with blocks to pair)
 * left to wait for the next chunk. */
static int chunk_end(struct ol_awsc *st)
{
    st->state = ST_HDR;
    if (!is_signed(st))
        return 0;
    struct ol_awsc_lane *c = &st->lane[st->cur];
    if (!st->stage || st->outside)
        return verify(st, st->cur);
    if (!st->direct) {
        if (c->used >= 64) {
            c->off = 0;
            st->wait = st->cur;
            return 0;
        }
        ol_simd_clean();
        ol_sha256_update(&c->sha, st->stage, c->used);
        return verify(st, st->cur);
    }
    int rc = flush_wait(st);   /* the older one first */
    if (rc < 0)
        return rc;
    ol_simd_clean();
    ol_sha256_update(&c->sha, st->tail, st->tail_len);
    st->tail_len = 0;
    return verify(st, st->cur);
}

/* "hex[;chunk-signature=SIG]" */
static int chunk_header(struct ol_awsc *st, const char *l, size_t n)
{
    size_t i = 0;
    uint64_t size = 0;
    while (i < n && ol_hexval(l[i]) >= 0) {
        if (i == 16)
            return -EBADMSG;
        size = size << 4 | (uint64_t)ol_hexval(l[i]);
        i++;
    }
    if (i == 0)
        return -EBADMSG;
    if (is_signed(st)) {
        static const char ext[] = ";chunk-signature=";
        size_t el = sizeof ext - 1;
        if (n - i != el + 64 || memcmp(l + i, ext, el) != 0 ||
            ol_sigv4_from_hex(l + i + el, 64, st->want) < 0)
            return -EBADMSG;
    } else if (i != n) {
        return -EBADMSG;
    }
    if (size == 0) {
        if (is_signed(st)) {
            int rc = flush_wait(st);
            if (rc < 0)
                return rc;
            uint8_t sig[32];
            ol_sigv4_chunk_sign(st->key, st->amz_date, st->scope, st->scope_len, st->prev,
                                (const uint8_t *)empty_sha, sig);
            if (!ol_sigv4_equal(sig, st->want))
                return -EACCES;
            memcpy(st->prev, sig, 32);
        }
        st->state = ST_TRAILER;
        return 0;
    }
    if (st->expect != UINT64_MAX && size > st->expect - st->total)
        return -EMSGSIZE;
    st->left = size;
    if (is_signed(st)) {
        st->cur = st->wait == 0 ? 1 : 0;
        struct ol_awsc_lane *c = &st->lane[st->cur];
        ol_sha256_init(&c->sha);
        memcpy(c->want, st->want, 32);
        c->used = c->off = 0;
        st->direct = st->wait >= 0;   /* paired with the waiting one */
        st->tail_len = 0;
    }
    st->state = ST_DATA;
    return 0;
}

static int trailer_line(struct ol_awsc *st, const char *l, size_t n)
{
    if (n == 0) {   /* the empty line: the body ends */
        if (st->mode == OL_AWSC_SIGNED_TRAILER && !st->trailer_signed)
            return -EBADMSG;
        if (st->expect != UINT64_MAX && st->total != st->expect)
            return -EMSGSIZE;
        st->state = ST_DONE;
        return 0;
    }
    if (st->mode == OL_AWSC_SIGNED || st->trailer_signed)
        return -EBADMSG;   /* no trailer here, or a line after its signature */
    const char *colon = memchr(l, ':', n);
    if (!colon || colon == l)
        return -EBADMSG;
    size_t nl = (size_t)(colon - l);
    const char *v = colon + 1;
    size_t vl = n - nl - 1;
    while (vl && (*v == ' ' || *v == '\t'))
        v++, vl--;
    while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
        vl--;
    for (size_t i = 0; i < nl; i++) {
        char c = l[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_'))
            return -EBADMSG;
    }
    if (st->mode == OL_AWSC_SIGNED_TRAILER && nl == 23 &&
        strncasecmp(l, "x-amz-trailer-signature", 23) == 0) {
        uint8_t want[32], sig[32];
        if (ol_sigv4_from_hex(v, vl, want) < 0)
            return -EBADMSG;
        ol_sigv4_trailer_sign(st->key, st->amz_date, st->scope, st->scope_len, st->prev,
                              st->trailer, st->trailer_len, sig);
        if (!ol_sigv4_equal(sig, want))
            return -EACCES;
        st->trailer_signed = true;
        return 0;
    }
    if (st->ntrailers == OL_AWSC_MAX_TRAILERS || nl + vl + 2 > OL_AWSC_MAX_TRAILER - st->trailer_len)
        return -E2BIG;
    char *o = st->trailer + st->trailer_len;
    for (size_t i = 0; i < nl; i++)
        o[i] = (char)((l[i] >= 'A' && l[i] <= 'Z') ? l[i] + 32 : l[i]);
    o[nl] = ':';
    memcpy(o + nl + 1, v, vl);
    o[nl + 1 + vl] = '\n';
    st->trailer_len += (unsigned)(nl + vl + 2);
    st->ntrailers++;
    return 0;
}

long ol_awsc_feed(struct ol_awsc *st, const char *in, size_t n, const char **data,
                  size_t *data_len)
{
    *data = in;
    *data_len = 0;
    if (st->state == ST_FAIL)
        return st->err;
    size_t i = 0;
    while (i < n) {
        switch (st->state) {
        case ST_DATA: {
            size_t m = n - i;
            if (m > st->left)
                m = (size_t)st->left;
            if (is_signed(st)) {
                int rc = chunk_data(st, (const uint8_t *)in + i, m);
                if (rc < 0)
                    return fail(st, rc);
            }
            *data = in + i;
            *data_len = m;
            st->left -= m;
            st->total += m;
            if (st->left == 0) {
                st->state = ST_CRLF;
                st->line_len = 0;
            }
            return (long)(i + m);
        }
        case ST_CRLF: {
            char want = st->line_len == 0 ? '\r' : '\n';
            if (in[i++] != want)
                return fail(st, -EBADMSG);
            if (++st->line_len == 2) {
                st->line_len = 0;
                int rc = chunk_end(st);
                if (rc < 0)
                    return fail(st, rc);
            }
            break;
        }
        case ST_HDR:
        case ST_TRAILER: {
            char c = in[i++];
            if (c != '\n') {
                if (st->line_len == OL_AWSC_MAX_LINE)
                    return fail(st, -E2BIG);
                st->line[st->line_len++] = c;
                break;
            }
            if (st->line_len == 0 || st->line[st->line_len - 1] != '\r')
                return fail(st, -EBADMSG);
            size_t ll = st->line_len - 1;
            st->line_len = 0;
            if (memchr(st->line, '\r', ll))
                return fail(st, -EBADMSG);
            int rc = st->state == ST_HDR ? chunk_header(st, st->line, ll)
                                         : trailer_line(st, st->line, ll);
            if (rc < 0)
                return fail(st, rc);
            break;
        }
        default: /* ST_DONE: nothing may follow */
            return fail(st, -EBADMSG);
        }
    }
    return (long)i;
}

void ol_awsc_hash_outside(struct ol_awsc *st)
{
    st->outside = true;
}

SHA256_CTX *ol_awsc_chunk_sha(struct ol_awsc *st)
{
    return &st->lane[st->cur].sha;
}

int ol_awsc_finish(const struct ol_awsc *st)
{
    if (st->state == ST_FAIL)
        return st->err;
    return st->state == ST_DONE ? 0 : -EBADMSG;
}

const char *ol_awsc_trailer(const struct ol_awsc *st, const char *name, size_t *len)
{
    size_t nl = strlen(name);
    const char *p = st->trailer, *end = st->trailer + st->trailer_len;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            break;
        if ((size_t)(eol - p) > nl && p[nl] == ':' && memcmp(p, name, nl) == 0) {
            *len = (size_t)(eol - p) - nl - 1;
            return p + nl + 1;
        }
        p = eol + 1;
    }
    return NULL;
}
