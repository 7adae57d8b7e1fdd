/*
 * shard_bench.c - keys/s of the KV lifecycle on one shard (one core), in
 * batches of 32 keys as a vLLM worker sends them: Lookup of present keys,
 * and Reserve+Commit of new keys on a full shard (every insert evicts).
 * The slab is 2 GiB of 16 KiB values (131072 entries, so the index and
 * entry table do not fit in cache): metadata only, no
 * value bytes are copied (that is the data-path benchmark's job).
 *
 *   shard_bench [seconds]   -> one JSON object on stdout
 */
#include "kv/shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct ol_kv_hash K(uint64_t i) { return (struct ol_kv_hash){i * 0x9E3779B97F4A7C15ull + 7, i ^ 0xabcdef}; }

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 2.0;
    char err[256];
    struct ol_kv_slab slab;
    struct ol_kv_shard sh;
    if (ol_kv_slab_create(&slab, 2048u << 20, 0, err, sizeof err) < 0 ||
        ol_kv_shard_init(&sh, &slab, 0, slab.npages, OL_EVICT_DEFAULT, 30000) < 0) {
        fprintf(stderr, "setup: %s\n", err);
        return 1;
    }
    int sid = ol_kv_shard_session_open(&sh);
    const uint64_t vsize = 16 << 10, live = 131072;
    uint64_t next = 0;
    struct ol_kv_loc loc[32];
    /* fill */
    while (next < live) {
        ol_kv_shard_reserve(&sh, sid, 1, K(next), "k", 1, vsize, (uint32_t)(next % 32), 0, &loc[0]);
        ol_kv_shard_commit(&sh, sid, loc[0].slot, loc[0].gen, vsize, 0);
        next++;
    }
    /* Lookup: 32 present keys per batch */
    struct ol_kv_hash hs[32];
    uint8_t pres[32];
    uint64_t looked = 0, run = 0, seed = 1;
    double t0 = now(), t1;
    do {
        for (int r = 0; r < 2000; r++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            uint64_t base = next - live + (seed >> 33) % (live - 32);
            for (int i = 0; i < 32; i++)
                hs[i] = K(base + (uint64_t)i);
            run += ol_kv_shard_lookup(&sh, 1, hs, 32, pres);
            looked += 32;
        }
        t1 = now();
    } while (t1 - t0 < secs);
    double lookup_rate = (double)looked / (t1 - t0);
    /* Reserve + Commit of 32 new keys per batch; the shard is full, so each
     * reserve evicts one entry first. */
    uint64_t committed = 0;
    t0 = now();
    do {
        for (int r = 0; r < 200; r++) {
            for (int i = 0; i < 32; i++)
                ol_kv_shard_reserve(&sh, sid, 1, K(next + (uint64_t)i), "k", 1, vsize, (uint32_t)i, 0, &loc[i]);
            for (int i = 0; i < 32; i++)
                ol_kv_shard_commit(&sh, sid, loc[i].slot, loc[i].gen, vsize, 0);
            next += 32;
            committed += 32;
        }
        t1 = now();
    } while (t1 - t0 < secs);
    double commit_rate = (double)committed / (t1 - t0);
    struct ol_kv_shard_stats st;
    ol_kv_shard_stats(&sh, &st);
    printf("{\"lookup_keys_per_s\":%.0f,\"reserve_commit_keys_per_s\":%.0f,"
           "\"evictions\":%llu,\"hit_keys\":%llu}\n", lookup_rate, commit_rate,
           (unsigned long long)st.evictions, (unsigned long long)run);
    ol_kv_shard_exit(&sh);
    ol_kv_slab_destroy(&slab);
    return 0;
}
