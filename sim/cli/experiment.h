/* experiment.h — how kvsim run/compare execute once their options are parsed: every (seed,
 * policy) pair as a job of the process pool (sim/cli/procpool), the jobs' files merged in order
 * into one result set (summary.json, requests.csv, table.md, the figures), the table printed.
 *
 * Responsible for: the job of one (seed, policy) run (its world: the caller's for the caller's
 * seed, else one opened for that seed; its requests.csv rows and its SimResult record, see
 * results/resfile.h, in the job's file), merging the files in job order (seed-major, then the
 * policies in command-line order), and the replications (N seeds: summary.json "replications",
 * table.md mean ± CI, requests.csv with a seed column, figures of every seed's requests pooled);
 * the recordings of each job (utilisation.csv, timeline.csv, Chrome trace parts) written beside its
 * file and joined in job order like the rows, then the figures drawn from the joined files.
 * Not responsible for: parsing options or settings, validating policy names, opening the caller's
 * world (kvsim_main.c), the files' contents (results/).
 * Invariants: the result set is byte-identical for any worker count (jobs write only their own
 * files; the parent merges them in job order; nothing depends on time or scheduling); a single
 * seed writes exactly what kvsim wrote before replications existed; common random numbers: every
 * policy of a seed runs on the same configuration, so on the same trace and arrivals.
 * Complexity: seeds × policies runs in at most `jobs` processes; the parent holds every SimResult
 * (histogram buckets touched only where non-zero) and streams the CSV parts.
 */
#ifndef KV_EXPERIMENT_H
#define KV_EXPERIMENT_H

#include <stdint.h>

#include "sim/engine/sim.h"

#define EXP_MAX_POLICIES 16
#define EXP_MAX_SEEDS 100

typedef struct ExpSpec {
    const SimConfig *cfg;      /* checked; its seed is the seed of a single run */
    SimWorld *w;               /* opened on cfg */
    const char *trace_desc;
    const char (*names)[32];   /* the policies, validated */
    int np;
    const char *out;           /* the result directory */
    int n_seeds;               /* 0: one run at cfg->seed; >= 2: replications at seed_base, seed_base + 1, ... */
    uint64_t seed_base;
    int jobs;                  /* worker processes, >= 1 */
    int baseline;              /* replications: index of the baseline policy, or -1 */
    int no_csv, stats;
    /* recordings (results/plot*.h): utilisation windows (0: about 200–400 over the run), one
     * request's restoration timeline (timeline: on; timeline_request -1: the slowest), a Chrome trace
     * (trace_out: its path, NULL: none; at most trace_max_events events in all, shared by the runs) */
    int64_t util_window_ns;
    int timeline;
    int64_t timeline_request;
    const char *trace_out;
    uint64_t trace_max_events;
    /* compare: the verdict (results/verdict.h) on metric against the baseline (-1: the first
     * policy), printed before the compact table (full_table 0) or the full tables (1); the compact
     * table's percentiles. run (compare 0): the full table alone. */
    int compare, full_table;
    const struct Metric *metric;
    double pct[8];
    int n_pct;
} ExpSpec;

/* Run it, write the result set, print the table; the exit status (0, or 1 after a message). */
int experiment_run(const ExpSpec *x);

/* The replication and worker options of a command line, checked. */
typedef struct ExpOpts {
    int n_seeds;        /* 0: no --seeds */
    uint64_t seed_base; /* the first seed (also written into cfg->seed) */
    int jobs;           /* --jobs, or the online cores */
    int baseline;       /* index into the policies, or -1 */
    const struct Metric *metric; /* --metric (default ttft_s.p99) */
    int full_table;     /* --table full */
    double pct[8];      /* --percentiles (default 50,99) */
    int n_pct;
} ExpOpts;

struct OptArgs;
/* Is o ("--seeds") one of EXPERIMENT_OPTS / EXPERIMENT_COMPARE_OPTS? */
int experiment_opt_is(const char *o);
/* Read them from a parsed command line: --seeds 2..EXP_MAX_SEEDS, --seed-base and --baseline only
 * with --seeds, --baseline one of names, --jobs 1..1024. With --seeds the first seed is written into
 * cfg->seed (the world is opened on it). A usage error: -1 and e. */
int experiment_opts_read(const struct OptArgs *a, SimConfig *cfg, const char (*names)[32], int np, ExpOpts *xo, KvErr *e);
/* The options run/compare get for replications and workers (OptSpec initialisers). */
#define EXPERIMENT_OPTS                                                                                               \
    {"--seeds", "N", 0, "replications: N seeds (2..100), each policy on the same trace per seed; mean ± 95 % CI"},    \
        {"--seed-base", "S", 0, "replications: the first seed (default: the seed setting); seeds S..S+N-1"},       \
        {"--jobs", "N", 0, "-j N: at most N worker processes (default: the online cores); the output is the same for any N"}
#define EXPERIMENT_COMPARE_OPTS                                                                                       \
    {"--baseline", "POLICY", 0, "the verdict's reference point (default: the first policy); with --seeds each policy's paired difference to POLICY (mean ± CI; n.s. when it holds 0)"}, \
        {"--metric", "NAME", 0, "the verdict's headline metric (default ttft_s.p99; any metric name: ttft_s.mean, e2e_s.p99, tbt_s.p99, slo_attainment, ...)"}, \
        {"--table", "compact|full", 0, "after the verdict: the compact table (default) or every metric's tables (table.md)"}, \
        {"--percentiles", "LIST", 0, "the compact table's percentiles (default 50,99; e.g. 50,90,99,99.9): TTFT at each, E2E and TBT at the highest"}

#endif
