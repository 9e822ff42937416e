/* test_opt.c — sim/base/opt: the option parser of kvsim and kvcal (both spellings, option-looking
 * values refused, repeats, required options, `--`, positionals, unknown options, the help). */
#include <stdlib.h>
#include <string.h>

#include "sim/base/opt.h"
#include "tests/harness.h"

static const OptSpec k_opts[] = {
    {"--out", "DIR", OPT_REQUIRED, "results directory"},
    {"--set", "KEY=VALUE", OPT_REPEAT, "a setting"},
    {"--quiet", NULL, 0, "no progress"},
    {"--tokens", "N", 0, "history tokens"},
    {"--policy", "P", 0, "the policy"},
};
static const OptCmd k_cmd = {"prog cmd", "What the command does.", k_opts, (int)KV_ARRAY_LEN(k_opts), "[FILE]", 0, 1};

/* parse a NULL-terminated list of arguments after the command name */
static int parse(OptArgs *a, KvErr *e, const char *const *args)
{
    char *argv[32];
    int argc = 0;
    argv[argc++] = "cmd";
    for (int i = 0; args[i]; i++) argv[argc++] = (char *)args[i];
    memset(e->msg, 0, sizeof e->msg);
    return opt_parse(&k_cmd, argc, argv, a, e);
}

TEST(opt_both_spellings_give_the_same_values)
{
    OptArgs a, b;
    KvErr e;
    CHECK_MSG(parse(&a, &e, (const char *[]){"--out", "d", "--tokens", "12", "--quiet", NULL}) == 0, "%s", e.msg);
    CHECK_MSG(parse(&b, &e, (const char *[]){"--out=d", "--tokens=12", "--quiet", NULL}) == 0, "%s", e.msg);
    CHECK_STR(opt_get(&a, "--out"), "d");
    CHECK_STR(opt_get(&b, "--out"), "d");
    CHECK_STR(opt_get(&a, "--tokens"), "12");
    CHECK_STR(opt_get(&b, "--tokens"), "12");
    CHECK_EQ_I(opt_count(&a, "--quiet"), 1);
    CHECK_EQ_I(opt_count(&b, "--quiet"), 1);
    CHECK(opt_get(&a, "--policy") == NULL);
    CHECK_EQ_I(opt_count(&a, "--policy"), 0);
    CHECK_EQ_I(a.n_pos, 0);
    CHECK(!a.help);
    /* '=' inside the value is kept */
    CHECK(parse(&a, &e, (const char *[]){"--out", "d", "--set=a=b", NULL}) == 0);
    CHECK_STR(opt_get(&a, "--set"), "a=b");
}

TEST(opt_value_that_looks_like_an_option_is_refused)
{
    OptArgs a;
    KvErr e;
    CHECK_EQ_I(parse(&a, &e, (const char *[]){"--out", "--quiet", NULL}), -1);
    CHECK_CONTAINS(e.msg, "option --out expects a value (DIR), got the option --quiet");
    CHECK_EQ_I(parse(&a, &e, (const char *[]){"--tokens", "--", "--out", "d", NULL}), -1);
    CHECK_CONTAINS(e.msg, "--tokens expects a value");
    /* the '=' spelling takes it verbatim; a single dash value is a value */
    CHECK_MSG(parse(&a, &e, (const char *[]){"--out=--odd", "--tokens", "-5", NULL}) == 0, "%s", e.msg);
    CHECK_STR(opt_get(&a, "--out"), "--odd");
    CHECK_STR(opt_get(&a, "--tokens"), "-5");
}

TEST(opt_missing_and_empty_values_and_flags_with_values)
{
    OptArgs a;
    KvErr e;
    CHECK_EQ_I(parse(&a, &e, (const char *[]){"--out", NULL}), -1);
    CHECK_CONTAINS(e.msg, "option --out needs a value (DIR)");
    CHECK_EQ_I(parse(&a, &e, (const char *[]){"--out=", NULL}), -1);
    CHECK_CONTAINS(e.msg, "option --out: empty value");
    CHECK_EQ_I(parse(&a, &e, (const char *[]){"--out", "d", "--quiet=1", NULL}), -1);
    CHECK_CONTAINS(e.msg, "option --quiet takes no value");
}

