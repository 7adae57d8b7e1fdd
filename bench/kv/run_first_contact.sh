#!/usr/bin/env bash
# KV first contact (bench/kv/first_contact.py says how): `openlake bench kv`
# on a freshly started daemon with the slab cold (kv_slab.populate = "off"),
# populated in the background while the bench runs (the default), and
# populated before it; then get and lookup while the background pass goes
# on over a slab larger than put fills (--overlap). Python standard library
# only (no venv). Knobs: ROUNDS=5 CAPACITY_GIB=2 BENCH_SECONDS=6
# OVERLAP_GIB=6 VALUE=262144 BATCH=32; extra arguments go to both runs
# (e.g. --base-bin DIR: another build's daemon and CLI beside, cold).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x build/openlaked ] || make
common=(--rounds "${ROUNDS:-5}" --value "${VALUE:-262144}" --batch "${BATCH:-32}")
python3 bench/kv/first_contact.py "${common[@]}" --capacity-gib "${CAPACITY_GIB:-2}" \
    --seconds "${BENCH_SECONDS:-6}" "$@"
exec python3 bench/kv/first_contact.py "${common[@]}" --capacity-gib "${OVERLAP_GIB:-6}" \
    --seconds 3 --systems off,background --overlap "$@"
