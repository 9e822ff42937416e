/* fuzz_config.c — libFuzzer harness: settings from JSON, as a --config file or a scenario is applied
 * (sim/cli/kvsim_main.c's apply_config_json: every key through sim_config_set), then the world they
 * describe opened (catalog lookups, layout checks, the spec cost model) and closed. */
#include <cJSON.h>

#include "sim/engine/sim.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_cstr(data, size);
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!root) return 0;
    SimConfig c;
    sim_config_defaults(&c);
    KvErr e = {{0}};
    int rc = cJSON_IsObject(root) ? 0 : -1;
    for (cJSON *it = root->child; it && rc == 0; it = it->next) {
        char val[4096];
        if (!it->string) break;
        if (cJSON_IsString(it)) snprintf(val, sizeof val, "%s", it->valuestring);
        else if (cJSON_IsBool(it)) snprintf(val, sizeof val, "%s", cJSON_IsTrue(it) ? "true" : "false");
        else if (cJSON_IsNumber(it)) snprintf(val, sizeof val, "%.17g", it->valuedouble);
        else break;
        if (!strcmp(it->string, "policies") || !strcmp(it->string, "description")) continue;
        if (!strcmp(it->string, "costs") || !strcmp(it->string, "trace")) continue; /* no files from fuzz input */
        rc = sim_config_set(&c, it->string, val, &e);
        if (rc != 0 && !e.msg[0]) abort();
    }
    cJSON_Delete(root);
    if (rc == 0) {
        c.quiet = 1;
        SimWorld w;
        if (sim_world_open(&w, &c, &e) == 0) sim_world_close(&w);
        else if (!e.msg[0]) abort();
    }
    return 0;
}
