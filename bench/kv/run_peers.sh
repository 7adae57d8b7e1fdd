#!/usr/bin/env bash
# OpenLake vs Mooncake Store vs Redis on loopback: put and get GB/s of
# 256 KiB, 1 MiB and 2 MiB values in batches of 32 keys, same bytes for all,
# one run, rounds alternating the systems; ratios OpenLake/Mooncake and
# OpenLake/Redis. Servers on CPU 0, the Python client on CPU 1.
#
# Installs what it needs: redis-server (Debian), and into a bench-only venv
# (build/venv-bench, under the ignored build/): Mooncake Store from PyPI,
# redis-py with hiredis, numpy, and this tree's openlake_client. Builds
# openlaked with `make` if it is missing. Then runs bench/kv/peers.py, which
# writes bench/results/kv-peers-*.json and the kv-peers section of
# docs/benchmarks.md.
#
# Knobs (environment): ROUNDS=5 PASS_MIB=512 PASSES=2 BATCH=32 CAPACITY_GIB=3
#   SIZES=262144,1048576,2097152 SYSTEMS=openlake-unix,openlake-tcp,mooncake-tcp,redis-unix,redis-tcp
#   VENV=build/venv-bench
#   MOONCAKE_PKG: default mooncake-transfer-engine==0.3.13.post1 where the
#     CUDA driver (libcuda.so.1) is present, else its CPU-only build
#     mooncake-transfer-engine-non-cuda==0.3.13.post1 (the CUDA wheel's
#     store.so links libcuda.so.1 and libcudart.so.12 and cannot be imported
#     without them).
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${VENV:-build/venv-bench}
MOONCAKE_VERSION=0.3.13.post1
if [ -z "${MOONCAKE_PKG:-}" ]; then
  if ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
    MOONCAKE_PKG=mooncake-transfer-engine==$MOONCAKE_VERSION
  else
    MOONCAKE_PKG=mooncake-transfer-engine-non-cuda==$MOONCAKE_VERSION
  fi
fi

if ! command -v redis-server >/dev/null; then
  if [ "$(id -u)" != 0 ]; then
    echo "redis-server missing: run  sudo apt-get install -y redis-server" >&2
    exit 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server ||
    { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server; }
fi

[ -x build/openlaked ] || make

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
PIP=("$VENV/bin/pip" install -q --disable-pip-version-check)
# The CUDA and CPU-only Mooncake wheels both provide the `mooncake` module:
# keep only the one asked for.
want=${MOONCAKE_PKG%%==*}
for other in mooncake-transfer-engine mooncake-transfer-engine-non-cuda; do
  if [ "$other" != "$want" ] && "$VENV/bin/pip" show -q "$other" >/dev/null 2>&1; then
    "$VENV/bin/pip" uninstall -q -y "$other"
  fi
done
"${PIP[@]}" wheel 'setuptools>=77' numpy "$MOONCAKE_PKG" 'redis[hiredis]'
"${PIP[@]}" --no-build-isolation --force-reinstall --no-deps .

exec "$VENV/bin/python" bench/kv/peers.py "$@"
