/* kvsim_main.c — the kvsim command line: list the catalogs, run one policy or compare several on
 * the same trace and seed, write summary.json + requests.csv and print the Markdown table.
 * Only this file (and calibrate/cli/) prints and exits; everything else returns a status.
 * Every command parses its options with sim/base/opt.h from the tables below (so --help lists
 * exactly what is accepted). Exit codes: 0 success; 1 failure (files, stores, names looked up in
 * the model/hardware catalogs or scenarios, a trace that cannot be read, the run); 2 usage error
 * (unknown, missing or repeated option, a value of the wrong form, an unknown policy or setting). */
#include <cJSON.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/cli/experiment.h"
#include "sim/cli/reproduce.h"
#include "sim/catalog/hw.h"
#include "sim/catalog/model.h"
#include "results/plot.h"
#include "policies/policy.h"
#include "results/report.h"
#include "results/resultset.h"
#include "sim/engine/sim.h"
#include "traces/trace.h"
#include "sim/base/opt.h"
#include "sim/base/units.h"
#include "sim/cli/check.h"
#include "sim/cli/costmodels.h"
#include "sim/cli/map.h"
#include "sim/cli/plan.h"
#include "sim/cli/plot_cmd.h"
#include "sim/cli/report_cmd.h"
#include "sim/cli/point.h"
#include "sim/cli/procpool.h"
#include "sim/cli/sweep.h"

const char *kv_embedded(const char *name, size_t *len);
static int apply_config_json(SimConfig *c, const char *text, const char *origin, char *policies, size_t plen,
                             char *desc, size_t dlen, KvErr *e);

/* the catalogs `kvsim list` shows, the memory devices' sections (sim/base/memdev.h) among them */
#define MEMDEV_KEY_COMMA_(ID, KEY, WHAT, WHATS) KEY ", "
#define MEMDEV_KEY_BAR_(ID, KEY, WHAT, WHATS) KEY "|"
#define HW_PARTS "platforms, gpus, ssds, " KV_MEMDEV_ROWS(MEMDEV_KEY_COMMA_) "nics, links"
#define LIST_CATALOGS "policies, models, " HW_PARTS ", traces, scenarios, costmodels"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: kvsim COMMAND [options]\n"
            "\n"
            "commands:\n"
            "  list CATALOG    show a catalog: " LIST_CATALOGS "\n"
            "  run             simulate one policy (--policy P --out DIR; --dry-run: only the resolved configuration)\n"
            "  compare         simulate several policies on the same trace and seed (--out DIR)\n"
            "  sweep           run a grid of settings in parallel into one SQLite results database (--db FILE)\n"
            "  plan            the cheapest configuration meeting an SLO, or the highest sustainable load, per policy\n"
            "  map             which restoration is fastest by history length × one resource, with margins, flip odds, break-evens\n"
            "  check           re-run the canonical scenarios and compare them with results/reference/\n"
            "  reproduce       run the published claims of configs/claims/ and judge them (met / missed / skipped)\n"
            "  plot            draw figures again from result files: a run's directory (--in) or a sweep (--sweep)\n"
            "  report          report.html of a result directory (run, compare, sweep figures, plan, map): one page for a browser\n"
            "\n"
            "kvsim COMMAND --help lists every option of a command (run and compare: also every setting).\n"
            "Exit status: 0 success, 1 failure, 2 usage error (unknown, missing or repeated option, bad value).\n");
}

/* ---- the option tables: the parser and --help both read them ---- */

static char g_policy_help[1024]; /* "the restoration policy: recompute, ..." (filled by main) */
static char g_policies_help[1200];

