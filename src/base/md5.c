/*
 * md5.c - MD5 of many streams side by side (see md5.h).
 *
 * The kernels run RFC 1321's 64 steps (written once, MD5_STEPS) on two or
 * three streams at once, in plain C: one MD5 chain waits on its own latency
 * (every step needs the one before), so the core's ALUs sit mostly idle;
 * independent chains interleaved step by step fill them. Measured on the
 * 2-core AMD EPYC VM of docs/benchmarks.md: OpenSSL 0.85 GB/s for one
 * stream; interleaved, 1.64 GB/s for two and 2.25 for three; four to six
 * give no more (2.2 - 1.9 GB/s: registers spill). 16 AVX-512 lanes reach
 * 4.8 GB/s but only with 16 streams staged at once, and a few give less
 * than the interleaved pair: uploads rarely fill them (profiled: mostly 2
 * or 3 staged at a time), so there is no SIMD kernel and no CPU feature
 * to probe. OpenSSL hashes a stream that has no company, and every
 * stream's last partial block and padding.
 */
#define OPENSSL_SUPPRESS_DEPRECATED   /* MD5_Update/MD5_Final: a state we hold */
#include "base/md5.h"

#include <openssl/md5.h>
#include <stdlib.h>
#include <string.h>

/* Most streams one kernel call interleaves. */
#define MD5_MAX_GROUP 3

struct ol_md5_set {
    unsigned nlanes;
    struct ol_md5 *lane;
    uint8_t *stage;          /* nlanes * OL_MD5_STAGE */
    struct ol_md5 **pend;    /* lanes holding at least one whole block */
    unsigned npend;
    struct ol_md5 *free;     /* lanes not lent */
    unsigned nwait;          /* ended lanes with blocks left (in pend) */
    uint64_t multi_blocks, single_blocks;
};

static const uint32_t md5_iv[4] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};

/* ---- one stream: OpenSSL on a state we keep ---------------------------------- */

static void ctx_from(MD5_CTX *c, const struct ol_md5 *h)
{
    memset(c, 0, sizeof *c);
    c->A = h->h[0];
    c->B = h->h[1];
    c->C = h->h[2];
    c->D = h->h[3];
    uint64_t bits = h->done * 8;
    c->Nl = (MD5_LONG)bits;
    c->Nh = (MD5_LONG)(bits >> 32);
}

/* Hashes nb whole blocks at p into h. */
static void scalar_blocks(struct ol_md5 *h, const uint8_t *p, size_t nb)
{
    MD5_CTX c;
    ctx_from(&c, h);
    MD5_Update(&c, p, nb * 64);
    h->h[0] = c.A;
    h->h[1] = c.B;
    h->h[2] = c.C;
    h->h[3] = c.D;
    h->done += nb * 64;
}

/* ---- kernels ------------------------------------------------------------------ */

#define ROTL(x, c) (((x) << (c)) | ((x) >> (32 - (c))))
#define MF(x, y, z) ((z) ^ ((x) & ((y) ^ (z))))
#define MG(x, y, z) ((y) ^ ((z) & ((x) ^ (y))))
#define MH(x, y, z) ((x) ^ (y) ^ (z))
#define MI(x, y, z) ((y) ^ ((x) | ~(z)))

/* One step on lane i; LANES (defined by each kernel) applies it to all. */
#define LANE_ADD(i, f, a, b, c, d, j, t) a##i += f(b##i, c##i, d##i) + m##i[j] + (uint32_t)(t);
#define LANE_ROT(i, a, s) a##i = ROTL(a##i, s);
#define LANE_SUM(i, a, b) a##i += b##i;
#define STEP(f, a, b, c, d, j, s, t)          \
    LANES(LANE_ADD, f, a, b, c, d, j, t)      \
    LANES(LANE_ROT, a, s)                     \
    LANES(LANE_SUM, a, b)
