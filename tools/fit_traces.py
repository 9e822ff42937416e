#!/usr/bin/env python3
"""fit_traces.py — fit kvsim's synthetic trace generators (traces/gen.c) to the real trace files.

Responsible for: reading the canonical CSV traces (leval.csv, swebench.csv), computing each
generator parameter by the method written next to it, running a Monte Carlo of the *same* model that
traces/gen.c implements (same distributions, rounding, clamps, caps and history rule, a different
random stream), and printing Markdown tables of parameters and generator-vs-file statistics, which
are recorded in traces/FITS.md. The C code holds the parameters as constants; this script is how
they were obtained and how to re-derive them when the files change.
Not responsible for: the C generator itself or its tests (tests/test_trace.c checks the C output
against the same targets).

Usage: python3 tools/fit_traces.py [TRACES_DIR]   (default traces/data of the repository)
Python 3 standard library only. Deterministic (fixed seeds).
"""
import csv
import math
import os
import random
import statistics
import sys
from collections import OrderedDict

Z90 = 1.2815515655446004  # standard normal quantile at 0.9


def quantile(v, p):
    """The p-quantile as traces/data/README.md reports it: the sorted value at index floor(p*n)."""
    s = sorted(v)
    return s[min(len(s) - 1, int(p * len(s)))]


def tokens(x, lo, hi):
    """Round a sampled real to a token count in [lo, hi] (gen.c: trace_gen_tokens)."""
    if x != x or x < lo:
        return lo
    if x > hi:
        return hi
    return max(lo, min(hi, int(math.floor(x + 0.5))))


def fit_mean_median(v):
    """Lognormal with the sample's median and mean: mu = ln(median), sigma = sqrt(2 ln(mean/median))."""
    mean, med = sum(v) / len(v), quantile(v, 0.5)
    return math.log(med), math.sqrt(2.0 * math.log(mean / med)) if mean > med else 0.0


def fit_log_moments(v):
    """Maximum-likelihood lognormal: mean and standard deviation of ln(x)."""
    lv = [math.log(x) for x in v]
    return statistics.fmean(lv), statistics.pstdev(lv)


def sessions_of(path):
    ses = OrderedDict()
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            ses.setdefault(r["session_id"], []).append(r)
    return ses


def summary(rows):
    """Per-request statistics of a list of (new, out, hist) tuples."""
    out = {}
    for i, name in enumerate(("new_input", "output", "history")):
        v = [r[i] for r in rows]
        out[name] = (sum(v) / len(v), quantile(v, 0.5), quantile(v, 0.9))
    return out


def table(title, real, gen, extra=()):
    print(f"\n#### {title}: generator (Monte Carlo of the C model) vs the file\n")
    print("| statistic | file | generator | ratio |")
    print("| --- | ---: | ---: | ---: |")
    for name in ("new_input", "output", "history"):
        for j, st in enumerate(("mean", "median", "p90")):
            a, b = real[name][j], gen[name][j]
            print(f"| {name} {st} | {a:,.1f} | {b:,.1f} | {b / a:.3f} |")
    for name, a, b in extra:
        print(f"| {name} | {a:,.2f} | {b:,.2f} | {b / a:.3f} |")


# ---------------------------------------------------------------- L-Eval
def leval_sim(p, n_docs, rho, seed=7):
    rng = random.Random(seed)
    rows, counts = [], []
    for _ in range(n_docs):
        z1, z2 = rng.gauss(0, 1), rng.gauss(0, 1)
        doc = tokens(math.exp(p["doc_mu"] + p["doc_sigma"] * z1), 1, 200000)
        n = tokens(math.exp(p["n_mu"] + p["n_sigma"] * (rho * z1 + math.sqrt(1 - rho * rho) * z2)), 1, 200)
        mo = p["out_mu"] + p["out_sigma_doc"] * rng.gauss(0, 1)
        mq = p["q_mu"] + p["q_sigma_doc"] * rng.gauss(0, 1)
        hist = 0
        for k in range(n):
            new = doc if k == 0 else tokens(math.exp(mq + p["q_sigma_turn"] * rng.gauss(0, 1)), 1, 16384)
            out = tokens(math.exp(mo + p["out_sigma_turn"] * rng.gauss(0, 1)), 1, 4096)
            rows.append((new, out, hist))
            hist += new + out
        counts.append(n)
    return rows, counts


