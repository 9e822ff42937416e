/* report_cmd.h — `kvsim report DIR [--out FILE]`: report.html of an existing result directory (a
 * run's, a compare's, a sweep's figures from `kvsim plot --sweep`, a plan's, reproduce's), without
 * simulating (results/html.h). The page goes to DIR/report.html unless --out names another file;
 * written aside, then renamed into place.
 * Responsible for: the options and the message. Exit status 0, 1 (files), 2 (usage).
 */
#ifndef KV_REPORT_CMD_H
#define KV_REPORT_CMD_H

int report_main(int argc, char **argv);

#endif
