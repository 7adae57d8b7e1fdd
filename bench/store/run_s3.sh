#!/usr/bin/env bash
# S3 object store, OpenLake vs MinIO side by side (issue 5): the same four
# drive directories under build/bench/s3 (wiped between systems), erasure
# 2 data + 2 parity on both (each one's default for a set of 4 drives), the
# same credentials, both servers pinned to CPU 0 on one core (openlaked
# --threads 1; MinIO's Go runtime sees one CPU), the load generator pinned to
# CPU 1. Load: bench/store/s3load (a warp-style closed-loop generator over
# MinIO's own client library, minio-go; warp itself is refused by the Go
# module proxy here): PUT and GET of 4 KiB, 1 MiB and 64 MiB objects and
# warp's default mixed workload (45% GET, 30% HEAD, 15% PUT, 10% DELETE) of
# 1 MiB objects; GET and mixed phases read every object once before their
# clock starts (s3load -warm), as a long run would, and the first reads are
# measured on their own (get_64m_cold: 4 objects of 64 MiB just uploaded,
# their files' pages dropped from the page cache, all read at once, each
# once). Goals: >= 2x MinIO's throughput at 1 MiB and above, >= 3x
# its ops/s at 4 KiB, p99 <= half of MinIO's. Latency also at a fixed
# offered load below both systems' saturation (GET 4 KiB at RATE_GET/s, PUT
# 1 MiB at RATE_PUT/s), for DUR_RATE each (20 s: ~300 PUTs, so p99 is not
# just the slowest one or two). The 64 MiB phases run DUR_BIG (20 s: ~1,100
# GETs of ours, 4 at a time; in 6 s the p99 of ~340 was the slowest round
# of four, and one slow round at the start set it). Server CPU time per op from
# /proc/<pid>/stat (utime + stime, all threads) around each measured phase.
# One warm-up round (short), then ROUNDS rounds alternating the order
# (OpenLake first in odd rounds, MinIO first in even ones). Writes
# bench/results/store-s3-*.json and the store-s3 section of
# docs/benchmarks.md. About 40 minutes with the defaults (5 rounds, as
# ../shared/BENCHMARKING.md asks; set DUR, DUR_BIG, DUR_RATE, ROUNDS lower to
# shorten it).
# Drives: FS=xfs (the default when run as root with loop devices and
# mkfs.xfs) puts the four directories on an XFS filesystem made for the
# run in a sparse 48 GiB image file (loop device with direct I/O, so the
# host's page cache does not hold the data twice), the filesystem MinIO
# documents for its drives; it is made afresh for each system's round, so
# neither inherits the other's freed inodes. FS=dir uses plain directories
# under build/bench/s3 on whatever filesystem holds the checkout.
#   ROUNDS=5 DUR=6s DUR_BIG=20s DUR_RATE=20s CONC=16 CONC_BIG=4 RATE_GET=1000 RATE_PUT=16 FS=xfs \
#   bash bench/store/run_s3.sh
# Two clients (s3load -client): minio-go for every phase, and the AWS SDK
# for Go v2 with its defaults for put_64m_sdk / get_64m_sdk (one PutObject
# of 64 MiB: over plain HTTP a signed payload, the body's SHA-256, with an
# x-amz-checksum-crc32 header; GETs with checksum mode on, the SDK checking
# the CRC32 the server answers with). In those two the generator hands the
# SDK each body's SHA-256 and CRC32 (s3load -prehash: the same request on
# the wire, without the generator's core hashing 64 MiB twice per PUT);
# put_64m_sdk_hash is the same PUT with the SDK hashing each body itself,
# a row bound by the generator's core. With TLS=1 the SDK's 64 MiB phases
# are left out (below) and put_16m_sdk_tls runs instead: the SDK's HTTPS
# upload, aws-chunked with the CRC32 in a trailer, of 16 MiB, the largest
# chunk MinIO takes. TLS=1 serves HTTPS from both servers
# (a self-signed certificate made for the run: openlaked --s3-tls-cert,
# MinIO --certs-dir) and every phase talks TLS. The SDK would then stream
# its uploads as aws-chunked with the CRC32 in a trailer
# (STREAMING-UNSIGNED-PAYLOAD-TRAILER), its HTTPS default, a 64 MiB body as
# one chunk, which MinIO refuses above 16 MiB: TLS=1 leaves the SDK phases
# out (s3load -client sdk -https shows that mode against one server).
# PHASES="put_64m get_64m" (names below) runs only those phases, in the
# order they always run; the raw JSON then holds only them and
# docs/benchmarks.md is not rewritten. TRACE=DIR also writes each measured
# phase's requests (s3load -trace) to DIR/SYSTEM-PHASE-UNIXTIME.trace.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/../.."
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
ROUNDS=${ROUNDS:-5}; DUR=${DUR:-6s}; DUR_BIG=${DUR_BIG:-20s}; WARM=${WARM:-2s}
DUR_RATE=${DUR_RATE:-20s}
CONC=${CONC:-16}; CONC_BIG=${CONC_BIG:-4}; SCPU=${SCPU:-0}; CCPU=${CCPU:-1}
RATE_GET=${RATE_GET:-1000}; RATE_PUT=${RATE_PUT:-16}; PORT=${PORT:-39100}
TLS=${TLS:-0}
AK=benchadmin; SK=benchsecret-0123456789
bin=build/go-bin
OLBIN=${OLBIN:-build/openlaked}   # OLBIN=PATH: another build of openlaked (an A/B)
[ -x "$OLBIN" ] || { echo "run_s3: $OLBIN missing (make all)" >&2; exit 1; }
[ -x $bin/minio ] && [ -x $bin/s3load ] || { echo "run_s3: run scripts/deps.sh bench first" >&2; exit 1; }
root=$PWD/build/bench/s3
img=$PWD/build/bench/s3.img
if [ -z "${FS:-}" ]; then
  FS=dir
  [ "$(id -u)" = 0 ] && command -v mkfs.xfs >/dev/null && command -v losetup >/dev/null &&
    [ -e /dev/loop-control ] && FS=xfs
