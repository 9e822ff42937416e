#!/usr/bin/env bash
# cli_test.sh — end-to-end checks of bin/kvsim and bin/kvcal as a user runs them: exit codes,
# messages on bad input, files written. Ends with "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
pass=0; fail=0; skip=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

ok()   { pass=$((pass+1)); echo "ok    cli: $1"; }
bad()  { fail=$((fail+1)); echo "FAIL  cli: $1" >&2; }
# expect RC DESC CMD...  — run CMD, compare its exit code; stdout+stderr kept in $tmp/out
expect() {
  local want=$1 desc=$2; shift 2
  "$@" >"$tmp/out" 2>&1; local rc=$?
  if [ "$rc" = "$want" ]; then ok "$desc"; else bad "$desc (exit $rc, wanted $want)"; sed 's/^/      /' "$tmp/out" | head -20 >&2; fi
}
# contains DESC TEXT — the last command's output contains TEXT
contains() {
  if grep -qF -- "$2" "$tmp/out"; then ok "$1"; else bad "$1 (no '$2' in output)"; sed 's/^/      /' "$tmp/out" | head -20 >&2; fi
}

expect 0 "kvsim --help" bin/kvsim --help
expect 0 "kvcal --help" bin/kvcal --help
expect 2 "kvsim unknown command" bin/kvsim frobnicate
contains "kvsim unknown command is named" "frobnicate"

echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
