/* test_metric.c — results/metric.c: the metric table is consistent (unique names, keys, headers and
 * target names; headline positions 1..N once each; kvsim check and plan read only point metrics),
 * every output carries exactly the metrics its flag names (summary.json at the metric's path with
 * the same value, table.md's header, the replications block, the sweep's point metrics), and no
 * metric is missing from one output only: apart from the differences listed here, a metric is in
 * summary.json and the sweep, and a headline metric is in both table.md and the CI tables.
 * requests.csv's columns are docs/formats.md's. */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/harness.h"
#include "results/metric.h"
#include "results/replications.h"
#include "results/report.h"
#include "sim/cli/point.h"

/* the per-output differences there are on purpose; every other metric is in all outputs of its kind */
static const char *const k_not_in_summary[] = {"requests_per_s"}; /* requests ÷ simulated time */
static const char *const k_not_in_sweep[] = {"saved_bytes_per_token", "restore_over_lower_bound.mean",
                                             "load.request_throughput_per_s", "load.output_tokens_per_s",
                                             "load.request_goodput_per_s",
                                             /* how the engine got there, not results: summary.json only */
                                             "queue_events", "decode_steps", "cancelled_timers"};
static const char *const k_table_only[] = {"load.request_throughput_per_s", "load.output_tokens_per_s",
                                           "load.request_goodput_per_s"}; /* headline, not in the CI tables */
static const char *const k_repl_only[] = {"restore_throughput_tokens_per_s"}; /* headline, not in table.md */

static int listed(const char *const *list, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(list[i], name)) return 1;
    return 0;
}
#define LISTED(list, name) listed(list, KV_ARRAY_LEN(list), name)

TEST(metric_table_consistent)
{
    int n = metric_count(), nh = metric_headline_count();
    CHECK(n > 50);
    for (int i = 0; i < n; i++) {
        const Metric *a = metric_at(i);
        CHECK_MSG(a->name && a->unit && a->unit[0], "row %d: name and unit", i);
        CHECK_MSG(metric_find(a->name) == a, "%s: found by its name", a->name);
        for (int j = 0; j < i; j++) {
            const Metric *b = metric_at(j);
            CHECK_MSG(strcmp(a->name, b->name) != 0, "name %s twice", a->name);
            if (a->key && b->key) CHECK_MSG(strcmp(a->key, b->key) != 0, "key %s twice", a->key);
            if (a->header && b->header) CHECK_MSG(strcmp(a->header, b->header) != 0, "header %s twice", a->header);
            if (a->target && b->target) CHECK_MSG(strcmp(a->target, b->target) != 0, "target %s twice", a->target);
            if (a->target) CHECK_MSG(strcmp(a->target, b->name) != 0, "target %s is another metric's name", a->target);
        }
        unsigned o = a->outputs;
        int head = (o & (METRIC_TABLE | METRIC_REPL)) != 0;
        CHECK_MSG(head == (a->headline > 0), "%s: a headline position iff in table.md or the CI tables", a->name);
        CHECK_MSG(!head || a->header, "%s: a headline metric has a column header", a->name);
        CHECK_MSG(!(o & METRIC_REPL) || a->key, "%s: a replications metric has a key", a->name);
        /* kvsim check and plan read the point metrics */
        CHECK_MSG(!(o & METRIC_CHECK) || (o & METRIC_SWEEP), "%s: checked but not a point metric", a->name);
        CHECK_MSG(!a->target || (o & METRIC_SWEEP), "%s: a plan target but not a point metric", a->name);
        CHECK_MSG(!(o & METRIC_CHECK) || a->tol_rel > 0 || a->tol_abs > 0 || a->read == MR_U64, "%s: a tolerance", a->name);
        /* no metric missing from one output only */
        CHECK_MSG(((o & METRIC_SUMMARY) != 0) != LISTED(k_not_in_summary, a->name), "%s: summary.json", a->name);
        CHECK_MSG(((o & METRIC_SWEEP) != 0) != LISTED(k_not_in_sweep, a->name), "%s: the sweep CSV", a->name);
        if (head) {
            CHECK_MSG(((o & METRIC_TABLE) != 0) != LISTED(k_repl_only, a->name), "%s: table.md", a->name);
            CHECK_MSG(((o & METRIC_REPL) != 0) != LISTED(k_table_only, a->name), "%s: the CI tables", a->name);
        }
    }
    for (int h = 1; h <= nh; h++) {
        int k = 0;
        for (int i = 0; i < n; i++) k += metric_at(i)->headline == h;
        CHECK_MSG(k == 1, "headline position %d held by %d metrics", h, k);
    }
}

