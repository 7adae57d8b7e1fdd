"""Cluster membership on etcd (docs/cluster.md "Membership"): real etcd
(Debian's etcd-server), real openlaked processes on loopback, the real CLI.

Each node keeps one record under an etcd lease; `openlake cluster status`
reads the records and asks each node whether it is ready. Cases: nodes join
and the CLI lists them; a stopped node leaves at once (its lease revoked),
a killed one when its lease runs out; a node id held by a live node stops a
second one at start, while a node restarted on its own data dir takes its
record back at once; with etcd gone the nodes keep serving and the CLI says
etcd is away, and they are back in etcd when it returns; etcd's user and
password auth; settings that cannot work are refused at start; a record
this version cannot read is reported, not fatal.
"""
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request

import pytest

import conftest
from test_cli_kv import cli
from test_http import hermetic_openlake_env

assert hermetic_openlake_env  # autouse fixture, imported to apply here too

ETCD = shutil.which("etcd")
pytestmark = pytest.mark.skipif(not ETCD, reason="etcd is not installed (scripts/deps.sh test "
                                "installs etcd-server)")

TTL = "2"   # seconds: the lease of most nodes here, so a killed one leaves fast


@pytest.fixture(scope="session")
def secret_file(tmp_path_factory):
    """The cluster secret every node of these tests shares (mode 0600)."""
    p = tmp_path_factory.mktemp("cluster-secret") / "secret"
    p.write_text(os.urandom(32).hex() + "\n")
    p.chmod(0o600)
    return str(p)


@pytest.fixture(autouse=True)
def _secret(secret_file):
    global SECRET
    SECRET = secret_file


SECRET = None


