/* kvcal_main.c — the kvcal command line: measure cost curves on this machine (run: cpu or cuda
 * backend), derive them from datasheets (spec), compare runs (diff), show, export and import stores.
 * Only the command-line code (calibrate/cli/, sim/cli/) prints; the commands' work lives in the
 * library (calibrate/, sim/cost/spec.c, sim/cost/store.c); each sub-command parses its options with
 * sim/base/opt.h and exits as kvcal_cli.h says. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "calibrate/cli/calib_cmds.h"
#include "calibrate/cli/kvcal_cli.h"
#include "calibrate/cli/execute_cmd.h"
#include "calibrate/cli/profile_cmds.h"
#include "calibrate/cli/validate_cmd.h"
#include "sim/base/opt.h"
#include "sim/catalog/hw.h"
#include "sim/catalog/model.h"
#include "sim/cost/spec.h"
#include "sim/cost/store.h"
#include "calibrate/cli/store_cmds.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: kvcal COMMAND [options]\n"
                 "\n"
                 "commands:\n"
                 "  spec      fill a cost store with roofline curves derived from the catalogs (no GPU needed);\n"
                 "            spec --explain: the fitted efficiency curves and their sources\n"
                 "  run       measure cost curves on this machine (cpu or cuda backend) into a cost store\n"
                 "  diff      compare two runs' medians, of one store or across files (.db, .sql, .csv; exit 1 on drift)\n"
                 "  show      a store's runs, or one run's curves\n"
                 "  export    a store or one run as csv, json or a deterministic sql dump\n"
                 "  import    add the runs of a sql dump or csv export to a store\n"
                 "  import-profile  add public measured profiles (Vidur, LLMServingSim) to a store as measured runs\n"
                 "  fidelity  the spec model's error against public measured profiles, per GPU and op family\n"
                 "  validate  a real restoration on this CPU against the cost model's prediction\n"
                 "\n"
                 "kvcal COMMAND --help lists every option of a command.\n"
                 "Exit status: 0 success, 1 failure, 2 usage error (unknown, missing or repeated option, bad value).\n"
                 "Cost models are kept in the repository as SQL dumps (export --format sql): diffable text.\n");
}

/* SIGINT/SIGTERM/SIGHUP: remove the temp files still open (export --out, execute.json), then die of
 * the signal; a store's open transaction is rolled back by its next opener (its journal). kvcal run
 * installs its own handler for the run (it stops between points) and puts this one back after. */
