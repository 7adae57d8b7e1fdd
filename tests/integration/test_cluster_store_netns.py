"""The object store across hosts (docs/cluster.md "The object store across
hosts") on four nodes, each in its own network namespace (tests/integration/
netns.py: a veth pair into a bridge the test makes and removes), each with
four drives on a loop-mounted XFS of its own (one filesystem a node; where
XFS cannot be mounted, plain directories, said in the test's output), a real
etcd on the bridge, boto3 and the aws CLI from the host's namespace.

The pool: sets of four drives, one on each node, parity 2 (k = m = 2,
write quorum 3): each set survives two node failures for reads and one for
writes. What is tested is what is built: objects written through one node
and read, checked and deleted through the others (boto3 and the aws CLI);
writes racing through two nodes; every object still exact with two nodes
down; kill -9 of a node under 8 writers, every acknowledged write read back
exact from the others; a node cut off (its link down) while clients write
through both sides of the cut, over rounds of random timing: no
acknowledged write lost, no key with two acknowledged latest values, and
all nodes agreeing once the link is back. Not built yet, so not tested:
listings across nodes, multipart parts through several nodes, heal of a
node that returns.
"""
import concurrent.futures
import os
import random
import shutil
import subprocess
import threading
import time

import boto3
import botocore
import pytest
from botocore.config import Config

from netns import NETNS_WHY, IP, metrics_in, net, peer_up, start_etcd  # noqa: F401
from test_cluster import ETCD, wait_for
from test_cluster_rpc import secret
from test_http import hermetic_openlake_env
from test_s3 import aws   # the aws CLI, signed with the same credential

assert hermetic_openlake_env

pytestmark = [
    pytest.mark.cluster_store_netns,
    pytest.mark.skipif(not ETCD, reason="etcd is not installed (scripts/deps.sh test installs "
                       "etcd-server)"),
    pytest.mark.skipif(bool(NETNS_WHY), reason=NETNS_WHY),
]

AK, SK = "OLTESTACCESSKEY00001", "olTestSecretKey/0123456789abcdefghijklmn"
CREDS = {"OPENLAKE_ACCESS_KEY": AK, "OPENLAKE_SECRET_KEY": SK}


def client(d, timeout=20):
    return boto3.client("s3", endpoint_url=d.url, aws_access_key_id=AK,
                        aws_secret_access_key=SK, region_name="us-east-1",
                        config=Config(retries={"max_attempts": 1},
                                      connect_timeout=min(timeout, 5), read_timeout=timeout))


class Pool:
    """Four nodes in namespaces, four drives each."""

    def __init__(self, net, make_daemon, tmp_path):
        self.e = start_etcd(net, tmp_path)
        self.mounts = []
        self.nodes = []
        s = secret(tmp_path)
        xfs = os.geteuid() == 0 and shutil.which("mkfs.xfs")
        for i in range(1, 5):
            root = tmp_path / f"n{i}"
            root.mkdir()
            if xfs:
                img = tmp_path / f"n{i}.img"
                subprocess.run(["truncate", "-s", "1G", str(img)], check=True)
                subprocess.run(["mkfs.xfs", "-q", "-f", str(img)], check=True)
                if subprocess.run(["mount", "-o", "loop", str(img), str(root)]).returncode == 0:
                    self.mounts.append(root)
                else:
                    print("cannot loop-mount XFS here: plain directories")
            drives = [root / f"d{j}" for j in range(4)]
            for x in drives:
                x.mkdir()
            ip = net.ips[i - 1]
            d = net.put(make_daemon(start=False, env=CREDS, args=[
                "--mode", "s3", "--cluster.name", "c1", "--cluster.etcd", self.e.url,
                "--self-id", str(i), "--cluster.lease-ttl-secs", "2",
                "--cluster.etcd-timeout-ms", "1000", "--rpc-addr", f"{ip}:9100",
                "--cluster.secret-file", s, "--cluster.store-pools", "1-4",
                "--cluster.store-timeout-ms", "2000", "--set-drive-count", "4",
                "--default-parity-count", "2", "--threads", "2",
                "--data-dirs", ",".join(map(str, drives))]), i)
            d.drives = drives
            self.nodes.append(d)
        for d in self.nodes:
            d.start(wait=False)
        for d in self.nodes:
            d.wait_ready()
        self.c = [client(d) for d in self.nodes]
        self.net = net
        self.connected()
        # every set owned, fenced, and no longer moving: a write goes through at once
        wait_for(lambda: self.owned() == 4, "every set owned", timeout=30)
        from test_cluster_store import settled
        settled(self.e)

    def connected(self, timeout=30):
        """Waits until every node is connected to every other."""
        for i in range(1, 5):
            wait_for(lambda: all(peer_up(metrics_in(self.net.ns[i - 1], self.nodes[i - 1].url),
                                         p) == 1 for p in range(1, 5) if p != i),
                     f"node {i}'s peers up", timeout=timeout)

    def owned(self, alive=(1, 2, 3, 4)):
        n = 0
        for i in alive:
            r = subprocess.run([IP, "netns", "exec", f"ol{self.net_tag}n{i}", "curl", "-s",
                                "--max-time", "5", self.nodes[i - 1].url + "/_openlake/metrics"],
                               capture_output=True, text=True, timeout=30).stdout
            for ln in r.splitlines():
                if ln.startswith('openlake_store_sets_owned{cluster="c1"} '):
                    n += int(ln.split()[-1])
        return n

    def close(self):
        for d in self.nodes:
            if d.proc is not None and d.proc.poll() is None:
                d.stop(expect_rc=None)
        self.e.kill()
        for m in self.mounts:
            subprocess.run(["umount", "-l", str(m)])


