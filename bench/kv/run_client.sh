#!/usr/bin/env bash
# The KV service as a same-host client sees it (Unix socket + shared slab):
#   - round trips of 32-key RESERVE, COMMIT, LOOKUP (p50/p99/p999), with the
#     client on the server's core and on the other core, next to the floor of
#     a bare Unix-socket ping-pong pinned the same way;
#   - put/get GB/s of 256 KiB, 1 MiB and 2 MiB values against single-thread
#     memcpy of the same batches between DRAM buffers, in the same run.
# openlaked --threads 1 on CPU 0, 1 GiB slab. ROUNDS (default 3) alternate.
# Writes bench/results/kv-client-*.json and the kv-client section of
# docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-3}; SECS=${SECS:-3}
mkdir -p build/bench bench/results
cc -std=c17 -D_GNU_SOURCE -O2 -Isrc bench/kv/kv_bench.c src/kv/proto.c -o build/bench/kv_bench -lisal -lxxhash
cc -std=c17 -D_GNU_SOURCE -O2 bench/kv/pingpong.c -o build/bench/pingpong
work=$(mktemp -d /tmp/olkv.XXXXXX)
ports=$(python3 -c 'import socket;s=[socket.socket() for _ in range(2)];[x.bind(("127.0.0.1",0)) for x in s];print(*[x.getsockname()[1] for x in s])')
set -- $ports
taskset -c 0 ./build/openlaked --threads 1 --s3-addr 127.0.0.1:$1 --kv-addr 127.0.0.1:$2 \
    --data-dirs "$work/data" --kv-slab.capacity-gb 1 > "$work/d.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do [ -S "$work/data/kv.sock" ] && break; sleep 0.1; done
tok=$(cat "$work/data/kv.token")
out=bench/results/kv-client-$(date -u +%Y%m%dT%H%M%SZ).json
{
  echo '{"machine":'; python3 bench/http/machine.py; echo ',"rounds":['
  for r in $(seq "$ROUNDS"); do
    [ "$r" = 1 ] || echo ','
    echo "{\"round\":$r,"
    for cpu in 0 1; do
      echo "\"floor_cpu$cpu\":$(build/bench/pingpong 0 $cpu),"
      echo "\"rtt_cpu$cpu\":$(taskset -c $cpu build/bench/kv_bench "$work/data/kv.sock" "$tok" rtt "$SECS"),"
    done
    echo '"data":['
    first=1
    for v in 262144 1048576 2097152; do
      [ $first = 1 ] || echo ','; first=0
      taskset -c 1 build/bench/kv_bench "$work/data/kv.sock" "$tok" data $v "$SECS"
    done
    echo ']}'
  done
  echo ']}'
} > "$out"
echo "raw results: $out"
python3 - "$out" docs/benchmarks.md <<'PY'
import json, statistics, sys
sys.path.insert(0, "bench")
from docsection import replace_section
src, doc = sys.argv[1], sys.argv[2]
run = json.load(open(src)); rows = run["rounds"]; m = run["machine"]
med = statistics.median
L = [f"Machine: {m['cpu']}, {m['cores']} cores, kernel {m['kernel']}. openlaked --threads 1 on CPU 0, "
     f"1 GiB slab; {len(rows)} rounds, median. Command: `bash bench/kv/run_client.sh` (part of `make bench-kv`).", "",
     "Round trips of one 32-key frame over the Unix socket (µs), and the floor: a bare 600-byte "
     "Unix-socket ping-pong pinned the same way. Goal (issue 3): p99 ≤ 50 µs.", "",
     "| client CPU | frame | p50 | p99 | p999 | floor p50 | floor p99 |", "|---|---|---:|---:|---:|---:|---:|"]
for cpu in (0, 1):
    fl = [r[f"floor_cpu{cpu}"] for r in rows]
    for op in ("reserve", "commit", "lookup"):
        xs = [r[f"rtt_cpu{cpu}"][op] for r in rows]
        L.append(f"| {'same core' if cpu == 0 else 'other core'} | {op.upper()} | {med([x['p50_us'] for x in xs]):.1f} | "
                 f"**{med([x['p99_us'] for x in xs]):.1f}** | {med([x['p999_us'] for x in xs]):.1f} | "
                 f"{med([f['p50_us'] for f in fl]):.1f} | {med([f['p99_us'] for f in fl]):.1f} |")
L += ["", "Data path through the shared slab, batches of 32 values, client on CPU 1 (GB/s of value bytes; "
      "ceiling: single-thread memcpy of the same batches between DRAM buffers, same run). Goal: ≥ 80% of memcpy.", "",
      "| value size | memcpy | put | get | put ÷ memcpy | get ÷ memcpy |", "|---:|---:|---:|---:|---|---|"]
for i, v in enumerate(rows[0]["data"]):
    xs = [r["data"][i] for r in rows]
    pf = [x["put_frac"] for x in xs]; gf = [x["get_frac"] for x in xs]
    L.append(f"| {v['value_bytes'] // 1024} KiB | {med([x['memcpy_gbs'] for x in xs]):.1f} | "
             f"{med([x['put_gbs'] for x in xs]):.1f} | {med([x['get_gbs'] for x in xs]):.1f} | "
             f"**{med(pf):.2f}** ({min(pf):.2f}–{max(pf):.2f}) | **{med(gf):.2f}** ({min(gf):.2f}–{max(gf):.2f}) |")
section = "\n".join(L) + "\n"
print(section)
replace_section(doc, "kv-client", section, heading="## KV service: round trips and data path (Unix socket + shared slab)")
PY
