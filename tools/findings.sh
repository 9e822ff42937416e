#!/usr/bin/env bash
# findings.sh — regenerate results/findings.md: the questions the papers left open, answered with
# kvsim compare --seeds 5 (means ± 95 % CIs over seeds, every policy on the same trace per seed).
#
# Responsible for: the exact commands of every table (each is printed into the report), the runs
# (outputs under $FINDINGS_DIR, default build/findings), the report text around the tables.
# Not responsible for: the tables' arithmetic (tools/findings_tables.py), the simulation (bin/kvsim).
# Usage: bash tools/findings.sh [KVSIM] [REPORT]   (make findings: bin/kvsim results/findings.md)
# Env: SEEDS (default 5), JOBS (default 2), FINDINGS_DIR. Runs in about two minutes on 2 cores.
set -eu
kvsim=${1:-bin/kvsim}
report=${2:-results/findings.md}
seeds=${SEEDS:-5}
jobs=${JOBS:-2}
out=${FINDINGS_DIR:-build/findings}
here=$(cd "$(dirname "$0")" && pwd)
tables="python3 $here/findings_tables.py"
rm -rf "$out"
mkdir -p "$out"/models "$out"/quant "$out"/fair "$out"/scale "$out"/cgen "$out"/maps "$out"/oracle
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
cmds=()

# run NAME ARGS...: one kvsim compare --seeds run into $out/NAME; the command is kept for the report
run() {
  local name=$1
  shift
  local c="kvsim compare $* --seeds $seeds --jobs $jobs --quiet --out $out/$name"
  cmds+=("$c")
  "$kvsim" compare "$@" --seeds "$seeds" --jobs "$jobs" --quiet --out "$out/$name" >/dev/null 2>>"$out/stderr.log"
}

# -------- 1. HCache vs KV offload over MHA -> GQA-4 -> GQA-8 (MoE), with adaptive beside them
pol1=kv-offload,hcache,adaptive,ideal
m1=()
for spec in "hcache-a100 Llama-2-7B 1" "hcache-a100 Llama-3.1-8B 1" "hcache-a100 Qwen3-30B-A3B 2" \
            "h200 Llama-2-7B 1" "h200 Llama-3.1-8B 1" "h200 Qwen3-30B-A3B 1" "h200 Llama-3.1-70B 2"; do
  set -- $spec
  run "models/$1__$2" --config configs/findings/chat.json --platform "$1" --model "$2" --tp "$3" --policies $pol1
  m1+=("$out/models/$1__$2")
done
n1=${#cmds[@]}

# -------- 2. quantized state vs full precision on every catalogued platform
pol2=kv-offload,kv-quant,hcache,hcache-quant,adaptive,ideal
m2=()
# every catalogued platform: HCache's box with its own model (MHA), every other with a GQA model;
# the state where the box keeps it (the SSD array; a remote store over the NIC for CacheFlow's boxes;
# DRAM alone on Cake's, which have no SSD)
specs=()
for p in $("$kvsim" list platforms | awk 'NF { print $1 }'); do
  if [ "$p" = hcache-a100 ]; then specs+=("$p Llama-2-7B"); else specs+=("$p Llama-3.1-8B"); fi
done
for spec in "${specs[@]}"; do
  set -- $spec
  case "$1" in cacheflow-*) store=dram+remote ;; cake-*) store=dram ;; *) store=dram+ssd ;; esac
  for bits in 8 4; do
    run "quant/$1__$2__$bits" --config configs/findings/chat.json --platform "$1" --model "$2" --set store=$store \
      --policies $pol2 --set kv-quant.bits=$bits --set hcache-quant.bits=$bits --set adaptive.min_bits=$bits
    m2+=("$out/quant/$1__$2__$bits")
  done
