#!/usr/bin/env bash
# Cluster incast (bench/cluster/incast.py says how): 16 writers on 4 nodes
# flood a fifth with values homed on it, for node RPC windows of 1 MiB,
# 8 MiB (the default) and 64 MiB (the most the configuration takes), and
# with credits off (cluster.rpc_credits = false): the target's peak
# memory, puts/s, GB/s delivered home, drops. Needs etcd (scripts/deps.sh
# test) and the venv (the Python client). Knobs:
# ROUNDS=5 TOTAL_MIB=256 WINDOWS=1048576,8388608,67108864,off.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x build/openlaked ] || make
exec .venv/bin/python bench/cluster/incast.py --rounds "${ROUNDS:-5}" \
    --total-mib "${TOTAL_MIB:-256}" --windows "${WINDOWS:-1048576,8388608,67108864,off}" "$@"
