#!/usr/bin/env python3
"""validate_repredict.py — a finished make validate run predicted again from its own calibrations
with another estimator, without replaying anything (docs/validation.md, "Is it the estimator?").

  tools/validate_repredict.py SRC OUT [--within p10|median] [--across median|min] [--pool]
                              [--kvsim BIN]

SRC is a make validate directory (tools/validate.sh: cal.db with every calibration run, and per
case and pass its trace.csv, schedule.jsonl, execute.json, cal_run — the merged run whose costs
predicted it — and kvsim.args, the prediction's settings). For each case and pass, the calibrations that merged run combined (its notes name
them; --pool: every calibration of the run) are combined again, point by point, with the
estimator asked for — per calibration its p10 or median (--within, default p10, what validate.sh
uses), over the calibrations their median or least (--across, default median) — into a copy of
the store, the overlay is made again from it (validate_report.py's overlay_hw), kvsim predicts the
case with validate.sh's settings (kvsim.args), and OUT/cases/CASE/PASS/ gets the new schedule and an execute.json whose
measured values are SRC's and whose predicted ones are the new prediction's. A pass whose new plan
differs from the one replayed is not comparable and gets only an execute.txt that says so. Then
validate_report.py --report OUT --stat low runs on OUT: the same tables, summary and noise floor as
make validate prints, for the new estimator. With the defaults the predictions are SRC's own (a
check of the method: every predicted value equal).
Exit: 0 done, 1 a case that cannot be predicted again (named), 2 usage.
"""
import argparse
import glob
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import validate_report as vr  # noqa: E402


def fail(msg):
    print(f"validate_repredict: {msg}", file=sys.stderr)
    sys.exit(1)


def merged_sources(src, run_id, where):
    row = src.execute("select notes from run where id=?", (run_id,)).fetchone()
    if not row:
        fail(f"{where}: cal_run {run_id}: no such run in cal.db")
    m = re.match(r"validate: median of (?:the p10 of )?runs ([0-9,]+);", row[0])
    if not m:
        fail(f"{where}: cal_run {run_id}: not a merged run (its notes: '{row[0][:60]}...')")
    return [int(x) for x in m.group(1).split(",")]


