/* kvsim_main.c — the kvsim command line: list the catalogs, run one policy or compare several on
 * the same trace and seed, write summary.json + requests.csv and print the Markdown table.
 * Only this file (and kvcal_main.c) prints and exits; everything else returns a status. */
#include <cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "sim/catalog/hw.h"
#include "sim/catalog/model.h"
#include "results/plot.h"
#include "policies/policy.h"
#include "results/report.h"
#include "sim/engine/sim.h"
#include "traces/trace.h"
#include "sim/base/units.h"

const char *kv_embedded(const char *name, size_t *len);
static int apply_config_json(SimConfig *c, const char *text, const char *origin, char *policies, size_t plen,
                             char *desc, size_t dlen, KvErr *e);

static void usage(FILE *out)
{
    fprintf(out,
            "usage: kvsim COMMAND [options]\n"
            "\n"
            "commands:\n"
            "  list {policies|models|platforms|gpus|traces|scenarios}   show the catalogs\n"
            "  run --policy P [options] --out DIR             simulate one policy\n"
            "  compare --policies a,b,c|all [options] --out DIR   simulate several on the same trace and seed\n"
            "\n"
            "options (run, compare):\n"
            "  --model M          model (default Llama-2-7B)         --platform X   platform (default hcache-a100)\n"
            "  --trace T          generator or file (default sharegpt4)\n"
            "  --requests N       stop after N requests              --seed S       random seed (default 1)\n"
            "  --tp N, --pp N     parallel layout                    --costs FILE   cost store (default: spec)\n"
            "  --config FILE      JSON object of settings            --set KEY=VALUE  any setting (repeatable)\n"
            "  --scenario NAME    a published setup (kvsim list scenarios); its policies unless --policies\n"
            "  --out DIR          results directory (summary.json, requests.csv, table.md)\n"
            "  --quiet            no progress line                   --no-csv       skip requests.csv\n"
            "  --stats            print a machine-readable speed/memory line per policy on stderr\n"
            "\n"
            "settings (--set KEY=VALUE or --config):\n");
    sim_config_print_keys(out);
}

