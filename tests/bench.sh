#!/usr/bin/env bash
# bench.sh — simulator speed and memory (make bench). Prints a Markdown table: simulated requests per
# wall second, events per second, simulated time / wall time, peak RSS, for
#   1. a ShareGPT4-like replay on one GPU (the real-time goal: >= 50,000x),
#   2. the SWE-bench trace (traces/data/swebench.csv),
#   3. the Mooncake conversation trace on an 8-replica cluster,
#   4. a synthetic stream of BENCH_STREAM requests (default 10M) at 1M and at full length: peak RSS
#      must not grow with trace length (ratio printed).
# Each row is one process; RSS is the whole process's ru_maxrss.
set -u
cd "$(dirname "$0")/.."
STREAM=${BENCH_STREAM:-10000000}
KVSIM=${KVSIM:-bin/kvsim}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
row() { # name, kvsim args...
  local name=$1; shift
  if ! "$KVSIM" run --quiet --stats --no-csv --out "$tmp/out" "$@" 2> "$tmp/err" > /dev/null; then
    echo "| $name | failed: $(tail -1 "$tmp/err") | | | | | |"; return
  fi
  local line; line=$(grep '^stats ' "$tmp/err" | tail -1)
  local req ev sim wall rss
  req=$(sed 's/.*requests=\([0-9]*\).*/\1/' <<< "$line"); ev=$(sed 's/.*events=\([0-9]*\).*/\1/' <<< "$line")
  sim=$(sed 's/.*sim_s=\([0-9.]*\).*/\1/' <<< "$line"); wall=$(sed 's/.*wall_s=\([0-9.]*\).*/\1/' <<< "$line")
  rss=$(sed 's/.*maxrss_kib=\([0-9]*\).*/\1/' <<< "$line")
  awk -v n="$name" -v r="$req" -v e="$ev" -v s="$sim" -v w="$wall" -v m="$rss" 'BEGIN {
    if (w <= 0) w = 1e-9;
    printf "| %s | %d | %.3f | %.0f | %.2f M | %.0fx | %.1f |\n", n, r, w, r / w, e / w / 1e6, s / w, m / 1024 }'
  echo "$rss" > "$tmp/rss.$name"
}
echo "kvsim benchmark ($(nproc) cores, $(git describe --always --dirty 2>/dev/null))"
echo
echo "| workload | requests | wall s | requests/s | events/s | sim/wall | peak RSS MiB |"
echo "|---|---:|---:|---:|---:|---:|---:|"
row "sharegpt4 1 GPU (A100, Llama-2-7B, kv-offload)" --policy kv-offload --trace sharegpt4 --requests 200000 \
    --set session_rate=0.05 --set evict_each_turn=1 --set max_context=16384
if [ -f traces/data/swebench.csv ]; then
  row "swebench.csv (H100, Llama-3.1-8B, 4 replicas)" --policy kv-offload --trace traces/data/swebench.csv \
      --platform cacheflow-h100-40g --model Llama-3.1-8B --replicas 4 --set max_context=131072
fi
if [ -f traces/data/mooncake_conversation.csv ]; then
  row "mooncake conversation (H100, 8 replicas)" --policy kv-offload --trace traces/data/mooncake_conversation.csv \
      --platform cacheflow-h100-40g --model Llama-3.1-8B --replicas 8 --set max_context=131072
fi
row "synthetic stream 1M (8 replicas)" --policy kv-offload --trace sharegpt4 --requests 1000000 --replicas 8 \
    --platform cacheflow-h100-40g --model Llama-3.1-8B --set session_rate=0.5 --set evict_each_turn=1
row "synthetic stream $STREAM (8 replicas)" --policy kv-offload --trace sharegpt4 --requests "$STREAM" --replicas 8 \
    --platform cacheflow-h100-40g --model Llama-3.1-8B --set session_rate=0.5 --set evict_each_turn=1
a=$(cat "$tmp/rss.synthetic stream 1M (8 replicas)" 2>/dev/null || echo 0)
b=$(cat "$tmp/rss.synthetic stream $STREAM (8 replicas)" 2>/dev/null || echo 0)
echo
awk -v a="$a" -v b="$b" -v n="$STREAM" 'BEGIN { if (a > 0) printf "peak RSS at %d requests / at 1M: %.2f (flat memory: ~1)\n", n, b / a }'
