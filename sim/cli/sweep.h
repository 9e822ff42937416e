/* sweep.h — `kvsim sweep`: a grid of settings (a spec file's base and axes, or --set lists) run
 * as independent points in parallel worker processes on this machine, or as MPI ranks
 * (bin/kvsim-mpi), into one SQLite results database; resumable; a tidy CSV export.
 *
 * Spec file (JSON object; unknown keys refused):
 *   {"description": "...",                       optional
 *    "base": {"scenario": "hcache-sharegpt4-llama2-7b", "requests": 300, "policies": "recompute,kv-offload"},
 *    "axes": {"n_ssd": [1, 2, 4, 8], "nic": ["10GbE", "40GbE"], "seed": [1, 2, 3]}}
 * base and axes take every --set key (settings, platform parts, policy knobs), "scenario" (applied
 * first) and "policies" (the policies every point runs; an axis of policy lists is allowed). The
 * points are the cartesian product of the axes in file order, the last axis varying fastest.
 *
 * Results database (one file, SQLite):
 *   point(id INTEGER PRIMARY KEY, params TEXT UNIQUE: the point's settings as a JSON object of
 *         strings, base keys then axis keys; status TEXT: pending | done | failed)
 *   metric(point_id, policy, name, value): point.h's metrics, one row per point × policy × name
 *   failure(point_id, message): why a failed point failed
 * marked PRAGMA application_id 0x4b565357 'KVSW', PRAGMA user_version 1 (docs/formats.md "Sweep
 * database"), set at creation. A file that is not one is refused before a byte is written, naming
 * what it is (a kvsim cost store, another application's database, not SQLite, a newer schema); a
 * database of the schema before the ids (id 0, exactly these tables) is read, and adopted (its ids
 * written) by a sweep that registers points.
 * A point is identified by its params: a second run of the same sweep skips the done (and failed,
 * unless --retry-failed) points and runs the rest; each point's rows and its status are written in
 * one transaction, so an interrupted sweep loses at most the points that were running.
 *
 * The executor (how points reach workers) is private to sweep.c behind SweepExec: a fork-based
 * pool of -j N processes, or MPI ranks where rank 0 deals points one at a time to the worker that
 * asks and merges every result into the database. A point whose worker process dies is recorded
 * as failed (local pool); a rank that dies ends an MPI run (the points done so far stay done).
 */
#ifndef KV_SWEEP_H
#define KV_SWEEP_H

#include "sim/base/util.h"
#include "sim/engine/sweepspec.h"

/* `kvsim sweep ARGS` (argv[0] is "sweep"); returns the exit status (0 every point done, 1 a point
 * failed or an error, 2 usage, 130 interrupted). */
int sweep_main(int argc, char **argv);
/* The tidy CSV export of the results database at db_path (what --csv writes), for kvsim plot. */
int sweep_export_csv(const char *db_path, const char *csv, KvErr *e);

/* sweep's checker of a spec's values (sim/engine/sweepspec.h SweepCheckFn): a setting by its parser,
 * a scenario by loading it, policies by name; ctx unused. */
int sweep_check_value(void *ctx, const char *key, const char *value, const char *where, KvErr *e);

#endif
