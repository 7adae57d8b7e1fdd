#!/usr/bin/env python3
"""Turns one wrk --latency report (stdin) into JSON fields (stdout).

argv: system conns cpu_ticks clk_tck
"""
import re
import sys

UNIT = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}


def dur(s):
    m = re.match(r"([\d.]+)(us|ms|s|m)$", s)
    return float(m.group(1)) * UNIT[m.group(2)]


text = sys.stdin.read()
system, conns, ticks, hz = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
total = int(re.search(r"(\d+) requests in", text).group(1))
lat = {p: dur(v) for p, v in re.findall(r"^\s+(50|75|90|99)%\s+(\S+)", text, re.M)}
errors = re.search(r"Socket errors: (.*)", text)
non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
cpu_s = ticks / hz
print(f'"system":"{system}","conns":{conns},"rps":{rps},"requests":{total},'
      f'"p50_us":{lat["50"] * 1e6:.1f},"p99_us":{lat["99"] * 1e6:.1f},'
      f'"server_cpu_us_per_req":{cpu_s * 1e6 / max(total, 1):.3f},'
      f'"errors":"{errors.group(1) if errors else ""}","non2xx":{int(non2xx.group(1)) if non2xx else 0}')
