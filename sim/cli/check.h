/* check.h — `kvsim check`: the regression check. Re-runs a small canonical set of scenarios (each
 * with its own policies, a few hundred requests) and compares key metrics with the committed
 * reference results (results/reference/SCENARIO.json, written by `kvsim check --update`) within
 * stated tolerances; exit 1 with a table of what moved.
 *
 * Reference file: {"scenario": NAME, "requests": N, "policies": "a,b", "metrics": {policy: {name:
 * value}}} with the metrics of check.c's tolerance table only.
 */
#ifndef KV_CHECK_H
#define KV_CHECK_H

/* `kvsim check ARGS` (argv[0] is "check"): 0 all within tolerance, 1 a regression or an error,
 * 2 usage. */
int check_main(int argc, char **argv);

#endif
