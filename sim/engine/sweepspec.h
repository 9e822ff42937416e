/* sweepspec.h — a grid of settings: a base (settings every point shares) and axes (a setting and
 * its list of values), read from a sweep spec's JSON text or from KEY=V1,V2,... lists, and
 * enumerated as points (each a JSON object of settings as strings).
 *
 * Spec text (JSON object; unknown keys refused):
 *   {"description": "...",                       optional
 *    "base": {"scenario": "hcache-sharegpt4-llama2-7b", "requests": 300, "policies": "recompute,kv-offload"},
 *    "axes": {"n_ssd": [1, 2, 4, 8], "nic": ["10GbE", "40GbE"], "seed": [1, 2, 3]}}
 * base and axes take every --set key (settings, platform parts, policy knobs), "scenario" and
 * "policies". The points are the cartesian product of the axes in file order, the last axis
 * varying fastest; a point's keys are the base's (in order) and then the axes' (in order).
 *
 * Responsible for: the structure (object, arrays, scalars; duplicates; limits: 64 axes, 10^6
 * points), turning JSON scalars into the text --set takes, asking the checker about every value
 * (naming origin and the place: "grid.json: axes.n_ssd[2]: ..."), enumeration.
 * Not responsible for: what a value means beyond the checker's answer, reading files (the caller
 * reads the spec; the default checker does no I/O: it accepts any scenario name, and a setting
 * naming a file is checked as a string only — kvsim sweep's checker loads scenarios), running.
 * Invariants: a spec that parsed gives the same points every time (pure function of the text and
 * the --set lists in order); every value of a point passed the checker.
 * Complexity: parsing O(text + values² per axis) (duplicate check); enumeration O(points × axes).
 * Layer: sim/engine (it needs the settings' parsers and the policy registry); library code, so
 * the fuzz harness tests/fuzz/fuzz_sweep.c links it.
 */
#ifndef KV_SWEEPSPEC_H
#define KV_SWEEPSPEC_H

#include <stddef.h>

#include "sim/base/util.h"

struct cJSON;

#define SWEEP_MAX_AXES 64
#define SWEEP_MAX_POINTS 1000000

/* Is key=value acceptable? where names the place for the message ("g.json: base.n_ssd"); 0 or -1
 * with e (prefixed by where). */
typedef int (*SweepCheckFn)(void *ctx, const char *key, const char *value, const char *where, KvErr *e);

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
    SweepCheckFn check; /* NULL: sweep_spec_check_default */
    void *check_ctx;
} SweepSpec;

void sweep_spec_init(SweepSpec *s);
void sweep_spec_free(SweepSpec *s);
/* Parse a spec file's text (origin names it in messages); every value goes through the checker. */
int sweep_spec_parse(SweepSpec *s, const char *text, const char *origin, KvErr *e);
/* KEY=V1,V2,... : a list becomes (or replaces) the axis KEY, one value becomes a base setting
 * (and removes an axis of that key). Values are checked. */
int sweep_spec_set(SweepSpec *s, const char *key_values, KvErr *e);
/* key=value as a base setting (replacing an earlier one, removing an axis of that key); unchecked. */
int sweep_spec_set_base(SweepSpec *s, const char *key, const char *value, KvErr *e);
/* The points in order (each an object of strings; caller frees with sweep_points_free). */
int sweep_points(const SweepSpec *s, struct cJSON ***points, int *n, KvErr *e);
void sweep_points_free(struct cJSON **points, int n);

/* A JSON string, number or boolean as the text --set takes (numbers in the shortest form that
 * reads back exactly); -1 for other JSON values. */
int sweep_spec_scalar_text(const struct cJSON *it, char *val, size_t n);
/* The checker without I/O: "policies" a comma-separated list of registered policy names (or
 * "all"; at most 16), "scenario" any non-empty name, every other key through sim_config_set on
 * the default settings. */
int sweep_spec_check_default(void *ctx, const char *key, const char *value, const char *where, KvErr *e);

#endif
