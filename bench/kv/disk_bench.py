"""KV disk tier read bandwidth next to fio O_DIRECT reads on the same filesystem.

One openlaked (--threads 1, pinned to CPU 0) with a small RAM slab and a disk
tier several times larger; the client (this process, pinned to CPU 1) fills
it with VALUE-byte values through the Python client, waiting until every one
is written behind, so the working set lives on the drive. Then, per round,
alternating:

  fio       read (sequential) and randread, bs=VALUE, O_DIRECT, io_uring,
            iodepth=QD, one job on CPU 0, over a file of the same size in the
            same directory; the ratio is taken to the sequential read, as
            the tier's reads below are in write order, which is file order;
  promote   ACQUIRE of BATCH keys at a time (each read from the drive into
            RAM, header and XXH3 of the value checked by the server), then
            RELEASE; the keys come back in the order they were written, so
            every one was evicted from RAM since its last read;
  get       the same through Client.get into the caller's buffers (adds the
            client's checked copy out of the shared slab).

Bytes really read from the drive are taken from /proc/<pid>/io of openlaked.
Writes bench/results/kv-disk-<UTC>.json and the kv-disk section of
docs/benchmarks.md. Run by bench/kv/run_disk.sh.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from docsection import replace_section  # noqa: E402

from benchutil import free_ports  # noqa: E402  (bench/kv, the script's directory)
from openlake_client import OK, Client  # noqa: E402


def read_bytes(pid):
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    return 0


def stamp(buf, i):
    buf[:8] = np.frombuffer(i.to_bytes(8, "little"), dtype=np.uint8)


def fio_run(path, size, bs, qd, rw):
    """Reads the file once (the same bytes the tier reads per pass)."""
    out = subprocess.run(
        ["fio", "--name=r", f"--filename={path}", f"--size={size}", f"--bs={bs}", f"--rw={rw}",
         "--direct=1", "--ioengine=io_uring", f"--iodepth={qd}", "--numjobs=1", "--cpus_allowed=0",
         "--output-format=json"],
        check=True, capture_output=True, text=True).stdout
    job = json.loads(out)["jobs"][0]["read"]
    return job["io_bytes"] / (job["runtime"] / 1000.0) / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--gib", type=float, default=3.0, help="working set on the drive")
    ap.add_argument("--ram-gib", type=float, default=1.0)
    ap.add_argument("--value", type=int, default=1 << 20)
    ap.add_argument("--batch", type=int, default=512,
                    help="keys per ACQUIRE: 512 x 1 MiB is one 8k-token prompt of an 8B model")
    ap.add_argument("--qd", type=int, default=32)
    ap.add_argument("--dir", default=os.environ.get("BENCH_DIR", os.path.join(ROOT, "build")))
    a = ap.parse_args()
    os.sched_setaffinity(0, {1})
    work = tempfile.mkdtemp(prefix="kvdisk.", dir=a.dir)
    data = os.path.join(work, "data")
    port_s3, port_kv = free_ports(2)
    n = int(a.gib * (1 << 30)) // a.value
    n -= n % a.batch
    disk_gib = a.gib * 1.25 + 0.25
    proc = subprocess.Popen(
        [os.path.join(ROOT, "build", "openlaked"), "--threads", "1", "--data-dirs", data,
         "--s3-addr", f"127.0.0.1:{port_s3}", "--kv-addr", f"127.0.0.1:{port_kv}",
         "--kv-slab.capacity-gb", str(a.ram_gib), "--kv-disk.capacity-gb", str(disk_gib),
         "--kv-disk.queue-depth", str(a.qd)],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "d.log"), "w"),
        preexec_fn=lambda: os.sched_setaffinity(0, {0}))
    rows = []
    try:
        for _ in range(200):
            if os.path.exists(os.path.join(data, "kv.sock")):
                break
            time.sleep(0.05)
        c = Client(os.path.join(data, "kv.sock"), token_file=os.path.join(data, "kv.token"),
                   namespace="bench-disk", value_size=a.value)
        keys = [b"blk-%08d" % i for i in range(n)]
        src = [np.random.default_rng(i).integers(0, 256, a.value, dtype=np.uint8)
               for i in range(a.batch)]
        t0 = time.time()
        for i in range(0, n, a.batch):
            for j in range(a.batch):
                stamp(src[j], i + j)
            st = c.put(keys[i:i + a.batch], src)
            assert all(s == OK for s in st), st
            while c.stats()["disk_entries"] < i + a.batch:
                time.sleep(0.002)
        fill_s = time.time() - t0
        fio_file = os.path.join(work, "fio.dat")
        subprocess.run(["fio", "--name=w", f"--filename={fio_file}", f"--size={n * a.value}",
                        f"--bs={a.value}", "--rw=write", "--direct=1", "--ioengine=io_uring",
                        "--iodepth=8", "--output-format=json"], check=True, capture_output=True)
        dst = [np.empty(a.value, dtype=np.uint8) for _ in range(a.batch)]
        for r in range(a.rounds):
            row = {"round": r + 1}
            order = ["fio", "promote", "get"] if r % 2 == 0 else ["get", "promote", "fio"]
            for what in order:
                if what == "fio":
                    row["fio_gbs"] = fio_run(fio_file, n * a.value, a.value, a.qd, "read")
                    row["fio_rand_gbs"] = fio_run(fio_file, n * a.value, a.value, a.qd, "randread")
                    continue
                rb0 = read_bytes(proc.pid)
                t0 = time.perf_counter()
                for i in range(0, n, a.batch):
                    ks = keys[i:i + a.batch]
                    if what == "promote":
                        slots = c.acquire(ks)
                        assert all(s.status == OK for s in slots), [s.status for s in slots]
                        c.release(slots)
                    else:
                        got = c.get(ks, dst)
                        assert got == [a.value] * len(ks), got
                dt = time.perf_counter() - t0
                moved = read_bytes(proc.pid) - rb0
                row[f"{what}_gbs"] = n * a.value / dt / 1e9
                row[f"{what}_disk_fraction"] = moved / (n * a.value)
            # the last batch read back is the right data
            for j in range(a.batch):
                stamp(src[j], n - a.batch + j)
                assert np.array_equal(dst[j], src[j]), "wrong bytes from the disk tier"
            rows.append(row)
            print(json.dumps(row), flush=True)
        c.close()
    finally:
        proc.terminate()
        proc.wait(60)
    machine = json.loads(subprocess.run([sys.executable, os.path.join(ROOT, "bench", "http", "machine.py")],
                                        capture_output=True, text=True).stdout)
    fs = subprocess.run(["df", "-T", work], capture_output=True, text=True).stdout.splitlines()[-1].split()
    shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0] if k != "round"}
    ratio = {w: [r[f"{w}_gbs"] / r["fio_gbs"] for r in rows] for w in ("promote", "get")}
    stamp_s = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    res = {"machine": machine, "args": vars(a), "filesystem": fs[1], "device": fs[0],
           "fill_seconds": fill_s, "rounds": rows, "median": med}
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    out = os.path.join(ROOT, "bench", "results", f"kv-disk-{stamp_s}.json")
    with open(out, "w") as f:
        json.dump(res, f, indent=1)

    def rr(w):
        v = ratio[w]
        return f"**{statistics.median(v):.2f}x** ({min(v):.2f}-{max(v):.2f})"
    mib = a.value >> 20 if a.value >= 1 << 20 else a.value / (1 << 20)
    body = f"""Command: `bash bench/kv/run_disk.sh` (knobs: `ROUNDS={a.rounds} GIB={a.gib} VALUE={a.value} QD={a.qd}`).
