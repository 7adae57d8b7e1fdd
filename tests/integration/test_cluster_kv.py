"""The cluster's KV pool (docs/cluster.md "The KV pool"): every block key
has a home node; a node stores for its clients what they put, sends a copy
home when the home is another node, and fetches from their homes the keys
its clients miss. Real etcd, real daemons on loopback, the real CLI (the C
client library) over TCP and over the Unix socket (the shared slab).
"""
import os
import re
import signal
import subprocess
import time
import urllib.request

import pytest

import conftest
import kvwire
from test_cli_kv import cli
from test_cluster import ETCD, etcd, wait_for
from test_cluster_rpc import secret, up
from test_http import hermetic_openlake_env

assert hermetic_openlake_env  # autouse fixture, imported to apply here too
assert etcd                   # the fixture: one etcd member per test

pytestmark = pytest.mark.skipif(not ETCD, reason="etcd is not installed (scripts/deps.sh test "
                                "installs etcd-server)")


def pool(make_daemon, etcd, tmp_path, n=2, timeout_ms="300", extra=()):
    s = secret(tmp_path)
    tok = tmp_path / "kv.token"
    tok.write_text(os.urandom(32).hex() + "\n")
    tok.chmod(0o600)
    nodes = [make_daemon(args=[
        "--cluster.name", "c1", "--cluster.etcd", etcd.url, "--self-id", str(i),
        "--cluster.lease-ttl-secs", "2", "--rpc-addr", f"127.0.0.1:{conftest.free_port()}",
        "--cluster.etcd-timeout-ms", "1000", "--cluster.secret-file", s,
        "--kv-token-file", str(tok), "--cluster.kv-timeout-ms", timeout_ms, *extra])
        for i in range(1, n + 1)]
    for d in nodes:
        wait_for(lambda: all(up(d, p) == 1 for p in range(1, n + 1) if p != nodes.index(d) + 1),
                 "peers up")
    # every node's placement has every member (active, with a KV slab)
    wait_for(lambda: all(f'openlake_cluster_members{{cluster="c1"}} {n}' in
                         urllib.request.urlopen(d.url + "/_openlake/metrics").read().decode()
                         for d in nodes), "views")
    time.sleep(0.3)
    return nodes, str(tok)


def kv(d, tok, *args, tcp=True, stdin=None):
    addr = f"127.0.0.1:{d.kv_port}" if tcp else str(d.data / "kv.sock")
    return cli("kv", *args, "--addr", addr, "--token-file", tok, "--ns", "pool", stdin=stdin)


def kpm(d, name):
    text = urllib.request.urlopen(d.url + "/_openlake/metrics").read().decode()
    m = re.search(r'^openlake_kvpool_%s\{cluster="c1"\} (\d+)$' % name, text, re.M)
    return int(m.group(1)) if m else None


def settled_pushes(d):
    """The pushes d sent, once every one of them has been answered."""
    last, since = None, time.time()
    while time.time() - since < 0.5:
        now = (kpm(d, "pushes_total"), kpm(d, "push_failures_total"), kpm(d, "push_drops_total"))
        if now != last:
            last, since = now, time.time()
        time.sleep(0.05)
    assert last[1] == 0 and last[2] == 0, last
    return last[0]


def test_a_value_put_on_one_node_is_read_on_another(etcd, make_daemon, tmp_path):
    (a, b), tok = pool(make_daemon, etcd, tmp_path)
    vals = {f"block-{i}": os.urandom(1000 + 37 * i) for i in range(40)}
    for k, v in vals.items():
        r = kv(a, tok, "put", k, stdin=v)
        assert r.returncode == 0, r.stderr
    # about half are homed on b: a sent those home
    pushed = settled_pushes(a)
    assert 5 <= pushed <= 35
    # every one reads back on b, byte for byte: b's own from what a sent
    # home, a's fetched from a when b misses them
    for k, v in vals.items():
        r = kv(b, tok, "get", k)
        assert r.returncode == 0 and r.stdout == v, (k, r.stderr)
    assert kpm(b, "fetched_keys_total") == 40 - pushed
    assert kpm(a, "served_gets_total") >= 1
    # and over b's Unix socket (the shared slab), now all local to b
    for k in list(vals)[:5]:
        r = kv(b, tok, "get", k, tcp=False)
        assert r.returncode == 0 and r.stdout == vals[k]
    # a miss everywhere is a miss, quickly
    t0 = time.time()
    r = kv(b, tok, "get", "nowhere")
    assert r.returncode != 0 and time.time() - t0 < 5


