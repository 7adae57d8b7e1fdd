"""The node RPC between openlaked processes (docs/node-protocol.md): real
etcd, real daemons on loopback, plain sockets as the stranger.

Every member of a cluster dials every other at the rpc_addr of its etcd
record and proves it holds the cluster secret (HMAC challenge both ways);
the metrics say which peers are up. Cases: three nodes all connected; a
node with another secret is a member in etcd but no peer of the others
(refused both ways, logged); bytes that are not the protocol, a wrong proof,
silence and a flood of unauthenticated connections get nothing and hold
nothing; a killed peer is seen down at once and back when it restarts.
"""
import json
import os
import re
import signal
import socket
import struct
import subprocess
import time
import urllib.error
import urllib.request

import pytest

import conftest
from kvwire import crc32c
from openlake_client import Client
from test_cli_kv import cli
from test_cluster import ETCD, Etcd, etcd, wait_for
from test_http import hermetic_openlake_env

assert hermetic_openlake_env  # autouse fixture, imported to apply here too
assert etcd                   # the fixture: one etcd member per test

pytestmark = pytest.mark.skipif(not ETCD, reason="etcd is not installed (scripts/deps.sh test "
                                "installs etcd-server)")


def secret(tmp_path, name="secret"):
    p = tmp_path / name
    p.write_text(os.urandom(32).hex() + "\n")
    p.chmod(0o600)
    return str(p)


def node(make_daemon, etcd, nid, secret_file, start=True, rpc=None):
    rpc = rpc or conftest.free_port()
    d = make_daemon(start=start, args=[
        "--cluster.name", "c1", "--cluster.etcd", etcd.url, "--self-id", str(nid),
        "--cluster.lease-ttl-secs", "2", "--rpc-addr", f"127.0.0.1:{rpc}",
        "--cluster.etcd-timeout-ms", "1000", "--cluster.secret-file", secret_file])
    d.rpc_port = rpc
    return d


def metrics(d):
    with urllib.request.urlopen(d.url + "/_openlake/metrics", timeout=10) as r:
        return r.read().decode()


def metric(d, name, **labels):
    """The value of one series (labels besides cluster="c1"), or None."""
    lab = ",".join(['cluster="c1"'] + [f'{k}="{v}"' for k, v in labels.items()])
    m = re.search(r"^%s\{%s\} (\d+)$" % (re.escape(name), re.escape(lab)), metrics(d), re.M)
    return int(m.group(1)) if m else None


def up(d, peer):
    return metric(d, "openlake_rpc_peer_up", peer=peer)


def served_only_pings(d, nid, others):
    """Every request node d (id nid) served was an idle ping of another
    node's (docs/node-protocol.md): its requests, read first, are at most
    the pings the others have sent it, read after."""
    served = metric(d, "openlake_rpc_requests_total")
    pings = sum(metric(o, "openlake_rpc_peer_pings_total", peer=nid) or 0 for o in others)
    return served <= pings


def wait_proofs_refused(pairs):
    """Waits until each (node, peer) of pairs counted a refused proof of
    that peer's, then a little more: they stay unconnected."""
    for d, p in pairs:
        wait_for(lambda: (metric(d, "openlake_rpc_peer_auth_failures_total", peer=p) or 0) > 0,
                 f"{p}'s proof refused")
    time.sleep(0.5)


def test_members_connect_to_each_other(etcd, make_daemon, tmp_path):
    s = secret(tmp_path)
    nodes = [node(make_daemon, etcd, i, s) for i in (1, 2, 3)]
    for d in nodes:
        others = [i for i in (1, 2, 3) if i != nodes.index(d) + 1]
        wait_for(lambda: all(up(d, p) == 1 for p in others), "every peer up")
        assert up(d, nodes.index(d) + 1) is None           # not its own peer
        assert metric(d, "openlake_rpc_refused_total", cause="auth") == 0
        # nothing asked yet but idle pings
        assert served_only_pings(d, nodes.index(d) + 1, [o for o in nodes if o is not d])
    # the secret never reaches the log
    sec = open(s).read().strip()
    assert all(sec not in d.stderr() for d in nodes)


