"""The node RPC over UCX (transport = "ucx"; docs/node-protocol.md
"Transports"): the same frames, handshake and credits over UCP stream
endpoints, and the KV pool's remote reads (RMA: a home grants where a
value is in its slab, the fetcher reads it straight out; docs/cluster.md
"The KV pool"). Here UCX runs over its tcp transport (UCX_TLS=tcp: the
real library on loopback, no RDMA hardware; UCX emulates the reads with
its active messages). Real etcd, real daemons, the real CLI.
"""
import json
import os
import signal
import socket
import threading
import time

import pytest

import conftest
from openlake_client import Client
import faults
import placement
from test_cli_kv import cli
from test_cluster import ETCD, etcd, wait_for
from test_cluster_kv import homed_on, joined, kpm, kv, pool, settled_pushes
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



# ---- remote reads (RMA) ------------------------------------------------------------

def rma_pool(make_daemon, etcd, tmp_path, per_node, timeout_ms="2000"):
    """A pool of len(per_node) nodes on transport "ucx", node i+1 with the
    extra arguments per_node[i]."""
    s = secret(tmp_path)
    tok = tmp_path / "kv.token"
    tok.write_text(os.urandom(32).hex() + "\n")
    tok.chmod(0o600)
    nodes = [make_daemon(args=[
        "--cluster.name", "c1", "--cluster.etcd", etcd.url, "--self-id", str(i + 1),
        "--cluster.lease-ttl-secs", "2", "--rpc-addr", f"127.0.0.1:{conftest.free_port()}",
        "--cluster.etcd-timeout-ms", "1000", "--cluster.secret-file", s,
        "--kv-token-file", str(tok), "--cluster.kv-timeout-ms", timeout_ms,
        "--transport", "ucx", "--rdma.backend", "ucx", *extra])
        for i, extra in enumerate(per_node)]
    joined(nodes)
    return nodes, str(tok)


SIZES = [4096, 4097, 65536, 300000, 1 << 20, 2 << 20]


@needs_ucx
def test_values_fetched_across_nodes_move_by_rma(etcd, make_daemon, tmp_path):
    """b misses keys homed on a: a answers where each is in its slab, b
    reads the bytes out of it (the rma metrics move by the keys and their
    bytes; the stream carries the grants, not the values), and what b gets
    is byte for byte what was stored, 4 KiB .. 2 MiB."""
    (a, b), tok = rma_pool(make_daemon, etcd, tmp_path, [[], []])
    keys = homed_on(1, 2, 2 * len(SIZES), "rma")
    vals = {k: os.urandom(SIZES[i % len(SIZES)]) for i, k in enumerate(keys)}
    for k, v in vals.items():
        r = kv(a, tok, "put", k, stdin=v)
        assert r.returncode == 0, r.stderr
    recv0 = metric(b, "openlake_rpc_peer_received_bytes_total", peer=1)
    for k, v in vals.items():
        r = kv(b, tok, "get", k)
        assert r.returncode == 0 and r.stdout == v, (k, len(r.stdout), r.stderr)
    total = sum(len(v) for v in vals.values())
    assert kpm(b, "fetched_keys_total") == len(vals)
    assert kpm(b, "rma_keys_total") == len(vals)
    assert kpm(b, "rma_bytes_total") == total
    assert kpm(b, "rma_retries_total") == 0
    assert kpm(a, "served_grants_total") == len(vals)
    # straight into b's slab: the values that fit the session's slots (the
    # CLI's: 64 KiB), each checked there and committed; the others through
    # a buffer of their own
    assert kpm(b, "rma_direct_keys_total") == sum(len(v) <= 65536 for v in vals.values())
    # the replies on the stream: headers and grants, no value bytes
    streamed = metric(b, "openlake_rpc_peer_received_bytes_total", peer=1) - recv0
    assert streamed < len(vals) * 200, (streamed, total)
    # local now (stored as fetched): read again with no fetch
    for k, v in list(vals.items())[:3]:
        r = kv(b, tok, "get", k, tcp=False)
        assert r.returncode == 0 and r.stdout == v
    assert kpm(b, "fetched_keys_total") == len(vals)
    # a session of 2 MiB values (as a vLLM worker's): every one read
    # straight into a slot of b's
    big = {k: os.urandom(2 << 20) for k in homed_on(1, 2, 6, "rma-big")}
    with Client(f"127.0.0.1:{a.kv_port}", token_file=tok, namespace="pool",
                value_size=2 << 20) as c:
        assert c.put(list(big), list(big.values())) == [0] * len(big)
    direct = kpm(b, "rma_direct_keys_total")
    out = [bytearray(2 << 20) for _ in big]
    with Client(f"127.0.0.1:{b.kv_port}", token_file=tok, namespace="pool",
                value_size=2 << 20) as c:
        assert c.get(list(big), out) == [2 << 20] * len(big)
    assert all(bytes(o) == v for o, v in zip(out, big.values()))
    assert kpm(b, "rma_direct_keys_total") == direct + len(big)
    for d in (a, b):
        assert metric(d, "openlake_rpc_refused_total", cause="protocol") == 0
        d.stop()


