#!/bin/bash
# ablation_rows.sh [KVSIM] — the isolated-request ablation rows of the "Faithful semantics" issue.
# Isolated requests: B sessions prefill an H-token document at t=0, their next turns (50 new tokens,
# 12 output) arrive 1000 s later (queue 0). Prints the mean TTFT (ms) of those turns.
#   1. hcache vs hcache-noschd (vs naive-hybrid), A100 box, L-Eval lengths, state on the SSD array
#   2. CacheFlow's GPU axis, --pp 2, cacheflow.gpu=1 vs 0, H100 10 Gbps remote, 6K-30K prefix
#   3. cacheflow vs cake, 1/2/4/8 same-time requests of 12K, H100 40 Gbps remote
#   4. direct vs two-stage saves: mean TBT of 16 sessions decoding on the HCache box
set -e
BIN=${1:-bin/kvsim}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ttft() { # POLICY H B [kvsim args]
    local pol=$1 h=$2 b=$3
    shift 3
    { echo "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens"
      for i in $(seq 1 "$b"); do echo "s$i,0,0,$h,1,0"; done
      for i in $(seq 1 "$b"); do echo "s$i,1,1000,50,12,$((h + 1))"; done; } > "$T/t.csv"
    "$BIN" run --policy "$pol" --trace "$T/t.csv" --out "$T/o" --quiet "$@" > /dev/null
    python3 - "$T/o/requests.csv" <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r['turn'] == '1']
print('%.1f' % (sum(float(r['ttft_s']) for r in rows) / len(rows) * 1e3), end=' ')
PY
}
A="--platform hcache-a100 --model Llama-2-7B --set store=dram+ssd --set dram=1GB --set max_context=65536 --set evict_each_turn=true"
echo "1. hcache | hcache-noschd | naive-hybrid (ms), hcache-a100, Llama-2-7B, SSD"
for H in 4096 8192 16384 32768; do echo -n "H=$H: "; for p in hcache hcache-noschd naive-hybrid; do ttft $p $H 1 $A; done; echo; done
A="--platform cacheflow-h100-10g --model Llama-3.1-8B --pp 2 --set store=remote --set evict_each_turn=true"
echo "2. cacheflow gpu=1 | gpu=0 (ms), cacheflow-h100-10g, Llama-3.1-8B, pp 2, remote"
for H in 6144 12288 20480 30720; do echo -n "H=$H: "; for g in 1 0; do ttft cacheflow $H 1 $A --set cacheflow.gpu=$g; done; echo; done
A="--platform cacheflow-h100-40g --model Llama-3.1-8B --set store=remote --set evict_each_turn=true"
echo "3. cacheflow | cake (ms), cacheflow-h100-40g, Llama-3.1-8B, 12K, remote"
for B in 1 2 4 8; do echo -n "B=$B: "; for p in cacheflow cake; do ttft $p 12288 $B $A; done; echo; done
echo "4. hcache mean TBT (ms), two-stage | direct saves, hcache-a100, Llama-2-7B, 16 sessions of 1024 tokens, 256 out"
{ echo "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens"
  for i in $(seq 1 16); do echo "s$i,0,0,1024,256,0"; done; } > "$T/b.csv"
for m in iteration direct; do
    "$BIN" run --policy hcache --trace "$T/b.csv" --out "$T/o" --quiet --platform hcache-a100 --model Llama-2-7B \
        --set store=dram+ssd --set save_mode=$m > /dev/null
    python3 -c "import json;s=json.load(open('$T/o/summary.json'));p=s['policies'];p=p[0] if isinstance(p,list) else p;print('%.2f'%(p['tbt_s']['mean']*1e3),end=' ')"
done
echo
