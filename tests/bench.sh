#!/usr/bin/env bash
# bench.sh — simulator speed and memory (make bench). Prints a Markdown table, one row per run (one
# process each): simulated requests per wall second, events per second, wall nanoseconds per event,
# peak RSS (the process's ru_maxrss), events per request, and — when a baseline binary is given
# (BASELINE=path, or BASELINE_REV=<git rev>: that revision is built here in a temporary git worktree
# with make -j2; both run in the same invocation on the same rows) — its speed-up (baseline wall /
# this wall) and RSS ratio (this / baseline). Wall time is the simulator's own (kvsim run --stats:
# sim_run, requests.csv rows included), not process start-up; the compare rows time the whole
# process. Events are those the event queue delivered (stats queue_events=; a build without
# multi-step decode delivers one per iteration: its events=). Nothing is asserted: timings depend
# on the machine.
#
# Rows:
#   ShareGPT4 on one replica (Llama-2-13B, hcache-a100), recompute and kv-offload, at a sustainable
#     load (session_rate 0.005/s) and overloaded (the generator's 0.5 sessions/s), 20,000 requests;
#   the peer workload: Poisson 2 req/s, prompts 500–2000, outputs 200–400 tokens, Llama-2-7B on
#     cake-a100 (A100-80GB), recompute, 512-token chunks, 2,000 and 10,000 requests;
#   8 replicas at tp 2 × pp 2 (Llama-2-13B, hcache-a100), hcache and cacheflow, ShareGPT4 at 2 sessions/s;
#   ShareGPT4 overloaded (one replica, kv-offload) at 10^4, 10^5, 10^6 requests: peak RSS should not
#     grow with trace length (the ratio to the 10^4 row is printed);
#   compare --policies all (ShareGPT4 sustainable, BENCH_COMPARE requests, default 20000) serial
#     (-j 1) and -j 2, process wall time (the -j 2 speed-up over serial is printed).
# Environment: KVSIM (default bin/kvsim), BASELINE (optional binary to compare), BASELINE_REV (a git
# revision to build and use as BASELINE), BENCH_MAX (largest
# RSS row, default 1000000), BENCH_REQUESTS (ShareGPT4 rows, default 20000), BENCH_REPEAT (runs per
# row, the fastest reported; default 3, one for the 10^6 row). The machine's other load shows in the
# numbers: compare the two binaries' columns of one invocation rather than numbers across runs.
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

# each binary writes its own results directory (a build may not replace another's files)
outkey() { [ "$1" = "$KVSIM" ] && echo this || echo base; }

# run BIN ARGS...: prints "requests events wall_s rss_kib" or "fail MESSAGE"; the best wall time
# of REPEAT runs (BENCH_REPEAT, default 3; one run for rows of more than 100,000 requests); events
# are queue_events= where the build prints it, else events=
run1() {
  local bin=$1; shift
  local best="" k reps=$REPEAT
  case " $* " in *" --requests 1000000 "*) reps=1 ;; esac
  for ((k = 0; k < reps; k++)); do
    if ! "$bin" run --quiet --stats --out "$tmp/out-$(outkey "$bin")" "$@" 2> "$tmp/err" > /dev/null; then
      echo "fail $(tail -1 "$tmp/err")"; return
    fi
    local cur
    cur=$(grep '^stats ' "$tmp/err" | tail -1 | stats_fields)
    if [ -z "$best" ] || awk -v a="${cur#* * }" -v b="${best#* * }" 'BEGIN { split(a, x, " "); split(b, y, " "); exit !(x[1] < y[1]) }'; then
      best=$cur
    fi
  done
  echo "$best"
}

# a stats line's "requests events wall_s rss_kib" (events: queue_events= when present)
stats_fields() {
  sed 's/.*requests=\([0-9]*\) events=\([0-9]*\) .*wall_s=\([0-9.]*\) maxrss_kib=\([0-9]*\)\(.*queue_events=\([0-9]*\)\)\{0,1\}.*/\1 \2 \3 \4 \6/' |
    awk '{ print $1, ($5 != "" ? $5 : $2), $3, $4 }'
}

