/* test_html.c — report.html without a browser: the verdict from summary.json's text, escaping,
 * the parts a directory's files give (tests/html_report_test.sh opens the pages in Chromium). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "results/html.h"
#include "tests/harness.h"

static char *slurp(TestCtx *t, const char *path)
{
    size_t n;
    KvErr e;
    char *s = kv_read_file(path, &n, &e);
    CHECK_MSG(s != NULL, "%s", e.msg);
    return s;
}

static void put(const char *dir, const char *name, const char *text)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* The lowest TTFT p99 among the policies overloaded in no run wins; over seeds with the interval and
 * the ratio to the baseline; overloaded policies are named. */
TEST(html_verdict_winner)
{
    char v[2048];
    const char *one = "{\"policies\":[{\"name\":\"a\",\"ttft_s\":{\"p99\":0.2},\"load\":{\"overloaded\":false}},"
                      "{\"name\":\"b\",\"ttft_s\":{\"p99\":0.05},\"load\":{\"overloaded\":true}},"
                      "{\"name\":\"c\",\"ttft_s\":{\"p99\":0.1},\"load\":{\"overloaded\":false}}]}";
    CHECK(html_verdict(one, v, sizeof v) == 0);
    CHECK_CONTAINS(v, "c has the lowest TTFT p99: 100 ms (one run");
    CHECK_CONTAINS(v, "Next: a, 2.00× its TTFT p99.");
    CHECK_CONTAINS(v, "Overloaded (its means and percentiles depend on the run's length): b (1 of 1 run).");
    const char *reps =
        "{\"policies\":[],\"replications\":{\"seeds\":[1,2],"
        "\"metrics\":[{\"policy\":\"a\",\"ttft_p99_s\":{\"mean\":0.3,\"ci95\":0.01}},{\"policy\":\"b\",\"ttft_p99_s\":{\"mean\":0.1,\"ci95\":0.02}}],"
        "\"ratios_to_baseline\":{\"baseline\":\"a\",\"policies\":[{\"policy\":\"b\",\"ttft_p99_s\":{\"mean\":3.0,\"ci95\":0.5,\"significant\":true}}]},"
        "\"per_seed\":[{\"policies\":[{\"name\":\"a\",\"load\":{\"overloaded\":false}},{\"name\":\"b\",\"load\":{\"overloaded\":false}}]},"
        "{\"policies\":[{\"name\":\"a\",\"load\":{\"overloaded\":true}},{\"name\":\"b\",\"load\":{\"overloaded\":false}}]}]}}";
    CHECK(html_verdict(reps, v, sizeof v) == 0);
    CHECK_CONTAINS(v, "b has the lowest TTFT p99: 100 ms ± 20 ms (mean of 2 seeds, 95 % interval).");
    CHECK_CONTAINS(v, "Against the baseline a: 3.00× lower ± 0.50 (significant at 95 %).");
    CHECK_CONTAINS(v, "a (1 of 2 runs)");
    CHECK(html_verdict("not json", v, sizeof v) == -1 && v[0] == '\0');
}

/* A directory's files as a page: escaped text, sortable tables, figures as data: images, no
 * network; an unparsable summary.json is an error naming it. */
