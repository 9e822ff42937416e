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
# tests/ and tools/ may include anything.
# Inside sim/engine, calls run downward too: the order of its modules is the table in
# sim/engine/engine_int.h ("Modules, lowest first"); a call of a function defined in a module listed
# after the caller's fails. Prints every violation (file:line, caller, callee); exit 1 if there is one.
# LINT_ROOT: the tree to check (default: this repository).
set -u
cd "${LINT_ROOT:-$(dirname "$0")/..}" || exit 2
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
# ---- the engine's call order (sim/engine/engine_int.h's table of modules) ----
# strip comments, strings and character constants, keeping the line count
strip_c() {
  awk '
    {
      s = $0; out = ""
      while (s != "") {
        if (inc) {
          k = index(s, "*/")
          if (!k) { s = ""; break }
          inc = 0; s = substr(s, k + 2); continue
        }
        if (!match(s, /\/\*|\/\/|"|\047/)) { out = out s; break }
        out = out substr(s, 1, RSTART - 1); t = substr(s, RSTART, RLENGTH); s = substr(s, RSTART + RLENGTH)
        if (t == "/*") { inc = 1; out = out " "; continue }
        if (t == "//") break
        # a string or character constant: skip to its closing quote (past escapes)
        i = 1; n = length(s)
        while (i <= n && substr(s, i, 1) != t) { if (substr(s, i, 1) == "\\") i++; i++ }
        s = substr(s, i + 1); out = out t t
      }
      print out
    }' "$1"
}
# one line per function definition ("D name static") and per call inside a function body
# ("C line caller callee"), from a stripped file
c_calls() {
  strip_c "$1" | awk '
    function scan_calls(s, ln,    m, nm, pre) {
      while (match(s, /[A-Za-z_][A-Za-z_0-9]*[ \t]*\(/)) {
        nm = substr(s, RSTART, RLENGTH); sub(/[ \t]*\($/, "", nm)
        pre = substr(s, 1, RSTART - 1)
        if (pre !~ /(\.|->)[ \t]*$/ && fn != "") print "C", ln, fn, nm
        s = substr(s, RSTART + RLENGTH)
      }
    }
    {
      line = $0
      if (depth == 0) {
        if (hdr == "" && line ~ /^[A-Za-z_]/) hdr = line
        else if (hdr != "") hdr = hdr " " line
        if (hdr != "" && index(line, ";") && !index(line, "{")) { hdr = ""; next }
        if (hdr != "" && index(line, "{")) {
          h = substr(hdr, 1, index(hdr, "{") - 1)
          gsub(/__attribute__[ \t]*\(\([^)]*\)\)/, "", h)
          fn = ""
          if (h ~ /\)[ \t]*$/ && h !~ /=/ && match(h, /[A-Za-z_][A-Za-z_0-9]*[ \t]*\(/)) {
            fn = substr(h, RSTART, RLENGTH); sub(/[ \t]*\($/, "", fn)
            print "D", fn, (h ~ /^static/ ? 1 : 0)
          }
          hdr = ""
          body = substr(line, index(line, "{"))
          if (fn != "") scan_calls(body, NR)
          depth += gsub(/\{/, "{", line) - gsub(/\}/, "}", line)
          next
        }
        next
      }
      scan_calls(line, NR)
      depth += gsub(/\{/, "{", line) - gsub(/\}/, "}", line)
      if (depth == 0) fn = ""
    }'
}
# the table: the engine_int.h rows "*   name.c  what it does" between "Modules, lowest first" and
# the line after the table
engine_order() {
  awk '/Modules, lowest first/ { on = 1; next }
       on && /^ \*   [A-Za-z_0-9]+\.[ch] / { print $2; rows = 1; next }
       on && rows && /^ \*    / { next }
       on && rows { exit }' sim/engine/engine_int.h
}
check_engine_order() {
  local order files f r=0 ebad=0 i
  order=$(engine_order)
  if [ -z "$order" ]; then echo "sim/engine/engine_int.h: the table of engine modules (\"Modules, lowest first\") is missing"; return 1; fi
  declare -A rank=()
  i=0
  for f in $order; do
    i=$((i + 1))
    if [ ! -f "sim/engine/$f" ]; then echo "sim/engine/engine_int.h: the order table lists $f, which does not exist"; ebad=1; fi
    rank[$f]=$i
  done
  files=$(git ls-files 'sim/engine/*.c' 'sim/engine/*.h')
  declare -A def=()
  local tmp; tmp=$(mktemp -d)
  for f in $files; do
    b=${f#sim/engine/}
    case $b in
      *.c) if [ -z "${rank[$b]:-}" ]; then echo "$f: not in the order table of sim/engine/engine_int.h (\"Modules, lowest first\")"; ebad=1; continue; fi ;;
      *.h) rank[$b]=${rank[engine_int.h]} ;;
    esac
    c_calls "$f" > "$tmp/$b"
    case $b in *.c) while read -r _ name st; do [ "$st" = 0 ] && def[$name]=$b; done < <(grep '^D ' "$tmp/$b") ;; esac
  done
  for f in $files; do
    b=${f#sim/engine/}
    [ -f "$tmp/$b" ] || continue
    row=$b
    case $b in *.h) row=engine_int.h ;; esac
    declare -A own=()
    while read -r _ name _; do own[$name]=1; done < <(grep '^D ' "$tmp/$b")
    while read -r _ line caller callee; do
      [ -n "${own[$callee]:-}" ] && continue
      m=${def[$callee]:-}
      [ -n "$m" ] || continue
      if [ "${rank[$m]}" -gt "${rank[$b]}" ]; then
        echo "$f:$line: $caller() calls $callee() of $m, listed after $row in engine_int.h's order: calls run downward only"
        ebad=1
      fi
    done < <(grep '^C ' "$tmp/$b")
    unset own
  done
  rm -rf "$tmp"
  return $ebad
}

cbad=0
check_engine_order || cbad=1
[ $bad = 0 ] && echo "lint-layers: $n files, every include runs downward" || echo "lint-layers: upward includes found"
[ $cbad = 0 ] && echo "lint-layers: engine modules in engine_int.h's order, every call runs downward" || echo "lint-layers: upward calls between engine modules found"
[ $bad = 0 ] && [ $cbad = 0 ]