def test_a_node_with_another_secret_gets_no_connection(etcd, make_daemon, tmp_path):
    a = node(make_daemon, etcd, 1, secret(tmp_path, "s1"))
    b = node(make_daemon, etcd, 2, str(tmp_path / "s1"))
    c = node(make_daemon, etcd, 3, secret(tmp_path, "s3"))
    wait_for(lambda: up(a, 2) == 1 and up(b, 1) == 1, "1 and 2 connected")
    # c is in etcd (a member), but no peer of theirs, nor they of it
    wait_proofs_refused(((a, 3), (b, 3), (c, 1), (c, 2)))
    assert up(a, 3) == 0 and up(b, 3) == 0 and up(c, 1) == 0 and up(c, 2) == 0
    assert metric(c, "openlake_rpc_peer_connects_total", peer=1) == 0
    assert "failed authentication (another cluster secret?)" in a.stderr()
    assert "failed authentication (another cluster secret?)" in c.stderr()


def frame(ftype, payload=b"", status=0, aux=0, plen=None):
    """A version-1 frame (docs/node-protocol.md), header CRC and all; plen
    overrides the length the header claims."""
    crc = crc32c(payload) if payload else 0
    n = len(payload) if plen is None else plen
    h = b"OLRP" + struct.pack("<BBHQIIqHHII", 1, ftype, 0, 0, n, aux, 0, status, 0, crc, 0)
    return h + struct.pack("<I", crc32c(h)) + payload


def read_close(sock, timeout=5):
    """Reads to EOF: (bytes, the CLOSE frame's status or None)."""
    sock.settimeout(timeout)
    buf = b""
    while True:
        try:
            got = sock.recv(65536)
        except (ConnectionResetError, socket.timeout):
            break
        if not got:
            break
        buf += got
    status, off = None, 0
    while off + 48 <= len(buf):
        ftype, = struct.unpack_from("<B", buf, off + 5)
        plen, = struct.unpack_from("<I", buf, off + 16)
        if ftype == 7:
            status, = struct.unpack_from("<H", buf, off + 32)
        off += 48 + plen
    return buf, status


def test_strangers_on_the_node_port_get_nothing(etcd, make_daemon, tmp_path):
    a = node(make_daemon, etcd, 1, secret(tmp_path))
    addr = ("127.0.0.1", a.rpc_port)
    rss0 = a.rss_kib()

    # not the protocol: CLOSE "protocol error" at once
    with socket.create_connection(addr) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        _, st = read_close(s)
        assert st == 7
    # a truncated header, then the peer goes: nothing held
    with socket.create_connection(addr) as s:
        s.sendall(b"OLRP\x01\x01\x00")
    # another cluster's HELLO
    hello = struct.pack("<Q", 9) + os.urandom(32) + b"other".ljust(64, b"\0") + bytes(8)
    with socket.create_connection(addr) as s:
        s.sendall(frame(1, hello))
        _, st = read_close(s)
        assert st == 8
    # the right cluster, a made-up proof
    hello = struct.pack("<Q", 9) + os.urandom(32) + b"c1".ljust(64, b"\0") + bytes(8)
    with socket.create_connection(addr) as s:
        s.sendall(frame(1, hello))
        time.sleep(0.1)
        s.sendall(frame(3, os.urandom(32)))
        buf, st = read_close(s)
        assert st == 6 and buf[5] == 2                   # a CHALLENGE, then refused
    # a HELLO claiming 64 MiB: refused from its header, nothing read
    with socket.create_connection(addr) as s:
        s.sendall(frame(1, b"", plen=64 << 20))
        _, st = read_close(s)
        assert st == 7
    # silence: closed at the handshake deadline (2 s)
    t0 = time.time()
    with socket.create_connection(addr) as s:
        _, st = read_close(s, timeout=10)
        assert 1.5 < time.time() - t0 < 5
    # a flood of silent connections: 64 unauthenticated at most, the oldest go
    flood = [socket.create_connection(addr) for _ in range(200)]
    time.sleep(0.5)
    closed = 0
    for s in flood:
        s.settimeout(0.01)
        try:
            closed += s.recv(1) == b""
        except socket.timeout:
            pass
        except ConnectionResetError:
            closed += 1
    for s in flood:
        s.close()
    assert closed >= 200 - 64, closed
    assert metric(a, "openlake_rpc_refused_total", cause="unauthenticated_evicted") >= 136
    assert metric(a, "openlake_rpc_refused_total", cause="auth") == 2
    assert metric(a, "openlake_rpc_refused_total", cause="protocol") >= 1
    assert metric(a, "openlake_rpc_refused_total", cause="handshake_timeout") >= 1
    assert metric(a, "openlake_rpc_requests_total") == 0
    assert a.is_ready()
    assert a.rss_kib() - rss0 < 32 * 1024, (rss0, a.rss_kib())


