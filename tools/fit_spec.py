#!/usr/bin/env python3
"""Fit the spec model's fitted stacks (sim/cost/spec.c, SpecFitRow) to the public profiles.

For each (GPU, stack) row below, the measured rows of its fit profiles (kvcal fidelity --points:
the source's own points with each op's FLOPs and bytes from kvsim's model) are fitted by the
formulas of sim/cost/spec.h (SpecFitRow), minimising the sum of |log(model / measured)| by
coordinate descent (golden-section search per constant, a fixed start and sweep count: the
result is deterministic). Constants are rounded (fractions to 3 decimals, times to 10 ns, the time per key to
0.01 ns, per request to 0.1 ns) before the errors are computed, so the errors printed are the committed model's.

  tools/fit_spec.py [--kvcal bin/kvcal]            the rows as C, and the error tables
  tools/fit_spec.py --check                        exit 1 unless sim/cost/spec.c holds these rows
  tools/fit_spec.py --write                        rewrite the rows in sim/cost/spec.c

What is fitted to what (the rest is the hold-out, reported out of sample):
  vllm-0.19 RTXPRO6000  fit Llama-3.1-8B TP 1, 2; hold-out Qwen3-32B TP 1, 2
  vllm-0.19 RTX4090     fit Llama-3.1-8B TP 1 (the only profile: no hold-out)
  vidur A100-80GB       fit Llama-2-7B TP 1 (GEMMs, elementwise) and the chunk-512 prefill subset; hold-out TP 2, 4
  vidur H100-SXM        fit Llama-2-7B TP 1; hold-out TP 2, 4 (no attention measured)
The real vLLM runs (data/real) are never read here: they are the validation set.
"""
import argparse
import csv
import io
import math
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
P = "data/profiles/"
LSS = P + "llmservingsim/"
VID = P + "vidur/"
# (gpu, stack, source text, [(manifest, role)])
ROWS = [
    ("RTXPRO6000", "vllm-0.19", "LSS_SRC \"RTXPRO6000/meta-llama/Llama-3.1-8B/bf16/tp{1,2}/{dense,attention}.csv\"",
     [(LSS + "RTXPRO6000/Llama-3.1-8B/bf16/tp1/profile.json", "fit"),
      (LSS + "RTXPRO6000/Llama-3.1-8B/bf16/tp2/profile.json", "fit"),
      (LSS + "RTXPRO6000/Qwen3-32B/bf16/tp1/profile.json", "hold-out"),
      (LSS + "RTXPRO6000/Qwen3-32B/bf16/tp2/profile.json", "hold-out")],
     "Llama-3.1-8B TP 1 and 2", "Qwen3-32B TP 1 and 2"),
    ("RTX4090", "vllm-0.19", "LSS_SRC \"RTX4090/meta-llama/Llama-3.1-8B/bf16/tp1/{dense,attention}.csv\"",
     [(LSS + "RTX4090/Llama-3.1-8B/bf16/tp1/profile.json", "fit")],
     "Llama-3.1-8B TP 1", "none (one profile)"),
    ("A100-80GB", "vidur", "VIDUR_SRC \"a100/meta-llama/Llama-2-7b-hf/mlp.csv; attention.csv (chunk-512 TP 1 rows, via "
     "sw5sh/cs378-assignment3 7ac2fe9f)\"",
     [(VID + "a100/Llama-2-7b-hf/tp1/profile.json", "fit"),
      (VID + "a100/Llama-2-7b-hf/attention-tp1/profile.json", "fit"),
      (VID + "a100/Llama-2-7b-hf/tp2/profile.json", "hold-out"),
      (VID + "a100/Llama-2-7b-hf/tp4/profile.json", "hold-out")],
     "Llama-2-7B TP 1, GEMMs, elementwise and chunk-512 prefill", "TP 2 and 4"),
    ("H100-SXM", "vidur", "VIDUR_SRC \"h100/meta-llama/Llama-2-7b-hf/mlp.csv\"",
     [(VID + "h100/Llama-2-7b-hf/tp1/profile.json", "fit"),
      (VID + "h100/Llama-2-7b-hf/tp2/profile.json", "hold-out"),
      (VID + "h100/Llama-2-7b-hf/tp4/profile.json", "hold-out")],
     "Llama-2-7B TP 1, GEMMs and elementwise", "TP 2 and 4"),
]
OVERLAYS = ["--hardware", P + "hardware-rtxpro6000.json", "--models", P + "models-qwen3-32b.json"]
GEMM_SHAPE_MAX = 0.792  # spec.c g_gemm_shape at M >= 4096
MEM_EFF_DEFAULT = 0.69  # spec.c SPEC_MEM_EFF: prefill's memory side when decode is not measured
FAMILIES = ["gemm_small", "gemm", "elementwise", "attn_prefill", "attn_decode"]
# constant: (start, low, high, rounding step)
PARAMS = {
    "gemm_ceiling": (0.8, 0.2, 1.5, 0.001), "gemm_bw": (0.7, 0.2, 1.5, 0.001),
    "norm_bw": (0.7, 0.1, 4.0, 0.001), "act_bw": (0.7, 0.1, 4.0, 0.001), "rope_bw": (0.7, 0.1, 4.0, 0.001),
    "decode_bw": (0.7, 0.1, 1.5, 0.001), "decode_floor_ns": (5000, 0, 50000, 10),
    "decode_seq_ns": (50, 0, 2000, 0.1),
    "prefill_frac": (0.5, 0.05, 1.5, 0.001), "prefill_key_ns": (20, 0.5, 200, 0.01),
    "prefill_floor_ns": (5000, 0, 200000, 10),
    "min_kernel_ns": (2000, 0, 20000, 10),
}
ORDER = list(PARAMS)
# (constants, the families whose points fit them), in order: the small-M GEMMs' HBM fraction on those
# alone (a family of its own), then the GEMM ceiling, the elementwise fractions and the minimum kernel
# time on every GEMM and elementwise point, then attention
GROUPS = [(("gemm_bw",), ("gemm_small",)),
          (("gemm_ceiling", "norm_bw", "act_bw", "rope_bw", "min_kernel_ns"), ("gemm_small", "gemm", "elementwise")),
          (("prefill_frac", "decode_bw", "decode_floor_ns", "decode_seq_ns", "prefill_key_ns", "prefill_floor_ns"),
           ("attn_prefill", "attn_decode"))]