# compare BIN JOBS ARGS...: the whole process (all policies): "requests events wall_s rss_kib" summed
# over the policies' stats lines (RSS: the largest), wall time of the process; best of REPEAT
cmp1() {
  local bin=$1 jobs=$2; shift 2
  local best="" k
  for ((k = 0; k < REPEAT; k++)); do
    local t0 t1
    t0=$(date +%s.%N)
    local jopt=(-j "$jobs")
    [ "$jobs" = 1 ] && ! "$bin" compare --help 2>&1 | grep -q -- '--jobs' && jopt=() # a build before -j: serial anyway
    if ! "$bin" compare --quiet --stats --no-csv "${jopt[@]}" --out "$tmp/cmp-$(outkey "$bin")" "$@" 2> "$tmp/err" > /dev/null; then
      echo "fail $(tail -1 "$tmp/err")"; return
    fi
    t1=$(date +%s.%N)
    local cur
    cur=$(grep '^stats ' "$tmp/err" | stats_fields | awk -v w="$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" '
      { r += $1; e += $2; if ($4 > m) m = $4 } END { printf "%d %d %.3f %d\n", r, e, w, m }')
    if [ -z "$best" ] || awk -v a="${cur#* * }" -v b="${best#* * }" 'BEGIN { split(a, x, " "); split(b, y, " "); exit !(x[1] < y[1]) }'; then
      best=$cur
    fi
  done
  echo "$best"
}

declare -A RSS WALL
# row NAME RUNNER ARGS...: one table row (RUNNER: run1, or "cmp1 JOBS")
row_with() {
  local name=$1 runner=$2; shift 2
  local a; a=$($runner "$KVSIM" "$@")
  if [ "${a%% *}" = fail ]; then echo "| $name | ${a#fail } | | | | | | | |"; return; fi
  local b="- - - -"
  if [ -n "$BASELINE" ]; then
    b=$($runner "$BASELINE" "$@")
    if [ "${b%% *}" = fail ]; then
      echo "bench: $name: the baseline failed: ${b#fail }" >&2
      b="- - - -"
    fi
  fi
  read -r req ev wall rss <<< "$a"
  read -r breq bev bwall brss <<< "$b"
  RSS[$name]=$rss
  WALL[$name]=$wall
  awk -v n="$name" -v r="$req" -v e="$ev" -v w="$wall" -v m="$rss" -v bw="$bwall" -v bm="$brss" 'BEGIN {
    if (w <= 0) w = 0.0005;
    sp = (bw == "-") ? "" : sprintf("%.2fx", (bw > 0 ? bw : 0.0005) / w)
    rr = (bm == "-") ? "" : sprintf("%.2f", m / bm)
    printf "| %s | %d | %.3f | %.0f | %.2f M | %.0f | %.1f | %.1f | %s | %s |\n", n, r, w, r / w, e / w / 1e6, w * 1e9 / (e > 0 ? e : 1), e / (r > 0 ? r : 1), m / 1024, sp, rr }'
}
row() { local name=$1; shift; row_with "$name" run1 "$@"; }
cmp_j1() { cmp1 "$1" 1 "${@:2}"; }
cmp_j2() { cmp1 "$1" 2 "${@:2}"; }

echo "kvsim benchmark ($(nproc) cores, $(git describe --always --dirty 2>/dev/null)${BASELINE:+, baseline $BASELINE})"
echo
echo "| workload | requests | wall s | requests/s | events/s | ns/event | events/request | peak RSS MiB | speed-up vs baseline | RSS vs baseline |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
SG="--trace sharegpt4 --model Llama-2-13B --platform hcache-a100"
for p in recompute kv-offload; do
  row "sharegpt4 sustainable (0.005 sessions/s) $p" --policy $p $SG --requests "$N" --set session_rate=0.005
  row "sharegpt4 overloaded $p" --policy $p $SG --requests "$N"
done
for n in 2000 10000; do
  row "peer: Poisson 2/s, Llama-2-7B cake-a100, recompute, $n" --policy recompute --trace "$tmp/peer-$n.csv" \
      --model Llama-2-7B --platform cake-a100 --set token_budget=512 --requests $n
done
for p in hcache cacheflow; do
  row "8 replicas tp2×pp2 $p" --policy $p $SG --replicas 8 --tp 2 --pp 2 --requests "$N" --set session_rate=2
done
for n in 10000 100000 1000000; do
  [ "$n" -le "$MAX" ] || continue
  row "sharegpt4 overloaded kv-offload $n (RSS)" --policy kv-offload $SG --requests $n --no-csv
done
row_with "compare --policies all, sustainable, $CMPN requests, serial (-j 1)" cmp_j1 $SG --policies all --requests "$CMPN" --set session_rate=0.005
row_with "compare --policies all, sustainable, $CMPN requests, -j 2" cmp_j2 $SG --policies all --requests "$CMPN" --set session_rate=0.005
a=${RSS["sharegpt4 overloaded kv-offload 10000 (RSS)"]:-0}
echo
for n in 100000 1000000; do
  b=${RSS["sharegpt4 overloaded kv-offload $n (RSS)"]:-0}
  awk -v a="$a" -v b="$b" -v n="$n" 'BEGIN { if (a > 0 && b > 0) printf "peak RSS at %d requests / at 10^4 (overloaded): %.2f (flat memory: ~1)\n", n, b / a }'
done
j1=${WALL["compare --policies all, sustainable, $CMPN requests, serial (-j 1)"]:-0}
j2=${WALL["compare --policies all, sustainable, $CMPN requests, -j 2"]:-0}
awk -v a="$j1" -v b="$j2" 'BEGIN { if (a > 0 && b > 0) printf "compare -j 2 speed-up over serial: %.2fx (%d cores; the best runs)\n", a / b, '"$(nproc)"' }'
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