static void on_stop_signal(int sig)
{
    kv_atomic_cleanup_on_signal();
    signal(sig, SIG_DFL);
    raise(sig);
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
        fprintf(stderr, "kvcal spec: %s\n", e.msg);
        return KVCAL_FAIL;
    }
    printf("GEMM efficiency (fraction of dense fp16 peak) by M; attention fraction by new tokens; HBM x%.2f\n",
           spec_mem_efficiency(NULL));
    printf("%-12s", "GPU");
    static const int64_t ms[] = {16, 64, 128, 256, 512, 1024, 2048, 4096, 16384};
    for (size_t i = 0; i < KV_ARRAY_LEN(ms); i++) printf(" M=%-6lld", (long long)ms[i]);
    printf(" fa2@512  fa2@8K   fa3@8K\n");
    for (int g = 0; g < hw.n_gpus; g++) {
        if (gpu_name && strcasecmp(gpu_name, hw.gpus[g].name)) continue;
        printf("%-12s", hw.gpus[g].name);
        for (size_t i = 0; i < KV_ARRAY_LEN(ms); i++) printf(" %-8.3f", spec_gemm_efficiency(&hw.gpus[g], ms[i]));
        printf(" %-8.3f %-8.3f ", spec_attn_efficiency(&hw.gpus[g], SPEC_STACK_FA2, 512),
               spec_attn_efficiency(&hw.gpus[g], SPEC_STACK_FA2, 8192));
        if (spec_stack_resolve(&hw.gpus[g], SPEC_STACK_AUTO) == SPEC_STACK_FA3)
            printf("%-8.3f\n", spec_attn_efficiency(&hw.gpus[g], SPEC_STACK_FA3, 8192));
        else
            printf("%-8s\n", "-");
    }
    printf("\nPer-GPU fractions (mamf: max achievable matmul; fa2/fa3: FlashAttention-2/-3 at long sequences):\n");
    for (int g = 0; g < hw.n_gpus; g++) {
        if (gpu_name && strcasecmp(gpu_name, hw.gpus[g].name)) continue;
        const SpecGpuRow *r = spec_gpu_row_for(&hw.gpus[g]);
        char fa3[16] = "-";
        if (r->attn_fa3 > 0) snprintf(fa3, sizeof fa3, "%.2f", r->attn_fa3);
        printf("  %-12s mamf %.3f  fa2 %.2f  fa3 %-4s  [row \"%s\"] source: %s\n", hw.gpus[g].name, r->mamf, r->attn_fa2,
               fa3, r->match[0] ? r->match : "default", r->source);
    }
    printf("\nConstants shared by every GPU:\n");
    for (int i = 0; spec_constant(i); i++) {
        const SpecConstant *c = spec_constant(i);
        printf("  %s: %g %s\n      source: %s\n", c->name, c->value, c->unit, c->source);
    }
    printf("\nFitted stacks (--stack vllm-0.19, vidur; each on the GPUs its source measured only; the formulas: sim/cost/spec.h\n"
           "SpecFitRow). '-': not measured by the source (that attention op costs as under fa2).\n");
    for (int i = 0; spec_fit_row(i); i++) {
        const SpecFitRow *r = spec_fit_row(i);
        if (gpu_name && strcasecmp(gpu_name, r->gpu)) continue;
        printf("  %s on %s:\n    GEMM ceiling %.3f of peak; HBM fractions: small-M GEMMs %.3f, norm %.3f, activation %.3f, RoPE %.3f;"
               " minimum kernel %.0f ns\n",
               spec_stack_name(r->stack), r->gpu, r->gemm_ceiling, r->gemm_bw, r->norm_bw, r->act_bw, r->rope_bw, r->min_kernel_ns);
        if (r->decode_bw > 0)
            printf("    decode attention: %.0f ns per layer + %.1f ns per request + KV read at %.3f of HBM\n", r->decode_floor_ns,
                   r->decode_seq_ns, r->decode_bw);
        else
            printf("    decode attention: -\n");
        if (r->prefill_frac > 0)
            printf("    prefill attention: %.0f ns per layer + max(FLOPs at %.3f of peak, bytes, %.2f ns per key per thread-block wave)\n",
                   r->prefill_floor_ns, r->prefill_frac, r->prefill_key_ns);
        else
            printf("    prefill attention: -\n");
        printf("    source: %s\n    %s\n", r->source, r->fit);
    }
    printf("\nThe roofline: t = max(flops / (peak x eff), bytes / (HBM x %.2f), minimum kernel time); the model is described\n"
           "in docs/model.md (\"The spec cost model\").\n",
           spec_mem_efficiency(NULL));
    hw_catalog_free(&hw);
    return 0;
}

static const OptSpec k_spec_opts[] = {
    {"--gpu", "G", 0, "GPU from the catalog (kvsim list gpus); --gpu or --platform is required"},
    {"--platform", "P", 0, "platform from the catalog (its GPU, link, SSDs; kvsim list platforms)"},
    {"--model", "M", 0, "model from the catalog (required unless --explain)"},
    {"--db", "FILE", 0, "the cost store to fill (created if absent; required unless --explain)"},
    {"--tp", "N", 0, "tensor-parallel GPUs (default 1)"},
    {"--pp", "N", 0, "pipeline stages (default 1)"},
    {"--dtype", "D", 0, "fp16, bf16, fp8, ... (default fp16)"},
    {"--stack", "S", 0,
     "kernels: auto (FlashAttention-3 on Hopper, else 2), fa2 (vLLM 0.6), fa3 (Hopper); fitted to measured profiles: "
     "vllm-0.19, vidur (their GPUs only)"},
    {"--explain", NULL, 0, "print the fitted efficiency curves (of --gpu, else every GPU) and their sources"},
};
static const OptCmd k_spec = {"kvcal spec",
                              "Fill FILE with roofline cost curves derived from the catalogs (no GPU needed), as one run.",
                              k_spec_opts, (int)KV_ARRAY_LEN(k_spec_opts), NULL, 0, 0};

