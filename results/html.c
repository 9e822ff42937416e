/* html.c — see html.h. */
#include "results/html.h"

#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void html_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(*s, f);
        }
    }
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* the file's text, NULL when it is absent; an error when present but unreadable */
static int read_opt(const char *dir, const char *name, char **out, KvErr *e)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    *out = NULL;
    if (!exists(path)) return 0;
    size_t len;
    *out = kv_read_file(path, &len, e);
    return *out ? 0 : -1;
}

/* ------------------------------------------------------------------ the verdict */

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void ms(char *b, size_t n, double s)
{
    if (fabs(s) >= 1) snprintf(b, n, "%.3g s", s);
    else snprintf(b, n, "%.3g ms", s * 1e3);
}

/* overloaded seeds of policy p (replications: every seed; one run: its own load block) */
static int overloaded_count(const cJSON *sum, const char *policy, int *seeds)
{
    const cJSON *rep = cJSON_GetObjectItemCaseSensitive(sum, "replications");
    const cJSON *per = rep ? cJSON_GetObjectItemCaseSensitive(rep, "per_seed") : NULL;
    int n = 0, total = 0;
    const cJSON *seed;
    if (cJSON_IsArray(per)) {
        cJSON_ArrayForEach(seed, per)
        {
            const cJSON *pol;
            cJSON_ArrayForEach(pol, cJSON_GetObjectItemCaseSensitive(seed, "policies"))
            {
                const char *nm = str(pol, "name");
                if (!nm || strcmp(nm, policy)) continue;
                total++;
                const cJSON *load = cJSON_GetObjectItemCaseSensitive(pol, "load");
                n += cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(load, "overloaded"));
            }
        }
    } else {
        const cJSON *pol;
        cJSON_ArrayForEach(pol, cJSON_GetObjectItemCaseSensitive(sum, "policies"))
        {
            const char *nm = str(pol, "name");
            if (!nm || strcmp(nm, policy)) continue;
            total++;
            n += cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pol, "load"), "overloaded"));
        }
    }
    *seeds = total;
    return n;
}

int html_verdict(const char *summary_json, char *buf, size_t cap)
{
    buf[0] = '\0';
    cJSON *sum = summary_json ? cJSON_Parse(summary_json) : NULL;
    if (!sum) return -1;
    enum { MAXP = 64 };
    const char *name[MAXP];
    double p99[MAXP], ci[MAXP];
    int over[MAXP], runs[MAXP], np = 0;
    const cJSON *rep = cJSON_GetObjectItemCaseSensitive(sum, "replications"), *m;
    int nseeds = rep ? cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(rep, "seeds")) : 0;
    if (rep) {
        cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(rep, "metrics"))
        {
            const cJSON *q = cJSON_GetObjectItemCaseSensitive(m, "ttft_p99_s");
            if (np == MAXP || !str(m, "policy") || !q) continue;
            name[np] = str(m, "policy"), p99[np] = num(q, "mean"), ci[np] = num(q, "ci95");
            np++;
        }
    } else {
        cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(sum, "policies"))
        {
            const cJSON *q = cJSON_GetObjectItemCaseSensitive(m, "ttft_s");
            if (np == MAXP || !str(m, "name") || !q) continue;
            name[np] = str(m, "name"), p99[np] = num(q, "p99"), ci[np] = NAN;
            np++;
        }
    }
    for (int i = 0; i < np; i++) over[i] = overloaded_count(sum, name[i], &runs[i]);
    /* the winner: the lowest TTFT p99 among the policies overloaded in no run (all of them when
     * every one is) */
    int best = -1, any_ok = 0;
    for (int i = 0; i < np; i++) any_ok |= over[i] == 0 && isfinite(p99[i]);
    for (int i = 0; i < np; i++)
        if (isfinite(p99[i]) && (!any_ok || over[i] == 0) && (best < 0 || p99[i] < p99[best])) best = i;
    size_t l = 0;
