#!/usr/bin/env bash
# Object store erasure coding on one core (issue 5): encode and reconstruct
# of 1 MiB stripes through ol_ec_* next to raw ISA-L over the same tables
# (the ceiling), and shard-block checksums (seal + verify) next to two raw
# XXH3-64 passes; k+m = 4+2, 8+4, 12+4; 5 rounds pinned to CPU 0. Writes
# bench/results/store-ec-*.json and the store-ec section of
# docs/benchmarks.md. About 40 s.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-5}; CPU=${CPU:-0}; SECS=${SECS:-0.4}
mkdir -p build/bench bench/results
cc -std=c17 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -Isrc bench/store/ec_bench.c \
   src/store/ec.c src/store/bitrot.c -o build/bench/ec_bench -lisal -lxxhash
ver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo unknown; }
out=bench/results/store-ec-$(date -u +%Y%m%dT%H%M%SZ).json
{
  echo '{"machine":'; python3 bench/http/machine.py
  echo ",\"isal\":\"$(ver libisal2)\",\"xxhash\":\"$(ver libxxhash0)\",\"secs\":$SECS,\"rounds\":["
  for r in $(seq "$ROUNDS"); do
    [ "$r" = 1 ] || echo ','
    taskset -c "$CPU" build/bench/ec_bench "$SECS"
  done
  echo ']}'
} > "$out"
echo "raw results: $out"
python3 - "$out" docs/benchmarks.md <<'PY'
import json, statistics, sys
src, doc = sys.argv[1], sys.argv[2]
run = json.load(open(src)); rounds = run["rounds"]; m = run["machine"]
def stat(xs):
    return statistics.median(xs), min(xs), max(xs)
def fmt(xs, nd=1):
    med, lo, hi = stat(xs)
    return f"{med:.{nd}f} ({lo:.{nd}f}–{hi:.{nd}f})"
def fmt_ratio(xs):
    med, lo, hi = stat(xs)
    return f"**{med:.2f}×** ({lo:.2f}–{hi:.2f})"
geos = [(c["k"], c["m"]) for c in rounds[0]["configs"]]
def cfg(r, k, mm):
    return next(c for c in r["configs"] if c["k"] == k and c["m"] == mm)
lines = [
    f"Machine: {m['cpu']}, {m['cores']} cores, kernel {m['kernel']}; ISA-L {run['isal']}, "
    f"libxxhash {run['xxhash']}. One core (CPU 0, `taskset`), {len(rounds)} rounds, "
    f"each operation {run['secs']} s per round with OpenLake and the ceiling alternating "
    f"(A B A B) after a warm-up; median (min–max) over rounds. "
    f"Command: `make bench-store` (`bash bench/store/run_ec.sh`). Raw data: `{src}` (not committed).",
    "",
    "1 MiB stripes, shard length `ol_ec_shard_len(1 MiB, k)`, buffers hot in cache. "
    "GB/s = 10⁹ stripe data bytes (k × shard length) per second: data in for encode, "
    "sources read for reconstruct. Ceiling: raw ISA-L `ec_encode_data` over the same "
    "precomputed tables (encode tables; decode tables built once by the benchmark). "
    "Ours: `ol_ec_encode` / `ol_ec_reconstruct` (mask checks, source pick, decode-table "
    "cache lookup; every call here hits the cache). Lost shards are data shards "
    "(0, or 0..m−1); every rebuild is compared with the original bytes.",
    "",
    "| k+m | operation | OpenLake GB/s | raw ISA-L GB/s | OpenLake ÷ ISA-L |",
    "|---|---|---:|---:|---:|",
]
ops = [("encode", "encode_gbps", "encode_raw_gbps"),
       ("reconstruct, 1 data shard lost", "rec1_gbps", "rec1_raw_gbps"),
       ("reconstruct, m data shards lost", "recm_gbps", "recm_raw_gbps")]
for k, mm in geos:
    for name, a, b in ops:
        xa = [cfg(r, k, mm)[a] for r in rounds]; xb = [cfg(r, k, mm)[b] for r in rounds]
        ratio = [x / y for x, y in zip(xa, xb)]
        label = name.replace("m data", f"{mm} data")
        lines.append(f"| {k}+{mm} | {label} | {fmt(xa)} | {fmt(xb)} | {fmt_ratio(ratio)} |")
lines += ["",
          "Shard checksums (`bitrot.c`): `ol_bitrot_seal` then `ol_bitrot_verify` of every "
          "shard of the stripe, one block per shard; GB/s of shard bytes (k+m × shard length), "
          "each byte hashed twice. Ceiling: two raw `XXH3_64bits_withSeed` passes over the "
          "same bytes. Decode-table build: one `ol_ec_reconstruct` that misses the cache "
          "(9 patterns in turn, one more than the cache holds; length 0, so only the table "
          "build is timed).",
          "",
          "| k+m | shard bytes | seal+verify GB/s | 2× XXH3 GB/s | OpenLake ÷ XXH3 | decode-table build µs (cache miss) |",
          "|---|---:|---:|---:|---:|---:|"]
for k, mm in geos:
    xa = [cfg(r, k, mm)["bitrot_gbps"] for r in rounds]
    xb = [cfg(r, k, mm)["bitrot_raw_gbps"] for r in rounds]
    ratio = [x / y for x, y in zip(xa, xb)]
    us = [cfg(r, k, mm)["decode_build_us"] for r in rounds]
    lines.append(f"| {k}+{mm} | {cfg(rounds[0], k, mm)['shard_len']:,} | {fmt(xa)} | {fmt(xb)} | "
                 f"{fmt_ratio(ratio)} | {fmt(us, 2)} |")
lines += ["",
          "Reading it: the wrapper costs nothing measurable at 1 MiB stripes (ratios ≈ 1.00×), "
          "and a decode-table build on a cache miss (a few µs at 12+4) is small next to "
          "the ~30 µs of coding per stripe. Both `ol_ec_*` coding calls end with `vzeroupper`: "
          "ISA-L's AVX-512 kernels return with the upper vector state dirty (intel/isa-l#24), "
          "and on this machine libxxhash's SSE2 XXH3 run after them hashed at about 4.7 GB/s "
          "instead of 20 until that was added (the benchmark clears the state after the raw "
          "ISA-L runs too, so both sides of the checksum row are measured clean; "
          "`store_ec_clears_upper_vector_state` checks it with XGETBV). Checksums are now the "
          "larger cost on one core: sealing a stripe's k+m shards on PUT (half the seal+verify "
          "time) takes 2–4× as long as encoding it. libxxhash here is the SSE2 build; XXH3 "
          "inlined and compiled for AVX2 measured ~60 GB/s on this CPU (a possible follow-up)."]
section = "\n".join(lines) + "\n"
print(section)
sys.path.insert(0, "bench")
from docsection import replace_section
replace_section(doc, "store-ec", section, heading="## Object store: erasure coding (issue 5)")
PY
