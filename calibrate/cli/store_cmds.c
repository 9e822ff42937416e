/* store_cmds.c — kvcal show / export / import; see store_cmds.h.
 *
 * Responsible for: the command-line face of the cost store: parsing options, printing tables,
 * writing exports (to a file atomically, else stdout) and running imports. This is CLI code, so
 * it prints: results to stdout, errors to stderr as "kvcal CMD: message".
 * Not responsible for: anything the store does (store.c, store_io.c); this file only calls their API.
 * Invariants: show and export open the store read-only; an export either replaces the --out file
 * completely or leaves it untouched, and is refused when --out is the store itself; an import
 * that fails leaves the store as it was (and removes a store file it had just created).
 */
#include "calibrate/cli/store_cmds.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "calibrate/cli/kvcal_cli.h"
#include "calibrate/store_io.h"
#include "sim/base/opt.h"
#include "sim/base/util.h"
#include "sim/cost/store.h"

enum { CLI_OK = KVCAL_OK, CLI_FAIL = KVCAL_FAIL, CLI_USAGE = KVCAL_USAGE };

static int usage_error(const OptCmd *c, const char *fmt, const char *arg) __attribute__((format(printf, 2, 0)));
static int usage_error(const OptCmd *c, const char *fmt, const char *arg)
{
    char msg[1024];
    snprintf(msg, sizeof msg, fmt, arg);
    return kvcal_cli_usage(c, "%s", msg);
}

/* --run ID: a positive integer. */
static int parse_run_id(const OptCmd *c, const char *s, int64_t *id)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || v < 1) return usage_error(c, "--run: '%s' is not a run id (a positive integer)", s);
    *id = v;
    return CLI_OK;
}

static int parse_op(const OptCmd *c, const char *s, int *op)
{
    *op = cost_op_parse(s);
    if (*op >= 0) return CLI_OK;
    fprintf(stderr, "%s: --op: unknown op '%s'; known ops:", c->prog, s);
    for (int k = 0; k < OP_COUNT; k++) fprintf(stderr, " %s", cost_op_name((CostOp)k));
    fputc('\n', stderr);
    return CLI_USAGE;
}

static int fail(const OptCmd *c, const KvErr *e) { return kvcal_cli_fail(c, e); }

/* ---------------------------------------------------------------------------------------------
 * show
 * ------------------------------------------------------------------------------------------- */

static int width(int cur, const char *s)
{
    int n = (int)strlen(s);
    return n > cur ? n : cur;
}

static int show_runs(const OptCmd *c, CostStore *s, int op, KvErr *e)
{
    StoreRunList l;
    if (store_runs_all(s, 0, &l, e) != 0) return fail(c, e);
    int64_t *np = calloc(l.n ? l.n : 1, sizeof *np);
    if (!np) {
        free(l.v);
        kv_err(e, "out of memory");
        return fail(c, e);
    }
    int wb = 7, wd = 6, wm = 5, wt = 5, ws = 10;
    size_t shown = 0;
    for (size_t i = 0; i < l.n; i++) {
        if (store_count_points(s, l.v[i].id, op, &np[i], e) != 0) {
            free(np);
            free(l.v);
            return fail(c, e);
        }
        if (op >= 0 && np[i] == 0) continue;
        shown++;
        wb = width(wb, l.v[i].backend);
        wd = width(wd, l.v[i].device);
        wm = width(wm, l.v[i].model[0] ? l.v[i].model : "-");
        wt = width(wt, l.v[i].dtype[0] ? l.v[i].dtype : "-");
        ws = width(ws, l.v[i].started_at[0] ? l.v[i].started_at : "-");
    }
    if (shown == 0) {
        printf("%s: no runs%s%s\n", s->path, op >= 0 ? " with op " : "", op >= 0 ? cost_op_name((CostOp)op) : "");
    } else {
        printf("%5s  %-*s  %-*s  %-*s  %-*s  %3s  %8s  %-*s  %s\n", "id", wb, "backend", wd, "device", wm, "model", wt,
               "dtype", "tp", op >= 0 ? "op pts" : "points", ws, "started_at", "complete");
        for (size_t i = 0; i < l.n; i++) {
            const StoreRunMeta *r = &l.v[i];
            if (op >= 0 && np[i] == 0) continue;
            printf("%5lld  %-*s  %-*s  %-*s  %-*s  %3d  %8lld  %-*s  %s\n", (long long)r->id, wb, r->backend, wd,
                   r->device, wm, r->model[0] ? r->model : "-", wt, r->dtype[0] ? r->dtype : "-", r->tp,
                   (long long)np[i], ws, r->started_at[0] ? r->started_at : "-", r->complete ? "yes" : "no");
        }
    }
    free(np);
    free(l.v);
    return CLI_OK;
}

