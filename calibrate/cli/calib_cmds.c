/* calib_cmds.c — kvcal run and kvcal diff: the command line of a measured calibration run
 * (calib_run.h) and of the comparison of two stored runs (calib_diff.h); see calib_cmds.h.
 *
 * Responsible for: the option tables, checking values, SIGINT/SIGTERM during a run (rolled back),
 * printing the progress, the plan (--dry-run), the run's summary and the diff's table.
 * Not responsible for: measuring, estimating, diffing (the library in calibrate/).
 * CLI code: prints; exit codes as in kvcal_cli.h.
 */
#include "calibrate/cli/calib_cmds.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <errno.h>
#include <unistd.h>
#include <cJSON.h>

#include "calibrate/calib_diff.h"
#include "calibrate/calib_run.h"
#include "calibrate/cli/kvcal_cli.h"
#include "calibrate/cli/store_cmds.h"
#include "calibrate/probe.h"
#include "calibrate/store_io.h"
#include "kernels/cpu.h"
#include "sim/base/opt.h"
#include "sim/cost/spec.h"

static volatile sig_atomic_t g_stop;
static void on_stop_signal(int sig) { g_stop = 1; }

static void cli_progress(void *ctx, const CalibProgress *pr)
{
    if (pr->ev == CALIB_EV_START) {
        printf("kvcal run: device '%s', %lld points\n", pr->device, (long long)pr->total);
        if (pr->estimate && pr->estimate->points > 0)
            printf("kvcal run: predicted %lld timed repetitions (%lld kernel launches) + %lld warm-ups, about %.0f s\n",
                   (long long)pr->estimate->reps, (long long)pr->estimate->launches, (long long)pr->estimate->warmups,
                   pr->estimate->seconds);
        fflush(stdout);
    } else if (pr->ev == CALIB_EV_OP_DONE) {
        printf("  %-14s %5lld points %8.1f s   (%lld/%lld)\n", cost_op_name(pr->op), (long long)pr->op_points, pr->op_seconds,
               (long long)pr->index, (long long)pr->total);
        fflush(stdout);
    }
}

static void print_plan(const CalibPlan *plan, const SpecInputs *in, int cuda)
{
    CalibEstimate est;
    calib_estimate(plan, in, cuda, &est);
    printf("%-14s %7s %s\n", "op", "points", cuda ? "predicted s" : "");
    for (int op = 0; op < OP_COUNT; op++) {
        int64_t n = calib_plan_op_points(plan, (CostOp)op);
        if (!n) continue;
        if (cuda) printf("%-14s %7lld %8.1f\n", cost_op_name((CostOp)op), (long long)n, est.op_seconds[op]);
        else printf("%-14s %7lld\n", cost_op_name((CostOp)op), (long long)n);
    }
    printf("total: %lld points", (long long)calib_plan_points(plan));
    if (cuda)
        printf(", %lld timed repetitions (%lld kernel launches), %lld warm-ups; predicted %.0f s on %s "
               "(spec roofline + %.0f us sync per repetition + cold-L2 memsets)",
               (long long)est.reps, (long long)est.launches, (long long)est.warmups, est.seconds, in->gpu->name, CALIB_EST_SYNC_NS / 1e3);
    printf("\n");
}

/* Every directory of --scratch DIR[,DIR...] exists (created first with --create-scratch); a
 * missing one is refused by name, so a typo never measures the root disk as the SSD. The probe
 * files that killed kvcal runs left in them are removed (and named). */
