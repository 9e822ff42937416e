/* profile_cmds.h — the kvcal sub-commands for public measured profiles:
 *
 *   kvcal import-profile --db FILE [--hardware FILE] [--models FILE] MANIFEST...
 *       read each profile (calibrate/import_profile.h) into FILE as a measured run, plus a spec run
 *       of the ops its source does not measure.
 *   kvcal fidelity [--hardware FILE] [--models FILE] MANIFEST...
 *       the spec roofline's error against each profile's measured rows, per op family (fidelity.h).
 *
 * Responsible for: options, loading the catalogs (and a hardware overlay for GPUs the catalog
 * lacks), printing what was imported. Not responsible for the formats (import_profile.c).
 * argv[0] is the sub-command's name; the return value is the exit code (kvcal_cli.h).
 */
#ifndef KV_PROFILE_CMDS_H
#define KV_PROFILE_CMDS_H

int kvcal_cmd_import_profile(int argc, char **argv);
int kvcal_cmd_fidelity(int argc, char **argv);

#endif
