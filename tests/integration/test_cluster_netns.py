"""A cluster of four openlaked nodes, each in its own network namespace
(ip netns, a veth pair into a bridge made by the test and removed after),
with a real etcd on the bridge: the node RPC across real interfaces, and a
partition (one node's link down) and its healing.

Needs root and iproute2 (skips, saying why, without them); the namespaces
are tests/integration/netns.py's.
"""
import shutil
import time

import pytest

from netns import NETNS_WHY, cluster_args, metrics_in, net, peer_up, start_etcd  # noqa: F401
from test_cli_kv import cli
from test_cluster import ETCD, wait_for
from test_cluster_rpc import secret
from test_http import hermetic_openlake_env

assert hermetic_openlake_env  # autouse fixture, imported to apply here too

pytestmark = [
    pytest.mark.skipif(not ETCD, reason="etcd is not installed (scripts/deps.sh test installs "
                       "etcd-server)"),
    pytest.mark.skipif(bool(NETNS_WHY), reason=NETNS_WHY),
]


@pytest.mark.skipif(not shutil.which("curl"), reason="curl is not installed")
def test_four_nodes_in_namespaces_partition_and_heal(net, make_daemon, tmp_path):
    e = start_etcd(net, tmp_path)
    try:
        s = secret(tmp_path)
        skf = tmp_path / "sk"
        skf.write_text("netns-secret-key-0123\n")
        skf.chmod(0o600)
        nodes = []
        for i in range(1, 5):
            d = net.put(make_daemon(start=False,
                                    args=cluster_args(e.url, i, net.ips[i - 1], s)), i)
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