#define OUT(...) (l += (size_t)snprintf(buf + l, l < cap ? cap - l : 0, __VA_ARGS__))
    if (best < 0) {
        OUT("No policy has a TTFT p99 in summary.json (no request was measured).");
    } else {
        char a[32], b[32];
        ms(a, sizeof a, p99[best]);
        if (nseeds > 1) {
            ms(b, sizeof b, ci[best]);
            OUT("%s has the lowest TTFT p99%s: %s ± %s (mean of %d seeds, 95 %% interval).", name[best],
                any_ok ? "" : " (every policy is overloaded)", a, b, nseeds);
        } else {
            OUT("%s has the lowest TTFT p99%s: %s (one run; --seeds N gives intervals).", name[best],
                any_ok ? "" : " (every policy is overloaded)", a);
        }
        const cJSON *rat = rep ? cJSON_GetObjectItemCaseSensitive(rep, "ratios_to_baseline") : NULL;
        const char *base = rat ? str(rat, "baseline") : NULL;
        int found = 0;
        if (base && strcmp(base, name[best])) {
            cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(rat, "policies"))
            {
                const char *nm = str(m, "policy");
                const cJSON *q = cJSON_GetObjectItemCaseSensitive(m, "ttft_p99_s");
                if (!nm || strcmp(nm, name[best]) || !q || !isfinite(num(q, "mean"))) continue;
                OUT(" Against the baseline %s: %.2f× lower ± %.2f (%s at 95 %%).", base, num(q, "mean"), num(q, "ci95"),
                    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(q, "significant")) ? "significant" : "not significant");
                found = 1;
            }
        }
        if (!found) { /* against the next best, as a plain ratio */
            int next = -1;
            for (int i = 0; i < np; i++)
                if (i != best && isfinite(p99[i]) && (!any_ok || over[i] == 0) && (next < 0 || p99[i] < p99[next])) next = i;
            if (next >= 0 && p99[best] > 0) OUT(" Next: %s, %.2f× its TTFT p99.", name[next], p99[next] / p99[best]);
        }
    }
    int first = 1;
    for (int i = 0; i < np; i++) {
        if (!over[i]) continue;
        if (first) OUT(" Overloaded (its means and percentiles depend on the run's length):");
        OUT("%s %s (%d of %d %s)", first ? "" : ",", name[i], over[i], runs[i], runs[i] == 1 ? "run" : "runs");
        first = 0;
    }
    if (!first) OUT(".");
#undef OUT
    cJSON_Delete(sum);
    return 0;
}

/* ------------------------------------------------------------------ markdown text as HTML */

/* one table row's cells: between the '|'s, trimmed */
static int split_row(char *line, char **cells, int max)
{
    int n = 0;
    char *p = line + 1; /* after the leading '|' */
    while (*p && n < max) {
        char *bar = strchr(p, '|');
        if (!bar) break;
        *bar = '\0';
        while (*p == ' ') p++;
        char *end = bar;
        while (end > p && end[-1] == ' ') *--end = '\0';
        cells[n++] = p;
        p = bar + 1;
    }
    return n;
}

/* text with markdown's **bold** as <strong> (an unpaired ** stays as written) */
static void md_inline(FILE *f, const char *s)
{
    char *copy = strdup(s);
    if (!copy) return;
    char *p = copy;
    for (;;) {
        char *a = strstr(p, "**"), *b = a ? strstr(a + 2, "**") : NULL;
        if (!b) break;
        *a = '\0';
        *b = '\0';
        html_text(f, p);
        fputs("<strong>", f);
        html_text(f, a + 2);
        fputs("</strong>", f);
        p = b + 2;
    }
    html_text(f, p);
    free(copy);
}

static int is_warning(const char *line) { return !strncmp(line, "warning:", 8) || !strncmp(line, "note:", 5); }

/* Markdown as the result files write it: tables (a header row, a separator, rows), headings,
 * fenced blocks, text lines. Tables get class "sortable". skip_warnings: leave out the warning and
 * note lines (the page lists them once, at its top). */
