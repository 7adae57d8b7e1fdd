#!/usr/bin/env python3
"""OpenLake vs Mooncake Store vs Redis on loopback: put and get GB/s.

Starts, on free loopback ports with private temp dirs, pinned to CPU 0:
  - openlaked --threads 1 (Unix socket + shared slab, and TCP);
  - mooncake_master (with its built-in HTTP metadata server, no etcd) and
    mooncake_client, Mooncake's standalone store process that holds the
    global segment (the memory the values live in), TCP transport;
  - redis-server (no persistence, noeviction, Unix socket + TCP).
and drives each through its own Python client from this process, pinned to
CPU 1:
  openlake-unix   openlake_client.Client over DIR/kv.sock (values through the
                  shared slab), put()/get() of 32-key batches
  openlake-tcp    openlake_client.Client over 127.0.0.1:PORT (values inline)
  mooncake-tcp    mooncake.store.MooncakeDistributedStore, protocol "tcp", a
                  pure client (global segment 0, so every value crosses to the
                  mooncake_client process), batch_put_from / batch_get_into on
                  registered buffers (its zero-copy batch API)
  redis-unix      redis-py (hiredis parser) pipelines of 32 SET / 32 GET over
  redis-tcp       the Unix socket / 127.0.0.1:PORT; GET results copied into
                  the destination buffer, like the other clients' get-into

Same work for every system: values of each size, batches of BATCH keys,
PASS_MIB of distinct keys per pass, PASSES passes per measurement (timed put
of every batch, then timed get of every batch, then untimed delete so memory
is reused). One warm-up measurement per system and size, then ROUNDS rounds;
in each round every size is measured on every system, the system order
rotating from round to round. Ratios are computed per round and reported as
median (min-max).

Correctness: the first 8 bytes of every value are stamped with a unique id
before its put; after the gets, the last batch read is compared byte for byte
with what was written, and one random earlier batch is read again (untimed)
and compared. Any mismatch aborts the run.

Also recorded per measurement: loopback bytes (/proc/net/dev "lo", both
directions summed / 2) per value byte, so a path that did not cross a socket
shows ~0; server CPU (utime+stime of the server processes from /proc) and
client CPU (this process, all threads) per GB moved.
"""
import argparse
import ctypes
import importlib.util
import json
import mmap
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from benchutil import free_ports  # noqa: E402  (bench/kv, the script's directory)

import numpy as np  # noqa: E402

SYSTEMS = ["openlake-unix", "openlake-tcp", "mooncake-tcp", "redis-unix", "redis-tcp"]
CLK = os.sysconf("SC_CLK_TCK")


def wait_for(pred, what, timeout=30.0, proc=None, log=None):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(0.05)
    tail = open(log, errors="replace").read()[-3000:] if log and os.path.exists(log) else ""
    raise RuntimeError(f"{what} did not come up\n{tail}")


def port_open(port, host="127.0.0.1"):
    try:
        socket.create_connection((host, port), timeout=0.2).close()
        return True
    except OSError:
        return False


def proc_cpu(pids):
    t = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        t += int(fields[11]) + int(fields[12])  # utime, stime
    return t / CLK


def libs_log_to(path):
    """Sends fd 2 (where Mooncake's library logs, glog) to the file path and
    Python's sys.stderr to the real stderr; returns the real stderr's fd
    (os.dup2 it back to 2 when the libraries are done)."""
    real_err = os.dup(2)
    sys.stderr = os.fdopen(real_err, "w", buffering=1)
    lf = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(lf, 2)
    os.close(lf)
    return real_err


def self_cpu():
    t = os.times()
    return t.user + t.system


def lo_bytes(iface="lo"):
    """Bytes received and sent on iface (this network namespace's)."""
    for line in open("/proc/net/dev"):
        name, _, rest = line.partition(":")
        if name.strip() == iface:
            f = rest.split()
            return int(f[0]) + int(f[8])
    return 0


