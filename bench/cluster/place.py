"""The KV pool's placement rule in Python (docs/cluster.md "Placement"):
weighted rendezvous hashing in integers, the twin of src/cluster/place.c,
so a benchmark can choose keys by their home node. check() holds it to
the check values of docs/cluster.md (bench/cluster/pool.py calls it before
every run; `python3 bench/cluster/place.py` runs it alone).
"""
import xxhash

M64 = (1 << 64) - 1


def mix(z):
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9 & M64
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB & M64
    return z ^ (z >> 31)


def log2q32(x):
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


def dist(lo, nid):
    x = mix(lo ^ mix((nid + 0x9E3779B97F4A7C15) & M64)) or 1
    return (64 << 32) - log2q32(x)


def key_lo(namespace, key):
    seed = xxhash.xxh3_64_intdigest(namespace)
    return xxhash.xxh3_128_intdigest(key, seed) & M64


def homes(members, namespace, key, r=1):
    """The first r homes of key among members [(id, weight)], best first."""
    lo = key_lo(namespace, key)
    ds = {nid: dist(lo, nid) for nid, _ in members}

    class Rank:
        def __init__(self, m):
            self.id, self.w = m

        def __lt__(self, o):      # ranks above o
            a, b = self.w * ds[o.id], o.w * ds[self.id]
            return a > b or (a == b and self.id < o.id)

    return [r_.id for r_ in sorted(map(Rank, members))[:r]]


def check():
    """Raises AssertionError unless the rule gives docs/cluster.md's values."""
    assert log2q32(3) == 6807362105
    assert log2q32(0xDEADBEEFCAFEF00D) == 274013844226
    assert (64 << 32) - log2q32(mix(0 ^ mix(0x9E3779B97F4A7C15)) or 1) == 7848857897
    ms = [(1, 1 << 40), (2, 1 << 40), (3, 1 << 41), (5, 3 << 39), (9, 1 << 38)]
    want = {0: [3, 2, 1], 1: [9, 1, 3], 2: [5, 2, 1], 3: [2, 3, 1], 4: [5, 3, 2], 10: [1, 3, 2]}
    for i, h in want.items():
        got = homes(ms, b"place-test", f"block-{i}".encode(), 3)
        assert got == h, (i, got, h)


if __name__ == "__main__":
    check()
    print("placement check values: ok")
