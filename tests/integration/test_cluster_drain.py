"""Draining a node (docs/cluster.md "Drain"), `openlake node info` and
`openlake disk info`: real etcd, real openlaked processes on loopback with
a KV pool, the real CLI.

`openlake cluster drain N` puts N's drain key in etcd; node N's record says
draining (no node places KV keys on it any more), then drained once its KV
pool work is done, and the command returns 0. Keys put through node 1 are
then sent home to node 3 only, never to 2; `undrain` puts 2 back. A drained
node that restarts comes back drained. Bad input is refused with the
documented exit codes. `disk info` asks a node (found in etcd, or a single
host at its address) for its drives and KV disk tier: the paths configured,
real filesystem sizes, the tier's shard files.
"""
import json
import os
import time

import pytest

from test_cli_kv import cli
from test_cluster import ETCD, etcd, wait_for
from test_cluster_kv import kpm, kv, pool, settled_pushes
from test_http import hermetic_openlake_env

assert hermetic_openlake_env  # autouse fixture, imported to apply here too
assert etcd                   # the fixture: one etcd member per test

pytestmark = pytest.mark.skipif(not ETCD, reason="etcd is not installed (scripts/deps.sh test "
                                "installs etcd-server)")


def ol(etcd, *args):
    return cli(*args, "--etcd", etcd.url, "--cluster", "c1")


def states(etcd):
    r = ol(etcd, "--json", "cluster", "status")
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, {n["id"]: n["state"] for n in json.loads(r.stdout)["nodes"]}


def put_many(d, tok, prefix, n=40):
    for i in range(n):
        r = kv(d, tok, "put", f"{prefix}-{i}", stdin=bytes([i]) * 2048)
        assert r.returncode == 0, r.stderr


def test_drain_and_undrain(etcd, make_daemon, tmp_path):
    # sends get 2 s (not 300 ms): none times out on a busy test machine
    (a, b, c), tok = pool(make_daemon, etcd, tmp_path, n=3, timeout_ms="2000")
    # before: keys put through node 1 go home to 2 and to 3
    put_many(a, tok, "before")
    settled_pushes(a)
    assert kpm(b, "served_puts_total") > 0 and kpm(c, "served_puts_total") > 0

    t0 = time.time()
    r = ol(etcd, "cluster", "drain", "2")
    assert r.returncode == 0, r.stderr
    assert b"node 2 is drained" in r.stdout
    assert time.time() - t0 < 10
    assert "asked to drain" in b.stderr() and "node 2 is draining" in b.stderr()
    assert "node 2 is drained" in b.stderr()
    rc, st = states(etcd)
    assert st == {1: "active", 2: "drained", 3: "active"}
    assert rc == 0                       # asked for: not degraded
    topo = json.loads(ol(etcd, "--json", "cluster", "topology").stdout)
    assert [n["kv_member"] for n in topo["nodes"]] == [True, False, True]

    # node 1's own placement leaves 2 out: its keys go home to 3 only
    served_b, served_c = kpm(b, "served_puts_total"), kpm(c, "served_puts_total")
    put_many(a, tok, "during")
    pushed = settled_pushes(a)
    assert kpm(b, "served_puts_total") == served_b
    wait_for(lambda: kpm(c, "served_puts_total") > served_c, "pushes to node 3")
    assert pushed > 0
    assert b.is_ready()                  # drained, not stopped: it still serves

    # drain again: already drained, returns at once
    r = ol(etcd, "cluster", "drain", "2", "--wait-ms", "5000")
    assert r.returncode == 0 and b"node 2 is drained" in r.stdout, r.stderr

    # undrain: active again, and keys go home to it again
    r = ol(etcd, "cluster", "undrain", "2")
    assert r.returncode == 0 and b"node 2 is active" in r.stdout, r.stderr
    assert states(etcd) == (0, {1: "active", 2: "active", 3: "active"})
    time.sleep(0.5)                      # node 1's watch sees the record (milliseconds)
    put_many(a, tok, "after")
    settled_pushes(a)
    assert kpm(b, "served_puts_total") > served_b
    # undrain of a node not drained: nothing to do, said so
    r = ol(etcd, "cluster", "undrain", "2")
    assert r.returncode == 0 and b"node 2 was not drained" in r.stdout