static int cmd_list(int argc, char **argv)
{
    if (argc < 3 || !strcmp(argv[2], "--help")) {
        printf("usage: kvsim list {policies|models|platforms|gpus|traces|scenarios}\n");
        return argc < 3 ? 2 : 0;
    }
    KvErr e;
    const char *what = argv[2];
    if (!strcmp(what, "policies")) {
        for (int i = 0; i < policy_count(); i++) printf("%-14s %s\n", policy_at(i)->name, policy_at(i)->summary);
        return 0;
    }
    if (!strcmp(what, "scenarios")) {
        for (int i = 0; i < kv_embedded_count(); i++) {
            const char *n = kv_embedded_name(i);
            if (strncmp(n, "configs/scenarios/", 18)) continue;
            char desc[1024] = "", pol[512] = "";
            SimConfig c;
            sim_config_defaults(&c);
            size_t len = 0;
            const char *text = kv_embedded(n, &len);
            if (apply_config_json(&c, text, n, pol, sizeof pol, desc, sizeof desc, &e) != 0) {
                fprintf(stderr, "kvsim: %s\n", e.msg);
                return 1;
            }
            printf("%-40.*s %s\n    policies: %s\n", (int)(strlen(n) - 18 - 5), n + 18, desc, pol);
        }
        return 0;
    }
    if (!strcmp(what, "traces")) {
        for (int i = 0; i < trace_generator_count(); i++)
            printf("%-12s %s\n", trace_generator_name(i), trace_generator_summary(i));
        printf("(or a file: canonical CSV, Mooncake JSONL, Vidur/Splitwise CSV)\n");
        return 0;
    }
    if (!strcmp(what, "models")) {
        ModelCatalog mc;
        if (model_catalog_load(&mc, NULL, &e) != 0) {
            fprintf(stderr, "kvsim: %s\n", e.msg);
            return 1;
        }
        printf("%-16s %5s %6s %5s %4s %5s %12s %14s %8s  %s\n", "model", "arch", "layers", "hidden", "h", "h_kv", "params",
               "KV B/token", "KV/hid", "also accepted as (Hugging Face ids)");
        for (int i = 0; i < mc.n; i++) {
            const ModelSpec *m = &mc.models[i];
            ModelLayout ly = {m, KV_DT_FP16, 1, 1};
            printf("%-16s %5s %6d %5d %4d %5d %11.2fB %14llu %8.3f  %s", m->name, m->arch == MODEL_MOE ? "moe" : "dense",
                   m->layers, m->hidden, m->heads, m->kv_heads, (double)model_params_total(m) / 1e9,
                   (unsigned long long)model_kv_bytes_per_token(&ly),
                   (double)model_kv_bytes_per_token(&ly) / (double)model_hidden_bytes_per_token(&ly), m->hf_id);
            for (int k = 0; k < m->n_aliases; k++) printf(", %s", m->aliases[k]);
            putchar('\n');
        }
        model_catalog_free(&mc);
        return 0;
    }
    HwCatalog hw;
    if (!strcmp(what, "platforms") || !strcmp(what, "gpus")) {
        if (hw_catalog_load(&hw, NULL, &e) != 0) {
            fprintf(stderr, "kvsim: %s\n", e.msg);
            return 1;
        }
        if (!strcmp(what, "gpus")) {
            for (int i = 0; i < hw.n_gpus; i++) {
                const GpuSpec *g = &hw.gpus[i];
                printf("%-12s %7.1f TFLOP/s %6.0f GB %6.0f GB/s  %s\n", g->name, g->fp16_flops / 1e12,
                       (double)g->mem_bytes / 1e9, g->mem_bw_bytes_per_s / 1e9, g->full_name);
            }
        } else {
            for (int i = 0; i < hw.n_platforms; i++) {
                const PlatformSpec *p = &hw.platforms[i];
                char ssd[96] = "no SSD", nic[96] = "no remote store";
                if (p->ssd >= 0) snprintf(ssd, sizeof ssd, "%d× %s", p->n_ssd, hw.ssds[p->ssd].name);
                if (p->nic >= 0) snprintf(nic, sizeof nic, "%s", hw.nics[p->nic].name);
                printf("%-20s %d× %-10s %-6s %-16s %-10s  %s\n", p->name, p->gpus_per_node, hw.gpus[p->gpu].name,
                       hw.links[p->link].name, ssd, nic, p->description);
            }
        }
        hw_catalog_free(&hw);
        return 0;
    }
    fprintf(stderr, "kvsim list: unknown catalog '%s' (policies, models, platforms, gpus, traces, scenarios)\n", what);
    return 2;
}

/* Apply a JSON object of settings (a --config file or a scenario). "policies" and "description"
 * are not settings: they are returned to the caller (when the pointers are given). */
static int apply_config_json(SimConfig *c, const char *text, const char *origin, char *policies, size_t plen,
                             char *desc, size_t dlen, KvErr *e)
{
    cJSON *root = cJSON_Parse(text);
    if (!root || !cJSON_IsObject(root)) {
        const char *at = cJSON_GetErrorPtr();
        int line = 1;
        if (at && root == NULL)
            for (const char *p = text; p < at && *p; p++) line += *p == '\n';
        cJSON_Delete(root);
        return kv_err(e, "%s: line %d: expected a JSON object of settings", origin, line);
    }
    int rc = 0;
    for (cJSON *it = root->child; it && rc == 0; it = it->next) {
        char val[4096];
        if (cJSON_IsString(it)) snprintf(val, sizeof val, "%s", it->valuestring);
        else if (cJSON_IsBool(it)) snprintf(val, sizeof val, "%s", cJSON_IsTrue(it) ? "true" : "false");
        else if (cJSON_IsNumber(it)) snprintf(val, sizeof val, "%.17g", it->valuedouble);
        else {
            rc = kv_err(e, "%s: \"%s\": expected a string, number or boolean", origin, it->string);
            break;
        }
        if (!strcmp(it->string, "policies")) {
            if (policies) snprintf(policies, plen, "%s", val);
            continue;
        }
        if (!strcmp(it->string, "description")) {
            if (desc) snprintf(desc, dlen, "%s", val);
            continue;
        }
        if (sim_config_set(c, it->string, val, e) != 0) rc = kv_err_prefix(e, "%s: \"%s\": ", origin, it->string);
    }
    cJSON_Delete(root);
    return rc;
}

