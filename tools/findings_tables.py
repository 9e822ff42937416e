#!/usr/bin/env python3
"""findings_tables.py — Markdown tables of results/findings.md from kvsim compare --seeds outputs.

Responsible for: reading each experiment's summary.json (replications.per_seed), computing means
with Student-t 95 % half-widths over the seeds (and paired ratios seed by seed), printing one table
per call. Not responsible for: running kvsim (tools/findings.sh does), any simulation.
Usage:
  findings_tables.py models MODELS_LIST DIR...   HCache vs KV offload (+ adaptive) per model and box
  findings_tables.py quant DIR...                quantized state vs full precision per platform
  findings_tables.py fair DIR...                 per-class TTFT tails per IO order
  findings_tables.py fair_csv DIR...             the same p99s as a tidy CSV (group,series,value,halfwidth)
  findings_tables.py cgen FIXED ADAPTIVE ...     kv-quant fixed 8 bit vs kv-quant.adaptive, pairs of dirs
  findings_tables.py scale DIR...                cacheflow restore time at S stages vs S = 1 (speed-up, efficiency)
  findings_tables.py boundary MODELS_LIST        boundary activations' bytes against the KV per model
  findings_tables.py onetier DIR...              hcache-cf against hcache + cacheflow kept both
  findings_tables.py maps DIR...                 kvsim map outputs: winners by history, flip probability, break-even lines
  findings_tables.py oracle SEEDS DIR...         each policy's mean TTFT over the trace's oracle bound, per seed run DIR/seed-K
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


CLASSES = ("short", "medium", "long")


def class_stat(name, stat):
    return lambda p: next(c for c in p["by_history_class"] if c["class"] == name)["ttft_s"][stat]


def cmd_fair_csv(args):
    print("group,series,value,halfwidth")
    for d in args:
        order = label(d)[0]
        s = load(d)
        pol = policies_of(s)[0]
        for c in CLASSES:
            m, h = mean_ci(per_seed(s, pol, class_stat(c, "p99")))
            print(f"{c},{order},{m * 1e3:.3f},{h * 1e3:.3f}")


def paired_ratio(a, b):
    q = [x / y for x, y in zip(a, b) if y > 0]
    return mean_ci(q) if q else (float("nan"), 0.0)


def cmd_cgen(args):
    print("| box | model | fixed 8 bit restore ms | adaptive restore ms | adaptive ÷ fixed (paired) | stored (× fp16 KV) fixed / adaptive "
          "| adaptive layers 8 bit / 4 bit / recompute | TTFT p99 ms fixed | TTFT p99 ms adaptive |")
    print("|---|---|---:|---:|---:|---|---|---:|---:|")
    for fixed, adap in zip(args[0::2], args[1::2]):
        box, model = label(adap)[:2]
        sf, sa = load(fixed), load(adap)
        kvb = per_seed(sf, "kv-offload", lambda p: p["saved_bytes_per_token"])[0]
        rf = per_seed(sf, "kv-quant", restore_mean)
        ra = per_seed(sa, "kv-quant", restore_mean)
        qm, qh = paired_ratio(ra, rf)
        bf = per_seed(sf, "kv-quant", lambda p: p["saved_bytes_per_token"])[0]
        ba = per_seed(sa, "kv-quant", lambda p: p["saved_bytes_per_token"])[0]
        shares = per_seed(sa, "kv-quant", lambda p: p["policy_notes"]["layer_share"])
        sh = " / ".join(f"{sum(x[k] for x in shares) / len(shares):.2f}" for k in ("bits_8", "bits_4", "recompute"))
        pf = mean_ci(per_seed(sf, "kv-quant", lambda p: p["ttft_s"]["p99"]))
        pa = mean_ci(per_seed(sa, "kv-quant", lambda p: p["ttft_s"]["p99"]))
        print(f"| {box} | {model} | {fmt(*mean_ci(rf))} | {fmt(*mean_ci(ra))} | {qm:.2f} ± {qh:.2f} | {bf / kvb:.3f} / {ba / kvb:.3f} "
              f"| {sh} | {fmt(*pf)} | {fmt(*pa)} |")


def scale_runs(args):
    """{(box, model, nic): {S: summary}} with S = 1 under both NIC kinds"""
    runs = {}
    for d in args:
        box, model, S, nic = label(d)[:4]
        s = load(d)
        runs.setdefault((box, model, nic), {})[int(S)] = s
    for (box, model, nic), v in runs.items():
        if nic != "shared" and 1 not in v:
            v[1] = runs[(box, model, "shared")][1]
    return runs


def stage_layers(L, S):
    base, rem = divmod(L, S)
    return f"{base + 1}/{base}" if rem else f"{base}"


def cmd_scale(args):
    print("| box | model | NIC | S | layers per stage | cacheflow restore ms | speed-up vs S = 1 (paired) | efficiency | "
          "stage-parallel plans | stored (× KV) | TTFT p99 ms |")
    print("|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|")
    layers = {"Llama-3.1-8B": 32, "Qwen3-8B": 36, "Llama-2-7B": 32}
    runs = scale_runs(args)
    for (box, model, nic), v in runs.items():
        base = per_seed(v[1], "cacheflow", restore_mean)
        kvb = None
        for S in sorted(v):
            if nic != "shared" and S == 1:
                continue
            s = v[S]
            r = per_seed(s, "cacheflow", restore_mean)
            sp = [b / x for b, x in zip(base, r) if x > 0]
            sm, sh = mean_ci(sp)
            em, eh = mean_ci([x / S for x in sp])
            notes = per_seed(s, "cacheflow", lambda p: p["policy_notes"]["plans"])
            share = sum(n["stage_parallel"] for n in notes) / max(1, sum(n["stage_parallel"] + n["layerwise"] + n["tokenwise"] + n["kv"] for n in notes))
            b = per_seed(s, "cacheflow", lambda p: p["saved_bytes_per_token"])[0]
            if kvb is None:
                kvb = per_seed(v[1], "cacheflow", lambda p: p["saved_bytes_per_token"])[0]
            tp = mean_ci(per_seed(s, "cacheflow", lambda p: p["ttft_s"]["p99"]))
            L = layers.get(model, 0)
            print(f"| {box} | {model} | {nic if S > 1 else '–'} | {S} | {stage_layers(L, S) if L else '?'} | {fmt(*mean_ci(r))} | "
                  f"{sm:.2f} ± {sh:.2f} | {em:.2f} ± {eh:.2f} | {share * 100:.0f} % | {b / kvb:.3f} | {fmt(*tp)} |")


def cmd_boundary(args):
    print("| model | attention | layers | hidden D | KV bytes per token | one boundary (× KV) | S = 2 | S = 4 | S = 8 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    with open(args[0]) as f:
        for line in f:
            w = line.split()
            if len(w) < 9 or w[0] == "model":
                continue
            L, D, h, hkv, kvb = int(w[2]), int(w[3]), int(w[4]), int(w[5]), int(w[7])
            g = h // max(hkv, 1)
            att = ("MHA" if g == 1 else f"GQA-{g}") + (" MoE" if w[1] == "moe" else "")
            one = 2 * D / kvb
            print(f"| {w[0]} | {att} | {L} | {D} | {kvb} | {one:.4f} | {one:.3f} | {3 * one:.3f} | {7 * one:.3f} |")


def cmd_onetier(args):
    print("| box | model | NIC | S | stored × KV: hcache / cacheflow / both / hcache-cf | TTFT mean ms hcache | cacheflow | "
          "both (faster per seed) | hcache-cf | hcache-cf ÷ both (paired) | hcache-cf ≥ ideal |")
    print("|---|---|---|---:|---|---:|---:|---:|---:|---:|---|")
    for d in args:
        box, model, S, nic = label(d)[:4]
        S = int(S)
        if S not in (1, 4, 8):
            continue
        s = load(d)
        byt = {p: per_seed(s, p, lambda x: x["saved_bytes_per_token"])[0] for p in ("hcache", "cacheflow", "hcache-cf")}
        # the fp16 KV bytes: cacheflow's minus its boundary activations (S - 1 hidden states)
        hid_layer = byt["hcache"] / {"Llama-3.1-8B": 32, "Qwen3-8B": 36, "Llama-2-7B": 32}.get(model, 1)
        kvb = byt["cacheflow"] - (S - 1) * hid_layer
        t = {p: per_seed(s, p, lambda x: x["ttft_s"]["mean"]) for p in ("hcache", "cacheflow", "hcache-cf", "ideal")}
        both = [min(a, b) for a, b in zip(t["hcache"], t["cacheflow"])]
        qm, qh = paired_ratio(t["hcache-cf"], both)
        ok = all(x >= y for x, y in zip(t["hcache-cf"], t["ideal"]))
        st = f"{byt['hcache'] / kvb:.2f} / {byt['cacheflow'] / kvb:.2f} / {(byt['hcache'] + byt['cacheflow']) / kvb:.2f} / {byt['hcache-cf'] / kvb:.2f}"
        print(f"| {box} | {model} | {nic if S > 1 else '–'} | {S} | {st} | {fmt(*mean_ci(t['hcache']))} | {fmt(*mean_ci(t['cacheflow']))} | "
              f"{fmt(*mean_ci(both))} | {fmt(*mean_ci(t['hcache-cf']))} | {qm:.2f} ± {qh:.2f} | {'yes' if ok else 'NO'} |")


def short_tokens(t):
    return f"{t // 1024}K" if t >= 1024 and t % 1024 == 0 else (f"{t / 1024:.1f}K" if t >= 1024 else str(t))


def cmd_maps(args):
    """one row per map and resource value: the fastest policy (ties joined by '=') at the shortest,
    a middle and the longest history, the largest flip probability over the histories, the break-even
    lines between the families and how far their search ran"""
    print("| box | model | resource | fastest at short history | middle | long | largest flip | break-even (families) |")
    print("|---|---|---|---|---|---|---:|---|")
    for d in args:
        m = json.load(open(os.path.join(d, "map.json")))
        hs = m["history_tokens"]
        picks = [hs[0], hs[len(hs) // 2], hs[-1]]
        for v in m["vary"]["values"]:
            cells = {c["history_tokens"]: c for c in m["cells"] if c["value"] == v and c["load"] == 0}
            win = []
            for h in picks:
                c = cells[h]
                name = "=".join([c["winner"]] + c.get("tied_with_winner", []))
                win.append(f"{name} ({short_tokens(h)}, +{c['margin_s'] * 1e3:.1f} ms)")
            flips = [c["flip_probability"] for c in cells.values() if c["flip_probability"] is not None]
            flip = f"{100 * max(flips):.0f} %" if flips else "–"
            be = [f"{b['a']}\u2194{b['b']} at {short_tokens(int(b['history_tokens']))} ({b['faster_below']} below)"
                  for b in m["break_even"] if b["value"] == v]
            reach = m.get("break_even_searched_up_to", {}).get(v)
            txt = "; ".join(be) if be else "none"
            if reach is not None:
                txt += f" (searched to {short_tokens(int(reach))})"
            print(f"| {m['platform']} | {m['model']} | {m['vary']['key']}={v} | {win[0]} | {win[1]} | {win[2]} | {flip} | {txt} |")


def cmd_oracle(args):
    """rows: scenarios (DIR/seed-K/summary.json, one single-seed compare per seed); the oracle bound's
    mean TTFT, then every policy's mean TTFT ÷ that seed's bound, mean ± 95 % half-width over seeds;
    ⚠N: N of the policy's seeds were overloaded (summary.json load.overloaded)"""
    seeds = int(args[0])
    dirs = args[1:]
    pols = []
    rows = []
    for d in dirs:
        runs = [load(os.path.join(d, f"seed-{k}")) for k in range(1, seeds + 1)]
        bound = [r["oracle"]["ttft_mean_s"] for r in runs]
        gap = {}
        over = {}
        for r, b in zip(runs, bound):
            for p in r["policies"]:
                if p["name"] not in pols:
                    pols.append(p["name"])
                gap.setdefault(p["name"], []).append(p["ttft_s"]["mean"] / b)
                over.setdefault(p["name"], 0)
                over[p["name"]] += 1 if p.get("load", {}).get("overloaded") else 0
        rows.append((os.path.basename(d), bound, gap, over))
    print("| scenario | oracle mean ms | " + " | ".join(pols) + " |")
    print("|---|---:|" + "---:|" * len(pols))
    for name, bound, gap, over in rows:
        m, h = mean_ci(bound)
        cells = []
        for p in pols:
            if p in gap and len(gap[p]) == seeds:
                gm, gh = mean_ci(gap[p])
                cells.append(f"{gm:.2f} ± {gh:.2f}" + (f" ⚠{over[p]}" if over.get(p) else ""))
            else:
                cells.append("–")
        print(f"| {name} | {fmt(m, h)} | " + " | ".join(cells) + " |")


def main():
    if len(sys.argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    cmd, args = sys.argv[1], sys.argv[2:]
    {"models": cmd_models, "quant": cmd_quant, "fair": cmd_fair, "fair_csv": cmd_fair_csv, "cgen": cmd_cgen, "scale": cmd_scale,
     "boundary": cmd_boundary, "onetier": cmd_onetier, "maps": cmd_maps, "oracle": cmd_oracle}[cmd](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
