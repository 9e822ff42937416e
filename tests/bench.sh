#!/usr/bin/env bash
# bench.sh — simulator speed and memory (make bench). Prints Markdown tables, one row per command
# (one process each), this build and — when a baseline binary is given (BASELINE=path, or
# BASELINE_REV=<git rev>: that revision is built here in a temporary git worktree with make -j2) —
# the baseline on the same command in the same invocation, the two alternating row by row.
#
# Every row times the whole process (tests/bench_proc.py: wall time, CPU time = user + system from
# wait4, and the peak RSS of its largest process from one more run under GNU time) and reads the simulator's own figures from its --stats
# lines: requests, the events the queue delivered (queue_events=; a build without it: events=) and
# the event loop's wall time (wall_s=, sim_run with requests.csv's rows). Columns: requests per
# CPU-second of the whole process; its CPU and wall seconds; the event loop's nanoseconds per
# delivered event and per simulated request; peak RSS; and against the baseline the ratios of the
# whole process (baseline CPU / this CPU, baseline wall / this wall: > 1 is faster) and of RSS
# (this / baseline). The machine's other load shows in wall time: CPU time is the steadier figure.
# Nothing is asserted: timings depend on the machine.
#
# Tables:
#   fixed cost: a 1-request run (sharegpt4 generator; and a trace file, traces/data/
#     mooncake_conversation.csv), every output written, BENCH_FIXED_REPEAT runs (default 15);
#   every policy (kvsim list policies) on ShareGPT4 (Llama-2-13B, hcache-a100, BENCH_REQUESTS,
#     default 20000) at a sustainable load (session_rate 0.005/s), overloaded (the generator's
#     0.5 sessions/s) and on 8 replicas (tp 2 × pp 2, 2 sessions/s), --no-csv;
#   two tiers: kv-offload with store=dram+ssd and 8 GB of DRAM (the SSD array takes what DRAM
#     demotes) on the same ShareGPT4 setup, sustainable and overloaded;
#   the peer workload: Poisson 2 req/s, prompts 500–2000, outputs 200–400 tokens, Llama-2-7B on
#     cake-a100, recompute, 512-token chunks, 2,000 and 10,000 requests (requests.csv written);
#   memory: ShareGPT4 overloaded (kv-offload) at 10^4, 10^5, 10^6 requests (BENCH_MAX caps it), and
#     compare --policies all --seeds 5 and --seeds 100 -j 1 (BENCH_SEEDS_REQUESTS per run, default 100):
#     peak RSS should not grow with the trace's length nor with the seeds (the ratios are printed);
#   compare --policies all (ShareGPT4 sustainable, BENCH_COMPARE requests, default 20000) serial
#     (-j 1) and -j 2, and the -j 2 speed-up over serial by alternating rounds.
# Then tests/bench_sweep.sh.
# Environment: KVSIM (default bin/kvsim), BASELINE, BASELINE_REV, BENCH_MAX (largest RSS row, default
# 1000000), BENCH_REQUESTS, BENCH_REPEAT (runs per row, the one with the least CPU reported; default 3,
# one for rows of more than 100,000 requests and for the seeds rows), BENCH_FIXED_REPEAT,
# BENCH_SEEDS_REQUESTS, BENCH_COMPARE, BENCH_POLICIES (comma-separated; default every policy).
set -u
cd "$(dirname "$0")/.."
KVSIM=${KVSIM:-bin/kvsim}
BASELINE=${BASELINE:-}
MAX=${BENCH_MAX:-1000000}
N=${BENCH_REQUESTS:-20000}
REPEAT=${BENCH_REPEAT:-3}
CMPN=${BENCH_COMPARE:-20000}
tmp=$(mktemp -d)
cleanup() {
  [ -d "$tmp/base" ] && git worktree remove --force "$tmp/base" >/dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT

# BASELINE_REV: build that revision in a temporary worktree (its own build/ and bin/)
if [ -n "${BASELINE_REV:-}" ]; then
  git worktree add --detach "$tmp/base" "$BASELINE_REV" >/dev/null 2>&1 || { echo "bench: cannot check out $BASELINE_REV" >&2; exit 1; }
  echo "bench: building $BASELINE_REV in $tmp/base ..." >&2
  make -C "$tmp/base" -j2 bin/kvsim >"$tmp/base-build.log" 2>&1 || { echo "bench: building $BASELINE_REV failed:" >&2; tail -5 "$tmp/base-build.log" >&2; exit 1; }
  BASELINE=$tmp/base/bin/kvsim
fi

# the peer workload as a canonical CSV: one request per session, Poisson arrivals at 2 req/s,
# uniform prompt and output lengths (Park–Miller generator: exact in awk's doubles, any awk)
peer_trace() { # n file
  awk -v n="$1" 'BEGIN {
    x = 12345; t = 0
    print "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens"
    for (i = 0; i < n; i++) {
      x = (x * 16807) % 2147483647; u = (x + 0.5) / 2147483647; t += -log(u) / 2
      x = (x * 16807) % 2147483647; p = 500 + x % 1501
      x = (x * 16807) % 2147483647; o = 200 + x % 201
      printf "peer-%d,0,%.6f,%d,%d,0\n", i, t, p, o
    }
  }' > "$2"
}
peer_trace 2000 "$tmp/peer-2000.csv"
peer_trace 10000 "$tmp/peer-10000.csv"

