"""kvsim — run the kvsim simulator from Python.

Responsible for: finding the kvsim binary, turning keyword settings into its command line, running
it in a scratch directory and reading back what it wrote (summary.json, requests.csv, table.md) as
plain Python objects, or pandas DataFrames on request; failures raise KvsimError carrying the
binary's own message; the warnings kvsim writes under its table (overload, truncation, drops,
fallbacks, "no request was measured", "nothing was restored") are raised as KvsimWarning and kept in
the result, and each policy's overload flag is returned beside its metrics.
Not responsible for: simulating anything (the binary does) or plotting.
Standard library only; results are pandas DataFrames when pandas is importable (as_frame=None, the
default; as_frame=False: lists of dicts always; True: pandas required).

    import kvsim
    r = kvsim.compare(policies=["recompute", "kv-offload"], model="Llama-3.1-8B", requests=200)
    r["policies"]["kv-offload"]["ttft_s"]["p99"]     # seconds
    r["requests"][0]["ttft_s"]

The binary is found through, in order: the binary= argument, $KVSIM_BIN (the binary itself or the
folder holding it), `kvsim` on $PATH, bin/kvsim of the repository this package sits in, bin/kvsim in
the current directory or one above it.
"""

import csv
import json
import os
import shutil
import subprocess
import tempfile
import warnings

__all__ = ["run", "compare", "sweep", "plan", "find_binary", "KvsimError", "KvsimWarning"]
__version__ = "0.1.0"

# requests.csv columns that are not numbers; every other column is an integer or, for *_s, a float
_TEXT_COLUMNS = {"policy", "restore_from", "session_id"}


class KvsimError(RuntimeError):
    """The kvsim binary failed (or could not be found). .stderr holds its message, .returncode its
    exit status, .cmd the command line."""

    def __init__(self, message, cmd=None, returncode=None, stderr=""):
        super().__init__(message)
        self.cmd = cmd
        self.returncode = returncode
        self.stderr = stderr


class KvsimWarning(UserWarning):
    """A warning or note kvsim wrote under its results table: the numbers are what the run gave, but
    something about the run (overload, truncation, drops, nothing restored, nothing measured) changes
    what they mean."""


def _table_warnings(table):
    """The lines of table.md that qualify the results: "warning: ..." and "note: nothing was restored"."""
    return [line.strip() for line in table.splitlines()
            if line.startswith("warning:") or line.startswith("note: nothing was restored")]


def _overloaded(summary):
    """policy -> overloaded: a bool for one run; for seeded runs the number of seeds overloaded."""
    per_seed = summary.get("replications", {}).get("per_seed")
    if per_seed:
        out = {}
        for seed in per_seed:
            for p in seed["policies"]:
                out[p["name"]] = out.get(p["name"], 0) + (1 if p.get("load", {}).get("overloaded") else 0)
        return out
    return {p["name"]: bool(p.get("load", {}).get("overloaded")) for p in summary["policies"]}


def _executable(path):
    return path if path and os.path.isfile(path) and os.access(path, os.X_OK) else None


def find_binary(binary=None):
    """The path of the kvsim binary to run; KvsimError naming every place tried when there is none."""
    tried = []
    if binary:
        b = binary if not os.path.isdir(binary) else os.path.join(binary, "kvsim")
        if _executable(b):
            return os.path.abspath(b)
        raise KvsimError("kvsim binary %r is not an executable file" % binary)
    env = os.environ.get("KVSIM_BIN")
    if env:
        b = os.path.join(env, "kvsim") if os.path.isdir(env) else env
        if _executable(b):
            return os.path.abspath(b)
        tried.append("$KVSIM_BIN=%s" % env)
    on_path = shutil.which("kvsim")
    if on_path:
        return on_path
    tried.append("kvsim on $PATH")
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.path.join(here, "..", "..", "bin", "kvsim"), os.path.join("bin", "kvsim"),
                  os.path.join("..", "bin", "kvsim")]
    for c in candidates:
        if _executable(c):
            return os.path.abspath(c)
        tried.append(os.path.abspath(c))
    raise KvsimError("kvsim binary not found (tried: %s); build it with `make` or set KVSIM_BIN" % ", ".join(tried))


