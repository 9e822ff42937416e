#!/usr/bin/env bash
# stress.sh — random configurations (platform, model, TP/PP, trace, storage tier, save mode, load,
# eviction) with every policy, on the sanitized kvsim: any crash, sanitizer report, deadlock or
# invariant failure fails (runs refused for a clear configuration reason are fine). Part of
# `make check-long`; N=runs (default 60), OFF=seed offset.
cd "$(dirname "$0")/.." || exit 1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
K=${KVSIM:-build/san/bin/kvsim}
plats=(hcache-a100 cake-a100 cake-a100x2 cacheflow-l40s-10g cacheflow-a100-40g cacheflow-h100-80g h200 rtx4090)
models=(Llama-2-7B Llama-3.1-8B Qwen3-8B Qwen3-30B-A3B Mistral-7B-v0.3 Gemma-2-9B Qwen2.5-7B)
traces=(sharegpt4 leval swebench traces/data/mooncake_conversation.csv)
stores=(auto dram dram+ssd remote dram+remote)
saves=(policy turn iteration direct)
fails=0
for i in $(seq 1 ${N:-60}); do
  RANDOM=$((i + ${OFF:-0}))
  p=${plats[$((RANDOM % ${#plats[@]}))]}; m=${models[$((RANDOM % ${#models[@]}))]}
  t=${traces[$((RANDOM % ${#traces[@]}))]}; st=${stores[$((RANDOM % ${#stores[@]}))]}; sv=${saves[$((RANDOM % ${#saves[@]}))]}
  tp=$((1 << (RANDOM % 2))); pp=$((1 << (RANDOM % 3))); rate=$(( (RANDOM % 20) + 1 ))
  evict=$((RANDOM % 2)); dram=$(( (RANDOM % 3) ))
  extra=""; [ $dram = 0 ] && extra="--set dram=2GB"
  out=$($K compare --policies all --platform $p --model $m --tp $tp --pp $pp --trace $t --requests 150 --seed $i \
      --set store=$st --set save_mode=$sv --set session_rate=0.$rate --set evict_each_turn=$evict --set max_context=32768 $extra \
      --quiet --no-csv --out "$tmp/$i" 2>&1)
  rc=$?
  if [ $rc != 0 ] && ! grep -q "does not fit\|has no SSD\|has no NIC\|not divisible\|divide" <<< "$out"; then
    fails=$((fails+1)); echo "FAIL $i: $p $m tp$tp pp$pp $t $st $sv rate0.$rate evict$evict: $(echo "$out" | grep -v '^|' | tail -3)"
  fi
done
echo "stress: $fails failures"
[ "$fails" = 0 ]
