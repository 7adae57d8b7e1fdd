#!/usr/bin/env bash
# The S3 ETag's MD5 on one core (issue 5): bench/store/md5_bench.c feeds
# 1-16 streams in step through base/md5.c's set, restricted to one kernel
# (x2, x3 interleaved scalar; v8-avx2, v8-avx512, v16-avx512 vector, where
# the CPU has them) or
# free to choose (auto), next to OpenSSL hashing one stream alone. Pinned
# to CPU 0; prints a table and writes bench/results/store-md5-*.json.
# Then one stream with the SHA-256 of each 64 KiB chunk beside its MD5 (a
# signed upload): OpenSSL's two hashes one after the other, and the one
# pass of base/md5sha.h. About 30 s.
set -euo pipefail
cd "$(dirname "$0")/../.."
CPU=${CPU:-0}; RUNS=${RUNS:-3}
mkdir -p build/bench bench/results
cc -std=c17 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -Isrc bench/store/md5_bench.c \
   src/base/md5.c src/base/md5sha.c src/base/sha256.c -o build/bench/md5_bench -lcrypto
out=bench/results/store-md5-$(date -u +%Y%m%dT%H%M%SZ).json
{ echo '{"machine":'; python3 bench/http/machine.py; echo ',"results":['
  taskset -c "$CPU" build/bench/md5_bench "$RUNS" | paste -sd, -
  echo ']}'; } > "$out"
python3 - "$out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"md5 on one core, {r['machine'].get('cpu', '?')}: GB/s by kernel and streams in step")
streams = sorted({x["streams"] for x in r["results"]})
print("kernel             " + "".join(f"{s:>8}" for s in streams))
for k in ["openssl", "x2", "x3", "v8-avx2", "v8-avx512", "v16-avx512", "auto",
          "openssl-md5+sha256", "one-pass"]:
    row = {x["streams"]: x["gbps"] for x in r["results"] if x["kernel"] == k}
    if row:
        print(f"{k:<19}" + "".join(f"{row[s]:>8.2f}" if s in row else f"{'':>8}" for s in streams))
PY
echo "raw results: $out"
