"""test_kvsim.py — the Python entry point against the real binary: a tiny compare and run, the
structures they return, settings reaching the binary, errors carrying kvsim's message.
Run from the repository root: KVSIM_BIN=bin python3 -m unittest discover -s python/tests"""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import kvsim  # noqa: E402

# as_frame=False: these tests read the lists of dicts, whether or not pandas is importable
SMALL = dict(requests=40, seed=3, model="Llama-3.1-8B", platform="cacheflow-h100-10g", as_frame=False)
FRAME = dict(SMALL, as_frame=True)


class CompareTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.r = kvsim.compare(policies=["recompute", "kv-offload"], evict_each_turn=True, **SMALL)

    def test_summary_and_policies(self):
        r = self.r
        self.assertEqual([p["name"] for p in r["summary"]["policies"]], ["recompute", "kv-offload"])
        self.assertEqual(list(r["policies"]), ["recompute", "kv-offload"])
        for name, p in r["policies"].items():
            self.assertEqual(p["requests"], 40, name)
            self.assertGreater(p["ttft_s"]["p99"], 0)
            self.assertGreaterEqual(p["ttft_s"]["p99"], p["ttft_s"]["p50"])
        self.assertEqual(r["summary"]["inputs"]["config"]["model"], "Llama-3.1-8B")
        self.assertTrue(r["summary"]["inputs"]["config"]["evict_each_turn"])
        self.assertEqual(r["policies"]["recompute"]["saved_bytes_per_token"], 0)
        self.assertGreater(r["policies"]["kv-offload"]["saved_bytes_per_token"], 0)
        self.assertIn("| kv-offload |", r["table"])
        self.assertIsNone(r["dir"])  # the temporary directory is gone

    def test_overload_and_warnings_returned(self):
        self.assertEqual(self.r["overloaded"], {"recompute": False, "kv-offload": False})
        self.assertEqual(self.r["warnings"], [])

    def test_warnings_raised_as_python_warnings(self):
        # nothing evicted on an 80 GB GPU at this load: every row is the same, and kvsim says why
        with self.assertWarns(kvsim.KvsimWarning) as cm:
            r = kvsim.compare(policies=["recompute", "kv-offload"], **SMALL)
        self.assertIn("nothing was restored", str(cm.warning))
        self.assertTrue(any("nothing was restored" in w for w in r["warnings"]))
        # every request left out as warm-up: the latencies are absent (None), never 0
        with self.assertWarns(kvsim.KvsimWarning) as cm:
            r = kvsim.run("kv-offload", warmup=100, **SMALL)
        self.assertIn("no request was measured", str(cm.warning))
        self.assertIsNone(r["policies"]["kv-offload"]["ttft_s"]["p99"])

    def test_requests_rows_typed(self):
        rows = self.r["requests"]
        self.assertEqual(len(rows), 80)
        self.assertEqual({row["policy"] for row in rows}, {"recompute", "kv-offload"})
        first = rows[0]
        for k in ("request", "session", "turn", "history_tokens", "new_tokens", "output_tokens"):
            self.assertIsInstance(first[k], int, k)
        for k in ("arrival_s", "ttft_s", "queue_s", "restore_s", "prefill_s", "done_s"):
            self.assertIsInstance(first[k], float, k)
        self.assertIsInstance(first["restore_from"], str)
        self.assertEqual(first["session_id"], "sharegpt4-%d" % first["session"])
        for row in rows:
            self.assertAlmostEqual(row["ttft_s"], row["queue_s"] + row["restore_s"] + row["prefill_s"], places=6)
        # the same requests under both policies
        ids = {p: sorted(x["request"] for x in rows if x["policy"] == p) for p in ("recompute", "kv-offload")}
        self.assertEqual(ids["recompute"], ids["kv-offload"])

    def test_same_inputs_same_results(self):
        again = kvsim.compare(policies=["recompute", "kv-offload"], evict_each_turn=True, **SMALL)
        self.assertEqual(again["requests"], self.r["requests"])
        self.assertEqual(again["summary"]["policies"], self.r["summary"]["policies"])


