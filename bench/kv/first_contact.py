"""KV first contact: `openlake bench kv` against a freshly started daemon,
with the slab cold (kv_slab.populate = "off": every page allocated by the
first put onto it), populated in the background (the default) while the
bench runs, and populated before the bench starts; and a second bench on
the same daemon (warm). Beside them, in the same run: first_touch.c, the
copy into a fresh memfd and into a populated one, the bounds for a cold
and a warm put.

Every measurement starts its own daemon (`openlaked --threads 1` on CPU 0,
a private data dir, free ports); the bench runs on CPU 1. Systems alternate
within each round (A B C A B C ...) after one warm-up round. --base-bin DIR
adds another build's daemon and CLI (e.g. the commit before populate
existed), run cold, in the same rounds.

Writes bench/results/kv-first-contact-<UTC>.json and the kv-first-contact
section of docs/benchmarks.md. Run by bench/kv/run_first_contact.sh.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from docsection import replace_section  # noqa: E402

from benchutil import free_ports  # noqa: E402  (bench/kv, the script's directory)

# name: (daemon args, wait until populated, bench twice)
SYSTEMS = {
    "off": (["--kv-slab.populate", "off"], False, True),
    "background": ([], False, False),
    "populated": ([], True, True),
}


def metrics(url):
    return urllib.request.urlopen(url + "/_openlake/metrics", timeout=10).read().decode()


def metric(text, name):
    m = re.search(r'^%s\{tenant="default"\} (\d+)$' % name, text, re.M)
    return int(m.group(1)) if m else None


def bench(cli, sock, a):
    r = subprocess.run(["taskset", "-c", "1", cli, "--json", "bench", "kv", "--addr", sock,
                        "--seconds", str(a.seconds), "--value-size", str(a.value),
                        "--batch", str(a.batch)], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"bench kv failed: {r.stderr}")
    return {x["op"]: x for x in json.loads(r.stdout)}


def measure(name, bindir, args, wait, twice, a):
    work = tempfile.mkdtemp(prefix="ol-first-contact-")
    s3, kv, rpc = free_ports(3)
    url = f"http://127.0.0.1:{s3}"
    log = open(os.path.join(work, "log"), "w")
    proc = subprocess.Popen(
        ["taskset", "-c", "0", os.path.join(bindir, "openlaked"), "--threads", "1", "--mode", "kv",
         "--data-dirs", work, "--s3-addr", f"127.0.0.1:{s3}", "--kv-addr", f"127.0.0.1:{kv}",
         "--rpc-addr", f"127.0.0.1:{rpc}", "--kv-slab.capacity-gb", str(a.capacity_gib), *args],
        stdout=subprocess.DEVNULL, stderr=log)
    row = {"system": name}
    try:
        deadline = time.time() + 60
        while True:
            try:
                if urllib.request.urlopen(url + "/_openlake/health/ready", timeout=1).status == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline or proc.poll() is not None:
                raise RuntimeError("openlaked did not become ready")
            time.sleep(0.02)
        if wait:
            t0 = time.time()
            while True:
                m = metrics(url)
                if metric(m, "openlake_kv_tenant_slab_populated_bytes") == metric(
                        m, "openlake_kv_tenant_slab_bytes"):
                    break
                if time.time() > t0 + 600:
                    raise RuntimeError("not populated within 600 s")
                time.sleep(0.02)
            row["waited_s"] = time.time() - t0
        sock = os.path.join(work, "kv.sock")
        cli = os.path.join(bindir, "openlake")
        for k, res in enumerate([bench(cli, sock, a)] + ([bench(cli, sock, a)] if twice else [])):
            pre = "" if k == 0 else "second_"
            for op in ("put", "get", "lookup"):
                for f in ("gb_per_s", "p50_us", "p99_us"):
                    row[f"{pre}{op}_{f}"] = float(res[op][f])
            row[f"{pre}slab"] = res["put"].get("slab", "n/a")   # an old CLI does not say
            row[f"{pre}slab_frac"] = res["put"].get("slab_allocated_frac")
            row[f"{pre}get_slab_frac"] = res["get"].get("slab_allocated_frac")
    finally:
        proc.terminate()
        proc.wait(60)
        log.close()
        text = open(os.path.join(work, "log")).read()
        m = re.search(r"kv slab: populated [\d.]+ GiB in ([\d.]+) s", text)
        row["populate_s"] = float(m.group(1)) if m else None
        m = re.search(r"kv slab: [\d.]+ GiB in \d+ shards?, (.*)$", text, re.M)
        row["backing"] = m.group(1) if m else None
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(row), flush=True)
    return row


LABEL = {"base": None,   # --base-label
         "off": "`populate = \"off\"`: cold",
         "background": "default (`\"background\"`), bench at ready",
         "populated": "default, bench once populated"}


def med(vals, fmt="{:.2f}"):
    """median (min–max) of the values that are there."""
    vals = [v for v in vals if v is not None]
    if not vals:
        return "–"
    return (fmt.format(statistics.median(vals)) + " (" + fmt.format(min(vals)) + "–"
            + fmt.format(max(vals)) + ")")


def ratios(rows, system, key, base="off"):
    """Per round: system's key over base's key, same round."""
    out = []
    for r in rows:
        if r["system"] != system or r.get(key) is None:
            continue
        b = next(x for x in rows if x["system"] == base and x["round"] == r["round"])
        out.append(r[key] / b[key.replace("second_", "")] if b.get(key.replace("second_", "")) else None)
    return out


def render(data):
    """The docs section's text from a run's raw data."""
    a = argparse.Namespace(**data["args"])
    rows, touch, machine = data["rounds"], data["first_touch"], data["machine"]
    names = list(dict.fromkeys(r["system"] for r in rows))
    label = dict(LABEL, base=f"{a.base_label}: cold")
    size = f"OVERLAP_GIB={a.capacity_gib:g}" if a.overlap else (
        f"CAPACITY_GIB={a.capacity_gib:g} BENCH_SECONDS={a.seconds:g}")
    knobs = f"ROUNDS={a.rounds} {size} VALUE={a.value} BATCH={a.batch}"
    extra = " --base-bin DIR" if a.base_bin else ""
    backing = next((r["backing"] for r in rows if r.get("backing")), "?")
    if a.overlap:
        lines = ["| daemon | % of the slab with pages when get began | get GB/s | get ÷ cold, per round "
                 "| get p99 µs | get p99 ÷ cold, per round | lookup p99 µs |",
                 "|---|---:|---:|---|---:|---|---:|"]
        for n in names:
            rs = [r for r in rows if r["system"] == n]
            lines.append(
                f"| {label[n]} | "
                f"{med([r['get_slab_frac'] * 100 for r in rs if r['get_slab_frac'] is not None], '{:.0f}')} | "
                f"{med([r['get_gb_per_s'] for r in rs])} | "
                f"**{med(ratios(rows, n, 'get_gb_per_s'))}** | "
                f"{med([r['get_p99_us'] for r in rs], '{:.0f}')} | "
                f"**{med(ratios(rows, n, 'get_p99_us'))}** | "
                f"{med([r['lookup_p99_us'] for r in rs], '{:.0f}')} |")
        what = (f"get and lookup while the background pass goes on: a {a.capacity_gib:g} GiB slab, "
                f"which put ({a.seconds / 3:g} s) fills only partly, so the pass is still running "
                f"through get and lookup; *cold* is the same bench with `populate = \"off\"`, "
                f"where nothing runs beside it")
    else:
        lines = ["| daemon | bench | slab when put began | put GB/s | put ÷ cold, per round | put p99 µs "
                 "| get GB/s |", "|---|---|---|---:|---|---:|---:|"]
        for n in names:
            rs = [r for r in rows if r["system"] == n]
            for pre, run in (("", "first"), ("second_", "second, same daemon")):
                if f"{pre}put_gb_per_s" not in rs[0]:
                    continue
                slabs = "/".join(sorted({str(r[f"{pre}slab"]) for r in rs}))
                lines.append(
                    f"| {label[n]} | {run} | {slabs} | "
                    f"{med([r[f'{pre}put_gb_per_s'] for r in rs])} | "
                    f"**{med(ratios(rows, n, f'{pre}put_gb_per_s'))}** | "
                    f"{med([r[f'{pre}put_p99_us'] for r in rs], '{:.0f}')} | "
                    f"{med([r[f'{pre}get_gb_per_s'] for r in rs])} |")
        what = ("put into a fresh daemon's slab: cold (`populate = \"off\"`, and the build before "
                "the setting existed when given), populated in the background while the bench runs "
                "(the default, bench started at ready), and populated before the bench; a second "
                "bench on the same daemon follows the cold and the populated one (its put evicts: the "
                "first filled the slab)")
    pops = [r["populate_s"] / a.capacity_gib for r in rows if r["system"] == "populated" and r["populate_s"]]
    pop_line = ("\nThe daemon's background pass with nothing else running (log line `kv slab: populated`): "
                f"{med(pops, '{:.2f}')} s per GiB." if pops else "")
    body = f"""Command: `bash bench/kv/run_first_contact.sh{extra}` (knobs: `{knobs}`; its {"second" if a.overlap else "first"} run). What it measures: {what}.
