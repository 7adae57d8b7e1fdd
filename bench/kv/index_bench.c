/*
 * index_bench.c - keys/s of the shard index on one core: batched Lookup
 * (find_batch over 32-key batches) and Commit-like insert + remove churn,
 * on an index of N entries (default 4M, about a 16 GiB slab of 4 KiB slots).
 *
 *   index_bench [entries] [seconds]   -> one JSON object on stdout
 */
#include "kv/index.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

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

int main(int argc, char **argv)
{
    uint32_t n = argc > 1 ? (uint32_t)atol(argv[1]) : 4u << 20;
    double secs = argc > 2 ? atof(argv[2]) : 2.0;
    struct ol_kv_index ix;
    if (ol_kv_index_init(&ix, n) < 0)
        return 1;
    struct ol_kv_hash *keys = malloc(sizeof *keys * n);
    for (uint32_t i = 0; i < n; i++) {
        keys[i] = (struct ol_kv_hash){rnd(), rnd()};
        ol_kv_index_insert(&ix, keys[i], i);
    }
    /* Lookup: batches of 32 random present keys */
    struct ol_kv_hash batch[32];
    int64_t ids[32];
    uint64_t looked = 0, sink = 0;
    double t0 = now(), t1;
    do {
        for (int r = 0; r < 1000; r++) {
            for (int i = 0; i < 32; i++)
                batch[i] = keys[rnd() % n];
            ol_kv_index_find_batch(&ix, batch, 32, ids);
            sink += (uint64_t)ids[7];
            looked += 32;
        }
        t1 = now();
    } while (t1 - t0 < secs);
    double lookup_rate = (double)looked / (t1 - t0);
    /* Commit churn: remove one key, insert a new one under the same id */
    uint64_t churned = 0;
    t0 = now();
    do {
        for (int r = 0; r < 32000; r++) {
            uint32_t id = (uint32_t)(rnd() % n);
            ol_kv_index_remove(&ix, keys[id]);
            keys[id] = (struct ol_kv_hash){rnd(), rnd()};
            ol_kv_index_insert(&ix, keys[id], id);
            churned++;
        }
        t1 = now();
    } while (t1 - t0 < secs);
    double churn_rate = (double)churned / (t1 - t0);
    printf("{\"entries\":%u,\"lookup_keys_per_s\":%.0f,\"insert_remove_pairs_per_s\":%.0f,\"sink\":%llu}\n",
           n, lookup_rate, churn_rate, (unsigned long long)(sink & 1));
    ol_kv_index_exit(&ix);
    free(keys);
    return 0;
}
