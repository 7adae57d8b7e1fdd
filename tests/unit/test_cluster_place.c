/*
 * test_cluster_place.c - cluster/place.h: KV block placement by weighted
 * rendezvous hashing.
 *
 * Fixed vectors (the logarithm, one member's d, and key -> homes for real
 * keys hashed as clients hash them), so a change of the rule fails here
 * before it splits clients from nodes; the rule recomputed from its text in
 * place.h (spec_d) and the tie to the lower id; balance over equal members,
 * proportion to weight, scale invariance; minimal movement when a member
 * goes or comes; replicas distinct and nested; the builder's refusals; and
 * ol_place_homes against its reference twin on random snapshots.
 */
#include "olt.h"

#include "cluster/member.h"
#include "cluster/place.h"
#include "kv/proto.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#define NKEYS 100000

/* ---- helpers ----------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Key i of namespace "place-test", hashed as a client hashes it. */
static struct ol_kv_hash key_hash(int i)
{
    static uint64_t seed;
    if (!seed)
        seed = ol_kv_ns_seed("place-test", 10);
    char k[32];
    int n = snprintf(k, sizeof k, "block-%d", i);
    return ol_kv_key_hash(seed, k, (size_t)n);
}

static struct ol_place *make(const struct ol_place_member *m, int n)
{
    struct ol_place *p = NULL;
    OLT_CHECK_EQ(ol_place_create(m, n, 7, &p), 0);
    OLT_CHECK(p != NULL);
    return p;
}

static int64_t home1(const struct ol_place *p, struct ol_kv_hash h)
{
    int64_t id;
    OLT_CHECK_EQ(ol_place_homes(p, h, 1, &id), 1);
    return id;
}

/* The rule's d for (h.lo, id), written from place.h's text. */
static uint64_t spec_mix(uint64_t z)
{
    z ^= z >> 30;
    z *= 0xBF58476D1CE4E5B9ull;
    z ^= z >> 27;
    z *= 0x94D049BB133111EBull;
    z ^= z >> 31;
    return z;
}

static uint64_t spec_d(uint64_t lo, int64_t id)
{
    uint64_t x = spec_mix(lo ^ spec_mix((uint64_t)id + 0x9E3779B97F4A7C15ull));
    return 64ull * 4294967296ull - ol_place_log2_q32(x);
}

/* Counts of first homes over NKEYS keys; ids are 0..n-1 (index = id). */
static void count_homes(const struct ol_place *p, long *cnt, int n)
{
    memset(cnt, 0, (size_t)n * sizeof *cnt);
    for (int i = 0; i < NKEYS; i++) {
        int64_t id = home1(p, key_hash(i));
        OLT_CHECK(id >= 0 && id < n);
        cnt[id]++;
    }
}

/* ---- the rule, fixed --------------------------------------------------- */

OLT_TEST(cluster_place_log2)
{
    OLT_CHECK_EQ(ol_place_log2_q32(0), 0);
    OLT_CHECK_EQ(ol_place_log2_q32(1), 0);
    for (int k = 0; k < 64; k++)
        OLT_CHECK_EQ(ol_place_log2_q32(1ull << k), (uint64_t)k << 32);
    OLT_CHECK_EQ(ol_place_log2_q32(UINT64_MAX), (64ull << 32) - 1);
    /* Fixed values: the algorithm itself, truncations included. */
    OLT_CHECK_EQ(ol_place_log2_q32(3), 6807362105ull);
    OLT_CHECK_EQ(ol_place_log2_q32(10), 14267572527ull);
    OLT_CHECK_EQ(ol_place_log2_q32(0xDEADBEEFCAFEF00Dull), 274013844226ull);
    /* Close to the true logarithm: never above, at most a few units below. */
    uint64_t s = 1;
    for (int i = 0; i < 100000; i++) {
        uint64_t x = rng_next(&s) >> (rng_next(&s) % 64);
        if (x == 0)
            continue;
        long double want = log2l((long double)x) * 4294967296.0L;
        long double got = (long double)ol_place_log2_q32(x);
        OLT_CHECK(got <= want + 1e-3L && got >= want - 64);
    }
}

