#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/, clang with AddressSanitizer and
# UndefinedBehaviorSanitizer) in build-fuzz and runs each for a fixed budget.
#   scripts/fuzz.sh [SECONDS_PER_HARNESS] [HARNESS...]   (default 20 s, all five)
# Each run starts from the seed corpus in fuzz/corpus/<name>/ plus what earlier
# runs found (build-fuzz/corpus/<name>/, not committed). A crash, leak, timeout
# or out-of-memory stops that harness: the input is saved as
# build-fuzz/crash/<name>/crash-*, the script goes on with the next harness and
# exits 1 at the end. Per-harness figures (executions, coverage) are printed in
# the summary and kept in build-fuzz/logs/<name>.log.
set -uo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-20}
shift || true
HARNESSES=("$@")
((${#HARNESSES[@]})) || HARNESSES=(request safetensors gguf tokenizer chat_template)
BUILD_DIR=${MX_FUZZ_BUILD_DIR:-build-fuzz}

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMXSERVE_FUZZ=ON -DMXSERVE_TESTS=OFF \
  -DCMAKE_CXX_COMPILER=clang++ >/dev/null || exit 1
cmake --build "$BUILD_DIR" -j "${MX_JOBS:-2}" --target $(printf 'fuzz_%s ' "${HARNESSES[@]}") || exit 1

# ASan's leak checker needs ptrace, which some containers forbid: leaks are
# looked for where it works and skipped (not failed) where it does not.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
if ! ASAN_OPTIONS=detect_leaks=1 "$BUILD_DIR/fuzz/fuzz_safetensors" -runs=1 fuzz/corpus/safetensors >/dev/null 2>&1; then
  export ASAN_OPTIONS=detect_leaks=0
fi
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

failed=()
summary=()
for name in "${HARNESSES[@]}"; do
  corpus="$BUILD_DIR/corpus/$name" crash="$BUILD_DIR/crash/$name" log="$BUILD_DIR/logs/$name.log"
  mkdir -p "$corpus" "$crash" "$(dirname "$log")"
  max_len=4096; [ "$name" = chat_template ] && max_len=16384  # real templates are 1-5 KB
  echo "fuzz_$name: ${SECONDS_EACH}s"
  "$BUILD_DIR/fuzz/fuzz_$name" -max_total_time="$SECONDS_EACH" -max_len="$max_len" -timeout=10 -rss_limit_mb=2560 \
    -print_final_stats=1 -artifact_prefix="$crash/" "$corpus" "fuzz/corpus/$name" >"$log" 2>&1
  rc=$?
  execs=$(grep -ao 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$')
  cov=$(grep -ao 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
  if [ "$rc" != 0 ]; then
    failed+=("$name")
    summary+=("fuzz_$name: FAILED (rc $rc) after ${execs:-?} executions; input in $crash/")
    grep -aE 'ERROR|SUMMARY|runtime error|terminate|deadly' "$log" | head -5
  else
    summary+=("fuzz_$name: ${execs:-?} executions in ${SECONDS_EACH}s, coverage ${cov:-?}, no crash")
  fi
done
printf '%s\n' "${summary[@]}"
((${#failed[@]} == 0)) || { echo "fuzz: crashes in ${failed[*]}"; exit 1; }
