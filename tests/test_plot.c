/* test_plot.c — the figures people read and what feeds them: the engine's recordings (utilisation
 * windows that add up to the run's utilisation, the slowest restoration's timeline, trace events)
 * leave every result unchanged; the Chrome trace parses (cJSON) with its tracks, monotone ts per
 * track and the event cap; the figures drawn from the result files have one series per policy
 * (and resource), the timeline its compute and IO lanes, the sweep figures a cell per point. */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "results/plot.h"
#include "results/plot_csv.h"
#include "results/plot_history.h"
#include "results/plot_svg.h"
#include "results/plot_sweep.h"
#include "results/plot_timeline.h"
#include "results/plot_trace.h"
#include "results/plot_util.h"
#include "results/report.h"
#include "tests/harness.h"

static char *slurp(TestCtx *t, const char *path)
{
    KvErr e;
    char *s = kv_read_file(path, NULL, &e);
    CHECK_MSG(s != NULL, "%s", e.msg);
    return s;
}

static int count(const char *hay, const char *needle)
{
    int c = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) c++;
    return c;
}

typedef struct Slowest {
    uint64_t id, n;
    int64_t restore_ns;
} Slowest;

static int keep_slowest(void *ctx, const SimRequestRow *r, KvErr *e)
{
    Slowest *s = ctx;
    if (r->restore_ns > s->restore_ns) s->restore_ns = r->restore_ns, s->id = r->id;
    s->n++;
    return 0;
}

static void small_config(TestCtx *t, SimConfig *c)
{
    KvErr e;
    sim_config_defaults(c);
    c->quiet = 1;
    CHECK(sim_config_set(c, "requests", "200", &e) == 0);
}