#define KVSIM_SIM_OPTS                                                                                              \
    {"--out", "DIR", 0, "results directory (summary.json, requests.csv, table.md, ttft_cdf.svg); required unless --dry-run"}, \
        {"--dry-run", NULL, 0, "print the resolved configuration, weights per GPU, the KV pool and whether it fits; simulate nothing"}, \
        {"--hardware", "FILE", 0, "hardware overlay: GPUs, links, SSDs, NICs, platforms added or replaced by name"},  \
        {"--models", "FILE", 0, "models overlay: models added or replaced by name"},                                 \
        {"--model", "M", 0, "model from the catalog (kvsim list models; default Llama-2-7B)"},                      \
        {"--platform", "X", 0, "platform from the catalog (kvsim list platforms; default hcache-a100)"},            \
        {"--trace", "T", 0, "generator (sharegpt4, leval, swebench, shared-prefix, multiturn) or trace file (default sharegpt4)"},            \
        {"--requests", "N", 0, "stop after N requests (default: the trace's, 1000 for generators)"},                \
        {"--seed", "S", 0, "random seed (default 1)"}, {"--tp", "N", 0, "tensor-parallel GPUs (default 1)"},        \
        {"--pp", "N", 0, "pipeline stages (default 1)"}, {"--replicas", "N", 0, "model replicas (default 1)"},      \
        {"--dtype", "D", 0, "weights/KV dtype: fp16, bf16, fp8, ... (default fp16)"},                              \
        {"--costs", "FILE", 0, "cost store file, or measured:NAME / spec:NAME for a committed one (kvsim list costmodels; default: spec, the roofline backend)"},                                 \
        {"--scenario", "NAME", 0, "a published setup (kvsim list scenarios), applied first"},                       \
        {"--config", "FILE", 0, "JSON object of settings, applied after --scenario, before the other options"},     \
        {"--set", "KEY=VALUE", OPT_REPEAT, "any setting (listed below); options apply in command-line order"},      \
        {"--quiet", NULL, 0, "no progress lines"}, {"--no-csv", NULL, 0, "skip requests.csv"},                     \
        {"--stats", NULL, 0, "print a machine-readable speed/memory line per policy on stderr"},                  \
        {"--timeline", "REQ|slowest", 0, "record one request's restoration (layers × time, compute vs IO): timeline.csv, timeline.svg"}, \
        {"--trace-out", "FILE", 0, "write a Chrome/Perfetto trace (JSON) of iterations, transfers and queue depth to FILE"}, \
        {"--trace-max-events", "N", 0, "the trace's event cap, shared by the runs (default 1M; the rest are counted)"}, \
        {"--util-window", "DUR", 0, "utilisation.csv's window (e.g. 100ms; default: the run cut into 200-400 windows)"}

static const OptSpec k_run_opts[] = {{"--policy", "P", OPT_REQUIRED, g_policy_help}, KVSIM_SIM_OPTS, EXPERIMENT_OPTS,
                                     {"--emit-schedule", "FILE", 0, "write what the engine decided, iteration by iteration and unit by unit, as JSON lines (docs/formats.md \"Schedule\"; kvcal execute replays it); not with --seeds"}};
static const OptSpec k_compare_opts[] = {{"--policies", "a,b,c|all", 0, g_policies_help}, KVSIM_SIM_OPTS, EXPERIMENT_OPTS,
                                         EXPERIMENT_COMPARE_OPTS};
static const OptCmd k_run = {"kvsim run", "Simulate one restoration policy; write summary.json, requests.csv, table.md "
                                          "and ttft_cdf.svg to DIR and print the table.",
                             k_run_opts, (int)KV_ARRAY_LEN(k_run_opts), NULL, 0, 0};
static const OptCmd k_compare = {"kvsim compare",
                                 "Simulate several policies on the same trace and seed; write the results of all of "
                                 "them to DIR and print one table.",
                                 k_compare_opts, (int)KV_ARRAY_LEN(k_compare_opts), NULL, 0, 0};
static const OptSpec k_list_opts[] = {
    {"--hardware", "FILE", 0, "hardware overlay laid over the catalog (" HW_PARTS ")"},
    {"--models", "FILE", 0, "models overlay laid over the catalog (models)"}};
static const OptCmd k_list = {"kvsim list", "Show a catalog: policies, models, " HW_PARTS ", traces, scenarios or costmodels (the committed cost stores, for --costs measured:NAME or spec:NAME).",
                              k_list_opts, (int)KV_ARRAY_LEN(k_list_opts),
                              "{policies|models|platforms|gpus|ssds|" KV_MEMDEV_ROWS(MEMDEV_KEY_BAR_) "nics|links|traces|scenarios|costmodels}", 1, 1};