def test_a_drained_node_restarts_drained(etcd, make_daemon, tmp_path):
    (a, b), tok = pool(make_daemon, etcd, tmp_path, n=2)
    assert "node 2 is active" in b.stderr()     # its first start
    r = ol(etcd, "cluster", "drain", "2")
    assert r.returncode == 0, r.stderr
    b.stop()
    assert states(etcd)[1] == {1: "active"}
    b.start()
    # it never says active: draining at once, then drained
    assert states(etcd)[1][2] in ("draining", "drained")
    wait_for(lambda: states(etcd)[1][2] == "drained", "drained after the restart")
    assert "node 2 is active" not in b.stderr()
    r = ol(etcd, "--json", "node", "info", "2")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["drain_asked"] is True
    # a node that is not running cannot be drained, but its drain can be lifted
    b.stop()
    r = ol(etcd, "cluster", "drain", "2")
    assert r.returncode == 1 and b"no node 2 in cluster c1" in r.stderr
    r = ol(etcd, "cluster", "undrain", "2")
    assert r.returncode == 0 and b"drain lifted" in r.stdout, r.stderr
    b.start()
    wait_for(lambda: states(etcd)[1].get(2) == "active", "active after the drain was lifted")


def test_a_drain_that_does_not_finish_times_out(etcd, make_daemon, tmp_path):
    """--wait-ms shorter than cluster.kv_timeout_ms, which the node waits
    out after it says draining: the command gives up, says what is
    pending, and exits 1; the node drains anyway."""
    (a, b), tok = pool(make_daemon, etcd, tmp_path, n=2, timeout_ms="3000")
    r = ol(etcd, "cluster", "drain", "2", "--wait-ms", "200")
    assert r.returncode == 1
    assert b"node 2 is still" in r.stderr and b"not drained" in r.stderr, r.stderr
    wait_for(lambda: states(etcd)[1][2] == "drained", "drained", timeout=20)
    r = ol(etcd, "cluster", "drain", "2", "--wait-ms", "0")
    assert r.returncode == 0 and b"asked to drain" in r.stdout


def test_node_info(etcd, make_daemon, tmp_path):
    (a, b), tok = pool(make_daemon, etcd, tmp_path, n=2)
    r = ol(etcd, "--json", "node", "info", "2")
    assert r.returncode == 0, r.stderr
    n = json.loads(r.stdout)
    assert n["id"] == 2 and n["state"] == "active" and n["ready"] is True
    assert n["s3_addr"] == f"127.0.0.1:{b.port}" and n["kv_addr"] == f"127.0.0.1:{b.kv_port}"
    assert n["rpc_addr"].startswith("127.0.0.1:") and n["pid"] == b.pid()
    assert n["data_dir"] == str(b.data.resolve()) and n["kv_slab_bytes"] > 0
    assert n["drain_asked"] is False and 0 <= n["uptime_s"] < 600
    r = ol(etcd, "node", "info", "1")
    assert r.returncode == 0 and b"state      active" in r.stdout, r.stderr
    assert f"127.0.0.1:{a.port}".encode() in r.stdout


def test_bad_input(etcd, make_daemon, tmp_path):
    (a,), tok = pool(make_daemon, etcd, tmp_path, n=1)
    for args, says in [
            (("cluster", "drain"), b"drain NODE: which node"),
            (("cluster", "drain", "two"), b"NODE 'two': a node id"),
            (("cluster", "drain", "-1"), b"NODE '-1': a node id"),
            (("cluster", "drain", "99999999999"), b"a node id"),
            (("cluster", "drain", "1", "--wait-ms", "soon"), b"--wait-ms 'soon'"),
            (("cluster", "status", "1"), b"status takes no NODE"),
            (("cluster", "topology", "--wait-ms", "5"), b"--wait-ms goes with drain"),
            (("node", "info"), b"info NODE: which node"),
            (("node", "inf", "1"), b"did you mean 'info'"),
    ]:
        r = ol(etcd, *args)
        assert r.returncode == 2 and says in r.stderr, (args, r.stderr)
    for args in (("cluster", "drain", "1"), ("cluster", "undrain", "1"), ("node", "info", "1")):
        r = cli(*args)
        assert r.returncode == 2 and b"--config FILE, or --etcd URL --cluster NAME" in r.stderr
    r = ol(etcd, "cluster", "drain", "5")
    assert r.returncode == 1 and b"no node 5 in cluster c1" in r.stderr
    r = ol(etcd, "node", "info", "5")
    assert r.returncode == 1 and b"no node 5 in cluster c1" in r.stderr
    # etcd away: exit 1, saying so
    r = cli("cluster", "drain", "1", "--etcd", "http://127.0.0.1:1", "--cluster", "c1",
            "--timeout-ms", "300")
    assert r.returncode == 1 and b"cannot read the members" in r.stderr
    # --config: the node's own file; node info without NODE is that node
    cfg = tmp_path / "node.toml"
    cfg.write_text(f'self_id = 1\n[cluster]\nname = "c1"\netcd = ["{etcd.url}"]\n')
    r = cli("--json", "node", "info", "--config", str(cfg))
    assert r.returncode == 0 and json.loads(r.stdout)["id"] == 1, r.stderr