FIXREP=${BENCH_FIXED_REPEAT:-15}
SEEDN=${BENCH_SEEDS_REQUESTS:-100}
# each binary writes its own results directory (a build may not replace another's files)
outkey() { [ "$1" = "$KVSIM" ] && echo this || echo base; }

# proc1 REPS BIN ARGS...: the whole process (bench_proc.py), "wall cpu rss_kib req events sim_wall",
# or "fail MESSAGE"; its --stats lines summed (requests, delivered events, event-loop wall time)
proc1() {
  local reps=$1 bin=$2; shift 2
  local m
  m=$(python3 tests/bench_proc.py "$reps" "$tmp/err" "$bin" "$@") || { echo "$m"; return; }
  local st
  st=$(grep '^stats ' "$tmp/err" | awk '{
      r = e = w = q = 0
      for (i = 2; i <= NF; i++) { split($i, kv, "=")
        if (kv[1] == "requests") r = kv[2]; else if (kv[1] == "events") e = kv[2]
        else if (kv[1] == "queue_events") q = kv[2]; else if (kv[1] == "wall_s") w = kv[2] }
      R += r; E += (q != "" && q > 0 ? q : e); W += w }
    END { printf "%d %d %.6f\n", R, E, W }')
  echo "$m ${st:-0 0 0}"
}

declare -A RSS CPU
# prow NAME REPS SUBCOMMAND ARGS...: one row of the process table; the baseline on the same command
prow() {
  local name=$1 reps=$2 sub=$3; shift 3
  local extra=(--quiet --stats --out "$tmp/out-this")
  local a; a=$(proc1 "$reps" "$KVSIM" "$sub" "${extra[@]}" "$@")
  if [ "${a%% *}" = fail ]; then echo "| $name | ${a#fail } | | | | | | | | | | |"; return; fi
  local b="- - - - - -"
  if [ -n "$BASELINE" ]; then
    b=$(proc1 "$reps" "$BASELINE" "$sub" --quiet --stats --out "$tmp/out-base" "$@")
    if [ "${b%% *}" = fail ]; then
      echo "bench: $name: the baseline failed: ${b#fail }" >&2
      b="- - - - - -"
    fi
  fi
  read -r wall cpu rss req ev simw <<< "$a"
  read -r bwall bcpu brss _ _ _ <<< "$b"
  RSS[$name]=$rss
  CPU[$name]=$cpu
  awk -v n="$name" -v w="$wall" -v c="$cpu" -v m="$rss" -v r="$req" -v e="$ev" -v sw="$simw" -v bw="$bwall" -v bc="$bcpu" -v bm="$brss" 'BEGIN {
    rpc = (c > 0 && r > 0) ? sprintf("%.0f", r / c) : ""
    nse = (e > 0 && sw > 0) ? sprintf("%.0f", sw * 1e9 / e) : ""
    nsr = (r > 0 && sw > 0) ? sprintf("%.0f", sw * 1e9 / r) : ""
    cr = (bc == "-") ? "" : sprintf("%.2fx", bc / (c > 0 ? c : 1e-6))
    wr = (bw == "-") ? "" : sprintf("%.2fx", bw / (w > 0 ? w : 1e-6))
    mr = (bm == "-") ? "" : sprintf("%.2f", m / (bm > 0 ? bm : 1))
    bcs = (bc == "-") ? "" : sprintf("%.4f", bc)
    printf "| %s | %d | %s | %.4f | %.4f | %s | %s | %.1f | %s | %s | %s | %s |\n", n, r, rpc, c, w, nse, nsr, m / 1024, bcs, cr, wr, mr }'
}
header() {
  echo "| command | requests | requests per CPU-s | CPU s | wall s | ns per delivered event | ns per request | peak RSS MiB | baseline CPU s | CPU vs baseline | wall vs baseline | RSS vs baseline |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
}

echo "kvsim benchmark ($(nproc) cores, $(git describe --always --dirty 2>/dev/null)${BASELINE:+, baseline $BASELINE})"
echo
echo "### Fixed cost per process: a 1-request run, every output written (least CPU of $FIXREP)"
echo
header
prow "run --requests 1 (recompute, sharegpt4)" "$FIXREP" run --policy recompute --requests 1
prow "run --requests 1 (recompute, mooncake_conversation.csv)" "$FIXREP" run --policy recompute --requests 1 \
     --trace traces/data/mooncake_conversation.csv