static void fill_policy_help(void)
{
    size_t n = (size_t)snprintf(g_policy_help, sizeof g_policy_help, "the restoration policy:");
    for (int i = 0; i < policy_count() && n < sizeof g_policy_help; i++)
        n += (size_t)snprintf(g_policy_help + n, sizeof g_policy_help - n, "%s %s", i ? "," : "", policy_at(i)->name);
    snprintf(g_policies_help, sizeof g_policies_help,
             "comma-separated policies or all (default: the scenario's or --config's, else recompute,kv-offload); %s",
             g_policy_help + strlen("the restoration "));
}

/* Parse a command's options: 0 to go on; else the exit code (0 after --help, 2 after a usage error). */
static int parse_or_exit(const OptCmd *c, int argc, char **argv, OptArgs *a, int settings_help)
{
    int begin = opt_begin(c, argc, argv, a);
    if (begin != 0) return begin;
    if (settings_help) {
        printf("\nsettings (--set KEY=VALUE, or keys of a --config JSON object):\n");
        sim_config_print_keys(stdout);
    }
    return 0;
}

static int usage_error(const OptCmd *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage_error(const OptCmd *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = opt_vusage_error(c, stderr, fmt, ap);
    va_end(ap);
    return rc;
}

static int cmd_list(int argc, char **argv)
{
    OptArgs a;
    int rc = parse_or_exit(&k_list, argc, argv, &a, 0);
    if (rc >= 0) return rc;
    KvErr e;
    const char *what = a.pos[0];
    if (!strcmp(what, "policies")) {
        for (int i = 0; i < policy_count(); i++) {
            printf("%-14s %s\n", policy_at(i)->name, policy_at(i)->summary);
            sim_config_print_knobs(stdout, policy_at(i), "    knob ");
        }
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
            char conc[32];
            snprintf(conc, sizeof conc, "%d", c.concurrency);
            cJSON *root = cJSON_Parse(text);
            const cJSON *ms = cJSON_GetObjectItemCaseSensitive(root, "measures");
            printf("%-40.*s %s\n    measures: %s\n    load: %s%s%s\n    policies: %s\n", (int)(strlen(n) - 18 - 5), n + 18,
                   desc, cJSON_IsString(ms) ? ms->valuestring : "(not stated)", sim_load_mode_name(sim_load_mode(&c)),
                   c.concurrency > 0 ? ", clients " : "", c.concurrency > 0 ? conc : "", pol);
            cJSON_Delete(root);
        }
        return 0;
    }
    if (!strcmp(what, "costmodels")) {
        if (costmodels_list(stdout, &e) != 0) {
            fprintf(stderr, "kvsim: %s\n", e.msg);
            return 1;
        }
        return 0;
    }
    if (!strcmp(what, "traces")) {
        for (int i = 0; i < trace_generator_count(); i++)
            printf("%-12s %s\n", trace_generator_name(i), trace_generator_summary(i));
        printf("(or a file: canonical CSV, Mooncake JSONL, Vidur/Splitwise CSV)\n");
        return 0;
    }
    SimConfig ovc; /* the overlays, through the settings that carry them into runs */
    sim_config_defaults(&ovc);
    if ((opt_get(&a, "--hardware") && sim_config_set(&ovc, "hardware_overlay", opt_get(&a, "--hardware"), &e) != 0) ||
        (opt_get(&a, "--models") && sim_config_set(&ovc, "models_overlay", opt_get(&a, "--models"), &e) != 0))
        return usage_error(&k_list, "%s", e.msg);
    ModelCatalog mc;
    HwCatalog hw;
    if (!strcmp(what, "models") || !strcmp(what, "platforms") || !strcmp(what, "gpus") || !strcmp(what, "ssds") ||
        point_memdev_key(what) >= 0 || !strcmp(what, "nics") || !strcmp(what, "links")) {
        if (sim_catalogs_open(&ovc, &mc, &hw, &e) != 0) {
            fprintf(stderr, "kvsim: %s\n", e.msg);
            return 1;
        }
    }
    if (!strcmp(what, "models")) {
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
        hw_catalog_free(&hw);
        return 0;
    }
    if (!strcmp(what, "platforms") || !strcmp(what, "gpus") || !strcmp(what, "ssds") || point_memdev_key(what) >= 0 ||
        !strcmp(what, "nics") || !strcmp(what, "links")) {
        model_catalog_free(&mc);
        if (!strcmp(what, "gpus")) {
            for (int i = 0; i < hw.n_gpus; i++) {
                const GpuSpec *g = &hw.gpus[i];
                printf("%-12s %7.1f TFLOP/s %6.0f GB %6.0f GB/s  %s\n", g->name, g->fp16_flops / 1e12,
                       (double)g->mem_bytes / 1e9, g->mem_bw_bytes_per_s / 1e9, g->full_name);
            }
        } else if (!strcmp(what, "platforms")) {
            for (int i = 0; i < hw.n_platforms; i++) {
                const PlatformSpec *p = &hw.platforms[i];
                char ssd[96] = "no SSD", nic[96] = "no remote store";
                if (p->ssd >= 0) snprintf(ssd, sizeof ssd, "%d× %s", p->n_ssd, hw.ssds[p->ssd].name);
                if (p->nic >= 0) snprintf(nic, sizeof nic, "%s", hw.nics[p->nic].name);
                printf("%-20s %d× %-10s %-6s %-16s %-10s  %s\n", p->name, p->gpus_per_node, hw.gpus[p->gpu].name,
                       hw.links[p->link].name, ssd, nic, p->description);
            }
        } else {
            point_list_parts(stdout, &hw, what);
        }
        hw_catalog_free(&hw);
        return 0;
    }
    return usage_error(&k_list, "unknown catalog '%s' (" LIST_CATALOGS ")", what);
}