def test_disk_info_of_a_single_host(make_daemon, tmp_path):
    dirs = [tmp_path / f"drive{i}" for i in range(4)]
    kvdir = tmp_path / "kvdisk"
    for p in (*dirs, kvdir):
        p.mkdir()
    d = make_daemon(args=["--data-dirs", ",".join(map(str, dirs)),
                          "--kv-disk.capacity-gb", "0.01", "--kv-disk.dirs", str(kvdir)])
    creds = str(dirs[0] / "s3.credentials")
    r = cli("--json", "disk", "info", "--addr", f"127.0.0.1:{d.port}", "--credentials", creds)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["node"] is None and j["age_ms"] <= 1000
    assert [x["path"] for x in j["drives"]] == [str(p) for p in dirs]
    st = os.statvfs(dirs[0])
    for x in j["drives"]:
        assert x["online"] is True and x["store"] is True and x["set"] == 0, x
        assert x["size_bytes"] == st.f_blocks * st.f_frsize and 0 < x["avail_bytes"], x
        assert x["error"] is None
    kvd = j["kv_disk"]
    assert kvd["capacity_bytes"] == int(0.01 * 2**30)
    assert [x["path"] for x in kvd["dirs"]] == [str(kvdir)]
    files = {f["name"]: f for f in kvd["dirs"][0]["files"]}
    assert "shard-0.dat" in files and "shard-0.idx" in files
    assert files["shard-0.dat"]["bytes"] == (kvdir / "kv-disk" / "shard-0.dat").stat().st_size > 0
    # the table names every drive
    r = cli("disk", "info", "--addr", f"127.0.0.1:{d.port}", "--credentials", creds)
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert "4 drives" in out and all(str(p) in out for p in dirs) and out.count("online") == 4
    assert f"{kvdir}: 2 files" in out
    # --config: the file's own address and credential
    cfg = tmp_path / "single.toml"
    cfg.write_text(f's3_addr = "0.0.0.0:{d.port}"\n')
    r = cli("--json", "disk", "info", "--config", str(cfg), "--credentials", creds)
    assert r.returncode == 0 and len(json.loads(r.stdout)["drives"]) == 4, r.stderr
    r = cli("disk", "info", "1", "--config", str(cfg))
    assert r.returncode == 2 and b"takes no NODE" in r.stderr
    # signed: a wrong credential is refused by the node
    sk = tmp_path / "sk"
    sk.write_text("not-the-secret\n")
    sk.chmod(0o600)
    r = cli("disk", "info", "--addr", f"127.0.0.1:{d.port}", "--access-key", "nobody",
            "--secret-key-file", str(sk))
    assert r.returncode == 1 and b"InvalidAccessKeyId" in r.stderr
    # nobody there
    r = cli("disk", "info", "--addr", "127.0.0.1:1", "--credentials", creds)
    assert r.returncode == 1 and b"refused" in r.stderr
    r = cli("disk", "info", "2", "--addr", f"127.0.0.1:{d.port}")
    assert r.returncode == 2 and b"--addr names the node itself" in r.stderr
    r = cli("disk", "info")
    assert r.returncode == 2 and b"--addr HOST:PORT" in r.stderr


def test_disk_info_of_a_cluster_node(etcd, make_daemon, tmp_path):
    (a, b), tok = pool(make_daemon, etcd, tmp_path, n=2)
    r = ol(etcd, "--json", "disk", "info", "2", "--credentials", str(b.data / "s3.credentials"))
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["node"] == 2 and j["cluster"] == "c1"
    assert [x["path"] for x in j["drives"]] == [str(b.data)]
    assert j["drives"][0]["size_bytes"] > 0 and j["kv_disk"]["dirs"] == []
    r = ol(etcd, "disk", "info", "7", "--credentials", str(b.data / "s3.credentials"))
    assert r.returncode == 1 and b"no node 7 in cluster c1" in r.stderr