#define MD5_STEPS                                                                    \
    STEP(MF, a, b, c, d, 0, 7, 0xd76aa478) STEP(MF, d, a, b, c, 1, 12, 0xe8c7b756)   \
    STEP(MF, c, d, a, b, 2, 17, 0x242070db) STEP(MF, b, c, d, a, 3, 22, 0xc1bdceee)  \
    STEP(MF, a, b, c, d, 4, 7, 0xf57c0faf) STEP(MF, d, a, b, c, 5, 12, 0x4787c62a)   \
    STEP(MF, c, d, a, b, 6, 17, 0xa8304613) STEP(MF, b, c, d, a, 7, 22, 0xfd469501)  \
    STEP(MF, a, b, c, d, 8, 7, 0x698098d8) STEP(MF, d, a, b, c, 9, 12, 0x8b44f7af)   \
    STEP(MF, c, d, a, b, 10, 17, 0xffff5bb1) STEP(MF, b, c, d, a, 11, 22, 0x895cd7be) \
    STEP(MF, a, b, c, d, 12, 7, 0x6b901122) STEP(MF, d, a, b, c, 13, 12, 0xfd987193)  \
    STEP(MF, c, d, a, b, 14, 17, 0xa679438e) STEP(MF, b, c, d, a, 15, 22, 0x49b40821) \
    STEP(MG, a, b, c, d, 1, 5, 0xf61e2562) STEP(MG, d, a, b, c, 6, 9, 0xc040b340)    \
    STEP(MG, c, d, a, b, 11, 14, 0x265e5a51) STEP(MG, b, c, d, a, 0, 20, 0xe9b6c7aa)  \
    STEP(MG, a, b, c, d, 5, 5, 0xd62f105d) STEP(MG, d, a, b, c, 10, 9, 0x02441453)   \
    STEP(MG, c, d, a, b, 15, 14, 0xd8a1e681) STEP(MG, b, c, d, a, 4, 20, 0xe7d3fbc8)  \
    STEP(MG, a, b, c, d, 9, 5, 0x21e1cde6) STEP(MG, d, a, b, c, 14, 9, 0xc33707d6)   \
    STEP(MG, c, d, a, b, 3, 14, 0xf4d50d87) STEP(MG, b, c, d, a, 8, 20, 0x455a14ed)   \
    STEP(MG, a, b, c, d, 13, 5, 0xa9e3e905) STEP(MG, d, a, b, c, 2, 9, 0xfcefa3f8)   \
    STEP(MG, c, d, a, b, 7, 14, 0x676f02d9) STEP(MG, b, c, d, a, 12, 20, 0x8d2a4c8a)  \
    STEP(MH, a, b, c, d, 5, 4, 0xfffa3942) STEP(MH, d, a, b, c, 8, 11, 0x8771f681)   \
    STEP(MH, c, d, a, b, 11, 16, 0x6d9d6122) STEP(MH, b, c, d, a, 14, 23, 0xfde5380c) \
    STEP(MH, a, b, c, d, 1, 4, 0xa4beea44) STEP(MH, d, a, b, c, 4, 11, 0x4bdecfa9)   \
    STEP(MH, c, d, a, b, 7, 16, 0xf6bb4b60) STEP(MH, b, c, d, a, 10, 23, 0xbebfbc70)  \
    STEP(MH, a, b, c, d, 13, 4, 0x289b7ec6) STEP(MH, d, a, b, c, 0, 11, 0xeaa127fa)  \
    STEP(MH, c, d, a, b, 3, 16, 0xd4ef3085) STEP(MH, b, c, d, a, 6, 23, 0x04881d05)   \
    STEP(MH, a, b, c, d, 9, 4, 0xd9d4d039) STEP(MH, d, a, b, c, 12, 11, 0xe6db99e5)  \
    STEP(MH, c, d, a, b, 15, 16, 0x1fa27cf8) STEP(MH, b, c, d, a, 2, 23, 0xc4ac5665)  \
    STEP(MI, a, b, c, d, 0, 6, 0xf4292244) STEP(MI, d, a, b, c, 7, 10, 0x432aff97)   \
    STEP(MI, c, d, a, b, 14, 15, 0xab9423a7) STEP(MI, b, c, d, a, 5, 21, 0xfc93a039)  \
    STEP(MI, a, b, c, d, 12, 6, 0x655b59c3) STEP(MI, d, a, b, c, 3, 10, 0x8f0ccc92)  \
    STEP(MI, c, d, a, b, 10, 15, 0xffeff47d) STEP(MI, b, c, d, a, 1, 21, 0x85845dd1)  \
    STEP(MI, a, b, c, d, 8, 6, 0x6fa87e4f) STEP(MI, d, a, b, c, 15, 10, 0xfe2ce6e0)  \
    STEP(MI, c, d, a, b, 6, 15, 0xa3014314) STEP(MI, b, c, d, a, 13, 21, 0x4e0811a1)  \
    STEP(MI, a, b, c, d, 4, 6, 0xf7537e82) STEP(MI, d, a, b, c, 11, 10, 0xbd3af235)  \
    STEP(MI, c, d, a, b, 2, 15, 0x2ad7d2bb) STEP(MI, b, c, d, a, 9, 21, 0xeb86d391)

