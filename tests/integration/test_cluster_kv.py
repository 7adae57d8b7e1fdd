"""The cluster's KV pool (docs/cluster.md "The KV pool"): every block key
has a home node; a node stores for its clients what they put, sends a copy
home when the home is another node, and fetches from their homes the keys
its clients miss. Real etcd, real daemons on loopback, the real CLI (the C
client library) over TCP and over the Unix socket (the shared slab).
"""
import json
import os
import re
import signal
import subprocess
import time
import urllib.request

import pytest

import conftest
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
    # cluster status reads each node's KV figures: what it holds, its hits
    # and misses (every key read on b was a hit, fetched or not; "nowhere"
    # a miss); the cores publish them every 100 ms
    time.sleep(0.3)
    r = cli("--json", "cluster", "status", "--etcd", etcd.url, "--cluster", "c1")
    assert r.returncode == 0, r.stderr
    st = {n["id"]: n["kv"] for n in json.loads(r.stdout)["nodes"]}
    total = sum(len(v) for v in vals.values())
    assert st[2]["hits"] == 45 and st[2]["misses"] == 1, st
    assert st[2]["used_ram_bytes"] == total and st[2]["used_disk_bytes"] == 0, st
    assert st[1]["used_ram_bytes"] == total and st[1]["hits"] == 0, st
    r = cli("cluster", "status", "--etcd", etcd.url, "--cluster", "c1")
    assert b"KV USED" in r.stdout and b"97.8%" in r.stdout, r.stdout


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
