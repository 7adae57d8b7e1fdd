"""The KV service over UCX (kv_ucx_addr; docs/kv-protocol.md, the vLLM
connector's openlake_device "ucx"): clients on UCP stream endpoints speak
the TCP protocol, bridged by the daemon to its KV server. UCX runs over its
tcp transport here (UCX_TLS=tcp: the real library on loopback, no RDMA
hardware). Real daemons, the real C client (the Python extension and the
CLI), real etcd for the cluster's routing.
"""
import json
import os
import re
import subprocess
import time
import urllib.request

import pytest

import conftest
import placement
from openlake_client import Client
from openlake_client.connector.config import OpenLakeConfig
from openlake_client.connector.store import _Store
from test_cli_kv import cli
from test_cluster import ETCD, etcd, wait_for
from test_cluster_kv import kpm, pool
from test_cluster_ucx import HAVE_UCX
from test_http import hermetic_openlake_env

assert hermetic_openlake_env  # autouse fixture, imported to apply here too
assert etcd                   # the fixture: one etcd member per test

pytestmark = pytest.mark.skipif(not HAVE_UCX, reason="built without UCX (libucx-dev)")

NS = "ucx"


@pytest.fixture(autouse=True)
def ucx_over_tcp(monkeypatch):
    monkeypatch.setenv("UCX_TLS", "tcp")   # the daemons' and this process's UCX


def metric(d, name):
    text = urllib.request.urlopen(d.url + "/_openlake/metrics").read().decode()
    m = re.search(r"^%s (\d+)$" % re.escape(name), text, re.M)
    return int(m.group(1)) if m else None


@pytest.fixture
def kvd_ucx(make_daemon, tmp_path):
    tok = tmp_path / "kv.token"
    tok.write_text(os.urandom(32).hex() + "\n")
    tok.chmod(0o600)
    port = conftest.free_port()
    d = make_daemon(args=["--kv-token-file", str(tok), "--kv-ucx-addr", f"127.0.0.1:{port}",
                          "--kv-hello-timeout-ms", "1000"], threads=2)
    return d, str(tok), f"ucx://127.0.0.1:{port}"


def test_a_ucx_client_reads_and_writes_what_tcp_clients_see(kvd_ucx):
    d, tok, addr = kvd_ucx
    vals = {b"small-%d" % i: os.urandom(1 + 997 * i) for i in range(40)}
    vals[b"big"] = os.urandom(6 << 20)             # over one data frame (4 MiB)
    with Client(addr, token_file=tok, namespace=NS) as u:
        assert not u.shared_memory
        keys = list(vals)
        assert u.put(keys, [vals[k] for k in keys]) == [0] * len(keys)
        assert u.exists(keys + [b"nope"])[0] == [True] * len(keys) + [False]
        out = [bytearray(len(vals[k])) for k in keys]
        assert u.get(keys, out) == [len(vals[k]) for k in keys]
        assert all(bytes(o) == vals[k] for o, k in zip(out, keys))
        assert u.stats()["entries"] >= len(keys)
        assert u.members() == (0, 0, [])           # a node in no cluster
        # the bridge's buffer for the 6 MiB put is not kept once emptied
        # (at most 1 MiB stays per connection), the connection still open
        wait_for(lambda: metric(d, "openlake_kv_ucx_buffer_bytes") <= 1 << 20,
                 "the bridge's buffer given back")
    with Client(f"127.0.0.1:{d.kv_port}", token_file=tok, namespace=NS) as t:
        out = [bytearray(len(vals[k])) for k in vals]
        assert t.get(list(vals), out) == [len(v) for v in vals.values()]
        assert all(bytes(o) == v for o, v in zip(out, vals.values()))
        assert t.put([b"from-tcp"], [b"t" * 5000]) == [0]
    with Client(addr, token_file=tok, namespace=NS) as u:
        out = [bytearray(5000)]
        assert u.get([b"from-tcp"], out) == [5000] and bytes(out[0]) == b"t" * 5000
        assert u.delete([b"from-tcp"]) == [0]
        assert u.exists([b"from-tcp"])[0] == [False]
    # the CLI's kv takes the same address
    r = cli("kv", "put", "cli-key", "--addr", addr, "--token-file", tok, "--ns", NS,
            stdin=b"over ucx")
    assert r.returncode == 0, r.stderr
    r = cli("kv", "get", "cli-key", "--addr", addr, "--token-file", tok, "--ns", NS)
    assert r.returncode == 0 and r.stdout == b"over ucx", r.stderr
    # and the load test (openlake bench client), read and write, every byte checked
    for op in ("write", "read"):
        r = cli("--json", "bench", "client", "--target", addr, "--op", op, "--token-file", tok,
                "--seconds", "1", "--concurrency", "2", "--size", "65536")
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout)
        assert res["errors"] == 0 and res["ops"] > 0, res
    assert metric(d, "openlake_kv_ucx_accepted_total") >= 4
    text = urllib.request.urlopen(d.url + "/_openlake/metrics").read().decode()
    up = int(re.search(r'^openlake_kv_ucx_bytes_total\{direction="in"\} (\d+)$', text, re.M)[1])
    assert up > 6 << 20
    wait_for(lambda: metric(d, "openlake_kv_ucx_connections") == 0, "bridges closed")
    assert metric(d, "openlake_kv_ucx_buffer_bytes") == 0


def test_a_wrong_token_is_refused(kvd_ucx):
    d, tok, addr = kvd_ucx
    with pytest.raises(PermissionError):
        Client(addr, token="not-the-token", namespace=NS)
    wait_for(lambda: metric(d, "openlake_kv_ucx_connections") == 0, "bridges closed")


