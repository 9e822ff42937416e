#!/usr/bin/env bash
# lint_test.sh — tools/lint_layers.sh's engine call order, on a copy of the tree with calls planted:
# the copy as it is passes; each planted upward call (a module, a header's inline function) or an
# engine module missing from engine_int.h's table fails, naming the file, line, caller and callee.
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
git ls-files -z | while IFS= read -r -d '' f; do
  case $f in sim/* | policies/* | traces/* | kernels/* | results/* | calibrate/* | tools/lint_layers.sh) ;; *) continue ;; esac
  [ -f "$f" ] || continue
  mkdir -p "$tmp/tree/$(dirname "$f")" && cp "$f" "$tmp/tree/$f"
done
git -C "$tmp/tree" init -q && git -C "$tmp/tree" add -A
lint() { LINT_ROOT="$tmp/tree" bash "$tmp/tree/tools/lint_layers.sh" > "$tmp/out" 2>&1; }
expect() { # name, expected exit, a line the output must hold (fixed string; "" none)
  local rc=$2
  if [ "$rc" != "$3" ]; then echo "FAIL $1: exit $rc, expected $3"; cat "$tmp/out"; fail=1; return; fi
  if [ -n "$4" ] && ! grep -qF -- "$4" "$tmp/out"; then echo "FAIL $1: no line \"$4\" in:"; cat "$tmp/out"; fail=1; return; fi
  echo "ok   $1"
}
plant() { # file, text appended; the file restored by unplant
  cp "$tmp/tree/$1" "$tmp/saved" && printf '%s\n' "$2" >> "$tmp/tree/$1" && git -C "$tmp/tree" add -A
  planted=$1
}
unplant() { cp "$tmp/saved" "$tmp/tree/$planted" && git -C "$tmp/tree" add -A; }

lint; expect "the tree as it is" $? 0 "every call runs downward"

n=$(($(wc -l < "$tmp/tree/sim/engine/walk.c") + 4))
plant sim/engine/walk.c $'\nvoid walk_planted(Sim *sm, Replica *rp)\n{\n    form_iteration(sm, rp);\n}'
lint; expect "walk.c calls iteration.c (upward)" $? 1 "sim/engine/walk.c:$n: walk_planted() calls form_iteration() of iteration.c, listed after walk.c"
unplant

plant sim/engine/tier.c $'\nvoid tier_planted(Sim *sm, Session *s) { waitq_state_dropped(sm, s); }'
lint; expect "tier.c calls waitq.c (upward)" $? 1 "tier_planted() calls waitq_state_dropped() of waitq.c"
unplant

plant sim/engine/iteration.c $'\nvoid iter_planted(Sim *sm, Replica *rp) { admit_queue(sm, rp); }'
lint; expect "iteration.c calls lifecycle.c (downward)" $? 0 "every call runs downward"
unplant

plant sim/engine/channel.h $'static inline void ch_planted(Sim *sm, Session *s) { tier_touch(sm, s); }'
lint; expect "a header's inline function calls tier.c" $? 1 "ch_planted() calls tier_touch() of tier.c, listed after engine_int.h"
unplant

printf '#include "sim/engine/engine_int.h"\nint extra_planted(void) { return 0; }\n' > "$tmp/tree/sim/engine/extra.c"
git -C "$tmp/tree" add -A
lint; expect "a module missing from the table" $? 1 "sim/engine/extra.c: not in the order table"
rm "$tmp/tree/sim/engine/extra.c"; git -C "$tmp/tree" add -A

sed -i 's/^ \*   walk\.c /&/; /^ \*   walk\.c /{h;d}; /^ \*   engine\.c /{p;x}' "$tmp/tree/sim/engine/engine_int.h" && git -C "$tmp/tree" add -A
lint; expect "walk.c moved to the table's end: its callers go upward" $? 1 "calls iter_advance() of walk.c, listed after"

[ $fail = 0 ] && echo "lint_test: all passed" || echo "lint_test: FAILED"
exit $fail