TEST(plot_recordings_leave_results_unchanged)
{
    SimConfig c;
    small_config(t, &c);
    SimWorld w;
    KvErr e;
    if (sim_world_open(&w, &c, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    const char *dir = test_tmpdir(t);
    char part[4200], json[4200];
    snprintf(part, sizeof part, "%s/part", dir);
    snprintf(json, sizeof json, "%s/trace.json", dir);
    SimResult a, b;
    Slowest sa = {0, 0, -1}, sb = {0, 0, -1};
    CHECK_MSG(sim_run(&w, "kv-offload", keep_slowest, &sa, NULL, NULL, &a, &e) == 0, "%s", e.msg);
    SimUtilSeries u;
    SimTimeline tl;
    PlotTrace tr;
    SimEventSink sink;
    CHECK(ptrace_open(&tr, part, 0, "kv-offload", 1000000, &e) == 0);
    ptrace_sink(&tr, &sink);
    SimRunOpts o = {keep_slowest, &sb, NULL, NULL, &u, 0, &tl, -1, &sink};
    CHECK_MSG(sim_run_ex(&w, "kv-offload", &o, &b, &e) == 0, "%s", e.msg);
    CHECK(ptrace_close(&tr, &e) == 0);
    /* the same run: every figure of the results */
    CHECK_EQ_U(a.requests, b.requests);
    CHECK_EQ_U(a.events, b.events);
    CHECK_EQ_I(a.sim_end_ns, b.sim_end_ns);
    CHECK(hist_mean(&a.ttft) == hist_mean(&b.ttft) && a.util_gpu[0] == b.util_gpu[0] && a.ch_bytes[CH_H2D][CH_READ] == b.ch_bytes[CH_H2D][CH_READ]);
    /* utilisation windows: in [0, 1], and they add up to the run's utilisation */
    CHECK(u.n_res >= 3 && u.n_windows >= 100 && u.n_windows <= 400);
    CHECK_STR(u.names[0], "gpu");
    for (int r = 0; r < u.n_res; r++) {
        double busy = 0;
        for (int k = 0; k < u.n_windows; k++) {
            double v = u.util[(size_t)r * u.n_windows + k];
            CHECK_MSG(v >= 0 && v <= 1, "%s window %d: %g", u.names[r], k, v);
            int64_t len = (k + 1) * u.window_ns < u.end_ns ? u.window_ns : u.end_ns - k * u.window_ns;
            busy += v * (double)len;
        }
        double want = !strcmp(u.names[r], "gpu") ? b.util_gpu[0] : !strcmp(u.names[r], "h2d") ? b.util_ch[CH_H2D][0]
                      : !strcmp(u.names[r], "d2h") ? b.util_ch[CH_D2H][0] : !strcmp(u.names[r], "ssd") ? b.util_ch[CH_SSD][0] : -1;
        if (want >= 0) CHECK_NEAR(busy / (double)u.end_ns, want, 1e-6, 1e-9);
    }
    /* the timeline: the slowest restoration of the run, with IO and GPU spans in order */
    CHECK(tl.found);
    CHECK_EQ_U(tl.request, sb.id);
    CHECK_EQ_I(tl.restored_ns - tl.admit_ns, sb.restore_ns);
    int io = 0, gpu = 0;
    for (int i = 0; i < tl.n; i++) {
        const SimTlSpan *s = &tl.spans[i];
        CHECK(s->t1_ns >= s->t0_ns && s->t0_ns >= tl.arrival_ns && s->layer < tl.layers);
        if (!strcmp(s->lane, "gpu")) gpu++;
        else io++;
    }
    CHECK(io >= tl.layers && gpu >= tl.layers);
    /* the figures of those files */
    char csv[4200], svg[4200];
    snprintf(csv, sizeof csv, "%s/utilisation.csv", dir);
    FILE *f = fopen(csv, "w");
    plot_util_csv_header(f, 0);
    plot_util_csv_rows(f, &u, "kv-offload", 0, 0);
    plot_util_csv_rows(f, &u, "other", 0, 0);
    fclose(f);
    snprintf(svg, sizeof svg, "%s/utilisation.svg", dir);
    CHECK_MSG(plot_util_svg(svg, csv, "t", &e) == 0, "%s", e.msg);
    char *s = slurp(t, svg);
    if (s) CHECK_EQ_I(count(s, "<polyline class=\"util\""), 2 * u.n_res);
    free(s);
    snprintf(csv, sizeof csv, "%s/timeline.csv", dir);
    f = fopen(csv, "w");
    plot_timeline_csv_header(f, 0);
    plot_timeline_csv_rows(f, &tl, "kv-offload", 0, 0);
    fclose(f);
    snprintf(svg, sizeof svg, "%s/timeline.svg", dir);
    CHECK_MSG(plot_timeline_svg(svg, csv, "t", &e) == 0, "%s", e.msg);
    s = slurp(t, svg);
    if (s) {
        CHECK_EQ_I(count(s, "<rect class=\"io\""), io);
        CHECK_EQ_I(count(s, "<rect class=\"compute\""), gpu);
        CHECK_EQ_I(count(s, "<line class=\"event\""), 3); /* admitted, restored, first token */
        CHECK_CONTAINS(s, "time since the request's release (ms)");
        CHECK(strstr(s, ", seed ") == NULL);
    }
    free(s);
    f = fopen(csv, "w"); /* under replications each group names its seed */
    plot_timeline_csv_header(f, 1);
    plot_timeline_csv_rows(f, &tl, "kv-offload", 1, 1);
    plot_timeline_csv_rows(f, &tl, "kv-offload", 1, 2);
    fclose(f);
    CHECK_MSG(plot_timeline_svg(svg, csv, "t", &e) == 0, "%s", e.msg);
    s = slurp(t, svg);
    if (s) {
        CHECK_CONTAINS(s, ">kv-offload, seed 1: request ");
        CHECK_CONTAINS(s, ">kv-offload, seed 2: request ");
    }
    free(s);
    /* the trace: valid JSON, the tracks named, ts monotone per track */
    const char *parts[1] = {part};
    CHECK_MSG(ptrace_merge(json, parts, 1, 1000000, &e) == 0, "%s", e.msg);
    char *text = slurp(t, json);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    CHECK(root != NULL);
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    CHECK(cJSON_IsArray(ev));
    int iters = 0, xfers = 0, counters = 0, names = 0, bad = 0;
    double last[32], lastc[3];
    for (int i = 0; i < 32; i++) last[i] = -1;
    for (int i = 0; i < 3; i++) lastc[i] = -1;
    static const char *const cnames[3] = {"queue depth", "restoring", "kv pool tokens"};
    for (const cJSON *x = ev ? ev->child : NULL; x; x = x->next) {
        const char *ph = cJSON_GetObjectItemCaseSensitive(x, "ph")->valuestring;
        const cJSON *tsj = cJSON_GetObjectItemCaseSensitive(x, "ts"), *tid = cJSON_GetObjectItemCaseSensitive(x, "tid");
        const char *nm = cJSON_GetObjectItemCaseSensitive(x, "name")->valuestring;
        if (!strcmp(ph, "X")) {
            int k = tid->valueint;
            if (k == 0) /* an iteration, or a decode run standing for args.steps iterations */
                iters += cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(x, "args"), "steps")->valueint;
            else xfers++;
            CHECK(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(x, "dur")) >= 0);
            if (k >= 0 && k < 32) {
                if (tsj->valuedouble < last[k]) bad++;
                last[k] = tsj->valuedouble;
            }
        } else if (!strcmp(ph, "C")) {
            counters++;
            for (int k = 0; k < 3; k++)
                if (!strcmp(nm, cnames[k])) {
                    if (tsj->valuedouble < lastc[k]) bad++;
                    lastc[k] = tsj->valuedouble;
                }
        } else if (!strcmp(ph, "M") && !strcmp(nm, "thread_name")) {
            names++;
        }
    }
    CHECK_EQ_U((uint64_t)iters, b.iterations);
    CHECK(xfers > 0 && counters > 0 && names >= 2);
    CHECK_EQ_I(bad, 0);
    CHECK(lastc[0] >= 0 && lastc[1] >= 0);
    CHECK(strstr(text, "\"name\":\"iterations\"") && strstr(text, "\"name\":\"h2d stage 0\""));
    cJSON_Delete(root);
    free(text);
    /* the cap: at most max_events events, the rest counted */
    SimResult c3;
    CHECK(ptrace_open(&tr, part, 0, "kv-offload", 50, &e) == 0);
    ptrace_sink(&tr, &sink);
    SimRunOpts o3 = {NULL, NULL, NULL, NULL, NULL, 0, NULL, -1, &sink};
    CHECK(sim_run_ex(&w, "kv-offload", &o3, &c3, &e) == 0);
    CHECK(ptrace_close(&tr, &e) == 0);
    CHECK(ptrace_merge(json, parts, 1, 50, &e) == 0);
    text = slurp(t, json);
    root = text ? cJSON_Parse(text) : NULL;
    CHECK(root != NULL);
    int n = 0;
    for (const cJSON *x = cJSON_GetObjectItemCaseSensitive(root, "traceEvents")->child; x; x = x->next)
        if (strcmp(cJSON_GetObjectItemCaseSensitive(x, "ph")->valuestring, "M")) n++;
    CHECK_EQ_I(n, 50);
    const cJSON *od = cJSON_GetObjectItemCaseSensitive(root, "otherData");
    CHECK(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(od, "dropped_events")) > 0);
    cJSON_Delete(root);
    free(text);
    sim_result_free(&a);
    sim_result_free(&b);
    sim_result_free(&c3);
    sim_util_free(&u);
    sim_timeline_free(&tl);
    sim_world_close(&w);
}

