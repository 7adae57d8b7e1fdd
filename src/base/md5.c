/*
 * md5.c - MD5 of many streams side by side (see md5.h).
 *
 * The kernels run RFC 1321's 64 steps (written once, MD5_STEPS) on several
 * streams at once: one MD5 chain waits on its own latency (every step
 * needs the one before), so the core's ALUs sit mostly idle; independent
 * chains side by side fill them. Two kinds:
 *   - scalar, plain C, two or three chains interleaved step by step (four
 *     or more spill registers);
 *   - vector, one stream per 32-bit lane, 8 lanes (AVX2, or AVX-512VL's
 *     rotate and three-input logic, which shorten each step's chain) or 16
 *     (AVX-512F); a lane's message words are gathered from its staging
 *     buffer, and lanes with no stream are padded (their work is wasted).
 * Through a set on one core (`bash bench/store/run_md5.sh`, streams fed
 * in step; docs/benchmarks.md) on the Intel Xeon VM, with AVX-512: OpenSSL
 * 0.68 GB/s for one stream; interleaved 1.13 for three streams in pairs
 * and 1.47 in threes; 8 lanes 1.72 with three streams, 3.51 with eight;
 * 16 lanes 3.65 with sixteen, and the set's own choice 4.14 there (16- and
 * 8-lane groups as lanes run dry). On the AMD EPYC VM of earlier runs the kernels alone did 1.64
 * (two interleaved), 2.25 (three) and 4.8 (16 lanes, all busy). So what pays
 * depends on the core and on how many streams have blocks staged: each
 * set times every kernel the CPU has when it is made (calibrate) and each
 * group takes the kernel that hashes the most of its staged blocks per
 * nanosecond (choose). OpenSSL hashes a stream that has no company, and
 * every stream's last partial block and padding.
 */
#define OPENSSL_SUPPRESS_DEPRECATED   /* MD5_Update/MD5_Final: a state we hold */
#include "base/md5.h"
#include "base/md5_steps.h"
#include "base/md5sha.h"
#include "base/sha256.h"
#include "base/simd.h"

#include <openssl/md5.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* Most streams one kernel call hashes. */
#define MD5_MAX_GROUP 16
/* Room a lane with a full stage makes: one 16 KiB receive buffer. It
 * hashes that much, and only that much of its company's bytes, so the
 * other lanes stay staged and the next group is as wide as this one.
 * (Freeing a quarter of the stage drained the company each time: 16
 * uploads of 16 MiB at once went 2.4 lanes to a group on average, 8.3
 * with this.) */
#define MD5_ROOM (OL_MD5_STAGE / 32)
/* Most lanes of a set: their staging offsets must fit the gathers' int32. */
#define MD5_MAX_LANES ((unsigned)(INT32_MAX / OL_MD5_STAGE))

typedef void (*md5_kernel)(uint32_t (*S)[4], const uint8_t *const *p, size_t nb);
/* Vector kernels: lane l hashes nb blocks at base + off[l]. */
typedef void (*md5_vkernel)(uint32_t (*S)[4], const uint8_t *base, const int32_t *off,
                            size_t nb);

struct md5_kern {
    const char *name;
    unsigned width;          /* streams; a scalar kernel needs them all */
    md5_kernel scalar;       /* one of the two */
    md5_vkernel vec;
    uint64_t ns;             /* calibrate: ns for MD5_CAL_BLOCKS blocks per stream */
};

