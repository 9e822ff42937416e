#!/usr/bin/env python3
"""validate_report.py — the two helpers of tools/validate.sh (make validate; docs/validation.md).

  --overlay DB [--gpus N]
                        print a kvsim hardware overlay describing this machine from the newest cpu
                        calibration in cost store DB: platform validate-host, its "GPU" the CPU, its
                        host link a memcpy (the engine takes h2d/d2h from the store's curves), one
                        "SSD": the scratch directory, read rate and latency fitted to the store's
                        ssd_read points at queue depth 1, one file (least squares of the relative
                        error over every size: ssd_line). --gpus N (default 1): N "GPUs"
                        per node, for N pipeline stages (kvcal execute runs stage st on CPU st).
                        --io-rate MB/S: the SSD an emulated drive of that read rate and 1 us latency
                        (kvcal execute --io-rate: every ssd hop takes at least bytes / rate).
                        When the store has net points (kvcal run --net loopback), the platform also
                        has a NIC to a remote store: "loopback", latency and rate fitted to them as the
                        SSD's (a fetch from a server process over TCP on the loopback interface, as
                        kvcal execute replays the remote tier); --net-rate MB/S [--net-latency US]:
                        that NIC an emulated network of this rate and latency instead (kvcal execute
                        --net-rate/--net-latency: every nic hop takes at least latency + bytes / rate).
  --merge DB [--last K] add to cost store DB one run whose every point is the median, point by
                        point, of the newest K (default 3) measured cpu runs (merged runs left out):
                        calibrations interleaved with the cases, the prediction from their median, so
                        that one calibration caught by a burst of load on a shared machine does not
                        decide a case. The merged run is newest; its notes name its sources.
                        --stat low: each point the median of the runs' p10 (the undisturbed time, as
                        kvcal execute --stat min measures the replay) instead of their medians.
  --report DIR --json F per case of DIR/cases/*/execute.json (kvcal execute): measured, predicted and
                        error of TTFT, restore time and per-iteration time of the restoring turns;
                        then median and p95 |error| over the cases; the JSON to F.
  --backend cuda        --overlay and --merge from the store's cuda runs (validate.sh BACKEND=cuda):
                        the overlay's "GPU" is this machine's GPU (cuda-host, the device key validate.sh
                        stores its cuda calibrations under), its link the calibration's h2d curve
                        (pinned memory, as kvcal execute --backend cuda copies). Default cpu.
Errors are (predicted - measured) / measured.
"""
import argparse
import glob
import json
import os
import re
import sqlite3
import statistics
import sys


def ssd_line(pts):
    """The engine's SSD read model, latency + bytes / rate, through the points [(bytes, ns)] at queue
    depth 1: least squares of the relative error (each size counts alike: the 64 KiB reads of a
    layer's state as much as the 16 MiB ones), the latency kept >= 0. Returns (bytes/s, latency ns);
    (1 GB/s, 50 us) with fewer than two sizes."""
    pts = [(float(b), float(t)) for b, t in pts if t > 0]
    if len({b for b, _ in pts}) < 2:
        return 1e9, 50e3
    # minimise sum ((lat + b*s - t) / t)^2 over lat, s (s = ns per byte): the normal equations
    w = [1.0 / (t * t) for _, t in pts]
    s00 = sum(w)
    s01 = sum(wi * b for wi, (b, _) in zip(w, pts))
    s11 = sum(wi * b * b for wi, (b, _) in zip(w, pts))
    r0 = sum(wi * t for wi, (_, t) in zip(w, pts))
    r1 = sum(wi * b * t for wi, (b, t) in zip(w, pts))
    det = s00 * s11 - s01 * s01
    lat = (r0 * s11 - r1 * s01) / det
    sl = (s00 * r1 - s01 * r0) / det
    if lat < 0 or sl <= 0:  # through the origin
        lat, sl = 0.0, r1 / s11
    return 1e9 / sl, lat