static int scratch_dirs_ready(const char *list, int create)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        struct stat sb;
        KvErr e;
        if (create && kv_mkdirs(tok, &e) != 0) {
            fprintf(stderr, "kvcal run: --create-scratch: %s\n", e.msg);
            return -1;
        }
        if (stat(tok, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            fprintf(stderr, "kvcal run: --scratch %s: %s (create it, or pass --create-scratch)\n", tok,
                    stat(tok, &sb) != 0 ? "no such directory" : "not a directory");
            return -1;
        }
        int removed = 0;
        char names[512];
        if (probe_ssd_remove_stale(tok, &removed, names, sizeof names, &e) != 0) {
            fprintf(stderr, "kvcal run: --scratch %s: %s\n", tok, e.msg);
            return -1;
        }
        if (removed)
            fprintf(stderr, "kvcal run: removed %d probe file%s of kvcal runs that are gone from %s: %s\n", removed,
                    removed == 1 ? "" : "s", tok, names);
    }
    return 0;
}

static const OptSpec k_run_opts[] = {
    {"--backend", "cpu|cuda", OPT_REQUIRED, "cpu (the kernels of kernels/cpu.c) or cuda (cuBLAS GEMMs, our attention kernels)"},
    {"--model", "M", OPT_REQUIRED, "model from the catalog (kvsim list models)"},
    {"--db", "FILE", 0, "the cost store (SQLite; created if absent); required unless --dry-run"},
    {"--quick", NULL, 0, "the small grid (minutes on a CPU) instead of the full one"},
    {"--points", "default|small", 0, "small: add every token count 2..16 and 32, 128, 256, 1024 (GEMMs, elementwise), attention of 16..1024 new tokens, small decode batches and 128..2048 keys to the grid"},
    {"--tp", "N", 0, "per-GPU shapes of a tensor-parallel group of N (default 1), timed on one device"},
    {"--dtype", "fp16|bf16", 0, "the run's dtype (default fp16; the cpu computes in fp32 and keeps the label)"},
    {"--device-name", "NAME", 0, "the device key stored (default: cuda: the hardware catalog's GPU key, cpu: \"cpu\")"},
    {"--scratch", "DIR[,DIR...]", 0, "existing directories for the SSD probes (O_DIRECT files; none: SSD probes skipped)"},
    {"--create-scratch", NULL, 0, "create the --scratch directories when missing (else a missing one is refused)"},
    {"--device", "N", 0, "the CUDA device index (default 0)"},
    {"--cold-weights", NULL, 0, "cpu: GEMM and layer ops read a new copy of their weights each repetition, rotating over 3x the LLC (weights from memory, as in a model's layer sequence)"},
    {"--in-sequence", NULL, 0, "cpu: time qkv, o, ffn, norm, act, rope and attention inside a whole layer on a new copy of its weights and KV each repetition (each op between the others, as a model's layer sequence runs them)"},
    {"--net", "loopback", 0, "also time the remote store's NIC: net points, each a fetch of 64 KiB to 16 MiB from a server process over TCP on the loopback interface (the remote tier as kvcal execute replays it)"},
    {"--io-beside-compute", NULL, 0, "cpu: time the h2d/d2h and SSD points while a second thread runs the model's layers (the IO as it runs beside a replay's compute, kvcal execute; the timing thread pinned to the last CPU)"},
    {"--threads", "N", 0, "cpu: attention threads of the cpu kernels (default: one per CPU; GEMM threads: OPENBLAS_NUM_THREADS)"},
    {"--dry-run", NULL, 0, "print the plan (points per op; cuda: predicted time on --device-name, default H200)"},
};
static const OptCmd k_run = {"kvcal run",
                             "Measure cost curves on this machine and store them as one run (one transaction; Ctrl-C "
                             "rolls it back).\nExit: 0 done, 1 failure (no CUDA device, probe error, unknown model), "
                             "2 usage error, 130 interrupted.",
                             k_run_opts, (int)KV_ARRAY_LEN(k_run_opts), NULL, 0, 0};