fi
[ "$FS" = xfs ] || [ "$FS" = dir ] || { echo "run_s3: FS is xfs or dir" >&2; exit 1; }
drives=("$root/d1" "$root/d2" "$root/d3" "$root/d4")

unmount_drives() {  # also what an earlier round's subshell left mounted
  if mountpoint -q "$root" 2>/dev/null; then umount "$root"; fi
  local dev
  for dev in $(losetup -n -O NAME -j "$img" 2>/dev/null); do losetup -d "$dev" || true; done
  rm -f "$img"
}

fs_desc() {  # what the drives sit on, for the report
  if [ "$FS" = xfs ]; then echo "XFS on a loop device (direct I/O) over an image file on $(df --output=fstype "$PWD/build" | tail -1)"
  else echo "directories on $(df --output=fstype "$PWD/build" | tail -1) ($(findmnt -n -o OPTIONS -T "$PWD/build" | cut -c1-60))"; fi
}

# Fresh, empty drive directories for one system's round.
make_drives() {
  unmount_drives
  rm -rf "$root"; mkdir -p "$root"
  if [ "$FS" = xfs ]; then
    truncate -s 48G "$img"  # a 64 MiB PUT phase writes up to ~24 GiB of shards
    mkfs.xfs -q -f "$img"
    mount "$(losetup --direct-io=on -f --show "$img")" "$root"
  fi
  mkdir -p "${drives[@]}"
}
mkdir -p bench/results "$(dirname "$root")"
# TLS=1: one self-signed certificate for 127.0.0.1, the same for both
# servers (MinIO reads public.crt / private.key from its certs directory).
tls_dir=$PWD/build/bench/s3-tls scheme=http tls_ol=() tls_minio=() tls_load=()
if [ "$TLS" = 1 ]; then
  mkdir -p "$tls_dir"
  [ -s "$tls_dir/public.crt" ] ||
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj /CN=127.0.0.1 \
      -addext subjectAltName=IP:127.0.0.1 -keyout "$tls_dir/private.key" \
      -out "$tls_dir/public.crt" 2>/dev/null
  scheme=https
  tls_ol=(--s3-tls-cert "$tls_dir/public.crt" --s3-tls-key "$tls_dir/private.key")
  tls_minio=(--certs-dir "$tls_dir")
  tls_load=(-https)
