/* store.h — the SQLite cost store (docs/formats.md "Cost store"): runs with their metadata and the
 * timed points of each op, the contract between kvcal (writer) and kvsim (reader, via cost.c).
 *
 * Schema (PRAGMA application_id = 0x4b56534d 'KVSM', PRAGMA user_version = STORE_SCHEMA_VERSION):
 *   run(id INTEGER PRIMARY KEY, backend TEXT, device TEXT, host TEXT, driver TEXT, cuda TEXT,
 *       git_rev TEXT, started_at TEXT, finished_at TEXT, model TEXT, dtype TEXT, tp INTEGER,
 *       quick INTEGER, notes TEXT, complete INTEGER)      -- complete = 1 only after end_run commit
 *   point(run_id, op, model, dtype, tp, p1, p2, p3, n, median_ns, p10_ns, p90_ns,
 *         UNIQUE(run_id, op, model, dtype, tp, p1, p2, p3))
 *   view newest_run(device, model, dtype, tp, op, run_id): per key the newest complete run,
 *         measured backends (cpu, cuda) ranked above spec.
 * IO ops (ops.h cost_op_is_io) are stored with model = '' and tp = 1 (store_add_point normalises
 * them); their dtype is kept as given but is not part of their key (pick_run and the view ignore it).
 * op is stored as its name (cost_op_name), so reordering the enum never reinterprets a file.
 *
 * Invariants: a run's points are written in one transaction (begin_run .. end_run); a crash or
 * an interrupted kvcal leaves either the whole run or nothing. Opening a file that is not a
 * kvsim store (other application_id, newer user_version, not SQLite at all, any schema object
 * that is not exactly ours: "FILE: not a kvsim cost store: run is a view, expected a table") is
 * refused with a message naming the file and what was found. Every run and point read back is
 * validated as add_point validates it (a store edited by hand is refused, naming the file, run,
 * op and field). No call runs unbounded: every connection has length/depth limits and an
 * instruction budget per call. Errors carry SQLite's message.
 *
 * This header is what kvsim needs (the core, sim/cost/store.c). The text formats (SQL dump and
 * import, CSV and JSON export, CSV import) are calibrate/store_io.h.
 */
#ifndef KV_STORE_H
#define KV_STORE_H

#include <stdint.h>
#include <stdio.h>

#include "sim/base/ops.h"
#include "sim/base/util.h"

#define STORE_SCHEMA_VERSION 1
#define STORE_APPLICATION_ID 0x4b56534d

typedef struct sqlite3 sqlite3;

typedef struct CostStore {
    sqlite3 *db;
    char path[4096];
    int readonly;                    /* opened with STORE_OPEN_READONLY: the write calls refuse */
    struct StoreGuard *guard;        /* the connection's instruction budget (store_int.h) */
    int in_run;
    int64_t run_id;                  /* the open run while in_run (added: add_point checks it) */
    struct sqlite3_stmt *ins_point;  /* cached INSERT for add_point, finalized by end_run/close */
} CostStore;

typedef struct StoreRunMeta {
    int64_t id;            /* filled by begin_run / list */
    char backend[16];      /* "cpu" | "cuda" | "spec" | "import" | "measured" (public profiles) */
    char device[128];      /* GPU catalog name for spec, reported device name otherwise */
    char host[128];
    char driver[64];
    char cuda[64];
    char git_rev[64];
    char started_at[32];   /* ISO 8601 UTC */
    char finished_at[32];
    char model[64];
    char dtype[8];
    int tp;
    int quick;
    int complete;
    char notes[512];
} StoreRunMeta;

typedef struct StorePoint {
    CostOp op;
    char model[64];
    char dtype[8];
    int tp;
    int64_t p1, p2, p3;
    int n;
    double median_ns, p10_ns, p90_ns;
} StorePoint;

/* Open modes. STORE_OPEN_EXISTING: read-write, the file must exist; STORE_OPEN_CREATE: also
 * create the file and schema if absent; STORE_OPEN_READONLY: SQLITE_OPEN_READONLY, for readers
 * (kvsim --costs, kvcal show/export/diff). Refuses foreign, altered or corrupt files. */