int kvcal_cmd_run(int argc, char **argv)
{
    OptArgs a;
    int rc = kvcal_cli_begin(&k_run, argc, argv, &a);
    if (rc >= 0) return rc;
    const char *backend = opt_get(&a, "--backend"), *dtype_s = opt_get(&a, "--dtype") ? opt_get(&a, "--dtype") : "fp16";
    int dry = opt_count(&a, "--dry-run") > 0, quick = opt_count(&a, "--quick") > 0;
    const char *points = opt_get(&a, "--points") ? opt_get(&a, "--points") : "default";
    if (strcmp(points, "default") && strcmp(points, "small"))
        return kvcal_cli_usage(&k_run, "--points '%s': expected default or small", points);
    int small = !strcmp(points, "small");
    if (strcmp(backend, "cpu") && strcmp(backend, "cuda"))
        return kvcal_cli_usage(&k_run, "--backend '%s': expected cpu or cuda", backend);
    if (!dry && !opt_get(&a, "--db")) return kvcal_cli_usage(&k_run, "--db is required (FILE: the cost store), unless --dry-run");
    int64_t tp, device, threads;
    if (kvcal_cli_int(&k_run, &a, "--tp", 1, 1024, 1, &tp) || kvcal_cli_int(&k_run, &a, "--device", 0, 1023, 0, &device) ||
        kvcal_cli_int(&k_run, &a, "--threads", 0, 256, 0, &threads))
        return KVCAL_USAGE;
    int cold = opt_count(&a, "--cold-weights") > 0, in_seq = opt_count(&a, "--in-sequence") > 0;
    int beside = opt_count(&a, "--io-beside-compute") > 0;
    const char *net_s = opt_get(&a, "--net");
    if (net_s && strcmp(net_s, "loopback"))
        return kvcal_cli_usage(&k_run, "--net '%s': expected loopback (a server process on this machine's loopback interface)", net_s);
    int net = net_s != NULL;
    if ((cold || in_seq || threads > 0) && strcmp(backend, "cpu"))
        return kvcal_cli_usage(&k_run, "--cold-weights, --in-sequence and --threads are for --backend cpu (cuda flushes its L2 instead)");
    if (beside && strcmp(backend, "cpu"))
        return kvcal_cli_usage(&k_run, "--io-beside-compute is for --backend cpu (a GPU computes on its own; the host's IO does not share it)");
    if (threads > 0) kcpu_set_threads((int)threads);
    KvErr e;
    KvDtype dt;
    if (kv_dtype_parse(dtype_s, &dt, &e) != 0 || (dt != KV_DT_FP16 && dt != KV_DT_BF16))
        return kvcal_cli_usage(&k_run, "--dtype '%s': expected fp16 or bf16", dtype_s);
    ModelCatalog mc;
    HwCatalog hw;
    if (spec_catalogs_load(&mc, &hw, &e) != 0) return kvcal_cli_fail(&k_run, &e);
    rc = 1;
    CostStore st;
    memset(&st, 0, sizeof st);
    const ModelSpec *m = model_find(&mc, opt_get(&a, "--model"), &e);
    ModelLayout ly = {m, dt, (int)tp, 1};
    if (!m || model_layout_check(&ly, &e) != 0) goto fail;
    CalibPlan plan;
    if (calib_plan_default(&plan, backend, quick, &e) != 0 || (small && calib_plan_add_small(&plan, &e) != 0) ||
        (net && calib_plan_add_net(&plan, &e) != 0))
        goto fail;
    if (dry) {
        if (!opt_get(&a, "--scratch")) plan.op[OP_SSD_READ].enabled = plan.op[OP_SSD_WRITE].enabled = 0;
        if (m->pos != POS_ROPE) plan.op[OP_ROPE].enabled = 0;
        SpecInputs in;
        const char *gpu = opt_get(&a, "--device-name") ? opt_get(&a, "--device-name") : "H200";
        if (!strcmp(backend, "cuda") && !hw_find_gpu(&hw, gpu, &e)) goto fail;
        calib_spec_inputs(&in, &hw, &ly, gpu);
        printf("kvcal run --dry-run: %s%s, %s %s tp %d\n", backend, quick ? " --quick" : "", m->name, kv_dtype_name(dt), (int)tp);
        print_plan(&plan, &in, !strcmp(backend, "cuda"));
        rc = 0;
        goto out;
    }
    if (opt_get(&a, "--scratch") && scratch_dirs_ready(opt_get(&a, "--scratch"), opt_count(&a, "--create-scratch") > 0) != 0) {
        rc = 2;
        goto out;
    }
    const char *db = opt_get(&a, "--db");
    if (store_open(&st, db, STORE_OPEN_CREATE, &e) != 0) goto fail;
    CalibOptions o = {.backend = backend, .model = m, .dtype = dt, .tp = (int)tp, .quick = quick, .plan = &plan,
                      .device_name = opt_get(&a, "--device-name"), .scratch = opt_get(&a, "--scratch"), .cuda_device = (int)device,
                      .hw = &hw, .stop = &g_stop, .progress = cli_progress,
                      .cold_weights_bytes = cold ? 3 * probe_cpu_llc_bytes() : 0, .in_sequence = in_seq,
                      .io_beside_compute = beside};
    struct sigaction sa, old_int, old_term, old_hup;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    g_stop = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    /* a closed terminal stops the run the same way (its scratch files removed), unless under nohup */
    int hup = sigaction(SIGHUP, NULL, &old_hup) == 0 && old_hup.sa_handler != SIG_IGN;
    if (hup) sigaction(SIGHUP, &sa, NULL);
    printf("kvcal run: %s%s, %s %s tp %d -> %s\n", backend, quick ? " --quick" : "", m->name, kv_dtype_name(dt), (int)tp, db);
    fflush(stdout);
    CalibResult r;
    int run_rc = calib_run(&st, &o, &r, &e);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (hup) sigaction(SIGHUP, &old_hup, NULL);
    if (r.warnings[0]) fprintf(stderr, "kvcal run: warning: %s\n", r.warnings);
    if (run_rc != 0) {
        if (g_stop) {
            fprintf(stderr, "kvcal run: interrupted after %.1f s; the run was rolled back (%s unchanged)\n", r.wall_s, db);
            rc = KVCAL_INTERRUPTED;
            goto out;
        }
        goto fail;
    }
    printf("kvcal run: run %lld: %lld points of %s on '%s' (%s) in %.1f s -> %s\n", (long long)r.run_id, (long long)r.points,
           m->name, r.meta.device, r.meta.backend, r.wall_s, db);
    printf("notes: %s\n", r.meta.notes);
    if (beside) printf("io beside compute: %lld layers ran while the IO was timed\n", (long long)r.beside_layers);
    char sum[4096];
    if (calib_summary(&st, r.run_id, m, sum, sizeof sum, &e) != 0) goto fail;
    fputs(sum, stdout);
    rc = 0;
    goto out;
fail:
    rc = kvcal_cli_fail(&k_run, &e);
out:
    if (st.db) store_close(&st);
    hw_catalog_free(&hw);
    model_catalog_free(&mc);
    return rc;
}