def emulate_ssd(hw, io_rate):
    """The overlay's SSD as kvcal execute --io-rate MB/S emulates it: that read rate, and the real read's
    latency hidden in it (every ssd hop takes at least bytes / rate)."""
    ssd = hw["ssds"][0]
    ssd["read"] = f"{io_rate / 1000:.6g} GB/s"
    ssd["read_latency"] = "1 us"
    ssd["basis"] = "emulated"
    ssd["source"] += f"; read rate emulated: kvcal execute --io-rate {io_rate:g} (MB/s)"
    return hw


def emulate_nic(hw, net_rate, net_latency_us):
    """The overlay's NIC as kvcal execute --net-rate MB/S --net-latency US emulates it: every nic hop
    lasts at least latency + bytes / rate, which hides the loopback's own time when it is slower."""
    return set_nic(hw, f"{net_rate / 1000:.6g} GB/s", f"{net_latency_us:g} us", "emulated",
                   f"make validate: kvcal execute --net-rate {net_rate:g} (MB/s) --net-latency {net_latency_us:g} (us)")


def set_nic(hw, rate, latency, basis, source):
    """The overlay's platform reaches a remote store over one NIC, "loopback", of this rate and latency."""
    hw["nics"] = [{"name": "loopback", "line": rate, "effective": rate, "latency": latency, "basis": basis, "source": source}]
    hw["platforms"][0]["nic"] = "loopback"
    return hw


def overlay(db, gpus=1, backend="cpu", io_rate=0.0, net_rate=0.0, net_latency_us=0.0):
    hw = overlay_hw(db, gpus, backend)
    if io_rate > 0:
        emulate_ssd(hw, io_rate)
    if net_rate > 0:
        emulate_nic(hw, net_rate, net_latency_us)
    json.dump(hw, sys.stdout, indent=1)
    print()


def overlay_hw(db, gpus=1, backend="cpu"):
    """The overlay (a dict) from the newest complete run of the backend in cost store DB."""
    c = sqlite3.connect(db)
    run = c.execute("select max(id) from run where backend=? and complete=1", (backend,)).fetchone()[0]  # the merged run when there is one
    if run is None:
        sys.exit(f"validate_report: {db}: no complete {backend} run")
    pts = c.execute("select p1, median_ns from point where run_id=? and op='ssd_read' and p2=1 and p3=1 order by p1",
                    (run,)).fetchall()
    rate, lat = ssd_line(pts)
    net = c.execute("select p1, median_ns from point where run_id=? and op='net' order by p1", (run,)).fetchall()
    h2d = c.execute("select p1, median_ns from point where run_id=? and op='h2d' order by p1 desc limit 1", (run,)).fetchone()
    link = h2d[0] / h2d[1] * 1e9 if h2d else 10e9
    src = f"make validate: {backend} calibration run {run} of {os.path.basename(db)}"
    hw = {
        "gpus": [{"name": "cpu-host", "full_name": "this machine's CPU as kvcal execute runs it", "fp16": "0.2 TFLOP/s",
                  "fp32": "0.2 TFLOP/s", "mem": "16 GB", "mem_bw": "10 GB/s", "pcie": "host-memcpy", "basis": "estimate",
                  "source": src + " (compute comes from the store, not from these figures)"}],
        "links": [{"name": "host-memcpy", "theoretical": f"{link / 1e9:.3f} GB/s", "h2d": f"{link / 1e9:.3f} GB/s",
                   "d2h": f"{link / 1e9:.3f} GB/s", "h2d_bidir": f"{link / 2e9:.3f} GB/s", "d2h_bidir": f"{link / 2e9:.3f} GB/s",
                   "pageable_factor": 1, "latency": "1 us", "basis": "measured", "source": src}],
        "ssds": [{"name": "scratch-dir", "full_name": "the scratch directory's device, O_DIRECT", "read": f"{rate / 1e9:.4f} GB/s",
                  "write": f"{rate / 1e9:.4f} GB/s", "read_latency": f"{lat / 1e3:.1f} us", "write_latency": "20 us",
                  "capacity": "100 GB", "basis": "measured", "source": src + ": ssd_read at queue depth 1"}],
        "platforms": [{"name": "validate-host", "description": "this machine: its CPU, memcpy as the host link, the scratch directory as one SSD",
                       "gpu": "cpu-host", "gpus_per_node": gpus, "link": "host-memcpy", "ssd": "scratch-dir", "n_ssd": 1,
                       "stripe_chunk": "1 MiB", "dram": "1 MB", "source": src}],
    }
    if net:  # the remote store on the loopback interface (kvcal run --net loopback)
        nrate, nlat = ssd_line(net)
        set_nic(hw, f"{nrate / 1e9:.4f} GB/s", f"{nlat / 1e3:.1f} us", "measured",
                src + ": net (a fetch from a server process over TCP on the loopback interface)")
    if backend == "cuda":  # this machine's GPU: the store has its compute; the figures only where it has none
        hw["gpus"] = [{"name": "cuda-host", "full_name": "this machine's CUDA device 0 as kvcal execute --backend cuda runs it",
                       "fp16": "989 TFLOP/s", "fp32": "67 TFLOP/s", "mem": "141 GB", "mem_bw": "4800 GB/s", "pcie": "host-memcpy",
                       "basis": "estimate", "source": src + " (an H200's datasheet figures; compute comes from the store, not from these)"}]
        hw["links"][0]["name"] = hw["platforms"][0]["link"] = hw["gpus"][0]["pcie"] = "host-pinned"
        hw["platforms"][0]["gpu"] = "cuda-host"
        hw["platforms"][0]["description"] = "this machine: its GPU, the pinned host link, the scratch directory as one SSD"
    return hw


