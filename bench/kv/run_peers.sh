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
#   VENV=build/venv-bench, MOONCAKE_PKG: see bench/kv/venv_bench.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v redis-server >/dev/null; then
  if [ "$(id -u)" != 0 ]; then
    echo "redis-server missing: run  sudo apt-get install -y redis-server" >&2
    exit 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server ||
    { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server; }
fi

[ -x build/openlaked ] || make

. bench/kv/venv_bench.sh

exec "$VENV/bin/python" bench/kv/peers.py "$@"
