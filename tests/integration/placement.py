"""A plain Python twin of KV placement (docs/cluster.md "Placement";
src/cluster/place.h): a key's homes among the KV members, by the exact
integer rule, so that a test or a benchmark (bench/cluster/pool.py) can
choose keys homed on a given node. check() holds it to the check values
the docs give and to a vector of tests/unit/test_cluster_place.c.
"""
from fractions import Fraction

import xxhash

M64 = (1 << 64) - 1


def mix(z):
    """splitmix64's finaliser, modulo 2^64."""
    z ^= z >> 30
    z = (z * 0xBF58476D1CE4E5B9) & M64
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def log2q32(x):
    """floor(log2 x) with 32 fraction bits, each step truncated (x >= 1)."""
    k = x.bit_length() - 1
    m = x >> (k - 62) if k >= 62 else x << (62 - k)
    f = 0
    for _ in range(32):
        m = (m * m) >> 62
        f <<= 1
        if m >= 1 << 63:
            m >>= 1
            f |= 1
    return (k << 32) + f


def distance(lo, node_id):
    """d for a key's low hash and a member's id: 1 <= d <= 2^38."""
    x = mix(lo ^ mix((node_id + 0x9E3779B97F4A7C15) & M64))
    return (64 << 32) - log2q32(x or 1)


def key_lo(ns, key):
    """The low 64 bits of XXH3-128(key, seed = XXH3-64(namespace))."""
    seed = xxhash.xxh3_64_intdigest(ns)
    return xxhash.xxh3_128_intdigest(key, seed=seed) & M64


def homes(members, ns, key, r=1):
    """The first r homes of key among members [(id, weight)], best first."""
    lo = key_lo(ns, key)
    scored = [(node_id, w, distance(lo, node_id)) for node_id, w in members]
    # A ranks above B when w_A * d_B > w_B * d_A, ties to the lower id:
    # sorting by the exact fraction d / w ascending gives that order.
    scored.sort(key=lambda t: (Fraction(t[2], t[1]), t[0]))
    return [t[0] for t in scored[:r]]


def check():
    """Raises AssertionError unless the rule gives docs/cluster.md's check
    values (and test_cluster_place.c's vector for id 42)."""
    assert log2q32(3) == 6807362105
    assert log2q32(0xDEADBEEFCAFEF00D) == 274013844226
    assert distance(0, 0) == 7848857897
    assert distance(0x0123456789ABCDEF, 42) == 5848607936
    members = [(1, 1 << 40), (2, 1 << 40), (3, 1 << 41), (5, 3 << 39), (9, 1 << 38)]
    want = {0: [3, 2, 1], 1: [9, 1, 3], 2: [5, 2, 1], 3: [2, 3, 1], 4: [5, 3, 2],
            10: [1, 3, 2]}
    for i, h in want.items():
        got = homes(members, b"place-test", b"block-%d" % i, 3)
        assert got == h, (i, got, h)