MERGED = "validate: median of runs"
MERGED_LOW = "validate: median of the p10 of runs"


def merge(db, last, low=False, backend="cpu"):
    c = sqlite3.connect(db)
    runs = [r[0] for r in c.execute("select id from run where backend=? and complete=1 and notes not like ? and notes not like ? order by id desc limit ?",
                                    (backend, MERGED + "%", MERGED_LOW + "%", last))]
    if not runs:
        sys.exit(f"validate_report: {db}: no complete {backend} run to merge")
    rid = add_merged_run(c, c, runs, f"{MERGED_LOW if low else MERGED} {','.join(str(r) for r in sorted(runs))}; ",
                         "p10" if low else "median", "median")
    c.commit()
    print(f"merged run {rid}: median of {'the p10 of ' if low else ''}runs {sorted(runs)}")


def add_merged_run(src, dst, runs, prefix, within="median", across="median"):
    """Insert into store connection dst one run (returned: its id) whose every point combines, point
    by point, the runs `runs` of store connection src: per run its median or p10 (`within`), over
    the runs their median or least (`across`); a point missing from some run is left out. Its
    metadata is the newest run's, its notes prefix + the newest run's (cut to the store's 511 bytes)."""
    cols = [r[1] for r in src.execute("pragma table_info(run)") if r[1] != "id"]
    meta = dict(zip(cols, src.execute(f"select {','.join(cols)} from run where id=?", (max(runs),)).fetchone()))
    # the store's notes column holds 511 bytes (kvsim refuses a longer one): the end is cut, as kvcal run cuts its own
    meta["notes"] = (prefix + meta["notes"]).encode()[:511].decode("utf-8", "ignore")
    # the newest of dst's runs, as the cost reader ranks them (started_at, then id): the one kvsim reads
    meta["started_at"] = max(meta["started_at"], dst.execute("select max(started_at) from run").fetchone()[0] or meta["started_at"])
    pts = {}
    q = "select op,model,dtype,tp,p1,p2,p3,n,median_ns,p10_ns,p90_ns from point where run_id=?"
    for r in runs:
        for op, model, dtype, tp, p1, p2, p3, n, med, p10, p90 in src.execute(q, (r,)):
            pts.setdefault((op, model, dtype, tp, p1, p2, p3), []).append((n, med, p10, p90))
    cur = dst.cursor()
    cur.execute(f"insert into run({','.join(cols)}) values({','.join('?' * len(cols))})", [meta[k] for k in cols])
    rid = cur.lastrowid
    pick = {"median": statistics.median, "min": min}[across]
    for k, v in sorted(pts.items()):
        if len(v) != len(runs):
            continue  # a point not in every run (an op skipped): left out
        med = pick([x[2 if within == "p10" else 1] for x in v])
        p10 = min(min(x[2] for x in v), med)
        p90 = max(max(x[3] for x in v), med)
        cur.execute("insert into point(run_id,op,model,dtype,tp,p1,p2,p3,n,median_ns,p10_ns,p90_ns) values(?,?,?,?,?,?,?,?,?,?,?,?)",
                    (rid,) + k + (sum(x[0] for x in v), med, p10, p90))
    return rid


