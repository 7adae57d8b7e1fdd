"""The object store across hosts (docs/cluster.md "The object store across
hosts", being built): the nodes of cluster.store_pools form one pool whose
erasure sets spread over their drives; any node serves any S3 request,
reading and writing the shards on the other nodes' drives over the node
RPC (DRIVE). Real etcd, real daemons on loopback, boto3.

What is tested here is what is built: the pool record, each node's drives
formatted to its positions, objects written through one node and read,
checked and deleted through the others with their shards on every node,
reads and writes going on with a node down, and the starts a mismatch
refuses. Listings across nodes, ordering through set owners and heal of
remote drives are not built yet.
"""
import json
import os
import re
import urllib.request
import subprocess
import threading
import time

import boto3
import botocore
import pytest
from botocore.config import Config

import conftest
import faults
from test_cluster import ETCD, etcd, wait_for
from test_cluster_rpc import secret, up
from test_http import hermetic_openlake_env

assert hermetic_openlake_env
assert etcd

pytestmark = pytest.mark.skipif(not ETCD, reason="etcd is not installed (scripts/deps.sh test "
                                "installs etcd-server)")

AK, SK = "OLTESTACCESSKEY00001", "olTestSecretKey/0123456789abcdefghijklmn"
CREDS = {"OPENLAKE_ACCESS_KEY": AK, "OPENLAKE_SECRET_KEY": SK}


def client(d):
    return boto3.client("s3", endpoint_url=d.url, aws_access_key_id=AK,
                        aws_secret_access_key=SK, region_name="us-east-1",
                        config=Config(retries={"max_attempts": 1}))


def node_args(etcd, s, nid, drives, pools="1-3", extra=()):
    return ["--mode", "s3", "--cluster.name", "c1", "--cluster.etcd", etcd.url,
            "--self-id", str(nid), "--cluster.lease-ttl-secs", "2",
            "--rpc-addr", f"127.0.0.1:{conftest.free_port()}",
            "--cluster.etcd-timeout-ms", "1000", "--cluster.secret-file", s,
            "--cluster.store-pools", pools, "--cluster.store-timeout-ms", "3000",
            "--data-dirs", ",".join(str(x) for x in drives), *extra]


def start_pool(make_daemon, etcd, tmp_path, n=3, per=2, extra=()):
    s = secret(tmp_path)
    nodes = []
    for i in range(1, n + 1):
        drives = [tmp_path / f"n{i}" / f"d{j}" for j in range(per)]
        for x in drives:
            x.mkdir(parents=True)
        d = make_daemon(args=node_args(etcd, s, i, drives, f"1-{n}", extra), env=CREDS,
                        start=False)
        d.drives = drives
        d.proc = None
        nodes.append(d)
    for d in nodes:          # each waits for etcd's pool record, so start them all first
        d.start(wait=False)
    for d in nodes:
        d.wait_ready()
    for i, d in enumerate(nodes):
        wait_for(lambda: all(up(d, p) == 1 for p in range(1, n + 1) if p != i + 1), "peers up")
    settled(etcd)
    return nodes, s


def settled(etcd):
    """Waits until every set has an owner and none moved for 1.5 s (three
    rounds of the owners' threads): nodes that became active take their
    sets back at start, and a write caught by a move fails (503)."""
    cli = conftest.bin_path("openlake")
    last, since = None, time.time()
    deadline = time.time() + 30
    while time.time() < deadline:
        now = owners(etcd, cli)
        if now != last or any(o is None for o, _ in now):
            last, since = now, time.time()
        elif time.time() - since >= 1.5:
            return
        time.sleep(0.1)
    raise AssertionError("the set owners did not settle")


def etcdctl(etcd, *args):
    return subprocess.run(["etcdctl", "--endpoints", etcd.url, *args], capture_output=True,
                          text=True, check=True).stdout


