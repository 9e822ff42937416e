/* opt.h — the command-line option parser of kvsim and kvcal: one table of options per command.
 *
 * Responsible for: turning a command's argv into its options and positional arguments under the
 * table's rules, and writing the command's --help from the same table (so the help and the parser
 * cannot drift apart). The rules, the same for every command of both programs:
 *   - options are long (--name); a value follows as the next argument or after '=' (--out DIR,
 *     --out=DIR); an option that takes no value refuses "=value";
 *   - a value given as the next argument may not look like an option (start with "--"):
 *     `--out --quiet` is refused ("option --out expects a value (DIR), got the option --quiet");
 *     the '=' spelling takes its value verbatim (--out=--odd-name);
 *   - an option without OPT_REPEAT may be given once; OPT_REQUIRED ones must be given;
 *     an empty value is refused;
 *   - `--` ends the options: everything after it is positional; `-h` and `--help` ask for the
 *     help (OptArgs.help; nothing after it is checked);
 *   - any other argument starting with '-' (except "-" alone) is an unknown option; other
 *     arguments are positional, pos_min..pos_max of them.
 * Not responsible for: the meaning or the form of values (opt_int helps with integers), options
 * that require one another (the command checks those), printing errors (the caller does, with
 * opt_print_error) or exiting.
 * Errors name the option and what was wrong; they are returned in a KvErr, never printed.
 * Complexity: O(argc × options) per parse; no allocation (OptArgs holds OPT_MAX_ARGS entries).
 */
#ifndef KV_OPT_H
#define KV_OPT_H

#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>

#include "sim/base/util.h"

#define OPT_MAX_ARGS 256 /* arguments of one command line; more is an error */

enum { OPT_REQUIRED = 1, OPT_REPEAT = 2 };

typedef struct OptSpec {
    const char *name; /* with its dashes: "--out" */
    const char *arg;  /* the value's name in help and messages ("DIR"); NULL: takes no value */
    int flags;        /* OPT_REQUIRED | OPT_REPEAT */
    const char *help; /* one line (wrapped by the help writer only at '\n') */
} OptSpec;

typedef struct OptCmd {
    const char *prog;      /* "kvsim run": the first word of messages and of the usage line */
    const char *about;     /* text after the usage line in --help (may be NULL) */
    const OptSpec *opts;
    int n_opts;
    const char *pos_names; /* positionals in the usage line ("RUN_A RUN_B"); NULL: none */
    int pos_min, pos_max;
} OptCmd;

typedef struct OptHit {
    int opt;           /* index in OptCmd.opts */
    const char *value; /* NULL for an option without a value */
} OptHit;

typedef struct OptArgs {
    const OptCmd *cmd;
    OptHit hits[OPT_MAX_ARGS]; /* the options given, in command-line order */
    int n_hits;
    const char *pos[OPT_MAX_ARGS];
    int n_pos;
    int help; /* --help or -h was given: the rest was not checked */
} OptArgs;

/* Parse argv[1..argc-1] (argv[0] is the command's name) into a. 0, or -1 with the message in e. */
int opt_parse(const OptCmd *c, int argc, char **argv, OptArgs *a, KvErr *e);

/* A command's start: parse; on a usage error print it and give 2 (OPT_USAGE_EXIT); on --help print
 * the help and give 0 (the caller may print more and return it); else -1: go on. */
int opt_begin(const OptCmd *c, int argc, char **argv, OptArgs *a);

/* `-j N` and `-jN` as `--jobs N` / `--jobs=N` (the parser takes long options only): rewrites
 * argv[1..argc-1] in place, up to a "--"; a -jN's value lives in a static buffer (the last one wins,
 * as a repeated --jobs would be refused anyway). */
void opt_short_jobs(int argc, char **argv);

/* The last value of option `name` ("--out"); NULL when it was not given (or takes no value). */
const char *opt_get(const OptArgs *a, const char *name);
/* How many times `name` was given. */
int opt_count(const OptArgs *a, const char *name);
/* The name of hit i ("--set"). */
const char *opt_hit_name(const OptArgs *a, int i);

/* An integer value of option `name` in lo..hi (kv_parse_i64 syntax: 42, 10M, 64Ki); -1 with
 * "--tp: expected an integer in 1..1024, got 'x'" otherwise. */
int opt_int(const char *name, const char *value, int64_t lo, int64_t hi, int64_t *out, KvErr *e);

/* The usage line without "usage: ": prog, required options with their values, then the optional
 * ones ([--x V] each when there are at most four, else [options]), then pos_names. */
void opt_usage(const OptCmd *c, char *buf, size_t len);
/* --help: the usage line, about, and one line per option (value, help, required/repeatable). */
void opt_help(const OptCmd *c, FILE *out);
/* A usage error as the programs print it: "PROG: MSG", the usage line, a pointer to --help. */
void opt_print_error(const OptCmd *c, const char *msg, FILE *out);
/* The same with a printf-style message; returns OPT_USAGE_EXIT (2), the usage-error exit code. */
#define OPT_USAGE_EXIT 2
int opt_vusage_error(const OptCmd *c, FILE *out, const char *fmt, va_list ap);

#endif