/* the value at a metric's path in a summary.json policy entry: "a.b" objects; "gpu_stage0" the
 * element 0 of "gpu_stage"; "by_history_class.long" the element whose "class" is "long" */
static const cJSON *at_path(const cJSON *o, const char *path)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *seg = strtok(buf, "."); seg && o; seg = strtok(NULL, ".")) {
        if (cJSON_IsArray(o)) {
            const cJSON *x, *hit = NULL;
            cJSON_ArrayForEach(x, o) {
                const cJSON *c = cJSON_GetObjectItemCaseSensitive(x, "class");
                if (cJSON_IsString(c) && !strcmp(c->valuestring, seg)) hit = x;
            }
            o = hit;
            continue;
        }
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, seg);
        size_t l = strlen(seg);
        if (!x && l > 1 && seg[l - 1] >= '0' && seg[l - 1] <= '9') {
            int idx = seg[l - 1] - '0';
            seg[l - 1] = '\0';
            x = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(o, seg), idx);
        }
        o = x;
    }
    return o;
}

/* a JSON number (or true/false as 1/0, null as NAN) is v: cJSON writes 15 significant digits when
 * they read back within its epsilon, so equal within that */
static int same_value(const cJSON *x, double v)
{
    if (cJSON_IsNull(x)) return isnan(v);
    if (cJSON_IsBool(x)) return v == (cJSON_IsTrue(x) ? 1 : 0);
    if (!cJSON_IsNumber(x) || !isfinite(v)) return 0;
    return fabs(x->valuedouble - v) <= 1e-14 * fabs(v);
}

TEST(metric_outputs_carry_the_table)
{
    SimConfig c;
    sim_config_defaults(&c);
    c.requests = 60;
    SimWorld w;
    KvErr e;
    if (sim_world_open(&w, &c, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    SimResult res[2];
    memset(res, 0, sizeof res);
    const char *pol[2] = {"recompute", "kv-offload"};
    for (int i = 0; i < 2; i++) CHECK_MSG(sim_run(&w, pol[i], NULL, NULL, NULL, NULL, &res[i], &e) == 0, "%s", e.msg);

    /* summary.json: every METRIC_SUMMARY row at its path with its value; no other row there */
    char path[4200];
    snprintf(path, sizeof path, "%s/summary.json", test_tmpdir(t));
    CHECK_MSG(report_summary_json(path, &w, "test", res, 2, &e) == 0, "%s", e.msg);
    char *text = kv_read_file(path, NULL, &e);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    free(text);
    const cJSON *p0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "policies"), 1);
    CHECK(p0 != NULL);
    for (int i = 0; p0 && metric_at(i); i++) {
        const Metric *m = metric_at(i);
        const cJSON *x = at_path(p0, m->name);
        if (m->outputs & METRIC_SUMMARY)
            CHECK_MSG(x && same_value(x, metric_value(m, &res[1])), "summary.json %s: %s, the table %.17g", m->name,
                      x ? cJSON_PrintUnformatted(x) : "missing", metric_value(m, &res[1]));
        else CHECK_MSG(x == NULL, "summary.json has %s, the table says it does not", m->name);
    }
    cJSON_Delete(root);

    /* the sweep's point metrics: the METRIC_SWEEP rows in table order, with their values */
    PointResult pr;
    memset(&pr, 0, sizeof pr);
    CHECK(point_add_metrics(&pr, &res[1], &e) == 0);
    int k = 0;
    for (int i = 0; metric_at(i); i++) {
        const Metric *m = metric_at(i);
        if (!(m->outputs & METRIC_SWEEP)) continue;
        CHECK_STR(point_metric_name(k), m->name);
        CHECK_MSG(k < pr.n && !strcmp(pr.m[k].name, m->name), "point metric %d is not %s", k, m->name);
        if (k < pr.n) {
            double v = metric_value(m, &res[1]);
            CHECK_MSG(pr.m[k].value == v || (isnan(v) && isnan(pr.m[k].value)), "point %s", m->name);
        }
        k++;
    }
    CHECK_EQ_I(k, pr.n);
    CHECK(point_metric_name(k) == NULL);
    point_result_free(&pr);

    /* table.md's header: the METRIC_TABLE rows in headline order */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    report_markdown(f, &w, res, 2);
    fclose(f);
    char want[1024] = "| policy |";
    for (int h = 1; h <= metric_headline_count(); h++) {
        const Metric *m = metric_headline(h, METRIC_TABLE);
        if (m) kv_catf(want, sizeof want, " %s |", m->header);
    }
    kv_catf(want, sizeof want, "\n");
    CHECK_CONTAINS(buf, want);
    free(buf);

    /* the replications block: the METRIC_REPL rows in headline order, each seed's value the table's */
    uint64_t seeds[2] = {1, 2};
    SimResult rr[4] = {res[0], res[1], res[0], res[1]};
    Replications rep = {2, 2, seeds, rr, 0, 0.95, NULL, NULL};
    cJSON *rj = repl_json(&rep, &e);
    const cJSON *ms = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(rj, "metrics"), 1);
    const cJSON *x = ms ? ms->child : NULL;
    CHECK(x && !strcmp(x->string, "policy"));
    x = x ? x->next : NULL;
    for (int h = 1; h <= metric_headline_count(); h++) {
        const Metric *m = metric_headline(h, METRIC_REPL);
        if (!m) continue;
        CHECK_MSG(x && !strcmp(x->string, m->key), "replications: %s where %s belongs", x ? x->string : "nothing", m->key);
        if (x) CHECK_MSG(same_value(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(x, "per_seed"), 0), metric_value(m, &res[1])),
                         "replications %s", m->key);
        x = x ? x->next : NULL;
    }
    CHECK_MSG(x == NULL, "replications: %s is not in the table", x ? x->string : "");
    cJSON_Delete(rj);

    for (int i = 0; i < 2; i++) sim_result_free(&res[i]);
    sim_world_close(&w);
}

