#!/usr/bin/env bash
# Runs every test and ends with one line: "N passed, N failed, N skipped".
#   1. C unit tests, normal build          (build/unit_tests)
#   2. C unit tests, ASan+UBSan build      (build/asan/unit_tests)
#      and the object engine's tests again with an fsync per file
#      (OLT_STORE_SYNC=fsync; the default is the syncfs group commit)
#   3. allocation-count test, normal build (build/alloc_tests)
#   4. integration tests (pytest, real openlaked processes), ASan+UBSan build,
#      including the real-vLLM tests (marker vllm, tests/integration/test_vllm.py)
#   5. integration tests, normal build, without the vLLM ones (minutes each;
#      once is enough: vLLM talks to the daemon like any client)
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
echo "== allocation count per request (normal build)"
./build/alloc_tests -r "$res"

py=.venv/bin/python
for variant in asan normal; do
  bindir=build; [ "$variant" = asan ] && bindir=build/asan
  sel=(); [ "$variant" = normal ] && sel=(-m "not vllm")
  echo "== integration tests ($variant build: $bindir)"
  OPENLAKE_BIN_DIR="$bindir" "$py" -m pytest -q -p no:cacheprovider tests/integration "${sel[@]}" \
      --junitxml="build/pytest-$variant.xml" -o junit_suite_name="integration-$variant"
done
"$py" scripts/summarize.py "$res" build/pytest-asan.xml build/pytest-normal.xml
