#!/usr/bin/env bash
# rejudge_refit.sh — Cake's and HCache's published claims (configs/claims/{cake,hcache}.json) run again
# on the spec model refitted to Vidur's A100 kernels (stack=vidur), beside the default
# (docs/fidelity.md "Cake and HCache on the refitted A100"). Each claim's own settings are kept; the
# claims' "set" gets stack=vidur, and HCache's also gpu=A100-80GB (Vidur measured the 80 GB A100; the
# HCache box's A100-40GB has no vidur row), plus a control run with that GPU swap alone. Tolerances
# are the claim files' own. Writes DIR/{default,gpu-swap,vidur}/report.md and prints each verdict.
#   tools/rejudge_refit.sh [DIR] (default build/rejudge-refit); KVSIM=bin/kvsim
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/rejudge-refit}
kvsim=${KVSIM:-bin/kvsim}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$tmp" <<'PY'
import json, os, sys
tmp = sys.argv[1]
for variant, extra in (("gpu-swap", {}), ("vidur", {"stack": "vidur"})):
    os.makedirs(os.path.join(tmp, variant))
    for name in ("cake", "hcache"):
        with open(f"configs/claims/{name}.json") as f:
            d = json.load(f)
        for c in d["claims"]:
            c.setdefault("set", {}).update(extra)
            if name == "hcache":
                c["set"]["gpu"] = "A100-80GB"
        with open(os.path.join(tmp, variant, f"{name}.json"), "w") as f:
            json.dump(d, f, indent=1)
PY
"$kvsim" reproduce --only cake --quiet --out "$tmp/default-cake" >/dev/null
"$kvsim" reproduce --only hcache --quiet --out "$tmp/default-hcache" >/dev/null
mkdir -p "$out/default"
cat "$tmp/default-cake/report.md" "$tmp/default-hcache/report.md" > "$out/default/report.md"
for v in gpu-swap vidur; do
  "$kvsim" reproduce --claims "$tmp/$v" --quiet --out "$out/$v" >/dev/null
done
for v in default gpu-swap vidur; do
  echo "== $v"
  grep '^| ' "$out/$v/report.md" | grep -v '^| paper\|^|---' | awk -F'|' '{printf "%-60.60s | %s | %s\n", $4, $7, $8}'
done
