#!/usr/bin/env python3
"""The cluster's KV pool across two network namespaces: cross-node get and
put GB/s over the node RPC (over TCP and over UCX), the link's ceiling
(iperf3) and Mooncake Store over the same link, in one run.

Run by bench/cluster/run_pool.sh inside namespace A (NS_A, IP_A, IF_A: its
veth), with namespace B (NS_B, IP_B) on the same bridge. Starts, in a
private temp dir, servers pinned to CPU 0:
  - etcd on IP_A; per node RPC transport (--transports: tcp, ucx) a
    cluster of its own (bench-tcp, bench-ucx): openlaked node 1 ("A", in A)
    and node 2 ("B", in B), one data core each (--threads 1), cluster
    secret and KV token files made here, cluster.kv_timeout_ms 5000 (a slow
    fetch on this shared machine is still a hit, not a miss); UCX over its
    tcp transport (UCX_TLS=tcp unless set: the same veth link), each UCX
    node's log checked to say it listens on ucx;
  - iperf3 -s in B;
  - mooncake_master and mooncake_client (the segment holder) in B, as
    bench/kv/peers.py starts them on loopback (its Servers class).
This process (the benchmark client, CPU 1) then measures, per round and
value size, alternating the systems:
  ceiling          iperf3 -c from A to B, one TCP stream, both ends on CPU 0
                   as the two nodes are (the node RPC keeps one connection
                   per peer pair)
  openlake get     keys homed on B (tests/integration/placement.py, the placement
                   rule) stored on B through B's Unix socket (untimed), then
                   read through A's Unix socket (the shared slab) in batches:
                   A fetches every one from B (node A's
                   openlake_kvpool_fetched_keys_total must grow by exactly
                   the keys read). Fresh keys every pass, deleted after.
  openlake put     keys homed on B put through A's Unix socket; timed until
                   B served a KV_PUT for every one (node B's
                   openlake_kvpool_served_puts_total) or A dropped or failed
                   the rest (reported); then read back on B, checked.
  mooncake         peers.Mooncake (batch_put_from / batch_get_into, protocol
                   tcp) from A to the segment in B, peers.measure.
Every value is stamped with a unique id and read back byte for byte (the last
batch of every pass and one random batch).
"""
import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
import types
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path[:0] = [os.path.join(ROOT, "bench"), os.path.join(ROOT, "bench", "kv"), HERE,
                os.path.join(ROOT, "tests", "integration")]
import numpy as np  # noqa: E402
import peers  # noqa: E402  (bench/kv/peers.py: Servers, Buffers, OpenLake, Mooncake, measure)
from benchutil import free_ports  # noqa: E402
import placement as place  # noqa: E402  (tests/integration/placement.py)

CLUSTER = "bench"     # the clusters are bench-tcp and bench-ucx: metrics() reads either as this
NS = "bench"          # the KV namespace of every key
RPC_PORT = {"tcp": 9100, "ucx": 9101}


def metrics(url):
    """A node's metrics of its cluster (bench-tcp or bench-ucx), the label
    read as cluster="bench" (a node is in one cluster)."""
    text = urllib.request.urlopen(url + "/_openlake/metrics", timeout=5).read().decode()
    out = {}
    for ln in text.splitlines():
        if ln.startswith("openlake_") and f'cluster="{CLUSTER}-' in ln:
            name, _, val = ln.rpartition(" ")
            out[re.sub(r'cluster="%s-\w+"' % CLUSTER, f'cluster="{CLUSTER}"', name)] = float(val)
    return out


def kpm(m, name):
    return int(m.get(f'openlake_kvpool_{name}{{cluster="{CLUSTER}"}}', 0))


def peer_m(m, name, peer):
    """A per-peer node RPC counter (docs/node-protocol.md "Metrics")."""
    return int(m.get(f'openlake_rpc_peer_{name}{{cluster="{CLUSTER}",peer="{peer}"}}', 0))


def start_etcd(srv, ip):
    """etcd on ip, spawned through srv; its client URL."""
    d = srv.dir
    ec, ep = free_ports(2)
    url = f"http://{ip}:{ec}"
    etcd = srv.spawn("etcd", ["etcd", "--name", "m0", "--data-dir", os.path.join(d, "etcd"),
                              "--listen-client-urls", url, "--advertise-client-urls", url,
                              "--listen-peer-urls", f"http://{ip}:{ep}",
                              "--initial-advertise-peer-urls", f"http://{ip}:{ep}",
                              "--initial-cluster", f"m0=http://{ip}:{ep}"], os.path.join(d, "etcd.log"))
    peers.wait_for(lambda: peers.port_open(ec, ip), "etcd", proc=etcd, log=os.path.join(d, "etcd.log"))
    return url


