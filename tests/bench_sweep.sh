#!/usr/bin/env bash
# bench_sweep.sh — sweep and plan throughput (make bench, after tests/bench.sh). Prints a Markdown
# table: a 100-point sweep (n_ssd 1..10 × dram 10 sizes, kv-offload on ShareGPT4, Llama-2-7B on
# hcache-a100, session_rate 0.05/s — light enough that most points are not overloaded and the
# plan has a real answer — BENCH_SWEEP_REQUESTS requests per point, default 10,000) with -j 1, -j 2 and, when
# bin/kvsim-mpi exists, `mpirun -np 2` (one coordinator and one worker rank): wall time, points per
# hour; then `kvsim plan` on the same space (one seed, the sweep's), with the target set to the
# median TTFT p99 of the sweep's points (rounded up to the ms) so that the answer lies inside the space: the points it
# evaluated against the full grid, with pruning and with --no-prune. Nothing is asserted.
# Environment: KVSIM (default bin/kvsim), KVSIM_MPI (default bin/kvsim-mpi), BENCH_SWEEP_REQUESTS.
set -u
cd "$(dirname "$0")/.."
KVSIM=${KVSIM:-bin/kvsim}
KVSIM_MPI=${KVSIM_MPI:-bin/kvsim-mpi}
N=${BENCH_SWEEP_REQUESTS:-10000}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
DRAM=16GB,32GB,48GB,64GB,96GB,128GB,192GB,256GB,384GB,512GB
SSD=1,2,3,4,5,6,7,8,9,10
grid=(--set model=Llama-2-7B --set platform=hcache-a100 --set trace=sharegpt4 --set requests="$N" --set seed=1
      --set session_rate=0.05 --set max_context=16384 --set evict_each_turn=true --policies kv-offload
      --set n_ssd=$SSD --set dram=$DRAM)
now() { date +%s.%N; }
row() { # label seconds points
  awk -v l="$1" -v s="$2" -v p="$3" 'BEGIN { printf "| %s | %d | %.1f | %.0f |\n", l, p, s, p * 3600 / s }'
}
echo "### 100-point sweep, $N requests per point ($(nproc) cores)"
echo
echo "| run | points | wall s | points/hour |"
echo "|---|--:|--:|--:|"
for j in 1 2; do
  t0=$(now)
  if "$KVSIM" sweep "${grid[@]}" --db "$tmp/j$j.db" -j $j --quiet --csv "$tmp/j$j.csv" >/dev/null 2>"$tmp/err"; then
    row "kvsim sweep -j $j" "$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')" 100
  else echo "| kvsim sweep -j $j | failed: $(tail -1 "$tmp/err") | | |"; fi
done
if [ -x "$KVSIM_MPI" ] && command -v mpirun >/dev/null 2>&1; then
  t0=$(now)
  if mpirun --allow-run-as-root --oversubscribe -np 2 "$KVSIM_MPI" sweep "${grid[@]}" --db "$tmp/mpi.db" --quiet >/dev/null 2>"$tmp/err"; then
    row "mpirun -np 2 kvsim-mpi sweep (1 worker rank)" "$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')" 100
  else echo "| mpirun -np 2 | failed: $(tail -1 "$tmp/err") | | |"; fi
else
  echo "| mpirun -np 2 | skipped: bin/kvsim-mpi or mpirun missing | | |"
fi
echo
# the plan on the same space: the median TTFT p99 of the sweep as the target
med=$(awk -F, 'NR > 1 && $(NF-1) == "ttft_s.p99" { print $NF }' "$tmp/j1.csv" 2>/dev/null | sort -g | awk '{ v[NR] = $1 } END { if (NR) { m = v[int((NR + 1) / 2)] * 1000; printf "%d", (m == int(m)) ? m : int(m) + 1 } }')
if [ -z "$med" ]; then echo "(plan rows skipped: the sweep gave no CSV)"; exit 0; fi
echo "### kvsim plan on the same 100 points (target ttft_p99<=${med}ms, the sweep's median; 1 seed)"
echo
echo "| search | points evaluated | of the grid | wall s | answer |"
echo "|---|--:|--:|--:|---|"
base=(--set model=Llama-2-7B --set platform=hcache-a100 --set trace=sharegpt4 --set requests="$N" --set seed=1
      --set session_rate=0.05 --set max_context=16384 --set evict_each_turn=true --policies kv-offload)
for mode in prune no-prune; do
  extra=(); [ $mode = no-prune ] && extra=(--no-prune)
  t0=$(now)
  if "$KVSIM" plan "${base[@]}" --vary n_ssd=$SSD --vary dram=$DRAM --cost configs/examples/prices.json \
      --target "ttft_p99<=${med}ms" --seeds 1 --max-seeds 1 -j 1 --quiet "${extra[@]}" >"$tmp/plan.md" 2>"$tmp/err"; then
    secs=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')
    ev=$(sed -n 's/^Evaluated \([0-9]*\) of 100 points.*/\1/p' "$tmp/plan.md")
    ans=$(sed -n 's/^\*\*cheapest meeting every target: \(.*\)\*\*.*/\1/p' "$tmp/plan.md")
    awk -v m="$mode" -v e="$ev" -v s="$secs" -v a="${ans:-none}" 'BEGIN { printf "| %s | %d | %.0f %% | %.1f | %s |\n", m, e, e, s, a }'
  else echo "| $mode | failed: $(tail -1 "$tmp/err") | | | |"; fi
done
echo "| full grid (the sweep) | 100 | 100 % | | |"
