#!/usr/bin/env python3
"""Writes the store-s3 section of docs/benchmarks.md from one run of
bench/store/run_s3.sh (OpenLake vs MinIO through s3load).

usage: report_s3.py RESULTS.json docs/benchmarks.md
       report_s3.py RESULTS.json -     (print only: a run of some PHASES)

Per workload and round: throughput (ops/s at 4 KiB, MiB/s above; the mixed
workload's total ops/s), the OpenLake / MinIO ratio, client-side p50 and p99,
server CPU ms per op. Medians over rounds, ratios with their min–max.
"""
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from docsection import replace_section  # noqa: E402

ROWS = [  # key, label, op in the load's results, unit, throughput goal (x MinIO)
    ("put_4k", "PUT 4 KiB", "put", "ops/s", 3),
    ("get_4k", "GET 4 KiB", "get", "ops/s", 3),
    ("put_1m", "PUT 1 MiB", "put", "MiB/s", 2),
    ("get_1m", "GET 1 MiB", "get", "MiB/s", 2),
    ("put_64m", "PUT 64 MiB", "put", "MiB/s", 2),
    ("get_64m", "GET 64 MiB", "get", "MiB/s", 2),
    ("put_64m_sdk", "PUT 64 MiB, AWS SDK", "put", "MiB/s", 2),
    # the SDK hashing each body on the generator's core: no goal, the
    # generator is what it measures (the row above is the server's)
    ("put_64m_sdk_hash", "PUT 64 MiB, AWS SDK hashing on the generator", "put", "MiB/s", None),
    ("get_64m_sdk", "GET 64 MiB, AWS SDK", "get", "MiB/s", 2),
    # TLS=1 only: the SDK's HTTPS upload (aws-chunked, CRC32 trailer)
    ("put_16m_sdk_tls", "PUT 16 MiB, AWS SDK over HTTPS (CRC32 trailer)", "put", "MiB/s", 2),
    ("mixed_1m", "mixed 1 MiB (45% GET, 30% HEAD, 15% PUT, 10% DELETE)", "total", "ops/s", 2),
]


# A drive-bound row's goal is met at this fraction of the drive's ceiling.
CEILING_FRACTION = 0.9


def by_system(rounds):
    """[{openlake: {...}, minio: {...}}, ...] in round order."""
    return [{s["system"]: s for s in r} for r in rounds]


def res(sysrun, key, op):
    return sysrun[key]["load"]["results"].get(op, {"ops": 0, "errors": 0, "ops_per_s": 0,
                                                   "mib_per_s": 0, "p50_ms": 0, "p99_ms": 0})


def thr(r, unit):
    return r["ops_per_s"] if unit == "ops/s" else r["mib_per_s"]


def cpu_ms_per_op(sysrun, key, op, clk):
    ops = res(sysrun, key, op)["ops"]
    return sysrun[key]["cpu_ticks"] * 1000.0 / clk / ops if ops else float("nan")


def mm(xs, nd):
    return f"{statistics.median(xs):,.{nd}f} ({min(xs):,.{nd}f}–{max(xs):,.{nd}f})"


