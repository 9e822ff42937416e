/* resfile.h — a SimResult written to a file and read back by another process of the same build:
 * how a worker process (sim/cli/procpool) hands its run's result to the parent.
 *
 * Responsible for: a self-checking binary record of one SimResult (a magic word, the struct's
 * size, its bytes, then each histogram's non-zero buckets), and reading it back into a SimResult
 * that owns fresh histogram buckets.
 * Not responsible for: a stable or portable format — a record is read only by the binary that
 * wrote it, within one run (a different struct size or magic is refused, never misread); the
 * files' names or lifetime (the caller's).
 * Invariants: a record read back equals the result written, field for field and bucket for
 * bucket (so reports from it are byte-identical to reports from the original); a failed read
 * leaves *r zeroed (nothing to free).
 * Complexity: O(sizeof SimResult + non-zero buckets) per record.
 */
#ifndef KV_RESFILE_H
#define KV_RESFILE_H

#include <stdio.h>

#include "sim/engine/sim.h"

/* Append the record of r at f's position. */
int resfile_write(FILE *f, const SimResult *r, KvErr *e);
/* Read one record at f's position into *r (origin names the file in messages). */
int resfile_read(FILE *f, const char *origin, SimResult *r, KvErr *e);

#endif
