/* html.h — report.html: one self-contained page of a result directory, to open in a browser.
 *
 * What it holds, each part where the directory has its file: the verdict (compare's verdict.md:
 * its verdict block, then its compact table; else html_verdict: the policy with the lowest TTFT p99
 * and how it compares, from summary.json), the warnings (overloaded
 * policies, table.md's warning/note lines), table.md / plan.md / report.md as HTML (their tables
 * sortable by a click on a column head), every *.svg figure (embedded as a data: image, so nothing
 * in a figure can run as script in the page), the inputs (summary.json's configuration, trace,
 * catalogs, cost model, code revision) and their SHA-256 hashes, and the list of the directory's
 * files. No network: the style and the sorting script are inline.
 *
 * Responsible for: reading those files, escaping every text taken from them for HTML, the page.
 * Not responsible for: writing the result files (report.c, experiment.c), atomic replacement of the
 * page (the caller names the path: a result set's, or kv_atomic_open's).
 * Invariants: deterministic (files in name order, numbers with fixed formats); a missing file
 * leaves its part out; an unreadable summary.json or table.md is an error naming the file.
 * Complexity: O(size of the directory's text files and figures).
 */
#ifndef KV_HTML_H
#define KV_HTML_H

#include <stddef.h>
#include <stdio.h>

#include "sim/base/util.h"

/* Write report.html of the result directory dir to f; name: the directory as the page calls it (a
 * result set is read from its temporary directory before it takes its name; NULL: dir). */
int html_report(FILE *f, const char *dir, const char *name, KvErr *e);
/* html_report into path, written aside and renamed into place. */
int html_report_file(const char *path, const char *dir, const char *name, KvErr *e);
/* The verdict in plain text (one or more sentences) from summary.json's text (NULL or unparsable:
 * "" and -1). The headline metric is TTFT p99. */
int html_verdict(const char *summary_json, char *buf, size_t cap);
/* s escaped for HTML text and attribute values */
void html_text(FILE *f, const char *s);

#endif
