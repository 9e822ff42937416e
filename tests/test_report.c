/* test_report.c — results/: what a person reads. The figures' structure (one curve per policy, every
 * policy its own colour × dash pair, axis titles, one tick formatter, the SLO line, the tail view)
 * and the Markdown table (unique headers, bytes in binary units, "–" where a ratio does not apply). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/harness.h"
#include "results/plot.h"
#include "results/report.h"

TEST(plot_tick_labels_one_format)
{
    struct { double v; const char *want; } k[] = {
        {1, "1"}, {10, "10"}, {200, "200"}, {1000, "1k"}, {2000, "2k"}, {10000, "10k"}, {100000, "100k"},
        {1e6, "1M"}, {2.5e6, "2.5M"}, {1e9, "1G"}, {999.9, "1k"}, {0.5, "0.5"}, {0.25, "0.25"}, {0.1, "0.1"},
        {0.01, "0.01"}, {0.001, "0.001"}, {1e-4, "0.0001"}, {0, "0"},
    };
    for (size_t i = 0; i < KV_ARRAY_LEN(k); i++) {
        char b[32];
        plot_tick_label(b, sizeof b, k[i].v);
        CHECK_MSG(!strcmp(b, k[i].want), "%g → '%s', wanted '%s'", k[i].v, b, k[i].want);
    }
}

TEST(plot_styles_distinct_for_many_policies)
{
    enum { N = 200 };
    static char seen[N][64];
    for (int i = 0; i < N; i++) {
        const char *col;
        char dash[32];
        plot_style(i, &col, dash, sizeof dash);
        snprintf(seen[i], sizeof seen[i], "%s|%s", col, dash);
        for (int j = 0; j < i; j++) CHECK_MSG(strcmp(seen[i], seen[j]) != 0, "policies %d and %d share style %s", j, i, seen[i]);
    }
    /* the first eight are solid and differ by colour; the ninth (ideal in `--policies all`) is dashed */
    const char *c0, *c8;
    char d0[32], d8[32];
    plot_style(0, &c0, d0, sizeof d0);
    plot_style(8, &c8, d8, sizeof d8);
    CHECK_STR(d0, "");
    CHECK(d8[0] != '\0');
}

static void fake_results(SimResult *res, int n)
{
    memset(res, 0, sizeof *res * (size_t)n);
    for (int i = 0; i < n; i++) {
        snprintf(res[i].policy, sizeof res[i].policy, "policy-%d", i);
        for (int k = 1; k <= 1000; k++) hist_add(&res[i].ttft, (uint64_t)(k * k) * (uint64_t)(1000 + 100 * i)); /* 1 µs .. ~1.5 s */
    }
}

static char *slurp(TestCtx *t, const char *path)
{
    KvErr e;
    size_t len;
    char *s = kv_read_file(path, &len, &e);
    CHECK_MSG(s != NULL, "%s", e.msg);
    return s;
}

static int count(const char *hay, const char *needle)
{
    int c = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) c++;
    return c;
}

/* the style attributes of each curve: "stroke=... stroke-dasharray=..." up to points= */
static void check_curves_distinct(TestCtx *t, const char *svg, int n)
{
    char styles[16][128];
    int k = 0;
    for (const char *p = svg; (p = strstr(p, "<polyline class=\"policy\"")) && k < 16; p++, k++) {
        const char *s = strstr(p, "stroke="), *end = strstr(p, "points=");
        CHECK(s && end && s < end);
        if (!s || !end) return;
        snprintf(styles[k], sizeof styles[k], "%.*s", (int)(end - s), s);
        for (int j = 0; j < k; j++) CHECK_MSG(strcmp(styles[j], styles[k]) != 0, "curves %d and %d: %s", j, k, styles[k]);
    }
    CHECK_EQ_I(k, n);
}

