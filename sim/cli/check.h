/* check.h — `kvsim check`: the regression check. Re-runs a small canonical set of scenarios (each
 * with its own policies, a few hundred requests) and compares key metrics with the committed
 * reference results (results/reference/SCENARIO.json, written by `kvsim check --update`) within
 * stated tolerances; exit 1 with a table of what moved.
 *
 * Reference file: {"scenario": NAME, "requests": N, "policies": "a,b", "metrics": {policy: {name:
 * value}}, "replications": {"seeds": [s1, s2, ...], "per_seed": {policy: {name: [value per seed]}}}}
 * with the metrics of check.c's tolerance table only; "metrics" is the first seed's run (the
 * scenario's own seed) and must equal per_seed[..][0]; "replications" is absent when --update
 * --seeds 1 wrote it.
 *
 * CI-aware decision, per (scenario, policy, metric), over the seeds the reference recorded (the
 * check re-runs exactly those: common random numbers, so the comparison is paired):
 *   beyond  = |mean(now) − mean(reference)| > abs + rel × |mean(reference)|   (the tolerance)
 *   outside = the 95 % Student-t interval of the per-seed differences now − reference excludes 0
 *   a regression (moved) = beyond AND outside; beyond but inside the interval is reported and is
 *   not a regression. Exact metrics (tolerance 0: request counts) must match on every seed. With a
 *   one-seed reference there is no interval and the tolerance alone decides.
 */
#ifndef KV_CHECK_H
#define KV_CHECK_H

/* `kvsim check ARGS` (argv[0] is "check"): 0 all within tolerance, 1 a regression or an error,
 * 2 usage. */
int check_main(int argc, char **argv);

#endif