def secret_files(d):
    """A cluster secret and a KV token file in d (made once, shared)."""
    out = os.path.join(d, "secret"), os.path.join(d, "kv.token")
    for p in out:
        if not os.path.exists(p):
            with open(p, "w") as f:
                f.write(os.urandom(32).hex() + "\n")
            os.chmod(p, 0o600)
    return out


def transports_of(ap, arg):
    """The node RPC transports asked for (--transports), or by default tcp
    and ucx (tcp alone in a build without UCX); sets UCX_TLS=tcp for the
    nodes unless it is set (every UCX_* here reaches them, recorded with
    the results: ucx_env)."""
    if arg is None:
        v = subprocess.run([os.path.join(ROOT, "build", "openlake"), "--json", "version"], capture_output=True,
                           text=True, check=True)
        arg = "tcp,ucx" if json.loads(v.stdout)["ucx"] else "tcp"
        if arg == "tcp":
            print(f"{ap.prog}: build/openlake has no UCX: TCP only", file=sys.stderr)
    out = arg.split(",")
    if any(t not in RPC_PORT for t in out) or len(set(out)) != len(out):
        ap.error(f"--transports: {arg!r}: tcp, ucx or both, comma-separated")
    os.environ.setdefault("UCX_TLS", "tcp")     # the nodes inherit it
    return out


def ucx_env():
    return " ".join(f"{k}={x}" for k, x in sorted(os.environ.items()) if k.startswith("UCX_"))


def slab_populated(url):
    """The node's KV slab is populated (its pages touched at start, in the
    background, MADV_POPULATE_WRITE): seconds of the node's CPU that no
    measurement should count."""
    text = urllib.request.urlopen(url + "/_openlake/metrics", timeout=5).read().decode()
    got = dict(re.findall(r'^openlake_kv_tenant_slab_(bytes|populated_bytes)\{tenant="default"\} (\d+)$', text, re.M))
    return len(got) == 2 and got["bytes"] == got["populated_bytes"]


def listens_on(log, transport):
    """The node's log says its node RPC listens on transport (a node asked
    for UCX did not end up on TCP)."""
    return re.search(r"node rpc: listening on \S+ \(%s\)" % transport, open(log).read()) is not None


class Cluster:
    """The nodes of one cluster (bench-TRANSPORT, or bench-TRANSPORT<tag>;
    the node RPC over transport), node i in places[i - 1] (namespace,
    address), on etcd url, spawned through peers.Servers (pinned, logs in
    its temp dir, stopped with it or by stop())."""

    def __init__(self, srv, places, url, cap_gib, extra, transport, tag="", rpc_port=None):
        d = srv.dir
        self.srv, self.transport = srv, transport
        self.secret, self.token = secret_files(d)
        self.nodes = []
        for nid, (ns, ip) in enumerate(places, 1):
            name = f"{transport}{tag}-{nid}"
            data = os.path.join(d, f"node-{name}")
            s3, kv = free_ports(2)
            argv = [os.path.join(ROOT, "build", "openlaked"), "--threads", "1", "--data-dirs", data,
                    "--kv-addr", f"{ip}:{kv}", "--s3-addr", f"{ip}:{s3}", "--kv-slab.capacity-gb", str(cap_gib),
                    "--cluster.name", f"{CLUSTER}-{transport}{tag}", "--cluster.etcd", url, "--self-id", str(nid),
                    "--rpc-addr", f"{ip}:{rpc_port or RPC_PORT[transport]}", "--transport", transport,
                    "--cluster.secret-file", self.secret,
                    "--kv-token-file", self.token, "--cluster.kv-timeout-ms", "5000",
                    # remote reads over UCX: the namespaces' bridge is private
                    # (docs/security.md: only where nothing but the nodes reach)
                    *(["--rdma.backend", "ucx"] if transport == "ucx" else []), *extra]
            log = os.path.join(d, f"openlaked-{name}.log")
            p = srv.spawn(f"openlaked-{name}", argv, log, wrap=["ip", "netns", "exec", ns])
            self.nodes.append({"id": nid, "url": f"http://{ip}:{s3}", "sock": os.path.join(data, "kv.sock"),
                               "pid": p.pid, "proc": p, "argv": argv, "log": log})
        for n in self.nodes:
            peers.wait_for(lambda: self.ready(n), f"node {n['id']} ({transport})", timeout=60, proc=n["proc"],
                           log=n["log"])
            if not listens_on(n["log"], transport):
                raise RuntimeError(f"node {n['id']} does not listen on {transport}: see {n['log']}")
        for n in self.nodes:
            peers.wait_for(lambda: slab_populated(n["url"]), f"node {n['id']}'s slab populated", timeout=300,
                           proc=n["proc"], log=n["log"])

    def ready(self, n):
        try:
            m = metrics(n["url"])
        except OSError:
            return False
        return (all(m.get(f'openlake_rpc_peer_up{{cluster="{CLUSTER}",peer="{o["id"]}"}}') == 1
                    for o in self.nodes if o is not n)
                and m.get(f'openlake_cluster_members{{cluster="{CLUSTER}"}}') == len(self.nodes))

    def stop(self):
        for n in self.nodes:
            n["proc"].terminate()
        for n in self.nodes:
            n["proc"].wait(timeout=30)