#define LANE_LOAD(i, S) uint32_t a##i = S[i][0], b##i = S[i][1], c##i = S[i][2], d##i = S[i][3];
#define LANE_MSG(i, p, k)                                             \
    uint32_t m##i[16], a0##i = a##i, b0##i = b##i, c0##i = c##i, d0##i = d##i; \
    memcpy(m##i, p[i] + (k) * 64, 64);   /* little-endian hosts only */
#define LANE_END(i, _) a##i += a0##i, b##i += b0##i, c##i += c0##i, d##i += d0##i;
#define LANE_STORE(i, S) S[i][0] = a##i, S[i][1] = b##i, S[i][2] = c##i, S[i][3] = d##i;
#define KERNEL(name)                                                              \
    static void name(uint32_t (*S)[4], const uint8_t *const *p, size_t nb)        \
    {                                                                             \
        LANES(LANE_LOAD, S)                                                       \
        for (size_t k = 0; k < nb; k++) {                                         \
            LANES(LANE_MSG, p, k)                                                 \
            MD5_STEPS                                                             \
            LANES(LANE_END, 0)                                                    \
        }                                                                         \
        LANES(LANE_STORE, S)                                                      \
    }

#define L2(M, ...) M(0, __VA_ARGS__) M(1, __VA_ARGS__)
#define L3(M, ...) L2(M, __VA_ARGS__) M(2, __VA_ARGS__)
#define LANES L2
KERNEL(md5_x2)
#undef LANES
#define LANES L3
KERNEL(md5_x3)
#undef LANES

typedef void (*md5_kernel)(uint32_t (*S)[4], const uint8_t *const *p, size_t nb);
static const md5_kernel kernels[MD5_MAX_GROUP + 1] = {NULL, NULL, md5_x2, md5_x3};

/* ---- the set ------------------------------------------------------------------- */

struct ol_md5_set *ol_md5_set_new(unsigned lanes)
{
    if (lanes == 0)
        return NULL;
    struct ol_md5_set *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->nlanes = lanes;
    s->lane = calloc(lanes, sizeof *s->lane);
    s->pend = calloc(lanes, sizeof *s->pend);
    s->stage = aligned_alloc(64, (size_t)lanes * OL_MD5_STAGE);
    if (!s->lane || !s->pend || !s->stage) {
        ol_md5_set_free(s);
        return NULL;
    }
    for (unsigned i = 0; i < lanes; i++) {
        s->lane[i].set = s;
        s->lane[i].stage = s->stage + (size_t)i * OL_MD5_STAGE;
        s->lane[i].pend = -1;
        s->lane[i].next_free = s->free;
        s->free = &s->lane[i];
    }
    return s;
}

void ol_md5_set_free(struct ol_md5_set *s)
{
    if (!s)
        return;
    free(s->lane);
    free(s->pend);
    free(s->stage);
    free(s);
}

struct ol_md5 *ol_md5_get(struct ol_md5_set *s)
{
    struct ol_md5 *h = s->free;
    if (h) {
        s->free = h->next_free;
        h->next_free = NULL;
        h->lent = true;
    }
    return h;
}

void ol_md5_put(struct ol_md5 *h)
{
    ol_md5_drop(h);
    if (h->set) {
        h->lent = false;
        h->next_free = h->set->free;
        h->set->free = h;
    }
}

void ol_md5_set_stats(const struct ol_md5_set *s, uint64_t *multi, uint64_t *single)
{
    *multi = __atomic_load_n(&s->multi_blocks, __ATOMIC_RELAXED);
    *single = __atomic_load_n(&s->single_blocks, __ATOMIC_RELAXED);
}

static uint32_t blocks(const struct ol_md5 *h)
{
    return (h->used - h->off) / 64;
}

static void pend_add(struct ol_md5_set *s, struct ol_md5 *h)
{
    if (h->pend < 0) {
        h->pend = (int32_t)s->npend;
        s->pend[s->npend++] = h;
        s->nwait += h->ended;
    }
}

static void pend_del(struct ol_md5_set *s, struct ol_md5 *h)
{
    if (h->pend >= 0) {
        s->nwait -= h->ended;
        struct ol_md5 *last = s->pend[--s->npend];
        s->pend[h->pend] = last;
        last->pend = h->pend;
        h->pend = -1;
    }
}

/* Moves what is left of a lane's staging to its start. */
static void compact(struct ol_md5_set *s, struct ol_md5 *h)
{
    if (h->off) {
        memmove(h->stage, h->stage + h->off, h->used - h->off);
        h->used -= h->off;
        h->off = 0;
    }
    if (h->used >= 64)
        pend_add(s, h);
    else
        pend_del(s, h);
}

/* A lane's claim to join a group: waiting (ended) lanes first, then by
 * blocks staged. */
static uint32_t claim(const struct ol_md5 *h)
{
    return blocks(h) + (h->ended ? 1u << 24 : 0);
}

/*
 * Hashes whole blocks x has staged until it has `room` bytes free (all of
 * them at the end of a stream), together with the (up to 2) lanes with the
 * best claim: the kernel for the group runs for as many blocks as its
 * smallest lane has; the lanes that run dry leave and the rest go on.
 * Alone (with `alone`), x hashes only the blocks that make the room: the
 * rest waits for company (uploads arrive in bursts, one connection after
 * the other).
 */
static void flush(struct ol_md5_set *s, struct ol_md5 *x, uint32_t room, bool alone)
{
    struct ol_md5 *g[MD5_MAX_GROUP];
    uint32_t st[MD5_MAX_GROUP][4];
    const uint8_t *ptr[MD5_MAX_GROUP];
    while (blocks(x) && OL_MD5_STAGE - (x->used - x->off) < room) {
        /* the group: x, then the other lanes by blocks staged, most first */
        unsigned ng = 1;
        g[0] = x;
        for (unsigned i = 0; i < s->npend; i++) {
            struct ol_md5 *h = s->pend[i];
            uint32_t hb = claim(h);
            if (h == x || blocks(h) == 0)
                continue;
            unsigned at = ng;
            if (ng == MD5_MAX_GROUP) {
                if (hb <= claim(g[ng - 1]))
                    continue;
                at = --ng;
            }
            while (at > 1 && claim(g[at - 1]) < hb) {
                g[at] = g[at - 1];
                at--;
            }
            g[at] = h;
            ng++;
        }
        if (ng == 1)
            break;
        uint32_t nb = blocks(x);
        for (unsigned l = 0; l < ng; l++) {
            if (blocks(g[l]) < nb)
                nb = blocks(g[l]);
            memcpy(st[l], g[l]->h, sizeof st[l]);
            ptr[l] = g[l]->stage + g[l]->off;
        }
        kernels[ng](st, ptr, nb);
        s->multi_blocks += (uint64_t)nb * ng;
        for (unsigned l = 0; l < ng; l++) {
            memcpy(g[l]->h, st[l], sizeof st[l]);
            g[l]->done += (uint64_t)nb * 64;
            g[l]->off += nb * 64;
        }
        /* lanes of this group other than x are compacted now: the next
         * group may not hold them */
        for (unsigned l = 1; l < ng; l++)
            compact(s, g[l]);
    }
    uint32_t have = OL_MD5_STAGE - (x->used - x->off);
    if (alone && blocks(x) && have < room) {
        uint32_t nb = (room - have + 63) / 64;
        if (nb > blocks(x))
            nb = blocks(x);
        scalar_blocks(x, x->stage + x->off, nb);
        x->off += nb * 64;
        s->single_blocks += nb;
    }
    compact(s, x);
}

/* ---- streams --------------------------------------------------------------------- */

void ol_md5_init(struct ol_md5 *h)
{
    ol_md5_drop(h);
    memcpy(h->h, md5_iv, sizeof h->h);
}

void ol_md5_update(struct ol_md5 *h, const void *data, size_t n)
{
    const uint8_t *p = data;
    if (!h->set) {   /* a lone stream: whole blocks straight through */
        if (h->tail) {
            size_t take = 64 - h->tail < n ? 64 - h->tail : n;
            memcpy(h->buf + h->tail, p, take);
            h->tail += (uint32_t)take;
            p += take;
            n -= take;
            if (h->tail < 64)
                return;
            scalar_blocks(h, h->buf, 1);
            h->tail = 0;
        }
        if (n >= 64) {
            scalar_blocks(h, p, n / 64);
            p += n & ~(size_t)63;
            n &= 63;
        }
        memcpy(h->buf, p, n);
        h->tail = (uint32_t)n;
        return;
    }
    while (n) {
        if (h->used == OL_MD5_STAGE)
            flush(h->set, h, OL_MD5_STAGE / 4, true);
        size_t take = OL_MD5_STAGE - h->used < n ? OL_MD5_STAGE - h->used : n;
        memcpy(h->stage + h->used, p, take);
        h->used += (uint32_t)take;
        p += take;
        n -= take;
    }
    if (h->used >= 64)
        pend_add(h->set, h);
    if (h->set->nwait && h->used >= 64)
        flush(h->set, h, OL_MD5_STAGE, false); /* company for the waiting lanes */
}

bool ol_md5_end(struct ol_md5 *h)
{
    if (!h->set)
        return true;
    if (!h->ended) {
        h->ended = true;
        h->set->nwait += h->pend >= 0;
    }
    flush(h->set, h, OL_MD5_STAGE, false);
    return ol_md5_ready(h);
}

bool ol_md5_ready(const struct ol_md5 *h)
{
    return !h->set || blocks(h) == 0;
}

bool ol_md5_company_coming(const struct ol_md5 *h)
{
    const struct ol_md5_set *s = h->set;
    if (!s)
        return false;
    for (unsigned i = 0; i < s->nlanes; i++) {
        const struct ol_md5 *l = &s->lane[i];
        if (l != h && l->lent && !l->ended)
            return true;
    }
    return false;
}

void ol_md5_final(struct ol_md5 *h, uint8_t out[16])
{
    MD5_CTX c;
    if (h->set) {
        flush(h->set, h, OL_MD5_STAGE, true);
        ctx_from(&c, h);
        MD5_Update(&c, h->stage, h->used);
        h->used = 0;
        pend_del(h->set, h);
    } else {
        ctx_from(&c, h);
        MD5_Update(&c, h->buf, h->tail);
        h->tail = 0;
    }
    MD5_Final(out, &c);
}

void ol_md5_drop(struct ol_md5 *h)
{
    h->done = 0;
    h->tail = 0;
    if (h->set) {
        h->off = h->used = 0;
        pend_del(h->set, h);
    }
    h->ended = false;
}