static void fmt_ns(double ns, char *s, size_t len)
{
    if (ns >= 1e9) snprintf(s, len, "%.3g s", ns * 1e-9);
    else if (ns >= 1e6) snprintf(s, len, "%.3g ms", ns * 1e-6);
    else if (ns >= 1e3) snprintf(s, len, "%.3g us", ns * 1e-3);
    else snprintf(s, len, "%.3g ns", ns);
}

static const OptSpec k_diff_opts[] = {
    {"--db", "FILE", 0, "the cost store (SQLite) holding both runs: then A and B are run ids"},
    {"--tolerance", "T", 0, "a percentage (5%) or a fraction (0.05) of run A's median; default 5%"},
    {"--json", NULL, 0, "print the comparison as one JSON object instead of the table"},
};
static const OptCmd k_diff = {
    "kvcal diff",
    "Compare the medians of every (op, model, dtype, tp, p1, p2, p3) point the two runs share; list the\n"
    "curves with points beyond the tolerance and the points present in one run only.\n"
    "  kvcal diff --db FILE RUN_A RUN_B      two runs of one store\n"
    "  kvcal diff A B                        across files: each a store (.db), a SQL dump (.sql, as committed\n"
    "                                        in results/costmodels/) or a CSV export; FILE:RUN picks a run\n"
    "                                        of a file holding several (e.g. kvcal diff committed.sql new.db)\n"
    "Exit: 0 no drift, 1 drift beyond the tolerance, 2 an error (usage, a file or run that cannot be read).",
    k_diff_opts, (int)KV_ARRAY_LEN(k_diff_opts), "A B", 2, 2};