done
n2=${#cmds[@]}

# -------- 3. fairness: CacheFlow's IO order under sustained load, per history class
m3=()
names=(oldest mrf fifo edf aging)
for o in 0 1 2 3 4; do
  run "fair/${o}-${names[$o]}" --config configs/findings/fairness.json --policies cacheflow --set cacheflow.io_order=$o
  m3+=("$out/fair/${o}-${names[$o]}")
done
n3=${#cmds[@]}

# -------- 6. CacheGen's per-chunk level (kv-quant.adaptive) on three boxes of section 2 (SSD Gen4, SSD Gen5, 10 GbE), 8 bit
m2b=()
for spec in "hcache-a100 Llama-2-7B" "h200 Llama-3.1-8B" "cacheflow-h100-10g Llama-3.1-8B"; do
  set -- $spec
  store=dram+ssd
  [ "$1" = cacheflow-h100-10g ] && store=dram+remote
  run "cgen/$1__$2" --config configs/findings/chat.json --platform "$1" --model "$2" --set store=$store \
    --policies kv-quant --set kv-quant.bits=8 --set kv-quant.adaptive=true
  m2b+=("$out/quant/$1__$2__8" "$out/cgen/$1__$2")
done
n2b=${#cmds[@]}

# -------- 4/5. stage-parallel scaling S = 1, 2, 4, 8 (shared NIC vs a NIC per stage) and one tier
pol4=cacheflow,hcache,hcache-cf,ideal
m4=()
for box in cacheflow-h100-10g cacheflow-h100-80g; do
  for model in Llama-3.1-8B Qwen3-8B Llama-2-7B; do
    for S in 1 2 4 8; do
      for nic in shared per-stage; do
        [ "$S" = 1 ] && [ $nic = per-stage ] && continue
        nps=false
        [ $nic = per-stage ] && nps=true
        run "scale/${box}__${model}__${S}__${nic}" --config configs/findings/scaling.json --platform $box --model $model \
          --pp "$S" --set nic_per_stage=$nps --policies $pol4
        m4+=("$out/scale/${box}__${model}__${S}__${nic}")
      done
    done
  done
done
n4=${#cmds[@]}

# -------- 7. decision maps: the fastest restoration by history length and resource, the papers' boxes
# and two current ones (kvsim map, isolated requests, --seeds seeds, 16 cost draws)
m7=()
mcmds=()
pol7=recompute,kv-offload,hcache,hcache-noschd,naive-hybrid,cake,cacheflow,adaptive,hcache-cf # lossless: section 2 has the quantized forms
for spec in "hcache-a100 Llama-3.1-8B 1 n_ssd=1,2,4" "hcache-a100 Qwen3-30B-A3B 2 n_ssd=1,2,4" \
            "cake-a100 Llama-3.1-8B 1 nic=10GbE,32Gbps,100G" "cake-a100 Qwen3-30B-A3B 1 nic=10GbE,32Gbps,100G" \
            "cacheflow-h100-10g Llama-3.1-8B 1 nic=10GbE,40GbE,100G" "cacheflow-h100-10g Llama-3.1-70B 4 nic=10GbE,40GbE,100G" \
            "cacheflow-h100-10g Qwen3-30B-A3B 1 nic=10GbE,40GbE,100G" \
            "h200 Llama-3.1-8B 1 nic=100G,200G,400G" "h200 Llama-3.1-70B 2 nic=100G,200G,400G" "h200 Qwen3-30B-A3B 1 nic=100G,200G,400G" \
            "cacheflow-l40s-10g Llama-3.1-8B 1 nic=10GbE,25GbE,40GbE" "cacheflow-l40s-10g Llama-3.1-70B 4 nic=10GbE,25GbE,40GbE" \
            "cacheflow-l40s-10g Qwen3-30B-A3B 2 nic=10GbE,25GbE,40GbE"; do
  set -- $spec
  d="$out/maps/$1__$2"
  mcmds+=("kvsim map --platform $1 --model $2 --set tp=$3 --vary $4 --policies $pol7 --seeds $seeds --jobs $jobs --out $d")
  "$kvsim" map --platform "$1" --model "$2" --set tp="$3" --vary "$4" --policies "$pol7" --seeds "$seeds" --jobs "$jobs" --out "$d" \
    >/dev/null 2>>"$out/stderr.log"
  m7+=("$d")
done

# -------- 8. how far each policy is from the trace's oracle bound: every shipped scenario, its first
# 400 requests, one compare per seed (the bound is per trace, so per seed)
m8=()
for sc in $("$kvsim" list scenarios | awk '/^[a-z]/ {print $1}'); do
  for ((k = 1; k <= seeds; k++)); do
    "$kvsim" compare --scenario "$sc" --policies all --requests 400 --seed "$k" --quiet --out "$out/oracle/$sc/seed-$k" \
      >/dev/null 2>>"$out/stderr.log"
  done
  m8+=("$out/oracle/$sc")
done

"$kvsim" list models >"$tmp"
# the fairness figure: per-class TTFT p99 per IO order (kvsim plot --bars over a tidy CSV)
$tables fair_csv "${m3[@]}" >"$out/fair/p99.csv"
"$kvsim" plot --bars "$out/fair/p99.csv" --title "Per-class TTFT p99 by CacheFlow IO order (mean ± 95 % CI over $seeds seeds)" \
  --ylabel "TTFT p99 (ms)" --out "$(dirname "$report")/findings-fairness.svg" >/dev/null

show_cmds() { # FROM TO: the commands of runs [FROM, TO)
  echo '```sh'
  for ((i = $1; i < $2; i++)); do echo "${cmds[$i]}"; done
  echo '```'
}

{
  cat <<EOF
# Findings: what the papers did not test

Generated by \`make findings\` (tools/findings.sh; tables by tools/findings_tables.py). Every number is a mean over $seeds seeds (1..$seeds)
± the 95 % Student-t half-width; every policy replays the same trace per seed, so ratios are paired
seed by seed. Costs are the spec roofline backend (no calibrated store): absolute times are
estimates of the model, the comparisons are what to read. Small request counts keep the whole run
short; raise \`requests\` in configs/findings/*.json for tighter intervals. Mechanisms and closed
forms: docs/findings-method.md. The headline scenarios are checked by \`kvsim check\`
(configs/scenarios/findings-*.json, results/reference/).

## 1. Where HCache's advantage over KV offload holds, shrinks and flips

Hidden states are \`D\` elements per token and layer, the KV cache \`2·h_kv·d_h\`: half the KV on an
MHA model, 2× on GQA-4, 4× on GQA-8. HCache trades those bytes for a K/V projection per layer. The
table puts each catalogued attention kind on HCache's own box (A100-40GB, PCIe Gen4, 4 PM9A3 SSDs)
and on a Gen5 H200 box (8 CM7 SSDs), multi-round chat with every round restoring its evicted
history from DRAM/SSD (configs/findings/chat.json). \`adaptive\` (storage budget 1× the fp16 KV,
lossless forms only) picks per layer and per request among what it stored and recompute.

$(show_cmds 0 "$n1")

$($tables models "$tmp" "${m1[@]}")

Restore = admission to the state being on the GPU (mean per request); "hcache ÷ kv-offload" is the
paired ratio of the restore means (below 1: HCache faster); the verdict needs the whole interval
beyond ±10 %. **For a reader deciding what to deploy:** HCache's advantage over KV offload is an MHA
result. On HCache's own box and on the Gen5 box it holds for Llama-2 (MHA: hidden states are half
the KV) and flips for every GQA model — by roughly the ratio of the bytes (GQA-4: about 2×, GQA-8:
3–4×), because the hidden states are the larger form and the projection is extra work; the MoE
model behaves like its attention (GQA-8), its cheap projection does not rescue it. \`adaptive\`,
storing no more than KV offload, is never behind the better of the two beyond the intervals and
beats both on MHA (hidden states for most layers plus a recomputed prefix, within a KV-sized
budget). Deploy HCache only for MHA models; for GQA keep KV (or let a per-layer chooser decide).

## 2. Quantized state vs full precision

Quantized per token with one fp16 scale per \`d_h\` elements: \`bits/16 + 1/d_h\` of the fp16 bytes
(8 bit: 0.508, 4 bit: 0.258 with d_h = 128), paying the cost model's dequantize per restored layer
(hidden states: the op over \`D\` instead of \`2·h_kv·d_h\` elements per token). Accuracy is an
input, not simulated: a row with 8 or 4 bits is only as deployable as that width's accuracy on the
task (CacheGen reports negligible loss at its default levels; 4-bit hidden states are untested in
the literature). \`adaptive\` here admits forms down to the row's width.

$(show_cmds "$n1" "$n2")

$($tables quant "${m2[@]}")

"restore ÷ its fp16 form": kv-quant against kv-offload, hcache-quant against hcache, paired by
seed. **For a reader deciding what to deploy:** quantization pays where restoration is IO-bound and
can cost where it is not. Over a 10 GbE remote store quantized KV cuts restore time several-fold
(and 4 bit far more than 8 bit), and quantized hidden states help HCache too. From SSD on the A100
box 8-bit KV gains about a quarter, but quantized hidden states gain nothing for the MHA model:
HCache's split is already compute-bound there, and the dequantize only adds to the projection. On
the Gen5 H200 box the links outrun the dequantize and quantized KV restores *slower* than fp16
(TTFT mean still drops a little: fewer bytes contend with the other requests' traffic).
Across the whole catalogue the same rule sorts the boxes: over 10 and 40 GbE remote stores 4-bit
KV restores in 0.12–0.65× the fp16 time; on the fastest paths (the 80 Gb/s L40S box, the Gen5
H200, the RTX 4090 box's SSDs) 8-bit KV is no faster or slower (1.03–1.37×); Cake's DRAM-only
boxes gain little at 8 bit (0.91–0.92×) and more at 4 bit (0.58–0.61×, wide intervals).
Quantized hidden states shorten HCache's restore on every GQA box (0.49–0.99×).
\`adaptive\` admitting the same width is the fastest or tied on every box at equal or smaller
storage. Note the remote-store rows: with a slow NIC HCache (its IO-bound split recomputes most
layers) beats plain KV offload even on a GQA model — the advantage there comes from recompute, not
from hidden states. Accuracy is the deciding input this table cannot give: pick the width from
task accuracy first, then read the gain here.

## 3. Fairness of CacheFlow's IO order

One NIC shared by every restoration (configs/findings/fairness.json: remote store over 10 GbE,
histories up to 32K, sessions arriving at 0.4/s with 5 s think time). Orders (cacheflow.io_order):
oldest request first (Algorithm 1 as kvsim models it: the default), most-remaining-first (the
paper's literal rule), FIFO, earliest TTFT deadline first (targets 200 ms below 2K history tokens,
1 s above), and aging (most-remaining-first, but a request past its class target goes first).
Classes: short < 2K history tokens <= medium < 8K <= long.

$(show_cmds "$n2" "$n3")

$($tables fair "${m3[@]}")

![Per-class TTFT p99 by IO order](findings-fairness.svg)

(findings-fairness.svg: the table's three p99 columns, bars with their 95 % intervals; drawn by
\`kvsim plot --bars\` from a tidy CSV that tools/findings_tables.py writes.)

**For a reader deciding what to deploy:** under sustained load the IO order moves tail latency
between classes more than it moves the mean. Most-remaining-first read literally gives the worst
long- and medium-class tails (their first chunks wait behind ever-growing remainders) without
helping short requests much; aging bounds that only loosely. EDF with per-class targets gives the
shortest short-class tail and the lowest mean, with long-class tails no worse than FIFO; the
oldest-first default protects the long class best but leaves short requests the worst tail. With
a TTFT objective per class, use EDF (cacheflow.io_order=3); without one, FIFO is the simpler fair
choice.

## 4. Scaling CacheFlow's stage-parallel restoration: S = 1, 2, 4, 8

With S pipeline stages CacheFlow stores the activation entering every stage but the first (one
hidden state per token each) so that each stage restores its own layers at once: its first ℓ_s
layers recomputed from its boundary activation in a lane, the others' KV loaded. Every stage has
its own H2D link; the remote store's NIC is shared by the stages (one per host, the default) or one
per stage (\`nic_per_stage=true\`: each stage's GPUs on their own node). Pipeline synchronisation
is the engine's: the iteration walks the stages in order, so stage s's layers start after stage
s−1's and after its own lane, and a lane waits for its boundary activation (loaded first). Stage
imbalance: Qwen3-8B has 36 layers (S = 8: stages of 5 and 4), Llama-3.1-8B and Llama-2-7B 32.
Multi-round chat at light load, KV only in the remote store (configs/findings/scaling.json); the
speed-up is restore(S = 1) ÷ restore(S), paired by seed, the efficiency the speed-up ÷ S (the
harmonic bound T*/S would be a speed-up of S, efficiency 1).

$(show_cmds "$n2b" "$n4")

$($tables scale "${m4[@]}")

Stored size of the boundary activations against the KV cache, per catalogued model (fp16; S − 1
hidden states of \`D\` elements per token against the KV of all \`L\` layers):

$($tables boundary "$tmp")

**For a reader deciding what to deploy:** the GPU axis scales only as far as the link does. With
one NIC shared by the stages, the boundary activations themselves cross that NIC ahead of the KV
(each is half a KV layer on an MHA model, two on GQA-4), one after another: at S = 2 one boundary
buys a ~1.2× speed-up over 10 GbE, but at S = 4 and 8 the boundaries cost more NIC time than the
parallel recompute saves, the stage-parallel plan is seldom chosen and the speed-up falls back to
1 (over 80 Gb/s it peaks at S = 4 and drops at S = 8, efficiency 0.15–0.25). With a NIC per stage
the IO scales with S: 2.1–2.3× at S = 8 over 10 GbE, 4.2–4.8× over 80 Gb/s (efficiency 0.5–0.6)
— there the per-stage NICs do most of the work by themselves (at S = 8 over 80 Gb/s the GQA models'
plain layer-wise split over 8 NICs beats the stage-parallel one). T*/S is not reached because the
boundaries go first, the stages' walks stay in order (pipeline synchronisation: stage s starts
after stage s − 1 and its own lane), and the new input's iteration is not parallel; stage
imbalance costs little here (Qwen3-8B's 5/4-layer stages at S = 8: 4.2× against Llama-3.1-8B's
4.8× over 80 Gb/s). Storage is small: at S = 8 the boundaries are 11 % of the KV for Llama-2-7B,
44 % for Llama-3.1-8B, 88 % for Qwen2.5-7B (GQA-7, small KV). Buy stage parallelism for
restoration together with per-stage bandwidth to the store, not over one shared NIC.

## 5. One tier: HCache's hidden states as CacheFlow's boundary activations

\`hcache-cf\` stores HCache's per-layer hidden states and nothing else; the hidden state entering a
stage's first layer is that stage's boundary activation, so each stage recomputes its first layers
from it while the later layers' hidden states load and are projected (HCache's split is its S = 1
case). Keeping both instead means HCache's hidden states plus CacheFlow's KV and boundary
activations; its TTFT is at best the faster of \`hcache\` and \`cacheflow\` per seed (a per-request
chooser could do a little better, never worse). Same runs as section 4.

$($tables onetier "${m4[@]}")

**For a reader deciding what to deploy:** one tier stores the hidden states alone: a third of what
keeping both stores on an MHA model (0.5 against 1.5–1.6 × the KV) and about 60 % on GQA-4 (2.0
against 3.0–3.4). On the MHA model it restores as fast as the better of the two or faster (0.94–1.01
× their TTFT: the stage-parallel lanes from hidden-state boundaries beat CacheFlow's KV). On GQA
models it is up to 5 % slower over 10 GbE and 2–36 % slower over 80 Gb/s, where KV is the smaller form
and the projection is extra work; with S = 1 it is plain HCache. Use one tier for MHA models (or
where storage is the constraint); for GQA models keep CacheFlow's KV and its cheap boundaries.
The \`hcache-cf ≥ ideal\` column checks per seed that it never beats the no-restoration reference.

## 6. CacheGen's per-chunk level choice

\`kv-quant.adaptive=true\` stores both levels (8 and 4 bit: 0.766 of the fp16 KV) and chooses per
layer of each request (the engine's unit of a layer-wise restoration): 8 bit when the layer's load
arrives by the time the layer walk reaches it at the bandwidth the request gets now (the channel's
time × (1 + the restorations ahead of it)), else 4 bit, and a prefix of layers recomputed when that
finishes first (docs/findings-method.md). Beside each: the fixed 8-bit form of section 2 (same
seeds, the same trace per seed, so the ratio is paired).

$(show_cmds "$n3" "$n2b")

$($tables cgen "${m2b[@]}")

**For a reader deciding what to deploy:** the per-chunk choice matters where the link is the
bottleneck: over 10 GbE it recomputes about 40 % of the layers, moves a few to 4 bit and cuts the
restore time of fixed 8-bit KV by about 2.5× (TTFT p99 by 3×); from the A100 box's SSDs it serves
half the layers at 4 bit for a third off; on the Gen5 box it keeps nearly every layer at 8 bit and
changes little. It costs 1.5× the storage of one 8-bit copy, and the layers it moves to 4 bit carry
4-bit accuracy (an input, not simulated): read the 4-bit share as the share of the context served at
the lower quality.

## 7. When each restoration pays: decision maps

\`kvsim map\` (docs/reference.md "Decision maps") on the papers' boxes (HCache's A100 box with its
SSDs, Cake's A100 with its remote store, CacheFlow's H100 node over 10 GbE) and two current ones (an
H200 Gen5 node with a 100–400 Gb/s remote store; an L40S cloud node over 10–40 GbE), for
Llama-3.1-8B (GQA-4), Llama-3.1-70B (GQA-8, where it fits) and Qwen3-30B-A3B (MoE): per history
length and resource value, the fastest of the lossless contenders (every policy but \`ideal\` and the
quantized \`kv-quant\` and \`hcache-quant\`, whose accuracy is an input kvsim does not simulate:
section 2 compares them) by the mean
TTFT of isolated restoring requests over $seeds seeds, with its margin over the runner-up, the
largest probability over the histories that the decision flips when each cost class (compute, host
link, NIC, SSD) is off by up to ±15 %, and the history lengths where the fastest member of one
family (recompute, kv-offload, cake/cacheflow, hcache) overtakes another's. Saved state sits where
the resource serves it (the SSD array for \`n_ssd\`, the remote store for \`nic\`). Llama-3.1-70B is left
out of the A100 boxes: on HCache's four A100-40GB (tp 4) its weights leave 8,800 tokens of KV, less
than most histories mapped, and Cake's box has one GPU.

\`\`\`sh
$(printf '%s\n' "${mcmds[@]}")
\`\`\`

$($tables maps "${m7[@]}")

**For a reader deciding what to deploy:** on every box, model and bandwidth mapped, a split between
recomputing and loading (\`naive-hybrid\`, \`cacheflow\`; \`adaptive\` picks the same) is the fastest
lossless restoration from 4K tokens of history up, by a few ms to a few hundred ms at 32K over 10
GbE; at 512 tokens plain \`kv-offload\` ties with it on the faster links (for Llama-3.1-8B from 25
Gb/s on the L40S node, 100 Gb/s on the A100 and H100 nodes, 200 Gb/s on the H200 node). Between the
pure families the crossings are: over 10 GbE recomputing beats loading the KV from a few hundred
tokens (264 on Cake's A100, 559 on the L40S node, 681 for Qwen3-30B-A3B on the H100 node; 66 for
Llama-3.1-70B on the H100 node) until attention's quadratic cost turns it back at 23–32K tokens (not
within 128K for the 70B model); loading hidden states beats loading KV over 10–40 Gb/s links from a
few hundred or a few thousand tokens on, up to 19–119K tokens (where the order turns back) or to
the longest history searched; on the H200 node's 100–400 Gb/s
store, and wherever a row says none, the order of the families does not change. Most decisions
survive a ±15 % error in every cost class (flip 0 %); where the largest flip reaches 40–60 % the two
leaders are within a few ms of each other and either will do. These are isolated requests: \`--load\`
maps a loaded point, where queueing can reorder them.

## 8. How far each policy is from the best any policy could do: the oracle bound

Every \`kvsim compare\` reports the trace's oracle bound (docs/model.md "Oracle bound"): a lower bound
on the mean TTFT that no policy can beat on that trace and platform, knowing the whole future —
each request's prefill alone, whatever restoration cannot overlap it at the best compute and link
rates, perfect prefetch during think and tool gaps at the link's rate, and histories kept in HBM
across gaps wherever the KV pools hold them (an exact min-cost-flow LP). The table gives each
policy's mean TTFT ÷ that bound on every shipped scenario (its first 400 requests, all policies,
seeds 1..$seeds, one run per seed: mean ± 95 % half-width of the per-seed ratios; ⚠N: N of the
policy's runs were overloaded, so its ratio grows with the run's length). \`ideal\` keeps every
history in HBM whatever the pool holds, so it may come in under the bound (hcache-leval).

\`\`\`sh
for s in \$(kvsim list scenarios | awk '/^[a-z]/ {print \$1}'); do for k in \$(seq 1 $seeds); do
  kvsim compare --scenario \$s --policies all --requests 400 --seed \$k --quiet --out build/findings/oracle/\$s/seed-\$k; done; done
\`\`\`

$($tables oracle "$seeds" "${m8[@]}")

**For a reader deciding what to deploy:** the bound has no queueing term (a queueing bound is not
sound when a slow policy also delays its own later turns), so under load most of a ratio is
queueing that every policy pays, \`ideal\` included (on hcache-sharegpt4-llama2-13b its mean queueing
ranges from 16 ms to 1.3 s over the five seeds, hence the wide intervals): read a policy's distance
from \`ideal\`'s ratio as what its restoration costs, and \`ideal\`'s own ratio as what queueing and
batching cost. On the scenarios that are neither queue-bound nor without restorations, the best
policy of each sits 1.3–5.8× above the bound (18× on CacheFlow's SWE-bench agent trace over 10 GbE,
where long tool-call histories come back at the link's rate), while \`ideal\` sits 1.0–1.6×: most of
the distance is restoration a better policy could still win back. The worst policy of each is
5–300× above it (recompute, or \`hcache-noschd\`'s IO-bound hidden states over 10 GbE). The
bound's prefetch assumes the link is free during every gap; none of the built-in policies prefetch,
so \`oracle.without_prefetch\` in summary.json is the closer bound for them. Keeping histories across
gaps is proven only where turns evict their state (\`evict_each_turn\`, every shipped scenario but
hicache-multiturn, kvbm-sharegpt4 and mooncake-ssd-offload, whose rows are therefore estimates of the
bound, not proven ones).
EOF
} >"$report"
echo "findings: wrote $report (${#cmds[@]} runs, outputs in $out)"
