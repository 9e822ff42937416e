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

struct cJSON;

/* `kvsim sweep ARGS` (argv[0] is "sweep"); returns the exit status (0 every point done, 1 a point
 * failed or an error, 2 usage, 130 interrupted). */
int sweep_main(int argc, char **argv);
/* The tidy CSV export of the results database at db_path (what --csv writes), for kvsim plot. */
int sweep_export_csv(const char *db_path, const char *csv, KvErr *e);

/* The grid, for tests: a spec's base and axes. */
typedef struct SweepAxis {
    char key[64];
    char **values;
    int n;
} SweepAxis;

typedef struct SweepSpec {
    struct cJSON *base; /* object of string values */
    SweepAxis *axes;
    int n_axes;
    char origin[512];
} SweepSpec;

void sweep_spec_init(SweepSpec *s);
void sweep_spec_free(SweepSpec *s);
/* Parse a spec file's text (origin names it in messages: "grid.json: axes.n_ssd[2]: ..."); every
 * value is checked by the setting's own parser. */
int sweep_spec_parse(SweepSpec *s, const char *text, const char *origin, KvErr *e);
/* KEY=V1,V2,... : a list becomes (or replaces) the axis KEY, one value becomes a base setting
 * (and removes an axis of that key). */
int sweep_spec_set(SweepSpec *s, const char *key_values, KvErr *e);
/* The points in order (each an object of strings; caller frees with sweep_points_free). */
int sweep_points(const SweepSpec *s, struct cJSON ***points, int *n, KvErr *e);
void sweep_points_free(struct cJSON **points, int n);

#endif