OLT_TEST(cluster_place_fixed_vectors)
{
    /* One member's d, from the text of the rule. */
    OLT_CHECK_EQ(spec_d(0, 0), 7848857897ull);
    OLT_CHECK_EQ(spec_d(0x0123456789ABCDEFull, 42), 5848607936ull);
    OLT_CHECK_EQ(spec_d(UINT64_MAX, -1), 8006814773ull);

    /* Key -> homes, the keys hashed as clients hash them (XXH3-128 of
     * "block-<i>" with the seed XXH3-64("place-test")). The same lists come
     * from a separate Python implementation of docs/cluster.md's rule
     * (python-xxhash and plain integers). */
    static const struct ol_place_member m[] = {
        {1, 1ull << 40}, {2, 1ull << 40}, {3, 2ull << 40}, {5, 3ull << 39}, {9, 1ull << 38},
    };
    struct ol_place *p = make(m, 5);
    static const struct { int key; int64_t homes[3]; } vec[] = {
        {0, {3, 2, 1}}, {1, {9, 1, 3}}, {2, {5, 2, 1}}, {3, {2, 3, 1}},
        {4, {5, 3, 2}}, {5, {5, 3, 1}}, {6, {2, 3, 1}}, {7, {9, 1, 3}},
        {8, {5, 1, 3}}, {9, {9, 1, 5}}, {10, {1, 3, 2}}, {11, {1, 2, 5}},
    };
    for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++) {
        int64_t got[3];
        OLT_CHECK_EQ(ol_place_homes(p, key_hash(vec[i].key), 3, got), 3);
        for (int j = 0; j < 3; j++)
            OLT_CHECK_EQ(got[j], vec[i].homes[j]);
    }
    ol_place_destroy(p);
}

/* The order is w / d, compared exactly, ties to the lower id: weights made
 * equal to each member's d for one key give every member score 1. */
OLT_TEST(cluster_place_rule_and_ties)
{
    uint64_t s = 3;
    for (int t = 0; t < 200; t++) {
        struct ol_kv_hash h = {rng_next(&s), rng_next(&s)};
        struct ol_place_member m[6];
        for (int i = 0; i < 6; i++) {
            m[i].id = (int64_t)(rng_next(&s) % 1000) * 6 + i;   /* distinct */
            m[i].weight = 1 + rng_next(&s) % (1ull << 50);
        }
        /* The best by the rule, computed here from the text. */
        int best = 0;
        for (int i = 1; i < 6; i++) {
            unsigned __int128 a = (unsigned __int128)m[i].weight * spec_d(h.lo, m[best].id);
            unsigned __int128 b = (unsigned __int128)m[best].weight * spec_d(h.lo, m[i].id);
            if (a > b || (a == b && m[i].id < m[best].id))
                best = i;
        }
        struct ol_place *p = make(m, 6);
        OLT_CHECK_EQ(home1(p, h), m[best].id);
        ol_place_destroy(p);

        /* All tied: id order. */
        for (int i = 0; i < 6; i++)
            m[i].weight = spec_d(h.lo, m[i].id) * (uint64_t)(t + 1);
        p = make(m, 6);
        int64_t got[6];
        OLT_CHECK_EQ(ol_place_homes(p, h, 6, got), 6);
        for (int i = 0; i < 6; i++)
            OLT_CHECK_EQ(got[i], ol_place_member_at(p, i).id);
        OLT_CHECK_EQ(ol_place_homes_ref(p, h, 6, got), 6);
        for (int i = 0; i < 6; i++)
            OLT_CHECK_EQ(got[i], ol_place_member_at(p, i).id);
        ol_place_destroy(p);
    }
}

/* ---- distribution ------------------------------------------------------ */

OLT_TEST(cluster_place_balance)
{
    struct ol_place_member m[8];
    for (int i = 0; i < 8; i++)
        m[i] = (struct ol_place_member){i, 64ull << 30};
    struct ol_place *p = make(m, 8);
    long cnt[8];
    count_homes(p, cnt, 8);
    for (int i = 0; i < 8; i++)
        OLT_CHECK(cnt[i] >= NKEYS / 8 * 95 / 100 && cnt[i] <= NKEYS / 8 * 105 / 100);
    ol_place_destroy(p);
}

