/* store_io.h — the cost store's text formats (layer 5, on top of the store core sim/cost/store.h):
 * the deterministic SQL dump and its import, CSV and JSON export, CSV import. kvcal uses them;
 * kvsim never does.
 *
 * Responsible for: writing a store (or one run) as text and reading such text back into a store,
 * treating every input as untrusted (see store_io.c: a dump's statements are recognised one by
 * one, run under an authorizer, an instruction budget and a page cap).
 * Not responsible for: files (callers pass FILE* and text), printing, the store's own checks.
 * Invariants: an import adds all its runs or nothing; export → import of the output round-trips
 * (the same runs and points; a SQL dump of what a dump was loaded into is byte-identical).
 */
#ifndef KV_STORE_IO_H
#define KV_STORE_IO_H

#include <stdint.h>
#include <stdio.h>

#include "sim/cost/store.h"

/* Bounds on one import: text size, and the in-memory copy of a dump (pages of 4 KiB). */
#define STORE_IMPORT_MAX_BYTES (256 << 20)
#define STORE_IMPORT_MAX_PAGES 65536

/* Deterministic SQL text dump of the whole store (schema + INSERTs ordered by keys), suitable for
 * committing to the repository; import executes such a dump into a store, refusing one whose
 * user_version is newer, and remapping run ids so existing runs are kept. */
int store_dump_sql(CostStore *s, FILE *out, KvErr *e);
int store_import_sql(CostStore *s, const char *sql_text, const char *origin, KvErr *e);
/* The dump of one run (run_id 0: the whole store, same as store_dump_sql). */
int store_dump_sql_run(CostStore *s, int64_t run_id, FILE *out, KvErr *e);

/* Export (CSV header: run_id,backend,device,op,model,dtype,tp,p1,p2,p3,n,median_ns,p10_ns,p90_ns;
 * JSON: {"runs":[{...meta, "points":[...]}]}). run_id 0: all runs. */
int store_export_csv(CostStore *s, int64_t run_id, FILE *out, KvErr *e);
int store_export_json(CostStore *s, int64_t run_id, FILE *out, KvErr *e);
/* Import a CSV in the export format (one new run per distinct source run_id). */
int store_import_csv(CostStore *s, const char *csv_text, const char *origin, KvErr *e);

/* What an import did. A dump's run whose metadata equals a run already in the store (every
 * field but id) is skipped, so importing the same dump twice adds nothing. */
typedef struct StoreImportStats {
    int runs_added;
    int runs_skipped;
    int64_t points_added;
} StoreImportStats;
int store_import_sql_stats(CostStore *s, const char *sql_text, const char *origin, StoreImportStats *st,
                           KvErr *e);
int store_import_csv_stats(CostStore *s, const char *csv_text, const char *origin, StoreImportStats *st,
                           KvErr *e);

#endif