echo
SG="--trace sharegpt4 --model Llama-2-13B --platform hcache-a100"
POLS=${BENCH_POLICIES:-$("$KVSIM" list policies | awk '/^[a-z]/ { print $1 }' | paste -sd, -)}
echo "### Every policy: ShareGPT4, Llama-2-13B on hcache-a100, $N requests, --no-csv (least CPU of $REPEAT)"
echo
header
for p in ${POLS//,/ }; do
  prow "$p, sustainable (0.005 sessions/s)" "$REPEAT" run --policy "$p" $SG --requests "$N" --no-csv --set session_rate=0.005
  prow "$p, overloaded (0.5 sessions/s)" "$REPEAT" run --policy "$p" $SG --requests "$N" --no-csv
  prow "$p, 8 replicas tp2×pp2 (2 sessions/s)" "$REPEAT" run --policy "$p" $SG --requests "$N" --no-csv --replicas 8 --tp 2 --pp 2 --set session_rate=2
done
echo
echo "### Two tiers: kv-offload, store=dram+ssd, 8 GB of DRAM, ShareGPT4, Llama-2-13B on hcache-a100, $N requests, --no-csv (least CPU of $REPEAT)"
echo
header
TT=(--policy kv-offload $SG --requests "$N" --no-csv --set store=dram+ssd --set "dram=8 GB")
prow "kv-offload dram+ssd, sustainable (0.005 sessions/s)" "$REPEAT" run "${TT[@]}" --set session_rate=0.005
prow "kv-offload dram+ssd, overloaded (0.5 sessions/s)" "$REPEAT" run "${TT[@]}"
echo
echo "### The peer workload (Poisson 2/s, Llama-2-7B on cake-a100, recompute, requests.csv written)"
echo
header
for n in 2000 10000; do
  prow "peer, $n requests" "$REPEAT" run --policy recompute --trace "$tmp/peer-$n.csv" \
       --model Llama-2-7B --platform cake-a100 --set token_budget=512 --requests $n
done
echo
echo "### Memory: trace length and replications"
echo
header
for n in 10000 100000 1000000; do
  [ "$n" -le "$MAX" ] || continue
  reps=$REPEAT; [ "$n" -gt 100000 ] && reps=1
  prow "kv-offload overloaded, $n requests" "$reps" run --policy kv-offload $SG --requests $n --no-csv
done
for s in 5 100; do
  prow "compare --policies all --seeds $s -j 1, $SEEDN requests" 1 compare --policies all --seeds $s -j 1 --requests "$SEEDN" --no-csv
done
a=${RSS["kv-offload overloaded, 10000 requests"]:-0}
echo
for n in 100000 1000000; do
  b=${RSS["kv-offload overloaded, $n requests"]:-0}
  awk -v a="$a" -v b="$b" -v n="$n" 'BEGIN { if (a > 0 && b > 0) printf "peak RSS at %d requests / at 10^4 (overloaded): %.2f (flat memory: ~1)\n", n, b / a }'
done
a=${RSS["compare --policies all --seeds 5 -j 1, $SEEDN requests"]:-0}
b=${RSS["compare --policies all --seeds 100 -j 1, $SEEDN requests"]:-0}
awk -v a="$a" -v b="$b" 'BEGIN { if (a > 0 && b > 0) printf "peak RSS at 100 seeds / at 5 seeds (12 policies): %.2f (flat memory: ~1)\n", b / a }'
echo
echo "### compare --policies all, ShareGPT4 sustainable, $CMPN requests, --no-csv"
echo
header
prow "compare, serial (-j 1)" "$REPEAT" compare $SG --policies all --requests "$CMPN" --set session_rate=0.005 --no-csv -j 1
prow "compare, -j 2" "$REPEAT" compare $SG --policies all --requests "$CMPN" --set session_rate=0.005 --no-csv -j 2
echo
# the same two runs alternating (BENCH_REPEAT rounds of -j 1 then -j 2): on a shared machine the
# median of the paired ratios is the steadier figure (a best-of pairs the luckiest runs of each)
for ((k = 0; k < REPEAT; k++)); do
  for jobs in 1 2; do
    t0=$(date +%s.%N)
    "$KVSIM" compare --quiet --no-csv -j $jobs --out "$tmp/cmp-pair" $SG --policies all --requests "$CMPN" --set session_rate=0.005 >/dev/null 2>&1 || break 2
    t1=$(date +%s.%N)
    echo "$jobs $t0 $t1"
  done
done | awk '{ w = $3 - $2; if ($1 == 1) a = w; else r[n++] = a / w }
  END { if (n == 0) exit; for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (r[j] < r[i]) { t = r[i]; r[i] = r[j]; r[j] = t }
        m = n % 2 ? r[(n - 1) / 2] : (r[n / 2 - 1] + r[n / 2]) / 2
        printf "compare -j 2 over serial, %d alternating rounds: median %.2fx (%.2f to %.2f)\n", n, m, r[0], r[n - 1] }'
bash tests/bench_sweep.sh