class Etcd:
    """One etcd member on loopback, its data in a temp dir."""

    def __init__(self, tmp):
        self.dir = tmp / f"etcd-{id(self)}"
        self.client, self.peer = conftest.free_ports(2)
        self.url = f"http://127.0.0.1:{self.client}"
        self.proc = None

    def start(self):
        try:
            return self._start()
        except BaseException:
            self.kill()                # not left running when it never got healthy
            raise

    def _start(self):
        self.log = open(str(self.dir) + ".log", "a")
        self.proc = subprocess.Popen(
            [ETCD, "--name", "m0", "--data-dir", str(self.dir),
             "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
             "--listen-peer-urls", f"http://127.0.0.1:{self.peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.peer}",
             "--initial-cluster", f"m0=http://127.0.0.1:{self.peer}"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline:
            assert self.proc.poll() is None, "etcd exited"
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1) as r:
                    if json.load(r).get("health") == "true":
                        return self
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError("etcd did not become healthy")

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc:
            self.log.close()
        self.proc = None

    def ctl(self, *args, user=None):
        a = ["etcdctl", "--endpoints", self.url, *args]
        if user:
            a[1:1] = ["--user", user]
        return subprocess.run(a, capture_output=True, text=True, timeout=30,
                              env={**os.environ, "ETCDCTL_API": "3"})


@pytest.fixture
def etcd(tmp_path):
    e = Etcd(tmp_path).start()
    yield e
    e.kill()


def node(make_daemon, etcd, nid, name="c1", ttl=TTL, start=True, extra=()):
    rpc = conftest.free_port()
    return make_daemon(start=start, args=[
        "--cluster.name", name, "--cluster.etcd", etcd.url, "--self-id", str(nid),
        "--cluster.lease-ttl-secs", ttl, "--rpc-addr", f"127.0.0.1:{rpc}",
        "--cluster.etcd-timeout-ms", "1000", "--cluster.secret-file", SECRET, *extra])


def status(etcd, name="c1", *extra):
    r = cli("--json", "cluster", "status", "--etcd", etcd.url, "--cluster", name, *extra)
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, json.loads(r.stdout)


def wait_for(pred, what, timeout=15):
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def ids(st):
    return [n["id"] for n in st["nodes"]]


def test_nodes_join_and_the_cli_lists_them_stop_leaves_kill_expires(etcd, make_daemon):
    a, b, c = (node(make_daemon, etcd, i) for i in (1, 2, 3))
    rc, st = status(etcd)
    assert rc == 0 and not st["degraded"], st
    assert ids(st) == [1, 2, 3]
    for n, d in zip(st["nodes"], (a, b, c)):
        assert n["state"] == "active" and n["ready"] and n["pid"] == d.pid()
        assert n["s3_addr"] == f"127.0.0.1:{d.port}" and n["kv_addr"] == f"127.0.0.1:{d.kv_port}"
        assert n["kv_slab_bytes"] > 0 and n["version"]
    assert st["etcd"] == {"endpoints": 1, "healthy": 1, "error": None}
    with urllib.request.urlopen(a.url + "/_openlake/metrics", timeout=10) as r:
        m = r.read().decode()
    assert 'openlake_cluster_etcd_up{cluster="c1"} 1' in m
    assert 'openlake_cluster_registered{cluster="c1"} 1' in m
    wait_for(lambda: 'openlake_cluster_members{cluster="c1"} 3' in urllib.request.urlopen(
        a.url + "/_openlake/metrics", timeout=10).read().decode(), "node 1's view of 3")
    # the table form says the same
    r = cli("cluster", "status", "--etcd", etcd.url, "--cluster", "c1")
    assert r.returncode == 0 and b"3 nodes" in r.stdout and r.stdout.count(b"active") == 3

    # SIGTERM: "leaving" written, then its lease revoked: gone now
    watch = subprocess.Popen(["etcdctl", "--endpoints", etcd.url, "watch",
                              "/openlake/c1/nodes/2"], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "ETCDCTL_API": "3"})
    time.sleep(0.5)                            # the watch is set up
    b.stop()
    time.sleep(0.5)
    watch.terminate()
    seen = watch.communicate(timeout=10)[0]
    assert '"state":"leaving"' in seen and seen.index('"state":"leaving"') < seen.index("DELETE"), seen
    rc, st = status(etcd)
    assert ids(st) == [1, 3] and rc == 0, st
    assert "node 2 left" in b.stderr()

    c.signal(signal.SIGKILL)                   # gone when its 2 s lease runs out
    c.proc.wait()
    rc, st = status(etcd)
    gone = [n for n in st["nodes"] if n["id"] == 3]
    if gone:                                   # (a slow CLI may only see it gone)
        assert rc == 1 and st["degraded"]      # listed, not answering
        assert not gone[0]["reachable"] and not gone[0]["ready"]
    wait_for(lambda: ids(status(etcd)[1]) == [1], "node 3's lease to expire", timeout=10)
    assert status(etcd)[0] == 0
    c.stop(expect_rc=None)
    # the survivor's view saw them come and go
    wait_for(lambda: "member 3 gone" in a.stderr(), "node 1 to see node 3 go")
    assert "member 2 gone" in a.stderr()
    assert "member 2 joined" in a.stderr() and "left out of the view" not in a.stderr()


def test_a_live_nodes_id_stops_a_second_node(etcd, make_daemon):
    a = node(make_daemon, etcd, 5)
    b = node(make_daemon, etcd, 5, start=False)
    b.start(wait=False)
    assert b.proc.wait(30) == 2
    b.stop(expect_rc=2)
    assert f"node id 5 is registered by a live openlaked (host " in b.stderr()
    assert f"pid {a.pid()}" in b.stderr() and "another self_id" in b.stderr()
    rc, st = status(etcd)
    assert rc == 0 and ids(st) == [5] and st["nodes"][0]["pid"] == a.pid()


def test_a_node_restarted_on_its_data_dir_takes_its_record_back(etcd, make_daemon):
    a = node(make_daemon, etcd, 7, ttl="60")    # its record would outlive it by a minute
    old = a.pid()
    a.signal(signal.SIGKILL)
    a.proc.wait()
    a.stop(expect_rc=None)
    a.start()                                  # same data dir, at once
    assert "replacing the record of this node's previous run" in a.stderr()
    rc, st = status(etcd)
    assert rc == 0 and ids(st) == [7] and st["nodes"][0]["pid"] == a.pid() != old