OLT_TEST(cluster_place_weights)
{
    /* 2:1:2:1 (TiB): shares 2/6 and 1/6, each within 5%. */
    struct ol_place_member m[4];
    for (int i = 0; i < 4; i++)
        m[i] = (struct ol_place_member){i, (i % 2 ? 1ull : 2ull) << 40};
    struct ol_place *p = make(m, 4);
    long cnt[4];
    count_homes(p, cnt, 4);
    for (int i = 0; i < 4; i++) {
        double want = NKEYS * (i % 2 ? 1.0 : 2.0) / 6;
        OLT_CHECK(cnt[i] >= want * 0.95 && cnt[i] <= want * 1.05);
    }
    ol_place_destroy(p);

    /* Very different capacities: 1 GiB beside 1 EiB and 2 EiB. The small
     * one gets about 1/(3 * 2^30) of the keys (none here); the big ones 1:2. */
    struct ol_place_member big[3] = {{0, 1ull << 30}, {1, 1ull << 60}, {2, 2ull << 60}};
    p = make(big, 3);
    count_homes(p, cnt, 3);
    OLT_CHECK_EQ(cnt[0], 0);
    OLT_CHECK(cnt[2] >= cnt[1] * 2 * 0.95 && cnt[2] <= cnt[1] * 2 * 1.05);
    ol_place_destroy(p);

    /* Only ratios matter: every weight times 2^20 gives the same homes. */
    struct ol_place_member a[5], b[5];
    uint64_t s = 11;
    for (int i = 0; i < 5; i++) {
        a[i] = (struct ol_place_member){100 + i, 1 + rng_next(&s) % (1ull << 40)};
        b[i] = (struct ol_place_member){100 + i, a[i].weight << 20};
    }
    struct ol_place *pa = make(a, 5), *pb = make(b, 5);
    for (int i = 0; i < 20000; i++) {
        int64_t x[3], y[3];
        struct ol_kv_hash h = key_hash(i);
        OLT_CHECK_EQ(ol_place_homes(pa, h, 3, x), 3);
        OLT_CHECK_EQ(ol_place_homes(pb, h, 3, y), 3);
        OLT_CHECK_MEM(x, y, sizeof x);
    }
    ol_place_destroy(pa);
    ol_place_destroy(pb);
}

/* ---- movement ---------------------------------------------------------- */

OLT_TEST(cluster_place_minimal_movement)
{
    struct ol_place_member m[9];
    for (int i = 0; i < 9; i++)
        m[i] = (struct ol_place_member){i, 1ull << 40};
    struct ol_place *p8 = make(m, 8), *p9 = make(m, 9);
    /* The same without member 3. */
    struct ol_place_member less[7];
    for (int i = 0, k = 0; i < 8; i++)
        if (i != 3)
            less[k++] = m[i];
    struct ol_place *p7 = make(less, 7);

    long moved_in = 0;
    for (int i = 0; i < NKEYS; i++) {
        struct ol_kv_hash h = key_hash(i);
        int64_t h8[4], h7[3], h9[3];
        OLT_CHECK_EQ(ol_place_homes(p8, h, 4, h8), 4);
        OLT_CHECK_EQ(ol_place_homes(p7, h, 3, h7), 3);
        OLT_CHECK_EQ(ol_place_homes(p9, h, 3, h9), 3);
        /* Removing 3: the lists are the old ones without 3. */
        for (int j = 0, k = 0; j < 3; j++, k++) {
            if (h8[k] == 3)
                k++;
            OLT_CHECK_EQ(h7[j], h8[k]);
        }
        /* Adding 8: a key's first home moves only onto 8; the lists are the
         * old ones with 8 put in somewhere. */
        if (h9[0] != h8[0]) {
            OLT_CHECK_EQ(h9[0], 8);
            moved_in++;
        }
        for (int j = 0, k = 0; j < 3; j++) {
            if (h9[j] == 8)
                continue;
            OLT_CHECK_EQ(h9[j], h8[k]);
            k++;
        }
    }
    /* About 1/9 of the keys moved, within 5%. */
    OLT_CHECK(moved_in >= NKEYS / 9 * 95 / 100 && moved_in <= NKEYS / 9 * 105 / 100);
    ol_place_destroy(p7);
    ol_place_destroy(p8);
    ol_place_destroy(p9);
}

