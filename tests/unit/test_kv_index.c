/*
 * test_kv_index.c - the shard key index: differential test against a plain
 * model under random churn, batch == single, limits.
 */
#include "olt.h"

#include "kv/index.h"

#include <errno.h>
#include <stdlib.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

OLT_TEST(kv_index_insert_find_remove_basics)
{
    struct ol_kv_index ix;
    OLT_CHECK_EQ(ol_kv_index_init(&ix, 4), 0);
    struct ol_kv_hash a = {1, 2}, b = {1, 3}, z = {0, 9};
    OLT_CHECK_EQ(ol_kv_index_find(&ix, a), -1);
    OLT_CHECK_EQ(ol_kv_index_insert(&ix, a, 0), 0);
    OLT_CHECK_EQ(ol_kv_index_insert(&ix, a, 1), -EEXIST);
    /* same low half, different high half: a different key */
    OLT_CHECK_EQ(ol_kv_index_insert(&ix, b, 1), 0);
    OLT_CHECK_EQ(ol_kv_index_insert(&ix, z, 2), 0); /* lo == 0 is a valid hash */
    OLT_CHECK_EQ(ol_kv_index_find(&ix, a), 0);
    OLT_CHECK_EQ(ol_kv_index_find(&ix, b), 1);
    OLT_CHECK_EQ(ol_kv_index_find(&ix, z), 2);
    OLT_CHECK_EQ(ol_kv_index_insert(&ix, (struct ol_kv_hash){5, 5}, 3), 0);
    OLT_CHECK_EQ(ol_kv_index_insert(&ix, (struct ol_kv_hash){6, 6}, 3), -ENOSPC);
    OLT_CHECK_EQ(ol_kv_index_remove(&ix, a), 0);
    OLT_CHECK_EQ(ol_kv_index_remove(&ix, a), -1);
    OLT_CHECK_EQ(ol_kv_index_find(&ix, b), 1);
    OLT_CHECK_EQ(ol_kv_index_count(&ix), 3);
    OLT_CHECK_EQ(ol_kv_index_init(&ix, 0), -EINVAL);
    ol_kv_index_exit(&ix);
}

OLT_TEST(kv_index_matches_model_under_churn)
{
    enum { N = 20000, OPS = 400000 };
    struct ol_kv_index ix;
    OLT_CHECK_EQ(ol_kv_index_init(&ix, N), 0);
    /* Model: id -> key (or absent). Keys clustered in few home cells on
     * purpose (small lo range) to make long runs and many back-shifts. */
    struct ol_kv_hash *key = calloc(N, sizeof *key);
    char *live = calloc(N, 1);
    uint32_t nlive = 0;
    for (int op = 0; op < OPS; op++) {
        uint32_t id = (uint32_t)(rnd() % N);
        if (!live[id]) {
            struct ol_kv_hash h = {rnd() % 4096 * (ix.mask + 1) / 4096 + (rnd() & 7), rnd()};
            int rc = ol_kv_index_insert(&ix, h, id);
            if (rc == -EEXIST)
                continue; /* collided with a live key: the model skips it too */
            OLT_CHECK_EQ(rc, 0);
            key[id] = h;
            live[id] = 1;
            nlive++;
        } else if (rnd() & 1) {
            OLT_CHECK_EQ(ol_kv_index_remove(&ix, key[id]), id);
            live[id] = 0;
            nlive--;
        } else {
            OLT_CHECK_EQ(ol_kv_index_find(&ix, key[id]), id);
        }
        if (op % 50000 == 0) {
            OLT_CHECK_EQ(ol_kv_index_count(&ix), nlive);
            for (uint32_t i = 0; i < N; i++)
                if (live[i]) {
                    OLT_CHECK_EQ(ol_kv_index_find(&ix, key[i]), i);
                    OLT_CHECK_EQ(ol_kv_index_find_ref(&ix, key[i]), i);
                }
        }
    }
    /* batch == single, with absent keys mixed in */
    struct ol_kv_hash hs[1000];
    int64_t got[1000];
    for (int i = 0; i < 1000; i++) {
        uint32_t id = (uint32_t)(rnd() % N);
        hs[i] = (i % 3 == 0) ? (struct ol_kv_hash){rnd(), rnd()} : key[id];
    }
    ol_kv_index_find_batch(&ix, hs, 1000, got);
    for (int i = 0; i < 1000; i++)
        OLT_CHECK_EQ(got[i], ol_kv_index_find_ref(&ix, hs[i]));
    free(key);
    free(live);
    ol_kv_index_exit(&ix);
}