static void markdown(FILE *f, const char *text, int skip_warnings)
{
    char *copy = strdup(text);
    if (!copy) return;
    int in_table = 0, header = 0, in_fence = 0, in_list = 0;
    for (char *save = NULL, *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (!strncmp(line, "```", 3)) {
            fputs(in_fence ? "</pre>\n" : "<pre>", f);
            in_fence = !in_fence;
            continue;
        }
        if (in_fence) {
            html_text(f, line);
            fputc('\n', f);
            continue;
        }
        if (line[0] == '|') {
            char *cells[64];
            if (!in_table) fputs("<div class=\"scroll\"><table class=\"sortable\">\n", f), in_table = 1, header = 1;
            if (!strncmp(line, "|---", 4) || !strncmp(line, "| ---", 5) || !strncmp(line, "|:--", 4)) continue;
            int n = split_row(line, cells, 64);
            fputs(header ? "<thead><tr>" : "<tr>", f);
            for (int i = 0; i < n; i++) {
                fputs(header ? "<th title=\"sort\">" : i ? "<td>" : "<td class=\"name\">", f);
                md_inline(f, cells[i]);
                fputs(header ? "</th>" : "</td>", f);
            }
            fputs(header ? "</tr></thead><tbody>\n" : "</tr>\n", f);
            header = 0;
            continue;
        }
        if (in_table) fputs("</tbody></table></div>\n", f), in_table = 0;
        if (!strncmp(line, "- ", 2)) {
            if (!in_list) fputs("<ul>\n", f), in_list = 1;
            fputs("<li>", f);
            md_inline(f, line + 2);
            fputs("</li>\n", f);
            continue;
        }
        if (in_list) fputs("</ul>\n", f), in_list = 0;
        if (line[0] == '#') {
            int lv = 0;
            while (line[lv] == '#') lv++;
            const char *t = line + lv;
            while (*t == ' ') t++;
            fprintf(f, "<h%d>", lv + 2 > 6 ? 6 : lv + 2);
            html_text(f, t);
            fprintf(f, "</h%d>\n", lv + 2 > 6 ? 6 : lv + 2);
            continue;
        }
        if (skip_warnings && is_warning(line)) continue;
        fputs(is_warning(line) ? "<p class=\"warn\">" : "<p>", f);
        md_inline(f, line);
        fputs("</p>\n", f);
    }
    if (in_table) fputs("</tbody></table></div>\n", f);
    if (in_list) fputs("</ul>\n", f);
    if (in_fence) fputs("</pre>\n", f);
    free(copy);
}

/* ------------------------------------------------------------------ the directory's files */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* the directory's regular files, in name order (report.html itself and temporaries left out) */
static int list_files(const char *dir, char ***out, int *n, KvErr *e)
{
    DIR *d = opendir(dir);
    if (!d) return kv_err(e, "%s: cannot read the directory: %s", dir, strerror(errno));
    char **v = NULL;
    int m = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (de->d_name[0] == '.' || !exists(path) || !strcmp(de->d_name, "report.html") || strstr(de->d_name, ".tmp.")) continue;
        if (m == cap) {
            cap = cap ? 2 * cap : 32;
            char **nv = realloc(v, sizeof *v * (size_t)cap);
            if (!nv) break;
            v = nv;
        }
        v[m++] = strdup(de->d_name);
    }
    closedir(d);
    if (m) qsort(v, (size_t)m, sizeof *v, cmp_str);
    *out = v;
    *n = m;
    return 0;
}

/* (encoded into a buffer written a block at a time: a stdio call per character was ~5 % of a small
 * run's instructions) */
static void base64(FILE *f, const unsigned char *s, size_t n)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char buf[4096];
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0) | (i + 2 < n ? s[i + 2] : 0);
        buf[k++] = a[v >> 18 & 63];
        buf[k++] = a[v >> 12 & 63];
        buf[k++] = i + 1 < n ? a[v >> 6 & 63] : '=';
        buf[k++] = i + 2 < n ? a[v & 63] : '=';
        if (k + 4 > sizeof buf) {
            fwrite(buf, 1, k, f);
            k = 0;
        }
    }
    if (k) fwrite(buf, 1, k, f);
}

/* a figure's title: the text of its first <text> element (our figures put the title there) */
static void svg_title(const char *svg, char *buf, size_t cap)
{
    buf[0] = '\0';
    const char *t = strstr(svg, "<text");
    const char *gt = t ? strchr(t, '>') : NULL, *end = gt ? strstr(gt, "</text>") : NULL;
    if (!end) return;
    size_t n = (size_t)(end - gt - 1);
    if (n >= cap) n = cap - 1;
    memcpy(buf, gt + 1, n);
    buf[n] = '\0';
    /* undo the XML escapes our writer makes; html_text escapes again */
    static const char *const ent[][2] = {{"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&amp;", "&"}};
    for (size_t k = 0; k < KV_ARRAY_LEN(ent); k++)
        for (char *p; (p = strstr(buf, ent[k][0]));) memmove(p + 1, p + strlen(ent[k][0]), strlen(p + strlen(ent[k][0])) + 1), *p = ent[k][1][0];
}

