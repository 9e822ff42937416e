/* fuzz_models.c — libFuzzer harness: the model catalog (sim/catalog/model.c) on arbitrary JSON text.
 * A catalog that parses must be fully usable: every derived quantity for every model, dtype and a
 * few layouts is computed (UBSan catches an overflowing product) and must be sane. */
#include <math.h>

#include "sim/catalog/model.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_cstr(data, size);
    ModelCatalog c;
    KvErr e = {{0}};
    if (model_catalog_parse(&c, text, "fuzz.json", &e) != 0) {
        if (!e.msg[0] || c.n != 0 || c.models != NULL) abort();
        free(text);
        return 0;
    }
    static const int tps[] = {1, 2, 8};
    for (int i = 0; i < c.n; i++) {
        const ModelSpec *m = &c.models[i];
        if (model_find(&c, m->name, &e) == NULL) abort();
        if (model_params_total(m) <= 0 || model_params_active(m) > model_params_total(m)) abort();
        for (int d = 0; d < KV_DT_COUNT; d++)
            for (size_t k = 0; k < sizeof tps / sizeof tps[0]; k++) {
                ModelLayout ly = {m, (KvDtype)d, tps[k], m->layers >= 2 ? 2 : 1};
                if (model_layout_check(&ly, &e) != 0) continue;
                (void)model_kv_bytes_per_token(&ly);
                (void)model_hidden_bytes_per_token(&ly);
                (void)model_kv_bytes_per_token_layer_gpu(&ly);
                (void)model_boundary_bytes_per_token(&ly);
                if (model_weight_bytes_per_gpu(&ly) == 0) abort();
                for (int op = 0; op < OP_COUNT; op++) {
                    double f = model_op_flops(&ly, (CostOp)op, 4096, 8192);
                    double b = model_op_bytes(&ly, (CostOp)op, 4096, 8192);
                    if (!(f >= 0) || !(b >= 0) || isinf(f) || isinf(b)) abort();
                    int64_t M, N, K;
                    (void)model_gemm_shape(&ly, (CostOp)op, 4096, &M, &N, &K);
                }
                for (int l = 0; l < m->layers && l < 4; l++)
                    if (!(model_layer_prefill_flops(&ly, l, 1000, 100000) >= 0)) abort();
                if (!(model_prefill_flops(&ly, 1000, 100000) >= 0)) abort();
            }
    }
    model_catalog_free(&c);
    free(text);
    return 0;
}
