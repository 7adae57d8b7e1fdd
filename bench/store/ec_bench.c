/*
 * ec_bench.c - erasure coding and shard checksums of the object store on
 * one core, each next to its ceiling, for 1 MiB stripes:
 *
 *   encode       ol_ec_encode vs raw ISA-L ec_encode_data over the same
 *                precomputed parity tables;
 *   reconstruct  1 lost data shard, and m lost data shards:
 *                ol_ec_reconstruct (mask checks, source pick, decode-table
 *                cache) vs raw ISA-L ec_encode_data over decode tables the
 *                bench builds once;
 *   bitrot       ol_bitrot_seal + ol_bitrot_verify of every shard of the
 *                stripe (one block per shard) vs two raw XXH3-64 passes;
 *   miss         ol_ec_reconstruct cost when every call misses the cache
 *                (9 patterns in turn, one more than the cache holds), len 0,
 *                so only the decode-table build is timed.
 *
 * Rates are GB/s (1e9 bytes/s) of stripe data bytes (k x shard length) per
 * second: data in for encode, sources read for reconstruct; for bitrot,
 * shard bytes (k+m x shard length), each hashed twice. Ours and the ceiling
 * run alternately (A B A B, each a quarter of the time) after a warm-up.
 * Buffers are reused, so they stay in cache. After each timed reconstruct
 * the rebuilt shards are compared with the originals.
 *
 *   ec_bench [seconds per measurement]   -> one JSON object on stdout
 */
#include "store/bitrot.h"
#include "store/ec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <isa-l/erasure_code.h>
#include <xxhash.h>

#define STRIPE (1u << 20)

static uint64_t s_rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    s_rng ^= s_rng << 13;
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return s_rng;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The stripe under test and everything the operations need. */
struct ctx {
    struct ol_ec *ec;
    unsigned k, m, n;
    size_t len;
    uint8_t *orig[OL_EC_MAX_SHARDS], *work[OL_EC_MAX_SHARDS];
    uint8_t hdr[OL_EC_MAX_SHARDS][8];
    uint32_t lost;                              /* lost data shards */
    uint8_t *src[OL_EC_MAX_DATA], *dst[OL_EC_MAX_PARITY];
    unsigned nsrc, ndst;
    uint8_t dtbls[32 * OL_EC_MAX_DATA * OL_EC_MAX_PARITY];
    uint32_t miss_pats[OL_EC_CACHE + 1];
    unsigned miss_i;
    uint64_t sink;
};

typedef void (*op_fn)(struct ctx *c);

static void op_encode_ours(struct ctx *c) { ol_ec_encode(c->ec, c->len, c->work, c->work + c->k); }
static void op_encode_raw(struct ctx *c)
{
    ec_encode_data((int)c->len, (int)c->k, (int)c->m, c->ec->enc_tbls, c->work, c->work + c->k);
}
static void op_rec_ours(struct ctx *c)
{
    ol_ec_reconstruct(c->ec, c->len, c->work, c->ec->all & ~c->lost, c->lost);
}
static void op_rec_raw(struct ctx *c)
{
    ec_encode_data((int)c->len, (int)c->k, (int)c->ndst, c->dtbls, c->src, c->dst);
}
static void op_bitrot_ours(struct ctx *c)
{
    for (unsigned i = 0; i < c->n; i++)
        ol_bitrot_seal(7, i, c->work[i], c->len, c->hdr[i]);
    for (unsigned i = 0; i < c->n; i++)
        c->sink += (uint64_t)ol_bitrot_verify(7, i, c->hdr[i], c->work[i], c->len);
}
static void op_bitrot_raw(struct ctx *c)
{
    for (unsigned r = 0; r < 2; r++)
        for (unsigned i = 0; i < c->n; i++)
            c->sink += XXH3_64bits_withSeed(c->work[i], c->len, i);
}
static void op_miss(struct ctx *c)
{
    uint32_t p = c->miss_pats[c->miss_i++ % (OL_EC_CACHE + 1)];
    ol_ec_reconstruct(c->ec, 0, c->work, c->ec->all & ~p, p);
}

/* Calls per second of f over about secs seconds. */
static double rate(struct ctx *c, op_fn f, double secs)
{
    uint64_t calls = 0;
    double t0 = now(), t1;
    do {
        for (int i = 0; i < 8; i++)
            f(c);
        calls += 8;
        t1 = now();
    } while (t1 - t0 < secs);
    return (double)calls / (t1 - t0);
}

/* Ours and the ceiling alternately, A B A B; calls/s of each. */
static void pair(struct ctx *c, op_fn a, op_fn b, double secs, double *ra, double *rb)
{
    a(c), b(c); /* warm-up */
    double a1 = rate(c, a, secs / 4), b1 = rate(c, b, secs / 4);
    double a2 = rate(c, a, secs / 4), b2 = rate(c, b, secs / 4);
    *ra = (a1 + a2) / 2;
    *rb = (b1 + b2) / 2;
}

