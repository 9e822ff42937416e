/* profile_cmds.c — kvcal import-profile; see profile_cmds.h. CLI code: prints. */
#include "calibrate/cli/profile_cmds.h"

#include <stdio.h>
#include <string.h>

#include "calibrate/cli/kvcal_cli.h"
#include "calibrate/fidelity.h"
#include "calibrate/import_profile.h"
#include "sim/base/opt.h"
#include "sim/cost/spec.h"
#include "sim/cost/store.h"

static const OptSpec k_import_opts[] = {
    {"--db", "FILE", OPT_REQUIRED, "the cost store to add the runs to (created if absent)"},
    {"--hardware", "FILE", 0, "hardware overlay laid over the catalog (a GPU or platform the catalog lacks)"},
    {"--models", "FILE", 0, "models overlay laid over the catalog (a model the catalog lacks)"},
};
static const OptCmd k_import = {"kvcal import-profile",
                                "Read public per-op GPU profiles (Vidur's profiling CSVs, LLMServingSim's profile bundles), each\n"
                                "named by its profile.json manifest, into FILE: one run with backend 'measured' per profile (its\n"
                                "source repository, commit, path and licence in the run's notes) and one 'spec' run, from the\n"
                                "catalog, of the ops the source does not measure (PCIe, SSD, NIC, ...). docs/fidelity.md.",
                                k_import_opts, (int)KV_ARRAY_LEN(k_import_opts), "MANIFEST...", 1, OPT_MAX_ARGS};

int kvcal_cmd_import_profile(int argc, char **argv)
{
    OptArgs a;
    int prc = kvcal_cli_begin(&k_import, argc, argv, &a);
    if (prc >= 0) return prc;
    const char *db = opt_get(&a, "--db"), *overlay = opt_get(&a, "--hardware"), *models = opt_get(&a, "--models");
    KvPathArg out[1] = {{"--db", db, 0}};
    KvPathArg in[OPT_MAX_ARGS + 1];
    int n_in = 0;
    for (int i = 0; i < a.n_pos; i++) in[n_in++] = (KvPathArg){"MANIFEST", a.pos[i], 0};
    if (overlay) in[n_in++] = (KvPathArg){"--hardware", overlay, 0};
    if (models) in[n_in++] = (KvPathArg){"--models", models, 0};
    if (kvcal_cli_paths(&k_import, in, n_in, out, 1)) return KVCAL_USAGE;
    KvErr e;
    ModelCatalog mc;
    HwCatalog hw;
    if (spec_catalogs_load(&mc, &hw, &e) != 0) return kvcal_cli_fail(&k_import, &e);
    int rc = KVCAL_FAIL;
    CostStore st = {0};
    if (overlay && hw_catalog_overlay_file(&hw, overlay, &e) != 0) goto out;
    if (models && model_catalog_overlay_file(&mc, models, &e) != 0) goto out;
    if (store_open(&st, db, STORE_OPEN_CREATE, &e) != 0) goto out;
    for (int i = 0; i < a.n_pos; i++) {
        ProfileManifest m;
        ProfileImportStats s;
        if (profile_manifest_read(a.pos[i], &m, &e) != 0 || profile_import(&st, &m, &mc, &hw, &s, &e) != 0) goto out;
        if (s.already) {
            printf("kvcal: %s: already in %s as run %lld; nothing added\n", a.pos[i], db, (long long)s.already);
            continue;
        }
        printf("kvcal: %s: run %lld: %zu measured points (%s, %s, %s, tp %d) from %s; %zu rows read, %zu skipped (%s)\n", a.pos[i],
               (long long)s.measured_run, s.measured_points, m.device, m.model, m.dtype, m.tp, m.repo, s.pp.rows, s.pp.skipped_rows,
               s.pp.skipped[0] ? s.pp.skipped : "none");
        if (s.pp.off_grid || s.pp.decode_below || s.pp.decode_beyond)
            printf("kvcal: %s: attn_prefill: %zu points off the full grid left out; attn_decode on total context: %zu below, %zu beyond "
                   "the measured context per request\n",
                   a.pos[i], s.pp.off_grid, s.pp.decode_below, s.pp.decode_beyond);
        if (s.spec_run)
            printf("kvcal: %s: run %lld: %zu spec points from the catalog for the ops the source does not measure\n", a.pos[i],
                   (long long)s.spec_run, s.spec_points);
    }
    rc = kvcal_cli_flush(&k_import);
out:
    if (rc == KVCAL_FAIL) kvcal_cli_fail(&k_import, &e);
    if (st.db) store_close(&st);
    hw_catalog_free(&hw);
    model_catalog_free(&mc);
    return rc;
}

static const OptSpec k_fid_opts[] = {
    {"--hardware", "FILE", 0, "hardware overlay laid over the catalog (a GPU the catalog lacks)"},
    {"--models", "FILE", 0, "models overlay laid over the catalog (a model the catalog lacks)"},
    {"--stack", "S", 0,
     "the spec model's stack (auto, fa2, fa3, vllm-0.19, vidur), or 'all': every stack each profile's GPU runs; "
     "adds a stack column"},
    {"--points", NULL, 0, "every compared row instead of the table: tab-separated, with the op's FLOPs and bytes "
                          "(what tools/fit_spec.py fits)"},
};
static const OptCmd k_fid = {"kvcal fidelity",
                             "The spec roofline against each profile's measured rows (the manifests of kvcal import-profile):\n"
                             "per op family, the points compared and the median and p90 of |spec / measured - 1|, and the median\n"
                             "signed error (negative: the spec model is faster than the GPU). A markdown table on stdout.",
                             k_fid_opts, (int)KV_ARRAY_LEN(k_fid_opts), "MANIFEST...", 1, OPT_MAX_ARGS};