def fit_leval(path):
    ses = sessions_of(path)
    rows = [(int(r["new_input_tokens"]), int(r["output_tokens"]), int(r["history_tokens"]))
            for v in ses.values() for r in v]
    counts = [len(v) for v in ses.values()]
    p = {}
    # turn-0 input (document + instruction + first question): mean-and-median lognormal
    p["doc_mu"], p["doc_sigma"] = fit_mean_median([int(v[0]["new_input_tokens"]) for v in ses.values()])
    # questions per document: maximum-likelihood lognormal, rounded
    p["n_mu"], p["n_sigma"] = fit_log_moments(counts)
    # later questions: mean-and-median lognormal of turns >= 1, total sigma split into a per-document
    # part and a per-question part in the proportion of the log-variance decomposition
    qv = [int(r["new_input_tokens"]) for v in ses.values() for r in v[1:]]
    p["q_mu"], q_sigma = fit_mean_median(qv)
    # answers: same method over all turns
    ov = [int(r["output_tokens"]) for v in ses.values() for r in v]
    p["out_mu"], o_sigma = fit_mean_median(ov)

    def split(field, first_turn, sigma):
        means, within = [], []
        for v in ses.values():
            lv = [math.log(int(r[field])) for r in v[first_turn:]]
            if not lv:
                continue
            m = statistics.fmean(lv)
            means.append(m)
            within += [x - m for x in lv]
        b2, w2 = statistics.pvariance(means), statistics.fmean([x * x for x in within])
        share = b2 / (b2 + w2)
        return sigma * math.sqrt(share), sigma * math.sqrt(1 - share)

    p["q_sigma_doc"], p["q_sigma_turn"] = split("new_input_tokens", 1, q_sigma)
    p["out_sigma_doc"], p["out_sigma_turn"] = split("output_tokens", 0, o_sigma)
    # rho (correlation of ln doc and ln questions) by bisection so the generator's mean history
    # equals the file's (common random numbers across the bisection steps)
    target = sum(r[2] for r in rows) / len(rows)
    lo, hi = -0.95, 0.95
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        g, _c = leval_sim(p, 40000, mid)
        if sum(r[2] for r in g) / len(g) > target:
            hi = mid
        else:
            lo = mid
    p["rho"] = 0.5 * (lo + hi)
    g, gc = leval_sim(p, 40000, p["rho"], seed=11)
    print("\n### leval\n")
    print("| parameter | value |\n| --- | ---: |")
    for k, val in p.items():
        print(f"| {k} | {val:.6f} |")
    table("leval", summary(rows), summary(g),
          [("requests per document (mean)", sum(counts) / len(counts), sum(gc) / len(gc)),
           ("requests per document (median)", quantile(counts, 0.5), quantile(gc, 0.5))])
    return p


# ---------------------------------------------------------------- SWE-bench
SWE_LATE = 10  # calls 2..9 (exploring the repository) read more than later calls
def swebench_sim(p, n_sessions, seed=7):
    rng = random.Random(seed)
    rows, counts, thinks = [], [], []
    for _ in range(n_sessions):
        n = tokens(math.exp(p["calls_mu"] + p["calls_sigma"] * rng.gauss(0, 1)), 1, 1000)
        hist = 0
        for k in range(n):
            kind = "first" if k == 0 else "second" if k == 1 else "early" if k < SWE_LATE else "new"
            new = tokens(math.exp(p[kind + "_mu"] + p[kind + "_sigma"] * rng.gauss(0, 1)), 1, 131072)
            if k > 0:
                thinks.append(min(600.0, math.exp(p["think_mu"] + p["think_sigma"] * rng.gauss(0, 1))))
            ok = "out0" if k == 0 else "out"
            out = tokens(math.exp(p[ok + "_mu"] + p[ok + "_sigma"] * rng.gauss(0, 1)), 1, 65536)
            rows.append((new, out, hist))
            hist += new + out
        counts.append(n)
    return rows, counts, thinks


def fit_swebench(path):
    ses = sessions_of(path)
    rows = [(int(r["new_input_tokens"]), int(r["output_tokens"]), int(r["history_tokens"]))
            for v in ses.values() for r in v]
    counts = [len(v) for v in ses.values()]
    p = {}
    p["calls_mu"], p["calls_sigma"] = fit_log_moments(counts)
    p["first_mu"], p["first_sigma"] = fit_mean_median([int(v[0]["new_input_tokens"]) for v in ses.values()])
    # the first call (task prompt), the second (the first tool observation, large: a listing or a
    # whole file), calls 2..9 and later calls differ: each kind gets its own mean-and-median lognormal
    p["second_mu"], p["second_sigma"] = fit_mean_median([int(v[1]["new_input_tokens"]) for v in ses.values() if len(v) > 1])
    p["early_mu"], p["early_sigma"] = fit_mean_median([int(r["new_input_tokens"]) for v in ses.values() for r in v[2:SWE_LATE]])
    p["new_mu"], p["new_sigma"] = fit_mean_median([int(r["new_input_tokens"]) for v in ses.values() for r in v[SWE_LATE:]])
    p["out0_mu"], p["out0_sigma"] = fit_mean_median([int(v[0]["output_tokens"]) for v in ses.values()])
    p["out_mu"], p["out_sigma"] = fit_mean_median([int(r["output_tokens"]) for v in ses.values() for r in v[1:]])
    gaps = [float(b["arrival_s"]) - float(a["arrival_s"]) for v in ses.values() for a, b in zip(v, v[1:])]
    med, p90 = quantile(gaps, 0.5), quantile(gaps, 0.9)
    # think time: lognormal through the median and p90 of the gaps between a session's calls
    p["think_mu"], p["think_sigma"] = math.log(med), math.log(p90 / med) / Z90
    first = sorted(float(v[0]["arrival_s"]) for v in ses.values())
    # session rate: sessions over the span of their first arrivals (Poisson maximum likelihood)
    p["session_rate_per_s"] = (len(first) - 1) / (first[-1] - first[0])
    g, gc, gt = swebench_sim(p, 20000)
    print("\n### swebench\n")
    print("| parameter | value |\n| --- | ---: |")
    for k, val in p.items():
        print(f"| {k} | {val:.6f} |")
    table("swebench", summary(rows), summary(g),
          [("calls per session (mean)", sum(counts) / len(counts), sum(gc) / len(gc)),
           ("calls per session (median)", quantile(counts, 0.5), quantile(gc, 0.5)),
           ("gap / think s (median)", med, quantile(gt, 0.5)),
           ("gap / think s (p90)", p90, quantile(gt, 0.9)),
           ("gap / think s (mean)", sum(gaps) / len(gaps), sum(gt) / len(gt))])
    return p