def err(m, p):
    return (p - m) / m if m > 0 else 0.0


def pct(v, q):
    if not v:
        return 0.0
    v = sorted(v)
    k = min(len(v) - 1, max(0, int(round(q * (len(v) - 1)))))
    return v[k]


def plan_of(schedule):
    """What a schedule runs, without its times: per restoring request its restoration and token
    splits, the iterations' item shapes and lanes, the units' layers and token ranges (equal plans
    replay the same work, so their times can be pooled)."""
    sig = []
    try:
        for line in open(schedule):
            r = json.loads(line)
            if r["rec"] == "request":
                sig.append(("request", r["req"], r.get("hist"), r.get("restore"), r.get("recompute_tokens"), r.get("layerwise_tokens")))
            elif r["rec"] == "iter":
                sig.append(("iter", tuple((i["req"], i["kind"], i["tokens"], i["ctx"], i.get("lw")) for i in r["items"]),
                            len(r.get("lanes", []))))
            elif r["rec"] == "unit":
                sig.append(("unit", r.get("req"), r.get("kind"), r.get("layer"), r.get("state"), r.get("tok_lo"), r.get("tok_hi"), r.get("tier")))
    except (OSError, ValueError, KeyError):
        return None
    return tuple(sig)


def one_pass(path):
    """One replayed pass of a case (a directory with execute.json): its means, or (None, why)."""
    ex = os.path.join(path, "execute.json")
    if not os.path.exists(ex):
        txt = open(os.path.join(path, "execute.txt")).read().strip().splitlines() if os.path.exists(os.path.join(path, "execute.txt")) else []
        return None, txt[-1] if txt else "not run"
    j = json.load(open(ex))
    rq = [r for r in j["requests"] if r["hist"] > 0]
    if not rq:
        return None, "no restoring request"
    its = [i for i in j["iterations"]]
    lanes = [ln for i in its for ln in i.get("lanes", [])]
    return {"j": j, "rq": rq, "plan": plan_of(os.path.join(path, "schedule.jsonl")),
            "tm": statistics.mean(r["ttft_ns"]["measured"] for r in rq), "tp": statistics.mean(r["ttft_ns"]["predicted"] for r in rq),
            "rm": statistics.mean(r["restore_ns"]["measured"] for r in rq), "rp": statistics.mean(r["restore_ns"]["predicted"] for r in rq),
            "im": sum(i["duration_ns"]["measured"] for i in its) / max(len(its), 1),
            "ip": sum(i["duration_ns"]["predicted"] for i in its) / max(len(its), 1),
            "lanes": lanes}, None


