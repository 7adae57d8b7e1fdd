"""The cluster behind ttft.py's `openlake-remote` system: etcd and two
openlaked nodes in one cluster, so that an engine on node A loads a prefix
that lives on node B only, every block over the node RPC (TCP).

Node B (id 2) starts once and holds the prefix: the populating engine saves
through B's Unix socket while A is down, so B is the only KV member and keeps
every block. Node A (id 1) is started afresh (an empty data dir) before each
measured engine and stopped after it: the engine, connected to A through
shared memory (`openlake_device: "local"`), finds nothing on A: A asks B
whether it has the lookup's keys (KV_GET with EXISTS), and fetches every
block from B (KV_GET) while the worker's load waits. That needs
B to be one of each key's homes with A back in the cluster, so both nodes run
with `cluster.kv_replicas` 2 (with 2 members: every key is homed on both);
with 1, the keys placed on A would be misses on a fresh A, not fetches.
A's `openlake_kvpool_fetched_keys_total` (ttft.py reads it around each
prompt) says how many keys crossed.

Where: two network namespaces on a bridge (bench/vllm/run_ttft.sh makes them,
as bench/cluster/run_pool.sh does: NS_A, NS_B, IP_A, IP_B; etcd on the
bridge's address in the root namespace, where the engines run), or loopback
(no namespaces: every address 127.0.0.1). Servers pinned to CPU 0, like the
local openlaked; one data core each (--threads 1). The lease TTL is 600 s:
ttft.py pauses (SIGSTOP) etcd and B while another system's engine runs,
and a paused node must not lose its membership.
"""
import os
import shutil
import signal
import subprocess
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CLUSTER = "ttft"
LEASE_TTL_SECS = 600


def _free_ports(n):
    import sys

    sys.path.insert(0, os.path.join(ROOT, "bench", "kv"))
    from benchutil import free_ports

    return free_ports(n)


def metrics(url, label=f'cluster="{CLUSTER}"'):
    """The node's metrics (openlake_* lines with label), by name."""
    text = urllib.request.urlopen(url + "/_openlake/metrics", timeout=5).read().decode()
    out = {}
    for ln in text.splitlines():
        if ln.startswith("openlake_") and label in ln:
            name, _, val = ln.rpartition(" ")
            out[name] = float(val)
    return out


def kvpool(m, name):
    return int(m.get(f'openlake_kvpool_{name}{{cluster="{CLUSTER}"}}', 0))


def kv_held(url):
    """Bytes of values node url holds (its default tenant, RAM and disk)."""
    m = metrics(url, 'tenant="default"')
    return int(sum(m.get(f'openlake_kv_tenant_used_bytes{{tenant="default",tier="{t}"}}', 0)
                   for t in ("ram", "disk")))


def _slab_populated(url):
    """The slab's background first-touch pass is done (kv-slab.md)."""
    m = metrics(url, 'tenant="default"')
    slab = m.get('openlake_kv_tenant_slab_bytes{tenant="default"}')
    return slab is not None and m.get('openlake_kv_tenant_slab_populated_bytes{tenant="default"}') == slab


def _wait(pred, what, proc, log, timeout=60.0):
    end = time.time() + timeout
    while time.time() < end:
        try:
            if pred():
                return
        except OSError:
            pass
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    tail = open(log, errors="replace").read()[-3000:] if os.path.exists(log) else ""
    raise RuntimeError(f"{what} did not come up\n{tail}")