def main():
    src, doc = sys.argv[1], sys.argv[2]
    run = json.load(open(src))
    m, clk = run["machine"], run["clk_tck"]
    rounds = by_system(run["rounds"])
    where = run.get("fs_desc") or "the repository's filesystem"
    have = lambda key: all(key in r["openlake"] and key in r["minio"] for r in rounds)
    tls = run.get("tls", False)
    transport = ("HTTPS (TLS=1: a self-signed certificate, the same for both)" if tls
                 else "plain HTTP")
    sdk_put = next((r[s][k]["load"].get("put_payload") for r in rounds for s in r
                    for k in ("put_64m_sdk", "get_64m_sdk") if k in r[s]), None)
    fresh = ("a filesystem made afresh before each server start, `FS=xfs`" if run.get("fs") == "xfs"
             else "wiped before each server start")
    lines = [
        f"Machine: {m['cpu']}, {m['cores']} cores, kernel {m['kernel']}, {m['filesystem']}, "
        f"{m['mem_gib']} GiB, a shared VM (other work may run beside the benchmark: "
        "absolute figures are noisy; the ratios come from the same rounds). "
        f"OpenLake `{run['openlake']}` (`make all`, -O2) vs MinIO `{run['minio_module'] or run['minio']}` "
        f"(`go install github.com/minio/minio@latest`, {run['go']}). Command: `bash bench/store/run_s3.sh` "
        f"(part of `make bench-store`). Raw data: `{src}` (not committed).",
        "",
        f"Setup, the same for both: four drive directories `build/bench/s3/d1..d4` on {where} "
        f"({fresh}); one erasure set of 4, 2 data + 2 parity "
        "(OpenLake's default parity for 4 drives, docs/store.md; MinIO's default EC:2 for 4 drives), "
        f"write quorum 3 on both; {transport} on loopback, SigV4, the same credentials "
        "(`OPENLAKE_ACCESS_KEY`/`_SECRET_KEY`, `MINIO_ROOT_USER`/`_PASSWORD`). Server on one core: "
        f"`taskset -c {run['scpu']}`, `openlaked --mode s3 --threads 1`, MinIO's Go runtime sees one CPU "
        "(its only setting: `MINIO_ROOTDRIVE_THRESHOLD_SIZE=1`, since it refuses directories on the "
        f"root filesystem otherwise). Load generator on `taskset -c {run['ccpu']}`: "
        "`bench/store/s3load`, a warp-style closed loop, with one of two clients, each with its "
        f"default options: MinIO's own client library (minio-go {run['minio_go']}: over HTTP every "
        "64 KiB chunk signed, aws-chunked, multipart in 16 MiB parts above 16 MiB; every row but "
        "those marked AWS SDK) and the AWS SDK for Go v2 (service/s3 "
        f"{run.get('aws_sdk_s3') or '–'}, rows marked AWS SDK: one PutObject of 64 MiB, "
        + ("aws-chunked with the CRC32 in a trailer, its HTTPS default"
           if tls else "over HTTP a signed payload, the body's SHA-256 in x-amz-content-sha256, "
           "with an x-amz-checksum-crc32 header; in the rows marked AWS SDK the generator hands "
           "the SDK both values, finished per body from a saved state of the bytes all bodies "
           "share (s3load `-prehash`: the same request on the wire, without the generator's one "
           "core reading each 64 MiB body once more before sending it), in the row marked "
           "hashing on the generator the SDK computes them itself, its default, and the "
           "generator's core is what that row measures")
        + (f" (recorded: `{sdk_put}`)" if sdk_put else "")
        + "; GETs with checksum mode on, the SDK checking the body against the whole-object "
        "CRC32 each server answers with); region us-east-1. MinIO's load tool warp was the plan, but the "
        "Go module proxy refuses `github.com/minio/warp` here. Every GET checks the body's length and "
        "the object index written at both ends; each worker's buffers are made and touched before "
        "a phase's clock starts (since 216117e: before, each worker's first GET paid the "
        "generator's own page faults, tens of ms at 64 MiB). The VM's free page reporting "
        f"(virtio-balloon): {run.get('vm_page_reporting', 'as the VM had it')} for the run "
        "(`VM_PAGE_REPORTING`, bench/store/run_s3.sh; since 19ca5b0, below).",
        "",
        "Durability: before it answers a PUT, OpenLake makes every shard file, the metadata file "
        "and the object directory durable, by default with one `syncfs` per filesystem shared by "
        "every write waiting (`store_sync = \"syncfs\"`, docs/store.md; before 7e1e85c an fsync of "
        "each); MinIO writes shards with O_DIRECT + fdatasync and "
        "`xl.meta` with O_DSYNC (or O_DIRECT + fdatasync when large), without directory fsyncs "
        "(its defaults).",
        "",
        f"Each phase: {run['conc']} concurrent requests ({run['conc_big']} at 64 MiB), closed loop (at "
        f"saturation, no offered-load limit) for {run['dur']} ({run['dur_big']} at 64 MiB); GET and "
        "mixed phases read 1000 / 64 / 4 / 200 objects uploaded and read once each before the "
        "phase (neither measured: s3load `-warm`, since 2026-12-03, so a phase measures reads of "
        "objects read before, as a long run does; the first reads are measured on their own, "
        "below); "
        "every phase's objects are deleted after it, and the drives' filesystem synced "
        "(`sync -f`, since 2026-12-04: what the deletions left to do is not done during "
        "the next phase). "
        f"One warm-up round, then {len(rounds)} rounds alternating which system goes first. "
        "Throughput and latency are medians over rounds; the ratio is OpenLake / MinIO per round, "
        "median (min–max). Latency is client-side per request. Server CPU is the server process's "
        "utime + stime (all threads, io_uring workers included) over the phase, divided by its "
        "completed requests.",
        "",
        "| workload | unit | OpenLake | MinIO | ratio | goal | p50 ms OL / MinIO | p99 ms OL / MinIO "
        "| p99 ratio (goal ≤ 0.5) | server CPU ms/op OL / MinIO | errors OL / MinIO |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    met, missed = [], []
    for key, label, op, unit, goal in ROWS:
        if not have(key):
            continue
        ol = [res(r["openlake"], key, op) for r in rounds]
        mi = [res(r["minio"], key, op) for r in rounds]
        t_ol = [thr(x, unit) for x in ol]
        t_mi = [thr(x, unit) for x in mi]
        ratio = [a / b if b else float("inf") for a, b in zip(t_ol, t_mi)]
        p99r = [a["p99_ms"] / b["p99_ms"] if b["p99_ms"] else float("inf") for a, b in zip(ol, mi)]
        cpu_ol = [cpu_ms_per_op(r["openlake"], key, op, clk) for r in rounds]
        cpu_mi = [cpu_ms_per_op(r["minio"], key, op, clk) for r in rounds]
        err_ol = sum(x["errors"] for x in ol)
        err_mi = sum(x["errors"] for x in mi)
        med = statistics.median
        nd = 0 if unit == "ops/s" else 1
        g_thr = goal is not None and med(ratio) >= goal
        g_p99 = med(p99r) <= 0.5
        if goal is not None:
            (met if g_thr else missed).append(f"{label.split(' (')[0]} ≥ {goal}×")
            (met if g_p99 else missed).append(f"{label.split(' (')[0]} p99")
        goal_txt = ("– (generator-bound)" if goal is None
                    else f"≥ {goal}×: {'met' if g_thr else '**not met**'}")
        p99_txt = ("" if goal is None else f": {'met' if g_p99 else '**not met**'}")
        lines.append(
            f"| {label} | {unit} | {med(t_ol):,.{nd}f} | {med(t_mi):,.{nd}f} | {mm(ratio, 2)} "
            f"| {goal_txt} "
            f"| {med([x['p50_ms'] for x in ol]):.2f} / {med([x['p50_ms'] for x in mi]):.2f} "
            f"| {med([x['p99_ms'] for x in ol]):.2f} / {med([x['p99_ms'] for x in mi]):.2f} "
            f"| {mm(p99r, 2)}{p99_txt} "
            f"| {med(cpu_ol):.3f} / {med(cpu_mi):.3f} | {err_ol} / {err_mi} |")
    rate_keys = [k for k in ("get_4k_rate", "put_1m_rate") if have(k)]
    lines += [] if not rate_keys else [
        "",
        f"Latency at a fixed offered load below both systems' saturation ({run['conc']} workers on a "
        f"schedule, {run.get('dur_rate', run['dur'])} per round; a request's latency counts from "
        "its scheduled time, so queueing behind a slow request is included):",
        "",
        "| workload | offered /s | achieved /s OL / MinIO | p50 ms OL / MinIO | p99 ms OL / MinIO "
        "| p999 ms OL / MinIO | p99 ratio (goal ≤ 0.5) | server CPU ms/op OL / MinIO | errors OL / MinIO |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key, label, op, offered in (("get_4k_rate", "GET 4 KiB", "get", run["rate_get"]),
                                    ("put_1m_rate", "PUT 1 MiB", "put", run["rate_put"])):
        if not have(key):
            continue
        ol = [res(r["openlake"], key, op) for r in rounds]
        mi = [res(r["minio"], key, op) for r in rounds]
        med = statistics.median
        p99r = [a["p99_ms"] / b["p99_ms"] if b["p99_ms"] else float("inf") for a, b in zip(ol, mi)]
        g_p99 = med(p99r) <= 0.5
        (met if g_p99 else missed).append(f"{label} p99 at {offered}/s")
        both = lambda f, nd: f"{med([x[f] for x in ol]):,.{nd}f} / {med([x[f] for x in mi]):,.{nd}f}"
        lines.append(
            f"| {label} | {offered:,} | {both('ops_per_s', 0)} | {both('p50_ms', 2)} | {both('p99_ms', 2)} "
            f"| {both('p999_ms', 2)} | {mm(p99r, 2)}: {'met' if g_p99 else '**not met**'} "
            f"| {med([cpu_ms_per_op(r['openlake'], key, op, clk) for r in rounds]):.3f} / "
            f"{med([cpu_ms_per_op(r['minio'], key, op, clk) for r in rounds]):.3f} "
            f"| {sum(x['errors'] for x in ol)} / {sum(x['errors'] for x in mi)} |")
    cold = [r for r in rounds if "get_64m_cold" in r["openlake"] and "get_64m_cold" in r["minio"]]
    if cold:
        ol = [res(r["openlake"], "get_64m_cold", "get") for r in cold]
        mi = [res(r["minio"], "get_64m_cold", "get") for r in cold]
        med = statistics.median
        ratio = [a["mib_per_s"] / b["mib_per_s"] if b["mib_per_s"] else float("inf")
                 for a, b in zip(ol, mi)]
        slow = [a["p999_ms"] / b["p999_ms"] if b["p999_ms"] else float("inf") for a, b in zip(ol, mi)]
        # the drive's ceiling, measured by fio in each system's round just before its reads
        ceil_ol = [r["openlake"]["get_64m_cold"].get("ceiling_mib_per_s") for r in cold]
        ceil_mi = [r["minio"]["get_64m_cold"].get("ceiling_mib_per_s") for r in cold]
        have_ceil = all(ceil_ol) and all(ceil_mi)
        g_thr, g_slow = med(ratio) >= 2, med(slow) <= 0.5
        frac_ol = frac_mi = floor_ol = None
        if have_ceil:
            frac_ol = [a["mib_per_s"] / c for a, c in zip(ol, ceil_ol)]
            frac_mi = [b["mib_per_s"] / c for b, c in zip(mi, ceil_mi)]
            # all reads at once share the drive: none can end before the
            # bytes of all of them have been read at the ceiling's rate
            mib = run["conc_big"] * 64
            floor_ol = [a["p999_ms"] / (mib / c * 1000) for a, c in zip(ol, ceil_ol)]
            g_thr = g_thr or med(frac_ol) >= CEILING_FRACTION
            g_slow = g_slow or med(floor_ol) <= 1 / CEILING_FRACTION
        (met if g_thr else missed).append("GET 64 MiB first reads ≥ 2× or at the drive's ceiling")
        (met if g_slow else missed).append("GET 64 MiB first reads, slowest")
        both = lambda f, nd: f"{med([x[f] for x in ol]):,.{nd}f} / {med([x[f] for x in mi]):,.{nd}f}"
        lines += [
            "",
            f"First reads, cold: {run['conc_big']} objects of 64 MiB uploaded, then `sync` and "
            "`POSIX_FADV_DONTNEED` on every file under the drive directories, then all read at "
            "once, each once (s3load `-op first`), so every byte comes from the drives (with "
            "`FS=xfs` they sit on a loop device with direct I/O: the host's page cache does not "
            "hold them either). MiB/s over the "
            "reads; the slowest read of each round (of four, so no p99), its ratio per round. "
            "These reads are bound by the drive, not by the server, so each round also measures "
            "the drive's ceiling just before the reads (fio reading the data shards those reads "
            "need, 2 files of 32 MiB an object, all at once, on the same filesystem, buffered 4 MiB "
            "reads after their pages were dropped, the best of three): a goal counts as "
            f"met at {CEILING_FRACTION:.0%} of the ceiling (throughput), or when the slowest read "
            f"takes at most {1 / CEILING_FRACTION:.2f}× the time the ceiling needs for all "
            "the reads' bytes, since no server can beat the drive:",
            "",
            "| workload | OpenLake MiB/s | MinIO MiB/s | drive ceiling MiB/s (fio) "
            "| of the ceiling OL / MinIO | ratio | goal | p50 ms OL / MinIO "
            "| slowest ms OL / MinIO | slowest ratio (goal ≤ 0.5) | slowest OL / ceiling's time "
            "| errors OL / MinIO |",
            "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|",
            f"| GET 64 MiB, first reads | {med([x['mib_per_s'] for x in ol]):,.1f} "
            f"| {med([x['mib_per_s'] for x in mi]):,.1f} "
            + (f"| {med(ceil_ol + ceil_mi):,.1f} | {med(frac_ol):.0%} / {med(frac_mi):.0%} "
               if have_ceil else "| – | – ")
            + f"| {mm(ratio, 2)} "
            f"| ≥ 2× or ≥ {CEILING_FRACTION:.0%} of the ceiling: {'met' if g_thr else '**not met**'} "
            f"| {both('p50_ms', 1)} | {both('p999_ms', 1)} "
            f"| {mm(slow, 2)}: {'met' if g_slow else '**not met**'} "
            + (f"| {mm(floor_ol, 2)} " if have_ceil else "| – ")
            + f"| {sum(x['errors'] for x in ol)} / {sum(x['errors'] for x in mi)} |",
        ]
    errs = sorted({e for r in run["rounds"] for s in r for k, v in s.items()
                   if isinstance(v, dict) for e in v["load"].get("first_errors") or []})
    lines += [
        "",
        f"Goals met: {', '.join(met) if met else 'none'}. Not met: {', '.join(missed) if missed else 'none'}.",
    ]
    if errs:
        lines += ["", "First errors the load generator saw: " + "; ".join(f"`{e}`" for e in errs[:6])]
    section = "\n".join(lines) + "\n"
    print(section)
    if doc == "-":
        return
    replace_section(doc, "store-s3", section,
                    heading="## Object store: S3 PUT / GET / mixed, OpenLake vs MinIO (issue 5)")


if __name__ == "__main__":
    main()
