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
};
static const OptCmd k_fid = {"kvcal fidelity",
                             "The spec roofline against each profile's measured rows (the manifests of kvcal import-profile):\n"
                             "per op family, the points compared and the median and p90 of |spec / measured - 1|, and the median\n"
                             "signed error (negative: the spec model is faster than the GPU). A markdown table on stdout.",
                             k_fid_opts, (int)KV_ARRAY_LEN(k_fid_opts), "MANIFEST...", 1, OPT_MAX_ARGS};

int kvcal_cmd_fidelity(int argc, char **argv)
{
    OptArgs a;
    int prc = kvcal_cli_begin(&k_fid, argc, argv, &a);
    if (prc >= 0) return prc;
    const char *overlay = opt_get(&a, "--hardware"), *models = opt_get(&a, "--models");
    KvErr e;
    ModelCatalog mc;
    HwCatalog hw;
    if (spec_catalogs_load(&mc, &hw, &e) != 0) return kvcal_cli_fail(&k_fid, &e);
    int rc = KVCAL_FAIL;
    if (overlay && hw_catalog_overlay_file(&hw, overlay, &e) != 0) goto out;
    if (models && model_catalog_overlay_file(&mc, models, &e) != 0) goto out;
    printf("| GPU | model | dtype | TP | source | op family | points | median \\|err\\| | p90 \\|err\\| | median signed |\n"
           "|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < a.n_pos; i++) {
        ProfileManifest m;
        FidelityRow rows[FID_FAMILIES];
        if (profile_manifest_read(a.pos[i], &m, &e) != 0 || fidelity_profile(&m, &mc, &hw, rows, &e) != 0) goto out;
        for (int f = 0; f < FID_FAMILIES; f++) {
            const FidelityRow *r = &rows[f];
            if (!r->n) continue;
            printf("| %s | %s | %s | %d | %s | %s | %zu | %.1f %% | %.1f %% | %+.1f %% |\n", r->device, r->model, r->dtype, r->tp, r->source,
                   fidelity_family_name(r->family), r->n, 100 * r->median_abs, 100 * r->p90_abs, 100 * r->median_signed);
        }
    }
    rc = kvcal_cli_flush(&k_fid);
out:
    if (rc == KVCAL_FAIL) kvcal_cli_fail(&k_fid, &e);
    hw_catalog_free(&hw);
    model_catalog_free(&mc);
    return rc;
}