TEST(plot_timeline_of_a_named_request)
{
    SimConfig c;
    small_config(t, &c);
    SimWorld w;
    KvErr e;
    if (sim_world_open(&w, &c, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    SimTimeline tl;
    SimResult r;
    SimRunOpts o = {NULL, NULL, NULL, NULL, NULL, 0, &tl, 150, NULL};
    CHECK(sim_run_ex(&w, "hcache", &o, &r, &e) == 0);
    CHECK(tl.found);
    CHECK_EQ_U(tl.request, 150);
    sim_timeline_free(&tl);
    sim_result_free(&r);
    o.timeline_request = 1000000; /* no such request: nothing found */
    CHECK(sim_run_ex(&w, "hcache", &o, &r, &e) == 0);
    CHECK(!tl.found && tl.n == 0);
    sim_result_free(&r);
    sim_world_close(&w);
}

static void write_text(TestCtx *t, const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

TEST(plot_csv_quotes_and_errors)
{
    const char *dir = test_tmpdir(t);
    char p[4200];
    snprintf(p, sizeof p, "%s/a.csv", dir);
    write_text(t, p, "a,b,c\n1,\"x, \"\"y\"\"\",3\n\n4,5,6\n");
    PlotCsv c;
    KvErr e;
    CHECK(pcsv_read(&c, p, &e) == 0);
    CHECK_EQ_I(c.nrows, 2);
    CHECK_STR(pcsv_cell(&c, 0, 1), "x, \"y\"");
    double v;
    CHECK(pcsv_num(&c, 1, pcsv_col(&c, "c"), &v, &e) == 0 && v == 6);
    CHECK(pcsv_num(&c, 0, 1, &v, &e) != 0);
    CHECK_CONTAINS(e.msg, "row 2, column b");
    int cols[1];
    const char *nm[1] = {"zz"};
    CHECK(pcsv_cols(&c, nm, 1, cols, &e) != 0);
    CHECK_CONTAINS(e.msg, "no column 'zz'");
    pcsv_free(&c);
    write_text(t, p, "a,b\n1,2,3\n");
    CHECK(pcsv_read(&c, p, &e) != 0);
    CHECK_CONTAINS(e.msg, "line 2: 3 fields, the header has 2");
}

/* psvg_fmt1 writes what printf's "%.1f" writes: random magnitudes, the decimal ties and their
 * neighbours (0.25 is a tie, 0.35 is not), signed zeros, integers, and the values it leaves to printf */
TEST(plot_point_format_is_printf)
{
    uint64_t x = 88172645463325252ULL;
    char got[32], want[64];
    int bad = 0;
    for (int i = 0; i < 400000 && bad < 5; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        double v;
        switch (i % 4) {
        case 0: v = ldexp((double)(x >> 11), -53) * pow(10, (double)(x % 15)) - (x & 1 ? 0 : 500); break;
        case 1: v = ((double)(x % 2000001) - 1000000.0 + 0.5) / 10; break; /* n ± 0.5 tenths */
        case 2: v = nextafter(((double)(x % 200001) - 100000.0 + 0.5) / 10, (x & 2) ? 1e300 : -1e300); break;
        default: v = (double)(int64_t)(x % 100000000) / 100 - 4e5; break;
        }
        int n = psvg_fmt1(got, v);
        snprintf(want, sizeof want, "%.1f", v);
        if (n < 0 || strcmp(got, want) || n != (int)strlen(want)) {
            bad++;
            CHECK_MSG(0, "%.17g: '%s', printf '%s'", v, n < 0 ? "(none)" : got, want);
        }
    }
    const double edge[] = {0.0, -0.0, 0.25, 0.35, -0.25, -0.04, 0.05, 0.15, 2.5, 1e13 + 0.05, 99999999999999.9, -99999999999999.9};
    for (size_t i = 0; i < sizeof edge / sizeof *edge; i++) {
        snprintf(want, sizeof want, "%.1f", edge[i]);
        CHECK_MSG(psvg_fmt1(got, edge[i]) > 0 && !strcmp(got, want), "%.17g: '%s', printf '%s'", edge[i], got, want);
    }
    CHECK(psvg_fmt1(got, 1e14) < 0 && psvg_fmt1(got, INFINITY) < 0 && psvg_fmt1(got, NAN) < 0);
}

/* pcsv_num's plain decimals are read to the double strtod reads; other numbers go to strtod */
TEST(plot_csv_numbers_are_strtod)
{
    const char *dir = test_tmpdir(t);
    char p[4200], line[64];
    snprintf(p, sizeof p, "%s/n.csv", dir);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs("v\r\n", f);
    uint64_t x = 1234567;
    const char *fixed[] = {"0", "-0", "-0.000", "007", "1.", "1e3", "+2.5", "inf", "-nan", "9007199254740993",
                           "9007199254740992", "4750233.800000000", "0.1", "123456789.123456789", "1.0000000000000000000001"};
    int nf = (int)(sizeof fixed / sizeof *fixed), nrows = 20000;
    for (int i = 0; i < nf; i++) fprintf(f, "%s\r\n", fixed[i]);
    for (int i = nf; i < nrows; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int fd = (int)(x % 12);
        snprintf(line, sizeof line, "%s%llu.%0*llu", x & 1 ? "-" : "", (unsigned long long)((x >> 8) % 100000000ULL), fd ? fd : 1,
                 (unsigned long long)((x >> 20) % 1000000000000ULL) % (fd ? (unsigned long long)pow(10, fd) : 10ULL));
        fprintf(f, "%s\n", line);
    }
    fclose(f);
    PlotCsv c;
    KvErr e;
    CHECK(pcsv_read(&c, p, &e) == 0);
    CHECK_EQ_I(c.nrows, nrows);
    for (int r = 0; r < c.nrows; r++) {
        double v = 0;
        const char *cell = pcsv_cell(&c, r, 0);
        char *end;
        double w = strtod(cell, &end);
        CHECK_MSG(pcsv_num(&c, r, 0, &v, &e) == 0, "row %d '%s': %s", r, cell, e.msg);
        CHECK_MSG(memcmp(&v, &w, sizeof v) == 0 || (isnan(v) && isnan(w)), "row %d '%s': %.17g, strtod %.17g", r, cell, v, w);
    }
    pcsv_free(&c);
}

TEST(plot_history_and_split_structure)
{
    const char *dir = test_tmpdir(t);
    char p[4200], svg[4200];
    snprintf(p, sizeof p, "%s/requests.csv", dir);
    FILE *f = fopen(p, "w");
    fputs("policy,history_tokens,ttft_s\n", f);
    for (int pol = 0; pol < 11; pol++)
        for (int i = 0; i < 200; i++) fprintf(f, "p%d,%d,%.6f\n", pol, i % 4 == 0 ? 0 : 16 << (i % 8), 0.01 * (1 + i % 7) * (1 + pol));
    fclose(f);
    snprintf(svg, sizeof svg, "%s/h.svg", dir);
    KvErr e;
    CHECK_MSG(plot_history_svg(svg, p, "t", 500000000, &e) == 0, "%s", e.msg);
    char *s = slurp(t, svg);
    if (s) {
        CHECK_EQ_I(count(s, "<polyline class=\"median\""), 11);
        CHECK_EQ_I(count(s, "<polyline class=\"p90\""), 11);
        CHECK_EQ_I(count(s, "<line class=\"legend\""), 11);
        CHECK_EQ_I(count(s, "<line class=\"slo\""), 2);
        CHECK_CONTAINS(s, "50 requests without history not shown");
        CHECK_CONTAINS(s, "history (tokens, log scale)");
        CHECK(!strstr(s, "nan") && !strstr(s, "inf"));
    }
    free(s);
    /* the split: three parts per policy, every policy labelled */
    SimResult res[3];
    memset(res, 0, sizeof res);
    for (int i = 0; i < 3; i++) {
        snprintf(res[i].policy, sizeof res[i].policy, "pol%d", i);
        for (int k = 1; k <= 20; k++) {
            hist_add(&res[i].queue, 1000000u * k);
            hist_add(&res[i].restore, 3000000u * k * (i + 1));
            hist_add(&res[i].prefill, 2000000u * k);
        }
    }
    snprintf(svg, sizeof svg, "%s/split.svg", dir);
    CHECK(plot_ttft_split_svg(svg, res, 3, "t", &e) == 0);
    s = slurp(t, svg);
    if (s) {
        CHECK_EQ_I(count(s, "<rect class=\"split\""), 9);
        CHECK_EQ_I(count(s, "data-part=\"restore\""), 3);
        CHECK_CONTAINS(s, ">pol2</text>");
        CHECK_CONTAINS(s, "mean time to first token (ms)");
    }
    free(s);
    /* a policy with no request measured: labelled, no bar, no "nan" (its means are absent) */
    SimResult none[2];
    memset(none, 0, sizeof none);
    snprintf(none[0].policy, sizeof none[0].policy, "measured");
    hist_add(&none[0].queue, 1000000u);
    hist_add(&none[0].restore, 1000000u);
    hist_add(&none[0].prefill, 1000000u);
    snprintf(none[1].policy, sizeof none[1].policy, "empty");
    CHECK(plot_ttft_split_svg(svg, none, 2, "t", &e) == 0);
    s = slurp(t, svg);
    if (s) {
        CHECK_EQ_I(count(s, "<rect class=\"split\""), 3);
        CHECK_CONTAINS(s, ">empty</text>");
        CHECK(!strstr(s, "nan"));
    }
    free(s);
    for (int i = 0; i < 2; i++) sim_result_free(&none[i]);
    for (int i = 0; i < 3; i++) sim_result_free(&res[i]);
}

TEST(plot_sweep_figures)
{
    const char *dir = test_tmpdir(t);
    char p[4200];
    snprintf(p, sizeof p, "%s/sweep.csv", dir);
    FILE *f = fopen(p, "w");
    fputs("point,session_rate,n_ssd,policy,metric,value\n", f);
    int pt = 0;
    for (int r = 1; r <= 4; r *= 2)
        for (int s = 1; s <= 8; s *= 2) {
            pt++;
            for (int k = 0; k < 2; k++) {
                fprintf(f, "%d,%d,%d,%s,slo_attainment,%.3f\n", pt, r, s, k ? "b" : "a", 1.0 / (r * (k + 1)));
                fprintf(f, "%d,%d,%d,%s,ttft_s.p99,%.3f\n", pt, r, s, k ? "b" : "a", 0.1 * r / s);
            }
        }
    fclose(f);
    PlotSweepSpec sp = {p, dir, "session_rate", "n_ssd", "ttft_p99", "t"};
    char written[256];
    KvErr e;
    CHECK_MSG(plot_sweep(&sp, written, sizeof written, &e) == 0, "%s", e.msg);
    CHECK_STR(written, "slo_vs_load.svg, metric_vs_load.svg, heatmap.svg");
    char svg[4200];
    snprintf(svg, sizeof svg, "%s/heatmap.svg", dir);
    char *s = slurp(t, svg);
    if (s) {
        CHECK_EQ_I(count(s, "<rect class=\"cell\""), 3 * 4 * 2);
        CHECK_CONTAINS(s, "data-value=\"0.4\""); /* rate 4, 1 SSD */
    }
    free(s);
    snprintf(svg, sizeof svg, "%s/slo_vs_load.svg", dir);
    s = slurp(t, svg);
    if (s) {
        CHECK_EQ_I(count(s, "<polyline class=\"series\""), 2 * 4); /* policy × n_ssd */
        CHECK_CONTAINS(s, "a, n_ssd=8");
    }
    free(s);
    snprintf(svg, sizeof svg, "%s/metric_vs_load.svg", dir);
    s = slurp(t, svg);
    if (s) CHECK_CONTAINS(s, "ttft_s.p99 (s)");
    free(s);
    sp.x = "nope";
    CHECK(plot_sweep(&sp, written, sizeof written, &e) != 0);
    CHECK_CONTAINS(e.msg, "--x nope is not a setting of the sweep (its settings: session_rate, n_ssd)");
    sp.x = "session_rate";
    sp.metric = "bogus";
    CHECK(plot_sweep(&sp, written, sizeof written, &e) != 0);
    CHECK_CONTAINS(e.msg, "no metric 'bogus'");
}

/* the largest x + estimated width of every <text> in s, and the canvas width */
static void text_extent(const char *s, double *right, int *width)
{
    *right = 0;
    *width = 0;
    const char *w = strstr(s, "<svg ");
    if (w && (w = strstr(w, " width=\""))) *width = atoi(w + 8);
    for (const char *p = s; (p = strstr(p, "<text")); p++) {
        const char *x = strstr(p, " x=\""), *gt = strchr(p, '>'), *end = gt ? strstr(gt, "</text>") : NULL;
        if (!x || !gt || !end || x > gt || strstr(p, "text-anchor") < gt) continue; /* start-anchored text only */
        char buf[512];
        size_t n = (size_t)(end - gt - 1) < sizeof buf - 1 ? (size_t)(end - gt - 1) : sizeof buf - 1;
        memcpy(buf, gt + 1, n);
        buf[n] = '\0';
        double r = atof(x + 4) + psvg_text_width(buf, 12);
        if (r > *right) *right = r;
    }
}

/* A sweep at docs/capacity-planning.md's grid (3 policies × 4 × 2 settings × 2 seeds): the seeds are averaged into
 * one line per series with its interval as a band, the legend's 24 entries fit inside the canvas
 * (in columns), every axis and the colour scale carry a unit. */
TEST(plot_sweep_seeds_band_legend_fits)
{
    const char *dir = test_tmpdir(t);
    char p[4200];
    snprintf(p, sizeof p, "%s/sweep.csv", dir);
    FILE *f = fopen(p, "w");
    fputs("point,n_ssd,nic,session_rate,seed,policy,metric,value\n", f);
    static const char *const pol[] = {"recompute", "kv-offload", "hcache"};
    int pt = 0;
    for (int s = 1; s <= 8; s *= 2)
        for (int nic = 0; nic < 2; nic++)
            for (int r = 1; r <= 4; r *= 2)
                for (int seed = 1; seed <= 2; seed++) {
                    pt++;
                    for (int k = 0; k < 3; k++) {
                        fprintf(f, "%d,%d,%s,%d,%d,%s,ttft_s.p99,%.3f\n", pt, s, nic ? "40GbE" : "10GbE", r, seed, pol[k],
                                0.1 * (k + 1) * r / s + 0.01 * seed);
                        fprintf(f, "%d,%d,%s,%d,%d,%s,slo_attainment,%.3f\n", pt, s, nic ? "40GbE" : "10GbE", r, seed, pol[k],
                                seed == 1 ? 1.0 : 0.9);
                    }
                }
    fclose(f);
    PlotSweepSpec sp = {p, dir, "session_rate", "n_ssd", "ttft_p99", "t"};
    char written[256], svg[4200];
    KvErr e;
    CHECK_MSG(plot_sweep(&sp, written, sizeof written, &e) == 0, "%s", e.msg);
    snprintf(svg, sizeof svg, "%s/metric_vs_load.svg", dir);
    char *s = slurp(t, svg);
    if (s) {
        CHECK_EQ_I(count(s, "<polyline class=\"series\""), 3 * 4 * 2); /* not × 2 seeds */
        CHECK_EQ_I(count(s, "<polygon class=\"band\""), 3 * 4 * 2);
        CHECK_EQ_I(count(s, "<line class=\"legend\""), 3 * 4 * 2);
        CHECK(strstr(s, "seed=") == NULL);
        CHECK_CONTAINS(s, "mean over 2 seeds");
        CHECK_CONTAINS(s, "session_rate (sessions/s)");
        CHECK_CONTAINS(s, "ttft_s.p99 (s)");
        double right;
        int width;
        text_extent(s, &right, &width);
        CHECK_MSG(width > 0 && right <= width, "text reaches x = %.0f on a canvas %d px wide", right, width);
        /* a colour per policy (its 8 combinations of n_ssd × nic told apart by dashes), listed by policy */
        CHECK_EQ_I(count(s, "<polyline class=\"series\" data-series=\"recompute, n_ssd=8, nic=40GbE\" fill=\"none\" stroke=\"#1f77b4\""), 1);
        CHECK_EQ_I(count(s, "<polyline class=\"series\" data-series=\"kv-offload, n_ssd=8, nic=40GbE\" fill=\"none\" stroke=\"#d62728\""), 1);
        CHECK_EQ_I(count(s, "stroke=\"#1f77b4\" stroke-width=\"2\""), 8);
        const char *r8 = strstr(s, "recompute, n_ssd=8, nic=40GbE</text>"), *k1 = strstr(s, "kv-offload, n_ssd=1, nic=10GbE</text>");
        CHECK(r8 && k1 && r8 < k1);
    }
    free(s);
    snprintf(svg, sizeof svg, "%s/slo_vs_load.svg", dir);
    s = slurp(t, svg);
    if (s) { /* bands cut at the metric's range: nothing drawn above 1 */
        CHECK_EQ_I(count(s, "<polygon class=\"band\""), 3 * 4 * 2);
        CHECK_CONTAINS(s, "SLO attainment (share of requests within the SLO, 0–1)");
    }
    free(s);
    snprintf(svg, sizeof svg, "%s/heatmap.svg", dir);
    s = slurp(t, svg);
    if (s) {
        CHECK_CONTAINS(s, ">(s)</text>"); /* the colour scale's unit */
        CHECK_EQ_I(count(s, "class=\"scale-tick\""), 5);
        CHECK_CONTAINS(s, "n_ssd (SSDs)");
        CHECK_CONTAINS(s, "mean over the seeds and the other settings");
    }
    free(s);
}

/* The legend's columns: as many entries per column as fit the height, columns as wide as the longest
 * entry; the title widens the canvas instead of running off it. */
TEST(plot_legend_layout)
{
    const char *names[30];
    char buf[30][40];
    for (int i = 0; i < 30; i++) {
        snprintf(buf[i], sizeof buf[i], i == 7 ? "a much longer name, k=%d" : "p%d", i);
        names[i] = buf[i];
    }
    PlotLegend L;
    psvg_legend_fit(&L, 30, names, 0, 18 * 12);
    CHECK_EQ_I(L.cols, 3);
    CHECK_EQ_I(L.rows, 10);
    CHECK(L.col_w >= 38 + (int)psvg_text_width(names[7], 12));
    CHECK_EQ_I(L.w, 3 * L.col_w);
    psvg_legend_fit(&L, 30, names, 0, 0);
    CHECK_EQ_I(L.cols, 1);
    CHECK_EQ_I(L.rows, 30);
    CHECK(psvg_text_width("mmmm", 12) > psvg_text_width("iiii", 12));
    CHECK(fabs(psvg_text_width("≤", 12) - 0.8 * 12) < 1e-9); /* one code point, not three bytes */
    const char *dir = test_tmpdir(t);
    char path[4200];
    snprintf(path, sizeof path, "%s/t.svg", dir);
    FILE *f = fopen(path, "w");
    char title[300];
    memset(title, 'x', 200);
    title[200] = '\0';
    psvg_begin(f, 100, 100, title);
    psvg_end(f);
    fclose(f);
    char *s = slurp(t, path);
    if (s) {
        double right;
        int width;
        text_extent(s, &right, &width);
        CHECK_MSG(right <= width, "title reaches %.0f on a canvas %d px wide", right, width);
    }
    free(s);
}