typedef struct {
    const ProfileManifest *m;
    SpecStack stack;
} PointOut;

static int print_point(void *ctx, const FidelityPoint *p, KvErr *e)
{
    const PointOut *o = ctx;
    printf("%s\t%s\t%s\t%d\t%s\t%s\t%s\t%lld\t%lld\t%.6g\t%.6g\t%.9g\t%.9g\t%.6g\t%.9g\t%.9g\t%d\t%d\n", o->m->device, o->m->model,
           o->m->dtype, o->m->tp, spec_stack_name(o->stack), cost_op_name(p->op), fidelity_family_name(p->family), (long long)p->p1,
           (long long)p->p2, p->measured_ns, p->spec_ns, p->flops, p->bytes, p->gemm_shape, p->gpu->fp16_flops,
           p->gpu->mem_bw_bytes_per_s, p->heads, p->gpu->sm_count);
    return 0;
}

int kvcal_cmd_fidelity(int argc, char **argv)
{
    OptArgs a;
    int prc = kvcal_cli_begin(&k_fid, argc, argv, &a);
    if (prc >= 0) return prc;
    const char *overlay = opt_get(&a, "--hardware"), *models = opt_get(&a, "--models"), *stack_arg = opt_get(&a, "--stack");
    int points = opt_count(&a, "--points") > 0, all = stack_arg && !strcmp(stack_arg, "all");
    KvErr e;
    SpecStack stack = SPEC_STACK_AUTO;
    if (stack_arg && !all && spec_stack_parse(stack_arg, &stack, &e) != 0) return kvcal_cli_usage(&k_fid, "--stack: %s", e.msg);
    ModelCatalog mc;
    HwCatalog hw;
    if (spec_catalogs_load(&mc, &hw, &e) != 0) return kvcal_cli_fail(&k_fid, &e);
    int rc = KVCAL_FAIL;
    if (overlay && hw_catalog_overlay_file(&hw, overlay, &e) != 0) goto out;
    if (models && model_catalog_overlay_file(&mc, models, &e) != 0) goto out;
    /* one stack for every profile: refused before any output when a profile's GPU has no row for it */
    for (int i = 0; stack_arg && !all && i < a.n_pos; i++) {
        ProfileManifest m;
        const GpuSpec *gpu;
        if (profile_manifest_read(a.pos[i], &m, &e) != 0) goto out;
        if ((gpu = hw_find_gpu(&hw, m.device, NULL)) && spec_stack_check(gpu, stack, &e) != 0) {
            kv_err_prefix(&e, "%s: ", a.pos[i]);
            goto out;
        }
    }
    if (points)
        printf("gpu\tmodel\tdtype\ttp\tstack\top\tfamily\tp1\tp2\tmeasured_ns\tspec_ns\tflops\tbytes\tgemm_shape\tpeak_flops\tmem_bw\theads\tsm_count\n");
    else if (stack_arg)
        printf("| GPU | model | dtype | TP | source | stack | op family | points | median \\|err\\| | p90 \\|err\\| | median signed |\n"
               "|---|---|---|---|---|---|---|---|---|---|---|\n");
    else
        printf("| GPU | model | dtype | TP | source | op family | points | median \\|err\\| | p90 \\|err\\| | median signed |\n"
               "|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < a.n_pos; i++) {
        ProfileManifest m;
        if (profile_manifest_read(a.pos[i], &m, &e) != 0) goto out;
        const GpuSpec *gpu = hw_find_gpu(&hw, m.device, NULL);
        for (int s = all ? 0 : (int)stack; s <= (all ? SPEC_STACK_COUNT - 1 : (int)stack); s++) {
            /* all: the stacks the profile's GPU runs (auto included: today's default) */
            if (all && gpu && spec_stack_check(gpu, (SpecStack)s, NULL) != 0) continue;
            if (points) {
                PointOut o = {&m, (SpecStack)s};
                if (fidelity_points(&m, &mc, &hw, (SpecStack)s, print_point, &o, &e) != 0) goto out;
                continue;
            }
            FidelityRow rows[FID_FAMILIES];
            if (fidelity_profile(&m, &mc, &hw, (SpecStack)s, rows, &e) != 0) goto out;
            for (int f = 0; f < FID_FAMILIES; f++) {
                const FidelityRow *r = &rows[f];
                if (!r->n) continue;
                printf("| %s | %s | %s | %d | %s |", r->device, r->model, r->dtype, r->tp, r->source);
                if (stack_arg) printf(" %s |", spec_stack_name(r->stack));
                printf(" %s | %zu | %.1f %% | %.1f %% | %+.1f %% |\n", fidelity_family_name(r->family), r->n, 100 * r->median_abs,
                       100 * r->p90_abs, 100 * r->median_signed);
            }
        }
    }
    rc = kvcal_cli_flush(&k_fid);
out:
    if (rc == KVCAL_FAIL) kvcal_cli_fail(&k_fid, &e);
    hw_catalog_free(&hw);
    model_catalog_free(&mc);
    return rc;
}
