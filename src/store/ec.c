/*
 * ec.c - see ec.h. Encoding is one ec_encode_data call over the parity
 * rows' tables. Reconstruction picks the first k present shards as
 * sources, inverts the k x k submatrix of the generator made of their
 * rows (B), and takes for each wanted shard w the row that maps the
 * sources back to it: row w of B^-1 for a data shard, G[w] x B^-1 for a
 * parity shard (G the generator). Those rows, expanded by ec_init_tables,
 * are cached per (sources, want), so a repeated pattern costs one cache
 * scan of OL_EC_CACHE keys and the coding pass.
 *
 * Every coding call ends with ol_simd_clean() (base/simd.h: ISA-L leaves
 * the vector registers dirty).
 */
#include "store/ec.h"

#include "base/assert.h"
#include "base/simd.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#include <isa-l/erasure_code.h>

int ol_ec_init(struct ol_ec *ec, unsigned k, unsigned m)
{
    memset(ec, 0, sizeof *ec);
    if (k == 0 || k > OL_EC_MAX_DATA || m > OL_EC_MAX_PARITY)
        return -EINVAL;
    ec->k = k;
    ec->m = m;
    ec->n = k + m;
    ec->all = ec->n == 32 ? UINT32_MAX : (1u << ec->n) - 1;
    gf_gen_cauchy1_matrix(ec->matrix, (int)ec->n, (int)k);
    if (m)
        ec_init_tables((int)k, (int)m, &ec->matrix[k * k], ec->enc_tbls);
    return 0;
}

size_t ol_ec_shard_len(uint64_t stripe_bytes, unsigned k)
{
    OL_ASSERT(k >= 1 && k <= OL_EC_MAX_DATA);
    uint64_t per = (stripe_bytes + k - 1) / k;
    return (size_t)((per + OL_EC_ALIGN - 1) & ~(uint64_t)(OL_EC_ALIGN - 1));
}

void ol_ec_encode(const struct ol_ec *ec, size_t len, uint8_t *const *data, uint8_t **parity)
{
    OL_ASSERT(len <= INT_MAX);
    if (ec->m == 0 || len == 0)
        return;
    /* ISA-L takes non-const pointers but only reads data and tables. */
    ec_encode_data((int)len, (int)ec->k, (int)ec->m, (unsigned char *)ec->enc_tbls,
                   (unsigned char **)data, parity);
    ol_simd_clean();
}

void ol_ec_encode_ref(const struct ol_ec *ec, size_t len, uint8_t *const *data,
                      uint8_t **parity)
{
    OL_ASSERT(len <= INT_MAX);
    if (ec->m == 0 || len == 0)
        return;
    ec_encode_data_base((int)len, (int)ec->k, (int)ec->m, (unsigned char *)ec->enc_tbls,
                        (unsigned char **)data, parity);
}

/* Builds the decode tables that turn the shards of src into those of want. */
static void ol_ec_dec_build(const struct ol_ec *ec, uint32_t src, uint32_t want,
                            struct ol_ec_dec *d)
{
    const unsigned k = ec->k;
    uint8_t b[OL_EC_MAX_DATA * OL_EC_MAX_DATA], inv[OL_EC_MAX_DATA * OL_EC_MAX_DATA];
    uint8_t rows[OL_EC_MAX_PARITY * OL_EC_MAX_DATA];
    unsigned r = 0;

    for (uint32_t s = src; s; s &= s - 1)
        memcpy(&b[k * r++], &ec->matrix[k * (unsigned)__builtin_ctz(s)], k);
    int rc = gf_invert_matrix(b, inv, (int)k);
    OL_ASSERT(rc == 0); /* Cauchy: any k rows of the generator are independent */
    (void)rc;

    r = 0;
    for (uint32_t s = want; s; s &= s - 1, r++) {
        unsigned w = (unsigned)__builtin_ctz(s);
        if (w < k) {
            memcpy(&rows[k * r], &inv[k * w], k);
            continue;
        }
        for (unsigned j = 0; j < k; j++) {
            uint8_t c = 0;
            for (unsigned l = 0; l < k; l++)
                c ^= gf_mul(ec->matrix[k * w + l], inv[k * l + j]);
            rows[k * r + j] = c;
        }
    }
    ec_init_tables((int)k, (int)r, rows, d->tbls);
    d->nout = r;
}

/* The cached decode tables for (src, want), built into the LRU entry on a miss. */
static const struct ol_ec_dec *ol_ec_dec_get(struct ol_ec *ec, uint32_t src, uint32_t want)
{
    const uint64_t key = src | (uint64_t)want << 32;
    struct ol_ec_dec *victim = &ec->cache[0];

    ec->clock++;
    for (unsigned i = 0; i < OL_EC_CACHE; i++) {
        struct ol_ec_dec *d = &ec->cache[i];
        if (d->key == key) {
            d->used = ec->clock;
            ec->cache_hits++;
            return d;
        }
        if (d->used < victim->used)
            victim = d;
    }
    ec->cache_misses++;
    ol_ec_dec_build(ec, src, want, victim);
    victim->key = key;
    victim->used = ec->clock;
    return victim;
}

int ol_ec_reconstruct(struct ol_ec *ec, size_t len, uint8_t **shards, uint32_t present,
                      uint32_t want)
{
    const unsigned k = ec->k;

    if ((present & ~ec->all) || (want & ~ec->all) || (present & want))
        return -EINVAL;
    if ((unsigned)__builtin_popcount(present) < k)
        return -ENODATA;
    if (want == 0)
        return 0;
    OL_ASSERT(len <= INT_MAX);

    uint8_t *in[OL_EC_MAX_DATA], *out[OL_EC_MAX_PARITY];
    uint32_t src = 0, s = present;
    for (unsigned i = 0; i < k; i++, s &= s - 1) {
        unsigned idx = (unsigned)__builtin_ctz(s);
        src |= 1u << idx;
        in[i] = shards[idx];
    }
    unsigned nout = 0;
    for (uint32_t w = want; w; w &= w - 1)
        out[nout++] = shards[__builtin_ctz(w)];

    const struct ol_ec_dec *d = ol_ec_dec_get(ec, src, want);
    OL_ASSERT(d->nout == nout);
    if (len) {
        ec_encode_data((int)len, (int)k, (int)nout, (unsigned char *)d->tbls, in, out);
        ol_simd_clean();
    }
    return 0;
}
