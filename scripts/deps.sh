#!/usr/bin/env bash
# Installs what OpenLake needs on a Debian machine, and nothing already there.
#   deps.sh run    build + run: compiler, liburing, ISA-L, OpenSSL, xxhash, expat, UCX
#   deps.sh test   + clang/libFuzzer, curl, and a project-local .venv with pytest
#   deps.sh bench  + wrk, nginx, redis-server and fio (peers for bench/)
# As root it runs apt-get; otherwise it prints the exact apt-get line and exits 1.
set -euo pipefail
mode=${1:-run}
cd "$(dirname "$0")/.."

pkgs=(build-essential pkg-config git liburing-dev libisal-dev libssl-dev
      libxxhash-dev libexpat1-dev libucx-dev)
case "$mode" in
  run) ;;
  test) pkgs+=(clang libclang-rt-14-dev curl python3 python3-venv python3-dev) ;;
  bench) pkgs+=(wrk nginx-light curl python3 python3-venv fio redis-server) ;;
  *) echo "usage: $0 run|test|bench" >&2; exit 2 ;;
esac

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  line="apt-get install -y --no-install-recommends ${missing[*]}"
  if [ "$(id -u)" != 0 ]; then
    echo "openlake: missing system packages. Run as root:" >&2
    echo "  apt-get update && $line" >&2
    exit 1
  fi
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || apt-get update
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "$mode" = test ] || [ "$mode" = bench ]; then
  # (Re)fill the venv whenever tests/requirements.txt changed.
  if [ ! -x .venv/bin/python ] || ! cmp -s tests/requirements.txt .venv/requirements.installed; then
    echo "deps: filling .venv with test packages (tests/requirements.txt)"
    [ -x .venv/bin/python ] || python3 -m venv .venv
    .venv/bin/pip install -q --disable-pip-version-check -r tests/requirements.txt
    cp tests/requirements.txt .venv/requirements.installed
  fi
fi
if [ "$mode" = test ] || [ "$mode" = bench ]; then
  # The Python package (C extension over src/client), rebuilt from this tree.
  .venv/bin/pip install -q --disable-pip-version-check --no-build-isolation ./python
fi
if [ "$mode" = bench ] && ! cmp -s bench/requirements.txt .venv/bench-requirements.installed; then
  echo "deps: adding benchmark packages to .venv (bench/requirements.txt)"
  .venv/bin/pip install -q --disable-pip-version-check -r bench/requirements.txt
  cp bench/requirements.txt .venv/bench-requirements.installed
fi
