#!/usr/bin/env bash
# fuzz.sh SECONDS NAME... — run the libFuzzer harnesses build/fuzz/bin/fuzz_NAME one after another,
# SECONDS each, on the committed seeds (tests/fuzz/corpus/NAME/, read only) plus a working corpus
# (build/fuzz/work/NAME/, where new inputs go). Prints one line per harness (executions, speed,
# coverage) and fails on the first crash, leak, timeout or out-of-memory, naming the input that
# reproduces it (build/fuzz/artifacts/NAME-crash-...; rerun: build/fuzz/bin/fuzz_NAME FILE).
# fuzz.sh --probe CC — exit 0 when CC can build and link a libFuzzer harness.
set -u
if [ "${1:-}" = --probe ]; then
  cc=${2:-clang}
  command -v "$cc" >/dev/null 2>&1 || exit 1
  d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
  printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' > "$d/p.c"
  "$cc" -fsanitize=fuzzer,address,undefined "$d/p.c" -o "$d/p" >/dev/null 2>&1
  exit $?
fi
secs=${1:?usage: fuzz.sh SECONDS NAME...}; shift
root=build/fuzz
mkdir -p "$root/artifacts" "$root/logs"
total_runs=0; failed=0
for name in "$@"; do
  bin=$root/bin/fuzz_$name
  [ -x "$bin" ] || { echo "fuzz: $bin missing (make fuzz-build)" >&2; exit 1; }
  mkdir -p "$root/work/$name"
  seeds=tests/fuzz/corpus/$name
  [ -d "$seeds" ] || seeds=
  log=$root/logs/$name.log
  # -timeout: one input over 10 s is a hang; -rss_limit_mb: memory blow-ups are failures too
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="$root/artifacts/$name-" "$root/work/$name" $seeds >"$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
  corp=$(ls "$root/work/$name" | wc -l)
  if [ $rc -ne 0 ]; then
    failed=$((failed + 1))
    echo "FAIL  fuzz: $name (exit $rc after ${runs:-?} executions); log $log" >&2
    grep -E 'ERROR|SUMMARY|runtime error|artifact|Test unit written' "$log" | head -12 | sed 's/^/      /' >&2
    break
  fi
  total_runs=$((total_runs + ${runs:-0}))
  printf 'ok    fuzz: %-14s %9s executions in %s s (%s/s), %s, corpus %s\n' "$name" "${runs:-?}" "$secs" \
    "$(( ${runs:-0} / (secs > 0 ? secs : 1) ))" "${cov:-cov: ?}" "$corp"
done
echo "fuzz: $# harnesses, $total_runs executions, $failed failed"
[ $failed = 0 ]