static int cmd_spec(int argc, char **argv)
{
    OptArgs a;
    int prc = kvcal_cli_begin(&k_spec, argc, argv, &a);
    if (prc >= 0) return prc;
    const char *gpu = opt_get(&a, "--gpu"), *model = opt_get(&a, "--model"), *platform = opt_get(&a, "--platform");
    const char *db = opt_get(&a, "--db"), *dtype = opt_get(&a, "--dtype") ? opt_get(&a, "--dtype") : "fp16";
    if (opt_count(&a, "--explain")) return explain(gpu);
    if (!gpu && !platform) return kvcal_cli_usage(&k_spec, "--gpu or --platform is required");
    if (!model || !db) return kvcal_cli_usage(&k_spec, "%s is required (unless --explain)", !model ? "--model" : "--db");
    int64_t tp, pp;
    if (kvcal_cli_int(&k_spec, &a, "--tp", 1, 1024, 1, &tp) || kvcal_cli_int(&k_spec, &a, "--pp", 1, 1024, 1, &pp))
        return KVCAL_USAGE;
    KvDtype dt;
    KvErr e;
    if (kv_dtype_parse(dtype, &dt, &e) != 0) return kvcal_cli_usage(&k_spec, "--dtype: %s", e.msg);
    ModelCatalog mc;
    HwCatalog hw;
    if (spec_catalogs_load(&mc, &hw, &e) != 0) return kvcal_cli_fail(&k_spec, &e);
    int rc = 1;
    CostStore st = {0};
    const ModelSpec *m = model_find(&mc, model, &e);
    const PlatformSpec *p = NULL;
    const GpuSpec *g = NULL;
    if (!m) goto out;
    if (platform && !(p = hw_find_platform(&hw, platform, &e))) goto out;
    if (gpu && !(g = hw_find_gpu(&hw, gpu, &e))) goto out;
    ModelLayout ly = {m, dt, (int)tp, (int)pp};
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
    const char *stack = opt_get(&a, "--stack") ? opt_get(&a, "--stack") : "auto";
    if (spec_stack_parse(stack, &in.stack, &e) != 0) {
        rc = kvcal_cli_usage(&k_spec, "--stack: %s", e.msg);
        goto done;
    }
    if (spec_stack_check(in.gpu, in.stack, &e) != 0) goto out;
    in.stack = spec_stack_resolve(in.gpu, in.stack);
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
    meta.tp = (int)tp;
    snprintf(meta.notes, sizeof meta.notes, "spec roofline; platform %s; attention %s", p ? p->name : "(none: GPU's host link only)",
             spec_stack_name(in.stack));
    if (store_begin_run(&st, &meta, &e) != 0) goto out;
    StoreEmit se = {&st, meta.id, 0};
    if (spec_generate(&in, emit_to_store, &se, &e) != 0) {
        KvErr e2;
        store_end_run(&st, meta.id, 0, &e2);
        goto out;
    }
    if (store_end_run(&st, meta.id, 1, &e) != 0) goto out;
    printf("kvcal: run %lld: %llu spec points for %s on %s (%s, tp %d) in %s\n", (long long)meta.id,
           (unsigned long long)se.n, m->name, in.gpu->name, kv_dtype_name(dt), (int)tp, db);
    rc = 0;
out:
    if (rc) kvcal_cli_fail(&k_spec, &e);
done:
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
    kv_install_stop_handlers(on_stop_signal); /* for every command: none leaves a temp file when interrupted */
    if (!strcmp(cmd, "spec")) return cmd_spec(argc - 1, argv + 1);
    if (!strcmp(cmd, "show")) return kvcal_cmd_show(argc - 1, argv + 1);
    if (!strcmp(cmd, "export")) return kvcal_cmd_export(argc - 1, argv + 1);
    if (!strcmp(cmd, "import")) return kvcal_cmd_import(argc - 1, argv + 1);
    if (!strcmp(cmd, "import-profile")) return kvcal_cmd_import_profile(argc - 1, argv + 1);
    if (!strcmp(cmd, "fidelity")) return kvcal_cmd_fidelity(argc - 1, argv + 1);
    if (!strcmp(cmd, "run")) return kvcal_cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "diff")) return kvcal_cmd_diff(argc - 1, argv + 1);
    if (!strcmp(cmd, "validate")) return kvcal_cmd_validate(argc - 1, argv + 1);
    if (!strcmp(cmd, "execute")) return kvcal_cmd_execute(argc - 1, argv + 1);
    fprintf(stderr, "kvcal: unknown command '%s' (spec, run, diff, show, export, import, import-profile, fidelity, validate, execute; kvcal --help)\n", cmd);
    return 2;
}
