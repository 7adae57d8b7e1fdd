#!/usr/bin/env bash
# Where openlaked spends CPU under S3 load (issue 5): the same setup as
# run_s3.sh (4 drive directories, EC 2+2, openlaked --threads 1 on CPU 0,
# bench/store/s3load on CPU 1, 16 concurrent requests, 4 at 64 MiB), for PUT
# and GET of 4 KiB, 1 MiB and 64 MiB objects: `perf record -g` on the server for PROF_S (8 s)
# in the middle of each phase, then per phase the split of CPU between the
# event loop thread and the io_uring workers (iou-wrk: blocking opens,
# mkdirs, writes and fsyncs), the top symbols, and the entry points
# (io_uring opcodes, ol_* functions) with their inclusive share. Needs perf
# (Debian: linux-perf). Writes bench/results/store-s3-profile-*/ (perf.data
# and summary.txt per phase). Not part of make bench. About two minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."
PROF_S=${PROF_S:-8}; SCPU=${SCPU:-0}; CCPU=${CCPU:-1}; PORT=${PORT:-39300}
AK=benchadmin; SK=benchsecret-0123456789
command -v perf > /dev/null || { echo "profile_s3: perf missing (apt-get install linux-perf)" >&2; exit 1; }
root=$PWD/build/bench/s3prof
out=bench/results/store-s3-profile-$(date -u +%Y%m%dT%H%M%SZ)
rm -rf "$root"; mkdir -p "$root"/d{1,2,3,4} "$out"
OPENLAKE_ACCESS_KEY=$AK OPENLAKE_SECRET_KEY=$SK taskset -c "$SCPU" build/openlaked --mode s3 \
  --s3-addr 127.0.0.1:$PORT --kv-addr 127.0.0.1:$((PORT + 1)) --threads 1 \
  --data-dirs "$root/d1,$root/d2,$root/d3,$root/d4" > "$out/openlaked.log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$root"' EXIT
for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$PORT/_openlake/health/ready" && break; sleep 0.1; done
load() { taskset -c "$CCPU" build/go-bin/s3load -endpoint 127.0.0.1:$PORT -access-key $AK -secret-key $SK "$@"; }
for w in "put 4096 16 500" "get 4096 16 500" "put 1048576 16 500" "get 1048576 16 500" \
         "put 67108864 4 4" "get 67108864 4 4"; do
  read -r op size conc objs <<< "$w"
  extra=(-concurrent "$conc")
  if [ "$op" = get ]; then
    load -op prepare -size "$size" -concurrent "$conc" -objects "$objs" -noclear
    extra+=(-prepared -objects "$objs")
  fi
  load -op "$op" -size "$size" -duration $((PROF_S + 4))s -noclear "${extra[@]}" > "$out/$op-$size.json" &
  lp=$!
  sleep 2
  perf record -q -F 999 -g -p "$pid" -o "$out/$op-$size.data" -- sleep "$PROF_S" 2> /dev/null
  wait "$lp"
  {
    echo "== $op $size ($(python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['results']['$op']; print(f\"{r['ops_per_s']:.0f} ops/s, {r['errors']} errors\")" "$out/$op-$size.json"))"
    echo "-- samples by thread"
    perf report -i "$out/$op-$size.data" --no-children --sort comm --stdio -g none 2> /dev/null | grep -v '^#' | grep -v '^$' | awk 'NR <= 4'
    echo "-- top symbols (self)"
    perf report -i "$out/$op-$size.data" --no-children --sort dso,sym --stdio -g none 2> /dev/null | grep -v '^#' | grep -v '^$' | awk 'NR <= 15'
    echo "-- entry points (inclusive)"
    perf report -i "$out/$op-$size.data" --children --sort sym --stdio -g none 2> /dev/null \
      | grep -E '\[k\] (io_[a-z0-9]+|__ext4_new_inode|ext4_sync_file|net_rx_action)$|\[\.\] ol_' | awk 'NR <= 20'
  } | tee -a "$out/summary.txt"
  load -op clear
done
echo "profile: $out/summary.txt"
