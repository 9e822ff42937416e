/* plot_csv.h — the result CSV files read back for figures (requests.csv, utilisation.csv,
 * timeline.csv, a sweep's tidy CSV): a header line, then rows of the same number of fields.
 *
 * Responsible for: reading a whole file into a table of strings (RFC 4180 quoting: fields in
 * double quotes may hold commas, quotes doubled), finding columns by header name, numbers out of
 * cells with the file, line and column named on error.
 * Not responsible for: what the columns mean (each figure), writing CSV (kv_csv_field).
 * Invariants: every row has ncols cells (a row of another width is an error naming its line).
 * Complexity: O(file size) to read; a column lookup O(columns).
 */
#ifndef KV_PLOT_CSV_H
#define KV_PLOT_CSV_H

#include "sim/base/util.h"

typedef struct PlotCsv {
    char path[1024];
    char *text;    /* the file, split in place */
    char **cells;  /* (nrows + 1) × ncols: row 0 is the header */
    int ncols, nrows;
} PlotCsv;

int pcsv_read(PlotCsv *t, const char *path, KvErr *e);
void pcsv_free(PlotCsv *t);
/* the column named name, or -1 */
int pcsv_col(const PlotCsv *t, const char *name);
/* the columns named, each required: -1 with "FILE: no column NAME (the header has ...)" */
int pcsv_cols(const PlotCsv *t, const char *const *names, int n, int *cols, KvErr *e);
/* row r (0-based, after the header), column c */
const char *pcsv_cell(const PlotCsv *t, int r, int c);
/* the cell as a number; an empty cell is NAN; text that is not a number: -1 naming file, line, column */
int pcsv_num(const PlotCsv *t, int r, int c, double *v, KvErr *e);

#endif
