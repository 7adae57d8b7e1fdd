"""The node RPC over UCX (transport = "ucx"; docs/node-protocol.md
"Transports"): the same frames, handshake and credits over UCP stream
endpoints. Here UCX runs over its tcp transport (UCX_TLS=tcp: the real
library on loopback, no RDMA hardware). Real etcd, real daemons, the real
CLI; the KV pool on top needs no change.
"""
import json
import os
import socket
import time

import pytest

from test_cli_kv import cli
from test_cluster import ETCD, etcd, wait_for
from test_cluster_kv import kpm, kv, pool, settled_pushes
from test_cluster_rpc import (AK, SK, metric, node, secret, served_only_pings, up,
                              wait_proofs_refused)
from test_http import hermetic_openlake_env

assert hermetic_openlake_env  # autouse fixture, imported to apply here too
assert etcd                   # the fixture: one etcd member per test


def built_with_ucx():
    r = cli("--json", "version")
    return r.returncode == 0 and json.loads(r.stdout)["ucx"] is True


HAVE_UCX = built_with_ucx()
pytestmark = pytest.mark.skipif(not ETCD, reason="etcd is not installed (scripts/deps.sh test "
                                "installs etcd-server)")
needs_ucx = pytest.mark.skipif(not HAVE_UCX, reason="built without UCX (libucx-dev)")


@pytest.fixture(autouse=True)
def ucx_over_tcp(monkeypatch):
    monkeypatch.setenv("UCX_TLS", "tcp")


def ucx_node(make_daemon, etcd, nid, secret_file, rpc=None):
    d = node(make_daemon, etcd, nid, secret_file, start=False, rpc=rpc)
    d.args += ["--transport", "ucx"]
    return d.start()


@needs_ucx
def test_a_value_put_on_one_node_is_read_on_the_others_over_ucx(etcd, make_daemon, tmp_path):
    (a, b, c), tok = pool(make_daemon, etcd, tmp_path, n=3, extra=["--transport", "ucx"])
    vals = {f"u-{i}": os.urandom(1000 + 517 * i) for i in range(30)}
    for k, v in vals.items():
        r = kv(a, tok, "put", k, stdin=v)
        assert r.returncode == 0, r.stderr
    pushed = settled_pushes(a)        # a sent the keys homed on b and c home
    assert 5 <= pushed <= 28
    for d in (b, c):
        for k, v in vals.items():
            r = kv(d, tok, "get", k)
            assert r.returncode == 0 and r.stdout == v, (k, r.stderr)
    # some were fetched from their homes over the node RPC, not all local
    assert kpm(b, "fetched_keys_total") + kpm(c, "fetched_keys_total") >= 1
    assert kpm(a, "served_gets_total") >= 1
    for d in (a, b, c):
        assert metric(d, "openlake_rpc_refused_total", cause="protocol") == 0
        assert d.is_ready()


@needs_ucx
def test_strangers_and_wrong_secrets_on_the_ucx_listener_get_nothing(etcd, make_daemon,
                                                                     tmp_path):
    s = secret(tmp_path)
    a = ucx_node(make_daemon, etcd, 1, s)
    addr = ("127.0.0.1", a.rpc_port)
    rss0 = a.rss_kib()
    # plain TCP to the UCX listener: not UCX's connection protocol, so not
    # even a frame of ours comes back; garbage, a truncated OLRP header,
    # silence, and a flood: the node stays up and holds nothing
    for junk in (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"OLRP\x01\x01\x00", os.urandom(4096)):
        with socket.create_connection(addr) as sk:
            sk.sendall(junk)
            sk.settimeout(2)
            try:
                got = sk.recv(64)
            except (socket.timeout, ConnectionResetError):
                got = b""
            assert not got.startswith(b"OLRP"), got
    flood = [socket.create_connection(addr) for _ in range(100)]
    time.sleep(0.5)
    for sk in flood:
        sk.close()
    assert a.is_ready()
    assert metric(a, "openlake_rpc_requests_total") == 0
    # a node with the secret connects (the listener still works); one with
    # another secret gets no connection, both ways
    b = ucx_node(make_daemon, etcd, 2, s)
    c = ucx_node(make_daemon, etcd, 3, secret(tmp_path, "other"))
    wait_for(lambda: up(a, 2) == 1 and up(b, 1) == 1, "1 and 2 connected over ucx")
    wait_proofs_refused(((a, 3), (b, 3), (c, 1), (c, 2)))
    assert up(a, 3) == 0 and up(c, 1) == 0 and up(c, 2) == 0
    assert served_only_pings(a, 1, [b])
    assert a.is_ready() and a.rss_kib() - rss0 < 64 * 1024, (rss0, a.rss_kib())
    for d in (a, b, c):
        d.stop()                      # exit 0, no sanitizer report


