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
    int load_columns;   /* arrival_s is the load process's arrival, and session_wait_s follows */
} ReqCsv;

int report_csv_open(ReqCsv *c, const char *path, KvErr *e);
/* load_columns (report_csv_load_columns: every load mode but session): arrival_s is the arrival the
 * load process fixed (the same for every policy under arrivals=trace) and a last column
 * session_wait_s (release − arrival: the wait for the session's previous turn) follows; TTFT and
 * its split count from the release either way. */
int report_csv_open_load(ReqCsv *c, const char *path, int load_columns, KvErr *e);
int report_csv_load_columns(const SimConfig *cfg);
int report_csv_row(void *ctx, const SimRequestRow *row, KvErr *e); /* a SimRowFn; set c->policy first */
int report_csv_commit(ReqCsv *c, KvErr *e);
void report_csv_abort(ReqCsv *c);

/* summary.json: {"kvsim": {...}, "inputs": {...}, "policies": [...]} */
int report_summary_json(const char *path, const SimWorld *w, const char *trace_desc, const SimResult *res, int n,
                        KvErr *e);
/* The comparison table, GitHub Markdown: unique column headers with their units, bytes in binary
 * units ("512 KiB"), "–" where a ratio does not apply (no request restored anything). */
void report_markdown(FILE *out, const SimWorld *w, const SimResult *res, int n);
/* One line on a run that is overloaded (returns 2) or not in steady state (1): arrived vs done over
 * the load window, and the growth of the arrival-to-first-token time; 0 and "" otherwise. */
int report_load_warning(char *b, size_t n, const SimResult *r);
/* The table's footer: "warning: ..." per overloaded policy, "note: ..." per policy not in steady
 * state, the trimmed counts when trimming is on. */
void report_load_footer(FILE *out, const SimConfig *cfg, const SimResult *res, int n);
/* bytes → "0 B", "512 B", "248 KiB", "1.5 MiB" (three significant digits, zero fractions dropped) */
void report_human_bytes(char *b, size_t n, double bytes);

#endif
