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
} ReqCsv;

int report_csv_open(ReqCsv *c, const char *path, KvErr *e);
int report_csv_row(void *ctx, const SimRequestRow *row, KvErr *e); /* a SimRowFn; set c->policy first */
int report_csv_commit(ReqCsv *c, KvErr *e);
void report_csv_abort(ReqCsv *c);

/* summary.json: {"kvsim": {...}, "inputs": {...}, "policies": [...]} */
int report_summary_json(const char *path, const SimWorld *w, const char *trace_desc, const SimResult *res, int n,
                        KvErr *e);
/* The comparison table, GitHub Markdown: unique column headers with their units, bytes in binary
 * units ("512 KiB"), "–" where a ratio does not apply (no request restored anything). */
void report_markdown(FILE *out, const SimWorld *w, const SimResult *res, int n);
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
/* bytes → "0 B", "512 B", "248 KiB", "1.5 MiB" (three significant digits, zero fractions dropped) */
void report_human_bytes(char *b, size_t n, double bytes);

#endif