TEST(html_report_parts_escaped)
{
    const char *dir = test_tmpdir(t);
    put(dir, "summary.json", "{\"kvsim\":{\"git_rev\":\"abc\"},\"inputs\":{\"trace\":\"<t&>\",\"config\":{\"n_ssd\":4},"
                             "\"sha256\":{\"trace\":null,\"model_catalog\":\"00ff\"}},"
                             "\"policies\":[{\"name\":\"<p>\",\"ttft_s\":{\"p99\":0.01},\"load\":{\"overloaded\":false}}]}");
    put(dir, "table.md", "| policy | TTFT p99 ms |\n|---|---:|\n| <p> | 10.0 |\nwarning: <p>: overloaded\n");
    put(dir, "a.svg", "<svg xmlns=\"http://www.w3.org/2000/svg\"><text x=\"1\" y=\"1\">Fig &amp; co</text></svg>\n");
    char path[4200];
    snprintf(path, sizeof path, "%s/report.html", dir);
    KvErr e;
    CHECK_MSG(html_report_file(path, dir, "my <dir>", &e) == 0, "%s", e.msg);
    char *s = slurp(t, path);
    if (s) {
        CHECK(strstr(s, "<td class=\"name\"><p>") == NULL);
        CHECK_CONTAINS(s, "<td class=\"name\">&lt;p&gt;</td>");
        CHECK_CONTAINS(s, "kvsim report: my &lt;dir&gt;");
        CHECK_CONTAINS(s, "id=\"verdict\">&lt;p&gt; has the lowest TTFT p99: 10 ms");
        CHECK_CONTAINS(s, "<p class=\"warn\">warning: &lt;p&gt;: overloaded</p>");
        const char *w = strstr(s, "warning: &lt;p&gt;"); /* listed once, at the top */
        CHECK(w && !strstr(w + 1, "warning: &lt;p&gt;"));
        CHECK_CONTAINS(s, "<table class=\"sortable\">");
        CHECK_CONTAINS(s, "<th title=\"sort\">TTFT p99 ms</th>");
        CHECK_CONTAINS(s, "src=\"data:image/svg+xml;base64,PHN2Zy");
        CHECK_CONTAINS(s, "a.svg: Fig &amp; co</figcaption>");
        CHECK_CONTAINS(s, "&lt;t&amp;&gt;");
        CHECK_CONTAINS(s, "<code>00ff</code>");
        CHECK_CONTAINS(s, "none (built in or generated)");
        CHECK(strstr(s, "http://") == NULL && strstr(s, "https://") == NULL); /* (the SVG's namespace is inside base64) */
    }
    free(s);
    put(dir, "summary.json", "{\"policies\": [");
    CHECK(html_report_file(path, dir, NULL, &e) != 0);
    CHECK_CONTAINS(e.msg, "summary.json: not valid JSON");
}

/* A plan's directory: its bold answer lines are the verdict, its lists and bold text rendered. */
TEST(html_report_plan)
{
    const char *dir = test_tmpdir(t);
    put(dir, "plan.md", "# kvsim plan: the cheapest\n\n- base: x; **y**\n\n## p\n\n**cheapest meeting every target: n_ssd=1 <a>** (1 s)\n\n"
                        "| point | cost |\n|---|---:|\n| n_ssd=1 **(answer)** | 5 |\n");
    char path[4200];
    snprintf(path, sizeof path, "%s/report.html", dir);
    KvErr e;
    CHECK_MSG(html_report_file(path, dir, NULL, &e) == 0, "%s", e.msg);
    char *s = slurp(t, path);
    if (s) {
        CHECK_CONTAINS(s, "id=\"verdict\"><p><strong>cheapest meeting every target: n_ssd=1 &lt;a&gt;</strong> (1 s)</p>");
        CHECK_CONTAINS(s, "<ul>\n<li>base: x; <strong>y</strong></li>\n</ul>");
        CHECK_CONTAINS(s, "<td class=\"name\">n_ssd=1 <strong>(answer)</strong></td>");
        CHECK_CONTAINS(s, "<h3>kvsim plan: the cheapest</h3>");
    }
    free(s);
}

/* A compare's directory: verdict.md's block is the verdict (its lines kept, escaped), the rest of
 * it the summary table. */
TEST(html_report_compare_verdict_md)
{
    const char *dir = test_tmpdir(t);
    put(dir, "verdict.md", "\nVerdict on TTFT p99 (lower is better):\n  winner: <a>, 10 ms\n  overloaded: none\n\n"
                           "| policy | TTFT p99 ms |\n|---|---:|\n| <a> | 10 |\n");
    char path[4200];
    snprintf(path, sizeof path, "%s/report.html", dir);
    KvErr e;
    CHECK_MSG(html_report_file(path, dir, NULL, &e) == 0, "%s", e.msg);
    char *s = slurp(t, path);
    if (s) {
        CHECK_CONTAINS(s, "id=\"verdict\"><strong>Verdict on TTFT p99 (lower is better):</strong><br>  winner: &lt;a&gt;, 10 ms<br>  overloaded: none</div>");
        CHECK_CONTAINS(s, "<h2 id=\"compact\">");
        CHECK_CONTAINS(s, "<td class=\"name\">&lt;a&gt;</td><td>10</td>");
    }
    free(s);
}
