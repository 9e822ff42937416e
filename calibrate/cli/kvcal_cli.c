/* kvcal_cli.c — parsing, --help and error reporting shared by the kvcal sub-commands; see
 * kvcal_cli.h for the exit codes. CLI code: prints to stdout (help) and stderr (errors).
 */
#include "calibrate/cli/kvcal_cli.h"

#include <stdarg.h>
#include <stdio.h>

int kvcal_cli_begin(const OptCmd *c, int argc, char **argv, OptArgs *a)
{
    int begin = opt_begin(c, argc, argv, a); /* KVCAL_USAGE = OPT_USAGE_EXIT, KVCAL_OK = 0 */
    return begin;
}

int kvcal_cli_usage(const OptCmd *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    opt_vusage_error(c, stderr, fmt, ap);
    va_end(ap);
    return KVCAL_USAGE;
}

int kvcal_cli_fail(const OptCmd *c, const KvErr *e)
{
    fprintf(stderr, "%s: %s\n", c->prog, e->msg);
    return KVCAL_FAIL;
}

int kvcal_cli_int(const OptCmd *c, const OptArgs *a, const char *name, int64_t lo, int64_t hi, int64_t def, int64_t *out)
{
    const char *v = opt_get(a, name);
    KvErr e;
    *out = def;
    if (v && opt_int(name, v, lo, hi, out, &e) != 0) return kvcal_cli_usage(c, "%s", e.msg);
    return KVCAL_OK;
}

int kvcal_cli_flush(const OptCmd *c)
{
    if (fflush(stdout) == 0 && !ferror(stdout)) return KVCAL_OK;
    fprintf(stderr, "%s: writing to stdout failed\n", c->prog);
    return KVCAL_FAIL;
}

int kvcal_cli_paths(const OptCmd *c, const KvPathArg *in, int n_in, const KvPathArg *out, int n_out)
{
    KvErr e;
    if (kv_paths_check(in, n_in, out, n_out, &e) != 0) return kvcal_cli_usage(c, "%s", e.msg);
    return KVCAL_OK;
}
