"""The vLLM connector's "tcp" mode in a cluster (docs/vllm-connector.md,
"A cluster over TCP"): the store asks a listed node for the KV members
(MEMBERS, docs/kv-protocol.md) and sends each key straight to its homes,
placed by the nodes' own code (openlake_client.Placement). Real etcd, real
daemons on loopback, the connector's _Store driven directly (no vLLM): what
it saves lands on each key's home with no push between nodes, what it looks
up and loads comes from the homes with no fetch, and a home that is down
costs misses and dropped saves, never an exception.
"""
import os
import time

import pytest

import placement
from openlake_client import Client, Placement, place_log2_q32
from openlake_client.connector.config import OpenLakeConfig
from openlake_client.connector.store import _Store
from test_cluster import ETCD, etcd, wait_for
from test_cluster_kv import kpm, pool
from test_http import hermetic_openlake_env

assert hermetic_openlake_env  # autouse fixture, imported to apply here too
assert etcd                   # the fixture: one etcd member per test

pytestmark = pytest.mark.skipif(not ETCD, reason="etcd is not installed (scripts/deps.sh "
                                "test installs etcd-server)")

NS = "pool"
VAL = 4096


def test_placement_binding_gives_the_documented_check_values():
    """The extension's Placement is the daemon's C code: docs/cluster.md's
    check values, and the Python twin's homes on random keys."""
    assert place_log2_q32(3) == 6807362105
    assert place_log2_q32(0xDEADBEEFCAFEF00D) == 274013844226
    members = [(1, 1 << 40), (2, 1 << 40), (3, 1 << 41), (5, 3 << 39), (9, 1 << 38)]
    p = Placement(members, 17)
    assert p.count == 5 and p.revision == 17
    want = {0: (3, 2, 1), 1: (9, 1, 3), 2: (5, 2, 1), 3: (2, 3, 1), 4: (5, 3, 2), 10: (1, 3, 2)}
    got = p.homes("place-test", [b"block-%d" % i for i in want], 3)
    assert got == list(want.values())
    assert p.homes(b"place-test", [b"block-0"], 1) == [(3,)]
    keys = [os.urandom(38) for _ in range(200)]
    assert p.homes(NS, keys, 2) == [tuple(placement.homes(members, NS.encode(), k, 2))
                                    for k in keys]
    # bounds: a weight of 0, an id twice, r out of 1..16, a bad key
    for bad in ([(1, 0)], [(1, 5), (1, 6)]):
        with pytest.raises(ValueError):
            Placement(bad)
    with pytest.raises(TypeError):
        Placement([(1,)])
    with pytest.raises(ValueError):
        Placement([(i, 1) for i in range(4097)])
    with pytest.raises(ValueError):
        p.homes(NS, [b"k"], 17)
    with pytest.raises(ValueError):
        p.homes(NS, [b""], 1)
    assert Placement([]).homes(NS, [b"k"]) == [()]


def test_a_node_in_no_cluster_says_so(kvd_tcp):
    d, tok = kvd_tcp
    with Client(f"127.0.0.1:{d.kv_port}", token_file=tok, namespace=NS) as c:
        assert c.members() == (0, 0, [])
    store = _Store(tcp_cfg([d], tok), NS, VAL, "worker")
    keys = [b"solo-%d" % i for i in range(8)]
    assert store.put(keys, [os.urandom(VAL) for _ in keys]) == [0] * 8
    assert store.exists(keys) == [True] * 8 and store.revision == 0
    store.close()


@pytest.fixture
def kvd_tcp(make_daemon, tmp_path):
    tok = tmp_path / "kv.token"
    tok.write_text(os.urandom(32).hex() + "\n")
    tok.chmod(0o600)
    return make_daemon(args=["--kv-token-file", str(tok)]), str(tok)


def tcp_cfg(nodes, tok, **kw):
    return OpenLakeConfig.from_extra({
        "openlake_device": "tcp", "openlake_token_file": tok,
        "openlake_nodes": [f"127.0.0.1:{d.kv_port}" for d in nodes], **kw})


def entries(d, tok):
    """Values of the namespace node d holds (every shard)."""
    with Client(f"127.0.0.1:{d.kv_port}", token_file=tok, namespace=NS) as c:
        return c.stats()["entries"]


