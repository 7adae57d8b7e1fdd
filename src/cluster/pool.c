/*
 * pool.c - the layout of a pool of the cluster's object store (pool.h):
 * shape checks, the automatic set size and parity, and the node failures
 * a set survives.
 */
#include "cluster/pool.h"

#include "cluster/place.h"
#include "store/layout.h"

#include <errno.h>
#include <stdio.h>

int ol_pool_check(const struct ol_pool_shape *s, char *err, size_t errlen)
{
    unsigned n = s->nodes, d = s->drives_per_node, dd = s->set_drives;
    if (n < 1 || n > OL_POOL_MAX_NODES) {
        snprintf(err, errlen, "a pool has 1 to %u nodes, not %u", OL_POOL_MAX_NODES, n);
        return -EINVAL;
    }
    if (d < 1 || d > OL_POOL_MAX_NODE_DRIVES) {
        snprintf(err, errlen, "a pool's nodes have 1 to %u drives (data_dirs) each, not %u",
                 OL_POOL_MAX_NODE_DRIVES, d);
        return -EINVAL;
    }
    unsigned p = n * d;
    if (dd < 1 || dd > OL_POOL_MAX_SET_DRIVES || p % dd) {
        snprintf(err, errlen,
                 "%u nodes of %u drives (%u drives) cannot be cut into sets of %u: "
                 "set_drive_count must divide the pool's drives and be 1 to %u",
                 n, d, p, dd, OL_POOL_MAX_SET_DRIVES);
        return -EINVAL;
    }
    if (p / dd > OL_POOL_MAX_SETS) {
        snprintf(err, errlen, "%u drives in sets of %u make %u sets, more than %u: a larger "
                 "set_drive_count", p, dd, p / dd, OL_POOL_MAX_SETS);
        return -EINVAL;
    }
    if (s->parity > dd / 2) {
        snprintf(err, errlen, "parity %u is more than half a set of %u drives "
                 "(default_parity_count)", s->parity, dd);
        return -EINVAL;
    }
    return 0;
}

unsigned ol_pool_sets(const struct ol_pool_shape *s)
{
    return s->nodes * s->drives_per_node / s->set_drives;
}

unsigned ol_pool_auto_set_drives(unsigned nodes, unsigned drives_per_node)
{
    unsigned p = nodes * drives_per_node;
    for (unsigned k = 16; k >= 2; k--)
        if (p % k == 0)
            return k;
    return p <= OL_POOL_MAX_SET_DRIVES ? p : 0;
}

unsigned ol_pool_auto_parity(unsigned nodes, unsigned set_drives)
{
    unsigned m = ol_layout_default_parity(set_drives);
    if (nodes >= 2) {
        unsigned most = (set_drives + nodes - 1) / nodes;
        if (most > set_drives / 2)
            most = set_drives / 2;
        if (m < most)
            m = most;
    }
    return m;
}

unsigned ol_pool_set_spread(const struct ol_pool_shape *s, unsigned set, unsigned *cnt)
{
    unsigned n = s->nodes, most = 0;
    for (unsigned i = 0; i < n; i++)
        cnt[i] = 0;
    for (unsigned g = set * s->set_drives; g < (set + 1) * s->set_drives; g++) {
        unsigned c = ++cnt[ol_pool_node_of(n, g)];
        if (c > most)
            most = c;
    }
    return most;
}

/* A set's drives on one node are at most 32: counting sort of the nodes'
 * counts, then the f largest taken while their sum stays within budget;
 * when all of them fit, every node may go. */
unsigned ol_pool_survives(const struct ol_pool_shape *s, unsigned set, unsigned budget)
{
    unsigned cnt[OL_POOL_MAX_NODES], hist[OL_POOL_MAX_SET_DRIVES + 1] = {0};
    ol_pool_set_spread(s, set, cnt);
    for (unsigned i = 0; i < s->nodes; i++)
        hist[cnt[i]]++;
    unsigned f = 0, lost = 0;
    for (unsigned c = OL_POOL_MAX_SET_DRIVES; c > 0; c--)
        for (unsigned k = 0; k < hist[c]; k++) {
            if (lost + c > budget)
                return f;
            lost += c;
            f++;
        }
    return f + hist[0];   /* nodes without a drive of the set cost nothing */
}

unsigned ol_pool_write_budget(const struct ol_pool_shape *s)
{
    return s->set_drives - ol_layout_write_quorum(s->set_drives, s->parity);
}

unsigned ol_pool_pick(const int64_t *ids, unsigned n, unsigned pool, unsigned set)
{
    uint64_t key = (uint64_t)pool << 32 | set, best = 0;
    unsigned at = 0;
    for (unsigned i = 0; i < n; i++) {
        uint64_t sc = ol_place_mix(key ^ ol_place_mix((uint64_t)ids[i] + 0x9E3779B97F4A7C15ull));
        if (i == 0 || sc > best || (sc == best && ids[i] < ids[at])) {
            best = sc;
            at = i;
        }
    }
    return at;
}
