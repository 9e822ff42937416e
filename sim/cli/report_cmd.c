/* report_cmd.c — see report_cmd.h. */
#include "sim/cli/report_cmd.h"

#include <stdio.h>
#include <sys/stat.h>

#include "results/html.h"
#include "sim/base/opt.h"

static const OptSpec k_opts[] = {
    {"--out", "FILE", 0, "where the page goes (default: DIR/report.html)"},
};
static const OptCmd k_cmd = {"kvsim report",
                             "Write report.html of a result directory: the verdict, the tables (sortable), every figure, the "
                             "inputs and their hashes, the warnings; one self-contained page, no network.",
                             k_opts, (int)KV_ARRAY_LEN(k_opts), "DIR", 1, 1};

int report_main(int argc, char **argv)
{
    OptArgs a;
    KvErr e;
    int begin = opt_begin(&k_cmd, argc, argv, &a);
    if (begin >= 0) return begin;
    const char *dir = a.pos[0], *out = opt_get(&a, "--out");
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "kvsim report: %s: not a directory (expected a result directory: kvsim run/compare/plan/map --out, "
                        "kvsim plot --sweep --out)\n", dir);
        return 1;
    }
    char path[4400];
    snprintf(path, sizeof path, "%s/report.html", dir);
    if (!out) out = path;
    if (html_report_file(out, dir, dir, &e) != 0) {
        fprintf(stderr, "kvsim report: %s\n", e.msg);
        return 1;
    }
    fprintf(stderr, "report in %s\n", out);
    return 0;
}