static const char k_style[] =
    "body{font-family:sans-serif;margin:24px;max-width:1400px;color:#222}h1{font-size:20px}h2{font-size:17px;margin-top:28px;"
    "border-bottom:1px solid #ddd}.verdict{font-size:15px;background:#eef5ff;border-left:4px solid #1f77b4;padding:10px 14px;white-space:pre-wrap}"
    ".warn{background:#fff4e5;border-left:4px solid #e67e22;padding:4px 10px;margin:4px 0}.scroll{overflow-x:auto}"
    "table{border-collapse:collapse;font-size:13px;margin:8px 0}th,td{border:1px solid #ccc;padding:3px 7px;text-align:right;"
    "white-space:nowrap}td.name,th:first-child{text-align:left}th{background:#f3f3f3;cursor:pointer}"
    "th[data-dir=asc]::after{content:' \\25B2'}th[data-dir=desc]::after{content:' \\25BC'}tbody tr:nth-child(even){background:#fafafa}"
    "figure{margin:16px 0}figure img{max-width:100%;border:1px solid #eee}figcaption{font-size:13px;color:#555}"
    "#js-errors{color:#b00;white-space:pre}code{font-size:12px}";

/* Sorting: a click on a column head orders the rows by it (numbers by value: "43.8 ± 7.1" by 43.8,
 * "2 of 3" by 2, "512 KiB" by its bytes, below "1 MiB"; other text alphabetically; cells without a
 * number last), again to reverse. */
static const char k_script[] =
    "window.onerror=function(m){var e=document.getElementById('js-errors');e.textContent+=m+'\\n';e.hidden=false;};\n"
    "var kvUnit={kib:1024,mib:1048576,gib:1073741824,tib:1099511627776,kb:1e3,mb:1e6,gb:1e9,tb:1e12};\n"
    "function kvKey(t){var m=t.replace(/\\u2212/g,'-').match(/^[\\s+]*(-?[0-9]+(\\.[0-9]+)?(e[-+]?[0-9]+)?)\\s*([KMGT]i?B)?/i);"
    "return m?parseFloat(m[1])*(m[4]?kvUnit[m[4].toLowerCase()]:1):null;}\n"
    "document.querySelectorAll('table.sortable').forEach(function(tab){var hs=tab.tHead?tab.tHead.rows[0].cells:[];"
    "Array.prototype.forEach.call(hs,function(th,i){th.addEventListener('click',function(){var tb=tab.tBodies[0];"
    "var rows=Array.prototype.slice.call(tb.rows);var asc=th.dataset.dir!=='asc';"
    "Array.prototype.forEach.call(hs,function(h){delete h.dataset.dir;});th.dataset.dir=asc?'asc':'desc';"
    "rows.sort(function(a,b){var x=a.cells[i]?a.cells[i].textContent:'',y=b.cells[i]?b.cells[i].textContent:'';"
    "var kx=kvKey(x),ky=kvKey(y),c=(kx!==null&&ky!==null)?kx-ky:kx!==null?-1:ky!==null?1:x.localeCompare(y);"
    "return asc?c:-c;});rows.forEach(function(r){tb.appendChild(r);});});});});\n"
    "document.body.setAttribute('data-scripts','ran');\n";

