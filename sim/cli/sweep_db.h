/* sweep_db.h — kvsim sweep's results database: its identity (application_id and user_version;
 * a file that is not one is refused, never written), its schema, point registration, a finished
 * point's rows in one transaction, the counts by status and the CSV export (see sweep.h).
 * Used by sweep.c only (and by sweep_export_csv for kvsim plot).
 */
#ifndef KV_SWEEP_DB_H
#define KV_SWEEP_DB_H

#include <sqlite3.h>
#include <stdint.h>

#include "sim/base/util.h"
#include "sim/cli/point.h"

/* open (create: make it a sweep database when empty) path; a file that is not ours is refused */
int db_open(sqlite3 **db, const char *path, int create, KvErr *e);
/* register the n points' settings (JSON text) in enumeration order: ids[i] and status[i] (0 pending, 1 done, 2 failed) */
int db_register(sqlite3 *db, const char *path, char **params, int n, int64_t *ids, int *status, KvErr *e);
/* point id's result: its metric rows (or its failure), status done or failed, in one transaction */
int db_store(sqlite3 *db, const char *path, int64_t id, const PointResult *r, KvErr *e);
/* points by status: n[0] pending, n[1] done, n[2] failed */
int db_counts(sqlite3 *db, const char *path, int64_t n[3], KvErr *e);
/* the tidy CSV (written aside, then renamed) of the database's done points */
int db_export_csv(sqlite3 *db, const char *dbpath, const char *csv, KvErr *e);

#endif