def pass_dirs(case_dir):
    return sorted(glob.glob(os.path.join(case_dir, "pass*")), key=lambda p: int(os.path.basename(p)[4:] or 0)) or [case_dir]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--within", choices=["p10", "median"], default="p10")
    ap.add_argument("--across", choices=["median", "min"], default="median")
    ap.add_argument("--pool", action="store_true", help="every calibration of the run, not those that predicted the case")
    ap.add_argument("--kvsim", default=os.path.join(os.environ.get("KVSIM_BIN", "bin"), "kvsim"))
    a = ap.parse_args()
    cal = os.path.join(a.src, "cal.db")
    if not os.path.isfile(cal):
        ap.error(f"{a.src}: no cal.db (expected a make validate directory)")
    cases = sorted(glob.glob(os.path.join(a.src, "cases", "*")))
    if not cases:
        ap.error(f"{a.src}: no cases/ (expected a make validate directory)")
    if os.path.exists(a.out):
        shutil.rmtree(a.out)
    os.makedirs(os.path.join(a.out, "cases"))
    src = sqlite3.connect(cal)
    pool = [r[0] for r in src.execute("select id from run where complete=1 and notes not like 'validate:%' order by id")]
    tmp = tempfile.mkdtemp(prefix="repredict-")
    same = changed = 0
    try:
        for cd in cases:
            for pd in pass_dirs(cd):
                rel = os.path.relpath(pd, a.src)
                od = os.path.join(a.out, rel)
                os.makedirs(od, exist_ok=True)
                ex = os.path.join(pd, "execute.json")
                if not os.path.exists(ex):  # not replayed in SRC: nothing to compare
                    txt = os.path.join(pd, "execute.txt")
                    if os.path.exists(txt):
                        shutil.copy(txt, od)
                    continue
                crf = os.path.join(pd, "cal_run")
                if not os.path.exists(crf):
                    fail(f"{rel}: no cal_run (a make validate run older than this tool cannot say which calibrations predicted it)")
                run_id = int(open(crf).read().split()[0])
                runs = pool if a.pool else merged_sources(src, run_id, rel)
                db = os.path.join(tmp, "c.db")
                shutil.copy(cal, db)
                c = sqlite3.connect(db)
                backend = c.execute("select backend from run where id=?", (run_id,)).fetchone()[0]
                vr.add_merged_run(src, c, runs, f"validate: repredicted ({a.within} within, {a.across} across) of runs "
                                  f"{','.join(map(str, runs))}; ", a.within, a.across)
                c.commit()
                c.close()
                argf = os.path.join(pd, "kvsim.args")
                if not os.path.exists(argf):
                    fail(f"{rel}: no kvsim.args (a make validate run older than this tool does not keep its prediction's settings)")
                j = json.load(open(ex))
                hw = os.path.join(tmp, "hw.json")
                ov = vr.overlay_hw(db, j.get("stages", 1), backend)
                rate_f = os.path.join(pd, "io_rate")  # a race's emulated drive (validate.sh RACE_CASES)
                if os.path.exists(rate_f):
                    vr.emulate_ssd(ov, float(open(rate_f).read()))
                net_f = os.path.join(pd, "net_rate")  # a remote case's emulated network (validate.sh REMOTE_POLS)
                if os.path.exists(net_f):
                    nr, nl = (float(v) for v in open(net_f).read().split())
                    vr.emulate_nic(ov, nr, nl)
                json.dump(ov, open(hw, "w"))
                sch = os.path.join(od, "schedule.jsonl")
                # validate.sh's own settings, with the new store and overlay
                cmd = [a.kvsim, "run"] + open(argf).read().splitlines() + [
                    "--hardware", hw, "--trace", os.path.join(pd, "trace.csv"), "--costs", db, "--out", os.path.join(tmp, "sim"),
                    "--emit-schedule", sch, "--quiet", "--no-csv"]
                p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                if p.returncode != 0:
                    fail(f"{rel}: kvsim run failed: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}")
                if vr.plan_of(sch) != vr.plan_of(os.path.join(pd, "schedule.jsonl")):
                    changed += 1
                    with open(os.path.join(od, "execute.txt"), "w") as f:
                        f.write("not comparable: the new prediction plans otherwise than the schedule replayed\n")
                    os.remove(sch)
                    continue
                recs = [json.loads(line) for line in open(sch)]
                done = {r["req"]: r for r in recs if r["rec"] == "done"}
                iters = {r["iter"]: r["end_ns"] - r["start_ns"] for r in recs if r["rec"] == "iter"}
                for r in j["requests"]:
                    d = done.get(r["req"])
                    for key in ("ttft_ns", "restore_ns"):
                        if d is not None and key in r:
                            m = r[key]["measured"]
                            r[key] = {"measured": m, "predicted": d[key], "error": round(vr.err(m, d[key]), 6)}
                for it in j["iterations"]:
                    if it["iter"] in iters:
                        m = it["duration_ns"]["measured"]
                        it["duration_ns"] = {"measured": m, "predicted": iters[it["iter"]], "error": round(vr.err(m, iters[it["iter"]]), 6)}
                json.dump(j, open(os.path.join(od, "execute.json"), "w"), indent=1)
                same += 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"validate_repredict: {a.src}: {same} passes predicted again ({a.within} within each calibration, {a.across} across "
          f"{'all ' + str(len(pool)) + ' calibrations' if a.pool else 'the calibrations that predicted each'}), "
          f"{changed} not comparable (another plan)")
    sys.stdout.flush()
    vr.report(a.out, os.path.join(a.out, "validation.json"), "low")


if __name__ == "__main__":
    main()
