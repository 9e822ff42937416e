#!/usr/bin/env bash
# valgrind.sh [BINDIR] — the main commands under valgrind (memcheck): kvsim run, kvsim compare with a
# few policies and 200 requests, kvsim on a cost store and on a refused trace, kvcal spec, show,
# export and import. Any
# memory error or leak (definite, indirect or possible) fails the command (--error-exitcode=1,
# --errors-for-leak-kinds=definite,indirect,possible). Prints one line per command and a summary;
# the full report of a failing command is in build/valgrind/NAME.log.
set -u
B=${1:-bin}
command -v valgrind >/dev/null 2>&1 || { echo "valgrind: not installed (make deps installs it)" >&2; exit 1; }
out=build/valgrind; rm -rf "$out"; mkdir -p "$out"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
# vg WANT NAME CMD... — WANT: the command's own exit status (0, or 1 for a refused input; then
# valgrind reports with 99 so that its findings stay distinguishable)
vg() {
  local want=$1 name=$2; shift 2
  local vcode=1; [ "$want" = 0 ] || vcode=99
  valgrind --quiet --suppressions=tools/valgrind.supp --error-exitcode=$vcode --leak-check=full --show-leak-kinds=definite,indirect,possible \
    --errors-for-leak-kinds=definite,indirect,possible --track-origins=yes --log-file="$out/$name.log" "$@" \
    >"$out/$name.out" 2>&1
  local rc=$?
  if [ $rc = "$want" ]; then pass=$((pass + 1)); echo "ok    valgrind: $name"
  else fail=$((fail + 1)); echo "FAIL  valgrind: $name (exit $rc, wanted $want; $out/$name.log)" >&2; head -30 "$out/$name.log" | sed 's/^/      /' >&2; fi
}
vg 0 kvsim-run "$B"/kvsim run --policy kv-offload --requests 100 --quiet --out "$tmp/run"
vg 0 kvsim-compare "$B"/kvsim compare --policies recompute,hcache,cake,cacheflow --requests 200 --quiet --out "$tmp/cmp"
vg 0 kvsim-list "$B"/kvsim list models
vg 0 kvcal-spec "$B"/kvcal spec --platform hcache-a100 --gpu A100-40GB --model Llama-2-7B --db "$tmp/spec.db"
vg 0 kvcal-show "$B"/kvcal show --db "$tmp/spec.db"
vg 0 kvcal-show-run "$B"/kvcal show --db "$tmp/spec.db" --run 1 --op h2d
vg 0 kvcal-export "$B"/kvcal export --db "$tmp/spec.db" --format sql --out "$tmp/spec.sql"
vg 0 kvcal-import "$B"/kvcal import --db "$tmp/imported.db" "$tmp/spec.sql"
vg 0 kvsim-costs "$B"/kvsim run --policy hcache --requests 50 --costs "$tmp/spec.db" --quiet --out "$tmp/costs"
vg 1 kvsim-bad-trace "$B"/kvsim run --policy recompute --trace tests/fixtures/store_export_v1.csv --quiet --out "$tmp/bad"
echo "valgrind: $pass passed, $fail failed"
[ $fail = 0 ]
