/* plot_cmd.c — `kvsim plot`; see plot_cmd.h. */
#include "sim/cli/plot_cmd.h"

#include <cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "results/plot.h"
#include "results/plot_bars.h"
#include "results/plot_csv.h"
#include "results/plot_history.h"
#include "results/plot_sweep.h"
#include "results/plot_timeline.h"
#include "results/plot_util.h"
#include "sim/base/opt.h"
#include "sim/base/units.h"
#include "sim/cli/sweep.h"

static const OptSpec k_opts[] = {
    {"--in", "DIR", 0, "a kvsim run/compare result directory: draw its figures again from its files"},
    {"--sweep", "FILE", 0, "a sweep's tidy CSV (kvsim sweep --csv) or results database (--db)"},
    {"--x", "KEY", 0, "--sweep: the setting on the x axis (e.g. session_rate)"},
    {"--y", "KEY", 0, "--sweep: a second setting: heatmap.svg of the metric over x × y"},
    {"--metric", "NAME", 0, "--sweep: the metric of metric_vs_load.svg and heatmap.svg (default slo_attainment; e.g. ttft_p99)"},
    {"--out", "DIR", 0, "where the figures go (--in: default DIR itself; --sweep: required)"},
    {"--slo-ttft", "DUR", 0, "--in: the TTFT SLO line (default: summary.json's slo_ttft)"},
    {"--title", "TEXT", 0, "the figures' title"},
    {"--bars", "CSV", 0, "a tidy CSV (group,series,value,halfwidth): grouped bars with their intervals into --out FILE.svg"},
    {"--ylabel", "TEXT", 0, "--bars: the y axis label, with its unit"},
};
static const OptCmd k_cmd = {"kvsim plot", "Draw figures from result files without simulating: a run's directory (--in) or a sweep (--sweep).",
                             k_opts, (int)KV_ARRAY_LEN(k_opts), NULL, 0, 0};

static int usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = opt_vusage_error(&k_cmd, stderr, fmt, ap);
    va_end(ap);
    return rc;
}

static int fail(const char *msg)
{
    fprintf(stderr, "kvsim plot: %s\n", msg);
    return 1;
}

static int exists(const char *p) { return access(p, R_OK) == 0; }

/* Before a figure is drawn: none of the files plot writes (its figures in --out, or --bars' --out
 * file) is one it reads (--bars, --sweep, the result files of --in). 0, or the usage error's 2. */
static int check_paths(const char *in, const char *sw, const char *bars, const char *out)
{
    static const char *const in_files[] = {"requests.csv", "utilisation.csv", "timeline.csv", "summary.json"};
    static const char *const in_figs[] = {"ttft_cdf.svg", "ttft_ccdf.svg", "ttft_split.svg", "ttft_history.svg", "utilisation.svg", "timeline.svg"};
    static const char *const sw_figs[] = {"slo_vs_load.svg", "metric_vs_load.svg", "heatmap.svg"};
    KvPathArg ins[4], outs[6];
    char ip[4][4200], op[6][4200];
    int ni = 0, no = 0;
    if (bars) {
        ins[ni++] = (KvPathArg){"--bars", bars, 0};
        outs[no++] = (KvPathArg){"--out", out, 0};
    } else if (sw) {
        ins[ni++] = (KvPathArg){"--sweep", sw, 0};
        for (size_t i = 0; i < KV_ARRAY_LEN(sw_figs); i++, no++) {
            snprintf(op[no], sizeof op[no], "%s/%s", out, sw_figs[i]);
            outs[no] = (KvPathArg){"--out", op[no], 0};
        }
    } else {
        for (size_t i = 0; i < KV_ARRAY_LEN(in_files); i++, ni++) {
            snprintf(ip[ni], sizeof ip[ni], "%s/%s", in, in_files[i]);
            ins[ni] = (KvPathArg){"--in", ip[ni], 0};
        }
        for (size_t i = 0; i < KV_ARRAY_LEN(in_figs); i++, no++) {
            snprintf(op[no], sizeof op[no], "%s/%s", out, in_figs[i]);
            outs[no] = (KvPathArg){"--out", op[no], 0};
        }
    }
    KvErr e;
    if (kv_paths_check(ins, ni, outs, no, &e) != 0) return usage("%s", e.msg);
    return 0;
}