class Servers:
    """Every server process, pinned to CPU 0, in one private temp dir.
    host: the address Mooncake's servers listen on and its client calls
    from (bench/cluster: the namespaces' addresses); wrap: a command prefix
    for the Mooncake servers (["ip", "netns", "exec", NS])."""

    def __init__(self, args, host="127.0.0.1", client_host="127.0.0.1", wrap=()):
        self.dir = tempfile.mkdtemp(prefix="olpeers.")
        self.procs = {}
        self.args = args
        self.cpu0 = {0} if args.pin else None
        self.host, self.client_host, self.wrap = host, client_host, list(wrap)

    def spawn(self, name, argv, log, wrap=()):
        pin = self.cpu0
        p = subprocess.Popen([*wrap, *argv], stdout=open(log, "w"), stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, cwd=self.dir,
                             preexec_fn=(lambda: os.sched_setaffinity(0, pin)) if pin else None)
        self.procs[name] = p
        return p

    def start_openlake(self):
        d = os.path.join(self.dir, "openlake")
        kv, s3 = free_ports(2)
        log = os.path.join(self.dir, "openlaked.log")
        p = self.spawn("openlaked", [os.path.join(ROOT, "build", "openlaked"), "--threads", "1",
                                     "--data-dirs", d, "--kv-addr", f"127.0.0.1:{kv}",
                                     "--s3-addr", f"127.0.0.1:{s3}",
                                     "--kv-slab.capacity-gb", str(self.args.capacity_gib)], log)
        sock = os.path.join(d, "kv.sock")
        wait_for(lambda: os.path.exists(sock) and os.path.exists(os.path.join(d, "kv.token")) and port_open(kv),
                 "openlaked", proc=p, log=log)
        self.ol = {"unix": sock, "tcp": f"127.0.0.1:{kv}", "token_file": os.path.join(d, "kv.token"),
                   "pids": [p.pid]}

    def start_mooncake(self):
        spec = importlib.util.find_spec("mooncake")
        pkg = list(spec.submodule_search_locations)[0]
        rpc, http, metrics, cport, chttp = free_ports(5)
        h = self.host
        mlog = os.path.join(self.dir, "mooncake_master.log")
        m = self.spawn("mooncake_master", [
            os.path.join(pkg, "mooncake_master"), f"--rpc_address={h}", f"--rpc_port={rpc}",
            "--enable_http_metadata_server=true", f"--http_metadata_server_host={h}",
            f"--http_metadata_server_port={http}", f"--metrics_host={h}", f"--metrics_port={metrics}",
            "--logtostderr"], mlog, self.wrap)
        wait_for(lambda: port_open(rpc, h) and port_open(http, h), "mooncake_master", proc=m, log=mlog)
        meta = f"http://{h}:{http}/metadata"
        clog = os.path.join(self.dir, "mooncake_client.log")
        c = self.spawn("mooncake_client", [
            os.path.join(pkg, "mooncake_client"), f"--host={h}", f"--port={cport}",
            f"--global_segment_size={self.args.capacity_gib} GB", "--protocol=tcp",
            f"--master_server_address={h}:{rpc}", f"--metadata_server={meta}",
            f"--http_port={chttp}", "--logtostderr"], clog, self.wrap)
        wait_for(lambda: port_open(cport, h), "mooncake_client", proc=c, log=clog)
        self.mc = {"master": f"{h}:{rpc}", "metadata": meta, "pids": [m.pid, c.pid],
                   "master_argv": m.args, "client_argv": c.args}

    def start_redis(self):
        d = os.path.join(self.dir, "redis")
        os.makedirs(d)
        port, = free_ports(1)
        sock = os.path.join(d, "redis.sock")
        log = os.path.join(self.dir, "redis.log")
        argv = [shutil.which("redis-server") or "/usr/bin/redis-server", "--port", str(port),
                "--bind", "127.0.0.1", "--unixsocket", sock, "--unixsocketperm", "700", "--dir", d,
                "--save", "", "--appendonly", "no", "--maxmemory", f"{self.args.capacity_gib}gb",
                "--maxmemory-policy", "noeviction", "--daemonize", "no", "--logfile", ""]
        p = self.spawn("redis-server", argv, log)
        wait_for(lambda: os.path.exists(sock) and port_open(port), "redis-server", proc=p, log=log)
        self.redis = {"unix": sock, "port": port, "pids": [p.pid], "argv": argv}

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def check_alive(self):
        for name, p in self.procs.items():
            if p.poll() is not None:
                raise RuntimeError(f"{name} exited with {p.returncode}; logs in {self.dir}")