/* a run id: a positive integer */
static int parse_run_id(const char *v, int64_t *out)
{
    char *end;
    long long n = strtoll(v, &end, 10);
    if (*end || end == v || n < 1)
        return kvcal_cli_usage(&k_diff, "run id '%s': expected a positive integer (kvcal show --db FILE lists runs)", v);
    *out = n;
    return KVCAL_OK;
}

/* One side of a diff across files: the store it was read into and the run. */
typedef struct DiffSide {
    char path[1024];  /* the file as named (without ":RUN") */
    char tmp[1100];   /* "" or the temporary store a dump / CSV was imported into (removed at the end) */
    CostStore st;
    int open;
    int64_t run;      /* the run's id in st */
    int64_t shown;    /* the run as the file numbers it (an imported dump's runs are 1, 2, ... in order) */
} DiffSide;

static void side_close(DiffSide *d)
{
    if (d->open) store_close(&d->st);
    d->open = 0;
    if (d->tmp[0]) unlink(d->tmp);
    d->tmp[0] = '\0';
}

/* "FILE" or "FILE:RUN": open it (a SQLite store as is; a dump or CSV export imported into a
 * temporary store) and pick the run (the only one, or RUN). */
static int side_open(DiffSide *d, const char *arg, KvErr *e)
{
    memset(d, 0, sizeof *d);
    snprintf(d->path, sizeof d->path, "%s", arg);
    const char *colon = strrchr(arg, ':');
    struct stat sb;
    if (colon && colon[1] && strspn(colon + 1, "0123456789") == strlen(colon + 1) && stat(arg, &sb) != 0) {
        snprintf(d->path, sizeof d->path, "%.*s", (int)(colon - arg), arg);
        d->run = strtoll(colon + 1, NULL, 10);
        if (d->run < 1) return kv_err(e, "%s: run %s: expected a run id >= 1", arg, colon + 1);
    }
    FILE *f = kv_fopen_regular(d->path, e); /* (a FIFO would hang the open, /dev/zero the import) */
    if (!f) return -1;
    char head[16] = {0};
    size_t got = fread(head, 1, sizeof head, f);
    fclose(f);
    if (got == sizeof head && !memcmp(head, "SQLite format 3", 16)) {
        if (store_open(&d->st, d->path, STORE_OPEN_READONLY, e) != 0) return -1;
        d->open = 1;
    } else {
        if (stat(d->path, &sb) == 0 && sb.st_size > STORE_IMPORT_MAX_BYTES)
            return kv_err(e, "%s: %lld bytes, larger than an import may be (%d MiB)", d->path, (long long)sb.st_size,
                          STORE_IMPORT_MAX_BYTES >> 20);
        char *text = kv_read_file(d->path, NULL, e);
        if (!text) return -1;
        int kind = kvcal_input_kind(d->path, text);
        if (!kind) {
            free(text);
            return kv_err(e, "%s: neither a cost store (SQLite), a kvsim SQL dump nor a CSV export (expected a .db store, a first line "
                             "'-- kvsim cost store dump, schema N' or the CSV header 'run_id,backend,...')", d->path);
        }
        const char *tdir = getenv("TMPDIR");
        snprintf(d->tmp, sizeof d->tmp, "%s/kvcal-diff-XXXXXX", tdir && *tdir ? tdir : "/tmp");
        int fd = mkstemp(d->tmp);
        if (fd < 0) {
            free(text);
            kv_err(e, "%s: cannot create a temporary store: %s", d->tmp, strerror(errno));
            d->tmp[0] = '\0';
            return -1;
        }
        close(fd);
        StoreImportStats is;
        int rc = store_open(&d->st, d->tmp, STORE_OPEN_CREATE, e);
        if (rc == 0) {
            d->open = 1;
            rc = kind == 1 ? store_import_sql_stats(&d->st, text, d->path, &is, e) : store_import_csv_stats(&d->st, text, d->path, &is, e);
        }
        free(text);
        if (rc != 0) return -1;
    }
    StoreRunList runs;
    if (store_runs_all(&d->st, 0, &runs, e) != 0) return -1;
    int rc = 0;
    if (d->run > 0) {
        /* the run ids of an imported dump are renumbered in order: name them as the file did (1, 2, ...) */
        if (d->tmp[0]) {
            if ((size_t)d->run > runs.n) rc = kv_err(e, "%s: no run %lld (the file holds %zu run%s)", d->path, (long long)d->run, runs.n,
                                                     runs.n == 1 ? "" : "s");
            else d->shown = d->run, d->run = runs.v[d->run - 1].id;
        } else d->shown = d->run;
    } else if (runs.n == 1) {
        d->run = runs.v[0].id;
        d->shown = d->tmp[0] ? 1 : d->run;
    } else {
        char ids[256] = "";
        for (size_t i = 0; i < runs.n && strlen(ids) < sizeof ids - 24; i++)
            snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%lld", i ? ", " : "", (long long)(d->tmp[0] ? (int64_t)i + 1 : runs.v[i].id));
        rc = runs.n == 0 ? kv_err(e, "%s: holds no run", d->path)
                         : kv_err(e, "%s: holds %zu runs (%s): name one as %s:RUN", d->path, runs.n, ids, d->path);
    }
    free(runs.v);
    return rc;
}