/* Names of an op's shape parameters, for column headers. */
static void param_names(CostOp op, const char *names[3])
{
    names[0] = names[1] = names[2] = NULL;
    int np = cost_op_nparams(op);
    if (cost_op_is_io(op)) {
        names[0] = "bytes";
        if (np >= 2) names[1] = "qdepth";
        if (np >= 3) names[2] = "n_ssd";
    } else if (op == OP_ATTN_DECODE) {
        names[0] = "batch";
        names[1] = "context";
    } else {
        names[0] = np >= 2 ? "new_tok" : "tokens";
        if (np >= 2) names[1] = "context";
        if (np >= 3) names[2] = "p3";
    }
}

/* Columns are right-aligned and always separated by at least one space, however wide a value. */
static void show_point_group(const StorePoint *pts, size_t n)
{
    CostOp op = pts[0].op;
    const char *names[3];
    param_names(op, names);
    /* derived throughput: bytes per ns is GB/s (decimal); tokens per ns * 1e6 is ktok/s */
    int io = cost_op_is_io(op), tok = !io && op != OP_ATTN_DECODE;
    if (io)
        printf("\n%s (%zu point%s)\n", cost_op_name(op), n, n == 1 ? "" : "s");
    else
        printf("\n%s: model %s, %s, tp %d (%zu point%s)\n", cost_op_name(op), pts[0].model, pts[0].dtype, pts[0].tp, n,
               n == 1 ? "" : "s");
    for (int k = 0; k < 3; k++)
        if (names[k]) printf(" %13s", names[k]);
    printf(" %6s %12s %12s %12s", "n", "median_us", "p10_us", "p90_us");
    if (io) printf(" %9s", "GB/s");
    if (tok) printf(" %9s", "ktok/s");
    putchar('\n');
    for (size_t i = 0; i < n; i++) {
        const StorePoint *p = &pts[i];
        const int64_t par[3] = {p->p1, p->p2, p->p3};
        for (int k = 0; k < 3; k++)
            if (names[k]) printf(" %13lld", (long long)par[k]);
        printf(" %6d %12.3f %12.3f %12.3f", p->n, p->median_ns / 1e3, p->p10_ns / 1e3, p->p90_ns / 1e3);
        if (io || tok) {
            if (p->median_ns > 0)
                printf(" %9.*f", io ? 2 : 1, io ? (double)p->p1 / p->median_ns : (double)p->p1 / p->median_ns * 1e6);
            else
                printf(" %9s", "-");
        }
        putchar('\n');
    }
}

static int same_group(const StorePoint *a, const StorePoint *b)
{
    return a->op == b->op && strcmp(a->model, b->model) == 0 && strcmp(a->dtype, b->dtype) == 0 && a->tp == b->tp;
}

static int show_run(const OptCmd *c, CostStore *s, int64_t run_id, int op, KvErr *e)
{
    StoreRunMeta r;
    if (store_get_run(s, run_id, &r, e) != 0) return fail(c, e);
    StorePointList pts;
    if (store_points_all(s, run_id, op, &pts, e) != 0) return fail(c, e);
    const char *dash = "-";
    printf("run %lld of %s\n", (long long)r.id, s->path);
    printf("  backend      %s\n", r.backend);
    printf("  device       %s\n", r.device);
    printf("  host         %s\n", r.host[0] ? r.host : dash);
    printf("  driver       %s\n", r.driver[0] ? r.driver : dash);
    printf("  cuda         %s\n", r.cuda[0] ? r.cuda : dash);
    printf("  git_rev      %s\n", r.git_rev[0] ? r.git_rev : dash);
    printf("  started_at   %s\n", r.started_at[0] ? r.started_at : dash);
    printf("  finished_at  %s\n", r.finished_at[0] ? r.finished_at : dash);
    printf("  model        %s\n", r.model[0] ? r.model : dash);
    printf("  dtype        %s\n", r.dtype[0] ? r.dtype : dash);
    printf("  tp           %d\n", r.tp);
    printf("  quick        %s\n", r.quick ? "yes" : "no");
    printf("  complete     %s\n", r.complete ? "yes" : "no");
    printf("  notes        %s\n", r.notes[0] ? r.notes : dash);
    printf("  points       %zu%s%s\n", pts.n, op >= 0 ? " of op " : "", op >= 0 ? cost_op_name((CostOp)op) : "");
    for (size_t i = 0; i < pts.n;) {
        size_t j = i + 1;
        while (j < pts.n && same_group(&pts.v[i], &pts.v[j])) j++;
        show_point_group(pts.v + i, j - i);
        i = j;
    }
    free(pts.v);
    return CLI_OK;
}

