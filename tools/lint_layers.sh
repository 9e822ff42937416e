#!/usr/bin/env bash
# lint_layers.sh — fail when a file includes a header from a layer above its own.
#
# The layers, lowest first (a file may include its own layer and the ones below it):
#   0 sim/base                       util, units, ops, hist, the option parser
#   1 sim/catalog kernels traces     catalogs; kernels and their twins; trace readers
#   2 sim/cost                       the cost contract: store core, reader, spec backend
#   3 policies                       restoration policies (plans, knobs, IO order)
#   4 sim/engine                     the simulator proper
#   5 results calibrate              report writers; the calibrator
#   6 sim/cli calibrate/cli          the two command-line programs
# tests/ and tools/ may include anything. Prints every violation; exit 1 if there is one.
set -u
cd "$(dirname "$0")/.."
layer() {
  case $1 in
    sim/base/*) echo 0 ;;
    sim/catalog/* | kernels/* | traces/*) echo 1 ;;
    sim/cost/*) echo 2 ;;
    policies/*) echo 3 ;;
    sim/engine/*) echo 4 ;;
    sim/cli/* | calibrate/cli/*) echo 6 ;;
    results/* | calibrate/*) echo 5 ;;
    *) echo "" ;;
  esac
}
bad=0 n=0
while IFS= read -r f; do
  lf=$(layer "$f")
  [ -n "$lf" ] || continue
  n=$((n + 1))
  while IFS=: read -r line inc; do
    h=$(sed -E 's/^#include "([^"]+)".*/\1/' <<<"$inc")
    case $h in */*) ;; *) echo "$f:$line: include \"$h\" is not a path from the repository root"; bad=1; continue ;; esac
    lh=$(layer "$h")
    [ -n "$lh" ] || continue
    if [ "$lh" -gt "$lf" ]; then
      echo "$f:$line: includes $h (layer $lh) from layer $lf: includes run downward only"
      bad=1
    fi
  done < <(grep -nE '^#include "' "$f" | sed -E 's/^([0-9]+):/\1:/')
done < <(git ls-files '*.c' '*.h' '*.cu')
[ $bad = 0 ] && echo "lint-layers: $n files, every include runs downward" || echo "lint-layers: upward includes found"
exit $bad
