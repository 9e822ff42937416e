#!/usr/bin/env bash
# gpu_check.sh — `make gpu-check`: everything that needs a real GPU, in one command (about 10
# minutes on an H200: build 1-2, tests and the small calibration 1, the full calibration 3-5, the
# cuda validation 2-3).
#
#   1. build for sm_90 (make CUDA_ARCH=90 -j16, objects in build/sm90 so that objects built
#      without the arch flag elsewhere are not reused);
#   2. the GPU kernel tests (kvtest kernels_gpu), a small cuda calibration of every op
#      (kvtest calib_cuda_small_run_every_op) and the cuda replay of kvsim schedules (kvtest
#      exec_cuda_: kv-offload from the SSD and from DRAM, hcache, hcache-cf on two stages; the
#      dependencies kept on the device, every unit landed): they must PASS — a skip (no device)
#      fails the check;
#   3. the full CUDA calibration of the default models (Llama-2-7B, Llama-2-13B, Llama-3.1-8B, tp 1,
#      fp16) into a fresh database, SSD probes on the first model only (scratch: $SCRATCH);
#   4. $OUT/h200.sql (kvcal export --format sql: commit it as the measured cost model);
#   5. the validation cases on cuda (tools/validate.sh BACKEND=cuda, docs/validation.md): cuda
#      calibrations of Tiny-Llama-V (--quick --points small), kvsim's predictions from them, the
#      replays with kvcal execute --backend cuda; VAL_POLS x VAL_HISTS x VAL_BATCHES (default 5 x 1
#      x 2 = 10 cases, one pass, 3 calibrations: 2-3 minutes), the report in the log and
#      $OUT/validation-cuda.json. Run after the export: its failure fails the check but leaves
#      the calibration's outputs ($OUT/h200.sql, the database) in place;
#   6. $OUT/gpu_check.log (everything printed), and the headline figures and wall times on stdout.
#
# Environment: OUT (default ./gpu-check-out), SCRATCH (default build/gpu-check-scratch),
#   MODELS (default "Llama-2-7B Llama-2-13B Llama-3.1-8B"), JOBS (default 16),
#   CUDA_ARCH (default 90), QUICK=1 (quick grids, for a smoke test; the validation then 2 cases),
#   VAL=0 (skip step 5), VAL_POLS, VAL_HISTS, VAL_BATCHES (step 5's cases).
#   DRY=1: print the steps and their commands, run nothing (bash tools/gpu_check.sh with DRY=1
#   works on any machine).
# Exit status: 0 when every step passed, 1 otherwise (the log says which step failed).
set -uo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-./gpu-check-out}
DRY=${DRY:-0}
SCRATCH=${SCRATCH:-build/gpu-check-scratch}
MODELS=${MODELS:-"Llama-2-7B Llama-2-13B Llama-3.1-8B"}
JOBS=${JOBS:-16}
ARCH=${CUDA_ARCH:-90}
BUILD_DIR=build/sm$ARCH
mkdir -p "$OUT" || { echo "gpu_check: cannot create $OUT" >&2; exit 1; }
LOG="$OUT/gpu_check.log"
DB="$OUT/gpu_check.db"
SQL="$OUT/h200.sql"
: >"$LOG"
t_all=$(date +%s)

log() { echo "$@" | tee -a "$LOG"; }
fail() { log "gpu_check: FAILED: $*"; log "gpu_check: log in $LOG"; exit 1; }
# step NAME CMD... — run CMD with its output in the log and on stdout, time it (DRY=1: only say it)
step() {
  local name=$1; shift
  local t0=$(date +%s)
  log "== $name: $*"
  if [ "$DRY" = 1 ]; then log "== $name: (DRY=1: not run)"; return 0; fi
  "$@" 2>&1 | tee -a "$LOG"
  local rc=${PIPESTATUS[0]}
  log "== $name: exit $rc, $(( $(date +%s) - t0 )) s"
  return "$rc"
}

log "gpu_check: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), git $(git describe --always --dirty 2>/dev/null || echo unknown)"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 | tee -a "$LOG"
else
  log "gpu_check: nvidia-smi not found"
fi

# 1. build
step build make CUDA_ARCH="$ARCH" BUILD="$BUILD_DIR" -j"$JOBS" all "$BUILD_DIR/kvtest" || fail "build"
[ "$DRY" = 1 ] || grep -q "CUDA /" "$LOG" || fail "the build found no CUDA toolkit (see the 'kvsim build:' line)"
KVTEST="$BUILD_DIR/kvtest"