def test_etcd_away_the_node_serves_and_comes_back(etcd, make_daemon, tmp_path):
    a = node(make_daemon, etcd, 1)
    etcd.kill()
    assert a.is_ready()
    r = cli("kv", "put", "k", "--value", "still here", "--addr", str(a.data / "kv.sock"))
    assert r.returncode == 0, r.stderr
    r = cli("--json", "cluster", "status", "--etcd", etcd.url, "--cluster", "c1",
            "--timeout-ms", "500")
    assert r.returncode == 1
    st = json.loads(r.stdout)
    assert st["degraded"] and st["etcd"]["healthy"] == 0 and st["etcd"]["error"]
    wait_for(lambda: "serving with the membership last known" in a.stderr(), "the node to notice",
             timeout=10)
    with urllib.request.urlopen(a.url + "/_openlake/metrics", timeout=10) as r:
        assert 'openlake_cluster_etcd_up{cluster="c1"} 0' in r.read().decode()
    time.sleep(3)                              # longer than the lease: etcd is away, not the node
    etcd.start()
    wait_for(lambda: status(etcd)[0] == 0 and ids(status(etcd)[1]) == [1],
             "the node back in etcd", timeout=20)
    wait_for(lambda: "etcd answers again" in a.stderr(), "the node to see etcd back", timeout=10)
    r = cli("kv", "get", "k", "--addr", str(a.data / "kv.sock"))
    assert r.stdout == b"still here"


def test_a_lease_revoked_under_the_node_is_replaced(etcd, make_daemon):
    """The lease goes (an operator revokes it; etcd expired it while the node
    was cut off): the node registers again, and still stops cleanly."""
    a = node(make_daemon, etcd, 1)
    got = json.loads(etcd.ctl("get", "/openlake/c1/nodes/1", "-w", "json").stdout)
    lease = got["kvs"][0]["lease"]
    assert etcd.ctl("lease", "revoke", format(lease, "x")).returncode == 0
    wait_for(lambda: "expired or was revoked" in a.stderr(), "the node to see its lease gone")
    wait_for(lambda: ids(status(etcd)[1]) == [1] and status(etcd)[0] == 0,
             "the node registered again")
    got = json.loads(etcd.ctl("get", "/openlake/c1/nodes/1", "-w", "json").stdout)
    assert got["kvs"][0]["lease"] != lease
    a.stop()
    assert ids(status(etcd)[1]) == []


def test_etcd_user_and_password(etcd, make_daemon, tmp_path):
    assert etcd.ctl("user", "add", "root", "--new-user-password", "rootpw").returncode == 0
    assert etcd.ctl("auth", "enable").returncode == 0
    pw = tmp_path / "etcd.pw"
    pw.write_text("rootpw\n")
    pw.chmod(0o600)
    a = node(make_daemon, etcd, 1, extra=["--cluster.etcd-user", "root",
                                           "--cluster.etcd-password-file", str(pw)])
    r = cli("--json", "cluster", "status", "--etcd", etcd.url, "--cluster", "c1",
            "--etcd-user", "root", "--etcd-password-file", str(pw))
    assert r.returncode == 0, r.stdout + r.stderr
    assert ids(json.loads(r.stdout)) == [1]
    assert "rootpw" not in a.stderr()
    assert "plain http: the etcd password and token cross the network" in a.stderr()
    bad = tmp_path / "bad.pw"
    bad.write_text("wrong\n")
    bad.chmod(0o600)
    b = node(make_daemon, etcd, 2, start=False, extra=["--cluster.etcd-user", "root",
                                                      "--cluster.etcd-password-file", str(bad)])
    b.start(wait=False)
    assert b.proc.wait(30) == 2
    b.stop(expect_rc=2)
    assert "authentication failed" in b.stderr()
    r = cli("cluster", "status", "--etcd", etcd.url, "--cluster", "c1")   # no login
    assert r.returncode == 1


