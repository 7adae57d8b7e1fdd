#!/usr/bin/env bash
# KV metadata path on one core: the shard index alone (index_bench) and the
# whole lifecycle (shard_bench: Lookup, Reserve+Commit with eviction), in
# batches of 32 keys, 5 rounds, pinned to CPU 0. Goal (issue 3):
# Lookup/Commit >= 5 million keys/s per core. Writes
# bench/results/kv-core-*.json and the kv-core section of docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-5}; CPU=${CPU:-0}
mkdir -p build/bench bench/results
src="src/kv/index.c src/kv/slab.c src/kv/shard.c src/kv/evict.c src/kv/proto.c"
for b in index_bench shard_bench; do
  cc -std=c17 -D_GNU_SOURCE -O2 -Isrc "bench/kv/$b.c" $src -o "build/bench/$b" -lisal -lxxhash
done
out=bench/results/kv-core-$(date -u +%Y%m%dT%H%M%SZ).json
{
  echo '{"machine":'; python3 bench/http/machine.py; echo ',"rounds":['
  for r in $(seq "$ROUNDS"); do
    [ "$r" = 1 ] || echo ','
    echo "{\"index\":$(taskset -c "$CPU" build/bench/index_bench 4194304 2),"
    echo "\"shard\":$(taskset -c "$CPU" build/bench/shard_bench 2)}"
  done
  echo ']}'
} > "$out"
echo "raw results: $out"
python3 - "$out" docs/benchmarks.md <<'PY'
import json, statistics, sys
src, doc = sys.argv[1], sys.argv[2]
run = json.load(open(src)); rows = run["rounds"]; m = run["machine"]
def col(f):
    xs = [f(r) for r in rows]
    return statistics.median(xs), min(xs), max(xs)
lines = [f"Machine: {m['cpu']}, {m['cores']} cores, kernel {m['kernel']}. One core (CPU 0), "
         f"{len(rows)} rounds of 2 s, median (min–max). Command: `make bench-kv`.", "",
         "| operation (batches of 32 keys) | million keys/s | goal |", "|---|---:|---:|"]
for name, f in [("index lookup, 4M entries", lambda r: r["index"]["lookup_keys_per_s"]),
                ("index insert+remove pairs, 4M entries", lambda r: r["index"]["insert_remove_pairs_per_s"]),
                ("shard Lookup, 131k entries", lambda r: r["shard"]["lookup_keys_per_s"]),
                ("shard Reserve+Commit on a full shard (evicts)", lambda r: r["shard"]["reserve_commit_keys_per_s"])]:
    med, lo, hi = col(f)
    goal = "≥ 5" if "Lookup" in name or "Commit" in name else ""
    lines.append(f"| {name} | **{med/1e6:.1f}** ({lo/1e6:.1f}–{hi/1e6:.1f}) | {goal} |")
section = "\n".join(lines) + "\n"
print(section)
sys.path.insert(0, "bench")
from docsection import replace_section
replace_section(doc, "kv-core", section, heading="## KV metadata path: index and shard lifecycle")
PY
