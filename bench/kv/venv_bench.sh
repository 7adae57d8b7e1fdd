# Sourced by bench/kv/run_peers.sh and bench/cluster/netns.sh (from the
# repository root): fills the bench-only venv $VENV (default
# build/venv-bench, under the ignored build/) with Mooncake Store from PyPI,
# redis-py with hiredis, numpy, xxhash and this tree's openlake_client.
#   MOONCAKE_PKG: default mooncake-transfer-engine==0.3.13.post1 where the
#     CUDA driver (libcuda.so.1) is present, else its CPU-only build
#     mooncake-transfer-engine-non-cuda==0.3.13.post1 (the CUDA wheel's
#     store.so links libcuda.so.1 and libcudart.so.12 and cannot be imported
#     without them).
VENV=${VENV:-build/venv-bench}
MOONCAKE_VERSION=0.3.13.post1
if [ -z "${MOONCAKE_PKG:-}" ]; then
  if ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
    MOONCAKE_PKG=mooncake-transfer-engine==$MOONCAKE_VERSION
  else
    MOONCAKE_PKG=mooncake-transfer-engine-non-cuda==$MOONCAKE_VERSION
  fi
fi
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
PIP=("$VENV/bin/pip" install -q --disable-pip-version-check)
# The CUDA and CPU-only Mooncake wheels both provide the `mooncake` module:
# keep only the one asked for.
want=${MOONCAKE_PKG%%==*}
for other in mooncake-transfer-engine mooncake-transfer-engine-non-cuda; do
  if [ "$other" != "$want" ] && "$VENV/bin/pip" show -q "$other" >/dev/null 2>&1; then
    "$VENV/bin/pip" uninstall -q -y "$other"
  fi
done
"${PIP[@]}" wheel 'setuptools>=77' numpy xxhash "$MOONCAKE_PKG" 'redis[hiredis]'
"${PIP[@]}" --no-build-isolation --force-reinstall --no-deps .
