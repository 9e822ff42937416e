#!/usr/bin/env bash
# cli_test.sh — end-to-end checks of kvsim and kvcal as a user runs them: exit codes,
# messages on bad input, files written. Ends with "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
pass=0; fail=0; skip=0
# the binaries under test: bin/ or, for the sanitizer pass, build/san/bin (KVSIM_BIN)
B=${KVSIM_BIN:-bin}
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

expect 0 "kvsim --help" "$B"/kvsim --help
expect 0 "kvcal --help" "$B"/kvcal --help
expect 2 "kvsim unknown command" "$B"/kvsim frobnicate
contains "kvsim unknown command is named" "frobnicate"

# catalogs
expect 0 "list models" "$B"/kvsim list models
contains "list models has Qwen3-30B-A3B" "Qwen3-30B-A3B"
contains "list models has Gemma-2-9B" "Gemma-2-9B"
expect 0 "list platforms" "$B"/kvsim list platforms
contains "list platforms has the HCache box" "hcache-a100"
contains "list platforms has an H200 box" "h200"
expect 0 "list policies" "$B"/kvsim list policies
contains "list policies has kv-offload" "kv-offload"
expect 0 "list traces" "$B"/kvsim list traces
contains "list traces has sharegpt4" "sharegpt4"
expect 2 "list unknown catalog" "$B"/kvsim list nonsense

# one run, then the same run again: identical bytes
expect 0 "run kv-offload" "$B"/kvsim run --policy kv-offload --requests 200 --quiet --out "$tmp/a"
for f in summary.json requests.csv table.md ttft_cdf.svg; do
  if [ -s "$tmp/a/$f" ]; then ok "run wrote $f"; else bad "run wrote $f"; fi
done
expect 0 "same run again" "$B"/kvsim run --policy kv-offload --requests 200 --quiet --out "$tmp/b"
for f in summary.json requests.csv table.md ttft_cdf.svg; do
  if cmp -s "$tmp/a/$f" "$tmp/b/$f"; then ok "deterministic $f"; else bad "deterministic $f (files differ)"; fi
done
expect 0 "other seed" "$B"/kvsim run --policy kv-offload --requests 200 --seed 2 --quiet --out "$tmp/c"
if cmp -s "$tmp/a/requests.csv" "$tmp/c/requests.csv"; then bad "seed changes the trace"; else ok "seed changes the trace"; fi
rows=$(($(wc -l < "$tmp/a/requests.csv") - 1))
if [ "$rows" = 200 ]; then ok "requests.csv has one row per request"; else bad "requests.csv has $rows rows, wanted 200"; fi
if python3 - "$tmp/a/summary.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
p = d["policies"][0]
assert p["name"] == "kv-offload"
for k in ("ttft_s", "tbt_s", "restore_s"):
    assert set(("mean", "p50", "p90", "p99")) <= set(p[k]), k
assert p["saved_bytes_per_token"] == 524288
assert d["inputs"]["config"]["seed"] == 1 and d["inputs"]["config"]["model"] == "Llama-2-7B"
assert d["kvsim"]["git_rev"] and d["inputs"]["cost_model"] and d["inputs"]["trace"]
assert p["requests"] == 200
PY
then ok "summary.json has the promised fields"; else bad "summary.json fields"; fi

# compare: same trace for every policy
expect 0 "compare" "$B"/kvsim compare --policies recompute,kv-offload --requests 100 --quiet --out "$tmp/cmp"
contains "compare prints the table" "| recompute |"
contains "compare prints kv-offload" "| kv-offload |"
if [ "$(cut -d, -f2-9 "$tmp/cmp/requests.csv" | grep -c .)" -gt 0 ] && \
   [ "$(grep '^recompute,' "$tmp/cmp/requests.csv" | cut -d, -f3,4,7,8,9 | sort | md5sum)" = \
     "$(grep '^kv-offload,' "$tmp/cmp/requests.csv" | cut -d, -f3,4,7,8,9 | sort | md5sum)" ]; then
  ok "compare replays the same requests for every policy"