def test_a_pool_spreads_its_sets_and_any_node_serves_any_request(make_daemon, etcd, tmp_path):
    nodes, _ = start_pool(make_daemon, etcd, tmp_path)
    # the record: three nodes in order, two drives each, one set of six, parity 3
    rec = json.loads(etcdctl(etcd, "get", "--print-value-only", "/openlake/c1/store/pools/0"))
    assert rec["v"] == 1 and rec["nodes"] == [1, 2, 3]
    assert (rec["drives_per_node"], rec["set_drives"], rec["parity"]) == (2, 6, 3)
    assert len(rec["drives"]) == 6 and len(set(rec["drives"])) == 6
    for d in nodes:
        assert "the object store across hosts is being built" in d.stderr()
        for x in d.drives:
            assert (x / ".openlake" / "format").exists()
    c1, c2, c3 = (client(d) for d in nodes)
    c1.create_bucket(Bucket="pool")
    sizes = [0, 1, 5000, 131073, 3 * 1024 * 1024 + 17]
    bodies = {f"k{n}": os.urandom(n) for n in sizes}
    for k, b in bodies.items():
        c1.put_object(Bucket="pool", Key=k, Body=b)
    for k, b in bodies.items():
        assert c2.get_object(Bucket="pool", Key=k)["Body"].read() == b
        assert c3.head_object(Bucket="pool", Key=k)["ContentLength"] == len(b)
    r = c3.get_object(Bucket="pool", Key="k131073", Range="bytes=100-199")
    assert r["Body"].read() == bodies["k131073"][100:200]
    # the shards are on every node's drives: each drive holds the bucket's objects
    for d in nodes:
        for x in d.drives:
            objs = x / ".openlake" / "buckets" / "pool" / "objects"
            assert sum(1 for _ in objs.rglob("meta")) == len(bodies), (d, x)
    # a write through node 3, read through node 1; deleted through node 2
    c3.put_object(Bucket="pool", Key="from3", Body=b"three")
    assert c1.get_object(Bucket="pool", Key="from3")["Body"].read() == b"three"
    c2.delete_object(Bucket="pool", Key="from3")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        c1.get_object(Bucket="pool", Key="from3")
    assert e.value.response["Error"]["Code"] == "NoSuchKey"
    # multipart, its parts through different nodes' connections is not built
    # (the upload registry is the owner's): one node's upload, read elsewhere
    up_id = c1.create_multipart_upload(Bucket="pool", Key="mp")["UploadId"]
    p1 = os.urandom(5 * 1024 * 1024)
    p2 = os.urandom(1234)
    e1 = c1.upload_part(Bucket="pool", Key="mp", UploadId=up_id, PartNumber=1, Body=p1)["ETag"]
    e2 = c1.upload_part(Bucket="pool", Key="mp", UploadId=up_id, PartNumber=2, Body=p2)["ETag"]
    c1.complete_multipart_upload(Bucket="pool", Key="mp", UploadId=up_id, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]})
    assert c2.get_object(Bucket="pool", Key="mp")["Body"].read() == p1 + p2

    # node 3 down: its two drives of six are gone; reads (k = 3) and writes
    # (wq = 4) go on through the others
    nodes[2].stop()
    t0 = time.time()
    for k, b in bodies.items():
        assert c2.get_object(Bucket="pool", Key=k)["Body"].read() == b
    c1.put_object(Bucket="pool", Key="degraded", Body=b"x" * 300000)
    assert c2.get_object(Bucket="pool", Key="degraded")["Body"].read() == b"x" * 300000
    assert time.time() - t0 < 30