@pytest.fixture
def pool(net, make_daemon, tmp_path):
    Pool.net_tag = net.tag
    p = Pool(net, make_daemon, tmp_path)
    yield p
    p.close()


def test_any_node_serves_and_two_nodes_lost_lose_nothing(pool, tmp_path):
    c1, c2, c3, c4 = pool.c
    c1.create_bucket(Bucket="nss")
    bodies = {f"k{i}": os.urandom(n) for i, n in enumerate([0, 7, 70000, 1 << 20, 5 << 20])}
    for k, b in bodies.items():
        c1.put_object(Bucket="nss", Key=k, Body=b)
    for c in (c2, c3, c4):
        for k, b in bodies.items():
            assert c.get_object(Bucket="nss", Key=k)["Body"].read() == b
    # the aws CLI: written through node 1, read through node 3, removed through node 4
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(3 << 20))
    aws(pool.nodes[0], tmp_path, "s3", "cp", str(src), "s3://nss/cli/f.bin")
    out = tmp_path / "back.bin"
    aws(pool.nodes[2], tmp_path, "s3", "cp", "s3://nss/cli/f.bin", str(out))
    assert out.read_bytes() == src.read_bytes()
    aws(pool.nodes[3], tmp_path, "s3", "rm", "s3://nss/cli/f.bin")
    with pytest.raises(botocore.exceptions.ClientError):
        c2.head_object(Bucket="nss", Key="cli/f.bin")
    # multipart through node 2 (its parts through that node), read through node 1
    up = c2.create_multipart_upload(Bucket="nss", Key="mp")["UploadId"]
    p1, p2 = os.urandom(5 << 20), os.urandom(100)
    e1 = c2.upload_part(Bucket="nss", Key="mp", UploadId=up, PartNumber=1, Body=p1)["ETag"]
    e2 = c2.upload_part(Bucket="nss", Key="mp", UploadId=up, PartNumber=2, Body=p2)["ETag"]
    c2.complete_multipart_upload(Bucket="nss", Key="mp", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]})
    bodies["mp"] = p1 + p2
    # writes racing through two nodes: one version, the same everywhere
    ex = concurrent.futures.ThreadPoolExecutor(2)
    for rnd in range(5):
        rb = {0: os.urandom(100000), 3: os.urandom(100001)}
        list(ex.map(lambda i: pool.c[i].put_object(Bucket="nss", Key="race", Body=rb[i]), (0, 3)))
        got = {c.get_object(Bucket="nss", Key="race")["Body"].read() for c in pool.c}
        assert len(got) == 1 and got <= set(rb.values()), rnd
    ex.shutdown()
    # two nodes down (kill -9): each set keeps two of its four drives = k
    for i in (2, 3):
        pool.nodes[i - 1].proc.kill()
        pool.nodes[i - 1].proc.wait()
    for c in (c1, c4):
        for k, b in bodies.items():
            assert c.get_object(Bucket="nss", Key=k)["Body"].read() == b, k


def test_kill_a_node_under_eight_writers_loses_no_acknowledged_write(pool):
    pool.c[0].create_bucket(Bucket="kill")
    acked, errors, stop = {}, [], threading.Event()
    lock = threading.Lock()

    def writer(t):
        cl = client(pool.nodes[t % 4])           # through every node, node 3 included
        i = 0
        while not stop.is_set() and i < 400:     # bounded
            key = f"t{t}/{i}"
            body = os.urandom(20000 + (i * 7919 + t * 104729) % 300000)
            try:
                if i % 7 == 6 and acked:
                    with lock:
                        gone = [k for k in list(acked)[-3:] if k.startswith(f"t{t}/")]
                    if gone:
                        cl.delete_objects(Bucket="kill",
                                          Delete={"Objects": [{"Key": k} for k in gone]})
                        with lock:
                            for k in gone:
                                acked[k] = None
                cl.put_object(Bucket="kill", Key=key, Body=body)
                with lock:
                    acked[key] = body
            except Exception as e:  # noqa: BLE001  (node 3's clients fail once it is gone)
                errors.append((t, repr(e)))
            i += 1

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    deadline = time.time() + 60
    while len(acked) < 40 and time.time() < deadline:
        time.sleep(0.05)
    pool.nodes[2].proc.kill()                    # kill -9 of node 3 mid-load
    pool.nodes[2].proc.wait()
    n0 = len(acked)
    while len(acked) < n0 + 40 and time.time() < deadline + 60:
        time.sleep(0.05)
    stop.set()
    for th in threads:
        th.join(timeout=120)
    assert len(acked) >= n0 + 40, (len(acked), errors[:5])
    # every acknowledged write reads back exact from the three others
    for k, b in acked.items():
        for c in (pool.c[0], pool.c[1], pool.c[3]):
            if b is None:
                with pytest.raises(botocore.exceptions.ClientError):
                    c.head_object(Bucket="kill", Key=k)
            else:
                assert c.get_object(Bucket="kill", Key=k)["Body"].read() == b, k
    # the writers through nodes 1, 2 and 4 went on after node 3 died
    assert not [e for t, e in errors if t % 4 != 2 and "SlowDown" not in e
                and "503" not in e], errors[:5]


