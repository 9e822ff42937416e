#!/usr/bin/env bash
# lint_words_test.sh — tools/lint_words.sh catches working words planted in a file and passes what only
# looks like one (another project's issue, "two waves of blocks"). Ends with "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
pass=0; fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ok()  { pass=$((pass+1)); echo "ok    lint: $1"; }
bad() { fail=$((fail+1)); echo "FAIL  lint: $1" >&2; sed 's/^/      /' "$tmp/out" | head -10 >&2; }
# words are assembled here so that this file does not hold them itself
w=wa; w="${w}ve"; i=iss; i="${i}ue"; td=TO; td="${td}DO"
# refused FILE DESC TEXT: a file whose second line is TEXT fails the lint, named with its line
refused() {
  printf '/* first line */\n%s\n' "$3" > "$tmp/$1"
  bash tools/lint_words.sh "$tmp/$1" > "$tmp/out" 2>&1; local rc=$?
  if [ $rc = 1 ] && grep -qF "$tmp/$1:2: working word" "$tmp/out"; then ok "$2"; else bad "$2 (exit $rc)"; fi
}
# passed FILE DESC TEXT: a file holding TEXT passes
passed() {
  printf '%s\n' "$3" > "$tmp/$1"
  bash tools/lint_words.sh "$tmp/$1" > "$tmp/out" 2>&1; local rc=$?
  if [ $rc = 0 ] && grep -qF "1 files, no working words" "$tmp/out"; then ok "$2"; else bad "$2 (exit $rc)"; fi
}
refused a.c "a numbered round in a comment" "/* added in $w 9 */"
refused b.md "a numbered round with a hyphen, capitalised" "${w^}-12 made it faster."
refused c.py "an unnumbered round" "# until this $w the emitter listed them"
refused d.sh "since a round" "echo since $w"
refused e.c "an issue by number" "static int x; /* for $i 16 */"
refused f.md "an issue by #number, capitalised" "${i^} #11 asked for it."
refused g.h "a to-do marker" "/* $td later */"
passed h.json "another project's issue is a source" "\"source\": \"NVIDIA/nvbandwidth $i #11 and #53\""
passed i.cu "GPU waves of blocks" "/* enough blocks for two ${w}s of the multiprocessors */"
passed j.c "a file without working words" "int main(void) { return 0; }"
# the tree as committed passes
bash tools/lint_words.sh > "$tmp/out" 2>&1 && ok "the tracked files" || bad "the tracked files"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
