/* report.h — result writers: summary.json (every metric of every policy plus every input),
 * requests.csv (one row per request, streamed as requests complete) and the Markdown comparison
 * table. Files are written to a temp name and renamed into place, so a failed or interrupted run
 * never leaves a half-written result over a good one. Output is a pure function of the results and
 * inputs (no wall-clock times), so the same inputs and seed give byte-identical files.
 */
#ifndef KV_REPORT_H
#define KV_REPORT_H

#include <stdio.h>

#include "sim/engine/sim.h"

typedef struct ReqCsv {
    KvAtomicFile af;
    const char *policy;
    uint64_t rows;
    int seed_col;  /* replications: every row starts with a seed column */
    uint64_t seed; /* its value */
    int load_columns;   /* arrival_s is the load process's arrival, and session_wait_s follows */
} ReqCsv;

struct Replications;

int report_csv_open(ReqCsv *c, const char *path, KvErr *e);
/* The header line ("policy,request,..."; with seed_col, "seed,policy,request,..."; with
 * load_columns, a last column session_wait_s). */
void report_csv_header(FILE *f, int seed_col, int load_columns);
/* load_columns (report_csv_load_columns: every load mode but session): arrival_s is the arrival the
 * load process fixed (the same for every policy under arrivals=trace) and a last column
 * session_wait_s (release − arrival: the wait for the session's previous turn) follows; TTFT and
 * its split count from the release either way. */
int report_csv_open_load(ReqCsv *c, const char *path, int load_columns, KvErr *e);
int report_csv_load_columns(const SimConfig *cfg);
int report_csv_row(void *ctx, const SimRequestRow *row, KvErr *e); /* a SimRowFn; set c->policy first */
int report_csv_commit(ReqCsv *c, KvErr *e);
/* ns as seconds with nine decimals (exactly what "%.9f" prints for (double)ns / 1e9) written at p
 * (room for 32 bytes); returns the end. For requests.csv; exposed for tests. */
char *report_app_seconds9(char *p, int64_t ns);
void report_csv_abort(ReqCsv *c);

/* The percentiles (in percent) that summary.json's time distributions (ttft_s, tbt_s, e2e_s, ...)
 * carry besides p50, p90 and p99, keyed "p95", "p99_9" (compare --percentiles; none by default). */
void report_set_percentiles(const double *pct, int n);
/* The oracle bound (sim_oracle) that summary.json's "oracle" object carries, the same for every
 * policy of the file; NULL or one not computed (NAN figures): no "oracle" key. Kept until the next call. */
void report_set_oracle(const SimOracle *o);
/* summary.json: {"kvsim": {...}, "inputs": {...}, "policies": [...], "oracle": {...}}. inputs.sha256 holds the
 * SHA-256 of the trace file, both catalogs (the file read, or the embedded bytes) and the cost
 * store (null for a generator / the spec model). */
int report_summary_json(const char *path, const SimWorld *w, const char *trace_desc, const SimResult *res, int n,
                        KvErr *e);
/* The same with a "replications" block when rep is not NULL (rep->res[0..n_policies-1], the first
 * seed, is what "policies" holds; "replications.per_seed" holds every seed's "policies": from
 * rep->per_seed_json when rep->runs is set, copied into the file as it is written, so that memory
 * stays O(policies)). */
int report_summary_json_repl(const char *path, const SimWorld *w, const char *trace_desc, const SimResult *res, int n,
                             const struct Replications *rep, KvErr *e);
/* Append run r's summary.json policy object to f as "replications.per_seed" holds it: a u64 length, then
 * the text cJSON prints for the object alone (report_summary_json_repl indents it to its place). For
 * replications reduced as the runs arrive (Replications.per_seed_json). */
int report_policy_json_spill(FILE *f, const SimConfig *cfg, const SimResult *r, KvErr *e);
/* inputs.sha256 alone (for tests and kvsim reproduce): a new object, NULL + e on failure. */
struct cJSON *report_input_hashes(const SimWorld *w, KvErr *e);
/* The comparison table, GitHub Markdown: the metric table's METRIC_TABLE rows in headline order
 * (results/metric.h), unique column headers with their units, bytes in binary units ("512 KiB"),
 * "–" where a value is absent. */
void report_markdown(FILE *out, const SimWorld *w, const SimResult *res, int n);
/* What report_markdown writes under its table: the load footer, extrapolated cost lookups, the
 * counts and warnings (report_footer). */
void report_markdown_footer(FILE *out, const SimWorld *w, const SimResult *res, int n);
/* a share of the requests above which report_warnings warns */
#define REPORT_WARN_SHARE 0.05
/* Under the table (report_markdown calls it): per policy with any, its counts of truncated and
 * dropped requests, sessions whose saved state was lost (state_ttl, tier capacity), restorations
 * that waited for a save in flight (mean wait) and that fell back to recompute; then the warnings. */
void report_footer(FILE *out, const SimWorld *w, const SimResult *res, int n);
/* One line "warning: ..." per condition over REPORT_WARN_SHARE of the requests: truncated (names
 * max_context), dropped (the KV pool: mem_util and the model), fell back to recompute (state_ttl,
 * tier capacity dram/n_ssd, saves in flight, or uncovered history). Returns the lines written. */
int report_warnings(FILE *out, const SimWorld *w, const SimResult *res, int n);
/* 1 when every request of r with a history found it resident in HBM, 2 when no request had a
 * history, 0 otherwise (something was loaded or recomputed, or no request was measured) */
int report_restored_nothing(const SimResult *r);
/* One "note: nothing was restored: ..." line saying why, when every one of the n results restored
 * nothing for the same reason; nothing otherwise. */
void report_restored_nothing_note(FILE *out, const SimResult *res, int n);
/* One line on a run that is overloaded (returns 2) or not in steady state (1): arrived vs done over
 * the load window, and the growth of the arrival-to-first-token time; 0 and "" otherwise. */
int report_load_warning(char *b, size_t n, const SimResult *r);
/* The table's footer: "warning: ..." per overloaded policy, "note: ..." per policy not in steady
 * state, the trimmed counts when trimming is on. */
void report_load_footer(FILE *out, const SimConfig *cfg, const SimResult *res, int n);
/* x per second of the load window (first arrival → last completion of the kept requests); NAN
 * (absent) when no request was measured */
double report_per_s(double x, const SimLoad *ld);
/* bytes → "0 B", "512 B", "248 KiB", "1.5 MiB" (three significant digits, zero fractions dropped) */
void report_human_bytes(char *b, size_t n, double bytes);

#endif
