#!/usr/bin/env python3
"""python_docs.py — rewrite the printed output of docs/python.md's `>>>` examples from a run of the
current binary, after a change that moves the numbers (python/tests/test_docs.py then passes again).

    KVSIM_BIN=bin python3 tools/python_docs.py [docs/python.md]

Each example runs as doctest runs it (one shared namespace, expressions echoed with repr), from the
repository root; an example that raises keeps its written traceback (doctest matches it with
ELLIPSIS), any other failure stops the rewrite with the file untouched. The page is written aside
and renamed over the original."""
import contextlib
import doctest
import io
import os
import sys
import traceback
import warnings

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))


def main(argv):
    page = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(ROOT, "docs", "python.md"))
    with open(page) as f:
        text = f.read()
    os.chdir(ROOT)  # the examples name repository paths
    lines = text.splitlines(keepends=True)
    examples = doctest.DocTestParser().get_examples(text, page)
    namespace = {}
    outputs = []
    for ex in examples:
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sys.displayhook = lambda v: v is None or print(repr(v))
                exec(compile(ex.source, "%s:%d" % (page, ex.lineno + 1), "single"), namespace)
        except Exception:
            if ex.exc_msg is None:
                sys.stderr.write("%s:%d: the example raised:\n%s" % (page, ex.lineno + 1, traceback.format_exc()))
                return 1
            outputs.append(None)  # the written traceback stays
            continue
        finally:
            sys.displayhook = sys.__displayhook__
        outputs.append(out.getvalue())
    for ex, got in reversed(list(zip(examples, outputs))):
        if got is None:
            continue
        first = ex.lineno + ex.source.count("\n")
        pad = " " * ex.indent
        lines[first:first + ex.want.count("\n")] = [pad + l + "\n" if l else "\n" for l in got.splitlines()]
    tmp = page + ".tmp"
    with open(tmp, "w") as f:
        f.write("".join(lines))
    os.replace(tmp, page)
    changed = sum(1 for ex, got in zip(examples, outputs) if got is not None and got != ex.want)
    print("%s: %d examples run, %d outputs rewritten" % (os.path.relpath(page), len(examples), changed))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