enum { STORE_OPEN_EXISTING = 0, STORE_OPEN_CREATE = 1, STORE_OPEN_READONLY = 2 };
int store_open(CostStore *s, const char *path, int mode, KvErr *e);
void store_close(CostStore *s);
/* A private read-write store in memory (nothing on disk), named `label` in its messages. */
int store_open_memory(CostStore *s, const char *label, KvErr *e);
/* A `--costs` value: a name the program registered an opener for (kvsim: "measured:NAME" and
 * "spec:NAME", the committed dumps of results/costmodels/, loaded into memory), else a store file
 * opened read-only. The opener returns 0 with *s open, -1 with e set, or 1 when `costs` is not one
 * of its names (then the file is opened). */
#define STORE_COMMITTED_DIR "results/costmodels/"
/* 1 when `costs` names a committed store ("measured:NAME" or "spec:NAME"), known or not */
int store_committed_kind(const char *costs);
/* The committed dump behind "measured:NAME" (results/costmodels/measured-NAME.sql, compiled into
 * the program; its path in `path`) and its length, or NULL when there is none. */
const char *store_committed_dump(const char *costs, char *path, size_t cap, size_t *len);
typedef int (*StoreNamedOpener)(const char *costs, CostStore *s, KvErr *e);
void store_set_named_opener(StoreNamedOpener fn);
int store_open_costs(CostStore *s, const char *costs, KvErr *e);

/* Writing a run: begin (BEGIN IMMEDIATE, insert run row, id returned), add points, end
 * (commit != 0: mark complete and COMMIT; 0: ROLLBACK). begin_run fills an empty started_at with
 * the current UTC time; end_run an empty finished_at. A point that add_point refuses (invalid, or
 * a duplicate key) is not stored and the run stays open. */
int store_begin_run(CostStore *s, StoreRunMeta *meta, KvErr *e);
int store_add_point(CostStore *s, int64_t run_id, const StorePoint *p, KvErr *e);
int store_end_run(CostStore *s, int64_t run_id, int commit, KvErr *e);

/* Runs, oldest first. Callback returns non-zero to stop. */
typedef int (*StoreRunFn)(void *ctx, const StoreRunMeta *r);
int store_list_runs(CostStore *s, StoreRunFn fn, void *ctx, KvErr *e);
int store_get_run(CostStore *s, int64_t run_id, StoreRunMeta *out, KvErr *e);

/* Points of one run, optionally one op (op < 0: all), ordered by op, model, dtype, tp, p1, p2, p3. */
typedef int (*StorePointFn)(void *ctx, const StorePoint *p);
int store_run_points(CostStore *s, int64_t run_id, int op, StorePointFn fn, void *ctx, KvErr *e);
/* Read (and so validate) the run's metadata and every point of it, whatever the op: 0 when all
 * are valid, else the first problem. A point whose op this build does not know is an error. */
int store_check_run(CostStore *s, int64_t run_id, KvErr *e);

/* Whole listings in memory, for callers that need them all; the caller frees .v.
 * store_runs_all: one run (run_id > 0) or all, oldest first. store_points_all: as store_run_points. */
typedef struct StoreRunList {
    StoreRunMeta *v;
    size_t n;
} StoreRunList;
typedef struct StorePointList {
    StorePoint *v;
    size_t n;
} StorePointList;
int store_runs_all(CostStore *s, int64_t run_id, StoreRunList *out, KvErr *e);
int store_points_all(CostStore *s, int64_t run_id, int op, StorePointList *out, KvErr *e);

/* The run to read for a key: newest complete run for (device, model, dtype, tp, op), measured
 * before spec. 0 and *run_id = 0 when none. Rank: cuda and cpu, then "import", then spec; within
 * a rank the latest started_at, then the highest id. For IO ops model, dtype and tp are ignored. */
int store_pick_run(CostStore *s, const char *device, const char *model, const char *dtype, int tp,
                   CostOp op, int64_t *run_id, KvErr *e);

/* Number of points of a run (op < 0: all ops). 0 for a run that does not exist. */
int store_count_points(CostStore *s, int64_t run_id, int op, int64_t *n, KvErr *e);

#endif
