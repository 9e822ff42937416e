/* execute_cmd.h — the kvcal execute sub-command (argv[0] is "execute"; returns the exit code).
 *   kvcal execute --schedule FILE --out DIR [--model M] [--reps R] [--dir SCRATCH] [--no-pin]
 *   0 replayed (DIR/execute.json written, the table printed), 1 failure, 2 usage error.
 * The replay is calibrate/execute.h's; the schedule format calibrate/schedule.h's.
 */
#ifndef KV_EXECUTE_CMD_H
#define KV_EXECUTE_CMD_H

int kvcal_cmd_execute(int argc, char **argv);

#endif
