/*
 * test_cluster_pool.c - cluster/pool.h: the layout of a pool of the
 * cluster's object store.
 *
 * Fixed vectors (which node holds each drive of a set, the node failures
 * sets survive) for the layouts docs/cluster.md names, so a change of the
 * rule fails here before it moves drives between sets; the spread bound
 * ceil(D / N) on every shape; ol_pool_survives against its definition by
 * brute force over every subset of nodes; the automatic set size and
 * parity; and the shape checks' refusals.
 */
#include "olt.h"

#include "cluster/pool.h"
#include "store/layout.h"

#include <errno.h>
#include <string.h>

/* The definition: the largest f such that every f-subset of nodes holds at
 * most budget of the set's drives, by trying every subset (N <= 10). */
static unsigned survives_ref(const struct ol_pool_shape *s, unsigned set, unsigned budget)
{
    unsigned cnt[16];
    ol_pool_set_spread(s, set, cnt);
    unsigned worst[17];   /* most drives any f nodes hold */
    for (unsigned f = 0; f <= s->nodes; f++)
        worst[f] = 0;
    for (unsigned mask = 0; mask < 1u << s->nodes; mask++) {
        unsigned f = (unsigned)__builtin_popcount(mask), sum = 0;
        for (unsigned i = 0; i < s->nodes; i++)
            if (mask >> i & 1)
                sum += cnt[i];
        if (sum > worst[f])
            worst[f] = sum;
    }
    unsigned f = 0;
    while (f < s->nodes && worst[f + 1] <= budget)
        f++;
    return f;
}

OLT_TEST(cluster_pool_fixed_vectors)
{
    /* 4 nodes x 4 drives in sets of 4, parity 2: set s is drive s of every node */
    struct ol_pool_shape a = {4, 4, 4, 2};
    char err[256];
    OLT_CHECK_EQ(ol_pool_check(&a, err, sizeof err), 0);
    OLT_CHECK_EQ(ol_pool_sets(&a), 4u);
    for (unsigned s = 0; s < 4; s++)
        for (unsigned k = 0; k < 4; k++) {
            unsigned g = s * 4 + k;
            OLT_CHECK_EQ(ol_pool_node_of(4, g), k);
            OLT_CHECK_EQ(ol_pool_drive_of(4, g), s);
            OLT_CHECK_EQ(ol_pool_position(4, k, s), g);
        }
    OLT_CHECK_EQ(ol_pool_write_budget(&a), 1u);   /* k = m = 2: wq 3 */
    for (unsigned s = 0; s < 4; s++) {
        OLT_CHECK_EQ(ol_pool_survives(&a, s, a.parity), 2u);
        OLT_CHECK_EQ(ol_pool_survives(&a, s, ol_pool_write_budget(&a)), 1u);
    }

    /* one set of 16 over 4 nodes, parity 4: four drives a node, one node lost */
    struct ol_pool_shape b = {4, 4, 16, 4};
    unsigned cnt[4];
    OLT_CHECK_EQ(ol_pool_set_spread(&b, 0, cnt), 4u);
    OLT_CHECK_EQ(ol_pool_survives(&b, 0, 4), 1u);
    OLT_CHECK_EQ(ol_pool_write_budget(&b), 4u);
    OLT_CHECK_EQ(ol_pool_survives(&b, 0, ol_pool_write_budget(&b)), 1u);

    /* 3 nodes x 4 drives in sets of 4, parity 2: uneven spread */
    struct ol_pool_shape c = {3, 4, 4, 2};
    static const unsigned want_nodes[3][4] = {{0, 1, 2, 0}, {1, 2, 0, 1}, {2, 0, 1, 2}};
    static const unsigned want_drive[3][4] = {{0, 0, 0, 1}, {1, 1, 2, 2}, {2, 3, 3, 3}};
    for (unsigned s = 0; s < 3; s++) {
        for (unsigned k = 0; k < 4; k++) {
            OLT_CHECK_EQ(ol_pool_node_of(3, s * 4 + k), want_nodes[s][k]);
            OLT_CHECK_EQ(ol_pool_drive_of(3, s * 4 + k), want_drive[s][k]);
        }
        OLT_CHECK_EQ(ol_pool_survives(&c, s, 2), 1u);   /* reads: the node of two */
        OLT_CHECK_EQ(ol_pool_survives(&c, s, ol_pool_write_budget(&c)), 0u);
    }

    /* 8 nodes x 2 drives in sets of 4 (4 sets), parity 2: one drive a node */
    struct ol_pool_shape e = {8, 2, 4, 2};
    OLT_CHECK_EQ(ol_pool_sets(&e), 4u);
    OLT_CHECK_EQ(ol_pool_node_of(8, 1 * 4 + 0), 4u);
    OLT_CHECK_EQ(ol_pool_node_of(8, 2 * 4 + 0), 0u);
    OLT_CHECK_EQ(ol_pool_drive_of(8, 2 * 4 + 0), 1u);
    /* any 2 nodes, not any 3: the worst 3 hold 3 of its drives */
    OLT_CHECK_EQ(ol_pool_survives(&e, 3, 2), 2u);
    OLT_CHECK_EQ(ol_pool_survives(&e, 3, 4), 8u);   /* all 8: 4 of them hold nothing of it */

    /* one node: every drive on it */
    struct ol_pool_shape f = {1, 4, 4, 2};
    OLT_CHECK_EQ(ol_pool_survives(&f, 0, 2), 0u);
}

