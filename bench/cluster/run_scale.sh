#!/usr/bin/env bash
# The cluster's KV pool: each node's CPU seconds per GB moved with 1, 2 and
# 4 nodes, over the node RPC's transports (TCP and UCX, UCX_TLS=tcp).
#
# Makes a bridge and four network namespaces plugged into it by veth pairs
# (bench/cluster/netns.sh; removed at exit, also on error), then runs
# bench/cluster/scale.py inside the first; it starts etcd and, per
# transport and node count, a fresh cluster (node i in namespace i), writes
# bench/results/cluster-scale-*.json and the cluster-scale section of
# docs/benchmarks.md.
#
# Needs root, iproute2 and etcd (scripts/deps.sh test). Fills the bench venv
# as run_pool.sh does (bench/kv/venv_bench.sh). Builds openlaked with `make`
# if it is missing.
#
# Knobs (environment): ROUNDS=3 MIB=256 VALUE=1048576 BATCH=32
#   TRANSPORTS=tcp,ucx (ucx needs a build with UCX; UCX_TLS defaults to tcp)
#   VENV=build/venv-bench
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/cluster/netns.sh
bench_setup run_scale.sh ip etcd
make_namespaces 4

NS_NAMES="${NS[*]}" NS_IPS="${IPS[*]}" ip netns exec "${NS[1]}" "$VENV/bin/python" bench/cluster/scale.py "$@"