fi

# Free page reporting (virtio-balloon; on the VMs this benchmark has run on)
# hands memory the guest frees back to the host, and the guest's next first
# touch of each such page then costs a fault on the host: 6-9.5 us per
# 4 KiB page here, against 2-3 for memory the host still backs. Each phase's
# deletions free gigabytes, and at the start of the next transfer-heavy
# phase the kernel's per-CPU page lists grow by hundreds of MiB (their
# high mark tunes itself), drawing those pages: the first half second of
# a GET 64 MiB phase then ran at a third of its speed on whichever server
# was sending fastest (docs/benchmarks.md). VM_PAGE_REPORTING=off (the
# default, as root where the knob exists) stops reporting for the run
# (page_reporting_order past the largest order) and touches the free memory
# once so the host backs it, then puts the setting back; both servers run
# under the same setting. VM_PAGE_REPORTING=keep leaves it as it is.
VM_PAGE_REPORTING=${VM_PAGE_REPORTING:-off}
pr_knob=/sys/module/page_reporting/parameters/page_reporting_order
pr_old=
restore_reporting() { if [ -n "$pr_old" ]; then echo "$pr_old" > "$pr_knob"; fi; }
if [ "$VM_PAGE_REPORTING" = off ] && [ -w "$pr_knob" ]; then
  pr_old=$(cat "$pr_knob")
  trap restore_reporting EXIT
  # one past the largest order the buddy allocator has (its columns)
  awk 'NR == 1 {print NF - 4}' /proc/buddyinfo > "$pr_knob"
  python3 -c 'import mmap