TEST(plot_figures_structure)
{
    enum { N = 9 };
    SimResult res[N];
    fake_results(res, N);
    KvErr e;
    const char *dir = test_tmpdir(t);
    CHECK_MSG(plot_write_figures(dir, res, N, "TTFT: <test> & co", 200000000, &e) == 0, "%s", e.msg);
    CHECK_STR(plot_file_list(), "ttft_cdf.svg, ttft_ccdf.svg, ttft_split.svg");
    char path[4200];
    snprintf(path, sizeof path, "%s/ttft_cdf.svg", dir);
    char *cdf = slurp(t, path);
    snprintf(path, sizeof path, "%s/ttft_ccdf.svg", dir);
    char *ccdf = slurp(t, path);
    if (!cdf || !ccdf) return;
    const char *both[] = {cdf, ccdf};
    for (int f = 0; f < 2; f++) {
        const char *s = both[f];
        CHECK_EQ_I(count(s, "<polyline class=\"policy\""), N);
        check_curves_distinct(t, s, N);
        CHECK_EQ_I(count(s, "<line class=\"legend\""), N);
        CHECK_CONTAINS(s, "TTFT (ms, log scale)</text>");
        CHECK_CONTAINS(s, "&lt;test&gt; &amp; co");
        CHECK_CONTAINS(s, "TTFT SLO 200 ms</text>");
        CHECK_EQ_I(count(s, "<line class=\"slo\""), 1);
        CHECK_CONTAINS(s, ">1k</text>");  /* 1 s on the ms axis */
        CHECK(strstr(s, "e+") == NULL);    /* no exponent spelling anywhere */
        CHECK(strstr(s, ">1000<") == NULL); /* 1000 is always "1k" */
        CHECK(strstr(s, "nan") == NULL && strstr(s, "inf") == NULL);
    }
    CHECK_CONTAINS(cdf, "fraction of requests with TTFT ≤ x");
    CHECK_CONTAINS(cdf, ">0.75</text>");
    /* the tail view: log 1 − F down to one request in 1000, percentile marks */
    CHECK_CONTAINS(ccdf, "TTFT tail (1 − CDF) — ");
    CHECK_CONTAINS(cdf, "TTFT CDF — ");
    CHECK_CONTAINS(ccdf, "fraction of requests with TTFT &gt; x (log scale)");
    CHECK_CONTAINS(ccdf, ">0.001</text>");
    CHECK(strstr(ccdf, ">0.0001</text>") == NULL);
    CHECK_CONTAINS(ccdf, ">p99.9</text>");
    free(cdf);
    free(ccdf);
    /* no SLO: no line */
    CHECK(plot_write_figures(dir, res, N, "x", 0, &e) == 0);
    snprintf(path, sizeof path, "%s/ttft_cdf.svg", dir);
    cdf = slurp(t, path);
    if (cdf) CHECK(strstr(cdf, "class=\"slo\"") == NULL);
    free(cdf);
    for (int i = 0; i < N; i++) sim_result_free(&res[i]);
}

TEST(report_human_bytes_units)
{
    struct { double v; const char *want; } k[] = {
        {0, "0 B"}, {512, "512 B"}, {1023, "1023 B"}, {1024, "1 KiB"}, {524288, "512 KiB"}, {253952, "248 KiB"},
        {66560, "65 KiB"}, {1536, "1.5 KiB"}, {12800, "12.5 KiB"}, {1048576, "1 MiB"}, {1.5 * 1048576, "1.5 MiB"},
        {40.0 * 1073741824, "40 GiB"}, {1234567, "1.18 MiB"},
    };
    for (size_t i = 0; i < KV_ARRAY_LEN(k); i++) {
        char b[32];
        report_human_bytes(b, sizeof b, k[i].v);
        CHECK_MSG(!strcmp(b, k[i].want), "%g → '%s', wanted '%s'", k[i].v, b, k[i].want);
    }
}