class RunTest(unittest.TestCase):
    def test_run_keeps_out_dir_and_units(self):
        with tempfile.TemporaryDirectory() as d:
            r = kvsim.run("kv-offload", out=d, slo_ttft="150 ms", **SMALL)
            self.assertEqual(r["dir"], d)
            for f in ("summary.json", "requests.csv", "table.md", "ttft_cdf.svg", "ttft_ccdf.svg"):
                self.assertTrue(os.path.exists(os.path.join(d, f)), f)
        self.assertEqual(list(r["policies"]), ["kv-offload"])
        self.assertEqual(r["summary"]["inputs"]["config"]["slo_ttft"], "150 ms")

    def test_without_requests_csv(self):
        r = kvsim.run("recompute", requests_csv=False, **SMALL)
        self.assertEqual(r["requests"], [])
        self.assertIn("--no-csv", r["command"])

    def test_errors_carry_kvsim_message(self):
        with self.assertRaises(kvsim.KvsimError) as cm:
            kvsim.run("recompute", model="No-Such-Model", requests=5)
        self.assertIn("unknown model 'No-Such-Model'", str(cm.exception))
        self.assertIn("No-Such-Model", cm.exception.stderr)
        self.assertNotEqual(cm.exception.returncode, 0)
        with self.assertRaises(kvsim.KvsimError) as cm:
            kvsim.run("no-such-policy", requests=5)
        self.assertIn("no-such-policy", str(cm.exception))

    def test_binary_not_found(self):
        with self.assertRaises(kvsim.KvsimError) as cm:
            kvsim.run("recompute", binary="/nonexistent/kvsim")
        self.assertIn("/nonexistent/kvsim", str(cm.exception))

    def test_as_frame(self):
        try:
            import pandas
        except ImportError:
            with self.assertRaises(ImportError) as cm:
                kvsim.run("recompute", **FRAME)
            self.assertIn("pandas", str(cm.exception))
            r = kvsim.run("recompute", **dict(SMALL, as_frame=None))
            self.assertIsInstance(r["requests"], list)  # the default without pandas
            return
        r = kvsim.compare(policies=["recompute", "kv-offload"], **FRAME)
        self.assertEqual(len(r["requests"]), 80)
        self.assertIn("ttft_s.p99", r["metrics"].columns)
        self.assertEqual(list(r["metrics"].index), ["recompute", "kv-offload"])
        self.assertEqual(list(r["metrics"]["overloaded"]), [False, False])
        default = kvsim.compare(policies=["recompute", "kv-offload"], **dict(SMALL, as_frame=None))
        self.assertIsInstance(default["requests"], pandas.DataFrame)  # the default with pandas
        r = kvsim.compare(policies=["recompute", "kv-offload"], seeds=2, baseline="recompute", **FRAME)
        self.assertEqual(list(r["intervals"].index), ["recompute", "kv-offload"])
        self.assertIn(("ttft_mean_s", "ci95"), r["intervals"].columns)
        self.assertEqual(list(r["differences"].index), ["kv-offload"])
        self.assertEqual(list(r["metrics"]["overloaded"]), [0, 0])  # seeds overloaded, out of 2


class SeedsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.r = kvsim.compare(policies=["recompute", "kv-offload"], evict_each_turn=True, seeds=3,
                              baseline="recompute", **SMALL)

    def test_intervals_from_the_seeds(self):
        r = self.r
        self.assertEqual(r["seeds"], [3, 4, 5])  # seed_base defaults to the seed setting
        self.assertEqual(r["level"], 0.95)
        self.assertEqual(r["baseline"], "recompute")
        for policy in ("recompute", "kv-offload"):
            m = r["intervals"][policy]["ttft_mean_s"]
            self.assertEqual(m["n"], 3)
            self.assertAlmostEqual(m["mean"], sum(m["per_seed"]) / 3, places=12)
            self.assertGreaterEqual(m["ci95"], 0)
        self.assertEqual(r["overloaded"], {"recompute": 0, "kv-offload": 0})

    def test_first_seed_is_the_single_run(self):
        one = kvsim.compare(policies=["recompute", "kv-offload"], evict_each_turn=True, **SMALL)
        for policy in ("recompute", "kv-offload"):
            self.assertAlmostEqual(self.r["intervals"][policy]["ttft_mean_s"]["per_seed"][0],
                                   one["policies"][policy]["ttft_s"]["mean"], places=9)

    def test_differences_are_paired(self):
        r = self.r
        d = r["differences"]["kv-offload"]["ttft_mean_s"]
        a = r["intervals"]["kv-offload"]["ttft_mean_s"]["per_seed"]
        b = r["intervals"]["recompute"]["ttft_mean_s"]["per_seed"]
        for k in range(3):
            self.assertAlmostEqual(d["per_seed"][k], a[k] - b[k], places=9)
        self.assertIn("significant", d)
        self.assertIn("kv-offload", r["ratios"])

    def test_seed_arguments_checked(self):
        for bad in (1, 0, "3", True):
            with self.assertRaises(kvsim.KvsimError):
                kvsim.compare(policies=["recompute"], seeds=bad, **SMALL)
        with self.assertRaises(kvsim.KvsimError) as cm:
            kvsim.compare(policies=["recompute"], baseline="recompute", **SMALL)
        self.assertIn("seeds=N", str(cm.exception))

    def test_one_seed_has_no_intervals(self):
        r = kvsim.run("recompute", **SMALL)
        self.assertNotIn("intervals", r)


if __name__ == "__main__":
    unittest.main()
