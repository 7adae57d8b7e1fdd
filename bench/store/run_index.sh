#!/usr/bin/env bash
# Object store listing index on one core (issue 5): a bucket of N = 1,000,000
# keys, two key sets ("dirs": dir%04u/file%06u.bin, 2000 folders of 500;
# "flat": random [a-z0-9] keys of 20..60 bytes), in memory: insert, get and
# remove rates, memory per key, the first page of 1000 and a whole listing
# paged through next markers as a client does, with and without the
# delimiter "/"; on disk (build/bench/tmp-index): puts with a group-commit
# flush every 1000, single-put flush latency, log replay, checkpoint and
# snapshot load. Goals: first page < 50 ms, whole listing of 1M keys in
# pages of 1000 < 10 s. 5 rounds pinned to CPU 0. Writes
# bench/results/store-index-*.json and the store-index section of
# docs/benchmarks.md. About a minute.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-5}; CPU=${CPU:-0}; N=${N:-1000000}
mkdir -p build/bench bench/results
cc -std=c17 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -Isrc bench/store/index_bench.c \
   src/store/index.c src/store/index_file.c -o build/bench/index_bench -lxxhash
tmp=build/bench/tmp-index
ver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo unknown; }
out=bench/results/store-index-$(date -u +%Y%m%dT%H%M%SZ).json
{
  echo '{"machine":'; python3 bench/http/machine.py
  echo ",\"xxhash\":\"$(ver libxxhash0)\",\"n\":$N,\"rounds\":["
  for r in $(seq "$ROUNDS"); do
    [ "$r" = 1 ] || echo ','
    echo "{\"dirs\":$(taskset -c "$CPU" build/bench/index_bench mem dirs "$N"),"
    echo "\"flat\":$(taskset -c "$CPU" build/bench/index_bench mem flat "$N"),"
    echo "\"build\":$(taskset -c "$CPU" build/bench/index_bench build "$tmp" "$N"),"
    echo "\"open\":$(taskset -c "$CPU" build/bench/index_bench open "$tmp")}"
  done
  echo ']}'
} > "$out"
rm -rf "$tmp"
echo "raw results: $out"
python3 - "$out" docs/benchmarks.md <<'PY'
import json, statistics, sys
src, doc = sys.argv[1], sys.argv[2]
run = json.load(open(src)); rounds = run["rounds"]; m = run["machine"]; n = run["n"]
def xs(part, key):
    return [r[part][key] for r in rounds]
def med(part, key):
    return statistics.median(xs(part, key))
def fmt(part, key, scale=1.0, nd=1):
    v = [x * scale for x in xs(part, key)]
    return f"{statistics.median(v):,.{nd}f} ({min(v):,.{nd}f}–{max(v):,.{nd}f})"