class Buffers:
    """Page-aligned source and destination batches, shared by every system."""

    def __init__(self, batch, vmax):
        n = batch * vmax
        self.src_mm, self.dst_mm = mmap.mmap(-1, n), mmap.mmap(-1, n)
        self.src = np.frombuffer(self.src_mm, dtype=np.uint8)
        self.dst = np.frombuffer(self.dst_mm, dtype=np.uint8)
        self.src[:] = np.random.default_rng(12345).integers(0, 256, n, dtype=np.uint8)
        self.dst[:] = 0
        self.base = self.src.copy()
        self.src_addr = ctypes.addressof(ctypes.c_char.from_buffer(self.src_mm))
        self.dst_addr = ctypes.addressof(ctypes.c_char.from_buffer(self.dst_mm))
        self.n = n

    def stamp(self, v, ids):
        """Writes each value's unique id into its first 8 bytes."""
        self.src[: len(ids) * v].view(np.uint64)[:: v // 8] = ids

    def expected(self, v, ids):
        e = self.base[: len(ids) * v].copy()
        e.view(np.uint64)[:: v // 8] = ids
        return e


# ---- the systems: each a class with put(b) / get(b) / delete(b) over batch b ----

class OpenLake:
    def __init__(self, srv, transport, v, bufs, batch):
        from openlake_client import Client
        addr = srv.ol[transport]
        self.c = Client(addr, token_file=srv.ol["token_file"], namespace="bench", value_size=v)
        want_shm = transport == "unix"
        if bool(self.c.shared_memory) != want_shm:
            raise RuntimeError(f"openlake {transport}: shared_memory={self.c.shared_memory}")
        self.src = [memoryview(bufs.src_mm)[i * v:(i + 1) * v] for i in range(batch)]
        self.dst = [memoryview(bufs.dst_mm)[i * v:(i + 1) * v] for i in range(batch)]
        self.v = v
        # Over TCP the values travel inline; the client cuts a batch into
        # frames within the server's max_data_body (16 MiB) and pipelines
        # them, so every call is a whole batch, as for the other systems.
        self.step = batch
        self.api = ("Client(%r).put/get of %d-key batches, shared_memory=%s"
                    % ("DIR/kv.sock" if want_shm else "127.0.0.1:PORT", batch, self.c.shared_memory))

    def put(self, keys):
        n = self.step
        for i in range(0, len(keys), n):
            st = self.c.put(keys[i:i + n], self.src[i:i + n])
            if any(s != 0 for s in st):
                raise RuntimeError(f"openlake put: {st}")

    def get(self, keys):
        n = self.step
        for i in range(0, len(keys), n):
            st = self.c.get(keys[i:i + n], self.dst[i:i + n])
            if any(s != self.v for s in st):
                raise RuntimeError(f"openlake get: {st}")

    def delete(self, keys):
        self.c.delete(keys)

    def close(self):
        self.c.close()


class Mooncake:
    store = None

    @classmethod
    def connect(cls, srv, bufs):
        if cls.store is None:
            from mooncake.store import MooncakeDistributedStore
            s = MooncakeDistributedStore()
            # A pure client: no global segment of its own (values live in the
            # mooncake_client process), a small local buffer (unused: we
            # register our own buffers).
            rc = s.setup(srv.client_host, srv.mc["metadata"], 0, 16 << 20, "tcp", "", srv.mc["master"])
            if rc != 0:
                raise RuntimeError(f"mooncake setup: {rc}")
            for addr in (bufs.src_addr, bufs.dst_addr):
                rc = s.register_buffer(addr, bufs.n)
                if rc != 0:
                    raise RuntimeError(f"mooncake register_buffer: {rc}")
            cls.store = s
        return cls.store

    def __init__(self, srv, transport, v, bufs, batch):
        self.s = self.connect(srv, bufs)
        self.sp = [bufs.src_addr + i * v for i in range(batch)]
        self.dp = [bufs.dst_addr + i * v for i in range(batch)]
        self.sizes = [v] * batch
        self.v = v
        self.api = "MooncakeDistributedStore.batch_put_from / batch_get_into (registered buffers), protocol tcp"

    def put(self, keys):
        st = self.s.batch_put_from(keys, self.sp, self.sizes)
        if any(s != 0 for s in st):
            raise RuntimeError(f"mooncake batch_put_from: {st}")

    def get(self, keys):
        st = self.s.batch_get_into(keys, self.dp, self.sizes)
        if any(s != self.v for s in st):
            raise RuntimeError(f"mooncake batch_get_into: {st}")

    def delete(self, keys):
        self.s.batch_remove(keys, True)  # force: skip the read lease (10 s by default)

    def close(self):
        pass


class Redis:
    def __init__(self, srv, transport, v, bufs, batch):
        import redis
        if transport == "unix":
            self.r = redis.Redis(unix_socket_path=srv.redis["unix"])
        else:
            self.r = redis.Redis(host="127.0.0.1", port=srv.redis["port"])
        self.r.ping()
        self.src = [memoryview(bufs.src_mm)[i * v:(i + 1) * v] for i in range(batch)]
        self.dst = [memoryview(bufs.dst_mm)[i * v:(i + 1) * v] for i in range(batch)]
        self.v = v
        from redis.utils import HIREDIS_AVAILABLE
        parser = "hiredis" if HIREDIS_AVAILABLE else "pure Python"
        self.api = f"redis-py {redis.__version__} pipeline(transaction=False) of SET / GET, parser {parser}"

    def put(self, keys):
        p = self.r.pipeline(transaction=False)
        for k, b in zip(keys, self.src):
            p.set(k, b)
        st = p.execute()
        if not all(st):
            raise RuntimeError(f"redis SET: {st}")

    def get(self, keys):
        p = self.r.pipeline(transaction=False)
        for k in keys:
            p.get(k)
        for d, val in zip(self.dst, p.execute()):
            if val is None or len(val) != self.v:
                raise RuntimeError("redis GET: missing or short value")
            d[:] = val

    def delete(self, keys):
        self.r.delete(*keys)

    def close(self):
        self.r.close()


def mooncake_version():
    """The Mooncake wheel installed, as "name version"."""
    from importlib.metadata import version
    for name in ("mooncake-transfer-engine-non-cuda", "mooncake-transfer-engine"):
        try:
            return f"{name} {version(name)}"
        except Exception:
            pass
    return "mooncake ?"


def make(system, srv, v, bufs, batch):
    kind, transport = system.split("-")
    cls = {"openlake": OpenLake, "mooncake": Mooncake, "redis": Redis}[kind]
    return cls(srv, transport, v, bufs, batch)


def server_pids(srv, system):
    kind = system.split("-")[0]
    return getattr(srv, {"openlake": "ol", "mooncake": "mc", "redis": "redis"}[kind])["pids"]


def measure(system, client, srv, bufs, v, batch, nbatch, passes, tag, rng, iface="lo"):
    """passes x (put nbatch batches, get them, verify, delete); returns one
    row. Its *_lo_per_byte: the bytes on iface (both directions; halved for
    lo, where each is counted twice) per value byte."""
    try:
        return measure1(system, client, srv, bufs, v, batch, nbatch, passes, tag, rng, iface)
    except Exception as e:
        raise RuntimeError(f"{system}, value size {v}, {tag}: {e!r}") from e


def measure1(system, client, srv, bufs, v, batch, nbatch, passes, tag, rng, iface):
    pids = server_pids(srv, system)
    ids0 = (hash((system, v, tag)) & 0xFFFF) << 40
    t_put = t_get = 0.0
    cpu = {"put": [0.0, 0.0], "get": [0.0, 0.0]}
    lo = {"put": 0, "get": 0}
    for p in range(passes):
        bufs.src[:] = bufs.base  # drop the stamps of other value sizes
        keys = [[f"{tag}/{system}/{v}/{p}/{b}/{i}" for i in range(batch)] for b in range(nbatch)]
        ids = [np.arange(batch, dtype=np.uint64) + np.uint64(ids0 + (p * nbatch + b) * batch + 1)
               for b in range(nbatch)]
        s_cpu, c_cpu, l0 = proc_cpu(pids), self_cpu(), lo_bytes(iface)
        t0 = time.perf_counter()
        for b in range(nbatch):
            bufs.stamp(v, ids[b])
            client.put(keys[b])
        t_put += time.perf_counter() - t0
        cpu["put"][0] += proc_cpu(pids) - s_cpu
        cpu["put"][1] += self_cpu() - c_cpu
        lo["put"] += lo_bytes(iface) - l0
        s_cpu, c_cpu, l0 = proc_cpu(pids), self_cpu(), lo_bytes(iface)
        t0 = time.perf_counter()
        for b in range(nbatch):
            client.get(keys[b])
        t_get += time.perf_counter() - t0
        cpu["get"][0] += proc_cpu(pids) - s_cpu
        cpu["get"][1] += self_cpu() - c_cpu
        lo["get"] += lo_bytes(iface) - l0
        # Verify: the last batch read, then one random earlier batch re-read.
        n = batch * v
        for b in (nbatch - 1, rng.randrange(nbatch)):
            if b != nbatch - 1:
                bufs.dst[:n] = 0
                client.get(keys[b])
            if not np.array_equal(bufs.dst[:n], bufs.expected(v, ids[b])):
                raise RuntimeError(f"{system}: value size {v}, batch {b}: data read back differs from data written")
        for b in range(nbatch):
            client.delete(keys[b])
    total = passes * nbatch * batch * v
    gb = total / 1e9
    div = 2 if iface == "lo" else 1
    srv.check_alive()
    return {"system": system, "value_bytes": v, "bytes": total,
            "put_s": t_put, "get_s": t_get, "put_gbs": gb / t_put, "get_gbs": gb / t_get,
            "put_server_cpu_s_per_gb": cpu["put"][0] / gb, "get_server_cpu_s_per_gb": cpu["get"][0] / gb,
            "put_client_cpu_s_per_gb": cpu["put"][1] / gb, "get_client_cpu_s_per_gb": cpu["get"][1] / gb,
            # loopback counts each byte as sent and as received; a veth once
            "put_lo_per_byte": lo["put"] / div / total, "get_lo_per_byte": lo["get"] / div / total,
            "verified_values": passes * 2 * batch}


SINK = r"""
import os, socket, sys
os.sched_setaffinity(0, {0}) if sys.argv[1] == "1" else None
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
print(l.getsockname()[1], flush=True)
buf = bytearray(8 << 20); mv = memoryview(buf)
while True:
    c, _ = l.accept()
    while c.recv_into(mv):
        pass
    c.close()
"""


class Ceilings:
    """Physical limits measured in the same run: single-thread memcpy of the
    same batches on CPU 1, and one loopback TCP stream from CPU 1 to a Python
    sink on CPU 0 (recv_into an 8 MiB buffer, nothing else)."""

    def __init__(self, pin):
        self.p = subprocess.Popen([sys.executable, "-c", SINK, "1" if pin else "0"], stdout=subprocess.PIPE,
                                  stdin=subprocess.DEVNULL)
        self.port = int(self.p.stdout.readline())

    def memcpy(self, bufs, v, batch, total, scratch):
        """Like a put then a get: the source batch into a pass-sized DRAM
        region, batch after batch, then back out into the destination batch
        (the same batch buffers stay cache-resident at 256 KiB, as for the
        systems). Returns (put-like GB/s, get-like GB/s)."""
        n = batch * v
        nb = len(scratch) // n
        src, dst = bufs.src[:n], bufs.dst[:n]
        rates = []
        for into in (True, False):
            t0 = time.perf_counter()
            for _ in range(total // len(scratch)):
                for b in range(nb):
                    if into:
                        np.copyto(scratch[b * n:(b + 1) * n], src)
                    else:
                        np.copyto(dst, scratch[b * n:(b + 1) * n])
            rates.append((total // len(scratch)) * nb * n / 1e9 / (time.perf_counter() - t0))
        return tuple(rates)

    def tcp(self, bufs, v, batch, total):
        n = batch * v
        mv = memoryview(bufs.src_mm)[:n]
        c = socket.create_connection(("127.0.0.1", self.port))
        t0 = time.perf_counter()
        for _ in range(total // n):
            c.sendall(mv)
        c.shutdown(socket.SHUT_WR)
        c.recv(1)  # the sink closes once it has read everything
        dt = time.perf_counter() - t0
        c.close()
        return (total // n) * n / 1e9 / dt

    def stop(self):
        self.p.kill()
        self.p.wait()


RATIOS = [("openlake-unix", "mooncake-tcp"), ("openlake-tcp", "mooncake-tcp"),
          ("openlake-unix", "redis-unix"), ("openlake-tcp", "redis-tcp")]
NAMES = {"openlake-unix": "OpenLake (Unix socket + shared slab)", "openlake-tcp": "OpenLake (TCP)",
         "mooncake-tcp": "Mooncake Store (TCP)", "redis-unix": "Redis (Unix socket)", "redis-tcp": "Redis (TCP)"}


def fmt_ratio(xs):
    return f"**{statistics.median(xs):.2f}×** ({min(xs):.2f}–{max(xs):.2f})"


def report(run, out_json):
    med = statistics.median
    m, cfg, rows = run["machine"], run["config"], run["rounds"]
    sizes, systems = cfg["value_bytes"], cfg["systems"]

    def cell(sys_, v):
        return [x for r in rows for x in r if x["system"] == sys_ and x["value_bytes"] == v]

    L = [f"Machine: {m['cpu']}, {m['cores']} cores, kernel {m['kernel']}, {m['mem_gib']} GiB. "
         f"Raw data: `{os.path.relpath(out_json, ROOT)}`. Versions: {run['versions']}.", "",
         f"Servers on CPU 0, the benchmark client (one Python process, one thread issuing calls) on CPU 1"
         f"{'' if cfg['pinned'] else ' (NOT pinned: fewer than 2 CPUs)'}. "
         f"Batches of {cfg['batch']} keys; per measurement {cfg['passes']} × {cfg['pass_mib']} MiB of distinct "
         f"keys put, then read back, then deleted (untimed); 1 warm-up measurement, then {len(rows)} rounds "
         f"alternating the systems. Median GB/s (value bytes ÷ wall time of the put or get calls), "
         f"server and client CPU seconds per GB moved, and loopback bytes per value byte (0 = the value did "
         f"not cross a socket).", "",
         "| value size | system | put GB/s | get GB/s | server CPU s/GB put / get | client CPU s/GB put / get | loopback B/B |",
         "|---:|---|---:|---:|---|---|---:|"]
    for v in sizes:
        for s in systems:
            xs = cell(s, v)
            if not xs:
                continue
            L.append(f"| {v // 1024} KiB | {s} | {med([x['put_gbs'] for x in xs]):.2f} | "
                     f"{med([x['get_gbs'] for x in xs]):.2f} | "
                     f"{med([x['put_server_cpu_s_per_gb'] for x in xs]):.3f} / {med([x['get_server_cpu_s_per_gb'] for x in xs]):.3f} | "
                     f"{med([x['put_client_cpu_s_per_gb'] for x in xs]):.3f} / {med([x['get_client_cpu_s_per_gb'] for x in xs]):.3f} | "
                     f"{med([x['put_lo_per_byte'] for x in xs]):.2f} |")
    L += ["", "Ceilings in the same run (median GB/s): single-thread memcpy on CPU 1 (`numpy.copyto`) of the "
          "same source batch into a pass-sized DRAM region batch after batch (put-like), and from there into the "
          "destination batch (get-like); one loopback TCP stream of the same bytes from CPU 1 to a Python sink on "
          "CPU 0 (`sendall` / `recv_into`, no protocol). Fractions: the system's median GB/s over the median "
          "ceiling.", "",
          "| value size | memcpy put-like / get-like | loopback TCP | openlake-unix put / get ÷ memcpy | "
          "best TCP row put / get ÷ loopback TCP |", "|---:|---|---:|---|---|"]
    for v in sizes:
        cs = [c for c in run["ceilings"] if c["value_bytes"] == v]
        if not cs:
            continue
        cp, cg = med([c["memcpy_put_gbs"] for c in cs]), med([c["memcpy_get_gbs"] for c in cs])
        ct = med([c["tcp_gbs"] for c in cs])
        ol = cell("openlake-unix", v)
        olf = (f"{med([x['put_gbs'] for x in ol]) / cp:.2f} / {med([x['get_gbs'] for x in ol]) / cg:.2f}"
               if ol else "–")
        tcp_rows = [s for s in systems if s.endswith("-tcp") and cell(s, v)]
        if tcp_rows:
            bp = max(tcp_rows, key=lambda s: med([x["put_gbs"] for x in cell(s, v)]))
            bg = max(tcp_rows, key=lambda s: med([x["get_gbs"] for x in cell(s, v)]))
            tf = (f"{med([x['put_gbs'] for x in cell(bp, v)]) / ct:.2f} ({bp}) / "
                  f"{med([x['get_gbs'] for x in cell(bg, v)]) / ct:.2f} ({bg})")
        else:
            tf = "–"
        L.append(f"| {v // 1024} KiB | {cp:.2f} / {cg:.2f} | {ct:.2f} | {olf} | {tf} |")
    L += ["", "Ratios of GB/s, per round, median (min–max); higher is better for OpenLake. "
          "Goal (issue): OpenLake ≥ 2× Mooncake for put and for get.", "",
          "| value size | ratio | put | get |", "|---:|---|---|---|"]
    summary = []
    for v in sizes:
        for a, b in RATIOS:
            if a not in systems or b not in systems:
                continue
            pr, gr = [], []
            for r in rows:
                xa = [x for x in r if x["system"] == a and x["value_bytes"] == v]
                xb = [x for x in r if x["system"] == b and x["value_bytes"] == v]
                if xa and xb:
                    pr.append(xa[0]["put_gbs"] / xb[0]["put_gbs"])
                    gr.append(xa[0]["get_gbs"] / xb[0]["get_gbs"])
            if pr:
                L.append(f"| {v // 1024} KiB | {a} ÷ {b} | {fmt_ratio(pr)} | {fmt_ratio(gr)} |")
                summary.append({"value_bytes": v, "ratio": f"{a}/{b}", "put_median": med(pr), "put_min": min(pr),
                                "put_max": max(pr), "get_median": med(gr), "get_min": min(gr), "get_max": max(gr)})
    L += ["", "APIs used: " + "; ".join(f"{s}: {run['apis'][s]}" for s in systems if s in run["apis"]) + "."]
    return "\n".join(L) + "\n", summary


EXPLAIN = """\
Command: `bash bench/kv/run_peers.sh` (knobs: `ROUNDS=5 PASS_MIB=512 PASSES=2 BATCH=32 CAPACITY_GIB=3`).
It installs Mooncake Store (PyPI `mooncake-transfer-engine-non-cuda`, the CPU-only build of
`mooncake-transfer-engine`, same version) and redis-py into `build/venv-bench`, Redis from Debian,
and runs `bench/kv/peers.py`, which starts every server on free loopback ports in a private temp dir:

- `openlaked --threads 1 --kv-slab.capacity-gb 3`; rows *openlake-unix* (the same-host path: the
  `openlake_client.Client` on `DIR/kv.sock`, values copied through the shared slab, xxh3 checked) and
  *openlake-tcp* (the same client on `127.0.0.1:PORT`, values inline in the frames).
- `mooncake_master` with its built-in HTTP metadata server (`--enable_http_metadata_server`, no etcd)
  and `mooncake_client` (Mooncake's standalone store process) holding a 3 GB global segment, protocol
  `tcp`; row *mooncake-tcp*: `MooncakeDistributedStore.setup(..., global_segment_size=0, protocol="tcp")`,
  a pure client, so every value crosses loopback TCP to the segment in `mooncake_client`, through
  `batch_put_from` / `batch_get_into` on buffers registered with `register_buffer` (Mooncake's
  zero-copy batch API); default replication (1 replica); deletes (untimed) use `batch_remove(force=True)`.
- `redis-server` with persistence off (`--save "" --appendonly no`), `maxmemory 3gb`, `noeviction`,
  otherwise defaults; rows *redis-unix* / *redis-tcp*: redis-py pipelines (no transaction) of 32 `SET`
  / 32 `GET`, hiredis parser; GET results are copied into the destination buffer so every system ends
  with the value in the caller's buffer.

Every value is stamped with a unique id before its put and the read-back data is compared byte for byte
(the last batch of every pass and one random batch re-read), so a broken setup cannot report numbers.

"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("ROUNDS", 5)))
    ap.add_argument("--sizes", default=os.environ.get("SIZES", "262144,1048576,2097152"))
    ap.add_argument("--batch", type=int, default=int(os.environ.get("BATCH", 32)))
    ap.add_argument("--pass-mib", type=int, default=int(os.environ.get("PASS_MIB", 512)))
    ap.add_argument("--passes", type=int, default=int(os.environ.get("PASSES", 2)))
    ap.add_argument("--capacity-gib", type=int, default=int(os.environ.get("CAPACITY_GIB", 3)))
    ap.add_argument("--systems", default=os.environ.get("SYSTEMS", ",".join(SYSTEMS)))
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    ap.add_argument("--no-doc", action="store_true", help="do not rewrite docs/benchmarks.md")
    ap.add_argument("--no-pin", dest="pin", action="store_false")
    args = ap.parse_args()
    if (os.cpu_count() or 1) < 2:
        args.pin = False
    sizes = [int(x) for x in args.sizes.split(",")]
    systems = [s for s in args.systems.split(",") if s]
    for s in systems:
        if s not in SYSTEMS:
            ap.error(f"unknown system {s}; known: {', '.join(SYSTEMS)}")
    batch = args.batch
    if args.capacity_gib * 1024 < 2 * args.pass_mib:
        ap.error("--capacity-gib must hold at least two passes")

    machine = json.loads(subprocess.run([sys.executable, os.path.join(ROOT, "bench", "http", "machine.py")],
                                        capture_output=True, text=True, check=True, cwd=ROOT).stdout)
    srv = Servers(args)
    # Mooncake's library logs (glog) to this process's stderr; send fd 2 to a
    # file in the temp dir and keep Python's own errors on the real stderr.
    real_err = libs_log_to(os.path.join(srv.dir, "client-libs.log"))
    ok = False
    clients = {}
    try:
        kinds = {s.split("-")[0] for s in systems}
        if "openlake" in kinds:
            srv.start_openlake()
        if "mooncake" in kinds:
            srv.start_mooncake()
        if "redis" in kinds:
            srv.start_redis()
        if args.pin:
            os.sched_setaffinity(0, {1})
        bufs = Buffers(batch, max(sizes))
        clients = {(s, v): make(s, srv, v, bufs, batch) for s in systems for v in sizes}
        apis = {s: clients[(s, sizes[0])].api for s in systems}
        rng = random.Random(7)
        nb = {v: max(1, (args.pass_mib << 20) // (batch * v)) for v in sizes}
        print(f"servers in {srv.dir}; systems {', '.join(systems)}; sizes {sizes}; batch {batch}; "
              f"{args.passes} x {args.pass_mib} MiB per measurement; {args.rounds} rounds", flush=True)
        for s in systems:
            print(f"  {s}: {apis[s]}", flush=True)
        for v in sizes:  # warm-up: faults in every server's memory, connects everything
            for s in systems:
                measure(s, clients[(s, v)], srv, bufs, v, batch, nb[v], args.passes, "warm", rng)
        ceil = Ceilings(args.pin)
        total = args.passes * (args.pass_mib << 20)
        scratch = np.frombuffer(mmap.mmap(-1, args.pass_mib << 20), dtype=np.uint8)
        scratch[:] = 1  # faulted in once
        rounds, ceilings = [], []
        for r in range(args.rounds):
            order = systems[r % len(systems):] + systems[:r % len(systems)]
            rows = []
            for v in sizes:
                (cp, cg), ct = ceil.memcpy(bufs, v, batch, total, scratch), ceil.tcp(bufs, v, batch, total)
                ceilings.append({"round": r, "value_bytes": v, "memcpy_put_gbs": cp, "memcpy_get_gbs": cg,
                                 "tcp_gbs": ct})
                print(f"round {r + 1}/{args.rounds}  {v // 1024:5d} KiB  ceilings: memcpy {cp:6.2f} / {cg:6.2f} GB/s"
                      f"  loopback TCP stream {ct:6.2f} GB/s", flush=True)
                for s in order:
                    row = measure(s, clients[(s, v)], srv, bufs, v, batch, nb[v], args.passes, f"r{r}", rng)
                    row["round"] = r
                    rows.append(row)
                    print(f"round {r + 1}/{args.rounds}  {v // 1024:5d} KiB  {s:14s} put {row['put_gbs']:6.2f} GB/s"
                          f"  get {row['get_gbs']:6.2f} GB/s  lo {row['put_lo_per_byte']:.2f}/{row['get_lo_per_byte']:.2f}",
                          flush=True)
            rounds.append(rows)
        ceil.stop()
        ok = True
    finally:
        for c in clients.values():
            try:
                c.close()
            except Exception as e:
                print(f"close: {e!r}", file=sys.stderr)
        if Mooncake.store is not None:
            Mooncake.store.close()  # before its servers go, and while fd 2 is still the log
            Mooncake.store = None
        srv.stop()
        os.dup2(real_err, 2)
        if ok:
            shutil.rmtree(srv.dir, ignore_errors=True)
        else:
            print(f"logs kept in {srv.dir}", file=sys.stderr)

    import redis as _redis
    from importlib.metadata import version as _ver
    redis_ver = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.split()
    versions = (f"{mooncake_version()}, "
                f"redis-server {next((w[2:] for w in redis_ver if w.startswith('v=')), '?')}, "
                f"redis-py {_redis.__version__}, hiredis {_ver('hiredis')}, openlake {_ver('openlake-vllm')}")
    run = {"machine": machine, "versions": versions, "apis": apis, "rounds": rounds, "ceilings": ceilings,
           "config": {"value_bytes": sizes, "batch": batch, "pass_mib": args.pass_mib, "passes": args.passes,
                      "capacity_gib": args.capacity_gib, "systems": systems, "pinned": args.pin,
                      "mooncake_master": srv.mc["master_argv"] if "mooncake" in kinds else None,
                      "mooncake_client": srv.mc["client_argv"] if "mooncake" in kinds else None,
                      "redis": srv.redis["argv"] if "redis" in kinds else None}}
    from docsection import write_results
    write_results(ROOT, "kv-peers", run, report, args.doc, EXPLAIN,
                  "## KV peers: OpenLake vs Mooncake Store vs Redis on loopback", write_doc=not args.no_doc)


if __name__ == "__main__":
    main()