static cJSON *side_json(const char *file, int64_t run, const StoreRunMeta *m)
{
    cJSON *o = cJSON_CreateObject();
    if (file) cJSON_AddStringToObject(o, "file", file);
    cJSON_AddNumberToObject(o, "run", (double)run);
    cJSON_AddStringToObject(o, "backend", m->backend);
    cJSON_AddStringToObject(o, "device", m->device);
    cJSON_AddStringToObject(o, "model", m->model);
    cJSON_AddStringToObject(o, "dtype", m->dtype);
    cJSON_AddNumberToObject(o, "tp", m->tp);
    cJSON_AddStringToObject(o, "started_at", m->started_at);
    return o;
}

static void print_json(const char *fa, int64_t ra, const StoreRunMeta *ma, const char *fb, int64_t rb, const StoreRunMeta *mb,
                       const CalibDiff *d, double tol)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddItemToObject(root, "a", side_json(fa, ra, ma));
    cJSON_AddItemToObject(root, "b", side_json(fb, rb, mb));
    cJSON_AddNumberToObject(root, "tolerance", tol);
    cJSON_AddNumberToObject(root, "common", (double)d->common);
    cJSON_AddNumberToObject(root, "beyond", (double)d->beyond);
    cJSON_AddNumberToObject(root, "only_a", (double)d->only_a);
    cJSON_AddNumberToObject(root, "only_b", (double)d->only_b);
    cJSON_AddNumberToObject(root, "drifted_curves", d->drifted);
    cJSON_AddBoolToObject(root, "drift", d->drifted > 0);
    cJSON *cs = cJSON_AddArrayToObject(root, "curves");
    for (int i = 0; i < d->n_curves; i++) {
        const CalibDiffCurve *c = &d->curves[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "op", cost_op_name(c->op));
        cJSON_AddStringToObject(o, "model", c->model);
        cJSON_AddStringToObject(o, "dtype", c->dtype);
        cJSON_AddNumberToObject(o, "tp", c->tp);
        cJSON_AddNumberToObject(o, "common", (double)c->common);
        cJSON_AddNumberToObject(o, "beyond", (double)c->beyond);
        cJSON_AddNumberToObject(o, "only_a", (double)c->only_a);
        cJSON_AddNumberToObject(o, "only_b", (double)c->only_b);
        if (c->common) {
            if (isinf(c->worst_rel)) cJSON_AddNullToObject(o, "worst_change"); /* from 0 */
            else cJSON_AddNumberToObject(o, "worst_change", c->worst_rel);
            cJSON *at = cJSON_AddArrayToObject(o, "worst_at");
            for (int k = 0; k < 3; k++) cJSON_AddItemToArray(at, cJSON_CreateNumber((double)c->worst_p[k]));
            cJSON_AddNumberToObject(o, "worst_a_ns", c->worst_a_ns);
            cJSON_AddNumberToObject(o, "worst_b_ns", c->worst_b_ns);
        }
        cJSON_AddItemToArray(cs, o);
    }
    char *text = cJSON_Print(root);
    if (text) printf("%s\n", text);
    cJSON_free(text);
    cJSON_Delete(root);
}