lines = [
    f"Machine: {m['cpu']}, {m['cores']} cores, kernel {m['kernel']}, {m['filesystem']}; "
    f"libxxhash {run['xxhash']}. One core (CPU 0, `taskset`), {len(rounds)} rounds, "
    f"median (min–max) over rounds. Command: `bash bench/store/run_index.sh` "
    f"(`bench/store/index_bench.c`, compiled `cc -O2`). Raw data: `{src}` (not committed).",
    "",
    f"A bucket of {n:,} keys inserted in random order. **dirs**: `dir%04u/file%06u.bin`, "
    f"2000 folders of {n // 2000:,} (22-byte keys); **flat**: random `[a-z0-9]` keys of 20–60 bytes "
    "(40 on average), no `/`. A page is `ol_index_list` with max-keys 1000 into a callback that reads "
    "every name and record; a whole listing starts each page at the previous page's next marker, as a "
    "client does. The plain twin `ol_index_list_ref` steps through a CommonPrefix group key by key "
    "instead of descending past it.",
    "",
    "| listing | dirs | flat | goal |",
    "|---|---:|---:|---:|",
    f"| first page, no delimiter, ms | {fmt('dirs','first_page_ms',1,3)} | {fmt('flat','first_page_ms',1,3)} | < 50 |",
    f"| first page, delimiter `/`, ms | {fmt('dirs','first_page_delim_ms',1,3)} | {fmt('flat','first_page_delim_ms',1,3)} | < 50 |",
    f"| same, plain twin (no group skip), ms | {fmt('dirs','first_page_delim_ref_ms',1,2)} | {fmt('flat','first_page_delim_ref_ms',1,3)} | |",
    f"| whole listing, {med('dirs','full_pages'):,.0f} pages of 1000, no delimiter, s | {fmt('dirs','full_s',1,3)} | {fmt('flat','full_s',1,3)} | < 10 |",
    f"| whole listing, delimiter `/`, s (pages: dirs {med('dirs','full_delim_pages'):,.0f} of CommonPrefixes, flat {med('flat','full_delim_pages'):,.0f}) | {fmt('dirs','full_delim_s',1,4)} | {fmt('flat','full_delim_s',1,3)} | < 10 |",
    f"| folder walk: root then every folder with `/`, {med('dirs','folder_walk_requests'):,.0f} requests, s | {fmt('dirs','folder_walk_s',1,3)} | | |",
    "",
    "| map and memory | dirs | flat |",
    "|---|---:|---:|",
    f"| insert, random order, million keys/s | {fmt('dirs','insert_random_keys_per_s',1e-6,2)} | {fmt('flat','insert_random_keys_per_s',1e-6,2)} |",
    f"| insert, key order, million keys/s | {fmt('dirs','insert_sorted_keys_per_s',1e-6,2)} | {fmt('flat','insert_sorted_keys_per_s',1e-6,2)} |",
    f"| get, random order, million keys/s | {fmt('dirs','get_random_keys_per_s',1e-6,2)} | {fmt('flat','get_random_keys_per_s',1e-6,2)} |",
    f"| remove, random order, million keys/s | {fmt('dirs','remove_random_keys_per_s',1e-6,2)} | {fmt('flat','remove_random_keys_per_s',1e-6,2)} |",
    f"| memory per key: RSS growth, bytes (goal < 150 at 40-byte keys) | {fmt('dirs','rss_bytes_per_key')} | {fmt('flat','rss_bytes_per_key')} |",
    f"| memory per key: the tree's own malloc count, bytes | {fmt('dirs','tree_bytes_per_key')} | {fmt('flat','tree_bytes_per_key')} |",
    f"| same, keys inserted in order | {fmt('dirs','sorted_tree_bytes_per_key')} | {fmt('flat','sorted_tree_bytes_per_key')} |",
    "",
    f"On disk (`{m['filesystem']}`, the repository's drive), dirs keys in random order:",
    "",
    "| durability | value |",
    "|---|---:|",
    f"| puts with a flush (write + fdatasync) every 1000, million keys/s | {fmt('build','put_flush1000_keys_per_s',1e-6,2)} |",
    f"| one flush of 1000 PUT frames, ms | {fmt('build','flush_1000_ms',1,3)} |",
    f"| one flush of a single PUT, µs (median of 200) | {fmt('build','flush_1_us')} |",
    f"| same, 99th percentile, µs | {fmt('build','flush_1_p99_us')} |",
    f"| log bytes per key | {statistics.median([r['build']['log_bytes'] / r['build']['n'] for r in rounds]):.1f} |",
    f"| open: log replay of {med('open','log_records'):,.0f} records, s | {fmt('open','replay_s',1,3)} |",
    f"| checkpoint: snapshot of {med('open','keys'):,.0f} keys written, fsynced, renamed; new log, s | {fmt('open','checkpoint_s',1,3)} |",
    f"| snapshot bytes per key | {statistics.median([r['open']['snapshot_bytes'] / r['open']['keys'] for r in rounds]):.1f} |",
    f"| open: snapshot load (checksum, parse, in-order insert), s | {fmt('open','snapshot_load_s',1,3)} |",
    "",
]
fp = max(med('dirs','first_page_ms'), med('flat','first_page_ms'), med('dirs','first_page_delim_ms'), med('flat','first_page_delim_ms'))
full = max(med('dirs','full_s'), med('flat','full_s'), med('flat','full_delim_s'))
lines.append(
    f"Reading it: the slowest first page ({fp:.3f} ms) is {50 / fp:,.0f}× inside the 50 ms goal and the "
    f"slowest whole listing ({full:.3f} s) {10 / full:,.0f}× inside the 10 s goal; a page costs one descent "
    "and a walk along linked leaves. With `/` on the dirs set each of the 1000 CommonPrefixes of a page is "
    "one descent to the folder's successor, where the plain twin walks all "
    f"{n // 2000 * 1000:,} keys under them ({med('dirs','first_page_delim_ref_ms') / med('dirs','first_page_delim_ms'):,.0f}× "
    "slower). Memory stays under the 150-byte goal because leaves store each key's bytes after the "
    "leaf's shared prefix and are allocated to fit; RSS exceeds the tree's own count by malloc's "
    "per-allocation overhead. Flush latency is this virtual disk's fdatasync; the engine pays one per "
    "group commit, not per key. Files are read from the page cache here (just written), so replay and "
    "snapshot load measure parsing and insertion, not the drive.")
section = "\n".join(lines) + "\n"
print(section)
sys.path.insert(0, "bench")
from docsection import replace_section
replace_section(doc, "store-index", section, heading="## Object store: listing index (issue 5)")
PY