def pool_traffic(nodes):
    names = ("pushes_total", "served_puts_total", "fetched_keys_total", "served_gets_total")
    return {d.kv_port: [kpm(d, n) for n in names] for d in nodes}


def settled(nodes, tok):
    """Every node's MEMBERS answer, once they agree and list every node (a
    view may be a write behind: a record not "active" yet)."""
    def answers():
        out = []
        for d in nodes:
            with Client(f"127.0.0.1:{d.kv_port}", token_file=tok, namespace=NS) as c:
                out.append(c.members())
        return out

    def agree():
        a = answers()
        return a[0] if all(x == a[0] and len(x[2]) == len(nodes) for x in a) else None
    return wait_for(agree, "the same members from every node")


def test_members_are_the_placement_every_node_answers(etcd, make_daemon, tmp_path):
    nodes, tok = pool(make_daemon, etcd, tmp_path, n=3)
    rev, rep, members = settled(nodes, tok)
    assert rev > 0 and rep == 1
    assert [(m[0], m[2]) for m in members] == [(i + 1, f"127.0.0.1:{d.kv_port}")
                                                for i, d in enumerate(nodes)]
    assert len({m[1] for m in members}) == 1 and members[0][1] > 0   # same slab size


def test_saves_lookups_and_loads_go_straight_to_the_homes(etcd, make_daemon, tmp_path):
    """One listed node is enough: every key is saved on its home, found and
    read there, with no push and no fetch between the nodes; an engine
    listing the nodes in another order finds the same keys at the same
    homes."""
    nodes, tok = pool(make_daemon, etcd, tmp_path, n=3)
    settled(nodes, tok)
    store = _Store(tcp_cfg(nodes[:1], tok), NS, VAL, "worker")
    keys = [os.urandom(32) + bytes(6) for _ in range(90)]
    vals = [os.urandom(VAL) for _ in keys]
    assert store.put(keys, vals) == [0] * len(keys)
    assert store.revision > 0
    where = [placement.homes([(1, 1), (2, 1), (3, 1)], NS.encode(), k)[0] for k in keys]
    for i, d in enumerate(nodes):
        assert entries(d, tok) == where.count(i + 1) > 0
    before = pool_traffic(nodes)
    assert all(v == [0, 0, 0, 0] for v in before.values()), before
    other = _Store(tcp_cfg(nodes[::-1], tok), NS, VAL, "scheduler")
    assert other.exists(keys + [b"never-saved"]) == [True] * len(keys) + [False]
    out = [bytearray(VAL) for _ in keys]
    assert other.get(keys, out) == [VAL] * len(keys)
    assert all(bytes(o) == v for o, v in zip(out, vals))
    after = pool_traffic(nodes)
    assert after == before, (before, after)
    store.close()
    other.close()


def test_a_home_that_is_down_costs_misses_and_dropped_saves(etcd, make_daemon, tmp_path):
    nodes, tok = pool(make_daemon, etcd, tmp_path, n=3, timeout_ms="300",
                      extra=["--cluster.lease-ttl-secs", "10"])
    settled(nodes, tok)
    store = _Store(tcp_cfg(nodes[:2], tok, openlake_timeout_ms=1000,
                           openlake_reconnect_secs=0.2), NS, VAL, "worker")
    keys = [os.urandom(32) + bytes(6) for _ in range(60)]
    vals = [os.urandom(VAL) for _ in keys]
    assert store.put(keys, vals) == [0] * len(keys)
    where = [placement.homes([(1, 1), (2, 1), (3, 1)], NS.encode(), k)[0] for k in keys]
    dead = nodes[2]
    dead.proc.kill()
    dead.proc.wait()
    # still a member for the lease's 10 s: its keys miss, the others are found
    t0 = time.time()
    present = store.exists(keys)
    assert present == [h != 3 for h in where]
    out = [bytearray(VAL) for _ in keys]
    got = store.get(keys, out)
    assert [g == VAL for g in got] == [h != 3 for h in where]
    assert all(bytes(out[i]) == vals[i] for i in range(len(keys)) if where[i] != 3)
    new = [os.urandom(32) + bytes(6) for _ in range(30)]
    res = store.put(new, [os.urandom(VAL) for _ in new])
    nwhere = [placement.homes([(1, 1), (2, 1), (3, 1)], NS.encode(), k)[0] for k in new]
    assert [r is None for r in res] == [h == 3 for h in nwhere], (res, nwhere)
    assert time.time() - t0 < 20
    assert store.down
    dead.stop(expect_rc=None)
    store.close()