class RemoteCluster:
    def __init__(self, work, store_gib, kv_timeout_ms, ns_a="", ns_b="", ip_a="127.0.0.1",
                 ip_b="127.0.0.1", etcd_ip="127.0.0.1", cpu=0):
        self.dir = os.path.join(work, "cluster")
        os.makedirs(self.dir, exist_ok=True)
        self.store_gib, self.kv_timeout_ms, self.cpu = store_gib, kv_timeout_ms, cpu
        self.where = {1: (ns_a, ip_a), 2: (ns_b, ip_b)}
        self.etcd_ip = etcd_ip
        self.procs = {}           # name -> Popen: etcd, openlaked-a, openlaked-b
        self.nodes = {}           # id -> {url, sock, kv_addr, data, log}
        self.secret = os.path.join(self.dir, "secret")
        self.token = os.path.join(self.dir, "kv.token")
        for p in (self.secret, self.token):
            with open(p, "w") as f:
                f.write(os.urandom(32).hex() + "\n")
            os.chmod(p, 0o600)
        # Fixed ports for a node across its restarts (node A comes back with
        # the same addresses, as a restarted node would).
        self.ports = {nid: _free_ports(3) for nid in (1, 2)}

    def describe(self):
        ns_a, ip_a = self.where[1]
        ns_b, ip_b = self.where[2]
        return {"network": "namespaces" if ns_a else "loopback", "ip_a": ip_a, "ip_b": ip_b,
                "kv_replicas": 2, "kv_timeout_ms": self.kv_timeout_ms,
                "lease_ttl_secs": LEASE_TTL_SECS, "store_gib": self.store_gib}

    def _spawn(self, name, argv, log, ns=""):
        wrap = ["ip", "netns", "exec", ns] if ns else []
        cpu = self.cpu
        p = subprocess.Popen([*wrap, *argv], stdout=open(log, "w"), stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, cwd=self.dir,
                             preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
        self.procs[name] = p
        return p

    def start(self):
        """etcd and node B, B alone in the cluster."""
        ec, ep = _free_ports(2)
        ip = self.etcd_ip
        self.etcd_url = f"http://{ip}:{ec}"
        log = os.path.join(self.dir, "etcd.log")
        p = self._spawn("etcd", ["etcd", "--name", "m0", "--data-dir", os.path.join(self.dir, "etcd"),
                                 "--listen-client-urls", self.etcd_url,
                                 "--advertise-client-urls", self.etcd_url,
                                 "--listen-peer-urls", f"http://{ip}:{ep}",
                                 "--initial-advertise-peer-urls", f"http://{ip}:{ep}",
                                 "--initial-cluster", f"m0=http://{ip}:{ep}"], log)
        _wait(lambda: urllib.request.urlopen(self.etcd_url + "/health", timeout=1).status == 200,
              "etcd", p, log)
        self._start_node(2, members=1)

    def _start_node(self, nid, members, peer=None):
        ns, ip = self.where[nid]
        s3, kv, rpc = self.ports[nid]
        data = os.path.join(self.dir, f"node{nid}")
        shutil.rmtree(data, ignore_errors=True)   # a node that holds nothing
        log = os.path.join(self.dir, f"openlaked-{nid}.log")
        argv = [os.path.join(ROOT, "build", "openlaked"), "--mode", "kv", "--threads", "1",
                "--data-dirs", data, "--kv-addr", f"{ip}:{kv}", "--s3-addr", f"{ip}:{s3}",
                "--rpc-addr", f"{ip}:{rpc}", "--kv-slab.capacity-gb", str(self.store_gib),
                "--cluster.name", CLUSTER, "--cluster.etcd", self.etcd_url, "--self-id", str(nid),
                "--cluster.secret-file", self.secret, "--kv-token-file", self.token,
                "--cluster.kv-replicas", "2", "--cluster.kv-timeout-ms", str(self.kv_timeout_ms),
                "--cluster.lease-ttl-secs", str(LEASE_TTL_SECS)]
        name = "openlaked-" + "ab"[nid - 1]
        p = self._spawn(name, argv, log, ns)
        n = {"id": nid, "url": f"http://{ip}:{s3}", "sock": os.path.join(data, "kv.sock"),
             "kv_addr": f"{ip}:{kv}", "data": data, "log": log, "argv": argv}
        self.nodes[nid] = n
        _wait(lambda: self._ready(nid, members, peer), f"node {nid}", p, log)
        return n

    def _ready(self, nid, members, peer=None):
        """Node nid is up, sees `members` members and (peer) its node RPC
        connection to node `peer` is up."""
        n = self.nodes[nid]
        if not os.path.exists(n["sock"]):
            return False
        m = metrics(n["url"])
        return (m.get(f'openlake_cluster_members{{cluster="{CLUSTER}"}}') == members and
                (peer is None or
                 m.get(f'openlake_rpc_peer_up{{cluster="{CLUSTER}",peer="{peer}"}}') == 1))

    def start_a(self):
        """A fresh node A (empty data dir); returns once A and B see each
        other (2 members, node RPC up both ways) and A's slab is populated
        (its background first touch would otherwise share CPU 0 with the
        fetch: a node that has been up a while has done it)."""
        for name in ("etcd", "openlaked-b"):
            if self.procs[name].poll() is not None:
                raise RuntimeError(f"{name} exited ({self.procs[name].returncode}); see "
                                   f"{self.dir}/{'etcd' if name == 'etcd' else 'openlaked-2'}.log")
        n = self._start_node(1, members=2, peer=2)
        _wait(lambda: self._ready(2, 2, peer=1), "node B seeing node A", self.procs["openlaked-b"],
              self.nodes[2]["log"])
        _wait(lambda: _slab_populated(n["url"]), "node A's slab populate", self.procs["openlaked-a"],
              n["log"])
        return n

    def stop_a(self):
        """Stops node A (SIGTERM: it leaves the cluster) and drops its data."""
        p = self.procs.pop("openlaked-a", None)
        if p is not None:
            self._stop(p)
        a = self.nodes.pop(1, None)
        if a:
            shutil.rmtree(a["data"], ignore_errors=True)

    @staticmethod
    def _stop(p):
        try:
            os.kill(p.pid, signal.SIGCONT)
        except OSError:
            pass
        p.terminate()
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

    def pids(self):
        return {name: p.pid for name, p in self.procs.items() if p.poll() is None}

    def stop(self):
        for name in ("openlaked-a", "openlaked-b", "etcd"):
            p = self.procs.pop(name, None)
            if p is not None:
                self._stop(p)
