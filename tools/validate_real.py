#!/usr/bin/env python3
"""validate_real.py — replay real vLLM serving runs in kvsim and compare request latencies (sim2real).

Each run is a folder holding LLMServingSim's record of a real vLLM run (requests.jsonl: one request
per line with its input and output token counts and the engine's monotonic timestamps queued_ts,
first_token_ts, last_token_ts; meta.json: the model and the engine's settings). The replay:

  - trace: every request its own session, arriving at queued_ts - the first queued_ts, with its
    input tokens as new input and its output tokens to decode (canonical CSV, docs/formats.md);
  - engine: max_num_batched_tokens and max_num_seqs of meta.json's engine_kwargs, the run's
    tensor-parallel degree and dtype, the recompute policy (nothing to restore: single turns);
  - costs: the measured store of the run's GPU and model (kvcal import of a committed SQL dump);
    for comparison also the spec roofline as it is by default, and the spec model refitted to the
    run's serving stack ("stack" vllm-MAJOR.MINOR from meta.json's vllm_version, sim/cost/spec.h)
    where kvsim has that stack (fitted to kernel profiles only, never to these runs).

Metrics per request, real and simulated alike: TTFT = first token - arrival; TPOT = (last token -
first token) / (output tokens - 1), requests with more than one output token; E2E = last token -
arrival. Reported per run: mean, median, p90, p99 of each, real and simulated, their relative
difference, and the median and p95 over requests of |simulated / real - 1|. Percentiles: nearest
rank. Output in --out, each file written aside then renamed, deterministic: report.md, report.json and
requests.csv (per request, real and simulated on the measured store) and RUN.svg per run (that scatter,
log-log, TTFT, TPOT and E2E panels).

Usage: tools/validate_real.py --out DIR [--kvsim BIN] [--kvcal BIN] [--runs RUN.json]
A runs file lists the runs: [{"name", "dir", "costs" (SQL dump), "hardware" (overlay or null),
"models" (overlay or null), "platform", "model" (kvsim catalog name)}]; the default is data/real/runs.json.
Exit status: 0 report written, 1 a run failed (message names it), 2 usage error.
"""
import argparse
import csv
import json
import math
import os
import subprocess
import sys
import tempfile


class ReplayError(Exception):
    pass


def nearest_rank(sorted_vals, q):
    if not sorted_vals:
        return None
    k = max(1, math.ceil(q * len(sorted_vals)))
    return sorted_vals[k - 1]


def summary(vals):
    s = sorted(vals)
    if not s:
        return None
    return {"n": len(s), "mean": sum(s) / len(s), "median": nearest_rank(s, 0.5), "p90": nearest_rank(s, 0.9),
            "p99": nearest_rank(s, 0.99)}


def pool_blocks(meta):
    """The real KV pool in blocks (vLLM's num_gpu_blocks, or the override it was given), None when the
    metadata do not record it."""
    kw = meta.get("engine_kwargs", {})
    for where in (meta, kw):
        for key in ("num_gpu_blocks", "num_gpu_blocks_override"):
            if where.get(key) is not None:
                return where[key]
    return None


def read_real(folder):
    """The real run: meta.json's settings and each request's metrics, keyed by its line index."""
    meta_path = os.path.join(folder, "meta.json")
    req_path = os.path.join(folder, "requests.jsonl")
    try:
        with open(meta_path) as f:
            meta = json.load(f)
    except (OSError, ValueError) as ex:
        raise ReplayError(f"{meta_path}: {ex}")
    kw = meta.get("engine_kwargs")
    if not isinstance(kw, dict):
        raise ReplayError(f"{meta_path}: key engine_kwargs: missing, expected an object")
    for key in ("max_num_batched_tokens", "max_num_seqs", "tensor_parallel_size", "dtype"):
        if key not in kw:
            raise ReplayError(f"{meta_path}: engine_kwargs.{key}: missing")
    blocks = pool_blocks(meta)
    if blocks is not None and (not isinstance(blocks, int) or isinstance(blocks, bool) or blocks < 1):
        raise ReplayError(f"{meta_path}: num_gpu_blocks: expected an integer >= 1, got {blocks!r}")
    reqs = []
    try:
        f = open(req_path)
    except OSError as ex:
        raise ReplayError(f"{req_path}: {ex}")
    with f:
        for ln, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except ValueError as ex:
                raise ReplayError(f"{req_path}: line {ln}: not JSON ({ex})")
            for key in ("input_toks", "output_toks", "queued_ts", "first_token_ts", "last_token_ts"):
                v = r.get(key)
                ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                if key.endswith("toks"):
                    ok = ok and v == int(v) and v >= 1
                if not ok:
                    raise ReplayError(f"{req_path}: line {ln}: key {key}: expected "
                                      f"{'an integer >= 1' if key.endswith('toks') else 'a number'}, got {v!r}")
            if not r["queued_ts"] <= r["first_token_ts"] <= r["last_token_ts"]:
                raise ReplayError(f"{req_path}: line {ln}: expected queued_ts <= first_token_ts <= last_token_ts")
            reqs.append(r)
    if not reqs:
        raise ReplayError(f"{req_path}: no requests")
    return meta, reqs