free = next(int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemFree:")) * 1024
n = max(free - (1 << 30), 0) // mmap.PAGESIZE * mmap.PAGESIZE
if n:
    m = mmap.mmap(-1, n)
    memoryview(m)[::mmap.PAGESIZE] = bytes([1]) * (n // mmap.PAGESIZE)
    m.close()'
fi
pr_state=keep
[ -n "$pr_old" ] && pr_state="off (was order $pr_old)"
if [ -n "${TRACE:-}" ]; then mkdir -p "$TRACE"; TRACE=$(cd "$TRACE" && pwd); fi
out=bench/results/store-s3-$(date -u +%Y%m%dT%H%M%SZ).json
log=$root.log
: > "$log"
pid=

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

stop_server() {
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=
}
trap 'stop_server; unmount_drives; restore_reporting' EXIT

start_server() {  # $1 = openlake | minio
  make_drives
  if [ "$1" = openlake ]; then
    OPENLAKE_ACCESS_KEY=$AK OPENLAKE_SECRET_KEY=$SK taskset -c "$SCPU" "$OLBIN" \
      --mode s3 --s3-addr 127.0.0.1:$PORT --kv-addr 127.0.0.1:$((PORT + 1)) --threads 1 \
      --data-dirs "$(IFS=,; echo "${drives[*]}")" "${tls_ol[@]}" >> "$log" 2>&1 &
    pid=$!; ready=/_openlake/health/ready
  else
    # MINIO_ROOTDRIVE_THRESHOLD_SIZE=1: these directories sit on the root
    # filesystem, which MinIO otherwise refuses as drives; nothing else set.
    MINIO_ROOT_USER=$AK MINIO_ROOT_PASSWORD=$SK MINIO_ROOTDRIVE_THRESHOLD_SIZE=1 \
      taskset -c "$SCPU" $bin/minio server --quiet --address 127.0.0.1:$PORT \
      --console-address 127.0.0.1:$((PORT + 1)) "${tls_minio[@]}" "$root/d{1...4}" >> "$log" 2>&1 &
    pid=$!; ready=/minio/health/ready
  fi
  for _ in $(seq 300); do
    curl -skf -o /dev/null "$scheme://127.0.0.1:$PORT$ready" && return 0
    kill -0 "$pid" 2>/dev/null || { echo "run_s3: $1 exited, see $log" >&2; exit 1; }
    sleep 0.1
  done
  echo "run_s3: $1 not ready, see $log" >&2; exit 1
}

load() { taskset -c "$CCPU" $bin/s3load -endpoint 127.0.0.1:$PORT -access-key $AK -secret-key $SK "${tls_load[@]}" "$@"; }

# The drives' ceiling for N reads of SIZE bytes at once: MiB/s of fio
# reading the data shards those reads need (2 of 2+2: 2N files of SIZE/2)
# from a folder beside the drive directories on the same filesystem, with
# buffered reads of 4 MiB after their pages are dropped (the kernel's
# readahead, as the servers' reads get it; O_DIRECT reads were slower here),
# the best of three. The files are written with O_DIRECT and synced first.
drive_ceiling() {  # size n
  local dir=$root/ceiling best=0 bw
  mkdir -p "$dir"
  fio --name=ceiling --directory="$dir" --numjobs=$(($2 * 2)) --size=$(($1 / 2)) --bs=1M \
      --rw=write --direct=1 --end_fsync=1 --ioengine=psync >/dev/null
  for _ in 1 2 3; do
    bw=$(fio --name=ceiling --directory="$dir" --numjobs=$(($2 * 2)) --size=$(($1 / 2)) --bs=4M \
        --rw=read --invalidate=1 --ioengine=psync --group_reporting --output-format=json |
      python3 -c 'import json, sys; print(round(json.load(sys.stdin)["jobs"][0]["read"]["bw"] / 1024, 1))')
    best=$(python3 -c "print(max($best, $bw))")
  done
  rm -rf "$dir"
  echo "$best"
}

# One measured phase: prints {"cpu_ticks":N,"load":{...}}; the objects it
# read were uploaded before (not measured, by the phase's own client) and
# are deleted after.
phase() {  # op size concurrency duration objects [s3load options]
  local op=$1 size=$2 conc=$3 dur=$4 n=$5 extra=("${@:6}") t0 res
  local client=(-client minio)
  if [[ " ${extra[*]} " == *" -client sdk "* ]]; then client=(-client sdk); fi
  if [[ " ${extra[*]} " == *" -prehash "* ]]; then client+=(-prehash); fi
  if [ "$op" != put ]; then
    load -op prepare -size "$size" -concurrent "$conc" -objects "$n" -noclear "${client[@]}"
    extra+=(-prepared)
  fi
  local ceiling=null
  if [ "$op" = first ]; then
    # the drives' ceiling in the same minute (drive_ceiling)
    ceiling=$(drive_ceiling "$size" "$conc")
    # cold: the drive files' pages leave the page cache (only theirs: a
    # global drop_caches would also evict the binaries, and the next
    # phases would wait for them to be read back)
    sync
    python3 -c 'import os, sys
for d, _, fs in os.walk(sys.argv[1]):
    for f in fs:
        try:
            fd = os.open(os.path.join(d, f), os.O_RDONLY)
        except OSError:
            continue
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)' "$root"
  fi
  if [ -n "${TRACE:-}" ]; then extra+=(-trace "$TRACE/$cur_sys-$cur_phase-$(date +%s).trace"); fi
  t0=$(cpu_ticks "$pid")
  res=$(load -op "$op" -size "$size" -concurrent "$conc" -duration "$dur" -objects "$n" -noclear "${extra[@]}")
  echo "{\"cpu_ticks\":$(( $(cpu_ticks "$pid") - t0 )),\"ceiling_mib_per_s\":$ceiling,\"load\":$res}"
  load -op clear
  # MinIO moves a deleted object into its drives' .minio.sys/tmp/.trash and
  # removes it later, in the background: three 64 MiB PUT phases in a row
  # (~8 GiB of shards each) filled the drives that way, and MinIO then reset
  # the next upload's connection. The trash goes here, between phases and
  # unmeasured, as OpenLake's deletions are done by the time clear returns.
  if [ "$cur_sys" = minio ]; then rm -rf "$root"/d*/.minio.sys/tmp/.trash/*; fi
  # the filesystem settled before the next phase's clock: what the deletions
  # left to do (XFS inactivates deleted inodes in the background) is done here
  sync -f "$root"
}

# The phases, in the order they run: name op size concurrency duration objects
# [s3load options] (duration: small, big or rate, one of system_round's).
ALL_PHASES="put_4k get_4k put_1m get_1m put_64m get_64m put_64m_sdk put_64m_sdk_hash get_64m_sdk put_16m_sdk_tls get_64m_cold mixed_1m get_4k_rate put_1m_rate"
PHASES=${PHASES:-$ALL_PHASES}
if [ "$TLS" = 1 ] && [[ " $PHASES " == *_sdk\ * || " $PHASES " == *_sdk_hash\ * ]]; then
  # Over HTTPS the SDK sends a 64 MiB body as one aws-chunked chunk, which
  # MinIO refuses ("chunk too big: choose chunk size <= 16MiB"): no
  # comparison to make, and the prepare of get_64m_sdk would fail the run.
  # put_16m_sdk_tls measures that mode at the largest size MinIO takes.
  echo "run_s3: TLS=1: leaving out the AWS SDK's 64 MiB phases (MinIO refuses its 64 MiB trailer upload)" >&2
  PHASES=$(for ph in $PHASES; do [[ $ph == *_sdk || $ph == *_sdk_hash ]] || printf '%s ' "$ph"; done)
fi
if [ "$TLS" != 1 ]; then  # the SDK's HTTPS mode: TLS=1 only
  PHASES=$(for ph in $PHASES; do [[ $ph == *_tls ]] || printf '%s ' "$ph"; done)
fi
if [ -z "${PHASES// /}" ]; then
  echo "run_s3: no phase left to run with TLS=$TLS (the *_tls phases need TLS=1; the SDK's 64 MiB ones TLS=0)" >&2
  exit 1
fi
for ph in $PHASES; do
  [[ " $ALL_PHASES " == *" $ph "* ]] || { echo "run_s3: no phase $ph (PHASES from: $ALL_PHASES)" >&2; exit 1; }
done
phase_args() {  # name -> op size concurrency duration-kind objects [options]
  case $1 in
    put_4k) echo put 4096 "$CONC" small 0 ;;
    get_4k) echo get 4096 "$CONC" small 1000 -warm ;;
    put_1m) echo put 1048576 "$CONC" small 0 ;;
    get_1m) echo get 1048576 "$CONC" small 64 -warm ;;
    put_64m) echo put 67108864 "$CONC_BIG" big 0 ;;
    get_64m) echo get 67108864 "$CONC_BIG" big 4 -warm ;;
    put_64m_sdk) echo put 67108864 "$CONC_BIG" big 0 -client sdk -prehash ;;
    put_64m_sdk_hash) echo put 67108864 "$CONC_BIG" big 0 -client sdk ;;
    get_64m_sdk) echo get 67108864 "$CONC_BIG" big 4 -warm -client sdk -prehash ;;
    put_16m_sdk_tls) echo put 16777216 "$CONC_BIG" big 0 -client sdk ;;
    get_64m_cold) echo first 67108864 "$CONC_BIG" big 4 ;;
    mixed_1m) echo mixed 1048576 "$CONC" small 200 -warm ;;
    get_4k_rate) echo get 4096 "$CONC" rate 1000 -warm -rate "$RATE_GET" ;;
    put_1m_rate) echo put 1048576 "$CONC" rate 0 -rate "$RATE_PUT" ;;
  esac
}

# Runs in a command substitution (a subshell): its own trap stops its server.
system_round() {  # system duration-small duration-big duration-rate
  local -A dur=([small]=$2 [big]=$3 [rate]=$4)
  local ph args json="{\"system\":\"$1\""
  trap stop_server EXIT
  start_server "$1"
  echo "run_s3: $1, phases of $2 / $3" >&2
  for ph in $ALL_PHASES; do
    [[ " $PHASES " == *" $ph "* ]] || continue
    read -r -a args <<< "$(phase_args "$ph")"
    args[3]=${dur[${args[3]}]}
    cur_sys=$1 cur_phase=$ph
    json+=",\"$ph\":$(phase "${args[@]}")"
  done
  stop_server
  echo "$json}"
}

{
  echo '{"machine":'; python3 bench/http/machine.py
  echo ",\"openlake\":\"$(git rev-parse --short=12 HEAD)\""
  echo ",\"minio\":\"$($bin/minio --version | head -1)\""
  echo ",\"minio_module\":\"$("$GO" version -m $bin/minio 2>/dev/null | awk '$1 == "mod" {print $3}')\""
  echo ",\"go\":\"$("$GO" version -m $bin/s3load 2>/dev/null | head -1 | awk '{print $2}')\""
  echo ",\"minio_go\":\"$("$GO" version -m $bin/s3load 2>/dev/null | awk '$2 == "github.com/minio/minio-go/v7" {print $3}')\""
  echo ",\"aws_sdk_s3\":\"$("$GO" version -m $bin/s3load 2>/dev/null | awk '$2 == "github.com/aws/aws-sdk-go-v2/service/s3" {print $3}')\""
  echo ",\"tls\":$([ "$TLS" = 1 ] && echo true || echo false)"
  echo ",\"clk_tck\":$(getconf CLK_TCK),\"conc\":$CONC,\"conc_big\":$CONC_BIG"
  echo ",\"rate_get\":$RATE_GET,\"rate_put\":$RATE_PUT"
  echo ",\"dur\":\"$DUR\",\"dur_big\":\"$DUR_BIG\",\"dur_rate\":\"$DUR_RATE\",\"scpu\":$SCPU,\"ccpu\":$CCPU"
  echo ",\"fs\":\"$FS\",\"fs_desc\":\"$(fs_desc)\",\"vm_page_reporting\":\"$pr_state\""
  a=$(system_round openlake "$WARM" "$WARM" "$WARM"); b=$(system_round minio "$WARM" "$WARM" "$WARM")
  echo ",\"warmup\":[$a,$b]"
  echo ',"rounds":['
  for r in $(seq "$ROUNDS"); do
    [ "$r" = 1 ] || echo ','
    if [ $((r % 2)) = 1 ]; then order=(openlake minio); else order=(minio openlake); fi
    a=$(system_round "${order[0]}" "$DUR" "$DUR_BIG" "$DUR_RATE")
    b=$(system_round "${order[1]}" "$DUR" "$DUR_BIG" "$DUR_RATE")
    echo "[$a,$b]"
  done
  echo ']}'
} > "$out.tmp"
mv "$out.tmp" "$out"
unmount_drives
rm -rf "$root"
echo "raw results: $out"
if [ "$PHASES" = "$ALL_PHASES" ]; then
  python3 bench/store/report_s3.py "$out" docs/benchmarks.md
else
  echo "run_s3: PHASES chosen, so docs/benchmarks.md is left as it is" >&2
fi
