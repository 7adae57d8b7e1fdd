"""A cluster of four openlaked nodes, each in its own network namespace
(ip netns, a veth pair into a bridge made by the test and removed after),
with a real etcd on the bridge: the node RPC across real interfaces, and a
partition (one node's link down) and its healing.

Needs root and iproute2 (skips, saying why, without them). Traffic stays
on the test's bridge: a private /24 in 10.0.0.0/8 that no interface of the
host has.
"""
import os
import random
import shutil
import subprocess
import time

import pytest

import conftest
from test_cli_kv import cli
from test_cluster import ETCD, Etcd, wait_for
from test_cluster_rpc import secret
from test_http import hermetic_openlake_env

assert hermetic_openlake_env  # autouse fixture, imported to apply here too

IP = shutil.which("ip")
pytestmark = [
    pytest.mark.skipif(not ETCD, reason="etcd is not installed (scripts/deps.sh test installs "
                       "etcd-server)"),
    pytest.mark.skipif(os.geteuid() != 0 or not IP,
                       reason="network namespaces need root and iproute2"),
]


def sh(*args, check=True):
    r = subprocess.run([IP, *args], capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise AssertionError(f"ip {' '.join(args)}: {r.stderr}")
    return r


class Net:
    """A bridge in this namespace and n namespaces plugged into it."""

    def __init__(self, n):
        self.tag = "%04x" % random.randrange(1 << 16)
        self.br = f"olbr{self.tag}"
        used = subprocess.run([IP, "-4", "addr"], capture_output=True, text=True).stdout
        for _ in range(100):
            self.net = f"10.{random.randrange(200, 250)}.{random.randrange(1, 255)}"
            if f"inet {self.net}." not in used:
                break
        self.ns, self.ips, self.links = [], [], []
        try:
            sh("link", "add", self.br, "type", "bridge")
            sh("addr", "add", f"{self.net}.1/24", "dev", self.br)
            sh("link", "set", self.br, "up")
            for i in range(1, n + 1):
                ns, host, inner = f"ol{self.tag}n{i}", f"vh{self.tag}{i}", f"vn{self.tag}{i}"
                sh("netns", "add", ns)
                self.ns.append(ns)
                sh("link", "add", host, "type", "veth", "peer", "name", inner)
                self.links.append(host)
                sh("link", "set", inner, "netns", ns)
                sh("link", "set", host, "master", self.br, "up")
                ip = f"{self.net}.{10 + i}"
                sh("-n", ns, "addr", "add", f"{ip}/24", "dev", inner)
                sh("-n", ns, "link", "set", inner, "up")
                sh("-n", ns, "link", "set", "lo", "up")
                self.ips.append(ip)
        except BaseException:
            self.close()
            raise

    @property
    def host_ip(self):
        return f"{self.net}.1"

    def cut(self, i, up=False):
        """Node i's link (1-based) down: cut off from everyone, etcd included."""
        sh("link", "set", self.links[i - 1], "up" if up else "down")

    def close(self):
        for ns in self.ns:
            sh("netns", "del", ns, check=False)      # its veth pair goes with it
        sh("link", "del", self.br, check=False)


@pytest.fixture
def net():
    n = Net(4)
    yield n
    n.close()


def metrics_in(ns, url):
    """/_openlake/metrics read from inside namespace ns (curl)."""
    r = subprocess.run([IP, "netns", "exec", ns, "curl", "-s", "--max-time", "5",
                        url + "/_openlake/metrics"], capture_output=True, text=True, timeout=30)
    return r.stdout


def peer_up(text, peer):
    line = f'openlake_rpc_peer_up{{cluster="c1",peer="{peer}"}} '
    for ln in text.splitlines():
        if ln.startswith(line):
            return int(ln[len(line):])
    return None


@pytest.mark.skipif(not shutil.which("curl"), reason="curl is not installed")
def test_four_nodes_in_namespaces_partition_and_heal(net, make_daemon, tmp_path):
    e = Etcd(tmp_path)
    e.url = f"http://{net.host_ip}:{e.client}"
    e.start()
    try:
        s = secret(tmp_path)
        skf = tmp_path / "sk"
        skf.write_text("netns-secret-key-0123\n")
        skf.chmod(0o600)
        nodes = []
        for i in range(1, 5):
            ip = net.ips[i - 1]
            d = make_daemon(start=False, args=[
                "--cluster.name", "c1", "--cluster.etcd", e.url, "--self-id", str(i),
                "--cluster.lease-ttl-secs", "2", "--cluster.etcd-timeout-ms", "1000",
                "--rpc-addr", f"{ip}:9100", "--cluster.secret-file", s])
            d.args = [a.replace("127.0.0.1:", f"{ip}:") for a in d.args]
            d.host = ip
            d.wrap = [IP, "netns", "exec", net.ns[i - 1]]
            d.env.update({"OPENLAKE_ACCESS_KEY": "netns-admin",
                          "OPENLAKE_SECRET_KEY_FILE": str(skf)})
            d.start()
            nodes.append(d)

        def ups(i):
            text = metrics_in(net.ns[i - 1], nodes[i - 1].url)
            return {p: peer_up(text, p) for p in range(1, 5) if p != i}

        for i in range(1, 5):
            wait_for(lambda: all(v == 1 for v in ups(i).values()), f"node {i}'s peers up",
                     timeout=30)
        # every ordered pair over the node RPC, across the bridge
        probe = ["cluster", "topology", "--etcd", e.url, "--cluster", "c1", "--probe",
                 "--mib", "4", "--access-key", "netns-admin", "--secret-key-file", str(skf)]
        r = cli(*probe)
        assert r.returncode == 0, (r.stdout, r.stderr)
        assert b"4 nodes, 4 KV members" in r.stdout

        # Partition: node 3's link goes down. The others drop it (its lease
        # runs out: 2 s), it loses all of them (TCP keepalive: 5 s idle, 3
        # probes 2 s apart) and keeps serving with the membership last known.
        net.cut(3)
        t0 = time.time()
        for i in (1, 2, 4):
            wait_for(lambda: ups(i)[3] != 1, f"node {i} drops node 3", timeout=20)
        wait_for(lambda: all(v != 1 for v in ups(3).values()), "node 3 loses its peers",
                 timeout=30)
        assert time.time() - t0 < 30
        assert all(ups(i)[j] == 1 for i in (1, 2, 4) for j in (1, 2, 4) if j != i)
        text = metrics_in(net.ns[2], nodes[2].url)
        assert 'openlake_cluster_etcd_up{cluster="c1"} 0' in text
        assert 'openlake_cluster_members{cluster="c1"} 4' in text   # the view last known
        r = cli(*probe)
        assert r.returncode == 0, (r.stdout, r.stderr)              # the three that remain
        assert b"3 nodes" in r.stdout

        # Healing: node 3 registers again and every pair reconnects.
        net.cut(3, up=True)
        for i in range(1, 5):
            wait_for(lambda: all(v == 1 for v in ups(i).values()),
                     f"node {i}'s peers up again", timeout=40)
        r = cli(*probe)
        assert r.returncode == 0, (r.stdout, r.stderr)
        assert b"4 nodes, 4 KV members" in r.stdout
        err = nodes[2].stderr()
        assert "registering again" in err and "cluster c1: registered node 3" in err, err
    finally:
        e.kill()
