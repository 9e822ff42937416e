#!/usr/bin/env bash
# regen_measured.sh — regenerate the committed measured cost models (results/costmodels/measured-*.sql)
# from the public profiles under data/profiles/ (sources: data/profiles/SOURCE.md) with
# `kvcal import-profile`, one store per GPU and model (every tensor-parallel degree of it).
# Run after changing the importer, the profiles or the spec backend (the ops a profile does not
# measure come from it), review the diff, commit. The test suite checks the dumps are current.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-results/costmodels}
hw=data/profiles/hardware-rtxpro6000.json
models=data/profiles/models-qwen3-32b.json
kvcal=${KVCAL:-bin/kvcal}
while read -r name manifests; do
  [ -z "$name" ] && continue
  db=$(mktemp -u /tmp/kvcal-measured.XXXXXX.db)
  # shellcheck disable=SC2086
  "$kvcal" import-profile --db "$db" --hardware "$hw" --models "$models" $manifests >/dev/null
  "$kvcal" export --db "$db" --format sql --out "$out/measured-$name.sql"
  rm -f "$db"
  echo "wrote $out/measured-$name.sql"
done <<'LIST'
rtxpro6000-Llama-3.1-8B data/profiles/llmservingsim/RTXPRO6000/Llama-3.1-8B/bf16/tp1/profile.json data/profiles/llmservingsim/RTXPRO6000/Llama-3.1-8B/bf16/tp2/profile.json
rtxpro6000-Qwen3-32B data/profiles/llmservingsim/RTXPRO6000/Qwen3-32B/bf16/tp1/profile.json data/profiles/llmservingsim/RTXPRO6000/Qwen3-32B/bf16/tp2/profile.json
rtx4090-Llama-3.1-8B data/profiles/llmservingsim/RTX4090/Llama-3.1-8B/bf16/tp1/profile.json
a100-Llama-2-7B data/profiles/vidur/a100/Llama-2-7b-hf/tp1/profile.json data/profiles/vidur/a100/Llama-2-7b-hf/tp2/profile.json data/profiles/vidur/a100/Llama-2-7b-hf/tp4/profile.json
h100-Llama-2-7B data/profiles/vidur/h100/Llama-2-7b-hf/tp1/profile.json data/profiles/vidur/h100/Llama-2-7b-hf/tp2/profile.json data/profiles/vidur/h100/Llama-2-7b-hf/tp4/profile.json
LIST
