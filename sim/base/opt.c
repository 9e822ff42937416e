/* opt.c — the table-driven option parser; see opt.h for the rules.
 *
 * Responsible for: parsing, lookups, the usage line, --help and the usage-error layout.
 * Not responsible for: values' meanings (the commands), printing anything unasked (only
 * opt_help and opt_print_error write, to the stream they are given).
 * Invariant: opt_parse fills OptArgs completely or fails with a message naming the argument.
 */
#include "sim/base/opt.h"

#include <string.h>

static int find_opt(const OptCmd *c, const char *name, size_t len)
{
    for (int k = 0; k < c->n_opts; k++)
        if (strlen(c->opts[k].name) == len && strncmp(c->opts[k].name, name, len) == 0) return k;
    return -1;
}

/* Edit distance of a[0..la) and b, capped: enough to suggest a near-miss spelling. */
static size_t edit_distance(const char *a, size_t la, const char *b)
{
    size_t lb = strlen(b);
    if (la > 63 || lb > 63) return 64;
    size_t prev[64], cur[64];
    for (size_t j = 0; j <= lb; j++) prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, (lb + 1) * sizeof *prev);
    }
    return prev[lb];
}

static int unknown_option(const OptCmd *c, const char *arg, size_t len, KvErr *e)
{
    int best = -1;
    size_t best_d = 3; /* suggest only within two edits, or a prefix of 3+ characters */
    for (int k = 0; k < c->n_opts; k++) {
        const char *n = c->opts[k].name;
        size_t d = edit_distance(arg, len, n);
        if (len >= 5 && strncmp(n, arg, len) == 0) d = 1; /* "--pol" → --policy */
        if (d < best_d) {
            best_d = d;
            best = k;
        }
    }
    if (best >= 0) return kv_err(e, "unknown option '%s' (did you mean %s?)", arg, c->opts[best].name);
    return kv_err(e, "unknown option '%s'", arg);
}

int opt_parse(const OptCmd *c, int argc, char **argv, OptArgs *a, KvErr *e)
{
    memset(a, 0, sizeof *a);
    a->cmd = c;
    if (argc > OPT_MAX_ARGS) return kv_err(e, "too many arguments (%d; at most %d)", argc - 1, OPT_MAX_ARGS - 1);
    int only_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (only_pos || arg[0] != '-' || arg[1] == '\0') {
            if (a->n_pos >= c->pos_max) return kv_err(e, "unexpected argument '%s'", arg);
            a->pos[a->n_pos++] = arg;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            only_pos = 1;
            continue;
        }
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            a->help = 1;
            return 0;
        }
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        int k = arg[1] == '-' ? find_opt(c, arg, len) : -1;
        if (k < 0) return unknown_option(c, arg, len, e);
        const OptSpec *o = &c->opts[k];
        const char *value = NULL;
        if (!o->arg) {
            if (eq) return kv_err(e, "option %s takes no value (got '%s')", o->name, arg);
        } else if (eq) {
            value = eq + 1;
        } else {
            if (i + 1 >= argc) return kv_err(e, "option %s needs a value (%s)", o->name, o->arg);
            value = argv[++i];
            if (strncmp(value, "--", 2) == 0)
                return kv_err(e, "option %s expects a value (%s), got the option %s (write %s=%s if that is the value)",
                              o->name, o->arg, value, o->name, value);
        }
        if (value && !value[0]) return kv_err(e, "option %s: empty value (expected %s)", o->name, o->arg);
        if (!(o->flags & OPT_REPEAT) && opt_count(a, o->name) > 0) return kv_err(e, "option %s given twice", o->name);
        a->hits[a->n_hits].opt = k;
        a->hits[a->n_hits].value = value;
        a->n_hits++;
    }
    for (int k = 0; k < c->n_opts; k++)
        if ((c->opts[k].flags & OPT_REQUIRED) && opt_count(a, c->opts[k].name) == 0)
            return kv_err(e, "%s is required (%s%s%s)", c->opts[k].name, c->opts[k].arg ? c->opts[k].arg : "",
                          c->opts[k].arg ? ": " : "", c->opts[k].help);
    if (a->n_pos < c->pos_min) return kv_err(e, "missing arguments: expected %s", c->pos_names ? c->pos_names : "more");
    return 0;
}

const char *opt_get(const OptArgs *a, const char *name)
{
    for (int i = a->n_hits - 1; i >= 0; i--)
        if (strcmp(a->cmd->opts[a->hits[i].opt].name, name) == 0) return a->hits[i].value;
    return NULL;
}

int opt_count(const OptArgs *a, const char *name)
{
    int n = 0;
    for (int i = 0; i < a->n_hits; i++) n += strcmp(a->cmd->opts[a->hits[i].opt].name, name) == 0;
    return n;
}