@needs_ucx
def test_a_node_with_rdma_none_moves_values_as_copies(etcd, make_daemon, tmp_path):
    """rdma.backend = "none" on b: b neither maps its slab nor asks for
    grants, so values move both ways as copies over the stream, and a node
    that would read remotely (a) works with it all the same."""
    (a, b), tok = rma_pool(make_daemon, etcd, tmp_path, [[], ["--rdma.backend", "none"]])
    on_a, on_b = homed_on(1, 2, 4, "cp"), homed_on(2, 2, 4, "cp")
    vals = {k: os.urandom(SIZES[i % len(SIZES)]) for i, k in enumerate(on_a + on_b)}
    for k in on_a:
        assert kv(a, tok, "put", k, stdin=vals[k]).returncode == 0
    for k in on_b:
        assert kv(b, tok, "put", k, stdin=vals[k]).returncode == 0
    for d, ks in ((b, on_a), (a, on_b)):
        for k in ks:
            r = kv(d, tok, "get", k)
            assert r.returncode == 0 and r.stdout == vals[k], (k, r.stderr)
        assert kpm(d, "fetched_keys_total") == len(ks)
    for d in (a, b):
        assert kpm(d, "rma_keys_total") == 0 and kpm(d, "served_grants_total") == 0
        assert metric(d, "openlake_rpc_refused_total", cause="protocol") == 0
        d.stop()


@needs_ucx
@pytest.mark.skipif(not faults.build_has_faults(), reason=faults.SKIP_REASON)
def test_a_grant_whose_read_fails_is_asked_again_as_a_copy(etcd, make_daemon, tmp_path):
    """A remote read that fails (the fault hook fails b's second get: the
    first key's slot header, as a slot given to another key would fail
    the generation check) costs nothing but a copy: the key is asked again
    with a plain KV_GET, counted as a retry; with every read failing, every
    key comes as a copy; the bytes are always the stored ones."""
    # 5 s: a read, a failed one and a copy each within the fetch's deadline,
    # on a loaded machine under ASan too
    (a, b), tok = rma_pool(make_daemon, etcd, tmp_path,
                           [[], ["--http.debug-endpoints", "true"]], timeout_ms="5000")
    keys = homed_on(1, 2, 8, "ft")
    vals = {k: os.urandom(SIZES[i % len(SIZES)]) for i, k in enumerate(keys)}
    for k, v in vals.items():
        assert kv(a, tok, "put", k, stdin=v).returncode == 0
    assert faults.post(b, "rma:op=read,nth=2,err=EIO")[0] == 200
    for k in keys[:4]:
        r = kv(b, tok, "get", k)
        assert r.returncode == 0 and r.stdout == vals[k], (k, r.stderr)
    assert faults.injected(b, "rma") == 1
    assert kpm(b, "rma_retries_total") == 1
    assert kpm(b, "rma_keys_total") == 3
    assert kpm(b, "fetched_keys_total") == 4
    assert faults.post(b, "rma:op=read,persist,err=EIO")[0] == 200
    for k in keys[4:]:
        r = kv(b, tok, "get", k)
        assert r.returncode == 0 and r.stdout == vals[k], (k, r.stderr)
    assert kpm(b, "rma_retries_total") == 5
    assert kpm(b, "rma_keys_total") == 3
    assert kpm(b, "fetched_keys_total") == 8
    for d in (a, b):
        d.stop()