def test_a_killed_peer_is_down_at_once_and_back_when_it_restarts(etcd, make_daemon, tmp_path):
    s = secret(tmp_path)
    a = node(make_daemon, etcd, 1, s)
    b = node(make_daemon, etcd, 2, s)
    wait_for(lambda: up(a, 2) == 1, "2 up at 1")
    b.proc.kill()
    b.proc.wait()
    t0 = time.time()
    wait_for(lambda: up(a, 2) == 0, "2 down at 1", timeout=5)
    assert time.time() - t0 < 2                       # its connection reset: no timeout
    # its lease runs out (2 s): no longer a member, no longer a peer
    wait_for(lambda: up(a, 2) is None, "2 forgotten", timeout=15)
    b.stop(expect_rc=None)
    b2 = node(make_daemon, etcd, 2, s, rpc=b.rpc_port)
    wait_for(lambda: up(a, 2) == 1 and up(b2, 1) == 1, "2 back")
    assert metric(a, "openlake_rpc_peer_connects_total", peer=2) == 1   # a new peer entry


def put_records(etcd, ids):
    """Records of members that are never up (their rpc_addr refuses), put
    through etcd's JSON gateway: one HTTP request each, no etcdctl."""
    import base64
    for i in ids:
        rec = {"v": 1, "id": i, "instance": "%032x" % i, "state": "active",
               "version": "0.1.0", "host": "ghost", "data_dir": "/nonexistent", "pid": 1,
               "started": 1, "s3_addr": "127.0.0.1:9", "s3_tls": False, "kv_addr": "",
               "rpc_addr": "127.0.0.1:9", "kv_slab_bytes": 1 << 30, "kv_disk_bytes": 0,
               "drives": 0}
        body = json.dumps({"key": base64.b64encode(b"/openlake/c1/nodes/%d" % i).decode(),
                           "value": base64.b64encode(json.dumps(rec).encode()).decode()})
        req = urllib.request.Request(etcd.url + "/v3/kv/put", data=body.encode(), method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            r.read()


def test_the_metrics_page_stays_bounded_with_many_peers(etcd, make_daemon, tmp_path):
    """Up to 128 peers each have their own series; past that they are
    summed under peer="all", and only peers that are down keep a line of
    their own, at most 128: the page no longer grows with the members (it
    used to overflow the 1 MiB admin page, a 500, near 1,400 members)."""
    s = secret(tmp_path)
    a = node(make_daemon, etcd, 1, s)
    b = node(make_daemon, etcd, 2, s)
    wait_for(lambda: up(a, 2) == 1, "2 up at 1")
    assert metric(a, "openlake_rpc_peers", state="up") == 1
    assert metric(a, "openlake_rpc_peers", state="down") == 0
    put_records(etcd, range(1000, 1126))            # 127 peers: each its own series
    wait_for(lambda: metric(a, "openlake_rpc_peers", state="down") == 126, "126 ghosts")
    page = metrics(a)
    assert 'openlake_rpc_peer_calls_total{cluster="c1",peer="1125"} 0' in page
    assert 'peer="all"' not in page
    put_records(etcd, range(1126, 1300))            # 301 peers: summed
    wait_for(lambda: metric(a, "openlake_rpc_peers", state="down") == 300, "300 ghosts")
    small = metrics(a)
    assert metric(a, "openlake_rpc_peer_up", peer="all") == 1
    assert metric(a, "openlake_rpc_peer_up", peer=2) is None     # up: summed only
    assert len(re.findall(r'^openlake_rpc_peer_up\{cluster="c1",peer="1\d\d\d"\} 0$',
                          small, re.M)) == 128                  # the down, at most 128
    assert metric(a, "openlake_rpc_peer_connects_total", peer="all") >= 1
    assert not re.search(r'peer_calls_total\{cluster="c1",peer="\d+"\}', small)
    put_records(etcd, range(1300, 1700))            # 701 peers: the page stays the same size
    wait_for(lambda: metric(a, "openlake_rpc_peers", state="down") == 700, "700 ghosts",
             timeout=30)
    big = metrics(a)
    assert abs(len(big) - len(small)) < 2048, (len(small), len(big))
    assert b.is_ready()
    # a peer that leaves takes nothing out of the sums: they never go back
    wait_for(lambda: metric(a, "openlake_rpc_peer_pings_total", peer="all") > 0, "a ping to 2")
    before = metric(a, "openlake_rpc_peer_pings_total", peer="all")
    b.proc.kill()
    b.proc.wait()
    wait_for(lambda: metric(a, "openlake_rpc_peers", state="down") == 700 and
             metric(a, "openlake_rpc_peers", state="up") == 0, "2 gone (its lease)")
    assert metric(a, "openlake_rpc_peer_pings_total", peer="all") >= before
    b.stop(expect_rc=None)


AK, SK = "cluster-admin", "cluster-admin-secret-0123"


def test_topology_and_probe_between_every_pair(etcd, make_daemon, tmp_path):
    s = secret(tmp_path)
    skf = tmp_path / "sk"
    skf.write_text(SK + "\n")
    skf.chmod(0o600)
    env = {"OPENLAKE_ACCESS_KEY": AK, "OPENLAKE_SECRET_KEY_FILE": str(skf)}
    nodes = []
    for i in (1, 2, 3):
        d = node(make_daemon, etcd, i, s, start=False)
        d.env.update(env)
        d.start()
        nodes.append(d)
    for d in nodes:
        wait_for(lambda: all(up(d, p) == 1 for p in (1, 2, 3) if p != nodes.index(d) + 1),
                 "every peer up")
    base = ["cluster", "topology", "--etcd", etcd.url, "--cluster", "c1"]
    r = cli(*base)
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert "3 nodes, 3 KV members; KV pool" in out and out.count("33.3%") == 3, out
    # the probe: every ordered pair measured over the node RPC
    r = cli("--json", *base, "--probe", "--mib", "8", "--access-key", AK,
            "--secret-key-file", str(skf))
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    assert [n["id"] for n in st["nodes"]] == [1, 2, 3]
    # the pool's capacity is the sum of its members' slabs and disk tiers
    pool = st["kv_pool"]
    assert pool["members"] == 3 and pool["disk_bytes"] == 0
    assert pool["slab_bytes"] == sum(n["kv_capacity_bytes"] for n in st["nodes"])
    assert pool["slab_bytes"] >= 3 * (1 << 28) * 0.9      # three 0.25 GiB slabs
    for n in st["nodes"]:
        assert abs(n["kv_share"] - 1 / 3) < 1e-3
        peers = {p["peer"]: p for p in n["probe"]}
        assert sorted(peers) == [i for i in (1, 2, 3) if i != n["id"]]
        for p in peers.values():
            assert p["ok"] and p["error"] == "", p
            assert 0 < p["rtt_us"] < 100000
            assert p["to_bytes_per_s"] > 1e6 and p["from_bytes_per_s"] > 1e6, p
    for d in nodes:
        assert metric(d, "openlake_rpc_requests_total") >= 2 * (16 + 2 * 8)
    # the table form: two matrices
    r = cli(*base, "--probe", "--mib", "1", "--access-key", AK, "--secret-key-file", str(skf))
    assert r.returncode == 0, r.stderr
    assert b"round trip, microseconds" in r.stdout and b"GB/s the row sends" in r.stdout
    # a node down: its pairs fail, exit 1, and the others still measure
    nodes[2].proc.kill()
    nodes[2].proc.wait()
    r = cli("--json", *base, "--probe", "--mib", "1", "--access-key", AK,
            "--secret-key-file", str(skf))
    assert r.returncode == 1, r.stderr
    st = json.loads(r.stdout)
    by = {n["id"]: n for n in st["nodes"]}
    if 3 in by:                                   # its lease may not have run out yet
        assert "error" in by[3]["probe"]
    assert [p for p in by[1]["probe"] if p["peer"] == 2][0]["ok"]
    nodes[2].stop(expect_rc=None)


def test_probe_needs_a_signature(etcd, make_daemon, tmp_path):
    a = node(make_daemon, etcd, 1, secret(tmp_path))
    for method in ("GET", "POST"):
        req = urllib.request.Request(a.url + "/_openlake/cluster/probe", method=method)
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=10)
        assert e.value.code == 403
    r = cli("cluster", "topology", "--etcd", etcd.url, "--cluster", "c1", "--mib", "2")
    assert r.returncode == 2 and b"--mib goes with topology --probe" in r.stderr
    r = cli("cluster", "status", "--etcd", etcd.url, "--cluster", "c1", "--probe")
    assert r.returncode == 2 and b"--probe goes with topology" in r.stderr


