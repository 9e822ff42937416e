/* kvcal_cli.h — what every kvcal sub-command does with its command line: parse it with its option
 * table (sim/base/opt.h), answer --help, and report errors with one layout and one exit code per
 * kind of error.
 *
 * Responsible for: the exit codes of every kvcal command —
 *   0 success (also after --help);
 *   1 failure: the work could not be done (a file, a store, a run id or a name looked up in the
 *     model/hardware catalogs that is not there, a device, a measurement), or a check it made
 *     failed (diff: drift beyond the tolerance; validate: a ratio outside --max-error);
 *   2 usage error: the command line is wrong (unknown, missing or repeated option, a value of the
 *     wrong form: not an integer in range, not one of a fixed set of choices);
 *   130 interrupted (kvcal run, SIGINT/SIGTERM; the run is rolled back);
 * and the message layout: "kvcal CMD: message" on stderr (usage errors add the usage line).
 * Not responsible for: the commands' work (calib_cmds.c, validate_cmd.c, store_cmds.c, kvcal_main.c).
 */
#ifndef KV_KVCAL_CLI_H
#define KV_KVCAL_CLI_H

#include <stdint.h>

#include "sim/base/opt.h"
#include "sim/base/util.h"

enum { KVCAL_OK = 0, KVCAL_FAIL = 1, KVCAL_USAGE = 2, KVCAL_INTERRUPTED = 130 };

/* Parse argv (argv[0]: the sub-command) with c: -1 when the command should go on, else the exit
 * code (0 after printing --help to stdout, 2 after printing the usage error to stderr). */
int kvcal_cli_begin(const OptCmd *c, int argc, char **argv, OptArgs *a);
/* Print a usage error (message, usage line) to stderr; returns 2. */
int kvcal_cli_usage(const OptCmd *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print "PROG: e->msg" to stderr; returns 1. */
int kvcal_cli_fail(const OptCmd *c, const KvErr *e);
/* The integer option `name` in lo..hi, or def when not given: 0, or 2 after printing the error. */
int kvcal_cli_int(const OptCmd *c, const OptArgs *a, const char *name, int64_t lo, int64_t hi, int64_t def, int64_t *out);
/* Before a command writes anything: none of its outputs is one of its inputs or another output
 * (util.h kv_paths_check): 0, or 2 after printing the usage error naming both. */
int kvcal_cli_paths(const OptCmd *c, const KvPathArg *in, int n_in, const KvPathArg *out, int n_out);
/* Flush stdout: 0, or 1 after printing "PROG: writing to stdout failed". */
int kvcal_cli_flush(const OptCmd *c);

#endif
