/*
 * md5.c - MD5 of many streams side by side (see md5.h).
 *
 * Two kernels run RFC 1321's 64 steps (written once, MD5_STEPS) on several
 * lanes at once. md5_x16: vector k of the state holds word k of 16
 * streams, message word j of lane l's block is element l of m[j] (GCC/Clang
 * vector extensions; target("avx512f") compiles it for AVX-512 only, chosen
 * at run time, so the rest of the build needs no -m flags). md5_x2: two
 * chains interleaved in plain C, which the core runs side by side at
 * nearly the cost of one. Measured on the 2-core AMD EPYC VM of
 * docs/benchmarks.md: OpenSSL 0.85 GB/s for one stream, md5_x2 1.65 GB/s
 * for two, md5_x16 4.8 GB/s for sixteen.
 */
#define OPENSSL_SUPPRESS_DEPRECATED   /* MD5_Update/MD5_Final: a state we hold */
#include "base/md5.h"

#include <immintrin.h>
#include <openssl/md5.h>
#include <stdlib.h>
#include <string.h>

struct ol_md5_set {
    int kernel;
    unsigned width;          /* most lanes hashed together: 16 or 2 */
    unsigned nlanes;
    struct ol_md5 *lane;
    uint8_t *stage;          /* nlanes * OL_MD5_STAGE */
    struct ol_md5 **pend;    /* lanes holding at least one whole block */
    unsigned npend;
    struct ol_md5 *free;     /* lanes not lent */
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
#define STEP(f, a, b, c, d, j, s, t) \
    a += f(b, c, d) + m[j] + (t);    \
    a = ROTL(a, s);                  \
    a += b;
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

typedef uint32_t v16u __attribute__((vector_size(64)));

/* 16 lanes; the 16 blocks of a step are loaded whole and transposed. */
__attribute__((target("avx512f"))) static void md5_x16(uint32_t st[4][16],
                                                      const uint8_t *const p[16], size_t nb)
{
    v16u a, b, c, d;
    memcpy(&a, st[0], 64);
    memcpy(&b, st[1], 64);
    memcpy(&c, st[2], 64);
    memcpy(&d, st[3], 64);
    for (size_t k = 0; k < nb; k++) {
        __m512i r[16], t[16];
        for (int l = 0; l < 16; l++)
            r[l] = _mm512_loadu_si512(p[l] + k * 64);
        for (int i = 0; i < 16; i += 2) {
            t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
            t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
        }
        for (int i = 0; i < 16; i += 4) {
            r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
            r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
            r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
            r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
        }
        for (int g = 0; g < 16; g += 8)
            for (int q = 0; q < 4; q++) {
                t[g + q] = _mm512_shuffle_i32x4(r[g + q], r[g + 4 + q], 0x88);
                t[g + 4 + q] = _mm512_shuffle_i32x4(r[g + q], r[g + 4 + q], 0xdd);
            }
        v16u m[16];
        for (int q = 0; q < 8; q++) {
            __m512i lo = _mm512_shuffle_i32x4(t[q], t[q + 8], 0x88);
            __m512i hi = _mm512_shuffle_i32x4(t[q], t[q + 8], 0xdd);
            memcpy(&m[q], &lo, 64);
            memcpy(&m[q + 8], &hi, 64);
        }
        v16u aa = a, bb = b, cc = c, dd = d;
        MD5_STEPS
        a += aa;
        b += bb;
        c += cc;
        d += dd;
    }
    memcpy(st[0], &a, 64);
    memcpy(st[1], &b, 64);
    memcpy(st[2], &c, 64);
    memcpy(st[3], &d, 64);
}

/* Two lanes in plain C: two independent chains interleaved, so that the
 * core's ALUs run both (one chain alone waits on its own latency). */
#undef STEP
#define STEP(f, a, b, c, d, j, s, t)                       \
    a##0 += f(b##0, c##0, d##0) + m0[j] + (uint32_t)(t);  \
    a##1 += f(b##1, c##1, d##1) + m1[j] + (uint32_t)(t);  \
    a##0 = ROTL(a##0, s);                                  \
    a##1 = ROTL(a##1, s);                                  \
    a##0 += b##0;                                          \
    a##1 += b##1;

static void md5_x2(uint32_t s0[4], uint32_t s1[4], const uint8_t *p0, const uint8_t *p1,
                   size_t nb)
{
    uint32_t a0 = s0[0], b0 = s0[1], c0 = s0[2], d0 = s0[3];
    uint32_t a1 = s1[0], b1 = s1[1], c1 = s1[2], d1 = s1[3];
    for (size_t k = 0; k < nb; k++) {
        uint32_t m0[16], m1[16];
        memcpy(m0, p0 + k * 64, 64);   /* little-endian: x86 only */
        memcpy(m1, p1 + k * 64, 64);
        uint32_t aa0 = a0, bb0 = b0, cc0 = c0, dd0 = d0;
        uint32_t aa1 = a1, bb1 = b1, cc1 = c1, dd1 = d1;
        MD5_STEPS
        a0 += aa0, b0 += bb0, c0 += cc0, d0 += dd0;
        a1 += aa1, b1 += bb1, c1 += cc1, d1 += dd1;
    }
    s0[0] = a0, s0[1] = b0, s0[2] = c0, s0[3] = d0;
    s1[0] = a1, s1[1] = b1, s1[2] = c1, s1[3] = d1;
}

/* ---- the set ------------------------------------------------------------------- */

static int best_kernel(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return OL_MD5_AVX512;
    return OL_MD5_SCALAR;
}

struct ol_md5_set *ol_md5_set_new(unsigned lanes, int kernel)
{
    int best = best_kernel();
    if (kernel == OL_MD5_AUTO)
        kernel = best;
    if (kernel < OL_MD5_SCALAR || kernel > best || lanes == 0)
        return NULL;
    struct ol_md5_set *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->kernel = kernel;
    s->width = kernel == OL_MD5_AVX512 ? 16 : 2;
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
    }
    return h;
}

