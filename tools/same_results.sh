#!/usr/bin/env bash
# same_results.sh OLD_KVSIM NEW_KVSIM [WORKDIR] — do two builds of kvsim give the same results?
#
# Runs a fixed set of experiments (the default comparison, every scenario with all of its
# policies, parallel layouts, save modes, stores, CacheFlow ablations, the shipped real traces when
# present) with both binaries and compares, per experiment:
#   - requests.csv byte for byte; when only one of the two files has the session_id column (added
#     after the baseline: the trace's own session name) or the preemptions column (added with KV
#     blocks on demand) or the prefix_hit_tokens column (added with the prefix cache) or the e2e_s
#     column (added with the E2E latency), that column is
#     left out of the comparison,
#   - table.md row by row in its first eleven columns (policy … SLO %) and every line outside the
#     table, byte for byte: the header row and the two last columns ("saved per token" in binary
#     units, "restore/bound" with "–" where it does not apply) changed spelling on purpose, and
#     their values are compared exactly in summary.json (saved_bytes_per_token,
#     restore_over_lower_bound),
#   - summary.json's "policies" array (every metric), byte for byte after JSON normalisation,
#   - the figures (*.svg) and utilisation.csv / timeline.csv byte for byte (SAME_FIGURES=0: not;
#     for a baseline from before a figure changed on purpose).
# summary.json's "kvsim" and "inputs" blocks are not compared: they record the code revision and the
# configuration, whose spelling a refactor may change on purpose. Nor is its top-level "oracle"
# object (the trace's oracle bound, added after the baseline: a function of the trace and the
# settings, not of any run). Nor is each policy entry's
# "knobs" object (the save mode and knob values the policy ran with; added after the baseline), nor
# its "preemption" object (KV blocks on demand; added after the baseline), nor
# its "load" object (throughput, goodput, trimming, the steady-state test; added after the baseline),
# nor its "nothing_restored" flag or "ssd_wear" object (added after the baseline), nor its "e2e_s"
# distribution (added after the baseline; requests.csv's done_s and arrival_s, which are compared,
# determine it), nor its saved_state.promoted and saved_state.prefetched counts (added after the baseline), nor its "tiers"
# object (bytes written per tier and write amplification; added after the baseline), nor, when only one of
# the two has them, the CXL memory tier's keys (restore_from.cxl, bytes.cxl_read, utilisation.cxl, ...),
# nor, when only one of the two has them, the engine's event split (queue_events, decode_steps,
# cancelled_timers; their sum must then equal events),
# nor the table's load footer lines ("warning: P: overloaded: ...", "note: P: not in steady state:
# ...", "trimmed: ...") whose numbers are in that object.
# Exit 0 when every experiment matches, 1 otherwise (the differing files are named).
set -u
old=${1:?usage: same_results.sh OLD_KVSIM NEW_KVSIM [WORKDIR]}
new=${2:?usage: same_results.sh OLD_KVSIM NEW_KVSIM [WORKDIR]}
work=${3:-$(mktemp -d)}
N=${SAME_REQUESTS:-400}
mkdir -p "$work"
traces=$(dirname "$0")/../traces/data

cases=()
add() { cases+=("$*"); }
add "--config configs/default.json --policies all --requests $N"
for s in $("$old" list scenarios | awk '/^[a-z]/ {print $1}'); do
  add "--scenario $s --policies all --requests $N"
done
add "--policies all --requests $N --tp 2 --pp 2 --model Llama-3.1-8B --platform cacheflow-h100-10g"
add "--policies all --requests $N --pp 4 --model Llama-3.1-70B --platform h200 --tp 2"
add "--policies all --requests $N --model Qwen3-30B-A3B --platform h200 --tp 2"
for m in turn iteration direct; do add "--policies all --requests $N --set save_mode=$m"; done
for st in dram dram+remote remote; do add "--policies all --requests $N --set store=$st --platform cacheflow-a100-40g"; done
add "--policies all --requests $N --set store=dram+ssd --set dram=2GB --platform hcache-a100"
for ax in token layer gpu batch; do add "--policies cacheflow --requests $N --pp 2 --platform cacheflow-h100-10g --model Llama-3.1-8B --set cf_$ax=0"; done
add "--policies kv-quant --requests $N --set quant_bits=4"
add "--policies all --requests $N --set restore_share=0.3 --set token_budget=1024"
add "--policies all --requests $N --trace leval --set evict_each_turn=1 --set n_ssd=2"
add "--policies all --requests $N --trace swebench --replicas 2 --platform cacheflow-h100-10g --model Llama-3.1-8B --set replicas=2"
add "--policies all --requests $N --set engine=none --set mem_util=0.5 --set block_tokens=32"
for f in leval.csv swebench.csv mooncake_conversation.csv; do
  [ -f "$traces/$f" ] && add "--policies all --requests $N --trace $traces/$f --platform cacheflow-h100-10g --model Llama-3.1-8B"
