#!/usr/bin/env python3
"""Summarises an http-*.json run and rewrites the HTTP section of
docs/benchmarks.md (between <!-- http:begin --> and <!-- http:end -->).

Ratios are OpenLake / nginx per round (pairs measured back to back), then
the median with min-max over rounds.
"""
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from docsection import replace_section  # noqa: E402

src, doc = sys.argv[1], sys.argv[2]
run = json.load(open(src))
rows = run["rounds"]
m = run["machine"]


def med(xs):
    return statistics.median(xs)


lines = []
lines.append(f"Machine: {m['cpu']}, {m['cores']} cores, kernel {m['kernel']}, "
             f"{m['mem_gib']} GiB, filesystem {m['filesystem']}. "
             f"Raw data: `{os.path.relpath(src, os.path.dirname(os.path.abspath(doc)) + '/..')}`.\n")
lines.append("| connections | system | requests/s (median) | p50 µs | p99 µs | server CPU µs/request |")
lines.append("|---:|---|---:|---:|---:|---:|")
ratios = {}
for conns in sorted({r["conns"] for r in rows}, reverse=True):
    for system in ("openlake", "nginx"):
        rs = [r for r in rows if r["conns"] == conns and r["system"] == system]
        lines.append(f"| {conns} | {system} | {med([r['rps'] for r in rs]):,.0f} | "
                     f"{med([r['p50_us'] for r in rs]):.0f} | {med([r['p99_us'] for r in rs]):.0f} | "
                     f"{med([r['server_cpu_us_per_req'] for r in rs]):.2f} |")
    by_round = {}
    for r in rows:
        if r["conns"] == conns:
            by_round.setdefault(r["round"], {})[r["system"]] = r
    rps_ratio = [v["openlake"]["rps"] / v["nginx"]["rps"] for v in by_round.values() if len(v) == 2]
    p99_ratio = [v["openlake"]["p99_us"] / v["nginx"]["p99_us"] for v in by_round.values() if len(v) == 2]
    cpu_ratio = [v["openlake"]["server_cpu_us_per_req"] / max(v["nginx"]["server_cpu_us_per_req"], 1e-9)
                 for v in by_round.values() if len(v) == 2]
    ratios[conns] = (rps_ratio, p99_ratio, cpu_ratio)
lines.append("")
lines.append("| connections | requests/s OpenLake ÷ nginx | p99 OpenLake ÷ nginx (lower is better) | CPU/request OpenLake ÷ nginx |")
lines.append("|---:|---|---|---|")
for conns, (a, b, c) in ratios.items():
    lines.append(f"| {conns} | **{med(a):.2f}×** ({min(a):.2f}–{max(a):.2f}) | "
                 f"{med(b):.2f}× ({min(b):.2f}–{max(b):.2f}) | {med(c):.2f}× ({min(c):.2f}–{max(c):.2f}) |")
errs = [r for r in rows if r["errors"] or r["non2xx"]]
if errs:
    lines.append("")
    lines.append(f"Errors seen in {len(errs)} runs: " +
                 "; ".join(f"{r['system']} c={r['conns']}: {r['errors']} non2xx={r['non2xx']}" for r in errs))
section = "\n".join(lines) + "\n"
print(section)

replace_section(doc, "http", section)