def test_shared_memory_clients_on_both_sides(etcd, make_daemon, tmp_path):
    """What vLLM does: RESERVE/COMMIT through the slab on one node, then
    LOOKUP and ACQUIRE through the slab on another."""
    (a, b), tok = pool(make_daemon, etcd, tmp_path)
    vals = {f"shm-{i}": os.urandom(65536) for i in range(24)}
    for k, v in vals.items():
        r = kv(a, tok, "put", k, stdin=v, tcp=False)
        assert r.returncode == 0, r.stderr
    pushed = settled_pushes(a)
    for k, v in vals.items():
        r = kv(b, tok, "get", k, tcp=False)
        assert r.returncode == 0 and r.stdout == v, (k, r.stderr)
    assert kpm(b, "fetched_keys_total") + pushed == len(vals)


def test_a_home_that_died_costs_misses_not_errors(etcd, make_daemon, tmp_path):
    (a, b), tok = pool(make_daemon, etcd, tmp_path)
    vals = {f"k{i}": os.urandom(4096) for i in range(30)}
    for k, v in vals.items():
        assert kv(a, tok, "put", k, stdin=v).returncode == 0
    pushed = settled_pushes(a)
    assert 1 <= pushed < 30
    a.proc.kill()
    a.proc.wait()
    # b: what a sent home to b reads; what lived on a only is a miss, each
    # within the pool's deadline (300 ms) and the client's round trip
    hits = 0
    for k, v in vals.items():
        t0 = time.time()
        r = kv(b, tok, "get", k)
        assert time.time() - t0 < 3
        if r.returncode == 0:
            assert r.stdout == v
            hits += 1
    assert hits == pushed
    assert kpm(b, "fetched_keys_total") == 0
    assert b.is_ready()
    a.stop(expect_rc=None)