done

fail=0 i=0
# table.md without its header row, separator, blank lines and load footer, each table row cut to its first eleven columns
tab() { awk -F'|' '/^\| policy \|/ || /^\|---/ {next} /^(warning|note): [^ ]+: (overloaded|not in steady state): / || /^trimmed: / || /^$/ {next} /^\|/ {o=""; for (i = 2; i <= 12; i++) o = o "|" $i; print o "|"; next} {print}' "$1"; }
# requests.csv equal but for a session_id column only one of them has
reqs() {
  python3 - "$1" "$2" <<'PY'
import csv, sys
def rows(path, drop):
    with open(path, newline="") as f:
        r = list(csv.reader(f))
    for col in drop:
        if col in r[0]:
            k = r[0].index(col)
            r = [row[:k] + row[k + 1:] for row in r]
    return r
ha, hb = (next(csv.reader(open(p, newline=""))) for p in sys.argv[1:3])
drop = [c for c in ("session_id", "preemptions", "prefix_hit_tokens", "e2e_s") if (c in ha) != (c in hb)]
sys.exit(0 if drop and rows(sys.argv[1], drop) == rows(sys.argv[2], drop) else 1)
PY
}
# summary.json's policies, normalised; the engine's event split (queue_events, decode_steps,
# cancelled_timers: added after the baseline) left out where the other file lacks it, and then its
# sum checked against events, which both have
norm() {
  python3 - "$1" "$2" <<'PY'
import json, sys
p, q = (json.load(open(f))["policies"] for f in sys.argv[1:3])
split = ("queue_events", "decode_steps", "cancelled_timers")
def drop_cxl(o):  # the CXL memory tier's keys (added after the baseline)
    if isinstance(o, dict):
        for k in [k for k in o if k.startswith("cxl")]:
            del o[k]
        for v in o.values():
            drop_cxl(v)
for x in p:
    for k in ("knobs", "load", "preemption", "nothing_restored", "ssd_wear", "e2e_s", "tiers"):
        x.pop(k, None)
    x.get("saved_state", {}).pop("promoted", None)
    x.get("saved_state", {}).pop("prefetched", None)
    if q and "cxl" not in q[0].get("restore_from", {}):
        drop_cxl(x)
    if q and not all(k in q[0] for k in split) and all(k in x for k in split):
        if sum(x.pop(k) for k in split) != x["events"]:
            x["events"] = "queue_events + decode_steps + cancelled_timers differ from events"
print(json.dumps(p, sort_keys=True, indent=0))
PY
}
for c in "${cases[@]}"; do
  i=$((i + 1))
  a=$work/$i.old b=$work/$i.new
  # shellcheck disable=SC2086
  "$old" compare $c --quiet --out "$a" >"$a.log" 2>&1; ra=$?
  # shellcheck disable=SC2086
  "$new" compare $c --quiet --out "$b" >"$b.log" 2>&1; rb=$?
  bad=""
  [ $ra = $rb ] || bad="exit $ra vs $rb"
  if [ -z "$bad" ] && [ $ra = 0 ]; then
    cmp -s "$a/requests.csv" "$b/requests.csv" || reqs "$a/requests.csv" "$b/requests.csv" || bad="$bad requests.csv"
    [ "$(tab "$a/table.md")" = "$(tab "$b/table.md")" ] || bad="$bad table.md"
    [ "$(norm "$a/summary.json" "$b/summary.json")" = "$(norm "$b/summary.json" "$a/summary.json")" ] || bad="$bad summary.json"
    if [ "${SAME_FIGURES:-1}" = 1 ]; then
      for f in "$a"/*.svg "$a/utilisation.csv" "$a/timeline.csv"; do
        [ -f "$f" ] || continue
        cmp -s "$f" "$b/${f##*/}" || bad="$bad ${f##*/}"
      done
    fi
  fi
  if [ -n "$bad" ]; then
    echo "DIFF  [$i] $c:$bad  ($a vs $b)"
    fail=1
  else
    echo "same  [$i] $c$([ $ra = 0 ] || echo " (both exit $ra)")"
  fi
done
[ $fail = 0 ] && echo "all ${#cases[@]} experiments identical" || echo "differences found"
exit $fail
