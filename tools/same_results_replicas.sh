#!/usr/bin/env bash
# same_results_replicas.sh NEW_KVSIM [OLD_KVSIM] [WORKDIR] — do decode runs that go on across other
# replicas' events (sim/engine/iteration.c, run_go_on) leave every result as it was?
#
# Runs multi-replica experiments (8 replicas, tp 2 × pp 2, every policy: `compare --policies all`)
# under each router, each store (HBM + DRAM, + SSD, + remote, remote only), per-iteration saves,
# whole-turn reservations (alloc=reserve) and a small pool that preempts (swap and recompute), and
# compares, per experiment, summary.json's "policies" array (every metric, after JSON
# normalisation), requests.csv, utilisation.csv and table.md byte for byte between
#   - NEW_KVSIM as it runs by default and NEW_KVSIM with KVSIM_DECODE_RUNS_GO_ON=0 (every decode
#     run ends at the next event of any replica, as before) — when OLD_KVSIM is not given or is "-";
#   - or NEW_KVSIM and OLD_KVSIM (a baseline build) as they run by default.
# SAME_REPLICAS_REQUESTS (default 3000) requests per experiment. Exit 0 when every experiment runs
# and matches, 1 otherwise (the differing files, or the exit statuses, are named). tests/cli_test.sh runs it on 300 requests.
set -u
new=${1:?usage: same_results_replicas.sh NEW_KVSIM [OLD_KVSIM|-] [WORKDIR]}
old=${2:--}
work=${3:-$(mktemp -d)}
N=${SAME_REPLICAS_REQUESTS:-3000}
mkdir -p "$work"

R="--replicas 8 --tp 2 --pp 2 --model Llama-3.1-8B --platform cacheflow-h100-10g --policies all --requests $N"
cases=()
add() { cases+=("$*"); }
for router in least-loaded prefix; do
  for st in dram dram+ssd dram+remote remote; do
    ssd=""
    [ "$st" = dram+ssd ] && ssd="--set n_ssd=2"
    add "$R --set router=$router --set store=$st $ssd --set session_rate=2"
  done
done
add "$R --set save_mode=iteration --set store=dram+remote --set session_rate=2"
add "$R --set alloc=reserve --set session_rate=2"
add "$R --trace sharegpt4 --set session_rate=4 --set mem_util=0.3 --set preempt=swap"
add "$R --trace sharegpt4 --set session_rate=4 --set mem_util=0.3 --set preempt=recompute --set router=prefix"

policies() {
  python3 - "$1" <<'PY'
import json, sys
print(json.dumps(json.load(open(sys.argv[1]))["policies"], sort_keys=True, indent=0))
PY
}

fail=0 i=0
for c in "${cases[@]}"; do
  i=$((i + 1))
  a=$work/$i.old b=$work/$i.new
  if [ "$old" = - ]; then
    # shellcheck disable=SC2086
    KVSIM_DECODE_RUNS_GO_ON=0 "$new" compare $c --quiet --out "$a" >"$a.log" 2>&1; ra=$?
  else
    # shellcheck disable=SC2086
    "$old" compare $c --quiet --out "$a" >"$a.log" 2>&1; ra=$?
  fi
  # shellcheck disable=SC2086
  "$new" compare $c --quiet --out "$b" >"$b.log" 2>&1; rb=$?
  bad=""
  [ $ra = 0 ] && [ $rb = 0 ] || bad="exit $ra vs $rb"
  if [ -z "$bad" ]; then
    for f in requests.csv utilisation.csv table.md; do
      cmp -s "$a/$f" "$b/$f" || bad="$bad $f"
    done
    [ "$(policies "$a/summary.json")" = "$(policies "$b/summary.json")" ] || bad="$bad summary.json"
  fi
  if [ -n "$bad" ]; then
    echo "DIFF  [$i] $c:$bad  ($a vs $b)"
    fail=1
  else
    echo "same  [$i] $c"
  fi
done
[ $fail = 0 ] && echo "all ${#cases[@]} experiments identical" || echo "differences found"
exit $fail