def run_wait(pids):
    """Seconds the threads of pids have waited runnable for a CPU
    (/proc/PID/task/*/schedstat, field 2): what a loaded machine costs them."""
    t = 0
    for pid in pids:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                t += int(f.read().split()[1])
    return t / 1e9


def keys_homed_on(nid, prefix, n):
    """n fresh keys (bytes) whose home is node nid (two equal members)."""
    out, i = [], 0
    members = [(1, 1), (2, 1)]     # same kv-slab capacity, no disk tier: equal weights
    while len(out) < n:
        k = f"{prefix}/{i}".encode()
        if place.homes(members, NS.encode(), k)[0] == nid:
            out.append(k)
        i += 1
    return out


def iperf(ip_b, port, secs, streams, cpu):
    """iperf3 -c from here (namespace A) to B, on CPU cpu (None: unpinned);
    the receiver's GB/s."""
    r = subprocess.run((["taskset", "-c", str(cpu)] if cpu is not None else []) +
                       ["iperf3", "-c", ip_b, "-p", str(port), "-t", str(secs), "-P", str(streams), "-J"],
                       capture_output=True, text=True, timeout=secs + 30)
    if r.returncode != 0:
        raise RuntimeError(f"iperf3: {r.stdout[-2000:]} {r.stderr}")
    return json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"] / 8 / 1e9