# ---------------------------------------------------------------- ShareGPT4 (published figures only)
SG_IN_MEAN, SG_OUT_MEAN, SG_HIST_CAP, SG_PASS = 67.0, 359.0, 16384, 2500
SG_IN_SIGMA, SG_OUT_SIGMA, SG_ROUNDS_SIGMA = 1.0, 0.8, 0.6  # shapes assumed (not published)


def sharegpt_sim(p, n_sessions, seed=7):
    rng = random.Random(seed)
    rows, rounds, last_hist = [], [], []
    for _ in range(n_sessions):
        n = tokens(math.exp(p["rounds_mu"] + p["rounds_sigma"] * rng.gauss(0, 1)), 1, 256)
        hist = 0
        for k in range(n):
            new = tokens(math.exp(p["in_mu"] + p["in_sigma"] * rng.gauss(0, 1)), 1, 16384)
            out = tokens(math.exp(p["out_mu"] + p["out_sigma"] * rng.gauss(0, 1)), 1, 8192)
            rows.append((new, out, hist))
            if k == n - 1:
                last_hist.append(hist)
            hist = min(SG_HIST_CAP, hist + new + out)
        rounds.append(n)
    return rows, rounds, last_hist


def fit_sharegpt4():
    p = {"in_sigma": SG_IN_SIGMA, "out_sigma": SG_OUT_SIGMA, "rounds_sigma": SG_ROUNDS_SIGMA}
    # per-round tokens: lognormal with the published mean and an assumed shape: mu = ln(mean) - sigma^2/2
    p["in_mu"] = math.log(SG_IN_MEAN) - SG_IN_SIGMA ** 2 / 2
    p["out_mu"] = math.log(SG_OUT_MEAN) - SG_OUT_SIGMA ** 2 / 2
    # rounds per conversation: rounds_mu by bisection so that half of the conversations reach
    # > 2,500 history tokens at their last round (common random numbers)
    lo, hi = 0.0, 4.0
    for _ in range(30):
        p["rounds_mu"] = 0.5 * (lo + hi)
        _r, _n, lh = sharegpt_sim(p, 40000)
        share = sum(1 for h in lh if h > SG_PASS) / len(lh)
        if share > 0.5:
            hi = p["rounds_mu"]
        else:
            lo = p["rounds_mu"]
    p["rounds_mu"] = 0.5 * (lo + hi)
    g, rounds, lh = sharegpt_sim(p, 40000, seed=11)
    print("\n### sharegpt4\n")
    print("| parameter | value |\n| --- | ---: |")
    for k, val in p.items():
        print(f"| {k} | {val:.6f} |")
    print("\n#### sharegpt4: generator (Monte Carlo of the C model) vs the published figures\n")
    print("| statistic | published | generator |\n| --- | ---: | ---: |")
    print(f"| input tokens per round (mean) | 67 | {sum(r[0] for r in g) / len(g):.1f} |")
    print(f"| output tokens per round (mean) | 359 | {sum(r[1] for r in g) / len(g):.1f} |")
    print(f"| conversations past 2,500 history tokens | 50 % | {100 * sum(1 for h in lh if h > SG_PASS) / len(lh):.1f} % |")
    print(f"| rounds per conversation (median) | 6-7 | {quantile(rounds, 0.5)} |")
    print(f"| rounds per conversation (mean) | - | {sum(rounds) / len(rounds):.2f} |")
    print(f"| history tokens (mean over requests) | - | {sum(r[2] for r in g) / len(g):.1f} |")
    return p


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "traces", "data")
    fit_leval(os.path.join(d, "leval.csv"))
    fit_swebench(os.path.join(d, "swebench.csv"))
    fit_sharegpt4()


if __name__ == "__main__":
    main()
