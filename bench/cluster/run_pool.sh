#!/usr/bin/env bash
# The cluster's KV pool across two network namespaces: cross-node get and
# put GB/s of 32-key batches (256 KiB, 1 MiB, 2 MiB values) over the node
# RPC, over TCP and over UCX (UCX_TLS=tcp: the same veth link), against the
# ceiling of the same link (iperf3 between the namespaces) and against
# Mooncake Store between the same namespaces over TCP, in one run.
#
# Makes a bridge and two namespaces plugged into it by veth pairs
# (bench/cluster/netns.sh; removed at exit, also on error), then runs
# bench/cluster/pool.py inside namespace A; it starts etcd, per transport
# node A (in A) and node B (in B), iperf3, mooncake_master and
# mooncake_client (in B), writes bench/results/cluster-pool-*.json and the
# cluster-pool section of docs/benchmarks.md.
#
# Needs root, iproute2, etcd (scripts/deps.sh test) and iperf3 (scripts/deps.sh
# bench). Fills the bench venv as bench/kv/run_peers.sh does
# (bench/kv/venv_bench.sh). Builds openlaked with `make` if it is missing.
#
# Knobs (environment): ROUNDS=5 PASS_MIB=256 PASSES=1 BATCH=32 CAPACITY_GIB=2
#   SIZES=262144,1048576,2097152 IPERF_SECS=5 VENV=build/venv-bench
#   TRANSPORTS=tcp,ucx (the node RPC's; ucx needs a build with UCX; UCX_TLS
#   defaults to tcp; every UCX_* variable set reaches the nodes)
#   NODE_ARGS="" (more openlaked arguments for both nodes, e.g. to test a
#   setting; recorded with the results and shown in the section)
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/cluster/netns.sh
bench_setup run_pool.sh ip etcd iperf3
make_namespaces 2

NS_A=${NS[1]} NS_B=${NS[2]} IP_A=${IPS[1]} IP_B=${IPS[2]} IF_A=${IFS_IN[1]} \
  ip netns exec "${NS[1]}" "$VENV/bin/python" bench/cluster/pool.py "$@"