class Pool:
    """The OpenLake side: peers.OpenLake clients on A's and B's Unix sockets."""

    def __init__(self, cl, bufs, sizes, batch):
        self.cl, self.bufs, self.batch = cl, bufs, batch
        self.transport = cl.transport
        self.c = {}
        for n, side in zip(cl.nodes, "AB"):
            srv = types.SimpleNamespace(ol={"unix": n["sock"], "token_file": cl.token})
            for v in sizes:
                self.c[(side, v)] = peers.OpenLake(srv, "unix", v, bufs, batch)
        self.api = self.c[("A", sizes[0])].api
        self.a, self.b = cl.nodes
        self.pids = [self.a["pid"], self.b["pid"]]

    def measure(self, op, v, nbatch, passes, tag, rng, iface):
        try:
            return self.measure1(op, v, nbatch, passes, tag, rng, iface)
        except Exception as e:
            state = {n["id"]: {k: x for k, x in metrics(n["url"]).items()
                               if k.startswith(("openlake_kvpool_", "openlake_rpc_peer_failures"))}
                     for n in (self.a, self.b)}
            raise RuntimeError(f"openlake over {self.transport} {op}, value size {v}, {tag}: {e!r}; "
                               f"the nodes' counters: {state}") from e

    def measure1(self, op, v, nbatch, passes, tag, rng, iface):
        bufs, batch = self.bufs, self.batch
        ca, cb = self.c[("A", v)], self.c[("B", v)]
        ids0 = (hash(("openlake", op, v, tag)) & 0xFFFF) << 40
        t = cpu = wait = link = 0.0
        held = drops = failures = calls = stalls = misses = 0
        for p in range(passes):
            bufs.src[:] = bufs.base
            flat = keys_homed_on(2, f"{tag}/{op}/{v}/{p}", nbatch * batch)
            keys = [flat[b * batch:(b + 1) * batch] for b in range(nbatch)]
            ids = [np.arange(batch, dtype=np.uint64) + np.uint64(ids0 + (p * nbatch + b) * batch + 1)
                   for b in range(nbatch)]
            if op == "get":
                mb0 = metrics(self.b["url"])
                for b in range(nbatch):                      # stored on B, their home (untimed)
                    bufs.stamp(v, ids[b])
                    cb.put(keys[b])
                ma0 = metrics(self.a["url"])
                if kpm(metrics(self.b["url"]), "pushes_total") != kpm(mb0, "pushes_total"):
                    raise RuntimeError("B sent keys away: they are not homed on B (placement differs)")
                s_cpu, w0, l0 = peers.proc_cpu(self.pids), run_wait(self.pids), peers.lo_bytes(iface)
                t0 = time.perf_counter()
                sts = [ca.c.get(keys[b], ca.dst) for b in range(nbatch)]   # A fetches them from B
                t += time.perf_counter() - t0
                cpu += peers.proc_cpu(self.pids) - s_cpu
                wait += run_wait(self.pids) - w0
                link += peers.lo_bytes(iface) - l0
                ma = metrics(self.a["url"])
                calls += peer_m(ma, "calls_total", 2) - peer_m(ma0, "calls_total", 2)
                stalls += peer_m(ma, "credit_stalls_total", 2) - peer_m(ma0, "credit_stalls_total", 2)
                # a key A could not fetch (its call failed: counted in
                # fetch_failures_total) is a miss: counted, not in the GB/s
                bad = sorted({x for st in sts for x in st if x != v})
                if any(x >= 0 for x in bad):
                    raise RuntimeError(f"openlake get: statuses {bad} (a value of another size?)")
                miss = sum(x != v for st in sts for x in st)
                got = kpm(ma, "fetched_keys_total") - kpm(ma0, "fetched_keys_total")
                if got != nbatch * batch - miss:
                    raise RuntimeError(f"A fetched {got} keys from B and missed {miss}, not {nbatch * batch} in all")
                misses += miss
                held += nbatch * batch - miss
                for b in (nbatch - 1, rng.randrange(nbatch)):
                    st = sts[b]
                    if b != nbatch - 1:
                        bufs.dst[:batch * v] = 0
                        st = ca.c.get(keys[b], ca.dst)
                    want = bufs.expected(v, ids[b])
                    for i in (i for i in range(batch) if st[i] == v):
                        if not np.array_equal(bufs.dst[i * v:(i + 1) * v], want[i * v:(i + 1) * v]):
                            raise RuntimeError(f"batch {b}: data read on A differs from data stored on B")
            else:
                ma0, mb0 = metrics(self.a["url"]), metrics(self.b["url"])
                want = nbatch * batch
                s_cpu, w0, l0 = peers.proc_cpu(self.pids), run_wait(self.pids), peers.lo_bytes(iface)
                t0 = time.perf_counter()
                for b in range(nbatch):
                    bufs.stamp(v, ids[b])
                    ca.put(keys[b])
                while True:                                  # until B holds them, or A gave up on them
                    ma, mb = metrics(self.a["url"]), metrics(self.b["url"])
                    served = kpm(mb, "served_puts_total") - kpm(mb0, "served_puts_total")
                    dr = kpm(ma, "push_drops_total") - kpm(ma0, "push_drops_total")
                    fl = kpm(ma, "push_failures_total") - kpm(ma0, "push_failures_total")
                    if served + dr + fl >= want:
                        break
                    if time.perf_counter() - t0 > 120:
                        raise RuntimeError(f"B served {served} of {want} pushes in 120 s ({dr} dropped, {fl} failed)")
                    time.sleep(0.005)
                t += time.perf_counter() - t0
                cpu += peers.proc_cpu(self.pids) - s_cpu
                wait += run_wait(self.pids) - w0
                link += peers.lo_bytes(iface) - l0
                held += served
                calls += peer_m(ma, "calls_total", 2) - peer_m(ma0, "calls_total", 2)
                stalls += peer_m(ma, "credit_stalls_total", 2) - peer_m(ma0, "credit_stalls_total", 2)
                drops += dr
                failures += fl
                fetched0 = kpm(metrics(self.b["url"]), "fetched_keys_total")
                for b in (nbatch - 1, rng.randrange(nbatch)):
                    if dr or fl:
                        break                                # some are on A only: B would fetch them
                    bufs.dst[:batch * v] = 0
                    cb.get(keys[b])
                    if not np.array_equal(bufs.dst[:batch * v], bufs.expected(v, ids[b])):
                        raise RuntimeError(f"batch {b}: data read on B differs from data put on A")
                if kpm(metrics(self.b["url"]), "fetched_keys_total") != fetched0:
                    raise RuntimeError("B fetched keys it should hold already")
            for b in range(nbatch):
                ca.delete(keys[b])
                cb.delete(keys[b])
        total = passes * nbatch * batch * v
        return {"system": "openlake", "transport": self.transport, "op": op, "value_bytes": v, "bytes": total, "bytes_at_b": held * v,
                "s": t, "gbs": held * v / 1e9 / t, "push_drops": drops, "push_failures": failures,
                "get_misses": misses,
                "server_cpu_s_per_gb": cpu / (total / 1e9), "server_run_wait_s_per_gb": wait / (total / 1e9),
                "link_per_byte": link / total,
                "rpc_calls_per_key": calls / (passes * nbatch * batch), "credit_stalls": stalls}

    def close(self):
        for c in self.c.values():
            c.close()


