#!/usr/bin/env bash
# HTTP request rate and latency on /_openlake/health/live: OpenLake vs nginx.
#
# Same work for both: one worker (openlaked --threads 1, nginx
# worker_processes 1), both pinned to CPU 0, keep-alive on and unlimited,
# no access log; wrk pinned to CPU 1. Rounds alternate A B A B after a
# warm-up. Writes bench/results/http-<time>.json and rewrites the HTTP
# section of docs/benchmarks.md via report.py.
#
# Knobs (env): ROUNDS=5 SECS=5 CONNS="64 1" SERVER_CPU=0 CLIENT_CPU=1
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-5}; SECS=${SECS:-5}; CONNS=${CONNS:-"64 1"}
SERVER_CPU=${SERVER_CPU:-0}; CLIENT_CPU=${CLIENT_CPU:-1}
command -v wrk >/dev/null || { echo "wrk missing: run 'make bench' (installs it)"; exit 1; }
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
work=$(mktemp -d /tmp/olbench.XXXXXX)
mkdir -p bench/results
out=bench/results/http-$(date -u +%Y%m%dT%H%M%SZ).json
p_ol=$((20000 + RANDOM % 10000)); p_ng=$((p_ol + 1))

cat > "$work/nginx.conf" <<NG
worker_processes 1;
daemon off;
pid $work/nginx.pid;
error_log $work/nginx-error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000000;
    keepalive_timeout 60s;
    client_body_temp_path $work; proxy_temp_path $work; fastcgi_temp_path $work;
    uwsgi_temp_path $work; scgi_temp_path $work;
    server {
        listen 127.0.0.1:$p_ng reuseport backlog=4096;
        location = /_openlake/health/live { default_type text/plain; return 200 "ok\n"; }
    }
}
NG

taskset -c "$SERVER_CPU" ./build/openlaked --threads 1 --s3-addr 127.0.0.1:$p_ol \
    --data-dirs "$work/data" > "$work/ol.out" 2>&1 &
ol_pid=$!
taskset -c "$SERVER_CPU" "$NGINX" -c "$work/nginx.conf" -p "$work" > "$work/ng.out" 2>&1 &
ng_pid=$!
cleanup() { kill "$ol_pid" "$ng_pid" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
for p in $p_ol $p_ng; do
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$p/_openlake/health/live" >/dev/null && break; sleep 0.1; done
done

# CPU ticks (utime+stime) of a process and its children threads/workers.
cpu_ticks() { local t=0; for pid in "$@"; do
  [ -r /proc/$pid/stat ] && t=$((t + $(awk '{print $14+$15}' /proc/$pid/stat))); done; echo $t; }
ng_pids() { echo "$ng_pid $(pgrep -P "$ng_pid" | tr '\n' ' ')"; }

run_one() { # name port conns -> JSON object on stdout
  local name=$1 port=$2 c=$3 pids t0 t1 log
  if [ "$name" = openlake ]; then pids=$ol_pid; else pids=$(ng_pids); fi
  t0=$(cpu_ticks $pids)
  log=$(taskset -c "$CLIENT_CPU" wrk -t1 -c"$c" -d"${SECS}s" --latency \
        "http://127.0.0.1:$port/_openlake/health/live")
  t1=$(cpu_ticks $pids)
  python3 bench/http/parse_wrk.py "$name" "$c" "$((t1 - t0))" "$(getconf CLK_TCK)" <<<"$log"
}

echo "warm-up"
for c in $CONNS; do run_one openlake $p_ol "$c" >/dev/null; run_one nginx $p_ng "$c" >/dev/null; done
{
  echo '{"machine":'; python3 bench/http/machine.py; echo ',"rounds":['
  first=1
  for r in $(seq "$ROUNDS"); do
    for c in $CONNS; do
      for sys in openlake nginx; do
        port=$p_ol; [ "$sys" = nginx ] && port=$p_ng
        res=$(run_one "$sys" "$port" "$c")
        echo "round $r conns $c $sys: $res" >&2
        [ $first = 1 ] || echo ','; first=0
        echo "{\"round\":$r,$res}"
      done
    done
  done
  echo ']}'
} > "$out"
echo "raw results: $out"
python3 bench/http/report.py "$out" docs/benchmarks.md