else bad "compare replays the same requests for every policy"; fi

# bad input: clear message, non-zero exit, nothing half-written
expect 1 "unknown model" "$B"/kvsim run --model Llama-9 --out "$tmp/x" --quiet
contains "unknown model lists the known ones" "Llama-2-13B"
expect 1 "unknown platform" "$B"/kvsim run --platform nowhere --out "$tmp/x" --quiet
contains "unknown platform lists the known ones" "hcache-a100"
expect 2 "unknown policy" "$B"/kvsim run --policy magic --out "$tmp/x" --quiet
contains "unknown policy lists the known ones" "recompute"
expect 2 "unknown --set key" "$B"/kvsim run --set nope=1 --out "$tmp/x"
contains "unknown key lists the known ones" "token_budget"
expect 2 "missing --out" "$B"/kvsim run --policy recompute
printf 'session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\ns,0,,12,3,0\ns,1,,x,3,15\n' > "$tmp/bad.csv"
expect 1 "malformed trace" "$B"/kvsim run --trace "$tmp/bad.csv" --out "$tmp/bad" --quiet
contains "malformed trace names the line" "line 3"
if [ -e "$tmp/bad/summary.json" ]; then bad "no summary after a failed run"; else ok "no summary after a failed run"; fi
echo '{"model": "Llama-2-7B", "tp": "two"}' > "$tmp/badcfg.json"
expect 1 "bad config value" "$B"/kvsim run --config "$tmp/badcfg.json" --out "$tmp/x" --quiet
contains "bad config names file and key" "badcfg.json"
echo '{"model": ' > "$tmp/brokencfg.json"
expect 1 "broken config JSON" "$B"/kvsim run --config "$tmp/brokencfg.json" --out "$tmp/x" --quiet
contains "broken config names the file" "brokencfg.json"
# a good result is not overwritten by a failing run
cp -r "$tmp/a" "$tmp/keep"
expect 1 "failing run into a good result dir" "$B"/kvsim run --trace "$tmp/bad.csv" --out "$tmp/keep" --quiet
if cmp -s "$tmp/a/summary.json" "$tmp/keep/summary.json" && cmp -s "$tmp/a/requests.csv" "$tmp/keep/requests.csv"; then
  ok "failed run leaves the good result intact"; else bad "failed run leaves the good result intact"; fi

# kvcal spec → store → kvsim reads it
expect 0 "kvcal spec" "$B"/kvcal spec --platform hcache-a100 --model Llama-2-7B --db "$tmp/costs.db"
expect 0 "kvcal show" "$B"/kvcal show --db "$tmp/costs.db"
contains "kvcal show lists the run" "A100-40GB"
expect 0 "kvcal export sql" "$B"/kvcal export --db "$tmp/costs.db" --format sql --out "$tmp/dump.sql"
expect 0 "kvcal import sql" "$B"/kvcal import --db "$tmp/costs2.db" "$tmp/dump.sql"
expect 0 "kvcal export sql again" "$B"/kvcal export --db "$tmp/costs2.db" --format sql --out "$tmp/dump2.sql"
if cmp -s "$tmp/dump.sql" "$tmp/dump2.sql"; then ok "dump → import → dump is identical"; else bad "dump → import → dump is identical"; fi
expect 0 "kvsim run on the stored cost model" "$B"/kvsim run --policy kv-offload --requests 200 --costs "$tmp/costs.db" --quiet --out "$tmp/db"
if python3 -c "
import json,sys
a=json.load(open('$tmp/a/summary.json'))['policies'][0]['ttft_s']['mean']
b=json.load(open('$tmp/db/summary.json'))['policies'][0]['ttft_s']['mean']
sys.exit(0 if abs(a-b) <= 1e-6*max(a,1e-9) else 1)"; then ok "stored spec model = in-memory spec model"; else bad "stored spec model = in-memory spec model"; fi
echo "not a database" > "$tmp/junk.db"
expect 1 "kvsim refuses a foreign cost store" "$B"/kvsim run --costs "$tmp/junk.db" --out "$tmp/x" --quiet
contains "foreign store named" "junk.db"
expect 1 "kvsim: cost store without the model" "$B"/kvsim run --model Llama-2-13B --costs "$tmp/costs.db" --out "$tmp/x" --quiet
contains "missing curves list what the store has" "Llama-2-7B"
expect 1 "kvcal spec unknown GPU" "$B"/kvcal spec --gpu Z100 --model Llama-2-7B --db "$tmp/z.db"
contains "unknown GPU lists known" "H200"

