#!/usr/bin/env bash
# regen_costmodels.sh — regenerate the committed spec cost models (results/costmodels/*.sql) from the
# catalogs. Run after changing the spec backend or the catalogs, review the diff, commit.
# The test suite checks that the committed dumps still equal what the code derives.
set -euo pipefail
cd "$(dirname "$0")/.."
out=results/costmodels
while read -r platform model tp; do
  [ -z "$platform" ] && continue
  db=$(mktemp -u /tmp/kvcal.XXXXXX.db)
  bin/kvcal spec --platform "$platform" --model "$model" --tp "$tp" --db "$db" >/dev/null
  bin/kvcal export --db "$db" --format sql --out "$out/spec-$platform-$model-tp$tp.sql"
  rm -f "$db"
  echo "wrote $out/spec-$platform-$model-tp$tp.sql"
done <<'LIST'
hcache-a100 Llama-2-7B 1
hcache-a100 Llama-2-13B 1
cacheflow-h100-10g Llama-3.1-8B 1
LIST