def report(d, out, stat="median"):
    cases, skipped = [], []
    for path in sorted(glob.glob(os.path.join(d, "cases", "*"))):
        name = os.path.basename(path)
        # one pass: the case directory itself; several (validate.sh PASSES): pass1, pass2, ...
        pdirs = sorted(glob.glob(os.path.join(path, "pass*")), key=lambda p: int(os.path.basename(p)[4:] or 0)) or [path]
        passes, why = [], None
        for pd in pdirs:
            ps, w = one_pass(pd)
            if ps:
                passes.append(ps)
            else:
                why = why or w
        if not passes:
            skipped.append({"case": name, "why": why})
            continue
        # the passes that replayed the same plan as most of them (a policy that decides from the
        # costs may plan differently after another calibration): each side's median over those
        groups = {}
        for ps in passes:
            groups.setdefault(ps["plan"], []).append(ps)
        use = max(groups.values(), key=len)  # ties: the first pass's plan (dicts keep insertion order)
        # each side over the passes as within one (validate.sh STAT): median, or the least ("low")
        med = (lambda k: min(ps[k] for ps in use)) if stat == "low" else (lambda k: statistics.median(ps[k] for ps in use))
        tm, tp, rm, rp, im, ip = (med(k) for k in ("tm", "tp", "rm", "rp", "im", "ip"))
        j, rq = use[0]["j"], use[0]["rq"]
        meet = [r["meet_tokens"] for r in rq if r["restore"] == "tokenwise"]
        # a race (kvcal execute --race): the meet measured at run time, per pass the replays' median
        meet_m = [ps["rq"][0]["meet_measured"] for ps in use if "meet_measured" in ps["rq"][0]]
        # a raced batch: each restoring request's meet, measured (median over the passes) and predicted
        tw_i = [i for i, r in enumerate(rq) if r["restore"] == "tokenwise"]
        meets_by_req = ([{"req": rq[i]["req"], "measured": statistics.median(ps["rq"][i]["meet_measured"] for ps in use),
                          "predicted": statistics.median(ps["rq"][i]["meet_tokens"] for ps in use)} for i in tw_i]
                        if meet_m and len(tw_i) > 1 else None)
        lanes = use[0]["lanes"]
        cases.append({"case": name, "policy": j["policy"], "stages": j.get("stages", 1), "lanes": len(lanes),
                      "lane_ms": statistics.median(statistics.mean(ln["measured_ns"] for ln in ps["lanes"]) for ps in use) / 1e6 if lanes else 0.0,
                      "requests": len(rq), "deps_ok": all(ps["j"]["deps_ok"] for ps in passes),
                      "passes": len(passes), "passes_used": len(use),
                      "ttft_ms": {"measured": tm / 1e6, "predicted": tp / 1e6, "error": err(tm, tp),
                                  "passes": [{"measured": ps["tm"] / 1e6, "predicted": ps["tp"] / 1e6} for ps in passes]},
                      "restore_ms": {"measured": rm / 1e6, "predicted": rp / 1e6, "error": err(rm, rp)},
                      "iteration_ms": {"measured": im / 1e6, "predicted": ip / 1e6, "error": err(im, ip)},
                      "meet_tokens_predicted": meet, "race": "race" in j,
                      "meet_tokens_measured": statistics.median(meet_m) if meet_m else None,
                      "meet_tokens_predicted_passes": [ps["rq"][0]["meet_tokens"] for ps in use] if meet_m else None,
                      "meets_by_request": meets_by_req,
                      "note": j["note"]})
    print(f"{'case':<28} {'ttft_ms':>9} {'pred':>9} {'err':>7}  {'restore_ms':>10} {'pred':>9} {'err':>7}  {'iter_ms':>8} {'pred':>8} {'err':>7}")
    for c in cases:
        t, r, i = c["ttft_ms"], c["restore_ms"], c["iteration_ms"]
        print(f"{c['case']:<28} {t['measured']:9.2f} {t['predicted']:9.2f} {t['error'] * 100:6.1f}%  "
              f"{r['measured']:10.2f} {r['predicted']:9.2f} {r['error'] * 100:6.1f}%  "
              f"{i['measured']:8.2f} {i['predicted']:8.2f} {i['error'] * 100:6.1f}%")
    for s in skipped:
        print(f"{s['case']:<28} skipped: {s['why']}")
    split = [c for c in cases if c["passes_used"] < c["passes"]]
    for c in split:
        print(f"{c['case']}: the plan differed between passes; the {c['passes_used']} of {c['passes']} passes with the same plan are used")
    def summary(cs):
        out = {}
        for key in ("ttft_ms", "restore_ms", "iteration_ms"):
            # no restore time (nothing restored) or no iterations (a race: its chunks are not the schedule's)
            a = [abs(c[key]["error"]) for c in cs if not (key in ("restore_ms", "iteration_ms") and c[key]["measured"] == 0)]
            out[key] = {"median_abs_error": statistics.median(a) if a else 0.0, "p95_abs_error": pct(a, 0.95), "cases": len(a)}
        return out

    # the split sweep (validate.sh SPLIT_CASES): one case per forced split, apart from the summary
    sweeps, cases_all, cases = {}, cases, []
    for c in cases_all:
        m = re.match(r"(.+)-split(\d+)-h(\d+)-b(\d+)$", c["case"])
        if m:
            sweeps.setdefault((m.group(1), int(m.group(3)), int(m.group(4))), []).append((int(m.group(2)), c))
        else:
            cases.append(c)
    summ = summary(cases)
    # the noise floor: how far one pass's replay (and prediction) of a case falls from that case's
    # median over the passes — the same work, minutes apart; an error below it cannot be shown here
    dev_m = [abs(p["measured"] / statistics.median(q["measured"] for q in c["ttft_ms"]["passes"]) - 1)
             for c in cases if c["passes"] > 1 and c["passes_used"] == c["passes"] for p in c["ttft_ms"]["passes"]]
    dev_p = [abs(p["predicted"] / statistics.median(q["predicted"] for q in c["ttft_ms"]["passes"]) - 1)
             for c in cases if c["passes"] > 1 and c["passes_used"] == c["passes"] for p in c["ttft_ms"]["passes"]]
    noise = None
    if dev_m:
        noise = {"replay_median_abs_dev": statistics.median(dev_m), "replay_p95_abs_dev": pct(dev_m, 0.95),
                 "prediction_median_abs_dev": statistics.median(dev_p), "prediction_p95_abs_dev": pct(dev_p, 0.95), "samples": len(dev_m)}
    for key, s in summ.items():
        print(f"{key:<13} median |error| {s['median_abs_error'] * 100:5.1f}%   p95 |error| {s['p95_abs_error'] * 100:5.1f}%   ({s['cases']} cases)")
    by_stages = {}
    for n in sorted({c["stages"] for c in cases}):
        by_stages[str(n)] = summary([c for c in cases if c["stages"] == n])
    if len(by_stages) > 1:  # the pipeline cases apart (and the one-stage ones, as before they were added)
        for n, sm in by_stages.items():
            print(f"S={n}: " + ", ".join(f"{key} median |error| {v['median_abs_error'] * 100:.1f}% p95 {v['p95_abs_error'] * 100:.1f}%"
                                          for key, v in sm.items()) + f" ({sm['ttft_ms']['cases']} cases)")
    remote = [c for c in cases if "-remote-" in c["case"]]  # validate.sh REMOTE_POLS: restored from the remote tier
    by_tier = {}
    if remote:
        by_tier["remote"] = summary(remote)
        print("remote tier: " + ", ".join(f"{key} median |error| {v['median_abs_error'] * 100:.1f}% p95 {v['p95_abs_error'] * 100:.1f}%"
                                          for key, v in by_tier["remote"].items()) + f" ({len(remote)} cases)")
    for c in cases:
        if c["lanes"]:
            print(f"lanes {c['case']}: {c['lanes']} stage-parallel lane layers replayed, {c['lane_ms']:.2f} ms each (mean)")
    tw = [c for c in cases if c["meet_tokens_predicted"] and not c["race"]]
    for c in tw:
        print(f"meet point {c['case']}: predicted {c['meet_tokens_predicted']} tokens computed forward "
              "(the replay follows the schedule's chunks: measured = predicted by construction)")
    for c in cases:  # the races: the two pointers at run time (kvcal execute --race)
        if c["race"] and c["meet_tokens_measured"] is not None:
            pp = c["meet_tokens_predicted_passes"]
            if c.get("meets_by_request"):  # a raced batch: every request's meet
                mb = c["meets_by_request"]
                print(f"meet points {c['case']} (a batch raced at run time; per request, tokens computed forward): measured "
                      f"{[round(m['measured']) for m in mb]}, predicted {[round(m['predicted']) for m in mb]}")
                continue
            print(f"meet point {c['case']} (raced at run time): measured {c['meet_tokens_measured']:.0f} tokens computed forward, "
                  f"predicted {statistics.median(pp):.0f} (passes: predicted {pp})")
    sweep_out = []
    for (pol, h, b), ks in sorted(sweeps.items()):
        ks.sort()
        rows = [{"split": k, "ttft_measured_ms": c["ttft_ms"]["measured"], "ttft_predicted_ms": c["ttft_ms"]["predicted"],
                 "error": c["ttft_ms"]["error"]} for k, c in ks]
        bm = min(rows, key=lambda r: r["ttft_measured_ms"])
        bp = min(rows, key=lambda r: r["ttft_predicted_ms"])
        loss = bp["ttft_measured_ms"] / bm["ttft_measured_ms"] - 1
        print(f"split sweep {pol} h={h} batch={b} (layers recomputed: TTFT measured / predicted ms): "
              + ", ".join(f"{r['split']}: {r['ttft_measured_ms']:.1f} / {r['ttft_predicted_ms']:.1f}" for r in rows))
        print(f"split sweep {pol} h={h}: fastest measured at {bm['split']} ({bm['ttft_measured_ms']:.1f} ms), predicted at "
              f"{bp['split']} ({bp['ttft_predicted_ms']:.1f} ms); the predicted split measured {loss * 100:.1f}% slower than the fastest")
        sweep_out.append({"policy": pol, "hist": h, "batch": b, "splits": rows, "best_measured": bm["split"],
                          "best_predicted": bp["split"], "loss_at_predicted": loss})
    if noise:
        print(f"noise floor: one pass's TTFT against its case's median over the passes: replays |deviation| median "
              f"{noise['replay_median_abs_dev'] * 100:.1f}% p95 {noise['replay_p95_abs_dev'] * 100:.1f}%, predictions median "
              f"{noise['prediction_median_abs_dev'] * 100:.1f}% p95 {noise['prediction_p95_abs_dev'] * 100:.1f}% ({noise['samples']} passes)")
    res = {"cases": cases_all, "skipped": skipped, "split_sweeps": sweep_out, "summary": summ, "summary_by_stages": by_stages, "summary_remote": by_tier.get("remote"), "goal": {"ttft_median": 0.05, "ttft_p95": 0.10},
           "noise_floor": noise, "stat": stat, "machine": machine()}
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"-> {out}")