/* Apply a JSON object of settings (a --config file or a scenario). "policies" and "description"
 * are not settings: they are returned to the caller (when the pointers are given). A summary.json
 * is accepted too: its inputs.config object is applied (it re-runs the same experiment). */
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
    cJSON *in = cJSON_GetObjectItemCaseSensitive(root, "inputs");
    cJSON *obj = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(in, "config")) ? cJSON_GetObjectItemCaseSensitive(in, "config") : root;
    SimJsonOut out = {policies, plen, desc, dlen, NULL, 0};
    int rc = sim_config_apply_json(c, obj, origin, &out, e);
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

/* Whether a --config file names key (the user chose it, even when it equals the scenario's value). */
static int config_names(const char *path, const char *key)
{
    KvErr e;
    char *text = kv_read_file(path, NULL, &e);
    if (!text) return 0;
    cJSON *o = cJSON_Parse(text);
    free(text);
    int has = cJSON_GetObjectItemCaseSensitive(o, key) != NULL;
    cJSON_Delete(o);
    return has;
}

/* A scenario whose load mode is concurrency=N (one request after another: the papers' harness)
 * replaces a trace file's own arrival times. With a --trace file that has them and no concurrency
 * of the user's, the run is refused naming both, before anything runs: 0 or -1 with the message. */