`openlaked --threads 1` on CPU 0 with a {a.ram_gib} GiB slab and a {disk_gib} GiB disk tier
(`kv_disk.queue_depth = {a.qd}`) on {fs[1]} ({fs[0]}); the Python client on CPU 1 writes
{n} values of {mib} MiB ({n * a.value / (1 << 30):.2f} GiB) and waits until all are written behind. Per
round, alternating: **fio** `rw=read bs={a.value} direct=1 ioengine=io_uring iodepth={a.qd}` one job on
CPU 0, reading once a file of the same size in the same directory (the same bytes as one tier pass; and `rw=randread` for reference; the tier
reads below are in write order, which is file order, so the ratio is taken to the sequential read);
**promote**: ACQUIRE of {a.batch} keys at a
time (one long prompt's blocks) then RELEASE, in write order, so every value is read from the drive into RAM and checked (header
CRC, key, sequence, XXH3-64 of the value) before it is granted; **get**: the same through `Client.get`
into the caller's buffers (adds the client's checked copy). Fraction read from the drive (from
`/proc/<pid>/io`): promote {med['promote_disk_fraction']:.2f}, get {med['get_disk_fraction']:.2f}.

Machine: {machine.get('cpu', '?')}, {machine.get('cores', '?')} cores, kernel {machine.get('kernel', '?')}. Raw data: `bench/results/kv-disk-{stamp_s}.json`.

| | fio O_DIRECT read | fio O_DIRECT randread | promote (disk → RAM, checked) | get (disk → caller's buffer) |
|---|---:|---:|---:|---:|
| median GB/s | {med['fio_gbs']:.2f} | {med['fio_rand_gbs']:.2f} | {med['promote_gbs']:.2f} | {med['get_gbs']:.2f} |
| ratio to fio read, per round, median (min-max) | 1 | | {rr('promote')} | {rr('get')} |

Goal (issue): disk tier read >= 0.8 of fio.
"""
    replace_section(os.path.join(ROOT, "docs", "benchmarks.md"), "kv-disk", body,
                    heading="## KV disk tier read vs fio")
    print(body)


if __name__ == "__main__":
    main()