OLT_TEST(cluster_pool_spread_and_survival_match_definition)
{
    char err[256];
    unsigned cases = 0;
    for (unsigned n = 1; n <= 10; n++)
        for (unsigned d = 1; d <= 6; d++)
            for (unsigned dd = 1; dd <= 16; dd++) {
                struct ol_pool_shape s = {n, d, dd, dd / 2};
                if (ol_pool_check(&s, err, sizeof err))
                    continue;
                unsigned cnt[16], bound = (dd + n - 1) / n;
                for (unsigned set = 0; set < ol_pool_sets(&s); set++) {
                    unsigned most = ol_pool_set_spread(&s, set, cnt), sum = 0, used = 0;
                    for (unsigned i = 0; i < n; i++) {
                        sum += cnt[i];
                        used += cnt[i] > 0;
                    }
                    OLT_CHECK_EQ(sum, dd);
                    OLT_CHECK_EQ(most, bound);          /* the fewest possible */
                    OLT_CHECK_EQ(used, dd < n ? dd : n);
                    for (unsigned b = 0; b <= dd; b++)
                        OLT_CHECK_EQ(ol_pool_survives(&s, set, b), survives_ref(&s, set, b));
                    cases++;
                }
            }
    OLT_CHECK(cases > 1000);
}

OLT_TEST(cluster_pool_auto_shape)
{
    OLT_CHECK_EQ(ol_pool_auto_set_drives(4, 4), 16u);
    OLT_CHECK_EQ(ol_pool_auto_set_drives(3, 4), 12u);
    OLT_CHECK_EQ(ol_pool_auto_set_drives(4, 8), 16u);
    OLT_CHECK_EQ(ol_pool_auto_set_drives(5, 7), 7u);
    OLT_CHECK_EQ(ol_pool_auto_set_drives(17, 1), 17u);
    OLT_CHECK_EQ(ol_pool_auto_set_drives(37, 1), 0u);
    OLT_CHECK_EQ(ol_pool_auto_set_drives(1, 1), 1u);
    /* parity: the single host's, raised to a node's share */
    OLT_CHECK_EQ(ol_pool_auto_parity(4, 16), 4u);
    OLT_CHECK_EQ(ol_pool_auto_parity(4, 4), 2u);
    OLT_CHECK_EQ(ol_pool_auto_parity(2, 16), 8u);   /* 8 a node */
    OLT_CHECK_EQ(ol_pool_auto_parity(3, 12), 4u);
    OLT_CHECK_EQ(ol_pool_auto_parity(1, 16), ol_layout_default_parity(16));
    OLT_CHECK_EQ(ol_pool_auto_parity(2, 3), 1u);    /* capped at D / 2 */
    /* every automatic shape leaves its sets readable after one node loss */
    for (unsigned n = 2; n <= 40; n++)
        for (unsigned d = 1; d <= 24; d++) {
            unsigned dd = ol_pool_auto_set_drives(n, d);
            if (!dd || dd < 2)
                continue;
            struct ol_pool_shape s = {n, d, dd, ol_pool_auto_parity(n, dd)};
            char err[256];
            if (ol_pool_check(&s, err, sizeof err)) {   /* only too many sets (2 x a prime) */
                OLT_CHECK(n * d / dd > OL_POOL_MAX_SETS);
                continue;
            }
            if ((dd + n - 1) / n <= dd / 2)
                OLT_CHECK(ol_pool_survives(&s, 0, s.parity) >= 1);
        }
}