/* ---- replicas and edges ------------------------------------------------ */

OLT_TEST(cluster_place_replicas)
{
    struct ol_place_member m[10];
    for (int i = 0; i < 10; i++)
        m[i] = (struct ol_place_member){1000 - 7 * i, (uint64_t)(i + 1) << 35};
    struct ol_place *p = make(m, 10);
    for (int i = 0; i < 5000; i++) {
        struct ol_kv_hash h = key_hash(i);
        int64_t all[OL_PLACE_MAX_REPLICAS];
        OLT_CHECK_EQ(ol_place_homes(p, h, OL_PLACE_MAX_REPLICAS, all), 10);  /* r > n: n */
        for (int a = 0; a < 10; a++)
            for (int b = a + 1; b < 10; b++)
                OLT_CHECK(all[a] != all[b]);
        for (int r = 1; r <= 10; r++) {
            int64_t got[10];
            OLT_CHECK_EQ(ol_place_homes(p, h, r, got), r);
            OLT_CHECK_MEM(got, all, (size_t)r * sizeof got[0]);   /* nested; [0] = r 1's */
        }
    }
    int64_t x[1];
    OLT_CHECK_EQ(ol_place_homes(p, key_hash(0), 0, x), -EINVAL);
    OLT_CHECK_EQ(ol_place_homes(p, key_hash(0), -1, x), -EINVAL);
    OLT_CHECK_EQ(ol_place_homes(p, key_hash(0), OL_PLACE_MAX_REPLICAS + 1, x), -EINVAL);
    OLT_CHECK_EQ(ol_place_homes_ref(p, key_hash(0), 0, x), -EINVAL);
    ol_place_destroy(p);
}

OLT_TEST(cluster_place_edges)
{
    struct ol_place *p = NULL, *q = (struct ol_place *)&p;   /* q: "untouched" marker */
    int64_t out[4];
    OLT_CHECK_EQ(ol_place_create(NULL, 0, 5, &p), 0);                  /* empty */
    OLT_CHECK_EQ(ol_place_count(p), 0);
    OLT_CHECK_EQ(ol_place_revision(p), 5);
    OLT_CHECK_EQ(ol_place_homes(p, key_hash(1), 3, out), 0);
    OLT_CHECK_EQ(ol_place_homes_ref(p, key_hash(1), 3, out), 0);
    ol_place_destroy(p);
    ol_place_destroy(NULL);

    struct ol_place_member dup[3] = {{4, 1}, {2, 1}, {4, 2}};
    struct ol_place_member zero[2] = {{1, 1}, {2, 0}};
    p = q;
    OLT_CHECK_EQ(ol_place_create(dup, 3, 1, &p), -EINVAL);
    OLT_CHECK_EQ(ol_place_create(zero, 2, 1, &p), -EINVAL);
    OLT_CHECK_EQ(ol_place_create(dup, -1, 1, &p), -EINVAL);
    OLT_CHECK_EQ(ol_place_create(NULL, 1, 1, &p), -EINVAL);
    OLT_CHECK(p == q);

    /* Up to OL_PLACE_MAX_MEMBERS, in any order, any int64 id. */
    struct ol_place_member *many = malloc((OL_PLACE_MAX_MEMBERS + 1) * sizeof *many);
    for (int i = 0; i <= OL_PLACE_MAX_MEMBERS; i++)
        many[i] = (struct ol_place_member){(int64_t)(OL_PLACE_MAX_MEMBERS - i) * 3 - 100, 1};
    many[0].id = INT64_MIN;
    many[1].id = INT64_MAX;
    OLT_CHECK_EQ(ol_place_create(many, OL_PLACE_MAX_MEMBERS + 1, 1, &p), -EINVAL);
    OLT_CHECK_EQ(ol_place_create(many, OL_PLACE_MAX_MEMBERS, 9, &p), 0);
    OLT_CHECK_EQ(ol_place_count(p), OL_PLACE_MAX_MEMBERS);
    OLT_CHECK_EQ(ol_place_member_at(p, 0).id, INT64_MIN);
    OLT_CHECK_EQ(ol_place_member_at(p, OL_PLACE_MAX_MEMBERS - 1).id, INT64_MAX);
    for (int i = 1; i < OL_PLACE_MAX_MEMBERS; i++)
        OLT_CHECK(ol_place_member_at(p, i - 1).id < ol_place_member_at(p, i).id);
    int64_t a[4], b[4];
    for (int i = 0; i < 50; i++) {
        OLT_CHECK_EQ(ol_place_homes(p, key_hash(i), 4, a), 4);
        OLT_CHECK_EQ(ol_place_homes_ref(p, key_hash(i), 4, b), 4);
        OLT_CHECK_MEM(a, b, sizeof a);
    }
    ol_place_destroy(p);
    free(many);
}