void ol_md5_put(struct ol_md5 *h)
{
    ol_md5_drop(h);
    if (h->set) {
        h->next_free = h->set->free;
        h->set->free = h;
    }
}

void ol_md5_set_stats(const struct ol_md5_set *s, uint64_t *multi, uint64_t *single)
{
    *multi = s->multi_blocks;
    *single = s->single_blocks;
}

int ol_md5_set_kernel(const struct ol_md5_set *s)
{
    return s->kernel;
}

const char *ol_md5_kernel_name(int kernel)
{
    return kernel == OL_MD5_AVX512 ? "avx512 (16 lanes)" : "scalar (2 lanes)";
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
    }
}

static void pend_del(struct ol_md5_set *s, struct ol_md5 *h)
{
    if (h->pend >= 0) {
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

/*
 * Hashes whole blocks x has staged until it has `room` bytes free (all of
 * them at the end of a stream), together with the lanes that have the most
 * blocks staged: a kernel step takes one block of every lane in the group,
 * for as many steps as the group's smallest lane has blocks; the lanes
 * that run dry leave and the rest go on. Alone, x hashes only the blocks
 * that make the room: the rest waits for company (uploads arrive in
 * bursts, one connection after the other).
 * md5_x16 pays off from X16_MIN lanes (a step costs about what OpenSSL
 * takes for 3 blocks of one stream, md5_x2 for 1.2); fewer go by pairs
 * (md5_x2), and x alone through OpenSSL.
 */
#define X16_MIN 6

static void flush(struct ol_md5_set *s, struct ol_md5 *x, uint32_t room)
{
    struct ol_md5 *g[16];
    uint32_t st[4][16];
    const uint8_t *ptr[16];
    while (blocks(x) && OL_MD5_STAGE - (x->used - x->off) < room) {
        /* the group: x and the width - 1 other lanes with the most blocks */
        unsigned ng = 1;
        g[0] = x;
        for (unsigned i = 0; i < s->npend; i++) {
            struct ol_md5 *h = s->pend[i];
            uint32_t hb = blocks(h);
            if (h == x || hb == 0)
                continue;
            unsigned at = ng;
            if (ng == s->width) {
                if (hb <= blocks(g[ng - 1]))
                    continue;
                at = --ng;
            }
            while (at > 1 && blocks(g[at - 1]) < hb) {
                g[at] = g[at - 1];
                at--;
            }
            g[at] = h;
            ng++;
        }
        if (ng == 1)
            break;
        if (ng < X16_MIN)
            ng = 2;
        uint32_t nb = blocks(x);
        for (unsigned i = 1; i < ng; i++)
            if (blocks(g[i]) < nb)
                nb = blocks(g[i]);
        if (ng == 2) {
            md5_x2(x->h, g[1]->h, x->stage + x->off, g[1]->stage + g[1]->off, nb);
        } else {
            for (unsigned l = 0; l < 16; l++) {
                struct ol_md5 *h = g[l < ng ? l : 0];   /* spare lanes redo x, unused */
                for (int w = 0; w < 4; w++)
                    st[w][l] = h->h[w];
                ptr[l] = h->stage + h->off;
            }
            md5_x16(st, ptr, nb);
            for (unsigned l = 0; l < ng; l++)
                for (int w = 0; w < 4; w++)
                    g[l]->h[w] = st[w][l];
        }
        s->multi_blocks += (uint64_t)nb * ng;
        for (unsigned l = 0; l < ng; l++) {
            g[l]->done += (uint64_t)nb * 64;
            g[l]->off += nb * 64;
        }
        /* lanes of this group other than x are compacted now: the next
         * group may not hold them */
        for (unsigned l = 1; l < ng; l++)
            compact(s, g[l]);
    }
    uint32_t have = OL_MD5_STAGE - (x->used - x->off);
    if (blocks(x) && have < room) {
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
    memcpy(h->h, md5_iv, sizeof h->h);
    h->done = 0;
    h->tail = 0;
    if (h->set) {
        h->off = h->used = 0;
        pend_del(h->set, h);
    }
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
            flush(h->set, h, OL_MD5_STAGE / 4);
        size_t take = OL_MD5_STAGE - h->used < n ? OL_MD5_STAGE - h->used : n;
        memcpy(h->stage + h->used, p, take);
        h->used += (uint32_t)take;
        p += take;
        n -= take;
    }
    if (h->used >= 64)
        pend_add(h->set, h);
}

void ol_md5_final(struct ol_md5 *h, uint8_t out[16])
{
    MD5_CTX c;
    if (h->set) {
        flush(h->set, h, OL_MD5_STAGE);
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
}