def test_starts_a_mismatch_refuses(make_daemon, etcd, tmp_path):
    nodes, s = start_pool(make_daemon, etcd, tmp_path, n=2, per=2)
    # node 3 says the pool is 1-3: not the pool etcd holds
    drives = [tmp_path / "x" / f"d{j}" for j in range(2)]
    for x in drives:
        x.mkdir(parents=True)
    d = make_daemon(args=node_args(etcd, s, 3, drives, "1-3"), env=CREDS, start=False)
    d.start(wait=False)
    assert d.proc.wait(timeout=60) == 2
    assert "is not the pool etcd holds" in d.stderr()
    # node 2 restarted with three drives: not as many as the pool's nodes have
    nodes[1].stop()
    extra = tmp_path / "n2" / "d2"
    extra.mkdir()
    d2 = make_daemon(args=node_args(etcd, s, 2, nodes[1].drives + [extra], "1-2"), env=CREDS,
                     start=False)
    d2.start(wait=False)
    assert d2.proc.wait(timeout=60) == 2
    assert "has 3 data_dirs, the pool's nodes 2 each" in d2.stderr()
    # node 2 with its drives swapped: each is formatted for the other's position
    d3 = make_daemon(args=node_args(etcd, s, 2, nodes[1].drives[::-1], "1-2"), env=CREDS,
                     start=False)
    d3.start(wait=False)
    assert d3.proc.wait(timeout=60) == 2
    assert "formatted for another deployment or position" in d3.stderr()
    # and as it was, it starts again and serves what it had
    d4 = make_daemon(args=node_args(etcd, s, 2, nodes[1].drives, "1-2"), env=CREDS)
    assert d4.proc.poll() is None


