#!/usr/bin/env bash
# readme_examples.sh [FILE.md ...] — run every command that README.md (the default) and the given pages
# show, as a user of a fresh clone would.
#
# Takes each ```sh block of each file in turn, joins continued lines, drops comments, and runs the lines
# that start with bin/ in order, in a scratch directory that links the checkout's bin/, traces/ and
# configs/ (so results/, costs.db and the like land there, not in the checkout). Schematic forms are
# expanded: "list a | b | c" runs each listing, "[--opt v]" runs without and with the bracket;
# a line with "..." is a pattern, not a command, and is reported as such. Lines starting with make
# are the suite's own entry points and are not re-run from here; "mkdir -p results/..." lines run.
# README.md's examples must run at a sustainable load: a command of README.md whose output marks a
# policy or a point as overloaded (the verdict's "overloaded:" line naming one, a warning, a table's
# overloaded column above 0) fails, since a quick start must not show numbers that depend on the run's
# length. The pages under docs/ may show overload on purpose.
# README.md's CI job (the ```yaml block) is run as written too: its apt-get line must install every package
# the build needs (make print-build-debs), its make line must be a target the Makefile knows (checked
# with make -n), and its bin/ commands run like the others, with the checkout's committed results/
# reference and results/costmodels linked in.
# Expected exit: 0, except where run_one says otherwise (the cuda backend without a device exits 1
# with "no CUDA device"; kvcal diff exits 1 when a curve drifted, which two CPU runs may). Ends with "N passed, N failed, N skipped"; exit 1 on a failure.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -gt 0 ] || set -- "$root/README.md"
files=()
for f in "$@"; do
  [ -f "$f" ] || { echo "readme_examples: $f: no such file"; exit 1; }
  files+=("$(cd "$(dirname "$f")" && pwd)/$(basename "$f")")
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ln -s "$root/bin" "$work/bin"
ln -s "$root/traces" "$work/traces"
ln -s "$root/configs" "$work/configs"
mkdir "$work/results"
ln -s "$root/results/reference" "$work/results/reference"
ln -s "$root/results/costmodels" "$work/results/costmodels"
cd "$work" || exit 1

have_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then have_gpu=1; fi

# overload_marks: the lines of a command's output (stdin) that mark a policy or a point as overloaded
overload_marks() {
  python3 -c '
import re, sys
col = None
for l in sys.stdin.read().split("\n"):
    if l.startswith("|"):
        cells = [c.strip() for c in l.strip().strip("|").split("|")]
        if "overloaded" in cells or "overloaded seeds" in cells:
            col = cells.index("overloaded" if "overloaded" in cells else "overloaded seeds")
        elif col is not None and col < len(cells) and not set(cells[col]) <= set("-:") \
                and not re.match(r"^0( of |/)", cells[col]):
            print(l)
        continue
    col = None
    if (re.match(r"\s*overloaded\b", l) and l.strip() != "overloaded: none") \
            or re.search(r"warning:.*\boverloaded\b", l):
        print(l)
'
}

pass=0 fail=0 skip=0
readme=""
run_one() {
  local cmd=$1 want=0 need=""
  case $cmd in
    *"kvcal diff"*) want="0|1" ;; # both are documented outcomes: 1 = a curve drifted
    *"--backend cuda"*"--dry-run"*) ;;
    *"--backend cuda"*) [ $have_gpu = 1 ] || { want=1 need="no CUDA device"; } ;;
  esac
  out=$(timeout 300 bash -c "$cmd" 2>&1); rc=$?
  local marks=""
  if [ "$(basename "$readme")" = README.md ] && [[ $cmd =~ ^bin/kvsim\ (run|compare|plan|sweep|check) ]]; then
    marks=$(overload_marks <<<"$out")
  fi
  if [ -n "$marks" ]; then
    fail=$((fail + 1)); echo "FAIL  readme: $cmd (overloaded: a quick-start example must run at a sustainable load)"
    sed 's/^/      /' <<<"$marks" | head -5
  elif [[ $rc =~ ^($want)$ ]] && { [ -z "$need" ] || grep -q "$need" <<<"$out"; }; then
    pass=$((pass + 1)); echo "ok    readme: $cmd"
  else
    fail=$((fail + 1)); echo "FAIL  readme: $cmd (exit $rc, wanted $want${need:+ with '$need'})"
    sed 's/^/      /' <<<"$out" | tail -5
  fi
}