TEST(opt_repeats_refused_unless_repeatable)
{
    OptArgs a;
    KvErr e;
    CHECK_EQ_I(parse(&a, &e, (const char *[]){"--out", "a", "--out", "b", NULL}), -1);
    CHECK_CONTAINS(e.msg, "option --out given twice");
    CHECK_EQ_I(parse(&a, &e, (const char *[]){"--out", "a", "--quiet", "--quiet", NULL}), -1);
    CHECK_CONTAINS(e.msg, "option --quiet given twice");
    CHECK_EQ_I(parse(&a, &e, (const char *[]){"--out=a", "--out=b", NULL}), -1);
    /* repeatable: every value, in command-line order, interleaved with the others */
    CHECK_MSG(parse(&a, &e, (const char *[]){"--set", "x=1", "--out", "d", "--set=y=2", NULL}) == 0, "%s", e.msg);
    CHECK_EQ_I(opt_count(&a, "--set"), 2);
    CHECK_EQ_I(a.n_hits, 3);
    CHECK_STR(opt_hit_name(&a, 0), "--set");
    CHECK_STR(a.hits[0].value, "x=1");
    CHECK_STR(opt_hit_name(&a, 1), "--out");
    CHECK_STR(a.hits[2].value, "y=2");
    CHECK_STR(opt_get(&a, "--set"), "y=2"); /* the last one */
}

TEST(opt_required_options)
{
    OptArgs a;
    KvErr e;
    CHECK_EQ_I(parse(&a, &e, (const char *[]){"--quiet", NULL}), -1);
    CHECK_CONTAINS(e.msg, "--out is required (DIR: results directory)");
    CHECK_EQ_I(parse(&a, &e, (const char *[]){NULL}), -1);
    CHECK_CONTAINS(e.msg, "--out is required");
    /* --help needs nothing else */
    CHECK(parse(&a, &e, (const char *[]){"--help", NULL}) == 0 && a.help);
    CHECK(parse(&a, &e, (const char *[]){"--quiet", "-h", "--bogus", NULL}) == 0 && a.help);
}

TEST(opt_double_dash_ends_options_and_positionals)
{
    OptArgs a;
    KvErr e;
    CHECK_MSG(parse(&a, &e, (const char *[]){"--out", "d", "--", "--quiet", NULL}) == 0, "%s", e.msg);
    CHECK_EQ_I(a.n_pos, 1);
    CHECK_STR(a.pos[0], "--quiet");
    CHECK_EQ_I(opt_count(&a, "--quiet"), 0);
    CHECK_MSG(parse(&a, &e, (const char *[]){"file.csv", "--out", "d", NULL}) == 0, "%s", e.msg);
    CHECK_STR(a.pos[0], "file.csv");
    CHECK_MSG(parse(&a, &e, (const char *[]){"-", "--out", "d", NULL}) == 0, "%s", e.msg); /* "-" is positional */
    CHECK_STR(a.pos[0], "-");
    CHECK_EQ_I(parse(&a, &e, (const char *[]){"a", "b", "--out", "d", NULL}), -1);
    CHECK_CONTAINS(e.msg, "unexpected argument 'b'");
    CHECK_EQ_I(parse(&a, &e, (const char *[]){"--out", "d", "--", "a", "b", NULL}), -1);
    CHECK_CONTAINS(e.msg, "unexpected argument 'b'");
    /* too few positionals */
    static const OptCmd two = {"prog diff", NULL, k_opts, 1, "RUN_A RUN_B", 2, 2};
    char *argv[] = {"diff", "--out", "d", "1"};
    CHECK_EQ_I(opt_parse(&two, 4, argv, &a, &e), -1);
    CHECK_CONTAINS(e.msg, "RUN_A RUN_B");
}

