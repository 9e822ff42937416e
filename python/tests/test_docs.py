"""test_docs.py — docs/python.md's examples run against the real binary: every `>>>` block is
executed as a doctest (the printed output must match, so the page's numbers are the binary's), and
the plain Python blocks run when pandas is importable.
Run from the repository root: KVSIM_BIN=bin python3 -m unittest discover -s python/tests"""
import doctest
import io
import os
import re
import sys
import unittest
import warnings
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import kvsim  # noqa: E402

ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
PAGE = os.path.join(ROOT, "docs", "python.md")


class DocsTest(unittest.TestCase):
    def setUp(self):
        self.cwd = os.getcwd()
        os.chdir(ROOT)  # the examples name repository paths

    def tearDown(self):
        os.chdir(self.cwd)

    def test_doctest_blocks(self):
        with open(PAGE) as f:
            text = f.read()
        test = doctest.DocTestParser().get_doctest(text, {"kvsim": kvsim}, "docs/python.md", PAGE, 0)
        self.assertGreaterEqual(len(test.examples), 20)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        out = io.StringIO()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", kvsim.KvsimWarning)  # the examples show them as values
            runner.run(test, out=out.write)
        failed, tried = runner.summarize(verbose=False)
        self.assertEqual(failed, 0, out.getvalue() + "\n(when the binary's numbers moved on purpose: "
                         "KVSIM_BIN=bin python3 tools/python_docs.py rewrites the page's outputs)")
        self.assertEqual(tried, len(test.examples))

    def test_pandas_blocks(self):
        try:
            import pandas  # noqa: F401
        except ImportError:
            self.skipTest("pandas is not importable")
        with open(PAGE) as f:
            blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
        plain = [b for b in blocks if ">>>" not in b]
        self.assertTrue(plain)
        for block in plain:
            with warnings.catch_warnings(), redirect_stdout(io.StringIO()):
                warnings.simplefilter("ignore", kvsim.KvsimWarning)
                exec(compile(block, PAGE, "exec"), {})


if __name__ == "__main__":
    unittest.main()
