#!/usr/bin/env bash
# readme_tables.sh — regenerate every result that README.md and docs/*.md quote, after an intentional
# change of numbers (or of the policy registry). Each quoted result sits between marker comments:
#   <!-- BEGIN make-run output ... --> / <!-- END make-run output -->   what `make run` prints: the
#       verdict and compact table of the 5-seed comparison of configs/default.json against kv-offload;
#   <!-- BEGIN seed-1 table ... --> / <!-- END seed-1 table -->         one replication, seed 1 (table.md's rows);
#   <!-- BEGIN policies ... --> / <!-- END policies -->                 `kvsim list policies` as a table;
#   <!-- BEGIN output: CMD --> / <!-- END output -->                    CMD (a `bin/kvsim compare ...
#       --out DIR` command, shown above it) run into a scratch directory: what it prints.
# Everything else in the files is left alone; a changed file is written aside and renamed. A block of
# README.md whose output marks an overloaded policy is refused (exit 1): the quick start shows
# sustainable operating points only.
# Usage: bash tools/readme_tables.sh [--check] [KVSIM]   (default bin/kvsim)
#   --check: change nothing; exit 1 naming the files and blocks whose numbers differ from what KVSIM
#   gives (make test runs it: a page that quotes stale numbers fails the suite)
set -euo pipefail
cd "$(dirname "$0")/.."
CHECK=0
if [ "${1:-}" = "--check" ]; then CHECK=1; shift; fi
KVSIM=${1:-bin/kvsim}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 - "$KVSIM" "$tmp" "$CHECK" <<'PY'
import os, re, shlex, subprocess, sys
kvsim, tmp, check = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
stale = []
n = [0]

def compare(args, name=None):
    """run `kvsim compare ARGS` into a scratch directory; what it prints (name None) or its file NAME
    (table.md: the full tables), without leading or trailing blank lines"""
    n[0] += 1
    out = os.path.join(tmp, "r%d" % n[0])
    args = list(args)
    shown = "results/default"  # the directory the quoted command writes (make run's without --out)
    if "--out" in args:
        shown = args[args.index("--out") + 1]
        args[args.index("--out") + 1] = out
    else:
        args += ["--out", out]
    p = subprocess.run([kvsim] + args, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    text = p.stdout if name is None else open(os.path.join(out, name)).read()
    lines = text.replace(out + "/", shown + "/").split("\n")
    while lines and not lines[0].strip(): lines.pop(0)
    while lines and not lines[-1].strip(): lines.pop()
    return lines

def make_run():
    t = compare(["compare", "--config", "configs/default.json", "--policies", "all", "--seeds", "5",
                 "--baseline", "kv-offload"])
    return ["```"] + t + ["```"]

def seed1():
    t = compare(["compare", "--config", "configs/default.json", "--policies", "all"], "table.md")
    return [""] + [l for l in t if l.startswith("|")] + [""]

def policies():
    txt = subprocess.run([kvsim, "list", "policies"], check=True, capture_output=True, text=True).stdout
    rows = ["| policy | what it does |", "|---|---|"]
    for l in txt.split("\n"):
        if not l.strip() or l.startswith(" "): continue
        name, _, what = l.partition(" ")
        rows.append("| `%s` | %s |" % (name, what.strip().replace("|", "\\|")))
    return rows + ["", "Each policy's knobs (`--set POLICY.KNOB=V`): `bin/kvsim list policies`."]

def output(cmd):
    argv = shlex.split(cmd)
    if argv[:2] != ["bin/kvsim", "compare"]:
        sys.exit("readme_tables: only 'bin/kvsim compare ...' can be quoted, not: " + cmd)
    return ["```"] + compare(argv[1:]) + ["```"]

import glob
files = ["README.md"] + sorted(glob.glob("docs/*.md"))
for path in files:
    src = open(path).read().split("\n")
    out, i = [], 0
    while i < len(src):
        l = src[i]
        m = re.match(r"<!-- BEGIN (make-run output|seed-1 table|policies|output: (.*)) -->$", l.split(" (tools/")[0] + (" -->" if " (tools/" in l else ""))
        if not m:
            out.append(l); i += 1; continue
        kind = m.group(1)
        end = "<!-- END " + ("output" if kind.startswith("output:") else kind) + " -->"
        j = i + 1
        while j < len(src) and src[j] != end: j += 1
        if j == len(src): sys.exit("readme_tables: %s line %d: %s has no %s" % (path, i + 1, l, end))
        body = (make_run() if kind == "make-run output" else seed1() if kind == "seed-1 table"
                else policies() if kind == "policies" else output(m.group(2)))
        if body != src[i + 1:j]:
            stale.append("%s line %d: %s" % (path, i + 1, l))
        # the README is a quick start: what it quotes must run at a sustainable load
        marks = [b for b in body if (re.match(r"\s*overloaded\b", b) and b.strip() != "overloaded: none")
                 or re.search(r"warning:.*\boverloaded\b", b)]
        if path == "README.md" and marks:
            sys.exit("readme_tables: README.md line %d: %s marks an overloaded policy (%s); a quick-start "
                     "example must run at a sustainable load" % (i + 1, l, marks[0].strip()))
        out += [l] + body + [end]
        i = j + 1
    new = "\n".join(out)
    if not check and new != "\n".join(src):
        open(path + ".tmp", "w").write(new)
        os.replace(path + ".tmp", path)
        print("readme_tables: %s updated (git diff %s)" % (path, path))
if check:
    if stale:
        print("readme_tables: these quote numbers that differ from what %s gives now:" % kvsim)
        for x in stale: print("  " + x)
        print("  (an intended change of numbers: run 'bash tools/readme_tables.sh' and commit the files)")
        sys.exit(1)
    print("readme_tables: every quoted result in %s is what %s gives" % (", ".join(files), kvsim))
elif not stale:
    print("readme_tables: %s unchanged" % ", ".join(files))
PY