struct ol_md5_set {
    unsigned nlanes;
    struct ol_md5 *lane;
    uint8_t *stage;          /* nlanes * OL_MD5_STAGE */
    struct ol_md5 **pend;    /* lanes holding at least one whole block */
    unsigned npend;
    struct ol_md5 *free;     /* lanes not lent */
    unsigned nwait;          /* ended lanes with blocks left (in pend) */
    unsigned nlent;          /* lanes lent (ol_md5_get) and not put back */
    struct md5_kern kern[5]; /* the kernels this CPU runs (calibrate) */
    unsigned nkern;
    bool x4;                 /* lanes with SHA-256 companions: md5sha.h's four-lane
                                kernel beats the MD5 kernels + SHA-256 pairs here */
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

/* One step on lane i; LANES (defined by each kernel) applies it to all. */
#define LANE_ADD(i, f, a, b, c, d, j, t) a##i += f(b##i, c##i, d##i) + m##i[j] + (uint32_t)(t);
#define LANE_ROT(i, a, s) a##i = ROTL(a##i, s);
#define LANE_SUM(i, a, b) a##i += b##i;
#define STEP(f, a, b, c, d, j, s, t)          \
    LANES(LANE_ADD, f, a, b, c, d, j, t)      \
    LANES(LANE_ROT, a, s)                     \
    LANES(LANE_SUM, a, b)
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

#if defined(__x86_64__)
/*
 * Vector kernels: the same MD5_STEPS with STEP redefined on vectors (V_MF ..
 * V_MI, VADD, VROL, VSET1 and VGATHER are defined before each one). S and
 * off have W rows; the caller pads the lanes it does not use.
 */
#undef STEP
#define STEP MD5_VSTEP
#define VKERNEL(name, attr, W, vec)                                                      \
    attr static void name(uint32_t (*S)[4], const uint8_t *base, const int32_t *off,    \
                          size_t nb)                                                     \
    {                                                                                    \
        uint32_t t[4][W];                                                                \
        for (int l = 0; l < W; l++)                                                      \
            for (int r = 0; r < 4; r++)                                                  \
                t[r][l] = S[l][r];                                                       \
        vec vi = VLOAD(off), a = VLOAD(t[0]), b = VLOAD(t[1]), c = VLOAD(t[2]),          \
            d = VLOAD(t[3]);                                                             \
        for (size_t k = 0; k < nb; k++, base += 64) {                                    \
            vec m[16], a0 = a, b0 = b, c0 = c, d0 = d;                                   \
            for (int j = 0; j < 16; j++)                                                 \
                m[j] = VGATHER(base + 4 * j, vi);                                        \
            MD5_STEPS                                                                    \
            a = VADD(a, a0);                                                             \
            b = VADD(b, b0);                                                             \
            c = VADD(c, c0);                                                             \
            d = VADD(d, d0);                                                             \
        }                                                                                \
        VSTORE(t[0], a);                                                                 \
        VSTORE(t[1], b);                                                                 \
        VSTORE(t[2], c);                                                                 \
        VSTORE(t[3], d);                                                                 \
        for (int l = 0; l < W; l++)                                                      \
            for (int r = 0; r < 4; r++)                                                  \
                S[l][r] = t[r][l];                                                       \
    }

/* 8 lanes, AVX2: rotate by two shifts, F..I as in the scalar code */
#define VLOAD(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define VSTORE(p, v) _mm256_storeu_si256((__m256i *)(void *)(p), v)
#define VGATHER(p, vi) _mm256_i32gather_epi32((const int *)(const void *)(p), vi, 1)
#define VADD _mm256_add_epi32
#define VSET1 _mm256_set1_epi32
#define VROL(x, s) _mm256_or_si256(_mm256_slli_epi32(x, s), _mm256_srli_epi32(x, 32 - (s)))
#define V_MF(x, y, z) _mm256_xor_si256(z, _mm256_and_si256(x, _mm256_xor_si256(y, z)))
#define V_MG(x, y, z) _mm256_xor_si256(y, _mm256_and_si256(z, _mm256_xor_si256(x, y)))
#define V_MH(x, y, z) _mm256_xor_si256(_mm256_xor_si256(x, y), z)
#define V_MI(x, y, z) \
    _mm256_xor_si256(y, _mm256_or_si256(x, _mm256_xor_si256(z, _mm256_set1_epi32(-1))))
VKERNEL(md5_v8_avx2, __attribute__((target("avx2"))), 8, __m256i)
#undef VROL
#undef V_MF
#undef V_MG
#undef V_MH
#undef V_MI

/* AVX-512: one rotate, one three-input logic op per function (the
 * immediates are the truth tables of F, G, H and I over x, y, z) */
#define V_MF(x, y, z) VTERN(x, y, z, 0xCA)
#define V_MG(x, y, z) VTERN(x, y, z, 0xE4)
#define V_MH(x, y, z) VTERN(x, y, z, 0x96)
#define V_MI(x, y, z) VTERN(x, y, z, 0x39)
/* 8 lanes, AVX-512VL */
#define VROL _mm256_rol_epi32
#define VTERN _mm256_ternarylogic_epi32
VKERNEL(md5_v8_avx512, __attribute__((target("avx2,avx512f,avx512vl"))), 8, __m256i)
#undef VLOAD
#undef VSTORE
#undef VGATHER
#undef VADD
#undef VSET1
#undef VROL
#undef VTERN
/* 16 lanes, AVX-512F */
#define VLOAD(p) _mm512_loadu_si512((const void *)(p))
#define VSTORE(p, v) _mm512_storeu_si512((void *)(p), v)
#define VGATHER(p, vi) _mm512_i32gather_epi32(vi, (const void *)(p), 1)
#define VADD _mm512_add_epi32
#define VSET1 _mm512_set1_epi32
#define VROL _mm512_rol_epi32
#define VTERN _mm512_ternarylogic_epi32
VKERNEL(md5_v16_avx512, __attribute__((target("avx512f"))), 16, __m512i)
#endif

/* ---- choosing kernels ------------------------------------------------------------ */

/* Blocks per stream each kernel is timed on, and the best of how many runs. */
#define MD5_CAL_BLOCKS 32u
#define MD5_CAL_RUNS 5

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Runs k on n lanes (n <= k->width; vector kernels pad the rest with lane
 * 0's, scalar ones need n == width) whose blocks start at ptr[l]. */
static void run_kernel(const struct md5_kern *k, const uint8_t *base, uint32_t (*st)[4],
                       const uint8_t *const *ptr, unsigned n, size_t nb)
{
#if defined(__x86_64__)
    if (k->vec) {
        int32_t off[MD5_MAX_GROUP];
        for (unsigned l = 0; l < k->width; l++) {
            off[l] = (int32_t)((l < n ? ptr[l] : ptr[0]) - base);
            if (l >= n)
                memcpy(st[l], st[0], sizeof st[l]);
        }
        k->vec(st, base, off, nb);
        return;
    }
#else
    (void)base;
    (void)n;
#endif
    k->scalar(st, ptr, nb);
}

/* The kernels this CPU has, each timed on `buf` (MD5_MAX_GROUP *
 * MD5_CAL_BLOCKS blocks): a set of `lanes` never needs more streams. */
static void calibrate(struct ol_md5_set *s, const uint8_t *buf, unsigned lanes)
{
    struct md5_kern all[] = {
        {"x2", 2, md5_x2, NULL, 0},
        {"x3", 3, md5_x3, NULL, 0},
#if defined(__x86_64__)
        {"v8-avx2", 8, NULL, md5_v8_avx2, 0},
        {"v8-avx512", 8, NULL, md5_v8_avx512, 0},
        {"v16-avx512", 16, NULL, md5_v16_avx512, 0},
#endif
    };
    s->nkern = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        struct md5_kern k = all[i];
#if defined(__x86_64__)
        if (k.vec == md5_v8_avx512 &&
            !(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl")))
            continue;
        if (k.vec == md5_v8_avx2 && !__builtin_cpu_supports("avx2"))
            continue;
        if (k.vec == md5_v16_avx512 && (!__builtin_cpu_supports("avx512f") || lanes < 9))
            continue;
#endif
        if (k.width > lanes && !k.vec)
            continue;
        const uint8_t *ptr[MD5_MAX_GROUP];
        uint32_t st[MD5_MAX_GROUP][4];
        for (unsigned l = 0; l < MD5_MAX_GROUP; l++) {
            ptr[l] = buf + (size_t)l * MD5_CAL_BLOCKS * 64;
            memcpy(st[l], md5_iv, sizeof st[l]);
        }
        uint64_t best = UINT64_MAX;
        for (int r = 0; r < MD5_CAL_RUNS; r++) {
            uint64_t t0 = now_ns();
            run_kernel(&k, buf, st, ptr, k.width, MD5_CAL_BLOCKS);
            uint64_t t = now_ns() - t0;
            if (t < best)
                best = t;
        }
        k.ns = best ? best : 1;
        s->kern[s->nkern++] = k;
    }
}

/* Whether four lanes that each carry a SHA-256 companion hash faster
 * through md5sha.h's interleaved kernel than through the best MD5 kernel
 * for four lanes and two SHA-256 pairs after it (on the Intel Xeon VM:
 * 0.57-0.61 against 0.78 ms per MiB of the four with AVX-512; the AVX flavour
 * about even). Timed like the kernels, on the same buffer. */
static void calibrate_x4(struct ol_md5_set *s, const uint8_t *buf)
{
    s->x4 = false;
    if (!ol_md5sha_x4_fast())
        return;
    const struct md5_kern *k = NULL;
    for (unsigned i = 0; i < s->nkern; i++)   /* the best MD5 kernel for 4 */
        if ((s->kern[i].vec || s->kern[i].width <= 4) &&
            (!k || (double)s->kern[i].ns / (s->kern[i].vec ? 4 : s->kern[i].width) <
                       (double)k->ns / (k->vec ? 4 : k->width)))
            k = &s->kern[i];
    if (!k)
        return;
    const uint8_t *ptr[MD5_MAX_GROUP];
    uint32_t st[MD5_MAX_GROUP][4];
    SHA256_CTX c[4];
    SHA256_CTX *cp[4] = {&c[0], &c[1], &c[2], &c[3]};
    for (unsigned l = 0; l < MD5_MAX_GROUP; l++) {
        ptr[l] = buf + (size_t)l * MD5_CAL_BLOCKS * 64;
        memcpy(st[l], md5_iv, sizeof st[l]);
    }
    uint64_t best_x4 = UINT64_MAX, best_sep = UINT64_MAX;
    for (int r = 0; r < MD5_CAL_RUNS; r++) {
        for (int i = 0; i < 4; i++)
            ol_sha256_init(&c[i]);
        ol_simd_clean();
        uint64_t t0 = now_ns();
        ol_md5sha_x4(st, cp, ptr, 4, MD5_CAL_BLOCKS);
        uint64_t t1 = now_ns();
        run_kernel(k, buf, st, ptr, k->vec ? 4 : k->width, MD5_CAL_BLOCKS);
        if (!k->vec && k->width < 4)   /* a scalar pair: the other two lanes */
            run_kernel(k, buf, st, ptr + 2, 2, MD5_CAL_BLOCKS);
        ol_simd_clean();
        ol_sha256_update2(&c[0], ptr[0], MD5_CAL_BLOCKS * 64, &c[1], ptr[1], MD5_CAL_BLOCKS * 64);
        ol_sha256_update2(&c[2], ptr[2], MD5_CAL_BLOCKS * 64, &c[3], ptr[3], MD5_CAL_BLOCKS * 64);
        uint64_t t2 = now_ns();
        if (t1 - t0 < best_x4)
            best_x4 = t1 - t0;
        if (t2 - t1 < best_sep)
            best_sep = t2 - t1;
    }
    s->x4 = best_x4 < best_sep;
}

bool ol_md5_set_x4(struct ol_md5_set *s, int on)
{
    if (on > 0 && !ol_md5sha_x4_fast())
        return false;
    if (on >= 0)
        s->x4 = on > 0;
    return s->x4;
}

bool ol_md5_set_only(struct ol_md5_set *s, const char *kernel)
{
    for (unsigned i = 0; i < s->nkern; i++)
        if (strcmp(s->kern[i].name, kernel) == 0) {
            s->kern[0] = s->kern[i];
            s->nkern = 1;
            return true;
        }
    return false;
}

/*
 * The kernel for a group g[0..ng) (ng >= 2, sorted by claim, g[0] the lane
 * that needs room, `cap` blocks more): the one that hashes the most blocks
 * per ns, counting each lane's blocks up to cap (where the group stops
 * mattering: flush ends once g[0] has its room). Sets
 * *n to how many of the group it takes. NULL when none fits (a set left
 * with only a scalar kernel wider than the group).
 */
static const struct md5_kern *choose(const struct ol_md5_set *s, struct ol_md5 *const *g,
                                     unsigned ng, uint32_t cap, unsigned *n)
{
    const struct md5_kern *best = NULL;
    double best_rate = 0;
    for (unsigned i = 0; i < s->nkern; i++) {
        const struct md5_kern *k = &s->kern[i];
        if (!k->vec && k->width > ng)
            continue;
        unsigned take = k->width < ng ? k->width : ng;
        uint64_t eff = 0;
        for (unsigned l = 0; l < take; l++) {
            uint32_t b = g[l]->len / 64;
            eff += b < cap ? b : cap;
        }
        double rate = (double)eff / (double)k->ns;
        if (!best || rate > best_rate) {
            best = k;
            best_rate = rate;
            *n = take;
        }
    }
    return best;
}

/* ---- the set ------------------------------------------------------------------- */

struct ol_md5_set *ol_md5_set_new(unsigned lanes)
{
    if (lanes == 0 || lanes > MD5_MAX_LANES)
        return NULL;
    struct ol_md5_set *s = calloc(1, sizeof *s);
    uint8_t *cal = malloc((size_t)MD5_MAX_GROUP * MD5_CAL_BLOCKS * 64);
    if (!s || !cal) {
        free(s);
        free(cal);
        return NULL;
    }
    for (size_t i = 0; i < (size_t)MD5_MAX_GROUP * MD5_CAL_BLOCKS * 64; i++)
        cal[i] = (uint8_t)(i * 131 + (i >> 9));
    calibrate(s, cal, lanes);
    calibrate_x4(s, cal);
    free(cal);
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
        s->nlent++;
    }
    return h;
}

bool ol_md5_set_busy(const struct ol_md5_set *s)
{
    return s->nlent > 0;
}

void ol_md5_put(struct ol_md5 *h)
{
    ol_md5_drop(h);
    if (h->set) {
        h->lent = false;
        h->set->nlent--;
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
    return h->len / 64;
}

/* Blocks staged in one piece from off (the ring wraps on a block's edge:
 * off and OL_MD5_STAGE are multiples of 64). */
static uint32_t run_of(const struct ol_md5 *h)
{
    uint32_t b = h->len / 64, end = (OL_MD5_STAGE - h->off) / 64;
    return b < end ? b : end;
}

/* nb blocks at off are hashed: off moves on, round the ring. */
static void consume(struct ol_md5 *h, uint32_t nb)
{
    h->off += nb * 64;
    if (h->off == OL_MD5_STAGE)
        h->off = 0;
    h->len -= nb * 64;
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

/* A lane is pending while it has a whole block staged. */
static void repend(struct ol_md5_set *s, struct ol_md5 *h)
{
    if (blocks(h))
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

/* Blocks x must hash to have `room` bytes free. */
static uint32_t need_of(const struct ol_md5 *x, uint32_t room)
{
    return (room - (OL_MD5_STAGE - x->len) + 63) / 64;
}

/* The SHA-256 companions of lanes g[0..n) take the nb blocks at ptr[l]
 * that their MD5s just took: two at a time (base/sha256.h), the odd one
 * out alone. The vector MD5 kernels leave the upper halves of the vector
 * registers in use, and SHA-NI is legacy SSE: cleared first (base/simd.h). */
static void sha_blocks(struct ol_md5 *const *g, const uint8_t *const *ptr, unsigned n,
                       uint32_t nb)
{
    int pair = -1;
    bool clean = false;
    for (unsigned l = 0; l < n; l++) {
        if (!g[l]->sha)
            continue;
        if (!clean) {
            ol_simd_clean();
            clean = true;
        }
        if (pair < 0) {
            pair = (int)l;
            continue;
        }
        ol_sha256_update2(g[pair]->sha, ptr[pair], (size_t)nb * 64, g[l]->sha, ptr[l],
                          (size_t)nb * 64);
        pair = -1;
    }
    if (pair >= 0)
        ol_sha256_update(g[pair]->sha, ptr[pair], (size_t)nb * 64);
}

/* Lanes g[0..n) hashed nb blocks more into st: their states, counts and
 * rings move on; the group's others (not g[0], the caller's) go back to
 * the pending list or leave it. */
static void ran(struct ol_md5_set *s, struct ol_md5 *const *g, uint32_t (*st)[4], unsigned n,
                uint32_t nb)
{
    s->multi_blocks += (uint64_t)nb * n;
    for (unsigned l = 0; l < n; l++) {
        memcpy(g[l]->h, st[l], sizeof st[l]);
        g[l]->done += (uint64_t)nb * 64;
        consume(g[l], nb);
    }
    for (unsigned l = 1; l < n; l++)
        repend(s, g[l]);
}

/* A lane whose SHA-256 companion md5sha.h's kernel can take (between
 * whole blocks: the set feeds it whole blocks only, from its start). */
static bool x4_sha(const struct ol_md5 *h)
{
    return h->sha && h->sha->num == 0;
}

/*
 * One run of flush's for x and its group g[0..ng) (g[0] == x) through
 * md5sha.h's four-lane kernel, when x and at least one more lane of the
 * group carry SHA-256 companions: those lanes first (up to four), the
 * group's others in the lanes left, every SHA-256 of the companions
 * interleaved with the MD5s. False (nothing done) when the group does
 * not qualify.
 */
static bool flush_x4(struct ol_md5_set *s, struct ol_md5 *x, struct ol_md5 *const *g,
                     unsigned ng, uint32_t room)
{
    if (!x4_sha(x))
        return false;
    struct ol_md5 *q[4];
    unsigned n = 0, ns;
    q[n++] = x;
    for (unsigned l = 1; l < ng && n < 4; l++)
        if (x4_sha(g[l]))
            q[n++] = g[l];
    ns = n;
    if (ns < 2)
        return false;
    for (unsigned l = 1; l < ng && n < 4; l++)
        if (!x4_sha(g[l]))
            q[n++] = g[l];
    uint32_t nb = run_of(x), need = need_of(x, room);
    if (nb > need)
        nb = need;
    uint32_t st[4][4];
    const uint8_t *ptr[4];
    SHA256_CTX *c[4];
    for (unsigned l = 0; l < 4; l++) {
        struct ol_md5 *h = q[l < n ? l : 0];
        if (l < n && run_of(h) < nb)
            nb = run_of(h);
        memcpy(st[l], h->h, sizeof st[l]);
        ptr[l] = h->stage + h->off;
        c[l] = h->sha;
    }
    ol_simd_clean();   /* the MD5 kernels' upper halves, before SHA-NI (base/simd.h) */
    ol_md5sha_x4(st, c, ptr, ns, nb);
    ran(s, q, st, n, nb);
    return true;
}

/*
 * Hashes whole blocks x has staged until it has `room` bytes free (all of
 * them at the end of a stream), together with the (up to 15) lanes with
 * the best claim and the kernel choose() picks for them: each run goes for
 * as many blocks as x needs, or fewer when a lane of the group has fewer in
 * one piece; the lanes that run dry leave and the rest go on. Alone (with
 * `alone`), x hashes only the blocks that make the room: the rest waits for
 * company (uploads arrive in bursts, one connection after the other).
 */
static void flush(struct ol_md5_set *s, struct ol_md5 *x, uint32_t room, bool alone)
{
    struct ol_md5 *g[MD5_MAX_GROUP];
    uint32_t st[MD5_MAX_GROUP][4];
    const uint8_t *ptr[MD5_MAX_GROUP];
    while (blocks(x) && OL_MD5_STAGE - x->len < room) {
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
        if (s->x4 && flush_x4(s, x, g, ng, room))
            continue;
        uint32_t nb = run_of(x), need = need_of(x, room);
        unsigned n = 0;
        const struct md5_kern *k = choose(s, g, ng, need, &n);
        if (!k)   /* only a wider scalar kernel (ol_md5_set_only) */
            break;
        if (nb > need)
            nb = need;
        for (unsigned l = 0; l < n; l++) {
            if (run_of(g[l]) < nb)
                nb = run_of(g[l]);
            memcpy(st[l], g[l]->h, sizeof st[l]);
            ptr[l] = g[l]->stage + g[l]->off;
        }
        run_kernel(k, s->stage, st, ptr, n, nb);
        sha_blocks(g, ptr, n, nb);
        ran(s, g, st, n, nb);
    }
    while (alone && blocks(x) && OL_MD5_STAGE - x->len < room) {
        uint32_t nb = need_of(x, room);
        if (nb > run_of(x))
            nb = run_of(x);
        const uint8_t *at = x->stage + x->off;
        scalar_blocks(x, at, nb);
        sha_blocks(&x, &at, 1, nb);
        consume(x, nb);
        s->single_blocks += nb;
    }
    repend(s, x);
}

/* ---- streams --------------------------------------------------------------------- */

void ol_md5_init(struct ol_md5 *h)
{
    ol_md5_drop(h);
    memcpy(h->h, md5_iv, sizeof h->h);
}

void ol_md5_with_sha256(struct ol_md5 *h, SHA256_CTX *c)
{
    h->sha = c;
}

void ol_md5_update(struct ol_md5 *h, const void *data, size_t n)
{
    const uint8_t *p = data;
    if (!h->set) {   /* a lone stream: whole blocks straight through */
        if (h->sha)
            ol_sha256_update(h->sha, p, n);
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
        if (h->len == OL_MD5_STAGE)
            flush(h->set, h, MD5_ROOM, true);
        uint32_t at = (h->off + h->len) % OL_MD5_STAGE;
        size_t take = OL_MD5_STAGE - h->len;
        if (take > OL_MD5_STAGE - at)
            take = OL_MD5_STAGE - at;   /* up to the ring's end */
        if (take > n)
            take = n;
        memcpy(h->stage + at, p, take);
        h->len += (uint32_t)take;
        p += take;
        n -= take;
    }
    if (blocks(h))
        pend_add(h->set, h);
    if (h->set->nwait && blocks(h))
        flush(h->set, h, OL_MD5_STAGE, false); /* company for the waiting lanes */
}

void ol_md5_take(struct ol_md5 *h, struct ol_md5 *from)
{
    ol_md5_init(h);
    memcpy(h->h, from->h, sizeof h->h);
    h->done = from->done;
    if (h->set) {   /* the partial block staged; < 64 bytes: nothing to pend */
        memcpy(h->stage, from->buf, from->tail);
        h->len = from->tail;
    } else {
        memcpy(h->buf, from->buf, from->tail);
        h->tail = from->tail;
    }
    ol_md5_drop(from);
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
        MD5_Update(&c, h->stage + h->off, h->len);   /* < 64 bytes: no wrap */
        if (h->sha)
            ol_sha256_update(h->sha, h->stage + h->off, h->len);
        h->off = h->len = 0;
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
    h->sha = NULL;
    if (h->set) {
        h->off = h->len = 0;
        pend_del(h->set, h);
    }
    h->ended = false;
}