OLT_TEST(cluster_pool_check_refuses)
{
    char err[256];
    struct ol_pool_shape s = {0, 4, 4, 2};
    OLT_CHECK_EQ(ol_pool_check(&s, err, sizeof err), -EINVAL);
    OLT_CHECK(strstr(err, "1 to 1024 nodes") != NULL);
    s = (struct ol_pool_shape){4, 0, 4, 2};
    OLT_CHECK_EQ(ol_pool_check(&s, err, sizeof err), -EINVAL);
    OLT_CHECK(strstr(err, "data_dirs") != NULL);
    s = (struct ol_pool_shape){4, 3, 5, 2};
    OLT_CHECK_EQ(ol_pool_check(&s, err, sizeof err), -EINVAL);
    OLT_CHECK(strstr(err, "4 nodes of 3 drives (12 drives) cannot be cut into sets of 5") != NULL);
    s = (struct ol_pool_shape){4, 4, 0, 0};
    OLT_CHECK_EQ(ol_pool_check(&s, err, sizeof err), -EINVAL);
    s = (struct ol_pool_shape){64, 64, 4, 2};
    OLT_CHECK_EQ(ol_pool_check(&s, err, sizeof err), -EINVAL);
    OLT_CHECK(strstr(err, "1024 sets, more than 256") != NULL);
    s = (struct ol_pool_shape){4, 4, 4, 3};
    OLT_CHECK_EQ(ol_pool_check(&s, err, sizeof err), -EINVAL);
    OLT_CHECK(strstr(err, "parity 3 is more than half a set of 4") != NULL);
    s = (struct ol_pool_shape){1024, 8, 32, 16};
    OLT_CHECK_EQ(ol_pool_check(&s, err, sizeof err), 0);
}

/* ---- the pool record (pool_rec.h) ------------------------------------------------ */

#include "cluster/pool_rec.h"

#include <stdlib.h>

