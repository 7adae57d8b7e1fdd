#!/usr/bin/env bash
# KV eviction policies on synthetic prefix-reuse traces: hit ratio vs cache
# size per workload (LRU vs S3-FIFO vs ARC), plus policy ops/s.
#
# Builds bench/kv/evict_trace.c with src/kv/evict.c (cc -O2), runs it pinned
# to one CPU, writes bench/results/evict-<time>-{runs,workloads}.csv and
# -machine.json, then bench/kv/plot_evict.py draws docs/kv-evict.png and
# rewrites the section of docs/benchmarks.md between
# <!-- kv-evict:begin --> and <!-- kv-evict:end -->.
#
# Knobs (env): SEEDS=3 REQUESTS=(per workload default) ROUNDS=1
#              FRACS=0.05,0.1,0.2,0.4 WORKLOADS=chat,rag,scan CPU=1
set -euo pipefail
cd "$(dirname "$0")/../.."
SEEDS=${SEEDS:-3}; ROUNDS=${ROUNDS:-1}; FRACS=${FRACS:-0.05,0.1,0.2,0.4}
WORKLOADS=${WORKLOADS:-chat,rag,scan}; CPU=${CPU:-1}
PY=${PY:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
"$PY" -c 'import matplotlib' 2>/dev/null || {
  echo "matplotlib missing: $PY -m pip install -r bench/requirements.txt" >&2; exit 1; }

work=$(mktemp -d /tmp/olevict.XXXXXX)
trap 'rm -rf "$work"' EXIT
cc -std=c17 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter -O2 \
   -Iinclude -Isrc bench/kv/evict_trace.c src/kv/evict.c -lm -o "$work/evict_trace"

mkdir -p bench/results
out=bench/results/evict-$(date -u +%Y%m%dT%H%M%SZ)
args=(-w "$WORKLOADS" -s "$SEEDS" -r "$ROUNDS" -f "$FRACS" -o "$out")
[ -n "${REQUESTS:-}" ] && args+=(-n "$REQUESTS")
pin=(); command -v taskset >/dev/null && taskset -c "$CPU" true 2>/dev/null && pin=(taskset -c "$CPU")
echo "running: ${pin[*]} evict_trace ${args[*]}"
"${pin[@]}" "$work/evict_trace" "${args[@]}"
python3 bench/http/machine.py > "$out-machine.json"
echo "raw results: $out-runs.csv $out-workloads.csv"
"$PY" bench/kv/plot_evict.py "$out" docs/benchmarks.md docs/kv-evict.png
