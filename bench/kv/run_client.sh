#!/usr/bin/env bash
# The KV service as a same-host client sees it (Unix socket + shared slab):
#   - round trips of 32-key RESERVE, COMMIT, LOOKUP (p50/p99/p999), with the
#     client on the server's core and on the other core, next to the floor of
#     a bare Unix-socket ping-pong pinned the same way;
#   - put/get GB/s of 256 KiB, 1 MiB and 2 MiB values against single-thread
#     memcpy of the same batches, in the same run: the raw data path (kv_bench
#     data: protocol and copies, no checksums) and the C client library
#     (kv_bench lib: ol_client_put/get, xxh3 of every value computed and
#     checked while copying), the two alternating.
# openlaked --threads 1 on CPU 0, 1 GiB slab: one daemon for the round trips
# and a fresh one for each data-path measurement (one size class holding the
# whole slab, and an eviction order no earlier run has shaped, so the bytes
# moved are DRAM-sized, never cache-resident); clients on CPU 1 (and CPU 0
# for the same-core round trips). ROUNDS (default 3).
# Writes bench/results/kv-client-*.json and the kv-client section of
# docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-3}; SECS=${SECS:-3}
mkdir -p build/bench bench/results
make -s build/libopenlake.a
cc -std=c17 -D_GNU_SOURCE -O2 -Iinclude -Isrc bench/kv/kv_bench.c -o build/bench/kv_bench \
    build/libopenlake.a -lisal -lxxhash -lpthread
cc -std=c17 -D_GNU_SOURCE -O2 bench/kv/pingpong.c -o build/bench/pingpong
SIZES="262144 1048576 2097152"
work=$(mktemp -d /tmp/olkv.XXXXXX)
pids=""
trap 'kill $pids 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
start() { # NAME: a daemon with its data dir in $work/NAME; its pid in $last
  set -- "$1" $(python3 -c 'import socket;s=[socket.socket() for _ in range(2)];[x.bind(("127.0.0.1",0)) for x in s];print(*[x.getsockname()[1] for x in s])')
  rm -rf "$work/$1"
  taskset -c 0 ./build/openlaked --threads 1 --s3-addr 127.0.0.1:$2 --kv-addr 127.0.0.1:$3 \
      --data-dirs "$work/$1" --kv-slab.capacity-gb 1 > "$work/$1.log" 2>&1 &
  last=$!
  pids="$pids $last"
  for _ in $(seq 100); do [ -S "$work/$1/kv.sock" ] && break; sleep 0.1; done
}
tok() { cat "$work/$1/kv.token"; }
start rtt
out=bench/results/kv-client-$(date -u +%Y%m%dT%H%M%SZ).json
{
  echo '{"machine":'; python3 bench/http/machine.py; echo ',"rounds":['
  for r in $(seq "$ROUNDS"); do
    [ "$r" = 1 ] || echo ','
    echo "{\"round\":$r,"
    for cpu in 0 1; do
      echo "\"floor_cpu$cpu\":$(build/bench/pingpong 0 $cpu),"
      echo "\"rtt_cpu$cpu\":$(taskset -c $cpu build/bench/kv_bench "$work/rtt/kv.sock" "$(tok rtt)" rtt "$SECS"),"
    done
    for mode in data lib; do
      [ $mode = data ] || echo ','
      echo "\"$mode\":["
      first=1
      for v in $SIZES; do
        [ $first = 1 ] || echo ','; first=0
        start data >&2
        taskset -c 1 build/bench/kv_bench "$work/data/kv.sock" "$(tok data)" $mode $v "$SECS"
        kill $last; wait $last 2>/dev/null || true
      done
      echo ']'
    done
    echo '}'
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
L += ["", "Data path through the shared slab, batches of 32 values, client on CPU 1, a fresh daemon per "
      "measurement (GB/s of value bytes, median of the rounds; fractions: per round, median (min–max)). "
      "*C client* is `ol_client_put`/`ol_client_get` (`kv_bench lib`): every value's xxh3-64 computed "
      "while it is copied into its slot and checked while it is copied out. *raw* is the protocol and the "
      "copies alone (`kv_bench data`, no checksums). Ceilings, same process, just before: single-thread "
      "memcpy of the same batches DRAM to DRAM, and (C client rows) also DRAM into and out of a "
      "`MAP_SHARED` memfd mapping like the slab's; a fraction is over the larger of the memcpy figures "
      "for that direction. Goal: ≥ 80% of memcpy.", "",
      "| value size | path | memcpy | memcpy to / from shm | put | get | put ÷ memcpy | get ÷ memcpy |",
      "|---:|---|---:|---|---:|---:|---|---|"]
for i, v in enumerate(rows[0]["data"]):
    for mode, name in (("lib", "C client"), ("data", "raw")):
        xs = [r[mode][i] for r in rows]
        pf = [x["put_frac"] for x in xs]; gf = [x["get_frac"] for x in xs]
        shm = (f"{med([x['memcpy_to_shm_gbs'] for x in xs]):.1f} / {med([x['memcpy_from_shm_gbs'] for x in xs]):.1f}"
               if "memcpy_to_shm_gbs" in xs[0] else "")
        L.append(f"| {v['value_bytes'] // 1024} KiB | {name} | {med([x['memcpy_gbs'] for x in xs]):.1f} | {shm} | "
                 f"{med([x['put_gbs'] for x in xs]):.1f} | {med([x['get_gbs'] for x in xs]):.1f} | "
                 f"**{med(pf):.2f}** ({min(pf):.2f}–{max(pf):.2f}) | **{med(gf):.2f}** ({min(gf):.2f}–{max(gf):.2f}) |")
section = "\n".join(L) + "\n"
print(section)
replace_section(doc, "kv-client", section, heading="## KV service: round trips and data path (Unix socket + shared slab)")
PY