static int scenario_timing_conflict(const SimConfig *c, const char *scenario, int64_t scen_conc, const char *scen_trace,
                                    int user_conc, KvErr *e)
{
    if (!scenario || scen_conc <= 0 || user_conc || c->concurrency != scen_conc || !strcmp(c->trace, scen_trace)) return 0;
    TraceOptions to = {0};
    to.source = c->trace;
    to.format = sim_trace_format_name(c->trace_format);
    to.seed = c->seed;
    to.max_requests = 1;
    KvErr te;
    TraceSource *ts = trace_open(&to, &te);
    if (!ts) return 0; /* not a readable file: the run says why */
    int64_t timed = trace_timed_rows(ts);
    trace_close(ts);
    if (timed <= 0) return 0;
    return kv_err(e,
                  "--trace %s: %lld of its rows carry arrival times, but scenario %s sets concurrency=%lld (%lld client%s "
                  "sending the next request when the previous one ends, no think time), which would replace them; add "
                  "--set concurrency=0 to replay the file's arrival times, or --set concurrency=%lld to keep the "
                  "scenario's harness",
                  c->trace, (long long)timed, scenario, (long long)scen_conc, (long long)scen_conc, scen_conc == 1 ? "" : "s",
                  (long long)scen_conc);
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

/* Open the trace once before any policy runs (the engine opens it again per policy): a trace that
 * cannot be opened is reported once, naming the trace, not a policy; a name that is neither a
 * file nor a generator gets the generators' names. desc: trace_describe's line. */
static int trace_check(const SimConfig *cfg, const SimWorld *w, char *desc, size_t dlen, KvErr *e)
{
    TraceOptions to;
    sim_trace_options(cfg, cfg->max_context > 0 ? cfg->max_context : w->model->max_pos, &to);
    TraceSource *ts = trace_open(&to, e);
    if (ts) {
        snprintf(desc, dlen, "%s", trace_describe(ts));
        trace_close(ts);
        return 0;
    }
    if (access(cfg->trace, F_OK) == 0) return kv_err_prefix(e, "trace: ");
    char names[256] = "", guess[64] = "";
    size_t n = 0;
    for (int i = 0; i < trace_generator_count(); i++) {
        const char *g = trace_generator_name(i);
        n += (size_t)snprintf(names + n, n < sizeof names ? sizeof names - n : 0, "%s%s", i ? ", " : "", g);
        if (!guess[0] && cfg->trace[0] && (strncmp(g, cfg->trace, strlen(cfg->trace)) == 0 || strstr(cfg->trace, g)))
            snprintf(guess, sizeof guess, "%s", g);
    }
    return kv_err(e, "trace '%s': no such file, and not a generator (%s%s%sgenerators: %s; files: canonical CSV, "
                  "Mooncake JSONL, Vidur/Splitwise CSV)",
                  cfg->trace, guess[0] ? "did you mean " : "", guess, guess[0] ? "? " : "", names);
}

/* SIGINT/SIGTERM/SIGHUP: stop and reap the pool's workers (so that nothing writes after), remove the
 * result set in progress and every temp file still open (--trace-out, --emit-schedule, --csv, ...),
 * then die of the signal. Commands that stop gracefully (sweep's points, plan) install their own
 * handler for that phase and put this one back after it. */
static void on_stop_signal(int sig)
{
    procpool_stop_on_signal();
    rs_cleanup_on_signal();
    kv_atomic_cleanup_on_signal();
    signal(sig, SIG_DFL);
    raise(sig);
}


/* Before anything is written: no output of run/compare is one of its inputs or another output, and
 * no input lies in --out DIR (replaced as a whole). A usage error (exit 2) naming both. */
static int check_run_paths(const OptCmd *cmd, const SimConfig *cfg, const char *config, const char *scenario, const char *out,
                           const char *trace_out, const char *emit_schedule)
{
    KvPathArg in[] = {{"--trace", cfg->trace, 0},
                      {"--costs", cfg->costs, 0},
                      {"--hardware", cfg->hardware_overlay, 0},
                      {"--models", cfg->models_overlay, 0},
                      {"--config", config, 0},
                      {"--scenario", scenario && strchr(scenario, '/') ? scenario : NULL, 0}}; /* a name is no file */
    KvPathArg outs[] = {{"--out", out, 1}, {"--trace-out", trace_out, 0}, {"--emit-schedule", emit_schedule, 0}};
    KvErr e;
    if (kv_paths_check(in, (int)KV_ARRAY_LEN(in), outs, (int)KV_ARRAY_LEN(outs), &e) != 0) return usage_error(cmd, "%s", e.msg);
    return 0;
}

static int cmd_run(int argc, char **argv, int compare)
{
    const OptCmd *cmd = compare ? &k_compare : &k_run;
    opt_short_jobs(argc, argv);
    OptArgs a;
    int prc = parse_or_exit(cmd, argc, argv, &a, 1);
    if (prc >= 0) return prc;
    SimConfig cfg;
    sim_config_defaults(&cfg);
    char policies[512] = "";
    const char *out = NULL, *emit_schedule = NULL;
    int no_csv = 0, stats = 0, dry_run = 0, timeline = 0;
    int64_t timeline_req = -1, util_window_ns = 0, trace_max = 1000000;
    const char *trace_out = NULL;
    ExpOpts xo;
    KvErr e;
    char scen_policies[512] = "", scen_desc[1024] = "";
    /* --scenario, then --config, so that the other options override them */
    const char *scenario = opt_get(&a, "--scenario"), *config = opt_get(&a, "--config");
    if (scenario && load_scenario(&cfg, scenario, scen_policies, sizeof scen_policies, scen_desc, sizeof scen_desc, &e) != 0) {
        fprintf(stderr, "kvsim: %s\n", e.msg);
        return 1;
    }
    int64_t scen_conc = cfg.concurrency;
    char scen_trace[sizeof cfg.trace];
    snprintf(scen_trace, sizeof scen_trace, "%s", cfg.trace);
    int user_conc = config && config_names(config, "concurrency");
    if (config && load_config_file(&cfg, config, scen_policies, sizeof scen_policies, &e) != 0) {
        fprintf(stderr, "kvsim: %s\n", e.msg);
        return 1;
    }
    static const struct {
        const char *opt, *key;
    } direct[] = {{"--model", "model"},     {"--platform", "platform"}, {"--trace", "trace"}, {"--requests", "requests"},
                  {"--seed", "seed"},       {"--tp", "tp"},             {"--pp", "pp"},       {"--costs", "costs"},
                  {"--replicas", "replicas"}, {"--dtype", "dtype"}, {"--hardware", "hardware_overlay"},
                  {"--models", "models_overlay"}};
    /* the other options in command-line order (--set model=X --model Y: Y) */
    for (int i = 0; i < a.n_hits; i++) {
        const char *o = opt_hit_name(&a, i), *v = a.hits[i].value;
        if (!strcmp(o, "--scenario") || !strcmp(o, "--config")) continue;
        if (!strcmp(o, "--quiet")) cfg.quiet = 1;
        else if (!strcmp(o, "--no-csv")) no_csv = 1;
        else if (!strcmp(o, "--stats")) stats = 1;
        else if (!strcmp(o, "--dry-run")) dry_run = 1;
        else if (!strcmp(o, "--out")) out = v;
        else if (!strcmp(o, "--trace-out")) trace_out = v;
        else if (!strcmp(o, "--timeline")) {
            timeline = 1;
            if (strcmp(v, "slowest") && opt_int("--timeline", v, 0, INT64_MAX, &timeline_req, &e) != 0)
                return usage_error(cmd, "%s (or 'slowest': the slowest restoration of the run)", e.msg);
        } else if (!strcmp(o, "--trace-max-events")) {
            if (opt_int("--trace-max-events", v, 1, INT64_MAX, &trace_max, &e) != 0) return usage_error(cmd, "%s", e.msg);
        } else if (!strcmp(o, "--util-window")) {
            if (kv_parse_duration(v, &util_window_ns, &e) != 0 || util_window_ns <= 0)
                return usage_error(cmd, "--util-window %s: expected a positive duration (100ms, 1s)", v);
        }
        else if (!strcmp(o, "--emit-schedule")) emit_schedule = v;
        else if (!strcmp(o, "--policy") || !strcmp(o, "--policies")) snprintf(policies, sizeof policies, "%s", v);
        else if (experiment_opt_is(o)) continue; /* read by experiment_opts_read below */
        else if (!strcmp(o, "--set")) {
            const char *eq = strchr(v, '=');
            if (!eq || eq == v) return usage_error(cmd, "--set %s: expected KEY=VALUE", v);
            char key[64];
            snprintf(key, sizeof key, "%.*s", (int)(eq - v), v);
            if (sim_config_set(&cfg, key, eq + 1, &e) != 0) return usage_error(cmd, "--set %s: %s", v, e.msg);
            if (!strcmp(key, "concurrency")) user_conc = 1;
        } else {
            size_t k = 0;
            while (k < KV_ARRAY_LEN(direct) && strcmp(o, direct[k].opt)) k++;
            if (k == KV_ARRAY_LEN(direct)) return usage_error(cmd, "option %s is not handled (a bug)", o);
            if (sim_config_set(&cfg, direct[k].key, v, &e) != 0) return usage_error(cmd, "%s: %s", o, e.msg);
        }
    }
    if (!out && !dry_run) return usage_error(cmd, "option --out is required (or --dry-run)");
    if (scenario_timing_conflict(&cfg, scenario, scen_conc, scen_trace, user_conc, &e) != 0) return usage_error(cmd, "%s", e.msg);
    if (!policies[0] && compare && scen_policies[0]) snprintf(policies, sizeof policies, "%s", scen_policies);
    if (!policies[0]) snprintf(policies, sizeof policies, "%s", "recompute,kv-offload"); /* compare's default */
    if (scen_desc[0] && !cfg.quiet) fprintf(stderr, "scenario: %s\n", scen_desc);
    if (!strcmp(policies, "all")) { /* every registered policy */
        size_t len = 0;
        for (int i = 0; i < policy_count() && len < sizeof policies - 40; i++)
            len += (size_t)snprintf(policies + len, sizeof policies - len, "%s%s", i ? "," : "", policy_at(i)->name);
    }
    /* validate every policy name before running anything */
    char names[16][32];
    int np = 0;
    for (char *tok = policies; *tok;) {
        size_t len = strcspn(tok, ",");
        if (np == 16) {
            fprintf(stderr, "kvsim: --policies: at most 16 policies per run, got more (from \"%.*s\" on)\n", (int)len, tok);
            return 2;
        }
        snprintf(names[np], sizeof names[np], "%.*s", (int)len, tok);
        if (!policy_find(names[np], &e)) return usage_error(cmd, "%s", e.msg);
        np++;
        tok += len;
        if (*tok == ',') tok++;
    }
    if (experiment_opts_read(&a, &cfg, names, np, &xo, &e) != 0) return usage_error(cmd, "%s", e.msg);
    if (emit_schedule && xo.n_seeds) return usage_error(cmd, "--emit-schedule writes one run's schedule: not with --seeds");
    if (emit_schedule && !*emit_schedule) return usage_error(cmd, "--emit-schedule: expected a file name");
    sim_schedule_set_path(emit_schedule); /* the engine writes it (sim/engine/schedule_out.c) */
    if (sim_config_check(&cfg, &e) != 0) { /* a usage error: refused before anything is opened */
        fprintf(stderr, "kvsim: %s\n", e.msg);
        return 2;
    }
    int pc = check_run_paths(cmd, &cfg, config, scenario, dry_run ? NULL : out, trace_out, emit_schedule);
    if (pc != 0) return pc;
    SimWorld w;
    if (sim_world_open(&w, &cfg, &e) != 0) {
        fprintf(stderr, "kvsim: %s\n", e.msg);
        return 1;
    }
    char warning[512];
    if (point_spec_warning(&w, warning, sizeof warning)) fprintf(stderr, "kvsim: warning: %s\n", warning);
    if (dry_run) { /* exit 1 when the model does not fit, as the run would */
        int fits = point_dry_run(stdout, &w, policies);
        sim_world_close(&w);
        return fits ? 0 : 1;
    }
    char trace_desc[1024] = "";
    if (trace_check(&cfg, &w, trace_desc, sizeof trace_desc, &e) != 0) {
        fprintf(stderr, "kvsim: %s\n", e.msg);
        sim_world_close(&w);
        return 1;
    }
    ExpSpec x = {&cfg, &w, trace_desc, (const char(*)[32])names, np, out, xo.n_seeds, xo.seed_base, xo.jobs,
                 xo.baseline, no_csv, stats, util_window_ns, timeline, timeline_req, trace_out, (uint64_t)trace_max,
                 compare, xo.full_table, xo.metric, {0}, xo.n_pct};
    memcpy(x.pct, xo.pct, sizeof x.pct);
    int rc = experiment_run(&x);
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
    fill_policy_help();
    kv_install_stop_handlers(on_stop_signal); /* for every command: none leaves a temp file when interrupted */
    costmodels_install();
    if (!strcmp(cmd, "list")) return cmd_list(argc - 1, argv + 1);
    if (!strcmp(cmd, "run")) return cmd_run(argc - 1, argv + 1, 0);
    if (!strcmp(cmd, "compare")) return cmd_run(argc - 1, argv + 1, 1);
    if (!strcmp(cmd, "sweep")) return sweep_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "plan")) return plan_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "map")) return map_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "check")) return check_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "reproduce")) return reproduce_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "plot")) return plot_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "report")) return report_main(argc - 1, argv + 1);
    fprintf(stderr, "kvsim: unknown command '%s' (list, run, compare, sweep, plan, map, check, reproduce, plot, report; kvsim --help)\n", cmd);
    return 2;
}