class Etcd3:
    """A three-member etcd on loopback: members killed and started one by one."""

    def __init__(self, tmp):
        ports = conftest.free_ports(6)
        self.tmp = tmp
        self.m = [(f"m{i}", ports[2 * i], ports[2 * i + 1]) for i in range(3)]
        self.urls = [f"http://127.0.0.1:{c}" for _, c, _ in self.m]
        self.initial = ",".join(f"{n}=http://127.0.0.1:{p}" for n, _, p in self.m)
        self.procs = [None] * 3
        self.logs = [None] * 3

    def start(self, i):
        n, c, p = self.m[i]
        self.logs[i] = open(self.tmp / f"etcd3-{n}.log", "a")
        self.procs[i] = subprocess.Popen(
            [ETCD, "--name", n, "--data-dir", str(self.tmp / f"etcd3-{n}"),
             "--listen-client-urls", self.urls[i], "--advertise-client-urls", self.urls[i],
             "--listen-peer-urls", f"http://127.0.0.1:{p}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{p}",
             "--initial-cluster", self.initial, "--initial-cluster-state", "new"],
            stdout=self.logs[i], stderr=subprocess.STDOUT)

    def healthy(self, i):
        try:
            with urllib.request.urlopen(self.urls[i] + "/health", timeout=1) as r:
                return json.load(r).get("health") == "true"
        except OSError:
            return False

    def member_of(self, d):
        """The member whose client port daemon d holds connections to, when
        that is one member only (it starts on member self_id % 3 and moves
        only when a call fails): waits for that, at most 10 s."""
        ports = {c: i for i, (_, c, _) in enumerate(self.m)}
        found = set()

        def one():
            inodes = set()
            for fd in os.listdir(f"/proc/{d.pid()}/fd"):
                try:
                    t = os.readlink(f"/proc/{d.pid()}/fd/{fd}")
                except OSError:
                    continue
                if t.startswith("socket:["):
                    inodes.add(t[8:-1])
            found.clear()
            with open("/proc/net/tcp") as f:
                for ln in f.readlines()[1:]:
                    x = ln.split()
                    port = int(x[2].split(":")[1], 16)
                    if x[3] == "01" and x[9] in inodes and port in ports:
                        found.add(ports[port])
            return len(found) == 1
        wait_for(one, "node talks to one etcd member", timeout=10)
        return found.pop()

    def kill(self, i):
        if self.procs[i] and self.procs[i].poll() is None:
            self.procs[i].kill()
            self.procs[i].wait()
        if self.logs[i]:
            self.logs[i].close()
        self.procs[i] = self.logs[i] = None


