/* calib_cmds.h — the kvcal sub-commands of a measured calibration: run and diff.
 *
 * Convention (as every kvcal sub-command): argv[0] is the sub-command's name ("run") and options
 * follow, i.e. kvcal_main passes (argc - 1, argv + 1); the return value is the exit code
 * (kvcal_cli.h: 0 success, 1 failure, 2 usage error, 130 interrupted).
 *   kvcal run --backend cpu|cuda --model M --db FILE [--quick] [--tp N] [--dtype fp16|bf16]
 *             [--device-name NAME] [--scratch DIR[,DIR...]] [--device N] [--dry-run]
 *   kvcal diff --db FILE RUN_A RUN_B [--tolerance 5%]   (1 also when a curve drifted)
 * `kvcal run --help`, `kvcal diff --help` list every option.
 */
#ifndef KV_CALIB_CMDS_H
#define KV_CALIB_CMDS_H

int kvcal_cmd_run(int argc, char **argv);
int kvcal_cmd_diff(int argc, char **argv);

#endif
