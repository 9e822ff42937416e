/* store_cmds.h — the kvcal sub-commands that work on a cost store (store.h): show, export, import.
 *
 * Responsible for: option parsing, the tables `show` prints, choosing the output (file written
 * atomically, or stdout), detecting whether an import is a SQL dump or a CSV export.
 * Not responsible for: the store itself (store.c) or dispatching sub-commands (kvcal_main.c).
 *
 * Convention for every function: argv[0] is the sub-command's own name ("show", ...) and options
 * follow, i.e. kvcal_main passes (argc - 1, argv + 1). The return value is the process exit code:
 * 0 success (also for --help), 1 failure (message on stderr), 2 usage error (unknown option,
 * missing or repeated option, bad value; the message names it), as kvcal_cli.h says. Options are
 * parsed by sim/base/opt.h from each command's table: a value follows as the next argument or
 * after '=' (--db FILE, --db=FILE); `--` ends the options; --help lists every option.
 *
 *   kvcal show   --db FILE [--run ID] [--op OP]
 *   kvcal export --db FILE [--run ID] --format csv|json|sql [--out FILE]
 *   kvcal import --db FILE INPUT            (INPUT: a .sql dump or a .csv export)
 */
#ifndef KV_STORE_CMDS_H
#define KV_STORE_CMDS_H

int kvcal_cmd_show(int argc, char **argv);
int kvcal_cmd_export(int argc, char **argv);
int kvcal_cmd_import(int argc, char **argv);
/* What a file to import holds, from its first line or its name: 1 a kvsim SQL dump, 2 a CSV
 * export, 0 neither (kvcal import, and kvcal diff's FILE arguments). */
int kvcal_input_kind(const char *path, const char *text);

#endif