@pytest.fixture
def etcd3(tmp_path):
    e = Etcd3(tmp_path)
    try:
        for i in range(3):
            e.start(i)
        wait_for(lambda: all(e.healthy(i) for i in range(3)), "3 etcd members healthy",
                 timeout=60)
        yield e
    finally:
        for i in range(3):
            e.kill(i)


def etcd3_nodes(make_daemon, etcd3, s):
    """A maker of nodes of cluster c1 on every member of etcd3 (a node
    starts on member self_id % 3), with secret file s."""
    eps = ",".join(etcd3.urls)

    def mk(nid):
        return make_daemon(args=[
            "--cluster.name", "c1", "--cluster.etcd", eps, "--self-id", str(nid),
            "--cluster.lease-ttl-secs", "4", "--rpc-addr", f"127.0.0.1:{conftest.free_port()}",
            "--cluster.etcd-timeout-ms", "1000", "--cluster.secret-file", s])
    return mk


def test_a_stalled_watch_is_caught_up_by_a_peers_revision(etcd3, make_daemon, tmp_path):
    """Node 2 watches the members through etcd member 2, which hangs
    (SIGSTOP): its watch delivers nothing and reports no error. Node 3
    joins; its frames to node 2 carry the revision node 3 registered at,
    newer than node 2's view: node 2 reads the members again (through
    another etcd member, the hung one timing out) and sees node 3."""
    mk = etcd3_nodes(make_daemon, etcd3, secret(tmp_path))
    a, b = mk(1), mk(2)     # node 1 starts on etcd member 1, node 2 on member 2
    wait_for(lambda: up(a, 2) == 1 and up(b, 1) == 1, "1 and 2 connected")
    assert metric(b, "openlake_cluster_refreshes_total") == 0
    etcd3.procs[2].send_signal(signal.SIGSTOP)
    try:
        c = mk(3)           # on etcd member 0
        wait_for(lambda: metric(a, "openlake_cluster_members") == 3, "node 1 sees node 3")
        wait_for(lambda: up(c, 2) == 1, "node 3 connected to node 2")
        # node 2's watch is silent: only the revision node 3 carried tells it
        wait_for(lambda: metric(b, "openlake_cluster_members") == 3, "node 2 sees node 3",
                 timeout=15)
        assert metric(b, "openlake_cluster_refreshes_total") >= 1
        wait_for(lambda: metric(b, "openlake_cluster_revision") ==
                 metric(a, "openlake_cluster_revision"), "node 2's view as current as node 1's")
        for d in (a, b, c):
            assert d.is_ready()
    finally:
        etcd3.procs[2].send_signal(signal.SIGCONT)