def test_cluster_topology_shows_every_set_and_the_failures_it_survives(make_daemon, etcd,
                                                                         tmp_path):
    # 3 nodes of 2 drives in sets of 3, parity 1: each set one drive a node
    nodes, _ = start_pool(make_daemon, etcd, tmp_path, n=3, per=2,
                          extra=("--set-drive-count", "3", "--default-parity-count", "1"))
    cli = conftest.bin_path("openlake")
    out = subprocess.run([cli, "cluster", "topology", "--etcd", etcd.url, "--cluster", "c1"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert ("object store pool 0: 3 nodes of 2 drives, 2 sets of 3 drives, parity 1 "
            "(reads need 2 drives of a set, writes 2)") in out.stdout
    lines = [x.split() for x in out.stdout.splitlines() if "/3 " in x]
    assert [x[:5] + x[6:] for x in lines] == [["0", "1:0", "2:0", "3:0", "3/3", "1", "1"],
                                              ["1", "1:1", "2:1", "3:1", "3/3", "1", "1"]]
    js = json.loads(subprocess.run([cli, "--json", "cluster", "topology", "--etcd", etcd.url,
                                    "--cluster", "c1"], capture_output=True, text=True,
                                   check=True).stdout)
    [p] = js["store_pools"]
    assert p["nodes"] == [1, 2, 3] and p["set_drives"] == 3 and p["write_quorum"] == 2
    s0 = p["sets"][0]
    assert [(x["node"], x["drive"]) for x in s0["drives"]] == [(1, 0), (2, 0), (3, 0)]
    assert s0["node_failures_survived_reads"] == 1 and s0["node_failures_survived_writes"] == 1
    # node 3 gone from the view: its drives are down
    nodes[2].stop()
    wait_for(lambda: json.loads(subprocess.run(
        [cli, "--json", "cluster", "topology", "--etcd", etcd.url, "--cluster", "c1"],
        capture_output=True, text=True).stdout)["store_pools"][0]["sets"][0]["drives_up"] == 2,
        "node 3's drives down")


def owners(etcd, cli):
    js = json.loads(subprocess.run([cli, "--json", "cluster", "topology", "--etcd", etcd.url,
                                    "--cluster", "c1"], capture_output=True, text=True,
                                   check=True).stdout)
    return [(x["owner"], x["owner_token"]) for x in js["store_pools"][0]["sets"]]


def test_every_set_has_one_owner_and_a_dead_owners_sets_move(make_daemon, etcd, tmp_path):
    """Set owners (docs/cluster.md "Ordering"): each set's owner key is
    created by the active node it prefers; when that node dies its lease
    takes its keys, and its sets go to the nodes they prefer next, each with
    a larger fencing token."""
    # 4 nodes of 2 drives in sets of 4 (one drive a node), parity 2: 2 sets,
    # each keeps its write quorum (3) with a node down
    nodes, _ = start_pool(make_daemon, etcd, tmp_path, n=4, per=2,
                          extra=("--set-drive-count", "4", "--default-parity-count", "2"))
    cli = conftest.bin_path("openlake")
    wait_for(lambda: all(o is not None for o, _ in owners(etcd, cli)), "every set owned")
    first = owners(etcd, cli)
    assert {o for o, _ in first} <= {1, 2, 3, 4}
    def owned():   # sets each node owns and has fenced (it grants their locks)
        return {i + 1: int(re.search(r'openlake_store_sets_owned\{cluster="c1"\} (\d+)',
                                     urllib.request.urlopen(d.url + "/_openlake/metrics")
                                     .read().decode()).group(1)) for i, d in enumerate(nodes)
                if d.proc.poll() is None}
    wait_for(lambda: sum(owned().values()) == 2, "every set's drives fenced by its owner")
    have = owned()
    assert all(have[o] >= 1 for o, _ in first)
    # kill -9 the owner of set 0: after its lease (2 s) its sets move
    victim = first[0][0]
    nodes[victim - 1].proc.kill()
    nodes[victim - 1].proc.wait()
    wait_for(lambda: all(o not in (None, victim) for o, _ in owners(etcd, cli)),
             "the dead node's sets taken", timeout=20)
    after = owners(etcd, cli)
    for (o0, t0), (o1, t1) in zip(first, after):
        if o0 == victim:
            assert t1 > t0
        else:
            assert (o1, t1) == (o0, t0)   # the others' sets stay where they were
    # the living drives of every set took its owner's token (.openlake/fence:
    # "OLFN", version, token at 8): position g = drive * 4 + node index, set g // 4
    def fence_of(path):
        b = (path / ".openlake" / "fence").read_bytes()
        assert len(b) == 24 and b[:4] == b"OLFN"
        return int.from_bytes(b[8:16], "little")

    wait_for(lambda: sum(owned().values()) == 2, "the moved sets fenced by their new owners")
    for st, (o1, t1) in enumerate(after):
        for g in range(4 * st, 4 * st + 4):
            node, drive = g % 4, g // 4
            if node + 1 == victim:
                continue
            wait_for(lambda: fence_of(nodes[node].drives[drive]) == t1, "the drive fenced")


def test_racing_writes_of_one_key_through_two_nodes_agree(make_daemon, etcd, tmp_path):
    """Commits of one set are ordered by its owner's commit locks
    (docs/cluster.md "Ordering"): PUTs of one key through two nodes at once
    end with one version every node serves; of conditional creates through
    three nodes at once exactly one succeeds."""
    import concurrent.futures
    nodes, _ = start_pool(make_daemon, etcd, tmp_path, n=3, per=2)
    clients = [client(d) for d in nodes]
    clients[0].create_bucket(Bucket="race")
    ex = concurrent.futures.ThreadPoolExecutor(3)
    for rnd in range(15):
        key = f"k{rnd % 3}"
        bodies = [os.urandom(200000 + 1000 * i) for i in range(3)]

        def put(i):
            clients[i].put_object(Bucket="race", Key=key, Body=bodies[i])
            return i

        assert sorted(ex.map(put, range(3))) == [0, 1, 2]
        got = [c.get_object(Bucket="race", Key=key)["Body"].read() for c in clients]
        assert got[0] in bodies and got[1] == got[0] and got[2] == got[0], rnd

        def create(i):
            try:
                clients[i].put_object(Bucket="race", Key=f"c{rnd}", Body=b"writer %d" % i,
                                      IfNoneMatch="*")
                return 200, i
            except botocore.exceptions.ClientError as e:
                return e.response["ResponseMetadata"]["HTTPStatusCode"], i

        res = list(ex.map(create, range(3)))
        wins = [i for st, i in res if st == 200]
        assert len(wins) == 1, res
        assert all(st in (409, 412) for st, _ in res if st != 200), res
        for c in clients:
            assert c.get_object(Bucket="race", Key=f"c{rnd}")["Body"].read() == \
                b"writer %d" % wins[0]
    ex.shutdown()
    # the locks went through the owners: some were granted to other nodes
    served = 0
    for d in nodes:
        m = re.search(r'openlake_store_locks_served_total\{cluster="c1"\} (\d+)',
                      urllib.request.urlopen(d.url + "/_openlake/metrics").read().decode())
        served += int(m.group(1))
    assert served > 0


def test_a_lock_granted_after_its_asker_gave_up_goes_back(make_daemon, etcd, tmp_path):
    """A LOCK whose grant comes after the asker's deadline (the owner
    stalled: SIGSTOP, as a long pause) is given back by the asker (UNLOCK of
    the call's ticket, docs/node-protocol.md "LOCK (4), UNLOCK (5)"): the
    key stays writable through every node, instead of locked for as long as
    the asker's connection to the owner lives."""
    import signal
    nodes, _ = start_pool(make_daemon, etcd, tmp_path, n=3, per=2,
                          extra=("--cluster.store-timeout-ms", "300",
                                 "--cluster.lease-ttl-secs", "8"))
    cli = conftest.bin_path("openlake")
    owner = owners(etcd, cli)[0][0]   # one set of six
    a, c = (d for i, d in enumerate(nodes) if i + 1 != owner)
    ca, cc = client(a), client(c)
    ca.create_bucket(Bucket="lks")
    ca.put_object(Bucket="lks", Key="k", Body=b"first")
    stalled = nodes[owner - 1]
    out = {}

    def put_through_a():
        try:
            ca.put_object(Bucket="lks", Key="k", Body=b"through a")
            out["a"] = 200
        except botocore.exceptions.ClientError as e:
            out["a"] = e.response["ResponseMetadata"]["HTTPStatusCode"]

    stalled.proc.send_signal(signal.SIGSTOP)
    try:
        t = threading.Thread(target=put_through_a)
        t.start()
        time.sleep(1.5)   # LOCK asked again and again, each past its 300 ms
    finally:
        stalled.proc.send_signal(signal.SIGCONT)
    t.join(30)
    assert not t.is_alive() and out["a"] in (200, 503), out
    # the owner answered every stalled LOCK late; the ones it granted went back
    t0 = time.time()
    cc.put_object(Bucket="lks", Key="k", Body=b"through c")
    assert time.time() - t0 < 5
    for d in nodes:
        assert client(d).get_object(Bucket="lks", Key="k")["Body"].read() == b"through c"
    assert ca.put_object(Bucket="lks", Key="k2", Body=b"x")
    m = urllib.request.urlopen(stalled.url + "/_openlake/metrics").read().decode()
    assert int(re.search(r'openlake_store_locks_late_total\{cluster="c1"\} (\d+)',
                         m).group(1)) >= 1


def rpc_port(d):
    return int(d.args[d.args.index("--rpc-addr") + 1].rsplit(":", 1)[1])


def ss_kill_works():
    """Whether `ss -K` can reset a TCP connection here (root, and a kernel
    with CONFIG_INET_DIAG_DESTROY): tried on a loopback pair of our own."""
    import socket
    try:
        srv = socket.create_server(("127.0.0.1", 0))
        port = srv.getsockname()[1]
        cli = socket.create_connection(("127.0.0.1", port))
        acc, _ = srv.accept()
        subprocess.run(["ss", "-K", f"( dport = :{port} )"], capture_output=True, timeout=10)
        try:
            cli.send(b"x")
            cli.settimeout(2)
            return cli.recv(1) == b""
        except OSError:
            return True
        finally:
            for x in (cli, acc, srv):
                x.close()
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.mark.skipif(not faults.build_has_faults(), reason=faults.SKIP_REASON)
@pytest.mark.skipif(not ss_kill_works(), reason="ss -K cannot reset connections here (needs "
                    "root and CONFIG_INET_DIAG_DESTROY)")
def test_a_holder_cut_off_mid_commit_cannot_change_the_drives_after_its_lock_went(
        make_daemon, etcd, tmp_path):
    """A lock goes back when its holder's connection to the owner ends; the
    owner first fences the set again with a new token (docs/cluster.md
    "Ordering"), so a holder that was cut off mid-commit and carries on
    later has its changes refused instead of writing over the commits made
    under the lock since. Node A's commit is held up after its lock (a
    fault: its first fsync completes 4 s late), the owner's node RPC
    connections are reset (ss -K), node C writes the key meanwhile; C's
    acknowledged version must survive A's waking up."""
    nodes, _ = start_pool(make_daemon, etcd, tmp_path, n=3, per=2,
                          extra=("--http.debug-endpoints", "true", "--threads", "1"))
    cli = conftest.bin_path("openlake")
    owner = owners(etcd, cli)[0][0]   # one set of six
    a, c = (d for i, d in enumerate(nodes) if i + 1 != owner)
    ca, cc = client(a), client(c)
    ca.create_bucket(Bucket="cut")
    for d in nodes:   # each node keeps its own copy of the state (docs/cluster.md)
        client(d).put_bucket_versioning(Bucket="cut",
                                        VersioningConfiguration={"Status": "Enabled"})
    v0 = ca.put_object(Bucket="cut", Key="k", Body=b"v0")["VersionId"]
    # C's first drive (pool position: drive 0 of node index i is position i):
    # a remote fsync of A's commit, after its lock
    ic = nodes.index(c)
    assert faults.post(a, f"store:drive={ic},op=fsync,err=delay,ms=4000")[0] == 200
    out = {}

    def put_through_a():
        try:
            out["a"] = ca.put_object(Bucket="cut", Key="k", Body=b"through a")["VersionId"]
        except botocore.exceptions.ClientError as e:
            out["status"] = e.response["ResponseMetadata"]["HTTPStatusCode"]

    t = threading.Thread(target=put_through_a)
    t.start()
    time.sleep(1)   # A's one core is asleep by now (asking A would wait for it)
    port = rpc_port(nodes[owner - 1])
    tok = owners(etcd, cli)[0][1]
    subprocess.run(["ss", "-K", f"( sport = :{port} or dport = :{port} )"], check=True,
                   capture_output=True)
    vc = cc.put_object(Bucket="cut", Key="k", Body=b"through c")["VersionId"]
    t.join(30)
    assert not t.is_alive()
    assert faults.get(a)["rules"][0]["fired"] == 1
    # every acknowledged version is there through every node (A's changes
    # under its old token after the new fence were refused; it may have
    # committed again under the new one, after C), and all agree on the latest
    acked = {v0: b"v0", vc: b"through c"}
    assert "a" in out or out["status"] == 503, out   # refused: SlowDown, retryable
    if "a" in out:
        acked[out["a"]] = b"through a"
    latest = set()
    for d in nodes:
        for v, body in acked.items():
            got = client(d).get_object(Bucket="cut", Key="k", VersionId=v)["Body"].read()
            assert got == body, (d, v)
        latest.add(client(d).get_object(Bucket="cut", Key="k")["Body"].read())
    assert len(latest) == 1 and latest <= {b"through c", acked.get(out.get("a"))}, latest
    assert owners(etcd, cli)[0][1] > tok   # the set got a new token
    m = urllib.request.urlopen(nodes[owner - 1].url + "/_openlake/metrics").read().decode()
    assert int(re.search(r'openlake_store_locks_orphaned_total\{cluster="c1"\} (\d+)',
                         m).group(1)) >= 1