Each measurement starts its own `openlaked --threads 1 --mode kv --kv-slab.capacity-gb {a.capacity_gib:g}` pinned to CPU 0
(the background pass too) and runs `openlake bench kv --json --seconds {a.seconds:g} --value-size {a.value} --batch {a.batch}`
on CPU 1 (put for a third of the time, then get, then lookup; GB/s of value bytes, p99 of a batch); systems alternate
in each round, {a.rounds} rounds after a warm-up round; median (min–max); ratios per round. *slab* is what the bench
said when put began (the share of the slab with pages: `cold` < 1 %, `warm` ≥ 98 %).

Machine: {machine.get('cpu', '?')}, {machine.get('cores', '?')} cores, kernel {machine.get('kernel', '?')}, {machine.get('mem_gib', '?')} GiB; shmem THP `{touch[0]['shmem_enabled'] if touch else '?'}`, so the slab is {backing.split(' (')[0]}. Commit {data['commit']}. Raw data: `bench/results/{data['file']}`.

{chr(10).join(lines)}

Ceilings, same rounds (`bench/kv/first_touch.c`: {int(a.capacity_gib * 1024)} MiB copied in 2 MiB pieces the client's way, on CPU 1):
into a fresh memfd {med([t['fresh_gbs'] for t in touch])} GB/s, into a populated one {med([t['populated_gbs'] for t in touch])} GB/s;
`MADV_POPULATE_WRITE` {med([t['populate_s_per_gib'] for t in touch], '{:.2f}')} s per GiB.{pop_line}
"""
    return body


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--capacity-gib", type=float, default=2)
    ap.add_argument("--seconds", type=float, default=6)
    ap.add_argument("--value", type=int, default=256 << 10)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--base-bin", help="another build's bin dir, run cold beside")
    ap.add_argument("--base-label", default="the build before kv_slab.populate",
                    help="what --base-bin is, for the table")
    ap.add_argument("--systems", default=",".join(SYSTEMS),
                    help="which of " + ", ".join(SYSTEMS) + " (comma-separated)")
    ap.add_argument("--overlap", action="store_true",
                    help="report the get and lookup phases, which run while the background pass "
                         "goes on over a slab larger than put fills (section kv-first-contact-overlap)")
    ap.add_argument("--section", default=None,
                    help="docs/benchmarks.md section to write ('' = none; default kv-first-contact, "
                         "or kv-first-contact-overlap with --overlap)")
    ap.add_argument("--from", dest="from_file",
                    help="rewrite the section from this raw data file instead of measuring")
    a = ap.parse_args()
    if a.from_file:
        with open(a.from_file) as f:
            data = json.load(f)
        data["file"] = os.path.basename(a.from_file)
        a.overlap = data["args"]["overlap"]
    else:
        data = run(a)
    section = a.section if a.section is not None else (
        "kv-first-contact-overlap" if a.overlap else "kv-first-contact")
    body = render(data)
    if section:
        replace_section(os.path.join(ROOT, "docs", "benchmarks.md"), section, body)
    print(body)


def run(a):
    build = os.path.join(ROOT, "build")
    systems = [(n, build, SYSTEMS[n][0], SYSTEMS[n][1], SYSTEMS[n][2] and not a.overlap)
               for n in a.systems.split(",")]
    if a.base_bin:
        systems.insert(0, ("base", os.path.abspath(a.base_bin), [], False, False))
    touch_bin = os.path.join(build, "first_touch")
    subprocess.run(["cc", "-O2", "-Wall", "-Werror", "-o", touch_bin,
                    os.path.join(ROOT, "bench", "kv", "first_touch.c")], check=True)
    mib = int(a.capacity_gib * 1024)
    rows, touch = [], []
    for rnd in range(a.rounds + 1):   # round 0: warm-up, not kept
        for s in systems:
            r = measure(*s, a)
            if rnd:
                r["round"] = rnd
                rows.append(r)
        t = json.loads(subprocess.run(["taskset", "-c", "1", touch_bin, str(mib)],
                                      capture_output=True, text=True, check=True).stdout)
        if rnd:
            touch.append(t)
        print(json.dumps(t), flush=True)
    machine = json.loads(subprocess.run([sys.executable, os.path.join(ROOT, "bench", "http", "machine.py")],
                                        capture_output=True, text=True).stdout)
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    name = f"kv-first-contact{'-overlap' if a.overlap else ''}-{stamp}.json"
    data = {"machine": machine, "commit": commit, "args": {k: v for k, v in vars(a).items()
                                                           if k not in ("section", "from_file")},
            "rounds": rows, "first_touch": touch, "file": name}
    with open(os.path.join(ROOT, "bench", "results", name), "w") as f:
        json.dump(data, f, indent=1)
    return data


if __name__ == "__main__":
    main()