def test_a_stalled_watch_is_caught_up_by_an_idle_peers_ping(etcd3, make_daemon, tmp_path):
    """Node 2 watches through etcd member 2, which hangs (SIGSTOP). Node 1
    is drained (its drain key, then its record says draining: two new
    revisions that node 2's watch never delivers). Nodes 1 and 2 exchange
    no KV traffic and no new connection is made: only their idle pings (a
    PING after 1 s without a request, docs/node-protocol.md) carry node 1's
    newer revision to node 2, which reads the members again and sees node
    1 draining."""
    mk = etcd3_nodes(make_daemon, etcd3, secret(tmp_path))
    a, b = mk(1), mk(2)     # node 2 starts on etcd member 2 (and stays, unless it failed)
    wait_for(lambda: up(a, 2) == 1 and up(b, 1) == 1, "1 and 2 connected")
    wait_for(lambda: (metric(a, "openlake_rpc_peer_pings_total", peer=2) or 0) >= 1 and
             (metric(b, "openlake_rpc_peer_pings_total", peer=1) or 0) >= 1, "idle pings")
    assert metric(b, "openlake_cluster_refreshes_total") == 0
    rev0 = metric(b, "openlake_cluster_revision")
    m = etcd3.member_of(b)  # the one member node 2 talks to, its watch included
    etcd3.procs[m].send_signal(signal.SIGSTOP)
    try:
        # the stopped member may have led: the others elect another first
        wait_for(lambda: cli("cluster", "drain", "1", "--etcd", etcd3.urls[(m + 1) % 3],
                             "--cluster", "c1", "--wait-ms", "0").returncode == 0,
                 "node 1 drained")
        wait_for(lambda: metric(a, "openlake_cluster_revision") > rev0, "node 1's view moves")
        wait_for(lambda: metric(b, "openlake_cluster_revision") >=
                 metric(a, "openlake_cluster_revision"), "node 2 catches up", timeout=15)
        assert metric(b, "openlake_cluster_refreshes_total") >= 1
        assert "a peer's view is newer than this node's" in b.stderr()
        assert metric(b, "openlake_kvpool_fetched_keys_total") == 0
        assert metric(a, "openlake_kvpool_pushes_total") == 0
        for d in (a, b):
            assert d.is_ready()
    finally:
        etcd3.procs[m].send_signal(signal.SIGCONT)