OLT_TEST(cluster_pool_record_round_trip_and_refusals)
{
    char err[256];
    int64_t nodes[4] = {3, 1, 4, 2};
    struct ol_pool_shape s = {4, 2, 4, 2};
    struct ol_pool_rec r, g;
    OLT_CHECK_EQ(ol_pool_rec_new(0, nodes, &s, &r, err, sizeof err), 0);
    OLT_CHECK_EQ(ol_pool_rec_index(&r, 4), 2);
    OLT_CHECK_EQ(ol_pool_rec_index(&r, 9), -1);
    for (unsigned a = 0; a < 8; a++)
        for (unsigned b = 0; b < a; b++)
            OLT_CHECK(memcmp(r.uuids[a], r.uuids[b], 16) != 0);
    OLT_CHECK_EQ(r.uuids[0][6] >> 4, 4);   /* RFC 4122 version 4 */
    size_t len;
    char *js = ol_pool_rec_encode(&r, &len);
    OLT_CHECK(js != NULL && len == strlen(js));
    OLT_CHECK(strstr(js, "\"v\":1") && strstr(js, "\"nodes\":[3,1,4,2]") &&
              strstr(js, "\"set_drives\":4") && strstr(js, "\"parity\":2"));
    OLT_CHECK_EQ(ol_pool_rec_decode(js, len, &g, err, sizeof err), 0);
    OLT_CHECK_EQ(g.pool, 0u);
    OLT_CHECK_MEM(g.deployment, r.deployment, 16);
    OLT_CHECK(memcmp(&g.shape, &r.shape, sizeof s) == 0);
    OLT_CHECK_MEM(g.nodes, r.nodes, sizeof nodes);
    OLT_CHECK_MEM(g.uuids, r.uuids, 8 * 16);
    ol_pool_rec_free(&g);
    /* a second record is another deployment */
    struct ol_pool_rec r2;
    OLT_CHECK_EQ(ol_pool_rec_new(0, nodes, &s, &r2, err, sizeof err), 0);
    OLT_CHECK(memcmp(r2.deployment, r.deployment, 16) != 0);
    ol_pool_rec_free(&r2);
    /* refusals: edit the JSON */
    struct {
        const char *from, *to;
        int rc;
        const char *says;
    } bad[] = {
        {"\"v\":1", "\"v\":2", -ENOTSUP, "newer"},
        {"\"v\":1", "\"v\":\"1\"", -EINVAL, "format version"},
        {"\"nodes\":[3,1,4,2]", "\"nodes\":[3,1,4,3]", -EINVAL, "twice"},
        {"\"nodes\":[3,1,4,2]", "\"nodes\":[3,1,4,-2]", -EINVAL, "0 or more"},
        {"\"nodes\":[3,1,4,2]", "\"nodes\":[3,1]", -EINVAL, "drive uuids for"},
        {"\"parity\":2", "\"parity\":3", -EINVAL, "more than half"},
        {"\"set_drives\":4", "\"set_drives\":3", -EINVAL, "cannot be cut"},
        {"\"drives_per_node\":2", "\"drives_per_node\":\"2\"", -EINVAL, "wrong type"},
        {"\"deployment\":\"", "\"deployment\":\"x", -EINVAL, "deployment id"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *at = strstr(js, bad[i].from);
        OLT_CHECK(at != NULL);
        char *m = malloc(len + 64);
        size_t pre = (size_t)(at - js);
        memcpy(m, js, pre);
        strcpy(m + pre, bad[i].to);
        strcat(m, at + strlen(bad[i].from));
        int rc = ol_pool_rec_decode(m, strlen(m), &g, err, sizeof err);
        if (rc != bad[i].rc || !strstr(err, bad[i].says))
            olt_fail(__FILE__, __LINE__, "case %zu: %d %s", i, rc, err);
        free(m);
    }
    /* a repeated uuid, a zero one */
    char *m = strdup(js);
    char *d0 = strstr(m, "\"drives\":[\"") + 11, *d1 = d0 + 35;
    memcpy(d1, d0, 32);
    OLT_CHECK_EQ(ol_pool_rec_decode(m, strlen(m), &g, err, sizeof err), -EINVAL);
    OLT_CHECK(strstr(err, "twice") != NULL);
    memset(d0, '0', 32);
    OLT_CHECK_EQ(ol_pool_rec_decode(m, strlen(m), &g, err, sizeof err), -EINVAL);
    free(m);
    OLT_CHECK_EQ(ol_pool_rec_decode("[]", 2, &g, err, sizeof err), -EINVAL);
    OLT_CHECK_EQ(ol_pool_rec_decode("{", 1, &g, err, sizeof err), -EINVAL);
    /* new refuses what a record may not hold */
    int64_t dup[4] = {1, 1, 2, 3};
    OLT_CHECK_EQ(ol_pool_rec_new(0, dup, &s, &g, err, sizeof err), -EINVAL);
    struct ol_pool_shape bs = {4, 2, 3, 1};
    OLT_CHECK_EQ(ol_pool_rec_new(0, nodes, &bs, &g, err, sizeof err), -EINVAL);
    free(js);
    ol_pool_rec_free(&r);
}

OLT_TEST(cluster_pool_node_lists)
{
    int64_t ids[16];
    unsigned n;
    char err[256];
    OLT_CHECK_EQ(ol_pool_parse_nodes("1-4", ids, 16, &n, err, sizeof err), 0);
    OLT_CHECK_EQ(n, 4u);
    OLT_CHECK(ids[0] == 1 && ids[3] == 4);
    OLT_CHECK_EQ(ol_pool_parse_nodes(" 7, 2 - 3 ,10", ids, 16, &n, err, sizeof err), 0);
    OLT_CHECK_EQ(n, 4u);
    OLT_CHECK(ids[0] == 7 && ids[1] == 2 && ids[2] == 3 && ids[3] == 10);
    OLT_CHECK_EQ(ol_pool_parse_nodes("0", ids, 16, &n, err, sizeof err), 0);
    OLT_CHECK_EQ(n, 1u);
    static const char *bad[] = {"", "1,", ",1", "1,,2", "4-1", "a", "1-", "1,1", "1-3,2",
                                "1 2", "2147483648", "1-20"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (ol_pool_parse_nodes(bad[i], ids, 16, &n, err, sizeof err) != -EINVAL)
            olt_fail(__FILE__, __LINE__, "\"%s\" was taken", bad[i]);
    OLT_CHECK_EQ(ol_pool_parse_nodes("1-20", ids, 16, &n, err, sizeof err), -EINVAL);
    OLT_CHECK(strstr(err, "more than 16 nodes") != NULL);
}

OLT_TEST(cluster_pool_owner_pick_spreads_and_moves_little)
{
    int64_t ids[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    unsigned cnt[8] = {0}, before[256];
    for (unsigned set = 0; set < 256; set++) {
        before[set] = ol_pool_pick(ids, 8, 0, set);
        cnt[before[set]]++;
    }
    for (unsigned i = 0; i < 8; i++)   /* 32 each on average */
        OLT_CHECK(cnt[i] >= 16 && cnt[i] <= 48);
    /* node 5 (index 4) goes: only its sets move */
    int64_t less[7] = {1, 2, 3, 4, 6, 7, 8};
    for (unsigned set = 0; set < 256; set++) {
        unsigned k = ol_pool_pick(less, 7, 0, set);
        if (before[set] != 4)
            OLT_CHECK_EQ(less[k], ids[before[set]]);
    }
    /* the order of the candidates does not matter; the pool does */
    int64_t rev[8] = {8, 7, 6, 5, 4, 3, 2, 1};
    unsigned same = 0;
    for (unsigned set = 0; set < 256; set++) {
        OLT_CHECK_EQ(rev[ol_pool_pick(rev, 8, 0, set)], ids[before[set]]);
        same += ol_pool_pick(ids, 8, 1, set) == before[set];
    }
    OLT_CHECK(same < 96);
    /* fixed vectors: a change of the rule fails here (nodes of a pool
     * running different versions must agree on who prefers which set) */
    static const int64_t want[8] = {2, 2, 2, 1, 2, 2, 2, 1};
    for (unsigned set = 0; set < 8; set++)
        OLT_CHECK_EQ(ids[ol_pool_pick(ids, 4, 0, set)], want[set]);
    int64_t one = 42;
    OLT_CHECK_EQ(ol_pool_pick(&one, 1, 3, 7), 0u);
}
