#!/usr/bin/env bash
# Runs every test and ends with one line: "N passed, N failed, N skipped".
#   1. C unit tests, normal build          (build/unit_tests)
#   2. C unit tests, ASan+UBSan build      (build/asan/unit_tests)
#      and the object engine's tests again with an fsync per file
#      (OLT_STORE_SYNC=fsync; the default is the syncfs group commit), again
#      (ASan build) with their odd drives another node's, every step on them
#      sent over a real node RPC on loopback (OLT_STORE_REMOTE=odd: the cluster
#      store's remote drives; a test of what only local drives do skips, saying
#      why), and again (ASan build) with their drives on a loop-mounted XFS,
#      where a PUT takes the ordered commit (root and mkfs.xfs; else said and
#      left out)
#   3. allocation-count test, normal build (build/alloc_tests)
#   4. integration tests (pytest, real openlaked processes), ASan+UBSan build,
#      including the real-vLLM tests (marker vllm, tests/integration/test_vllm.py)
#      and the crash-and-fault loop (marker crashloop, test_crash_loop.py,
#      about two minutes): the ASan build is the test build, with OL_ASSERTS
#      and the fault hook (OL_FAULTS) that the fault tests need
#      and the package test (marker package, test_package.py: the sdist and
#      wheel built from a fresh clone, installed in new venvs: its binaries
#      are its own, so once is enough)
#   5. integration tests, normal build, without the vLLM ones (minutes each;
#      once is enough: vLLM talks to the daemon like any client), without
#      the crash loop (it needs the hook; the other fault tests skip here),
#      without the package test and without the object store across hosts in
#      network namespaces (marker cluster_store_netns: minutes; once is enough)
# Called by `make test` after both builds exist. Exit status 1 if any failed.
set -u
cd "$(dirname "$0")/.."
res=build/test-results.txt
rm -f "$res" build/pytest-*.xml
: > "$res"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

echo "== unit tests (normal build)"
./build/unit_tests -r "$res"
echo "== unit tests (ASan+UBSan build)"
./build/asan/unit_tests -r build/test-results-asan.txt
sed 's/ unit:/ unit-asan:/' build/test-results-asan.txt >> "$res"; rm -f build/test-results-asan.txt
echo "== object engine unit tests with store_sync = fsync (normal build)"
OLT_STORE_SYNC=fsync ./build/unit_tests -r build/test-results-fsync.txt store_
sed 's/ unit:/ unit-fsync:/' build/test-results-fsync.txt >> "$res"; rm -f build/test-results-fsync.txt
echo "== object engine unit tests with half their drives another node's, over the node RPC (ASan+UBSan build)"
OLT_STORE_REMOTE=odd ./build/asan/unit_tests -r build/test-results-remote.txt store_
sed 's/ unit:/ unit-remote:/' build/test-results-remote.txt >> "$res"; rm -f build/test-results-remote.txt
echo "== object engine unit tests with their drives on XFS (ASan+UBSan build)"
xfs_img=build/xfs-tests.img xfs_dir=build/xfs-tests
if [ "$(id -u)" = 0 ] && command -v mkfs.xfs >/dev/null 2>&1; then
  mountpoint -q "$xfs_dir" && umount "$xfs_dir"
  rm -f "$xfs_img"; mkdir -p "$xfs_dir"
  if truncate -s 8G "$xfs_img" && mkfs.xfs -q -f "$xfs_img" && mount -o loop "$xfs_img" "$xfs_dir"; then
    TMPDIR="$PWD/$xfs_dir" ./build/asan/unit_tests -r build/test-results-xfs.txt store_
    sed 's/ unit:/ unit-xfs:/' build/test-results-xfs.txt >> "$res"; rm -f build/test-results-xfs.txt
    umount "$xfs_dir"
  else
    echo "(cannot loop-mount an XFS image here: left out)"
  fi
  rm -f "$xfs_img"; rmdir "$xfs_dir" 2>/dev/null
else
  echo "(needs root and mkfs.xfs: left out)"
fi
echo "== allocation count per request (normal build)"
./build/alloc_tests -r "$res"

py=.venv/bin/python
for variant in asan normal; do
  bindir=build; [ "$variant" = asan ] && bindir=build/asan
  sel=(); [ "$variant" = normal ] && sel=(-m "not vllm and not crashloop and not package and not cluster_store_netns")
  echo "== integration tests ($variant build: $bindir)"
  OPENLAKE_BIN_DIR="$bindir" "$py" -m pytest -q -p no:cacheprovider tests/integration "${sel[@]}" \
      --junitxml="build/pytest-$variant.xml" -o junit_suite_name="integration-$variant"
done
"$py" scripts/summarize.py "$res" build/pytest-asan.xml build/pytest-normal.xml