for readme in "${files[@]}"; do
  echo "== $readme"
  lines=$(awk '/^```sh/ {f = 1; next} /^```/ {f = 0} f' "$readme" |
    sed -E 's/[[:space:]]+#.*$//' | awk '/\\$/ {sub(/\\$/, ""); printf "%s", $0; next} {print}' |
    sed -E 's/[[:space:]]+/ /g; s/^ //; s/ $//')
  while IFS= read -r l; do
    [ -n "$l" ] || continue
    case $l in
      make*) skip=$((skip + 1)); echo "skip  readme: $l (the suite's own entry point)"; continue ;;
      "mkdir -p results/"*) run_one "$l"; continue ;;
      bin/*) ;;
      *) skip=$((skip + 1)); echo "skip  readme: $l (not a command)"; continue ;;
    esac
    if [[ $l == *"..."* ]]; then skip=$((skip + 1)); echo "skip  readme: $l (a pattern, not a command)"; continue; fi
    if [[ $l == *" | "* ]]; then # alternatives: "bin/kvsim list a | b | c"
      head=${l%% | *}; first=${head##* }; prefix=${head% *}
      for alt in "$first" $(sed -E 's/^[^|]*\|//; s/\|/ /g' <<<"$l"); do run_one "$prefix $alt"; done
      continue
    fi
    if [[ $l =~ ^(.*)\ \[(.*)\](.*)$ ]]; then # an optional part: without it, then with it
      a=${BASH_REMATCH[1]} opt=${BASH_REMATCH[2]} z=${BASH_REMATCH[3]}
      run_one "$a$z"
      run_one "$a $opt$z"
      continue
    fi
    run_one "$l"
  done <<<"$lines"
  # the CI job: "- run: CMD" lines and "run: |" blocks of the yaml
  ci=$(awk '/^```yaml/ {f = 1; next} /^```/ {f = 0} f' "$readme" |
    awk '/^ *- run: \|/ {b = 1; next} /^ *- / {b = 0} /^ *- run: / {sub(/^ *- run: /, ""); print; next}
         b && /^ +[^ #]/ {sub(/^ +/, ""); print}' | sed -E 's/[[:space:]]+#.*$//')
  if [ "$(basename "$readme")" != README.md ]; then continue; fi
  [ -n "$ci" ] || { fail=$((fail + 1)); echo "FAIL  readme: no CI job (a yaml block with run: steps) found"; }
  while IFS= read -r l; do
    [ -n "$l" ] || continue
    case $l in
      *"apt-get install"*)
        missing=""
        for p in $(make -s -C "$root" print-build-debs); do
          grep -qw -- "$p" <<<"${l##*install}" || missing="$missing $p"
        done
        if [ -z "$missing" ]; then pass=$((pass + 1)); echo "ok    readme CI: installs every package the build needs"
        else fail=$((fail + 1)); echo "FAIL  readme CI: the apt-get line lacks$missing (make print-build-debs)"; fi ;;
      "mkdir -p results/"*) run_one "$l" ;;
      make*)
        if make -n -C "$root" ${l#make} >/dev/null 2>&1; then pass=$((pass + 1)); echo "ok    readme CI: $l (a target the Makefile knows)"
        else fail=$((fail + 1)); echo "FAIL  readme CI: $l: make -n fails"; fi ;;
      bin/*) run_one "$l" ;;
      *) skip=$((skip + 1)); echo "skip  readme CI: $l (not a command)" ;;
    esac
  done <<<"$ci"
done
echo "$pass passed, $fail failed, $skip skipped"
[ $pass -gt 0 ] || { echo "readme_examples: no command of ${files[*]} ran"; exit 1; }
[ $fail = 0 ]