def read_settled(c, bucket, key, within=15):
    """GET, asked again while the answer is 503 (a node just reconnected may
    still be waiting on a connection the cut left half-open), for a while."""
    deadline = time.time() + within
    while True:
        try:
            return c.get_object(Bucket=bucket, Key=key)["Body"].read()
        except botocore.exceptions.ClientError as e:
            if e.response["ResponseMetadata"]["HTTPStatusCode"] != 503 or time.time() > deadline:
                raise
            print("503 on", key)
            time.sleep(0.2)


@pytest.mark.timeout(600)
def test_a_node_cut_off_acknowledges_nothing_the_others_do_not_see(pool, net):
    """Node 4's link goes down while clients write through node 1 and node 4;
    node 4 reaches no write quorum of any set (one drive of four), so it
    acknowledges nothing once the cut has settled; after the link is back
    every node serves the same value of each key, and that value is the
    last acknowledged one or a write whose outcome its client never learnt
    (its answer lost with the link) that overlapped or followed it: no
    acknowledged write is lost. 12 rounds of random timing (bounded); in
    every fourth the cut outlasts node 4's lease, its sets move and the new
    owners fence their drives. A read just after the link is back may be
    refused (503) while a connection the cut left half-open times out: it
    is asked again for a while."""
    pool.c[0].create_bucket(Bucket="cut")
    rng = random.Random(7)
    for rnd in range(12):
        keys = [f"r{rnd}/k{j}" for j in range(4)]
        stop = threading.Event()
        tries = []   # (key, body, node, started, ended, acknowledged)

        def writer(node, seed):
            # node 1's writes wait out node 4's drive (store_timeout_ms) during
            # the cut; node 4's own give up sooner
            cl = client(pool.nodes[node - 1], timeout=6 if node == 1 else 2)
            r = random.Random(seed)
            n = 0
            while not stop.is_set() and n < 40:
                key = r.choice(keys)
                body = b"%d/%d/%d/" % (rnd, node, n) + os.urandom(r.randrange(1, 40000))
                t0 = time.time()
                try:
                    cl.put_object(Bucket="cut", Key=key, Body=body)
                    tries.append((key, body, node, t0, time.time(), True))
                except Exception:  # noqa: BLE001  (refused, or its answer lost: not acked)
                    tries.append((key, body, node, t0, time.time(), False))
                n += 1

        ths = [threading.Thread(target=writer, args=(n, rnd * 10 + n)) for n in (1, 4)]
        for th in ths:
            th.start()
        time.sleep(rng.uniform(0.05, 0.4))
        net.cut(4)
        cut_at = time.time()
        # most cuts are shorter than the lease (2 s); every fifth is longer, so
        # that node 4's sets move to the others, who fence their drives
        time.sleep(rng.uniform(2.8, 3.5) if rnd % 4 == 3 else rng.uniform(0.2, 0.8))
        stop.set()
        for th in ths:
            th.join(timeout=60)
        net.cut(4, up=True)
        # node 4 acknowledged nothing begun after the cut had settled (its steps
        # to the other nodes' drives fail within store_timeout_ms: 2 s)
        late = [x[:3] for x in tries if x[2] == 4 and x[5] and x[3] > cut_at + 2.5]
        assert not late, late[:3]
        wait_for(lambda: pool.owned() == 4, "every set owned again", timeout=40)
        pool.connected(timeout=40)   # node 4 reaches the others' drives again
        for key in keys:
            acked = [x for x in tries if x[0] == key and x[5]]
            if not acked:
                continue
            last = max(acked, key=lambda x: x[4])
            allowed = {last[1]} | {x[1] for x in tries if x[0] == key and not x[5]
                                   and x[4] >= last[3]}
            # every node agrees, once each reaches every drive again: a commit
            # the cut stopped may have left a version on k drives but fewer than
            # wq, which a reader that sees them serves and one that misses a
            # drive does not (heal, which settles such a version, is not built
            # for remote drives yet)
            deadline = time.time() + 20
            while True:
                got = {read_settled(c, "cut", key) for c in pool.c}
                if len(got) == 1 or time.time() > deadline:
                    break
                time.sleep(0.5)
            assert len(got) == 1, (rnd, key)
            v = got.pop()
            assert v in allowed, (rnd, key, v[:12], last[1][:12])