@pytest.mark.parametrize("args, says", [
    (["--cluster.name", "c1"], "a cluster needs its etcd endpoints (cluster.etcd)"),
    (["--cluster.etcd", "http://127.0.0.1:2379"], "set cluster.name too"),
    (["--cluster.name", "c1", "--cluster.etcd", "127.0.0.1:2379"], "an http:// or https:// URL"),
    (["--cluster.name", "Big", "--cluster.etcd", "http://h:1"], "a-z, 0-9"),
    (["--cluster.name", "c1", "--cluster.etcd", "http://h:1", "--cluster.etcd-user", "u"],
     "needs its password"),
    (["--cluster.name", "c1", "--cluster.etcd", "http://h:1", "--cluster.lease-ttl-secs", "4",
      "--cluster.etcd-timeout-ms", "2500"], "more than half of cluster.lease_ttl_secs"),
    (["--cluster.name", "c1", "--cluster.etcd", "http://h:1", "--cluster.lease-ttl-secs", "1"],
     "--cluster.lease-ttl-secs: expected an integer from 2 to 600"),
    (["--cluster.name", "c1", "--cluster.etcd", "http://h:1", "--rpc-addr", "127.0.0.1:9000",
      "--s3-addr", "127.0.0.1:9000"], "is also s3_addr; a cluster node's RPC listener needs"),
    (["--cluster.name", "c1", "--cluster.etcd", "http://h:1", "--cluster.rpc-window-bytes",
      "1000"], "--cluster.rpc-window-bytes: expected an integer from 65536"),
])
def test_cluster_settings_that_cannot_work_are_refused(make_daemon, args, says):
    d = make_daemon(start=False, args=args + ["--cluster.secret-file", SECRET])
    d.start(wait=False)
    assert d.proc.wait(30) == 2
    d.stop(expect_rc=2)
    assert says in d.stderr()


@pytest.mark.parametrize("secret, says", [
    (None, "cluster c1: a cluster needs its secret (cluster.secret_file"),
    ("short\n", "the cluster secret has 5 characters; it needs at least 32"),
])
def test_a_cluster_needs_its_secret(make_daemon, tmp_path, secret, says):
    args = ["--cluster.name", "c1", "--cluster.etcd", "http://h:1"]
    if secret:
        f = tmp_path / "secret"
        f.write_text(secret)
        f.chmod(0o600)
        args += ["--cluster.secret-file", str(f)]
    d = make_daemon(start=False, args=args)
    d.start(wait=False)
    assert d.proc.wait(30) == 2
    d.stop(expect_rc=2)
    assert says in d.stderr()
    assert "short" not in d.stderr()        # never the secret itself


def test_a_record_this_version_cannot_read_is_reported(etcd, make_daemon):
    a = node(make_daemon, etcd, 1)
    etcd.ctl("put", "/openlake/c1/nodes/9", '{"v": 99, "id": 9}')
    etcd.ctl("put", "/openlake/c1/nodes/8", "not json")
    rc, st = status(etcd)
    assert rc == 1 and st["unreadable_records"] == 2 and ids(st) == [1]
    wait_for(lambda: "the record of node 8 is not one this version reads" in a.stderr(),
             "the node's warning")
    assert a.is_ready()


def test_cli_usage(etcd, tmp_path):
    r = cli("cluster", "status")
    assert r.returncode == 2 and b"--config FILE, or --etcd URL --cluster NAME" in r.stderr
    r = cli("cluster", "stats", "--etcd", etcd.url, "--cluster", "c1")
    assert r.returncode == 2 and b"did you mean 'status'" in r.stderr
    cfg = tmp_path / "node.toml"
    cfg.write_text(f'self_id = 4\n[cluster]\nname = "c9"\netcd = ["{etcd.url}"]\n')
    r = cli("--json", "cluster", "status", "--config", str(cfg))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["cluster"] == "c9" and json.loads(r.stdout)["nodes"] == []
