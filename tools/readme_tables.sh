#!/usr/bin/env bash
# readme_tables.sh — regenerate the README's quoted results after an intentional change of numbers:
# the block between "BEGIN make-run output" and "END make-run output" (what `make run` prints: the
# 5-seed comparison of configs/default.json with its differences and ratios to kv-offload) and the
# table between "BEGIN seed-1 table" and "END seed-1 table" (one replication, seed 1). Everything
# else in README.md is left alone; the file is written aside and renamed.
# Usage: bash tools/readme_tables.sh [KVSIM]   (default bin/kvsim)
set -euo pipefail
cd "$(dirname "$0")/.."
KVSIM=${1:-bin/kvsim}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$KVSIM" compare --config configs/default.json --policies all --seeds 5 --baseline kv-offload \
    --out "$tmp/five" > /dev/null 2>&1
# table.md without its leading blank line, a blank line after the title line
awk 'NF || started { if (!started) { started = 1; print; print ""; next } print }' "$tmp/five/table.md" > "$tmp/five.txt"
"$KVSIM" compare --config configs/default.json --policies all --out "$tmp/one" > /dev/null 2>&1
# the seed-1 table: the Markdown table lines of table.md
grep '^|' "$tmp/one/table.md" > "$tmp/one.txt"
awk -v five="$tmp/five.txt" -v one="$tmp/one.txt" '
  /^<!-- BEGIN make-run output/ { print; print "```"; while ((getline l < five) > 0) print l; print "```"; skip = 1; next }
  /^<!-- END make-run output/   { skip = 0 }
  /^<!-- BEGIN seed-1 table/    { print; print ""; while ((getline l < one) > 0) print l; print ""; skip = 1; next }
  /^<!-- END seed-1 table/      { skip = 0 }
  !skip { print }' README.md > README.md.tmp
if cmp -s README.md README.md.tmp; then rm README.md.tmp; echo "readme_tables: README.md unchanged"
else mv README.md.tmp README.md; echo "readme_tables: README.md updated (git diff README.md)"; fi