/* Who is a KV member of a view: active, with KV capacity. */
OLT_TEST(cluster_place_kv_members)
{
    struct ol_member v[5];
    memset(v, 0, sizeof v);
    const char *st[5] = {"active", "starting", "active", "leaving", "active"};
    for (int i = 0; i < 5; i++) {
        v[i].id = 10 + i;
        strcpy(v[i].state, st[i]);
        v[i].kv_slab_bytes = 1ull << 30;
        v[i].kv_disk_bytes = (uint64_t)i << 40;
    }
    v[2].kv_slab_bytes = v[2].kv_disk_bytes = 0; /* mode s3: no KV */
    v[4].kv_disk_bytes = UINT64_MAX;            /* saturates */
    struct ol_place_member out[5];
    OLT_CHECK_EQ(ol_place_kv_members(v, 5, out), 2);
    OLT_CHECK_EQ(out[0].id, 10);
    OLT_CHECK_EQ(out[0].weight, 1ull << 30);
    OLT_CHECK_EQ(out[1].id, 14);
    OLT_CHECK(out[1].weight == UINT64_MAX);
    OLT_CHECK_EQ(ol_place_kv_members(v, 0, out), 0);
}

/* ---- differential against the twin ------------------------------------- */

OLT_TEST(cluster_place_differential)
{
    uint64_t s = 2024;
    struct ol_place_member *m = malloc(600 * sizeof *m);
    for (int t = 0; t < 400; t++) {
        int n = (int)(rng_next(&s) % (t % 10 == 0 ? 600 : 24));
        int wkind = (int)(rng_next(&s) % 4);
        for (int i = 0; i < n; i++) {
            m[i].id = (int64_t)rng_next(&s);           /* distinct w.h.p.; checked below */
            if (rng_next(&s) % 4 == 0)
                m[i].id = i - 3;                       /* small ids too, negatives included */
            m[i].weight = wkind == 0 ? 1                                  /* all equal */
                        : wkind == 1 ? 1 + rng_next(&s) % 4               /* few values */
                        : wkind == 2 ? 1 + rng_next(&s)   /* any (wraps to 0 once in 2^64) */
                        : 1 + (rng_next(&s) >> (rng_next(&s) % 64));
            if (m[i].weight == 0)
                m[i].weight = 1;
        }
        struct ol_place *p = NULL;
        int rc = ol_place_create(m, n, t, &p);
        if (rc == -EINVAL)
            continue;                                  /* a duplicate id: refused */
        OLT_CHECK_EQ(rc, 0);
        for (int k = 0; k < 200; k++) {
            struct ol_kv_hash h = {rng_next(&s), rng_next(&s)};
            int r = 1 + (int)(rng_next(&s) % OL_PLACE_MAX_REPLICAS);
            int64_t a[OL_PLACE_MAX_REPLICAS], b[OL_PLACE_MAX_REPLICAS];
            int na = ol_place_homes(p, h, r, a), nb = ol_place_homes_ref(p, h, r, b);
            OLT_CHECK_EQ(na, nb);
            OLT_CHECK_EQ(na, r < n ? r : n);
            OLT_CHECK_MEM(a, b, (size_t)na * sizeof a[0]);
        }
        ol_place_destroy(p);
    }
    free(m);
}
