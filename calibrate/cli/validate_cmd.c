/* validate_cmd.c — kvcal validate: the command line of rung 3 of the validation ladder
 * (calibrate/validate.h): options, the --max-error check and the printed report.
 *
 * Responsible for: parsing and checking the options, loading the catalog and the cost model,
 * printing the measured/predicted table, the per-op split of recompute and the verdict.
 * Not responsible for: measuring or predicting (validate.c).
 * CLI code: prints; exit codes as in kvcal_cli.h (1 also when a ratio is outside --max-error).
 */
#include "calibrate/cli/validate_cmd.h"

#include <math.h>
#include <stdio.h>

#include "calibrate/calib_diff.h"
#include "calibrate/cli/kvcal_cli.h"
#include "calibrate/validate.h"
#include "kernels/cpu.h"
#include "sim/base/opt.h"

static const OptSpec k_validate_opts[] = {
    {"--db", "COSTS", OPT_REQUIRED, "the cost store, filled by kvcal run --backend cpu"},
    {"--model", "M", OPT_REQUIRED, "a dense model from the catalog (kvsim list models)"},
    {"--layers", "K", 0, "layers restored (default 2)"},
    {"--tokens", "N", 0, "history tokens (default 256: inside the quick calibration grid)"},
    {"--dir", "SCRATCH", 0, "directory for the KV and hidden-state files (default: a fresh one under $TMPDIR)"},
    {"--device-name", "NAME", 0, "the device of the cost model in COSTS (default cpu)"},
    {"--reps", "R", 0, "timed repetitions after a warm-up (default 3)"},
    {"--max-error", "E", 0, "exit 1 when a ratio measured/predicted is outside [1/(1+E), 1+E] (50% or 0.5)"},
};
static const OptCmd k_validate = {
    "kvcal validate",
    "Runs a real restoration of K layers x N history tokens of model M on this CPU -- recompute, KV load\n"
    "from a file, hidden-state load + K/V projection -- and compares the measured times (median of R\n"
    "after a warm-up) with the prediction of the cost model (device, M, fp16, tp 1) in COSTS.\n"
    "Exit: 0 done (and within --max-error), 1 a ratio outside --max-error or a failure, 2 usage error.",
    k_validate_opts, (int)KV_ARRAY_LEN(k_validate_opts), NULL, 0, 0};

int kvcal_cmd_validate(int argc, char **argv)
{
    OptArgs a;
    int prc = kvcal_cli_begin(&k_validate, argc, argv, &a);
    if (prc >= 0) return prc;
    const char *device = opt_get(&a, "--device-name") ? opt_get(&a, "--device-name") : "cpu";
    int64_t layers, tokens, reps;
    if (kvcal_cli_int(&k_validate, &a, "--layers", 1, 4096, 2, &layers) ||
        kvcal_cli_int(&k_validate, &a, "--tokens", 1, 1 << 20, 256, &tokens) ||
        kvcal_cli_int(&k_validate, &a, "--reps", 1, 1000, 3, &reps))
        return KVCAL_USAGE;
    KvErr e = {{0}};
    double tol = -1;
    const char *max_err = opt_get(&a, "--max-error");
    if (max_err && calib_parse_tolerance(max_err, &tol, &e) != 0) return kvcal_cli_usage(&k_validate, "--max-error: %s", e.msg);
    ModelCatalog mc;
    if (model_catalog_load(&mc, NULL, &e) != 0) return kvcal_cli_fail(&k_validate, &e);
    const ModelSpec *m = model_find(&mc, opt_get(&a, "--model"), &e);
    if (!m) {
        model_catalog_free(&mc);
        return kvcal_cli_fail(&k_validate, &e);
    }
    CostModel cm;
    if (validate_load_cost_model(&cm, opt_get(&a, "--db"), device, m->name, &e) != 0) {
        model_catalog_free(&mc);
        return kvcal_cli_fail(&k_validate, &e);
    }
    ValidateOptions o = {.model = m, .layers = (int)layers, .tokens = tokens, .scratch_dir = opt_get(&a, "--dir"), .reps = (int)reps};
    ValidateResult r;
    int rc = validate_run(&cm, &o, &r, &e);
    if (rc != 0) {
        cost_model_free(&cm);
        model_catalog_free(&mc);
        return kvcal_cli_fail(&k_validate, &e);
    }
    printf("kvcal validate: %s, %d layers x %lld tokens, fp32 on this CPU (%d attention threads, gemm %s)\n",
           m->name, r.layers, (long long)r.tokens, kcpu_threads(), kcpu_gemm_backend());
    printf("cost model: %s, device '%s'\n", cm.source, cm.device);
    printf("files: KV %.1f MiB, hidden states %.1f MiB; %s\n", (double)r.kv_bytes / (1 << 20),
           (double)r.hidden_bytes / (1 << 20), r.io_note);
    printf("%s\n", r.read_source);
    printf("\n%-16s %12s %12s %8s\n", "what", "measured ms", "predicted ms", "ratio");
    int bad = 0;
    for (int w = 0; w < VALIDATE_N_ROWS; w++) {
        double ms = r.measured_ns[w] / 1e6, pm = r.pred.ns[w] / 1e6;
        int out_of = w < VALIDATE_N_MAIN && tol >= 0 && !validate_ratio_ok(r.measured_ns[w], r.pred.ns[w], tol);
        bad |= out_of;
        printf("%-16s %12.2f %12.2f %8.3f%s\n", validate_what_name((ValidateWhat)w), ms, pm,
               pm > 0 ? ms / pm : NAN, out_of ? "  OUT OF TOLERANCE" : "");
    }
    printf("(ratio = measured / predicted; recompute predicted = %d x %.2f ms per layer)\n", r.layers,
           r.pred.layer_ns / 1e6);
    printf("\nrecompute by op (%d layers)\n", r.layers);
    static const CostOp parts[] = {OP_GEMM_QKV, OP_GEMM_O,   OP_GEMM_FFN_UP, OP_GEMM_FFN_DOWN,
                                   OP_ATTN_PREFILL, OP_NORM, OP_ACT,         OP_ROPE};
    for (size_t i = 0; i < KV_ARRAY_LEN(parts); i++) {
        CostOp op = parts[i];
        if (op == OP_ROPE && m->pos != POS_ROPE) continue;
        double ms = r.recompute_op_ns[op] / 1e6, pm = r.layers * r.pred.layer_op_ns[op] / 1e6;
        printf("  %-14s %12.2f %12.2f %8.3f\n", cost_op_name(op), ms, pm, pm > 0 ? ms / pm : NAN);
    }
    printf("  %-14s %12.2f %12s %8s\n", "split+residual", r.recompute_other_ns / 1e6, "(none)", "-");
    if (r.pred.extrapolations)
        printf("warning: %llu of the prediction's lookups extrapolated beyond the calibrated points\n",
               (unsigned long long)r.pred.extrapolations);
    if (tol >= 0)
        printf("max error %.0f%%: %s\n", tol * 100, bad ? "FAILED" : "ok");
    cost_model_free(&cm);
    model_catalog_free(&mc);
    if (kvcal_cli_flush(&k_validate) != 0) return KVCAL_FAIL;
    return bad ? KVCAL_FAIL : KVCAL_OK;
}