ATTN_TILE_ROWS = 128  # spec.c SPEC_ATTN_TILE_ROWS


def points(kvcal, manifests):
    out = subprocess.run([kvcal, "fidelity", "--points"] + OVERLAYS + manifests, cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    pts = []
    for r in csv.DictReader(io.StringIO(out), delimiter="\t"):
        for k in ("p1", "p2", "measured_ns", "flops", "bytes", "gemm_shape", "peak_flops", "mem_bw"):
            r[k] = float(r[k])
        for k in ("heads", "sm_count"):
            r[k] = int(r[k])
        pts.append(r)
    return pts


def model_ns(c, p):
    """sim/cost/spec.c fit_op_ns, for the families compared; None: the row does not fit this op."""
    fam, peak, bw = p["family"], p["peak_flops"], p["mem_bw"]
    if fam in ("gemm_small", "gemm"):
        eff = c["gemm_ceiling"] * p["gemm_shape"] / GEMM_SHAPE_MAX
        t = max(p["flops"] / (peak * eff), p["bytes"] / (bw * c["gemm_bw"])) * 1e9
        return max(t, c["min_kernel_ns"])
    if fam == "elementwise":
        frac = c["act_bw"] if p["op"] == "act" else c["rope_bw"] if p["op"] == "rope" else c["norm_bw"]
        return max(p["bytes"] / (bw * frac) * 1e9, c["min_kernel_ns"])
    if fam == "attn_decode":
        if not (c["decode_bw"] > 0 and c["prefill_frac"] > 0):
            return None
        t = max(p["flops"] / (peak * c["prefill_frac"]), p["bytes"] / (bw * c["decode_bw"])) * 1e9
        return c["decode_floor_ns"] + max(p["p1"], 1.0) * c["decode_seq_ns"] + t
    if fam == "attn_prefill":
        if not c["prefill_frac"] > 0:
            return None
        mem = c["decode_bw"] if c["decode_bw"] > 0 else MEM_EFF_DEFAULT
        t = max(p["flops"] / (peak * c["prefill_frac"]), p["bytes"] / (bw * mem)) * 1e9
        if p["sm_count"] > 0:
            n = max(int(p["p1"]), 1)
            tiles = (n + ATTN_TILE_ROWS - 1) // ATTN_TILE_ROWS
            waves = (p["heads"] * tiles + p["sm_count"] - 1) // p["sm_count"]
            t = max(t, waves * (p["p2"] + n) * c["prefill_key_ns"])
        return c["prefill_floor_ns"] + t
    return None


def loss(c, pts):
    s = 0.0
    for p in pts:
        m = model_ns(c, p)
        if m is not None:
            s += abs(math.log(m / p["measured_ns"]))
    return s


def golden(f, lo, hi, iters=60):
    g = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    x1, x2 = b - g * (b - a), a + g * (b - a)
    f1, f2 = f(x1), f(x2)
    for _ in range(iters):
        if f1 <= f2:
            b, x2, f2 = x2, x1, f1
            x1 = b - g * (b - a)
            f1 = f(x1)
        else:
            a, x1, f1 = x1, x2, f2
            x2 = a + g * (b - a)
            f2 = f(x2)
    return (a + b) / 2


def rnd(name, v):
    step = PARAMS[name][3]
    return round(round(v / step) * step, 3)


# The loss is not convex (maxima of rooflines and floors): each group's descent runs from every start
# of its first constant in STARTS (the others from PARAMS' start, settled to it first) and the lowest
# loss wins, the first start on a tie. With one chunk size (Vidur's A100 prefill) FLOPs and the key walk both grow linearly
# with the context, and a descent from a low fraction stays where FLOPs bind.
STARTS = {"prefill_frac": (0.3, 0.5, 0.7, 0.9)}


def descend(c, names, sub):
    for _ in range(8):
        for k in names:
            lo, hi = PARAMS[k][1], PARAMS[k][2]
            cur = c[k]
            f_cur = loss(c, sub)

            def f(v, k=k):
                c[k] = v
                return loss(c, sub)
            best = golden(f, lo, hi)
            # golden section can stall on the flat side of a floor: never worse than where it started
            c[k] = best if f(best) <= f_cur else cur
    return loss(c, sub)


def fit(pts, measured):
    """Coordinate descent over the constants the points constrain (the others stay 0: not measured)."""
    c = {k: (PARAMS[k][0] if k in measured else 0.0) for k in PARAMS}
    for group, fams in GROUPS:
        names = [k for k in group if k in measured]
        sub = [p for p in pts if p["family"] in fams and model_ns(c, p) is not None]
        if not sub or not names:
            continue
        best = None
        for start in STARTS.get(names[0], (PARAMS[names[0]][0],)):
            trial = dict(c)
            for k in names:
                trial[k] = PARAMS[k][0]
            trial[names[0]] = start
            descend(trial, names[1:], sub)  # the others settle to the start before it moves
            lv = descend(trial, names, sub)
            if best is None or lv < best[0]:
                best = (lv, trial)
        c = best[1]
    out = {k: (rnd(k, c[k]) if k in measured else 0.0) for k in PARAMS}
    return out


def stats(errs):
    if not errs:
        return None
    a = sorted(abs(e) for e in errs)
    s = sorted(errs)

    def nr(v, q):
        k = math.ceil(q * len(v))
        return v[k - 1 if k else 0]
    return len(errs), nr(a, 0.5), nr(a, 0.9), nr(s, 0.5)


def c_row(gpu, stack, c, src, n, fit_on, hold):
    ident = {"vllm-0.19": "SPEC_STACK_VLLM019", "vidur": "SPEC_STACK_VIDUR"}[stack]
    vals = ", ".join(("%.3f" % c[k]) if k.endswith(("_bw", "_frac", "_ceiling")) else
                     ("%.2f" % c[k]) if k == "prefill_key_ns" else ("%.1f" % c[k]) if k == "decode_seq_ns" else
                     "%d" % round(c[k]) for k in ORDER)
    return ('    {"%s", %s, %s,\n     %s,\n     "fitted by tools/fit_spec.py on %d points (%s); hold-out: %s"},'
            % (gpu, ident, vals, src, n, fit_on, hold))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kvcal", default=os.path.join(ROOT, "bin", "kvcal"))
    ap.add_argument("--check", action="store_true", help="exit 1 unless sim/cost/spec.c holds the fitted rows")
    ap.add_argument("--write", action="store_true", help="rewrite the fitted rows in sim/cost/spec.c")
    a = ap.parse_args()
    c_rows, tables = [], []
    for gpu, stack, src, mans, fit_on, hold in ROWS:
        pts_by = {m: points(a.kvcal, [m]) for m, _ in mans}
        fit_pts = [p for m, role in mans if role == "fit" for p in pts_by[m]]
        fams = {p["family"] for p in fit_pts}
        measured = {"gemm_ceiling", "gemm_bw", "norm_bw", "act_bw", "rope_bw", "min_kernel_ns"}
        if "attn_prefill" in fams:
            measured |= {"prefill_frac", "prefill_key_ns", "prefill_floor_ns"}
        if "attn_decode" in fams:
            measured |= {"decode_bw", "decode_floor_ns", "decode_seq_ns"}
        c = fit(fit_pts, measured)
        n = sum(1 for p in fit_pts if model_ns(c, p) is not None)
        c_rows.append(c_row(gpu, stack, c, src, n, fit_on, hold))
        for m, role in mans:
            pts = pts_by[m]
            for fam in FAMILIES:
                errs = [model_ns(c, p) / p["measured_ns"] - 1 for p in pts
                        if p["family"] == fam and model_ns(c, p) is not None]
                st = stats(errs)
                if st:
                    p0 = pts[0]
                    tables.append((gpu, p0["model"], int(p0["tp"]), stack, role, fam) + st)
    block = "\n".join(c_rows)
    path = os.path.join(ROOT, "sim/cost/spec.c")
    text = open(path).read()
    mo = re.search(r"(static const SpecFitRow g_fit\[\] = \{\n)(.*?)(\n\};\n/\* fit rows: END \*/)", text, re.S)
    if not mo:
        sys.exit("fit_spec: sim/cost/spec.c: no 'static const SpecFitRow g_fit[]' block before '/* fit rows: END */'")
    if a.check:
        if mo.group(2) != block:
            sys.stderr.write("fit_spec: sim/cost/spec.c: the fitted rows differ from what tools/fit_spec.py yields:\n"
                             "--- committed\n%s\n--- fitted\n%s\n(run tools/fit_spec.py --write, review, commit)\n"
                             % (mo.group(2), block))
            sys.exit(1)
        print("fit_spec: sim/cost/spec.c holds the fitted rows (%d)" % len(c_rows))
        return
    if a.write:
        new = text[:mo.start(2)] + block + text[mo.end(2):]
        tmp = path + ".tmp"
        open(tmp, "w").write(new)
        os.replace(tmp, path)
    print(block)
    print()
    print("| GPU | model | TP | stack | set | op family | points | median \\|err\\| | p90 \\|err\\| | median signed |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for t in tables:
        print("| %s | %s | %d | %s | %s | %s | %d | %.1f %% | %.1f %% | %+.1f %% |"
              % (t[:6] + (t[6], 100 * t[7], 100 * t[8], 100 * t[9])))


if __name__ == "__main__":
    main()