def test_with_two_homes_a_load_goes_to_the_next_home(etcd, make_daemon, tmp_path):
    """cluster.kv_replicas = 2: the save goes to the first home, which sends
    the second its copy; with the first home dead, lookups and loads find
    every key at its second home, straight from the client, and a save
    whose first home is the dead one goes to its second home instead of
    being dropped."""
    nodes, tok = pool(make_daemon, etcd, tmp_path, n=3, timeout_ms="2000",
                      extra=["--cluster.kv-replicas", "2", "--cluster.lease-ttl-secs", "10"])
    settled(nodes, tok)
    store = _Store(tcp_cfg(nodes[:1], tok, openlake_reconnect_secs=0.2), NS, VAL, "worker")
    keys = [os.urandom(32) + bytes(6) for _ in range(60)]
    vals = [os.urandom(VAL) for _ in keys]
    assert store.put(keys, vals) == [0] * len(keys)
    where = [placement.homes([(1, 1), (2, 1), (3, 1)], NS.encode(), k, 2) for k in keys]
    # each first home sent its second a copy: one push per key, each answered
    deadline = time.time() + 10
    while sum(kpm(d, "served_puts_total") for d in nodes) < len(keys):
        assert time.time() < deadline, pool_traffic(nodes)
        time.sleep(0.05)
    assert sum(kpm(d, "pushes_total") for d in nodes) == len(keys)
    for i, d in enumerate(nodes):
        assert entries(d, tok) == sum(i + 1 in hs for hs in where)
    dead = nodes[1]
    assert sum(hs[0] == 2 for hs in where) >= 5
    dead.proc.kill()
    dead.proc.wait()
    assert store.exists(keys) == [True] * len(keys)
    out = [bytearray(VAL) for _ in keys]
    assert store.get(keys, out) == [VAL] * len(keys)
    assert all(bytes(o) == v for o, v in zip(out, vals))
    new = [os.urandom(32) + bytes(6) for _ in range(60)]
    nvals = [os.urandom(VAL) for _ in new]
    nwhere = [placement.homes([(1, 1), (2, 1), (3, 1)], NS.encode(), k, 2) for k in new]
    assert sum(hs[0] == 2 for hs in nwhere) >= 5
    assert store.put(new, nvals) == [0] * len(new)         # none dropped
    out = [bytearray(VAL) for _ in new]
    assert store.get(new, out) == [VAL] * len(new)
    assert all(bytes(o) == v for o, v in zip(out, nvals))
    dead.stop(expect_rc=None)
    store.close()


def test_a_node_that_left_is_routed_around_after_the_next_members(etcd, make_daemon, tmp_path):
    """A failed call makes the store ask for the members again (within
    openlake_reconnect_secs): once the dead node's lease ran out, its keys
    have new homes, and saves reach them all, still with no push."""
    nodes, tok = pool(make_daemon, etcd, tmp_path, n=3)     # leases of 2 s
    settled(nodes, tok)
    store = _Store(tcp_cfg(nodes, tok, openlake_reconnect_secs=0.2), NS, VAL, "worker")
    keys = [os.urandom(32) + bytes(6) for _ in range(40)]
    assert store.put(keys, [os.urandom(VAL) for _ in keys]) == [0] * len(keys)
    rev = store.revision
    nodes[2].proc.kill()
    nodes[2].proc.wait()
    where = [placement.homes([(1, 1), (2, 1), (3, 1)], NS.encode(), k)[0] for k in keys]
    assert store.exists(keys) == [h != 3 for h in where]      # the call to node 3 failed
    settled(nodes[:2], tok)                                   # the lease ran out
    time.sleep(0.3)                                           # past openlake_reconnect_secs
    new = [os.urandom(32) + bytes(6) for _ in range(40)]
    assert store.put(new, [os.urandom(VAL) for _ in new]) == [0] * len(new)
    assert store.revision > rev and store._place.count == 2
    assert all(kpm(d, "pushes_total") == 0 for d in nodes[:2])
    nodes[2].stop(expect_rc=None)
    store.close()