def test_nobody_listens_there(tmp_path):
    port = conftest.free_port()
    t0 = time.time()
    with pytest.raises(ConnectionError):
        Client(f"ucx://127.0.0.1:{port}", token="x" * 16, namespace=NS, timeout_ms=2000)
    assert time.time() - t0 < 10


def ucx_pool(make_daemon, etcd, tmp_path, n):
    ports = [conftest.free_port() for _ in range(n)]
    nodes, tok = pool(make_daemon, etcd, tmp_path, n=n,
                      per_node=lambda i: ["--kv-ucx-addr", f"127.0.0.1:{ports[i]}"])
    return nodes, tok, [f"127.0.0.1:{p}" for p in ports]


def test_members_on_the_ucx_listener_are_its_addresses(etcd, make_daemon, tmp_path):
    nodes, tok, uaddrs = ucx_pool(make_daemon, etcd, tmp_path, 3)

    def members(addr):
        with Client(addr, token_file=tok, namespace=NS) as c:
            r = c.members()
        return r if len(r[2]) == 3 else None
    rev, rep, got = wait_for(lambda: members("ucx://" + uaddrs[1]), "three members")
    assert rev > 0 and rep == 1
    assert [(m[0], m[2]) for m in got] == [(i + 1, a) for i, a in enumerate(uaddrs)]
    _, _, tcp = members(f"127.0.0.1:{nodes[1].kv_port}")
    assert [m[2] for m in tcp] == [f"127.0.0.1:{d.kv_port}" for d in nodes]


def test_the_connector_over_ucx_goes_straight_to_the_homes(etcd, make_daemon, tmp_path):
    """openlake_device "ucx", one node listed: every key saved on its home
    and read there, no push and no fetch between the nodes, as over TCP; a
    home that is down costs its keys' misses and dropped saves."""
    nodes, tok, uaddrs = ucx_pool(make_daemon, etcd, tmp_path, 3)
    wait_for(lambda: all(metric(d, 'openlake_cluster_members{cluster="c1"}') == 3
                         for d in nodes), "views")
    cfg = OpenLakeConfig.from_extra({"openlake_device": "ucx", "openlake_token_file": tok,
                                     "openlake_nodes": uaddrs[:1], "openlake_timeout_ms": 1000,
                                     "openlake_reconnect_secs": 0.2})
    store = _Store(cfg, NS, 4096, "worker")
    keys = [os.urandom(32) + bytes(6) for _ in range(60)]
    vals = [os.urandom(4096) for _ in keys]
    assert store.put(keys, vals) == [0] * len(keys)
    assert store.revision > 0
    where = [placement.homes([(1, 1), (2, 1), (3, 1)], NS.encode(), k)[0] for k in keys]
    for i, d in enumerate(nodes):
        with Client(f"127.0.0.1:{d.kv_port}", token_file=tok, namespace=NS) as c:
            assert c.stats()["entries"] == where.count(i + 1) > 0
    assert all(kpm(d, "pushes_total") == 0 and kpm(d, "fetched_keys_total") == 0 for d in nodes)
    out = [bytearray(4096) for _ in keys]
    assert store.get(keys, out) == [4096] * len(keys)
    assert all(bytes(o) == v for o, v in zip(out, vals))
    assert all(metric(d, "openlake_kv_ucx_accepted_total") >= 1 for d in nodes)
    dead = nodes[2]
    dead.proc.kill()
    dead.proc.wait()
    t0 = time.time()
    assert store.exists(keys) == [h != 3 for h in where]   # _Store: a flag per key
    out = [bytearray(4096) for _ in keys]
    assert [g == 4096 for g in store.get(keys, out)] == [h != 3 for h in where]
    assert time.time() - t0 < 15
    dead.stop(expect_rc=None)
    store.close()


def test_the_c_client_suite_over_ucx_and_raw_strangers(kvd_ucx):
    """The C client's TCP tests with the UCX address (two shards, threads,
    bad tokens and keys), and raw endpoints that never say HELLO: a silent
    one closed at the HELLO deadline, one flooding garbage closed at once;
    the daemon holds no bridge after them."""
    d, tok, addr = kvd_ucx
    env = dict(os.environ, OL_TEST_KV_SOCK=str(d.data / "kv.sock"), OL_TEST_KV_TCP=addr,
               OL_TEST_KV_TOKEN_FILE=tok, OL_TEST_KV_UCX=addr[len("ucx://"):])
    r = subprocess.run([conftest.bin_path("client_tests")], env=env, capture_output=True,
                       text=True, timeout=300)
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS client_ucx_strangers_are_dropped" in r.stdout
    assert "PASS client_put_get_lookup_across_shards_and_transports" in r.stdout
    wait_for(lambda: metric(d, "openlake_kv_ucx_connections") == 0, "bridges closed")
    with Client(addr, token_file=tok, namespace=NS) as u:   # and it still serves
        assert u.put([b"after"], [b"a"]) == [0]


def test_a_shutdown_with_ucx_clients_connected_is_clean(kvd_ucx):
    """SIGTERM while UCX clients hold connections (one idle, one that just
    put a value): the daemon stops within its shutdown timeout, exit 0, no
    sanitizer report (the bridges quiesced before the cores drain, then
    closed); the client sees its connection end, not a hang."""
    d, tok, addr = kvd_ucx
    idle = Client(addr, token_file=tok, namespace=NS, timeout_ms=3000)
    busy = Client(addr, token_file=tok, namespace=NS, timeout_ms=3000)
    assert busy.put([b"k"], [os.urandom(1 << 20)]) == [0]
    assert metric(d, "openlake_kv_ucx_connections") >= 2
    t0 = time.time()
    assert d.stop(timeout=20) == 0
    assert time.time() - t0 < 15
    with pytest.raises(OSError):
        busy.put([b"k2"], [b"x"])
    idle.close()
    busy.close()