/* kvcal diff's exit codes keep an error apart from a drift, so a CI job can tell "the cost model
 * moved" (1) from "the comparison could not be made" (2: a missing file or run, a file that is no store) */
static int diff_fail(const KvErr *e)
{
    kvcal_cli_fail(&k_diff, e);
    return KVCAL_USAGE;
}

int kvcal_cmd_diff(int argc, char **argv)
{
    OptArgs a;
    int rc = kvcal_cli_begin(&k_diff, argc, argv, &a);
    if (rc >= 0) return rc;
    KvErr e;
    double tol = 0.05;
    if (opt_get(&a, "--tolerance") && calib_parse_tolerance(opt_get(&a, "--tolerance"), &tol, &e) != 0)
        return kvcal_cli_usage(&k_diff, "--tolerance: %s", e.msg);
    int json = opt_count(&a, "--json") > 0;
    int64_t ra = 0, rb = 0;
    CalibDiff d;
    StoreRunMeta ma, mb;
    char la[1100] = "", lb[1100] = ""; /* "" (one store) or "FILE " before "run N" */
    if (opt_get(&a, "--db")) {
        if (parse_run_id(a.pos[0], &ra) || parse_run_id(a.pos[1], &rb)) return KVCAL_USAGE;
        CostStore st;
        if (store_open(&st, opt_get(&a, "--db"), STORE_OPEN_READONLY, &e) != 0) return diff_fail(&e);
        if (store_get_run(&st, ra, &ma, &e) != 0 || store_get_run(&st, rb, &mb, &e) != 0 || calib_diff(&st, ra, rb, tol, &d, &e) != 0) {
            store_close(&st);
            return diff_fail(&e);
        }
        store_close(&st);
    } else {
        DiffSide sa, sb;
        memset(&sb, 0, sizeof sb);
        if (side_open(&sa, a.pos[0], &e) != 0 || side_open(&sb, a.pos[1], &e) != 0 || store_get_run(&sa.st, sa.run, &ma, &e) != 0 ||
            store_get_run(&sb.st, sb.run, &mb, &e) != 0 || calib_diff_stores(&sa.st, sa.run, &sb.st, sb.run, tol, &d, &e) != 0) {
            side_close(&sa);
            side_close(&sb);
            return diff_fail(&e);
        }
        ra = sa.shown;
        rb = sb.shown;
        snprintf(la, sizeof la, "%s ", sa.path);
        snprintf(lb, sizeof lb, "%s ", sb.path);
        side_close(&sa);
        side_close(&sb);
    }
    if (json) {
        char fa[1100], fb[1100];
        snprintf(fa, sizeof fa, "%.*s", la[0] ? (int)strlen(la) - 1 : 0, la);
        snprintf(fb, sizeof fb, "%.*s", lb[0] ? (int)strlen(lb) - 1 : 0, lb);
        print_json(la[0] ? fa : NULL, ra, &ma, lb[0] ? fb : NULL, rb, &mb, &d, tol);
        rc = d.drifted ? 1 : 0;
        calib_diff_free(&d);
        return rc;
    }
    printf("kvcal diff: %srun %lld (%s '%s' %s, %s) vs %srun %lld (%s '%s' %s, %s): %lld common points, tolerance %g%%\n", la,
           (long long)ra, ma.backend, ma.device, ma.model[0] ? ma.model : "(io)", ma.started_at, lb, (long long)rb, mb.backend,
           mb.device, mb.model[0] ? mb.model : "(io)", mb.started_at, (long long)d.common, tol * 100);
    if (d.drifted) {
        printf("%-14s %-16s %-5s %3s %7s %7s %12s  %-28s %s\n", "op", "model", "dtype", "tp", "points", "beyond", "worst",
               "at (p1, p2, p3)", "median A -> B");
        for (int i = 0; i < d.n_curves; i++) {
            const CalibDiffCurve *c = &d.curves[i];
            if (!c->beyond) continue;
            char at[96], sa[32], sb[32], w[32];
            snprintf(at, sizeof at, "(%lld, %lld, %lld)", (long long)c->worst_p[0], (long long)c->worst_p[1],
                     (long long)c->worst_p[2]);
            fmt_ns(c->worst_a_ns, sa, sizeof sa);
            fmt_ns(c->worst_b_ns, sb, sizeof sb);
            if (isinf(c->worst_rel)) snprintf(w, sizeof w, "from 0");
            else snprintf(w, sizeof w, "%+.1f%%", c->worst_rel * 100);
            printf("%-14s %-16s %-5s %3d %7lld %7lld %12s  %-28s %s -> %s\n", cost_op_name(c->op), c->model[0] ? c->model : "(io)",
                   c->dtype, c->tp, (long long)c->common, (long long)c->beyond, w, at, sa, sb);
        }
    }
    for (int side = 0; side < 2; side++) {
        int64_t n = side ? d.only_b : d.only_a;
        if (!n) continue;
        printf("only in %srun %lld: %lld points (", side ? lb : la, (long long)(side ? rb : ra), (long long)n);
        int first = 1;
        for (int i = 0; i < d.n_curves; i++) {
            int64_t k = side ? d.curves[i].only_b : d.curves[i].only_a;
            if (!k) continue;
            printf("%s%s %lld", first ? "" : ", ", cost_op_name(d.curves[i].op), (long long)k);
            first = 0;
        }
        printf(")\n");
    }
    if (d.drifted)
        printf("drift: %d curve%s with %lld point%s beyond %g%%\n", d.drifted, d.drifted > 1 ? "s" : "", (long long)d.beyond,
               d.beyond > 1 ? "s" : "", tol * 100);
    else {
        double worst = 0;
        const char *wop = "";
        for (int i = 0; i < d.n_curves; i++)
            if (d.curves[i].common && fabs(d.curves[i].worst_rel) >= fabs(worst)) {
                worst = d.curves[i].worst_rel;
                wop = cost_op_name(d.curves[i].op);
            }
        printf("no drift beyond %g%%%s", tol * 100, d.common ? "" : " (no common points)");
        if (d.common) printf(" (largest change %+.1f%% in %s)", worst * 100, wop);
        printf("\n");
    }
    rc = d.drifted ? 1 : 0;
    calib_diff_free(&d);
    return rc;
}