def machine():
    model = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": model}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--overlay")
    ap.add_argument("--report")
    ap.add_argument("--merge")
    ap.add_argument("--last", type=int, default=3)
    ap.add_argument("--gpus", type=int, default=1, help="--overlay: GPUs per node (pipeline stages; default 1)")
    ap.add_argument("--io-rate", type=float, default=0.0, help="--overlay: the SSD an emulated drive of this read rate (MB/s)")
    ap.add_argument("--net-rate", type=float, default=0.0, help="--overlay: the NIC an emulated network of this rate (MB/s)")
    ap.add_argument("--net-latency", type=float, default=0.0, help="--overlay, with --net-rate: and this latency (us)")
    ap.add_argument("--stat", choices=["median", "low"], default="median")
    ap.add_argument("--json")
    ap.add_argument("--backend", choices=["cpu", "cuda"], default="cpu", help="--overlay/--merge: the store's cpu (default) or cuda runs")
    a = ap.parse_args()
    if a.merge:
        merge(a.merge, a.last, a.stat == "low", a.backend)
    elif a.overlay:
        if a.gpus < 1 or a.gpus > (os.cpu_count() or 1):
            ap.error(f"--gpus {a.gpus}: expected 1..{os.cpu_count()} (one CPU per stage)")
        if a.io_rate < 0:
            ap.error(f"--io-rate {a.io_rate:g}: expected a rate in MB/s > 0")
        if a.net_rate < 0 or a.net_latency < 0 or (a.net_latency > 0 and a.net_rate <= 0):
            ap.error(f"--net-rate {a.net_rate:g} --net-latency {a.net_latency:g}: expected a rate in MB/s > 0 and a latency in us >= 0")
        overlay(a.overlay, a.gpus, a.backend, a.io_rate, a.net_rate, a.net_latency)
    elif a.report:
        report(a.report, a.json or os.path.join(a.report, "validation.json"), a.stat)
    else:
        ap.error("--overlay DB or --report DIR")


if __name__ == "__main__":
    main()
