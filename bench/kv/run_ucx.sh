#!/usr/bin/env bash
# The KV service to a client on another host, over TCP (kv_addr) and over
# UCX (kv_ucx_addr, the connector's openlake_device "ucx"), side by side:
# a fresh daemon per measurement (--threads 1 on CPU 0, 2 GiB slab) serving both listeners,
# `openlake bench kv` on CPU 1 putting and getting batches of 32 values of
# 256 KiB, 1 MiB and 2 MiB through the C client, every byte checked, TCP
# and UCX alternating in each round. UCX runs over its tcp transport here
# (UCX_TLS=tcp, loopback): the same wire as the TCP rows, so the ratio is
# what the daemon's UCX bridge (a socket pair per client, two more copies)
# and UCX's stream layer cost. ROUNDS (default 3), SECS per op (default 3).
# Writes bench/results/kv-ucx-*.json and the kv-ucx section of
# docs/benchmarks.md (--no-doc: not the doc).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-3}; SECS=${SECS:-3}
WRITE_DOC=1; [ "${1:-}" = --no-doc ] && WRITE_DOC=0
export UCX_TLS=tcp
make -s build/openlaked build/openlake
if ! ./build/openlake --json version | python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)["ucx"] else 1)'; then
  echo "run_ucx.sh: this build has no UCX (install libucx-dev and rebuild)" >&2; exit 1
fi
SIZES="262144 1048576 2097152"
work=$(mktemp -d /tmp/olkvu.XXXXXX)
pid=""
trap 'kill $pid 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
start() { # a fresh daemon (an empty slab, populated before it is measured)
  [ -n "$pid" ] && { kill -INT $pid; wait $pid || true; }
  read -r s3 kvp uxp < <(python3 -c 'import socket;s=[socket.socket() for _ in range(3)];[x.bind(("127.0.0.1",0)) for x in s];print(*[x.getsockname()[1] for x in s])')
  rm -rf "$work/d"
  taskset -c 0 ./build/openlaked --threads 1 --s3-addr 127.0.0.1:$s3 --kv-addr 127.0.0.1:$kvp \
      --kv-ucx-addr 127.0.0.1:$uxp --data-dirs "$work/d" --kv-slab.capacity-gb 2 > "$work/log" 2>&1 &
  pid=$!
  for _ in $(seq 300); do grep -q 'kv slab: populated' "$work/log" && break; sleep 0.1; done
}
out="$work/run.json"
{
  echo '{"machine":'; python3 bench/http/machine.py; echo ',"rounds":['
  for r in $(seq "$ROUNDS"); do
    [ "$r" -gt 1 ] && echo ','
    echo '['
    first=1
    for v in $SIZES; do
      for t in tcp ucx; do
        start
        addr=127.0.0.1:$kvp; [ $t = ucx ] && addr=ucx://127.0.0.1:$uxp
        [ $first = 1 ] || echo ','
        first=0
        echo "{\"size\":$v,\"transport\":\"$t\",\"ops\":"
        taskset -c 1 ./build/openlake --json bench kv --addr "$addr" --token-file "$work/d/kv.token" \
            --ns "b$r-$v-$t" --value-size "$v" --seconds "$SECS"
        echo '}'
      done
    done
    echo ']'
  done
  echo ']}'
} > "$out"
python3 - "$out" "$WRITE_DOC" <<'PY'
import json, statistics, sys
sys.path.insert(0, "bench")
from docsection import write_results
src, write_doc = sys.argv[1], sys.argv[2] == "1"
run = json.load(open(src))


def report(run, path):
    rows, m = run["rounds"], run["machine"]
    med = statistics.median

    def gbs(size, t, op):
        return [next(o["gb_per_s"] for o in x["ops"] if o["op"] == op)
                for r in rows for x in r if x["size"] == size and x["transport"] == t]
    L = [f"Machine: {m['cpu']}, {m['cores']} cores, kernel {m['kernel']}. One openlaked "
         f"(--threads 1, CPU 0) serving kv_addr and kv_ucx_addr; `openlake bench kv` on CPU 1, "
         f"batches of 32 values, {len(rows)} rounds alternating TCP and UCX, median GB/s of value "
         f"bytes (every byte checked), a fresh daemon for each. UCX over its tcp transport (UCX_TLS=tcp, loopback: the "
         f"same wire). Command: `bash bench/kv/run_ucx.sh` (part of `make bench-kv`); raw: "
         f"`{path}`.", "",
         "| value size | put TCP | put UCX | UCX ÷ TCP | get TCP | get UCX | UCX ÷ TCP |",
         "|---:|---:|---:|---:|---:|---:|---:|"]
    ratios = {}
    for size in sorted({x["size"] for x in rows[0]}):
        pt, pu = med(gbs(size, "tcp", "put")), med(gbs(size, "ucx", "put"))
        gt, gu = med(gbs(size, "tcp", "get")), med(gbs(size, "ucx", "get"))
        ratios[size] = {"put": pu / pt, "get": gu / gt}
        L.append(f"| {size >> 10} KiB | {pt:.2f} | {pu:.2f} | **{pu / pt:.2f}** | {gt:.2f} | "
                 f"{gu:.2f} | **{gu / gt:.2f}** |")
    return "\n".join(L) + "\n", ratios


write_results(".", "kv-ucx", run, report, "docs/benchmarks.md",
              "What it measures: a client of another host on the daemon's UCX listener "
              "(kv_ucx_addr) against one on its TCP listener, same daemon, same wire.\n\n",
              "## KV service over UCX against TCP", write_doc=write_doc)
PY