/* summary.json's inputs: the configuration as a table, the other entries as text, the hashes */
static void inputs(FILE *f, const cJSON *sum)
{
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(sum, "inputs"), *it;
    const cJSON *kv = cJSON_GetObjectItemCaseSensitive(sum, "kvsim");
    fputs("<h2 id=\"inputs\">Inputs</h2>\n", f);
    if (kv && str(kv, "git_rev")) {
        fputs("<p>kvsim revision <code>", f);
        html_text(f, str(kv, "git_rev"));
        fputs("</code></p>\n", f);
    }
    if (!in) return;
    fputs("<div class=\"scroll\"><table class=\"sortable\"><thead><tr><th>input</th><th>value</th></tr></thead><tbody>\n", f);
    cJSON_ArrayForEach(it, in)
    {
        if (!strcmp(it->string, "config") || !strcmp(it->string, "sha256")) continue;
        char *v = cJSON_IsString(it) ? NULL : cJSON_PrintUnformatted(it);
        fputs("<tr><td class=\"name\">", f);
        html_text(f, it->string);
        fputs("</td><td class=\"name\">", f);
        html_text(f, v ? v : it->valuestring);
        fputs("</td></tr>\n", f);
        free(v);
    }
    const cJSON *sha = cJSON_GetObjectItemCaseSensitive(in, "sha256");
    cJSON_ArrayForEach(it, sha)
    {
        fputs("<tr><td class=\"name\">sha256 of ", f);
        html_text(f, it->string);
        fputs("</td><td class=\"name\"><code>", f);
        html_text(f, cJSON_IsString(it) ? it->valuestring : "none (built in or generated)");
        fputs("</code></td></tr>\n", f);
    }
    fputs("</tbody></table></div>\n", f);
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(in, "config");
    if (!cfg) return;
    fputs("<details><summary>Every setting</summary><div class=\"scroll\"><table class=\"sortable\"><thead><tr><th>setting</th>"
          "<th>value</th></tr></thead><tbody>\n", f);
    cJSON_ArrayForEach(it, cfg)
    {
        char *v = cJSON_IsString(it) ? NULL : cJSON_PrintUnformatted(it);
        fputs("<tr><td class=\"name\">", f);
        html_text(f, it->string);
        fputs("</td><td class=\"name\">", f);
        html_text(f, v ? v : it->valuestring);
        fputs("</td></tr>\n", f);
        free(v);
    }
    fputs("</tbody></table></div></details>\n", f);
}

