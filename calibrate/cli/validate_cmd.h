/* validate_cmd.h — the kvcal validate sub-command (argv[0] is "validate"; returns the exit code).
 *   kvcal validate --db COSTS --model M [--layers K] [--tokens N] [--dir SCRATCH]
 *                  [--device-name cpu] [--reps R] [--max-error 50%]
 *   0 done (and within --max-error), 1 a ratio outside --max-error or a failure, 2 usage error.
 * The measurement and the prediction are calibrate/validate.h's.
 */
#ifndef KV_VALIDATE_CMD_H
#define KV_VALIDATE_CMD_H

int kvcal_cmd_validate(int argc, char **argv);

#endif
