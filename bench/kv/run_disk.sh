#!/usr/bin/env bash
# KV disk tier read bandwidth vs fio O_DIRECT randread on the same
# filesystem, in one run (bench/kv/disk_bench.py says how). Needs fio
# (scripts/deps.sh bench installs it) and the openlake_client package in
# .venv (the package installed from the tree here). The working set lives under build/
# unless BENCH_DIR names another directory (put it on the drive to measure).
# Knobs: ROUNDS=5 GIB=3 VALUE=1048576 QD=32; --batch N (keys per ACQUIRE, default 512),
# --ram-gib G (slab, default 1)
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x build/openlaked ] || make
command -v fio >/dev/null || { echo "fio missing: bash scripts/deps.sh bench" >&2; exit 1; }
.venv/bin/pip install -q --disable-pip-version-check --no-build-isolation .
exec .venv/bin/python bench/kv/disk_bench.py --rounds "${ROUNDS:-5}" --gib "${GIB:-3}" \
    --value "${VALUE:-1048576}" --qd "${QD:-32}" "$@"
