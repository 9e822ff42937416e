/* costmodels.c — the committed cost stores by name; see costmodels.h.
 * Complexity: loading one store imports its dump (O(dump bytes)) once per cost model read;
 * listing imports every committed dump.
 */
#include <stdlib.h>
#include <string.h>

#include "calibrate/store_io.h"
#include "sim/base/ops.h"
#include "sim/cli/costmodels.h"
#include "sim/cost/store.h"

#define COSTMODELS_DIR STORE_COMMITTED_DIR

const char *kv_embedded(const char *name, size_t *len); /* build/gen/embedded.c */

static const char *const k_kinds[] = {"measured", "spec"};

/* The embedded dump behind an entry, or NULL: kind "measured" and name N give
 * results/costmodels/measured-N.sql. */
static const char *dump_path(int i, const char **kind, char *name, size_t cap)
{
    const char *n = kv_embedded_name(i);
    size_t len = n ? strlen(n) : 0;
    if (!n || strncmp(n, COSTMODELS_DIR, strlen(COSTMODELS_DIR)) || len < 4 || strcmp(n + len - 4, ".sql")) return NULL;
    const char *base = n + strlen(COSTMODELS_DIR);
    for (size_t k = 0; k < KV_ARRAY_LEN(k_kinds); k++) {
        size_t kl = strlen(k_kinds[k]);
        if (!strncmp(base, k_kinds[k], kl) && base[kl] == '-') {
            *kind = k_kinds[k];
            snprintf(name, cap, "%.*s", (int)(len - 4 - (size_t)(base + kl + 1 - n)), base + kl + 1);
            return n;
        }
    }
    return NULL;
}

static int names_list(char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < kv_embedded_count(); i++) {
        const char *kind;
        char name[256];
        if (!dump_path(i, &kind, name, sizeof name)) continue;
        int k = snprintf(buf + len, cap - len, "%s%s:%s", len ? ", " : "", kind, name);
        if (k < 0 || (size_t)k >= cap - len) break;
        len += (size_t)k;
    }
    return 0;
}

static int load_dump(const char *path, const char *label, CostStore *s, KvErr *e)
{
    size_t n = 0;
    const char *text = kv_embedded(path, &n);
    if (!text) return kv_err(e, "%s: not compiled into this kvsim", path);
    if (store_open_memory(s, label, e) != 0) return -1;
    if (store_import_sql(s, text, path, e) != 0) {
        store_close(s);
        return -1;
    }
    return 0;
}

static int open_named(const char *costs, CostStore *s, KvErr *e)
{
    if (!store_committed_kind(costs)) return 1;
    char path[512];
    if (store_committed_dump(costs, path, sizeof path, NULL)) return load_dump(path, costs, s, e);
    char names[2048];
    names_list(names, sizeof names);
    return kv_err(e, "costs '%s': no committed cost store of that name (the committed ones: %s; kvsim list costmodels)", costs,
                  names);
}

void costmodels_install(void) { store_set_named_opener(open_named); }

/* the set of values of one column over a store's runs, in first-seen order, joined by sep */
static void add_unique(char *buf, size_t cap, const char *v, const char *sep)
{
    size_t vl = strlen(v), len = strlen(buf);
    for (const char *p = buf; (p = strstr(p, v)); p++)
        if ((p == buf || !strncmp(p - strlen(sep), sep, strlen(sep))) && (p[vl] == '\0' || !strncmp(p + vl, sep, strlen(sep))))
            return;
    snprintf(buf + len, cap - len, "%s%s", len ? sep : "", v);
}

static int describe(FILE *out, const char *kind, const char *name, CostStore *s, KvErr *e)
{
    StoreRunList rl;
    if (store_runs_all(s, 0, &rl, e) != 0) return -1;
    char gpus[256] = "", models[256] = "", tps[64] = "", sources[512] = "", catalog[512] = "";
    int measured = 0;
    for (size_t i = 0; i < rl.n; i++) measured |= strcmp(rl.v[i].backend, "spec") != 0;
    for (size_t i = 0; i < rl.n; i++) {
        const StoreRunMeta *r = &rl.v[i];
        char v[256];
        add_unique(gpus, sizeof gpus, r->device, ", ");
        snprintf(v, sizeof v, "%s %s", r->model, r->dtype);
        add_unique(models, sizeof models, v, ", ");
        snprintf(v, sizeof v, "%d", r->tp);
        add_unique(tps, sizeof tps, v, ",");
        if (measured && !strcmp(r->backend, "spec")) continue;
        const char *lic = strstr(r->notes, "(licence ");
        if (measured)
            snprintf(v, sizeof v, "%s@%s%s%.*s", r->host, r->git_rev, lic ? " " : "",
                     lic ? (int)(strcspn(lic, ")") + 1) : 0, lic ? lic : "");
        else
            snprintf(v, sizeof v, "kvcal spec (%s)", r->notes);
        add_unique(sources, sizeof sources, v, "; ");
        if (!measured) continue;
        for (int op = 0; op < OP_COUNT; op++) {
            int io = cost_op_is_io((CostOp)op);
            int64_t run = 0;
            StoreRunMeta pick;
            if (store_pick_run(s, r->device, io ? "" : r->model, r->dtype, io ? 1 : r->tp, (CostOp)op, &run, e) != 0 ||
                (run && store_get_run(s, run, &pick, e) != 0)) {
                free(rl.v);
                return -1;
            }
            if (run && !strcmp(pick.backend, "spec")) add_unique(catalog, sizeof catalog, cost_op_name((CostOp)op), " ");
        }
    }
    free(rl.v);
    fprintf(out, "%s:%s\n    backend %s; gpu %s; model %s; tp %s\n    source: %s\n    from the catalog (spec roofline, not measured): %s\n",
            kind, name, measured ? "measured" : "spec", gpus, models, tps, sources,
            measured ? (catalog[0] ? catalog : "nothing") : "every op (a spec dump)");
    return 0;
}

int costmodels_list(FILE *out, KvErr *e)
{
    for (int i = 0; i < kv_embedded_count(); i++) {
        const char *kind;
        char name[256], label[300];
        const char *path = dump_path(i, &kind, name, sizeof name);
        if (!path) continue;
        snprintf(label, sizeof label, "%s:%s", kind, name);
        CostStore s;
        if (load_dump(path, label, &s, e) != 0) return -1;
        int rc = describe(out, kind, name, &s, e);
        store_close(&s);
        if (rc != 0) return -1;
    }
    return 0;
}