/* slo_ttft from DIR/summary.json (inputs.config.slo_ttft), 0 when absent */
static int64_t summary_slo(const char *dir)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/summary.json", dir);
    KvErr e;
    char *text = kv_read_file(p, NULL, &e);
    if (!text) return 0;
    cJSON *root = cJSON_Parse(text);
    free(text);
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "inputs"), "config");
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(cfg, "slo_ttft");
    int64_t ns = 0;
    if (cJSON_IsString(s) && kv_parse_duration(s->valuestring, &ns, &e) != 0) ns = 0;
    cJSON_Delete(root);
    return ns;
}

/* per policy, the histograms of requests.csv's ttft_s, queue_s, restore_s, prefill_s */
static int results_from_csv(const char *csv, SimResult *res, int *n, int cap, KvErr *e)
{
    PlotCsv t;
    if (pcsv_read(&t, csv, e) != 0) return -1;
    static const char *const need[] = {"policy", "ttft_s", "queue_s", "restore_s", "prefill_s"};
    int c[5], rc = -1;
    *n = 0;
    if (pcsv_cols(&t, need, 5, c, e) != 0) goto done;
    for (int r = 0; r < t.nrows; r++) {
        const char *pol = pcsv_cell(&t, r, c[0]);
        int k = 0;
        while (k < *n && strcmp(res[k].policy, pol)) k++;
        if (k == *n) {
            if (*n == cap) continue;
            memset(&res[k], 0, sizeof res[k]);
            snprintf(res[k].policy, sizeof res[k].policy, "%s", pol);
            (*n)++;
        }
        Hist *h[4] = {&res[k].ttft, &res[k].queue, &res[k].restore, &res[k].prefill};
        for (int j = 0; j < 4; j++) {
            double v;
            if (pcsv_num(&t, r, c[j + 1], &v, e) != 0) goto done;
            if (v >= 0) hist_add(h[j], (uint64_t)llround(v * 1e9));
        }
    }
    rc = 0;
done:
    pcsv_free(&t);
    return rc;
}

static int plot_dir(const char *in, const char *out, int64_t slo_ns, const char *title)
{
    KvErr e;
    char csv[4200], path[4200], done[600] = "";
    size_t dl = 0;
    int drew = 0;
    snprintf(csv, sizeof csv, "%s/requests.csv", in);
    if (exists(csv)) {
        SimResult res[16];
        int n = 0;
        if (results_from_csv(csv, res, &n, 16, &e) != 0) return fail(e.msg);
        snprintf(path, sizeof path, "%s/ttft_cdf.svg", out);
        int rc = plot_ttft_cdf_svg(path, res, n, title, slo_ns, &e);
        snprintf(path, sizeof path, "%s/ttft_ccdf.svg", out);
        if (rc == 0) rc = plot_ttft_ccdf_svg(path, res, n, title, slo_ns, &e);
        snprintf(path, sizeof path, "%s/ttft_split.svg", out);
        if (rc == 0) rc = plot_ttft_split_svg(path, res, n, title, &e);
        snprintf(path, sizeof path, "%s/ttft_history.svg", out);
        if (rc == 0) rc = plot_history_svg(path, csv, title, slo_ns, &e);
        for (int i = 0; i < n; i++) sim_result_free(&res[i]);
        if (rc != 0) return fail(e.msg);
        dl += (size_t)snprintf(done + dl, sizeof done - dl, "ttft_cdf.svg, ttft_ccdf.svg, ttft_split.svg, ttft_history.svg");
        drew++;
    }
    snprintf(csv, sizeof csv, "%s/utilisation.csv", in);
    if (exists(csv)) {
        snprintf(path, sizeof path, "%s/utilisation.svg", out);
        if (plot_util_svg(path, csv, title, &e) != 0) return fail(e.msg);
        dl += (size_t)snprintf(done + dl, sizeof done - dl, "%sutilisation.svg", dl ? ", " : "");
        drew++;
    }
    snprintf(csv, sizeof csv, "%s/timeline.csv", in);
    if (exists(csv)) {
        snprintf(path, sizeof path, "%s/timeline.svg", out);
        if (plot_timeline_svg(path, csv, title, &e) != 0) return fail(e.msg);
        dl += (size_t)snprintf(done + dl, sizeof done - dl, "%stimeline.svg", dl ? ", " : "");
        drew++;
    }
    if (!drew) {
        snprintf(e.msg, sizeof e.msg, "%s: no requests.csv, utilisation.csv or timeline.csv to draw from", in);
        return fail(e.msg);
    }
    fprintf(stderr, "figures in %s/ (%s)\n", out, done);
    return 0;
}

