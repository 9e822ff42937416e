/* map.h — `kvsim map`: which restoration policy is fastest where, over history length × one
 * resource (--vary) × load, with the margin to the runner-up, its interval over seeds, the
 * probability that the decision flips under the cost model's uncertainty, and the break-even
 * history lengths between the families of restoration (docs/reference.md "Decision maps").
 *
 * Responsible for: the isolated-request trace a map point runs (a canonical CSV: per restoring
 * request one session of two turns; turn 0 fills the history, turn 1 restores it after the think
 * time with its KV evicted), the mean TTFT of the restoring turns per policy, perturbing a world's
 * costs for the flip probability, the break-even bisection, the command (table, map.json, map.csv,
 * map.md, map.svg).
 * Not responsible for: what a run simulates (sim/engine), the settings' syntax (config.c).
 * Invariants: the same inputs and seed give the same bytes on stdout and in every file, for any
 * --jobs (each job's result depends only on its settings and draw).
 * Complexity: cells × (seeds + draws) × policies runs of `requests` sessions, plus per resource
 * value O(families² × log(history range)) single-request runs for the break-even lines.
 */
#ifndef KV_MAP_H
#define KV_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "sim/base/util.h"
#include "sim/engine/sim.h"

/* A cost perturbation: each factor multiplies the time of its class (1: nominal). compute: every
 * compute op of the cost model; link: host-link transfers (H2D/D2H, catalog rates and measured
 * curves); nic: the remote store's NIC; ssd: the SSD array. */
typedef struct MapPerturb {
    double compute, link, nic, ssd;
} MapPerturb;

/* Scale w's costs by p (after sim_world_open, before sim_run; the run reads them at setup). */
void map_perturb_world(SimWorld *w, const MapPerturb *p);

/* The canonical CSV of n isolated restoring requests with history H: session k's turn 0 (H − 1 new
 * tokens, 1 output) arrives at k × gap_s (gap_s <= 0: no timestamp, the sessions arrive by the
 * Poisson process of session_rate), its turn 1 (new input drawn uniformly in [new/2, 3·new/2] from
 * seed, or exactly `new` when seed is 0; 16 output tokens) follows the think time with history H.
 * Caller frees the text. */
char *map_trace_text(int64_t H, int n, int64_t new_tokens, uint64_t seed, double gap_s);

/* Run every policy of the comma-separated list on c (perturbed by p when not NULL) and put the mean
 * TTFT (s) of the restoring turns (turn >= 1) of each in ttft[i], in list order. 0, or -1 + e. */
int map_restoring_ttft(const SimConfig *c, const char *policies, const MapPerturb *p, double *ttft, KvErr *e);

/* The break-even search: f(ctx, H) is the TTFT difference of two families at history H (a − b).
 * Given lo < hi with f(lo) and f(hi) of opposite signs (fl, fh), bisect on the integers (in the
 * log of H) until hi − lo <= max(1, rel_tol × lo), and return in *at the H where the linear
 * interpolation of f between the last bracket's ends is 0 (rounded to the nearest token). 0, or -1
 * + e when f fails or the signs do not differ. */
typedef int (*MapDiffFn)(void *ctx, int64_t H, double *diff, KvErr *e);
int map_bisect(MapDiffFn f, void *ctx, int64_t lo, double fl, int64_t hi, double fh, double rel_tol, int64_t *at, int *evals,
               KvErr *e);

/* "512", "3.1K", "32K" (K = 1024 tokens), as the command prints history lengths */
void map_fmt_tokens(char *buf, size_t n, int64_t tokens);

/* the family of a policy for the break-even lines: 0 recompute, 1 kv-offload, 2 cake/cacheflow,
 * 3 hcache; -1 for the others */
int map_family(const char *policy);
const char *map_family_name(int f);
#define MAP_FAMILIES 4

int map_main(int argc, char **argv);

#endif