def med(xs):
    return statistics.median(xs)


def fmt_ratio(xs, goal):
    m = med(xs)
    return f"**{m:.2f}×** ({min(xs):.2f}–{max(xs):.2f}), {'met' if m >= goal else 'not met'}"


def report(run, out_json):
    m, cfg, rows = run["machine"], run["config"], run["rounds"]
    sizes = cfg["value_bytes"]

    def sel(**kw):
        return [x for r in rows for x in r if all(x.get(k) == v for k, v in kw.items())]

    L = [f"Machine: {m['cpu']}, {m['cores']} cores, kernel {m['kernel']}, {m['mem_gib']} GiB, 1-minute load "
         f"average {m['loadavg_1min_start_end'][0]:.1f} at the start and {m['loadavg_1min_start_end'][1]:.1f} "
         f"at the end (a shared machine). "
         f"Raw data: `{os.path.relpath(out_json, ROOT)}`. Versions: {run['versions']}. "
         f"Node RPC transports: {', '.join(cfg['transports'])}"
         + (f" (UCX with `{cfg['ucx_env']}`: over the same veth link)." if "ucx" in cfg["transports"]
            else " (this build has no UCX).")
         + (f" **Nodes started with `{cfg['node_args']}` added (NODE_ARGS).**" if cfg["node_args"] else ""), "",
         f"Servers (etcd, both nodes, iperf3, Mooncake's master and store) on CPU 0, the benchmark client (one "
         f"Python process in namespace A) on CPU 1{'' if cfg['pinned'] else ' (NOT pinned: fewer than 2 CPUs)'}. "
         f"Batches of {cfg['batch']} keys; per measurement {cfg['passes']} × {cfg['pass_mib']} MiB of fresh keys; "
         f"1 warm-up, then {len(rows)} rounds alternating the systems. Median GB/s (value bytes ÷ wall time); "
         f"link B/B: bytes on A's veth (both directions) per value byte; "
         f"nodes' CPU and run-queue wait: both nodes' threads (/proc, schedstat), "
         f"the wait being time runnable but not running (a loaded machine); calls per key and credit stalls: node A's `openlake_rpc_peer_calls_total` and "
         f"`_credit_stalls_total` for peer B over the measurement.", "",
         "| value size | op | node RPC | OpenLake A↔B GB/s | Mooncake A↔B GB/s | iperf3 ceiling GB/s "
         "| OpenLake ÷ ceiling (goal ≥ 0.8) "
         "| OpenLake ÷ Mooncake (goal ≥ 2×) | OpenLake push drops / get misses | OpenLake nodes' CPU / run-queue wait s/GB "
         "| A→B node RPC calls per key, credit stalls | link B/B OL / MC |",
         "|---:|---|---|---:|---:|---:|---|---|---:|---:|---|---|"]
    summary = []
    for v, op, t in [(v, op, t) for v in sizes for op in ("get", "put") for t in cfg["transports"]]:
        ol = sel(system="openlake", transport=t, op=op, value_bytes=v)
        mc = sel(system="mooncake", value_bytes=v)
        ce = sel(system="iperf3", value_bytes=v)
        rc, rm = [], []
        for r in rows:
            o = [x for x in r if x["system"] == "openlake" and x["transport"] == t and x["op"] == op
                 and x["value_bytes"] == v]
            c = [x for x in r if x["system"] == "iperf3" and x["value_bytes"] == v]
            k = [x for x in r if x["system"] == "mooncake" and x["value_bytes"] == v]
            if o and c:
                rc.append(o[0]["gbs"] / c[0]["gbs"])
            if o and k:
                rm.append(o[0]["gbs"] / k[0][f"{op}_gbs"])
        L.append(f"| {v // 1024} KiB | {op} | {t.upper()} | {med([x['gbs'] for x in ol]):.2f} | "
                 f"{med([x[op + '_gbs'] for x in mc]):.2f} | {med([x['gbs'] for x in ce]):.2f} | "
                 f"{fmt_ratio(rc, 0.8)} | {fmt_ratio(rm, 2.0)} | "
                 f"{sum(x['push_drops'] if op == 'put' else x['get_misses'] for x in ol)} | "
                 f"{med([x['server_cpu_s_per_gb'] for x in ol]):.2f} / "
                 f"{med([x['server_run_wait_s_per_gb'] for x in ol]):.2f} | "
                 f"{med([x['rpc_calls_per_key'] for x in ol]):.2f}, {sum(x['credit_stalls'] for x in ol)} | "
                 f"{med([x['link_per_byte'] for x in ol]):.2f} / {med([x[op + '_lo_per_byte'] for x in mc]):.2f} |")
        summary.append({"value_bytes": v, "op": op, "transport": t, "ceiling_median": med(rc), "ceiling_min": min(rc),
                        "ceiling_max": max(rc), "mooncake_median": med(rm), "mooncake_min": min(rm),
                        "mooncake_max": max(rm)})
    c = run["ceiling_variants"]
    L += ["", f"The ceiling is one iperf3 TCP stream from A to B with both ends on CPU 0, as the two nodes are "
          f"(the node RPC keeps one connection per pair of nodes), {cfg['iperf_secs']} s per round and size. "
          f"Once per run, for comparison: 4 streams on CPU 0 {c['p4_cpu0']:.2f} GB/s; one stream with the "
          f"client on CPU 1 and the server on CPU 0 {c['p1_split']:.2f} GB/s.", "",
          "APIs used: OpenLake: " + run["apis"]["openlake"] + " on A (get, put) and on B (storing the get keys, "
          "reading the put keys back); Mooncake: " + run["apis"]["mooncake"] + "."]
    return "\n".join(L) + "\n", summary