static int load_config_file(SimConfig *c, const char *path, char *policies, size_t plen, KvErr *e)
{
    char *text = kv_read_file(path, NULL, e);
    if (!text) return -1;
    int rc = apply_config_json(c, text, path, policies, plen, NULL, 0, e);
    free(text);
    return rc;
}

/* a scenario by name (configs/scenarios/NAME.json: embedded, or under $KVSIM_CONFIG_DIR) or by path */
static int load_scenario(SimConfig *c, const char *name, char *policies, size_t plen, char *desc, size_t dlen, KvErr *e)
{
    char rel[512], origin[600];
    const char *override = strchr(name, '/') ? name : NULL;
    snprintf(rel, sizeof rel, "configs/scenarios/%s.json", name);
    char *text = kv_catalog_text(rel, override, origin, sizeof origin, e);
    if (!text) {
        char list[2048] = "";
        size_t len = 0;
        for (int i = 0; i < kv_embedded_count(); i++) {
            const char *n = kv_embedded_name(i);
            if (strncmp(n, "configs/scenarios/", 18)) continue;
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%.*s", len ? ", " : "", (int)(strlen(n) - 18 - 5), n + 18);
        }
        return kv_err(e, "unknown scenario '%s' (known: %s)", name, list);
    }
    int rc = apply_config_json(c, text, origin, policies, plen, desc, dlen, e);
    free(text);
    return rc;
}

typedef struct {
    int tty;
    double last_line;
    const char *policy;
    int printed;
} Progress;

static void progress(void *ctx, double frac, uint64_t done, int64_t sim_ns)
{
    Progress *p = ctx;
    if (p->tty) {
        if (frac >= 0) fprintf(stderr, "\r  %-12s %5.1f%%  %llu requests  %.0f s simulated   ", p->policy, 100 * frac,
                               (unsigned long long)done, (double)sim_ns / 1e9);
        else fprintf(stderr, "\r  %-12s %llu requests  %.0f s simulated   ", p->policy, (unsigned long long)done, (double)sim_ns / 1e9);
        p->printed = 1;
    } else if (p->last_line++ >= 4) { /* every ~5 s when not a terminal */
        p->last_line = 0;
        fprintf(stderr, "  %s: %llu requests, %.0f s simulated\n", p->policy, (unsigned long long)done, (double)sim_ns / 1e9);
    }
}

