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
/* ns as seconds with nine decimals (exactly what "%.9f" prints for (double)ns / 1e9) written at p
 * (room for 32 bytes); returns the end. For requests.csv; exposed for tests. */
char *report_app_seconds9(char *p, int64_t ns);
/* a double with nine decimals, exactly what "%.9f" prints (room for 320 bytes) */
char *report_app_fixed9(char *p, double d);
void report_csv_abort(ReqCsv *c);

/* summary.json: {"kvsim": {...}, "inputs": {...}, "policies": [...]} */
int report_summary_json(const char *path, const SimWorld *w, const char *trace_desc, const SimResult *res, int n,
                        KvErr *e);
/* The comparison table, GitHub Markdown: unique column headers with their units, bytes in binary
 * units ("512 KiB"), "–" where a ratio does not apply (no request restored anything). */
void report_markdown(FILE *out, const SimWorld *w, const SimResult *res, int n);
/* bytes → "0 B", "512 B", "248 KiB", "1.5 MiB" (three significant digits, zero fractions dropped) */
void report_human_bytes(char *b, size_t n, double bytes);

#endif