/* docs/formats.md's list of the replications' headline metrics is the table's */
TEST(metric_docs_list_the_replications_metrics)
{
    KvErr e;
    char *doc = kv_read_file(test_path("docs/formats.md"), NULL, &e);
    CHECK_MSG(doc != NULL, "%s", e.msg);
    if (!doc) return;
    const char *s = strstr(doc, "The headline metrics (keys of `metrics`):");
    const char *end = s ? strstr(s, "in the\nunits") : NULL;
    CHECK(s && end);
    char want[1024] = "", got[1024] = "";
    for (int m = 0; m < repl_metric_count(); m++) kv_catf(want, sizeof want, "%s ", repl_metric_key(m));
    for (const char *q = s ? strchr(s, ':') : NULL; q && end && (q = strchr(q, '`')) && q < end;) {
        const char *r = strchr(q + 1, '`');
        if (!r) break;
        kv_catf(got, sizeof got, "%.*s ", (int)(r - q - 1), q + 1);
        q = r + 1;
    }
    CHECK_STR(got, want);
    free(doc);
}

/* requests.csv's header (one column table writes it and the rows) is docs/formats.md's column list */
TEST(metric_requests_csv_columns_documented)
{
    char *hdr = NULL;
    size_t hl = 0;
    FILE *f = open_memstream(&hdr, &hl);
    report_csv_header(f, 1, 1);
    fclose(f);
    KvErr e;
    char *doc = kv_read_file(test_path("docs/formats.md"), NULL, &e);
    CHECK_MSG(doc != NULL, "%s", e.msg);
    if (!doc || !hdr) {
        free(doc);
        free(hdr);
        return;
    }
    const char *s = strstr(doc, "### requests.csv");
    const char *end = s ? strstr(s + 1, "\n#") : NULL;
    CHECK(s && end);
    char got[2048] = "";
    /* the first cell of each row of the column table: one name, or several joined by ", " */
    for (const char *line = s; line && end && line < end; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, "| `", 3) != 0) continue;
        const char *cell_end = strchr(line + 2, '|');
        for (const char *q = line + 2; (q = strchr(q, '`')) && q < cell_end;) {
            const char *r = strchr(q + 1, '`');
            kv_catf(got, sizeof got, "%s%.*s", got[0] ? "," : "", (int)(r - q - 1), q + 1);
            q = r + 1;
        }
    }
    kv_catf(got, sizeof got, "\n");
    CHECK_STR(got, hdr);
    free(doc);
    free(hdr);
}