static int cmd_run(int argc, char **argv, int compare)
{
    SimConfig cfg;
    sim_config_defaults(&cfg);
    char policies[512] = "";
    const char *out = NULL;
    int no_csv = 0, stats = 0;
    KvErr e;
    char scen_policies[512] = "", scen_desc[1024] = "";
    /* --scenario, then --config, so that other options override them */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 2; i < argc; i++) {
            const char *opt = pass == 0 ? "--scenario" : "--config";
            if (strcmp(argv[i], opt)) continue;
            if (i + 1 >= argc) {
                fprintf(stderr, "kvsim: %s needs a value\n", opt);
                return 2;
            }
            int rc = pass == 0 ? load_scenario(&cfg, argv[i + 1], scen_policies, sizeof scen_policies, scen_desc,
                                               sizeof scen_desc, &e)
                               : load_config_file(&cfg, argv[i + 1], scen_policies, sizeof scen_policies, &e);
            if (rc != 0) {
                fprintf(stderr, "kvsim: %s\n", e.msg);
                return 1;
            }
        }
    static const struct {
        const char *opt, *key;
    } direct[] = {{"--model", "model"},     {"--platform", "platform"}, {"--trace", "trace"}, {"--requests", "requests"},
                  {"--seed", "seed"},       {"--tp", "tp"},             {"--pp", "pp"},       {"--costs", "costs"},
                  {"--replicas", "replicas"}, {"--dtype", "dtype"}};
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--quiet")) {
            cfg.quiet = 1;
            continue;
        }
        if (!strcmp(a, "--no-csv")) {
            no_csv = 1;
            continue;
        }
        if (!strcmp(a, "--stats")) {
            stats = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "kvsim: option %s needs a value (kvsim %s --help)\n", a, argv[1]);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--config") || !strcmp(a, "--scenario")) continue;
        if (!strcmp(a, "--out")) {
            out = v;
            continue;
        }
        if ((!compare && !strcmp(a, "--policy")) || (compare && !strcmp(a, "--policies"))) {
            snprintf(policies, sizeof policies, "%s", v);
            continue;
        }
        if (!strcmp(a, "--set")) {
            const char *eq = strchr(v, '=');
            if (!eq) {
                fprintf(stderr, "kvsim: --set %s: expected KEY=VALUE\n", v);
                return 2;
            }
            char key[64];
            snprintf(key, sizeof key, "%.*s", (int)(eq - v), v);
            if (sim_config_set(&cfg, key, eq + 1, &e) != 0) {
                fprintf(stderr, "kvsim: --set: %s\n", e.msg);
                return 2;
            }
            continue;
        }
        size_t k = 0;
        for (; k < KV_ARRAY_LEN(direct); k++)
            if (!strcmp(a, direct[k].opt)) break;
        if (k == KV_ARRAY_LEN(direct)) {
            fprintf(stderr, "kvsim %s: unknown option '%s' (kvsim %s --help)\n", argv[1], a, argv[1]);
            return 2;
        }
        if (sim_config_set(&cfg, direct[k].key, v, &e) != 0) {
            fprintf(stderr, "kvsim: %s: %s\n", a, e.msg);
            return 2;
        }
    }
    if (!policies[0] && compare && scen_policies[0]) snprintf(policies, sizeof policies, "%s", scen_policies);
    if (!policies[0]) snprintf(policies, sizeof policies, "%s", compare ? "recompute,kv-offload" : cfg.policy);
    if (scen_desc[0] && !cfg.quiet) fprintf(stderr, "scenario: %s\n", scen_desc);
    if (!out) {
        fprintf(stderr, "kvsim %s: --out DIR is required\n", argv[1]);
        return 2;
    }
    if (!strcmp(policies, "all")) { /* every registered policy */
        size_t len = 0;
        for (int i = 0; i < policy_count() && len < sizeof policies - 40; i++)
            len += (size_t)snprintf(policies + len, sizeof policies - len, "%s%s", i ? "," : "", policy_at(i)->name);
    }
    /* validate every policy name before running anything */
    char names[16][32];
    int np = 0;
    for (char *tok = policies; *tok && np < 16;) {
        size_t len = strcspn(tok, ",");
        snprintf(names[np], sizeof names[np], "%.*s", (int)len, tok);
        if (!policy_find(names[np], &e)) {
            fprintf(stderr, "kvsim: %s\n", e.msg);
            return 2;
        }
        np++;
        tok += len;
        if (*tok == ',') tok++;
    }
    SimWorld w;
    if (sim_world_open(&w, &cfg, &e) != 0) {
        fprintf(stderr, "kvsim: %s\n", e.msg);
        return 1;
    }
    if (kv_mkdirs(out, &e) != 0) {
        fprintf(stderr, "kvsim: %s\n", e.msg);
        sim_world_close(&w);
        return 1;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/requests.csv", out);
    ReqCsv csv;
    memset(&csv, 0, sizeof csv);
    if (!no_csv && report_csv_open(&csv, path, &e) != 0) {
        fprintf(stderr, "kvsim: %s\n", e.msg);
        sim_world_close(&w);
        return 1;
    }
    SimResult res[16];
    memset(res, 0, sizeof res);
    int rc = 0, done = 0;
    char trace_desc[1024] = "";
    for (int i = 0; i < np && rc == 0; i++) {
        csv.policy = names[i];
        Progress pg = {isatty(2), 0, names[i], 0};
        if (sim_run(&w, names[i], no_csv ? NULL : report_csv_row, &csv, cfg.quiet ? NULL : progress, &pg, &res[i], &e) != 0) {
            if (pg.printed) fputc('\n', stderr);
            fprintf(stderr, "kvsim: %s: %s\n", names[i], e.msg);
            rc = 1;
            break;
        }
        if (pg.printed) fputc('\n', stderr);
        done++;
        if (!cfg.quiet)
            fprintf(stderr, "  %-12s %llu requests, %.1f s simulated in %.2f s (%.0f× real time, %llu events)\n", names[i],
                    (unsigned long long)res[i].requests, (double)res[i].sim_end_ns / 1e9, res[i].wall_s,
                    res[i].wall_s > 0 ? (double)res[i].sim_end_ns / 1e9 / res[i].wall_s : 0,
                    (unsigned long long)res[i].events);
        if (stats) {
            struct rusage ru;
            getrusage(RUSAGE_SELF, &ru);
            /* one machine-readable line for tests/bench.sh */
            fprintf(stderr, "stats policy=%s requests=%llu events=%llu sim_s=%.3f wall_s=%.3f maxrss_kib=%ld\n", names[i],
                    (unsigned long long)res[i].requests, (unsigned long long)res[i].events,
                    (double)res[i].sim_end_ns / 1e9, res[i].wall_s, ru.ru_maxrss);
        }
    }
    if (rc == 0) {
        /* the trace description, from a fresh open (cheap) */
        TraceOptions to = {0};
        to.source = cfg.trace;
        to.format = cfg.trace_format;
        to.seed = cfg.seed;
        to.session_rate_per_s = cfg.session_rate;
        to.time_scale = cfg.time_scale > 0 ? cfg.time_scale : 1;
        to.think_ns = cfg.think_ns;
        to.max_requests = cfg.requests;
        to.max_context_tokens = cfg.max_context > 0 ? cfg.max_context : w.model->max_pos;
        TraceSource *ts = trace_open(&to, &e);
        if (ts) {
            snprintf(trace_desc, sizeof trace_desc, "%s", trace_describe(ts));
            trace_close(ts);
        }
        snprintf(path, sizeof path, "%s/summary.json", out);
        if ((!no_csv && report_csv_commit(&csv, &e) != 0) || report_summary_json(path, &w, trace_desc, res, done, &e) != 0) {
            fprintf(stderr, "kvsim: %s\n", e.msg);
            rc = 1;
        }
    } else if (!no_csv) {
        report_csv_abort(&csv);
    }
    if (rc == 0) {
        report_markdown(stdout, &w, res, done);
        snprintf(path, sizeof path, "%s/table.md", out);
        KvAtomicFile af;
        if (kv_atomic_open(&af, path, &e) == 0) {
            report_markdown(af.f, &w, res, done);
            if (kv_atomic_commit(&af, &e) != 0) rc = 1;
        } else {
            rc = 1;
        }
        if (rc == 0) {
            char title[256];
            snprintf(title, sizeof title, "TTFT: %s on %s, trace %s", w.model->name, w.platform->name, cfg.trace);
            if (plot_write_figures(out, res, done, title, cfg.slo_ttft_ns, &e) != 0) rc = 1;
        }
        if (rc) fprintf(stderr, "kvsim: %s\n", e.msg);
        else if (!cfg.quiet)
            fprintf(stderr, "results in %s/ (summary.json, %stable.md, %s)\n", out, no_csv ? "" : "requests.csv, ", plot_file_list());
    }
    for (int i = 0; i < 16; i++) sim_result_free(&res[i]);
    sim_world_close(&w);
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
        printf("kvsim %s\n", kv_git_rev());
        return 0;
    }
    if (!strcmp(cmd, "list")) return cmd_list(argc, argv);
    if (!strcmp(cmd, "run")) return cmd_run(argc, argv, 0);
    if (!strcmp(cmd, "compare")) return cmd_run(argc, argv, 1);
    fprintf(stderr, "kvsim: unknown command '%s' (list, run, compare; kvsim --help)\n", cmd);
    return 2;
}
