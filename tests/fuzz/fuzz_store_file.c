/* fuzz_store_file.c — libFuzzer harness: arbitrary bytes as a cost store file opened by the cost
 * reader (cost_model_load_db, sim/cost/cost.h), the way `--costs FILE` opens one. A model that loads
 * must answer lookups for every op it has at small, typical and huge parameters. */
#include <math.h>

#include "sim/cost/cost.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("store_file", ".db", data, size);
    CostModel cm;
    KvErr e = {{0}};
    static const struct {
        const char *device, *model, *dtype;
        int tp;
    } keys[] = {{"NVIDIA H200", "llama-3-8b", "bf16", 1}, {"H100-SXM", "llama-3-8b", "bf16", 2},
                {"A100-40GB", "Llama-2-7B", "fp16", 1}};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        if (cost_model_load_db(&cm, path, keys[k].device, keys[k].model, keys[k].dtype, keys[k].tp, &e) != 0) {
            if (!e.msg[0]) abort();
            continue;
        }
        static const int64_t ps[] = {0, 1, 7, 4096, 1 << 20, (int64_t)1 << 40};
        for (int op = 0; op < OP_COUNT; op++) {
            if (!cost_has(&cm, (CostOp)op)) continue;
            for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
                double ns = cost_lookup_ns(&cm, (CostOp)op, ps[i], ps[(i + 2) % 6], 1);
                if (isnan(ns)) abort();
            }
        }
        (void)cost_extrapolations_total(&cm);
        cost_model_free(&cm);
    }
    return 0;
}
