/* resultset.h — a results directory committed as a set: whoever reads --out D sees the whole old
 * set of files or the whole new one, never a mix, and nothing half-written is left behind.
 *
 * Responsible for: a temporary directory beside D (D.tmp.<pid>) that the writers fill
 * (rs_path names each file in it), swapping it in for D (rs_commit: renameat2 RENAME_EXCHANGE,
 * or rename D aside to D.old.<pid>, rename the new set in, remove the old), removing it on
 * failure (rs_abort) or from a signal handler (rs_cleanup_on_signal, async-signal-safe), and
 * removing the temporaries of dead processes beside D on the next rs_begin (a D.old.<pid> whose D
 * is missing, left by a crash inside the fallback swap, is renamed back to D).
 * Not responsible for: what the files hold (report.c, plot.c) or installing signal handlers
 * (the CLI does; rs_cleanup_on_signal is what its handler calls).
 *
 * Invariants: D is replaced only if it is absent, empty, or holds nothing but kvsim result files
 * (summary.json, requests.csv, table.md, ttft_cdf.svg, ttft_ccdf.svg, kvsim reproduce's report.md and
 * report.json, kvsim plan's plan.md and plan.json, the figures' files of results/plot*.h: utilisation.csv/.svg, ttft_split.svg,
 * ttft_history.svg, timeline.csv/.svg, slo_vs_load.svg, metric_vs_load.svg, heatmap.svg, results/html.h's report.html, and *.tmp.<pid> leftovers of older builds or of worker jobs, sim/cli/procpool), so --out never wipes a directory of other files; between rs_begin and
 * rs_commit/rs_abort, every file of the set lies in D.tmp.<pid>; at most one set per process is
 * in progress (the one rs_cleanup_on_signal removes).
 *
 * Fault injection for tests: KVSIM_FAULT_AFTER_FILES=N makes rs_path fail for the (N+1)-th file
 * ("injected fault"), as a full disk would between two files.
 */
#ifndef KV_RESULTSET_H
#define KV_RESULTSET_H

#include <stddef.h>

#include "sim/base/util.h"

typedef struct ResultSet {
    char dir[4096];  /* D, the directory being replaced */
    char tmp[4200];  /* D.tmp.<pid>, the new set while it is written */
    int tmp_fd;      /* tmp opened O_DIRECTORY, for the signal-time cleanup; -1 when none */
    int files;       /* rs_path calls so far */
    int fault_after; /* KVSIM_FAULT_AFTER_FILES, -1 when unset */
    int active;      /* between rs_begin and rs_commit/rs_abort */
} ResultSet;

/* Prepare a new set for dir: create its parent if needed, remove stale temporaries of dead
 * processes beside it, refuse a dir that holds other files, create dir.tmp.<pid>. */
int rs_begin(ResultSet *rs, const char *dir, KvErr *e);
/* The path of file name in the new set (buf, cap bytes). Fails when out of room (or injected). */
int rs_path(ResultSet *rs, const char *name, char *buf, size_t cap, KvErr *e);
/* Swap the new set in for dir and remove the old one. On failure the old set stays in place. */
int rs_commit(ResultSet *rs, KvErr *e);
/* Remove the new set; dir is untouched. Safe to call twice or after rs_commit. */
void rs_abort(ResultSet *rs);
/* Remove the set in progress, if any, using only async-signal-safe calls. */
void rs_cleanup_on_signal(void);

#endif