int plot_main(int argc, char **argv)
{
    OptArgs a;
    KvErr e;
    int begin = opt_begin(&k_cmd, argc, argv, &a);
    if (begin >= 0) return begin;
    const char *in = opt_get(&a, "--in"), *sw = opt_get(&a, "--sweep"), *out = opt_get(&a, "--out");
    const char *title = opt_get(&a, "--title");
    const char *bars = opt_get(&a, "--bars");
    if (bars) { /* grouped bars: --out is the SVG file */
        if (opt_get(&a, "--in") || opt_get(&a, "--sweep")) return usage("--bars is used alone (not with --in or --sweep)");
        if (!out) return usage("--bars needs --out FILE.svg");
        if (check_paths(NULL, NULL, bars, out) != 0) return 2;
        if (plot_bars(bars, out, title, opt_get(&a, "--ylabel"), &e) != 0) return fail(e.msg);
        fprintf(stderr, "figure %s\n", out);
        return 0;
    }
    if (opt_get(&a, "--ylabel")) return usage("--ylabel is for --bars");
    if (!!in == !!sw) return usage("give one of --in DIR or --sweep FILE");
    if (in && (opt_get(&a, "--x") || opt_get(&a, "--y") || opt_get(&a, "--metric")))
        return usage("--x, --y and --metric are for --sweep");
    if (sw && opt_get(&a, "--slo-ttft")) return usage("--slo-ttft is for --in");
    if (sw && (!opt_get(&a, "--x") || !out)) return usage("--sweep needs --x KEY and --out DIR");
    if (!out) out = in;
    if (check_paths(in, sw, NULL, out) != 0) return 2;
    if (mkdir(out, 0777) != 0 && errno != EEXIST) {
        snprintf(e.msg, sizeof e.msg, "%s: cannot create the directory: %s", out, strerror(errno));
        return fail(e.msg);
    }
    if (in) {
        int64_t slo = 0;
        const char *s = opt_get(&a, "--slo-ttft");
        if (s && (kv_parse_duration(s, &slo, &e) != 0 || slo <= 0))
            return usage("--slo-ttft %s: expected a positive duration (500ms, 1s)", s);
        if (!s) slo = summary_slo(in);
        return plot_dir(in, out, slo, title ? title : in); /* (each figure names what it shows) */
    }
    char csv[4200];
    snprintf(csv, sizeof csv, "%s", sw);
    int tmp = 0;
    size_t l = strlen(sw);
    if (l < 4 || strcmp(sw + l - 4, ".csv")) { /* a results database: its tidy CSV first (removed on a signal too) */
        snprintf(csv, sizeof csv, "%s/.sweep-export.tmp.%ld", out, (long)getpid());
        tmp = kv_temp_track(csv);
        if (sweep_export_csv(sw, csv, &e) != 0) {
            kv_temp_untrack(tmp);
            unlink(csv);
            return fail(e.msg);
        }
        tmp = tmp ? tmp : -1;
    }
    PlotSweepSpec sp = {csv, out, opt_get(&a, "--x"), opt_get(&a, "--y"), opt_get(&a, "--metric"), title};
    char written[256];
    int rc = plot_sweep(&sp, written, sizeof written, &e);
    if (tmp) {
        kv_temp_untrack(tmp);
        unlink(csv);
    }
    if (rc != 0) return fail(e.msg);
    fprintf(stderr, "figures in %s/ (%s)\n", out, written);
    return 0;
}