# 2. GPU tests: must pass, not skip
run_gpu_tests() {
  local filter=$1 out
  if [ "$DRY" = 1 ]; then step "tests $filter" env KVSIM_ROOT="$PWD" "$KVTEST" "$filter"; return 0; fi
  out=$(mktemp)
  step "tests $filter" env KVSIM_ROOT="$PWD" "$KVTEST" "$filter" >"$out"
  local rc=$?
  cat "$out"
  if [ "$rc" != 0 ]; then rm -f "$out"; fail "tests $filter failed"; fi
  if grep -q '^skip' "$out"; then
    grep '^skip' "$out"
    rm -f "$out"
    fail "tests $filter skipped (no usable CUDA device?): they must pass on a GPU machine"
  fi
  grep -q '^ok' "$out" || { rm -f "$out"; fail "tests $filter: no test ran"; }
  rm -f "$out"
}
run_gpu_tests kernels_gpu
run_gpu_tests calib_cuda_small_run_every_op
run_gpu_tests exec_cuda_

# 3. full calibration of the default models into a fresh database
[ "$DRY" = 1 ] || rm -f "$DB" "$DB-journal" "$SQL"
first=1
for m in $MODELS; do
  extra=()
  if [ "$first" = 1 ]; then extra=(--scratch "$SCRATCH"); first=0; fi
  if [ "${QUICK:-0}" = 1 ]; then extra+=(--quick); fi
  step "calibrate $m" bin/kvcal run --backend cuda --model "$m" --tp 1 --dtype fp16 --db "$DB" ${extra[@]+"${extra[@]}"} ||
    fail "calibration of $m"
done
rm -rf "$SCRATCH"

# 4. the committed form, and the headline figures
step export bin/kvcal export --db "$DB" --format sql --out "$SQL" || fail "export"
step show bin/kvcal show --db "$DB" || fail "show"

# 5. the validation cases on cuda (after the export: a failure here keeps the outputs above)
val_rc=0
if [ "${VAL:-1}" != 0 ]; then
  VDIR="$OUT/validate-cuda"
  if [ "${QUICK:-0}" = 1 ]; then
    vcases=(QUICK=1)
  else
    vcases=(PASSES=1 PER_CASE_CAL=0 "POLS=${VAL_POLS-recompute kv-offload hcache cake cacheflow}"
            "HISTS=${VAL_HISTS-512}" "BATCHES=${VAL_BATCHES-1 3}" PP2_POLS=)
  fi
  step "validate cuda" env BACKEND=cuda KVSIM_BIN=bin "${vcases[@]}" bash tools/validate.sh "$VDIR" || val_rc=$?
  if [ "$DRY" != 1 ]; then
    if [ "$val_rc" = 0 ] && [ -f "$VDIR/validation.json" ]; then
      cp "$VDIR/validation.json" "$OUT/validation-cuda.json"
      python3 - "$OUT/validation-cuda.json" <<'PY' 2>&1 | tee -a "$LOG"
import json, sys
v = json.load(open(sys.argv[1]))
bad = [c["case"] for c in v["cases"] if not c["deps_ok"]]
print(f"validate cuda: {len(v['cases'])} cases replayed, {len(v['skipped'])} not replayed, dependencies kept in all: {not bad}")
for s in v["skipped"]:
    print(f"validate cuda: not replayed: {s['case']}: {s['why']}")
sys.exit(1 if bad or v["skipped"] or not v["cases"] else 0)
PY
      val_rc=${PIPESTATUS[0]}
    else
      val_rc=1
    fi
    [ "$val_rc" = 0 ] || log "gpu_check: FAILED: validate cuda (exit $val_rc; the calibration outputs $SQL and $DB are kept; the cases in $VDIR)"
  fi
fi
[ "$DRY" = 1 ] && { log "gpu_check: DRY=1: nothing was run"; exit 0; }

{
  echo
  echo "== headline figures (from the calibration output above)"
  grep -E '^kvcal run: (run|predicted)|^(gemm_ffn_up|gemm_qkv|attn_prefill|attn_decode|layer_prefill|copies|ssd_read|ssd_write)' "$LOG" |
    grep -v '^== '
  echo "== step wall times"
  grep -E '^== .*: exit [0-9]+, [0-9]+ s$' "$LOG"
  grep -E '^(ttft_ms|restore_ms|iteration_ms) +median' "$LOG" | sed 's/^/validate cuda: /'
  if [ "$val_rc" = 0 ]; then
    echo "gpu_check: passed in $(( $(date +%s) - t_all )) s; $SQL ($(wc -c <"$SQL") bytes), $OUT/validation-cuda.json, $LOG"
  else
    echo "gpu_check: FAILED (validate cuda) after $(( $(date +%s) - t_all )) s; kept: $SQL ($(wc -c <"$SQL") bytes), $LOG"
  fi
} | tee -a "$LOG.tail"
cat "$LOG.tail" >>"$LOG"
rm -f "$LOG.tail"
[ "$val_rc" = 0 ] || exit 1
exit 0
