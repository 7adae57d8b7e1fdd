"""Incast: many writers on some nodes of a KV pool flood one node (the
target) with keys homed on it (docs/cluster.md "The KV pool"). Shared by
test_cluster_incast.py (the assertions) and bench/cluster/incast.py (the
figures): choosing the keys, the flood itself, sampling the target's
memory and the senders' node RPC while it runs, and reading back.

Values are made from their key (a slice of one random pool and the key's
index), so the flood's hundreds of MiB need not be kept to be checked.
"""
import json
import multiprocessing
import os
import re
import signal
import struct
import subprocess
import threading
import time
import urllib.request

import conftest
import placement

NS = b"incast"
PROBE_NS = b"incast-probe"
PROBE_MAX = 200000                 # the prober's reads, at most
CTX = multiprocessing.get_context("fork")   # children inherit the value pool


def kv_members(etcd_url, cluster="c1"):
    """[(id, weight)] of the KV members, from `openlake cluster topology`."""
    r = subprocess.run([conftest.bin_path("openlake"), "--json", "cluster", "topology",
                        "--etcd", etcd_url, "--cluster", cluster],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return [(n["id"], n["kv_capacity_bytes"]) for n in json.loads(r.stdout)["nodes"]
            if n["kv_member"]]


def keys_homed_on(members, target, n, tag="k"):
    """n keys (bytes) whose home among members is target, by the twin of placement."""
    out, i = [], 0
    while len(out) < n:
        k = f"{tag}-{i}".encode()
        if placement.homes(members, NS, k)[0] == target:
            out.append(k)
        i += 1
    return out


class Values:
    """value(i): size bytes, a slice of a 1 MiB random pool ending in i."""

    def __init__(self, size):
        self.size = size
        self.pool = os.urandom((1 << 20) + size)

    def value(self, i):
        off = (i * 4099) % (1 << 20)
        return self.pool[off:off + self.size - 8] + struct.pack("<Q", i)


def metrics(d):
    return urllib.request.urlopen(d.url + "/_openlake/metrics", timeout=10).read().decode()


def metric(text, name, peer=None):
    labels = 'cluster="c1"' + (f',peer="{peer}"' if peer is not None else "")
    m = re.search(r"^%s\{%s\} (\d+)$" % (name, labels), text, re.M)
    return int(m.group(1)) if m else None


def wait_populated(d, slab_bytes, timeout=60):
    """Waits until d's slab is populated (its pages all resident), so that
    its memory before a flood is what it holds idle."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = re.search(r'^openlake_kv_tenant_slab_populated_bytes\{tenant="default"\} (\d+)$',
                      metrics(d), re.M)
        if m and int(m.group(1)) >= slab_bytes:
            return
        time.sleep(0.1)
    raise AssertionError("the slab was not populated in time")


def proc_status(pid):
    """VmRSS, VmHWM, RssAnon, RssShmem of a process, in KiB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM", "RssAnon", "RssShmem"):
                out[k] = int(v.split()[0])
    return out


def _sample(pid, urls, target_id, stop, out):
    peak, inflight, n, last = proc_status(pid), 0, 0, 0
    try:
        while not stop.is_set():
            for k, v in proc_status(pid).items():
                peak[k] = max(peak[k], v)
            n += 1
            if time.time() - last > 0.1:
                last = time.time()
                for u in urls:
                    text = urllib.request.urlopen(u + "/_openlake/metrics",
                                                  timeout=10).read().decode()
                    inflight = max(inflight, metric(text, "openlake_rpc_peer_inflight_bytes",
                                                    target_id) or 0)
            time.sleep(0.005)
    finally:   # what was seen, even when a daemon went away (the caller says why)
        out.send((peak, inflight, n))


class _Child:
    """fn(*args, stop_event, pipe) in a process of its own while the flood
    runs; stop() sets the event and returns what it sent."""

    def __init__(self, fn, *args):
        self.stop_ev = CTX.Event()
        self.rx, tx = CTX.Pipe(False)
        self.proc = CTX.Process(target=fn, args=(*args, self.stop_ev, tx), daemon=True)
        self.proc.start()

    def stop(self):
        self.stop_ev.set()
        got = self.rx.recv()
        self.proc.join()
        return got


class Sampler(_Child):
    """A process that, while the flood runs, reads the target's memory
    every 5 ms (the peak of each field) and every 100 ms each sender's
    request bytes in flight to the target (the most seen). A process, not a
    thread, so that the writers do not delay its samples."""

    def __init__(self, target, target_id, senders):
        super().__init__(_sample, target.proc.pid, [s.url for s in senders], target_id)

    def stop(self):
        """(peak {field: KiB}, most bytes in flight, samples taken)."""
        return super().stop()


def _probe(sock, token, stop, out):
    from openlake_client import Client
    lat = []                       # (seconds since the epoch sent, seconds taken)
    try:
        with Client(sock, token=token, namespace=PROBE_NS.decode(), value_size=4096) as c:
            c.put([b"probe"], [b"p" * 4096])
            buf = [bytearray(4096)]
            while not stop.is_set() and len(lat) < PROBE_MAX:
                t = time.time()
                n = c.get([b"probe"], buf)[0]
                lat.append((t, time.time() - t if n == 4096 else -1.0))
                time.sleep(0.001)
    finally:
        out.send(lat)


class Prober(_Child):
    """A process that reads one 4 KiB key of the target's own (stored
    there, through its Unix socket) about every millisecond while the flood
    runs, at most PROBE_MAX times: how long the target takes to answer
    its own clients while its senders' pushes pour in. stop() returns
    [(time sent, seconds taken or -1 for a miss)]."""

    def __init__(self, target, token):
        super().__init__(_probe, str(target.data / "kv.sock"), token)


def flood(senders, conns, token, keys, values, batch=8, pause=None):
    """conns writers per sender node, each a process with a connection of
    its own over the node's Unix socket (the shared slab, as vLLM saves),
    putting its share of keys in batches. pause=(daemon, after, secs): that
    daemon is stopped (SIGSTOP) `after` seconds into the flood for secs
    seconds, so that its senders have far more for it than it takes.
    Returns ({key index: sender index} of every put acknowledged OK,
    {status: count} of the others, seconds)."""
    workers = [s for s in range(len(senders)) for _ in range(conns)]
    jobs = []
    for w, s in enumerate(workers):
        mine = list(range(w, len(keys), len(workers)))
        jobs.append((str(senders[s].data / "kv.sock"), token, keys, values, mine))
    acked, refused = {}, {}
    timers = []
    if pause:
        d, after, secs = pause
        timers = [threading.Timer(after, d.proc.send_signal, (signal.SIGSTOP,)),
                  threading.Timer(after + secs, d.proc.send_signal, (signal.SIGCONT,))]
    t0 = time.time()
    try:
        with CTX.Pool(len(workers)) as p:
            for t in timers:
                t.start()
            results = p.map(_put_all, [(j, batch) for j in jobs])
    finally:
        for t in timers:
            t.join()
    secs = time.time() - t0
    for (_, _, _, _, mine), s, st in zip(jobs, workers, results):
        for i, x in zip(mine, st):
            if x == 0:
                acked[i] = s
            else:
                refused[x] = refused.get(x, 0) + 1
    return acked, refused, secs


def _put_all(arg):
    (sock, token, keys, values, mine), batch = arg
    from openlake_client import Client
    st = []
    with Client(sock, token=token, namespace=NS.decode(), value_size=values.size) as c:
        for j in range(0, len(mine), batch):
            part = mine[j:j + batch]
            st += c.put([keys[i] for i in part], [values.value(i) for i in part])
    return st


def push_counts(senders, with_time=False):
    """Summed over the senders, once every push they made is answered (no
    change for 1 s): (pushes_total, push_drops_total, push_failures_total),
    and with_time the time.time() of the last change."""
    def now():
        tot = [0, 0, 0]
        for s in senders:
            text = metrics(s)
            for i, n in enumerate(("pushes_total", "push_drops_total", "push_failures_total")):
                tot[i] += metric(text, "openlake_kvpool_" + n)
        return tuple(tot)
    last, since = None, time.time()
    while time.time() - since < 1.0:
        cur = now()
        if cur != last:
            last, since = cur, time.time()
        time.sleep(0.02)
    return (*last, since) if with_time else last


def read_back(d, token, keys, values, idx, batch=16):
    """Reads keys[i] for i in idx through d's Unix socket: (exact, missing);
    a value present with other bytes fails the caller's assertion."""
    from openlake_client import Client
    exact = missing = 0
    with Client(str(d.data / "kv.sock"), token=token, namespace=NS.decode(),
                value_size=values.size) as c:
        for j in range(0, len(idx), batch):
            part = idx[j:j + batch]
            bufs = [bytearray(values.size) for _ in part]
            lens = c.get([keys[i] for i in part], bufs)
            for i, n, b in zip(part, lens, bufs):
                if n < 0:
                    missing += 1
                else:
                    assert n == values.size and bytes(b) == values.value(i), keys[i]
                    exact += 1
    return exact, missing


def cpu_s(pid):
    """User + system CPU seconds of a process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(etcd_url, target, senders, conns, token, total, value_size, slab, target_id=1,
        probe=False):
    """The whole incast: keys homed on target (total bytes of value_size
    values), the target idle with its slab populated, then the flood with
    the target stopped for 1 s early on (SIGSTOP, as a long pause of a
    process looks: the writers go on, so when it resumes its senders hold
    most of the flood for it at once), until every push is answered; then
    every acknowledged value read back where it was stored, and every key
    at the target. A dict of what was seen; a value read back with other
    bytes, or a sender missing one it acknowledged, fails an assertion.
    probe: a Prober reads a key of the target's own meanwhile (its
    latencies in probe_drain and probe_before)."""
    r = {"keys": keys_homed_on(kv_members(etcd_url), target_id, total // value_size),
         "values": Values(value_size)}
    wait_populated(target, slab)
    r["idle"] = proc_status(target.proc.pid)
    sampler = Sampler(target, target_id, senders)
    prober = Prober(target, token) if probe else None
    try:
        t0, cpu0 = time.time(), cpu_s(target.proc.pid)
        r["acked"], r["refused"], r["flood_s"] = flood(senders, conns, token, r["keys"],
                                                       r["values"], pause=(target, 0.3, 1.0))
        r["pushed"], r["drops"], r["failures"], settled = push_counts(senders, with_time=True)
        r["delivery_s"] = settled - t0
    finally:
        r["peak"], r["inflight_max"], r["samples"] = sampler.stop()
        if prober:
            lat = prober.stop()
    if prober:
        # the reads sent after the pause (t0 + 1.3 s; the first one after it
        # waited for the resume) until every push was answered: the drain
        r["probe_drain"] = sorted(x for t, x in lat if t0 + 1.35 <= t <= settled)
        r["probe_before"] = sorted(x for t, x in lat if t + max(x, 0) < t0 + 0.3)  # ended before it
        r["probe_misses"] = sum(1 for _, x in lat if x < 0)
    r["target_cpu_s"] = cpu_s(target.proc.pid) - cpu0
    r["stalls"] = sum(metric(metrics(s), "openlake_rpc_peer_credit_stalls_total", target_id)
                      for s in senders)
    for s in range(len(senders)):
        mine = [i for i, by in r["acked"].items() if by == s]
        assert read_back(senders[s], token, r["keys"], r["values"], mine) == (len(mine), 0)
    r["exact"], r["missing"] = read_back(target, token, r["keys"], r["values"],
                                         list(range(len(r["keys"]))))
    return r