TEST(report_table_headers_units_and_not_applicable)
{
    SimConfig c;
    sim_config_defaults(&c);
    SimWorld w;
    KvErr e;
    if (sim_world_open(&w, &c, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    SimResult res[2];
    fake_results(res, 2);
    snprintf(res[0].policy, sizeof res[0].policy, "kv-offload");
    res[0].saved_bytes_per_token = 524288;
    res[0].requests = 1000;
    hist_add(&res[0].lb_ratio, 2460); /* ratios are kept ×1000 */
    snprintf(res[1].policy, sizeof res[1].policy, "ideal");
    res[1].requests = 1000;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    report_markdown(f, &w, res, 2);
    fclose(f);
    /* the header row: every cell unique */
    const char *h = strstr(buf, "| policy |");
    CHECK(h != NULL);
    if (h) {
        char row[1024];
        snprintf(row, sizeof row, "%.*s", (int)(strchr(h, '\n') - h), h);
        char cells[32][64];
        int nc = 0;
        for (char *tok = strtok(row, "|"); tok && nc < 32; tok = strtok(NULL, "|")) {
            while (*tok == ' ') tok++;
            snprintf(cells[nc], sizeof cells[nc], "%s", tok);
            for (int j = 0; j < nc; j++) CHECK_MSG(strcmp(cells[j], cells[nc]) != 0, "header '%s' twice", cells[nc]);
            nc++;
        }
        CHECK_EQ_I(nc, 18); /* the 13 of before, then req/s, out tok/s, goodput req/s, E2E mean and p99 at the end */
    }
    CHECK_CONTAINS(buf, "TTFT p99 ms");
    CHECK_CONTAINS(buf, "restore p99 ms");
    CHECK_CONTAINS(buf, "TBT p99 ms");
    /* no request kept in the load window (the results are made by hand): the rates are absent */
    CHECK_CONTAINS(buf, "| 512 KiB | 2.46 | 0.000 | – | – | – | – |\n");
    CHECK_CONTAINS(buf, "| 0 B | – | 0.000 | – | – | – | – |\n");
    CHECK_CONTAINS(buf, "E2E p99 ms");
    CHECK_CONTAINS(buf, "goodput req/s");
    CHECK(strstr(buf, "524288") == NULL);
    free(buf);
    for (int i = 0; i < 2; i++) sim_result_free(&res[i]);
    sim_world_close(&w);
}

/* requests.csv carries the trace's own session id next to the dense one, CSV-quoted when needed */
static char *run_to_csv(TestCtx *t, const char *trace, const char *name)
{
    SimConfig c;
    sim_config_defaults(&c);
    snprintf(c.trace, sizeof c.trace, "%s", trace);
    c.requests = 6;
    SimWorld w;
    KvErr e;
    if (sim_world_open(&w, &c, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return NULL;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", test_tmpdir(t), name);
    ReqCsv csv;
    SimResult res;
    CHECK(report_csv_open(&csv, path, &e) == 0);
    csv.policy = "recompute";
    int rc = sim_run(&w, "recompute", report_csv_row, &csv, NULL, NULL, &res, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    CHECK(report_csv_commit(&csv, &e) == 0);
    sim_result_free(&res);
    sim_world_close(&w);
    return slurp(t, path);
}

TEST(report_requests_csv_session_id)
{
    const char *trace = test_write_file(t, "names.csv",
                                        "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n"
                                        "alpha,0,0.5,100,10,0\n"
                                        "\"with, comma\",0,1.0,200,20,0\n"
                                        "\"say \"\"hi\"\"\",0,1.5,50,5,0\n"
                                        "alpha,1,2.0,30,5,110\n");
    char *s = run_to_csv(t, trace, "names-requests.csv");
    if (!s) return;
    CHECK_CONTAINS(s, "policy,request,session,session_id,turn,replica,");
    CHECK_CONTAINS(s, "recompute,0,0,alpha,0,");
    CHECK_CONTAINS(s, "recompute,3,0,alpha,1,");
    CHECK_CONTAINS(s, "recompute,1,1,\"with, comma\",0,");
    CHECK_CONTAINS(s, "recompute,2,2,\"say \"\"hi\"\"\",0,");
    free(s);
    s = run_to_csv(t, "sharegpt4", "gen-requests.csv");
    if (!s) return;
    CHECK_CONTAINS(s, "recompute,0,0,sharegpt4-0,0,");
    free(s);
    s = run_to_csv(t, test_path("tests/fixtures/traces/vidur.csv"), "vidur-requests.csv");
    if (!s) return;
    CHECK_CONTAINS(s, "recompute,1,1,1,0,"); /* the second data row */
    free(s);
}

TEST(report_seconds9_is_printf_text)
{
    /* requests.csv's integer formatting of ns as seconds must print what "%.9f" of ns / 1e9 did */
    int64_t edge[] = {0, 1, 9, 10, 999999999, 1000000000, 1000000001, 123456789012, 4503599627370495LL,
                      4503599627370496LL, 7999999999999999LL, 8000000000000000LL, 8000000000000001LL,
                      9007199254740993LL, INT64_MAX, -1, -999999999, INT64_MIN};
    char want[64], got[64];
    uint64_t s = 88172645463325252ULL;
    int bad = 0, n = 0;
    for (int i = 0; i < 200000 + (int)KV_ARRAY_LEN(edge); i++) {
        int64_t v;
        if (i < (int)KV_ARRAY_LEN(edge)) {
            v = edge[i];
        } else {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            v = (int64_t)(s >> (s % 64)); /* every magnitude */
            if (s & 1) v = v % 10000000000000000LL;
        }
        snprintf(want, sizeof want, "%.9f", (double)v / 1e9);
        *report_app_seconds9(got, v) = '\0';
        if (strcmp(want, got) != 0 && bad++ < 5) CHECK_MSG(0, "%lld: %s vs %s", (long long)v, want, got);
        n++;
    }
    CHECK_EQ_I(bad, 0);
    CHECK(n > 200000);
}

TEST(report_fixed9_is_printf_text)
{
    /* the two double fields of requests.csv (mean TBT, restore lower bound): random doubles of every
     * magnitude, decimal ties (odd multiples of 2^-k that land on half a nanosecond), edges */
    char want[400], got[400];
    uint64_t s = 0x2545F4914F6CDD1DULL;
    int bad = 0;
    double edge[] = {0, 5e-324, 1e-10, 4.9999999999999e-10, 5e-10, 1.5e-9, 0.0009765625, 0.0029296875, 1.0 / 1024 / 1024,
                     0.5, 1, 999999999.9999999, 1e9, 1e300, -0.0, -1.5, NAN, INFINITY, 123456.0000000005};
    for (int i = 0; i < 300000 + (int)KV_ARRAY_LEN(edge); i++) {
        double d;
        if (i < (int)KV_ARRAY_LEN(edge)) {
            d = edge[i];
        } else {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            switch (i % 3) {
            case 0: d = (double)(s >> 11) * 0x1p-53 * pow(10, (double)(int)(s % 24) - 14); break;
            case 1: d = (double)(s % 2000000000) / 1e9; break;                    /* ns / 1e9 */
            default: d = (double)(2 * (s % 4000000) + 1) / (double)(1u << (10 + s % 12)); /* ties */
            }
        }
        snprintf(want, sizeof want, "%.9f", d);
        *kv_app_fixed(got, d, 9) = '\0';
        if (strcmp(want, got) != 0 && bad++ < 5) CHECK_MSG(0, "%.17g: %s vs %s", d, want, got);
    }
    CHECK_EQ_I(bad, 0);
}
