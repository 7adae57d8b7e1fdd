#!/usr/bin/env bash
# Listing through the S3 API end to end (issue 5): a bucket of N objects
# (default 1,000,000) in a real openlaked, listed with signed ListObjectsV2
# requests; the first page, a full listing, the index rebuild after a crash,
# the checkpoint and its load (bench/store/list_e2e.py says how). Goals:
# first page < 50 ms, 1M keys listed in < 10 s. Needs ~8 GiB of disk under
# build/bench for a minute or two (metadata files of 1M objects; removed
# after). Writes bench/results/store-list-e2e-*.json and the store-list-e2e
# section of docs/benchmarks.md. About 6 minutes (half of it deleting the
# 2M files and directories again).
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${N:-1000000}
make all >/dev/null
cc -std=c17 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -Isrc bench/store/gen_objects.c \
   build/libopenlake.a -o build/gen_objects -luring -lisal -lcrypto -lssl -lxxhash -lexpat \
   -lpthread -lm $(pkg-config --libs ucx 2>/dev/null || true)
.venv/bin/python bench/store/list_e2e.py "$N"
