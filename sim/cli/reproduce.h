/* reproduce.h — kvsim reproduce: published claims, committed as data (configs/claims/PAPER.json, one
 * file per paper), run and judged: paper vs kvsim vs verdict per claim, report.md + report.json.
 *
 * Responsible for: reading the claim files (embedded at build time, or --claims FILE|DIR), setting
 * up each claim's experiment (defaults, its scenario, its "set" overrides in the paper's load
 * mode), running the policies its metric needs, computing the metric (ratios and overheads of
 * per-policy statistics with a history filter, HCache's layer split, per-chunk recompute times from
 * the cost model), the verdict against the published value or band widened by the claim's own
 * tolerance (met / missed), or skipped with the reason (a setting this kvsim does not have:
 * "needs setting X"; not in --fast), and writing the report as a result set.
 * Not responsible for: the experiment machinery (sim_run, the cost model), choosing tolerances
 * (the claim files state them and why; a miss stays a miss).
 * Invariants: the report is deterministic (no times); claims run in file order (files sorted by
 * name); a claim file that does not parse, or a claim that cannot run for any reason other than
 * a missing setting, makes the exit status 1 after the report is written.
 * Complexity: one simulation per (claim, policy) needed; chunk claims are cost-model lookups.
 */
#ifndef KV_REPRODUCE_H
#define KV_REPRODUCE_H

/* kvsim reproduce [--claims PATH] [--fast] [--only TEXT] [--out DIR] [--quiet]; the exit status. */
int reproduce_main(int argc, char **argv);

#endif
