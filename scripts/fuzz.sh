#!/usr/bin/env bash
# Builds every libFuzzer target tests/fuzz/fuzz_*.c with clang
# (-fsanitize=fuzzer,address,undefined) against the library sources (built
# once for all targets) and runs
# each for $1 seconds (default 30), starting from its seed corpus
# tests/fuzz/seeds/<target>/ when present. Fails if any target finds a crash.
set -euo pipefail
secs=${1:-30}
cd "$(dirname "$0")/.."
out=build/fuzz
mkdir -p "$out"
lib_src=$(ls src/base/*.c src/rt/*.c src/http/*.c src/kv/*.c src/store/*.c src/s3/*.c src/net/*.c src/cluster/*.c 2>/dev/null)
common="-std=c17 -D_GNU_SOURCE -g -O1 -Iinclude -Isrc -fno-sanitize-recover=undefined"
# The library once, instrumented for coverage (fuzzer-no-link) and the
# sanitizers, all cores at once; each target then links against it.
objdir=$out/obj
rm -rf "$objdir"; mkdir -p "$objdir"
echo "fuzz: building the library"
printf '%s\n' $lib_src | xargs -P "$(nproc)" -I{} \
  sh -c 'clang $1 -fsanitize=fuzzer-no-link,address,undefined -c "$2" -o "$3/$(echo "$2" | tr / _).o"' \
  sh "$common" {} "$objdir"
rm -f "$out/libfuzz.a"
ar rcs "$out/libfuzz.a" "$objdir"/*.o
status=0
for t in tests/fuzz/fuzz_*.c; do
  name=$(basename "$t" .c)
  echo "fuzz: building $name"
  clang $common -fsanitize=fuzzer,address,undefined -o "$out/$name" "$t" "$out/libfuzz.a" \
    -luring -lisal -lcrypto -lssl -lxxhash -lexpat -lcurl -ljansson -lpthread -lm
  corpus="$out/corpus-$name"
  mkdir -p "$corpus"
  seeds=()
  [ -d "tests/fuzz/seeds/$name" ] && seeds=("tests/fuzz/seeds/$name")
  echo "fuzz: running $name for ${secs}s"
  if ! "$out/$name" -max_total_time="$secs" -print_final_stats=0 -artifact_prefix="$out/$name-" \
        "$corpus" "${seeds[@]}" > "$out/$name.log" 2>&1; then
    echo "fuzz: $name FAILED (see $out/$name.log)"; tail -40 "$out/$name.log"; status=1
  else
    echo "fuzz: $name ok ($(grep -c '' "$out/$name.log") log lines)"
  fi
done
exit $status