def write_trace(reqs, path):
    t0 = min(r["queued_ts"] for r in reqs)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["session_id", "turn", "arrival_s", "new_input_tokens", "output_tokens", "history_tokens"])
        for i, r in enumerate(reqs):
            w.writerow([f"r{i}", 0, f"{r['queued_ts'] - t0:.6f}", int(r["input_toks"]), int(r["output_toks"]), 0])


def real_metrics(r):
    out = int(r["output_toks"])
    return {"ttft": r["first_token_ts"] - r["queued_ts"], "e2e": r["last_token_ts"] - r["queued_ts"],
            "tpot": (r["last_token_ts"] - r["first_token_ts"]) / (out - 1) if out > 1 else None}


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise ReplayError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[-2000:]}")
    return p.stdout


def replay(spec, kvsim, kvcal, work):
    meta, reqs = read_real(spec["dir"])
    kw = meta["engine_kwargs"]
    dtype = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16"}.get(kw["dtype"], kw["dtype"])
    trace = os.path.join(work, spec["name"] + ".csv")
    write_trace(reqs, trace)
    db = os.path.join(work, spec["name"] + ".db")
    run([kvcal, "import", "--db", db, spec["costs"]])
    cmd = [kvsim, "run", "--policy", "recompute", "--quiet", "--trace", trace,
           "--platform", spec["platform"], "--model", spec["model"], "--dtype", dtype,
           "--tp", str(kw["tensor_parallel_size"]), "--set", f"max_num_batched_tokens={kw['max_num_batched_tokens']}",
           "--set", f"max_num_seqs={kw['max_num_seqs']}"]
    blocks = pool_blocks(meta)
    if blocks is not None:  # the real run's KV pool; else kvsim sizes it from mem_util (vLLM's 0.9 default)
        cmd += ["--set", f"num_gpu_blocks={blocks}", "--set", f"block_tokens={kw.get('block_size') or 16}"]
    if spec.get("hardware"):
        cmd += ["--hardware", spec["hardware"]]
    if spec.get("models"):
        cmd += ["--models", spec["models"]]
    res = {"name": spec["name"], "requests": len(reqs), "model": spec["model"], "platform": spec["platform"],
           "costs": spec["costs"], "settings": {"max_num_batched_tokens": kw["max_num_batched_tokens"],
                                                "max_num_seqs": kw["max_num_seqs"], "tp": kw["tensor_parallel_size"],
                                                "dtype": dtype, "num_gpu_blocks": blocks}}
    per_request = []
    labels = [("measured", ["--costs", db]), ("spec", [])]
    stack = refit_stack(meta, kvsim)
    if stack:
        res["refit_stack"] = stack
        labels.append(("refit", ["--set", f"stack={stack}"]))
    for label, extra in labels:
        out = os.path.join(work, f"{spec['name']}-{label}")
        run(cmd + extra + ["--out", out])
        sim = read_sim(out, len(reqs), spec["name"])
        with open(os.path.join(out, "summary.json")) as f:
            # the store's temporary path named by the dump it was made from: the report is deterministic
            res[f"cost_model_{label}"] = json.load(f)["inputs"]["cost_model"].replace(db, spec["costs"])
        res[label] = compare(reqs, sim)
        if label == "measured":
            for i, r in enumerate(reqs):
                rm = real_metrics(r)
                per_request.append([spec["name"], i] + [x for m in ("ttft", "tpot", "e2e") for x in (rm[m], sim[i][m])])
    return res, per_request


