#!/usr/bin/env python3
"""findings_tables.py — Markdown tables of results/findings.md from kvsim compare --seeds outputs.

Responsible for: reading each experiment's summary.json (replications.per_seed), computing means
with Student-t 95 % half-widths over the seeds (and paired ratios seed by seed), printing one table
per call. Not responsible for: running kvsim (tools/findings.sh does), any simulation.
Usage:
  findings_tables.py models MODELS_LIST DIR...   HCache vs KV offload (+ adaptive) per model and box
  findings_tables.py quant DIR...                quantized state vs full precision per platform
  findings_tables.py fair DIR...                 per-class TTFT tails per IO order
Deterministic output (inputs are deterministic); standard library only.
"""
import json
import math
import os
import sys

# two-sided 95 % Student-t quantiles t(0.975, df)
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}


def tq(df):
    for d in sorted(T975):
        if df <= d:
            return T975[d]
    return 1.96


def mean_ci(xs):
    n = len(xs)
    m = sum(xs) / n
    if n < 2:
        return m, 0.0
    s = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    return m, tq(n - 1) * s / math.sqrt(n)


def fmt(m, h, scale=1e3, nd=1):
    return f"{m * scale:.{nd}f} ± {h * scale:.{nd}f}"


def load(d):
    with open(os.path.join(d, "summary.json")) as f:
        return json.load(f)


def per_seed(s, policy, getter):
    out = []
    for seed in s["replications"]["per_seed"]:
        for p in seed["policies"]:
            if p["name"] == policy:
                out.append(getter(p))
    return out


def policies_of(s):
    return [p["name"] for p in s["replications"]["per_seed"][0]["policies"]]


def label(d):
    return os.path.basename(d.rstrip("/")).split("__")


def models_list(path):
    facts = {}
    with open(path) as f:
        for line in f:
            w = line.split()
            if len(w) >= 9 and w[0] != "model":
                facts[w[0]] = {"arch": w[1], "h": int(w[4]), "hkv": int(w[5]), "kv_over_hid": float(w[8])}
    return facts


def restore_mean(p):
    return p["restore_s"]["mean"]


def cmd_models(args):
    facts = models_list(args[0])
    print("| box | model | attention | hidden / KV bytes | kv-offload restore ms | hcache restore ms | adaptive restore ms "
          "| hcache ÷ kv-offload (paired) | verdict | adaptive stores (× KV) | adaptive TTFT p99 ms | kv-offload TTFT p99 ms |")
    print("|---|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|")
    for d in args[1:]:
        box, model = label(d)[:2]
        s = load(d)
        f = facts.get(model, {"arch": "?", "h": 0, "hkv": 1, "kv_over_hid": 1})
        g = f["h"] // max(f["hkv"], 1)
        att = ("MHA" if g == 1 else f"GQA-{g}") + (" MoE" if f["arch"] == "moe" else "")
        cells = {}
        for pol in ("kv-offload", "hcache", "adaptive"):
            cells[pol] = mean_ci(per_seed(s, pol, restore_mean))
        ko = per_seed(s, "kv-offload", restore_mean)
        hc = per_seed(s, "hcache", restore_mean)
        ratios = [h / k for h, k in zip(hc, ko) if k > 0]
        rm, rh = mean_ci(ratios) if ratios else (float("nan"), 0)
        if rm + rh < 0.9:
            verdict = "holds (hcache faster)"
        elif rm - rh > 1.1:
            verdict = "flips (kv-offload faster)"
        else:
            verdict = "shrinks (within ±10 %)"
        kvb = per_seed(s, "kv-offload", lambda p: p["saved_bytes_per_token"])[0]
        ad_b = per_seed(s, "adaptive", lambda p: p["saved_bytes_per_token"])[0]
        ap = mean_ci(per_seed(s, "adaptive", lambda p: p["ttft_s"]["p99"]))
        kp = mean_ci(per_seed(s, "kv-offload", lambda p: p["ttft_s"]["p99"]))
        print(f"| {box} | {model} | {att} | {1 / f['kv_over_hid']:.2f} | {fmt(*cells['kv-offload'])} | "
              f"{fmt(*cells['hcache'])} | {fmt(*cells['adaptive'])} | {rm:.2f} ± {rh:.2f} | {verdict} | "
              f"{ad_b / kvb:.2f} | {fmt(*ap)} | {fmt(*kp)} |")


def cmd_quant(args):
    print("| box | model | bits | policy | stored bytes per token (× fp16 KV) | restore mean ms | TTFT mean ms | TTFT p99 ms "
          "| restore ÷ its fp16 form (paired) |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|")
    base_of = {"kv-quant": "kv-offload", "hcache-quant": "hcache"}
    seen = set()  # full-precision rows are shown once per box (they do not depend on the bits)
    for d in args:
        box, model, bits = label(d)[:3]
        s = load(d)
        kvb = per_seed(s, "kv-offload", lambda p: p["saved_bytes_per_token"])[0]
        for pol in policies_of(s):
            if pol == "ideal" or (pol in ("kv-offload", "hcache") and (box, model, pol) in seen):
                continue
            seen.add((box, model, pol))
            r = mean_ci(per_seed(s, pol, restore_mean))
            tm = mean_ci(per_seed(s, pol, lambda p: p["ttft_s"]["mean"]))
            tp = mean_ci(per_seed(s, pol, lambda p: p["ttft_s"]["p99"]))
            b = per_seed(s, pol, lambda p: p["saved_bytes_per_token"])[0]
            rel = "–"
            if pol in base_of:
                a = per_seed(s, pol, restore_mean)
                z = per_seed(s, base_of[pol], restore_mean)
                q = [x / y for x, y in zip(a, z) if y > 0]
                if q:
                    qm, qh = mean_ci(q)
                    rel = f"{qm:.2f} ± {qh:.2f}"
            shown_bits = bits if pol in ("kv-quant", "hcache-quant") or (pol == "adaptive" and bits != "16") else "16"
            print(f"| {box} | {model} | {shown_bits} | {pol} | {b / kvb:.3f} | {fmt(*r)} | {fmt(*tm)} | {fmt(*tp)} | {rel} |")


def cmd_fair(args):
    print("| IO order | TTFT mean ms | short p99 ms | medium p99 ms | long p99 ms | short mean ms | long mean ms | requests short / medium / long |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for d in args:
        order = label(d)[0]
        s = load(d)
        pol = policies_of(s)[0]

        def cls(name, stat):
            return lambda p: next(c for c in p["by_history_class"] if c["class"] == name)["ttft_s"][stat]

        def n_of(name):
            return per_seed(s, pol, lambda p: next(c for c in p["by_history_class"] if c["class"] == name)["requests"])

        tm = mean_ci(per_seed(s, pol, lambda p: p["ttft_s"]["mean"]))
        cols = [fmt(*mean_ci(per_seed(s, pol, cls(c, "p99")))) for c in ("short", "medium", "long")]
        sm = fmt(*mean_ci(per_seed(s, pol, cls("short", "mean"))))
        lm = fmt(*mean_ci(per_seed(s, pol, cls("long", "mean"))))
        ns = " / ".join(f"{sum(n_of(c)) / len(n_of(c)):.0f}" for c in ("short", "medium", "long"))
        print(f"| {order} | {fmt(*tm)} | {cols[0]} | {cols[1]} | {cols[2]} | {sm} | {lm} | {ns} |")


def main():
    if len(sys.argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    cmd, args = sys.argv[1], sys.argv[2:]
    {"models": cmd_models, "quant": cmd_quant, "fair": cmd_fair}[cmd](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