def test_an_etcd_member_dies_then_all_of_etcd(etcd3, make_daemon, tmp_path):
    s = secret(tmp_path)
    eps = ",".join(etcd3.urls)
    tok = tmp_path / "kv.token"
    tok.write_text(os.urandom(32).hex() + "\n")
    tok.chmod(0o600)

    def mk(nid):
        d = make_daemon(args=[
            "--cluster.name", "c1", "--cluster.etcd", eps, "--self-id", str(nid),
            "--cluster.lease-ttl-secs", "4", "--rpc-addr", f"127.0.0.1:{conftest.free_port()}",
            "--cluster.etcd-timeout-ms", "1000", "--cluster.secret-file", s,
            "--kv-token-file", str(tok), "--cluster.kv-timeout-ms", "1000"])
        return d

    a, b = mk(1), mk(2)     # node 1 starts on etcd member 1, node 2 on member 2
    wait_for(lambda: up(a, 2) == 1 and up(b, 1) == 1, "1 and 2 connected")

    def the_pool_serves(tag):
        """Values put through node 1 are read whole through node 2: the
        keys homed on 2 sent there, those homed on 1 fetched from it."""
        vals = {f"{tag}-{i}".encode(): os.urandom(3000 + 17 * i) for i in range(24)}
        keys = list(vals)
        fetched = metric(b, "openlake_kvpool_fetched_keys_total")
        with Client(f"127.0.0.1:{a.kv_port}", token_file=str(tok), namespace="pool") as c:
            assert c.put(keys, list(vals.values())) == [0] * len(keys)

        def read():
            out = [bytearray(len(vals[k])) for k in keys]
            with Client(f"127.0.0.1:{b.kv_port}", token_file=str(tok), namespace="pool") as c:
                got = c.get(keys, out)
            return got == [len(vals[k]) for k in keys] and \
                all(bytes(o) == vals[k] for o, k in zip(out, keys))
        wait_for(read, f"{tag}: every value through node 2", timeout=10)
        assert metric(b, "openlake_kvpool_fetched_keys_total") > fetched

    the_pool_serves("all-up")

    def st():
        r = cli("--json", "cluster", "status", "--etcd", eps, "--cluster", "c1")
        assert r.returncode in (0, 1), r.stderr
        return r.returncode, json.loads(r.stdout)

    rc, j = st()
    assert rc == 0 and j["etcd"]["healthy"] == 3 and [n["id"] for n in j["nodes"]] == [1, 2]

    # one member of three dies (node 1's): a quorum remains; both nodes stay
    # registered (node 1's handles move to the next endpoint), connected,
    # serving; status says etcd is degraded
    etcd3.kill(1)
    time.sleep(5)                              # more than a lease (4 s)
    for d in (a, b):
        assert metric(d, "openlake_cluster_registered") == 1
        assert metric(d, "openlake_cluster_members") == 2
        assert d.is_ready()
    assert up(a, 2) == 1 and up(b, 1) == 1
    rc, j = st()
    assert rc == 1 and j["etcd"]["healthy"] == 2 and [n["id"] for n in j["nodes"]] == [1, 2]
    assert all(n["state"] == "active" and n["ready"] for n in j["nodes"])
    the_pool_serves("one-etcd-member-down")

    # all of etcd down: the nodes serve on the membership last known, their
    # node RPC connections stay; status cannot read the members
    etcd3.kill(0)
    etcd3.kill(2)
    for d in (a, b):
        wait_for(lambda: metric(d, "openlake_cluster_etcd_up") == 0, "etcd away")
    time.sleep(1)
    for d in (a, b):
        assert metric(d, "openlake_cluster_members") == 2
        assert d.is_ready()
    assert up(a, 2) == 1 and up(b, 1) == 1
    r = cli("cluster", "status", "--etcd", eps, "--cluster", "c1", "--timeout-ms", "500")
    assert r.returncode == 1 and b"cannot read the members" in r.stdout, r.stdout
    the_pool_serves("all-of-etcd-down")

    # etcd back (its members from their data dirs): the nodes are registered again
    for i in range(3):
        etcd3.start(i)
    wait_for(lambda: all(etcd3.healthy(i) for i in range(3)), "etcd back", timeout=60)
    for d in (a, b):
        wait_for(lambda: metric(d, "openlake_cluster_etcd_up") == 1 and
                 metric(d, "openlake_cluster_registered") == 1, "registered again", timeout=30)
    rc, j = st()
    assert rc == 0 and [n["id"] for n in j["nodes"]] == [1, 2]