# committed cost models still equal what the code derives (a CI guard on cost-model regressions)
for f in results/costmodels/spec-*.sql; do
  base=$(basename "$f" .sql); rest=${base#spec-}; tp=${rest##*-tp}; rest=${rest%-tp*}
  platform=""; model=""
  for p in $("$B"/kvsim list platforms | awk '{print $1}'); do
    case "$rest" in "$p"-*) platform=$p; model=${rest#"$p"-};; esac
  done
  "$B"/kvcal import --db "$tmp/committed-$base.db" "$f" >/dev/null 2>&1 &&
  "$B"/kvcal export --db "$tmp/committed-$base.db" --format csv --out "$tmp/committed.csv" >/dev/null 2>&1 &&
  "$B"/kvcal spec --platform "$platform" --model "$model" --tp "$tp" --db "$tmp/fresh-$base.db" >/dev/null 2>&1 &&
  "$B"/kvcal export --db "$tmp/fresh-$base.db" --format csv --out "$tmp/fresh.csv" >/dev/null 2>&1
  if [ $? = 0 ] && [ -n "$platform" ] && diff -q <(cut -d, -f2- "$tmp/committed.csv") <(cut -d, -f2- "$tmp/fresh.csv") >/dev/null; then
    ok "committed cost model $base matches the spec backend"
  else
    bad "committed cost model $base differs from the spec backend (tools/regen_costmodels.sh, review, commit)"
  fi
done

# ---- newcomer checks (figures, table, Python entry point, link dependencies) ----
# bin/kvsim needs no CUDA at run time: the CUDA objects link only into kvcal and the tests
if command -v ldd >/dev/null 2>&1 && ldd "$B"/kvsim >/dev/null 2>&1; then
  if ldd "$B"/kvsim | grep -q "libcudart\|libcublas"; then bad "kvsim links no CUDA library"; else ok "kvsim links no CUDA library"; fi
else
  skip=$((skip+1)); echo "skip  cli: kvsim links no CUDA library (no ldd)"
fi
# the figures (a CDF and a tail view) and the announcement of what was written
expect 0 "run without requests.csv" "$B"/kvsim run --policy recompute --requests 50 --no-csv --out "$tmp/nocsv"
if grep -q "requests.csv" "$tmp/out"; then bad "--no-csv does not announce requests.csv"; else ok "--no-csv does not announce requests.csv"; fi
contains "--no-csv announces the figures" "ttft_cdf.svg, ttft_ccdf.svg"
if [ ! -e "$tmp/nocsv/requests.csv" ] && [ -s "$tmp/nocsv/ttft_ccdf.svg" ]; then ok "--no-csv writes no requests.csv, a tail figure"; else bad "--no-csv writes no requests.csv, a tail figure"; fi
if cmp -s "$tmp/a/ttft_ccdf.svg" "$tmp/b/ttft_ccdf.svg" && [ -s "$tmp/a/ttft_ccdf.svg" ]; then ok "deterministic ttft_ccdf.svg"; else bad "deterministic ttft_ccdf.svg"; fi
if grep -q '^| policy | requests | TTFT mean ms | TTFT p50 ms | TTFT p90 ms | TTFT p99 ms | restore mean ms | restore p99 ms | TBT mean ms | TBT p99 ms |' "$tmp/a/table.md" &&
   grep -q '| 512 KiB | [0-9.]* |$' "$tmp/a/table.md"; then ok "table.md: unique headers, bytes in KiB"; else bad "table.md: unique headers, bytes in KiB"; fi
# models by Hugging Face id
expect 0 "list models" "$B"/kvsim list models
contains "list models shows Hugging Face ids" "meta-llama/Llama-2-7b-hf"
contains "list models shows aliases" "meta-llama/Llama-3.1-8B-Instruct"
expect 0 "run a model given by its Hugging Face id" "$B"/kvsim run --policy recompute --requests 30 --quiet --model meta-llama/Llama-2-7b-hf --out "$tmp/hf"
expect 0 "the same model by catalog name" "$B"/kvsim run --policy recompute --requests 30 --quiet --model Llama-2-7B --out "$tmp/hfname"
if cmp -s "$tmp/hf/requests.csv" "$tmp/hfname/requests.csv"; then ok "Hugging Face id and catalog name give the same results"; else bad "Hugging Face id and catalog name give the same results"; fi
expect 1 "unknown Hugging Face id" "$B"/kvsim run --policy recompute --requests 30 --quiet --model meta-llama/Llama-2-7b --out "$tmp/hfbad"
contains "unknown model message points at list models" "kvsim list models"
# kvcal spec --explain prints its sources itself (an installed copy has no source files)
expect 0 "kvcal spec --explain" "$B"/kvcal spec --explain
contains "explain names the per-GPU sources" "source: MAMF H100 SXM"
contains "explain lists the shared constants" "kernel launch overhead: 4000 ns"
if grep -q "header of sim/" "$tmp/out"; then bad "explain does not send the user to a source file"; else ok "explain does not send the user to a source file"; fi
# the Python entry point (python/kvsim): its unit tests against these binaries, and an offline install
if command -v python3 >/dev/null 2>&1; then
  if KVSIM_BIN="$B" PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -s python/tests >"$tmp/out" 2>&1; then
    ok "python: kvsim.run / kvsim.compare unit tests ($(grep -o 'Ran [0-9]* tests' "$tmp/out"))"
  else
    bad "python: kvsim.run / kvsim.compare unit tests"; sed 's/^/      /' "$tmp/out" | tail -30 >&2
  fi
  if python3 -m pip --version >/dev/null 2>&1; then
    if PIP_DISABLE_PIP_VERSION_CHECK=1 python3 -m pip install -q --no-build-isolation --no-index --target "$tmp/pyinst" ./python >"$tmp/out" 2>&1 &&
       [ -f "$tmp/pyinst/kvsim/__init__.py" ] && [ -d "$tmp/pyinst/kvsim-0.1.0.dist-info" ]; then
      ok "python: pip install --no-build-isolation --no-index ./python"
    else
      bad "python: pip install --no-build-isolation --no-index ./python"; sed 's/^/      /' "$tmp/out" | tail -20 >&2
    fi
  else
    skip=$((skip+1)); echo "skip  cli: python: pip install (no pip)"
  fi
else
  skip=$((skip+1)); echo "skip  cli: python entry point (no python3)"
fi
# requests.csv names each request's session as the trace does
expect 0 "run the shipped leval trace" "$B"/kvsim run --policy recompute --requests 20 --quiet --trace traces/data/leval.csv --out "$tmp/sid"
if head -2 "$tmp/sid/requests.csv" | grep -q '^policy,request,session,session_id,turn,' &&
   grep -q '^recompute,0,0,leval_coursera_0000,0,' "$tmp/sid/requests.csv"; then ok "requests.csv has the trace's session_id"; else bad "requests.csv has the trace's session_id"; fi
# ---- end of newcomer checks ----

echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