int html_report(FILE *f, const char *dir, const char *name, KvErr *e)
{
    char *summary = NULL, *table = NULL, *plan = NULL, *repro = NULL, *verdict_md = NULL, *map = NULL, **files = NULL;
    int nf = 0, rc = -1;
    cJSON *sum = NULL;
    if (read_opt(dir, "summary.json", &summary, e) || read_opt(dir, "table.md", &table, e) || read_opt(dir, "plan.md", &plan, e) ||
        read_opt(dir, "report.md", &repro, e) || read_opt(dir, "verdict.md", &verdict_md, e) || read_opt(dir, "map.md", &map, e) ||
        list_files(dir, &files, &nf, e))
        goto done;
    if (summary && !(sum = cJSON_Parse(summary))) {
        kv_err(e, "%s/summary.json: not valid JSON (near byte %ld)", dir,
               cJSON_GetErrorPtr() ? (long)(cJSON_GetErrorPtr() - summary) : -1L);
        goto done;
    }
    if (!name) name = dir;
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>kvsim report: ", f);
    html_text(f, name);
    fprintf(f, "</title>\n<style>%s</style>\n</head><body>\n<h1>kvsim report: ", k_style);
    html_text(f, name);
    fputs("</h1>\n<p id=\"js-errors\" hidden></p>\n", f);
    char verdict[4096];
    const char *compact = NULL; /* verdict.md after its verdict block: the compact table */
    if (verdict_md && strstr(verdict_md, "Verdict")) { /* compare's own verdict: its block, lines kept */
        const char *a = strstr(verdict_md, "Verdict"), *b = strstr(a, "\n\n");
        size_t n = b ? (size_t)(b - a) : strlen(a);
        char *block = strndup(a, n);
        fputs("<div class=\"verdict\" id=\"verdict\">", f);
        int first = 1;
        for (char *save = NULL, *line = block ? strtok_r(block, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save)) {
            fputs(first ? "<strong>" : "<br>", f);
            html_text(f, line);
            if (first) fputs("</strong>", f);
            first = 0;
        }
        fputs("</div>\n", f);
        free(block);
        compact = b ? b + 2 : NULL;
    } else if (summary && html_verdict(summary, verdict, sizeof verdict) == 0) {
        fputs("<p class=\"verdict\" id=\"verdict\">", f);
        html_text(f, verdict);
        fputs("</p>\n", f);
    } else if (plan) { /* a plan's answers: its lines that begin in bold, one per policy */
        fputs("<div class=\"verdict\" id=\"verdict\">", f);
        int any = 0;
        char *copy = strdup(plan);
        for (char *save = NULL, *line = copy ? strtok_r(copy, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save))
            if (!strncmp(line, "**", 2)) fputs("<p>", f), md_inline(f, line), fputs("</p>", f), any = 1;
        free(copy);
        if (!any) fputs("A plan: its answer is below.", f);
        fputs("</div>\n", f);
    } else if (map) { /* kvsim map: its head lines */
        fputs("<p class=\"verdict\" id=\"verdict\">A decision map (kvsim map): the fastest restoration by history length and resource, "
              "with margins, flip probabilities and break-even lines; below.</p>\n", f);
    } else {
        fputs("<p class=\"verdict\" id=\"verdict\">", f);
        html_text(f, repro ? "Published claims, judged: below." : "No summary.json here (a sweep's figures): the figures and files are below.");
        fputs("</p>\n", f);
    }
    /* the warnings first, once, as the table prints them */
    int warned = 0;
    if (table) {
        int any = 0;
        char *copy = strdup(table);
        for (char *save = NULL, *line = copy ? strtok_r(copy, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save)) {
            if (!is_warning(line)) continue;
            if (!any) fputs("<h2 id=\"warnings\">Warnings</h2>\n", f), any = 1, warned = 1;
            fputs("<p class=\"warn\">", f);
            html_text(f, line);
            fputs("</p>\n", f);
        }
        free(copy);
    }
    static const struct {
        const char *id, *head;
    } part[] = {{"compact", "Summary table (click a column to sort)"},
                {"tables", "Tables (click a column to sort)"},
                {"plan", "Plan"},
                {"claims", "Published claims"},
                {"map", "Decision map"}};
    const char *text[] = {compact, table, plan, repro, map};
    for (int k = 0; k < 5; k++) {
        if (!text[k]) continue;
        fprintf(f, "<h2 id=\"%s\">%s</h2>\n", part[k].id, part[k].head);
        markdown(f, text[k], warned);
    }
    int figs = 0;
    for (int i = 0; i < nf; i++) {
        size_t l = strlen(files[i]);
        if (l < 5 || strcmp(files[i] + l - 4, ".svg")) continue;
        char path[4400], cap[600];
        size_t len;
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        char *svg = kv_read_file(path, &len, e);
        if (!svg) goto done;
        if (!figs++) fputs("<h2 id=\"figures\">Figures</h2>\n", f);
        svg_title(svg, cap, sizeof cap);
        fputs("<figure><img alt=\"", f);
        html_text(f, cap[0] ? cap : files[i]);
        fputs("\" src=\"data:image/svg+xml;base64,", f);
        base64(f, (const unsigned char *)svg, len);
        fputs("\"><figcaption>", f);
        html_text(f, files[i]);
        if (cap[0]) fputs(": ", f), html_text(f, cap);
        fputs("</figcaption></figure>\n", f);
        free(svg);
    }
    if (sum) inputs(f, sum);
    if (nf) {
        fputs("<h2 id=\"files\">Files</h2>\n<ul>\n", f);
        for (int i = 0; i < nf; i++) {
            char path[4400];
            struct stat st;
            snprintf(path, sizeof path, "%s/%s", dir, files[i]);
            fputs("<li><a href=\"", f);
            html_text(f, files[i]); /* relative: beside report.html */
            fputs("\">", f);
            html_text(f, files[i]);
            fprintf(f, "</a> (%lld bytes)</li>\n", stat(path, &st) == 0 ? (long long)st.st_size : 0LL);
        }
        fputs("</ul>\n", f);
    }
    fprintf(f, "<script>\n%s</script>\n</body></html>\n", k_script);
    rc = 0;
done:
    cJSON_Delete(sum);
    free(summary);
    free(table);
    free(plan);
    free(repro);
    free(verdict_md);
    free(map);
    for (int i = 0; i < nf; i++) free(files[i]);
    free(files);
    return rc;
}

int html_report_file(const char *path, const char *dir, const char *name, KvErr *e)
{
    KvAtomicFile af;
    if (kv_atomic_open(&af, path, e) != 0) return -1;
    if (html_report(af.f, dir, name, e) != 0) {
        kv_atomic_abort(&af);
        return -1;
    }
    return kv_atomic_commit(&af, e);
}