def test_a_hung_home_costs_its_deadline_then_misses(etcd, make_daemon, tmp_path):
    """A home that does not answer (stopped, as a partition looks): the
    fetch waits at most cluster.kv_timeout_ms (here 300 ms) and a little,
    then the key is a miss; a stopping node with a fetch in flight exits
    cleanly."""
    (a, b), tok = pool(make_daemon, etcd, tmp_path, timeout_ms="300")
    vals = {f"h{i}": os.urandom(2048) for i in range(20)}
    for k, v in vals.items():
        assert kv(a, tok, "put", k, stdin=v).returncode == 0
    pushed = settled_pushes(a)
    a.proc.send_signal(signal.SIGSTOP)
    try:
        slow = []
        for k, v in vals.items():
            t0 = time.time()
            r = kv(b, tok, "get", k)
            took = time.time() - t0
            assert took < 3, took
            if took > 0.25:
                slow.append(k)
            assert r.returncode != 0 or r.stdout == v
        assert slow                            # the fetches waited their deadline
        assert kpm(b, "fetch_failures_total") >= 1
        # b stops while a GET of it waits on the hung home (a key homed on
        # the hung node: one that waited above, and is still not on b)
        addr = f"127.0.0.1:{b.kv_port}"
        p = subprocess.Popen([conftest.bin_path("openlake"), "kv", "get", slow[0],
                              "--addr", addr, "--token-file", tok, "--ns", "pool"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.1)
        b.stop()                               # exit 0, no sanitizer report
        assert p.wait(timeout=30) != 0         # a miss, or the connection gone
    finally:
        a.proc.send_signal(signal.SIGCONT)
    assert pushed >= 1


def test_values_larger_than_a_calls_share(etcd, make_daemon, tmp_path):
    """Values over a quarter of the node RPC's reply window are asked again
    alone, with room for them; a small window still works."""
    (a, b), tok = pool(make_daemon, etcd, tmp_path,
                       extra=["--cluster.rpc-window-bytes", "4194304"])
    vals = {f"big{i}": os.urandom(1536 * 1024) for i in range(4)}
    for k, v in vals.items():
        r = kv(a, tok, "put", k, stdin=v)
        assert r.returncode == 0, r.stderr
    pushed = settled_pushes(a)
    for k, v in vals.items():
        r = kv(b, tok, "get", k)
        assert r.returncode == 0 and r.stdout == v, (k, r.stderr)
    assert kpm(b, "fetched_keys_total") == len(vals) - pushed >= 1


def test_a_long_prefix_is_fetched_whole(etcd, make_daemon, tmp_path):
    """200 values of 256 KiB (50 MiB: far more than one call or one node
    RPC window) put through one node, then looked up and read in one batch
    through the other, over the shared slab as vLLM reads: every one there,
    byte for byte."""
    from openlake_client import Client
    (a, b), tok = pool(make_daemon, etcd, tmp_path, timeout_ms="5000")
    token = open(tok).read().strip()
    keys = [f"long-{i}".encode() for i in range(200)]
    vals = [os.urandom(256 * 1024) for _ in keys]
    with Client(str(a.data / "kv.sock"), token=token, namespace="pool",
                value_size=256 * 1024) as ca:
        for i in range(0, 200, 20):
            assert ca.put(keys[i:i + 20], vals[i:i + 20]) == [0] * 20
    pushed = settled_pushes(a)
    with Client(str(b.data / "kv.sock"), token=token, namespace="pool",
                value_size=256 * 1024) as cb:
        present, leading = cb.exists(keys)
        assert leading == 200 and all(present)
        outs = [bytearray(256 * 1024) for _ in keys]
        lens = cb.get(keys, outs)
        assert lens == [256 * 1024] * 200
        assert all(bytes(o) == v for o, v in zip(outs, vals))
    assert kpm(b, "fetched_keys_total") == 200 - pushed


# ---- cluster.kv_replicas: r homes per key ----------------------------------------------

M64 = (1 << 64) - 1


def _mix(z):
    """splitmix64's finaliser (cluster/place.h)."""
    z ^= z >> 30
    z = (z * 0xBF58476D1CE4E5B9) & M64
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def _log2_q32(x):
    """ol_place_log2_q32, step by step as cluster/place.h writes it."""
    x = x or 1
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


def homes(ns, key, ids, r):
    """A Python twin of placement (docs/cluster.md "Placement") for members
    of equal weight (the nodes of pool() have the same KV capacity): the ids
    ranked by d ascending, then id; the first r."""
    lo = kvwire.key_hash(ns, key)[0]

    def d(i):
        return 64 * 2**32 - _log2_q32(_mix(lo ^ _mix((i + 0x9E3779B97F4A7C15) & M64)))
    return sorted(ids, key=lambda i: (d(i), i))[:r]


def test_the_placement_twin_agrees_with_the_rule():
    # tests/unit/test_cluster_place.c's fixed vectors
    assert _log2_q32(0xDEADBEEFCAFEF00D) == 274013844226
    lo = 0x0123456789ABCDEF
    assert 64 * 2**32 - _log2_q32(_mix(lo ^ _mix((42 + 0x9E3779B97F4A7C15) & M64))) == 5848607936


def replicated(make_daemon, etcd, tmp_path, r):
    """4 nodes with cluster.kv_replicas = r; 64 values of 64 KiB put through
    node 1 over TCP, every push answered. Returns the nodes, the token, the
    values and each key's homes (ids)."""
    # a lease of 10 s: a killed node stays in the others' placement while the
    # test reads (after it left, its keys would have new homes); a deadline
    # of 2 s: four sanitizer builds on a small machine answer every push
    nodes, tok = pool(make_daemon, etcd, tmp_path, n=4, timeout_ms="2000",
                      extra=["--cluster.kv-replicas", str(r), "--cluster.lease-ttl-secs", "10"])
    vals = {f"rep-{i}": os.urandom(65536) for i in range(64)}
    for k, v in vals.items():
        res = kv(nodes[0], tok, "put", k, stdin=v)
        assert res.returncode == 0, res.stderr
    where = {k: homes(b"pool", k.encode(), [1, 2, 3, 4], r) for k in vals}
    # one push for each home but node 1, each answered by that home
    pushed = settled_pushes(nodes[0])
    assert pushed == sum(len([h for h in hs if h != 1]) for hs in where.values())
    for i in (2, 3, 4):
        assert kpm(nodes[i - 1], "served_puts_total") == sum(i in hs for hs in where.values())
    return nodes, tok, vals, where


def test_with_two_homes_a_dead_node_loses_no_block(etcd, make_daemon, tmp_path):
    nodes, tok, vals, where = replicated(make_daemon, etcd, tmp_path, 2)
    # each home holds its copy: read on every home but node 1, nothing is
    # fetched (a home missing its copy would fetch it from the other)
    for k, hs in where.items():
        for h in hs:
            if h != 1:
                res = kv(nodes[h - 1], tok, "get", k)
                assert res.returncode == 0 and res.stdout == vals[k], (k, h, res.stderr)
    for d in nodes[1:]:
        assert kpm(d, "fetched_keys_total") == 0
    # node 2 dies: the first home of some keys, the only other copy of
    # those it shares with node 1 is node 1's
    dead = nodes[1]
    assert sum(hs[0] == 2 for hs in where.values()) >= 5
    dead.proc.kill()
    dead.proc.wait()
    reader = nodes[3]
    for k in sorted(vals, key=lambda k: where[k][0] != 2):    # those homed first on 2 first
        t0 = time.time()
        res = kv(reader, tok, "get", k)
        assert time.time() - t0 < 3
        assert res.returncode == 0 and res.stdout == vals[k], (k, where[k], res.stderr)
    # the keys node 4 does not hold came from a home: those first homed on
    # the dead node from their second home (at once, before node 2 left
    # the membership: its connection was down)
    assert kpm(reader, "fetched_keys_total") == sum(4 not in hs for hs in where.values())
    assert kpm(reader, "fetched_later_home_total") >= 1
    assert reader.is_ready()
    dead.stop(expect_rc=None)


def test_with_two_homes_a_hung_home_costs_part_of_the_deadline(etcd, make_daemon, tmp_path):
    """A first home that does not answer (stopped, as a partition looks,
    its connection still up): its call gets half the fetch's deadline
    (2 s here), then the key is asked of its second home: found, and the
    wait never longer than the deadline."""
    nodes, tok, vals, where = replicated(make_daemon, etcd, tmp_path, 2)
    hung, reader = nodes[1], nodes[3]
    keys = [k for k, hs in where.items() if hs[0] == 2 and 4 not in hs][:4]
    assert keys
    hung.proc.send_signal(signal.SIGSTOP)
    try:
        for k in keys:
            t0 = time.time()
            res = kv(reader, tok, "get", k)
            took = time.time() - t0
            assert res.returncode == 0 and res.stdout == vals[k], (k, where[k], res.stderr)
            assert 0.9 < took < 2.0 + 1.0, took    # its share, not the whole deadline
        assert kpm(reader, "fetched_later_home_total") == len(keys)
        assert kpm(reader, "fetch_failures_total") == len(keys)
    finally:
        hung.proc.send_signal(signal.SIGCONT)


def test_with_one_home_a_dead_node_loses_its_blocks(etcd, make_daemon, tmp_path):
    """The same with cluster.kv_replicas = 1 (the default): the dead home's
    blocks are misses, within the deadline."""
    nodes, tok, vals, where = replicated(make_daemon, etcd, tmp_path, 1)
    dead, reader = nodes[1], nodes[3]
    lost = {k for k, hs in where.items() if hs == [2]}
    assert len(lost) >= 5
    dead.proc.kill()
    dead.proc.wait()
    for k, v in vals.items():
        t0 = time.time()
        res = kv(reader, tok, "get", k)
        assert time.time() - t0 < 3
        if k in lost:
            assert res.returncode != 0, k
        else:
            assert res.returncode == 0 and res.stdout == v, (k, res.stderr)
    assert kpm(reader, "fetched_later_home_total") == 0
    assert reader.is_ready()
    dead.stop(expect_rc=None)


@pytest.mark.parametrize("value, says", [
    ("0", "--cluster.kv-replicas: expected an integer from 1 to 16"),
    ("17", "--cluster.kv-replicas: expected an integer from 1 to 16"),
    ("two", "--cluster.kv-replicas: expected an integer from 1 to 16"),
])
def test_kv_replicas_out_of_range_is_refused(make_daemon, tmp_path, value, says):
    d = make_daemon(start=False, args=["--cluster.name", "c1", "--cluster.etcd", "http://h:1",
                                       "--cluster.secret-file", secret(tmp_path),
                                       "--cluster.kv-replicas", value])
    d.start(wait=False)
    assert d.proc.wait(30) == 2
    d.stop(expect_rc=2)
    assert says in d.stderr()