TEST(opt_unknown_options_are_named_with_a_suggestion)
{
    OptArgs a;
    KvErr e;
    CHECK_EQ_I(parse(&a, &e, (const char *[]){"--out", "d", "--frobnicate", NULL}), -1);
    CHECK_STR(e.msg, "unknown option '--frobnicate'");
    CHECK_EQ_I(parse(&a, &e, (const char *[]){"--out", "d", "--polcy", "x", NULL}), -1);
    CHECK_STR(e.msg, "unknown option '--polcy' (did you mean --policy?)");
    CHECK_EQ_I(parse(&a, &e, (const char *[]){"--out", "d", "--tok=3", NULL}), -1);
    CHECK_CONTAINS(e.msg, "unknown option '--tok=3'");
    CHECK_EQ_I(parse(&a, &e, (const char *[]){"-x", NULL}), -1);
    CHECK_STR(e.msg, "unknown option '-x'");
}

TEST(opt_int_values)
{
    KvErr e;
    int64_t v = 0;
    CHECK(opt_int("--tp", "8", 1, 1024, &v, &e) == 0 && v == 8);
    CHECK(opt_int("--requests", "10M", 1, INT64_MAX, &v, &e) == 0 && v == 10000000);
    CHECK_EQ_I(opt_int("--tp", "0", 1, 1024, &v, &e), -1);
    CHECK_STR(e.msg, "--tp: expected an integer in 1..1024, got '0'");
    CHECK_EQ_I(opt_int("--tp", "two", 1, 1024, &v, &e), -1);
    CHECK_CONTAINS(e.msg, "got 'two'");
}

TEST(opt_help_lists_every_option_and_the_usage_line)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/help.txt", test_tmpdir(t));
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    opt_help(&k_cmd, f);
    opt_print_error(&k_cmd, "something wrong", f);
    fclose(f);
    KvErr e;
    char *h = kv_read_file(path, NULL, &e);
    CHECK(h != NULL);
    CHECK_CONTAINS(h, "usage: prog cmd --out DIR [--set KEY=VALUE] [--quiet] [--tokens N] [--policy P] [FILE]\n");
    CHECK_CONTAINS(h, "What the command does.");
    for (size_t i = 0; i < KV_ARRAY_LEN(k_opts); i++) {
        char line[256];
        snprintf(line, sizeof line, "  %s%s%s", k_opts[i].name, k_opts[i].arg ? " " : "", k_opts[i].arg ? k_opts[i].arg : "");
        CHECK_CONTAINS(h, line);
        CHECK_CONTAINS(h, k_opts[i].help);
    }
    CHECK_CONTAINS(h, "results directory (required)");
    CHECK_CONTAINS(h, "a setting (repeatable)");
    CHECK_CONTAINS(h, "-h, --help");
    CHECK_CONTAINS(h, "prog cmd: something wrong\nusage: prog cmd --out DIR");
    free(h);
    /* more than four optional options: [options] */
    static const OptSpec many[] = {{"--a", NULL, 0, "a"}, {"--b", NULL, 0, "b"}, {"--c", NULL, 0, "c"},
                                   {"--d", NULL, 0, "d"}, {"--e", "E", OPT_REQUIRED, "e"}, {"--f", NULL, 0, "f"}};
    static const OptCmd mc = {"p", NULL, many, 6, NULL, 0, 0};
    char u[256];
    opt_usage(&mc, u, sizeof u);
    CHECK_STR(u, "p --e E [options]");
}

TEST(opt_too_many_arguments)
{
    static char *argv[OPT_MAX_ARGS + 2];
    argv[0] = "cmd";
    for (int i = 1; i < OPT_MAX_ARGS + 2; i++) argv[i] = "x";
    OptArgs a;
    KvErr e;
    CHECK_EQ_I(opt_parse(&k_cmd, OPT_MAX_ARGS + 2, argv, &a, &e), -1);
    CHECK_CONTAINS(e.msg, "too many arguments");
}