def refit_stack(meta, kvsim):
    """The fitted stack of the run's vLLM version ("vllm-0.19" for 0.19.x), None when kvsim has none."""
    v = str(meta.get("vllm_version") or "").split(".")
    if len(v) < 2:
        return None
    name = f"vllm-{v[0]}.{v[1]}"
    helptext = run([kvsim, "run", "--help"])
    return name if f"|{name}|" in helptext.replace(")", "|") else None


def read_sim(out, n, name):
    sim = {}
    with open(os.path.join(out, "requests.csv"), newline="") as f:
        for row in csv.DictReader(f):
            i = int(row["session_id"][1:])
            out_toks = int(row["output_tokens"])
            sim[i] = {"ttft": float(row["ttft_s"]), "e2e": float(row["done_s"]) - float(row["arrival_s"]),
                      "tpot": float(row["tbt_mean_s"]) if out_toks > 1 else None}
    if len(sim) != n:
        raise ReplayError(f"{name}: kvsim served {len(sim)} of {n} requests")
    return sim


def compare(reqs, sim):
    res = {}
    for m in ("ttft", "tpot", "e2e"):
        real_v, sim_v, err = [], [], []
        for i, r in enumerate(reqs):
            rv, sv = real_metrics(r)[m], sim[i][m]
            if rv is None or sv is None:
                continue
            real_v.append(rv)
            sim_v.append(sv)
            if rv > 0:
                err.append(abs(sv / rv - 1))
        rs, ss = summary(real_v), summary(sim_v)
        e = sorted(err)
        diff = {k: (ss[k] / rs[k] - 1 if rs[k] else None) for k in ("mean", "median", "p90", "p99")}
        res[m] = {"real": rs, "sim": ss, "diff": diff,
                  "request_abs_err": {"median": nearest_rank(e, 0.5), "p95": nearest_rank(e, 0.95)}}
    return res


def pct(v):
    return "–" if v is None else f"{100 * v:+.1f} %"


def ms(v):
    return "–" if v is None else f"{1000 * v:.1f}"