/* Loses the data shards of lost in work[] and sets up the raw decode. */
static void set_lost(struct ctx *c, uint32_t lost)
{
    uint8_t b[OL_EC_MAX_DATA * OL_EC_MAX_DATA], inv[OL_EC_MAX_DATA * OL_EC_MAX_DATA];
    uint8_t rows[OL_EC_MAX_PARITY * OL_EC_MAX_DATA];
    c->lost = lost;
    c->nsrc = c->ndst = 0;
    for (unsigned i = 0; i < c->n && c->nsrc < c->k; i++) {
        if (lost >> i & 1)
            continue;
        memcpy(&b[c->k * c->nsrc], &c->ec->matrix[c->k * i], c->k);
        c->src[c->nsrc++] = c->work[i];
    }
    if (gf_invert_matrix(b, inv, (int)c->k) != 0) {
        fprintf(stderr, "ec_bench: singular matrix\n");
        exit(1);
    }
    for (unsigned i = 0; i < c->k; i++)
        if (lost >> i & 1) {
            memcpy(&rows[c->k * c->ndst], &inv[c->k * i], c->k);
            c->dst[c->ndst++] = c->work[i];
        }
    ec_init_tables((int)c->k, (int)c->ndst, rows, c->dtbls);
}

/* The lost shards of work[] equal the originals again (and are reset). */
static void check_rebuilt(struct ctx *c, const char *what)
{
    for (unsigned i = 0; i < c->n; i++)
        if (memcmp(c->work[i], c->orig[i], c->len) != 0) {
            fprintf(stderr, "ec_bench: k=%u m=%u %s: shard %u wrong\n", c->k, c->m, what, i);
            exit(1);
        }
    for (uint32_t b = c->lost; b; b &= b - 1)
        memset(c->work[__builtin_ctz(b)], 0, c->len);
}

static void bench_geometry(unsigned k, unsigned m, double secs, int first)
{
    struct ctx *c = calloc(1, sizeof *c);
    c->ec = malloc(sizeof *c->ec);
    if (!c || !c->ec || ol_ec_init(c->ec, k, m) != 0) {
        fprintf(stderr, "ec_bench: init %u+%u failed\n", k, m);
        exit(1);
    }
    c->k = k, c->m = m, c->n = k + m;
    c->len = ol_ec_shard_len(STRIPE, k);
    for (unsigned i = 0; i < c->n; i++) {
        c->orig[i] = aligned_alloc(64, c->len);
        c->work[i] = aligned_alloc(64, c->len);
    }
    for (unsigned i = 0; i < k; i++)
        for (size_t j = 0; j < c->len; j++)
            c->orig[i][j] = (uint8_t)rnd();
    ol_ec_encode(c->ec, c->len, c->orig, c->orig + k);
    for (unsigned i = 0; i < c->n; i++)
        memcpy(c->work[i], c->orig[i], c->len);

    const double data = (double)k * (double)c->len, all = (double)c->n * (double)c->len;
    double enc, enc_raw, r1, r1_raw, rm, rm_raw, br, br_raw;
    pair(c, op_encode_ours, op_encode_raw, secs, &enc, &enc_raw);
    check_rebuilt(c, "encode");

    set_lost(c, 1u << 0);
    pair(c, op_rec_ours, op_rec_raw, secs, &r1, &r1_raw);
    check_rebuilt(c, "reconstruct 1");
    op_rec_ours(c);
    check_rebuilt(c, "reconstruct 1");

    set_lost(c, (1u << m) - 1);
    pair(c, op_rec_ours, op_rec_raw, secs, &rm, &rm_raw);
    check_rebuilt(c, "reconstruct m");
    op_rec_ours(c);
    check_rebuilt(c, "reconstruct m");
    for (unsigned i = 0; i < c->n; i++)
        memcpy(c->work[i], c->orig[i], c->len);

    /* the raw ISA-L ops above leave the upper vector state dirty (ours
     * clear it): clear it too, or both bitrot sides run ~4x slower */
    op_encode_ours(c);
    pair(c, op_bitrot_ours, op_bitrot_raw, secs, &br, &br_raw);

    /* 9 patterns of 1..m lost shards: a cycle one longer than the cache */
    for (unsigned i = 0; i < OL_EC_CACHE + 1; i++)
        c->miss_pats[i] = i < c->n ? 1u << i : (1u << (i - c->n)) | (1u << (c->n - 1));
    ol_ec_init(c->ec, k, m); /* empty cache */
    double miss = rate(c, op_miss, secs / 2);
    if (c->ec->cache_hits != 0 || c->ec->cache_misses == 0) {
        fprintf(stderr, "ec_bench: the miss loop hit the cache\n");
        exit(1);
    }

    printf("%s{\"k\":%u,\"m\":%u,\"shard_len\":%zu,\"stripe_data_bytes\":%.0f,"
           "\"encode_gbps\":%.3f,\"encode_raw_gbps\":%.3f,"
           "\"rec1_gbps\":%.3f,\"rec1_raw_gbps\":%.3f,"
           "\"recm_gbps\":%.3f,\"recm_raw_gbps\":%.3f,"
           "\"bitrot_gbps\":%.3f,\"bitrot_raw_gbps\":%.3f,"
           "\"decode_build_us\":%.2f,\"sink\":%llu}",
           first ? "" : ",", k, m, c->len, data, enc * data / 1e9, enc_raw * data / 1e9,
           r1 * data / 1e9, r1_raw * data / 1e9, rm * data / 1e9, rm_raw * data / 1e9,
           br * all / 1e9, br_raw * all / 1e9, 1e6 / miss, (unsigned long long)c->sink);
    for (unsigned i = 0; i < c->n; i++) {
        free(c->orig[i]);
        free(c->work[i]);
    }
    free(c->ec);
    free(c);
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 0.4;
    static const unsigned geo[][2] = {{4, 2}, {8, 4}, {12, 4}};
    printf("{\"stripe_bytes\":%u,\"configs\":[", STRIPE);
    for (unsigned i = 0; i < sizeof geo / sizeof geo[0]; i++)
        bench_geometry(geo[i][0], geo[i][1], secs, i == 0);
    printf("]}\n");
    return 0;
}