@needs_ucx
def test_slots_reused_while_they_are_read_never_give_a_wrong_byte(etcd, make_daemon, tmp_path):
    """a's slab holds 32 1 MiB values: while b fetches keys homed on a,
    another client keeps storing new ones on a, so a evicts and gives the
    slots granted to b to other keys between the grant and b's read. Every
    value b returns is the stored one (a read that saw a reused slot failed
    its generation check and was asked again as a copy, or the key was a
    miss); bounded: 6 rounds of 8 keys."""
    # 32 MiB each (equal: placement weighs members by their slabs)
    slab = ["--kv-slab.capacity-gb", "0.03125"]
    (a, b), tok = rma_pool(make_daemon, etcd, tmp_path, [slab, slab])
    stop = threading.Event()

    def churn():
        i = 0
        while not stop.is_set() and i < 400:
            kv(a, tok, "put", f"churn-{i}", stdin=os.urandom(1 << 20))
            i += 1

    t = threading.Thread(target=churn)
    t.start()
    wrong = hits = 0
    try:
        for rnd in range(6):
            keys = homed_on(1, 2, 8, f"reuse{rnd}")
            vals = {k: os.urandom(1 << 20) for k in keys}
            for k, v in vals.items():
                kv(a, tok, "put", k, stdin=v)
            for k, v in vals.items():
                r = kv(b, tok, "get", k)
                if r.returncode == 0:
                    hits += 1
                    wrong += r.stdout != v
    finally:
        stop.set()
        t.join()
    assert wrong == 0
    assert hits >= 1 and kpm(b, "rma_keys_total") >= 1
    print(f"reuse: {hits} of 48 read, rma keys {kpm(b, 'rma_keys_total')}, "
          f"retries {kpm(b, 'rma_retries_total')}, misses {kpm(b, 'fetch_misses_total')}, "
          f"fetched {kpm(b, 'fetched_keys_total')} grants {kpm(a, 'served_grants_total')} gets {kpm(a, 'served_gets_total')} connects {metric(b, 'openlake_rpc_peer_connects_total', peer=1)}")
    for d in (a, b):
        d.stop()


@needs_ucx
def test_a_peer_killed_while_its_values_are_read_costs_misses_not_a_crash(etcd, make_daemon,
                                                                        tmp_path):
    """a stops (SIGSTOP) for longer than the pool's deadline while b reads
    2 MiB values out of its slab, then goes on (SIGCONT): reads it had not
    answered are misses at b's deadline and complete late, into buffers b
    kept for them; then a dies (SIGKILL): b's reads in flight end with the
    endpoint's error. The keys are misses or their whole bytes, b stays
    up and exits cleanly (no sanitizer report in the ASan build)."""
    (a, b), tok = rma_pool(make_daemon, etcd, tmp_path, [[], []])
    keys = homed_on(1, 2, 40, "kill")
    vals = {k: os.urandom(2 << 20) for k in keys}
    for k, v in vals.items():
        assert kv(a, tok, "put", k, stdin=v).returncode == 0
    got = []

    def reader():
        for k in keys:
            r = kv(b, tok, "get", k)
            got.append((k, r.returncode, r.stdout))

    t = threading.Thread(target=reader)
    t.start()
    wait_for(lambda: len(got) >= 4, "some read", timeout=30)
    a.proc.send_signal(signal.SIGSTOP)
    time.sleep(3)                                   # > cluster.kv_timeout_ms (2 s)
    a.proc.send_signal(signal.SIGCONT)
    n = len(got)
    wait_for(lambda: len(got) >= min(n + 4, len(keys)), "reads again", timeout=60)
    a.proc.kill()
    a.proc.wait()
    t.join(120)
    assert not t.is_alive()
    for k, rc, out in got:
        assert rc != 0 or out == vals[k], k          # a miss, or the right bytes
    # the reads before the stop were whole (after it, a may have lost its
    # 2 s lease meanwhile: its keys are then misses until it is back)
    assert all(rc == 0 for _, rc, _ in got[:4])
    assert b.is_ready()
    a.stop(expect_rc=None)
    b.stop()


@needs_ucx
def test_rdma_devices_pick_the_ucx_context_s_devices(etcd, make_daemon, tmp_path, monkeypatch):
    """rdma.devices is UCX_NET_DEVICES of the node RPC's context: a device
    that does not exist leaves UCX nothing to use (the node does not start,
    and says why); one that does (lo, under UCX_TLS=tcp) works; the
    environment's UCX_NET_DEVICES wins over it."""
    s = secret(tmp_path)
    bad = node(make_daemon, etcd, 1, s, start=False)
    bad.args += ["--transport", "ucx", "--rdma.devices", "nosuchdev0"]
    bad.start(wait=False)
    rc = bad.proc.wait(60)
    bad.stop(expect_rc=rc)
    assert rc != 0 and "ucp_init" in bad.stderr(), bad.stderr()[-2000:]
    a = node(make_daemon, etcd, 1, s, start=False)
    a.args += ["--transport", "ucx", "--rdma.devices", "lo"]
    a.start()
    monkeypatch.setenv("UCX_NET_DEVICES", "lo")
    b = node(make_daemon, etcd, 2, s, start=False)
    b.args += ["--transport", "ucx", "--rdma.devices", "nosuchdev0"]
    b.start()
    wait_for(lambda: up(a, 2) == 1 and up(b, 1) == 1, "connected over lo")
    for d in (a, b):
        d.stop()
