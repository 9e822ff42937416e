/* point.h — one experiment of a sweep or of `kvsim check`: its settings (a JSON object of
 * --set keys), the runs of its policies on one SimWorld, and the key metrics of each run as
 * (policy, name, value) rows; also the dry-run report of `kvsim run/compare --dry-run` and the
 * warning for a GPU without its own row in the spec cost model.
 *
 * Responsible for: settings objects → SimConfig (a "scenario" key first, then every other key in
 * order through sim_config_set; "policies" is the list of policies to run), running them
 * (sim_world_open, sim_run per policy, no per-request rows), a run's metrics as rows (the metric
 * table's sweep rows, results/metric.h), a line-oriented text form of a result that crosses a pipe
 * or an MPI message unchanged.
 * Not responsible for: enumerating points, storing results (sweep.c), reference comparison
 * (check.c), printing (except point_dry_run, which writes to the FILE it is given).
 * Invariants: metric values depend only on the settings (no wall time), so a point gives the same
 * rows in any process, in any order; names are those of summary.json's paths, joined by '.'
 * ("ttft_s.p99", "restore_from_share.dram"), in the metric table's order (point_metric_name).
 * Complexity: a point costs its simulations; the rest is O(metrics).
 */
#ifndef KV_POINT_H
#define KV_POINT_H

#include <stdio.h>

#include "sim/engine/sim.h"

struct cJSON;

typedef struct PointMetric {
    char policy[32];
    char name[64];
    double value;
} PointMetric;

typedef struct PointResult {
    PointMetric *m;
    int n, cap;
    char warning[512]; /* "" or a warning about the point (a GPU without its own spec row) */
    char error[1024];  /* "" or why the point failed (then n == 0) */
} PointResult;

void point_result_free(PointResult *r);

/* Apply a JSON object of settings to c (strings as they are, numbers with 17 digits, booleans as
 * true/false): a "scenario" key first (configs/scenarios/NAME.json, embedded or under
 * $KVSIM_CONFIG_DIR, or a path), then the others in order. "policies" is not a setting: it is
 * copied into policies (when given); "description" is skipped. Messages name origin and the key. */
int point_apply(SimConfig *c, const struct cJSON *obj, const char *origin, char *policies, size_t plen, KvErr *e);
/* The settings of a point from defaults: point_apply, then sim_config_check and the policy list
 * ("recompute,kv-offload" when none is given; "all" expands to every policy). */
int point_config(SimConfig *c, const struct cJSON *params, const char *origin, char *policies, size_t plen, KvErr *e);

/* Run every policy of the comma-separated list on c and fill r (a failed point: -1, r->error). */
int point_run(const SimConfig *c, const char *policies, PointResult *r, KvErr *e);
/* Append one run's metrics (policy res->policy) to r; -1 when out of memory. */
int point_add_metrics(PointResult *r, const SimResult *res, KvErr *e);
/* The metric names in their order; NULL past the end. */
const char *point_metric_name(int i);

/* r as text ("W\t...", "M\tpolicy\tname\tvalue", "E\t...", then "END") and back; the text of a
 * result parsed gives the same result (values with 17 significant digits). Caller frees the text. */
char *point_result_text(const PointResult *r, size_t *len);
int point_result_parse(PointResult *r, const char *text, size_t len, KvErr *e);

/* 1 and a warning in buf when the world uses the spec cost model and its GPU has no efficiency row
 * of its own (spec_gpu_row_for gives the default row); else 0. */
int point_spec_warning(const SimWorld *w, char *buf, size_t n);

/* The resolved configuration of an opened world for `--dry-run`: the parts, the model's weights per
 * GPU, the KV pool in tokens, whether the model fits; then every resolved setting. 1 when it fits. */
int point_dry_run(FILE *out, const SimWorld *w, const char *policies);

/* `kvsim list ssds|nics|links`: one line per entry of that section of hw. */
void point_list_parts(FILE *out, const HwCatalog *hw, const char *what);
/* the memory device whose catalog section is `what` (sim/base/memdev.h), -1 for another name */
int point_memdev_key(const char *what);

#endif
