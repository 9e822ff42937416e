/* fuzz_sweep.c — libFuzzer harness: a sweep spec (kvsim sweep --spec FILE, sim/engine/sweepspec.h)
 * parsed with the library's own checker (no I/O: scenarios are only named; settings that name
 * files — trace, costs, the catalog overlays — are refused here, so no input makes the harness
 * read a file), then, when it holds at most 4096 points, enumerated and every point's settings
 * applied to a configuration as kvsim sweep's workers apply them (sim_config_apply_json).
 * The input may carry --set lists after the JSON: each line after the first NUL byte is one
 * KEY=V1,V2,... list applied with sweep_spec_set, as kvsim sweep applies --set after --spec. */
#include <cJSON.h>

#include "sim/engine/sim.h"
#include "sim/engine/sweepspec.h"
#include "tests/fuzz/fuzz_common.h"

static int no_files(void *ctx, const char *key, const char *value, const char *where, KvErr *e)
{
    if (!strcmp(key, "trace") || !strcmp(key, "costs") || !strcmp(key, "hardware_overlay") || !strcmp(key, "models_overlay"))
        return kv_err(e, "%s: names a file (not read by the harness)", where);
    return sweep_spec_check_default(ctx, key, value, where, e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_cstr(data, size);
    SweepSpec s;
    sweep_spec_init(&s);
    s.check = no_files;
    KvErr e = {{0}};
    int rc = sweep_spec_parse(&s, text, "fuzz.json", &e);
    if (rc != 0 && !e.msg[0]) abort();
    /* the --set lists: NUL-separated after the JSON text */
    size_t off = strlen(text) + 1;
    while (rc == 0 && off < size) {
        char *line = text + off; /* text holds every byte of the input, NULs included */
        size_t len = strlen(line);
        if (len) rc = sweep_spec_set(&s, line, &e);
        if (rc != 0 && !e.msg[0]) abort();
        off += len + 1;
    }
    double total = 1;
    for (int a = 0; a < s.n_axes; a++) {
        if (s.axes[a].n < 1) abort(); /* an axis always has a value */
        total *= s.axes[a].n;
    }
    if (rc == 0 && total <= 4096) {
        cJSON **pts = NULL;
        int n = 0;
        if (sweep_points(&s, &pts, &n, &e) != 0) {
            if (!e.msg[0]) abort();
        } else {
            if (n != (int)total) abort();
            for (int i = 0; i < n; i++) {
                if (cJSON_GetArraySize(pts[i]) != cJSON_GetArraySize(s.base) + s.n_axes) abort();
                SimConfig c;
                sim_config_defaults(&c);
                char pol[600] = "";
                SimJsonOut out = {pol, sizeof pol, NULL, 0, NULL, 0};
                /* a scenario is a file to load: left out, as the checker left it unchecked */
                cJSON_DeleteItemFromObjectCaseSensitive(pts[i], "scenario");
                if (sim_config_apply_json(&c, pts[i], "point", &out, &e) != 0) {
                    /* every value passed its own parser; only combinations may still be refused */
                    if (!e.msg[0]) abort();
                }
            }
        }
        sweep_points_free(pts, n);
    }
    sweep_spec_free(&s);
    free(text);
    return 0;
}
