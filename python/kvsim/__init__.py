"""kvsim — run the kvsim simulator from Python.

Responsible for: finding the kvsim binary, turning keyword settings into its command line, running
it in a scratch directory and reading back what it wrote (summary.json, requests.csv, table.md) as
plain Python objects, or pandas DataFrames on request; failures raise KvsimError carrying the
binary's own message; the warnings kvsim writes under its table (overload, truncation, drops,
fallbacks, "no request was measured", "nothing was restored") are raised as KvsimWarning and kept in
the result, and each policy's overload flag is returned beside its metrics.
Not responsible for: simulating anything (the binary does) or plotting.
Standard library only; pandas is used only when as_frame=True.

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

__all__ = ["run", "compare", "find_binary", "KvsimError", "KvsimWarning"]
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


def _frames(result):
    try:
        import pandas as pd
    except ImportError as exc:
        raise ImportError("as_frame=True needs pandas (pip install pandas); without it, call with as_frame=False "
                          "for lists of dicts") from exc
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


def _run(command, policies, config, scenario, out, as_frame, binary, timeout, csv_rows, settings, seeds=None,
         seed_base=None, baseline=None):
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
        proc = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                              universal_newlines=True)
        if proc.returncode != 0:
            msg = proc.stderr.strip() or proc.stdout.strip() or "no message"
            raise KvsimError("kvsim %s failed (exit %d): %s" % (command, proc.returncode, msg), cmd=args,
                             returncode=proc.returncode, stderr=proc.stderr)
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
    except subprocess.TimeoutExpired as exc:
        raise KvsimError("kvsim %s ran longer than %s s" % (command, timeout), cmd=args) from exc
    finally:
        if scratch:
            scratch.cleanup()
    return _frames(result) if as_frame else result


def run(policy="kv-offload", *, config=None, scenario=None, out=None, as_frame=False, binary=None, timeout=None,
        requests_csv=True, seeds=None, seed_base=None, **settings):
    """Simulate one policy. settings are kvsim settings (`kvsim run --help`): model="Llama-3.1-8B",
    platform="h200", trace="swebench", requests=500, tp=2, slo_ttft="200 ms", evict_each_turn=True, ...
    Values with units are strings ("30 s", "40 GB"); lists become comma-separated.

    Returns a dict: "summary" (summary.json as a dict), "policies" (name -> that policy's metrics),
    "requests" (requests.csv as a list of dicts with ints and floats; [] with requests_csv=False),
    "table" (table.md text), "dir" (out, or None when a temporary directory was used and removed),
    "command" (the command line run), "warnings" (the warning lines under kvsim's table, each also
    raised as a KvsimWarning), "overloaded" (policy -> bool; with seeds, the number of seeds in which
    it was overloaded). With as_frame=True "requests" is a pandas DataFrame and
    "metrics" one with a row per policy (nested keys flattened: "ttft_s.p99").
    seeds=N replicates the run over N seeds, as compare() describes ("intervals").
    Raises KvsimError with kvsim's message when the run fails."""
    return _run("run", policy, config, scenario, out, as_frame, binary, timeout, requests_csv, settings,
                seeds=seeds, seed_base=seed_base)


def compare(policies=None, *, config=None, scenario=None, out=None, as_frame=False, binary=None,
            timeout=None, requests_csv=True, seeds=None, seed_base=None, baseline=None, **settings):
    """Simulate several policies on the same trace and seed (policies: a list, or "all"; None: the
    scenario's, else kvsim's default recompute,kv-offload); returns what run() returns, with every
    policy in "policies" (in the order given) and in "requests".

    seeds=N (2..100) replicates the comparison over N seeds (seed_base, seed_base+1, ...; every policy
    replays the same trace per seed), as kvsim's --seeds: the result then also holds "seeds", "level"
    (0.95) and "intervals" (policy -> metric -> {"mean", "ci95", "n", "per_seed"}); with
    baseline="POLICY" also "differences" (policy − baseline, seed by seed) and "ratios" (baseline ÷
    policy, times only), each metric with "significant" (the interval excludes 0, or 1). "overloaded"
    then counts the seeds in which each policy was overloaded. With as_frame=True the three are
    DataFrames indexed by policy with (metric, "mean"/"ci95") columns."""
    return _run("compare", policies, config, scenario, out, as_frame, binary, timeout, requests_csv, settings,
                seeds=seeds, seed_base=seed_base, baseline=baseline)
