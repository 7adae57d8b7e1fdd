#!/usr/bin/env bash
# The cluster's KV pool across two network namespaces: cross-node get and
# put GB/s of 32-key batches (256 KiB, 1 MiB, 2 MiB values) over the node
# RPC (TCP), against the ceiling of the same link (iperf3 between the
# namespaces) and against Mooncake Store between the same namespaces over
# TCP, in one run. UCX is not built: TCP only.
#
# Makes a bridge and two namespaces plugged into it by veth pairs (as
# tests/integration/test_cluster_netns.py does; removed at exit, also on
# error), then runs bench/cluster/pool.py inside namespace A; it starts etcd,
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
#   NODE_ARGS="" (more openlaked arguments for both nodes, e.g. to test a
#   setting; recorded with the results and shown in the section)
set -euo pipefail
cd "$(dirname "$0")/../.."
for t in ip etcd iperf3; do
  command -v $t >/dev/null || { echo "run_pool.sh: $t missing (scripts/deps.sh test / bench install it)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "run_pool.sh: network namespaces need root" >&2; exit 1; }
[ -x build/openlaked ] || make
. bench/kv/venv_bench.sh

tag=$(printf %04x $((RANDOM % 65536)))
br=olbb$tag
nsa=olb${tag}a nsb=olb${tag}b
used=$(ip -4 addr)
for _ in $(seq 100); do
  net=10.$((200 + RANDOM % 50)).$((1 + RANDOM % 254))
  grep -q "inet $net\." <<<"$used" || break
done
cleanup() {
  ip netns del "$nsa" 2>/dev/null || true    # their veth pairs go with them
  ip netns del "$nsb" 2>/dev/null || true
  ip link del "$br" 2>/dev/null || true
}
trap cleanup EXIT
ip link add "$br" type bridge
ip addr add "$net.1/24" dev "$br"
ip link set "$br" up
i=0
for ns in "$nsa" "$nsb"; do
  i=$((i + 1))
  ip netns add "$ns"
  ip link add "vhb$tag$i" type veth peer name "vnb$tag$i"
  ip link set "vnb$tag$i" netns "$ns"
  ip link set "vhb$tag$i" master "$br" up
  ip -n "$ns" addr add "$net.$((10 + i))/24" dev "vnb$tag$i"
  ip -n "$ns" link set "vnb$tag$i" up
  ip -n "$ns" link set lo up
done

NS_A=$nsa NS_B=$nsb IP_A=$net.11 IP_B=$net.12 IF_A=vnb${tag}1 \
  ip netns exec "$nsa" "$VENV/bin/python" bench/cluster/pool.py "$@"
