/* metric.h — the metric table: every figure kvsim reports about one run (a SimResult), once. A row
 * names the metric, gives its unit, says how it is read from a SimResult and how people see it, and
 * which outputs carry it; every output that lists metrics walks this table instead of keeping its
 * own names and values.
 *
 * Responsible for: the metric rows (metric.c, k_metrics), the value of a metric in its unit, its
 * table cell, the measurements behind it, lookups by name / headline position / plan target name.
 * The outputs, each a filter of the table:
 *   METRIC_SUMMARY  summary.json's "policies" entries (results/report.c: its blocks, and at its
 *                   path any such metric they do not write; tests/test_metric.c checks the file),
 *   METRIC_TABLE    a column of table.md (in headline order, header and cell from the row),
 *   METRIC_REPL     a metric of the replications block and of compare --seeds' CI tables,
 *   METRIC_SWEEP    a column of kvsim sweep's CSV / database, a point metric (sim/cli/point.c),
 *   METRIC_CHECK    compared by kvsim check with the row's tolerance,
 *   and kvsim plan's --target names (the row's short name `target`, or any sweep metric).
 * Not responsible for: summary.json's other blocks, the per-request CSV (its own column table in
 * report.c), writing any file.
 * Invariants: names are unique and are summary.json's paths joined by '.' ("ttft_s.p99"; an array
 * element by its index or class name: "utilisation.gpu_stage0", "by_history_class.long.ttft_s.p99");
 * a metric without a value for a run (no sample) is NAN, never 0; values depend only on the result.
 * Complexity: a value costs its histogram statistic (O(buckets)); lookups are O(metrics); the rows are
 * expanded once per process.
 */
#ifndef KV_METRIC_H
#define KV_METRIC_H

#include <stddef.h>
#include <stdint.h>

#include "sim/engine/sim.h"

enum {
    METRIC_SUMMARY = 1 << 0,
    METRIC_TABLE = 1 << 1,
    METRIC_REPL = 1 << 2,
    METRIC_SWEEP = 1 << 3,
    METRIC_CHECK = 1 << 4,
};

/* how a metric is read from a SimResult (off: offsetof the field or Hist) */
typedef enum {
    MR_U64,       /* a uint64_t field */
    MR_I64,       /* an int64_t field */
    MR_INT_FLAG,  /* an int field, 1 when non-zero */
    MR_DOUBLE,    /* a double field */
    MR_HIST_MEAN, /* a Hist: its mean */
    MR_HIST_Q,    /* a Hist: its q-quantile */
    MR_HIST_MAX,  /* a Hist: its largest sample */
    MR_SHARE,     /* a uint64_t count ÷ the row's denominator (MD_*); NAN when that is 0 */
    MR_FN,        /* the row's function */
} MetricRead;

/* the denominator of a share */
typedef enum { MD_NONE, MD_REQUESTS, MD_WITH_HISTORY } MetricDenom;

/* how a value is shown in table.md, the CI tables and kvsim plan */
typedef enum {
    MS_PLAIN, /* as is (plan: no unit) */
    MS_COUNT, /* an integer */
    MS_MS,    /* a time in milliseconds, one decimal */
    MS_PCT,   /* a share in percent, one decimal */
    MS_BYTES, /* binary units ("512 KiB") */
    MS_RATIO, /* two decimals */
    MS_RATE1, /* a rate, one decimal */
    MS_RATE3, /* a rate, three decimals */
} MetricShow;

/* the measurements a metric rests on (kvsim plan: 0 = absent whatever number stands for it) */
typedef enum {
    MN_NONE,         /* not counted in requests (bytes, utilisation, simulated time): -1 */
    MN_HIST,         /* the histogram's sample count */
    MN_REQUESTS,     /* the requests measured */
    MN_WITH_HISTORY, /* the requests with a history */
    MN_RESTORED,     /* the restored tokens when a restoration took time, else 0 */
} MetricSamples;

typedef struct Metric {
    const char *name;    /* summary.json path joined by '.': the sweep's column, plan's and check's name */
    const char *unit;    /* "s", "share", "count", "bytes", "tokens/s", ... */
    MetricRead read;
    size_t off;          /* the field read (MR_U64 .. MR_SHARE) */
    double q;            /* MR_HIST_Q: the quantile */
    double div;          /* the raw value (ns, ‰, ...) over div is the value in unit; 0: as read */
    MetricDenom denom;   /* MR_SHARE */
    double (*fn)(const SimResult *r); /* MR_FN */
    unsigned outputs;    /* METRIC_* */
    int headline;        /* 1.. its position among table.md's and the CI tables' columns; 0 none */
    const char *key;     /* METRIC_REPL: the replications block's name ("ttft_mean_s") */
    const char *header;  /* METRIC_TABLE / METRIC_REPL: the column header with its unit */
    MetricShow show;
    MetricSamples samples;
    const char *target;  /* kvsim plan --target's short name, or NULL */
    double tol_rel, tol_abs; /* METRIC_CHECK: moved when |Δ| > tol_abs + tol_rel × |reference| */
    int higher_better;   /* 1: a larger value is better (attainment, throughput); 0: a smaller one */
    int each;            /* a row of the table's text that stands for one row per tier or channel (METRIC_EACH_*) */
} Metric;

/* Rows of the text that the table repeats, in place, once per tier or host channel (so that a tier
 * or a channel added to sim.h's rows has its metrics without a row here): the name is a format with
 * one %s, and off points at the first element of the field's array. */
enum {
    METRIC_EACH_NONE = 0,
    METRIC_EACH_TIER,       /* per tier (TIER_DRAM ..): %s its name, off a [SIM_TIERS] array */
    METRIC_EACH_HOST_BYTES, /* per host channel (not per stage), each direction with a key: %s the key, off ch_bytes */
    METRIC_EACH_HOST_UTIL,  /* per host channel: %s its name, off a [CH_COUNT][SIM_MAX_STAGES] array */
};

int metric_count(void);
const Metric *metric_at(int i);             /* table order; NULL past the end */
const Metric *metric_find(const char *name); /* by name, NULL when unknown */
/* the headline metric at position pos (1..) carried by any of outputs, NULL when none */
const Metric *metric_headline(int pos, unsigned outputs);
int metric_headline_count(void);            /* the largest headline position */
/* the metric with plan target name `target`, NULL when none */
const Metric *metric_by_target(const char *target);

/* m's value for r in its unit; NAN when it does not apply */
double metric_value(const Metric *m, const SimResult *r);
/* the measurements behind m's value for r (MetricSamples); -1 for MN_NONE */
int64_t metric_samples(const Metric *m, const SimResult *r);
/* m's table.md cell for r ("–" when absent) */
void metric_cell(char *b, size_t n, const Metric *m, const SimResult *r);

#endif