const char *opt_hit_name(const OptArgs *a, int i) { return a->cmd->opts[a->hits[i].opt].name; }

int opt_int(const char *name, const char *value, int64_t lo, int64_t hi, int64_t *out, KvErr *e)
{
    KvErr ignored;
    int64_t v = 0;
    if (!value || kv_parse_i64(value, &v, &ignored) != 0 || v < lo || v > hi)
        return kv_err(e, "%s: expected an integer in %lld..%lld, got '%s'", name, (long long)lo, (long long)hi,
                      value ? value : "");
    *out = v;
    return 0;
}

static size_t add(char *buf, size_t len, size_t used, const char *s1, const char *s2, const char *s3)
{
    if (used >= len) return used;
    int n = snprintf(buf + used, len - used, "%s%s%s", s1, s2 ? s2 : "", s3 ? s3 : "");
    return n < 0 ? used : used + (size_t)n;
}

void opt_usage(const OptCmd *c, char *buf, size_t len)
{
    if (len == 0) return;
    buf[0] = '\0';
    size_t used = add(buf, len, 0, c->prog, NULL, NULL);
    int optional = 0;
    for (int k = 0; k < c->n_opts; k++) {
        const OptSpec *o = &c->opts[k];
        if (!(o->flags & OPT_REQUIRED)) {
            optional++;
            continue;
        }
        used = add(buf, len, used, " ", o->name, NULL);
        if (o->arg) used = add(buf, len, used, " ", o->arg, NULL);
    }
    if (optional > 4) {
        used = add(buf, len, used, " [options]", NULL, NULL);
    } else {
        for (int k = 0; k < c->n_opts; k++) {
            const OptSpec *o = &c->opts[k];
            if (o->flags & OPT_REQUIRED) continue;
            used = add(buf, len, used, " [", o->name, o->arg ? " " : "");
            used = add(buf, len, used, o->arg ? o->arg : "", "]", NULL);
        }
    }
    if (c->pos_names) add(buf, len, used, " ", c->pos_names, NULL);
}

void opt_help(const OptCmd *c, FILE *out)
{
    char usage[1024];
    opt_usage(c, usage, sizeof usage);
    fprintf(out, "usage: %s\n", usage);
    if (c->about && c->about[0]) fprintf(out, "\n%s%s", c->about, c->about[strlen(c->about) - 1] == '\n' ? "" : "\n");
    enum { COL = 22 };
    fprintf(out, "\noptions:\n");
    for (int k = 0; k < c->n_opts; k++) {
        const OptSpec *o = &c->opts[k];
        char left[128];
        snprintf(left, sizeof left, "%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
        const char *tag = (o->flags & OPT_REQUIRED) ? " (required)" : (o->flags & OPT_REPEAT) ? " (repeatable)" : "";
        if (strlen(left) <= COL - 2) fprintf(out, "  %-*s%s%s\n", COL, left, o->help, tag);
        else fprintf(out, "  %s\n  %-*s%s%s\n", left, COL, "", o->help, tag);
    }
    fprintf(out, "  %-*s%s\n", COL, "-h, --help", "this help");
    fprintf(out, "\nValues follow as the next argument or after '=' (--opt VALUE, --opt=VALUE); -- ends the options.\n");
}

void opt_print_error(const OptCmd *c, const char *msg, FILE *out)
{
    char usage[1024];
    opt_usage(c, usage, sizeof usage);
    fprintf(out, "%s: %s\nusage: %s\n(%s --help lists every option)\n", c->prog, msg, usage, c->prog);
}

int opt_vusage_error(const OptCmd *c, FILE *out, const char *fmt, va_list ap)
{
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    opt_print_error(c, msg, out);
    return OPT_USAGE_EXIT;
}

void opt_short_jobs(int argc, char **argv)
{
    static char jobs_eq[48];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--")) return;
        if (!strcmp(argv[i], "-j")) argv[i] = (char *)"--jobs";
        else if (!strncmp(argv[i], "-j", 2) && argv[i][2] >= '0' && argv[i][2] <= '9' && strlen(argv[i]) < 32) {
            snprintf(jobs_eq, sizeof jobs_eq, "--jobs=%s", argv[i] + 2);
            argv[i] = jobs_eq;
        }
    }
}

int opt_begin(const OptCmd *c, int argc, char **argv, OptArgs *a)
{
    KvErr e;
    if (opt_parse(c, argc, argv, a, &e) != 0) {
        opt_print_error(c, e.msg, stderr);
        return OPT_USAGE_EXIT;
    }
    if (!a->help) return -1;
    opt_help(c, stdout);
    return 0;
}