def _setting(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def _typed(row):
    out = {}
    for k, v in row.items():
        if k in _TEXT_COLUMNS or v is None:
            out[k] = v
        elif k.endswith("_s"):
            out[k] = float(v)
        else:
            try:
                out[k] = int(v)
            except ValueError:
                out[k] = v
    return out


def _read_requests(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return [_typed(r) for r in csv.DictReader(f)]


def _pandas(as_frame):
    """The pandas module when results are to be DataFrames, else None: as_frame=None means "when pandas
    is importable", True insists on it (ImportError saying so), False never uses it."""
    if as_frame is False:
        return None
    try:
        import pandas
    except ImportError as exc:
        if as_frame is None:
            return None
        raise ImportError("as_frame=True needs pandas (pip install pandas); without it, call with as_frame=False "
                          "for lists of dicts") from exc
    return pandas


def _frames(pd, result):
    result["requests"] = pd.DataFrame(result["requests"])
    rows = []
    for p in result["summary"]["policies"]:
        flat = {}

        def walk(prefix, v):
            if isinstance(v, dict):
                for k2, v2 in v.items():
                    walk(prefix + "." + k2 if prefix else k2, v2)
            elif not isinstance(v, list):
                flat[prefix] = v

        walk("", p)
        rows.append(flat)
    result["metrics"] = pd.DataFrame(rows).set_index("name")
    result["metrics"]["overloaded"] = [result["overloaded"].get(n) for n in result["metrics"].index]
    for key in ("intervals", "differences", "ratios"):
        if key in result:
            result[key] = _interval_frame(pd, result[key])
    return result


def _intervals(summary):
    """The replications of a seeded run as {"intervals": policy -> metric -> {"mean", "ci95", "n",
    "per_seed"}, "differences" / "ratios": policy -> metric -> the same plus "significant"} (the last
    two only with a baseline); {} for a run of one seed."""
    rep = summary.get("replications")
    if not rep:
        return {}
    out = {"seeds": rep["seeds"], "level": rep["level"],
           "intervals": {m["policy"]: {k: v for k, v in m.items() if k != "policy"} for m in rep["metrics"]}}
    for key, name in (("paired_differences", "differences"), ("ratios_to_baseline", "ratios")):
        block = rep.get(key)
        if block:
            out["baseline"] = block["baseline"]
            out[name] = {m["policy"]: {k: v for k, v in m.items() if k != "policy"} for m in block["policies"]}
    return out


def _interval_frame(pd, by_policy):
    """policy × metric → a DataFrame with columns (metric, "mean"/"ci95"), index the policy."""
    rows = {}
    for policy, metrics in by_policy.items():
        row = {}
        for metric, v in metrics.items():
            if isinstance(v, dict):
                row[(metric, "mean")] = v.get("mean")
                row[(metric, "ci95")] = v.get("ci95")
        rows[policy] = row
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.columns = pd.MultiIndex.from_tuples(frame.columns)
    return frame


def _exec(command, args, timeout):
    """Run a kvsim command line; its stderr, or KvsimError with kvsim's message when it fails."""
    try:
        proc = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                              universal_newlines=True)
    except subprocess.TimeoutExpired as exc:
        raise KvsimError("kvsim %s ran longer than %s s" % (command, timeout), cmd=args) from exc
    if proc.returncode != 0:
        msg = _message(proc.stderr) or proc.stdout.strip() or "no message"
        raise KvsimError("kvsim %s failed (exit %d): %s" % (command, proc.returncode, msg), cmd=args,
                         returncode=proc.returncode, stderr=proc.stderr)
    return proc.stderr


def _message(stderr):
    """kvsim's own message out of its stderr: without the progress lines ("sweep: ...", "plan: ...")."""
    lines = [l for l in stderr.strip().splitlines() if not l.startswith(("sweep: ", "plan: "))]
    return "\n".join(lines).strip()


def _stderr_warnings(stderr):
    """The "warning: ..." lines kvsim wrote on stderr, once each, in order."""
    out = []
    for line in stderr.splitlines():
        i = line.find("warning: ")
        if i >= 0 and line[i:].strip() not in out:
            out.append(line[i:].strip())
    return out


def _number(text):
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def _run(command, policies, config, scenario, out, as_frame, binary, timeout, csv_rows, settings, seeds=None,
         seed_base=None, baseline=None):
    pd = _pandas(as_frame)
    exe = find_binary(binary)
    args = [exe, command]
    if seeds is not None:
        if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 2:
            raise KvsimError("seeds=%r: expected an integer number of seeds, 2 or more (kvsim's --seeds)" % (seeds,))
        args += ["--seeds", str(seeds)]
        if seed_base is not None:
            args += ["--seed-base", str(seed_base)]
        if baseline is not None:
            args += ["--baseline", baseline]
    elif seed_base is not None or baseline is not None:
        raise KvsimError("seed_base= and baseline= describe replications: give seeds=N (2 or more) too")
    if config:
        args += ["--config", os.fspath(config)]
    if scenario:
        args += ["--scenario", scenario]
    if command == "run":
        args += ["--policy", policies]
    elif policies is not None:
        args += ["--policies", _setting(policies)]
    for key in sorted(settings):
        if settings[key] is None:
            continue
        args += ["--set", "%s=%s" % (key, _setting(settings[key]))]
    if not csv_rows:
        args.append("--no-csv")
    args.append("--quiet")
    scratch = None
    if out is None:
        scratch = tempfile.TemporaryDirectory(prefix="kvsim-")
        out_dir = scratch.name
    else:
        out_dir = os.fspath(out)
    args += ["--out", out_dir]
    try:
        _exec(command, args, timeout)
        with open(os.path.join(out_dir, "summary.json")) as f:
            summary = json.load(f)
        with open(os.path.join(out_dir, "table.md")) as f:
            table = f.read()
        result = {
            "summary": summary,
            "policies": {p["name"]: p for p in summary["policies"]},
            "requests": _read_requests(os.path.join(out_dir, "requests.csv")),
            "table": table,
            "dir": None if scratch else out_dir,
            "command": args,
            "warnings": _table_warnings(table),
            "overloaded": _overloaded(summary),
        }
        result.update(_intervals(summary))
        for w in result["warnings"]:
            warnings.warn(w, KvsimWarning, stacklevel=3)
    finally:
        if scratch:
            scratch.cleanup()
    return _frames(pd, result) if pd else result


def run(policy="kv-offload", *, config=None, scenario=None, out=None, as_frame=None, binary=None, timeout=None,
        requests_csv=True, seeds=None, seed_base=None, **settings):
    """Simulate one policy. settings are kvsim settings (`kvsim run --help`): model="Llama-3.1-8B",
    platform="h200", trace="swebench", requests=500, tp=2, slo_ttft="200 ms", evict_each_turn=True, ...
    Values with units are strings ("30 s", "40 GB"); lists become comma-separated.

    Returns a dict: "summary" (summary.json as a dict), "policies" (name -> that policy's metrics),
    "requests" (requests.csv as a list of dicts with ints and floats; [] with requests_csv=False),
    "table" (table.md text), "dir" (out, or None when a temporary directory was used and removed),
    "command" (the command line run), "warnings" (the warning lines under kvsim's table, each also
    raised as a KvsimWarning), "overloaded" (policy -> bool; with seeds, the number of seeds in which
    it was overloaded). When pandas is importable (as_frame=None; True insists, False never) "requests"
    is a pandas DataFrame and "metrics" one with a row per policy (nested keys flattened: "ttft_s.p99"),
    "overloaded" among its columns.
    seeds=N replicates the run over N seeds, as compare() describes ("intervals").
    Raises KvsimError with kvsim's message when the run fails."""
    return _run("run", policy, config, scenario, out, as_frame, binary, timeout, requests_csv, settings,
                seeds=seeds, seed_base=seed_base)


def compare(policies=None, *, config=None, scenario=None, out=None, as_frame=None, binary=None,
            timeout=None, requests_csv=True, seeds=None, seed_base=None, baseline=None, **settings):
    """Simulate several policies on the same trace and seed (policies: a list, or "all"; None: the
    scenario's, else kvsim's default recompute,kv-offload); returns what run() returns, with every
    policy in "policies" (in the order given) and in "requests".

    seeds=N (2..100) replicates the comparison over N seeds (seed_base, seed_base+1, ...; every policy
    replays the same trace per seed), as kvsim's --seeds: the result then also holds "seeds", "level"
    (0.95) and "intervals" (policy -> metric -> {"mean", "ci95", "n", "per_seed"}); with
    baseline="POLICY" also "differences" (policy − baseline, seed by seed) and "ratios" (baseline ÷
    policy, times only), each metric with "significant" (the interval excludes 0, or 1). "overloaded"
    then counts the seeds in which each policy was overloaded. With pandas (as run() says) the three are
    DataFrames indexed by policy with (metric, "mean"/"ci95") columns."""
    return _run("compare", policies, config, scenario, out, as_frame, binary, timeout, requests_csv, settings,
                seeds=seeds, seed_base=seed_base, baseline=baseline)


def _scratch_or(out):
    """(directory, TemporaryDirectory or None): out itself (created when missing), or a temporary one."""
    if out is None:
        scratch = tempfile.TemporaryDirectory(prefix="kvsim-")
        return scratch.name, scratch
    os.makedirs(os.fspath(out), exist_ok=True)
    return os.fspath(out), None


def _sweep_rows(path):
    """sweep's tidy CSV (point, the settings, policy, metric, value) as one row per point and policy:
    "point", the settings ("true"/"false" as bools; a setting that shares a metric's name, such as
    requests, as "set.NAME"), "policy", every metric as a column (numbers; None where empty), and
    "overloaded" (bool, from load.overloaded)."""
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        records = [dict(zip(header, rec)) for rec in reader if rec] if header else []
    if not records:
        return []
    settings = header[1:header.index("policy")]
    metric_names = {d["metric"] for d in records}
    rows, index = [], {}
    for d in records:
        key = (d["point"], d["policy"])
        row = index.get(key)
        if row is None:
            row = {"point": int(d["point"])}
            for k in settings:
                v = d[k]
                v = {"true": True, "false": False}.get(v, v if k == "policies" else _number(v))
                row["set." + k if k in metric_names else k] = v
            row["policy"] = d["policy"]
            index[key] = row
            rows.append(row)
        row[d["metric"]] = _number(d["value"]) if d["value"] != "" else None
    for row in rows:
        flag = row.get("load.overloaded")
        row["overloaded"] = None if flag is None else bool(flag)
    return rows


def _sweep_failures(db):
    """point number -> kvsim's message for every failed point of the results database."""
    import sqlite3
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    try:
        return {pid: msg for pid, msg in con.execute("SELECT point_id, message FROM failure ORDER BY point_id")}
    finally:
        con.close()


def sweep(axes=None, *, spec=None, policies=None, scenario=None, out=None, jobs=None, retry_failed=False,
          as_frame=None, binary=None, timeout=None, **settings):
    """Run every point of a grid (kvsim sweep): axes maps a setting to its list of values
    ({"request_rate": [1, 2], "seed": [1, 2]}), settings are the base settings every point shares
    (as run() takes them; one value each), spec= a sweep JSON file, policies= those every point runs.

    Returns a dict: "rows" (one per point and policy, in the CSV's order: "point", the settings that
    vary or were given, "policy", every metric of kvsim sweep's CSV as a column — "ttft_s.p99",
    "slo_attainment", "load.overloaded", … — and "overloaded" (bool); a DataFrame when pandas is
    importable, as run() says), "db" and "csv" (the paths under out=, or None when a temporary
    directory was used), "dir", "command", "warnings" (kvsim's warning lines, and one saying how many
    rows are overloaded; each also raised as a KvsimWarning).
    With out=DIR the database is DIR/sweep.db: a second call with the same grid resumes it.
    Raises KvsimError with kvsim's message when the sweep cannot run, and with every failed point's
    message (as kvsim's database holds them) when any point failed."""
    pd = _pandas(as_frame)
    args = [find_binary(binary), "sweep"]
    if spec:
        args += ["--spec", os.fspath(spec)]
    if scenario:
        args += ["--scenario", scenario]
    if policies is not None:
        args += ["--policies", _setting(policies)]
    for key in sorted(settings):
        value = settings[key]
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            raise KvsimError("%s=%r: a base setting takes one value; give the values to vary as axes={%r: [...]}"
                             % (key, value, key))
        args += ["--set", "%s=%s" % (key, _setting(value))]
    for key, values in (axes or {}).items():
        if not isinstance(values, (list, tuple)) or not values:
            raise KvsimError("axes[%r]=%r: expected a non-empty list of values" % (key, values))
        args += ["--set", "%s=%s" % (key, _setting(list(values)))]
    if jobs is not None:
        args += ["--jobs", str(jobs)]
    if retry_failed:
        args.append("--retry-failed")
    out_dir, scratch = _scratch_or(out)
    db, csv_path = os.path.join(out_dir, "sweep.db"), os.path.join(out_dir, "sweep.csv")
    args += ["--db", db, "--csv", csv_path]
    try:
        try:
            stderr = _exec("sweep", args, timeout)
        except KvsimError as exc:
            failed = _sweep_failures(db) if os.path.exists(db) else {}
            if not failed:
                raise
            raise KvsimError("kvsim sweep: %d point(s) failed: %s" % (
                len(failed), "; ".join("point %d: %s" % kv for kv in failed.items())),
                cmd=args, returncode=exc.returncode, stderr=exc.stderr) from None
        rows = _sweep_rows(csv_path)
    finally:
        if scratch:
            scratch.cleanup()
    found = _stderr_warnings(stderr)
    over = [r for r in rows if r["overloaded"]]
    if over:
        found.append("warning: %d of %d results (point × policy) overloaded: their latencies grow with the run's "
                     "length, not a steady state (the \"overloaded\" column)" % (len(over), len(rows)))
    for w in found:
        warnings.warn(w, KvsimWarning, stacklevel=2)
    return {"rows": pd.DataFrame(rows) if pd else rows, "db": None if scratch else db,
            "csv": None if scratch else csv_path, "dir": None if scratch else out_dir, "command": args,
            "warnings": found}


def _plan_rows(plan):
    """plan.json's evaluated rows as one flat row per policy and load (or point): "policy", the
    load or "point", "verdict", "seeds", "overloaded_seeds", "overloaded" (overloaded in any seed),
    each target's "TARGET.mean" and "TARGET.ci95", "why" (and "cost" for a cheapest plan)."""
    out = []
    for policy, p in plan["policies"].items():
        rows = list(p.get("rows", []))
        for c in p.get("configurations", []):
            rows += c.get("rows", [])
        for r in rows:
            flat = {"policy": policy}
            for k, v in r.items():
                if k == "metrics":
                    for name, m in v.items():
                        flat[name + ".mean"] = m.get("mean")
                        flat[name + ".ci95"] = m.get("ci95")
                elif not isinstance(v, (dict, list)):
                    flat[k] = v
            if "overloaded_seeds" in flat:
                flat["overloaded"] = flat["overloaded_seeds"] > 0
            out.append(flat)
    return out


def plan(target, *, max_load=False, vary=None, cost=None, policies=None, config=None, scenario=None, seeds=None,
         max_seeds=None, seed_base=None, load_knob=None, load_start=None, precision=None, prune=True,
         monotone=None, out=None, jobs=None, as_frame=None, binary=None, timeout=None, **settings):
    """Capacity planning (kvsim plan), each policy answered on its own with replications deciding:
    the cheapest configuration of the space vary= ({"n_ssd": [1, 2, 4]}) priced by cost= (a prices
    JSON file) that meets target ("ttft_p99<=500ms,tbt_p99<=60ms"), or with max_load=True the highest
    load (load_knob: "session_rate" or "request_rate") that meets it without overload. settings are
    the base settings (as run() takes them); seeds, max_seeds, seed_base, load_start, precision,
    monotone (a list of axes; [] for none) and prune=False are kvsim plan's options of those names.

    Returns a dict: "plan" (plan.json as a dict, fields in docs/formats.md), "answers" (policy ->
    the highest sustainable load for max_load, else the cheapest point's number; None where nothing
    met the target), "rows" (every evaluated load or point, flat, as _plan_rows says, with
    "overloaded"; a DataFrame when pandas is importable), "report" (plan.md, the Markdown report),
    "dir", "command", "warnings" (kvsim's warning lines, each also raised as a KvsimWarning).
    Raises KvsimError with kvsim's message when the plan cannot run (a bad target, an unknown
    setting, a knob that cannot express the load)."""
    pd = _pandas(as_frame)
    exe = find_binary(binary)
    args = [exe, "plan", "--target", target]
    if config:
        args += ["--config", os.fspath(config)]
    if scenario:
        args += ["--scenario", scenario]
    for key in sorted(settings):
        if settings[key] is not None:
            args += ["--set", "%s=%s" % (key, _setting(settings[key]))]
    for key, values in (vary or {}).items():
        args += ["--vary", "%s=%s" % (key, _setting(list(values)))]
    if max_load:
        args.append("--max-load")
    options = (("--cost", cost), ("--policies", policies), ("--seeds", seeds), ("--max-seeds", max_seeds),
               ("--seed-base", seed_base), ("--load-knob", load_knob), ("--load-start", load_start),
               ("--precision", precision), ("--monotone", monotone), ("--jobs", jobs))
    for flag, value in options:
        if value is None:
            continue
        if flag == "--monotone" and not value:
            value = "none"
        args += [flag, os.fspath(value) if flag == "--cost" else _setting(value)]
    if not prune:
        args.append("--no-prune")
    out_dir, scratch = _scratch_or(out)
    args += ["--out", out_dir]
    try:
        stderr = _exec("plan", args, timeout)
        with open(os.path.join(out_dir, "plan.json")) as f:
            plan_json = json.load(f)
        with open(os.path.join(out_dir, "plan.md")) as f:
            report = f.read()
    finally:
        if scratch:
            scratch.cleanup()
    found = _stderr_warnings(stderr)
    for w in found:
        warnings.warn(w, KvsimWarning, stacklevel=2)
    key = "sustainable" if plan_json.get("kind") == "max_load" else "answer"
    answers = {}
    for name, p in plan_json["policies"].items():
        if "best" in p and key == "sustainable":
            best = p["best"]
            conf = next((c for c in p.get("configurations", []) if c.get("point") == best), None)
            answers[name] = {"point": best, "sustainable": conf.get("sustainable") if conf else None}
        else:
            answers[name] = p.get(key)
    rows = _plan_rows(plan_json)
    return {"plan": plan_json, "answers": answers, "rows": pd.DataFrame(rows) if pd else rows, "report": report,
            "dir": None if scratch else out_dir, "command": args, "warnings": found}