EXPLAIN = """\
Command: `make bench-cluster`, or `bash bench/cluster/run_pool.sh` (knobs: `ROUNDS=5 PASS_MIB=256 PASSES=1
BATCH=32 CAPACITY_GIB=2 IPERF_SECS=5 TRANSPORTS=tcp,ucx`; root, etcd and iperf3 needed). It makes two
network namespaces, A and B, on a bridge (veth pairs, removed at exit) and runs `bench/cluster/pool.py` in A:

- etcd; per node RPC transport a cluster of two: node 1 (A) and node 2 (B), `openlaked --threads 1
  --kv-slab.capacity-gb 2 --cluster.kv-timeout-ms 5000 --transport tcp|ucx` (ucx with
  `--rdma.backend ucx`: values fetched by remote reads), one cluster secret and one KV
  token file, measured once their slabs are populated. UCX runs over its tcp transport (`UCX_TLS=tcp`: the same veth link as TCP and iperf3; no RDMA
  here); each UCX node's log must say its node RPC listens on ucx, and the checks below (A's fetched keys, B's
  served puts) make sure the values crossed it. **get**: keys homed on B (chosen by the placement rule,
  `tests/integration/placement.py`) are stored on B (untimed), then read through A's Unix socket (the shared slab)
  in 32-key batches: A fetches each from B over the node RPC (A's `fetched_keys_total` checked). **put**:
  keys homed on B put through A's Unix socket; timed until B has served a KV_PUT for every one (B's
  `served_puts_total`); pushes A dropped, and gets A could not fetch (misses: their call failed), are
  counted in the column and not in the GB/s. Fresh keys every
  pass, deleted (untimed) after it.
- Mooncake Store: `mooncake_master` (HTTP metadata server) and `mooncake_client` holding the segment,
  protocol `tcp`, in B; the client in A (`bench/kv/peers.py`'s Mooncake: a pure client,
  `batch_put_from` / `batch_get_into` on registered buffers). Every value crosses the veth link.
- Ceiling: `iperf3 -c B -P 1`, both ends on CPU 0.

Every value is stamped with a unique id and read back byte for byte (the last batch of every pass and one
random batch).

"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("ROUNDS", 5)))
    ap.add_argument("--sizes", default=os.environ.get("SIZES", "262144,1048576,2097152"))
    ap.add_argument("--batch", type=int, default=int(os.environ.get("BATCH", 32)))
    ap.add_argument("--pass-mib", type=int, default=int(os.environ.get("PASS_MIB", 256)))
    ap.add_argument("--passes", type=int, default=int(os.environ.get("PASSES", 1)))
    ap.add_argument("--capacity-gib", type=int, default=int(os.environ.get("CAPACITY_GIB", 2)))
    ap.add_argument("--iperf-secs", type=int, default=int(os.environ.get("IPERF_SECS", 5)))
    ap.add_argument("--transports", default=os.environ.get("TRANSPORTS"),
                    help="the node RPC's transports, each its own pair of nodes (default: tcp,ucx; tcp "
                         "alone in a build without UCX)")
    ap.add_argument("--node-args", default=os.environ.get("NODE_ARGS", ""),
                    help="more openlaked arguments for both nodes (diagnostics; recorded with the results)")
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    ap.add_argument("--no-doc", action="store_true", help="do not rewrite docs/benchmarks.md")
    ap.add_argument("--no-pin", dest="pin", action="store_false")
    args = ap.parse_args()
    env = {k: os.environ.get(k) for k in ("NS_A", "NS_B", "IP_A", "IP_B", "IF_A")}
    if not all(env.values()):
        ap.error("run through bench/cluster/run_pool.sh (NS_A, NS_B, IP_A, IP_B, IF_A: the namespaces)")
    if (os.cpu_count() or 1) < 2:
        args.pin = False
    place.check()
    transports = transports_of(ap, args.transports)
    sizes = [int(x) for x in args.sizes.split(",")]
    batch = args.batch
    if args.capacity_gib * 1024 < 2 * args.pass_mib:
        ap.error("--capacity-gib must hold at least two passes")
    load0 = os.getloadavg()[0]
    machine = json.loads(subprocess.run([sys.executable, os.path.join(ROOT, "bench", "http", "machine.py")],
                                        capture_output=True, text=True, check=True, cwd=ROOT).stdout)
    srv = peers.Servers(args, host=env["IP_B"], client_host=env["IP_A"], wrap=["ip", "netns", "exec", env["NS_B"]])
    real_err = peers.libs_log_to(os.path.join(srv.dir, "client-libs.log"))
    ok, pools, mcs, cls = False, {}, {}, {}
    try:
        url = start_etcd(srv, env["IP_A"])
        for t in transports:
            cls[t] = Cluster(srv, [(env["NS_A"], env["IP_A"]), (env["NS_B"], env["IP_B"])], url,
                             args.capacity_gib, args.node_args.split(), t)
        iport, = free_ports(1)
        srv.spawn("iperf3", ["iperf3", "-s", "-B", env["IP_B"], "-p", str(iport)], os.path.join(srv.dir, "iperf3.log"),
                  wrap=["ip", "netns", "exec", env["NS_B"]])
        peers.wait_for(lambda: peers.port_open(iport, env["IP_B"]), "iperf3 -s")
        srv.start_mooncake()
        if args.pin:
            os.sched_setaffinity(0, {1})
        bufs = peers.Buffers(batch, max(sizes))
        for t in transports:
            pools[t] = Pool(cls[t], bufs, sizes, batch)
        mcs = {v: peers.Mooncake(srv, "tcp", v, bufs, batch) for v in sizes}
        apis = {"openlake": pools[transports[0]].api, "mooncake": mcs[sizes[0]].api}
        rng = random.Random(7)
        nb = {v: max(1, (args.pass_mib << 20) // (batch * v)) for v in sizes}
        print(f"servers in {srv.dir}; namespaces {env['NS_A']} ({env['IP_A']}), {env['NS_B']} ({env['IP_B']}); "
              f"sizes {sizes}; batch {batch}; {args.passes} x {args.pass_mib} MiB; {args.rounds} rounds", flush=True)
        cpu0, cpu1 = (0, 1) if args.pin else (None, None)
        variants = {"p4_cpu0": iperf(env["IP_B"], iport, args.iperf_secs, 4, cpu0),
                    "p1_split": iperf(env["IP_B"], iport, args.iperf_secs, 1, cpu1)}
        print(f"iperf3: 4 streams on CPU 0 {variants['p4_cpu0']:.2f} GB/s; 1 stream from CPU 1 "
              f"{variants['p1_split']:.2f} GB/s", flush=True)
        systems = [f"openlake-{t}" for t in transports] + ["mooncake"]

        def one(s, v, tag):
            if s.startswith("openlake-"):
                pool = pools[s.split("-", 1)[1]]
                return [pool.measure(op, v, nb[v], args.passes, tag, rng, env["IF_A"]) for op in ("get", "put")]
            row = peers.measure("mooncake-tcp", mcs[v], srv, bufs, v, batch, nb[v], args.passes, tag, rng,
                                iface=env["IF_A"])
            row["system"] = "mooncake"
            return [row]

        for v in sizes:  # warm-up
            for s in systems:
                one(s, v, "warm")
        rounds = []
        for r in range(args.rounds):
            order = systems[r % len(systems):] + systems[:r % len(systems)]
            rows = []
            for v in sizes:
                ce = iperf(env["IP_B"], iport, args.iperf_secs, 1, cpu0)
                rows.append({"system": "iperf3", "value_bytes": v, "gbs": ce, "round": r})
                line = f"round {r + 1}/{args.rounds} {v // 1024:5d} KiB  iperf3 {ce:6.2f}"
                for s in order:
                    for row in one(s, v, f"r{r}"):
                        row["round"] = r
                        rows.append(row)
                        if s.startswith("openlake-"):
                            line += f"  OL {row['transport']} {row['op']} {row['gbs']:6.2f}"
                            if row["push_drops"] or row["push_failures"]:
                                line += f" (drops {row['push_drops']}, failures {row['push_failures']})"
                            if row["get_misses"]:
                                line += f" (misses {row['get_misses']})"
                        else:
                            line += f"  MC put {row['put_gbs']:6.2f} get {row['get_gbs']:6.2f}"
                print(line + " GB/s", flush=True)
            rounds.append(rows)
        ok = True
    finally:
        for pool in pools.values():
            pool.close()
        if peers.Mooncake.store is not None:
            peers.Mooncake.store.close()
            peers.Mooncake.store = None
        srv.stop()
        os.dup2(real_err, 2)
        if ok:
            subprocess.run(["rm", "-rf", srv.dir])
        else:
            print(f"logs kept in {srv.dir}", file=sys.stderr)

    from importlib.metadata import version as _ver
    iv = subprocess.run(["iperf3", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    ev = subprocess.run(["etcd", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    machine["loadavg_1min_start_end"] = [load0, os.getloadavg()[0]]
    run = {"machine": machine, "versions": f"{peers.mooncake_version()}, {iv.strip()}, {ev.strip()}, "
                                           f"openlake {_ver('openlake-vllm')}",
           "apis": apis, "rounds": rounds, "ceiling_variants": variants,
           "config": {"value_bytes": sizes, "batch": batch, "pass_mib": args.pass_mib, "passes": args.passes,
                      "capacity_gib": args.capacity_gib, "iperf_secs": args.iperf_secs, "pinned": args.pin,
                      "transports": transports, "ucx_env": ucx_env(),
                      "nodes": {t: [n["argv"] for n in cl.nodes] for t, cl in cls.items()},
                      "node_args": args.node_args,
                      "mooncake_master": srv.mc["master_argv"], "mooncake_client": srv.mc["client_argv"]}}
    from docsection import write_results
    write_results(ROOT, "cluster-pool", run, report, args.doc, EXPLAIN,
                  "## Cluster KV pool: cross-node get and put between two namespaces", write_doc=not args.no_doc)


if __name__ == "__main__":
    main()
