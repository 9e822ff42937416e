/* kvcal_main.c — the kvcal command line: measure cost curves on this machine (run: cpu or cuda
 * backend), derive them from datasheets (spec), compare runs (diff), show, export and import stores.
 * Only this file (and kvsim_main.c) prints and exits; the commands' work lives in calib_run.c,
 * spec.c and store_cmds.c. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "calibrate/calib_run.h"
#include "sim/catalog/hw.h"
#include "sim/catalog/model.h"
#include "sim/cost/spec.h"
#include "sim/cost/store.h"
#include "calibrate/cli/store_cmds.h"
#include "calibrate/validate.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: kvcal COMMAND [options]\n"
                 "\n"
                 "commands:\n"
                 "  spec --gpu G --model M [--platform P] [--tp N] [--pp N] [--dtype D] --db FILE\n"
                 "        fill FILE with roofline cost curves derived from the catalogs (no GPU needed)\n"
                 "  spec --explain [--gpu G]   print the fitted efficiency curves and their sources\n"
                 "  run --backend cpu|cuda --model M --db FILE [--quick] [--tp N] [--dtype fp16|bf16]\n"
                 "      [--device-name NAME] [--scratch DIR[,DIR...]] [--device N] [--dry-run]\n"
                 "        measure cost curves on this machine into FILE (one run; Ctrl-C rolls it back)\n"
                 "  diff --db FILE RUN_A RUN_B [--tolerance 5%%]  compare two runs' medians (exit 1 on drift)\n"
                 "  show --db FILE [--run ID] [--op OP]           runs, or one run's curves\n"
                 "  export --db FILE [--run ID] --format csv|json|sql [--out FILE]\n"
                 "  import --db FILE INPUT                         INPUT: .sql dump or .csv export\n"
                 "  validate --db FILE --model M [--layers K] [--tokens N] [--dir D] [--max-error 50%%]  real CPU restoration vs the cost model\n"
                 "\n"
                 "Cost models are kept in the repository as SQL dumps (export --format sql): diffable text.\n");
}

static void iso_now(char *buf, size_t len)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

typedef struct {
    CostStore *st;
    int64_t run;
    uint64_t n;
} StoreEmit;

static int emit_to_store(void *ctx, const StorePoint *p, KvErr *e)
{
    StoreEmit *se = ctx;
    se->n++;
    return store_add_point(se->st, se->run, p, e);
}

static int explain(const char *gpu_name)
{
    KvErr e;
    HwCatalog hw;
    if (hw_catalog_load(&hw, NULL, &e) != 0) {
        fprintf(stderr, "kvcal: %s\n", e.msg);
        return 1;
    }
    printf("GEMM efficiency (fraction of dense fp16 peak) by M; attention fraction by new tokens; HBM x%.2f\n",
           spec_mem_efficiency(NULL));
    printf("%-12s", "GPU");
    static const int64_t ms[] = {16, 64, 128, 256, 512, 1024, 2048, 4096, 16384};
    for (size_t i = 0; i < KV_ARRAY_LEN(ms); i++) printf(" M=%-6lld", (long long)ms[i]);
    printf(" attn@512 attn@8K\n");
    for (int g = 0; g < hw.n_gpus; g++) {
        if (gpu_name && strcasecmp(gpu_name, hw.gpus[g].name)) continue;
        printf("%-12s", hw.gpus[g].name);
        for (size_t i = 0; i < KV_ARRAY_LEN(ms); i++) printf(" %-8.3f", spec_gemm_efficiency(&hw.gpus[g], ms[i]));
        printf(" %-8.3f %-8.3f\n", spec_attn_efficiency(&hw.gpus[g], 512), spec_attn_efficiency(&hw.gpus[g], 8192));
    }
    printf("\nPer-GPU fractions (mamf: max achievable matmul; attn: flash attention at long sequences):\n");
    for (int g = 0; g < hw.n_gpus; g++) {
        if (gpu_name && strcasecmp(gpu_name, hw.gpus[g].name)) continue;
        const SpecGpuRow *r = spec_gpu_row_for(&hw.gpus[g]);
        printf("  %-12s mamf %.3f  attn %.2f  [row \"%s\"] source: %s\n", hw.gpus[g].name, r->mamf, r->attn,
               r->match[0] ? r->match : "default", r->source);
    }
    printf("\nConstants shared by every GPU:\n");
    for (int i = 0; spec_constant(i); i++) {
        const SpecConstant *c = spec_constant(i);
        printf("  %s: %g %s\n      source: %s\n", c->name, c->value, c->unit, c->source);
    }
    printf("\nThe roofline: t = max(flops / (peak x eff), bytes / (HBM x %.2f)) + launch; the model is described\n"
           "in docs/model.md (\"The spec cost model\").\n",
           spec_mem_efficiency(NULL));
    hw_catalog_free(&hw);
    return 0;
}

static int cmd_spec(int argc, char **argv)
{
    const char *gpu = NULL, *model = NULL, *platform = NULL, *db = NULL, *dtype = "fp16";
    int tp = 1, pp = 1, do_explain = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--explain")) {
            do_explain = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "kvcal spec: option %s needs a value\n", a);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--gpu")) gpu = v;
        else if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--platform")) platform = v;
        else if (!strcmp(a, "--db")) db = v;
        else if (!strcmp(a, "--dtype")) dtype = v;
        else if (!strcmp(a, "--tp") || !strcmp(a, "--pp")) {
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || n < 1 || n > 1024) {
                fprintf(stderr, "kvcal spec: %s: expected a positive integer, got '%s'\n", a, v);
                return 2;
            }
            if (!strcmp(a, "--tp")) tp = (int)n;
            else pp = (int)n;
        } else {
            fprintf(stderr, "kvcal spec: unknown option '%s'\n", a);
            return 2;
        }
    }
    if (do_explain) return explain(gpu);
    if ((!gpu && !platform) || !model || !db) {
        fprintf(stderr, "kvcal spec: --gpu (or --platform), --model and --db are required\n");
        return 2;
    }
    KvErr e;
    ModelCatalog mc;
    HwCatalog hw;
    if (spec_catalogs_load(&mc, &hw, &e) != 0) {
        fprintf(stderr, "kvcal: %s\n", e.msg);
        return 1;
    }
    int rc = 1;
    CostStore st = {0};
    const ModelSpec *m = model_find(&mc, model, &e);
    const PlatformSpec *p = NULL;
    const GpuSpec *g = NULL;
    KvDtype dt;
    if (!m) goto out;
    if (platform && !(p = hw_find_platform(&hw, platform, &e))) goto out;
    if (gpu && !(g = hw_find_gpu(&hw, gpu, &e))) goto out;
    if (kv_dtype_parse(dtype, &dt, &e) != 0) goto out;
    ModelLayout ly = {m, dt, tp, pp};
    if (model_layout_check(&ly, &e) != 0) goto out;
    SpecInputs in;
    if (p) {
        spec_inputs_from_platform(&in, &hw, p, &ly);
        if (g) in.gpu = g;
    } else {
        memset(&in, 0, sizeof in);
        in.ly = &ly;
        in.gpu = g;
        in.link = g->pcie[0] ? hw_find_link(&hw, g->pcie, &e) : NULL;
    }
    if (store_open(&st, db, 1, &e) != 0) goto out;
    StoreRunMeta meta;
    memset(&meta, 0, sizeof meta);
    snprintf(meta.backend, sizeof meta.backend, "spec");
    snprintf(meta.device, sizeof meta.device, "%s", in.gpu->name);
    if (gethostname(meta.host, sizeof meta.host) != 0) snprintf(meta.host, sizeof meta.host, "unknown");
    snprintf(meta.git_rev, sizeof meta.git_rev, "%s", kv_git_rev());
    iso_now(meta.started_at, sizeof meta.started_at);
    snprintf(meta.model, sizeof meta.model, "%s", m->name);
    snprintf(meta.dtype, sizeof meta.dtype, "%s", kv_dtype_name(dt));
    meta.tp = tp;
    snprintf(meta.notes, sizeof meta.notes, "spec roofline; platform %s", p ? p->name : "(none: GPU's host link only)");
    if (store_begin_run(&st, &meta, &e) != 0) goto out;
    StoreEmit se = {&st, meta.id, 0};
    if (spec_generate(&in, emit_to_store, &se, &e) != 0) {
        KvErr e2;
        store_end_run(&st, meta.id, 0, &e2);
        goto out;
    }
    if (store_end_run(&st, meta.id, 1, &e) != 0) goto out;
    printf("kvcal: run %lld: %llu spec points for %s on %s (%s, tp %d) in %s\n", (long long)meta.id,
           (unsigned long long)se.n, m->name, in.gpu->name, kv_dtype_name(dt), tp, db);
    rc = 0;
out:
    if (rc) fprintf(stderr, "kvcal: %s\n", e.msg);
    if (st.db) store_close(&st);
    hw_catalog_free(&hw);
    model_catalog_free(&mc);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) {
        printf("kvcal %s\n", kv_git_rev());
        return 0;
    }
    if (!strcmp(cmd, "spec")) return cmd_spec(argc, argv);
    if (!strcmp(cmd, "show")) return kvcal_cmd_show(argc - 1, argv + 1);
    if (!strcmp(cmd, "export")) return kvcal_cmd_export(argc - 1, argv + 1);
    if (!strcmp(cmd, "import")) return kvcal_cmd_import(argc - 1, argv + 1);
    if (!strcmp(cmd, "run")) return kvcal_cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "diff")) return kvcal_cmd_diff(argc - 1, argv + 1);
    if (!strcmp(cmd, "validate")) return kvcal_cmd_validate(argc - 1, argv + 1);
    fprintf(stderr, "kvcal: unknown command '%s' (spec, run, diff, show, export, import; kvcal --help)\n", cmd);
    return 2;
}