static const OptSpec k_show_opts[] = {
    {"--db", "FILE", OPT_REQUIRED, "the cost store (SQLite)"},
    {"--run", "ID", 0, "show this run in detail"},
    {"--op", "OP", 0, "only this op (gemm_qkv, attn_prefill, h2d, ssd_read, ...)"},
};
static const OptCmd k_show = {
    "kvcal show",
    "Without --run: the store's runs (id, backend, device, model, dtype, tp, number of points,\n"
    "started_at, complete). With --run: the run's metadata and, per op, its points: shape\n"
    "parameters, repetitions n, median/p10/p90 in microseconds, and the derived throughput\n"
    "(GB/s for IO ops, thousands of tokens per second for token-shaped compute ops).\n",
    k_show_opts, (int)KV_ARRAY_LEN(k_show_opts), NULL, 0, 0};

int kvcal_cmd_show(int argc, char **argv)
{
    const OptCmd *c = &k_show;
    OptArgs a;
    int rc = kvcal_cli_begin(c, argc, argv, &a);
    if (rc >= 0) return rc;
    int64_t run_id = 0;
    int op = -1;
    if (opt_get(&a, "--run") && (rc = parse_run_id(c, opt_get(&a, "--run"), &run_id)) != CLI_OK) return rc;
    if (opt_get(&a, "--op") && (rc = parse_op(c, opt_get(&a, "--op"), &op)) != CLI_OK) return rc;
    KvErr e = {{0}};
    CostStore s;
    if (store_open(&s, opt_get(&a, "--db"), STORE_OPEN_READONLY, &e) != 0) return fail(c, &e);
    rc = run_id ? show_run(c, &s, run_id, op, &e) : show_runs(c, &s, op, &e);
    store_close(&s);
    if (rc == CLI_OK) rc = kvcal_cli_flush(c);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * export
 * ------------------------------------------------------------------------------------------- */

static const OptSpec k_export_opts[] = {
    {"--db", "FILE", OPT_REQUIRED, "the cost store (SQLite)"},
    {"--format", "csv|json|sql", OPT_REQUIRED, "the output format"},
    {"--run", "ID", 0, "only this run (default: all runs)"},
    {"--out", "FILE", 0, "write FILE atomically (default: stdout)"},
};
static const OptCmd k_export = {
    "kvcal export",
    "Write the store (or one run) as:\n"
    "  csv   one row per point: run_id,backend,device,op,model,dtype,tp,p1,p2,p3,n,\n"
    "        median_ns,p10_ns,p90_ns\n"
    "  json  {\"schema\":N,\"runs\":[{...run metadata..., \"points\":[...]}]}\n"
    "  sql   the deterministic dump (schema and INSERTs in key order; the same content always\n"
    "        gives the same bytes), suitable for committing; load it with kvcal import\n",
    k_export_opts, (int)KV_ARRAY_LEN(k_export_opts), NULL, 0, 0};

int kvcal_cmd_export(int argc, char **argv)
{
    const OptCmd *c = &k_export;
    OptArgs a;
    int rc = kvcal_cli_begin(c, argc, argv, &a);
    if (rc >= 0) return rc;
    const char *fmt = opt_get(&a, "--format"), *out_path = opt_get(&a, "--out");
    if (strcmp(fmt, "csv") != 0 && strcmp(fmt, "json") != 0 && strcmp(fmt, "sql") != 0)
        return usage_error(c, "--format: '%s', expected csv, json or sql", fmt);
    int64_t run_id = 0;
    if (opt_get(&a, "--run") && (rc = parse_run_id(c, opt_get(&a, "--run"), &run_id)) != CLI_OK) return rc;

    KvErr e = {{0}};
    KvPathArg pin[] = {{"--db", opt_get(&a, "--db"), 0}}, pout[] = {{"--out", out_path, 0}};
    if ((rc = kvcal_cli_paths(c, pin, 1, pout, 1)) != CLI_OK) return rc; /* the export would replace the store */
    CostStore s;
    if (store_open(&s, opt_get(&a, "--db"), STORE_OPEN_READONLY, &e) != 0) return fail(c, &e);
    StoreRunMeta probe;
    if (run_id && store_get_run(&s, run_id, &probe, &e) != 0) { /* before creating any output file */
        store_close(&s);
        return fail(c, &e);
    }
    KvAtomicFile af;
    FILE *out = stdout;
    if (out_path) {
        if (kv_atomic_open(&af, out_path, &e) != 0) {
            store_close(&s);
            return fail(c, &e);
        }
        out = af.f;
    }
    int r;
    if (strcmp(fmt, "csv") == 0)
        r = store_export_csv(&s, run_id, out, &e);
    else if (strcmp(fmt, "json") == 0)
        r = store_export_json(&s, run_id, out, &e);
    else
        r = store_dump_sql_run(&s, run_id, out, &e);
    store_close(&s);
    if (out_path) {
        if (r != 0) {
            kv_atomic_abort(&af);
            return fail(c, &e);
        }
        if (kv_atomic_commit(&af, &e) != 0) return fail(c, &e);
        return CLI_OK;
    }
    if (r != 0) return fail(c, &e);
    return kvcal_cli_flush(c);
}

/* ---------------------------------------------------------------------------------------------
 * import
 * ------------------------------------------------------------------------------------------- */

static const OptSpec k_import_opts[] = {
    {"--db", "FILE", OPT_REQUIRED, "the cost store (SQLite; created if absent)"},
};
static const OptCmd k_import = {
    "kvcal import",
    "Add the runs of INPUT to the store FILE (created if absent), in one transaction.\n"
    "INPUT is a SQL dump written by 'kvcal export --format sql' (its runs are copied with their\n"
    "metadata; a run already in the store is skipped; a dump of a newer schema is refused) or a\n"
    "CSV written by 'kvcal export --format csv' (one new run per source run_id). The kind is\n"
    "recognised by the first line, else by the .sql / .csv extension.\n",
    k_import_opts, (int)KV_ARRAY_LEN(k_import_opts), "INPUT", 0, 1};

typedef enum { IN_UNKNOWN, IN_SQL, IN_CSV } InputKind;

static InputKind input_kind(const char *path, const char *text)
{
    if (strncmp(text, "-- kvsim cost store dump", 24) == 0) return IN_SQL;
    if (strncmp(text, "run_id,", 7) == 0) return IN_CSV;
    const char *dot = strrchr(path, '.');
    if (dot && strcmp(dot, ".sql") == 0) return IN_SQL;
    if (dot && strcmp(dot, ".csv") == 0) return IN_CSV;
    return IN_UNKNOWN;
}

int kvcal_input_kind(const char *path, const char *text)
{
    InputKind k = input_kind(path, text);
    return k == IN_SQL ? 1 : k == IN_CSV ? 2 : 0;
}

int kvcal_cmd_import(int argc, char **argv)
{
    const OptCmd *c = &k_import;
    OptArgs a;
    int rc = kvcal_cli_begin(c, argc, argv, &a);
    if (rc >= 0) return rc;
    if (a.n_pos != 1) return usage_error(c, "%s", "the INPUT file to import is required");
    const char *db = opt_get(&a, "--db"), *input = a.pos[0];
    KvPathArg in[] = {{"INPUT", input, 0}}, out[] = {{"--db", db, 0}};
    if ((rc = kvcal_cli_paths(c, in, 1, out, 1)) != CLI_OK) return rc;

    KvErr e = {{0}};
    struct stat sb;
    if (stat(input, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > STORE_IMPORT_MAX_BYTES) {
        kv_err(&e, "%s: %lld bytes, larger than an import may be (%d MiB)", input, (long long)sb.st_size,
               STORE_IMPORT_MAX_BYTES >> 20);
        return fail(c, &e);
    }
    char *text = kv_read_file(input, NULL, &e);
    if (!text) return fail(c, &e);
    InputKind kind = input_kind(input, text);
    if (kind == IN_UNKNOWN) {
        free(text);
        kv_err(&e, "%s: neither a kvsim SQL dump nor a CSV export (expected a first line '-- kvsim cost store "
                   "dump, schema N' or the CSV header 'run_id,backend,...', or a .sql / .csv name)",
               input);
        return fail(c, &e);
    }
    int existed = access(db, F_OK) == 0;
    CostStore s;
    if (store_open(&s, db, 1, &e) != 0) {
        free(text);
        return fail(c, &e);
    }
    StoreImportStats st;
    int r = kind == IN_SQL ? store_import_sql_stats(&s, text, input, &st, &e)
                           : store_import_csv_stats(&s, text, input, &st, &e);
    store_close(&s);
    free(text);
    if (r != 0) {
        if (!existed) unlink(db); /* don't leave an empty store behind a failed first import */
        return fail(c, &e);
    }
    printf("%s: imported %d run%s (%lld point%s) from %s", db, st.runs_added, st.runs_added == 1 ? "" : "s",
           (long long)st.points_added, st.points_added == 1 ? "" : "s", input);
    if (st.runs_skipped) printf("; skipped %d run%s already in the store", st.runs_skipped, st.runs_skipped == 1 ? "" : "s");
    putchar('\n');
    return CLI_OK;
}