@needs_ucx
def test_a_killed_peer_fails_its_calls_at_once_and_is_back_when_it_restarts(etcd, make_daemon,
                                                                            tmp_path):
    """Over UCX as over TCP: a peer process that dies is down at once (its
    endpoint's error, no deadline waited out), its keys are misses within
    the pool's deadline, and once it restarts on the same rpc_addr the
    nodes connect again."""
    s = secret(tmp_path)
    a = ucx_node(make_daemon, etcd, 1, s)
    b = ucx_node(make_daemon, etcd, 2, s)
    wait_for(lambda: up(a, 2) == 1 and up(b, 1) == 1, "connected over ucx")
    b.proc.kill()
    b.proc.wait()
    t0 = time.time()
    wait_for(lambda: up(a, 2) == 0, "2 down at 1", timeout=5)
    assert time.time() - t0 < 2                       # its endpoint failed: no timeout
    wait_for(lambda: up(a, 2) is None, "2 forgotten", timeout=15)   # its lease ran out
    b.stop(expect_rc=None)
    b2 = ucx_node(make_daemon, etcd, 2, s, rpc=b.rpc_port)
    wait_for(lambda: up(a, 2) == 1 and up(b2, 1) == 1, "2 back")
    assert metric(a, "openlake_rpc_peer_connects_total", peer=2) == 1   # a new peer entry
    for d in (a, b2):
        d.stop()


@needs_ucx
@pytest.mark.parametrize("transport", ["tcp", "ucx"])
def test_the_probe_measures_every_pair_over_either_transport(etcd, make_daemon, tmp_path, transport):
    """cluster topology --probe: PING's round trip and bytes per second
    both ways, over UCX, and over TCP on the same machine in the same run
    to compare (the figures are printed: pytest -s)."""
    s = secret(tmp_path)
    skf = tmp_path / "sk"
    skf.write_text(SK + "\n")
    skf.chmod(0o600)
    nodes = []
    for i in (1, 2):
        d = node(make_daemon, etcd, i, s, start=False)
        d.args += ["--transport", transport]
        d.env.update({"OPENLAKE_ACCESS_KEY": AK, "OPENLAKE_SECRET_KEY_FILE": str(skf)})
        nodes.append(d.start())
    wait_for(lambda: up(nodes[0], 2) == 1 and up(nodes[1], 1) == 1, "connected over ucx")
    r = cli("--json", "cluster", "topology", "--etcd", etcd.url, "--cluster", "c1", "--probe",
            "--mib", "16", "--access-key", AK, "--secret-key-file", str(skf))
    assert r.returncode == 0, r.stderr
    for n in json.loads(r.stdout)["nodes"]:
        for p in n["probe"]:
            assert p["ok"] and p["error"] == "", p
            assert 0 < p["rtt_us"] < 100000
            assert p["to_bytes_per_s"] > 1e6 and p["from_bytes_per_s"] > 1e6, p
            print(f"{transport} probe {n['id']}->{p['peer']}: rtt {p['rtt_us']} us, "
                  f"to {p['to_bytes_per_s'] / 1e9:.2f} GB/s, from {p['from_bytes_per_s'] / 1e9:.2f} GB/s")


@pytest.mark.skipif(HAVE_UCX, reason="this build has UCX")
def test_a_build_without_ucx_refuses_the_transport(make_daemon, tmp_path):
    d = make_daemon(start=False, args=["--cluster.name", "c1", "--cluster.etcd", "http://h:1",
                                       "--transport", "ucx", "--cluster.secret-file",
                                       secret(tmp_path)])
    d.start(wait=False)
    assert d.proc.wait(30) == 2
    d.stop(expect_rc=2)
    assert '"ucx": this build has no UCX' in d.stderr()