def markdown(results):
    lines = ["# kvsim against real vLLM runs", "",
             "Each real run replayed with its arrivals, token counts and engine settings (tools/validate_real.py),",
             "on the measured cost store of its GPU and model and, for comparison, on the spec roofline and on the",
             "spec model refitted to the run's serving stack (kernel profiles only). Times in ms;",
             "diff = sim / real - 1; per-request |err| = median and p95 over requests of |sim / real - 1|.", ""]
    for r in results:
        s = r["settings"]
        lines += [f"## {r['name']}", "",
                  f"{r['requests']} requests; {r['model']} ({s['dtype']}, tp {s['tp']}) on {r['platform']}; "
                  f"max_num_batched_tokens {s['max_num_batched_tokens']}, max_num_seqs {s['max_num_seqs']}; "
                  + (f"KV pool num_gpu_blocks {s['num_gpu_blocks']} (the run's metadata)." if s.get("num_gpu_blocks") is not None
                     else "KV pool from mem_util 0.9 (the run's metadata give no num_gpu_blocks)."),
                  f"Measured: {r['cost_model_measured']} ({r['costs']}). Spec: {r['cost_model_spec']}."
                  + (f" Refit: {r['cost_model_refit']}." if "refit" in r else ""), ""]
        labels = [("measured", "measured store"), ("spec", "spec")] + ([("refit", f"refit, {r['refit_stack']}")] if "refit" in r else [])
        lines += ["| metric | stat | real | " + " | ".join(f"sim, {t} | diff" for _, t in labels) + " |",
                  "|---|---|---|" + "---|---|" * len(labels)]
        for m in ("ttft", "tpot", "e2e"):
            for k in ("mean", "median", "p90", "p99"):
                cells = [f"{ms(r[l][m]['sim'][k])} | {pct(r[l][m]['diff'][k])}" for l, _ in labels]
                lines.append(f"| {m.upper()} | {k} | {ms(r['measured'][m]['real'][k])} | " + " | ".join(cells) + " |")
        lines += ["", "| metric | requests | " + " | ".join(f"median \\|err\\|, {t} | p95 \\|err\\|, {t}" for _, t in labels) + " |",
                  "|---|---|" + "---|---|" * len(labels)]
        for m in ("ttft", "tpot", "e2e"):
            cells = [f"{100 * r[l][m]['request_abs_err']['median']:.1f} % | {100 * r[l][m]['request_abs_err']['p95']:.1f} %"
                     for l, _ in labels]
            lines.append(f"| {m.upper()} | {r['measured'][m]['real']['n']} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def scatter_svg(name, rows):
    """Simulated against real per request (measured store), one panel per metric, log-log with y = x."""
    w, h, pad, gap = 300, 300, 48, 30
    metrics = (("ttft", 2, "TTFT"), ("tpot", 4, "TPOT"), ("e2e", 6, "E2E"))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{3 * (w + gap) + pad}" height="{h + 2 * pad}" '
           f'font-family="sans-serif" font-size="11">',
           f'<text x="{pad}" y="16" font-size="13">{name}: simulated (measured store) against real, per request, seconds</text>']
    for k, (m, col, label) in enumerate(metrics):
        pts = [(r[col], r[col + 1]) for r in rows if r[col] is not None and r[col + 1] is not None
               and r[col] > 0 and r[col + 1] > 0]
        if not pts:
            continue
        lo = min(min(a, b) for a, b in pts)
        hi = max(max(a, b) for a, b in pts)
        l0, l1 = math.log10(lo), math.log10(hi)
        if l1 - l0 < 1e-9:
            l1 = l0 + 1
        x0 = pad + k * (w + gap)

        def px(v, x0=x0, l0=l0, l1=l1):
            return x0 + (math.log10(v) - l0) / (l1 - l0) * w

        def py(v, l0=l0, l1=l1):
            return pad + h - (math.log10(v) - l0) / (l1 - l0) * h

        out.append(f'<rect x="{x0}" y="{pad}" width="{w}" height="{h}" fill="none" stroke="#888"/>')
        out.append(f'<line x1="{px(lo):.1f}" y1="{py(lo):.1f}" x2="{px(hi):.1f}" y2="{py(hi):.1f}" stroke="#c33"/>')
        for a, b in pts:
            out.append(f'<circle cx="{px(a):.1f}" cy="{py(b):.1f}" r="2" fill="#2463a8" fill-opacity="0.6"/>')
        out.append(f'<text x="{x0 + w / 2 - 40}" y="{pad + h + 30}">{label} real ({lo:.3g} … {hi:.3g} s)</text>')
        out.append(f'<text x="{x0 + 4}" y="{pad + 14}">{label} simulated; red: y = x</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_aside(path, text):
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv):
    ap = argparse.ArgumentParser(description="Replay real vLLM runs in kvsim and compare latencies.")
    ap.add_argument("--out", required=True, help="folder for report.md and report.json")
    ap.add_argument("--kvsim", default="bin/kvsim")
    ap.add_argument("--kvcal", default="bin/kvcal")
    ap.add_argument("--runs", default="data/real/runs.json", help="the runs to replay (JSON list)")
    a = ap.parse_args(argv)
    try:
        with open(a.runs) as f:
            specs = json.load(f)
        if not isinstance(specs, list) or not specs:
            raise ReplayError(f"{a.runs}: expected a non-empty JSON list of runs")
        for i, s in enumerate(specs):
            for key in ("name", "dir", "costs", "platform", "model"):
                if not isinstance(s, dict) or not isinstance(s.get(key), str) or not s.get(key):
                    raise ReplayError(f"{a.runs}: [{i}].{key}: missing, expected a string")
        os.makedirs(a.out, exist_ok=True)
        with tempfile.TemporaryDirectory() as work:
            done = [replay(s, a.kvsim, a.kvcal, work) for s in specs]
        results = [d[0] for d in done]
        rows = [row for d in done for row in d[1]]
    except (ReplayError, OSError, ValueError) as ex:
        print(f"validate_real: {ex}", file=sys.stderr)
        return 1
    write_aside(os.path.join(a.out, "report.json"), json.dumps({"runs": results}, indent=1, sort_keys=True) + "\n")
    lines = ["run,request,ttft_real_s,ttft_sim_s,tpot_real_s,tpot_sim_s,e2e_real_s,e2e_sim_s"]
    for row in rows:
        lines.append(",".join([row[0], str(row[1])] + ["" if v is None else f"{v:.6f}" for v in row[2:]]))
    write_aside(os.path.join(a.out, "requests.csv"), "\n".join(lines) + "\n")
    for r in results:
        write_aside(os.path.join(a.out, f"{r['name']}.svg"), scatter_svg(r["name"], [x for x in rows if x[0] == r["name"]]))
    md = markdown(results)
    write_aside(os.path.join(a.out, "report.md"), md + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
