"""test_validate_real.py — a smoke test of tools/validate_real.py (make validate-real) on a fixture:
the first 8 requests of LLMServingSim's real RTX PRO 6000 run (tests/fixtures/real/), replayed on the
committed measured store; and a bad request refused by file, line and key.
Run from the repository root: KVSIM_BIN=bin python3 -m unittest discover -s python/tests"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BIN = os.environ.get("KVSIM_BIN", "bin")


def run_tool(out, runs):
    return subprocess.run([sys.executable, os.path.join(ROOT, "tools", "validate_real.py"), "--out", out, "--runs", runs,
                           "--kvsim", os.path.join(BIN, "kvsim"), "--kvcal", os.path.join(BIN, "kvcal")],
                          cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


class ValidateRealSmoke(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_fixture_report(self):
        p = run_tool(self.tmp, "tests/fixtures/real/runs.json")
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(self.tmp, "report.json")) as f:
            rep = json.load(f)
        run = rep["runs"][0]
        self.assertEqual(run["requests"], 8)
        self.assertEqual(run["settings"]["max_num_batched_tokens"], 2048)
        self.assertEqual(run["settings"]["max_num_seqs"], 128)
        for label in ("measured", "spec"):
            for m in ("ttft", "tpot", "e2e"):
                x = run[label][m]
                self.assertEqual(x["real"]["n"], 8)
                self.assertGreater(x["sim"]["mean"], 0)
        # the real TTFT of the first request, from its timestamps (first_token_ts - queued_ts)
        with open(os.path.join(self.tmp, "requests.csv")) as f:
            rows = f.read().splitlines()
        self.assertEqual(len(rows), 9)
        self.assertEqual(rows[1].split(",")[2], "0.169525")
        with open(os.path.join(self.tmp, "report.md")) as f:
            self.assertIn("| TTFT | mean |", f.read())
        # the per-request figure: one point per request and metric (8 x 3), an SVG document
        import xml.etree.ElementTree as ET
        root = ET.parse(os.path.join(self.tmp, "fixture.svg")).getroot()
        self.assertTrue(root.tag.endswith("svg"))
        self.assertEqual(len([e for e in root.iter() if e.tag.endswith("circle")]), 24)

    def _runs_with_meta(self, **extra):
        d = tempfile.mkdtemp(dir=self.tmp)
        shutil.copy(os.path.join(ROOT, "tests/fixtures/real/vllm/requests.jsonl"), d)
        with open(os.path.join(ROOT, "tests/fixtures/real/vllm/meta.json")) as f:
            meta = json.load(f)
        meta.update(extra)
        with open(os.path.join(d, "meta.json"), "w") as f:
            json.dump(meta, f)
        runs = os.path.join(d, "runs.json")
        with open(os.path.join(ROOT, "tests/fixtures/real/runs.json")) as f:
            spec = json.load(f)
        spec[0]["dir"] = d
        with open(runs, "w") as f:
            json.dump(spec, f)
        return runs

    def test_refit_stack_of_the_vllm_version(self):
        # vLLM 0.19.x runs are also replayed on the spec model refitted to vLLM 0.19's kernels;
        # a version kvsim has no fitted stack for gets no such replay
        p = run_tool(os.path.join(self.tmp, "a"), "tests/fixtures/real/runs.json")
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(self.tmp, "a", "report.json")) as f:
            run = json.load(f)["runs"][0]
        self.assertEqual(run["refit_stack"], "vllm-0.19")
        self.assertIn("attention vllm-0.19", run["cost_model_refit"])
        self.assertGreater(run["refit"]["tpot"]["sim"]["mean"], 0)
        self.assertNotEqual(run["refit"]["tpot"]["sim"]["mean"], run["spec"]["tpot"]["sim"]["mean"])
        with open(os.path.join(self.tmp, "a", "report.md")) as f:
            self.assertIn("sim, refit, vllm-0.19", f.read())
        p = run_tool(os.path.join(self.tmp, "b"), self._runs_with_meta(vllm_version="0.6.3"))
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(self.tmp, "b", "report.json")) as f:
            run = json.load(f)["runs"][0]
        self.assertNotIn("refit", run)
        self.assertNotIn("refit_stack", run)

    def test_pool_from_num_gpu_blocks(self):
        # the real run's KV pool, when its metadata give it, is the replay's (kvsim's num_gpu_blocks)
        p = run_tool(os.path.join(self.tmp, "out"), self._runs_with_meta(num_gpu_blocks=30000))
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(self.tmp, "out", "report.json")) as f:
            self.assertEqual(json.load(f)["runs"][0]["settings"]["num_gpu_blocks"], 30000)
        with open(os.path.join(self.tmp, "out", "report.md")) as f:
            self.assertIn("KV pool num_gpu_blocks 30000 (the run's metadata)", f.read())
        # a pool the GPU cannot hold beside the weights: kvsim's refusal, so the setting reached it
        p = run_tool(os.path.join(self.tmp, "out2"), self._runs_with_meta(num_gpu_blocks=10 ** 7))
        self.assertEqual(p.returncode, 1)
        self.assertIn("num_gpu_blocks 10000000", p.stderr)
        self.assertIn("does not fit on RTXPRO6000", p.stderr)

    def test_pool_without_num_gpu_blocks_said(self):
        p = run_tool(self.tmp, "tests/fixtures/real/runs.json")
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(self.tmp, "report.md")) as f:
            self.assertIn("KV pool from mem_util 0.9 (the run's metadata give no num_gpu_blocks)", f.read())

    def test_bad_request_named(self):
        d = os.path.join(self.tmp, "run")
        os.makedirs(d)
        shutil.copy(os.path.join(ROOT, "tests/fixtures/real/vllm/meta.json"), d)
        with open(os.path.join(ROOT, "tests/fixtures/real/vllm/requests.jsonl")) as f:
            lines = f.read().splitlines()
        bad = json.loads(lines[1])
        bad["output_toks"] = 0
        lines[1] = json.dumps(bad)
        with open(os.path.join(d, "requests.jsonl"), "w") as f:
            f.write("\n".join(lines) + "\n")
        runs = os.path.join(self.tmp, "runs.json")
        with open(os.path.join(ROOT, "tests/fixtures/real/runs.json")) as f:
            spec = json.load(f)
        spec[0]["dir"] = d
        with open(runs, "w") as f:
            json.dump(spec, f)
        p = run_tool(os.path.join(self.tmp, "out"), runs)
        self.assertEqual(p.returncode, 1)
        self.assertIn("requests.jsonl: line 2: key output_toks: expected an integer >= 1, got 0", p.stderr)


if __name__ == "__main__":
    unittest.main()
